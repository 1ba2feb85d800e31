"""Are the intervals honest? Exact leave-one-out / leave-one-group-out refits, the
original deterministic estimator refit on the same folds, and simulation-based calibration.

Every fold is a full NUTS fit with the production settings. The model is compiled once per
process: held-out rows get likelihood weight 0 and simulated data replace the observed
values through ``nutpie``'s ``with_data`` (as recomputed per-configuration sufficient
statistics, :func:`refit_data`), so a fold costs only its sampling time. Folds and
SBC replicates are independent tasks dispatched through joblib (``--jobs N`` processes on
this machine, or a dask.distributed cluster with ``--scheduler ADDRESS``).
"""

from __future__ import annotations

import hashlib
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ddtree_bayes.core.acceptance_latent import group_key
from ddtree_bayes.core.config import DEFAULT_SEED, PriorsConfig, SamplerSettings, parse_priors
from ddtree_bayes.core.data import Measurement, Measurements, load_hardware, load_measurements
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine import fitted_rows as M
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.ceiling import capped, read_ceiling
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.refit import refit_data
from ddtree_bayes.workflows.baseline import baseline_fit, pair_roofline_of  # noqa: F401

GROUP_KEYS = ("hardware", "engine", "method", "budget", "model", "pair")
#: The original estimator's flat band.
BASELINE_BAND = 0.30


# ------------------------------------------------------------------ tasks
@dataclass(frozen=True)
class Inputs:
    """Everything a worker needs to rebuild the model (plain text: cheap to ship)."""

    data_csv: str
    priors_toml: str
    hardware_csv: str
    data_name: str = "measurements.csv"
    models_csv: str = ""    # model cards (roofline form); "" = the bundled data/models.csv
    drafters_csv: str = ""  # the user's own drafter cards over the built-in ones; "" = none

    @property
    def key(self) -> str:
        h = hashlib.sha256()
        for part in (self.data_csv, self.priors_toml, self.hardware_csv, self.models_csv,
                     self.drafters_csv):
            h.update(hashlib.sha256(part.encode()).digest())
        return h.hexdigest()

    def structure(self) -> dict:
        """``build_spec``'s hardware table, model cards and drafter cards."""
        from ddtree_bayes.core.drafters import drafter_table
        from ddtree_bayes.core.model_cards import load_model_cards
        from ddtree_bayes.core.paths import bundled

        cards = (load_model_cards("models.csv", text=self.models_csv) if self.models_csv
                 else load_model_cards(bundled("models.csv")))
        drafters = (drafter_table("drafters.csv", self.drafters_csv) if self.drafters_csv
                    else drafter_table())
        return {"hardware": load_hardware("hardware.csv", text=self.hardware_csv), "cards": cards,
                "drafters": drafters}

    def parse(self) -> tuple[Measurements, PriorsConfig]:
        hw = load_hardware("hardware.csv", text=self.hardware_csv)
        priors = parse_priors(self.priors_toml, "priors", stored=True)
        return (load_measurements(self.data_name, hw, text=self.data_csv,
                                  methods=priors.methods), priors)


def card_texts(workdir: str | Path | None = None) -> dict[str, str]:
    """:class:`Inputs`' card texts of a working directory (``models_csv``, ``drafters_csv``):
    the cards its ``fit`` would use."""
    from ddtree_bayes.core import paths

    own = paths.own_data_file("drafters.csv", workdir)
    return {"models_csv": paths.data_file("models.csv", workdir).read_text(),
            "drafters_csv": own.read_text() if own else ""}


@dataclass(frozen=True)
class Fold:
    name: str
    held_out: tuple[int, ...]   # positions in the measurement list
    #: held-out rows not predicted, (position, why): :func:`prior_only_rows`
    skipped: tuple[tuple[int, str], ...] = ()

    @property
    def scored(self) -> tuple[int, ...]:
        """The held-out rows the fold predicts and scores."""
        skipped = {i for i, _ in self.skipped}
        return tuple(i for i in self.held_out if i not in skipped)


def blank_groups(data: Measurements) -> Counter:
    """How many rows without accept_len each acceptance group (model, method, drafter, block,
    budget: core/acceptance_latent.py) holds: the rows that infer its acceptance."""
    return Counter(_acceptance_group(m) for m in data.rows if m.accept_len is None)


def _acceptance_group(m: Measurement) -> tuple:
    return group_key(m.model, m.method, m.block, m.verify_tokens, m.drafter)


def prior_only_rows(data: Measurements, held_out: Iterable[int],
                    blank: Counter | None = None) -> list[tuple[int, str]]:
    """The rows of ``held_out`` (positions in ``data.rows``) whose acceptance a refit without
    them would give by its prior alone, with why: no accept_len, and no row of their
    acceptance group (model, method, drafter, block, budget: core/acceptance_latent.py) left in
    training, the rows that infer a group's acceptance being those without accept_len. They
    are not scored, in any mode (``--keep-ar`` skipped them first): their intervals are the
    prior's acceptance, not a test of the fit. ``blank``: :func:`blank_groups` of ``data``,
    counted once for many folds (each call counting every row made leave-one-out's folds
    quadratic in the rows: 4.2 s for 5,440)."""
    blank = blank_groups(data) if blank is None else blank
    held = [(i, data.rows[i]) for i in held_out]
    gone = Counter(_acceptance_group(m) for _, m in held if m.accept_len is None)
    out = []
    for i, m in held:
        if m.accept_len is None and blank[_acceptance_group(m)] == gone[_acceptance_group(m)]:
            out.append((i, f"row {m.row} ({m.method} M={m.verify_tokens}): no accept_len and no "
                           "training row of its acceptance group (model, method, block, budget) "
                           "left: its acceptance would be the prior"))
    return out


@dataclass
class FoldResult:
    fold: str
    seconds: float
    converged: bool
    failures: list[str]
    rows: list[dict] = field(default_factory=list)
    remedy: int | None = None   # the remedy ladder's rung that passed (None: none needed)


_COMPILED: dict[str, tuple] = {}


def _compiled(inputs: Inputs):
    """(spec, priors, measurements, compiled nutpie model, its number of free parameters),
    cached per process."""
    if inputs.key not in _COMPILED:
        from ddtree_bayes.core import spec as S
        from ddtree_bayes.engine import callbacks
        from ddtree_bayes.engine.model import build_model
        from ddtree_bayes.engine.remedies import free_size

        data, cfg = inputs.parse()
        spec = S.build_spec(data, cfg, **inputs.structure())
        model = build_model(spec, cfg, refittable=True)
        compiled = callbacks.compile_model(model)   # cached by its data's layout (callbacks.py)
        _COMPILED.clear()
        _COMPILED[inputs.key] = (spec, cfg, data, compiled, free_size(model))
    return _COMPILED[inputs.key]


def sample_weighted(inputs: Inputs, weights: np.ndarray, seed: int,
                    settings: SamplerSettings, observed: np.ndarray | None = None,
                    cores: int = 1, remedy: bool = False):
    """NUTS on the compiled model with row weights (and optionally other observed values);
    with ``remedy`` the remedy ladder's rungs 1-2 on failed gates (``draws.meta["remedy"]``:
    the rung that passed, or None).

    Returns (Fit, failures): in-memory draws usable by :mod:`predictive`, and the
    convergence gates that failed (empty when converged).
    """
    from ddtree_bayes.engine import inference
    from ddtree_bayes.engine import remedies as R

    spec, cfg, data, compiled, n_free = _compiled(inputs)
    model = compiled.with_data(**refit_data(spec, weights, observed))
    settings = settings.for_model(n_free)

    def attempt(s: SamplerSettings, parameterisation: str) -> R.Attempt:
        dt = inference.run_nutpie(model, draws=s.n_draws, tune=s.tune, chains=s.chains,
                                  cores=cores, seed=seed, target_accept=s.target_accept,
                                  save_warmup=False, progress_bar=False)
        rows, divergences, failed = inference.diagnose(dt["posterior"].to_dataset(),
                                                       dt["sample_stats"].to_dataset())
        return R.Attempt(s, parameterisation, dt, {}, "nutpie", rows, divergences, failed)

    # a fold climbs the ladder `fit` climbs, but for rung 3 (another model to compile)
    kept, record = R.run(attempt, settings, enabled=remedy, say=lambda _: None,
                         parameterisations=())
    draws = draws_in_memory(kept.dt["posterior"].to_dataset(), spec, cfg, inputs, weights)
    draws.meta["remedy"] = record["remedy"]
    return draws, kept.failures


def draws_in_memory(posterior, spec, cfg: PriorsConfig, inputs: Inputs,
                    weights: np.ndarray | None = None) -> Fit:
    """A :class:`Fit` built from a posterior Dataset without writing an artifact; ``weights``:
    the rows' likelihood weights it was sampled with (:func:`draws_meta`)."""
    variables = {}
    for name, da in posterior.data_vars.items():
        arr = np.asarray(da.values, dtype=float)
        variables[name] = arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])
    return Fit(path=Path("in-memory"), meta=draws_meta(spec, cfg, weights), variables=variables,
                 data_csv=inputs.data_csv, priors_toml=inputs.priors_toml,
                 hardware_csv=inputs.hardware_csv)


def predict_row(draws: Fit, m: Measurement, rng: np.random.Generator) -> np.ndarray:
    """Posterior predictive tok/s draws for a measured configuration (at C > 1 the total of
    its C streams, as the row measures it)."""
    sc = P.row_scenario(draws, m)
    parts, _ = P.step_components(draws, sc, rng)
    noise = parts["log_sd"] * P.predictive_noise(draws, sc, parts["log_sd"], rng)
    # a row without accept_len: the posterior of its inferred acceptance group
    accept = P.row_acceptance(draws, m, rng)
    # no faster than the read of its weights and caches (predict's cap, engine/ceiling.py)
    per_step = capped(1000.0 / parts["step"] * np.exp(noise), read_ceiling(draws, sc))
    return accept * m.concurrency * per_step


# ------------------------------------------------------------------ folds
def make_folds(data: Measurements, group: str | None) -> list[Fold]:
    """One fold per measurement (exact LOO), or per value of ``group`` (``pair``: the
    (model, system) pair, the system in a file of one model)."""
    if group is None:
        if len(data.rows) < 2:
            # (its one fold refitted the prior alone, then failed predicting it: exit 1)
            raise QueryError(f"{data.path} holds {len(data.rows)} measurement: leaving it out "
                             "leaves nothing to fit",
                             fix="validate a file of two or more measurements")
        blank = blank_groups(data)
        return [Fold(f"row {m.row}", (i,), tuple(prior_only_rows(data, (i,), blank)))
                for i, m in enumerate(data.rows)]
    if group not in GROUP_KEYS:
        raise QueryError(f"--group {group!r} is not one of {', '.join(GROUP_KEYS)}",
                         fix=f"use --group {' | '.join(GROUP_KEYS)}")
    if group == "model" and not data.multi_model:
        raise QueryError(f"--group model: {data.path} holds one model ({data.model}); leaving it "
                         "out leaves nothing to fit",
                         fix="use a file of several models, or --group pair / hardware")
    values: dict[str, list[int]] = {}
    for i, m in enumerate(data.rows):
        value = data.pair(m) if group == "pair" else str(getattr(m, group))
        values.setdefault(value, []).append(i)
    if len(values) == 1:
        # one fold holding out every row: its refit was the prior alone (minutes of sampling),
        # then predicting it failed with an internal error
        raise QueryError(f"--group {group}: every row of {data.path} has {group} "
                         f"{next(iter(values))}; leaving it out leaves nothing to fit",
                         fix="use a file with rows of another " + group + ", or validate "
                             "without --group (leave-one-out)")
    blank = blank_groups(data)
    return [Fold(f"{group}={v}", tuple(ix), tuple(prior_only_rows(data, ix, blank)))
            for v, ix in values.items()]


def refit_without(inputs: Inputs, held_out: tuple[int, ...], seed: int, settings: SamplerSettings,
                  cores: int = 1):
    """Refit with the rows at ``held_out`` given likelihood weight 0.

    Returns (draws, failed gates, the measurements, the least-squares baseline fitted on the
    training rows, the training rows). A system (pair) with no training rows left is
    predicted as never measured (hardware transfer; the pair roofline in a fit of several
    models); held-out rows do not count as measured configurations for the structured step's
    distance.
    """
    spec, cfg, data, *_ = _compiled(inputs)
    weights = np.ones(len(data.rows))
    weights[list(held_out)] = 0.0
    draws, failures = sample_weighted(inputs, weights, seed, settings, cores=cores, remedy=True)
    kept = {data.pair(m) for i, m in enumerate(data.rows) if i not in held_out}
    draws.meta["held_out_systems"] = [s for s in spec.systems if s not in kept]
    draws.meta["held_out_rows"] = [data.rows[i].row for i in held_out]
    train = [m for i, m in enumerate(data.rows) if i not in held_out]
    return (draws, failures, data, baseline_fit(train, cfg, spec.systems, label=data.pair,
                                                roofline=pair_roofline_of(spec)), train)


def scored_interval(draws: Fit, m: Measurement, rng: np.random.Generator) -> dict:
    """A held-out row's posterior predictive median, 50% and 90% intervals, and the
    percentile its measurement falls at."""
    samples = predict_row(draws, m, rng)
    q = np.quantile(samples, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {"measured": m.tok_s, "median": float(q[2]), "lo50": float(q[1]),
            "hi50": float(q[3]), "lo90": float(q[0]), "hi90": float(q[4]),
            "percentile": float(np.mean(samples < m.tok_s))}


def run_fold(inputs: Inputs, fold: Fold, seed: int, settings: SamplerSettings,
             cores: int = 1) -> FoldResult:
    """Refit without the fold's rows; predict them with the posterior and the baseline."""
    t0 = time.perf_counter()
    draws, failures, data, baseline, _ = refit_without(inputs, fold.held_out, seed, settings, cores)
    rng = np.random.default_rng(seed)
    rows = []
    for i in fold.scored:   # (not a row whose acceptance would be the prior: prior_only_rows)
        m = data.rows[i]
        base = baseline(m)   # None: the original formula needs the row's acceptance
        rows.append({**({"model": m.model} if data.multi_model else {}),
                     "row": m.row, "fold": fold.name, "system": data.pair(m), "engine": m.engine,
                     "method": m.method, "verify_tokens": m.verify_tokens,
                     "context_tokens": m.context_tokens, "concurrency": m.concurrency,
                     **scored_interval(draws, m, rng),
                     "baseline": base,
                     "baseline_lo": None if base is None else base * (1 - BASELINE_BAND),
                     "baseline_hi": None if base is None else base * (1 + BASELINE_BAND)})
    return FoldResult(fold.name, time.perf_counter() - t0, not failures, failures,
                      [{k: (float(v) if isinstance(v, np.floating) else v) for k, v in r.items()}
                       for r in rows], draws.meta["remedy"])


def dispatch(fn: Callable, tasks: list[tuple], *, jobs: int = 1, scheduler: str | None = None,
             progress: Callable[[int, int, object], None] | None = None) -> list:
    """Run ``fn(*task)`` for every task through joblib; results in task order.

    ``jobs`` worker processes on this machine (1 = in this process), or every worker of the
    dask.distributed cluster at ``scheduler`` (joblib's dask backend).
    """
    import contextlib

    from joblib import Parallel, delayed, parallel_config

    ctx: contextlib.AbstractContextManager = contextlib.nullcontext()
    client = None
    if scheduler:
        import dask
        from distributed import Client

        # (a Client makes itself dask's scheduler in the global config before it connects,
        # and one that fails to connect leaves it so: every later netCDF write in the process,
        # a fit's save through the API, failed "Requested dask.distributed scheduler but no
        # Client active")
        unset = object()
        before = dask.config.config.get("scheduler", unset)
        try:
            client = Client(scheduler)
        except (ValueError, TypeError, OSError) as err:
            if before is unset:
                dask.config.config.pop("scheduler", None)
            else:
                dask.config.config["scheduler"] = before
            # ('foo' was "internal error: ValueError: missing port number", and an address
            # nothing listens on an OSError read as a failed write to standard output)
            detail = " ".join(str(err).split()) or type(err).__name__
            raise QueryError(f"--scheduler {scheduler!r}: no dask scheduler reached there "
                             f"({detail})",
                             fix="give the address of a running dask.distributed scheduler, "
                                 "e.g. tcp://host:8786, or drop --scheduler to run the "
                                 "folds on this machine (--jobs N)") from None
        ctx = parallel_config(backend="dask")
        jobs = -1
    results = []
    try:
        with ctx:
            gen = Parallel(n_jobs=jobs, return_as="generator")(delayed(fn)(*t) for t in tasks)
            for i, res in enumerate(gen, start=1):
                results.append(res)
                if progress:
                    progress(i, len(tasks), res)
    except KeyboardInterrupt:   # SIGINT/SIGTERM: end the progress line the bar left open
        if progress and 0 < len(results) < len(tasks):
            print(file=sys.stderr, flush=True)
        raise
    finally:
        if client is not None:
            client.close()
    return results


def converged_only(refits: Iterable[tuple[str, bool, list[dict]]]
                   ) -> tuple[list[dict], dict[str, list[int]]]:
    """The rows of the refits ``(name, converged, rows)`` that passed their convergence gates,
    which the pooled scores count; and per refit that failed them, the data row numbers of its
    rows, which are listed but not pooled: a failed refit is no posterior (``predict`` refuses
    one), and its rows counted in the coverage and error as if fine."""
    counted: list[dict] = []
    unconverged: dict[str, list[int]] = {}
    for name, converged, rows in refits:
        if converged:
            counted += rows
        elif rows:
            unconverged[name] = [r["row"] for r in rows]
    return counted, unconverged


def summarize_folds(rows: list[dict]) -> dict:
    """Coverage of the 50%/90% intervals, median absolute % error of the median, and mean
    relative 90% width, for the posterior and for the baseline's +-30% band. No rows: ``n``
    0 and every score None; the baseline's too when none of the rows has an accept_len (its
    width was 0.6, of intervals never drawn, beside its null coverage and errors)."""
    if not rows:
        empty = {"coverage50": None, "coverage90": None, "mdape": None, "mape": None,
                 "mean_width90_rel": None}
        return {"n": 0, "posterior": dict(empty), "baseline": {**empty, "n": 0}}
    truth = np.array([r["measured"] for r in rows])

    def cover(lo, hi):
        return float(np.mean((np.array(lo) <= truth) & (truth <= np.array(hi))))

    med = np.array([r["median"] for r in rows])
    # the original formula cannot predict a row without accept_len: scored on the others
    has = [r for r in rows if r["baseline"] is not None]
    base = np.array([r["baseline"] for r in has])
    base_truth = np.array([r["measured"] for r in has])
    base_cover = float(np.mean([r["baseline_lo"] <= r["measured"] <= r["baseline_hi"]
                                for r in has])) if has else None
    return {
        "n": len(rows),
        "posterior": {
            "coverage50": cover([r["lo50"] for r in rows], [r["hi50"] for r in rows]),
            "coverage90": cover([r["lo90"] for r in rows], [r["hi90"] for r in rows]),
            "mdape": float(np.median(np.abs(med - truth) / truth)),
            "mape": float(np.mean(np.abs(med - truth) / truth)),
            "mean_width90_rel": float(np.mean([(r["hi90"] - r["lo90"]) / r["median"]
                                               for r in rows]))},
        "baseline": {
            "n": len(has),
            "coverage50": None,
            "coverage90": base_cover,
            "mdape": (float(np.median(np.abs(base - base_truth) / base_truth)) if has
                      else None),
            "mape": float(np.mean(np.abs(base - base_truth) / base_truth)) if has else None,
            "mean_width90_rel": 2 * BASELINE_BAND if has else None},
    }


def scores(rows: list[dict], *, baseline: bool = False) -> dict:
    """Coverage of the 50% / 90% intervals, bias (mean of ``median / measured - 1``: positive
    = optimistic), mean and median absolute relative error of the median, and mean relative 90%
    width ``(hi90 - lo90) / median``; with ``baseline`` the same of each row's ``baseline``
    and its flat +-30% (no 50% interval). No rows: ``n`` 0 and every score None."""
    if not rows:
        return {"n": 0, "coverage50": None, "coverage90": None, "bias": None, "mae": None,
                "mdae": None, "width90": None}
    truth = np.array([r["measured"] for r in rows], dtype=float)
    if baseline:
        med = np.array([r["baseline"] for r in rows], dtype=float)
        lo90, hi90 = med * (1 - BASELINE_BAND), med * (1 + BASELINE_BAND)
        lo50 = hi50 = None
    else:
        med = np.array([r["median"] for r in rows], dtype=float)
        lo90, hi90 = np.array([r["lo90"] for r in rows]), np.array([r["hi90"] for r in rows])
        lo50, hi50 = np.array([r["lo50"] for r in rows]), np.array([r["hi50"] for r in rows])
    err = med / truth - 1.0
    return {"n": len(rows),
            "coverage50": None if lo50 is None else float(np.mean((lo50 <= truth) & (truth <= hi50))),
            "coverage90": float(np.mean((lo90 <= truth) & (truth <= hi90))),
            "bias": float(np.mean(err)), "mae": float(np.mean(np.abs(err))),
            "mdae": float(np.median(np.abs(err))),
            "width90": float(np.mean((hi90 - lo90) / med))}


def validate(data_path: str | Path | None = None, priors_path: str | Path | None = None, *,
             group: str | None = None, jobs: int = 1, scheduler: str | None = None,
             seed: int = DEFAULT_SEED, settings: SamplerSettings | None = None,
             workdir: Path | None = None, progress: bool = True) -> dict:
    """Exact leave-one-out (or leave-one-group-out) validation; a JSON-ready dict."""
    from ddtree_bayes.engine.fitting import FitInputs

    # what fit refuses before sampling (a method the priors do not declare, a model
    # without a card), refused here before any fold, as fit words it
    read = FitInputs.read(data_path, priors_path, workdir=workdir).check()
    data, cfg = read.measurements, read.priors
    hw_text = read.hardware.text
    inputs = Inputs(data.text, cfg.text, hw_text, data.path, **card_texts(workdir))
    every = make_folds(data, group)
    # a fold with no row left to score is not refitted (leave-one-out of such a row)
    folds = [f for f in every if f.scored]
    skipped = [{"fold": f.name, "row": data.rows[i].row, "reason": why}
               for f in every for i, why in f.skipped]
    if not folds:
        raise QueryError(f"no held-out row of {data.path} can be scored: "
                         + "; ".join(why for f in every for _, why in f.skipped),
                         fix="write those rows' accept_len, or add rows of their acceptance "
                             "groups (model, method, block, budget) without it")
    settings = settings or SamplerSettings()
    t0 = time.perf_counter()

    def report(i, n, res):
        if progress:
            bar = "#" * int(20 * i / n)
            print(f"\r[validate] [{bar:<20}] {i}/{n} folds ({res.fold}: {res.seconds:.1f} s"
                  f"{'' if res.converged else ', NOT converged'})", end="\n" if i == n else "",
                  file=sys.stderr, flush=True)

    if progress:
        print(f"[validate] {len(folds)} folds ({'exact leave-one-out' if group is None else 'leave '
              f'one {group} out'}), {settings.chains_x_draws()} each, "
              f"{'scheduler ' + scheduler if scheduler else f'{jobs} job(s)'}"
              + (f"; {len(skipped)} held-out row(s) not scored (their acceptance would be the "
                 "prior)" if skipped else ""), file=sys.stderr)
    import os

    cores = 1 if scheduler else max(1, (os.cpu_count() or 1) // max(jobs, 1))
    results = dispatch(run_fold, [(inputs, f, seed + k, settings, cores)
                                  for k, f in enumerate(folds)],
                       jobs=jobs, scheduler=scheduler, progress=report)
    rows = [r for res in results for r in res.rows]
    counted, unconverged = converged_only((res.fold, res.converged, res.rows) for res in results)
    return {"data": str(data.path), "group": group or "row", "seed": seed,
            "settings": settings.as_dict(), "seconds": time.perf_counter() - t0,
            "folds": [{"fold": r.fold, "seconds": r.seconds, "converged": r.converged,
                       "failures": r.failures, "remedy": r.remedy} for r in results],
            "rows": rows,
            "summary": {**summarize_folds(counted),
                        "unconverged_rows": [r for held in unconverged.values() for r in held]},
            "skipped_rows": skipped}


# ------------------------------------------------------------------ SBC
#: Thinned posterior draws per replicate for the rank statistic (ranks 0..SBC_L).
SBC_L = 99
SBC_BINS = 10


def sbc_replicate(inputs: Inputs, seed: int, settings: SamplerSettings) -> dict:
    """Draw parameters from the prior, simulate the design's log tok/s, fit, rank the truth."""
    from ddtree_bayes.workflows import report

    spec, cfg, data, *_ = _compiled(inputs)
    coords = {k: list(v) for k, v in spec.parameter_coords.items()}
    flops = None if spec.system_flop_ms is None else list(spec.system_flop_ms)
    from ddtree_bayes.core import spec as S

    model_meta = S.model_meta(spec, cfg)
    truth = report.prior_draws(cfg, coords, 1, seed, flops, model_meta.get("group_varies"),
                               model_meta.get("acceptance_groups"), spec.repeated, model_meta)
    truth_draws = Fit(path=Path("truth"), meta=draws_meta(spec, cfg), variables=truth,
                        data_csv=inputs.data_csv, priors_toml=inputs.priors_toml,
                        hardware_csv=inputs.hardware_csv)
    measurements, log_mu = M.measurement_log_mu(truth_draws, seed)
    rng = np.random.default_rng(seed)
    observed = M.simulate_log_tok_s(truth_draws, measurements, log_mu[0], rng, spec.repeated)
    t0 = time.perf_counter()
    draws, failures = sample_weighted(inputs, np.ones(len(data.rows)), seed, settings,
                                      observed=observed)
    post = report.scalar_columns(draws.variables, coords)
    true = report.scalar_columns(truth, coords)
    keep = np.linspace(0, draws.n_draws - 1, SBC_L).astype(int)
    ranks = {name: int(np.sum(post[name][keep] < true[name][0]))
             for name in sbc_parameters(post) if np.ptp(post[name]) > 0}  # constants: no rank
    return {"seed": seed, "seconds": time.perf_counter() - t0, "converged": not failures,
            "failures": failures, "ranks": ranks}


def sbc_parameters(columns: dict) -> list[str]:
    """Parameters ranked in SBC: every scalar except the non-centred z offsets."""
    return [n for n in columns if not n.startswith(("moe_z", "overhead_z", "compute_eff_z",
                                                    "spec_fixed_z", "spec_pass_z", "spec_tree_z"))
            and "_engine_z" not in n]


def draws_meta(spec, cfg: PriorsConfig, weights: np.ndarray | None = None) -> dict:
    """The metadata :mod:`predictive` needs, for draws that never went to disk.

    ``weights`` (0 = a row a validation fold holds out): which groups' drafter passes and tree
    nodes vary is the training rows' (``core/spec.model_meta``), not the file's: a group a
    fold leaves measured at one size is priced beyond it with the group-to-group spread
    (``structure.tied_ratio_spread``), as a fit of the training rows alone prices it."""
    from ddtree_bayes.core import spec as S

    return {"fit_id": "in-memory", "converged": True, "failures": [],
            "coords": {k: list(v) for k, v in spec.parameter_coords.items()},
            "model": S.model_meta(spec, cfg, weights)}


#: The fewest ranks per bin expected for the chi-square approximation of the uniformity
#: test's p (the textbook 5); below it (fewer than 5 x SBC_BINS replicates) the p is exact.
SBC_MIN_EXPECTED = 5


def sbc_p_method(replicates: int) -> str:
    """How :func:`sbc_uniformity` computes its p for ``replicates`` ranks: ``exact`` below
    SBC_MIN_EXPECTED per bin, else ``chi-square``."""
    return "exact" if replicates < SBC_MIN_EXPECTED * SBC_BINS else "chi-square"


def exact_uniformity_p(counts) -> float:
    """P(chi-square statistic >= the one of ``counts``) for ranks uniform over the bins,
    exactly: the statistic is (bins / n) x sum(c^2) - n, so the distribution of sum(c^2)
    under the multinomial, built bin by bin, gives it (scipy's chi-square approximation
    needs about 5 per bin: 2 replicates in one of 10 bins read p 0.035, where that happens
    with probability 0.1).

    >>> exact_uniformity_p([2] + [0] * 9), exact_uniformity_p([1, 1] + [0] * 8)
    (0.1, 1.0)
    """
    counts = [int(c) for c in counts]
    n, k = sum(counts), len(counts)
    observed = sum(c * c for c in counts)
    top = n * n
    # ways[m, q]: sum over the bins so far of prod 1/c! for counts totalling m with sum c^2 = q
    ways = np.zeros((n + 1, top + 1))
    ways[0, 0] = 1.0
    inv_fact = [1.0 / math.factorial(c) for c in range(n + 1)]
    for _ in range(k):
        new = np.zeros_like(ways)
        for c in range(n + 1):
            new[c:, c * c:] += ways[:n + 1 - c, :top + 1 - c * c] * inv_fact[c]
        ways = new
    probability = ways[n] * math.factorial(n) / float(k) ** n
    return float(min(1.0, probability[observed:].sum()))


def sbc_uniformity(replicates: list[dict]) -> dict:
    """Test of rank uniformity per parameter (SBC_BINS bins of the 0..L ranks): the chi-square
    statistic's p, exact (:func:`exact_uniformity_p`) when fewer than SBC_MIN_EXPECTED ranks
    fall in a bin on average, else scipy's chi-square approximation."""
    from scipy import stats

    names = list(replicates[0]["ranks"])
    exact = sbc_p_method(len(replicates)) == "exact"
    out = {}
    for name in names:
        ranks = np.array([r["ranks"][name] for r in replicates])
        counts = np.histogram(ranks, bins=SBC_BINS, range=(0, SBC_L + 1))[0]
        p = exact_uniformity_p(counts) if exact else float(stats.chisquare(counts).pvalue)
        out[name] = {"counts": [int(c) for c in counts], "chi2_p": p}
    return out


def sbc(data_path: str | Path | None = None, priors_path: str | Path | None = None, *,
        replicates: int = 100, jobs: int = 1, scheduler: str | None = None,
        seed: int = DEFAULT_SEED, settings: SamplerSettings | None = None,
        workdir: Path | None = None, progress: bool = True) -> dict:
    """Simulation-based calibration on the data file's design (its rows' M, context and
    acceptance): ``replicates`` prior draws, each simulated, fitted and ranked."""
    from ddtree_bayes.engine.fitting import FitInputs

    # what fit refuses before sampling (a method the priors do not declare, a model
    # without a card), refused here before any fold, as fit words it
    read = FitInputs.read(data_path, priors_path, workdir=workdir).check()
    data, cfg = read.measurements, read.priors
    inputs = Inputs(data.text, cfg.text, read.hardware.text, data.path, **card_texts(workdir))
    settings = settings or SamplerSettings()
    t0 = time.perf_counter()

    def report(i, n, res):
        if progress:
            bar = "#" * int(20 * i / n)
            print(f"\r[sbc] [{bar:<20}] {i}/{n} replicates", end="\n" if i == n else "",
                  file=sys.stderr, flush=True)

    results = dispatch(sbc_replicate, [(inputs, seed + k, settings) for k in range(replicates)],
                       jobs=jobs, scheduler=scheduler, progress=report)
    tests = sbc_uniformity(results)
    return {"replicates": replicates, "seed": seed, "settings": settings.as_dict(),
            "L": SBC_L, "bins": SBC_BINS, "seconds": time.perf_counter() - t0,
            "unconverged": sum(not r["converged"] for r in results),
            "uniformity": tests, "p_method": sbc_p_method(replicates),
            "min_p": min(t["chi2_p"] for t in tests.values()),
            "replicate_results": results}

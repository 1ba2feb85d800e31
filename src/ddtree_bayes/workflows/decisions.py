"""Decisions from the posterior: the best tree budget (``optimize``) and which measurement
to make next (``next``).

numpy only, like ``predictive``: both work on the saved posterior draws and take well
under a second for 4000 draws.

**optimize.** Acceptance as a function of the tree budget B comes from the
``[acceptance_curve]`` section of the priors file (:class:`config.AcceptanceCurve`)::

    accept(B) = min(block + 1, B + 1, accept_ref + gain * (1 - decay**d) / (1 - decay))
    d = log2(B / reference_budget)

Its three parameters are drawn (from their priors, or from their posterior given an
acceptance file) alongside the posterior draws of the step time; per draw
``tok_s(B) = accept(B) * 1000 / step_ms(M = B + 1)``. The best budget maximises the
expected tok/s, which is the same as minimising the expected regret
``E[max_B tok_s(B) - tok_s(B)]``.

**next.** Preposterior analysis by importance reweighting: for a candidate measurement,
simulate K plausible results from the current posterior predictive, reweight the posterior
draws by the likelihood of each, and average the query's weighted interval width.

**Shared overhead draws.** ``predictive.step_components`` draws a fresh ``z`` for the
overhead fraction of an unmeasured (system, engine, method) group from the ``rng`` it is
given. Here every scenario is resolved with a generator seeded by (seed, group label)
(:func:`group_rng`), so all budgets of one group, and a candidate and a query in the same
unmeasured group, see the same ``z`` per draw: otherwise measuring one could not inform
the other. Likewise a system without measurements (hardware transfer) gets its transferred
parameters once per (seed, system) (:func:`with_transferred_system`).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import math
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import (
    DEFAULT_SCENARIO,
    DEFAULT_SEED,
    AcceptanceCurve,
    Prior,
    parse_priors,
)
from ddtree_bayes.core.data import AR_METHOD
from ddtree_bayes.core.errors import DataError, QueryError
from ddtree_bayes.core.sampling import prior_sample
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.store import Draws

#: Budgets ``optimize`` compares by default: powers of two from 8 to 1024.
DEFAULT_BUDGETS: tuple[int, ...] = tuple(2 ** k for k in range(3, 11))
#: Simulated results per candidate in ``next``.
DEFAULT_K = 32
#: Below this effective sample size a candidate's numbers rest on too few draws.
MIN_ESS = 100.0
#: Budgets of the default DDTree candidates of ``next``.
CANDIDATE_BUDGETS = (8, 32, 128)
#: Columns of a ``next --candidates`` file.
CANDIDATE_COLUMNS = ("hardware", "gpus", "engine", "method", "block", "budget", "accept_len",
                     "context_tokens")


# ------------------------------------------------------------------ shared overhead stream
def overhead_group(draws: Draws, sc: P.Scenario) -> str | None:
    """The overhead group whose fraction ``step_components`` uses for ``sc`` (after mapping
    an engine with a declared relation to its base engine); None for autoregressive."""
    if sc.method == AR_METHOD:
        return None
    engine = draws.meta["model"]["relation_bases"].get(sc.engine, sc.engine)
    return S.group_label(sc.system, engine, sc.method)


def group_rng(seed: int, label: str | None) -> np.random.Generator:
    """A generator determined by (seed, overhead group): the same group always gets the
    same stream, different groups independent ones."""
    digest = hashlib.sha256((label or "-").encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def with_transferred_system(draws: Draws, sc: P.Scenario, seed: int
                            ) -> tuple[Draws, P.Scenario, str]:
    """For a scenario on a system without measurements (answered by hardware transfer),
    the draws with that system's transferred parameters added as a system column of their
    own, drawn from a stream fixed by (seed, system), and the scenario marked measured.

    Every scenario on that system (any engine, method or budget) then sees the same
    transferred step parameters per draw, and its overhead group the same ``z`` per draw
    (:func:`shared_step`); measured systems pass through unchanged.
    """
    if getattr(sc, "measured", True):
        return draws, sc, ""
    params, how = P.transferred_parameters(draws, sc, group_rng(seed, f"system {sc.system}"))
    variables = dict(draws.variables)
    systems = list(draws.meta["coords"]["system"])
    columns = {"step_ar_ms": params["step_ar_ms"], "moe_share": params["moe_share"],
               "ctx_ms_per_unit": params["ctx_ms_per_unit"], "moe_exponent": params["moe_shape"],
               "moe_slope": params["moe_shape"]}
    if sc.system in systems:       # a system held out of this fit: replace its column
        j = systems.index(sc.system)
        for key, col in columns.items():
            if key in variables:
                variables[key] = variables[key].copy()
                variables[key][:, j] = col
    else:
        systems.append(sc.system)
        for key, col in columns.items():
            if key in variables:
                variables[key] = np.column_stack([variables[key], col])
    meta = {**draws.meta, "coords": {**draws.meta["coords"], "system": systems}}
    return replace(draws, meta=meta, variables=variables), replace(sc, measured=True), how


def shared_step(draws: Draws, sc: P.Scenario, seed: int) -> tuple[np.ndarray, str]:
    """Posterior draws of step_ms for ``sc`` (no measurement noise), with the overhead ``z``
    of an unmeasured group shared by every scenario of that group (see :func:`group_rng`)
    and the transferred parameters of an unmeasured system shared by every scenario on it
    (see :func:`with_transferred_system`)."""
    draws, sc, transfer_how = with_transferred_system(draws, sc, seed)
    parts, how = P.step_components(draws, sc, group_rng(seed, overhead_group(draws, sc)))
    return parts["step"], transfer_how + how


# ------------------------------------------------------------------ priors and the curve
sample_prior = prior_sample  # one sampler for every prior of the priors file


def doublings(budgets, reference_budget: float, decay) -> np.ndarray:
    """``(1 - decay**d) / (1 - decay)`` with ``d = log2(B / reference)``: the number of
    'first-doubling gains' budget B adds over the reference (``d`` itself when decay = 1).

    Shapes: ``budgets`` (nb,), ``decay`` (n,) -> (n, nb).

    >>> doublings([8, 16, 32, 64], 16, np.array([0.5, 1.0])).tolist()
    [[-2.0, 0.0, 1.0, 1.5], [-1.0, 0.0, 1.0, 2.0]]
    """
    d = np.log2(np.asarray(budgets, dtype=float) / reference_budget)[None, :]
    r = np.asarray(decay, dtype=float)[:, None]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ratio = -np.expm1(d * np.log(r)) / (1.0 - r)
    h = np.where(np.abs(1.0 - r) < 1e-9, d, ratio)
    return np.where(np.isfinite(h), h, -1e300)   # decay -> 0 below the reference: floor at 1


def curve_accept(budgets, accept_ref, gain, decay, *, reference_budget: float,
                 block: int) -> np.ndarray:
    """Acceptance per draw and budget, (n, nb): the curve of :class:`AcceptanceCurve`,
    capped at ``block + 1`` (a block-k drafter emits at most k + 1 tokens per step) and at
    ``B + 1`` (a B-node tree), and floored at 1.

    >>> a = curve_accept([8, 16, 32, 64, 1024], np.array([8.0]), np.array([1.0]),
    ...                  np.array([0.5]), reference_budget=16, block=16)
    >>> a.round(4).tolist()
    [[6.0, 8.0, 9.0, 9.5, 9.9688]]
    """
    budgets = np.asarray(budgets, dtype=float)
    h = doublings(budgets, reference_budget, decay)
    raw = np.asarray(accept_ref, float)[:, None] + np.asarray(gain, float)[:, None] * h
    raw = np.where(np.isfinite(raw), raw, 1.0)
    cap = np.minimum(block + 1.0, budgets + 1.0)[None, :]
    return np.clip(raw, 1.0, cap)


@dataclass(frozen=True)
class CurveDraws:
    """Draws of the acceptance-curve parameters and where they came from."""

    accept_ref: np.ndarray
    gain: np.ndarray
    decay: np.ndarray
    source: str
    ess: float | None = None
    rows: int = 0

    def accept(self, budgets, curve: AcceptanceCurve) -> np.ndarray:
        return curve_accept(budgets, self.accept_ref, self.gain, self.decay,
                            reference_budget=curve.reference_budget, block=curve.block)


def sample_curve(curve: AcceptanceCurve, n: int, rng: np.random.Generator) -> CurveDraws:
    """``n`` joint draws of (accept_ref, gain, decay) from their (independent) priors."""
    return CurveDraws(sample_prior(curve.accept_ref, n, rng), sample_prior(curve.gain, n, rng),
                      sample_prior(curve.decay, n, rng), source=f"prior from {curve.path}")


def read_acceptance_file(path: str | Path, method: str, block: int
                         ) -> tuple[np.ndarray, np.ndarray, str]:
    """(budgets, accept_len, model) of the rows of an acceptance CSV (the schema of
    data/acceptance_reference.csv) with this method and block. One model only."""
    path = str(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            records = list(csv.DictReader(fh))
            header = records[0].keys() if records else []
    except OSError as err:
        raise DataError(f"cannot read acceptance file: {err.strerror}", file=path,
                        fix="pass an existing CSV with --acceptance-file") from None
    for column in ("model", "method", "block", "budget", "accept_len"):
        if column not in header:
            raise DataError("missing column", file=path, column=column,
                            fix="use the columns of data/acceptance_reference.csv")
    budgets, values, models = [], [], set()
    for i, rec in enumerate(records, start=2):
        if (rec["method"] or "").strip() != method:
            continue
        numbers = {}
        for column in ("block", "budget", "accept_len"):
            try:
                numbers[column] = float(rec[column])
            except (TypeError, ValueError):
                raise DataError(f"{rec[column]!r} is not a number", file=path, row=i,
                                column=column, fix="give a number") from None
            if not math.isfinite(numbers[column]) or numbers[column] < 1:
                raise DataError(f"{rec[column]!r} must be >= 1", file=path, row=i,
                                column=column, fix="give a positive number")
        if numbers["block"] != block:
            continue
        budgets.append(numbers["budget"])
        values.append(numbers["accept_len"])
        models.add((rec["model"] or "").strip())
    if not budgets:
        raise QueryError(f"{path} has no {method} rows with block {block}",
                         fix=f"add rows with method {method} and block {block}, or change --block")
    if len(models) > 1:
        raise QueryError(f"{path} has {method} block-{block} rows of several models "
                         f"({', '.join(sorted(models))})", fix="keep the rows of one target model")
    return np.array(budgets), np.array(values), models.pop()


def _gaussian(prior: Prior) -> tuple[float, float, float, float]:
    """(mean, sd, lower, upper) of a normal, truncnormal or point prior (conjugate update)."""
    p = prior.params
    if prior.dist == "point":
        return p["value"], 0.0, -math.inf, math.inf
    if prior.dist in ("normal", "truncnormal"):
        return p["mu"], p["sigma"], p.get("lower", -math.inf), p.get("upper", math.inf)
    raise QueryError(f"--acceptance-file needs a normal, truncnormal or point prior on "
                     f"{prior.name}, not {prior.dist}",
                     fix=f"change [acceptance_curve.{prior.name}] in the priors file")


def update_curve(curve: AcceptanceCurve, budgets: np.ndarray, accept: np.ndarray, n: int,
                 rng: np.random.Generator, source: str = "acceptance file") -> CurveDraws:
    """Posterior draws of the curve given acceptance measurements.

    Observation model: ``accept_i = accept_ref + gain * doublings(B_i, decay) + e_i``,
    ``e_i ~ Normal(0, measurement_sd)`` (the cap and floor of the curve are ignored here).
    Given ``decay`` this is linear in (accept_ref, gain), so their (normal or truncated
    normal) priors update conjugately; ``decay`` is drawn from its prior and reweighted by
    the marginal likelihood of the data (resampled), then (accept_ref, gain) are drawn from
    their bivariate normal posterior given each decay draw, truncated to their prior bounds
    by rejection. The truncation's effect on the decay weights is ignored.
    """
    m_a, s_a, lo_a, hi_a = _gaussian(curve.accept_ref)
    m_g, s_g, lo_g, hi_g = _gaussian(curve.gain)
    decay = sample_prior(curve.decay, n, rng)
    X1 = doublings(budgets, curve.reference_budget, decay)          # (n, m)
    X = np.stack([np.ones_like(X1), X1], axis=2)                     # (n, m, 2)
    m0 = np.array([m_a, m_g])
    S0 = np.diag([s_a ** 2, s_g ** 2])
    k = len(budgets)
    C = X @ S0 @ X.transpose(0, 2, 1) + curve.measurement_sd ** 2 * np.eye(k)   # (n, m, m)
    resid = accept[None, :] - X @ m0                                             # (n, m)
    sol = np.linalg.solve(C, resid[..., None])[..., 0]
    _, logdet = np.linalg.slogdet(C)
    loglik = -0.5 * (np.sum(resid * sol, axis=1) + logdet)
    w = np.exp(loglik - loglik.max())
    w /= w.sum()
    ess = float(1.0 / np.sum(w ** 2))
    idx = rng.choice(n, size=n, p=w)
    Xi, Ci, soli = X[idx], C[idx], sol[idx]
    gain_k = S0 @ Xi.transpose(0, 2, 1)                                          # (n, 2, m)
    mean = m0 + (gain_k @ soli[..., None])[..., 0]
    cov = S0 - gain_k @ np.linalg.solve(Ci, Xi @ S0)
    cov = 0.5 * (cov + cov.transpose(0, 2, 1)) + 1e-12 * np.eye(2)
    chol = np.linalg.cholesky(cov)
    out = np.empty((n, 2))
    todo = np.arange(n)
    for _ in range(200):
        z = rng.standard_normal((todo.size, 2))
        x = mean[todo] + (chol[todo] @ z[..., None])[..., 0]
        ok = (x[:, 0] >= lo_a) & (x[:, 0] <= hi_a) & (x[:, 1] >= lo_g) & (x[:, 1] <= hi_g)
        out[todo[ok]] = x[ok]
        todo = todo[~ok]
        if todo.size == 0:
            break
    if todo.size:
        out[todo] = np.clip(mean[todo], [lo_a, lo_g], [hi_a, hi_g])
    return CurveDraws(out[:, 0], out[:, 1], decay[idx], source=source, ess=ess, rows=k)


def check_fit(draws: Draws, *, allow_unconverged: bool = False, strict: bool = False
              ) -> list[str]:
    """:func:`predictive.check_fit`, except that a priors file that differs from the fit's
    only in ``[acceptance_curve]`` (which fit does not use) does not make the fit stale."""
    import tomllib

    from ddtree_bayes.core.errors import StaleArtifactError

    warnings = P.check_fit(draws, allow_unconverged=allow_unconverged, strict=False)
    path = Path(draws.meta["priors"]["path"])

    def model_part(text: str) -> dict | None:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
        raw.pop("acceptance_curve", None)
        return raw

    if path.exists() and any(w.startswith(f"{path} changed") for w in warnings):
        current = model_part(path.read_text())
        if current is not None and current == model_part(draws.priors_toml):
            warnings = [w for w in warnings if not w.startswith(f"{path} changed")]
    if warnings and strict:
        raise StaleArtifactError("; ".join(warnings) + " (--strict)")
    return warnings


def curve_for(priors_text: str, path: str) -> AcceptanceCurve:
    """The ``[acceptance_curve]`` of a priors file, or a QueryError saying how to add one."""
    from ddtree_bayes.core.config import parse_acceptance_curve

    curve = parse_acceptance_curve(priors_text, path)
    if curve is None:
        raise QueryError(f"{path} has no [acceptance_curve] section",
                         fix="copy it from the bundled models/priors.toml, or pass --priors")
    return curve


# ------------------------------------------------------------------ decision arithmetic
def budget_decision(tok: np.ndarray) -> dict[str, np.ndarray]:
    """Per-budget decision numbers from tok/s draws of shape (draws, budgets).

    ``p_best``: share of draws in which the budget has the highest tok/s (ties go to the
    smaller budget); ``regret``: ``E[max_B tok_s - tok_s(B)]``. The budget with the highest
    mean also has the lowest expected regret.

    >>> out = budget_decision(np.array([[1.0, 3.0], [5.0, 2.0], [2.0, 2.5]]))
    >>> out["mean"].tolist(), out["p_best"].round(3).tolist(), out["regret"].round(3).tolist()
    ([2.6666666666666665, 2.5], [0.333, 0.667], [0.833, 1.0])
    """
    best = tok.max(axis=1)
    p_best = np.bincount(tok.argmax(axis=1), minlength=tok.shape[1]) / tok.shape[0]
    return {"mean": tok.mean(axis=0), "p_best": p_best,
            "regret": np.mean(best[:, None] - tok, axis=0)}


def max_measured_verify(draws: Draws, system: str) -> tuple[int | None, int]:
    """Largest verify_tokens M measured on ``system`` (None if only elsewhere) and overall."""
    rows = P.stored_measurements(draws).rows
    on_system = [r.verify_tokens for r in rows if r.system == system]
    return (max(on_system) if on_system else None), max(r.verify_tokens for r in rows)


def parse_budgets(text: str | None) -> tuple[int, ...]:
    """``--budgets 8,16,32``; None gives :data:`DEFAULT_BUDGETS`.

    >>> parse_budgets("32, 8,16,8")
    (8, 16, 32)
    """
    if text is None:
        return DEFAULT_BUDGETS
    try:
        values = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise QueryError(f"--budgets {text!r} is not a list of whole numbers",
                         fix="use e.g. --budgets 8,16,32,64") from None
    if not values or values[0] < 1:
        raise QueryError(f"--budgets {text!r}: need positive budgets", fix="use e.g. 8,16,32,64")
    return tuple(values)


def optimize(draws: Draws, curve: AcceptanceCurve, *, hardware: str | None = None,
             gpus: int | None = None, engine: str | None = None, method: str = "ddtree",
             block: int = 16, budgets: tuple[int, ...] = DEFAULT_BUDGETS,
             context_tokens: float | str | None = None, acceptance_file: str | Path | None = None,
             prob: float = 0.9, seed: int = DEFAULT_SEED) -> dict:
    """The tree budget with the highest expected tok/s, and per-budget decision numbers.

    Per posterior draw s: ``tok_s[s, B] = accept_s(B) * 1000 / step_ms_s(M = B + 1)``
    (expected throughput: no run-to-run noise). Returns a dict with ``rows`` (one per
    budget: tok/s mean, median and ``prob`` interval, acceptance and step time medians,
    ``p_best``, ``regret``; ``extrapolated`` when M exceeds the largest M measured on the
    system; ``accept_extrapolated`` when B is below the curve's reference budget, or outside
    the budgets of the acceptance file) and ``recommended`` (a budget).

    Examples
    --------
    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> from ddtree_bayes.core.config import parse_acceptance_curve
    >>> draws = point_mass_draws()
    >>> curve = parse_acceptance_curve(draws.priors_toml)
    >>> out = optimize(draws, curve, hardware="b300", engine="sglang", budgets=(8, 32))
    >>> [r["verify_tokens"] for r in out["rows"]], out["rows"][1]["step_ms"]   # 16 ms / 0.8
    ([9, 33], 20.0)
    """
    hardware = hardware or DEFAULT_SCENARIO.hardware
    engine = engine or DEFAULT_SCENARIO.engines[0]
    if "," in engine:
        raise QueryError("optimize compares budgets for one engine", fix="give one --engine")
    if (method, block) != (curve.method, curve.block):
        raise QueryError(f"the acceptance curve in {curve.path} describes {curve.method} block "
                         f"{curve.block}, not {method} block {block}",
                         fix="edit [acceptance_curve] (method, block and its priors) in the "
                             "priors file for this drafter, and pass it with --priors")
    probs = P.interval_probs(prob)
    ctx = P.parse_context(context_tokens)
    scenarios = [P.resolve_scenario(draws, hardware=hardware, gpus=gpus, engine=engine,
                                    method=method, block=block, budget=b, verify_tokens=None,
                                    context_tokens=ctx) for b in budgets]
    if any(sc.verify_tokens != b + 1 for sc, b in zip(scenarios, budgets, strict=True)):
        raise QueryError(f"{method} is not a tree method: its verify tokens do not follow "
                         "the budget", fix="use --method ddtree")
    steps, hows = zip(*(shared_step(draws, sc, seed) for sc in scenarios), strict=True)
    step = np.stack(steps, axis=1)                                        # (n, nb)
    n = draws.n_draws
    rng = np.random.default_rng([seed, 7])
    if acceptance_file is None:
        cd = sample_curve(curve, n, rng)
        anchored = (float(curve.reference_budget), math.inf)
    else:
        b_obs, a_obs, model = read_acceptance_file(acceptance_file, method, block)
        cd = update_curve(curve, b_obs, a_obs, n, rng,
                          source=f"prior from {curve.path}, updated with {len(b_obs)} {model} "
                                 f"rows of {acceptance_file}")
        anchored = (float(b_obs.min()), float(b_obs.max()))
    accept = cd.accept(budgets, curve)
    tok = accept * 1000.0 / step
    dec = budget_decision(tok)
    sys_max, all_max = max_measured_verify(draws, scenarios[0].system)
    limit = all_max if sys_max is None else sys_max
    rows = []
    for j, sc in enumerate(scenarios):
        row = {"budget": budgets[j], "verify_tokens": sc.verify_tokens,
               "accept": float(np.median(accept[:, j])),
               "accept_lo": float(np.quantile(accept[:, j], (1 - prob) / 2)),
               "accept_hi": float(np.quantile(accept[:, j], (1 + prob) / 2)),
               "step_ms": float(np.median(step[:, j])),
               "tok_s_mean": float(dec["mean"][j])}
        row.update(P.summarize(tok[:, j], probs, None))
        row.update({"p_best": float(dec["p_best"][j]), "regret": float(dec["regret"][j]),
                    "extrapolated": sc.verify_tokens > limit,
                    "accept_extrapolated": not anchored[0] <= budgets[j] <= anchored[1]})
        rows.append(row)
    best = int(np.argmax(dec["mean"]))
    sc = scenarios[0]
    return {"fit_id": draws.meta["fit_id"], "draws": n, "seed": seed,
            "scenario": {"hardware": sc.hardware, "gpus": sc.gpus, "engine": sc.engine,
                         "method": sc.method, "block": block, "context_tokens": sc.context_tokens,
                         "system": sc.system},
            "interval_prob": prob,
            "curve": {"formula": "min(block + 1, B + 1, accept_ref + gain * (1 - decay**d) / "
                                 "(1 - decay)), d = log2(B / reference_budget)",
                      "reference_budget": curve.reference_budget, "priors": curve.describe(),
                      "source": cd.source, "ess": cd.ess, "rows": cd.rows,
                      "accept_ref": _med90(cd.accept_ref), "gain": _med90(cd.gain),
                      "decay": _med90(cd.decay),
                      "anchored_budgets": [anchored[0], anchored[1] if math.isfinite(anchored[1])
                                           else None]},
            "overhead_from": hows[0],
            "max_measured_verify_tokens": {"system": sys_max, "any_system": all_max},
            "rows": rows, "recommended": budgets[best]}


def _med90(x: np.ndarray) -> list[float]:
    lo, med, hi = np.quantile(x, [0.05, 0.5, 0.95])
    return [float(med), float(lo), float(hi)]


# ------------------------------------------------------------------ next: the query
class _QueryParser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise QueryError(f"--query: {message}",
                         fix='give predict flags, e.g. --query "--hardware b300 --engine native '
                             '--method ddtree --block 16 --budget 32 --accept 14"')


def _query_parser() -> _QueryParser:
    from ddtree_bayes.core.query_flags import add_scenario_arguments

    q = _QueryParser(prog="--query", add_help=False)
    add_scenario_arguments(q)
    q.add_argument("--accept")
    return q


@dataclass(frozen=True)
class Query:
    """A single-engine predict query: its scenario and how acceptance is given."""

    scenario: P.Scenario
    accept: str | None          # as given (None: the acceptance prior of the priors file)


def parse_query(draws: Draws, text: str) -> Query:
    """Resolve ``--query "<predict flags>"`` (one engine) against the fit, with predict's
    defaults: no configuration flags is the default scenario in its first engine."""
    try:
        tokens = shlex.split(text)
    except ValueError as err:
        raise QueryError(f"--query {text!r}: {err}", fix="balance the quotes") from None
    a = _query_parser().parse_args(tokens)
    if a.engine is not None and "," in a.engine:
        raise QueryError("--query takes one engine", fix="give one --engine in the query")
    engine = a.engine or DEFAULT_SCENARIO.engines[0]
    block, budget = a.block, a.budget
    if a.hardware is None and a.method is None and not any(
            (a.gpus, a.block, a.budget, a.verify_tokens)):
        d = DEFAULT_SCENARIO
        hardware, method, block, budget = d.hardware, d.method, d.block, d.budget
    else:
        hardware = a.hardware or DEFAULT_SCENARIO.hardware
        method = a.method or DEFAULT_SCENARIO.method
    sc = P.resolve_scenario(draws, hardware=hardware, gpus=a.gpus, engine=engine, method=method,
                            block=block, budget=budget, verify_tokens=a.verify_tokens,
                            context_tokens=P.parse_context(a.context))
    if a.accept is not None:
        req = P.parse_accept(a.accept)
        if req.uniform is None and len(req.values) != 1:
            raise QueryError(f"--query --accept {a.accept}: one value or a range lo:hi",
                             fix="e.g. --accept 14 or --accept 12:16 (Uniform(12, 16))")
    return Query(sc, a.accept)


def query_acceptance(draws: Draws, query: Query, rng: np.random.Generator
                     ) -> tuple[np.ndarray, str]:
    """Acceptance draws for the query: a given value, Uniform(lo, hi) for a range, or the
    scenario's acceptance prior from the priors stored in the fit."""
    n, sc = draws.n_draws, query.scenario
    if query.accept is None:
        priors = parse_priors(draws.priors_toml, "priors stored in the fit")
        ap = priors.acceptance_for(sc.method, sc.block, sc.budget)
        if ap is None:
            raise QueryError(f"no acceptance prior for {sc.method} block {sc.block} budget "
                             f"{sc.budget} in the priors file",
                             fix="add --accept to the query")
        a, label = P.sample_acceptance(ap, n, rng), f"prior {ap.describe()}"
    else:
        req = P.parse_accept(query.accept)
        if req.uniform is not None:
            a, label = rng.uniform(*req.uniform, n), f"U({req.uniform[0]:g},{req.uniform[1]:g})"
        else:
            a, label = np.full(n, req.values[0]), f"{req.values[0]:g}"
    if np.any(a < 1) or np.any(a > sc.verify_tokens) or (sc.method == AR_METHOD and np.any(a != 1)):
        raise QueryError(f"acceptance {label} is outside 1..{sc.verify_tokens} for "
                         f"{sc.describe()}", fix="tokens per step cannot exceed the tokens verified")
    return a, label


# ------------------------------------------------------------------ next: candidates
@dataclass(frozen=True)
class Candidate:
    """One measurement that could be made next. ``accept_len`` is the acceptance it would
    be measured at; it shifts log tok/s by a constant, so it does not change what the
    measurement teaches about the step time."""

    scenario: P.Scenario
    accept_len: float | None
    why: str

    def describe(self) -> str:
        sc = self.scenario
        parts = [f"{sc.hardware} x{sc.gpus}", sc.engine, sc.method]
        if sc.method != AR_METHOD:
            if sc.block is not None:
                parts.append(f"block {sc.block}")
            if sc.budget is not None:
                parts.append(f"budget {sc.budget}")
            parts.append(f"M={sc.verify_tokens}")
        if sc.context_tokens:
            parts.append(f"ctx {sc.context_tokens:g}")
        return " ".join(parts)

    def key(self) -> tuple:
        sc = self.scenario
        engine = "-" if sc.method == AR_METHOD else sc.engine
        return (sc.system, engine, sc.method, sc.verify_tokens, sc.context_tokens)


def default_candidates(draws: Draws, query: Query) -> list[Candidate]:
    """A sensible list from the fit's measured systems, engines and methods:

    - the query's own configuration;
    - the query's configuration in every other engine measured on its system, every
      engine with a declared relation (e.g. native) and their base engines;
    - autoregressive on the query's system at context 0 if that system has no
      measurements (hardware transfer), and at the query's context if it is not 0;
    - for every measured system: autoregressive at context 0, and DDTree budgets 8, 32
      and 128 in every engine measured on that system.
    """
    q = query.scenario
    fitted = set(P.measured_systems(draws))
    rows = [r for r in P.stored_measurements(draws).rows if r.system in fitted]
    systems: dict[str, tuple[str, int]] = {}
    engines: dict[str, list[str]] = {}
    for r in rows:
        systems.setdefault(r.system, (r.hardware, r.gpus))
        engines.setdefault(r.system, [])
        if r.engine not in engines[r.system]:
            engines[r.system].append(r.engine)
    block = q.block if (q.method == "ddtree" and q.block is not None) else 16
    q_accept = None
    if query.accept is not None:
        req = P.parse_accept(query.accept)
        q_accept = req.values[0] if req.uniform is None else sum(req.uniform) / 2

    out: list[Candidate] = []
    seen: set[tuple] = set()

    def add(why: str, accept: float | None, **kw) -> None:
        try:
            sc = P.resolve_scenario(draws, verify_tokens=None, **kw)
        except QueryError:
            return
        c = Candidate(sc, 1.0 if sc.method == AR_METHOD else accept, why)
        if c.key() not in seen:
            seen.add(c.key())
            out.append(c)

    same = {"hardware": q.hardware, "gpus": q.gpus, "method": q.method, "block": q.block,
            "budget": q.budget, "context_tokens": q.context_tokens}
    add("the query itself", q_accept, engine=q.engine, **same)
    bases = draws.meta["model"]["relation_bases"]
    others = [*engines.get(q.system, []), *bases, *bases.values()]
    for e in dict.fromkeys(others):
        if e != q.engine and q.method != AR_METHOD:
            add(f"the query in {e}", q_accept, engine=e, **same)
    if not getattr(q, "measured", True):
        add("AR on the query's system", 1.0, hardware=q.hardware, gpus=q.gpus, engine=q.engine,
            method=AR_METHOD, block=None, budget=None, context_tokens=0.0)
    if q.context_tokens:
        add("AR at the query's context", 1.0, hardware=q.hardware, gpus=q.gpus,
            engine=engines.get(q.system, [q.engine])[0], method=AR_METHOD, block=None,
            budget=None, context_tokens=q.context_tokens)
    for system, (hw, gpus) in systems.items():
        add("AR, context 0", 1.0, hardware=hw, gpus=gpus, engine=engines[system][0],
            method=AR_METHOD, block=None, budget=None, context_tokens=0.0)
        for e in engines[system]:
            for b in CANDIDATE_BUDGETS:
                add(f"DDTree budget {b}", None, hardware=hw, gpus=gpus, engine=e,
                    method="ddtree", block=block, budget=b, context_tokens=0.0)
    return out


def _csv_number(path: str, row: int, rec: dict, column: str, *, integer: bool = False
                ) -> float | None:
    """A non-negative number (or None for blank) from one CSV record."""
    raw = (rec.get(column) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise DataError(f"{raw!r} is not a number", file=path, row=row, column=column,
                        fix="give a number or leave it blank") from None
    if not math.isfinite(value) or value < 0 or (integer and value != int(value)):
        raise DataError(f"{raw!r} is not a valid {column}", file=path, row=row, column=column,
                        fix="give a non-negative " + ("whole number" if integer else "number"))
    return value


def read_candidates(draws: Draws, path: str | Path) -> list[Candidate]:
    """Candidates from a CSV with columns hardware,gpus,engine,method,block,budget,
    accept_len,context_tokens (gpus, block, budget, accept_len, context_tokens may be blank)."""
    path = str(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            records = list(reader)
    except OSError as err:
        raise DataError(f"cannot read candidates file: {err.strerror}", file=path,
                        fix="pass an existing CSV with --candidates") from None
    for column in CANDIDATE_COLUMNS:
        if column not in header:
            raise DataError("missing column", file=path, column=column,
                            fix="header: " + ",".join(CANDIDATE_COLUMNS))
    if not records:
        raise DataError("no candidate rows", file=path, fix="add one row per candidate")
    out = []
    for i, rec in enumerate(records, start=2):
        for column in ("hardware", "engine", "method"):
            if not (rec.get(column) or "").strip():
                raise DataError("empty", file=path, row=i, column=column, fix=f"give the {column}")
        gpus, block, budget = (_csv_number(path, i, rec, c, integer=True)
                               for c in ("gpus", "block", "budget"))
        accept = _csv_number(path, i, rec, "accept_len")
        ctx = _csv_number(path, i, rec, "context_tokens")
        try:
            sc = P.resolve_scenario(draws, hardware=rec["hardware"].strip(),
                                    gpus=None if gpus is None else int(gpus),
                                    engine=rec["engine"].strip(), method=rec["method"].strip(),
                                    block=None if block is None else int(block),
                                    budget=None if budget is None else int(budget),
                                    verify_tokens=None, context_tokens=ctx)
        except QueryError as err:
            raise QueryError(f"{path}, row {i}: {err}") from None
        if accept is not None and not (1 <= accept <= sc.verify_tokens) or (
                sc.method == AR_METHOD and accept not in (None, 1.0)):
            raise DataError(f"accept_len {accept:g} is outside 1..{sc.verify_tokens}", file=path,
                            row=i, column="accept_len",
                            fix="tokens per step cannot exceed the tokens verified (1 for ar)")
        out.append(Candidate(sc, 1.0 if sc.method == AR_METHOD else accept, f"{Path(path).name} row {i}"))
    return out


# ------------------------------------------------------------------ next: preposterior
def weighted_interval(sorted_values: np.ndarray, weights: np.ndarray, prob: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed ``prob`` interval of ``sorted_values`` under each row of ``weights``
    (K, n), each row summing to 1 and ordered like ``sorted_values``; the weighted CDF is
    taken at the midpoint of each draw's mass and interpolated linearly.

    >>> v = np.arange(1.0, 101.0)
    >>> lo, hi = weighted_interval(v, np.full((1, 100), 0.01), 0.9)
    >>> round(float(lo[0]), 9), round(float(hi[0]), 9)
    (5.5, 95.5)
    """
    cdf = np.cumsum(weights, axis=1) - 0.5 * weights
    tails = ((1 - prob) / 2, (1 + prob) / 2)
    lo, hi = np.empty(len(weights)), np.empty(len(weights))
    for k in range(len(weights)):
        lo[k], hi[k] = np.interp(tails, cdf[k], sorted_values)
    return lo, hi


def preposterior(log_mu: np.ndarray, noise_sd: np.ndarray, query: np.ndarray, prob: float,
                 picks: np.ndarray, eps: np.ndarray) -> dict:
    """Expected ``prob`` interval width of ``query`` after one measurement.

    ``log_mu`` (n,): the candidate's modelled log tok/s per posterior draw; ``noise_sd``
    (n,): the fitted noise; ``query`` (n,): the query's predictive draws. The K simulated
    results are ``y_k = log_mu[picks[k]] + noise_sd[picks[k]] * eps[k]``; every draw s is
    weighted by ``Normal(y_k | log_mu[s], noise_sd[s])``.
    """
    order = np.argsort(query)
    sorted_q = query[order]
    y = log_mu[picks] + noise_sd[picks] * eps                                    # (K,)
    lm, sd = log_mu[order], noise_sd[order]
    logw = -0.5 * ((y[:, None] - lm[None, :]) / sd[None, :]) ** 2 - np.log(sd)[None, :]
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    ess = 1.0 / np.sum(w ** 2, axis=1)
    lo, hi = weighted_interval(sorted_q, w, prob)
    width = hi - lo
    return {"width": float(width.mean()),
            "width_se": float(width.std(ddof=1) / math.sqrt(len(width))) if len(width) > 1 else 0.0,
            "ess_median": float(np.median(ess)), "ess_min": float(ess.min())}


def next_measurements(draws: Draws, query: Query, candidates: list[Candidate] | None = None, *,
                      k: int = DEFAULT_K, prob: float = 0.9, seed: int = DEFAULT_SEED,
                      min_ess: float = MIN_ESS) -> dict:
    """Rank candidate measurements by the expected ``prob`` interval width of the query's
    posterior predictive tok/s after making them (smallest first).

    The query's draws are predict's: acceptance (given, uniform or prior) times
    1000 / step_ms times lognormal run-to-run noise. Each candidate's log tok/s per draw
    uses the same overhead ``z`` as the query when they share an unmeasured group.
    """
    if k < 2:
        raise QueryError("--k must be at least 2", fix="use e.g. --k 32")
    P.interval_probs(prob)   # validates prob
    noise = draws.variables["noise_sd"]
    if np.any(noise <= 0):
        raise QueryError("the fit has draws with zero measurement noise: a measurement would "
                         "be infinitely informative", fix="refit with the bundled noise prior")
    n = draws.n_draws
    cands = default_candidates(draws, query) if candidates is None else candidates
    rng = np.random.default_rng([seed, 11])
    accept, accept_label = query_acceptance(draws, query, rng)
    q_step, q_how = shared_step(draws, query.scenario, seed)
    q = accept * 1000.0 / q_step * np.exp(noise * rng.standard_normal(n))
    picks = rng.integers(0, n, size=k)
    eps = rng.standard_normal(k)
    now_lo, now_hi = weighted_interval(np.sort(q), np.full((1, n), 1.0 / n), prob)
    now = float(now_hi[0] - now_lo[0])
    rows = []
    for c in cands:
        step, how = shared_step(draws, c.scenario, seed)
        a = 1.0 if c.accept_len is None else c.accept_len
        res = preposterior(np.log(a * 1000.0 / step), noise, q, prob, picks, eps)
        sc = c.scenario
        rows.append({"candidate": c.describe(), "why": c.why, "hardware": sc.hardware,
                     "gpus": sc.gpus, "engine": sc.engine, "method": sc.method,
                     "block": sc.block, "budget": sc.budget, "verify_tokens": sc.verify_tokens,
                     "context_tokens": sc.context_tokens, "accept_len": c.accept_len,
                     "shares_query_overhead": (overhead_group(draws, sc) is not None
                                               and overhead_group(draws, sc)
                                               == overhead_group(draws, query.scenario)),
                     "overhead_from": how,
                     "expected_width": res["width"], "width_se": res["width_se"],
                     "reduction": now - res["width"],
                     "reduction_rel": (now - res["width"]) / now if now > 0 else 0.0,
                     "ess_median": res["ess_median"], "ess_min": res["ess_min"],
                     "unreliable": res["ess_median"] < min_ess})
    rows.sort(key=lambda r: r["expected_width"])
    sc = query.scenario
    return {"fit_id": draws.meta["fit_id"], "draws": n, "seed": seed, "k": k,
            "interval_prob": prob, "min_ess": min_ess,
            "query": {"describe": sc.describe(), "hardware": sc.hardware, "gpus": sc.gpus,
                      "engine": sc.engine, "method": sc.method, "block": sc.block,
                      "budget": sc.budget, "verify_tokens": sc.verify_tokens,
                      "context_tokens": sc.context_tokens, "accept": accept_label,
                      "accept_fixed": bool(np.all(accept == accept[0])),
                      "overhead_from": q_how, "median": float(np.median(q)),
                      "lo": float(now_lo[0]), "hi": float(now_hi[0]), "width": now},
            "rows": rows}

"""Does the step structure extrapolate? ``ddtree-bayes validate --extrapolate``.

Per public sweep (``data/public/*.csv``: one model on one system, draft depth or tree budget
varying), hold out the deepest / largest-M speculative configurations of each method, fit
the rest, and predict the held-out ones: 50% / 90% coverage, mean signed error of the median
(bias), mean absolute error and mean relative 90% width, for each step structure and for the
original deterministic formula refit by least squares with its flat +-30%. The pooled scores
and the targets count the fits that passed their convergence gates only (the baseline: the rows
the first structure scores); a failed fit keeps its sweep's own line and is named in
``unconverged_rows``.

Rows without an acceptance length or tok/s (some public sweeps report neither) are skipped,
and a sweep needs at least three speculative configurations to be split. A sweep whose
tok/s are in relative units (speedups only, marked in its ``derived`` column) is skipped:
the roofline's compute part is in absolute milliseconds.
"""

from __future__ import annotations

import csv
import io
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddtree_bayes.core.config import DEFAULT_SEED, PriorsConfig, SamplerSettings
from ddtree_bayes.core.data import (
    AR_METHOD,
    COLUMNS,
    OPTIONAL_COLUMNS,
    load_hardware,
    load_measurements,
    states_verify_tokens,
)
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.hardware_table import hardware_table
from ddtree_bayes.core.likelihood import scatter_parts
from ddtree_bayes.workflows.validation import (
    Inputs,
    card_texts,
    converged_only,
    dispatch,
    predict_row,
    refit_without,
    scores,
)

#: Step structures compared: name -> ([model] moe_form, step_form).
STRUCTURES: dict[str, tuple[str, str]] = {"structured": ("roofline", "structured"),
                                          "fraction": ("power", "fraction")}
#: Share of each method's speculative configurations held out (the largest M), at least one.
HOLD_OUT_SHARE = 1 / 3
#: Issue 10's per-sweep targets: |mean signed error| <= 3%, mean absolute error <= 5%.
BIAS_TARGET, MAE_TARGET = 0.03, 0.05


@dataclass(frozen=True)
class Sweep:
    """One public sweep, filtered to rows the model can use, with its held-out rows."""

    name: str
    path: str
    data_csv: str            # in the measurement schema
    held_out: tuple[int, ...]  # positions in the filtered rows
    skipped: int             # rows without acceptance or tok/s


def load_sweeps(files: list[Path], hardware_csv: str, *,
                priors: PriorsConfig | None = None, workdir: Path | None = None
                ) -> tuple[list[Sweep], list[str]]:
    """The sweeps in ``files`` (grouped by their ``sweep`` column) and why any was skipped;
    ``priors``: those they are fitted with; ``workdir``: whose cards (:func:`usable_sweeps`)."""
    def too_few(data, lacking: int) -> str | None:
        return None if hold_out(data.rows) else (
            f"fewer than 3 speculative configurations with acceptance and tok/s; {lacking} "
            f"{'row lacks' if lacking == 1 else 'rows lack'} them")

    found, notes = usable_sweeps(files, hardware_csv, skip=too_few, priors=priors,
                                 workdir=workdir)
    return [Sweep(name, str(path), text, hold_out(data.rows), lacking)
            for name, path, text, data, lacking, _ in found], notes


def read_text(path: Path, fix: str) -> str:
    """A file's UTF-8 text, or a one-line :class:`DataError` naming it (and ``fix``)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise DataError(f"cannot read: {reason}", file=str(path), fix=fix) from None


def sweep_records(path, text: str) -> list[dict]:
    """The rows of a sweep file as dicts, each with the header's number of fields: a row with
    more (an unquoted comma) or fewer was read with its cells shifted, a note in ``derived``
    and the real notes lost without a word."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    width = len(reader.fieldnames or ())   # (reads the header)
    records = []
    for rec in reader:
        got = width + len(rec.get(None) or ()) - sum(v is None for v in rec.values())
        if got != width:
            raise DataError(f"{got} fields where the header has {width}", file=str(path),
                            row=reader.line_num,
                            fix="quote a cell that holds a comma (\"a, b\"), or fill the "
                                "missing cells")
        records.append(rec)
    return records


def refuse_repeats(files: list[Path]) -> None:
    """A sweep file named twice (``--sweeps A A``, an overlapping shell glob, the same file
    under two spellings) is a :class:`DataError`: its rows would be fitted and scored twice and
    weigh double in the pooled scores."""
    seen: dict[Path, Path] = {}
    for path in files:
        key = Path(path).resolve()
        if key in seen:
            raise DataError(f"named twice in --sweeps (also as {seen[key]})", file=str(path),
                            fix="name each sweep file once: its rows would be scored twice "
                                "and weigh double in the pooled scores")
        seen[key] = Path(path)


def usable_sweeps(files: list[Path], hardware_csv: str, skip=None, *,
                  priors: PriorsConfig | None = None, workdir: Path | None = None
                  ) -> tuple[list[tuple], list[str]]:
    """Every sweep in ``files`` that the model can fit: (name, path, measurement CSV text,
    Measurements, rows lacking acceptance, tok/s or a shape (left out), rows in all), and why the
    others were skipped (tok/s in relative units, rows that do not validate, or the reason
    ``skip(measurements, rows lacking)`` gives), in file order. ``priors``: the priors each
    sweep is fitted with (None: the bundled ones' methods, no names checked): their
    ``[methods]`` table bounds each row's accept_len (core/methods.py max_accept), and a name
    of theirs that names nothing a kept sweep's rows or the cards know is a
    :class:`~ddtree_bayes.core.errors.PriorsError`, as ``fit`` of that sweep refuses it
    (engine/fitting.py ``check_names``), before any fit. ``workdir``: the working directory
    whose drafter and model cards (its data/drafters.csv and models.csv) the rows are checked
    against, as the sweeps' fits read them (None: the current one)."""
    from ddtree_bayes.core.drafters import check_row_drafters, drafter_table
    from ddtree_bayes.core.paths import own_data_file
    from ddtree_bayes.engine.fitting import names_checker

    hardware = load_hardware("hardware.csv", text=hardware_csv)
    refuse_repeats(files)
    drafters = drafter_table(own_data_file("drafters.csv", workdir))
    methods = None if priors is None else priors.methods
    check_names = None if priors is None else names_checker(priors, workdir, drafters)
    found, notes = [], []
    where: dict[str, Path] = {}   # sweep name -> the file that holds it
    for path in files:
        records = sweep_records(path, read_text(path, "pass public sweep CSVs (data/public/*.csv) "
                                                 "with --sweeps"))
        missing = [c for c in ("sweep", *COLUMNS) if not records or c not in records[0]]
        if missing:
            raise DataError("not a public sweep file" + (" (no rows)" if not records else ""),
                            file=str(path), row=1, column=missing[0],
                            fix="see data/public/README.md for the schema")
        by_sweep: dict[str, list[dict]] = {}
        for rec in records:
            by_sweep.setdefault(rec["sweep"], []).append(rec)
        for name in by_sweep:   # (scored by name: two files' rows were mixed as one sweep)
            if name in where:
                raise DataError(f"sweep {name!r} is also in {where[name]}", file=str(path),
                                column="sweep", fix="give each sweep its own name in the "
                                                    "sweep column, or pass one of the two files")
            where[name] = path
        for name, recs in by_sweep.items():
            if any("relative units" in r.get("derived", "").lower() for r in recs):
                notes.append(f"{name}: skipped (tok/s in relative units: the roofline's compute "
                             "part needs absolute step times)")
                continue
            usable = [r for r in recs if r["accept_len"].strip() and r["tok_s"].strip()
                      and r["gpus"].strip() and states_verify_tokens(r, methods)]
            out = io.StringIO()
            # the optional columns too: a row at C > 1 must not be read as one stream
            writer = csv.DictWriter(out, fieldnames=[*COLUMNS, *OPTIONAL_COLUMNS], restval="",
                                    extrasaction="ignore", lineterminator="\n")
            writer.writeheader()
            writer.writerows(usable)
            text = out.getvalue()
            try:
                data = load_measurements(f"{path} [{name}]", hardware, text=text,
                                         allow_duplicates=True, methods=methods)
                check_row_drafters(data.rows, drafters, data.path)
            except DataError as err:
                notes.append(f"{name}: skipped ({err})")
                continue
            reason = skip(data, len(recs) - len(usable)) if skip else None
            if reason:
                notes.append(f"{name}: skipped ({reason})")
                continue
            if check_names is not None:   # (the priors' error, not the sweep's: no skip)
                check_names(data)
            found.append((name, path, text, data, len(recs) - len(usable), len(recs)))
    return found, notes


def hold_out(rows) -> tuple[int, ...]:
    """Positions of the largest-M configurations of each speculative method (a share
    :data:`HOLD_OUT_SHARE` of its distinct configurations, at least one), when the method has
    at least three; AR rows are always kept for training."""
    held: list[int] = []
    by_method: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if r.method != AR_METHOD:
            by_method.setdefault(r.method, []).append(i)
    for ix in by_method.values():
        configs = sorted({(rows[i].verify_tokens, rows[i].block or 0) for i in ix})
        if len(configs) < 3:
            continue
        k = max(1, math.floor(len(configs) * HOLD_OUT_SHARE))
        top = set(configs[-k:])
        held += [i for i in ix if (rows[i].verify_tokens, rows[i].block or 0) in top]
    return tuple(sorted(held))


def with_forms(priors_toml: str, moe_form: str, step_form: str) -> str:
    """The priors text with ``[model]``'s moe_form and step_form set."""
    text = re.sub(r'(?m)^step_form\s*=.*\n', "", priors_toml)
    text, n = re.subn(r'(?m)^moe_form\s*=.*$', f'moe_form = "{moe_form}"\nstep_form = "{step_form}"',
                      text, count=1)
    if n == 0:
        text = text.replace("[model]", f'[model]\nmoe_form = "{moe_form}"\nstep_form = "{step_form}"', 1)
    return text


def run_split(sweep: Sweep, structure: str, priors_toml: str, hardware_csv: str, cards: dict,
              seed: int, settings: SamplerSettings) -> dict:
    """Fit one structure on a sweep's training rows; predict the held-out rows."""
    t0 = time.perf_counter()
    moe_form, step_form = STRUCTURES[structure]
    inputs = Inputs(sweep.data_csv, with_forms(priors_toml, moe_form, step_form), hardware_csv,
                    f"{sweep.path} [{sweep.name}]", **cards)
    draws, failures, data, baseline, train = refit_without(inputs, sweep.held_out, seed, settings)
    rng = np.random.default_rng(seed)
    rows, samples = [], []
    for i in sweep.held_out:
        m = data.rows[i]
        samples.append(predict_row(draws, m, rng))
        q = np.quantile(samples[-1], [0.05, 0.25, 0.5, 0.75, 0.95])
        base = baseline(m)
        assert base is not None   # load_sweeps keeps rows with an acceptance only
        rows.append({"sweep": sweep.name, "structure": structure, "row": m.row,
                     "method": m.method, "block": m.block, "budget": m.budget,
                     "verify_tokens": m.verify_tokens, "measured": m.tok_s,
                     "median": float(q[2]), "lo50": float(q[1]), "hi50": float(q[3]),
                     "lo90": float(q[0]), "hi90": float(q[4]), "baseline": float(base)})
    odds = attainability(np.array(samples), np.array([r["median"] for r in rows]),
                         np.array([r["measured"] for r in rows]),
                         scatter_parts(draws.variables)[0], rng)
    return {"sweep": sweep.name, "structure": structure, "seconds": time.perf_counter() - t0,
            "converged": not failures, "failures": failures, "remedy": draws.meta["remedy"],
            "rows": rows, "train_max_verify": max(m.verify_tokens for m in train),
            "attainability": odds}


def attainability(samples: np.ndarray, medians: np.ndarray, measured: np.ndarray,
                  noise_sd: np.ndarray, rng: np.random.Generator) -> dict:
    """How often a sweep's targets (:data:`BIAS_TARGET`, :data:`MAE_TARGET`) are met when the
    held-out measurements really vary as the fit says they do.

    ``samples`` (held-out rows, draws) is the joint posterior predictive of the held-out tok/s
    (row i's draw j comes from posterior draw j), ``medians`` the reported medians, ``noise_sd``
    (draws,) the fit's run-to-run sd of log tok/s (``noise_sd``: not a configuration's own
    error ``config_sd``, which an oracle knowing the true means does not face). ``p_bias`` /
    ``p_mae``: the share of predictive draws whose errors ``median / y - 1`` meet the target -
    what a calibrated model scores. ``noise_p_bias`` / ``noise_p_mae``: the same for an oracle
    that knows each configuration's true mean, so that only run-to-run noise
    ``y = mean * exp(e)`` is left. That noise is the fit's estimate: in a sweep without repeated
    runs it is the scatter the structure leaves unexplained (prior median 3%), so the oracle's
    odds are as good as that estimate. ``bias_percentile``: where the observed bias falls in its
    predictive distribution (uniform over sweeps when the model is calibrated).
    """
    err = medians[:, None] / samples - 1.0
    bias, mae = err.mean(axis=0), np.abs(err).mean(axis=0)
    oracle = np.exp(-noise_sd[None, :] * rng.standard_normal(samples.shape)) - 1.0
    observed = float(np.mean(medians / measured - 1.0))
    return {"p_bias": float(np.mean(np.abs(bias) <= BIAS_TARGET)),
            "p_mae": float(np.mean(mae <= MAE_TARGET)),
            "noise_p_bias": float(np.mean(np.abs(oracle.mean(axis=0)) <= BIAS_TARGET)),
            "noise_p_mae": float(np.mean(np.abs(oracle).mean(axis=0) <= MAE_TARGET)),
            "noise_sd": float(np.median(noise_sd)),
            "bias_percentile": float(np.mean(bias <= observed))}


def sweep_inputs(files: list[Path] | None, workdir: Path | None,
                 priors_path: str | Path | None) -> tuple[list[Path], str, dict, PriorsConfig]:
    """The public sweep files (default: ``data/public/*.csv``), the hardware table's text, the
    model and drafter cards' texts (:func:`~ddtree_bayes.workflows.validation.card_texts`) and
    the priors that ``validate --extrapolate`` (and ``--from-smallest``) fit them with."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.config import load_priors

    files = files or sorted((workdir or Path.cwd()).joinpath("data", "public").glob("*.csv"))
    files = [f for f in files if f.name != "hardware_flops.csv"]
    if not files:
        raise DataError("no public sweep files", file="data/public/",
                        fix="pass sweep CSVs with --sweeps, or run from the repository root")
    return (files, hardware_table(workdir).text, card_texts(workdir),
            load_priors(priors_path or paths.priors_file(workdir)))


def extrapolate(files: list[Path] | None = None, priors_path: str | Path | None = None, *,
                structures: tuple[str, ...] = tuple(STRUCTURES), jobs: int = 1,
                seed: int = DEFAULT_SEED, settings: SamplerSettings | None = None,
                workdir: Path | None = None, progress: bool = True) -> dict:
    """Run every (sweep, structure) split and summarise per sweep and pooled."""
    files, hardware_csv, cards, priors = sweep_inputs(files, workdir, priors_path)
    priors_toml = priors.text
    sweeps, notes = load_sweeps(files, hardware_csv, priors=priors, workdir=workdir)
    if not sweeps:
        raise DataError("no sweep can be split: " + "; ".join(notes), file=str(files[0]),
                        fix="a sweep needs 3+ speculative configurations with acceptance and tok/s")
    settings = settings or SamplerSettings()
    tasks = [(s, st, priors_toml, hardware_csv, cards, seed, settings)
             for s in sweeps for st in structures]
    t0 = time.perf_counter()

    def report(i, n, res):
        if progress:
            bar = "#" * int(20 * i / n)
            print(f"\r[extrapolate] [{bar:<20}] {i}/{n} fits ({res['sweep']}, {res['structure']})",
                  end="\n" if i == n else "", file=sys.stderr, flush=True)

    results = dispatch(run_split, tasks, jobs=jobs, progress=report)
    per_sweep = []
    for s in sweeps:
        mine = [r for r in results if r["sweep"] == s.name]
        entry = {"sweep": s.name, "file": s.path, "held_out": len(s.held_out),
                 "skipped_rows": s.skipped,
                 "train_max_verify": mine[0]["train_max_verify"],
                 "held_out_verify": sorted({r["verify_tokens"] for r in mine[0]["rows"]}),
                 "baseline": scores(mine[0]["rows"], baseline=True)}
        for r in mine:
            entry[r["structure"]] = {**scores(r["rows"]), "converged": r["converged"],
                                     "failures": r["failures"], "remedy": r.get("remedy"),
                                     "attainability": r["attainability"]}
        per_sweep.append(entry)
    # a fit that failed its gates keeps its sweep's own line; its rows are not pooled, nor is
    # its sweep counted in the targets (they counted as if fine)
    counted, unconverged = converged_only((f"{r['sweep']} ({r['structure']})", r["converged"],
                                           r["rows"]) for r in results)
    pooled = {st: scores([row for row in counted if row["structure"] == st]) for st in structures}
    for st in structures:
        odds = [r["attainability"] for r in results if r["structure"] == st and r["converged"]]
        fine = [e[st] for e in per_sweep if e[st]["converged"] and e[st]["n"]]
        pooled[st]["targets"] = {
            "sweeps": len(odds),
            "met_bias": sum(abs(sc["bias"]) <= BIAS_TARGET for sc in fine),
            "met_mae": sum(sc["mae"] <= MAE_TARGET for sc in fine),
            "expected_bias": float(sum(o["p_bias"] for o in odds)),
            "expected_mae": float(sum(o["p_mae"] for o in odds)),
            "p_all_bias": float(np.prod([o["p_bias"] for o in odds])),
            "noise_p_all_bias": float(np.prod([o["noise_p_bias"] for o in odds])),
            "p_all_mae": float(np.prod([o["p_mae"] for o in odds])),
            "noise_p_all_mae": float(np.prod([o["noise_p_mae"] for o in odds]))}
    # (the rows the first structure scores: the same rows as it)
    pooled["baseline"] = scores([row for row in counted if row["structure"] == structures[0]],
                                baseline=True)
    return {"seed": seed, "settings": settings.as_dict(), "seconds": time.perf_counter() - t0,
            "structures": {k: STRUCTURES[k] for k in structures}, "sweeps": per_sweep,
            "pooled": pooled, "unconverged_rows": unconverged, "notes": notes,
            "rows": [row for r in results for row in r["rows"]]}

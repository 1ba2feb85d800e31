"""Does the step extrapolate in concurrency? ``ddtree-bayes validate --extrapolate
--concurrency`` (issue 22).

Per public concurrency sweep (``data/public/conc/*.csv``: one model on one system and
engine, AR and speculative rows at several concurrencies C), fit the rows at C <=
``train_max`` and predict the rows at the ``test`` concurrencies: 90% coverage, mean signed
and absolute error of the median and the mean 90% width of the total tok/s (the per-user
figure is total / C draw by draw, so its relative errors are the same), beside a flat +-30%
band around the same median, pooled over the sweeps whose fit passed its convergence gates
(a failed fit's rows keep their sweep's own line and are named in ``unconverged_rows``). Per
context and speculative method it also compares the crossover: the first C of the sweep at
which speculation is measured slower than AR, against the first at which the fit's P(faster
than AR) falls below 0.5 (counted over the converged fits too; those the sweep shows at a
fitted C, in the training rows, apart: ``crossovers_beyond_fit``).

Rows whose speculative configuration has no verify tokens (a page that does not say the
draft depth) are skipped; a sweep whose model has no card is skipped and said.
"""

from __future__ import annotations

import csv
import io
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddtree_bayes.core.config import DEFAULT_SEED, SamplerSettings
from ddtree_bayes.core.data import COLUMNS, OPTIONAL_COLUMNS, Measurement, Measurements, load_measurements
from ddtree_bayes.core.errors import DataError, QueryError
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.workflows.validation import (
    Inputs,
    card_texts,
    converged_only,
    refit_without,
    scored_interval,
)

#: The flat band of the deterministic comparison.
BAND = 0.30


def read_sweep(path: Path) -> list[dict]:
    """A concurrency sweep file's rows, read as ``--extrapolate`` reads its sweeps (UTF-8,
    each row with the header's number of cells); a file that is not one (no such file, not
    UTF-8, a column of the measurement schema missing) is a one-line :class:`DataError`
    naming it: `--sweeps data/hardware.csv` was "internal error: KeyError: 'model'"."""
    from ddtree_bayes.workflows.extrapolation import read_text, sweep_records

    records = sweep_records(path, read_text(path, "pass concurrency sweep CSVs "
                                             "(data/public/conc/*.csv) with --sweeps"))
    missing = [c for c in COLUMNS if not records or c not in records[0]]
    if missing:
        raise DataError("not a concurrency sweep file" + (" (no rows)" if not records else ""),
                        file=str(path), row=1, column=missing[0],
                        fix="see data/public/conc/README.md for the schema")
    return records


def sweep_csv(records: list[dict]) -> tuple[str, int]:
    """A concurrency sweep's rows (:func:`read_sweep`) in the measurement schema (notes
    dropped), and the rows skipped."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS + OPTIONAL_COLUMNS, extrasaction="ignore",
                       lineterminator="\n")
    w.writeheader()
    skipped = 0
    for r in records:
        if r["method"] != "ar" and not r.get("verify_tokens"):
            skipped += 1
            continue
        w.writerow({**r, "notes": ""})
    return buf.getvalue(), skipped


@dataclass(frozen=True)
class Sweep:
    """A sweep file read once: its rows in the measurement schema (``text``, the fit's input),
    the rows :func:`sweep_csv` skipped, and the rows loaded and validated (``data``)."""

    path: Path
    text: str
    skipped: int
    data: Measurements


def summary(rows: list[dict]) -> dict:
    """Coverage, bias, mean abs error and width of scored rows, and the flat +-30%'s coverage.

    >>> s = summary([{"measured": 100.0, "median": 90.0, "lo90": 80.0, "hi90": 110.0},
    ...              {"measured": 100.0, "median": 120.0, "lo90": 105.0, "hi90": 140.0}])
    >>> s["cov90"], round(s["bias"], 3), round(s["mean_abs"], 3), s["flat30_cov"]
    (0.5, 0.05, 0.15, 1.0)
    """
    err = [r["median"] / r["measured"] - 1 for r in rows]
    return {"n": len(rows),
            "cov90": sum(r["lo90"] <= r["measured"] <= r["hi90"] for r in rows) / len(rows),
            "bias": statistics.mean(err), "mean_abs": statistics.mean(map(abs, err)),
            "width90": statistics.mean((r["hi90"] - r["lo90"]) / r["median"] for r in rows),
            "flat30_cov": sum(r["median"] * (1 - BAND) <= r["measured"] <= r["median"] * (1 + BAND)
                              for r in rows) / len(rows)}


def crossovers(draws, rows: list[Measurement], seed: int) -> list[dict]:
    """Per context and speculative configuration: the measured and the predicted crossover
    concurrency (None: speculation is faster at every C of the sweep), and P(faster than
    AR) at each C."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.posterior import blank_context

    rng = np.random.default_rng(seed)
    out = []
    # (a blank context is the fit's default, as the fit read it; this read it as 0)
    blank = blank_context(draws)
    # (each drafter's rows apart, as the fit keys their acceptance and configurations)
    keys = sorted({(m.method, m.block, m.budget, m.context(blank), m.drafter) for m in rows
                   if m.method != "ar"}, key=str)
    for method, block, budget, ctx, drafter in keys:
        ar = {m.concurrency: m.tok_s for m in rows
              if m.method == "ar" and m.context(blank) == ctx}
        spec = {m.concurrency: m for m in rows if (m.method, m.block, m.budget, m.drafter) ==
                (method, block, budget, drafter) and m.context(blank) == ctx}
        grid = sorted(set(ar) & set(spec))
        if len(grid) < 2:
            continue
        first = next((c for c in grid if spec[c].tok_s < ar[c]), None)
        p = []
        for c in grid:
            m = spec[c]
            sc = P.resolve_scenario(draws, hardware=m.hardware, gpus=m.gpus, engine=m.engine,
                                    method=method, block=block, budget=budget,
                                    verify_tokens=m.verify_tokens, context_tokens=ctx,
                                    model=m.model, concurrency=c, drafter=m.drafter)
            sc = P.with_row_drafter(draws, sc, m)   # (its passes priced by its card)
            p.append(P.p_faster_than_ar(draws, sc, P.row_acceptance(draws, m, rng), rng))
        predicted = next((c for c, pc in zip(grid, p, strict=True) if pc < 0.5), None)
        within = (first is None and predicted is None) or (
            first is not None and predicted is not None
            and abs(grid.index(first) - grid.index(predicted)) <= 1)
        out.append({"method": method, "block": block, "context_tokens": ctx, "grid": grid,
                    "measured_crossover": first, "predicted_crossover": predicted,
                    "p_faster_than_ar": p, "within_one_step": within})
    return out


def check_sweep(sweep: Sweep, priors_toml: str, hardware_csv: str, card_text: dict,
                train_max: int, test: tuple[int, ...], seed: int,
                settings: SamplerSettings) -> dict:
    """Fit one sweep's rows at C <= ``train_max``; score its rows at ``test``."""
    t0 = time.perf_counter()
    inputs = Inputs(sweep.text, priors_toml, hardware_csv, str(sweep.path), **card_text)
    held = tuple(i for i, m in enumerate(sweep.data.rows) if m.concurrency > train_max)
    draws, failures, data, _, _ = refit_without(inputs, held, seed, settings)
    rng = np.random.default_rng(seed)
    rows = [{"row": m.row, "method": m.method, "block": m.block,
             "context_tokens": m.context_tokens, "concurrency": m.concurrency,
             **scored_interval(draws, m, rng)}
            for m in data.rows if m.concurrency in test]
    out = {"sweep": sweep.path.name, "skipped_rows": sweep.skipped, "converged": not failures,
           "failures": failures, "train_max": train_max,
           "trained_rows": len(data.rows) - len(held), "seconds": time.perf_counter() - t0,
           "crossovers": [
               # (a crossover the sweep shows at a fitted C is in the training rows: counted
               # apart from those the fit had to predict)
               {**x, "fitted_range": x["measured_crossover"] is not None
                and x["measured_crossover"] <= train_max}
               for x in crossovers(draws, list(data.rows), seed)], "rows": rows}
    if rows:
        out.update(summary(rows))
    return out


def _streams(record: dict) -> int:
    """A sweep row's concurrency as the file writes it (blank: 1; unreadable: 0, never a
    test value; the loader names it when the sweep is read)."""
    try:
        return int(float(record.get("concurrency") or 1))
    except ValueError:
        return 0


def extrapolate_concurrency(files: list[Path] | None = None,
                            priors_path: str | Path | None = None, *, train_max: int = 4,
                            test: tuple[int, ...] = (8, 16), seed: int = DEFAULT_SEED,
                            settings: SamplerSettings | None = None,
                            workdir: Path | None = None, progress: bool = True) -> dict:
    """Run :func:`check_sweep` on every sweep (default ``data/public/conc/*.csv``) and pool."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.hardware_table import hardware_table

    t0 = time.perf_counter()
    files = files or sorted((workdir or Path.cwd()).joinpath("data", "public", "conc")
                            .glob("*.csv"))
    if not files:
        raise DataError("no concurrency sweep files", file="data/public/conc/",
                        fix="pass sweep CSVs with --sweeps, or run from the repository root")
    from ddtree_bayes.workflows.extrapolation import refuse_repeats

    refuse_repeats(files)   # (a sweep named twice was fitted twice and pooled twice)
    priors = load_priors(priors_path or paths.priors_file(workdir))
    hardware_csv = hardware_table(workdir).text
    card_text = card_texts(workdir)
    cards = load_model_cards("models.csv", text=card_text["models_csv"])
    settings = settings or SamplerSettings()
    sweeps, notes = [], []
    runnable: list[Sweep] = []
    from ddtree_bayes.core.data import load_hardware
    from ddtree_bayes.core.drafters import check_row_drafters, drafter_table

    table = load_hardware("hardware.csv", text=hardware_csv)
    drafters = (drafter_table("drafters.csv", card_text["drafters_csv"])
                if card_text.get("drafters_csv") else drafter_table())
    for path in files:   # every skip, and every unreadable row, known before the first fit
        records = read_sweep(path)
        missing = sorted({r["model"] for r in records} - set(cards))
        if missing:
            notes.append(f"{path.name}: skipped (no model card for {', '.join(missing)})")
        elif not any(_streams(r) in test for r in records):
            notes.append(f"{path.name}: skipped (no row at C = {', '.join(map(str, test))})")
        else:
            # loaded before any fit: a bad cell in the third file stopped the run after the
            # first two sweeps' fits
            text, skipped = sweep_csv(records)
            # (bounded by the priors' [methods], as the fit of the sweep bounds its rows)
            data = load_measurements(str(path), table, text=text, methods=priors.methods)
            check_row_drafters(data.rows, drafters, data.path)
            runnable.append(Sweep(path, text, skipped, data))
    from ddtree_bayes.engine.fitting import names_checker

    check_names = names_checker(priors, workdir, drafters)
    for sweep in runnable:   # (the priors' names, as fit of each sweep checks them)
        check_names(sweep.data)
    if not runnable:
        no_row = [n for n in notes if "(no row at C" in n]
        raise QueryError(
            (f"no sweep has a row at C = {', '.join(map(str, test))} to predict" if no_row
             else "no sweep can be checked: none has a model card"),
            fix=("pick --test-concurrency values the sweeps measured" if no_row else
                 "add the models' cards (`ddtree-bayes card add`)") + " (" + "; ".join(notes[:3])
            + ")")
    for i, sweep in enumerate(runnable, start=1):
        res = check_sweep(sweep, priors.text, hardware_csv, card_text, train_max, test, seed,
                          settings)
        sweeps.append(res)
        if progress:
            n = res.get("n", 0)
            print(f"[concurrency] {i}/{len(runnable)} {sweep.path.name}: {n} "
                  f"row{'s' * (n != 1)} scored ({res['seconds']:.0f} s)", file=sys.stderr,
                  flush=True)
    # a sweep whose fit failed its gates keeps its own line; its rows and crossovers are not
    # pooled (they counted as if fine)
    scored, unconverged = converged_only((s["sweep"], s["converged"], s["rows"]) for s in sweeps)
    cross = [x for s in sweeps if s["converged"] for x in s["crossovers"]
             if x["measured_crossover"] is not None]
    return {"mode": "concurrency", "train_max": train_max, "test": list(test), "seed": seed,
            "seconds": time.perf_counter() - t0, "sweeps": sweeps, "notes": notes,
            "pooled": summary(scored) if scored else None, "unconverged_rows": unconverged,
            "crossovers_shown": len(cross),
            "crossovers_within_one_step": sum(x["within_one_step"] for x in cross),
            "crossovers_beyond_fit": sum(not x["fitted_range"] for x in cross),
            "crossovers_beyond_fit_within_one_step": sum(
                x["within_one_step"] for x in cross if not x["fitted_range"])}

"""The headline's shape as a validation: ``validate --extrapolate --from-smallest`` (issue 20).

The mission's headline measured AR and one tree budget and asked about every larger one. Per
public budget / depth sweep (``data/public/*.csv``, read as ``validate --extrapolate`` reads
them) and per speculative method of it measured at two or more configurations: fit the
sweep's AR rows plus that method's *smallest* configuration (its other rows and the other
methods' rows are left out of the fit), predict every larger configuration of the method at
its measured acceptance. Scores per split, per engine and pooled, and the bias, coverage,
error and width **by extrapolation ratio** ``M_predicted / M_trained`` (verify tokens), binned
by :data:`RATIO_BINS`; beside them the original formula refit by least squares on the same
rows, with its flat +-30%. The pooled and per-engine scores count the fits that passed their
convergence gates only; a failed fit keeps its split's own line and is named in
``unconverged_rows``.

A sweep without an AR row is not the headline's shape and is left out (named in ``notes``);
so is a method measured at one configuration only.

With ``corpus`` (``--corpus FILE``) each split is fitted together with that measurement file's
rows, less those of the split's own model (under any deployment name) on its own system: what
a user who fits the public corpus beside their AR row and one configuration would get. The
corpus rows are always in training and never scored; engines, drafter passes and compute
efficiencies the corpus measured then inform the split through the partially pooled effects.
docs/validation.md, "The headline's shape beside the public corpus", has what that gives.
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ddtree_bayes.core.config import DEFAULT_SEED, SamplerSettings
from ddtree_bayes.core.data import AR_METHOD, COLUMNS, OPTIONAL_COLUMNS, load_hardware, load_measurements
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.pairs import same_family
from ddtree_bayes.workflows import validation as V
from ddtree_bayes.workflows.extrapolation import (
    STRUCTURES,
    read_text,
    sweep_inputs,
    usable_sweeps,
    with_forms,
)

#: Extrapolation-ratio bins (upper bound inclusive, label): M_predicted / M_trained.
RATIO_BINS: tuple[tuple[float, str], ...] = ((2.0, "<=2x"), (3.0, "2-3x"), (4.0, "3-4x"),
                                             (math.inf, ">4x"))
#: Issue 20's done-when targets for this mode (after the model work): median abs error, |bias|
#: in every ratio bin, mean 90% width.
TARGETS = {"mdae": 0.08, "bias_per_ratio": 0.05, "width90": 0.35}


def ratio_bin(ratio: float) -> str:
    """The :data:`RATIO_BINS` label of an extrapolation ratio (``2.0`` -> ``<=2x``)."""
    return next(label for upper, label in RATIO_BINS if ratio <= upper)


@dataclass(frozen=True)
class Split:
    """One (sweep, method): positions of its training rows (the sweep's AR rows and the
    method's smallest configuration) and of the larger configurations predicted; every
    other row of the sweep is left out of the fit and not predicted."""

    sweep: str
    path: str
    data_csv: str              # the sweep in the measurement schema
    method: str
    trained: tuple[int, ...]
    predicted: tuple[int, ...]
    trained_verify: int        # M of the smallest configuration
    skipped_rows: int          # rows of the sweep without acceptance or tok/s
    n_rows: int                # rows of data_csv
    corpus_rows: int = 0       # rows of --corpus put first in data_csv (always trained)

    @property
    def name(self) -> str:
        return f"{self.sweep}/{self.method}"

    @property
    def held_out(self) -> tuple[int, ...]:
        """Rows given likelihood weight 0: all but the trained ones."""
        return tuple(i for i in range(self.n_rows) if i not in self.trained)


def config_key(m) -> tuple[int, int]:
    """A speculative configuration's order: verify tokens, then block (as hold_out sorts)."""
    return (m.verify_tokens, m.block or 0)


def splits_of(name: str, path: str, text: str, data, skipped_rows: int
              ) -> tuple[list[Split], list[str]]:
    """The splits of one sweep (one per method with 2+ configurations) and notes."""
    rows = data.rows
    ar = tuple(i for i, m in enumerate(rows) if m.method == AR_METHOD)
    by_method: dict[str, list[int]] = {}
    for i, m in enumerate(rows):
        if m.method != AR_METHOD:
            by_method.setdefault(m.method, []).append(i)
    if not ar:
        return [], [f"{name}: left out (no AR row: the headline's shape is AR plus one "
                    f"configuration; methods {', '.join(by_method) or 'none'})"]
    if not by_method:
        return [], [f"{name}: left out (no speculative row with acceptance and tok/s; "
                    f"{skipped_rows} {'row lacks' if skipped_rows == 1 else 'rows lack'} them)"]
    splits, notes = [], []
    for method, ix in by_method.items():
        configs = sorted({config_key(rows[i]) for i in ix})
        if len(configs) < 2:
            notes.append(f"{name}: {method} left out (one configuration: nothing larger to "
                         "predict)")
            continue
        smallest = configs[0]
        trained = tuple(sorted(ar + tuple(i for i in ix if config_key(rows[i]) == smallest)))
        predicted = tuple(i for i in ix if config_key(rows[i]) != smallest)
        splits.append(Split(name, path, text, method, trained, predicted, smallest[0],
                            skipped_rows, len(rows)))
    return splits, notes


def load_splits(files: list[Path], hardware_csv: str, *, priors=None,
                workdir: Path | None = None) -> tuple[list[Split], list[str]]:
    """Every split of the sweeps in ``files`` and why a sweep or method was left out;
    ``priors``: those they are fitted with; ``workdir``: whose cards (extrapolation.py
    ``usable_sweeps``)."""
    found, notes = usable_sweeps(files, hardware_csv, priors=priors, workdir=workdir)
    splits = []
    for name, path, text, data, lacking, _ in found:
        mine, why = splits_of(name, str(path), text, data, lacking)
        splits += mine
        notes += why
    return splits, notes


def _measured(m) -> tuple:
    """What a row measured: its configuration and its tok/s (a corpus row repeating a
    predicted row of a split is that row, whatever its model is called)."""
    return (m.hardware, m.gpus, m.engine, m.method, m.block, m.budget, m.verify_tokens,
            m.concurrency, m.tok_s)


def _csv_value(v) -> str:
    return "" if v is None else repr(v) if isinstance(v, float) else str(v)


def with_corpus(splits: list[Split], corpus: Path, hardware_csv: str, cards: dict,
                *, priors=None, workdir: Path | None = None) -> tuple[list[Split], int]:
    """Each split with ``corpus``'s rows put first, always in training, less the rows of the
    split's own target on its own system (its model under any deployment name,
    :func:`same_family`, on the same hardware and GPU count); and the number of corpus rows
    read. Raises :class:`DataError` (file, row, column) on a corpus that does not validate,
    that names a model without a model card, or that still holds a row a split predicts.
    ``priors`` (the fit's) gives the methods the rows are read with and the names checked."""
    from ddtree_bayes.core.drafters import check_row_drafters, drafter_table
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled, own_data_file

    methods = None if priors is None else priors.methods
    text = read_text(corpus, "pass a measurement CSV with --corpus")
    hardware = load_hardware("hardware.csv", text=hardware_csv)
    data = load_measurements(str(corpus), hardware, text=text, methods=methods,
                             allow_duplicates=True)   # validates: file, row, column, fix
    drafters = drafter_table(own_data_file("drafters.csv", workdir))   # (workdir's, as the fits')
    check_row_drafters(data.rows, drafters, data.path)
    if priors is not None:   # (the priors' names, as fit of the corpus checks them)
        from ddtree_bayes.engine.fitting import names_checker

        names_checker(priors, workdir, drafters)(data)
    known = (load_model_cards("models.csv", text=cards["models_csv"]) if cards.get("models_csv")
             else load_model_cards(bundled("models.csv")))
    for m in data.rows:
        if m.model not in known:
            raise DataError(f"no model card for {m.model!r}", file=str(corpus), row=m.row,
                            column="model", fix="add its card (ddtree-bayes card add) or leave "
                                                "its rows out of the corpus")
    out = []
    for s in splits:
        own = load_measurements(s.name, hardware, text=s.data_csv, methods=methods,
                                allow_duplicates=True).rows
        kept = [m for m in data.rows
                if not any(same_family(m.model, o.model) and (m.hardware, m.gpus)
                           == (o.hardware, o.gpus) for o in own)]
        predicted = {_measured(own[i]): own[i].row for i in s.predicted}
        for m in kept:
            if _measured(m) in predicted:
                raise DataError(f"repeats row {predicted[_measured(m)]} of {s.name}, which "
                                "the split predicts", file=str(corpus), row=m.row,
                                fix="leave the held-out sweeps' rows out of the corpus")
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(COLUMNS + OPTIONAL_COLUMNS)
        writer.writerows([_csv_value(getattr(m, c)) for c in COLUMNS + OPTIONAL_COLUMNS]
                         for m in (*kept, *own))
        n = len(kept)
        out.append(replace(s, data_csv=buf.getvalue(),
                           trained=tuple(range(n)) + tuple(i + n for i in s.trained),
                           predicted=tuple(i + n for i in s.predicted), n_rows=s.n_rows + n,
                           corpus_rows=n))
    return out, len(data.rows)


def run_from_smallest(split: Split, structure: str, priors_toml: str, hardware_csv: str,
                      cards: dict, seed: int, settings: SamplerSettings,
                      cores: int = 1) -> dict:
    """Fit one structure on a split's training rows; predict its larger configurations."""
    t0 = time.perf_counter()
    moe_form, step_form = STRUCTURES[structure]
    inputs = V.Inputs(split.data_csv, with_forms(priors_toml, moe_form, step_form), hardware_csv,
                      f"{split.path} [{split.sweep}]", **cards)
    draws, failures, data, baseline, _ = V.refit_without(inputs, split.held_out, seed,
                                                         settings, cores)
    rng = np.random.default_rng(seed)
    rows = []
    for i in split.predicted:
        m = data.rows[i]
        base = baseline(m)
        ratio = m.verify_tokens / split.trained_verify
        rows.append({"sweep": split.sweep, "structure": structure,
                     "row": m.row - split.corpus_rows,   # its row in the sweep's own rows
                     "hardware": m.hardware, "gpus": m.gpus, "engine": m.engine,
                     "method": m.method, "block": m.block, "budget": m.budget,
                     "verify_tokens": m.verify_tokens, "trained_verify": split.trained_verify,
                     "ratio": ratio, "ratio_bin": ratio_bin(ratio), "accept_len": m.accept_len,
                     **V.scored_interval(draws, m, rng),
                     "baseline": None if base is None else float(base)})
    return {"split": split.name, "structure": structure, "seconds": time.perf_counter() - t0,
            "converged": not failures, "failures": failures, "remedy": draws.meta["remedy"],
            "rows": rows}


def by_ratio(rows: list[dict], *, baseline: bool = False) -> dict:
    """Scores per :data:`RATIO_BINS` bin that has rows, in bin order."""
    out = {}
    for _, label in RATIO_BINS:
        mine = [r for r in rows if r["ratio_bin"] == label]
        if mine:
            out[label] = V.scores(mine, baseline=baseline)
    return out


def scored(rows: list[dict], *, baseline: bool = False) -> dict:
    """:func:`~validation.scores` with the breakdown by extrapolation ratio."""
    if baseline:
        rows = [r for r in rows if r["baseline"] is not None]
    return {**V.scores(rows, baseline=baseline), "by_ratio": by_ratio(rows, baseline=baseline)}


def targets_met(score: dict) -> dict | None:
    """Issue 20's targets for this mode on a pooled posterior score (None without rows)."""
    if not score["n"]:
        return None
    return {"mdae": score["mdae"] <= TARGETS["mdae"],
            "bias_per_ratio": all(abs(b["bias"]) <= TARGETS["bias_per_ratio"]
                                  for b in score["by_ratio"].values()),
            "width90": score["width90"] <= TARGETS["width90"]}


def summarize(splits: list[Split], results: list[dict], structures: tuple[str, ...]) -> dict:
    """Per split (each fit's own rows, with its status), and pooled and per engine over the
    rows of the fits that passed their convergence gates (the baseline: the rows the first
    structure scores), with ``unconverged_rows`` (failed fit -> its rows, not pooled)."""
    per_split = []
    for s in splits:
        mine = [r for r in results if r["split"] == s.name]
        first = mine[0]["rows"]
        entry = {"split": s.name, "sweep": s.sweep, "file": s.path, "method": s.method,
                 "engine": first[0]["engine"] if first else None,
                 "system": f"{first[0]['hardware']}x{first[0]['gpus']}" if first else None,
                 "trained_rows": len(s.trained) - s.corpus_rows, "corpus_rows": s.corpus_rows,
                 "predicted": len(s.predicted),
                 "skipped_rows": s.skipped_rows, "trained_verify": s.trained_verify,
                 "predicted_verify": sorted({r["verify_tokens"] for r in first}),
                 "baseline": scored(first, baseline=True)}
        for r in mine:
            entry[r["structure"]] = {**scored(r["rows"]), "converged": r["converged"],
                                     "failures": r["failures"], "remedy": r["remedy"]}
        per_split.append(entry)
    counted, unconverged = V.converged_only((f"{r['split']} ({r['structure']})", r["converged"],
                                             r["rows"]) for r in results)
    rows = {st: [row for row in counted if row["structure"] == st] for st in structures}
    pooled = {st: {**scored(rows[st]), "targets_met": targets_met(scored(rows[st]))}
              for st in structures}
    pooled["baseline"] = scored(rows[structures[0]], baseline=True)
    # (every engine predicted: one whose fits all failed shows n 0)
    engines = list(dict.fromkeys(row["engine"] for r in results for row in r["rows"]))
    by_engine = {e: {**{st: scored([r for r in rows[st] if r["engine"] == e])
                        for st in structures},
                     "baseline": scored([r for r in rows[structures[0]] if r["engine"] == e],
                                        baseline=True)}
                 for e in engines}
    return {"splits": per_split, "pooled": pooled, "by_engine": by_engine,
            "unconverged_rows": unconverged}


def from_smallest(files: list[Path] | None = None, priors_path: str | Path | None = None, *,
                  structures: tuple[str, ...] = ("structured",), jobs: int = 1,
                  seed: int = DEFAULT_SEED, settings: SamplerSettings | None = None,
                  workdir: Path | None = None, progress: bool = True,
                  corpus: Path | None = None) -> dict:
    """``validate --extrapolate --from-smallest [--corpus FILE]``: every (split, structure)
    fit; a JSON-ready dict."""
    files, hardware_csv, cards, priors = sweep_inputs(files, workdir, priors_path)
    splits, notes = load_splits(files, hardware_csv, priors=priors, workdir=workdir)
    if not splits:
        raise DataError("no sweep has AR rows and a method at two or more configurations: "
                        + "; ".join(notes), file=str(files[0]),
                        fix="a sweep needs an AR row and 2+ speculative configurations of one "
                            "method with acceptance and tok/s")
    corpus_rows = 0
    if corpus is not None:
        splits, corpus_rows = with_corpus(splits, corpus, hardware_csv, cards, priors=priors,
                                          workdir=workdir)
    settings = settings or SamplerSettings()
    cores = max(1, (os.cpu_count() or 1) // max(jobs, 1))
    tasks = [(s, st, priors.text, hardware_csv, cards, seed, settings, cores)
             for s in splits for st in structures]
    t0 = time.perf_counter()
    if progress:
        beside = f", each beside {corpus}'s rows" if corpus is not None else ""
        predicted = sum(len(s.predicted) for s in splits)
        print(f"[validate --from-smallest] {len(splits)} splits x {len(structures)} structures "
              f"= {len(tasks)} fits, {settings.chains_x_draws()} each, "
              f"{jobs} job(s); {predicted} row{'s' * (predicted != 1)} predicted{beside}",
              file=sys.stderr, flush=True)
        for note in notes:
            print(f"[validate --from-smallest] {note}", file=sys.stderr, flush=True)

    def report(i, n, res):
        if progress:
            remedy = f" (remedy {res['remedy']})" if res["remedy"] else ""
            print(f"[validate --from-smallest] {i}/{n} fits: {res['split']} ({res['structure']}) "
                  f"{res['seconds']:.0f} s{'' if res['converged'] else ', NOT converged'}"
                  f"{remedy}, {time.perf_counter() - t0:.0f} s so far", file=sys.stderr,
                  flush=True)

    results = V.dispatch(run_from_smallest, tasks, jobs=jobs, progress=report)
    return {"mode": "from-smallest", "seed": seed, "settings": settings.as_dict(),
            "corpus": None if corpus is None else {"file": str(corpus), "rows": corpus_rows},
            "seconds": time.perf_counter() - t0,
            "structures": {k: list(STRUCTURES[k]) for k in structures},
            "ratio_bins": [label for _, label in RATIO_BINS],
            "targets": TARGETS, **summarize(splits, results, structures), "notes": notes,
            "rows": [row for r in results for row in r["rows"]]}

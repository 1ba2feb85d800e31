"""The mission's question as a validation: ``validate --group pair --keep-ar`` (issue 20).

"We measured plain (AR) decoding on this machine; what will speculative decoding give?" For
every (model, system) pair of the data with AR rows and speculative rows, two refits:

- **AR kept**: the pair's speculative rows held out, its AR rows kept in training; the
  held-out rows are predicted at their measured acceptance (a row without ``accept_len`` at
  its acceptance group's posterior, when a training row still informs that group);
- **whole pair**: every row of the pair held out (what ``validate --group pair`` does), the
  same speculative rows predicted: today's answer for a pair never measured, as the reference.

Beside them the original formula refit by least squares on the same training rows, with its
flat +-30% (it needs the acceptance: rows without one are not scored by it). Scores per pair,
per engine and method of the held-out rows, and pooled: 50% / 90% coverage, bias (mean of
``median / measured - 1``), mean and median absolute error, mean relative 90% width.

A pair without AR rows does not ask the question and is left out (``validate --group pair``
covers it), as is a pair without speculative rows (nothing to predict); so is a held-out row
without ``accept_len`` whose acceptance group has no other row left in training (its
acceptance would be the prior alone), and a pair all of whose speculative rows are left out
that way. Each is named in ``notes``; the pairs also in ``skipped_pairs``, the rows in
``skipped_rows``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddtree_bayes.core.config import DEFAULT_SEED, SamplerSettings
from ddtree_bayes.core.data import Measurements
from ddtree_bayes.workflows import validation as V

#: The two refits of a pair: its speculative rows held out (AR kept), or all of its rows.
KINDS = ("ar-kept", "whole-pair")
#: Issue 20's done-when targets for the AR-kept mode (after the model work).
TARGETS = {"coverage90": 0.90, "mdae": 0.08, "width90": 0.35}


@dataclass(frozen=True)
class PairSplit:
    """One pair's rows (positions in the measurement list) and what the two refits do."""

    pair: str
    ar: tuple[int, ...]        # AR rows: kept in the AR-kept refit
    speculative: tuple[int, ...]   # held out in both refits
    scored: tuple[int, ...]    # the speculative rows predicted and scored
    skipped: tuple[tuple[int, str], ...]   # (position, why not scored)

    def held_out(self, kind: str) -> tuple[int, ...]:
        """Rows given likelihood weight 0 by the refit ``kind``."""
        if kind == "ar-kept":
            return self.speculative
        return tuple(sorted(self.ar + self.speculative))


def pair_splits(data: Measurements) -> tuple[list[PairSplit], list[str]]:
    """Every pair with AR and speculative rows, in order of first row; and notes on the pairs
    left out (:func:`pairs_left_out`) and the rows skipped (a blank acceptance no training
    row informs)."""
    by_pair: dict[str, list[int]] = {}
    for i, m in enumerate(data.rows):
        by_pair.setdefault(data.pair(m), []).append(i)
    splits, notes = [], []
    for pair, ix in by_pair.items():
        ar = tuple(i for i in ix if not data.rows[i].is_speculative)
        spec = tuple(i for i in ix if data.rows[i].is_speculative)
        if not spec:
            notes.append(f"{pair}: left out ({_no_speculative_row(len(ar))})")
            continue
        if not ar:
            notes.append(f"{pair}: left out ({_no_ar_row(len(spec))})")
            continue
        # rows with a blank accept_len of other pairs stay in training (the pair's own all
        # leave the whole-pair refit): validate's rule in every mode
        skipped = V.prior_only_rows(data, spec + ar)
        scored = [i for i in spec if i not in {j for j, _ in skipped}]
        notes += [f"{pair}: {why}" for _, why in skipped]
        if not scored:
            notes.append(f"{pair}: left out ({_none_scored(len(spec))})")
            continue
        splits.append(PairSplit(pair, ar, spec, tuple(scored), tuple(skipped)))
    return splits, notes


def _no_speculative_row(ar: int) -> str:
    return (f"no speculative row: nothing to predict; {ar} AR row{'s' if ar != 1 else ''}, "
            "kept in every refit's training")


def _no_ar_row(spec: int) -> str:
    return (f"no AR row: the question does not apply; {spec} speculative "
            f"row{'s' * (spec != 1)}; validate --group pair covers it")


def _none_scored(spec: int) -> str:
    return ("its 1 speculative row cannot be scored" if spec == 1 else
            f"none of its {spec} speculative rows can be scored")


def pairs_left_out(splits: list[PairSplit], data: Measurements) -> list[dict]:
    """The pairs of ``data`` that :func:`pair_splits` made no split of (``splits``), in order
    of first row: ``pair``, ``ar_rows``, ``speculative_rows`` and the ``reason`` (no
    speculative row; no AR row; none of its speculative rows can be scored). Their rows stay
    in every refit's training."""
    split = {s.pair for s in splits}
    counts: dict[str, list[int]] = {}
    for m in data.rows:
        if data.pair(m) not in split:
            counts.setdefault(data.pair(m), [0, 0])[int(m.is_speculative)] += 1
    return [{"pair": pair, "ar_rows": ar, "speculative_rows": spec,
             "reason": (_no_speculative_row(ar) if not spec else _no_ar_row(spec) if not ar
                        else _none_scored(spec))}
            for pair, (ar, spec) in counts.items()]


def refits(splits: list[PairSplit], data: Measurements
           ) -> tuple[list[tuple[PairSplit, str]], list[str]]:
    """The refits to make, ``(split, kind)`` of every split and kind, but a whole-pair refit
    that would hold out every row of ``data`` (a file of one pair: its refit was the prior
    alone, and predicting from it failed with an internal error); and a note per refit not
    made."""
    tasks, notes = [], []
    for s in splits:
        for kind in KINDS:
            if len(s.held_out(kind)) < len(data.rows):
                tasks.append((s, kind))
            else:   # (only whole-pair can: an AR-kept refit keeps the pair's AR rows)
                notes.append(f"{s.pair}: no {kind} refit (every row of {data.path} is this "
                             "pair's: holding them all out leaves nothing to fit); add another "
                             "pair's rows for that reference")
    return tasks, notes


def run_pair_fold(inputs: V.Inputs, split: PairSplit, kind: str, seed: int,
                  settings: SamplerSettings, cores: int = 1) -> V.FoldResult:
    """Refit without ``split.held_out(kind)``; predict the scored speculative rows with the
    posterior and the least-squares baseline fitted on the same training rows."""
    t0 = time.perf_counter()
    draws, failures, data, baseline, _ = V.refit_without(inputs, split.held_out(kind), seed,
                                                         settings, cores)
    rng = np.random.default_rng(seed)
    rows = []
    for i in split.scored:
        m = data.rows[i]
        base = baseline(m)   # None: the original formula needs the row's acceptance
        rows.append({"kind": kind, "pair": split.pair, "model": m.model, "row": m.row,
                     "hardware": m.hardware, "gpus": m.gpus, "engine": m.engine,
                     "method": m.method, "block": m.block, "budget": m.budget,
                     "verify_tokens": m.verify_tokens, "context_tokens": m.context_tokens,
                     "accept_len": m.accept_len, **V.scored_interval(draws, m, rng),
                     "baseline": None if base is None else float(base)})
    return V.FoldResult(f"{split.pair} ({kind})", time.perf_counter() - t0, not failures,
                        failures, rows, draws.meta["remedy"])


def breakdown(rows: list[dict], key: Callable[[dict], str]) -> dict:
    """Per value of ``key(row)`` (in order of first appearance): the AR-kept and whole-pair
    posteriors' scores and the baseline's (AR kept, rows with an acceptance)."""
    out: dict[str, dict] = {}
    for value in dict.fromkeys(key(r) for r in rows):
        mine = [r for r in rows if key(r) == value]
        out[value] = kind_scores(mine)
    return out


def kind_scores(rows: list[dict]) -> dict:
    """Scores of rows of both kinds: ``ar_kept``, ``whole_pair`` (posterior), ``baseline``
    (the +-30% refit with the AR rows kept) and ``baseline_whole_pair``."""
    ar = [r for r in rows if r["kind"] == "ar-kept"]
    whole = [r for r in rows if r["kind"] == "whole-pair"]
    return {"ar_kept": V.scores(ar), "whole_pair": V.scores(whole),
            "baseline": V.scores([r for r in ar if r["baseline"] is not None], baseline=True),
            "baseline_whole_pair": V.scores([r for r in whole if r["baseline"] is not None],
                                            baseline=True)}


def summarize(splits: list[PairSplit], results: list[V.FoldResult], data: Measurements) -> dict:
    """Pooled (the scored rows of the refits that passed their convergence gates; those with a
    measured accept_len; those at an inferred acceptance), per engine and per method, over the
    same rows, with ``unconverged_rows`` (failed refit -> its rows, not pooled); per pair (each
    refit's own rows, with its fit's status); the targets; the rows skipped and the pairs left
    out."""
    rows, unconverged = V.converged_only((res.fold, res.converged, res.rows) for res in results)
    folds = {res.fold: res for res in results}
    by_pair = []
    for s in splits:
        mine = [r for res in results for r in res.rows if r["pair"] == s.pair]
        status = {}
        for kind in KINDS:
            res = folds.get(f"{s.pair} ({kind})")
            status[kind.replace("-", "_") + "_fit"] = (
                None if res is None else {"converged": res.converged, "remedy": res.remedy})
        by_pair.append({"pair": s.pair, "ar_rows": len(s.ar), "speculative_rows": len(s.speculative),
                        "scored": len(s.scored), "skipped": len(s.skipped),
                        "engines": sorted({data.rows[i].engine for i in s.speculative}),
                        "methods": sorted({data.rows[i].method for i in s.speculative}),
                        **kind_scores(mine), **status})
    pooled = kind_scores(rows)
    post = pooled["ar_kept"]
    met = None if not post["n"] else {
        "coverage90": post["coverage90"] >= TARGETS["coverage90"],
        "mdae": post["mdae"] <= TARGETS["mdae"], "width90": post["width90"] <= TARGETS["width90"]}
    return {"summary": {**pooled,
                        "with_accept_len": kind_scores([r for r in rows
                                                        if r["accept_len"] is not None]),
                        "inferred_accept": kind_scores([r for r in rows
                                                        if r["accept_len"] is None]),
                        "unconverged_rows": unconverged},
            "targets": {**TARGETS, "met": met},
            "by_pair": by_pair,
            "by_engine": breakdown(rows, lambda r: r["engine"]),
            "by_method": breakdown(rows, lambda r: r["method"]),
            "skipped_rows": [{"pair": s.pair, "row": data.rows[i].row, "reason": why}
                             for s in splits for i, why in s.skipped],
            "skipped_pairs": pairs_left_out(splits, data)}


def validate_keep_ar(data_path: str | Path | None = None, priors_path: str | Path | None = None,
                     *, jobs: int = 1, scheduler: str | None = None, seed: int = DEFAULT_SEED,
                     settings: SamplerSettings | None = None, workdir: Path | None = None,
                     progress: bool = True) -> dict:
    """``validate --group pair --keep-ar``: the two refits of every pair; a JSON-ready dict."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.fitting import FitInputs

    # what fit refuses before sampling (a method the priors do not declare, a model
    # without a card), refused here before any fold, as fit words it
    read = FitInputs.read(data_path, priors_path, workdir=workdir).check()
    data, cfg = read.measurements, read.priors
    splits, notes = pair_splits(data)
    if not splits:
        raise QueryError(f"--keep-ar: no (model, system) pair of {data.path} has both AR and "
                         "speculative rows to hold out" + (f" ({'; '.join(notes)})" if notes else ""),
                         fix="give a file with AR and speculative rows of the same pair")
    inputs = V.Inputs(data.text, cfg.text, read.hardware.text, data.path, **V.card_texts(workdir))
    settings = settings or SamplerSettings()
    tasks, not_made = refits(splits, data)
    notes = notes + not_made
    cores = 1 if scheduler else max(1, (os.cpu_count() or 1) // max(jobs, 1))
    t0 = time.perf_counter()
    if progress:
        scored = sum(len(s.scored) for s in splits)
        print(f"[validate --keep-ar] {len(splits)} pairs x 2 refits (AR kept, whole pair)"
              f"{f' less {len(not_made)}' if not_made else ''} = {len(tasks)} folds, "
              f"{settings.chains_x_draws()} each, "
              f"{'scheduler ' + scheduler if scheduler else f'{jobs} job(s)'}; "
              f"{scored} speculative row{'s' * (scored != 1)} scored", file=sys.stderr,
              flush=True)
        for note in notes:
            print(f"[validate --keep-ar] {note}", file=sys.stderr, flush=True)

    def report(i, n, res):
        if progress:
            print(f"[validate --keep-ar] {i}/{n} folds: {res.fold} {res.seconds:.0f} s"
                  f"{'' if res.converged else ', NOT converged'}"
                  f"{f' (remedy {res.remedy})' if res.remedy else ''}, "
                  f"{time.perf_counter() - t0:.0f} s so far", file=sys.stderr, flush=True)

    results = V.dispatch(run_pair_fold, [(inputs, s, kind, seed + k, settings, cores)
                                         for k, (s, kind) in enumerate(tasks)],
                         jobs=jobs, scheduler=scheduler, progress=report)
    return {"data": str(data.path), "group": "pair", "keep_ar": True, "seed": seed,
            "settings": settings.as_dict(), "seconds": time.perf_counter() - t0,
            "folds": [{"fold": r.fold, "seconds": r.seconds, "converged": r.converged,
                       "failures": r.failures, "remedy": r.remedy} for r in results],
            **summarize(splits, results, data), "notes": notes,
            "rows": [r for res in results for r in res.rows]}

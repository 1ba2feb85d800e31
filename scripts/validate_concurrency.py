#!/usr/bin/env python3
"""Issue 22's check on public concurrency sweeps: fit each sweep's rows at C <= --train-max,
predict its rows at the --test concurrencies (total tok/s of the C streams, at the acceptance
the fit infers from the training rows), and score them: 90% coverage, signed and absolute
error of the median, 90% width; beside them a flat +-30% band around the same median (a
deterministic roofline estimate with the seed's band).

    .venv/bin/python scripts/validate_concurrency.py --out docs/concurrency.json \\
        data/public/conc/vllm_mtp_qwen35_397b_lukealonso_rtxpro6000srvx4_conc.csv ...

Each sweep is fitted in a scratch folder with the default sampler; nothing in the repository
is written except --out. A sweep whose model has no card is fitted with a proxy card
(core/proxy_card.py), and one whose speculative rows have no verify_tokens is skipped (said).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ddtree_bayes.core.data import COLUMNS, OPTIONAL_COLUMNS

OUT_COLUMNS = COLUMNS + OPTIONAL_COLUMNS
BAND = 0.30


def split(path: Path, work: Path, train_max: int, test: set[int]) -> tuple[Path, list[dict]]:
    """The sweep's training rows as a measurement file, and its held-out rows."""
    rows = list(csv.DictReader(open(path, newline="")))
    train = [r for r in rows if int(r["concurrency"] or 1) <= train_max]
    held = [r for r in rows if int(r["concurrency"] or 1) in test]
    out = work / "train.csv"
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=OUT_COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows({**r, "notes": ""} for r in train)
    return out, held


def score(fit, held: list[dict], seed: int) -> list[dict]:
    from ddtree_bayes.core.data import parse_row
    from ddtree_bayes.workflows.validation import scored_interval

    rng = np.random.default_rng(seed)
    out = []
    for i, r in enumerate(held):
        m = parse_row("held-out", i + 2, {**r, "notes": ""}, fit.hardware)
        s = scored_interval(fit, m, rng)
        out.append({"method": m.method, "context_tokens": m.context_tokens,
                    "concurrency": m.concurrency, **s})
    return out


def summary(rows: list[dict]) -> dict:
    err = [r["median"] / r["measured"] - 1 for r in rows]
    return {"n": len(rows),
            "cov90": sum(r["lo90"] <= r["measured"] <= r["hi90"] for r in rows) / len(rows),
            "bias": statistics.mean(err), "mean_abs": statistics.mean(map(abs, err)),
            "width90": statistics.mean((r["hi90"] - r["lo90"]) / r["median"] for r in rows),
            "flat30_cov": sum(r["median"] * (1 - BAND) <= r["measured"] <= r["median"] * (1 + BAND)
                              for r in rows) / len(rows)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="+", type=Path)
    ap.add_argument("--train-max", type=int, default=4)
    ap.add_argument("--test", default="8,16")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from ddtree_bayes import api
    from ddtree_bayes.engine import store

    test = {int(c) for c in args.test.split(",")}
    report: dict = {"train_max": args.train_max, "test": sorted(test), "sweeps": []}
    for path in args.sweeps:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            train, held = split(path, work, args.train_max, test)
            held = [r for r in held if r["method"] == "ar" or r["verify_tokens"]]
            if not held:
                print(f"{path.name}: nothing to predict (no verify_tokens?)", file=sys.stderr)
                continue
            t0 = time.perf_counter()
            result = api.fit(train, workdir=work, progress=False, seed=args.seed)
            fit = store.load_fit(result.path)
            rows = score(fit, held, args.seed)
            entry = {"sweep": path.name, "converged": result.converged,
                     "fit_s": round(time.perf_counter() - t0, 1), **summary(rows),
                     "rows": rows}
            report["sweeps"].append(entry)
            print(f"{path.name}: {entry['n']} rows, 90% {entry['cov90']:.0%}, bias "
                  f"{entry['bias']:+.1%}, mean abs {entry['mean_abs']:.1%}, width "
                  f"{entry['width90']:.0%}, flat +-30% {entry['flat30_cov']:.0%} "
                  f"({entry['fit_s']} s, converged {result.converged})", flush=True)
    every = [r for s in report["sweeps"] for r in s["rows"]]
    if every:
        report["pooled"] = summary(every)
        p = report["pooled"]
        print(f"pooled: {p['n']} rows, 90% {p['cov90']:.0%}, bias {p['bias']:+.1%}, mean abs "
              f"{p['mean_abs']:.1%}, width {p['width90']:.0%}, flat +-30% {p['flat30_cov']:.0%}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

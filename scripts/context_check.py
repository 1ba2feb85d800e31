"""Does the context cost transfer? Measured at short context, asked at long context.

Per public sweep with rows at several contexts (``data/public/conc/*.csv``: one model on one
system and engine), fit the rows at context <= ``--train-context`` (default 0: every
concurrency there) and predict the rows at longer contexts. With only context-0 rows in
training the pair's context cost per 64k (``ctx_ms_per_unit``) is its prior alone, so this
checks that prior: coverage, bias, mean abs error and 90% width, pooled, at C = 1 and at every
C (at C > 1 the context's growth with the streams, ``ctx_batch_exponent``, is its prior too).

    .venv/bin/python scripts/context_check.py [--train-context 0] [--out FILE.json]

The figures are recorded in docs/validation.md ("Context: measured short, asked long").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ddtree_bayes.core import paths
from ddtree_bayes.core.config import DEFAULT_SEED, SamplerSettings, load_priors
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.hardware_table import hardware_table
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.workflows.concurrency_check import read_sweep, summary, sweep_csv
from ddtree_bayes.workflows.validation import (
    Inputs,
    card_texts,
    refit_without,
    scored_interval,
)


def check(path: Path, train_context: int, priors_text: str, hardware_csv: str, cards_text: dict,
          seed: int, records: list[dict] | None = None) -> dict | None:
    """One sweep: fit its rows at context <= ``train_context``, score the others
    (``records``: the file's rows if already read, :func:`read_sweep`)."""
    text, _ = sweep_csv(read_sweep(path) if records is None else records)
    data = load_measurements(str(path), load_hardware("hardware.csv", text=hardware_csv),
                             text=text)
    held = tuple(i for i, m in enumerate(data.rows) if (m.context_tokens or 0) > train_context)
    if not held or len(held) == len(data.rows):
        return None
    t0 = time.perf_counter()
    inputs = Inputs(text, priors_text, hardware_csv, str(path), **cards_text)
    draws, failures, data, _, _ = refit_without(inputs, held, seed, SamplerSettings())
    rng = np.random.default_rng(seed)
    rows = [{"row": m.row, "method": m.method, "context_tokens": m.context_tokens,
             "concurrency": m.concurrency, **scored_interval(draws, m, rng)}
            for i, m in enumerate(data.rows) if i in held]
    s = draws.meta["coords"]["system"]
    ctx = draws.variables["ctx_ms_per_unit"]
    meta_ctx = {p: [round(float(q), 3) for q in np.quantile(ctx[:, k], [0.05, 0.5, 0.95])]
                for k, p in enumerate(s)}
    return {"sweep": path.name, "converged": not failures, "rows": rows,
            "ctx_ms_per_unit": meta_ctx, "seconds": time.perf_counter() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-context", type=int, default=0)
    ap.add_argument("--sweeps", nargs="*", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args()
    files = args.sweeps or sorted(Path("data/public/conc").glob("*.csv"))
    priors = load_priors(paths.priors_file(None))
    hardware_csv = hardware_table(None).text
    cards_text = card_texts(None)
    cards = load_model_cards("models.csv", text=cards_text["models_csv"])
    out, t0 = [], time.perf_counter()
    for path in files:
        records = read_sweep(path)
        if any(r["model"] not in cards for r in records):
            continue
        res = check(path, args.train_context, priors.text, hardware_csv, cards_text, args.seed,
                    records)
        if res is None:
            continue
        out.append(res)
        one = [r for r in res["rows"] if r["concurrency"] == 1]
        s1 = summary(one) if one else None
        print(f"{path.name}: {len(res['rows'])} rows ({len(one)} at C = 1), converged "
              f"{res['converged']}, ctx {res['ctx_ms_per_unit']}, "
              + (f"C = 1: in 90% {s1['cov90']:.0%}, bias {s1['bias']:+.1%}, "
                 f"width {s1['width90']:.1%}" if s1 else "") + f" ({res['seconds']:.0f} s)",
              file=sys.stderr, flush=True)
    ok = [r for s in out if s["converged"] for r in s["rows"]]
    pooled = {"all": summary(ok) if ok else None,
              "c1": summary([r for r in ok if r["concurrency"] == 1])
              if any(r["concurrency"] == 1 for r in ok) else None}
    result = {"train_context": args.train_context, "seed": args.seed,
              "seconds": time.perf_counter() - t0, "pooled": pooled, "sweeps": out}
    for k, v in pooled.items():
        if v:
            print(f"pooled {k}: {v['n']} rows, in 90% {v['cov90']:.1%}, bias {v['bias']:+.1%}, "
                  f"mean abs {v['mean_abs']:.1%}, width {v['width90']:.1%}, "
                  f"flat +-30% {v['flat30_cov']:.1%}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

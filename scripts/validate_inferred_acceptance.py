#!/usr/bin/env python
"""Inferred acceptance on a public context sweep (issue 11, "Rows without acceptance").

Takes a public sweep whose speculative rows have no acceptance length (data/public/, e.g.
``vllm_eagle3_kimi_k26_rtxpro6000x8_ctx.csv``: AR and Eagle3 k=3 at contexts 0-128k), converts
it to the measurement schema, holds out the speculative row at one context, fits the rest
(a full fit: the default sampler settings and gates), and reports

- the inferred acceptance of the speculative group (posterior median and 90% interval, and
  its prior),
- the posterior correlation of that acceptance with the context-verify exponent (the
  direction along which a context sweep cannot tell them apart),
- the held-out row's posterior predictive (``predict`` without ``--accept``, so acceptance
  comes from the inferred posterior) and whether the measured tok/s is inside its 90%
  interval. The original +-30% formula cannot predict it: it needs the acceptance.

``--prior flat`` drops the priors file's ``[[acceptance]]`` entries of the sweep's method, so
the group gets the default Uniform(1, min(block + 1, verify tokens)): what the data alone say.

    PYTHONPATH=src .venv/bin/python scripts/validate_inferred_acceptance.py \\
        --sweep data/public/vllm_eagle3_kimi_k26_rtxpro6000x8_ctx.csv --hold-out 65536

Fits go to a temporary folder (nothing is written to models/ or data/). ``--json FILE``
saves the result.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def measurement_rows(sweep: Path) -> list[dict[str, str]]:
    """The sweep's rows in the measurement schema (its extra columns dropped)."""
    from ddtree_bayes.core.data import COLUMNS

    with open(sweep, newline="", encoding="utf-8") as fh:
        return [{c: rec[c] for c in COLUMNS} for rec in csv.DictReader(fh)]


def to_csv(rows: list[dict[str, str]]) -> str:
    from ddtree_bayes.core.data import COLUMNS

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def flat_priors(text: str, method: str) -> str:
    """The priors file without its ``[[acceptance]]`` entries for ``method``."""
    parts = re.split(r"(?m)^(?=\[\[acceptance\]\]|\[(?!\[))", text)
    keep = [p for p in parts if not (p.startswith("[[acceptance]]")
                                     and re.search(rf'(?m)^method\s*=\s*"{re.escape(method)}"', p))]
    return "".join(keep)


def run(sweep: Path, hold_out: float, prior: str, seed: int, known: float | None = None) -> dict:
    from ddtree_bayes import api
    from ddtree_bayes.core import acceptance_latent as AL
    from ddtree_bayes.engine import predictive as P

    rows = measurement_rows(sweep)
    spec_rows = [r for r in rows if r["method"] != "ar"]
    held = [r for r in spec_rows if r["accept_len"].strip() == ""
            and float(r["context_tokens"] or 0) == hold_out]
    if len(held) != 1:
        raise SystemExit(f"{sweep}: expected one speculative row without accept_len at context "
                         f"{hold_out:g}, found {len(held)}")
    (held_row,) = held
    if known is not None:   # the control: every blank acceptance written as `known`
        for r in spec_rows:
            if not r["accept_len"].strip():
                r["accept_len"] = f"{known:g}"
    train = [r for r in rows if r is not held_row]
    method = held_row["method"]
    with tempfile.TemporaryDirectory(prefix="ddtree-accept-") as tmp:
        work = Path(tmp)
        (work / "data").mkdir()
        (work / "models").mkdir()
        (work / "data" / "measurements.csv").write_text(to_csv(train))
        for name in ("hardware.csv", "models.csv", "seed_estimates.csv"):
            shutil.copy(ROOT / "data" / name, work / "data" / name)
        priors = (ROOT / "models" / "priors.toml").read_text()
        if prior == "flat":
            priors = flat_priors(priors, method)
        (work / "models" / "priors.toml").write_text(priors)
        t0 = time.perf_counter()
        result = api.fit(workdir=work, seed=seed, progress=False)
        seconds = time.perf_counter() - t0
        draws = api.load(result.fit_id, workdir=work)
        inferred = AL.summarise(draws.meta, draws.variables)
        v = draws.variables
        corr = None
        if AL.NAME in v:
            corr = float(np.corrcoef(np.log(v[AL.NAME][:, 0]), v["ctx_verify_exponent"])[0, 1])
        block = int(held_row["block"]) if held_row["block"] else None
        budget = int(held_row["budget"]) if held_row["budget"] else None
        pred = P.predict(draws, hardware=held_row["hardware"], gpus=int(held_row["gpus"]),
                         engines=[held_row["engine"]], method=method, block=block,
                         budget=budget, context=hold_out, seed=seed,
                         accept=None if known is None else f"{known:g}", workdir=work)[0]
    measured = float(held_row["tok_s"])
    return {
        "sweep": str(sweep.relative_to(ROOT) if sweep.is_relative_to(ROOT) else sweep),
        "prior": prior, "seed": seed, "held_out_context": hold_out, "known_accept": known,
        "training_rows": len(train), "fit_id": result.fit_id, "converged": result.converged,
        "failures": result.failures, "divergences": result.divergences,
        "fit_seconds": seconds,
        "max_rhat": max(d["rhat"] for d in result.diagnostics),
        "min_ess_bulk": min(d["ess_bulk"] for d in result.diagnostics),
        "inferred_acceptance": inferred,
        "corr_log_accept_ctx_verify_exponent": corr,
        "ctx_verify_exponent": [float(x) for x in np.quantile(v["ctx_verify_exponent"],
                                                              [0.05, 0.5, 0.95])],
        "held_out": {"measured": measured, "median": pred["median"], "lo50": pred["lo50"],
                     "hi50": pred["hi50"], "lo90": pred["lo90"], "hi90": pred["hi90"],
                     "inside90": pred["lo90"] <= measured <= pred["hi90"],
                     "error": pred["median"] / measured - 1.0,
                     "accept_kind": pred["accept_kind"],
                     "note": (pred.get("accept_posterior") or {}).get("note")},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", type=Path,
                    default=ROOT / "data/public/vllm_eagle3_kimi_k26_rtxpro6000x8_ctx.csv")
    ap.add_argument("--hold-out", type=float, default=65536.0,
                    help="context (tokens) of the speculative row to hold out")
    ap.add_argument("--prior", choices=("file", "flat"), default="file",
                    help="file: the priors file's [[acceptance]] prior; flat: the default "
                         "Uniform(1, min(block + 1, verify tokens))")
    ap.add_argument("--known-accept", type=float,
                    help="control: write this acceptance into every blank accept_len (nothing "
                         "inferred), to tell the inferred acceptance's part in a miss from the "
                         "step model's")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args(argv)
    res = run(args.sweep.resolve(), args.hold_out, args.prior, args.seed, args.known_accept)
    h = res["held_out"]
    print(f"{res['sweep']}: held out the speculative row at context {res['held_out_context']:g}; "
          f"fit {res['fit_id']} on {res['training_rows']} rows "
          f"({'converged' if res['converged'] else 'NOT converged: ' + '; '.join(res['failures'])},"
          f" max R-hat {res['max_rhat']:.3f}, min bulk ESS {res['min_ess_bulk']:.0f}, "
          f"{res['divergences']} divergences, {res['fit_seconds']:.0f} s)")
    for g in res["inferred_acceptance"]:
        print(f"inferred acceptance {g['group']} (rows {', '.join(map(str, g['rows']))}): "
              f"median {g['median']:.3f}, 90% {g['lo']:.3f}-{g['hi']:.3f}; prior {g['prior_from']}"
              f" (median {g['prior_median']:.3f}, 90% {g['prior_lo']:.3f}-{g['prior_hi']:.3f})")
    if res["corr_log_accept_ctx_verify_exponent"] is not None:
        q = res["ctx_verify_exponent"]
        print(f"corr(log accept, ctx_verify_exponent) = "
              f"{res['corr_log_accept_ctx_verify_exponent']:+.2f}; ctx_verify_exponent "
              f"{q[1]:.2f} (90% {q[0]:.2f}-{q[2]:.2f})")
    print(f"held out: measured {h['measured']:g} tok/s; predicted {h['median']:.1f} "
          f"(50% {h['lo50']:.1f}-{h['hi50']:.1f}, 90% {h['lo90']:.1f}-{h['hi90']:.1f}), "
          f"error {h['error'] * 100:+.1f}%: {'inside' if h['inside90'] else 'OUTSIDE'} the 90% "
          f"interval; acceptance {h['accept_kind']}" + (f": {h['note']}" if h["note"] else ""))
    if args.known_accept is None:
        print("original +-30%: cannot predict this row (the formula needs its acceptance)")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

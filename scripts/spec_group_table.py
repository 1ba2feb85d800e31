"""Per overhead group (system, engine, method) of a structured-step fit: the posterior of its
fixed cost (ms), its per-pass multiple of the drafter roofline, its group effect (log fixed
cost minus the engine mean), and the model-free extra ms per step over AR from the raw rows.

``pass_roof_ms`` and ``pass_ms`` are of the group's default drafter card; a configuration whose
rows name another card (the ``drafter`` column) pays ``pass_mult`` x that card's roofline, which
the fit's metadata gives per configuration (``config_pass_how``, printed below the table): divide
a model-free slope by that roofline, not by ``pass_roof_ms``.

Usage: python scripts/spec_group_table.py FIT.nc [--csv OUT.csv]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ddtree_bayes.engine import store


def q(a, axis=0):
    return np.quantile(a, [0.05, 0.5, 0.95], axis=axis)


def group_table(fit) -> pd.DataFrame:
    v, m = fit.variables, fit.meta["model"]
    coords = fit.meta["coords"]
    groups, systems, engines = coords["overhead_group"], coords["system"], coords["engine"]
    gsys, geng = np.array(m["group_system"]), np.array(m["group_engine"])
    roof = np.array(m["group_pass_roof_ms"])
    step_ar = v["step_ar_ms"][:, gsys]                                   # draws x groups
    fixed_ms = v["spec_fixed_ratio"] * step_ar
    pass_ms = v["spec_pass_ratio"] * step_ar
    tree_ms = v["spec_tree_ratio"] * step_ar
    pass_mult = pass_ms / roof
    # group effect: log ratio minus its mean (mu + engine [+ hybrid effect] + offset); from
    # the ratio, which every fit stores (spec_*_log only when the spread is fixed)
    eff = np.log(v["spec_fixed_ratio"]) - v["spec_fixed_mean"]
    pass_eff = np.log(v["spec_pass_ratio"]) - v["spec_pass_mean"]
    eng_ms = np.exp(v["spec_fixed_log_mu"][:, None] + v["spec_fixed_engine"])  # draws x engines
    rows = []
    for k, g in enumerate(groups):
        f5, f50, f95 = q(fixed_ms[:, k])
        p5, p50, p95 = q(pass_mult[:, k])
        rows.append({
            "group": g, "engine": engines[geng[k]], "system": systems[gsys[k]],
            "step_ar_ms": float(np.median(step_ar[:, k])),
            "fixed_ms": f50, "fixed_lo": f5, "fixed_hi": f95,
            "fixed_eff_log": float(np.median(eff[:, k])),
            "engine_fixed_ms": float(np.median(eng_ms[:, geng[k]])),
            "pass_roof_ms": roof[k], "pass_mult": p50, "pass_lo": p5, "pass_hi": p95,
            "pass_ms": float(np.median(pass_ms[:, k])),
            "pass_eff_log": float(np.median(pass_eff[:, k])),
            "tree_ms": float(np.median(tree_ms[:, k])),
            "pass_varies": m["group_varies"]["pass"][k],
            "tree_varies": m["group_varies"]["tree"][k],
        })
    return pd.DataFrame(rows)


def measured_extra(csv: Path, methods: dict) -> pd.DataFrame:
    """Rows with accept_len and an AR row of the same (model, hardware, gpus, engine,
    context): step = 1000 accept / tok_s; extra = step_spec - mean step_ar (the SPEC cost
    plus the growth of the verify pass with M: no model involved)."""
    d = pd.read_csv(csv)
    d["ctx"] = d["context_tokens"].fillna(-1)
    key = ["model", "hardware", "gpus", "engine", "ctx"]
    ar = d[d.method == "ar"].assign(step=lambda x: 1000.0 / x.tok_s)
    ar_step = ar.groupby(key).step.mean().rename("step_ar")
    sp = d[(d.method != "ar") & d.accept_len.notna()].copy()
    sp["step"] = 1000.0 * sp.accept_len / sp.tok_s
    sp = sp.join(ar_step, on=key, how="inner")
    sp["extra_ms"] = sp.step - sp.step_ar
    sp["passes"] = [methods[r.method].draft_passes(None if pd.isna(r.block) else int(r.block),
                                                   None if pd.isna(r.budget) else int(r.budget))
                    for r in sp.itertuples()]
    sp["group"] = [f"{r.model}@{r.hardware}x{r.gpus}/{r.engine}/{r.method}"
                   for r in sp.itertuples()]
    return sp[["group", "block", "budget", "ctx", "accept_len", "tok_s", "step", "step_ar",
               "extra_ms", "passes"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("fit", type=Path)
    ap.add_argument("--data", type=Path, default=Path("data/examples/public_multi_model.csv"))
    ap.add_argument("--csv", type=Path)
    a = ap.parse_args(argv)
    fit = store.load_fit(a.fit)
    t = group_table(fit)
    x = measured_extra(a.data, fit.methods)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 200)
    print(t.round(3).to_string())
    for how in fit.meta["model"].get("config_pass_how", ()):
        print(f"  named card: {how}")
    print()
    print(x.round(2).to_string())
    print("\nmodel-free extra_ms = a + b x passes (groups measured at two or more depths):")
    for g, d in x.groupby("group"):
        if d.passes.nunique() >= 2:
            slope, icpt = np.polyfit(d.passes, d.extra_ms, 1)
            print(f"  {g:55s} a {icpt:6.2f} ms  b {slope:5.2f} ms/pass  ({len(d)} rows)")
    if a.csv:
        t.to_csv(a.csv, index=False)
        x.to_csv(a.csv.with_suffix(".extra.csv"), index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What the public data say of a native engine against SGLang (issue 20): the engine effects
of the structured step in two fits, and the cut they imply, next to the ``[relations.native]``
Beta prior that the headline's native answer uses.

    .venv/bin/python scripts/engine_contrast.py     # runs both fits (2 cores: ~2 and ~9 min)
    .venv/bin/python scripts/engine_contrast.py --corpus-fit ID --lucebox-fit ID   # reads them

Fit 1 is the public corpus (``data/examples/public_multi_model.csv``: sglang, vllm, trtllm,
llama.cpp); fit 2 is the corpus plus the five lucebox DDTree budget sweeps
(``data/public/lucebox_*.csv``, engine ``lucebox-dflash``), appended by
``scripts/combine_public.py``'s own ``combine`` (so their rows get the corpus's treatment) into
``--combined-csv``. Both are plain ``ddtree-bayes fit --data FILE`` runs with the bundled priors
and the default seed; nothing of the model or the priors is changed.

Per fit and engine, the effect ``spec_<part>_engine`` (log scale, ZeroSumNormal over the fit's
engines) on each part of the speculative step: the fixed cost, ``exp(mu_fixed + e)`` ms; the
drafter pass, ``exp(mu_pass + e)`` x its roofline; the tree, ``exp(mu_tree + e)`` ms per node.
Per native engine (llama.cpp; lucebox-dflash in fit 2) and part, the implied reduction
against SGLang ``1 - exp(e_native - e_sglang)``, and, for the headline configuration (the
B300 SGLang DDTree group at block 16, budget 32: one pass, 32 nodes), the reduction of the
whole SPEC if only the engine effects changed,
``1 - sum_p R_p exp(d_p) / sum_p R_p`` (R_p that group's fitted fixed, pass and 32 x node ratios),
which is what ``reduction`` in ``SPEC_native = (1 - reduction) SPEC_sglang`` means. Each is
set beside two priors: the relation's Beta and the engine model's own prior on the contrast,
``e_i - e_j ~ Normal(0, sqrt(2) engine_sd)`` (the difference of two ZeroSumNormal components,
whatever the number of engines). Writes ``--out`` (default docs/engine_contrast.json).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import math
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from statistics import NormalDist

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))   # (run from a checkout: the package's own rule)
sys.path.insert(0, str(ROOT / "scripts"))
try:
    from combine_public import combine

    from ddtree_bayes.engine import store
except ModuleNotFoundError as err:   # (a Python without the project's packages)
    sys.exit(f"engine_contrast.py: {err} (fix: run it with the project's interpreter, "
             ".venv/bin/python scripts/engine_contrast.py)")

CORPUS = ROOT / "data" / "examples" / "public_multi_model.csv"
LUCEBOX = "lucebox_*.csv"
BASE = "sglang"
NATIVE = ("llama.cpp", "lucebox-dflash")
PARTS = ("fixed", "pass", "tree")
UNITS = {"fixed": "ms", "pass": "x drafter-pass roofline", "tree": "microseconds per node"}
HEADLINE = {"group": "kimi-k2.6@b300x8/sglang/ddtree", "block": 16, "budget": 32, "passes": 1,
            "nodes": 32}
Q = (5, 50, 95)


def summary(x: np.ndarray, digits: int = 3) -> dict:
    lo, med, hi = np.percentile(x, Q)
    return {"median": round(float(med), digits), "q05": round(float(lo), digits),
            "q95": round(float(hi), digits)}


def build_combined(out: Path) -> list[str]:
    """The corpus plus the lucebox sweeps, in the corpus's schema (combine_public.combine)."""
    with open(ROOT / "data" / "models.csv", newline="", encoding="utf-8") as fh:
        cards = {r["model"] for r in csv.DictReader(fh)}
    files = sorted((ROOT / "data" / "public").glob(LUCEBOX))
    text, log = combine(CORPUS, files, cards)
    out.write_text(text, encoding="utf-8")
    return log


def run_fit(data: Path, seed: int | None) -> tuple[str, float]:
    """``ddtree-bayes fit --data DATA --format json`` in this checkout: (fit id, wall s)."""
    cmd = [sys.executable, "-m", "ddtree_bayes", "fit", "--data", str(data), "--format", "json"]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    print("running:", " ".join(cmd), file=sys.stderr)
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    wall = time.monotonic() - t0
    if done.returncode != 0:
        sys.exit(f"fit of {data} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)["fit_id"], wall


def engine_facts(data_csv: str) -> dict[str, dict]:
    """Per engine: rows, speculative rows, GPUs, models and methods of the fitted data."""
    facts: dict[str, dict] = {}
    for r in csv.DictReader(io.StringIO(data_csv)):
        f = facts.setdefault(r["engine"], {"rows": 0, "speculative_rows": 0, "hardware": set(),
                                           "models": set(), "methods": set()})
        f["rows"] += 1
        f["speculative_rows"] += r["method"] != "ar"
        f["hardware"].add(f"{r['gpus']}x {r['hardware']}")
        f["models"].add(r["model"])
        f["methods"].add(r["method"])
    return {e: {k: sorted(v) if isinstance(v, set) else v for k, v in f.items()}
            for e, f in facts.items()}


def prior_of_reduction(sd: float) -> dict:
    """Quantiles of 1 - exp(d), d ~ Normal(0, sqrt(2) sd): the engine model's prior."""
    d = NormalDist(0.0, math.sqrt(2.0) * sd)
    return {"median": 0.0, "q05": round(1 - math.exp(d.inv_cdf(0.95)), 3),
            "q95": round(1 - math.exp(d.inv_cdf(0.05)), 3), "log_contrast_sd": round(d.stdev, 3)}


def beta_prior(priors: dict) -> dict:
    from scipy.stats import beta

    rel = priors["relations"]["native"]
    b = beta(rel["alpha"], rel["beta"])
    return {"dist": f"Beta({rel['alpha']:g}, {rel['beta']:g})", "base": rel["base"],
            "median": round(float(b.median()), 3), "q05": round(float(b.ppf(0.05)), 3),
            "q95": round(float(b.ppf(0.95)), 3)}


def analyse(fit_id: str, label: str, wall: float | None) -> dict:
    fit = store.load_fit(store.resolve(ROOT / "models", fit_id))
    v, model = fit.variables, fit.meta["model"]
    priors = tomllib.loads(fit.priors_toml)
    engines, groups = model["engines"], fit.meta["coords"]["overhead_group"]
    group_engine = model["group_engine"]
    varies = {"fixed": [True] * len(groups), **model["group_varies"]}
    facts = engine_facts(fit.data_csv)
    out: dict = {"fit_id": fit_id, "label": label, "converged": fit.meta["converged"],
                 "divergences": fit.meta.get("remedies", {}).get("attempts", [{}])[-1]
                 .get("divergences"),
                 "data": fit.meta["data"], "fit_wall_s": None if wall is None else round(wall, 1),
                 "engines": {}, "reductions": {},
                 "relation_reduction_posterior": summary(v["reduction"].reshape(-1))}
    for i, e in enumerate(engines):
        row: dict = {"facts": facts.get(e, {}), "groups": [], "parts": {}}
        mine = [k for k, g in enumerate(group_engine) if g == i]
        row["groups"] = [groups[k] for k in mine]
        for part in PARTS:
            eff = v[f"spec_{part}_engine"][:, i]
            phys = np.exp(v[f"spec_{part}_log_mu"] + eff) * (1000.0 if part == "tree" else 1.0)
            row["parts"][part] = {
                "effect_log": summary(eff), f"cost_{UNITS[part].replace(' ', '_')}": summary(phys),
                # groups of this engine whose rows vary this part (fixed: every group informs it;
                # a group at one number of passes / nodes informs only fixed + that part's sum)
                "groups_varying": int(sum(bool(varies[part][k]) for k in mine))}
        out["engines"][e] = row
    out["population_log_mu"] = {p: summary(v[f"spec_{p}_log_mu"]) for p in PARTS}
    # the groups' own costs in ms (ratio x their pair's M = 1 step): what each group's rows say,
    # before the engine/pair split; a part its rows do not vary sits at its mean (see above)
    out["groups_ms"] = {}
    for k, label_g in enumerate(groups):
        if engines[group_engine[k]] not in (BASE, *NATIVE):
            continue
        step = v["step_ar_ms"][:, model["group_system"][k]]
        out["groups_ms"][label_g] = {
            "step_ar_ms": summary(step),
            "fixed_ms": summary(v["spec_fixed_ratio"][:, k] * step),
            "pass_ms": summary(v["spec_pass_ratio"][:, k] * step),
            "pass_roofline_ms": round(float(model["group_pass_roof_ms"][k]), 3),
            "pass_roofline_how": model["group_pass_how"][k],
            "tree_us_per_node": summary(v["spec_tree_ratio"][:, k] * step * 1000.0),
            "varies": {p: bool(varies[p][k]) for p in PARTS}}
    eng_sd = {p: float(priors["priors"][f"spec_{p}_engine_sd"]["value"]) for p in PARTS}
    g = groups.index(HEADLINE["group"]) if HEADLINE["group"] in groups else None
    s = engines.index(BASE)
    for native in NATIVE:
        if native not in engines:
            continue
        n = engines.index(native)
        red: dict = {"vs": BASE, "parts": {}}
        d = {p: v[f"spec_{p}_engine"][:, n] - v[f"spec_{p}_engine"][:, s] for p in PARTS}
        for p in PARTS:
            r = 1.0 - np.exp(d[p])
            prior = prior_of_reduction(eng_sd[p])
            post_sd = float(np.std(d[p]))
            red["parts"][p] = {"reduction": summary(r), "p_reduction_gt_0": round(
                float(np.mean(r > 0)), 3), "log_contrast": summary(d[p]),
                "log_contrast_sd": round(post_sd, 3), "engine_model_prior": prior,
                "sd_ratio_post_to_prior": round(post_sd / prior["log_contrast_sd"], 3)}
        if g is not None:
            ratios = {p: v[f"spec_{p}_ratio"][:, g] for p in PARTS}
            weights = {"fixed": ratios["fixed"], "pass": ratios["pass"] * HEADLINE["passes"],
                       "tree": ratios["tree"] * HEADLINE["nodes"]}
            total = sum(weights.values())
            native_spec = sum(weights[p] * np.exp(d[p]) for p in PARTS)
            red["headline_spec"] = {
                "configuration": HEADLINE,
                "reduction": summary(1.0 - native_spec / total),
                "sglang_share_of_spec": {p: summary(weights[p] / total) for p in PARTS}}
        out["reductions"][native] = red
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus-fit", help="fit id of the corpus fit (default: run it)")
    ap.add_argument("--lucebox-fit", help="fit id of the corpus + lucebox fit (default: run it)")
    ap.add_argument("--combined-csv", default="/tmp/engine_contrast_corpus_lucebox.csv",
                    help="where the corpus + lucebox file is written")
    ap.add_argument("--seed", type=int, default=None, help="fit seed (default: fit's own)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "engine_contrast.json"))
    args = ap.parse_args(argv)
    combined = Path(args.combined_csv)
    log = build_combined(combined)
    fits = []
    for fit_id, data, label in ((args.corpus_fit, CORPUS, "corpus"),
                                (args.lucebox_fit, combined, "corpus + lucebox")):
        wall = None
        if fit_id is None:
            fit_id, wall = run_fit(data, args.seed)
        fits.append(analyse(fit_id, label, wall))
    priors = tomllib.loads(Path(ROOT / "models" / "priors.toml").read_text(encoding="utf-8"))
    doc = {"what": "engine effects of the structured step and the native-vs-SGLang reduction "
                   "they imply (scripts/engine_contrast.py; issue 20)",
           "relation_prior": beta_prior(priors),
           "combined_csv": {"path": str(combined), "log": log,
                            "sha256": hashlib.sha256(combined.read_bytes()).hexdigest()},
           "quantiles": "median and 90% interval (5%, 95%) of the posterior draws",
           "fits": fits}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for f in fits:
        print(f"== {f['label']} ({f['fit_id']}, converged {f['converged']})")
        for e, row in f["engines"].items():
            cells = []
            for p in PARTS:
                c = row["parts"][p]
                eff, phys = c["effect_log"], next(x for k, x in c.items() if k.startswith("cost_"))
                cells.append(f"{p} {eff['median']:+.2f} ({eff['q05']:+.2f}..{eff['q95']:+.2f})"
                             f" = {phys['median']:.3g} ({phys['q05']:.3g}-{phys['q95']:.3g})")
            print(f"  {e:15s} " + " | ".join(cells))
        for n, red in f["reductions"].items():
            for p, c in red["parts"].items():
                r, pr = c["reduction"], c["engine_model_prior"]
                print(f"  1 - {p} {n}/{BASE}: {r['median']:+.2f} ({r['q05']:+.2f}..{r['q95']:+.2f})"
                      f", P>0 {c['p_reduction_gt_0']:.2f}; engine prior "
                      f"({pr['q05']:+.2f}..{pr['q95']:+.2f}), log sd post/prior "
                      f"{c['sd_ratio_post_to_prior']:.2f}")
            if "headline_spec" in red:
                r = red["headline_spec"]["reduction"]
                print(f"  headline SPEC reduction {n}: {r['median']:+.2f} "
                      f"({r['q05']:+.2f}..{r['q95']:+.2f})")
    b = doc["relation_prior"]
    print(f"relation prior {b['dist']}: {b['median']:.2f} ({b['q05']:.2f}-{b['q95']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

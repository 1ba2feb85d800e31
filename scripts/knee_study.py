#!/usr/bin/env python3
"""Does the compute efficiency a verify pass reaches depend on something known before
measuring (issue 20: the headline shape's DDTree width is the compute knee)? Per system
(pair) of one or more fits: its ``compute_eff`` posterior, how far its rows reach towards the
knee, how much its data moved it from the prior, and its engine's kernels, weight format and
GPU class; then each candidate predictor scored by leave-one-system-out on the systems whose
data inform their efficiency.

    .venv/bin/python scripts/knee_study.py FIT.nc [FIT.nc ...] [--json OUT.json]

Each FIT is a plain ``ddtree-bayes fit --data FILE`` (the public corpus, or one public sweep
alone); a system is read from the first fit that holds it.

Per system: ``compute_eff`` median and 90% interval; ``z`` (``compute_eff_z``, the system's
non-centred offset, prior Normal(0, 1)): its posterior mean and sd (in a fit of one system z
and the population mean are not told apart); ``log sd`` (posterior sd of ``log
compute_eff``) against the prior's marginal sqrt(0.6^2 + 0.4^2) = 0.72; ``reach``: the posterior median of the
compute part over the memory part of the verify at the system's largest measured verify
(``compute_tok_ratio x M / distinct ** exponent``), 1 at the knee (below about 0.3 the rows
cannot tell one efficiency from another). Attributes: ``kernels`` (``ggml-mmq`` for an engine
of the llama.cpp family on an int8 card - GGUF weights through ggml's MMQ kernels -, ``ggml``
for one under a 16-bit card, ``cublas`` for vLLM, SGLang, TensorRT-LLM and HF transformers:
cuBLAS / CUTLASS / FlashInfer GEMMs at the card's compute precision), ``dtype`` (the card's
compute precision, whose peak the efficiency divides), ``bytes`` (bytes per weight),
``gpu_class`` (HBM datacenter vs GDDR consumer / workstation: the hardware table's ``memory``).

Leave one system out over the informed systems (log sd <= 0.5, the prior's variance at
least halved, and reach >= 0.3): a held-out system's log efficiency is predicted by the mean
of the other informed systems' posterior median log efficiencies in its category (all of
them when its category has no other); the held-out error is log(its median / the
prediction). Reported per predictor: sd, mean (bias) and RMS of the errors, against the fixed
system spread the model draws a new system with (0.4, ``compute_eff_log_sd``). Then each
informed system as a new system of its kernel family, the model's own hierarchy: the
family's mean from its other systems (each system's rows a normal likelihood, its posterior
divided by the prior it had; mu's prior Normal(-1.2, 0.6); the spread 0.4), against today's
Normal(-1.2, 0.72) for every system (``family_loso``).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from ddtree_bayes.core.model_cards import required_card
from ddtree_bayes.core.pairs import split_label
from ddtree_bayes.engine import store
from ddtree_bayes.engine.structure import fit_rows

PRIOR_MU, PRIOR_MU_SD, PRIOR_SPREAD = -1.2, 0.6, 0.4
GGML = ("llama.cpp", "ik_llama.cpp", "lucebox-dflash")
LOG_SD_INFORMED, REACH_INFORMED = 0.5, 0.3
PREDICTORS = ("none", "kernels", "dtype", "gpu_class", "kernels+gpu_class")


def system_records(path: Path, seen: set[str]) -> list[dict]:
    fit = store.load_fit(path)
    v = fit.variables
    systems = fit.meta["coords"]["system"]
    rows = fit_rows(fit)
    out = []
    for s, label in enumerate(systems):
        _, hw_name, gpus = split_label(label)
        mine = [r for r in rows if _pair(fit, r) == label]
        if not mine:
            continue
        model = mine[0].model
        label = label if "@" in label else f"{model}@{label}"   # (a fit of one model)
        if label in seen:
            continue
        card = required_card(fit.meta["model"], model)
        hw = fit.hardware[hw_name]
        engines = sorted({r.engine for r in mine})
        m_max = max(float(r.verify_tokens or 1) * float(r.concurrency or 1) for r in mine)
        eff = v["compute_eff"][:, s]
        log_eff = np.log(eff)
        z = v["compute_eff_z"][:, s]
        shape = v["moe_distinct_exponent"][:, s] if "moe_distinct_exponent" in v else 0.0
        mem = np.exp(shape * math.log(card.distinct_ratio(np.array([m_max]))[0]))
        reach = float(np.median(v["compute_tok_ratio"][:, s] * m_max / mem))
        ggml = any(e in GGML for e in engines)
        kernels = ("ggml-mmq" if card.compute_dtype == "int8" else "ggml") if ggml else "cublas"
        out.append({
            "system": label, "fit": path.name, "model": model, "hardware": hw_name,
            "gpus": gpus, "engines": engines, "rows": len(mine), "max_verify": m_max,
            "eff_median": float(np.median(eff)),
            "eff_90": [float(x) for x in np.quantile(eff, [0.05, 0.95])],
            "log_eff_median": float(np.median(log_eff)), "log_eff_sd": float(np.std(log_eff)),
            "z_mean": float(np.mean(z)), "z_sd": float(np.std(z)),
            "mu_median": float(np.median(v["compute_eff_log_mu"])),
            "reach": reach,
            "kernels": kernels,
            "dtype": card.compute_dtype, "bytes": float(card.bytes_per_weight),
            "gpu_class": "HBM" if "HBM" in hw.get("memory", "").upper() else "GDDR",
        })
        seen.add(label)
    return out


def _pair(fit, r) -> str:
    return fit.measurements.pair(r)


def informed(rec: dict) -> bool:
    return rec["log_eff_sd"] <= LOG_SD_INFORMED and rec["reach"] >= REACH_INFORMED


def category(rec: dict, predictor: str) -> tuple:
    if predictor == "none":
        return ()
    return tuple(rec[k] for k in predictor.split("+"))


def loso(recs: list[dict]) -> dict:
    out = {}
    for p in PREDICTORS:
        errs = []
        for i, r in enumerate(recs):
            others = [o for j, o in enumerate(recs) if j != i]
            same = [o for o in others if category(o, p) == category(r, p)]
            pool = same or others
            pred = float(np.mean([o["log_eff_median"] for o in pool]))
            errs.append({"system": r["system"], "error": r["log_eff_median"] - pred,
                         "pooled_within": bool(same)})
        e = np.array([x["error"] for x in errs])
        out[p] = {"sd": float(np.std(e, ddof=1)) if len(e) > 1 else math.nan,
                  "bias": float(np.mean(e)), "rms": float(np.sqrt(np.mean(e ** 2))),
                  "errors": errs}
    return out


def likelihood(rec: dict) -> tuple[float, float] | None:
    """The system's own rows as a normal likelihood of its log efficiency: its posterior
    (taken as normal) divided by the prior it had, Normal(-1.2, 0.72) (mu's prior and the
    system spread); None when the posterior is no narrower than that prior."""
    prior_var = PRIOR_MU_SD ** 2 + PRIOR_SPREAD ** 2
    prec = 1.0 / rec["log_eff_sd"] ** 2 - 1.0 / prior_var
    if prec <= 0:
        return None
    mean = (rec["log_eff_median"] / rec["log_eff_sd"] ** 2 - PRIOR_MU / prior_var) / prec
    return mean, 1.0 / prec


def family_prior(others: list[dict]) -> tuple[float, float]:
    """The population mean of a family's log efficiency given its other systems, as the
    model's hierarchy has it (mu ~ Normal(-1.2, 0.6), a system = mu + 0.4 z, each system's
    rows a normal likelihood): (mean, sd) of mu."""
    prec, acc = 1.0 / PRIOR_MU_SD ** 2, PRIOR_MU / PRIOR_MU_SD ** 2
    for o in others:
        lik = likelihood(o)
        if lik is None:
            continue
        w = 1.0 / (lik[1] + PRIOR_SPREAD ** 2)
        prec += w
        acc += w * lik[0]
    return acc / prec, 1.0 / math.sqrt(prec)


def family_loso(recs: list[dict], predictor: str) -> list[dict]:
    """Each informed system's log efficiency predicted as a new system of its category from
    the category's other informed systems (family_prior + the system spread 0.4), against the
    population prior Normal(-1.2, 0.72) it is drawn from today."""
    out = []
    for i, r in enumerate(recs):
        others = [o for j, o in enumerate(recs)
                  if j != i and category(o, predictor) == category(r, predictor)]
        mu, mu_sd = family_prior(others)
        sd = math.sqrt(mu_sd ** 2 + PRIOR_SPREAD ** 2)
        out.append({"system": r["system"], "category": list(category(r, predictor)),
                    "others": len(others), "log_eff_median": r["log_eff_median"],
                    "predicted": mu, "predicted_sd": sd,
                    "z": (r["log_eff_median"] - mu) / sd,
                    "z_today": (r["log_eff_median"] - PRIOR_MU)
                    / math.sqrt(PRIOR_MU_SD ** 2 + PRIOR_SPREAD ** 2)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fits", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    seen: set[str] = set()
    recs: list[dict] = []
    for path in args.fits:
        recs += system_records(path, seen)
    print("| system | fit | engines | kernels | dtype | bytes | GPU | max M | reach | "
          "eff median (90%) | z mean, sd | log sd |")
    print("|---|---|---|---|---|---:|---|---:|---:|---|---|---:|")
    for r in recs:
        print(f"| {r['system']} | {r['fit'][:24]} | {','.join(r['engines'])} | {r['kernels']} | "
              f"{r['dtype']} | {r['bytes']:.2f} | {r['gpu_class']} | {r['max_verify']:.0f} | "
              f"{r['reach']:.2f} | {r['eff_median']:.3f} ({r['eff_90'][0]:.3f}-"
              f"{r['eff_90'][1]:.3f}) | {r['z_mean']:+.2f}, {r['z_sd']:.2f} | "
              f"{r['log_eff_sd']:.2f} |")
    inf = [r for r in recs if informed(r)]
    print(f"\ninformed (log sd <= {LOG_SD_INFORMED}, reach >= {REACH_INFORMED}): "
          f"{len(inf)} of {len(recs)}: " + ", ".join(r["system"] for r in inf))
    scores = loso(inf) if len(inf) >= 3 else {}
    if scores:
        print("\n| predictor | LOSO sd | bias | RMS |")
        print("|---|---:|---:|---:|")
        for p, s in scores.items():
            print(f"| {p} | {s['sd']:.2f} | {s['bias']:+.2f} | {s['rms']:.2f} |")
        print(f"(the model's spread of a new system around the population mean: "
              f"{PRIOR_SPREAD})")
    fam = family_loso(inf, "kernels") if inf else []
    if fam:
        print("\nheld out, as a new system of its kernel family (the family's mean from its "
              "other informed systems, the model's hierarchy; today: Normal(-1.2, 0.72)):")
        print("| system | family | others | log eff | predicted (sd) | z | z today |")
        print("|---|---|---:|---:|---|---:|---:|")
        for f in fam:
            print(f"| {f['system']} | {'/'.join(f['category'])} | {f['others']} | "
                  f"{f['log_eff_median']:+.2f} | {f['predicted']:+.2f} ({f['predicted_sd']:.2f}) | "
                  f"{f['z']:+.2f} | {f['z_today']:+.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"systems": recs, "informed": [r["system"] for r in inf],
                                         "loso": scores, "family_loso": fam}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What predicts a new speculative group's overhead (issue 20's AR-kept width): per overhead
group (system, engine, method) of a fit, its fixed cost and per-pass cost in ms by least
squares on the measured step minus the target's step as the model prices it, then candidate
predictors compared by leave-one-group-out.

    .venv/bin/python scripts/overhead_predictors.py FIT.nc [FIT2.nc ...] [--json OUT.json]
        [--ar-kept VALIDATE.json]
    .venv/bin/python scripts/overhead_predictors.py --write-combined OUT.csv   # second fit's data

Each FIT is a plain ``ddtree-bayes fit --data FILE`` of the public corpus (or of the corpus
plus further public sweeps); a group is read from the first fit that holds it. Per speculative
row with an ``accept_len`` at C = 1: the measured step ``1000 accept / tok_s``; the target's
step at the row's configuration is the pair's measured AR step at that context (mean of its
AR rows of the same engine, else of any engine) plus the verify's growth as the fit prices it
(the posterior median of ``target(M) - target(1)`` at that context, ``engine.predictive.
step_components`` without the anchor); a pair without an AR row at that context takes the
fit's target step whole (``ar`` = no in the table). SPEC = measured step - target step. A
group measured at two or more numbers of drafter passes is fitted ``SPEC = fixed + pass x
passes (+ node x nodes where its trees vary)``; a group whose passes do not vary (DDTree
budgets, context sweeps) gives ``fixed + pass`` only and is not in the per-term tables.

A predictor divides a group's cost by a normaliser x_g and may pool within a category; held
out, a group's log cost is predicted as ``log x_g + mean over the other groups of its category
of log(cost / x)`` (every other group when its category has none: the model's rule for an
engine it never measured). The table gives each predictor's held-out log error (sd, mean =
bias, RMS) over the groups whose cost the physics allows (a fixed cost at or above zero, a
pass no faster than its drafter's bytes at peak bandwidth).

Normalisers of a pass: ms (absolute); ``roofline`` (the drafter card's pass roofline,
``engine.structure.pass_roofline``: what the model's per-pass multiple divides by);
``achieved`` (the pass's bytes at the bandwidth the pair's own AR step achieves: AR step x
pass bytes / target bytes, from the same card read ``core.drafters.pass_roofline_ms`` with
bandwidth efficiency 1 and no per-layer latency); ``layers`` (AR step x (drafter layers + 1)
/ target layers: a pass as that many target layers); ``step_ar``. Of the fixed cost: ms (the
model's unit), ``step_ar`` (a share of the AR step), ``layers`` (per target + drafter layer:
kernel launches). Categories: none, engine, method, GPU class (GDDR consumer/workstation vs
HBM datacenter, the hardware table's ``memory``), hybrid target (the card's
``recurrent_layers``), engine + hybrid (the model's fixed-cost form).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from ddtree_bayes.core.drafters import PassRoofline, pass_roofline_ms
from ddtree_bayes.core.model_cards import required_card
from ddtree_bayes.engine import store
from ddtree_bayes.engine.predictive import step_components
from ddtree_bayes.engine.scenario import row_scenario
from ddtree_bayes.engine.structure import (
    base_engine,
    draft_structure,
    fit_rows,
    pass_roofline,
    pricing_drafter,
    row_group,
    unmeasured_log_ratio,
)

SEED = 20261130
AR = "ar"
TARGET_PARTS = ("moe", "attn_base", "context")


def target_ms(fit, sc) -> np.ndarray:
    """(draws,) the target's step at scenario ``sc`` as the fit prices it, unanchored."""
    parts, _ = step_components(fit, sc, np.random.default_rng(SEED), anchor=False)
    return sum(parts[k] for k in TARGET_PARTS)


def measured_rows(fit):
    """(row, group label, scenario) of the fit's rows at C = 1."""
    out = []
    for r in fit_rows(fit):
        if r.concurrency != 1:
            continue
        out.append((r, row_group(fit, r), row_scenario(fit, r)))
    return out


def ar_steps(rows) -> dict:
    """(pair, engine or None, context) -> mean measured AR step (ms)."""
    acc = defaultdict(list)
    for r, _, sc in rows:
        if r.method == AR:
            step = 1000.0 / r.tok_s
            ctx = float(r.context_tokens or 0.0)
            acc[(sc.pair, r.engine, ctx)].append(step)
            acc[(sc.pair, None, ctx)].append(step)
    return {k: float(np.mean(v)) for k, v in acc.items()}


def stream_ms(fit, sc, drafter) -> tuple[float, float]:
    """(a pass's bytes, the target's bytes) over the GPUs' peak bandwidth, ms."""
    card = required_card(fit.meta["model"], sc.model)
    hw = fit.hardware[sc.hardware]
    bare = PassRoofline(bw_eff=1.0, layer_ms=0.0, allreduce_fabric_ms=0.0, allreduce_pcie_ms=0.0)
    pass_ms = pass_roofline_ms(drafter, card, sc.method, hw, sc.gpus, bare)[0]
    target = card.read_params_b * card.bytes_per_weight / (float(hw["mem_bw_tb_s"]) * sc.gpus)
    return pass_ms, target


def group_records(fit, seen: set) -> list[dict]:
    model = fit.meta["model"]
    rows = measured_rows(fit)
    ar = ar_steps(rows)
    by_group = defaultdict(list)
    for r, g, sc in rows:
        if r.method != AR and r.accept_len is not None and g not in seen:
            by_group[g].append((r, sc))
    out = []
    for g, items in by_group.items():
        configs = []
        for r, sc in items:
            ctx = float(r.context_tokens or 0.0)
            ar_meas = ar.get((sc.pair, r.engine, ctx), ar.get((sc.pair, None, ctx)))
            tgt = target_ms(fit, sc)
            tgt1 = target_ms(fit, sc.autoregressive())
            growth = np.quantile(tgt - tgt1, [0.05, 0.5, 0.95])
            target = float(np.median(tgt)) if ar_meas is None else ar_meas + float(growth[1])
            passes, nodes = draft_structure(model, sc.method, sc.block, sc.budget)
            step = 1000.0 * r.accept_len / r.tok_s
            configs.append({"row": r.row, "passes": passes, "nodes": nodes, "context": ctx,
                            "step_ms": step, "target_ms": target, "spec_ms": step - target,
                            "verify_growth_ms": [float(x) for x in growth],
                            "ar": ar_meas is not None})
        r0, sc0 = items[0]
        card = required_card(model, sc0.model)
        drafter = pricing_drafter(fit, sc0)
        hw = fit.hardware[sc0.hardware]
        ctx0 = min(c["context"] for c in configs)
        step_ar = ar.get((sc0.pair, r0.engine, ctx0), ar.get((sc0.pair, None, ctx0)))
        if step_ar is None:   # (no AR row: the fit's AR step at that context)
            t1 = target_ms(fit, dataclasses.replace(sc0.autoregressive(), context_tokens=ctx0))
            step_ar = float(np.median(t1))
        pass_stream, target_stream = stream_ms(fit, sc0, drafter)
        rec = {
            "group": g, "engine": r0.engine, "method": r0.method, "model": r0.model,
            "system": sc0.system, "configs": configs, "has_ar": all(c["ar"] for c in configs),
            "step_ar_ms": step_ar, "roofline_ms": pass_roofline(fit, sc0)[0],
            "pass_stream_ms": pass_stream, "target_stream_ms": target_stream,
            "target_layers": card.layers,
            "drafter_layers": drafter.layers if drafter is not None else None,
            "hybrid": bool(card.recurrent_layers),
            "gpu_class": "HBM" if "HBM" in hw.get("memory", "").upper() else "GDDR",
            "gpus": sc0.gpus,
        }
        rec.update(split_costs(configs))
        rec.update(model_new_group(fit, sc0, base_engine(fit, r0.engine)))
        out.append(rec)
    return out


def model_new_group(fit, sc, engine: str) -> dict:
    """The fit's own draws of the group's fixed and per-pass cost (ms) were it a new group
    of its engine (``engine.structure.unmeasured_log_ratio``, what an AR-kept fold draws for
    a group it holds out; in-sample: the fit learned the engine's effect with this group in
    it): the median and the sd of the log."""
    s = fit.meta["coords"]["system"].index(sc.pair)
    step_ar = fit.variables["step_ar_ms"][:, s]
    rng = np.random.default_rng(SEED)
    out = {}
    for part in ("fixed", "pass"):
        log_ms = unmeasured_log_ratio(fit, sc, part, engine, step_ar, rng, amd=0.0) \
            + np.log(step_ar)
        out[f"model_{part}_ms"] = float(np.exp(np.median(log_ms)))
        out[f"model_{part}_log_sd"] = float(np.std(log_ms))
    return out


def split_costs(configs) -> dict:
    """Least squares SPEC = fixed + pass x passes (+ node x nodes) over a group's rows."""
    p = np.array([c["passes"] for c in configs])
    n = np.array([c["nodes"] for c in configs])
    y = np.array([c["spec_ms"] for c in configs])
    cols, names = [np.ones_like(p)], ["fixed"]
    if len(set(p)) >= 2:
        cols.append(p)
        names.append("pass")
    if len(set(n)) >= 2:
        cols.append(n)
        names.append("node")
    X = np.stack(cols, axis=1)
    if len({tuple(x) for x in X}) < X.shape[1]:
        return {"identified": []}
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - X.shape[1]
    se = [math.nan] * len(names)
    if dof > 0:
        s2 = float(np.sum((y - X @ beta) ** 2)) / dof
        se = list(np.sqrt(np.diag(s2 * np.linalg.inv(X.T @ X))))
    out = {"identified": names}
    for k, name in enumerate(names):
        key = name if name != "fixed" or "pass" in names else "fixed_plus_pass"
        out[f"{key}_ms"] = float(beta[k])
        out[f"{key}_se"] = float(se[k])
    return out


PASS_NORMS = {
    "ms": lambda g: 1.0,
    "roofline": lambda g: g["roofline_ms"],
    "achieved": lambda g: g["step_ar_ms"] * g["pass_stream_ms"] / g["target_stream_ms"],
    "layers": lambda g: (g["step_ar_ms"] * ((g["drafter_layers"] or 1) + 1)
                         / g["target_layers"]),
    "step_ar": lambda g: g["step_ar_ms"],
}
FIXED_NORMS = {
    "ms": lambda g: 1.0,
    "step_ar": lambda g: g["step_ar_ms"],
    "layers": lambda g: g["target_layers"] + (g["drafter_layers"] or 1),
}
CATEGORIES = {
    "none": lambda g: "",
    "engine": lambda g: g["engine"],
    "method": lambda g: g["method"],
    "gpu class": lambda g: g["gpu_class"],
    "hybrid": lambda g: str(g["hybrid"]),
    "engine + hybrid": lambda g: f"{g['engine']}/{g['hybrid']}",
}


def physical(g: dict, cost: str) -> bool:
    """A cost the physics allows: a fixed cost at or above zero, a pass no faster than reading
    its drafter's bytes at the GPUs' peak bandwidth (``pass_stream_ms``)."""
    return g[f"{cost}_ms"] >= (g["pass_stream_ms"] if cost == "pass" else 0.0)


def estimate(gs: list[dict], k: int, cost: str, norm, cat, ys, xs, cs) -> tuple[float, bool]:
    """Group ``k``'s predicted log cost from the other groups (and whether it fell back)."""
    same = [j for j in range(len(gs)) if j != k and cs[j] == cs[k]]
    fell = not same
    if fell:
        same = [j for j in range(len(gs)) if j != k]
    return xs[k] + float(np.mean([ys[j] - xs[j] for j in same])), fell


def logo(groups, cost: str, norm, cat) -> dict:
    """Held-out log errors of one predictor over the groups that identify ``cost`` within
    what the physics allows (:func:`physical`)."""
    gs = [g for g in groups if f"{cost}_ms" in g and physical(g, cost)]
    ys = np.log([g[f"{cost}_ms"] for g in gs])
    xs = np.log([norm(g) for g in gs])
    cs = [cat(g) for g in gs]
    errs, fallback = [], 0
    for k in range(len(gs)):
        pred, fell = estimate(gs, k, cost, norm, cat, ys, xs, cs)
        fallback += fell
        errs.append(ys[k] - pred)
    e = np.array(errs)
    return {"groups": len(gs), "sd": float(np.std(e, ddof=1)), "bias": float(np.mean(e)),
            "rms": float(np.sqrt(np.mean(e ** 2))), "fallback": fallback,
            "spread": float(np.std(ys - xs, ddof=1)),
            "errors": {g["group"]: round(float(x), 3) for g, x in zip(gs, e, strict=True)}}


def model_row(groups, cost: str) -> dict:
    """The fit's new-group draws as a predictor (in-sample): their median's log error and
    the mean of their own log sd."""
    gs = [g for g in groups if f"{cost}_ms" in g and physical(g, cost)]
    e = np.log([g[f"{cost}_ms"] / g[f"model_{cost}_ms"] for g in gs])
    return {"cost": cost, "normaliser": "the fit's new-group draws", "category": "(in-sample)",
            "groups": len(gs), "sd": float(np.std(e, ddof=1)), "bias": float(np.mean(e)),
            "rms": float(np.sqrt(np.mean(e ** 2))), "fallback": 0,
            "spread": float(np.mean([g[f"model_{cost}_log_sd"] for g in gs])),
            "errors": {g["group"]: round(float(x), 3) for g, x in zip(gs, e, strict=True)}}


def table(groups, cost: str, norms: dict) -> list[dict]:
    out = [model_row(groups, cost)]
    for nname, norm in norms.items():
        for cname, cat in CATEGORIES.items():
            out.append({"cost": cost, "normaliser": nname, "category": cname,
                        **logo(groups, cost, norm, cat)})
    return out


def predict_cost(train: list[dict], held: dict, cost: str, norm, cat) -> tuple[float, bool]:
    """The held-out group's log cost from the training groups that identify it physically."""
    gs = [g for g in train if f"{cost}_ms" in g and physical(g, cost)] + [held]
    ys = np.log([g[f"{cost}_ms"] for g in gs[:-1]] + [1.0])   # (the held group's: unused)
    xs = np.log([norm(g) for g in gs])
    cs = [cat(g) for g in gs]
    return estimate(gs, len(gs) - 1, cost, norm, cat, ys, xs, cs)


def step_logo(groups, fixed: tuple[str, str] | None, pas: tuple[str, str] | None) -> dict:
    """Held-out log error of the step over chain groups (no tree nodes): each group's SPEC
    at its measured configurations is ``fixed + pass x passes`` predicted from the other
    groups (a cost ``None``: the group's own least squares, the groups that identify it);
    ``log(measured step / (target + SPEC))`` averaged over the group's rows."""
    errs, rows_err, names = [], [], []
    for h in groups:
        if any(c["nodes"] for c in h["configs"]):
            continue
        train = [g for g in groups if g is not h]
        if (fixed is None or pas is None) and "pass_ms" not in h:
            continue
        f_ms = h["fixed_ms"] if fixed is None else math.exp(predict_cost(
            train, h, "fixed", FIXED_NORMS[fixed[0]], CATEGORIES[fixed[1]])[0])
        p_ms = h["pass_ms"] if pas is None else math.exp(predict_cost(
            train, h, "pass", PASS_NORMS[pas[0]], CATEGORIES[pas[1]])[0])
        e = [math.log(c["step_ms"] / (c["target_ms"] + f_ms + p_ms * c["passes"]))
             for c in h["configs"]]
        errs.append(float(np.mean(e)))
        rows_err += e
        names.append(h["group"])
    x, r = np.array(errs), np.array(rows_err)
    return {"fixed": fixed, "pass": pas, "groups": len(x), "rows": len(r),
            "sd": float(np.std(x, ddof=1)), "bias": float(np.mean(x)),
            "rms": float(np.sqrt(np.mean(x ** 2))), "row_rms": float(np.sqrt(np.mean(r ** 2))),
            "errors": {n: round(float(v), 3) for n, v in zip(names, x, strict=True)}}


MODEL_FORM = (("ms", "engine + hybrid"), ("roofline", "engine"))


def nested_step(groups) -> dict:
    """The best combination chosen without the held-out group: for each chain group, the
    combination of least RMS over the other groups (each held out in turn among them)
    predicts it; what choosing from the 180 is worth out of sample."""
    combos = [(t["fixed"], t["pass"]) for t in step_table(groups)]
    full = {c: step_logo(groups, *c)["errors"] for c in
            ((tuple(f), tuple(p)) for f, p in combos)}
    errs, chosen = {}, {}
    for h in next(iter(full.values())):
        rest = [g for g in groups if g["group"] != h]
        best = min(full, key=lambda c: step_logo(rest, *c)["rms"])
        errs[h], chosen[h] = full[best][h], best
    x = np.array(list(errs.values()))
    return {"groups": len(x), "sd": float(np.std(x, ddof=1)), "bias": float(np.mean(x)),
            "rms": float(np.sqrt(np.mean(x ** 2))), "errors": errs,
            "chosen": {h: [list(c[0]), list(c[1])] for h, c in chosen.items()}}


def step_table(groups) -> list[dict]:
    out = [step_logo(groups, *MODEL_FORM)]
    for fn in FIXED_NORMS:
        for fc in CATEGORIES:
            for pn in PASS_NORMS:
                for pc in ("none", "engine"):
                    if ((fn, fc), (pn, pc)) != MODEL_FORM:
                        out.append(step_logo(groups, (fn, fc), (pn, pc)))
    return out


def print_groups(groups) -> None:
    print("| group | AR row | AR step ms | pass roofline ms | configs | fixed ms (se) "
          "| pass ms (se) | pass / roofline | fixed + pass ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for g in sorted(groups, key=lambda g: g["group"]):
        both = "pass_ms" in g
        mark = {c: "" if not both or physical(g, c) else " *" for c in ("fixed", "pass")}
        f = f"{g['fixed_ms']:.2f} ({g['fixed_se']:.2f}){mark['fixed']}" if both else "-"
        p = f"{g['pass_ms']:.2f} ({g['pass_se']:.2f}){mark['pass']}" if both else "-"
        m = f"{g['pass_ms'] / g['roofline_ms']:.2f}" if both else "-"
        fp = g["fixed_ms"] + g["pass_ms"] if both else g.get("fixed_plus_pass_ms")
        print(f"| {g['group']} | {'yes' if g['has_ar'] else 'no'} | {g['step_ar_ms']:.2f} | "
              f"{g['roofline_ms']:.3f} | {len(g['configs'])} | {f} | {p} | {m} | "
              f"{'-' if fp is None else f'{fp:.2f}'} |")
    print("(* outside what the physics allows: a negative fixed cost, a pass faster than its "
          "drafter's bytes at peak bandwidth; left out of the per-cost tables; se nan: as many "
          "configurations as costs)")


def print_costs(rows: list[dict], label: str) -> None:
    print(f"\nper cost, leave one group out ({label}):")
    print("| cost | per | pooled by | groups | spread (sd of log cost / x) | LOGO sd | bias "
          "| RMS | held out alone in its category |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for t in rows:
        print(f"| {t['cost']} | {t['normaliser']} | {t['category']} | {t['groups']} | "
              f"{t['spread']:.2f} | {t['sd']:.2f} | {t['bias']:+.2f} | {t['rms']:.2f} | "
              f"{t['fallback']} |")


def ar_kept_errors(path: Path, groups: dict) -> dict:
    """The AR-kept check's own error (its medians, ``log(median / measured)`` of tok/s: the
    step's ``log(measured / predicted)`` at the row's acceptance) over the step table's
    groups that it scored, per group averaged as :func:`step_logo` does."""
    rows = [r for r in json.loads(path.read_text())["rows"] if r.get("kind") == "ar-kept"]
    per = defaultdict(list)
    for r in rows:
        label = f"{r['pair']}/{r['engine']}/{r['method']}"
        if label in groups:
            per[label].append((math.log(r["median"] / r["measured"]),
                               (r["hi90"] - r["lo90"]) / r["median"]))
    x = np.array([np.mean([e for e, _ in v]) for v in per.values()])
    r_ = np.array([e for v in per.values() for e, _ in v])
    return {"groups": len(x), "rows": len(r_), "sd": float(np.std(x, ddof=1)),
            "bias": float(np.mean(x)), "rms": float(np.sqrt(np.mean(x ** 2))),
            "row_rms": float(np.sqrt(np.mean(r_ ** 2))),
            "mean_width": float(np.mean([w for v in per.values() for _, w in v])),
            "errors": {k: round(float(e), 3) for k, e in zip(per, x, strict=True)}}


def width(log_sd: float) -> float:
    """The mean 90% width over the median (validate's ``width``) of a log-normal of sd
    ``log_sd``: ``2 sinh(1.645 sd)`` (issue 20's 35% is sd 0.106)."""
    return 2.0 * math.sinh(1.645 * log_sd)


def print_steps(steps: list[dict], own: dict, label: str, parts: list[dict]) -> None:
    print(f"\nthe step, leave one group out ({label}; chain groups, SPEC = fixed + pass x "
          "passes, each cost predicted from the other groups' physical ones):")
    print("| fixed per / pooled by | pass per / pooled by | groups | rows | LOGO sd | bias "
          "| RMS | row RMS | 90% width at that RMS |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    ranked = sorted(steps[1:], key=lambda t: t["rms"])
    for t in [steps[0], *ranked[:8], ranked[-1]]:
        print(f"| {' / '.join(t['fixed'])} | {' / '.join(t['pass'])} | {t['groups']} | "
              f"{t['rows']} | {t['sd']:.3f} | {t['bias']:+.3f} | {t['rms']:.3f} | "
              f"{t['row_rms']:.3f} | {width(t['rms']):.0%} |")
    for t in parts:
        print(f"| {' / '.join(t['fixed'] or ['its own'])} | {' / '.join(t['pass'] or ['its own'])}"
              f" | {t['groups']} | {t['rows']} | {t['sd']:.3f} | {t['bias']:+.3f} | "
              f"{t['rms']:.3f} | {t['row_rms']:.3f} | {width(t['rms']):.0%} |")
    print(f"| its own | its own | {own['groups']} | {own['rows']} | "
          f"{own['sd']:.3f} | {own['bias']:+.3f} | {own['rms']:.3f} | {own['row_rms']:.3f} | "
          f"{width(own['row_rms']):.0%} (row RMS) |")
    print(f"(first row: the model's form; then the best 8 and the worst of {len(steps)} "
          "combinations by RMS)")


#: public sweeps outside the corpus whose groups the study adds (a second fit of the corpus
#: plus these): the lucebox DDTree budget sweeps and the AngelSlim SGLang EAGLE-3 sweep
EXTRA_SWEEPS = ("lucebox_*.csv", "sglang_eagle3_qwen3_30b_a3b_h100x4_angelslim.csv")


def write_combined(out: Path) -> int:
    """The corpus plus :data:`EXTRA_SWEEPS`, through ``scripts/combine_public.py``'s own
    ``combine`` (their rows get the corpus's treatment)."""
    import csv

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "scripts"))
    from combine_public import combine

    with open(root / "data" / "models.csv", newline="", encoding="utf-8") as fh:
        cards = {r["model"] for r in csv.DictReader(fh)}
    files = [f for pattern in EXTRA_SWEEPS for f in sorted((root / "data" / "public").glob(pattern))]
    text, log = combine(root / "data" / "examples" / "public_multi_model.csv", files, cards)
    out.write_text(text, encoding="utf-8")
    print("\n".join(log))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("fits", nargs="*", type=Path)
    ap.add_argument("--write-combined", type=Path, metavar="CSV",
                    help="write the corpus plus the extra sweeps (EXTRA_SWEEPS) to CSV, in "
                         "the corpus's schema, and stop: the data of the second fit")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--ar-kept", type=Path,
                    help="a `validate --group pair --keep-ar --format json` file: its medians' "
                         "log error per group, over the groups of the step table")
    a = ap.parse_args(argv)
    if a.write_combined is not None:
        return write_combined(a.write_combined)
    if not a.fits:
        ap.error("name a fit (or --write-combined CSV)")
    groups: list[dict] = []
    for path in a.fits:
        fit = store.load_fit(path)
        groups += group_records(fit, {g["group"] for g in groups})
    with_ar = [g for g in groups if g["has_ar"]]
    print_groups(groups)
    out: dict = {"fits": [str(p) for p in a.fits], "groups": groups}
    for subset, label, key in ((with_ar, "groups with an AR row", "with_ar"),
                               (groups, "all groups", "all")):
        costs = table(subset, "pass", PASS_NORMS) + table(subset, "fixed", FIXED_NORMS)
        steps, own = step_table(subset), step_logo(subset, None, None)
        split = [g for g in subset if "pass_ms" in g]   # (the groups a cost of its own needs)
        parts = [step_logo(split, *MODEL_FORM), step_logo(subset, MODEL_FORM[0], None),
                 step_logo(subset, None, MODEL_FORM[1])]
        print_costs(costs, label)
        print_steps(steps, own, label, parts)
        out[key] = {"costs": costs, "step": steps, "step_own": own, "step_one_cost": parts}
        nested = nested_step(subset)
        out[key]["nested"] = nested
        print(f"| the best of the 180 chosen without the held-out group | | {nested['groups']} "
              f"| | {nested['sd']:.3f} | {nested['bias']:+.3f} | {nested['rms']:.3f} | | "
              f"{width(nested['rms']):.0%} |")
        if a.ar_kept is not None:
            out[key]["ar_kept"] = checked = ar_kept_errors(a.ar_kept, steps[0]["errors"])
            print(f"| {a.ar_kept.name}: the AR-kept check's medians, the same groups | | "
                  f"{checked['groups']} | {checked['rows']} | {checked['sd']:.3f} | "
                  f"{checked['bias']:+.3f} | {checked['rms']:.3f} | {checked['row_rms']:.3f} | "
                  f"{width(checked['rms']):.0%} (its own mean width "
                  f"{checked['mean_width']:.0%}) |")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

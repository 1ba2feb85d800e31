#!/usr/bin/env python3
"""Benchmark `ddtree-bayes update` for one unsurprising new row: the PSIS reweight it does by
default against the exact refit it does with `--refit`, as whole processes, side by side,
and how far apart their intervals are.

Run with the project's virtualenv python: .venv/bin/python bench/bench_update.py [--runs 5]

In a scratch dir under /tmp (bundled data copied to data/, made writable; the repository's
data/ and models/ are never touched): one untimed `fit` of the 9 bundled rows is the
previous fit and fills a dedicated compile cache (PYTENSOR base_compiledir and
NUMBA_CACHE_DIR under the scratch dir, as bench_fit.py's warm cache). Then, --runs times,
round-robin so machine load affects both alike:

1. reset: data back to the 9 bundled rows, models/latest.json back to the previous fit;
2. `ddtree-bayes add ...` one HYPOTHETICAL row (B300 SGLang DDTree b16/B32, accept 13.1,
   612 tok/s: the 36th percentile of the previous fit's prediction) (timed);
3. `ddtree-bayes update --quiet --format json` (timed): must go the PSIS reweight way;
4. `ddtree-bayes predict --accept 12:16 --format json` on that fit (timed: the light path
   the reweight is compared with, and the headline query's intervals);
5. models/latest.json back to the previous fit; `ddtree-bayes update --refit --quiet
   --format json` (timed): the exact NUTS refit on the same 10 rows, same seed;
6. `ddtree-bayes predict --accept 12:16 --format json` on the refit.

Then --reweight-runs more rounds of steps 1-4 only (timing samples without the minutes a
refit takes: the refit's intervals are the same every run, same seed).

Compared, reweight vs refit: every tracked query's (the default scenario at accept 14,
sglang and native) and the headline query's (`predict --accept 12:16`: sglang and native at
12..16 and U(12,16)) median and 90% interval bounds; the largest relative difference must
be within --tolerance (2%). Prints markdown tables, writes --out (JSON, with every command
and run, load averages) and a .md next to it. Exit 1 if any process failed, an update did
not go the expected way, or the intervals differ by more than the tolerance.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

ADD = ["add", "--hardware", "b300", "--engine", "sglang", "--method", "ddtree", "--block", "16",
       "--budget", "32", "--accept", "13.1", "--tok-s", "612", "--source",
       "HYPOTHETICAL benchmark row (bench_update.py; not a measurement)"]
#: --row repeat: a second run of the bundled B300 SGLang AR row (133 tok/s measured), the most
#: common update: its first repeat adds config_share to the model (engine/reweight.augmented)
ADD_REPEAT = ["add", "--hardware", "b300", "--engine", "sglang", "--method", "ar",
              "--accept", "1", "--tok-s", "131", "--source",
              "HYPOTHETICAL repeat of the B300 AR row (bench_update.py; not a measurement)"]
STATS = ("median", "lo90", "hi90")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time `update` (PSIS reweight) vs `update --refit`.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="timed reweight + refit pairs")
    p.add_argument("--reweight-runs", type=int, default=0,
                   help="extra timed reweighting updates (and predicts) after the pairs, "
                        "without a refit: more timing samples in a short quiet window")
    p.add_argument("--row", choices=("new", "repeat"), default="new",
                   help="the added row: a new configuration (B300 DDTree b16/B32) or a repeat "
                        "of the measured B300 AR row")
    p.add_argument("--tolerance", type=float, default=0.02,
                   help="largest allowed relative difference of a median or 90%% bound")
    p.add_argument("--target-s", type=float, default=1.5,
                   help="the whole-process target for the reweighting update (median)")
    p.add_argument("--out", type=Path, default=C.RESULTS_DIR / "update.json")
    p.add_argument("--keep", action="store_true", help="keep the scratch dir")
    p.add_argument("--timeout", type=float, default=1800)
    return p.parse_args(argv)


def intervals(update_json: dict, predict_json: dict) -> dict[str, dict[str, float]]:
    """label -> {median, lo90, hi90}: the tracked queries after the update, and the rows of
    the headline predict query."""
    out = {}
    for c in update_json.get("tracked", []):
        if c.get("after"):
            out[f"tracked {c['label']}"] = {k: c["after"][k] for k in STATS}
    for r in predict_json.get("rows", []):
        accept = r["accept"] if r["accept"] is not None else r["accept_distribution"]["label"]
        out[f"predict --accept 12:16: {r['engine']} accept {accept}"] = {
            k: r[k] for k in STATS}
    return out


def compare(reweight: dict, refit: dict) -> list[dict]:
    rows = []
    for label, a in reweight.items():
        b = refit.get(label)
        if b is None:
            continue
        rows.append({"query": label, "reweight": a, "refit": b,
                     "rel_diff": {k: a[k] / b[k] - 1.0 for k in STATS}})
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli = str(C.cli_path())
    machine = C.machine_info()
    date = C.now_iso()
    root = Path(tempfile.mkdtemp(prefix="ddtree-bench-update-", dir="/tmp"))
    work = root / "work"
    (work / "data").mkdir(parents=True)
    (work / "models").mkdir()
    bundled = C.PROJECT_ROOT / "src" / "ddtree_bayes" / "_bundled"
    for name in ("measurements.csv", "hardware.csv", "seed_estimates.csv"):
        shutil.copy(bundled / name, work / "data" / name)
        (work / "data" / name).chmod(0o644)
    shutil.copy(bundled / "priors.toml", work / "models" / "priors.toml")
    base_data = (work / "data" / "measurements.csv").read_bytes()
    env = {"PYTENSOR_FLAGS": f"base_compiledir={root / 'cache' / 'pytensor'},"
                             "numba__fastmath=False",
           "NUMBA_CACHE_DIR": str(root / "cache" / "numba")}
    fit_cmd = [cli, "fit", "--quiet", "--format", "json"]
    add_cmd = [cli, *(ADD if args.row == "new" else ADD_REPEAT)]
    update_cmd = [cli, "update", "--quiet", "--format", "json"]
    refit_cmd = [cli, "update", "--refit", "--quiet", "--format", "json"]
    predict_cmd = [cli, "predict", "--accept", "12:16", "--format", "json"]
    commands = {"previous fit (untimed)": C.command_line(fit_cmd, env, work),
                "add": C.command_line(add_cmd, env, work),
                "update (PSIS reweight)": C.command_line(update_cmd, env, work),
                "update --refit": C.command_line(refit_cmd, env, work),
                "predict (on each new fit)": C.command_line(predict_cmd, env, work)}
    print(f"scratch dir: {root}", flush=True)
    runs: list[dict] = []
    failed = False

    def record(kind: str, i: int, r: dict) -> dict:
        nonlocal failed
        rec = {"kind": kind, "index": i, "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
               "returncode": r["returncode"], "command": r["command"], "loadavg": C.loadavg()}
        try:
            rec["json"] = json.loads(r["stdout"]) if kind != "add" else None
        except json.JSONDecodeError:
            rec["json"] = None
        if r["returncode"] != 0:
            failed = True
            rec["stderr_tail"] = C.tail(r["stderr"], 20)
            print(rec["stderr_tail"], file=sys.stderr)
        runs.append(rec)
        print(f"[{kind} {i}] {r['wall_s']:.2f} s (exit {r['returncode']})", flush=True)
        return rec

    def timed(kind: str, i: int, cmd: list[str], timeout: float) -> dict:
        return record(kind, i, C.run_timed(cmd, cwd=work, env=env, timeout=timeout))

    prev = timed("previous-fit", 0, fit_cmd, args.timeout)
    if failed or not prev["json"]:
        print("the previous fit failed", file=sys.stderr)
        return 1
    prev_id = prev["json"]["fit_id"]
    latest = json.dumps({"fit_id": prev_id, "file": f"fits/{prev_id}.nc", "converged": True})
    comparisons, wrong_way = [], []
    for i in range(1, args.runs + 1):
        (work / "data" / "measurements.csv").write_bytes(base_data)
        (work / "models" / "latest.json").write_text(latest)
        timed("add", i, add_cmd, 60)
        up = timed("update-reweight", i, update_cmd, args.timeout)
        p_rw = timed("predict-reweighted", i, predict_cmd, 120)
        (work / "models" / "latest.json").write_text(latest)
        rf = timed("update-refit", i, refit_cmd, args.timeout)
        p_rf = timed("predict-refit", i, predict_cmd, 120)
        if not all(r["json"] for r in (up, p_rw, rf, p_rf)):
            continue
        if up["json"].get("made_by") != "psis-reweight" or rf["json"].get("made_by") != "refit":
            wrong_way.append(i)
        comparisons.append({"index": i, "pareto_k": up["json"]["psis"]["pareto_k"],
                            "n_eff": up["json"]["psis"]["n_eff"],
                            "rows": compare(intervals(up["json"], p_rw["json"]),
                                            intervals(rf["json"], p_rf["json"]))})

    for j in range(args.runs + 1, args.runs + 1 + args.reweight_runs):
        (work / "data" / "measurements.csv").write_bytes(base_data)
        (work / "models" / "latest.json").write_text(latest)
        timed("add", j, add_cmd, 60)
        up = timed("update-reweight", j, update_cmd, args.timeout)
        timed("predict-reweighted", j, predict_cmd, 120)
        if up["json"] and up["json"].get("made_by") != "psis-reweight":
            wrong_way.append(j)

    def pick(kind: str) -> list[dict]:
        return [r for r in runs if r["kind"] == kind and r["returncode"] == 0
                and (kind == "add" or r["json"] is not None)]

    ups, rfs = pick("update-reweight"), pick("update-refit")
    worst = max((abs(d) for c in comparisons for row in c["rows"] for d in row["rel_diff"].values()),
                default=None)
    summary = {
        "add_wall_s": C.summary([r["wall_s"] for r in pick("add")]),
        "reweight_update_wall_s": C.summary([r["wall_s"] for r in ups]),
        "refit_update_wall_s": C.summary([r["wall_s"] for r in rfs]),
        "predict_wall_s": C.summary([r["wall_s"] for r in pick("predict-reweighted")]),
        "reweight_update_cpu_s": C.summary([r["cpu_s"] for r in ups]),
        "refit_update_cpu_s": C.summary([r["cpu_s"] for r in rfs]),
        "predict_cpu_s": C.summary([r["cpu_s"] for r in pick("predict-reweighted")]),
        "add_cpu_s": C.summary([r["cpu_s"] for r in pick("add")]),
        "reweight_in_process_s": C.summary([r["json"].get("total_s") for r in ups]),
        "reweight_weights_s": C.summary([r["json"]["psis"]["seconds"] for r in ups
                                         if r["json"].get("psis")]),
        "reweight_save_s": C.summary([r["json"]["reweight"]["save_s"] for r in ups
                                      if r["json"].get("reweight")]),
        "refit_fit_s": C.summary([r["json"]["refit"]["fit_s"] for r in rfs
                                  if r["json"].get("refit")]),
        "paired_refit_over_reweight": C.summary([
            f["wall_s"] / u["wall_s"] for u in ups for f in rfs if u["index"] == f["index"]]),
        "pareto_k": [c["pareto_k"] for c in comparisons],
        "n_eff": [c["n_eff"] for c in comparisons],
        "max_abs_rel_diff": worst,
        "wrong_way_runs": wrong_way,
        "loadavg_min_max": [min(r["loadavg"][0] for r in runs), max(r["loadavg"][0] for r in runs)],
    }
    s = summary
    target_met = (s["reweight_update_wall_s"]["median"] is not None
                  and s["reweight_update_wall_s"]["median"] <= args.target_s)
    within = worst is not None and worst <= args.tolerance

    def row(label: str, key: str) -> list[str]:
        v = s[key]
        return [label, str(v["n"]), C.fmt_s(v["median"]), C.fmt_s(v["min"]), C.fmt_s(v["max"])]

    table = C.markdown_table(["what (whole process unless noted)", "runs", "median (s)",
                              "min (s)", "max (s)"], [
        row("`ddtree-bayes update` (score + PSIS reweight + save + tracked queries)",
            "reweight_update_wall_s"),
        row("`ddtree-bayes update --refit` (score + NUTS refit + tracked queries)",
            "refit_update_wall_s"),
        row("`ddtree-bayes predict --accept 12:16` (for scale)", "predict_wall_s"),
        row("`ddtree-bayes add` (one row)", "add_wall_s"),
        row("CPU seconds (user + system) of `update` (PSIS reweight)", "reweight_update_cpu_s"),
        row("CPU seconds of `update --refit`", "refit_update_cpu_s"),
        row("CPU seconds of `predict --accept 12:16`", "predict_cpu_s"),
        row("reweight update: in-process total", "reweight_in_process_s"),
        row("reweight update: likelihood + PSIS weights", "reweight_weights_s"),
        row("reweight update: resample + save the artifact", "reweight_save_s"),
        row("refit update: its refit (api.fit, in-process)", "refit_fit_s")])
    ratio = s["paired_refit_over_reweight"]["median"]
    last = comparisons[-1]["rows"] if comparisons else []
    cmp_rows = []
    for r in last:
        a, b, d = r["reweight"], r["refit"], r["rel_diff"]
        cmp_rows.append([r["query"], f"{a['median']:.1f} ({a['lo90']:.1f}-{a['hi90']:.1f})",
                         f"{b['median']:.1f} ({b['lo90']:.1f}-{b['hi90']:.1f})",
                         *(f"{100 * d[k]:+.2f}%" for k in STATS)])
    cmp_table = C.markdown_table(["query (tok/s)", "reweight: median (90%)", "refit: median (90%)",
                                  "median", "lo90", "hi90"], cmp_rows)
    ks = ", ".join(f"{k:.3f}" for k in s["pareto_k"] if k is not None)
    md = (f"## ddtree-bayes update: PSIS reweight vs refit, one new row ({date})\n\n"
          f"nproc {machine['nproc']}, {machine['cpu_model']}; 1-min load average during the "
          f"runs {s['loadavg_min_max'][0]:.2f}-{s['loadavg_min_max'][1]:.2f}\n\n{table}\n\n"
          f"reweighting update, median wall: **{C.fmt_s(s['reweight_update_wall_s']['median'])} s**"
          f" (target <= {args.target_s:g} s: {'met' if target_met else 'NOT met'}; its CPU "
          f"seconds {C.fmt_s(s['reweight_update_cpu_s']['median'])}, predict's "
          f"{C.fmt_s(s['predict_cpu_s']['median'])}: CPU time is what machine load does not "
          "inflate); refit / "
          f"reweight, paired by run: **{C.fmt_s(ratio, 1)}x**\n\n"
          f"Pareto k per run: {ks or '-'}; effective draws (n_eff) "
          f"{', '.join(f'{x:.0f}' for x in s['n_eff'])}; runs that went the wrong way: "
          f"{wrong_way or 'none'}\n\n"
          f"Intervals, reweighted fit vs refit (same seed; posterior predictive, run "
          f"{comparisons[-1]['index'] if comparisons else '-'}; every run's numbers are in the "
          f"JSON):\n\n{cmp_table}\n\nlargest difference of a median or 90% bound over all runs: "
          f"**{'-' if worst is None else f'{100 * worst:.2f}%'}** (tolerance "
          f"{100 * args.tolerance:g}%: {'within' if within else 'NOT within'})\n\n"
          "commands (cwd = scratch dir):\n\n"
          + "\n".join(f"- {k}: `{v}`" for k, v in commands.items()) + "\n")
    C.write_json(args.out, {"benchmark": "ddtree-bayes update: PSIS reweight vs refit "
                                         "(whole processes)",
                            "date": date, "machine": machine, "settings": vars(args) | {
                                "out": str(args.out)}, "commands": commands,
                            "benchmark_command": C.command_line([sys.executable, *sys.argv]),
                            "summary": summary, "comparisons": comparisons, "runs": runs,
                            "markdown": md, "loadavg_at_end": C.loadavg()})
    args.out.with_suffix(".md").write_text(md)
    print("\n" + md)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed or wrong_way or not within else 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Benchmark `ddtree-bayes update` (score the new row, refit, tracked queries) against a
fresh `ddtree-bayes fit` of the same data, as whole processes.

Run with the project's virtualenv python: .venv/bin/python bench/bench_update.py [--runs 5]

In a scratch dir under /tmp (bundled data copied to data/, made writable; the repository's
data/ and models/ are never touched): one untimed `fit` of the 9 bundled rows is the
previous fit and fills a dedicated compile cache (PYTENSOR base_compiledir and
NUMBA_CACHE_DIR under the scratch dir, as bench_fit.py's warm cache). Then, --runs times,
round-robin so machine load affects both alike:

1. reset: data back to the 9 bundled rows, models/latest.json back to the previous fit;
2. `ddtree-bayes add ...` one HYPOTHETICAL row (B300 SGLang DDTree b16/B32, accept 13.1,
   612 tok/s) (timed: add latency);
3. `ddtree-bayes update --quiet --format json` (timed);
4. `ddtree-bayes fit --quiet --format json` of the same 10 rows (timed: the cold fit that
   update replaces).

Prints markdown tables, writes --out (JSON, with every command and run, load averages)
and a .md next to it. Exit 1 if any process failed.
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time `ddtree-bayes update` vs a fresh `fit`.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="timed update + fit pairs")
    p.add_argument("--out", type=Path, default=C.RESULTS_DIR / "update.json")
    p.add_argument("--keep", action="store_true", help="keep the scratch dir")
    p.add_argument("--timeout", type=float, default=1800)
    return p.parse_args(argv)


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
    update_cmd = [cli, "update", "--quiet", "--format", "json"]
    add_cmd = [cli, *ADD]
    commands = {"previous fit (untimed)": C.command_line(fit_cmd, env, work),
                "add": C.command_line(add_cmd, env, work),
                "update": C.command_line(update_cmd, env, work),
                "fit": C.command_line(fit_cmd, env, work)}
    print(f"scratch dir: {root}", flush=True)
    runs: list[dict] = []
    failed = False

    def record(kind: str, i: int, r: dict, ok_codes=(0,)) -> dict:
        nonlocal failed
        rec = {"kind": kind, "index": i, "wall_s": r["wall_s"], "returncode": r["returncode"],
               "command": r["command"], "loadavg": C.loadavg()}
        try:
            rec["json"] = json.loads(r["stdout"]) if kind != "add" else None
        except json.JSONDecodeError:
            rec["json"] = None
        if r["returncode"] not in ok_codes:
            failed = True
            rec["stderr_tail"] = C.tail(r["stderr"], 20)
            print(rec["stderr_tail"], file=sys.stderr)
        runs.append(rec)
        print(f"[{kind} {i}] {r['wall_s']:.2f} s (exit {r['returncode']})", flush=True)
        return rec

    prev = record("previous-fit", 0, C.run_timed(fit_cmd, cwd=work, env=env,
                                                 timeout=args.timeout))
    if failed or not prev["json"]:
        print("the previous fit failed", file=sys.stderr)
        return 1
    prev_id = prev["json"]["fit_id"]
    latest = {"fit_id": prev_id, "file": f"fits/{prev_id}.nc", "converged": True}
    for i in range(1, args.runs + 1):
        (work / "data" / "measurements.csv").write_bytes(base_data)
        (work / "models" / "latest.json").write_text(json.dumps(latest))
        record("add", i, C.run_timed(add_cmd, cwd=work, env=env, timeout=60))
        record("update", i, C.run_timed(update_cmd, cwd=work, env=env, timeout=args.timeout))
        record("fit", i, C.run_timed(fit_cmd, cwd=work, env=env, timeout=args.timeout))

    def pick(kind: str) -> list[dict]:
        return [r for r in runs if r["kind"] == kind and r["returncode"] == 0]

    ups, fits, adds = pick("update"), pick("fit"), pick("add")
    summary = {
        "add_wall_s": C.summary([r["wall_s"] for r in adds]),
        "update_wall_s": C.summary([r["wall_s"] for r in ups]),
        "fit_wall_s": C.summary([r["wall_s"] for r in fits]),
        "update_refit_s": C.summary([r["json"]["refit"]["fit_s"] for r in ups if r["json"]]),
        "update_compile_s": C.summary([r["json"]["refit"]["timings"].get("compile_s")
                                       for r in ups if r["json"]]),
        "update_sample_s": C.summary([r["json"]["refit"]["timings"].get("sample_s")
                                      for r in ups if r["json"]]),
        # scoring, loading both fits and the tracked queries: update's own work
        "update_outside_refit_s": C.summary([r["json"]["total_s"] - r["json"]["refit"]["fit_s"]
                                             for r in ups if r["json"]]),
        "fit_compile_s": C.summary([r["json"]["timings"].get("compile_s")
                                    for r in fits if r["json"]]),
        "fit_sample_s": C.summary([r["json"]["timings"].get("sample_s")
                                   for r in fits if r["json"]]),
        # per run, update minus the fit that ran right after it (load drifts between runs)
        "paired_update_minus_fit_s": C.summary([
            u["wall_s"] - f["wall_s"] for u in ups for f in fits if u["index"] == f["index"]]),
        "loadavg_min_max": [min(r["loadavg"][0] for r in runs), max(r["loadavg"][0] for r in runs)],
    }
    s = summary

    def row(label: str, key: str) -> list[str]:
        v = s[key]
        return [label, str(v["n"]), C.fmt_s(v["median"]), C.fmt_s(v["min"]), C.fmt_s(v["max"])]

    table = C.markdown_table(["what (whole process unless noted)", "runs", "median (s)",
                              "min (s)", "max (s)"], [
        row("`ddtree-bayes update` (score + refit + tracked queries)", "update_wall_s"),
        row("`ddtree-bayes fit` of the same 10 rows", "fit_wall_s"),
        row("update minus fit, paired by run", "paired_update_minus_fit_s"),
        row("`ddtree-bayes add` (one row)", "add_wall_s"),
        row("update: its refit (api.fit, in-process)", "update_refit_s"),
        row("update: compile within the refit", "update_compile_s"),
        row("update: sampling within the refit", "update_sample_s"),
        row("update: scoring + tracked queries (outside the refit)", "update_outside_refit_s"),
        row("fit: compile", "fit_compile_s"),
        row("fit: sampling", "fit_sample_s")])
    ratio = (s["update_wall_s"]["median"] / s["fit_wall_s"]["median"]
             if s["update_wall_s"]["median"] and s["fit_wall_s"]["median"] else None)
    md = (f"## ddtree-bayes update vs fit ({date})\n\n"
          f"nproc {machine['nproc']}, {machine['cpu_model']}; 1-min load average during the "
          f"runs {s['loadavg_min_max'][0]:.2f}-{s['loadavg_min_max'][1]:.2f}\n\n{table}\n\n"
          f"update / fit, median wall: **{C.fmt_s(ratio)}x**\n\ncommands (cwd = scratch "
          "dir):\n\n" + "\n".join(f"- {k}: `{v}`" for k, v in commands.items()) + "\n")
    C.write_json(args.out, {"benchmark": "ddtree-bayes update vs fit (whole processes)",
                            "date": date, "machine": machine, "settings": vars(args) | {
                                "out": str(args.out)}, "commands": commands,
                            "benchmark_command": C.command_line([sys.executable, *sys.argv]),
                            "summary": summary, "runs": runs, "markdown": md,
                            "loadavg_at_end": C.loadavg()})
    args.out.with_suffix(".md").write_text(md)
    print("\n" + md)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

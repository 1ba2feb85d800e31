#!/usr/bin/env python3
"""Benchmark `ddtree-bayes predict` as whole fresh processes, and show where the time goes.

Run with the project's virtualenv python (the CLI is taken from next to sys.executable):

    .venv/bin/python bench/bench_predict.py                  # 5 runs per command
    .venv/bin/python bench/bench_predict.py --runs 1 --importtime-runs 1   # smoke test

What it does:

1. Working directory: a new temp dir under /tmp (or --workdir). If it has no
   models/latest.json, one fit is made there first with default settings
   (`ddtree-bayes fit --quiet`, bundled data and priors; not timed). Reuse a dir that
   already has a fit with --workdir DIR --keep-workdir to skip that step.
2. Timed commands, each a fresh process, wall clock via time.perf_counter around the
   subprocess, output captured (not printed); --warmup untimed rounds first, then --runs
   rounds, the commands interleaved round-robin so slow drift hits them all alike:
     - `python -c pass`                   interpreter start-up floor (venv python)
     - `ddtree-bayes --version`           CLI start-up without the lazy predict imports
     - `ddtree-bayes predict --accept 12:16`
     - `ddtree-bayes predict`             (no flags: the default scenario)
   Reports median / min / max per command.
3. Import time: `python -X importtime <cli> predict --accept 12:16` (the real command, so
   the modules that cli/predict.py imports lazily inside `predict` are included), --importtime-runs
   times; per module the median over runs. Prints the top --top modules by cumulative
   time, the top packages by summed self time, and the total. -X importtime itself adds
   overhead: use these numbers for attribution, the timed runs for the absolute cost.

Writes --out (JSON, default bench/results/predict.json) and a .md with the tables next to
it. Exit status 0 if every process succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

IMPORTTIME_LINE = re.compile(r"^import time:\s+(\d+)\s*\|\s*(\d+)\s*\|( *)(\S.*)$")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time whole-process `ddtree-bayes predict` (with --accept 12:16 and with "
                    "no flags) and break its start-up down by import time.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="timed runs per command")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed rounds first (page cache, __pycache__)")
    p.add_argument("--importtime-runs", type=int, default=3,
                   help="runs under -X importtime (0 skips the import breakdown)")
    p.add_argument("--top", type=int, default=10, help="modules/packages listed")
    p.add_argument("--workdir", type=Path, default=None,
                   help="working dir with models/ (default: a new temp dir under /tmp); a fit "
                        "is made there first if it has no models/latest.json")
    p.add_argument("--keep-workdir", action="store_true",
                   help="do not delete the temp working dir at the end (a --workdir you "
                        "pass is never deleted)")
    p.add_argument("--fit-args", default="",
                   help="extra arguments for the one-off setup fit, e.g. \"--seed 1\" "
                        "(default: none, i.e. default settings)")
    p.add_argument("--out", type=Path, default=C.RESULTS_DIR / "predict.json",
                   help="JSON results file (a .md with the tables is written next to it)")
    p.add_argument("--timeout", type=float, default=600, help="seconds allowed per process")
    p.add_argument("--fit-timeout", type=float, default=3600,
                   help="seconds allowed for the setup fit")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be >= 1")
    if args.warmup < 0 or args.importtime_runs < 0 or args.top < 1:
        p.error("--warmup and --importtime-runs must be >= 0, --top >= 1")
    return args


def ensure_fit(cli: Path, workdir: Path, args: argparse.Namespace) -> dict | None:
    """Make one fit in ``workdir`` unless it already has models/latest.json.

    Returns the setup-fit record (None if an existing fit is used); its "ok" is False when
    the fit failed, which ends the benchmark.
    """
    if (workdir / "models" / "latest.json").exists():
        print(f"using the existing fit in {workdir / 'models'}", flush=True)
        return None
    argv = [str(cli), "fit", "--quiet", *shlex.split(args.fit_args)]
    print(f"no fit in {workdir}; making one (not timed):\n  "
          f"{C.command_line(argv, cwd=workdir)}", flush=True)
    r = C.run_timed(argv, cwd=workdir, timeout=args.fit_timeout)
    rec = {"command": r["command"], "returncode": r["returncode"], "timed_out": r["timed_out"],
           "ok": r["returncode"] == 0}
    if not rec["ok"]:
        print(f"error: the setup fit failed (exit {r['returncode']}"
              f"{', timed out' if r['timed_out'] else ''}; exit 5 = not converged, which "
              f"predict refuses):\n{C.tail(r['stderr'] or r['stdout'], 30)}", file=sys.stderr)
    return rec


def parse_importtime(stderr: str) -> list[dict]:
    """Rows of ``-X importtime`` output: module, self_us, cumulative_us, depth (0 = top)."""
    rows = []
    for line in stderr.splitlines():
        m = IMPORTTIME_LINE.match(line)
        if m:
            rows.append({"module": m.group(4).strip(), "self_us": int(m.group(1)),
                         "cumulative_us": int(m.group(2)),
                         "depth": max(0, (len(m.group(3)) - 1) // 2)})
    return rows


def importtime_breakdown(cli: Path, workdir: Path, args: argparse.Namespace
                         ) -> tuple[dict | None, list[str]]:
    """Median-over-runs import breakdown of the real `predict --accept 12:16` process."""
    argv = [str(C.venv_python()), "-X", "importtime", str(cli), "predict", "--accept", "12:16"]
    command = C.command_line(argv, cwd=workdir)
    print(f"\n[importtime] {command}  (x{args.importtime_runs})", flush=True)
    per_module: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    depth: dict[str, int] = {}
    totals, errors = [], []
    for i in range(args.importtime_runs):
        r = C.run_timed(argv, cwd=workdir, timeout=args.timeout)
        if r["returncode"] != 0:
            errors.append(f"importtime run {i + 1}: exit {r['returncode']}")
            other = "\n".join(ln for ln in r["stderr"].splitlines()
                              if not ln.startswith("import time:"))
            print(f"[importtime] run {i + 1} FAILED (exit {r['returncode']}):\n"
                  f"{C.tail(other, 20)}", file=sys.stderr)
            continue
        rows = parse_importtime(r["stderr"])
        totals.append(sum(row["self_us"] for row in rows))
        for row in rows:
            per_module[row["module"]]["self_us"].append(row["self_us"])
            per_module[row["module"]]["cumulative_us"].append(row["cumulative_us"])
            depth.setdefault(row["module"], row["depth"])
    if not totals:
        return None, errors
    modules = [{"module": name, "depth": depth[name],
                "self_ms": statistics.median(v["self_us"]) / 1000,
                "cumulative_ms": statistics.median(v["cumulative_us"]) / 1000}
               for name, v in per_module.items()]
    packages: dict[str, float] = defaultdict(float)
    for m in modules:
        packages[m["module"].split(".")[0]] += m["self_ms"]
    top_modules = sorted(modules, key=lambda m: m["cumulative_ms"], reverse=True)[:args.top]
    top_packages = sorted(({"package": k, "self_ms": v} for k, v in packages.items()),
                          key=lambda p: p["self_ms"], reverse=True)[:args.top]
    cli_mod = next((m for m in modules if m["module"] == "ddtree_bayes.cli.main"), None)
    return {"command": command, "runs": len(totals),
            "total_import_ms": statistics.median(totals) / 1000,
            "modules_imported": len(modules),
            "ddtree_bayes_cli_cumulative_ms": cli_mod["cumulative_ms"] if cli_mod else None,
            "top_modules_by_cumulative": top_modules,
            "top_packages_by_self": top_packages}, errors


def render(results: dict) -> str:
    out = [f"## ddtree-bayes predict benchmark ({results['settings']['runs']} runs, "
           f"{results['settings']['warmup']} warm-up), {results['date']}", "",
           f"nproc {results['machine']['nproc']}, {results['machine']['cpu_model']}, python "
           f"{results['machine']['python'].split()[0]}", ""]
    rows = []
    for c in results["commands"]:
        s = c["wall_s"]
        rows.append([f"`{c['label']}`", f"{c['ok']}/{c['runs']}", C.fmt_s(s["median"], 3),
                     C.fmt_s(s["min"], 3), C.fmt_s(s["max"], 3)])
    out.append(C.markdown_table(["command (whole process)", "runs ok", "median (s)",
                                 "min (s)", "max (s)"], rows))
    it = results.get("importtime")
    if it:
        out += ["", f"### import time of `predict --accept 12:16` (-X importtime, median of "
                    f"{it['runs']} runs)", "",
                f"total import time {it['total_import_ms']:.0f} ms over "
                f"{it['modules_imported']} modules; `ddtree_bayes.cli.main` itself "
                f"{C.fmt_s(it['ddtree_bayes_cli_cumulative_ms'], 0)} ms cumulative (the rest "
                f"is imported lazily inside the predict command).", "",
                f"top {len(it['top_modules_by_cumulative'])} modules by cumulative time "
                f"(nested imports are counted in their parents too):", ""]
        out.append(C.markdown_table(
            ["module", "depth", "cumulative (ms)", "self (ms)"],
            [[f"`{m['module']}`", str(m["depth"]), f"{m['cumulative_ms']:.1f}",
              f"{m['self_ms']:.1f}"] for m in it["top_modules_by_cumulative"]]))
        out += ["", f"top {len(it['top_packages_by_self'])} packages by summed self time "
                    f"(each module counted once):", ""]
        out.append(C.markdown_table(
            ["package", "self (ms)", "share of import time"],
            [[f"`{p['package']}`", f"{p['self_ms']:.1f}",
              f"{100 * p['self_ms'] / it['total_import_ms']:.0f}%"]
             for p in it["top_packages_by_self"]]))
    out += ["", "### commands", ""] + [f"- `{c['command']}`" for c in results["commands"]]
    if it:
        out.append(f"- `{it['command']}`")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli = C.cli_path()
    machine = C.machine_info()
    date = C.now_iso()
    if args.workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="ddtree-bench-predict-", dir="/tmp"))
        delete_workdir = not args.keep_workdir
    else:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        delete_workdir = False
    print(f"CLI: {cli}\nworking dir: {workdir}", flush=True)
    setup_fit = ensure_fit(cli, workdir, args)
    if setup_fit is not None and not setup_fit["ok"]:
        if delete_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        return 1

    py = str(C.venv_python())
    commands = [
        ("python -c pass", [py, "-c", "pass"]),
        ("ddtree-bayes --version", [str(cli), "--version"]),
        ("ddtree-bayes predict --accept 12:16", [str(cli), "predict", "--accept", "12:16"]),
        ("ddtree-bayes predict", [str(cli), "predict"]),
    ]
    print("\ntimed commands (cwd = working dir):", flush=True)
    for _, cmd in commands:
        print(f"  {C.command_line(cmd, cwd=workdir)}", flush=True)

    records = {label: [] for label, _ in commands}
    first_output: dict[str, dict] = {}
    errors: list[str] = []
    for rnd in range(-args.warmup, args.runs):
        timed = rnd >= 0
        walls = []
        for label, cmd in commands:
            r = C.run_timed(cmd, cwd=workdir, timeout=args.timeout)
            ok = r["returncode"] == 0 and not r["timed_out"]
            if label not in first_output:
                first_output[label] = {"stdout": r["stdout"], "stderr": r["stderr"]}
            if not ok:
                errors.append(f"{label}: exit {r['returncode']}"
                              f"{' (timed out)' if r['timed_out'] else ''}")
                print(f"FAILED {label} (exit {r['returncode']}):\n{C.tail(r['stderr'], 20)}",
                      file=sys.stderr, flush=True)
            if timed:
                records[label].append({"wall_s": r["wall_s"], "ok": ok,
                                       "returncode": r["returncode"]})
            walls.append(f"{label.removeprefix('ddtree-bayes ')} {r['wall_s']:.3f}s"
                         + ("" if ok else " FAILED"))
        print(f"[{'run ' + str(rnd + 1) if timed else 'warm-up'}] " + " | ".join(walls),
              flush=True)

    cmd_results = []
    for label, cmd in commands:
        recs = records[label]
        cmd_results.append({
            "label": label, "command": C.command_line(cmd, cwd=workdir), "argv": cmd,
            "runs": len(recs), "ok": sum(r["ok"] for r in recs),
            "wall_s": C.summary([r["wall_s"] for r in recs if r["ok"]]),
            "wall_s_each": [r["wall_s"] for r in recs],
            "stdout_first_run": first_output[label]["stdout"],
            "stderr_first_run": first_output[label]["stderr"],
        })

    importtime = None
    if args.importtime_runs:
        importtime, it_errors = importtime_breakdown(cli, workdir, args)
        errors += it_errors

    results = {
        "benchmark": "ddtree-bayes predict (whole process)",
        "date": date,
        "machine": machine,
        "loadavg_at_end": C.loadavg(),
        "settings": {"runs": args.runs, "warmup": args.warmup,
                     "importtime_runs": args.importtime_runs, "timeout_s": args.timeout},
        "cli": str(cli),
        "benchmark_command": C.command_line([sys.executable, *sys.argv]),
        "workdir": str(workdir),
        "setup_fit": setup_fit,
        "commands": cmd_results,
        "importtime": importtime,
        "errors": errors,
    }
    C.save_results(results, render(results), args.out)
    if delete_workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"working dir kept (reuse with --workdir {workdir})")
    if errors:
        print(f"FAILED: {len(errors)} process(es) failed: " + "; ".join(errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Benchmark a user's own first fit after the install (issue 20: a first fit <= 20 s).

Run with the project's virtualenv python (the CLI is taken from next to sys.executable):

    .venv/bin/python bench/bench_first_fit.py        # the two public sweeps of performance.md
    .venv/bin/python bench/bench_first_fit.py --data data/public/<file>.csv --runs 2

For every data file and run, in a scratch workspace (no data/: the bundled priors and cards)
with its own empty compile cache (PYTENSOR_FLAGS base_compiledir + NUMBA_CACHE_DIR):

1. install  - what scripts/bootstrap.sh runs once after installing: `ddtree-bayes fit
              --compile-only --quiet --format json` (the bundled model into the cache), then
              one `--compile-only --data FILE` per --install-data (none by default: a way
              to measure what compiling more models at install would buy);
2. fit      - `ddtree-bayes fit --data FILE --quiet --format json`: the user's first fit,
              whose model the install did not compile.

Each process: wall seconds, CPU seconds (user + sys of the child: steadier than wall when
other work shares the machine), the CLI's JSON timings (compile_s, sample_s, total_s) and the
load average before it. Prints a markdown table; writes --out (JSON) and a .md beside it.
Exit status 0 when every process succeeded (a fit that fails its gates, exit 5, is counted
as a failure), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

#: the sweeps docs/performance.md measures a user's first fit on
DEFAULT_DATA = ("data/public/lucebox_ddtree_qwen36_27b_rtx5090_q5_budget.csv",
                "data/public/trtllm_mtp_deepseek_r1_b200.csv")
#: the install's compile, as scripts/bootstrap.sh runs it (tests/test_bench_common.py checks)
INSTALL_ARGS = ("fit", "--compile-only", "--quiet")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time a user's own first `ddtree-bayes fit --data FILE` after the "
                    "install's compile, each run in a fresh, empty compile cache.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", action="append", type=Path, default=None,
                   help="a measurement file to fit (repeatable; default: "
                        + ", ".join(DEFAULT_DATA) + ")")
    p.add_argument("--install-data", action="append", type=Path, default=[],
                   help="a file whose model the install also compiles (repeatable)")
    p.add_argument("--runs", type=int, default=1, help="runs per data file")
    p.add_argument("--out", type=Path, default=C.RESULTS_DIR / "first_fit.json",
                   help="JSON results file (a .md with the table is written next to it)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="scratch dir (default: a new temp dir under /tmp, deleted at the end "
                        "unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the scratch dir")
    p.add_argument("--timeout", type=float, default=1800, help="seconds allowed per process")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be >= 1")
    args.data = [absolute(f) for f in (args.data or [Path(f) for f in DEFAULT_DATA])]
    args.install_data = [absolute(f) for f in args.install_data]
    for f in (*args.data, *args.install_data):
        if not f.is_file():
            p.error(f"{f}: no such file")
    return args


def absolute(path: Path) -> Path:
    """``path`` as given when it exists, else under the project's root (the defaults)."""
    return path.resolve() if path.exists() else (C.PROJECT_ROOT / path).resolve()



def steps(cli: Path, data: Path, install_data: list[Path]) -> list[tuple[str, list[str]]]:
    """The processes of one run: the install's compiles, then the user's first fit."""
    install = [("install", [str(cli), *INSTALL_ARGS, "--format", "json"])]
    install += [(f"install {f.name}", [str(cli), *INSTALL_ARGS, "--format", "json",
                                       "--data", str(f)]) for f in install_data]
    return [*install, ("fit", [str(cli), "fit", "--data", str(data), "--quiet",
                               "--format", "json"])]


def record(step: str, data: Path, run: int, r: dict, load: list[float] | None) -> dict:
    """One process's result: times, the CLI's JSON timings, ok or why not."""
    rec = {"step": step, "data": data.name, "run": run, "command": r["command"],
           "returncode": r["returncode"], "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
           "loadavg_before": load, "timings": {}, "ok": False, "error": None}
    try:
        out = json.loads(r["stdout"])
    except json.JSONDecodeError:
        out = None
    if isinstance(out, dict):
        rec["timings"] = out.get("timings") or (
            {"compile_s": out["compile_s"]} if "compile_s" in out else {})
    if r["timed_out"]:
        rec["error"] = "timed out"
    elif r["returncode"] != 0 or out is None:
        rec["error"] = f"exit {r['returncode']}" + ("" if out is not None else ", no JSON")
        rec["stderr_tail"] = C.tail(r["stderr"], 20)
    else:
        rec["ok"] = True
    return rec


def table_row(rec: dict) -> list[str]:
    t = rec["timings"]
    load = rec["loadavg_before"]
    return [rec["data"], str(rec["run"]), rec["step"], C.fmt_s(rec["wall_s"]),
            C.fmt_s(rec["cpu_s"]), C.fmt_s(t.get("compile_s")), C.fmt_s(t.get("sample_s")),
            "-" if not load else f"{load[0]:.2f}", "ok" if rec["ok"] else str(rec["error"])]


HEADERS = ["data", "run", "process", "wall s", "CPU s", "compile s", "sample s", "load",
           "status"]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli = C.cli_path()
    machine = C.machine_info()
    date = C.now_iso()
    scratch, tmp_root = C.scratch_root(args.workdir, "ddtree-bench-first-fit-")
    print(f"CLI: {cli}\nscratch dir: {scratch}\n", flush=True)
    runs: list[dict] = []
    for data in args.data:
        for run in range(1, args.runs + 1):
            root = scratch / f"{data.stem}-{run}"
            if root.exists():
                shutil.rmtree(root)
            work = root / "work"   # no data/: the bundled priors, cards and hardware
            work.mkdir(parents=True)
            env = C.cache_env(root / "cache")
            for step, argv_ in steps(cli, data, args.install_data):
                load = C.loadavg()
                print(f"[{data.name} {run} {step}] {C.command_line(argv_, env, work)}",
                      flush=True)
                rec = record(step, data, run, C.run_timed(argv_, cwd=work, env=env,
                                                          timeout=args.timeout), load)
                runs.append(rec)
                print("  " + " | ".join(table_row(rec)[3:]), flush=True)
                if not rec["ok"]:
                    print(rec.get("stderr_tail", ""), file=sys.stderr, flush=True)
                    break
            if tmp_root is not None and not args.keep:
                shutil.rmtree(root / "cache", ignore_errors=True)
    md = C.markdown_table(HEADERS, [table_row(r) for r in runs])
    print("\n" + md)
    results = {"benchmark": "a user's own first fit after the install (whole processes)",
               "date": date, "machine": machine, "loadavg_at_end": C.loadavg(),
               "settings": {"data": [str(f) for f in args.data], "runs": args.runs,
                            "install_data": [str(f) for f in args.install_data],
                            "timeout_s": args.timeout},
               "cli": str(cli), "benchmark_command": C.command_line([sys.executable, *sys.argv]),
               "runs": runs}
    C.save_results(results, md, args.out)
    if tmp_root is not None and not args.keep:
        shutil.rmtree(tmp_root, ignore_errors=True)
    else:
        print(f"scratch dir kept: {scratch}")
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())

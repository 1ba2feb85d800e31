#!/usr/bin/env python3
"""Benchmark validating and loading a 100,000-row measurement file, as whole fresh processes.

Issue 11's target: "validating and loading a 100,000-row file under 2 s", whole process
(interpreter start-up + imports + validation + loading). Run with the project's virtualenv
python:

    .venv/bin/python bench/bench_load.py                    # 5 runs per command
    .venv/bin/python bench/bench_load.py --runs 1 --rows 1000 --out /tmp/load.json   # smoke

What it does:

1. Writes the measurement files into a temp dir (no data/ or models/ there, so the CLI uses
   the bundled hardware table and priors):
     - ``repeats-<N>.csv``: N rows, the 9 bundled configurations measured again and again
       (row k is bundled row k mod 9 with its tok/s scaled by a factor that differs per
       repeat, so no two rows are identical, with the bundled source and notes). This is
       the measurement database issue 11 is about: many runs, few configurations.
     - ``distinct-<N>.csv``: N rows, no two alike in any configuration column (every row
       has its own context length): the worst case for the loader, which validates a
       repeated configuration once.
     - ``broken-<N>.csv``: the repeats file plus one row with tok_s 'x' at the end, for
       the real CLI: `ddtree-bayes fit --data broken-<N>.csv` validates every row, then
       stops at the last one with exit 2 and its one-line error, before any modelling.
2. Times, each as a fresh process (wall clock around the subprocess; user+sys CPU of the
   child from getrusage, which load from other processes on the machine inflates less),
   after --warmup untimed rounds, --runs rounds round-robin:
     - ``python -c pass``                                    interpreter floor
     - ``python -c "import ddtree_bayes.api"``               import floor
     - ``python -c LOAD FILE`` on the bundled 9 rows, repeats-N and distinct-N, where
       LOAD calls ``ddtree_bayes.load_inputs(data=FILE)``: what ``ddtree-bayes fit`` (and
       ``api.fit``) runs first: hardware table, measurement file, priors
     - ``ddtree-bayes fit --data broken-N.csv``              (must exit 2)
   Every process gets ``PYTHONPATH=<--src>`` (default: this checkout's src/), so the
   checkout is measured, not whatever the venv has installed; ``--src`` on another
   checkout's src/ measures that one (e.g. the code before a change).

Writes --out (JSON, default bench/results/load.json) and a .md with the tables next to it.
Exit status 0 if every process did what it should, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

BUNDLED = C.PROJECT_ROOT / "src" / "ddtree_bayes" / "_bundled" / "measurements.csv"
LOAD = ("import sys, ddtree_bayes as db; m, _ = db.load_inputs(data=sys.argv[1]); "
        "print(len(m.rows))")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time whole-process validation and loading of a large measurement file.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000, help="rows of the large files")
    p.add_argument("--runs", type=int, default=5, help="timed runs per command")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    p.add_argument("--src", type=Path, default=C.PROJECT_ROOT / "src",
                   help="the src/ directory put first on PYTHONPATH")
    p.add_argument("--label", default=None, help="a name for this run in the tables "
                                                 "(default: the git commit of --src)")
    p.add_argument("--out", type=Path, default=C.RESULTS_DIR / "load.json",
                   help="JSON results file (a .md with the tables is written next to it)")
    p.add_argument("--timeout", type=float, default=120, help="seconds allowed per process")
    args = p.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.rows < 10:
        p.error("--runs >= 1, --warmup >= 0, --rows >= 10")
    return args


def write_files(workdir: Path, n: int) -> dict[str, Path]:
    """The repeats, distinct and broken files described in the module docstring."""
    header, *body = list(csv.reader(io.StringIO(BUNDLED.read_text(encoding="utf-8"))))
    col = {c: header.index(c) for c in ("tok_s", "context_tokens")}
    per_config = n // len(body) + 1
    repeats, distinct = io.StringIO(), io.StringIO()
    wr = csv.writer(repeats, lineterminator="\n")
    wd = csv.writer(distinct, lineterminator="\n")
    wr.writerow(header)
    wd.writerow(header)
    for k in range(n):
        base, run = body[k % len(body)], k // len(body)
        row = list(base)
        row[col["tok_s"]] = f"{float(base[col['tok_s']]) * (0.95 + 0.1 * run / per_config):.6f}"
        wr.writerow(row)
        row = list(base)
        row[col["context_tokens"]] = str(k)  # every row its own configuration
        wd.writerow(row)
    broken_row = list(body[0])
    broken_row[col["tok_s"]] = "x"
    files = {"repeats": workdir / f"repeats-{n}.csv", "distinct": workdir / f"distinct-{n}.csv",
             "broken": workdir / f"broken-{n}.csv"}
    files["repeats"].write_text(repeats.getvalue(), encoding="utf-8")
    files["distinct"].write_text(distinct.getvalue(), encoding="utf-8")
    tail = io.StringIO()
    csv.writer(tail, lineterminator="\n").writerow(broken_row)
    files["broken"].write_text(repeats.getvalue() + tail.getvalue(), encoding="utf-8")
    return files


def run_with_cpu(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> dict:
    """Wall seconds and the child's user+sys CPU seconds of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=cwd, env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=timeout, check=False)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = None, "", "timed out"
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"returncode": rc, "wall_s": wall, "cpu_s": cpu, "stdout": out, "stderr": err}


def commands(files: dict[str, Path], n: int) -> list[dict]:
    """label, argv, and what a correct run prints / exits with."""
    py, cli = str(C.venv_python()), str(C.venv_python().parent / "ddtree-bayes")
    rows_last = n + 2  # header is row 1, the broken row follows the n rows
    return [
        {"label": "python -c pass", "argv": [py, "-c", "pass"], "rc": 0, "stdout": ""},
        {"label": "import ddtree_bayes.api", "argv": [py, "-c", "import ddtree_bayes.api"],
         "rc": 0, "stdout": ""},
        {"label": "load_inputs: bundled 9 rows", "argv": [py, "-c", LOAD, str(BUNDLED)],
         "rc": 0, "stdout": "9"},
        {"label": f"load_inputs: {n:,} rows, repeated runs of 9 configurations",
         "argv": [py, "-c", LOAD, str(files["repeats"])], "rc": 0, "stdout": str(n),
         "target": True},
        {"label": f"load_inputs: {n:,} rows, {n:,} distinct configurations (worst case)",
         "argv": [py, "-c", LOAD, str(files["distinct"])], "rc": 0, "stdout": str(n)},
        {"label": f"ddtree-bayes fit --data: {n:,} repeated rows + a bad last row (exit 2)",
         "argv": [cli, "fit", "--quiet", "--data", str(files["broken"])], "rc": 2,
         "stderr": f"row {rows_last}, column 'tok_s': not a number: 'x'"},
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    src = args.src.resolve()
    if not (src / "ddtree_bayes" / "core" / "data.py").exists():
        sys.exit(f"error: {src} is not a ddtree-bayes src/ directory (pass --src DIR)")
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip() or None
    env = {"PYTHONPATH": str(src)}
    machine = C.machine_info()  # before the runs: its load average is the one at the start
    workdir = Path(tempfile.mkdtemp(prefix="ddtree-bench-load-"))
    try:
        files = write_files(workdir, args.rows)
        cmds = commands(files, args.rows)
        for c in cmds:
            c["command"] = C.command_line(c["argv"], env, workdir)
            c["runs"] = []
            print(c["command"], flush=True)
        failures = []
        for round_ in range(args.warmup + args.runs):
            for c in cmds:
                r = run_with_cpu(c["argv"], cwd=workdir, env=env, timeout=args.timeout)
                ok = r["returncode"] == c["rc"]
                if "stdout" in c:
                    ok = ok and r["stdout"].strip() == c["stdout"]
                if "stderr" in c:
                    ok = ok and c["stderr"] in r["stderr"] and len(r["stderr"].splitlines()) == 1
                if not ok:
                    failures.append(f"{c['label']}: exit {r['returncode']}: "
                                    f"{C.tail(r['stderr'] or r['stdout'], 5)}")
                if round_ >= args.warmup:
                    c["runs"].append({"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "ok": ok,
                                      "returncode": r["returncode"],
                                      "stderr_tail": C.tail(r["stderr"], 3)})
        for c in cmds:
            c["wall"] = C.summary([r["wall_s"] for r in c["runs"]])
            c["cpu"] = C.summary([r["cpu_s"] for r in c["runs"]])
            del c["argv"]
        results = {"benchmark": "load", "date": C.now_iso(), "machine": machine,
                   "loadavg_at_end": C.loadavg(),
                   "settings": {"rows": args.rows, "runs": args.runs, "warmup": args.warmup,
                                "src": str(src), "src_commit": commit,
                                "label": args.label or commit},
                   "commands": cmds, "failures": failures}
        C.save_results(results, render(results), args.out)
        for f in failures:
            print(f"FAILED: {f}", file=sys.stderr)
        return 1 if failures else 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def render(results: dict) -> str:
    s, m = results["settings"], results["machine"]
    out = [f"## Loading {s['rows']:,} rows, whole process ({s['runs']} runs, {s['warmup']} "
           f"warm-up), {results['date']}, src {s['label']}", "",
           f"nproc {m['nproc']}, {m['cpu_model']}, python {m['python'].split()[0]}; load "
           f"average at start {m['loadavg_at_start']}, at end {results['loadavg_at_end']}", ""]
    rows = []
    for c in results["commands"]:
        w, u = c["wall"], c["cpu"]
        ok = sum(r["ok"] for r in c["runs"])
        rows.append([c["label"] + (" **(target < 2 s)**" if c.get("target") else ""),
                     f"{ok}/{len(c['runs'])}", C.fmt_s(w["median"], 3), C.fmt_s(w["min"], 3),
                     C.fmt_s(w["max"], 3), C.fmt_s(u["median"], 3)])
    out.append(C.markdown_table(["command (whole process)", "runs ok", "wall median (s)",
                                 "min (s)", "max (s)", "CPU median (s)"], rows))
    out += ["", "### commands", ""] + [f"- `{c['command']}`" for c in results["commands"]]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())

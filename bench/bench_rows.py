#!/usr/bin/env python3
"""Benchmark `ddtree-bayes fit` against the number of measurement rows: 9 (the bundled
file), 100, 1,000, 10,000 and 100,000 rows, whole processes, warm compile cache, side by
side in one run.

Run with the project's virtualenv python: .venv/bin/python bench/bench_rows.py [--runs 3]

The larger files are HYPOTHETICAL repeated runs of the 9 bundled configurations: the 9
bundled rows, then rows cycling through them with tok/s scattered log-normally (sd
--scatter, default 3%, seeded generator --seed), acceptance as measured, and `source`/`notes`
saying they are not measurements (every row differs, so the loader's exact-duplicate
refusal does not apply). The fit's likelihood works on per-configuration sufficient
statistics, so its sampling cost should grow with the 9 configurations, not the rows.

In a scratch dir under /tmp (bundled data and priors copied in; the repository's data/ and
models/ are never touched), with its own compile cache (PYTENSOR base_compiledir and
NUMBA_CACHE_DIR, as bench_fit.py's warm cache): one untimed `fit` of the 9-row file fills
the cache, then --runs rounds, each timing `ddtree-bayes fit --data rows_<N>.csv --quiet
--format json` for every size in turn (round-robin, so machine load affects all sizes
alike). Per run: wall seconds, the CLI's JSON timings, convergence, divergences, mean
leapfrog steps per draw, the artifact's size. Separately (in-process, --load-runs times): how long loading and
validating each file takes (`load_inputs`), to show loading's share of the fit.

Prints markdown tables, writes --out (JSON with every command and run, load averages) and a
.md next to it. Exit 1 if a process failed (a fit that fails its convergence gates counts
as failed unless --allow-unconverged).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SIZES = (9, 100, 1_000, 10_000, 100_000)
UNCONVERGED_EXIT = 5
BUNDLED = C.PROJECT_ROOT / "src" / "ddtree_bayes" / "_bundled"
LOAD_SNIPPET = r"""
import json, sys, time
from ddtree_bayes.api import load_inputs
out = {}
for path in sys.argv[2:]:
    times = []
    for _ in range(int(sys.argv[1])):
        t0 = time.perf_counter()
        data, _ = load_inputs(path)
        times.append(time.perf_counter() - t0)
    out[path] = {"rows": len(data.rows), "seconds": times}
print(json.dumps(out))
"""


def repeated_runs(bundled_csv: str, n_rows: int, *, seed: int, scatter: float) -> str:
    """``n_rows`` rows: the bundled ones, then HYPOTHETICAL repeats of them cycling in order,
    tok/s times exp(scatter x N(0, 1)) from a seeded generator.

    >>> text = repeated_runs("model,tok_s,source,notes\\nm,100,s,n\\n", 3, seed=1, scatter=0.03)
    >>> [r["tok_s"] for r in csv.DictReader(io.StringIO(text))][0]
    '100'
    """
    rows = list(csv.DictReader(io.StringIO(bundled_csv)))
    header = list(rows[0])
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows[:n_rows])
    for k in range(len(rows), n_rows):
        base = rows[k % len(rows)]
        tok = float(base["tok_s"]) * math.exp(scatter * rng.gauss(0.0, 1.0))
        writer.writerow({**base, "tok_s": f"{tok:.5g}",
                         "source": "HYPOTHETICAL repeated run (bench/bench_rows.py; not a "
                                   "measurement)",
                         "notes": f"HYPOTHETICAL: run {k // len(rows)} of the configuration "
                                  f"of bundled row {k % len(rows) + 2}, tok/s x exp("
                                  f"{scatter:g} N(0,1)), seed {seed}"})
    return out.getvalue()


def leapfrog_per_draw(artifact: Path) -> float | None:
    """Mean NUTS leapfrog steps per draw (sample_stats/n_steps of the saved fit; h5py is in
    the project's venv). The sampling cost per draw: gradient evaluations."""
    try:
        import h5py

        with h5py.File(artifact, "r") as fh:
            steps = fh["sample_stats"]["n_steps"][...]
        return float(steps.mean())
    except (ImportError, KeyError, OSError):
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time whole-process `ddtree-bayes fit` at 9 to "
                                            "100,000 measurement rows.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="timed rounds over every size")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)),
                   help="row counts, comma-separated (the first is the reference)")
    p.add_argument("--seed", type=int, default=20261201, help="seed of the tok/s scatter")
    p.add_argument("--scatter", type=float, default=0.03, help="sd of log tok/s of a repeat")
    p.add_argument("--load-runs", type=int, default=3, help="in-process load_inputs timings")
    p.add_argument("--fit-args", default="", help="extra arguments for every fit, e.g. "
                                                  "'--draws 200 --tune 200' for a smoke test")
    p.add_argument("--allow-unconverged", action="store_true",
                   help="count fits that fail the convergence gates (exit 5) as successful")
    p.add_argument("--out", type=Path, default=C.RESULTS_DIR / "rows.json")
    p.add_argument("--keep", action="store_true", help="keep the scratch dir")
    p.add_argument("--timeout", type=float, default=1800, help="seconds allowed per fit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    cli = str(C.cli_path())
    machine = C.machine_info()
    date = C.now_iso()
    root = Path(tempfile.mkdtemp(prefix="ddtree-bench-rows-", dir="/tmp"))
    work = root / "work"
    (work / "data").mkdir(parents=True)
    (work / "models").mkdir()
    for name in ("measurements.csv", "hardware.csv", "seed_estimates.csv", "models.csv"):
        shutil.copy(BUNDLED / name, work / "data" / name)
        (work / "data" / name).chmod(0o644)
    shutil.copy(BUNDLED / "priors.toml", work / "models" / "priors.toml")
    bundled = (BUNDLED / "measurements.csv").read_text()
    files = {}
    for n in sizes:
        files[n] = work / "data" / f"rows_{n}.csv"
        files[n].write_text(repeated_runs(bundled, n, seed=args.seed, scatter=args.scatter))
    env = {"PYTENSOR_FLAGS": f"base_compiledir={root / 'cache' / 'pytensor'},"
                             "numba__fastmath=False",
           "NUMBA_CACHE_DIR": str(root / "cache" / "numba")}
    if os.environ.get("PYTHONPATH"):   # e.g. a worktree's sources ahead of the venv's
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]

    def fit_cmd(n: int) -> list[str]:
        return [cli, "fit", "--data", f"data/rows_{n}.csv", "--quiet", "--format", "json",
                *args.fit_args.split()]

    commands = {f"fit, {n} rows": C.command_line(fit_cmd(n), env, work) for n in sizes}
    print(f"scratch dir: {root}", flush=True)
    runs: list[dict] = []
    failed = False

    def record(kind: str, n: int, i: int) -> dict:
        nonlocal failed
        r = C.run_timed(fit_cmd(n), cwd=work, env=env, timeout=args.timeout)
        rec = {"kind": kind, "rows": n, "index": i, "wall_s": r["wall_s"],
               "returncode": r["returncode"], "timed_out": r["timed_out"],
               "command": r["command"], "loadavg": C.loadavg(), "stdout_bytes": len(r["stdout"])}
        try:
            out = json.loads(r["stdout"])
            rec.update(timings=out["timings"], converged=out["converged"],
                       divergences=out["divergences"], failures=out["failures"],
                       artifact_bytes=Path(out["path"]).stat().st_size,
                       ppc_rows=len(out["posterior_predictive"]),
                       attempts=len((out.get("remedies") or {}).get("attempts") or [None]),
                       outcome=(out.get("remedies") or {}).get("outcome"),
                       remedy=(out.get("remedies") or {}).get("remedy"),
                       leapfrog_per_draw=leapfrog_per_draw(Path(out["path"])))
        except (json.JSONDecodeError, KeyError, OSError):
            rec.update(timings={}, converged=None)
        ok_codes = (0, UNCONVERGED_EXIT) if args.allow_unconverged else (0,)
        if r["returncode"] not in ok_codes:
            failed = True
            rec["stderr_tail"] = C.tail(r["stderr"], 20)
            print(rec["stderr_tail"], file=sys.stderr)
        runs.append(rec)
        t = rec["timings"]
        print(f"[{kind} {n} rows #{i}] wall {r['wall_s']:.2f} s | compile "
              f"{C.fmt_s(t.get('compile_s'))} | sample {C.fmt_s(t.get('sample_s'))} | setup "
              f"{C.fmt_s(t.get('setup_s'))} | check {C.fmt_s(t.get('check_s'))} | attempts "
              f"{rec.get('attempts')} | converged {rec['converged']} (exit {r['returncode']})",
              flush=True)
        return rec

    record("warm-up", sizes[0], 0)
    for i in range(1, args.runs + 1):
        for n in sizes:
            record("timed", n, i)
    load = json.loads(C.run_timed([str(C.venv_python()), "-c", LOAD_SNIPPET,
                                   str(args.load_runs), *map(str, files.values())],
                                  cwd=work, env=env, timeout=args.timeout)["stdout"])

    def med(n: int, key: str) -> float | None:
        vals = [r["wall_s"] if key == "wall_s" else r["timings"].get(key)
                for r in runs if r["kind"] == "timed" and r["rows"] == n
                and r["returncode"] in (0, UNCONVERGED_EXIT)]
        return C.summary([v for v in vals if v is not None])["median"]

    summary = {}
    ref = med(sizes[0], "wall_s")
    for n in sizes:
        wall = C.summary([r["wall_s"] for r in runs if r["kind"] == "timed" and r["rows"] == n
                          and r["returncode"] in (0, UNCONVERGED_EXIT)])
        mine = [r for r in runs if r["kind"] == "timed" and r["rows"] == n]
        summary[str(n)] = {
            "wall_s": wall, "ratio_to_first": (wall["median"] / ref
                                               if wall["median"] and ref else None),
            **{k: med(n, k) for k in ("setup_s", "compile_s", "sample_s", "diagnose_s",
                                       "save_s", "check_s", "total_s")},
            "load_s": C.summary(load[str(files[n])]["seconds"])["median"],
            "leapfrog_per_draw": C.summary([r.get("leapfrog_per_draw") for r in mine])["median"],
            "attempts": C.summary([r.get("attempts") for r in mine])["median"],
            "converged": sum(bool(r.get("converged")) for r in mine), "runs": len(mine),
            "divergences": sum(r.get("divergences") or 0 for r in mine),
            "artifact_mb": max((r.get("artifact_bytes") or 0) for r in mine) / 1e6,
            "stdout_mb": max(r["stdout_bytes"] for r in mine) / 1e6}
    loads = [r["loadavg"][0] for r in runs if r["loadavg"]]
    table = C.markdown_table(
        ["rows", "runs", "wall median (s)", "min", "max", "x first", "load_inputs (s)",
         "setup (s)", "compile (s)", "sampling (s)", "leapfrog/draw", "attempts", "PPC (s)",
         "converged", "artifact (MB)"],
        [[f"{n:,}", str(s["runs"]), C.fmt_s(s["wall_s"]["median"]), C.fmt_s(s["wall_s"]["min"]),
          C.fmt_s(s["wall_s"]["max"]), C.fmt_s(s["ratio_to_first"]), C.fmt_s(s["load_s"]),
          C.fmt_s(s["setup_s"]), C.fmt_s(s["compile_s"]), C.fmt_s(s["sample_s"]),
          C.fmt_s(s["leapfrog_per_draw"], 0), C.fmt_s(s["attempts"], 0), C.fmt_s(s["check_s"]),
          f"{s['converged']}/{s['runs']}", f"{s['artifact_mb']:.1f}"]
         for n, s in ((int(k), v) for k, v in summary.items())])
    md = (f"## ddtree-bayes fit vs measurement rows ({date})\n\n"
          f"nproc {machine['nproc']}, {machine['cpu_model']}; git {machine['git_commit']}"
          f"{' (dirty)' if machine['git_dirty'] else ''}; 1-min load average during the runs "
          f"{min(loads):.2f}-{max(loads):.2f}\n\n"
          f"Files: the 9 bundled rows, then HYPOTHETICAL repeated runs of their 9 "
          f"configurations (tok/s x exp({args.scatter:g} N(0,1)), seed {args.seed}). Whole "
          f"process, warm compile cache (one untimed 9-row fit first), {args.runs} round(s) "
          f"round-robin over the sizes.\n\n{table}\n\n"
          "setup = loading + validating + building the model (in the fit process); "
          "load_inputs = loading and validating alone (in-process, median of "
          f"{args.load_runs}); leapfrog/draw = mean NUTS gradient evaluations per draw of the "
          "kept attempt (sampling cost per draw); attempts = sampling attempts including the "
          "remedy ladder's (compile and sampling times sum over them); PPC = reading the fit "
          "back and the posterior predictive check of every row that `fit` prints (JSON: one "
          "entry per row).\n\n"
          "commands (cwd = scratch dir):\n\n"
          + "\n".join(f"- {k}: `{v}`" for k, v in commands.items()) + "\n")
    results = {"benchmark": "ddtree-bayes fit vs measurement rows (whole processes)",
               "date": date, "machine": machine,
               "settings": vars(args) | {"out": str(args.out), "sizes": sizes},
               "commands": commands,
               "benchmark_command": C.command_line([sys.executable, *sys.argv]),
               "summary": summary, "load_inputs": load, "runs": runs,
               "loadavg_at_end": C.loadavg()}
    C.save_results(results, md, args.out)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

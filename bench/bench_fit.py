#!/usr/bin/env python3
"""Benchmark `ddtree-bayes fit` as whole processes: nutpie warm cache, nutpie cold cache,
and PyMC's own NUTS (warm cache) on the same model, in one script run.

Run with the project's virtualenv python (the CLI is taken from next to sys.executable):

    .venv/bin/python bench/bench_fit.py                 # full run (takes a while)
    .venv/bin/python bench/bench_fit.py --runs 1 --cold-runs 0 --pymc-runs 0 \
        --draws 200 --tune 200 --allow-unconverged      # smoke test only

Phases, in this order; every process runs in the same scratch working directory (its own
models/, bundled data and priors), with `fit --quiet --format json` and identical settings:

1. nutpie warm-up  - one untimed run that fills a fresh, shared compile cache
                     (PYTENSOR_FLAGS base_compiledir + NUMBA_CACHE_DIR).
2. nutpie warm     - --runs timed runs sharing that cache.
3. nutpie cold     - --cold-runs timed runs, each with its own fresh, empty base_compiledir
                     and NUMBA_CACHE_DIR (so numba recompiles everything, library code too).
4. pymc warm-up    - one untimed `--backend pymc` run into the shared warm cache.
5. pymc warm       - --pymc-runs timed `--backend pymc` runs; ratio pymc/nutpie is reported
                     on the median wall time of the warm runs.

For every run: wall seconds (time.perf_counter around the subprocess), the CLI's own json
timings (compile_s for nutpie only; for pymc, sample_s includes PyMC's internal compile),
converged and divergences. Prints markdown tables; writes --out (JSON) and a .md next to it.
Exit status: 0 if every run (warm-ups included) succeeded, 1 otherwise. A run that finished
but failed the convergence gates (CLI exit 5) counts as failed unless --allow-unconverged.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

UNCONVERGED_EXIT = 5  # ddtree-bayes fit: artifact saved, convergence gates failed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time whole-process `ddtree-bayes fit --quiet --format json`: nutpie with "
                    "a warm and a cold compile cache, and PyMC's NUTS (warm) for comparison.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="timed nutpie runs with a warm cache")
    p.add_argument("--cold-runs", type=int, default=2,
                   help="timed nutpie runs, each with a fresh empty compile cache")
    p.add_argument("--pymc-runs", type=int, default=3,
                   help="timed `--backend pymc` runs with a warm cache (0 skips PyMC)")
    p.add_argument("--chains", type=int, default=4, help="passed to fit --chains")
    p.add_argument("--draws", type=int, default=1000, help="passed to fit --draws")
    p.add_argument("--tune", type=int, default=1000, help="passed to fit --tune")
    p.add_argument("--seed", type=int, default=None,
                   help="passed to fit --seed (default: not passed, the CLI's default seed)")
    p.add_argument("--out", type=Path, default=C.RESULTS_DIR / "fit.json",
                   help="JSON results file (a .md with the tables is written next to it)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="scratch dir for fits and caches (default: a new temp dir under /tmp, "
                        "deleted at the end unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the scratch dir")
    p.add_argument("--timeout", type=float, default=3600, help="seconds allowed per fit process")
    p.add_argument("--allow-unconverged", action="store_true",
                   help="count runs that fail the convergence gates (exit 5) as successful, "
                        "e.g. for smoke tests with few draws")
    args = p.parse_args(argv)
    for name in ("runs", "cold_runs", "pymc_runs"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.runs < 1 and args.pymc_runs > 0:
        p.error("--pymc-runs needs --runs >= 1 (the ratio is against the nutpie warm median)")
    return args



def fit_argv(cli: Path, args: argparse.Namespace, backend: str) -> list[str]:
    argv = [str(cli), "fit", "--quiet", "--format", "json", "--backend", backend,
            "--chains", str(args.chains), "--draws", str(args.draws), "--tune", str(args.tune)]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    return argv


def one_run(phase: str, index: int, argv: list[str], cwd: Path, env: dict[str, str],
            args: argparse.Namespace) -> dict:
    """Run one fit process and turn its output into a result record (stdout not kept)."""
    label = f"{phase} {index}" if index else phase
    print(f"[{label}] {C.command_line(argv, env, cwd)}", flush=True)
    r = C.run_timed(argv, cwd=cwd, env=env, timeout=args.timeout)
    rec = {"phase": phase, "index": index, "command": r["command"], "argv": r["argv"],
           "cwd": r["cwd"], "env": r["env"], "returncode": r["returncode"],
           "timed_out": r["timed_out"], "wall_s": r["wall_s"], "timings": {},
           "converged": None, "divergences": None, "failures": None, "fit_id": None,
           "min_ess_bulk": None, "min_ess_tail": None, "ok": False, "error": None}
    try:
        out = json.loads(r["stdout"])
        rec.update(timings=out.get("timings", {}), converged=out.get("converged"),
                   divergences=out.get("divergences"), failures=out.get("failures"),
                   fit_id=out.get("fit_id"), **min_ess(out.get("diagnostics") or []))
    except json.JSONDecodeError:
        out = None
    if r["timed_out"]:
        rec["error"] = f"timed out after {args.timeout:g} s"
    elif out is None:
        rec["error"] = f"exit {r['returncode']}, no JSON on stdout"
    elif r["returncode"] == 0:
        rec["ok"] = True
    elif r["returncode"] == UNCONVERGED_EXIT and args.allow_unconverged:
        rec["ok"] = True
    else:
        rec["error"] = f"exit {r['returncode']}" + (
            f" (not converged: {'; '.join(rec['failures'] or [])})"
            if r["returncode"] == UNCONVERGED_EXIT else "")
    if not rec["ok"]:
        rec["stderr_tail"] = C.tail(r["stderr"], 30)
    t = rec["timings"]
    status = "ok" if rec["ok"] else f"FAILED: {rec['error']}"
    print(f"[{label}] wall {rec['wall_s']:.2f} s | compile {C.fmt_s(t.get('compile_s'))} | "
          f"sample {C.fmt_s(t.get('sample_s'))} | total {C.fmt_s(t.get('total_s'))} | "
          f"converged {rec['converged']} | divergences {rec['divergences']} | {status}",
          flush=True)
    if not rec["ok"]:
        print(C.tail(r["stderr"], 30), file=sys.stderr, flush=True)
    return rec


def min_ess(diagnostics: list[dict]) -> dict:
    """The smallest bulk and tail ESS over a fit's parameters (its `--format json`
    `diagnostics`): the effective draws the least well sampled parameter got."""
    def least(key: str) -> float | None:
        vals = [d[key] for d in diagnostics if d.get(key) is not None]
        return min(vals) if vals else None
    return {"min_ess_bulk": least("ess_bulk"), "min_ess_tail": least("ess_tail")}


def ess_per_wall_s(run: dict) -> float | None:
    """Effective draws of the least well sampled parameter (bulk) per second of the whole
    process: what a sampler delivers per second, where equal draws may not be equal ESS."""
    ess = run.get("min_ess_bulk")
    return ess / run["wall_s"] if ess is not None and run["wall_s"] > 0 else None


def phase_summary(runs: list[dict]) -> dict:
    ok = [r for r in runs if r["ok"]]
    def pick(key: str) -> list[float]:
        return [r["timings"].get(key) for r in ok]
    return {
        "runs": len(runs), "ok": len(ok),
        "converged": sum(1 for r in runs if r["converged"]),
        "divergences_total": sum(r["divergences"] or 0 for r in runs),
        "wall_s": C.summary([r["wall_s"] for r in ok]),
        "compile_s": C.summary(pick("compile_s")),
        "sample_s": C.summary(pick("sample_s")),
        "total_s": C.summary(pick("total_s")),
        "min_ess_bulk": C.summary([r["min_ess_bulk"] for r in ok]),
        "ess_bulk_per_wall_s": C.summary([ess_per_wall_s(r) for r in ok]),
        # process start-up, imports and output outside the CLI's own total_s timer
        "outside_total_s": C.summary([r["wall_s"] - r["timings"]["total_s"] for r in ok
                                      if "total_s" in r["timings"]]),
    }


PHASE_LABELS = {"nutpie-warm": "nutpie, warm cache", "nutpie-cold": "nutpie, cold cache",
                "pymc-warm": "pymc NUTS, warm cache"}


def render(results: dict) -> str:
    s = results["settings"]
    out = [f"## ddtree-bayes fit benchmark ({s['chains']} chains x {s['draws']} draws, "
           f"{s['tune']} tune), {results['date']}", "",
           f"nproc {results['machine']['nproc']}, {results['machine']['cpu_model']}, python "
           f"{results['machine']['python'].split()[0]}, "
           + ", ".join(f"{k} {v}" for k, v in results["machine"]["packages"].items()
                       if k in ("pymc", "nutpie", "pytensor", "numba")), ""]
    headers = ["phase", "runs ok", "wall median (s)", "wall min (s)", "wall max (s)",
               "compile_s med", "sample_s med", "total_s med", "wall - total_s med",
               "converged", "divergences", "min ESS bulk med", "min ESS bulk / wall s med"]
    rows = []
    for key, label in PHASE_LABELS.items():
        ph = results["summary"].get(key)
        if not ph or not ph["runs"]:
            continue
        rows.append([label, f"{ph['ok']}/{ph['runs']}", C.fmt_s(ph["wall_s"]["median"]),
                     C.fmt_s(ph["wall_s"]["min"]), C.fmt_s(ph["wall_s"]["max"]),
                     C.fmt_s(ph["compile_s"]["median"]), C.fmt_s(ph["sample_s"]["median"]),
                     C.fmt_s(ph["total_s"]["median"]), C.fmt_s(ph["outside_total_s"]["median"]),
                     f"{ph['converged']}/{ph['runs']}", str(ph["divergences_total"]),
                     C.fmt_s(ph["min_ess_bulk"]["median"], 0),
                     C.fmt_s(ph["ess_bulk_per_wall_s"]["median"], 1)])
    out.append(C.markdown_table(headers, rows) if rows else "(no timed runs)")
    if results["aborted"]:
        out += ["", f"**aborted: {results['aborted']}**"]
    ratio = results["summary"].get("pymc_over_nutpie")
    if ratio:
        out += ["", f"pymc / nutpie (warm cache), median wall time: "
                    f"**{C.fmt_s(ratio['wall_s'])}x**; median in-process total_s: "
                    f"{C.fmt_s(ratio['total_s'])}x"]
        if ratio.get("ess_bulk_per_wall_s"):
            out += ["", "nutpie / pymc, median of each run's smallest bulk ESS per wall second: "
                        f"{C.fmt_s(ratio['ess_bulk_per_wall_s'])}x (a sampler's output per "
                        "second; the wall ratio above compares equal draws)"]
    out += ["", "compile_s is nutpie's model compilation (PyTensor -> numba); for pymc the "
                "compile happens inside pm.sample and is part of sample_s. wall - total_s is "
                "process start-up, imports and output, outside the CLI's own timer.", "",
            "### every run", ""]
    rrows = []
    for r in results["runs"]:
        t = r["timings"]
        rrows.append([f"{r['phase']} {r['index'] or ''}".strip(), C.fmt_s(r["wall_s"]),
                      C.fmt_s(t.get("compile_s")), C.fmt_s(t.get("sample_s")),
                      C.fmt_s(t.get("total_s")), str(r["converged"]), str(r["divergences"]),
                      C.fmt_s(r.get("min_ess_bulk"), 0), C.fmt_s(r.get("min_ess_tail"), 0),
                      "ok" if r["ok"] else f"FAILED ({r['error']})"])
    out.append(C.markdown_table(["run", "wall (s)", "compile_s", "sample_s", "total_s",
                                 "converged", "divergences", "min ESS bulk", "min ESS tail",
                                 "status"], rrows))
    out += ["", "### commands", ""]
    out += [f"- {ph}: `{cmd}`" for ph, cmd in results["commands"].items()]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cli = C.cli_path()
    machine = C.machine_info()
    date = C.now_iso()

    scratch, tmp_root = C.scratch_root(args.workdir, "ddtree-bench-fit-")
    fitdir = scratch / "work"            # cwd of every fit: models/ is written here
    fitdir.mkdir(exist_ok=True)
    warm_cache = scratch / "cache-warm"  # shared by the nutpie and pymc warm runs
    if warm_cache.exists():
        shutil.rmtree(warm_cache)        # the warm-up must start from an empty cache
    print(f"CLI: {cli}\nscratch dir: {scratch}\n", flush=True)

    nutpie_argv = fit_argv(cli, args, "nutpie")
    pymc_argv = fit_argv(cli, args, "pymc")
    runs: list[dict] = []
    commands: dict[str, str] = {}
    aborted = None

    # 1-2. nutpie: one untimed warm-up into a fresh shared cache, then the timed warm runs
    warm_env = C.cache_env(warm_cache)
    if args.runs or args.pymc_runs:
        commands["nutpie warm-up + warm runs"] = C.command_line(nutpie_argv, warm_env, fitdir)
        rec = one_run("nutpie-warmup", 0, nutpie_argv, fitdir, warm_env, args)
        runs.append(rec)
        if not rec["ok"]:
            aborted = "the nutpie warm-up run failed; all timed runs skipped" + (
                " (it did not converge: use --allow-unconverged to time such runs anyway)"
                if rec["returncode"] == UNCONVERGED_EXIT else "")
        for i in range(1, args.runs + 1):
            if aborted:
                break
            runs.append(one_run("nutpie-warm", i, nutpie_argv, fitdir, warm_env, args))

    # 3. nutpie cold: a fresh, empty PyTensor compiledir and numba cache for every run
    for i in range(1, args.cold_runs + 1):
        if aborted:
            break
        cold_cache = scratch / f"cache-cold-{i}"
        if cold_cache.exists():
            shutil.rmtree(cold_cache)
        cold_env = C.cache_env(cold_cache)
        commands[f"nutpie cold run {i}"] = C.command_line(nutpie_argv, cold_env, fitdir)
        runs.append(one_run("nutpie-cold", i, nutpie_argv, fitdir, cold_env, args))
        if not args.keep:
            shutil.rmtree(cold_cache, ignore_errors=True)

    # 4-5. pymc NUTS: one untimed warm-up (its compiled functions differ), then timed runs
    if args.pymc_runs and not aborted:
        commands["pymc warm-up + warm runs"] = C.command_line(pymc_argv, warm_env, fitdir)
        rec = one_run("pymc-warmup", 0, pymc_argv, fitdir, warm_env, args)
        runs.append(rec)
        if rec["ok"]:
            for i in range(1, args.pymc_runs + 1):
                runs.append(one_run("pymc-warm", i, pymc_argv, fitdir, warm_env, args))

    summary = {key: phase_summary([r for r in runs if r["phase"] == key])
               for key in PHASE_LABELS}
    nut, pym = summary["nutpie-warm"], summary["pymc-warm"]
    if nut["wall_s"]["median"] and pym["wall_s"]["median"]:
        summary["pymc_over_nutpie"] = {
            "wall_s": pym["wall_s"]["median"] / nut["wall_s"]["median"],
            "total_s": (pym["total_s"]["median"] / nut["total_s"]["median"]
                        if pym["total_s"]["median"] and nut["total_s"]["median"] else None),
            "ess_bulk_per_wall_s": (nut["ess_bulk_per_wall_s"]["median"]
                                    / pym["ess_bulk_per_wall_s"]["median"]
                                    if nut["ess_bulk_per_wall_s"]["median"]
                                    and pym["ess_bulk_per_wall_s"]["median"] else None)}

    results = {
        "benchmark": "ddtree-bayes fit (whole process)",
        "date": date,
        "machine": machine,
        "loadavg_at_end": C.loadavg(),
        "settings": {"runs": args.runs, "cold_runs": args.cold_runs,
                     "pymc_runs": args.pymc_runs, "chains": args.chains, "draws": args.draws,
                     "tune": args.tune, "seed": args.seed, "timeout_s": args.timeout,
                     "allow_unconverged": args.allow_unconverged},
        "cli": str(cli),
        "benchmark_command": C.command_line([sys.executable, *sys.argv]),
        "commands": commands,
        "aborted": aborted,
        "summary": summary,
        "runs": runs,
    }
    C.save_results(results, render(results), args.out)
    if tmp_root is not None and not args.keep:
        shutil.rmtree(tmp_root, ignore_errors=True)
    else:
        print(f"scratch dir kept: {scratch}")
    failed = [r for r in runs if not r["ok"]]
    if aborted or failed:
        print(f"FAILED: {len(failed)} run(s) failed" + (f"; {aborted}" if aborted else ""),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

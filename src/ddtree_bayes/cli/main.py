"""Command line: parses arguments, calls the library, prints. Nothing imports this module.

Exit codes: 0 ok; 1 unexpected error; 2 bad input (nothing written); 3 no usable fit;
4 stale fit with --strict; 5 fit failed its convergence gates.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

from ddtree_bayes.cli.args import ACCEPT_HELP, add_scenario_arguments, add_seed_and_format
from ddtree_bayes.core import __version__
from ddtree_bayes.core.config import DEFAULT_SCENARIO, SamplerSettings
from ddtree_bayes.core.errors import DDTreeBayesError, QueryError

PROG = "ddtree-bayes"


def _fmt(value, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    """Left-align the first columns of text, right-align the rest; one line per row."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _emit_machine(rows: list[dict], fmt: str, extra: dict | None = None) -> None:
    if fmt == "json":
        print(json.dumps({**(extra or {}), "rows": rows}, indent=2))
    else:
        buf = io.StringIO()
        if rows:
            writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        sys.stdout.write(buf.getvalue())


# ---------------------------------------------------------------- fit
def cmd_fit(args: argparse.Namespace) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine import store

    result = api.fit(args.data, args.priors, seed=args.seed, chains=args.chains,
                     draws=args.draws, tune=args.tune, target_accept=args.target_accept,
                     backend=args.backend, hardware=args.hardware_file,
                     progress=not args.quiet, moe_form=args.moe_form)
    draws = store.load_draws(result.path)
    ppc = P.check_measurements(draws, seed=args.seed)
    if args.format == "json":
        print(json.dumps({"fit_id": result.fit_id, "path": str(result.path),
                          "converged": result.converged, "failures": result.failures,
                          "divergences": result.divergences, "timings": result.timings,
                          "diagnostics": result.diagnostics, "posterior_predictive": ppc},
                         indent=2))
    else:
        headers = ["parameter", "", "mean", "sd", "r_hat", "ess_bulk", "ess_tail", "mcse"]
        body = [[d["parameter"], "", f"{d['mean']:.4g}", f"{d['sd']:.3g}", f"{d['rhat']:.3f}",
                 f"{d['ess_bulk']:.0f}", f"{d['ess_tail']:.0f}", f"{d['mcse_mean']:.2g}"]
                for d in result.diagnostics]
        print(render_table(headers, body))
        print(f"\ndivergent transitions: {result.divergences}")
        print("\nposterior predictive check (tok/s):")
        pbody = [[f"row {r['row']}", f"{r['system']} {r['engine']} {r['method']} "
                  f"M={r['verify_tokens']} ctx={r['context_tokens']:g} accept={r['accept_len']:g}",
                  _fmt(r["measured"], 1), _fmt(r["median"], 1),
                  f"[{r['lo50']:.1f}, {r['hi50']:.1f}]", f"[{r['lo90']:.1f}, {r['hi90']:.1f}]",
                  f"{r['percentile']:.2f}"] for r in ppc]
        print(render_table(["row", "configuration", "measured", "median", "50% interval",
                            "90% interval", "pctile"], pbody))
        t = result.timings
        print(f"\nfit {result.fit_id}: {'converged' if result.converged else 'NOT CONVERGED'}"
              f" ({t.get('total_s', 0):.1f} s; sampling {t.get('sample_s', 0):.1f} s)")
        print(f"saved {result.path}")
    result.raise_if_unconverged()
    return 0


# ---------------------------------------------------------------- predict
def cmd_predict(args: argparse.Namespace) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.engine import predictive as P

    draws = api.load(args.fit)
    for warning in P.check_fit(draws, allow_unconverged=args.allow_unconverged,
                               strict=args.strict):
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    engines = args.engine.split(",") if args.engine else None
    block, budget = args.block, args.budget
    if args.hardware is None and args.method is None and not any(
            (args.gpus, args.block, args.budget, args.verify_tokens)):
        hardware = method = None
    else:  # anything not given is the default scenario's
        hardware = args.hardware or DEFAULT_SCENARIO.hardware
        method = args.method or DEFAULT_SCENARIO.method
        engines = engines or list(DEFAULT_SCENARIO.engines)
        if args.method is None and args.verify_tokens is None:
            block = DEFAULT_SCENARIO.block if block is None else block
            budget = DEFAULT_SCENARIO.budget if budget is None else budget
    mixture = None
    if args.model_average:
        from ddtree_bayes.engine import compare

        fits = _latest_per_form(draws)
        weights = compare.compare_fits(fits, seed=args.seed)["weights"]
        mixture = [(d, weights[d.meta["fit_id"]]) for d in fits]
        print(f"{PROG}: model average: " + ", ".join(
            f"{d.meta['fit_id']} ({d.meta['model']['moe_form']}) {w:.2f}" for d, w in mixture),
            file=sys.stderr)
    rows = P.predict_rows(draws, hardware=hardware, gpus=args.gpus, engines=engines,
                          method=method, block=block, budget=budget,
                          verify_tokens=args.verify_tokens, context_tokens=args.context,
                          accept=args.accept, target=args.target, prob=args.prob,
                          seed=args.seed, mixture=mixture)
    meta = draws.meta
    if args.format != "table":
        _emit_machine(rows, args.format, {"fit_id": meta["fit_id"], "seed": args.seed,
                                          "interval_probs": list(P.interval_probs(args.prob)),
                                          "target": args.target, "draws": draws.n_draws})
        return 0
    probs = P.interval_probs(args.prob)
    first = rows[0]
    sc_line = (f"{first['hardware']} x{first['gpus']}, {first['method']}"
               + (f", block {first['block']}" if first["block"] is not None else "")
               + (f", budget {first['budget']}" if first["budget"] is not None else "")
               + f", verify {first['verify_tokens']} tokens, context {first['context_tokens']:g}")
    print(f"{PROG} predict: fit {meta['fit_id']} ({draws.n_draws} draws"
          f"{'' if meta['converged'] else ', UNCONVERGED'}), seed {args.seed}")
    print(sc_line)
    headers = ["engine", "accept", "median"] + [f"{P.pct_label(p)}% interval" for p in probs]
    headers += ["original +-30%"]
    if args.target is not None:
        headers.append(f"P(>={args.target:g})")
    body = []
    for r in rows:
        cells = [r["engine"], r["accept"], _fmt(r["median"])]
        cells += [f"{r[f'lo{P.pct_label(p)}']:.0f}-{r[f'hi{P.pct_label(p)}']:.0f}" for p in probs]
        cells.append("-" if r["original"] is None else
                     f"{r['original']:.0f} ({r['original_lo']:.0f}-{r['original_hi']:.0f})")
        if args.target is not None:
            cells.append(f"{r['p_ge_target']:.2f}")
        body.append(cells)
    print(render_table(headers, body))
    notes = sorted({f"{r['engine']}: {r['overhead_from']}" for r in rows})
    print("tok/s, posterior predictive (includes run-to-run noise); 'original' is the "
          "deterministic estimate with its flat +-30% band.")
    if any(r["accept_kind"] == "prior" for r in rows):
        print("acceptance not given: drawn from the acceptance prior in the priors file "
              "(pass --accept to fix it).")
    if any(r["accept_kind"] == "uniform" for r in rows):
        print("U(lo,hi) rows marginalise acceptance as Uniform(lo, hi).")
    for note in notes:
        print(f"  {note}")
    return 0


# ---------------------------------------------------------------- compare
def _latest_per_form(anchor) -> list:
    """The latest converged fit of each MoE form made on the same data as ``anchor``."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.engine import store

    fits_dir = store.fits_dir(paths.models_dir())
    best: dict[str, object] = {}
    for path in sorted(fits_dir.glob("*.nc")):
        try:
            d = store.load_draws(path)
        except DDTreeBayesError:
            continue
        if d.meta["converged"] and d.meta["data"]["sha256"] == anchor.meta["data"]["sha256"]:
            best[d.meta["model"]["moe_form"]] = d  # sorted by id = by time: the last wins
    if len(best) < 2:
        raise QueryError(f"found converged fits of {len(best)} MoE form(s) on this data",
                         fix="fit the other form, e.g. `ddtree-bayes fit --moe-form linear`")
    return list(best.values())


def cmd_compare(args: argparse.Namespace) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.engine import compare

    if args.fits:
        fits = [api.load(f.strip()) for f in args.fits.split(",") if f.strip()]
    else:
        fits = _latest_per_form(api.load())
    res = compare.compare_fits(fits, seed=args.seed, method=args.weights)
    if args.format == "json":
        print(json.dumps(res, indent=2))
        return 0
    print(render_table(["model", "", "rank", "elpd_loo", "se", "elpd_diff", "dse", "p_loo",
                        f"weight ({res['method']})", "Pareto k > 0.7"],
                       [[r["model"], "", str(r["rank"]), f"{r['elpd_loo']:.2f}", f"{r['se']:.2f}",
                         f"{r['elpd_diff']:.2f}", f"{r['dse']:.2f}", f"{r['p_loo']:.2f}",
                         f"{r['weight']:.2f}", str(r["pareto_k_above_0.7"])] for r in res["rows"]]))
    for note in res["notes"]:
        print(f"note: {note}")
    print("PSIS-LOO on few points: where Pareto k > 0.7 the estimate is unreliable; "
          "`ddtree-bayes validate` gives exact leave-one-out refits.")
    return 0


# ---------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace) -> int:
    import time

    from ddtree_bayes.workflows.report import summary as report

    t0 = time.perf_counter()
    if not args.quiet:
        print(f"[report] computing diagnostics, LOO and sensitivity for "
              f"{args.fit or 'the latest fit'}", file=sys.stderr, flush=True)
    out_dir, summary = report.write_report(args.fit, out_root=Path(args.out) if args.out else None,
                                           seed=args.seed)
    if args.format == "json":
        print(json.dumps({"report": str(out_dir / "index.html"), "summary": str(out_dir / "summary.json"),
                          "verdict": summary["verdict"],
                          "figure_errors": summary.get("figure_errors", {})}, indent=2))
    else:
        print(f"{summary['verdict']['text']}")
        print(f"report: {out_dir / 'index.html'}")
        print(f"numbers: {out_dir / 'summary.json'} and summary.md "
              f"({time.perf_counter() - t0:.1f} s)")
        for name, err in summary.get("figure_errors", {}).items():
            print(f"{PROG}: warning: figure {name} failed: {err}", file=sys.stderr)
    return 0 if summary["verdict"]["converged"] else 5


# ---------------------------------------------------------------- validate / simulate
def cmd_validate(args: argparse.Namespace) -> int:
    from ddtree_bayes.workflows import validation as V

    if args.jobs < 1:
        raise QueryError("--jobs must be >= 1", fix="use --jobs 1 or more")
    if args.sbc is not None:
        if args.sbc < 2:
            raise QueryError("--sbc needs at least 2 replicates", fix="e.g. --sbc 100")
        res = V.sbc(args.data, args.priors, replicates=args.sbc, jobs=args.jobs,
                    scheduler=args.scheduler, seed=args.seed, progress=not args.quiet)
        if args.plot:
            from ddtree_bayes.workflows.report import figures

            figures.sbc_histograms(res, Path(args.plot))
        if args.format == "json":
            print(json.dumps(res, indent=2))
            return 0
        print(f"simulation-based calibration: {res['replicates']} replicates, ranks 0..{res['L']} "
              f"in {res['bins']} bins, {res['unconverged']} unconverged, {res['seconds']:.0f} s")
        print(render_table(["parameter", "", "chi2 p", "rank counts per bin"],
                           [[k, "", f"{t['chi2_p']:.3f}", " ".join(map(str, t["counts"]))]
                            for k, t in res["uniformity"].items()]))
        return 0
    res = V.validate(args.data, args.priors, group=args.group, jobs=args.jobs,
                     scheduler=args.scheduler, seed=args.seed, progress=not args.quiet)
    if args.format == "json":
        print(json.dumps(res, indent=2))
        return 0
    rows = [[f"row {r['row']}", _config_label(r), _fmt(r["measured"], 1), _fmt(r["median"], 1),
             f"{r['lo50']:.1f}-{r['hi50']:.1f}", f"{r['lo90']:.1f}-{r['hi90']:.1f}", f"{r['percentile']:.2f}",
             f"{r['baseline']:.1f} ({r['baseline_lo']:.0f}-{r['baseline_hi']:.0f})"]
            for r in res["rows"]]
    print(f"held out by {res['group']}: {len(res['folds'])} refits "
          f"({sum(not f['converged'] for f in res['folds'])} not converged), {res['seconds']:.0f} s")
    print(render_table(["held out", "configuration", "measured", "median", "50%", "90%",
                        "pctile", "original +-30%"], rows))
    s = res["summary"]
    print()
    print(render_table(["estimator", "", "coverage 50%", "coverage 90%", "median abs % error",
                        "mean 90% width"],
                       [["posterior", "", _pct(s["posterior"]["coverage50"]),
                         _pct(s["posterior"]["coverage90"]), _pct(s["posterior"]["mdape"], 1),
                         _pct(s["posterior"]["mean_width90_rel"])],
                        ["original +-30%", "", "-", _pct(s["baseline"]["coverage90"]),
                         _pct(s["baseline"]["mdape"], 1), _pct(s["baseline"]["mean_width90_rel"])]]))
    return 0


def _config_label(r: dict) -> str:
    ctx = "" if r["context_tokens"] is None else f" ctx={r['context_tokens']:g}"
    return f"{r['system']} {r['engine']} {r['method']} M={r['verify_tokens']}{ctx}"


def _pct(x, digits: int = 0) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def cmd_simulate(args: argparse.Namespace) -> int:
    from ddtree_bayes.workflows import simulate

    text = simulate.simulate_from_files(args.truth, args.design, seed=args.seed)
    if args.out:
        from ddtree_bayes.engine.store import atomic_write_bytes

        atomic_write_bytes(Path(args.out), text.encode())
        print(f"wrote {text.count(chr(10)) - 1} simulated measurements to {args.out}")
    else:
        sys.stdout.write(text)
    return 0


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Bayesian throughput estimates for speculative decoding (DDTree, Eagle, "
                    "autoregressive) of LLMs on GPUs: fit a three-term step model to "
                    "measurements, then ask for posterior tok/s intervals.",
        epilog="Typical use: `ddtree-bayes fit && ddtree-bayes predict --accept 12:16`. "
               "Exit codes: 0 ok, 2 bad input (nothing written), 3 no usable fit, "
               "4 stale fit with --strict, 5 fit not converged.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    f = sub.add_parser("fit", help="fit the model to the measurements and save the posterior",
                       description="Validate the measurements and priors, sample the posterior "
                                   "with NUTS, check convergence (R-hat <= 1.01, bulk ESS >= 400, "
                                   "no divergences) and save models/fits/<fit-id>.nc.")
    f.add_argument("--data", help="measurement CSV (default: data/measurements.csv here, else "
                                  "the bundled Kimi K2.6 data)")
    f.add_argument("--priors", help="priors TOML (default: models/priors.toml, else bundled)")
    f.add_argument("--hardware-file", help="hardware table CSV (default: data/hardware.csv)")
    f.add_argument("--chains", type=int, default=4, help="NUTS chains (default: %(default)s)")
    f.add_argument("--draws", type=int, default=1000, help="draws per chain (default: %(default)s)")
    f.add_argument("--tune", type=int, default=1000, help="tuning steps per chain (default: %(default)s)")
    f.add_argument("--target-accept", type=float, default=SamplerSettings.target_accept,
                   help="NUTS target acceptance (default: %(default)s; see docs/model.md)")
    f.add_argument("--moe-form", choices=("power", "linear"),
                   help="override the priors file's MoE form (to compare both: see `compare`)")
    f.add_argument("--backend", choices=("nutpie", "pymc"), default="nutpie",
                   help="NUTS implementation (default: %(default)s; pymc is the fallback)")
    f.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    add_seed_and_format(f, formats=("table", "json"))
    f.set_defaults(func=cmd_fit)

    p = sub.add_parser("predict", help="posterior tok/s intervals for a configuration",
                       description="Posterior predictive throughput. With no configuration "
                                   "flags: B300, DDTree block 16, budget 32 (verify 33), SGLang "
                                   "and native engines, beside the original deterministic "
                                   "estimate and its +-30%% band.")
    p.add_argument("--accept", help=ACCEPT_HELP)
    p.add_argument("--target", type=float, help="also print P(tok/s >= TARGET)")
    p.add_argument("--prob", type=float, default=0.9,
                   help="probability of the wide interval (default: %(default)s; 50%% is always shown)")
    add_scenario_arguments(p)
    p.add_argument("--fit", help="fit id (default: the latest fit)")
    p.add_argument("--strict", action="store_true",
                   help="error (exit 4) instead of warning if data or priors changed since the fit")
    p.add_argument("--allow-unconverged", action="store_true",
                   help="use a fit that failed its convergence gates")
    p.add_argument("--model-average", action="store_true",
                   help="mix the latest converged fit of each MoE form on the same data, "
                        "weighted by PSIS-LOO pseudo-BMA+ (see `compare`)")
    add_seed_and_format(p, formats=("table", "json", "csv"))
    p.set_defaults(func=cmd_predict)

    c = sub.add_parser("compare", help="compare model forms (e.g. power vs linear MoE) by PSIS-LOO",
                       description="PSIS-LOO (arviz-stats compare, stacking weights) of fits made "
                                   "on the same data. Default: the latest converged fit of each "
                                   "MoE form on the latest fit's data; fit the other form with "
                                   "`ddtree-bayes fit --moe-form linear`.")
    c.add_argument("--fits", help="comma-separated fit ids to compare instead")
    c.add_argument("--weights", choices=("bb-pseudo-bma", "stacking", "pseudo-bma"),
                   default="bb-pseudo-bma",
                   help="how to weight the models (default: %(default)s, which hedges for the "
                        "uncertainty of elpd; stacking is winner-take-all on little data)")
    add_seed_and_format(c, formats=("table", "json"))
    c.set_defaults(func=cmd_compare)

    r = sub.add_parser("report", help="diagnostics, checks and figures of a fit -> reports/<fit-id>/",
                       description="Write reports/<fit-id>/index.html (self-contained), summary.md "
                                   "and summary.json: sampling diagnostics, prior vs posterior, "
                                   "posterior predictive check, PSIS-LOO and LOO-PIT, prior "
                                   "sensitivity, throughput fan chart, variance decomposition and "
                                   "step-time breakdown. Exits 5 if the fit is unconverged (the "
                                   "report is still written and says so at the top).")
    r.add_argument("--fit", help="fit id (default: the latest fit)")
    r.add_argument("--out", help="folder to write <fit-id>/ into (default: reports/)")
    r.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    add_seed_and_format(r, formats=("table", "json"))
    r.set_defaults(func=cmd_report)

    v = sub.add_parser("validate", help="exact leave-one-out coverage vs the original +-30%, or SBC",
                       description="Refit the model with each measurement (or each group) held "
                                   "out, using the production sampler settings, and check where "
                                   "the truth falls in the predictive intervals; the original "
                                   "deterministic formula is refit by least squares on the same "
                                   "folds for comparison. --sbc N runs simulation-based "
                                   "calibration instead.")
    v.add_argument("--data", help="measurement CSV (default: data/measurements.csv)")
    v.add_argument("--priors", help="priors TOML (default: models/priors.toml)")
    v.add_argument("--group", choices=("hardware", "engine", "method", "budget"),
                   help="leave one group out instead of one measurement")
    v.add_argument("--sbc", type=int, metavar="N", help="simulation-based calibration with N replicates")
    v.add_argument("--plot", help="with --sbc: write the rank histograms to this PNG")
    v.add_argument("--jobs", type=int, default=1, help="parallel worker processes (default: %(default)s)")
    v.add_argument("--scheduler", help="dask.distributed scheduler address (e.g. tcp://host:8786): "
                                       "run folds on that cluster instead")
    v.add_argument("--quiet", action="store_true", help="no progress bar")
    add_seed_and_format(v, formats=("table", "json"))
    v.set_defaults(func=cmd_validate)

    s = sub.add_parser("simulate", help="write a synthetic measurement file from known parameters",
                       description="Simulate C=1 throughput measurements for DESIGN.csv rows "
                                   "(hardware, gpus, engine, method, block, budget, accept_len, "
                                   "context_tokens[, model]) under the parameters in PARAMS.toml "
                                   "(see docs/validation.md), with lognormal run-to-run noise.")
    s.add_argument("--truth", required=True, help="PARAMS.toml with the true parameters")
    s.add_argument("--design", required=True, help="DESIGN.csv: the configurations to simulate")
    s.add_argument("--out", help="write here (atomically) instead of standard output")
    add_seed_and_format(s, formats=())
    s.set_defaults(func=cmd_simulate)

    from ddtree_bayes.cli import decisions as cli_decisions
    from ddtree_bayes.cli import living as cli_living

    cli_living.register(sub)
    cli_decisions.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DDTreeBayesError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing was written", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `ddtree-bayes predict | head`: the reader left
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""CLI commands report, validate and simulate."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddtree_bayes.cli.output import (
    PROG,
    counted,
    emit_json,
    emit_result,
    fmt_value,
    print_warnings,
    render_table,
)
from ddtree_bayes.core.data import plain_text
from ddtree_bayes.core.errors import QueryError


# ---------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace) -> int:
    import time

    from ddtree_bayes.workflows import report

    t0 = time.perf_counter()
    named = {"model": args.model} if args.model else {}   # (a fit of several models needs it)
    if args.priors is not None:   # (refused now, not after minutes in the budget section)
        from ddtree_bayes.workflows.decisions import read_curve

        read_curve(args.priors)
        named["priors"] = args.priors
    if not args.quiet:
        print(f"[report] computing diagnostics, LOO and sensitivity for "
              f"{args.fit or 'the latest fit'}", file=sys.stderr, flush=True)
    out_dir, summary = report.write_report(args.fit, out_root=Path(args.out) if args.out else None,
                                           seed=args.seed, **named)
    warned: list[str] = []   # (every warning line printed: the JSON's warnings, as predict's)
    print_warnings(summary.get("stale", []), warned)   # (as predict warns of the same fit)
    print_warnings(summary.get("above_peak", []), warned)   # (compute_eff median above 1)
    # (and of the question its answer line asks, as predict without flags says them)
    print_warnings(summary.get("answer_warnings", []), warned)
    # (a figure not drawn: said on stderr whatever the format; it was under the table only)
    print_warnings([f"figure {name} failed: {err}"
                    for name, err in summary.get("figure_errors", {}).items()], warned)
    own = summary.get("default_scenario") or {}
    asked = {k: v for k, v in own.items() if k != "derived"} if own.get("derived") else None
    if asked is not None:
        print(f"{PROG} report: {asked['why']}; its answer line, fan, variance shares, breakdown "
              f"and decisions ask its most-measured system: {asked['asked']} (`ddtree-bayes "
              "predict` asks another)", file=sys.stderr)
    if args.format == "json":
        emit_json({"fit_id": summary["fit_id"], "report": str(out_dir / "index.html"),
                   "summary": str(out_dir / "summary.json"), "verdict": summary["verdict"],
                   "figure_errors": summary.get("figure_errors", {}),
                   "default_scenario": asked, "warnings": warned})
    else:
        print(f"{summary['verdict']['text']}")
        print(f"report: {out_dir / 'index.html'}")
        print(f"numbers: {out_dir / 'summary.json'} and summary.md "
              f"({time.perf_counter() - t0:.1f} s)")
    return 0 if summary["verdict"]["converged"] else 5


# ---------------------------------------------------------------- validate / simulate
def _check_writable(path: Path, flag: str) -> None:
    """Refuse an output file that cannot be written (no such folder, a folder, read-only)."""
    import os

    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
        raise QueryError(f"{flag} {path}: cannot write there ("
                         + ("a folder" if path.is_dir() else f"no such folder {folder}"
                            if not folder.is_dir() else f"{folder} is read-only") + ")",
                         fix=f"give {flag} a file in an existing, writable folder")


def cmd_validate(args: argparse.Namespace) -> int:
    from ddtree_bayes.workflows import validation as V

    if args.jobs < 1:
        raise QueryError("--jobs must be >= 1", fix="use --jobs 1 or more")
    if args.scheduler and args.jobs != 1:   # (the cluster's workers run the folds: it was dropped)
        raise QueryError(f"--jobs {args.jobs} does not apply with --scheduler: the cluster's "
                         "workers run the folds", fix="drop --jobs, or drop --scheduler")
    if args.keep_ar and (args.extrapolate or args.sbc is not None):   # (the conflict named)
        raise QueryError(f"--keep-ar and {'--sbc' if args.sbc is not None else '--extrapolate'} "
                         "are two different checks", fix="run them one at a time")
    if args.keep_ar and args.group != "pair":
        raise QueryError("--keep-ar goes with --group pair (each pair's AR rows kept, its "
                         "speculative rows held out)",
                         fix="use validate --group pair --keep-ar")
    if args.from_smallest and not args.extrapolate:
        raise QueryError("--from-smallest goes with --extrapolate",
                         fix="use validate --extrapolate --from-smallest")
    if args.corpus and not args.from_smallest:
        raise QueryError("--corpus goes with --extrapolate --from-smallest",
                         fix="use validate --extrapolate --from-smallest --corpus FILE")
    if args.concurrency and not args.extrapolate:
        raise QueryError("--concurrency goes with --extrapolate",
                         fix="use validate --extrapolate --concurrency")
    if args.plot and args.sbc is None:
        raise QueryError("--plot draws the rank histograms of --sbc",
                         fix="use validate --sbc N --plot FILE.png")
    _refuse_unread(args)
    if args.train_concurrency is None:
        args.train_concurrency = 4
    if args.test_concurrency is None:
        args.test_concurrency = [8, 16]
    if args.extrapolate:
        return _validate_extrapolate(args)
    if args.keep_ar:
        return _validate_keep_ar(args)
    if args.sbc is not None:
        if args.sbc < 2:
            raise QueryError("--sbc needs at least 2 replicates", fix="e.g. --sbc 100")
        if args.plot:   # before the replicates' minutes, not after
            _check_writable(Path(args.plot), "--plot")
        res = V.sbc(args.data, args.priors, replicates=args.sbc, jobs=args.jobs,
                    scheduler=args.scheduler, seed=args.seed, progress=not args.quiet)
        if args.plot:
            from ddtree_bayes.workflows.report import figures

            figures.sbc_histograms(res, Path(args.plot))
        if args.format == "json":
            emit_json(res)
            return 0
        print(f"simulation-based calibration: {res['replicates']} replicates, ranks 0..{res['L']} "
              f"in {res['bins']} bins, {res['unconverged']} unconverged, {res['seconds']:.0f} s")
        if res.get("p_method") == "exact":
            print(f"chi2 p: exact (fewer than {V.SBC_MIN_EXPECTED} ranks a bin expected, where "
                  "the chi-square approximation is off: it read 2 replicates in one bin of 10 "
                  "as p 0.035, exactly 0.1)")
        print(render_table(["parameter", "", "chi2 p", "rank counts per bin"],
                           [[k, "", f"{t['chi2_p']:.3f}", " ".join(map(str, t["counts"]))]
                            for k, t in res["uniformity"].items()]))
        return 0
    res = V.validate(args.data, args.priors, group=args.group, jobs=args.jobs,
                     scheduler=args.scheduler, seed=args.seed, progress=not args.quiet)
    if args.format == "json":
        emit_json(res)
        return 0
    failed = {f["fold"]: f for f in res["folds"] if not f["converged"]}
    rows = [[f"row {r['row']}", _config_label(r), fmt_value(r["measured"], 1), fmt_value(r["median"], 1),
             f"{r['lo50']:.1f}-{r['hi50']:.1f}", f"{r['lo90']:.1f}-{r['hi90']:.1f}", f"{r['percentile']:.2f}",
             "- (no accept_len)" if r["baseline"] is None else
             f"{r['baseline']:.1f} ({r['baseline_lo']:.0f}-{r['baseline_hi']:.0f})"]
            + (["GATES FAILED" if r["fold"] in failed else ""] if failed else [])
            for r in res["rows"]]
    print(f"held out by {res['group']}: {len(res['folds'])} refits "
          f"({len(failed)} not converged), {res['seconds']:.0f} s")
    print(render_table(["held out", "configuration", "measured", "median", "50%", "90%",
                        "pctile", "original +-30%"] + (["fit"] if failed else []), rows))
    s = res["summary"]
    print()
    mean = res["group"] in ("model", "pair")   # the never-measured question: mean abs error too
    if mean:
        print(_per_fold_table(res))
        print()
    print(render_table(["estimator", "", "coverage 50%", "coverage 90%", "median abs % error"]
                       + (["mean abs % error"] if mean else []) + ["mean 90% width"],
                       [["posterior", "", _pct(s["posterior"]["coverage50"]),
                         _pct(s["posterior"]["coverage90"]), _pct(s["posterior"]["mdape"], 1)]
                        + ([_pct(s["posterior"]["mape"], 1)] if mean else [])
                        + [_pct(s["posterior"]["mean_width90_rel"])],
                        ["original +-30%", "", "-", _pct(s["baseline"]["coverage90"]),
                         _pct(s["baseline"]["mdape"], 1)]
                        + ([_pct(s["baseline"]["mape"], 1)] if mean else [])
                        + [_pct(s["baseline"]["mean_width90_rel"])]]))
    if s["baseline"].get("n", 0) < s.get("n", 0):
        print(f"original +-30%: scored on the {s['baseline']['n']} of "
              f"{counted(s['n'], 'held-out row')} with an accept_len (the formula needs the "
              "acceptance; the fit infers it)")
    for line in unscored_lines({name: [r["row"] for r in res["rows"] if r["fold"] == name]
                                for name in failed},
                               {name: fold["failures"] for name, fold in failed.items()},
                               "their intervals are listed, not scored"):
        print(line)
    for skip in res.get("skipped_rows", ()):   # (a result saved before it: no key)
        which, _, why = skip["reason"].partition(": ")
        print(f"not scored: {which}, held out by {skip['fold']}: {why}")
    return 0


#: How the checks that pool several refits (--keep-ar, --extrapolate and its modes) say where
#: a failed refit's rows still show.
NOT_POOLED = "scored on its own line only, not pooled"


def unscored_lines(unconverged: dict[str, list[int]], failures: dict[str, list[str]],
                   shown: str = NOT_POOLED) -> list[str]:
    """One line per refit that failed its convergence gates (``unconverged``: its name -> the
    data rows it held out, as ``summary.unconverged_rows`` / ``unconverged_rows`` list them):
    its rows, the gates it failed, and where they still show (``shown``)."""
    return [f"not counted above: row{'s' if len(held) > 1 else ''} {', '.join(map(str, held))}, "
            f"held out by {name}, whose refit failed its convergence gates "
            f"({'; '.join(failures.get(name, ()))}): {shown}"
            for name, held in unconverged.items() if held]


#: The flags of validate that only some of its checks read (beyond --priors, --seed, --quiet,
#: --format, and --jobs, which every check but --concurrency reads), each with the checks that
#: read it and the command that would.
_READ_BY = {
    "data": ({"leave-one-out", "--sbc", "--keep-ar"}, "validate --extrapolate --sweeps CSV"),
    "group": ({"leave-one-out", "--keep-ar"}, "validate --group G"),
    "sbc": ({"--sbc"}, "validate --sbc N"),
    "sweeps": ({"--extrapolate", "--from-smallest", "--concurrency"}, "validate --extrapolate"),
    "structures": ({"--extrapolate", "--from-smallest"}, "validate --extrapolate"),
    "train_concurrency": ({"--concurrency"}, "validate --extrapolate --concurrency"),
    "test_concurrency": ({"--concurrency"}, "validate --extrapolate --concurrency"),
    "scheduler": ({"leave-one-out", "--sbc", "--keep-ar"}, "validate without --extrapolate"),
}


def _refuse_unread(args: argparse.Namespace) -> None:
    """Refuse a flag the chosen check would ignore: `validate --train-concurrency 8` ran the
    leave-one-out refits, `--extrapolate --group pair` the plain extrapolation."""
    check, shown = ("--concurrency", "validate --extrapolate --concurrency")
    if not args.extrapolate:
        check, shown = (("--sbc", "validate --sbc") if args.sbc is not None else
                        ("--keep-ar", "validate --group pair --keep-ar") if args.keep_ar else
                        ("leave-one-out", "validate (leave-one-out refits)"))
    elif args.from_smallest:
        check, shown = "--from-smallest", "validate --extrapolate --from-smallest"
    elif not args.concurrency:
        check, shown = "--extrapolate", "validate --extrapolate"
    for dest, (readers, other) in _READ_BY.items():
        if getattr(args, dest) is not None and check not in readers:
            flag = f"--{dest.replace('_', '-')}"
            raise QueryError(f"{flag} does not apply to {shown}",
                             fix=f"drop {flag}, or run {other}")
    if check == "--concurrency" and args.jobs != 1:   # (its default: no None to tell it by)
        raise QueryError(f"--jobs does not apply to {shown} (its sweeps are fitted one after "
                         "another)", fix="drop --jobs, or run validate --extrapolate")


def _per_fold_table(res: dict) -> str:
    """Per held-out model or pair: rows, 90% coverage, mean signed and absolute error of the
    median, for the posterior and the original +-30%."""
    from ddtree_bayes.workflows.validation import summarize_folds

    body = []
    for fold in res["folds"]:
        rows = [r for r in res["rows"] if r["fold"] == fold["fold"]]
        if not rows:
            continue
        s = summarize_folds(rows)
        bias = sum((r["median"] - r["measured"]) / r["measured"] for r in rows) / len(rows)
        body.append([fold["fold"].split("=", 1)[1], str(len(rows)),
                     _pct(s["posterior"]["coverage90"]), f"{100 * bias:+.1f}%",
                     _pct(s["posterior"]["mape"], 1), _pct(s["baseline"]["coverage90"]),
                     _pct(s["baseline"]["mape"], 1), "" if fold["converged"] else "GATES FAILED"])
    return render_table([f"held-out {res['group']}", "rows", "coverage 90%", "bias",
                         "mean abs % error", "+-30% coverage", "+-30% mean abs % error", "fit"],
                        body)


def _validate_extrapolate(args: argparse.Namespace) -> int:
    from ddtree_bayes.workflows import extrapolation as X

    # (split by args.name_list: an empty item refused, one given twice is one)
    structures = args.structures or (("structured",) if args.from_smallest
                                     else ("structured", "fraction"))
    unknown = [s for s in structures if s not in X.STRUCTURES]
    if unknown:
        raise QueryError(f"--structures {','.join(structures)!r}: unknown structure",
                         fix="use a comma-separated subset of " + ",".join(X.STRUCTURES))
    files = [Path(f) for f in args.sweeps] if args.sweeps else None
    if args.concurrency:
        from ddtree_bayes.workflows import concurrency_check as CC

        if args.from_smallest:
            raise QueryError("--concurrency and --from-smallest are two different checks",
                             fix="run them one at a time")
        if any(c <= args.train_concurrency for c in args.test_concurrency):
            raise QueryError("--test-concurrency must lie above --train-concurrency "
                             f"({args.train_concurrency})", fix="e.g. --test-concurrency 8,16")
        res = CC.extrapolate_concurrency(files, args.priors, train_max=args.train_concurrency,
                                         test=tuple(args.test_concurrency), seed=args.seed,
                                         progress=not args.quiet)
        emit_result(res, args.format, render_concurrency)
        return 0
    if args.from_smallest:
        from ddtree_bayes.workflows import from_smallest as F

        res = F.from_smallest(files, args.priors, structures=structures, jobs=args.jobs,
                              seed=args.seed, progress=not args.quiet,
                              corpus=Path(args.corpus) if args.corpus else None)
        emit_result(res, args.format, render_from_smallest)
        return 0
    res = X.extrapolate(files, args.priors, structures=structures, jobs=args.jobs,
                        seed=args.seed, progress=not args.quiet)
    emit_result(res, args.format, lambda r: render_extrapolation(r, structures))
    return 0


def render_concurrency(res: dict) -> str:
    """The `validate --extrapolate --concurrency` table."""
    out = [f"concurrency: {len(res['sweeps'])} sweeps, {res['seconds']:.0f} s; fitted C <= "
           f"{res['train_max']}, predicted C = {','.join(map(str, res['test']))} (total tok/s; "
           "per user is total / C, same relative errors)"]
    body = []
    for s in res["sweeps"]:
        if not s["rows"]:
            continue
        body.append([s["sweep"], "ok" if s["converged"] else "GATES FAILED", str(s["n"]),
                     _pct(s["cov90"]), f"{s['bias']:+.1%}", f"{s['mean_abs']:.1%}",
                     _pct(s["width90"]), _pct(s["flat30_cov"])])
    p = res["pooled"]
    if p:
        body.append(["pooled", "", str(p["n"]), _pct(p["cov90"]), f"{p['bias']:+.1%}",
                     f"{p['mean_abs']:.1%}", _pct(p["width90"]), _pct(p["flat30_cov"])])
    out.append(render_table(["sweep", "gates", "n", "90% cov", "bias", "mean abs", "90% width",
                             "flat +-30% cov"], body))
    for s in res["sweeps"]:
        for x in s["crossovers"]:
            if x["measured_crossover"] is None and x["predicted_crossover"] is None:
                continue
            out.append(f"  {s['sweep']} {x['method']} ctx {plain_text(x['context_tokens'])}: crossover "
                       f"measured C = {x['measured_crossover']}, predicted C = "
                       f"{x['predicted_crossover']}"
                       + (" (within one step)" if x["within_one_step"] else ""))
    out += unscored_lines(res.get("unconverged_rows", {}),   # (saved before: no key)
                          {s["sweep"]: s["failures"] for s in res["sweeps"]})
    beyond = ("" if "crossovers_beyond_fit" not in res else   # (a saved result before it)
              f" (beyond the fitted C <= {res['train_max']}: {res['crossovers_beyond_fit']}, of "
              f"them within one step: {res['crossovers_beyond_fit_within_one_step']})")
    out.append(f"crossovers shown by the sweeps: {res['crossovers_shown']}, predicted within one "
               f"measured step: {res['crossovers_within_one_step']}{beyond}"
               + (" (of the sweeps whose fit passed its gates)"
                  if res.get("unconverged_rows") else ""))
    out.extend(f"note: {n}" for n in res["notes"])
    return "\n".join(out)


def render_extrapolation(res: dict, structures: tuple[str, ...]) -> str:
    """The `validate --extrapolate` table (also from a saved --format json result)."""
    out = [f"extrapolation: {len(res['sweeps'])} sweeps x {len(structures)} structures, "
           f"{res['seconds']:.0f} s; held out the largest-M configurations of each method"]
    body = []
    for s in res["sweeps"]:
        for name in (*structures, "baseline"):
            sc = s[name]
            gate = "" if name == "baseline" else (
                ("ok" if not sc.get("remedy") else f"ok after remedy {sc['remedy']}")
                if sc["converged"] else "GATES FAILED")
            body.append([s["sweep"] if name == structures[0] else "",
                         f"M<={s['train_max_verify']} -> {','.join(map(str, s['held_out_verify']))}"
                         if name == structures[0] else "",
                         "original +-30%" if name == "baseline" else name, str(sc["n"]),
                         "-" if sc["coverage50"] is None else _pct(sc["coverage50"]),
                         _pct(sc["coverage90"]), f"{sc['bias'] * 100:+.1f}%",
                         _pct(sc["mae"], 1), _pct(sc["width90"]), gate,
                         _odds(sc.get("attainability"))])
    for name, sc in res["pooled"].items():
        body.append(["POOLED" if name == structures[0] else "", "",
                     "original +-30%" if name == "baseline" else name, str(sc["n"]),
                     "-" if sc["coverage50"] is None else _pct(sc["coverage50"]),
                     _pct(sc["coverage90"]), _signed(sc["bias"]), _pct(sc["mae"], 1),
                     _pct(sc["width90"]), "", ""])   # (no converged fit: n 0, scores null)
    out.append(render_table(["sweep", "fit -> held out (M)", "structure", "n", "cov 50%",
                             "cov 90%", "bias", "mean abs err", "90% width", "fit",
                             "P(bias, mae on target): fit / noise only"], body))
    for name in structures:
        t = res["pooled"][name].get("targets")
        if t:
            out.append(
                f"{name}: |bias| <= 3% on {t['met_bias']}/{t['sweeps']} sweeps (a calibrated "
                f"model expects {t['expected_bias']:.1f}; all {t['sweeps']} with probability "
                f"{_p(t['p_all_bias'])}, {_p(t['noise_p_all_bias'])} for an oracle that knows the "
                f"true means and faces only run-to-run noise); mean abs error <= 5% on "
                f"{t['met_mae']}/{t['sweeps']} (expected {t['expected_mae']:.1f}; all with "
                f"probability {_p(t['p_all_mae'])}, oracle {_p(t['noise_p_all_mae'])})")
    out += unscored_lines(res.get("unconverged_rows", {}),   # (saved before: no key)
                          {f"{s['sweep']} ({name})": s[name].get("failures", [])
                           for s in res["sweeps"] for name in structures if name in s})
    out += [f"  {note}" for note in res["notes"]]
    return "\n".join(out)


def _validate_keep_ar(args: argparse.Namespace) -> int:
    from ddtree_bayes.workflows import ar_kept as T

    res = T.validate_keep_ar(args.data, args.priors, jobs=args.jobs, scheduler=args.scheduler,
                             seed=args.seed, progress=not args.quiet)
    emit_result(res, args.format, render_keep_ar)
    return 0


def _signed(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _score_cells(sc: dict, *, cov50: bool = True) -> list[str]:
    """n, (coverage 50%,) coverage 90%, bias, mean and median abs error, 90% width."""
    return ([str(sc["n"])] + ([_pct(sc["coverage50"])] if cov50 else [])
            + [_pct(sc["coverage90"]), _signed(sc["bias"]), _pct(sc["mae"], 1),
               _pct(sc["mdae"], 1), _pct(sc["width90"])])


_SCORE_HEAD = ["n", "cov 50%", "cov 90%", "bias", "mean abs err", "median abs err", "90% width"]


def _fit_status(status: dict | None) -> str:
    if status is None:   # (a refit not made: a whole pair of a file of one pair)
        return "not made"
    if not status["converged"]:
        return "GATES FAILED"
    return "ok" if not status.get("remedy") else f"ok after remedy {status['remedy']}"


def render_keep_ar(res: dict) -> str:
    """The `validate --group pair --keep-ar` tables (also from a saved --format json result)."""
    s = res["summary"]
    n_inferred = s["inferred_accept"]["ar_kept"]["n"]
    failed = sum(not f["converged"] for f in res["folds"])
    pairs, refits = len(res["by_pair"]), len(res["folds"])
    # (a whole-pair refit that would hold out every row is not made: ar_kept.refits)
    missing = sum(p.get("whole_pair_fit") is None for p in res["by_pair"])
    out = [(f"AR kept: {pairs} (model, system) pairs x 2 refits (speculative rows held out, AR "
            "rows kept / every row of the pair held out)" if refits == 2 * pairs else
            f"AR kept: {counted(pairs, '(model, system) pair')}, {counted(refits, 'refit')} "
            f"(speculative rows held out, AR rows kept; no whole-pair refit of "
            f"{counted(missing, 'pair')}: notes below)")
           + f", {res['seconds']:.0f} s, "
           f"{failed} of {len(res['folds'])} refits failed a gate; "
           f"{counted(s['ar_kept']['n'], 'speculative row')} scored ({n_inferred} at an inferred "
           "acceptance), "
           f"{len(res['skipped_rows'])} skipped"
           + (f"; {counted(len(left), 'pair')} left out (notes below)"
              if (left := res.get("skipped_pairs")) else "")]   # (saved before: no key)
    body = []
    for label, key, sub in (("posterior, AR kept", "ar_kept", "summary"),
                            ("posterior, whole pair held out", "whole_pair", "summary"),
                            ("original +-30%, AR kept", "baseline", "summary"),
                            ("original +-30%, whole pair held out", "baseline_whole_pair",
                             "summary"),
                            ("posterior, AR kept: rows with accept_len", "ar_kept",
                             "with_accept_len"),
                            ("posterior, whole pair: rows with accept_len", "whole_pair",
                             "with_accept_len")):
        sc = s[key] if sub == "summary" else s[sub][key]
        body.append([label, *_score_cells(sc)])
    out.append(render_table(["estimator", *_SCORE_HEAD], body))
    t = res["targets"]
    if t.get("met"):
        post = s["ar_kept"]
        out.append(f"targets (issue 20): coverage 90% >= {_pct(t['coverage90'])}: "
                   f"{_pct(post['coverage90'])} {'met' if t['met']['coverage90'] else 'not met'}; "
                   f"median abs error <= {_pct(t['mdae'])}: {_pct(post['mdae'], 1)} "
                   f"{'met' if t['met']['mdae'] else 'not met'}; mean 90% width <= "
                   f"{_pct(t['width90'])}: {_pct(post['width90'])} "
                   f"{'met' if t['met']['width90'] else 'not met'}")
    out.append("")
    body = []
    for p in res["by_pair"]:
        a, w, b = p["ar_kept"], p["whole_pair"], p["baseline"]
        body.append([p["pair"], ",".join(p["engines"]), ",".join(p["methods"]),
                     f"{p['scored']}/{p['speculative_rows']}", _pct(a["coverage90"]),
                     _signed(a["bias"]), _pct(a["mae"], 1), _pct(a["width90"]),
                     _pct(w["coverage90"]), _signed(w["bias"]), _pct(w["mae"], 1),
                     _pct(w["width90"]), f"{_pct(b['coverage90'])} ({b['n']})",
                     _pct(b["mae"], 1),
                     f"{_fit_status(p['ar_kept_fit'])} / {_fit_status(p['whole_pair_fit'])}"])
    out.append(render_table(["pair", "engine", "method", "scored", "AR kept: cov 90%", "bias",
                             "mean abs err", "width", "whole pair: cov 90%", "bias",
                             "mean abs err", "width", "+-30%: cov 90% (n)", "mean abs err",
                             "fits (AR kept / whole)"], body))
    for title, table in (("engine", res["by_engine"]), ("method", res["by_method"])):
        out.append("")
        body = []
        for value, sc in table.items():
            a, w, b = sc["ar_kept"], sc["whole_pair"], sc["baseline"]
            body.append([value, str(a["n"]), _pct(a["coverage90"]), _signed(a["bias"]),
                         _pct(a["mdae"], 1), _pct(a["width90"]), _pct(w["coverage90"]),
                         _signed(w["bias"]), _pct(w["mdae"], 1), _pct(w["width90"]),
                         f"{_pct(b['coverage90'])} ({b['n']})", _signed(b["bias"]),
                         _pct(b["mdae"], 1)])
        out.append(render_table([title, "n", "AR kept: cov 90%", "bias", "median abs err",
                                 "width", "whole pair: cov 90%", "bias", "median abs err",
                                 "width", "+-30%: cov 90% (n)", "bias", "median abs err"],
                                body))
    out += unscored_lines(s.get("unconverged_rows", {}),   # (saved before: no key)
                          {f["fold"]: f["failures"] for f in res["folds"]})
    out += [f"  {note}" for note in res["notes"]]
    return "\n".join(out)


def render_from_smallest(res: dict) -> str:
    """The `validate --extrapolate --from-smallest` tables (also from a saved JSON result)."""
    structures = tuple(res["structures"])
    out = [f"from the smallest configuration: {len(res['splits'])} (sweep, method) splits x "
           f"{len(structures)} structure(s), {res['seconds']:.0f} s; fitted the sweep's AR rows "
           "plus the method's smallest configuration, predicted every larger one"
           + (f", beside the {counted(c['rows'], 'row')} of {c['file']} (less each sweep's own "
              "model on its own system)"
              if (c := res.get("corpus")) else "")]
    body = []
    for s in res["splits"]:
        for name in (*structures, "baseline"):
            sc = s[name]
            first = name == structures[0]
            body.append([s["split"] if first else "", f"{s['system']} {s['engine']}" if first else "",
                         f"M={s['trained_verify']} -> {','.join(map(str, s['predicted_verify']))}"
                         if first else "", "original +-30%" if name == "baseline" else name,
                         *_score_cells(sc, cov50=False),
                         "" if name == "baseline" else _fit_status(sc)])
    out.append(render_table(["split", "system engine", "trained -> predicted", "structure",
                             *[h for h in _SCORE_HEAD if h != "cov 50%"], "fit"], body))
    out.append("")
    body = []
    for name, sc in res["pooled"].items():
        label = "original +-30%" if name == "baseline" else name
        body.append([label, "all", *_score_cells(sc)])
        for bin_label, b in sc["by_ratio"].items():
            body.append(["", bin_label, *_score_cells(b)])
    out.append(render_table(["pooled", "M_predicted / M_trained", *_SCORE_HEAD], body))
    out.append("")
    body = []
    for engine, table in res["by_engine"].items():
        for name, sc in table.items():
            body.append([engine if name == structures[0] else "",
                         "original +-30%" if name == "baseline" else name, *_score_cells(sc)])
    out.append(render_table(["engine", "structure", *_SCORE_HEAD], body))
    t = res["targets"]
    for name in structures:
        met, sc = res["pooled"][name].get("targets_met"), res["pooled"][name]
        if met:
            worst = max(sc["by_ratio"].items(), key=lambda kv: abs(kv[1]["bias"]))
            out.append(f"{name}: targets (issue 20): median abs error <= {_pct(t['mdae'])}: "
                       f"{_pct(sc['mdae'], 1)} {'met' if met['mdae'] else 'not met'}; |bias| <= "
                       f"{_pct(t['bias_per_ratio'])} at every ratio: worst {_signed(worst[1]['bias'])} "
                       f"at {worst[0]} {'met' if met['bias_per_ratio'] else 'not met'}; mean 90% "
                       f"width <= {_pct(t['width90'])}: {_pct(sc['width90'])} "
                       f"{'met' if met['width90'] else 'not met'}")
    out += unscored_lines(res.get("unconverged_rows", {}),   # (saved before: no key)
                          {f"{s['split']} ({name})": s[name]["failures"]
                           for s in res["splits"] for name in structures})
    out += [f"  {note}" for note in res["notes"]]
    return "\n".join(out)


def _p(x: float) -> str:
    """A probability: two decimals, two significant digits below 0.01."""
    return f"{x:.2f}" if x >= 0.01 or x == 0 else f"{x:.1g}"


def _odds(a: dict | None) -> str:
    if not a:
        return ""
    return (f"{a['p_bias']:.2f}, {a['p_mae']:.2f} / {a['noise_p_bias']:.2f}, "
            f"{a['noise_p_mae']:.2f}")


def _config_label(r: dict) -> str:
    from ddtree_bayes.core.data import row_config_label

    return row_config_label(r)


def _pct(x, digits: int = 0) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def cmd_simulate(args: argparse.Namespace) -> int:
    from ddtree_bayes.workflows import simulate

    if args.out and Path(args.out).is_dir():
        raise QueryError(f"--out {args.out} is a folder", fix="give a file name, e.g. --out sim.csv")
    text = simulate.simulate_from_files(args.truth, args.design, seed=args.seed)
    if args.out:
        from ddtree_bayes.engine.store import atomic_write_bytes

        try:
            atomic_write_bytes(Path(args.out), text.encode())
        except OSError as err:
            raise QueryError(f"--out {args.out}: cannot write there ({err.strerror or err})",
                             fix="give a writable file path, e.g. --out sim.csv") from None
        print(f"wrote {counted(text.count(chr(10)) - 1, 'simulated measurement')} to {args.out}")
    else:
        sys.stdout.write(text)
    return 0

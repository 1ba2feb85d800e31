"""CLI commands fit and compare."""

from __future__ import annotations

import argparse
import sys

from ddtree_bayes.cli.output import counted, emit_json, fmt_value, render_table


def cmd_fit(args: argparse.Namespace) -> int:
    if args.compile_only:
        return _compile_only(args)
    from ddtree_bayes.engine import inference

    with inference.without_dask():   # (every array a fit makes is numpy: ~0.4 s of imports)
        return _fit(args)


def _fit(args: argparse.Namespace) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.engine import fitted_rows as M
    from ddtree_bayes.engine import store

    result = api.fit(args.data, args.priors, seed=args.seed, chains=args.chains,
                     draws=args.draws, tune=args.tune, target_accept=args.target_accept,
                     backend=args.backend, hardware=args.hardware_file,
                     progress=not args.quiet, moe_form=args.moe_form,
                     step_form=args.step_form, remedies=not args.no_remedy)
    import time

    t0 = time.perf_counter()
    from ddtree_bayes.core import acceptance_latent as AL

    if not args.quiet:
        print("[fit] saved; checking the posterior against the measurements", file=sys.stderr,
              flush=True)
    # (diagnosed before it was saved; its measurements read by this process a moment ago)
    draws = store.load_fit(result.path, rederive=False, measurements=result.measurements,
                           priors=result.priors)
    ppc = M.check_measurements(draws, seed=args.seed)
    result.timings["check_s"] = time.perf_counter() - t0   # reading back + the PPC
    inferred = AL.summarise(draws.meta, draws.variables)
    if args.format == "json":
        emit_json({"fit_id": result.fit_id, "path": str(result.path),
                   "converged": result.converged, "failures": result.failures,
                   "divergences": result.divergences, "remedies": result.remedies,
                   "timings": result.timings,
                   "diagnostics": result.diagnostics, "posterior_predictive": ppc,
                   "inferred_acceptance": inferred, "warnings": result.warnings})
    else:
        print(parameter_table(result.diagnostics, draws.meta))
        print(f"\ndivergent transitions: {result.divergences}")
        rem = result.remedies
        if rem.get("outcome") == "remedied":
            last = rem["attempts"][-1]
            print(f"remedy: {len(rem['attempts']) - 1} extra attempt(s); remedy {rem['remedy']}/3 "
                  f"passed ({last['change']}; tune {last['settings']['tune']}, draws "
                  f"{last['settings']['draws']}, target acceptance "
                  f"{last['settings']['target_accept']:g})")
        _print_ppc(ppc)
        if inferred:
            print("\n" + inferred_table(inferred))
        t = result.timings
        print(f"\nfit {result.fit_id}: {'converged' if result.converged else 'NOT CONVERGED'}"
              f" ({t.get('total_s', 0):.1f} s; sampling {t.get('sample_s', 0):.1f} s)")
        print(f"saved {result.path}")
    result.raise_if_unconverged()
    return 0


def parameter_table(diagnostics: list[dict], meta: dict) -> str:
    """fit's parameter table: one line per diagnosed parameter, but those that price nothing
    for a dense target (engine/structure.py ``dense_unread``: its distinct-expert exponent), with
    a note line saying what ``moe_share`` is for it and what was left out (the JSON's
    ``diagnostics`` keep every one: the gates read them all)."""
    from ddtree_bayes.core.data import listed
    from ddtree_bayes.engine.structure import dense_unread

    dense, unread = dense_unread(meta)
    headers = ["parameter", "", "mean", "sd", "r_hat", "ess_bulk", "ess_tail", "mcse"]
    body = [[d["parameter"], "", f"{d['mean']:.4g}", f"{d['sd']:.3g}", f"{d['rhat']:.3f}",
             f"{d['ess_bulk']:.0f}", f"{d['ess_tail']:.0f}", f"{d['mcse_mean']:.2g}"]
            for d in diagnostics if d["parameter"] not in unread]
    table = render_table(headers, body)
    if not dense:
        return table
    one = len(dense) == 1
    left = sorted({d["parameter"].split("[")[0] for d in diagnostics
                   if d["parameter"] in unread})
    said = listed(left) if left else ""
    whose = "its" if one else "each one's"
    return table + (
        f"\nnote: {', '.join(dense)} {'is' if one else 'are'} dense (no experts): moe_share is "
        f"the share of {whose} M = 1 step that reads the "
        "weights, the part the verify's compute overtakes past the knee"
        + (f"; {said} (the distinct experts M tokens read) price nothing for "
           f"{'it' if one else 'them'} and {'are' if len(left) > 1 else 'is'} left out "
           "(--format json lists them)" if left else ""))


def _compile_only(args: argparse.Namespace) -> int:
    """``fit --compile-only``: the model's log density into the on-disk cache, nothing else."""
    from ddtree_bayes.core.errors import DataError
    from ddtree_bayes.engine.fitting import FitInputs, compile_only

    if args.backend != "nutpie":
        raise DataError("--compile-only compiles nutpie's callbacks; --backend pymc compiles "
                        "as it samples", fix="drop --backend pymc, or drop --compile-only")
    from ddtree_bayes.core.config import DEFAULT_SEED, SamplerSettings
    from ddtree_bayes.core.errors import QueryError

    for flag, value, default in (("--chains", args.chains, SamplerSettings.chains),
                                 ("--draws", args.draws, None),
                                 ("--tune", args.tune, SamplerSettings.tune),
                                 ("--target-accept", args.target_accept,
                                  SamplerSettings.target_accept),
                                 ("--seed", args.seed, DEFAULT_SEED),
                                 ("--no-remedy", args.no_remedy, False)):
        if value != default:   # (--draws 100 was dropped without a word)
            raise QueryError(f"{flag} does not apply to fit --compile-only (nothing is sampled)",
                             fix=f"drop {flag}, or drop --compile-only to fit")
    inputs = FitInputs.read(args.data, args.priors, args.hardware_file)
    done = compile_only(inputs, moe_form=args.moe_form, step_form=args.step_form,
                        progress=not args.quiet)
    if not done["cached"]:   # one line, even under --quiet: the compile was for nothing
        print(f"ddtree-bayes: warning: the compiled model could not be kept in {done['cache']} "
              "(the cache is off or cannot be written): the next fit compiles again",
              file=sys.stderr)
    if args.format == "json":
        emit_json({"compiled": True, **done})
    elif not args.quiet and done["cached"]:
        print(f"compiled the model in {done['compile_s']:.1f} s (cache {done['cache']}); "
              "nothing sampled or saved: the next `ddtree-bayes fit` of these inputs starts "
              "from the cache")
    return 0


def _print_ppc(ppc: list[dict]) -> None:
    """One line per measurement; with repeated runs, one line per configuration."""
    from ddtree_bayes.core.data import row_config_label

    by_config: dict[int, list[dict]] = {}
    for r in ppc:
        by_config.setdefault(r["configuration"], []).append(r)
    if len(by_config) == len(ppc):
        print("\nposterior predictive check (tok/s):")
        pbody = [[f"row {r['row']}", f"{row_config_label(r)} accept="
                  + ("inferred" if r["accept_len"] is None else f"{r['accept_len']:g}"),
                  fmt_value(r["measured"], 1), fmt_value(r["median"], 1),
                  f"[{r['lo50']:.1f}, {r['hi50']:.1f}]", f"[{r['lo90']:.1f}, {r['hi90']:.1f}]",
                  f"{r['percentile']:.2f}"] for r in ppc]
        print(render_table(["row", "configuration", "measured", "median", "50% interval",
                            "90% interval", "pctile"], pbody))
        return
    import statistics

    print(f"\nposterior predictive check (tok/s), {counted(len(ppc), 'row')} in "
          f"{counted(len(by_config), 'configuration')} (repeated runs): per configuration, the "
          "medians over its rows and "
          "the share of its rows inside their own 50% / 90% predictive intervals:")
    body = []
    for first, rs in by_config.items():
        r = rs[0]
        inside = {p: sum(x[f"lo{p}"] <= x["measured"] <= x[f"hi{p}"] for x in rs) / len(rs)
                  for p in (50, 90)}
        body.append([f"row {first}", row_config_label(r), str(len(rs)),
                     fmt_value(statistics.median(x["measured"] for x in rs), 1),
                     fmt_value(statistics.median(x["median"] for x in rs), 1),
                     f"{inside[50]:.0%}", f"{inside[90]:.0%}",
                     f"{statistics.median(x['percentile'] for x in rs):.2f}"])
    print(render_table(["first row", "configuration", "rows", "measured", "median",
                        "in 50%", "in 90%", "pctile"], body))


def inferred_table(inferred: list[dict]) -> str:
    """The fit's inferred acceptance groups (rows with a blank accept_len), for people."""
    body = [[g["group"], ", ".join(map(str, g["rows"])), f"{g['median']:.2f}",
             f"{g['lo']:.2f}-{g['hi']:.2f}",
             f"{g['prior_median']:.2f} ({g['prior_lo']:.2f}-{g['prior_hi']:.2f})", g["prior_from"]]
            for g in inferred]
    return ("inferred acceptance (tokens per step; rows with a blank accept_len):\n"
            + render_table(["group", "rows", "median", "90% interval", "prior median (90%)",
                            "prior"], body))


# ---------------------------------------------------------------- compare
def cmd_compare(args: argparse.Namespace) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.engine import compare

    if args.fits:
        fits = [api.load(f.strip()) for f in args.fits.split(",")]   # (A.fit_ids: none empty)
    else:
        fits = compare.latest_per_form(api.load(), flag="compare")
    res = compare.compare_fits(fits, seed=args.seed, method=args.weights)
    if args.format == "json":
        emit_json(res)
        return 0
    # each fit's threshold, min(1 - 1/log10(S), 0.7), as arviz-stats applies it (0.7 from
    # S = 2154 draws on): one column head when the fits share it, else each row's own
    limits = {f"{round(r['pareto_k_threshold'], 2):g}" for r in res["rows"]}
    one = next(iter(limits)) if len(limits) == 1 else None
    print(render_table(["model", "", "rank", "elpd_loo", "se", "elpd_diff", "dse", "p_loo",
                        f"weight ({res['method']})", f"Pareto k > {one or 'limit'}"],
                       [[r["model"], "", str(r["rank"]), f"{r['elpd_loo']:.2f}", f"{r['se']:.2f}",
                         f"{r['elpd_diff']:.2f}", f"{r['dse']:.2f}", f"{r['p_loo']:.2f}",
                         f"{r['weight']:.2f}", str(r["pareto_k_above_threshold"]) + (
                             "" if one else f" (> {round(r['pareto_k_threshold'], 2):g})")]
                        for r in res["rows"]]))
    for note in res["notes"]:
        print(f"note: {note}")
    limit = ("0.7" if one == "0.7" else
             f"{one or 'its limit'} (min(1 - 1/log10(S), 0.7) for a fit's S posterior draws)")
    print(f"PSIS-LOO on few points: where Pareto k > {limit} the estimate is unreliable; "
          "`ddtree-bayes validate` gives exact leave-one-out refits.")
    return 0

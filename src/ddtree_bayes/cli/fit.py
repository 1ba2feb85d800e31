"""CLI commands fit and compare."""

from __future__ import annotations

import argparse

from ddtree_bayes.cli.output import _fmt, emit_json, render_table
from ddtree_bayes.cli.predict import _latest_per_form


def cmd_fit(args: argparse.Namespace) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine import store

    result = api.fit(args.data, args.priors, seed=args.seed, chains=args.chains,
                     draws=args.draws, tune=args.tune, target_accept=args.target_accept,
                     backend=args.backend, hardware=args.hardware_file,
                     progress=not args.quiet, moe_form=args.moe_form,
                     remedies=not args.no_remedy)
    draws = store.load_draws(result.path)
    ppc = P.check_measurements(draws, seed=args.seed)
    if args.format == "json":
        emit_json({"fit_id": result.fit_id, "path": str(result.path),
                   "converged": result.converged, "failures": result.failures,
                   "divergences": result.divergences, "remedies": result.remedies,
                   "timings": result.timings,
                   "diagnostics": result.diagnostics, "posterior_predictive": ppc})
    else:
        headers = ["parameter", "", "mean", "sd", "r_hat", "ess_bulk", "ess_tail", "mcse"]
        body = [[d["parameter"], "", f"{d['mean']:.4g}", f"{d['sd']:.3g}", f"{d['rhat']:.3f}",
                 f"{d['ess_bulk']:.0f}", f"{d['ess_tail']:.0f}", f"{d['mcse_mean']:.2g}"]
                for d in result.diagnostics]
        print(render_table(headers, body))
        print(f"\ndivergent transitions: {result.divergences}")
        rem = result.remedies
        if rem.get("outcome") == "remedied":
            last = rem["attempts"][-1]
            print(f"remedy: {len(rem['attempts']) - 1} extra attempt(s); remedy {rem['remedy']}/3 "
                  f"passed ({last['change']}; tune {last['settings']['tune']}, draws "
                  f"{last['settings']['draws']}, target acceptance "
                  f"{last['settings']['target_accept']:g})")
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


# ---------------------------------------------------------------- compare
def cmd_compare(args: argparse.Namespace) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.engine import compare

    if args.fits:
        fits = [api.load(f.strip()) for f in args.fits.split(",") if f.strip()]
    else:
        fits = _latest_per_form(api.load(), flag="compare")
    res = compare.compare_fits(fits, seed=args.seed, method=args.weights)
    if args.format == "json":
        emit_json(res)
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

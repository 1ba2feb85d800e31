"""CLI commands that turn the posterior into decisions: optimize, next (issue 6).

Same conventions as ``cli``: one-line errors through the named exceptions (exit 2 bad
input, 3 no usable fit, 4 stale fit with --strict, 5 unconverged fit), ``--format
table|json``. The library side is ``decisions``.
"""

from __future__ import annotations

import argparse
import sys

from ddtree_bayes.cli.output import (
    PROG,
    aligned_table,
    emit_json,
    percent_text,
    print_warnings,
    tok_text,
)


def _load(args: argparse.Namespace, warned: list[str]):
    """The fit asked for; what it warns of printed and appended to ``warned``."""
    from ddtree_bayes import api
    from ddtree_bayes.engine import predictive as P

    draws = api.load(args.fit)
    print_warnings(P.check_fit(draws, allow_unconverged=args.allow_unconverged,
                               strict=args.strict, ignore_priors_sections=P.NOT_FITTED_PRIORS,
                               drafters=False),   # (those of the question: once it is known)
                   warned)
    return draws


# ---------------------------------------------------------------- optimize
#: What carries a prediction beyond the measured M, per model form.
_VERIFY_CARRIER = {"power": "the MoE power law", "linear": "the linear MoE slope",
                   "roofline": "the roofline verify cost (distinct experts, compute knee)"}
_SPEC_CARRIER = {"fraction": "the overhead fraction",
                 "structured": "the tree/drafter costs per node and pass (with the "
                               "distance-scaled discrepancy)"}


def _carriers(model: dict, asked: str | None = None) -> str:
    """'the roofline verify cost (...) and the tree/drafter costs ...' for a fit's forms;
    ``asked``: the question's model, whose card, if dense, has no experts to name (a
    walkthrough on Gemma 3 27B read "distinct experts").

    >>> _carriers({"moe_form": "roofline", "step_form": "structured"})[:56]
    'the roofline verify cost (distinct experts, compute knee'
    """
    from ddtree_bayes.core.model_cards import stored_card

    verify = _VERIFY_CARRIER.get(model.get("moe_form", "power"), "the verify cost form")
    card = stored_card(model, asked)
    if card is not None and card.experts is None:
        verify = verify.replace("distinct experts, compute knee", "compute knee")
    return f"{verify} and {_SPEC_CARRIER.get(model.get('step_form', 'fraction'), 'SPEC')}"


def cmd_optimize(args: argparse.Namespace) -> int:
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.scenario import check_drafters
    from ddtree_bayes.workflows import decisions as D
    from ddtree_bayes.workflows.decisions.optimize import curve_model_warning, extrapolated_flags

    budgets = D.parse_budgets(args.budgets)
    warned: list[str] = []   # (every warning line printed: the JSON's warnings)
    draws = _load(args, warned)
    curve, differs = D.acceptance_curve_for(draws, args.priors)
    from ddtree_bayes.engine.question import Flags, check_names

    # (--strict: a name never measured nor declared is an error, as in predict and next)
    pending = [*differs, *check_names(draws, Flags.of(args), strict=args.strict),
               *P.wide_interval_warnings(args.prob, draws.n_draws, draws.effective_draws)]
    out = D.optimize(draws, curve, hardware=args.hardware, gpus=args.gpus, engine=args.engine,
                     method=args.method, block=args.block, budgets=budgets,
                     context_tokens=args.context, acceptance_file=args.acceptance_file,
                     prob=args.prob, seed=args.seed, model=args.model,
                     concurrency=args.concurrency, kv_cache=args.kv_cache,
                     new_deployment=bool(args.new_deployment))
    # (the question's warnings once it is answered: an error in it or in --acceptance-file is
    # one line, not a warning of a question that is then refused)
    print_warnings(pending, warned)
    print_warnings(check_drafters(draws, [(out["scenario"].get("model"),
                                           out["scenario"]["method"])],
                                  drafter=out["scenario"].get("drafter"),
                                  named_by=f"the rows of {args.acceptance_file}",
                                  strict=args.strict),
                   warned)
    if (other := curve_model_warning(draws, curve, out, args.acceptance_file)) is not None:
        print_warnings([other], warned)
    asked = out["default_scenario"]
    if asked is not None:   # (the curve fixes the method and block)
        print(f"{PROG} optimize: {asked['why']}; asking its most-measured system: "
              f"{out['scenario']['hardware']} x{out['scenario']['gpus']} in "
              f"{out['scenario']['engine']} (pass --hardware/--engine to ask another)",
              file=sys.stderr)
    print_warnings(out["warnings"], warned)
    if args.format == "json":
        emit_json({**out, "warnings": warned})
        return 0
    from ddtree_bayes.core.data import plain_text

    sc, c, pct = out["scenario"], out["curve"], P.pct_label(args.prob)
    meta = draws.meta
    print(f"{PROG} optimize: fit {out['fit_id']} ({out['draws']} draws"
          f"{'' if meta['converged'] else ', UNCONVERGED'}), seed {out['seed']}")
    print((f"{sc['model']}, " if "model" in sc else "")
          + f"{sc['hardware']} x{sc['gpus']}, {sc['engine']}, {sc['method']}, block {sc['block']}, "
          f"context {plain_text(float(sc['context_tokens']))}; verify tokens M = budget + 1"
          + (f"; concurrency {sc['concurrency']} (tok/s per user)"
             if sc.get("concurrency", 1) != 1 else "")
          + (f"; KV cache {sc['kv_cache']}" if "kv_cache" in sc else "")
          + (f"; drafter {sc['drafter']} (the acceptance file's rows name it)"
             if "drafter" in sc else "")
          + ("; new deployment (--new-deployment)" if sc.get("new_deployment") else ""))
    print(f"acceptance curve: {c['source']}")
    print(f"  accept(B) = {c['formula']}")
    for part in c["priors"].split(", gain"):
        print(f"  {part if part.startswith('accept_ref') else 'gain' + part}")
    if c["ess"] is not None:
        print(f"  posterior: accept_ref {_m90(c['accept_ref'], 2)}, gain {_m90(c['gain'], 2)}, "
              f"decay {_m90(c['decay'], 2)}; decay-weight ESS {c['ess']:.0f}")
    headers = ["budget", "M", "accept", "step ms", "tok/s median", f"{pct}% interval",
               "E[tok/s]", "P(best)", "E[regret]", "extrapolated"]
    body = []
    for r in out["rows"]:
        body.append([str(r["budget"]), str(r["verify_tokens"]),
                     f"{r['accept']:.1f} ({r['accept_lo']:.1f}-{r['accept_hi']:.1f})",
                     f"{r['step_ms']:.1f}", tok_text(r["median"]),
                     f"{tok_text(r[f'lo{pct}'])}-{tok_text(r[f'hi{pct}'])}",
                     tok_text(r["tok_s_mean"]),
                     f"{r['p_best']:.2f}", f"{r['regret']:.1f}", extrapolated_flags(r) or "-"])
    print(aligned_table(headers, body, left=1, text_last=True))
    best = next(r for r in out["rows"] if r["budget"] == out["recommended"])
    if len(out["rows"]) == 1:   # (P(best) 1 and no regret say only that)
        print(f"recommended budget: {out['recommended']} (the only budget asked: nothing to "
              f"compare; expected {tok_text(best['tok_s_mean'])} tok/s)")
    else:
        print(f"recommended budget: {out['recommended']} (highest expected tok/s, "
              f"{tok_text(best['tok_s_mean'])}; P(best) {best['p_best']:.2f}; "
              f"expected regret {best['regret']:.1f} tok/s)")
    if best["accept_extrapolated"]:
        anchored = [r for r in out["rows"] if not r["accept_extrapolated"]]
        alt = max(anchored, key=lambda r: r["tok_s_mean"]) if anchored else None
        print(f"caution: the acceptance of budget {best['budget']} is extrapolated from the "
              "curve" + (f"; the best budget where the curve is anchored is {alt['budget']} "
                         f"(expected {tok_text(alt['tok_s_mean'])} tok/s)" if alt else "") + ".")
    print("tok/s is the expected throughput of each posterior draw (no run-to-run noise), "
          "acceptance from the curve drawn alongside; accept and step ms are medians.")
    m = out["max_measured_verify_tokens"]
    extrap = [r for r in out["rows"] if r["extrapolated"]]
    if extrap:
        ref = m["transferred_from"]
        where = (f"the most tokens verified per step (C x M) measured on {sc['system']} is "
                 f"{m['system']} ({m['any_system']} on any system)" if m["system"] is not None
                 else f"{sc['system']} has no measurements; its step is transferred from "
                      f"{ref['system']}, where the most tokens verified per step (C x M) "
                      f"measured is {ref['tokens']} ({m['any_system']} on any system)"
                 if ref is not None
                 else f"{sc['system']} has no measurements; its step is from the pair "
                      f"roofline, learned from {roof['pairs']} measured "
                      f"pair{'s' * (roof['pairs'] != 1)}, where the most tokens verified per "
                      f"step (C x M) measured is {roof['tokens']}, on {roof['on']} "
                      f"({m['any_system']} on any system)"
                 if (roof := m["pair_roofline"]) is not None
                 else f"{sc['system']} has no measurements and the most tokens verified per "
                      f"step (C x M) measured on any system is {m['any_system']}")
        print(f"step: extrapolated beyond the measured C x M for budgets "
              f"{', '.join(str(r['budget']) for r in extrap)}: {where}; "
              f"{_carriers(meta.get('model', {}), sc.get('model'))} carry the step time there.")
    lo_b, hi_b = c["anchored_budgets"]
    acc_x = [r for r in out["rows"] if r["accept_extrapolated"]]
    if acc_x:
        span = f"{lo_b:g}-{hi_b:g}" if hi_b is not None else f"{lo_b:g} and up"
        print(f"accept: the curve is anchored at budgets {span}; it is extrapolated to budget"
              f"{'s' if len(acc_x) > 1 else ''} {', '.join(str(r['budget']) for r in acc_x)}.")
    print(f"  {sc['engine']}: {out['overhead_from']}")
    return 0


def reduction_cell(reduction: float, relative: float) -> str:
    """next's reduction cell: tok/s (:func:`_n`) and the share of the width now, as
    :func:`~ddtree_bayes.core.data.percent_text` prints a share (diff's and update's changes
    too): a whole percent, or one significant digit where that rounds to 0 (-1.0 of 446 read
    "-1.0 (-0%)").

    >>> reduction_cell(120.4, 0.27), reduction_cell(-1.0, -1.0 / 446)
    ('120 (27%)', '-1.0 (-0.2%)')
    """
    return f"{_n(reduction)} ({percent_text(relative)})"


def _n(x: float) -> str:
    """tok/s with one decimal below 100 (narrow intervals), whole numbers above, and below 10
    predict's cells (:func:`~ddtree_bayes.core.data.tok_text`, two significant digits: 0.008
    read "0.0"; one formatter, so 1.04 reads "1.0" in both).

    >>> _n(607.4), _n(42.25), _n(1.04), _n(0.0317), _n(0.0)
    ('607', '42.2', '1.0', '0.032', '0')
    """
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.1f}" if abs(x) >= 9.95 else tok_text(x)


def _m90(v: list[float], digits: int) -> str:
    return f"{v[0]:.{digits}f} ({v[1]:.{digits}f}-{v[2]:.{digits}f})"


# ---------------------------------------------------------------- next
def _min_ess(given: float | None, n_draws: int) -> float:
    """--min-ess, at most the fit's draws: a reweighted posterior's effective sample size
    cannot exceed them, so --min-ess 5000 on 4000 draws flagged every candidate "unreliable"
    (exit 0). Not given: the default (which a fit of fewer draws than it flags throughout,
    rightly: too few draws to reweight)."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.workflows.decisions.common import MIN_ESS

    if given is None:
        return MIN_ESS
    if given > n_draws:
        raise QueryError(f"--min-ess {given:g} is above the fit's {n_draws} draws: a "
                         "reweighted posterior's effective sample size is at most its draws, "
                         "so every candidate would be flagged",
                         fix=f"give --min-ess at most {n_draws}")
    return given


def cmd_next(args: argparse.Namespace) -> int:
    from ddtree_bayes.cli.args import check_query
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.scenario import check_drafters
    from ddtree_bayes.workflows import decisions as D
    from ddtree_bayes.workflows.decisions.next_measurement import drafter_cell

    check_query(args.query)
    warned: list[str] = []   # (every warning line printed: the JSON's warnings)
    draws = _load(args, warned)
    # (refused before the query's warnings: a flag's error is one line)
    min_ess = _min_ess(args.min_ess, draws.n_draws)
    query = D.parse_query(draws, args.query, strict=args.strict)   # resolved as predict's
    # (the query's warnings are printed once it is answered: an error in --candidates is one
    # line, not warnings of a query that is then refused)
    pending = [*check_drafters(draws, [(query.scenario.model, query.scenario.method)],
                               drafter=(None if query.scenario.drafter is None
                                        else query.scenario.drafter.drafter),
                               strict=args.strict),
               *query.warnings,
               *P.wide_interval_warnings(args.prob, draws.n_draws, draws.effective_draws)]
    left: list = []   # (the file's candidates nobody can measure)
    candidates = (D.read_candidates(draws, args.candidates, query, strict=args.strict,
                                    warnings=pending, left_out=left)
                  if args.candidates else None)
    out = D.next_measurements(draws, query, candidates, k=args.k, prob=args.prob,
                              seed=args.seed, min_ess=min_ess,
                              left_out=left)
    print_warnings(pending, warned)
    if query.note is not None:
        print(f"{PROG} next: --query: {query.note}", file=sys.stderr)
    from ddtree_bayes.engine.structure import reweight_understates

    if (understated := reweight_understates(draws, query.scenario)) is not None:
        print_warnings([f"--query: {understated}"], warned)
    from ddtree_bayes.engine.ceiling import routing_warnings

    # faster than reading the experts its tokens touch: predict's line, word for word
    print_warnings(routing_warnings([out["query"]]), warned)
    if args.format == "json":
        # acceptance: a number (given, or the mean measured: the table's "4.4 measured (1
        # row)" was null here, its number only in the label), or null and what it is drawn
        # from; accept_kind as predict's
        q, source = dict(out["query"]), query.source
        assert source is not None   # (next_measurements refuses a query without one)
        number = source.value if q.get("accept_fixed") else None
        q["accept"], q["accept_distribution"] = ((float(number), None) if number is not None
                                                 else (None, str(q["accept"])))
        q["accept_kind"] = source.kind
        emit_json({**out, "query": q, "query_itself": query_itself(out), "warnings": warned})
        return 0
    q, pct = out["query"], P.pct_label(args.prob)
    print(f"{PROG} next: fit {out['fit_id']} ({out['draws']} draws"
          f"{'' if draws.meta['converged'] else ', UNCONVERGED'}), seed {out['seed']}, "
          f"{out['k']} simulated results per candidate")
    print(f"query: {q['describe']}, accept {q['accept']}"
          + (f", KV cache {q['kv_cache']}" if "kv_cache" in q else ""))
    per = " per user" if q.get("concurrency", 1) != 1 else ""   # (a C > 1 query: one stream's)
    print(f"now: median {_n(q['median'])} tok/s{per}, {pct}% interval {_n(q['lo'])}-"
          f"{_n(q['hi'])} (width {_n(q['width'])})")
    from ddtree_bayes.cli.predict import overhead_notes

    for note in overhead_notes([q]):   # how the answer was found (transferred, a prior), as predict
        print(f"  {note}")
    headers = ["rank", "candidate", "drafter", "why", f"E[{pct}% width]", "reduction", "ESS",
               "note"]
    body = []
    for i, r in enumerate(out["rows"], start=1):
        body.append([str(i), r["candidate"], drafter_cell(r), r["why"],
                     f"{_n(r['expected_width'])} +- {_n(r['width_se'])}",
                     reduction_cell(r["reduction"], r["reduction_rel"]),
                     f"{r['ess_median']:.0f}", next_note(r, out["min_ess"])])
    print(aligned_table(headers, body, left=4, text_last=True))
    reasons: dict[str, list[str]] = {}   # candidates nobody can measure, by why
    for r in out["left_out"]:
        reasons.setdefault(r["reason"], []).append(r["candidate"])
    for reason, left in reasons.items():
        print(f"left out: {'; '.join(left)}: {reason}.")
    if not q["accept_fixed"]:
        # (a run of the query's own configuration reports its acceptance, which predict takes
        # where the query's acceptance is not given: its prior or inferred posterior)
        replaced = query.source is not None and query.source.kind in ("prior", "posterior")
        print(f"acceptance {q['accept']} is not learned from tok/s measurements: the part of "
              "the width it causes stays, " + (
                  "unless a run of the query's configuration on its system reports its "
                  "acceptance, which predict then takes (next measures such a candidate at the "
                  "query's acceptance draws)." if replaced else "whatever is measured."))
    print(f"E[width]: expected width of the query's {pct}% interval (posterior predictive tok/s) "
          "after the measurement, averaged over simulated results (+- its Monte Carlo standard "
          "error); reduction is versus now; within MC error: less than 2 of those standard "
          "errors, no effect this many simulated results can tell (more with --k).")
    print("ESS: median effective sample size of the reweighted posterior draws; a candidate "
          f"below {out['min_ess']:g} is too informative for reweighting to resolve: measure it, "
          "`ddtree-bayes add` the row and refit to see its effect.")
    if any(r["refit_needed"] for r in out["rows"]):
        print(f"{REFIT_NOTE}: `update` would refit for the row (it brings what the fit never "
              "measured: a system, an overhead group, a concurrency; or the fit's draws cannot "
              "be reweighted: rows removed since them, a validation fold); E[width] reweights "
              "today's draws, which cannot learn what the refit would, so it can be far wider "
              "than after the refit.")
    if (itself := query_itself_note(out)) is not None:
        print(f"{itself}.")
    return 0


#: The configuration of a ``next`` row and of its query (a query at one stream names no C).
_CONFIGURATION = ("model", "hardware", "gpus", "engine", "method", "block", "budget",
                  "verify_tokens", "context_tokens", "concurrency")


def query_itself(out: dict) -> dict | None:
    """What ``next`` says when the candidate at the query's own configuration is one
    ``update`` would refit for and ranks below another: its E[width] reweights today's draws,
    where the refit anchors the query to its new row (on the bundled fit the query at C = 4
    ranked fourth, E[90% width] 290, while add + update + predict at its median gave a width
    of 64). ``{"rank", "candidates", "note"}`` (the JSON's ``query_itself``; the table prints
    the note); None when no row is the query's, or it ranks first, or needs no refit. A
    ``--new-deployment`` query, never anchored to its group's rows, always has a note
    (:func:`new_deployment_itself`; ``rank`` None when its configuration is not ranked)."""
    q = out["query"]

    def config(row: dict) -> tuple:
        return tuple(row.get(k, 1 if k == "concurrency" else None) for k in _CONFIGURATION)

    rank = next((i for i, r in enumerate(out["rows"], start=1)
                 if config(r) == config(q)), None)
    of = len(out["rows"])
    if "carried to another deployment of it" in q.get("overhead_from", ""):   # (--new-deployment)
        return {"rank": rank, "candidates": of, "note": new_deployment_itself(q, rank, of)}
    if rank is None or rank == 1 or not out["rows"][rank - 1]["refit_needed"]:
        return None
    return {"rank": rank, "candidates": of, "note": (
        f"the query itself ranks {rank} of {of} by E[width]: `update` would "
        "refit for it, and the refit anchors the query's answer to its own new row (as "
        "predict anchors any measured configuration), which E[width], reweighting today's "
        "draws, cannot show: measured, it may narrow the query more than the candidates "
        "above it")}


def new_deployment_itself(q: dict, rank: int | None, of: int) -> str:
    """:func:`query_itself`'s note for a ``--new-deployment`` query (JSON ``query``
    ``q``): the candidate at its configuration (``rank`` of ``of``; None: not ranked) is a row
    of the deployment the fit measured, so its E[width] keeps the prior-driven scatter between
    deployments that the query is answered with; a row of the query's own deployment, under a
    GPU name of its own and refitted, anchors the query instead (predict anchors any measured
    configuration), which E[width] cannot show.

    >>> print(new_deployment_itself({"hardware": "b300"}, 1, 8))
    --new-deployment: the query's own deployment is no candidate; its configuration (ranked 1 \
of 8) is measured on the deployment the fit measured, which narrows the group's costs, not the \
prior-driven scatter between deployments the query keeps. A run of your deployment anchors the \
query instead, which E[width] cannot show: `ddtree-bayes hardware add NAME --like b300 --source \
TEXT`, add the row under NAME, refit, and ask about NAME without --new-deployment
    """
    ranked = "not ranked" if rank is None else f"ranked {rank} of {of}"
    return ("--new-deployment: the query's own deployment is no candidate; its configuration "
            f"({ranked}) is measured on the deployment the fit measured, which narrows the "
            "group's costs, not the prior-driven scatter between deployments the query keeps. "
            "A run of your deployment anchors the query instead, which E[width] cannot show: "
            f"`ddtree-bayes hardware add NAME --like {q['hardware']} --source TEXT`, add the row "
            "under NAME, "
            "refit, and ask about NAME without --new-deployment")


def query_itself_note(out: dict) -> str | None:
    """The line of :func:`query_itself` (None when it says nothing)."""
    itself = query_itself(out)
    return None if itself is None else itself["note"]


#: The table's note on a candidate ``update`` would refit for (next's JSON ``refit_needed``).
REFIT_NOTE = "update would refit: E[width] likely too wide"


def next_note(row: dict, min_ess: float) -> str:
    """The note column of one ``next`` candidate (its JSON row): too few effective draws
    first (then the refit note alone beside it), else the overhead group it shares with the
    query, an effect within Monte Carlo error and the refit note, or "-".

    >>> r = {"shares_query_overhead": True, "within_mc_error": False, "refit_needed": False,
    ...      "unreliable": False}
    >>> next_note(r, 100), next_note({**r, "refit_needed": True}, 100)
    ('same overhead group', 'same overhead group; update would refit: E[width] likely too wide')
    >>> next_note({**r, "unreliable": True}, 100)
    'unreliable: ESS < 100, refit with it instead'
    """
    if row["unreliable"]:
        return f"unreliable: ESS < {min_ess:g}, refit with it instead" + (
            f"; {REFIT_NOTE}" if row["refit_needed"] else "")
    return "; ".join(n for n, on in (("same overhead group", row["shares_query_overhead"]),
                                      ("within MC error", row["within_mc_error"]),
                                      (REFIT_NOTE, row["refit_needed"])) if on) or "-"


# ---------------------------------------------------------------- parser
def _common(p: argparse.ArgumentParser) -> None:
    from ddtree_bayes.cli import args as A
    from ddtree_bayes.cli.args import add_seed_and_format

    p.add_argument("--prob", type=A.PROB, default=0.9,
                   help="probability of the interval (default: %(default)s)")
    p.add_argument("--fit", type=A.fit_id, help="fit id (default: the latest fit)")

    add_seed_and_format(p, formats=("table", "json"))
    A.add_fit_checks(p)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the main parser."""
    from ddtree_bayes.cli import args as A
    from ddtree_bayes.core.query_flags import (
        CONTEXT_HELP,
        MODEL_HELP,
        add_kv_cache_argument,
        add_new_deployment_argument,
    )

    o = sub.add_parser(
        "optimize", help="the tree budget with the highest expected tok/s",
        description="Compare DDTree budgets B: per posterior draw, tok/s(B) = accept(B) x 1000 / "
                    "step_ms(M = B + 1), with accept(B) from the [acceptance_curve] priors "
                    "(acceptance at a reference budget, gain of the first doubling, decay of "
                    "later gains; saturating, capped at the most tokens a step can emit, as "
                    "predict --accept is: the block for DDTree, whose block starts with the "
                    "anchor) drawn alongside the step-time "
                    "draws. Prints each budget's median and interval, P(best) and expected regret "
                    "E[max tok/s - tok/s(B)], and the recommended budget (highest expected tok/s); "
                    "flags budgets whose M exceeds the largest measured.",
        epilog="Example: ddtree-bayes optimize --hardware b300 --engine native "
               "--acceptance-file data/acceptance_reference.csv")
    o.add_argument("--model", type=A.model_name, help=MODEL_HELP)
    o.add_argument("--hardware", type=A.HARDWARE,
                   help="GPU name from data/hardware.csv (default: b300; for a fit that never "
                        "measured b300, its most-measured system)")
    o.add_argument("--gpus", type=A.GPUS, help="GPU count (default: the measured count)")
    o.add_argument("--engine", type=A.name("give one engine, e.g. --engine native"),
                   help="one engine, e.g. sglang or native (default: sglang; for a fit that "
                        "never measured b300, the engine of its most-measured system)")
    o.add_argument("--method", type=A.METHOD,
                   help="tree method (default: the acceptance curve's, ddtree)")
    o.add_argument("--block", type=A.BLOCK,
                   help="drafter block size; the curve's, unless --acceptance-file gives rows "
                        "of this block (default: the curve's, 16)")
    o.add_argument("--budgets", type=A.budgets,
                   help="comma-separated budgets (default: 8,16,32,...,1024)")
    o.add_argument("--concurrency", type=A.whole(1, A.MAX_CONCURRENCY, "give the stream count, e.g. "
                                                 "--concurrency 8"), default=1,
                   help="streams decoded together (default: %(default)s): tok/s per user at "
                        "that concurrency; the best budget shrinks as C grows")
    o.add_argument("--context", type=A.context,
                   help=f"{CONTEXT_HELP}, e.g. 32768 or 32k (default: the priors' "
                        "default_context_tokens, 0 as bundled)")
    add_kv_cache_argument(o, capped="each budget's tok/s and autoregressive decoding's, "
                                    "which optimize compares")
    add_new_deployment_argument(o)
    o.add_argument("--acceptance-file", metavar="FILE.csv",
                   help="update the curve from measured acceptance (columns of "
                        "data/acceptance_reference.csv; rows of --method and --block, one "
                        "model and drafter): conjugate normal update, see docs/model.md")
    o.add_argument("--priors", help="priors TOML holding [acceptance_curve] (default: the "
                                    "fit's priors file, else models/priors.toml, else "
                                    "bundled)")
    _common(o)
    o.set_defaults(func=cmd_optimize)

    n = sub.add_parser(
        "next", help="rank candidate measurements by how much they would narrow a prediction",
        description="Preposterior analysis: for each candidate measurement, simulate K plausible "
                    "results from the current posterior predictive, reweight the posterior draws "
                    "by each result's likelihood, and report the expected width of the query's "
                    "interval afterwards, the reduction versus now and the effective sample size "
                    "of the weights (below --min-ess: unreliable, refit instead). Candidates "
                    "default to a list built from the fit's measured systems and engines, leaving out "
                    "(and naming) those nobody can make: an engine that is only a relation "
                    "(native) and a method without a drafter for the model.",
        epilog='Example: ddtree-bayes next --query "--hardware b300 --engine native --method '
               'ddtree --block 16 --budget 32 --accept 14"')
    n.add_argument("--query", default="",
                   help="predict flags for ONE engine: --model --hardware --gpus --engine "
                        "--method --block --budget --verify-tokens --context --accept (a value, or lo:hi "
                        "for Uniform(lo, hi); default: as predict's --accept says) --concurrency "
                        "--kv-cache (the deployment's KV-cache dtype, as predict's: the query's "
                        "interval now is capped at reading the weights and the streams' caches "
                        "at it, and the memory checks, the query's and the default candidates', "
                        "count the cache at it) --drafter (a drafter card, as predict's; the "
                        "candidates draft with the model's default drafter). Default: the "
                        "default scenario in sglang (for a fit that never measured b300: its "
                        "most-measured system, in its engine); flags not given come from it "
                        "as they do for predict (--hardware h100 --gpus 8: its method, block "
                        "and budget)")
    n.add_argument("--candidates", metavar="FILE.csv",
                   help="candidate measurements, columns hardware,gpus,engine,method,block,"
                        "budget,accept_len,context_tokens and optionally model, verify_tokens, "
                        "concurrency (blank: the query's); other columns are ignored, one "
                        "spelt like an optional column is refused; a row nobody can measure is "
                        "left out, as from the default list (default: a list from the fit)")
    n.add_argument("--k", type=A.whole(2, 10_000, "use e.g. --k 32"), default=32,
                   help="simulated results per candidate (default: %(default)s)")
    n.add_argument("--min-ess", type=A.real(0, 1e9, "use e.g. --min-ess 100"),
                   help="flag candidates whose effective sample size falls below this, at most "
                        "the fit's draws (default: 100)")
    _common(n)
    n.set_defaults(func=cmd_next)

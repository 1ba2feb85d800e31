"""CLI command predict: posterior tok/s intervals (numpy and h5py only; see the predict-path
contract in pyproject.toml)."""

from __future__ import annotations

import argparse
import sys

from ddtree_bayes.cli.output import (
    PROG,
    aligned_table,
    counted,
    emit_rows,
    print_warnings,
    render_table,
    tok_text,
)
from ddtree_bayes.core.config import form_label


# ---------------------------------------------------------------- predict
def typed_rows(rows: list[dict]) -> list[dict]:
    """predict rows for machines: ``accept`` a number (given or measured) or null, with
    ``accept_distribution`` describing a range (uniform lo, hi), an inferred acceptance's
    posterior or the acceptance prior (its parameters as drawn: truncated at what a step can
    emit); the prose-only fields dropped."""
    out = []
    for row in rows:
        r = {k: v for k, v in row.items()
             if k not in ("accept_value", "accept_note", "pass_drafter_note")}
        r["accept"] = row["accept_value"]
        out.append(r)
    return out


def cmd_predict(args: argparse.Namespace) -> int:
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.ceiling import ceiling_warnings, routing_warnings

    draws = store.load(args.fit)
    warned: list[str] = []   # (what stderr says, for the JSON's warnings)
    print_warnings(P.check_fit(draws, allow_unconverged=args.allow_unconverged,
                               strict=args.strict, drafters=False,
                               ignore_priors_sections=P.NOT_FITTED_PRIORS), warned)
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.engine.scenario import check_drafters, drafter_gap_warnings
    from ddtree_bayes.engine.structure import p_text

    question = resolve(draws, Flags.of(args), strict=args.strict)
    asked = [(sc.model, sc.method) for sc in question.scenarios]
    pending = [*check_drafters(draws, asked, drafter=args.drafter, strict=args.strict),
               # (next's words: no drafter; none with --drafter, a card that serves it)
               *drafter_gap_warnings(draws, asked, drafter=args.drafter)]
    mixture = average = None
    weighed: list[str] = []
    if args.model_average:   # (weighed before the question's warnings print: its refusal,
        # e.g. one model form only, is one line; they print in the order they always did)
        from ddtree_bayes.engine import compare  # only with --model-average (PSIS-LOO weights)

        mixture = compare.model_average(draws, seed=args.seed, warnings=weighed)
        average = compare.mixture_entries(mixture)   # (the JSON's model_average)
    # (of a model average: --new-deployment's "changes nothing" said of each fit it is true of)
    pending += P.mixture_warnings(draws, question, mixture)
    print_warnings(pending, warned)
    if question.note is not None:
        print(f"{PROG} predict: {question.note}", file=sys.stderr)
    print_warnings(P.wide_interval_warnings(args.prob, draws.n_draws, draws.effective_draws),
                   warned)
    if mixture is not None:
        print(f"{PROG}: model average: " + ", ".join(
            f"{d.meta['fit_id']} ({form_label(d.meta)}) {w:.2f}" for d, w in mixture),
            file=sys.stderr)
        print_warnings(weighed, warned)
    import numpy as np

    with np.errstate(all="ignore"):   # an overflow is named below, as one line
        rows = P.predict_rows(draws, question, target=args.target, prob=args.prob,
                              seed=args.seed, mixture=mixture,
                              explain=getattr(args, "explain", False))
    P.require_finite(rows)   # never a table of nan
    print_warnings(ceiling_warnings(rows), warned)   # draws capped at the memory read
    print_warnings(routing_warnings(rows), warned)   # faster than balanced MoE routing
    meta = draws.meta
    if args.format != "table":
        emit_rows(typed_rows(rows), args.format,
                  {"fit_id": meta["fit_id"], "seed": args.seed,
                   "interval_probs": list(P.interval_probs(args.prob)),
                   "target": args.target, "draws": draws.n_draws,
                   "default_scenario": question.default_asked,
                   # (the table's crossover lines, with --concurrency)
                   **({"crossover": crossover(rows)} if question.flags.concurrency else {}),
                   **({"model_average": average} if average else {}),
                   # (the table's note on an engine left out of an AR question, too)
                   "warnings": warned + list(question.left_out)})
        return 0
    probs = P.interval_probs(args.prob)
    first = rows[0]
    from ddtree_bayes.core.data import plain_text

    sc_line = ((f"{first['model']}, " if "model" in first else "")
               + f"{first['hardware']} x{first['gpus']}, {first['method']}"
               + (f", block {first['block']}" if first["block"] is not None else "")
               + (f", budget {first['budget']}" if first["budget"] is not None else "")
               + f", verify {counted(first['verify_tokens'], 'token')}, context "
               + plain_text(float(first["context_tokens"]))   # (2097152, not 2.09715e+06)
               + (f", drafter {first['drafter']}" if "drafter" in first else "")
               + (", new deployment" if first.get("new_deployment") else ""))
    which = (f"fit {meta['fit_id']}" if average is None else "model average of fits "
             + ", ".join(f"{a['fit_id']} ({a['form']}) {a['weight']:.2f}" for a in average))
    from ddtree_bayes.core.paths import data_flag, shown

    # (a fit of another file than the default here, `fit --data FILE`: which one it answers
    # from, said once; check_fit warns only when FILE changed since)
    made_on = (f", made on {shown(meta['data']['path'])}"
               if average is None and data_flag(meta["data"]["path"]) else "")
    # (a reweighted fit's draws are a resample: what they are worth, as its warnings count)
    eff = draws.effective_draws if average is None else None
    worth = "" if eff is None else f": an importance resample worth about {eff:.0f}"
    print(f"{PROG} predict: {which} ({draws.n_draws} draws{worth}{made_on}"
          f"{'' if meta['converged'] else ', UNCONVERGED'}), seed {args.seed}")
    print(sc_line)
    streams = "concurrency" in first
    headers = ["engine", "accept"] + (["C", "per user"] if streams else ["median"])
    headers += [f"{P.pct_label(p)}% interval" for p in probs]
    headers += [f"total, {P.pct_label(probs[-1])}%"] if streams else ["original +-30%"]
    versus_ar = streams and any("p_faster_than_ar" in r for r in rows)
    if versus_ar:
        headers.append("P(> AR)")
    if args.target is not None:   # of the row's median: one stream's tok/s at C > 1
        headers.append(f"P(user>={args.target:g})" if streams else f"P(>={args.target:g})")
    body = []
    for r in rows:
        cells = [r["engine"], r["accept"]] + ([str(r["concurrency"])] if streams else [])
        cells.append(tok_text(r["median"]))
        cells += [f"{tok_text(r[f'lo{P.pct_label(p)}'])}-{tok_text(r[f'hi{P.pct_label(p)}'])}"
                  for p in probs]
        if streams:
            t, wide = r["total"], P.pct_label(probs[-1])
            # (as the per-user cells: a total below 1 tok/s printed "0 (0-0)" beside them)
            cells.append(f"{tok_text(t['median'])} ({tok_text(t[f'lo{wide}'])}-{tok_text(t[f'hi{wide}'])})")
        else:
            cells.append("-" if r["original"] is None else
                         f"{r['original']:.0f} ({r['original_lo']:.0f}-{r['original_hi']:.0f})")
        if versus_ar:
            cells.append(p_text(r["p_faster_than_ar"]) if "p_faster_than_ar" in r else "-")
        if args.target is not None:
            cells.append(f"{r['p_ge_target']:.2f}")
        body.append(cells)
    print(render_table(headers, body))
    notes = overhead_notes(rows)
    if streams:
        print("tok/s, posterior predictive (includes run-to-run noise): per user = one stream, "
              "total = the C streams together.")
        for line in crossover_lines(rows):
            print(line)
        # (only where the flag carried a group, so P(> AR) met the fit's AR step: where it
        # changes nothing, P(> AR) is against the measured AR rows', and the warning says so)
        members = [draws] if mixture is None else [d for d, w in mixture if w > 0]
        if versus_ar and first.get("new_deployment") and any(
                not P.ar_anchored(d, sc) for d in members for sc in question.scenarios):
            print(NEW_DEPLOYMENT_VERSUS_AR)
    else:
        print("tok/s, posterior predictive (includes run-to-run noise); 'original' is the "
              "deterministic estimate with its flat +-30% band.")
    for line in accept_notes(rows):
        print(line)
    # (which drafter card, or a generic drafter, priced the speculative rows' passes)
    drafters = list(dict.fromkeys(r["pass_drafter_note"] for r in rows if "pass_drafter_note" in r))
    for note in [*notes, *drafters, *question.left_out]:
        print(f"  {note}")
    if any("explain" in r for r in rows):
        print()
        for line in explain_lines(rows, probs[-1]):
            print(line)
    return 0


#: The table's line under --new-deployment --concurrency: what P(> AR) compares
#: (engine/predictive.py ``ar_anchored``).
NEW_DEPLOYMENT_VERSUS_AR = ("P(> AR) of a new deployment: against that deployment's "
                            "autoregressive step, the fit's (not anchored to the measured AR "
                            "rows, which are the measured deployment's)")


def explain_lines(rows: list[dict], prob: float) -> list[str]:
    r"""``--explain``'s table: per row, each term's share of the variance of log tok/s, its
    median and interval, and where its draws come from (engine/explain.py).

    >>> term = {"term": "acceptance", "share": 0.5, "unit": "tokens per step", "median": 14.0,
    ...         "lo": 12.2, "hi": 15.8, "from": "given range, uniform"}
    >>> noise = {"term": "noise and discrepancy", "share": 0.1, "unit": "sd of log tok/s",
    ...          "median": 0.05, "lo": None, "hi": None, "from": "the fit's scatter"}
    >>> rows = [{"engine": "sglang", "accept": "U(12,16)",
    ...          "explain": {"r2": 0.99, "terms": [term, noise]}}]
    >>> print("\n".join(explain_lines(rows, 0.9)))
    why the intervals are as wide as they are (shares of the variance of log tok/s, draw by draw):
    engine  accept    term                   share     median        90%  from
    ------  --------  ---------------------  -----  ---------  ---------  --------------------
    sglang  U(12,16)  acceptance               50%  14 tokens  12.2-15.8  given range, uniform
                      noise and discrepancy    10%   sd 0.050          -  the fit's scatter
                      (memory-read cap)         1%          -          -  -
    """
    from ddtree_bayes.engine.predictive import pct_label

    def number(x: float) -> str:
        return f"{x:.3g}"

    streams = any("concurrency" in r for r in rows)   # (a C column, as the answer's table)
    headers = ["engine", "accept", *(["C"] if streams else []), "term", "share", "median",
               f"{pct_label(prob)}%", "from"]
    body = []
    for r in rows:
        if "explain" not in r:
            continue
        first = True
        lead = [r["engine"], r["accept"], *([str(r["concurrency"])] if streams else [])]
        ex = r["explain"]
        for t in ex["terms"]:
            if t["unit"] == "sd of log tok/s":
                mid, span = f"sd {t['median']:.3f}", "-"
            else:
                unit = (f" {t['unit']}" if t["unit"] != "tokens per step" else
                        " token" if t["median"] == 1 else " tokens")
                mid = number(t["median"]) + unit
                span = f"{number(t['lo'])}-{number(t['hi'])}"
            body.append([*(lead if first else [""] * len(lead)), t["term"],
                         f"{t['share']:.0%}", mid, span, t["from"]])
            first = False
        left = 1.0 - ex["r2"]
        if left >= 0.005:   # what no term explains: the draws capped at the memory read
            body.append([*[""] * len(lead), "(memory-read cap)", f"{left:.0%}", "-", "-", "-"])
    return ["why the intervals are as wide as they are (shares of the variance of log tok/s, "
            "draw by draw):", aligned_table(headers, body, left=len(lead) + 1, text_last=True)]


def accept_notes(rows: list[dict]) -> list[str]:
    """The lines under predict's table saying where the acceptances not given came from: the
    priors file's prior (naming its engines when the other engines' came from elsewhere), a
    measured mean per engine (which rows), an inferred posterior, a uniform range."""
    out = []
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    drawn = [e for e in engines if any(r["engine"] == e and r["accept_kind"] == "prior"
                                       for r in rows)]
    if drawn:
        which = "" if drawn == engines else f"{', '.join(drawn)}: "
        out.append(f"acceptance not given: {which}drawn from the acceptance prior in the "
                   "priors file (pass --accept to fix it).")
    out += [f"acceptance not given: {note} (pass --accept to fix it)." for note in sorted(
        {f"{r['engine']}: {r['accept_from']}" for r in rows if r["accept_kind"] == "measured"})]
    out += [f"{note} (pass --accept to fix it)." for note in sorted(
        {r["accept_note"] for r in rows if r["accept_kind"] == "posterior"})]
    if any(r["accept_kind"] == "uniform" for r in rows):
        out.append("U(lo,hi) rows marginalise acceptance as Uniform(lo, hi).")
    return out


def overhead_notes(rows: list[dict]) -> list[str]:
    """One line per engine saying how its overhead was found; at several concurrencies whose
    notes differ (an anchor at C = 4 and none at C = 16), one per note naming its C.

    >>> rows = [{"engine": "vllm", "concurrency": c, "overhead_from": h}
    ...         for c, h in ((1, "a"), (4, "b"), (8, "b"))]
    >>> overhead_notes(rows)
    ['vllm at C = 1: a', 'vllm at C = 4, 8: b']
    """
    if not any("concurrency" in r for r in rows):
        return sorted({f"{r['engine']}: {r['overhead_from']}" for r in rows})
    by_engine: dict[str, dict[str, set]] = {}
    for r in rows:
        by_engine.setdefault(r["engine"], {}).setdefault(r["overhead_from"], set()).add(
            r.get("concurrency", 1))
    out = []
    for engine, hows in sorted(by_engine.items()):
        if len(hows) == 1:
            out.append(f"{engine}: {next(iter(hows))}")
            continue
        for how, cs in sorted(hows.items(), key=lambda kv: min(kv[1])):
            out.append(f"{engine} at C = {', '.join(map(str, sorted(cs)))}: {how}")
    return out


def crossover_lines(rows: list[dict]) -> list[str]:
    """The lines of :func:`crossover`, as the table prints them.

    >>> rows = [{"engine": "vllm", "accept": "2.5", "concurrency": c, "p_faster_than_ar": p}
    ...         for c, p in ((1, 0.99), (16, 0.8), (64, 0.2))]
    >>> crossover_lines(rows)
    ['vllm, accept 2.5: speculation stops paying at C = 64 (P(faster than AR) 0.20; 0.80 at C = 16)']

    Speculation that never paid read "stops paying at C = 1":

    >>> for ps in ((0.2, 0.1, 0.05), (0.2, 0.8, 0.9)):
    ...     print(crossover_lines([{**r, "p_faster_than_ar": p} for r, p in zip(rows, ps)])[0])
    vllm, accept 2.5: speculation pays at no concurrency asked (P(faster than AR) <= 0.20)
    vllm, accept 2.5: speculation does not pay at C = 1 (P(faster than AR) 0.20), pays from C = 16 (0.80)

    A C whose P is strictly between 0.25 and 0.75 is no verdict
    (:data:`~ddtree_bayes.engine.structure.UNSURE_BELOW`): it is called uncertain, and every C
    is named with its kind:

    >>> line = crossover_lines([{**r, "p_faster_than_ar": p}
    ...                         for r, p in zip(rows, (0.44, 0.57, 0.13))])[0]
    >>> print(line)  # doctest: +NORMALIZE_WHITESPACE
    vllm, accept 2.5: speculation is uncertain at C = 1, 16 (P(faster than AR) 0.44-0.57,
    between 0.25 and 0.75), does not pay at C = 64 (0.13)
    """
    return [c["line"] for c in crossover(rows)]


def crossover(rows: list[dict]) -> list[dict]:
    """Per engine and acceptance of predict's rows at several concurrencies: where speculation
    pays (P(faster than AR) >= 0.5; :func:`~ddtree_bayes.engine.structure.paying_fields`: the
    first concurrency asked at which it stops paying, or that it pays at every one asked, ...)
    and the line saying so: ``engine``, ``accept``, ``concurrency`` and ``p_faster_than_ar``
    (ascending C), the paying fields, ``uncertain_at`` (the C whose P is strictly between 0.25
    and 0.75, which the line calls uncertain:
    :func:`~ddtree_bayes.engine.structure.uncertain_line`) and ``line``. The table
    prints the lines; the JSON's ``crossover`` is this list.

    >>> rows = [{"engine": "vllm", "accept": "2.5", "concurrency": c, "p_faster_than_ar": p}
    ...         for c, p in ((16, 0.7), (1, 0.99))]
    >>> crossover(rows)[0]["pays"], crossover(rows)[0]["concurrency"]
    ('every', [1, 16])
    """
    out = []
    seen: dict[tuple, list[dict]] = {}
    for r in rows:
        if "p_faster_than_ar" in r:
            seen.setdefault((r["engine"], r["accept"]), []).append(r)
    from ddtree_bayes.engine.structure import (
        p_bound,
        p_range,
        p_text,
        paying_fields,
        uncertain_at,
        uncertain_line,
    )

    for (engine, accept), rs in seen.items():
        rs = sorted(rs, key=lambda r: r["concurrency"])
        cs = [r["concurrency"] for r in rs]
        ps = [r["p_faster_than_ar"] for r in rs]
        p_at = dict(zip(cs, ps, strict=True))
        where = paying_fields(cs, ps)
        kind, yes = where["pays"], where["pays_at"]
        head = f"{engine}, accept {accept}: speculation "
        unsure = uncertain_at(cs, ps)
        if unsure:   # (a coin flip is no verdict: "pays at every C (>= 0.63)" was one)
            line = head + uncertain_line(cs, ps)
        elif kind == "every":
            line = head + ("pays at every concurrency asked (P(faster than AR) >= "
                           f"{p_bound(min(ps), upper=False)})")
        elif kind == "never":
            line = head + ("pays at no concurrency asked (P(faster than AR) <= "
                           f"{p_bound(max(ps), upper=True)})")
        elif kind == "mixed":
            no = [c for c in cs if c not in yes]
            line = head + (f"pays at C = {', '.join(map(str, yes))}, not at C = "
                           f"{', '.join(map(str, no))} (P(faster than AR) {p_range(ps)})")
        elif kind == "starts":
            c = where["starts_paying_at"]
            line = head + (f"does not pay at C = {cs[0]} (P(faster than AR) "
                           f"{p_text(ps[0])}), pays from C = {c} ({p_text(p_at[c])})")
        else:   # stops: it paid up to the last C of pays_at
            c, last = where["stops_paying_at"], yes[-1]
            line = head + (f"stops paying at C = {c} (P(faster than AR) {p_text(p_at[c])}; "
                           f"{p_text(p_at[last])} at C = {last})")
        out.append({"engine": engine, "accept": accept, "concurrency": cs,
                    "p_faster_than_ar": ps, **where, "uncertain_at": unsure, "line": line})
    return out

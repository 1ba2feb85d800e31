"""Summary dict -> ``index.html`` (figures embedded), ``summary.md`` and ``summary.json``."""
from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import numpy as np

from ddtree_bayes.core.config import (
    DEFAULT_QUESTION,
    DEFAULT_SEED,
    MAX_RHAT,
    MIN_ESS_BULK,
)
from ddtree_bayes.core.data import accept_shown
from ddtree_bayes.core.default_question import NO_SPECULATIVE
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.structure import p_text
from ddtree_bayes.workflows.decisions.next_measurement import drafter_cell
from ddtree_bayes.workflows.report.summary import compute, pareto_k_limit

# ------------------------------------------------------------------ render
CAPTIONS = {
    "rank": "Rank plots, one panel per parameter: each chain's rank counts should stay "
            "inside the grey band around the flat line; a chain sitting high or low means "
            "the chains disagree.",
    "trace": "Traces, one panel per parameter: look for chains that overlap and wander "
             "without trends or stuck stretches.",
    "prior_posterior": "Prior (grey) against posterior (blue): where the blue is as wide as "
                       "the grey, the measurements did not inform that parameter.",
    "ppc": "Each measurement (black) against its posterior predictive 50% and 90% intervals; "
           "red points fall outside their 90% interval.",
    "loo": "Left: Pareto k per measurement (above the dashed line, min(1 - 1/log10(S), 0.7) for "
           "S draws as compare uses, the PSIS estimate is "
           "unreliable). Right: LOO-PIT values against the uniform they should follow.",
    "psense": "Power-scaling sensitivity of the default-scenario prediction to each prior: "
              "tall bars are the assumptions the headline number leans on.",
    "fan": "Throughput against acceptance for the default scenario, up to the most tokens a "
           "step can emit (block for DDTree): 50% and 90% bands per engine, the original "
           "deterministic estimate (dashed) with its +-30% band, and the measured points of "
           "its system.",
    "concurrency": "Per-user (left) and total (right) tok/s of the default scenario and of "
                   "autoregressive decoding (grey) against the number of streams decoded "
                   "together, median and 90% band; shaded: beyond the largest concurrency "
                   "measured, where the step's growth is the roofline's (prior-driven).",
    "variance": "Share of the variance of log tok/s in the default scenario (acceptance "
                "Uniform(12, 16), or its acceptance +-2 for a fit's own default, within what a "
                "step can emit) "
                "attributed to each quantity (Shapley values of R^2, so "
                "correlated parameters share credit): measure the tallest bars next.",
    "breakdown": "Posterior step time split into MOE, ATTN_BASE, context and SPEC (ms, "
                 "medians; whiskers: 90% interval of the whole step; diamonds: measured).",
    "budgets": "tok/s against the tree budget per engine: the median and 90% band of each "
               "posterior draw's expected tok/s (solid), their mean E[tok/s] (dashed; the "
               "recommended budget has the highest), and P(best) as bars: past the measured M "
               "the step time is extrapolated.",
    "next": "Expected width of the query's 90% interval after each candidate measurement "
            "(now: the dashed line): the shortest bar is the most informative benchmark.",
    "hardware": "Every GPU of the hardware table at the measured GPU count: measured systems "
                "(black) and systems predicted by hardware transfer (blue), AR and the default "
                "scenario (DDTree budget 32 at acceptance 14, or a fit's own), 90% intervals. "
                "A GPU count whose memory cannot hold the model's weights is not predicted: "
                "the figure leaves it out, the table shows '-' (summary.json says why).",
}


def render(summary: dict, draws: Fit | None, out_dir: Path, dt=None) -> dict[str, list[Path]]:
    """Write figures, ``summary.json``, ``summary.md`` and ``index.html`` into ``out_dir``."""
    import matplotlib

    matplotlib.use("Agg")
    out_dir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, list[Path]] = {}
    if draws is not None:
        from ddtree_bayes.workflows.report import figures as F

        for name, fn in F.FIGURES.items():
            if name in summary.get("not_computed", {}):
                continue   # (its section says why)
            path = out_dir / f"{name}.png"
            try:
                figures[name] = fn(summary, draws, dt, path) or [path]  # several when split
            except Exception as err:  # noqa: BLE001 - one broken figure must not sink the report
                summary.setdefault("figure_errors", {})[name] = f"{type(err).__name__}: {err}"
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
    (out_dir / "summary.md").write_text(markdown(summary))
    (out_dir / "index.html").write_text(page(summary, figures))
    return figures


def render_whole(summary: dict, draws: Fit | None, out_dir: Path, dt=None) -> None:
    """:func:`render` into a temp folder beside ``out_dir``, then renamed into place: the
    folder holds the previous report or the new one, never part of it (an interrupt while
    the figures are drawn removes the temp folder; one during the renames waits for them)."""
    import os
    import shutil
    import tempfile

    from ddtree_bayes.core import interrupts

    made = [p for p in (out_dir.parent, *out_dir.parent.parents) if not p.exists()]
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.{os.getpid()}.", suffix=".tmp",
                                dir=out_dir.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)   # as mkdir would have made it (mkdtemp makes 0700)
    old = tmp.with_name(tmp.name.removesuffix(".tmp") + ".old.tmp")
    try:
        render(summary, draws, tmp, dt)
        with interrupts.commit(f"report {out_dir}"):
            if out_dir.exists():
                os.replace(out_dir, old)
            os.replace(tmp, out_dir)
    except BaseException:
        if old.exists() and not out_dir.exists():
            os.replace(old, out_dir)   # the previous report, back where it was
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in made:   # the folders this call made (reports/), if left empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    shutil.rmtree(old, ignore_errors=True)


def psense_table_rows(overall: list[dict]) -> list[list[str]]:
    """The "(all priors)" rows of the prior sensitivity table: each parameter's prior and
    likelihood sensitivity and diagnosis, or the diagnosis alone when it has none (a
    parameter constant over the draws read "prior nan / likelihood nan: ✓")."""
    return [["(all priors) " + r["parameter"],
             r["diagnosis"] if r["prior"] is None else
             f"prior {r['prior']:.3f} / likelihood {r['likelihood']:.3f}: {r['diagnosis']}"]
            for r in overall]


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(type(x))


def _fmt(x, digits=3) -> str:
    """A table cell: ``digits`` significant digits, but a number of more digits than that
    before the point in full (a context of 16384 tokens read "1.64e+04", 2304 GB "2.3e+03").

    >>> _fmt(0.027312), _fmt(35.84), _fmt(16384.0), _fmt(2304.0), _fmt(3449.6), _fmt(None)
    ('0.0273', '35.8', '16384', '2304', '3450', '-')
    >>> _fmt(999.6), _fmt(999.4), _fmt(-999.6)   # rounds up to four digits: in full
    ('1000', '999', '-1000')
    """
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isfinite(x) and abs(x) >= 10 ** digits - 0.5:
            return f"{x:.0f}"
        return f"{x:.{digits}g}"
    return str(x)


def _table(headers, rows) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(figures, name) -> str:
    """The figure(s) of ``name`` (a split figure: every part), embedded, then its caption."""
    if name not in figures:
        return f'<p class="missing">figure {name} could not be drawn</p>'
    paths = figures[name] if isinstance(figures[name], list) else [figures[name]]
    imgs = "".join(f'<img alt="{name} {i}" src="data:image/png;base64,'
                   f'{base64.b64encode(p.read_bytes()).decode()}">'
                   for i, p in enumerate(paths, start=1))
    return f"<figure>{imgs}<figcaption>{html.escape(CAPTIONS[name])}</figcaption></figure>"


#: The report's order: the answer first (the prediction, where its width comes from, the
#: decisions it supports), then the checks of the model, then the sampler's diagnostics.
SECTION_ORDER = ("prediction", "concurrency", "variance", "budgets", "next", "hardware",
                 "breakdown", "ppc",
                 "loo", "prior_posterior", "psense", "sampling", "inferred_acceptance")


def _paying_text(concurrency: list[int], p_faster: list[float]) -> str:
    """Where a drafter pays along the figure's concurrencies (engine.structure.paying_fields).

    >>> _paying_text([1, 2, 4], [0.9, 0.8, 0.2]), _paying_text([1, 2], [0.2, 0.1])
    ('stops paying at C = 4', 'pays at no C shown')
    >>> _paying_text([1, 2, 4], [0.9, 0.8, 0.76]), _paying_text([1, 2, 4], [0.2, 0.8, 0.9])
    ('pays at every C shown', 'does not pay at C = 1, starts paying at C = 2')
    >>> _paying_text([1, 2, 4], [0.1, 0.8, 0.2])
    'pays at C = 2 only'

    A P(faster than AR) strictly between 0.25 and 0.75 is no verdict, as predict says (a
    review found 0.6 called "pays" here):

    >>> print(_paying_text([1, 2, 4], [0.9, 0.6, 0.3]))
    pays at C = 1 (P(faster than AR) 0.90), is uncertain at C = 2, 4 (0.30-0.60, between 0.25 and 0.75)
    """
    from ddtree_bayes.engine.structure import paying_fields, uncertain_at, uncertain_line

    if uncertain_at(concurrency, p_faster):
        return uncertain_line(concurrency, p_faster)
    where = paying_fields(concurrency, p_faster)
    kind = where["pays"]
    if kind == "stops":
        return f"stops paying at C = {where['stops_paying_at']}"
    if kind == "starts":
        return (f"does not pay at C = {concurrency[0]}, starts paying at C = "
                f"{where['starts_paying_at']}")
    if kind == "mixed":
        return "pays at C = " + ", ".join(map(str, where["pays_at"])) + " only"
    return "pays at every C shown" if kind == "every" else "pays at no C shown"


def budget_rows(optimize: dict) -> list[list]:
    """The rows of the "Which tree budget?" table, one per engine and budget, with
    ``optimize``'s E[tok/s] (the recommended budget has the highest: without it the table
    showed only medians and P(best), by which another budget can look best); the last cell
    flags what is extrapolated as ``optimize`` does: the step (past the measured M), the
    acceptance (off the curve's anchored budgets), or both (``step+accept``).

    >>> row = {"budget": 8, "verify_tokens": 9, "median": 586.2, "lo90": 318.4, "hi90": 640.1,
    ...        "tok_s_mean": 538.6, "p_best": 0.497, "regret": 37.9, "extrapolated": False,
    ...        "accept_extrapolated": True}
    >>> budget_rows({"sglang": {"rows": [row]}})
    [['sglang', 8, 9, 586, '318-640', 539, 0.497, 37.9, 'accept']]
    """
    from ddtree_bayes.workflows.decisions.optimize import extrapolated_flags

    return [[e, r["budget"], r["verify_tokens"], round(r["median"]),
             f"{r['lo90']:.0f}-{r['hi90']:.0f}", round(r["tok_s_mean"]), r["p_best"],
             r["regret"], extrapolated_flags(r)]
            for e, o in optimize.items() for r in o["rows"]]


def next_title(decisions: dict) -> str:
    """The title of the "What to measure next" section: the query as `next` prints it, with
    its acceptance (the widths are of the query at that acceptance), or the error.

    >>> next_title({"next": {"query": {"describe": "b300 x8, native, ddtree", "accept": "14"}}})
    'What to measure next for b300 x8, native, ddtree, accept 14'
    >>> next_title({"next_error": "no fit"})
    'What to measure next (no fit)'
    """
    nx = decisions.get("next")
    if not nx:
        return f"What to measure next ({decisions.get('next_error')})"
    return f"What to measure next for {nx['query']['describe']}, accept {nx['query']['accept']}"


def section_notes(summary: dict) -> dict[str, list[str]]:
    """The warnings printed under a section's table, per section key: the budget section's
    are ``optimize``'s (another model's acceptance curve, a measured acceptance left out...),
    once each, named by engine when not every engine has it; the hardware section's say which
    GPUs' speculative column ``predict`` would warn of (an AMD GPU without a learned AMD term).

    >>> section_notes({"decisions": {"optimize": {"sglang": {"warnings": ["a", "b"]},
    ...                                          "native": {"warnings": ["a"]}},
    ...                              "hardware_warnings": ["c"]}})
    {'budgets': ['a', 'sglang: b'], 'hardware': ['c']}
    """
    decisions = summary.get("decisions", {})
    opt = decisions.get("optimize", {})
    seen = list(dict.fromkeys(w for o in opt.values() for w in o.get("warnings", [])))
    notes = []
    for w in seen:
        engines = [e for e, o in opt.items() if w in o.get("warnings", [])]
        notes.append(w if len(engines) == len(opt) else f"{', '.join(engines)}: {w}")
    out = {"budgets": notes} if notes else {}
    if decisions.get("hardware_warnings"):
        out["hardware"] = list(decisions["hardware_warnings"])
    fan = summary.get("fan") or {}
    if fan.get("headline_accept_assumed"):   # (the sections asked at it say so, not only the
        #                                      answer line: their numbers rest on it alike)
        assumed = (f"asked at acceptance {accept_shown(float(fan['headline_accept']))}, "
                   "assumed: no acceptance was measured, inferred or given in the priors for "
                   "this model (`ddtree-bayes predict --accept` asks your drafter's)")
        for key in ("concurrency", "variance", "next", "hardware"):
            out.setdefault(key, []).append(assumed)
    return out


def section_numbers(summary: dict) -> dict[str, int]:
    """The number of each section the report shows (its place in :data:`SECTION_ORDER`), by
    key: the titles and the answer line's pointers to them."""
    sec = _section_map(summary)
    return {k: i for i, k in enumerate(SECTION_ORDER, start=1) if k in sec}


def _sections(summary: dict) -> list[tuple[str, list[str], list[list], list[str]]]:
    """(numbered title, headers, rows, figure names) per section in :data:`SECTION_ORDER`;
    shared by HTML and markdown."""
    sec = _section_map(summary)
    return [(f"{i}. {sec[k][0]}", *sec[k][1:]) for k, i in section_numbers(summary).items()]


def decomposed(summary: dict, lead: str = "") -> str:
    """The question the variance shares decompose, ``lead`` first: acceptance marginalised as
    Uniform(lo, hi) (U(12, 16) for the bundled default, while the answer line asks at 14), or
    "" when the summary does not say (no engine, or engines at different ranges).

    >>> decomposed({"variance": {"sglang": {"accept": [12.0, 16.0]},
    ...                          "native": {"accept": [12.0, 16.0]}}}, " of ")
    ' of acceptance U(12,16)'
    >>> decomposed({"variance": {}})
    ''
    """
    ranges = {tuple(d["accept"]) for d in summary.get("variance", {}).values() if "accept" in d}
    if len(ranges) != 1:
        return ""
    ((lo, hi),) = ranges
    return f"{lead}acceptance U({accept_shown(lo)},{accept_shown(hi)})"   # (text: 2 decimals)


def _pointers(summary: dict) -> str:
    """The answer line's pointers to the sections of other acceptances and of what the width
    comes from, by their numbers ("" when the report shows neither).

    >>> _pointers({})
    ''
    """
    number = section_numbers(summary)
    said = [f"section {number[k]} {what}" for k, what in (
        ("prediction", "has other acceptances"),
        ("variance", f"what the width{decomposed(summary, ' of ')} comes from"))
        if k in number]
    text = ", ".join(said)
    return "" if not said else f" {text[0].upper()}{text[1:]}."


def fan_table_rows(fan: dict) -> list[list]:
    """The fan's table: per engine, the rows at the round acceptances, the answer line's and
    the last one a step can emit, each acceptance as ``predict`` shows it (``accept_shown``: 2
    decimals; the table's 3 significant digits printed a measured 12.375 as 12.4 where
    predict, the answer line and the concurrency section say 12.38).

    >>> fan = {"accept": [12.0, 12.375], "headline_accept": 12.375,
    ...        "engines": {"sglang": {"quantiles": [[1, 2, 3, 4, 5], [2, 3, 4, 5, 6]],
    ...                               "original": None}}}
    >>> [r[:3] for r in fan_table_rows(fan)]
    [['sglang', '12', 3], ['sglang', '12.38', 4]]
    """
    rows = []
    for eng, f in fan["engines"].items():
        for a, q, orig in zip(fan["accept"], f["quantiles"],
                              f["original"] or [None] * len(f["quantiles"]), strict=True):
            if (a in (4.0, 8.0, 12.0, 14.0, 16.0, 20.0) or len(fan["accept"]) <= 8
                    or a == fan.get("headline_accept")   # the answer line's acceptance
                    or (fan.get("accept_clipped") and a == fan["accept"][-1])):
                rows.append([eng, accept_shown(a), round(q[2]), f"{q[1]:.0f} - {q[3]:.0f}",
                             f"{q[0]:.0f} - {q[4]:.0f}", None if orig is None else round(orig)])
    return rows


def _section_map(summary: dict) -> dict[str, tuple[str, list[str], list[list], list[str]]]:
    if "sampling" not in summary:
        return {}
    s = summary["sampling"]
    sec = {}
    sec["sampling"] = ("Sampling diagnostics",
                       ["parameter", "mean", "sd", "R-hat", "ESS bulk", "ESS tail", "MCSE"],
                       [[p["parameter"], p["mean"], p["sd"], f"{p['rhat']:.3f}", round(p["ess_bulk"]),
                         round(p["ess_tail"]), p["mcse_mean"]] for p in s["parameters"]],
                       ["rank", "trace"])
    sec["prior_posterior"] = ("Prior vs posterior",
                              ["parameter", "prior 90%", "posterior 90%",
                               "posterior sd / prior sd", "status"],
                              [[r["parameter"], f"{_fmt(r['prior_q'][0])} - {_fmt(r['prior_q'][4])}",
                                f"{_fmt(r['posterior_q'][0])} - {_fmt(r['posterior_q'][4])}", r["sd_ratio"],
                                r["status"]] for r in summary["prior_posterior"]],
                              ["prior_posterior"])
    sec["ppc"] = ("Posterior predictive check",
                  ["row", "system", "engine", "method", "M", "context", "measured", "median",
                   "90% interval", "outside 90%"],
                  [[r["row"], r["system"], r["engine"], r["method"], r["verify_tokens"],
                    r["context_tokens"], r["measured"], round(r["median"], 1),
                    f"{r['lo90']:.1f} - {r['hi90']:.1f}", "YES" if r["outside_90"] else "no"]
                   for r in summary["ppc"]["rows"]],
                  ["ppc"])
    for key, title in (("loo", "PSIS-LOO"), ("psense", "Prior sensitivity (power scaling)")):
        why = summary.get("not_computed", {}).get(key)
        if why:
            sec[key] = (f"{title}: not computed", ["why"], [[why]], [])
    if "loo" in summary:
        loo = summary["loo"]
        sec["loo"] = (f"PSIS-LOO (elpd {loo['elpd']:.2f} +- {loo['se']:.2f}, "
                      f"p_loo {loo['p_loo']:.2f}, {loo['n_flagged']} of {len(loo['pareto_k'])} "
                      f"Pareto k > {pareto_k_limit(summary)})",
                      ["row", "Pareto k", f"k > {pareto_k_limit(summary)}", "LOO-PIT"],
                      [[k["row"], k["k"], "YES" if k["flag"] else "no", pit]
                       for k, pit in zip(loo["pareto_k"], loo["loo_pit"], strict=True)],
                      ["loo"])
    if "psense" in summary:
        ps = summary["psense"]
        sec["psense"] = ("Prior sensitivity (power scaling)",
                         ["prior", f"sensitivity of {ps['headline']}"],
                         [[k, val] for k, val in sorted(ps["headline_by_prior"].items(),
                                                        key=lambda kv: -kv[1])]
                         + psense_table_rows(ps["overall"]),
                         ["psense"])
    fan = summary["fan"]
    fan_rows = fan_table_rows(fan)
    clipped = ("" if not fan.get("accept_clipped") else
               f"; acceptance stops at {fan['accept_max']:g}, the most a step can emit "
               f"({fan['accept_max_rule']})")
    sec["prediction"] = (f"Predicted throughput against acceptance (default scenario{clipped})",
                         ["engine", "accept", "median tok/s", "50%", "90%", "original"], fan_rows,
                         ["fan"])
    conc = summary.get("concurrency")
    if conc:
        rows = []
        for name, e in conc["engines"].items():
            for i, c in enumerate(conc["concurrency"]):
                pu, tot = e["per_user"][i], e["total"][i]
                rows.append([name, c, round(pu[2]), f"{pu[0]:.0f} - {pu[4]:.0f}", round(tot[2]),
                             f"{tot[0]:.0f} - {tot[4]:.0f}",
                             "-" if name == "ar" else p_text(e["p_faster_than_ar"][i])])
        stops = "; ".join(f"{n}: {_paying_text(conc['concurrency'], e['p_faster_than_ar'])}"
                          for n, e in conc["engines"].items() if n != "ar")
        sec["concurrency"] = (f"Several streams at once (accept {accept_shown(conc['accept'])}; "
                              f"{stops})",
                              ["engine", "C", "per user", "90%", "total", "90%", "P(> AR)"],
                              rows, ["concurrency"])
    var_rows = []
    for eng, d in summary["variance"].items():
        for k, val in d["shares"].items():
            var_rows.append([eng, k, val])
        var_rows.append([eng, "not attributed (non-linear, interactions)", d["not_attributed"]])
    asked = decomposed(summary)
    sec["variance"] = (f"Where the width comes from{f' ({asked})' if asked else ''}",
                       ["engine", "quantity", "variance share"],
                       var_rows, ["variance"])
    sec["breakdown"] = ("Step-time breakdown (ms, median [90%])",
                        ["configuration", "MOE", "ATTN_BASE", "context", "SPEC", "step", "measured"],
                        [[b["config"]] + [f"{b[k][1]:.2f} [{b[k][0]:.2f}, {b[k][2]:.2f}]"
                                          for k in ("moe", "attn_base", "context", "spec", "step")]
                         + [b["measured_step_ms"]] for b in summary["breakdown"]],
                        ["breakdown"])
    dec = summary.get("decisions", {})
    opt_rows = budget_rows(dec.get("optimize", {}))
    best = ", ".join(f"{e}: budget {o['recommended']}" for e, o in dec.get("optimize", {}).items())
    sec["budgets"] = (f"Which tree budget? (recommended: {best or dec.get('optimize_error')})",
                      ["engine", "budget", "M", "median tok/s", "90%", "E[tok/s]", "P(best)", "E[regret]",
                       "extrapolated"], opt_rows, ["budgets"])
    nx = dec.get("next")
    sec["next"] = (next_title(dec),
                   ["candidate", "drafter", "why", "expected 90% width", "reduction", "ESS"],
                   [[r["candidate"], drafter_cell(r), r["why"], round(r["expected_width"]),
                     f"{100 * r['reduction_rel']:.0f}%", round(r["ess_median"])]
                    for r in (nx["rows"] if nx else [])], ["next"])
    sec["hardware"] = ("Hardware never measured (transfer)",
                       ["GPU", "GPUs", "memory GB", "measured", "AR tok/s (90%)",
                        f"{dec.get('hardware_query', 'DDTree budget 32 accept 14')} (90%)"],
                       [[h["hardware"], h["gpus"], h.get("memory_gb_total"),
                         "yes" if h.get("measured") else "no",
                         "-" if "ar" not in h else f"{h['ar'][1]:.0f} ({h['ar'][0]:.0f}-{h['ar'][2]:.0f})",
                         "-" if "ddtree" not in h else
                         f"{h['ddtree'][1]:.0f} ({h['ddtree'][0]:.0f}-{h['ddtree'][2]:.0f})"]
                        for h in dec.get("hardware", [])], ["hardware"])
    if summary.get("inferred_acceptance"):   # rows with a blank accept_len
        sec["inferred_acceptance"] = (
            "Inferred acceptance (rows without accept_len)",
            ["group", "rows", "posterior median", "posterior 90%", "prior median (90%)", "prior"],
            [[g["group"], ", ".join(map(str, g["rows"])), f"{g['median']:.3f}",
              f"{g['lo']:.3f} - {g['hi']:.3f}",
              f"{g['prior_median']:.3f} ({g['prior_lo']:.3f} - {g['prior_hi']:.3f})",
              g["prior_from"]] for g in summary["inferred_acceptance"]], [])
    return sec


STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid
#ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
.verdict{padding:.8em 1em;border-radius:6px;font-size:1.2em;font-weight:600}.ok{background:#e3f6e3}
.bad{background:#fde2e2}figure{margin:1em 0}img{max-width:100%;display:block;margin:.5em 0}
figcaption{color:#555;font-size:13px}.missing,.warning{color:#b00}.answer{font-size:1.15em;
font-weight:600}.evidence,.toc{font-size:13px;color:#555}"""

SCRIPT = """window.addEventListener('load',function(){var im=document.images,ok=0;
for(var i=0;i<im.length;i++){if(im[i].complete&&im[i].naturalWidth>0)ok++;}
document.body.setAttribute('data-images-rendered',ok+'/'+im.length);});"""


def page(summary: dict, figures: dict[str, list[Path]]) -> str:
    v = summary["verdict"]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>ddtree-bayes report "
             f"{html.escape(summary['fit_id'])}</title><style>{STYLE}</style>"
             f"<script>{SCRIPT}</script></head><body>",
             f"<h1>ddtree-bayes fit {html.escape(summary['fit_id'])}</h1>",
             f"<p class='verdict {'ok' if v['converged'] else 'bad'}'>{html.escape(v['text'])}</p>"]
    parts.extend(f"<p class='warning'>Warning: {html.escape(w)}</p>"
                 for w in fit_warnings(summary))
    answer = headline(summary)
    if answer:
        parts.append(f"<p class='answer'>{html.escape(answer)}</p>")
        parts.extend(f"<p class='warning'>Warning: {html.escape(w)}</p>"
                     for w in summary.get("answer_warnings", []))
    if "sampling" in summary:
        s = summary["sampling"]
        parts.append(f"<p class='evidence'>{summary['chains']} chains, {summary['n_draws']} draws; max R-hat "
                     f"{s['max_rhat']:.3f} (gate {MAX_RHAT}), min bulk ESS {s['min_ess_bulk']:.0f}"
                     f" (gate {MIN_ESS_BULK}), min tail ESS {s['min_ess_tail']:.0f}, divergences "
                     f"{s['divergences']}, E-BFMI per chain "
                     f"{', '.join(f'{b:.2f}' for b in s['ebfmi_per_chain'])}, tree-depth "
                     f"saturation {_fmt(s['tree_depth_saturation'])}.</p>")
        flagged = summary["ppc"]["flagged"]
        k_text = (f"Pareto k > {pareto_k_limit(summary)}: {summary['loo']['n_flagged']}"
                  if "loo" in summary else "PSIS-LOO not computed (an importance resample)")
        parts.append(f"<p class='evidence'>Measurements outside their 90% predictive interval: "
                     f"{', '.join(map(str, flagged)) if flagged else 'none'}. {k_text}.</p>")
    sections = _sections(summary)
    keys = [k for k in SECTION_ORDER if k in _section_map(summary)]
    if sections:
        parts.append("<p class='toc'>" + " &middot; ".join(
            f"<a href='#{k}'>{html.escape(t.split(' (')[0])}</a>"
            for k, (t, *_) in zip(keys, sections, strict=True)) + "</p>")
    notes = section_notes(summary)
    for key, (title, headers, rows, figs) in zip(keys, sections, strict=True):
        parts.append(f"<h2 id='{key}'>{html.escape(title)}</h2>{_table(headers, rows)}")
        parts.extend(f"<p class='warning'>Warning: {html.escape(w)}</p>"
                     for w in notes.get(key, []))
        parts.extend(_img(figures, f) for f in figs)
    if summary.get("figure_errors"):
        parts.append("<h2>Figures that failed</h2>" + _table(
            ["figure", "error"], list(summary["figure_errors"].items())))
    parts.append("</body></html>")
    return "\n".join(parts)


def headline(summary: dict) -> str | None:
    """The answer in one sentence: the default scenario's median and 90% interval per engine
    at acceptance 14 (the middle of the original estimate's 12-16), or at a fit's own default's
    acceptance (``fan["headline_accept"]``: its measured median)."""
    fan = summary.get("fan")
    accept = float(fan.get("headline_accept", 14.0)) if fan else 14.0
    if not fan or accept not in fan["accept"]:
        return None
    i = fan["accept"].index(accept)
    parts = [f"{eng} {q[i][2]:.0f} tok/s (90% interval {q[i][0]:.0f}-{q[i][4]:.0f})"
             for eng, q in ((e, f["quantiles"]) for e, f in fan["engines"].items())]
    engine, first = next(iter(fan["engines"].items()))
    described = first["scenario"].split(", ")
    described.remove(engine)   # the engines are named per part below
    scenario = ", ".join(described)
    unmeasured = "" if first.get("measured", True) else (
        " This fit has no measurement on that system (model, GPU): these numbers come from "
        "hardware transfer or the model card's roofline, so ask `ddtree-bayes predict` about a "
        "configuration you measured.")
    own = summary.get("default_scenario") or {}
    derived = ""
    if own.get("derived"):
        # its own why ("... for llama-3.1-8b-instruct": a fit of several models may have
        # measured b300 for another; "nor any speculative method": the shape is the bundled's)
        why = own.get("why") or f"the fit never measured {DEFAULT_QUESTION.hardware}"
        mine = ("it on its own most-measured system" if NO_SPECULATIVE in why
                else "its own most-measured configuration")
        derived = (f" {why[:1].upper()}{why[1:]}, so this asks {mine}; ask "
                   "`ddtree-bayes predict` about another.")
    assumed = "" if not fan.get("headline_accept_assumed") else (
        f" Its acceptance, {accept_shown(accept)}, is assumed: no acceptance was measured, "
        "inferred or given in the priors for it, so `ddtree-bayes predict` refuses it "
        "without --accept (give your drafter's).")
    return (f"Default scenario ({scenario}) at acceptance {accept_shown(accept)}: "
            + "; ".join(parts)
            + "." + _pointers(summary) + unmeasured + derived + assumed)


def markdown(summary: dict) -> str:
    lines = [f"# ddtree-bayes fit {summary['fit_id']}", "", f"**{summary['verdict']['text']}**", ""]
    lines += [line for w in fit_warnings(summary) for line in (f"Warning: {w}", "")]
    if headline(summary):
        lines += [str(headline(summary)), ""]
        # (what predict warns of the question the answer line asks, under it)
        lines += [line for w in summary.get("answer_warnings", [])
                  for line in (f"Warning: {w}", "")]
    notes = section_notes(summary)
    keys = [k for k in SECTION_ORDER if k in _section_map(summary)]
    for key, (title, headers, rows, _) in zip(keys, _sections(summary), strict=True):
        lines += [f"## {title}", "", "| " + " | ".join(headers) + " |",
                  "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
        lines.append("")
        lines += [line for w in notes.get(key, []) for line in (f"Warning: {w}", "")]
    return "\n".join(lines)


def write_report(fit_id: str | None = None, workdir: Path | None = None,
                 out_root: Path | None = None, seed: int = DEFAULT_SEED,
                 model: str | None = None, priors: str | Path | None = None
                 ) -> tuple[Path, dict]:
    """Compute and render the report of a fit into ``reports/<fit-id>/`` (``priors``: the
    priors file of the budget section's acceptance curve, ``report --priors``).

    A fit that cannot be read still gets a page that says so (and the error is re-raised
    after it is written); an unconverged fit gets the full report under a red verdict.
    """
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.errors import ArtifactError, InputError
    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.compare import require_psis_draws

    models = paths.models_dir(workdir)
    root = out_root or (workdir or Path.cwd()) / "reports"
    if root.exists() and not root.is_dir():   # before the minutes of computing, not after
        raise InputError(f"{root} is a file, not a folder to write reports into",
                         fix="pass --out a folder (it is created if absent)")
    path = store.resolve(models, fit_id)
    out_dir = root / path.stem
    try:
        with store.opened(path) as fh:   # (once: the draws and the whole tree from it)
            draws = store.load_fit(path, handle=fh)
            require_psis_draws(draws, "the report (PSIS-LOO, LOO-PIT, power-scaling)")
            dt = store.load_datatree(path, handle=fh)
    except ArtifactError as err:
        summary = {"fit_id": path.stem, "verdict": {"converged": False, "failures": [str(err)],
                                                    "text": f"fit could not be read: {err}"}}
        render_whole(summary, None, out_dir)
        raise
    from ddtree_bayes.engine.question import default_question

    # a fit of several models needs --model for its default sections: refused now, not after
    # the seconds of diagnostics (a walkthrough waited ~6 s for it)
    default_question(draws, model)
    summary = compute(draws, dt, seed=seed, model=model, priors_path=priors)
    summary["stale"] = stale_warnings(draws, here=workdir is None)
    summary["above_peak"] = above_peak_warnings(draws, model)
    render_whole(summary, draws, out_dir, dt)
    return out_dir, summary


def above_peak_warnings(draws: Fit, model: str | None = None) -> list[str]:
    """A system whose ``compute_eff`` posterior median exceeds 1, in words (as ``predict
    --explain`` says it of the target step): the card's compute precision is likely not the
    deployment's (engine/explain.py ``above_peak``); with ``model`` (``report --model``), of
    a fit of several models, only that model's pairs."""
    from ddtree_bayes.engine.explain import above_peak, above_peak_note

    return [above_peak_note(s, m) for s, m in above_peak(draws, model).items()]


def fit_warnings(summary: dict) -> list[str]:
    """The warnings under the verdict: the fit's inputs changed since it was made
    (``stale``), then the systems priced above their peak (``above_peak``)."""
    return [*summary.get("stale", []), *summary.get("above_peak", [])]


def stale_warnings(draws: Fit, here: bool = True) -> list[str]:
    """What ``predict`` warns of the fit (``check_fit``): its data, priors, hardware table or
    cards changed since it was made. Not its convergence (the verdict says it) nor the
    acceptance curve (the budget section says which it uses). ``here``: compare with the
    working directory's tables and cards too (a report written from the command line)."""
    from ddtree_bayes.engine.scenario import NOT_FITTED_PRIORS, check_fit

    said = check_fit(draws, allow_unconverged=True, here=here,
                     ignore_priors_sections=NOT_FITTED_PRIORS)
    return said if draws.meta["converged"] else said[1:]

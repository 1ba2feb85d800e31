"""CLI command predict: posterior tok/s intervals (numpy and h5py only; see the predict-path
contract in pyproject.toml)."""

from __future__ import annotations

import argparse
import sys

from ddtree_bayes.cli.output import PROG, _emit_machine, _fmt, render_table
from ddtree_bayes.core.config import form_label
from ddtree_bayes.core.errors import DDTreeBayesError, QueryError


# ---------------------------------------------------------------- predict
def check_names(draws, args: argparse.Namespace, engines: list[str] | None, *,
                strict: bool | None = None, prefix: str = "") -> None:
    """Names never measured nor declared: hardware is an error (nothing to predict from);
    an engine, method or model one warning line each, an error with --strict. ``prefix``
    names where the flags came from (e.g. ``--query``)."""
    from ddtree_bayes.engine import names as N

    strict = args.strict if strict is None else strict
    unknown = N.unknown_names(draws, hardware=args.hardware, engines=engines,
                              method=args.method, model=getattr(args, "model", None))
    for u in unknown:
        if u.kind in ("hardware", "model") or strict:
            raise QueryError(prefix + u.message(), fix="check the spelling" + (
                "" if u.kind in ("hardware", "model") else ", or drop --strict to answer anyway"))
        print(f"{PROG}: warning: {prefix}{u.message()}", file=sys.stderr)


def check_accept(draws, text: str | None, method: str, block: int | None, budget: int | None,
                 verify_tokens: int | None, prefix: str = "") -> None:
    """--accept against what the configuration can emit per step, by the fit's methods table
    (:func:`~ddtree_bayes.core.methods.max_accept`; one line naming the limit, before anything
    is printed; ``prefix`` names where the flags came from, e.g. ``--query: ``)."""
    from ddtree_bayes.engine import predictive as P

    if text is None:
        return
    P.check_accept(P.parse_accept(text), text,
                   P.accept_limit(draws, method, block, budget, verify_tokens), prefix)


def default_note(asked: dict, given: argparse.Namespace,
                 flags: str = "--hardware/--method/--block/--budget") -> str:
    """One line: why a derived default scenario is asked (``asked``: its ``to_json()``), and
    what it is; when ``given`` (the parsed flags) names part of the configuration, the default
    only fills the flags not given."""
    partial = given.hardware is not None or any(
        (given.method, given.gpus, given.block, given.budget, given.verify_tokens))
    what = ("the flags not given come from its most-measured system" if partial
            else "asking its most-measured system")
    return f"{asked['why']}; {what}: {asked['asked']} (pass {flags} to ask another)"


def typed_rows(rows: list[dict], accept: str | None) -> list[dict]:
    """predict rows for machines: ``accept`` a number (given) or null, with
    ``accept_distribution`` describing a range (uniform lo, hi) or the acceptance prior (its
    parameters as drawn: truncated at what a step can emit)."""
    from ddtree_bayes.engine.scenario import parse_accept

    req = parse_accept(accept) if accept is not None else None
    given = {f"{v:g}": v for v in (req.values if req else ())}
    out = []
    for row in rows:
        r = dict(row)
        label, kind = r["accept"], r["accept_kind"]
        posterior = r.pop("accept_posterior", None)
        measured = r.pop("accept_measured", None)
        prior = r.pop("accept_prior", None)
        dist: dict | None = None
        if kind == "posterior" and posterior is not None:
            r["accept"] = None
            dist = {"family": "posterior", "group": posterior["group"],
                    "rows": posterior["rows"], "median": posterior["median"],
                    "lo90": posterior["lo90"], "hi90": posterior["hi90"], "label": label}
        elif kind == "given":
            r["accept"] = given.get(label, float(label))
        elif kind == "measured":
            r["accept"] = measured
        elif kind == "uniform" and req is not None and req.uniform is not None:
            lo, hi = req.uniform
            r["accept"] = None
            dist = {"family": "uniform", "lower": lo, "upper": hi, "label": label}
        else:
            r["accept"] = None
            dist = {"family": prior["dist"] if prior else kind,
                    "params": dict(prior["params"]) if prior else {}, "label": label}
            if prior and prior["truncated_at"] is not None:
                dist["truncated_at"] = prior["truncated_at"]
        r["accept_distribution"] = dist
        out.append(r)
    return out


def cmd_predict(args: argparse.Namespace) -> int:
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine import store

    draws = store.load(args.fit)
    for warning in P.check_fit(draws, allow_unconverged=args.allow_unconverged,
                               strict=args.strict):
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    engines = args.engine.split(",") if args.engine else None
    check_names(draws, args, engines)
    default = P.default_scenario(draws, args.model)
    query, from_default = P.fill_query(default, hardware=args.hardware, gpus=args.gpus,
                                       method=args.method, engines=engines, block=args.block,
                                       budget=args.budget, verify_tokens=args.verify_tokens)
    check_accept(draws, args.accept, query["method"], query["block"], query["budget"],
                 query["verify_tokens"])
    asked = default.to_json() if default.derived and from_default else None
    if asked is not None:
        print(f"{PROG} predict: {default_note(asked, args)}", file=sys.stderr)
    mixture = None
    if args.model_average:
        from ddtree_bayes.engine import compare  # only with --model-average (PSIS-LOO weights)

        fits = _latest_per_form(draws)
        weights = compare.compare_fits(fits, seed=args.seed)["weights"]
        mixture = [(d, weights[d.meta["fit_id"]]) for d in fits]
        print(f"{PROG}: model average: " + ", ".join(
            f"{d.meta['fit_id']} ({form_label(d.meta)}) {w:.2f}" for d, w in mixture),
            file=sys.stderr)
    import numpy as np

    with np.errstate(all="ignore"):   # an overflow is named below, as one line
        rows = P.predict_rows(draws, **query, context_tokens=args.context,
                              accept=args.accept, target=args.target, prob=args.prob,
                              seed=args.seed, mixture=mixture, model=args.model)
    P.require_finite(rows)   # never a table of nan
    meta = draws.meta
    if args.format != "table":
        _emit_machine(typed_rows(rows, args.accept), args.format,
                      {"fit_id": meta["fit_id"], "seed": args.seed,
                                          "interval_probs": list(P.interval_probs(args.prob)),
                                          "target": args.target, "draws": draws.n_draws,
                                          "default_scenario": asked})
        return 0
    probs = P.interval_probs(args.prob)
    first = rows[0]
    sc_line = ((f"{first['model']}, " if "model" in first else "")
               + f"{first['hardware']} x{first['gpus']}, {first['method']}"
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
    for note in sorted({r["accept_posterior"]["note"] for r in rows
                        if r["accept_kind"] == "posterior"}):
        print(f"{note} (pass --accept to fix it).")
    if any(r["accept_kind"] == "uniform" for r in rows):
        print("U(lo,hi) rows marginalise acceptance as Uniform(lo, hi).")
    for note in notes:
        print(f"  {note}")
    return 0


def _latest_per_form(anchor, flag: str = "--model-average") -> list:
    """The latest converged fit of each MoE form made on the same data as ``anchor``
    (``flag``: what asked for them, named in the error)."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.engine import store

    fits_dir = store.fits_dir(paths.models_dir())
    best: dict[str, object] = {}
    for path in sorted(fits_dir.glob("*.nc")):
        try:
            d = store.load_fit(path)
        except DDTreeBayesError:
            continue
        if d.meta["converged"] and d.meta["data"]["sha256"] == anchor.meta["data"]["sha256"]:
            best[form_label(d.meta)] = d  # sorted by id = by time: the last wins
    if len(best) < 2:
        raise QueryError(f"{flag} needs converged fits of two model forms on the data of fit "
                         f"{anchor.meta['fit_id']}; found {len(best)}",
                         fix="fit the other form, e.g. `ddtree-bayes fit --moe-form linear`"
                             + (", or name the fits with --fits A,B" if flag != "--model-average"
                                else ""))
    return list(best.values())

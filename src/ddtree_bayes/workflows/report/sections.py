"""The report's sections about the default scenario (the question the fit is asked when none
is given: :func:`ddtree_bayes.engine.predictive.default_scenario`): the fan chart, the variance
shares, the step breakdown, and the decisions (best budget, next measurement, every GPU).

A fit that measured B300 gets the bundled default (B300 x8 DDTree block 16 / budget 32, SGLang
and native; acceptance 1-20 on the fan, U(12, 16) for the variance shares, 14 for one-number
answers); a fit that never did gets its own most-measured configuration. Either way the
acceptances stop at what a step of the configuration can emit
(:func:`~ddtree_bayes.core.methods.max_accept`: 16 = block for the bundled default, whose
block's position 0 is the anchor), and
the fan says where it clipped its grid.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import DefaultQuestion
from ddtree_bayes.core.data import accept_flag, accept_shown, config_label
from ddtree_bayes.core.errors import DDTreeBayesError
from ddtree_bayes.core.likelihood import CONFIG_SD, likelihood_nu
from ddtree_bayes.core.methods import AcceptLimit
from ddtree_bayes.core.pairs import pair_label, split_label
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.explain import shapley_variance_shares  # noqa: F401  (report's)
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.question import AcceptSource, Flags, default_question, resolve
from ddtree_bayes.engine.structure import (
    group_label,
    paying_fields,
    run_sd,
    uncertain_at,
)
from ddtree_bayes.engine.target_models import is_multi
from ddtree_bayes.engine.transfer import rows_behind

#: Acceptance grid of the fan chart.
FAN_ACCEPT = tuple(float(a) for a in range(1, 21))
#: Acceptance range used for the variance decomposition (the original question).
DECOMP_ACCEPT = (12.0, 16.0)


def fan_accept(d: DefaultQuestion, limit: AcceptLimit) -> tuple[float, ...]:
    """The fan's acceptance grid: :data:`FAN_ACCEPT` up to what a step of the default
    configuration ``d`` can emit (``limit``, :func:`~ddtree_bayes.core.methods.max_accept`:
    never above its verify tokens M), with the acceptance of one-number answers
    (``d.accept``, a measured 2.79 for a fit's own default) in its place.

    >>> import dataclasses
    >>> from ddtree_bayes.core.config import DEFAULT_QUESTION
    >>> from ddtree_bayes.core.methods import max_accept
    >>> fan_accept(DEFAULT_QUESTION, max_accept("ddtree", 16, 32, None, 33))[-3:]
    (14.0, 15.0, 16.0)
    >>> fan_accept(dataclasses.replace(DEFAULT_QUESTION, accept=2.79),
    ...            max_accept("eagle3", 3, None))
    (1.0, 2.0, 2.79, 3.0, 4.0)
    """
    grid = {a for a in FAN_ACCEPT if a <= limit.tokens} | {headline_accept(d, limit)}
    return tuple(sorted(grid))


def headline_accept(d: DefaultQuestion, limit: AcceptLimit) -> float:
    """The acceptance of one-number answers (``d.accept``: 14 for the bundled default, its
    measured median for a fit's own), within 1 .. what a step can emit (``limit``)."""
    return float(min(max(d.accept, 1.0), limit.tokens))


def decomp_accept(d: DefaultQuestion, limit: AcceptLimit) -> tuple[float, float]:
    """The variance shares' acceptance range: :data:`DECOMP_ACCEPT` for the bundled default;
    for a derived one, its acceptance +-2; either within 1 .. what a step can emit (``limit``).

    >>> from ddtree_bayes.core.config import DEFAULT_QUESTION
    >>> from ddtree_bayes.core.methods import max_accept
    >>> decomp_accept(DEFAULT_QUESTION, max_accept("ddtree", 16, 32)), decomp_accept(
    ...     DEFAULT_QUESTION, max_accept("ddtree", 13, 32))
    ((12.0, 16.0), (12.0, 13.0))
    """
    lo, hi = DECOMP_ACCEPT if not d.derived else (d.accept - 2, d.accept + 2)
    hi = min(hi, limit.tokens)
    return max(1.0, min(lo, hi - 1.0)), max(hi, 1.0)


def _logit(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 1e-12, 1 - 1e-12)
    return np.log(x / (1 - x))


def quantiles5(x: np.ndarray, probs=(0.05, 0.25, 0.5, 0.75, 0.95)) -> list[float]:
    return [float(v) for v in np.quantile(x, probs)]


def _default_scenarios(draws: Fit, model: str | None = None, d: DefaultQuestion | None = None):
    """The resolved scenarios (one per engine) of the fit's default question, as ``predict``
    without configuration flags resolves it (``d``: the default question, when known)."""
    return list(resolve(draws, Flags(model=model), acceptance=False).scenarios)


def headline_log_tok(draws: Fit, seed: int, model: str | None = None,
                      d: DefaultQuestion | None = None) -> np.ndarray:
    d = d or default_question(draws, model)
    sc = _default_scenarios(draws, model, d)[0]
    step, _ = P.step_draws(draws, sc, np.random.default_rng(seed))
    return np.log(headline_accept(d, sc.limit) * 1000.0 / step)


def answer_warnings(draws: Fit, seed: int, model: str | None = None,
                    memo: dict | None = None) -> list[str]:
    """What ``predict`` (``--model``; no configuration flags: the default question the answer
    line asks) warns of, in its words: a step past the configurations measured ("partly
    prior-driven"), a drafter no row of the configuration ran, a system without rows of its
    own ... The answer line said its number without them (B300 DDTree at M = 33 from rows of
    M <= 9; a generic eagle3 drafter where every row named another card, whose passes the fit
    priced 2.92x). Empty when ``predict`` cannot answer (the sections say why). ``memo``: the
    predictive draws the fan computed (:func:`default_answer`), not drawn again."""
    try:   # (predict's resolve, rows and warnings: P.predict without configuration flags)
        question = resolve(draws, Flags(model=model))
        rows = P.predict_rows(draws, question, seed=seed, memo=memo)
        warned = P.answer_warnings(draws, question, rows)
    except DDTreeBayesError:
        return []
    return list(dict.fromkeys(warned))


def default_answer(draws: Fit, seed: int, model: str | None = None,
                   d: DefaultQuestion | None = None) -> dict:
    """The report's sections of the default question's posterior predictive: the fan
    (``fan``), what predict warns of the answer line (``answer_warnings``) and the
    per-concurrency figure (``concurrency``), each scenario's draws computed once
    (:func:`~ddtree_bayes.engine.predictive.per_token_draws`' memo) and shared: the answer
    line's warnings drew the fan's again, and the figure's C = 1 did too."""
    memo: dict = {}
    return {"fan": fan_section(draws, seed, model, d, memo=memo),
            "answer_warnings": answer_warnings(draws, seed, model, memo=memo),
            "concurrency": concurrency_section(draws, seed, model, d, memo=memo)}


def fan_section(draws: Fit, seed: int, model: str | None = None, d: DefaultQuestion | None = None,
                memo: dict | None = None) -> dict:
    seed_table = P.load_seed_table()
    engines = {}
    d = d or default_question(draws, model)
    scenarios = _default_scenarios(draws, model, d)
    limit = scenarios[0].limit   # (engines share the configuration, so its limit)
    grid = fan_accept(d, limit)
    for sc in scenarios:
        per_token, _ = P.per_token_draws(draws, sc, seed, memo=memo)   # predict's, digit for digit
        original = P.seed_rows(seed_table, sc)   # (predict's original column, its rows)
        engines[sc.engine] = {
            "scenario": sc.describe(), "measured": bool(sc.measured),
            "quantiles": [quantiles5(a * per_token) for a in grid],
            "original": None if not original else [P.original_tok_s(original, a)
                                                    for a in grid],
            "original_points": [{"accept": float(r["accept_len"]), "tok_s": float(r["tok_s"])}
                                for r in original],
        }
    measured = [{"accept": m.accept_len, "tok_s": m.tok_s,
                 "label": f"{m.engine} {m.method} M={m.verify_tokens}"}
                for m in draws.measurements.rows
                if m.hardware == d.hardware and d.gpus in (None, m.gpus)
                and m.accept_len is not None and model in (None, m.model)]
    return {"accept": list(grid), "quantile_probs": [0.05, 0.25, 0.5, 0.75, 0.95],
            "engines": engines, "measured": measured,
            "headline_accept": headline_accept(d, limit),
            # no acceptance measured, inferred or in the priors for it: the answer line says so
            "headline_accept_assumed": d.accept_assumed,
            # the grid stops at what a step can emit; the acceptances it left out, if any
            "accept_max": limit.tokens, "accept_max_rule": limit.rule,
            "accept_clipped": [a for a in FAN_ACCEPT if a not in grid]}


#: The concurrencies of the report's per-user / total figure.
CONCURRENCY_GRID = (1, 2, 4, 8, 16, 32, 64, 128)


def concurrency_section(draws: Fit, seed: int, model: str | None = None,
                        d: DefaultQuestion | None = None, memo: dict | None = None) -> dict:
    """Per-user and total tok/s of the default question at its headline acceptance, and of
    autoregressive decoding on the same system, against concurrency C
    (:data:`CONCURRENCY_GRID`); per engine P(faster than AR) at each C and where it pays
    (:func:`~ddtree_bayes.engine.structure.paying_fields`: every, stops, starts, never or
    mixed, and at which C)."""
    d = d or default_question(draws, model)
    scenarios = _default_scenarios(draws, model, d)
    accept = headline_accept(d, scenarios[0].limit)
    out: dict = {"accept": accept, "concurrency": list(CONCURRENCY_GRID), "engines": {},
                 "quantile_probs": [0.05, 0.25, 0.5, 0.75, 0.95],
                 # the rows behind the scenario's step, as predict --concurrency counts
                 # them (another system's C = 16 shaded B300's roofline extrapolation as
                 # measured)
                 "measured_max": rows_behind(draws, scenarios[0]).max_concurrency or 1}
    ar = scenarios[0].autoregressive()
    series = [("ar", ar, 1.0)] + [(sc.engine, sc, accept) for sc in scenarios]
    for name, sc, a in series:
        per_user, total, p_ar = [], [], []
        for c in CONCURRENCY_GRID:
            at_c = dataclasses.replace(sc, concurrency=c)
            tok = a * P.per_token_draws(draws, at_c, seed, memo=memo)[0]   # as predict
            per_user.append(quantiles5(tok))
            total.append(quantiles5(c * tok))
            if name != "ar":   # predict --concurrency's draws (its acceptance keys them)
                given = AcceptSource("given", f"{a:g}", value=a)
                p_ar.append(P.p_faster_than_ar(draws, at_c, np.full(draws.n_draws, a),
                                               P.versus_ar_rng(seed, at_c, given)))
        entry = {"scenario": at_c.describe().rsplit(", concurrency", 1)[0],
                 "per_user": per_user, "total": total}
        if name != "ar":
            entry["p_faster_than_ar"] = p_ar
            entry.update(paying_fields(list(CONCURRENCY_GRID), p_ar),
                         uncertain_at=uncertain_at(list(CONCURRENCY_GRID), p_ar))
        out["engines"][name] = entry
    return out


def variance_shares(draws: Fit, seed: int, model: str | None = None,
              d: DefaultQuestion | None = None) -> dict:
    """Shapley shares of the variance of log tok/s in the default scenario, per engine
    (:func:`shapley_variance_shares`: correlated factors share credit), acceptance marginalised
    as Uniform(``accept``) (:func:`decomp_accept`: U(12, 16) for the bundled default, not the
    answer line's 14)."""
    v, coords = draws.variables, draws.meta["coords"]
    rng = np.random.default_rng(seed)
    out: dict = {}
    d = d or default_question(draws, model)
    for sc in _default_scenarios(draws, model, d):
        lo, hi = decomp_accept(d, sc.limit)
        # a pair never measured has no parameters of its own (the pair roofline answers it)
        s = coords["system"].index(sc.pair) if sc.pair in coords["system"] else None
        parts, how = P.step_components(draws, sc, rng)
        step = parts["step"]
        accept = rng.uniform(lo, hi, draws.n_draws)
        noise = run_sd(draws)
        eps = noise * rng.standard_normal(draws.n_draws)
        nu = likelihood_nu(v)   # Student-t: noise and discrepancy share the mixture's scale
        mix = 1.0 if nu is None else 1.0 / np.sqrt(rng.gamma(nu / 2.0, 2.0 / nu, draws.n_draws))
        eps = eps * mix
        y = np.log(accept * 1000.0 / step) + eps
        # regress on scales where the step formula is close to linear in log tok/s
        factors = {f"acceptance U({accept_shown(lo)},{accept_shown(hi)})": np.log(accept),
                   ("run-to-run and configuration noise" if CONFIG_SD in v
                    else "run-to-run noise"): eps}
        if s is not None:
            factors[f"step_ar_ms[{sc.pair}]"] = np.log(v["step_ar_ms"][:, s])
            factors[f"moe_share[{sc.pair}]"] = _logit(v["moe_share"][:, s])
        extra_sd = np.sqrt(np.maximum(parts["log_sd"] ** 2 - noise ** 2, 0.0))
        if np.any(extra_sd > 0):   # structured form: the distance-scaled discrepancy
            disc = extra_sd * rng.standard_normal(draws.n_draws) * mix
            y = y + disc
            factors["structural discrepancy"] = disc
        tied = parts.get("spec_tied")
        if tied is not None and np.any(tied != 0):  # own per-pass/per-node cost, unmeasured
            factors["own drafter/tree cost beyond the measured depth/budget"] = tied
        shape_name = S.SHAPE_NAMES[draws.meta["model"]["moe_form"]]
        if s is not None:
            factors[f"{shape_name}[{sc.pair}]"] = v[shape_name][:, s]
        if "compute_eff" in v and s is not None:
            factors[f"compute_eff[{sc.pair}]"] = np.log(v["compute_eff"][:, s])
        if sc.context_tokens > 0 and s is not None:
            factors[f"ctx_ms_per_unit[{sc.pair}]"] = np.log(v["ctx_ms_per_unit"][:, s])
        label = group_label(draws, sc.pair, sc.engine, sc.method)
        if label in coords["overhead_group"]:
            g = coords["overhead_group"].index(label)
            if "overhead_frac" in v:
                factors[f"overhead_frac[{label}]"] = _logit(v["overhead_frac"][:, g])
            for part in ("fixed", "pass", "tree"):
                if f"spec_{part}_ratio" in v:
                    factors[f"spec_{part}_ratio[{label}]"] = np.log(v[f"spec_{part}_ratio"][:, g])
        if sc.engine in coords["relation"]:
            factors[f"reduction[{sc.engine}]"] = _logit(
                v["reduction"][:, coords["relation"].index(sc.engine)])
        dec = shapley_variance_shares(y, factors)
        out[sc.engine] = {"accept": [float(lo), float(hi)], "var_log_tok_s": float(np.var(y)),
                          "r2": dec["r2"],
                          "shares": dict(sorted(dec["shares"].items(), key=lambda kv: -kv[1])),
                          "not_attributed": 1.0 - dec["r2"]}
    return out


def fewest_gpus_holding(draws: Fit, model: str | None, hardware: str,
                        counts: tuple[int, ...] = (1, 2, 4, 8)) -> int:
    """The fewest of ``counts`` GPUs of ``hardware`` whose memory holds the model's weights
    (by its card and the table's ``memory_gb``; the largest when none does or it cannot be
    told, and the row then says why)."""
    from ddtree_bayes.core.model_cards import stored_card
    from ddtree_bayes.engine.scenario import memory_gb

    card, memory = stored_card(draws.meta.get("model", {}), model), memory_gb(draws, hardware)
    if card is None or memory is None:
        return counts[-1]
    return next((n for n in counts if card.weights_gb <= memory * n), counts[-1])


#: The query of the report's "what to measure next" section.
NEXT_QUERY = "--engine native --accept 14"


def decisions_section(draws: Fit, seed: int, model: str | None = None,
               d: DefaultQuestion | None = None, priors_path: str | Path | None = None) -> dict:
    """Best budget per default engine (on the default's system; its ``warnings`` as
    ``optimize`` prints them, another model's acceptance curve first), next-measurement ranking for
    the default query, and every GPU of the hardware table (measured or transferred) in the
    default's first engine and configuration. ``priors_path`` (``report --priors``): the
    priors file of the acceptance curve, as ``optimize --priors`` (default: the fit's own
    file while it exists, :func:`~ddtree_bayes.workflows.decisions.curve_priors_file`). A
    failure of one part is recorded, not raised: the rest of the report still renders."""
    from ddtree_bayes.workflows import decisions as D
    from ddtree_bayes.workflows.decisions.optimize import curve_model_warning

    out: dict = {}
    d = d or default_question(draws, model)
    try:
        # optimize's curve (the same priors file's), its method and block
        curve, differs = D.acceptance_curve_for(draws, priors_path)
        out["optimize"] = {}
        for e in d.engines:
            opt = D.optimize(draws, curve, hardware=d.hardware, gpus=d.gpus, engine=e,
                             seed=seed, model=model)
            # optimize's own lines: the curve not the fit's, another model's, as it prints them
            other = curve_model_warning(draws, curve, opt)
            out["optimize"][e] = {**opt, "warnings": [*differs, *([other] if other else []),
                                                      *opt["warnings"]]}
    except DDTreeBayesError as err:
        out["optimize_error"] = str(err)
    try:
        query = (NEXT_QUERY if not d.derived
                 else f"--engine {d.engines[0]} --accept {accept_flag(d.accept)}"
                 ) + (f" --model {model}" if is_multi(draws) else "")
        out["next"] = D.next_measurements(draws, D.parse_query(draws, query), seed=seed)
    except DDTreeBayesError as err:
        out["next_error"] = str(err)
    table = draws.hardware
    # the GPU count of the model's measured systems (the smallest); a model never measured
    # (a card only) has none of its own: per GPU the fewest of 1, 2, 4, 8 holding its weights
    own = [p[2] for p in map(split_label, draws.measured_systems) if p[0] in (None, model)]
    count = d.gpus or (min(own) if own else None)
    engine, shape = d.engines[0], "/".join(f"{k}{v}" for k, v in (("b", d.block), ("B", d.budget))
                                            if v is not None)
    # (b block / B budget, as a fit's own default and `diff`'s tracked queries say them:
    # the bundled default's "DDTree b32" read as block 32)
    out["hardware_query"] = f"{engine} {d.method} {shape} accept {accept_shown(d.accept)}"
    rows = []
    amd: dict[str, list[str]] = {}   # predict's AMD warning (past its GPU's name): the GPUs
    for hw in table:
        gpus = count or fewest_gpus_holding(draws, model, hw)
        warned: list[str] = []
        try:
            ar = P.predict(draws, hardware=hw, gpus=gpus, method="ar", engines=[engine],
                           accept="1", seed=seed, model=model)[0]
            tree = P.predict(draws, hardware=hw, gpus=gpus, engines=[engine], method=d.method,
                             block=d.block, budget=d.budget, verify_tokens=d.verify_tokens,
                             accept=accept_flag(d.accept), seed=seed, model=model,
                             warnings=warned)[0]
        except DDTreeBayesError as err:   # e.g. GPUs that cannot hold the model's weights
            rows.append({"hardware": hw, "gpus": gpus,
                         "memory_gb_total": _float(table[hw].get("memory_gb")) * gpus,
                         "error": str(err)})
            continue
        rows.append({"hardware": hw, "gpus": gpus,
                     "measured": pair_label(model or "", f"{hw}x{gpus}", is_multi(draws))
                                 in draws.measured_systems,
                     "interconnect": table[hw].get("interconnect", ""),
                     "memory_gb_total": _float(table[hw].get("memory_gb")) * gpus,
                     "ar": [ar["lo90"], ar["median"], ar["hi90"]],
                     "ddtree": [tree["lo90"], tree["median"], tree["hi90"]]})
        # an AMD GPU priced with no learned AMD term: said once for all of them, as predict
        # says it for one (engine/structure.py amd_overhead_warning)
        for w in warned:
            if w.startswith(f"{hw} is an AMD GPU"):
                amd.setdefault(w[len(hw):], []).append(hw)
    out["hardware"] = rows
    out["hardware_warnings"] = [f"{out['hardware_query']} on {', '.join(hws)}: each{rest}"
                                for rest, hws in amd.items()]
    return out


def _float(text: str | None) -> float:
    try:
        return float(text or "nan")
    except ValueError:
        return float("nan")


def step_breakdown(draws: Fit, measurements, seed: int, model: str | None = None,
               d: DefaultQuestion | None = None) -> list[dict]:
    """Step terms of every measured configuration (repeated runs: once, against the median
    of their measured steps) and of the default scenarios."""
    from ddtree_bayes.core.likelihood import group_rows, rows_of

    rng = np.random.default_rng(seed)
    configs = []
    row_config, first = group_rows(measurements.rows)
    # rows without accept_len have no measured step (their acceptance is inferred): NaN
    steps = np.array([np.nan if m.step_ms is None else m.step_ms for m in measurements.rows])
    for i, mine_ix in zip(first, rows_of(row_config, len(first)), strict=True):
        m = measurements.rows[i]
        sc = P.row_scenario(draws, m)
        mine = steps[mine_ix]
        runs = f" ({len(mine)} runs)" if len(mine) > 1 else ""
        configs.append((f"row {m.row}{runs}: " + config_label(
            sc.pair, sc.engine, sc.method, sc.verify_tokens, sc.context_tokens, sc.concurrency), sc,
                        None if np.isnan(mine).all() else float(np.nanmedian(mine))))
    for sc in _default_scenarios(draws, model, d):
        configs.append((f"default: {sc.pair} {sc.engine} {sc.method} M={sc.verify_tokens}", sc,
                        None))
    out = []
    for label, sc, measured in configs:
        parts, _ = P.step_components(draws, sc, rng)
        out.append({"config": label, "measured_step_ms": measured,
                    **{k: quantiles5(a, (0.05, 0.5, 0.95)) for k, a in parts.items()
                       if k not in ("log_sd", "spec_tied")}})
    return out

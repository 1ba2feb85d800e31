"""Posterior draws -> throughput intervals for requested configurations.

numpy only (no PyMC, no xarray, no pandas unless a DataFrame is asked for), so a
``predict`` from a cold process stays well under a second. The query side (acceptance,
context, scenario resolution) is in :mod:`ddtree_bayes.engine.scenario` and re-exported here.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from ddtree_bayes.core import paths
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import (
    DEFAULT_SEED,
    AcceptancePrior,
)
from ddtree_bayes.core.data import AR_METHOD
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine.fit import Fit
from ddtree_bayes.engine.scenario import (  # noqa: F401  (re-exported: P.Scenario, P.check_fit, ...)
    SEED_BAND,
    AcceptRequest,
    Scenario,
    accept_limit,
    acceptance_prior,
    check_accept,
    check_fit,
    default_scenario,
    fill_query,
    latent_acceptance,
    measured_acceptance,
    parse_accept,
    parse_context,
    resolve_scenario,
    row_acceptance,
)
from ddtree_bayes.engine.structure import (
    distinct_ratio,
    draft_structure,
    query_log_sd,
    tied_ratio_spread,
)
from ddtree_bayes.engine.transfer import transferred_parameters  # noqa: F401  (P.transferred_...)


def step_draws(draws: Fit, sc: Scenario, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """Posterior draws of step_ms (without measurement noise) and how the overhead was found.

    The overhead of an unmeasured (system, engine, method) group is drawn from the
    partially pooled population; an engine with a declared relation scales its base
    engine's SPEC by ``1 - reduction``.
    """
    parts, how = step_components(draws, sc, rng)
    return parts["step"], how


def step_components(draws: Fit, sc: Scenario, rng: np.random.Generator
                    ) -> tuple[dict[str, np.ndarray], str]:
    """Posterior draws of each term of the step (ms): ``moe``, ``attn_base``, ``context``,
    ``spec`` and their sum ``step``; ``log_sd``, the predictive sd of log tok/s (run-to-run
    noise, plus the structural discrepancy for the distance from the nearest measured
    configuration in the structured form); and how the overhead was found."""
    v, meta = draws.variables, draws.meta
    model = meta["model"]
    form = model["moe_form"]
    step_form = model.get("step_form", "fraction")
    roofline: dict = {}
    if sc.measured:
        s = meta["coords"]["system"].index(sc.pair)
        step_ar, share = v["step_ar_ms"][:, s], v["moe_share"][:, s]
        shape = v[S.SHAPE_NAMES[form]][:, s]
        ctx_ms, transfer_how = v["ctx_ms_per_unit"][:, s], ""
        if form == "roofline":
            roofline["tok_ratio"] = v["compute_tok_ratio"][:, s]
    else:
        t, transfer_how = transferred_parameters(draws, sc, rng)
        step_ar, share, shape, ctx_ms = (t["step_ar_ms"], t["moe_share"], t["moe_shape"],
                                         t["ctx_ms_per_unit"])
        if form == "roofline":
            roofline["tok_ratio"] = t["tok_ratio"]
    if form == "roofline":
        roofline["distinct"] = distinct_ratio(model, sc.verify_tokens, sc.model)
        roofline["knee"] = model.get("knee", 3.0)
    units = sc.context_tokens / model["context_unit_tokens"]
    M = float(sc.verify_tokens)
    target = S.target_ms(step_ar, share, shape, ctx_ms, v["ctx_verify_exponent"], M, units, form,
                         np.exp, np.log, **roofline)
    attn_base = (1.0 - share) * step_ar
    context = ctx_ms * units * M ** v["ctx_verify_exponent"]
    parts = {"moe": target - attn_base - context, "attn_base": attn_base, "context": context}
    passes, nodes = draft_structure(model, sc.method, sc.block, sc.budget)
    log_sd = query_log_sd(draws, sc, passes)
    if sc.method == AR_METHOD:
        return ({**parts, "spec": np.zeros_like(target), "step": target, "log_sd": log_sd},
                transfer_how + "autoregressive")
    bases = model["relation_bases"]
    engine, scale, how = sc.engine, np.ones(draws.n_draws), transfer_how
    if engine in bases:
        k = meta["coords"]["relation"].index(engine)
        scale = 1.0 - v["reduction"][:, k]
        engine = bases[engine]
        how += f"{sc.engine} = (1 - reduction) x {engine} overhead; "
    label = S.group_label(sc.pair, engine, sc.method)
    groups = meta["coords"]["overhead_group"]
    measured = label in groups
    how += (f"overhead of measured group {label}" if measured else
            f"overhead of unmeasured group {label} drawn from the pooled population")
    if step_form == "structured":
        ratios = []
        for part in ("fixed", "pass", "tree"):
            if measured:
                ratios.append(v[f"spec_{part}_ratio"][:, groups.index(label)])
            else:
                z = rng.standard_normal(draws.n_draws)
                ratios.append(np.exp(v[f"spec_{part}_log_mu"] + v[f"spec_{part}_log_sd"] * z))
        fixed, per_pass, per_node = ratios
        spec = S.structured_spec_ms(step_ar, fixed, per_pass, per_node, passes, nodes, scale)
        tied = np.zeros(draws.n_draws)
        if measured:   # fewer passes than measured cannot save more than the group's SPEC
            tied = tied + tied_ratio_spread(draws, label, {"pass": passes, "tree": nodes},
                                            step_ar * scale, rng)
            spec = np.maximum(spec + tied, 0.0)
        # spec_tied: the part of SPEC from the group's own (unmeasured) per-pass/per-node cost
        return {**parts, "spec": spec, "step": target + spec, "log_sd": log_sd,
                "spec_tied": tied}, how
    if measured:
        frac = v["overhead_frac"][:, groups.index(label)]
    else:
        z = rng.standard_normal(draws.n_draws)
        logit = v["overhead_logit_mu"] + v["overhead_logit_sd"] * z
        frac = 1.0 / (1.0 + np.exp(-logit))
    step = S.step_ms(target, frac, scale)
    return {**parts, "spec": step - target, "step": step, "log_sd": log_sd}, how


def sample_acceptance(prior: AcceptancePrior, n: int, rng: np.random.Generator) -> np.ndarray:
    """Fit from an acceptance prior (numpy only; truncated normal by rejection)."""
    from ddtree_bayes.core.sampling import prior_sample

    return prior_sample(prior.prior, n, rng)


def load_seed_table(workdir: Path | None = None) -> list[dict[str, str]]:
    """The original deterministic estimates (data/seed_estimates.csv or the bundled copy)."""
    with open(paths.data_file("seed_estimates.csv", workdir), newline="") as fh:
        return list(csv.DictReader(fh))


#: The model of the original estimates (data/seed_estimates.csv has no model column).
SEED_MODEL = "kimi-k2.6"


def seed_step_ms(table: list[dict[str, str]], sc: Scenario) -> float | None:
    """The original estimator's step time for this configuration (mean of accept/tok_s over
    its 'deterministic estimate' rows, all of :data:`SEED_MODEL` unless the table has a
    ``model`` column); tok/s at any acceptance is then accept / step."""
    steps = []
    for row in table:
        if sc.model is not None and (row.get("model") or SEED_MODEL) != sc.model:
            continue
        if (row["kind"] == "deterministic estimate" and row["hardware"] == sc.hardware
                and row["engine"] == sc.engine and row["method"] == sc.method
                and row["verify_tokens"] == str(sc.verify_tokens)):
            steps.append(float(row["accept_len"]) / float(row["tok_s"]) * 1000.0)
    return float(np.mean(steps)) if steps else None


def interval_probs(prob: float) -> tuple[float, ...]:
    if not 0 < prob < 1:
        raise QueryError(f"--prob {prob} is not between 0 and 1", fix="use e.g. --prob 0.8")
    return tuple(sorted({0.5, round(prob, 6)}))


def pct_label(p: float) -> str:
    return f"{p * 100:g}"


def summarize(samples: np.ndarray, probs: tuple[float, ...], target: float | None) -> dict:
    """Median, equal-tailed intervals and P(tok/s >= target) of throughput draws."""
    qs = [0.5]
    for p in probs:
        qs += [(1 - p) / 2, (1 + p) / 2]
    values = np.quantile(samples, qs)
    out = {"median": float(values[0])}
    for i, p in enumerate(probs):
        out[f"lo{pct_label(p)}"] = float(values[1 + 2 * i])
        out[f"hi{pct_label(p)}"] = float(values[2 + 2 * i])
    if target is not None:
        out["p_ge_target"] = float(np.mean(samples >= target))
    return out


def predict_rows(draws: Fit, *, hardware: str | None = None, gpus: int | None = None,
                 engines: tuple[str, ...] | list[str] | None = None, method: str | None = None,
                 block: int | None = None, budget: int | None = None,
                 verify_tokens: int | None = None, context_tokens: float | str | None = None,
                 accept: str | AcceptRequest | None = None, target: float | None = None,
                 prob: float = 0.9, seed: int = DEFAULT_SEED, workdir: Path | None = None,
                 mixture: list[tuple[Fit, float]] | None = None,
                 model: str | None = None) -> list[dict]:
    """Posterior predictive throughput for one configuration and one or more engines.

    With no configuration arguments this is the fit's default scenario
    (:func:`default_scenario`: B300 DDTree block 16, budget 32, SGLang and native, unless the
    fit never measured B300). Each row holds the median tok/s, the 50% and ``prob``
    intervals, P(tok/s >= target) and the original estimate with its +-30% band.
    ``mixture`` (pairs of fits and weights summing to 1, e.g. stacking weights from
    :mod:`compare`) averages the predictive distributions of several models.
    Predictions include the fitted run-to-run noise, so they are what a measurement
    would show. ``accept=None`` draws acceptance from the priors file. ``model`` names the
    target model (required when the fit holds several; rows then carry a ``model`` key).

    Examples
    --------
    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> draws = point_mass_draws()
    >>> rows = predict_rows(draws, accept="12", engines=["sglang"])
    >>> round(rows[0]["median"], 3)   # 12 tokens / 20 ms
    600.0
    """
    if hardware is None and method is None:   # the fit's default question, as predict fills it
        query, _ = fill_query(default_scenario(draws, model), hardware=None, gpus=gpus,
                              method=None, engines=engines, block=block, budget=budget,
                              verify_tokens=verify_tokens)
        hardware, gpus, method, engines = (query["hardware"], query["gpus"], query["method"],
                                           query["engines"])
        block, budget, verify_tokens = query["block"], query["budget"], query["verify_tokens"]
    if hardware is None or method is None or not engines:
        raise QueryError("a configuration needs --hardware, --method and --engine",
                         fix="give all three, or none for the default scenario")
    probs = interval_probs(prob)
    request = parse_accept(accept) if isinstance(accept, str) else accept
    ctx = parse_context(context_tokens)
    priors = draws.priors
    seed_table = load_seed_table(workdir)
    rng = np.random.default_rng(seed)
    rows = []
    for engine in engines:
        sc = resolve_scenario(draws, hardware=hardware, gpus=gpus, engine=engine, method=method,
                              block=block, budget=budget, verify_tokens=verify_tokens,
                              context_tokens=ctx, model=model)
        per_token, how = _per_token(draws, mixture, sc, rng)
        seed_step = seed_step_ms(seed_table, sc)
        cases: list[tuple[str, str, np.ndarray, float | None]] = []
        posterior, posterior_info = None, None
        if request is None and sc.method != AR_METHOD:
            posterior = _posterior_acceptance(draws, mixture, sc, rng)
        prior_used = None
        if posterior is not None:
            a, posterior_info = posterior
            cases.append(("posterior", "posterior", a, float(np.mean(a))))
        elif request is None:
            ap = acceptance_prior(priors, sc)
            seen = None if ap is not None else measured_acceptance(draws, sc)
            if ap is None and seen is None:
                raise QueryError(f"no acceptance prior for {sc.method} block {sc.block} budget "
                                 f"{sc.budget} in the priors file, and no measured acceptance "
                                 "of that configuration",
                                 fix="pass --accept, or add an [[acceptance]] entry to the priors")
            if ap is not None:
                a = sample_acceptance(ap, draws.n_draws, rng)
                prior_used = ap
                cases.append((f"prior {ap.describe()}", "prior", a, float(np.mean(a))))
            elif seen is not None:   # the configuration's own measured acceptance (row mean)
                value, n_rows = seen
                cases.append((f"{value:.3g} measured ({n_rows} row{'s' * (n_rows > 1)})",
                              "measured", np.full(draws.n_draws, value), value))
        else:
            check_accept(request, accept if isinstance(accept, str) else
                         ",".join(f"{v:g}" for v in request.values), sc.limit)
            for value in request.values:
                cases.append((f"{value:g}", "given", np.full(draws.n_draws, value), value))
            if request.uniform:
                lo, hi = request.uniform
                cases.append((f"U({lo:g},{hi:g})", "uniform",
                              rng.uniform(lo, hi, draws.n_draws), (lo + hi) / 2))
        for label, kind, a, a_mean in cases:
            if np.any(a < 1) or np.any(a > sc.limit.tokens) or (
                    sc.method == AR_METHOD and np.any(a != 1)):
                raise QueryError(f"acceptance {label} of {sc.describe()}: "
                                 + sc.limit.refusal("it" if np.all(a >= 1) else "it or below 1"),
                                 fix="tokens per step lie in 1 .. " + sc.limit.describe())
            row: dict[str, Any] = {"model": sc.model} if sc.multi else {}
            row |= {"hardware": sc.hardware, "gpus": sc.gpus, "engine": sc.engine,
                   "method": sc.method, "block": sc.block, "budget": sc.budget,
                   "verify_tokens": sc.verify_tokens, "context_tokens": sc.context_tokens,
                   "accept": label, "accept_max": sc.limit.tokens,
                   "accept_max_rule": sc.limit.rule, "accept_kind": kind}
            row.update(summarize(a * per_token, probs, target))
            seed_tok = None if seed_step is None or a_mean is None else a_mean / seed_step * 1000
            row["original"] = seed_tok
            row["original_lo"] = None if seed_tok is None else seed_tok * (1 - SEED_BAND)
            row["original_hi"] = None if seed_tok is None else seed_tok * (1 + SEED_BAND)
            row["overhead_from"] = how
            if kind == "posterior":   # machine output: accept_distribution (cli/predict.py)
                row["accept_posterior"] = posterior_info
            if kind == "measured":    # machine output: accept (a number)
                row["accept_measured"] = a_mean
            if kind == "prior" and prior_used is not None:   # machine output: its parameters
                row["accept_prior"] = {"dist": prior_used.prior.dist,
                                       "params": dict(prior_used.prior.params),
                                       "truncated_at": (None if prior_used.capped_by is None
                                                        else prior_used.capped_by.tokens)}
            rows.append(row)
    return rows


def _posterior_acceptance(draws: Fit, mixture, sc: Scenario, rng: np.random.Generator
                          ) -> tuple[np.ndarray, dict] | None:
    """Acceptance of a query without --accept whose (model, method, block, budget) the fit
    inferred from rows without accept_len: that group's posterior draws (aligned with the
    step's draws) and a description (group, rows, median, 90% interval); None otherwise."""
    a, group = latent_acceptance(draws, sc.model, sc.method, sc.block, sc.verify_tokens, rng)
    if group is None:
        return None
    if mixture:
        raise QueryError(f"--model-average cannot carry the inferred acceptance of "
                         f"{group['label']} across fits",
                         fix="pass --accept, or predict from one fit")
    lo, med, hi = (float(x) for x in np.quantile(a, [0.05, 0.5, 0.95]))
    return a, {"group": group["label"], "rows": len(group["rows"]), "median": med,
               "lo90": lo, "hi90": hi,
               "note": f"acceptance: posterior of the {len(group['rows'])} measured rows without "
                       f"accept_len ({group['label']}: median {med:.2f}, 90% {lo:.2f}-{hi:.2f})"}


def _per_token(draws: Fit, mixture: list[tuple[Fit, float]] | None, sc: Scenario,
               rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """Predictive tok/s per emitted token (1000 / step_ms, with measurement noise): from
    ``draws``, or a weighted mixture of several fits' predictive draws."""
    models = mixture or [(draws, 1.0)]
    n = draws.n_draws
    counts = rng.multinomial(n, [w for _, w in models]) if mixture else [n]
    parts, hows = [], []
    for (d, weight), k in zip(models, counts, strict=True):
        parts_d, how = step_components(d, sc, rng)
        # measurement noise (and structural discrepancy): what a benchmark would show
        per_token = 1000.0 / parts_d["step"] * np.exp(parts_d["log_sd"]
                                                        * rng.standard_normal(d.n_draws))
        parts.append(per_token if not mixture else rng.choice(per_token, size=k))
        hows.append(how if not mixture else f"{d.meta['fit_id']} ({d.meta['model']['moe_form']} "
                                            f"MoE, weight {weight:.2f}): {how}")
    return np.concatenate(parts), "; ".join(hows)


def require_finite(rows: list[dict]) -> None:
    """Raise :class:`QueryError` naming the first non-finite number of ``rows`` (predict
    never prints ``nan``: finite draws can still overflow for a question far from the data).

    >>> require_finite([{"engine": "sglang", "median": 700.0, "lo90": 650.0}])
    >>> try:
    ...     require_finite([{"engine": "sglang", "median": float("nan")}])
    ... except QueryError as err:
    ...     print(str(err).split(";")[0])
    the answer for sglang is not a finite number (median nan)
    """
    def bad(value, key: str):
        if isinstance(value, dict):
            return next(filter(None, (bad(v, f"{key}.{k}") for k, v in value.items())), None)
        if isinstance(value, float | np.floating) and not np.isfinite(value):
            return f"{key} {value}"
        return None

    for row in rows:
        found = next(filter(None, (bad(v, k) for k, v in row.items())), None)
        if found:
            raise QueryError(f"the answer for {row.get('engine', 'this query')} is not a finite "
                             f"number ({found}); nothing printed",
                             fix="the fit's draws are finite, so the step arithmetic failed "
                                 "for this question (an overflow, or a step of 0 ms): check the "
                                 "flags, and the fit's parameters with `ddtree-bayes report`")


def to_frame(rows: list[dict]):
    """Rows as a pandas DataFrame."""
    import pandas as pd

    return pd.DataFrame(rows)

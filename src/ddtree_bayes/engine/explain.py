"""Why an answer's interval is as wide as it is: ``predict --explain``.

For each row ``predict`` answers, the variance of its predictive log tok/s is split among the
terms of the step model, draw by draw, on the very draws the row's interval is read from
(the same keyed generators as :func:`~ddtree_bayes.engine.predictive.per_token_draws` and the
acceptance draws):

    log tok/s = log accept + log 1000 - log target - log(1 + spec / target) + noise

``target`` is the target model's verify step (MoE + attention + context, ms), ``spec`` the
speculative overhead (ms), ``noise`` one benchmark run's deviation with the structural
discrepancy (its sd grows with the distance from the nearest measured configuration). The
four terms are correlated (the overhead scales with the system's AR step), so the shares are
Shapley values of a linear regression's R^2 (:func:`shapley_variance_shares`, as the report's
variance shares); ``1 - R^2`` is what the memory-read cap takes (engine/ceiling.py).

Each term says where its draws come from, so a user sees which part of the width is the data's
and which is the priors' (the brief: "say which term is prior-driven"): the acceptance given,
measured, inferred or a prior; the target step fitted to the system's rows or transferred from
a measured system; the overhead fitted to its group, carried from a group measured elsewhere,
or drawn from the population of groups.
"""

from __future__ import annotations

import math

import numpy as np

#: The terms, in the order they are shown.
TERMS = ("acceptance", "target step", "speculative overhead", "noise and discrepancy")


def shapley_variance_shares(y: np.ndarray, factors: dict[str, np.ndarray]) -> dict:
    """Split Var(y) among correlated factors: Shapley values of a linear regression's R^2.

    Regress ``y`` on every subset of the factors; factor j's share is its marginal R^2 gain
    averaged over all orders of adding factors (Lindeman-Merenda-Gold). The shares sum to
    the full model's R^2 exactly, whatever the correlation between factors (a first-order
    Sobol index would double-count correlated factors), and ``1 - R^2`` is what a linear
    fit cannot attribute (non-linearity and interactions).

    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(size=(2, 100_000))
    >>> out = shapley_variance_shares(3 * a + 4 * b, {"a": a, "b": b})
    >>> round(out["shares"]["a"], 2), round(out["shares"]["b"], 2), round(out["r2"], 3)
    (0.36, 0.64, 1.0)
    """
    names = list(factors)
    p = len(names)
    X = np.column_stack([factors[k] for k in names])
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    yc = y - y.mean()
    tss = float(yc @ yc)
    r2: dict[int, float] = {0: 0.0}
    for mask in range(1, 2 ** p):
        cols = [j for j in range(p) if mask >> j & 1]
        beta, *_ = np.linalg.lstsq(X[:, cols], yc, rcond=None)
        resid = yc - X[:, cols] @ beta
        r2[mask] = 1.0 - float(resid @ resid) / tss if tss > 0 else 0.0
    fact = [math.factorial(k) for k in range(p + 1)]
    shares = {}
    for j, name in enumerate(names):
        total = 0.0
        for mask in range(2 ** p):
            if mask >> j & 1:
                continue
            k = bin(mask).count("1")
            total += fact[k] * fact[p - k - 1] / fact[p] * (r2[mask | 1 << j] - r2[mask])
        shares[name] = total
    return {"shares": shares, "r2": r2[2 ** p - 1]}


def acceptance_from(source) -> str:
    """Where a row's acceptance draws come from (an :class:`~ddtree_bayes.engine.question.
    AcceptSource`), in words; ``prior-driven`` where no row of the fit informs it."""
    if source.kind == "given":
        return "given (no spread)"
    if source.kind == "uniform":
        return "given range, uniform"
    if source.kind == "measured":
        return f"measured: the mean of {source.rows} row{'s' * (source.rows != 1)}"
    if source.kind == "posterior":
        return "inferred by the fit from rows without accept_len"
    return "the priors' acceptance (prior-driven)"


def target_from(sc, behind, moe: bool = True) -> str:
    """Where the target step's draws come from: the rows behind it (``behind``,
    :func:`~ddtree_bayes.engine.transfer.rows_behind`). Its system's own rows (its
    ``max_tokens``: the most tokens, C x M, a row there verified in one step; beyond it the
    step's growth is the roofline's, partly prior-driven: the compute knee, and the distinct
    experts M tokens read when the model is an MoE, ``moe``; its ``max_context``: the longest
    context a row there measured, past which the context term is the prior's, when that is 0,
    or extrapolated linearly), or a transfer from the system it names, or the pair roofline.
    A context of 131072 on a system measured at 0 only was said "fitted to b300x8's rows", its
    context term being the prior's (predict warns of it); a system never measured was said
    "transferred" without the system it is transferred from.

    >>> from types import SimpleNamespace as NS
    >>> sc = NS(measured=True, pair="b300x8", verify_tokens=33, concurrency=1)
    >>> rows = NS(measured=True, reference="b300x8", pair_roofline=False, max_tokens=9,
    ...           max_context=None)
    >>> print(target_from(sc, rows))
    fitted to b300x8's rows (at most 9 tokens verified a step); 33 is the roofline's \
growth past them (compute knee, experts: partly prior-driven)
    >>> print(target_from(NS(**{**vars(sc), "verify_tokens": 4}), NS(**{**vars(rows),
    ...       "max_tokens": 1}), moe=False))
    fitted to b300x8's rows (at most 1 token verified a step); 4 is the roofline's growth \
past them (compute knee: partly prior-driven)
    >>> print(target_from(NS(**{**vars(sc), "verify_tokens": 9}), rows))
    fitted to b300x8's rows
    >>> print(target_from(NS(**{**vars(sc), "verify_tokens": 9, "context_tokens": 8192.0}),
    ...                   NS(**{**vars(rows), "max_context": 0.0})))
    fitted to b300x8's rows; their contexts reach 0: the context term at 8192 is the prior's \
(ctx_ms_per_unit[b300x8], prior-driven)
    >>> print(target_from(NS(**{**vars(sc), "measured": False, "pair": "h200x8"}),
    ...                   NS(**{**vars(rows), "measured": False})))
    h200x8 not measured: transferred from b300x8 (prior-driven roofline and transfer spread)
    """
    from ddtree_bayes.core.data import plain_text

    if behind.pair_roofline:
        return (f"{sc.pair} not measured: from the pair roofline, learned across the measured "
                "pairs (prior-driven roofline and pair scatter)")
    if not behind.measured:
        return (f"{sc.pair} not measured: transferred from {behind.reference} (prior-driven "
                "roofline and transfer spread)")
    most_verified, longest_context = behind.max_tokens, behind.max_context
    asked = sc.verify_tokens * sc.concurrency
    out = f"fitted to {sc.pair}'s rows"
    if most_verified is not None and asked > most_verified:
        out += (f" (at most {most_verified} token{'s' * (most_verified != 1)} verified a "
                f"step); {asked} is the roofline's growth past them (compute "
                f"knee{', experts' if moe else ''}: partly prior-driven)")
    context = getattr(sc, "context_tokens", 0.0) or 0.0
    if longest_context is not None and context > longest_context:
        out += (f"; their contexts reach {plain_text(longest_context)}: the context term at "
                f"{plain_text(context)} is "
                + (f"the prior's (ctx_ms_per_unit[{sc.pair}], prior-driven)"
                   if longest_context == 0 else "extrapolated linearly past them"))
    return out


def above_peak(fit, model: str | None = None) -> dict[str, float]:
    """The systems whose ``compute_eff`` posterior median exceeds 1, with that median; with
    ``model``, of a fit of several models, only that model's (model, system) pairs
    (``report --model kimi-k2.6`` named Llama's H100 pair under Kimi's report).

    ``compute_eff`` is the share of the dense peak at the card's compute precision a verify
    pass reaches once compute-bound; a pass cannot beat that peak, so a median above 1 says
    the precision the system is priced at is likely not the one its deployment multiplies at
    (docs/model.md, "Compute precision"). The model is left unbounded: a bound at 1 would move
    the draws of every roofline fit (its prior, Normal(-1.2, 0.72) on the log, puts 4.8% of a
    system's draws above 1), so the fit's answers stay as validated and this is said instead.
    A fit without the roofline form has no ``compute_eff``: nothing to say.

    >>> from types import SimpleNamespace as NS
    >>> fit = NS(variables={"compute_eff": np.array([[0.5, 1.2], [0.7, 0.98], [0.6, 1.1]])},
    ...          meta={"coords": {"system": ["b300x8", "rtx-3090x1"]}})
    >>> above_peak(fit)
    {'rtx-3090x1': 1.1}
    >>> fit.meta["model"] = {"pair_models": {"b300x8": "kimi-k2.6", "rtx-3090x1": "qwen3-8b"}}
    >>> above_peak(fit, "kimi-k2.6"), above_peak(fit, "qwen3-8b")
    ({}, {'rtx-3090x1': 1.1})
    """
    eff = fit.variables.get("compute_eff")
    if eff is None:
        return {}
    medians = np.median(np.asarray(eff, dtype=float), axis=0)
    pairs = fit.meta.get("model", {}).get("pair_models") or {}
    return {str(s): round(float(m), 12) for s, m in zip(fit.meta["coords"]["system"],
                                                        medians, strict=True)
            if m > 1.0 and (model is None or not pairs or pairs.get(s) == model)}


def above_peak_note(system: str, median: float) -> str:
    """What ``report`` and ``predict --explain`` say of a system :func:`above_peak` names.

    >>> print(above_peak_note("rtx-3090x1", 1.0904))
    compute_eff[rtx-3090x1] median 1.09 > 1: its verify passes beat the dense peak at the \
card's compute precision, so that precision is likely not the deployment's (check the card's \
compute_dtype)
    """
    return (f"compute_eff[{system}] median {median:.2f} > 1: its verify passes beat the dense "
            "peak at the card's compute precision, so that precision is likely not the "
            "deployment's (check the card's compute_dtype)")


#: How the population of overhead groups is informed when the fit measured a speculative
#: group on another model or system (:func:`population_from`).
CORPUS = "prior- and corpus-driven"


def population_from(pairs: set[str], pair: str) -> str:
    """How the population of overhead groups an unmeasured group draws from is informed, for
    a question on ``pair``, given the pairs (systems, or model@system) ``pairs`` of the fit's
    speculative rows: the corpus only when one of them is another model or system (a new
    user's fit of one AR row was told "corpus-driven" with no corpus in it).

    >>> population_from({"b300x8", "h100x1"}, "b300x8")
    'prior- and corpus-driven'
    >>> population_from({"b300x8"}, "b300x8")
    "prior-driven, learned from b300x8's groups alone: no other model or system measured one"
    >>> population_from(set(), "b300x8")
    'prior-driven: the fit has no speculative row'
    """
    if pairs - {pair}:
        return CORPUS
    if pairs:
        return (f"prior-driven, learned from {pair}'s groups alone: no other model or system "
                "measured one")
    return "prior-driven: the fit has no speculative row"


def overhead_from(how: str, relation: str | None = None, relation_rows: int = 0,
                  population: str = CORPUS) -> str:
    """Where the speculative overhead's draws come from, read off the answer's
    ``overhead_from`` (engine/predictive ``_step_components`` writes it). ``relation``: the
    engine's ``1 - reduction`` scaling of its base engine's overhead: the relation's prior
    when no row of that engine informs it, else fitted to its ``relation_rows`` (a native row
    left it "fitted to its group's rows", as if native's overhead were the group's own).
    ``population``: how the population of groups is informed (:func:`population_from`).

    >>> print(overhead_from("overhead of measured group b300x8/sglang/ddtree"))
    fitted to its group's rows
    >>> print(overhead_from("native = (1 - reduction) x sglang overhead; overhead of measured "
    ...                     "group b300x8/sglang/ddtree", "native"))
    fitted to its group's rows, x (1 - reduction[native]): the relation's prior (prior-driven)
    """
    base = ("its group's rows carried to another deployment of it (--new-deployment), with the "
            "deployments' spread (prior-driven)" if "carried to another deployment of it" in how
            else "fitted to its group's rows" if "overhead of measured group" in how else
            "carried from a group measured elsewhere, with the deployments' spread"
            if " carried to " in how else
            f"no group measured: drawn from the population of groups ({population})"
            if "drawn from the pooled population" in how else "see overhead_from")
    if relation is None:
        return base
    if relation_rows:
        return (f"{base}, x (1 - reduction[{relation}]): fitted to {relation}'s "
                f"{relation_rows} row{'s' * (relation_rows != 1)}")
    return f"{base}, x (1 - reduction[{relation}]): the relation's prior (prior-driven)"


def explain_row(parts: dict[str, np.ndarray], noise: np.ndarray, accept: np.ndarray,
                per_token: np.ndarray, sources: dict[str, str], prob: float = 0.9) -> dict:
    """The split of one row's predictive variance (module docstring). ``parts``: the step's
    draws (:func:`~ddtree_bayes.engine.predictive.step_components`), ``noise`` the standardised
    run deviations drawn beside them, ``accept`` the acceptance draws, ``per_token`` the row's
    capped tok/s per token (its answer is ``accept x per_token``), ``sources`` each term's
    origin in words.

    >>> n = 40_000
    >>> rng = np.random.default_rng(1)
    >>> a = rng.uniform(12, 16, n)
    >>> parts = {"step": np.full(n, 20.0), "spec": np.full(n, 5.0), "log_sd": np.full(n, 0.05)}
    >>> z = rng.standard_normal(n)
    >>> out = explain_row(parts, z, a, 1000 / 20.0 * np.exp(0.05 * z),
    ...                   dict.fromkeys(TERMS, "x"))
    >>> # Var(log U(12,16)) = 0.00683; noise 0.05^2 = 0.0025: shares 0.73 and 0.27
    >>> [(t["term"], round(t["share"], 2)) for t in out["terms"]]
    [('acceptance', 0.73), ('target step', 0.0), ('speculative overhead', 0.0), \
('noise and discrepancy', 0.27)]
    """
    step, spec = parts["step"], parts["spec"]
    target = step - spec
    eps = parts["log_sd"] * noise
    y = np.log(accept * per_token)
    factors = {"acceptance": np.log(accept), "target step": -np.log(target),
               "speculative overhead": -np.log1p(spec / target),
               "noise and discrepancy": eps}
    finite = np.isfinite(y) & np.all([np.isfinite(f) for f in factors.values()], axis=0)
    shares: dict[str, float] = dict.fromkeys(factors, 0.0)
    r2 = 0.0
    if finite.sum() >= 2:   # (predict refuses a non-finite answer: nothing to split)
        # a term of one value (a given --accept, a point-mass step) explains nothing: its
        # share is 0 exactly, not the regression's floating noise (9e-18 printed as a share)
        varying = {k: f[finite] for k, f in factors.items() if np.ptp(f[finite]) > 0}
        if varying:
            dec = shapley_variance_shares(y[finite], varying)
            shares.update({k: round(v, 12) for k, v in dec["shares"].items()})
            r2 = round(float(dec["r2"]), 12)
        y = y[finite]
    lo_q, hi_q = (1 - prob) / 2, 1 - (1 - prob) / 2

    def summary(x: np.ndarray) -> dict:
        lo, mid, hi = np.quantile(x, (lo_q, 0.5, hi_q))
        return {"median": float(mid), "lo": float(lo), "hi": float(hi)}

    values = {"acceptance": summary(accept), "target step": summary(target),
              "speculative overhead": summary(spec),
              "noise and discrepancy": {"median": float(np.median(parts["log_sd"])),
                                        "lo": None, "hi": None}}
    units = {"acceptance": "tokens per step", "target step": "ms", "speculative overhead": "ms",
             "noise and discrepancy": "sd of log tok/s"}
    var = float(np.var(y))   # (nothing varies: nothing is left unexplained either)
    return {"var_log_tok_s": var, "r2": r2 if var > 0 else 1.0,
            "terms": [{"term": t, "share": float(max(shares[t], 0.0)), "unit": units[t],
                       **values[t], "from": sources[t]} for t in TERMS]}

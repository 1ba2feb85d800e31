"""Which model a query asks about, and the parameters of a (model, system) pair a fit of
several models never measured (its M = 1 step from the pair roofline of core/pairs.py, with
the roofline's efficiency and per-layer costs from the posterior). numpy only (the predict path).
"""

from __future__ import annotations

import numpy as np

from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine.posterior import Fit


def fit_models(draws: Fit) -> list[str]:
    """The target models a fit was made on (sorted)."""
    model = draws.meta.get("model", {})
    if model.get("target_models"):
        return list(model["target_models"])
    if model.get("pair_models"):
        return sorted(set(model["pair_models"].values()))
    return [model["target_model"]] if model.get("target_model") else []


def is_multi(draws: Fit) -> bool:
    """Is this a fit of several models (parameters per (model, system) pair)?"""
    return bool(draws.meta.get("model", {}).get("pair_models"))


def deployments_of_one_model(draws: Fit, a: str, b: str) -> bool:
    """Are ``a`` and ``b`` one target model under two deployment cards of the fit: the same
    name, or related names (:func:`~ddtree_bayes.core.pairs.same_target`) whose stored cards
    describe one network (:meth:`~ddtree_bayes.core.model_cards.ModelCard.same_architecture`:
    a quantisation, not a distillation named after its teacher). Such cards run the same
    drafter in the same engine, so a measured group of one carries to the other."""
    from ddtree_bayes.core.model_cards import ModelCard
    from ddtree_bayes.core.pairs import same_target

    if a == b:
        return True
    if not same_target(a, b, fit_models(draws)):
        return False
    cards = draws.meta.get("model", {}).get("model_cards") or {}
    return (a in cards and b in cards
            and ModelCard(**cards[a]).same_architecture(ModelCard(**cards[b])))


def row_pair(draws: Fit, row) -> str:
    """The label of the fit's parameters a measurement row belongs to."""
    from ddtree_bayes.core.pairs import pair_label

    return pair_label(row.model, row.system, is_multi(draws))


def model_cards(draws: Fit) -> dict:
    """The model cards (as dicts) a fit of several models stored."""
    return draws.meta.get("model", {}).get("model_cards") or {}


def resolve_model(draws: Fit, model: str | None, *, asked_as: str = "--model {}") -> str | None:
    """The model a query asks about: optional for a fit of one model; for a fit of several, one
    of its models, or any model with a card (a model never measured: the pair roofline).
    ``asked_as``: how the command takes a model, for the fix when none is named (``next``
    takes it inside ``--query``)."""
    models = fit_models(draws)
    fit_id = draws.meta.get("fit_id", "?")
    if not is_multi(draws):
        if model is None or not models or model in models:
            return models[0] if models else model
        raise QueryError(f"--model {model!r}: fit {fit_id} holds one model ({models[0]}); a model "
                         "it never measured needs a fit of several models (their measured pairs "
                         "teach the roofline of the model cards)",
                         fix=f"drop --model, or fit a file holding {model} and other models")
    if model is None:
        raise QueryError(f"fit {fit_id} holds {len(models)} models ({', '.join(models)}); "
                         f"say which with {asked_as.replace(' {}', '')}",
                         fix=f"e.g. {asked_as.format(models[0])}")
    if model not in models and model not in model_cards(draws):
        raise QueryError(f"--model {model!r} was neither measured in fit {fit_id} "
                         f"({', '.join(models)}) nor has a model card stored in it",
                         fix=f"use one of {', '.join(models)}, or add its card to "
                             "data/models.csv and refit")
    return model


def pooled_shape(draws: Fit, rng: np.random.Generator) -> np.ndarray:
    """The verify-growth parameter of a system (pair) without measurements: drawn from its
    pooled population (the MoE exponent, slope or distinct-expert exponent)."""
    from ddtree_bayes.core.config import MOE_FORMS

    v = draws.variables
    z = rng.standard_normal(draws.n_draws)
    form = draws.meta["model"]["moe_form"]
    if form == "linear":
        return v["moe_slope_mu"] * np.exp(v["moe_hw_sd"] * z)
    return v[MOE_FORMS[form]] + v["moe_hw_sd"] * z


def above_the_read(roof: np.ndarray, sd: np.ndarray, stream_ms: float,
                   rng: np.random.Generator, tries: int = 64) -> np.ndarray:
    """The pair scatter ``roof x exp(sd z)``, z ~ N(0, 1) truncated where the step would be
    shorter than ``stream_ms``, reading the active weights at the full bandwidth, which no
    deployment beats (an exploratory pass found Llama-3.1-8B on one L4 answered faster than
    300 GB/s can read its 16 GB in 19% of draws). Draws below are drawn again; nothing changes
    (not even the random stream) where none is.

    By hand, roof 10 ms, sd 0.5, read 8 ms: z is cut at log(0.8) / 0.5 = -0.446, P 0.328 below;
    the median is at Phi^-1(0.328 + 0.672 / 2) = 0.423, 10 x exp(0.5 x 0.423) = 12.36 ms (10
    untruncated):

    >>> roof, sd = np.full(20_000, 10.0), np.full(20_000, 0.5)
    >>> steps = above_the_read(roof, sd, 8.0, np.random.default_rng(0))
    >>> bool(steps.min() >= 8.0), bool(abs(np.median(steps) - 12.36) < 0.1)
    (True, True)
    """
    step = roof * np.exp(sd * rng.standard_normal(roof.shape))
    for _ in range(tries):
        low = step < stream_ms
        if not low.any():
            return step
        step[low] = roof[low] * np.exp(sd[low] * rng.standard_normal(int(low.sum())))
    return np.maximum(step, stream_ms)   # (a roof below the read itself: at the read)


def pair_parameters(draws: Fit, sc, rng: np.random.Generator
                    ) -> tuple[dict[str, np.ndarray], str]:
    """Per-draw step parameters of a (model, system) pair a fit of several models has no rows
    of: the M = 1 step from the pair roofline at the posterior's efficiency and per-layer costs
    times the pair scatter ``exp(pair_step_sd z)``; the MoE share and context cost from their
    priors (what the model says of a pair without rows); the verify growth and compute
    efficiency from their pooled populations. Returns (parameters, how it was obtained)."""
    from ddtree_bayes.core.model_cards import ModelCard
    from ddtree_bayes.core.pairs import pair_features, roofline_step_ms
    from ddtree_bayes.core.sampling import prior_sample

    v, meta, n = draws.variables, draws.meta, draws.n_draws
    card = ModelCard(**model_cards(draws)[sc.model])
    table = draws.hardware
    f = pair_features(card, table[sc.hardware], sc.gpus)
    roof = roofline_step_ms(f.stream_ms, f.layers, f.fabric, f.pcie, v["pair_bw_eff"],
                            v["pair_layer_ms"], v["pair_allreduce_fabric_ms"],
                            v["pair_allreduce_pcie_ms"])
    step_ar = above_the_read(roof, v["pair_step_sd"], f.stream_ms, rng)
    priors = draws.priors.priors
    share = prior_sample(priors["moe_share"], n, rng)
    ctx, ctx_how = unmeasured_ctx_prior(draws, card, table[sc.hardware], sc.gpus)
    params = {"step_ar_ms": step_ar, "moe_share": share, "moe_shape": pooled_shape(draws, rng),
              "ctx_ms_per_unit": prior_sample(ctx, n, rng)}
    tp_how = ""
    if meta["model"]["moe_form"] == "roofline":
        from ddtree_bayes.engine.unmeasured import roofline_parameters

        roof, tp_how = roofline_parameters(draws, card, table[sc.hardware], sc.gpus,
                                           share * step_ar, rng)
        params.update(roof)
    lo, med, hi = np.quantile(step_ar, [0.05, 0.5, 0.95])
    held_out = set(meta.get("held_out_systems", ()))
    k = len([p for p in meta["coords"]["system"] if p not in held_out])
    how = (f"{sc.pair} not measured: M = 1 step {med:.1f} ms (90% {lo:.1f}-{hi:.1f}) from the "
           f"pair roofline ({f.describe(sc.model, sc.hardware)}), efficiency and per-layer cost "
           f"learned from {k} measured pair{'s' if k != 1 else ''}, no faster than reading the "
           f"active weights at the full bandwidth ({f.stream_ms:.2g} ms); "
           + (f"its context cost from {ctx_how} (prior-driven); " if sc.context_tokens else "")
           + tp_how)
    return params, how


def unmeasured_ctx_prior(draws: Fit, card, hardware_row: dict[str, str], gpus: int):
    """The ``ctx_ms_per_unit`` prior of a pair the fit has no rows of, and what to say of it:
    its card's KV read x ``ctx_read_ratio`` as the fit's systems had it (core/context_cost.py);
    the generic prior for a fit made before that (``system_ctx_prior`` not in its metadata
    although its priors price the read: its answers stay what they were), and for a fit whose
    priors do not (no log-normal ``ctx_read_ratio``: ``ctx_prior_how`` says so)."""
    from ddtree_bayes.core.context_cost import (
        context_read_ms,
        ctx_prior,
        ctx_prior_how,
        ratio_name,
        uses_read,
    )

    priors = draws.priors
    if "system_ctx_prior" not in draws.meta["model"] and uses_read(priors):
        return (priors.priors["ctx_ms_per_unit"],
                "the generic ctx_ms_per_unit (a fit made before the KV read priced it)")
    read = context_read_ms(card, hardware_row, gpus, draws.meta["model"]["context_unit_tokens"])
    ratio = ratio_name(card, hardware_row)
    return ctx_prior(priors, read, ratio), ctx_prior_how(priors, read, ratio)

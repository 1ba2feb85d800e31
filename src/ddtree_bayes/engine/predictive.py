"""Posterior draws -> throughput intervals for requested configurations.

numpy only (no PyMC, no xarray, no pandas unless a DataFrame is asked for), so a
``predict`` from a cold process stays well under a second. The query side (acceptance,
context, scenario resolution) is in :mod:`ddtree_bayes.engine.scenario` and re-exported here.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import math
import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core import paths, per_call
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import (
    DEFAULT_SEED,
    MAX_SEED,
    AcceptancePrior,
    is_seed,
)
from ddtree_bayes.core.data import AR_METHOD, plain_text
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.core.likelihood import offsets, scatter_parts
from ddtree_bayes.engine.ceiling import (
    balanced_read,
    capped,
    ceiling_row,
    ceiling_warnings,
    read_ceiling,
    routing_row,
    routing_warnings,
    step_rate,
)
from ddtree_bayes.engine.explain import explain_row
from ddtree_bayes.engine.posterior import Fit, blank_context
from ddtree_bayes.engine.question import AcceptSource, Question
from ddtree_bayes.engine.scenario import (  # noqa: F401  (re-exported: P.Scenario, P.check_fit, ...)
    NOT_FITTED_PRIORS,
    SEED_BAND,
    AcceptRequest,
    Scenario,
    accept_limit,
    acceptance_prior,
    check_accept,
    check_acceptance_range,
    check_fit,
    drafter_asked,
    drafter_gap_warnings,
    latent_acceptance,
    measured_acceptance,
    parse_accept,
    parse_context,
    resolve_scenario,
    row_acceptance,
    row_scenario,
    with_row_drafter,
)
from ddtree_bayes.engine.structure import (
    amd_log_effect,
    amd_note,
    carried_group,
    carried_spec_ms,
    carry_note,
    deployment_spread,
    distinct_ratio,
    draft_structure,
    fit_rows,
    group_label,
    group_learned,
    measured_configs,
    new_deployment_group,
    new_deployment_warning,
    pass_drafter,
    pass_roofline,
    query_log_sd,
    recurrent_note,
    tied_ratio_spread,
    unmeasured_log_ratio,
)
from ddtree_bayes.engine.target_models import row_pair
from ddtree_bayes.engine.transfer import (  # noqa: F401  (P.transferred_...)
    rows_at,
    rows_behind,
    transferred_parameters,
)


def step_draws(draws: Fit, sc: Scenario, rng: np.random.Generator, anchor: bool = True
               ) -> tuple[np.ndarray, str]:
    """Posterior draws of step_ms (without measurement noise) and how the overhead was found.

    The overhead of an unmeasured (system, engine, method) group is drawn from the
    partially pooled population; an engine with a declared relation scales its base
    engine's SPEC by ``1 - reduction``. ``anchor``: see :func:`step_components`.
    """
    parts, how = step_components(draws, sc, rng, anchor=anchor)
    return parts["step"], how


def step_components(draws: Fit, sc: Scenario, rng: np.random.Generator, anchor: bool = True
                    ) -> tuple[dict[str, np.ndarray], str]:
    """Posterior draws of each term of the step (ms): ``moe``, ``attn_base``, ``context``,
    ``spec`` and their sum ``step``; ``log_sd``, the predictive sd of log tok/s (run-to-run
    noise, plus the structural discrepancy for the distance from the nearest measured
    configuration in the structured form); and how the overhead was found.

    ``anchor`` (the structured form; a predictive, not a likelihood): the query carries the
    structural discrepancy its group's nearest measured configuration shows
    (:func:`anchor_shift`), and its own discrepancy grows from there. The model's likelihood
    and the reweighting of new rows ask for the structural step alone (``anchor=False``)."""
    parts, how = _step_components(draws, sc, rng)
    if not anchor or "structure_sd" not in draws.variables:
        return parts, how
    passes = draft_structure(draws.meta["model"], sc.method, sc.block, sc.budget)[0]
    # (--new-deployment: not anchored to the rows of the group it carries to another deployment)
    fresh = new_deployment_group(draws, sc) is not None
    found = None if fresh else anchor_shift(draws, sc)
    if found is None:
        own_point = unanchored_distance(draws, sc, passes)
        if own_point is not None:   # (at a measured point nothing here anchors)
            parts = {**parts, "log_sd": query_log_sd(draws, sc, passes, distance=own_point)}
        return parts, how + other_engines_ar(draws, sc) + (
            "" if fresh else blank_accept_rows(draws, sc))
    shift, distance, label = found
    # the measured deployment's own error is known at any context and concurrency of it
    own = carries_own_error(draws, sc)
    carried = anchor_scenario(draws, sc).engine
    if carried != sc.engine:   # (a relation's engine without rows: its base's anchor, whole)
        label = (f"{carried} {label}, carried from {carried} ({_no_own_row(draws, sc)}): "
                 + ("its step, with no overhead to cut" if sc.method == AR_METHOD
                    else "its target step and its overhead x (1 - reduction)"))
    factor = np.exp(-shift)   # a log tok/s shift of +shift is a step x exp(-shift)
    parts = {k: (v * factor if k in STEP_PARTS else v) for k, v in parts.items()}
    # at the measured configuration itself its own error (config_sd) is carried too
    parts["log_sd"] = query_log_sd(draws, sc, passes, distance=distance,
                                   own_known=own)
    return parts, how + f"; anchored to the measured {label}" + blank_accept_rows(draws, sc)


def blank_accept_rows(draws: Fit, sc: Scenario) -> str:
    """A clause for a query at a configuration the fit measured only in rows with a blank
    accept_len (its own system, engine, method, drafter, block, budget, verify tokens,
    concurrency and context): such rows anchor nothing (:func:`anchor_shift` turns a row's
    tok/s into its step through its acceptance, which they lack; the fit infers it, shared
    by every row of its acceptance group), so the answer is the model's step there and need
    not match them. An exploratory pass read Kimi K2.6 EAGLE-3 block 3 on 8x H200 (public
    multi-model example) at 125 tok/s (90% 103-149) beside "overhead of measured group", where
    that configuration measured 144.5, with nothing saying why. Empty otherwise, and when the
    configuration has a row with a measured accept_len too (the answer is anchored there)."""
    if not sc.measured or sc.method == AR_METHOD:   # (an AR row's acceptance is 1, never blank)
        return ""
    key = (tuple(draws.meta.get("held_out_rows", ())), sc.pair, sc.engine, sc.method,
           sc.drafter_named, sc.block, sc.budget, sc.verify_tokens, sc.concurrency,
           sc.context_tokens)
    memo = draws.memo.setdefault("blank_accept_rows", {})
    if key not in memo:
        memo[key] = _blank_accept_rows(draws, sc)
    return memo[key]


def _blank_accept_rows(draws: Fit, sc: Scenario) -> str:
    rows = [r for r in rows_at(draws, sc)
            if r.engine == sc.engine and r.method == sc.method and r.block == sc.block
            and r.budget == sc.budget and r.verify_tokens == sc.verify_tokens
            and drafter_asked(draws, r.model, r.method, r.drafter) == sc.drafter_named]
    if not rows or any(r.accept_len is not None for r in rows):
        return ""
    shape = (f"{sc.method}" + (f" block {sc.block}" if sc.block is not None else "")
             + (f" budget {sc.budget}" if sc.budget is not None else "")
             + f", M = {sc.verify_tokens}"
             + (f", C = {sc.concurrency}" if sc.concurrency != 1 else ""))
    measured = ", ".join(f"{r.tok_s:g}" for r in rows)
    one = len(rows) == 1
    what, its, anchor, them = (("row", "its", "it anchors", "that row's") if one else
                               (f"{len(rows)} rows", "their", "they anchor", "those rows'"))
    return (f"; not anchored to its own measured {what} ({shape}: {measured} tok/s): {its} "
            f"accept_len is blank, so {its} acceptance is inferred and {anchor} nothing: this "
            f"answer need not match {them} tok/s")


def unanchored_distance(draws: Fit, sc: Scenario, passes: float) -> float | None:
    """The distance an answer nothing anchors (:func:`anchor_shift` None) at a point measured
    on its system carries its discrepancy for: the likelihood's for a configuration there, its
    distance from the *other* points measured (core/likelihood ``config_distances``); None
    where the query's point was not measured (its distance from the nearest is the
    likelihood's for a new configuration already, :func:`query_distance`).

    The structural step's discrepancy at a measured point is known only through an anchor,
    the configuration's rows with a measured accept_len. Rows with a blank accept_len anchor
    nothing, and another configuration at the same point (an engine with no AR row of its own
    on a system another engine measured AR on) has a discrepancy of its own; at distance 0
    from "the nearest measured configuration", itself, both answered the structural step with
    the run-to-run noise alone, narrower than the fit's own posterior predictive check there
    (tests/test_unanchored_discrepancy.py). ``passes``: the query's drafter passes."""
    if not sc.measured:
        return None
    point = (float(sc.verify_tokens * sc.concurrency), passes)
    ms, ps = measured_configs(draws, sc.pair)
    points = list(zip(ms, ps, strict=True))
    if point not in points:
        return None
    others = [q for q in points if q != point]
    return S.config_distance(point[0], point[1], [m for m, _ in others],
                             [p for _, p in others])


def _no_own_row(draws: Fit, sc: Scenario) -> str:
    """Why ``sc``'s engine carries its base engine's anchor (:func:`anchor_scenario`), for the
    note: no row of its own on the system and method, or rows there none of which has a
    measured acceptance (a blank accept_len: the anchor turns a row's tok/s into its step
    through the acceptance, so such a row anchors nothing, and native still carries
    SGLang's; "no native row there" was said of them too)."""
    from ddtree_bayes.engine.transfer import has_own_rows

    rows = has_own_rows(draws, sc.pair, sc.engine, sc.method)
    return (f"no {sc.engine} {sc.method} row" + (" with a measured acceptance" if rows else "")
            + " there")


def noise_parts(draws: Fit, sc: Scenario, log_sd: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, float | None]:
    """(normal sd, t sd, nu) of one benchmark run's deviation of log tok/s at ``sc``, per
    draw, of the parts' ``log_sd`` (:func:`step_components`): ``normal x Normal + t x
    t_nu``, ``normal^2 + t^2 = log_sd^2``. Under a normal likelihood (``nu`` None) all of it
    is normal. Under a Student-t one (``likelihood_nu``) the run's scatter about its
    configuration's mean is normal (the likelihood's ``S2`` factor) and a configuration's
    deviation from the model is t: an anchored answer (:func:`anchor_shift`, which has drawn
    the measured configuration's deviation) adds the run-to-run sd as normal and the rest
    (its discrepancy for the distance from the anchor, an own error the anchor does not carry,
    the spread beyond the measured concurrencies) as t; at the measured configuration, or one
    token of context from it, the rest is 0 and the noise normal, one budget from it near 0
    (one token above it drew all of it as t: on the structured point mass at nu 4 its 90%
    interval jumped 1.3% wider, tests/test_left_followups.py).
    An unanchored answer is the likelihood's one row of a new configuration: all t."""
    log_sd = np.asarray(log_sd, dtype=float)
    nu = C.likelihood_nu(draws.variables)
    if nu is None:
        return log_sd, np.zeros_like(log_sd), None
    if not is_anchored(draws, sc):
        return np.zeros_like(log_sd), log_sd, nu
    run = np.minimum(np.asarray(scatter_parts(draws.variables)[0], dtype=float), log_sd)
    rest = log_sd ** 2 - run ** 2   # (0 to rounding at the measured deployment itself)
    return run, np.sqrt(np.where(rest > 1e-12 * log_sd ** 2, rest, 0.0)), nu


def is_anchored(draws: Fit, sc: Scenario) -> bool:
    """Whether ``sc``'s answer is anchored to a measured configuration (:func:`anchor_shift`
    finds one: its own, or its base engine's carried)."""
    return ("structure_sd" in draws.variables and sc.measured
            and new_deployment_group(draws, sc) is None   # (--new-deployment: not anchored)
            and _nearest_measured(draws, anchor_scenario(draws, sc)) is not None)


def predictive_noise(draws: Fit, sc: Scenario, log_sd: np.ndarray,
                     rng: np.random.Generator) -> np.ndarray:
    """(draws,) standardised draws of one benchmark run's deviation at ``sc`` (times the
    parts' ``log_sd`` it is), as :func:`noise_parts` splits it: standard normal (a normal
    likelihood, the digits it always drew; at a measured configuration), t (unanchored under a
    Student-t likelihood, the digits it always drew), or the normal then the t part
    (:func:`~ddtree_bayes.core.likelihood.split_noise`)."""
    log_sd = np.asarray(log_sd, dtype=float)
    normal, heavy, nu = noise_parts(draws, sc, log_sd)
    if nu is None or not np.any(heavy > 0):   # (no sd at all: either; normal's digits)
        return C.standard_noise(rng, log_sd.shape, None)
    if not np.any(normal > 0):
        return C.standard_noise(rng, log_sd.shape, nu)
    deviation = C.split_noise(rng, normal, heavy, nu)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(log_sd > 0, deviation / log_sd, 0.0)


def other_engines_ar(draws: Fit, sc: Scenario) -> str:
    """For an AR question on a measured system whose engine has no AR row there while another
    engine has: a clause saying so (the answer is the structural step, which need not match
    those rows; the model has no AR engine term, and engines do differ at AR: Llama-3.1-8B on
    one H100 measured 158 tok/s in SGLang, 133 and 141 in vLLM). An exploratory pass read
    Kimi K2.6 AR on 8x H200 at 73 tok/s in SGLang against 63 anchored to the vLLM row, with
    nothing saying why. Empty otherwise."""
    if sc.method != AR_METHOD or not sc.measured:
        return ""
    key = (sc.pair, sc.engine, sc.concurrency, sc.context_tokens)
    memo = draws.memo.setdefault("other_engines_ar", {})
    if key not in memo:
        memo[key] = _other_engines_ar(draws, sc)
    return memo[key]


def _other_engines_ar(draws: Fit, sc: Scenario) -> str:
    seen: dict[str, list[float]] = {}
    for r in rows_at(draws, sc):
        if r.method == AR_METHOD and r.engine != sc.engine:
            seen.setdefault(r.engine, []).append(r.tok_s)
    if not seen:
        return ""
    measured = "; ".join(f"{e} {', '.join(f'{t:.3g}' for t in ts)} tok/s"
                         for e, ts in sorted(seen.items()))
    return (f"; no {sc.engine} AR row on {sc.pair}: the structural step, not anchored to the "
            f"AR rows of another engine there ({measured}): the model has no AR engine term")


#: The terms of :func:`step_components` that are ms of the step (an anchor scales them all).
STEP_PARTS = ("moe", "attn_base", "context", "spec", "step", "spec_tied")


def anchor_shift(draws: Fit, sc: Scenario) -> tuple[np.ndarray, float, str] | None:
    """The structural discrepancy of the query's nearest measured configuration: (draws,)
    shift of log tok/s, the query's distance from it, and its label; None without one.

    Candidates are the configurations the fit learned from (held-out rows excluded) in the
    query's own system, engine and method, at its context, with a measured accept_len; at any
    concurrency, as the distance is in C x M (an AR answer at C = 17 carries what the
    measured C = 16 shows, where it was the structural step alone, and per-user tok/s rose
    from C = 16 to 17). The model gives a configuration c a discrepancy ``e_c ~ Normal(0, A)``,
    ``A = (structure_sd d_c)^2`` (d_c: its distance from the other configurations measured on
    its system), plus with repeated runs its own error ``B = config_sd^2``; its n rows' mean
    z (log tok/s - log(accept x 1000 x C)) sits ``r = zbar - (-log step_c)`` from the
    structural model. Per draw, e_c given r is Normal with mean ``A r / (A + B + run^2/n)``
    and variance ``A - A^2 / (A + B + run^2/n)`` (the likelihood integrates it out; this
    draws it back); under a Student-t likelihood (``likelihood_nu``) that variance is divided
    by the scale mixture's weight given r, ``Gamma((nu + 1) / 2, rate (nu + r^2 / T) / 2)``,
    ``T = A + B + run^2/n``. Drawn with a generator of its own, so the caller's draws are
    unchanged.

    Between two measured contexts of the deployment (:func:`_bracketing_contexts`) the two
    ends' discrepancies are interpolated linearly in context (:func:`_interpolated_end`),
    drawn from the ends' own streams rotated together: one token inside a measured context the
    answer is that context's own, draw by draw, and halfway it is no narrower. Between two
    measured concurrencies of the deployment (:func:`_bracketing_concurrencies`: its draft
    shape, at the context that anchors it) likewise, linearly in log C
    (:func:`_concurrency_end`). Between two contexts and two concurrencies, nested: in log C
    at each of the two contexts, then in context (bilinear in (context, log C), the four
    corners' streams rotated together), so the answer is continuous along both axes and
    each edge of the rectangle is the one-axis interpolation along it.

    An engine with a relation and no such configuration of its own (native, whose overhead is
    SGLang's x (1 - reduction)) is anchored as its base engine is (:func:`anchor_scenario`),
    to the structural discrepancy alone: the measured configuration's own error (config_sd)
    is its engine build's, not native's, so it is not drawn in even at that configuration's
    shape (:func:`carries_own_error`)."""
    if not sc.measured:
        return None
    anchored = anchor_scenario(draws, sc)
    own = anchored.engine == sc.engine   # (a carried anchor: none of its own error)
    sc = anchored
    bracket = _bracketing_contexts(draws, sc)
    if bracket is not None:
        # between two measured contexts: each one's anchor, interpolated linearly in context
        # (the nearer one's alone made the answer jump at the midpoint, a token more context
        # faster: Qwen3.5-397B AR on 4x RTX PRO 6000 Server, measured at 65536 and 131072,
        # 75.07 tok/s at 98304, 76.55 at 98305)
        lo, hi = bracket
        w = (sc.context_tokens - lo) / (hi - lo)
        ends = [_concurrency_end(draws, sc, own, at_context=c) for c in bracket]
        if ends[0] is not None and ends[1] is not None:
            end = _interpolated_end(draws, ends[0], ends[1], w,
                                    (1.0 - w) * ends[0].distance + w * ends[1].distance,
                                    f"{ends[0].part} and {ends[1].part}, interpolated in context")
            return end.value, end.distance, end.label
    found = _concurrency_end(draws, sc, own)
    if found is None:
        return None
    return found.value, found.distance, found.label


@dataclasses.dataclass(frozen=True)
class AnchorEnd:
    """What anchors a query (:func:`anchor_shift`): one measured configuration
    (:func:`_measured_end`), or two such interpolated (:func:`_interpolated_end`). ``terms``:
    (weight, the posterior of a measured configuration's discrepancy); ``standard``: the
    standard draws (:func:`_standard_draws`) every term is drawn at, a configuration's own
    stream or several rotated together; ``value``: the (draws,) anchor, ``sum weight x
    posterior.at(standard)``. ``key`` names it in the memo; ``distance`` is the query's from
    it and ``label`` says what it is."""

    key: tuple
    terms: tuple[tuple[float, DiscrepancyPosterior], ...]
    standard: tuple[np.ndarray | None, np.ndarray]
    value: np.ndarray
    distance: float
    label: str

    @property
    def part(self) -> str:
        """The label as one end of a wider interpolation (an interpolated one bracketed)."""
        return f"({self.label})" if len(self.terms) > 1 else self.label


def _measured_end(draws: Fit, sc: Scenario, found, own: bool = True) -> AnchorEnd:
    """The measured configuration ``found`` (:func:`_nearest_measured`) as an anchor of ``sc``:
    its discrepancy at its own stream's standard draws (:func:`_anchor_end`), the digits every
    answer anchored to it alone has drawn."""
    key, posterior, standard = _anchor_end(draws, sc, found, own=own)
    return AnchorEnd(key, ((1.0, posterior),), standard, posterior.at(*standard), found[1],
                     found[3])


def _anchor_end(draws: Fit, sc: Scenario, found, own: bool = True
                ) -> tuple[tuple, DiscrepancyPosterior, tuple[np.ndarray | None, np.ndarray]]:
    """The measured configuration ``found`` (:func:`_nearest_measured`) as an anchor of
    ``sc``: (its key, the posterior of its discrepancy, its own stream's standard draws
    (:func:`_standard_draws`)). The stream is keyed by the configuration alone, so every
    query anchored to it, at its context or in a bracket beside it, sees the same draws; and
    each configuration has a stream of its own: the likelihood makes their discrepancies
    independent given the parameters, so two anchored answers (a tree and AR, say) must not
    share one. ``own`` False: the query is another engine's carrying this anchor
    (:func:`anchor_scenario`), whose own error the row's is not, at any shape."""
    rows, _, d_c, _, ctx = found
    # (its own error too when the query is the measured deployment: at_itself in the draws)
    at_itself = own and same_deployment(sc, rows[0])
    # (keyed by the anchor's own concurrency and context: queries anchored to one
    # configuration share its draws; for an anchor at the query's C and context, the key every
    # earlier answer was drawn with)
    named = sc.drafter_named   # (another drafter's configuration: its own stream)
    config: tuple = (sc.pair, sc.engine, sc.method, rows[0].concurrency, ctx, rows[0].block,
                     rows[0].budget, rows[0].verify_tokens, at_itself,
                     *(() if named is None else (named,)))
    cache = draws.memo.setdefault("anchor_shift", {})
    key = (tuple(draws.meta.get("held_out_rows", ())), *config)
    if key not in cache:
        posterior = _discrepancy_posterior(draws, rows, d_c, at_itself)
        cache[key] = (key, posterior, _standard_draws(keyed_rng(ANCHOR_SEED, repr(config)),
                                                      draws.n_draws, posterior.shape))
    return cache[key]


def _interpolated_end(draws: Fit, lo: AnchorEnd, hi: AnchorEnd, w: float, distance: float,
                      label: str) -> AnchorEnd:
    """The anchor ``w`` of the way from ``lo`` to ``hi`` (two measured contexts, or two
    measured concurrencies, or two such interpolations: :func:`anchor_shift`): ``(1 - w)
    e_lo(w) + w e_hi(w)``, every term of both ends at the same standard draws, rotated from
    the ends' own (:func:`_rotated_draws`, ``theta = pi w / 2``). At ``w`` -> 0 these are
    ``lo``'s, so one token inside a measured context (or the interpolation's start above a
    measured concurrency) answers as it does, draw by draw (drawn from one stream keyed by the
    bracket, the answer jumped there by 0.04-0.2% in its median and 90% ends); at every ``w``
    each end's term has its own posterior, and the two move together, so the mix does not
    narrow halfway (the mean of two independent draws would, to sqrt(sd_lo^2 + sd_hi^2) / 2).
    ``distance`` and ``label`` are the caller's (each axis has its own)."""
    cache = draws.memo.setdefault("anchor_shift", {})
    key = ("interpolated", lo.key, hi.key, w)
    if key not in cache:
        shape = lo.terms[0][1].shape   # (nu is the fit's: one Gamma shape for every end)
        standard = _rotated_draws(lo.standard, hi.standard, shape, 0.5 * math.pi * w)
        terms = (tuple(((1.0 - w) * a, p) for a, p in lo.terms)
                 + tuple((w * a, p) for a, p in hi.terms))
        (a0, p0), *rest = terms
        value = a0 * p0.at(*standard)
        for a, p in rest:
            value = value + a * p.at(*standard)
        cache[key] = (terms, standard, value)
    terms, standard, value = cache[key]
    return AnchorEnd(key, terms, standard, value, distance, label)


def _concurrency_end(draws: Fit, sc: Scenario, own: bool = True,
                     at_context: float | None = None) -> AnchorEnd | None:
    """The anchor of ``sc`` at the measured context that anchors it (``at_context``, else as
    :func:`_nearest_measured` finds it): the nearest measured configuration there, or between
    two measured concurrencies of the deployment there (:func:`_bracketing_concurrencies`)
    the two interpolated linearly in log C, ``w = log(C / C_lo) / log(C_hi / C_lo)``
    (:func:`_interpolated_end`). None without a measured configuration to anchor to.

    In log C, not C: the model's distance is in log(C x M) (``config_distance``) and
    concurrencies are swept in doublings (1, 2, 4, 8, ...), so the weight moves by the same
    step at every doubling and halfway is the geometric midpoint, where the nearest end's
    anchor used to switch to the other's. Linear in C, C = 2 between 1 and 8 would be 1/7 of
    the way (1/3 in log C) and C = 32 between 16 and 256 1/15 (1/4): nearly all of the lower
    end's anchor after a doubling of the streams, and most of the move crowded into the top
    of the bracket. The nearest one alone jumped at the midpoint: Qwen3-30B-A3B-FP8 AR on one
    L40 (HYPOTHETICAL rows at C = 1 and C = 8, a black-box audit's fit) answered 97 tok/s per
    user at C = 2 and 82 at C = 3 (-16%, against -9% from C = 3 to 4). The distance is the
    nearer end's, as it was, ``min(log(C / C_lo), log(C_hi / C))`` (M alike): the anchor
    moves smoothly, and the discrepancy the query adds for its distance from what was
    measured stays the model's for the nearest measurement (crediting the interpolation with
    less would be a claim the model does not make)."""
    ctx = _anchor_context(draws, sc, at_context)
    if ctx is None:
        return None
    bracket = _bracketing_concurrencies(draws, sc, ctx)
    if bracket is None:
        found = _nearest_measured(draws, sc, at_context=at_context)
        return None if found is None else _measured_end(draws, sc, found, own=own)
    c_lo, c_hi = bracket
    lo, hi = (_measured_end(draws, sc, _nearest_measured(draws, sc, at_context=ctx,
                                                          at_concurrency=c), own=own)
              for c in bracket)
    w = math.log(sc.concurrency / c_lo) / math.log(c_hi / c_lo)
    return _interpolated_end(draws, lo, hi, w, min(lo.distance, hi.distance),
                             f"{lo.label} and {hi.label}, interpolated in concurrency")


def _bracketing_concurrencies(draws: Fit, sc: Scenario, ctx: float) -> tuple[int, int] | None:
    """The concurrencies just below and above ``sc``'s at which its own deployment (system,
    engine, method and draft shape: block, budget, verify tokens; :func:`same_deployment`) was
    measured at context ``ctx`` (configurations with accept_len the fit learned from), when it
    lies strictly between two; else None (at a measured C, below the least or beyond the
    largest: the nearest one anchors, as every answer at C = 1 and beyond the concurrencies
    measured always was). Other shapes are not interpolated with: a neighbour's discrepancy is
    its build's, the deployment's own is known."""
    configs = _anchor_candidates(draws).get(
        (sc.pair, sc.engine, sc.method, ctx, sc.drafter_named), {})
    shape = (sc.block, sc.budget, sc.verify_tokens)
    return _between({k[0] for k in configs if k[1:] == shape}, sc.concurrency)


def _bracketing_contexts(draws: Fit, sc: Scenario) -> tuple[float, float] | None:
    """The measured contexts just below and above ``sc``'s, of its system, engine and method
    (configurations with accept_len the fit learned from), when it lies strictly between two;
    else None (at a measured context, or outside them: the nearest one anchors)."""
    return _between(_anchor_contexts(draws, sc), sc.context_tokens)


def _between(measured: set[Any], x: Any) -> tuple[Any, Any] | None:
    """The measured values just below and above ``x`` when ``x`` lies strictly between two of
    them, else None (``x`` itself measured, below the least or beyond the largest): the
    bracket of :func:`_bracketing_contexts` and :func:`_bracketing_concurrencies`.

    >>> _between({1, 8, 64}, 2), _between({1, 8, 64}, 8), _between({1, 8}, 16)
    ((1, 8), None, None)
    """
    below = [v for v in measured if v < x]
    above = [v for v in measured if v > x]
    if x in measured or not below or not above:
        return None
    return max(below), min(above)


def _anchor_context(draws: Fit, sc: Scenario, at_context: float | None = None) -> float | None:
    """The measured context whose configurations anchor ``sc``: ``at_context``, else the
    query's own when measured (:func:`_anchor_contexts`), else the nearest measured one in
    tokens (of equal distances the shorter); None with none measured."""
    ctx = sc.context_tokens if at_context is None else at_context
    measured = _anchor_contexts(draws, sc)
    if ctx not in measured:
        if not measured:
            return None
        ctx = min(measured, key=lambda c: (abs(c - sc.context_tokens), c))
    return ctx


def _anchor_contexts(draws: Fit, sc: Scenario) -> set[float]:
    """The measured contexts that may anchor ``sc`` (:func:`_anchor_candidates` of its system,
    engine and method): those holding its own deployment (:func:`same_deployment`, at any C)
    when any does, else all. Of any shape, a budget-8 tree measured at context 0 with a
    budget-16 row at 65536 was interpolated between the two, its own error dropped past the
    midpoint (log_sd 0.0326 at 32768, 0.0382 at 32769), and with budget 8 measured at 131072
    too it was anchored at 65536 to the budget-16 row alone."""
    groups = _anchor_candidates(draws)
    deployment = (sc.pair, sc.engine, sc.method)
    drafter = sc.drafter_named
    keys = [k for k in groups if k[:3] == deployment and k[4] == drafter]
    own = {k[3] for k in keys
           if any(c[1:] == (sc.block, sc.budget, sc.verify_tokens) for c in groups[k])}
    return own or {k[3] for k in keys}


def anchor_scenario(draws: Fit, sc: Scenario) -> Scenario:
    """The scenario whose measured configurations anchor ``sc``: ``sc`` itself, or, for an
    engine with a relation (``native = (1 - reduction) x sglang`` overhead) that has no
    measured configuration of its own in ``sc``'s system and method (:func:`_anchor_contexts`),
    ``sc`` in its base engine. The relation defines native's step as SGLang's with the
    overhead cut, so native carries SGLang's anchor whole, at the same draws: the measured
    deployment's discrepancy scales the target step (the system's, shared by any engine on
    it) and SGLang's overhead alike, and native pays ``1 - reduction`` of that anchored
    overhead. Unanchored, the structural step with the cut came out slower than SGLang's
    anchored one wherever the measurement is faster than the structural step (the bundled
    B300 DDTree row: 490 against 550 tok/s at acceptance 12 on the structured point mass,
    tests/test_native_anchor.py). What carries is the deployment's structural discrepancy,
    not the SGLang configuration's own error (config_sd: its engine build and harness), which
    native, another build, has new and in its spread even at that configuration's shape
    (:func:`carries_own_error`, :func:`noise_parts`). Carried only to a prediction: a native
    measurement would still be a configuration of its own (:func:`at_measured_configuration`
    is unchanged)."""
    base = (draws.meta["model"].get("relation_bases") or {}).get(sc.engine)
    if base is None or base == sc.engine or _anchor_contexts(draws, sc):
        return sc
    return dataclasses.replace(sc, engine=base)


def at_measured_configuration(draws: Fit, sc: Scenario) -> bool:
    """Whether ``sc`` is a configuration the fit measured (with accept_len, not held out):
    its anchor is itself (:func:`anchor_shift` at distance 0). False in the fraction form."""
    if "structure_sd" not in draws.variables or not sc.measured:
        return False
    found = _nearest_measured(draws, sc)
    return found is not None and is_itself(sc, found[0][0], found[4])


def carries_own_error(draws: Fit, sc: Scenario) -> bool:
    """Whether ``sc``'s anchor carries its configuration's own error (config_sd) besides the
    structural discrepancy: the query is the measured deployment (:func:`same_deployment`) at
    any context and concurrency. False in the fraction form, and for an engine carrying its
    base engine's anchor (:func:`anchor_scenario`: native at SGLang's measured shape is
    another build, whose own error is new)."""
    if "structure_sd" not in draws.variables or not sc.measured:
        return False
    found = _nearest_measured(draws, sc)   # (None for native without rows of its own)
    return found is not None and same_deployment(sc, found[0][0])


def same_deployment(sc: Scenario, row) -> bool:
    """Is the measured ``row`` (of the query's system, engine and method) the deployment
    ``sc`` asks, at whatever context and concurrency: the same draft shape (block, budget,
    verify tokens)? Its own error (config_sd: the engine build, the harness, what the
    structural step does not describe of that deployment) is then the query's too. Carried at
    the configuration itself only, one token more context or a second stream dropped it and
    could come out faster (Kimi K2.6 AR on 8x H200 in the public corpus: 63.15 tok/s at
    context 0, 63.79 at 512)."""
    return (row.block, row.budget, row.verify_tokens) == (sc.block, sc.budget, sc.verify_tokens)


def is_itself(sc: Scenario, row, context: float | None = None) -> bool:
    """Is the measured ``row``'s configuration the query's own (same draft shape and
    concurrency, and ``context``, the row's whole tokens asked, when given)? Not merely at
    distance 0: a DDTree budget of another block, C x M equal at another C, or the same
    configuration at another context, is a neighbour."""
    return ((row.block, row.budget, row.verify_tokens, row.concurrency)
            == (sc.block, sc.budget, sc.verify_tokens, sc.concurrency)
            and (context is None or context == sc.context_tokens))


def keyed_rng(seed: int, key: str) -> np.random.Generator:
    """A generator determined by ``(seed, key)``: the same key always gets the same stream,
    different keys independent ones (an anchor's configuration here; an overhead group in
    ``workflows/decisions/common.group_rng``)."""
    digest = hashlib.sha256(key.encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def scenario_key(sc: Scenario) -> str:
    """What determines a scenario's predictive draws (its acceptance aside): the key of
    :func:`keyed_rng` for ``predict`` (its step and run-to-run noise, ``--explain``'s split,
    P(faster than AR), ``next``'s query, the scoring of a new row). ``kv_cache`` is not in it:
    the dtype moves the read cap, not the draws it caps (the same draws, capped at each dtype's
    read). Numbers are keyed as Python's (numpy 2 writes ``np.int64(16)``, which drew other
    numbers than 16).

    Nor are the context and the concurrency: the key is the configuration's at context 0 and
    C = 1 (the key every context-0, single-stream answer always had), so its answers along
    both axes share their random numbers and differ by what the step does. Keyed apart, one
    token of context moved an answer by Monte Carlo noise, ~0.1% either way, and a longer
    context could come out faster (Qwen3.5-397B AR on 4x RTX PRO 6000 Server, public corpus:
    76.636 tok/s at 65536, 76.721 at 65537). The step draws as many numbers at every context
    and C as at context 0 and C = 1 (:func:`~ddtree_bayes.engine.structure.tied_ratio_spread`),
    so the noise drawn after it is common too. Nor is ``--drafter`` naming the fit's default
    card of the model and method (the question without it, :attr:`Scenario.drafter_named`,
    the one rule the acceptance and anchors follow too): a named-only card's answers have a
    stream of their own.

    >>> import numpy as np
    >>> from ddtree_bayes.engine.question import Flags, resolve
    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> sc = resolve(point_mass_draws(), Flags(engines=("sglang",))).asked[0].scenario
    >>> scenario_key(sc) == scenario_key(dataclasses.replace(sc, block=np.int64(sc.block)))
    True
    >>> scenario_key(sc) == scenario_key(dataclasses.replace(sc, context_tokens=65537.0,
    ...                                                      concurrency=8))
    True
    """
    def plain(value: object) -> object:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        return float(value) if isinstance(value, numbers.Real) else value

    # (context 0.0 and C 1 as a resolved context-0, single-stream scenario writes them)
    return repr(tuple(map(plain, (sc.model, sc.hardware, sc.gpus, sc.engine, sc.method,
                                  sc.block, sc.budget, sc.verify_tokens, 0.0, 1,
                                  None if sc.drafter is None else sc.drafter_named))))


@dataclasses.dataclass(frozen=True)
class DiscrepancyPosterior:
    """The posterior of a measured configuration's discrepancy given its rows, per draw
    (:func:`anchor_shift`): Normal(``mean``, ``var``), under a Student-t likelihood with
    ``var`` divided by a mixing weight ``scale x Gamma(shape)`` (``shape`` ``(nu + 1) / 2``,
    ``scale`` ``2 / (nu + r^2 / T)``; both None with a normal likelihood)."""

    mean: np.ndarray
    var: np.ndarray
    shape: float | None = None
    scale: np.ndarray | None = None

    def at(self, gamma: np.ndarray | None, z: np.ndarray) -> np.ndarray:
        """(draws,) the discrepancy at standard draws (:func:`_standard_draws`): ``mean +
        sqrt(var / (scale gamma)) z`` (``gamma`` None: normal)."""
        var = self.var
        if gamma is not None:   # (scale x gamma: the digits numpy's gamma(shape, scale) draws)
            var = var / (self.scale * gamma)
        return self.mean + np.sqrt(var) * z


def _discrepancy_posterior(draws: Fit, rows: list, d_c: float, at_itself: bool
                           ) -> DiscrepancyPosterior:
    """The posterior of the structural discrepancy of the configuration of ``rows``
    (:func:`anchor_shift`); asked of that deployment (``at_itself``: the configuration itself,
    or it at another context or concurrency, :func:`same_deployment`), its own error
    ``config_sd`` too (a new run shares it with the rows)."""
    v = draws.variables
    at, _ = _step_components(draws, row_scenario(draws, rows[0]), np.random.default_rng(0))
    n = len(rows)
    z = np.log(np.array([r.tok_s for r in rows], dtype=float)) - offsets(rows)
    resid = float(z.mean()) + np.log(at["step"])
    run, own = scatter_parts(v)
    a = (v["structure_sd"] * d_c) ** 2
    total = a + np.asarray(own) ** 2 + np.asarray(run) ** 2 / n
    if at_itself:   # the deployment measured: its own error is shared with its rows too
        a = a + np.asarray(own) ** 2
    mean = a / total * resid
    var = np.maximum(a - a ** 2 / total, 0.0)
    nu = C.likelihood_nu(v)
    if nu is None:
        return DiscrepancyPosterior(mean, var)
    # Student-t as a scale mixture: the mixing weight given the residual
    return DiscrepancyPosterior(mean, var, (nu + 1.0) / 2.0,
                                np.broadcast_to(2.0 / (nu + resid ** 2 / total), (draws.n_draws,)))


def _standard_draws(rng: np.random.Generator, n: int, shape: float | None
                    ) -> tuple[np.ndarray | None, np.ndarray]:
    """(n,) standard Gamma(``shape``) draws (None with a normal likelihood, ``shape`` None)
    and then (n,) standard normals, from ``rng``: the draws of one anchor's stream, in the
    order its digits were always drawn (the Gamma weights first)."""
    gamma = None if shape is None else rng.standard_gamma(shape, n)
    return gamma, rng.standard_normal(n)


def _rotated_draws(lo: tuple[np.ndarray | None, np.ndarray],
                   hi: tuple[np.ndarray | None, np.ndarray], shape: float | None,
                   theta: float) -> tuple[np.ndarray | None, np.ndarray]:
    """Standard draws (:func:`_standard_draws`) between two independent sets ``lo`` and
    ``hi``: ``cos(theta) z_lo + sin(theta) z_hi``, standard normal at every ``theta`` and
    ``lo``'s at 0, ``hi``'s at pi / 2. The Gamma weights (a Student-t likelihood) rotate
    the same way in normal scores: each mapped by its CDF to a uniform and that to a normal,
    rotated, and mapped back (a Gaussian copula), Gamma(``shape``) at every ``theta`` and
    ``lo``'s at 0 (to ~1e-14 relative). A linear mix of two Gamma draws is no Gamma (its mean is
    right, its spread narrower); one of the two picked at random per draw keeps the marginal
    but jumps, draw by draw, at the first token inside a measured context."""
    (gamma_lo, z_lo), (gamma_hi, z_hi) = lo, hi
    c, s = math.cos(theta), math.sin(theta)
    z = c * z_lo + s * z_hi
    if shape is None or gamma_lo is None or gamma_hi is None:
        return None, z
    from scipy import special

    def score(g: np.ndarray) -> np.ndarray:   # (each tail from its own side: no 1 - p)
        p, q = special.gammainc(shape, g), special.gammaincc(shape, g)
        return np.where(p < 0.5, special.ndtri(p), -special.ndtri(q))

    x = c * score(gamma_lo) + s * score(gamma_hi)
    gamma = np.where(x < 0.0, special.gammaincinv(shape, special.ndtr(x)),
                     special.gammainccinv(shape, special.ndtr(-x)))
    return gamma, z


#: Seed of the anchor's own draws (fixed: the same fit gives the same answer every call).
ANCHOR_SEED = 20261202


def _anchor_candidates(draws: Fit) -> dict:
    """Every measured configuration with accept_len the fit learned from, by (pair, engine,
    method, context, drafter): {(C, block, budget, verify tokens): rows}. The drafter is the
    rows' ``drafter`` column as :func:`~ddtree_bayes.engine.scenario.drafter_asked` reads a
    query's (None: the default card): each drafter's rows are configurations of their own
    (core/likelihood.py), with discrepancies of their own, so a query of one drafter is never
    anchored to another's (``predict --drafter`` of the Kimi K2.5 head on the RTX PRO 6000 was
    anchored to the K2.6 head's measured row: 123 tok/s where the K2.5 row measured 112.5)."""
    default_ctx = blank_context(draws)
    held = tuple(draws.meta.get("held_out_rows", ()))
    memo = draws.memo.setdefault("anchor_candidates", {})
    groups = memo.get(held)
    if groups is None:   # every measured configuration with accept_len, by its group
        groups = {}
        for r in fit_rows(draws):
            if r.accept_len is None:
                continue
            ctx = r.asked_context(default_ctx)   # (a mean context: the whole tokens asked)
            key = (row_pair(draws, r), r.engine, r.method, ctx,
                   drafter_asked(draws, r.model, r.method, r.drafter))
            groups.setdefault(key, {}).setdefault(
                (r.concurrency, r.block, r.budget, r.verify_tokens), []).append(r)
        memo[held] = groups
    return groups


def _nearest_measured(draws: Fit, sc: Scenario, at_context: float | None = None,
                      at_concurrency: int | None = None):
    """(rows of the nearest measured configuration, the query's distance from it, that
    configuration's distance from the other ones on its system, its label, its context), or
    None; ``at_concurrency``: the query's own deployment measured at that C there (one end of
    :func:`_bracketing_concurrencies`), not the nearest. The configurations at the query's
    context (``at_context``: at that measured one), or with none there the nearest measured
    context's (of equal distances, :func:`_anchor_context`): a configuration
    measured at one context only was anchored there and answered by the structural step
    elsewhere, so a longer context could come out faster (DeepSeek-R1 AR on 8x B200: 114 tok/s
    at its measured 1024 tokens, 116 at 2048)."""
    model = draws.meta["model"]
    groups = _anchor_candidates(draws)
    # (of the contexts its own deployment was measured at, when any: _anchor_contexts)
    ctx = _anchor_context(draws, sc, at_context)
    if ctx is None:
        return None
    configs = groups[(sc.pair, sc.engine, sc.method, ctx, sc.drafter_named)]
    passes_q = draft_structure(model, sc.method, sc.block, sc.budget)[0]
    batch_q = float(sc.verify_tokens * sc.concurrency)
    # each configuration's (C x M, drafter passes) point, as measured_configs has them
    points = {k: (float(rs[0].verify_tokens * rs[0].concurrency),
                  draft_structure(model, rs[0].method, rs[0].block, rs[0].budget)[0])
              for k, rs in configs.items()}
    distances = {k: S.config_distance(batch_q, passes_q, [m], [p]) for k, (m, p) in points.items()}
    # the query's own deployment (its draft shape, at any C: its own error is known there,
    # same_deployment) before any other; then the nearest; of equals the query's own
    # configuration, then one at its C, then the first listed (a DDTree budget at another
    # block is at distance 0 too, and may be listed first). The nearest of any shape anchored
    # a second stream of a measured deployment to a faster-measured neighbour: faster than one
    # stream (Qwen3.8-27B MTP k=2 on an RTX PRO 6000 Max-Q, public corpus: 134.46 tok/s per
    # user at C = 1, 135.88 at C = 2, anchored to the k=4 row)
    own = (sc.concurrency, sc.block, sc.budget, sc.verify_tokens)
    nearest = (min(distances, key=lambda k: (k[1:] != own[1:], distances[k], k != own,
                                             k[0] != sc.concurrency))
               if at_concurrency is None else (at_concurrency, *own[1:]))
    distance, best = distances[nearest], configs[nearest]
    m_c, p_c = points[nearest]
    ms, ps = measured_configs(draws, sc.pair)
    others = [(m, p) for m, p in zip(ms, ps, strict=True) if (m, p) != (m_c, p_c)]
    # the likelihood's distance (core/likelihood.config_distances: 0 with no other point)
    d_c = S.config_distance(m_c, p_c, [m for m, _ in others], [p for _, p in others])
    r0 = best[0]
    # (its block too when it is not the query's: a block-16 tree anchored to a block-8 one read
    # as the block asked)
    block = f" block {r0.block}" if r0.block is not None and r0.block != sc.block else ""
    label = (f"{r0.method}{block} budget {r0.budget}" if r0.budget is not None
             else f"{r0.method}{block}") + \
        f" (M = {r0.verify_tokens}" + \
        (f", C = {r0.concurrency}" if r0.concurrency != 1 or sc.concurrency != 1 else "") + \
        f", {len(best)} row{'s' if len(best) > 1 else ''}" + \
        (f", at context {plain_text(ctx)})" if ctx != sc.context_tokens else ")")
    return best, distance, d_c, label, ctx


def _step_components(draws: Fit, sc: Scenario, rng: np.random.Generator
                     ) -> tuple[dict[str, np.ndarray], str]:
    """:func:`step_components` without the anchor: the structural model's step."""
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
            if "tp_tok_ms" in v:
                roofline["tp_tok_ms"] = v["tp_tok_ms"][:, s]
    else:
        t, transfer_how = transferred_parameters(draws, sc, rng)
        step_ar, share, shape, ctx_ms = (t["step_ar_ms"], t["moe_share"], t["moe_shape"],
                                         t["ctx_ms_per_unit"])
        if form == "roofline":
            roofline["tok_ratio"] = t["tok_ratio"]
            if "tp_tok_ms" in t:
                roofline["tp_tok_ms"] = t["tp_tok_ms"]
    streams = float(sc.concurrency)
    if form == "roofline":   # the distinct experts of all C x M tokens the step verifies
        roofline["distinct"] = distinct_ratio(model, sc.verify_tokens * sc.concurrency, sc.model)
        roofline["knee"] = model.get("knee", 3.0)
    units = sc.context_tokens / model["context_unit_tokens"]
    M = float(sc.verify_tokens)
    ctx_streams = None if streams == 1 else streams ** ctx_batch_exponent(draws)
    target = S.target_ms(step_ar, share, shape, ctx_ms, v["ctx_verify_exponent"], M, units, form,
                         np.exp, np.log, concurrency=streams, ctx_streams=ctx_streams,
                         **roofline)
    attn_base = (1.0 - share) * step_ar
    context = ctx_ms * (units * (streams if ctx_streams is None else ctx_streams)
                        ) * M ** v["ctx_verify_exponent"]
    parts = {"moe": target - attn_base - context, "attn_base": attn_base, "context": context}
    passes, stream_nodes = draft_structure(model, sc.method, sc.block, sc.budget)
    nodes = stream_nodes * streams   # every stream builds its own tree (engine/model.py)
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
    label = group_label(draws, sc.pair, sc.engine, sc.method)
    assert label is not None   # (a speculative method)
    groups = meta["coords"]["overhead_group"]
    measured = label in groups
    carried, held_out = None, False
    if step_form == "structured" and not group_learned(draws, label):
        held_out = measured   # a group whose rows a validation fold holds out (weight 0)
        # never measured, or measured only in rows a validation fold holds out: carried from
        # a system that measured it, else the population's (on a system the fit did not
        # learn either, the group's own variables are its prior offset by that system's
        # prior-only AR step)
        carried = carried_group(draws, sc, engine)
        measured = measured and carried is None and sc.measured
    fresh = new_deployment_group(draws, sc) is not None
    if fresh:   # --new-deployment: the measured group carried to another deployment of itself
        carried = (label, sc.hardware, sc.gpus, sc.model if sc.multi else None)
    # (one decision for the answer's scatter and its note; engine: a relation's base engine)
    spread = deployment_spread(draws, sc, engine) if carried is not None else None
    how += (new_deployment_note(label, spread, engine) if fresh else
            f"overhead of group {label}, whose rows this fit holds out: drawn from the "
            "pooled population" if measured and held_out else
            f"overhead of measured group {label}" if measured else
            f"overhead of group {carried[0]} carried to {sc.pair} (fixed and per-node ms, "
            f"per-pass multiple of the drafter roofline; {carry_note(spread, engine)})"
            if carried else
            f"overhead of unmeasured group {label} drawn from the pooled population"
            + recurrent_note(draws, sc, engine))
    if not measured:   # (--new-deployment's group stays measured: no AMD effect between)
        how += amd_note(draws, sc, engine, carried[1] if carried is not None else None)
    if fresh and sc.drafter is not None:   # (carried_spec_ms: at the group's measured multiple)
        how += drafter_note(sc.drafter.drafter,
                            *(pass_roofline(draws, s)[0]
                              for s in (sc, dataclasses.replace(sc, drafter=None))))
    if carried is not None:
        spec = carried_spec_ms(draws, sc, carried, passes, nodes, scale, rng, spread)
        return {**parts, "spec": spec, "step": target + spec, "log_sd": log_sd,
                "spec_tied": np.zeros(draws.n_draws)}, how
    if step_form == "structured":
        ratios = []
        # one AMD effect for the fixed and per-pass costs, as the model's groups share it
        amd = 0.0 if measured else amd_log_effect(draws, sc.hardware, engine, rng)
        for part in ("fixed", "pass", "tree"):
            if measured:
                ratios.append(v[f"spec_{part}_ratio"][:, groups.index(label)])
            else:
                ratios.append(np.exp(unmeasured_log_ratio(draws, sc, part, engine, step_ar, rng,
                                                          amd)))
        fixed, per_pass, per_node = ratios
        pass_factor = 1.0
        if sc.drafter is not None and measured:   # the measured multiple of another roofline
            new, old = (pass_roofline(draws, s)[0] for s in (sc, dataclasses.replace(sc, drafter=None)))
            pass_factor = new / old
            per_pass = per_pass * pass_factor
            how += drafter_note(sc.drafter.drafter, new, old)
        elif sc.drafter is not None:
            how += (f"; drafter {sc.drafter.drafter}: {pass_roofline(draws, sc)[0]:.3g} ms per "
                    "pass at its roofline")
        spec = S.structured_spec_ms(step_ar, fixed, per_pass, per_node, passes, nodes, scale)
        tied = np.zeros(draws.n_draws)
        if measured:   # fewer passes than measured cannot save more than the group's SPEC
            # (what it draws from rng is decided at C = 1: the same at every C)
            tied = tied + tied_ratio_spread(draws, label, {"pass": passes, "tree": nodes},
                                            step_ar * scale, rng, pass_factor,
                                            {"pass": passes, "tree": stream_nodes})
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


def drafter_note(name: str, new: float, old: float) -> str:
    """The answer's note on ``--drafter NAME`` for a group the fit measured (its own rows, or
    carried to another deployment of it by ``--new-deployment``): ``new`` ms per pass at the
    card's roofline against ``old`` for the drafter the fit priced, paid at the group's
    measured multiple.

    >>> drafter_note("my-kimi-ddtree", 0.6291, 0.3215)[2:59]
    'drafter my-kimi-ddtree: 0.629 ms per pass at its roofline'
    """
    return (f"; drafter {name}: {new:.3g} ms per pass at its roofline against {old:.3g} ms "
            "for the drafter the fit priced, at the group's measured multiple")


def new_deployment_note(label: str, spread: np.ndarray | None, engine: str) -> str:
    """The answer's note on an overhead ``--new-deployment`` carries (engine/structure.py
    :func:`~ddtree_bayes.engine.structure.new_deployment_group`); ``spread``:
    :func:`~ddtree_bayes.engine.structure.deployment_spread`'s."""
    between = ("the [transfer] system scatter" if spread is None else
               "the [transfer] system scatter and the groups' spread spec_fixed_log_sd (a "
               f"hybrid target in {engine}, whose hybrid deployments differ as much as any two "
               "groups)")
    return (f"overhead of group {label} carried to another deployment of it (--new-deployment: "
            "its fixed and per-node ms and per-pass multiple of the drafter roofline, not "
            f"anchored to its rows; a prior-driven scatter between deployments: {between})")


def sample_acceptance(prior: AcceptancePrior, n: int, rng: np.random.Generator) -> np.ndarray:
    """Fit from an acceptance prior (numpy only; truncated normal by rejection)."""
    from ddtree_bayes.core.sampling import prior_sample

    return prior_sample(prior.prior, n, rng)


#: The seed tables parsed, by resolved path: (sha256 of the file's bytes, its rows), one entry
#: a file, parsed once per process while its bytes are unchanged (``report`` asks about 60
#: questions, each wanting the table). The file is small, so each call reads it to compare
#: the hash: exact where a modification time is not (a same-size rewrite inside a coarse
#: filesystem's tick, a copy that keeps the mtime).
_SEED_TABLES: dict[str, tuple[str, list[dict[str, str]]]] = {}


def load_seed_table(workdir: Path | None = None) -> list[dict[str, str]]:
    """The original deterministic estimates (data/seed_estimates.csv or the bundled copy),
    parsed once per process while the file's bytes are unchanged; each call gets its own
    copy of the rows."""
    path = paths.data_file("seed_estimates.csv", workdir)
    data = per_call.read_bytes(path)
    digest, key = hashlib.sha256(data).hexdigest(), str(path.resolve())
    held = _SEED_TABLES.get(key)
    if held is None or held[0] != digest:
        text = data.decode("utf-8")
        held = _SEED_TABLES[key] = (digest, list(csv.DictReader(io.StringIO(text, newline=""))))
    return [dict(row) for row in held[1]]


#: The model of the original estimates (data/seed_estimates.csv has no model column).
SEED_MODEL = "kimi-k2.6"
#: The original table's node: 8 GPUs (its notes), short context, the method's own drafter.
SEED_GPUS = 8


def seed_step_ms(rows: list[dict[str, str]]) -> float | None:
    """The original estimator's step time of a configuration, from its rows of the seed table
    (:func:`seed_rows`): the mean of accept/tok_s over them; tok/s at any acceptance is then
    accept / step. None where the table does not answer (no rows)."""
    if not rows:
        return None
    return float(np.mean([float(r["accept_len"]) / float(r["tok_s"]) * 1000.0 for r in rows]))


def original_tok_s(rows: list[dict[str, str]], accept: float) -> float | None:
    """The original estimate at acceptance ``accept`` (tok/s) of the configuration whose seed
    table rows are ``rows`` (:func:`seed_rows`; None where there are none): the table's own
    figure where it has a row at this acceptance, else ``accept`` / its step
    (:func:`seed_step_ms`). The quoted figures are rounded (570 tok/s at 12, 765 at 16: 21.05
    and 20.92 ms a step), so accept / the mean step printed 572 where the table says 570;
    every reader (predict's rows, the report's fan) asks here, with the rows found once per
    configuration.

    >>> table = load_seed_table()
    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> sc = resolve_scenario(point_mass_draws(), hardware="b300", gpus=8, engine="sglang",
    ...                       method="ddtree", block=16, budget=32, verify_tokens=None,
    ...                       context_tokens=0)
    >>> rows = seed_rows(table, sc)
    >>> original_tok_s(rows, 12.0), round(original_tok_s(rows, 14.0), 1), original_tok_s([], 12.0)
    (570.0, 667.2, None)
    """
    own = [float(r["tok_s"]) for r in rows if float(r["accept_len"]) == accept]
    if own:
        return float(np.mean(own))
    step = seed_step_ms(rows)
    return None if step is None else accept / step * 1000.0


def seed_rows(table: list[dict[str, str]], sc: Scenario) -> list[dict[str, str]]:
    """The seed table's 'deterministic estimate' rows of ``sc``, all of :data:`SEED_MODEL`
    unless the table has a ``model`` column; none for a question the table does not answer:
    another GPU count (:data:`SEED_GPUS` unless the table has a ``gpus`` column), a context
    beyond 0, or another drafter (``--drafter``, or a block or budget other than a row's: a
    block-8 tree of budget 32 verifies the 33 tokens of the block-16 estimate, and was shown
    it)."""
    if sc.context_tokens or sc.drafter is not None:
        return []
    found = []
    for row in table:
        if sc.model is not None and (row.get("model") or SEED_MODEL) != sc.model:
            continue
        if str(row.get("gpus") or SEED_GPUS) != str(sc.gpus):
            continue
        if any((row.get(k) or "").strip() and (row.get(k) or "").strip() != str(v)
               for k, v in (("block", sc.block), ("budget", sc.budget))):
            continue   # (a blank cell, as an AR row's, does not say)
        if (row["kind"] == "deterministic estimate" and row["hardware"] == sc.hardware
                and row["engine"] == sc.engine and row["method"] == sc.method
                and row["verify_tokens"] == str(sc.verify_tokens)):
            found.append(row)
    return found


#: The decimals of a probability that label and key its interval (``lo90``, "90% interval").
PROB_DECIMALS = 6


def prob_problem(prob: float) -> str | None:
    """What is wrong with ``prob`` as the probability of an interval, or None. A probability
    strictly between 0 and 1 that rounds to 0 or 1 at :data:`PROB_DECIMALS` was answered as a
    "100% interval" (the draws' min to max) or a "0% interval" (the median twice).

    >>> prob_problem(0.9), prob_problem(0.9999999)[:42]
    (None, '0.9999999 rounds to 1 at the 6 decimals in')
    """
    if isinstance(prob, bool) or not isinstance(prob, numbers.Real):   # (the API's "0.5")
        return f"{prob!r} is not a number between 0 and 1"
    if not 0 < prob < 1:
        return f"{prob!r} is not between 0 and 1"
    rounded = round(prob, PROB_DECIMALS)
    if not 0 < rounded < 1:
        return (f"{prob!r} rounds to {rounded:g} at the {PROB_DECIMALS} decimals intervals are "
                "labelled with, and an interval of probability 0 or 1 is none")
    return None


#: The fix of a refused probability.
PROB_FIX = "give a probability from 0.000001 to 0.999999, e.g. --prob 0.8"


def interval_probs(prob: float) -> tuple[float, ...]:
    problem = prob_problem(prob)
    if problem is not None:
        raise QueryError(f"--prob {problem}", fix=PROB_FIX)
    return tuple(sorted({0.5, round(prob, PROB_DECIMALS)}))


def wide_interval_warnings(prob: float, n_draws: int,
                           effective: float | None = None) -> list[str]:
    """The line predict (the CLI's and the API's), optimize and next warn when ``--prob`` asks
    a wider interval than the fit's draws carry: each tail rests on fewer than 10 draws
    (optimize and next printed such an interval without a word; the API too). ``effective``:
    what the ``n_draws`` stored are worth when fewer (a reweighted fit's importance resample,
    :attr:`~ddtree_bayes.engine.posterior.Fit.effective_draws`), whose tails are counted in
    it: at --prob 0.99, 4000 stored draws worth 1000 put 5 in each tail, not 20.

    >>> wide_interval_warnings(0.9, 4000), len(wide_interval_warnings(0.999, 4000))
    ([], 1)
    >>> len(wide_interval_warnings(0.99, 4000)), len(wide_interval_warnings(0.99, 4000, 1000.0))
    (0, 1)
    """
    counted = float(n_draws) if effective is None else float(effective)
    tail = (1.0 - prob) / 2 * counted
    if tail >= 10 or prob <= 0.9:
        return []
    if effective is None:
        return [f"--prob {prob:g}: each tail of the wide interval rests on about {tail:.3g} of "
                f"the fit's {n_draws} draws, so its ends are noisy (a fit with more --draws, or "
                "a smaller --prob)"]
    return [f"--prob {prob:g}: each tail of the wide interval rests on about {tail:.3g} of the "
            f"fit's about {counted:.0f} effective draws ({n_draws} stored: an importance "
            "resample), so its ends are noisy (`update --refit` samples afresh, or a smaller "
            "--prob)"]


def pct_label(p: float) -> str:
    """The percent label of the interval :func:`interval_probs` computes for ``p`` (the
    probability rounded the same way, so a label and its keys always agree).

    >>> pct_label(0.9), pct_label(0.0078125)
    ('90', '0.7812')
    """
    return f"{round(p, PROB_DECIMALS) * 100:g}"


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


def predict(fit: Fit, *, model: str | None = None, hardware: str | None = None,
            gpus: int | None = None, engines: tuple[str, ...] | list[str] | str | None = None,
            method: str | None = None, block: int | None = None, budget: int | None = None,
            verify_tokens: int | None = None, context: float | str | None = None,
            accept: str | float | None = None, target: float | None = None, prob: float = 0.9,
            seed: int = DEFAULT_SEED, workdir: Path | None = None,
            mixture: list[tuple[Fit, float]] | None = None, strict: bool = False,
            concurrency: int | tuple[int, ...] | list[int] | None = None,
            kv_cache: str | None = None, drafter: str | None = None,
            warnings: list[str] | None = None, explain: bool = False,
            notes: list[str] | None = None, new_deployment: bool = False) -> list[dict]:
    """Posterior predictive throughput for one question: the keyword form of ``predict``'s
    flags (``concurrency``: one C or several; rows then per user with a ``total``;
    ``kv_cache``: the KV cache's dtype, ``--kv-cache``; ``drafter``: a drafter card's name,
    ``--drafter``; ``accept``: as ``--accept``, or a list of numbers; ``explain``: each row's
    ``explain``, as ``--explain``; ``new_deployment``: price a measured group's question as
    another deployment of it, as ``--new-deployment``), resolved
    (:func:`ddtree_bayes.engine.question.resolve`) and computed
    (:func:`predict_rows`). With no configuration arguments this is the fit's default question
    (B300 DDTree block 16, budget 32, SGLang and native, unless the fit never measured B300).
    ``warnings`` gets what the CLI prints as warnings (a name never measured nor declared, a
    context far past the measured ones, ...); ``notes`` the line ``predict`` prints on stderr
    when the fit's default question filled flags not given (the fit never measured B300: its
    own most-measured system is asked; :attr:`~ddtree_bayes.engine.question.Question.note`).

    Examples
    --------
    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> rows = predict(point_mass_draws(), accept="12", engines=["sglang"])
    >>> round(rows[0]["median"], 3)   # 12 tokens / 20 ms
    600.0
    """
    from ddtree_bayes.engine.question import Flags, resolve, streams_of

    # (the API's engines=5 met a bare TypeError, explain="no" asked for the variance split)
    if engines is not None and not isinstance(engines, str | list | tuple):
        raise QueryError(f"engines {engines!r} is not an engine name or a list of them",
                         fix="give engine names, e.g. engines=['sglang', 'native']")
    if isinstance(engines, list | tuple) and not engines:   # (answered the default engines)
        raise QueryError(f"engines {engines!r} names no engine",
                         fix="give engine names, e.g. engines=['sglang', 'native'], or leave "
                             "engines out for the default engines")
    if isinstance(concurrency, list | tuple) and not concurrency:   # (answered one stream)
        raise QueryError(f"concurrency {concurrency!r} names no stream count",
                         fix="give stream counts, e.g. concurrency=[1, 4, 8, 16], or leave "
                             "concurrency out for one stream")
    if not isinstance(explain, bool | np.bool_):
        raise QueryError(f"explain {explain!r} is not True or False",
                         fix="give explain=True for each row's variance split (as --explain), "
                             "or leave it out")
    flags = Flags(model=model, hardware=hardware, gpus=gpus,
                  engines=tuple(engines.split(",")) if isinstance(engines, str) else
                  (tuple(engines) if engines else None),
                  method=method, block=block, budget=budget, verify_tokens=verify_tokens,
                  context=context, accept=accept_text(accept),
                  concurrency=streams_of(concurrency), kv_cache=kv_cache, drafter=drafter,
                  new_deployment=new_deployment)
    question = resolve(fit, flags, strict=strict)
    rows = predict_rows(fit, question, target=target, prob=prob, seed=seed, workdir=workdir,
                        mixture=mixture, explain=explain)
    if notes is not None and question.note is not None:   # (the API answered it silently)
        notes.append(question.note)
    if warnings is not None:
        warnings.extend(answer_warnings(fit, question, rows, prob=prob, mixture=mixture))
    return rows


def mixture_new_deployment_warnings(mixture: list[tuple[Fit, float]],
                                    scenarios: Sequence[Scenario]) -> list[str]:
    """A model average's ``--new-deployment changes nothing`` lines: one per fit of the
    mixture (of positive weight) and question the flag changes nothing in, naming the fit
    and its weight (:func:`~ddtree_bayes.engine.structure.new_deployment_warning`). The
    asked fit's own lines said it of the whole answer, or nothing: a structured fit asked
    beside a fraction-form fit of weight 0.95 answered "new deployment" with 95% of its
    draws the measured deployment's anchored answer, without a word."""
    out: list[str] = []
    for d, weight in mixture:
        if weight <= 0:
            continue
        within = f" in fit {d.meta['fit_id']} (weight {weight:.2f} of the model average)"
        out += [w for sc in scenarios
                if (w := new_deployment_warning(d, sc, within)) is not None]
    return list(dict.fromkeys(out))


def mixture_warnings(fit: Fit, question: Question, mixture: list[tuple[Fit, float]] | None
                     ) -> list[str]:
    """The warnings of ``question`` (asked of ``fit``) for the answer of ``mixture`` (None:
    the asked fit's own):
    its ``--new-deployment changes nothing`` lines are each fit's of the mixture
    (:func:`mixture_new_deployment_warnings`), the rest as they are."""
    if mixture is None:
        return list(question.warnings)
    unchanged = {w for sc in question.scenarios
                 if (w := new_deployment_warning(fit, sc)) is not None}
    return ([w for w in question.warnings if w not in unchanged]
            + mixture_new_deployment_warnings(mixture, question.scenarios))


def answer_warnings(fit: Fit, question: Question, rows: list[dict], *, prob: float = 0.9,
                    mixture: list[tuple[Fit, float]] | None = None) -> list[str]:
    """What :func:`predict` warns of its answer ``rows`` to ``question`` (its ``warnings``):
    a method without a drafter (the stored and built-in cards, not this directory's), the
    question's own warnings, an interval too wide for the draws, the read cap and balanced
    routing of the rows, and an engine left out of an AR question (a row missing). The
    report's answer line says the same of the default question, from the rows it computed
    once (workflows/report/sections.py ``default_answer``)."""
    return [*drafter_gap_warnings(fit, [(sc.model, sc.method) for sc in question.scenarios],
                                  here=False, drafter=question.flags.drafter),
            *mixture_warnings(fit, question, mixture),
            *wide_interval_warnings(prob, fit.n_draws, fit.effective_draws),
            *ceiling_warnings(rows), *routing_warnings(rows), *question.left_out]


def accept_text(accept: object) -> str | None:
    """``predict``'s ``accept`` as ``--accept`` writes it: one value, or any sequence of
    numbers as ``concurrency`` takes them (a list, tuple, range, numpy array or pandas Series:
    engine/question.py ``asked_values``; the API's natural forms, refused as "not a number,
    list or range" before) joined by commas.

    >>> accept_text([12, 14.5]), accept_text("12:16"), accept_text(None), accept_text(13.5)
    ('12,14.5', '12:16', None, '13.5')
    >>> accept_text(range(12, 15)), accept_text(np.array([12, 14]))
    ('12,13,14', '12,14')
    """
    from ddtree_bayes.engine.question import asked_values

    if accept is None:
        return None
    return ",".join(str(a) for a in asked_values(accept))


def predict_rows(fit: Fit, question: Question, *, target: float | None = None,
                 prob: float = 0.9, seed: int = DEFAULT_SEED, workdir: Path | None = None,
                 mixture: list[tuple[Fit, float]] | None = None,
                 explain: bool = False, memo: dict | None = None) -> list[dict]:
    """The numbers of a resolved question (:class:`~ddtree_bayes.engine.question.Question`):
    per engine and acceptance source, the median tok/s, the 50% and ``prob`` intervals,
    P(tok/s >= target) and the original estimate with its +-30% band.

    Predictions include the fitted run-to-run noise, so they are what a measurement would
    show. ``mixture`` (pairs of fits and weights summing to 1, e.g. the pseudo-BMA+ weights of
    :mod:`compare`) averages the predictive distributions of several models. Rows of a fit of
    several models carry a ``model`` key; every row says where its acceptance came from
    (``accept_kind``) and, for machines, its distribution (``accept_distribution``).
    ``memo``: the predictive draws already computed for these scenarios
    (:func:`per_token_draws`), shared, not drawn again."""
    probs = interval_probs(prob)
    if target is not None and (isinstance(target, bool) or not (   # (True read as 1 tok/s)
            isinstance(target, (int, float)) and math.isfinite(target) and target >= 0)):
        raise QueryError(f"--target {target!r} is not a finite throughput >= 0",
                         fix="give a throughput in tok/s, e.g. --target 800")
    if not is_seed(seed):
        raise QueryError(f"seed {seed!r} is not a whole number from 0 to {MAX_SEED}",
                         fix=f"give seed as a whole number, e.g. {DEFAULT_SEED}")
    seed = int(seed)
    seed_table = load_seed_table(workdir)
    rows = []
    streams = question.flags.concurrency
    cases = [(asked, dataclasses.replace(asked.scenario, concurrency=c))
             for asked in question.asked for c in (streams or (1,))]
    if explain and mixture is not None:
        raise QueryError("--explain splits one fit's draws, not a model average's",
                         fix="drop --model-average, or ask --explain of each fit (--fit ID)")
    for asked, sc in cases:
        per_token, how = per_token_draws(fit, sc, seed, mixture, memo=memo)
        split = explain_parts(fit, sc, seed) if explain else None
        priced = pass_drafter(fit, sc)
        cap = ceiling_row(per_token, read_ceiling(fit, sc))
        routing = routing_row(per_token, balanced_read(fit, sc))
        original = seed_rows(seed_table, sc) if sc.concurrency == 1 else []
        for source in asked.accept:
            a, dist = acceptance_draws(fit, source, keyed_rng(seed, repr(source)), mixture)
            check_acceptance_range(fit, sc, a, f"acceptance {source.label}")
            a_mean = (source.value if source.value is not None
                      else sum(source.uniform) / 2 if source.uniform is not None
                      else float(np.mean(a)))   # (the original estimate's acceptance)
            row: dict[str, Any] = {"model": sc.model} if sc.multi else {}
            row |= {"hardware": sc.hardware, "gpus": sc.gpus, "engine": sc.engine,
                    "method": sc.method, "block": sc.block, "budget": sc.budget,
                    "verify_tokens": sc.verify_tokens, "context_tokens": sc.context_tokens,
                    "accept": source.label, "accept_max": sc.limit.tokens,
                    "accept_max_rule": sc.limit.rule, "accept_kind": source.kind}
            row.update(summarize(a * per_token, probs, target))
            if streams:   # per user above; the C streams' total, draw by draw
                row["concurrency"] = sc.concurrency
                row["total"] = summarize(sc.concurrency * a * per_token, probs, None)
                if sc.method != AR_METHOD:
                    row["p_faster_than_ar"] = (
                        p_faster_than_ar(fit, sc, a, versus_ar_rng(seed, sc, source))
                        if mixture is None else mixture_p_faster(mixture, sc, source, seed))
            seed_tok = original_tok_s(original, a_mean)
            row["original"] = seed_tok
            row["original_lo"] = None if seed_tok is None else seed_tok * (1 - SEED_BAND)
            row["original_hi"] = None if seed_tok is None else seed_tok * (1 + SEED_BAND)
            row["overhead_from"] = how
            row["accept_value"] = source.value
            if sc.drafter is not None:
                row["drafter"] = sc.drafter.drafter
            if sc.new_deployment:   # (the question's echo: absent without the flag)
                row["new_deployment"] = True
            if priced is not None:   # (which card priced the passes: generic is None)
                row["pass_drafter"], row["pass_drafter_note"] = priced
            row["accept_distribution"] = dist
            if source.where is not None:   # (measured: which rows the mean is of)
                row["accept_from"] = source.where
            if cap is not None:
                row["read_ceiling"] = cap
            if routing is not None:
                row["balanced_routing"] = routing
            if split is not None:
                row["explain"] = explain_row(split[0], split[1], a, per_token,
                                             explain_sources(fit, sc, source, how), prob)
            if source.kind == "posterior" and dist is not None:
                n_rows = dist["rows"]
                row["accept_note"] = (f"acceptance: posterior of the {n_rows} measured "
                                      f"row{'s' * (n_rows != 1)} without accept_len "
                                      f"({dist['group']}: median "
                                      f"{dist['median']:.2f}, 90% {dist['lo90']:.2f}-"
                                      f"{dist['hi90']:.2f})")
            rows.append(row)
    return rows


def ctx_batch_exponent(draws: Fit) -> np.ndarray:
    """Draws of the context term's concurrency exponent: the fit's, when its data had rows at
    C > 1; else its prior's (prior-driven; 1, pure per-stream KV reads, for a priors file
    without one)."""
    from ddtree_bayes.core.sampling import prior_sample

    if S.CTX_BATCH in draws.variables:
        return draws.variables[S.CTX_BATCH]
    prior = draws.priors.priors.get(S.CTX_BATCH)
    if prior is None:
        return np.ones(draws.n_draws)
    # one set of prior draws per fit, like a posterior variable: every scenario of one
    # question (predict's C values, next's query and candidates) sees the same exponent
    memo = draws.memo
    if S.CTX_BATCH not in memo:
        memo[S.CTX_BATCH] = prior_sample(prior, draws.n_draws,
                                         np.random.default_rng([draws.n_draws, 20261201]))
    return memo[S.CTX_BATCH]


def p_faster_than_ar(fit: Fit, sc: Scenario, accept: np.ndarray,
                     rng: np.random.Generator) -> float:
    """P(the speculative configuration ``sc`` decodes faster than autoregressive decoding on
    the same system, context and concurrency): per posterior draw, ``accept x 1000 / step``
    against ``1000 / step_ar(C)``, the true rates (no run-to-run noise), on the same draws,
    each no faster than the memory read (:func:`~ddtree_bayes.engine.ceiling.step_rate`);
    for another deployment of a measured group (``--new-deployment``) against that
    deployment's AR step, the fit's, not the measured AR rows' (:func:`ar_anchored`).
    A step that is not a number in some draw (a comparison with NaN is False, which read as
    "not faster": 0.0) is a :class:`QueryError` naming the step and its draws, as predict
    refuses a NaN answer (:func:`require_finite`).

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> d = point_mass_draws()
    >>> sc = resolve_scenario(d, hardware="b300", gpus=8, engine="sglang", method="ddtree",
    ...                       block=16, budget=32, verify_tokens=None, context_tokens=0)
    >>> # 12 tokens per 20 ms step against 1 per 8 ms; 1.5 tokens per step is slower
    >>> p_faster_than_ar(d, sc, np.full(8, 12.0), np.random.default_rng(0))
    1.0
    >>> p_faster_than_ar(d, sc, np.full(8, 1.5), np.random.default_rng(0))
    0.0
    """
    ar = sc.autoregressive()
    # the two steps draw from generators of one seed: on a system the fit never measured the
    # transferred step parameters (drawn first) are then the same draw by draw for both, as
    # they are one system's; drawn apart, their noise alone made AR "slower" 7% of the time
    seed = int(rng.integers(2**63))
    spec_step = step_components(fit, sc, np.random.default_rng(seed))[0]["step"]
    ar_step = step_components(fit, ar, np.random.default_rng(seed),
                              anchor=ar_anchored(fit, sc))[0]["step"]
    # both no faster than the read, as the rows beside it are (engine/ceiling.py)
    rate, rate_ar = accept * step_rate(fit, sc, spec_step), step_rate(fit, ar, ar_step)
    nan = [(what, int(np.count_nonzero(np.isnan(r)))) for what, r in
           (("the autoregressive step", rate_ar), ("its own step and acceptance", rate))]
    if any(k for _, k in nan):
        said = "; ".join(f"{what} is not a number in {k} of {len(rate)} draws"
                         for what, k in nan if k)
        raise QueryError(f"P(faster than AR) of {sc.describe()}: {said}; nothing reported",
                         fix="the fit's draws give no step there (a fit whose noise and "
                             "structure_sd draws are all 0 anchors a measured configuration "
                             "at 0/0): use a fit of NUTS draws (`ddtree-bayes fit`)")
    return float(np.mean(rate > rate_ar))


def ar_anchored(fit: Fit, sc: Scenario) -> bool:
    """Whether the autoregressive step a speculative question ``sc`` is compared with
    (P(faster than AR), optimize's "autoregressive decoding is faster") is anchored to the
    measured AR rows: yes, unless ``sc`` is another deployment of a measured group
    (``--new-deployment``, :func:`~ddtree_bayes.engine.structure.new_deployment_group`).
    Such a question's step is the structural one, not anchored to the group's rows, so its AR
    is that deployment's too: the fit's AR step, not the measured deployment's AR row. The
    measured row's offset on the AR side alone decided the comparison: on the B300 point mass
    a flagged 128.3 tok/s read P(faster than AR) 0 against the measured row's 133 tok/s, where
    the fit's AR step is 125 (tests/test_new_deployment.py)."""
    return new_deployment_group(fit, sc) is None


def mixture_p_faster(mixture: list[tuple[Fit, float]], sc: Scenario, source: AcceptSource,
                     seed: int) -> float:
    """:func:`p_faster_than_ar` under a model average: each fit's own, with its own
    acceptance draws, weighted as the mixture weighs the fits' predictive draws: their
    weighted mean, over the weights' own sum (PSIS-LOO weights of 0.5840969232202099 and
    0.41590307677979066 sum to 1.0000000000000004, and a P of 1 from both fits printed
    1.0000000000000004, above predict.schema.json's maximum)."""
    used = [(d, weight) for d, weight in mixture if weight > 0]
    total = sum(weight for _, weight in used)
    return float(sum(
        weight * p_faster_than_ar(d, sc, acceptance_draws(d, source,
                                                          keyed_rng(seed, repr(source)))[0],
                                  versus_ar_rng(seed, sc, source))
        for d, weight in used) / total)


def acceptance_draws(fit: Fit, source: AcceptSource, rng: np.random.Generator,
                     mixture: list[tuple[Fit, float]] | None = None
                     ) -> tuple[np.ndarray, dict | None]:
    """Acceptance draws of one row (aligned with the step's draws: an inferred acceptance's
    posterior is taken draw by draw) and, unless it is a number, its distribution for machine
    output."""
    from ddtree_bayes.core import acceptance_latent as AL

    n = fit.n_draws
    if source.kind in ("given", "measured"):
        return np.full(n, source.value), None
    if source.kind == "uniform":
        assert source.uniform is not None
        lo, hi = source.uniform
        return rng.uniform(lo, hi, n), {"family": "uniform", "lower": lo, "upper": hi,
                                        "label": source.label}
    if source.kind == "posterior":
        group = source.group
        assert group is not None
        if mixture:
            raise QueryError(f"--model-average cannot carry the inferred acceptance of "
                             f"{group['label']} across fits",
                             fix="pass --accept, or predict from one fit")
        a = np.asarray(fit.variables[AL.NAME])[:, source.group_index]
        lo, med, hi = (float(x) for x in np.quantile(a, [0.05, 0.5, 0.95]))
        return a, {"family": "posterior", "group": group["label"], "rows": len(group["rows"]),
                   "median": med, "lo90": lo, "hi90": hi, "label": source.label}
    prior = source.prior
    assert prior is not None
    dist: dict[str, Any] = {"family": prior.prior.dist, "params": dict(prior.prior.params),
                            "label": source.label}
    if prior.capped_by is not None:
        dist["truncated_at"] = prior.capped_by.tokens
    return sample_acceptance(prior, n, rng), dist


def versus_ar_rng(seed: int, sc: Scenario, source: AcceptSource) -> np.random.Generator:
    """The generator of P(faster than AR) for ``sc`` at acceptance ``source``, keyed by what
    is asked (predict --concurrency and the report's figure draw the same)."""
    return keyed_rng(seed, f"{scenario_key(sc)} vs AR {source!r}")


def explain_parts(fit: Fit, sc: Scenario, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The step's draws and the standardised run deviations :func:`per_token_draws` computes
    ``sc``'s answer from (the same keyed generator, in the same order), for ``--explain``."""
    rng = keyed_rng(seed, scenario_key(sc))
    parts, _ = step_components(fit, sc, rng)
    return parts, predictive_noise(fit, sc, parts["log_sd"], rng)


def explain_sources(fit: Fit, sc: Scenario, source: AcceptSource, how: str) -> dict[str, str]:
    """Where each term of ``--explain`` comes from, in words (engine/explain.py)."""
    from ddtree_bayes.core.model_cards import stored_card
    from ddtree_bayes.engine.explain import (
        above_peak,
        above_peak_note,
        acceptance_from,
        overhead_from,
        population_from,
        target_from,
    )

    noise = "run-to-run scatter"
    if "structure_sd" in fit.variables:
        noise += " + structural discrepancy (grows with the distance from measured configurations)"
    # an engine scaling its base engine's overhead (native = (1 - reduction) x sglang): the
    # reduction is its prior's, or fitted to that engine's speculative rows (an AR row has
    # no overhead to scale)
    relation = (sc.engine if sc.engine in fit.meta["model"].get("relation_bases", {})
                else None)
    relation_rows = (sum(m.engine == sc.engine and m.is_speculative for m in fit_rows(fit))
                     if relation else 0)
    overhead = "none: autoregressive"
    if sc.method != AR_METHOD:
        # (the population of groups: the corpus's only when another model or system measured
        # a speculative group)
        population = population_from({row_pair(fit, r) for r in fit_rows(fit)
                                      if r.is_speculative}, sc.pair)
        overhead = overhead_from(how, relation, relation_rows, population)
        # (--new-deployment carries the group's costs past its rows as predict's own do)
        for words in ("fitted to its group's rows", "its group's rows carried to another"):
            if overhead.startswith(words):
                overhead = overhead.replace(
                    "its group's rows", "its group's rows" + _past_group(fit, sc, population), 1)
    # (a dense card has no experts for the growth past the measured M to come from; a fit
    # storing no card for the model - a proxy's - keeps the general words)
    card = stored_card(fit.meta["model"], sc.model)
    moe = card is None or card.experts is not None
    behind = rows_behind(fit, sc)
    target = target_from(sc, behind, moe)
    # (a measured system's compute_eff above 1: the card's compute precision is likely not
    # the deployment's; an unmeasured one draws its own from the population, engine/unmeasured)
    over = above_peak(fit).get(sc.pair) if behind.measured else None
    if over is not None:
        target += "; " + above_peak_note(sc.pair, over)
    return {"acceptance": acceptance_from(source),
            "target step": target,
            "speculative overhead": overhead, "noise and discrepancy": noise}


def _past_group(fit: Fit, sc: Scenario, population: str) -> str:
    """For ``--explain``: where ``sc`` asks more drafter passes or tree nodes a step (C x the
    tree's) than its measured group's rows paid, whose cost prices the rest: the group's own
    per-pass / per-node cost where its rows vary them, else the population's
    (engine/model.py: a group measured at one count takes the population's mean). Empty when
    the question is within the rows (or the form prices no passes and nodes). ``population``:
    how the population is informed (engine/explain.py ``population_from``)."""
    model = fit.meta["model"]
    label = group_label(fit, sc.pair, sc.engine, sc.method)
    seen = [(p, n * r.concurrency) for r in fit_rows(fit)
            if r.method != AR_METHOD and group_label(fit, row_pair(fit, r), r.engine,
                                                     r.method) == label
            for p, n in [draft_structure(model, r.method, r.block, r.budget)]]
    passes, nodes = draft_structure(model, sc.method, sc.block, sc.budget)
    nodes *= sc.concurrency
    if not seen:
        return ""
    out = []
    for kind, asked, counts in (("drafter passes", passes, [p for p, _ in seen]),
                                ("tree nodes", nodes, [n for _, n in seen])):
        if asked <= max(counts):
            continue
        whose = ("the group's own per-{}, fitted from its rows" if len(set(counts)) > 1 else
                 "the population's per-{}, " + population)
        unit = "pass cost" if kind == "drafter passes" else "node cost"
        out.append(f"at most {max(counts):g} {kind} a step; {asked:g} here: the cost of the rest "
                   f"is {whose.format(unit)}")
    return f" ({'; '.join(out)})" if out else ""


def per_token_draws(fit: Fit, sc: Scenario, seed: int,
                    mixture: list[tuple[Fit, float]] | None = None, *,
                    memo: dict | None = None) -> tuple[np.ndarray, str]:
    """Predictive tok/s per emitted token of ``sc`` (:func:`_per_token`), drawn from the
    generator keyed by what is asked, not by its place in a question: a configuration asked
    twice, in another question, or by the report, gets the same digits. ``memo`` (one fit's
    draws, no mixture): the draws of each (scenario, seed) computed once and handed out
    again, read-only (the report's fan, answer line and concurrency figure ask the default
    question's alike)."""
    if memo is None or mixture is not None:
        return _per_token(fit, mixture, sc, keyed_rng(seed, scenario_key(sc)))
    key = (sc, int(seed))
    if key not in memo:
        per_token, how = _per_token(fit, None, sc, keyed_rng(seed, scenario_key(sc)))
        per_token.flags.writeable = False
        memo[key] = (per_token, how)
    return memo[key]


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
        per_token = 1000.0 / parts_d["step"] * np.exp(
            parts_d["log_sd"] * predictive_noise(d, sc, parts_d["log_sd"], rng))
        # no faster than reading the weights and the streams' caches (engine/ceiling.py)
        per_token = capped(per_token, read_ceiling(d, sc))
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
    """Rows as a pandas DataFrame (with ``concurrency``, the total's figures as columns
    ``total_median``, ``total_lo90``, ...)."""
    import pandas as pd

    flat = []
    for row in rows:
        total = row.get("total")
        row = {k: v for k, v in row.items() if k != "total"}
        flat.append(row | ({f"total_{k}": v for k, v in total.items()} if total else {}))
    return pd.DataFrame(flat)

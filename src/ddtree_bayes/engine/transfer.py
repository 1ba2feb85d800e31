"""Hardware transfer: which measured system's rows stand behind a question
(:func:`rows_behind`, the one answer), and the step parameters of a system the fit has no
measurements of, from the measured system it is most like. numpy only (the predict path)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine.posterior import Fit, blank_context
from ddtree_bayes.engine.scenario import Scenario


def bandwidth(table: dict[str, dict[str, str]], hardware: str, gpus: int) -> float:
    """Aggregate memory bandwidth (TB/s) of ``gpus`` GPUs of ``hardware``."""
    try:
        return float(table[hardware]["mem_bw_tb_s"]) * gpus
    except (KeyError, ValueError):
        raise QueryError(f"no memory bandwidth for {hardware} in the hardware table",
                         fix="fill in mem_bw_tb_s in data/hardware.csv") from None


def fabric(table: dict[str, dict[str, str]], hardware: str) -> bool:
    """Whether the GPUs talk over an NVLink-class fabric (else PCIe only)."""
    from ddtree_bayes.core.pairs import is_fabric

    return is_fabric(table[hardware])


def transfer_reference(fit: Fit, hardware: str, gpus: int, among: list[str] | None = None
                       ) -> tuple[str, str, int]:
    """The measured system an unmeasured ``hardware x gpus`` is transferred from: (its label,
    GPU, count). The nearest in aggregate memory bandwidth among the measured systems (``among``:
    only these) of its class: one GPU if it is one GPU (it runs no tensor-parallel collectives;
    a single RTX PRO 6000 Max-Q took the MTP overhead of a 2x RTX 3090 TP2 deployment, nearer
    in aggregate bandwidth, over a single RTX 3090's: 35 ms a step for a measured 23), else
    several GPUs over the same interconnect (PCIe or an NVLink-class fabric); failing that any
    system of the same interconnect, then any.

    >>> from types import SimpleNamespace as NS
    >>> table = {h: {"mem_bw_tb_s": bw, "interconnect": "PCIe Gen4"}
    ...          for h, bw in (("rtx-3090", "0.936"), ("maxq", "1.792"))}
    >>> fit = NS(hardware=table, measured_systems=["rtx-3090x2", "rtx-3090x1"])
    >>> transfer_reference(fit, "maxq", 1)[0], transfer_reference(fit, "maxq", 2)[0]
    ('rtx-3090x1', 'rtx-3090x2')
    """
    from ddtree_bayes.core.pairs import split_label

    table = fit.hardware
    parsed = [(s, *split_label(s)[1:]) for s in (fit.measured_systems if among is None else among)]
    link = [p for p in parsed if fabric(table, p[1]) == fabric(table, hardware)]
    single = [p for p in parsed if p[2] == 1]
    same = (single if gpus == 1 else [p for p in link if p[2] > 1]) or link or parsed
    target_bw = bandwidth(table, hardware, gpus)
    return min(same, key=lambda p: abs(math.log(bandwidth(table, p[1], p[2]) / target_bw)))


def fit_rows(draws: Fit) -> list:
    """The measurements the fit learned from (held-out rows of a validation fold excluded)."""
    held = set(draws.meta.get("held_out_rows", ()))
    return [r for r in draws.measurements.rows if r.row not in held]


def rows_at(draws: Fit, sc: Scenario) -> list:
    """The rows the fit learned from (:func:`fit_rows`) where a question stands: on its system
    (a pair in a fit of several models), at its concurrency and at its context, a row's
    context read as a question asks it (its mean context rounded to whole tokens, a blank one
    at the fit's default: ``Measurement.asked_context``). The one reading of it for predict's
    clauses on a configuration's rows with a blank accept_len and on another engine's AR rows
    (engine/predictive.py) and optimize's note on the acceptances its curve does not learn
    from."""
    from ddtree_bayes.engine.target_models import row_pair

    blank = blank_context(draws)
    return [r for r in fit_rows(draws)
            if row_pair(draws, r) == sc.pair and r.concurrency == sc.concurrency
            and r.asked_context(blank) == sc.context_tokens]


def has_own_rows(draws: Fit, pair: str, engine: str, method: str) -> bool:
    """Did the fit learn from (:func:`fit_rows`) a row of ``engine`` and ``method`` on the
    system ``pair`` (a pair in a fit of several models)? Asked once per fit and question (kept
    in the fit's memo, a validation fold's held-out rows in its key). The one reading of it for
    predict's note on an engine carrying its base engine's anchor (engine/predictive.py
    ``_no_own_row``) and the engines an autoregressive question leaves out (engine/question.py
    ``ar_repeats``): each wrote its own filter over the fit's rows."""
    from ddtree_bayes.engine.target_models import row_pair

    memo = draws.memo.setdefault("own_rows", {})
    key = (tuple(draws.meta.get("held_out_rows", ())), pair, engine, method)
    if key not in memo:
        memo[key] = any(r.engine == engine and r.method == method and row_pair(draws, r) == pair
                        for r in fit_rows(draws))
    return bool(memo[key])


@dataclass(frozen=True)
class RowsBehind:
    """Which measured system's rows stand behind a question's step (:func:`rows_behind`).

    ``asked``: the question's system (a pair, model@system, in a fit of several models);
    ``measured``: the fit has rows there; ``reference``: the system whose rows bound the step
    - ``asked`` itself when measured, else the one its step is transferred from
    (:func:`transfer_reference`), None for a pair answered by the pair roofline
    (``pair_roofline``: learned across the measured pairs) or a fit with no system; and the
    largest concurrency C, verify tokens M, tokens a step verified C x M and context
    (a blank one at the fit's default) among the rows the fit learned from on ``reference``
    (None: none learned there, as a validation fold may hold them out).

    A pair answered by the pair roofline has no reference: ``learned_from`` names the
    measured pairs the roofline was learned from (a fold's held-out systems left out), and
    ``max_verify_tokens`` and ``max_tokens`` are the largest M and C x M among their rows,
    ``max_tokens_on`` the pair that verified it (the roofline's growth with M past them is
    prior-driven, as on a system's own rows); its concurrency and context stay None (the
    pair measured none: the concurrency discrepancy counts from C = 1, its context cost is
    the prior's)."""

    asked: str
    measured: bool
    reference: str | None
    pair_roofline: bool = False
    max_concurrency: int | None = None
    max_verify_tokens: int | None = None
    max_tokens: int | None = None
    max_context: float | None = None
    learned_from: tuple[str, ...] = ()
    max_tokens_on: str | None = None

    @property
    def transferred_from(self) -> str | None:
        """The measured system an unmeasured question's step is transferred from (None: a
        measured system, the pair roofline or no system measured)."""
        return None if self.measured else self.reference


def measured_rows(draws: Fit, system: str) -> RowsBehind:
    """:class:`RowsBehind` of measured ``system`` (a pair in a fit of several models): its
    own rows' maxima.

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> b = measured_rows(point_mass_draws(), "b300x8")   # AR and DDTree budget 8 at C = 1
    >>> b.max_concurrency, b.max_verify_tokens, b.max_tokens, b.max_context
    (1, 9, 9, 0.0)
    """
    from ddtree_bayes.engine.target_models import row_pair

    cache = draws.memo.setdefault("measured_rows", {})
    if system not in cache:
        blank = blank_context(draws)
        rows = [r for r in fit_rows(draws) if row_pair(draws, r) == system]
        cache[system] = RowsBehind(
            system, True, system,
            max_concurrency=max((r.concurrency for r in rows), default=None),
            max_verify_tokens=max((r.verify_tokens for r in rows), default=None),
            max_tokens=max((r.verify_tokens * r.concurrency for r in rows), default=None),
            max_context=max((r.context(blank) for r in rows), default=None))
    return cache[system]


def roofline_rows(draws: Fit, asked: str) -> RowsBehind:
    """:class:`RowsBehind` of ``asked``, a pair a fit of several models answers from the pair
    roofline: the measured pairs it was learned from (every pair of the fit but a validation
    fold's held-out ones, as :func:`~ddtree_bayes.engine.target_models.pair_parameters`
    counts them) and the largest M and C x M among their rows.

    >>> from ddtree_bayes.engine.testing import multi_model_draws
    >>> b = roofline_rows(multi_model_draws(), "llama-3.1-8b-instruct@l40sx1")
    >>> b.learned_from, b.max_tokens, b.max_tokens_on, b.max_concurrency
    (('kimi-k2.6@b300x8', 'llama-3.1-8b-instruct@h100x1'), 9, 'kimi-k2.6@b300x8', None)
    """
    from ddtree_bayes.engine.target_models import row_pair

    cache = draws.memo.setdefault("roofline_rows", {})
    if "" not in cache:
        held_out = set(draws.meta.get("held_out_systems", ()))
        learned = tuple(p for p in draws.meta["coords"]["system"] if p not in held_out)
        rows = [(r.verify_tokens * r.concurrency, r.verify_tokens, row_pair(draws, r))
                for r in fit_rows(draws)]
        rows = [r for r in rows if r[2] in learned]
        top = max(rows, key=lambda r: r[0], default=None)
        cache[""] = RowsBehind(
            "", False, None, pair_roofline=True,
            max_verify_tokens=max((m for _, m, _ in rows), default=None),
            max_tokens=None if top is None else top[0], learned_from=learned,
            max_tokens_on=None if top is None else top[2])
    return replace(cache[""], asked=asked)


def rows_behind(draws: Fit, sc: Scenario) -> RowsBehind:
    """Which measured system's rows stand behind ``sc``'s step: the one rule for every caller
    (the step's parameters, the query's distance and its concurrencies beyond the measured,
    predict's and optimize's warnings and footnote, --explain, the report). A measured system:
    its own; in a fit of several models a pair never measured: none, the pair roofline
    (:func:`~ddtree_bayes.engine.target_models.pair_parameters`), with the largest C x M
    of the pairs it was learned from (:func:`roofline_rows`); else the measured system
    its step is transferred from (:func:`transfer_reference`), with its rows' maxima.

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> from ddtree_bayes.engine.question import Flags, resolve
    >>> fit = point_mass_draws()
    >>> [(b.asked, b.measured, b.reference, b.transferred_from, b.max_tokens)
    ...  for h in ("h200", "b300")
    ...  for b in [rows_behind(fit, resolve(fit, Flags(hardware=h)).asked[0].scenario)]]
    [('h200x8', False, 'b300x8', 'b300x8', 9), ('b300x8', True, 'b300x8', None, 9)]
    """
    from ddtree_bayes.engine.target_models import is_multi

    if sc.measured:
        return measured_rows(draws, sc.pair)
    if is_multi(draws):
        return roofline_rows(draws, sc.pair)
    if not draws.measured_systems:
        return RowsBehind(sc.pair, False, None)
    ref = transfer_reference(draws, sc.hardware, sc.gpus)[0]
    return replace(measured_rows(draws, ref), asked=sc.pair, measured=False)


def transfer_draw(draws: Fit, name: str, rng: np.random.Generator) -> np.ndarray:
    """Per-draw values of the ``[transfer]`` parameter ``name`` (``bandwidth_elasticity``,
    ``interconnect_factor``, ``system_sd``): the fit's ``transfer_<name>`` draws where it has
    them (``rng`` untouched), else draws from the ``[transfer]`` prior (from ``rng``). The one
    rule for the transferred step (:func:`transferred_parameters`) and the overhead group it
    carries (:func:`~ddtree_bayes.engine.structure.carried_spec_ms`)."""
    from ddtree_bayes.core.sampling import prior_sample

    key = f"transfer_{name}"
    if key in draws.variables:
        return draws.variables[key]
    return prior_sample(draws.priors.transfer[name], draws.n_draws, rng)


def transferred_parameters(draws: Fit, sc: Scenario, rng: np.random.Generator
                           ) -> tuple[dict[str, np.ndarray], str]:
    """Per-draw step parameters of an unmeasured system, from a measured reference system.

    The reference is :func:`transfer_reference`'s: of the query's class (one GPU, else its
    interconnect, PCIe or an NVLink-class fabric) where one was measured, the nearest in
    aggregate memory bandwidth. The part of the measured step that
    reads the card's active weights at the full bandwidth scales with the bandwidth itself
    (:func:`weight_read_ms`; none without a card); the rest of MOE(1) and the context cost
    scale with (bandwidth_ref / bandwidth) ** elasticity, the rest of ATTN_BASE with the
    interconnect factor when the class differs, everything with a log-normal system scatter;
    the MoE exponent comes from its pooled population. Transfer parameters are drawn from the
    ``[transfer]`` priors (or taken from ``draws.variables["transfer_<name>"]`` if present:
    :func:`transfer_draw`).

    In a fit of several models a (model, system) pair without measurements gets its step from
    the pair roofline instead, learned across the measured pairs
    (:func:`ddtree_bayes.engine.target_models.pair_parameters`).
    """
    from ddtree_bayes.engine import target_models

    behind = rows_behind(draws, sc)
    if behind.pair_roofline:
        return target_models.pair_parameters(draws, sc, rng)

    from ddtree_bayes.core.pairs import link, split_label

    v, meta, n = draws.variables, draws.meta, draws.n_draws
    table = draws.hardware
    ref = behind.reference
    if ref is None:
        raise QueryError(f"{sc.pair} has no measurements and the fit measured no system to "
                         "transfer its step from", fix="add rows and re-fit")
    _, ref_hw, ref_gpus = split_label(ref)
    target_bw, ref_bw = bandwidth(table, sc.hardware, sc.gpus), bandwidth(table, ref_hw, ref_gpus)
    r = meta["coords"]["system"].index(ref)
    elasticity, factor, scatter = (transfer_draw(draws, k, rng) for k in (
        "bandwidth_elasticity", "interconnect_factor", "system_sd"))
    noise = np.exp(scatter * rng.standard_normal(n))
    ratio = (ref_bw / target_bw) ** elasticity
    # +1 to PCIe collectives (tensor-parallel all-reduces slower than a fabric's), -1 away
    # from them; one GPU runs none, whatever its link is called (a single H200 took 1/1.4 of
    # a single RTX 3090's; one H200 NVL, 1.4 x one H200 SXM's from a B300 node), as the pair
    # and drafter-pass rooflines price it (core/pairs.link)
    ref_link, link_ = link(table[ref_hw], ref_gpus), link(table[sc.hardware], sc.gpus)
    steps = int(link_ == "pcie") - int(ref_link == "pcie")
    if ref_link == link_:
        link_how = ("one GPU each, no interconnect factor" if link_ == "single"
                    and fabric(table, ref_hw) != fabric(table, sc.hardware)
                    else "same interconnect class")
    elif "single" in (ref_link, link_):
        several = "PCIe" if "pcie" in (ref_link, link_) else "an NVLink-class fabric"
        link_how = (f"one GPU, no collectives, against {several}"
                    + (", no interconnect factor" if steps == 0 else ""))
    else:
        link_how = "different interconnect class"
    step_ref = v["step_ar_ms"][:, r]
    moe1_ref = v["moe_share"][:, r] * step_ref
    attn_ref = step_ref - moe1_ref
    read = weight_read_ms(draws, sc, (ref_hw, ref_gpus))
    # reading the weights at the full bandwidth (none without a card) scales with the
    # bandwidth itself, the rest as before: the read comes out of MOE(1) first, then out of
    # ATTN_BASE (a dense model's attention projections are weights too); no draw reads them
    # faster than the full bandwidth
    read_ref, full = read or (0.0, 0.0)
    part = np.minimum(read_ref, step_ref)
    in_moe = np.minimum(part, moe1_ref)
    scale = ref_bw / target_bw
    moe1 = (in_moe * scale + (moe1_ref - in_moe) * ratio) * noise
    attn = ((part - in_moe) * scale + (attn_ref - (part - in_moe)) * factor ** steps) * noise
    moe1 = moe1 + np.maximum(full - (moe1 + attn), 0.0)
    read_how = "" if read is None else (
        f"; reading the weights at the full bandwidth is "
        f"{float(np.median(part / step_ref)):.0%} of the measured step and scales with the "
        "bandwidth")
    form = meta["model"]["moe_form"]
    shape = target_models.pooled_shape(draws, rng)
    kv, kernels = context_scale(draws, sc, (ref_hw, ref_gpus))
    ctx_ratio = (ratio if kv is None else kv ** elasticity) * kernels
    ctx_how = "" if kv is None or not sc.context_tokens else (
        f"; the context cost scales with each GPU's KV read (x{kv:.2f}) ** elasticity"
        + ("" if kernels == 1.0 else f", x{kernels:.2f} for the attention kernels' class "
           "(ctx_read_ratio over ctx_read_ratio_one_head, or back)"))
    params = {"step_ar_ms": moe1 + attn, "moe_share": moe1 / (moe1 + attn), "moe_shape": shape,
              "ctx_ms_per_unit": v["ctx_ms_per_unit"][:, r] * ctx_ratio * noise}
    tp_how = ""
    if form == "roofline":
        from ddtree_bayes.core.model_cards import required_card
        from ddtree_bayes.engine.unmeasured import roofline_parameters

        roof, tp_how = roofline_parameters(draws, required_card(meta["model"]),
                                           table[sc.hardware], sc.gpus, moe1, rng)
        params.update(roof)
    how = (f"{sc.system} not measured: transferred from {ref} "
           f"({link_how}, bandwidth ratio "
           f"{ref_bw / target_bw:.2f}"
           f"{read_how}{ctx_how}"
           f"{'; the model card is a proxy, so weaker' if 'proxy_card' in meta['model'] else ''}"
           f"); {tp_how}")
    return params, how


def weight_read_ms(draws: Fit, sc: Scenario, ref: tuple[str, int]
                   ) -> tuple[float, float] | None:
    """The time to read the model card's active weights once at the full bandwidth of the
    reference ``ref`` (GPU, count) and of the query's GPUs (ms); None without a card.

    The transfer scales a measured step by bandwidth ** elasticity (mostly not
    bandwidth-bound, as Kimi K2.6 on 8 B300 is: 0.25 ms of its 7.5 ms step reads weights at
    the full bandwidth); a dense model on one GPU spends most of its step reading weights,
    and that part scales with the bandwidth itself: an RTX 5090 answer from an RTX 3090
    measurement came out 37% slow, an L4 answer faster than its weights can be read. Only
    the read at the full bandwidth is taken as bandwidth-bound (what any draw of the measured
    step certainly spends reading): how far short of it a deployment falls is kernel and
    engine overhead, which transfers as the rest of the step does, so no efficiency is drawn.

    >>> from types import SimpleNamespace as NS
    >>> card = {"model": "m", "params_total_b": 8, "params_active_b": 8, "layers": 32,
    ...         "experts": None, "experts_topk": None, "bytes_per_weight": 2.0,
    ...         "compute_dtype": "bf16", "source": "s"}
    >>> hw = {"slow": {"mem_bw_tb_s": "0.5", "interconnect": "PCIe"},
    ...       "ref": {"mem_bw_tb_s": "1.0", "interconnect": "PCIe"}}
    >>> fit = NS(meta={"model": {"card": card}}, hardware=hw)
    >>> weight_read_ms(fit, NS(hardware="slow", gpus=1), ("ref", 1))   # 16 GB: 1, 0.5 TB/s
    (16.0, 32.0)
    """
    from ddtree_bayes.core.model_cards import stored_card
    from ddtree_bayes.core.pairs import pair_features

    model = stored_card(draws.meta["model"])
    if model is None:
        return None
    return (pair_features(model, draws.hardware[ref[0]], ref[1]).stream_ms,
            pair_features(model, draws.hardware[sc.hardware], sc.gpus).stream_ms)


def context_scale(draws: Fit, sc: Scenario, ref: tuple[str, int]) -> tuple[float | None, float]:
    """How the context cost moves from the reference ``ref`` (GPU, count) to the query's GPUs,
    from the card (core/context_cost.py): (how much longer each of the query's GPUs takes to
    read one sequence's KV cache than each of the reference's, ``context_read_ms``: the card's
    ``kv_bytes_per_token`` over min(GPUs, ``kv_heads``) at one GPU's bandwidth; the ratio of
    the two ratio priors' medians the card takes there, ``ratio_name``).

    The read's ratio is None when the card or a hardware row does not say enough (the
    transfer then scales the context cost by the aggregate bandwidth, as it did before the
    card had ``kv_heads``). An MLA cache (one latent head) is read whole by every GPU, so on 4
    GPUs as on 8 the read takes as long; 8 KV heads cannot split over 16 GPUs further than
    over 8. The medians' ratio moves an MLA cache between 2.5 x its read on a GPU without
    FlashMLA-class kernels and 1.2 x on one with them (1.2 / 2.5 from an RTX PRO 6000 to an
    H100); it is 1.0 when both GPUs take the same ratio, without a card, and for a fit whose
    priors have no second ratio.

    >>> from types import SimpleNamespace as NS
    >>> from ddtree_bayes.core.config import load_priors
    >>> from ddtree_bayes.core.paths import bundled
    >>> card = {"model": "m", "params_total_b": 8, "params_active_b": 8, "layers": 32,
    ...         "experts": None, "experts_topk": None, "bytes_per_weight": 2.0,
    ...         "compute_dtype": "bf16", "source": "s", "kv_bytes_per_token": 131072,
    ...         "kv_heads": 8}
    >>> hw = {"g": {"mem_bw_tb_s": "2.0", "interconnect": "NVLink"},
    ...       "h100": {"mem_bw_tb_s": "2.0", "interconnect": "PCIe", "compute_capability": "9.0"},
    ...       "rtx": {"mem_bw_tb_s": "2.0", "interconnect": "PCIe", "compute_capability": "12.0"}}
    >>> fit = NS(meta={"model": {"card": card, "context_unit_tokens": 65536.0}}, hardware=hw,
    ...          priors=load_priors(bundled("priors.toml")))
    >>> [context_scale(fit, NS(hardware="g", gpus=n), ("g", 8)) for n in (4, 8, 16)]
    [(2.0, 1.0), (1.0, 1.0), (1.0, 1.0)]
    >>> card["kv_heads"] = 1
    >>> context_scale(fit, NS(hardware="h100", gpus=8), ("rtx", 8))
    (1.0, 0.48)
    >>> round(context_scale(fit, NS(hardware="rtx", gpus=8), ("h100", 8))[1], 3)
    2.083
    """
    from ddtree_bayes.core.context_cost import context_read_ms, ratio_name, ratio_prior
    from ddtree_bayes.core.model_cards import stored_card

    card = stored_card(draws.meta["model"])
    if card is None:
        return None, 1.0
    unit = draws.meta["model"]["context_unit_tokens"]
    (query, q_ratio), (base, r_ratio) = (
        (context_read_ms(card, draws.hardware[hw], gpus, unit),
         ratio_prior(draws.priors, ratio_name(card, draws.hardware[hw])))
        for hw, gpus in ((sc.hardware, sc.gpus), ref))
    kv = None if query is None or not base else query / base
    return kv, 1.0 if q_ratio is r_ratio else q_ratio.params["median"] / r_ratio.params["median"]

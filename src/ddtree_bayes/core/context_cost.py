"""The context cost's prior from the card's KV cache: what a step reads of it, and at what
multiple of that read attention runs (docs/model.md "Context length").

A decoding step at context c reads every cached token of its sequence: ``kv_bytes_per_token``
x c over the GPUs that hold the cache (a tensor-parallel group of g GPUs splits its KV heads,
min(g, ``kv_heads``) ways; an MLA cache is one latent head every GPU holds whole). At the full
bandwidth that read is ``context_read_ms`` per ``context_unit_tokens``; the system's context
cost ``ctx_ms_per_unit`` has the prior LogNormal(median = read x ``ctx_read_ratio``'s median,
sigma = its sigma). A system whose card lacks ``kv_bytes_per_token`` or ``kv_heads``, or whose
GPU has no bandwidth, keeps the generic ``ctx_ms_per_unit`` prior, and so does every system when
the priors file has no ``[priors.ctx_read_ratio]`` or either prior is not log-normal.
"""

from __future__ import annotations

import math

from ddtree_bayes.core.config import Prior, PriorsConfig

#: The prior of the context cost over the card's KV read at the full bandwidth.
CTX_READ = "ctx_read_ratio"
#: The same for a cache of one KV head that every query head reads (``kv_heads`` 1: MLA's
#: latent, or multi-query attention); a priors file without it uses :data:`CTX_READ`.
CTX_READ_ONE_HEAD = "ctx_read_ratio_one_head"
#: The generic prior of the context cost per unit of context (ms).
CTX_PRIOR = "ctx_ms_per_unit"


def context_read_ms(card, hardware_row: dict[str, str], gpus: int, unit_tokens: float
                    ) -> float | None:
    """ms each GPU takes to read one sequence's KV cache of ``unit_tokens`` at its full
    bandwidth (:meth:`~ddtree_bayes.core.model_cards.ModelCard.context_read_gb`), or None
    when the card or the hardware row does not say enough.

    >>> from ddtree_bayes.core.model_cards import ModelCard
    >>> kimi = ModelCard("k", 1000, 32, 61, 384, 8, 0.5, "bf16", "s",
    ...                  kv_bytes_per_token=35136, kv_heads=1)
    >>> row = {"hardware": "rtx-pro-6000", "mem_bw_tb_s": "1.792", "interconnect": "PCIe"}
    >>> round(context_read_ms(kimi, row, 8, 65536), 3)   # 2.303 GB
    1.285
    >>> context_read_ms(kimi, {**row, "mem_bw_tb_s": ""}, 8, 65536) is None
    True
    """
    from ddtree_bayes.core.pairs import read_features

    gb = card.context_read_gb(unit_tokens, gpus)
    f = None if gb is None else read_features(card, hardware_row, gpus)
    return None if f is None else gb / f.bandwidth_tb_s   # GB / (TB/s) = ms (each GPU's)


def uses_read(priors: PriorsConfig) -> bool:
    """Whether the priors price a system's context cost from its KV read (both priors
    log-normal, the ratio's present)."""
    p = priors.priors
    return (CTX_READ in p and p[CTX_READ].dist == "lognormal"
            and p[CTX_PRIOR].dist == "lognormal")


def ratio_name(card, hardware_row: dict[str, str] | None = None) -> str:
    """Which ratio prices ``card``'s context cost on the GPU of ``hardware_row``:
    :data:`CTX_READ_ONE_HEAD` for a cache of one KV head (``kv_heads`` 1: MLA's latent, or
    MQA) on a GPU without MLA decode kernels that run at its bandwidth, :data:`CTX_READ`
    otherwise.

    Every MLA deployment measured on an RTX PRO 6000 or a consumer GPU (vLLM's Triton MLA,
    SGLang, llama.cpp) ran its context cost at 2-20x its read. On Hopper and Blackwell
    datacenter GPUs (compute capability 9.x and 10.x) FlashMLA-class kernels, which vLLM and
    SGLang run there, decode at ~90% of the bandwidth (FlashMLA's own benchmark: 3000 GB/s
    of the H800's 3350), so those keep ``ctx_read_ratio`` (docs/model.md "Context length").

    >>> from types import SimpleNamespace as NS
    >>> mla, gqa = NS(kv_heads=1), NS(kv_heads=8)
    >>> rtx, b300 = {"compute_capability": "12.0"}, {"compute_capability": "10.3"}
    >>> ratio_name(mla, rtx), ratio_name(mla, b300), ratio_name(gqa, rtx)
    ('ctx_read_ratio_one_head', 'ctx_read_ratio', 'ctx_read_ratio')
    >>> ratio_name(mla, {"compute_capability": "gfx942"}), ratio_name(mla)
    ('ctx_read_ratio_one_head', 'ctx_read_ratio_one_head')
    """
    if getattr(card, "kv_heads", None) != 1:
        return CTX_READ
    return CTX_READ if mla_at_bandwidth(hardware_row) else CTX_READ_ONE_HEAD


def mla_at_bandwidth(hardware_row: dict[str, str] | None) -> bool:
    """Does the GPU of ``hardware_row`` have MLA decode kernels that run at its bandwidth
    (FlashMLA and its kin: CUDA compute capability 9.x or 10.x)? False when the row does not
    say, and for any other GPU.

    >>> [mla_at_bandwidth({"compute_capability": c}) for c in ("9.0", "10.3", "12.0", "", "x")]
    [True, True, False, False, False]
    """
    text = (hardware_row or {}).get("compute_capability", "") or ""
    try:
        major = int(float(text))
    except ValueError:
        return False
    return major in (9, 10)


def ratio_prior(priors: PriorsConfig, ratio: str) -> Prior:
    """The ratio prior ``ratio`` names, :data:`CTX_READ`'s where the priors have no log-normal
    one of that name (a priors file written before it)."""
    p = priors.priors.get(ratio)
    return p if p is not None and p.dist == "lognormal" else priors.priors[CTX_READ]


def ctx_prior(priors: PriorsConfig, read_ms: float | None, ratio: str = CTX_READ) -> Prior:
    """A system's ``ctx_ms_per_unit`` prior: the read times the ratio's (``ratio``:
    :func:`ratio_name`'s), else the generic one.

    >>> from ddtree_bayes.core.config import load_priors
    >>> from ddtree_bayes.core.paths import bundled
    >>> P = load_priors(bundled("priors.toml"))
    >>> p = ctx_prior(P, 1.285)
    >>> p.dist, round(p.params["median"], 3), p.params["sigma"]   # 1.285 ms x 1.2
    ('lognormal', 1.542, 0.8)
    >>> p = ctx_prior(P, 1.285, CTX_READ_ONE_HEAD)
    >>> round(p.params["median"], 3), p.params["sigma"]   # 1.285 ms x 2.5
    (3.212, 0.8)
    >>> ctx_prior(P, None) is P.priors["ctx_ms_per_unit"]
    True
    """
    generic = priors.priors[CTX_PRIOR]
    if read_ms is None or not math.isfinite(read_ms) or read_ms <= 0 or not uses_read(priors):
        return generic
    r = ratio_prior(priors, ratio)
    return Prior(CTX_PRIOR, "lognormal", {"median": read_ms * r.params["median"],
                                          "sigma": r.params["sigma"]}, per="system",
                 rationale=r.rationale, source=r.source)


def ctx_prior_how(priors: PriorsConfig, read_ms: float | None, ratio: str = CTX_READ) -> str:
    """What a message says of a system's context-cost prior.

    >>> from ddtree_bayes.core.config import load_priors
    >>> from ddtree_bayes.core.paths import bundled
    >>> P = load_priors(bundled("priors.toml"))
    >>> print(ctx_prior_how(P, 1.285))
    the card's KV read, 1.28 ms per 65536 tokens of context at the full bandwidth, x \
ctx_read_ratio (median 1.2)
    >>> print(ctx_prior_how(P, 1.285, CTX_READ_ONE_HEAD)[-49:])
    bandwidth, x ctx_read_ratio_one_head (median 2.5)
    >>> print(ctx_prior_how(P, None))
    the generic ctx_ms_per_unit (the card does not give both kv_bytes_per_token and kv_heads)
    """
    if ctx_prior(priors, read_ms) is priors.priors[CTX_PRIOR]:
        why = ("the card does not give both kv_bytes_per_token and kv_heads" if read_ms is None
               else f"no log-normal [priors.{CTX_READ}]")
        return f"the generic {CTX_PRIOR} ({why})"
    assert read_ms is not None
    r = ratio_prior(priors, ratio)
    return (f"the card's KV read, {read_ms:.3g} ms per {priors.context_unit_tokens:.0f} tokens "
            f"of context at the full bandwidth, x {r.name} (median {r.params['median']:g})")

"""The memory read every decode step makes: no step is shorter than reading the weights and
the streams' KV caches at the GPUs' full bandwidth.

The model's context term grows with the streams as ``C ** ctx_batch_exponent``, an exponent
whose prior is below 1 (part of a context's cost is latency the streams overlap). Fitted at
short contexts, it can price many streams at a long context below the bytes their caches hold:
a serving walkthrough was answered 67 tok/s per user, 90% up to 119, for Llama-3.1-8B on one
H100 at 32k tokens and 8 streams, where reading the weights and eight caches allows at most
66.5 (bf16 cache), 101 (fp8) or 120 (a 4.5-bit cache). So the *predictive* draws (what a benchmark would show,
after the run-to-run and structural noise) are capped at the rate of that read; the model's
likelihood, ``update``'s reweighting and ``next``'s candidates keep the structural step
without it (a cap there would put a measured row's own probability at zero).

The read counted is the least a deployment can make: the card's active weights (as the
roofline streams them: not an untied input embedding, of which a token reads one row; left
out where the fit's own M = 1 step of the measured system is shorter than that read, so the
card's bytes per weight are not the deployment's) and the KV cache at
:data:`LEAST_KV_CACHE`'s 4.5 bits per value (a bf16 card's bytes x 4.5 / 16, an fp8
card's x 4.5 / 8), one read per sequence whatever the tokens it verifies. Every public row runs below it
(``scripts/ceiling_check.py``). ``--kv-cache DTYPE`` (predict, optimize, next's ``--query``,
track) says the deployment's cache: the
cap then reads the card's bytes per token x DTYPE's bits / the card's (bf16's when the card does
not say its cache dtype).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddtree_bayes.core.data import plain_text
from ddtree_bayes.core.model_cards import KV_CACHE_BITS, KV_CARD_BITS_ASSUMED, kv_dtype_text
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.scenario import Scenario, measured_step_ar, weights_read

#: The cache the least deployment reads: llama.cpp's ``q4_0`` (32 4-bit values and one fp16
#: scale per block, 4.5 bits per value), the smallest an engine keeps; read against the card's
#: own bits per value (:meth:`ModelCard.kv_share`: 4.5 / 16 of a bf16 card's bytes, 4.5 / 8 of
#: Kimi K2.6's fp8 MLA cache), never stricter than a deployment.
LEAST_KV_CACHE = "q4_0"
#: Capped draws at or above this share are said (a warning, and the row's ``read_ceiling``).
SAY_AT = 0.01
#: The least ratio of a public row's measured step to its balanced-routing read of two or more
#: tokens (:func:`balanced_read`), which ``scripts/ceiling_check.py`` prints (Kimi K2.6 AR at
#: C = 64 on 8x RTX PRO 6000: 45.8 ms against 31.0 ms; a tree at C = 1: 2.04)
PUBLIC_ROUTING_MARGIN = 1.47
#: What the warning, the predict schema and docs/json-output.md claim of it, alike
ROUTING_CLAIM = ("every MoE row of data/public routing two or more tokens a step whose step is "
                 "known (AR, or with accept_len) runs at most 1 / "
                 f"{PUBLIC_ROUTING_MARGIN:g} of that rate (scripts/ceiling_check.py)")


@dataclass(frozen=True)
class ReadCeiling:
    """The shortest step of one scenario: ``weights_gb + kv_gb`` read at ``bandwidth_tb_s``
    (all its GPUs together)."""

    weights_gb: float        # 0 when the card's bytes are not the deployment's
    kv_gb: float             # the C streams' caches, at LEAST_KV_CACHE's bits or --kv-cache's
    bandwidth_tb_s: float
    weights_left_out: bool = False
    #: ``--kv-cache``: the dtype the caches are read at (None: at LEAST_KV_CACHE), and the card's
    #: bits per value it is held against (None: the card does not say; bf16's taken)
    kv_cache: str | None = None
    kv_card_bits: float | None = None

    @property
    def step_ms(self) -> float:
        return (self.weights_gb + self.kv_gb) / self.bandwidth_tb_s   # GB / (TB/s) = ms

    @property
    def rate(self) -> float:
        """Steps per second at most (tok/s per user at one token per step)."""
        return 1000.0 / self.step_ms


def read_ceiling(draws: Fit, sc: Scenario) -> ReadCeiling | None:
    """The read no step of ``sc`` is shorter than (module docstring); None without a card or
    the GPUs' bandwidth.

    >>> from ddtree_bayes.engine.testing import multi_model_draws
    >>> from ddtree_bayes.engine.scenario import resolve_scenario
    >>> d = multi_model_draws()
    >>> sc = resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="ar", block=None,
    ...                       budget=None, verify_tokens=None, context_tokens=32768.0,
    ...                       model="llama-3.1-8b-instruct", concurrency=8)
    >>> c = read_ceiling(d, sc)   # (15.01 GB + 8 x 32768 x 131072 B x 4.5 / 16) / 3.35 TB/s
    >>> round(c.weights_gb, 2), round(c.kv_gb, 2), round(c.step_ms, 2), round(c.rate, 1)
    (15.01, 9.66, 7.37, 135.8)
    """
    found = weights_read(draws, sc)
    if found is None:
        return None
    card, f = found
    left_out = bytes_not_deployments(draws, sc, f.stream_ms)
    bandwidth = f.bandwidth_tb_s * sc.gpus
    cache = card.kv_cache_gb(sc.context_tokens or 0.0, sc.concurrency) or 0.0
    share = card.kv_share(sc.kv_cache) if sc.kv_cache is not None else least_kv_share(card)
    ceiling = ReadCeiling(0.0 if left_out else f.stream_ms * bandwidth, cache * share,
                          bandwidth, left_out, sc.kv_cache, card.kv_cache_bits)
    return ceiling if ceiling.step_ms > 0 else None   # (weights left out, no context: none)


@dataclass(frozen=True)
class BalancedRead:
    """What ``tokens`` tokens of a step read of an MoE when routing is balanced: each token
    picks ``topk`` of ``experts`` experts per layer at random, so the step touches
    ``touched = experts (1 - (1 - topk / experts) ** tokens)`` of them per layer, and reads
    those experts' weights (at their own bytes, :func:`expert_gb`) beside the rest of the
    active weights: ``weights_gb`` at ``bandwidth_tb_s``. ``tokens`` is the larger of
    ``streams`` (C: one token per stream) and one stream's verified tokens M
    (:func:`routed_tokens`); the step's C x M tokens touch more."""

    streams: int
    tokens: int
    experts: int
    topk: int
    touched: float
    weights_gb: float
    bandwidth_tb_s: float

    @property
    def step_ms(self) -> float:
        return self.weights_gb / self.bandwidth_tb_s   # GB / (TB/s) = ms

    @property
    def rate(self) -> float:
        """Steps per second at most under balanced routing."""
        return 1000.0 / self.step_ms


def routed_tokens(streams: int, verify_tokens: int) -> int:
    """The tokens a step of ``streams`` streams verifying ``verify_tokens`` each is held to
    route at random (:class:`BalancedRead`): the larger of C (one token per stream) and M (one
    stream's tree or chain), each a subset of the step's C x M tokens that the public rows
    bear out on its own (``scripts/ceiling_check.py``: at C >= 2 one token per stream, least
    ratio 1.47 over 260 rows; at C = 1 a tree's M tokens, 2.04 over 24). Tokens of one tree
    share a context and may route alike, the streams' trees too: C x M is not claimed.

    >>> routed_tokens(64, 1), routed_tokens(1, 16), routed_tokens(4, 16), routed_tokens(1, 1)
    (64, 16, 16, 1)
    """
    return max(streams, verify_tokens)


def balanced_read(draws: Fit, sc: Scenario) -> BalancedRead | None:
    """:class:`BalancedRead` of ``sc``'s step on an MoE card when it routes two or more tokens
    (:func:`routed_tokens`: C >= 2 streams, or one stream's tree or chain), or None (one token
    a step, a dense model, no card or bandwidth, or the fit's M = 1 step of the measured system
    shorter than the card's read: its bytes are not the deployment's).

    The read is no cap: routing that concentrates the tokens on fewer experts reads less.
    But a trained router balances its experts' load, and every public MoE row routing two or
    more tokens a step whose step is known (AR, or with accept_len) runs at most 1 / 1.47 of
    this rate
    (``scripts/ceiling_check.py``), so an answer faster than it
    is said (:func:`routing_warnings`).

    >>> from ddtree_bayes.engine.testing import multi_model_draws
    >>> from ddtree_bayes.engine.scenario import resolve_scenario
    >>> d = multi_model_draws()
    >>> sc = resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="ar",
    ...                       block=None, budget=None, verify_tokens=None, context_tokens=0.0,
    ...                       model="llama-3.1-8b-instruct", concurrency=8)
    >>> balanced_read(d, sc) is None   # dense
    True
    """
    if routed_tokens(sc.concurrency, sc.verify_tokens) < 2:
        return None
    found = weights_read(draws, sc)
    if found is None:
        return None
    card, f = found
    if bytes_not_deployments(draws, sc, f.stream_ms):
        return None
    return balanced_weights(card, f, sc.concurrency, sc.verify_tokens)


def balanced_weights(card, f, streams: int, verify_tokens: int = 1) -> BalancedRead | None:
    """:class:`BalancedRead` of ``streams`` streams verifying ``verify_tokens`` each of
    ``card`` on the GPUs of ``f`` (:func:`~ddtree_bayes.core.pairs.pair_features`), or None
    (one token a step, or a card without routed experts to spread): the arithmetic
    :func:`balanced_read` answers with and ``scripts/ceiling_check.py`` holds the public rows
    against.

    >>> from ddtree_bayes.core.model_cards import ModelCard
    >>> from ddtree_bayes.core.pairs import pair_features
    >>> kimi = ModelCard("kimi", 1000, 32, 61, 384, 8, 0.5, "bf16", "s")
    >>> h100 = {"hardware": "h100", "mem_bw_tb_s": "3.35", "interconnect": "NVLink4"}
    >>> read = balanced_weights(kimi, pair_features(kimi, h100, 8), 64)
    >>> round(read.touched, 2), round(read.weights_gb, 1), round(read.step_ms, 2)
    (284.19, 371.5, 13.86)
    """
    e, k = card.experts, card.experts_topk
    tokens = routed_tokens(streams, verify_tokens)
    if tokens < 2 or not e or not k or e <= k or card.params_total_b <= card.params_active_b:
        return None
    touched = e * (1.0 - (1.0 - k / e) ** tokens)
    bandwidth = f.bandwidth_tb_s * f.gpus
    active_gb = f.stream_ms * bandwidth
    per_expert = expert_gb(card) / (e - k)   # GB, every layer
    weights = active_gb + (touched - k) * per_expert
    return BalancedRead(streams, tokens, e, k, touched, weights, bandwidth)


#: Bytes per weight of an untied input embedding in a checkpoint: 16 bits, as every
#: quantisation scheme ``card add`` reads from a config keeps it (the model dtype: AWQ, GPTQ,
#: FP8, NVFP4, MXFP4; docs/cli.md). A GGUF file may quantise its ``token_embd``: there the
#: experts are priced by at most ``embed_params_b x (2 - its bytes)`` GB short.
EMBED_BYTES = 2.0


def expert_gb(card) -> float:
    """GB of the routed experts a token does not read (the card's weights beyond its active
    ones): the checkpoint's bytes (``file_bytes_per_weight`` over every weight) less the
    weights a step reads (``read_gb``: the active weights at ``bytes_per_weight``, their
    average, without an untied input embedding, of which a token reads one row) and less
    that embedding at its own 16 bits (:data:`EMBED_BYTES`), so experts quantised below the
    attention and shared layers are read at their own bytes and the embedding is no streamed
    weight here either (gpt-oss-20b's 0.58 B of it at 1.03 B, the average of its MXFP4
    experts and bf16 rest, left 0.56 GB of it among the experts: 9.46 GB for 8.90); at
    ``bytes_per_weight`` when the card does not give the checkpoint's (or gives less than the
    rest takes): the weights beyond the active ones, the embedding in neither.

    >>> from ddtree_bayes.core.model_cards import ModelCard
    >>> nvfp4 = ModelCard("q", 79.6744, 3.8749, 48, 512, 10, 1.2625, "fp4", "s",
    ...                   file_bytes_per_weight=0.5965)   # 79.6744 x 0.5965 - 3.8749 x 1.2625
    >>> round(expert_gb(nvfp4), 3), round(expert_gb(ModelCard(**{**nvfp4.__dict__,
    ...     "file_bytes_per_weight": None})), 3)   # 75.7995 x 1.2625
    (42.634, 95.697)
    >>> oss = ModelCard("gpt-oss-20b", 20.9148, 4.1874, 24, 32, 4, 1.0277, "bf16", "s",
    ...                 file_bytes_per_weight=0.658, embed_params_b=0.5791)
    >>> round(expert_gb(oss), 4)   # 20.9148 x 0.658 - 3.6083 x 1.0277 - 0.5791 x 2
    8.8955
    """
    rest_b = card.params_total_b - card.params_active_b
    if card.file_bytes_per_weight:
        embed_gb = (card.embed_params_b or 0.0) * EMBED_BYTES
        file_gb = card.params_total_b * card.file_bytes_per_weight - card.read_gb - embed_gb
        if file_gb > 0:
            return file_gb
    return rest_b * card.bytes_per_weight


def routing_row(per_step: np.ndarray, read: BalancedRead | None) -> dict | None:
    """What a predict row says of :func:`balanced_read` (its JSON ``balanced_routing``): None
    unless the median steps per second exceed its rate."""
    if read is None:
        return None
    median = float(np.median(per_step))
    if median <= read.rate:
        return None
    return {"streams": read.streams, "tokens": read.tokens, "experts": read.experts,
            "experts_topk": read.topk,
            "experts_touched": read.touched, "weights_gb": read.weights_gb,
            "bandwidth_tb_s": read.bandwidth_tb_s, "step_ms": read.step_ms,
            "steps_per_s": read.rate, "median_steps_per_s": median}


def _largest_per_system(rows: list[dict], field: str, by: str) -> dict[tuple, dict]:
    """Per (hardware, GPUs, context, C) of the predict rows carrying ``field``, the one whose
    ``field[by]`` is largest: a warning line per system and question, its worst engine or
    acceptance.

    >>> rows = [{"hardware": "h", "gpus": 1, "context_tokens": 0.0, "x": {"s": s}}
    ...         for s in (0.2, 0.5, 0.3)]
    >>> _largest_per_system(rows, "x", "s")
    {('h', 1, 0.0, 1): {'s': 0.5}}
    """
    out: dict[tuple, dict] = {}
    for r in rows:
        item = r.get(field)
        if item is None:
            continue
        key = (r["hardware"], r["gpus"], r["context_tokens"], r.get("concurrency", 1))
        if key not in out or item[by] > out[key][by]:
            out[key] = item
    return out


def routing_warnings(rows: list[dict]) -> list[str]:
    """One line per (system, context, C) whose median answer is faster than reading the
    experts balanced routing touches (:func:`balanced_read`), the fastest of its rows.

    >>> b = {"streams": 64, "tokens": 64, "experts": 128, "experts_topk": 8,
    ...      "experts_touched": 126.0, "weights_gb": 28.5, "bandwidth_tb_s": 0.864,
    ...      "step_ms": 33.0, "steps_per_s": 30.3, "median_steps_per_s": 67.0}
    >>> row = {"hardware": "l40", "gpus": 1, "context_tokens": 0.0, "concurrency": 64,
    ...        "balanced_routing": b}
    >>> print(routing_warnings([row, {**row, "balanced_routing": {**b,
    ...                                "median_steps_per_s": 60.0}}])[0])
    at C = 64 on l40 x1, the median answer runs 67 steps/s (tok/s per user over the tokens a \
step accepts), faster than reading the experts its tokens touch under balanced routing: one \
token per stream touches about 126 of the 128 experts of each layer, and reading them and the \
other active weights, 28.5 GB in all, at 0.864 TB/s takes 33 ms, 30 steps/s. No cap (routing \
that concentrates reads less), but every MoE row of data/public routing two or more tokens a \
step whose step is known (AR, or with accept_len) runs at most 1 / 1.47 of that rate \
(scripts/ceiling_check.py): the answer is likely optimistic (its MoE term grows with C by the \
fit's exponent, not by this read); a row measured at C = 64 on l40 x1 would settle it
    >>> tree = {**row, "concurrency": 2, "balanced_routing": {**b, "streams": 2, "tokens": 16}}
    >>> print(routing_warnings([tree])[0])   # doctest: +ELLIPSIS
    at C = 2 on l40 x1, ... routing: one stream's 16 verified tokens touch about 126 of the 128 \
experts ... (its MoE term grows with C x M by the fit's exponent, not by this read); a row of \
this tree measured at C = 2 on l40 x1 would settle it
    """
    fastest = _largest_per_system(rows, "balanced_routing", "median_steps_per_s")
    return [f"at C = {c} on {hardware} x{gpus}"
            + (f" and context {plain_text(float(context))}" if context else "")
            + f", the median answer runs {b['median_steps_per_s']:.0f} steps/s (tok/s per user "
              "over the tokens a step accepts), faster than reading the experts its tokens "
              f"touch under balanced routing: {_who(b)} {_read_text(b)}. No cap (routing that "
              f"concentrates reads less), but {ROUTING_CLAIM}: the answer is likely "
              f"optimistic (its MoE term grows with {'C' if b['tokens'] == b['streams'] else 'C x M'}"
              " by the fit's exponent, not by this read); a row "
              f"{'' if b['tokens'] == b['streams'] else 'of this tree '}measured at C = {c} on "
              f"{hardware} x{gpus} would settle it"
            for (hardware, gpus, context, c), b in fastest.items()]


def _read_text(b: dict) -> str:
    """The balanced read in words: experts touched, the bytes in all, the time and rate (a
    :func:`routing_row` dict)."""
    return (f"about {b['experts_touched']:.0f} of the {b['experts']} experts of each layer, "
            f"and reading them and the other active weights, {b['weights_gb']:.1f} GB in all, "
            f"at {b['bandwidth_tb_s']:g} TB/s takes {b['step_ms']:.3g} ms, "
            f"{b['steps_per_s']:.0f} steps/s")


def _who(b: dict) -> str:
    """Whose tokens a :func:`routing_warnings` line routes: one per stream, or one stream's
    tree or chain (:func:`routed_tokens`)."""
    if b["tokens"] == b["streams"]:
        return "one token per stream touches"
    if b["streams"] == 1:
        return f"the {b['tokens']} tokens a step verifies touch"
    return f"one stream's {b['tokens']} verified tokens touch"


def budget_routing_warning(fast: list[tuple[int, dict]], recommended: int,
                           where: str) -> str | None:
    """optimize's line for the budgets whose median steps per second beat their
    :func:`balanced_read` (``fast``: (budget, its :func:`routing_row`) in budget order), on the
    system ``where`` ("h100 x1"): the recommended budget's read in figures when it is one of
    them, else the largest's. None when none is. A larger tree's tokens touch more experts, so
    such a table ranks its larger trees too high.

    >>> r = routing_row(np.array([150.0]), BalancedRead(1, 17, 128, 8, 85.27, 41.63, 3.35))
    >>> print(budget_routing_warning([(16, r)], 8, "h100 x1"))   # doctest: +ELLIPSIS
    on h100 x1, budget 16 answers faster than reading the experts its tokens touch under \
balanced routing: budget 16's 17 tokens touch about 85 of the 128 experts of each layer, ... \
takes 12.4 ms, 80 steps/s, where its answer runs 150 steps/s. No cap ... may be too large
    """
    if not fast:
        return None
    named = dict(fast)
    shown = recommended if recommended in named else fast[-1][0]
    b = named[shown]
    budgets = ", ".join(str(budget) for budget, _ in fast)
    return (f"on {where}, budget{'s' * (len(fast) > 1)} {budgets} "
            f"answer{'s' * (len(fast) == 1)} faster than reading the experts "
            f"{'their' if len(fast) > 1 else 'its'} tokens touch under balanced routing: "
            f"{'the recommended ' if shown == recommended else ''}budget {shown}'s "
            f"{b['tokens']} tokens touch {_read_text(b)}, where its answer runs "
            f"{b['median_steps_per_s']:.0f} steps/s. No cap (routing that concentrates reads less), but "
            f"{ROUTING_CLAIM}: a larger tree's tokens touch more experts, so these budgets' "
            "tok/s are likely optimistic, the largest most, and the recommended budget may be "
            "too large")


def bytes_not_deployments(draws: Fit, sc: Scenario, stream_ms: float) -> bool:
    """Whether the fit's M = 1 step of ``sc``'s measured system is, at its median, shorter
    than reading the card's active weights (``stream_ms``): the card's bytes per weight are
    not the deployment's, so a read priced at them is left out (:func:`read_ceiling`'s
    weights, :func:`balanced_read` whole)."""
    step = measured_step_ar(draws, sc)
    return step is not None and float(np.median(step)) < stream_ms


def least_kv_share(card) -> float:
    """What the least deployment's cache holds of ``card``'s bytes per token: :data:`LEAST_KV_CACHE`'s
    bits over the card's (a card already below them, a 3-bit cache, reads its own bytes).

    >>> from ddtree_bayes.core.model_cards import ModelCard
    >>> card = ModelCard("k", 1000, 32, 61, 384, 8, 0.5, "bf16", "s", kv_cache_bits=8.0)
    >>> least_kv_share(card), least_kv_share(ModelCard("t", 8, 8, 32, None, None, 2, "bf16",
    ...                                                "s", kv_cache_bits=3.0))
    (0.5625, 1.0)
    """
    return min(card.kv_share(LEAST_KV_CACHE), 1.0)


def step_rate(draws: Fit, sc: Scenario, step_ms: np.ndarray) -> np.ndarray:
    """Steps per second of true (noise-free) step draws, no faster than the read: what
    P(faster than AR) and optimize compare, as predict's draws are capped."""
    return capped(1000.0 / step_ms, read_ceiling(draws, sc))


def capped(per_step: np.ndarray, ceiling: ReadCeiling | None) -> np.ndarray:
    """Predictive steps per second no faster than the read allows.

    >>> c = ReadCeiling(weights_gb=16.0, kv_gb=16.0, bandwidth_tb_s=3.2)   # 10 ms
    >>> capped(np.array([50.0, 120.0]), c).tolist()
    [50.0, 100.0]
    """
    if ceiling is None:
        return per_step
    return np.minimum(per_step, ceiling.rate)


def ceiling_row(per_step: np.ndarray, ceiling: ReadCeiling | None) -> dict | None:
    """What a predict row says of the cap (its JSON ``read_ceiling``): None when fewer than
    :data:`SAY_AT` of the draws reached it."""
    if ceiling is None:
        return None
    share = float(np.mean(per_step >= ceiling.rate * (1 - 1e-12)))
    if share < SAY_AT:
        return None
    return {"step_ms": ceiling.step_ms, "steps_per_s": ceiling.rate,
            "weights_gb": ceiling.weights_gb, "kv_gb": ceiling.kv_gb,
            "bandwidth_tb_s": ceiling.bandwidth_tb_s, "capped_share": share,
            "kv_cache": ceiling.kv_cache, "kv_card_bits": ceiling.kv_card_bits}


def ceiling_warnings(rows: list[dict]) -> list[str]:
    """One line per (system, context, C) whose predict rows were capped at the read: the
    largest share among its engines and acceptances.

    >>> cap = {"step_ms": 7.68, "steps_per_s": 130.2, "weights_gb": 16.06, "kv_gb": 9.66,
    ...        "bandwidth_tb_s": 3.35, "capped_share": 0.2}
    >>> row = {"hardware": "h100", "gpus": 1, "context_tokens": 32768.0, "concurrency": 8,
    ...        "read_ceiling": cap}
    >>> print(ceiling_warnings([row, {**row, "read_ceiling": {**cap, "capped_share": 0.3}}])[0])
    at C = 8 and context 32768 on h100 x1, 30% of the draws are capped at 130 steps/s (tok/s \
per user at one token per step): a step reads the weights (16.1 GB) and the streams' KV caches \
(9.7 GB: 4.5 of the card's 16 bits per value, llama.cpp's q4_0, the smallest cache an engine \
keeps) at 3.35 TB/s, at least 7.68 ms; the model's context term (C ** \
ctx_batch_exponent) would read them faster
    >>> print(ceiling_warnings([{**row, "context_tokens": 0.0, "concurrency": 1, "read_ceiling":
    ...     {**cap, "kv_gb": 0.0, "capped_share": 0.02}}])[0].split("): ")[1])
    a step reads the weights (16.1 GB) at 3.35 TB/s, at least 7.68 ms; the answer's run-to-run \
noise reaches below that read
    """
    worst = _largest_per_system(rows, "read_ceiling", "capped_share")
    out = []
    for (hardware, gpus, context, c), cap in worst.items():
        read = [f"the weights ({cap['weights_gb']:.1f} GB)" if cap["weights_gb"] else
                "no weights (the fit's step there is shorter than the card's read)"]
        if cap["kv_gb"] and cap.get("kv_cache"):
            read.append(f"the streams' KV caches ({cap['kv_gb']:.1f} GB "
                        f"{kv_dtype_text(cap['kv_cache'], cap.get('kv_card_bits'))})")
        elif cap["kv_gb"]:
            bits = cap.get("kv_card_bits") or KV_CARD_BITS_ASSUMED
            read.append(f"the streams' KV caches ({cap['kv_gb']:.1f} GB: "
                        f"{KV_CACHE_BITS[LEAST_KV_CACHE]:g} of the card's {bits:g} bits per "
                        f"value, llama.cpp's {LEAST_KV_CACHE}, the smallest cache an engine "
                        "keeps)")
        why = ("the model's context term (C ** ctx_batch_exponent) would read them faster"
               if cap["kv_gb"] else "the answer's run-to-run noise reaches below that read")
        out.append(f"at C = {c} and context {plain_text(float(context))} on {hardware} x{gpus}, "
                   f"{cap['capped_share']:.0%} of the draws are capped at "
                   f"{cap['steps_per_s']:.0f} steps/s (tok/s per user at one token per step): "
                   f"a step reads {' and '.join(read)} at {cap['bandwidth_tb_s']:g} TB/s, at "
                   f"least {cap['step_ms']:.3g} ms; {why}")
    return out

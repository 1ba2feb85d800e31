"""Model cards (``data/models.csv``) and GPU peak FLOPs: what the verify roofline needs.

A model card gives the target's active parameters (FLOPs per verified token are about
``2 x active``), its experts and top-k (how many distinct experts M tokens touch), and the
precision its matmuls run in. The hardware table gives each GPU's dense peak per precision.
numpy and the standard library only; every error names the file, row and column.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddtree_bayes.core.data import (
    MIN_BYTES_PER_WEIGHT,
    check_name,
    check_named_columns,
    missing_column,
    parse_number,
    read_records,
)
from ddtree_bayes.core.errors import DataError, InputError
from ddtree_bayes.core.pairs import LEAST_BITS_PER_WEIGHT, LEAST_QUANTISATION
from ddtree_bayes.core.tensor_cores import (  # noqa: F401  (re-exported)
    COMPUTE_CAPABILITY_RE,
    INT8_MMA_MIN_CC,
    MMA_MIN_CC,
    compute_capability_fix,
    needs,
    precisions_without_mma,
)

#: Columns a model-card file must have.
CARD_COLUMNS = ("model", "params_total_b", "params_active_b", "layers", "experts", "experts_topk",
                "bytes_per_weight", "compute_dtype", "source")
#: The model-card columns card add fills (data/models.csv's header).
CARD_HEADER = ("model", "params_total_b", "params_active_b", "layers", "hidden_size", "experts",
               "experts_topk", "shared_experts", "bytes_per_weight", "compute_dtype",
               "kv_bytes_per_token", "attention", "source", "notes", "file_bytes_per_weight")
#: Columns a card row has that an older data/models.csv (one created from the bundled cards
#: before they existed) may lack: card add writing the row adds them to its header.
OPTIONAL_CARD_COLUMNS = ("file_bytes_per_weight", "kv_window_bytes_per_token",
                         "kv_window_tokens", "max_context_tokens", "kv_cache_bits",
                         "recurrent_layers", "kv_heads", "q_heads", "embed_params_b")
#: Every column a model-card file's reader knows, the two above: a header cell spelt like one
#: it lacks (``kv_cache_bit``, ``params_activ_b``) is refused, not ignored, as
#: measurements.csv's (core/data ``check_named_columns``).
CARD_FILE_COLUMNS = tuple(dict.fromkeys(CARD_HEADER + OPTIONAL_CARD_COLUMNS))
#: Precisions the hardware table gives peaks for, and their dense-peak ratio to bf16 on the
#: tensor cores of Hopper/Blackwell parts (used only to derive a missing entry, and said so).
#: int8 is what ggml (llama.cpp and engines on it) multiplies quantised GGUF weights in: its
#: MMQ kernels quantise the activations to 8-bit blocks and use int8 tensor cores
#: (ggml-org/llama.cpp ggml/src/ggml-cuda/mmq.cuh, ``block_q8_1_mmq``).
PRECISIONS = {"bf16": 1.0, "fp8": 2.0, "fp4": 4.0, "int8": 2.0}
#: FLOPs per byte of memory bandwidth assumed when a GPU has no peak at all in the table: the
#: roofline ridge of current datacenter and workstation GPUs is ~150-600 FLOP/B at bf16;
#: 200 is at the low end, so an unknown GPU reaches its compute knee early (conservative).
FALLBACK_RIDGE_FLOP_PER_BYTE = 200.0
#: What :func:`peak_tflops` says of a peak taken at :data:`FALLBACK_RIDGE_FLOP_PER_BYTE` (the
#: words a note of an assumed peak is found by: engine/unmeasured.py)
NO_PEAK = "no peak FLOPs in the table"


#: Card fields stored for the checks around the model, never read by it (``update``'s
#: reweight compares cards without them: a fit stored before one existed is no other model).
#: ``kv_bytes_per_token`` is not one: with ``kv_heads`` it sets the context cost's prior.
NOT_MODELLED = ("file_bytes_per_weight", "kv_window_bytes_per_token",
                "kv_window_tokens", "max_context_tokens", "kv_cache_bits", "q_heads")
#: Bits per cached value of the KV-cache dtypes ``predict --kv-cache`` takes (llama.cpp's
#: ``q8_0`` and ``q4_0``: blocks of 32 values with one fp16 scale, 8.5 and 4.5 bits).
KV_CACHE_BITS = {"bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "q8_0": 8.5, "q4_0": 4.5}
#: The bits per value a card's ``kv_cache_bits`` may say: 3 (vLLM's 3-bit TurboQuant caches) to
#: 32 (an fp32 cache); 2 is "2 bytes" written as bits, which would read the cache 8x too big.
KV_BITS_RANGE = (3.0, 32.0)
#: The bits a card's ``kv_bytes_per_token`` is taken at when its ``kv_cache_bits`` is blank (bf16).
KV_CARD_BITS_ASSUMED = 16.0


#: The longest context a card takes: 2 ** 24 = 16,777,216 tokens. The longest any public model
#: card declares is Llama 4 Scout's 10,485,760 (max_position_embeddings, "10M"): this leaves it
#: 1.6x headroom and refuses a billion-token typo, which left predict silent.
MAX_CARD_CONTEXT = 2 ** 24
#: What a bad ``max_context_tokens`` cell of a models.csv row is told to write.
CONTEXT_FIX = ("write the model's longest context in tokens (its config.json's "
               "max_position_embeddings), or leave it blank")


def card_context(value, key: str, where: str, fix: str, *, row: int | None = None
                 ) -> int | None:
    """A card's longest context, ``max_context_tokens``, as a file gives it (``key``:
    ``max_position_embeddings``, ``<arch>.context_length``, or a models.csv ``row``'s
    ``max_context_tokens`` column): None when the file does not say; a whole number from 1 to
    :data:`MAX_CARD_CONTEXT`, else one line naming ``where`` and ``key`` (and the row and
    column: a :class:`DataError`). The one rule `card add` (config.json and GGUF files) and the
    models.csv reader apply: 0, a string or 1e9 were read as "does not say", so predict never
    warned past the model's context, and a hand-written 1000000000 as a billion tokens.

    >>> card_context(131072, "max_position_embeddings", "c.json", "f"), card_context(
    ...     None, "k", "c.json", "f")
    (131072, None)
    >>> try:
    ...     card_context("8k", "max_position_embeddings", "c.json", "pass its own")
    ... except InputError as err:
    ...     print(err)
    c.json: 'max_position_embeddings' is '8k', not a whole number of tokens (fix: pass its own)
    """
    if value is None:
        return None
    try:
        tokens = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        tokens = None
    if tokens is None:
        why = f"is {value!r}, not a whole number of tokens"
    elif tokens < 1:
        why = f"is {tokens}: a model takes a context of at least 1 token"
    elif tokens > MAX_CARD_CONTEXT:
        why = (f"is {tokens}, above {MAX_CARD_CONTEXT} (2 ** 24) tokens, longer than any "
               "model's context (the longest a public card declares: Llama 4 Scout's 10485760)")
    else:
        return int(tokens)
    if row is None:
        raise InputError(f"{key!r} {why}", file=where, fix=fix)
    raise DataError(f"{key!r} {why}", file=where, row=row, column=key, fix=fix)


def kv_dtype_text(dtype: str, card_bits: float | None) -> str:
    """What a message says of a cache ``predict --kv-cache`` names, against the card's bits.

    >>> kv_dtype_text("fp8", 16.0)
    "at fp8, as --kv-cache says: 8 of the card's 16 bits per value"
    >>> print(kv_dtype_text("q4_0", None))
    at q4_0, as --kv-cache says: 4.5 of the card's 16 bits per value (bf16 assumed: the card \
does not say its cache dtype)
    """
    text = (f"at {dtype}, as --kv-cache says: {KV_CACHE_BITS[dtype]:g} of the card's "
            f"{card_bits or KV_CARD_BITS_ASSUMED:g} bits per value")
    return text + ("" if card_bits else " (bf16 assumed: the card does not say its cache dtype)")


def modelled(card: dict) -> dict:
    """A stored card (a dict) without the fields of :data:`NOT_MODELLED` nor the blank ones:
    what two fits' cards must agree on for the fits to be of one model (a card stored before
    a field existed, ``recurrent_layers`` say, is the same card as one with that field blank).

    >>> modelled({"model": "m", "layers": 61, "file_bytes_per_weight": 0.6,
    ...           "recurrent_layers": None})
    {'model': 'm', 'layers': 61}
    """
    return {k: v for k, v in card.items() if k not in NOT_MODELLED and v is not None}


@dataclass(frozen=True)
class ModelCard:
    """One target model. ``experts`` is None for a dense model."""

    model: str
    params_total_b: float
    params_active_b: float
    layers: int
    experts: int | None
    experts_topk: int | None
    bytes_per_weight: float
    compute_dtype: str
    source: str
    #: the residual stream's width (``hidden_size``); None when the card does not give it
    hidden_size: int | None = None
    #: bytes the KV cache holds per cached token of one sequence, at the card's cache dtype
    #: (``kv_bytes_per_token``); None when the card does not give it
    kv_bytes_per_token: float | None = None
    #: bytes per weight over every weight of the checkpoint (``file_bytes_per_weight``: what
    #: the weights take in memory; ``bytes_per_weight`` averages the weights a token reads,
    #: which differ in an MoE whose experts are quantised below its attention); None when the
    #: card does not give it
    file_bytes_per_weight: float | None = None
    #: a model with sliding-window layers beside its full-attention ones (Gemma 3, gpt-oss):
    #: what those layers cache per token (``kv_window_bytes_per_token``; not in
    #: ``kv_bytes_per_token``, which grows with the context) and the window they cache at most
    #: (``kv_window_tokens``); None for a model without such layers
    kv_window_bytes_per_token: float | None = None
    kv_window_tokens: int | None = None
    #: the longest context the model takes (its config's ``max_position_embeddings``: with a
    #: RoPE scaling the config declares, the scaled length); None when the card does not say
    max_context_tokens: int | None = None
    #: bits per value of ``kv_bytes_per_token`` (the ``kv_cache_bits`` column: 16 for a bf16
    #: cache, 8 for Kimi K2.6's fp8 MLA cache); None when the card does not say
    kv_cache_bits: float | None = None
    #: the layers that keep a recurrent state instead of a KV cache (``recurrent_layers``:
    #: Gated DeltaNet, Mamba, linear attention; a hybrid such as Qwen3.5 has 48 of 64); None or
    #: 0 for a transformer. Speculative decoding of a hybrid target pays a fixed cost per step
    #: in some engines (engine/model.py ``spec_fixed_recurrent``)
    recurrent_layers: int | None = None
    #: KV heads of a full-attention layer (the ``kv_heads`` column): g tensor-parallel GPUs
    #: split them, each holding max(1, kv_heads / g) (vLLM and SGLang replicate a head when g
    #: exceeds them); an MLA cache is one latent head, which every GPU holds whole. None when
    #: the card does not say (its context cost is then the generic prior's)
    kv_heads: int | None = None
    #: query (attention) heads of a full-attention layer (the ``q_heads`` column: the config's
    #: ``num_attention_heads``, a GGUF's ``head_count``; an MLA model's heads): tensor
    #: parallelism shards them evenly, so a GPU count that does not divide them runs no
    #: tensor-parallel group (:func:`tensor_parallel_rule`). None when the card does not say
    q_heads: int | None = None
    #: parameters (billions) of the input embedding that ``params_active_b`` counts but a
    #: token does not read whole (the ``embed_params_b`` column): vocab_size x hidden_size when
    #: it is untied from the LM head (a token reads one row of it: negligible), 0 when tied
    #: (the LM head, read whole every token, is the same matrix). None when the card does not
    #: say: counted as read, as before the column
    embed_params_b: float | None = None

    @property
    def read_params_b(self) -> float:
        """Parameters (billions) one token's step reads and multiplies: ``params_active_b``
        less :attr:`embed_params_b` (an untied input embedding, of which it reads one row).

        >>> llama = ModelCard("l", 8.03, 8.03, 32, None, None, 2.0, "bf16", "s",
        ...                   embed_params_b=0.5253)   # 128256 x 4096, untied
        >>> round(llama.read_params_b, 4), round(llama.read_gb, 4)
        (7.5047, 15.0094)
        >>> ModelCard("l", 8.03, 8.03, 32, None, None, 2.0, "bf16", "s").read_gb   # unknown
        16.06
        """
        return self.params_active_b - (self.embed_params_b or 0.0)

    @property
    def read_gb(self) -> float:
        """GB of weights one token's step reads: :attr:`read_params_b` x ``bytes_per_weight``
        (an average over those weights)."""
        return self.read_params_b * self.bytes_per_weight

    @property
    def recurrent(self) -> bool:
        """Has the target recurrent (linear-attention) layers: a hybrid model."""
        return bool(self.recurrent_layers)

    def same_architecture(self, other: ModelCard) -> bool:
        """Do the two cards describe one network (parameters, layers, experts, hidden size,
        recurrent layers), whatever their weights' bytes, compute precision or caches: two
        deployment cards of one model (a quantisation), not a distillation into another.

        >>> from dataclasses import replace
        >>> q4 = ModelCard("m-q4", 27, 27, 64, None, None, 0.61, "int8", "s", recurrent_layers=48)
        >>> q8 = replace(q4, model="m-q8", bytes_per_weight=1.06)
        >>> q4.same_architecture(q8), q4.same_architecture(replace(q8, layers=48))
        (True, False)
        """
        def shape(c: ModelCard) -> tuple:
            return (c.params_total_b, c.params_active_b, c.layers, c.experts, c.experts_topk,
                    c.hidden_size, c.recurrent_layers)

        return shape(self) == shape(other)

    def kv_share(self, dtype: str) -> float:
        """What a cache of ``dtype`` (:data:`KV_CACHE_BITS`) holds of the card's bytes per
        token: its bits over the card's (bf16's when the card does not say).

        >>> card = ModelCard("k", 1000, 32, 61, 384, 8, 0.5, "bf16", "s", kv_cache_bits=8.0)
        >>> card.kv_share("bf16"), card.kv_share("q4_0")
        (2.0, 0.5625)
        """
        return KV_CACHE_BITS[dtype] / (self.kv_cache_bits or KV_CARD_BITS_ASSUMED)

    @property
    def is_moe(self) -> bool:
        return self.experts is not None

    @property
    def weights_gb(self) -> float:
        """GB the weights take: total parameters (billions) x the file's bytes per weight
        (else the card's ``bytes_per_weight``).

        >>> card = ModelCard("q", 30.5, 3.35, 48, 128, 8, 0.80, "bf16", "s")
        >>> round(card.weights_gb, 1), round(ModelCard(**{**card.__dict__,
        ...     "file_bytes_per_weight": 0.55}).weights_gb, 1)
        (24.4, 16.8)
        """
        return self.params_total_b * self.weights_bytes_per_weight

    @property
    def weights_bytes_per_weight(self) -> float:
        """The bytes per weight :attr:`weights_gb` counts."""
        return self.file_bytes_per_weight or self.bytes_per_weight

    def kv_cache_gb(self, context_tokens: float, streams: int = 1) -> float | None:
        """GB the KV cache of ``streams`` sequences at ``context_tokens`` each takes at the
        card's cache dtype (``kv_bytes_per_token`` x context, plus a sliding-window model's
        ``kv_window_bytes_per_token`` x min(context, window), x streams); None when the card
        does not give its bytes per token.

        >>> card = ModelCard("k", 1000, 32, 61, 384, 8, 0.5, "bf16", "s", kv_bytes_per_token=35136)
        >>> round(card.kv_cache_gb(131072, 8), 1)   # 35136 B x 131072 x 8
        36.8
        >>> gemma = ModelCard("g", 27, 27, 62, None, None, 2.0, "bf16", "s", 5376, 81920,
        ...                   kv_window_bytes_per_token=425984, kv_window_tokens=1024)
        >>> round(gemma.kv_cache_gb(1024, 128), 1)   # (81920 + 425984) B x 1024 x 128
        66.6
        >>> round(gemma.kv_cache_gb(131072, 1), 2)   # 81920 x 131072 + 425984 x 1024
        11.17
        """
        if not self.kv_bytes_per_token:
            return None
        window = (self.kv_window_bytes_per_token or 0.0) * min(
            context_tokens, self.kv_window_tokens or 0)
        return (self.kv_bytes_per_token * context_tokens + window) * streams / 1e9

    def context_read_gb(self, context_tokens: float, gpus: int) -> float | None:
        """GB of one sequence's KV cache each of ``gpus`` tensor-parallel GPUs reads at
        ``context_tokens`` of context: the part that grows with the context
        (``kv_bytes_per_token``, at the card's cache dtype) over min(GPUs, ``kv_heads``);
        None when the card gives neither.

        >>> mla = ModelCard("k", 1000, 32, 61, 384, 8, 0.5, "bf16", "s",
        ...                 kv_bytes_per_token=35136, kv_heads=1)
        >>> round(mla.context_read_gb(65536, 8), 3)   # every GPU reads the whole latent cache
        2.303
        >>> gqa = ModelCard("l", 70.6, 70.6, 80, None, None, 2.0, "bf16", "s",
        ...                 kv_bytes_per_token=327680, kv_heads=8)
        >>> [round(gqa.context_read_gb(65536, g), 2) for g in (1, 4, 16)]   # 21.47 GB / min(g, 8)
        [21.47, 5.37, 2.68]
        """
        if not self.kv_bytes_per_token or not self.kv_heads:
            return None
        return self.kv_bytes_per_token * context_tokens / 1e9 / min(gpus, self.kv_heads)

    @property
    def kv_bytes_how(self) -> str:
        """What :meth:`kv_cache_gb` counts, for a message.

        >>> print(ModelCard("g", 27, 27, 62, None, None, 2.0, "bf16", "s", 5376, 81920,
        ...       kv_window_bytes_per_token=425984, kv_window_tokens=1024).kv_bytes_how[52:])
        , + 425984 x min(context, 1024) of its sliding-window layers
        """
        how = f"{self.kv_bytes_per_token:g} bytes per token, the card's kv_bytes_per_token"
        if self.kv_window_bytes_per_token and self.kv_window_tokens:
            how += (f", + {self.kv_window_bytes_per_token:g} x min(context, "
                    f"{self.kv_window_tokens}) of its sliding-window layers")
        return how

    @property
    def flops_per_token(self) -> float:
        """FLOPs of one verified token's forward pass: 2 x the parameters it multiplies
        (:attr:`read_params_b`: an untied input embedding is a row lookup, no FLOPs)."""
        return 2.0 * self.read_params_b * 1e9

    def allreduce_mb_per_token(self, gpus: int) -> tuple[float, str]:
        """MB each GPU sends per verified token in the tensor-parallel all-reduces of one step,
        and how it was found: two all-reduces per layer (after attention, after the MLP or
        MoE) of ``hidden_size`` bf16 activations, a ring moving ``2 (g - 1) / g`` of the message
        per GPU. 0 on one GPU. A card without ``hidden_size`` has it estimated from the
        parameters one token passes through, ``active params ~ 12 layers hidden**2`` (a dense
        model's rule; for an MoE the active experts stand in for the MLP), and says so.

        >>> card = ModelCard("k", 1000, 32, 61, 384, 8, 0.5, "bf16", "s", hidden_size=7168)
        >>> round(card.allreduce_mb_per_token(8)[0], 3)   # 2 x 61 x 7168 x 2 B x 2 x 7/8
        3.061
        >>> card.allreduce_mb_per_token(1)[0]
        0.0
        >>> no_hidden = ModelCard("k", 1000, 32, 61, 384, 8, 0.5, "bf16", "s")
        >>> mb, how = no_hidden.allreduce_mb_per_token(8)   # 7168 in the config; 36,900 from
        >>> round(mb, 2), how.split("(")[1]                  # the total parameters
        (2.82, 'hidden_size ~6612 estimated from 32B active parameters over 61 layers ')
        """
        if gpus <= 1:
            return 0.0, f"{self.model}: one GPU, no all-reduce"
        hidden, how = self.hidden_size, f"hidden_size {self.hidden_size}"
        if not hidden:
            hidden = int(round(math.sqrt(self.params_active_b * 1e9 / (12.0 * self.layers))))
            how = (f"hidden_size ~{hidden} estimated from {self.params_active_b:g}B active "
                   f"parameters over {self.layers} layers (not in the card)")
        mb = 2.0 * self.layers * hidden * 2.0 * 2.0 * (gpus - 1) / gpus / 1e6
        return mb, f"{self.model} x{gpus}: {mb:.3g} MB per token per GPU ({how})"

    def distinct_ratio(self, verify_tokens) -> np.ndarray:
        """Expected distinct routed experts M tokens touch, relative to one token's top-k:
        ``E (1 - (1 - k/E)**M) / k`` under uniform routing; 1 for a dense model.

        >>> card = ModelCard("m", 1000, 32, 61, 384, 8, 0.5, "bf16", "s")
        >>> [round(float(x), 2) for x in card.distinct_ratio(np.array([1.0, 9.0, 33.0]))]
        [1.0, 8.29, 24.04]
        """
        m = np.asarray(verify_tokens, dtype=float)
        if not self.is_moe:
            return np.ones_like(m)
        e, k = float(self.experts), float(self.experts_topk)  # type: ignore[arg-type]
        return e * (1.0 - (1.0 - k / e) ** m) / k


def tensor_parallel_rule(card: ModelCard, gpus: int) -> str | None:
    """What stops ``gpus`` tensor-parallel GPUs from sharding ``card``'s attention, or None
    when they can (or the card does not give its ``q_heads``: unknown). vLLM and SGLang
    (``QKVParallelLinear``) give each GPU ``q_heads / gpus`` query heads, which must be whole,
    and ``kv_heads / gpus`` KV heads when ``gpus`` is below them, else replicate each KV head
    on ``gpus / kv_heads`` GPUs, which must be whole too; an MLA latent (``kv_heads`` 1) is one
    head every GPU holds. TensorRT-LLM's mapping shards the heads alike.

    >>> kimi = ModelCard("kimi-k2.6", 1000, 32, 61, 384, 8, 0.5, "bf16", "s", kv_heads=1,
    ...                  q_heads=64)
    >>> print(tensor_parallel_rule(kimi, 3))
    shards kimi-k2.6's 64 attention heads evenly, and 3 does not divide 64
    >>> [tensor_parallel_rule(kimi, g) for g in (1, 2, 4, 8)]
    [None, None, None, None]
    >>> qwen = ModelCard("q", 27, 27, 64, None, None, 0.6, "int8", "s", kv_heads=4, q_heads=24)
    >>> print(tensor_parallel_rule(qwen, 6))   # 24 / 6 = 4 query heads, but 4 KV heads on 6
    splits q's 4 KV heads evenly or replicates each on a whole number of GPUs, and 6 is neither \
a divisor nor a multiple of 4
    """
    q, kv = card.q_heads, card.kv_heads
    if not q or gpus <= 1:
        return None
    said = []
    if q % gpus:
        said.append(f"shards {card.model}'s {q} attention heads evenly, and {gpus} does not "
                    f"divide {q}")
    if kv and kv > 1 and kv % gpus and gpus % kv:
        whose = "its" if said else f"{card.model}'s"
        said.append(f"splits {whose} {kv} KV heads evenly or replicates each on a whole number "
                    f"of GPUs, and {gpus} is neither a divisor nor a multiple of {kv}")
    return "; it ".join(said) or None


def more_gpus_fix(card: ModelCard, memory_gb: float) -> str:
    """The fix of a question whose GPUs of ``memory_gb`` each cannot hold ``card``'s weights:
    the fewest that can, and, when that count cannot shard the model's heads
    (:func:`tensor_parallel_rule`), the three smallest tensor-parallel sizes above it that can
    (the fix said "--gpus 3 or more" for Kimi K2.6's 64 heads, which no TP engine runs).

    >>> kimi = ModelCard("kimi-k2.6", 1026, 32, 61, 384, 8, 0.5, "fp4", "s", kv_heads=1,
    ...                  q_heads=64)
    >>> print(more_gpus_fix(kimi, 141.0))
    --gpus 4 or more of them, or a GPU with more memory
    >>> print(more_gpus_fix(kimi, 120.0))
    --gpus 5 or more of them (8, 16 or 32 for a tensor-parallel engine, which shards \
kimi-k2.6's 64 heads evenly; llama.cpp splits layers over any count), or a GPU with more memory
    """
    from ddtree_bayes.core.data import listed

    need = max(1, math.ceil(card.weights_gb / memory_gb))
    sizes = ([g for g in range(need, (card.q_heads or 0) + 1)
              if tensor_parallel_rule(card, g) is None][:3]
             if tensor_parallel_rule(card, need) else [])
    shard = (f" ({listed(sizes, 'or')} for a tensor-parallel engine, which shards "
             f"{card.model}'s {card.q_heads} heads evenly; llama.cpp splits layers over any "
             "count)" if sizes else "")
    return f"--gpus {need} or more of them{shard}, or a GPU with more memory"


#: The most bytes a served weight takes (fp32: no engine serves fp64 weights): a card's
#: ``bytes_per_weight`` above it is bits written as bytes (16 for bf16; a 4-to-8-bit scheme's
#: "bpw", exl2's 4.65 or Q6_K's 6.56, was let through under fp64's 8). A 4-bit scheme written
#: as 4 is that slip too, but in range.
MAX_BYTES_PER_WEIGHT = 4.0


def check_bytes_per_weight(value: float, path: str, row: int,
                           column: str = "bytes_per_weight") -> None:
    """Refuse a ``bytes_per_weight`` (or ``column``'s) above :data:`MAX_BYTES_PER_WEIGHT`
    (bf16's 16 bits as bytes made every step read 8x the weights' bytes) or below
    core/data ``MIN_BYTES_PER_WEIGHT``, the fewest any quantisation stores (Q1_0's 1.125
    bits: a decimal slip, 0.05 for 0.5, made every step read 10x fewer bytes than any
    deployment of the card, the floor ``add`` and ``fit`` hold a step and the memory to).

    >>> try:
    ...     check_bytes_per_weight(16, "data/models.csv", 3)
    ... except DataError as err:
    ...     print(str(err)[:94])
    data/models.csv, row 3, column 'bytes_per_weight': bytes_per_weight 16 is more than any weight
    >>> try:
    ...     check_bytes_per_weight(0.05, "data/models.csv", 3)
    ... except DataError as err:
    ...     print(str(err)[51:126])
    bytes_per_weight 0.05 is fewer than any quantisation stores (0.140625 bytes
    """
    fix = ("write bytes per weight, bits / 8: 2 for bf16, 1 for fp8, about 0.56 for a 4-bit "
           "scheme")
    if value > MAX_BYTES_PER_WEIGHT:
        raise DataError(f"{column} {value:g} is more than any weight takes "
                        f"({MAX_BYTES_PER_WEIGHT:g} bytes, fp32, the widest weights an engine "
                        "serves); likely bits written as bytes",
                        file=path, row=row, column=column, fix=fix)
    if value < MIN_BYTES_PER_WEIGHT:
        raise DataError(f"{column} {value:g} is fewer than any quantisation stores "
                        f"({MIN_BYTES_PER_WEIGHT:g} bytes: {LEAST_BITS_PER_WEIGHT:g} bits, "
                        f"{LEAST_QUANTISATION}); likely a decimal slip",
                        file=path, row=row, column=column, fix=fix)


#: How far a card's active parameters may sit above a transformer's ``12 x layers x hidden^2``
#: (attention 4 h^2 + an MLP of 8 h^2 per layer) before the card is refused as a unit slip:
#: every bundled card lies within 0.85-1.41x of it, but the embeddings (vocab x hidden, left
#: out of the formula) put a tiny model with a large vocabulary at 12-40x (a 2-layer, 768-wide
#: draft model with 128k tokens: 15x); 100x is millions written as billions (1000x).
ACTIVE_SCALE_SLACK = 100.0
#: How far below it: no layer holds much less than ``12 h^2`` (a pure-Mamba stack, in and out
#: projections of ~6 h^2 and no MLP, ~0.5x; the bundled lowest, Kimi K2.6's MLA and MoE, 0.85x;
#: the embeddings only add), so below 1/4 the hidden size or the layers are wrong (Mixtral's
#: hidden_size 4096 written 40960: 1/50), or the parameters were written in another unit.
ACTIVE_SCALE_LOW = 0.25
#: The fewest values a layer of any attention layout caches per token: K and V of one KV head
#: of 64 dims (multi-query attention, as Falcon-7B), 128 (MLA caches 512 + 64 = 576; GQA 8 x
#: 128 x 2 = 2048). ``kv_bytes_per_token`` over the card's layers at its ``kv_cache_bits``
#: below this is a unit slip (:func:`check_kv_layout`). A hybrid whose linear-attention or
#: Mamba layers cache nothing averages its attention layers' cache over all layers (Qwen3.5's
#: 3 in 4: 256): one caching less than 1 layer in 8 with MQA would fall below it.
LEAST_KV_VALUES_PER_LAYER = 128
#: The most values a layer caches per token, in hidden sizes: full multi-head attention keeps
#: K and V of every query head, 2 x q_heads x head_dim, and q_heads x head_dim reaches ~1.6x the
#: hidden size (Qwen3-32B: 64 x 128 over 5120); 4x is above every layout, so a card above it
#: holds a slip (Llama-3.1-8B's 131072 written 131072000: 1000x its cache, read, exit 0).
MOST_KV_VALUES_PER_HIDDEN = 4.0
#: The most total parameters per active one: MoE models reach ~30x (Kimi K2.6 1000 / 32); a
#: total 1000x its active (8030 beside 8.03) is a unit slip in one column.
TOTAL_PER_ACTIVE_MAX = 200.0


def check_active_scale(active: float | None, layers: float | None, hidden: float | None,
                       path: str, row: int) -> None:
    """Refuse ``params_active_b`` more than :data:`ACTIVE_SCALE_SLACK` times above what its
    layers and hidden size hold, or below :data:`ACTIVE_SCALE_LOW` of it (``params_active_b
    8030`` for an 8B model was read: every step then streamed a thousand times its weights;
    Mixtral's hidden_size 40960, 1/50, was read too). Nothing to check without both.

    >>> check_active_scale(8.03, 32, 4096, "m.csv", 2)   # Llama-3.1-8B: 1.25x
    >>> try:
    ...     check_active_scale(8030, 32, 4096, "m.csv", 2)
    ... except DataError as err:
    ...     print(str(err)[:105])
    m.csv, row 2, column 'params_active_b': params_active_b 8030 is 1246x the 6.44 B that 32 layers of hidden
    """
    if not active or not layers or not hidden:
        return
    expected = 12.0 * layers * hidden ** 2 / 1e9
    ratio = active / expected
    if ratio > ACTIVE_SCALE_SLACK or ratio < ACTIVE_SCALE_LOW:
        times = f"{ratio:.0f}x" if ratio >= 10 else f"1/{1 / ratio:.0f}" if ratio < 0.1 else \
            f"{ratio:.2g}x"
        raise DataError(f"params_active_b {active:g} is {times} the {expected:.3g} B that "
                        f"{layers:g} layers of hidden size {hidden:g} hold (12 x layers x "
                        "hidden^2): a unit slip?", file=path, row=row, column="params_active_b",
                        fix="write the parameters in billions (8.03 for an 8B model), and check "
                            "layers and hidden_size")


def check_kv_layout(kv_bytes: float | None, layers: float | None, bits: float | None,
                    path: str, row: int, window_bytes: float | None = None,
                    hidden: float | None = None) -> None:
    """Refuse ``kv_bytes_per_token`` that caches fewer values a layer, at the card's
    ``kv_cache_bits`` (blank: bf16's 16), than :data:`LEAST_KV_VALUES_PER_LAYER`, the smallest
    attention layout (4096 bytes on 32-layer Mixtral, 64 bf16 values a layer, was read), or,
    with the card's ``hidden_size``, more than :data:`MOST_KV_VALUES_PER_HIDDEN` hidden sizes a
    layer, more than any layout caches. A card with sliding-window layers counts their
    per-token cache (``window_bytes``, its ``kv_window_bytes_per_token``) too:
    ``kv_bytes_per_token`` holds its full layers only.

    >>> check_kv_layout(131072, 32, None, "m.csv", 2, hidden=4096)   # Llama-3.1-8B: 2048 a layer
    >>> check_kv_layout(4096, 32, 8, "m.csv", 2)        # MQA of 64 dims at fp8: 128
    >>> check_kv_layout(4096, 26, None, "m.csv", 2, 22528)   # Gemma 3 1B: 4 full + 22 sliding
    >>> try:
    ...     check_kv_layout(131072000, 32, None, "m.csv", 2, hidden=4096)
    ... except DataError as err:
    ...     print(str(err)[43:142])
    kv_bytes_per_token 1.31072e+08 over 32 layers is 2.05e+06 values a layer at 16 bits (kv_cache_bits;
    """
    if not kv_bytes or not layers:
        return
    bits = bits or KV_CARD_BITS_ASSUMED
    values = (kv_bytes + (window_bytes or 0.0)) / layers / (bits / 8)
    if hidden and values > MOST_KV_VALUES_PER_HIDDEN * hidden:
        problem, check = (f"{values / hidden:.3g}x the hidden size {hidden:g}: more than full "
                          "multi-head attention caches (K and V of every head, at most ~4x "
                          "it)", "layers, hidden_size and kv_cache_bits")
    elif values < LEAST_KV_VALUES_PER_LAYER:
        problem, check = ("fewer than the smallest attention layout caches: "
                          f"{LEAST_KV_VALUES_PER_LAYER}, K and V of one KV head of 64 dims "
                          "(MQA, as Falcon-7B)", "layers and kv_cache_bits")
    else:
        return
    raise DataError(f"kv_bytes_per_token {kv_bytes:g} over {layers:g} layers is {values:.3g} "
                    f"values a layer at {bits:g} bits (kv_cache_bits; blank: bf16), {problem}",
                    file=path, row=row, column="kv_bytes_per_token",
                    fix="write the bytes per token over all layers, 2 x layers x kv_heads x "
                        "head_dim x bytes per value: 131072 for Llama-3.1-8B's 32 x 8 x 128 at "
                        f"bf16; and check {check}")


def load_model_cards(path: str | Path, text: str | None = None) -> dict[str, ModelCard]:
    """Read and validate a model-card CSV: ``{model: ModelCard}``.

    >>> from ddtree_bayes.core.paths import bundled
    >>> cards = load_model_cards(bundled("models.csv"))
    >>> cards["kimi-k2.6"].experts, cards["kimi-k2.6"].params_active_b
    (384, 32.0)
    """
    path = str(path)
    _, header, body = read_records(path, text)
    fix = "the header must contain " + ",".join(CARD_COLUMNS)
    check_named_columns(path, header, CARD_COLUMNS,
                        [c for c in CARD_FILE_COLUMNS if c not in CARD_COLUMNS], fix)
    for col in CARD_COLUMNS:
        if col not in header:
            missing_column(path, header, col, fix)
    cards: dict[str, ModelCard] = {}
    for i, values in body:
        if not any(v.strip() for v in values):
            continue
        raw = {h: v.strip() for h, v in zip(header, values, strict=False)}
        name = raw["model"]
        if not name:
            raise DataError("empty value", file=path, row=i, column="model", fix="name the model")
        check_name(name, file=path, row=i, column="model")   # (as measurement rows name it)
        if name in cards:
            raise DataError(f"duplicate model {name!r}", file=path, row=i, column="model",
                            fix="keep one card per model")

        def num(col: str, *, integer: bool = False, required: bool = True, i: int = i,
                raw: dict[str, str] = raw) -> float | None:
            value = parse_number(path, i, col, raw.get(col, ""), integer=integer)
            if value is None and required:
                raise DataError("empty value", file=path, row=i, column=col,
                                fix=f"fill in {col} (with its source)")
            if value is not None and value <= 0:
                raise DataError(f"must be > 0, got {raw[col]}", file=path, row=i, column=col,
                                fix="write a positive number")
            return value

        total, active = num("params_total_b"), num("params_active_b")
        assert total is not None and active is not None
        if active > total:
            raise DataError(f"active parameters {active:g}B exceed total {total:g}B", file=path,
                            row=i, column="params_active_b", fix="swap or correct the two")
        experts = num("experts", integer=True, required=False)
        topk = num("experts_topk", integer=True, required=False)
        if (experts is None) != (topk is None):
            raise DataError("experts and experts_topk go together", file=path, row=i,
                            column="experts_topk" if topk is None else "experts",
                            fix="fill in both for an MoE model, neither for a dense one")
        if experts is not None and topk is not None and topk > experts:
            raise DataError(f"top-k {topk:g} exceeds the {experts:g} experts", file=path, row=i,
                            column="experts_topk", fix="correct the expert count or top-k")
        if experts is not None and topk is not None and topk < experts and active >= total:
            # (the total written twice: every step streamed all the experts' weights)
            raise DataError(f"active parameters {active:g}B are the total {total:g}B, but an MoE "
                            f"of {experts:g} experts at top-{topk:g} reads only part of them per "
                            "token", file=path, row=i, column="params_active_b",
                            fix="write the parameters a token uses (the model card's "
                                "'activated'), below the total")
        bytes_per_weight = num("bytes_per_weight")
        assert bytes_per_weight is not None
        check_bytes_per_weight(bytes_per_weight, path, i)
        file_bpw = num("file_bytes_per_weight", required=False) if raw.get(
            "file_bytes_per_weight") else None
        if file_bpw is not None:
            check_bytes_per_weight(file_bpw, path, i, "file_bytes_per_weight")
        hidden = num("hidden_size", integer=True, required=False) if "hidden_size" in raw else None
        layers = num("layers", integer=True)
        check_active_scale(active, layers, hidden, path, i)
        if total and active and total > TOTAL_PER_ACTIVE_MAX * active:
            raise DataError(f"params_total_b {total:g} is {total / active:.0f}x params_active_b "
                            f"{active:g}: no mixture of experts is that sparse (~30x at most)",
                            file=path, row=i, column="params_total_b",
                            fix="write both in billions (8.03 for an 8B model)")
        kv_bytes = None if "kv_bytes_per_token" not in raw else num(
            "kv_bytes_per_token", required=False)
        kv_bits = num("kv_cache_bits", required=False) if raw.get("kv_cache_bits") else None
        if kv_bits is not None and not KV_BITS_RANGE[0] <= kv_bits <= KV_BITS_RANGE[1]:
            raise DataError(f"kv_cache_bits {raw['kv_cache_bits']} is not a cache's bits per "
                            f"value ({KV_BITS_RANGE[0]:g} to {KV_BITS_RANGE[1]:g})", file=path,
                            row=i, column="kv_cache_bits",
                            fix="write bits, not bytes: 16 for a bf16 cache, 8 for fp8")
        window = _window(raw, num, path, i)
        check_kv_layout(kv_bytes, layers, kv_bits, path, i, window["kv_window_bytes_per_token"],
                        hidden)
        dtype = raw["compute_dtype"]
        if dtype not in PRECISIONS:
            raise DataError(f"unknown compute_dtype {dtype!r}", file=path, row=i,
                            column="compute_dtype", fix="use one of " + ", ".join(PRECISIONS))
        if not raw["source"]:
            raise DataError("empty value", file=path, row=i, column="source",
                            fix="say where the numbers come from")
        cards[name] = ModelCard(
            model=name, params_total_b=total, params_active_b=active,
            layers=int(layers or 0),
            experts=None if experts is None else int(experts),
            experts_topk=None if topk is None else int(topk),
            bytes_per_weight=float(bytes_per_weight), compute_dtype=dtype,
            source=raw["source"],
            hidden_size=None if "hidden_size" not in raw else _optional_int(hidden),
            kv_bytes_per_token=kv_bytes,
            file_bytes_per_weight=file_bpw, **window,
            max_context_tokens=_max_context(raw, path, i),
            kv_cache_bits=kv_bits,
            recurrent_layers=_recurrent_layers(raw, path, i, layers),
            kv_heads=(kv_heads := _kv_heads(raw, path, i)),
            q_heads=_q_heads(raw, path, i, kv_heads),
            embed_params_b=_embed_params(raw, path, i, active))
    return cards


def _max_context(raw: dict, path: str, row: int) -> int | None:
    """A card's ``max_context_tokens``: blank (None), or a whole number of tokens the rule of
    :func:`card_context` takes, as `card add` takes it from a config.json or GGUF file.

    >>> _max_context({"max_context_tokens": "131072"}, "m.csv", 2)
    131072
    """
    value = parse_number(path, row, "max_context_tokens", raw.get("max_context_tokens", ""),
                         integer=True)
    return card_context(None if value is None else int(value), "max_context_tokens", path,
                        CONTEXT_FIX, row=row)


#: What a bad ``embed_params_b`` cell's error says to write.
EMBED_FIX = ("write the untied input embedding's parameters in billions, vocab_size x "
             "hidden_size / 1e9 (0.5253 for Llama-3.1-8B's 128256 x 4096), 0 when it is tied "
             "to the LM head, or leave it blank (unknown: counted as read)")


def _embed_params(raw: dict, path: str, row: int, active: float) -> float | None:
    """A card's ``embed_params_b``: blank (None), 0 (tied), or below half its
    ``params_active_b``: an untied embedding has an LM head of its size among the active
    parameters too, so one at half of them or more is a slip (millions as billions, or the
    total embedding and head).

    >>> _embed_params({"embed_params_b": "0.5253"}, "m.csv", 2, 8.03)
    0.5253
    >>> _embed_params({"embed_params_b": ""}, "m.csv", 2, 8.03) is None
    True
    >>> try:
    ...     _embed_params({"embed_params_b": "525.3"}, "m.csv", 2, 8.03)
    ... except DataError as err:
    ...     print(str(err)[:101])
    m.csv, row 2, column 'embed_params_b': embed_params_b 525.3 is not below half of params_active_b 8.03
    """
    text = raw.get("embed_params_b", "")
    value = parse_number(path, row, "embed_params_b", text)
    if value is None:
        return None
    if value < 0:
        raise DataError(f"embed_params_b {text} is negative", file=path, row=row,
                        column="embed_params_b", fix=EMBED_FIX)
    if value >= active / 2:
        raise DataError(f"embed_params_b {text} is not below half of params_active_b "
                        f"{active:g}, as an untied input embedding is (its LM head, as large, "
                        "is active too)", file=path, row=row, column="embed_params_b",
                        fix=EMBED_FIX)
    return float(value)


def _heads(raw: dict, path: str, row: int, column: str, what: str, fix: str) -> int | None:
    """A card's count of heads in ``column``: blank (None), or a whole number >= 1."""
    text = raw.get(column, "")
    value = parse_number(path, row, column, text)
    if value is None:
        return None
    if value < 1 or value != int(value):
        raise DataError(f"{column} {text} is not a whole number of {what} of 1 or more",
                        file=path, row=row, column=column, fix=fix)
    return int(value)


def _q_heads(raw: dict, path: str, row: int, kv: int | None) -> int | None:
    """A card's ``q_heads``: blank, or a whole number >= 1 that its ``kv_heads`` ``kv`` (when
    given, and not an MLA latent) divides: grouped-query attention gives each KV head a whole
    group of query heads (transformers' ``num_key_value_groups``)."""
    value = _heads(raw, path, row, "q_heads", "attention heads", Q_HEADS_FIX)
    if value is not None and kv and kv > 1 and value % kv:
        raise DataError(f"q_heads {raw['q_heads']} is not a multiple of the card's {kv} KV "
                        "heads: grouped-query attention gives each KV head a whole group of "
                        "query heads", file=path, row=row, column="q_heads", fix=Q_HEADS_FIX)
    return value


#: What a bad ``q_heads`` cell's error says to write.
Q_HEADS_FIX = ("the query heads of one full-attention layer (the config's num_attention_heads, "
               "a GGUF's head_count), a multiple of kv_heads, or blank")


def _kv_heads(raw: dict, path: str, row: int) -> int | None:
    """A card's ``kv_heads``: blank, or a whole number >= 1, and 1 for an MLA card (its
    ``attention`` says MLA: one latent head that every GPU holds whole; a card that copied
    DeepSeek's ``num_key_value_heads``, 128, priced its context read 8x too cheap on 8 GPUs)."""
    value = _heads(raw, path, row, "kv_heads", "KV heads", KV_HEADS_FIX)
    if value is not None and value != 1 and (
            raw.get("attention", "").lstrip().upper().startswith("MLA")):
        raise DataError(f"an MLA cache is one latent head every GPU holds whole, not "
                        f"{raw['kv_heads']} (the card's attention says MLA)", file=path, row=row,
                        column="kv_heads", fix="write kv_heads 1 (or leave it blank)")
    return value


#: What a bad ``kv_heads`` cell's error says to write.
KV_HEADS_FIX = ("the KV heads of one full-attention layer (the config's num_key_value_heads; "
                "1 for an MLA latent cache), or blank")


def _recurrent_layers(raw: dict, path: str, row: int, layers: float | None) -> int | None:
    """A card's ``recurrent_layers``: blank (a transformer), or a whole number from 0 to its
    layers."""
    text = raw.get("recurrent_layers", "")
    value = parse_number(path, row, "recurrent_layers", text, integer=True)
    if value is None:
        return None
    if value == 0:   # (a transformer: as blank, so a fit stored before the column is no change)
        return None
    if not 0 <= value <= (layers or 0):
        raise DataError(f"recurrent_layers {text} is not between 0 and the card's "
                        f"{layers or 0:g} layers", file=path, row=row, column="recurrent_layers",
                        fix="count the layers with a recurrent state (Gated DeltaNet, Mamba), "
                            "or leave it blank for a transformer")
    return int(value)


def _window(raw: dict, num, path: str, row: int) -> dict:
    """A card's sliding-window cache columns: both, or neither."""
    got = {k: num(k, integer=k == "kv_window_tokens", required=False) if raw.get(k) else None
           for k in ("kv_window_bytes_per_token", "kv_window_tokens")}
    if (got["kv_window_bytes_per_token"] is None) != (got["kv_window_tokens"] is None):
        missing = next(k for k, v in got.items() if v is None)
        raise DataError("kv_window_bytes_per_token and kv_window_tokens go together",
                        file=path, row=row, column=missing,
                        fix="fill in both for a model with sliding-window layers, neither "
                            "without")
    tokens = got["kv_window_tokens"]
    return {"kv_window_bytes_per_token": got["kv_window_bytes_per_token"],
            "kv_window_tokens": None if tokens is None else int(tokens)}


def stale_hybrid_cards(cards: dict[str, ModelCard], models: set[str]) -> list[str]:
    """One line per card of a measured model that says nothing of recurrent layers where the
    bundled card of that name does: a data/models.csv copied from the bundled cards before
    the ``recurrent_layers`` column (``card add`` copies them) fits a hybrid as a
    transformer, without its engine's hybrid fixed cost.

    >>> from ddtree_bayes.core.paths import bundled
    >>> import dataclasses
    >>> cards = load_model_cards(bundled("models.csv"))
    >>> old = {**cards, "qwen3.8-27b": dataclasses.replace(cards["qwen3.8-27b"],
    ...                                                    recurrent_layers=None)}
    >>> print(stale_hybrid_cards(old, {"qwen3.8-27b", "kimi-k2.6"})[0][:90])
    the model card of qwen3.8-27b here has no recurrent_layers where the built-in card says 48
    >>> stale_hybrid_cards(cards, {"qwen3.8-27b"})
    []
    """
    from ddtree_bayes.core.paths import bundled

    built_in = load_model_cards(bundled("models.csv"))
    return [f"the model card of {name} here has no recurrent_layers where the built-in card "
            f"says {built_in[name].recurrent_layers}: it is fitted as a transformer, without "
            "its engine's fixed cost for a hybrid target (fix: write "
            f"{built_in[name].recurrent_layers} in its recurrent_layers column of "
            "data/models.csv)"
            for name in sorted(models)
            if name in cards and name in built_in and built_in[name].recurrent
            and not cards[name].recurrent]


def stored_card(model: dict, name: str | None = None) -> ModelCard | None:
    """The card of model ``name`` in a fit's model metadata (``fit.meta["model"]``): its entry
    among the cards a fit of several models stores, else the fit's own card; None when the
    fit stores neither (one reader for every step that needs the card of a query's model).

    >>> own = {"model": "a", "params_total_b": 8, "params_active_b": 8, "layers": 32,
    ...        "experts": None, "experts_topk": None, "bytes_per_weight": 2.0,
    ...        "compute_dtype": "bf16", "source": "s"}
    >>> meta = {"card": own, "model_cards": {"b": dict(own, model="b", layers=40)}}
    >>> stored_card(meta, "b").layers, stored_card(meta, "c").model, stored_card(meta).model
    (40, 'a', 'a')
    >>> stored_card({}, "b") is None
    True
    """
    cards = model.get("model_cards") or {}
    card = cards[name] if name in cards else model.get("card")
    return ModelCard(**card) if card else None


def required_card(model: dict, name: str | None = None) -> ModelCard:
    """:func:`stored_card` for a step that cannot be priced without it (the roofline form,
    a drafter pass): a fit that stores none (a structured fit of the linear or power MoE
    form before 2026-12-03 stored none) cannot answer, an
    :class:`~ddtree_bayes.core.errors.ArtifactError` (it was an internal ``KeyError``)."""
    card = stored_card(model, name)
    if card is None:
        from ddtree_bayes.core.errors import ArtifactError

        raise ArtifactError(f"the fit stores no model card for {name or 'its model'}, which "
                            "this question needs: an older ddtree-bayes wrote it, or it was "
                            "edited (fix: re-run `ddtree-bayes fit`)")
    return card


def _optional_int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _below_int8_mma(hardware: dict[str, str]) -> bool:
    """An NVIDIA GPU (numeric compute capability) older than Turing: no int8 tensor cores.

    >>> _below_int8_mma({"compute_capability": "7.0"}), _below_int8_mma({"compute_capability": "8.6"})
    (True, False)
    >>> _below_int8_mma({"compute_capability": "gfx942"})
    False
    """
    try:
        return float(hardware.get("compute_capability", "")) < INT8_MMA_MIN_CC
    except ValueError:
        return False


def peak_tflops(hardware: dict[str, str], dtype: str) -> tuple[float, str]:
    """Dense peak TFLOPS of one GPU for ``dtype`` and how it was found.

    The table's own entry if present; else derived from another precision's entry by the
    Hopper/Blackwell ratios (bf16 : fp8 : fp4 = 1 : 2 : 4); else bandwidth x
    :data:`FALLBACK_RIDGE_FLOP_PER_BYTE`. The last two are said in the returned text.

    >>> peak_tflops({"hardware": "x", "mem_bw_tb_s": "2", "dense_fp4_tflops": "2000"}, "bf16")
    (500.0, 'x: bf16 peak derived from fp4 2000 TFLOPS / 4')
    >>> peak_tflops({"hardware": "x", "dense_fp4_tflops": "2000"}, "int8")[0]
    1000.0
    >>> peak_tflops({"hardware": "v", "compute_capability": "7.0",
    ...              "dense_bf16_tflops": "112"}, "int8")[0]   # Volta: dp4a
    56.0
    >>> peak_tflops({"hardware": "a100", "compute_capability": "8.0",
    ...              "dense_bf16_tflops": "312"}, "fp8")   # Ampere: no fp8 tensor cores
    ... # doctest: +ELLIPSIS
    (312.0, 'a100: no fp8 tensor cores on 8.0 (fp8 needs CC 8.9 or above), so fp8 computes ...')
    >>> peak_tflops({"hardware": "h100", "compute_capability": "9.0",
    ...              "dense_bf16_tflops": "989", "dense_fp8_tflops": "1979"}, "fp4")[0]
    1979.0
    """
    name = hardware.get("hardware", "?")

    def entry(p: str) -> float | None:
        raw = hardware.get(f"dense_{p}_tflops", "")
        try:
            value = float(raw)
        except ValueError:
            return None
        return value if math.isfinite(value) and value > 0 else None

    lacks = precisions_without_mma(hardware.get("compute_capability", ""))
    if dtype in ("fp8", "fp4") and dtype in lacks:
        # no tensor cores for it: its weights are widened to the fastest precision the GPU
        # multiplies (fp4 on Ada/Hopper runs as fp8; fp8 or fp4 on Ampere and older as bf16)
        wider = "fp8" if dtype == "fp4" and "fp8" not in lacks else "bf16"
        rate, how = peak_tflops(hardware, wider)
        cc = hardware.get("compute_capability", "").strip()
        return rate, (f"{name}: no {dtype} tensor cores on {cc} ({needs(dtype, cc)}), so "
                       f"{dtype} computes at the {wider} rate ({how.removeprefix(name + ': ')})")
    own = entry(dtype)
    if own is not None:
        return own, f"{name}: {dtype} peak {own:g} TFLOPS from the hardware table"
    half_rate = entry("bf16")
    if dtype == "int8" and half_rate is not None and _below_int8_mma(hardware):
        return half_rate / 2, (f"{name}: int8 peak derived from bf16 {half_rate:g} TFLOPS / 2 "
                               f"(dp4a: no int8 tensor cores below CC {INT8_MMA_MIN_CC:g})")
    for other, ratio in PRECISIONS.items():
        if other == "int8":   # int8 : bf16 is 2 on datacenter parts, 4 on GeForce: no source
            continue
        value = entry(other)
        if value is not None:
            derived = value * PRECISIONS[dtype] / ratio
            op = f"/ {ratio / PRECISIONS[dtype]:g}" if ratio > PRECISIONS[dtype] else \
                f"x {PRECISIONS[dtype] / ratio:g}"
            return derived, f"{name}: {dtype} peak derived from {other} {value:g} TFLOPS {op}"
    bandwidth = float(hardware.get("mem_bw_tb_s") or "nan")
    if not math.isfinite(bandwidth) or bandwidth <= 0:
        raise DataError(f"no peak FLOPs and no bandwidth for {name}", column="dense_bf16_tflops",
                        fix="fill in dense_bf16_tflops (or mem_bw_tb_s) in data/hardware.csv")
    guess = bandwidth * FALLBACK_RIDGE_FLOP_PER_BYTE
    return guess, (f"{name}: {NO_PEAK}; assumed {guess:g} TFLOPS = bandwidth x "
                   f"{FALLBACK_RIDGE_FLOP_PER_BYTE:g} FLOP/B (prior-driven)")


def flop_ms_per_token(card: ModelCard, hardware: dict[str, str], gpus: int) -> tuple[float, str]:
    """Milliseconds one verified token's FLOPs take at the system's full dense peak.

    >>> card = ModelCard("m", 8, 8, 32, None, None, 2, "bf16", "s")
    >>> round(flop_ms_per_token(card, {"hardware": "h", "dense_bf16_tflops": "1000"}, 1)[0], 6)
    0.016
    """
    peak, how = peak_tflops(hardware, card.compute_dtype)
    return card.flops_per_token / (peak * 1e12 * gpus) * 1e3, how

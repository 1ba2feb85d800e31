"""A model as a list of weight tensors, whatever file it was read from.

Both readers (``hf_config``: the shapes a config.json implies; ``gguf_file``: the tensor list a
GGUF header holds) produce :class:`Tensor` entries; everything a card needs is summed from
them: total and active parameters (a routed expert counts ``top_k / experts`` of itself per
token), and bytes per weight from each tensor's storage (see ``quant``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: What a tensor is, for counting and for deciding what a quantiser touches.
KINDS = ("embedding", "lm_head", "attention", "linear_attention", "mlp", "router", "expert",
         "shared_expert", "norm", "other")


@dataclass(frozen=True)
class Tensor:
    """One weight (``count`` identical copies, e.g. the 256 experts of a layer).

    ``name`` follows the checkpoint's module names (``model.layers.3.mlp.experts.*.gate_proj``
    for Hugging Face, ``blk.3.ffn_gate_exps`` for GGUF); ``shape`` is (out, in) for a linear
    weight. ``linear`` marks a weight a checkpoint quantiser may pack; ``active`` is the share
    of the tensor one token uses (top_k / experts for routed experts, else 1). ``nbytes`` is
    its stored size when the file says (GGUF), else None (computed by ``quant``).
    """

    name: str
    shape: tuple[int, ...]
    kind: str
    linear: bool = False
    count: int = 1
    active: float = 1.0
    mtp: bool = False
    nbytes: int | None = None
    storage: str = ""

    @property
    def params(self) -> int:
        return math.prod(self.shape) * self.count


@dataclass
class ModelShape:
    """What a reader found: the tensors and the architecture facts a card reports."""

    architecture: str
    tensors: list[Tensor]
    layers: int
    hidden_size: int
    vocab_size: int
    heads: int | None = None
    kv_heads: int | None = None
    #: the query heads tensor parallelism shards (``num_attention_heads``, a GGUF's uniform
    #: ``head_count``); None when a file gives them per layer, unequal
    q_heads: int | None = None
    head_dim: int | None = None
    experts: int | None = None
    experts_topk: int | None = None
    shared_experts: int = 0
    tied_embeddings: bool = False
    attention: str = ""
    kv_bytes_per_token: int | None = None
    kv_formula: str = ""
    #: sliding-window layers' cache: bytes per token and the window (None without such layers)
    kv_window_bytes_per_token: int | None = None
    kv_window_tokens: int | None = None
    mtp_layers: int = 0
    intermediate_size: int | None = None
    #: the longest context the model takes (config ``max_position_embeddings``, GGUF
    #: ``<arch>.context_length``); None when the file does not say
    max_context_tokens: int | None = None
    #: layers with a recurrent state instead of a KV cache (Gated DeltaNet); 0 for a transformer
    recurrent_layers: int = 0
    notes: list[str] = field(default_factory=list)

    def total(self, *, mtp: bool = False) -> int:
        """Parameters of the main model (``mtp=True``: of its multi-token-prediction layers)."""
        return sum(t.params for t in self.tensors if t.mtp == mtp)

    def active(self, *, mtp: bool = False) -> float:
        """Parameters one token's forward pass uses: routed experts at top_k / experts."""
        return sum(t.params * t.active for t in self.tensors if t.mtp == mtp)

    def by_kind(self, kind: str) -> int:
        return sum(t.params for t in self.tensors if t.kind == kind and not t.mtp)

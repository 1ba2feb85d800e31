"""A read model -> the rows ``card add`` writes: a model card (data/models.csv) and, where the
file says so, drafter cards (data/drafters.csv): an EAGLE-3 head's own config, or the MTP
layers a target config declares (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from ddtree_bayes.core.data import MIN_BYTES_PER_WEIGHT, NAME_RE
from ddtree_bayes.core.errors import InputError
from ddtree_bayes.workflows.card_files.quant import KvCache, Scheme, dtype_bytes, weight_bytes
from ddtree_bayes.workflows.card_files.shapes import ModelShape, Tensor

#: data/drafters.csv, shared with the drafter-card collection (one row per drafter).
DRAFTER_HEADER = ("drafter", "target_model", "method", "kind", "layers", "hidden_size",
                  "intermediate_size", "params_b", "params_active_b", "lm_head_params_b",
                  "shares_lm_head", "shares_embeddings", "draft_vocab", "bytes_per_weight",
                  "sweeps", "source", "derived", "notes", "default", "block_size")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_label(path: Path) -> str:
    """``<folder>/<file>`` (the folder usually names the model), else the file name."""
    folder = path.resolve().parent.name
    return f"{folder}/{path.name}" if folder else path.name


def card_name(text: str, flag: str = "--name", *, given: bool = False) -> str:
    """A card name: lowercase, spaces and slashes as '-' (``Meta-Llama-3.1-8B`` ->
    ``meta-llama-3.1-8b``) for a name taken from a file; a name ``given`` with ``flag`` must
    be one already (as ``hardware add`` takes a GPU's): ``--name "Foo"`` was written as
    ``foo`` without a word.

    >>> card_name("Qwen/Qwen3-30B-A3B"), card_name("DeepSeek V3 Q4_K_M")
    ('qwen3-30b-a3b', 'deepseek-v3-q4_k_m')
    >>> card_name("Foo x8", given=True)
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.InputError: --name 'Foo x8' is not a card name (lowercase \
letters, digits and . _ + -) (fix: give --name foo-x8)
    """
    name = re.sub(r"[\s]+", "-", text.strip().split("/")[-1].lower())
    if not NAME_RE.fullmatch(name):
        raise InputError(f"{text!r} cannot be a card name", fix=f"give {flag} NAME (lowercase "
                         "letters, digits and . _ + -)")
    if given and name != text:
        raise InputError(f"{flag} {text!r} is not a card name (lowercase letters, digits and "
                         ". _ + -)", fix=f"give {flag} {name}")
    return name


def _b(params: float) -> str:
    """Billions with 4 decimals, trailing zeros dropped (``8.0303``)."""
    return f"{params / 1e9:.4f}".rstrip("0").rstrip(".")


def _bpw(value: float) -> str:
    """A bytes per weight as a card's cell: 4 decimals, or 6 where 4 would round it below the
    floor the written row is held to (core/data ``MIN_BYTES_PER_WEIGHT``, Q1_0's 0.140625:
    written 0.1406, the card was refused as "fewer than any quantisation stores").

    >>> _bpw(0.58203125), _bpw(2.0), _bpw(0.140625), _bpw(0.14064)
    ('0.582', '2', '0.140625', '0.14064')
    """
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    if float(text) < MIN_BYTES_PER_WEIGHT <= value:
        text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text


@dataclass
class Derived:
    """What card add derived from one file: the rows and the figures behind them."""

    card: dict[str, str]
    drafters: list[dict[str, str]]
    facts: dict
    lines: list[str] = field(default_factory=list)
    #: what card add could not read and says in one line (stderr; the JSON's ``warnings``)
    warnings: list[str] = field(default_factory=list)


def model_card(name: str, shape: ModelShape, scheme: Scheme, source: str, *,
               compute_dtype: str | None = None, bytes_per_weight: float | None = None,
               kv: KvCache | None = None) -> Derived:
    """The model-card row of ``shape`` stored as ``scheme`` (overrides as given); ``kv``: the
    KV cache the checkpoint declares (:func:`~ddtree_bayes.workflows.card_files.quant.
    kv_cache_from_config`), whose bits scale the shape's 16-bit cache."""
    wb = weight_bytes(shape, scheme)
    bits = kv.bits if kv is not None else None
    kv_bytes, kv_window, kv_formula = (shape.kv_bytes_per_token,
                                       shape.kv_window_bytes_per_token, shape.kv_formula)
    if bits is not None:   # (the shapes count 2 bytes a value: a whole number of bytes at 8 bits)
        kv_bytes = None if kv_bytes is None else int(kv_bytes * bits) // 16
        kv_window = None if kv_window is None else int(kv_window * bits) // 16
        kv_formula = kv_formula and f"{kv_formula} x {bits:g}/16"
    dtype = compute_dtype or scheme.compute_dtype
    embed, head = shape.by_kind("embedding"), shape.by_kind("lm_head")
    # an untied input embedding: counted among the active parameters (as published totals
    # count it), but a token reads one row of it; tied, it is the LM head, read whole
    unread = [] if shape.tied_embeddings else [
        t for t in shape.tensors if t.kind == "embedding" and not t.mtp]
    unread_params = sum(t.params * t.active for t in unread)
    read_params = wb.active_params - unread_params
    read_bytes = wb.active_bytes - sum(scheme.nbytes(t) * t.count * t.active for t in unread)
    bpw = bytes_per_weight if bytes_per_weight is not None else read_bytes / read_params
    moe = bool(shape.experts)
    how = (f"DERIVED by `ddtree-bayes card add` from the tensor shapes: total {wb.total_params:,} "
           f"parameters (input embedding {embed:,}, "
           + (f"lm_head {head:,}" if head else "lm_head tied to the embedding")
           + f", {shape.layers} layers); active {wb.active_params:,.0f} = every weight a token "
           "uses" + (f", routed experts at {shape.experts_topk}/{shape.experts}" if moe else "")
           + ", the input embedding counted whole (as most published totals count it; "
           "some, such as gpt-oss's model card and DeepSeek's and Kimi's activated counts, "
           "leave it out of active); "
           + ("embed_params_b 0: the embedding is tied to the lm_head, which every token reads "
              "whole" if shape.tied_embeddings else
              f"embed_params_b {_b(unread_params)}: the untied input embedding, of which a token "
              f"reads one row, so a step reads and multiplies {read_params:,.0f} of them"))
    quant = (f"bytes_per_weight {_bpw(bpw)} GIVEN by the user (--bytes-per-weight) for every "
             f"weight of the file: {scheme.unread}, which card add does not read"
             if scheme.unread else
             f"bytes_per_weight given by --bytes-per-weight ({_bpw(bpw)}); the file's own "
             f"average {_bpw(wb.file_average)}" if bytes_per_weight is not None else
             f"DERIVED: bytes_per_weight {_bpw(bpw)} = {scheme.label}, averaged over the "
             f"weights a token reads ({read_bytes:,.0f} bytes: the active weights"
             + ("" if shape.tied_embeddings else " less the untied input embedding")
             + f"; the whole file: {_bpw(wb.file_average)} B/weight)")
    notes = [how, quant]
    if kv_formula:
        notes.append(f"DERIVED: kv = {kv_formula}")
    if kv is not None and bits is not None:
        notes.append(
            f"DERIVED: kv_cache_bits {bits:g}, the KV cache the checkpoint declares "
            f"(quantization_config {kv.label}): the 16-bit cache's bytes per token "
            f"x {bits:g}/16{' (the sliding-window layers too)' if kv_window else ''}. vLLM's "
            "and SGLang's --kv-cache-dtype auto follow a modelopt checkpoint's declaration; "
            "predict --kv-cache bf16 prices a launch that keeps a 16-bit cache")
    if kv is not None and kv.said:   # (at 8 bits too: a field it does not read)
        notes.append(kv.said)
    notes += shape.notes + scheme.notes
    if shape.mtp_layers:
        notes.append(f"{shape.mtp_layers} MTP layer(s) not counted here (see data/drafters.csv)")
    card = {
        "model": name, "params_total_b": _b(wb.total_params),
        "params_active_b": _b(wb.active_params), "layers": str(shape.layers),
        "hidden_size": str(shape.hidden_size),
        "experts": str(shape.experts) if moe else "",
        "experts_topk": str(shape.experts_topk) if moe else "",
        "shared_experts": str(shape.shared_experts) if moe else "",
        "bytes_per_weight": _bpw(bpw), "compute_dtype": dtype,
        "kv_bytes_per_token": "" if kv_bytes is None else str(kv_bytes),
        "attention": shape.attention, "source": source, "notes": "; ".join(notes),
        # what the weights take in memory (the weights-fit checks); blank when the user gave
        # the bytes per weight, which then stand for every weight
        "file_bytes_per_weight": "" if bytes_per_weight is not None or scheme.unread
        else _bpw(wb.file_average),
        "kv_window_bytes_per_token": "" if kv_window is None else str(kv_window),
        "kv_window_tokens": "" if shape.kv_window_tokens is None else str(shape.kv_window_tokens),
        "max_context_tokens": "" if shape.max_context_tokens is None
        else str(shape.max_context_tokens),
        "recurrent_layers": str(shape.recurrent_layers) if shape.recurrent_layers else "",
        # KV heads of a full-attention layer (an MLA latent: 1), how tensor parallelism splits
        # the cache each step reads (the context cost's prior, core/context_cost.py)
        "kv_heads": str(shape.kv_heads) if shape.kv_heads else "",
        # query heads of a full-attention layer, which tensor parallelism shards evenly (a
        # GPU count that does not divide them is warned of: scenario.tensor_parallel_warning)
        "q_heads": str(shape.q_heads) if shape.q_heads else "",
        # the bits a value of kv_bytes_per_token takes: the cache the checkpoint declares;
        # blank when it declares none (bf16's 16 is taken)
        "kv_cache_bits": "" if bits is None else f"{bits:g}",
        # the input embedding a token reads one row of (untied), subtracted from the weights
        # a step reads and from its FLOPs; 0 when tied to the lm_head (read whole)
        "embed_params_b": "0" if shape.tied_embeddings else _b(unread_params)}
    facts = {"architecture": shape.architecture, "params_total": wb.total_params,
             "params_active": round(wb.active_params), "embedding_params": embed,
             "lm_head_params": head, "tied_embeddings": shape.tied_embeddings,
             "layers": shape.layers, "hidden_size": shape.hidden_size,
             "vocab_size": shape.vocab_size, "experts": shape.experts,
             "experts_topk": shape.experts_topk, "shared_experts": shape.shared_experts,
             "attention": shape.attention, "kv_bytes_per_token": kv_bytes,
             "kv_formula": kv_formula, "kv_cache_bits": bits, "storage": scheme.label,
             "bytes_per_weight": round(bpw, 6), "file_bytes_per_weight": round(wb.file_average, 6),
             "read_params": round(read_params), "read_bytes": round(read_bytes),
             "compute_dtype": dtype, "mtp_layers": shape.mtp_layers,
             "max_context_tokens": shape.max_context_tokens,
             "recurrent_layers": shape.recurrent_layers, "kv_heads": shape.kv_heads,
             "q_heads": shape.q_heads}
    drafters = [mtp_drafter(name, shape, scheme, source)] if shape.mtp_layers else []
    return Derived(card, drafters, facts,
                   warnings=[kv.said] if kv is not None and kv.said else [])


def mtp_drafter(name: str, shape: ModelShape, scheme: Scheme, source: str) -> dict[str, str]:
    """The drafter row of a target's own MTP layers (they share its embedding and lm_head)."""
    wb = weight_bytes(shape, scheme, mtp=True)
    head = shape.hidden_size * shape.vocab_size
    return {"drafter": f"{name}-mtp", "target_model": name, "method": "mtp", "kind": "mtp_module",
            "layers": str(shape.mtp_layers), "hidden_size": str(shape.hidden_size),
            "intermediate_size": "" if shape.intermediate_size is None
            else str(shape.intermediate_size),
            "params_b": _b(wb.total_params), "params_active_b": _b(wb.active_params),
            "lm_head_params_b": _b(head), "shares_lm_head": "yes",
            "shares_embeddings": "yes", "draft_vocab": str(shape.vocab_size),
            "bytes_per_weight": _bpw(wb.file_average), "sweeps": "", "source": source,
            "derived": "params_b, params_active_b, lm_head_params_b, bytes_per_weight",
            "notes": (f"the target's {shape.mtp_layers} multi-token-prediction layer(s) as its "
                      f"config declares them; params_b counts their own {wb.total_params:,} "
                      "weights (one decoder layer each plus its projection and norms; the "
                      "embedding and lm_head are the target's), params_active_b what one token "
                      f"uses ({wb.active_params:,.0f}: routed experts at top_k / experts), "
                      f"lm_head_params_b the target's head it projects through ({shape.hidden_size}"
                      f" x {shape.vocab_size}); {scheme.label}")}


def draft_model_drafter(name: str, target: str, shape: ModelShape, scheme: Scheme, source: str,
                        bytes_per_weight: float | None = None) -> Derived:
    """A separate draft model (vLLM / SGLang draft-model speculation, llama.cpp
    ``--model-draft``): a whole small language model with its own embedding and head. One
    pass reads every decoder layer and the head; of an untied input embedding only a row, so
    it is not counted (tied, the embedding is the head and is read once). ``bytes_per_weight``
    (``--bytes-per-weight``) stands for every weight, as on a model card."""
    wb = weight_bytes(shape, scheme)
    embedding = [t for t in shape.tensors if t.kind == "embedding" and not t.mtp]
    skip = [] if shape.tied_embeddings else embedding
    params = wb.active_params - sum(t.params * t.active for t in skip)
    nbytes = wb.active_bytes - sum(scheme.nbytes(t) * t.count * t.active for t in skip)
    bpw = bytes_per_weight if bytes_per_weight is not None else nbytes / params
    head = shape.by_kind("lm_head") or shape.by_kind("embedding")
    row = {"drafter": name, "target_model": target, "method": "draft-model",
           "kind": "draft_model", "layers": str(shape.layers),
           "hidden_size": str(shape.hidden_size),
           "intermediate_size": "" if shape.intermediate_size is None
           else str(shape.intermediate_size),
           "params_b": _b(wb.total_params), "params_active_b": _b(params),
           "lm_head_params_b": _b(head), "shares_lm_head": "no",
           "shares_embeddings": "no", "draft_vocab": str(shape.vocab_size),
           "bytes_per_weight": _bpw(bpw), "sweeps": "", "source": source,
           "derived": "params_b, params_active_b, lm_head_params_b"
                      + ("" if bytes_per_weight is not None else ", bytes_per_weight"),
           "notes": (f"a separate draft model ({shape.architecture}, {shape.layers} layers, "
                     f"hidden {shape.hidden_size}, vocabulary {shape.vocab_size}); params_b "
                     f"counts its {wb.total_params:,} weights, params_active_b what one pass "
                     f"reads ({params:,.0f}: the decoder layers and its own head"
                     + (", tied to its embedding" if shape.tied_embeddings else
                        "; its untied input embedding not counted: a token reads one row "
                        "of it") + "); "
                     + ("bytes_per_weight given by --bytes-per-weight" if bytes_per_weight
                        is not None else scheme.label))}
    facts = {"architecture": "draft_model", "model_architecture": shape.architecture,
             "params": wb.total_params, "pass_params": round(params), "layers": shape.layers,
             "hidden_size": shape.hidden_size, "vocab_size": shape.vocab_size,
             "tied_embeddings": shape.tied_embeddings, "bytes_per_weight": round(bpw, 6)}
    return Derived({}, [row], facts)


def is_eagle3(cfg: dict) -> bool:
    archs = " ".join(cfg.get("architectures") or [])
    return ("Eagle3" in archs or "draft_vocab_size" in cfg
            or cfg.get("speculators_model_type") == "eagle3")


def eagle3_drafter(name: str, target: str, cfg: dict, source: str,
                   bytes_per_weight: float | None = None) -> Derived:
    """An EAGLE-3 head (sgl-project/SpecForge ``LlamaForCausalLMEagle3``): ``fc`` fuses three
    target hidden states (3 x target_hidden -> hidden); each decoder layer's q/k/v read the
    embedding and the hidden state concatenated (2 x hidden); its own lm_head over the draft
    vocabulary; the embedding is the target's. A dtype card add does not know takes
    ``bytes_per_weight`` (``--bytes-per-weight``), as a model's does."""
    from ddtree_bayes.workflows.card_files.hf_config import HFConfig

    layer = cfg.get("transformer_layer_config")
    if isinstance(layer, dict):   # vLLM speculators' format: the head's layer nested
        cfg = {**layer, **{k: v for k, v in cfg.items() if k != "transformer_layer_config"
                           and v is not None}}
    c = HFConfig(cfg, source)
    hidden, inter, layers = c.whole("hidden_size"), c.whole("intermediate_size"), c.whole("num_hidden_layers")
    heads = c.whole("num_attention_heads")
    kv_heads = c.whole("num_key_value_heads", heads)
    head_dim = c.whole("head_dim") if cfg.get("head_dim") else hidden // heads
    target_hidden = c.whole("target_hidden_size", hidden) if cfg.get("target_hidden_size") else hidden
    vocab, draft_vocab = c.whole("vocab_size"), c.whole("draft_vocab_size", c.whole("vocab_size"))
    per_layer = [Tensor("q_proj", (heads * head_dim, 2 * hidden), "attention", True),
                 Tensor("k_proj", (kv_heads * head_dim, 2 * hidden), "attention", True),
                 Tensor("v_proj", (kv_heads * head_dim, 2 * hidden), "attention", True),
                 Tensor("o_proj", (hidden, heads * head_dim), "attention", True),
                 Tensor("gate_proj", (inter, hidden), "mlp", True),
                 Tensor("up_proj", (inter, hidden), "mlp", True),
                 Tensor("down_proj", (hidden, inter), "mlp", True),
                 Tensor("hidden_norm", (hidden,), "norm"),
                 Tensor("input_layernorm", (hidden,), "norm"),
                 Tensor("post_attention_layernorm", (hidden,), "norm")]
    own = [Tensor("fc", (hidden, 3 * target_hidden), "other", True),
           *[Tensor(t.name, t.shape, t.kind, t.linear, count=layers) for t in per_layer],
           Tensor("norm", (hidden,), "norm"), Tensor("lm_head", (draft_vocab, hidden), "lm_head")]
    params = sum(t.params for t in own)
    size, dname = dtype_bytes(cfg, source, bytes_per_weight)
    row = {"drafter": name, "target_model": target, "method": "eagle3", "kind": "eagle3_head",
           "layers": str(layers), "hidden_size": str(hidden), "intermediate_size": str(inter),
           "params_b": _b(params), "params_active_b": _b(params),
           "lm_head_params_b": _b(draft_vocab * hidden), "shares_lm_head": "no",
           "shares_embeddings": "yes", "draft_vocab": str(draft_vocab),
           "bytes_per_weight": _bpw(size), "sweeps": "", "source": source,
           "derived": "params_b, params_active_b, lm_head_params_b",
           "notes": (f"EAGLE-3 head: fc {3 * target_hidden}->{hidden}, {layers} decoder layer(s) "
                     f"with q/k/v over 2 x {hidden} inputs, MLP {inter}, own lm_head over "
                     f"{draft_vocab} draft tokens (of the target's {vocab}); params_b counts "
                     f"its own {params:,} weights, not the target's embedding it reads; "
                     f"{dname} weights")}
    facts = {"architecture": "eagle3", "params": params, "layers": layers, "hidden_size": hidden,
             "intermediate_size": inter, "draft_vocab": draft_vocab, "vocab_size": vocab,
             "target_hidden_size": target_hidden, "bytes_per_weight": size}
    return Derived({}, [row], facts)

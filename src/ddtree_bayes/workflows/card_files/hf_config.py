"""A Hugging Face ``config.json`` -> the weight tensors its architecture implies.

Supported families (``model_type``): Llama / Mistral, Qwen2 / Qwen3 (dense and MoE, with or
without a shared expert), Qwen3-Next and Qwen3.5 (Gated DeltaNet + gated full attention),
DeepSeek-V2 / V3 and Kimi K2 (multi-head latent attention, routed + shared experts, MTP
layers), DeepSeek-V3.2 (``deepseek_v32``: V3 plus the lightning indexer of DeepSeek Sparse
Attention), GLM-4.5 / 4.6 (``glm4_moe``: GQA with DeepSeek-style routed + shared experts),
Phi-3 / 3.5 / 4 (``phi3``: fused qkv and gate/up projections), Mixtral, MiniMax-M2
(``minimax_m2``: GQA with q/k norms over all heads, sigmoid-routed experts), Llama 4
(``llama4``'s ``llama4_text``: routed + shared experts on ``moe_layers``, dense MLPs between,
chunked attention on the RoPE layers), Gemma 3
(sliding-window + full attention, a multimodal config's language model) and gpt-oss (MoE
with attention sinks, sliding-window + full attention). The shapes follow the families'
modeling code in huggingface/transformers (``models/<family>/modeling_<family>.py``); every
count is the product of config fields, so a card's numbers can be checked by hand
(tests/test_cards.py does, against published totals).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ddtree_bayes.core import per_call
from ddtree_bayes.core.errors import InputError
from ddtree_bayes.core.model_cards import card_context
from ddtree_bayes.workflows.card_files.shapes import ModelShape, Tensor

LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3"}
QWEN_MOE = {"qwen2_moe", "qwen3_moe"}
HYBRID = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"}
MLA = {"deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32"}
#: Families whose attention layers carry DeepSeek Sparse Attention's lightning indexer.
INDEXER = {"deepseek_v32"}
#: GLM-4.5 / 4.6 (transformers models/glm4_moe): GQA attention (q/k/v bias with
#: attention_bias, o_proj never; a q/k RMSNorm with use_qk_norm) and DeepSeek's MoE fields.
GLM_MOE = {"glm4_moe"}
#: Families whose MoE is DeepSeek's: n_routed_experts + n_shared_experts experts of
#: moe_intermediate_size, a sigmoid router, dense MLPs in the first_k_dense_replace layers.
ROUTED_SHARED = MLA | GLM_MOE
#: Families storing q, k, v as one ``qkv_proj`` and gate, up as one ``gate_up_proj``, with no
#: biases (transformers ``Phi3Attention`` / ``Phi3MLP``): Phi-3, Phi-3.5, Phi-4.
FUSED = {"phi3"}
#: Families with sliding-window layers beside full-attention ones (``layer_types``).
SLIDING = {"gemma3_text", "gpt_oss"}
#: Families whose every layer is MoE, the experts ``num_local_experts`` of
#: ``intermediate_size`` (no dense MLP, no shared expert).
ALL_MOE = {"mixtral", "gpt_oss", "minimax_m2"}
#: Llama 4 (transformers models/llama4): chunked attention on its RoPE layers.
LLAMA4 = {"llama4_text"}
SUPPORTED = sorted(LLAMA_LIKE | QWEN_MOE | HYBRID | ROUTED_SHARED | SLIDING | FUSED | ALL_MOE
                   | LLAMA4 | {"gemma3"})
#: Families whose every layer would slide with a ``sliding_window`` below the context
#: (transformers' Mistral, Mixtral, Qwen2 / Qwen3 dense and MoE attention take the config's
#: window): refused by :func:`window_checks`, as a card cannot hold the window. Mixtral and
#: the Qwen MoE were read as full attention whatever their window said.
WINDOWED = LLAMA_LIKE | QWEN_MOE | {"mixtral"}
#: The Qwen families whose window is on only with ``use_sliding_window`` true.
QWEN_WINDOW = {"qwen2", "qwen3"} | QWEN_MOE
#: Families whose q, k and v projections always carry a bias.
QKV_BIAS = {"qwen2", "qwen2_moe"}
#: Families with a per-head RMSNorm on q and k.
QK_NORM = {"qwen3", "qwen3_moe", "gemma3_text"} | HYBRID
#: The fields a family's config.json may leave out, at the defaults its transformers
#: configuration class gives them (a config leaving a size out is read at that size, as
#: transformers reads it). Gemma 3: ``Gemma3TextConfig`` (huggingface/transformers
#: models/gemma3/configuration_gemma3.py); google/gemma-3-4b-it's config.json gives neither
#: its heads nor its vocabulary. gpt-oss: ``GptOssConfig`` (its window, its layer pattern).
FAMILY_DEFAULTS: dict[str, dict] = {
    "gemma3_text": {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
                    "num_hidden_layers": 26, "num_attention_heads": 8,
                    "num_key_value_heads": 4, "head_dim": 256, "tie_word_embeddings": True,
                    "sliding_window": 4096, "sliding_window_pattern": 6,
                    "max_position_embeddings": 131_072},
    "gpt_oss": {"sliding_window": 128, "sliding_window_pattern": 2},
    # the head counts and widths whose class default is not what card add falls back to (the
    # query heads; hidden_size / heads): Qwen2Config, Qwen3Config, Qwen2MoeConfig,
    # Qwen3MoeConfig (models/qwen*/configuration_qwen*.py) and MistralConfig
    # (models/mistral/configuration_mistral.py); a multimodal wrapper writes its text_config
    # without the fields equal to these (as google/gemma-3-4b-it's). Qwen2MoeConfig's shared
    # expert of 5632 too (read as none when left out).
    "qwen2": {"num_key_value_heads": 32},
    "qwen3": {"num_key_value_heads": 32, "head_dim": 128},
    "qwen2_moe": {"num_key_value_heads": 16, "shared_expert_intermediate_size": 5632},
    "qwen3_moe": {"num_key_value_heads": 4},
    "mistral": {"num_key_value_heads": 8},
    # Qwen3NextConfig (models/qwen3_next/configuration_qwen3_next.py)
    "qwen3_next": {"num_key_value_heads": 2, "head_dim": 256,
                   "shared_expert_intermediate_size": 512},
    # Qwen3_5TextConfig, Qwen3_5MoeTextConfig (models/qwen3_5, qwen3_5_moe): sub-configs,
    # written without the fields equal to these
    "qwen3_5_text": {"num_key_value_heads": 4, "head_dim": 256},
    "qwen3_5_moe_text": {"num_key_value_heads": 2, "head_dim": 256,
                         "shared_expert_intermediate_size": 512},
    # MLA: a query LoRA of 1536, in transformers' DeepseekV3Config and DeepSeek's own
    # configuration_deepseek.py alike (null: none, as DeepSeek-V2-Lite writes it). Their
    # n_shared_experts and first_k_dense_replace differ (1 and 3; none and 0), so a config
    # leaving those out is refused (moe_layer, feed_forward), as glm4_moe's is.
    **{family: {"q_lora_rank": 1536} for family in sorted(MLA)},
}
#: Fields whose null is not "left out": a null num_key_value_heads is read as the query heads
#: by the classes above (their backward-compatible MHA), not at the class default.
NULL_IS_NOT_LEFT_OUT = ("num_key_value_heads", "q_lora_rank")


def read_config(path: str | Path) -> tuple[dict, Path]:
    """The parsed config.json at ``path`` (a file, or a folder holding one) and its path."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise InputError("no config.json there", file=str(path),
                         fix="pass a model's config.json, or the folder that holds it")
    try:
        # (a BOM some editors add; the bytes the CLI's check read: once, core/per_call.py)
        cfg = json.loads(per_call.read_text(path, encoding="utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"not a JSON config: {err}", file=str(path),
                         fix="pass the model's config.json as downloaded") from None
    if not isinstance(cfg, dict):
        raise InputError("not a JSON object", file=str(path), fix="pass the model's config.json")
    check_sizes(cfg, str(path))
    return cfg, path


#: Config sizes a model cannot have at 0 (a division by them, or a model of nothing).
POSITIVE_KEYS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                 "vocab_size", "head_dim", "num_key_value_heads", "moe_intermediate_size",
                 "num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok",
                 "decoder_sparse_step", "full_attention_interval", "moe_layer_freq",
                 "draft_vocab_size", "target_hidden_size", "interleave_moe_layer_step",
                 "no_rope_layer_interval")
#: Above this many parameters in one embedding or head the config is not a model's
#: (vocab_size 1e12 made a card of 8.2 trillion parameters).
MAX_VOCAB = 10_000_000


def check_sizes(cfg: dict, where: str) -> None:
    """Refuse sizes no model has, in the config or its ``text_config``: a size of 0 (it
    divided by zero or made an empty model: an internal error before), more key/value heads
    than query heads, a top-k above the expert count, a vocabulary above :data:`MAX_VOCAB`.

    >>> try:
    ...     check_sizes({"num_attention_heads": 0}, "c.json")
    ... except InputError as err:
    ...     print(err)
    c.json: 'num_attention_heads' is 0: a model's sizes are at least 1 (fix: pass the model's own config.json)
    """
    for part in (cfg, cfg.get("text_config")):
        if not isinstance(part, dict):
            continue
        for key in POSITIVE_KEYS:
            value = part.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value < 1:
                raise InputError(f"{key!r} is {value}: a model's sizes are at least 1",
                                 file=where, fix="pass the model's own config.json")
        heads, kv = part.get("num_attention_heads"), part.get("num_key_value_heads")
        if isinstance(heads, int) and isinstance(kv, int) and kv > heads:
            raise InputError(f"{kv} key/value heads but {heads} query heads (each key/value "
                             "head serves one or more query heads)", file=where,
                             fix="pass the model's own config.json")
        topk = part.get("num_experts_per_tok")
        for key in ("num_experts", "num_local_experts", "n_routed_experts"):
            experts = part.get(key)
            if isinstance(topk, int) and isinstance(experts, int) and topk > experts:
                raise InputError(f"'num_experts_per_tok' is {topk} but {key!r} is {experts} "
                                 "(a token is routed to some of the experts, not more than "
                                 "there are)", file=where, fix="pass the model's own config.json")
        for key in ("vocab_size", "draft_vocab_size"):
            value = part.get(key)
            if isinstance(value, int | float) and value > MAX_VOCAB:
                raise InputError(f"{key!r} is {value:g}, more than any model's vocabulary",
                                 file=where, fix="pass the model's own config.json")


def text_config(cfg: dict) -> dict:
    """The language model's fields: a multimodal config's ``text_config`` (with the top-level
    tying and quantisation settings), else the config itself."""
    inner = cfg.get("text_config")
    if not isinstance(inner, dict):
        return cfg
    merged = dict(inner)
    for key in ("tie_word_embeddings", "quantization_config", "torch_dtype", "dtype"):
        if key in cfg and key not in inner:
            merged[key] = cfg[key]
    return merged


def storage_fields(cfg: dict) -> dict:
    """``cfg`` with the fields that say how its weights are stored (``quantization_config``,
    and ``torch_dtype`` / ``dtype``) taken from its ``text_config`` where the top level has
    none: Kimi K2.5 / K2.6 keep their int4 ``quantization_config`` in ``text_config``, which
    was passed over (the checkpoint carded as bf16: 2 B/weight instead of 1.0753). The top
    level wins when both give one, as vLLM reads a config (``hf_config`` first, then its
    ``hf_text_config``). Failing both, a ``compression_config`` (compressed-tensors checkpoints
    of 2024 write their scheme under it: vLLM's ``get_quant_config`` reads it last, "compressed-
    tensors uses a compressions_config"); such a checkpoint was carded at bf16's 2 bytes.

    >>> storage_fields({"text_config": {"quantization_config": {"quant_method": "fp8"}}})[
    ...     "quantization_config"]
    {'quant_method': 'fp8'}
    >>> storage_fields({"dtype": "bfloat16", "text_config": {"torch_dtype": "float32"}})
    ... # doctest: +ELLIPSIS
    {'dtype': 'bfloat16', 'text_config': ...}
    >>> storage_fields({"compression_config": {"quant_method": "compressed-tensors"}})[
    ...     "quantization_config"]
    {'quant_method': 'compressed-tensors'}
    """
    inner = cfg.get("text_config")
    out = dict(cfg)
    if not isinstance(inner, dict):
        inner = {}
    if out.get("quantization_config") is None and inner.get("quantization_config") is not None:
        out["quantization_config"] = inner["quantization_config"]
    if out.get("quantization_config") is None and isinstance(out.get("compression_config"),
                                                              dict):
        out["quantization_config"] = out["compression_config"]
    if not (out.get("torch_dtype") or out.get("dtype")):
        for key in ("torch_dtype", "dtype"):
            if inner.get(key):
                out[key] = inner[key]
    return out


class HFConfig:
    """Typed access to a config's fields; a missing or wrong one is a one-line error."""

    def __init__(self, cfg: dict, where: str) -> None:
        self.cfg, self.where = cfg, where

    def whole(self, key: str, default: int | None = None) -> int:
        value = self.cfg.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            if value is None:
                kind = self.cfg.get("model_type")
                raise InputError(f"no {key!r}", file=self.where,
                                 fix=(f"a {kind} config.json has {key}; " if kind else
                                      f"its {key} is not in this config.json; ")
                                     + "pass the model's own file")
            raise InputError(f"{key!r} is {value!r}, not a whole number", file=self.where,
                             fix="pass the model's own config.json")
        return value

    def optional(self, key: str) -> int | None:
        value = self.cfg.get(key)
        return None if value is None else self.whole(key)

    def flag(self, key: str, default: bool = False) -> bool:
        return config_bool(self.cfg.get(key, default), key, self.where)


def config_bool(value, key: str, where: str) -> bool:
    """A config.json flag: true/false, or the strings "true"/"false" some exporters write
    (``bool("false")`` would read as true); anything else is a one-line error.

    >>> config_bool("False", "tie_word_embeddings", "c.json"), config_bool(True, "k", "c")
    (False, True)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InputError(f"{key!r} is {value!r}, not true or false", file=where,
                     fix="pass the model's own config.json")


def shape_from_config(cfg: dict, where: str) -> ModelShape:
    """The tensors of the model ``cfg`` describes (``where`` names the file in errors)."""
    multimodal = isinstance(cfg.get("vision_config"), dict)
    cfg = text_config(cfg)
    family = str(cfg.get("model_type", ""))
    if family == "gemma3":      # a Gemma 3 config without its text_config: every default
        family = "gemma3_text"
    if family not in SUPPORTED:
        raise InputError(f"model_type {family!r} is not one card add knows "
                         f"({', '.join(SUPPORTED)})", file=where,
                         fix="write the card's row by hand (docs/cli.md, card add) or use a "
                             "GGUF file of the model (--gguf)")
    defaulted = {k: v for k, v in FAMILY_DEFAULTS.get(family, {}).items()
                 if cfg.get(k) is None and not (k in cfg and k in NULL_IS_NOT_LEFT_OUT)}
    cfg = {**cfg, **defaulted}
    if defaulted:   # (a class default may not fit the config's own sizes: 32 kv heads of 16)
        check_sizes(cfg, where)
    c = HFConfig(cfg, where)
    fused_notes = (fused_family_checks(c, where) if family in FUSED else
                   window_checks(c, where) if family in WINDOWED else [])
    if family == "minimax_m2":
        fused_notes = minimax_checks(c, where)
    vocab, hidden, layers = c.whole("vocab_size"), c.whole("hidden_size"), c.whole("num_hidden_layers")
    tied = c.flag("tie_word_embeddings")
    tensors = [Tensor("model.embed_tokens", (vocab, hidden), "embedding")]
    kinds = layer_kinds(cfg, family, layers, where)
    mtp = c.whole("num_nextn_predict_layers", 0) or c.whole("mtp_num_hidden_layers", 0)
    for i in range(layers + mtp):
        is_mtp = i >= layers
        prefix = f"model.layers.{i}"
        block: list[Tensor] = []
        if is_mtp:   # DeepSeek / Qwen3.5 MTP: norms of embedding and hidden state, a projection
            block += [Tensor(f"{prefix}.enorm", (hidden,), "norm"),
                      Tensor(f"{prefix}.hnorm", (hidden,), "norm"),
                      Tensor(f"{prefix}.eh_proj", (hidden, 2 * hidden), "other", linear=True),
                      Tensor(f"{prefix}.shared_head.norm", (hidden,), "norm")]
        kind = "full_attention" if is_mtp else kinds[i]
        block += (linear_attention(c, family, prefix, hidden) if kind == "linear_attention"
                  else attention(c, family, prefix, hidden))
        block += feed_forward(c, family, prefix, hidden, i)
        block += [Tensor(f"{prefix}.input_layernorm", (hidden,), "norm"),
                  Tensor(f"{prefix}.post_attention_layernorm", (hidden,), "norm")]
        if family == "gemma3_text":   # Gemma's norms around the MLP too
            block += [Tensor(f"{prefix}.pre_feedforward_layernorm", (hidden,), "norm"),
                      Tensor(f"{prefix}.post_feedforward_layernorm", (hidden,), "norm")]
        if is_mtp:
            block = [Tensor(t.name, t.shape, t.kind, t.linear, t.count, t.active, mtp=True)
                     for t in block]
        tensors += block
    tensors.append(Tensor("model.norm", (hidden,), "norm"))
    if not tied:
        tensors.append(Tensor("lm_head", (vocab, hidden), "lm_head", linear=True))
    longest, scaled_note = longest_context(cfg, where)
    shape = ModelShape(architecture=family, tensors=tensors, layers=layers, hidden_size=hidden,
                       vocab_size=vocab, tied_embeddings=tied, mtp_layers=mtp,
                       max_context_tokens=longest)
    if scaled_note:
        shape.notes.append(scaled_note)
    describe_attention(shape, c, family, kinds)
    shape.recurrent_layers = kinds.count("linear_attention")
    describe_experts(shape, c, family)
    shape.notes += fused_notes
    if multimodal:
        shape.notes.append("a multimodal config: its language model is counted (the decode "
                           "step); the vision tower (vision_config) and the projector that "
                           "encode images at prefill are not")
    shown = {k: v for k, v in defaulted.items() if k not in ("sliding_window_pattern",)
             or "layer_types" not in cfg}
    if shown:
        shape.notes.append(f"fields the config.json leaves out, read at their transformers "
                           f"defaults for {family}: "
                           + ", ".join(f"{k} {str(v).lower() if isinstance(v, bool) else v}"
                                       for k, v in shown.items()))
    return shape


def fused_family_checks(c: HFConfig, where: str) -> list[str]:
    """Refuse what a Phi-3 config may say that its card cannot hold, naming the field: a bias
    (``Phi3Attention`` and ``Phi3MLP`` have none, so a config asking for one is not a model
    card add can count), or a ``sliding_window`` below ``max_position_embeddings``
    (Phi-3-mini-4k's 2047 of 4096: every layer's cache would be a window, which the card's
    kv_bytes_per_token, the cache growing with the context, cannot say). A window at or above
    the context (Phi-3-mini-128k's and Phi-3.5's 262144 of 131072) bounds nothing: the notes
    say so, and every layer counts as full attention."""
    for key in ("attention_bias", "mlp_bias", "lm_head_bias"):
        if c.flag(key):
            raise InputError(f"{key} is true, but Phi-3's layers (transformers Phi3Attention, "
                             "Phi3MLP) carry no bias", file=where, column=key,
                             fix="pass the model's own config.json, or write the card's row by "
                                 "hand (docs/cli.md, card add)")
    return window_checks(c, where)


def window_checks(c: HFConfig, where: str) -> list[str]:
    """A ``sliding_window`` below ``max_position_embeddings`` on a family whose every layer
    slides (Phi-3-mini-4k's 2047 of 4096; a ``mistral`` config's 4096 of 32768, Mistral-7B-v0.1;
    a ``mixtral`` one's, or a Qwen MoE one's with ``use_sliding_window`` true, :data:`WINDOWED`):
    refused, naming the field, since the card's kv_bytes_per_token (the cache that grows with
    the context) cannot say a window; a Mistral one was carded as full attention, its cache
    counted 8x too big at 32k. A window switched off (Qwen2's ``use_sliding_window`` false),
    absent, or at or above the context bounds nothing: a note at most."""
    if c.cfg.get("model_type") in QWEN_WINDOW and not c.flag("use_sliding_window"):
        return []
    window = c.optional("sliding_window")
    if not window:
        return []
    context = c.whole("max_position_embeddings")
    if window < context:
        raise InputError(f"sliding_window {window} is below max_position_embeddings {context}: "
                         f"every layer would cache a {window}-token window, which a card "
                         "cannot hold (its kv_bytes_per_token is the cache that grows with the "
                         "context)", file=where, column="sliding_window",
                         fix="write the card's row by hand (docs/cli.md, card add), pricing the "
                             "cache as the engine serving it keeps it")
    return [f"sliding_window {window} is not below max_position_embeddings {context}: it "
            "bounds no layer's cache, so every layer counts as full attention"]


def minimax_checks(c: HFConfig, where: str) -> list[str]:
    """Refuse what a minimax_m2 config may ask for that transformers' MiniMaxM2 does not build,
    naming the field: a linear ("lightning") attention layer (``attn_type_list`` 0, MiniMax-01's
    kind; M2's are all 1, softmax attention), q/k norms other than ``per_layer`` (one RMSNorm
    over all the heads' q, one over all the k), a shared expert (``shared_intermediate_size``).
    The notes say the MTP modules the config names are not counted: the released checkpoints
    hold no weights for them."""
    fix = "pass the model's own config.json, or write the card's row by hand (docs/cli.md, card add)"
    types = c.cfg.get("attn_type_list")
    if types is not None and (not isinstance(types, list) or any(t != 1 for t in types)):
        raise InputError(f"attn_type_list {types!r} is not all 1: a linear (lightning) "
                         "attention layer is not one card add counts for minimax_m2",
                         file=where, column="attn_type_list", fix=fix)
    norm = c.cfg.get("qk_norm_type", "per_layer")
    if c.flag("use_qk_norm", default=True) and norm != "per_layer":
        raise InputError(f"qk_norm_type {norm!r}: transformers' MiniMaxM2Attention has "
                         "per_layer q/k norms only", file=where, column="qk_norm_type", fix=fix)
    if c.whole("shared_intermediate_size", 0):
        raise InputError(f"shared_intermediate_size {c.whole('shared_intermediate_size')}: "
                         "transformers' MiniMaxM2 has no shared expert", file=where,
                         column="shared_intermediate_size", fix=fix)
    modules = c.whole("num_mtp_modules", 0) if c.flag("use_mtp") else 0
    return [f"num_mtp_modules {modules} (use_mtp) are not counted and give no drafter: the "
            "released checkpoints carry no MTP weights (MiniMax-M2.7's tensor list has "
            "none)"] if modules else []


def longest_context(cfg: dict, where: str = "config.json") -> tuple[int | None, str | None]:
    """The longest context the model takes, and a note when it is not the config's
    ``max_position_embeddings``: a YaRN ``rope_scaling`` (transformers 5: ``rope_parameters``)
    stretches the RoPE to ``original_max_position_embeddings`` x ``factor``, the length vLLM
    derives for it (``_get_and_verify_max_len``), which Qwen's model cards tell users to add to
    config.json for 131,072 tokens (Qwen3-8B: 32768 x 4 beside a max_position_embeddings of
    40960). Only a longer length is taken; DeepSeek-V3's 4096 x 40 is its 163840 already.
    Other scalings (linear, llama3, longrope) keep max_position_embeddings, which their
    configs already write scaled. A YaRN factor that is not a number, or an original length
    that is not a whole number, is refused (``where`` names the file): passed over, it left
    the length unscaled.

    >>> longest_context({"max_position_embeddings": 40960, "rope_scaling": {
    ...     "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})[0]
    131072
    >>> longest_context({"max_position_embeddings": 131072})
    (131072, None)
    """
    given = card_context(cfg.get("max_position_embeddings"), "max_position_embeddings", where,
                         "pass the model's own config.json")
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if not isinstance(rope, dict) or (rope.get("rope_type") or rope.get("type")) != "yarn":
        return given, None
    key = "rope_scaling" if cfg.get("rope_scaling") else "rope_parameters"
    factor, original = rope.get("factor"), rope.get("original_max_position_embeddings")
    for name, value, ok in (
            ("factor", factor, isinstance(factor, int | float) and math.isfinite(factor)),
            ("original_max_position_embeddings", original, isinstance(original, int))):
        if value is not None and (isinstance(value, bool) or not ok):
            raise InputError(f"{key}'s {name!r} is {value!r}, not a "
                             + ("number" if name == "factor" else "whole number"),
                             file=where, fix="pass the model's own config.json")
    original = _positive_int(original)
    if original is None or factor is None or factor <= 1:
        return given, None
    scaled = card_context(int(original * factor), f"{key} yarn original_max_position_embeddings "
                          "x factor", where, "pass the model's own config.json")
    assert scaled is not None
    if given is not None and scaled <= given:
        return given, None
    return scaled, (f"max_context_tokens {scaled} = rope_scaling yarn "
                    f"original_max_position_embeddings {original} x factor {factor:g}"
                    + (f", above max_position_embeddings {given}" if given else "")
                    + " (vLLM's derived length)")


def _positive_int(value) -> int | None:
    """``value`` if a whole number above 0, else None (a field the card only reports).

    >>> _positive_int(131072), _positive_int(0), _positive_int("8k"), _positive_int(True)
    (131072, None, None, None)
    """
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if ok else None


def checked_layer_types(types, layers: int, other: str, where: str) -> list[str]:
    """A config's ``layer_types``, refused unless it gives each of the ``layers`` layers
    ``full_attention`` or the family's ``other`` kind (a list of another length was passed
    over, an unknown type read as full attention; transformers refuses both).

    >>> checked_layer_types(["sliding_attention", "full_attention"], 2, "sliding_attention", "c")
    ['sliding_attention', 'full_attention']
    """
    if not isinstance(types, list) or len(types) != layers:
        size = f"lists {len(types)} layers" if isinstance(types, list) else f"is {types!r}"
        raise InputError(f"'layer_types' {size} but 'num_hidden_layers' is {layers}",
                         file=where, fix="pass the model's own config.json (one type a layer)")
    for i, kind in enumerate(types):
        if kind not in (other, "full_attention"):
            raise InputError(f"'layer_types' entry {i} is {kind!r}, not {other} or "
                             "full_attention", file=where,
                             fix="pass the model's own config.json, or write the card's row "
                                 "by hand (docs/cli.md, card add)")
    return list(types)


def layer_kinds(cfg: dict, family: str, layers: int, where: str = "config.json") -> list[str]:
    """``full_attention``, ``linear_attention`` (the Gated DeltaNet hybrids) or
    ``sliding_attention`` (Gemma 3, gpt-oss) per layer: the config's ``layer_types``, else
    the family's pattern (every ``sliding_window_pattern``-th layer full, as transformers
    builds it).

    >>> layer_kinds({"sliding_window_pattern": 6}, "gemma3_text", 7)[4:]
    ['sliding_attention', 'full_attention', 'sliding_attention']
    """
    if family in LLAMA4:
        return llama4_kinds(cfg, layers, where)
    if family not in SLIDING | HYBRID:
        return ["full_attention"] * layers
    other = "sliding_attention" if family in SLIDING else "linear_attention"
    types = cfg.get("layer_types")
    if types is not None:
        return checked_layer_types(types, layers, other, where)
    if family in SLIDING:
        return sliding_kinds(_pattern(cfg, "sliding_window_pattern", 1, where), layers)
    interval = _pattern(cfg, "full_attention_interval", 4, where)
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
            for i in range(layers)]


def _pattern(cfg: dict, key: str, default: int, where: str) -> int:
    """A layer pattern's period (every ``key``-th layer full attention), a whole number of at
    least 1 (``default`` when left out or null): ``int()`` of it crashed on a string ("x"),
    cut 4.5 to 4, and a 0 read as "every layer full" where transformers divides by it.

    >>> _pattern({"full_attention_interval": 4}, "full_attention_interval", 4, "c.json")
    4
    >>> try:
    ...     _pattern({"sliding_window_pattern": 0}, "sliding_window_pattern", 1, "c.json")
    ... except InputError as err:
    ...     print(str(err).split(" (fix")[0])
    c.json: 'sliding_window_pattern' is 0, not a whole number of at least 1
    """
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{key!r} is {value!r}, not a whole number of at least 1", file=where,
                         fix="pass the model's own config.json")
    return value


def llama4_kinds(cfg: dict, layers: int, where: str) -> list[str]:
    """Llama 4's layers (transformers ``Llama4TextConfig``): ``chunked_attention`` where
    ``no_rope_layers`` is 1 (a RoPE layer; by default every layer but each
    ``no_rope_layer_interval``-th), ``full_attention`` on the NoPE layers; all full without an
    ``attention_chunk_size``. ``layer_types``, when given, says it directly."""
    if not cfg.get("attention_chunk_size"):
        return ["full_attention"] * layers
    if cfg.get("layer_types") is not None:
        return checked_layer_types(cfg["layer_types"], layers, "chunked_attention", where)
    flags = cfg.get("no_rope_layers")
    if not flags:
        interval = HFConfig(cfg, where).whole("no_rope_layer_interval", 4)
        flags = [int((i + 1) % interval != 0) for i in range(layers)]
    if not isinstance(flags, list) or len(flags) < layers or any(f not in (0, 1) for f in flags):
        raise InputError(f"no_rope_layers {flags!r} does not give each of the {layers} layers "
                         "a 1 (RoPE, chunked attention) or a 0 (NoPE, full attention)",
                         file=where, column="no_rope_layers",
                         fix="pass the model's own config.json (one flag a layer)")
    return ["chunked_attention" if flag else "full_attention" for flag in flags[:layers]]


def llama4_moe_layers(c: HFConfig, layers: int) -> set[int]:
    """The layers holding experts: ``moe_layers``, else every ``interleave_moe_layer_step``-th
    from step - 1 on (transformers ``Llama4TextConfig``: Scout's step 1 makes all 48 MoE,
    Maverick's 2 the odd ones)."""
    given = c.cfg.get("moe_layers")
    if given is None:
        step = c.whole("interleave_moe_layer_step", 1)
        return set(range(step - 1, layers, step))
    if not isinstance(given, list) or any(isinstance(i, bool) or not isinstance(i, int)
                                          or not 0 <= i < layers for i in given):
        raise InputError(f"moe_layers {given!r} is not a list of layer numbers 0 to {layers - 1}",
                         file=c.where, column="moe_layers", fix="pass the model's own config.json")
    return set(given)


def _lin(name: str, out: int, inp: int, kind: str, *, bias: bool = False) -> list[Tensor]:
    weight = [Tensor(f"{name}", (out, inp), kind, linear=True)]
    return weight + ([Tensor(f"{name}.bias", (out,), kind)] if bias else [])


def attention(c: HFConfig, family: str, prefix: str, hidden: int) -> list[Tensor]:
    """A full-attention layer: GQA / MHA (optionally gated, with q/k norms), or MLA."""
    p = f"{prefix}.self_attn"
    heads = c.whole("num_attention_heads")
    if family in MLA:
        nope, rope, v_dim = (c.whole("qk_nope_head_dim"), c.whole("qk_rope_head_dim"),
                             c.whole("v_head_dim"))
        kv_rank, q_rank = c.whole("kv_lora_rank"), c.optional("q_lora_rank")
        q = (_lin(f"{p}.q_a_proj", q_rank, hidden, "attention")
             + [Tensor(f"{p}.q_a_layernorm", (q_rank,), "norm")]
             + _lin(f"{p}.q_b_proj", heads * (nope + rope), q_rank, "attention")
             if q_rank else _lin(f"{p}.q_proj", heads * (nope + rope), hidden, "attention"))
        return (q + _lin(f"{p}.kv_a_proj_with_mqa", kv_rank + rope, hidden, "attention")
                + [Tensor(f"{p}.kv_a_layernorm", (kv_rank,), "norm")]
                + _lin(f"{p}.kv_b_proj", heads * (nope + v_dim), kv_rank, "attention")
                + _lin(f"{p}.o_proj", hidden, heads * v_dim, "attention")
                + (indexer(c, p, hidden) if family in INDEXER else []))
    kv_heads = c.whole("num_key_value_heads", heads)
    head_dim = c.whole("head_dim", hidden // heads) if c.cfg.get("head_dim") else hidden // heads
    if family in FUSED:   # one qkv_proj: the q heads, then the k and v heads
        return (_lin(f"{p}.qkv_proj", (heads + 2 * kv_heads) * head_dim, hidden, "attention")
                + _lin(f"{p}.o_proj", hidden, heads * head_dim, "attention"))
    gate = 2 if output_gate(c, family) else 1
    qkv_bias = family in QKV_BIAS or c.flag("attention_bias")
    out = (_lin(f"{p}.q_proj", gate * heads * head_dim, hidden, "attention", bias=qkv_bias)
           + _lin(f"{p}.k_proj", kv_heads * head_dim, hidden, "attention", bias=qkv_bias)
           + _lin(f"{p}.v_proj", kv_heads * head_dim, hidden, "attention", bias=qkv_bias)
           + _lin(f"{p}.o_proj", hidden, heads * head_dim, "attention",
                  bias=c.flag("attention_bias") and family not in GLM_MOE))
    if family in QK_NORM or (family in GLM_MOE and c.flag("use_qk_norm")):
        out += [Tensor(f"{p}.q_norm", (head_dim,), "norm"), Tensor(f"{p}.k_norm", (head_dim,), "norm")]
    if family == "minimax_m2" and c.flag("use_qk_norm", default=True):   # over all the heads
        out += [Tensor(f"{p}.q_norm", (heads * head_dim,), "norm"),
                Tensor(f"{p}.k_norm", (kv_heads * head_dim,), "norm")]
    if family == "gpt_oss":   # a learned sink logit per head
        out.append(Tensor(f"{p}.sinks", (heads,), "attention"))
    return out


def indexer(c: HFConfig, p: str, hidden: int) -> list[Tensor]:
    """DeepSeek Sparse Attention's lightning indexer (transformers ``DeepseekV32Indexer``):
    ``wq_b`` (index_n_heads x index_head_dim outputs from the q_lora_rank latent), ``wk``
    (index_head_dim outputs from the hidden state), ``k_norm`` (a LayerNorm: weight and bias)
    and ``weights_proj`` (a weight per index head), which no quantiser packs: DeepSeek's FP8
    release stores it in bf16 and transformers keeps it in fp32 (``_keep_in_fp32_modules``)."""
    heads, dim = c.whole("index_n_heads"), c.whole("index_head_dim")
    name = f"{p}.indexer"
    return (_lin(f"{name}.wq_b", heads * dim, c.whole("q_lora_rank"), "attention")
            + _lin(f"{name}.wk", dim, hidden, "attention")
            + [Tensor(f"{name}.k_norm", (dim,), "norm"),
               Tensor(f"{name}.k_norm.bias", (dim,), "norm"),
               Tensor(f"{name}.weights_proj", (heads, hidden), "attention")])


def output_gate(c: HFConfig, family: str) -> bool:
    """Does the full-attention q_proj carry an output gate (2 x heads x head_dim outputs)?
    The Gated DeltaNet hybrids' attention does unless the config says otherwise (transformers
    ``Qwen3NextAttention`` always; vLLM and SGLang read ``attn_output_gate``, default true);
    other families only when the config says so."""
    return c.flag("attn_output_gate", default=family in HYBRID)


def linear_attention(c: HFConfig, family: str, prefix: str, hidden: int) -> list[Tensor]:
    """A Gated DeltaNet layer (transformers ``Qwen3NextGatedDeltaNet``): fused qkvz and ba
    projections, a depthwise causal conv over q, k, v, per-value-head dt bias and A, a gated
    RMSNorm over a value head, the output projection. Qwen3.5 (``Qwen3_5GatedDeltaNet``)
    stores the same weights as four projections, ``in_proj_qkv``, ``in_proj_z``,
    ``in_proj_b`` and ``in_proj_a``: named so, as its quantised exports' ignore lists name
    them (a bf16 ``in_proj_qkv`` was read as quantised under the fused name)."""
    p = f"{prefix}.linear_attn"
    k_heads, v_heads = c.whole("linear_num_key_heads"), c.whole("linear_num_value_heads")
    key_dim = k_heads * c.whole("linear_key_head_dim")
    v_head_dim = c.whole("linear_value_head_dim")
    value_dim = v_heads * v_head_dim
    conv_dim = 2 * key_dim + value_dim
    kind = "linear_attention"
    if family == "qwen3_next":
        inputs = (_lin(f"{p}.in_proj_qkvz", 2 * key_dim + 2 * value_dim, hidden, kind)
                  + _lin(f"{p}.in_proj_ba", 2 * v_heads, hidden, kind))
    else:
        inputs = (_lin(f"{p}.in_proj_qkv", conv_dim, hidden, kind)
                  + _lin(f"{p}.in_proj_z", value_dim, hidden, kind)
                  + _lin(f"{p}.in_proj_b", v_heads, hidden, kind)
                  + _lin(f"{p}.in_proj_a", v_heads, hidden, kind))
    return (inputs
            + [Tensor(f"{p}.conv1d", (conv_dim, 1, c.whole("linear_conv_kernel_dim")),
                      "linear_attention"),
               Tensor(f"{p}.dt_bias", (v_heads,), "linear_attention"),
               Tensor(f"{p}.A_log", (v_heads,), "linear_attention"),
               Tensor(f"{p}.norm", (v_head_dim,), "norm")]
            + _lin(f"{p}.out_proj", hidden, value_dim, "linear_attention"))


def _mlp(name: str, hidden: int, inter: int, kind: str, *, bias: bool = False, count: int = 1,
         active: float = 1.0, fused: bool = False) -> list[Tensor]:
    """A gated MLP: gate_proj, up_proj, down_proj (``fused``: gate and up as one
    ``gate_up_proj`` of 2 x ``inter`` outputs, as Phi-3 stores them)."""
    def one(part: str, out: int, inp: int) -> list[Tensor]:
        w = [Tensor(f"{name}.{part}", (out, inp), kind, linear=True, count=count, active=active)]
        return w + ([Tensor(f"{name}.{part}.bias", (out,), kind, count=count, active=active)]
                    if bias else [])

    inputs = one("gate_up_proj", 2 * inter, hidden) if fused else \
        one("gate_proj", inter, hidden) + one("up_proj", inter, hidden)
    return inputs + one("down_proj", hidden, inter)


def moe_layer(c: HFConfig, family: str, i: int) -> bool:
    """Does layer ``i`` hold experts (else a dense MLP)? A glm4_moe config must give its
    expert count and dense layers (transformers ``Glm4MoeDecoderLayer``: experts from layer
    first_k_dense_replace on); left out, they are refused rather than read at 0."""
    if family in GLM_MOE:
        return c.whole("n_routed_experts") > 0 and i >= c.whole("first_k_dense_replace")
    if family in MLA:
        experts = c.optional("n_routed_experts")
        return bool(experts) and i >= c.whole("first_k_dense_replace") and \
            i % c.whole("moe_layer_freq", 1) == 0
    if family in ALL_MOE:
        return True
    if family in LLAMA4:
        return i in llama4_moe_layers(c, c.whole("num_hidden_layers"))
    experts = c.optional("num_experts")
    if not experts or family == "qwen3_5_text":
        return False
    only = mlp_only_layers(c)
    return i not in only and (i + 1) % c.whole("decoder_sparse_step", 1) == 0


def mlp_only_layers(c: HFConfig) -> set[int]:
    """A Qwen MoE config's ``mlp_only_layers``, the layers with a dense MLP, as layer numbers
    0 to num_hidden_layers - 1 (as Llama 4's ``moe_layers`` are): an int there crashed (``in``
    an int), and a name or a number past the last layer was passed over, every layer MoE."""
    given = c.cfg.get("mlp_only_layers")
    if given is None:
        return set()
    layers = c.whole("num_hidden_layers")
    if not isinstance(given, list) or any(isinstance(i, bool) or not isinstance(i, int)
                                          or not 0 <= i < layers for i in given):
        raise InputError(f"mlp_only_layers {given!r} is not a list of layer numbers 0 to "
                         f"{layers - 1}", file=c.where, column="mlp_only_layers",
                         fix="pass the model's own config.json")
    return set(given)


def feed_forward(c: HFConfig, family: str, prefix: str, hidden: int, i: int) -> list[Tensor]:
    """The layer's dense MLP, or its router, routed experts and shared expert(s)."""
    p = f"{prefix}.feed_forward" if family in LLAMA4 else f"{prefix}.mlp"
    bias = c.flag("mlp_bias")
    if not moe_layer(c, family, i):
        dense = "intermediate_size_mlp" if family in LLAMA4 else "intermediate_size"
        return _mlp(p, hidden, c.whole(dense), "mlp", bias=bias, fused=family in FUSED)
    topk = experts_topk(c)
    if family in LLAMA4:
        return llama4_moe(c, p, hidden, topk)
    if family == "gpt_oss":
        return gpt_oss_moe(c, p, hidden, topk)
    if family == "minimax_m2":
        return minimax_moe(c, f"{prefix}.block_sparse_moe", hidden, topk)
    if family == "mixtral":
        experts = c.whole("num_local_experts")
        return ([Tensor(f"{prefix}.block_sparse_moe.gate", (experts, hidden), "router")]
                + _mlp(f"{prefix}.block_sparse_moe.experts.*", hidden, c.whole("intermediate_size"),
                       "expert", count=experts, active=topk / experts))
    inter = c.whole("moe_intermediate_size")
    if family in ROUTED_SHARED:
        experts = c.whole("n_routed_experts")
        shared = c.whole("n_shared_experts")   # (left out: refused, see FAMILY_DEFAULTS)
        out = [Tensor(f"{p}.gate", (experts, hidden), "router")]
        # the load-balancing bias of V3 / K2; GLM's router (Glm4MoeTopkRouter) always has it
        if c.cfg.get("topk_method") == "noaux_tc" or family in GLM_MOE:
            out.append(Tensor(f"{p}.gate.e_score_correction_bias", (experts,), "router"))
        out += _mlp(f"{p}.experts.*", hidden, inter, "expert", count=experts,
                    active=topk / experts)
        if shared:
            out += _mlp(f"{p}.shared_experts", hidden, shared * inter, "shared_expert")
        return out
    experts = c.whole("num_experts")
    out = [Tensor(f"{p}.gate", (experts, hidden), "router")]
    out += _mlp(f"{p}.experts.*", hidden, inter, "expert", count=experts, active=topk / experts)
    shared_inter = c.whole("shared_expert_intermediate_size", 0)
    if shared_inter:
        out += _mlp(f"{p}.shared_expert", hidden, shared_inter, "shared_expert")
        out += _lin(f"{p}.shared_expert_gate", 1, hidden, "shared_expert")
    return out


def experts_topk(c: HFConfig) -> int:
    """Experts per token: ``num_experts_per_tok``, or gpt-oss's ``experts_per_token``."""
    return c.whole("num_experts_per_tok") if "num_experts_per_tok" in c.cfg \
        else c.whole("experts_per_token")


def gpt_oss_moe(c: HFConfig, p: str, hidden: int, topk: int) -> list[Tensor]:
    """gpt-oss's MoE (transformers ``GptOssMLP``): a router with a bias, and experts whose
    fused gate/up projection (2 x intermediate outputs) and down projection carry a bias
    each; the checkpoint stores each projection of all experts as one tensor
    (``mlp.experts.gate_up_proj``), counted here as ``count`` copies of one expert's."""
    experts, inter = c.whole("num_local_experts"), c.whole("intermediate_size")
    share = topk / experts
    return [Tensor(f"{p}.router", (experts, hidden), "router"),
            Tensor(f"{p}.router.bias", (experts,), "router"),
            Tensor(f"{p}.experts.gate_up_proj", (2 * inter, hidden), "expert", linear=True,
                   count=experts, active=share),
            Tensor(f"{p}.experts.gate_up_proj_bias", (2 * inter,), "expert", count=experts,
                   active=share),
            Tensor(f"{p}.experts.down_proj", (hidden, inter), "expert", linear=True,
                   count=experts, active=share),
            Tensor(f"{p}.experts.down_proj_bias", (hidden,), "expert", count=experts,
                   active=share)]


def minimax_moe(c: HFConfig, p: str, hidden: int, topk: int) -> list[Tensor]:
    """MiniMax-M2's MoE (transformers ``MiniMaxM2SparseMoeBlock``): a router and its
    ``e_score_correction_bias`` (the sigmoid router's load-balancing bias, a buffer
    transformers always registers), experts of ``intermediate_size`` under the checkpoint's
    names (w1 gate, w3 up, w2 down, as quantised exports name them)."""
    experts, inter = c.whole("num_local_experts"), c.whole("intermediate_size")
    share = topk / experts
    return [Tensor(f"{p}.gate", (experts, hidden), "router"),
            Tensor(f"{p}.e_score_correction_bias", (experts,), "router"),
            Tensor(f"{p}.experts.*.w1", (inter, hidden), "expert", linear=True,
                   count=experts, active=share),
            Tensor(f"{p}.experts.*.w3", (inter, hidden), "expert", linear=True,
                   count=experts, active=share),
            Tensor(f"{p}.experts.*.w2", (hidden, inter), "expert", linear=True,
                   count=experts, active=share)]


def llama4_moe(c: HFConfig, p: str, hidden: int, topk: int) -> list[Tensor]:
    """Llama 4's MoE (transformers ``Llama4TextMoe``): a router, experts of
    ``intermediate_size`` stored fused (``experts.gate_up_proj`` 2 x intermediate outputs,
    ``experts.down_proj``; all experts in one tensor each, counted as ``count`` copies of one
    expert's) and a shared expert of the same size every token runs."""
    experts, inter = c.whole("num_local_experts"), c.whole("intermediate_size")
    share = topk / experts
    return ([Tensor(f"{p}.router", (experts, hidden), "router"),
             Tensor(f"{p}.experts.gate_up_proj", (2 * inter, hidden), "expert", linear=True,
                    count=experts, active=share),
             Tensor(f"{p}.experts.down_proj", (hidden, inter), "expert", linear=True,
                    count=experts, active=share)]
            + _mlp(f"{p}.shared_expert", hidden, inter, "shared_expert"))


def sliding_kinds(pattern: int, layers: int) -> list[str]:
    """Every ``pattern``-th layer full attention, the others sliding-window: transformers'
    Gemma 3 (6) and gpt-oss (2) layouts, which llama.cpp sets the same way
    (``hparams.set_swa_pattern``: layer i slides when i % pattern < pattern - 1).

    >>> sliding_kinds(2, 3)
    ['sliding_attention', 'full_attention', 'sliding_attention']
    """
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
            for i in range(layers)]


def describe_window(shape: ModelShape, sliding: int, full: int, kv_heads: int, head_dim: int,
                    window: int, label: str = "sliding-window") -> str:
    """Set the card's sliding-window cache (``kv_window_bytes_per_token``, ``kv_window_tokens``)
    of ``sliding`` layers beside ``full`` full-attention ones, note it, and return the
    attention text's clause for them."""
    per_token = 2 * sliding * kv_heads * head_dim * 2
    shape.kv_window_bytes_per_token, shape.kv_window_tokens = per_token, window
    shape.notes.append(
        f"kv_bytes_per_token counts the {full} full-attention layers only, whose cache "
        f"grows with the context; the {sliding} {label} layers cache at most "
        f"{window} tokens: kv_window_bytes_per_token {per_token:,} (2 x {sliding} x "
        f"{kv_heads} x {head_dim} x 2 bytes) x kv_window_tokens {window} = "
        f"{per_token * window:,} bytes per sequence; one sequence's cache at context C is "
        f"kv_bytes_per_token x C + {per_token:,} x min(C, {window}), what the memory "
        f"checks count (an engine that keeps {label} layers at the full context holds more)")
    span = f"{window}-token chunks" if label == "chunked-attention" else f"{window} tokens"
    return f"; {sliding} {label} ({span}) + {full} full-attention layers"


def describe_attention(shape: ModelShape, c: HFConfig, family: str, kinds: list[str]) -> None:
    """The card's attention text and KV bytes per token (bf16 / fp16 cache)."""
    heads = c.whole("num_attention_heads")
    full = kinds.count("full_attention")
    shape.heads = shape.q_heads = heads
    if family in MLA:
        rank, rope = c.whole("kv_lora_rank"), c.whole("qk_rope_head_dim")
        shape.attention = f"MLA (kv_lora_rank {rank} + qk_rope_head_dim {rope}), {heads} heads"
        shape.kv_bytes_per_token = (rank + rope) * shape.layers * 2
        shape.kv_formula = f"({rank} + {rope}) x {shape.layers} layers x 2 bytes"
        shape.kv_heads = 1   # (the latent: one head every tensor-parallel GPU holds whole)
        if family in INDEXER:
            describe_indexer(shape, c, rank, rope)
        return
    kv_heads = c.whole("num_key_value_heads", heads)
    head_dim = c.whole("head_dim") if c.cfg.get("head_dim") else shape.hidden_size // heads
    shape.kv_heads, shape.head_dim = kv_heads, head_dim
    kind = "MHA" if kv_heads == heads else "GQA"
    text = f"{kind} {heads} q heads / {kv_heads} kv heads, head_dim {head_dim}"
    linear = kinds.count("linear_attention")
    if linear:
        gated = " (gated)" if output_gate(c, family) else ""
        text = (f"hybrid: {linear} Gated DeltaNet + {full} full-attention layers"
                f"{gated}, {heads} q heads / {kv_heads} kv heads, head_dim {head_dim}")
        v_heads = c.whole("linear_num_value_heads")
        state = v_heads * c.whole("linear_key_head_dim") * c.whole("linear_value_head_dim")
        conv = (2 * c.whole("linear_num_key_heads") * c.whole("linear_key_head_dim")
                + v_heads * c.whole("linear_value_head_dim")) * (c.whole("linear_conv_kernel_dim") - 1)
        shape.notes.append(f"the {linear} Gated DeltaNet layers keep a fixed state "
                           f"per sequence instead of a KV cache: {state} recurrent + {conv} conv "
                           "values per layer")
    chunked = kinds.count("chunked_attention")
    if chunked:   # Llama 4: a token attends within its chunk, so a layer holds one chunk at most
        text += describe_window(shape, chunked, full, kv_heads, head_dim,
                                c.whole("attention_chunk_size"), "chunked-attention")
    sliding = kinds.count("sliding_attention")
    if sliding:
        window = c.whole("sliding_window")
        if window < 1:   # (was refused blaming data/models.csv's kv_window_tokens, a row
            #               the user never wrote, in a file not written)
            raise InputError(f"sliding_window is {window}, but {sliding} layers are "
                             "sliding_attention: a window holds at least 1 token",
                             file=c.where, column="sliding_window",
                             fix="pass the model's own config.json")
        text += (describe_window(shape, sliding, full, kv_heads, head_dim, window)
                 + (", attention sinks" if family == "gpt_oss" else ""))
    shape.attention = text
    shape.kv_bytes_per_token = 2 * full * kv_heads * head_dim * 2
    shape.kv_formula = (f"2 x {full} {'full-attention ' if full < len(kinds) else ''}layers x "
                        f"{kv_heads} kv heads x {head_dim} x 2 bytes")


def describe_indexer(shape: ModelShape, c: HFConfig, rank: int, rope: int) -> None:
    """Add the lightning indexer's key cache to an MLA card: each layer caches one key of
    index_head_dim values per token beside its latent (transformers' ``update_indexer``),
    counted at 2 bytes as the latent is; the notes give what engines keep instead."""
    heads, dim, topk = (c.whole("index_n_heads"), c.whole("index_head_dim"),
                        c.whole("index_topk"))
    layers = shape.layers
    shape.attention += f"; DSA lightning indexer {heads} heads x {dim}, top-{topk} tokens"
    shape.kv_bytes_per_token = (rank + rope + dim) * layers * 2
    shape.kv_formula = f"({rank} + {rope} + {dim} indexer key) x {layers} layers x 2 bytes"
    fp8 = (dim + 4 * math.ceil(dim / 128)) * layers
    shape.notes.append(
        f"kv_bytes_per_token holds the lightning indexer's key cache: {dim} x {layers} x 2 = "
        f"{dim * layers * 2:,} bytes per token of it (DeepSeek's reference code and vLLM keep "
        f"those keys in fp8 with an fp32 scale per 128 values: {fp8:,} bytes per token); "
        f"attention reads the latents of the top {topk} tokens the indexer picks, not of the "
        "whole context")


def describe_experts(shape: ModelShape, c: HFConfig, family: str) -> None:
    if family in QWEN_MOE and c.optional("num_experts") and not any(
            moe_layer(c, family, i) for i in range(shape.layers)):
        # every layer dense (mlp_only_layers, or a decoder_sparse_step past the last layer):
        # transformers builds no expert, so neither does the card (an MoE card of no routed
        # weights was refused blaming data/models.csv's params_active_b, a row never written)
        shape.intermediate_size = c.optional("intermediate_size")
        shape.notes.append(f"num_experts {c.whole('num_experts')} but no layer holds experts "
                           "(mlp_only_layers, decoder_sparse_step): every layer's MLP is "
                           "dense, carded as a dense model")
        return
    if family in ROUTED_SHARED and c.optional("n_routed_experts"):
        shape.experts, shape.shared_experts = c.whole("n_routed_experts"), c.whole("n_shared_experts")
    elif family in ALL_MOE:
        shape.experts = c.whole("num_local_experts")
    elif family in LLAMA4 and llama4_moe_layers(c, shape.layers):
        shape.experts, shape.shared_experts = c.whole("num_local_experts"), 1
    elif family in QWEN_MOE or family in {"qwen3_next", "qwen3_5_moe_text"}:
        shape.experts = c.optional("num_experts")
        shape.shared_experts = 1 if c.whole("shared_expert_intermediate_size", 0) else 0
    if shape.experts:
        shape.experts_topk = experts_topk(c)
        shape.intermediate_size = c.whole("intermediate_size") if family in ALL_MOE | LLAMA4 \
            else c.whole("moe_intermediate_size")
    else:
        shape.intermediate_size = c.optional("intermediate_size")

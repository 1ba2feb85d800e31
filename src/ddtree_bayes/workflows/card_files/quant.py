"""Bytes per weight from a checkpoint's quantisation: ``quantization_config`` in config.json,
or the per-tensor types of a GGUF file.

A quantised linear weight of shape (out, in) stores its codes plus the scales (and zero points,
and index tables) of its scheme; everything else keeps the checkpoint's dtype (a float32 one:
16-bit, as engines serve it). The card's ``bytes_per_weight`` is the byte-weighted average
over the weights one token uses (routed experts at top_k / experts), because the roofline
streams ``active parameters x bytes per weight`` per step; the file average (over every
weight) is reported beside it.

Conventions (each from the format's own storage layout):

- AWQ (AutoAWQ GEMM/GEMV): ``bits`` per weight + an fp16 scale and a ``bits``-wide packed zero
  point per group of ``group_size`` inputs and output; lm_head stays in the model dtype.
- GPTQ (AutoGPTQ / GPTQModel): as AWQ (the packed zero point is stored even when symmetric)
  plus the int32 ``g_idx`` of every input channel; lm_head stays in the model dtype.
- FP8 (``quant_method: fp8``, DeepSeek-V3 / transformers FineGrainedFP8): 1 byte per weight +
  an fp32 scale per ``weight_block_size`` block (one per tensor without blocks); lm_head kept.
- compressed-tensors: ``num_bits`` per weight + a scale per tensor / output channel / group /
  block (``scale_dtype``, else the model dtype; fp8 for NVFP4's ``tensor_group``, which adds
  one fp32 global scale per tensor) + a zero point per scale when asymmetric; only the
  modules the group ``targets`` (``Linear``: every linear weight; ``re:`` regexes), less
  ``ignore``; a module class other than Linear is not read.
- modelopt (NVIDIA TensorRT Model Optimizer): FP8 = 1 byte + fp32 per-tensor scales; NVFP4 =
  4 bits + an fp8 scale per 16 weights + fp32 global scales; ``exclude_modules`` kept.
- bitsandbytes: 4-bit = 4 bits + an fp32 absmax per 64 weights (8-bit absmax + fp32 per 256
  blocks with double quantisation); 8-bit = 1 byte + an fp32 scale per output row.
- MXFP4 (``quant_method: mxfp4``, gpt-oss): the MoE experts' weights only, as transformers
  converts them (``GptOssExperts``; ``_blocks`` + ``_scales`` in the checkpoint): 4-bit e2m1
  values + an 8-bit e8m0 scale per 32 inputs = 4.25 bits; their biases, attention, router,
  embedding and lm_head stay in the model dtype.

Routers (an MoE layer's gate, < 0.1% of a model's weights) are counted at the model dtype
under every scheme.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field

from ddtree_bayes.core.errors import InputError
from ddtree_bayes.workflows.card_files.hf_config import config_bool
from ddtree_bayes.workflows.card_files.shapes import ModelShape, Tensor

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float64": 8,
               "double": 8, "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1,
               "float8_e5m2fnuz": 1}
SCALE_BITS = {"torch.float8_e4m3fn": 8, "float8_e4m3fn": 8, "torch.bfloat16": 16,
              "torch.float16": 16, "bfloat16": 16, "float16": 16, "torch.float32": 32,
              "float32": 32}


@dataclass
class Scheme:
    """How a checkpoint stores its weights: ``bits(t)`` of a quantised linear weight, which
    weights are quantised, the dtype of the rest, and the matmul precision it implies."""

    label: str
    dtype_bytes: float = 2.0
    compute_dtype: str = "bf16"
    quantised_bits: object = None        # callable (Tensor) -> total bits of one copy
    skip: list[str] = field(default_factory=list)
    skip_lm_head: bool = True
    notes: list[str] = field(default_factory=list)
    #: the modules the quantiser targets (compressed-tensors ``targets``: ``re:`` regexes or
    #: module names); None: every linear weight
    targets: list[str] | None = None
    #: a quantisation card add does not read (e.g. "quant_method 'hqq'"): every weight is at
    #: ``dtype_bytes``, as ``--bytes-per-weight`` gave
    unread: str = ""
    #: ``skip`` entries cover the weights under the module they name (transformers'
    #: ``modules_to_not_convert`` / bitsandbytes' ``llm_int8_skip_modules``, matched as
    #: substrings); compressed-tensors' ``ignore``, FP8's and modelopt's lists match names
    #: exactly (or by regex), as their loaders do
    skip_children: bool = False

    def is_quantised(self, t: Tensor) -> bool:
        if self.quantised_bits is None or not t.linear or t.kind == "router":
            return False
        if t.kind == "lm_head" and self.skip_lm_head:
            return False
        if self.targets is not None and not any(_matches(p, t.name) for p in self.targets):
            return False
        return not any(_matches(p, t.name, children=self.skip_children) for p in self.skip)

    def idle_targets(self, tensors) -> list[str]:
        """The ``targets`` that match none of the linear weights in ``tensors``."""
        linear = [t for t in tensors if t.linear and t.kind != "router"]
        return [p for p in self.targets or () if not any(_matches(p, t.name) for t in linear)]

    def nbytes(self, t: Tensor) -> float:
        """Bytes of one copy of ``t``."""
        if t.nbytes is not None:           # read from the file (GGUF)
            return t.nbytes / t.count
        if self.is_quantised(t):
            return self.quantised_bits(t) / 8  # type: ignore[operator]
        return math.prod(t.shape) * self.dtype_bytes


def _matches(pattern: str, name: str, *, children: bool = False) -> bool:
    """A skip/ignore entry against a module name: ``re:<regex>``, a glob, or a name suffix;
    with ``children``, a module's entry covers the weights under it too (matched at dotted
    boundaries). The ``*`` standing for every copy of a tensor (``experts.*.gate_proj``) is
    matched as a checkpoint's numbered module (``experts.0.gate_proj``) by a regex.

    >>> _matches("self_attn", "model.layers.0.self_attn.q_proj")
    False
    >>> _matches("self_attn", "model.layers.0.self_attn.q_proj", children=True)
    True
    >>> _matches("model.layers.*.self_attn", "model.layers.3.self_attn.o_proj", children=True)
    True
    >>> _matches("self_at", "model.layers.0.self_attn.q_proj", children=True)
    False

    A bare name matches a module name's tail, not only a dotted component, as the loaders
    match: transformers' ``should_convert_module`` by ``endswith``, vLLM's and SGLang's
    ``is_layer_skipped_awq`` by substring (``module_name in prefix``), so "up_proj" leaves a
    fused ``gate_up_proj`` unquantised there, and is priced so here:

    >>> _matches("up_proj", "model.layers.0.mlp.gate_up_proj")
    True
    """
    # a pattern naming the language model's path is tried against the full paths of a
    # multimodal checkpoint too (only then: an unanchored "model\." matched a text model's
    # "language_model.lm_head" variant, a review found)
    names = _full_paths(name) if "language_model" in pattern else (name,)
    if pattern.startswith("re:"):
        return any(re.search(pattern[3:], n.replace(".*.", ".0.")) is not None for n in names)
    if any(ch in pattern for ch in "*?["):
        under = (f"{pattern}.*", f"*.{pattern}.*") if children else ()
        return any(fnmatch.fnmatch(n, p) for n in names
                   for p in (pattern, f"*{pattern}", *under))
    bare, path = _LANGUAGE_MODEL.sub("", name), _LANGUAGE_MODEL.sub("", pattern)
    return (name == pattern or name.endswith("." + pattern) or name.endswith(pattern)
            or bare == path or (children and (f".{pattern}." in f".{name}."
                                              or f".{path}." in f".{bare}.")))


def _full_paths(name: str) -> tuple[str, ...]:
    r"""``name`` as card add writes it (a text model's: ``model.layers.0.mlp.up_proj``,
    ``lm_head``) and as a multimodal checkpoint writes it (``model.language_model.layers...``,
    ``language_model.model.layers...``, ``language_model.lm_head``), for regexes that name
    either (a review: an ignore regex by the full path matched nothing, silently).

    >>> _full_paths("model.layers.0.mlp.up_proj")[1:]
    ('language_model.model.layers.0.mlp.up_proj', 'model.language_model.layers.0.mlp.up_proj')
    >>> _full_paths("lm_head")
    ('lm_head', 'language_model.lm_head')
    >>> _matches(r"re:model\..*", "lm_head"), _matches(r"re:^language_model\.lm_head$", "lm_head")
    (False, True)
    >>> _matches("language_model.model.layers.*.self_attn*", "model.layers.0.self_attn.q_proj")
    True
    """
    rest = name[len("model."):] if name.startswith("model.") else None
    return (name, f"language_model.{name}",
            *((f"model.language_model.{rest}",) if rest is not None else ()))


#: Where a multimodal checkpoint keeps its language model (``language_model.lm_head``,
#: ``model.language_model.layers.0...``, ``language_model.model.layers.0...``): a module
#: named by that path is the language model's own (``lm_head``, ``model.layers.0...``).
_LANGUAGE_MODEL = re.compile(r"^(model\.)?(language_model\.)?(model\.)?")


#: Checkpoint dtypes no engine serves in by default: vLLM and SGLang (``--dtype auto``) load a
#: float32 checkpoint in 16-bit ("Following the common practice, we use float16 for float32
#: models", vllm ``_get_and_verify_dtype``; bf16 in later versions), llama.cpp converts it to
#: f16.
SERVED_16BIT = {"float32", "float", "float64", "double"}
SERVED_16BIT_NOTE = ("a {name} checkpoint is priced at the 16-bit weights engines serve it in "
                     "(vLLM and SGLang --dtype auto load float32 in fp16/bf16; llama.cpp "
                     "converts it to f16); --bytes-per-weight 4 for one served in float32")


def checkpoint_dtype(cfg: dict) -> tuple[str, str]:
    """The key a config.json names its weights' dtype by (``torch_dtype``, else ``dtype``) and
    that dtype (bfloat16 when neither is given)."""
    key = "torch_dtype" if cfg.get("torch_dtype") else "dtype"
    return key, str(cfg.get(key) or "bfloat16").replace("torch.", "")


def dtype_bytes(cfg: dict, where: str, given: float | None = None) -> tuple[float, str]:
    """Bytes of one weight at the dtype the checkpoint is served in (``torch_dtype``, else
    ``dtype``, else bfloat16; a float32 / float64 one in 16-bit, :data:`SERVED_16BIT`), and
    its name; a dtype not in :data:`DTYPE_BYTES` takes ``given`` (``--bytes-per-weight``) or
    is refused (it was read as 2 bytes while the card printed its name)."""
    key, name = checkpoint_dtype(cfg)
    if name in SERVED_16BIT:
        return (float(given) if given is not None else 2.0), f"{name} served in 16-bit"
    if name in DTYPE_BYTES:
        return float(DTYPE_BYTES[name]), name
    if given is not None:
        return float(given), name
    raise InputError(f"{key!r} is {name!r}, not a checkpoint dtype card add knows "
                     f"({', '.join(DTYPE_BYTES)})", file=where,
                     fix="pass --bytes-per-weight with the bytes one weight takes, e.g. 2 for "
                         "16-bit weights")


def more_than_unquantised(given: float | None, limit: float, what: str, where: str) -> None:
    """Refuse ``--bytes-per-weight`` (``given``) above ``limit``, the bytes of a quantised
    checkpoint's unquantised weights (``what`` says whose): no quantisation stores a weight in
    more bytes than the dtype it was quantised from, so such a figure is bits typed as bytes.
    An EXL2 config of 3.5 bits a weight carded with ``--bytes-per-weight 3.5`` wrote
    Llama-3.1-8B at 3.5 B/weight (28 GB of weights, 8x the checkpoint's), exit 0.

    >>> more_than_unquantised(0.4375, 2.0, "x", "c.json")
    >>> try:
    ...     more_than_unquantised(3.5, 2.0, "the checkpoint's unquantised bfloat16 weights", "c")
    ... except InputError as err:
    ...     print(str(err).split(": ", 1)[1].split(" (fix")[0])
    --bytes-per-weight 3.5 is more than the 2 bytes of the checkpoint's unquantised bfloat16 \
weights: a quantised weight takes fewer
    """
    if given is None or not given > limit:
        return
    raise InputError(f"--bytes-per-weight {given:g} is more than the {limit:g} bytes of {what}: "
                     "a quantised weight takes fewer", file=where,
                     fix=f"give bytes, not bits: {given:g} bits a weight is --bytes-per-weight "
                         f"{given / 8:g}")


def unquantised_bytes(cfg: dict) -> tuple[float, str] | None:
    """(bytes, name) of the dtype a quantised config's weights were quantised from: its
    ``torch_dtype`` (``dtype``) of 16 bits or more, at its own width (a float32 one's 4: the
    most any deployment of it reads); None for a dtype of fewer bytes (an fp8 one: its scales
    may take a weight past 1 byte) or one card add does not know."""
    name = checkpoint_dtype(cfg)[1]
    if DTYPE_BYTES.get(name, 0) >= 2:
        return float(DTYPE_BYTES[name]), name
    return None


def _unread(what: str, label: str, where: str, given: float | None, fix: str) -> Scheme:
    """A quantisation card add does not read (``what``, the refusal; ``label``, the scheme in
    a few words): with ``--bytes-per-weight`` (``given``) every weight of the file takes that
    many bytes, else the refusal."""
    if given is None:
        raise InputError(what, file=where, column="quantization_config", fix=fix)
    return Scheme(f"{label} (not read by card add): {given:g} bytes for every weight, as "
                  "--bytes-per-weight gave", float(given), unread=label)


_SIZE_FIX = "pass --bytes-per-weight with the checkpoint's size / parameters"


def _group(value, inp: int) -> int:
    value = int(value) if value not in (None, "") else -1
    return inp if value <= 0 else value


def _group_words(value) -> tuple[str, str]:
    """A ``group_size`` as the label prints it, and what its scales are per: -1, 0 or none is
    one group per output channel (:func:`_group`: all of a row's inputs), not "g-1".

    >>> _group_words(128), _group_words(-1), _group_words(None)
    (('g128', 'group'), ('per-channel', 'output channel'), ('per-channel', 'output channel'))
    """
    if value in (None, "") or int(value) <= 0:
        return "per-channel", "output channel"
    return f"g{value}", "group"


_SIZES_FIX = ("pass the checkpoint's own config.json, or --bytes-per-weight with the "
              "checkpoint's size / parameters")


class _NoSize(Exception):
    """A width, group or block of a ``quantization_config`` that is no size (the message says
    which); :func:`scheme_from_config` refuses it, or with ``--bytes-per-weight`` prices every
    weight at that (:func:`_unread`)."""


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _width(q: dict, key: str, default: int, label: str) -> int:
    """``q[key]``, the bits a quantised weight takes (``default`` when absent): a whole number
    from 1 to 16, else :class:`_NoSize` naming it (a compressed-tensors num_bits 0 carded
    Llama-3.1-8B at 0.1313 B/weight; a word ended in an internal error).

    >>> _width({"bits": 4}, "bits", 8, "gptq")
    4
    """
    value = q.get(key, default)
    if not _whole(value) or not 1 <= value <= 16:
        raise _NoSize(f"{label} {key} {value!r} is not a width of 1-16 bits")
    return value


def _group_size(q: dict, key: str, label: str) -> None:
    """Refuse a ``group_size`` that is no group of inputs: a whole number (-1 or 0: one
    group per output channel, as AWQ / GPTQ write it), or absent / null."""
    value = q.get(key)
    if value is not None and (not _whole(value) or value < -1):
        raise _NoSize(f"{label} {key} {value!r} is not a group of inputs (a whole number; "
                      "-1 for one group per output channel)")


def _block(value, key: str, label: str) -> None:
    """Refuse a block that is not two whole sizes of 1 or more (rows, inputs)."""
    if value is not None and not (isinstance(value, list) and len(value) == 2
                                  and all(_whole(v) and v >= 1 for v in value)):
        raise _NoSize(f"{label} {key} {value!r} is not two sizes (rows x inputs, e.g. "
                      "[128, 128])")


def scheme_from_config(cfg: dict, where: str, bytes_per_weight: float | None = None) -> Scheme:
    """The storage scheme of a config.json: unquantised (its dtype) or its quantisation
    (``bytes_per_weight``: ``--bytes-per-weight``, for a dtype it does not know)."""
    try:
        scheme = _scheme(cfg, where, bytes_per_weight)
    except _NoSize as err:
        scheme = _unread(str(err), f"quantization_config with {err}", where, bytes_per_weight,
                         _SIZES_FIX)
    name = checkpoint_dtype(cfg)[1]
    if name in SERVED_16BIT:
        scheme.notes.append(SERVED_16BIT_NOTE.format(name=name))
    return scheme


def _scheme(cfg: dict, where: str, bytes_per_weight: float | None) -> Scheme:
    base, dtype = dtype_bytes(cfg, where, bytes_per_weight)
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return Scheme(f"{dtype} weights", base)
    method = str(q.get("quant_method", "")).lower()
    # (transformers writes modules_to_not_convert; vLLM's fp8 config reads ignored_layers)
    skip = list(q.get("modules_to_not_convert") or []) + list(q.get("ignored_layers") or [])
    if method == "awq":
        bits: int = _width(q, "bits" if "bits" in q else "w_bit", 4, "awq")
        _group_size(q, "group_size" if "group_size" in q else "q_group_size", "awq")
        zero = config_bool(q.get("zero_point", True), "zero_point", where)

        def awq(t: Tensor) -> float:
            out, inp = t.shape[0], t.shape[-1]
            g = _group(q.get("group_size", q.get("q_group_size", 128)), inp)
            return out * inp * (bits + (16 + (bits if zero else 0)) / g)

        g, per = _group_words(q.get("group_size", q.get("q_group_size", 128)))
        per_group = f"fp16 scale + int{bits} zero" if zero else "fp16 scale"
        return Scheme(f"AWQ int{bits} {g} ({per_group} per {per})", base, "bf16", awq, skip,
                      skip_children=True)
    if method == "gptq":
        bits = _width(q, "bits", 4, "gptq")
        _group_size(q, "group_size", "gptq")

        def gptq(t: Tensor) -> float:
            out, inp = t.shape[0], t.shape[-1]
            g = _group(q.get("group_size", 128), inp)
            return out * inp * (bits + (16 + bits) / g) + 32 * inp

        # GPTQModel's per-module rules: "-:<regex>" leaves the modules it matches unquantised;
        # a positive one ("+:<regex>" or a bare name) may give them other bits or groups
        dynamic = q.get("dynamic") or {}
        rules = dynamic.items() if isinstance(dynamic, dict) else ()
        other = [k for k, v in rules if not str(k).startswith("-:") and isinstance(v, dict)
                 and any(v.get(f) not in (None, q.get(f)) for f in ("bits", "group_size"))]
        if other:
            return _unread(f"GPTQ dynamic rule {other[0]!r} gives its modules other bits or "
                           "groups", f"GPTQ with dynamic rule {other[0]!r}", where,
                           bytes_per_weight, _SIZE_FIX)
        skip += [f"re:{str(k)[2:]}" for k, _ in rules if str(k).startswith("-:")]
        g, per = _group_words(q.get("group_size", 128))
        return Scheme(f"GPTQ int{bits} {g} (fp16 scale + packed zero per {per}, int32 g_idx "
                      "per input)", base, "bf16", gptq, skip,
                      skip_lm_head=not config_bool(q.get("lm_head", False), "lm_head", where),
                      skip_children=True)
    if method == "fp8":
        block = q.get("weight_block_size")
        _block(block, "weight_block_size", "fp8")

        def fp8(t: Tensor) -> float:
            out, inp = t.shape[0], t.shape[-1]
            scales = (math.ceil(out / block[0]) * math.ceil(inp / block[1]) if block else 1)
            return out * inp * 8 + 32 * scales

        act = q.get("activation_scheme")
        return Scheme(f"FP8 e4m3 weights, fp32 scale per {block[0]}x{block[1]} block"
                      if block else "FP8 e4m3 weights, fp32 scale per tensor",
                      base, "fp8" if act else "bf16", fp8, skip)
    if method == "compressed-tensors":
        return _compressed_tensors(q, base, where, bytes_per_weight)
    if method == "modelopt":
        return _modelopt(q, base, where, bytes_per_weight)
    if method == "bitsandbytes":
        return _bitsandbytes(q, base, where)
    if method == "mxfp4":
        return _mxfp4(q, base)
    return _unread(f"quantization_config quant_method {method or '(none)'!r} is not one card "
                   "add reads (awq, gptq, fp8, compressed-tensors, modelopt, bitsandbytes, "
                   "mxfp4)",
                   f"quant_method {method or '(none)'!r}", where, bytes_per_weight, _SIZE_FIX)


def _compressed_tensors(q: dict, base: float, where: str, given: float | None) -> Scheme:
    groups = q.get("config_groups") or {}
    if not isinstance(groups, dict) or not groups:
        return _unread("compressed-tensors config without config_groups",
                       "compressed-tensors without config_groups", where, given,
                       "pass --bytes-per-weight")
    if len(groups) > 1:
        return _unread(f"compressed-tensors config with {len(groups)} config_groups "
                       "(a mixed scheme)", f"compressed-tensors with {len(groups)} "
                       "config_groups", where, given, _SIZE_FIX)
    group = next(iter(groups.values()))
    targets = [str(t) for t in group.get("targets") or ["Linear"]]
    classes = [t for t in targets if t != "Linear" and not t.startswith("re:")
               and "." not in t and t[:1].isupper()]
    if classes:   # a module class other than Linear: which weights it holds is not known here
        return _unread(f"compressed-tensors targets {', '.join(classes)}: a module class card "
                       "add cannot map to weights", f"compressed-tensors targets "
                       f"{', '.join(classes)}", where, given, _SIZE_FIX)
    only = None if "Linear" in targets else targets
    w = group.get("weights") or {}
    bits = _width(w, "num_bits", 8, "compressed-tensors")
    _group_size(w, "group_size", "compressed-tensors")
    _block(w.get("block_structure"), "block_structure", "compressed-tensors")
    strategy = str(w.get("strategy", "tensor"))
    if strategy not in ("tensor", "channel", "group", "tensor_group", "block"):
        return _unread(f"compressed-tensors weight strategy {strategy!r} is not known",
                       f"compressed-tensors strategy {strategy!r}", where, given,
                       "pass --bytes-per-weight")
    symmetric = config_bool(w.get("symmetric", True), "symmetric", where)
    scale_bits = SCALE_BITS.get(str(w.get("scale_dtype")), 8 if strategy == "tensor_group"
                                else int(base * 8))
    zero_bits = 0 if symmetric else bits
    acts = group.get("input_activations")
    # NVFP4 (tensor_group) keeps an fp32 global scale per weight tensor, and one for its input
    globals_bits = 32 + (32 if isinstance(acts, dict) and acts.get("strategy") == "tensor_group"
                         else 0)

    def ct(t: Tensor) -> float:
        out, inp = t.shape[0], t.shape[-1]
        codes = out * inp * bits
        if strategy == "tensor":
            return codes + scale_bits + zero_bits
        if strategy == "channel":
            return codes + out * (scale_bits + zero_bits)
        if strategy in ("group", "tensor_group"):
            g = _group(w.get("group_size"), inp)
            extra = globals_bits if strategy == "tensor_group" else 0
            return codes + out * math.ceil(inp / g) * (scale_bits + zero_bits) + extra
        if strategy == "block":
            bo, bi = w.get("block_structure") or (128, 128)
            return codes + math.ceil(out / bo) * math.ceil(inp / bi) * (scale_bits + zero_bits)
        raise InputError(f"compressed-tensors weight strategy {strategy!r} is not known",
                         file=where, column="quantization_config", fix="pass --bytes-per-weight")

    compute = "bf16"
    act_bits = (_width(acts, "num_bits", 16, "compressed-tensors input_activations")
                if isinstance(acts, dict) else 16)
    if isinstance(acts, dict) and acts.get("type") == "float":
        compute = {8: "fp8", 4: "fp4"}.get(act_bits, "bf16")
    elif isinstance(acts, dict) and acts.get("type") == "int" and act_bits == 8:
        compute = "int8"   # W8A8 / W4A8 int: int8 GEMMs
    kind = w.get("type", "int")
    size = (f" g{w.get('group_size')}" if strategy in ("group", "tensor_group") else
            f" {strategy}")
    on = "" if only is None else f" on {', '.join(only)} only"
    return Scheme(f"compressed-tensors {kind}{bits}{size} ({q.get('format', 'packed')}){on}",
                  base, compute, ct, list(q.get("ignore") or []), skip_lm_head=False,
                  targets=only)


def _modelopt(q: dict, base: float, where: str, given: float | None) -> Scheme:
    nested = q.get("quantization")
    inner: dict = nested if isinstance(nested, dict) else q
    algo = str(inner.get("quant_algo", "")).upper()
    skip = list(inner.get("exclude_modules") or q.get("exclude_modules") or [])
    if algo == "FP8":
        return Scheme("modelopt FP8 (fp32 per-tensor scales)", base, "fp8",
                      lambda t: t.shape[0] * t.shape[-1] * 8 + 64, skip, skip_lm_head=False)
    if algo == "NVFP4":
        _group_size(inner, "group_size", "modelopt")
        g = inner.get("group_size")
        g = 16 if g is None else g
        if g < 1:
            raise _NoSize(f"modelopt group_size {g} is not a group of inputs (NVFP4 scales "
                          "16 weights)")
        return Scheme(f"modelopt NVFP4 (fp8 scale per {g} weights, fp32 global scales)", base,
                      "fp4", lambda t: t.shape[0] * t.shape[-1] * (4 + 8 / g) + 64, skip,
                      skip_lm_head=False)
    return _unread(f"modelopt quant_algo {algo or '(none)'!r} is not one card add reads "
                   "(FP8, NVFP4)", f"modelopt quant_algo {algo or '(none)'!r}", where, given,
                   "pass --bytes-per-weight")


def _bitsandbytes(q: dict, base: float, where: str) -> Scheme:
    """bitsandbytes 4-bit (nf4 / fp4: an fp32 absmax per 64, or with double quant an 8-bit
    one plus an fp32 per 256 of those) or int8 (an fp32 scale per output row). Its flags are
    read as config.json flags (:func:`config_bool`): ``bool("false")`` is true, so
    ``load_in_4bit: "false"`` beside ``load_in_8bit: true`` was carded at 4 bits (0.6632 B a
    weight for Llama-3.1-8B, not int8's 1.0708), and a ``"false"`` double quant as one."""
    skip = list(q.get("llm_int8_skip_modules") or [])

    def flag(key: str) -> bool:
        return any(config_bool(q[k], k, where) for k in (key, f"_{key}")
                   if q.get(k) is not None)

    if flag("load_in_4bit"):
        double = flag("bnb_4bit_use_double_quant")
        extra = 8 / 64 + 32 / (64 * 256) if double else 32 / 64
        return Scheme(f"bitsandbytes {q.get('bnb_4bit_quant_type', 'nf4')} 4-bit"
                      f"{' (double quant)' if double else ''}", base, "bf16",
                      lambda t: t.shape[0] * t.shape[-1] * (4 + extra), skip,
                      skip_children=True)
    return Scheme("bitsandbytes int8", base, "bf16",
                  lambda t: t.shape[0] * t.shape[-1] * 8 + 32 * t.shape[0], skip,
                  skip_children=True)


#: An MXFP4 block: 32 values share one 8-bit power-of-two (e8m0) scale (OCP MX spec).
MXFP4_BLOCK = 32
#: The weights transformers' MXFP4 integration converts (gpt-oss's fused expert projections).
MXFP4_TARGETS = [r"re:\.mlp\.experts\.(gate_up_proj|down_proj)$"]


def _mxfp4(q: dict, base: float) -> Scheme:
    """gpt-oss's MXFP4: the experts' weights at 4 bits + an e8m0 scale per 32 inputs (a
    (out, in) projection: out x in x 4 + out x ceil(in / 32) x 8 bits); everything else at
    the model dtype. The config quantises no activations, so the matmuls are priced at bf16
    (weights dequantised in the kernel), as for AWQ / GPTQ."""
    def mxfp4(t: Tensor) -> float:
        out, inp = t.shape[0], t.shape[-1]
        return out * inp * 4 + out * math.ceil(inp / MXFP4_BLOCK) * 8

    return Scheme(f"MXFP4 experts (e2m1 + e8m0 scale per {MXFP4_BLOCK}: 4.25 bits), the rest "
                  "bf16", base, "bf16", mxfp4, list(q.get("modules_to_not_convert") or []),
                  targets=list(MXFP4_TARGETS), skip_children=True,
                  notes=["compute_dtype bf16: the checkpoint quantises weights only, not "
                         "activations; whether an engine multiplies the MXFP4 experts with "
                         "8-bit activations (FlashInfer's MXFP4 x MXFP8 MoE kernels on "
                         "Blackwell, vllm-project/vllm#35528) is its choice, not the file's, "
                         "and not read here (--compute-dtype fp8 prices such a run)"])


#: The strategies of an fp8 ``kv_cache_scheme`` card add reads (compressed-tensors; vLLM's
#: fp8 caches take one scale per tensor or per attention head): scales per layer, none per
#: token, so a token's cache is its values at 8 bits.
KV_FP8_STRATEGIES = ("tensor", "attn_head")
#: The fields of a ``kv_cache_scheme`` card add reads; those it takes at the value it assumes
#: (symmetric scales per tensor or attention head, none per group: a token's cache is its
#: values' bits); and those that leave a token's cached bytes as they are (calibration, and
#: dtypes of the per-tensor scales). compressed-tensors' QuantizationArgs fields.
KV_SCHEME_READ = ("num_bits", "type", "strategy", "dynamic")
KV_SCHEME_ASSUMED: dict[str, object] = {"symmetric": True, "group_size": None,
                                        "block_structure": None}
KV_SCHEME_IGNORED = ("observer", "observer_kwargs", "actorder", "scale_dtype", "zp_dtype")
#: The KV caches card add reads, for its messages.
KV_READ = ("fp8: compressed-tensors kv_cache_scheme of 8-bit floats per tensor or attention "
           "head, modelopt kv_cache_quant_algo FP8")


@dataclass(frozen=True)
class KvCache:
    """The KV cache a checkpoint's ``quantization_config`` declares: ``bits`` per cached value
    of a default launch (None: the 16-bit cache, for a declaration card add does not read or
    one the engines follow only when told to; ``said`` says which in one line, on stderr, in
    the JSON's ``warnings`` and in the card's notes, as it does a field of the declaration
    card add does not read at 8 bits too) and ``label``, what was declared."""

    bits: float | None
    label: str
    said: str = ""


def kv_cache_from_config(cfg: dict) -> KvCache | None:
    """The KV cache ``cfg``'s ``quantization_config`` declares (compressed-tensors'
    ``kv_cache_scheme``; TensorRT Model Optimizer's ``kv_cache_quant_algo``, in config.json
    or in hf_quant_config.json's ``quantization``, or its ``kv_cache_scheme``, as vLLM's
    ``get_kv_cache_quant_algo_string`` reads them); None when it declares none (no
    quantization_config, or the keys absent or null).

    Only a modelopt declaration sets the cache of a default launch (8 bits): vLLM's
    ``--kv-cache-dtype auto`` follows a ``quant_method`` starting ``modelopt`` alone
    (``get_kv_cache_quant_algo_string``), SGLang's a quant config's ``kv_cache_quant_algo``
    FP8, which its modelopt configs set and its compressed-tensors one does not. Any other
    fp8 declaration (compressed-tensors' ``kv_cache_scheme``, as llm-compressor writes it)
    is used only when the engine is launched with ``--kv-cache-dtype fp8``: the card keeps
    the 16-bit cache, which a default launch holds, and says so (an 8-bit card counted half
    of that cache in the memory check and the read). A modelopt ``kv_cache_scheme`` is fp8 to
    vLLM's auto only with ``dynamic`` false (true or left out: the 16-bit cache), to SGLang's
    by its type and bits alone: with ``dynamic`` not false the card keeps 16 bits and says
    the two differ. A scheme's field card add does not read (:func:`_unread_fields`) is said
    in the same line, or in a line of its own at 8 bits.

    >>> kv = kv_cache_from_config({"quantization_config": {"quant_method": "compressed-tensors",
    ...     "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"}}})
    >>> kv.bits is None, "--kv-cache-dtype fp8" in kv.said
    (True, True)
    >>> kv_cache_from_config({"quantization_config": {"quant_method": "modelopt",
    ...     "kv_cache_quant_algo": "FP8"}}).bits
    8.0
    >>> print(kv_cache_from_config({"quantization_config": {"quant_method": "modelopt",
    ...     "kv_cache_quant_algo": "NVFP4"}}).said[:65])
    quantization_config kv_cache_quant_algo 'NVFP4' is not a KV cache
    >>> kv_cache_from_config({"quantization_config": {"kv_cache_scheme": None}}) is None
    True
    >>> modelopt = {"quant_method": "modelopt", "quant_algo": "FP8"}
    >>> kv_cache_from_config({"quantization_config": {**modelopt, "kv_cache_scheme": {
    ...     "num_bits": 8, "type": "float", "dynamic": False}}}).bits
    8.0
    >>> kv = kv_cache_from_config({"quantization_config": {**modelopt, "kv_cache_scheme": {
    ...     "num_bits": 8, "type": "float", "dynamic": True}}})
    >>> kv.bits is None, kv.said[:74]
    (True, 'quantization_config kv_cache_scheme float8 (strategy tensor), dynamic true')
    """
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return None
    nested = q.get("quantization")
    inner: dict = nested if isinstance(nested, dict) else {}
    scheme = inner.get("kv_cache_scheme") or q.get("kv_cache_scheme")
    algo = inner.get("kv_cache_quant_algo") or q.get("kv_cache_quant_algo")
    # (vLLM: quant_method.startswith("modelopt"); the sidecar reads as "modelopt")
    modelopt = str(q.get("quant_method") or "").lower().startswith("modelopt")
    if isinstance(scheme, dict):
        kind = str(scheme.get("type", "int")).lower()
        bits = scheme.get("num_bits", 8)
        strategy = str(scheme.get("strategy") or "tensor")
        label = f"kv_cache_scheme {kind}{bits} (strategy {strategy})"
        unread = _unread_fields(scheme)
        if kind == "float" and bits == 8 and not isinstance(bits, bool) \
                and strategy in KV_FP8_STRATEGIES:
            if not modelopt:
                return _kv_at_launch(label, unread)
            if scheme.get("dynamic") is not False:   # (as vLLM reads it: false, not absent)
                return _kv_engines_differ(label, scheme.get("dynamic", None), unread)
            return KvCache(8.0, label, said=(f"quantization_config {label}{unread}"
                                             if unread else ""))
        return _kv_unread(label, unread)
    if scheme:
        return _kv_unread(f"kv_cache_scheme {scheme!r}")
    if algo:
        if str(algo).upper() == "FP8":
            label = "kv_cache_quant_algo FP8"
            return KvCache(8.0, label) if modelopt else _kv_at_launch(label)
        return _kv_unread(f"kv_cache_quant_algo {algo!r}")
    return None


def _unread_fields(scheme: dict) -> str:
    """A clause naming the fields of a ``kv_cache_scheme`` card add neither reads nor may pass
    over (:data:`KV_SCHEME_READ`, :data:`KV_SCHEME_ASSUMED` at its value,
    :data:`KV_SCHEME_IGNORED`), '' when there are none.

    >>> _unread_fields({"num_bits": 8, "symmetric": True, "observer": "minmax"})
    ''
    >>> _unread_fields({"num_bits": 8, "symmetric": False, "group_size": 64})
    ': its fields symmetric False, group_size 64 are not read (the card assumes symmetric \
scales per tensor or attention head, none per group)'
    """
    unread = [f"{k} {v}" for k, v in scheme.items()
              if k not in KV_SCHEME_READ and k not in KV_SCHEME_IGNORED
              and not (k in KV_SCHEME_ASSUMED and v is KV_SCHEME_ASSUMED[k])]
    if not unread:
        return ""
    return (f": its field{'s' if len(unread) > 1 else ''} {', '.join(unread)} "
            f"{'are' if len(unread) > 1 else 'is'} not read (the card assumes symmetric scales "
            "per tensor or attention head, none per group)")


def _kv_unread(label: str, unread: str = "") -> KvCache:
    return KvCache(None, label, said=(
        f"quantization_config {label} is not a KV cache card add reads ({KV_READ}){unread}: "
        "kv_bytes_per_token is the 16-bit cache's and kv_cache_bits is left blank (bf16 "
        "assumed); predict --kv-cache prices the cache a deployment keeps, or write the "
        "card's kv_bytes_per_token and kv_cache_bits"))


def _kv_at_launch(label: str, unread: str = "") -> KvCache:
    """An fp8 KV cache declared outside modelopt (:func:`kv_cache_from_config`): the 16-bit
    cache of a default launch, and the line saying what the fp8 launch is."""
    return KvCache(None, label, said=(
        f"quantization_config {label} declares an fp8 KV cache, which vLLM and SGLang use only "
        "when launched with --kv-cache-dtype fp8 (SGLang: fp8_e4m3; their auto follows a "
        "modelopt declaration only): kv_bytes_per_token is the 16-bit cache a default launch "
        f"keeps and kv_cache_bits is left blank; predict --kv-cache fp8 answers for the fp8 "
        f"launch{unread.replace(': its', '; its', 1)}"))


def _kv_engines_differ(label: str, dynamic: object, unread: str = "") -> KvCache:
    """A modelopt ``kv_cache_scheme`` of 8-bit floats whose ``dynamic`` is not false: vLLM's
    auto keeps the 16-bit cache (``get_kv_cache_quant_algo_string`` takes a scheme as fp8
    only with ``dynamic`` false, and warns), SGLang's takes it as fp8 (its modelopt configs
    read the type and bits alone). The card keeps the 16-bit cache, the larger of the two a
    default launch holds, and says so."""
    given = "not given" if dynamic is None else str(dynamic).lower()
    return KvCache(None, label, said=(
        f"quantization_config {label}, dynamic {given}, declares an fp8 KV cache that "
        "vLLM's --kv-cache-dtype auto does not follow (it takes a modelopt kv_cache_scheme as "
        "fp8 only when dynamic is false, else keeps the 16-bit cache) and SGLang's does (its "
        "type and bits alone): kv_bytes_per_token is the 16-bit cache and kv_cache_bits is "
        "left blank; predict --kv-cache fp8 answers for SGLang's default launch (and vLLM's "
        f"with --kv-cache-dtype fp8){unread.replace(': its', '; its', 1)}"))


@dataclass(frozen=True)
class WeightBytes:
    """Bytes of the main model's weights: in the file, and per token (routed experts at top_k /
    experts); their averages per parameter."""

    total_bytes: float
    active_bytes: float
    total_params: int
    active_params: float

    @property
    def file_average(self) -> float:
        return self.total_bytes / self.total_params

    @property
    def active_average(self) -> float:
        return self.active_bytes / self.active_params


def weight_bytes(shape: ModelShape, scheme: Scheme, *, mtp: bool = False) -> WeightBytes:
    total = active = 0.0
    for t in shape.tensors:
        if t.mtp != mtp:
            continue
        b = scheme.nbytes(t) * t.count
        total += b
        active += b * t.active
    return WeightBytes(total, active, shape.total(mtp=mtp), shape.active(mtp=mtp))

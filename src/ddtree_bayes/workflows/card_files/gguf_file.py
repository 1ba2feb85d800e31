"""A GGUF file's header -> its weight tensors, each with its stored type and byte size.

Read with ``gguf.GGUFReader`` from the ``gguf`` package llama.cpp publishes (``pip install
'ddtree-bayes[gguf]'``): it memory-maps the file and parses the key-value metadata and the
tensor table; no tensor data is read. Key names are llama.cpp's (``gguf-py/gguf/constants.py``
``Keys.LLM`` / ``Keys.Attention``: ``{arch}.block_count``, ``{arch}.attention.head_count_kv``,
``{arch}.expert_used_count``, ...); tensor names are its ``MODEL_TENSOR`` names
(``token_embd``, ``blk.N.attn_q``, ``blk.N.ffn_gate_exps``, ``output``, ...). A tensor's bytes
are ``n_elements x type_size / block_size`` of its ``GGMLQuantizationType``
(``GGML_QUANT_SIZES``): Q4_K 144 bytes per 256 weights = 4.5 bits, Q6_K 210 per 256 = 6.5625.
"""

from __future__ import annotations

import re
from pathlib import Path

from ddtree_bayes.core.errors import InputError
from ddtree_bayes.core.model_cards import card_context
from ddtree_bayes.workflows.card_files.hf_config import describe_window, sliding_kinds
from ddtree_bayes.workflows.card_files.shapes import ModelShape, Tensor

BLOCK = re.compile(r"blk\.(\d+)\.(.+)")
#: One tensor per expert (``blk.N.ffn_gate.E``), as GGUF files stored experts before llama.cpp
#: merged them into ``ffn_gate_exps`` (its loader still reads them: ``LLM_TENSOR_FFN_GATE_EXP``).
EXPERT = re.compile(r"ffn_(gate|up|down)\.\d+(\.|$)")
#: Architectures whose layers llama.cpp sets sliding-window by a pattern (every N-th layer full
#: attention; ``hparams.set_swa_pattern(N)`` in its ``llama-model.cpp``), over the
#: ``{arch}.attention.sliding_window`` tokens the file gives: N is the arch's default period,
#: which the file's own ``{arch}.attention.sliding_window_pattern`` replaces (see
#: :func:`sliding_layers`).
SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2, "llama4": 4, "cohere2": 4}
#: Architectures whose window llama.cpp reads and switches off, running every layer at full
#: attention: phi3 ("Phi SWA is currently disabled", ggml-org/llama.cpp#13676:
#: ``swa_type = LLAMA_SWA_TYPE_NONE; n_swa = 0; set_swa_pattern(1)``).
SWA_OFF = {"phi3"}
#: The window llama.cpp gives an arch whose file leaves ``{arch}.attention.sliding_window`` out
#: (gemma2: ``hparams.n_swa = 4096; // default value of gemma 2``); the others then have none.
SWA_WINDOW = {"gemma2": 4096}
#: Architectures whose "sliding" layers are chunked attention at a chunk llama.cpp sets itself,
#: whatever ``{arch}.attention.sliding_window`` says (only 0 there turns chunking off): llama4,
#: ``swa_type = LLAMA_SWA_TYPE_CHUNKED; n_swa = 8192; set_swa_pattern(4)`` ("3 chunked - 1
#: full"), as transformers' Llama 4 chunks its RoPE layers at ``attention_chunk_size`` 8192.
CHUNKED = {"llama4": 8192}
ATTENTION = re.compile(r"attn_(q|k|v|output|qkv|q_a|q_b|kv_a_mqa|kv_b|k_b|v_b|gate)(\.|$)")
#: The attention tensors that make keys for the cache: a layer holding one caches K and V
#: (llama.cpp's hybrid memory gives a KV cache to its attention layers only; Falcon-H1 runs
#: attention beside its Mamba mixer in every layer, Nemotron-H has MLP-only layers too).
KEYS = re.compile(r"attn_(k|qkv|kv_a_mqa|k_b)(\.|$)")


def _reader(path: Path):
    try:
        from gguf import GGUFReader
    except ImportError:
        raise InputError("reading a GGUF file needs the gguf package (llama.cpp's gguf-py)",
                         fix="pip install 'ddtree-bayes[gguf]' (or pip install gguf)") from None
    if not path.is_file():
        raise InputError("file not found" if not path.exists() else "not a file",
                         file=str(path), fix="pass a .gguf model file")
    try:
        return GGUFReader(str(path))
    except (ValueError, OSError, KeyError, IndexError) as err:
        raise InputError(f"not a readable GGUF file: {err}", file=str(path),
                         fix="pass a complete .gguf file (the first shard of a split model)") from None


def _field(reader, key: str):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def _kind(name: str) -> str:
    if name.startswith("token_embd"):
        return "embedding"
    if name.startswith("output."):
        return "lm_head"
    tail = BLOCK.match(name)
    part = tail.group(2) if tail else name
    if "norm" in part:
        return "norm"
    if "_exps" in part or EXPERT.match(part):
        return "expert"
    if "shexp" in part:
        return "shared_expert"
    if part.startswith("ffn_gate_inp") or part.startswith("exp_probs_b"):
        return "router"
    if part.startswith("ffn_"):
        return "mlp"
    if part.startswith(("ssm_", "shortconv.")):   # (Mamba; LFM2's short convolution)
        return "linear_attention"
    if ATTENTION.match(part):
        return "attention"
    return "other"


def shape_from_gguf(path: str | Path) -> tuple[ModelShape, dict]:
    """The tensors and architecture of a GGUF file, and the metadata it was read from."""
    path = Path(path)
    reader = _reader(path)
    shards = split_shards(reader, path)
    arch = _field(reader, "general.architecture")
    if not arch:
        raise InputError("no general.architecture in the header", file=str(path),
                         fix="pass a model GGUF file (not a vocabulary or adapter file)")

    def key(name: str):
        return _field(reader, name.format(arch=arch))

    blocks = key("{arch}.block_count")
    hidden = key("{arch}.embedding_length")
    if not blocks or not hidden:
        raise InputError(f"no {arch}.block_count / {arch}.embedding_length in the header",
                         file=str(path), fix="pass a model GGUF file")
    nextn = int(key("{arch}.nextn_predict_layers") or 0)
    layers = int(blocks) - nextn
    experts = key("{arch}.expert_count")
    topk = key("{arch}.expert_used_count")
    if experts and topk and int(topk) > int(experts):   # (as check_sizes refuses it in a config)
        raise InputError(f"'{arch}.expert_used_count' is {int(topk)} but '{arch}.expert_count' "
                         f"is {int(experts)}: no step routes a token to more experts than exist",
                         file=str(path), fix="pass the model's own GGUF file")
    tensors: list[Tensor] = []
    hybrid_layers = set()
    key_layers = set()
    latent_layers = set()
    vocab = key("{arch}.vocab_size")
    for t in (t for r in [reader, *(_reader(p) for p in shards[1:])] for t in r.tensors):
        name = str(t.name)
        kind = _kind(name)
        m = BLOCK.match(name)
        layer = int(m.group(1)) if m else None
        if kind == "linear_attention" and layer is not None:
            hybrid_layers.add(layer)
        if m and KEYS.match(m.group(2)) and layer is not None:
            key_layers.add(layer)
            if m.group(2).startswith("attn_kv_a_mqa"):   # (MLA: the latent it caches)
                latent_layers.add(layer)
        if kind == "embedding" and not vocab:
            vocab = int(max(t.shape))
        active = (int(topk) / int(experts)) if kind == "expert" and experts and topk else 1.0
        tensors.append(Tensor(name, tuple(int(d) for d in reversed(t.shape.tolist())), kind,
                              linear=kind not in ("norm", "embedding"),
                              active=active, mtp=layer is not None and layer >= layers,
                              nbytes=int(t.n_bytes), storage=t.tensor_type.name))
    routed = next((t.name for t in tensors if t.kind == "expert"), None)
    if routed and not (experts and topk):
        # every expert would count as active: a 30.5 B Qwen3-30B-A3B read as 30.5 B active
        missing = f"{arch}.expert_used_count" if experts else f"{arch}.expert_count"
        raise InputError(f"expert tensors ({routed}) but no '{missing}' in the header: how "
                         "many experts a token uses is unknown", file=str(path),
                         fix="pass the model's own, complete GGUF file; llama.cpp loads none "
                             "without it")
    heads = _int(key("{arch}.attention.head_count"))
    kv_per_layer = key("{arch}.attention.head_count_kv")
    kv_heads = _int(kv_per_layer)
    head_dim = _int(key("{arch}.attention.key_length")) or (int(hidden) // heads if heads else None)
    shape = ModelShape(architecture=str(arch), tensors=tensors, layers=layers,
                       hidden_size=int(hidden), vocab_size=int(vocab or 0),
                       heads=_int(heads), kv_heads=_int(kv_heads) or _int(heads),
                       head_dim=_int(head_dim), experts=_int(experts), experts_topk=_int(topk),
                       shared_experts=int(key("{arch}.expert_shared_count") or 0),
                       tied_embeddings=not any(t.kind == "lm_head" for t in tensors),
                       mtp_layers=nextn,
                       max_context_tokens=card_context(
                           one_context(key("{arch}.context_length"),
                                       f"{arch}.context_length", path),
                           f"{arch}.context_length", str(path),
                           "pass the model's own GGUF file"),
                       intermediate_size=_int(key("{arch}.expert_feed_forward_length")
                                              or key("{arch}.feed_forward_length")))
    shape.recurrent_layers = len({i for i in hybrid_layers if i < layers})
    # (a per-layer head_count, as OpenELM's, of unequal entries: no one count to shard)
    raw_heads = key("{arch}.attention.head_count")
    if not isinstance(raw_heads, list) or len(set(raw_heads)) == 1:
        shape.q_heads = _int(raw_heads)
    if shape.experts and not shape.shared_experts and any(t.kind == "shared_expert"
                                                          for t in tensors):
        shape.shared_experts = 1
    rank = key("{arch}.attention.kv_lora_rank")
    if rank:
        rope = int(key("{arch}.rope.dimension_count") or 0)
        # the latent is cached where a layer makes it: every layer of a DeepSeek-style file,
        # 1 in 4 of a hybrid of linear-attention and MLA layers (Kimi-Linear)
        mla = len({i for i in latent_layers if i < layers}) or layers
        shape.attention = (f"MLA (kv_lora_rank {rank} + rope dims {rope}), {heads} heads"
                           + (f", in {mla} of {layers} layers (the others linear attention)"
                              if mla < layers else ""))
        shape.kv_bytes_per_token = (int(rank) + rope) * mla * 2
        shape.kv_formula = (f"({rank} + {rope}) x {mla} {'MLA ' if mla < layers else ''}"
                            "layers x 2 bytes")
        shape.kv_heads = 1   # (the latent: one head every tensor-parallel GPU holds whole)
    elif heads:   # (no head_count_kv: llama.cpp's n_head_kv defaults to n_head, MHA)
        recurrent = {i for i in hybrid_layers if i < layers}
        cached = cached_heads(kv_per_layer, heads if kv_heads is None else kv_heads, layers,
                              recurrent, key_layers, path)
        full = len(cached)
        kind = "MHA" if shape.kv_heads == shape.heads else "GQA"
        both = len(recurrent & set(cached))
        neither = layers - len(recurrent | set(cached))
        shape.attention = (f"{kind} {heads} q heads / {shape.kv_heads} kv heads, head_dim "
                           f"{head_dim}" if full == layers and not recurrent else
                           f"hybrid: {len(recurrent)} linear-attention + {full} full-attention "
                           "layers" + (f" ({both} layers run both in parallel)" if both else "")
                           + (f", {neither} with neither (MLP only)" if neither else "")
                           + f", {heads} q heads / {shape.kv_heads} kv heads, head_dim "
                           f"{head_dim}")
        kv_total = sum(cached.values())
        given = key("{arch}.attention.sliding_window")
        pattern = key("{arch}.attention.sliding_window_pattern")
        window = swa_window(str(arch), given)
        given_n = _int(given)
        if (given_n is not None and given_n < 1 and str(arch) not in CHUNKED
                and str(arch) not in SWA_OFF and full == layers
                and (str(arch) in SWA_PATTERN or isinstance(pattern, list))):
            # (a gemma3 file was carded with every layer at full attention, a gemma2 one at
            # the default 4096-token window, as card add refuses a config's sliding_window 0)
            sliding = sliding_layers(pattern, SWA_PATTERN.get(str(arch), 1), layers, path)
            if sliding:
                name = f"{arch}.attention.sliding_window"
                raise InputError(f"{name} is {given_n}, but {sliding} of {layers} layers "
                                 "slide: a window holds at least 1 token", file=str(path),
                                 column=name, fix="pass the model's own GGUF file")
        if window and full == layers and not (str(arch) in SWA_PATTERN
                                              or isinstance(pattern, list)):
            shape.notes.append(unapplied_window(str(arch), window, shape.max_context_tokens,
                                                path))
        elif window and full == layers:
            # the sliding layers cache at most the window (llama.cpp's iSWA cache), not the
            # context: only the full-attention layers' cache grows with it (a per-layer list
            # of flags says which slide for any arch; else the arch's period, or the file's)
            sliding = sliding_layers(pattern, SWA_PATTERN.get(str(arch), 1), layers, path)
            full = layers - sliding
            kv_total = full * int(shape.kv_heads or 0)
            if sliding:
                shape.attention += describe_window(
                    shape, sliding, full, int(shape.kv_heads or 0), int(head_dim or 0), window,
                    "chunked-attention" if str(arch) in CHUNKED else "sliding-window")
        # llama.cpp sizes K by key_length and V by value_length (192 / 128 in DeepSeek-V2-style
        # files without MLA); a file without value_length has V as wide as K
        value_dim = _int(key("{arch}.attention.value_length")) or head_dim
        which = "full-attention " if full < layers else ""
        shape.kv_bytes_per_token = kv_total * (int(head_dim or 0) + int(value_dim or 0)) * 2
        count = (f"{shape.kv_heads} kv heads" if kv_total == full * int(shape.kv_heads or 0)
                 else f"{kv_total} kv heads in all")
        widths = (f"2 x {full} {which}layers x {count} x {head_dim}"
                  if value_dim == head_dim else
                  f"{full} {which}layers x {count} x ({head_dim} keys + {value_dim} values)")
        shape.kv_formula = f"{widths} x 2 bytes (f16 cache)"
    metadata = {"name": _field(reader, "general.name"), "file_type": _field(reader, "general.file_type"),
                "architecture": arch, "shards": len(shards)}
    want = _field(reader, "split.tensors.count")
    if want is not None and int(want) != len(tensors):
        raise InputError(f"the {len(shards)} shards hold {len(tensors)} tensors, but the first "
                         f"says the model has {int(want)}", file=str(path),
                         fix="pass the first shard of one complete download")
    return shape, metadata


def unapplied_window(arch: str, window: int, context: int | None, path: Path) -> str:
    """The note on a ``{arch}.attention.sliding_window`` a file gives for an arch whose
    sliding layers card add does not know (not in :data:`SWA_PATTERN`, no per-layer flags):
    every layer is counted at full attention, which is right where llama.cpp switches the
    window off (:data:`SWA_OFF`) or the window bounds no context; anything else is refused
    (which layers slide is set in llama.cpp's code for the arch: cohere2's three in four,
    olmo2's, exaone4's; counting them all as full priced the cache several times too big)."""
    key = f"{arch}.attention.sliding_window"
    if arch in SWA_OFF:
        return (f"{key} {window} is not applied: llama.cpp runs {arch} with every layer at "
                "full attention (its window switched off, ggml-org/llama.cpp#13676), as the "
                "card counts it")
    if context is not None and window >= context:
        return (f"{key} {window} is not below context_length {context}: it bounds no layer's "
                "cache, so every layer counts as full attention")
    raise InputError(f"the file gives a {window}-token sliding window, but which of {arch}'s "
                     "layers slide is set in llama.cpp's code for the arch, which card add does "
                     f"not know (it knows {', '.join(sorted(SWA_PATTERN))}, and per-layer "
                     "sliding_window_pattern flags): counting every layer at full attention "
                     "would price the cache several times too big", file=str(path), column=key,
                     fix="write the card's row by hand (docs/cli.md, card add): "
                         "kv_bytes_per_token for the full-attention layers, "
                         "kv_window_bytes_per_token and kv_window_tokens for the sliding ones")


def swa_window(arch: str, given) -> int | None:
    """The tokens a sliding (or chunked) layer of ``arch`` caches at most, as llama.cpp sets
    them from the file's ``{arch}.attention.sliding_window`` (``given``; None when absent).

    >>> swa_window("gemma3", 1024), swa_window("gemma2", None), swa_window("llama", None)
    (1024, 4096, None)
    >>> swa_window("llama4", None), swa_window("llama4", 4096), swa_window("llama4", 0)
    (8192, 8192, None)
    """
    if arch in CHUNKED:
        return None if given is not None and _int(given) == 0 else CHUNKED[arch]
    return _int(given) or SWA_WINDOW.get(arch)


def cached_heads(per_layer, kv_heads: int, layers: int, recurrent: set[int], keys: set[int],
                 path: Path) -> dict[int, int]:
    """The layers that cache keys and values, each with its KV heads: those whose tensors
    make keys (``keys``; when none does, as in a table of names this reader does not know,
    every layer but the ``recurrent`` ones), less those llama.cpp's per-layer
    ``head_count_kv`` array (``per_layer``, a list; a number is every layer's ``kv_heads``)
    gives no KV head.

    >>> cached_heads([0, 2, 0, 2], 2, 4, {0, 2}, {1, 3}, Path("h.gguf"))
    {1: 2, 3: 2}
    >>> cached_heads(8, 8, 3, {0}, set(), Path("h.gguf"))
    {1: 8, 2: 8}
    """
    if isinstance(per_layer, list) and len(per_layer) < layers:
        raise InputError(f"head_count_kv has {len(per_layer)} per-layer entries for {layers} "
                         "layers", file=str(path), fix="pass the model's own, complete GGUF file")
    where = sorted(i for i in keys if i < layers) or [i for i in range(layers)
                                                      if i not in recurrent]
    heads = {i: int(per_layer[i]) if isinstance(per_layer, list) else kv_heads for i in where}
    return {i: n for i, n in heads.items() if n > 0}


def sliding_layers(pattern, default: int, layers: int, path: Path) -> int:
    """How many of ``layers`` slide, as llama.cpp reads ``{arch}.attention.sliding_window_pattern``
    (``ml.get_key_or_arr(..., swa_period, false)``): absent, the arch's ``default`` period; a
    number, the period (layer i slides when i % period < period - 1; 0: every layer); an array
    (the ``gguf`` reader gives it as a list), one flag a layer, true = sliding.

    >>> sliding_layers(None, 6, 62, Path("g.gguf")), sliding_layers(2, 6, 62, Path("g.gguf"))
    (52, 31)
    >>> sliding_layers(0, 6, 4, Path("g.gguf")), sliding_layers([True, False, True], 2, 3, Path("g"))
    (4, 2)
    """
    if isinstance(pattern, list):
        if len(pattern) < layers:
            raise InputError(f"sliding_window_pattern has {len(pattern)} per-layer flags for "
                             f"{layers} layers", file=str(path),
                             fix="pass the model's own, complete GGUF file")
        return sum(bool(flag) for flag in pattern[:layers])
    period = default if pattern in (None, "") else int(pattern)
    if period == 0:
        return layers
    return sliding_kinds(period, layers).count("sliding_attention")


#: gguf-split's shard names (llama.cpp ``llama_split_path``: ``%s-%05d-of-%05d.gguf``).
SHARD = re.compile(r"(.+)-(\d{5})-of-(\d{5})\.gguf", re.IGNORECASE)


def split_shards(reader, path: Path) -> list[Path]:
    """The files of a model split by ``gguf-split`` (``split.count`` > 1), ``path`` (its first
    shard) first; ``[path]`` for a whole file. A later shard, or a split with a shard missing,
    is refused: one shard's tensor table holds only its share of the weights (the first of
    three read as a 2.8 B Llama-3.1-8B with a tied lm_head)."""
    count = int(_field(reader, "split.count") or 1)
    if count <= 1:
        return [path]
    number = int(_field(reader, "split.no") or 0)
    m = SHARD.fullmatch(path.name)
    first = (path.with_name(f"{m[1]}-00001-of-{count:05d}.gguf").name if m else
             "its -00001-of- file")
    if number != 0:
        raise InputError(f"shard {number + 1} of {count} of a split model: the model's metadata "
                         "is in the first shard", file=str(path), fix=f"pass {first}")
    if m is None:
        raise InputError(f"the first of {count} shards, but not named as gguf-split names them "
                         "(<name>-00001-of-NNNNN.gguf): the other shards cannot be found",
                         file=str(path), fix="keep the shards' names as downloaded")
    shards = [path.with_name(f"{m[1]}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in shards if not p.is_file()]
    if missing:
        raise InputError(f"the first of {count} shards, but {', '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} not beside it: one shard "
                         "holds only some of the model's weights", file=str(path),
                         fix="download every shard into the same folder")
    return shards


def one_context(value, key: str, path) -> object:
    """``<arch>.context_length`` as one value: a per-layer list whose entries all agree is
    that entry (card add refused it as "not a whole number of tokens"); one of several
    lengths is refused naming them (a model takes one longest context); anything else is
    returned for ``card_context`` to check.

    >>> one_context([131072, 131072], "llama.context_length", "m.gguf")
    131072
    >>> try:
    ...     one_context([131072, 8192, 131072], "llama.context_length", "m.gguf")
    ... except InputError as err:
    ...     print(err)
    m.gguf: 'llama.context_length' is a per-layer list of different lengths (8192, 131072): \
a model takes one longest context (fix: pass the model's own GGUF file, or write its \
max_context_tokens in data/models.csv by hand)
    """
    if not isinstance(value, list):
        return value
    if not value:
        return None   # (an empty list says nothing: as a file without the key)
    values = set(value)
    if len(values) == 1:
        return value[0]
    try:
        listed = ", ".join(str(v) for v in sorted(values))
    except TypeError:   # (entries of several types: as given)
        listed = ", ".join(repr(v) for v in dict.fromkeys(value))
    raise InputError(f"{key!r} is a per-layer list of different lengths ({listed}): a model "
                     "takes one longest context", file=str(path),
                     fix="pass the model's own GGUF file, or write its max_context_tokens in "
                         "data/models.csv by hand")


def _int(value) -> int | None:
    """A metadata number; a per-layer array (some architectures) as its largest entry."""
    if isinstance(value, list):
        value = max(value) if value else None
    return None if value in (None, "") else int(value)

"""A SYNTHETIC GGUF file shaped like Llama-3.1-8B-Instruct in Q4_K_M, written with the gguf
package's own writer (``gguf.GGUFWriter``).

No real GGUF can be downloaded here, so the header is rebuilt from what public sources show:

- metadata keys and values: an ``ollama show`` dump of ``llama3.1:8b`` Q4_K_M stored in a
  public repository ("Llama 3.1 8B info Ollama", index excerpt): ``general.architecture llama``,
  ``general.file_type Q4_K_M``, ``llama.block_count 32``, ``llama.embedding_length 4096``,
  ``llama.feed_forward_length 14336``, ``llama.attention.head_count 32``,
  ``llama.attention.head_count_kv 8``, ``llama.rope.dimension_count 128``,
  ``llama.vocab_size 128256``, ... (key spellings: llama.cpp ``gguf-py/gguf/constants.py``);
- the tensor list and types of ``blk.0`` / ``blk.1``: the same dump (``token_embd`` Q4_K
  [4096, 128256]; ``attn_q`` / ``attn_k`` / ``attn_output`` / ``ffn_gate`` / ``ffn_up`` Q4_K;
  ``attn_v`` and ``ffn_down`` Q6_K; norms F32);
- the other blocks: llama.cpp's Q4_K_M rule that gives ``attn_v`` and ``ffn_down`` Q6_K only on
  the ``use_more_bits`` layers (the first and last eighth, and every third layer between;
  16 of 32 here), Q4_K elsewhere; ``output.weight`` Q6_K (both as quoted from llama.cpp's
  ``src/llama-quant.cpp`` in a stored write-up, index file ids 53309772497 / 53174246194).

Left out: the tokenizer arrays (tokens, merges; not weights) and the small ``rope_freqs``
tensor. With this mix the file averages 4.8944 bits per weight, the figure llama.cpp's
``tools/quantize/README.md`` measured for Llama-3.1-8B Q4_K_M - the cross-check that the types
are right. The tensor data is never written: the file is extended to its full size as a
sparse file (a few KB on disk), which the reader memory-maps without touching.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

LAYERS, HIDDEN, FFN, VOCAB, KV = 32, 4096, 14336, 128256, 1024


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's rule for the layers whose attn_v / ffn_down get more bits."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensors() -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape in numpy order (out, in), type) of every tensor, in file order."""
    out = [("token_embd.weight", (VOCAB, HIDDEN), "Q4_K")]
    for i in range(LAYERS):
        more = "Q6_K" if use_more_bits(i, LAYERS) else "Q4_K"
        out += [(f"blk.{i}.attn_k.weight", (KV, HIDDEN), "Q4_K"),
                (f"blk.{i}.attn_norm.weight", (HIDDEN,), "F32"),
                (f"blk.{i}.attn_output.weight", (HIDDEN, HIDDEN), "Q4_K"),
                (f"blk.{i}.attn_q.weight", (HIDDEN, HIDDEN), "Q4_K"),
                (f"blk.{i}.attn_v.weight", (KV, HIDDEN), more),
                (f"blk.{i}.ffn_down.weight", (HIDDEN, FFN), more),
                (f"blk.{i}.ffn_gate.weight", (FFN, HIDDEN), "Q4_K"),
                (f"blk.{i}.ffn_norm.weight", (HIDDEN,), "F32"),
                (f"blk.{i}.ffn_up.weight", (FFN, HIDDEN), "Q4_K")]
    return out + [("output_norm.weight", (HIDDEN,), "F32"),
                  ("output.weight", (VOCAB, HIDDEN), "Q6_K")]


def write(path: Path, extra: dict[str, int | list[int]] | None = None,
          shards: int = 1) -> Path:
    """Write the synthetic file at ``path`` (header from the writer, data left sparse), with
    ``extra`` header keys (uint32) beside the model's own; ``shards`` > 1 splits it as
    ``gguf-split`` does (``<stem>-00001-of-0000N.gguf`` ..., the metadata in the first, the
    ``split.*`` keys in each) and returns the first shard."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter

    per_shard = -(-len(tensors()) // shards) if shards > 1 else 0
    w = GGUFWriter(str(path), "llama", split_max_tensors=per_shard)
    w.add_file_type(15)                              # LlamaFileType.MOSTLY_Q4_K_M
    for key, value in (("llama.block_count", LAYERS), ("llama.context_length", 131072),
                       ("llama.embedding_length", HIDDEN), ("llama.feed_forward_length", FFN),
                       ("llama.attention.head_count", 32), ("llama.attention.head_count_kv", 8),
                       ("llama.rope.dimension_count", 128), ("llama.vocab_size", VOCAB),
                       ("tokenizer.ggml.bos_token_id", 128000),
                       ("tokenizer.ggml.eos_token_id", 128009)):
        w.add_uint32(key, value)
    for key, value in (extra or {}).items():   # (a list: an array of uint32, per layer)
        if isinstance(value, list):
            w.add_array(key, value)
        else:
            w.add_uint32(key, value)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-05)
    w.add_float32("llama.rope.freq_base", 500000.0)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "llama-bpe")
    for name, shape, kind in tensors():
        qtype = GGMLQuantizationType[kind]
        block, size = GGML_QUANT_SIZES[qtype]
        nbytes = int(np.prod(shape)) * size // block
        w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes,
                          raw_dtype=None if kind == "F32" else qtype)
    files = w.format_shard_names(path)
    data = [sum(GGUFWriter.ggml_pad(t.nbytes, w.data_alignment) for t in shard.values())
            for shard in w.tensors]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    for file, size in zip(files, data, strict=True):
        header = file.stat().st_size
        with open(file, "r+b") as fh:               # sparse: no data blocks on disk
            fh.truncate(GGUFWriter.ggml_pad(header, w.data_alignment) + size)
    return files[0]


def write_model(path: Path, arch: str, keys: dict[str, int | list[bool]],
                tensors: list[tuple[str, tuple[int, ...], str]]) -> Path:
    """A SYNTHETIC GGUF file of any architecture: ``keys`` (uint32 header values, or a list:
    an array, as of bools) and ``tensors`` ((name, shape in numpy order, type), in file
    order), data left sparse."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter

    w = GGUFWriter(str(path), arch)
    for key, value in keys.items():
        if isinstance(value, list):
            w.add_array(key, value)
        else:
            w.add_uint32(key, value)
    data = 0
    for name, shape, kind in tensors:
        qtype = GGMLQuantizationType[kind]
        block, size = GGML_QUANT_SIZES[qtype]
        nbytes = int(np.prod(shape)) * size // block
        w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes,
                          raw_dtype=None if kind == "F32" else qtype)
        data += GGUFWriter.ggml_pad(nbytes, w.data_alignment)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    header = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(GGUFWriter.ggml_pad(header, w.data_alignment) + data)
    return path

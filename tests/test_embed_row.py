"""A token reads one row of an untied input embedding, not all of it (docs/model.md, "The
weights a step reads").

Model cards count the whole input embedding among the active parameters (as published totals
do), but a decode step looks up one row of it per token; the LM head, which it multiplies
whole, is a separate matrix when the two are untied. The card's ``embed_params_b`` (vocab x
hidden when untied, 0 when tied, blank unknown) is taken off the weights a step reads and its
FLOPs. Figures counted by hand below.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ddtree_bayes.core import pairs as CP
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.model_cards import (
    ModelCard,
    flop_ms_per_token,
    load_model_cards,
)
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.core.row_notes import weights_read_ms
from ddtree_bayes.workflows import card_files

FIX = Path(__file__).resolve().parent / "fixtures" / "cards"
H100 = {"hardware": "h100", "mem_bw_tb_s": "3.35", "interconnect": "NVLink4",
        "dense_bf16_tflops": "989"}
RTX_4090 = {"hardware": "rtx-4090", "mem_bw_tb_s": "1.008", "interconnect": "PCIe Gen4"}

#: Llama-3.1-8B: 8,030,261,248 parameters (tests/test_cards.py counts them), of which the
#: untied input embedding 128256 x 4096 = 525,336,576
LLAMA_PARAMS, LLAMA_EMBED = 8_030_261_248, 128_256 * 4_096
#: Qwen3-14B AWQ (tests/test_cards.py test_qwen3_14b_awq_by_hand): 14,768,307,200 parameters,
#: 9,976,576,000 bytes; its untied input embedding 151936 x 5120 = 777,912,320 weights kept
#: at 16 bits (AWQ quantises the decoder's linear layers only)
QWEN_PARAMS, QWEN_BYTES, QWEN_EMBED = 14_768_307_200, 9_976_576_000, 151_936 * 5_120


def card_text(row: dict[str, str]) -> str:
    header = list(row)
    quoted = [f'"{row[h]}"' if "," in row[h] else row[h] for h in header]
    return ",".join(header) + "\n" + ",".join(quoted) + "\n"


#: Llama-3.1-8B's card (data/models.csv) with its embed_params_b
LLAMA = ModelCard("llama-3.1-8b-instruct", 8.03, 8.03, 32, None, None, 2.0, "bf16", "s",
                  hidden_size=4096, embed_params_b=0.5253)


def test_llama_31_8b_bf16_reads_its_layers_and_lm_head_not_its_embedding():
    # read: 8,030,261,248 - 525,336,576 = 7,504,924,672 weights x 2 B = 15.0098 GB; the
    # card's 4-decimal billions: (8.03 - 0.5253) x 2 = 15.0094 GB, 6.5% below 16.06
    assert LLAMA_PARAMS - LLAMA_EMBED == 7_504_924_672
    assert round(LLAMA_EMBED / 1e9, 4) == 0.5253
    card = load_model_cards("m.csv", (
        "model,params_total_b,params_active_b,layers,hidden_size,experts,experts_topk,"
        "bytes_per_weight,compute_dtype,source,embed_params_b\n"
        "llama-3.1-8b-instruct,8.03,8.03,32,4096,,,2,bf16,s,0.5253\n"))["llama-3.1-8b-instruct"]
    assert card == LLAMA
    assert card.read_gb == pytest.approx((8.03 - 0.5253) * 2)
    assert card.read_gb == pytest.approx(2 * (LLAMA_PARAMS - LLAMA_EMBED) / 1e9, rel=1e-4)
    # on one H100 (3.35 TB/s): 15.0094 / 3.35 = 4.4804 ms at the peak, not 16.06 / 3.35 = 4.794
    f = CP.pair_features(card, H100, 1)
    assert f.stream_ms == pytest.approx(15.0094 / 3.35)
    # FLOPs: 2 x 7.5047e9 = 15.0094 GFLOP a token; at 989 TFLOPS: 0.015176 ms
    assert card.flops_per_token == pytest.approx(2 * 7.5047e9)
    assert flop_ms_per_token(card, H100, 1)[0] == pytest.approx(2 * 7.5047e9 / 989e12 * 1e3)
    # the least read (Q1_0's 1.125 bits a weight): 7.5047e9 x 1.125 / 8 / 3.35e12 = 0.31503 ms
    assert CP.least_read_ms(card, H100, 1) == pytest.approx(7.5047 * 1.125 / 8 / 3.35)


def test_a_card_that_does_not_say_reads_as_before():
    # blank embed_params_b: unknown, every active weight read (16.06 GB for 8.03 B at 2 B)
    card = ModelCard("l", 8.03, 8.03, 32, None, None, 2.0, "bf16", "s")
    assert card.embed_params_b is None and card.read_gb == pytest.approx(16.06)
    assert card.flops_per_token == pytest.approx(16.06e9)
    tied = ModelCard("g", 27.0, 27.0, 62, None, None, 2.0, "bf16", "s", embed_params_b=0.0)
    assert tied.read_gb == pytest.approx(54.0)   # tied: the LM head reads it whole


def test_card_add_qwen3_14b_awq_reads_8_42_gb_not_9_98():
    """The AWQ file keeps the 777,912,320-weight input embedding at 2 B: the step reads
    9,976,576,000 - 2 x 777,912,320 = 8,420,751,360 bytes over 14,768,307,200 - 777,912,320
    = 13,990,394,880 weights, 0.60190 B each (the file: 0.6755); priced at 9.98 GB before,
    18.5% over."""
    read_bytes = QWEN_BYTES - 2 * QWEN_EMBED
    read_params = QWEN_PARAMS - QWEN_EMBED
    assert (read_bytes, read_params) == (8_420_751_360, 13_990_394_880)
    d = card_files.derive_from_hf_config(FIX / "qwen3-14b-awq")
    assert (d.facts["read_params"], d.facts["read_bytes"]) == (read_params, read_bytes)
    assert d.card["embed_params_b"] == "0.7779"
    assert (d.card["bytes_per_weight"], d.card["file_bytes_per_weight"]) == ("0.6019", "0.6755")
    card = load_model_cards("m.csv", card_text(d.card))["qwen3-14b-awq"]
    # (14.7683 - 0.7779) x 0.6019 = 8.42082 GB against 8.42075 exactly (4-decimal cells)
    assert card.read_gb == pytest.approx(read_bytes / 1e9, rel=2e-5)
    # the whole file is what the GPU holds: 14.7683 x 0.6755 = 9.976 GB
    assert card.weights_gb == pytest.approx(QWEN_BYTES / 1e9, rel=1e-4)
    # a 104 tok/s AR row on one RTX 4090 (1.008 TB/s): 9.615 ms a step, above the 8.354 ms
    # read (8.4208 / 1.008), no longer below the 9.90 ms the whole active bytes took
    read = weights_read_ms(card, RTX_4090, 1)
    assert read == pytest.approx(8.42082 / 1.008, rel=1e-4)
    assert read < 1000 / 104 < QWEN_BYTES / 1e9 / 1.008


def test_card_add_says_tied_embeddings_zero_and_a_gguf_its_own_bytes(tmp_path):
    d = card_files.derive_from_hf_config(FIX / "gemma-3-27b-it")
    assert d.facts["tied_embeddings"] is True and d.card["embed_params_b"] == "0"
    assert d.facts["read_params"] == d.facts["params_active"]
    import gguf_fixture

    # the synthetic Llama-3.1-8B Q4_K_M: token_embd Q4_K (144 bytes per 256 weights), untied
    # (output.weight Q6_K): the read leaves out 525,336,576 x 144 / 256 = 295,501,824 bytes
    path = gguf_fixture.write(tmp_path / "llama.gguf")
    g = card_files.derive_from_gguf(path, name="llama-q4")
    assert g.card["embed_params_b"] == "0.5253"
    assert g.facts["read_params"] == LLAMA_PARAMS - LLAMA_EMBED
    size = {"Q4_K": 144 / 256, "Q6_K": 210 / 256, "F32": 4.0}   # bytes a weight (ggml blocks)
    whole = sum(math.prod(shape) * size[kind] for _, shape, kind in gguf_fixture.tensors())
    assert whole / LLAMA_PARAMS * 8 == pytest.approx(4.8944, abs=1e-4)   # llama.cpp's figure
    assert g.facts["read_bytes"] == whole - LLAMA_EMBED * 144 / 256


@pytest.mark.parametrize(("cell", "said"), [
    ("525.3", "is not below half of params_active_b 8.03"),
    ("-0.5", "is negative"),
    ("x", "")])
def test_a_bad_embed_params_b_is_one_line_naming_the_cell(cell, said):
    text = ("model,params_total_b,params_active_b,layers,experts,experts_topk,bytes_per_weight,"
            f"compute_dtype,source,embed_params_b\nm,8.03,8.03,32,,,2,bf16,s,{cell}\n")
    with pytest.raises(DataError) as err:
        load_model_cards("data/models.csv", text)
    line = str(err.value)
    assert "\n" not in line and line.startswith("data/models.csv, row 2, column 'embed_params_b'")
    assert said in line


#: Per bundled card: (vocab_size, hidden_size) of its untied input embedding, as the source
#: named in its notes gives them; 0 where its active parameters do not count it (DeepSeek's 37 B:
#: "36.6B (including 0.9B for the output Head)", README_WEIGHTS.md; Kimi K2's 32 B, whose shapes
#: give 31.69 B without it and 32.86 B with it); None where the card leaves
#: embed_params_b blank (Gemma 4 12B: not found in a stored source; tied, it would be 0 too)
BUNDLED = {
    "llama-3.1-8b-instruct": (128_256, 4_096), "llama-3.3-70b-instruct": (128_256, 8_192),
    "qwen3-8b": (151_936, 4_096), "qwen3-30b-a3b": (151_936, 2_048),
    "deepseek-r1": 0.0, "kimi-k2.6": 0.0,
    "kimi-k2.5-w4a8": 0.0, "glm-5": (154_880, 6_144),
    "qwen3.5-397b-a17b": (248_320, 4_096),
    "qwen3.8-27b": (248_320, 5_120), "qwen3.8-27b-q8_0": (248_320, 5_120),
    "qwen3.8-27b-q4_k_m": (248_320, 5_120), "qwen3.5-27b-q4_k_m": (248_320, 5_120),
    "qwen3.6-27b-q4_k_m": (248_320, 5_120), "qwen3.6-27b-q5_k_xl": (248_320, 5_120),
    "gemma-4-12b-it": None}


def test_every_bundled_card_says_its_input_embedding():
    cards = load_model_cards(bundled("models.csv"))
    assert set(cards) == set(BUNDLED)
    own = cards["llama-3.1-8b-instruct"]
    assert (own.params_active_b, own.embed_params_b, own.bytes_per_weight) == (8.03, 0.5253, 2)
    for name, shape in BUNDLED.items():
        want = shape if not isinstance(shape, tuple) else round(shape[0] * shape[1] / 1e9, 4)
        assert cards[name].embed_params_b == want, name
    # Kimi K2.6: its 32 B leave the input embedding (163840 x 7168 = 1.1744 B) out, as
    # DeepSeek's 37 B do: the Kimi K2 shapes count 30.51 B in the layers + 1.1744 B of output
    # head = 31.69 B without it, 32.86 B with it; a token reads all 32
    assert cards["kimi-k2.6"].read_params_b == 32.0


def test_kimi_k2s_32b_active_leave_the_input_embedding_out(tmp_path):
    """Kimi K2 (DeepseekV3 layout: hidden 7168, 61 layers, 1 dense of intermediate 18432, 60
    MoE of 384 experts top-8 + 1 shared at 2048, MLA q_lora 1536, kv_lora 512, 64 heads of
    128 + 64, v 128, vocab 163840), counted by hand in tests/test_cards.py
    (test_a_quantization_config_inside_text_config_is_read): 32,861,500,928 active with the
    input embedding; 31,687,095,808 without it, the layers' 30,512,690,688 + the output
    head's 1,174,405,120. The published 32 B is the count without (1.0% off it, 2.6% off the
    count with it), as DeepSeek's 37 B (36.6 B including the 0.9 B output head) are: the
    bundled Kimi cards say embed_params_b 0, so a token reads all 32 B: 16 GB at 0.5 B per
    weight, 0.25 ms over 8 x B300 (8 TB/s each), not 15.41 GB and 0.2408 ms."""
    import json

    from ddtree_bayes.core.data import load_hardware
    from test_cards import kimi_k26_config

    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "config.json").write_text(json.dumps(kimi_k26_config()))
    d = card_files.derive_from_hf_config(tmp_path / "k", name="kimi-k2.6-int4")
    embed = 163_840 * 7_168
    assert d.facts["params_active"] == 32_861_500_928
    assert d.facts["read_params"] == 32_861_500_928 - embed == 31_687_095_808
    assert 31_687_095_808 - embed == 30_512_690_688
    assert abs(31.687 / 32 - 1) < 0.011 < 0.026 < abs(32.8615 / 32 - 1)
    cards = load_model_cards(bundled("models.csv"))
    b300 = load_hardware(bundled("hardware.csv"))["b300"]
    for name in ("kimi-k2.6", "kimi-k2.5-w4a8"):
        card = cards[name]
        assert (card.params_active_b, card.embed_params_b) == (32.0, 0.0), name
        assert (card.read_params_b, card.read_gb) == (32.0, 16.0), name
    assert CP.pair_features(cards["kimi-k2.6"], b300, 8).stream_ms == pytest.approx(0.25)

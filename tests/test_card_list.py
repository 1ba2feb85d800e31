"""``card list``: the model and drafter cards a run reads, and which of them are the user's.

Before it, a user could list the GPUs (``hardware list``) but not the models: whether a model
needs ``card add`` was found out by a refused ``predict --model``.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from ddtree_bayes.core.paths import bundled
from test_cli_support import run_cli
from test_json_schemas import validate_output


def listed(work: Path, *argv: str) -> dict:
    code, out, err = run_cli(work, "card", "list", *argv, "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("card-list", payload)
    return payload


def test_the_built_in_cards_alone(tmp_path):
    payload = listed(tmp_path)
    rows = [r for r in csv.DictReader(io.StringIO(bundled("models.csv").read_text()))
            if r["model"]]
    assert [m["model"] for m in payload["models"]] == [r["model"] for r in rows]
    assert {m["origin"] for m in payload["models"]} == {"built-in"}
    assert payload["models_file"] is None and payload["drafters_file"] is None
    kimi = next(m for m in payload["models"] if m["model"] == "kimi-k2.6")
    assert (kimi["experts"], kimi["experts_topk"], kimi["q_heads"], kimi["kv_heads"],
            kimi["kv_cache_bits"], kimi["kv_bytes_per_token"]) == (384, 8, 64, 1, 8.0, 35136.0)
    # an EAGLE head projects through the target's LM head: 0.2517 B own + 0.5253 B head
    eagle = next(d for d in payload["drafters"]
                 if d["drafter"] == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B")
    assert eagle["methods"] == ["eagle"] and eagle["shares_lm_head"] is True
    assert eagle["pass_params_b"] == pytest.approx(0.777)
    # an EAGLE-3 head has its own: the pass reads its 0.4247 B alone
    eagle3 = next(d for d in payload["drafters"]
                  if d["drafter"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert eagle3["pass_params_b"] == pytest.approx(0.4247)


def _own_cards(work: Path) -> None:
    """data/models.csv: the bundled cards with Kimi K2.6 at 60 layers and one new card;
    data/drafters.csv: one own DDTree drafter for Qwen3-8B."""
    text = bundled("models.csv").read_text()
    reader = csv.DictReader(io.StringIO(text))
    rows = [r for r in reader if r["model"]]
    for r in rows:
        if r["model"] == "kimi-k2.6":
            r["layers"] = "60"
    mine = {k: "" for k in reader.fieldnames or ()}
    mine.update(model="my-model", params_total_b="7", params_active_b="7", layers="28",
                bytes_per_weight="2", compute_dtype="bf16", source="my config.json")
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=reader.fieldnames or ())
    w.writeheader()
    w.writerows([*rows, mine])
    (work / "data").mkdir()
    (work / "data" / "models.csv").write_text(out.getvalue())
    (work / "data" / "drafters.csv").write_text(
        "drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
        "bytes_per_weight,source\nmy-ddtree,qwen3-8b,ddtree,dflash_block,3,0.5,0.6,2,me\n")


def test_your_cards_are_marked(tmp_path):
    _own_cards(tmp_path)
    payload = listed(tmp_path)
    origin = {m["model"]: m["origin"] for m in payload["models"]}
    assert (origin["kimi-k2.6"], origin["my-model"], origin["llama-3.1-8b-instruct"]) == (
        "user-override", "user", "built-in")
    drafters = {d["drafter"]: d for d in payload["drafters"]}
    assert drafters["my-ddtree"]["origin"] == "user"
    assert drafters["my-ddtree"]["pass_params_b"] == pytest.approx(1.1)   # 0.5 + shared 0.6
    # the built-in Qwen3-8B DFlash drafter keeps the method the own card does not take: still
    # the built-in card, serving less
    assert drafters["z-lab/Qwen3-8B-DFlash-b16"]["methods"] == ["dflash"]
    assert drafters["z-lab/Qwen3-8B-DFlash-b16"]["origin"] == "built-in"
    assert payload["models_file"].endswith("models.csv")

    code, out, err = run_cli(tmp_path, "card", "list")
    assert code == 0 and err == ""
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert lines["my-model"].endswith("  yours") and " 28 " in lines["my-model"]
    assert lines["kimi-k2.6"].endswith("yours (overrides built-in)")
    assert lines["kimi-k2.6"].split()[1:5] == ["1000", "32", "60", "384/top-8"]
    assert lines["my-ddtree"].split()[1:7] == ["qwen3-8b", "ddtree", "dflash_block", "3", "1.1",
                                               "2"]
    assert ("17 model cards, 11 drafter cards (data/models.csv adds 1 and replaces 1 model "
            "cards; data/drafters.csv adds 1 and replaces 0 drafter cards)") in out


def test_a_missing_or_bad_file_is_one_line(tmp_path):
    code, out, err = run_cli(tmp_path, "card", "list", "--models-file", "nope.csv")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "nope.csv: no such file" in err and "fix:" in err
    (tmp_path / "bad.csv").write_text(bundled("models.csv").read_text().replace(
        "kimi-k2.6,1000,", "kimi-k2.6,lots,", 1))
    code, out, err = run_cli(tmp_path, "card", "list", "--models-file", "bad.csv")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "bad.csv" in err and "params_total_b" in err

"""Concurrency C > 1 (issue 22, first part): the `concurrency` column, the step at C streams
(weights once per step, C x M tokens verified, KV reads and tree nodes per stream), and
`predict --concurrency` with per-user and total tok/s; every C = 1 answer unchanged. By hand on
the point-mass fit (engine/testing.py: linear MoE, fraction step form)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.question import Flags, resolve
from ddtree_bayes.engine.testing import point_mass_draws
from test_cli_support import make_point_mass_workdir, run_cli
from test_json_schemas import validate_output

HEADER = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
          "context_tokens,tok_s,source,notes")
HW = load_hardware(bundled("hardware.csv"))


def load(tmp_path, text: str):
    (tmp_path / "m.csv").write_text(text)
    return load_measurements(tmp_path / "m.csv", HW)


def test_the_column_is_optional_and_a_c_above_1_is_its_own_configuration(tmp_path):
    plain = load(tmp_path, HEADER + "\nm,h100,1,vllm,ar,,,1,1,,50,s,\n")
    assert plain.rows[0].concurrency == 1
    data = load(tmp_path, HEADER + ",concurrency\n"
                "m,h100,1,vllm,ar,,,1,1,,50,s,,\n"        # blank: one stream
                "m,h100,1,vllm,ar,,,1,1,,51,s,,1\n"       # a repeat of the row above
                "m,h100,1,vllm,ar,,,1,1,,180,s,,4\n"      # four streams: another configuration
                "m,h100,1,vllm,ar,,,1,1,,185,s,,4\n")
    assert [r.concurrency for r in data.rows] == [1, 1, 4, 4]
    row_config, first = C.group_rows(data.rows)
    assert row_config.tolist() == [0, 0, 1, 1] and first.tolist() == [0, 2]
    # tok_s at C = 4 is the total of the four streams: the offset holds log(accept x 1000 x C)
    assert C.offsets(data.rows) == pytest.approx(np.log([1000, 1000, 4000, 4000]))


@pytest.mark.parametrize("cell, problem", [("0", "must be >= 1, got 0"),
                                           ("2.5", "whole number"), ("x", "number")])
def test_a_bad_concurrency_names_row_and_column(tmp_path, cell, problem):
    with pytest.raises(DataError) as err:
        load(tmp_path, HEADER + ",concurrency\nm,h100,1,vllm,ar,,,1,1,,50,s,," + cell + "\n")
    assert err.value.row == 2 and err.value.column == "concurrency"
    assert problem in str(err.value)


def components(draws, c: int, context: float = 0.0):
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=context,
                            concurrency=c)
    return P.step_components(draws, sc, np.random.default_rng(0))[0]


def test_the_step_at_c_streams_by_hand():
    draws = point_mass_draws()
    one, four = components(draws, 1), components(draws, 4)
    # C = 1: MOE(33) = 4 x (1 + 0.0625 x 32) = 12, ATTN 4, step = 16 / 0.8 = 20 ms
    assert one["step"][0] == pytest.approx(20.0)
    # C = 4: the step verifies 132 tokens: MOE = 4 x (1 + 0.0625 x 131) = 36.75, ATTN_BASE once
    assert four["moe"][0] == pytest.approx(36.75) and four["attn_base"][0] == pytest.approx(4.0)
    assert four["step"][0] == pytest.approx(40.75 / 0.8)
    # KV reads per stream: 64k context, 2 ms per unit x 4 streams x 33 ** 0.5
    ctx = components(draws, 4, 65536.0)
    assert ctx["context"][0] == pytest.approx(2.0 * 4 * 33 ** 0.5)


def test_predict_gives_per_user_and_total_and_leaves_c1_alone():
    draws = point_mass_draws()
    plain = P.predict_rows(draws, resolve(draws, Flags(accept="12", engines=("sglang",))))
    rows = P.predict_rows(draws, resolve(draws, Flags(accept="12", engines=("sglang",),
                                                      concurrency=(1, 4))))
    assert "concurrency" not in plain[0] and "total" not in plain[0]
    assert [r["concurrency"] for r in rows] == [1, 4]
    assert rows[0]["median"] == plain[0]["median"] == pytest.approx(600.0)   # 12 / 20 ms
    assert rows[1]["median"] == pytest.approx(12 / 50.9375 * 1000)           # per user
    assert rows[1]["total"]["median"] == pytest.approx(4 * 12 / 50.9375 * 1000)
    assert rows[0]["total"]["median"] == pytest.approx(600.0)
    assert rows[1]["original"] is None   # the original estimate is a single-stream one


def test_predict_concurrency_json_fits_its_schema(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                             "--concurrency", "1,8", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("predict", payload)
    assert [r["concurrency"] for r in payload["rows"]] == [1, 8]
    # the point mass's DDTree at 12 tokens per step: 600 tok/s at C = 1 against AR's 125
    assert payload["rows"][0]["p_faster_than_ar"] == 1.0
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                             "--concurrency", "1,8")
    assert code == 0, err
    assert "per user" in out and "total, 90%" in out and "P(> AR)" in out
    assert "sglang, accept 12: speculation pays at every concurrency asked" in out
    code, _, err = run_cli(work, "predict", "--concurrency", "0")
    assert code == 2 and "--concurrency" in err


def test_optimize_at_c_streams_by_hand():
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.workflows.decisions import optimize

    draws = point_mass_draws()
    curve = parse_acceptance_curve(draws.priors_toml)
    one = optimize(draws, curve, hardware="b300", engine="sglang", budgets=(8, 32))
    four = optimize(draws, curve, hardware="b300", engine="sglang", budgets=(8, 32),
                    concurrency=4)
    assert "concurrency" not in one["scenario"] and four["scenario"]["concurrency"] == 4
    # budget 32 at C = 4: (4 x (1 + 0.0625 x 131) + 4) / 0.8; budget 8: 36 tokens
    assert [r["step_ms"] for r in four["rows"]] == pytest.approx(
        [(4 * (1 + 0.0625 * 35) + 4) / 0.8, 40.75 / 0.8])
    assert one["rows"][1]["step_ms"] == pytest.approx(20.0)

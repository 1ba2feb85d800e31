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
from ddtree_bayes.core.errors import DataError, QueryError
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


@pytest.mark.parametrize("cell, problem", [("0", "must be 1 to 4096, got 0"),
                                           ("5000", "must be 1 to 4096, got 5000"),
                                           ("2.5", "whole number"), ("x", "number")])
def test_a_bad_concurrency_names_row_and_column(tmp_path, cell, problem):
    with pytest.raises(DataError) as err:
        load(tmp_path, HEADER + ",concurrency\nm,h100,1,vllm,ar,,,1,1,,50,s,," + cell + "\n")
    assert err.value.row == 2 and err.value.column == "concurrency"
    assert problem in str(err.value)


def exact(draws):
    """``draws`` without the concurrency discrepancy ([priors.concurrency_sd] 0): with no run
    noise either, every draw of a point mass answers the same number."""
    import dataclasses

    text = draws.priors_toml
    anchor = "[priors.concurrency_sd]\ndist = \"point\"\nvalue = 0.06"
    assert anchor in text
    return dataclasses.replace(draws, priors_toml=text.replace(anchor, anchor[:-4] + "0.0"))


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
    # KV reads per stream, partly shared: 64k context, 2 ms per unit x 4 ** g x 33 ** 0.5
    ctx = components(point_mass_draws(ctx_batch_exponent=0.5), 4, 65536.0)
    assert ctx["context"][0] == pytest.approx(2.0 * 4 ** 0.5 * 33 ** 0.5)
    # a fit without rows at C > 1 draws g from its prior, Beta(3, 2): between 1x and 4x
    ctx = components(draws, 4, 65536.0)["context"]
    assert np.all((2.0 * 33 ** 0.5 < ctx) & (ctx < 2.0 * 4 * 33 ** 0.5)) and np.ptp(ctx) > 0


def test_predict_gives_per_user_and_total_and_leaves_c1_alone():
    draws = exact(point_mass_draws())
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


def test_predict_json_carries_the_crossover_summary_the_table_prints(tmp_path):
    """The table's "speculation stops paying at C = 16" line was missing from the JSON. The
    point mass at accept 14 (test_the_reports_concurrency_section_by_hand): DDTree beats AR at
    C = 1 and 8, and at C = 16 its (4 x (1 + 0.0625 x 527) + 4) / 0.8 = 174.7 ms step gives
    80.1 tok/s per user against AR's 1000 / 11.75 = 85.1: it stops paying there. The JSON's
    top-level ``crossover`` is the same helper's (engine/structure.paying_fields), its line the
    table's; a question without --concurrency has no such key."""
    work = make_point_mass_workdir(tmp_path / "w")
    ask = ("predict", "--accept", "14", "--engine", "sglang", "--concurrency", "1,8,16")
    code, out, err = run_cli(work, *ask, "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("predict", payload)
    line = ("sglang, accept 14: speculation stops paying at C = 16 (P(faster than AR) 0.00; "
            "1.00 at C = 8)")
    assert payload["crossover"] == [
        {"engine": "sglang", "accept": "14", "concurrency": [1, 8, 16],
         "p_faster_than_ar": [1.0, 1.0, 0.0], "pays": "stops", "pays_at": [1, 8],
         "stops_paying_at": 16, "starts_paying_at": None, "uncertain_at": [], "line": line}]
    code, out, err = run_cli(work, *ask)
    assert code == 0 and line in out.splitlines(), err
    code, out, err = run_cli(work, "predict", "--accept", "14", "--format", "json")
    assert code == 0 and "crossover" not in json.loads(out), err


def test_a_total_below_1_tok_s_keeps_its_digits(tmp_path):
    """A trust pass: at a context of 10^9 tokens the point mass's DDTree makes 0.055 tok/s
    per user at C = 1, and the table's total, which at C = 1 is that same figure, printed
    "0 (0-0)" beside it (the per-user cells keep two significant digits; the total's were
    whole numbers). JSON: C = 1 total == per user; C = 2 total == 2 x per user."""
    work = make_point_mass_workdir(tmp_path / "w")
    ask = ("predict", "--accept", "12", "--engine", "sglang", "--concurrency", "1,2",
           "--context", "1000000000")
    code, out, err = run_cli(work, *ask, "--format", "json")
    assert code == 0, err
    one, two = json.loads(out)["rows"]
    assert one["total"]["median"] == pytest.approx(one["median"]) and round(
        one["median"], 3) == 0.055
    assert two["total"]["median"] == pytest.approx(2 * two["median"])
    code, out, err = run_cli(work, *ask)
    assert code == 0, err
    lines = [line.split() for line in out.splitlines() if line.startswith("sglang  12")]
    assert [cells[2] for cells in lines] == ["1", "2"]
    assert " ".join(lines[0][6:8]) == "0.055 (0.055-0.055)"   # the per-user figure
    t = two["total"]
    assert " ".join(lines[1][6:8]) == (f"{t['median']:.2g} ({t['lo90']:.2g}-{t['hi90']:.2g})")
    assert "0 (0-0)" not in out


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
    # the point mass measured M = 9 at C = 1 on b300x8: budget 8 is measured at C = 1, and at
    # C = 4 its step verifies 36 tokens, beyond any row (it was read as not extrapolated)
    assert [r["extrapolated"] for r in one["rows"]] == [False, True]
    assert [r["extrapolated"] for r in four["rows"]] == [True, True]
    # (predict's words, naming the budgets: structure.beyond_measured_note)
    assert one["max_measured_verify_tokens"]["system"] == 9 and one["warnings"] == [
        "at C = 1 a step of budget 32 (M = 33) verifies 33 tokens (C x M), more than any "
        "measured on b300x8 (at most 9): there the step's growth with M is the roofline's "
        "(compute knee, and for an MoE the distinct experts read): partly prior-driven"]
    assert four["warnings"] == [   # 4 x 9 = 36 and 4 x 33 = 132 tokens
        "C = 4 is beyond the concurrencies measured on b300x8 (at most 1); at C = 4 a step of "
        "budgets 8, 32 (M up to 33) verifies up to 132 tokens (C x M), more than any measured "
        "on b300x8 (at most 9): there the step's growth with C and M is the roofline's (weights "
        "once per step, KV reads and tree nodes per stream, the compute knee, and for an MoE "
        "the distinct experts read): prior-driven"]


def test_optimize_says_when_autoregressive_decoding_beats_the_best_budget():
    """optimize compared budgets with each other only: at C = 128 on the point mass it
    recommended a budget that AR beats. AR at C = 128: 4 x (1 + 0.0625 x 127) + 4 = 39.75 ms
    a step, 25 tok/s per user; budget 8 verifies 1152 tokens a step: (4 x (1 + 0.0625 x 1151)
    + 4) / 0.8 = 369.69 ms for its accepted tokens, fewer than 9.3 a step."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.workflows.decisions import optimize

    draws = point_mass_draws()
    curve = parse_acceptance_curve(draws.priors_toml)
    one = optimize(draws, curve, hardware="b300", engine="sglang", budgets=(8, 32))
    assert not [w for w in one["warnings"] if "autoregressive" in w]
    many = optimize(draws, curve, hardware="b300", engine="sglang", budgets=(8, 32),
                    concurrency=128)
    assert many["recommended"] == 8
    assert many["rows"][0]["step_ms"] == pytest.approx((4 * (1 + 0.0625 * 1151) + 4) / 0.8)
    assert many["rows"][0]["median"] < 1000 / 39.75
    [note] = [w for w in many["warnings"] if "autoregressive" in w]
    assert note == ("autoregressive decoding at C = 128 (25 tok/s per user, median) is "
                    "faster than the best budget 8 in 100% of draws: speculation does not pay "
                    "here (P(budget 8 faster than AR) 0.00)")


def test_optimize_warns_of_a_kv_cache_that_does_not_fit_as_predict_does():
    """`optimize --concurrency 512 --context 128k` answered for 2358 GB of KV cache on 8 x B300
    (1804 GB left after the weights) with no word; predict and next warned."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.workflows.decisions import optimize

    draws = point_mass_draws()
    card = load_model_cards(bundled("models.csv"))["kimi-k2.6"]
    draws.meta["model"]["card"] = dict(vars(card))
    curve = parse_acceptance_curve(draws.priors_toml)
    kw = {"hardware": "b300", "engine": "sglang", "budgets": (8,), "context_tokens": "128k"}
    assert optimize(draws, curve, **kw, concurrency=64)["warnings"][0].startswith("C = 64 is beyond")
    warnings = optimize(draws, curve, **kw, concurrency=512)["warnings"]
    assert warnings[0].startswith("at C = 512 and context 131072 the KV cache needs 2357.9 GB "
                                  "(35136 bytes per token")


def test_the_model_samples_the_batch_exponent_only_with_c_above_1(tmp_path):
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.engine.model import build_model, free_parameter_names

    cfg = load_priors(bundled("priors.toml"))
    rows = ("kimi-k2.6,b300,8,sglang,ar,,,1,1,0,133,s,{}\n"
            "kimi-k2.6,b300,8,sglang,ar,,,1,1,65536,120,s,{}\n"
            "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,0,303,s,{}\n")
    for conc, sampled in (("", False), ("4", True)):
        text = HEADER + ",concurrency\n" + rows.replace("{}", ",") + (
            f"kimi-k2.6,b300,8,sglang,ar,,,1,1,0,450,s,,{conc}\n" if conc else "")
        data = load(tmp_path, text)
        spec = S.build_spec(data, cfg)
        names = {rv.name for rv in build_model(spec, cfg).free_RVs}
        assert (S.CTX_BATCH in names) is sampled
        assert names == set(free_parameter_names(cfg.moe_form, cfg.step_form, cfg,
                                                 concurrent=sampled, links=("fabric",)))
    # a priors file without the exponent refuses C > 1 rows, naming the prior
    import dataclasses

    from ddtree_bayes.core.errors import PriorsError

    bare = dataclasses.replace(cfg, priors={k: v for k, v in cfg.priors.items()
                                            if k != S.CTX_BATCH})
    with pytest.raises(PriorsError, match="rows at concurrency > 1") as err:
        S.build_spec(data, bare)
    assert err.value.column == "priors.ctx_batch_exponent"


def test_the_reports_concurrency_section_by_hand():
    from ddtree_bayes.workflows.report.sections import CONCURRENCY_GRID, concurrency_section

    out = concurrency_section(exact(point_mass_draws()), seed=0)
    assert out["accept"] == 14.0 and out["concurrency"] == list(CONCURRENCY_GRID)
    ar, sglang = out["engines"]["ar"], out["engines"]["sglang"]
    # AR at C = 4: MOE 4 x (1 + 0.0625 x 3) + ATTN 4 = 8.75 ms per step of 4 streams
    c4 = CONCURRENCY_GRID.index(4)
    assert ar["per_user"][c4][2] == pytest.approx(1000 / 8.75)
    assert ar["total"][c4][2] == pytest.approx(4000 / 8.75)
    # DDTree at C = 1: 14 tokens per 20 ms step; far faster than AR at every C of the grid
    assert sglang["per_user"][0][2] == pytest.approx(700.0)
    assert sglang["p_faster_than_ar"][0] == 1.0 and "p_faster_than_ar" not in ar
    # at C = 128 the step verifies 4224 tokens: (4 x (1 + 0.0625 x 4223) + 4) / 0.8 ms
    step = (4 * (1 + 0.0625 * 4223) + 4) / 0.8
    assert sglang["per_user"][-1][2] == pytest.approx(14000 / step)
    # C = 16: DDTree (4 x (1 + 0.0625 x 527) + 4) / 0.8 = 174.7 ms -> 80.1 tok/s per user,
    # AR 4 x (1 + 0.0625 x 15) + 4 = 11.75 ms -> 85.1: the first C where it stops paying
    assert sglang["stops_paying_at"] == 16
    assert sglang["pays"] == "stops" and sglang["pays_at"] == [1, 2, 4, 8]
    assert sglang["starts_paying_at"] is None
    assert sglang["p_faster_than_ar"][CONCURRENCY_GRID.index(8)] == 1.0


def test_the_reports_concurrency_section_says_a_drafter_that_never_pays():
    """A trust pass: summary.json's ``stops_paying_at`` was null both for a drafter that pays
    at every C of the grid (as its comment said) and for one that never pays, starts paying,
    or pays on and off. At accept 1 DDTree emits 1 token per 20 ms step at C = 1 (50 tok/s)
    against AR's 1 per 8 ms (125), and at C = 128 1 per (4 x (1 + 0.0625 x 4223) + 4) / 0.8
    = 1329 ms against AR's 4 x (1 + 0.0625 x 127) + 4 = 39.75 ms: it pays at no C."""
    import dataclasses

    from ddtree_bayes.engine.question import default_question
    from ddtree_bayes.workflows.report.sections import concurrency_section

    draws = exact(point_mass_draws())
    d = dataclasses.replace(default_question(draws), accept=1.0)
    sglang = concurrency_section(draws, seed=0, d=d)["engines"]["sglang"]
    assert sglang["per_user"][0][2] == pytest.approx(50.0)
    assert sglang["p_faster_than_ar"] == [0.0] * 8
    assert sglang["pays"] == "never" and sglang["pays_at"] == []
    assert sglang["stops_paying_at"] is None and sglang["starts_paying_at"] is None


def test_the_reports_measured_concurrency_is_the_default_systems():
    """A trust pass: the report shaded "beyond the largest concurrency measured" from the
    largest C of any system (16, measured on the RTX PRO 6000) while its scenario's system,
    B300, was measured at C = 1 only, so C = 2-16 on B300, the roofline's extrapolation, read
    as measured; predict --concurrency says "at most 1" for the same question."""
    import dataclasses

    from ddtree_bayes.workflows.report.sections import concurrency_section

    draws = point_mass_draws()
    text = draws.data_csv.splitlines()
    text[0] += ",concurrency"
    text[1:] = [line + "," for line in text[1:]]
    text.append("kimi-k2.6,rtx-pro-6000,8,vllm,ar,,,1,1.0,0,492.7,s,,16")
    draws = dataclasses.replace(draws, data_csv="\n".join(text) + "\n")
    assert max(r.concurrency for r in draws.measurements.rows) == 16
    out = concurrency_section(draws, seed=0)
    assert out["engines"]["sglang"]["scenario"].startswith("b300 x8")
    assert out["measured_max"] == 1


def test_beyond_the_measured_concurrency_the_answer_widens_by_the_prior():
    from ddtree_bayes.engine.structure import concurrency_beyond

    draws = point_mass_draws()   # the bundled B300 rows: all at C = 1, no run noise
    assert components(draws, 1)["log_sd"][0] == 0.0
    # C = 8 is three doublings beyond C = 1: 3 x 0.06 ([priors.concurrency_sd])
    assert components(draws, 8)["log_sd"][0] == pytest.approx(0.18)
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ar",
                            block=None, budget=None, verify_tokens=None, context_tokens=0,
                            concurrency=2)
    assert concurrency_beyond(draws, sc) == pytest.approx(1.0)


def test_the_spec_offsets_are_the_rows_offsets(tmp_path):
    """The refit path (engine/refit.py) recomputes each configuration's statistics from the
    spec's row offsets: they must be core.likelihood.offsets, C included."""
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import load_priors

    data = load(tmp_path, HEADER + ",concurrency\n"
                "kimi-k2.6,b300,8,sglang,ar,,,1,1,0,133,s,,\n"
                "kimi-k2.6,b300,8,sglang,ar,,,1,1,0,450,s,,4\n"
                "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,,0,900,s,,4\n")
    spec = S.build_spec(data, load_priors(bundled("priors.toml")))
    assert spec.row_offset == pytest.approx(C.offsets(data.rows))
    assert spec.row_offset == pytest.approx(np.log([1000, 4000, 4000]))


@pytest.mark.nuts
def test_validate_extrapolate_concurrency_on_a_public_sweep():
    """The SGLang MTP sweep of Qwen3.5-397B on 4x RTX PRO 6000 (data/public/conc, contexts
    0-64k): fit C <= 4, predict C = 8, 16; at context 0 the sweep's MTP total falls below AR's
    at C = 16 (769.1 vs 798.9 tok/s), and the fit must say so within one step of its grid."""
    from conftest import REPO

    src = REPO / "data" / "public" / "conc" / "sglang_mtp_qwen35_397b_b12x_rtxpro6000srvx4_conc.csv"
    code, out, err = run_cli(REPO, "validate", "--extrapolate", "--concurrency", "--sweeps",
                             str(src), "--quiet", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("validate", payload)
    (s,) = payload["sweeps"]
    assert {r["concurrency"] for r in s["rows"]} == {8, 16} and s["n"] == 16
    x = next(x for x in s["crossovers"] if x["context_tokens"] == 0)
    assert x["grid"] == [1, 2, 4, 8, 16] and x["measured_crossover"] == 16
    assert x["within_one_step"], x
    assert payload["crossovers_within_one_step"] >= 1
    code, _, err = run_cli(REPO, "validate", "--extrapolate", "--concurrency",
                           "--test-concurrency", "2,8")
    assert code == 2 and "--test-concurrency must lie above" in err


def test_add_a_row_at_concurrency_8(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    header = data.read_text().splitlines()[0]
    code, out, err = run_cli(work, "add", "--hardware", "b300", "--engine", "sglang", "--method",
                             "ar", "--accept", "1", "--tok-s", "720", "--concurrency", "8",
                             "--source", "HYPOTHETICAL")
    assert code == 0, err
    lines = data.read_text().splitlines()
    assert lines[0] == header + ",concurrency" and lines[-1].endswith(",8")
    # the step of 8 streams: 1 token x 8 / 720 tok/s = 11.1 ms
    assert "C=8 accept 1: 720 tok/s, step 11.1 ms" in out
    code, _, err = run_cli(work, "add", "--from-bench", "x.json", "--engine", "vllm",
                           "--method", "ar", "--concurrency", "8")
    assert code == 2 and "--concurrency comes from the --from-bench file" in err


def test_a_first_row_at_c_above_1_changes_the_models_structure(tmp_path):
    """`update` compares the models' metadata before reweighting: the first row at C > 1 adds
    ctx_batch_exponent, a parameter the proposal's draws lack, so it must refit."""
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import load_priors

    cfg = load_priors(bundled("priors.toml"))
    one = "kimi-k2.6,b300,8,sglang,ar,,,1,1,0,133,s,,{}\n"
    metas = []
    for extra in ("", "kimi-k2.6,b300,8,sglang,ar,,,1,1,0,450,s,,4\n"):
        data = load(tmp_path, HEADER + ",concurrency\n" + one.format("") + extra)
        metas.append(S.model_meta(S.build_spec(data, cfg), cfg))
    assert "concurrent" not in metas[0] and metas[1]["concurrent"] is True


def test_next_proposes_the_concurrencies_between_the_data_and_the_query():
    from ddtree_bayes.workflows.decisions import next_measurement as N

    draws = point_mass_draws()   # measured at C = 1 only
    query = N.parse_query(draws, "--engine sglang --accept 14 --concurrency 8")
    assert query.scenario.concurrency == 8
    cands = {c.why: c for c in N.default_candidates(draws, query)}
    assert cands["the query itself"].scenario.concurrency == 8
    assert [cands[f"the query at concurrency {c}"].scenario.concurrency for c in (2, 4)] == [2, 4]
    assert cands["AR at concurrency 4"].scenario.method == "ar"
    assert "the query at concurrency 8" not in cands and "AR at concurrency 1" not in cands
    assert cands["the query at concurrency 4"].describe().endswith("C=4")
    with pytest.raises(QueryError, match="concurrency 0 is not a whole number from 1 to 4096"):
        N.parse_query(draws, "--engine sglang --accept 14 --concurrency 0")


def test_predict_concurrency_csv_has_a_column_per_total_figure(tmp_path):
    import csv as csv_
    import io

    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                             "--concurrency", "1,4", "--format", "csv")
    assert code == 0, err
    rows = list(csv_.DictReader(io.StringIO(out)))
    assert [r["concurrency"] for r in rows] == ["1", "4"]
    assert float(rows[1]["total_median"]) == pytest.approx(4 * float(rows[1]["median"]))
    assert {"total_lo90", "total_hi90", "p_faster_than_ar"} <= set(rows[0])


def test_the_python_api_answers_at_c_streams():
    from ddtree_bayes import api

    with pytest.warns(UserWarning, match="C = 4 is beyond the concurrencies measured"):
        frame = api.predict(exact(point_mass_draws()), accept="12", engines=["sglang"],
                            concurrency=[1, 4])   # (said as predict says it: a walkthrough)
    assert list(frame["concurrency"]) == [1, 4]
    assert frame["total_median"].tolist() == pytest.approx([600.0, 4 * 12 / 50.9375 * 1000])


def test_the_reports_prior_draws_and_log_prior_know_the_batch_exponent():
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.workflows import report

    cfg = load_priors(bundled("priors.toml"))
    coords = {"system": ["a"], "overhead_group": [], "relation": []}
    d = report.prior_draws(cfg, coords, 100_000, seed=1)
    assert d[S.CTX_BATCH].mean() == pytest.approx(0.6, abs=0.005)   # Beta(3, 2)
    v = {k: x[:3] for k, x in d.items()}
    assert S.CTX_BATCH in report.log_prior(cfg, coords, v)
    del v[S.CTX_BATCH]   # a single-stream fit has no such variable
    assert S.CTX_BATCH not in report.log_prior(cfg, coords, v)


def test_a_new_row_at_c_streams_is_scored_on_its_total():
    """`update` scores a new row against the previous fit: a row at C = 4 measures the four
    streams' total (here exactly the point mass's: 4 x 1000 / 8.75 ms)."""
    import dataclasses

    from ddtree_bayes.workflows import living

    draws = point_mass_draws(n=4000)   # (the median of 4000 noisy draws: within ~0.5%)
    m = load_measurements(bundled("measurements.csv"), HW).rows[0]   # b300 AR
    row = dataclasses.replace(m, row=11, tok_s=4000 / 8.75, concurrency=4)
    (score,) = living.score_rows(draws, [row], seed=0)
    assert score["status"] == "ok" and score["percentile"] == pytest.approx(0.5, abs=0.02)
    assert score["median"] == pytest.approx(4000 / 8.75, rel=0.01)
    # update --format json's new_rows say the row's C (as removed_rows do): its measured
    # 457 tok/s is the 4 streams' total, not one stream's
    assert score["concurrency"] == 4
    import jsonschema

    from test_json_schemas import schema

    jsonschema.Draft202012Validator(schema("update")["properties"]["new_rows"]["items"]
                                    ).validate(score)


def test_validate_concurrency_needs_extrapolate(tmp_path):
    code, _, err = run_cli(tmp_path, "validate", "--concurrency")
    assert code == 2 and "--concurrency goes with --extrapolate" in err


def test_p_faster_than_ar_pairs_the_steps_of_a_system_never_measured():
    """At acceptance 1 a speculative step (4 tokens verified plus a drafter pass) never beats
    the AR step. On a GPU the fit never measured both steps come from transferred parameters,
    which carry their own noise: drawn separately for the two steps they said P = 0.07."""
    draws = point_mass_draws()
    for hardware in ("b300", "h200"):
        sc = P.resolve_scenario(draws, hardware=hardware, gpus=8, engine="sglang",
                                method="ddtree", block=3, budget=3, verify_tokens=None,
                                context_tokens=0)
        assert P.p_faster_than_ar(draws, sc, np.full(draws.n_draws, 1.0),
                                  np.random.default_rng(1)) == 0.0, hardware


def test_p_faster_than_ar_of_nan_steps_is_refused_not_zero(monkeypatch):
    """``accept x rate > rate_ar`` is False for a NaN step, so P(faster than AR) came out 0.0
    whenever a step draw was NaN: a drafter at 12 tokens per 20 ms step (600 tok/s) against
    AR's 1 per 8 ms (125) read "0.00" when AR's step was NaN in 2 of 8 draws (the 6 others
    faster: 6/8), and 0.00 with every AR draw NaN. Refused in one line, naming the step and
    its NaN draws, as predict refuses a NaN answer (require_finite)."""
    draws = point_mass_draws()
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0)
    assert P.p_faster_than_ar(draws, sc, np.full(8, 12.0), np.random.default_rng(0)) == 1.0
    real = P.step_components

    def with_nan(where):
        def components(fit, scenario, rng, anchor=True):
            parts, how = real(fit, scenario, rng, anchor=anchor)
            if scenario.method == "ar":
                parts = {**parts, "step": np.where(where, np.nan, parts["step"])}
            return parts, how
        return components

    for nan, says in ((np.arange(8) < 2, "2 of 8 draws"), (np.ones(8, bool), "8 of 8 draws")):
        monkeypatch.setattr(P, "step_components", with_nan(nan))
        with pytest.raises(QueryError) as err:
            P.p_faster_than_ar(draws, sc, np.full(8, 12.0), np.random.default_rng(0))
        text = str(err.value)
        assert "\n" not in text and err.value.exit_code == 2
        assert text.startswith("P(faster than AR) of b300 x8, sglang, ddtree, block 16, "
                               "budget 32, verify 33, context 0: ")
        assert f"the autoregressive step is not a number in {says}" in text


def test_p_faster_than_ar_of_a_zero_noise_fit_is_refused_through_predict():
    """Reachable through the API (not through a NUTS fit, whose sd draws are positive): a fit
    whose structure_sd and noise draws are all 0 (engine/testing.py's point masses) anchors a
    measured configuration's step at 0/0 = NaN. B300 SGLang AR is anchored to its measured
    row, NaN; EAGLE-3 there is unmeasured, not anchored, finite (3 tokens per 14.2 ms step,
    211 tok/s). predict --concurrency printed P(faster than AR) 0.00 beside that 211 against
    AR's ~125; now the question is refused."""
    from test_engine_effects import structured_engine_fit

    draws = structured_engine_fit(n=8)
    with np.errstate(invalid="ignore"), pytest.raises(QueryError) as err:   # (the 0/0)
        P.predict(draws, engines=["sglang"], method="eagle3", block=3, accept="3",
                  concurrency=[1, 2])
    assert "the autoregressive step is not a number in 8 of 8 draws" in str(err.value)


def test_a_target_at_c_streams_is_one_users_and_says_so(tmp_path):
    """`--target 3000 --concurrency 1,8` printed P(>=3000) 0.00 beside a total of 3404: the
    probability is of one user's tok/s (the row's median), and the header says so."""
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                             "--concurrency", "1,8", "--target", "400", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    # the point mass: 600 tok/s for the one stream at C = 1; at C = 8 each user gets less
    # than 400 while the 8 together get more
    assert rows[0]["p_ge_target"] == 1.0 and rows[0]["median"] == pytest.approx(600.0)
    assert rows[1]["median"] < 400 < rows[1]["total"]["median"]
    assert rows[1]["p_ge_target"] == 0.0
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                             "--concurrency", "1,8", "--target", "400")
    assert code == 0 and "P(user>=400)" in out
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                             "--target", "400")
    assert code == 0 and "P(>=400)" in out and "user" not in out.splitlines()[2]


def test_the_fits_check_names_a_rows_concurrency(capsys):
    """Rows at C = 2..16 of one AR configuration read as one C = 1 row five times in the
    fit's check ("rtx-pro-6000x8 vllm ar M=1 ctx=0 accept=1", the C = 16 one at pctile 0.04):
    the label carries C, as the report's does."""
    from ddtree_bayes.cli.fit import _print_ppc

    row = {"configuration": 0, "system": "rtx-pro-6000x8", "engine": "vllm", "method": "ar",
           "verify_tokens": 1, "context_tokens": 0.0, "accept_len": 1.0, "measured": 492.7,
           "median": 500.0, "lo50": 480.0, "hi50": 520.0, "lo90": 450.0, "hi90": 550.0,
           "percentile": 0.4}
    _print_ppc([{**row, "row": 4, "configuration": 4, "concurrency": 1},
                {**row, "row": 14, "configuration": 14, "concurrency": 16}])
    out = capsys.readouterr().out.splitlines()
    assert next(ln for ln in out if ln.startswith("row 4 ")).split()[2:7] == [
        "rtx-pro-6000x8", "vllm", "ar", "M=1", "ctx=0"]
    assert "rtx-pro-6000x8 vllm ar M=1 ctx=0 C=16 accept=1" in next(
        ln for ln in out if ln.startswith("row 14 "))
    assert "C=" not in next(ln for ln in out if ln.startswith("row 4 "))


def test_predict_says_which_concurrencies_are_prior_driven_and_which_anchor_is_whose(tmp_path):
    """The footer called every answer beyond the measured concurrencies prior-driven even when
    each C asked was measured, and one sorted note ("anchored to ... (M = 9, 1 row)") read as
    if it covered every C. The point mass measured C = 1 only."""
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                             "--concurrency", "1")
    assert code == 0, err
    assert "prior-driven" not in out and "sglang: overhead of measured group" in out
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                             "--concurrency", "1,8,16")
    assert code == 0, err
    # said with the warnings, so the JSON and the API say it too
    assert ("warning: C = 8, 16 are beyond the concurrencies measured on b300x8 (at most 1)"
            in err and "beyond" not in out)
    # the point mass anchors nothing (no structural discrepancy): one note for every C; notes
    # that differ by C name theirs (overhead_notes' doctest)
    notes = [ln.strip() for ln in out.splitlines() if ln.startswith("  sglang")]
    assert notes == ["sglang: overhead of measured group b300x8/sglang/ddtree"]


def test_validate_concurrency_at_a_c_no_sweep_measured_is_refused_before_fitting(tmp_path):
    """--test-concurrency 4096 fitted every sweep (28 s each) and printed an empty table,
    exit 0."""
    from pathlib import Path

    sweeps = sorted((Path(__file__).resolve().parents[1] / "data" / "public" / "conc")
                    .glob("vllm_*.csv"))[:2]
    code, out, err = run_cli(tmp_path, "validate", "--extrapolate", "--concurrency",
                             "--test-concurrency", "4096", "--sweeps", *map(str, sweeps))
    assert code == 2 and out == ""
    assert "no sweep has a row at C = 4096 to predict" in err
    assert f"{sweeps[0].name}: skipped (no row at C = 4096)" in err


@pytest.mark.parametrize("kind", ["no model column", "not UTF-8", "a row one cell short"])
def test_validate_concurrency_names_a_sweep_file_it_cannot_read(tmp_path, kind):
    """--extrapolate --concurrency read its --sweeps with csv.DictReader and no check: a file
    without a model column (data/hardware.csv passed by mistake) ended in "internal error:
    KeyError: 'model'" (exit 1), a Latin-1 file in a UnicodeDecodeError; --extrapolate's own
    reader names the file, the row or the column."""
    from pathlib import Path

    good = sorted((Path(__file__).resolve().parents[1] / "data" / "public" / "conc")
                  .glob("vllm_*.csv"))[0].read_text()
    bad = tmp_path / "sweep.csv"
    if kind == "no model column":
        bad.write_text(bundled("hardware.csv").read_text())
        column = "'model'"
    elif kind == "not UTF-8":
        bad.write_bytes(good.encode() + "x,caf\u00e9\n".encode("latin-1"))
        column = "not UTF-8"
    else:
        lines = good.splitlines()
        cells = lines[1].split(",")   # (the first cells hold no quoted comma)
        short = ",".join(cells[:3] + cells[4:])   # the gpus cell left out: every cell shifts
        bad.write_text("\n".join([lines[0], short, *lines[2:]]) + "\n")
        column = "row 2"
    code, out, err = run_cli(tmp_path, "validate", "--extrapolate", "--concurrency",
                             "--sweeps", str(bad))
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith("ddtree-bayes: error: "), err
    assert str(bad) in err and column in err and "fix:" in err
    assert "internal error" not in err


def test_validate_concurrency_refuses_a_sweep_named_twice(tmp_path):
    """--sweeps A A fitted A twice and counted its rows twice in the pooled scores."""
    from pathlib import Path

    src = sorted((Path(__file__).resolve().parents[1] / "data" / "public" / "conc")
                 .glob("vllm_*.csv"))[0]
    code, out, err = run_cli(tmp_path, "validate", "--extrapolate", "--concurrency",
                             "--sweeps", str(src), str(src))
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and "named twice" in err and "fix:" in err


def test_the_crossover_check_reads_a_blank_context_as_the_fit_does():
    """validate --concurrency's crossover check read a blank context as 0 where the fit, and
    every other reader, read it as the priors' default_context_tokens: with a default of 64k
    it priced the sweep's rows at context 0."""
    from ddtree_bayes.core.data import Measurement
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.concurrency_check import crossovers

    draws = point_mass_draws()
    draws.meta["model"]["default_context_tokens"] = 65536.0

    def row(i, method, c, tok_s):
        spec = method != "ar"
        return Measurement(i, "kimi-k2.6", "b300", 8, "sglang", method, 16 if spec else None,
                           32 if spec else None, 33 if spec else 1, 12.0 if spec else 1.0,
                           None, tok_s, "s", "", c)

    rows = [row(2, "ar", 1, 100.0), row(3, "ar", 2, 190.0), row(4, "ddtree", 1, 500.0),
            row(5, "ddtree", 2, 150.0)]
    (found,) = crossovers(draws, rows, seed=0)
    assert found["context_tokens"] == 65536.0
    assert found["grid"] == [1, 2] and found["measured_crossover"] == 2


def test_a_p_faster_than_ar_below_one_half_never_reads_0_50():
    """A trust pass: P(faster than AR) is a fraction of 4000 draws, and one of 0.4995 (below
    0.5: speculation has stopped paying) printed as 0.50 in the crossover line ("stops paying
    at C = 64 (P(faster than AR) 0.50; ...)") and in the table's P(> AR) column, the very
    threshold it is judged against. It keeps the digits that tell the side: 0.499 (and the
    line calls such a C uncertain: test_a_coin_flip_is_called_uncertain_not_paying_or_stopping)."""
    from ddtree_bayes.cli.predict import crossover_lines
    from ddtree_bayes.engine.structure import p_text

    rows = [{"engine": "vllm", "accept": "2.5", "concurrency": c, "p_faster_than_ar": p}
            for c, p in ((1, 0.99), (16, 0.7), (64, 0.4995))]
    assert crossover_lines(rows) == [
        "vllm, accept 2.5: speculation pays at C = 1 (P(faster than AR) 0.99), is uncertain at "
        "C = 16, 64 (0.499-0.70, between 0.25 and 0.75)"]
    never = [{**r, "p_faster_than_ar": p} for r, p in zip(rows, (0.3, 0.49975, 0.2),
                                                           strict=True)]
    assert crossover_lines(never) == [
        "vllm, accept 2.5: speculation is uncertain at C = 1, 16 (P(faster than AR) 0.30-0.4998, "
        "between 0.25 and 0.75), does not pay at C = 64 (0.20)"]
    assert [p_text(p) for p in (0.5, 0.4995, 0.49975, 0.9985, 0.004, 0.0)] == [
        "0.50", "0.499", "0.4998", "1.00", "0.00", "0.00"]


def test_validate_concurrency_reads_every_sweeps_rows_before_the_first_fit(tmp_path,
                                                                            monkeypatch):
    """A trust pass: a bad cell in the second sweep file (gpus 'eight') stopped the run only
    after the first sweep's fit; now every file's rows are read as check_sweep reads them
    before any fit, and the error names the file, row and column."""
    from pathlib import Path

    from ddtree_bayes.workflows import concurrency_check as CC

    src = sorted((Path(__file__).resolve().parents[1] / "data" / "public" / "conc")
                 .glob("vllm_mtp_*.csv"))[:2]
    good = tmp_path / "a.csv"
    good.write_text(src[0].read_text())
    lines = src[1].read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")   # (the first cells hold no quoted comma)
    cells[header.index("gpus")] = "eight"
    bad = tmp_path / "b.csv"
    bad.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    fitted = []
    monkeypatch.setattr(CC, "check_sweep", lambda path, *a, **k: fitted.append(path))
    code, out, err = run_cli(tmp_path, "validate", "--extrapolate", "--concurrency",
                             "--sweeps", str(good), str(bad))
    assert code == 2 and out == "" and fitted == [], (err, fitted)
    assert err.count("\n") == 1 and str(bad) in err and "row 2" in err and "'gpus'" in err, err


def test_validate_concurrency_reads_and_loads_each_sweep_file_once(tmp_path, monkeypatch):
    """validate --extrapolate --concurrency read each runnable sweep file three times (the
    skip checks, the up-front row check, the fit) and loaded its rows twice; now once each,
    the parsed rows passed on. The fit and the scoring are stubbed (fitting is the public
    sweep test's job): predicted median = measured, 90% = +-10%."""
    import csv as csv_
    from collections import Counter
    from pathlib import Path

    from ddtree_bayes.workflows import concurrency_check as CC
    from ddtree_bayes.workflows import extrapolation as X

    conc = Path(__file__).resolve().parents[1] / "data" / "public" / "conc"
    # a sweep of a model without a card: the GLM-5 sweep, its model renamed (glm-5 has one)
    no_card = tmp_path / "glm9.csv"
    no_card.write_text((conc / "sglang_mtp_glm5_b12x_rtxpro6000x8_conc.csv").read_text()
                       .replace(",glm-5,", ",glm-9,"))
    sglang = conc / "sglang_mtp_qwen35_397b_b12x_rtxpro6000srvx4_conc.csv"
    with (conc / "vllm_specdec_qwen38_27b_rtx3090_syvai_conc.csv").open(newline="") as f:
        reader = csv_.DictReader(f)
        records = list(reader)
    assert (records[7]["method"], records[7]["concurrency"]) == ("mtp", "8")
    records[7]["verify_tokens"] = ""   # file row 9, at C = 8: skipped (no draft depth)
    mine = tmp_path / "qwen38.csv"
    with mine.open("w", newline="") as f:
        w = csv_.DictWriter(f, fieldnames=reader.fieldnames)
        w.writeheader()
        w.writerows(records)

    reads: Counter = Counter()
    loads: Counter = Counter()
    read_text, load = X.read_text, CC.load_measurements
    monkeypatch.setattr(X, "read_text", lambda path, fix: reads.update([Path(path).name])
                        or read_text(path, fix))
    monkeypatch.setattr(CC, "load_measurements", lambda path, *a, **k: loads.update(
        [Path(path).name]) or load(path, *a, **k))

    def refit(inputs, held, seed, settings):   # the fit's own parse of the rows, uncounted
        hw = load_hardware("hardware.csv", text=inputs.hardware_csv)
        return None, [], load(inputs.data_name, hw, text=inputs.data_csv), None, None

    crossed = []
    monkeypatch.setattr(CC, "refit_without", refit)
    monkeypatch.setattr(CC, "scored_interval", lambda draws, m, rng: {
        "measured": m.tok_s, "median": m.tok_s, "lo90": 0.9 * m.tok_s, "hi90": 1.1 * m.tok_s})
    monkeypatch.setattr(CC, "crossovers", lambda draws, rows, seed: crossed.append(len(rows))
                        or [])
    res = CC.extrapolate_concurrency([no_card, mine, sglang], workdir=tmp_path, progress=False)
    assert reads == {no_card.name: 1, "qwen38.csv": 1, sglang.name: 1}
    assert loads == {"qwen38.csv": 1, sglang.name: 1}
    assert res["notes"] == [f"{no_card.name}: skipped (no model card for glm-9)"]
    # qwen38: 31 rows, 1 skipped; C <= 4: 4 x 6 = 24 trained; C = 8: 7 - 1 = 6 scored.
    # the SGLang sweep: 51 rows, 10 + 10 + 10 at C <= 4; 9 at C = 8, 7 at C = 16
    assert [(s["sweep"], s["skipped_rows"], s["trained_rows"], s["n"]) for s in res["sweeps"]] \
        == [("qwen38.csv", 1, 24, 6), (sglang.name, 0, 30, 16)]
    assert crossed == [30, 51]
    assert [r["concurrency"] for r in res["sweeps"][0]["rows"]] == [8] * 6
    assert res["pooled"]["n"] == 22 and res["pooled"]["cov90"] == 1.0
    assert res["pooled"]["width90"] == pytest.approx(0.2)


def test_crossover_lines_name_the_cs_paying_fields_names():
    """predict --concurrency's crossover line and report's ``paying_fields`` answer one
    question (where speculation pays: P(faster than AR) >= 0.5); per engine and acceptance,
    rows in any order, each kind of answer, by hand (no C uncertain: P outside 0.25-0.75)."""
    from ddtree_bayes.cli.predict import crossover_lines
    from ddtree_bayes.engine.structure import paying_fields

    cs = [1, 4, 16, 64]
    cases = {"every": (0.9, 0.8, 0.8, 0.76), "never": (0.2, 0.1, 0.1, 0.05),
             "stops": (0.9, 0.8, 0.2, 0.1), "starts": (0.1, 0.2, 0.8, 0.9),
             "mixed": (0.8, 0.2, 0.9, 0.1)}
    rows = [{"engine": kind, "accept": "3", "concurrency": c, "p_faster_than_ar": p}
            for kind, ps in cases.items() for c, p in reversed(list(zip(cs, ps, strict=True)))]
    rows.append({"engine": "every", "accept": "3", "concurrency": 1})   # (AR: no P)
    assert crossover_lines(rows) == [
        "every, accept 3: speculation pays at every concurrency asked (P(faster than AR) >= "
        "0.76)",
        "never, accept 3: speculation pays at no concurrency asked (P(faster than AR) <= 0.20)",
        "stops, accept 3: speculation stops paying at C = 16 (P(faster than AR) 0.20; 0.80 at "
        "C = 4)",
        "starts, accept 3: speculation does not pay at C = 1 (P(faster than AR) 0.10), pays "
        "from C = 16 (0.80)",
        "mixed, accept 3: speculation pays at C = 1, 16, not at C = 4, 64 (P(faster than AR) "
        "0.10-0.90)"]
    assert [paying_fields(cs, list(ps)) for ps in cases.values()] == [
        {"pays": "every", "pays_at": cs, "stops_paying_at": None, "starts_paying_at": None},
        {"pays": "never", "pays_at": [], "stops_paying_at": None, "starts_paying_at": None},
        {"pays": "stops", "pays_at": [1, 4], "stops_paying_at": 16, "starts_paying_at": None},
        {"pays": "starts", "pays_at": [16, 64], "stops_paying_at": None, "starts_paying_at": 16},
        {"pays": "mixed", "pays_at": [1, 16], "stops_paying_at": None, "starts_paying_at": None}]


def test_a_coin_flip_is_called_uncertain_not_paying_or_stopping():
    """A new-user walkthrough: `predict --method ddtree ... --concurrency 1,8` printed
    "accept 5: speculation pays at every concurrency asked (P(faster than AR) >= 0.63)" beside
    "accept 4: ... stops paying at C = 8 (0.48)": odds of 0.63 and 0.48 called a verdict. A C
    whose P(faster than AR) is strictly between 0.25 and 0.75 (odds under 3:1 either way) is
    now called uncertain; the lines with none such are unchanged, and the JSON's fields keep
    their 0.5 meaning, with ``uncertain_at`` added."""
    from ddtree_bayes.cli.predict import crossover, crossover_lines

    def rows(accept, *ps, cs=(1, 8)):
        return [{"engine": "vllm", "accept": accept, "concurrency": c, "p_faster_than_ar": p}
                for c, p in zip(cs, ps, strict=True)]

    assert crossover_lines(rows("4", 0.99, 0.48) + rows("5", 1.0, 0.63)
                           + rows("6", 0.55, 0.63)) == [
        "vllm, accept 4: speculation pays at C = 1 (P(faster than AR) 0.99), is uncertain at "
        "C = 8 (0.48, between 0.25 and 0.75)",
        "vllm, accept 5: speculation pays at C = 1 (P(faster than AR) 1.00), is uncertain at "
        "C = 8 (0.63, between 0.25 and 0.75)",
        "vllm, accept 6: speculation is uncertain at C = 1, 8 (P(faster than AR) 0.55-0.63, "
        "between 0.25 and 0.75)"]
    # each kind, in the order of its first C; 0.75 and 0.25 are calls
    (four,) = crossover(rows("3", 0.9, 0.5, 0.1, 0.3, 0.75, 0.25, cs=(1, 4, 16, 64, 128, 256)))
    assert four["line"] == (
        "vllm, accept 3: speculation pays at C = 1, 128 (P(faster than AR) >= 0.75), is "
        "uncertain at C = 4, 64 (0.30-0.50, between 0.25 and 0.75), does not pay at C = 16, "
        "256 (<= 0.25)")
    assert four["uncertain_at"] == [4, 64]
    (stops,) = crossover(rows("4", 0.99, 0.48))   # (the 0.5 fields as before)
    assert (stops["pays"], stops["pays_at"], stops["stops_paying_at"], stops["uncertain_at"]) == (
        "stops", [1], 8, [8])
    (sure,) = crossover(rows("7", 0.99, 0.80))
    assert sure["uncertain_at"] == [] and sure["line"] == (
        "vllm, accept 7: speculation pays at every concurrency asked (P(faster than AR) >= 0.80)")


def test_an_uncertain_p_faster_than_ar_never_reads_as_0_75_or_0_25():
    """`predict --engine sglang --accept 14 --drafter D --model-average --concurrency 1,8` on
    the bundled data (a P of 0.74998) printed "is uncertain at C = 8 (0.75, between 0.25 and
    0.75)", and 0.75 in the P(> AR) column: the threshold at which the line calls it paying. As
    at 0.5 (test_a_p_faster_than_ar_below_one_half_never_reads_0_50), every P shown keeps the
    digits that put it in its own verdict: does not pay (<= 0.25), uncertain, pays (>= 0.75)."""
    from ddtree_bayes.cli.predict import crossover_lines
    from ddtree_bayes.engine.structure import p_bound, p_text

    rows = [{"engine": "sglang", "accept": "14", "concurrency": c, "p_faster_than_ar": p}
            for c, p in ((1, 1.0), (8, 0.7499822912617329))]
    assert crossover_lines(rows) == [
        "sglang, accept 14: speculation pays at C = 1 (P(faster than AR) 1.00), is uncertain at "
        "C = 8 (0.74998, between 0.25 and 0.75)"]
    # the table's cells: a verdict's own threshold rounds to it, the other side does not
    assert [p_text(p) for p in (0.74998, 0.7503, 0.2504, 0.2496, 0.7499999, 0.2500001)] == [
        "0.74998", "0.75", "0.2504", "0.25", "<0.75", ">0.25"]
    # (a range of several is a bound, true as shown: test_a_bound_on_p_faster_than_ar_...)
    assert p_bound(0.7451, upper=True) == "0.75"


def test_a_bound_on_p_faster_than_ar_is_true_at_the_precision_shown():
    """s45b finding 5: `predict --engine sglang --accept 14 --concurrency 1,8` (P 1.0 and
    0.9955) printed "pays at every concurrency asked (P(faster than AR) >= 1.00)": the least P
    rounded up to certainty. A lower bound is rounded down, an upper bound up, a range outward
    (predict's lines and the report's, which share structure.uncertain_line)."""
    from ddtree_bayes.cli.predict import crossover_lines
    from ddtree_bayes.engine.structure import uncertain_line

    def rows(accept, *ps, cs=(1, 8)):
        return [{"engine": "sglang", "accept": accept, "concurrency": c, "p_faster_than_ar": p}
                for c, p in zip(cs, ps, strict=True)]

    assert crossover_lines(rows("14", 1.0, 0.9955) + rows("2", 0.2049, 0.01)
                           + rows("3", 0.8449, 0.2051, 0.7551, cs=(1, 8, 16))) == [
        "sglang, accept 14: speculation pays at every concurrency asked (P(faster than AR) >= "
        "0.99)",
        "sglang, accept 2: speculation pays at no concurrency asked (P(faster than AR) <= 0.21)",
        "sglang, accept 3: speculation pays at C = 1, 16, not at C = 8 (P(faster than AR) "
        "0.20-0.85)"]
    assert uncertain_line([1, 4, 8, 16, 32, 64], [0.9955, 0.999, 0.3049, 0.7451, 0.2001,
                                                   0.1]) == (
        "pays at C = 1, 4 (P(faster than AR) >= 0.99), is uncertain at C = 8, 16 (0.30-0.75, "
        "between 0.25 and 0.75), does not pay at C = 32, 64 (<= 0.21)")
    # a bound that rounding to two decimals would carry across 0.5 takes more digits
    assert uncertain_line([1, 8], [0.4995, 0.26]) == (
        "is uncertain at C = 1, 8 (P(faster than AR) 0.26-0.4995, between 0.25 and 0.75)")
    # bounds already exact at two decimals are as before
    assert uncertain_line([1, 8, 16], [0.75, 0.9, 0.25]) == (
        "pays at C = 1, 8 (P(faster than AR) >= 0.75), does not pay at C = 16 (0.25)")


def test_validate_concurrency_pools_the_converged_fits_only(tmp_path, monkeypatch, capsys):
    """`validate --extrapolate --concurrency` pooled the rows of a sweep whose fit failed its
    convergence gates into the pooled scores, and its crossovers into the counts, as if fine.
    The fit is stubbed: the SGLang sweep's fails its gates and predicts twice the measured
    tok/s (90% interval +-10%), the Qwen3.8 sweep's predicts it exactly; each sweep shows one
    crossover, predicted within one step. Before: pooled n 23 (7 + 16 rows at C = 8, 16),
    90% coverage 7/23, crossovers 2 of 2. Now pooled over the Qwen3.8 sweep: n 7, coverage
    100%, crossovers 1 of 1; unconverged_rows names the SGLang sweep's 16 rows, and the text
    says they are not pooled; its own line keeps its scores (GATES FAILED)."""
    from pathlib import Path

    from ddtree_bayes.cli import main as cli
    from ddtree_bayes.workflows import concurrency_check as CC
    from test_json_schemas import validate_output

    conc = Path(__file__).resolve().parents[1] / "data" / "public" / "conc"
    qwen = conc / "vllm_specdec_qwen38_27b_rtx3090_syvai_conc.csv"
    sglang = conc / "sglang_mtp_qwen35_397b_b12x_rtxpro6000srvx4_conc.csv"

    class Draws:
        scale = 1.0

    def refit(inputs, held, seed, settings):
        hw = load_hardware("hardware.csv", text=inputs.hardware_csv)
        draws = Draws()
        failed = "sglang" in inputs.data_name
        draws.scale = 2.0 if failed else 1.0
        return (draws, ["max R-hat 1.05 > 1.01 (x)"] if failed else [],
                load_measurements(inputs.data_name, hw, text=inputs.data_csv), None, None)

    monkeypatch.setattr(CC, "refit_without", refit)
    monkeypatch.setattr(CC, "scored_interval", lambda draws, m, rng: {
        "measured": m.tok_s, "median": draws.scale * m.tok_s,
        "lo50": 0.95 * draws.scale * m.tok_s, "hi50": 1.05 * draws.scale * m.tok_s,
        "lo90": 0.9 * draws.scale * m.tok_s, "hi90": 1.1 * draws.scale * m.tok_s,
        "percentile": 0.5 if draws.scale == 1.0 else 0.0})
    monkeypatch.setattr(CC, "crossovers", lambda draws, rows, seed: [
        {"method": "mtp", "block": 3, "context_tokens": 0, "grid": [4, 8],
         "measured_crossover": 8, "predicted_crossover": 8, "p_faster_than_ar": [0.9, 0.1],
         "within_one_step": True}])
    res = CC.extrapolate_concurrency([qwen, sglang], workdir=tmp_path, progress=False)
    assert [(s["converged"], s["n"]) for s in res["sweeps"]] == [(True, 7), (False, 16)]
    assert res["sweeps"][1]["cov90"] == 0.0   # its own line: its scores
    assert res["pooled"]["n"] == 7 and res["pooled"]["cov90"] == 1.0
    assert res["pooled"]["mean_abs"] == 0.0
    assert res["crossovers_shown"] == 1 and res["crossovers_within_one_step"] == 1
    assert list(res["unconverged_rows"]) == [sglang.name]
    assert res["unconverged_rows"][sglang.name] == [r["row"] for r in res["sweeps"][1]["rows"]]
    assert len(res["unconverged_rows"][sglang.name]) == 16
    validate_output("validate", json.loads(json.dumps(res)))

    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", "--extrapolate", "--concurrency", "--sweeps", str(qwen),
                     str(sglang), "--quiet"]) == 0
    out = capsys.readouterr().out
    rows = ", ".join(map(str, res["unconverged_rows"][sglang.name]))
    assert (f"not counted above: rows {rows}, held out by {sglang.name}, whose refit failed its "
            "convergence gates (max R-hat 1.05 > 1.01 (x)): scored on its own line only, not "
            "pooled") in out
    assert ("crossovers shown by the sweeps: 1, predicted within one measured step: 1 (beyond "
            "the fitted C <= 4: 1, of them within one step: 1)") in out


def test_crossovers_at_a_fitted_concurrency_are_counted_apart(tmp_path, monkeypatch):
    """A held-out review (2026-12-05): the crossover tally counted a crossover the sweep shows
    at a concurrency the fit trained on (C <= 4) as "within one step" like one it predicted:
    11 of the recorded 21 (all right) are such, and of the 10 beyond C = 4 the fit predicted
    7. Each crossover now says whether it lies in the fitted range, and the counts are split.
    Stubbed: one sweep, two crossovers, at C = 4 (right) and at C = 16 (predicted C = 64,
    two steps off)."""
    from pathlib import Path

    from ddtree_bayes.workflows import concurrency_check as CC
    from test_json_schemas import validate_output

    qwen = (Path(__file__).resolve().parents[1] / "data" / "public" / "conc"
            / "vllm_specdec_qwen38_27b_rtx3090_syvai_conc.csv")

    def refit(inputs, held, seed, settings):
        hw = load_hardware("hardware.csv", text=inputs.hardware_csv)
        return (object(), [], load_measurements(inputs.data_name, hw, text=inputs.data_csv),
                None, None)

    monkeypatch.setattr(CC, "refit_without", refit)
    monkeypatch.setattr(CC, "scored_interval", lambda draws, m, rng: {
        "measured": m.tok_s, "median": m.tok_s, "lo50": m.tok_s, "hi50": m.tok_s,
        "lo90": m.tok_s, "hi90": m.tok_s, "percentile": 0.5})
    grid = [1, 2, 4, 8, 16, 32, 64]
    monkeypatch.setattr(CC, "crossovers", lambda draws, rows, seed: [
        {"method": "mtp", "block": 3, "context_tokens": c, "grid": grid,
         "measured_crossover": m, "predicted_crossover": p, "p_faster_than_ar": [0.5] * 7,
         "within_one_step": abs(grid.index(m) - grid.index(p)) <= 1}
        for c, m, p in ((0, 4, 4), (16384, 16, 64))])
    res = CC.extrapolate_concurrency([qwen], workdir=tmp_path, progress=False)
    assert [x["fitted_range"] for x in res["sweeps"][0]["crossovers"]] == [True, False]
    assert (res["crossovers_shown"], res["crossovers_within_one_step"]) == (2, 1)
    assert (res["crossovers_beyond_fit"], res["crossovers_beyond_fit_within_one_step"]) == (1, 0)
    validate_output("validate", json.loads(json.dumps(res)))


def test_a_step_verifying_more_tokens_than_measured_is_prior_driven_at_a_measured_c():
    """A serving walkthrough: budget 16 at C = 8 (8 x 17 = 136 tokens per step) was answered
    without a note when C = 8 itself was measured (AR), though no step on the system verified
    more than 32 tokens; optimize flagged it ("beyond the measured C x M"), predict did not."""
    from ddtree_bayes.engine.structure import beyond_measured_note, measured_rows

    d = point_mass_draws()
    lines = d.data_csv.splitlines()
    header = lines[0] + ",concurrency"
    rows = [ln + "," for ln in lines[1:]] + [
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,800,test,,8",
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,1200,test,,32"]
    d = d.view(data_csv="\n".join([header, *rows]) + "\n")
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1, 8], verify_tokens=17) == (
        "at C = 8 a step verifies 136 tokens (C x M), more than any measured on b300x8 (at most "
        "32): there the step's growth with C and M is the roofline's (weights once per step, KV "
        "reads and tree nodes per stream, the compute knee, and for an MoE the distinct experts "
        "read): prior-driven")
    b300 = measured_rows(d, "b300x8")
    assert beyond_measured_note(d, b300, [1, 2], verify_tokens=9) is None   # 18 <= 32
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [64], verify_tokens=1).startswith(
        "C = 64 is beyond the concurrencies measured on b300x8 (at most 32)")


def test_one_stream_verifying_more_tokens_than_measured_is_said_as_at_c_above_1():
    """An audit: eagle3 measured at M = 4 on rtx-pro-6000x8 (the bundled rows), asked block 64
    budget 64 (M = 65) at one stream, warned of nothing, while the same tree at C = 2 was
    flagged (beyond_measured_note skipped C = 1). One stream verifying 65 tokens is as far past
    the rows as two streams verifying 65 each: the growth there is the roofline's.

    The point-mass fit has parameters for b300x8 alone (its data holds the bundled
    rtx-pro-6000x8 rows, which it did not fit): a question on rtx-pro-6000x8 is transferred
    from b300x8, whose rows bound its step (engine/transfer.rows_behind), as its distance and
    its concurrency discrepancy count; the warning counted from the unfitted rtx-pro-6000x8
    rows (at most 4 tokens) instead. By hand: b300x8 verified at most 9 tokens a step (DDTree
    budget 8) at C = 1 only: 65 > 9, and at C = 2 2 x 65 = 130 > 9, C = 2 > 1."""
    from ddtree_bayes.engine.structure import beyond_measured_note, measured_rows

    d = point_mass_draws()   # (the bundled rows: eagle3 block 3 budget 3, M = 4, C = 1)
    eagle = dict(hardware="rtx-pro-6000", engines=("vllm",), method="eagle3", block=64,
                 budget=64, accept="3")
    # rtx-pro-6000x8's own rows, as a fit measuring them counts them
    own = measured_rows(d, "rtx-pro-6000x8")
    assert beyond_measured_note(d, own, [1], verify_tokens=65) == (
        "at C = 1 a step verifies 65 tokens (C x M), more than any measured on "
        "rtx-pro-6000x8 (at most 4): there the step's growth with M is the roofline's "
        "(compute knee, and for an MoE the distinct experts read): partly prior-driven")
    lead = "rtx-pro-6000x8 has no measurements and its step is transferred from b300x8: "
    c1 = (lead + "at C = 1 a step verifies 65 tokens (C x M), more than any measured on b300x8 "
          "(at most 9): there the step's growth with M is the roofline's (compute knee, and for "
          "an MoE the distinct experts read): partly prior-driven")
    assert resolve(d, Flags(**eagle)).warnings == (c1,)   # predict without --concurrency
    assert resolve(d, Flags(**eagle, concurrency=(1,))).warnings == (c1,)
    # at C = 1 and 2: one sentence, C = 2 beyond the concurrencies, both beyond the tokens
    assert resolve(d, Flags(**eagle, concurrency=(1, 2))).warnings == (
        lead + "C = 2 is beyond the concurrencies measured on b300x8 (at most 1); at C = 1, 2 "
        "a step verifies up to 130 tokens (C x M), more than any measured on b300x8 (at "
        "most 9): there the step's growth with C and M is the roofline's (weights once per step, "
        "KV reads and tree nodes per stream, the compute knee, and for an MoE the distinct "
        "experts read): prior-driven",)
    # within the rows: the measured M = 4 itself, and B300's measured budget 8 (M = 9)
    assert resolve(d, Flags(**{**eagle, "block": 3, "budget": 3})).warnings == ()
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1], verify_tokens=9) is None
    # the bundled default question (budget 32, M = 33, against budget 8's M = 9) says it too
    assert resolve(d, Flags(accept="14")).warnings == (
        "at C = 1 a step verifies 33 tokens (C x M), more than any measured on b300x8 (at most "
        "9): there the step's growth with M is the roofline's (compute knee, and for an MoE "
        "the distinct experts read): partly prior-driven",)


def test_the_c_x_m_clause_names_every_c_it_applies_to_and_the_largest_c_x_m():
    """predict --concurrency 1,4 of the bundled question (M = 33) warned "at C = 1 a step
    verifies 33 tokens (C x M), more than any measured on b300x8 (at most 9)", though the step
    at C = 4 verifies 4 x 33 = 132: the clause left out the C beyond the measured
    concurrencies. It names every C asked whose C x M exceeds the most measured, and the
    largest C x M; one C alone reads as before (the README's headline)."""
    from ddtree_bayes.engine.structure import beyond_measured_note, measured_rows

    d = point_mass_draws()   # b300x8: C = 1 only, at most M = 9
    tail = (": there the step's growth with C and M is the roofline's (weights once per step, "
            "KV reads and tree nodes per stream, the compute knee, and for an MoE the distinct "
            "experts read): prior-driven")
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1, 4], verify_tokens=33) == (
        "C = 4 is beyond the concurrencies measured on b300x8 (at most 1); at C = 1, 4 a step "
        "verifies up to 132 tokens (C x M), more than any measured on b300x8 (at most 9)" + tail)
    # docs/examples/predict-concurrency.txt: 128 x 33 = 4224
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1, 8, 32, 128],
                                verify_tokens=33) == (
        "C = 8, 32, 128 are beyond the concurrencies measured on b300x8 (at most 1); at C = 1, "
        "8, 32, 128 a step verifies up to 4224 tokens (C x M), more than any measured on b300x8 "
        "(at most 9)" + tail)
    # one stream alone: byte for byte the README's line
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1], verify_tokens=33) == (
        "at C = 1 a step verifies 33 tokens (C x M), more than any measured on b300x8 (at most "
        "9): there the step's growth with M is the roofline's (compute knee, and for an MoE "
        "the distinct experts read): partly prior-driven")
    # AR measured at C = 8 and 32 (at most 32 tokens a step): budget 16 (M = 17) at C = 1, 2, 8
    # verifies 17, 34, 136; at C = 2, 64 (64 beyond) 34 and 1088
    lines = d.data_csv.splitlines()
    rows = [ln + "," for ln in lines[1:]] + [
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,800,test,,8",
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,1200,test,,32"]
    d = d.view(data_csv="\n".join([lines[0] + ",concurrency", *rows]) + "\n")
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1, 2, 8], verify_tokens=17) == (
        "at C = 2, 8 a step verifies up to 136 tokens (C x M), more than any measured on b300x8 "
        "(at most 32)" + tail)
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [2, 64], verify_tokens=17) == (
        "C = 64 is beyond the concurrencies measured on b300x8 (at most 32); at C = 2, 64 a step "
        "verifies up to 1088 tokens (C x M), more than any measured on b300x8 (at most 32)"
        + tail)


def test_the_c_x_m_clause_is_said_when_only_a_c_beyond_the_rows_exceeds_the_most_measured():
    """predict --budget 8 --block 8 --concurrency 1,4 on the bundled rows (b300x8: C = 1 only,
    at most M = 9) warned only "C = 4 is beyond the concurrencies ...", though the step at
    C = 4 verifies 4 x 9 = 36 tokens against 9 measured: the C x M clause was said only when
    a C within the measured concurrencies exceeded it, so the compute knee went unnamed.
    docs/json-output.md: "at any C, 1 too, a step whose C x M tokens exceed the most
    measured"."""
    from ddtree_bayes.engine.structure import beyond_measured_note, measured_rows

    d = point_mass_draws()
    both = ("C = 4 is beyond the concurrencies measured on b300x8 (at most 1); at C = 4 a step "
            "verifies 36 tokens (C x M), more than any measured on b300x8 (at most 9): there "
            "the step's growth with C and M is the roofline's (weights once per step, KV reads "
            "and tree nodes per stream, the compute knee, and for an MoE the distinct experts "
            "read): prior-driven")
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1, 4], verify_tokens=9) == both
    assert resolve(d, Flags(budget=8, block=8, accept="4", concurrency=(1, 4))).warnings == (
        both,)
    # C = 1 alone: 9 tokens, as measured; AR (M = 1) at C = 4, 8, 16: 16 > 9 only
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1], verify_tokens=9) is None
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [4, 8, 16], verify_tokens=1) == (
        "C = 4, 8, 16 are beyond the concurrencies measured on b300x8 (at most 1); at C = 16 a "
        "step verifies 16 tokens (C x M), more than any measured on b300x8 (at most 9): there "
        "the step's growth with C and M is the roofline's (weights once per step, KV reads "
        "and tree nodes per stream, the compute knee, and for an MoE the distinct experts "
        "read): prior-driven")
    # within the rows in C x M (C = 4 of M = 2: 8 <= 9): the C clause alone, as before
    assert beyond_measured_note(d, measured_rows(d, "b300x8"), [1, 4], verify_tokens=2) == (
        "C = 4 is beyond the concurrencies measured on b300x8 (at most 1): there the step's "
        "growth with C is the roofline's (weights once per step, KV reads and tree nodes per "
        "stream): prior-driven")


#: the pair roofline's lead and reference in the point-mass fit of several models: it is
#: learned from kimi-k2.6@b300x8 (AR, and DDTree budget 8: M = 9, at C = 1) and
#: llama-3.1-8b-instruct@h100x1 (AR): at most 9 tokens a step, on kimi-k2.6@b300x8
ROOF_LEAD = ("llama-3.1-8b-instruct@l40sx1 has no measurements and its step is from the pair "
             "roofline, learned from 2 measured pairs: ")
ROOF_MOST = "more than any measured across those pairs (at most 9, on kimi-k2.6@b300x8)"


def test_a_pair_from_the_pair_roofline_is_warned_of_past_every_measured_pairs_rows(tmp_path):
    """In a fit of several models a (model, system) pair without rows takes its step from the
    pair roofline and has no reference system, so predict warned of no C x M at all: one
    stream of budget 32 (M = 33) for llama-3.1-8b-instruct on one L40S said nothing, though no
    measured pair verified more than 9 tokens a step. Now the line says what the roofline was
    learned from and the largest C x M across those pairs. By hand: M = 33 at C = 1: 33 > 9;
    --concurrency 1,4: 4 x 33 = 132 > 9 and C = 4 beyond the pair's (none); AR at C = 8: 8 <= 9
    tokens, the concurrency alone; budget 8 (M = 9) at C = 1: within, nothing."""
    from ddtree_bayes.engine.testing import multi_model_draws

    d = multi_model_draws()
    ask = dict(model="llama-3.1-8b-instruct", hardware="l40s", gpus=1)
    one = (ROOF_LEAD + "at C = 1 a step verifies 33 tokens (C x M), " + ROOF_MOST
           + ": there the step's growth with M is the roofline's (compute knee, and for an MoE "
           "the distinct experts read): partly prior-driven")
    assert resolve(d, Flags(**ask, accept="14")).warnings == (one,)   # (was: ())
    four = (ROOF_LEAD + "C = 4 is beyond the concurrencies measured on "
            "llama-3.1-8b-instruct@l40sx1 (none); at C = 1, 4 a step verifies up to 132 tokens "
            "(C x M), " + ROOF_MOST + ": there the step's growth with C and M is the "
            "roofline's (weights once per step, KV reads and tree nodes per stream, the "
            "compute knee, and for an MoE the distinct experts read): prior-driven")
    assert resolve(d, Flags(**ask, accept="14", concurrency=(1, 4))).warnings == (four,)
    assert resolve(d, Flags(**ask, method="ar", accept="1", concurrency=(1, 8))).warnings == (
        ROOF_LEAD + "C = 8 is beyond the concurrencies measured on llama-3.1-8b-instruct@l40sx1 "
        "(none): there the step's growth with C is the roofline's (weights once per step, KV "
        "reads and tree nodes per stream): prior-driven",)
    assert resolve(d, Flags(**ask, block=8, budget=8, accept="4")).warnings == ()
    # a validation fold holding kimi-k2.6@b300x8 out learns the roofline from llama's AR alone
    fold = d.view(meta={**d.meta, "held_out_systems": ["kimi-k2.6@b300x8"],
                        "held_out_rows": [2, 3]})
    assert resolve(fold, Flags(**ask, block=8, budget=8, accept="4")).warnings == (
        ROOF_LEAD.replace("2 measured pairs", "1 measured pair") + "at C = 1 a step verifies "
        "9 tokens (C x M), more than any measured across those pairs (at most 1, on "
        "llama-3.1-8b-instruct@h100x1): there the step's growth with M is the roofline's "
        "(compute knee, and for an MoE the distinct experts read): partly prior-driven",)


def test_an_unmeasured_system_is_warned_of_past_the_rows_its_step_is_transferred_from(
        tmp_path):
    """predict --hardware h200 --accept 14 (budget 32, M = 33) warned of nothing: h200x8 has
    no rows, so beyond_measured_note found no most-measured C x M there, though its step is
    transferred from b300x8 (engine/transfer.py), whose rows verified at most 9 tokens a step
    (DDTree budget 8) at C = 1 only; asked of b300x8 the same question warns. It now warns as
    for b300x8, naming it. By hand: M = 33 at C = 1: 33 > 9; --concurrency 1,4: C = 4 > 1 and
    4 x 33 = 132 > 9. With b300x8's AR measured at C = 8 and 32 (at most 32 tokens a step),
    AR (M = 1) at C = 8: 8 <= 32 tokens and C = 8 <= 32: nothing (it said "C = 8 is beyond the
    concurrencies measured on h200x8 (none)", while the predictive's concurrency discrepancy
    counts from b300x8: 0 doublings); at C = 64: 64 > 32 both ways."""
    from test_cli_support import BEYOND_M33

    lead = "h200x8 has no measurements and its step is transferred from b300x8: "
    tail = (": there the step's growth with C and M is the roofline's (weights once per step, "
            "KV reads and tree nodes per stream, the compute knee, and for an MoE the distinct "
            "experts read): prior-driven")
    d = point_mass_draws()   # b300x8: C = 1 only, at most M = 9
    # the reference system's own line, with the lead naming it
    assert resolve(d, Flags(accept="14")).warnings == (BEYOND_M33,)
    assert resolve(d, Flags(hardware="h200", accept="14")).warnings == (lead + BEYOND_M33,)
    four = (lead + "C = 4 is beyond the concurrencies measured on b300x8 (at most 1); at C = 1, "
            "4 a step verifies up to 132 tokens (C x M), more than any measured on b300x8 (at "
            "most 9)" + tail)
    assert resolve(d, Flags(hardware="h200", accept="14", concurrency=(1, 4))).warnings == (
        four,)
    # within b300x8's rows: budget 8 (M = 9) at C = 1
    assert resolve(d, Flags(hardware="h200", block=8, budget=8, accept="4")).warnings == ()
    # the concurrencies count from b300x8's too
    lines = d.data_csv.splitlines()
    rows = [ln + "," for ln in lines[1:]] + [
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,800,test,,8",
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,1200,test,,32"]
    wide = d.view(data_csv="\n".join([lines[0] + ",concurrency", *rows]) + "\n")
    ar = dict(hardware="h200", method="ar", engines=("sglang",), accept="1")
    assert resolve(wide, Flags(**ar, concurrency=(1, 8))).warnings == ()
    assert resolve(wide, Flags(**ar, concurrency=(64,))).warnings == (
        lead + "C = 64 is beyond the concurrencies measured on b300x8 (at most 32); at C = 64 a "
        "step verifies 64 tokens (C x M), more than any measured on b300x8 (at most 32)" + tail,)
    # the CLI: stderr and the JSON's warnings say the same line, and the JSON is valid
    work = make_point_mass_workdir(tmp_path / "w")
    code, text, err = run_cli(work, "predict", "--hardware", "h200", "--accept", "14")
    assert code == 0, err
    assert f"ddtree-bayes: warning: {lead}{BEYOND_M33}" in err.splitlines()
    code, text, err = run_cli(work, "predict", "--hardware", "h200", "--accept", "14",
                              "--concurrency", "1,4", "--format", "json")
    assert code == 0, err
    out = json.loads(text)
    validate_output("predict", out)
    assert four in out["warnings"]
    assert [ln for ln in err.splitlines() if "(C x M)" in ln] == [
        f"ddtree-bayes: warning: {four}"]


def test_next_proposes_one_stream_of_ar_on_a_system_the_query_transfers_to():
    """A query on a system the fit never measured gets "AR on the query's system", one stream
    at context 0 (the measurement that pins the transferred M = 1 step; the docstring's list),
    whatever the query's concurrency. It inherited the query's C: at C = 8 on 8x H100 it was
    AR at C = 8, a copy of "AR at concurrency C" rows' kind, and one stream of AR there was
    proposed by nothing (by hand with --candidates: width 377 against the query's 425, 11%)."""
    from ddtree_bayes.workflows.decisions import next_measurement as N

    draws = point_mass_draws()   # B300 measured, at C = 1 only
    for text in ("--hardware h100 --engine sglang --accept 14 --concurrency 8",
                 "--hardware h100 --engine sglang --method ar --concurrency 8 --context 32768"):
        query = N.parse_query(draws, text)
        cands = {c.why: c for c in N.default_candidates(draws, query)}
        ar = cands["AR on the query's system"].scenario
        assert (ar.hardware, ar.method, ar.concurrency, ar.context_tokens) == ("h100", "ar", 1, 0.0)
        assert cands["AR on the query's system"].describe() == "h100 x8 sglang ar"


def test_validate_concurrency_bounds_accept_len_by_the_priors_methods(tmp_path, monkeypatch):
    """validate --extrapolate --concurrency read the sweeps with the bundled [methods] table,
    not the priors': a method declared only in the user's priors (here `mytree`, a tree as
    deep as its budget: depth "budget") was bounded as an unknown one there (block + 1 = 3
    tokens per step), so its rows of block 2, budget 4 and accept_len 4.5 (at most budget + 1
    = 5 by the priors, as `fit` of the sweep bounds them) were refused before any fit. They
    are now read with the priors' table: the sweep reaches its fit."""
    from pathlib import Path

    from ddtree_bayes.workflows import concurrency_check as CC

    priors = tmp_path / "priors.toml"
    priors.write_text(bundled("priors.toml").read_text() + '\n[methods.mytree]\npasses = "block"\n'
                      'tree = true\ndepth = "budget"\nrationale = "a user\'s tree drafter"\n'
                      'source = "me"\n')
    src = (Path(__file__).resolve().parents[1] / "data" / "public" / "conc"
           / "vllm_mtp_qwen35_397b_awq_rtxpro6000srvx4_conc.csv").read_text().splitlines()
    header = src[0].split(",")
    rows = [src[0]]
    for line in src[1:]:
        cells = line.split(",")   # (the first cells hold no quoted comma)
        if cells[header.index("method")] == "mtp":
            for column, value in (("method", "mytree"), ("block", "2"), ("budget", "4"),
                                  ("verify_tokens", "5"), ("accept_len", "4.5")):
                cells[header.index(column)] = value
        rows.append(",".join(cells))
    sweep = tmp_path / "s.csv"
    sweep.write_text("\n".join(rows) + "\n")
    fitted = []

    def check_sweep(sweep, *a, **k):
        fitted.append(sweep.path)
        raise SystemExit(0)   # (the fit itself is not this test's)
    monkeypatch.setattr(CC, "check_sweep", check_sweep)
    with pytest.raises(SystemExit):
        CC.extrapolate_concurrency([sweep], priors, progress=False)
    assert fitted == [sweep]

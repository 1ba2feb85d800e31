"""The predictive draws' cap at the memory read (engine/ceiling.py): no step is shorter than
reading the card's active weights and the streams' KV caches at the GPUs' full bandwidth."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import numpy as np
import pytest

from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.ceiling import read_ceiling
from ddtree_bayes.engine.testing import multi_model_draws

LLAMA = dict(model="llama-3.1-8b-instruct", hardware="h100", gpus=1, engines="vllm",
             method="ar", accept="1")
#: Llama-3.1-8B: the 8.03B less its untied input embedding (0.5253B: 128256 x 4096, of which a
#: token reads one row) x 2 B of weights; 131,072 B of KV cache per token (bf16); H100 3.35 TB/s
WEIGHTS_GB, KV_B, BW = (8.03 - 0.5253) * 2, 131072, 3.35
#: the least cache a deployment reads: 4.5 bits per value (llama.cpp q4_0) of the card's 16
Q4_0 = 4.5 / 16


def ceiling_ms(context: int, c: int, weights: bool = True) -> float:
    """By hand: (weights + C x context x the card's KV bytes x 4.5 / 16) / bandwidth, in ms."""
    return ((WEIGHTS_GB if weights else 0.0) + c * context * KV_B * Q4_0 / 1e9) / BW


def test_a_serving_walkthroughs_question_is_capped_at_the_read():
    """A walkthrough: Llama-3.1-8B on one H100 at a long context was answered faster per user
    than the GPU can read its weights and the streams' caches. At 128k and C = 16 the
    point-mass fit's draws give 36.3 tok/s at most: 27.56 ms for 15.01 GB of weights and
    77.31 GB of 4.5-bit cache (16 x 131072 x 131072 B x 4.5 / 16)."""
    d = multi_model_draws()
    said: list[str] = []
    rows = P.predict(d, context="128k", concurrency=[1, 16], warnings=said, **LLAMA)
    one, sixteen = rows
    cap = 1000 / ceiling_ms(131072, 16)
    assert ceiling_ms(131072, 16) == pytest.approx(27.56, abs=0.01)
    assert sixteen["hi90"] == pytest.approx(cap) and sixteen["median"] < cap
    assert sixteen["read_ceiling"]["kv_gb"] == pytest.approx(77.31, abs=0.01)
    assert 0 < sixteen["read_ceiling"]["capped_share"] < 1
    assert sixteen["total"]["hi90"] == pytest.approx(16 * cap)
    # one stream: 11 ms against a 6.0 ms read; nothing capped, nothing said
    assert "read_ceiling" not in one and one["median"] == pytest.approx(1000 / 11)
    capped = [w for w in said if "capped" in w]
    share = f"{sixteen['read_ceiling']['capped_share']:.0%}"
    assert capped == [
        f"at C = 16 and context 131072 on h100 x1, {share} of the draws are capped at 36 "
        "steps/s (tok/s per user at one token per step): a step reads the weights (15.0 GB) "
        "and the streams' KV caches (77.3 GB: 4.5 of the card's 16 bits per value, llama.cpp's "
        "q4_0, the smallest cache an engine keeps) at 3.35 TB/s, "
        "at least 27.6 ms; the model's context term (C ** ctx_batch_exponent) would read them "
        "faster"]


def test_the_cap_comes_after_the_noise():
    """The run-to-run noise is drawn before the cap: no draw is above it, whatever its noise
    (a floor on the structural step left 37.5% of the draws above the read)."""
    d = multi_model_draws(16)
    sc = P.resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="ar", block=None,
                            budget=None, verify_tokens=None, context_tokens=131072.0,
                            model="llama-3.1-8b-instruct", concurrency=8)
    per_step, _ = P.per_token_draws(d, sc, seed=1)
    assert per_step.max() == pytest.approx(1000 / ceiling_ms(131072, 8))
    assert (per_step < 1000 / ceiling_ms(131072, 8) - 1e-9).any()   # not every draw at it


def test_weights_are_left_out_where_the_fits_step_is_shorter_than_the_cards_read():
    """A measured system whose fitted M = 1 step (4 ms) is shorter than reading the card's
    weights (15.01 GB / 3.35 TB/s = 4.48 ms) runs fewer bytes than the card says: its cap
    counts the caches alone."""
    d = multi_model_draws(step_ar_ms=[8.0, 4.0])
    sc = P.resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="ar", block=None,
                            budget=None, verify_tokens=None, context_tokens=32768.0,
                            model="llama-3.1-8b-instruct", concurrency=16)
    c = read_ceiling(d, sc)
    assert c.weights_left_out and c.weights_gb == 0.0
    assert c.step_ms == pytest.approx(ceiling_ms(32768, 16, weights=False))
    full = read_ceiling(multi_model_draws(), sc)
    assert not full.weights_left_out and full.step_ms == pytest.approx(ceiling_ms(32768, 16))
    # at context 0 nothing is left to read: no cap at all (a review: validate divided by 0)
    assert read_ceiling(d, dataclasses.replace(sc, context_tokens=0.0)) is None


def test_the_headline_question_is_not_capped():
    """B300 x8 reads Kimi K2.6's active weights (32B x 0.5 B) in 0.26 ms; a 20 ms step is far
    from it: the point mass's answer is its own, 12 tokens / 20 ms."""
    rows = P.predict(multi_model_draws(), model="kimi-k2.6", accept="12", engines=["sglang"])
    assert rows[0]["median"] == pytest.approx(600.0) and "read_ceiling" not in rows[0]


def test_validation_scores_the_capped_draws():
    """validate's predictive for a held-out row is predict's: capped at the read."""
    from ddtree_bayes.core.data import load_measurements
    from ddtree_bayes.workflows import validation as V

    d = multi_model_draws()
    text = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
            "context_tokens,concurrency,tok_s,source,notes\n"
            "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,131072,16,1000,test,\n"
            "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,1,100,test,\n")
    m, zero = load_measurements("t.csv", d.hardware, text=text).rows
    tok = V.predict_row(d, m, np.random.default_rng(0))
    assert tok.max() == pytest.approx(16 * 1000 / ceiling_ms(131072, 16))
    # a system whose fitted step is shorter than the card's read, at context 0: no cap, and
    # no division by a 0 ms read (a review: ZeroDivisionError out of validate)
    fast = multi_model_draws(step_ar_ms=[8.0, 4.0])
    assert V.predict_row(fast, zero, np.random.default_rng(0)) == pytest.approx(250.0)


def test_the_json_row_validates_against_the_schema(tmp_path, capsys):
    from importlib.resources import files

    schema = json.loads(files("ddtree_bayes.schemas").joinpath("predict.schema.json").read_text())
    rows = P.predict(multi_model_draws(), context="128k", concurrency=[16], **LLAMA)
    from ddtree_bayes.cli.predict import typed_rows

    item = schema["properties"]["rows"]["items"]
    resolver_schema = {**item, "$defs": schema.get("$defs", {})}
    for row in typed_rows(rows):
        jsonschema.validate(row, resolver_schema)
    bad = {**typed_rows(rows)[0], "read_ceiling": {"step_ms": 1.0}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, resolver_schema)
    # a row faster than balanced MoE routing reads (test below) carries its figures
    kimi = P.predict(multi_model_draws(), model="kimi-k2.6", hardware="h100", gpus=8,
                     engines="sglang", method="ar", concurrency=[64])
    (row,) = typed_rows(kimi)
    assert "balanced_routing" in row
    jsonschema.validate(row, resolver_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**row, "balanced_routing": {"streams": 64}}, resolver_schema)
    # and one stream's tree (C = 1, 17 tokens routed)
    tree = P.predict(multi_model_draws(), model="qwen3-30b-a3b", hardware="h100", gpus=1,
                     engines="sglang", method="eagle3", block=3, budget=16, accept=[2.0])
    (row,) = typed_rows(tree)
    assert row["balanced_routing"]["tokens"] == 17
    jsonschema.validate(row, resolver_schema)


def test_p_faster_than_ar_compares_rates_capped_as_the_rows_are():
    """A review: at 32k and C = 32 an EAGLE-3 chain's P(> AR) was 0.23 against an AR rate the
    same table capped (AR 40 (10-40)); both true rates are now no faster than the read, so a
    step the read bounds is compared at the read. At 128k and C = 32 the point mass's AR steps
    (24.5-66.7 ms) are mostly shorter than the 50.95 ms read."""
    from ddtree_bayes.engine.ceiling import step_rate

    d = multi_model_draws()
    sc = P.resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="eagle3", block=4,
                            budget=4, verify_tokens=None, context_tokens=131072.0,
                            model="llama-3.1-8b-instruct", concurrency=32)
    ar = sc.autoregressive()
    accept = np.full(d.n_draws, 2.0)
    seed = 7
    spec_step = P.step_components(d, sc, np.random.default_rng(seed))[0]["step"]
    ar_step = P.step_components(d, ar, np.random.default_rng(seed))[0]["step"]
    cap = 1000 / ceiling_ms(131072, 32)
    assert step_rate(d, ar, ar_step).max() == pytest.approx(cap)
    capped = np.mean(accept * np.minimum(1000 / spec_step, cap) > np.minimum(1000 / ar_step, cap))
    uncapped = np.mean(accept * 1000 / spec_step > 1000 / ar_step)
    got = P.p_faster_than_ar(d, sc, accept, _seeded(seed))
    assert got == pytest.approx(capped) and capped != uncapped


def _seeded(seed: int) -> np.random.Generator:
    """A generator whose first integers(2**63) is ``seed`` (p_faster_than_ar draws its steps'
    seed from it)."""
    class Fixed(np.random.Generator):
        def integers(self, *args, **kwargs):
            return seed
    return Fixed(np.random.PCG64(0))


def test_nvl72_racks_are_one_node():
    """A review: gb300 x 16 was warned of as more GPUs than one node holds; a GB300 NVL72 rack
    is one NVLink domain of 72."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.engine.scenario import node_warning

    d = multi_model_draws()
    assert node_warning(d, NS(hardware="gb300", gpus=72, measured=False)) is None
    assert "more GPUs than one node holds (72)" in node_warning(
        d, NS(hardware="gb300", gpus=144, measured=False))


def test_kv_cache_bf16_reads_the_cards_whole_cache():
    """predict --kv-cache bf16: Llama-3.1-8B's card is at bf16 (its kv_cache_bits: 16), so
    the cap reads its whole cache, not 4.5/16 of it: at 128k and C = 16 (15.01 GB + 16 x
    131072 x 131072 B) / 3.35 TB/s = 86.53 ms, 11.6 steps/s."""
    d = multi_model_draws()
    said: list[str] = []
    (row,) = P.predict(d, context="128k", concurrency=[16], kv_cache="bf16", warnings=said,
                       **LLAMA)
    step_ms = (WEIGHTS_GB + 16 * 131072 * KV_B / 1e9) / BW
    assert step_ms == pytest.approx(86.53, abs=0.01)
    cap = row["read_ceiling"]
    assert cap["step_ms"] == pytest.approx(step_ms) and cap["kv_gb"] == pytest.approx(274.88,
                                                                                     abs=0.01)
    assert cap["kv_cache"] == "bf16" and cap["kv_card_bits"] == 16
    assert row["hi90"] == pytest.approx(1000 / step_ms)
    share = f"{cap['capped_share']:.0%}"
    assert [w for w in said if "capped" in w] == [
        f"at C = 16 and context 131072 on h100 x1, {share} of the draws are capped at 12 "
        "steps/s (tok/s per user at one token per step): a step reads the weights (15.0 GB) "
        "and the streams' KV caches (274.9 GB at bf16, as --kv-cache says: 16 of the card's "
        "16 bits per value) at 3.35 TB/s, at least 86.5 ms; the "
        "model's context term (C ** ctx_batch_exponent) would read them faster"]
    # and the KV-cache memory check counts the bf16 bytes: 274.9 GB beside 16.06 GB of
    # weights on one 80 GB H100 does not fit (the default check counts the card's bytes too)
    assert any("the KV cache needs 274.9 GB" in w and "at bf16, as --kv-cache says" in w
               for w in said)


def test_kv_cache_reads_an_fp8_card_at_its_own_bits():
    """Kimi K2.6's card is at fp8 (35136 B/token = (512 + 64) x 61 x 1 byte): --kv-cache fp8
    reads it whole, --kv-cache bf16 twice it, q4_0 4.5/8 of it, and so does the default (the
    least cache an engine keeps is q4_0's 4.5 bits, not 4.5/16 of an fp8 card's bytes: 2.25)."""
    from ddtree_bayes.core.model_cards import stored_card

    d = multi_model_draws()
    card = stored_card(d.meta["model"], "kimi-k2.6")
    assert card.kv_cache_bits == 8
    sc = P.resolve_scenario(d, hardware="b300", gpus=8, engine="sglang", method="ar",
                            block=None, budget=None, verify_tokens=None,
                            context_tokens=131072.0, model="kimi-k2.6", concurrency=64)
    full = 64 * 131072 * 35136 / 1e9
    for dtype, share in (("fp8", 1.0), ("bf16", 2.0), ("q4_0", 4.5 / 8), (None, 4.5 / 8)):
        c = read_ceiling(d, dataclasses.replace(sc, kv_cache=dtype))
        assert c.kv_gb == pytest.approx(full * share), dtype


def test_an_unknown_kv_cache_dtype_is_one_line():
    from ddtree_bayes.core.errors import QueryError

    with pytest.raises(QueryError, match=r"kv_cache 'int4' is not a KV-cache dtype .*fix: give "
                                         r"one of bf16, fp16, fp8, q8_0, q4_0"):
        P.predict(multi_model_draws(), context="128k", kv_cache="int4", **LLAMA)


def _stored_before_kv_bits():
    """The point-mass fit as a fit stored before cards kept their cache bits."""
    d = multi_model_draws()
    model = d.meta["model"]
    cards = {k: {f: v for f, v in c.items() if f != "kv_cache_bits"}
             for k, c in model["model_cards"].items()}
    return dataclasses.replace(d, meta={**d.meta, "model": {**model, "model_cards": cards}},
                               memo={})


def test_a_fit_stored_before_cards_kept_their_cache_bits():
    """A fit stored before --kv-cache has no kv_cache_bits in its cards: it is no card change
    (no new warning on every answer), and --kv-cache fp8 reads Kimi K2.6's card at the fp8 the
    card here says (35136 B/token whole), not as a bf16 card's (half of it)."""
    from ddtree_bayes.engine.scenario import card_changes

    old = _stored_before_kv_bits()
    assert "kv_cache_bits" not in old.meta["model"]["model_cards"]["kimi-k2.6"]
    assert not [w for w in card_changes(old) if "kv_cache_bits" in w]
    sc = P.resolve_scenario(old, hardware="b300", gpus=8, engine="sglang", method="ar",
                            block=None, budget=None, verify_tokens=None,
                            context_tokens=131072.0, model="kimi-k2.6", concurrency=64)
    c = read_ceiling(old, dataclasses.replace(sc, kv_cache="fp8"))
    assert c.kv_gb == pytest.approx(64 * 131072 * 35136 / 1e9) and c.kv_card_bits == 8


def test_predict_kv_cache_on_the_command_line(tmp_path):
    """`predict --kv-cache bf16` reaches the JSON's read_ceiling (the dtype and the card's
    bits beside the by-hand 86.53 ms); without it read_ceiling says null; an unknown dtype
    is one line naming the allowed ones, exit 2, nothing written."""
    from importlib.resources import files

    from test_cli_support import listing, make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", draws=multi_model_draws())
    q = ["predict", "--model", "llama-3.1-8b-instruct", "--hardware", "h100", "--gpus", "1",
         "--engine", "vllm", "--method", "ar", "--accept", "1", "--context", "128k",
         "--concurrency", "16", "--format", "json"]
    schema = json.loads(files("ddtree_bayes.schemas").joinpath("predict.schema.json").read_text())
    code, out, err = run_cli(work, *q, "--kv-cache", "bf16")
    assert code == 0, err
    jsonschema.validate(json.loads(out), schema)
    cap = json.loads(out)["rows"][0]["read_ceiling"]
    assert cap["step_ms"] == pytest.approx((WEIGHTS_GB + 16 * 131072 * KV_B / 1e9) / BW)
    assert (cap["kv_cache"], cap["kv_card_bits"]) == ("bf16", 16)
    assert "274.9 GB at bf16, as --kv-cache says" in err
    code, out, err = run_cli(work, *q)
    cap = json.loads(out)["rows"][0]["read_ceiling"]
    assert code == 0 and cap["kv_cache"] is None
    assert cap["step_ms"] == pytest.approx(ceiling_ms(131072, 16))
    before = listing(work)
    code, out, err = run_cli(work, *q, "--kv-cache", "int4")
    assert (code, out) == (2, "") and listing(work) == before
    assert err == ("ddtree-bayes: error: argument --kv-cache: invalid choice: 'int4' (fix: "
                   "choose from 'bf16', 'fp16', 'fp8', 'q8_0', 'q4_0')\n")


def test_predict_csv_keeps_a_capped_rows_columns_after_an_uncapped_one(tmp_path):
    """`predict --format csv --concurrency 1,16`: C = 1 is not capped (no read_ceiling) and
    C = 16 is, so the second row has columns the first lacks. The CSV writer took its header
    from the first row alone and stopped: `internal error: ValueError: dict contains fields
    not in fieldnames: 'read_ceiling_step_ms', ...`, exit 1. The header is every row's
    columns; the C = 1 row leaves the cap's cells blank, the C = 16 row carries the bf16 read
    by hand."""
    import csv as csv_
    import io

    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", draws=multi_model_draws())
    q = ["predict", "--model", "llama-3.1-8b-instruct", "--hardware", "h100", "--gpus", "1",
         "--engine", "vllm", "--method", "ar", "--accept", "1", "--context", "128k",
         "--concurrency", "1,16", "--kv-cache", "bf16"]
    code, out, err = run_cli(work, *q, "--format", "csv")
    assert code == 0, err
    one, sixteen = csv_.DictReader(io.StringIO(out))
    assert (one["concurrency"], sixteen["concurrency"]) == ("1", "16")
    assert one["read_ceiling_step_ms"] == "" and one["read_ceiling_capped_share"] == ""
    assert float(sixteen["read_ceiling_step_ms"]) == pytest.approx(BF16_MS)
    assert sixteen["read_ceiling_kv_cache"] == "bf16"
    # the same numbers as the JSON, cell for cell
    code, js, err = run_cli(work, *q, "--format", "json")
    assert code == 0, err
    rows = json.loads(js)["rows"]
    assert float(sixteen["median"]) == rows[1]["median"]
    assert float(sixteen["total_hi90"]) == rows[1]["total"]["hi90"]
    assert float(sixteen["read_ceiling_capped_share"]) == rows[1]["read_ceiling"]["capped_share"]


#: optimize's question of the walkthrough: Llama-3.1-8B on one H100 at 128k and C = 16
OPT = dict(model="llama-3.1-8b-instruct", hardware="h100", gpus=1, engine="vllm",
           budgets=(1, 8), context_tokens="128k", concurrency=16)
#: the bf16 read at 128k and C = 16: (15.01 GB + 16 x 131072 x 131072 B) / 3.35 TB/s
BF16_MS = (WEIGHTS_GB + 16 * 131072 * KV_B / 1e9) / BW


def test_optimize_kv_cache_caps_the_rates_it_compares():
    """optimize --kv-cache bf16: budget 1 (M = 2, accept at most 2) steps in 32.8-73.1 ms on
    the point-mass fit, all shorter than the bf16 read (86.53 ms), so its tok/s per user is
    accept x 1000 / 86.53: median 2 x 11.56 = 23.11, the 5% end 1 x 11.56. Without the flag
    the 4.5-bit read (27.56 ms) caps none of them: the numbers as before."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.workflows import decisions as D

    d = multi_model_draws()
    curve = parse_acceptance_curve(d.priors_toml)
    assert BF16_MS == pytest.approx(86.53, abs=0.01)
    out = D.optimize(d, curve, kv_cache="bf16", **OPT)
    one = out["rows"][0]
    assert (one["budget"], one["accept"], one["accept_lo"]) == (1, 2.0, 1.0)
    assert one["median"] == pytest.approx(2 * 1000 / BF16_MS)   # 23.11
    assert one["lo90"] == pytest.approx(1000 / BF16_MS)
    assert out["scenario"]["kv_cache"] == "bf16"
    assert any("the KV cache needs 274.9 GB" in w and "at bf16, as --kv-cache says" in w
               for w in out["warnings"])
    # fp8 reads half the cache: (15.01 + 137.44) GB / 3.35 TB/s = 45.51 ms, which caps part
    fp8 = D.optimize(d, curve, kv_cache="fp8", **OPT)["rows"][0]
    assert fp8["hi90"] <= 2 * 1000 / 45.5069 + 1e-6 and fp8["median"] > one["median"]
    default = D.optimize(d, curve, **OPT)
    one = default["rows"][0]
    assert (one["median"], one["lo90"], one["hi90"]) == pytest.approx(
        (39.999564735422055, 14.030039137104835, 60.13412271284022))
    assert "kv_cache" not in default["scenario"]
    assert any("the KV cache needs 274.9 GB (131072 bytes per token, the card's "
               "kv_bytes_per_token) but" in w for w in default["warnings"])


def test_optimize_kv_cache_on_the_command_line(tmp_path):
    """`optimize --kv-cache bf16` reaches the JSON (scenario.kv_cache, budget 1 at 2 x 1000 /
    86.53 tok/s) and the memory warning; an unknown dtype is predict's one line, exit 2,
    nothing written."""
    from importlib.resources import files

    from test_cli_support import listing, make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", draws=multi_model_draws())
    q = ["optimize", "--model", "llama-3.1-8b-instruct", "--hardware", "h100", "--gpus", "1",
         "--engine", "vllm", "--context", "128k", "--concurrency", "16", "--budgets", "1,8",
         "--format", "json"]
    schema = json.loads(files("ddtree_bayes.schemas").joinpath("optimize.schema.json")
                        .read_text())
    code, out, err = run_cli(work, *q, "--kv-cache", "bf16")
    assert code == 0, err
    got = json.loads(out)
    jsonschema.validate(got, schema)
    assert got["scenario"]["kv_cache"] == "bf16"
    assert got["rows"][0]["median"] == pytest.approx(2 * 1000 / BF16_MS)
    assert ("the KV cache needs 274.9 GB (131072 bytes per token, the card's "
            "kv_bytes_per_token, at bf16, as --kv-cache says: 16 of the card's 16 bits per "
            "value) but 1 x h100 have 63.9 GB left") in err
    assert got["warnings"] == [w.removeprefix("ddtree-bayes: warning: ")
                               for w in err.splitlines()]
    code, out, err = run_cli(work, *q)
    assert code == 0 and "kv_cache" not in json.loads(out)["scenario"]
    assert json.loads(out)["rows"][0]["median"] == pytest.approx(39.999564735422055)
    before = listing(work)
    code, out, err = run_cli(work, *q, "--kv-cache", "int4")
    assert (code, out) == (2, "") and listing(work) == before
    assert err == ("ddtree-bayes: error: argument --kv-cache: invalid choice: 'int4' "
                   "(fix: choose from 'bf16', 'fp16', 'fp8', 'q8_0', 'q4_0')\n")


#: next's query of the walkthrough, AR at one token per step (a point-mass fit with 1% run noise:
#: next refuses a fit without any)
NEXT_QUERY = ("--model llama-3.1-8b-instruct --hardware h100 --gpus 1 --engine vllm --method ar "
              "--accept 1 --context 128k --concurrency 16")


def test_next_query_kv_cache_caps_the_interval_now():
    """next --query "... --kv-cache bf16": the query's draws are predict's, capped at the bf16
    read, 86.53 ms: AR steps of 19-42 ms, every draw at 1000 / 86.53 = 11.56 tok/s per user.
    Without it the 4.5-bit read (27.56 ms, 36.29 tok/s) caps the upper end only, as before."""
    from ddtree_bayes.workflows import decisions as D

    d = multi_model_draws(noise_sd=0.01)
    query = D.parse_query(d, NEXT_QUERY + " --kv-cache bf16")
    assert query.scenario.kv_cache == "bf16"
    assert any("the KV cache needs 274.9 GB" in w and "at bf16, as --kv-cache says" in w
               for w in query.warnings)
    now = D.next_measurements(d, query, k=8)["query"]
    assert (now["median"], now["lo"], now["hi"]) == pytest.approx((1000 / BF16_MS,) * 3)
    assert now["kv_cache"] == "bf16"
    default = D.next_measurements(d, D.parse_query(d, NEXT_QUERY), k=8)["query"]
    # (predict's 8 draws at this seed, keyed by the configuration at context 0 and C = 1:
    # test_common_noise.py; keyed by context 128k and C = 16 they were 34.11 (26.73-)); the
    # median of the 8 is the mean of the 4th, 35.358 uncapped, and the 5th, at the cap
    cap = 1000 / ceiling_ms(131072, 16)
    assert (default["median"], default["lo"], default["hi"]) == pytest.approx(
        ((35.35821510228861 + cap) / 2, 19.327044179057133, cap))
    assert "kv_cache" not in default


def test_next_default_candidates_check_memory_at_the_kv_cache():
    """The default candidates' memory check counts the query's --kv-cache: AR at C = 64 and
    context 8k needs 64 x 8192 x 131072 B = 68.7 GB of bf16 cache beside 63.9 GB left on one
    H100 (left out), 34.4 GB at fp8 (offered); C = 128 needs 68.7 GB at fp8 (left out)."""
    from ddtree_bayes.workflows import decisions as D

    d = multi_model_draws(noise_sd=0.01)
    at_8k = NEXT_QUERY.replace("128k", "8k")

    def left_out(text: str) -> list[str]:
        left: list = []
        D.default_candidates(d, D.parse_query(d, text), left)
        return [c.describe().removeprefix("llama-3.1-8b-instruct ") for c, why in left
                if "KV cache" in why]

    assert left_out(at_8k) == ["h100 x1 vllm ar ctx 8192 C=64", "h100 x1 vllm ar ctx 8192 C=128"]
    assert left_out(at_8k + " --kv-cache fp8") == ["h100 x1 vllm ar ctx 8192 C=128"]


def test_next_kv_cache_on_the_command_line(tmp_path):
    """`next --query "... --kv-cache bf16"` reaches the JSON's query (kv_cache, its interval at
    1000 / 86.53) and the warnings; an unknown dtype is one line naming --query and the
    dtypes, exit 2, nothing written."""
    from importlib.resources import files

    from test_cli_support import listing, make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", draws=multi_model_draws(noise_sd=0.01))
    schema = json.loads(files("ddtree_bayes.schemas").joinpath("next.schema.json").read_text())
    code, out, err = run_cli(work, "next", "--query", NEXT_QUERY + " --kv-cache bf16", "--k",
                             "8", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    jsonschema.validate(got, schema)
    assert got["query"]["kv_cache"] == "bf16"
    assert got["query"]["median"] == pytest.approx(1000 / BF16_MS)
    assert any("the KV cache needs 274.9 GB" in w and "at bf16, as --kv-cache says" in w
               for w in got["warnings"])
    code, out, err = run_cli(work, "next", "--query", NEXT_QUERY, "--k", "8", "--format", "json")
    assert code == 0 and "kv_cache" not in json.loads(out)["query"]
    assert json.loads(out)["query"]["median"] == pytest.approx(
        (35.35821510228861 + 1000 / ceiling_ms(131072, 16)) / 2)
    code, out, err = run_cli(work, "next", "--query", NEXT_QUERY, "--k", "8")
    assert code == 0 and f"query: {got['query']['describe']}, accept 1\n" in out
    code, out, err = run_cli(work, "next", "--query", NEXT_QUERY + " --kv-cache bf16", "--k", "8")
    assert code == 0 and f"query: {got['query']['describe']}, accept 1, KV cache bf16\n" in out
    before = listing(work)
    code, out, err = run_cli(work, "next", "--query", NEXT_QUERY + " --kv-cache int4")
    assert (code, out) == (2, "") and listing(work) == before
    assert err == (f"ddtree-bayes: error: --query '{NEXT_QUERY} --kv-cache int4': argument "
                   "--kv-cache: invalid choice: 'int4' (fix: choose from 'bf16', 'fp16', 'fp8', "
                   "'q8_0', 'q4_0')\n")


#: a tracked query (one stream) long enough for the bf16 read to cap it: Llama-3.1-8B's AR step
#: at 512k is 7 + 8 x 2 = 23 ms on the point-mass fit; the bf16 read (15.01 GB + 524288 x
#: 131072 B) / 3.35 TB/s = 24.99 ms caps it at 40.01 tok/s, the 4.5-bit read (10.25 ms) not
TRACK = ["--model", "llama-3.1-8b-instruct", "--hardware", "h100", "--gpus", "1", "--engine",
         "vllm", "--method", "ar", "--accept", "1", "--context", "512k"]
BF16_512K_MS = (WEIGHTS_GB + 524288 * KV_B / 1e9) / BW


def test_track_kv_cache_is_saved_and_caps_the_tracked_intervals(tmp_path):
    """`track ... --kv-cache bf16` saves the dtype with the query (models/tracked.json,
    `track list`), and the query's intervals, now and as update and diff ask them
    (query_rows), are capped at the bf16 read: 1000 / 24.99 = 40.01 tok/s, with the memory
    warning at bf16. Without the flag: 1000 / 23 = 43.48 and the saved query as before (no
    kv_cache key)."""
    from importlib.resources import files

    from ddtree_bayes.workflows import living
    from test_cli_support import make_point_mass_workdir, run_cli

    assert BF16_512K_MS == pytest.approx(24.99, abs=0.01)
    d = multi_model_draws()
    work = make_point_mass_workdir(tmp_path / "w", draws=d)
    schema = json.loads(files("ddtree_bayes.schemas").joinpath("track.schema.json").read_text())
    code, out, err = run_cli(work, "track", *TRACK, "--kv-cache", "bf16", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    jsonschema.validate(got, schema)
    assert got["query"]["name"] == "llama-3.1-8b-instruct-h100-x1-vllm-ar-ctx512k-a1-kvbf16"
    assert got["query"]["query"]["kv_cache"] == "bf16"
    (row,) = got["now"]["rows"]
    assert row["median"] == pytest.approx(1000 / BF16_512K_MS)   # 40.01
    assert any("the KV cache needs 68.7 GB" in w and "at bf16, as --kv-cache says" in w
               and "no engine can hold this context on these GPUs at bf16" in w
               for w in got["warnings"])
    saved = json.loads((work / "models" / "tracked.json").read_text())["queries"]
    assert saved[0]["query"]["kv_cache"] == "bf16"
    (tracked,) = living.load_tracked(work / "models", include_default=False)
    (again,) = living.query_rows(d, tracked.query, 0)
    assert again["median"] == pytest.approx(1000 / BF16_512K_MS)
    code, out, err = run_cli(work, "track", "list")
    assert code == 0 and "--context 512k --accept 1 --model llama-3.1-8b-instruct --kv-cache bf16" \
        in out
    # without the flag: another query, as before
    code, out, err = run_cli(work, "track", *TRACK, "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    jsonschema.validate(got, schema)
    assert "kv_cache" not in got["query"]["query"]
    assert got["query"]["name"] == "llama-3.1-8b-instruct-h100-x1-vllm-ar-ctx512k-a1"
    assert got["now"]["rows"][0]["median"] == pytest.approx(1000 / 23)
    saved = json.loads((work / "models" / "tracked.json").read_text())["queries"]
    assert "kv_cache" not in saved[1]["query"]
    # fp8: 34.4 GB of cache fits beside the weights, and its read (15.05 ms) caps nothing
    code, out, err = run_cli(work, "track", *TRACK, "--kv-cache", "fp8", "--format", "json")
    got = json.loads(out)
    assert code == 0 and got["now"]["rows"][0]["median"] == pytest.approx(1000 / 23)
    assert not [w for w in got["warnings"] if "KV cache needs" in w]


def test_track_refuses_an_unknown_kv_cache(tmp_path):
    """An unknown dtype: predict's one line, exit 2, nothing written; one edited by hand into
    models/tracked.json is refused naming the file and the query."""
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.workflows import living
    from test_cli_support import listing, make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", draws=multi_model_draws())
    before = listing(work)
    code, out, err = run_cli(work, "track", *TRACK, "--kv-cache", "int4")
    assert (code, out) == (2, "") and listing(work) == before
    assert err == ("ddtree-bayes: error: argument --kv-cache: invalid choice: 'int4' (fix: "
                   "choose from 'bf16', 'fp16', 'fp8', 'q8_0', 'q4_0')\n")
    (work / "models" / "tracked.json").write_text(json.dumps({"version": 1, "queries": [
        {"name": "mine", "query": {"hardware": "h100", "kv_cache": "int4"}}]}))
    with pytest.raises(InputError, match=r"tracked query 'mine': kv_cache 'int4' is not a "
                                         r"KV-cache dtype this knows .*fix: in tracked.json, "
                                         r"give one of bf16, fp16, fp8, q8_0, q4_0"):
        living.load_tracked(work / "models")


def test_kv_cache_bits_in_bytes_is_refused_and_a_3_bit_card_reads_its_own_bytes():
    """A review: kv_cache_bits 2 (2 bytes written as bits) was accepted and made the default
    cap read 4.5 / 2 = 2.25x the card's cache; a card at 3 bits (a TurboQuant cache) read
    4.5 / 3 = 1.5x its own bytes, stricter than its deployment. Now 2 is refused in one line,
    and the least read of a card below q4_0's bits is its own bytes."""
    from ddtree_bayes.core.errors import DataError
    from ddtree_bayes.core.model_cards import load_model_cards, stored_card

    text = bundled("models.csv").read_text()
    header, row = text.splitlines()[:2]   # llama-3.1-8b: kv_cache_bits 16, then recurrent_layers
    two = header + "\n" + row.replace(",16,", ",2,") + "\n"
    with pytest.raises(DataError, match=r"row 2, column 'kv_cache_bits': kv_cache_bits 2 is not a "
                                        r"cache's bits per value \(3 to 32\).*write bits, not bytes"):
        load_model_cards("m.csv", two)
    d = multi_model_draws()
    card = stored_card(d.meta["model"], "llama-3.1-8b-instruct")
    three = dataclasses.replace(card, kv_cache_bits=3.0)
    cards = {**d.meta["model"]["model_cards"], "llama-3.1-8b-instruct": dataclasses.asdict(three)}
    d3 = dataclasses.replace(d, meta={**d.meta, "model": {**d.meta["model"],
                                                          "model_cards": cards}}, memo={})
    sc = P.resolve_scenario(d3, hardware="h100", gpus=1, engine="vllm", method="ar", block=None,
                            budget=None, verify_tokens=None, context_tokens=32768.0,
                            model="llama-3.1-8b-instruct", concurrency=8)
    c = read_ceiling(d3, sc)
    assert c.kv_gb == pytest.approx(8 * 32768 * 131072 / 1e9)   # the card's bytes, x 1.0


#: Kimi K2.6's card: 1000B parameters, 32B active, all of which a token reads (they leave the
#: input embedding out: embed_params_b 0), 384 experts, top-8, 0.5 B per active weight, 0.6 B
#: per weight of the checkpoint
KIMI_E, KIMI_K, KIMI_TOTAL, KIMI_ACTIVE, KIMI_BPW, KIMI_FILE = 384, 8, 1000.0, 32.0, 0.5, 0.6


def balanced_ms(streams: int, gpus: int, tb_s: float) -> tuple[float, float]:
    """By hand: (experts touched per layer, ms to read them with the other active weights);
    the routed experts at their own bytes, 1000 x 0.6 - 32 x 0.5 = 584 GB over 376 experts'
    worth (0.603 B per weight)."""
    touched = KIMI_E * (1 - (1 - KIMI_K / KIMI_E) ** streams)
    per_expert = (KIMI_TOTAL * KIMI_FILE - KIMI_ACTIVE * KIMI_BPW) / (KIMI_E - KIMI_K)   # GB
    gb = KIMI_ACTIVE * KIMI_BPW + (touched - KIMI_K) * per_expert
    return touched, gb / (gpus * tb_s)


def test_an_answer_faster_than_balanced_routing_reads_its_experts_is_said():
    """An audit asked a 30B-A3B MoE at C = 64 on one L40 of its own fit: 67 tok/s per user,
    where 64 streams' tokens touch ~126 of the 128 experts of each layer under balanced
    routing, a read that allows ~30. The point-mass fit of several models answers Kimi K2.6
    on 8x H100 (never measured) at C = 64 with 79.8 steps/s; by hand 64 tokens touch 284.2 of
    384 experts, 445.0 GB at 8 x 3.35 TB/s: 16.60 ms, 60.2 steps/s. The row says so, the
    warning too; at C = 16 (slower than its read) and at one stream nothing is said."""
    d = multi_model_draws()
    said: list[str] = []
    rows = P.predict(d, model="kimi-k2.6", hardware="h100", gpus=8, engines="sglang",
                     method="ar", concurrency=[1, 16, 64], warnings=said)
    one, sixteen, many = rows
    touched, ms = balanced_ms(64, 8, 3.35)
    assert touched == pytest.approx(284.19, abs=0.01) and ms == pytest.approx(16.60, abs=0.01)
    b = many["balanced_routing"]
    assert b["experts_touched"] == pytest.approx(touched)
    assert b["step_ms"] == pytest.approx(ms) and b["steps_per_s"] == pytest.approx(1000 / ms)
    assert b["median_steps_per_s"] == pytest.approx(many["median"])
    assert many["median"] > 1000 / ms
    assert "balanced_routing" not in one and "balanced_routing" not in sixteen
    assert sixteen["median"] < 1000 / balanced_ms(16, 8, 3.35)[1]
    lines = [w for w in said if "balanced routing" in w]
    assert lines == [
        f"at C = 64 on h100 x8, the median answer runs {many['median']:.0f} steps/s (tok/s per "
        "user over the tokens a step accepts), faster than reading the experts its tokens "
        "touch under balanced routing: one token per stream touches about 284 of the 384 "
        "experts of each layer, and reading them and the other active weights, 445.0 GB in "
        "all, at 26.8 TB/s takes 16.6 ms, 60 steps/s. No cap (routing that concentrates reads "
        "less), but "
        "every MoE row of data/public routing two or more tokens a step whose step is known (AR, "
        "or with accept_len) runs at most 1 / 1.47 of that rate (scripts/ceiling_check.py): "
        "the answer is likely optimistic (its MoE term grows with C by the fit's exponent, "
        "not by this read); a row measured at C = 64 on h100 x8 would settle it"]


def test_balanced_routing_reads_the_experts_at_their_own_bytes():
    """A card's bytes_per_weight averages the weights one token reads; in an MoE whose experts
    are quantised below its attention (`card add` of RedHatAI/Qwen3-Coder-Next-NVFP4,
    tests/fixtures/cards: 79.6744B, 3.8749B active at 1.2625 B, the checkpoint 0.5965 B per
    weight) the routed experts the streams touch beyond top-k are read at their own bytes:
    79.6744 x 0.5965 - 3.8749 x 1.2625 = 42.634 GB over 502 experts' worth, 0.0849 GB each
    (0.562 B per weight, not 1.2625). At C = 64 on one H100 (3.35 TB/s) 64 tokens touch
    512 (1 - (1 - 10/512)^64) = 367.11 experts per layer: 4.892 + 357.11 x 0.0849 = 35.22 GB,
    10.51 ms, 95.1 steps/s (at 1.2625 B: 72.97 GB, 45.9 steps/s, so a median of 60 steps/s
    was said to outrun balanced routing when it reads half of that)."""
    from ddtree_bayes.core.model_cards import ModelCard
    from ddtree_bayes.core.pairs import pair_features
    from ddtree_bayes.engine.ceiling import balanced_weights, routing_row

    card = ModelCard("qwen3-coder-next-nvfp4", 79.6744, 3.8749, 48, 512, 10, 1.2625, "fp4",
                     "s", file_bytes_per_weight=0.5965)
    h100 = {"hardware": "h100", "mem_bw_tb_s": "3.35", "interconnect": "NVLink4"}
    read = balanced_weights(card, pair_features(card, h100, 1), 64)
    assert read.touched == pytest.approx(367.113, abs=1e-3)
    assert read.weights_gb == pytest.approx(35.221, abs=1e-3)
    assert read.step_ms == pytest.approx(10.514, abs=1e-3)
    assert read.rate == pytest.approx(95.11, abs=0.01)
    assert routing_row(np.full(100, 60.0), read) is None
    assert routing_row(np.full(100, 100.0), read)["steps_per_s"] == pytest.approx(95.11, abs=0.01)
    # a card without the checkpoint's bytes reads its experts at bytes_per_weight, as before
    plain = dataclasses.replace(card, file_bytes_per_weight=None)
    assert balanced_weights(plain, pair_features(plain, h100, 1), 64).weights_gb == \
        pytest.approx(72.969, abs=1e-3)


def test_balanced_routing_leaves_the_untied_input_embedding_out_of_the_experts():
    """The experts beyond top-k were the checkpoint's bytes less params_active_b x
    bytes_per_weight, which prices the untied input embedding, counted in params_active_b, at
    the average bytes of the weights a step reads (gpt-oss-20b: 1.0277, its MXFP4 experts and
    bf16 rest), while the file holds it at 16 bits: the 0.563 GB between stayed among the
    experts. A step reads one row of it (docs/validation.md, "A token reads one row of its
    input embedding"), as the step's own read (read_gb) leaves it out; the experts now are the
    checkpoint less that read and less the embedding at its 2 bytes. By hand, `card add` of
    gpt-oss-20b (tests/fixtures/cards): the file 20.9148 x 0.658 = 13.7619 GB; the step reads
    (4.1874 - 0.5791) x 1.0277 = 3.7082 GB; the embedding 0.5791 x 2 = 1.1582 GB; the experts
    13.7619 - 3.7082 - 1.1582 = 8.8955 GB (the release's 13,761,264,768 - 4,866,350,208 bytes
    = 8.8949 GB; it was 13.7619 - 4.1874 x 1.0277 = 9.4585). At C = 64 on one H100, 64 tokens
    touch 32 (1 - (7/8)^64) = 31.9938 of 32 experts: 3.7082 + 27.9938 x 8.8955 / 28 = 12.602
    GB (was 13.165). Kimi K2.6 (embed_params_b 0) reads as before."""
    from ddtree_bayes.core.model_cards import ModelCard, load_model_cards
    from ddtree_bayes.core.pairs import pair_features
    from ddtree_bayes.engine.ceiling import balanced_weights, expert_gb

    card = ModelCard("gpt-oss-20b", 20.9148, 4.1874, 24, 32, 4, 1.0277, "bf16", "s",
                     file_bytes_per_weight=0.658, embed_params_b=0.5791)
    assert expert_gb(card) == pytest.approx(8.8955, abs=1e-4)   # (was 9.4585)
    h100 = {"hardware": "h100", "mem_bw_tb_s": "3.35", "interconnect": "NVLink4"}
    read = balanced_weights(card, pair_features(card, h100, 1), 64)
    assert read.touched == pytest.approx(31.9938, abs=1e-4)
    assert read.weights_gb == pytest.approx(12.602, abs=1e-3)   # (was 13.165)
    # the card `card add` derives from the release's config gives the same figures
    from test_cards import derive

    derived = derive("gpt-oss-20b").card
    assert (derived["params_total_b"], derived["params_active_b"], derived["bytes_per_weight"],
            derived["file_bytes_per_weight"], derived["embed_params_b"]) == (
        "20.9148", "4.1874", "1.0277", "0.658", "0.5791")
    # Kimi K2.6's 32 B leave the embedding out (embed_params_b 0): 1000 x 0.6 - 32 x 0.5
    kimi = load_model_cards(bundled("models.csv"))["kimi-k2.6"]
    assert kimi.embed_params_b == 0 and expert_gb(kimi) == pytest.approx(584.0)


def test_balanced_routing_is_no_question_of_a_dense_model_or_one_stream():
    """Llama-3.1-8B is dense: no experts to spread; and one stream reads top-k experts only,
    which the memory-read cap already holds the answer to."""
    d = multi_model_draws()
    rows = P.predict(d, concurrency=[1, 64], **LLAMA)
    assert all("balanced_routing" not in r for r in rows)
    kimi = P.predict(d, model="kimi-k2.6", hardware="h100", gpus=8, engines="sglang",
                     method="ar", concurrency=[1])
    assert "balanced_routing" not in kimi[0]


def test_the_routing_margin_is_the_public_rows_least_and_every_text_says_it_alike():
    """The warning's "every public MoE row at C >= 2 whose step is known runs at most 1 / 1.47
    of that rate" is scripts/ceiling_check.py's least ratio over those rows (AR, or with
    accept_len: a speculative row without it counts acceptance 1, a lower bound of its step,
    and one at 1.09 says nothing against the claim). PUBLIC_ROUTING_MARGIN holds the figure;
    the predict schema's field description said "every public row at C >= 2", dense rows and
    rows of unknown step included, which the script does not check."""
    import importlib.util
    from importlib.resources import files

    from conftest import REPO
    from ddtree_bayes.engine.ceiling import PUBLIC_ROUTING_MARGIN, ROUTING_CLAIM

    spec = importlib.util.spec_from_file_location("ceiling_check",
                                                  REPO / "scripts" / "ceiling_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    known = [ratio for ratio, sure, *_ in script.routing_rows() if sure]
    assert len(known) >= 284 and round(min(known), 2) == PUBLIC_ROUTING_MARGIN
    # (one stream's tree: its M tokens, 24 rows, the least 2.04)
    trees = [ratio for ratio, sure, _, _, r, c in script.routing_rows()
             if sure and c == 1 and r["method"] != "ar"]
    assert len(trees) >= 24 and min(trees) >= PUBLIC_ROUTING_MARGIN
    clause = ROUTING_CLAIM
    assert clause == ("every MoE row of data/public routing two or more tokens a step whose "
                      "step is known (AR, or with accept_len) runs at most 1 / 1.47 of that "
                      "rate (scripts/ceiling_check.py)")
    schema = json.loads(files("ddtree_bayes.schemas").joinpath("predict.schema.json").read_text())
    field = schema["properties"]["rows"]["items"]["properties"]["balanced_routing"]
    assert clause in field["description"]
    docs = (REPO / "docs" / "json-output.md").read_text()
    assert clause in docs


def test_one_streams_tree_faster_than_balanced_routing_reads_is_said():
    """One stream's tree routes its M verified tokens too: a held-out A800 row (SGLang DFlash,
    Qwen3-30B-A3B, 16 tokens a step) was answered 139 tok/s at acceptance 2 where it ran 93,
    the read of the ~82 experts 16 tokens touch taking ~20 ms. Every public MoE row at C = 1 with
    M >= 2 and a known step (24) runs >= 2.04x slower than its M tokens' balanced read, so the
    read counts the larger of C (one token per stream, validated at 1.47) and M. The
    point-mass fit answers an EAGLE-3 tree of 17 tokens on one H100 at 142 steps/s; by hand
    17 tokens touch 128 (1 - (1 - 8/128)^17) = 85.27 experts, (3.3 - 0.3112 + 77.27 x 27.2 /
    120) B x 2 bytes = 41.0 GB at 3.35 TB/s: 12.24 ms, 81.7 steps/s (0.3112 B: the untied input
    embedding, 151936 x 2048, of which a token reads one row)."""
    d = multi_model_draws()
    said: list[str] = []
    rows = P.predict(d, model="qwen3-30b-a3b", hardware="h100", gpus=1, engines="sglang",
                     method="eagle3", block=3, budget=16, accept=[2.0], concurrency=[1],
                     warnings=said)
    touched = 128 * (1 - (1 - 8 / 128) ** 17)
    gb = (3.3 - 0.3112 + (touched - 8) * (30.5 - 3.3) / 120) * 2.0
    assert touched == pytest.approx(85.27, abs=0.01) and gb / 3.35 == pytest.approx(12.24, abs=0.01)
    b = rows[0]["balanced_routing"]
    assert (b["streams"], b["tokens"]) == (1, 17)
    assert b["experts_touched"] == pytest.approx(touched)
    assert b["weights_gb"] == pytest.approx(gb) and b["step_ms"] == pytest.approx(gb / 3.35)
    assert b["median_steps_per_s"] == pytest.approx(rows[0]["median"] / 2.0)
    lines = [w for w in said if "balanced routing" in w]
    assert lines == [
        f"at C = 1 on h100 x1, the median answer runs {rows[0]['median'] / 2.0:.0f} steps/s "
        "(tok/s per user over the tokens a step accepts), faster than reading the experts its "
        "tokens touch under balanced routing: the 17 tokens a step verifies touch about 85 of "
        "the 128 experts of each layer, and reading them and the other active weights, "
        f"{gb:.1f} GB in all, at 3.35 TB/s takes {gb / 3.35:.3g} ms, {3350 / gb:.0f} steps/s. "
        "No cap (routing that concentrates reads less), but "
        "every MoE row of data/public routing two or more tokens a step whose step is known (AR, "
        "or with accept_len) runs at most 1 / 1.47 of that rate (scripts/ceiling_check.py): "
        "the answer is likely optimistic (its MoE term grows with C x M by the fit's "
        "exponent, not by this read); a row of this tree measured at C = 1 on h100 x1 would "
        "settle it"]
    # AR on the same system routes one token a step: no question of routing
    ar = P.predict(d, model="qwen3-30b-a3b", hardware="h100", gpus=1, engines="sglang",
                   method="ar", concurrency=[1])
    assert "balanced_routing" not in ar[0]


def test_optimize_says_budgets_faster_than_balanced_routing_reads():
    """optimize ranks budgets by tok/s: an MoE whose larger trees are priced below the read of
    the experts their tokens touch ranks them too high. The point-mass fit recommends DDTree
    budget 16 for Qwen3-30B-A3B on one H100 at a 6.66 ms step, where 17 tokens touch 85.27 of
    128 experts, 41.0 GB at 3.35 TB/s, 12.24 ms (test above); budget 4's 5 tokens touch
    128 (1 - (120/128)^5) = 35.6 experts. Every budget whose median steps/s beats its read is
    named, the recommended one with its figures."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.workflows.decisions.optimize import optimize

    d = multi_model_draws()
    out = optimize(d, parse_acceptance_curve(d.priors_toml), model="qwen3-30b-a3b",
                   hardware="h100", gpus=1, engine="sglang", budgets=(4, 8, 16))
    assert out["recommended"] == 16
    gb = {m: (3.3 - 0.3112 + (128 * (1 - (1 - 8 / 128) ** m) - 8) * (30.5 - 3.3) / 120) * 2.0
          for m in (5, 9, 17)}
    steps = {r["budget"]: r["step_ms"] for r in out["rows"]}
    fast = [b for b in (4, 8, 16) if 1000 / steps[b] > 3350 / gb[b + 1]]
    assert fast == [4, 8, 16]
    best = next(r for r in out["rows"] if r["budget"] == 16)
    lines = [w for w in out["warnings"] if "balanced routing" in w]
    assert lines == [
        "on h100 x1, budgets 4, 8, 16 answer faster than reading the experts their tokens "
        "touch under balanced routing: the recommended budget 16's 17 tokens touch about 85 of "
        "the 128 experts of each layer, and reading them and the other active weights, "
        f"{gb[17]:.1f} GB in all, at 3.35 TB/s takes {gb[17] / 3.35:.3g} ms, "
        f"{3350 / gb[17]:.0f} steps/s, where its answer runs {1000 / best['step_ms']:.0f} "
        "steps/s. No cap (routing that concentrates reads less), but "
        "every MoE row of data/public routing two or more tokens a step whose step is known (AR, "
        "or with accept_len) runs at most 1 / 1.47 of that rate (scripts/ceiling_check.py): "
        "a larger tree's tokens touch more experts, so these budgets' tok/s are likely "
        "optimistic, the largest most, and the recommended budget may be too large"]
    # a dense model's trees route nothing: no such line
    dense = optimize(d, parse_acceptance_curve(d.priors_toml), model="llama-3.1-8b-instruct",
                     hardware="h100", gpus=1, engine="vllm", budgets=(4, 8, 16))
    assert not [w for w in dense["warnings"] if "balanced routing" in w]


def test_next_says_of_its_query_what_predict_says_of_balanced_routing(tmp_path):
    """A walkthrough: `next --query` on an MoE answered "now: median 131 tok/s" for the EAGLE-3
    tree that predict warned of (faster than the balanced read of its 17 tokens), and said
    nothing. Its query now carries predict's balanced_routing (the JSON) and the same warning
    line, word for word, from the same draws."""
    from importlib.resources import files

    from test_cli_support import make_point_mass_workdir, run_cli

    flags = ("--model qwen3-30b-a3b --hardware h100 --gpus 1 --engine sglang --method eagle3 "
             "--block 3 --budget 16 --accept 2")
    work = make_point_mass_workdir(tmp_path / "w", draws=multi_model_draws(noise_sd=0.01))
    code, out, err = run_cli(work, "next", "--query", flags, "--k", "8", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    jsonschema.validate(got, json.loads(files("ddtree_bayes.schemas").joinpath(
        "next.schema.json").read_text()))
    code, pout, perr = run_cli(work, "predict", *flags.split(), "--format", "json")
    assert code == 0, perr
    (row,) = json.loads(pout)["rows"]
    assert got["query"]["balanced_routing"] == row["balanced_routing"]
    line = [w for w in json.loads(pout)["warnings"] if "balanced routing" in w]
    assert len(line) == 1 and line[0] in got["warnings"]
    # a dense model's query: null, nothing said
    code, out, err = run_cli(work, "next", "--query", "--model llama-3.1-8b-instruct --hardware "
                             "h100 --engine vllm --method ar", "--k", "8", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    assert got["query"]["balanced_routing"] is None
    assert not [w for w in got["warnings"] if "balanced routing" in w]

"""The context cost's prior from the card's KV read (core/context_cost.py): per system in the
model, for a pair the fit never measured, in the report's prior draws, and what card add
writes for it. Numbers by hand from the cards' kv_bytes_per_token and the hardware table."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import load_priors
from ddtree_bayes.core.context_cost import CTX_READ, context_read_ms, ctx_prior
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.paths import bundled

PRIORS = load_priors(bundled("priors.toml"))
CARDS = load_model_cards(bundled("models.csv"))
HW = load_hardware(bundled("hardware.csv"))


def test_the_read_splits_gqa_heads_and_keeps_mla_whole():
    # Kimi K2.6 (MLA, fp8 cache): 35,136 B x 65,536 = 2.3027 GB on every GPU of 8; at the
    # RTX PRO 6000's 1.792 TB/s 1.285 ms, at the B300's 8.0 0.288 ms
    kimi = CARDS["kimi-k2.6"]
    assert context_read_ms(kimi, HW["rtx-pro-6000"], 8, 65536) == pytest.approx(
        35136 * 65536 / 1e9 / 1.792)
    assert context_read_ms(kimi, HW["b300"], 8, 65536) == pytest.approx(0.28783, rel=1e-4)
    # Qwen3.5-397B: 2 kv heads on 4 GPUs, each holds one: 30,720 B / 2 per token
    qwen = CARDS["qwen3.5-397b-a17b"]
    assert context_read_ms(qwen, HW["rtx-pro-6000-server"], 4, 65536) == pytest.approx(
        15360 * 65536 / 1e9 / 1.597)
    # Llama-3.3-70B, 8 kv heads: one GPU reads all 21.47 GB, four a quarter
    llama = CARDS["llama-3.3-70b-instruct"]
    one, four = (context_read_ms(llama, HW["h100"], g, 65536) for g in (1, 4))
    assert one == pytest.approx(327680 * 65536 / 1e9 / float(HW["h100"]["mem_bw_tb_s"]))
    assert four == pytest.approx(one / 4)
    # a card without kv_heads has no read: the generic prior
    gemma = CARDS["gemma-4-12b-it"]
    assert gemma.kv_heads is None and context_read_ms(gemma, HW["rtx-3090"], 1, 65536) is None
    assert ctx_prior(PRIORS, None) is PRIORS.priors["ctx_ms_per_unit"]


def _spec(csv_text: str):
    data = load_measurements("m.csv", HW, text=csv_text)
    return S.build_spec(data, PRIORS, hardware=HW, cards=CARDS)


def test_the_model_prices_each_systems_context_cost_from_its_read():
    """The bundled fit's two systems: ctx_ms_per_unit's log density in the PyMC model is
    LogNormal(log(read x ratio), 0.8) at each, by hand: Kimi K2.6's MLA cache is one KV head,
    priced at ctx_read_ratio_one_head (2.5) on the RTX PRO 6000 (compute capability 12.0) and
    at ctx_read_ratio (1.2) on the B300 (10.3: FlashMLA-class kernels at the bandwidth)."""
    from ddtree_bayes.engine.model import build_model

    spec = _spec(bundled("measurements.csv").read_text())
    assert spec.systems == ("b300x8", "rtx-pro-6000x8")
    reads = [35136 * 65536 / 1e9 / 8.0, 35136 * 65536 / 1e9 / 1.792]
    np.testing.assert_allclose(spec.system_ctx_read_ms, reads)
    model = build_model(spec, PRIORS)
    rv = model["ctx_ms_per_unit"]
    value = np.array([0.5, 2.0])
    (logp,) = model.replace_rvs_by_values([model.logp(vars=[rv], sum=False)[0]])
    f = model.compile_fn(logp, inputs=model.value_vars, on_unused_input="ignore",
                         point_fn=False)
    point = {**model.initial_point(), "ctx_ms_per_unit_log__": np.log(value)}
    got = f(**point)
    want = (stats.lognorm.logpdf(value, 0.8, scale=np.array(reads) * [1.2, 2.5])
            + np.log(value))
    np.testing.assert_allclose(got, want, rtol=1e-9)   # (+ log|jacobian| of the log transform)
    meta = S.model_meta(spec, PRIORS)["system_ctx_prior"]
    assert meta["b300x8"]["median"] == pytest.approx(reads[0] * 1.2)
    assert meta["rtx-pro-6000x8"]["median"] == pytest.approx(reads[1] * 2.5)
    assert meta["rtx-pro-6000x8"]["how"].startswith("the card's KV read, 1.28 ms")
    assert meta["rtx-pro-6000x8"]["how"].endswith("x ctx_read_ratio_one_head (median 2.5)")


def test_a_cache_of_several_kv_heads_keeps_ctx_read_ratio():
    """Llama-3.3-70B (GQA, 8 KV heads) on one RTX 4090: read x 1.2; Kimi K2.6 (MLA, one
    latent head) on 8 RTX PRO 6000: read x 2.5, on 8 B300 x 1.2; a priors file without
    ctx_read_ratio_one_head (written before it) prices all at 1.2, so a fit made then keeps
    its answers."""
    from ddtree_bayes.core.config import parse_priors

    text = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
            "context_tokens,tok_s,source,notes\n"
            "llama-3.3-70b-instruct,rtx-4090,1,llama.cpp,ar,,,1,1.0,,20,test,\n"
            "kimi-k2.6,rtx-pro-6000,8,vllm,ar,,,1,1.0,,91,test,\n"
            "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,133,test,\n")
    data = load_measurements("m.csv", HW, text=text)
    spec = S.build_spec(data, PRIORS, hardware=HW, cards=CARDS)
    llama = 327680 * 65536 / 1e9 / float(HW["rtx-4090"]["mem_bw_tb_s"])
    kimi, kimi_rtx = 35136 * 65536 / 1e9 / 8.0, 35136 * 65536 / 1e9 / 1.792
    by_system = dict(zip(spec.systems, S.system_ctx_priors(spec, PRIORS), strict=True))
    assert by_system["llama-3.3-70b-instruct@rtx-4090x1"].params["median"] == pytest.approx(
        llama * 1.2)
    assert by_system["kimi-k2.6@rtx-pro-6000x8"].params["median"] == pytest.approx(
        kimi_rtx * 2.5)
    assert by_system["kimi-k2.6@b300x8"].params["median"] == pytest.approx(kimi * 1.2)
    start = PRIORS.text.index("[priors.ctx_read_ratio_one_head]")
    end = PRIORS.text.index("[priors.", start + 1)
    old = parse_priors(PRIORS.text[:start] + PRIORS.text[end:], "old.toml")
    assert "ctx_read_ratio_one_head" not in old.priors
    by_system = dict(zip(spec.systems, S.system_ctx_priors(spec, old), strict=True))
    assert by_system["kimi-k2.6@rtx-pro-6000x8"].params["median"] == pytest.approx(
        kimi_rtx * 1.2)


def test_without_the_ratio_prior_every_system_keeps_the_generic_one():
    from ddtree_bayes.core.config import parse_priors

    text = PRIORS.text
    start = text.index(f"[priors.{CTX_READ}]")
    end = text.index("[priors.", start + 1)
    without = parse_priors(text[:start] + text[end:], "p.toml")
    data = load_measurements("m.csv", HW, text=bundled("measurements.csv").read_text())
    spec = S.build_spec(data, without, hardware=HW, cards=CARDS)
    assert all(p is without.priors["ctx_ms_per_unit"] for p in S.system_ctx_priors(spec, without))
    assert "system_ctx_prior" not in S.model_meta(spec, without)


def test_an_unmeasured_pair_draws_its_context_cost_around_its_cards_read():
    """Llama-3.3-70B on one RTX PRO 6000 (never measured in the two-model fit): its draws'
    median is 21.47 GB / 1.792 TB/s x 1.2 = 14.38 ms per 64k, not the generic 3 ms."""
    from ddtree_bayes.engine.target_models import unmeasured_ctx_prior
    from ddtree_bayes.engine.testing import multi_model_draws

    draws = multi_model_draws()
    card = CARDS["llama-3.3-70b-instruct"]
    prior, how = unmeasured_ctx_prior(draws, card, HW["rtx-pro-6000"], 1)
    assert prior == PRIORS.priors["ctx_ms_per_unit"]          # a fit made before the read
    assert how.endswith("(a fit made before the KV read priced it)")
    draws.meta["model"]["system_ctx_prior"] = {}
    prior, how = unmeasured_ctx_prior(draws, card, HW["rtx-pro-6000"], 1)
    assert prior.params["median"] == pytest.approx(327680 * 65536 / 1e9 / 1.792 * 1.2)
    assert math.isclose(prior.params["median"], 14.38, rel_tol=1e-3)
    assert prior.params["sigma"] == 0.8 and how.startswith("the card's KV read, 12 ms")


def test_the_reports_prior_draws_follow_the_fits_per_system_prior():
    from ddtree_bayes.workflows.report.priors import ctx_priors

    coords = {"system": ["b300x8", "rtx-pro-6000x8"]}
    meta = {"system_ctx_prior": {"b300x8": {"median": 0.3454, "sigma": 0.8, "how": "x"}}}
    b300, rtx = ctx_priors(PRIORS, coords, meta)
    assert (b300.dist, b300.params) == ("lognormal", {"median": 0.3454, "sigma": 0.8})
    assert rtx is PRIORS.priors["ctx_ms_per_unit"]
    assert all(p is PRIORS.priors["ctx_ms_per_unit"] for p in ctx_priors(PRIORS, coords, {}))


def test_card_add_writes_the_kv_heads_the_read_splits():
    from test_cards import derive

    assert derive("llama-3.1-8b").card["kv_heads"] == "8"     # num_key_value_heads
    assert derive("qwen3-30b-a3b").card["kv_heads"] == "4"
    assert derive("deepseek-v3").card["kv_heads"] == "1"      # the MLA latent


def test_a_kv_heads_cell_that_is_no_whole_positive_number_is_one_line():
    from ddtree_bayes.core.errors import DataError

    text = bundled("models.csv").read_text()
    header, row = text.splitlines()[:2]
    assert row.endswith(",8")
    for bad in ("0", "2.5", "x"):
        with pytest.raises(DataError, match=r"row 2.*kv_heads"):
            load_model_cards("m.csv", header + "\n" + row[:-1] + bad + "\n")
    assert dataclasses.asdict(CARDS["kimi-k2.6"])["kv_heads"] == 1


@pytest.mark.slow
def test_the_context_check_scores_a_sweep_against_its_cards_read():
    """scripts/context_check.py on the GLM-5 cutlass sweep (8 x RTX PRO 6000): fitted at
    context 0 only, its rows at 16k-128k are scored, and the context cost the fit holds is
    the card's read prior untouched: 89,856 B x 65,536 / 1.792 TB/s = 3.286 ms x 2.5 = 8.21 ms
    per 64k at the median (GLM-5 is MLA: ctx_read_ratio_one_head), 90% x/ e^(1.645 x 0.8) =
    3.73 (2.20-30.6)."""
    import importlib.util

    from ddtree_bayes.core.hardware_table import hardware_table
    from ddtree_bayes.workflows.validation import card_texts

    repo = bundled("priors.toml").parents[3]
    spec = importlib.util.spec_from_file_location("context_check",
                                                  repo / "scripts" / "context_check.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sweep = repo / "data" / "public" / "conc" / "sglang_mtp_glm5_cutlass_rtxpro6000x8_conc.csv"
    res = mod.check(sweep, 0, PRIORS.text, hardware_table(repo).text, card_texts(repo), 20261130)
    assert res["converged"] and len(res["rows"]) == 10
    assert all(r["context_tokens"] > 0 for r in res["rows"])
    lo, med, hi = res["ctx_ms_per_unit"]["rtx-pro-6000x8"]
    read = 89856 * 65536 / 1e9 / 1.792
    assert med == pytest.approx(read * 2.5, rel=0.06)   # GLM-5's MLA: one KV head
    assert lo == pytest.approx(read * 2.5 / math.exp(1.645 * 0.8), rel=0.12)
    assert hi == pytest.approx(read * 2.5 * math.exp(1.645 * 0.8), rel=0.12)


@pytest.mark.parametrize("form", ["power", "linear"])
def test_every_moe_form_prices_the_context_cost_from_the_cards_read(form):
    """`fit --moe-form power` (or linear; `compare` fits them against the roofline form) read
    the card's KV layout nowhere: both systems kept the generic LogNormal(3 ms, 1.0) though
    the card gives kv_bytes_per_token and kv_heads, so the forms differed in their context
    prior too. Kimi K2.6 (35,136 B x 65,536, one latent head on every GPU): B300 x8 2.3027 GB
    / 8.0 TB/s x 1.2 = 0.3454 ms, RTX PRO 6000 x8 / 1.792 x 2.5 (ctx_read_ratio_one_head: no
    FlashMLA-class kernel on compute capability 12.0) = 3.212 ms."""
    from ddtree_bayes.engine.model import build_model

    priors = dataclasses.replace(PRIORS, moe_form=form)
    data = load_measurements("m.csv", HW, text=bundled("measurements.csv").read_text())
    spec = S.build_spec(data, priors, hardware=HW, cards=CARDS)
    reads = np.array([35136 * 65536 / 1e9 / 8.0, 35136 * 65536 / 1e9 / 1.792])
    got = [p.params["median"] for p in S.system_ctx_priors(spec, priors)]
    np.testing.assert_allclose(got, reads * [1.2, 2.5])
    assert math.isclose(got[0], 0.3454, rel_tol=1e-3)
    meta = S.model_meta(spec, priors)["system_ctx_prior"]
    assert meta["rtx-pro-6000x8"]["median"] == pytest.approx(3.212, rel=1e-3)
    model = build_model(spec, priors)
    rv = model["ctx_ms_per_unit"]
    assert np.allclose(np.exp(rv.owner.inputs[-2].eval()), reads * [1.2, 2.5])   # its mu


def test_an_other_form_without_the_models_card_keeps_the_generic_prior():
    """A power-form fit of a model with no card (its proxy is read off the rows) keeps the
    generic prior, as a card without kv_heads does (the fraction step form: the structured
    one prices drafter passes from the card)."""
    priors = dataclasses.replace(PRIORS, moe_form="power", step_form="fraction")
    text = bundled("measurements.csv").read_text().replace("kimi-k2.6", "no-card-model")
    data = load_measurements("m.csv", HW, text=text)
    spec = S.build_spec(data, priors, hardware=HW, cards=CARDS)
    assert all(p is PRIORS.priors["ctx_ms_per_unit"] for p in S.system_ctx_priors(spec, priors))


def test_an_unmeasured_pair_under_priors_without_the_ratio_says_so():
    """A fit whose priors file has no [priors.ctx_read_ratio] (a workspace's priors.toml from
    before it existed) stores no per-system context prior however new it is: an unmeasured
    pair's note said "(a fit made before the KV read priced it)"; it is the priors' choice."""
    from ddtree_bayes.engine.target_models import unmeasured_ctx_prior
    from ddtree_bayes.engine.testing import multi_model_draws

    draws = multi_model_draws()
    text = draws.priors_toml
    start = text.index(f"[priors.{CTX_READ}]")
    end = text.index("[priors.", start + 1)
    draws = dataclasses.replace(draws, priors_toml=text[:start] + text[end:])
    assert CTX_READ not in draws.priors.priors
    prior, how = unmeasured_ctx_prior(draws, CARDS["llama-3.3-70b-instruct"],
                                      HW["rtx-pro-6000"], 2)
    assert prior.params == {"median": 3.0, "sigma": 1.0}
    assert how == f"the generic ctx_ms_per_unit (no log-normal [priors.{CTX_READ}])"


@pytest.mark.parametrize("cell, says", [
    ("0", "kv_heads 0 is not a whole number of KV heads of 1 or more"),
    ("2.5", "kv_heads 2.5 is not a whole number of KV heads of 1 or more"),
    ("-1", "kv_heads -1 is not a whole number of KV heads of 1 or more")])
def test_a_bad_kv_heads_cell_says_what_the_column_holds(cell, says):
    """The generic 'must be > 0 (fix: write a positive number)' did not say what kv_heads is."""
    from ddtree_bayes.core.errors import DataError

    text = bundled("models.csv").read_text()
    header, row = text.splitlines()[:2]
    with pytest.raises(DataError) as e:
        load_model_cards("m.csv", header + "\n" + row[:-1] + cell + "\n")
    assert says in str(e.value) and "row 2" in str(e.value)
    assert e.value.fix == ("the KV heads of one full-attention layer (the config's "
                           "num_key_value_heads; 1 for an MLA latent cache), or blank")


def test_an_mla_card_with_more_than_one_kv_head_is_refused():
    """An MLA cache is one latent head every GPU holds whole: a hand-written card that copied
    DeepSeek's num_key_value_heads (128) split its read 8 ways on 8 GPUs, 8x too cheap, exit 0."""
    from ddtree_bayes.core.errors import DataError

    text = bundled("models.csv").read_text()
    kimi = next(line for line in text.splitlines() if line.startswith("kimi-k2.6,"))
    assert kimi.endswith(",1")
    with pytest.raises(DataError, match=r"row 6.*kv_heads.*an MLA cache is one latent head "
                                        r"every GPU holds whole, not 128"):
        load_model_cards("m.csv", text.replace(kimi, kimi[:-1] + "128"))
    assert load_model_cards("m.csv", text.replace(kimi, kimi[:-1]))["kimi-k2.6"].kv_heads is None


@pytest.mark.parametrize("name", ["ctx_read_ratio", "ctx_read_ratio_one_head"])
def test_a_ratio_prior_that_is_not_log_normal_is_refused_in_one_line(name):
    """A KV-read ratio written as, say, a point value was dropped without a word: the read
    fell back to the generic prior (ctx_read_ratio) or to the other ratio (one head). A
    priors file that says so is refused, naming the table and the fix; a fit's stored
    priors are read as they are."""
    from ddtree_bayes.core.config import parse_priors
    from ddtree_bayes.core.errors import PriorsError

    text = PRIORS.text
    start = text.index(f"[priors.{name}]\n")
    end = text.index("\nrationale", start)
    bad = text[:start] + f'[priors.{name}]\ndist = "point"\nvalue = 1.5' + text[end:]
    with pytest.raises(PriorsError, match=f"priors.{name}") as err:
        parse_priors(bad, "p.toml")
    assert "log-normal" in str(err.value) and 'dist = "lognormal"' in str(err.value)
    assert parse_priors(bad, "p.toml", stored=True).priors[name].dist == "point"

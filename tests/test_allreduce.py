"""The tensor-parallel all-reduce volume of the verified tokens (roofline form): every extra
token a step verifies on several GPUs moves ``2 layers x hidden x 2 B x 2 (g - 1) / g`` per GPU
over the link, at the link class's bus bandwidth. By hand, on cards and point masses."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.errors import PriorsError, QueryError
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.unmeasured import allreduce_tok_ms
from test_structure_model import structured_point_mass

CARDS = load_model_cards(bundled("models.csv"))
HW = load_hardware(bundled("hardware.csv"))
PRIORS = bundled("priors.toml").read_text()
HEADER = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
          "context_tokens,tok_s,source,notes\n")


def test_volume_per_token_by_hand():
    kimi = CARDS["kimi-k2.6"]
    assert kimi.hidden_size == 7168
    # 2 all-reduces x 61 layers x 7168 x 2 B, a ring moving 2 x 7/8 of it per GPU
    assert kimi.allreduce_mb_per_token(8)[0] == pytest.approx(2 * 61 * 7168 * 2 * 2 * 7 / 8 / 1e6)
    assert kimi.allreduce_mb_per_token(2)[0] == pytest.approx(2 * 61 * 7168 * 2 / 1e6)
    assert kimi.allreduce_mb_per_token(1)[0] == 0.0
    # a card without hidden_size: estimated from active params ~ 12 layers hidden^2, and said so
    qwen = CARDS["qwen3.8-27b"]
    assert qwen.hidden_size is None
    mb, how = qwen.allreduce_mb_per_token(2)
    hidden = round(math.sqrt(27e9 / (12 * 64)))
    assert mb == pytest.approx(2 * 64 * hidden * 2 / 1e6)
    assert "estimated" in how and "not in the card" in how


def spec_of(csv: str, priors: str = PRIORS):
    data = load_measurements("m.csv", HW, text=HEADER + csv)
    return S.build_spec(data, parse_priors(priors), hardware=HW, cards=CARDS)


def test_one_gpu_has_no_term_and_no_parameter():
    spec = spec_of("llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1,,141,s,\n"
                   "llama-3.1-8b-instruct,h100,1,vllm,eagle,3,3,4,2.3,,200,s,\n")
    assert spec.system_tp_mb.tolist() == [0.0] and spec.system_link == ("single",)
    meta = S.model_meta(spec, parse_priors(PRIORS))
    assert meta["allreduce_volume"] is True and "system_tp_mb" not in meta


def test_a_priors_file_without_the_link_prior_is_refused_by_name():
    text = PRIORS
    start = text.index("[priors.tp_busbw_pcie_gb_s]")
    end = text.index("[priors.tp_busbw_fabric_gb_s]")
    with pytest.raises(PriorsError) as err:
        spec_of("kimi-k2.6,rtx-pro-6000,8,vllm,ar,,,1,1,,91.5,s,\n", text[:start] + text[end:])
    assert err.value.column == "priors.tp_busbw_pcie_gb_s"
    assert "add [priors.tp_busbw_pcie_gb_s]" in str(err.value)
    # a single-GPU fit does not need it
    spec_of("llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1,,141,s,\n", text[:start] + text[end:])


def test_predict_adds_the_extra_tokens_all_reduce_by_hand():
    """B300 point mass, M = 33: the verify cost of test_predict_structured_step_by_hand plus
    32 extra tokens x tp_tok_ms; AR (M = 1) is unchanged; at C = 4 it is 4 x 33 - 1 tokens."""
    base = structured_point_mass()
    draws = dataclasses.replace(base, variables={**base.variables,
                                                 "tp_tok_ms": np.full((base.n_draws, 1), 0.02)})

    def parts(d, method="ddtree", c=1):
        sc = P.resolve_scenario(d, hardware="b300", gpus=8, engine="sglang", method=method,
                                block=16 if method == "ddtree" else None,
                                budget=32 if method == "ddtree" else None,
                                verify_tokens=None, context_tokens=0.0, concurrency=c)
        return P.step_components(d, sc, np.random.default_rng(0), anchor=False)[0]

    assert parts(draws)["moe"][0] == pytest.approx(parts(base)["moe"][0] + 32 * 0.02)
    assert parts(draws)["step"][0] == pytest.approx(parts(base)["step"][0] + 0.64)
    assert parts(draws, "ar")["step"][0] == pytest.approx(parts(base, "ar")["step"][0])
    assert parts(draws, c=4)["moe"][0] == pytest.approx(parts(base, c=4)["moe"][0] + 131 * 0.02)


def test_an_unmeasured_link_class_takes_its_prior_and_says_so():
    base = structured_point_mass()
    draws = dataclasses.replace(base, meta={**base.meta, "model": {**base.meta["model"],
                                                                   "allreduce_volume": True}})
    n = 20_000
    draws = dataclasses.replace(draws, variables={k: np.repeat(v[:1], n, axis=0)
                                                  for k, v in draws.variables.items()})
    kimi = CARDS["kimi-k2.6"]
    tp, how = allreduce_tok_ms(draws, kimi, HW["rtx-pro-6000"], 8, np.random.default_rng(1))
    assert "prior-driven" in how
    # LogNormal(median 15 GB/s, sigma 0.4): median 3.0607 MB / 15 GB/s = 0.204 ms per token
    assert np.median(tp) == pytest.approx(3.060736 / 15.0, rel=0.03)
    assert np.std(np.log(tp)) == pytest.approx(0.4, rel=0.03)
    # a class the fit measured: its posterior, no note
    with_fabric = dataclasses.replace(draws, variables={
        **draws.variables, "tp_busbw_fabric_gb_s": np.full(n, 250.0)})
    tp, how = allreduce_tok_ms(with_fabric, kimi, HW["b300"], 8, np.random.default_rng(1))
    assert how == "" and tp == pytest.approx(3.060736 / 250.0)
    # one GPU, or a fit made before the term: nothing
    assert allreduce_tok_ms(draws, kimi, HW["b300"], 1, np.random.default_rng(1))[0] is None
    assert allreduce_tok_ms(base, kimi, HW["b300"], 8, np.random.default_rng(1))[0] is None


def test_prior_draws_give_each_link_class_its_own_bandwidth():
    from ddtree_bayes.workflows import report

    spec = spec_of("kimi-k2.6,b300,8,sglang,ar,,,1,1,,133,s,\n"
                   "kimi-k2.6,rtx-pro-6000,8,vllm,ar,,,1,1,,91.5,s,\n")
    cfg = parse_priors(PRIORS)
    meta = S.model_meta(spec, cfg)
    coords = {k: list(v) for k, v in spec.parameter_coords.items()}
    d = report.prior_draws(cfg, coords, 50_000, 3, None, None, None, False, meta)
    assert np.median(d["tp_busbw_fabric_gb_s"]) == pytest.approx(200.0, rel=0.03)
    assert np.median(d["tp_busbw_pcie_gb_s"]) == pytest.approx(15.0, rel=0.03)
    assert d["tp_tok_ms"][:, 1] == pytest.approx(3.060736 / d["tp_busbw_pcie_gb_s"])
    assert d["tp_tok_ms"][:, 0] == pytest.approx(3.060736 / d["tp_busbw_fabric_gb_s"])


def test_decisions_give_a_transferred_system_its_all_reduce_column():
    """optimize / next answer an unmeasured system through a column of its own
    (decisions/common.with_transferred_system): a fit without the variable gains it, 0 for
    the systems it measured (the point mass has no term there) and the prior-driven volume for
    the new 8-GPU PCIe system."""
    from ddtree_bayes.workflows.decisions.common import with_transferred_system

    base = structured_point_mass()
    n = base.n_draws
    populations = {"moe_distinct_exponent_mu": np.full(n, 0.5), "moe_hw_sd": np.zeros(n),
                   "compute_eff_log_mu": np.full(n, -1.2), "compute_eff_log_sd": np.zeros(n)}
    draws = dataclasses.replace(base, meta={**base.meta, "model": {**base.meta["model"],
                                                                   "allreduce_volume": True}},
                                variables={**base.variables, **populations})
    sc = P.resolve_scenario(draws, hardware="rtx-pro-6000", gpus=8, engine="sglang",
                            method="ddtree", block=16, budget=32, verify_tokens=None,
                            context_tokens=0.0)
    assert not sc.measured
    out, sc2, how = with_transferred_system(draws, sc, seed=3)
    assert sc2.measured and out.meta["coords"]["system"] == ["b300x8", "rtx-pro-6000x8"]
    tp = out.variables["tp_tok_ms"]
    assert tp.shape == (draws.n_draws, 2) and np.all(tp[:, 0] == 0.0)
    assert np.all((3.060736 / 60 < tp[:, 1]) & (tp[:, 1] < 3.060736 / 3))   # 3-60 GB/s
    assert "prior-driven" in how


def test_a_transferred_one_gpu_system_gets_no_all_reduce_volume():
    """After a multi-GPU system, a one-GPU system asked of the same draws gets a 0 column of
    its own (it had none: `optimize --hardware h100 --gpus 1` raised an IndexError)."""
    from ddtree_bayes.workflows.decisions.common import with_transferred_system

    base = structured_point_mass()
    n = base.n_draws
    populations = {"moe_distinct_exponent_mu": np.full(n, 0.5), "moe_hw_sd": np.zeros(n),
                   "compute_eff_log_mu": np.full(n, -1.2), "compute_eff_log_sd": np.zeros(n),
                   "tp_tok_ms": np.full((n, 1), 0.01)}
    draws = dataclasses.replace(base, meta={**base.meta, "model": {**base.meta["model"],
                                                                   "allreduce_volume": True}},
                                variables={**base.variables, **populations})
    sc = P.resolve_scenario(draws, hardware="b300", gpus=4, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    one = dataclasses.replace(sc, gpus=1)   # Kimi K2.6 fits no single GPU: asked directly
    out, sc1, _ = with_transferred_system(draws, one, seed=3)
    assert out.meta["coords"]["system"] == ["b300x8", "b300x1"]
    assert out.variables["tp_tok_ms"].shape == (n, 2)
    assert np.all(out.variables["tp_tok_ms"][:, 0] == 0.01)
    assert np.all(out.variables["tp_tok_ms"][:, 1] == 0.0)


def test_a_system_that_cannot_hold_the_weights_is_refused():
    """Kimi K2.6's card: 1000B parameters at 0.6 bytes in the checkpoint = 600 GB of weights.
    One RTX PRO 6000 (96 GB) cannot hold them: refused, with the count that could
    (ceil(600 / 96) = 7); seven
    can (576 GB: answered by transfer). A measured system is never refused."""
    draws = structured_point_mass()

    def ask(hw, gpus):
        return P.resolve_scenario(draws, hardware=hw, gpus=gpus, engine="sglang", method="ar",
                                  block=None, budget=None, verify_tokens=None,
                                  context_tokens=0.0)

    with pytest.raises(QueryError) as err:
        ask("rtx-pro-6000", 1)
    assert str(err.value) == ("kimi-k2.6's weights (600.0 GB: 1000B parameters at 0.6 bytes) "
                              "do not fit in 1 x rtx-pro-6000 (96.0 GB) (fix: --gpus 7 or more of "
                              "them (8, 16 or 32 for a tensor-parallel engine, which shards "
                              "kimi-k2.6's 64 heads evenly; llama.cpp splits layers over any "
                              "count), or a GPU with more memory)")
    assert not ask("rtx-pro-6000", 7).measured
    assert ask("b300", 8).measured

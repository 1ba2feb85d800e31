"""The structured step and roofline verify cost in the PyMC model and in predict, against the
numpy formula at a hand-picked point and a point-mass posterior computed by hand."""

from __future__ import annotations

import dataclasses
import importlib
import math

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.inference import reproducible_pytensor
from ddtree_bayes.engine.testing import point_mass_draws
from ddtree_bayes.workflows.extrapolation import with_forms

reproducible_pytensor()
pm = importlib.import_module("pymc")
from ddtree_bayes.engine.model import build_model, free_parameter_names  # noqa: E402
from test_model import unconstrained  # noqa: E402

STRUCTURED = with_forms(bundled("priors.toml").read_text(), "roofline", "structured")


@pytest.fixture
def fast_compile():
    import pytensor

    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        yield


@pytest.fixture(scope="module")
def built():
    cfg = parse_priors(STRUCTURED)
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements(bundled("measurements.csv"), hw)
    spec = S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv")))
    return spec, cfg, build_model(spec, cfg)


def test_free_variables(built, fast_compile):
    spec, cfg, m = built
    assert spec.system_link == ("fabric", "pcie")   # b300x8 over NVLink, the PRO 6000s over PCIe
    assert {rv.name for rv in m.free_RVs} == set(free_parameter_names(
        "roofline", "structured", cfg, links=("pcie", "fabric")))
    assert {d.name for d in m.deterministics} >= {"moe_distinct_exponent", "compute_eff",
                                                  "compute_tok_ratio", "spec_fixed_ratio",
                                                  "spec_pass_ratio", "spec_tree_ratio"}


def hand_point():
    return {"step_ar_ms": np.array([7.5, 11.0]), "moe_share": np.array([0.4, 0.3]),
            "moe_distinct_exponent_mu": 0.46, "moe_hw_sd": 0.05, "moe_z": np.array([0.5, -0.5]),
            "ctx_ms_per_unit": np.array([3.0, 3.3]), "ctx_verify_exponent": 0.6,
            "compute_eff_log_mu": -1.0, "compute_eff_log_sd": 0.2,
            "compute_eff_log": np.array([-0.9, -1.1]),
            "spec_fixed_log_mu": -2.5, "spec_fixed_log": np.array([-2.4, -2.6]),
            "spec_pass_log_mu": -2.2, "spec_pass_log": np.array([-2.3, -2.0]),
            "spec_tree_log_mu": -6.0, "spec_tree_log": np.array([-5.8, -6.0]),
            "structure_sd": 0.03, "reduction": np.array([0.4]), "noise_sd": 0.03,
            "tp_busbw_fabric_gb_s": 300.0, "tp_busbw_pcie_gb_s": 12.0}


def structured_point(cfg):
    p = hand_point()
    for name, prior in cfg.priors.items():   # priors with dist = "point" are constants
        if prior.dist == "point":
            p[name] = prior.params["value"]
    for part, z in (("fixed", [0.3, -0.3]), ("pass", [-0.4, 0.4]), ("tree", [0.2, -0.2])):
        p[f"spec_{part}_engine_z"] = np.array(z)    # engines sglang, vllm
    return p


def hand_row_loglik(spec, cfg, p):
    """Per row, the structured/roofline likelihood by hand (numpy)."""
    mu = hand_mu(spec, cfg, p)
    sd = np.sqrt(p["noise_sd"] ** 2 + (p["structure_sd"] * spec.row_distance) ** 2)
    return -0.5 * ((spec.log_tok_s - mu) / sd) ** 2 - np.log(sd) - 0.5 * math.log(2 * math.pi)


def hand_mu(spec, cfg, p):
    """Per row, the modelled log tok/s of the structured/roofline forms by hand (numpy)."""
    s = spec.row_system
    expo = p["moe_distinct_exponent_mu"] + p["moe_hw_sd"] * p["moe_z"]
    eff = np.exp(p["compute_eff_log"])
    moe1 = p["moe_share"] * p["step_ar_ms"]
    tok_ratio = spec.system_flop_ms / eff / moe1
    mem = spec.row_distinct ** expo[s]
    comp = tok_ratio[s] * spec.verify_tokens
    knee = cfg.knee_sharpness
    verify = moe1[s] * (mem ** knee + comp ** knee) ** (1 / knee) / (1 + tok_ratio[s] ** knee) ** (1 / knee)
    context = p["ctx_ms_per_unit"][s] * spec.context_units * spec.verify_tokens ** p["ctx_verify_exponent"]
    # tensor-parallel all-reduce of the M - 1 extra tokens: Kimi K2.6 on 8 GPUs moves
    # 2 x 61 x 7168 x 2 B x 2 x 7/8 = 3.061 MB per token per GPU, over 300 / 12 GB/s
    tp = np.array([3.060736, 3.060736]) / np.array([p["tp_busbw_fabric_gb_s"], p["tp_busbw_pcie_gb_s"]])
    assert spec.system_tp_mb == pytest.approx([3.060736, 3.060736], rel=1e-9)
    target = (verify + (1 - p["moe_share"][s]) * p["step_ar_ms"][s] + context
              + tp[s] * (spec.verify_tokens - 1))

    def ratio(part):
        r = np.exp(p[f"spec_{part}_log"])
        # a group measured at one number of passes / nodes takes its mean
        mean = group_mean(spec, p, part)
        vary = {"fixed": [True, True], "pass": spec.group_passes_vary,
                "tree": spec.group_nodes_vary}[part]
        r = np.where(vary, r, np.exp(mean))
        return np.concatenate([r, [0.0]])[spec.row_group]

    spec_ms = p["step_ar_ms"][s] * (ratio("fixed") + ratio("pass") * spec.row_passes
                                    + ratio("tree") * spec.row_nodes)
    return np.log(spec.accept_len * 1000 / (target + spec_ms))


def group_mean(spec, p, part):
    """Each overhead group's mean log ``part`` ratio: the population's, its engine's effect,
    and its physical offset (ms: -log step_ar; a pass: its roofline over step_ar)."""
    engine = p[f"spec_{part}_engine_sd"] * p[f"spec_{part}_engine_z"][spec.group_engine]
    offset = -np.log(p["step_ar_ms"][spec.group_system])
    if part == "pass":
        offset = offset + np.log(spec.group_pass_roof_ms)
    return p[f"spec_{part}_log_mu"] + engine + offset


def with_z(spec, p):
    """The point with the non-centred offsets (``<name>_z``) its ``<name>_log`` values imply,
    the coordinates the default model samples."""
    p = dict(p, compute_eff_z=(p["compute_eff_log"] - p["compute_eff_log_mu"])
             / p["compute_eff_log_sd"])
    for part in ("fixed", "pass", "tree"):
        p[f"spec_{part}_z"] = ((p[f"spec_{part}_log"] - group_mean(spec, p, part))
                               / p[f"spec_{part}_log_sd"])
    return p


def test_likelihood_matches_the_numpy_formula(built):
    spec, cfg, m = built
    p = with_z(spec, structured_point(cfg))
    # the default (numba) backend: Python mode cannot run the fused >32-operand kernel
    loglik = m.compile_logp(vars=[m["log_tok_s"]])(unconstrained(m, p))
    expected = np.sum(hand_row_loglik(spec, cfg, p))
    assert loglik == pytest.approx(expected, rel=1e-9)
    assert np.isfinite(loglik)


def test_repeated_runs_share_the_configuration_error():
    """The structured forms on sufficient statistics: the 3 runs of a configuration share its
    own error, config_sd and the distance-scaled discrepancy together (the discrepancy is the
    configuration's, not each run's): their joint density is the multivariate normal with
    covariance run^2 I + (config^2 + (structure_sd d)^2) by hand, one run's scatter noise_sd
    split by config_share (config^2 = share noise^2, run^2 = (1 - share) noise^2), also with
    one of the runs held out through the refittable model's data."""
    from scipy import stats

    from ddtree_bayes.workflows.validation import refit_data
    from test_model import repeated_runs_csv

    cfg = parse_priors(STRUCTURED)
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements("repeats.csv", hw,
                             text=repeated_runs_csv(bundled("measurements.csv").read_text()))
    spec = S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv")))
    assert spec.configs.n.tolist() == [1, 3, 1, 1, 1, 1, 1, 1, 1]
    p = with_z(spec, {**structured_point(cfg), "config_share": 0.4})
    mu = hand_mu(spec, cfg, p)
    between = 0.4 * p["noise_sd"] ** 2 + (p["structure_sd"] * spec.row_distance) ** 2

    def joint(rows):
        cov = 0.6 * p["noise_sd"] ** 2 * np.eye(len(rows)) + between[rows[0]]
        return stats.multivariate_normal(mu[rows], cov).logpdf(spec.log_tok_s[rows])

    configs = [[0], [1, 9, 10], *[[k] for k in range(2, 9)]]
    assert spec.row_distance[1] > 0      # the discrepancy is part of what the runs share
    m = build_model(spec, cfg, refittable=True)
    ip = unconstrained(m, p)
    (per_config,) = m.compile_logp(vars=[m["log_tok_s"]], sum=False)(ip)
    assert per_config == pytest.approx([joint(rows) for rows in configs], rel=1e-10)
    w = np.ones(len(spec.rows))
    w[10] = 0.0      # one of the 3 runs: its configuration stays measured (same distances)
    for name, value in refit_data(spec, w).items():
        m.set_data(name, value)
    assert m.compile_logp(vars=[m["log_tok_s"]])(ip) == pytest.approx(
        sum(joint([r for r in rows if w[r] > 0]) for rows in configs), rel=1e-10)


def structured_point_mass(**overrides):
    """Point mass on B300 with the structured/roofline forms (Kimi K2.6's card); ``overrides``
    as point_mass_draws takes them."""
    cards = load_model_cards(bundled("models.csv"))
    import dataclasses

    draws = point_mass_draws(
        **{"moe_form": "roofline", "moe_distinct_exponent": [0.5], "compute_tok_ratio": [0.01],
           "spec_fixed_ratio": [0.05], "spec_pass_ratio": [0.1], "spec_tree_ratio": [0.002],
           "structure_sd": 0.04, "noise_sd": 0.0, **overrides})
    draws.meta["model"].update({
        "step_form": "structured", "knee": 3.0, "card": dataclasses.asdict(cards["kimi-k2.6"]),
        "methods": {"ddtree": {"passes": 1, "tree": True}, "eagle3": {"passes": "block", "tree": "auto"}}})
    return draws


@pytest.mark.parametrize("row_ctx, asked, anchored", [
    ("16384.4", 16384.0, True), ("16384.5", 16385.0, True), ("16384.4", 16385.0, False)])
def test_a_whole_token_question_anchors_to_a_row_of_a_mean_context(row_ctx, asked, anchored):
    """A serving benchmark's row holds a mean context (16384.4 tokens); --context takes whole
    tokens only, and the anchor matched context exactly, so `--context 16384` at that row's
    own configuration was the structural step, not anchored to the measured one. A question
    now matches the rows whose context rounds (half up) to its whole tokens: the measured
    step exp(-z), z = log(tok_s / (accept x 1000)), as at context 0, times the structural
    step's ratio between the context asked and the row's (0.4 tokens: 1 - 2e-6)."""
    draws = structured_point_mass()
    text = draws.data_csv.replace(",4.4,,303,", f",4.4,{row_ctx},303,")
    assert text != draws.data_csv
    draws = dataclasses.replace(draws, data_csv=text, memo={})
    (row,) = [r for r in draws.measurements.rows if r.method == "ddtree"]
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=8, budget=8, verify_tokens=None, context_tokens=asked)
    parts, how = P.step_components(draws, sc, np.random.default_rng(0), anchor=True)
    assert ("anchored to the measured ddtree budget 8 (M = 9, 1 row)" in how) == anchored
    # (a question of other whole tokens is anchored to that row as to a neighbour: the whole
    # tokens it was asked at)
    assert ("(M = 9, 1 row, at context 16384)" in how) != anchored
    if anchored:
        z = math.log(row.tok_s / (row.accept_len * 1000.0))
        at_row = dataclasses.replace(sc, context_tokens=float(row_ctx))
        ratio = (P.step_components(draws, sc, np.random.default_rng(0), anchor=False)[0]["step"][0]
                 / P.step_components(draws, at_row, np.random.default_rng(0),
                                     anchor=False)[0]["step"][0])
        assert abs(ratio - 1) < 1e-5
        assert parts["step"][0] == pytest.approx(math.exp(-z) * ratio, rel=1e-9)


def test_a_question_at_an_unmeasured_context_anchors_to_the_nearest_measured_one():
    """A configuration measured at one context only was anchored to its measurement there and
    answered by the structural step alone at any other context, so a longer context could
    come out faster: on the public corpus, DeepSeek-R1 AR on 8x B200 gave 114 tok/s at its
    measured 1024 tokens (measured 111) and 116 at 2048 (a hunt's finding). Now a question
    with no configuration measured at its context anchors to the nearest measured context's,
    as one at another concurrency does: the measured step exp(-z) times the structural step's
    ratio between the two contexts (noise 0: the whole residual is the configuration's). It
    is not that configuration itself (another context), and the answer says which it is."""
    draws = structured_point_mass()
    (row,) = [r for r in draws.measurements.rows if r.method == "ddtree"]
    z = math.log(row.tok_s / (row.accept_len * 1000.0))

    def asked(ctx):
        return P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                  method="ddtree", block=8, budget=8, verify_tokens=None,
                                  context_tokens=ctx)

    def structural(ctx):
        return P.step_components(draws, asked(ctx), np.random.default_rng(0),
                                 anchor=False)[0]["step"][0]

    at_row, _ = P.step_components(draws, asked(0.0), np.random.default_rng(0))
    parts, how = P.step_components(draws, asked(2048.0), np.random.default_rng(0))
    ratio = structural(2048.0) / structural(0.0)
    assert ratio > 1.0
    assert at_row["step"][0] == pytest.approx(math.exp(-z), rel=1e-9)
    assert parts["step"][0] == pytest.approx(math.exp(-z) * ratio, rel=1e-9)
    assert how.endswith("anchored to the measured ddtree budget 8 (M = 9, 1 row, at context 0)")
    assert not P.at_measured_configuration(draws, asked(2048.0))
    assert P.at_measured_configuration(draws, asked(0.0))


@pytest.mark.parametrize("context, concurrency", [(1.0, 1), (2048.0, 1), (0.0, 2), (2048.0, 4)])
def test_the_measured_deployment_carries_its_own_error_to_other_contexts_and_streams(
        context, concurrency):
    """With repeated runs a configuration has an error of its own (config_sd) besides the
    structural discrepancy. The anchor carried it at the measured configuration itself only,
    so one token more context, or a second stream, dropped it and came out faster: on the
    public corpus Kimi K2.6 AR on 8x H200 (measured 60.4 tok/s, structural step 13.8 ms) gave
    63.15 tok/s at context 0 and 63.79 at 512; Llama-3.1-8B AR in vLLM on one H100 138.44
    per user at C = 1 and 139.51 at C = 2. The deployment measured (its draft shape on its
    system, engine and method) keeps its own error at any context and concurrency: each draw's
    anchored step is the measured configuration's times the structural step's ratio, and its
    run noise is run_sd alone (config_sd is known there), widened by the discrepancy for the
    distance (and past the measured concurrency by concurrency_sd per doubling)."""
    draws = structured_point_mass(run_sd=0.03, config_sd=0.02)

    def asked(ctx, c):
        return P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                  method="ddtree", block=8, budget=8, verify_tokens=None,
                                  context_tokens=ctx, concurrency=c)

    def step(ctx, c, anchor=True):
        return P.step_components(draws, asked(ctx, c), np.random.default_rng(0), anchor=anchor)

    itself, _ = step(0.0, 1)
    there, how = step(context, concurrency)
    ratio = step(context, concurrency, False)[0]["step"] / step(0.0, 1, False)[0]["step"]
    assert np.all(ratio > 1.0)
    assert np.ptp(itself["step"]) > 0   # (the anchor's draws vary: compared draw by draw)
    assert there["step"] == pytest.approx(itself["step"] * ratio, rel=1e-9)
    assert "anchored to the measured ddtree budget 8 (M = 9" in how
    assert P.at_measured_configuration(draws, asked(0.0, 1))
    assert not P.at_measured_configuration(draws, asked(context, concurrency))
    # (C x M = 9C against the measured 9; past the measured C = 1 the priors' concurrency_sd,
    # 0.06 per doubling, too)
    distance, doublings = math.log(concurrency), math.log2(concurrency)
    assert there["log_sd"] == pytest.approx(
        np.sqrt(0.03 ** 2 + (0.06 * doublings) ** 2 + (0.04 * distance) ** 2))


def test_more_streams_of_a_measured_deployment_stay_anchored_to_it():
    """The anchor was the measured configuration nearest in C x M, of any draft shape: on the
    public corpus Qwen3.8-27B MTP k=2 in vLLM on one RTX PRO 6000 Max-Q (measured 96.1 tok/s
    at accept 2.18, M = 3) gave 134.46 tok/s per user at C = 1 and 135.88 at C = 2, whose
    C x M = 6 sat nearer the k=4 row (M = 5, 116.3 at 2.68, faster than the model) than its
    own. A question of a deployment the fit measured (its draft shape) is anchored to it at
    any concurrency, its own error carried: here DDTree budget 8 at C = 2 (C x M = 18) to the
    measured budget 8 (M = 9), not to a budget-16 row (M = 17) measured faster than the model;
    each draw the measured configuration's anchored step times the structural ratio."""
    draws = structured_point_mass(run_sd=0.03, config_sd=0.02)
    row = "kimi-k2.6,b300,8,sglang,ddtree,16,16,17,6.0,,560,test,\n"
    draws = dataclasses.replace(draws, data_csv=draws.data_csv + row, memo={})

    def asked(block, budget, c):
        return P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                  method="ddtree", block=block, budget=budget,
                                  verify_tokens=None, context_tokens=0.0, concurrency=c)

    def step(sc, anchor=True):
        return P.step_components(draws, sc, np.random.default_rng(0), anchor=anchor)

    one, two = asked(8, 8, 1), asked(8, 8, 2)
    parts, how = step(two)
    assert "anchored to the measured ddtree budget 8 (M = 9, C = 1, 1 row)" in how, how
    ratio = step(two, False)[0]["step"] / step(one, False)[0]["step"]
    assert parts["step"] == pytest.approx(step(one)[0]["step"] * ratio, rel=1e-9)
    # (the budget-16 row is still its own question's anchor, and a budget 32's: not budget 8's)
    assert step(asked(16, 16, 1))[1].endswith(
        "anchored to the measured ddtree budget 16 (M = 17, 1 row)")
    assert step(asked(16, 32, 1))[1].endswith(
        "anchored to the measured ddtree budget 16 (M = 17, 1 row)")


def test_predict_structured_step_by_hand():
    draws = structured_point_mass()
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    parts, how = P.step_components(draws, sc, np.random.default_rng(0), anchor=False)
    # verify: moe1 = 0.5 x 8 = 4 ms; memory part sqrt(distinct(33)); compute 0.01 x 33
    distinct = 384 * (1 - (1 - 8 / 384) ** 33) / 8
    verify = 4 * (distinct ** 1.5 + 0.33 ** 3) ** (1 / 3) / (1 + 0.01 ** 3) ** (1 / 3)
    spec = 8 * (0.05 + 0.1 * 1 + 0.002 * 32)
    assert parts["moe"][0] == pytest.approx(verify)
    assert parts["spec"][0] == pytest.approx(spec)
    assert parts["step"][0] == pytest.approx(verify + 4 + spec)
    # the stored B300 rows are AR (M=1) and DDTree budget 8 (M=9, 1 pass): distance log(33/9)
    assert parts["log_sd"][0] == pytest.approx(0.04 * math.log(33 / 9))
    # the native engine pays (1 - 0.5) of the SGLang SPEC
    sc_native = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="native", method="ddtree",
                                   block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    native, _ = P.step_components(draws, sc_native, np.random.default_rng(0), anchor=False)
    assert native["spec"][0] == pytest.approx(spec / 2)


def _ddtree_at(draws, budget, anchor):
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16 if budget > 8 else 8, budget=budget, verify_tokens=None,
                            context_tokens=0.0)
    return P.step_components(draws, sc, np.random.default_rng(0), anchor=anchor)


def test_a_query_carries_the_discrepancy_of_its_nearest_measured_configuration():
    """B300 point mass without run-to-run noise: the measured SGLang DDTree budget-8 row sits
    r = z - (-log step_8) from the structural model (z = log(tok_s / (accept x 1000))), and all
    of r is that configuration's own discrepancy. So the answer at budget 8 is the measured
    step, budget 32 is its structural step x exp(-r), and its discrepancy sd grows from
    budget 8: 0.04 x log(33 / 9). Computed by hand from the bundled rows."""
    draws = structured_point_mass()
    rows = [r for r in draws.measurements.rows if r.engine == "sglang" and r.method == "ddtree"
            and r.budget == 8 and r.accept_len is not None]
    assert rows
    z = float(np.mean([math.log(r.tok_s / (r.accept_len * 1000.0)) for r in rows]))
    structural8 = _ddtree_at(draws, 8, False)[0]["step"][0]
    r = z + math.log(structural8)
    assert abs(r) > 0.01                      # the point mass does not fit the row exactly
    anchored8, how = _ddtree_at(draws, 8, True)
    assert anchored8["step"][0] == pytest.approx(math.exp(-z))
    assert "anchored to the measured ddtree budget 8" in how
    # the block too, where it is not the one asked (a walkthrough: a block-16 question said
    # "anchored to the measured ddtree budget 16" of a block-8 row)
    assert "anchored to the measured ddtree budget 8 (M = 9" in how   # asked at block 8
    assert "anchored to the measured ddtree block 8 budget 8 (M = 9" in _ddtree_at(
        draws, 32, True)[1]                                          # asked at block 16
    anchored32 = _ddtree_at(draws, 32, True)[0]
    assert anchored32["step"][0] == pytest.approx(_ddtree_at(draws, 32, False)[0]["step"][0]
                                                  * math.exp(-r))
    parts_sum = sum(anchored32[k][0] for k in ("moe", "attn_base", "context", "spec"))
    assert parts_sum == pytest.approx(anchored32["step"][0])   # the terms scale together
    assert anchored32["log_sd"][0] == pytest.approx(0.04 * math.log(33 / 9))


def test_two_anchors_draw_independent_discrepancies():
    """With run-to-run noise each anchor's discrepancy is uncertain; the likelihood makes two
    configurations' discrepancies independent given the parameters, so an anchored DDTree
    answer and an anchored AR answer must not share their draws (a shared z made their ratio,
    P(faster than AR), overconfident)."""
    import dataclasses

    base = structured_point_mass()
    draws = dataclasses.replace(base, variables={**base.variables,
                                                 "noise_sd": np.full(base.n_draws, 0.03)},
                                memo={})
    dd = P.anchor_shift(draws, P.resolve_scenario(
        draws, hardware="b300", gpus=8, engine="sglang", method="ddtree", block=16, budget=32,
        verify_tokens=None, context_tokens=0.0))[0]
    ar = P.anchor_shift(draws, P.resolve_scenario(
        draws, hardware="b300", gpus=8, engine="sglang", method="ar", block=None, budget=None,
        verify_tokens=None, context_tokens=0.0))[0]
    assert np.std(dd) > 0 and np.std(ar) > 0
    assert abs(np.corrcoef(dd, ar)[0, 1]) < 0.1


def test_a_student_t_anchor_widens_with_its_residual():
    """Under a Student-t likelihood (``likelihood_nu``) a measured configuration's
    discrepancy given its residual r is a scale mixture: the normal's conditional mean
    A r / T, and variance (A - A^2 / T) x E[1 / w] with w ~ Gamma((nu + 1) / 2, rate
    (nu + r^2 / T) / 2), i.e. x (nu + r^2 / T) / (nu - 1): a row far off the model pins its
    configuration less. A = (0.04 d_c)^2, d_c the budget-8 configuration's distance from
    the other B300 configurations, T = A + 0.03^2 / n."""
    import dataclasses

    base = structured_point_mass()
    n = 200_000
    variables = {k: np.repeat(v[:1], n, axis=0) for k, v in base.variables.items()}
    variables.update(noise_sd=np.full(n, 0.03), likelihood_nu=np.full(n, 4.0))
    draws = dataclasses.replace(base, variables=variables, memo={})
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    shift = P.anchor_shift(draws, sc)[0]
    rows = [r for r in draws.measurements.rows if r.engine == "sglang" and r.method == "ddtree"
            and r.budget == 8 and r.accept_len is not None]
    z = float(np.mean([math.log(r.tok_s / (r.accept_len * 1000.0)) for r in rows]))
    r = z + math.log(_ddtree_at(draws, 8, False)[0]["step"][0])
    d_c = P._nearest_measured(draws, sc)[2]
    assert d_c == pytest.approx(math.log(9.0))      # from the AR rows' M = 1
    a = (0.04 * d_c) ** 2
    total = a + 0.03 ** 2 / len(rows)
    assert np.mean(shift) == pytest.approx(a / total * r, rel=0.01)
    normal_var = a - a ** 2 / total
    assert np.var(shift) == pytest.approx(normal_var * (4.0 + r ** 2 / total) / 3.0, rel=0.03)


def test_student_t_noise_is_normal_at_a_measured_configuration_itself():
    """Under likelihood_nu a new configuration's deviation is t, but at a measured
    configuration itself the anchor has drawn the configuration's deviation already and the
    run's scatter about its mean is normal, as in the likelihood. (No run-to-run noise here:
    budget 32's sd is its discrepancy alone, all t.)"""
    import dataclasses

    base = structured_point_mass()
    draws = dataclasses.replace(base, variables={**base.variables,
                                                 "likelihood_nu": np.full(base.n_draws, 4.0)},
                                memo={})

    def noise(budget):
        sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                method="ddtree", block=8 if budget == 8 else 16, budget=budget,
                                verify_tokens=None, context_tokens=0.0)
        log_sd = P.step_components(draws, sc, np.random.default_rng(0))[0]["log_sd"]
        return P.predictive_noise(draws, sc, log_sd, np.random.default_rng(7))

    n = draws.n_draws
    assert np.array_equal(noise(8), np.random.default_rng(7).standard_normal(n))
    assert np.array_equal(noise(32), np.random.default_rng(7).standard_t(4.0, n))


def test_a_held_out_row_is_never_an_anchor():
    """A validation fold's held-out rows are not the fit's: with the budget-8 rows held out
    the query has no measured configuration of its group and keeps the structural step."""
    draws = structured_point_mass()
    draws.meta["held_out_rows"] = [r.row for r in draws.measurements.rows
                                   if r.method == "ddtree" and r.budget == 8]
    anchored, how = _ddtree_at(draws, 32, True)
    assert anchored["step"][0] == pytest.approx(_ddtree_at(draws, 32, False)[0]["step"][0])
    assert "anchored" not in how


def test_a_held_out_group_is_not_called_measured():
    """A validation fold whose held-out rows are a whole overhead group (the AR-kept check:
    the pair's speculative rows) drew that group's costs around the population's mean, yet the
    note said "overhead of measured group b300x8/sglang/ddtree" (a helper's AR-kept driver).
    The note now says the fit holds its rows out; the numbers are the same draws."""
    draws = structured_point_mass()
    fitted, how = _ddtree_at(draws, 32, False)
    assert "overhead of measured group b300x8/sglang/ddtree" in how
    fold = draws.view(meta={**draws.meta, "held_out_rows": [
        r.row for r in draws.measurements.rows if r.method == "ddtree"]})
    held, how = _ddtree_at(fold, 32, False)
    assert "overhead of measured group" not in how
    assert ("overhead of group b300x8/sglang/ddtree, whose rows this fit holds out: drawn "
            "from the pooled population") in how
    from ddtree_bayes.engine.explain import overhead_from
    assert overhead_from(how).startswith("no group measured: drawn from the population")
    # the same variables priced (a point mass is not refit: a real fold's are its prior's)
    assert np.array_equal(held["spec"], fitted["spec"])


def test_interpolation_is_narrower_than_extrapolation():
    draws = structured_point_mass()
    sc8 = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                             block=8, budget=8, verify_tokens=None, context_tokens=0.0)
    sc128 = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                               block=16, budget=128, verify_tokens=None, context_tokens=0.0)
    rng = np.random.default_rng(0)
    assert P.step_components(draws, sc8, rng)[0]["log_sd"][0] == 0.0   # measured configuration
    assert P.step_components(draws, sc128, rng)[0]["log_sd"][0] == pytest.approx(
        0.04 * math.log(129 / 9))


def test_undeclared_method_is_a_query_error():
    from ddtree_bayes.core.errors import QueryError

    draws = structured_point_mass()
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="lookahead",
                            block=4, budget=4, verify_tokens=None, context_tokens=0.0)
    with pytest.raises(QueryError, match="not declared"):
        P.step_components(draws, sc, np.random.default_rng(0))


@pytest.mark.nuts
def test_validate_extrapolate_end_to_end(tmp_path, monkeypatch, capsys):
    """One public sweep through the CLI with a small sampler: the held-out configuration,
    scores that obey their definitions, and the shipped JSON Schema."""
    import json
    from pathlib import Path

    import jsonschema

    from ddtree_bayes.cli.main import main
    from ddtree_bayes.core.config import SamplerSettings
    from ddtree_bayes.workflows import extrapolation as X

    real = X.extrapolate
    small = SamplerSettings(chains=2, draws=100, tune=100)
    monkeypatch.setattr(X, "extrapolate", lambda *a, **k: real(*a, settings=small, **k))
    sweep = Path(__file__).resolve().parents[1] / "data/public/trtllm_mtp_deepseek_r1_b200.csv"
    assert main(["validate", "--extrapolate", "--sweeps", str(sweep), "--structures",
                 "structured", "--quiet", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (s,) = out["sweeps"]
    # MTP depths 1-5 (M = 2..6): the largest third of five configurations is one, M = 6
    assert s["held_out_verify"] == [6] and s["train_max_verify"] == 5
    (row,) = out["rows"]
    assert row["measured"] == 239.0
    sc = s["structured"]
    assert sc["bias"] == pytest.approx(row["median"] / 239.0 - 1)
    assert sc["mae"] == pytest.approx(abs(sc["bias"]))
    assert sc["coverage90"] == float(row["lo90"] <= 239.0 <= row["hi90"])
    odds, targets = sc["attainability"], out["pooled"]["structured"]["targets"]
    # the small sampler's fit may fail its gates: then its sweep is not pooled, but named
    fine = sc["converged"]
    assert targets["sweeps"] == int(fine)
    assert targets["met_bias"] == int(fine and abs(sc["bias"]) <= 0.03)
    assert targets["p_all_bias"] == pytest.approx(odds["p_bias"] if fine else 1.0)
    assert out["unconverged_rows"] == ({} if fine else {f"{s['sweep']} (structured)": [row["row"]]})
    # an oracle that knows the true mean beats any model on the same noise
    assert odds["noise_p_bias"] >= odds["p_bias"] - 0.02
    schema = json.loads((Path(__file__).resolve().parents[1]
                         / "src/ddtree_bayes/schemas/validate.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(out)


def test_a_group_measured_at_one_budget_carries_its_own_spread_when_extrapolated():
    """The B300 DDTree group was measured at budget 8 only: its per-node ratio is the
    population's in the fit; asked about budget 32, the 24 extra nodes cost the group's own
    ratio exp(mu + sd z), so SPEC spreads there and nowhere else."""
    import dataclasses

    cards = load_model_cards(bundled("models.csv"))
    mu = math.log(0.002)
    draws = point_mass_draws(
        n=4000, moe_form="roofline", moe_distinct_exponent=[0.5], compute_tok_ratio=[0.01],
        spec_fixed_ratio=[0.05], spec_pass_ratio=[0.1], spec_tree_ratio=[0.002],
        spec_pass_log_mu=math.log(0.1), spec_pass_log_sd=0.5, spec_tree_log_mu=mu,
        spec_tree_log_sd=0.8, structure_sd=0.0, noise_sd=0.0)
    draws.meta["model"].update({
        "step_form": "structured", "knee": 3.0, "card": dataclasses.asdict(cards["kimi-k2.6"]),
        "methods": {"ddtree": {"passes": 1, "tree": True}},
        "group_varies": {"pass": [False], "tree": [False]}})

    def spec_at(budget):
        sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                method="ddtree", block=16, budget=budget, verify_tokens=None,
                                context_tokens=0.0)
        return P.step_components(draws, sc, np.random.default_rng(1), anchor=False)[0]["spec"]

    at8, at32 = spec_at(8), spec_at(32)
    assert np.ptp(at8) == 0 and at8[0] == pytest.approx(8 * (0.05 + 0.1 + 0.002 * 8))
    # 24 extra nodes at exp(mu + 0.8 z) instead of exp(mu), z below z_max = ln(0.00825 /
    # 0.002) / 0.8 = 1.7714, where budget 8's 8 nodes would take its whole fixed ratio 0.05
    # (0.002 + 0.05 / 8 = 0.00825): E[e^(0.8 z) | z <= z_max] = e^0.32 Phi(z_max - 0.8) /
    # Phi(z_max) = 1.3771 x 0.8343 / 0.9617 = 1.1946
    expected_mean = 8 * (0.05 + 0.1 + 0.002 * 32) + 8 * 24 * 0.002 * (1.1946 - 1)
    assert at32.mean() == pytest.approx(expected_mean, rel=0.02)
    assert at32.std() > 0.1
    # no draw prices a node above 0.00825: budget 8 keeps a fixed cost >= 0
    assert at32.max() <= 8 * (0.05 + 0.1 + 0.002 * 32) + 8 * 24 * (0.00825 - 0.002) + 1e-9


def test_next_weighs_a_new_candidate_structurally_and_a_repeat_conditionally(monkeypatch):
    """``next`` simulates a candidate's result and weighs the draws by its likelihood, as the
    fit and ``update`` would: at a configuration not measured yet (budget 32) the structural
    step with the discrepancy at its distance; a repeat of a measured one (budget 8) is
    conditioned on its rows, i.e. predict's anchored draw at that configuration with run-to-run
    noise. The point mass does not fit budget 8 exactly, so the two forms differ there."""
    import dataclasses

    from ddtree_bayes.engine.question import AcceptSource
    from ddtree_bayes.workflows import decisions as D
    from ddtree_bayes.workflows.decisions import next_measurement as N

    base = structured_point_mass()   # (with run-to-run noise: next refuses a noiseless fit)
    draws = dataclasses.replace(base, variables={**base.variables,
                                                 "noise_sd": np.full(base.n_draws, 0.03)},
                                memo={})
    seen = []
    real = N.preposterior

    def spy(log_mu, noise_sd, *args, **kwargs):
        seen.append((log_mu.copy(), noise_sd.copy()))
        return real(log_mu, noise_sd, *args, **kwargs)

    monkeypatch.setattr(N, "preposterior", spy)

    def scenario(budget):
        return P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                  method="ddtree", block=16 if budget > 8 else 8, budget=budget,
                                  verify_tokens=None, context_tokens=0.0)

    query = D.Query(scenario(32), "12", source=AcceptSource("given", "12", value=12.0))
    cands = [D.Candidate(scenario(b), 4.0, "test") for b in (8, 32)]
    assert [P.at_measured_configuration(draws, c.scenario) for c in cands] == [True, False]
    D.next_measurements(draws, query, cands, k=4, seed=1)
    (mu8, _), (mu32, _) = seen
    for (mu, sd), budget, anchored in ((seen[0], 8, True), (seen[1], 32, False)):
        parts = P.step_components(draws, scenario(budget), np.random.default_rng(0),
                                  anchor=anchored)[0]
        assert mu[0] == pytest.approx(math.log(4.0 * 1000.0 / parts["step"][0]))
        assert sd[0] == pytest.approx(parts["log_sd"][0])
    structural8 = P.step_components(draws, scenario(8), np.random.default_rng(0),
                                    anchor=False)[0]["step"]
    assert abs(mu8[0] - math.log(4000.0 / structural8[0])) > 0.01
    anchored32 = P.step_components(draws, scenario(32), np.random.default_rng(0))[0]["step"]
    assert abs(mu32[0] - math.log(4000.0 / anchored32[0])) > 0.01


def transferable_point_mass():
    """:func:`structured_point_mass` with the transfer's population parameters a fit of the
    structured form has (the system scatter 0: transferred costs exactly), and the DDTree 16/32
    question on the measured B300 and the never-measured H200."""
    draws = structured_point_mass()
    n = draws.n_draws
    draws.variables.update(transfer_system_sd=np.zeros(n), moe_distinct_exponent_mu=np.full(n, 0.5),
                           compute_eff_log_mu=np.full(n, -1.2), compute_eff_log_sd=np.zeros(n))
    at = {hw: P.resolve_scenario(draws, hardware=hw, gpus=8, engine="sglang", method="ddtree",
                                 block=16, budget=32, verify_tokens=None, context_tokens=0.0)
          for hw in ("b300", "h200")}
    return draws, at


def test_an_unmeasured_gpu_carries_the_measured_group_of_its_reference_system():
    """A system never measured is transferred from a measured one; its speculative overhead
    was drawn from the population of groups even when the reference measured the same engine
    and method (a memory overclock of the measured RTX 5090: 90% 101-227 tok/s against the
    stock card's 148-164). It now carries that group in physical units: fixed and per-node ms,
    the per-pass multiple of the drafter roofline (recomputed on the new GPUs), times the
    [transfer] system scatter (here 0: exactly the carried costs)."""
    from ddtree_bayes.engine.structure import pass_roofline

    draws, at = transferable_point_mass()
    parts, how = P.step_components(draws, at["h200"], np.random.default_rng(0), anchor=False)
    assert "overhead of group b300x8/sglang/ddtree carried to h200x8" in how
    roof = pass_roofline(draws, at["h200"])[0] / pass_roofline(draws, at["b300"])[0]
    assert roof > 1.0    # the H200 reads the drafter's weights slower than the B300
    # the B300 step is 8 ms: 8 x (0.05 fixed + 0.1 x roof for the one pass + 0.002 x 32 nodes)
    assert parts["spec"] == pytest.approx(8 * (0.05 + 0.1 * roof + 0.002 * 32))
    # another engine on the H200 has no measured group on the B300 to carry
    from ddtree_bayes.engine.structure import carried_group

    assert carried_group(draws, at["h200"], "sglang")[0] == "b300x8/sglang/ddtree"
    assert carried_group(draws, at["h200"], "vllm") is None
    assert carried_group(draws, at["b300"], "sglang") is None   # a measured system: its own


def test_a_hybrid_target_carried_in_an_engine_with_a_large_hybrid_effect_widens():
    """A held-out deployment (Qwen3.8-27B MTP in vLLM on one A100, vllm-project/vllm#35387)
    and the AR-kept check's club-3090 pair fell far outside: a hybrid's group carried from
    another deployment took a system's scatter only, where such deployments differ as much as
    any two groups. In an engine whose hybrid effect is credibly positive the carried SPEC now
    scatters with hypot(system_sd, spec_fixed_log_sd); with one seed, every draw's log SPEC
    over the carried costs is hypot(0.3, 0.8) / 0.3 times the transformer's. So it does in an
    engine measured on hybrids only, whose effect is not separable from the engine's own
    (llama.cpp: community rigs held out paid 23-37 ms over AR where the corpus's GPUs pay
    3-9 ms); an engine that ran a transformer too, with an effect not told from 0, keeps
    the system scatter."""
    from ddtree_bayes.engine.structure import carried_group, carried_spec_ms, deployment_spread

    draws, at = transferable_point_mass()
    n, h200 = draws.n_draws, at["h200"]
    draws.variables.update(transfer_system_sd=np.full(n, 0.3), spec_fixed_log_sd=np.full(n, 0.8))

    def fit(recurrent_layers, effect, kinds=(False,)):
        # kinds: whether the engine's measured group (b300x8/sglang/ddtree) has a hybrid
        # target; (False,): the engine ran a transformer (its hybrid effect is separable)
        model = {**draws.meta["model"], "engines": ["sglang"], "group_engine": [0],
                 "group_recurrent": list(kinds),
                 "card": {**draws.meta["model"]["card"], "recurrent_layers": recurrent_layers}}
        v = {**draws.variables, "spec_fixed_recurrent": np.asarray(effect).reshape(n, 1)}
        return dataclasses.replace(draws, meta={**draws.meta, "model": model}, variables=v,
                                   memo={})

    def log_spec(f):
        spec = carried_spec_ms(f, h200, carried_group(f, h200, "sglang"), 1.0, 32.0, 1.0,
                               np.random.default_rng(7), deployment_spread(f, h200, "sglang"))
        roof = P.pass_roofline(f, h200)[0] / P.pass_roofline(f, at["b300"])[0]
        return np.log(spec / (8 * (0.05 + 0.1 * roof + 0.002 * 32)))

    large = np.full(n, 1.4)
    transformer = log_spec(fit(None, large))
    np.testing.assert_allclose(log_spec(fit(30, large)) / transformer, np.hypot(0.3, 0.8) / 0.3)
    np.testing.assert_array_equal(deployment_spread(fit(30, large), h200, "sglang"), 0.8)
    # an effect the data do not separate from 0 (5% quantile below 0) in an engine that ran
    # both kinds, another engine, a transformer: the system scatter alone
    unsure = np.linspace(-0.5, 2.0, n)
    assert deployment_spread(fit(30, unsure), h200, "sglang") is None
    assert deployment_spread(fit(30, large), h200, "vllm") is None
    assert deployment_spread(fit(None, large), h200, "sglang") is None
    np.testing.assert_allclose(log_spec(fit(30, unsure)), transformer)
    # the engine ran hybrids only: its effect is the prior's, not told from its own effect
    hybrids_only = fit(30, unsure, kinds=(True,))
    np.testing.assert_array_equal(deployment_spread(hybrids_only, h200, "sglang"), 0.8)
    np.testing.assert_allclose(log_spec(hybrids_only) / transformer, np.hypot(0.3, 0.8) / 0.3)
    # a transformer group a validation fold holds out told the fit nothing: not separable
    held = fit(30, unsure)
    held.meta["held_out_rows"] = [r.row for r in held.measurements.rows
                                  if r.method == "ddtree"]
    np.testing.assert_array_equal(deployment_spread(held, h200, "sglang"), 0.8)
    _, how = P.step_components(fit(30, large), h200, np.random.default_rng(0), anchor=False)
    assert ("with the [transfer] system scatter and the groups' spread spec_fixed_log_sd, prior-driven: a "
            "hybrid target in sglang") in how


def test_a_carried_group_prices_another_drafter_and_next_carries_it_too():
    """A review: `--drafter` on a carried group divided by the new drafter's roofline on the
    reference GPUs, so a drafter 7.5x heavier cost nothing more; next and optimize, which mark
    a transferred system measured, drew the group from the population (next's 'now' 611
    (369-976) where predict said 626 (394-924))."""
    from ddtree_bayes.core.drafters import DrafterCard
    from ddtree_bayes.engine.structure import pass_roofline
    from ddtree_bayes.workflows.decisions.common import shared_components

    draws, at = transferable_point_mass()
    heavy = DrafterCard("heavy", "kimi-k2.6", ("ddtree",), "block", 8, 20.0, 0.0, 2.0, "test")
    h200_heavy = dataclasses.replace(at["h200"], drafter=heavy)
    parts, how = P.step_components(draws, h200_heavy, np.random.default_rng(0), anchor=False)
    factor = pass_roofline(draws, h200_heavy)[0] / pass_roofline(draws, at["b300"])[0]
    assert factor > 3
    assert parts["spec"] == pytest.approx(8 * (0.05 + 0.1 * factor + 0.002 * 32))
    # next / optimize's path (the transferred system added as a column, marked measured)
    plain, _ = P.step_components(draws, at["h200"], np.random.default_rng(0), anchor=False)
    shared, how = shared_components(draws, at["h200"], 20261130, anchor=False)
    assert "carried to h200x8" in how
    assert shared["spec"] == pytest.approx(plain["spec"])


def structured_multi_model_draws():
    """The point mass of Kimi K2.6 on 8x B300 and Llama-3.1-8B on one H100 in the structured
    form: one measured group, kimi-k2.6@b300x8/sglang/ddtree, ratios 0.05 / 0.1 / 0.002 of an
    8 ms AR step; population means exp(-3) per part, spreads 0, no transfer scatter."""
    from ddtree_bayes.engine.testing import multi_model_draws

    draws = multi_model_draws(
        moe_form="roofline", moe_distinct_exponent=[0.5, 0.5], compute_tok_ratio=[0.01, 0.01],
        spec_fixed_ratio=[0.05], spec_pass_ratio=[0.1], spec_tree_ratio=[0.002],
        structure_sd=0.04, transfer_system_sd=0.0, moe_distinct_exponent_mu=0.5,
        compute_eff_log_mu=-1.2, compute_eff_log_sd=0.0,
        **{f"spec_{p}_log_{s}": v for p in ("fixed", "pass", "tree")
           for s, v in (("mu", -3.0), ("sd", 0.0))})
    draws.meta["model"].update({"step_form": "structured", "knee": 3.0,
                                "methods": {"ddtree": {"passes": 1, "tree": True}}})
    return draws


def test_a_fit_of_several_models_carries_the_query_models_own_group_only():
    """A fit of several models drew the overhead of a pair it never measured from the
    population, even where the same model measured the same engine and method on another GPU
    (a fit of that model alone carried it): adding other models' rows made the answer wider.
    The query model's own measured group is now carried; another model's never is."""
    from ddtree_bayes.engine.structure import carried_group, pass_roofline

    draws = structured_multi_model_draws()

    def ask(model, hardware):
        return P.resolve_scenario(draws, hardware=hardware, gpus=8, engine="sglang",
                                  method="ddtree", block=16, budget=32, verify_tokens=None,
                                  context_tokens=0.0, model=model)

    kimi_h200, kimi_b300 = ask("kimi-k2.6", "h200"), ask("kimi-k2.6", "b300")
    assert carried_group(draws, kimi_h200, "sglang") == ("kimi-k2.6@b300x8/sglang/ddtree",
                                                         "b300", 8, "kimi-k2.6")
    parts, how = P.step_components(draws, kimi_h200, np.random.default_rng(0), anchor=False)
    assert "group kimi-k2.6@b300x8/sglang/ddtree carried to kimi-k2.6@h200x8" in how
    roof = pass_roofline(draws, kimi_h200)[0] / pass_roofline(draws, kimi_b300)[0]
    assert roof > 1.0
    # the B300 pair's AR step is 8 ms: 8 x (0.05 fixed + 0.1 x roof + 0.002 x 32 nodes)
    assert parts["spec"] == pytest.approx(8 * (0.05 + 0.1 * roof + 0.002 * 32))
    # Llama on 8x H200: Kimi's group is not its own; the population's ratios to its own AR
    # step (its pair roofline's), exp(-3) per part: fixed + 1 pass + 32 nodes
    from ddtree_bayes.engine.target_models import pair_parameters

    llama = ask("llama-3.1-8b-instruct", "h200")
    step_ar = pair_parameters(draws, llama, np.random.default_rng(0))[0]["step_ar_ms"]
    assert carried_group(draws, llama, "sglang") is None
    parts, how = P.step_components(draws, llama, np.random.default_rng(0), anchor=False)
    assert "drawn from the pooled population" in how
    assert parts["spec"] == pytest.approx(step_ar * np.exp(-3.0) * 34)


def test_a_deployment_card_of_a_measured_model_carries_its_group():
    """A held-out community rig (Qwen3.8-27B at IQ2_XXS on an RTX 3080, sudoingX/qwen38-mtp)
    was answered from the population, 37-53% too fast, though the fit measured the same
    model's llama.cpp MTP at Q4_K_M on three GPUs: a deployment card of a measured model (its
    name, or a sibling card of one the fit knows) runs the same drafter in the same engine,
    so its group is carried, priced with the measured pair's own drafter roofline."""
    from ddtree_bayes.engine.structure import carried_group, pass_roofline

    draws = structured_multi_model_draws()
    cards = draws.meta["model"]["model_cards"]
    cards["kimi-k2.6-int4"] = dict(cards["kimi-k2.6"], model="kimi-k2.6-int4")
    sc = P.resolve_scenario(draws, hardware="h200", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0,
                            model="kimi-k2.6-int4")
    assert carried_group(draws, sc, "sglang") == ("kimi-k2.6@b300x8/sglang/ddtree", "b300", 8,
                                                  "kimi-k2.6")
    parts, how = P.step_components(draws, sc, np.random.default_rng(0), anchor=False)
    assert "group kimi-k2.6@b300x8/sglang/ddtree carried to kimi-k2.6-int4@h200x8" in how
    b300 = dataclasses.replace(sc, hardware="b300", model="kimi-k2.6")
    roof = pass_roofline(draws, sc)[0] / pass_roofline(draws, b300)[0]
    # the B300 pair's AR step is 8 ms: 8 x (0.05 fixed + 0.1 x roof + 0.002 x 32 nodes)
    assert parts["spec"] == pytest.approx(8 * (0.05 + 0.1 * roof + 0.002 * 32))
    # and nothing then says nobody can run it (a reviewer: predict warned "no drafter card
    # serves kimi-k2.6-int4's ddtree and the fit measured none", next left the query out)
    from ddtree_bayes.engine.scenario import no_drafter

    assert no_drafter(draws, "kimi-k2.6-int4", "ddtree", ()) is None
    # a network named after the measured one but not it (a reviewer: deepseek-r1-distill-*
    # matched deepseek-r1 by name): another architecture, nothing carried
    cards["kimi-k2.6-distill"] = dict(cards["kimi-k2.6"], model="kimi-k2.6-distill",
                                      params_total_b=32.0, experts=None, experts_topk=None)
    distill = dataclasses.replace(sc, model="kimi-k2.6-distill")
    assert carried_group(draws, distill, "sglang") is None
    assert no_drafter(draws, "kimi-k2.6-distill", "ddtree", ()) is not None
    assert "no drafter card serves qwen3-8b's ddtree" in no_drafter(draws, "qwen3-8b", "ddtree", ())


def test_an_ar_question_in_an_engine_without_ar_rows_says_whose_rows_are_there():
    """An exploratory pass: Kimi K2.6 AR on 8x H200 read 73 tok/s in SGLang (the structural
    step) and 63 in vLLM (anchored to its one row), with nothing saying why. Borrowing the
    vLLM anchor was tried and reverted (engines differ at AR); the answer now says it is the
    structural step and what the other engine's AR rows measured."""
    draws = structured_point_mass()   # the bundled rows: SGLang AR 133 tok/s on 8x B300

    def how(engine):
        sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine=engine, method="ar",
                                block=None, budget=None, verify_tokens=None,
                                context_tokens=0.0)
        return P.step_components(draws, sc, np.random.default_rng(0))[1]

    assert how("sglang").endswith("anchored to the measured ar (M = 1, 1 row)")
    assert how("vllm").endswith(
        "; no vllm AR row on b300x8: the structural step, not anchored to the AR rows of "
        "another engine there (sglang 133 tok/s): the model has no AR engine term")


def _with_ar_row_at(draws, concurrency: int, tok_s: float):
    """``draws`` whose stored data gain one B300 SGLang AR row at ``concurrency``."""
    import dataclasses

    lines = draws.data_csv.rstrip("\n").split("\n")
    rows = [lines[0] + ",concurrency", *(ln + "," for ln in lines[1:]),
            f"kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,{tok_s},test,,{concurrency}"]
    return dataclasses.replace(draws, data_csv="\n".join(rows) + "\n", memo={})


def _ar_at(draws, concurrency, anchor=True):
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ar",
                            block=None, budget=None, verify_tokens=None, context_tokens=0.0,
                            concurrency=concurrency)
    return P.step_components(draws, sc, np.random.default_rng(0), anchor=anchor)


def test_an_answer_beside_a_measured_concurrency_carries_its_discrepancy():
    """Anchors were looked up at the query's own concurrency only: on a fit measured at C = 16
    an AR answer at C = 17 was the structural step while C = 16 carried its measured
    discrepancy, and per-user tok/s rose from C = 16 to C = 17 (32 -> 34 on a fit of the
    public Kimi K2.6 sweep). Beyond the largest measured C an answer carries the discrepancy
    of the nearest measured configuration (the distance is in C x M): C = 17 takes C = 16's
    residual r, and its discrepancy grows from there. Between two measured concurrencies the
    two are interpolated in log C (tests/test_anchor_concurrency.py): C = 15, between the
    bundled C = 1 row and C = 16, carries ``(1 - w) r_1 + w r_16``, w = log 15 / log 16, its
    distance the nearer end's. By hand, point mass without noise."""
    draws = _with_ar_row_at(structured_point_mass(), 16, 700.0)
    z16 = math.log(700.0 / (1.0 * 1000.0 * 16))
    z1 = math.log(133.0 / 1000.0)
    structural = {c: _ar_at(draws, c, anchor=False)[0]["step"][0] for c in (1, 15, 16, 17)}
    r = z16 + math.log(structural[16])
    r1 = z1 + math.log(structural[1])
    assert abs(r) > 0.05 and abs(r - r1) > 0.05   # the rows sit off the model, unequally
    anchored = {c: _ar_at(draws, c) for c in (15, 16, 17)}
    assert anchored[16][0]["step"][0] == pytest.approx(math.exp(-z16))
    parts, how = anchored[17]
    assert parts["step"][0] == pytest.approx(structural[17] * math.exp(-r))
    assert how.endswith("anchored to the measured ar (M = 1, C = 16, 1 row)")
    w = math.log(15.0) / math.log(16.0)
    parts, how = anchored[15]
    assert parts["step"][0] == pytest.approx(structural[15] * math.exp(-((1 - w) * r1 + w * r)))
    assert how.endswith("anchored to the measured ar (M = 1, C = 1, 1 row) and ar (M = 1, "
                        "C = 16, 1 row), interpolated in concurrency")
    assert anchored[15][0]["log_sd"][0] == pytest.approx(0.04 * math.log(16 / 15))
    # per user (1000 / step) falls with C, and the total (C x per user) grows
    steps = [anchored[c][0]["step"][0] for c in (15, 16, 17)]
    assert steps[0] < steps[1] < steps[2]
    assert 15 / steps[0] < 16 / steps[1] < 17 / steps[2]
    # C = 1 keeps its own measured row (the bundled AR row), as before
    assert _ar_at(draws, 1)[1].endswith("anchored to the measured ar (M = 1, 1 row)")


def test_a_neighbour_at_distance_0_is_not_the_configuration_itself():
    """The distance (C x M, drafter passes) alone does not make a configuration: a DDTree tree
    of budget 8 verifies 9 tokens in one drafter pass at block 8 or block 16 alike, but only
    the measured block 8 is the configuration itself (its own error carried, normal run
    noise); block 16 is a neighbour at distance 0."""
    draws = structured_point_mass()

    def at(block):
        sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                method="ddtree", block=block, budget=8, verify_tokens=None,
                                context_tokens=0.0)
        return P.at_measured_configuration(draws, sc), P._nearest_measured(draws, sc)[1]

    assert at(8) == (True, 0.0)
    assert at(16) == (False, 0.0)


def test_a_measured_configuration_anchors_to_itself_with_a_neighbour_listed_first():
    """A review found the tie at distance 0 went to the first configuration listed: with a
    DDTree block-16 budget-8 row listed before the measured block-8 one, the block-8 answer
    was anchored to block 16's row (4.6 x 1000 / 320 = 14.375 ms) and lost its own error."""
    import dataclasses

    base = structured_point_mass()
    lines = base.data_csv.rstrip("\n").split("\n")
    lines.insert(1, "kimi-k2.6,b300,8,sglang,ddtree,16,8,9,4.6,,320,test,")
    draws = dataclasses.replace(base, data_csv="\n".join(lines) + "\n", memo={})
    rows = [r for r in draws.measurements.rows if r.method == "ddtree" and r.block == 8
            and r.budget == 8]
    z = float(np.mean([math.log(r.tok_s / (r.accept_len * 1000.0)) for r in rows]))
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=8, budget=8, verify_tokens=None, context_tokens=0.0)
    assert P.at_measured_configuration(draws, sc)
    parts, _ = P.step_components(draws, sc, np.random.default_rng(0))
    assert parts["step"][0] == pytest.approx(math.exp(-z))       # its own row, not 14.375


def test_an_anchor_at_another_concurrency_says_its_c():
    """An answer at C = 8 anchored to a C = 1 configuration named it as if at C = 8's own."""
    draws = structured_point_mass()
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0,
                            concurrency=8)
    assert P.step_components(draws, sc, np.random.default_rng(0))[1].endswith(
        "anchored to the measured ddtree block 8 budget 8 (M = 9, C = 1, 1 row)")
    sc1 = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                             block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    assert P.step_components(draws, sc1, np.random.default_rng(0))[1].endswith(
        "anchored to the measured ddtree block 8 budget 8 (M = 9, 1 row)")


def test_two_single_gpus_take_no_interconnect_factor():
    """A single GPU now takes a single-GPU reference of any interconnect (commit 49940b1), but
    ATTN_BASE still took interconnect_factor ** +-1 (median 1.4, 'tensor-parallel all-reduces
    over PCIe are slower') between an RTX 3090 and an H200, one GPU each, which run no
    collectives (a review). The point mass moved to one RTX 3090: the H200's step is the same
    whatever the factor."""
    import dataclasses

    base = point_mass_draws()
    csv = base.data_csv.replace(",b300,8,", ",rtx-3090,1,")
    meta = {**base.meta, "coords": {**base.meta["coords"], "system": ["rtx-3090x1"],
                                    "overhead_group": ["rtx-3090x1/sglang/ddtree"]}}

    def h200(factor):
        variables = {**base.variables,
                     "transfer_interconnect_factor": np.full(base.n_draws, factor),
                     "transfer_bandwidth_elasticity": np.full(base.n_draws, 0.5),
                     "transfer_system_sd": np.zeros(base.n_draws)}
        draws = dataclasses.replace(base, data_csv=csv, meta=meta, variables=variables, memo={})
        sc = P.resolve_scenario(draws, hardware="h200", gpus=1, engine="sglang", method="ar",
                                block=None, budget=None, verify_tokens=None, context_tokens=0.0)
        return P.step_components(draws, sc, np.random.default_rng(0), anchor=False)

    (one, how), (other, _) = h200(1.4), h200(1.0)
    assert one["step"][0] == pytest.approx(other["step"][0])
    assert "transferred from rtx-3090x1 (one GPU each, no interconnect factor" in how


def test_an_unmeasured_gpu_without_a_peak_says_its_compute_knee_is_assumed():
    """A GPU added without its peak FLOPs (`hardware add` notes it once, then) was priced at
    bandwidth x 200 FLOP/B with nothing said by predict: an H20-like row (4 TB/s, its 148
    bf16 TFLOPS left out) was answered 1973 tok/s total at C = 64 (Llama-3.1-70B AWQ from 2 x
    A40; 710 with the peak), an assumed 800 TFLOPS. Now the answer's note says the peak is
    assumed. Kimi K2.6's card (32 B active, none of them its input embedding: embed_params_b
    0; bf16 compute: 64 GFLOP a token) on 8 GPUs of 8 TB/s and no peak: 1600 TFLOPS each,
    0.005 ms a token; at efficiency exp(-1.2) and MOE(1) = 4 ms the compute ratio is 0.005 /
    exp(-1.2) / 4."""
    import math

    from ddtree_bayes.core.model_cards import ModelCard
    from ddtree_bayes.engine.unmeasured import roofline_parameters

    draws = structured_point_mass(compute_eff_log_mu=-1.2, compute_eff_log_sd=0.0)
    card = ModelCard(**draws.meta["model"]["card"])
    row = {"hardware": "nopeak", "mem_bw_tb_s": "8", "interconnect": "NVLink5"}
    params, how = roofline_parameters(draws, card, row, 8, np.full(draws.n_draws, 4.0),
                                      np.random.default_rng(0))
    flop_ms = 2 * 32e9 / (8 * 1600e12) * 1e3
    assert flop_ms == pytest.approx(0.005)
    assert params["tok_ratio"][0] == pytest.approx(flop_ms / math.exp(-1.2) / 4.0)
    assert ("the compute peak is assumed: no peak FLOPs for nopeak in the hardware table, "
            "1600 TFLOPS = bandwidth x 200 FLOP/B (prior-driven; fix: its dense_bf16_tflops "
            "in data/hardware.csv)") in how
    _, given = roofline_parameters(draws, card, {**row, "dense_bf16_tflops": "2250"}, 8,
                                   np.full(draws.n_draws, 4.0), np.random.default_rng(0))
    assert "assumed" not in given


def test_between_two_measured_contexts_the_anchor_is_interpolated():
    """h6's property tests (2026-12-05): between two measured contexts a question was anchored
    to the nearer one's residual, so the answer jumped at the midpoint (the public corpus:
    Qwen3.5-397B AR on 4x RTX PRO 6000 Server, 75.07 tok/s at 98304 tokens, 76.55 at 98305,
    faster than at 131072). Here the structured point mass (4000 draws, run sd 0.02, structure
    sd 0.05) with SGLang AR on 8x B300 measured at context 0 (133 tok/s) and at 65536 (150,
    far above the model's step there): before, 117.96 tok/s at 32767 and 164.5 at 32769; now
    the two anchors are interpolated linearly in context, drawn from one stream, so the
    answer is continuous (32767 and 32769 within 0.1%) and equals each end's at the measured
    contexts themselves."""
    from ddtree_bayes.engine.question import Flags, resolve
    from test_engine_effects import structured_engine_fit

    d = structured_engine_fit(4000)
    d.variables["noise_sd"] = np.full(d.n_draws, 0.02)
    d.variables["structure_sd"] = np.full(d.n_draws, 0.05)
    ar = next(ln for ln in d.data_csv.splitlines()
              if ln.startswith("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,133,"))
    d = d.view(data_csv=d.data_csv + ar.replace(",,133,", ",65536,150,", 1) + "\n")

    def at(context):
        q = resolve(d, Flags(engines=("sglang",), method="ar", context=str(context), accept="1"))
        with np.errstate(all="ignore"):
            return P.predict_rows(d, q)[0]

    left, right = at(32767), at(32769)
    assert right["median"] == pytest.approx(left["median"], rel=1e-3)
    assert "interpolated in context" in left["overhead_from"]
    assert "at context 0) and ar (M = 1, 1 row, at context 65536)" in left["overhead_from"]
    assert "interpolated" not in at(65536)["overhead_from"]   # (a measured context: itself)
    assert "interpolated" not in at(70000)["overhead_from"]   # (outside: the nearest)
    # halfway, the shift is the two anchors' mean: between the two ends' answers
    ends = sorted((at(0)["median"], at(65536)["median"]))
    assert ends[0] < at(32768)["median"] < ends[1]


@pytest.mark.parametrize("other_at, own_also_at", [(65536, None), (65536, 131072)])
def test_a_measured_deployment_is_not_interpolated_with_another_shape(other_at, own_also_at):
    """The context bracket took the measured contexts of any draft shape, so a question of a
    measured deployment was interpolated between its own row and another shape's: DDTree
    budget 8 (measured at context 0, with run_sd 0.03 and config_sd 0.02) and a budget-16 row
    at 65536 gave log_sd 0.0326 at 32768 and 0.0382 at 32769 (its own error dropped past the
    midpoint), and with budget 8 measured at 131072 too, at 65536 it was anchored to the
    budget-16 row alone (log_sd 0.0441). The contexts of the query's own deployment, when it
    has any, are the ones it is anchored and bracketed by: at distance 0 its log_sd is run_sd
    alone (0.03) everywhere, and measured at one context only, each draw's step is the
    measured one's times the structural step's ratio."""
    draws = structured_point_mass(run_sd=0.03, config_sd=0.02)
    extra = f"kimi-k2.6,b300,8,sglang,ddtree,16,16,17,6.0,{other_at},300,test,\n"
    if own_also_at is not None:
        extra += f"kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,{own_also_at},150,test,\n"
    draws = dataclasses.replace(draws, data_csv=draws.data_csv + extra, memo={})

    def asked(ctx):
        return P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                  method="ddtree", block=8, budget=8, verify_tokens=None,
                                  context_tokens=ctx)

    def step(ctx, anchor=True):
        return P.step_components(draws, asked(ctx), np.random.default_rng(0), anchor=anchor)

    itself = step(0.0)[0]["step"]
    for ctx in (32768.0, 32769.0, 65535.0, 65536.0, 98304.0):
        parts, how = step(ctx)
        assert "budget 16" not in how, (ctx, how)
        assert P.carries_own_error(draws, asked(ctx)), ctx
        assert parts["log_sd"] == pytest.approx(np.full(draws.n_draws, 0.03)), ctx
        if own_also_at is None:   # its one measured context anchors it everywhere
            ratio = step(ctx, False)[0]["step"] / step(0.0, False)[0]["step"]
            assert parts["step"] == pytest.approx(itself * ratio, rel=1e-9), ctx
            assert "(M = 9, 1 row, at context 0)" in how, how
        else:
            assert "interpolated in context" in how, how


def test_a_carried_groups_scatter_is_the_transfers_own_draw(monkeypatch):
    """A group carried to an unmeasured system scatters with the [transfer] system_sd, and it
    drew that parameter by its own copy of the transfer's rule (engine/structure.py
    ``carried_spec_ms``: the fit's ``transfer_system_sd`` draws, else the prior's) beside the
    transferred step's (engine/transfer.py). One rule now, ``transfer.transfer_draw``: the
    fit's draws where it learned them (the generator untouched), else the [transfer] prior's
    from the generator; the carried SPEC takes its scatter from it (a rule saying 0 gives the
    carried costs exactly, 8 x (0.05 + 0.1 x roof + 0.002 x 32) ms, where the fit's 0.3
    scatters them)."""
    from ddtree_bayes.core.sampling import prior_sample
    from ddtree_bayes.engine import structure
    from ddtree_bayes.engine import transfer as T
    from ddtree_bayes.engine.structure import carried_group, carried_spec_ms, pass_roofline

    draws, at = transferable_point_mass()
    n, h200 = draws.n_draws, at["h200"]
    rng = np.random.default_rng(5)
    assert T.transfer_draw(draws, "system_sd", rng) is draws.variables["transfer_system_sd"]
    assert rng.random() == np.random.default_rng(5).random()
    bare = dataclasses.replace(draws, memo={}, variables={
        k: v for k, v in draws.variables.items() if k != "transfer_system_sd"})
    np.testing.assert_array_equal(
        T.transfer_draw(bare, "system_sd", np.random.default_rng(5)),
        prior_sample(bare.priors.transfer["system_sd"], n, np.random.default_rng(5)))

    draws.variables.update(transfer_system_sd=np.full(n, 0.3))
    roof = pass_roofline(draws, h200)[0] / pass_roofline(draws, at["b300"])[0]
    exact = 8 * (0.05 + 0.1 * roof + 0.002 * 32)

    def spec():
        return carried_spec_ms(draws, h200, carried_group(draws, h200, "sglang"), 1.0, 32.0,
                               1.0, np.random.default_rng(7), None)

    assert not np.allclose(spec(), exact)   # (the fit's 0.3 scatters them)
    asked: list[str] = []

    def rule(d, name, rng):
        asked.append(name)
        return np.zeros(d.n_draws)

    monkeypatch.setattr(structure, "transfer_draw", rule)
    np.testing.assert_allclose(spec(), exact)
    assert asked == ["system_sd"]

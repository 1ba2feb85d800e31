"""The PyMC model built without sampling: variables, shapes, log-density at a known point."""

import math

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.engine.inference import reproducible_pytensor

reproducible_pytensor()
pm = pytest.importorskip("pymc")
from ddtree_bayes.engine.model import build_model  # noqa: E402


@pytest.fixture(autouse=True)
def fast_compile():
    """Compile test graphs with PyTensor's Python backend: seconds instead of numba's tens."""
    import pytensor

    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        yield


@pytest.fixture(scope="module")
def built(bundled_inputs):
    """The earlier default forms (power-law MoE, SPEC a fraction); the structured and
    roofline forms have their own hand-checked likelihood in tests/test_structure.py."""
    import dataclasses

    data, cfg = bundled_inputs
    cfg = dataclasses.replace(cfg, moe_form="power", step_form="fraction")
    spec = S.build_spec(data, cfg)
    return spec, cfg, build_model(spec, cfg)


def test_variables_and_shapes(built):
    spec, _, m = built
    free = {rv.name for rv in m.free_RVs}
    assert free == {"step_ar_ms", "moe_share", "moe_exponent_mu", "moe_hw_sd", "moe_z",
                    "ctx_ms_per_unit", "ctx_verify_exponent", "overhead_logit_mu",
                    "overhead_logit_sd", "overhead_z", "reduction", "noise_sd"}
    point = m.initial_point()
    assert point["step_ar_ms_log__"].shape == (2,)
    assert point["overhead_z"].shape == (2,)
    assert point["reduction_logodds__"].shape == (1,)
    assert [rv.name for rv in m.observed_RVs] == ["log_tok_s"]
    assert m.coords["measurement"] == tuple(str(r) for r in range(2, 11))
    assert {d.name for d in m.deterministics} == {"moe_exponent", "overhead_frac"}


def hand_point():
    """A hand-picked parameter point (constrained scale)."""
    return {"step_ar_ms": np.array([7.5, 11.0]), "moe_share": np.array([0.4, 0.3]),
            "moe_exponent_mu": 0.42, "moe_hw_sd": 0.05, "moe_z": np.array([0.5, -0.5]),
            "ctx_ms_per_unit": np.array([3.0, 3.3]), "ctx_verify_exponent": 0.6,
            "overhead_logit_mu": -1.5, "overhead_logit_sd": 0.3,
            "overhead_z": np.array([0.2, -0.4]), "reduction": np.array([0.4]),
            "noise_sd": 0.03}


def test_likelihood_matches_the_numpy_formula(built):
    spec, _, m = built
    p = hand_point()
    # transform to the sampler's unconstrained space
    ip = {}
    for rv in m.free_RVs:
        value_var = m.rvs_to_values[rv]
        tr = m.rvs_to_transforms[rv]
        x = np.asarray(p[rv.name], dtype=float)
        ip[value_var.name] = tr.forward(x).eval() if tr is not None else x
    loglik = m.compile_logp(vars=m.observed_RVs)(ip)
    # the same likelihood by hand with numpy
    expo = p["moe_exponent_mu"] + p["moe_hw_sd"] * p["moe_z"]
    frac = 1 / (1 + np.exp(-(p["overhead_logit_mu"] + p["overhead_logit_sd"] * p["overhead_z"])))
    s = spec.row_system
    target = S.target_ms(p["step_ar_ms"][s], p["moe_share"][s], expo[s],
                         p["ctx_ms_per_unit"][s], p["ctx_verify_exponent"], spec.verify_tokens,
                         spec.context_units, "power", np.exp, np.log)
    f_rows = np.concatenate([frac, [0.0]])[spec.row_group]
    step = S.step_ms(target, f_rows, 1.0)
    mu = np.log(spec.accept_len * 1000 / step)
    sd = p["noise_sd"]
    expected = np.sum(-0.5 * ((spec.log_tok_s - mu) / sd) ** 2 - np.log(sd)
                      - 0.5 * math.log(2 * math.pi))
    assert np.isfinite(loglik)
    assert loglik == pytest.approx(expected, rel=1e-9)
    # and the total log-density is finite at that point
    assert np.isfinite(m.compile_logp()(ip))


def test_row_weight_zero_removes_exactly_that_rows_likelihood(bundled_inputs):
    data, cfg = bundled_inputs
    spec = S.build_spec(data, cfg)
    m = build_model(spec, cfg, refittable=True)
    ip = m.initial_point()
    logp = m.compile_logp()
    full = logp(ip)
    (row_loglik,) = m.compile_logp(vars=[m["log_tok_s"]], sum=False)(ip)
    w = np.ones(len(spec.rows))
    w[1] = 0.0  # hold out the B300 DDTree row
    m.set_data("row_weight", w)
    held_out = m.compile_logp()(ip)
    assert full - held_out == pytest.approx(row_loglik[1], rel=1e-10)
    # new observed values change the likelihood without rebuilding the model
    m.set_data("row_weight", np.ones(len(spec.rows)))
    m.set_data("log_tok_s_observed", spec.log_tok_s + 0.01)
    assert m.compile_logp()(ip) != pytest.approx(full)


def test_prior_predictive_is_plausible(built):
    _, _, m = built
    with m:
        prior = pm.sample_prior_predictive(draws=500, random_seed=1)
    tok = np.exp(prior["prior_predictive"]["log_tok_s"].values.reshape(500, -1))
    # B300 AR row (first measurement): the prior must cover the measured 133 tok/s widely
    lo, hi = np.quantile(tok[:, 0], [0.05, 0.95])
    assert lo < 133 < hi
    assert 20 < lo and hi < 600


def test_linear_form_builds(bundled_inputs):
    import dataclasses

    data, cfg = bundled_inputs
    cfg_lin = dataclasses.replace(cfg, moe_form="linear")
    m = build_model(S.build_spec(data, cfg_lin), cfg_lin)
    names = {rv.name for rv in m.free_RVs}
    assert "moe_slope_mu" in names and "moe_exponent_mu" not in names
    assert np.isfinite(m.compile_logp()(m.initial_point()))

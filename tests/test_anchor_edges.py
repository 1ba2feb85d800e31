"""The anchor of a measured deployment between two measured contexts, at their edges
(engine/predictive.anchor_shift): one token of context inside a measured one answers what the
measured context does, draw by draw, and the interpolation does not narrow at the midpoint.

The fixture is the structured point mass with SGLang AR on 8x B300 measured at context 0 (133
tok/s) and at 65536 (150, far above the model's step there), run sd 0.02 and structure sd 0.05,
as in tests/test_structure_model.py's interpolation test: every draw has the same parameters, so
the anchor's spread is the posterior of each configuration's discrepancy alone, computable by
hand (:func:`_posterior`)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ddtree_bayes.core.likelihood import offsets
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.question import Flags, resolve
from test_engine_effects import structured_engine_fit

LO, HI = 0.0, 65536.0
RUN_SD, STRUCTURE_SD = 0.02, 0.05


def _fit(n: int = 4000, nu: float | None = None):
    d = structured_engine_fit(n)
    d.variables["noise_sd"] = np.full(d.n_draws, RUN_SD)
    d.variables["structure_sd"] = np.full(d.n_draws, STRUCTURE_SD)
    if nu is not None:   # a Student-t likelihood: the anchor is a scale mixture
        d.variables["likelihood_nu"] = np.full(d.n_draws, nu)
    ar = next(ln for ln in d.data_csv.splitlines()
              if ln.startswith("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,133,"))
    return d.view(data_csv=d.data_csv + ar.replace(",,133,", ",65536,150,", 1) + "\n")


def _ar(d, context: float):
    q = resolve(d, Flags(engines=("sglang",), method="ar", context=str(context), accept="1"))
    return q.asked[0].scenario


def _posterior(d, context: float) -> tuple[float, float, float | None]:
    """By hand, the AR configuration measured at ``context``: its discrepancy given its one
    row's residual r is Normal(A r / T, A - A^2 / T), A = (0.05 d_c)^2 (d_c = log 9: the
    DDTree rows' M = 9 is the nearest other point), T = A + 0.02^2; under a Student-t
    likelihood that variance is divided by a Gamma((nu + 1) / 2, scale 2 / (nu + r^2 / T))
    weight (the scale returned; None: normal). (mean, normal variance, scale)."""
    sc = _ar(d, context)
    rows = [r for r in d.measurements.rows if r.method == "ar" and r.engine == "sglang"
            and (r.context_tokens or 0.0) == context]
    assert len(rows) == 1
    with np.errstate(all="ignore"):
        step = float(P.step_components(d, sc, np.random.default_rng(0), anchor=False)[0]["step"][0])
    r = float(np.log(rows[0].tok_s) - offsets(rows)[0]) + math.log(step)
    a = (STRUCTURE_SD * math.log(9.0)) ** 2
    total = a + RUN_SD ** 2
    nu = d.variables.get("likelihood_nu")
    scale = None if nu is None else 2.0 / (float(nu[0]) + r ** 2 / total)
    return a / total * r, a - a ** 2 / total, scale


def _sd(d, context: float) -> float:
    """By hand, the sd of the anchor at a measured context: sqrt(var) with a normal
    likelihood; with a Student-t one sqrt(var x E[1 / weight]) = sqrt(var / (scale (k - 1))),
    k = (nu + 1) / 2."""
    _, var, scale = _posterior(d, context)
    if scale is None:
        return math.sqrt(var)
    k = (float(d.variables["likelihood_nu"][0]) + 1.0) / 2.0
    return math.sqrt(var / (scale * (k - 1.0)))


@pytest.mark.parametrize("nu", [None, 4.0])
def test_a_measured_context_draws_its_own_stream_unchanged(nu):
    """At a measured context the anchor is that configuration's own draws, from the stream keyed
    by it (``keyed_rng(ANCHOR_SEED, repr(config))``: a Gamma weight first under a Student-t
    likelihood, then the standard normals), mean + sqrt(var) z, digit for digit what predict
    drew before the edges were joined."""
    d = _fit(nu=nu)
    for context in (LO, HI):
        sc = _ar(d, context)
        mean, var, scale = _posterior(d, context)
        config = (sc.pair, "sglang", "ar", 1, context, None, None, 1, True)
        rng = P.keyed_rng(P.ANCHOR_SEED, repr(config))
        if scale is not None:
            var = var / rng.gamma((nu + 1.0) / 2.0, np.full(d.n_draws, scale))
        expected = mean + np.sqrt(var) * rng.standard_normal(d.n_draws)
        shift, distance, label = P.anchor_shift(d, sc)
        np.testing.assert_allclose(shift, expected, rtol=1e-12, atol=1e-15)
        assert distance == 0.0 and "interpolated" not in label


@pytest.mark.parametrize("nu", [None, 4.0])
def test_one_token_inside_a_measured_context_answers_as_it_draw_by_draw(nu):
    """One token inside the bracket the answer is the measured context's own, draw by draw
    (within 0.01%: the structural step moves by ~4e-6 a token, the interpolation weight by
    1/65536). Before, the two ends were drawn from a stream keyed by the bracket, not by the
    measured context: the anchored AR step at context 1 differed from context 0's by up to 9%
    in a draw (24% with nu = 4), and its median / 5% / 95% by 0.04-0.19%."""
    d = _fit(nu=nu)
    for edge, inside in ((LO, LO + 1), (HI, HI - 1)):
        at_edge, near = (P.anchor_shift(d, _ar(d, c))[0] for c in (edge, inside))
        assert np.max(np.abs(near - at_edge)) < 1e-4
        # the anchored step (same generator for the rest), each draw and its quantiles
        with np.errstate(all="ignore"):
            steps = [P.step_components(d, _ar(d, c), np.random.default_rng(1))[0]["step"]
                     for c in (edge, inside)]
        assert np.max(np.abs(steps[1] / steps[0] - 1.0)) < 1e-4
        qs = [np.quantile(1000.0 / s, [0.05, 0.5, 0.95]) for s in steps]
        np.testing.assert_allclose(qs[1], qs[0], rtol=1e-4)


def test_one_token_inside_a_measured_context_the_predictive_quantiles_agree():
    """The predictive draws with run noise, from the same generator at both contexts (as
    predict draws them: its key, scenario_key, leaves the context out, so one configuration's
    answers at every context share their noise), median and 90% interval within 0.01%."""
    d = _fit()
    for edge, inside in ((LO, LO + 1), (HI, HI - 1)):
        with np.errstate(all="ignore"):
            draws = [P._per_token(d, None, _ar(d, c), P.keyed_rng(7, "edge"))[0]
                     for c in (edge, inside)]
        qs = [np.quantile(x, [0.05, 0.5, 0.95]) for x in draws]
        np.testing.assert_allclose(qs[1], qs[0], rtol=1e-4)


@pytest.mark.parametrize("nu", [None, 4.0])
def test_the_midpoint_is_not_narrower_than_its_ends(nu):
    """Halfway, the two ends' discrepancies are drawn from one rotated set of standard draws,
    so they move together: the mix's sd is the mean of the ends' (normal: both 0.0197, their
    A = 0.0121 >> 0.02^2; nu = 4: 0.0226 at 0 and 0.0477 at 65536, whose residual is far off
    the model), not the sqrt(sd_lo^2 + sd_hi^2) / 2 of the mean of two independent draws
    (0.0139; 0.0264)."""
    d = _fit(n=20000, nu=nu)
    lo, hi = _sd(d, LO), _sd(d, HI)
    for context, sd in ((LO, lo), (HI, hi)):   # the hand sds are the draws' at the ends
        assert np.std(P.anchor_shift(d, _ar(d, context))[0]) == pytest.approx(sd, rel=0.05)
    mid = float(np.std(P.anchor_shift(d, _ar(d, (LO + HI) / 2))[0]))
    assert mid == pytest.approx((lo + hi) / 2, rel=0.05)
    assert mid >= 0.95 * min(lo, hi)
    assert mid > 1.15 * math.hypot(lo, hi) / 2


def test_rotated_gamma_weights_keep_their_distribution_and_their_ends():
    """The Student-t weights between two ends (_rotated_draws): Gamma(k) at every angle (mean
    and variance k: halfway, of 200000 draws, within 2%), each end's own draws at 0 and pi / 2
    (to 1e-12), and the normals cos(theta) z_lo + sin(theta) z_hi."""
    rng = np.random.default_rng(3)
    k, n = 2.5, 200_000
    lo = (rng.standard_gamma(k, n), rng.standard_normal(n))
    hi = (rng.standard_gamma(k, n), rng.standard_normal(n))
    np.testing.assert_allclose(P._rotated_draws(lo, hi, k, 0.0)[0], lo[0], rtol=1e-12)
    np.testing.assert_allclose(P._rotated_draws(lo, hi, k, math.pi / 2)[0], hi[0], rtol=1e-12)
    gamma, z = P._rotated_draws(lo, hi, k, math.pi / 4)
    assert gamma.mean() == pytest.approx(k, rel=0.02) and gamma.var() == pytest.approx(k, rel=0.02)
    np.testing.assert_allclose(z, (lo[1] + hi[1]) / math.sqrt(2.0), rtol=1e-12, atol=1e-15)
    assert abs(np.corrcoef(gamma, lo[0])[0, 1] - np.corrcoef(gamma, hi[0])[0, 1]) < 0.02
    assert P._rotated_draws((None, lo[1]), (None, hi[1]), None, 0.3)[0] is None

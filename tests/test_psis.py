"""Pareto-smoothed importance sampling (engine/psis.py): cases whose weights are known by
hand, the shape k of importance ratios whose tail is known exactly, and agreement with
ArviZ's implementation (arviz_stats) and its ESS."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ddtree_bayes.engine import psis as Ps


def test_equal_ratios_give_uniform_weights():
    r = Ps.psis(np.full(500, 3.7))
    np.testing.assert_allclose(r.weights, 1 / 500, rtol=1e-12)
    assert r.k == -math.inf and r.ess == pytest.approx(500) and r.tail_len == 68  # 3 sqrt(500)


def test_too_few_draws_leave_the_raw_ratios():
    """S = 20: a tail of ceil(min(4, 13.4)) = 4 < 5 draws is not fitted; the weights are
    the ratios 1..20 over their sum (210), and k is reported as unknown (inf)."""
    r = Ps.psis(np.log(np.arange(1.0, 21.0)))
    np.testing.assert_allclose(r.weights, np.arange(1.0, 21.0) / 210.0, rtol=1e-12)
    assert r.k == math.inf and r.tail_len == 0
    assert r.ess == pytest.approx(210.0 ** 2 / sum(i * i for i in range(1, 21)))


def test_tail_length_and_threshold_follow_the_paper():
    assert Ps.tail_length(4000) == 190 and Ps.tail_length(100) == 20
    assert Ps.tail_length(4000, r_eff=0.5) == 269          # ceil(3 sqrt(8000))
    assert Ps.khat_threshold(4000) == 0.7
    assert Ps.khat_threshold(100) == pytest.approx(0.5)       # 1 - 1/log10(100)


def test_smoothed_tail_is_the_fitted_quantiles_truncated_at_the_largest_ratio():
    """The tail's weights are exactly cutoff + GPD quantiles at (z - 1/2)/M, capped at the
    largest raw ratio; the body is untouched."""
    rng = np.random.default_rng(5)
    lr = rng.standard_normal(400) * 1.5
    r = Ps.psis(lr)
    m = Ps.tail_length(400)
    order = np.argsort(lr)
    shifted = lr - lr.max()
    cutoff = math.exp(shifted[order[-m - 1]])
    k, sigma = Ps.gpd_fit(np.exp(shifted[order[-m:]]) - cutoff)
    assert k == r.k
    expected = np.minimum(np.log(Ps.gpd_quantile((np.arange(1, m + 1) - 0.5) / m, k, sigma)
                                 + cutoff), 0.0)
    lw = r.log_weights + (math.log(np.sum(np.exp(np.concatenate(
        [shifted[order[:-m]], expected])))))
    np.testing.assert_allclose(lw[order[-m:]], expected, atol=1e-12)
    np.testing.assert_allclose(lw[order[:-m]], shifted[order[:-m]], atol=1e-12)


@pytest.mark.parametrize("k_true", [0.3, 0.6, 0.9])
def test_k_of_an_exact_pareto_tail(k_true):
    """log ratio = k E with E ~ Exponential(1): P(ratio > t) = t^(-1/k) exactly, a Pareto
    tail of shape k. 100,000 draws fit 949 tail draws (sd of k about 0.05-0.06)."""
    lr = k_true * np.random.default_rng(7).exponential(size=100_000)
    r = Ps.psis(lr)
    assert r.tail_len == 949 and abs(r.k - k_true) < 0.12
    assert (r.k > Ps.khat_threshold(lr.size)) == (k_true > 0.7)


def test_reweighting_a_normal_to_a_wider_normal():
    """Proposal N(0, 1), target N(0, 2): ratios exp(x^2 / 4) / sqrt(2), a tail of shape
    1 - 1/2 (Vehtari et al. 2024, section 3): the weights recover E[x^2] = 2."""
    x = np.random.default_rng(11).standard_normal(100_000)
    r = Ps.psis(0.25 * x ** 2 - 0.5 * math.log(2.0))
    assert 0.3 < r.k < 0.7
    assert float(np.sum(r.weights * x ** 2)) == pytest.approx(2.0, rel=0.03)


def test_matches_arviz_stats():
    from arviz_stats.base.array import array_stats

    rng = np.random.default_rng(1)
    for n in (100, 1000, 4000):
        for scale in (0.3, 1.0, 2.5):
            lr = rng.standard_normal(n) * scale + 0.1 * rng.standard_t(3, n)
            ours = Ps.psis(lr)
            theirs, k = array_stats._ps_tail(lr, n, ours.tail_len, smooth_draws=True,
                                             tail="right", log_weights=True)
            assert ours.k == pytest.approx(k, abs=1e-12)
            np.testing.assert_allclose(ours.log_weights, theirs, atol=1e-12)


def test_ess_mean_matches_arviz_stats():
    from arviz_stats.base.array import array_stats

    rng = np.random.default_rng(3)
    for chains, draws, phi in ((4, 1000, 0.0), (4, 1000, 0.9), (2, 51, 0.5), (1, 300, -0.5),
                               (4, 154, 0.7), (3, 1001, 0.95), (4, 200, 0.3), (2, 77, 0.8),
                               (4, 500, 0.5), (3, 123, 0.2), (4, 98, 0.6), (2, 333, 0.9)):
        e = rng.standard_normal((chains, draws))
        x = np.zeros_like(e)
        for t in range(draws):
            x[:, t] = phi * (x[:, t - 1] if t else 0.0) + e[:, t]
        x = np.exp(x / 3)
        expected = array_stats.ess(x, method="mean", chain_axis=0, draw_axis=1)
        # (core.convergence: to the bit; before, gates.geyer_ess, 2 of these 12 an ulp or two off)
        assert Ps.ess_mean(x) == float(expected), (chains, draws, phi)
    assert Ps.ess_mean(np.ones((4, 100))) == 400


def test_stratified_resample_by_hand():
    """Weights 1/2, 1/4, 1/4 and 4 strata [0, 1/4) ... [3/4, 1): the first two uniforms fall
    below 1/2 (index 0), the third in [1/2, 3/4) (index 1), the last in [3/4, 1) (index 2),
    whatever the seed."""
    for seed in range(5):
        idx = Ps.stratified_resample(np.array([0.5, 0.25, 0.25]), 4, np.random.default_rng(seed))
        assert sorted(idx.tolist()) == [0, 0, 1, 2]
    w = np.random.default_rng(0).dirichlet(np.ones(50))
    counts = np.bincount(Ps.stratified_resample(w, 1000, np.random.default_rng(1)), minlength=50)
    assert counts.sum() == 1000
    assert np.all(counts >= np.floor(1000 * w) - 1) and np.all(counts <= np.ceil(1000 * w) + 1)


def test_bad_ratios_are_refused():
    with pytest.raises(ValueError, match="finite"):
        Ps.psis(np.array([0.0, np.nan, 1.0]))

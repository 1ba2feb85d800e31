"""Pareto-smoothed importance sampling (PSIS) and importance resampling, numpy only.

Follows Vehtari, Simpson, Gelman, Yao and Gabry (2024), "Pareto smoothed importance
sampling", Journal of Machine Learning Research 25(72):1-58 (arXiv:1507.02646), as the R
package ``loo`` and ArviZ implement it:

1. shift the log importance ratios by their maximum;
2. take the ``M = ceil(min(0.2 S, 3 sqrt(S / r_eff)))`` largest of the S ratios as the tail;
3. fit a generalized Pareto distribution to the tail's excesses over the largest non-tail
   ratio, with the empirical Bayes estimate of Zhang and Stephens (2009, Technometrics 51(3))
   and the weakly informative prior that shrinks k towards 0.5 (``(M k + 10 * 0.5) / (M + 10)``);
4. replace the tail ratios by the fitted distribution's quantiles at ``(z - 1/2) / M``,
   z = 1..M (in the tail's order), truncated at the largest raw ratio; normalise.

The fitted shape ``k`` is the diagnostic: the estimate is reliable for
``k < min(1 - 1 / log10(S), 0.7)`` (the paper's sample-size-dependent threshold, capped at
0.7: above it the draws needed grow impractically fast). :func:`khat_threshold` computes it.

Nothing here imports ArviZ: ``arviz_stats`` costs ~2.5 s of imports (xarray, pandas), more
than the whole reweighting ``update``; tests/test_psis.py checks this implementation against
``arviz_stats``'s ``_ps_tail`` to 1e-12.

>>> r = psis(np.zeros(1000))                   # target = proposal: uniform weights
>>> round(float(r.weights.sum()), 12), round(r.ess, 9), r.k
(1.0, 1000.0, -inf)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Weight of the prior on k (pseudo-observations at k = 0.5), as in the paper and loo.
PRIOR_K_N, PRIOR_K = 10.0, 0.5
#: Scale of the Zhang-Stephens grid (their "prior" of 3), as in loo.
GRID_PRIOR = 3.0
#: Fewest tail draws a Pareto fit is attempted with.
MIN_TAIL = 5


@dataclass(frozen=True)
class PsisResult:
    """Smoothed, normalised weights and the diagnostics of one PSIS run."""

    log_weights: np.ndarray   # normalised: logsumexp == 0
    k: float                  # Pareto shape of the tail; inf if it could not be fitted
    tail_len: int             # draws in the fitted tail (0 if none was fitted)

    @property
    def weights(self) -> np.ndarray:
        return np.exp(self.log_weights)

    @property
    def ess(self) -> float:
        """Importance-sampling effective sample size ``1 / sum(w^2)`` of the normalised
        weights (Kish), counting the draws as independent."""
        return float(1.0 / np.sum(self.weights ** 2))


def khat_threshold(n_draws: int) -> float:
    """Largest trustworthy Pareto k for S draws: ``min(1 - 1/log10(S), 0.7)``
    (Vehtari et al. 2024, section 3).

    >>> round(khat_threshold(4000), 3), round(khat_threshold(1000), 3)
    (0.7, 0.667)
    """
    return min(1.0 - 1.0 / math.log10(n_draws), 0.7)


def tail_length(n_draws: int, r_eff: float = 1.0) -> int:
    """Draws in the fitted tail: ``ceil(min(0.2 S, 3 sqrt(S / r_eff)))``.

    >>> tail_length(4000), tail_length(100)
    (190, 20)
    """
    return int(math.ceil(min(0.2 * n_draws, 3.0 * math.sqrt(n_draws / r_eff))))


def _logsumexp(x: np.ndarray) -> float:
    m = float(np.max(x))
    return m + math.log(float(np.sum(np.exp(x - m))))


def gpd_fit(excess: np.ndarray) -> tuple[float, float]:
    """(k, sigma) of a generalized Pareto distribution fitted to sorted positive
    ``excess`` values: Zhang and Stephens' (2009) empirical Bayes estimate, with the weakly
    informative prior on k of Vehtari et al. (2024). (nan, nan) when the first quartile of
    the excesses equals their minimum (far from a Pareto tail)."""
    x = np.asarray(excess, dtype=float)
    n = x.size
    m = 30 + int(math.sqrt(n))
    xstar = x[int(n / 4 + 0.5) - 1]              # first quartile
    if xstar <= x[0]:
        return math.nan, math.nan
    theta = 1.0 / x[-1] + (1.0 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))) / (GRID_PRIOR * xstar)
    k_theta = np.mean(np.log1p(-theta[:, None] * x[None, :]), axis=1)
    log_lik = n * (np.log(-theta / k_theta) - k_theta - 1.0)   # profile log-likelihood
    w = np.exp(log_lik - _logsumexp(log_lik))
    keep = w >= 10 * np.finfo(float).eps
    w, theta = w[keep] / np.sum(w[keep]), theta[keep]
    theta_hat = float(np.sum(theta * w))
    k = float(np.mean(np.log1p(-theta_hat * x)))
    sigma = -k / theta_hat
    return (n * k + PRIOR_K_N * PRIOR_K) / (n + PRIOR_K_N), sigma


def gpd_quantile(p: np.ndarray, k: float, sigma: float) -> np.ndarray:
    """Quantiles of a generalized Pareto distribution with location 0."""
    if not sigma > 0:
        return np.full_like(p, np.nan)
    if k == 0:
        return -sigma * np.log1p(-p)
    return sigma * np.expm1(-k * np.log1p(-p)) / k


def psis(log_ratios: np.ndarray, r_eff: float = 1.0, tail_len: int | None = None) -> PsisResult:
    """Pareto-smooth the importance ratios ``exp(log_ratios)`` of S draws (1-D).

    ``r_eff`` is the relative efficiency of the draws (1: independent) and only sets the
    tail length; ``tail_len`` overrides it. ``k`` is ``-inf`` when every tail ratio is the
    same (bounded weights: nothing to smooth) and ``inf`` when the tail could not be fitted
    (too few draws, or non-finite ratios): both leave the raw ratios, truncated at their
    maximum."""
    lr = np.asarray(log_ratios, dtype=float).ravel()
    n = lr.size
    if n == 0 or not np.all(np.isfinite(lr)):
        raise ValueError("log importance ratios must be finite and non-empty")
    top = float(np.max(lr))
    lw = lr - top
    m = tail_length(n, r_eff) if tail_len is None else int(tail_len)
    k = math.inf
    if m < MIN_TAIL or m >= n:
        m = 0
    else:
        order = np.argsort(lw, kind="stable")
        tail_idx = order[n - m:]
        tail = lw[tail_idx]
        cutoff = lw[order[n - m - 1]]             # largest ratio below the tail
        if tail[-1] - tail[0] < np.finfo(float).tiny:
            k = -math.inf
        else:
            exp_cut = math.exp(cutoff)
            k, sigma = gpd_fit(np.exp(tail) - exp_cut)
            if math.isfinite(k):
                p = (np.arange(1, m + 1) - 0.5) / m
                smoothed = np.log(gpd_quantile(p, k, sigma) + exp_cut)
                lw[tail_idx] = np.minimum(smoothed, 0.0)   # truncate at the largest raw ratio
            else:
                k = math.inf
    return PsisResult(log_weights=lw - _logsumexp(lw), k=k, tail_len=m)


def stratified_resample(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draw indices with probabilities ``weights`` (summing to 1), one uniform per
    stratum ``[i / n, (i + 1) / n)`` of the cumulative weights (Kitagawa 1996; the default
    of the R package ``posterior``'s ``resample_draws``): less resampling noise than
    multinomial draws: each index appears ``floor(n w) - 1`` to ``ceil(n w) + 1`` times.
    Returned in random order (so the draws are not sorted by index).

    >>> np.sort(stratified_resample(np.array([0.5, 0.25, 0.25]), 4, np.random.default_rng(0)))
    array([0, 0, 1, 2])
    """
    cum = np.cumsum(np.asarray(weights, dtype=float))
    cum[-1] = 1.0
    u = (np.arange(n) + rng.uniform(size=n)) / n
    idx = np.minimum(np.searchsorted(cum, u, side="right"), cum.size - 1)
    return rng.permutation(idx)


def ess_mean(x: np.ndarray) -> float:
    """Effective sample size of the mean of MCMC draws ``x`` (chains, draws): split chains,
    multi-chain autocovariance, Geyer's initial positive and monotone sequences (Vehtari,
    Gelman, Simpson, Carpenter, Buerkner 2021, Bayesian Analysis 16(2), eq. 10-11): ArviZ's
    ``ess(method="mean")`` to the bit (core.convergence, which a fit's diagnostics come from;
    tests/test_psis.py compares them); NaN for fewer than 4 draws or a NaN draw, as ArviZ's."""
    from ddtree_bayes.core.convergence import ess_mean

    return ess_mean(x)

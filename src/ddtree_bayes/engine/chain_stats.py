"""R-hat, bulk and tail ESS and the MCSE of the mean, as arviz-stats computes them, bit for bit.

``inference.diagnose`` stores, per scalar parameter, arviz-stats' defaults: ``rhat``
(rank-normalised split R-hat, the larger of bulk and folded), ``ess(method="bulk")``,
``ess(method="tail")`` (the smaller ESS of the indicators below its two quantiles at
``stats.ci_prob``) and ``mcse`` (of the mean). Importing arviz-stats imports scipy.stats and
every submodule of arviz-stats (~0.4-0.6 s of a warm fit, docs/performance.md); this module
is the same arithmetic, operation for operation, on numpy and ``scipy.special.ndtri`` (which
PyMC has imported already), so the stored diagnostics are the same numbers to the last bit
(tests/test_chain_stats.py compares them with arviz-stats'). The ranks are exact (halves of
integers) however they are computed; everything else follows arviz-stats' own code
(arviz_stats/base/diagnostics.py and core.py, arviz-stats 1.x).

Each function takes one parameter's draws as a (chain, draw) array, as arviz-stats hands
them to its own (a view of the posterior, moved so: :func:`per_element`).
"""

from __future__ import annotations

import numpy as np

#: arviz-base's default ``stats.ci_prob``, if its rcParams cannot be read
CI_PROB = 0.89


def ci_prob() -> float:
    """The probability arviz-stats' tail ESS takes its quantiles at (``rcParams``)."""
    try:
        from arviz_base import rcParams
    except ImportError:   # (installed with nutpie: not expected)
        return CI_PROB
    return float(rcParams["stats.ci_prob"])


def _not_valid(ary, min_chains: int) -> bool:
    """arviz-stats' ``not_valid`` (NaN anywhere, fewer than 4 draws or ``min_chains``
    chains), without its log lines."""
    isnan = np.isnan(ary)
    if isnan.all():
        return True
    nan_error = bool(isnan.any())
    shape = ary.shape
    chain_error = ((min_chains > 1) and (len(shape) < 2)) or (shape[0] < min_chains)
    draw_error = ((len(shape) < 2) and (shape[0] < 4)) or ((len(shape) > 1) and (shape[1] < 4))
    return bool(nan_error | chain_error | draw_error)


def _average_ranks(ary) -> np.ndarray:
    """scipy.stats' ``rankdata(ary, method="average")`` of the flattened array (1-based;
    NaN where ``ary`` is NaN, as ``nan_policy="omit"``): the ranks are halves of integers,
    exact in float64 however they are found."""
    flat = np.ravel(ary)
    n = flat.size
    nan = np.isnan(flat)
    out = np.full(n, np.nan)
    values = flat[~nan]
    m = values.size
    if m == 0:
        return out
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.ones(m, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.append(first[1:], m) - 1
    ranks = np.empty(m)
    ranks[order] = (first[group] + last[group]) / 2 + 1
    out[~nan] = ranks
    return out


def _z_scale(ary):
    from scipy.special import ndtri

    ary = np.asarray(ary)
    rank = _average_ranks(ary)
    c = 3 / 8
    rank = (rank - c) / (rank.size - 2 * c + 1)
    # scipy.stats.norm.ppf(q) is ndtri(q) * scale + loc (scale 1, loc 0), where 0 < q < 1
    z = np.full(rank.shape, np.nan)
    ok = (0 < rank) & (rank < 1)
    z[ok] = ndtri(rank[ok]) * 1.0 + 0.0
    z[rank == 0] = -np.inf
    z[rank == 1] = np.inf
    return z.reshape(ary.shape)


def _split_chains(ary):
    ary = np.asarray(ary)
    if len(ary.shape) <= 1:
        ary = np.atleast_2d(ary)
    _, n_draw = ary.shape
    half = n_draw // 2
    return np.vstack((ary[:, :half], ary[:, -half:]))


def _rhat(ary) -> float:
    ary = np.asarray(ary, dtype=float)
    _, num_samples = ary.shape
    chain_mean = np.mean(ary, axis=1)
    chain_var = np.var(ary, axis=1, ddof=1)
    between_chain_variance = num_samples * np.var(chain_mean, axis=None, ddof=1)
    within_chain_variance = np.mean(chain_var)
    return np.sqrt((between_chain_variance / within_chain_variance + num_samples - 1)
                   / (num_samples))


def rhat(ary) -> float:
    """arviz-stats' ``rhat`` (method "rank") of one (chain, draw) array."""
    ary = np.asarray(ary)
    if _not_valid(ary, min_chains=2):
        return np.nan
    split_ary = _split_chains(ary)
    rhat_bulk = _rhat(_z_scale(split_ary))
    split_ary_folded = abs(split_ary - np.median(split_ary))
    rhat_tail = _rhat(_z_scale(split_ary_folded))
    return max(rhat_bulk, rhat_tail)


def next_fast_len(target: int) -> int:
    """scipy.fftpack's ``next_fast_len``: the smallest 2^a 3^b 5^c >= ``target``."""
    if target <= 6:
        return max(int(target), 1) if target > 0 else 0
    best = None
    p5 = 1
    while p5 < 2 * target:
        p35 = p5
        while p35 < 2 * target:
            p = p35
            while p < target:
                p *= 2
            if best is None or p < best:
                best = p
            p35 *= 3
        p5 *= 5
    return int(best)  # type: ignore[arg-type]


def _autocov(ary, axis: int = 1):
    import warnings

    n = ary.shape[axis]
    m = next_fast_len(2 * n)
    ary = ary - ary.mean(axis, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ifft_ary = np.fft.rfft(ary, n=m, axis=axis)
        ifft_ary *= np.conjugate(ifft_ary)
        shape = tuple(slice(None) if dim_len != axis else slice(0, n)
                      for dim_len, _ in enumerate(ary.shape))
        cov = np.fft.irfft(ifft_ary, n=m, axis=axis)[shape]
        cov /= n
    return cov


def _ess(ary) -> float:
    ary = np.asarray(ary, dtype=float)
    if (np.max(ary) - np.min(ary)) < np.finfo(float).resolution:
        return ary.size
    n_chain, n_draw = ary.shape
    acov = _autocov(ary, axis=1)
    chain_mean = ary.mean(axis=1)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(chain_mean, axis=None, ddof=1)

    rho_hat_t = np.zeros(n_draw)
    rho_hat_even = 1.0
    rho_hat_t[0] = rho_hat_even
    rho_hat_odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho_hat_t[1] = rho_hat_odd
    # Geyer's initial positive sequence
    t = 1
    while t < (n_draw - 3) and (rho_hat_even + rho_hat_odd) > 0.0:
        rho_hat_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_hat_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if (rho_hat_even + rho_hat_odd) >= 0:
            rho_hat_t[t + 1] = rho_hat_even
            rho_hat_t[t + 2] = rho_hat_odd
        t += 2
    max_t = t - 2
    if rho_hat_even > 0:
        rho_hat_t[max_t + 1] = rho_hat_even
    # Geyer's initial monotone sequence
    t = 1
    while t <= max_t - 2:
        if (rho_hat_t[t + 1] + rho_hat_t[t + 2]) > (rho_hat_t[t - 1] + rho_hat_t[t]):
            rho_hat_t[t + 1] = (rho_hat_t[t - 1] + rho_hat_t[t]) / 2.0
            rho_hat_t[t + 2] = rho_hat_t[t + 1]
        t += 2
    ess = n_chain * n_draw
    tau_hat = (-1.0 + 2.0 * np.sum(rho_hat_t[: max_t + 1])
               + np.sum(rho_hat_t[max_t + 1: max_t + 2]))
    tau_hat = max(tau_hat, 1 / np.log10(ess))
    ess = ess / tau_hat
    if np.isnan(rho_hat_t).any():
        ess = np.nan
    return ess


def ess_bulk(ary) -> float:
    """arviz-stats' ``ess`` (method "bulk") of one (chain, draw) array."""
    ary = np.asarray(ary)
    if _not_valid(ary, min_chains=1):
        return np.nan
    return _ess(_z_scale(_split_chains(ary)))


def _ess_quantile(ary, prob: float) -> float:
    ary = np.asarray(ary)
    if _not_valid(ary, min_chains=1):
        return np.nan
    quantile = np.quantile(ary, prob, axis=None, method="linear", weights=None)
    iquantile = ary <= quantile
    return _ess(_split_chains(iquantile))


def ess_tail(ary, prob: float) -> float:
    """arviz-stats' ``ess`` (method "tail", at ``prob``: :func:`ci_prob`) of one (chain,
    draw) array."""
    low, high = sorted((prob, 1 - prob))
    ary = np.asarray(ary)
    if _not_valid(ary, min_chains=1):
        return np.nan
    return min(_ess_quantile(ary, low), _ess_quantile(ary, high))


def mcse_mean(ary) -> float:
    """arviz-stats' ``mcse`` (method "mean") of one (chain, draw) array."""
    ary = np.asarray(ary)
    if _not_valid(ary, min_chains=1):
        return np.nan
    ess = _ess(_split_chains(ary))
    sd = np.std(ary, ddof=1)
    return sd / np.sqrt(ess)


def per_element(values) -> tuple[tuple[int, ...], np.ndarray]:
    """A posterior variable's draws (chain, draw, ...) as arviz-stats loops over them: the
    shape of one draw and the array with chain and draw moved last (a view)."""
    values = np.asarray(values)
    moved = np.transpose(values, (*range(2, values.ndim), 0, 1))
    return moved.shape[:-2], moved


def summaries(values, prob: float | None = None) -> dict[str, np.ndarray]:
    """``rhat``, ``ess_bulk``, ``ess_tail`` and ``mcse_mean`` of every element of one
    posterior variable (chain, draw, ...), each of the shape of one draw."""
    prob = ci_prob() if prob is None else prob
    shape, moved = per_element(values)
    out = {k: np.empty(shape) for k in ("rhat", "ess_bulk", "ess_tail", "mcse_mean")}
    for idx in np.ndindex(shape):
        ary = moved[idx]
        out["rhat"][idx] = rhat(ary)
        out["ess_bulk"][idx] = ess_bulk(ary)
        out["ess_tail"][idx] = ess_tail(ary, prob)
        out["mcse_mean"][idx] = mcse_mean(ary)
    return out

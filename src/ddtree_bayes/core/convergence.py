"""R-hat, bulk and tail ESS and the MCSE of the mean, as arviz-stats computes them, bit for bit,
vectorised over a variable's elements.

arviz-stats' defaults, per scalar element of a posterior variable: ``rhat`` (rank-normalised
split R-hat, the larger of bulk and folded), ``ess(method="bulk")``, ``ess(method="tail")``
(the smaller ESS of the indicators below its two quantiles at ``stats.ci_prob``),
``ess(method="mean")`` and ``mcse`` (of the mean). arviz-stats loops over the elements in
Python; :func:`summaries` does every element at once in numpy, operation for operation as
arviz-stats does each (arviz_stats/base/diagnostics.py and core.py, arviz-stats 1.x), so the
numbers are the same to the last bit (tests/test_convergence.py compares them):

* every sum is numpy's pairwise sum over the same values in the same order: each reduction
  runs along the last axis of a C-contiguous array, one row an element's (or a chain's), as
  arviz-stats' own reductions run over one element's contiguous copy;
* the ranks are exact (halves of integers) however they are found, and their normal scores
  come from one table (:func:`normal_scores`), Cephes' ``ndtri`` (scipy.special's, which
  arviz-stats' ``norm.ppf`` calls) transcribed in numpy and :mod:`math`
  (:func:`ddtree_bayes.core.normal.quantile`): no scipy import, which costs a ``predict``
  ~0.12 s;
* Geyer's sequences, a loop per element there, are found for all elements at once: the
  initial positive sequence ends at the first pair of autocorrelations not summing above 0;
  the initial monotone one is a running minimum of the pairs' sums (a pair lowered to the
  one before it is set to its halves, which sum back to it exactly); the sum of an element's
  sequence is taken over the same prefix as arviz-stats takes it.

Two callers: ``engine.inference.diagnose`` (a fit's stored diagnostics) and
``core.gates.rederived_rows`` (the same figures again when a stored fit is read), so the two
agree exactly; ``engine.psis.ess_mean`` too.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ddtree_bayes.core.normal import quantile as ndtri

#: The statistics :func:`summaries` gives, by arviz-stats' names of them.
STATISTICS = ("rhat", "ess_bulk", "ess_tail", "mcse_mean")

@lru_cache(maxsize=8)
def normal_scores(n: int) -> np.ndarray:
    """arviz-stats' normal scores of the average ranks 1, 1.5, 2, ..., ``n`` among ``n`` values
    (Blom's, ``norm.ppf((rank - 3/8) / (n - 2 x 3/8 + 1))``), at index ``2 x (rank - 1)``
    (read-only: cached)."""
    rank = 1.0 + np.arange(2 * n - 1) / 2.0
    c = 3 / 8
    scores = ndtri((rank - c) / (n - 2 * c + 1)) * 1.0 + 0.0   # (norm.ppf: scale 1, loc 0)
    scores.flags.writeable = False
    return scores


def _not_valid(rows: np.ndarray, n_chain: int, n_draw: int, min_chains: int) -> np.ndarray:
    """arviz-stats' ``not_valid`` of each element (``rows``: an element's values a row): a NaN
    anywhere, fewer than 4 draws or fewer than ``min_chains`` chains."""
    bad = np.isnan(rows).any(axis=-1)
    if n_chain < min_chains or n_draw < 4:
        bad[:] = True
    return bad


def _split(x: np.ndarray) -> np.ndarray:
    """arviz-stats' ``_split_chains`` of every element of ``x`` (element, chain, draw): the
    first and last halves of each chain as chains (the middle draw of an odd length left out),
    C-contiguous."""
    half = x.shape[-1] // 2
    return np.concatenate((x[:, :, :half], x[:, :, x.shape[-1] - half:]), axis=1)


def _z_scale(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """arviz-stats' ``_z_scale`` of each element of ``x`` (element, chain, draw): the normal
    scores of its values' average ranks among its own (NaN where a value is NaN, ranked among
    the others alone, as ``rankdata(nan_policy="omit")``); and each element's values sorted
    (element, value; NaN last)."""
    rows = x.reshape(x.shape[0], -1)
    n = rows.shape[1]
    scores = normal_scores(n)
    order = np.argsort(rows, axis=1)
    ordered = np.take_along_axis(rows, order, axis=1)
    tied = ordered[:, 1:] == ordered[:, :-1]   # (NaN equals nothing)
    with_ties = tied.any(axis=1)
    z_sorted = np.broadcast_to(scores[::2], rows.shape)   # (no ties: ranks 1, 2, .., n)
    if with_ties.any():
        # a run of equal values at sorted positions i..k ranks (i + k) / 2 + 1
        t = tied[with_ties]
        pos = np.arange(n)[None, :]
        starts = np.ones(t.shape[:1] + (n,), dtype=bool)
        starts[:, 1:] = ~t
        ends = np.ones(starts.shape, dtype=bool)
        ends[:, :-1] = ~t
        first = np.maximum.accumulate(np.where(starts, pos, 0), axis=1)
        last = np.minimum.accumulate(np.where(ends, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
        z_sorted = z_sorted.copy()
        z_sorted[with_ties] = scores[first + last]   # (index: 2 x (average rank - 1))
    z = np.empty(rows.shape)
    np.put_along_axis(z, order, z_sorted, axis=1)
    nan = np.isnan(rows)
    if nan.any():
        z[nan] = np.nan
    return z.reshape(x.shape), ordered


def _median(ordered: np.ndarray) -> np.ndarray:
    """``np.median`` of each row of ``ordered`` (sorted, of an even length, no NaN): the mean
    of its two middle values, as numpy takes it."""
    mid = ordered.shape[1] // 2
    return (ordered[:, mid - 1] + ordered[:, mid]) / 2.0


def _rhat(z: np.ndarray) -> np.ndarray:
    """arviz-stats' ``_rhat`` of each element of ``z`` (element, chain, draw)."""
    num_samples = z.shape[-1]
    chain_mean = np.mean(z, axis=-1)
    chain_var = np.var(z, axis=-1, ddof=1)
    between = num_samples * np.var(chain_mean, axis=-1, ddof=1)
    within = np.mean(chain_var, axis=-1)
    return np.sqrt((between / within + num_samples - 1) / num_samples)


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


def _autocov(x: np.ndarray) -> np.ndarray:
    """arviz-stats' ``autocov`` along the last axis of ``x``."""
    n = x.shape[-1]
    m = next_fast_len(2 * n)
    x = x - x.mean(axis=-1, keepdims=True)
    spectrum = np.fft.rfft(x, n=m, axis=-1)
    spectrum *= np.conjugate(spectrum)
    cov = np.fft.irfft(spectrum, n=m, axis=-1)[..., :n]
    cov /= n
    return cov


def _ess(x: np.ndarray) -> np.ndarray:
    """arviz-stats' ``_ess`` (Geyer's initial monotone sequence) of each element of ``x``
    (element, chain, draw)."""
    x = np.asarray(x, dtype=float)
    k, n_chain, n_draw = x.shape
    size = n_chain * n_draw
    out = np.full(k, float(size))
    flat = x.reshape(k, -1)
    varies = ~((np.max(flat, axis=1) - np.min(flat, axis=1)) < np.finfo(float).resolution)
    if not varies.any():
        return out
    x = x[varies]
    acov = _autocov(x)
    # (each lag's mean over the chains, summed along contiguous memory as arviz-stats does)
    mean_acov = np.mean(np.ascontiguousarray(np.swapaxes(acov, 1, 2)), axis=-1)
    mean_var = mean_acov[:, 0] * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(x.mean(axis=-1), axis=-1, ddof=1)
    m = len(mean_var)
    rho_odd1 = 1.0 - (mean_var - mean_acov[:, 1]) / var_plus
    # the positive sequence's pair j (lags 2j, 2j + 1), j = 1 .. jmax: the loop's t = 2j - 1
    jmax = max(0, (n_draw - 3) // 2)
    lags = np.arange(2, 2 * jmax + 2)
    rho_all = 1.0 - (mean_var[:, None] - mean_acov[:, lags]) / var_plus[:, None]
    even, odd = rho_all[:, 0::2], rho_all[:, 1::2]                  # (m, jmax)
    pair_sum = np.concatenate(((1.0 + rho_odd1)[:, None], even + odd), axis=1)  # j = 0..jmax
    # pairs computed: j = 1 .. last, last the first j whose predecessor's sum is not > 0
    stops = ~(pair_sum[:, :jmax] > 0.0)
    last = (np.where(stops.any(axis=1), np.argmax(stops, axis=1), jmax) if jmax
            else np.zeros(m, dtype=np.intp))
    rho = np.zeros((m, n_draw))
    rho[:, 0] = 1.0
    rho[:, 1] = rho_odd1
    j = np.arange(1, jmax + 1)[None, :]
    kept = (j < last[:, None]) | ((j == last[:, None]) & (pair_sum[:, 1:] >= 0))
    rho[:, 2:2 * jmax + 2:2] = np.where(kept, even, 0.0)
    rho[:, 3:2 * jmax + 3:2] = np.where(kept, odd, 0.0)
    rows = np.arange(m)
    final_even = (np.where(last > 0, even[rows, np.maximum(last - 1, 0)], 1.0) if jmax
                  else np.ones(m))
    lift = final_even > 0
    rho[rows[lift], 2 * last[lift]] = final_even[lift]
    # the monotone sequence over pairs 1 .. last - 1: each at most the (lowered) one before
    if jmax > 1:
        sums = rho[:, 0:2 * jmax:2] + rho[:, 1:2 * jmax:2]            # pairs 0 .. jmax - 1
        floor = np.minimum.accumulate(sums, axis=1)
        lower = (sums[:, 1:] > floor[:, :-1]) & (np.arange(1, jmax)[None, :] < last[:, None])
        half = floor[:, :-1] / 2.0
        rho[:, 2:2 * jmax:2] = np.where(lower, half, rho[:, 2:2 * jmax:2])
        rho[:, 3:2 * jmax:2] = np.where(lower, half, rho[:, 3:2 * jmax:2])
    # tau: the sum of rho[:2 last] taken as arviz-stats takes it (numpy's pairwise sum of that
    # prefix: one contiguous row each, grouped by its length)
    head = np.empty(m)
    for length in np.unique(last):
        these = last == length
        head[these] = np.sum(np.ascontiguousarray(rho[these, :2 * length]), axis=1)
    tau = -1.0 + 2.0 * head + rho[rows, 2 * last]
    floor_tau = 1 / np.log10(size)
    tau = np.where(floor_tau > tau, floor_tau, tau)
    ess = size / tau
    ess[np.isnan(rho).any(axis=1)] = np.nan
    out[varies] = ess
    return out


def _moved(values) -> tuple[tuple[int, ...], np.ndarray]:
    """A variable's draws (chain, draw, ...) as one contiguous (element, chain, draw) array,
    with the shape of one draw."""
    values = np.asarray(values, dtype=float)
    shape = values.shape[2:]
    moved = np.transpose(values, (*range(2, values.ndim), 0, 1))
    return shape, np.ascontiguousarray(moved.reshape(math.prod(shape), *values.shape[:2]))


def summaries(values, prob: float | None = None,
              statistics: tuple[str, ...] = STATISTICS) -> dict[str, np.ndarray]:
    """arviz-stats' ``rhat``, ``ess`` (bulk; tail at ``prob``, its ``stats.ci_prob``) and
    ``mcse`` (mean) of every element of one posterior variable ``values`` (chain, draw, ...),
    each of the shape of one draw: ``statistics`` names those wanted (``prob`` is needed for
    ``ess_tail`` alone). Non-finite and invalid elements are NaN as arviz-stats makes them."""
    shape, x = _moved(values)
    k, n_chain, n_draw = x.shape
    rows = x.reshape(k, n_chain * n_draw)
    out = {}
    with np.errstate(all="ignore"):
        split = _split(x) if n_draw else x
        ok = ~_not_valid(rows, n_chain, n_draw, min_chains=1)
        # (two chains or more: the elements R-hat takes are bulk ESS's, z-scaled once)
        z = sorted_split = None
        if ("rhat" in statistics and n_chain >= 2 or "ess_bulk" in statistics) and ok.any():
            z, sorted_split = _z_scale(split[ok])
        if "rhat" in statistics:
            rhat = np.full(k, np.nan)
            if n_chain >= 2 and z is not None and sorted_split is not None:
                bulk = _rhat(z)
                median = _median(sorted_split)
                tail = _rhat(_z_scale(np.abs(split[ok] - median[:, None, None]))[0])
                rhat[ok] = np.where(tail > bulk, tail, bulk)   # (Python's max: NaN second loses)
            out["rhat"] = rhat
        if "ess_bulk" in statistics:
            ess_bulk = np.full(k, np.nan)
            if z is not None:
                ess_bulk[ok] = _ess(z)
            out["ess_bulk"] = ess_bulk
        if "ess_tail" in statistics:
            if prob is None:
                raise ValueError("ess_tail needs prob (arviz-stats' stats.ci_prob)")
            ess_tail = np.full(k, np.nan)
            if ok.any():
                low_high = []
                for p in sorted((prob, 1 - prob)):
                    quantile = np.quantile(rows[ok], p, axis=1, method="linear")
                    low_high.append(_ess(_split(x[ok] <= quantile[:, None, None])))
                low, high = low_high
                ess_tail[ok] = np.where(high < low, high, low)   # (Python's min)
            out["ess_tail"] = ess_tail
        if "mcse_mean" in statistics:
            mcse = np.full(k, np.nan)
            if ok.any():
                sd = np.std(rows[ok], axis=1, ddof=1)
                mcse[ok] = sd / np.sqrt(_ess(split[ok]))
            out["mcse_mean"] = mcse
    return {key: value.reshape(shape) for key, value in out.items()}


def ess_mean(ary) -> float:
    """arviz-stats' ``ess(method="mean")`` of one (chain, draw) array (a 1-D array: one chain):
    split chains, Geyer's initial monotone sequence."""
    ary = np.asarray(ary, dtype=float)
    if ary.ndim <= 1:
        ary = np.atleast_2d(ary)
    x = ary[None]
    if _not_valid(x.reshape(1, -1), ary.shape[0], ary.shape[1], min_chains=1)[0]:
        return float("nan")
    with np.errstate(all="ignore"):
        return float(_ess(_split(x))[0])

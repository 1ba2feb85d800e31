"""engine/chain_stats.py: arviz-stats' R-hat, bulk and tail ESS and MCSE of the mean, to the
bit, without importing arviz-stats (its import, with scipy.stats, was ~0.4-0.6 s of a fit)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ddtree_bayes.engine import chain_stats


def _draws(seed: int, shape: tuple[int, ...], rho: float = 0.0) -> np.ndarray:
    """AR(1) draws of ``shape`` (chain, draw, ...): autocorrelated like a sampler's."""
    rng = np.random.default_rng(seed)
    eps = rng.normal(size=shape)
    out = np.empty(shape)
    out[:, 0] = eps[:, 0]
    for t in range(1, shape[1]):
        out[:, t] = rho * out[:, t - 1] + eps[:, t]
    return out


def _cases() -> dict[str, np.ndarray]:
    ties = np.round(_draws(3, (4, 1000), 0.5), 1)          # many tied values
    skewed = np.exp(_draws(4, (4, 1000, 3), 0.7))          # an extra dimension, skewed
    grid = _draws(5, (4, 1000, 2, 2), 0.2)                  # two extra dimensions
    stuck = _draws(6, (4, 1000), 0.95)
    stuck[0] += 3.0                                          # one chain elsewhere: R-hat > 1.01
    partly = _draws(7, (4, 1000, 2))
    partly[:, :, 1] = 0.25                                   # a constant element
    odd = _draws(8, (3, 999), 0.3)                           # odd draws, 3 chains
    nan = _draws(9, (4, 1000))
    nan[2, 17] = np.nan
    inf = _draws(10, (4, 1000))
    inf[1, 3] = np.inf
    long = _draws(11, (4, 3000), 0.6)                        # the ESS-doubling rung's draws
    return {"ar": _draws(1, (4, 1000), 0.3), "iid": _draws(2, (4, 1000)), "ties": ties,
            "skewed": skewed, "grid": grid, "stuck": stuck, "partly": partly, "odd": odd,
            "nan": nan, "inf": inf, "one_chain": _draws(12, (1, 1000), 0.3), "long": long,
            "short": _draws(13, (4, 3))}


def _arviz(values: np.ndarray) -> dict[str, np.ndarray]:
    import warnings

    import arviz_stats as azs
    import xarray as xr

    dims = ("chain", "draw", *(f"d{i}" for i in range(values.ndim - 2)))
    ds = xr.Dataset({"x": (dims, values)})
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return {"rhat": azs.rhat(ds)["x"].values, "ess_bulk": azs.ess(ds, method="bulk")["x"].values,
                "ess_tail": azs.ess(ds, method="tail")["x"].values,
                "mcse_mean": azs.mcse(ds)["x"].values}


@pytest.mark.parametrize("case", list(_cases()))
def test_the_same_numbers_as_arviz_stats_to_the_bit(case):
    values = _cases()[case]
    with np.errstate(all="ignore"):
        ours = chain_stats.summaries(values)
    theirs = _arviz(values)
    for key, expected in theirs.items():
        got = ours[key]
        assert got.shape == np.shape(expected), key
        assert np.array_equal(got, expected, equal_nan=True), (
            key, got.ravel()[:4].tolist(), np.ravel(expected)[:4].tolist())


def test_known_values():
    """A hand-checkable case: two chains of four draws, 0..3 and 4..7. Split in halves: four
    chains (0,1), (2,3), (4,5), (6,7); their ranks' normal scores make the between-chain
    variance dominate, R-hat far above 1; identical chains give an R-hat of 1 and an ESS of
    the draws' count for a constant."""
    ary = np.arange(8.0).reshape(2, 4)
    assert chain_stats.rhat(ary) > 2
    assert chain_stats.ess_bulk(np.full((2, 4), 1.5)) == 8
    assert np.isnan(chain_stats.rhat(np.arange(4.0).reshape(1, 4)))   # one chain: no R-hat
    assert chain_stats.mcse_mean(np.full((2, 4), 1.5)) == 0.0


def test_next_fast_len_is_scipys():
    from scipy.fftpack import next_fast_len

    assert [chain_stats.next_fast_len(n) for n in range(1, 4100)] == [
        next_fast_len(n) for n in range(1, 4100)]


def test_ci_prob_is_arviz_bases():
    from arviz_base import rcParams

    assert chain_stats.ci_prob() == rcParams["stats.ci_prob"]


def test_diagnose_imports_neither_arviz_stats_nor_scipy_stats():
    code = ("import sys\nimport numpy as np, xarray as xr\n"
            "from ddtree_bayes.engine import inference\n"
            "rng = np.random.default_rng(0)\n"
            "post = xr.Dataset({'a': (('chain', 'draw'), rng.normal(size=(4, 1000)))})\n"
            "stats = xr.Dataset({'diverging': (('chain', 'draw'), np.zeros((4, 1000), bool))})\n"
            "rows, div, failures = inference.diagnose(post, stats)\n"
            "print(len(rows), div, failures, 'arviz_stats' in sys.modules,"
            " 'scipy.stats' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0", "[]", "False", "False"]

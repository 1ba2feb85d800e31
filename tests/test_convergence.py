"""core/convergence.py: arviz-stats' R-hat, bulk and tail ESS and MCSE of the mean, to the
bit, without importing arviz-stats (its import, with scipy.stats, was ~0.4-0.6 s of a fit) or
scipy.special (~0.12 s of a predict), every element of a variable at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.core import convergence
from ddtree_bayes.engine import inference


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


def _vectorised_cases() -> dict[str, np.ndarray]:
    """Elements of one variable that arviz-stats takes one at a time and :func:`summaries`
    all at once: each must come out as if alone."""
    constant_chain = _draws(20, (4, 1000, 3), 0.4)
    constant_chain[2, :, 0] = 0.5                            # one chain of one element stuck
    constant_chain[:, :, 2] = -1.25                          # an element constant throughout
    nan_one = _draws(21, (4, 500, 4), 0.5)
    nan_one[1, 7, 2] = np.nan                                # NaN in one element alone
    nan_one[:, :, 3] = np.nan                                # an element all NaN
    inf_most = _draws(22, (4, 200, 2), 0.2)
    inf_most[:, :150, 1] = np.inf                            # the folded median infinite
    mixed_lags = np.stack([_draws(23 + i, (4, 600), rho) for i, rho in
                           enumerate((-0.6, 0.0, 0.5, 0.9, 0.99))], axis=-1)
    mixed_lags[..., 1] = np.round(mixed_lags[..., 1], 0)     # ties in one element
    return {"constant_chain": constant_chain, "nan_one": nan_one, "inf_most": inf_most,
            "mixed_lags": mixed_lags, "one_chain_grid": _draws(30, (1, 300, 2, 3), 0.6),
            "two_chains_5": _draws(31, (2, 5, 3), 0.3), "tiny_4": _draws(32, (4, 4, 2)),
            "tiny_6": _draws(33, (3, 6, 2), 0.5), "tiny_7": _draws(34, (4, 7, 2), 0.5),
            "tiny_3": _draws(35, (4, 3, 2)), "one_draw": _draws(36, (4, 1, 2)),
            "one_chain_one_element": _draws(37, (1, 4, 1))}


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


@pytest.mark.parametrize("case", [*_cases(), *_vectorised_cases()])
def test_the_same_numbers_as_arviz_stats_to_the_bit(case):
    values = {**_cases(), **_vectorised_cases()}[case]
    ours = convergence.summaries(values, inference.ci_prob())
    theirs = _arviz(values)
    for key, expected in theirs.items():
        got = ours[key]
        assert got.shape == np.shape(expected), key
        assert np.array_equal(got, expected, equal_nan=True), (
            key, got.ravel()[:4].tolist(), np.ravel(expected)[:4].tolist())


def test_several_variables_of_other_shapes_in_one_call_are_each_arviz_stats():
    """Variables of shapes (), (3,) and (2, 2) stacked into one (chain, draw, 8) array and
    summarised at once (as a fit's diagnose and a stored fit's read do): each element's figures
    are arviz-stats' of its own variable, to the bit; asking for R-hat and bulk ESS alone gives
    the same numbers as asking for all four."""
    variables = {"a": _draws(40, (4, 800), 0.7), "b": np.exp(_draws(41, (4, 800, 3), 0.2)),
                 "c": np.round(_draws(42, (4, 800, 2, 2), 0.5), 1)}
    stacked = np.concatenate([v.reshape(4, 800, -1) for v in variables.values()], axis=2)
    ours = convergence.summaries(stacked, 0.89)
    two = convergence.summaries(stacked, statistics=("rhat", "ess_bulk"))
    assert set(two) == {"rhat", "ess_bulk"}
    start = 0
    for values in variables.values():
        theirs = _arviz(values)
        size = int(np.prod(values.shape[2:]))
        for key, expected in theirs.items():
            assert np.array_equal(ours[key][start:start + size], np.ravel(expected)), key
            if key in two:
                assert np.array_equal(two[key][start:start + size], np.ravel(expected)), key
        start += size


def test_ess_mean_is_arviz_stats_to_the_bit():
    """``ess_mean``: arviz-stats' ``ess(method="mean")`` (split chains, Geyer), to the bit,
    one chain (a 1-D array too) and a constant included."""
    from arviz_stats.base.array import array_stats

    for values in (_draws(50, (4, 1000), 0.9), _draws(51, (2, 51), 0.5),
                   np.exp(_draws(52, (1, 300), -0.5))):
        expected = array_stats.ess(values, method="mean", chain_axis=0, draw_axis=1)
        assert convergence.ess_mean(values) == float(expected)
    one = _draws(53, (1, 300), 0.3)
    assert convergence.ess_mean(one[0]) == convergence.ess_mean(one)
    assert convergence.ess_mean(np.ones((4, 100))) == 400
    assert np.isnan(convergence.ess_mean(np.ones((4, 3))))   # (fewer than 4 draws)


def test_normal_scores_are_scipys_ndtri_of_bloms_ranks():
    """The normal scores table: scipy.special.ndtri of Blom's plotting positions, to the bit."""
    from scipy.special import ndtri

    assert np.array_equal(convergence.normal_scores(4000), ndtri(
        (1.0 + np.arange(7999) / 2.0 - 3 / 8) / (4000 - 2 * 3 / 8 + 1)))


def test_known_values():
    """A hand-checkable case: two chains of four draws, 0..3 and 4..7. Split in halves: four
    chains (0,1), (2,3), (4,5), (6,7); their ranks' normal scores make the between-chain
    variance dominate, R-hat far above 1; identical chains give an R-hat of 1 and an ESS of
    the draws' count for a constant."""
    def one(values, key):
        return float(convergence.summaries(values, 0.89)[key])

    assert one(np.arange(8.0).reshape(2, 4), "rhat") > 2
    assert one(np.full((2, 4), 1.5), "ess_bulk") == 8
    assert np.isnan(one(np.arange(4.0).reshape(1, 4), "rhat"))   # one chain: no R-hat
    assert one(np.full((2, 4), 1.5), "mcse_mean") == 0.0
    # split: chains (0, 1), (2, 3), (4, 5), (6, 7); ranks 1..8 are each chain's own pair, so
    # the folded R-hat (|x - 3.5|: chains (3.5, 2.5), (1.5, 0.5), ...) is the smaller one
    # Blom scores z_r = ndtri((r - 3/8) / 8.25), chain means m_c = (z_2c-1 + z_2c) / 2: between
    # = 2 var(m), within = mean over chains of (z_2c - z_2c-1)^2 / 2, R-hat = sqrt((between /
    # within + 1) / 2)
    from scipy.special import ndtri

    z = ndtri((np.arange(1, 9) - 3 / 8) / 8.25).reshape(4, 2)
    between = 2 * np.var(z.mean(axis=1), ddof=1)
    within = np.mean((z[:, 1] - z[:, 0]) ** 2 / 2)
    assert one(np.arange(8.0).reshape(2, 4), "rhat") == pytest.approx(
        np.sqrt((between / within + 1) / 2), rel=1e-12)


def test_no_draws_or_no_elements_give_nan_or_nothing():
    """An empty variable (no draws, no chains, or no elements) is summarised as arviz-stats
    would leave it (NaN: fewer than 4 draws), or as nothing, not a reshape error."""
    for shape, element in (((4, 0), ()), ((4, 0, 3), (3,)), ((0, 10), ()), ((4, 10, 0), (0,))):
        out = convergence.summaries(np.zeros(shape), 0.89)
        assert set(out) == set(convergence.STATISTICS)
        for value in out.values():
            assert value.shape == element and np.isnan(value).all()


def test_next_fast_len_is_scipys():
    from scipy.fftpack import next_fast_len

    assert [convergence.next_fast_len(n) for n in range(1, 4100)] == [
        next_fast_len(n) for n in range(1, 4100)]


def test_ci_prob_is_arviz_bases():
    from arviz_base import rcParams

    assert inference.ci_prob() == rcParams["stats.ci_prob"]


def test_diagnose_rows_are_arviz_stats_to_the_bit():
    """``inference.diagnose`` summarises every variable at once: each row (a scalar, a
    labelled vector's elements, a constant element left out, a constant variable left out)
    holds arviz-stats' figures for that element, to the bit."""
    import xarray as xr

    rng = np.random.default_rng(5)
    vector = _draws(60, (4, 1000, 3), 0.6)
    vector[:, :, 1] = 0.0                                     # (a constant element: no row)
    post = xr.Dataset({"a": (("chain", "draw"), _draws(61, (4, 1000), 0.8)),
                       "v": (("chain", "draw", "gpu"), vector),
                       "k": (("chain", "draw"), np.full((4, 1000), 2.0)),   # (constant)
                       "b": (("chain", "draw"), np.exp(rng.normal(size=(4, 1000))))},
                      coords={"gpu": ["h100", "b200", "b300"]})
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((4, 1000), bool))})
    rows, _, _ = inference.diagnose(post, stats)
    assert [r["parameter"] for r in rows] == ["a", "v[h100]", "v[b300]", "b"]
    for row, values in zip(rows, (post["a"].values, vector[:, :, 0], vector[:, :, 2],
                                  post["b"].values), strict=True):
        theirs = _arviz(values)
        assert {k: row[k] for k in theirs} == {k: float(v) for k, v in theirs.items()}


def test_diagnose_labels_each_element_by_all_its_coordinates():
    """A variable of two dimensions after the draws, (chain, draw, gpu, engine) 2 x 3, was
    labelled from its first dimension alone: 'm[h100]' and 'm[b300]' for the first two of its
    six elements and the other four not reported at all (their R-hat and ESS never gated).
    Each element is named by every coordinate, in the variable's dimension order (a
    dimension stored before the draws, too), with its own mean and arviz-stats' figures:
    element (i, j) draws around 10 i + j, so its mean names it. A constant element is left
    out, as a vector's is. From a DataTree, as the sampler returns it."""
    import xarray as xr

    gpus, engines = ["h100", "b300"], ["sglang", "vllm", "trt-llm"]
    values = _draws(70, (4, 1000, 2, 3), 0.5) * 0.1
    values += (10.0 * np.arange(2)[:, None] + np.arange(3)[None, :])
    values[:, :, 1, 2] = 7.0                                  # (a constant element: no row)
    # (a dimension before the draws: stored (engine, chain, draw), diagnosed per engine)
    front = np.moveaxis(_draws(71, (4, 1000, 3), 0.5) + np.arange(3) * 100.0, 2, 0)
    post = xr.Dataset({"m": (("chain", "draw", "gpu", "engine"), values),
                       "f": (("engine", "chain", "draw"), front)},
                      coords={"gpu": gpus, "engine": engines})
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((4, 1000), bool))})
    tree = xr.DataTree.from_dict({"posterior": post, "sample_stats": stats})
    rows, _, _ = inference.diagnose(tree["posterior"].to_dataset(),
                                    tree["sample_stats"].to_dataset())
    assert [r["parameter"] for r in rows] == [
        "m[h100, sglang]", "m[h100, vllm]", "m[h100, trt-llm]", "m[b300, sglang]",
        "m[b300, vllm]", "f[sglang]", "f[vllm]", "f[trt-llm]"]
    for row, mean in zip(rows, (0.0, 1.0, 2.0, 10.0, 11.0, 0.0, 100.0, 200.0), strict=True):
        assert abs(row["mean"] - mean) < 0.05, row
    cells = [values[:, :, 0, 0], values[:, :, 0, 1], values[:, :, 0, 2], values[:, :, 1, 0],
             values[:, :, 1, 1], front[0], front[1], front[2]]
    for row, cell in zip(rows, cells, strict=True):
        theirs = _arviz(cell)
        assert {k: row[k] for k in theirs} == {k: float(v) for k, v in theirs.items()}


def test_a_stored_fits_checks_name_the_elements_as_diagnose_does():
    """The checks a read of a stored fit makes (core/gates ``rederived_rows``, engine/store
    ``_check_means``) looked a label up among the coordinates of a variable's first dimension
    after the draws, while diagnose now names every coordinate: a (gpu, engine) variable's
    re-derived rows were 'm[0]'..'m[5]' beside diagnose's 'm[h100, sglang]'.., and its
    recorded means went unchecked. Both use core/gates ``element_labels`` now: the re-derived
    rows equal diagnose's (names, R-hat and bulk ESS to the bit) and an edited mean of
    'm[b300, vllm]' is refused."""
    import xarray as xr

    from ddtree_bayes.core.errors import ArtifactError
    from ddtree_bayes.core.gates import element_labels, rederived_rows
    from ddtree_bayes.engine import store

    gpus, engines = ["h100", "b300"], ["sglang", "vllm", "trt-llm"]
    values = _draws(72, (4, 1000, 2, 3), 0.5) + np.arange(6.0).reshape(2, 3)
    post = xr.Dataset({"m": (("chain", "draw", "gpu", "engine"), values)},
                      coords={"gpu": gpus, "engine": engines})
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((4, 1000), bool))})
    rows, _, _ = inference.diagnose(post, stats)
    labels = {"m": element_labels([gpus, engines])}
    flat = {"m": values.reshape(4000, 2, 3)}
    again = rederived_rows(flat, 4, labels)
    assert [r["parameter"] for r in again] == [r["parameter"] for r in rows]
    assert [(r["rhat"], r["ess_bulk"]) for r in again] == [(r["rhat"], r["ess_bulk"])
                                                           for r in rows]
    meta = {"diagnostics": {"parameters": rows}}
    store._check_means(meta, flat, labels, Path("fit.nc"))       # (the saved means: kept)
    edited = [dict(r, mean=r["mean"] + 1.0) if r["parameter"] == "m[b300, vllm]" else r
              for r in rows]
    with pytest.raises(ArtifactError,
                       match=r"draws of m\[b300, vllm\] average 3.98778, not the 4.98778"):
        store._check_means({"diagnostics": {"parameters": edited}}, flat, labels,
                           Path("fit.nc"))


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

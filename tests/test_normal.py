"""core/normal.py: the package's one standard normal CDF and quantile, against scipy.special."""

import numpy as np
import pytest

from ddtree_bayes.core import normal

pytestmark = pytest.mark.fast


def test_quantile_is_scipy_specials_ndtri_to_the_bit():
    """Cephes' ndtri without scipy: scipy.special.ndtri's numbers exactly, on the normal
    scores' grids and across (0, 1), both tails' branches (below and above exp(-32)) and the
    ends included (-inf at 0, +inf at 1, NaN outside [0, 1] and for NaN)."""
    from scipy.special import ndtri

    rng = np.random.default_rng(0)
    u = rng.uniform(size=20000)
    p = np.concatenate([u, u ** 8, 1 - u ** 8, np.exp(-rng.uniform(0, 700, 2000)),
                        [0.0, 1.0, 0.5, np.exp(-2), 1 - np.exp(-2), np.exp(-32), 5e-324,
                         -0.5, 1.5, np.nan]])
    for n in (8, 1000, 4000, 12000):
        p = np.concatenate([p, (1.0 + np.arange(2 * n - 1) / 2.0 - 3 / 8) / (n + 1 / 4)])
    with np.errstate(invalid="ignore"):
        expected = ndtri(p)
    assert np.array_equal(normal.quantile(p), expected, equal_nan=True)
    edges = normal.quantile(np.array([0.0, 1.0, np.nan, -0.5, 1.5]))
    assert edges[0] == -np.inf and edges[1] == np.inf and np.isnan(edges[2:]).all()


def test_cdf_is_scipy_specials_ndtr():
    """math.erfc element by element: scipy.special.ndtr to 1e-12 relative (the far lower
    tail) across the range the fixed-cost truncation and the living scores use, 0 and 1 at
    the infinities, and Phi(1.959964) = 0.975 by hand."""
    from scipy import special

    x = np.concatenate([np.linspace(-37.0, 8.0, 4001), [-np.inf, np.inf]])
    assert np.allclose(normal.cdf(x), special.ndtr(x), rtol=1e-12, atol=0.0)
    assert normal.cdf(np.array([-np.inf, np.inf])).tolist() == [0.0, 1.0]
    assert float(normal.cdf(1.959963984540054)) == pytest.approx(0.975, abs=1e-15)


def test_quantile_inverts_cdf():
    """quantile(cdf(z)) = z to 1e-9 from the lower tail (z = -8) to z = 2 (above it cdf(z)
    is 1 minus a number rounded to the double next to 1, so z comes back to ~1e-16 / pdf)."""
    z = np.linspace(-8.0, 2.0, 1001)
    assert np.allclose(normal.quantile(normal.cdf(z)), z, rtol=0.0, atol=1e-9)

"""The standard normal CDF and quantile, without scipy (importing scipy.special costs a
``predict`` ~0.12 s). One of each for the package: the convergence diagnostics' normal scores,
the fixed-cost truncation of a group's own cost (engine/structure.py) and the living scores
(workflows/living/scoring.py) all ask these.

* :func:`quantile` is Cephes' ``ndtri`` step for step, scipy.special's to the bit;
* :func:`cdf` is ``math.erfc`` element by element (scipy.special's ``ndtr`` to ~1e-15,
  ~2e-13 relative in the far lower tail).
"""

from __future__ import annotations

import math

import numpy as np


def cdf(x) -> np.ndarray:
    """The standard normal CDF, element by element by :func:`math.erfc`.

    >>> cdf(np.array([-np.inf, -1.959963984540054, 0.0, 1.0])).round(6).tolist()
    [0.0, 0.025, 0.5, 0.841345]
    """
    x = np.asarray(x, dtype=float)
    return 0.5 * np.asarray(np.frompyfunc(math.erfc, 1, 1)(-x / math.sqrt(2.0)), dtype=float)


# Cephes' ndtri (S. L. Moshier), the coefficients scipy.special's ndtri uses
_S2PI = 2.50662827463100050242E0
_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
       1.39312609387279679503E1, -1.23916583867381258016E0)
_Q0 = (1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
       -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
       1.59056225126211695515E1, -1.18331621121330003142E0)
_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
       4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
       -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_Q1 = (1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
       1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
       -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
       1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
       3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_Q2 = (6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
       2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
       2.89247864745380683936E-6, 6.79019408009981274425E-9)
_EXP_M2 = 0.13533528323661269189   # exp(-2)


def _polevl(x, coef):
    """Cephes' ``polevl``: Horner from the leading coefficient, one rounding a step."""
    ans = np.full_like(x, coef[0])
    for c in coef[1:]:
        ans = ans * x + c
    return ans


def _p1evl(x, coef):
    """Cephes' ``p1evl``: :func:`_polevl` with a leading coefficient of 1 left out."""
    ans = x + coef[0]
    for c in coef[1:]:
        ans = ans * x + c
    return ans


def quantile(p) -> np.ndarray:
    """The standard normal quantile, Cephes' ``ndtri`` step for step (scipy.special's: equal to
    it to the bit, tests/test_normal.py), without importing scipy. -inf at 0, +inf at 1,
    NaN outside [0, 1] and for NaN. The logarithms are :func:`math.log` (the C library's, as
    Cephes calls it: numpy's own SIMD ``log`` may differ by an ulp); every other step is one
    IEEE operation, rounded alike in numpy and C.

    >>> quantile(np.array([0.0, 0.025, 0.5, 0.975, 1.0])).round(6).tolist()
    [-inf, -1.959964, 0.0, 1.959964, inf]
    """
    y0 = np.asarray(p, dtype=float)
    out = np.full(y0.shape, np.nan)
    out[y0 == 0.0] = -np.inf
    out[y0 == 1.0] = np.inf
    inside = (y0 > 0.0) & (y0 < 1.0)
    upper = y0 > 1.0 - _EXP_M2
    y = np.where(upper, 1.0 - y0, y0)
    middle = inside & (y > _EXP_M2)
    ym = y[middle] - 0.5
    y2 = ym * ym
    out[middle] = (ym + ym * (y2 * _polevl(y2, _P0) / _p1evl(y2, _Q0))) * _S2PI
    tail = inside & ~middle
    if tail.any():
        yt = y[tail]
        x = np.sqrt(-2.0 * np.array([math.log(v) for v in yt.tolist()]))
        x0 = x - np.array([math.log(v) for v in x.tolist()]) / x
        z = 1.0 / x
        x1 = np.where(x < 8.0, z * _polevl(z, _P1) / _p1evl(z, _Q1),
                      z * _polevl(z, _P2) / _p1evl(z, _Q2))
        x = x0 - x1
        out[tail] = np.where(upper[tail], x, -x)
    return out

"""The anchor of a measured deployment between two measured concurrencies
(engine/predictive.anchor_shift): the two ends' discrepancies interpolated linearly in log C,
at standard draws rotated from the ends' own streams, as between two measured contexts
(tests/test_anchor_edges.py).

The nearest measured configuration (distance in C x M) anchored alone, so between two measured
concurrencies the answer jumped at their geometric midpoint: a black-box audit's fit of
Qwen3-30B-A3B-FP8 on one L40 with AR rows at C = 1 and C = 8 answered 118, 97, 82, 75 tok/s
per user at C = 1, 2, 3, 4 (C = 2 anchored to C = 1's discrepancy, C = 3 to C = 8's: -15%
from 2 to 3 against -9% from 3 to 4).

The fixture is tests/test_engine_effects.py's structured point mass (Kimi K2.6 on 8x B300)
with run sd 0.02 and structure sd 0.05, its bundled SGLang AR row at C = 1 (133 tok/s, the
structural step's 125) and SGLang AR rows added at higher C, all faster than the structural
step (same-sign discrepancies): every draw has the same parameters, so each anchor's spread
is the posterior of its configuration's discrepancy alone, computable by hand
(:func:`_posterior`)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ddtree_bayes.core.likelihood import offsets
from ddtree_bayes.engine import predictive as P
from test_engine_effects import structured_engine_fit

RUN_SD, STRUCTURE_SD = 0.02, 0.05
#: (C, context, tok/s) of the AR rows added: C = 8 at 700 tok/s (the structural step's 536.5,
#: r = +0.27; C = 1's bundled row r = +0.06), as the audit's fit had C = 1 and C = 8
AT_8 = ((8, 0.0, 700.0),)
#: C = 16 at 960 (structural 850): C = 4 is halfway between C = 1 and C = 16 in log C
AT_16 = ((16, 0.0, 960.0),)
#: C = 16 and C = 256 (structural 850 and 7973): C = 17 is 2.2% of the way from 16 to 256
WIDE = ((16, 0.0, 960.0), (256, 0.0, 10500.0))
#: C = 1 and C = 8 at context 0 and at 65536 (structural 100 and 431.7 tok/s there)
NESTED = ((8, 0.0, 700.0), (1, 65536.0, 112.0), (8, 65536.0, 560.0))


def _fit(rows, n: int = 4000, nu: float | None = None):
    d = structured_engine_fit(n)
    d.variables["noise_sd"] = np.full(d.n_draws, RUN_SD)
    d.variables["structure_sd"] = np.full(d.n_draws, STRUCTURE_SD)
    # (a fit of rows at C > 1 samples the context term's concurrency exponent: a point here, so
    # the structural step at C > 1 and a long context is one number too)
    d.variables["ctx_batch_exponent"] = np.full(d.n_draws, 0.6)
    if nu is not None:   # a Student-t likelihood: the anchor is a scale mixture
        d.variables["likelihood_nu"] = np.full(d.n_draws, nu)
    lines = d.data_csv.rstrip("\n").split("\n")
    text = [lines[0] + ",concurrency", *(ln + "," for ln in lines[1:])]
    text += [f"kimi-k2.6,b300,8,sglang,ar,,,1,1.0,{'' if ctx == 0 else int(ctx)},{tok},test,,{c}"
             for c, ctx, tok in rows]
    return dataclasses.replace(d, data_csv="\n".join(text) + "\n", memo={})


def _ar(d, c: int, context: float = 0.0):
    return P.resolve_scenario(d, hardware="b300", gpus=8, engine="sglang", method="ar",
                              block=None, budget=None, verify_tokens=None,
                              context_tokens=context, concurrency=c)


def _structural(d, c: int, context: float = 0.0) -> float:
    with np.errstate(all="ignore"):
        parts = P.step_components(d, _ar(d, c, context), np.random.default_rng(0), anchor=False)
    return float(parts[0]["step"][0])


def _posterior(d, c: int, d_c: float, context: float = 0.0
               ) -> tuple[float, float, float | None]:
    """By hand, the AR configuration measured at C = ``c``: its discrepancy given its one row's
    residual r (log tok/s - log(1000 C) + log step) is Normal(A r / T, A - A^2 / T),
    A = (0.05 d_c)^2, T = A + 0.02^2; under a Student-t likelihood that variance is divided by
    a Gamma((nu + 1) / 2, scale 2 / (nu + r^2 / T)) weight (the scale returned; None: normal).
    (mean, normal variance, scale)."""
    rows = [r for r in d.measurements.rows if r.method == "ar" and r.engine == "sglang"
            and r.concurrency == c and (r.context_tokens or 0.0) == context]
    assert len(rows) == 1
    r = float(np.log(rows[0].tok_s) - offsets(rows)[0]) + math.log(_structural(d, c, context))
    a = (STRUCTURE_SD * d_c) ** 2
    total = a + RUN_SD ** 2
    nu = d.variables.get("likelihood_nu")
    scale = None if nu is None else 2.0 / (float(nu[0]) + r ** 2 / total)
    return a / total * r, a - a ** 2 / total, scale


def _stream(d, c: int, context: float = 0.0) -> np.ndarray:
    """The standard normals of the anchor stream of the AR configuration at C = ``c``
    (``keyed_rng(ANCHOR_SEED, repr(config))``, normal likelihood: no Gamma weights first)."""
    config = (_ar(d, c).pair, "sglang", "ar", c, context, None, None, 1, True)
    return P.keyed_rng(P.ANCHOR_SEED, repr(config)).standard_normal(d.n_draws)


def _sd(d, c: int, d_c: float) -> float:
    """By hand, the sd of the anchor at a measured C: sqrt(var), or with a Student-t likelihood
    sqrt(var x E[1 / weight]) = sqrt(var / (scale (k - 1))), k = (nu + 1) / 2."""
    _, var, scale = _posterior(d, c, d_c)
    if scale is None:
        return math.sqrt(var)
    k = (float(d.variables["likelihood_nu"][0]) + 1.0) / 2.0
    return math.sqrt(var / (scale * (k - 1.0)))


#: each measured configuration's distance from the other points on b300x8 (C x M, passes):
#: C = 1 (1, 0) from C = 8 (8, 0): log 8; C = 8 from the DDTree row (9, 1): log 2 (passes
#: 1 + 1 against 1 + 0); C = 16 from it log 2 too; C = 1 from C = 16 log 9 (the DDTree row,
#: M = 9, passes log 2, is nearer than 16)
D_C = {(AT_8, 1): math.log(8.0), (AT_8, 8): math.log(2.0),
       (AT_16, 1): math.log(9.0), (AT_16, 16): math.log(2.0)}


def test_the_hand_distances_are_the_models():
    for (rows, c), d_c in D_C.items():
        d = _fit(rows, n=8)
        assert P._nearest_measured(d, _ar(d, c))[2] == pytest.approx(d_c, rel=1e-12)


@pytest.mark.parametrize("nu", [None, 4.0])
def test_a_measured_concurrency_draws_its_own_stream_unchanged(nu):
    """At C = 1 and C = 8 the anchor is that configuration's own draws, from the stream keyed
    by it (a Gamma weight first under a Student-t likelihood, then the standard normals),
    mean + sqrt(var) z, digit for digit what predict drew before; and beyond the largest
    measured C (9, 16) the nearest measured one, C = 8, still anchors alone, its draws
    unchanged and its distance log(C / 8)."""
    d = _fit(AT_8, nu=nu)
    for c in (1, 8):
        mean, var, scale = _posterior(d, c, D_C[(AT_8, c)])
        config = (_ar(d, c).pair, "sglang", "ar", c, 0.0, None, None, 1, True)
        rng = P.keyed_rng(P.ANCHOR_SEED, repr(config))
        if scale is not None:
            var = var / rng.gamma((nu + 1.0) / 2.0, np.full(d.n_draws, scale))
        expected = mean + np.sqrt(var) * rng.standard_normal(d.n_draws)
        shift, distance, label = P.anchor_shift(d, _ar(d, c))
        np.testing.assert_allclose(shift, expected, rtol=1e-12, atol=1e-15)
        assert distance == 0.0 and "interpolated" not in label
        if c == 8:
            for beyond in (9, 16):
                shift_b, distance_b, label_b = P.anchor_shift(d, _ar(d, beyond))
                np.testing.assert_array_equal(shift_b, shift)
                assert distance_b == pytest.approx(math.log(beyond / 8))
                assert label_b == "ar (M = 1, C = 8, 1 row)"


def test_between_two_measured_concurrencies_the_anchor_is_interpolated_in_log_c():
    """At C = 2 (w = log 2 / log 8 = 1/3 of the way from C = 1 to C = 8) and C = 4 (w = 2/3)
    the anchor is ``(1 - w) e_1 + w e_8``, both ends' discrepancies at the standard normals
    ``cos(pi w / 2) z_1 + sin(pi w / 2) z_8`` of their own streams, draw by draw; the distance
    is the nearer end's (log 2 at both), the label names both. Before, C = 2 carried C = 1's
    discrepancy alone (mean +0.0598) and C = 3 C = 8's (+0.1995)."""
    d = _fit(AT_8)
    (m1, v1, _), (m8, v8, _) = (_posterior(d, c, D_C[(AT_8, c)]) for c in (1, 8))
    z1, z8 = _stream(d, 1), _stream(d, 8)
    assert m1 == pytest.approx(0.0598, abs=1e-4) and m8 == pytest.approx(0.1995, abs=1e-4)
    for c in (2, 4):
        w = math.log(c) / math.log(8.0)
        theta = 0.5 * math.pi * w
        z = math.cos(theta) * z1 + math.sin(theta) * z8
        expected = (1.0 - w) * (m1 + math.sqrt(v1) * z) + w * (m8 + math.sqrt(v8) * z)
        shift, distance, label = P.anchor_shift(d, _ar(d, c))
        np.testing.assert_allclose(shift, expected, rtol=1e-12, atol=1e-15)
        assert distance == pytest.approx(math.log(2.0))
        assert label == ("ar (M = 1, C = 1, 1 row) and ar (M = 1, C = 8, 1 row), "
                         "interpolated in concurrency")
        # (step_components: the anchored step is the structural one x exp(-shift), and its
        # note names the two ends)
        with np.errstate(all="ignore"):
            parts, how = P.step_components(d, _ar(d, c), np.random.default_rng(0))
        np.testing.assert_allclose(parts["step"], _structural(d, c) * np.exp(-expected),
                                   rtol=1e-12)
        assert how.endswith("interpolated in concurrency")


def _ends(d, lo: int, hi: int, context: float = 0.0):
    """The measured ends at C = ``lo`` and ``hi`` of a query between them, as anchor_shift
    finds them (the query at C = lo + 1)."""
    sc = _ar(d, lo + 1, context)
    return [P._measured_end(d, sc, P._nearest_measured(d, sc, at_context=context,
                                                       at_concurrency=c)) for c in (lo, hi)]


@pytest.mark.parametrize("nu", [None, 4.0])
def test_the_interpolation_starts_at_each_ends_own_draws(nu):
    """C is a whole number, so the interpolation itself (:func:`_interpolated_end`) at
    w -> 0 and w -> 1: each end's own draws, draw by draw (to 1e-7 at w = 1e-9; under a
    Student-t likelihood the Gamma weights pass through their normal scores, exact to
    ~1e-14); at w = 0 and 1 exactly, the end's own digits."""
    d = _fit(AT_8, nu=nu)
    lo, hi = _ends(d, 1, 8)
    for w, end in ((0.0, lo), (1e-9, lo), (1.0 - 1e-9, hi), (1.0, hi)):
        mixed = P._interpolated_end(d, lo, hi, w, 0.0, "test").value
        np.testing.assert_allclose(mixed, end.value, rtol=0.0,
                                   atol=1e-7 if 0.0 < w < 1.0 else 1e-12)


@pytest.mark.parametrize("nu", [None, 4.0])
def test_one_stream_above_a_measured_concurrency_draws_almost_as_it(nu):
    """C = 16 and C = 256 measured (discrepancies +0.09 and +0.27; the two ends' draws differ
    by a median 0.18): C = 17 is w = log(17/16) / log 16 = 2.2% of the way, and its anchor
    moves from C = 16's own draws by that share of the ends' difference (median 0.0039; 99%
    of draws within 5% of it, the rotation of the standard draws by pi w / 2 adding its
    share); C = 255 is C = 256's likewise (0.14% of the way)."""
    d = _fit(WIDE, nu=nu)
    e16, e256 = (P.anchor_shift(d, _ar(d, c))[0] for c in (16, 256))
    apart = float(np.median(np.abs(e256 - e16)))
    assert apart > 0.15
    for measured, inside in ((16, 17), (256, 255)):
        share = abs(math.log(inside / measured)) / math.log(256 / 16)
        at, (near, _, label) = P.anchor_shift(d, _ar(d, measured))[0], P.anchor_shift(
            d, _ar(d, inside))
        moved = np.abs(near - at)
        assert np.median(moved) == pytest.approx(share * apart, rel=0.1)
        assert np.quantile(moved, 0.99) < 0.05 * apart
        assert label.endswith("interpolated in concurrency")


@pytest.mark.parametrize("nu", [None, 4.0])
def test_halfway_the_anchor_and_the_answer_are_not_narrower(nu):
    """C = 4 is halfway between C = 1 and C = 16 in log C: the two ends' discrepancies move
    together, so the anchor's sd is the mean of the ends' (normal: 0.0197 and 0.0173, their
    A = (0.05 log 9)^2 and (0.05 log 2)^2, halfway 0.0185; nu = 4: 0.0236 and 0.0364, halfway
    0.0299), not the sqrt(sd_1^2 + sd_16^2) / 2 of the mean of two independent draws (0.0131;
    0.0217); and the answer's 90% interval per user (with run noise and the discrepancy for
    the distance log 4, as predict draws it: 24% of the median, 9% and 9% at the ends) is
    relatively no narrower than at the narrower end."""
    d = _fit(AT_16, n=20000, nu=nu)
    lo, hi = _sd(d, 1, D_C[(AT_16, 1)]), _sd(d, 16, D_C[(AT_16, 16)])
    for c, sd in ((1, lo), (16, hi)):   # the hand sds are the draws' at the ends
        assert np.std(P.anchor_shift(d, _ar(d, c))[0]) == pytest.approx(sd, rel=0.05)
    mid = float(np.std(P.anchor_shift(d, _ar(d, 4))[0]))
    assert mid == pytest.approx((lo + hi) / 2, rel=0.05)
    assert mid >= 0.95 * min(lo, hi)
    assert mid > 1.1 * math.hypot(lo, hi) / 2

    def width(c):
        sc = _ar(d, c)
        with np.errstate(all="ignore"):
            x = P.per_token_draws(d, sc, 20261130)[0]
        q5, q50, q95 = np.quantile(x, [0.05, 0.5, 0.95])
        return (q95 - q5) / q50

    assert width(4) >= min(width(1), width(16))


def _per_user(d, c: int, context: float = 0.0) -> float:
    with np.errstate(all="ignore"):
        return float(np.median(P.per_token_draws(d, _ar(d, c, context), 20261130)[0]))


def test_per_user_answers_fall_monotonely_between_two_measured_concurrencies():
    """The structural per-user step falls with C (125, 103.9, 92.1, 84.2, ..., 67.1 tok/s at
    C = 1..8), both measured rows are faster than it (discrepancies +0.06 at C = 1, +0.20 at
    C = 8): before, C = 2 carried C = 1's and C = 3 C = 8's, and the answer per user rose
    from C = 2 to C = 3 (predictive medians 132.8, 110.3, 112.5, 102.8 at C = 1..4).
    Interpolated in log C it falls at every step (132.8, 115.6, 105.3, 98.1, ..., 81.9), each
    step no larger than the one before (the structural curve flattens, the anchor is linear
    in log C), and the total grows."""
    d = _fit(AT_8, n=2000)
    users = np.array([_per_user(d, c) for c in range(1, 9)])
    assert np.all(np.diff(users) < 0), users
    drops = -np.diff(np.log(users))
    assert np.all(drops[1:] <= 1.05 * drops[:-1]), drops
    assert np.all(np.diff(np.arange(1, 9) * users) > 0), users


def _nested_stream(d, w_ctx: float, w_c: float) -> np.ndarray:
    z = {(ctx, c): _stream(d, c, ctx) for ctx in (0.0, 65536.0) for c in (1, 8)}
    tc, sc_ = math.cos(0.5 * math.pi * w_c), math.sin(0.5 * math.pi * w_c)
    at = {ctx: tc * z[(ctx, 1)] + sc_ * z[(ctx, 8)] for ctx in (0.0, 65536.0)}
    return (math.cos(0.5 * math.pi * w_ctx) * at[0.0]
            + math.sin(0.5 * math.pi * w_ctx) * at[65536.0])


def test_between_two_contexts_and_two_concurrencies_the_anchor_is_bilinear():
    """C = 1 and C = 8 measured at context 0 and at 65536: at context 16384 and C = 2 the
    anchor is interpolated in log C at each measured context, then in context (nested:
    bilinear in (context, log C)), the four corners' discrepancies at one set of standard
    draws, the corners' streams rotated together (first in C at each context, then in
    context), draw by draw by hand."""
    d = _fit(NESTED)
    corners = {}
    for ctx in (0.0, 65536.0):
        for c in (1, 8):
            sc = _ar(d, c, ctx)
            corners[(ctx, c)] = _posterior(d, c, P._nearest_measured(d, sc)[2], ctx)[:2]
    w_ctx, w_c = 0.25, math.log(2.0) / math.log(8.0)
    z = _nested_stream(d, w_ctx, w_c)
    expected = sum(
        (w_ctx if ctx else 1.0 - w_ctx) * (w_c if c == 8 else 1.0 - w_c)
        * (m + math.sqrt(v) * z) for (ctx, c), (m, v) in corners.items())
    shift, distance, label = P.anchor_shift(d, _ar(d, 2, 16384.0))
    np.testing.assert_allclose(shift, expected, rtol=1e-10, atol=1e-14)
    assert distance == pytest.approx(math.log(2.0))
    assert label == ("(ar (M = 1, C = 1, 1 row, at context 0) and ar (M = 1, C = 8, 1 row, "
                     "at context 0), interpolated in concurrency) and (ar (M = 1, C = 1, "
                     "1 row, at context 65536) and ar (M = 1, C = 8, 1 row, at context 65536),"
                     " interpolated in concurrency), interpolated in context")


@pytest.mark.parametrize("nu", [None, 4.0])
def test_the_nested_anchor_is_continuous_along_both_axes(nu):
    """Along context: at C = 2 (between C = 1 and 8 at both contexts) one token inside a
    measured context answers as it does, draw by draw (within 1e-4: the context weight moves
    by 1/65536). Along concurrency (a whole number: the interpolation itself): the context
    interpolation of the two contexts' C-interpolated ends at w_C -> 0 is the context
    interpolation of the C = 1 rows, which is the answer at C = 1 there, to 1e-7; at
    w_C -> 1 the C = 8 rows'."""
    d = _fit(NESTED, nu=nu)
    for edge, inside in ((0.0, 1.0), (65536.0, 65535.0)):
        at_edge, near = (P.anchor_shift(d, _ar(d, 2, ctx))[0] for ctx in (edge, inside))
        assert np.max(np.abs(near - at_edge)) < 1e-4
    w_ctx = 16384.0 / 65536.0
    for w_c, c in ((1e-9, 1), (1.0 - 1e-9, 8)):
        ends = []
        for ctx in (0.0, 65536.0):
            lo, hi = _ends(d, 1, 8, ctx)
            ends.append(P._interpolated_end(d, lo, hi, w_c, 0.0, "c"))
        mixed = P._interpolated_end(d, ends[0], ends[1], w_ctx, 0.0, "ctx").value
        at_c = P.anchor_shift(d, _ar(d, c, 16384.0))
        assert "interpolated in context" in at_c[2] and "concurrency" not in at_c[2]
        np.testing.assert_allclose(mixed, at_c[0], rtol=0.0, atol=1e-7)


def test_a_carried_anchor_is_interpolated_too():
    """native, with no rows of its own, carries SGLang's anchor whole (anchor_scenario): at
    C = 2 between SGLang's measured DDTree budget-8 tree at C = 1 and C = 8, the same
    interpolated draws as SGLang's own question there, without its own error (at_itself
    False in both ends' keys), a third of the way in log C, draw by draw."""
    d = _fit(())
    row = "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,,1500,test,,8\n"
    d = dataclasses.replace(d, data_csv=d.data_csv + row, memo={})

    def tree(engine, c):
        return P.resolve_scenario(d, hardware="b300", gpus=8, engine=engine, method="ddtree",
                                  block=8, budget=8, verify_tokens=None, context_tokens=0.0,
                                  concurrency=c)

    native = P.anchor_shift(d, tree("native", 2))
    sglang = P.anchor_shift(d, tree("sglang", 2))
    assert native[2] == sglang[2]
    assert native[2].endswith("interpolated in concurrency")
    assert np.all(np.isfinite(native[0])) and np.std(native[0]) > 0
    keys = [k for k in d.memo["anchor_shift"] if k[0] != "interpolated"]
    assert {k[-1] for k in keys} == {True, False}   # (SGLang's own ends, native's carried)
    # draw by draw: SGLang's C = 1 and C = 8 ends without their own error, a third of the way
    # in log C (log 2 / log 8), and not SGLang's own answer (which carries that error)
    sc = tree("sglang", 2)
    lo, hi = (P._measured_end(d, sc, P._nearest_measured(d, sc, at_context=0.0,
                                                          at_concurrency=c), own=False)
              for c in (1, 8))
    carried = P._interpolated_end(d, lo, hi, math.log(2.0) / math.log(8.0), 0.0, "c").value
    np.testing.assert_allclose(native[0], carried, rtol=1e-12, atol=1e-15)
    assert not np.allclose(native[0], sglang[0])

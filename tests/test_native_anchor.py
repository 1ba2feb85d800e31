"""An engine with no measurements of its own (``native``: its speculative overhead is SGLang's
x (1 - reduction), docs/model.md "Engine relations") answers from SGLang's anchored step.

On the structured B300 point mass (tests/test_structure_model.structured_point_mass; no
run-to-run noise, so the whole residual of the measured SGLang DDTree budget-8 row is that
configuration's discrepancy) the structural budget-8 step is VERIFY(9) + 4 + SPEC(8) =
16.842 ms and the row measures 4.4 / 303 x 1000 = 14.521 ms: the anchor scales SGLang's step,
every term of it, by f = 14.521 / 16.842 = 0.8622. Native unanchored paid the structural
step with half of SGLang's structural SPEC: 24.470 ms at budget 32 against SGLang's anchored
21.836 (490 against 550 tok/s at acceptance 12), slower although its overhead is half of
SGLang's. Carried whole, native's step is SGLang's anchored target step plus half of SGLang's
anchored SPEC: f x (VERIFY(33) + 4 + SPEC(32) / 2) = 21.098 ms (569 tok/s).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ddtree_bayes.engine import predictive as P
from test_structure_model import structured_point_mass

MEASURED_B8_MS = 4.4 / 303.0 * 1000.0   # the bundled SGLang DDTree budget-8 row
MEASURED_AR_MS = 1000.0 / 133.0         # the bundled SGLang AR row


def _verify(m: int) -> float:
    """The point mass's roofline VERIFY(M) (test_structure_model's by-hand formula)."""
    distinct = 384 * (1 - (1 - 8 / 384) ** m) / 8
    return 4 * (distinct ** 1.5 + (0.01 * m) ** 3) ** (1 / 3) / (1 + 0.01 ** 3) ** (1 / 3)


def _spec(budget: int) -> float:
    """SGLang's structural SPEC: 8 ms x (fixed 0.05 + one pass 0.1 + 0.002 per node)."""
    return 8 * (0.05 + 0.1 + 0.002 * budget)


def _asked(draws, engine: str, budget: int | None, method: str = "ddtree"):
    block = None if budget is None else (8 if budget == 8 else 16)
    return P.resolve_scenario(draws, hardware="b300", gpus=8, engine=engine, method=method,
                              block=block, budget=budget, verify_tokens=None,
                              context_tokens=0.0)


def _step(draws, engine: str, budget: int | None, method: str = "ddtree"):
    parts, how = P.step_components(draws, _asked(draws, engine, budget, method),
                                   np.random.default_rng(0))
    return parts, how


def test_native_carries_sglangs_anchor_whole():
    draws = structured_point_mass()
    f = MEASURED_B8_MS / (_verify(9) + 4 + _spec(8))
    assert f == pytest.approx(0.86223, abs=1e-5)
    sglang, _ = _step(draws, "sglang", 32)
    native, how = _step(draws, "native", 32)
    assert sglang["step"][0] == pytest.approx(f * (_verify(33) + 4 + _spec(32)), rel=1e-9)
    # SGLang's anchored target step, and half of SGLang's anchored overhead (reduction 0.5)
    assert native["step"][0] == pytest.approx(f * (_verify(33) + 4 + _spec(32) / 2), rel=1e-9)
    assert native["step"][0] == pytest.approx(21.098, abs=1e-3)
    assert native["spec"][0] == pytest.approx(0.5 * sglang["spec"][0], rel=1e-12)
    for part in ("moe", "attn_base", "context"):
        assert native[part][0] == pytest.approx(sglang[part][0], rel=1e-12)
    # 569 tok/s at acceptance 12, where SGLang's is 550 (unanchored native was 490)
    assert 12_000 / native["step"][0] == pytest.approx(568.8, abs=0.1)
    assert 12_000 / sglang["step"][0] == pytest.approx(549.5, abs=0.1)
    # its discrepancy grows from the same measured configuration as SGLang's
    assert native["log_sd"][0] == pytest.approx(sglang["log_sd"][0], rel=1e-12)
    assert native["log_sd"][0] == pytest.approx(0.04 * math.log(33 / 9), rel=1e-9)
    # the note says what is carried from the SGLang measurement
    assert how.endswith("; anchored to the measured sglang ddtree block 8 budget 8 (M = 9, "
                        "1 row), carried from sglang (no native ddtree row there): its target step "
                        "and its overhead x (1 - reduction)")


def test_native_at_sglangs_measured_configuration_is_the_measurement_less_its_cut():
    """At SGLang's measured budget 8: the measured step less 0.5 of SGLang's anchored SPEC,
    14.521 - 0.5 x 0.8622 x 1.328 = 13.949 ms; and AR, where native has no overhead to cut,
    is SGLang's measured AR step (7.519 ms; the structural 8 ms before)."""
    draws = structured_point_mass()
    f = MEASURED_B8_MS / (_verify(9) + 4 + _spec(8))
    sglang, _ = _step(draws, "sglang", 8)
    native, _ = _step(draws, "native", 8)
    assert sglang["step"][0] == pytest.approx(MEASURED_B8_MS, rel=1e-9)
    assert native["step"][0] == pytest.approx(MEASURED_B8_MS - 0.5 * f * _spec(8), rel=1e-9)
    assert native["step"][0] == pytest.approx(13.949, abs=1e-3)
    ar_native, how = _step(draws, "native", None, method="ar")
    ar_sglang, _ = _step(draws, "sglang", None, method="ar")
    assert ar_native["step"][0] == pytest.approx(MEASURED_AR_MS, rel=1e-9)
    assert ar_native["step"][0] == ar_sglang["step"][0]
    assert how.endswith("carried from sglang (no native ar row there): its step, with no "
                        "overhead to cut")


def test_native_is_no_slower_than_sglang_draw_by_draw():
    """With a spread of parameters (reduction and the anchor's discrepancy per draw), native
    is faster in every draw: its step is SGLang's less reduction x SGLang's anchored SPEC,
    both anchored to the same draws of the measured row's discrepancy."""
    rng = np.random.default_rng(7)
    n = 64
    draws = structured_point_mass(n=n, run_sd=0.03, config_sd=0.02)
    draws.variables["reduction"] = rng.beta(4, 6, (n, 1))
    draws.variables["structure_sd"] = rng.uniform(0.01, 0.1, n)
    sglang, _ = _step(draws, "sglang", 32)
    native, _ = _step(draws, "native", 32)
    cut = draws.variables["reduction"][:, 0] * sglang["spec"]
    np.testing.assert_allclose(native["step"], sglang["step"] - cut, rtol=1e-12)
    assert np.all(native["step"] < sglang["step"])


def test_a_measured_native_row_anchors_native_itself():
    """A native row of its own (330 tok/s at acceptance 4.4, budget 8) anchors native there:
    the measured 13.333 ms, not SGLang's anchor carried."""
    base = structured_point_mass()
    row = "kimi-k2.6,b300,8,native,ddtree,8,8,9,4.4,,330,test,\n"
    text = base.data_csv if base.data_csv.endswith("\n") else base.data_csv + "\n"
    draws = dataclasses.replace(base, data_csv=text + row, memo={})
    native, how = _step(draws, "native", 8)
    assert native["step"][0] == pytest.approx(4.4 / 330 * 1000, rel=1e-9)
    assert how.endswith("; anchored to the measured ddtree budget 8 (M = 9, 1 row)")


def test_native_at_sglangs_measured_shape_has_its_own_configuration_error():
    """Native is another engine build: at SGLang's measured budget 8 it carries the structural
    discrepancy SGLang's row shows of the deployment, not SGLang's own configuration error
    (config_sd), which is SGLang's build's and harness's. Its own is new, in its spread:
    run 0.03 and config 0.02 give sqrt(0.03^2 + 0.02^2) = 0.036 at distance 0 (SGLang,
    whose own error the anchor has drawn, 0.030). It was 0.030 for native too, with SGLang's
    own error drawn into native's step."""
    draws = structured_point_mass(run_sd=0.03, config_sd=0.02)
    sglang, _ = _step(draws, "sglang", 8)
    native, _ = _step(draws, "native", 8)
    assert sglang["log_sd"][0] == pytest.approx(0.03, rel=1e-9)
    assert native["log_sd"][0] == pytest.approx(math.hypot(0.03, 0.02), rel=1e-9)
    assert native["log_sd"][0] == pytest.approx(0.036, abs=5e-4)
    assert P.carries_own_error(draws, _asked(draws, "sglang", 8))
    assert not P.carries_own_error(draws, _asked(draws, "native", 8))

    # the anchor native carries is the row's structural discrepancy alone: per draw the
    # factor SGLang's budget 32 (another shape, none of the row's own error) carries, not
    # the one SGLang's budget 8 carries (its own error too)
    def factor(engine: str, budget: int) -> np.ndarray:
        asked = _asked(draws, engine, budget)
        rng = np.random.default_rng(0)
        return (P.step_components(draws, asked, rng)[0]["step"]
                / P.step_components(draws, asked, rng, anchor=False)[0]["step"])

    np.testing.assert_allclose(factor("native", 8), factor("sglang", 32), rtol=1e-12)
    assert not np.allclose(factor("native", 8), factor("sglang", 8), rtol=1e-6)


def test_a_native_row_without_accept_len_leaves_the_carry_and_the_note_says_so():
    """A native row with a blank accept_len (330 tok/s at budget 8) cannot anchor native: the
    anchor turns a row's tok/s into its step through the measured acceptance. Native still
    carries SGLang's anchor (budget 8: 14.521 - 0.5 x 0.8622 x 1.328 = 13.949 ms, not the
    structural 16.178), and the note no longer says there is no native row there."""
    base = structured_point_mass()
    row = "kimi-k2.6,b300,8,native,ddtree,8,8,9,,,330,test,\n"
    text = base.data_csv if base.data_csv.endswith("\n") else base.data_csv + "\n"
    draws = dataclasses.replace(base, data_csv=text + row, memo={})
    f = MEASURED_B8_MS / (_verify(9) + 4 + _spec(8))
    for budget in (8, 32):
        native, how = _step(draws, "native", budget)
        assert "(no native ddtree row there)" not in how
        carried = ("carried from sglang (no native ddtree row with a measured acceptance "
                   "there): its target step and its overhead x (1 - reduction)")
        # at budget 8 the note says too that the native row itself anchors nothing
        own = ("; not anchored to its own measured row (ddtree block 8 budget 8, M = 9: 330 "
               "tok/s): its accept_len is blank, so its acceptance is inferred and it anchors "
               "nothing: this answer need not match that row's tok/s")
        assert how.endswith(carried + (own if budget == 8 else "")), how
    native, _ = _step(draws, "native", 8)
    assert native["step"][0] == pytest.approx(MEASURED_B8_MS - 0.5 * f * _spec(8), rel=1e-9)
    # with no native row at all the words are as they were
    _, how = _step(base, "native", 8)
    assert how.endswith("carried from sglang (no native ddtree row there): its target step "
                        "and its overhead x (1 - reduction)")


def test_student_t_noise_at_sglangs_measured_configuration_is_t_for_natives_own_error():
    """Under a Student-t likelihood the anchor of a measured configuration has drawn its own
    deviation, and a run about it is normal (SGLang at budget 8: run 0.03, nothing as t).
    Native's own configuration error is not drawn (its build is another): it deviates as a
    new configuration's error does, t with the fit's nu (config 0.02), and its run's scatter
    about that is normal, as SGLang's is; at budget 32 its discrepancy for the distance from
    the anchor (0.04 x log(33 / 9)) is t too."""
    draws = structured_point_mass(likelihood_nu=4.0, run_sd=0.03, config_sd=0.02)

    def parts(engine, budget):
        sc = _asked(draws, engine, budget)
        log_sd = P.step_components(draws, sc, np.random.default_rng(0))[0]["log_sd"]
        normal, heavy, nu = P.noise_parts(draws, sc, log_sd)
        return float(normal[0]), float(heavy[0]), nu

    assert parts("sglang", 8) == (pytest.approx(0.03), 0.0, 4.0)
    assert parts("native", 8) == (pytest.approx(0.03), pytest.approx(0.02), 4.0)
    assert parts("native", 32) == (pytest.approx(0.03),
                                   pytest.approx(math.hypot(0.02, 0.04 * math.log(33 / 9))), 4.0)
    # a native measurement would still be a new configuration (next's candidates)
    assert not P.at_measured_configuration(draws, _asked(draws, "native", 8))

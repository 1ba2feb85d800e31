"""scripts/overhead_predictors.py: a group's fixed and per-pass cost by least squares, and
the leave-one-group-out error of a predictor, on numbers computed by hand (no fit)."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location(
        "overhead_predictors", REPO / "scripts" / "overhead_predictors.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


OP = _module()


def _config(passes, spec, target=10.0, nodes=0.0):
    return {"passes": passes, "nodes": nodes, "spec_ms": spec, "target_ms": target,
            "step_ms": target + spec}


def test_a_chain_groups_costs_are_its_least_squares_line():
    """SPEC 2 + 1.5 x passes at 1-4 passes, with +0.1 / -0.1 ms on the middle two: the
    slope moves by sum (p - 2.5) r / sum (p - 2.5)^2 = (-0.5 x 0.1 + 0.5 x -0.1) / 5 = -0.02
    and the line keeps the means (2.5, 5.75): 2.05 + 1.48 x passes."""
    got = OP.split_costs([_config(1, 3.5), _config(2, 5.1), _config(3, 6.4), _config(4, 8.0)])
    assert got["identified"] == ["fixed", "pass"]
    assert got["fixed_ms"] == pytest.approx(2.05)
    assert got["pass_ms"] == pytest.approx(1.48)
    # residuals -0.03, +0.09, -0.09, +0.03: s^2 = 0.018 / 2 dof, var(slope) = s^2 / 5
    assert got["pass_se"] == pytest.approx(math.sqrt(0.009 / 5))


def test_a_group_at_one_number_of_passes_gives_its_sum_only():
    """Three context points at 3 passes: no split, the fixed cost plus three passes' mean."""
    got = OP.split_costs([_config(3, 6.0), _config(3, 7.0), _config(3, 8.0)])
    assert got["identified"] == ["fixed"]
    assert got["fixed_plus_pass_ms"] == pytest.approx(7.0)
    assert "pass_ms" not in got


def _group(name, pass_ms, roofline=1.0, engine="e", fixed_ms=1.0, stream=0.1):
    return {"group": name, "engine": engine, "method": "mtp", "hybrid": False,
            "gpu_class": "HBM", "pass_ms": pass_ms, "fixed_ms": fixed_ms,
            "roofline_ms": roofline, "pass_stream_ms": stream, "step_ar_ms": 10.0,
            "target_stream_ms": 5.0, "target_layers": 32, "drafter_layers": 1}


def test_leave_one_group_out_predicts_from_the_other_groups_mean_log_ratio():
    """Passes of 1, 2 and 4 ms at a 1 ms roofline, pooled: A held out is predicted at
    exp(mean(log 2, log 4)) = 2.83 ms, error log(1 / 2.83) = -1.5 log 2; B at exp(mean(0,
    log 4)) = 2 ms, error 0; C at exp(mean(0, log 2)) = 1.41 ms, error +1.5 log 2. Mean 0, sd
    1.5 log 2 = 1.0397."""
    groups = [_group("A", 1.0), _group("B", 2.0), _group("C", 4.0)]
    got = OP.logo(groups, "pass", OP.PASS_NORMS["roofline"], OP.CATEGORIES["none"])
    assert got["groups"] == 3
    assert got["errors"] == {"A": pytest.approx(-1.04, abs=1e-3), "B": 0.0,
                             "C": pytest.approx(1.04, abs=1e-3)}
    assert got["bias"] == pytest.approx(0.0, abs=1e-12)
    assert got["sd"] == pytest.approx(1.5 * math.log(2))
    # the roofline divides: at rooflines 1, 2, 4 the three multiples are all 1, no error
    scaled = [_group("A", 1.0, 1.0), _group("B", 2.0, 2.0), _group("C", 4.0, 4.0)]
    assert OP.logo(scaled, "pass", OP.PASS_NORMS["roofline"],
                   OP.CATEGORIES["none"])["rms"] == pytest.approx(0.0, abs=1e-12)


def test_a_group_alone_in_its_category_falls_back_to_every_other_group():
    """A and B in engine e (1 and 2 ms), C alone in f (4 ms): C is predicted from A and B
    (exp(mean(0, log 2)) = 1.41 ms) and counted as fallen back; A from B alone, B from A."""
    groups = [_group("A", 1.0), _group("B", 2.0), _group("C", 4.0, engine="f")]
    got = OP.logo(groups, "pass", OP.PASS_NORMS["ms"], OP.CATEGORIES["engine"])
    assert got["fallback"] == 1
    assert got["errors"]["A"] == pytest.approx(-math.log(2), abs=1e-3)
    assert got["errors"]["B"] == pytest.approx(math.log(2), abs=1e-3)
    assert got["errors"]["C"] == pytest.approx(1.5 * math.log(2), abs=1e-3)


def test_a_cost_the_physics_forbids_is_left_out():
    """A pass faster than reading its drafter's bytes (0.05 ms against 0.1 ms) and a negative
    fixed cost are not a group's cost but its noise: the tables leave them out."""
    groups = [_group("A", 1.0), _group("B", 2.0), _group("C", 0.05, fixed_ms=-0.5)]
    assert OP.logo(groups, "pass", OP.PASS_NORMS["ms"], OP.CATEGORIES["none"])["groups"] == 2
    assert OP.logo(groups, "fixed", OP.FIXED_NORMS["ms"], OP.CATEGORIES["none"])["groups"] == 2


def test_the_steps_error_is_the_held_out_groups_own_configurations():
    """Two chain groups with fixed 1 ms and passes 1 / 2 ms at a 10 ms target, each measured at
    2 and 4 passes. Held out with the other's costs (pooled, in ms): A (pass 1) is predicted at
    pass 2: steps 10 + 1 + 2 x 2 = 15 and 19 against 13 and 15 measured, errors log(13/15) and
    log(15/19), mean -0.190; B the other way, log(15/13) and log(19/15), mean +0.190. With the
    group's own costs the error is 0."""
    a = {**_group("A", 1.0), "configs": [_config(2, 3.0), _config(4, 5.0)]}
    b = {**_group("B", 2.0), "configs": [_config(2, 5.0), _config(4, 9.0)]}
    got = OP.step_logo([a, b], ("ms", "none"), ("ms", "none"))
    want = (math.log(13 / 15) + math.log(15 / 19)) / 2
    assert got["errors"] == {"A": pytest.approx(want, abs=1e-3),
                             "B": pytest.approx(-want, abs=1e-3)}
    assert got["rms"] == pytest.approx(-want)
    assert OP.step_logo([a, b], None, None)["rms"] == pytest.approx(0.0, abs=1e-12)


def test_a_log_sd_is_read_as_validates_width():
    """(hi90 - lo90) / median of a log-normal: e^(1.645 s) - e^(-1.645 s); issue 20's 35%
    target is s = asinh(0.175) / 1.645 = 0.1058."""
    assert OP.width(0.1058) == pytest.approx(0.35, abs=1e-3)
    assert OP.width(0.25) == pytest.approx(math.exp(0.41125) - math.exp(-0.41125))


def test_the_choice_made_without_a_group_predicts_it():
    """Three chain groups alike in every normaliser and category, fixed 1 ms and pass 2 ms at
    a 10 ms target: whatever combination the other two choose predicts the third exactly
    (steps 15 and 19 at 2 and 4 passes), so the nested RMS is 0; a third group at twice the
    costs (steps 20, 28) is then predicted at 15, 19: log(20/15), log(28/19) (mean 0.3378),
    whichever combination is chosen, every normaliser being equal (errors kept to 3 decimals)."""
    def chain(name, fixed, pas):
        return {**_group(name, pas, fixed_ms=fixed),
                "configs": [_config(2, fixed + 2 * pas), _config(4, fixed + 4 * pas)]}

    same = [chain("A", 1.0, 2.0), chain("B", 1.0, 2.0), chain("C", 1.0, 2.0)]
    assert OP.nested_step(same)["rms"] == pytest.approx(0.0, abs=1e-12)
    odd = [chain("A", 1.0, 2.0), chain("B", 1.0, 2.0), chain("C", 2.0, 4.0)]
    got = OP.nested_step(odd)["errors"]["C"]
    assert got == pytest.approx((math.log(20 / 15) + math.log(28 / 19)) / 2, abs=1e-3)

"""An answer nothing anchors, at a point the fit measured, carries the discrepancy the
likelihood gives a configuration there (engine/predictive.step_components).

The likelihood gives each configuration c a discrepancy ``e_c ~ Normal(0, (structure_sd
d_c)^2)``, d_c its distance from the *other* points measured on its system
(core/likelihood.config_distances). ``predict`` draws e_c back from its posterior where the
configuration's rows can anchor it (a measured accept_len); where they cannot (rows with a
blank accept_len: the acceptance is inferred, and such rows anchor nothing), or where the
query is another configuration at a measured point (an engine with no AR row of its own on a
system another engine measured AR on), the answer was the structural step with the run-to-run
noise alone: the query's distance from "the nearest measured configuration" was 0, itself.
Its interval was then narrower than the fit's own posterior predictive check at that row:
on the Kimi K2.6 EAGLE-3 concurrency sweep on 8x RTX PRO 6000 (data/public/conc, dcp1: 40 rows
with a blank accept_len, fitted with the bundled B300 rows) 13 of the 40 measured rows fell
outside predict's 90% interval at their own configuration (the fit's check: 4 of 40; the 42 AR
rows, anchored: 0 of 42); at context 65536 and one stream, 99.5 tok/s measured, predict 87
(90% 81-93), the fit's check 87 (76-99).

The fixture is the structured point mass of tests/test_anchor_edges.py: SGLang on 8x B300, an
AR row (133 tok/s, accept_len 1) and a DDTree block 8 budget 8 row (303 tok/s) whose
accept_len is blank here, run sd 0.02, structure sd 0.05. Both points' distance from the other
is log 9 (M = 9 against 1; the passes 1 against 0 are log 2 apart).
"""
from __future__ import annotations

import math

import numpy as np

from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.question import Flags, resolve
from test_engine_effects import structured_engine_fit

RUN_SD, STRUCTURE_SD = 0.02, 0.05
D_C = math.log(9.0)   # each of the two measured points from the other


def _fit(blank_tree_accept: bool = True):
    d = structured_engine_fit(8)
    d.variables["noise_sd"] = np.full(d.n_draws, RUN_SD)
    d.variables["structure_sd"] = np.full(d.n_draws, STRUCTURE_SD)
    if not blank_tree_accept:
        return d
    tree = next(ln for ln in d.data_csv.splitlines()
                if ln.startswith("kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,,303,"))
    blank = tree.replace(",9,4.4,,303,", ",9,,,303,", 1)
    return d.view(data_csv=d.data_csv.replace(tree, blank, 1))


def _log_sd(d, **flags) -> float:
    sc = resolve(d, Flags(**flags)).asked[0].scenario
    parts, how = P.step_components(d, sc, np.random.default_rng(0))
    sd = np.asarray(parts["log_sd"])
    assert np.allclose(sd, sd[0])   # (a point mass: one value)
    return float(sd[0]), how


def test_a_measured_configuration_that_cannot_anchor_carries_its_discrepancy():
    """The DDTree budget-8 rows have no accept_len: nothing anchors the answer there, whose sd
    is then sqrt(0.02^2 + (0.05 log 9)^2) = 0.1117, the likelihood's for a row of it, not the
    run noise's 0.02 alone."""
    d = _fit()
    sd, how = _log_sd(d, engines=("sglang",), method="ddtree", block=8, budget=8, accept="4.4")
    assert "anchored to the measured" not in how
    assert math.isclose(sd, math.hypot(RUN_SD, STRUCTURE_SD * D_C), rel_tol=1e-9)


def test_the_same_configuration_anchored_keeps_its_answer():
    """With the row's accept_len (4.4) the answer is anchored to it, as before: its own sd is
    the run noise (the discrepancy is drawn from its posterior, not added again)."""
    d = _fit(blank_tree_accept=False)
    sd, how = _log_sd(d, engines=("sglang",), method="ddtree", block=8, budget=8, accept="4.4")
    assert "anchored to the measured ddtree" in how
    assert math.isclose(sd, RUN_SD, rel_tol=1e-9)


def test_another_engine_at_a_measured_point_carries_a_new_configurations_discrepancy():
    """vLLM AR on the B300, which measured SGLang AR only: a new configuration at the measured
    point M = 1, its discrepancy the likelihood's for it (0.05 log 9), not 0."""
    d = _fit(blank_tree_accept=False)
    sd, how = _log_sd(d, engines=("vllm",), method="ar")
    assert "anchored to the measured" not in how
    assert math.isclose(sd, math.hypot(RUN_SD, STRUCTURE_SD * D_C), rel_tol=1e-9)


def test_a_query_between_measured_points_keeps_its_distance():
    """Unanchored away from every measured point (DDTree budget 32, M = 33: log(33 / 9) from
    the budget-8 point) the distance is the nearest point's, as it always was."""
    d = _fit()
    sd, _ = _log_sd(d, engines=("sglang",), method="ddtree", block=16, budget=32, accept="14")
    assert math.isclose(sd, math.hypot(RUN_SD, STRUCTURE_SD * math.log(33 / 9)), rel_tol=1e-9)


def test_a_measured_configuration_without_accept_len_says_it_does_not_anchor_the_answer():
    """`predict --model kimi-k2.6 --hardware h200 --engine vllm --method eagle3 --block 3` of
    the multi-model example answered 125 (103-149) where that configuration measured 144.5
    tok/s, with nothing saying why: the row's accept_len is blank, its acceptance inferred, and
    such a row anchors nothing. The note says so, naming the row and its tok/s; the numbers
    are unchanged (the sd is the unanchored one of the test above)."""
    d = _fit()
    sd, how = _log_sd(d, engines=("sglang",), method="ddtree", block=8, budget=8, accept="4.4")
    assert math.isclose(sd, math.hypot(RUN_SD, STRUCTURE_SD * D_C), rel_tol=1e-9)
    assert how.endswith(
        "; not anchored to its own measured row (ddtree block 8 budget 8, M = 9: 303 tok/s): "
        "its accept_len is blank, so its acceptance is inferred and it anchors nothing: this "
        "answer need not match that row's tok/s"), how
    # the note reaches predict's table
    (row,) = P.predict_rows(d, resolve(d, Flags(engines=("sglang",), method="ddtree", block=8,
                                                  budget=8, accept="4.4")), seed=0)
    assert "not anchored to its own measured row (ddtree block 8 budget 8" in row["overhead_from"]
    # with the row's accept_len it anchors, and no such clause
    _, how = _log_sd(_fit(blank_tree_accept=False), engines=("sglang",), method="ddtree",
                     block=8, budget=8, accept="4.4")
    assert "not anchored to its own measured row" not in how
    # another configuration (budget 16) was never measured: no such clause either
    _, how = _log_sd(d, engines=("sglang",), method="ddtree", block=8, budget=16, accept="4.4")
    assert "not anchored to its own measured row" not in how

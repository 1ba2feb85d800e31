"""Which measured system's rows stand behind a question (engine/transfer.rows_behind): one
record that the step's parameters, the query's distance, its concurrency discrepancy,
predict's and optimize's warnings, --explain and the report all read."""

from __future__ import annotations

import dataclasses

import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.engine.question import Flags, resolve
from ddtree_bayes.engine.structure import (
    concurrency_beyond,
    concurrency_reference,
    draft_structure,
    query_distance,
)
from ddtree_bayes.engine.testing import multi_model_draws, point_mass_draws
from ddtree_bayes.engine.transfer import RowsBehind, measured_rows, rows_behind

pytestmark = pytest.mark.fast


def scenario(draws, **flags):
    return resolve(draws, Flags(**flags)).asked[0].scenario


def wide():
    """The point-mass fit with b300x8's AR measured at C = 8 and 32 besides (context blank:
    the priors' default 0)."""
    d = point_mass_draws()
    lines = d.data_csv.splitlines()
    rows = [ln + "," for ln in lines[1:]] + [
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,800,test,,8",
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,1200,test,,32"]
    return d.view(data_csv="\n".join([lines[0] + ",concurrency", *rows]) + "\n")


def test_a_measured_system_stands_behind_itself_with_its_rows_maxima():
    """b300x8's bundled rows: AR (M = 1) and DDTree budget 8 (M = 9), one stream each, at a
    blank context (0): C 1, M 9, C x M 9, context 0. With AR at C = 8 and 32 added: C 32, M
    still 9, C x M 32 x 1 = 32."""
    d = point_mass_draws()
    assert rows_behind(d, scenario(d)) == RowsBehind(
        "b300x8", True, "b300x8", max_concurrency=1, max_verify_tokens=9, max_tokens=9,
        max_context=0.0)
    w = wide()
    b = rows_behind(w, scenario(w))
    assert (b.max_concurrency, b.max_verify_tokens, b.max_tokens) == (32, 9, 32)
    assert b.transferred_from is None


def test_an_unmeasured_system_stands_on_the_system_it_is_transferred_from():
    """h200x8 (never measured; b300x8 the only system the fit has): its record is b300x8's
    rows under its own name, and every reader counts from them: the concurrency discrepancy
    (AR at C = 64 against b300x8's C = 32: log2(64 / 32) = 1 doubling), the distance (equal to
    the same shape's on b300x8 itself)."""
    w = wide()
    sc = dataclasses.replace(scenario(w, hardware="h200", method="ar", engines=("sglang",),
                                      accept="1"), concurrency=64)
    b = rows_behind(w, sc)
    assert (b.asked, b.measured, b.reference, b.transferred_from, b.pair_roofline) == (
        "h200x8", False, "b300x8", "b300x8", False)
    assert (b.max_concurrency, b.max_tokens) == (32, 32)
    assert concurrency_reference(w, sc) == ("b300x8", 32)
    assert concurrency_beyond(w, sc) == pytest.approx(1.0)
    d = point_mass_draws()
    h200, b300 = (scenario(d, hardware=h, accept="14") for h in ("h200", "b300"))
    passes = draft_structure(d.meta["model"], h200.method, h200.block, h200.budget)[0]
    assert query_distance(d, h200, passes) == query_distance(d, b300, passes) > 0


def test_a_pair_never_measured_in_a_fit_of_several_models_stands_on_the_pair_roofline():
    """kimi-k2.6 on 8x H200 in a fit of Kimi on B300 and Llama on one H100: no system's rows,
    the pair roofline's M = 1 step (distance from M = 1 at 0 drafter passes); the pairs it
    was learned from and their largest M and C x M (9: Kimi's DDTree budget 8 on B300), which
    its warnings count against, no concurrency of its own."""
    m = multi_model_draws()
    sc = scenario(m, model="kimi-k2.6", hardware="h200", gpus=8, engines=("sglang",),
                  accept="14")
    b = rows_behind(m, sc)
    assert b == RowsBehind("kimi-k2.6@h200x8", False, None, pair_roofline=True,
                           max_verify_tokens=9, max_tokens=9,
                           learned_from=("kimi-k2.6@b300x8", "llama-3.1-8b-instruct@h100x1"),
                           max_tokens_on="kimi-k2.6@b300x8")
    assert b.transferred_from is None and concurrency_reference(m, sc) == (sc.pair, 1)
    passes = draft_structure(m.meta["model"], sc.method, sc.block, sc.budget)[0]
    assert query_distance(m, sc, passes) == pytest.approx(
        S.config_distance(33.0, passes, [1.0], [0.0]))
    assert rows_behind(m, scenario(m, model="kimi-k2.6", hardware="b300", gpus=8,
                                   accept="14")).reference == "kimi-k2.6@b300x8"


def test_rows_of_a_system_the_fit_has_no_parameters_for_do_not_stand_behind_it():
    """The point-mass fit's data holds the bundled rtx-pro-6000x8 rows but its parameters are
    b300x8's alone: rtx-pro-6000x8 is transferred from b300x8, as its step is; its own rows
    are still there to read (measured_rows)."""
    d = point_mass_draws()
    b = rows_behind(d, scenario(d, hardware="rtx-pro-6000", engines=("vllm",),
                                method="eagle3", block=3, budget=3, accept="3"))
    assert (b.measured, b.reference, b.max_tokens) == (False, "b300x8", 9)
    assert measured_rows(d, "rtx-pro-6000x8").max_tokens == 4


#: The rows the test below asks at b300x8: AR and DDTree at C = 1 with a blank context (rows
#: 2, 3); vLLM's AR at a mean context of 16384.4 at C = 1 and 4 (4, 5); DDTree budgets 16
#: (accept 5.0) and 32 (accept_len blank) at context 16384 (6, 7).
POINT_ROWS = (
    "model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,context_tokens,"
    "concurrency,tok_s,source,notes\n"
    "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,1,133,t,\n"
    "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,,1,303,t,\n"
    "kimi-k2.6,b300,8,vllm,ar,,,1,1.0,16384.4,1,120,t,\n"
    "kimi-k2.6,b300,8,vllm,ar,,,1,1.0,16384.4,4,300,t,\n"
    "kimi-k2.6,b300,8,sglang,ddtree,8,16,17,5.0,16384,1,280,t,\n"
    "kimi-k2.6,b300,8,sglang,ddtree,8,32,33,,16384,1,250,t,\n")


def test_the_rows_where_a_question_stands_are_read_in_one_place(monkeypatch):
    """The fit's rows at a question's point (its system, concurrency and context, a row's mean
    context rounded to whole tokens as a question asks it) were filtered three times over:
    predict's clause on rows whose accept_len is blank (``blank_accept_rows``), its clause
    on another engine's AR rows (``other_engines_ar``) and optimize's note on acceptances the
    curve does not learn from (``unused_acceptances``). One helper now,
    ``transfer.rows_at``: by hand, at C = 1 and context 16384 rows 4, 6 and 7 (16384.4 is
    asked as 16384), at C = 4 row 5, at C = 1 and a blank context rows 2 and 3; each of the
    three clauses says what those rows say, and says nothing when the helper finds none."""
    import importlib

    import numpy as np

    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine import transfer
    from ddtree_bayes.engine.scenario import resolve_scenario

    opt = importlib.import_module("ddtree_bayes.workflows.decisions.optimize")
    draws = dataclasses.replace(point_mass_draws(), data_csv=POINT_ROWS, memo={})

    def ask(method, engine="sglang", concurrency=1, context=16384.0, **shape):
        return resolve_scenario(draws, hardware="b300", gpus=8, engine=engine, method=method,
                                block=shape.get("block"), budget=shape.get("budget"),
                                verify_tokens=None, context_tokens=context,
                                concurrency=concurrency)

    ar, tree = ask("ar"), ask("ddtree", block=8, budget=32)
    assert [r.row for r in transfer.rows_at(draws, ar)] == [4, 6, 7]
    assert [r.row for r in transfer.rows_at(draws, ask("ar", concurrency=4))] == [5]
    assert [r.row for r in transfer.rows_at(draws, ask("ar", context=0.0))] == [2, 3]
    assert [r.row for r in transfer.rows_at(draws, ask("ar", context=16385.0))] == []
    other = P.other_engines_ar(draws, ar)
    assert "AR rows of another engine there (vllm 120 tok/s)" in other, other
    blank = P.blank_accept_rows(draws, tree)
    assert "(ddtree block 8 budget 32, M = 33: 250 tok/s)" in blank, blank
    accept = np.full((draws.n_draws, 2), 4.0)
    unused = opt.unused_acceptances(draws, tree, 8, (16, 32), accept)
    assert len(unused) == 1 and "budget 16 at 5 (1 row; the curve: 4)" in unused[0], unused

    calls = []
    for module in (P, opt):
        monkeypatch.setattr(module, "rows_at", lambda d, sc: calls.append(sc) or [])
    fresh = dataclasses.replace(draws, memo={})   # (the clauses keep theirs per fit)
    assert P.other_engines_ar(fresh, ar) == "" and P.blank_accept_rows(fresh, tree) == ""
    assert opt.unused_acceptances(fresh, tree, 8, (16, 32), accept) == []
    assert calls == [ar, tree, tree]

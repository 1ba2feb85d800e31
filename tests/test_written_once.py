"""Rules of a question written once (core13): the GPU count a question without ``--gpus``
takes, a configuration's shape, an engine's own rows on a system, and the parses of one
priors text. Each test pins the one place by a value worked out by hand and by what the
helper is asked (patched to say otherwise, every reader follows it)."""

from __future__ import annotations

import pytest

from ddtree_bayes.core.errors import QueryError
from test_cli_support import make_point_mass_workdir, run_cli


# ------------------------------------------------------------------ 2. the shape
def test_track_refuses_a_shape_predict_refuses_by_the_one_helper(tmp_path, monkeypatch):
    """track's check of a query (``_shape``) derived verify tokens and budget as
    ``resolve_scenario`` does but without its two checks between: ``--method ar
    --verify-tokens 2`` was tracked ("the latest fit cannot answer it yet") where predict exits
    2. Both ask ``scenario.step_shape`` now: by hand DDTree block 16 budget 32 verifies 33
    tokens at budget 32; AR verifying 2 is refused by predict's line, by both commands, with
    nothing written; made to say budget 7, verify 8, both take it, each asking once."""
    from ddtree_bayes.engine import scenario as S
    from ddtree_bayes.workflows.living import tracking as T

    assert S.step_shape("ddtree", 16, 32, None, None) == (32, 33)
    assert S.step_shape("ar", None, None, None, None) == (None, 1)
    with pytest.raises(QueryError, match="^autoregressive decoding verifies 1 token"):
        S.step_shape("ar", None, None, 2, None)
    with pytest.raises(QueryError, match="^eagle3 verifying 0 token per step drafts nothing"):
        S.step_shape("eagle3", 3, None, 0, None)   # (checked_shape's, before the >= 1 check)

    work = make_point_mass_workdir(tmp_path / "w")
    line = "ddtree-bayes: error: autoregressive decoding verifies 1 token (fix: drop --verify-tokens)\n"
    code, out, err = run_cli(work, "predict", "--method", "ar", "--verify-tokens", "2")
    assert (code, err) == (2, line)
    code, out, err = run_cli(work, "track", "--method", "ar", "--verify-tokens", "2")
    assert (code, out, err) == (2, "", line)
    assert not (work / "models" / "tracked.json").exists()

    calls: list[tuple] = []
    monkeypatch.setattr(S, "step_shape", lambda *a: calls.append(a[:4]) or (7, 8))
    assert T._shape(T.normalize_query({"method": "eagle3", "block": 3}))[:2] == (7, 8)
    from ddtree_bayes.engine.testing import point_mass_draws

    sc = S.resolve_scenario(point_mass_draws(), hardware="b300", gpus=8, engine="sglang",
                            method="eagle3", block=3, budget=None, verify_tokens=None,
                            context_tokens=None)
    assert (sc.budget, sc.verify_tokens) == (7, 8)
    assert calls == [("eagle3", 3, None, None)] * 2


# ------------------------------------------------------------------ 3. an engine's own rows
def test_an_engines_own_rows_on_a_system_are_read_in_one_place(monkeypatch):
    """predict's note on an engine carrying its base's anchor (``_no_own_row``) and the
    engines an AR question leaves out (``ar_repeats``) each filtered the fit's rows for the
    system's rows of an engine and method. By hand, the bundled point-mass fit's B300 rows
    are SGLang's (AR and DDTree): SGLang has its own AR rows there, native none, so native
    is left out of ``--method ar`` and carries SGLang's anchor with "no native ddtree row
    there". Made to say every engine has them, native is answered and "with a measured
    acceptance" is said; each reader asks ``transfer.has_own_rows``."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine import question as Q
    from ddtree_bayes.engine import transfer as TR
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    assert TR.has_own_rows(draws, "b300x8", "sglang", "ar")
    assert TR.has_own_rows(draws, "b300x8", "sglang", "ddtree")
    assert not TR.has_own_rows(draws, "b300x8", "native", "ar")
    assert not TR.has_own_rows(draws, "h100x8", "sglang", "ar")

    ar = Q.resolve(draws, Q.Flags(method="ar"))
    assert [a.scenario.engine for a in ar.asked] == ["sglang"]
    assert ar.left_out[0].startswith("native: left out")
    sc = Q.resolve(draws, Q.Flags(engines=("native",), accept="12")).asked[0].scenario
    assert P._no_own_row(draws, sc) == "no native ddtree row there"

    calls: list[tuple] = []
    monkeypatch.setattr(TR, "has_own_rows", lambda *a: calls.append(a[1:]) or True)
    ar = Q.resolve(point_mass_draws(), Q.Flags(method="ar"))
    assert [a.scenario.engine for a in ar.asked] == ["sglang", "native"] and not ar.left_out
    assert calls == [("b300x8", "native", "ar")]
    assert P._no_own_row(draws, sc) == "no native ddtree row with a measured acceptance there"
    assert calls[-1] == ("b300x8", "native", "ddtree")

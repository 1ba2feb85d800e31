"""Rules of a question written once (core13): the GPU count a question without ``--gpus``
takes, a configuration's shape, an engine's own rows on a system, and the parses of one
priors text. Each test pins the one place by a value worked out by hand and by what the
helper is asked (patched to say otherwise, every reader follows it)."""

from __future__ import annotations


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

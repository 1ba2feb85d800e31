"""Rules of a question written once (core13): the GPU count a question without ``--gpus``
takes, a configuration's shape, an engine's own rows on a system, and the parses of one
priors text. Each test pins the one place by a value worked out by hand and by what the
helper is asked (patched to say otherwise, every reader follows it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtree_bayes.core.errors import QueryError
from test_cli_support import make_multi_model_workdir, make_point_mass_workdir, run_cli

LLAMA = "llama-3.1-8b-instruct"


@pytest.fixture
def multi(tmp_path: Path) -> Path:
    from ddtree_bayes.engine.testing import multi_model_draws

    return make_multi_model_workdir(tmp_path / "m", multi_model_draws(16))


# ------------------------------------------------------------------ 1. the GPU count
def test_a_questions_gpu_count_without_gpus_is_read_in_one_place(multi, monkeypatch):
    """The two-model fit measured kimi-k2.6 on 8 x B300 and llama-3.1-8b-instruct on 1 x H100.
    By hand: the systems of each model on B300 (``measured_on``) are kimi's b300x8 and none of
    llama's, so ``--model llama --hardware b300`` takes no default of its own and the count
    8 of kimi's deployment (said so), in predict and optimize alike; and
    ``question_default`` (the asked system's own default) and ``resolve_scenario`` (the count)
    both read ``measured_on``: made to say llama ran B300 at 2, both follow it, each asking
    once."""
    from ddtree_bayes import api
    from ddtree_bayes.engine import question as Q
    from ddtree_bayes.engine import scenario as S

    monkeypatch.chdir(multi)
    draws = api.load(workdir=multi)
    assert S.measured_on(draws, "b300", "kimi-k2.6") == [("kimi-k2.6", "b300", 8)]
    assert S.measured_on(draws, "b300", LLAMA) == []
    assert S.measured_on(draws, "h100", LLAMA) == [(LLAMA, "h100", 1)]

    flags = ("--model", LLAMA, "--hardware", "b300", "--accept", "2", "--format", "json")
    code, out, err = run_cli(multi, "predict", *flags)
    assert code == 0, err
    assert {r["gpus"] for r in json.loads(out)["rows"]} == {8}
    assert "x8 is the GPU count of kimi-k2.6 on b300" in err
    code, out, err = run_cli(multi, "optimize", "--model", LLAMA, "--hardware", "b300",
                             "--engine", "vllm", "--budgets", "8,16", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["scenario"]["gpus"] == 8
    from ddtree_bayes.workflows.decisions import parse_query  # (next --query's)

    asked = parse_query(draws, f"--model {LLAMA} --hardware b300 --accept 2").scenario
    assert (asked.hardware, asked.gpus) == ("b300", 8)
    code, out, err = run_cli(multi, "track", "--model", LLAMA, "--hardware", "b300",
                             "--accept", "2")
    assert code == 0 and f"{LLAMA} b300 x8 vllm ddtree b16/B32 accept 2" in out, err

    calls: list[tuple] = []
    two = [(LLAMA, "b300", 2)]
    monkeypatch.setattr(S, "measured_on", lambda *a: calls.append(a[1:]) or two)
    monkeypatch.setattr(Q, "measured_on", S.measured_on)
    d, own = Q.question_default(draws, Q.Flags(model=LLAMA, hardware="b300"))
    assert not own and calls == [("b300", LLAMA)]   # (no llama row at b300x2: the default)
    sc = S.resolve_scenario(draws, hardware="b300", gpus=None, engine="vllm", method="ar",
                            block=None, budget=None, verify_tokens=None, context_tokens=None,
                            model=LLAMA)
    assert sc.gpus == 2 and sc.gpus_from == () and len(calls) == 2


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


# ------------------------------------------------------------------ 4. one priors text
def test_fit_reads_its_priors_back_without_validating_them_again(tmp_path, monkeypatch):
    """``fit`` validated its priors file, then the stored copy of the same text when it read
    its fit back (``parse_priors`` twice). ``load_fit(priors=...)`` takes the file's
    validation: no parse, and the same values the stored copy's parse gives (labelled as
    the stored copy), its ``[methods]`` table too; a config of another text is refused."""
    from ddtree_bayes.core import config as C
    from ddtree_bayes.core import methods as MT
    from ddtree_bayes.engine import store

    work = make_point_mass_workdir(tmp_path / "w")
    path = work / "models" / "priors.toml"
    cfg = C.parse_priors(path.read_text(), str(path))
    fit_file = store.resolve(work / "models", "latest")
    plain = store.load_fit(fit_file)
    assert plain.priors == C.parse_priors(plain.priors_toml, "priors stored in the fit",
                                          stored=True)

    calls: list[str] = []
    real_priors, real_methods = C.parse_priors, MT.load_methods
    monkeypatch.setattr(C, "parse_priors", lambda *a, **k: calls.append("priors")
                        or real_priors(*a, **k))
    monkeypatch.setattr(MT, "load_methods", lambda *a, **k: calls.append("methods")
                        or real_methods(*a, **k))
    told = store.load_fit(fit_file, priors=cfg)
    assert told.priors == plain.priors and told.priors.path == "priors stored in the fit"
    assert told.methods == plain.methods and calls == []
    again = store.load_fit(fit_file)   # (not told: the stored copy parsed, methods too)
    assert again.priors == plain.priors and again.methods == plain.methods
    assert sorted(calls) == ["methods", "priors"]

    other = C.parse_priors(path.read_text() + "\n# edited\n", str(path))
    with pytest.raises(ValueError, match="not the fit's"):
        store.load_fit(fit_file, priors=other)


def test_the_acceptance_curves_check_takes_the_fits_methods_table(tmp_path, monkeypatch):
    """optimize and report built a ``[methods]`` table twice: the fit's stored priors, and
    the priors file's for its ``[acceptance_curve]`` check (the accept_ref prior within a
    step). The file the fit was made with, the same text: the fit's table, one parse. Another
    text (``--priors``): its own, naming it in its errors as before. By hand: the bundled curve,
    DDTree block 16 at reference budget 16, a step emits at most 16 tokens; an accept_ref of
    TruncNormal(30, 2.4, 1, 40) is refused by the file's own check, both ways."""
    from ddtree_bayes import api
    from ddtree_bayes.core import methods as MT
    from ddtree_bayes.workflows.decisions import acceptance_curve as AC

    work = make_point_mass_workdir(tmp_path / "w")
    monkeypatch.chdir(work)
    draws = api.load(workdir=work)
    calls: list[str] = []
    real = MT.load_methods
    monkeypatch.setattr(MT, "load_methods", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    curve, warned = AC.acceptance_curve_for(draws)
    assert (curve.method, curve.block, curve.reference_budget, warned) == ("ddtree", 16, 16, [])
    assert calls == []   # (the fit's table, parsed when it was loaded)

    text = (work / "models" / "priors.toml").read_text()
    other = work / "other.toml"
    other.write_text(text + "\n# another text\n")
    calls.clear()
    AC.acceptance_curve_for(draws, other)
    assert calls == ["other.toml"]

    # an accept_ref above what a block-16 step at budget 16 emits (16): refused by the file's
    # check with the fit's table (the fit stores the same text) and with its own, one line
    at = text.index("[acceptance_curve.accept_ref]")
    bad = text[:at] + text[at:].replace("mu = 9.4", "mu = 30.0", 1).replace(
        "upper = 16.0", "upper = 40.0", 1)
    (work / "models" / "priors.toml").write_text(bad)
    from ddtree_bayes.core.errors import PriorsError

    said = []
    for fit in (draws.view(priors_toml=bad), draws):
        calls.clear()
        with pytest.raises(PriorsError) as err:
            AC.acceptance_curve_for(fit)
        said.append((str(err.value), calls[:]))
    assert said[0][0] == said[1][0] and "acceptance_curve.accept_ref" in said[0][0]
    assert "16" in said[0][0] and said[0][0].startswith("models/priors.toml")
    assert said[0][1] == ["priors stored in the fit"] and said[1][1] == ["models/priors.toml"]

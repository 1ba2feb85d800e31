"""The notebook API: fit -> load -> predict returns a tidy DataFrame."""

import re

import numpy as np
import pandas as pd
import pytest

from ddtree_bayes import api
from test_cli_support import BEYOND_M33

#: The default question's one warning on the point-mass fit (budget 32 past the rows' 8).
PAST_M9 = re.escape(BEYOND_M33)


def test_api_predict_returns_a_tidy_frame(fitted_workdir):
    import ddtree_bayes as db

    work, result = fitted_workdir
    draws = db.load(workdir=work)
    assert draws.meta["fit_id"] == result.fit_id and draws.n_draws == 4000
    with pytest.warns(UserWarning, match=PAST_M9):   # (budget 32 past the measured 8)
        table = db.predict(draws, accept="12:16", target=800, workdir=work)
    assert isinstance(table, pd.DataFrame)
    assert len(table) == 12
    assert {"engine", "accept", "median", "lo50", "hi50", "lo90", "hi90", "p_ge_target",
            "original"} <= set(table.columns)
    assert table["p_ge_target"].between(0, 1).all()
    assert (table["lo90"] < table["median"]).all() and (table["median"] < table["hi90"]).all()
    # the same numbers through the latest-fit shortcut
    with pytest.warns(UserWarning, match=PAST_M9):
        again = db.predict(accept="12:16", target=800, workdir=work)
    pd.testing.assert_frame_equal(table, again)


def test_api_fit_validates_before_sampling(tmp_path):
    import ddtree_bayes as db
    from ddtree_bayes.core.errors import DataError

    bad = tmp_path / "m.csv"
    bad.write_text("model,hardware\n")
    with pytest.raises(DataError, match="missing column"):
        db.fit(bad, workdir=tmp_path, progress=False)
    assert not (tmp_path / "models").exists()


def test_api_fit_refuses_no_tuning_before_compiling(tmp_path):
    """db.fit(tune=0) compiled the model and then died in a nutpie PanicException
    ("assertion failed: early_end < num_tune"), a BaseException, where fit --tune 0 is
    refused at the flag."""
    import ddtree_bayes as db
    from ddtree_bayes.core.errors import DataError

    with pytest.raises(DataError) as info:
        db.fit(workdir=tmp_path, tune=0, chains=0, progress=False)
    assert str(info.value) == ("sampler settings out of range: chains 0, tune 0 (fix: chains "
                               ">= 1, draws >= 1, tune >= 1, 0 < target_accept < 1, seed a "
                               "whole number 0 to 4294967295)")
    with pytest.raises(DataError, match=re.escape("out of range: tune 0 (fix: ")):
        db.fit(workdir=tmp_path, tune=0, progress=False)
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize("kw, message", [
    ({"accept": 1, "budget": 0}, "budget 0 is not a whole number from 1 to 1000000"),
    ({"accept": 14, "gpus": 4.5}, "gpus 4.5 is not a whole number from 1 to 1024"),
    ({"accept": 14, "concurrency": 0}, "concurrency 0 is not a whole number from 1 to 4096"),
    ({"accept": 14, "concurrency": [1, -3]}, "concurrency -3 is not a whole number"),
    ({"accept": 14, "concurrency": 2.5}, "concurrency 2.5 is not a whole number"),
    ({"accept": 0.5}, "below 1 (a step emits at least the bonus token)"),
    ({"accept": float("nan")}, "--accept 'nan' is not finite"),
    ({"accept": "12:inf"}, "--accept '12:inf' is not finite"),
    ({"accept": 14, "target": float("nan")}, "--target nan is not a finite throughput >= 0"),
    # context=1e15 answered 0 tok/s; inf and nan blamed the step arithmetic; True was 1 token
    ({"accept": 14, "context": 1e15}, "context 1000000000000000.0 is not a token count from 0 "
                                      "to 1099511627776 (2 ** 40) (fix: give the context "
                                      "length in tokens, e.g. 32768 or '32k')"),
    ({"accept": 14, "context": float("inf")}, "context inf is not a token count from 0 to"),
    ({"accept": 14, "context": float("nan")}, "context nan is not a token count from 0 to"),
    ({"accept": 14, "context": True}, "context True is not a token count from 0 to"),
    ({"accept": 14, "context": -5}, "context -5 is not a token count from 0 to"),
    # engines="sglang," answered a row for an engine named '' (from the pooled population)
    ({"accept": 14, "engines": "sglang,"}, "engines holds '', which is not an engine name "
                                           "(fix: give engine names, e.g. engines=['sglang', "
                                           "'native'])"),
    ({"accept": 14, "engines": ["sglang", " "]}, "engines holds ' ', which is not an engine"),
    ({"accept": 14, "engines": ["sglang", None]}, "engines holds None, which is not an engine"),
    # engines=[] answered the default engines (2 rows) where --engine '' is refused
    ({"accept": 14, "engines": []}, "engines [] names no engine (fix: give engine names, e.g. "
                                    "engines=['sglang', 'native'], or leave engines out for "
                                    "the default engines)"),
    ({"accept": 14, "engines": ()}, "engines () names no engine"),
    ({"accept": 14, "engine": []}, "engines [] names no engine"),
    ({"accept": 14, "target": -5}, "--target -5 is not a finite throughput >= 0"),
    # numpy met seed=-1 with a bare ValueError and seed=1.5 with a TypeError
    ({"accept": 14, "seed": -1}, "seed -1 is not a whole number from 0 to 4294967295 (fix: "
                                 "give seed as a whole number, e.g. 20261130)"),
    ({"accept": 14, "seed": 1.5}, "seed 1.5 is not a whole number from 0 to 4294967295"),
    ({"accept": 14, "seed": True}, "seed True is not a whole number"),
    ({"accept": 14, "seed": 2**32}, "seed 4294967296 is not a whole number"),
    # context=2**50 answered 1.7e-8 tok/s where --context refuses it
    ({"accept": 14, "context": 2**50}, "context 1125899906842624 is not a token count from 0 "
                                       "to 1099511627776 (2 ** 40)"),
    ({"accept": 14, "context": -1}, "context -1 is not a token count"),
    ({"accept": 14, "context": float("nan")}, "context nan is not a token count"),
    ({"accept": 14, "context": True}, "context True is not a token count"),
    ({"accept": 14, "context": "32 kb"}, "--context '32 kb' is not a token count"),
    ({"accept": 14, "context": [1]}, "context [1] is not a token count"),
    # context=0.5 answered for half a token of context, as --context 0.5 did
    ({"accept": 14, "context": 0.5}, "--context 0.5 is 0.5 tokens, not a whole number (fix: "
                                     "give a whole number of tokens, e.g. 32768 or 32k)"),
    ({"accept": 14, "context": "0.3k"}, "--context '0.3k' is 307.2 tokens, not a whole number"),
    # a name of another type met a bare TypeError ("expected string or bytes-like object",
    # "'int' object is not iterable", "'<' not supported between 'int' and 'str'"), and
    # explain="no", a str, asked for the variance split
    ({"accept": 14, "hardware": ["b300"]}, "hardware ['b300'] is not a name (fix: give "
                                           "hardware as one name, e.g. hardware='b300')"),
    ({"accept": 14, "model": 5}, "model 5 is not a name (fix: give model as one name"),
    ({"accept": 14, "method": ("ddtree",)}, "method ('ddtree',) is not a name"),
    ({"accept": 14, "drafter": 1}, "drafter 1 is not a name"),
    ({"accept": 14, "kv_cache": 8}, "kv_cache 8 is not a name"),
    ({"accept": 14, "engines": 5}, "engines 5 is not an engine name or a list of them (fix: "
                                   "give engine names, e.g. engines=['sglang', 'native'])"),
    ({"accept": 14, "prob": "0.5"}, "--prob '0.5' is not a number between 0 and 1 (fix: give a "
                                    "probability from 0.000001 to 0.999999"),
    ({"accept": 14, "prob": None}, "--prob None is not a number between 0 and 1"),
    ({"accept": 14, "explain": "no"}, "explain 'no' is not True or False (fix: give "
                                      "explain=True for each row's variance split"),
    # concurrency=[] answered one stream (no concurrency, no total columns), where
    # --concurrency '' is refused ("holds no number") and engines=[] too (97fc0fb6)
    ({"accept": 14, "concurrency": []}, "concurrency [] names no stream count (fix: give "
                                        "stream counts, e.g. concurrency=[1, 4, 8, 16], or "
                                        "leave concurrency out for one stream)"),
    ({"accept": 14, "concurrency": ()}, "concurrency () names no stream count"),
])
def test_the_api_checks_what_the_flags_check(kw, message):
    """The API answered budget 0 (103.5 tok/s) and gpus 4.5 (596 tok/s) where the CLI
    refuses the flags, and met concurrency 0 with a bare ValueError; target=nan gave
    P(tok/s >= target) = 0 and accept=nan a message blaming the step arithmetic."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.testing import point_mass_draws

    with pytest.raises(QueryError, match=re.escape(message)):
        api.predict(point_mass_draws(), **kw)


def test_the_api_says_a_fit_is_stale_as_predict_does(tmp_path):
    """db.predict answered from a fit whose measurement file had changed since, silently;
    `predict` warns (exit 0) or, with --strict, refuses (exit 4)."""
    import dataclasses

    from ddtree_bayes.core.errors import StaleArtifactError
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    with pytest.warns(UserWarning) as said:   # (pytest turns any other warning into an error)
        fresh = api.predict(draws, accept=14)
    assert [str(w.message) for w in said] == [BEYOND_M33]
    data = tmp_path / "measurements.csv"
    data.write_text(draws.data_csv + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,140.0,a new run,\n")
    meta = {**draws.meta, "data": {**draws.meta["data"], "path": str(data)}}
    stale = dataclasses.replace(draws, meta=meta)
    with pytest.warns(UserWarning) as said:
        table = api.predict(stale, accept=14)
    assert [str(w.message) for w in said] == [
        f"{data} changed since fit point-mass; run `ddtree-bayes update --data {data}` (or "
        f"`fit --data {data}`) to use it", BEYOND_M33]   # (update needs --data: not the default)
    pd.testing.assert_frame_equal(table, fresh)   # (the same answer, now with its warning)
    with pytest.raises(StaleArtifactError, match=re.escape(f"{data} changed since fit")):
        api.predict(stale, accept=14, strict=True)


def test_the_api_warns_of_an_unmeasured_systems_step_past_its_references_rows():
    """db.predict(hardware="h200", accept=14) (budget 32, M = 33) warned of nothing: h200x8
    has no rows, though its step is transferred from b300x8, whose rows verified at most 9
    tokens a step; asked of b300x8 it warns. It warns as predict does, naming b300x8."""
    from ddtree_bayes.engine.testing import point_mass_draws

    with pytest.warns(UserWarning) as said:
        api.predict(point_mass_draws(), hardware="h200", accept=14)
    assert [str(w.message) for w in said] == [
        "h200x8 has no measurements and its step is transferred from b300x8: " + BEYOND_M33]


def test_the_api_does_not_judge_a_fit_by_this_directorys_cards(monkeypatch):
    """The API's fit may come from another project: this directory's cards or hardware table
    differing from the fit's (a review: a fit storing a user card raised StaleArtifactError
    with strict=True, nothing having changed) are the CLI's concern, run in that project."""
    from ddtree_bayes.core.errors import StaleArtifactError
    from ddtree_bayes.engine import scenario
    from ddtree_bayes.engine.testing import point_mass_draws

    here = ["the model card of my-kimi-finetune here differs from fit point-mass's"]
    monkeypatch.setattr(scenario, "card_changes", lambda draws, drafters=True: list(here))
    draws = point_mass_draws()
    with pytest.raises(StaleArtifactError, match="my-kimi-finetune here differs"):
        scenario.check_fit(draws, strict=True)   # (the CLI, run in this directory)
    with pytest.warns(UserWarning) as said:
        assert len(api.predict(draws, accept=14, strict=True)) == 2   # no refusal
    assert [str(w.message) for w in said] == [BEYOND_M33]   # (nothing of the cards)


def test_the_api_takes_a_numpy_seed_as_its_int():
    import numpy as np

    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    with pytest.warns(UserWarning, match=PAST_M9):
        pd.testing.assert_frame_equal(api.predict(draws, accept="12:16", seed=np.int64(7)),
                                      api.predict(draws, accept="12:16", seed=7))


def test_the_api_warns_what_predict_warns():
    """db.predict answered a misspelt engine from the pooled population, and a context 8x
    the longest measured by extrapolation, without the warnings `predict` prints."""
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    with pytest.warns(UserWarning) as said:
        table = api.predict(draws, accept=14, engines="sglnag")
    assert [str(w.message) for w in said] == [
        "--engine 'sglnag' was never measured, nor given a relation in the priors file: its "
        "speculative overhead is drawn from the pooled population (a wide interval); did you "
        "mean sglang?", BEYOND_M33]
    assert table["engine"].tolist() == ["sglnag"]
    with pytest.warns(UserWarning) as said:
        api.predict(draws, accept=14, engines="sglang", context="1m")
    # (and that B300's context cost is the prior's: only the RTX PRO 6000 measured context)
    assert [str(w.message).split(":")[0] for w in said] == [
        "--context 1048576 is 8x the longest context the fit measured (131072 tokens)",
        "context 1048576 on b300x8", BEYOND_M33.split(":")[0]]


def test_the_api_takes_a_numpy_context_as_its_number():
    import numpy as np

    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    with pytest.warns(UserWarning) as said:
        pd.testing.assert_frame_equal(api.predict(draws, accept=14, context=np.int64(65536)),
                                      api.predict(draws, accept=14, context=65536))
    assert {str(w.message) for w in said} == {   # (B300's context; budget 32 past the rows)
        next(str(w.message) for w in said if "measured no context beyond 0 there" in
             str(w.message)), BEYOND_M33}


def test_the_api_takes_any_sequence_of_concurrencies():
    import numpy as np

    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    for value in (np.array([1, 8]), range(1, 3), [1, 2]):
        with pytest.warns(UserWarning, match="beyond the concurrencies measured"):
            assert len(api.predict(draws, accept=14, concurrency=value)) == 4   # 2 engines x 2 C


@pytest.mark.parametrize("seed", [-1, 1.5, True, 2**32])
def test_api_fit_refuses_a_seed_out_of_range_before_compiling(tmp_path, seed):
    """db.fit(seed=-1) reached numpy's bare ValueError after the compile; it is refused with
    the other sampler settings, nothing written."""
    import ddtree_bayes as db
    from ddtree_bayes.core.errors import DataError

    with pytest.raises(DataError) as info:
        db.fit(workdir=tmp_path, seed=seed, progress=False)
    assert str(info.value) == (f"sampler settings out of range: seed {seed!r} (fix: chains "
                               ">= 1, draws >= 1, tune >= 1, 0 < target_accept < 1, seed a "
                               "whole number 0 to 4294967295)")
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize("given, named", [("20261203T221535Z-a98f91af", "str"),
                                          (20261203, "int")])
def test_the_api_says_what_a_fit_argument_takes(given, named):
    """A trust pass: db.predict("<fit id>") ended in AttributeError "'str' object has no
    attribute 'meta'" (a FitResult from db.fit() likewise), db.load(20261203) in re's
    "expected string or bytes-like object"; each now says what it takes."""
    from ddtree_bayes.engine.inference import FitResult

    with pytest.raises(TypeError, match=re.escape(
            f"predict(fit=...) takes a Fit from ddtree_bayes.load() or None, not {named} "
            "(fix: ")):
        api.predict(given, accept=14)
    result = FitResult(fit_id="20261203T221535Z-a98f91af", path=None, converged=True,
                       failures=[], diagnostics=[], divergences=0)
    with pytest.raises(TypeError, match=re.escape(
            "not FitResult (fix: ddtree_bayes.load('20261203T221535Z-a98f91af'))")):
        api.predict(result, accept=14)
    if not isinstance(given, str):
        with pytest.raises(TypeError, match=re.escape(
                f"load(fit_id=...) takes a fit id string, 'latest' or None, not {named}")):
            api.load(given)


def test_the_api_strict_refuses_an_unknown_engine_as_predict_strict_does():
    """A walkthrough: db.predict(engines='sglnag', accept=14, strict=True) answered from the
    pooled population with a UserWarning, where `predict --engine sglnag --strict` exits 2
    (api.predict gave strict only to check_fit)."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.testing import point_mass_draws

    with pytest.raises(QueryError) as err:
        api.predict(point_mass_draws(), accept=14, engines="sglnag", strict=True)
    assert str(err.value) == (
        "--engine 'sglnag' was never measured, nor given a relation in the priors file: its "
        "speculative overhead is drawn from the pooled population (a wide interval); did you "
        "mean sglang? (fix: check the spelling, or drop --strict to answer anyway)")


@pytest.mark.parametrize("kw, flag, name", [
    ({"engines": "SGLANG"}, "--engine", "sglang"),
    ({"engines": ["sglang", "Native"]}, "--engine", "native"),
    ({"method": "DDTree"}, "--method", "ddtree"),
    ({"hardware": "B300"}, "--hardware", "b300"),
    ({"model": "Kimi-K2.6"}, "--model", "kimi-k2.6"),
])
def test_the_api_refuses_a_name_in_capitals_as_the_cli_does(kw, flag, name):
    """A walkthrough: db.predict(engines='SGLANG', accept=14) answered 'SGLANG' from the pooled
    population (684 tok/s, 483-811, for sglang's 690) where `predict --engine SGLANG` exits 2:
    names are lowercase. The check is made where the CLI and the API meet (check_names)."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.testing import point_mass_draws

    given = next(iter(kw.values()))
    upper = given if isinstance(given, str) else given[1]
    with pytest.raises(QueryError) as err:
        api.predict(point_mass_draws(), accept=14, **kw)
    assert str(err.value) == (f"{flag} {upper!r} is not a lowercase name (fix: write it in "
                              f"lowercase, e.g. {name!r})")


@pytest.mark.parametrize("name, value", [("block", 16), ("budget", 32), ("gpus", 8),
                                         ("verify_tokens", 33)])
def test_the_api_takes_a_numpy_integer_as_its_int(name, value):
    """A walkthrough: db.predict(engines='sglang', accept=14, block=np.int64(16)) answered
    690.851 where block=16 answered 689.690: the flag was checked as whole but kept as numpy's,
    and the predictive draws are keyed by the scenario's repr (`np.int64(16)` in numpy 2)."""
    import numpy as np

    from ddtree_bayes.engine.question import Flags
    from ddtree_bayes.engine.testing import point_mass_draws

    kept = getattr(Flags(**{name: np.int64(value)}), name)
    assert kept == value and type(kept) is int
    draws = point_mass_draws(noise_sd=0.1)   # (run noise: the draws depend on their key)
    with pytest.warns(UserWarning, match=PAST_M9):   # (each: budget 32, M = 33)
        plain = api.predict(draws, accept=14, engines="sglang", **{name: value})
        pd.testing.assert_frame_equal(
            api.predict(draws, accept=14, engines="sglang", **{name: np.int64(value)}), plain)
        pd.testing.assert_frame_equal(
            api.predict(draws, accept=14, engines="sglang", **{name: np.int32(value)}), plain)


def test_a_scenario_is_keyed_by_its_plain_values():
    """The key of a scenario's predictive draws reads numpy's numbers as Python's (a numpy
    integer reaching a scenario by any path drew other numbers)."""
    import dataclasses

    import numpy as np

    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.engine.testing import point_mass_draws

    sc = resolve(point_mass_draws(), Flags(accept="14", engines=("sglang",))).asked[0].scenario
    numpy_sc = dataclasses.replace(sc, gpus=np.int64(sc.gpus), block=np.int64(sc.block),
                                   context_tokens=np.float64(sc.context_tokens))
    assert P.scenario_key(numpy_sc) == P.scenario_key(sc)
    assert "np." not in P.scenario_key(numpy_sc)


def test_the_api_warns_of_a_wide_interval_on_few_draws_as_predict_does():
    """A walkthrough: `predict --prob 0.9999` warns that each tail rests on about 0.2 of the
    fit's 4000 draws; db.predict(..., prob=0.9999) said nothing (the line was made in the
    CLI only). A point-mass fit has 8 draws: a 95% interval's tails rest on 8 x 0.025."""
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    with pytest.warns(UserWarning) as said:
        table = api.predict(draws, accept=14, engines="sglang", prob=0.95)
    assert [str(w.message) for w in said] == [
        BEYOND_M33,
        "--prob 0.95: each tail of the wide interval rests on about 0.2 of the fit's 8 draws, "
        "so its ends are noisy (a fit with more --draws, or a smaller --prob)"]
    assert table["lo95"].tolist() == pytest.approx([700.0])
    with pytest.warns(UserWarning) as said:
        assert "lo90" in api.predict(draws, accept=14, engines="sglang", prob=0.9)
    assert [str(w.message) for w in said] == [BEYOND_M33]   # (nothing of the tails)


def test_load_inputs_refuses_what_fit_refuses(tmp_path):
    """load_inputs says every problem raises an InputError, but passed a row of an undeclared
    method (fit: rc 2 "method 'ddtre' ... is not declared") and a model without a card (fit:
    rc 2, naming data/models.csv instead of the row that names the model)."""
    from ddtree_bayes.core.errors import DataError, InputError, PriorsError
    from ddtree_bayes.core.paths import bundled

    text = bundled("measurements.csv").read_text(encoding="utf-8")   # a header and 9 rows
    typo = tmp_path / "typo.csv"
    typo.write_text(text + "kimi-k2.6,b300,8,sglang,ddtre,8,8,9,4.4,,303,x,\n")
    with pytest.raises(PriorsError) as err:
        api.load_inputs(typo, bundled("priors.toml"), workdir=tmp_path)
    assert isinstance(err.value, InputError)
    assert f"method 'ddtre' (row 11 of {typo}) is not declared" in str(err.value)
    nocard = tmp_path / "nocard.csv"
    nocard.write_text(text + "kimi-k2.7,b300,8,sglang,ar,,,1,1.0,,133,x,\n")
    with pytest.raises(DataError) as err:
        api.load_inputs(nocard, bundled("priors.toml"), workdir=tmp_path)
    assert str(err.value) == (
        f"{nocard}, row 11, column 'model': no model card for 'kimi-k2.7' (fix: add its card "
        "(`ddtree-bayes card add --hf-config PATH/config.json --name kimi-k2.7`, or --gguf "
        "FILE.gguf, or a row in data/models.csv), or correct the name: did you mean "
        "'kimi-k2.6'?)")


PREDICT_KEYWORDS = ("accept, block, budget, concurrency, context, drafter, engine, engines, "
                    "explain, gpus, hardware, kv_cache, method, model, model_average, "
                    "new_deployment, prob, seed, target, verify_tokens, workdir")


def test_the_api_takes_predicts_flags_and_names_an_unknown_keyword():
    """A new-user walkthrough: `ddtree_bayes.api.predict(fit, engine='vllm')` (predict's flag is
    --engine) raised a raw "TypeError: predict() got an unexpected keyword argument 'engine'"
    from an internal function, and so did drafter= and model_average=, though the docstring
    says the keyword arguments are predict's flags. engine is now an alias of engines, and an
    unknown keyword a one-line QueryError naming the valid ones."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    with pytest.warns(UserWarning, match=PAST_M9):
        table = api.predict(draws, engine="sglang", accept=14)
        pd.testing.assert_frame_equal(table, api.predict(draws, engines=["sglang"], accept=14))
        assert api.predict(draws, engine="sglang,native", accept=14)["engine"].tolist() == [
            "sglang", "native"]
    assert table["median"].tolist() == pytest.approx([700.0])   # 14 tokens / 20 ms
    with pytest.raises(QueryError) as err:
        api.predict(draws, enigne="vllm", accept=14)
    assert str(err.value) == ("predict() got an unknown keyword argument 'enigne' (fix: give "
                              f"predict's flags as keywords: {PREDICT_KEYWORDS})")
    with pytest.raises(QueryError, match=re.escape("give engine= or engines=, not both")):
        api.predict(draws, engine="sglang", engines=["native"], accept=14)


def test_the_api_prices_another_drafter_as_predict_drafter_does(tmp_path, monkeypatch):
    """`drafter=` is predict's --drafter: the passes priced with that card's roofline at the
    measured group's per-pass multiple, SPEC + 8 ms x 0.1 x (r1 / r0 - 1), r0 and r1 the
    rooflines of Kimi K2.6's generic block drafter and of the card (test_engine_effects.py)."""
    import numpy as np

    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.question import Flags, resolve
    from test_engine_effects import KIMI_DDTREE, own_drafters, structured_engine_fit

    base = structured_engine_fit()
    draws = base.view(variables={**base.variables, "structure_sd": np.full(4, 0.04)})
    monkeypatch.chdir(tmp_path)
    own_drafters(tmp_path, KIMI_DDTREE)
    ask = {"hardware": "b300", "gpus": 8, "method": "ddtree", "block": 16, "budget": 32,
           "accept": "12"}
    with pytest.warns(UserWarning, match=PAST_M9):   # (budget 32: M = 33)
        table = api.predict(draws, engine="sglang", drafter="my-kimi-ddtree", **ask)
        other = api.predict(draws, engine="sglang", **ask)["median"][0]
    assert table["drafter"].tolist() == table["pass_drafter"].tolist() == ["my-kimi-ddtree"]
    flags = Flags(engines=("sglang",), drafter="my-kimi-ddtree", **ask)
    (row,) = P.predict_rows(draws, resolve(draws, flags))
    assert table["median"].tolist() == [row["median"]]
    assert row["median"] != other


def test_the_api_model_average_mixes_the_forms_as_predict_does(tmp_path, monkeypatch):
    """`model_average=True` is predict's --model-average: the latest converged fit of each
    model form on the same data and priors, weighted by PSIS-LOO. AR steps 8 ms; at acceptance
    3 a DDTree step of 20 ms (the linear point mass) beats it, the power form's (MoE cost
    4 x 33 ** 0.5 ms) does not: weights 0.25 / 0.75 give P(faster than AR) 0.25."""
    from ddtree_bayes.engine import compare, store
    from ddtree_bayes.engine.testing import point_mass_draws

    fast = point_mass_draws(n=400)
    slow = point_mass_draws(n=400, moe_form="power")
    slow.meta["fit_id"] = "slow"
    (tmp_path / "models" / "fits").mkdir(parents=True)
    for name in ("fast", "slow"):
        (tmp_path / "models" / "fits" / f"{name}.nc").write_text("")
    monkeypatch.setattr(store, "load_fit", lambda path: {"fast": fast, "slow": slow}[path.stem])
    seen = []

    def weights(fits, seed):
        seen.append(([d.meta["fit_id"] for d in fits], seed))
        return {"weights": {"point-mass": 0.25, "slow": 0.75}, "rows": []}   # (no Pareto k)

    monkeypatch.setattr(compare, "compare_fits", weights)
    ask = {"engine": "sglang", "accept": "3", "concurrency": 1, "seed": 7}
    with pytest.warns(UserWarning, match=PAST_M9):   # (the default question: M = 33)
        table = api.predict(fast, model_average=True, workdir=tmp_path, **ask)
    assert seen == [(["point-mass", "slow"], 7)]
    assert table["p_faster_than_ar"].tolist() == [pytest.approx(0.25)]
    assert [(a["fit_id"], a["weight"]) for a in table.attrs["model_average"]] == [
        ("point-mass", 0.25), ("slow", 0.75)]
    for draws, p in ((fast, 1.0), (slow, 0.0)):
        with pytest.warns(UserWarning, match=PAST_M9):
            assert api.predict(draws, **ask)["p_faster_than_ar"].tolist() == [p]


def test_load_inputs_refuses_a_step_no_quantisation_reaches(tmp_path):
    """A hand-edited row at 20000 tok/s for Kimi K2.6 AR on 8 x B300 (a 0.05 ms step) was
    fitted, exit 0, with the noise widened for every model. Reading its 32B active weights
    (all read: they leave the input embedding out, embed_params_b 0) at Q1_0's 1.125 bits over
    8 x 8 TB/s takes 32e9 x 1.125 / 8 / 64e12 s = 0.0703 ms: the data file is refused, naming
    the row and column (fit reads its inputs the same way)."""
    from ddtree_bayes.core.errors import DataError
    from ddtree_bayes.core.paths import bundled

    text = bundled("measurements.csv").read_text(encoding="utf-8")   # a header and 9 rows
    fast = tmp_path / "fast.csv"
    fast.write_text(text + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,20000,x,\n")
    with pytest.raises(DataError) as err:
        api.load_inputs(fast, bundled("priors.toml"), workdir=tmp_path)
    assert str(err.value) == (
        f"{fast}, row 11, column 'tok_s': step 0.05 ms (20000 tok/s at accept 1) is shorter "
        "than reading kimi-k2.6's 32B active weights at 1.125 bits per weight (Q1_0, the "
        "fewest any quantisation stores) over 8 x b300 (64 TB/s): 0.0703 ms; no deployment "
        "runs that fast (fix: check tok_s (tokens per second; with concurrency, the streams' "
        "total), accept_len and gpus)")


@pytest.mark.parametrize(("row", "column", "says"), [
    # 1000B x 0.140625 bytes (1.125 bits) = 140.6 GB > 1 x 96 GB; the card's 0.6 bytes need
    # 600 / 96 -> 7 GPUs, 1.125 bits 140.6 / 96 -> 2
    ("kimi-k2.6,rtx-pro-6000,1,vllm,ar,,,1,1.0,0,10,x,", "gpus",
     "kimi-k2.6's 1000B parameters take 140.6 GB even at 1.125 bits per weight (Q1_0, the "
     "fewest any quantisation stores): they do not fit in 1 x rtx-pro-6000 (96.0 GB) (fix: "
     "check the GPU count (at least 2 rtx-pro-6000; 7 "
     "at the card's 0.6 bytes) and the hardware; a run that offloads weights to the CPU is "
     "outside what the step model prices)"),
    # 35136 B x 1e9 tokens / 2 (an fp8 cache of the card's bf16) = 17,568 GB > 8 x 288 GB
    ("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,1000000000,100,x,", "context_tokens",
     "kimi-k2.6's KV cache at context 1000000000 takes 17568.0 GB even at half the card's "
     "bytes (35136 bytes per token, the card's kv_bytes_per_token): more than 8 x b300 hold "
     "(2304.0 GB) (fix: check context_tokens (tokens, not bytes or characters) and the GPU "
     "count)"),
])
def test_load_inputs_refuses_a_row_its_gpus_cannot_hold(tmp_path, row, column, says):
    """`add` refuses a row whose GPUs cannot hold its card's weights even at 1.125 bits per
    weight, or whose KV cache no engine could hold; the same row written into the CSV by hand
    was fitted by `fit --data`, exit 0 (Kimi K2.6 on one RTX PRO 6000: a system of its own,
    its step priced from 1000B of weights on 96 GB). fit reads its inputs as `add` does:
    refused, naming the row and column."""
    from ddtree_bayes.core.errors import DataError
    from ddtree_bayes.core.paths import bundled

    text = bundled("measurements.csv").read_text(encoding="utf-8")   # a header and 9 rows
    path = tmp_path / "edited.csv"
    path.write_text(text + row + "\n")
    with pytest.raises(DataError) as err:
        api.load_inputs(path, bundled("priors.toml"), workdir=tmp_path)
    assert str(err.value) == f"{path}, row 11, column '{column}': {says}"


def test_fit_warns_of_repeats_far_apart(tmp_path, monkeypatch, capsys):
    """A 58 and a 2000 tok/s run of one Mixtral configuration were fitted as repeats (mean
    1029), converged, exit 0, no warning, with noise_sd 0.026 -> 0.49. Runs of one
    configuration more than 2x apart are almost always a unit or entry error: fit says so on
    stderr before sampling, one line per configuration naming the rows (and in its JSON
    warnings, the same list). Here Kimi AR on 8 x B300 at 133 (row 2) and 400 tok/s: 3.01x."""
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine import fitting
    from ddtree_bayes.engine import remedies as R

    text = bundled("measurements.csv").read_text(encoding="utf-8")   # a header and 9 rows
    far = tmp_path / "far.csv"
    far.write_text(text + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,400,x,\n")
    line = (f"{far}, rows 2 and 11 repeat one configuration (kimi-k2.6, b300x8 sglang ar M=1) "
            "3.01x apart: 133 and 400 tok/s; repeats that far apart are almost always a unit "
            "or entry error, which a fit reads as the scatter of every configuration (check "
            "tok_s: per-user or total? and the configuration columns)")
    inputs = fitting.FitInputs.read(far, bundled("priors.toml"), workdir=tmp_path)
    assert inputs.warnings(inputs.priors) == [line]

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(R, "ModelSampler", stop)   # (no sampling: the warning comes first)
    with pytest.raises(Stop):
        fitting.fit(far, bundled("priors.toml"), workdir=tmp_path, progress=False)
    assert capsys.readouterr().err == f"ddtree-bayes: warning: {line}\n"
    # a second run within 2x is no slip
    near = tmp_path / "near.csv"
    near.write_text(text + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,250,x,\n")
    inputs = fitting.FitInputs.read(near, bundled("priors.toml"), workdir=tmp_path)
    assert inputs.warnings(inputs.priors) == []


@pytest.mark.parametrize(("setting", "value"), [
    ("chains", 1.5), ("chains", True), ("chains", "4"), ("draws", "100"), ("draws", 2.5),
    ("tune", 1000.0), ("tune", False), ("target_accept", "0.9"), ("target_accept", True),
    ("target_accept", float("nan"))])
def test_api_fit_refuses_a_sampler_setting_that_is_no_count_before_compiling(tmp_path,
                                                                             setting, value):
    """db.fit(chains=1.5) died in a bare TypeError ("'float' object cannot be interpreted as
    an integer"), draws="100" in another ("'>=' not supported between instances of 'str' and
    'int'"), and chains=True (a bool is an int: 1) was sampled as one chain. Each is refused
    with the other sampler settings, as seed=1.5 is, nothing written."""
    import ddtree_bayes as db
    from ddtree_bayes.core.errors import DataError

    with pytest.raises(DataError) as info:
        db.fit(workdir=tmp_path, progress=False, **{setting: value})
    assert str(info.value).startswith(f"sampler settings out of range: {setting} {value!r} "
                                      "(fix: chains >= 1"), str(info.value)
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize(("call", "name", "value"), [
    ("fit", "data", 5), ("fit", "priors", 5), ("fit", "hardware", ["h.csv"]),
    ("fit", "workdir", 7), ("load", "workdir", 7), ("predict", "workdir", 7),
    ("load_inputs", "data", ["m.csv"]), ("load_inputs", "priors", 5),
    ("load_inputs", "hardware", 5), ("load_inputs", "workdir", 7)])
def test_the_api_names_a_path_argument_of_another_type(tmp_path, monkeypatch, call, name,
                                                       value):
    """db.load_inputs(["m.csv"]), db.fit(workdir=7) and the rest died in pathlib's bare
    TypeError ("argument should be a str or an os.PathLike object where __fspath__ returns a
    str, not 'int'"), which names no argument; fit raised it after reading nothing, so
    nothing was written either way. Each names its argument now, as load(fit_id=5) does."""
    import ddtree_bayes as db

    monkeypatch.chdir(tmp_path)
    kw = {name: value, **({"accept": 14} if call == "predict" else {}),
          **({"progress": False} if call == "fit" else {})}
    with pytest.raises(TypeError) as info:
        getattr(db, call)(**kw)
    assert str(info.value) == (
        f"{call}({name}=...) takes a path (a str or pathlib.Path) or None, not "
        f"{type(value).__name__} (fix: give the {'folder' if name == 'workdir' else 'file'}'s "
        "path)"), str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_a_bool_target():
    """target=True was read as 1 tok/s: P(tok/s >= 1) = 1 in every row."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.testing import point_mass_draws

    with pytest.raises(QueryError, match=re.escape("--target True is not a finite throughput")):
        api.predict(point_mass_draws(), accept=14, target=True)


@pytest.mark.parametrize(("extra", "message"), [
    ({"fit_id": "x"}, "extra_meta {'fit_id': 'x'} would overwrite the fit's own metadata "
                      "(fit_id) (fix: give keys of your own"),
    ({"converged": True, "note": "mine"}, "would overwrite the fit's own metadata (converged)"),
    ({"data": {}, "seed": 1}, "would overwrite the fit's own metadata (data, seed)"),
    ([1], "extra_meta [1] is not a dict of metadata keys"),
    ({1: "a"}, "extra_meta {1: 'a'} is not a dict of metadata keys"),
])
def test_api_fit_refuses_extra_meta_over_its_own_before_sampling(tmp_path, extra, message):
    """db.fit(extra_meta={"fit_id": "x"}) sampled, then saved the fit as models/fits/x.nc, the
    id `history` and `predict` showed, while the FitResult named 20261207T152538Z-3bd953e0,
    no fit's id; a fit_id of an existing fit replaced that fit's file, and extra_meta=[1]
    died in a bare TypeError after sampling. extra_meta adds keys beside the fit's own
    (update's "update", "made_by", "refit_reasons", "psis"), never over them: refused before
    anything is compiled or written."""
    import ddtree_bayes as db

    with pytest.raises((TypeError, ValueError)) as info:
        db.fit(workdir=tmp_path, progress=False, extra_meta=extra)
    assert str(info.value).startswith(message) or message in str(info.value), str(info.value)
    assert not (tmp_path / "models").exists()


def test_extra_meta_is_checked_once_against_every_key_a_fit_writes(tmp_path):
    """fit checked extra_meta twice: against OWN_META_KEYS before sampling, and against the
    metadata it had built after sampling ("a key added to the metadata since"). The second
    check could only fire for a key fit writes that OWN_META_KEYS lacks; the metadata is now
    built in one place (fitting.fit_metadata) and checked here to hold no such key (with a
    user hardware file: its "hardware" key too), so the one check before sampling is the
    whole rule. No sampling: the metadata of the bundled rows' model."""
    import shutil

    from ddtree_bayes.core.config import SamplerSettings
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine.fitting import OWN_META_KEYS, FitInputs, fit_metadata, model_spec

    (tmp_path / "data").mkdir()
    shutil.copy(bundled("measurements.csv"), tmp_path / "data" / "measurements.csv")
    shutil.copy(bundled("hardware.csv"), tmp_path / "data" / "hardware.csv")
    inputs = FitInputs.read(priors=bundled("priors.toml"), workdir=tmp_path)
    assert inputs.hardware.user_file is not None
    spec = model_spec(inputs, inputs.priors)
    meta = fit_metadata(inputs, tmp_path / "models", {"attempts": []},
                        "20260101T000000Z-aaaaaaaa", inputs.measurements, inputs.priors, spec,
                        SamplerSettings(draws=10), "nutpie", 1, "0" * 64, [], 0, [], {})
    assert {"remedies", "workdir", "hardware"} <= set(meta)
    assert set(meta) - OWN_META_KEYS == set()


def test_extra_meta_refuses_the_digests_a_saved_fit_writes_over_it():
    """store.save adds cards_sha256 and derived_sha256 to every fit's metadata (with_digests)
    after fit() checked extra_meta against OWN_META_KEYS, which lacked both: extra_meta=
    {"cards_sha256": "mine"} passed, sampled, and was silently replaced by the fit's digest
    (the commit's rule: beside the fit's own keys, never over them, refused before
    sampling). Every top-level field store reads a fit's metadata by is the fit's own."""
    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.fitting import OWN_META_KEYS, _extra_meta

    read = {f.split(".")[0] for f in (*store.REQUIRED_FIELDS, *store.OPTIONAL_FIELDS)}
    assert read - OWN_META_KEYS == set()
    for key in ("cards_sha256", "derived_sha256"):
        with pytest.raises(ValueError, match=f"would overwrite the fit's own metadata \\({key}\\)"):
            _extra_meta({key: "mine"})


def test_the_api_prices_a_drafter_from_the_workdirs_cards(tmp_path, monkeypatch):
    """`db.predict(workdir=W, drafter=NAME)` read NAME's card (one the fit did not store) from
    the current directory's data/drafters.csv, not W's: from a notebook in another folder it
    priced another card of that name without a word (a fit of the Kimi K2.6 concurrency sweep,
    a K2.6 EAGLE-3 head of 1 B in W and one of 8 B here: 91.8 tok/s where `predict` in W
    answers 122), or refused a card W has. W's cards now, as `predict` run in W reads them:
    the same number as the API called from W itself."""
    in_work, here, from_elsewhere = _asked_in_work_and_elsewhere(
        monkeypatch, *_card_in_two_folders(tmp_path))
    assert here != pytest.approx(in_work, rel=1e-3)   # (the two cards price it apart)
    assert from_elsewhere == in_work


def test_a_tracked_querys_rows_of_a_workdir_price_its_drafter_from_its_cards(tmp_path,
                                                                              monkeypatch):
    """958c5b77 made `db.predict(workdir=W)` read W's drafter cards; the library's tracked
    query rows (workflows/living/tracking.py query_rows and compare_queries, which `track`,
    `update` and `diff` answer a tracked query with) take a ``workdir`` too, but read W's
    seed estimates only: the query's --drafter card (one the fit did not store) was still
    the current directory's, 8 + 1 B per pass where W's card reads 2 + 1 B. W's cards now:
    the rows asked from elsewhere with workdir=W are those asked in W (and predict's)."""
    from ddtree_bayes.workflows import living

    draws, work, elsewhere = _card_in_two_folders(tmp_path)
    query = {"hardware": "b300", "gpus": 8, "method": "ddtree", "block": 16, "budget": 32,
             "accept": "12", "engine": "sglang", "drafter": "my-kimi-ddtree"}

    def median(**where) -> float:
        return living.query_rows(draws, query, 7, **where)[0]["median"]

    with pytest.warns(UserWarning, match=PAST_M9):   # (predict's, in W: budget 32, M = 33)
        monkeypatch.chdir(work)
        asked = api.predict(draws, seed=7, **query)["median"][0]
    in_work = median()
    monkeypatch.chdir(elsewhere)
    assert median() != pytest.approx(in_work, rel=1e-3)   # (the two cards price it apart)
    assert median(workdir=work) == in_work == asked


def test_accept_takes_any_sequence_as_concurrency_does():
    """db.predict(accept=np.array([12, 14])) (or a pandas Series, or a range) was refused as
    "not a number, list or range", where concurrency takes any sequence: one helper reads both
    (engine/question.py ``asked_values``). Each gives the list's numbers: 12 and 14 tokens
    per 20 ms step of the point-mass fit, 600 and 700 tok/s (13: 650)."""
    import warnings

    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()

    def medians(accept) -> list[float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            table = api.predict(draws, engine="sglang", accept=accept)
        return [round(m, 6) for m in table["median"]]

    assert medians([12, 14]) == [600.0, 700.0]
    for given in (np.array([12, 14]), pd.Series([12, 14]), np.array([12.0, 14.0]),
                  (12, 14)):
        assert medians(given) == [600.0, 700.0], given
    assert medians(range(12, 15)) == medians([12, 13, 14]) == [600.0, 650.0, 700.0]
    assert medians(np.int64(13)) == [650.0]


#: the question asked of the drafter card ``my-kimi-ddtree`` of :func:`_card_in_two_folders`
ASK_MY_DRAFTER = {"hardware": "b300", "gpus": 8, "method": "ddtree", "block": 16, "budget": 32,
                  "accept": "12", "engine": "sglang", "drafter": "my-kimi-ddtree"}


def _asked_in_work_and_elsewhere(monkeypatch, draws, work, elsewhere, nest=None):
    """:data:`ASK_MY_DRAFTER`'s median asked by the API run in ``work``, run in ``elsewhere``,
    and from there with ``workdir=work`` (``nest``: called before that last call)."""
    with pytest.warns(UserWarning, match=PAST_M9):   # (budget 32: M = 33)
        monkeypatch.chdir(work)   # (as `predict --drafter my-kimi-ddtree` run in W)
        in_work = api.predict(draws, **ASK_MY_DRAFTER)["median"][0]
        monkeypatch.chdir(elsewhere)
        here = api.predict(draws, **ASK_MY_DRAFTER)["median"][0]
        if nest is not None:
            nest()
        return in_work, here, api.predict(draws, workdir=work, **ASK_MY_DRAFTER)["median"][0]


def _card_in_two_folders(tmp_path):
    """A structured Kimi fit and two folders each holding a drafter card named
    ``my-kimi-ddtree``: W's reads 2 + 1 B a pass, the other's 8 + 1 B."""
    import numpy as np

    from test_engine_effects import KIMI_DDTREE, own_drafters, structured_engine_fit

    base = structured_engine_fit()
    draws = base.view(variables={**base.variables, "structure_sd": np.full(4, 0.04)})
    work, elsewhere = tmp_path / "w", tmp_path / "here"
    work.mkdir(), elsewhere.mkdir()
    own_drafters(work, KIMI_DDTREE)   # (2 + 1 B read per pass)
    own_drafters(elsewhere, KIMI_DDTREE.replace(",2,2,1,", ",8,8,1,"))   # (8 + 1 B: another)
    return draws, work, elsewhere


def test_a_call_without_a_workdir_inside_the_apis_keeps_the_apis_workdir(tmp_path,
                                                                        monkeypatch):
    """core/paths.working_in(None) set the working directory to "none given" (the current
    one) rather than keeping the one an enclosing call was given: a library call made within
    `db.predict(workdir=W)` that enters working_in with its own workdir left None
    (workflows/living/tracking.query_rows wrapped its call in a nullcontext for this) read the
    current directory's cards, not W's: the drafter card of W priced with the other folder's
    8 + 1 B card (the number `predict` run here gives), or refused. None keeps the enclosing
    directory: the same number as `predict` run in W."""
    import functools

    from ddtree_bayes.core import paths
    from ddtree_bayes.engine import predictive as P

    real = P.predict

    @functools.wraps(real)
    def nested(*args, **kwargs):   # (a call inside that names no workdir of its own)
        with paths.working_in(None):
            return real(*args, **kwargs)

    draws, work, elsewhere = _card_in_two_folders(tmp_path)
    in_work, here, from_elsewhere = _asked_in_work_and_elsewhere(
        monkeypatch, draws, work, elsewhere,
        nest=lambda: monkeypatch.setattr(P, "predict", nested))
    assert here != pytest.approx(in_work, rel=1e-3)   # (the two cards price it apart)
    assert from_elsewhere == in_work
    # nested directly; and outside any call None is the current directory, as before
    with paths.working_in(work), paths.working_in(None):
        assert paths.own_data_file("drafters.csv") == work / "data" / "drafters.csv"
    with paths.working_in(None):
        assert paths.own_data_file("drafters.csv") == elsewhere / "data" / "drafters.csv"

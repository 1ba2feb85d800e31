"""Flag errors say what is wrong with what was typed: ``--engine "sglang, native"`` was
refused with "names are lowercase, e.g. 'native'", though it was lowercase; the space after
the comma was the problem."""

from __future__ import annotations

import pytest

from test_cli_support import make_point_mass_workdir, run_cli


def test_a_space_in_an_engine_list_is_named(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--engine", "sglang, native", "--accept", "14")
    assert code == 2 and out == ""
    assert err == ("ddtree-bayes: error: argument --engine: ' native' has a space in it (fix: "
                   "write the list without spaces, e.g. 'sglang,native')\n")
    # spaces and capitals: both mended in the example
    code, _, err = run_cli(work, "predict", "--engine", "sglang , Native", "--accept", "14")
    assert code == 2 and err.endswith("(fix: write the list without spaces, e.g. "
                                      "'sglang,native')\n")
    # capitals alone keep their fix
    code, _, err = run_cli(work, "predict", "--engine", "SGLang", "--accept", "14")
    assert code == 2 and "names are lowercase, e.g. 'sglang'" in err


def test_a_gpu_added_after_the_fit_suggests_no_other_gpu(tmp_path):
    """After `hardware add` without a refit, `predict --hardware <it>` said to re-run fit, and
    also "did you mean rtx-5090 or rtx-5080 or rtx-4090?": GPUs the user did not mean (the
    name is right; the fit is older than it)."""
    work = make_point_mass_workdir(tmp_path / "w")
    code, _, err = run_cli(work, "hardware", "add", "rtx-5090-oc", "--like", "rtx-5090",
                           "--mem-bw-tb-s", "2.048", "--source", "test")
    assert code == 0, err
    code, out, err = run_cli(work, "predict", "--hardware", "rtx-5090-oc", "--accept", "4")
    assert code == 2 and out == ""
    error = err.splitlines()[-1]
    assert error == ("ddtree-bayes: error: --hardware 'rtx-5090-oc' was never measured, nor in "
                     "the hardware table the fit stored: it cannot be predicted (no measurement, "
                     "no hardware-table row to transfer from) (fix: re-run `ddtree-bayes fit`: "
                     "rtx-5090-oc is in the hardware table here, added after this fit)")
    # a misspelt GPU keeps its suggestions
    code, _, err = run_cli(work, "predict", "--hardware", "rtx-5090-ox", "--accept", "4")
    assert code == 2 and "did you mean rtx-5090" in err


def _context_helps() -> dict[str, str]:
    import argparse

    from ddtree_bayes.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: a.help or "" for name, p in sub.choices.items() for a in p._actions
            if "--context" in a.option_strings}


def test_every_context_flag_names_the_default_it_uses():
    """`optimize --help` said --context defaults to 0, while optimize (like predict) asks at the
    priors' default_context_tokens (a fit of priors with 32768 there answered at 32768)."""
    helps = _context_helps()
    assert {"predict", "track", "optimize", "add"} <= set(helps)
    for command, text in helps.items():
        assert "(default: 0)" not in text, command
        assert "default_context_tokens" in text, (command, text)
    # and what optimize's help says is what it does: no --context is the fit's default
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.decisions.optimize import optimize

    draws = point_mass_draws()
    draws.meta["model"]["default_context_tokens"] = 32768.0
    out = optimize(draws, parse_acceptance_curve(draws.priors_toml), hardware="b300",
                   engine="sglang", budgets=(8, 32))
    assert out["scenario"]["context_tokens"] == 32768.0


def test_predict_optimize_and_next_take_one_pair_of_fit_checks():
    """--strict and --allow-unconverged were written out twice, word for word (cli/main.py's
    predict, cli/decisions.py's optimize and next): one helper adds them now, so the three
    commands say one thing of a stale or unconverged fit."""
    import argparse

    from ddtree_bayes.cli import args as A
    from ddtree_bayes.cli.main import build_parser

    own = argparse.ArgumentParser()
    A.add_fit_checks(own)
    want = {a.dest: (a.option_strings, a.help) for a in own._actions
            if a.dest in ("strict", "allow_unconverged")}
    assert want["strict"][1].startswith("error (exit 4) instead of warning if data or priors")
    assert want["allow_unconverged"][1] == "use a fit that failed its convergence gates"
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("predict", "optimize", "next"):
        got = {a.dest: (a.option_strings, a.help) for a in sub.choices[name]._actions
               if a.dest in want}
        assert got == want, name


def test_keep_ar_with_sbc_names_sbc_and_a_structure_given_twice_is_run_once(tmp_path,
                                                                             monkeypatch):
    """`validate --group pair --keep-ar --sbc 3` was refused with "--keep-ar goes with
    --group pair", which the command already said: the conflict is --sbc (and --extrapolate).
    `--structures structured,structured` fitted the structured extrapolation twice; a list
    flag's repeated item is one item, as --concurrency/--budgets/--test-concurrency read it
    (cli/args.py int_list: `--test-concurrency 8,8` is [8])."""
    from ddtree_bayes.cli.main import build_parser
    from ddtree_bayes.workflows import extrapolation as X

    work = make_point_mass_workdir(tmp_path / "w")
    for other, shown in (("--sbc 3", "--sbc"), ("--extrapolate", "--extrapolate")):
        code, out, err = run_cli(work, "validate", "--group", "pair", "--keep-ar",
                                 *other.split())
        assert (code, out) == (2, "")
        assert err == (f"ddtree-bayes: error: --keep-ar and {shown} are two different checks "
                       "(fix: run them one at a time)\n")
    code, _, err = run_cli(work, "validate", "--group", "model", "--keep-ar")
    assert code == 2 and "--keep-ar goes with --group pair" in err
    assert build_parser().parse_args(["validate", "--test-concurrency", "8,8"]
                                     ).test_concurrency == [8]
    seen = []

    def extrapolate(files, priors, *, structures, **kw):
        seen.append(structures)
        raise SystemExit(0)

    monkeypatch.setattr(X, "extrapolate", extrapolate)
    run_cli(work, "validate", "--extrapolate", "--structures", "structured,fraction,structured")
    assert seen == [("structured", "fraction")]


def test_an_empty_item_of_structures_is_refused_not_dropped(tmp_path, monkeypatch):
    """`validate --extrapolate --structures structured,,fraction` ran the two structures
    without a word on the blank between, where the list flags of whole numbers (cli/args.py
    int_list: `--test-concurrency 8,,16`) refuse it as a typo or a name lost: refused the same
    way, by the same splitter, before anything is fitted. A spaced list and a repeated item
    read as before."""
    from ddtree_bayes.workflows import extrapolation as X

    work = make_point_mass_workdir(tmp_path / "w")
    seen = []

    def extrapolate(files, priors, *, structures, **kw):
        seen.append(structures)
        raise SystemExit(0)

    monkeypatch.setattr(X, "extrapolate", extrapolate)
    for text in ("structured,,fraction", "structured,", ",fraction", " , "):
        code, out, err = run_cli(work, "validate", "--extrapolate", "--structures", text)
        assert (code, out) == (2, "")
        assert err == (f"ddtree-bayes: error: argument --structures: {text!r} has an empty item "
                       "(two commas in a row, or one at an end) (fix: e.g. --structures "
                       "structured,fraction)\n"), text
    code, _, err = run_cli(work, "validate", "--extrapolate", "--structures", "")
    assert code == 2 and err == ("ddtree-bayes: error: argument --structures: '' names no "
                                 "structure (fix: e.g. --structures structured,fraction)\n")
    assert seen == []
    run_cli(work, "validate", "--extrapolate", "--structures", "fraction, structured,fraction")
    assert seen == [("fraction", "structured")]


@pytest.mark.parametrize("name", ["", " ", " yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"])
def test_the_librarys_blank_drafter_is_refused_in_the_clis_words(name):
    """``api.predict(..., drafter="")`` and the library's ``parse_query`` said of a blank
    drafter "--drafter needs a fit of the structured step" (a fit of the fraction form) or
    "no drafter card ''" (the structured one), where the CLI's --drafter says the name is
    not a drafter card's name. One rule (core/data.py drafter_name_problem) and one wording
    now, in the lowest layer: the same sentence and fix in both forms, before the fit is
    asked anything."""
    from ddtree_bayes import api
    from ddtree_bayes.core.data import DRAFTER_NAME_FIX
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows import decisions as D

    said = f"--drafter {name!r} is not a drafter card's name"
    for step_form in ("fraction", "structured"):
        draws = point_mass_draws()
        draws.meta["model"]["step_form"] = step_form
        with pytest.raises(QueryError) as err:
            api.predict(draws, drafter=name)
        assert (str(err.value), err.value.fix) == (f"{said} (fix: {DRAFTER_NAME_FIX})",
                                                   DRAFTER_NAME_FIX), step_form
        with pytest.raises(QueryError) as err:
            D.parse_query(draws, f"--drafter '{name}'")
        assert str(err.value) == f"--query: {said} (fix: {DRAFTER_NAME_FIX})", step_form
    # the CLI's flag: the same problem and fix (argparse words the flag)
    from ddtree_bayes.cli.args import drafter_name

    with pytest.raises(Exception) as err:
        drafter_name(name)
    assert str(err.value) == f"{name!r} is not a drafter card's name (fix: {DRAFTER_NAME_FIX})"

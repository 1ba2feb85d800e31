"""Names in the priors file must name something: a relation's base engine, an [[acceptance]]
entry's model and the [acceptance_curve]'s model are matched by name to the data's rows or the
model cards, and a typo matched nothing, without a word (exit 0): ``base = "sglnag"`` priced
native from a group no row measures, ``model = "kimi-k2.7"`` left Kimi K2.6's acceptance
entry unused. ``fit``, ``add``, ``validate`` and ``update`` read the priors beside the data
(engine/fitting.FitInputs.read): each refuses in one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtree_bayes.core.errors import PriorsError
from ddtree_bayes.core.paths import bundled
from test_cli_support import copy_bundled_data, listing, make_point_mass_workdir, run_cli

TEXT = bundled("priors.toml").read_text()
RELATION = '[relations.native]\nbase = "sglang"\n'
K26_B32 = 'model = "kimi-k2.6"\nmethod = "ddtree"\nblock = 16\nbudget = 32\n'
CURVE = '[acceptance_curve]\nmodel = "kimi-k2.6"'


def edited(old: str, new: str) -> str:
    assert TEXT.count(old) == 1, old
    return TEXT.replace(old, new)


def refused(code: int, out: str, err: str) -> str:
    """Exit 2, nothing on stdout, one line on stderr with a fix."""
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and "(fix: " in err and "Traceback" not in err, err
    return err


def workdir(tmp_path: Path, priors: str) -> Path:
    work = copy_bundled_data(tmp_path / "w", writable=True)
    (work / "models").mkdir()
    (work / "models" / "priors.toml").write_text(priors)
    return work


def read(tmp_path: Path, priors: str, rows: str = ""):
    from ddtree_bayes.engine.fitting import FitInputs

    work = workdir(tmp_path, priors)
    data = work / "data" / "measurements.csv"
    data.write_text(data.read_text() + rows)
    return FitInputs.read(data, work / "models" / "priors.toml", workdir=work)


@pytest.mark.parametrize(("base", "near"), [("sglnag", "sglang"), ("SGLang", "sglang"),
                                            ("vlm", "vllm")])
def test_a_relation_base_that_is_a_typo_of_a_measured_engine_is_refused(tmp_path, base, near):
    work = workdir(tmp_path, edited(RELATION, f'[relations.native]\nbase = "{base}"\n'))
    before = listing(work)
    err = refused(*run_cli(work, "fit"))
    assert err.startswith(f"ddtree-bayes: error: {work}/models/priors.toml, column "
                          f"'relations.native.base': base engine {base!r} is the engine of no "
                          f"row of {work}/data/measurements.csv, whose rows name {near!r}: one "
                          "of the two is a typo (fix: spell the engine alike in both (did you "
                          f"mean {near}? "), err
    assert listing(work) == before
    bare = err.replace(f"{work}/", "")
    # add, validate: the same line, nothing written (add's lock file aside)
    data = (work / "data" / "measurements.csv").read_bytes()
    assert refused(*run_cli(work, "add", "--hardware", "b300", "--engine", "sglang",
                            "--method", "ar", "--accept", "1", "--tok-s", "131",
                            "--source", "test")).replace(f"{work}/", "") == bare
    assert (work / "data" / "measurements.csv").read_bytes() == data
    assert refused(*run_cli(work, "validate")).replace(f"{work}/", "") == bare
    assert set(listing(work)) - set(before) <= {"data/.measurements.csv.lock"}


def test_a_relation_base_no_row_measures_that_is_no_typo_is_kept(tmp_path):
    """A relation may name engines nobody measured yet (the bundled native -> sglang beside a
    file of vLLM rows only): kept, and said when its engine's rows measure it alone."""
    inputs = read(tmp_path, edited(RELATION, '[relations.native]\nbase = "tgi"\n'))
    assert inputs.priors.relations["native"].base == "tgi"
    assert not [w for w in inputs.warnings(inputs.priors) if "relations" in w]
    inputs = read(tmp_path / "2", edited(RELATION, '[relations.native]\nbase = "tgi"\n'),
                  "kimi-k2.6,b300,8,native,ddtree,8,8,9,4.4,,330,test,\n")
    (line,) = [w for w in inputs.warnings(inputs.priors) if "relations" in w]
    assert line.endswith("priors.toml, column 'relations.native.base': native's rows are "
                         "related to base engine 'tgi', which no row measures: they measure "
                         "the tgi groups alone, through the reduction's prior"), line
    # the bundled relation and the bundled rows: nothing said
    inputs = read(tmp_path / "3", TEXT)
    assert not [w for w in inputs.warnings(inputs.priors) if "relations" in w]


@pytest.mark.parametrize(("model", "near"), [("kimi-k2.7", "kimi-k2.6"),
                                             ("Kimi-K2.6", "kimi-k2.6")])
def test_an_acceptance_entry_of_a_model_that_exists_nowhere_is_refused(tmp_path, model, near):
    text = edited(K26_B32, K26_B32.replace("kimi-k2.6", model))
    work = workdir(tmp_path, text)
    before = listing(work)
    err = refused(*run_cli(work, "fit"))
    if model == "Kimi-K2.6":   # (refused by the file alone: not a name the data can spell)
        assert "column 'acceptance[2].model'" in err, err
        return
    assert err.startswith(f"ddtree-bayes: error: {work}/models/priors.toml, column "
                          "'acceptance[2].model': model 'kimi-k2.7' is the model of no row of "
                          f"{work}/data/measurements.csv nor of a model card"), err
    assert f"(fix: did you mean {near}? " in err
    assert listing(work) == before


def test_the_curves_model_that_exists_nowhere_is_refused(tmp_path):
    work = workdir(tmp_path, edited(CURVE, CURVE.replace("kimi-k2.6", "kimi-k2.7")))
    err = refused(*run_cli(work, "fit"))
    assert err.startswith(f"ddtree-bayes: error: {work}/models/priors.toml, column "
                          "'acceptance_curve.model': model 'kimi-k2.7' is the model of no row "
                          "of "), err


@pytest.mark.parametrize("model", ["qwen3-8b", "kimi-k2.6-nvfp4"])
def test_an_acceptance_entry_of_a_carded_or_deployment_model_is_kept(tmp_path, model):
    """A model with a card and no row yet (kept for the day its rows come), or a deployment
    name of a measured model (matched by family, as predict matches it)."""
    inputs = read(tmp_path, edited(K26_B32, K26_B32.replace("kimi-k2.6", model)))
    assert inputs.priors.acceptance[1].model == model


def test_update_refuses_a_priors_name_that_names_nothing(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    priors = work / "models" / "priors.toml"
    priors.write_text(priors.read_text().replace('base = "sglang"', 'base = "sglnag"'))
    before = listing(work)
    err = refused(*run_cli(work, "update", "--priors", "models/priors.toml"))
    assert "column 'relations.native.base': base engine 'sglnag' " in err
    assert listing(work) == before


def test_the_check_is_the_priors_errors():
    from ddtree_bayes.core.config import check_priors_names, parse_priors

    cfg = parse_priors(edited(RELATION, '[relations.native]\nbase = "sglnag"\n'), "p.toml")
    with pytest.raises(PriorsError) as info:
        check_priors_names(cfg, engines={"sglang"}, models={"kimi-k2.6"}, where="d.csv")
    assert (info.value.file, info.value.column) == ("p.toml", "relations.native.base")
    # nothing measured: no engine to be a typo of; the bundled file passes
    check_priors_names(cfg, engines=set(), models={"kimi-k2.6"}, where="d.csv")
    check_priors_names(parse_priors(TEXT, "p.toml"), engines={"sglang", "vllm"},
                       models={"kimi-k2.6"}, where="d.csv")


CURVE_METHOD = 'method = "ddtree"\nblock = 16\nreference_budget = 16'


def test_the_curves_method_the_file_does_not_declare_is_refused(tmp_path):
    """[acceptance_curve] method = "ddtre" parsed: optimize then compared the budgets of a
    method nobody measured (the unmeasured group b300x8/sglang/ddtre, drawn from the
    population) and recommended one, exit 0, its only word a missing drafter card. Refused
    as an [[acceptance]] entry's undeclared method is (073b343), by optimize and by fit."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve

    text = edited(CURVE_METHOD, CURVE_METHOD.replace('"ddtree"', '"ddtre"'))
    with pytest.raises(PriorsError) as info:
        parse_acceptance_curve(text, "p.toml")
    assert info.value.column == "acceptance_curve.method"
    assert str(info.value).startswith("p.toml, column 'acceptance_curve.method': method "
                                      "'ddtre' is not one the file declares (fix: did you "
                                      "mean ddtree? "), str(info.value)
    assert parse_acceptance_curve(text, "p.toml", stored=True).method == "ddtre"
    work = make_point_mass_workdir(tmp_path / "pm")
    (work / "models" / "priors.toml").write_text(text)
    before = listing(work)
    err = refused(*run_cli(work, "optimize", "--budgets", "16,32"))
    assert "column 'acceptance_curve.method': method 'ddtre' is not one the file declares" in err
    assert listing(work) == before
    work = workdir(tmp_path, text)
    err = refused(*run_cli(work, "fit"))
    assert "column 'acceptance_curve.method': method 'ddtre' is not one the file declares" in err


# ------------------------------------------------------- validate --extrapolate's own readers
PUBLIC = Path(__file__).resolve().parents[1] / "data" / "public"
SWEEP = PUBLIC / "sglang_eagle3_qwen3_30b_a3b_h100x4_angelslim.csv"   # (sglang rows)
CONC = PUBLIC / "conc" / "sglang_mtp_qwen35_397b_b12x_rtxpro6000srvx4_conc.csv"


@pytest.mark.parametrize(("mode", "sweep"), [
    (("--extrapolate",), SWEEP), (("--extrapolate", "--from-smallest"), SWEEP),
    (("--extrapolate", "--concurrency"), CONC)], ids=["sweeps", "from-smallest", "concurrency"])
@pytest.mark.parametrize(("old", "new", "says"), [
    (RELATION, '[relations.native]\nbase = "sglnag"\n',
     "column 'relations.native.base': base engine 'sglnag' is the engine of no row of "),
    (K26_B32, K26_B32.replace("kimi-k2.6", "kimi-k2.7"),
     "column 'acceptance[2].model': model 'kimi-k2.7' is the model of no row of "),
    ('says so\nmethod = "ddtree"\n', 'says so\nmethod = "ddtre"\n',
     "column 'acceptance_curve.method': method 'ddtre' is not one the file declares"),
], ids=["base", "model", "curve-method"])
def test_validate_extrapolate_refuses_a_priors_name_that_names_nothing(
        tmp_path, monkeypatch, mode, sweep, old, new, says):
    """validate --extrapolate, --from-smallest and --concurrency read the priors with
    load_priors alone, so none of fit's name checks ran there: with ``base = "sglnag"`` beside
    SGLang sweeps each sweep was fitted with native's relation matching nothing (and the
    [[acceptance]] entry of a model nobody has, the curve of a method nobody declared), exit
    0. Now each sweep fitted is checked as fit checks its data, before the first fit: one
    line, exit 2."""
    from ddtree_bayes.workflows import concurrency_check as CC
    from ddtree_bayes.workflows import extrapolation as X
    from ddtree_bayes.workflows import validation as V

    fitted: list = []
    monkeypatch.setattr(X, "dispatch", lambda *a, **k: fitted.append(a) or [])
    monkeypatch.setattr(V, "dispatch", lambda *a, **k: fitted.append(a) or [])
    monkeypatch.setattr(CC, "check_sweep", lambda *a, **k: fitted.append(a))
    priors = tmp_path / "p.toml"
    assert TEXT.count(old) == 1, old
    priors.write_text(TEXT.replace(old, new))
    err = refused(*run_cli(tmp_path, "validate", *mode, "--sweeps", str(sweep), "--priors",
                           str(priors), "--quiet"))
    assert fitted == []
    assert err.startswith(f"ddtree-bayes: error: {priors}, {says}"), err
    if "relations" in says:   # (the sweep, as fit names its data file)
        assert f"of {sweep}, " in err or f"of {sweep} [" in err, err
        assert "whose rows name 'sglang'" in err, err


def test_the_sweeps_pass_the_name_checks_with_the_bundled_priors():
    """What validate --extrapolate (and --from-smallest) fits: every public sweep, read with the
    bundled priors' checks, is kept (none refused)."""
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.workflows import extrapolation as X
    from ddtree_bayes.workflows import from_smallest as F

    priors = load_priors(bundled("priors.toml"))
    files = sorted(p for p in PUBLIC.glob("*.csv") if p.name != "hardware_flops.csv")
    hw = bundled("hardware.csv").read_text()
    assert X.load_sweeps(files, hw, priors=priors)[0]
    assert F.load_splits(files, hw, priors=priors)[0]

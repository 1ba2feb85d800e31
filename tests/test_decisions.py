"""optimize and next against hand-built posteriors whose answers are known by hand.

Point mass (ddtree_bayes.engine.testing, linear MoE form): step_ar 8 ms, MoE share 0.5, slope
0.0625, SGLang overhead fraction 0.2 on b300x8, so a DDTree step at budget B (M = B + 1) is
target = 8 * (1 + B / 32) ms and step = target / 0.8 = 10 * (1 + B / 32) ms.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.cli import main as cli
from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
from ddtree_bayes.core.errors import DataError, PriorsError, QueryError
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.testing import point_mass_draws
from ddtree_bayes.workflows import decisions as D

BUDGETS = (8, 16, 32, 64, 128)
REFERENCE = Path(__file__).resolve().parents[1] / "data" / "acceptance_reference.csv"


def curve_toml(accept_ref="dist = \"point\"\nvalue = 8.0", gain="dist = \"point\"\nvalue = 1.0",
               decay="dist = \"point\"\nvalue = 0.5", block=16, extra="") -> str:
    why = 'rationale = "r"\nsource = "s"\n'
    return (f'[acceptance_curve]\nmethod = "ddtree"\nblock = {block}\nreference_budget = 16\n'
            f"measurement_sd = 0.1\n{extra}\n"
            f"[acceptance_curve.accept_ref]\n{accept_ref}\n{why}\n"
            f"[acceptance_curve.gain]\n{gain}\n{why}\n"
            f"[acceptance_curve.decay]\n{decay}\n{why}")


def curve_of(**kw):
    return parse_acceptance_curve(curve_toml(**kw), "curve.toml")


def step_by_hand(budget: float, step_ar: float = 8.0) -> float:
    return step_ar * (1 + budget / 32) / 0.8


# ------------------------------------------------------------------ the curve
def test_bundled_curve_parses_and_matches_the_budget32_prior():
    curve = parse_acceptance_curve(bundled("priors.toml").read_text(), "bundled")
    assert (curve.method, curve.block, curve.reference_budget) == ("ddtree", 16, 16)
    for prior in (curve.accept_ref, curve.gain, curve.decay):
        assert prior.rationale and prior.source
    # accept_ref + gain (budget 32) is centred on the budget-32 acceptance prior (mu 10)
    assert curve.accept_ref.params["mu"] + curve.gain.params["mu"] == pytest.approx(10.0)


def test_curve_accept_by_hand():
    budgets = [8, 16, 32, 64, 1024]
    # block = 16 (the anchor + 15 drafts: 15 + the bonus token), B + 1 = 9 at B 8
    limits = D.curve_limits(curve_of(), budgets)
    assert limits.tolist() == [9.0, 16.0, 16.0, 16.0, 16.0]
    half = D.curve_accept(budgets, np.array([8.0]), np.array([1.0]), np.array([0.5]),
                          reference_budget=16, limits=limits)[0]
    # gains 1, 0.5, 0.25, ... per doubling above 16; 2 for the halving below it
    assert half.tolist() == pytest.approx([6.0, 8.0, 9.0, 9.5, 8 + 2 * (1 - 0.5 ** 6)])
    loglin = D.curve_accept(budgets, np.array([8.0]), np.array([1.0]), np.array([1.0]),
                            reference_budget=16, limits=limits)[0]
    assert loglin.tolist() == pytest.approx([7.0, 8.0, 9.0, 10.0, 14.0])
    # capped at block (16) and at B + 1, floored at 1
    capped = D.curve_accept([4, 16, 1024], np.array([12.0]), np.array([2.0]), np.array([1.0]),
                            reference_budget=16, limits=D.curve_limits(curve_of(), [4, 16, 1024]))[0]
    assert capped.tolist() == [5.0, 12.0, 16.0]     # raw 8, 12, 24
    floor = D.curve_accept([8], np.array([1.5]), np.array([2.0]), np.array([0.0]),
                           reference_budget=16, limits=[9.0])
    assert floor.tolist() == [[1.0]]


@pytest.mark.parametrize("edit,column,fragment", [
    ({"decay": 'dist = "point"\nvalue = 1.5'}, "acceptance_curve.decay", "must lie in"),
    ({"gain": 'dist = "normal"\nmu = 0.5\nsigma = 0.1'}, "acceptance_curve.gain", "cannot use"),
    ({"accept_ref": 'dist = "uniform"\nlower = 0.5\nupper = 3.0'}, "acceptance_curve.accept_ref",
     "must lie in"),
    ({"block": 0}, "acceptance_curve.block", "positive integer"),
])
def test_bad_curve_sections_name_the_entry(edit, column, fragment):
    with pytest.raises(PriorsError) as info:
        parse_acceptance_curve(curve_toml(**edit), "curve.toml")
    assert info.value.column == column and fragment in str(info.value)
    assert info.value.exit_code == 2


def test_a_curve_prior_above_what_a_step_can_emit_is_refused():
    """adv8: an [[acceptance]] prior whose upper (or point value) is above what its
    configuration can emit is refused; the curve's accept_ref was bounded only below (1, no
    ceiling). accept_ref TruncNormal(30, 2.4, 1, 40) at reference budget 16 of a block-16
    DDTree (at most 16 tokens a step: block - 1 drafts + 1) was taken, and optimize answered
    every budget at the cap: budget 16 accept 16.0 (16.0-16.0), 953 tok/s = 16 / 16.8 ms, P(best)
    1.00, exit 0. Refused now in one line; an upper of 16 is kept, and the cap at a budget
    smaller than the block's (budget + 1) is still the curve's, not the prior's."""
    fix = "set upper = 16 or lower"
    with pytest.raises(PriorsError) as info:
        parse_acceptance_curve(curve_toml(accept_ref='dist = "truncnormal"\nmu = 30.0\n'
                                                     'sigma = 2.4\nlower = 1.0\nupper = 40.0'),
                               "curve.toml")
    assert str(info.value) == (
        "curve.toml, column 'acceptance_curve.accept_ref.upper': upper 40 is above what ddtree "
        f"with block 16 can emit (at most 16 tokens per step: block - 1 drafts + 1) (fix: {fix})")
    with pytest.raises(PriorsError, match=r"value 17 is above what ddtree with block 16"):
        parse_acceptance_curve(curve_toml(accept_ref='dist = "point"\nvalue = 17.0'),
                               "curve.toml")
    assert parse_acceptance_curve(curve_toml(accept_ref='dist = "uniform"\nlower = 8.0\n'
                                                        'upper = 16.0'), "curve.toml")
    # block 8 at reference budget 16: 8 tokens at most
    with pytest.raises(PriorsError, match=r"upper 9 is above what ddtree with block 8 can"):
        parse_acceptance_curve(curve_toml(accept_ref='dist = "uniform"\nlower = 4.0\n'
                                                     'upper = 9.0', block=8), "curve.toml")


def test_missing_rationale_is_refused():
    text = curve_toml().replace('rationale = "r"\n', "", 1)
    with pytest.raises(PriorsError, match="missing 'rationale'"):
        parse_acceptance_curve(text, "curve.toml")


def test_a_crlf_data_file_is_not_stale(tmp_path):
    """A fit stores the sha256 of the text the loader read (universal newlines): the same
    CRLF file is unchanged (predict warned "changed since fit" on every public sweep with CRLF
    line ends); an edit is still caught."""
    from ddtree_bayes.core.data import load_hardware, load_measurements

    draws = point_mass_draws()
    crlf = tmp_path / "m.csv"
    crlf.write_bytes(bundled("measurements.csv").read_text().replace("\n", "\r\n").encode())
    data = load_measurements(crlf, load_hardware(bundled("hardware.csv")))
    assert b"\r\n" in crlf.read_bytes() and "\r" not in data.text
    draws.meta["data"] = {"path": str(crlf), "sha256": data.sha256}
    draws.meta["priors"] = {"path": str(bundled("priors.toml")), "sha256": hashlib.sha256(
        bundled("priors.toml").read_bytes()).hexdigest()}
    assert P.check_fit(draws) == []
    crlf.write_bytes(crlf.read_bytes().replace(b",133,", b",134,"))
    assert any("changed since fit" in w for w in P.check_fit(draws))


def test_a_fit_of_another_data_file_is_compared_with_that_file(tmp_path, monkeypatch):
    """`fit --data OTHER` then `predict` in a folder with its own data/measurements.csv warned
    "was made on OTHER, not on data/measurements.csv ... (fit this one to use it)" on every
    predict, and nothing said "yes, that file". The fit is compared with OTHER, the file it
    recorded (path and hash): silent while OTHER is unchanged, whatever the default file here
    holds; a warning once OTHER changed or is gone. A fit of the default file still warns when
    the default changed."""
    from ddtree_bayes.core.data import load_hardware, load_measurements

    draws = point_mass_draws()
    other = tmp_path / "other.csv"
    other.write_text(bundled("measurements.csv").read_text().replace(",133,", ",266,"))
    data = load_measurements(other, load_hardware(bundled("hardware.csv")))
    draws.meta["data"] = {"path": str(other), "sha256": data.sha256}
    draws.meta["priors"] = {"path": str(bundled("priors.toml")), "sha256": hashlib.sha256(
        bundled("priors.toml").read_bytes()).hexdigest()}
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    monkeypatch.chdir(work)
    assert P.check_fit(draws) == []                      # no data/measurements.csv here
    default = work / "data" / "measurements.csv"
    default.write_text(bundled("measurements.csv").read_text())
    assert P.check_fit(draws, strict=True) == []         # another default file: not this fit's
    other.write_text(other.read_text().replace(",266,", ",267,"))
    assert P.check_fit(draws) == [
        f"{other} changed since fit {draws.meta['fit_id']}; run `ddtree-bayes update --data "
        f"{other}` (or `fit --data {other}`) to use it"]
    other.unlink()
    assert P.check_fit(draws) == [f"the data file this fit used ({other}) no longer exists"]
    # a fit of the default file: the default's change is still said
    draws.meta["data"] = {"path": str(default), "sha256": hashlib.sha256(
        default.read_bytes()).hexdigest()}
    assert P.check_fit(draws) == []
    default.write_text(default.read_text().replace(",133,", ",134,"))
    assert P.check_fit(draws) == [f"{default} changed since fit {draws.meta['fit_id']}; run "
                                  "`ddtree-bayes update` (or `fit`) to use it"]


def test_predict_names_the_other_file_its_fit_was_made_on(tmp_path):
    """The CLI after `fit --data mine.csv` in a folder whose data/measurements.csv differs:
    no warning (it warned "was made on ... (fit this one to use it)" on every predict); the
    header line names the file, "(16 draws, made on mine.csv)"; an edit of mine.csv is warned
    of with the command that folds it in."""
    import shutil

    from test_cli_support import make_point_mass_workdir, run_cli, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    mine = work / "mine.csv"
    shutil.copy(work / "data" / "measurements.csv", mine)
    write_point_mass_fit(work / "models", mine, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv")
    default = work / "data" / "measurements.csv"
    default.write_text("".join(default.read_text().splitlines(True)[:-1]))   # a row fewer
    code, out, err = run_cli(work, "predict", "--accept", "14")
    assert code == 0 and "made on" not in err and "fit this one" not in err, err
    assert out.splitlines()[0] == ("ddtree-bayes predict: fit 20260101T000000Z-pointmss (16 "
                                   "draws, made on mine.csv), seed 20261130")
    mine.write_text(mine.read_text().replace(",133,", ",134,"))
    code, out, err = run_cli(work, "predict", "--accept", "14")
    assert code == 0 and err.splitlines()[0] == (
        f"ddtree-bayes: warning: {mine} changed since fit 20260101T000000Z-pointmss; run "
        "`ddtree-bayes update --data mine.csv` (or `fit --data mine.csv`) to use it")
    # a fit of the default file names none
    write_point_mass_fit(work / "models", default, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv")
    code, out, err = run_cli(work, "predict", "--accept", "14")
    assert out.splitlines()[0] == ("ddtree-bayes predict: fit 20260101T000000Z-pointmss (16 "
                                   "draws), seed 20261130")


def test_a_copied_workspace_is_told_its_own_file_differs(tmp_path, monkeypatch):
    """A fit of workspace A's own data/measurements.csv, asked in B, a copy of A whose
    data/measurements.csv has had rows added or edited since: the fit answers from A's file
    (unchanged), and `update` in B reads B's file (cli/update.py: a fit made elsewhere updates
    from this folder's default). 533fb53 dropped the one warning saying so, leaving only
    predict's header "made on /.../A/data/measurements.csv", with exit 0. Said again for a
    fit made in another folder of that folder's own file; not for a copy holding the fitted
    text, nor for a fit made here (`fit --data OTHER`, test above)."""
    fitted = bundled("measurements.csv").read_text()
    draws, a, b = _copied_workspace(tmp_path, monkeypatch, fitted, fitted)
    assert P.check_fit(draws) == []                       # B's file: a copy of A's
    (b / "data" / "measurements.csv").write_text(fitted.replace(",133,", ",134,"))
    assert P.check_fit(draws) == [
        f"fit {draws.meta['fit_id']} was made in {a.resolve()} on its data/measurements.csv, "
        "not on data/measurements.csv here, which holds other measurements: it answers from "
        "that file's (run `ddtree-bayes update` to use this one's)"]
    draws.meta["workdir"] = str(b.resolve())              # made here, of A's file: no
    assert P.check_fit(draws) == []


def test_a_copied_workspace_whose_rows_notes_alone_differ_is_not_told_so(tmp_path, monkeypatch):
    """ac9965d3 left a fit fresh after an edit of a row's notes or source alone (check_fit
    compares the rows a fit reads: core/data.py fitted_rows_same), but the copied workspace's
    warning still compared the file's hash: B, a copy of A whose row 2 notes say "rerun",
    was told its data/measurements.csv "holds other measurements" and to run `update`, which
    then kept the draws ("no row was added, edited or removed"). Not said now; a tok_s edit
    in a row whose notes also changed (133 -> 134) still is."""
    fitted = bundled("measurements.csv").read_text()
    noted = fitted.replace('"C=1 autoregressive;', '"C=1 autoregressive, rerun;', 1)
    assert noted != fitted
    draws, a, b = _copied_workspace(tmp_path, monkeypatch, fitted, noted)
    assert P.check_fit(draws) == []                       # B's rows: A's, but for a note
    (b / "data" / "measurements.csv").write_text(noted.replace(",133,", ",134,", 1))
    assert P.check_fit(draws) == [
        f"fit {draws.meta['fit_id']} was made in {a.resolve()} on its data/measurements.csv, "
        "not on data/measurements.csv here, which holds other measurements: it answers from "
        "that file's (run `ddtree-bayes update` to use this one's)"]


def test_a_priors_file_here_that_fit_would_read_instead_is_said(tmp_path, monkeypatch):
    """A fit made with the bundled priors (no models/priors.toml here then), asked after the
    user wrote models/priors.toml here with the budget-32 acceptance prior moved from
    TruncNormal(10, 2.5) to mu 5: predict drew the acceptance from mu 10, said "drawn from the
    acceptance prior in the priors file" and warned of nothing (the file the fit names, the
    bundled one, is unchanged), where `fit` here reads the new file. Likewise a fit of
    workspace A's models/priors.toml asked in B, a copy of A whose priors were edited. Not
    said for a copy holding the fitted priors, an edit of [acceptance_curve] alone (no fit
    reads it), or a fit of --priors OTHER."""
    draws = point_mass_draws()
    fitted = bundled("priors.toml").read_text()
    moved = fitted.replace("budget = 32\ndist = \"truncnormal\"\nmu = 10.0\n",
                           "budget = 32\ndist = \"truncnormal\"\nmu = 5.0\n", 1)
    assert moved != fitted
    here = tmp_path / "here"
    (here / "models").mkdir(parents=True)
    monkeypatch.chdir(here)
    assert P.check_fit(draws) == []                            # no priors file here
    (here / "models" / "priors.toml").write_text(fitted)
    assert P.check_fit(draws) == []                            # a copy of the fitted text
    (here / "models" / "priors.toml").write_text(
        fitted.replace("mu = 9.4\n", "mu = 7.0\n", 1))
    assert P.check_fit(draws, ignore_priors_sections=P.NOT_FITTED_PRIORS) == []
    (here / "models" / "priors.toml").write_text(moved)
    said = (f"fit {draws.meta['fit_id']} was made with the bundled default priors, not "
            "models/priors.toml here, which says otherwise: it answers from the priors it "
            "was made with (re-run `ddtree-bayes fit` to use this file's)")
    assert P.check_fit(draws) == [said]
    assert P.check_fit(draws, here=False) == []                # the API: the fit's files only
    # a copied workspace: the fit of A's own models/priors.toml, asked in B
    a = tmp_path / "A"
    (a / "models").mkdir(parents=True)
    (a / "models" / "priors.toml").write_text(fitted)
    draws.meta["priors"] = {"path": str(a / "models" / "priors.toml"),
                            "sha256": hashlib.sha256(fitted.encode()).hexdigest()}
    draws.meta["workdir"] = str(a.resolve())
    assert P.check_fit(draws) == [
        f"fit {draws.meta['fit_id']} was made in {a.resolve()} with its models/priors.toml, not "
        "models/priors.toml here, which says otherwise: it answers from the priors it was made "
        "with (re-run `ddtree-bayes fit` to use this file's)"]
    # a fit told to use another priors file (fit --priors OTHER) is not told of this one
    other = tmp_path / "other.toml"
    other.write_text(fitted)
    draws.meta["priors"]["path"] = str(other)
    draws.meta["workdir"] = str(here.resolve())
    assert P.check_fit(draws) == []


def test_editing_only_the_curve_does_not_make_a_fit_stale(tmp_path):
    """fit ignores [acceptance_curve], so optimize/next do not warn when only it changed."""
    draws = point_mass_draws()
    priors = tmp_path / "priors.toml"
    draws.meta["priors"] = {"path": str(priors), "sha256": "0" * 64}
    data = bundled("measurements.csv")
    draws.meta["data"] = {"path": str(data),
                          "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}
    priors.write_text(draws.priors_toml.replace("mu = 9.4\n", "mu = 7.0\n", 1))
    assert priors.read_text() != draws.priors_toml
    assert any("changed since fit" in w for w in P.check_fit(draws))
    assert P.check_fit(draws, ignore_priors_sections=("acceptance_curve",)) == []
    priors.write_text(draws.priors_toml.replace("alpha = 4.0", "alpha = 5.0", 1))
    warnings = P.check_fit(draws, ignore_priors_sections=("acceptance_curve",))
    assert any("changed since fit" in w for w in warnings)


# ------------------------------------------------------------------ regret arithmetic
def test_budget_decision_by_hand():
    tok = np.array([[1.0, 3.0, 0.0],
                    [5.0, 2.0, 1.0],
                    [2.0, 2.5, 2.5],
                    [4.0, 4.0, 0.0]])
    out = D.budget_decision(tok)
    assert out["mean"].tolist() == pytest.approx([3.0, 2.875, 0.875])
    # best per draw: 1, 0, 1 (tie with 2 goes to the first), 0 (tie goes to the first)
    assert out["p_best"].tolist() == pytest.approx([0.5, 0.5, 0.0])
    # max per draw 3, 5, 2.5, 4 -> regret = E[max] - mean = 3.625 - mean
    assert out["regret"].tolist() == pytest.approx([0.625, 0.75, 2.75])
    assert np.argmax(out["mean"]) == np.argmin(out["regret"])


# ------------------------------------------------------------------ optimize
def spread_draws(n: int = 1001):
    """Point mass except step_ar, spread over 7.2-8.8 ms: every step time scales by the
    same factor, so the argmax cannot move but the intervals have width."""
    draws = point_mass_draws(n=n)
    draws.variables["step_ar_ms"][:, 0] = np.linspace(7.2, 8.8, n)
    return draws


def test_optimize_finds_the_hand_computed_best_budget():
    draws = spread_draws()
    out = D.optimize(draws, curve_of(), hardware="b300", engine="sglang", budgets=BUDGETS)
    # accept 6, 8, 9, 9.5, 9.75; step 12.5, 15, 20, 30, 50 ms at step_ar 8
    # -> 480, 533.3, 450, 316.7, 195 tok/s: budget 16
    assert out["recommended"] == 16
    rows = {r["budget"]: r for r in out["rows"]}
    assert rows[16]["p_best"] == 1.0 and rows[8]["p_best"] == 0.0
    assert rows[16]["regret"] == 0.0
    scale = np.mean(8.0 / draws.variables["step_ar_ms"][:, 0])
    for b, a in zip(BUDGETS, (6, 8, 9, 9.5, 9.75), strict=True):
        assert rows[b]["accept"] == pytest.approx(a)
        assert rows[b]["tok_s_mean"] == pytest.approx(a * 1000 / step_by_hand(b) * scale)
        assert rows[b]["step_ms"] == pytest.approx(step_by_hand(b))
        assert rows[b]["lo90"] < rows[b]["median"] < rows[b]["hi90"]
    # regret of budget 8: E[max - tok(8)] = (533.3 - 480) * scale
    assert rows[8]["regret"] == pytest.approx((8000 / 15 - 480) * scale)


def test_a_steeper_curve_moves_the_best_budget():
    # accept 8 + 4 log2(B/16), capped at 16: 4, 8, 12, 16, 16
    # tok/s 320, 533, 600, 533, 340 -> budget 32
    curve = curve_of(gain='dist = "point"\nvalue = 4.0', decay='dist = "point"\nvalue = 1.0')
    out = D.optimize(spread_draws(), curve, hardware="b300", engine="sglang", budgets=BUDGETS)
    assert out["recommended"] == 32
    rows = {r["budget"]: r for r in out["rows"]}
    assert rows[32]["p_best"] == 1.0
    assert rows[128]["accept"] == 16.0


def test_optimize_says_when_the_best_budget_is_at_the_edge_of_those_compared():
    """P(best) and E[regret] are among the budgets compared: at C = 256 on the bundled fit
    the default grid (8 to 1024) recommended budget 8 with P(best) 1.00, where budget 4, not
    compared, was the best in a third of the draws (8 falls to P(best) 0.53 once 1, 2 and 4
    are compared). A best budget at the edge of three or more compared now says so; two
    budgets are a question about those two.

    Point mass with acceptance 8 at every budget (gain 0): steps 12.5, 15, 20, 30 ms at
    budgets 8, 16, 32, 64 (10 x (1 + B / 32)) -> 640, 533, 400, 267 tok/s."""
    draws = point_mass_draws()
    flat = curve_of(gain='dist = "point"\nvalue = 0.0')
    out = D.optimize(draws, flat, hardware="b300", engine="sglang", budgets=(16, 32, 64))
    assert out["recommended"] == 16 and out["rows"][0]["p_best"] == 1.0
    assert out["rows"][0]["tok_s_mean"] == pytest.approx(8000 / 15)
    wider = D.optimize(draws, flat, hardware="b300", engine="sglang", budgets=(8, 16, 32, 64))
    assert wider["recommended"] == 8
    assert wider["rows"][0]["tok_s_mean"] == pytest.approx(640.0)   # faster than 16's 533
    assert ("budget 16 is the smallest of the budgets compared, and its P(best) 1.00 is among "
            "them: a smaller budget may be faster still (--budgets 4,8,16,32 compares "
            "smaller ones)") in out["warnings"]
    assert "budget 8 is the smallest" in " ".join(wider["warnings"])
    # the largest edge: accept 4, 8, 12 at budgets 8, 16, 32 (gain 4, decay 1) -> 320, 533, 600
    steep = curve_of(gain='dist = "point"\nvalue = 4.0', decay='dist = "point"\nvalue = 1.0')
    up = D.optimize(draws, steep, hardware="b300", engine="sglang", budgets=(8, 16, 32))
    assert up["recommended"] == 32
    assert ("budget 32 is the largest of the budgets compared, and its P(best) 1.00 is among "
            "them: a larger budget may be faster still (--budgets 16,32,64,128 compares "
            "larger ones)") in up["warnings"]
    # inside the budgets compared, or one of two: no note
    for curve, budgets in ((curve_of(), BUDGETS), (flat, (16, 32))):
        quiet = D.optimize(draws, curve, hardware="b300", engine="sglang", budgets=budgets)
        assert not [w for w in quiet["warnings"] if "of the budgets compared" in w]
    # budget 1 is the smallest there is
    one = D.optimize(draws, flat, hardware="b300", engine="sglang", budgets=(1, 2, 4))
    assert not [w for w in one["warnings"] if "smallest" in w]


def test_optimize_flags_extrapolation():
    out = D.optimize(point_mass_draws(), curve_of(), hardware="b300", engine="sglang",
                     budgets=BUDGETS)
    # the largest measured verify tokens on b300x8 is 9 (DDTree block 8, budget 8)
    assert out["max_measured_verify_tokens"] == {"system": 9, "any_system": 9,
                                                 "transferred_from": None,
                                                 "pair_roofline": None}
    assert [r["extrapolated"] for r in out["rows"]] == [False, True, True, True, True]
    # the acceptance curve is anchored from its reference budget (16) up
    assert [r["accept_extrapolated"] for r in out["rows"]] == [True, False, False, False, False]


def test_optimize_warns_a_tree_whose_verified_tokens_pass_the_longest_context():
    """optimize --budgets 16,500000 priced M = 500,001 verified tokens of a model whose card
    takes 262,144 (kimi-k2.6), without a word: the tokens a step verifies take the positions
    after the context, and none past the longest is a step any engine runs. The largest
    budget's scenario is checked (the memory checks read the smallest's); budget 262,143
    (positions up to 262,143) passes."""
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled

    draws = point_mass_draws()   # (a point mass stores no card: the bundled one's, as a fit's)
    card = load_model_cards(bundled("models.csv"))["kimi-k2.6"]
    assert card.max_context_tokens == 262144
    draws.meta["model"]["card"] = dataclasses.asdict(card)
    said = [w for w in D.optimize(draws, curve_of(), hardware="b300", engine="sglang",
                                  budgets=(16, 500000))["warnings"]
            if w.startswith("a step verifies")]
    assert said == ["a step verifies 500001 tokens after a context of 0, reaching position "
                    "500000, above kimi-k2.6's longest, 262144 tokens (its card): no engine "
                    "runs such a step, and the answer extrapolates the step's growth past it"]
    fits = D.optimize(draws, curve_of(), hardware="b300", engine="sglang",
                      budgets=(16, 262143))["warnings"]
    assert not [w for w in fits if w.startswith("a step verifies")]


def test_optimize_extrapolation_counts_only_the_rows_the_fit_learned_from():
    """A validation fold holding out row 3 (b300 DDTree 8/8, M = 9) learned from b300's AR
    row alone (M = 1) and the rtx-pro-6000 rows (at most M = 4, EAGLE-3): optimize said 9 and
    flagged budget 8 (M = 9) as measured, where predict's note (beyond_measured_note) counts
    the fitted rows only."""
    draws = point_mass_draws()
    draws.meta["held_out_rows"] = [3]
    out = D.optimize(draws, curve_of(), hardware="b300", engine="sglang", budgets=(8, 16))
    assert out["max_measured_verify_tokens"] == {"system": 1, "any_system": 4,
                                                 "transferred_from": None,
                                                 "pair_roofline": None}
    assert [r["extrapolated"] for r in out["rows"]] == [True, True]


def two_system_draws():
    """The point mass measured on b300x8 and rtx-pro-6000x8 (the same per-system step)."""
    draws = point_mass_draws(step_ar_ms=[8.0, 8.0], moe_share=[0.5, 0.5],
                             moe_slope=[0.0625, 0.0625], moe_exponent=[0.5, 0.5],
                             ctx_ms_per_unit=[2.0, 2.0])
    draws.meta["coords"]["system"] = ["b300x8", "rtx-pro-6000x8"]
    return draws


def test_optimize_flags_an_unmeasured_systems_budgets_past_the_system_it_is_transferred_from(
        tmp_path):
    """8 x RTX PRO 6000 Server has no rows: its step is transferred from rtx-pro-6000x8
    (engine/transfer.py: the same PCIe class, nearest in bandwidth), whose rows verified at
    most 4 tokens a step (EAGLE-3, M = 4). optimize compared its budgets with the 9 tokens of
    b300x8 ("on any system"), a system it is not transferred from, so budgets 4 and 8
    (M = 5, 9) were not flagged though their step is past every row its step comes from.
    By hand: budgets 2, 3, 4, 8 -> M = 3, 4, 5, 9 against 4: [-, -, step, step]."""
    from test_cli_support import make_point_mass_workdir, run_cli, write_point_mass_fit
    from test_json_schemas import validate_output

    draws = two_system_draws()
    out = D.optimize(draws, curve_of(), hardware="rtx-pro-6000-server", engine="sglang",
                     budgets=(2, 3, 4, 8))
    assert out["max_measured_verify_tokens"] == {
        "system": None, "any_system": 9,
        "transferred_from": {"system": "rtx-pro-6000x8", "tokens": 4},
        "pair_roofline": None}
    assert [r["extrapolated"] for r in out["rows"]] == [False, False, True, True]
    # a measured system is bounded by its own rows, as before
    own = D.optimize(draws, curve_of(), hardware="rtx-pro-6000", engine="sglang",
                     budgets=(2, 3, 4, 8))
    assert own["max_measured_verify_tokens"] == {"system": 4, "any_system": 9,
                                                 "transferred_from": None,
                                                 "pair_roofline": None}
    assert [r["extrapolated"] for r in own["rows"]] == [False, False, True, True]
    # the table's footnote names the system the step is transferred from and its 4 tokens
    work = make_point_mass_workdir(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    data.write_text(bundled("measurements.csv").read_text())
    write_point_mass_fit(work / "models", data, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv", draws=draws)
    code, text, err = run_cli(work, "optimize", "--hardware", "rtx-pro-6000-server",
                              "--engine", "sglang", "--budgets", "2,3,4,8")
    assert code == 0, err
    line = next(ln for ln in text.splitlines() if ln.startswith("step: "))
    assert line.startswith(
        "step: extrapolated beyond the measured C x M for budgets 4, 8: "
        "rtx-pro-6000-serverx8 has no measurements; its step is transferred from "
        "rtx-pro-6000x8, where the most tokens verified per step (C x M) measured is 4 "
        "(9 on any system); ")
    code, text, err = run_cli(work, "optimize", "--hardware", "rtx-pro-6000-server",
                              "--engine", "sglang", "--budgets", "2,3,4,8", "--format", "json")
    assert code == 0, err
    validate_output("optimize", json.loads(text))


def test_optimize_names_the_budgets_whose_c_x_m_is_past_the_rows():
    """optimize asked beyond_measured_note with M = 1 (no verify_tokens): --budgets
    8,16,32,64 on b300x8 (at most 9 tokens a step measured, budget 8's M = 9) warned of
    nothing at C = 1, though budgets 16, 32 and 64 verify 17, 33 and 65 tokens (their step
    the roofline's: the extrapolated column said "step"), and at C = 4 named the concurrency
    alone, not 4 x 65 = 260 tokens. It names the budgets past the rows, their largest M and
    their largest C x M, as predict names its C x M."""
    draws = point_mass_draws()
    one = D.optimize(draws, curve_of(), hardware="b300", engine="sglang",
                     budgets=(8, 16, 32, 64))
    assert [r["extrapolated"] for r in one["rows"]] == [False, True, True, True]
    assert [w for w in one["warnings"] if "(C x M)" in w] == [
        "at C = 1 a step of budgets 16, 32, 64 (M up to 65) verifies up to 65 tokens (C x M), "
        "more than any measured on b300x8 (at most 9): there the step's growth with M is the "
        "roofline's (compute knee, and for an MoE the distinct experts read): partly "
        "prior-driven"]
    four = D.optimize(draws, curve_of(), hardware="b300", engine="sglang",
                      budgets=(8, 16, 32, 64), concurrency=4)
    assert [w for w in four["warnings"] if "C = 4" in w] == [
        "C = 4 is beyond the concurrencies measured on b300x8 (at most 1); at C = 4 a step of "
        "budgets 8, 16, 32, 64 (M up to 65) verifies up to 260 tokens (C x M), more than any "
        "measured on b300x8 (at most 9): there the step's growth with C and M is the "
        "roofline's (weights once per step, KV reads and tree nodes per stream, the compute "
        "knee, and for an MoE the distinct experts read): prior-driven"]
    # one budget past: its own M and C x M (budget 16 at C = 1: 17 tokens)
    said = D.optimize(draws, curve_of(), hardware="b300", engine="sglang",
                      budgets=(4, 8, 16))["warnings"]
    assert [w for w in said if "(C x M)" in w] == [
        "at C = 1 a step of budget 16 (M = 17) verifies 17 tokens (C x M), more than any "
        "measured on b300x8 (at most 9): there the step's growth with M is the roofline's "
        "(compute knee, and for an MoE the distinct experts read): partly prior-driven"]
    # every budget within the rows: nothing said
    within = D.optimize(draws, curve_of(), hardware="b300", engine="sglang", budgets=(4, 8))
    assert not [w for w in within["warnings"] if "(C x M)" in w]


def test_optimize_warns_of_an_unmeasured_systems_budgets_past_its_references_rows():
    """optimize's warnings (beyond_measured_note, as predict's) said nothing of the C x M of an
    unmeasured system's budgets, though its footnote (transferred_from) flagged them. By hand:
    h200x8 from b300x8 (at most 9 tokens a step): budgets 8, 16 -> M = 9, 17: budget 16;
    8 x RTX PRO 6000 Server from rtx-pro-6000x8 (at most 4): budgets 2, 3, 4, 8 -> M = 3, 4,
    5, 9: budgets 4, 8 (M up to 9), though 9 is within b300x8's rows."""
    tail = (": there the step's growth with M is the roofline's (compute knee, and for an MoE "
            "the distinct experts read): partly prior-driven")
    h200 = D.optimize(point_mass_draws(), curve_of(), hardware="h200", engine="sglang",
                      budgets=(8, 16))
    assert [w for w in h200["warnings"] if "(C x M)" in w] == [
        "h200x8 has no measurements and its step is transferred from b300x8: at C = 1 a step "
        "of budget 16 (M = 17) verifies 17 tokens (C x M), more than any measured on b300x8 "
        "(at most 9)" + tail]
    server = D.optimize(two_system_draws(), curve_of(), hardware="rtx-pro-6000-server",
                        engine="sglang", budgets=(2, 3, 4, 8))
    assert [w for w in server["warnings"] if "(C x M)" in w] == [
        "rtx-pro-6000-serverx8 has no measurements and its step is transferred from "
        "rtx-pro-6000x8: at C = 1 a step of budgets 4, 8 (M up to 9) verifies up to 9 tokens "
        "(C x M), more than any measured on rtx-pro-6000x8 (at most 4)" + tail]
    # the step flagged in the table is the one warned of
    assert [r["budget"] for r in server["rows"] if r["extrapolated"]] == [4, 8]


def test_optimize_warns_of_a_pair_roofline_answers_budgets_past_every_measured_pair():
    """optimize for a (model, system) pair a fit of several models never measured flagged
    its budgets past the measured C x M in the table (against any system's) but its warnings
    said nothing: the pair roofline has no reference system. By hand: the roofline is learned
    from kimi-k2.6@b300x8 (at most 9 tokens a step) and llama-3.1-8b-instruct@h100x1 (1):
    budgets 8, 16 -> M = 9, 17: budget 16."""
    from ddtree_bayes.engine.testing import multi_model_draws
    from test_concurrency import ROOF_LEAD, ROOF_MOST

    out = D.optimize(multi_model_draws(), curve_of(), model="llama-3.1-8b-instruct",
                     hardware="l40s", gpus=1, engine="vllm", budgets=(8, 16))
    assert [w for w in out["warnings"] if "(C x M)" in w] == [   # (was: [])
        ROOF_LEAD + "at C = 1 a step of budget 16 (M = 17) verifies 17 tokens (C x M), "
        + ROOF_MOST + ": there the step's growth with M is the roofline's (compute knee, and "
        "for an MoE the distinct experts read): partly prior-driven"]
    assert [r["budget"] for r in out["rows"] if r["extrapolated"]] == [16]
    assert out["max_measured_verify_tokens"] == {
        "system": None, "any_system": 9, "transferred_from": None,
        "pair_roofline": {"pairs": 2, "tokens": 9, "on": "kimi-k2.6@b300x8"}}


def test_optimize_footnote_of_a_pair_roofline_names_the_pairs_that_bound_it(tmp_path):
    """A pair a fit of several models answers from the pair roofline is bounded by the most
    C x M of the pairs the roofline was learned from (rows_behind), but the table's footnote
    named every row's ("measured on any system is 9"). With kimi-k2.6@b300x8 held out (a
    validation fold's bookkeeping, its rows left in), the roofline is learned from
    llama-3.1-8b-instruct@h100x1 alone, whose AR rows verified 1 token a step: budgets 8 and 16
    (M = 9, 17) are both past it, and the footnote said 9 beside budget 8's M = 9. It now
    reads the same record as the bound: 1, on llama-3.1-8b-instruct@h100x1."""
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
    from test_cli_support import make_point_mass_workdir, run_cli, write_point_mass_fit
    from test_json_schemas import validate_output

    draws = multi_model_draws()
    draws.meta["held_out_systems"] = ["kimi-k2.6@b300x8"]
    ask = ("--model", "llama-3.1-8b-instruct", "--hardware", "l40s", "--gpus", "1",
           "--engine", "vllm", "--budgets", "8,16")
    out = D.optimize(draws, curve_of(), model="llama-3.1-8b-instruct", hardware="l40s",
                     gpus=1, engine="vllm", budgets=(8, 16))
    assert [r["budget"] for r in out["rows"] if r["extrapolated"]] == [8, 16]
    assert out["max_measured_verify_tokens"] == {
        "system": None, "any_system": 9, "transferred_from": None,
        "pair_roofline": {"pairs": 1, "tokens": 1, "on": "llama-3.1-8b-instruct@h100x1"}}
    work = make_point_mass_workdir(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    data.write_text(MULTI_DATA)
    write_point_mass_fit(work / "models", data, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv", draws=draws)
    code, text, err = run_cli(work, "optimize", *ask)
    assert code == 0, err
    line = next(ln for ln in text.splitlines() if ln.startswith("step: "))
    assert line.startswith(
        "step: extrapolated beyond the measured C x M for budgets 8, 16: "
        "llama-3.1-8b-instruct@l40sx1 has no measurements; its step is from the pair roofline, "
        "learned from 1 measured pair, where the most tokens verified per step (C x M) "
        "measured is 1, on llama-3.1-8b-instruct@h100x1 (9 on any system); ")
    code, text, err = run_cli(work, "optimize", *ask, "--format", "json")
    assert code == 0, err
    validate_output("optimize", json.loads(text))


def test_optimize_refuses_a_curve_for_another_drafter():
    with pytest.raises(QueryError, match="describes ddtree block 16"):
        D.optimize(point_mass_draws(), curve_of(), hardware="b300", engine="sglang", block=8)


def test_optimize_of_another_method_without_block_names_its_measured_shape(tmp_path):
    """`optimize --method eagle3` (no --block) on 8 x RTX PRO 6000 with vLLM was refused as
    "describes ddtree block 16, not eagle3 block 16": block 16 is the ddtree curve's, which
    EAGLE-3 never ran. The refusal names what the fit measured of the method there instead:
    the bundled rows 9 and 10 are EAGLE-3 block (depth) 3, budget 3 (M = 4). With an
    acceptance file the rows were looked up at block 16 too ("has no eagle3 rows with block
    16"): the same refusal. A --block given is named as before."""
    draws = two_system_draws()
    with pytest.raises(QueryError) as err:
        D.optimize(draws, curve_of(), hardware="rtx-pro-6000", engine="vllm", method="eagle3")
    assert str(err.value) == (
        "the acceptance curve in curve.toml describes ddtree block 16, not eagle3, whose "
        "block is its draft depth (measured on rtx-pro-6000x8 with vllm: block 3, budget 3) "
        "(fix: pass --block with the depth to compare budgets at, e.g. --block 3, and "
        "--acceptance-file with measured acceptances of this drafter, or edit "
        "[acceptance_curve] (method, block and its priors) in the priors file for it, and "
        "pass it with --priors)")
    acc = tmp_path / "acc.csv"
    acc.write_text("model,method,block,budget,accept_len\nm,eagle3,3,3,2.0\n")
    with pytest.raises(QueryError, match=r"not eagle3, whose block .*e\.g\. --block 3"):
        D.optimize(draws, curve_of(), hardware="rtx-pro-6000", engine="vllm", method="eagle3",
                   acceptance_file=str(acc))
    # never measured on b300x8: nothing to name but what its block is
    with pytest.raises(QueryError) as err:
        D.optimize(draws, curve_of(), hardware="b300", engine="sglang", method="eagle3")
    assert str(err.value).startswith(
        "the acceptance curve in curve.toml describes ddtree block 16, not eagle3, whose block "
        "is its draft depth (not measured on b300x8 with sglang) (fix: pass --block with the "
        "depth to compare budgets at, and --acceptance-file")
    with pytest.raises(QueryError, match="describes ddtree block 16, not eagle3 block 3 "):
        D.optimize(draws, curve_of(), hardware="rtx-pro-6000", engine="vllm", method="eagle3",
                   block=3)
    # autoregressive decoding has no block nor budget: "not ar block 16" before
    with pytest.raises(QueryError) as err:
        D.optimize(draws, curve_of(), hardware="b300", engine="sglang", method="ar")
    assert str(err.value) == ("autoregressive decoding (ar) drafts nothing: optimize compares "
                              "a drafter's tree budgets (fix: give a tree method, e.g. "
                              "--method ddtree)")


def test_an_acceptance_file_of_another_block_updates_the_curve(tmp_path):
    """`optimize --block 8 --acceptance-file F` was refused because the priors' curve is
    block 16, though F's block-8 rows are what the answer rests on (as a file of another
    model's rows is). Now the block-16 prior is updated with them and the source says so.
    Flat accept_ref prior, gain 4, decay 0.5: one row of 6.0 at budget 16 sets accept_ref to
    6.0, so budget 32 is 6 + 4 = 10 and budget 64 6 + 4 * 1.5 = 12, both capped at 8 (a
    block-8 drafter: the anchor and 7 drafts, 7 + the bonus token)."""
    acc = tmp_path / "acc.csv"
    acc.write_text("model,method,block,budget,accept_len\nm,ddtree,8,16,6.0\n"
                   "m,ddtree,16,16,9.0\n")
    curve = curve_of(accept_ref='dist = "truncnormal"\nmu = 8.0\nsigma = 100.0\nlower = 1.0\n'
                                'upper = 16.0',
                     gain='dist = "point"\nvalue = 4.0')
    out = D.optimize(point_mass_draws(), curve, hardware="b300", engine="sglang", block=8,
                     budgets=(16, 32, 64), acceptance_file=str(acc))
    assert out["scenario"]["block"] == 8
    assert [round(r["accept"], 1) for r in out["rows"]] == [6.0, 8.0, 8.0]
    assert [r["accept_max"] for r in out["rows"]] == [8, 8, 8]
    assert out["curve"]["source"] == (f"prior of ddtree block 16 from curve.toml, updated "
                                      f"with 1 m ddtree block 8 row of {acc}")


def test_unmeasured_group_shares_one_overhead_draw_across_budgets():
    """b300/trt/ddtree is unmeasured: its overhead fraction is drawn from the population.
    Every budget (and every query or candidate) of that group must see the same draw."""
    draws = point_mass_draws(n=2000, overhead_logit_sd=1.0)
    frac = {}
    for engine, budget in (("trt", 8), ("trt", 128), ("vllm", 8)):
        sc = P.resolve_scenario(draws, hardware="b300", gpus=None, engine=engine,
                                method="ddtree", block=16, budget=budget, verify_tokens=None,
                                context_tokens=None)
        step, how = D.shared_step(draws, sc, seed=5)
        assert "unmeasured group" in how
        frac[engine, budget] = 1 - 8 * (1 + budget / 32) / step
    np.testing.assert_allclose(frac["trt", 8], frac["trt", 128])
    assert frac["trt", 8].std() > 0.1
    # another unmeasured group gets an independent draw
    assert abs(np.corrcoef(frac["trt", 8], frac["vllm", 8])[0, 1]) < 0.1


def test_optimize_on_an_unmeasured_group_is_coherent_across_budgets():
    # the overhead fraction scales every budget's step by the same 1/(1 - f) per draw, so
    # the argmax is budget 16 in every draw, however wide the overhead population is
    draws = point_mass_draws(n=2000, overhead_logit_sd=1.0)
    out = D.optimize(draws, curve_of(), hardware="b300", engine="trt", budgets=BUDGETS)
    assert out["recommended"] == 16
    assert out["rows"][1]["p_best"] == 1.0


# ------------------------------------------------------------------ acceptance file
def test_conjugate_update_matches_least_squares_given_decay():
    # with decay fixed and nearly flat priors, the posterior of (accept_ref, gain) is the
    # least-squares fit, with covariance measurement_sd^2 (X'X)^-1 (accept_ref's bounded by
    # the 16 tokens a block-16 step emits, far above the fit's 8.6)
    budgets = np.array([16.0, 32, 64, 128, 256, 512, 1024])
    accept = np.array([8.61, 9.27, 9.75, 10.20, 10.43, 10.73, 10.98])
    curve = curve_of(accept_ref='dist = "truncnormal"\nmu = 5.0\nsigma = 1000.0\nlower = 1.0\n'
                                'upper = 16.0',
                     gain='dist = "truncnormal"\nmu = 0.0\nsigma = 1000.0\nlower = 0.0\nupper = 1e6',
                     decay='dist = "point"\nvalue = 0.8')
    out = D.update_curve(curve, budgets, accept, 40000, np.random.default_rng(1))
    d = np.log2(budgets / 16)
    X = np.c_[np.ones_like(d), (1 - 0.8 ** d) / 0.2]
    coef = np.linalg.lstsq(X, accept, rcond=None)[0]
    cov = 0.1 ** 2 * np.linalg.inv(X.T @ X)
    assert out.accept_ref.mean() == pytest.approx(coef[0], abs=0.01)
    assert out.gain.mean() == pytest.approx(coef[1], abs=0.01)
    assert out.accept_ref.std() == pytest.approx(np.sqrt(cov[0, 0]), rel=0.05)
    assert out.gain.std() == pytest.approx(np.sqrt(cov[1, 1]), rel=0.05)
    assert np.corrcoef(out.accept_ref, out.gain)[0, 1] == pytest.approx(
        cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1]), abs=0.03)
    assert np.all(out.decay == 0.8) and out.ess == pytest.approx(40000)


def test_update_from_the_reference_file_recovers_the_paper_curve():
    curve = parse_acceptance_curve(bundled("priors.toml").read_text(), "bundled")
    b, a, model = D.read_acceptance_file(REFERENCE, "ddtree", 16)
    assert model == "qwen3-8b" and len(b) == 7
    out = D.update_curve(curve, b, a, 4000, np.random.default_rng(2))
    # least-squares fit of the paper's points: 8.62, 0.63, 0.80
    assert np.median(out.accept_ref) == pytest.approx(8.62, abs=0.05)
    assert np.median(out.gain) == pytest.approx(0.63, abs=0.05)
    assert np.median(out.decay) == pytest.approx(0.80, abs=0.04)
    assert out.ess > 500
    fitted = D.curve_accept(b, out.accept_ref, out.gain, out.decay, reference_budget=16,
                            limits=D.curve_limits(curve, b))
    assert np.abs(np.median(fitted, axis=0) - a).max() < 0.08


def test_acceptance_file_errors(tmp_path):
    bad = tmp_path / "acc.csv"
    bad.write_text("model,method,block,budget\nm,ddtree,16,16\n")
    with pytest.raises(DataError, match="accept_len"):
        D.read_acceptance_file(bad, "ddtree", 16)
    bad.write_text("model,method,block,budget,accept_len\nm,ddtree,16,16,8\nn,ddtree,16,32,9\n")
    with pytest.raises(QueryError, match="several models"):
        D.read_acceptance_file(bad, "ddtree", 16)
    with pytest.raises(QueryError, match="no ddtree rows with block 8"):
        D.read_acceptance_file(bad, "ddtree", 8)
    bad.write_text("model,method,block,budget,accept_len\nm,ddtree,16,x,8\n")
    with pytest.raises(DataError, match="row 2, column 'budget'"):
        D.read_acceptance_file(bad, "ddtree", 16)


def test_an_acceptance_file_row_that_is_no_measurement_is_refused(tmp_path):
    """An exploratory pass: budget 16.5 was used as a budget, and a copied row counted as a
    second measurement (narrowing accept_ref); the measurement CSV refuses both."""
    bad = tmp_path / "acc.csv"
    bad.write_text("model,method,block,budget,accept_len\nm,ddtree,16,16.5,8\n")
    with pytest.raises(DataError) as err:
        D.read_acceptance_file(bad, "ddtree", 16)
    assert str(err.value) == (f"{bad}, row 2, column 'budget': '16.5' is not a whole number "
                              "(fix: a budget counts tokens: give a whole number)")
    bad.write_text("model,method,block,budget,accept_len\n"
                   "m,ddtree,16,16,8\nm,ddtree,16,32,9\nm,ddtree,16,16,8\n")
    with pytest.raises(DataError) as err:
        D.read_acceptance_file(bad, "ddtree", 16)
    assert str(err.value).startswith(f"{bad}, row 4: repeats row 2 in every column (fix: ")
    bad.write_text("model,method,block,budget,accept_len,dataset\n"
                   "m,ddtree,16,16,8,math500\nm,ddtree,16,32,9,math500\nm,ddtree,16,16,8.2,\n"
                   "m,ddtree,16,16,8,gsm8k\n")
    b, a, _ = D.read_acceptance_file(bad, "ddtree", 16)   # another value or dataset: kept
    assert list(b) == [16, 32, 16, 16] and list(a) == [8, 9, 8.2, 8]
    for cells, says in (("16,2000000,8", "budget must be 1 to 1000000, got 2000000"),
                        ("16,1_6,8", "'1_6' is not a plain number")):
        bad.write_text(f"model,method,block,budget,accept_len\nm,ddtree,{cells}\n")
        with pytest.raises(DataError, match=f"row 2, column 'budget': {says}"):
            D.read_acceptance_file(bad, "ddtree", 16)
    # the repo's own reference file has equal means of two datasets (Kimi-K2.5 5.3): kept
    D.read_acceptance_file(REFERENCE, "dflash-chain", 8)
    # rows are numbered by their line: a quoted two-line cell and a blank line before it
    bad.write_text('model,method,block,budget,accept_len,source\nm,ddtree,16,16,8,"a\nb"\n\n'
                   "m,ddtree,16,16.5,8,c\n")
    with pytest.raises(DataError, match=r", row 5, column 'budget': '16.5' is not a whole"):
        D.read_acceptance_file(bad, "ddtree", 16)


def test_an_acceptance_no_step_can_emit_is_refused(tmp_path):
    """accept_len 30 at block 16 (at most 16 per step) collapsed the curve to accept_ref 17 and
    recommended budget 16 at 1008 tok/s, exit 0; predict refuses the same acceptance."""
    from ddtree_bayes.core.methods import max_accept

    bad = tmp_path / "acc.csv"
    bad.write_text("model,method,block,budget,accept_len\nm,ddtree,16,8,6\nm,ddtree,16,16,30\n")
    with pytest.raises(DataError) as err:
        D.read_acceptance_file(bad, "ddtree", 16, lambda m, k, b: max_accept(m, k, b))
    msg = str(err.value)
    assert "row 3, column 'accept_len'" in msg and "accept_len 30 is above" in msg
    assert "at most 16 tokens per step: block - 1 drafts + 1" in msg
    # budget 8: at most 9 (budget + 1), so 9.5 at budget 8 is refused too
    bad.write_text("model,method,block,budget,accept_len\nm,ddtree,16,8,9.5\n")
    with pytest.raises(DataError, match=r"accept_len 9.5 is above what ddtree with budget 8 "
                                        r"can emit \(at most 9 tokens"):
        D.read_acceptance_file(bad, "ddtree", 16, lambda m, k, b: max_accept(m, k, b))
    with pytest.raises(DataError, match="row 2, column 'accept_len'"):
        D.optimize(spread_draws(), curve_of(), hardware="b300", engine="sglang",
                   budgets=BUDGETS, acceptance_file=bad)


def test_an_acceptance_file_row_of_another_configuration_is_checked_too(tmp_path):
    """Rows of another block or method were skipped before they were read: a file with
    accept_len 12 at ddtree block 8 budget 8 (at most 8 per step: block - 1 drafts + 1) or a
    word for a number in another method's row answered for block 16, exit 0. Every row is
    read and checked; the refusal names it."""
    from ddtree_bayes.core.methods import max_accept

    limit = lambda m, k, b: max_accept(m, k, b)   # noqa: E731
    bad = tmp_path / "acc.csv"
    good = "model,method,block,budget,accept_len\nm,ddtree,16,16,8\nm,ddtree,16,32,9\n"
    bad.write_text(good + "m,ddtree,8,8,12\n")
    with pytest.raises(DataError) as err:
        D.read_acceptance_file(bad, "ddtree", 16, limit)
    assert str(err.value).startswith(f"{bad}, row 4, column 'accept_len': accept_len 12 is "
                                     "above what ddtree with block 8 can emit (at most 8 "
                                     "tokens per step: block - 1 drafts + 1)"), str(err.value)
    bad.write_text(good + "m,dflash-chain,8,8,nine\n")
    with pytest.raises(DataError, match="row 4, column 'accept_len': 'nine' is not a number"):
        D.read_acceptance_file(bad, "ddtree", 16, limit)
    # a blank method (skipped before: exit 0) and inf (refused as "must be >= 1")
    for row, says in (("m,,16,8,3", "row 4, column 'method': the method is blank"),
                      ("m,dflash-chain,8,8,inf", "row 4, column 'accept_len': 'inf' is not a "
                                                 "finite number"),
                      ("m,ddtree,16,64,1e400", "row 4, column 'accept_len': '1e400' is not a "
                                               "finite number")):
        bad.write_text(good + row + "\n")
        with pytest.raises(DataError, match=says):
            D.read_acceptance_file(bad, "ddtree", 16, limit)
    bad.write_text(good + "m,dflash-chain,8,8,7.5\n")   # (a possible row of another method)
    b, a, _ = D.read_acceptance_file(bad, "ddtree", 16, limit)
    assert list(b) == [16, 32] and list(a) == [8, 9]
    with pytest.raises(DataError, match="row 4, column 'accept_len'"):
        bad.write_text(good + "m,ddtree,8,8,12\n")
        D.optimize(spread_draws(), curve_of(), hardware="b300", engine="sglang",
                   budgets=BUDGETS, acceptance_file=bad)


@pytest.mark.parametrize("rows,clipped,ess", [
    # acceptance falls as the tree doubles: gain < 0 lies outside its prior; every draw of
    # (accept_ref, gain) was the clipped mean, printed as "accept 7.8 (7.8-7.8)", P(best) 1.00
    ("m,ddtree,16,16,8\nm,ddtree,16,32,7\n", 4000, 4000),
    # 15.9 at budget 16 (16.9 before the block-16 bound became 16), 2 at 64: four effective
    # draws of decay, and clipped too
    ("m,ddtree,16,16,15.9\nm,ddtree,16,64,2\n", 4000, 4)])
def test_acceptance_rows_the_curve_cannot_fit_are_named(tmp_path, rows, clipped, ess):
    """A posterior the update could not draw (draws clipped to the prior's bounds, or few
    effective draws of decay) was printed as a certain one, exit 0; now optimize warns."""
    acc = tmp_path / "acc.csv"
    acc.write_text("model,method,block,budget,accept_len\n" + rows)
    curve = parse_acceptance_curve(bundled("priors.toml").read_text(), "bundled")
    out = D.optimize(spread_draws(4000), curve, hardware="b300", engine="sglang",
                     budgets=BUDGETS, acceptance_file=str(acc))
    assert out["curve"]["clipped"] == clipped and round(out["curve"]["ess"]) == ess
    warning = next(w for w in out["warnings"] if w.startswith("--acceptance-file"))
    assert warning == (
        f"--acceptance-file {acc}: its rows do not fit the curve ("
        + ", ".join(([f"{clipped} of 4000 draws of accept_ref and gain fell outside their "
                      "prior bounds and were set to the nearest bound"] if clipped else [])
                    + ([f"{ess} effective draws of decay of 4000"] if ess < 100 else []))
        + "): the acceptance intervals and P(best) below are narrower than the rows "
          "support; check the rows (a bigger tree never accepts less, and accept_len counts "
          "the bonus token)")


def test_acceptance_rows_that_fit_the_curve_give_no_warning():
    curve = parse_acceptance_curve(bundled("priors.toml").read_text(), "bundled")
    out = D.optimize(spread_draws(4000), curve, hardware="b300", engine="sglang",
                     budgets=BUDGETS, acceptance_file=str(REFERENCE))
    assert out["curve"]["clipped"] == 0 and out["curve"]["ess"] > 500
    assert not [w for w in out["warnings"] if w.startswith("--acceptance-file")]


def test_an_acceptance_file_of_another_model_is_warned_of():
    """`optimize --acceptance-file data/acceptance_reference.csv` (qwen3-8b rows, the help's
    own example) answered a kimi-k2.6 question with no warning: the curve's "written for
    another model" line was skipped whenever a file was given, whatever model its rows were.
    Now the file's model is compared with the one asked, as the curve's is; its own rows of
    the model asked (or its family) say nothing."""
    draws = point_mass_draws()
    draws.meta["model"]["target_model"] = "kimi-k2.6"   # (as a fit of the bundled rows has it)
    curve = parse_acceptance_curve(bundled("priors.toml").read_text(), "bundled")
    out = D.optimize(draws, curve, hardware="b300", engine="sglang", budgets=BUDGETS,
                     acceptance_file=str(REFERENCE))
    assert out["curve"]["acceptance_model"] == "qwen3-8b"
    from ddtree_bayes.workflows.decisions.optimize import curve_model_warning

    assert curve_model_warning(draws, curve, out, str(REFERENCE)) == (
        f"the acceptance file's rows ({REFERENCE}) are of qwen3-8b, not kimi-k2.6: these "
        "acceptances are another model's; pass --acceptance-file with measured acceptances "
        "of this target and drafter")
    own = {**out, "curve": {**out["curve"], "acceptance_model": "kimi-k2.6"}}
    assert curve_model_warning(draws, curve, own, str(REFERENCE)) is None


def test_an_acceptance_file_of_another_deployment_of_the_model_is_not_warned_of():
    """Rows of one deployment card of a model asked about another (Q4_K_M rows for an
    IQ2_XXS question, both cards of the fit's qwen3.8-27b) were called another model's (a
    review): cards of one target among the fit's models are one model, as for a carried
    group (core/pairs.same_target); a card of an unrelated model still warns."""
    from ddtree_bayes.workflows.decisions.optimize import curve_model_warning

    draws = point_mass_draws()
    draws.meta["model"]["target_models"] = ["qwen3.8-27b"]
    curve = parse_acceptance_curve(bundled("priors.toml").read_text(), "bundled")
    out = {"scenario": {"model": "qwen3.8-27b-iq2_xxs"},
           "curve": {"acceptance_model": "qwen3.8-27b-q4_k_m"}}
    assert curve_model_warning(draws, curve, out, "acc.csv") is None
    out["curve"]["acceptance_model"] = "qwen3.5-27b-q4_k_m"
    assert curve_model_warning(draws, curve, out, "acc.csv").startswith(
        "the acceptance file's rows (acc.csv) are of qwen3.5-27b-q4_k_m, not qwen3.8-27b-iq2_xxs")


# ------------------------------------------------------------------ next
def cand(draws, engine, method, budget, accept=None):
    sc = P.resolve_scenario(draws, hardware="b300", gpus=None, engine=engine, method=method,
                            block=None if method == "ar" else 16, budget=budget,
                            verify_tokens=None, context_tokens=None)
    return D.Candidate(sc, accept, "test")


def by_budget(out):
    return {(r["engine"], r["method"], r["budget"]): r for r in out["rows"]}


def test_next_ranks_the_measurement_of_the_uncertain_parameter_first():
    """Only the MoE exponent is uncertain (0.3-0.6). An AR measurement (M = 1, where
    M ** alpha = 1) cannot inform it; a budget-128 tree pins it."""
    n = 4000
    draws = point_mass_draws(n=n, moe_form="power", noise_sd=0.01)
    draws.variables["moe_exponent"][:, 0] = np.random.default_rng(0).uniform(0.3, 0.6, n)
    query = D.parse_query(draws, "--hardware b300 --engine sglang --method ddtree --block 16 "
                                 "--budget 32 --accept 10")
    cands = [cand(draws, "sglang", "ar", None, 1.0), cand(draws, "sglang", "ddtree", 128)]
    out = D.next_measurements(draws, query, cands, k=32, seed=3)
    rows = by_budget(out)
    first = out["rows"][0]
    assert (first["method"], first["budget"]) == ("ddtree", 128)
    assert first["reduction_rel"] > 0.8
    assert abs(rows["sglang", "ar", None]["reduction_rel"]) < 0.05
    # the current width is that of predict's 90% interval for the same query
    pred = P.predict(draws, hardware="b300", engines=["sglang"], method="ddtree", block=16,
                          budget=32, accept="10")[0]
    assert out["query"]["width"] == pytest.approx(pred["hi90"] - pred["lo90"], rel=0.03)
    assert not first["unreliable"] and first["ess_median"] > 100


def test_next_uses_the_query_overhead_draw_for_a_candidate_in_its_unmeasured_group():
    """Only the overhead fraction of unmeasured groups is uncertain. A candidate in the
    query's group (trt) shares its draw and informs it; one in another unmeasured group
    (vllm on b300) has an independent draw and cannot."""
    draws = point_mass_draws(n=4000, overhead_logit_sd=0.8, noise_sd=0.01)
    query = D.parse_query(draws, "--hardware b300 --engine trt --budget 32 --accept 10")
    cands = [cand(draws, "vllm", "ddtree", 8), cand(draws, "trt", "ddtree", 8),
             cand(draws, "sglang", "ddtree", 8)]
    out = D.next_measurements(draws, query, cands, k=32, seed=4)
    rows = by_budget(out)
    assert out["rows"][0]["engine"] == "trt"
    assert rows["trt", "ddtree", 8]["shares_query_overhead"]
    assert rows["trt", "ddtree", 8]["reduction_rel"] > 0.7
    # the vllm row (an independent draw) and the measured sglang group (a point mass) teach
    # nothing: their reduction is Monte Carlo noise about 0, judged by its own standard error
    # (K = 32 results; over seeds 4-13 the vllm row is within 2.6 of its width_se)
    for key in (("vllm", "ddtree", 8), ("sglang", "ddtree", 8)):
        r = rows[key]
        assert abs(r["reduction"]) < 4 * r["width_se"] + 1e-9, (key, r)
    # and next says so: a reduction within 2 of its standard errors is no effect it can tell
    # (a walkthrough read 20 of 45 candidates at "-12.2 (-5%)" as if they widened the answer)
    assert [rows[k]["within_mc_error"] for k in rows] == [
        abs(rows[k]["reduction"]) < 2 * rows[k]["width_se"] for k in rows]
    assert not rows["trt", "ddtree", 8]["within_mc_error"]


def test_next_shares_transferred_parameters_on_a_system_without_measurements():
    """h200 x8 has no measurements: its step parameters are transferred from b300 with
    uncertain bandwidth elasticity and system scatter. An AR run on the h200 (another
    overhead group, same system) must see the same transferred draws as the DDTree query
    there, and so inform it; an AR run on the (point-mass) b300 cannot."""
    draws = point_mass_draws(n=4000, noise_sd=0.01)
    query = D.parse_query(draws, "--hardware h200 --engine sglang --block 16 --budget 32 "
                                 "--accept 10")
    assert not query.scenario.measured
    h200_ar = D.Candidate(P.resolve_scenario(draws, hardware="h200", gpus=None, engine="sglang",
                                             method="ar", block=None, budget=None,
                                             verify_tokens=None, context_tokens=None), 1.0, "t")
    out = D.next_measurements(draws, query, [cand(draws, "sglang", "ar", None, 1.0), h200_ar],
                              k=32, seed=6)
    assert "transferred from b300x8" in out["query"]["overhead_from"]
    rows = {r["hardware"]: r for r in out["rows"]}
    assert out["rows"][0]["hardware"] == "h200"
    assert rows["h200"]["reduction_rel"] > 0.6
    assert abs(rows["b300"]["reduction_rel"]) < 0.05


@pytest.mark.parametrize("text", [
    "--engine sglang --accept 12 --concurrency 4", "--engine sglang --accept 12",
    "--engine native --accept 12:16", "--hardware h200 --engine sglang --accept 10",
    "--engine trt --budget 32 --accept 10"])
def test_next_now_is_predicts_answer_digit_for_digit(text):
    """A trust pass: for the same fit, seed and flags `next` said now 440 (282-636) where
    `predict --accept 12 --concurrency 4 --engine sglang` said 442 (279-631), and 606
    (508-733) against 607 (504-729) at C = 1: next drew the query's acceptance, step and
    noise from streams of its own. Now its draws are predict's (a measured group, a Uniform
    acceptance, an unmeasured system, an unmeasured group), and a candidate that teaches
    nothing (the point-mass SGLang group) leaves that interval exactly as it is."""
    draws = point_mass_draws(n=400, noise_sd=0.05, overhead_logit_sd=0.8)
    query = D.parse_query(draws, text)
    out = D.next_measurements(draws, query, [cand(draws, "sglang", "ddtree", 8)], k=8, seed=5)
    flags = dict(zip(text.split()[::2], text.split()[1::2], strict=True))
    c = int(flags.get("--concurrency", 0)) or None
    rows = P.predict(draws, hardware=flags.get("--hardware"), engines=[flags["--engine"]],
                     budget=int(flags["--budget"]) if "--budget" in flags else None,
                     accept=flags["--accept"], concurrency=c, seed=5)
    r = rows[-1]   # (a range: its Uniform row, next's acceptance)
    q = out["query"]
    assert (q["median"], q["lo"], q["hi"]) == (r["median"], r["lo90"], r["hi90"])
    assert q["width"] == r["hi90"] - r["lo90"]
    if query.scenario.measured and flags["--engine"] != "trt":
        assert out["rows"][0]["reduction"] == pytest.approx(0.0, abs=1e-9 * q["width"])


def test_next_flags_candidates_too_informative_for_reweighting():
    n = 2000
    draws = point_mass_draws(n=n, moe_form="power", noise_sd=0.0005)
    draws.variables["moe_exponent"][:, 0] = np.random.default_rng(0).uniform(0.3, 0.6, n)
    query = D.parse_query(draws, "--budget 32 --hardware b300 --accept 10")
    out = D.next_measurements(draws, query, [cand(draws, "sglang", "ddtree", 32)], k=8)
    assert out["rows"][0]["ess_median"] < 100 and out["rows"][0]["unreliable"]


def test_weighted_interval_and_preposterior_by_hand():
    v = np.arange(1.0, 101.0)
    w = np.zeros((1, 100))
    w[0, 40:60] = 0.05          # all mass on 41..60
    lo, hi = D.weighted_interval(v, w, 0.9)
    assert (lo[0], hi[0]) == pytest.approx((41.5, 59.5))
    # a candidate whose log tok/s equals the query's: with tiny noise the simulated result
    # pins the draw, so the query's width collapses
    q = np.linspace(100, 200, 1000)
    res = D.preposterior(np.log(q), np.full(1000, 1e-4), q, 0.9, np.array([10, 500, 900]),
                         np.zeros(3))
    assert res["width"] < 1.0 and res["ess_median"] < 5


def test_default_candidates_cover_systems_engines_and_the_query():
    draws = point_mass_draws()
    query = D.parse_query(draws, "--hardware b300 --engine native --budget 32 --accept 14")
    left_out: list = []
    whys = [(c.why, c.describe()) for c in D.default_candidates(draws, query, left_out)]
    # native is a relation engine (README: "a hypothetical C++/CUDA speculative loop") the
    # fit has no row of: nobody can measure it, so neither the query itself nor any other
    # candidate in it is proposed; each is named as left out, with why
    assert not [d for w, d in whys if " native " in d]
    assert [(c.why, c.describe()) for c, _ in left_out] == [
        ("the query itself", "b300 x8 native ddtree block 16 budget 32 M=33")]
    assert left_out[0][1] == ("native is a modelled engine (its speculative overhead is "
                              "sglang's times 1 - reduction) with no measurement in the fit: "
                              "there is no such engine to run")
    # --budget alone keeps the default question's block 16, as predict's does
    assert whys[0] == ("the query in sglang", "b300 x8 sglang ddtree block 16 budget 32 M=33")
    assert ("AR, context 0", "b300 x8 sglang ar") in whys
    # budget 32 in sglang is already there as "the query in sglang" (duplicates dropped)
    assert [d for w, d in whys if w.startswith("DDTree")] == [
        f"b300 x8 sglang ddtree block 16 budget {b} M={b + 1}" for b in (8, 128)]
    assert len(whys) == len({c.key() for c in D.default_candidates(draws, query)})
    # no AR at many streams for a single-stream query
    assert not [w for w, d in whys if "C=" in d]


def test_default_candidates_propose_only_drafters_that_exist():
    """A walkthrough on Llama-3.1-8B (vLLM EAGLE-3 on one H100) was offered "the query in
    native" and "vllm ddtree block 16 budget 128": no drafter card serves Llama's DDTree and
    the fit measured none, so nobody can run either. A speculative candidate is proposed
    where a drafter card for the model and method exists (the bundled EAGLE-3 head) or the fit
    measured the method for the model (Kimi's DDTree rows)."""
    from ddtree_bayes.engine.testing import multi_model_draws

    draws = multi_model_draws()
    query = D.parse_query(draws, "--model llama-3.1-8b-instruct --hardware h100 --gpus 1 "
                                 "--engine vllm --method eagle3 --block 3 --accept 2.5")
    left_out: list = []
    got = [(c.why, c.describe().removeprefix("llama-3.1-8b-instruct "))
           for c in D.default_candidates(draws, query, left_out)]
    assert got == [("the query itself", "h100 x1 vllm eagle3 block 3 budget 3 M=4"),
                   ("the query in sglang", "h100 x1 sglang eagle3 block 3 budget 3 M=4"),
                   ("AR, context 0 (by transfer: measured there with kimi-k2.6 only)",
                    "b300 x8 sglang ar"),
                   ("AR, context 0", "h100 x1 vllm ar")]
    reasons = {}
    for c, why in left_out:
        reasons.setdefault(why, []).append(c.describe().removeprefix("llama-3.1-8b-instruct "))
    assert reasons == {
        "native is a modelled engine (its speculative overhead is sglang's times 1 - "
        "reduction) with no measurement in the fit: there is no such engine to run":
            ["h100 x1 native eagle3 block 3 budget 3 M=4"],
        "no drafter card serves llama-3.1-8b-instruct's ddtree and the fit measured none: "
        "there is no drafter to run it with (`ddtree-bayes card add` one; "
        "llama-3.1-8b-instruct's drafter cards serve eagle (yuhuili/EAGLE-LLaMA3.1-Instruct-8B), "
        "eagle3 (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): ask --method eagle or eagle3)":
            [f"{s} ddtree block 16 budget {b} M={b + 1}"
             for s in ("b300 x8 sglang", "h100 x1 vllm") for b in (8, 32, 128)]}
    # Kimi K2.6 has no drafter card, but the fit measured its DDTree: proposed
    kimi = D.parse_query(draws, "--model kimi-k2.6 --hardware b300 --engine sglang "
                                "--method ddtree --block 16 --budget 32 --accept 10")
    assert [c.why for c in D.default_candidates(draws, kimi)
            if c.scenario.method == "ddtree"] == ["the query itself", "DDTree budget 8",
                                                  "DDTree budget 128"]
    # a drafter card the fit stored for Llama's DDTree makes its DDTree measurable
    card = {"drafter": "my/llama-dflash", "target_model": "llama-3.1-8b-instruct",
            "methods": ["ddtree"], "kind": "dflash_block", "layers": 5, "params_active_b": 1.0,
            "lm_head_params_b": 0.5, "bytes_per_weight": 2.0, "source": "test",
            "shares_lm_head": True}
    draws.meta["model"]["drafter_cards"] = [card]
    assert len([c for c in D.default_candidates(draws, query)
                if c.scenario.method == "ddtree"]) == 6


def test_default_candidates_offer_ar_at_many_streams_for_a_query_at_c_streams():
    """AR at C = 32 to 128 is a cheap run that pins the compute knee (C tokens verified per
    step); a query at C > 1 is now offered it, besides the doublings up to its C."""
    draws = point_mass_draws()
    query = D.parse_query(draws, "--hardware b300 --engine sglang --budget 32 --accept 14 "
                                 "--concurrency 16")
    got = [(c.why, c.describe()) for c in D.default_candidates(draws, query)
           if c.scenario.concurrency != 1]
    assert got == [("the query itself", "b300 x8 sglang ddtree block 16 budget 32 M=33 C=16"),
                   *[x for c in (2, 4, 8) for x in (
                       (f"the query at concurrency {c}",
                        f"b300 x8 sglang ddtree block 16 budget 32 M=33 C={c}"),
                       (f"AR at concurrency {c}", f"b300 x8 sglang ar C={c}"))],
                   *[(f"AR at concurrency {c} (the compute knee)", f"b300 x8 sglang ar C={c}")
                     for c in (32, 64, 128)]]


def test_default_candidates_offer_the_doublings_of_a_native_query_in_its_base_engine():
    """A native query at C = 16 was offered the query in sglang at C = 16, but its doublings
    (C = 2, 4, 8) only in native, each left out (nobody can run native): a sglang query at
    C = 16 was offered them, the native one not. They are now offered in sglang."""
    draws = point_mass_draws()
    query = D.parse_query(draws, "--hardware b300 --engine native --budget 32 --accept 14 "
                                 "--concurrency 16")
    left_out: list = []
    got = [(c.why, c.describe()) for c in D.default_candidates(draws, query, left_out)
           if c.scenario.concurrency != 1]
    assert got == [("the query in sglang", "b300 x8 sglang ddtree block 16 budget 32 M=33 C=16"),
                   *[x for c in (2, 4, 8) for x in (
                       (f"the query in sglang at concurrency {c}",
                        f"b300 x8 sglang ddtree block 16 budget 32 M=33 C={c}"),
                       (f"AR at concurrency {c}", f"b300 x8 sglang ar C={c}"))],
                   *[(f"AR at concurrency {c} (the compute knee)", f"b300 x8 sglang ar C={c}")
                     for c in (32, 64, 128)]]
    assert [c.describe() for c, _ in left_out] == [
        f"b300 x8 native ddtree block 16 budget 32 M=33 C={c}" for c in (16, 2, 4, 8)]


@pytest.mark.parametrize("text, flags", [
    ("--hardware h100 --gpus 8", {"hardware": "h100", "gpus": 8}),
    ("--hardware b300", {"hardware": "b300"}),
    ("--budget 64", {"budget": 64}),
    ("--hardware b300 --block 8 --budget 32", {"hardware": "b300", "block": 8, "budget": 32}),
    ("--verify-tokens 9", {"verify_tokens": 9}),
])
def test_next_query_fills_the_flags_not_given_as_predict_does(text, flags):
    """next --help says the query's flags not given come from the default question, but
    once a configuration flag was given block and budget did not: --query "--hardware h100
    --gpus 8" was refused ("cannot tell how many tokens ddtree verifies per step") where
    predict --hardware h100 --gpus 8 answers for block 16 / budget 32."""
    from ddtree_bayes.engine.question import Flags, resolve

    draws = point_mass_draws()
    query = D.parse_query(draws, text + " --accept 6")
    asked = resolve(draws, Flags(**flags, engines=("sglang",), accept="6")).asked[0].scenario
    assert query.scenario == asked
    if "--gpus" in text:
        assert query.scenario.describe() == ("h100 x8, sglang, ddtree, block 16, budget 32, "
                                             "verify 33, context 0")


def test_cli_next_query_with_hardware_alone_answers(tmp_path):
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)
    code, out, err = run_cli(work, "next", "--query", "--hardware h100 --gpus 8 --accept 10",
                             "--k", "4")
    assert code == 0, err
    assert "query: h100 x8, sglang, ddtree, block 16, budget 32, verify 33, context 0, " \
        "accept 10" in out
    # the table: rank, candidate, drafter and why left-aligned, the numbers right, the note
    # left (a fit of the fraction form prices no drafter pass: "-")
    lines = out.splitlines()
    top = lines.index(next(x for x in lines if x.startswith("rank  candidate")))
    assert lines[top].split("  ")[-1] == "note" and lines[top].endswith("ESS  note")
    assert lines[top + 2].startswith("1     h100 x8 sglang ddtree block 16 budget 32 M=33    "
                                     "-        the query itself    ")
    # (h100 x8 is a system the fit never measured: update would refit for its row)
    assert lines[top + 2].endswith("(84%)    2  unreliable: ESS < 100, refit with it instead; "
                                   "update would refit: E[width] likely too wide")


@pytest.mark.parametrize("text,fragment", [
    ("--hardware b300 --bogus 3", "unrecognized arguments"),
    ("--engine sglang,native --budget 32", "one engine"),
    ("--budget 32 --accept 12,14", "one value or a range"),
    ("--budget thirty", "invalid whole number value"),
    ("--hardware tpu9 --budget 32", "never measured, nor in the hardware table the fit stored"),
    ("--budget 32 --acc 14", "unrecognized arguments: --acc 14"),   # (no abbreviations)
])
def test_parse_query_errors(text, fragment):
    with pytest.raises(QueryError, match=fragment):
        D.parse_query(point_mass_draws(), text)


@pytest.mark.parametrize("accept, label", [("0.5", "0.5"), ("0.5:2", "U(0.5,2)")])
def test_next_query_acceptance_below_1_is_worded_as_predict_words_it(accept, label):
    """--query "--accept 0.5" (through the API or a report's query, which do not go through
    the CLI's --accept check) was refused as "it or below 1 is above what ddtree with block
    16 can emit": 0.5 is below 1, not above 17. It is now worded as predict's refusal (one
    shared function, AcceptLimit.out_of_range)."""
    draws = point_mass_draws()
    query = D.parse_query(draws, f"--budget 32 --accept {accept}")
    with pytest.raises(QueryError) as err:
        D.query_acceptance(draws, query, np.random.default_rng(0))
    assert str(err.value) == (f"--query: acceptance {label} of b300 x8, sglang, ddtree, block "
                              "16, budget 32, verify 33, context 0: below 1 (a step emits at "
                              "least the bonus token) (fix: tokens per step lie in 1 .. 16 "
                              "(block - 1 drafts + 1))")
    with pytest.raises(QueryError) as same:   # predict's words (a range: its first value's)
        P.predict(draws, hardware="b300", engines=["sglang"], method="ddtree", block=16,
                  budget=32, accept=accept)
    assert str(same.value) == str(err.value).removeprefix("--query: ").replace(label, "0.5")


def test_a_candidate_on_more_gpus_than_a_node_is_warned_of(tmp_path):
    """adv8: predict, next --query and add say "16 x b300 is more GPUs than one node holds
    (8): ... the all-reduces cross the network, which the step model does not price"; a
    --candidates row of 64 x b300 (8 nodes) was ranked first (E[width] 433, 3%) without a
    word. Now named as the query's is, one line per such row; 8 x b300 says nothing."""
    draws = point_mass_draws()
    path = tmp_path / "c.csv"
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\n"
                    "b300,64,sglang,ar,,,1,\nb300,8,sglang,ar,,,1,65536\n")
    notes: list[str] = []
    cands = D.read_candidates(draws, path, warnings=notes)
    assert [c.describe() for c in cands] == ["b300 x64 sglang ar", "b300 x8 sglang ar ctx 65536"]
    assert notes == [
        f"{path}, row 2: 64 x b300 is more GPUs than one node holds (8): the answer prices them "
        "as one tensor-parallel group on one interconnect, reading together; across nodes the "
        "all-reduces cross the network, which the step model does not price (the fit measured "
        "b300 on 8 GPUs)"]


def test_candidates_file(tmp_path):
    draws = point_mass_draws()
    path = tmp_path / "c.csv"
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\n"
                    "b300,,sglang,ddtree,16,64,11,\nb300,8,sglang,ar,,,1,65536\n")
    cands = D.read_candidates(draws, path)
    assert [c.describe() for c in cands] == ["b300 x8 sglang ddtree block 16 budget 64 M=65",
                                            "b300 x8 sglang ar ctx 65536"]
    assert cands[0].accept_len == 11.0 and cands[0].why == "c.csv row 2"
    assert [c.scenario.concurrency for c in cands] == [1, 1]
    # an optional concurrency column: the candidate is measured with that many streams
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",concurrency\n"
                    "b300,,sglang,ddtree,16,64,11,,8\nb300,8,sglang,ar,,,1,,\n")
    cands = D.read_candidates(draws, path)
    assert [c.scenario.concurrency for c in cands] == [8, 1]
    assert cands[0].describe().endswith("C=8")
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",concurrency\nb300,,sglang,ar,,,1,,0\n")
    with pytest.raises(DataError, match="row 2, column 'concurrency'"):
        D.read_candidates(draws, path)
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\nb300,,sglang,ddtree,16,64,80,\n")
    with pytest.raises(DataError, match="row 2, column 'accept_len'"):
        D.read_candidates(draws, path)
    path.write_text("hardware,engine\nb300,sglang\n")
    with pytest.raises(DataError, match="column 'gpus'"):
        D.read_candidates(draws, path)
    # three identical rows were ranked 1, 2 and 3 with no note
    row = "b300,,sglang,ddtree,16,64,11,\n"
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\n" + row + "b300,8,sglang,ar,,,1,\n" + row)
    with pytest.raises(DataError, match="row 4: repeats row 2: one candidate measurement"):
        D.read_candidates(draws, path)
    # an engine typo is named as predict names it (it was ranked as a new engine, silently);
    # gpus 0 divided by zero; --strict makes the typo an error
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\nb300,8,sglnag,ddtree,16,64,11,\n")
    notes: list[str] = []
    D.read_candidates(draws, path, warnings=notes)
    assert len(notes) == 1 and notes[0].startswith(f"{path}, row 2: ") and "sglnag" in notes[0]
    with pytest.raises(QueryError, match="sglnag"):
        D.read_candidates(draws, path, strict=True)
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\nb300,0,sglang,ddtree,16,64,11,\n")
    with pytest.raises(DataError, match="row 2, column 'gpus': gpus must be >= 1, got 0"):
        D.read_candidates(draws, path)
    # a trust pass: concurrency -2 was refused with "fix: give a non-negative whole number",
    # and the 0 that fix invites was refused next ("must be >= 1"): one rule, one message
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",concurrency\nb300,8,sglang,ar,,,1,,-2\n")
    with pytest.raises(DataError) as err:
        D.read_candidates(draws, path)
    assert str(err.value) == (f"{path}, row 2, column 'concurrency': concurrency must be >= 1, "
                              "got -2 (fix: write a positive whole number (or blank))")
    # C = 100000 was ranked, as no other input takes it (predict --concurrency, the data's
    # column and next --query stop at 4096)
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",concurrency\nb300,8,sglang,ar,,,1,,100000\n")
    with pytest.raises(DataError) as err:
        D.read_candidates(draws, path)
    assert str(err.value) == (f"{path}, row 2, column 'concurrency': concurrency must be 1 to "
                              "4096, got 100000 (fix: write a positive whole number (or blank))")
    # gpus, block and budget are bounded as everywhere else (5000 GPUs were ranked), a
    # number Python alone reads is refused, and rows are numbered by their line
    for cells, says in (("b300,5000,sglang,ar,,,1,", "gpus must be 1 to 1024, got 5000"),
                        ("b300,8,sglang,ddtree,100000,64,11,", "block must be 1 to 4096"),
                        ("b300,8,sglang,ddtree,16,5000000,11,", "budget must be 1 to 1000000"),
                        ("b300,8,sglang,ar,,,1,7_00", "'7_00' is not a plain number")):
        path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\n\n" + cells + "\n")
        with pytest.raises(DataError, match=f"row 3, column '[a-z_]+': {says}"):
            D.read_candidates(draws, path)
    # a context of 1e30 was ranked ("unreliable: ESS < 100"): bounded as a data row's; and one
    # of 307.2 tokens: a candidate is a question, in whole tokens as --context takes them
    for ctx, says in (("1e30", "0 to 1099511627776 (2 ** 40), got 1e+30"),
                      ("307.2", "a whole number of tokens, got 307.2")):
        path.write_text(",".join(D.CANDIDATE_COLUMNS) + f"\nb300,8,sglang,ar,,,1,{ctx}\n")
        with pytest.raises(DataError) as err:
            D.read_candidates(draws, path)
        assert str(err.value) == (f"{path}, row 2, column 'context_tokens': context_tokens must "
                                  f"be {says} (fix: write the context length in tokens)")


def test_candidates_file_names_a_misspelt_required_column_as_the_other_readers_do(tmp_path):
    """A review: the candidates reader said "missing column 'accept_len'" for a header
    spelling it ``accept_lem`` (and a bare missing column for ``Hardware``), where the
    measurement and card readers name the misspelt cell and the rename."""
    draws = point_mass_draws()
    path = tmp_path / "c.csv"
    header = ",".join(D.CANDIDATE_COLUMNS)
    path.write_text(header.replace("accept_len", "accept_lem") + "\nb300,8,sglang,ar,,,1,0\n")
    with pytest.raises(DataError) as err:
        D.read_candidates(draws, path)
    assert str(err.value) == (
        f"{path}, row 1, column 'accept_lem': unknown column, read as no column (fix: did you "
        "mean 'accept_len'? rename it: a column this reader does not know is ignored)")
    path.write_text(header.replace("hardware", "Hardware") + "\nb300,8,sglang,ar,,,1,0\n")
    with pytest.raises(DataError) as err:
        D.read_candidates(draws, path)
    assert str(err.value) == (f"{path}, row 1, column 'hardware': missing column (fix: column "
                              "names are lowercase: rename 'Hardware' to 'hardware')")


def test_candidates_file_reads_header_names_with_spaces_as_the_measurement_reader(tmp_path):
    """A header ``hardware, gpus, engine, ...`` (a space after each comma) was refused with
    "missing column (fix: column names are lowercase: rename ' gpus' to 'gpus')": the names
    were not stripped, as the measurement reader strips them. They are read as written."""
    draws = point_mass_draws()
    path = tmp_path / "c.csv"
    path.write_text(", ".join(D.CANDIDATE_COLUMNS) + ", concurrency\n"
                    "b300,8,sglang,ddtree,16,64,11,,4\n")
    (cand,) = D.read_candidates(draws, path)
    assert cand.describe() == "b300 x8 sglang ddtree block 16 budget 64 M=65 C=4"
    assert (cand.accept_len, cand.scenario.concurrency) == (11.0, 4)


def test_candidates_file_refuses_an_unknown_column_and_honours_verify_tokens(tmp_path):
    """A misspelt ``concurency`` column (8 streams) was ignored: the candidate was ranked at
    one stream, exit 0. A verify_tokens column was ignored the same way; it is read as a
    measurement row's (derived when blank, checked against the budget)."""
    draws = point_mass_draws()
    path = tmp_path / "c.csv"
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",concurency\n"
                    "b300,8,sglang,ddtree,16,32,14,0,8\n")
    with pytest.raises(DataError) as err:
        D.read_candidates(draws, path)
    assert str(err.value) == (
        f"{path}, row 1, column 'concurency': unknown column, read as no column (fix: did you "
        "mean 'concurrency'? rename it: a column this reader does not know is ignored)")
    # other extra columns are ignored, as in a measurement file (a review found a notes
    # column and a spreadsheet's trailing comma refused)
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",notes,\nb300,8,sglang,ar,,,1,0,x,\n")
    assert [c.describe() for c in D.read_candidates(draws, path)] == ["b300 x8 sglang ar"]
    # cells past the header were dropped the same way
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\nb300,8,sglang,ar,,,1,0,8\n")
    with pytest.raises(DataError) as err:
        D.read_candidates(draws, path)
    assert str(err.value) == (f"{path}, row 2: 9 cells, the header has 8 (fix: name every "
                              "column in the header, or drop the extra cells)")
    # verify_tokens: a tree of M = 33 without a budget is budget 32; blank is derived
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",verify_tokens\n"
                    "b300,8,sglang,ddtree,16,,14,0,33\nb300,8,sglang,ddtree,16,64,14,0,\n")
    cands = D.read_candidates(draws, path)
    assert [c.describe() for c in cands] == ["b300 x8 sglang ddtree block 16 budget 32 M=33",
                                            "b300 x8 sglang ddtree block 16 budget 64 M=65"]
    for cells, message in (
            ("b300,8,sglang,ddtree,16,32,14,0,40",
             "column 'verify_tokens': a budget of 32 draft tokens is verified as 33 tokens per "
             "step, not 40 (fix: set verify_tokens to 33 (or blank), or fix the budget)"),
            ("b300,8,sglang,ar,,,1,0,4",
             "column 'verify_tokens': autoregressive rows verify 1 token, got 4 (fix: set "
             "verify_tokens to 1 or fix the method)"),
            ("b300,8,sglang,ddtree,16,32,14,0,5000000",
             "column 'verify_tokens': verify_tokens must be 1 to 1000001, got 5e+06"),
            # an EAGLE-2 tree given only its depth: in a file's words, not the flags' (it said
            # "give --budget ... or --verify-tokens")
            ("b300,8,sglang,eagle2,4,,3,0,",
             "column 'verify_tokens': verify_tokens is blank and cannot be derived (fix: fill "
             "in verify_tokens or budget)")):
        path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",verify_tokens\n" + cells + "\n")
        with pytest.raises(DataError) as err:
            D.read_candidates(draws, path)
        assert str(err.value).startswith(f"{path}, row 2, {message}")


# ------------------------------------------------------------------ CLI on a real fit
def run(capsys, monkeypatch, workdir, *argv):
    monkeypatch.chdir(workdir)
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_optimize_and_next_on_the_real_fit(fitted_workdir, capsys, monkeypatch):
    work, result = fitted_workdir     # --fit: other tests may add fits to this workdir
    code, out, err = run(capsys, monkeypatch, work, "optimize", "--hardware", "b300",
                         "--engine", "native", "--format", "json", "--fit", result.fit_id)
    assert code == 0, err
    res = json.loads(out)
    assert [r["budget"] for r in res["rows"]] == list(D.DEFAULT_BUDGETS)
    assert sum(r["p_best"] for r in res["rows"]) == pytest.approx(1.0)
    assert res["recommended"] == max(res["rows"], key=lambda r: r["tok_s_mean"])["budget"]
    assert res["fit_id"] == result.fit_id
    assert [r["extrapolated"] for r in res["rows"]] == [False] + [True] * 7
    # budget 16 is recommended, but 8, the smallest compared, is the most likely best: said
    p8 = res["rows"][0]["p_best"]
    assert res["recommended"] == 16 and p8 == max(r["p_best"] for r in res["rows"])
    # and budgets 16-1024 (M up to 1025) verify more tokens a step than the 9 measured
    assert err == ("ddtree-bayes: warning: at C = 1 a step of budgets 16, 32, 64, 128, 256, 512, "
                   "1024 (M up to 1025) verifies up to 1025 tokens (C x M), more than any "
                   "measured on b300x8 (at most 9): there the step's growth with M is the "
                   "roofline's (compute knee, and for an MoE the distinct experts read): partly "
                   "prior-driven\n"
                   f"ddtree-bayes: warning: budget 8 is the smallest of the budgets compared, "
                   f"and its P(best) {p8:.2f} is among them: a smaller budget may be faster "
                   "still (--budgets 2,4,8,16 compares smaller ones)\n")
    code, out, err = run(capsys, monkeypatch, work, "next", "--query",
                         "--hardware b300 --engine native --method ddtree --block 16 "
                         "--budget 32 --accept 14", "--fit", result.fit_id)
    assert code == 0, err
    assert "query: b300 x8, native, ddtree, block 16, budget 32" in out
    lines = out.splitlines()
    top = lines.index(next(x for x in lines if x.startswith("----")))
    first = lines[top + 1]
    # native is only a relation (no row measured it): the query itself is no measurement to
    # propose, its SGLang twin is, and the left-out one is named with why
    assert first.startswith("1 ") and "the query in sglang" in first
    table = lines[top + 1:lines.index(next(x for x in lines if x.startswith("left out")))]
    assert table and all(" native " not in x for x in table)
    assert ("left out: b300 x8 native ddtree block 16 budget 32 M=33: native is a modelled "
            "engine (its speculative overhead is sglang's times 1 - reduction) with no "
            "measurement in the fit: there is no such engine to run.") in lines


def test_cli_bad_input_exits_2(tmp_path, capsys, monkeypatch):
    code, _, err = run(capsys, monkeypatch, tmp_path, "optimize", "--budgets", "8,x")
    assert code == 2 and "--budgets" in err and "fix:" in err and err.count("\n") == 1


def test_cli_optimize_warns_a_context_past_the_measured_ones_as_predict_does(tmp_path):
    """optimize --context 1m said nothing where predict --context 1m warns that the context
    is 8x the longest measured: optimize fills its own question and never asked
    engine/question.context_warnings. The line is predict's, on stderr and in the JSON."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")   # (its B300 rows are all at context 0)
    line = ("ddtree-bayes: warning: --context 1048576: the fit measured no context beyond "
            "0: its cost per context token is the prior's (prior-driven)")
    code, _, err = run_cli(work, "predict", "--accept", "14", "--context", "1m")
    assert code == 0 and line in err.splitlines(), err
    code, out, err = run_cli(work, "optimize", "--context", "1m", "--budgets", "8,32")
    assert code == 0 and line in err.splitlines(), err
    code, out, err = run_cli(work, "optimize", "--context", "1m", "--budgets", "8,32",
                             "--format", "json")
    # (and budget 32's 33 tokens a step, past the 9 measured: beyond_measured_note)
    m33 = ("at C = 1 a step of budget 32 (M = 33) verifies 33 tokens (C x M), more than any "
           "measured on b300x8 (at most 9): there the step's growth with M is the roofline's "
           "(compute knee, and for an MoE the distinct experts read): partly prior-driven")
    assert code == 0 and json.loads(out)["warnings"] == [line.split(": warning: ", 1)[1], m33]
    code, out, err = run_cli(work, "optimize", "--context", "0", "--budgets", "8,32",
                             "--format", "json")   # a measured context: quiet, as predict
    assert code == 0 and json.loads(out)["warnings"] == [m33] and "context" not in err


def test_cli_optimize_says_when_the_curve_is_another_models(tmp_path):
    """[acceptance_curve] names the target it was written for: optimize of that model is
    quiet about it, of another model (without --acceptance-file) it says the acceptances
    are another model's prior."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "optimize", "--budgets", "8,16,32")
    assert code == 0, err
    assert "was written for" not in err
    # the table: budget left-aligned, the numbers right, the flags left
    lines = out.splitlines()
    top = lines.index(next(x for x in lines if x.startswith("budget   M ")))
    assert lines[top].endswith("E[regret]  extrapolated")
    assert lines[top + 1].startswith("------  --  ----") and lines[top + 1].endswith(
        "---------  ------------")
    assert lines[top + 2].startswith("8        9  ") and lines[top + 2].endswith("  accept")
    priors = work / "models" / "priors.toml"
    priors.write_text(priors.read_text().replace('model = "kimi-k2.6"   # the target',
                                                 'model = "qwen3-8b"   # the target'))
    code, out, err = run_cli(work, "optimize", "--budgets", "8,16,32")
    assert code == 0, err
    assert "was written for qwen3-8b, not kimi-k2.6" in err
    assert "pass --acceptance-file" in err
    # the program name every command prints (cli/output.py's PROG); the edit (the model line)
    # also makes the curve differ from the fit's, which the line before says
    first, second = err.splitlines()[:2]
    assert first.startswith("ddtree-bayes: warning: the acceptance curve ([acceptance_curve] in "
                            "models/priors.toml) differs from the one fit")
    assert second.startswith("ddtree-bayes: warning: the acceptance curve ([acceptance_curve] "
                             "in models/priors.toml) was written for")
    assert out.startswith("ddtree-bayes optimize: fit 20260101T000000Z-pointmss (16 draws)")


def test_optimize_says_when_it_leaves_a_measured_acceptance_out():
    """An exploratory pass: after a row measuring budget 32 at acceptance 13.1, optimize showed
    budget 32 at the curve's 10.0 (the curve is the priors') beside "anchored to the measured
    ddtree budget 32", without a word that the measured acceptance was not used."""
    base = point_mass_draws()
    extra = "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,13.1,,612,test,\n"
    draws = base.view(data_csv=base.data_csv + extra)
    out = D.optimize(draws, curve_of(), hardware="b300", engine="sglang", budgets=BUDGETS)
    accept32 = {r["budget"]: r for r in out["rows"]}[32]["accept"]
    assert accept32 == pytest.approx(9.0)   # the curve_of() curve: 6, 8, 9, 9.5, 9.75
    assert ("accept: the fit measured ddtree block 16 on b300x8 at budget 32 at 13.1 (1 row; "
            "the curve: 9); the acceptance curve does not learn from rows") in out["warnings"][-1]
    assert not any(w.startswith("accept: the fit measured") for w in D.optimize(
        base, curve_of(), hardware="b300", engine="sglang", budgets=BUDGETS)["warnings"])


@pytest.mark.parametrize("query", ["--gpus 1_6", "--block \uff18", "--concurrency 1_6",
                                   "--budget 3.5"])
def test_a_query_string_reads_numbers_as_the_flags_do(query):
    """next's --query (and the API and report paths, which skip the CLI's check) read
    ``--gpus 1_6`` as 16 with Python's int; the query parser takes plain whole numbers only."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.decisions.next_measurement import parse_query

    with pytest.raises(QueryError, match="invalid whole number value"):
        parse_query(point_mass_draws(), query)


def test_next_refuses_a_min_ess_above_the_fits_draws(tmp_path):
    """next --min-ess 5000 on a fit of 4000 draws ranked every candidate "unreliable: ESS <
    5000, refit with it instead", exit 0: a reweighted posterior's effective sample size is
    at most its draw count, so no candidate could pass. Refused, naming the draws (here the
    point-mass fit's 16); the draw count itself is still a threshold one can give."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)
    code, out, err = run_cli(work, "next", "--k", "2", "--min-ess", "17")
    assert (code, out) == (2, "")
    assert err.strip() == ("ddtree-bayes: error: --min-ess 17 is above the fit's 16 draws: a "
                           "reweighted posterior's effective sample size is at most its "
                           "draws, so every candidate would be flagged (fix: give --min-ess "
                           "at most 16)")
    code, out, err = run_cli(work, "next", "--k", "2", "--min-ess", "16")
    assert code == 0, err


def test_next_says_how_its_querys_answer_was_found_as_predict_does(tmp_path):
    """next --query on a system nobody measured (h100 x8) printed its "now" interval without
    the line predict prints under the same answer, "sglang: h100x8 not measured: transferred
    from b300x8 ...": a transferred, prior-driven answer read as a measured one. The line is
    predict's, word for word."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)
    code, said, err = run_cli(work, "predict", "--hardware", "h100", "--gpus", "8",
                              "--engine", "sglang", "--accept", "10")
    assert code == 0, err
    (note,) = [ln for ln in said.splitlines() if ln.startswith("  sglang: ")]
    assert note.startswith("  sglang: h100x8 not measured: transferred from b300x8")
    code, out, err = run_cli(work, "next", "--query", "--hardware h100 --gpus 8 --accept 10",
                             "--k", "2")
    assert code == 0, err
    assert out.splitlines().count(note) == 1, out


def test_an_acceptance_file_of_several_drafters_is_refused_as_several_models_are(tmp_path):
    """optimize --acceptance-file with the drafter column of data/acceptance_reference.csv
    pooled the rows of two drafters of one model (dflash at 8.6 / 9.3 and eagle3 at 4.1 / 4.4
    for budgets 16 / 32) into one curve, exit 0: a curve between two drafters that neither
    has. One drafter's rows (or a blank drafter beside one name) are read as before."""
    path = tmp_path / "acc.csv"
    path.write_text("model,drafter,method,block,budget,accept_len\n"
                    "m,dflash,ddtree,16,16,8.6\nm,dflash,ddtree,16,32,9.3\n"
                    "m,eagle3,ddtree,16,16,4.1\nm,eagle3,ddtree,16,32,4.4\n")
    with pytest.raises(QueryError) as err:
        D.read_acceptance_file(path, "ddtree", 16)
    assert str(err.value) == (f"{path} has ddtree block-16 rows of several drafters (dflash, "
                              "eagle3) (fix: keep the rows of one drafter)")
    path.write_text("model,drafter,method,block,budget,accept_len\n"
                    "m,dflash,ddtree,16,16,8.6\nm,dflash,ddtree,16,32,9.3\n"
                    "m,eagle3,ddtree,8,16,4.1\n")   # (block 8: not read)
    b, a, model = D.read_acceptance_file(path, "ddtree", 16)
    assert (list(b), list(a), model) == ([16, 32], [8.6, 9.3], "m")


def test_an_acceptance_file_of_a_blank_and_a_named_drafter_is_refused(tmp_path):
    """A blank drafter beside a named one was read as one drafter: `optimize --acceptance-file`
    of the default drafter's rows (9.0, 9.6 at budgets 16, 32) and another drafter's (5.0, 5.6
    at 16, 64) of one target fitted one curve through both (accept_ref 7.55, gain 0.00), which
    neither drafter has, exit 0. A blank drafter column is the target's default drafter (as in
    a measurement row): the file is refused in one line."""
    path = tmp_path / "acc.csv"
    path.write_text("model,drafter,method,block,budget,accept_len\n"
                    "m,,ddtree,16,16,9.0\nm,,ddtree,16,32,9.6\n"
                    "m,org/other,ddtree,16,16,5.0\nm,org/other,ddtree,16,64,5.6\n")
    with pytest.raises(DataError) as err:
        D.read_acceptance_file(path, "ddtree", 16)
    assert str(err.value) == (
        f"{path}, row 4, column 'drafter': ddtree block-16 rows of a blank drafter (the "
        "target's default drafter; row 2) and of org/other (row 4): one curve would mix two "
        "drafters' acceptances (fix: keep the rows of one drafter (blank in every row: the "
        "default drafter; its name in every row: that drafter))")
    # either drafter's rows alone are read; rows of another block do not count
    for keep, want in (((1, 2), [9.0, 9.6]), ((3, 4), [5.0, 5.6])):
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0], *(lines[k] for k in keep),
                                   "m,,ddtree,8,16,4.1" if keep == (3, 4) else
                                   "m,org/other,ddtree,8,16,4.1"]) + "\n")
        assert list(D.read_acceptance_file(path, "ddtree", 16)[1]) == want
        path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def point_mass_work(tmp_path_factory):
    from test_cli_support import make_point_mass_workdir

    return make_point_mass_workdir(tmp_path_factory.mktemp("optimize") / "w")


def _printed_matches(cell: str, value: float) -> bool:
    """A printed tok/s equals the JSON's value at the printed precision, and a positive
    rate is never printed as 0."""
    digits = len(cell.split(".")[1]) if "." in cell and "e" not in cell else 0
    printed = float(cell)
    if value > 0 and printed == 0:
        return False
    if "e" in cell or abs(value) < 1:   # two significant digits
        return abs(printed - value) <= 0.051 * abs(value)
    return abs(printed - value) <= 0.5 * 10 ** -digits + 1e-9


def test_optimize_prints_a_rate_below_one_tok_s_as_predict_does(point_mass_work):
    """optimize --concurrency 4096 --context 128k printed per-user rates below 1 tok/s as
    whole numbers (the bundled fit: budget 16's median 0.71 as "1", budget 32's 0.43 as "0",
    budget 256's interval 0.0075-0.32 as "0-0"), where predict keeps two significant digits
    ("0.5"). The cells are predict's now: each equals the JSON's value at its precision."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from test_cli_support import run_cli

    @settings(max_examples=8, deadline=None, derandomize=True, database=None,
              print_blob=True)
    @given(concurrency=st.sampled_from([1, 64, 1024, 4096]),
           context=st.sampled_from(["0", "128k"]))
    def check(concurrency, context):
        argv = ("optimize", "--budgets", "8,64,1024", "--concurrency", str(concurrency),
                "--context", context)
        code, table, err = run_cli(point_mass_work, *argv)
        assert code == 0, err
        code, text, err = run_cli(point_mass_work, *argv, "--format", "json")
        rows = json.loads(text)["rows"]
        lines = [ln.split() for ln in table.splitlines() if ln.split()[:1] in
                 (["8"], ["64"], ["1024"])]
        assert [int(ln[0]) for ln in lines] == [r["budget"] for r in rows]
        for ln, r in zip(lines, rows, strict=True):
            # budget, M, accept (lo-hi), step ms, median, lo-hi, E[tok/s], ...
            median, interval, mean = ln[5], ln[6], ln[7]
            lo, hi = interval.rsplit("-", 1) if "e-" not in interval else (None, None)
            assert _printed_matches(median, r["median"]), (median, r["median"])
            assert _printed_matches(mean, r["tok_s_mean"]), (mean, r["tok_s_mean"])
            if lo is not None:
                assert _printed_matches(lo, r["lo90"]) and _printed_matches(hi, r["hi90"])

    check()


def test_next_prints_a_rate_below_one_tok_s_with_two_digits(tmp_path):
    """next --query at 4096 streams and 128k context printed "now: median 0.1 tok/s per user,
    90% interval 0.0-0.6" (the bundled fit): one decimal below 100 tok/s read a positive
    lower end 0.008 as 0.0. Below 1 tok/s the figures keep two significant digits, as
    predict's and optimize's cells do; each equals the JSON's value at its precision."""
    import re

    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)
    argv = ("next", "--query", "--concurrency 4096 --context 128k --budget 256 --accept 12",
            "--k", "2")
    code, out, err = run_cli(work, *argv)
    assert code == 0, err
    code, text, err = run_cli(work, *argv, "--format", "json")
    q = json.loads(text)["query"]
    now = next(ln for ln in out.splitlines() if ln.startswith("now: "))
    got = re.fullmatch(r"now: median (\S+) tok/s per user, 90% interval (\S+)-(\S+) "
                       r"\(width (\S+)\)", now)
    assert got is not None, now
    assert q["hi"] < 1   # (the case this checks)
    for cell, value in zip(got.groups(), (q["median"], q["lo"], q["hi"], q["width"]),
                           strict=True):
        assert _printed_matches(cell, value), (cell, value)


def test_next_says_a_query_beyond_the_measured_concurrency_keeps_a_part_reweighting_cannot_remove(
        tmp_path):
    """`next --query '--method ar --concurrency 32'` on the bundled fit ranked DDTree budget 32
    (at C = 1) first, cutting the width by 16%, and "the query itself" third at 8%: most of a
    C = 32 answer's width there is the prior-driven discrepancy per doubling of C beyond the
    measured (concurrency_sd, 5 doublings x 0.06), which reweighting the draws cannot remove
    and a refit with the row at C = 32 does. docs/howto/decide.md said so; the output did
    not. Point mass: rows at C = 1 on b300x8, a query at C = 8 is 3 doublings beyond."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)
    line = ("--query: C = 8 is 3 doublings beyond the concurrencies measured on b300x8 (at "
            "most 1): its interval carries a prior-driven discrepancy for them (concurrency_sd "
            "0.06 per doubling: sd 0.18 of log tok/s) that reweighting the draws cannot remove, "
            "so E[width] understates what a candidate above C = 1 does once added and refitted")
    argv = ("next", "--query", "--engine sglang --accept 14 --concurrency 8", "--k", "2")
    code, _, err = run_cli(work, *argv)
    assert code == 0 and f"ddtree-bayes: warning: {line}" in err.splitlines(), err
    code, text, _ = run_cli(work, *argv, "--format", "json")
    assert code == 0 and line in json.loads(text)["warnings"]
    code, _, err = run_cli(work, "next", "--query", "--engine sglang --accept 14", "--k", "2")
    assert code == 0 and "doublings beyond" not in err
    # a query on a GPU never measured counts from the system its answer is transferred from,
    # and says so (it named b300x8 for an H100 question without a word on why)
    code, _, err = run_cli(work, "next", "--query", "--hardware h100 --method ar --concurrency 8",
                           "--k", "2")
    assert code == 0 and ("C = 8 is 3 doublings beyond the concurrencies measured on b300x8 (at "
                          "most 1, which h100x8's answer is transferred from): ") in err, err


def test_next_leaves_out_a_measurement_whose_kv_cache_cannot_fit():
    """A review: a C = 4 query at context 131072 was offered AR at C = 64 and 128 (ranked 1st
    and 3rd), for which predict itself warns that the KV cache cannot fit (8 x 288 GB of B300
    less 500 GB of Kimi's weights leaves 1804 GB; 128 x 131072 x 35136 B = 589.5 GB fits, but
    at C = 512 the cache needs 2357.9 GB): a measurement nobody can make as asked."""
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards

    draws = point_mass_draws()   # (with the built-in Kimi card: the point mass stores none)
    draws.meta["model"]["card"] = dataclasses.asdict(
        load_model_cards(bundled("models.csv"))["kimi-k2.6"])

    def at(c):
        sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ar",
                                block=None, budget=None, verify_tokens=None,
                                context_tokens=131072.0, concurrency=c)
        from ddtree_bayes.workflows.decisions.next_measurement import unmeasurable

        return unmeasurable(draws, sc)

    assert at(128) is None
    assert at(512).startswith("at C = 512 and context 131072 the KV cache needs 2357.9 GB")


def test_candidates_file_refuses_a_duplicated_header_and_a_miscased_name_needs_no_refit(
        tmp_path):
    """A header naming ``engine`` twice ranked the row's last engine (``vllm``), exit 0: the
    fit, add and hardware readers refuse it. A ``B300`` said "then re-fit": fixing a
    candidates file's spelling needs no fit."""
    draws = point_mass_draws()
    path = tmp_path / "c.csv"
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",engine\nb300,8,sglang,ddtree,16,128,15,,vllm\n")
    with pytest.raises(DataError) as err:
        D.read_candidates(draws, path)
    assert str(err.value) == (f"{path}, row 1, column 'engine': appears twice in the header "
                              "(fix: keep one of the two columns (the other's values would be "
                              "dropped without a word))")
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\nB300,8,sglang,ddtree,16,128,15,\n")
    with pytest.raises(QueryError) as err:
        D.read_candidates(draws, path)
    assert str(err.value).endswith("(fix: names are lowercase: write 'b300')")


def _point_curve(text: str, block: int = 16) -> str:
    """The bundled [acceptance_curve] with point priors accept_ref 5, gain 1, decay 0.5 (and
    ``block``): accept(B) = 5 + (1 - 0.5**d) / 0.5, d = log2(B / 16): 3 at 8, 5 at 16, 6 at 32."""
    for old, new in (('mu = 9.4\nsigma = 2.4\nlower = 1.0\nupper = 16.0\n', 'value = 5.0\n'),
                     ('mu = 0.6\nsigma = 0.25\nlower = 0.0\nupper = 2.0\n', 'value = 1.0\n'),
                     ('dist = "beta"\nalpha = 8.0\nbeta = 2.0\n', 'dist = "point"\nvalue = 0.5\n'),
                     ('method = "ddtree"\nblock = 16\n', f'method = "ddtree"\nblock = {block}\n')):
        assert old in text
        text = text.replace(old, new, 1)
    return text.replace('[acceptance_curve.accept_ref]\ndist = "truncnormal"',
                        '[acceptance_curve.accept_ref]\ndist = "point"', 1).replace(
        '[acceptance_curve.gain]\ndist = "truncnormal"', '[acceptance_curve.gain]\ndist = "point"', 1)


def test_optimize_and_the_report_ask_one_curve_and_say_it_is_not_the_fits(tmp_path, monkeypatch):
    """optimize read [acceptance_curve] from the priors file here, the report's budget section
    the copy stored in the fit: with the curve edited (accept_ref 9.4 -> 5) optimize answered
    from the edit and the report from the old curve, neither saying so (check_fit ignores the
    section). Both now ask the current file and say it differs from the fit's."""
    from ddtree_bayes import api
    from ddtree_bayes.workflows.report.sections import decisions_section
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    priors = work / "models" / "priors.toml"
    priors.write_text(_point_curve(priors.read_text()))
    line = ("the acceptance curve ([acceptance_curve] in models/priors.toml) differs from the "
            "one fit 20260101T000000Z-pointmss stored (accept_ref ~ truncnormal(mu=9.4, "
            "sigma=2.4, lower=1, upper=16) (at budget 16), gain ~ truncnormal(mu=0.6, "
            "sigma=0.25, lower=0, upper=2), decay ~ beta(alpha=8, beta=2)): this answer uses "
            "models/priors.toml's (the curve is not fitted: editing it needs no refit)")
    code, out, err = run_cli(work, "optimize", "--budgets", "8,16,32", "--format", "json")
    assert code == 0, err
    res = json.loads(out)
    assert [r["accept"] for r in res["rows"]] == [3.0, 5.0, 6.0]
    assert line in res["warnings"] and f"ddtree-bayes: warning: {line}" in err.splitlines()
    monkeypatch.chdir(work)
    opt = decisions_section(api.load(), 20261130)["optimize"]["sglang"]
    assert [r["accept"] for r in opt["rows"][:3]] == [3.0, 5.0, 6.0]
    assert line in opt["warnings"]


def test_optimize_and_the_report_take_the_curves_block(tmp_path, monkeypatch):
    """The curve fixes the method and block, but optimize's --block defaulted to 16 and the
    report passed 16: a block-8 curve was refused by both ("describes ddtree block 8, not
    ddtree block 16"). Both now take the curve's: at block 8 a step emits at most 8 tokens
    (accept_max 8), above the curve's 3, 5, 6 at budgets 8, 16, 32."""
    from ddtree_bayes import api
    from ddtree_bayes.workflows.report.sections import decisions_section
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    priors = work / "models" / "priors.toml"
    priors.write_text(_point_curve(priors.read_text(), block=8))
    code, out, err = run_cli(work, "optimize", "--budgets", "8,16,32", "--format", "json")
    assert code == 0, err
    res = json.loads(out)
    assert res["scenario"]["block"] == 8
    assert [(r["accept"], r["accept_max"]) for r in res["rows"]] == [(3.0, 8), (5.0, 8),
                                                                    (6.0, 8)]
    monkeypatch.chdir(work)
    dec = decisions_section(api.load(), 20261130)
    assert "optimize_error" not in dec, dec.get("optimize_error")
    assert dec["optimize"]["sglang"]["scenario"]["block"] == 8


def test_candidates_from_a_file_are_made_as_the_default_ones(tmp_path):
    """A --candidates row was resolved on its own: at one stream and no KV cache where the
    query asks C = 4 in fp8, and never asked whether anyone can measure it, so a native
    candidate (a relation engine no row measured) was ranked first. The file's rows are now
    made as the default candidates are: the query's concurrency and KV cache unless a column
    gives them, and one nobody can make is left out with the default list's note."""
    from ddtree_bayes import api
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, n=64)
    (work / "c.csv").write_text(",".join(D.CANDIDATE_COLUMNS) + "\n"
                                "b300,8,native,ddtree,16,32,14,\nb300,8,sglang,ddtree,16,32,14,\n")
    query = ("--hardware b300 --engine sglang --method ddtree --block 16 --budget 32 "
             "--accept 14 --concurrency 4 --kv-cache fp8")
    code, out, err = run_cli(work, "next", "--candidates", "c.csv", "--query", query, "--k", "4",
                             "--format", "json")
    assert code == 0, err
    res = json.loads(out)
    assert [(r["candidate"], r["why"]) for r in res["rows"]] == [
        ("b300 x8 sglang ddtree block 16 budget 32 M=33 C=4", "c.csv row 3")]
    assert res["left_out"] == [{
        "candidate": "b300 x8 native ddtree block 16 budget 32 M=33 C=4", "why": "c.csv row 2",
        "reason": "native is a modelled engine (its speculative overhead is sglang's times "
                  "1 - reduction) with no measurement in the fit: there is no such engine to run"}]
    draws = api.load(workdir=work)
    left: list = []
    (cand,) = D.read_candidates(draws, work / "c.csv", D.parse_query(draws, query),
                                left_out=left)
    assert (cand.scenario.concurrency, cand.scenario.kv_cache) == (4, "fp8")
    assert [c.scenario.engine for c, _ in left] == ["native"]
    # a file of nothing anyone can measure: refused, one line, naming the row and why
    (work / "n.csv").write_text(",".join(D.CANDIDATE_COLUMNS) + "\nb300,8,native,ddtree,16,32,14,\n")
    with pytest.raises(DataError) as info:
        D.read_candidates(draws, work / "n.csv", D.parse_query(draws, query))
    assert str(info.value) == (
        f"{work / 'n.csv'}, row 2: no candidate anyone can measure: native is a modelled engine "
        "(its speculative overhead is sglang's times 1 - reduction) with no measurement in the "
        "fit: there is no such engine to run (fix: list a measurement someone can make: an "
        "engine the fit measured, a method with a drafter for the model)")


def _custom_curve_workdir(root: Path) -> Path:
    """A point-mass workdir whose fit was made with ``--priors custom.toml`` (the point curve
    of :func:`_point_curve`: accept 3, 5, 6 at budgets 8, 16, 32) while models/priors.toml
    holds the bundled curve."""
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(root)
    custom = work / "custom.toml"
    custom.write_text(_point_curve((work / "models" / "priors.toml").read_text()))
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv", custom,
                         work / "data" / "hardware.csv")
    return work


#: The warning when models/priors.toml (the bundled curve) answers for the custom.toml fit.
_NOT_THE_FITS = ("the acceptance curve ([acceptance_curve] in models/priors.toml) differs from "
                 "the one fit 20260101T000000Z-pointmss stored (accept_ref ~ point(value=5) (at "
                 "budget 16), gain ~ point(value=1), decay ~ point(value=0.5)): this answer uses "
                 "models/priors.toml's (the curve is not fitted: editing it needs no refit)")


def test_optimize_and_the_report_default_to_the_priors_file_of_the_fit(tmp_path, monkeypatch):
    """After `fit --priors custom.toml`, optimize and the report's budget section read the
    curve of models/priors.toml here (the bundled one) and said it was not the fit's; the
    report had no --priors to ask custom.toml's. Both now default to the file the fit was made
    with (meta priors.path, the one check_fit compares) while it exists: accept 3, 5, 6 at
    8, 16, 32, nothing warned; the report's priors_path asks another, as --priors does."""
    from ddtree_bayes import api
    from ddtree_bayes.workflows.report.sections import decisions_section
    from test_cli_support import run_cli

    work = _custom_curve_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "optimize", "--budgets", "8,16,32", "--format", "json")
    assert code == 0, err
    res = json.loads(out)
    assert [r["accept"] for r in res["rows"]] == [3.0, 5.0, 6.0]
    assert not any("acceptance curve" in w for w in res["warnings"]), res["warnings"]
    monkeypatch.chdir(work)
    draws = api.load()
    assert D.curve_priors_file(draws) == work / "custom.toml"
    assert D.curve_priors_file(draws, "models/priors.toml") == Path("models/priors.toml")
    opt = decisions_section(draws, 20261130)["optimize"]["sglang"]
    assert [r["accept"] for r in opt["rows"][:3]] == [3.0, 5.0, 6.0]
    assert not any("acceptance curve" in w for w in opt["warnings"]), opt["warnings"]
    other = decisions_section(draws, 20261130, priors_path="models/priors.toml")
    assert other["optimize"]["sglang"]["warnings"][0] == _NOT_THE_FITS
    # the fit's file gone: the working directory's, saying it is not the fit's curve
    (work / "custom.toml").unlink()
    assert D.curve_priors_file(draws) == work / "models" / "priors.toml"
    assert decisions_section(draws, 20261130)["optimize"]["sglang"]["warnings"][0] == _NOT_THE_FITS


def test_report_priors_flag_asks_that_curve_and_refuses_a_missing_file(tmp_path, monkeypatch):
    """report had no --priors (optimize has): its budget section could not ask the curve
    optimize --priors FILE answers from. It is passed to write_report; a file that cannot be
    read is refused before anything is computed or written (exit 2, one line)."""
    from ddtree_bayes.workflows import report
    from test_cli_support import run_cli

    work = _custom_curve_workdir(tmp_path / "w")
    calls: list[dict] = []

    def write_report(fit_id=None, **kw):
        calls.append(kw)
        return work / "reports" / "x", {"fit_id": "x", "verdict": {
            "converged": True, "failures": [], "text": "converged"}}

    monkeypatch.setattr(report, "write_report", write_report)
    code, out, err = run_cli(work, "report", "--priors", "models/priors.toml", "--quiet")
    assert code == 0, err
    assert calls[-1]["priors"] == "models/priors.toml"
    code, out, err = run_cli(work, "report", "--quiet")
    assert code == 0, err
    assert calls[-1].get("priors") is None
    n = len(calls)
    code, out, err = run_cli(work, "report", "--priors", "nope.toml", "--quiet")
    assert (code, out, len(calls)) == (2, "", n)
    assert err == ("ddtree-bayes: error: nope.toml: cannot read priors file: No such file or "
                   "directory (fix: pass an existing file with --priors)\n")
    (work / "flat.toml").write_text("[model]\n")
    code, out, err = run_cli(work, "report", "--priors", "flat.toml", "--quiet")
    assert (code, len(calls)) == (2, n)
    assert err == ("ddtree-bayes: error: flat.toml has no [acceptance_curve] section (fix: copy "
                   "it from the bundled models/priors.toml, or pass --priors)\n")
    assert not (work / "reports").exists()


def test_candidates_that_make_the_same_measurement_are_refused(tmp_path):
    """Repeats were found on the raw cells, but a blank concurrency is the query's C: a blank
    row and one with C = 4 (the query's) are one measurement, and were ranked 1 and 2. Rows
    are now compared as made (the default list's key): the second is refused, one line,
    naming both rows and the measurement; nothing is ranked (exit 2, stdout empty)."""
    from ddtree_bayes import api
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, n=64)
    path = work / "c.csv"
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + ",concurrency\n"
                    "b300,8,sglang,ddtree,16,32,14,,\nb300,8,sglang,ddtree,16,32,14,,4\n")
    query = ("--hardware b300 --engine sglang --method ddtree --block 16 --budget 32 "
             "--accept 14 --concurrency 4")
    line = ("repeats row 2: one candidate measurement (b300 x8 sglang ddtree block 16 budget 32 "
            "M=33 C=4), listed twice (fix: keep one row per candidate; a blank cell takes the "
            "query's value, and accept_len does not make another measurement)")
    code, out, err = run_cli(work, "next", "--candidates", "c.csv", "--query", query, "--k", "4",
                             "--format", "json")
    assert (code, out) == (2, "")
    assert [x for x in err.splitlines() if "error" in x] == [
        f"ddtree-bayes: error: c.csv, row 3: {line}"]   # (after the query's C warning)
    draws = api.load(workdir=work)
    with pytest.raises(DataError) as info:
        D.read_candidates(draws, path, D.parse_query(draws, query))
    assert str(info.value) == f"{path}, row 3: {line}"
    # at one stream (no query C) the blank row is C = 1, another measurement than C = 4
    cands = D.read_candidates(draws, path, D.parse_query(draws, query.replace(
        " --concurrency 4", "")))
    assert [c.scenario.concurrency for c in cands] == [1, 4]
    # accept_len only shifts log tok/s: the same measurement at another acceptance
    path.write_text(",".join(D.CANDIDATE_COLUMNS) + "\n"
                    "b300,8,sglang,ddtree,16,32,14,\nb300,8,sglang,ddtree,16,32,12,\n")
    with pytest.raises(DataError, match=r"row 3: repeats row 2: one candidate measurement "
                                        r"\(b300 x8 sglang ddtree block 16 budget 32 M=33\)"):
        D.read_candidates(draws, path)


def test_optimize_says_when_the_most_likely_best_budget_is_at_the_edge():
    """The edge note fired only when the recommended budget (highest E[tok/s]) was at the edge:
    `optimize --hardware b300 --engine native` on the bundled fit recommends 16 (P(best) 0.43)
    while 8, the smallest compared, is the best in 52% of the draws, and nothing warned. The
    edge budget with the highest P(best) now says so too, in the same words.

    Five point-mass draws, acceptance 6, 8, 10 at budgets 8, 16, 32 (accept_ref 8, gain 2,
    decay 1); the MoE slope s per draw gives step = (8 + 4 s B) / 0.8 = 10 + 5 s B ms:
      s = 0.15 (3 draws): steps 16, 22, 34 -> 375, 363.6, 294.1 tok/s (8 best)
      s = 0.0625 (2):     steps 12.5, 15, 20 -> 480, 533.3, 500 tok/s (16 best)
    E[tok/s]: 8 (3 x 375 + 2 x 480) / 5 = 417; 16 (3 x 8000 / 22 + 2 x 8000 / 15) / 5 = 431.5;
    so 16 is recommended with P(best) 0.40 and 8 has P(best) 0.60."""
    draws = point_mass_draws(n=5)
    draws.variables["moe_slope"] = np.array([[0.15], [0.15], [0.15], [0.0625], [0.0625]])
    curve = curve_of(gain='dist = "point"\nvalue = 2.0', decay='dist = "point"\nvalue = 1.0')
    out = D.optimize(draws, curve, hardware="b300", engine="sglang", budgets=(8, 16, 32))
    rows = {r["budget"]: r for r in out["rows"]}
    assert [rows[b]["accept"] for b in (8, 16, 32)] == [6.0, 8.0, 10.0]
    assert rows[8]["tok_s_mean"] == pytest.approx(417.0)
    assert rows[16]["tok_s_mean"] == pytest.approx((3 * 8000 / 22 + 2 * 8000 / 15) / 5)
    assert out["recommended"] == 16
    assert [rows[b]["p_best"] for b in (8, 16, 32)] == [0.6, 0.4, 0.0]
    edge = [w for w in out["warnings"] if "of the budgets compared" in w]
    assert edge == ["budget 8 is the smallest of the budgets compared, and its P(best) 0.60 is "
                    "among them: a smaller budget may be faster still (--budgets 2,4,8,16 "
                    "compares smaller ones)"]
    # with 4 as well, 8 is neither the edge nor recommended: nothing to say of the edges
    # (4: accept 4, steps 13, 11.25 -> 307.7, 355.6 tok/s: never best)
    wider = D.optimize(draws, curve, hardware="b300", engine="sglang", budgets=(4, 8, 16, 32))
    assert [r["p_best"] for r in wider["rows"]] == [0.0, 0.6, 0.4, 0.0]
    assert not [w for w in wider["warnings"] if "of the budgets compared" in w]


def test_optimize_of_one_budget_says_there_is_nothing_to_compare(tmp_path):
    """A hunt (helper h1, 2026-12-05): `optimize --budgets 32` printed "recommended budget: 32
    (highest expected tok/s, ...; P(best) 1.00; expected regret 0.0 tok/s)", a certainty that
    only says one budget was asked. One budget is now said to be the only one compared."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "optimize", "--budgets", "32")
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("recommended budget")]
    assert line.startswith("recommended budget: 32 (the only budget asked: nothing to compare; "
                           "expected ")
    assert "P(best)" not in line and line.endswith(" tok/s)")
    code, out, err = run_cli(work, "optimize", "--budgets", "8,32")
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("recommended budget")]
    assert "(highest expected tok/s, " in line and "; P(best) " in line


def test_optimize_says_when_no_drafter_serves_the_models_tree(tmp_path, monkeypatch):
    """A walkthrough on Gemma 3 27B (AR and a draft-model row in llama.cpp on one H100):
    `optimize --model gemma-3-27b-it` and the report's budget section recommended DDTree
    budget 16 at 290 tok/s - five times the 55 tok/s measured with its draft model - without
    a word that no drafter card serves Gemma's DDTree and the fit measured none, while
    `predict` of that tree warned it and `next` left such candidates out. optimize now warns
    it in predict's words (the report's budget section carries its warnings); a model whose
    DDTree the fit measured (Kimi on B300) stays quiet."""
    from ddtree_bayes.engine.testing import multi_model_draws

    monkeypatch.chdir(tmp_path)   # (no data/drafters.csv here: the stored and built-in cards)
    draws = multi_model_draws()
    curve = parse_acceptance_curve(draws.priors_toml)
    out = D.optimize(draws, curve, model="llama-3.1-8b-instruct", hardware="h100", gpus=1,
                     engine="vllm", budgets=(8, 16, 32))
    gap = ("no drafter card serves llama-3.1-8b-instruct's ddtree and the fit measured none: "
           "there is no drafter to run it with (`ddtree-bayes card add` one; "
           "llama-3.1-8b-instruct's drafter cards serve eagle (yuhuili/EAGLE-LLaMA3.1-Instruct-8B), "
           "eagle3 (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): ask --method eagle or eagle3)")
    assert out["warnings"][0] == gap
    assert out["warnings"].count(gap) == 1
    kimi = D.optimize(draws, curve, model="kimi-k2.6", hardware="b300", engine="sglang",
                      budgets=(8, 16, 32))
    assert not [w for w in kimi["warnings"] if "no drafter card serves" in w]


def test_optimize_names_no_experts_for_a_dense_model():
    """A walkthrough (helper u) on Gemma 3 27B read optimize's 'the roofline verify cost
    (distinct experts, compute knee) ... carry the step time there' for a dense model. A dense
    card (Llama-3.1-8B's) names the compute knee alone; an MoE (Kimi K2.6) keeps both."""
    from ddtree_bayes.cli.decisions import _carriers
    from ddtree_bayes.engine.testing import multi_model_draws

    model = dict(multi_model_draws().meta["model"], moe_form="roofline", step_form="structured")
    assert _carriers(model, "llama-3.1-8b-instruct").startswith(
        "the roofline verify cost (compute knee) and the tree/drafter costs")
    assert _carriers(model, "kimi-k2.6").startswith(
        "the roofline verify cost (distinct experts, compute knee) and")


def test_an_acceptance_file_of_a_named_drafter_prices_that_drafters_passes(tmp_path,
                                                                           monkeypatch):
    """`optimize --acceptance-file F` whose rows all name a drafter card (here a 5-layer Kimi
    K2.6 block drafter of 5.2 B parameters, default no) took that drafter's acceptance but
    priced every budget's step with the drafter the fit priced (a generic one): the answer
    was of no drafter, and said nothing. The step is now priced with the named card, as
    `predict --drafter` prices it (engine/scenario.with_drafter), the JSON's scenario names
    the drafter, and the curve's source says whose rows it was updated with."""
    from ddtree_bayes.core.config import DEFAULT_SEED
    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.engine.scenario import with_drafter
    from ddtree_bayes.workflows.decisions.common import shared_step
    from test_structure_model import structured_point_mass

    head = bundled("drafters.csv").read_text().splitlines()[0]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "drafters.csv").write_text(
        head + "\ntest/k26-block,kimi-k2.6,ddtree,dflash_block,5,,,5.2,5.2,1,yes,yes,,2,,me,,,no\n")
    assert not load_drafter_cards(tmp_path / "data" / "drafters.csv")[0].default
    monkeypatch.chdir(tmp_path)
    draws = structured_point_mass()
    curve = parse_acceptance_curve(draws.priors_toml)
    acc = tmp_path / "acc.csv"
    acc.write_text("model,drafter,method,block,budget,accept_len\n"
                   "kimi-k2.6,test/k26-block,ddtree,16,16,9.0\n"
                   "kimi-k2.6,test/k26-block,ddtree,16,32,9.6\n")
    blank = tmp_path / "blank.csv"
    blank.write_text(acc.read_text().replace("test/k26-block", ""))
    ask = {"hardware": "b300", "engine": "sglang", "budgets": (16, 32)}
    named = D.optimize(draws, curve, acceptance_file=acc, **ask)
    plain = D.optimize(draws, curve, acceptance_file=blank, **ask)
    # the step of predict --drafter test/k26-block at each budget, not the default drafter's
    for row in named["rows"]:
        sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                method="ddtree", block=16, budget=row["budget"],
                                verify_tokens=None, context_tokens=None)
        card = float(np.median(shared_step(draws, with_drafter(draws, sc, "test/k26-block"),
                                           DEFAULT_SEED)[0]))
        default = float(np.median(shared_step(draws, sc, DEFAULT_SEED)[0]))
        assert row["step_ms"] == pytest.approx(card) and card > default * 1.001
    assert [r["step_ms"] for r in plain["rows"]] == pytest.approx(
        [float(np.median(shared_step(draws, P.resolve_scenario(
            draws, hardware="b300", gpus=8, engine="sglang", method="ddtree", block=16,
            budget=b, verify_tokens=None, context_tokens=None), DEFAULT_SEED)[0]))
         for b in (16, 32)])
    assert named["scenario"]["drafter"] == "test/k26-block"
    assert "drafter" not in plain["scenario"]
    assert "2 kimi-k2.6 rows of drafter test/k26-block of " in named["curve"]["source"]
    assert not [w for w in named["warnings"] if "drafter" in w], named["warnings"]
    # a card that cannot price this question (of another method): refused in one line,
    # naming the file's row and column
    text = acc.read_text()
    acc.write_text(text.replace("test/k26-block", "lightseekorg/kimi-k2.5-eagle3-mla"))
    with pytest.raises(DataError) as err:
        D.optimize(draws, curve, acceptance_file=acc, **ask)
    assert str(err.value).startswith(
        f"{acc}, row 2, column 'drafter': drafter 'lightseekorg/kimi-k2.5-eagle3-mla' "), err
    # a name that is no card (a label, as data/acceptance_reference.csv's "dflash"): priced
    # with the fit's drafter, as before, and said
    acc.write_text(text.replace("test/k26-block", "dflash"))
    label = D.optimize(draws, curve, acceptance_file=acc, **ask)
    assert [r["step_ms"] for r in label["rows"]] == [r["step_ms"] for r in plain["rows"]]
    assert "drafter" not in label["scenario"]
    assert (f"the acceptance file's rows ({acc}) name the drafter 'dflash', which is no drafter "
            "card: every budget's step is priced with the drafter the fit priced for "
            "kimi-k2.6's ddtree (a generic ddtree drafter), not with dflash's passes; name its "
            "card in the drafter column (`ddtree-bayes card add` writes one) to price them"
            ) in label["warnings"]


def test_optimize_says_the_acceptance_files_rows_name_the_drafter_not_a_flag(
        tmp_path, monkeypatch, capsys):
    """`optimize --acceptance-file F` whose rows name a drafter card added since the fit
    warned that "this answer prices --drafter NAME with its card here", though no --drafter
    was typed (optimize has none): the warning now says where the drafter came from."""
    from ddtree_bayes import api
    from test_structure_model import structured_point_mass

    head = bundled("drafters.csv").read_text().splitlines()[0]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "drafters.csv").write_text(
        head + "\ntest/k26-block,kimi-k2.6,ddtree,dflash_block,5,,,5.2,5.2,1,yes,yes,,2,,me,,,no\n")
    (tmp_path / "acc.csv").write_text("model,drafter,method,block,budget,accept_len\n"
                                      "kimi-k2.6,test/k26-block,ddtree,16,16,9.0\n"
                                      "kimi-k2.6,test/k26-block,ddtree,16,32,9.6\n")
    draws = structured_point_mass()
    # a fit that stored drafter cards (none), of one target: the card here is one it lacks
    draws.meta["model"].update({"drafter_cards": [], "target_model": "kimi-k2.6"})
    monkeypatch.setattr(api, "load", lambda *a, **k: draws)
    code, _, err = run(capsys, monkeypatch, tmp_path, "optimize", "--hardware", "b300",
                       "--engine", "sglang", "--budgets", "16,32", "--acceptance-file",
                       "acc.csv")
    assert code == 0, err
    (line,) = [w for w in err.splitlines() if "differs from fit" in w]
    assert "--drafter" not in line, line
    assert ("this answer prices the drafter test/k26-block that the rows of acc.csv name with "
            "its card here, at the multiple of its roofline the fit learned with the cards it "
            "stored; re-run `ddtree-bayes fit` to fit with the cards here") in line, line


def test_another_models_acceptance_file_naming_its_own_drafter_is_not_refused(tmp_path,
                                                                             monkeypatch):
    """Another model's acceptance rows are used and warned of (the help's example: Qwen3-8B
    rows for a Kimi K2.6 question). Since optimize prices a drafter card the rows name, such
    a file whose rows name their own model's drafter (z-lab/Qwen3-8B-DFlash-b16, the card of
    the DDTree paper's Qwen3-8B drafter) was refused ("drafts for qwen3-8b, not kimi-k2.6"),
    though the same rows with a blank drafter column were answered. That card cannot price a
    Kimi K2.6 pass: the step is priced with the fit's drafter, as for a name no card has, and
    said. Rows of the question's own model naming another target's card are still refused."""
    from test_structure_model import structured_point_mass

    monkeypatch.chdir(tmp_path)
    draws = structured_point_mass()
    curve = parse_acceptance_curve(draws.priors_toml)
    ask = {"hardware": "b300", "engine": "sglang", "budgets": (16, 32)}
    body = "model,drafter,method,block,budget,accept_len\n{m},{d},ddtree,16,16,9.0\n" \
           "{m},{d},ddtree,16,32,9.6\n"
    card = "z-lab/Qwen3-8B-DFlash-b16"
    acc, blank = tmp_path / "acc.csv", tmp_path / "blank.csv"
    acc.write_text(body.format(m="qwen3-8b", d=card))
    blank.write_text(body.format(m="qwen3-8b", d=""))
    named = D.optimize(draws, curve, acceptance_file=acc, **ask)
    plain = D.optimize(draws, curve, acceptance_file=blank, **ask)
    assert [r["step_ms"] for r in named["rows"]] == [r["step_ms"] for r in plain["rows"]]
    assert [r["accept"] for r in named["rows"]] == [
        r["accept"] for r in plain["rows"]]
    assert "drafter" not in named["scenario"]
    assert (f"the acceptance file's rows ({acc}) name the drafter {card!r}, a drafter card of "
            "qwen3-8b, not kimi-k2.6: every budget's step is priced with the drafter the fit "
            "priced for kimi-k2.6's ddtree (a generic ddtree drafter), not with "
            f"{card}'s passes") in named["warnings"], named["warnings"]
    acc.write_text(body.format(m="kimi-k2.6", d=card))
    with pytest.raises(DataError) as err:
        D.optimize(draws, curve, acceptance_file=acc, **ask)
    assert str(err.value).startswith(
        f"{acc}, row 2, column 'drafter': drafter '{card}' drafts for qwen3-8b, not kimi-k2.6"), err


def test_an_acceptance_files_drafter_not_the_default_card_bounds_the_block(tmp_path,
                                                                          monkeypatch):
    """`optimize --block 16 --acceptance-file F` whose rows name a Kimi K2.6 drafter trained
    at block 32 (my/kimi-dflash-b32, default no) was refused against the default card's
    trained block ("block 16 is above the block 8 kimi-k2.6's ddtree drafter
    my/kimi-dflash-b8 was trained at"): the block was checked before the file's drafter was
    read. The rows' drafter bounds it: block 16 answers, each budget at most 16 tokens a step
    (block - 1 drafts + the bonus token), priced with the b32 card. Rows naming the b8 card
    at block 16 are refused at the file's row and block column; blank rows (the default card)
    as before."""
    from ddtree_bayes.core.config import DEFAULT_SEED
    from ddtree_bayes.engine.scenario import with_drafter
    from ddtree_bayes.workflows.decisions.common import shared_step
    from test_structure_model import structured_point_mass

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "drafters.csv").write_text(
        "drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
        "bytes_per_weight,source,block_size,default\n"
        "my/kimi-dflash-b8,kimi-k2.6,ddtree;dflash,dflash_block,5,1.0,1.0,2,a test card,8,\n"
        "my/kimi-dflash-b32,kimi-k2.6,ddtree,dflash_block,5,1.0,1.0,2,a test card,32,no\n")
    monkeypatch.chdir(tmp_path)
    draws = structured_point_mass()
    curve = parse_acceptance_curve(draws.priors_toml)
    body = ("model,drafter,method,block,budget,accept_len\n"
            "kimi-k2.6,{d},ddtree,16,16,9.0\nkimi-k2.6,{d},ddtree,16,32,9.6\n")
    acc = tmp_path / "acc.csv"
    acc.write_text(body.format(d="my/kimi-dflash-b32"))
    ask = {"hardware": "b300", "engine": "sglang", "block": 16, "budgets": (16, 32)}
    out = D.optimize(draws, curve, acceptance_file=acc, **ask)
    assert out["scenario"]["drafter"] == "my/kimi-dflash-b32"
    assert out["scenario"]["block"] == 16
    assert [r["accept_max"] for r in out["rows"]] == [16, 16]
    for row in out["rows"]:   # the b32 card's passes, as predict --drafter prices them
        sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                method="ddtree", block=16, budget=row["budget"],
                                verify_tokens=None, context_tokens=None,
                                drafter="my/kimi-dflash-b32")
        sc = with_drafter(draws, sc, "my/kimi-dflash-b32")
        assert row["step_ms"] == pytest.approx(
            float(np.median(shared_step(draws, sc, DEFAULT_SEED)[0])))
    # the default card's rows at block 16: refused at the file's first row, its block column
    acc.write_text(body.format(d="my/kimi-dflash-b8"))
    with pytest.raises(DataError) as err:
        D.optimize(draws, curve, acceptance_file=acc, **ask)
    assert str(err.value).startswith(
        f"{acc}, row 2, column 'block': block 16 is above the block 8 kimi-k2.6's ddtree "
        "drafter my/kimi-dflash-b8 was trained at"), err
    acc.write_text(body.format(d=""))
    with pytest.raises(QueryError, match="block 16 is above the block 8 kimi-k2.6's ddtree "
                                         "drafter my/kimi-dflash-b8 was trained at"):
        D.optimize(draws, curve, acceptance_file=acc, **ask)


def _kimi_carded_draws(**overrides):
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards

    draws = point_mass_draws(**overrides)
    kimi = load_model_cards(bundled("models.csv"))["kimi-k2.6"]
    assert kimi.max_context_tokens == 262144
    draws.meta["model"]["card"] = dataclasses.asdict(kimi)
    return draws


def test_next_proposes_no_measurement_past_the_cards_longest_context():
    """`next --query "--engine sglang --accept 14 --context 300k"` ranked first the query
    itself and second AR at 307200 tokens, past Kimi K2.6's 262,144-token card maximum: runs
    nobody can make as configured. The query is still answered (predict's warning); those
    candidates are left out, on one line saying why, and the rest ranked."""
    draws = _kimi_carded_draws()
    query = D.parse_query(draws, "--engine sglang --accept 14 --context 300k")
    left_out: list = []
    got = [c.describe() for c in D.default_candidates(draws, query, left_out)]
    assert not [d for d in got if "ctx 307200" in d], got
    assert "b300 x8 sglang ar" in got   # (context 0 candidates stay)
    why = ("context 307200 is above kimi-k2.6's longest, 262144 tokens (max_position_embeddings, "
           "its card): the model takes no such context unless its RoPE is scaled further, so "
           "nobody can run it as configured")
    assert [(c.why, c.describe(), reason == why) for c, reason in left_out] == [
        ("the query itself", "b300 x8 sglang ddtree block 16 budget 32 M=33 ctx 307200", True),
        # (native keeps its own reason: there is no such engine at any context)
        ("the query in native", "b300 x8 native ddtree block 16 budget 32 M=33 ctx 307200",
         False),
        ("AR at the query's context", "b300 x8 sglang ar ctx 307200", True)]
    # the table prints them on one "left out" line; the query's own numbers are still given
    out = D.next_measurements(_kimi_carded_draws(n=64, noise_sd=0.05), query, k=4)
    assert out["rows"] and not [r for r in out["rows"] if "ctx 307200" in r["candidate"]]
    assert sum(r["reason"] == why for r in out["left_out"]) == 2
    assert out["query"]["context_tokens"] == 307200.0
    # at the card's own longest context the candidates are proposed
    at_max = D.parse_query(draws, "--engine sglang --accept 14 --context 262144")
    assert "b300 x8 sglang ar ctx 262144" in [c.describe()
                                              for c in D.default_candidates(draws, at_max)]


def test_a_candidates_file_row_past_the_cards_longest_context_is_left_out(tmp_path):
    draws = _kimi_carded_draws()
    path = tmp_path / "c.csv"
    path.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
                    "b300,8,sglang,ar,,,,300000\nb300,8,sglang,ar,,,,131072\n")
    query = D.parse_query(draws, "--engine sglang --accept 14")
    left: list = []
    got = D.read_candidates(draws, path, query, left_out=left)
    assert [c.describe() for c in got] == ["b300 x8 sglang ar ctx 131072"]
    assert [c.describe() for c, _ in left] == ["b300 x8 sglang ar ctx 300000"]
    assert "above kimi-k2.6's longest, 262144 tokens" in left[0][1]


def test_a_query_past_the_cards_longest_context_is_offered_measurements_at_that_longest():
    """A query at 307200 tokens, past Kimi K2.6's 262,144: the runs at its context are left
    out (nobody can make them), and the nearest that can be made are offered in their place,
    the query's configuration and AR at the card's longest context, 262144 tokens: without
    them every remaining candidate sat at context 0, where the query's context cost is not
    measured."""
    draws = _kimi_carded_draws()
    query = D.parse_query(draws, "--engine sglang --accept 14 --context 300k")
    got = {c.why: c.describe() for c in D.default_candidates(draws, query, [])}
    # (its 33 verified tokens end at position 262144: 262112 + 33 - 1, not past it)
    assert got["the query at the model's longest context"] == (
        "b300 x8 sglang ddtree block 16 budget 32 M=33 ctx 262112")
    assert got["AR at the model's longest context"] == "b300 x8 sglang ar ctx 262144"
    # within the card: no such candidates
    inside = D.parse_query(draws, "--engine sglang --accept 14 --context 131072")
    whys = [c.why for c in D.default_candidates(draws, inside, [])]
    assert not [w for w in whys if "longest context" in w], whys


def test_next_proposes_no_step_whose_verified_tokens_pass_the_cards_longest_context():
    """`next --query "--budget 1000000 --accept 14"` ranked first "the query itself", a tree
    of 1,000,001 verified tokens on Kimi K2.6, whose card takes 262,144 positions: predict
    warns that no engine runs such a step, and next proposed measuring it (exit 0). The
    positions a step's verified tokens take after the context count, as predict's
    max_context_warning counts them: budget 300000 at context 0 reaches position 300000
    (= 0 + 300001 - 1) > 262144; budget 262143 reaches 262143 and can be run."""
    draws = _kimi_carded_draws()
    query = D.parse_query(draws, "--engine sglang --accept 14 --budget 300000")
    left_out: list = []
    got = [c.describe() for c in D.default_candidates(draws, query, left_out)]
    assert not [d for d in got if "budget 300000" in d], got
    why = ("a step verifies 300001 tokens after a context of 0, reaching position 300000, "
           "above kimi-k2.6's longest, 262144 tokens (its card): no engine runs such a step, "
           "so nobody can run it as configured")
    assert [(c.why, reason) for c, reason in left_out
            if " sglang " in c.describe()] == [("the query itself", why)]
    # no stand-in at the longest context: its 300001 tokens end at the longest position
    # only from context 262144 - 300001 + 1 = -37856, which no run has (nor from 1000)
    for ctx in (0, 1000):
        past = D.parse_query(draws, f"--engine sglang --accept 14 --budget 300000 --context {ctx}")
        whys = [c.why for c in D.default_candidates(draws, past, [])]
        assert not [w for w in whys if "longest context" in w], (ctx, whys)
    # a query past it through its context and its tokens, whose tokens alone fit: offered
    # where its last token is the longest position, 262144 - 200001 + 1 = 62144
    both = D.parse_query(draws, "--engine sglang --accept 14 --budget 200000 --context 100000")
    got_both = {c.why: c.describe() for c in D.default_candidates(draws, both, [])}
    assert got_both["the query at the model's longest context"] == (
        "b300 x8 sglang ddtree block 16 budget 200000 M=200001 ctx 62144")
    inside = D.parse_query(draws, "--engine sglang --accept 14 --budget 262143")
    assert "the query itself" in [c.why for c in D.default_candidates(draws, inside, [])]
    # a context within the card whose step's 33 tokens end past it (262140 + 32 = 262172):
    # the query is left out, and offered where its last token is the longest position
    near = D.parse_query(draws, "--engine sglang --accept 14 --context 262140")
    left_out = []
    got = {c.why: c.describe() for c in D.default_candidates(draws, near, left_out)}
    assert "the query itself" in [c.why for c, _ in left_out]
    assert got["the query at the model's longest context"] == (
        "b300 x8 sglang ddtree block 16 budget 32 M=33 ctx 262112")
    assert "AR at the model's longest context" not in got   # (AR at 262140 is within it)


def test_a_candidates_file_tree_past_the_cards_longest_context_is_left_out(tmp_path):
    draws = _kimi_carded_draws()
    path = tmp_path / "c.csv"
    path.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
                    "b300,8,sglang,ddtree,16,300000,14,0\nb300,8,sglang,ddtree,16,64,14,0\n")
    query = D.parse_query(draws, "--engine sglang --accept 14")
    left: list = []
    got = D.read_candidates(draws, path, query, left_out=left)
    assert [c.describe() for c in got] == ["b300 x8 sglang ddtree block 16 budget 64 M=65"]
    assert [c.describe() for c, _ in left] == [
        "b300 x8 sglang ddtree block 16 budget 300000 M=300001"]
    assert "reaching position 300000, above kimi-k2.6's longest, 262144 tokens" in left[0][1]


def test_optimize_names_every_budget_whose_tokens_pass_the_longest_context():
    """`optimize --context 262130 --budgets 8,16,32,64` on Kimi K2.6 (262,144 positions)
    warned of budget 64 alone ("a step verifies 65 tokens after a context of 262130,
    reaching position 262194"), where budgets 16 and 32 pass it too (262130 + 17 - 1 =
    262146, 262162): a budget the warning does not name could be recommended, as one any
    engine runs. Budget 8 reaches 262138 and is not named."""
    draws = _kimi_carded_draws()
    out = D.optimize(draws, curve_of(), hardware="b300", engine="sglang", context_tokens=262130,
                     budgets=(8, 16, 32, 64))
    said = [w for w in out["warnings"] if "above kimi-k2.6's longest" in w]
    assert said == ["budgets 16, 32 and 64 verify 17 to 65 tokens after a context of 262130, "
                    "reaching positions 262146 to 262194, above kimi-k2.6's longest, 262144 "
                    "tokens (its card): no engine runs such a step, and the answer "
                    "extrapolates the step's growth past it"
                    + ("; the recommended budget is one of them"
                       if out["recommended"] != 8 else "")], said
    # every budget past it: the recommendation is one of them, and says so
    out = D.optimize(draws, curve_of(), hardware="b300", engine="sglang", context_tokens=262130,
                     budgets=(16, 32))
    said = [w for w in out["warnings"] if "above kimi-k2.6's longest" in w]
    assert len(said) == 1 and said[0].endswith(
        "; the recommended budget is one of them"), said


def test_the_position_a_step_reaches_is_one_rule():
    """A step's verified tokens take the positions after its context: the last is context + M
    - 1 (core/row_notes.py ``step_reach``), the rule predict's and next's warnings, next's
    longest-context candidates and optimize's line on every budget past the card all count
    with (it was written out in four places)."""
    from ddtree_bayes.core.row_notes import step_reach

    assert step_reach(262130, 65) == 262194 and step_reach(262130, 17) == 262146
    assert step_reach(0, 300001) == 300000 and step_reach(307200, None) == 307200
    assert step_reach(None, 33) == 32   # (no context given: from position 0)


def _copied_workspace(tmp_path, monkeypatch, fitted: str, here: str):
    """A point-mass fit made in workspace A of ``fitted`` (its data and priors hashes), and
    the current directory B, whose data/measurements.csv is ``here``."""
    draws = point_mass_draws()
    a, b = tmp_path / "A", tmp_path / "B"
    for root, text in ((a, fitted), (b, here)):
        (root / "data").mkdir(parents=True)
        (root / "data" / "measurements.csv").write_text(text)
    draws.meta["data"] = {"path": str(a / "data" / "measurements.csv"),
                          "sha256": hashlib.sha256(fitted.encode()).hexdigest()}
    draws.meta["priors"] = {"path": str(bundled("priors.toml")), "sha256": hashlib.sha256(
        bundled("priors.toml").read_bytes()).hexdigest()}
    draws.meta["workdir"] = str(a.resolve())
    monkeypatch.chdir(b)
    return draws, a, b

"""`update`, `history`, `diff` and `track` on real fits: the session fit of the bundled data
plus one refit after a HYPOTHETICAL measurement (a temp copy; the repo's data/ is never
touched). Numbers printed by the CLI are checked against values recomputed from the saved
artifacts."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.core.data import Measurement, parse_row
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine import store
from ddtree_bayes.engine.testing import point_mass_draws
from ddtree_bayes.workflows import living
from test_cli_support import fitted_inputs, refits_seen
from test_cli_support import run_cli as call

NEW_ROW = ["--hardware", "b300", "--engine", "sglang", "--method", "ddtree", "--block", "16",
           "--budget", "32", "--accept", "13.1", "--tok-s", "612", "--source",
           "HYPOTHETICAL test measurement"]
EAGLE = ["--hardware", "rtx-pro-6000", "--engine", "vllm", "--method", "eagle3", "--block", "3",
         "--context", "32k", "--accept", "1.95"]


def copy_work(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    (dst / "data" / "measurements.csv").chmod(0o644)
    return dst


@pytest.fixture(scope="module")
def updated(fitted_workdir, tmp_path_factory):
    """Track two queries, add one hypothetical row, run `update --refit` once (one real refit;
    without --refit this row is absorbed by reweighting: tests/test_update_reweight.py)."""
    work0, first = fitted_workdir
    work = copy_work(work0, tmp_path_factory.mktemp("living") / "w")
    assert call(work, "track", *EAGLE)[0] == 0
    assert call(work, "track", "--hardware", "h200", "--engine", "sglang", "--method", "ar",
                "--accept", "1", "--name", "h200-ar")[0] == 0
    assert call(work, "add", *NEW_ROW)[0] == 0
    code, out, err = call(work, "update", "--quiet", "--refit")
    assert code == 0, err
    return work, first, out


def test_update_scores_the_new_row_against_the_previous_posterior(updated):
    work, first, out = updated
    before = store.load_fit(first.path)
    # independent check of the printed percentile: Monte Carlo over the predictive
    rng = np.random.default_rng(0)
    sc = P.resolve_scenario(before, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=None)
    # the structured step draws the group's own per-node ratio beyond the measured budget
    # (tied_ratio_spread): predict's generator for the question, as score_rows uses it,
    # gives the same step draws
    parts, _ = P.step_components(before, sc, P.keyed_rng(20261130, P.scenario_key(sc)))
    step = parts["step"]
    # the likelihood's sd of this row: run-to-run noise and, for the structured step, the
    # discrepancy at its distance from the measured configurations (M = 33 vs 9)
    sims = 13.1 * 1000 / step * np.exp(parts["log_sd"] * rng.standard_normal((50, step.size)))
    mc = float(np.mean(sims < 612))
    (score,) = living.score_rows(before, [m for m in store.load_fit(
        store.resolve(work / "models")).measurements.rows if m.row == 11], seed=20261130)
    assert score["status"] == "ok" and abs(score["percentile"] - mc) < 0.01
    # 612 sits below the predictive median (about 676, drafter-card rooflines), inside the 90%
    assert 0.1 < score["percentile"] < 0.4
    line = next(x for x in out.splitlines() if x.startswith("row 11"))
    cells = line.split()
    assert cells[2:13] == ["b300", "x8", "sglang", "ddtree", "b16/B32", "M=33", "accept",
                           "13.1", "612", f"{score['median']:.0f}",
                           f"{score['lo50']:.0f}-{score['hi50']:.0f}"]
    assert f"{score['percentile'] * 100:.1f}%" in line and line.endswith("ok")
    assert "1 new measurement, scored against fit " + first.fit_id in out


def test_update_refits_exactly_and_records_its_parent(updated):
    work, first, out = updated
    after = store.load_fit(store.resolve(work / "models"))
    meta = after.meta
    assert meta["fit_id"] != first.fit_id and meta["converged"] is True
    assert meta["data"]["rows"] == 10 and meta["sampler"]["draws"] == 1000
    assert meta["seed"] == 20261130  # the previous fit's seed by default
    assert meta["update"] == {"previous_fit": first.fit_id, "added_rows": [11],
                              "removed_rows": 0, "surprises": [], "other_changes": []}
    assert meta["made_by"] == "refit" and meta["refit_reasons"] == ["--refit"]
    # the update table: which way, the Pareto k (none computed), and why
    assert re.search(r"(?m)^refit\s+-\s+-\s+-\s+--refit$", out), out
    assert after.data_csv == (work / "data" / "measurements.csv").read_text()
    m = re.search(r"fit (\S+): converged; refit took ([0-9.]+) s \(compile ([0-9.]+) s, "
                  r"sampling ([0-9.]+) s\)", out)
    assert m and m.group(1) == meta["fit_id"]
    assert float(m.group(2)) >= float(m.group(3)) + float(m.group(4)) > 0


def test_update_prints_tracked_query_changes(updated):
    work, first, out = updated
    before = store.load_fit(first.path)
    after = store.load_fit(store.resolve(work / "models"))
    changes = living.compare_queries(before, after, living.load_tracked(work / "models"),
                                     seed=20261130, workdir=work)
    lines = [x.strip() for x in out.splitlines()
             if (x.startswith("  ") and ": 90% " in x) or "not predictable" in x]
    assert lines == [living.format_change(c) for c in changes]
    default_sglang = next(c for c in changes if c["name"] == "default"
                          and " sglang " in c["label"])
    assert default_sglang["label"] == "b300 x8 sglang ddtree b16/B32 accept 14"
    b, a = default_sglang["before"], default_sglang["after"]
    # a budget-32 measurement narrows the budget-32 prediction a lot
    assert (a["hi90"] - a["lo90"]) < 0.6 * (b["hi90"] - b["lo90"])
    assert a["lo90"] < 612 / 13.1 * 14 < a["hi90"]
    assert re.search(r"default: b300 x8 sglang ddtree b16/B32 accept 14: 90% \d+-\d+ -> "
                     r"\d+-\d+ tok/s \(median \d+ -> \d+, width -\d+%\)", out)
    eagle = next(c for c in changes if c["name"].startswith("rtx-pro-6000"))
    assert eagle["before"] and eagle["after"]
    # an unmeasured GPU in the hardware table is predicted by hardware transfer, both times
    h200 = next(c for c in changes if c["name"] == "h200-ar")
    assert h200["label"] == "h200 x8 sglang ar accept 1" and h200["before"] and h200["after"]


def test_a_query_no_fit_can_answer_is_reported_not_fatal(updated):
    work, first, _ = updated
    before = store.load_fit(first.path)
    after = store.load_fit(store.resolve(work / "models"))
    q = living.Tracked("gb400-ar", living.normalize_query(
        {"hardware": "gb400", "engine": "sglang", "method": "ar", "accept": "1"}))
    (c,) = living.compare_queries(before, after, [q], seed=1, workdir=work)
    assert c["before"] is None and c["after"] is None
    assert "'gb400' was never measured, nor in the hardware table the fit stored" in c["after_error"]
    assert "fix:" not in c["after_error"]
    assert living.format_change(c).startswith("gb400-ar: gb400-sglang-ar-a1: not predictable (")


def test_update_with_nothing_new_does_not_refit(updated):
    work, _, _ = updated
    n = len(store.fit_files(work / "models"))
    code, out, _ = call(work, "update", "--quiet")
    assert code == 0 and "is up to date" in out and "nothing to refit" in out
    code, out, _ = call(work, "update", "--quiet", "--format", "json")
    assert code == 0 and json.loads(out)["refit"] is None
    assert len(store.fit_files(work / "models")) == n


def test_history_lists_both_fits(updated):
    work, first, _ = updated
    code, out, _ = call(work, "history", "--format", "json")
    assert code == 0
    rows = json.loads(out)["rows"]
    assert [r["rows"] for r in rows] == [9, 10]
    assert rows[0]["fit_id"] == first.fit_id and rows[0]["latest"] is False
    assert rows[1]["latest"] is True and rows[1]["converged"] is True
    assert rows[1]["update"]["previous_fit"] == first.fit_id
    assert rows[0]["data_sha256"] != rows[1]["data_sha256"]
    code, out, _ = call(work, "history")
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["fit", "id", "created", "(UTC)"]
    assert lines[2].startswith(first.fit_id) and " 9 " in lines[2] and "yes" in lines[2]
    assert lines[3].startswith(rows[1]["fit_id"]) and lines[3].endswith(
        f"latest, update of {first.fit_id}: +1/-0 rows, refit")
    assert rows[1]["made_by"] == "refit" and rows[0]["made_by"] is None


def test_history_shows_an_unreadable_fit_instead_of_failing(updated, tmp_path):
    work = copy_work(updated[0], tmp_path / "w")
    (work / "models" / "fits" / "19990101T000000Z-broken.nc").write_bytes(b"not netcdf")
    code, out, _ = call(work, "history")
    assert code == 0 and "19990101T000000Z-broken" in out and "UNREADABLE" in out


def test_diff_parameters_and_tracked_queries(updated):
    work, first, _ = updated
    second = store.resolve(work / "models").stem
    code, out, err = call(work, "diff", first.fit_id, "latest", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert (payload["fit_a"], payload["fit_b"]) == (first.fit_id, second)
    assert [r["row"] for r in payload["added_rows"]] == [11] and payload["removed_rows"] == []
    params = {p["parameter"]: p for p in payload["parameters"]}
    assert not any(name.endswith("_z") or "_z[" in name for name in params)
    b = store.load_fit(store.resolve(work / "models"))
    q = np.quantile(b.variables["spec_tree_ratio"][:, 0], [0.05, 0.5, 0.95])
    p = params["spec_tree_ratio[b300x8/sglang/ddtree]"]
    assert (p["b"]["lo90"], p["b"]["median"], p["b"]["hi90"]) == pytest.approx(tuple(q))
    # budget 8 alone left the B300 group on the population's per-node ratio; with the budget-32
    # row the group has its own (exp of its log ratio, wider than the population's median-tied
    # value). What the row measures lands on the fixed cost and the distinct-expert growth of
    # the MoE term with M (9 -> 33): both narrow
    assert p["width_change"] > 0
    assert params["spec_fixed_ratio[b300x8/sglang/ddtree]"]["width_change"] < -0.2
    assert params["moe_distinct_exponent[b300x8]"]["width_change"] < -0.1
    assert params["step_ar_ms[b300x8]"]["a"]["median"] == pytest.approx(7.5, abs=0.3)
    code, out, _ = call(work, "diff", first.fit_id, second)
    assert code == 0
    assert "  + row 11: b300 x8 sglang ddtree b16/B32 M=33 accept 13.1: 612 tok/s" in out
    assert re.search(r"spec_tree_ratio\[b300x8/sglang/ddtree\]\s+\S+\s+\S+ to \S+\s+\S+\s+\S+ to "
                     r"\S+\s+[-+]\d+%\s+\+\d+%", out)
    assert "default: b300 x8 native ddtree b16/B32 accept 14: 90% " in out
    code, out, _ = call(work, "diff", first.fit_id, second, "--all", "--format", "json")
    assert any(p["parameter"].startswith("moe_z[") for p in json.loads(out)["parameters"])
    code, _, err = call(work, "diff", first.fit_id, "20990101T000000Z-nope")
    assert code == 3 and "no fit '20990101T000000Z-nope'" in err
    code, _, err = call(work, "diff", first.fit_id, "nope")   # not a fit id: bad input
    assert code == 2 and "'nope' is not a fit id" in err


def test_diff_shows_absolute_changes_of_real_line_parameters(tmp_path):
    """`diff` showed `spec_tree_engine[sglang]` 0.00776 -> 0.0194 as "+150%" and
    `spec_fixed_log_mu` -0.409 -> -0.664 as "-63%": a percentage of a log-scale value or an
    effect centred on zero means nothing. Those show B - A, and say so."""
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w", spec_tree_engine=0.00776,
                                   spec_fixed_log_mu=-0.409)
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                         work / "models" / "priors.toml", work / "data" / "hardware.csv",
                         fit_id="20260102T000000Z-pointmsb", step_ar_ms=[10.0],
                         spec_tree_engine=0.0194, spec_fixed_log_mu=-0.664)
    code, out, err = call(work, "diff", "20260101T000000Z-pointmss", "latest",
                          "--format", "json")
    assert code == 0, err
    params = {p["parameter"]: p for p in json.loads(out)["parameters"]}
    engine, log_mu, step = (params[k] for k in ("spec_tree_engine", "spec_fixed_log_mu",
                                                "step_ar_ms[0]"))
    assert (engine["change_scale"], engine["median_change"]) == ("absolute", None)
    assert engine["median_shift"] == pytest.approx(0.0194 - 0.00776)
    assert (log_mu["change_scale"], log_mu["median_change"]) == ("absolute", None)
    assert log_mu["median_shift"] == pytest.approx(-0.664 + 0.409)
    assert (step["change_scale"], step["median_change"]) == ("relative", pytest.approx(0.25))
    assert step["median_shift"] == pytest.approx(2.0)
    # the normal prior of overhead_logit_mu: on the real line; noise_sd's lognormal: positive
    assert params["overhead_logit_mu"]["change_scale"] == "absolute"
    assert params["noise_sd"]["change_scale"] == "relative"
    code, out, err = call(work, "diff", "20260101T000000Z-pointmss", "latest")
    assert code == 0, err
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln[:1].isalpha()}
    assert rows["spec_tree_engine"][-3:] == ["+0.0116", "abs", "-"]
    assert rows["spec_fixed_log_mu"][-3:] == ["-0.255", "abs", "-"]
    assert rows["step_ar_ms[0]"][-2:] == ["+25%", "-"]   # (point masses: no width)
    assert ("median change: 'abs' is B - A for a parameter on the real line (log scale, engine "
            "effect, offset: a percentage of it means nothing), else B vs A in %") in out


def test_reject_surprises_stops_before_refitting(updated, tmp_path):
    work = copy_work(updated[0], tmp_path / "w")
    latest = (work / "models" / "latest.json").read_text()
    n = len(store.fit_files(work / "models"))
    # a GPU the fit's stored hardware table does not know: that row cannot be scored
    hw = work / "data" / "hardware.csv"
    hw.chmod(0o644)
    hw.write_text(hw.read_text() + "gb400,HBM3e,288,8.0,NVLink5 1.8 TB/s,10.3,HYPOTHETICAL\n")
    assert call(work, "add", *[("900" if v == "612" else v) for v in NEW_ROW])[0] == 0
    assert call(work, "add", "--hardware", "gb400", "--gpus", "8", "--engine", "sglang",
                "--method", "ar", "--accept", "1", "--tok-s", "140", "--source",
                "HYPOTHETICAL")[0] == 0
    code, out, err = call(work, "update", "--reject-surprises")
    assert code == 2
    assert "--reject-surprises: row 12 (>99.9%) outside the 1st-99th percentile" in err
    assert "nothing refitted" in err and err.count("\n") == 1
    assert re.search(r"row 12 .* 900 .* >99\.9%\s+SURPRISE \(above the 99th percentile\)", out)
    assert re.search(r"row 13 .* 140 .* cannot score", out)
    assert "row 13: fit " in out and "cannot predict it (hardware 'gb400' is neither measured" in out
    assert "possible regime change" in out
    assert "changed since fit" in out and "hardware table" in out
    assert (work / "models" / "latest.json").read_text() == latest
    assert len(store.fit_files(work / "models")) == n
    code, out, _ = call(work, "update", "--reject-surprises", "--format", "json")
    payload = json.loads(out)
    assert code == 2 and payload["rejected"] is True and payload["surprises"] == 1
    assert [s["status"] for s in payload["new_rows"]] == ["surprise", "unpredictable"]
    assert payload["new_rows"][0]["percentile"] > 0.999


def test_a_new_system_is_scored_by_transfer(updated):
    work, first, _ = updated
    before = store.load_fit(first.path)
    hw = {"h200": {}}
    row = parse_row("t", 12, {"model": "kimi-k2.6", "hardware": "h200", "gpus": "8",
                              "engine": "sglang", "method": "ar", "accept_len": "1",
                              "tok_s": "95", "source": "HYPOTHETICAL"}, hw)
    (score,) = living.score_rows(before, [row], seed=3)
    assert score["transferred"] is True and score["status"] in ("ok", "surprise")
    assert 0 < score["percentile"] < 1 and score["lo90"] < score["median"] < score["hi90"]
    assert score["overhead_from"].startswith("h200x8 not measured: transferred from ")
    # wider than the measured B300 AR row's interval
    b300 = parse_row("t", 13, {"model": "kimi-k2.6", "hardware": "b300", "gpus": "8",
                               "engine": "sglang", "method": "ar", "accept_len": "1",
                               "tok_s": "133", "source": "x"}, {"b300": {}})
    (ref,) = living.score_rows(before, [b300], seed=3)
    assert ref["transferred"] is False
    assert (score["hi90"] / score["lo90"]) > 1.5 * (ref["hi90"] / ref["lo90"])


def test_update_validates_hand_edits_and_needs_a_fit(updated, tmp_path):
    work = copy_work(updated[0], tmp_path / "w")
    n = len(store.fit_files(work / "models"))
    assert call(work, "add", *[("650" if v == "612" else v) for v in NEW_ROW])[0] == 0
    tracked = work / "models" / "tracked.json"
    good = tracked.read_text()
    tracked.write_text(good[:-10])  # a hand edit gone wrong: refused before any refit
    code, out, err = call(work, "update")
    assert code == 2 and out == "" and "tracked.json: cannot read tracked queries" in err
    assert len(store.fit_files(work / "models")) == n
    tracked.write_text(good)
    path = work / "data" / "measurements.csv"
    path.write_text(path.read_text() + "kimi-k2.6,b300,8,sglang,ar,,,1,2,,140,hand edit,\n")
    code, out, err = call(work, "update")
    assert code == 2 and out == ""
    assert "row 13, column 'accept_len': autoregressive rows emit 1 token per step" in err
    shutil.rmtree(work / "models" / "fits")
    (work / "models" / "latest.json").unlink()
    code, _, err = call(work, "update")
    assert code == 3 and "run `ddtree-bayes fit` first" in err


def test_score_rows_percentile_is_exact_on_a_point_mass():
    """Point mass: B300 DDTree budget 32 at accept 12 predicts 600 tok/s; with noise_sd 0.1
    a measurement at 600 * exp(0.1 z) sits at the Phi(z) percentile exactly."""
    draws = point_mass_draws(noise_sd=0.1)
    hw = {"b300": {}}
    rows = []
    for i, z in enumerate((-2.5, 0.0, 1.0, 2.5)):
        values = {"model": "kimi-k2.6", "hardware": "b300", "gpus": "8", "engine": "sglang",
                  "method": "ddtree", "block": "16", "budget": "32", "verify_tokens": "",
                  "accept_len": "12", "context_tokens": "", "tok_s": str(600 * math.exp(0.1 * z)),
                  "source": "t", "notes": ""}
        rows.append(parse_row("t", i + 2, values, hw))
    # a GPU the fit's stored hardware table does not have: unpredictable, not a crash
    rows.append(parse_row("t", 9, {**values, "hardware": "gb400", "method": "ar", "block": "",
                                   "budget": "", "accept_len": "1"}, {"gb400": {}}))
    scores = living.score_rows(draws, rows, seed=1)
    phi = [0.5 * math.erfc(-z / math.sqrt(2)) for z in (-2.5, 0.0, 1.0, 2.5)]
    assert [s["percentile"] for s in scores[:4]] == pytest.approx(phi, abs=1e-9)
    assert [s["status"] for s in scores] == ["surprise", "ok", "ok", "surprise",
                                            "unpredictable"]
    assert scores[1]["median"] == pytest.approx(600, rel=0.02)
    assert "'gb400' is neither measured" in scores[4]["reason"]
    assert "fix:" not in scores[4]["reason"]
    assert living.format_percentile(phi[0]) == "0.6%" and living.format_percentile(1e-9) == "<0.1%"


def _m(row: int, tok_s: float, notes: str = "") -> Measurement:
    return Measurement(row=row, model="m", hardware="b300", gpus=8, engine="sglang",
                       method="ar", block=None, budget=None, verify_tokens=1, accept_len=1.0,
                       context_tokens=None, tok_s=tok_s, source="s", notes=notes)


def test_changed_rows_matches_by_content_not_row_number():
    from ddtree_bayes.core.data import Measurements

    old = Measurements("a", "", (_m(2, 130), _m(3, 131), _m(4, 132)))
    # row 3 deleted (rows shift up), 132 edited to 133, a new row at the end
    new = Measurements("b", "", (_m(2, 130), _m(3, 133), _m(4, 140)))
    added, removed = living.changed_rows(old, new)
    assert [m.tok_s for m in added] == [133, 140] and [m.tok_s for m in removed] == [131, 132]
    # a true repeat (same values, different notes) is new
    added, _ = living.changed_rows(old, Measurements("c", "", (*old.rows, _m(5, 130, "repeat"))))
    assert [m.row for m in added] == [5]


# ---------------------------------------------------------------- track
@pytest.fixture
def models_dir(tmp_path):
    work = tmp_path / "w"
    (work / "data").mkdir(parents=True)
    shutil.copy(bundled("hardware.csv"), work / "data" / "hardware.csv")
    return work


def test_track_add_list_remove(models_dir):
    work = models_dir
    code, out, _ = call(work, "track", *EAGLE)
    assert code == 0 and "tracking rtx-pro-6000-vllm-eagle3-b3-ctx32k-a1.95" in out
    assert "no fit yet" in out
    code, _, _ = call(work, "track", "add", "--engine", "native", "--accept", "12:16",
                      "--name", "native-range")
    assert code == 0
    code, out, _ = call(work, "track", "list", "--format", "json")
    rows = json.loads(out)["rows"]
    assert [r["name"] for r in rows] == ["default", "rtx-pro-6000-vllm-eagle3-b3-ctx32k-a1.95",
                                         "native-range"]
    assert rows[0]["builtin"] is True and rows[0]["query"] == {"accept": "14"}
    assert rows[1]["query"] == {"hardware": "rtx-pro-6000", "gpus": None, "engine": "vllm",
                                "method": "eagle3", "block": 3, "budget": None,
                                "verify_tokens": None, "context": "32k", "accept": "1.95"}
    saved = json.loads((work / "models" / "tracked.json").read_text())
    assert [q["name"] for q in saved["queries"]] == [r["name"] for r in rows[1:]]
    code, out, _ = call(work, "track", "list")
    assert out.splitlines()[2].startswith("default") and "built in" in out
    code, out, _ = call(work, "track", "remove", "native-range")
    assert code == 0 and "no longer tracking native-range" in out
    assert [t.name for t in living.load_tracked(work / "models")] == [
        "default", "rtx-pro-6000-vllm-eagle3-b3-ctx32k-a1.95"]


@pytest.mark.parametrize("argv, message", [
    (["track", *EAGLE], "already tracked as 'rtx-pro-6000-vllm-eagle3-b3-ctx32k-a1.95'"),
    (["track", "--accept", "13", "--name", "default"], "'default' is built in"),
    (["track", "remove", "default"], "the default query is built in"),
    (["track", "remove", "nope"], "no tracked query called 'nope'"),
    (["track", "--accept", "twelve"], "argument --accept: 'twelve' is not a number"),
    (["track", "--hardware", "a100", "--accept", "1"], "unknown hardware 'a100'"),
    (["track", "--engine", "SGLang"], "argument --engine: 'SGLang' is not a name (lowercase"),
    (["track", "list", "--accept", "3"], "`track list` takes no query flags"),
    # saved (exit 0) before, "`update` and `diff` show it once a fit can": no fit ever can
    # (a model is a card's name, lowercase, as add and fit refuse 'Kimi-K2.6')
    (["track", "--model", "Kimi-K2.6", "--accept", "14"],
     "--model 'Kimi-K2.6' is not a lowercase name (fix: write it in lowercase, e.g. "
     "'kimi-k2.6')"),
])
def test_track_refuses_bad_requests(models_dir, argv, message):
    work = models_dir
    assert call(work, "track", *EAGLE)[0] == 0
    before = (work / "models" / "tracked.json").read_text()
    code, out, err = call(work, *argv)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert (work / "models" / "tracked.json").read_text() == before


def test_track_warns_of_names_the_fit_never_saw(tmp_path):
    """`track --engine sglnag` saved the typo and printed its interval (drawn from the pooled
    population) with nothing on stderr, where `predict` asking the same warns; now `track`
    says what predict says, on stderr, and still saves the query (a name is a warning, as
    in predict)."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    _, _, warned = call(work, "predict", "--engine", "sglnag", "--accept", "14")
    line = next(x for x in warned.splitlines() if "'sglnag'" in x)
    assert line.startswith("ddtree-bayes: warning: --engine 'sglnag' was never measured")
    assert "did you mean sglang?" in line
    for fmt in ("table", "json"):
        name = f"typo-{fmt}"
        code, out, err = call(work, "track", "--engine", "sglnag", "--accept", f"1{len(fmt)}",
                              "--name", name, "--format", fmt)
        assert code == 0 and line in err.splitlines(), err
        assert name in (work / "models" / "tracked.json").read_text()
    # a known name at the measured budget 8: nothing on stderr
    code, _, err = call(work, "track", "--engine", "sglang", "--block", "8", "--budget", "8",
                        "--accept", "4")
    assert code == 0 and err == ""


def test_context_labels_keep_every_digit(tmp_path):
    """A context of a million tokens or more was labelled with 6 significant digits:
    `track --context 1m` printed "ctx 1.04858e+06" (1,048,580) for 1,048,576 tokens, in
    track, update and diff; the fit's check, report and validate printed "ctx=1.04858e+06"."""
    from ddtree_bayes.core.data import config_label
    from test_cli_support import make_point_mass_workdir

    assert config_label("b300x8", "sglang", "ar", 1, 1048576.0) == "b300x8 sglang ar M=1 ctx=1048576"
    assert config_label("b300x8", "sglang", "ar", 1, 2500000.0, 4) == (
        "b300x8 sglang ar M=1 ctx=2500000 C=4")
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, _ = call(work, "track", "--engine", "sglang", "--accept", "14", "--context", "1m")
    assert code == 0 and "b300 x8 sglang ddtree b16/B32 ctx 1048576 accept 14: median" in out, out
    code, out, _ = call(work, "track", "--engine", "sglang", "--accept", "14", "--context",
                        "2500000", "--format", "json")
    assert code == 0
    assert json.loads(out)["now"]["rows"][0]["label"] == (
        "b300 x8 sglang ddtree b16/B32 ctx 2500000 accept 14")


def test_a_querys_kv_cache_is_in_its_labels(tmp_path):
    """Two tracked queries differing only in --kv-cache were labelled alike in track's now
    line and in diff's (and update's) lines: "b300 x8 sglang ddtree b16/B32 ctx 32768
    accept 14" for both. The label names the cache's dtype when the query gives one."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    flags = ("track", "--engine", "sglang", "--accept", "14", "--context", "32k")
    code, out, err = call(work, *flags, "--name", "plain")
    assert code == 0, err
    assert "  now (fit 20260101T000000Z-pointmss): b300 x8 sglang ddtree b16/B32 ctx 32768 " \
        "accept 14: median" in out
    code, out, err = call(work, *flags, "--kv-cache", "fp8", "--name", "fp8")
    assert code == 0, err
    assert "  now (fit 20260101T000000Z-pointmss): b300 x8 sglang ddtree b16/B32 ctx 32768 " \
        "kv-cache fp8 accept 14: median" in out
    code, out, err = call(work, *flags, "--kv-cache", "q8_0", "--name", "q8", "--format", "json")
    assert code == 0 and json.loads(out)["now"]["rows"][0]["label"] == (
        "b300 x8 sglang ddtree b16/B32 ctx 32768 kv-cache q8_0 accept 14"), err
    code, out, err = call(work, "diff", "latest", "latest")
    assert code == 0, err
    lines = [ln.split(": 90% ")[0] for ln in out.splitlines()
             if ln.startswith(("  plain: ", "  fp8: ", "  q8: "))]
    assert lines == ["  plain: b300 x8 sglang ddtree b16/B32 ctx 32768 accept 14",
                     "  fp8: b300 x8 sglang ddtree b16/B32 ctx 32768 kv-cache fp8 accept 14",
                     "  q8: b300 x8 sglang ddtree b16/B32 ctx 32768 kv-cache q8_0 accept 14"]


def test_tracked_query_rates_below_one_keep_their_digits(tmp_path):
    """diff's and update's tracked-query lines, and track's now line, printed tok/s as whole
    numbers: a rate below 1 read "90% 0-0 -> 0-0 tok/s (median 0 -> 0)" where predict prints
    0.5 (cli/output.tok_text). An AR step at context 64k (1 unit) with 2000 ms per unit takes
    8 + 2000 ms: 1000 / 2008 = 0.498 tok/s."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w", ctx_ms_per_unit=[2000.0])
    code, out, err = call(work, "track", "--name", "slow", "--method", "ar", "--engine",
                          "sglang", "--context", "64k")
    assert code == 0, err
    assert ("  now (fit 20260101T000000Z-pointmss): b300 x8 sglang ar ctx 65536 accept 1: "
            "median 0.50, 90% 0.50-0.50 tok/s") in out.splitlines()
    code, out, err = call(work, "diff", "latest", "latest")
    assert code == 0, err
    assert ("  slow: b300 x8 sglang ar ctx 65536 accept 1: 90% 0.50-0.50 -> 0.50-0.50 tok/s "
            "(median 0.50 -> 0.50, width n/a)") in out.splitlines()
    c = {"name": "q", "label": "L", "before": {"median": 0.5, "lo90": 0.4, "hi90": 0.6},
         "after": {"median": 0.55, "lo90": 0.5, "hi90": 0.6}}
    assert living.format_change(c) == ("q: L: 90% 0.40-0.60 -> 0.50-0.60 tok/s (median 0.50 "
                                       "-> 0.55, width -50%)")
    c = {**c, "after": {"median": 612.4, "lo90": 580.2, "hi90": 640.7}}
    assert living.format_change(c) == ("q: L: 90% 0.40-0.60 -> 580-641 tok/s (median 0.50 -> "
                                       "612, width +30150%)")


def test_track_list_describes_the_fits_own_default_question(models_dir, tmp_path):
    """An audit: a fit of RTX PRO 6000 rows only (vLLM EAGLE-3 block 3, accept 1.948 and 1.927
    measured) asks its own default question, vllm eagle3 at their mean 1.9375 (update answered
    it so), but `track list` described the built-in query as "--accept 14 (default scenario,
    sglang and native)", the bundled question's. It now says the latest fit's, as asked."""
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    code, out, _ = call(models_dir, "track", "list")   # no fit yet: nothing to say which
    assert code == 0 and out.splitlines()[2] == (
        "default  --accept 14 (the latest fit's default question; no fit yet)  built in")
    bundled_fit = make_point_mass_workdir(tmp_path / "b300")   # (it measured B300)
    code, out, _ = call(bundled_fit, "track", "list")
    assert code == 0 and out.splitlines()[2] == (
        "default  --accept 14 (default question: sglang,native ddtree block 16 budget 32 on "
        "b300)  built in")
    work = tmp_path / "rtx"
    (work / "models").mkdir(parents=True)
    shutil.copytree(models_dir / "data", work / "data")
    lines = bundled("measurements.csv").read_text().splitlines(keepends=True)
    data = work / "data" / "measurements.csv"
    data.write_text(lines[0] + "".join(ln for ln in lines[1:] if ",rtx-pro-6000," in ln))
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    draws = point_mass_draws(n=16)   # (a fit of those rows: its one system theirs)
    draws.meta["coords"].update({"system": ["rtx-pro-6000x8"],
                                 "overhead_group": ["rtx-pro-6000x8/vllm/eagle3"]})
    write_point_mass_fit(work / "models", data, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv", draws=draws)
    code, out, _ = call(work, "track", "list")
    # (1.948 + 1.927) / 2 = 1.9375, every digit: the flags it asks (predict's own mean)
    assert code == 0 and out.splitlines()[2] == (
        "default  --accept 1.9375 (default question: vllm eagle3 block 3 budget 3 on "
        "rtx-pro-6000 x8)  built in")


def test_diff_labels_every_vector_parameter_by_its_coordinate(tmp_path):
    """An audit: `diff` of two fits of one user's vLLM EAGLE-3 rows printed
    `spec_fixed_engine[0]`: a parameter missing from the stored diagnostics (a constant one:
    one engine's effect) was labelled by the coordinate of its length, and with the engine,
    relation, system and overhead group all of length 1 no coordinate was the one: its index
    was printed. The artifact names each variable's dimension (netCDF dimension scales, as
    xarray writes them): every label is its coordinate's."""

    from test_cli_support import write_point_mass_fit

    work = tmp_path / "w"
    (work / "models").mkdir(parents=True)
    shutil.copytree(bundled("hardware.csv").parent, work / "data", dirs_exist_ok=True,
                    ignore=lambda *_: ["measurements.csv"])
    lines = bundled("measurements.csv").read_text().splitlines(keepends=True)
    data = work / "data" / "measurements.csv"
    data.write_text(lines[0] + "".join(ln for ln in lines[1:] if ",rtx-pro-6000," in ln))
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    coords = {"system": ["rtx-pro-6000x8"], "overhead_group": ["rtx-pro-6000x8/vllm/eagle3"],
              "relation": ["native"], "engine": ["vllm"]}
    dims = {**dict.fromkeys(("step_ar_ms", "moe_share", "moe_slope", "moe_exponent",
                             "ctx_ms_per_unit"), "system"),
            "reduction": "relation", "spec_fixed_engine": "engine",
            "overhead_frac": "overhead_group"}
    draws = point_mass_draws(n=16, spec_fixed_engine=[0.0])
    draws.meta["coords"] = coords
    path = write_point_mass_fit(work / "models", data, work / "models" / "priors.toml",
                                work / "data" / "hardware.csv", draws=draws)
    _attach_dims(path, coords, dims)   # (the scales xarray's netCDF writer attaches)
    code, out, err = call(work, "diff", "latest", "latest", "--format", "json")
    assert code == 0, err
    names = [p["parameter"] for p in json.loads(out)["parameters"]]
    assert [n for n in names if "[" in n] == [
        "ctx_ms_per_unit[rtx-pro-6000x8]", "moe_exponent[rtx-pro-6000x8]",
        "moe_share[rtx-pro-6000x8]", "moe_slope[rtx-pro-6000x8]",
        "overhead_frac[rtx-pro-6000x8/vllm/eagle3]", "reduction[native]",
        "spec_fixed_engine[vllm]", "step_ar_ms[rtx-pro-6000x8]"]
    code, out, err = call(work, "diff", "latest", "latest")
    assert code == 0 and "spec_fixed_engine[vllm] " in out and "[0]" not in out, out


def test_malformed_tracked_file_is_named(models_dir):
    work = models_dir
    (work / "models").mkdir()
    (work / "models" / "tracked.json").write_text("{not json")
    code, _, err = call(work, "track", "list")
    assert code == 2 and "tracked.json: cannot read tracked queries" in err


def test_update_refits_with_the_previous_fits_settings(updated, tmp_path, monkeypatch):
    """The refit keeps the latest fit's sampler settings, seed and MoE form (here a fit whose
    metadata says 2 chains / seed 7, of the roofline form, while the priors file here now
    says linear), unless flags say otherwise. (The form was once edited into the fit's
    metadata; a form its draws do not hold is an edited fit, refused since b11ca15.)"""
    import h5py

    from ddtree_bayes.core.paths import bundled

    work = copy_work(updated[0], tmp_path / "w")
    path = store.resolve(work / "models")
    with h5py.File(path, "r+") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        assert meta["model"]["moe_form"] == "roofline"
        meta["sampler"].update(chains=2, draws=300, tune=200)
        meta["seed"] = 7
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    priors = bundled("priors.toml").read_text()
    assert priors.count('\nmoe_form = "roofline"') == 1   # (the [model] key; a comment too)
    (work / "models" / "priors.toml").write_text(
        priors.replace('\nmoe_form = "roofline"', '\nmoe_form = "linear"'))
    seen = refits_seen(monkeypatch)
    code, out, err = call(work, "update", "--force")
    assert code == 130 and "MoE form roofline as in fit" in out, err
    assert "(the priors file says linear; --moe-form chooses)" in out
    assert {k: seen[0][k] for k in ("moe_form", "chains", "draws", "tune", "seed")} == {
        "moe_form": "roofline", "chains": 2, "draws": 300, "tune": 200, "seed": 7}
    assert seen[0]["extra_meta"]["update"]["previous_fit"] == meta["fit_id"]
    call(work, "update", "--force", "--moe-form", "power", "--draws", "500", "--seed", "3")
    assert {k: seen[1][k] for k in ("moe_form", "draws", "seed")} == {
        "moe_form": "power", "draws": 500, "seed": 3}


@pytest.mark.parametrize("shape", [("--budget", "3"), ("--verify-tokens", "4"),
                                   ("--budget", "3", "--verify-tokens", "4")])
def test_track_add_refuses_a_tracked_query_written_another_way(models_dir, shape):
    """EAGLE-3 block 3 with its budget blank is a chain of depth 3 verifying 4 tokens
    (core.methods.shaped_budget): `track add ... --budget 3` was saved as a second query."""
    assert call(models_dir, "track", *EAGLE)[0] == 0
    code, _, err = call(models_dir, "track", *EAGLE, *shape, "--name", "again")
    assert code == 2
    assert "this query is already tracked as 'rtx-pro-6000-vllm-eagle3-b3-ctx32k-a1.95'" in err
    assert [t.name for t in living.load_tracked(models_dir / "models")] == [
        "default", "rtx-pro-6000-vllm-eagle3-b3-ctx32k-a1.95"]
    # another budget is another query
    code, _, err = call(models_dir, "track", *EAGLE[:-2], "--budget", "2", "--accept", "1.9")
    assert code == 0, err


def test_track_add_refuses_verify_tokens_that_are_not_the_budgets(models_dir):
    """`track add --budget 32 --verify-tokens 500` was saved, to be reported as a question
    'the latest fit cannot answer yet' forever."""
    code, out, err = call(models_dir, "track", "add", "--budget", "32", "--verify-tokens", "500",
                          "--accept", "14")
    assert code == 2 and "a budget of 32 draft tokens is verified as 33 tokens per step, not " \
                         "500" in err
    code, out, err = call(models_dir, "track", "add", "--block", "8", "--verify-tokens", "9",
                          "--accept", "4")
    assert code == 0, err


@pytest.mark.parametrize("flags, reason", [
    (("--draws", "500"), "--draws given (sampler settings are for a refit)"),
    (("--step-form", "fraction"), "--step-form fraction (fit 20260101T000000Z-pointmss is None)"),
])
def test_a_refit_flag_refits_a_fit_that_is_up_to_date(tmp_path, monkeypatch, flags, reason):
    """`update --draws 500` (or another --moe-form/--step-form, as --help says: "giving it
    refits") on an up-to-date fit said "nothing to refit" and ignored the flag."""
    from ddtree_bayes.engine import inference
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))  # up to date
    seen = refits_seen(monkeypatch)
    code, out, _ = call(work, "update")
    assert code == 0 and "nothing to refit" in out and seen == []
    code, out, _ = call(work, "update", *flags)
    assert code == 130 and len(seen) == 1
    assert seen[0]["extra_meta"]["refit_reasons"] == [reason]
    assert "MoE form linear as in fit 20260101T000000Z-pointmss (the priors file says " \
           "roofline; --moe-form chooses)" in out.splitlines()
    if "--step-form" in flags:   # (it said "as in fit <id>", which had no step form)
        assert "step form fraction from --step-form (the priors file says structured; " \
               "--step-form chooses)" in out.splitlines()


def test_history_marks_a_fit_of_another_format_version_unreadable(tmp_path):
    """history listed a fit of another artifact format as readable and converged, where
    predict, diff and update refuse it (exit 3)."""
    import h5py

    from test_cli_support import FIT_ID, make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    with h5py.File(path, "r+") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        meta["format_version"] = store.FORMAT_VERSION + 1
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    error = (f"{path} has format version {store.FORMAT_VERSION + 1}, this ddtree-bayes reads "
             f"{store.FORMAT_VERSION} (fix: re-run `ddtree-bayes fit`)")
    code, out, _ = call(work, "history", "--format", "json")
    (row,) = json.loads(out)["rows"]
    assert code == 0 and (row["fit_id"], row["readable"], row["error"]) == (FIT_ID, False, error)
    code, out, err = call(work, "predict", "--accept", "14")
    assert (code, out, err) == (3, "", f"ddtree-bayes: error: {error}\n")
    # the table says latest too (it said only UNREADABLE while the JSON said latest: true)
    code, out, _ = call(work, "history")
    assert code == 0 and out.splitlines()[-1].split(None, 6) == [
        FIT_ID, "-", "-", "-", "-", "-", f"latest, UNREADABLE: {error}"]


def test_track_says_the_latest_fit_is_unreadable_not_that_there_is_none(tmp_path):
    """`track` with a latest fit it cannot read said "no fit yet"."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    path.write_bytes(b"not netcdf")
    code, out, _ = call(work, "track", "--accept", "13", "--format", "json")
    note = json.loads(out)["now"]["note"]
    assert code == 0 and note.startswith(f"the latest fit cannot be read ({path} is not a "
                                         "readable ddtree-bayes fit (")
    assert note.endswith("; `ddtree-bayes update` and `diff` show it once a fit can")
    (work / "models" / store.LATEST).unlink()
    code, out, _ = call(work, "track", "--accept", "12", "--format", "json")
    assert json.loads(out)["now"]["note"] == (
        "no fit yet: `ddtree-bayes update` and `diff` will show it")


def test_a_transferred_rows_note_closes_its_parenthesis(tmp_path, monkeypatch):
    """The note under a row scored by transfer cut the transfer text at its first ';',
    inside its parenthesis when the roofline form adds a clause there: "... (same
    interconnect class, bandwidth ratio 1.67: a wide interval; ..." (the bundled fit's
    text, put in the point-mass fit's score: its linear form has no such clause)."""
    from ddtree_bayes import api
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    assert call(work, "add", "--hardware", "h200", "--gpus", "8", "--engine", "sglang",
                "--method", "ar", "--accept", "1", "--tok-s", "100", "--source", "t")[0] == 0
    real = living.score_rows

    def score_rows(*args, **kwargs):
        scores = real(*args, **kwargs)
        assert scores[0]["transferred"]
        scores[0]["overhead_from"] = (
            "h200x8 not measured: transferred from b300x8 (same interconnect class, bandwidth "
            "ratio 1.67; reading the weights at the full bandwidth is 3% of the measured step "
            "and scales with the bandwidth); autoregressive")
        return scores

    def fake_fit(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(living, "score_rows", score_rows)
    monkeypatch.setattr(api, "fit", fake_fit)
    code, out, _ = call(work, "update")
    assert code == 130 and (
        "  row 4: h200x8 not measured: transferred from b300x8 (same interconnect class, "
        "bandwidth ratio 1.67): a wide interval; the refit will be the first to include this "
        "system") in out.splitlines()


@pytest.mark.parametrize("query, message", [
    ({"gpus": True}, "gpus True is not a whole number from 1 to 1024"),
    ({"gpus": 10**9}, "gpus 1000000000 is not a whole number from 1 to 1024"),
    ({"budget": 0}, "budget 0 is not a whole number from 1 to 1000000"),
    ({"block": 2.5}, "block 2.5 is not a whole number from 1 to 4096"),
])
def test_a_tracked_query_takes_the_bounds_of_every_question(query, message):
    """normalize_query checked ``isinstance(value, int) and value >= 1``: gpus=True (a bool
    is an int) and gpus=10**9 were saved as queries predict refuses."""
    with pytest.raises(QueryError, match=re.escape(message)):
        living.normalize_query({**query, "accept": "14"})


def test_a_hand_edited_tracked_query_is_checked_as_track_add_checks_it(tmp_path):
    """A trust pass: ``{"engine": "SGLANG", "accept": "14"}`` written into tracked.json by
    hand was answered by update and diff from the pooled population (90% 463-997 on the
    bundled fit), where predict and track refuse the name; now every command reading the
    file refuses it in one line naming the file and the query (nothing written), and `track
    remove` still removes it. A name predict only warns of is warned of, query named."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    path = work / "models" / "tracked.json"
    entry = {"name": "shout", "query": {"engine": "SGLANG", "accept": "14"}, "added_utc": None}
    path.write_text(json.dumps({"version": 1, "queries": [entry]}))
    for argv in (["diff", "latest", "latest"], ["update"], ["track", "list"],
                 ["track", "--engine", "sglang", "--accept", "13"]):
        code, out, err = call(work, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, out, err)
        assert err.startswith(f"ddtree-bayes: error: {path}: tracked query 'shout': --engine "
                              "'SGLANG' is not a lowercase name (fix: in tracked.json, write it "
                              "in lowercase, e.g. 'sglang'; or `ddtree-bayes track remove "
                              "shout` and track it again)"), err
    assert len(list((work / "models" / "fits").glob("*"))) == 1   # update refitted nothing
    code, out, _ = call(work, "track", "remove", "shout")
    assert code == 0 and json.loads(path.read_text())["queries"] == []
    # a name predict warns of (never measured): diff warns of it too, naming the query
    typo = {"name": "typo", "query": {"engine": "sglnag", "accept": "14"}, "added_utc": None}
    path.write_text(json.dumps({"version": 1, "queries": [typo]}))
    code, out, err = call(work, "diff", "latest", "latest")
    assert code == 0 and "  typo: b300 x8 sglnag ddtree b16/B32 accept 14: 90% " in out
    assert ("ddtree-bayes: warning: tracked query 'typo': --engine 'sglnag' was never measured"
            in err) and err.count("tracked query 'typo': --engine") == 1, err


@pytest.mark.parametrize(("query", "line"), [
    # a misspelt key was dropped: the default question (sglang and native) was answered
    ({"engnie": "vllm", "accept": "14"}, "tracked query 'typo': unknown key 'engnie' (fix: in "
     "tracked.json, use the keys hardware, gpus, engine, method, block, budget, verify_tokens, "
     "context, accept, model, kv_cache, drafter, new_deployment; or `ddtree-bayes track remove "
     "typo` and track it again)"),
    # predict and track refuse --hardware B300 at the flag; read here it was unpredictable later
    ({"hardware": "B300", "accept": "14"}, "tracked query 'typo': --hardware 'B300' is not a "
     "lowercase name"),
])
def test_a_hand_edited_tracked_query_with_a_wrong_key_or_name_is_refused(tmp_path, query, line):
    """A review: after tracked.json was checked on read, a key it does not know still passed
    (dropped without a word) and so did a hardware name predict refuses."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    path = work / "models" / "tracked.json"
    path.write_text(json.dumps({"version": 1, "queries": [
        {"name": "typo", "query": query, "added_utc": None}]}))
    code, out, err = call(work, "diff", "latest", "latest")
    assert code == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert err.startswith(f"ddtree-bayes: error: {path}: {line}"), err
    code, out, _ = call(work, "track", "remove", "typo")
    assert code == 0 and json.loads(path.read_text())["queries"] == []


def test_a_new_row_is_scored_with_predicts_draws():
    """A trust pass: `update` scored a new B300 DDTree row at C = 4, accept 12, at a median of
    1760 (90% 1115-2544) where `predict --accept 12 --concurrency 4 --engine sglang` says a
    total of 1770 (1116-2524) for the same fit and seed: score_rows drew every row from one
    generator in turn, predict from one keyed by the question. Now each row's predicted
    figures are predict's, digit for digit, whatever rows come before it."""
    draws = point_mass_draws(n=400, noise_sd=0.05)
    hw = {"b300": {}}
    rows = [parse_row("t", 10 + c, {"model": "kimi-k2.6", "hardware": "b300", "gpus": "8",
                                    "engine": "sglang", "method": "ddtree", "block": "16",
                                    "budget": "32", "accept_len": "12", "concurrency": str(c),
                                    "tok_s": str(600 * c), "source": "HYPOTHETICAL"}, hw)
            for c in (1, 4)]
    scores = living.score_rows(draws, rows, seed=7)
    asked = P.predict(draws, model="kimi-k2.6", accept="12", engines=["sglang"],
                      concurrency=[1, 4], seed=7)
    for score, r in zip(scores, asked, strict=True):
        assert {k: score[k] for k in ("median", "lo50", "hi50", "lo90", "hi90")} == r["total"]
    # the draws are not one generator's in turn: the C = 4 row alone scores the same
    (alone,) = living.score_rows(draws, rows[1:], seed=7)
    assert alone["median"] == scores[1]["median"] and alone["lo90"] == scores[1]["lo90"]


def test_history_lists_an_unreadable_fit_by_the_time_its_id_carries(tmp_path):
    """history is "oldest first", but an unreadable fit (no metadata, so no created_utc) was
    listed first even when it is the newest: it sorted as the empty time. Its id carries its
    time (engine/store.py id_time): 2999 comes after the point mass's 2026, 1999
    before it."""
    from test_cli_support import FIT_ID, make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    for stem in ("29990101T000000Z-broken", "19990101T000000Z-broken"):
        (work / "models" / "fits" / f"{stem}.nc").write_bytes(b"not netcdf")
    rows = living.list_fits(work / "models")
    assert [(r["fit_id"], r["readable"]) for r in rows] == [
        ("19990101T000000Z-broken", False), (FIT_ID, True), ("29990101T000000Z-broken", False)]
    code, out, _ = call(work, "history")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[2:]] == [
        "19990101T000000Z-broken", FIT_ID, "29990101T000000Z-broken"]


def test_update_without_data_refuses_to_leave_the_file_the_fit_was_made_on(tmp_path,
                                                                          monkeypatch):
    """`fit --data mine.csv`, `add --data mine.csv ...`, then `update` (as predict's "mine.csv
    changed since fit ...; run `ddtree-bayes update`" says) read the default file instead:
    with no data/measurements.csv here, the bundled Kimi K2.6 rows. It scored them as 9 new
    rows of another model, called the fit's own rows removed, refitted the bundled data and
    made that the latest fit, exit 0; the row added to mine.csv was never used."""
    from ddtree_bayes.engine import inference
    from test_cli_support import listing, make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    mine = work / "mine.csv"
    (work / "data" / "measurements.csv").rename(mine)
    write_point_mass_fit(work / "models", mine, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv")
    before = listing(work)
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert err == (f"ddtree-bayes: error: fit 20260101T000000Z-pointmss was made on mine.csv, "
                   f"but `update` without --data reads {bundled('measurements.csv')} (no "
                   "data/measurements.csv here: the bundled data) (fix: pass --data mine.csv to "
                   "fold in that file's new rows, or --data "
                   f"{bundled('measurements.csv')} to refit on the other file)\n")
    assert listing(work) == before   # nothing written: no refit, latest.json unchanged
    # --data names the file: the question is the fit's own file again (up to date here)
    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))
    code, out, err = call(work, "update", "--data", "mine.csv")
    assert code == 0 and "nothing to refit" in out, err


def test_predicts_stale_data_hint_names_the_file_update_needs(tmp_path):
    """s45b finding 11: predict on a fit of `fit --data mine.csv` whose file had gained a row
    said "run `ddtree-bayes update` (or `fit`)", which reads another file (update now refuses
    it, naming --data mine.csv). The hint names the command that works; a fit of the default
    file keeps the plain one."""
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    default = work / "data" / "measurements.csv"
    new_row = "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,140.0,a new run,\n"
    mine = work / "mine.csv"
    mine.write_text(default.read_text())
    write_point_mass_fit(work / "models", mine, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv")
    with open(mine, "a") as fh:
        fh.write(new_row)
    code, out, err = call(work, "predict", "--method", "ar")
    assert code == 0, err
    assert (f"ddtree-bayes: warning: {mine.resolve()} changed since fit 20260101T000000Z-pointmss; "
            "run `ddtree-bayes update --data mine.csv` (or `fit --data mine.csv`) to use it\n"
            ) in err
    # a fit of data/measurements.csv: `update` alone reads it
    write_point_mass_fit(work / "models", default, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv")
    with open(default, "a") as fh:
        fh.write(new_row)
    code, out, err = call(work, "predict", "--method", "ar")
    assert code == 0, err
    assert err == (f"ddtree-bayes: warning: {default.resolve()} changed since fit "
                   "20260101T000000Z-pointmss; run `ddtree-bayes update` (or `fit`) to use it\n")


def _fit_made_on_a_copy(tmp_path, monkeypatch):
    """A point-mass workdir whose fit was made on ``mine.csv``, a byte-identical copy of its
    data/measurements.csv: (the workdir, that default file, mine.csv)."""
    from ddtree_bayes.engine import inference
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    default = work / "data" / "measurements.csv"
    mine = work / "mine.csv"
    mine.write_bytes(default.read_bytes())
    write_point_mass_fit(work / "models", mine, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv")
    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))
    return work, default, mine


def test_update_without_data_reads_a_byte_identical_copy_of_the_fits_file(tmp_path,
                                                                          monkeypatch):
    """The refusal compared paths only: a copied workspace whose data/measurements.csv is a
    byte-identical copy of the mine.csv the fit was made on was refused (2, "fit ... was made
    on mine.csv, but `update` without --data reads data/measurements.csv"), though the two
    hold the fit's rows alike (its stored sha256). The default file is read."""
    work, default, mine = _fit_made_on_a_copy(tmp_path, monkeypatch)
    code, out, err = call(work, "update")
    assert code == 0 and "nothing to refit" in out, err
    # one row more in the default file: it is no copy, and the refusal stands
    with open(default, "a") as fh:
        fh.write("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,140.0,a new run,\n")
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert err.startswith("ddtree-bayes: error: fit 20260101T000000Z-pointmss was made on "
                          "mine.csv, but `update` without --data reads data/measurements.csv")


def test_update_without_data_or_priors_reads_a_copy_edited_where_no_fit_reads(tmp_path,
                                                                             monkeypatch):
    """The refusal to read the default file in place of the fit's own took a copy of the fit's
    file by its hash alone: data/measurements.csv copied from the mine.csv a fit was made on,
    then one row's notes edited, was refused (2, "fit ... was made on mine.csv, but `update`
    without --data reads data/measurements.csv"), though the fit is fresh by that edit
    (ac9965d3: notes and sources are read by no fit; predict says nothing, update keeps the
    draws); the same for models/priors.toml copied from the fit's mine.toml and a comment
    added (update and predict call it unchanged). Such a copy is read; a number edited is
    still refused."""
    work, default, mine = _fit_made_on_a_copy(tmp_path, monkeypatch)
    text = mine.read_text()
    assert ",133,B300 measurement" in text
    for edited in (text.replace("C=1 autoregressive;", "C=1 autoregressive, rerun;", 1),
                   # blanks around a number and a blank line: the loader reads them away
                   text.replace(",133,B300 measurement", ", 133 ,B300 measurement", 1) + " \n"):
        default.write_text(edited)
        assert default.read_text() != text
        code, out, err = call(work, "update")
        assert code == 0 and "nothing to refit" in out, err
        # ... as predict calls the fit's own file so edited unchanged (the padded cell was
        # "mine.csv changed since fit ...; run `ddtree-bayes update --data mine.csv`")
        mine.write_text(edited)
        code, out, err = call(work, "predict", "--method", "ar")
        assert code == 0 and "changed since" not in err, err
        mine.write_text(text)
    default.write_text(text.replace(",133,B300 measurement", ",134,B300 measurement", 1))
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert err.startswith("ddtree-bayes: error: fit 20260101T000000Z-pointmss was made on "
                          "mine.csv, but `update` without --data reads data/measurements.csv")
    # the priors: a copy with a comment added is read, a prior's number edited refused
    from test_cli_support import write_point_mass_fit

    default.write_bytes(mine.read_bytes())
    priors, mine_priors = work / "models" / "priors.toml", work / "mine.toml"
    mine_priors.write_bytes(priors.read_bytes())
    write_point_mass_fit(work / "models", mine, mine_priors, work / "data" / "hardware.csv")
    priors.write_text("# copied from mine.toml\n" + mine_priors.read_text())
    code, out, err = call(work, "update")
    assert code == 0 and "nothing to refit" in out, err
    priors.write_text(mine_priors.read_text().replace("median = 0.03\n", "median = 0.10\n", 1))
    assert priors.read_text() != mine_priors.read_text()
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert err.startswith("ddtree-bayes: error: fit 20260101T000000Z-pointmss was made with the "
                          "priors mine.toml, but `update` without --priors reads "
                          "models/priors.toml"), err


def test_a_copy_with_blank_records_of_the_headers_width_is_the_fits_own_file(tmp_path,
                                                                             monkeypatch):
    """A spreadsheet saves the empty rows under a table as records of blanks of the header's
    width (",,,,,,,,,,,,"), which the loader skips as it skips a blank line. fitted_rows_same
    (935dc6a2) left out blank records of another width only: mine.csv with two such records
    added made predict warn "mine.csv changed since fit ..." and `update` without --data
    refuse the copy in data/measurements.csv (exit 2), though every row the fit reads is as it
    was. A real edit next to them ("133" -> "133.0", " 133" -> "134") still counts."""
    from ddtree_bayes.core.data import fitted_rows_same

    work, default, mine = _fit_made_on_a_copy(tmp_path, monkeypatch)
    text = mine.read_text()
    width = len(text.splitlines()[0].split(","))
    blanks = ("," * (width - 1) + "\n") * 2
    assert fitted_rows_same(text + blanks, text)
    for real in (",133.0,B300 measurement", ", 134 ,B300 measurement"):
        assert not fitted_rows_same(text.replace(",133,B300 measurement", real, 1) + blanks,
                                    text)
    default.write_text(text + blanks)
    code, out, err = call(work, "update")
    assert code == 0 and "nothing to refit" in out, err
    mine.write_text(text + blanks)
    code, out, err = call(work, "predict", "--method", "ar")
    assert code == 0 and "changed since" not in err, err


def test_update_without_data_reads_the_bundled_data_a_fit_of_another_copy_was_made_on(
        tmp_path, monkeypatch):
    """A fit of the bundled data made by another install (its own copy of
    _bundled/measurements.csv, same content) was refused in a folder without
    data/measurements.csv: "fit ... was made on .../other/_bundled/measurements.csv, but
    `update` without --data reads <this install's bundled copy>". The same rows: read."""
    from ddtree_bayes.engine import inference
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    (work / "data" / "measurements.csv").unlink()
    other = tmp_path / "other" / "ddtree_bayes" / "_bundled" / "measurements.csv"
    other.parent.mkdir(parents=True)
    other.write_bytes(bundled("measurements.csv").read_bytes())
    write_point_mass_fit(work / "models", other, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv")
    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))
    code, out, err = call(work, "update")
    assert code == 0 and "nothing to refit" in out, err


def test_predicts_stale_data_hint_quotes_a_path_with_spaces(tmp_path):
    """The hint's --data path was pasted bare: `update --data my runs.csv` is two arguments."""
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    mine = work / "my runs.csv"
    mine.write_text((work / "data" / "measurements.csv").read_text())
    write_point_mass_fit(work / "models", mine, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv")
    with open(mine, "a") as fh:
        fh.write("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,140.0,a new run,\n")
    code, out, err = call(work, "predict", "--method", "ar")
    assert code == 0, err
    assert ("run `ddtree-bayes update --data 'my runs.csv'` (or `fit --data 'my runs.csv'`) to "
            "use it\n") in err
    # and update's refusal to read data/measurements.csv (no copy of it) names it so too
    with open(work / "data" / "measurements.csv", "a") as fh:
        fh.write("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,150.0,another run,\n")
    code, out, err = call(work, "update")
    assert code == 2 and ("(fix: pass --data 'my runs.csv' to fold in that file's new rows, or "
                          "--data data/measurements.csv to refit on the other file)\n") in err


def test_update_and_diff_say_1_measurement(tmp_path, monkeypatch):
    """`update` and `diff` printed "(1 measurements)" and "refitting on all 1 measurements"
    for a file or fit of one row (add had it fixed: "now 1 measurement")."""
    import json as json_

    import h5py

    from ddtree_bayes import api
    from ddtree_bayes.core.errors import InputError
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:2]))   # one row left

    def stop(*a, **k):   # (the refit itself: not run here)
        raise InputError("stopped before sampling", fix="none")

    monkeypatch.setattr(api, "fit", stop)
    code, out, err = call(work, "update", "--tune", "1")
    assert code == 2 and "stopped before sampling" in err
    assert out.splitlines()[0] == ("ddtree-bayes update: data/measurements.csv (1 measurement) "
                                   "vs fit 20260101T000000Z-pointmss (2 measurements)")
    assert "refitting on all 1 measurement (exact NUTS" in out
    # diff: a fit of the one row (its meta says so) against the two-row one
    one = write_point_mass_fit(work / "models", data, work / "models" / "priors.toml",
                               work / "data" / "hardware.csv", fit_id="20260102T000000Z-onerow1")
    with h5py.File(one, "r+") as fh:
        meta = json_.loads(fh.attrs[store.META_ATTR])
        meta["data"]["rows"] = 1
        fh.attrs[store.META_ATTR] = json_.dumps(meta)
    code, out, err = call(work, "diff", "20260101T000000Z-pointmss", "20260102T000000Z-onerow1")
    assert code == 0, err
    assert out.splitlines()[0] == ("ddtree-bayes diff: fit 20260101T000000Z-pointmss (2 "
                                   "measurements) -> fit 20260102T000000Z-onerow1 (1 measurement)")


def test_diff_names_the_model_of_each_changed_row_when_the_fits_hold_several(updated, monkeypatch):
    """`diff` of two fits of the public corpus printed `+ row 138: rx-7900-xtx x1 llama.cpp ar
    M=1 accept 1: 28.8 tok/s`: in a fit of several models the line did not say which model the
    row measures (`add` and `update` do). With one model it stays as it was."""
    import dataclasses

    work, first, _ = updated
    second = store.resolve(work / "models").stem
    real = living.stored_rows

    def two_models(fit):
        rows = real(fit)
        if fit.meta["fit_id"] != second:
            return rows
        other = dataclasses.replace(rows.rows[0], row=len(rows.rows) + 2,
                                    model="llama-3.1-8b-instruct", tok_s=99.0)
        return dataclasses.replace(rows, rows=(*rows.rows, other))

    monkeypatch.setattr(living, "stored_rows", two_models)
    code, out, err = call(work, "diff", first.fit_id, second)
    assert code == 0, err
    assert ("  + row 11: kimi-k2.6, b300 x8 sglang ddtree b16/B32 M=33 accept 13.1: 612 tok/s"
            in out)
    assert "  + row 12: llama-3.1-8b-instruct, b300 x8 sglang ar M=1 accept 1: 99 tok/s" in out


def test_update_without_priors_refuses_to_leave_the_priors_the_fit_was_made_with(
        tmp_path, monkeypatch):
    """`fit --priors mine.toml`, a row added, then `update`: it read models/priors.toml
    instead, said "priors changed since fit ..." (mine.toml had not changed) and refitted on
    the other priors, exit 0; the tracked queries' change (-40% in width on a real fit of
    the bundled data with noise_sd's median at 0.10) read as the new row's. As for --data:
    refused, naming the flag; with --priors mine.toml the fit's own priors are read."""
    from ddtree_bayes.engine import inference
    from test_cli_support import listing, make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    default = work / "models" / "priors.toml"
    mine = work / "mine.toml"
    mine.write_text(default.read_text().replace("median = 0.03\n", "median = 0.10\n", 1))
    assert mine.read_text() != default.read_text()
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv", mine,
                         work / "data" / "hardware.csv")
    before = listing(work)
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: fit 20260101T000000Z-pointmss was made with the priors "
                   "mine.toml, but `update` without --priors reads models/priors.toml (fix: pass "
                   "--priors mine.toml to keep that fit's priors, or --priors models/priors.toml "
                   "to refit on the other file)\n")
    assert listing(work) == before   # nothing written: no refit, latest.json unchanged
    # without models/priors.toml here the default is the bundled file, and the line says so
    default.unlink()
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert (f"but `update` without --priors reads {bundled('priors.toml')} (no models/priors.toml "
            "here: the bundled priors) (fix: pass --priors mine.toml") in err
    # --priors names the file: the fit's own priors again (up to date here)
    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))
    code, out, err = call(work, "update", "--priors", "mine.toml")
    assert code == 0 and "nothing to refit" in out, err
    # a byte-identical copy of mine.toml as the default is the same priors: read
    default.write_bytes(mine.read_bytes())
    code, out, err = call(work, "update")
    assert code == 0 and "nothing to refit" in out, err


def test_a_fit_of_a_hardware_file_is_not_stale_by_the_default_table(tmp_path):
    """`fit --hardware-file myhw.csv` (h200 at 9.6 TB/s), nothing changed since: predict warned
    "the hardware table here differs from the one fit ... stored for h200 (mem_bw_tb_s 9.6 ->
    4.8) ...; re-run `ddtree-bayes fit` to use these", --strict refused it (exit 4) and
    report called it stale, though `update` keeps that fit's file; the fit records its file,
    which is the table to compare with. An edit of that file is still named."""
    import hashlib

    import h5py

    from test_cli_support import FIT_ID, make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    default = work / "data" / "hardware.csv"
    mine = work / "myhw.csv"
    mine.write_text(default.read_text().replace("\nh200,HBM3e,141,4.8,", "\nh200,HBM3e,141,9.6,",
                                                1))
    path = write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                                work / "models" / "priors.toml", mine)
    with h5py.File(path, "r+") as fh:   # what `fit --hardware-file myhw.csv` records here
        meta = json.loads(fh.attrs[store.META_ATTR])
        meta["hardware"] = {"path": str(mine.resolve()),
                            "sha256": hashlib.sha256(mine.read_bytes()).hexdigest()}
        meta["workdir"] = str(work.resolve())
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    code, out, err = call(work, "predict", "--method", "ar", "--strict")
    assert code == 0 and "hardware table" not in err, err
    mine.write_text(mine.read_text().replace("\nh200,HBM3e,141,9.6,", "\nh200,HBM3e,141,9.7,", 1))
    code, out, err = call(work, "predict", "--method", "ar")
    assert code == 0, err
    assert (f"the hardware table here differs from the one fit {FIT_ID} stored for h200 "
            "(mem_bw_tb_s 9.6 -> 9.7): its answers use the stored values; re-run `ddtree-bayes "
            "fit --hardware-file myhw.csv` to use these") in err


def test_update_without_priors_refuses_a_swap_of_priors_kept_outside_the_workspace(
        tmp_path, monkeypatch):
    """`fit --priors /shared/tight.toml` (a file outside the working directory), then
    `update` here: the refusal exempted every file outside the working directory as "a fit
    made in another directory", so update read models/priors.toml, said "priors changed since
    fit ..." and refitted on them, exit 0 (a real fit of the bundled data with noise_sd's
    median at 0.10 in the shared file). A fit records where it was made; only a fit made
    elsewhere (a copied workspace) updates from this directory's default."""
    import h5py

    from ddtree_bayes.engine import inference
    from test_cli_support import FIT_ID, listing, make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    default = work / "models" / "priors.toml"
    shared = tmp_path / "shared" / "tight.toml"
    shared.parent.mkdir()
    shared.write_text(default.read_text().replace("median = 0.03\n", "median = 0.10\n", 1))
    path = write_point_mass_fit(work / "models", work / "data" / "measurements.csv", shared,
                                work / "data" / "hardware.csv")

    def made_in(where: Path) -> None:   # what `fit` run in ``where`` records
        with h5py.File(path, "r+") as fh:
            meta = json.loads(fh.attrs[store.META_ATTR])
            meta["workdir"] = str(where.resolve())
            fh.attrs[store.META_ATTR] = json.dumps(meta)

    made_in(work)
    before = listing(work)
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert err == (f"ddtree-bayes: error: fit {FIT_ID} was made with the priors "
                   f"{shared.resolve()}, but `update` without --priors reads models/priors.toml "
                   f"(fix: pass --priors {shared.resolve()} to keep that fit's priors, or "
                   "--priors models/priors.toml to refit on the other file)\n")
    assert listing(work) == before   # nothing written
    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))
    code, out, err = call(work, "update", "--priors", str(shared))
    assert code == 0 and "nothing to refit" in out, err
    # a fit made in another directory (a copied workspace) still updates from this one's
    made_in(tmp_path / "elsewhere")
    code, out, err = call(work, "update")
    assert code == 0 and "error" not in err, err


def test_fit_records_the_directory_it_was_made_in(tmp_path):
    """`update` tells a fit made here from one made in a copied workspace by it (the record
    lives in engine/store.py: update's reweighting writes it too, and must not import the
    sampler, tests/test_layers.py)."""
    from ddtree_bayes.engine import store
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    assert store.made_in(work) == {"workdir": str(work.resolve())}
    assert store.made_in(work / "models" / "..") == {"workdir": str(work.resolve())}


def test_update_without_hardware_file_refuses_to_leave_the_table_the_fit_was_made_with(
        tmp_path, monkeypatch):
    """`fit --hardware-file myhw.csv` (h200 at 9.6 TB/s), a row added, then `update`: it read
    data/hardware.csv, said "hardware table changed since fit ..." (myhw.csv had not changed)
    and refitted on the other table, exit 0 (an h200 answer of 739 tok/s became one at 4.8
    TB/s). The fit records the file it was made with; as for --data and --priors, `update`
    without the flag refuses to swap it."""
    import hashlib

    import h5py

    from ddtree_bayes.engine import inference, store
    from test_cli_support import FIT_ID, listing, make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    default = work / "data" / "hardware.csv"
    mine = work / "myhw.csv"
    mine.write_text(default.read_text().replace("\nh200,HBM3e,141,4.8,", "\nh200,HBM3e,141,9.6,",
                                                1))
    assert mine.read_text() != default.read_text()
    path = write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                                work / "models" / "priors.toml", mine)
    with h5py.File(path, "r+") as fh:   # what `fit --hardware-file myhw.csv` records
        meta = json.loads(fh.attrs[store.META_ATTR])
        meta["hardware"] = {"path": str(mine.resolve()),
                            "sha256": hashlib.sha256(mine.read_bytes()).hexdigest()}
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    before = listing(work)
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert err == (f"ddtree-bayes: error: fit {FIT_ID} was made with the hardware table "
                   "myhw.csv, but `update` without --hardware-file reads data/hardware.csv (fix: "
                   "pass --hardware-file myhw.csv to keep that fit's table, or --hardware-file "
                   "data/hardware.csv to refit on the other file)\n")
    assert listing(work) == before   # nothing written: no refit, latest.json unchanged
    # without data/hardware.csv here the default is the built-in table, and the line says so
    default.unlink()
    code, out, err = call(work, "update")
    assert (code, out) == (2, "")
    assert (f"but `update` without --hardware-file reads {bundled('hardware.csv')} (no "
            "data/hardware.csv here: the bundled hardware table) (fix: pass --hardware-file "
            "myhw.csv") in err
    # --hardware-file names the file: the fit's own table again (up to date here)
    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))
    code, out, err = call(work, "update", "--hardware-file", "myhw.csv")
    assert code == 0 and "nothing to refit" in out, err
    # a byte-identical copy of myhw.csv as the default is the same table: read
    default.write_bytes(mine.read_bytes())
    code, out, err = call(work, "update")
    assert code == 0 and "nothing to refit" in out, err


@pytest.mark.parametrize("own", [False, True])
def test_a_fit_records_the_hardware_file_it_was_made_with(tmp_path, monkeypatch, own):
    """What the check above reads: the fit's user hardware file (--hardware-file, else
    data/hardware.csv), its path and sha256; none for the built-in table alone."""
    import hashlib

    from ddtree_bayes.engine import fitting

    work = tmp_path / "w"
    (work / "data").mkdir(parents=True)
    mine = work / "myhw.csv"
    mine.write_bytes(bundled("hardware.csv").read_bytes())
    monkeypatch.chdir(work)
    inputs = fitting.FitInputs.read(bundled("measurements.csv"), bundled("priors.toml"),
                                    "myhw.csv" if own else None)
    expected = {"path": str(mine.resolve()),
                "sha256": hashlib.sha256(mine.read_bytes()).hexdigest()} if own else None
    assert fitting.hardware_meta(inputs.hardware) == expected


@pytest.mark.parametrize("spelling", [("--context", "32768"), ("--accept", "1.950"),
                                      ("--context", "32768", "--accept", "1.950")])
def test_track_add_refuses_a_tracked_query_whose_numbers_are_spelt_another_way(models_dir,
                                                                               spelling):
    """32k is 32 x 1024 = 32768 tokens and 1.950 is 1.95: `track --context 32768` beside a
    tracked `--context 32k` (or `--accept 12.0` beside `--accept 12`) was saved as a second
    query, and update and diff then printed every row of the one question twice."""
    assert call(models_dir, "track", *EAGLE)[0] == 0
    flags = dict(zip(EAGLE[::2], EAGLE[1::2], strict=True))
    flags.update(dict(zip(spelling[::2], spelling[1::2], strict=True)))
    argv = [x for kv in flags.items() for x in kv]
    code, out, err = call(models_dir, "track", *argv, "--name", "again")
    assert code == 2 and out == ""
    assert "this query is already tracked as 'rtx-pro-6000-vllm-eagle3-b3-ctx32k-a1.95'" in err
    assert [t.name for t in living.load_tracked(models_dir / "models")] == [
        "default", "rtx-pro-6000-vllm-eagle3-b3-ctx32k-a1.95"]
    # another number is another query: 32767 tokens, acceptance 1.951
    for flag, other in (("--context", "32767"), ("--accept", "1.951")):
        again = [x for kv in {**flags, flag: other}.items() for x in kv]
        code, _, err = call(models_dir, "track", *again, "--name", f"o{flag[2:]}")
        assert code == 0, err


def test_a_tracked_query_whose_width_falls_by_less_than_half_a_percent_keeps_its_sign():
    """update and diff printed a 90% interval narrowing from 786-1068 to 785-1066 (282 ->
    281 tok/s wide, 281 / 282 - 1 = -0.355%) as "width +0%", a fall read as a rise, then as
    "width 0%" (signed_percent), where next prints a reduction of 1.0 of 446 tok/s as
    "(-0.2%)". One formatter (core/data.py percent_text) for all three: a change that rounds
    to no whole percent keeps one decimal and its sign, "width -0.4%"; whole percents read
    as before."""
    c = {"name": "q", "label": "L", "before": {"median": 925.0, "lo90": 786.0, "hi90": 1068.0},
         "after": {"median": 924.0, "lo90": 785.0, "hi90": 1066.0}}
    assert living.format_change(c) == ("q: L: 90% 786-1068 -> 785-1066 tok/s (median 925 -> "
                                       "924, width -0.4%)")
    # 282 -> 283 wide is +0.355%: +0.4%; 282 -> 284 is +0.71%: +1%; 282 -> 279 -1.06%: -1%
    assert living.format_change({**c, "after": {**c["after"], "hi90": 1068.0}}).endswith(
        "width +0.4%)")
    assert living.format_change({**c, "after": {**c["after"], "hi90": 1069.0}}).endswith(
        "width +1%)")
    assert living.format_change({**c, "after": {**c["after"], "hi90": 1064.0}}).endswith(
        "width -1%)")
    # the same width: an exact 0, no sign
    assert living.format_change({**c, "after": {**c["after"], "lo90": 786.0,
                                                "hi90": 1068.0}}).endswith("width 0%)")


def test_one_percent_formatter_for_diff_update_and_next():
    """diff's parameter table and update's and diff's tracked lines (a change, with its sign:
    plus=True) and next's reduction cell (no plus) print a share by the one rule: a whole
    percent, one decimal where that rounds to 0 (one significant digit below 0.05%), and an
    exact 0 as "0%"."""
    from ddtree_bayes.cli.decisions import reduction_cell
    from ddtree_bayes.core.data import percent_text

    assert [percent_text(x, plus=True) for x in (0.123, -0.6, -0.004, 0.004, 0.0, -0.0002)] == [
        "+12%", "-60%", "-0.4%", "+0.4%", "0%", "-0.02%"]
    assert [percent_text(x) for x in (0.27, -1.0 / 446, 1.0 / 446, 0.0)] == [
        "27%", "-0.2%", "0.2%", "0%"]
    assert reduction_cell(-1.0, -1.0 / 446) == f"-1.0 ({percent_text(-1.0 / 446)})"


def test_a_share_under_a_tenth_of_a_percent_is_one_digit_not_an_exponent_nor_0_1():
    """percent_text printed a share under 0.0001 (0.01%) with Python's "g" format and one
    under 0.095% with one decimal: 3e-6 (two fits whose medians differ in the sixth digit)
    read "+0.0003%" but 1e-7 "+1e-05%", and 0.0007 (0.07%) read "0.1%", above 0.0004's
    "0.04%". One significant digit, written out, wherever the whole percent rounds to 0:
    1e-6 is 0.0001%, 0.0007 is 0.07%, 0.0005 is 0.05% (was 0.1%), 0.00096 is 0.1%; below
    0.0001% its sign and that bound, "-<0.0001%" (5e-324 printed "5e-322%")."""
    from ddtree_bayes.core.data import percent_text

    assert [percent_text(x, plus=True) for x in (1e-6, -3e-6, 0.0007, 0.0005, -0.00096)] == [
        "+0.0001%", "-0.0003%", "+0.07%", "+0.05%", "-0.1%"]
    assert percent_text(-1e-7, plus=True) == "-<0.0001%"   # (was "-1e-05%")
    assert [percent_text(x) for x in (0.0004, 0.00049, 0.003, -0.0046, 5e-324, -1e-9)] == [
        "0.04%", "0.05%", "0.3%", "-0.5%", "<0.0001%", "-<0.0001%"]
    assert percent_text(1e-9, plus=True) == "+<0.0001%"


def test_a_reweighted_and_a_refit_update_end_alike(monkeypatch, capsys, tmp_path):
    """The reweighting and the refitting update each wrote out their end (cli/update.py): the
    tracked queries, the total time, then the saved file's line or the JSON report. One
    helper ends both: the table's line gives the total unless the refit's line said it
    already; JSON carries total_s, the report's tracked queries, and prints no line."""
    import time

    from ddtree_bayes.cli import update as U

    seen: list[tuple] = []
    monkeypatch.setattr(U, "_tracked", lambda *a: seen.append(a[:5]) or a[5].update(tracked=[]))
    monkeypatch.setattr(time, "perf_counter", lambda: 12.5)
    path = tmp_path / "models" / "fits" / "f.nc"
    for total_said, line in ((False, f"saved {path} (update total 2.50 s)\n"),
                             (True, f"saved {path}\n")):
        report = {"warnings": []}
        U._finish("prev", "after", ["q"], 7, True, report, path, 10.0, total_said=total_said)
        assert capsys.readouterr().out == line
        assert report == {"warnings": [], "tracked": [], "total_s": 2.5}
    report = {"warnings": []}
    U._finish("prev", "after", ["q"], 7, False, report, path, 10.0, total_said=True)
    assert json.loads(capsys.readouterr().out) == {"warnings": [], "tracked": [], "total_s": 2.5}
    assert seen == [("prev", "after", ["q"], 7, text) for text in (True, True, False)]


def _attach_dims(path: Path, coords: dict, dims: dict) -> None:
    """Name each variable's dimension in a point-mass artifact (netCDF dimension scales, as
    xarray writes them), so its parameters are labelled by coordinate."""
    import h5py

    with h5py.File(path, "r+") as fh:
        post = fh["posterior"]
        for dim, labels in coords.items():
            post.create_dataset(dim, data=np.array(labels, dtype=object),
                                dtype=h5py.string_dtype())
            post[dim].make_scale(dim)
        for name, dim in dims.items():
            post[name].dims[2].attach_scale(post[dim])


#: the parameters' dimensions of the point-mass fits of :func:`_kimi_and_llama_fits`
_COORDS = {"system": ["b300x8"], "overhead_group": ["b300x8/sglang/ddtree"],
           "relation": ["native"]}
_DIMS = {**dict.fromkeys(("step_ar_ms", "moe_share", "moe_slope", "moe_exponent",
                          "ctx_ms_per_unit"), "system"),
         "reduction": "relation", "overhead_frac": "overhead_group"}


def _kimi_and_llama_fits(tmp_path: Path) -> tuple[Path, str, str]:
    """A workdir with two point-mass fits of the same B300 rows: A of Kimi K2.6's (M = 1
    step 7.5 ms), B the rows as Llama-3.1-8B's (3 ms, noise 0.05); (workdir, A, B)."""
    from test_cli_support import make_point_mass_workdir, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w", step_ar_ms=[7.5])
    models, hw, priors = work / "models", work / "data" / "hardware.csv", work / "models" / "priors.toml"
    lines = (work / "data" / "measurements.csv").read_text().splitlines(keepends=True)
    llama = work / "llama.csv"
    llama.write_text(lines[0] + "".join(ln.replace("kimi-k2.6,", "llama-3.1-8b-instruct,", 1)
                                        for ln in lines[1:]))
    write_point_mass_fit(models, llama, priors, hw, fit_id="20260102T000000Z-llamafit",
                         target_model="llama-3.1-8b-instruct", step_ar_ms=[3.0],
                         noise_sd=0.05)
    a, b = "20260101T000000Z-pointmss", "20260102T000000Z-llamafit"
    for fit_id in (a, b):
        _attach_dims(store.fits_dir(models) / f"{fit_id}.nc", _COORDS, _DIMS)
    return work, a, b


def test_diff_of_fits_of_two_different_models_compares_no_per_system_parameter(tmp_path):
    """`diff` of a fit of Kimi K2.6's B300 rows (M = 1 step 7.5 ms) against a fit of the same
    rows as Llama-3.1-8B's (3 ms) printed `step_ar_ms[b300x8] 7.5 -> 3 -60%`: one label, two
    models' steps. The per-system and per-group parameters of fits of different models are
    shown side by side under their own heading, without a change, and one warning names both
    fits' models; the population parameters (the engine relation, the noise) are compared."""
    from test_cli_support import write_point_mass_fit
    from test_json_schemas import validate_output

    work, a, b = _kimi_and_llama_fits(tmp_path)
    models, hw, priors = work / "models", work / "data" / "hardware.csv", work / "models" / "priors.toml"
    coords, dims = _COORDS, _DIMS
    warning = (f"fit {a} holds kimi-k2.6 and fit {b} llama-3.1-8b-instruct: a parameter per "
               "system or group is each fit's own model's (shown side by side, no change), "
               "and each tracked query is answered for each fit's own model")
    code, out, err = call(work, "diff", a, b, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("diff", report)
    assert report["warnings"][0] == warning
    params = {p["parameter"]: p for p in report["parameters"]}
    step = params["step_ar_ms[b300x8]"]
    assert (step["a"]["median"], step["b"]["median"]) == (7.5, 3.0)
    assert step["models_differ"] is True
    assert not {"median_change", "median_shift", "width_change", "change_scale"} & set(step)
    for name in ("overhead_frac[b300x8/sglang/ddtree]", "moe_share[b300x8]",
                 "ctx_ms_per_unit[b300x8]"):
        assert params[name]["models_differ"] is True and "median_change" not in params[name]
    # population parameters: one quantity in both fits, compared as before
    assert params["noise_sd"]["median_change"] is None   # (a median 0 in A)
    assert params["noise_sd"]["median_shift"] == pytest.approx(0.05)
    assert params["reduction[native]"]["median_change"] == 0.0
    assert "models_differ" not in params["reduction[native]"]
    code, out, err = call(work, "diff", a, b)
    assert code == 0, err
    assert f"ddtree-bayes: warning: {warning}" in err.splitlines()
    assert "-60%" not in out
    main, _, own = out.partition("\nper-system and per-group parameters of different models")
    assert "step_ar_ms[b300x8]" not in main and "reduction[native]" in main
    rows = {ln.split()[0]: ln.split() for ln in own.splitlines() if ln[:1].isalpha()}
    assert rows["step_ar_ms[b300x8]"] == ["step_ar_ms[b300x8]", "7.5", "7.5", "to", "7.5", "3",
                                          "3", "to", "3"]
    assert own.splitlines()[0] == (" (A kimi-k2.6, B llama-3.1-8b-instruct): not one "
                                   "quantity, no change:")
    # the same model in both fits (Kimi's rows, step 7.5 -> 3): its change, no warning
    write_point_mass_fit(models, work / "data" / "measurements.csv", priors, hw,
                         fit_id="20260103T000000Z-kimifit2", step_ar_ms=[3.0])
    _attach_dims(store.fits_dir(models) / "20260103T000000Z-kimifit2.nc", coords, dims)
    code, out, err = call(work, "diff", a, "20260103T000000Z-kimifit2", "--format", "json")
    params = {p["parameter"]: p for p in json.loads(out)["parameters"]}
    assert params["step_ar_ms[b300x8]"]["median_change"] == pytest.approx(-0.6)
    assert "models_differ" not in params["step_ar_ms[b300x8]"]
    assert not any("holds" in w for w in json.loads(out)["warnings"])


def test_diff_of_fits_of_two_different_models_gives_no_tracked_change(tmp_path):
    """`diff` of a fit of Kimi K2.6's B300 rows against one of the same rows as Llama-3.1-8B's
    printed each tracked query as `90% 640-640 -> 1500-1700 tok/s (median 640 -> 1592, ...)`:
    each fit answers for its own model, two quantities read as a change. Such a line now says
    "different models" and gives no change (JSON: `models_differ: true` on the entry); a diff
    of two fits of one model is unchanged."""
    from test_cli_support import write_point_mass_fit
    from test_json_schemas import validate_output

    work, a, b = _kimi_and_llama_fits(tmp_path)
    code, _, err = call(work, "track", "add", "--engine", "sglang", "--accept", "12",
                        "--name", "a12")
    assert code == 0, err
    code, out, err = call(work, "diff", a, b, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("diff", report)
    entries = {(t["name"], t["label"]): t for t in report["tracked"]}
    assert len(entries) == 3 and all(t["models_differ"] is True for t in report["tracked"])
    a12 = entries[("a12", "b300 x8 sglang ddtree b16/B32 accept 12")]
    # A: Kimi's point mass, 12 tokens per 18.75 ms step at M = 33
    assert a12["before"] == {"median": 640.0, "lo90": 640.0, "hi90": 640.0}
    # B: Llama's answer, as predict gives it from fit B
    code, out, _ = call(work, "predict", "--fit", b, "--engine", "sglang", "--accept", "12",
                        "--format", "json")
    (row,) = json.loads(out)["rows"]
    assert a12["after"]["median"] == row["median"]
    assert round(row["median"]) == 1592
    code, out, err = call(work, "diff", a, b)
    assert code == 0, err
    tracked = out.partition("\ntracked queries, ")[2].splitlines()[1:]
    assert len(tracked) == 3
    assert tracked[2] == ("  a12: b300 x8 sglang ddtree b16/B32 accept 12: different models, "
                          "not one quantity: 90% A 640-640, B 1500-1700 tok/s (median A 640, "
                          "B 1592)")
    # the built-in default of fit B: its "Llama" (Kimi's rows relabelled) measured no
    # acceptance at the bundled DDTree 16/32 and the priors give none for it, so a bare
    # `predict --fit B` refuses it, and the tracked default no longer answers it at 14
    # (it read "different models ... B 1750-1983 tok/s")
    assert "747-747 -> - tok/s (after: no acceptance prior in the priors file" in tracked[0]
    assert "830-830 -> - tok/s (after: no acceptance prior in the priors file" in tracked[1]
    assert not any("width" in ln or "(median" in ln for ln in tracked[:2])
    assert call(work, "predict", "--fit", b)[0] == 2
    # control: two fits of Kimi (step 7.5 -> 3 ms): a change, and no models_differ
    models = work / "models"
    write_point_mass_fit(models, work / "data" / "measurements.csv", models / "priors.toml",
                         work / "data" / "hardware.csv", fit_id="20260103T000000Z-kimifit2",
                         step_ar_ms=[3.0])
    code, out, err = call(work, "diff", a, "20260103T000000Z-kimifit2", "--format", "json")
    assert code == 0, err
    assert not any("models_differ" in t for t in json.loads(out)["tracked"])
    code, out, err = call(work, "diff", a, "20260103T000000Z-kimifit2")
    line = next(ln for ln in out.splitlines() if ln.startswith("  a12: "))
    assert line.startswith("  a12: b300 x8 sglang ddtree b16/B32 accept 12: 90% 640-640 -> ")
    assert "(median 640 -> " in line and "different models" not in line


def test_an_update_to_another_models_rows_gives_no_tracked_change(tmp_path, monkeypatch):
    """`update` after data/measurements.csv came to hold another model's rows (every row of
    the fit of Kimi K2.6 gone, the same B300 rows as Llama-3.1-8B's) refits, and printed each
    tracked query as a change, `90% 640-640 -> 1500-1700 tok/s (median 640 -> 1592, ...)`:
    each fit answers for its own model, where `diff` of the same two fits says "different
    models, not one quantity". update now says it as diff does: models_differ on each entry
    (JSON and schema), the line with no change, and one warning naming both fits' models."""
    from types import SimpleNamespace

    from ddtree_bayes import api
    from test_cli_support import write_point_mass_fit
    from test_json_schemas import validate_output

    work, a, b = _kimi_and_llama_fits(tmp_path)
    (work / "models" / "latest.json").write_text(json.dumps({"fit_id": a, "file": f"fits/{a}.nc",
                                                                "converged": True}))
    assert store.resolve(work / "models").name == f"{a}.nc"
    code, _, err = call(work, "track", "add", "--engine", "sglang", "--accept", "12",
                        "--name", "a12")
    assert code == 0, err
    data = work / "data" / "measurements.csv"
    data.write_text((work / "llama.csv").read_text())   # (Kimi's rows now Llama's)
    refit = "20260104T000000Z-llamarft"

    def fake_fit(*args, **kwargs):   # (the refit: Llama's point mass, step 3 ms)
        path = write_point_mass_fit(work / "models", data, work / "models" / "priors.toml",
                                    work / "data" / "hardware.csv", fit_id=refit,
                                    target_model="llama-3.1-8b-instruct", step_ar_ms=[3.0],
                                    noise_sd=0.05)
        return SimpleNamespace(fit_id=refit, path=path, converged=True, failures=[],
                               divergences=0, timings={}, warnings=(),
                               raise_if_unconverged=lambda: None)

    monkeypatch.setattr(api, "fit", fake_fit)
    code, out, err = call(work, "update", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("update", report)
    assert report["made_by"] == "refit"
    line = (f"fit {a} holds kimi-k2.6 and fit {refit} llama-3.1-8b-instruct: each tracked "
            "query is answered for each fit's own model")
    assert line in report["warnings"]
    a12 = {t["label"]: t for t in report["tracked"] if t["name"] == "a12"}[
        "b300 x8 sglang ddtree b16/B32 accept 12"]
    assert a12["models_differ"] is True
    assert a12["before"] == {"median": 640.0, "lo90": 640.0, "hi90": 640.0}   # 12 / 18.75 ms
    assert round(a12["after"]["median"]) == 1592   # (as diff's test: Llama's own answer)
    assert all(t["models_differ"] is True for t in report["tracked"])
    (work / "models" / "latest.json").write_text(json.dumps({"fit_id": a, "file": f"fits/{a}.nc",
                                                                "converged": True}))
    data.write_text((work / "llama.csv").read_text())
    code, out, err = call(work, "update")
    assert code == 0, err
    assert f"ddtree-bayes: warning: {line}" in err.splitlines()
    tracked = out.partition("\ntracked queries, ")[2].splitlines()[1:]
    assert "  a12: b300 x8 sglang ddtree b16/B32 accept 12: different models, not one " \
           "quantity: 90% A 640-640, B 1500-1700 tok/s (median A 640, B 1592)" in tracked
    assert not any("->" in ln for ln in tracked if ln.startswith("  a12: "))
    # (the built-in default: the refit's Llama measured no acceptance at the bundled DDTree
    # 16/32 and the priors give none for it: a bare predict refuses it, and so does this)
    defaults = [ln for ln in tracked if ln.startswith("  default: ")]
    assert len(defaults) == 2 and all("-> - tok/s (after: no acceptance prior" in ln
                                      for ln in defaults)


def _edit_cell(path: Path, row: int, column: str, value: str) -> None:
    """Write ``value`` into ``column`` of data row ``row`` (1: the first under the header)."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(path.read_text())))
    rows[row][rows[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())


@pytest.mark.parametrize("column, value, stale", [
    ("notes", "C=1 DDTree block 8; re-read from the source", False),
    ("source", "B300 notes, page 2", False),
    ("tok_s", "304", True),
    ("accept_len", "4.5", True),
])
def test_an_edit_of_a_rows_notes_alone_leaves_the_fit_fresh(tmp_path, monkeypatch, column,
                                                           value, stale):
    """Editing only a row's notes (or source) made predict warn "data/measurements.csv changed
    since fit F" and `update` refit ("1 row of fit F removed or edited"), though no fit reads
    either column (core/data.py FREE_TEXT_COLUMNS): the numbers did not change. Such an edit
    now leaves the fit fresh and update finds no row removed or new (it keeps the draws as
    they are: the bundled fit's update took 0.34 s instead of a 9 s refit); an edit of any
    number still makes the fit stale and the row one removed and one added."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    _edit_cell(data, 2, column, value)   # (the B300 DDTree row: 303 tok/s at 4.4)
    code, out, err = call(work, "predict", "--format", "json")
    assert code == 0, err
    changed = [w for w in json.loads(out)["warnings"] if "changed since fit" in w]
    assert changed == ([f"{data} changed since fit 20260101T000000Z-pointmss; run "
                        "`ddtree-bayes update` (or `fit`) to use it"] if stale else [])
    seen = refits_seen(monkeypatch)
    code, out, err = call(work, "update", "--format", "json")
    reasons = seen[0]["extra_meta"]["refit_reasons"] if seen else []
    edited = "1 row of fit 20260101T000000Z-pointmss removed or edited"
    assert (edited in reasons) == stale, reasons
    if not stale:   # (the point-mass fit is refitted for its model's own fields, not the row)
        assert not any("row" in r for r in reasons), reasons
    code, out, err = call(work, "predict", "--strict")
    assert (code == 4) == stale, err

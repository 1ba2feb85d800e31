"""`update` without a refit: the session's real fit of the bundled data, one HYPOTHETICAL
unsurprising row, and a PSIS reweight of the fit's draws saved as a normal artifact (a temp
copy; the repo's data/ is never touched). Refits are mocked: `api.fit` returns the session
fit, so each case checks which way `update` went and why, not NUTS again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.engine import importance as R
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine import psis as Ps
from ddtree_bayes.engine import store
from ddtree_bayes.workflows.living import reweight as RW
from test_json_schemas import validate_output
from test_layers import HEAVY
from test_living_update import NEW_ROW, call, copy_work

#: NEW_ROW at the session fit's predictive median for budget 32 (676 tok/s, where 612 sits at
#: the 18th percentile): unsurprising enough that a second row still reweights the same draws
#: (with 612 the chained reweight keeps ~350 effective draws, under the 400 gate, and refits)
UNSURPRISING_ROW = [*NEW_ROW[:NEW_ROW.index("--tok-s") + 1], "676",
                    *NEW_ROW[NEW_ROW.index("--tok-s") + 2:]]
TOK_S = 676

#: HYPOTHETICAL rows, not measurements: each unsurprising under the session fit.
EAGLE_ROW = ["--hardware", "rtx-pro-6000", "--engine", "vllm", "--method", "eagle3", "--block",
             "3", "--context", "0", "--accept", "1.95", "--tok-s", "124", "--source",
             "HYPOTHETICAL test measurement"]


def run_update(work: Path, *argv: str) -> tuple[dict, str]:
    """`update --format json` as a whole process: (its JSON, the heavy modules it imported)."""
    code = ("import sys\nfrom ddtree_bayes.cli.main import main\n"
            f"rc = main(['update', '--format', 'json', *{list(argv)!r}])\n"
            f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
            "print('HEAVY', heavy, file=sys.stderr)\nsys.exit(rc)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def reweighted(fitted_workdir, tmp_path_factory):
    work0, first = fitted_workdir
    work = copy_work(work0, tmp_path_factory.mktemp("reweight") / "w")
    assert call(work, "add", *UNSURPRISING_ROW)[0] == 0
    payload, heavy = run_update(work)
    return work, first, payload, heavy


def test_one_unsurprising_row_is_absorbed_by_reweighting_without_heavy_imports(reweighted):
    work, first, payload, heavy = reweighted
    assert heavy == "HEAVY []"
    validate_output("update", payload)
    assert payload["made_by"] == "psis-reweight" and payload["refit"] is None
    assert payload["refit_reasons"] == []
    psis = payload["psis"]
    assert psis["proposal_fit"] == first.fit_id and psis["accepted"] is True
    assert psis["pareto_k"] < psis["k_threshold"] == 0.7 and psis["n_draws"] == 4000
    assert psis["n_eff"] == pytest.approx(psis["weights_ess"] * psis["r_eff"])
    assert 400 <= psis["n_eff"] < psis["weights_ess"] < 4000 and psis["rows"] == [11]
    assert payload["reweight"]["fit_id"] == store.resolve(work / "models").stem


def test_the_reweighted_fit_is_a_normal_artifact(reweighted, monkeypatch):
    work, first, payload, _ = reweighted
    monkeypatch.chdir(work)   # check_fit compares with the working directory's data file
    path = store.resolve(work / "models")
    after, before = store.load_fit(path), store.load_fit(first.path)
    meta = after.meta
    assert meta["made_by"] == "psis-reweight" and meta["converged"] is True
    assert meta["reweight"]["parent_fit"] == meta["reweight"]["proposal_fit"] == first.fit_id
    assert meta["reweight"]["pareto_k"] == payload["psis"]["pareto_k"]
    assert "stratified" in meta["reweight"]["resampling"] and "JMLR" in meta["reweight"]["reference"]
    assert meta["diagnostics"]["of_fit"] == first.fit_id
    note = RW.provenance(meta)        # what the report's verdict adds
    assert note is not None and note.startswith(f"not sampled: fit {first.fit_id}'s NUTS draws")
    assert f"Pareto k {meta['reweight']['pareto_k']:.2f} <= 0.70" in note and "row 11" in note
    assert RW.provenance(before.meta) is None
    assert meta["diagnostics"]["parameters"] == before.meta["diagnostics"]["parameters"]
    assert meta["data"]["rows"] == 10 and meta["update"]["added_rows"] == [11]
    assert after.data_csv == (work / "data" / "measurements.csv").read_text()
    assert [m.row for m in after.measurements.rows] == list(range(2, 12))
    assert P.check_fit(after) == []       # data and priors hashes are the current files'
    # the tracked queries update printed (from the draws it held in memory) are the saved fit's
    from ddtree_bayes.workflows import living

    assert living.compare_queries(before, after, living.load_tracked(work / "models"),
                                  payload["seed"], workdir=work) == payload["tracked"]
    dt = store.load_datatree(path)
    assert list(dt["observed_data"]["measurement"].values) == [str(r) for r in range(2, 12)]
    assert float(dt["observed_data"]["log_tok_s"].values[-1]) == pytest.approx(np.log(TOK_S))
    assert dt["posterior"].sizes["chain"] == 4 and dt["posterior"].sizes["draw"] == 1000
    import xarray as xr

    xr.testing.assert_identical(dt["sample_stats"].to_dataset(),
                                store.load_datatree(first.path)["sample_stats"].to_dataset())
    # every command that reads a fit reads this one
    for argv in (("predict", "--accept", "14"), ("history",), ("diff", first.fit_id, "latest")):
        code, out, err = call(work, *argv, "--format", "json")
        assert code == 0, err
        validate_output(argv[0], json.loads(out))
    rows = json.loads(call(work, "history", "--format", "json")[1])["rows"]
    assert rows[-1]["made_by"] == "psis-reweight" and rows[-1]["latest"] is True
    line = call(work, "history")[1].splitlines()[-1]
    assert line.endswith(f"latest, update of {first.fit_id}: +1/-0 rows, PSIS reweight (Pareto k "
                         f"{meta['reweight']['pareto_k']:.2f}, "
                         f"{meta['reweight']['n_eff']:.0f} effective draws)")
    code, out, _ = call(work, "update")
    assert code == 0 and "is up to date" in out


def _proposal_index(before, after, skip: set[str] = frozenset()) -> np.ndarray:  # type: ignore[assignment]
    """Which of the proposal's draws each reweighted draw is (by its exact values; ``skip``:
    variables the reweight recomputed)."""
    def keys(d):
        return [tuple(row) for row in np.column_stack(
            [d.variables[k].reshape(d.n_draws, -1) for k in sorted(d.variables)
             if k not in skip])]

    where = {k: i for i, k in enumerate(keys(before))}
    return np.array([where[k] for k in keys(after)])


def test_reweighted_draws_are_the_stratified_resample_of_the_psis_weights(reweighted):
    """Recompute the weights from scratch: each proposal draw appears floor(n w) - 1 to
    ceil(n w) + 1 times in the saved posterior. In the default structured form the budget-32
    row also makes the B300 DDTree group's tree nodes vary (its own per-node ratio replaces
    the population's, for the budget-8 row too) and moves the budget-8 row's distance: its
    new likelihood over its old one joins the new row's. The new row's sd is checked by hand:
    sqrt(noise^2 + (structure_sd * log(33 / 9))^2), budget 8 (M = 9) its nearest config."""
    work, first, payload, _ = reweighted
    before = store.load_fit(first.path)
    after = store.load_fit(store.resolve(work / "models"))
    old, new = before.measurements, after.measurements
    added, kept, removed = RW.pair_rows(old, new)
    assert (added, removed) == ([9], []) and kept == [(i, i) for i in range(9)]
    assert payload["psis"]["restructured_groups"] == ["b300x8/sglang/ddtree"]
    assert payload["psis"]["sd_changed_rows"] == [3]       # the budget-8 row
    model = after.meta["model"]
    assert model["group_varies"]["tree"] != before.meta["model"]["group_varies"]["tree"]
    target, replaced, _ = R.restructured(before, model, new.text)
    lr, changed = R.log_ratios(before, old, new, added, kept, target)
    assert changed == [1]
    v = before.variables
    sd = np.sqrt(v["noise_sd"] ** 2 + (v["structure_sd"] * np.log(33 / 9)) ** 2)
    step, _ = P.step_draws(target, P.resolve_scenario(
        target, hardware="b300", gpus=8, engine="sglang", method="ddtree", block=16, budget=32,
        verify_tokens=None, context_tokens=None), np.random.default_rng(0),
        anchor=False)   # the likelihood's mean: the structural step (no anchor)
    by_hand = (-0.5 * ((np.log(TOK_S) - np.log(13.1 * 1000 / step)) / sd) ** 2 - np.log(sd)
               - 0.5 * np.log(2 * np.pi))
    np.testing.assert_allclose(R.log_likelihood(target, new, [9])[:, 0], by_hand, rtol=1e-12,
                               atol=1e-12)
    w = Ps.psis(lr, r_eff=payload["psis"]["r_eff"]).weights
    index = _proposal_index(before, after, skip=set(replaced))
    counts = np.bincount(index, minlength=before.n_draws)
    n = before.n_draws
    assert np.all(counts >= np.floor(n * w) - 1) and np.all(counts <= np.ceil(n * w) + 1)
    assert after.meta["reweight"]["distinct_draws"] == int(np.count_nonzero(counts))
    # the saved per-node ratio is the recomputed one (the group's own), resampled with the rest
    np.testing.assert_array_equal(after.variables["spec_tree_ratio"],
                                  replaced["spec_tree_ratio"][index])


def test_a_second_update_reweights_the_same_sampled_draws(reweighted, tmp_path):
    work = copy_work(reweighted[0], tmp_path / "w")
    first, second = reweighted[1].fit_id, store.resolve(work / "models").stem
    assert call(work, "add", *EAGLE_ROW)[0] == 0
    payload, heavy = run_update(work)
    validate_output("update", payload)
    assert heavy == "HEAVY []" and payload["made_by"] == "psis-reweight"
    assert payload["previous_fit"] == second and [r["row"] for r in payload["new_rows"]] == [12]
    assert payload["psis"]["proposal_fit"] == first and payload["psis"]["rows"] == [11, 12]
    meta = store.load_meta(store.resolve(work / "models"))
    assert meta["reweight"]["parent_fit"] == second and meta["reweight"]["proposal_fit"] == first
    assert f"PSIS reweight of {first}'s draws (Pareto k" in call(work, "history")[1]


@pytest.fixture
def mocked_refit(fitted_workdir, monkeypatch):
    """`api.fit` records its arguments and returns the session fit instead of sampling."""
    from ddtree_bayes import api

    _, result = fitted_workdir
    calls: list[dict] = []

    def fake_fit(*args, **kwargs):
        calls.append(kwargs)
        return result

    monkeypatch.setattr(api, "fit", fake_fit)
    return calls


def test_a_pareto_k_above_the_limit_refits(reweighted, fitted_workdir, tmp_path, mocked_refit):
    """Twelve budgets 24-35 at 595 tok/s (each low but no surprise; not repeats, which would
    add config_share to the model) move the posterior far into the tail of the fit's draws:
    k > 0.7, so `update` refits and says why. (Eight budgets 24-31 at 565 before 780762b
    raised the lower tail of an extrapolated budget: budget 24 at 565 became a surprise, and
    eight rows high enough to be none leave k below 0.7.)"""
    work = copy_work(reweighted[0], tmp_path / "w")
    (work / "models" / "latest.json").write_text(json.dumps(
        {"fit_id": reweighted[1].fit_id, "file": f"fits/{reweighted[1].path.name}",
         "converged": True}))
    data = work / "data" / "measurements.csv"
    data.write_text((fitted_workdir[0] / "data" / "measurements.csv").read_text() + "".join(
        f"kimi-k2.6,b300,8,sglang,ddtree,16,{b},{b + 1},13.1,,595,HYPOTHETICAL {b},\n"
        for b in range(24, 36)))
    code, out, err = call(work, "update", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("update", payload)
    assert all(s["status"] == "ok" for s in payload["new_rows"]), payload["new_rows"]
    assert payload["made_by"] == "refit" and payload["reweight"] is None
    assert payload["psis"]["pareto_k"] > 0.7 and payload["psis"]["accepted"] is False
    assert any(r.startswith("Pareto k ") and "> 0.70" in r for r in payload["refit_reasons"])
    (kwargs,) = mocked_refit
    assert kwargs["extra_meta"]["made_by"] == "refit"
    assert kwargs["extra_meta"]["refit_reasons"] == payload["refit_reasons"]
    assert kwargs["extra_meta"]["psis"]["pareto_k"] == payload["psis"]["pareto_k"]
    code, out, _ = call(work, "update")   # the text table says which way and the k
    line = next(x for x in out.splitlines() if x.startswith("refit "))
    assert f"{payload['psis']['pareto_k']:.2f}" in line and "0.70" in line


def test_a_repeat_of_a_measured_row_is_reweighted_not_refit(fitted_workdir, tmp_path):
    """Re-measuring a configuration, the most common update: a second run of the B300 AR row
    (131 tok/s against the measured 133) gives the model config_share (issue 18: it refitted).
    `update` reweights: the saved fit has config_share from its prior moved by the repeat,
    run_sd^2 + config_sd^2 = noise_sd^2 draw by draw, and predict answers from it."""
    work0, first = fitted_workdir
    work = copy_work(work0, tmp_path / "w")
    code, _, err = call(work, "add", "--hardware", "b300", "--engine", "sglang", "--method",
                        "ar", "--accept", "1", "--tok-s", "131", "--source",
                        "HYPOTHETICAL repeat (test)")
    assert code == 0, err
    payload, heavy = run_update(work)
    assert heavy == "HEAVY []"
    validate_output("update", payload)
    assert payload["made_by"] == "psis-reweight", payload["refit_reasons"]
    psis = payload["psis"]
    assert psis["added_variables"] == ["config_sd", "config_share", "run_sd"]
    assert psis["pareto_k"] < 0.5 and psis["n_eff"] > 2000   # one repeat barely moves it
    draws = store.load_fit(store.resolve(work / "models"))
    assert draws.meta["model"]["repeated_runs"] is True
    v = draws.variables
    np.testing.assert_allclose(v["run_sd"] ** 2 + v["config_sd"] ** 2, v["noise_sd"] ** 2,
                               rtol=1e-9)
    assert 0.0 < float(v["config_share"].min()) and float(v["config_share"].max()) < 1.0
    code, out, err = call(work, "predict", "--accept", "12", "--format", "json")
    assert code == 0, err
    assert all(np.isfinite(r["median"]) for r in json.loads(out)["rows"])


@pytest.mark.parametrize(("setup", "reason"), [
    ("refit-flag", "--refit"),
    ("new-group", "the new rows change the model: new overhead groups b300x8/vllm/eagle3"),
    ("priors", "priors changed since fit"),
    ("draws", "--draws given (sampler settings are for a refit)"),
])
def test_what_a_reweight_cannot_absorb_refits(reweighted, tmp_path, mocked_refit, setup, reason):
    work = copy_work(reweighted[0], tmp_path / "w")
    argv: list[str] = []
    if setup == "refit-flag":
        assert call(work, "add", *EAGLE_ROW)[0] == 0
        argv = ["--refit"]
    elif setup == "new-group":
        assert call(work, "add", "--hardware", "b300", "--engine", "vllm", "--method", "eagle3",
                    "--block", "3", "--accept", "2.1", "--tok-s", "165", "--source",
                    "HYPOTHETICAL")[0] == 0
    elif setup == "priors":   # (a prior the fit reads: a comment or the curve is no reason)
        priors = work / "models" / "priors.toml"
        text = priors.read_text()
        assert text.count("median = 10.0\n") == 1
        priors.write_text(text.replace("median = 10.0\n", "median = 11.0\n"))
    else:
        assert call(work, "add", *EAGLE_ROW)[0] == 0
        argv = ["--draws", "500"]
    code, out, err = call(work, "update", "--format", "json", *argv)
    assert code == 0, err
    payload = json.loads(out)
    validate_output("update", payload)
    assert payload["made_by"] == "refit" and payload["psis"] is None
    assert any(r.startswith(reason) for r in payload["refit_reasons"]), payload["refit_reasons"]
    assert len(mocked_refit) == 1


def test_the_same_rows_in_another_order_refit_and_say_so(fitted_workdir, tmp_path, mocked_refit):
    """The bundled rows reversed: no row is new, but the model's coordinates follow the rows'
    order (systems, engines, groups), so the draws are not in the new model's order and
    `update` refits. It said "the new rows change the model: the model's engines changes
    (['sglang', 'vllm'] -> ['vllm', 'sglang'])", and three more such lines."""
    work = copy_work(fitted_workdir[0], tmp_path / "w")
    data = work / "data" / "measurements.csv"
    header, *rows = data.read_text().splitlines(keepends=True)
    data.write_text(header + "".join(reversed(rows)))
    code, out, err = call(work, "update", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["made_by"] == "refit" and len(mocked_refit) == 1
    (reason,) = payload["refit_reasons"]
    assert reason == (f"the rows are fit {fitted_workdir[1].fit_id}'s in another order (row 2 "
                      f"is now row {len(rows) + 1}; {len(rows) - 1} moved): the model's "
                      "coordinates follow the rows' order, so its draws are not in the new "
                      "model's order")


def test_a_reweighting_update_killed_while_saving_keeps_the_last_good_fit(reweighted, tmp_path):
    from test_living_safety import assert_whole, kill_at_hook, spawn

    work = copy_work(reweighted[0], tmp_path / "w")
    last_good = store.resolve(work / "models").stem
    fits = [p.stem for p in store.fit_files(work / "models")]
    original = (work / "data" / "measurements.csv").read_bytes()
    assert call(work, "add", *EAGLE_ROW)[0] == 0
    proc = spawn(work, ["update", "--quiet"], {"DDTREE_TEST_HOOK_MATCH": ".nc."})
    line = kill_at_hook(proc)
    assert line.startswith("HOOK fsync") and line.endswith(".tmp")
    assert_whole(work, original)
    assert store.resolve(work / "models").stem == last_good
    assert [p.stem for p in store.fit_files(work / "models")] == fits
    assert list((work / "models" / "fits").glob(".*.tmp"))


@pytest.mark.slow
def test_reweighted_intervals_are_within_two_percent_of_a_real_refit(reweighted, tmp_path):
    """The same row by a real NUTS refit (`update --refit`, same seed): every tracked query's
    median and 90% bounds within 2% of the reweighted fit's (bench/bench_update.py measures
    the same side by side, with the headline predict query and the timings)."""
    work = copy_work(reweighted[0], tmp_path / "w")
    first = reweighted[1]
    (work / "models" / "latest.json").write_text(json.dumps(
        {"fit_id": first.fit_id, "file": f"fits/{first.path.name}", "converged": True}))
    code, out, err = call(work, "update", "--refit", "--quiet", "--format", "json")
    assert code == 0, err
    refit = json.loads(out)
    assert refit["made_by"] == "refit" and refit["refit"]["converged"]
    after = {c["label"]: c["after"] for c in reweighted[2]["tracked"]}
    compared = 0
    for c in refit["tracked"]:
        for key in ("median", "lo90", "hi90"):
            assert after[c["label"]][key] == pytest.approx(c["after"][key], rel=0.02), c["label"]
            compared += 1
    assert compared == 6    # sglang and native at accept 14, three numbers each


def test_a_first_row_at_c_above_1_is_named_as_people_read_it():
    """`update` said "the model's concurrent changes (None -> True)"."""
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.living.reweight import structure_changes

    proposal = point_mass_draws()
    lines = [ln for ln in proposal.data_csv.rstrip("\n").splitlines()
             if ln.startswith(("model,", "kimi-k2.6,b300,"))]   # the point mass's system
    text = "\n".join([lines[0] + ",concurrency", *(ln + "," for ln in lines[1:]),
                      "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,450,s,,4"]) + "\n"
    hw = load_hardware("hardware.csv", text=proposal.hardware_csv)
    data = load_measurements("new.csv", hw, text=text, methods=proposal.priors.methods)
    reasons, _, _ = structure_changes(proposal, data, proposal.priors, {})
    # (the synthetic point mass lacks other structure a real fit stores: those reasons too)
    assert ("a row at concurrency above 1: the model gains its batch terms (the context "
            "term's growth with C, the concurrency discrepancy)") in reasons
    assert not any("concurrent changes" in r or "allreduce_volume changes" in r
                   for r in reasons)


def test_a_data_file_changed_only_in_form_keeps_the_draws_as_they_are(fitted_workdir, tmp_path):
    """A blank line appended to the data file (a spreadsheet's re-save, "612" as "612.0"):
    no row added, edited or removed, but the file's hash changed, so `update` saved a new fit
    "reweighted by the likelihood of the 0 rows added since": its equal weights resampled
    the draws into a random order, and every tracked interval moved by Monte Carlo noise
    alone (the bundled fit's native row read 90% 608-989 -> 605-986, median 748 -> 751). Now
    the draws are kept in their order: the same numbers, and said so."""
    work0, first = fitted_workdir
    work = copy_work(work0, tmp_path / "w")
    data = work / "data" / "measurements.csv"
    data.write_text(data.read_text() + "\n")
    code, out, err = call(work, "update")
    assert code == 0, err
    after = store.load_fit(store.resolve(work / "models"))
    assert after.meta["made_by"] == "psis-reweight" and after.meta["fit_id"] != first.fit_id
    before = store.load_fit(first.path)
    for name, value in before.variables.items():
        np.testing.assert_array_equal(after.variables[name], value, err_msg=name)
    changes = [x for x in out.splitlines() if x.startswith("  default: ")]
    assert len(changes) == 2
    for line in changes:   # "90% A-B -> A-B tok/s (median M -> M, width 0%)"
        iv = line.split(": 90% ")[1].split(" tok/s")[0].split(" -> ")
        assert iv[0] == iv[1] and line.endswith("width 0%)"), line
    assert "no row was added, edited or removed since" in out, out


def test_an_edit_of_the_acceptance_curve_alone_keeps_the_draws_and_stores_the_new_priors(
        fitted_workdir, tmp_path):
    """docs/model.md: the acceptance curve is not fitted, "editing it needs no refit", and
    predict/optimize/next/report do not call a fit stale for it (NOT_FITTED_PRIORS). `update`
    said "priors changed since fit ..." and refitted (a full NUTS run). Now it keeps the draws
    as they are and saves a fit that stores the file's current priors text: predict warns of
    nothing, optimize does not say the curve differs from the fit's."""
    work0, first = fitted_workdir
    work = copy_work(work0, tmp_path / "w")
    priors = work / "models" / "priors.toml"
    text = priors.read_text()
    assert text.count("mu = 0.6\n") == 1   # [acceptance_curve.gain]
    priors.write_text(text.replace("mu = 0.6\n", "mu = 0.7\n") + "# curve edited\n")
    code, out, err = call(work, "update")
    assert code == 0, err
    assert "refitting on" not in out and "\nreweight " in out, out
    assert "priors changed" not in out, out
    assert ("the priors file changed only in what no fit reads ([acceptance_curve], "
            "comments)") in out, out
    after = store.load_fit(store.resolve(work / "models"))
    assert after.meta["made_by"] == "psis-reweight" and after.meta["fit_id"] != first.fit_id
    assert after.priors_toml == priors.read_text()
    before = store.load_fit(first.path)
    for name, value in before.variables.items():
        np.testing.assert_array_equal(after.variables[name], value, err_msg=name)
    code, out, err = call(work, "predict", "--accept", "12", "--strict")
    assert code == 0 and "changed since fit" not in err, err
    code, out, err = call(work, "optimize", "--format", "json")
    assert code == 0, err
    assert not [w for w in json.loads(out)["warnings"] if "acceptance curve" in w], out
    code, out, err = call(work, "update")   # and the fit is now up to date with the file
    assert code == 0 and "is up to date" in out, out


def _multi_model_proposal(tmp_path: Path, text: str):
    """A point-mass fit of two models whose ``meta["model"]`` and coordinates are the ones
    `fit` stores for ``text`` (engine.fitting.metadata), and the inputs it read."""
    import shutil

    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.pairs import target_models_meta
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine.fitting import FitInputs
    from ddtree_bayes.engine.testing import multi_model_draws

    (tmp_path / "data").mkdir(parents=True)
    shutil.copy(bundled("hardware.csv"), tmp_path / "data" / "hardware.csv")
    (tmp_path / "data" / "measurements.csv").write_text(text)
    inputs = FitInputs.read(priors=bundled("priors.toml"), workdir=tmp_path)
    spec = S.build_spec(inputs.measurements, inputs.priors, **inputs.structure())
    proposal = multi_model_draws()
    proposal.meta["model"] = json.loads(json.dumps(
        {**target_models_meta(inputs.measurements), **S.model_meta(spec, inputs.priors)}))
    proposal.meta["coords"] = {k: list(v) for k, v in spec.parameter_coords.items()}
    return proposal, inputs


def test_a_new_configuration_of_a_named_drafter_is_no_new_model(tmp_path):
    """A fit whose eagle3 rows name their drafter card (the ``drafter`` column, as
    data/public/conc/*.csv do), then one more eagle3 row of that card at another context (or
    concurrency): `update` refitted, saying "the new rows change the model: the model's
    config_pass_how changes ([...] -> [...])" in a line of 3,000 characters. That list has one
    line per configuration naming a card (its pass over the group's, what the new row's own
    likelihood reads): the new configuration's line is added, the fit's are unchanged, no
    parameter is added. On a fit of 12 rows of
    vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv (C <= 4, context 0 and 32768) plus its
    eagle3 C = 8 row at 395 tok/s, the reweight answers C = 8 per user 48.9 (45.1-53.4), a
    refit 48.8 (45.1-53.4). A line of the fit's priced otherwise is still a reason."""
    import dataclasses
    import shutil

    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.pairs import target_models_meta
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine.fitting import FitInputs
    from ddtree_bayes.engine.testing import point_mass_draws

    card = "lightseekorg/kimi-k2.5-eagle3-mla"
    lines = bundled("measurements.csv").read_text().rstrip("\n").splitlines()
    rows = [lines[0] + ",drafter", *(ln + (f",{card}" if ",eagle3," in ln else ",")
                                      for ln in lines[1:])]
    new_row = (f"kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,1.93,65536,71.0,test,,{card}")

    def read(where: Path, text: str):
        (where / "data").mkdir(parents=True)
        shutil.copy(bundled("hardware.csv"), where / "data" / "hardware.csv")
        (where / "data" / "measurements.csv").write_text(text)
        inputs = FitInputs.read(priors=bundled("priors.toml"), workdir=where)
        return inputs, S.build_spec(inputs.measurements, inputs.priors, **inputs.structure())

    before, spec = read(tmp_path / "a", "\n".join(rows) + "\n")
    proposal = point_mass_draws()
    proposal.meta["model"] = json.loads(json.dumps(
        {**target_models_meta(before.measurements), **S.model_meta(spec, before.priors)}))
    proposal.meta["coords"] = {k: list(v) for k, v in spec.parameter_coords.items()}
    assert len(proposal.meta["model"]["config_pass_how"]) == 2   # the fit's two eagle3 rows
    after, _ = read(tmp_path / "b", "\n".join([*rows, new_row]) + "\n")
    reasons, _, now = RW.structure_changes(proposal, after.measurements, after.priors,
                                           after.structure())
    assert reasons == []
    assert now["config_pass_how"][:2] == proposal.meta["model"]["config_pass_how"]
    assert "(row 11): " in now["config_pass_how"][2]
    # a configuration of the fit's priced otherwise (here: its line edited) is a reason
    edited = dataclasses.replace(proposal, meta=json.loads(json.dumps(proposal.meta)))
    edited.meta["model"]["config_pass_how"][0] += " (otherwise)"
    (reason,) = RW.structure_changes(edited, after.measurements, after.priors,
                                     after.structure())[0]
    assert reason.startswith("a configuration's drafter pass is priced otherwise (")
    assert reason.endswith(" (otherwise))")


def test_a_repeat_row_of_a_fit_of_two_models_changes_no_structure(tmp_path):
    """A repeat AR row of a measured configuration of a fit of two models: `update` refitted,
    saying "the model's target_model changes (None -> 'kimi-k2.6')" and "target_models
    changes (['acme-moe-30b-a3b', 'kimi-k2.6'] -> None)": the new data's side named the first
    row's model, not the fit's several. The only difference is the repeat (absorbed)."""
    from ddtree_bayes.engine.testing import MULTI_DATA

    proposal, _ = _multi_model_proposal(tmp_path / "a", MULTI_DATA)
    _, inputs = _multi_model_proposal(
        tmp_path / "b", MULTI_DATA + "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,139,test,\n")
    reasons, _, now = RW.structure_changes(proposal, inputs.measurements, inputs.priors,
                                           inputs.structure())
    assert reasons == []
    assert now["target_model"] is None
    assert now["target_models"] == ["kimi-k2.6", "llama-3.1-8b-instruct"]
    assert now["repeated_runs"] is True


def test_a_third_model_is_the_first_reason_a_fit_of_two_models_refits(tmp_path):
    """Rows of a model the fit of two never measured: the reason says so by name (before, the
    target_model(s) keys were compared as they are stored: "None -> 'kimi-k2.6'")."""
    from ddtree_bayes.engine.testing import MULTI_DATA

    proposal, _ = _multi_model_proposal(tmp_path / "a", MULTI_DATA)
    _, inputs = _multi_model_proposal(
        tmp_path / "b", MULTI_DATA + "qwen3-8b,h100,1,vllm,ar,,,1,1.0,,150,test,\n")
    reasons, _, _ = RW.structure_changes(proposal, inputs.measurements, inputs.priors,
                                         inputs.structure())
    assert reasons[0] == ("the target models change (kimi-k2.6, llama-3.1-8b-instruct -> "
                          "kimi-k2.6, llama-3.1-8b-instruct, qwen3-8b)")
    assert reasons[1].startswith("new systems qwen3-8b@h100x1 (parameters fit ")
    assert not any("target_model" in r for r in reasons)


def _with_rows(draws, *rows: str):
    """``draws`` over its data plus ``rows`` (a concurrency column added, blank = 1)."""
    lines = draws.data_csv.rstrip("\n").splitlines()
    text = "\n".join([lines[0] + ",concurrency", *(ln + "," for ln in lines[1:]), *rows]) + "\n"
    return draws.view(data_csv=text)


def test_a_tree_measured_at_another_concurrency_is_not_called_another_budget():
    """The B300 DDTree group measured at block 8 / budget 8 only, then the same tree at C = 8:
    its paid tree nodes per step vary (8 x 8 against 8), so its own per-node ratio replaces the
    population's, and `update` said it "now measures more than one drafter depth or tree
    budget" - there is still one (block 8, budget 8). A budget-32 row is another budget."""
    from ddtree_bayes.engine.structure import restructured_line
    from ddtree_bayes.engine.testing import point_mass_draws

    group = "b300x8/sglang/ddtree"
    same_tree = _with_rows(point_mass_draws(),
                           "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,,1900,HYPOTHETICAL,,8")
    assert restructured_line(same_tree, group) == (
        f"{group} now measures its one tree (block 8, budget 8) at more than one concurrency "
        "(C = 1, 8; C streams pay C x its tree nodes per step): its own per-node cost replaces "
        "the population's (recomputed from the draws)")
    budget_32 = _with_rows(point_mass_draws(),
                           "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,13.1,,595,HYPOTHETICAL,,")
    assert restructured_line(budget_32, group) == (
        f"{group} now measures more than one drafter depth or tree budget: its own "
        "per-pass/per-node cost replaces the population's (recomputed from the draws)")


def test_the_report_of_a_resample_computes_no_psis_loo_or_power_scaling(reweighted, tmp_path):
    """PSIS-LOO and power-scaling weigh a fit's draws as independent draws of one posterior;
    a reweighted fit's are a resample of another fit's, repeated (`compare` refuses them for
    that). The report said elpd and 4 flagged Pareto k (3 on its NUTS parent) and turned the
    headline's prior sensitivity from "weak likelihood" to "prior-data conflict": both now
    say they were not computed, why, and the fix, in every form of the report."""
    from ddtree_bayes.workflows import report

    work, first, _, _ = reweighted
    out_dir, summary = report.write_report(workdir=work, out_root=tmp_path)
    assert "loo" not in summary and "psense" not in summary
    why = summary["not_computed"]
    assert set(why) == {"loo", "psense"}
    for text in why.values():
        assert f"an importance resample of fit {first.fit_id}" in text
        assert "update --refit" in text
    assert "figure_errors" not in summary
    assert not (out_dir / "loo.png").exists() and not (out_dir / "psense.png").exists()
    page, md = (out_dir / "index.html").read_text(), (out_dir / "summary.md").read_text()
    for form in (page, md):
        assert "PSIS-LOO: not computed" in form and "Prior sensitivity (power scaling): not " \
            "computed" in form
    assert "Pareto k &gt; 0.7: " not in page and "PSIS-LOO not computed" in page
    # the other sections are there as for a sampled fit
    for key in ("ppc", "prior_posterior", "sampling", "fan"):
        assert key in summary


#: HYPOTHETICAL, typed into the file by hand: AR on the measured RTX PRO 6000 node at a
#: context past Kimi K2.6's longest (its card's max_position_embeddings, 262144 tokens), at
#: 38 tok/s, about the session fit's median there (unsurprising: a reweight absorbs it)
LONG_ROW = "kimi-k2.6,rtx-pro-6000,8,vllm,ar,,,1,1.0,300000,38,HYPOTHETICAL by hand,\n"
LONG_NOTE = ("row 11: context 300000 is above kimi-k2.6's longest, 262144 tokens "
             "(max_position_embeddings, its card)")


@pytest.mark.parametrize("way", ["psis-reweight", "refit"])
def test_update_says_what_fit_warns_of_the_data(fitted_workdir, tmp_path, monkeypatch, way):
    """What `fit` warns of a data file (and `add` of a row it keeps) was lost by `update`: a
    reweight read the file and said nothing of a row at context 300000 > 262144, the model's
    longest (exit 0, the line nowhere), and a refit printed fit's lines on stderr but its JSON
    `warnings` held only the tracked queries' (the lines it printed, the doc says). Both
    ways now say the data's lines on stderr and in `warnings`, before the tracked queries'."""
    from ddtree_bayes import api

    work = copy_work(fitted_workdir[0], tmp_path / "w")
    data = work / "data" / "measurements.csv"
    data.write_text(data.read_text() + LONG_ROW)
    argv = ["update", "--format", "json"]
    if way == "refit":   # (the refit mocked: the session fit, with the lines fit printed)
        import dataclasses

        def fake_fit(*args, **kwargs):
            line = f"{data.resolve()}, {LONG_NOTE}: kept"
            print(f"ddtree-bayes: warning: {line}", file=sys.stderr)
            return dataclasses.replace(fitted_workdir[1], warnings=[line])

        monkeypatch.setattr(api, "fit", fake_fit)
        argv.append("--refit")
    code, out, err = call(work, *argv)
    assert code == 0, err
    payload = json.loads(out)
    validate_output("update", payload)
    assert payload["made_by"] == way, payload["refit_reasons"]
    said = [w for w in payload["warnings"] if LONG_NOTE in w]
    assert len(said) == 1 and said[0].startswith(str(data.resolve())), payload["warnings"]
    assert payload["warnings"].index(said[0]) == 0   # (the data's lines first, as printed)
    assert err.count(LONG_NOTE) == 1, err   # (printed once: a refit's fit prints it itself)
    if way == "psis-reweight":   # the table form says it too
        data.write_text(data.read_text() + LONG_ROW.replace(",38,", ",37.5,"))
        code, out, err = call(work, "update")
        assert code == 0 and "made_by" not in out and "reweighted by the likelihood" in out, out
        assert f"ddtree-bayes: warning: {data.resolve()}, {LONG_NOTE}" in err, err
        assert "row 12: context 300000 is above" in err, err

"""Model comparison (PSIS-LOO, stacking) and model-averaged predictions."""

import math

import pytest

from ddtree_bayes.cli import main as cli
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine import compare
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.testing import point_mass_draws


def test_pointwise_loglik_by_hand():
    import dataclasses

    draws = point_mass_draws(n=4, noise_sd=0.05)
    b300_only = "\n".join(line for line in draws.data_csv.splitlines()
                           if line.startswith("model,") or ",b300," in line) + "\n"
    draws = dataclasses.replace(draws, data_csv=b300_only)
    measurements, loglik, log_mu = compare.pointwise_loglik(draws)
    # B300 AR row: the point mass has an 8 ms step -> 125 tok/s against 133 measured
    assert math.exp(log_mu[0, 0]) == pytest.approx(125.0)
    z = (math.log(133) - math.log(125)) / 0.05
    assert loglik[0, 0] == pytest.approx(-0.5 * z * z - math.log(0.05) - 0.5 * math.log(2 * math.pi))
    assert loglik.shape == (4, len(measurements.rows))


def test_mixture_mixes_predictive_draws_by_weight():
    fast = point_mass_draws(n=4000)                        # 20 ms step at M=33 -> 600 tok/s
    slow = point_mass_draws(n=4000, overhead_frac=[0.36])  # 16/0.64 = 25 ms -> 480 tok/s
    slow.meta["fit_id"] = "slow"
    rows = P.predict(fast, accept="12", engines=["sglang"],
                          mixture=[(fast, 0.25), (slow, 0.75)])
    (r,) = rows
    assert r["median"] == pytest.approx(480.0) and r["hi90"] == pytest.approx(600.0)
    assert r["lo90"] == pytest.approx(480.0)
    only_fast = P.predict(fast, accept="12", engines=["sglang"],
                               mixture=[(fast, 1.0), (slow, 0.0)])
    assert only_fast[0]["median"] == pytest.approx(600.0)


def test_a_model_average_says_how_likely_speculation_beats_ar():
    """predict --model-average --concurrency dropped the P(faster than AR) column: the mixture
    has it, each fit's weighted. AR steps 8 ms (1/8 token per ms); DDTree budget 32 steps
    20 ms in `fast`, 25 ms in `slow`: at acceptance 3, 3/20 > 1/8 but 3/25 < 1/8, so fast
    says 1, slow 0, and the 0.25 / 0.75 mixture 0.25."""
    fast = point_mass_draws(n=400)
    slow = point_mass_draws(n=400, overhead_frac=[0.36])
    slow.meta["fit_id"] = "slow"
    mixture = [(fast, 0.25), (slow, 0.75)]
    (r,) = P.predict(fast, accept="3", engines=["sglang"], concurrency=[1], mixture=mixture)
    assert r["p_faster_than_ar"] == pytest.approx(0.25)
    for d, want in ((fast, 1.0), (slow, 0.0)):
        (alone,) = P.predict(d, accept="3", engines=["sglang"], concurrency=[1])
        assert alone["p_faster_than_ar"] == want
    (r,) = P.predict(fast, accept="3", engines=["sglang"], concurrency=[1],
                     mixture=[(fast, 1.0), (slow, 0.0)])
    assert r["p_faster_than_ar"] == 1.0


def test_compare_roofline_and_linear_fits(fitted_workdir, capsys, monkeypatch, tmp_path):
    import shutil

    work, result = fitted_workdir
    shutil.copytree(work, tmp_path / "w")  # keep the shared fixture's latest fit as it is
    monkeypatch.chdir(tmp_path / "w")
    assert cli.main(["fit", "--moe-form", "linear", "--quiet", "--format", "json"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", "--format", "json"]) == 0
    import json

    res = json.loads(capsys.readouterr().out)
    forms = sorted(r["model"].split("(")[1].rstrip(")") for r in res["rows"])
    assert forms == ["linear/structured", "roofline/structured"]  # the default forms
    assert sum(r["weight"] for r in res["rows"]) == pytest.approx(1.0)
    assert all(0 <= r["pareto_k_above_0.7"] <= 9 for r in res["rows"])
    # the figures are arviz-stats' own, unrounded (round_to=None rounded them to 2 significant
    # figures: elpd 16.0 where loo() gave 15.768)
    import warnings

    import arviz_stats as azs

    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.compare import loo_tree

    for r in res["rows"]:
        fit = store.load(r["model"].split(" ")[0])
        with warnings.catch_warnings():   # (Pareto k > 0.7: compare counts them, above)
            warnings.simplefilter("ignore")
            loo = azs.loo(loo_tree(fit, int(fit.meta["sampler"]["chains"])))
        assert (r["elpd_loo"], r["p_loo"], r["se"]) == pytest.approx(
            (float(loo.elpd), float(loo.p), float(loo.se)), rel=1e-9)
    assert cli.main(["predict", "--accept", "14", "--model-average", "--format", "json"]) == 0
    out = capsys.readouterr()
    assert "model average:" in out.err
    payload = json.loads(out.out)
    assert payload["rows"][0]["median"] > 0
    mixed = payload["model_average"]     # the fits mixed, the one asked for among them
    assert payload["fit_id"] in [a["fit_id"] for a in mixed]
    assert sum(a["weight"] for a in mixed) == pytest.approx(1.0)


def test_compare_refuses_different_data():
    import dataclasses

    a, b = point_mass_draws(n=100), point_mass_draws(n=100)
    # (a row's tok_s differs: the same text but for its notes would be the same data, below)
    b = dataclasses.replace(b, data_csv=b.data_csv.replace(",133,", ",134,", 1), memo={})
    b.meta["fit_id"] = "point-mass-b"
    a.meta["data"] = {"sha256": "a"}
    b.meta["data"] = {"sha256": "b"}
    with pytest.raises(QueryError, match="different data"):
        compare.compare_fits([a, b])
    with pytest.raises(QueryError, match="at least two"):
        compare.compare_fits([a])


def test_fits_whose_rows_differ_only_in_notes_are_of_the_same_data():
    """ac9965d3 left a fit fresh after an edit of a row's notes or source alone (no fit reads
    them), but compare and --model-average still told data apart by the file's hash: a fit
    made after such an edit and one made before were "made on different data" (compare
    refused them, --model-average passed the other form's fit over). The same rows but for a
    note are the same data now; a tok_s edit (133 -> 134, its notes edited too) is not."""
    import dataclasses
    import warnings

    fitted = point_mass_draws(n=100).data_csv
    noted = fitted.replace('"C=1 autoregressive;', '"C=1 autoregressive, rerun;', 1)
    assert noted != fitted
    a = point_mass_draws(n=100)
    b = dataclasses.replace(point_mass_draws(n=100), data_csv=noted, memo={})
    b.meta["fit_id"] = "point-mass-b"
    for d, sha in ((a, "a"), (b, "b")):
        d.meta["data"] = {**d.meta["data"], "sha256": sha}
        d.meta["sampler"] = {"chains": 4}
    assert compare.inputs_unlike(a, b) == []
    with warnings.catch_warnings():   # (point masses: a PSIS-LOO of NaN, compared all the same)
        warnings.simplefilter("ignore")
        assert len(compare.compare_fits([a, b])["rows"]) == 2
    c = dataclasses.replace(b, data_csv=noted.replace(",133,", ",134,", 1), memo={})
    assert compare.inputs_unlike(a, c) == ["data"]
    with pytest.raises(QueryError, match="different data"):
        compare.compare_fits([a, c])


def test_compare_refuses_a_fit_named_twice(tmp_path):
    """`compare --fits X,latest` with X the latest fit printed a one-row ranking of X with
    weight 1.00, exit 0 (--fits X,X was already refused at the flag)."""
    from test_cli_support import FIT_ID, make_point_mass_workdir, run_cli

    a, b = point_mass_draws(n=100), point_mass_draws(n=100)
    with pytest.raises(QueryError) as err:
        compare.compare_fits([a, b])
    assert str(err.value) == (
        "fit point-mass is named twice (as its id and as latest, say): a fit compared with "
        "itself ranks nothing (fix: compare two or more different fits (ids from "
        "`ddtree-bayes history`))")
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "compare", "--fits", f"{FIT_ID},latest")
    assert code == 2 and out == "" and err == (
        f"ddtree-bayes: error: fit {FIT_ID} is named twice (as its id and as latest, say): a "
        "fit compared with itself ranks nothing (fix: compare two or more different fits (ids "
        "from `ddtree-bayes history`))\n")


def test_a_library_note_keeps_its_decimal_point():
    """compare printed ArviZ's Pareto k warning as "note: Estimated shape parameter of
    Pareto distribution is greater than 0", cut at the decimal point of 0.70."""
    import importlib
    import warnings

    import numpy as np

    helper = importlib.import_module("arviz_stats.loo.loo_helper")   # (azs.loo is a function)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        helper._warn_pareto_k(np.array([0.9]), 4000)
    assert [compare.first_sentence(str(w.message)) for w in caught] == [
        "Estimated shape parameter of Pareto distribution is greater than 0.70 for one or "
        "more samples"]


def test_compare_refuses_an_unconverged_fit_and_too_few_draws():
    """`compare --fits GOOD,BAD` ranked an unconverged fit (R-hat 1.138) first with weight
    0.95, exit 0; a fit of 4 x 5 draws ended in "internal error" inside PSIS."""
    good, bad = point_mass_draws(n=100), point_mass_draws(n=100)
    bad.meta.update(fit_id="bad", converged=False, failures=["R-hat 1.138 > 1.01 (moe_share)"])
    with pytest.raises(QueryError, match=r"failed its convergence gates \(R-hat 1.138"):
        compare.compare_fits([good, bad])
    with pytest.raises(QueryError, match="has 20 posterior draws; PSIS-LOO needs at least 25"):
        few = point_mass_draws(n=20)
        few.meta["fit_id"] = "few"
        compare.compare_fits([good, few])


def test_compare_refuses_an_importance_resample():
    """`compare --fits <reweighted>,<NUTS fit>` ran PSIS-LOO on update's importance resample
    (repeated draws, 'chains' that are no Markov chains) and printed ArviZ's raw Pareto note."""
    good, resampled = point_mass_draws(n=100), point_mass_draws(n=100)
    resampled.meta.update(fit_id="R", reweight={"parent_fit": "P", "distinct_draws": 37})
    with pytest.raises(QueryError) as err:
        compare.compare_fits([good, resampled])
    assert str(err.value) == (
        "fit R is an importance resample of fit P (37 distinct draws of 100): its repeated draws "
        "and chains that are no Markov chains give PSIS-LOO nothing it can trust (fix: "
        "`ddtree-bayes update --refit` samples the same data with NUTS; compare that fit)")


def test_model_average_mixes_only_fits_of_the_same_priors(tmp_path, monkeypatch):
    """--model-average takes the latest converged fit of each form on the anchor's data: a
    fit made before the priors file changed mixed the old priors into the answer (an audit
    moved the native engine's median from 582 to 703 that way). Fits of another priors file
    are passed over; with one form left it is refused."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.compare import latest_per_form

    def fit(fit_id, form, priors):
        return NS(meta={"fit_id": fit_id, "converged": True, "data": {"sha256": "d"},
                        "priors": {"sha256": priors}, "model": {"moe_form": form,
                                                                "step_form": "structured"}},
                  hardware_csv="", hardware={})

    fits = {"0": fit("0", "roofline", "old"), "1": fit("1", "roofline", "old"),
            "2": fit("2", "linear", "old"), "3": fit("3", "roofline", "new")}
    (tmp_path / "models" / "fits").mkdir(parents=True)
    for name in fits:
        (tmp_path / "models" / "fits" / f"{name}.nc").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(store, "load_fit", lambda path: fits[path.stem])
    assert [d.meta["fit_id"] for d in latest_per_form(fits["2"])] == ["1", "2"]
    # `--fit 0 --model-average` mixes fit 0 itself, not the later fit 1 of its form (it was
    # named in the header while fit 1 gave the draws)
    assert [d.meta["fit_id"] for d in latest_per_form(fits["0"])] == ["0", "2"]
    with pytest.raises(QueryError, match="two model forms on the data, priors, hardware table "
                                         "and cards of fit 3; found 1"):
        latest_per_form(fits["3"])
    # update's importance resample (fit 4, of fit 1) is passed over as another form's fit,
    # and refused as the fit asked for, in predict's words
    fits["4"] = fit("4", "roofline", "old")
    fits["4"].meta["reweight"] = {"parent_fit": "1", "distinct_draws": 900}
    (tmp_path / "models" / "fits" / "4.nc").write_text("")
    assert [d.meta["fit_id"] for d in latest_per_form(fits["2"])] == ["1", "2"]
    with pytest.raises(QueryError) as err:
        latest_per_form(fits["4"])
    assert str(err.value) == ("fit 4 is an importance resample of fit 1 (update without a "
                              "refit): --model-average weighs fits by PSIS-LOO, which needs NUTS "
                              "draws (fix: `ddtree-bayes update --refit` samples the same data "
                              "with NUTS)")


def test_model_average_mixes_only_fits_of_the_same_hardware_table_and_cards(tmp_path,
                                                                           monkeypatch):
    """A fit of the same data and priors made before data/hardware.csv changed was mixed into
    --model-average without a word: on a fit of the bundled rows, h100's bandwidth 3.35 ->
    6.7 TB/s and a refit of the power form, the roofline fit made on the old table answered
    h100 sglang 402 (200-694) tok/s where its refit on the new one answers 482 (249-806), and
    the mixture carried it. A fit whose table differs in a GPU's values, or whose card of a
    model both fits store differs in a modelled field (or its drafter cards), is passed over;
    a source reworded, a field the model does not read, or a form that stores no card is no
    difference."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.compare import inputs_unlike, latest_per_form

    h100 = {"hardware": "h100", "mem_bw_tb_s": "3.35", "source": "NVIDIA H100 SXM spec"}
    card = {"model": "kimi-k2.6", "layers": 61, "max_context_tokens": 262144}

    def fit(fit_id, form, created, bw="3.35", source="NVIDIA H100 SXM spec", layers=61,
            context=262144, with_card=True, drafters=None):
        model = {"moe_form": form, "step_form": "structured"}
        if with_card:
            model["card"] = {**card, "layers": layers, "max_context_tokens": context}
        if drafters is not None:
            model["drafter_cards"] = drafters
        return NS(meta={"fit_id": fit_id, "converged": True, "data": {"sha256": "d"},
                        "priors": {"sha256": "p"}, "created_utc": f"2026-12-07T{created}Z",
                        "model": model},
                  hardware_csv=f"{bw},{source}",
                  hardware={"h100": {**h100, "mem_bw_tb_s": bw, "source": source}})

    drafter = {"drafter": "d", "target_model": "kimi-k2.6", "methods": ["eagle3"],
               "layers": 1, "default": True}
    files = {
        "a": fit("a", "roofline", "10:00:00", drafters=[drafter]),   # the old table
        "b": fit("b", "power", "11:00:00", bw="6.7", with_card=False),   # the anchor
        "c": fit("c", "linear", "09:00:00", bw="6.7", source="reworded", context=131072),
        "d": fit("d", "roofline", "08:00:00", bw="6.7", layers=60),   # another card
        "e": fit("e", "roofline", "07:00:00", bw="6.7", drafters=[drafter]),
        "f": fit("f", "roofline", "12:00:00", bw="6.7",
                 drafters=[{**drafter, "layers": 2}]),   # another drafter card
    }
    assert inputs_unlike(files["a"], files["b"]) == ["hardware table"]
    assert inputs_unlike(files["c"], files["b"]) == []   # a source, a field not modelled
    assert inputs_unlike(files["d"], files["e"]) == ["model cards"]
    assert inputs_unlike(files["f"], files["e"]) == ["drafter cards"]
    assert inputs_unlike(files["d"], files["b"]) == []   # the power form stores no card
    (tmp_path / "models" / "fits").mkdir(parents=True)
    for name in files:
        (tmp_path / "models" / "fits" / f"{name}.nc").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(store, "load_fit", lambda path: files[path.stem])
    # the anchor's roofline: the latest on its table (f, 12:00), not a (10:00, older table)
    assert sorted(d.meta["fit_id"] for d in latest_per_form(files["b"])) == ["b", "c", "f"]
    # e's roofline is e itself; d (another card) and f (another drafter) are passed over
    assert sorted(d.meta["fit_id"] for d in latest_per_form(files["e"])) == ["b", "c", "e"]
    files.pop("c")
    (tmp_path / "models" / "fits" / "c.nc").unlink()
    with pytest.raises(QueryError, match="two model forms on the data, priors, hardware table "
                                         "and cards of fit a; found 1"):
        latest_per_form(files["a"])


def test_the_latest_fit_of_a_form_is_the_last_created_not_the_last_file_name(tmp_path,
                                                                             monkeypatch):
    """--model-average and compare took the last file of each form in name order:
    backup.nc (a copy of the 10:00 power fit, so that fit's metadata) sorts after every
    dated id, and X-2.nc (a second fit stamped the same second as X) sorts before X.nc
    ("-" is below "."). The latest is now the fit's own created_utc, then the same-second
    suffix as a number (X, X-2, X-9, X-10), then the id and file name: here the power fit
    created at 12:00 with suffix -10."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.compare import latest_per_form

    def fit(fit_id, form, created):
        return NS(meta={"fit_id": fit_id, "converged": True, "data": {"sha256": "d"},
                        "priors": {"sha256": "p"}, "created_utc": created,
                        "model": {"moe_form": form, "step_form": "structured"}},
                  hardware_csv="", hardware={})

    noon, ten = "2026-12-07T12:00:00+00:00", "2026-12-07T10:00:00+00:00"
    old = fit("20261207T100000Z-aaaaaaaa", "power", ten)
    files = {"20261207T100000Z-aaaaaaaa": old, "backup": old,
             "20261207T090000Z-cccccccc": fit("20261207T090000Z-cccccccc", "linear",
                                              "2026-12-07T09:00:00+00:00")}
    for suffix in ("", "-2", "-9", "-10"):
        files[f"20261207T120000Z-bbbbbbbb{suffix}"] = fit(f"20261207T120000Z-bbbbbbbb{suffix}",
                                                          "power", noon)
    (tmp_path / "models" / "fits").mkdir(parents=True)
    for name in files:
        (tmp_path / "models" / "fits" / f"{name}.nc").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(store, "load_fit", lambda path: files[path.stem])
    anchor = files["20261207T090000Z-cccccccc"]
    assert [d.meta["fit_id"] for d in latest_per_form(anchor)] == [
        "20261207T090000Z-cccccccc", "20261207T120000Z-bbbbbbbb-10"]


def test_compare_se_is_each_fits_psis_loo_se_whatever_the_weights():
    """Under the default bb-pseudo-bma weights arviz-stats puts the Bayesian bootstrap's sd of
    elpd in "se": `compare` printed se 1.57 for the bundled fit whose report (and `compare
    --weights stacking`) says elpd 15.61 +- 1.71. The se is now each fit's own PSIS-LOO se."""
    import dataclasses
    import warnings

    import arviz_stats as azs
    import numpy as np

    def fit(fit_id, seed, **overrides):
        d = point_mass_draws(n=400, noise_sd=0.05, **overrides)
        d = dataclasses.replace(d, data_csv="\n".join(
            line for line in d.data_csv.splitlines()
            if line.startswith("model,") or ",b300," in line) + "\n")
        d.variables["noise_sd"] = np.random.default_rng(seed).uniform(0.04, 0.08, 400)
        d.meta.update(fit_id=fit_id, sampler={"chains": 4})
        return d

    a, b = fit("a", 1), fit("b", 2, overhead_frac=[0.36])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = {d.meta["fit_id"]: float(azs.loo(compare.loo_tree(d, 4)).se) for d in (a, b)}
        for method in compare.WEIGHT_METHODS:
            res = compare.compare_fits([a, b], method=method)
            assert {r["model"].split(" ")[0]: r["se"] for r in res["rows"]} == pytest.approx(
                own, rel=1e-12), method
    assert own["a"] == pytest.approx(3.8438, abs=1e-4)   # bb-pseudo-bma's "se" was 2.2208


def test_pareto_k_is_counted_above_the_threshold_arviz_uses(monkeypatch, capsys):
    """compare counted Pareto k above a fixed 0.7; arviz-stats (and the PSIS paper) trust k up
    to min(1 - 1/log10(S), 0.7): 0.616 for S = 400 draws, where k = 0.65 and 0.69 are
    already unreliable (arviz's own note said 'greater than 0.62' beside a count of 1). The
    rows now carry the threshold and the count above it; `pareto_k_above_0.7` keeps its
    meaning. The trees are synthetic (4 chains x 100 draws, 5 rows) and the k values set by
    hand."""
    import json

    import arviz_stats as azs
    import numpy as np
    import xarray as xr

    from ddtree_bayes.engine.psis import khat_threshold
    from test_json_schemas import validate_output

    def tree(draws, chains, seed, unit=None):
        rng = np.random.default_rng(seed)
        ll = rng.normal(-1.0, 0.1, size=(4, 100, 5))
        dims = ("chain", "draw", "measurement")
        out = xr.DataTree.from_dict({
            "posterior": xr.Dataset({"a": (("chain", "draw"), rng.normal(size=(4, 100)))}),
            "log_likelihood": xr.Dataset({"log_tok_s": (dims, ll)}),
            "posterior_predictive": xr.Dataset({"log_tok_s": (dims, ll)}),
            "observed_data": xr.Dataset({"log_tok_s": ("measurement", np.zeros(5))})})
        out.attrs["unit"] = "row"
        return out

    real_loo = azs.loo

    def loo(t, pointwise=True, **kw):
        out = real_loo(t, pointwise=pointwise, **kw)
        out.pareto_k.values[:] = [0.2, 0.65, 0.69, 0.75, 0.5]
        return out

    monkeypatch.setattr(compare, "loo_tree", tree)
    monkeypatch.setattr(azs, "loo", loo)
    fits = [point_mass_draws(n=400), point_mass_draws(n=400, overhead_frac=[0.3])]
    fits[1].meta["fit_id"] = "other"
    for d in fits:
        d.meta["sampler"] = {"chains": 4}
    res = compare.compare_fits(fits, seed=1)
    threshold = 1 - 1 / math.log10(400)
    assert threshold == pytest.approx(0.6157, abs=1e-4) == khat_threshold(400)
    for r in res["rows"]:
        assert r["pareto_k_threshold"] == pytest.approx(threshold)
        assert r["pareto_k_above_threshold"] == 3   # 0.65, 0.69 and 0.75
        assert r["pareto_k_above_0.7"] == 1
    validate_output("compare", json.loads(json.dumps(res)))

    monkeypatch.setattr("ddtree_bayes.engine.compare.compare_fits", lambda fits, **kw: res)
    monkeypatch.setattr("ddtree_bayes.api.load", lambda *a, **kw: fits[0])
    assert cli.main(["compare", "--fits", "a,b"]) == 0
    out = capsys.readouterr().out
    header, _, first = out.splitlines()[:3]
    assert header.rstrip().endswith("Pareto k > 0.62") and first.rstrip().endswith(" 3")
    assert ("where Pareto k > 0.62 (min(1 - 1/log10(S), 0.7) for a fit's S posterior draws) "
            "the estimate is unreliable") in out


def test_compare_help_says_what_the_default_weighs_and_compares():
    """`compare --help` said "stacking weights" and "each MoE form", but the default weights
    are bb-pseudo-bma and the default fits are the latest of each model form (MoE form / step
    form: roofline/structured beside roofline/fraction is a comparison of step forms)."""
    import argparse

    (sub,) = [a for a in cli.build_parser()._actions
              if isinstance(a, argparse._SubParsersAction)]
    text = sub.choices["compare"].description
    assert "stacking weights" not in text and "each MoE form" not in text
    assert ("PSIS-LOO (arviz-stats compare) of fits made on the same data, weighted by "
            "--weights (default bb-pseudo-bma). Default fits: the latest converged fit of each "
            "model form (MoE form / step form, e.g. roofline/structured and roofline/fraction) "
            "on the latest fit's data; fit another form with `ddtree-bayes fit --step-form "
            "fraction` or `--moe-form linear`.") in text


def test_model_average_warns_when_its_weights_rest_on_unreliable_psis_loo(monkeypatch):
    """predict --model-average mixed two forms at PSIS-LOO weights 0.05 / 0.95 with no word
    that 3 and 4 of the 9 rows had Pareto k above 0.7, where `compare` says the estimate is
    unreliable: the answer leaned on weights nothing vouched for. The weights and the counts
    are set by hand (compare_fits and latest_per_form stand in)."""
    from types import SimpleNamespace as NS

    rows = point_mass_draws().measurements

    def fit(fit_id, form):
        return NS(meta={"fit_id": fit_id, "model": {"moe_form": "roofline", "step_form": form}},
                  measurements=rows)

    a, b = fit("A", "structured"), fit("B", "fraction")

    def row(label, weight, above):
        return {"model": label, "weight": weight, "pareto_k_threshold": 0.7,
                "pareto_k_above_threshold": above}

    res = {"rows": [row("B (roofline/fraction)", 0.95, 4), row("A (roofline/structured)", 0.05, 3)],
           "weights": {"A": 0.05, "B": 0.95}, "notes": []}
    monkeypatch.setattr(compare, "latest_per_form", lambda *a_, **k: [a, b])
    monkeypatch.setattr(compare, "compare_fits", lambda fits, **kw: res)
    said: list[str] = []
    mixture = compare.model_average(a, warnings=said)
    assert [(d.meta["fit_id"], w) for d, w in mixture] == [("A", 0.05), ("B", 0.95)]
    assert said == ["--model-average: the PSIS-LOO weights (A 0.05, B 0.95) rest on leave-one-out "
                    "estimates with Pareto k > 0.7, unreliable, for 4 rows of fit B "
                    "(roofline/fraction) and 3 of fit A (roofline/structured): the mixture may "
                    "lean on the wrong form (`ddtree-bayes compare` lists them; `ddtree-bayes "
                    "validate` refits each row left out)"]
    for r in res["rows"]:
        r["pareto_k_above_threshold"] = 0
    said = []
    compare.model_average(a, warnings=said)
    assert said == []


def test_model_average_warning_counts_configurations_when_loo_leaves_them_out(monkeypatch):
    """The warning said "4 rows" where PSIS-LOO leaves out configurations (above
    LOO_ROW_LIMIT rows, or with repeated runs; engine/fitted_rows.loo_unit): the Pareto k
    values, so the counts, are per configuration. Here row 2 is run twice, and one
    configuration of fit A has a k above the threshold: "1 configuration"."""
    import dataclasses
    from types import SimpleNamespace as NS

    data = point_mass_draws().measurements
    again = dataclasses.replace(data.rows[0], row=len(data.rows) + 2, tok_s=data.rows[0].tok_s * 1.01)
    data = dataclasses.replace(data, rows=(*data.rows, again))

    def fit(fit_id, form):
        return NS(meta={"fit_id": fit_id, "model": {"moe_form": "roofline", "step_form": form}},
                  measurements=data)

    a, b = fit("A", "structured"), fit("B", "fraction")
    res = {"rows": [{"model": "A (roofline/structured)", "weight": 1.0, "pareto_k_threshold": 0.7,
                     "pareto_k_above_threshold": 1},
                    {"model": "B (roofline/fraction)", "weight": 0.0, "pareto_k_threshold": 0.7,
                     "pareto_k_above_threshold": 0}],
           "weights": {"A": 1.0, "B": 0.0}, "notes": []}
    monkeypatch.setattr(compare, "latest_per_form", lambda *a_, **k: [a, b])
    monkeypatch.setattr(compare, "compare_fits", lambda fits, **kw: res)
    said: list[str] = []
    compare.model_average(a, warnings=said)
    assert said == ["--model-average: the PSIS-LOO weights (A 1.00, B 0.00) rest on leave-one-out "
                    "estimates with Pareto k > 0.7, unreliable, for 1 configuration of fit A "
                    "(roofline/structured): the mixture may lean on the wrong form "
                    "(`ddtree-bayes compare` lists them; `ddtree-bayes validate` refits each "
                    "row left out)"]


def test_compare_note_gives_the_reason_loo_leaves_out_configurations(monkeypatch):
    """compare's note said "more than 2000 rows: PSIS-LOO leaves out one configuration ..."
    whenever LOO worked per configuration, also for 10 rows of which one is a repeated run,
    where the reason is the repeat (engine/fitted_rows.loo_unit). The trees are synthetic:
    only the note is checked, for repeated runs, for 2001 rows each its own configuration,
    and for both."""
    import dataclasses
    from types import SimpleNamespace as NS

    import numpy as np
    import xarray as xr

    from ddtree_bayes.engine import fitted_rows as M

    def tree(d, chains, seed, unit=None):
        rng = np.random.default_rng(seed)
        ll = rng.normal(-1.0, 0.1, size=(4, 100, 5))
        dims = ("chain", "draw", "configuration")
        out = xr.DataTree.from_dict({
            "posterior": xr.Dataset({"a": (("chain", "draw"), rng.normal(size=(4, 100)))}),
            "log_likelihood": xr.Dataset({"log_tok_s": (dims, ll)}),
            "posterior_predictive": xr.Dataset({"log_tok_s": (dims, ll)}),
            "observed_data": xr.Dataset({"log_tok_s": ("configuration", np.zeros(5))})})
        out.attrs["unit"] = M.data_loo_unit(d.measurements)
        return out

    monkeypatch.setattr(compare, "loo_tree", tree)
    monkeypatch.setattr(compare, "require_psis_draws", lambda *a, **k: None)
    base = point_mass_draws().measurements
    first = base.rows[0]
    again = dataclasses.replace(first, row=len(base.rows) + 2, tok_s=first.tok_s * 1.01)
    many = tuple(dataclasses.replace(first, row=i + 2, context_tokens=float(i))
                 for i in range(M.LOO_ROW_LIMIT + 1))

    def note(rows):
        data = dataclasses.replace(base, rows=rows)
        fits = [NS(meta={"fit_id": fit_id, "converged": True, "data": {"sha256": "x"},
                         "sampler": {"chains": 4},
                         "model": {"moe_form": "roofline", "step_form": form}},
                   measurements=data, n_draws=400)
                for fit_id, form in (("A", "structured"), ("B", "fraction"))]
        return [n for n in compare.compare_fits(fits, seed=1)["notes"]
                if "PSIS-LOO leaves out" in n]

    assert len(base.rows) + 1 < M.LOO_ROW_LIMIT
    assert note((*base.rows, again)) == [
        "repeated runs of a configuration: PSIS-LOO leaves out one configuration (all its "
        "repeated runs) at a time, not one row"]
    assert note(many) == ["more than 2000 rows: PSIS-LOO leaves out one configuration at a "
                          "time, not one row"]
    assert note((*many, dataclasses.replace(many[0], row=len(many) + 2))) == [
        "more than 2000 rows, with repeated runs of a configuration: PSIS-LOO leaves out one "
        "configuration (all its repeated runs) at a time, not one row"]
    assert note(base.rows) == []


def test_a_model_average_p_faster_than_ar_is_a_probability():
    """`compare`'s PSIS-LOO weights of two real fits, 0.5840969232202099 and
    0.41590307677979066 (the bundled data's roofline and power fits), sum to
    1.0000000000000004 in floating point. Both fits say speculation beats AR in every draw
    (acceptance 12: 12/20 ms against 1/8 ms), so the mixture's P is 1; the weighted sum was
    1.0000000000000004, which `predict --model-average --concurrency 1,4 --format json`
    printed and predict.schema.json (maximum 1) refuses."""
    fast = point_mass_draws(n=400)
    other = point_mass_draws(n=400, overhead_frac=[0.1])   # 16/0.9 = 17.8 ms: also faster
    other.meta["fit_id"] = "other"
    mixture = [(fast, 0.5840969232202099), (other, 0.41590307677979066)]
    (r,) = P.predict(fast, accept="12", engines=["sglang"], concurrency=[1], mixture=mixture)
    assert r["p_faster_than_ar"] == 1.0


def test_a_fit_without_created_utc_stands_where_its_id_time_puts_it(tmp_path, monkeypatch):
    """A fit an older ddtree-bayes wrote without created_utc (it is optional metadata) was
    ordered as "" by --model-average and compare, the oldest of all, while `history` put it at
    the time its id carries: a power fit stamped 7 Dec 12:00 lost to one of 1 Dec, and the
    two commands named different latest fits. Both now order it by its id's time."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.compare import latest_per_form

    assert store.fit_order(None, "20261207T120000Z-aaaaaaaa") == store.fit_order(
        "2026-12-07T12:00:00+00:00", "20261207T120000Z-aaaaaaaa")
    assert store.fit_order(None, "20261207T120000Z-aaaaaaaa") > store.fit_order(
        "2026-12-01T00:00:00+00:00", "20261201T000000Z-bbbbbbbb")

    def fit(fit_id, form, created):
        meta = {"fit_id": fit_id, "converged": True, "data": {"sha256": "d"},
                "priors": {"sha256": "p"}, "model": {"moe_form": form,
                                                     "step_form": "structured"}}
        return NS(meta=meta if created is None else {**meta, "created_utc": created},
                  hardware_csv="", hardware={})

    files = {"20261207T120000Z-aaaaaaaa": fit("20261207T120000Z-aaaaaaaa", "power", None),
             "20261201T000000Z-bbbbbbbb": fit("20261201T000000Z-bbbbbbbb", "power",
                                              "2026-12-01T00:00:00+00:00"),
             "20261130T000000Z-cccccccc": fit("20261130T000000Z-cccccccc", "linear",
                                              "2026-11-30T00:00:00+00:00")}
    (tmp_path / "models" / "fits").mkdir(parents=True)
    for name in files:
        (tmp_path / "models" / "fits" / f"{name}.nc").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(store, "load_fit", lambda path: files[path.stem])
    assert [d.meta["fit_id"] for d in latest_per_form(files["20261130T000000Z-cccccccc"])] == [
        "20261130T000000Z-cccccccc", "20261207T120000Z-aaaaaaaa"]

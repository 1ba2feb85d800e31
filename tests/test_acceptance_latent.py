"""Rows without accept_len: validation, acceptance groups and priors, the latent acceptance's
prior and likelihood by hand, predict without --accept from its posterior, validation and the
least-squares baseline on such rows, `add --accept infer`, and a parameter-recovery fit (slow).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import shutil

import numpy as np
import pytest

from ddtree_bayes.core import acceptance_latent as AL
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.data import COLUMNS, load_hardware, load_measurements
from ddtree_bayes.core.errors import DataError, PriorsError, QueryError
from ddtree_bayes.core.methods import max_accept
from ddtree_bayes.core.paths import bundled
from test_cli_support import copy_bundled_data

HW = load_hardware(bundled("hardware.csv"))
PRIORS = parse_priors(bundled("priors.toml").read_text(), "priors.toml")
HEADER = ",".join(COLUMNS)


def row(method="eagle3", block="3", budget="3", accept="", ctx="0", tok="100", verify="",
        engine="vllm", hardware="rtx-pro-6000", gpus="8", model="kimi-k2.6"):
    return ",".join([model, hardware, gpus, engine, method, block, budget, verify, accept, ctx,
                     tok, "test", ""])


def load(*rows: str):
    return load_measurements("t.csv", HW, text="\n".join([HEADER, *rows]) + "\n")


# ------------------------------------------------------------------ data validation
def test_blank_accept_on_a_speculative_row_is_inferred():
    (m,) = load(row()).rows
    assert m.accept_len is None and m.accept_inferred and m.step_ms is None
    assert m.verify_tokens == 4


def test_blank_accept_on_an_ar_row_is_one():
    (ar,) = load(row(method="ar", block="", budget="")).rows
    assert ar.accept_len == 1.0
    assert ar.step_ms == pytest.approx(10.0)       # 1 token / 100 tok/s


def test_a_speculative_row_verifying_one_token_is_refused():
    """It drafts nothing (its draft tokens plus one is 1): no engine runs it. It was read as
    accept_len 1, a speculative step no drafter makes (core/data.py ``drafts_nothing``)."""
    with pytest.raises(DataError) as info:
        load(row(method="eagle3", block="", budget="", verify="1", ctx="5"))
    assert (info.value.row, info.value.column) == (2, "verify_tokens")
    assert "eagle3 verifying 1 token per step drafts nothing" in str(info.value)


@pytest.mark.parametrize(("accept", "message"), [
    ("four", "not a number: 'four'"),
    ("0.5", "accept_len must be >= 1 (the bonus token), got 0.5"),
    ("5", "accept_len 5 is above what eagle3 with block 3 can emit (at most 4 tokens per step"),
])
def test_a_written_accept_is_still_checked(accept, message):
    with pytest.raises(DataError) as info:
        load(row(accept=accept))
    err = info.value
    assert (err.row, err.column) == (2, "accept_len") and message in str(err)
    assert "\n" not in str(err)


def test_blank_tok_s_is_still_refused():
    with pytest.raises(DataError, match="empty value") as info:
        load(row(tok=""))
    assert info.value.column == "tok_s"


# ------------------------------------------------------------------ groups and priors
def test_groups_key_on_model_method_block_and_verified_draft_tokens():
    data = load(row(ctx="0"), row(budget="", ctx="16384"), row(accept="1.9", ctx="32768"),
                row(method="mtp", block="2", budget="2"), row(method="ar", block="", budget=""))
    groups, index = AL.latent_groups(data.rows, PRIORS)
    assert [g.label for g in groups] == ["kimi-k2.6/eagle3/b3/B3", "kimi-k2.6/mtp/b2/B2"]
    assert index.tolist() == [0, 0, -1, 1, -1]     # budget 3 and blank: one group
    assert groups[0].rows == (2, 3)
    # eagle3 block 3 has an [[acceptance]] entry; mtp has none: Uniform(1, min(2 + 1, 3))
    assert groups[0].prior.dist == "truncnormal" and groups[0].prior.params["mu"] == 1.94
    assert "[[acceptance]] model=kimi-k2.6 method=eagle3 block=3" in groups[0].prior_from
    # the entry is Kimi K2.6's: the same configuration of another model has the default prior
    other = load(row(model="llama-3.1-8b-instruct", hardware="h100", gpus="1"))
    (g,), _ = AL.latent_groups(other.rows, PRIORS)
    assert (g.prior.dist, g.prior.params) == ("uniform", {"lower": 1.0, "upper": 4.0})
    assert (groups[1].prior.dist, groups[1].prior.params) == ("uniform",
                                                              {"lower": 1.0, "upper": 3.0})
    assert groups[1].prior_from.startswith("default uniform(lower=1, upper=3)")


def test_tree_bound_is_the_block_of_an_anchored_drafter():
    # DDTree block 16: the anchor + 15 drafted positions, so 15 drafts + the bonus token
    assert AL.default_prior(max_accept("ddtree", 16, 32, PRIORS.methods, 33)).params == {
        "lower": 1.0, "upper": 16.0}
    assert AL.default_prior(max_accept("medusa", 16, 32, PRIORS.methods, 33)).params == {
        "lower": 1.0, "upper": 17.0}
    assert AL.default_prior(max_accept("ddtree", None, 8, PRIORS.methods, 9)).params[
        "upper"] == 9.0


def test_an_acceptance_entry_wider_than_its_configuration_is_truncated_for_a_group():
    """A method-wide [[acceptance]] entry (no block) reaching past what a block-4 chain can
    emit: the group's prior stops at block + 1 = 5 and says so."""
    text = bundled("priors.toml").read_text().replace(
        '[[acceptance]]\nmodel = "kimi-k2.6"\nmethod = "eagle3"\nblock = 3\n',
        '[[acceptance]]\nmodel = "kimi-k2.6"\nmethod = "eagle3"\n')
    text = text.replace("lower = 1.0\nupper = 4.0", "lower = 1.0\nupper = 9.0")
    cfg = parse_priors(text, "p.toml")
    prior, where = AL.group_prior(cfg, "eagle3", 4, 4, 5)
    assert prior.params["upper"] == 5.0 and prior.params["mu"] == 1.94
    assert where.endswith("truncated at 5 (depth + 1 (block = depth))")


def test_a_groups_prior_stops_at_its_drafters_trained_block():
    """Rows of qwen3-8b DDTree with budget 64, no block and no accept_len: the fit's latent
    acceptance was Uniform(1, 65) (budget + 1, the tokens verified), where the model's drafter
    z-lab/Qwen3-8B-DFlash-b16 (block_size 16) emits at most 16 a step (block - 1 drafts + 1:
    what predict and add allow it, core/methods.py max_accept's trained_block). A block-4
    chain of eagle3 (no trained block: EAGLE-3 drafts no block) keeps block + 1 = 5."""
    from ddtree_bayes.core.drafters import load_drafter_cards, stored_cards

    rows = (row(model="qwen3-8b", hardware="h200", gpus="1", engine="hf", method="ddtree",
                block="", budget="64", tok="700"),
            row(model="qwen3-8b", hardware="h200", gpus="1", engine="hf", method="eagle3",
                block="4", budget="4", tok="300"))
    data = load(*rows)
    drafters = load_drafter_cards(bundled("drafters.csv"))
    groups, _ = AL.latent_groups(data.rows, PRIORS, drafters)
    assert [(g.label, g.prior.dist, g.prior.params) for g in groups] == [
        ("qwen3-8b/ddtree/b-/B64", "uniform", {"lower": 1.0, "upper": 16.0}),
        ("qwen3-8b/eagle3/b4/B4", "uniform", {"lower": 1.0, "upper": 5.0})]
    assert groups[0].prior.rationale.endswith(".. 16 (the trained block - 1 drafts + 1)")
    # the fit's spec (structured: the bundled drafter cards when none are given), and again
    # from the cards it stores, as a saved fit's model is derived again on load
    spec = S.build_spec(data, PRIORS)
    assert [g.prior.params["upper"] for g in spec.accept_groups] == [16.0, 5.0]
    meta = S.model_meta(spec, PRIORS)
    again = S.build_spec(data, PRIORS, drafters=stored_cards(meta["drafter_cards"]))
    assert S.model_meta(again, PRIORS)["acceptance_groups"] == meta["acceptance_groups"]


def test_the_fraction_forms_groups_stop_at_their_drafters_trained_block(tmp_path):
    """The structured form bounds a group's prior by its drafter's trained block (above); the
    fraction form did not (it read no drafter card): its qwen3-8b DDTree budget-64 group kept
    Uniform(1, 65), and a fit of it inferred up to 29 tokens a step (8% of its draws above
    16), so predict refused the fit's own configuration (exit 2: "above what ddtree with a
    drafter trained at block 16 can emit"). Now 16 in both forms; the fraction fit stores the
    cards that bound a group (acceptance_drafter_cards, no other: it prices no pass) and its
    groups are derived again from them; an own card of another block bounds at its block and
    is the one stored. A fraction fit that stores none (an older one) derives them as before.
    """
    from ddtree_bayes.core.drafters import load_drafter_cards, stored_cards

    data = load(row(model="qwen3-8b", hardware="h200", gpus="1", engine="hf",
                    method="ddtree", block="", budget="64", tok="700"))
    fraction = dataclasses.replace(PRIORS, step_form="fraction", moe_form="linear")
    spec = S.build_spec(data, fraction, drafters=load_drafter_cards(bundled("drafters.csv")))
    assert [g.prior.params for g in spec.accept_groups] == [{"lower": 1.0, "upper": 16.0}]
    meta = S.model_meta(spec, fraction)
    assert [d["drafter"] for d in meta["acceptance_drafter_cards"]] == [
        "z-lab/Qwen3-8B-DFlash-b16"]
    assert "drafter_cards" not in meta   # (the fraction form prices no drafter pass)
    again = S.build_spec(data, fraction,
                         drafters=stored_cards(meta["acceptance_drafter_cards"]))
    assert S.model_meta(again, fraction) == meta
    # an own card of the model's DDTree drafter trained at block 8: it bounds, it is stored
    own = tmp_path / "drafters.csv"
    own.write_text("drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
                   "bytes_per_weight,source,block_size\n"
                   "my/qwen-dflash-b8,qwen3-8b,ddtree,dflash_block,5,1.0,1.0,2,a test,8\n")
    from ddtree_bayes.core.drafters import drafter_table

    spec = S.build_spec(data, fraction, drafters=drafter_table(own))
    meta = S.model_meta(spec, fraction)
    assert spec.accept_groups[0].prior.params["upper"] == 8.0
    assert [d["drafter"] for d in meta["acceptance_drafter_cards"]] == ["my/qwen-dflash-b8"]
    assert S.model_meta(S.build_spec(data, fraction, drafters=stored_cards(
        meta["acceptance_drafter_cards"])), fraction) == meta
    # given no cards (a fraction fit that stored none): no trained block, as before
    assert S.build_spec(data, fraction).accept_groups[0].prior.params["upper"] == 65.0


@pytest.mark.nuts
def test_a_fraction_fit_answers_its_own_inferred_acceptance(tmp_path):
    """The fraction fit of qwen3-8b DDTree rows at budget 64 without a block or accept_len
    (the drafter trained at block 16): its inferred acceptance stays within 16 and predict
    answers its own configuration (before: 8% of the draws above 16, exit 2), the artifact
    loading (its groups derived again from the cards it stored)."""
    import subprocess
    import sys

    (tmp_path / "data").mkdir()
    (tmp_path / "models").mkdir()
    shutil.copy(bundled("priors.toml"), tmp_path / "models" / "priors.toml")
    head = ",".join(COLUMNS[:13])
    (tmp_path / "data" / "measurements.csv").write_text(head + "\n" + "".join(
        f"qwen3-8b,h200,1,sglang,{rest},test,\n" for rest in (
            "ar,,,1,1,,150", "ar,,,1,1,,152", "ddtree,,64,65,,,700", "ddtree,,64,65,,,710",
            "ddtree,8,8,9,5.1,,520")))

    def run(*argv):
        return subprocess.run([sys.executable, "-m", "ddtree_bayes", *argv], cwd=tmp_path,
                              capture_output=True, text=True)

    fit = run("fit", "--quiet", "--step-form", "fraction")
    assert fit.returncode == 0, fit.stderr
    from ddtree_bayes.engine import store

    draws = store.load(None, tmp_path)
    assert draws.meta["model"]["acceptance_groups"][0]["prior"]["params"]["upper"] == 16.0
    assert float(np.max(draws.variables[AL.NAME])) <= 16.0
    answer = run("predict", "--hardware", "h200", "--engine", "sglang", "--method", "ddtree",
                 "--budget", "64", "--format", "json")
    assert answer.returncode == 0, answer.stderr
    (r,) = json.loads(answer.stdout)["rows"]
    assert r["accept_kind"] == "posterior" and r["accept_max"] == 16.0


def test_a_point_acceptance_prior_cannot_be_inferred_one_line():
    text = bundled("priors.toml").read_text().replace(
        'method = "eagle3"\nblock = 3\ndist = "truncnormal"\nmu = 1.94\nsigma = 0.15\n'
        'lower = 1.0\nupper = 4.0', 'method = "eagle3"\nblock = 3\ndist = "point"\nvalue = 1.94')
    assert text != bundled("priors.toml").read_text()
    cfg = parse_priors(text, "p.toml")
    with pytest.raises(PriorsError) as info:
        AL.latent_groups(load(row()).rows, cfg)
    msg = str(info.value)
    assert "cannot be the prior of an inferred acceptance" in msg and "\n" not in msg
    assert 'dist = "truncnormal" or "uniform", or write the known value' in msg


def test_log_density_by_hand():
    from scipy import stats

    p = {"mu": 1.94, "sigma": 0.15, "lower": 1.0, "upper": 4.0}
    x = np.array([1.5, 2.0, 3.9])
    a, b = (p["lower"] - p["mu"]) / p["sigma"], (p["upper"] - p["mu"]) / p["sigma"]
    expected = stats.truncnorm.logpdf(x, a, b, loc=p["mu"], scale=p["sigma"])
    np.testing.assert_allclose(AL.log_density("truncnormal", p, x), expected, rtol=1e-12)
    assert AL.log_density("uniform", {"lower": 1.0, "upper": 4.0}, 5.0) == -np.inf


# ------------------------------------------------------------------ the model, by hand
SWEEP = [row(method="ar", block="", budget="", ctx=c, tok=t)
         for c, t in (("0", "91.5"), ("65536", "70.5"), ("131072", "56.7"))] + [
    row(ctx=c, tok=t) for c, t in (("0", "112.5"), ("65536", "99.5"))] + [
    row(method="mtp", block="2", budget="2", ctx="0", tok="120"),
    row(method="eagle3", block="3", budget="3", accept="1.95", ctx="131072", tok="55"),
    row(accept="1.9", ctx="0", tok="125")]   # same columns as row 5 but a known acceptance


@pytest.fixture(scope="module")
def latent_model():
    from ddtree_bayes.engine.inference import reproducible_pytensor

    reproducible_pytensor()
    importlib.import_module("pymc")
    import pytensor

    from ddtree_bayes.engine.model import build_model

    data = load(*SWEEP)
    cfg = dataclasses.replace(PRIORS, moe_form="power", step_form="fraction")
    spec = S.build_spec(data, cfg)
    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        yield spec, build_model(spec, cfg)


def test_model_has_one_latent_acceptance_per_group(latent_model):
    spec, m = latent_model
    assert m.coords[AL.DIM] == ("kimi-k2.6/eagle3/b3/B3", "kimi-k2.6/mtp/b2/B2")
    assert AL.NAME in {rv.name for rv in m.free_RVs}
    # eagle3's truncnormal prior term, then the likelihood on configurations
    assert [p.name for p in m.potentials] == [f"{AL.NAME}_prior", "log_tok_s"]
    assert np.isnan(spec.accept_len).tolist() == [False] * 3 + [True] * 3 + [False] * 2
    # a latent configuration is not merged with a known one of the same columns
    assert spec.config_accept_group.tolist() == [-1, -1, -1, 0, 0, 1, -1, -1]


def _unconstrained(m, point):
    out = {}
    for rv in m.free_RVs:
        tr = m.rvs_to_transforms[rv]
        x = np.asarray(point[rv.name], dtype=float)
        out[m.rvs_to_values[rv].name] = (tr.forward(x, *rv.owner.inputs).eval()
                                         if tr is not None else x)
    return out


def test_latent_prior_and_likelihood_match_numpy(latent_model):
    from scipy import stats

    spec, m = latent_model
    accept = np.array([2.1, 2.4])
    p = {"step_ar_ms": np.array([11.0]), "moe_share": np.array([0.3]),
         "moe_exponent_mu": 0.45, "moe_hw_sd": 0.05, "moe_z": np.array([0.2]),
         "ctx_ms_per_unit": np.array([3.3]), "ctx_verify_exponent": 0.5,
         "overhead_logit_mu": -1.5, "overhead_logit_sd": 0.3, "overhead_z": np.array([0.1, -0.3]),
         "reduction": np.array([0.4]), "noise_sd": 0.03, AL.NAME: accept}
    ip = _unconstrained(m, p)
    # prior of the latent acceptances: truncnormal (eagle3 entry) and Uniform(1, 3) (mtp)
    prior = m.compile_logp(vars=[m[AL.NAME], m[f"{AL.NAME}_prior"]], jacobian=False)(ip)
    a, b = (1.0 - 1.94) / 0.15, (4.0 - 1.94) / 0.15
    expected_prior = (stats.truncnorm.logpdf(2.1, a, b, loc=1.94, scale=0.15)
                      + stats.uniform.logpdf(2.4, 1.0, 2.0))
    assert prior == pytest.approx(expected_prior, rel=1e-9)
    # likelihood: the latent rows' mean uses accept_latent[g], the others their accept_len
    loglik = m.compile_logp(vars=[m["log_tok_s"]])(ip)
    expo = p["moe_exponent_mu"] + p["moe_hw_sd"] * p["moe_z"]
    frac = 1 / (1 + np.exp(-(p["overhead_logit_mu"] + p["overhead_logit_sd"] * p["overhead_z"])))
    s = spec.row_system
    target = S.target_ms(p["step_ar_ms"][s], p["moe_share"][s], expo[s], p["ctx_ms_per_unit"][s],
                         p["ctx_verify_exponent"], spec.verify_tokens, spec.context_units,
                         "power", np.exp, np.log)
    step = S.step_ms(target, np.concatenate([frac, [0.0]])[spec.row_group], 1.0)
    acc = np.array([1, 1, 1, 2.1, 2.1, 2.4, 1.95, 1.9])
    mu = np.log(acc * 1000 / step)
    expected = np.sum(stats.norm.logpdf(spec.log_tok_s, mu, p["noise_sd"]))
    assert loglik == pytest.approx(expected, rel=1e-9)


def test_without_latent_rows_the_model_is_unchanged(bundled_inputs):
    data, cfg = bundled_inputs
    spec = S.build_spec(data, cfg)
    assert spec.accept_groups == () and AL.DIM not in spec.coords
    assert "acceptance_groups" not in S.model_meta(spec, cfg)


# ------------------------------------------------------------------ predict from the posterior
def _ddtree_group_draws(n=8):
    """Point-mass draws (B300 DDTree budget 32: step 20 ms x k for SGLang) with an inferred
    acceptance of that scenario's group whose draws are proportional to the step's."""
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws(n)
    k = np.linspace(0.9, 1.1, n)
    draws.variables["step_ar_ms"] = 8.0 * k[:, None]      # step = 20 ms x k
    draws.variables[AL.NAME] = (12.0 * k)[:, None]        # acceptance 12 x k
    prior = {"dist": "truncnormal", "params": {"mu": 10.0, "sigma": 2.5, "lower": 1.0,
                                               "upper": 17.0}}
    draws.meta["model"]["target_model"] = "kimi-k2.6"
    draws.meta["model"]["acceptance_groups"] = [
        {"label": "kimi-k2.6/ddtree/b16/B32", "model": "kimi-k2.6", "method": "ddtree",
         "block": 16, "budget": 32, "rows": [11, 12, 13], "prior": prior,
         "prior_from": "[[acceptance]] method=ddtree block=16 budget=32"}]
    draws.meta["coords"][AL.DIM] = ["kimi-k2.6/ddtree/b16/B32"]
    return draws


def test_the_note_of_a_group_of_one_row_is_singular():
    """"acceptance: posterior of the 1 measured rows without accept_len": one row, one row."""
    from ddtree_bayes.engine import predictive as P

    draws = _ddtree_group_draws()
    draws.meta["model"]["acceptance_groups"][0]["rows"] = [11]
    (r,) = P.predict(draws, engines=["sglang"])
    assert r["accept_note"].startswith("acceptance: posterior of the 1 measured row without "
                                       "accept_len (kimi-k2.6/ddtree/b16/B32: median 12.00")


def test_predict_without_accept_uses_the_posterior_draw_by_draw():
    from ddtree_bayes.engine import predictive as P

    (r,) = P.predict(_ddtree_group_draws(), engines=["sglang"])
    # each draw: (12 k) tokens / (20 k) ms = 600 tok/s; shuffling the draws would spread it
    assert r["accept_kind"] == "posterior" and r["accept"] == "posterior"
    assert (r["lo90"], r["median"], r["hi90"]) == pytest.approx((600.0, 600.0, 600.0))
    assert r["accept_distribution"]["family"] == "posterior"
    assert r["accept_note"].startswith("acceptance: posterior of the 3 measured rows without "
                                   "accept_len (kimi-k2.6/ddtree/b16/B32: median 12.00")
    # --accept still wins; another configuration without a group falls back to the priors
    # file (h200: measured on no system of ddtree 8/8 but b300, a level below the prior)
    (given,) = P.predict(_ddtree_group_draws(), engines=["sglang"], accept="12")
    assert given["accept_kind"] == "given"
    (other,) = P.predict(_ddtree_group_draws(), engines=["sglang"], method="ddtree",
                              hardware="h200", block=8, budget=8)
    assert other["accept_kind"] == "prior"


def test_predict_takes_the_inferred_acceptance_of_the_queried_model():
    """A fit of several models (no single target model in its metadata) with the same
    (method, block, budget) inferred for two models: predict --model uses that model's group,
    not the first group that matches the rest (it took another model's before)."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.scenario import latent_acceptance

    draws = _ddtree_group_draws()
    del draws.meta["model"]["target_model"]
    groups = draws.meta["model"]["acceptance_groups"]
    other = {**groups[0], "label": "other-model/ddtree/b16/B32", "model": "other-model",
             "rows": [20]}
    draws.meta["model"]["acceptance_groups"] = [other, groups[0]]
    draws.meta["coords"][AL.DIM] = [other["label"], groups[0]["label"]]
    k = draws.variables[AL.NAME][:, 0]
    draws.variables[AL.NAME] = np.stack([np.full_like(k, 3.0), k], axis=1)
    rng = np.random.default_rng(0)
    a, group = latent_acceptance(draws, "kimi-k2.6", "ddtree", 16, 33, rng)
    assert group["model"] == "kimi-k2.6" and a == pytest.approx(k)
    a, group = latent_acceptance(draws, "other-model", "ddtree", 16, 33, rng)
    assert group["model"] == "other-model" and a == pytest.approx(3.0)
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    sc = dataclasses.replace(sc, model="kimi-k2.6")
    from ddtree_bayes.engine.question import accept_sources

    (source,) = accept_sources(draws, sc, None, None)
    a, info = P.acceptance_draws(draws, source, rng)
    assert info["group"] == "kimi-k2.6/ddtree/b16/B32" and a == pytest.approx(k)


def test_predict_json_with_posterior_acceptance_follows_the_schema():
    import jsonschema

    from ddtree_bayes.cli.output import json_ready
    from ddtree_bayes.cli.predict import typed_rows
    from ddtree_bayes.engine import predictive as P

    draws = _ddtree_group_draws()
    rows = typed_rows(P.predict(draws, engines=["sglang", "native"]))
    doc = json_ready({"fit_id": "point-mass", "seed": 1, "interval_probs": [0.5, 0.9],
                      "target": None, "draws": draws.n_draws, "rows": rows,
                      "default_scenario": None, "warnings": []})
    schema = json.loads((bundled("..") / "schemas" / "predict.schema.json").read_text())
    jsonschema.validate(doc, schema)
    dist = doc["rows"][0]["accept_distribution"]
    assert dist["family"] == "posterior" and dist["rows"] == 3
    assert dist["median"] == pytest.approx(12.0)
    assert "accept_note" not in doc["rows"][0] and "accept_value" not in doc["rows"][0]


def test_the_fits_own_latent_rows_use_their_draws_in_the_ppc():
    from ddtree_bayes.engine import fitted_rows as M

    draws = _ddtree_group_draws()
    draws = dataclasses.replace(draws, data_csv="\n".join([
        HEADER, row(method="ddtree", block="16", budget="32", hardware="b300", engine="sglang",
                    ctx="", tok="600"),
        row(method="ddtree", block="16", budget="32", hardware="b300", engine="sglang",
            ctx="", tok="650")]) + "\n")
    measurements, log_mu = M.measurement_log_mu(draws)
    assert [m.accept_len for m in measurements.rows] == [None, None]
    # each draw: (12 k) tokens / (20 k) ms, both rows one configuration
    np.testing.assert_allclose(log_mu, math.log(600.0), rtol=1e-12)
    (r1, r2) = M.check_measurements(draws)
    assert r1["accept_len"] is None and r1["configuration"] == r2["configuration"] == 2
    assert r1["median"] == pytest.approx(600.0)


def test_reweighting_likelihood_of_latent_rows_uses_their_draws():
    from scipy import stats

    from ddtree_bayes.core.data import load_measurements as load_text
    from ddtree_bayes.engine import importance as R

    draws = _ddtree_group_draws()
    draws.variables["noise_sd"] = np.full(draws.n_draws, 0.05)
    text = "\n".join([HEADER, row(method="ddtree", block="16", budget="32", hardware="b300",
                                   engine="sglang", ctx="", tok="620")]) + "\n"
    data = load_text("new.csv", HW, text=text)
    loglik = R.log_likelihood(draws, data)
    # every draw: mean log(12 k x 1000 / (20 k)) = log 600, sd 0.05
    expected = stats.norm.logpdf(math.log(620.0), math.log(600.0), 0.05)
    np.testing.assert_allclose(loglik, expected, rtol=1e-10)
    t = R.table(draws, data)
    np.testing.assert_allclose(R.summed_log_likelihood(draws, t, [0]), expected, rtol=1e-10)


def test_model_average_refuses_an_inferred_acceptance():
    from ddtree_bayes.engine import predictive as P

    draws = _ddtree_group_draws()
    with pytest.raises(QueryError, match="cannot carry the inferred acceptance"):
        P.predict(draws, engines=["sglang"], mixture=[(draws, 0.5), (draws, 0.5)])


def test_row_acceptance_known_posterior_or_prior():
    from ddtree_bayes.engine import predictive as P

    draws = _ddtree_group_draws()
    rng = np.random.default_rng(0)
    tree = load(row(method="ddtree", block="16", budget="32", hardware="b300",
                    engine="sglang")).rows[0]
    np.testing.assert_array_equal(P.row_acceptance(draws, tree, rng),
                                  draws.variables[AL.NAME][:, 0])
    known = dataclasses.replace(tree, accept_len=9.5)
    assert P.row_acceptance(draws, known, rng).tolist() == [9.5] * draws.n_draws
    chain = load(row()).rows[0]          # no eagle3 group in the fit: the priors file's prior
    a = P.row_acceptance(draws, chain, rng)
    assert a.shape == (draws.n_draws,) and np.all((a >= 1.0) & (a <= 4.0))


# ------------------------------------------------------------------ validation, baseline
def test_the_least_squares_baseline_skips_rows_without_accept():
    from ddtree_bayes.workflows.baseline import baseline_fit
    from ddtree_bayes.workflows.validation import summarize_folds

    data = load(*SWEEP)
    predict = baseline_fit(list(data.rows), PRIORS, data.systems)
    assert predict(data.rows[3]) is None
    assert predict(data.rows[0]) > 0
    rows = [{"measured": 100.0, "median": 100.0, "lo50": 95, "hi50": 105, "lo90": 90,
             "hi90": 110, "baseline": b, "baseline_lo": None if b is None else b * 0.7,
             "baseline_hi": None if b is None else b * 1.3} for b in (None, 120.0, 200.0)]
    s = summarize_folds(rows)
    assert s["n"] == 3 and s["baseline"]["n"] == 2
    assert s["baseline"]["coverage90"] == 0.5              # 120 +-30% covers 100, 200 does not
    assert s["baseline"]["mdape"] == pytest.approx(0.6)    # median of 0.2 and 1.0


# ------------------------------------------------------------------ add --accept infer
@pytest.fixture
def work(tmp_path, monkeypatch):
    copy_bundled_data(tmp_path, writable=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


ADD = ["add", "--hardware", "rtx-pro-6000", "--engine", "vllm", "--method", "eagle3",
       "--block", "3", "--context", "16k", "--tok-s", "99.4", "--source", "TEST no accept"]


def test_add_accept_infer_writes_a_blank_accept_len(work, capsys):
    from ddtree_bayes.cli import main as cli

    assert cli.main([*ADD, "--accept", "infer"]) == 0
    out = capsys.readouterr().out
    assert "accept inferred: 99.4 tok/s, acceptance inferred by the fit" in out
    last = (work / "data" / "measurements.csv").read_text().splitlines()[-1].split(",")
    assert last[COLUMNS.index("accept_len")] == "" and last[COLUMNS.index("verify_tokens")] == "4"


def test_add_without_accept_is_refused_and_names_infer(work, capsys):
    from ddtree_bayes.cli import main as cli

    before = (work / "data" / "measurements.csv").read_bytes()
    assert cli.main(ADD) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing --accept" in err and "--accept infer" in err
    assert cli.main([*ADD[:6], "ar", *ADD[9:], "--accept", "infer"]) == 2
    err = capsys.readouterr().err
    assert "--accept infer: autoregressive decoding emits 1 token per step" in err
    assert (work / "data" / "measurements.csv").read_bytes() == before


def test_add_ar_without_accept_takes_1(work, capsys):
    """`add --method ar` without --accept said "(fix: ... --accept infer when the run did not
    report its acceptance ...)", and --accept infer with --method ar is refused in turn; then
    it named --accept 1, the only value an autoregressive step can have. A docs review
    (2026-12-05): a required flag with one possible value is friction; it is now that value
    (the row written with accept_len 1, as with --accept 1)."""
    from ddtree_bayes.cli import main as cli

    ar = ["add", "--hardware", "rtx-pro-6000", "--engine", "vllm", "--method", "ar",
          "--context", "16k", "--tok-s", "84.6", "--source", "TEST ar no accept"]
    assert cli.main(ar) == 0
    last = (work / "data" / "measurements.csv").read_text().splitlines()[-1]
    assert ",vllm,ar,,,1,1,16384,84.6,TEST ar no accept," in last or \
        ",vllm,ar,,,1,1.0,16384,84.6,TEST ar no accept," in last, last


# ------------------------------------------------------------------ recovery (real NUTS fit)
@pytest.mark.slow
def test_inferred_acceptance_is_recovered_from_a_context_sweep(tmp_path):
    """AR and an MTP chain (k = 3, acceptance 2.6, never written) at five contexts; an Eagle3
    chain with known acceptance at two contexts pins the context-verify exponent. Simulated and
    fitted with the structured step (SPEC a fixed cost per group: in the fraction form SPEC
    scales with the target, context term included, so a context sweep identifies only
    (1 - f) x accept). The MTP acceptance (flat prior Uniform(1, 4)) is recovered from the MTP
    rows' context slope."""
    from ddtree_bayes import api

    rng = np.random.default_rng(7)

    def tok(method, accept, ctx, fixed=0.0, per_pass=0.0):
        m = 1.0 if method == "ar" else 4.0
        target = S.target_ms(11.0, 0.3, 0.45, 3.3, 0.6, m, ctx / 65536, "power", np.exp, np.log)
        spec = S.structured_spec_ms(11.0, fixed, per_pass, 0.0, 0 if method == "ar" else 3, 0,
                                    1.0)
        return accept * 1000.0 / (target + spec) * float(np.exp(0.02 * rng.standard_normal()))

    ctxs = (0, 16384, 32768, 65536, 131072)
    design = ([("ar", "", "1.0", c, tok("ar", 1.0, c)) for c in ctxs]
              + [("eagle3", "3", "1.95", c, tok("eagle3", 1.95, c, 0.05, 0.08))
                 for c in (0, 131072)]
              + [("mtp", "3", "", c, tok("mtp", 2.6, c, 0.03, 0.05)) for c in ctxs])
    (tmp_path / "data").mkdir()
    for name in ("hardware.csv", "seed_estimates.csv", "models.csv"):
        shutil.copy(bundled(name), tmp_path / "data" / name)
    (tmp_path / "data" / "measurements.csv").write_text(HEADER + "\n" + "".join(
        f"kimi-k2.6,rtx-pro-6000,8,vllm,{m},{b},,,{a},{c},{t:.4g},simulated,\n"
        for m, b, a, c, t in design))
    result = api.fit(workdir=tmp_path, progress=False, seed=7, moe_form="power",
                     step_form="structured")
    assert result.converged, result.failures
    draws = api.load(workdir=tmp_path)
    (g,) = AL.summarise(draws.meta, draws.variables)
    assert g["group"] == "kimi-k2.6/mtp/b3/B3" and g["prior"] == "uniform(lower=1, upper=4)"
    assert g["lo"] <= 2.6 <= g["hi"], g
    assert g["hi"] - g["lo"] < 0.25 * (g["prior_hi"] - g["prior_lo"]), g   # learned, not prior
    assert math.isclose(g["prob"], 0.9)

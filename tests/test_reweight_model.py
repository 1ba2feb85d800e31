"""The numpy likelihood that `update` reweights with (engine/importance.py, through the predict
path) against the PyMC model's own log density, at prior draws of every parameter: per row,
and the log importance ratio log p(new data | theta) - log p(old data | theta), to 1e-9, in
the power/fraction forms and in the (default) roofline/structured forms, including new rows
that move other rows' discrepancy distance and that make a group's tree nodes vary."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import importance as R
from ddtree_bayes.engine.inference import reproducible_pytensor
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.workflows.extrapolation import with_forms
from ddtree_bayes.workflows.living import reweight as RW

reproducible_pytensor()
pm = importlib.import_module("pymc")
from ddtree_bayes.engine.model import build_model  # noqa: E402

#: The bundled rows plus a HYPOTHETICAL repeat of the B300 autoregressive row: data with
#: repeated runs (the model has config_sd, which only such data can separate from noise_sd).
BUNDLED = (bundled("measurements.csv").read_text()
           + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,131,HYPOTHETICAL repeat,\n")
#: HYPOTHETICAL rows (not measurements): a repeat at a measured B300 configuration, a new
#: context for the measured RTX PRO 6000 Eagle3 group, a native-engine row (relation).
EXTRA = ("kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.5,,298,HYPOTHETICAL,\n"
         "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,1.94,65536,98,HYPOTHETICAL,\n"
         "kimi-k2.6,b300,8,native,ddtree,8,8,9,4.4,,330,HYPOTHETICAL,\n")
#: For the structured form: an Eagle3 block 5 row in the old data (so that group's drafter
#: passes already vary), and a block 7 row in the new data, which moves the block 5 row's
#: distance to its nearest configuration (its likelihood sd changes: a new-over-old term).
BLOCK5 = "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,5,5,6,2.3,0,131,HYPOTHETICAL,\n"
BLOCK7 = "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,7,7,8,2.6,0,128,HYPOTHETICAL,\n"
#: A B300 DDTree budget-32 row: the group measured at budget 8 only now varies its tree nodes,
#: so its own per-node ratio replaces the population's for the budget-8 row too.
BUDGET32 = ("kimi-k2.6,b300,8,sglang,ddtree,16,32,33,13.1,,612,HYPOTHETICAL,\n"
            "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,12.9,,598,HYPOTHETICAL repeat,\n")


def _structure() -> dict:
    """The bundled hardware table and model cards (build_spec's structure inputs)."""
    return {"hardware": load_hardware(bundled("hardware.csv")),
            "cards": load_model_cards(bundled("models.csv"))}


def _data(text: str, hw):
    return load_measurements("test.csv", hw, text=text)


def _case(form: str):
    hw = load_hardware(bundled("hardware.csv"))
    priors = bundled("priors.toml").read_text()
    if form == "power-fraction":
        priors = with_forms(priors, "power", "fraction")
        old_text, new_text = BUNDLED, BUNDLED + EXTRA
    elif form == "roofline-structured":
        priors = with_forms(priors, "roofline", "structured")
        old_text, new_text = BUNDLED + BLOCK5, BUNDLED + BLOCK5 + EXTRA + BLOCK7
    else:
        priors = with_forms(priors, "roofline", "structured")
        old_text, new_text = BUNDLED, BUNDLED + BUDGET32
    cfg = parse_priors(priors)
    inputs = {"hardware": hw, "cards": load_model_cards(bundled("models.csv"))}
    old, new = _data(old_text, hw), _data(new_text, hw)
    spec_old, spec_new = S.build_spec(old, cfg, **inputs), S.build_spec(new, cfg, **inputs)
    return cfg, old, new, spec_old, spec_new, priors


def _prior_draws(model, n: int):
    """n prior draws of every variable (free and deterministic), flattened."""
    import warnings

    import pytensor

    with (model, pytensor.config.change_flags(mode="FAST_COMPILE"), warnings.catch_warnings()):
        # the likelihood is a Potential, which prior sampling ignores: exactly what is wanted
        warnings.filterwarnings("ignore", "The effect of Potentials", UserWarning)
        dt = pm.sample_prior_predictive(draws=n, random_seed=20261130, var_names=[
            v.name for v in (*model.free_RVs, *model.deterministics)])
    prior = dt["prior"].to_dataset()
    return {k: np.asarray(prior[k].values).reshape(n, *prior[k].shape[2:])
            for k in prior.data_vars}


def _logp_fn(model):
    """The likelihood terms at draw i: one per configuration (the model's Potential on the
    rows' sufficient statistics; FAST_COMPILE: seconds, not a numba compile per model)."""
    import pytensor

    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        fn = model.compile_logp(vars=[*model.observed_RVs, *model.potentials], sum=False)

    def at(variables: dict, i: int):
        point = {}
        for rv in model.free_RVs:
            tr = model.rvs_to_transforms[rv]
            x = np.asarray(variables[rv.name][i], dtype=float)
            tensor = pytensor.tensor.as_tensor_variable(x)
            point[model.rvs_to_values[rv].name] = (tr.forward(tensor).eval()
                                                    if tr is not None else x)
        return fn(point)
    return at


@pytest.mark.parametrize("form", ["power-fraction", "roofline-structured", "nodes-now-vary"])
def test_numpy_likelihood_and_log_ratios_match_the_pymc_model(form):
    cfg, old, new, spec_old, spec_new, priors = _case(form)
    # the new rows keep the old model's parameters: what `update` checks before reweighting
    meta = {"fit_id": "prior", "coords": {k: list(v) for k, v in spec_old.coords.items()
                                          if k != "measurement"},
            "model": json.loads(json.dumps({"target_model": old.model,
                                            **S.model_meta(spec_old, cfg)}))}
    assert spec_new.coords["overhead_group"] == spec_old.coords["overhead_group"]
    m_old, m_new = build_model(spec_old, cfg), build_model(spec_new, cfg)
    n = 6
    variables = _prior_draws(m_old, n)
    draws = Fit(path=None, meta=meta, variables=variables, data_csv=old.text,  # type: ignore[arg-type]
                  priors_toml=priors, hardware_csv=bundled("hardware.csv").read_text())
    reasons, _, model = RW.structure_changes(draws, new, cfg, _structure())
    assert reasons == []
    target, replaced, flipped = R.restructured(draws, model, new.text)

    added, kept, removed = RW.pair_rows(old, new)
    assert removed == [] and len(added) == len(new.rows) - len(old.rows)
    ratios, changed = R.log_ratios(draws, old, new, added, kept, target)
    assert "config_sd" in variables and spec_old.repeated
    t_new = R.table(target, new)
    from ddtree_bayes.core.likelihood import rows_of

    n_configs = len(spec_new.configs)
    assert n_configs < len(new.rows)          # repeated configurations share one term
    per_config = np.stack([R.summed_log_likelihood(target, t_new, rows)
                           for rows in rows_of(t_new.row_config, n_configs)], axis=1)
    logp_new, logp_old = _logp_fn(m_new), _logp_fn(m_old)
    for i in range(n):
        (pymc_new,), (pymc_old,) = logp_new(variables, i), logp_old(variables, i)
        np.testing.assert_allclose(per_config[i], pymc_new, rtol=0, atol=1e-9)
        assert ratios[i] == pytest.approx(pymc_new.sum() - pymc_old.sum(), abs=1e-9)
    if form == "power-fraction":
        assert changed == [] and flipped == []   # the fraction form's sd is the noise
    elif form == "roofline-structured":          # the block 5 row's nearest configuration moved
        assert [new.rows[j].block for j in changed] == [5] and flipped == []
    else:                                        # the budget-8 row's group and distance
        assert flipped == ["b300x8/sglang/ddtree"] and "spec_tree_ratio" in replaced
        assert [(new.rows[j].hardware, new.rows[j].budget) for j in changed] == [("b300", 8)]
        assert model["group_varies"]["tree"] != meta["model"]["group_varies"]["tree"]


def test_a_first_repeated_run_is_reweighted_exactly():
    """A fit of data without repeated runs has no config_share; the first repeat of a measured
    configuration adds it. No reason to refit: the old posterior times config_share's prior is
    the new model's posterior of the old data (a singleton's density does not depend on the
    share), so each draw gets a share from the prior, run_sd and config_sd follow from
    noise_sd, and the log ratios are the new PyMC model's likelihood at (theta, share) minus
    the old one's at theta, to 1e-9; no kept row's sd changes."""
    hw = load_hardware(bundled("hardware.csv"))
    priors = bundled("priors.toml").read_text()
    cfg = parse_priors(priors)
    inputs = {"hardware": hw, "cards": load_model_cards(bundled("models.csv"))}
    plain = bundled("measurements.csv").read_text()
    old = _data(plain, hw)
    new = _data(plain + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,131,HYPOTHETICAL repeat,\n", hw)
    spec_old, spec_new = S.build_spec(old, cfg, **inputs), S.build_spec(new, cfg, **inputs)
    assert not spec_old.repeated and spec_new.repeated
    meta = {"fit_id": "prior", "coords": {k: list(v) for k, v in spec_old.coords.items()
                                          if k != "measurement"},
            "model": json.loads(json.dumps({"target_model": old.model,
                                            **S.model_meta(spec_old, cfg)}))}
    m_old, m_new = build_model(spec_old, cfg), build_model(spec_new, cfg)
    assert {rv.name for rv in m_new.free_RVs} - {rv.name for rv in m_old.free_RVs} \
        == {"config_share"}
    n = 6
    variables = _prior_draws(m_old, n)
    draws = Fit(path=None, meta=meta, variables=variables, data_csv=plain,  # type: ignore[arg-type]
                  priors_toml=priors, hardware_csv=bundled("hardware.csv").read_text())
    reasons, _, model = RW.structure_changes(draws, new, cfg, _structure())
    assert reasons == [] and model["repeated_runs"]
    target, _, _ = R.restructured(draws, model, new.text)
    target, extra = R.augmented(target, np.random.default_rng(7))
    assert sorted(extra) == ["config_sd", "config_share", "run_sd"]
    share = extra["config_share"]
    assert np.all((share > 0) & (share < 1))
    np.testing.assert_allclose(extra["run_sd"] ** 2 + extra["config_sd"] ** 2,
                               variables["noise_sd"] ** 2, rtol=1e-12)
    np.testing.assert_allclose(extra["config_sd"], variables["noise_sd"] * np.sqrt(share))
    added, kept, removed = RW.pair_rows(old, new)
    ratios, changed = R.log_ratios(draws, old, new, added, kept, target)
    assert changed == [] and removed == [] and len(added) == 1
    logp_new, logp_old = _logp_fn(m_new), _logp_fn(m_old)
    with_share = {**variables, "config_share": share}
    for i in range(n):
        (pymc_new,), (pymc_old,) = logp_new(with_share, i), logp_old(variables, i)
        assert ratios[i] == pytest.approx(pymc_new.sum() - pymc_old.sum(), abs=1e-9)


def test_a_card_field_the_model_never_reads_is_no_reason_to_refit():
    """Fits store the card's max_context_tokens since it warns about the context; a fit made
    before lacks it, and `update` read the difference as 'the model's card changes' and ran a
    full refit instead of a reweight (as once for kv_bytes_per_token, which the context
    cost's prior reads now). A field the model reads still counts."""
    cfg, old, new, spec_old, _, priors = _case("roofline-structured")
    model = json.loads(json.dumps({"target_model": old.model, **S.model_meta(spec_old, cfg)}))
    assert model["card"]["max_context_tokens"] == 262144
    del model["card"]["max_context_tokens"]                 # as a fit made before stored it
    for cards in model.get("model_cards", {}).values():
        cards.pop("max_context_tokens", None)
    meta = {"fit_id": "before", "coords": {k: list(v) for k, v in spec_old.coords.items()
                                           if k != "measurement"}, "model": model}
    draws = Fit(path=None, meta=meta, variables={}, data_csv=old.text,  # type: ignore[arg-type]
                priors_toml=priors, hardware_csv=bundled("hardware.csv").read_text())
    assert RW.structure_changes(draws, new, cfg, _structure())[0] == []
    for field, value in (("layers", 60), ("kv_bytes_per_token", 70272.0), ("kv_heads", 2)):
        before = model["card"][field]
        model["card"][field] = value                         # a field the model reads
        reasons = RW.structure_changes(draws, new, cfg, _structure())[0]
        assert len(reasons) == 1 and reasons[0].startswith("the model's card changes"), field
        model["card"][field] = before


def test_a_fit_stored_before_the_drafter_column_is_reweighted_not_refit():
    """A fit made before the ``drafter`` column stored its acceptance groups without a
    ``drafter`` and its drafter cards without ``default``: `update` read both as changes of the
    model ("the inferred acceptance groups ... change: kimi-k2.6/eagle3/b3/B3 ->
    kimi-k2.6/eagle3/b3/B3", "the model's drafter_cards changes") and refit from scratch
    where nothing changed. They mean the blank rows' group and default cards (as
    acceptance_latent.find and drafters.stored_card_dict read them), and a card with default
    no that no row names prices nothing (as drafter_card_changes reads it); a new drafter, or
    a changed card, still is a change."""
    hw = load_hardware(bundled("hardware.csv"))
    priors = with_forms(bundled("priors.toml").read_text(), "roofline", "structured")
    cfg = parse_priors(priors)
    blank = "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,,0,125,HYPOTHETICAL no accept_len,\n"
    old = _data(BUNDLED + blank, hw)
    new = _data(BUNDLED + blank + blank.replace(",125,", ",126,"), hw)
    spec_old = S.build_spec(old, cfg, **_structure())
    model = json.loads(json.dumps({"target_model": old.model, **S.model_meta(spec_old, cfg)}))
    assert [g["drafter"] for g in model["acceptance_groups"]] == [None]
    for group in model["acceptance_groups"]:   # as a fit made before the column stored them
        del group["drafter"]
    # (nor the cards with default no, which came with the column: the K2.5 head's)
    model["drafter_cards"] = [d for d in model["drafter_cards"] if d.pop("default")]
    meta = {"fit_id": "before", "coords": {k: list(v) for k, v in spec_old.coords.items()
                                           if k != "measurement"}, "model": model}
    draws = Fit(path=None, meta=meta, variables={}, data_csv=old.text,  # type: ignore[arg-type]
                priors_toml=priors, hardware_csv=bundled("hardware.csv").read_text())
    assert RW.structure_changes(draws, new, cfg, _structure())[0] == []
    model["acceptance_groups"][0]["drafter"] = "test/other-head"   # another drafter's group
    (reason,) = RW.structure_changes(draws, new, cfg, _structure())[0]
    assert reason.startswith("the inferred acceptance groups (rows without accept_len) change")
    del model["acceptance_groups"][0]["drafter"]
    model["drafter_cards"][0]["layers"] += 1
    (reason,) = RW.structure_changes(draws, new, cfg, _structure())[0]
    assert reason == ("the model's drafter cards change: "
                      f"{model['drafter_cards'][0]['drafter']}")

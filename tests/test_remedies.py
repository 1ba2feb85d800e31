"""The remedy ladder (engine/remedies.py) with a fake sampler: which settings each rung uses,
in which order, what it prints, what the artifact records; and the reparameterised model
(engine/model.py, ``reparameterise=True``, ``centre_moe=True``) against the default one, by
hand."""

from __future__ import annotations

import importlib
import json
import math

import numpy as np
import pytest

from ddtree_bayes.core.config import SamplerSettings, parse_priors
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import remedies as R
from test_cli_support import copy_bundled_data, run_cli

DIVERGED = "2 divergent transitions"
LOW_ESS = "min bulk ESS 310 < 400 (moe_hw_sd)"
HIGH_RHAT = "max R-hat 1.020 > 1.01 (noise_sd)"


class FakeSampler:
    """Answers attempt k with ``outcomes[k]`` (a list of failed gates; [] passes) and records
    the settings and parameterisation it was asked for."""

    def __init__(self, *outcomes: list[str]):
        self.outcomes = list(outcomes)
        self.calls: list[tuple[int, int, float, str]] = []

    def __call__(self, settings: SamplerSettings, parameterisation: str) -> R.Attempt:
        failures = self.outcomes[len(self.calls)]
        self.calls.append((settings.tune, settings.draws, settings.target_accept,
                           parameterisation))
        divergences = 2 if DIVERGED in failures else 0
        return R.Attempt(settings, parameterisation, dt=f"draws {len(self.calls)}",
                         timings={"compile_s": 1.0 if len(self.calls) == 1 else 0.0,
                                  "sample_s": 2.0, "diagnose_s": 0.1},
                         backend="nutpie", diagnostics=[], divergences=divergences,
                         failures=list(failures))


def climb(sampler: FakeSampler, enabled: bool = True, parameterisations=R.PARAMETERISATIONS,
          **settings) -> tuple[R.Attempt, dict, list[str]]:
    said: list[str] = []
    requested = SamplerSettings(**settings).for_model(31)   # the bundled model's size
    kept, record = R.run(sampler, requested, say=said.append, enabled=enabled,
                         parameterisations=parameterisations)
    return kept, record, said


def test_a_fit_that_passes_at_once_samples_once_and_says_nothing():
    sampler = FakeSampler([])
    kept, record, said = climb(sampler)
    assert sampler.calls == [(1000, 1000, 0.99, "default")]
    assert said == []
    assert (record["outcome"], record["remedy"], len(record["attempts"])) == ("passed", None, 1)
    assert kept.dt == "draws 1"


def test_first_rung_fails_second_passes():
    # attempt 0 diverges; rung 1 (tuning x2) fails on ESS; rung 2 (target 0.995, and the
    # draws doubled because ESS failed) passes: three attempts, in this order
    sampler = FakeSampler([DIVERGED], [LOW_ESS], [])
    kept, record, said = climb(sampler)
    assert sampler.calls == [(1000, 1000, 0.99, "default"), (2000, 1000, 0.99, "default"),
                             (2000, 2000, 0.995, "default")]
    assert said == [
        "fit: 2 divergent transitions; remedy 1/3: tuning 1000 -> 2000",
        f"fit: {LOW_ESS}; remedy 2/3: target acceptance 0.99 -> 0.995, draws 1000 -> 2000",
        "fit: remedy 2/3 passed the gates (0 divergences)",
    ]
    assert kept.dt == "draws 3" and kept.settings.target_accept == 0.995
    assert (record["outcome"], record["remedy"], record["enabled"]) == ("remedied", 2, True)
    att = record["attempts"]
    assert [(a["remedy"], a["kind"], a["passed"]) for a in att] == [
        (0, "none", False), (1, "tuning", False), (2, "target_accept", True)]
    assert att[1]["settings"] == {"chains": 4, "draws": 1000, "tune": 2000, "target_accept": 0.99}
    assert att[2]["settings"] == {"chains": 4, "draws": 2000, "tune": 2000,
                                  "target_accept": 0.995}
    assert (att[0]["divergences"], att[0]["failures"]) == (2, [DIVERGED])
    assert [a["compile_s"] for a in att] == [1.0, 0.0, 0.0]


def test_every_rung_fails_keeps_the_last_attempt():
    sampler = FakeSampler(*[[HIGH_RHAT]] * 6)
    kept, record, said = climb(sampler)
    assert sampler.calls == [(1000, 1000, 0.99, "default"), (2000, 1000, 0.99, "default"),
                             (2000, 1000, 0.995, "default"), (2000, 1000, 0.999, "default"),
                             (2000, 1000, 0.999, "offsets"), (2000, 1000, 0.999, "offsets+moe")]
    assert [line.split("; ", 1)[1] for line in said[:5]] == [
        "remedy 1/3: tuning 1000 -> 2000", "remedy 2/3: target acceptance 0.99 -> 0.995",
        "remedy 2/3: target acceptance 0.995 -> 0.999",
        "remedy 3/3: group offsets centred",
        "remedy 3/3: group offsets and the MoE shapes centred"]
    assert said[5].startswith("fit: still failing after remedy 3/3 (max R-hat 1.020")
    assert len(said) == 6
    assert (record["outcome"], record["remedy"]) == ("failed", None)
    assert [a["parameterisation"] for a in record["attempts"]] == [
        "default", "default", "default", "default", "offsets", "offsets+moe"]
    assert kept.dt == "draws 6" and kept.parameterisation == "offsets+moe"


def test_draws_double_once_when_ess_fails_late():
    sampler = FakeSampler([DIVERGED], [DIVERGED], [DIVERGED], [LOW_ESS], [LOW_ESS], [LOW_ESS])
    climb(sampler)
    assert [c[1] for c in sampler.calls] == [1000, 1000, 1000, 1000, 2000, 2000]
    assert sampler.calls[-2] == (2000, 2000, 0.999, "offsets")


def test_explicit_settings_get_the_ladder_above_them():
    sampler = FakeSampler(*[[DIVERGED]] * 5)
    _, record, said = climb(sampler, tune=300, draws=500, target_accept=0.997, chains=2)
    assert sampler.calls == [(300, 500, 0.997, "default"), (600, 500, 0.997, "default"),
                             (600, 500, 0.999, "default"), (600, 500, 0.999, "offsets"),
                             (600, 500, 0.999, "offsets+moe")]
    assert said[1].endswith("remedy 2/3: target acceptance 0.997 -> 0.999")
    assert record["attempts"][0]["settings"]["chains"] == 2


def test_target_acceptance_already_at_the_top_skips_rung_2():
    sampler = FakeSampler([DIVERGED], [DIVERGED], [])
    _, record, said = climb(sampler, tune=0, target_accept=0.999)
    assert sampler.calls == [(0, 1000, 0.999, "default"), (1000, 1000, 0.999, "default"),
                             (1000, 1000, 0.999, "offsets")]
    assert said == ["fit: 2 divergent transitions; remedy 1/3: tuning 0 -> 1000",
                    "fit: remedy 2/3 skipped: target acceptance already 0.999",
                    "fit: 2 divergent transitions; remedy 3/3: group offsets centred",
                    "fit: remedy 3/3 passed the gates (0 divergences)"]
    assert record["remedy"] == 3


def test_a_model_without_pooled_offsets_only_centres_the_moe_shapes():
    # the fraction form: "offsets" would rebuild the default model, so rung 3 has one step
    sampler = FakeSampler(*[[DIVERGED]] * 5)
    _, _, said = climb(sampler, parameterisations=lambda: ("offsets+moe",))
    assert [c[3] for c in sampler.calls] == ["default"] * 4 + ["offsets+moe"]
    _, _, said = climb(FakeSampler(*[[DIVERGED]] * 4), parameterisations=())
    assert said[-2:] == ["fit: remedy 3/3 skipped: no pooled offsets to reparameterise in this "
                         "model",
                         "fit: still failing after remedy 2/3 (2 divergent transitions); the "
                         "last attempt is saved, marked unconverged"]


def test_no_remedy_samples_once():
    sampler = FakeSampler([DIVERGED], [])
    kept, record, said = climb(sampler, enabled=False)
    assert len(sampler.calls) == 1
    assert said == ["fit: 2 divergent transitions; remedies off (--no-remedy)"]
    assert (record["enabled"], record["outcome"], len(record["attempts"])) == (False, "failed", 1)
    assert not kept.passed


# ------------------------------------------------------------------ through api.fit and the CLI
@pytest.fixture(scope="module")
def prior_tree():
    """Real draws of the bundled model (from its prior) shaped like nutpie's output."""
    pm = importlib.import_module("pymc")
    import xarray as xr

    from ddtree_bayes.api import load_inputs
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.engine.inference import reproducible_pytensor
    from ddtree_bayes.engine.model import build_model

    reproducible_pytensor()
    data, cfg = load_inputs(bundled("measurements.csv"), bundled("priors.toml"),
                            bundled("hardware.csv"))
    import warnings

    with warnings.catch_warnings():  # the likelihood is a Potential (sufficient statistics):
        # only the prior draws are used here, so PyMC's note about Potentials does not apply
        warnings.filterwarnings("ignore", message="The effect of Potentials")
        prior = pm.sample_prior_predictive(draws=40,
                                           model=build_model(S.build_spec(data, cfg), cfg),
                                           random_seed=1)["prior"].to_dataset()
    prior = _two_chains(prior)
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((2, 20), dtype=bool))})
    return xr.DataTree.from_dict({"posterior": prior, "sample_stats": stats})


def _two_chains(ds):
    """1 chain x 40 draws as 2 chains x 20 draws."""
    import xarray as xr

    out = {}
    for name, da in ds.data_vars.items():
        values = np.asarray(da.values).reshape(2, 20, *da.shape[2:])
        out[name] = (("chain", "draw", *da.dims[2:]), values)
    return xr.Dataset(out, coords={k: v for k, v in ds.coords.items()
                                   if k not in ("chain", "draw")})


@pytest.fixture
def fake_nuts(monkeypatch, prior_tree):
    """engine.inference.sample returns the prior draws; diagnose fails the first attempt
    with 2 divergences and passes the rest (its other values are the real diagnostics)."""
    from ddtree_bayes.engine import inference, store

    calls: list[dict] = []
    real_diagnose = inference.diagnose

    def sample(model, settings, seed, progress=True, cache=None):
        calls.append({"settings": settings, "seed": seed,
                      "centred_moe": "moe_z" not in {v.name for v in model.free_RVs},
                      "cache_id": id(cache)})
        return prior_tree, {"compile_s": 0.5 if not cache else 0.0, "sample_s": 1.5}, "nutpie"

    def diagnose(posterior, stats):
        rows, _, _ = real_diagnose(posterior, stats)
        return (rows, 2, [DIVERGED]) if len(calls) == 1 else (rows, 0, [])

    monkeypatch.setattr(inference, "reproducible_pytensor", lambda: None)
    monkeypatch.setattr(inference, "sample", sample)
    monkeypatch.setattr(inference, "diagnose", diagnose)
    # the draws are the prior's, which this diagnose passes: reading the saved fit re-runs the
    # gates on its diagnostics and draws (store._check_gates), which would refuse them
    monkeypatch.setattr(store, "_check_gates", lambda meta, path, draws=None, **kw: None)
    return calls


@pytest.fixture
def work(tmp_path):
    return copy_bundled_data(tmp_path)


def test_fit_records_the_ladder_in_the_artifact_and_the_json(work, fake_nuts):
    from ddtree_bayes.engine import store
    from test_json_schemas import validate_output

    code, out, err = run_cli(work, "fit", "--quiet", "--format", "json", "--seed", "7")
    assert code == 0, err
    assert err.splitlines() == ["fit: 2 divergent transitions; remedy 1/3: tuning 1000 -> 2000",
                                "fit: remedy 1/3 passed the gates (0 divergences)"]
    assert [(c["settings"].tune, c["settings"].target_accept, c["seed"], c["centred_moe"])
            for c in fake_nuts] == [(1000, 0.99, 7, False), (2000, 0.99, 7, False)]
    assert fake_nuts[0]["cache_id"] == fake_nuts[1]["cache_id"]  # compiled once, sampled twice
    payload = json.loads(out)
    validate_output("fit", payload)
    assert payload["converged"] and payload["remedies"]["outcome"] == "remedied"
    assert payload["timings"]["sample_s"] == pytest.approx(3.0)  # both attempts
    meta = store.load(workdir=work).meta
    assert meta["sampler"]["tune"] == 2000 and meta["converged"]
    assert meta["remedies"] == payload["remedies"]
    assert [(a["remedy"], a["settings"]["tune"], a["passed"]) for a in meta["remedies"]["attempts"]
            ] == [(0, 1000, False), (1, 2000, True)]


def test_no_remedy_fails_after_one_attempt(work, fake_nuts):
    code, out, err = run_cli(work, "fit", "--quiet", "--no-remedy", "--format", "json")
    assert code == 5 and len(fake_nuts) == 1
    assert err.splitlines()[0] == "fit: 2 divergent transitions; remedies off (--no-remedy)"
    assert json.loads(out)["remedies"]["enabled"] is False


class _Asked(Exception):
    """Raised by the patched ladder: the settings a fit asked it for are all a test needs."""


@pytest.mark.parametrize("data, draws, expected", [
    (None, None, 1000),                                          # bundled: 34 parameters
    ("data/examples/public_multi_model.csv", None, 3000),        # the corpus: 211
    ("data/examples/public_multi_model.csv", 500, 500),          # asked for: kept
])
def test_draws_default_to_the_model_size(work, monkeypatch, data, draws, expected):
    """Without --draws a fit samples 1000 per chain, 3000 for a model of more than 100 free
    parameters (the gates take the least bulk ESS over all of them); an explicit value wins."""
    from pathlib import Path

    from ddtree_bayes.engine import fitting

    asked: list[SamplerSettings] = []

    def run(attempt, requested, **kwargs):
        asked.append(requested)
        raise _Asked

    monkeypatch.setattr(R, "run", run)
    repo = Path(__file__).resolve().parents[1]
    with pytest.raises(_Asked):
        fitting.fit(None if data is None else repo / data, draws=draws, workdir=work,
                    progress=False)
    assert asked[0].draws == expected


def test_free_size_counts_every_element_of_the_free_variables():
    """By the initial point's sizes, plus the one constrained element of each zero-sum
    variable (the engine effects: their dims count every engine)."""
    from ddtree_bayes.api import load_inputs
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.engine.model import build_model

    data, cfg = load_inputs(bundled("measurements.csv"), bundled("priors.toml"),
                            bundled("hardware.csv"))
    model = build_model(S.build_spec(data, cfg), cfg)
    zero_sum = sum(1 for rv in model.free_RVs if rv.name.endswith("_engine_z"))
    assert zero_sum == 3
    assert R.free_size(model) == sum(v.size for v in model.initial_point().values()) + zero_sum
    assert SamplerSettings().for_model(R.free_size(model)).draws == 1000
    with pytest.raises(ValueError, match="for_model"):
        _ = SamplerSettings().n_draws


# ------------------------------------------------------------------ the reparameterised model
def test_the_reparameterised_model_is_the_same_posterior():
    """Structured + roofline forms (non-centred offsets by default) at one point: the
    default model's log density differs from the flipped one's (offsets and MoE shapes
    centred) by exactly the Jacobian of the change of variables, sum(log sd) of each offset
    plus sum(log moe_hw_sd) of the MoE shapes."""
    importlib.import_module("pymc")
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.inference import reproducible_pytensor
    from ddtree_bayes.engine.model import build_model
    from ddtree_bayes.workflows.extrapolation import with_forms

    reproducible_pytensor()
    cfg = parse_priors(with_forms(bundled("priors.toml").read_text(), "roofline", "structured"))
    hw = load_hardware(bundled("hardware.csv"))
    spec = S.build_spec(load_measurements(bundled("measurements.csv"), hw), cfg, hardware=hw,
                        cards=load_model_cards(bundled("models.csv")))
    default = build_model(spec, cfg)
    flipped = build_model(spec, cfg, reparameterise=True, centre_moe=True)
    free = {rv.name for rv in default.free_RVs}
    assert {"moe_z", "compute_eff_z", "spec_fixed_z", "spec_pass_z", "spec_tree_z"} <= free
    assert not free & {"moe_distinct_exponent", "compute_eff_log", "spec_fixed_log"}
    assert {"compute_eff_log", "spec_fixed_log"} <= {d.name for d in default.deterministics}
    free = {rv.name for rv in flipped.free_RVs}
    assert {"moe_distinct_exponent", "compute_eff_log", "spec_fixed_log", "spec_pass_log",
            "spec_tree_log"} <= free
    assert not free & {"moe_z", "compute_eff_z", "spec_fixed_z"}
    # the default form's variables stay in the posterior, as deterministics
    assert {"moe_z", "compute_eff_z", "spec_fixed_z", "spec_pass_z", "spec_tree_z"} <= {
        d.name for d in flipped.deterministics}
    # a fixed spread of 0 has nothing to centre: that offset stays non-centred
    zero = parse_priors(with_forms(bundled("priors.toml").read_text(), "roofline", "structured")
                        .replace('[priors.spec_tree_log_sd]\ndist = "point"\nvalue = 0.8',
                                 '[priors.spec_tree_log_sd]\ndist = "point"\nvalue = 0.0'))
    assert zero.priors["spec_tree_log_sd"].params["value"] == 0.0
    free = {rv.name for rv in build_model(spec, zero, reparameterise=True).free_RVs}
    assert {"spec_tree_z", "spec_fixed_log"} <= free and "spec_tree_log" not in free
    sd = {n: cfg.priors[f"{n}_log_sd"].params["value"]
          for n in ("compute_eff", "spec_fixed", "spec_pass", "spec_tree")}
    point = {"step_ar_ms": np.array([7.5, 11.0]), "moe_share": np.array([0.4, 0.3]),
             "moe_distinct_exponent_mu": 0.46, "moe_hw_sd": 0.05, "moe_z": np.array([0.5, -0.5]),
             "ctx_ms_per_unit": np.array([3.0, 3.3]), "ctx_verify_exponent": 0.6,
             "compute_eff_log_mu": -1.0, "compute_eff_log": np.array([-0.9, -1.1]),
             "spec_fixed_log_mu": -2.5, "spec_fixed_log": np.array([-2.4, -2.6]),
             "spec_pass_log_mu": -2.2, "spec_pass_log": np.array([-2.3, -2.0]),
             "spec_tree_log_mu": -6.0, "spec_tree_log": np.array([-5.8, -6.0]),
             "structure_sd": 0.03, "reduction": np.array([0.4]), "noise_sd": 0.03,
             "spec_fixed_engine_z": np.array([0.3, -0.3]),   # zero-sum over the engines
             "spec_pass_engine_z": np.array([-0.4, 0.4]),
             "spec_tree_engine_z": np.array([0.2, -0.2]),
             "tp_busbw_fabric_gb_s": 300.0, "tp_busbw_pcie_gb_s": 12.0}
    other = dict(point, moe_distinct_exponent=0.46 + 0.05 * point["moe_z"])
    log_step_ar = np.log(point["step_ar_ms"][spec.group_system])
    for n, s in sd.items():
        mean = point[f"{n}_log_mu"]
        if n.startswith("spec_"):   # a group's mean: population + engine + physical offset
            part = n.removeprefix("spec_")
            mean = (mean + cfg.priors[f"{n}_engine_sd"].params["value"]
                    * point[f"{n}_engine_z"][spec.group_engine] - log_step_ar
                    + (np.log(spec.group_pass_roof_ms) if part == "pass" else 0.0))
        other[f"{n}_z"] = (point[f"{n}_log"] - mean) / s

    from test_model import unconstrained

    def logp(model, values):
        return float(model.compile_logp()(unconstrained(model, values)))

    n_groups = {n: len(point[f"{n}_log"]) for n in sd}
    jacobian = (sum(n_groups[n] * math.log(s) for n, s in sd.items())
                + len(point["moe_z"]) * math.log(0.05))
    assert logp(default, other) - logp(flipped, other) == pytest.approx(jacobian, abs=1e-8)


def test_rung_3_tries_only_parameterisations_that_change_the_model():
    importlib.import_module("pymc")
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.workflows.extrapolation import with_forms

    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements(bundled("measurements.csv"), hw)
    cards = load_model_cards(bundled("models.csv"))
    toml = bundled("priors.toml").read_text()
    found = {}
    for forms in (("power", "fraction"), ("roofline", "structured")):
        cfg = parse_priors(with_forms(toml, *forms))
        spec = S.build_spec(data, cfg, hardware=hw, cards=cards)
        sampler = R.ModelSampler(R.builder(spec, cfg), seed=0)
        found[forms] = sampler.parameterisations()
        free = {p: {rv.name for rv in m.free_RVs} for p, m in sampler.models.items()}
        assert ("moe_z" in free["offsets"]) and ("moe_z" not in free["offsets+moe"])
    # the fraction form has no pooled group offsets: "offsets" would be the default model
    assert found == {("power", "fraction"): ("offsets+moe",),
                     ("roofline", "structured"): ("offsets", "offsets+moe")}

"""A hybrid target's fixed speculative cost (the card's ``recurrent_layers``): the model's
per-engine ``spec_fixed_recurrent`` effect, the card column, predict's draws and notes."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.errors import DataError, PriorsError
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine.inference import reproducible_pytensor

reproducible_pytensor()
pm = importlib.import_module("pymc")
from ddtree_bayes.engine.model import build_model  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "data" / "examples" / "public_multi_model.csv"
#: vLLM on a transformer (Llama-3.1-8B, one H100) and on a hybrid (Qwen3.8-27B, one Max-Q)
PAIRS = ("llama-3.1-8b-instruct,h100,1,vllm,", "qwen3.8-27b,rtx-pro-6000-maxq,1,vllm,")


def two_targets_csv() -> str:
    lines = CORPUS.read_text().splitlines()
    return "\n".join([lines[0], *(ln for ln in lines[1:] if ln.startswith(PAIRS))]) + "\n"


@pytest.fixture(scope="module")
def spec_cfg():
    cfg = parse_priors(bundled("priors.toml").read_text())
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements("two.csv", hw, text=two_targets_csv())
    return S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv"))), cfg


def test_the_bundled_cards_say_which_targets_are_hybrids():
    cards = load_model_cards(bundled("models.csv"))
    assert cards["qwen3.8-27b"].recurrent_layers == 48 and cards["qwen3.8-27b"].recurrent
    assert cards["qwen3.5-397b-a17b"].recurrent_layers == 45
    assert cards["kimi-k2.6"].recurrent_layers is None and not cards["kimi-k2.6"].recurrent


def test_recurrent_layers_above_the_cards_layers_is_one_line():
    text = bundled("models.csv").read_text()
    header, row = text.splitlines()[:2]
    # llama-3.1-8b: 32 layers, recurrent_layers blank, 32 q heads, 8 kv heads
    assert row.endswith(",,32,8")
    bad = header + "\n" + row[:-len(",,32,8")] + ",33,32,8\n"
    with pytest.raises(DataError, match=r"row 2.*recurrent_layers.*recurrent_layers 33 is not "
                                        r"between 0 and the card's 32 layers"):
        load_model_cards("m.csv", bad)


def test_each_group_knows_whether_its_target_is_a_hybrid(spec_cfg):
    spec, _ = spec_cfg
    rec = dict(zip(spec.groups, spec.group_recurrent.tolist(), strict=True))
    assert rec == {"llama-3.1-8b-instruct@h100x1/vllm/eagle": 0.0,
                   "llama-3.1-8b-instruct@h100x1/vllm/eagle3": 0.0,
                   "qwen3.8-27b@rtx-pro-6000-maxqx1/vllm/mtp": 1.0}


def test_only_a_hybrid_groups_fixed_mean_carries_its_engines_effect(spec_cfg):
    """At the model's initial point, moving spec_fixed_recurrent_z[vllm] by 0.7 moves the
    hybrid group's spec_fixed_mean by sd x 0.7 (sd = the prior's point value, 1.0) and leaves
    the transformer groups' where they were."""
    spec, cfg = spec_cfg
    m = build_model(spec, cfg)
    assert m["spec_fixed_recurrent_z"].eval().shape == (1,)   # one engine: vllm
    point = m.initial_point()
    (mean,) = m.replace_rvs_by_values([m["spec_fixed_mean"]])
    f = m.compile_fn(mean, inputs=m.value_vars, on_unused_input="ignore", point_fn=False)
    before = f(**point)
    after = f(**{**point, "spec_fixed_recurrent_z": point["spec_fixed_recurrent_z"] + 0.7})
    sd = cfg.priors["spec_fixed_recurrent_sd"].params["value"]
    np.testing.assert_allclose(after - before, [0.0, 0.0, sd * 0.7], atol=1e-12)


def test_a_fit_without_a_hybrid_has_no_such_variable():
    cfg = parse_priors(bundled("priors.toml").read_text())
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements(bundled("measurements.csv"), hw)
    m = build_model(S.build_spec(data, cfg, hardware=hw), cfg)
    assert "spec_fixed_recurrent" not in m.named_vars
    assert "spec_fixed_recurrent_z" not in m.named_vars


def test_a_priors_file_without_the_prior_is_refused_for_a_hybrid_group():
    cfg = parse_priors(bundled("priors.toml").read_text())
    cfg = dataclasses.replace(cfg, priors={k: v for k, v in cfg.priors.items()
                                           if k != S.RECURRENT_SD})
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements("two.csv", hw, text=two_targets_csv())
    with pytest.raises(PriorsError, match=r"hybrid target \(group qwen3.8-27b@rtx-pro-6000-maxqx1"
                                          r"/vllm/mtp.*add \[priors.spec_fixed_recurrent_sd\]"):
        S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv")))


def _fit_with_effect(effect: np.ndarray | None):
    """The point-mass fit of several models as a structured fit of two engines (one group, of
    sglang) stores them; its vllm engine given a hybrid effect when ``effect`` is given."""
    from ddtree_bayes.engine.testing import multi_model_draws

    d = multi_model_draws()
    model = {**d.meta["model"], "engines": ["sglang", "vllm"], "group_engine": [0],
             "step_form": "structured"}
    v = dict(d.variables)
    if effect is not None:
        v["spec_fixed_recurrent"] = effect
    return dataclasses.replace(d, meta={**d.meta, "model": model}, variables=v, memo={})


def _qwen_scenario(d, engine="vllm"):
    """A query of the hybrid Qwen3.8-27B (all the two functions read of a scenario)."""
    return SimpleNamespace(model="qwen3.8-27b", engine=engine)


def test_an_unmeasured_hybrid_group_takes_its_engines_learned_effect():
    from ddtree_bayes.engine.structure import recurrent_log_effect

    n = _fit_with_effect(None).n_draws
    d = _fit_with_effect(np.tile([0.5, 1.5], (n, 1)))   # sglang 0.5, vllm 1.5
    rng = np.random.default_rng(0)
    got = recurrent_log_effect(d, _qwen_scenario(d, "vllm"), "vllm", rng)
    np.testing.assert_array_equal(got, np.full(n, 1.5))
    # a transformer target takes none
    llama = SimpleNamespace(model="llama-3.1-8b-instruct")
    assert recurrent_log_effect(d, llama, "vllm", rng) == 0.0


def test_an_engine_without_an_effect_draws_it_from_the_prior():
    """An engine the fit has no effect of: sd x z, sd the prior's point value (1.0), so the
    draws are standard normal: mean ~0 and sd ~1 over 4000 draws (by hand: 5 sigma bounds)."""
    from ddtree_bayes.engine.structure import recurrent_log_effect

    d = _fit_with_effect(None)
    got = recurrent_log_effect(d, _qwen_scenario(d, "trtllm"), "trtllm",
                               np.random.default_rng(1))
    assert got.shape == (d.n_draws,)
    assert abs(got.mean()) < 5 / np.sqrt(d.n_draws)
    assert abs(got.std() - 1.0) < 5 / np.sqrt(2 * d.n_draws)


def test_the_note_says_when_a_hybrids_fixed_cost_is_prior_driven():
    from ddtree_bayes.engine.structure import recurrent_note

    d = _fit_with_effect(None)
    assert "prior-driven" in recurrent_note(d, _qwen_scenario(d, "vllm"), "vllm")
    # the fit's one group (sglang) a hybrid's: learned for sglang, and a transformer target
    # in sglang is then the prior's
    d2 = dataclasses.replace(d, meta={**d.meta, "model": {**d.meta["model"],
                                                          "group_recurrent": [True]}}, memo={})
    assert "learned from its hybrid groups" in recurrent_note(d2, _qwen_scenario(d2), "sglang")
    llama = SimpleNamespace(model="llama-3.1-8b-instruct")
    assert "measured sglang on hybrid targets only" in recurrent_note(d2, llama, "sglang")
    assert recurrent_note(d, llama, "vllm") == ""


def test_a_fraction_fit_says_nothing_of_a_term_it_has_not():
    """A review found the note in a fit of the fraction step form, which has no such term."""
    from ddtree_bayes.engine.structure import recurrent_note

    d = _fit_with_effect(None)
    d = dataclasses.replace(d, meta={**d.meta, "model": {**d.meta["model"],
                                                         "step_form": "fraction"}}, memo={})
    assert recurrent_note(d, _qwen_scenario(d), "vllm") == ""


def test_recurrent_layers_0_is_a_transformer_as_blank():
    text = bundled("models.csv").read_text()
    header, row = text.splitlines()[:2]
    # (its recurrent_layers cell, before q_heads and kv_heads: appending "0" to the row made
    # kv_heads 80 once kv_heads followed it, and left recurrent_layers blank)
    assert row.endswith(",,32,8")
    row = row[:-len(",,32,8")] + ",0,32,8"
    card = load_model_cards("m.csv", header + "\n" + row + "\n")["llama-3.1-8b-instruct"]
    assert card.recurrent_layers is None and not card.recurrent and card.kv_heads == 8


def test_fit_warns_of_a_cards_copy_from_before_the_column(tmp_path):
    """A review: a data/models.csv copied from the bundled cards before recurrent_layers
    (card add copies them) fitted Qwen3.8-27B as a transformer, exit 0, no word. fit now warns
    before sampling, naming the card and the value to write."""
    import csv
    import io

    from ddtree_bayes.engine.fitting import FitInputs

    rows = list(csv.reader(io.StringIO(bundled("models.csv").read_text())))
    col = rows[0].index("recurrent_layers")
    old = [[v for k, v in enumerate(r) if k != col] for r in rows if r]
    (tmp_path / "data").mkdir()
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(old)
    (tmp_path / "data" / "models.csv").write_text(out.getvalue())
    (tmp_path / "data" / "measurements.csv").write_text(two_targets_csv())
    inputs = FitInputs.read(workdir=tmp_path, priors=bundled("priors.toml"))
    cfg = parse_priors(bundled("priors.toml").read_text())
    assert inputs.warnings(cfg) == [
        "the model card of qwen3.8-27b here has no recurrent_layers where the built-in card "
        "says 48: it is fitted as a transformer, without its engine's fixed cost for a hybrid "
        "target (fix: write 48 in its recurrent_layers column of data/models.csv)"]


def test_the_reports_log_prior_has_a_learned_recurrent_spread():
    """A priors file that learns spec_fixed_recurrent_sd (LogNormal) gave the report's prior
    sensitivity (power-scaling, log_prior) its effects' z but not the spread's own density:
    scaling "the prior" left that prior out, and the by-prior table had no row of it."""
    from ddtree_bayes.workflows import report

    text = bundled("priors.toml").read_text()
    point = '[priors.spec_fixed_recurrent_sd]\ndist = "point"\nvalue = 1.0\n'
    learned = parse_priors(text.replace(point, '[priors.spec_fixed_recurrent_sd]\n'
                                               'dist = "lognormal"\nmedian = 0.5\nsigma = 0.5\n'))
    coords = {"system": ["a"], "overhead_group": ["llama", "qwen"], "relation": []}
    groups = {"engines": ["vllm"], "group_engine": [0, 0], "group_system": [0, 0],
              "group_pass_roof_ms": [1.0, 1.0], "group_recurrent": [0.0, 1.0]}
    v = report.prior_draws(learned, coords, 3, seed=1, groups=groups)
    v[S.RECURRENT_SD] = np.array([0.5, 1.0, 0.25])
    lp = report.log_prior(learned, coords, v)
    # log LogNormal(x; median 0.5, sigma 0.5) = -ln x - ln 0.5 - ln(2 pi) / 2
    #                                           - (ln x - ln 0.5)^2 / (2 * 0.25):
    # x = 0.5: 2 ln 2 - 0.918939 = 0.467356; x = 1: ln 2 - 0.918939 - (ln 2)^2 / 0.5 =
    # -1.186697; x = 0.25: 3 ln 2 - 0.918939 - (ln 2)^2 / 0.5 = 0.199597
    assert lp[S.RECURRENT_SD] == pytest.approx([0.467356, -1.186697, 0.199597], abs=1e-6)
    assert "spec_fixed_recurrent_z" in lp
    # the bundled point value has no density to scale, as every fixed scale
    fixed = parse_priors(text)
    v = report.prior_draws(fixed, coords, 3, seed=1, groups=groups)
    assert v[S.RECURRENT_SD].tolist() == [1.0, 1.0, 1.0]
    assert S.RECURRENT_SD not in report.log_prior(fixed, coords, v)

"""The AMD effect on a speculative step's fixed and per-pass costs (engine/model.py
``spec_amd``): which groups carry it, the model's term, the priors it needs, and what an
answer on an AMD GPU draws and says when the fit learned it, when it learned it of other
engines only, and when it has no AMD group at all (prior-driven)."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.errors import PriorsError
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine.inference import reproducible_pytensor

reproducible_pytensor()
pm = importlib.import_module("pymc")
from ddtree_bayes.engine.model import build_model  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "data" / "examples" / "public_multi_model.csv"
#: vLLM on Llama-3.1-8B on one H100 (two groups: EAGLE, EAGLE-3) and on Qwen3.8-27B on one
#: Max-Q; the H100 is read as an AMD GPU below (its compute capability a gfx target)
PAIRS = ("llama-3.1-8b-instruct,h100,1,vllm,", "qwen3.8-27b,rtx-pro-6000-maxq,1,vllm,")


def _amd_h100_table() -> str:
    lines = bundled("hardware.csv").read_text().splitlines()
    (i,) = [k for k, row in enumerate(lines) if row.startswith("h100,")]
    lines[i] = lines[i].replace(",9.0,", ",gfx942,", 1)
    assert lines[i] != bundled("hardware.csv").read_text().splitlines()[i]
    return "\n".join(lines) + "\n"


def _spec(priors=None, hardware_text=None):
    cfg = priors or parse_priors(bundled("priors.toml").read_text())
    hw = load_hardware("hw.csv", text=hardware_text or _amd_h100_table())
    lines = CORPUS.read_text().splitlines()
    text = "\n".join([lines[0], *(ln for ln in lines[1:] if ln.startswith(PAIRS))]) + "\n"
    data = load_measurements("two.csv", hw, text=text)
    return S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv"))), cfg


def test_is_amd_reads_the_gfx_target():
    from ddtree_bayes.core.tensor_cores import is_amd

    hw = load_hardware(bundled("hardware.csv"))
    assert [name for name in ("mi300x", "mi355x", "h100", "b300") if is_amd(hw[name])] == [
        "mi300x", "mi355x"]


def test_each_group_knows_whether_its_gpu_is_an_amd_one():
    spec, _ = _spec()
    assert dict(zip(spec.groups, spec.group_amd.tolist(), strict=True)) == {
        "llama-3.1-8b-instruct@h100x1/vllm/eagle": 1.0,
        "llama-3.1-8b-instruct@h100x1/vllm/eagle3": 1.0,
        "qwen3.8-27b@rtx-pro-6000-maxqx1/vllm/mtp": 0.0}
    assert S.model_meta(spec, parse_priors(bundled("priors.toml").read_text())
                      )["group_amd"] == [True, True, False]


def test_only_the_amd_groups_fixed_and_pass_means_carry_the_effect():
    """At the model's initial point, moving spec_amd_log_mu by 0.3 moves the two AMD groups'
    fixed and per-pass means by 0.3 and nothing else; moving spec_amd_z[vllm] by 0.7 moves
    them by sd x 0.7 (sd the prior's point value 0.5); the per-node means never move."""
    spec, cfg = _spec()
    m = build_model(spec, cfg)
    assert m["spec_amd_z"].eval().shape == (1,)   # one engine: vllm
    point = m.initial_point()
    means = m.replace_rvs_by_values([m[f"spec_{p}_mean"] for p in ("fixed", "pass", "tree")])
    f = m.compile_fn(means, inputs=m.value_vars, on_unused_input="ignore", point_fn=False)
    before = f(**point)
    mu = f(**{**point, "spec_amd_log_mu": point["spec_amd_log_mu"] + 0.3})
    z = f(**{**point, "spec_amd_z": point["spec_amd_z"] + 0.7})
    sd = cfg.priors[S.AMD_SD].params["value"]
    assert sd == 0.5
    for k, part in enumerate(("fixed", "pass", "tree")):
        want = [0.0, 0.0, 0.0] if part == "tree" else [0.3, 0.3, 0.0]
        np.testing.assert_allclose(mu[k] - before[k], want, atol=1e-12)
        np.testing.assert_allclose(z[k] - before[k], np.array(want) / 0.3 * sd * 0.7,
                                   atol=1e-12)


def test_a_fit_of_cuda_deployments_has_no_such_variable():
    """Without an AMD group the graph is every earlier fit's: no spec_amd term at all."""
    spec, cfg = _spec(hardware_text=bundled("hardware.csv").read_text())
    assert not spec.group_amd.any()
    m = build_model(spec, cfg)
    assert not {"spec_amd", "spec_amd_z", S.AMD_MU} & set(m.named_vars)
    assert "group_amd" not in S.model_meta(spec, cfg)


def test_a_priors_file_without_the_priors_is_refused_for_an_amd_group():
    cfg = parse_priors(bundled("priors.toml").read_text())
    cfg = dataclasses.replace(cfg, priors={k: v for k, v in cfg.priors.items() if k != S.AMD_MU})
    with pytest.raises(PriorsError, match=r"AMD GPU \(group llama-3.1-8b-instruct@h100x1/vllm/"
                                          r"eagle\).*add \[priors.spec_amd_log_mu\]"):
        _spec(priors=cfg)


def _fit(variables: dict | None = None, group_amd=None):
    """The point-mass fit of several models as a structured fit of two engines (one group, of
    sglang), with the AMD variables given."""
    from ddtree_bayes.engine.testing import multi_model_draws

    d = multi_model_draws()
    model = {**d.meta["model"], "engines": ["sglang", "vllm"], "group_engine": [0],
             "step_form": "structured"}
    if group_amd is not None:
        model["group_amd"] = group_amd
    return dataclasses.replace(d, meta={**d.meta, "model": model},
                               variables={**d.variables, **(variables or {})}, memo={})


def test_an_nvidia_gpu_takes_no_effect_and_an_amd_one_its_engines_learned_one():
    from ddtree_bayes.engine.structure import amd_log_effect

    n = _fit().n_draws
    d = _fit({"spec_amd": np.tile([0.4, 1.2], (n, 1)), S.AMD_MU: np.full(n, 0.8),
              S.AMD_SD: np.full(n, 0.5)}, group_amd=[True])
    rng = np.random.default_rng(0)
    assert amd_log_effect(d, "h200", "vllm", rng) == 0.0
    np.testing.assert_array_equal(amd_log_effect(d, "mi300x", "vllm", rng), np.full(n, 1.2))
    np.testing.assert_array_equal(amd_log_effect(d, "mi355x", "sglang", rng), np.full(n, 0.4))
    # an engine the fit never ran: the learned mean 0.8 with the engines' spread 0.5
    got = amd_log_effect(d, "mi300x", "trtllm", np.random.default_rng(1))
    assert abs(got.mean() - 0.8) < 5 * 0.5 / np.sqrt(n)
    assert abs(got.std() - 0.5) < 5 * 0.5 / np.sqrt(2 * n)


def test_a_fit_without_an_amd_group_draws_the_effect_from_the_priors():
    """Normal(0, 0.7) plus Normal(0, 0.5): mean 0, sd sqrt(0.49 + 0.25) = 0.860 (5 sigma)."""
    from ddtree_bayes.engine.structure import amd_log_effect

    d = _fit()
    got = amd_log_effect(d, "mi300x", "vllm", np.random.default_rng(2))
    sd = np.sqrt(0.7 ** 2 + 0.5 ** 2)
    assert abs(got.mean()) < 5 * sd / np.sqrt(d.n_draws)
    assert abs(got.std() - sd) < 5 * sd / np.sqrt(2 * d.n_draws)
    # priors from before the term: nothing
    old = re.sub(r"\[priors\.spec_amd_[a-z_]+\][^\[]*", "", d.priors_toml)
    assert old != d.priors_toml and "spec_amd" not in old
    assert amd_log_effect(dataclasses.replace(d, priors_toml=old, memo={}), "mi300x", "vllm",
                          np.random.default_rng(2)) == 0.0


def test_the_note_says_where_the_amd_term_comes_from():
    from ddtree_bayes.engine.structure import amd_note

    def ask(hardware, method="eagle"):
        return SimpleNamespace(hardware=hardware, method=method)

    d = _fit()
    assert "prior-driven (the fit has no AMD group" in amd_note(d, ask("mi300x"), "vllm")
    assert amd_note(d, ask("h200"), "vllm") == ""
    assert amd_note(d, ask("mi300x", "ar"), "vllm") == ""
    n = d.n_draws
    learned = _fit({"spec_amd": np.zeros((n, 2)), S.AMD_MU: np.zeros(n),
                    S.AMD_SD: np.full(n, 0.5)}, group_amd=[True])
    assert "learned from its AMD groups" in amd_note(learned, ask("mi300x"), "sglang")
    assert "the fit has no vllm group on AMD" in amd_note(learned, ask("mi300x"), "vllm")


def test_a_fit_of_the_fraction_form_notes_no_amd_term():
    """The fraction step form prices an unmeasured group's overhead as a share of the step,
    with no AMD term (engine/predictive.py), yet its notes said "the extra fixed and per-pass
    cost on AMD is prior-driven": `predict --accept 3 --hardware mi300x --engine trtllm
    --method eagle3 --block 3` on a `fit --step-form fraction` of the bundled data. A fit of
    that form now notes nothing."""
    from ddtree_bayes.engine.structure import amd_note

    d = _fit()
    fraction = d.view(meta={**d.meta, "model": {**d.meta["model"], "step_form": "fraction"}})
    sc = SimpleNamespace(hardware="mi300x", method="eagle")
    assert "prior-driven" in amd_note(d, sc, "vllm")
    assert amd_note(fraction, sc, "vllm") == ""


def test_a_group_carried_to_an_amd_gpu_scales_its_fixed_and_pass_costs_only():
    """The B300 DDTree group (8 ms step: 0.05 fixed, 0.1 per pass, 0.002 per node, as ratios
    of the step) carried to 8 x MI355X in a fit whose sglang engine learned an AMD effect of
    0.6: the fixed and per-pass costs times exp(0.6), the 32 nodes' cost unchanged; carried
    to the H200 (not AMD) nothing changes."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.structure import carried_group, carried_spec_ms, pass_roofline
    from test_structure_model import transferable_point_mass

    draws, at = transferable_point_mass()
    n = draws.n_draws
    model = {**draws.meta["model"], "engines": ["sglang"], "group_engine": [0],
             "group_amd": [False]}
    f = dataclasses.replace(draws, meta={**draws.meta, "model": model}, memo={},
                            variables={**draws.variables, "spec_amd": np.full((n, 1), 0.6),
                                       S.AMD_MU: np.full(n, 0.6), S.AMD_SD: np.full(n, 0.5)})
    mi = P.resolve_scenario(f, hardware="mi355x", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0)

    def spec(sc):
        return carried_spec_ms(f, sc, carried_group(f, sc, "sglang"), 1.0, 32.0, 1.0,
                               np.random.default_rng(3), None)

    for sc, factor in ((mi, np.exp(0.6)), (at["h200"], 1.0)):
        roof = pass_roofline(f, sc)[0] / pass_roofline(f, at["b300"])[0]
        np.testing.assert_allclose(spec(sc), 8 * ((0.05 + 0.1 * roof) * factor + 0.002 * 32))


def _unmeasured_amd_fit(n: int):
    """:func:`test_structure_model.structured_multi_model_draws` with ``n`` draws, one engine
    (sglang, effects 0) and no AMD group, and Llama-3.1-8B's DDTree 16/32 question on one
    MI300X (no group of its own to carry): the AMD term is prior-driven."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.testing import multi_model_draws

    draws = multi_model_draws(
        n, moe_form="roofline", moe_distinct_exponent=[0.5, 0.5], compute_tok_ratio=[0.01, 0.01],
        spec_fixed_ratio=[0.05], spec_pass_ratio=[0.1], spec_tree_ratio=[0.002],
        structure_sd=0.04, transfer_system_sd=0.0, moe_distinct_exponent_mu=0.5,
        compute_eff_log_mu=-1.2, compute_eff_log_sd=0.0,
        **{f"spec_{p}_{s}": v for p in ("fixed", "pass", "tree")
           for s, v in (("log_mu", -3.0), ("log_sd", 0.0), ("engine", [0.0]),
                        ("engine_sd", 0.0))})
    draws.meta["model"].update({"step_form": "structured", "knee": 3.0,
                                "methods": {"ddtree": {"passes": 1, "tree": True}},
                                "engines": ["sglang"], "group_engine": [0]})
    sc = P.resolve_scenario(draws, hardware="mi300x", gpus=1, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0,
                            model="llama-3.1-8b-instruct")
    return draws, sc


def test_an_unmeasured_groups_fixed_and_pass_costs_share_one_amd_draw():
    """The model adds one spec_amd[e] to a group's fixed and per-pass log means; predict drew
    it twice, independently, for the two parts of a group the fit never measured (a fit with
    no AMD group: every AMD question on the public corpus), so their sum scattered less than
    the model says. Here the fixed and the one pass cost exp(-3) ms each before the term and the
    32 nodes exp(-3) ms each: SPEC = exp(-3) (2 exp(a) + 32), so log((SPEC e^3 - 32) / 2) is
    the draw a itself, Normal(0, sqrt(0.7^2 + 0.5^2) = 0.860); two independent draws gave
    log((e^a1 + e^a2) / 2), of sd about 0.63."""
    import math

    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.structure import pass_roofline

    n = 4000
    draws, sc = _unmeasured_amd_fit(n)
    roof = pass_roofline(draws, sc)[0]
    # the per-pass population mean that makes the pass cost exp(-3) ms, as the fixed one
    draws.variables["spec_pass_log_mu"] = np.full(n, -3.0 - math.log(roof))
    parts, how = P.step_components(draws, sc, np.random.default_rng(5), anchor=False)
    assert "drawn from the pooled population" in how and "prior-driven" in how
    a = np.log((parts["spec"] * math.exp(3.0) - 32.0) / 2.0)
    sd = math.sqrt(0.7 ** 2 + 0.5 ** 2)
    assert abs(a.mean()) < 5 * sd / math.sqrt(n)
    assert abs(a.std() - sd) < 5 * sd / math.sqrt(2 * n)


def test_a_folds_held_out_amd_group_teaches_nothing_and_says_so():
    """A validation fold keeps the full data's model (meta group_amd, the spec_amd variables)
    with the held-out rows' weight 0. Its only AMD group held out, the fit learned no AMD
    term, yet the warning stayed silent (any group_amd) and the note said sglang's AMD cost
    was "learned from its AMD groups". Both now count the groups the fit learned from
    (engine/structure.group_learned), as the carried-group search does."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.structure import amd_note, amd_overhead_warning

    n = _fit().n_draws
    d = _fit({"spec_amd": np.zeros((n, 2)), S.AMD_MU: np.zeros(n), S.AMD_SD: np.full(n, 0.5)},
             group_amd=[True])
    sc = P.resolve_scenario(d, hardware="mi300x", gpus=8, engine="sglang", method="ddtree",
                            block=8, budget=8, verify_tokens=None, context_tokens=0.0,
                            model="kimi-k2.6")
    assert amd_overhead_warning(d, sc) is None
    assert "sglang's extra fixed and per-pass cost on AMD learned from its AMD groups" in (
        amd_note(d, sc, "sglang"))
    (row,) = [r.row for r in d.measurements.rows if r.method == "ddtree"]
    fold = d.view(meta={**d.meta, "held_out_rows": [row]})
    line = amd_overhead_warning(fold, sc)
    assert line is not None and line.startswith("mi300x is an AMD GPU and the fit measured no "
                                                "speculative row on one")
    assert amd_note(fold, sc, "sglang") == (
        "; AMD GPU: the extra fixed and per-pass cost on AMD is prior-driven (the fit has no "
        "AMD group; spec_amd_log_mu, spec_amd_engine_sd)")


def test_a_group_carried_from_an_amd_gpu_to_another_says_its_amd_effect_is_taken_out():
    """A group measured on an AMD GPU carries its engine's AMD effect in its fixed and
    per-pass costs; carried to a CUDA GPU they are divided by exp(effect) (here 0.6: the B300
    group read as one on a gfx950 GPU, carried to the H200), but the answer's notes said
    nothing of it (amd_note speaks only of a query on an AMD GPU). They now say so."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.structure import pass_roofline
    from test_structure_model import transferable_point_mass

    draws, at = transferable_point_mass()
    n = draws.n_draws
    lines = draws.hardware_csv.splitlines()
    (i,) = [k for k, row in enumerate(lines) if row.startswith("b300,")]
    lines[i] = lines[i].replace(",10.3,", ",gfx950,", 1)
    assert lines[i] != draws.hardware_csv.splitlines()[i]
    model = {**draws.meta["model"], "engines": ["sglang"], "group_engine": [0],
             "group_amd": [True]}
    f = draws.view(hardware_csv="\n".join(lines) + "\n", meta={**draws.meta, "model": model},
                   variables={**draws.variables, "spec_amd": np.full((n, 1), 0.6),
                              S.AMD_MU: np.full(n, 0.6), S.AMD_SD: np.full(n, 0.5)})
    parts, how = P.step_components(f, at["h200"], np.random.default_rng(0), anchor=False)
    roof = pass_roofline(f, at["h200"])[0] / pass_roofline(f, at["b300"])[0]
    np.testing.assert_allclose(parts["spec"],
                               8 * ((0.05 + 0.1 * roof) * np.exp(-0.6) + 0.002 * 32))
    assert "carried to h200x8" in how
    assert how.endswith("; carried from an AMD GPU (b300): sglang's extra fixed and per-pass "
                        "cost on AMD (spec_amd) taken out of the group's")


def test_the_amd_and_hybrid_effects_change_by_their_difference_in_diff():
    """`diff` showed `spec_amd[llama.cpp]` 0.1 -> -0.151 as "-251%" and
    `spec_fixed_recurrent[trtllm]` -6.93e-05 -> -0.0115 as "-16548%": both are log-scale
    effects centred on 0 (core.spec.on_real_line said they were positive). Every parameter of
    a model with an AMD group and a hybrid target that takes a value <= 0 under its priors is
    on the real line (the bundled data's model, which has neither: tests/test_model.py)."""
    spec, cfg = _spec()
    m = build_model(spec, cfg)
    names = [v.name for v in (*m.free_RVs, *m.deterministics)]
    assert {"spec_amd", "spec_fixed_recurrent"} <= set(names)
    draws = pm.draw([m[n] for n in names], draws=300, random_seed=3)
    seen_negative = {n for n, d in zip(names, draws, strict=True) if np.min(d) <= 0}
    real = {n for n in names if S.on_real_line(n, cfg.priors.get(n))}
    assert {"spec_amd", "spec_fixed_recurrent"} <= seen_negative
    assert seen_negative <= real, seen_negative - real

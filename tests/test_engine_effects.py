"""Speculative cost that transfers (issue 20): drafter cards and the drafter-pass roofline,
each group's mean (the population, its engine's effect, its physical offset) in the model and
at predict time, by hand on point masses."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from ddtree_bayes.core.drafters import (
    PassRoofline,
    drafter_for,
    load_drafter_cards,
    pass_roofline_ms,
)
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.paths import bundled

HW = {"hardware": "h100", "mem_bw_tb_s": "3.35", "interconnect": "NVLink4 0.9 TB/s"}


def test_the_bundled_drafter_cards_load_and_match_their_targets():
    cards = load_drafter_cards(bundled("drafters.csv"))
    from conftest import REPO

    assert bundled("drafters.csv").read_text() == (REPO / "data" / "drafters.csv").read_text()
    eagle3 = drafter_for(cards, "llama-3.1-8b-instruct", "eagle3")
    assert eagle3 is not None and eagle3.layers == 1
    assert (eagle3.params_active_b, eagle3.lm_head_params_b) == (0.4247, 0.1311)
    # a deployment card of a target finds the target's drafter; an unknown model none
    assert drafter_for(cards, "qwen3.8-27b-q4_k_m", "mtp").target_model == "qwen3.8-27b"
    assert drafter_for(cards, "kimi-k2.6", "eagle3") is None
    assert drafter_for(cards, "qwen3-8b", "ddtree").kind == "dflash_block"


def test_a_bad_drafter_row_names_file_row_and_column(tmp_path):
    text = bundled("drafters.csv").read_text().splitlines()
    header = text[0].split(",")
    row = text[1]
    bad = tmp_path / "drafters.csv"
    bad.write_text("\n".join([text[0], row.replace(",1,4096,", ",-1,4096,", 1)]) + "\n")
    with pytest.raises(DataError) as err:
        load_drafter_cards(bad)
    assert "row 2" in str(err.value) and "'layers'" in str(err.value)
    assert header.index("layers") == 4


def own_drafters(tmp_path, *rows: str):
    """A working directory whose data/drafters.csv holds ``rows`` (after the bundled header)."""
    header = bundled("drafters.csv").read_text().splitlines()[0]
    (tmp_path / "data").mkdir(exist_ok=True)
    path = tmp_path / "data" / "drafters.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


#: A made-up block drafter for Kimi K2.6 (which has no drafter card): 5 layers, 2 + 1 B read.
KIMI_DDTREE = "my-kimi-ddtree,kimi-k2.6,ddtree,dflash_block,5,,,2,2,1,yes,yes,,2,,me,,"


def test_the_working_directorys_drafter_cards_reach_the_fit(tmp_path):
    """``card add`` writes data/drafters.csv; the fit reads it over the bundled cards (it read
    the bundled ones only). The bundled Kimi K2.6 DDTree group then has this card's roofline:
    8 x B300 (8 TB/s each, NVLink-class): 3 B x 2 B / 64 TB/s / 0.63 + 6 x (0.03 + 0.05) ms."""
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.engine.fitting import FitInputs

    before = FitInputs.read(workdir=tmp_path)
    assert before.drafters == load_drafter_cards(bundled("drafters.csv"))
    own_drafters(tmp_path, KIMI_DDTREE)
    inputs = FitInputs.read(workdir=tmp_path)
    spec = S.build_spec(inputs.measurements, inputs.priors, **inputs.structure())
    (how,) = [h for h in spec.group_pass_how if h.startswith("b300x8/sglang/ddtree")]
    assert "drafter card my-kimi-ddtree" in how
    b300 = inputs.hardware.rows["b300"]
    assert float(b300["mem_bw_tb_s"]) == 8.0
    g = spec.coords["overhead_group"].index("b300x8/sglang/ddtree")
    assert spec.group_pass_roof_ms[g] == pytest.approx(0.63, rel=1e-12)
    # the bundled cards of other targets are still there
    assert drafter_for(inputs.drafters, "llama-3.1-8b-instruct", "eagle3").layers == 1


def test_an_own_card_takes_over_its_targets_methods_only(tmp_path):
    """An own DDTree card for Qwen3-8B replaces the bundled DFlash block drafter for ddtree;
    that card keeps dflash. An own card of a bundled card's name replaces it whole."""
    from ddtree_bayes.core.drafters import drafter_table

    path = own_drafters(tmp_path, "mine,qwen3-8b,ddtree,dflash_block,3,,,1,1,0.5,yes,yes,,2,,me,,")
    cards = drafter_table(path)
    assert drafter_for(cards, "qwen3-8b", "ddtree").drafter == "mine"
    assert drafter_for(cards, "qwen3-8b", "dflash").drafter == "z-lab/Qwen3-8B-DFlash-b16"
    assert len(cards) == len(load_drafter_cards(bundled("drafters.csv"))) + 1
    renamed = own_drafters(tmp_path, "z-lab/Qwen3-8B-DFlash-b16,qwen3-8b,dflash,dflash_block,"
                                     "2,,,1,1,0.5,yes,yes,,2,,me,,")
    cards = drafter_table(renamed)
    assert drafter_for(cards, "qwen3-8b", "dflash").layers == 2
    assert drafter_for(cards, "qwen3-8b", "ddtree") is None   # the replaced card served it


def test_two_cards_for_one_target_and_method_are_refused(tmp_path):
    """A measurement row with a blank drafter column names a model and a method only: two
    default cards for one pair would make the roofline the first row's by accident. One
    line, nothing fitted (a second card with default no is one rows name)."""
    from ddtree_bayes.engine.fitting import FitInputs

    path = own_drafters(tmp_path, KIMI_DDTREE,
                        KIMI_DDTREE.replace("my-kimi-ddtree,kimi-k2.6,ddtree",
                                            "other,kimi-k2.6,dflash;ddtree"))
    with pytest.raises(DataError) as err:
        FitInputs.read(workdir=tmp_path)
    msg = str(err.value)
    assert str(path) in msg and "row 3" in msg and "'default'" in msg
    assert "'kimi-k2.6' ddtree ('other'; row 2 has 'my-kimi-ddtree')" in msg


def test_pass_roofline_by_hand():
    """The EAGLE-3 head of Llama-3.1-8B on one H100: 0.4247 B parameters (its own draft head
    of 0.1311 B among them: it does not share the target's) x 2 B / 3.35 TB/s = 0.25355 ms,
    / 0.63 bandwidth efficiency, + 2 layers x 0.03 ms."""
    cards = load_model_cards(bundled("models.csv"))
    drafters = load_drafter_cards(bundled("drafters.csv"))
    head = drafter_for(drafters, "llama-3.1-8b-instruct", "eagle3")
    ms, how = pass_roofline_ms(head, cards["llama-3.1-8b-instruct"], "eagle3", HW, 1)
    assert ms == pytest.approx(0.4247 * 2 / 3.35 / 0.63 + 2 * 0.03, rel=1e-12)
    assert how.startswith("drafter card yuhuili/EAGLE3-LLaMA3.1-Instruct-8B: 0.425 B")
    # eight GPUs on an NVLink-class link: the bytes spread over 8, each layer pays an
    # all-reduce; an MTP module (inside the target) is read at the deployment's bytes per weight
    ms8, _ = pass_roofline_ms(head, cards["llama-3.1-8b-instruct"], "eagle3", HW, 8)
    assert ms8 == pytest.approx(0.4247 * 2 / (3.35 * 8) / 0.63 + 2 * (0.03 + 0.05), rel=1e-12)
    mtp = drafter_for(drafters, "qwen3.8-27b-q4_k_m", "mtp")
    q4 = cards["qwen3.8-27b-q4_k_m"]
    ms_q4, _ = pass_roofline_ms(mtp, q4, "mtp", HW, 1, PassRoofline(1.0, 0.0, 0.0, 0.0))
    assert ms_q4 == pytest.approx((mtp.params_active_b + mtp.lm_head_params_b)
                                  * q4.bytes_per_weight / 3.35, rel=1e-12)
    # no card: a generic drafter, one target layer plus an LM-head-sized read (two layers) of
    # the 32 B a token reads (Kimi's 32 B leave the input embedding out: embed_params_b 0)
    kimi = cards["kimi-k2.6"]
    ms_g, how_g = pass_roofline_ms(None, kimi, "eagle3", HW, 1, PassRoofline(1.0, 0.0, 0.0, 0.0))
    assert ms_g == pytest.approx(2 * 32.0 / 61 * 0.5 / 3.35, rel=1e-12)
    assert how_g.startswith("no drafter card: a generic eagle3 drafter of 1 target layer")
    ms_b, _ = pass_roofline_ms(None, kimi, "ddtree", HW, 1, PassRoofline(1.0, 0.0, 0.0, 0.0))
    assert ms_b == pytest.approx(6 * 32.0 / 61 * 0.5 / 3.35, rel=1e-12)   # 5 layers + head


def structured_engine_fit(n: int = 4, **overrides):
    """The point mass on B300 (Kimi K2.6's card) in the structured form with engine effects:
    one measured group, b300x8/sglang/ddtree, whose engine sglang has log effects (fixed,
    pass, tree) = (0.4, -0.2, 0.1); population means mu = (0.0, 0.7, -4.6), spreads 0."""
    from ddtree_bayes.engine.testing import point_mass_draws

    cards = load_model_cards(bundled("models.csv"))
    draws = point_mass_draws(n=n, moe_form="roofline", **{
        "moe_distinct_exponent": [0.5], "compute_tok_ratio": [0.01],
        "spec_fixed_ratio": [0.05], "spec_pass_ratio": [0.1], "spec_tree_ratio": [0.002],
        "spec_fixed_log_mu": 0.0, "spec_pass_log_mu": 0.7, "spec_tree_log_mu": -4.6,
        "spec_fixed_log_sd": 0.0, "spec_pass_log_sd": 0.0, "spec_tree_log_sd": 0.0,
        "spec_fixed_engine": [0.4], "spec_pass_engine": [-0.2], "spec_tree_engine": [0.1],
        "spec_fixed_engine_sd": 1.0, "spec_pass_engine_sd": 0.5, "spec_tree_engine_sd": 0.5,
        "structure_sd": 0.0, "noise_sd": 0.0, **overrides})
    drafters = load_drafter_cards(bundled("drafters.csv"))
    draws.meta["model"].update({
        "step_form": "structured", "knee": 3.0, "card": dataclasses.asdict(cards["kimi-k2.6"]),
        # (as the bundled priors' [methods]: a structured fit refuses a method it lacks)
        "methods": {"ddtree": {"passes": 1, "tree": True},
                    "eagle3": {"passes": "block", "tree": "auto"},
                    "mtp": {"passes": "block", "tree": "auto"}},
        "engines": ["sglang"], "group_engine": [0], "group_system": [0],
        "drafter_cards": [dict(dataclasses.asdict(d), methods=list(d.methods)) for d in drafters],
        "pass_roofline": dataclasses.asdict(PassRoofline())})
    draws.meta["coords"]["engine"] = ["sglang"]
    return draws


def test_an_unmeasured_group_takes_its_engines_effect_and_its_roofline():
    """B300 Eagle3 in SGLang, never measured: fixed = exp(0 + 0.4) ms, per pass =
    roofline x exp(0.7 - 0.2), per node exp(-4.6 + 0.1) ms; step_ar 8 ms. In vLLM, an engine
    the fit never measured: its effect drawn from the engines' spread (sd 1.0, 0.5, 0.5), sqrt(2)
    of it: the fit's one engine's own departure from the population sits in mu."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.structure import pass_roofline, unmeasured_log_ratio

    draws = structured_engine_fit()
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="eagle3",
                            block=4, budget=None, verify_tokens=None, context_tokens=0.0)
    rng = np.random.default_rng(0)
    roof, how = pass_roofline(draws, sc)
    assert how.startswith("no drafter card: a generic eagle3 drafter")   # Kimi: none bundled
    step_ar = np.full(4, 8.0)
    fixed = np.exp(unmeasured_log_ratio(draws, sc, "fixed", "sglang", step_ar, rng)) * 8.0
    per_pass = np.exp(unmeasured_log_ratio(draws, sc, "pass", "sglang", step_ar, rng)) * 8.0
    per_node = np.exp(unmeasured_log_ratio(draws, sc, "tree", "sglang", step_ar, rng)) * 8.0
    assert fixed == pytest.approx(math.exp(0.4))
    assert per_pass == pytest.approx(roof * math.exp(0.5))
    assert per_node == pytest.approx(math.exp(-4.5))
    parts, explained = P.step_components(draws, sc, np.random.default_rng(0))
    # Eagle3 block 4: a chain of 4 passes, no tree; SPEC = fixed + 4 passes
    assert parts["spec"] == pytest.approx(math.exp(0.4) + 4 * roof * math.exp(0.5))
    assert "unmeasured group b300x8/sglang/eagle3" in explained
    sc_v = dataclasses.replace(sc, engine="vllm")
    logs = unmeasured_log_ratio(draws, sc_v, "fixed", "vllm", np.full(4, 8.0),
                                np.random.default_rng(3))
    z = np.random.default_rng(3)
    expected = (0.0 + 0.0 * z.standard_normal(4) + math.sqrt(2.0) * 1.0 * z.standard_normal(4)
                - math.log(8.0))
    assert logs == pytest.approx(expected)


def test_a_drafter_not_measured_costs_its_roofline_at_the_groups_multiple(tmp_path,
                                                                        monkeypatch):
    """`predict --drafter NAME`: the measured group b300x8/sglang/ddtree priced Kimi K2.6's
    generic block drafter (5 target layers + a head: roofline r0); a card of another drafter
    (roofline r1) makes its one DDTree pass cost r1 / r0 times the measured pass (the engine's
    per-pass multiple of the roofline stays), the rest of SPEC unchanged: SPEC changes by
    step_ar x spec_pass_ratio x (r1 / r0 - 1) = 8 ms x 0.1 x (r1 / r0 - 1). An AR question, a
    drafter of another target or method, an unknown name and --drafter without --accept are
    refused."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.engine.scenario import with_drafter
    from ddtree_bayes.engine.structure import pass_roofline

    draws = structured_engine_fit()
    monkeypatch.chdir(tmp_path)
    own_drafters(tmp_path, KIMI_DDTREE)
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    assert sc.measured
    mine = with_drafter(draws, sc, "my-kimi-ddtree")
    r0, r1 = pass_roofline(draws, sc)[0], pass_roofline(draws, mine)[0]
    # the fit's stored constants (PassRoofline(): bandwidth efficiency 0.63), 8 x 8 TB/s
    assert r1 == pytest.approx(3 * 2 / 64 / 0.63 + 6 * (0.03 + 0.05), rel=1e-12)  # 0.629 ms
    assert r0 == pytest.approx(6 * 32.0 / 61 * 0.5 / 64 / 0.63 + 6 * 0.08, rel=1e-12)
    base, _ = P.step_components(draws, sc, np.random.default_rng(0), anchor=False)
    other, how = P.step_components(draws, mine, np.random.default_rng(0), anchor=False)
    assert other["spec"] - base["spec"] == pytest.approx(8.0 * 0.1 * (r1 / r0 - 1.0))
    assert other["step"] - base["step"] == pytest.approx(other["spec"] - base["spec"])
    assert "drafter my-kimi-ddtree: 0.629 ms per pass at its roofline against" in how
    assert "verify 33, drafter my-kimi-ddtree" in mine.describe()
    import argparse
    assert Flags.of(argparse.Namespace(drafter="my-kimi-ddtree")).drafter == "my-kimi-ddtree"
    for flags, fragment in [
            (Flags(accept="14", engines=("sglang",), drafter="nope"), "no drafter card 'nope'"),
            (Flags(engines=("sglang",), drafter="my-kimi-ddtree"), "measured no acceptance"),
            (Flags(accept="1", engines=("sglang",), method="ar", drafter="my-kimi-ddtree"),
             "an autoregressive step drafts nothing"),
            (Flags(accept="3", engines=("sglang",), method="eagle3", block=3,
                   drafter="my-kimi-ddtree"), "serves ddtree, not eagle3"),
            (Flags(accept="3", engines=("sglang",), method="ddtree", block=16, budget=32,
                   drafter="z-lab/Qwen3-8B-DFlash-b16"), "drafts for qwen3-8b, not kimi-k2.6")]:
        with pytest.raises(QueryError, match=fragment):
            resolve(draws, flags)


def test_an_answer_reads_the_working_directorys_drafter_cards_once(tmp_path, monkeypatch):
    """predict asked drafter_table for data/drafters.csv three times per answer (card changes,
    drafter changes, the cards a measurement could be made with) and a fourth with --drafter;
    now once per fit object and file content, and a card written while a Python session holds
    the fit still counts."""
    from ddtree_bayes.core import drafters as D
    from ddtree_bayes.engine import scenario as S
    from ddtree_bayes.engine.question import Flags, resolve

    draws = structured_engine_fit()
    monkeypatch.chdir(tmp_path)
    own_drafters(tmp_path, KIMI_DDTREE)
    calls = []
    real = D.drafter_table
    monkeypatch.setattr(D, "drafter_table", lambda *a, **k: calls.append(a) or real(*a, **k))
    flags = Flags(accept="3", engines=("sglang",), method="ddtree", block=16, budget=32,
                  drafter="my-kimi-ddtree")
    resolve(draws, flags)
    S.card_changes(draws)
    S.drafter_card_changes(draws, None)
    assert len(S.drafter_cards(draws)) > 0
    assert len(calls) == 1
    # a second card written now is read (one more parse), and serves the question
    other = KIMI_DDTREE.replace("my-kimi-ddtree", "my-other-ddtree")
    own_drafters(tmp_path, KIMI_DDTREE.replace(",kimi-k2.6,", ",qwen3-8b,", 1), other)
    resolve(draws, dataclasses.replace(flags, drafter="my-other-ddtree"))
    assert len(calls) == 2


def test_one_owner_names_the_overhead_group_of_a_row_and_of_a_query():
    """Which (system, base engine, method) group prices a step was decided in seven places
    (the fit's spec, predict, the measured-values lookup, update's reweighting, decisions,
    the report); now engine/structure.group_label for all but the fit's own, and it agrees
    with the fit: every speculative row of the bundled data lands in the group the spec
    built for it, a relation's engine in its base's, AR in none."""
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.spec import build_spec
    from ddtree_bayes.engine.fitting import FitInputs
    from ddtree_bayes.engine.structure import group_label, row_group

    draws = structured_engine_fit()
    inputs = FitInputs.read(bundled("measurements.csv"), bundled("priors.toml"))
    spec = build_spec(inputs.measurements, load_priors(bundled("priors.toml")),
                      **inputs.structure())
    rows = draws.measurements.rows
    assert [row_group(draws, r) for r in rows] == [
        None, "b300x8/sglang/ddtree", None, None, None, None, None,
        "rtx-pro-6000x8/vllm/eagle3", "rtx-pro-6000x8/vllm/eagle3"]
    assert {row_group(draws, r) for r in rows} - {None} == set(spec.groups)
    assert group_label(draws, "b300x8", "native", "ddtree") == "b300x8/sglang/ddtree"
    assert group_label(draws, "b300x8", "vllm", "ddtree") == "b300x8/vllm/ddtree"
    assert group_label(draws, "b300x8", "native", "ar") is None


def test_an_unknown_drafter_is_sent_to_a_card_add_that_can_make_it(tmp_path, monkeypatch):
    """`predict --drafter NAME` of an unknown name said "add its card (`ddtree-bayes card add
    --hf-config CONFIG --target kimi-k2.6`)" for every method, but card add makes drafter
    cards of EAGLE-3 heads only with --target (MTP cards come from the target's own config)
    and refuses --target on any other config: a DDTree block drafter was sent in a circle."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.question import Flags, resolve

    draws = structured_engine_fit()
    monkeypatch.chdir(tmp_path)
    own_drafters(tmp_path, KIMI_DDTREE)

    def fix(**flags) -> str:
        with pytest.raises(QueryError) as info:
            resolve(draws, Flags(accept="3", engines=("sglang",), drafter="nope", **flags))
        return str(info.value).split("(fix: ", 1)[1]

    assert "card add --hf-config HEAD/config.json --target kimi-k2.6" in fix(
        method="eagle3", block=3)
    assert ("card add --hf-config kimi-k2.6's own config.json --name kimi-k2.6 "
            "--drafters-only") in fix(method="mtp", block=1)   # no --replace of the card
    ddtree = fix(method="ddtree", block=16, budget=32)
    assert "ddtree-bayes card add" not in ddtree and "data/drafters.csv" in ddtree


def test_an_unknown_drafter_names_the_card_it_is_one_typo_from(tmp_path, monkeypatch):
    """A docs review (h7, 2026-12-05): `predict --drafter` of a name one letter or one case
    off a known card said "no drafter card" and sent the user to write one. The closest known
    card is named first; a name close to none still gets the card-add fix alone."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.question import Flags, resolve

    draws = structured_engine_fit()
    monkeypatch.chdir(tmp_path)

    def fix(name: str) -> str:
        with pytest.raises(QueryError) as info:
            resolve(draws, Flags(accept="2", engines=("sglang",), method="eagle3", block=3,
                                 drafter=name))
        return str(info.value).split("(fix: ", 1)[1]

    assert fix("yuhuili/EAGLE3-LLaMA3.1-Instruct-8b").startswith(
        "did you mean 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B'? ")
    assert not fix("nope").startswith("did you mean")


def test_a_measured_group_extrapolates_around_its_own_mean():
    """A group measured at one tree budget: the nodes beyond it cost the group's own per-node
    ratio drawn around its mean (spec_tree_mean), not the population's."""
    from ddtree_bayes.engine.structure import tied_ratio_spread

    draws = structured_engine_fit()
    draws.meta["model"]["group_varies"] = {"pass": [False], "tree": [False]}
    mean = math.log(0.004)
    draws.variables["spec_tree_mean"] = np.full((4, 1), mean)
    draws.variables["spec_tree_log_sd"] = np.full(4, 0.5)
    rng = np.random.default_rng(1)
    extra = tied_ratio_spread(draws, "b300x8/sglang/ddtree", {"pass": 1.0, "tree": 32.0},
                              8.0, rng)
    z = np.random.default_rng(1).standard_normal(4)
    # measured at budget 8: 24 more nodes at exp(mean + 0.5 z) instead of exp(mean), z below
    # where the 8 measured nodes would take all of the fixed ratio 0.05 (0.004 + 0.05 / 8)
    from scipy.special import ndtr, ndtri

    z = ndtri(ndtr(z) * ndtr(math.log(0.01025 / 0.004) / 0.5))
    assert extra == pytest.approx((np.exp(mean + 0.5 * z) - 0.004) * 24 * 8.0)


def test_a_measured_groups_own_cost_leaves_its_fixed_cost_at_or_above_zero():
    """A group measured at one tree budget: its measured overhead is its fixed cost plus its
    nodes' cost. An own per-node ratio drawn so high that the measured nodes would cost more
    than that overhead leaves a negative fixed cost, which no speculative step has; such draws
    are now drawn from the normal truncated where the fixed cost is 0. By hand: fixed ratio
    0.01, mean per-node ratio 0.004, sd 0.5, 8 nodes measured: the own ratio is at most
    0.004 + 0.01 / 8 = 0.00525, z at most ln(1.3125) / 0.5 = 0.5439. The second draw of
    default_rng(1), z = 0.8216, had the own ratio 0.004 e^0.4108 = 0.00603: the measured
    configuration's fixed cost 0.01 - 8 x 0.00203 = -0.0062."""
    from scipy.special import ndtr

    from ddtree_bayes.engine.structure import tied_ratio_spread

    draws = _tied_group_fit()
    z = np.random.default_rng(1).standard_normal(4)
    assert z[1] == pytest.approx(0.8216, abs=1e-4)
    assert 0.01 - (0.004 * math.exp(0.5 * z[1]) - 0.004) * 8 == pytest.approx(-0.0062, abs=1e-4)
    extra = tied_ratio_spread(draws, "b300x8/sglang/ddtree", {"pass": 1.0, "tree": 32.0},
                              8.0, np.random.default_rng(1))
    own = 0.004 + extra / (24 * 8.0)   # the per-node ratio each draw priced
    fixed = 0.01 - (own - 0.004) * 8   # what that leaves the measured budget 8 of fixed cost
    assert np.all(fixed >= -1e-12) and np.all(own <= 0.00525 + 1e-12)
    # each draw keeps its quantile, scaled by P(z <= 0.5439) = 0.7068
    assert ndtr(math.log(own[1] / 0.004) / 0.5) == pytest.approx(ndtr(z[1]) * 0.7068, abs=1e-4)
    # asked below the measured budget the saving is bounded alike
    less = tied_ratio_spread(draws, "b300x8/sglang/ddtree", {"pass": 1.0, "tree": 4.0},
                             8.0, np.random.default_rng(1))
    assert less == pytest.approx(extra * -4 / 24)


def test_a_groups_truncation_point_is_computed_once_per_fit(monkeypatch):
    """The truncation point of a tied group's own cost (:func:`fixed_cost_kept`: Phi(z_max),
    4000 calls of math.erfc for a fit's draws) depends on the fit and the group alone, yet
    every step of the group computed it again: ``predict --concurrency 1,4,8,16`` on a fit of
    the bundled data 16 times, ``next`` 99 times, each the same 4000 numbers. It is kept on
    the fit (content-keyed: a different truncation point is computed anew). By hand, as above:
    fixed ratio 0.01, mean per-node ratio 0.004, sd 0.5, 8 nodes measured: z at most
    ln(1.3125) / 0.5 = 0.5439, Phi of it 0.7068; three asks at budget 32, with three
    generators, compute it once and each own ratio keeps its quantile x 0.7068."""
    from scipy.special import ndtr

    from ddtree_bayes.engine import structure

    draws = _tied_group_fit()
    asked: list[np.ndarray] = []
    real_cdf = structure.normal.cdf

    def cdf(x):
        asked.append(np.array(x, dtype=float))
        return real_cdf(x)

    monkeypatch.setattr(structure.normal, "cdf", cdf)
    for seed in (1, 2, 3):
        extra = structure.tied_ratio_spread(draws, "b300x8/sglang/ddtree",
                                            {"pass": 1.0, "tree": 32.0}, 8.0,
                                            np.random.default_rng(seed))
        own = 0.004 + extra / (24 * 8.0)
        z = np.random.default_rng(seed).standard_normal(4)
        assert ndtr(np.log(own / 0.004) / 0.5) == pytest.approx(ndtr(z) * 0.7068, abs=1e-4)
    z_max = [x for x in asked if np.allclose(x, math.log(1.3125) / 0.5)]
    assert len(z_max) == 1 and len(asked) == 4, [x.round(4).tolist() for x in asked]
    # another truncation point (fixed ratio 0.02: at most 0.0065, z_max ln(1.625) / 0.5) is
    # its own
    draws.variables["spec_fixed_ratio"] = np.full((4, 1), 0.02)
    extra = structure.tied_ratio_spread(draws, "b300x8/sglang/ddtree",
                                        {"pass": 1.0, "tree": 32.0}, 8.0,
                                        np.random.default_rng(1))
    own = 0.004 + extra / (24 * 8.0)
    z = np.random.default_rng(1).standard_normal(4)
    assert ndtr(np.log(own / 0.004) / 0.5) == pytest.approx(
        ndtr(z) * ndtr(math.log(1.625) / 0.5), abs=1e-9)
    assert len(asked) == 6


def test_a_memo_shared_between_fits_keeps_each_fits_own_truncation_point():
    """The truncation point's memo is keyed by the content of z_max, not by the group's label,
    so fits that share one memo (a transferred system's copy of the fit: Fit.view with the
    fit's memo, common.with_transferred_system) never read another's: a view of the group at
    fixed ratio 0.02 (z_max ln(1.625) / 0.5) asked first, through the shared memo, leaves the
    fit's own at 0.01 (ln(1.3125) / 0.5), and each answer equals the memo-less one to the bit."""
    from scipy.special import ndtr

    from ddtree_bayes.engine import structure

    draws = structured_engine_fit()
    draws.meta["model"]["group_varies"] = {"pass": [False], "tree": [False]}
    draws.variables["spec_tree_mean"] = np.full((4, 1), math.log(0.004))
    draws.variables["spec_tree_log_sd"] = np.full(4, 0.5)
    draws.variables["spec_fixed_ratio"] = np.full((4, 1), 0.01)
    other = draws.view(variables={**draws.variables,
                                  "spec_fixed_ratio": np.full((4, 1), 0.02)}, memo=draws.memo)
    assert other.memo is draws.memo

    def ask(fit):
        return structure.tied_ratio_spread(fit, "b300x8/sglang/ddtree",
                                           {"pass": 1.0, "tree": 32.0}, 8.0,
                                           np.random.default_rng(1))

    def cold(fit):   # (no memo: Phi(z_max) computed on the spot)
        real = structure.fixed_cost_kept
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(structure, "fixed_cost_kept",
                       lambda z, mu, sd, headroom, memo=None: real(z, mu, sd, headroom))
            return ask(fit.view())

    z = np.random.default_rng(1).standard_normal(4)
    for fit, room in ((other, 1.625), (draws, 1.3125), (other, 1.625)):
        extra = ask(fit)
        np.testing.assert_array_equal(extra, cold(fit))
        own = 0.004 + extra / (24 * 8.0)
        assert ndtr(np.log(own / 0.004) / 0.5) == pytest.approx(
            ndtr(z) * ndtr(math.log(room) / 0.5), abs=1e-9)
    assert len(draws.memo["truncation_cdf"]) == 2


def test_a_groups_fixed_cost_is_kept_where_its_rows_drafter_paid_more_per_pass(monkeypatch):
    """A group measured at one depth whose rows name a drafter card dearer per pass than the
    group's own (the public corpus's Kimi K2.6 Eagle3 on 8x RTX PRO 6000: rows 76-80 name
    lightseekorg/kimi-k2.5-eagle3-mla, 2.92x the group's roofline) paid its passes there at
    that multiple, so the own per-pass ratio must leave that configuration's fixed cost >= 0
    too: the bound divided the fixed cost by the passes alone, and 12% of that fit's draws
    still left those rows a negative fixed cost. By hand: fixed ratio 0.3, mean per-pass ratio
    0.1, sd 0.5, 1 pass measured at 1x and at 2x the group's roofline: the own ratio is at most
    0.1 + 0.3 / (1 x 2) = 0.25 (not 0.1 + 0.3 = 0.4), z at most ln 2.5 / 0.5 = 1.8326. The
    nodes then keep what the dearer configuration leaves: 0.3 - 2 (own - 0.1) where the own
    ratio is above its mean, 0.3 - (own - 0.1) (the 1x rows) where below."""
    from scipy.special import ndtr, ndtri

    from ddtree_bayes.engine import structure

    n = 2000
    draws = structured_engine_fit(n=n)
    label = "b300x8/sglang/ddtree"
    draws.meta["model"]["group_varies"] = {"pass": [False], "tree": [False]}
    draws.variables["spec_pass_mean"] = np.full((n, 1), math.log(0.1))
    draws.variables["spec_pass_log_sd"] = np.full(n, 0.5)
    draws.variables["spec_tree_mean"] = np.full((n, 1), math.log(0.004))
    draws.variables["spec_tree_log_sd"] = np.full(n, 0.5)
    draws.variables["spec_fixed_ratio"] = np.full((n, 1), 0.3)
    assert structure.group_measured_values(draws, label) == {"pass": {1.0}, "tree": {8.0}}
    assert structure.measured_pass_scales(draws, label) == (1.0, 1.0)   # (no drafter named)
    monkeypatch.setattr(structure, "measured_pass_scales", lambda d, g: (1.0, 2.0))
    rng = np.random.default_rng(0)
    z_pass, z_tree = rng.standard_normal(n), rng.standard_normal(n)
    # the bound of the passes alone (own <= 0.4) left draws above 0.25: the test can fail
    assert np.sum(ndtri(ndtr(z_pass) * ndtr(math.log(4.0) / 0.5)) > math.log(2.5) / 0.5) > 20
    extra = structure.tied_ratio_spread(draws, label, {"pass": 2.0, "tree": 8.0}, 8.0,
                                        np.random.default_rng(0))
    own = 0.1 + extra / 8.0   # the per-pass ratio of each draw (1 pass more, 8 ms a unit)
    assert own.max() <= 0.25 + 1e-12 and np.all(0.3 - 2 * (own - 0.1) >= -1e-12)
    expected = 0.1 * np.exp(0.5 * ndtri(ndtr(z_pass) * ndtr(math.log(2.5) / 0.5)))
    assert own == pytest.approx(expected)
    # 8 nodes more: their headroom per node is what the passes leave the dearer rows, / 8
    both = structure.tied_ratio_spread(draws, label, {"pass": 2.0, "tree": 16.0}, 8.0,
                                       np.random.default_rng(0))
    d = expected - 0.1
    room = np.where(d > 0, 0.3 - 2 * d, 0.3 - d)
    z_max = np.log(1.0 + room / 8 / 0.004) / 0.5
    node = 0.004 * np.exp(0.5 * ndtri(ndtr(z_tree) * ndtr(z_max)))
    assert both == pytest.approx((d * 1 + (node - 0.004) * 8) * 8.0)


def test_the_reports_prior_draws_cover_the_engine_effects():
    """The report draws the prior of every structured-form variable from the fit's own
    metadata (engines, each group's engine and system) and labels each column."""
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import parse_priors
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.workflows.report.priors import prior_draws, scalar_columns

    cfg = parse_priors(bundled("priors.toml").read_text())
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements(bundled("measurements.csv"), hw)
    spec = S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv")))
    meta = S.model_meta(spec, cfg)
    assert set(meta["group_system"]) == set(range(len(spec.systems)))
    assert len(meta["group_system"]) == len(meta["group_engine"]) == len(spec.group_engine)
    coords = {k: list(v) for k, v in spec.parameter_coords.items()}
    draws = prior_draws(cfg, coords, 4, 0, None, meta.get("group_varies"),
                        meta.get("acceptance_groups"), spec.repeated, meta)
    engines = len(meta["engines"])
    for part in ("fixed", "pass", "tree"):
        assert draws[f"spec_{part}_engine_z"].shape == (4, engines)
        # a zero-sum effect: the engines' effects sum to zero in every draw
        assert np.allclose(draws[f"spec_{part}_engine_z"].sum(axis=1), 0.0)
    cols = scalar_columns(draws, coords)
    assert f"spec_fixed_engine_z[{meta['engines'][0]}]" in cols


def test_shares_lm_head_column(tmp_path):
    """``shares_lm_head`` no: the drafter's own head is among its parameters (read once);
    yes: the target's head is read on top; blank: what the drafter's kind does; anything else
    is refused by row."""
    head = ("drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
            "bytes_per_weight,source,shares_lm_head\n")
    cards = load_drafter_cards("d.csv", head + "a,m,eagle3,eagle3_head,1,0.4,0.1,2,s,no\n"
                               "b,m,mtp,mtp_module,1,0.4,0.1,2,s,yes\n"
                               "c,m,dflash,dflash_block,1,0.4,0.1,2,s,\n"
                               "d,m,eagle,eagle3_head,1,0.4,0.1,2,s,\n"
                               "e,m,draft-model,draft_model,1,0.4,0.1,2,s,\n"
                               "f,m,medusa,draft_model,1,0.4,0.1,2,s,YES\n")
    # a blank reads as the kind does: an EAGLE-3 head or a draft model has its own head
    assert [c.pass_params_b for c in cards] == [0.4, pytest.approx(0.5), pytest.approx(0.5),
                                                0.4, 0.4, pytest.approx(0.5)]
    # a file without the column at all: the same kind defaults
    bare = head.replace(",shares_lm_head", "")
    cards = load_drafter_cards("d.csv", bare + "a,m,eagle3,eagle3_head,1,0.4,0.1,2,s\n"
                               "b,m,mtp,mtp_module,1,0.4,0.1,2,s\n")
    assert [c.shares_lm_head for c in cards] == [False, True]
    with pytest.raises(DataError) as err:
        load_drafter_cards("d.csv", head + "a,m,eagle3,eagle3_head,1,0.4,0.1,2,s,maybe\n")
    assert "d.csv" in str(err.value) and "row 2" in str(err.value)
    assert "'shares_lm_head'" in str(err.value)
    # a misspelt kind would pick the other default (and the other weight width): refused
    with pytest.raises(DataError) as err:
        load_drafter_cards("d.csv", head + "b,m,mtp,mtp_module,1,0.4,0.1,2,s,yes\n"
                                           "a,m,eagle3,eagle3,1,0.4,0.1,2,s,\n")
    assert (err.value.row, err.value.column) == (3, "kind")
    assert "eagle3_head" in str(err.value)
    # a pass that reads nothing (0 layers, parameters or bytes per weight) is refused
    for col, line in (("layers", "a,m,mtp,mtp_module,0,0.4,0.1,2,s,yes\n"),
                      ("params_active_b", "a,m,mtp,mtp_module,1,0,0.1,2,s,yes\n"),
                      ("bytes_per_weight", "a,m,mtp,mtp_module,1,0.4,0.1,0,s,yes\n")):
        with pytest.raises(DataError) as err:
            load_drafter_cards("d.csv", head + line)
        assert (err.value.row, err.value.column) == (2, col)


#: A made-up EAGLE-3 head for Kimi K2.6 (which has no drafter card): 1 layer, 0.5 B read.
KIMI_EAGLE3 = "my-kimi-eagle3,kimi-k2.6,eagle3,eagle3_head,1,,,0.5,0.5,0.1,no,yes,,2,,me,,"
# (the built-in Kimi K2.5 head serves kimi-k2.6's eagle3, default no: only by name)
NO_EAGLE3 = ("no default drafter card serves kimi-k2.6's eagle3 and the fit measured none: only "
             "cards that rows name serve it (lightseekorg/kimi-k2.5-eagle3-mla), and a question "
             "without --drafter prices a generic eagle3 drafter: ask --drafter "
             "lightseekorg/kimi-k2.5-eagle3-mla")
GENERIC_EAGLE3 = ("drafter passes priced by a generic eagle3 drafter of 1 target layer and an "
                  "LM-head-sized read (no drafter card)")


def _b300_only(draws):
    """The structured fit whose data are the B300 rows only: Kimi K2.6's EAGLE-3 is then
    measured nowhere (the bundled rows measure it on RTX PRO 6000s)."""
    return draws.view(data_csv="".join(line for line in draws.data_csv.splitlines(True)
                                       if ",rtx-pro-6000," not in line))


def test_predict_names_the_drafter_that_priced_each_row_and_warns_of_none(tmp_path):
    """A new-user walkthrough (Mixtral-8x7B on 2x MI210, AR rows only): `predict --method
    ddtree` answered 164 tok/s, P(> AR) 1.00, exit 0, while `next --query` with the same flags
    said "no drafter card serves mixtral-8x7b-instruct's ddtree ... there is no drafter to
    run it with"; and which drafter priced the passes (a generic one, or a drafter card) was
    said nowhere: after `card add` of an EAGLE-3 head and a refit, the eagle3 answer moved
    89 -> 94 tok/s with identical notes and JSON. Every speculative row now names the card
    (``pass_drafter``, null for a generic drafter; a note under the table), and a model and
    method with no drafter card and no measurement is warned of in next's words."""
    from ddtree_bayes.engine import predictive as P

    draws = _b300_only(structured_engine_fit())
    eagle3 = {"hardware": "b300", "gpus": 8, "engines": ["sglang"], "method": "eagle3",
              "block": 4, "accept": "3"}
    said: list[str] = []
    (row,) = P.predict(draws, **eagle3, warnings=said)
    assert row["pass_drafter"] is None and row["pass_drafter_note"] == GENERIC_EAGLE3
    assert said == [NO_EAGLE3]
    # the measured DDTree group: Kimi's generic block drafter (5 layers), nothing to warn of
    # but budget 32's tree past the measured budget 8 (M = 33 against 9)
    from test_cli_support import BEYOND_M33

    said = []
    spread = draws.view(variables={**draws.variables, "structure_sd": np.full(4, 0.04)})
    (row,) = P.predict(spread, hardware="b300", gpus=8, engines=["sglang"], method="ddtree",
                       block=16, budget=32, accept="12", warnings=said)
    assert row["pass_drafter"] is None and said == [BEYOND_M33]
    assert row["pass_drafter_note"] == ("drafter passes priced by a generic ddtree drafter of 5 "
                                        "target layers and an LM-head-sized read (no drafter "
                                        "card)")
    (ar,) = P.predict(spread, hardware="b300", gpus=8, engines=["sglang"], method="ar",
                      accept="1")
    assert "pass_drafter" not in ar and "pass_drafter_note" not in ar
    # a fit storing a card for it: the row names it, and nothing is warned of
    card = load_drafter_cards("d.csv", bundled("drafters.csv").read_text().splitlines()[0]
                              + "\n" + KIMI_EAGLE3 + "\n")[0]
    meta = {**draws.meta, "model": {**draws.meta["model"], "drafter_cards": [
        *draws.meta["model"]["drafter_cards"],
        dict(dataclasses.asdict(card), methods=list(card.methods))]}}
    said = []
    (row,) = P.predict(draws.view(meta=meta), **eagle3, warnings=said)
    assert row["pass_drafter"] == "my-kimi-eagle3" and said == []
    assert row["pass_drafter_note"] == ("drafter passes priced by drafter card my-kimi-eagle3 "
                                        "(0.5 B parameters read per pass)")
    # the Python API: the same warning as a UserWarning, the card in the frame
    from ddtree_bayes import api

    with pytest.warns(UserWarning) as warned:
        table = api.predict(draws, **eagle3)
    assert [str(w.message) for w in warned] == [NO_EAGLE3]
    assert table["pass_drafter"].isna().all()


def test_predict_prints_the_drafter_and_the_missing_one(tmp_path):
    """The CLI side of the walkthrough above: the note under the table, the JSON's
    ``pass_drafter`` and ``warnings``, and the warning on stderr in next's words; a drafter
    card written here since the fit serves the method, so nothing is warned of then."""
    from test_cli_support import make_point_mass_workdir, run_cli, write_point_mass_fit
    from test_json_schemas import validate_output

    work = make_point_mass_workdir(tmp_path / "w")
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                         work / "models" / "priors.toml", work / "data" / "hardware.csv",
                         draws=_b300_only(structured_engine_fit()))
    argv = ("predict", "--hardware", "b300", "--gpus", "8", "--engine", "sglang", "--method",
            "eagle3", "--block", "4", "--accept", "3")
    code, out, err = run_cli(work, *argv)
    assert code == 0, err
    assert f"ddtree-bayes: warning: {NO_EAGLE3}\n" in err
    assert f"\n  {GENERIC_EAGLE3}\n" in out
    code, out, err = run_cli(work, *argv, "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("predict", payload)
    assert [r["pass_drafter"] for r in payload["rows"]] == [None]
    assert NO_EAGLE3 in payload["warnings"]
    own_drafters(work, KIMI_EAGLE3)   # (`card add` of a head since the fit)
    code, out, err = run_cli(work, *argv)
    assert code == 0, err
    assert "no drafter card serves" not in err
    assert f"\n  {GENERIC_EAGLE3}\n" in out   # (the fit prices the cards it stored)


def test_a_fit_of_plain_rows_only_prices_an_unmeasured_group_in_physical_units():
    """A fit whose rows are all autoregressive has no overhead group, but a speculative
    question still draws one: its meta must carry the structured step's inputs (the fit's
    engines, none; the drafter roofline's constants and cards; the card), or the group was
    drawn as a fit of an earlier version does, the population's log ms read as a log multiple
    of the AR step: Llama-3.1-8B AR at 146 tok/s on one H100 (a 6.85 ms step), asked EAGLE-3
    block 3 at acceptance 2.8, answered 44 tok/s (14-115) with exit 0.

    Here the fixed cost is exp(mu_fixed) ms, not exp(mu_fixed) x the AR step (mu 0.0, all
    spreads 0): 1 ms, where the old path gave 8 ms."""
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.structure import unmeasured_log_ratio

    hw = load_hardware(bundled("hardware.csv"))
    text = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
            "context_tokens,tok_s,source,notes\n"
            "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,133,test,\n")
    priors = load_priors(bundled("priors.toml"))
    cards = load_model_cards(bundled("models.csv"))
    data = load_measurements("m.csv", hw, text=text, methods=priors.methods)
    spec = S.build_spec(data, priors, hardware=hw, cards=cards)
    assert not spec.groups
    meta = S.model_meta(spec, priors)
    assert meta["engines"] == [] and meta["group_engine"] == []
    assert {"pass_roofline", "drafter_cards", "card"} <= set(meta)

    draws = structured_engine_fit()
    draws.meta["model"].update({k: meta[k] for k in ("engines", "group_engine", "group_system",
                                                      "group_pass_roof_ms", "group_pass_how")})
    draws.meta["coords"]["overhead_group"], draws.meta["coords"]["engine"] = [], []
    for k in ("spec_fixed_ratio", "spec_pass_ratio", "spec_tree_ratio", "spec_fixed_engine",
              "spec_pass_engine", "spec_tree_engine"):
        del draws.variables[k]
    for k in ("spec_fixed_engine_sd", "spec_pass_engine_sd", "spec_tree_engine_sd"):
        draws.variables[k] = np.zeros(draws.n_draws)
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="eagle3",
                            block=3, budget=None, verify_tokens=None, context_tokens=0.0)
    fixed = np.exp(unmeasured_log_ratio(draws, sc, "fixed", "sglang", np.full(4, 8.0),
                                        np.random.default_rng(0))) * 8.0
    assert fixed == pytest.approx(1.0)


def test_a_new_engine_lies_sqrt_one_plus_one_over_k_spreads_from_a_zero_sum_mean():
    """The fit's K engine effects sum to zero, so mu = population mean + mean of the K engines'
    own effects; a new engine, another draw e_new ~ N(0, sd^2), lies e_new - mean(e_1..e_K)
    from mu: variance sd^2 (1 + 1/K) (K = 1: 2 sd^2; K = 4: 1.25 sd^2; no engine: mu is the
    population's, sd^2). Checked by hand and against 400,000 simulated populations."""
    from ddtree_bayes.engine.structure import new_engine_spread

    assert new_engine_spread(0) == 1.0
    assert new_engine_spread(1) == pytest.approx(math.sqrt(2.0), rel=1e-15)
    assert new_engine_spread(4) == pytest.approx(math.sqrt(1.25), rel=1e-15)
    rng = np.random.default_rng(7)
    for k in (1, 2, 4):
        e = rng.standard_normal((400_000, k + 1))          # K fitted engines and a new one
        gap = e[:, k] - e[:, :k].mean(axis=1)               # the new one against mu's engines
        assert gap.std() == pytest.approx(new_engine_spread(k), rel=0.005)


def test_the_zero_sum_effects_sigma_is_the_unconstrained_normals():
    """new_engine_spread's sqrt(1 + 1/K) rests on PyMC's ZeroSumNormal(sigma) being K iid
    Normal(0, sigma) draws less their mean (engine/model.py draws the effects so): each
    element's variance sigma^2 (1 - 1/K), not sigma^2. Were sigma the elements' own spread,
    the new engine's gap from mu would be sqrt(1 + 1/(K - 1)) spreads, and the factor wrong.
    By hand at K = 4: 0.75."""
    import pymc as pm

    x = pm.draw(pm.ZeroSumNormal.dist(sigma=1.0, shape=4), draws=100_000, random_seed=1)
    assert np.abs(x.sum(axis=1)).max() < 1e-12
    assert x.var(axis=0) == pytest.approx(np.full(4, 0.75), rel=0.02)


def _tied_group_fit():
    """The structured fit with its group tied (measured at one size): fixed ratio 0.01, mean
    per-node ratio 0.004 (log sd 0.5)."""
    draws = structured_engine_fit()
    draws.meta["model"]["group_varies"] = {"pass": [False], "tree": [False]}
    draws.variables["spec_tree_mean"] = np.full((4, 1), math.log(0.004))
    draws.variables["spec_tree_log_sd"] = np.full(4, 0.5)
    draws.variables["spec_fixed_ratio"] = np.full((4, 1), 0.01)
    return draws

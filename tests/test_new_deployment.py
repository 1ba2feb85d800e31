"""``--new-deployment``: a question asked as another deployment of the (system, engine, method)
group the fit measured. Four held-out collections (docs/validation.md, the sixth to ninth) had a
user's deployment under a measured card and GPU name answered from that group's measured
overhead, anchored to its rows, in intervals 12-21% wide, missing by 18-84%. With the flag the
group is carried as to another system (engine/structure.py ``carried_spec_ms``) with itself as
the reference: on its own GPUs the carried costs are the measured ones, and the answer
scatters by the [transfer] system scatter and, for a hybrid target, the groups' spread
(``deployment_spread``), not anchored to the group's rows. On the B300 point mass, by hand."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pytest

from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.question import Flags, resolve
from test_cli_support import make_point_mass_workdir, run_cli
from test_json_schemas import validate_output
from test_structure_model import structured_point_mass

#: The measured group of the point mass, and its SPEC at DDTree 16/32 by hand: the B300 AR
#: step 8 ms x (0.05 fixed + 0.1 x one pass + 0.002 x 32 nodes).
GROUP = "b300x8/sglang/ddtree"
SPEC = 8 * (0.05 + 0.1 * 1 + 0.002 * 32)


def carried_point_mass(n: int = 8, system_sd: float = 0.0, spread: float | None = None):
    """:func:`structured_point_mass` with the [transfer] system scatter ``system_sd`` (the
    fit's ``transfer_system_sd`` draws) and, with ``spread``, a hybrid card in an engine whose
    hybrid effect is credibly large, so :func:`deployment_spread` is ``spread``."""
    draws = structured_point_mass(n=n)
    draws.variables.update(transfer_system_sd=np.full(n, system_sd),
                           moe_distinct_exponent_mu=np.full(n, 0.5),
                           compute_eff_log_mu=np.full(n, -1.2),
                           compute_eff_log_sd=np.zeros(n))
    if spread is None:
        return draws
    model = {**draws.meta["model"], "engines": ["sglang"], "group_engine": [0],
             "group_recurrent": [False],
             "card": {**draws.meta["model"]["card"], "recurrent_layers": 30}}
    variables = {**draws.variables, "spec_fixed_log_sd": np.full(n, spread),
                 "spec_fixed_recurrent": np.full((n, 1), 1.4)}
    return dataclasses.replace(draws, meta={**draws.meta, "model": model}, variables=variables,
                               memo={})


def ask(draws, hardware="b300", method="ddtree", new_deployment=True):
    sc = P.resolve_scenario(draws, hardware=hardware, gpus=8, engine="sglang", method=method,
                            block=16 if method != "ar" else None,
                            budget=32 if method != "ar" else None,
                            verify_tokens=None, context_tokens=0.0)
    return dataclasses.replace(sc, new_deployment=new_deployment)


def test_with_no_scatter_the_flag_carries_the_measured_costs_unanchored():
    """With the system scatter 0 (a transformer target: no groups' spread) the carried group's
    SPEC is its measured one, draw by draw (8 x (0.05 + 0.1 + 0.002 x 32) ms), and the step
    is the structural step the unflagged answer is anchored from: not anchored to the group's
    budget-8 row, whose discrepancy the unflagged answer carries (exp(-r))."""
    draws = carried_point_mass()
    flagged, how = P.step_components(draws, ask(draws), np.random.default_rng(0))
    plain = ask(draws, new_deployment=False)
    structural, _ = P.step_components(draws, plain, np.random.default_rng(0), anchor=False)
    anchored, plain_how = P.step_components(draws, plain, np.random.default_rng(0))
    np.testing.assert_allclose(flagged["spec"], SPEC, rtol=1e-12)
    np.testing.assert_array_equal(flagged["spec"], structural["spec"])
    np.testing.assert_array_equal(flagged["step"], structural["step"])
    assert not np.allclose(anchored["step"], structural["step"])   # (the anchor moved it)
    assert "anchored to the measured" not in how and "anchored to the measured" in plain_how
    assert how.startswith(f"overhead of group {GROUP} carried to another deployment of it "
                          "(--new-deployment")
    assert "a prior-driven scatter between deployments: the [transfer] system scatter)" in how
    # its own discrepancy: the likelihood's for a new configuration 0.04 x log(33 / 9) from
    # the measured budget 8, as the structural step's (no anchor's own error)
    np.testing.assert_allclose(flagged["log_sd"], 0.04 * math.log(33 / 9))
    assert not P.is_anchored(draws, ask(draws)) and P.is_anchored(draws, plain)


def test_the_flagged_median_is_the_unflagged_one_where_the_anchor_shifts_nothing():
    """Through predict: where the anchor's discrepancy is 0 (structure_sd 0: the structural
    step is the measured one's model) and the scatter is 0, the flagged median equals the
    unflagged one exactly, 14 x 1000 / step, no Monte Carlo slack."""
    draws = carried_point_mass()
    draws.variables.update(structure_sd=np.zeros(draws.n_draws),
                           noise_sd=np.full(draws.n_draws, 1e-12))
    kw = dict(hardware="b300", gpus=8, engines=["sglang"], method="ddtree", block=16,
              budget=32, accept="14")
    plain = P.predict(draws, **kw)
    flagged = P.predict(draws, new_deployment=True, **kw)
    step = P.step_components(draws, ask(draws, new_deployment=False), np.random.default_rng(0),
                             anchor=False)[0]["step"][0]
    assert flagged[0]["median"] == pytest.approx(plain[0]["median"], rel=1e-9)
    assert flagged[0]["median"] == pytest.approx(14 * 1000 / step, rel=1e-9)
    assert flagged[0]["new_deployment"] is True and "new_deployment" not in plain[0]


@pytest.mark.parametrize("spread", [None, 0.8])
def test_the_flagged_log_spread_is_hypot_of_the_system_scatter_and_the_spread(spread):
    """log(SPEC / measured SPEC) is hypot(system_sd, spread) x a standard normal per draw:
    sd 0.3 for a transformer target, hypot(0.3, 0.8) = 0.8544 for a hybrid one in an engine
    whose hybrid effect is large; draw by draw the hybrid's is 0.8544 / 0.3 times the
    transformer's (one seed), and over 4000 draws its sd is that figure."""
    n = 4000
    sd = 0.3 if spread is None else math.hypot(0.3, spread)
    assert sd == pytest.approx(0.3 if spread is None else 0.854400374531753)
    draws = carried_point_mass(n, system_sd=0.3, spread=spread)
    flagged, how = P.step_components(draws, ask(draws), np.random.default_rng(3), anchor=False)
    log_ratio = np.log(flagged["spec"] / SPEC)
    assert np.std(log_ratio) == pytest.approx(sd, rel=0.04)
    base, _ = P.step_components(carried_point_mass(n, system_sd=0.3), ask(draws),
                                np.random.default_rng(3), anchor=False)
    np.testing.assert_allclose(log_ratio, np.log(base["spec"] / SPEC) * sd / 0.3, rtol=1e-9)
    if spread is not None:
        assert "the groups' spread spec_fixed_log_sd (a hybrid target in sglang" in how


@pytest.mark.parametrize("hardware, method, why", [
    ("h200", "ddtree", "the fit did not measure group h200x8/sglang/ddtree"),
    ("b300", "ar", "an autoregressive step has no speculative overhead group")])
def test_the_flag_on_a_group_the_fit_did_not_measure_changes_nothing_and_says_so(
        hardware, method, why):
    """A group carried from another system (H200: the B300's) or none at all (AR) is answered
    as without the flag, draw by draw and note for note, and one warning line says so."""
    draws = carried_point_mass(system_sd=0.3)
    flagged = P.step_components(draws, ask(draws, hardware, method), np.random.default_rng(0))
    plain = P.step_components(draws, ask(draws, hardware, method, False),
                              np.random.default_rng(0))
    assert flagged[1] == plain[1]
    for k in plain[0]:
        np.testing.assert_array_equal(flagged[0][k], plain[0][k])
    accept = "14" if method != "ar" else None
    q = resolve(draws, Flags(hardware=hardware, gpus=8, engines=("sglang",), method=method,
                             accept=accept, new_deployment=True))
    said = [w for w in q.warnings if w.startswith("--new-deployment changes nothing")]
    assert len(said) == 1 and why in said[0]
    assert q.asked[0].scenario.new_deployment
    assert not [w for w in resolve(draws, Flags(hardware="b300", engines=("sglang",),
                                                accept="14", new_deployment=True)).warnings
                if "--new-deployment" in w]


def test_the_api_refuses_a_flag_that_is_not_true_or_false():
    with pytest.raises(QueryError, match="new_deployment 'yes' is not True or False"):
        Flags(new_deployment="yes")
    assert Flags(new_deployment=np.bool_(True)).new_deployment is True
    assert Flags.of({"new_deployment": None}).new_deployment is False


@pytest.fixture(scope="module")
def pm(tmp_path_factory):
    draws = carried_point_mass(16, system_sd=0.3)
    draws.variables["noise_sd"] = np.full(16, 0.05)   # (next refuses a noiseless fit)
    return make_point_mass_workdir(tmp_path_factory.mktemp("newdep") / "w", draws=draws, n=16)


def test_predict_next_and_track_take_the_flag_and_echo_it(pm, tmp_path):
    """predict --new-deployment says it in the table and echoes it in the JSON rows; next's
    --query and track take it too (a tracked query keeps it, and answers with it)."""
    work = shutil.copytree(pm, tmp_path / "w")
    q = ["--hardware", "b300", "--engine", "sglang", "--method", "ddtree", "--block", "16",
         "--budget", "32", "--accept", "14"]
    code, out, err = run_cli(work, "predict", *q, "--new-deployment")
    assert code == 0, err
    assert "verify 33 tokens, context 0, new deployment" in out
    assert f"overhead of group {GROUP} carried to another deployment of it" in out
    code, out, err = run_cli(work, "predict", *q, "--new-deployment", "--format", "json")
    validate_output("predict", json.loads(out))
    (row,) = json.loads(out)["rows"]
    assert row["new_deployment"] is True
    code, out, _ = run_cli(work, "predict", *q, "--format", "json")
    (plain,) = json.loads(out)["rows"]
    assert "new_deployment" not in plain and plain["median"] != row["median"]
    code, out, err = run_cli(work, "next", "--k", "2", "--format", "json", "--query",
                             " ".join(q) + " --new-deployment")
    assert code == 0, err
    validate_output("next", json.loads(out))
    query = json.loads(out)["query"]
    assert query["new_deployment"] is True
    assert "carried to another deployment of it" in query["overhead_from"]
    code, out, err = run_cli(work, "track", *q, "--new-deployment", "--format", "json")
    assert code == 0, err
    added = json.loads(out)
    validate_output("track", added)
    assert added["query"]["query"]["new_deployment"] is True
    assert added["query"]["name"].endswith("-new-deployment")
    assert added["now"]["rows"][0]["median"] == pytest.approx(row["median"])   # (predict's)
    code, out, _ = run_cli(work, "track", "list")
    assert "--accept 14 --new-deployment" in out
    validate_output("track", json.loads(run_cli(work, "track", "list", "--format", "json")[1]))
    # diff and update label its rows apart from the same query without the flag
    code, out, err = run_cli(work, "diff", "latest", "latest")
    assert code == 0, err
    assert "b300 x8 sglang ddtree b16/B32 new deployment accept 14" in out


def test_the_flagged_spec_is_the_groups_times_one_scatter_at_every_concurrency():
    """By hand on the B300 point mass with the [transfer] system scatter 0.3: the flagged SPEC
    is the group's measured SPEC, 8 ms x (0.05 fixed + 0.1 x one pass + 0.002 x C x 32 nodes),
    times exp(0.3 z), one z per draw at every concurrency (the stream is the question's at
    C = 1, whose first draws z are: no AMD effect between a group and itself, and a point
    mass's group draws no own per-node cost), and native's is (1 - reduction 0.5) times it."""
    draws = carried_point_mass(system_sd=0.3)
    scatter = np.exp(0.3 * np.random.default_rng(5).standard_normal(8))
    for c in (1, 8):
        sc = dataclasses.replace(ask(draws), concurrency=c)
        spec = P.step_components(draws, sc, np.random.default_rng(5), anchor=False)[0]["spec"]
        np.testing.assert_allclose(spec, 8 * (0.05 + 0.1 + 0.002 * 32 * c) * scatter,
                                   rtol=1e-12)
        native = P.step_components(draws, dataclasses.replace(sc, engine="native"),
                                   np.random.default_rng(5), anchor=False)
        np.testing.assert_allclose(native[0]["spec"], 0.5 * spec, rtol=1e-12)
        assert native[1].startswith("native = (1 - reduction) x sglang overhead; overhead of "
                                    f"group {GROUP} carried to another deployment of it")


def test_a_flagged_drafter_is_paid_at_the_groups_multiple_and_says_so(tmp_path, monkeypatch):
    """--drafter NAME with --new-deployment: the carried group pays the card's roofline r1 at
    the group's measured multiple of the fit's drafter roofline r0, as the unflagged answer
    does (SPEC + 8 ms x 0.1 x (r1 / r0 - 1), times the same scatter: system scatter 0 here),
    and the note says so as the unflagged one does (it was left out)."""
    from ddtree_bayes.engine.scenario import with_drafter
    from ddtree_bayes.engine.structure import pass_roofline
    from test_engine_effects import KIMI_DDTREE, own_drafters, structured_engine_fit

    draws = structured_engine_fit()
    draws.variables["transfer_system_sd"] = np.zeros(draws.n_draws)
    monkeypatch.chdir(tmp_path)
    own_drafters(tmp_path, KIMI_DDTREE)
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    sc = dataclasses.replace(sc, new_deployment=True)
    mine = with_drafter(draws, sc, "my-kimi-ddtree")
    r0, r1 = pass_roofline(draws, sc)[0], pass_roofline(draws, mine)[0]
    base, _ = P.step_components(draws, sc, np.random.default_rng(0), anchor=False)
    other, how = P.step_components(draws, mine, np.random.default_rng(0), anchor=False)
    np.testing.assert_allclose(other["spec"] - base["spec"], 8.0 * 0.1 * (r1 / r0 - 1.0),
                               rtol=1e-9)
    assert "carried to another deployment of it" in how
    assert (f"drafter my-kimi-ddtree: {r1:.3g} ms per pass at its roofline against {r0:.3g} ms "
            "for the drafter the fit priced, at the group's measured multiple") in how


def test_explain_says_where_a_flagged_groups_costs_past_its_rows_come_from():
    """--explain of a flagged answer at budget 32 (32 nodes; the group measured 8): the carried
    group pays the nodes past its rows at the population's per-node cost, as the unflagged
    answer's words say (they were left out of the flagged one's)."""
    from ddtree_bayes.engine.question import Flags, resolve

    draws = carried_point_mass(system_sd=0.3)
    past = ("(at most 8 tree nodes a step; 32 here: the cost of the rest is the population's "
            "per-node cost")
    words = {}
    for flag in (False, True):
        q = resolve(draws, Flags(hardware="b300", engines=("sglang",), block=16, budget=32,
                                 accept="14", new_deployment=flag))
        with np.errstate(invalid="ignore", divide="ignore"):
            (row,) = P.predict_rows(draws, q, explain=True)
        words[flag] = {t["term"]: t for t in row["explain"]["terms"]}["speculative overhead"]
    assert words[False]["from"].startswith(f"fitted to its group's rows {past}")
    assert words[True]["from"].startswith(f"its group's rows {past}")
    assert "carried to another deployment of it (--new-deployment)" in words[True]["from"]


def test_next_names_the_flagged_querys_candidate_as_the_fits_deployment(pm, tmp_path):
    """next --query "... --new-deployment": the candidate at the query's configuration is a
    row of the deployment the fit measured (b300 x8), which the flagged answer is never
    anchored to: it was called "the query itself", whose run (of the user's deployment,
    under a GPU name of its own, refitted) would anchor the query instead. Its why says so and
    the query_itself note, at any rank, says what measuring the query's own deployment takes;
    the unflagged query's candidate stays "the query itself" and its note null."""
    from ddtree_bayes.cli.decisions import query_itself

    work = shutil.copytree(pm, tmp_path / "w")
    q = "--hardware b300 --engine sglang --method ddtree --block 16 --budget 32 --accept 14"
    outs = {}
    for flag in ("", " --new-deployment"):
        code, out, err = run_cli(work, "next", "--k", "2", "--format", "json", "--query",
                                 q + flag)
        assert code == 0, err
        outs[flag] = json.loads(out)
        validate_output("next", outs[flag])
    whys = {flag: [r["why"] for r in out["rows"] if r["budget"] == 32 and r["hardware"] == "b300"
                   and r["engine"] == "sglang"] for flag, out in outs.items()}
    assert whys[""] == ["the query itself"]
    assert whys[" --new-deployment"] == [
        "the query's configuration, on the fit's deployment (not yours: --new-deployment)"]
    assert outs[""]["query_itself"] is None
    itself = outs[" --new-deployment"]["query_itself"]
    assert itself == query_itself(outs[" --new-deployment"])
    assert itself["candidates"] == len(outs[" --new-deployment"]["rows"])
    assert itself["note"].startswith("--new-deployment: the query's own deployment is no "
                                     f"candidate; its configuration (ranked {itself['rank']} of")
    assert "`ddtree-bayes hardware add NAME --like b300 --source TEXT`" in itself["note"]
    code, out, _ = run_cli(work, "next", "--k", "2", "--query", q + " --new-deployment")
    assert itself["note"] + "." in out


def varied_point_mass(system_sd: float):
    """:func:`carried_point_mass` whose group measured one number of tree nodes (8: its
    budget-8 row), so a question at other nodes draws the group's own per-node cost from the
    stream (engine/structure.py ``tied_ratio_spread``), with that cost's spread 0: the
    population's per-node ratio exp(log 0.002) = 0.002 whatever z is drawn for it."""
    draws = carried_point_mass(system_sd=system_sd)
    draws.meta["model"]["group_varies"] = {"pass": [False], "tree": [False]}
    draws.variables.update(spec_tree_log_mu=np.full(draws.n_draws, math.log(0.002)),
                           spec_tree_log_sd=np.zeros(draws.n_draws),
                           spec_pass_log_mu=np.full(draws.n_draws, math.log(0.1)),
                           spec_pass_log_sd=np.zeros(draws.n_draws))
    return draws


def test_optimize_prices_every_budget_with_one_deployment_scatter_per_draw():
    """optimize --new-deployment on the B300 point mass, system scatter 0.3, budgets 8 and 32:
    each budget's SPEC is the group's measured one, 8 ms x (0.05 + 0.1 + 0.002 x B), times
    exp(0.3 z) with ONE z per draw for every budget (the first draws of the group's stream,
    workflows/decisions/common.group_rng): budget 32 draws the group's own per-node cost
    first (its nodes differ from the measured 8; budget 8's do not), which gave budget 32
    the next z, an independent scatter per budget. Its expected tok/s is then, by hand,
    mean(accept(B) x 1000 / (target step(B) + SPEC(B)))."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.workflows import decisions as D
    from ddtree_bayes.workflows.decisions.acceptance_curve import curve_accept, sample_curve
    from ddtree_bayes.workflows.decisions.common import group_rng

    draws = varied_point_mass(0.3)
    curve = parse_acceptance_curve(draws.priors_toml)
    seed, budgets = 11, (8, 32)
    out = D.optimize(draws, curve, hardware="b300", engine="sglang", budgets=budgets,
                     seed=seed, new_deployment=True)
    assert out["scenario"]["new_deployment"] is True
    n = draws.n_draws
    scatter = np.exp(0.3 * group_rng(seed, GROUP).standard_normal(n))
    cd = sample_curve(curve, n, np.random.default_rng([seed, 7]))
    accept = curve_accept(budgets, cd.accept_ref, cd.gain, cd.decay,
                          reference_budget=curve.reference_budget,
                          limits=np.array([16, 16]))
    for j, b in enumerate(budgets):
        sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                method="ddtree", block=curve.block, budget=b,
                                verify_tokens=None, context_tokens=0.0)
        plain = P.step_components(draws, sc, np.random.default_rng(0), anchor=False)[0]
        target = plain["step"] - plain["spec"]
        step = target + 8 * (0.05 + 0.1 + 0.002 * b) * scatter
        row = out["rows"][j]
        assert row["budget"] == b
        assert row["step_ms"] == pytest.approx(float(np.median(step)), rel=1e-9)
        assert row["tok_s_mean"] == pytest.approx(float(np.mean(accept[:, j] * 1000 / step)),
                                                  rel=1e-9)


def test_optimize_with_no_scatter_recommends_the_unflagged_budget():
    """With the system scatter 0 and no anchor discrepancy (structure_sd 0) the flagged
    steps are the unflagged ones, so each budget's expected tok/s and the recommended budget
    are the same with and without --new-deployment."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.workflows import decisions as D

    draws = varied_point_mass(0.0)
    draws.variables.update(structure_sd=np.zeros(draws.n_draws),
                           noise_sd=np.full(draws.n_draws, 1e-12))
    curve = parse_acceptance_curve(draws.priors_toml)
    kw = dict(hardware="b300", engine="sglang", budgets=(4, 8, 16, 32, 64, 128), seed=3)
    with np.errstate(invalid="ignore", divide="ignore"):   # (the anchor's 0 / 0 discrepancy)
        flagged = D.optimize(draws, curve, new_deployment=True, **kw)
        plain = D.optimize(draws, curve, **kw)
    assert flagged["recommended"] == plain["recommended"]
    np.testing.assert_allclose([r["tok_s_mean"] for r in flagged["rows"]],
                               [r["tok_s_mean"] for r in plain["rows"]], rtol=1e-9)
    assert "new_deployment" not in plain["scenario"]


def test_optimize_takes_the_flag_says_it_and_echoes_it(pm, tmp_path):
    """optimize --new-deployment: exit 0 (it was "unrecognized arguments", exit 2), the table's
    question line says "new deployment", the JSON's scenario echoes it (schema-valid), and on
    a group the fit did not measure (H200) one warning says the flag changes nothing."""
    work = shutil.copytree(pm, tmp_path / "w")
    q = ["--hardware", "b300", "--engine", "sglang", "--budgets", "8,32"]
    code, out, err = run_cli(work, "optimize", *q, "--new-deployment")
    assert code == 0, err
    assert "; new deployment (--new-deployment)" in out
    code, out, err = run_cli(work, "optimize", *q, "--new-deployment", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    validate_output("optimize", got)
    assert got["scenario"]["new_deployment"] is True
    assert f"overhead of group {GROUP} carried to another deployment of it" in got["overhead_from"]
    code, out, err = run_cli(work, "optimize", "--hardware", "h200", "--engine", "sglang",
                             "--budgets", "8,32", "--new-deployment", "--format", "json")
    assert code == 0, err
    said = [w for w in json.loads(out)["warnings"] if w.startswith("--new-deployment changes")]
    assert len(said) == 1 and "the fit did not measure group h200x8/sglang/ddtree" in said[0]


def test_p_faster_than_ar_of_a_new_deployment_is_against_its_own_ar_step():
    """P(faster than AR) of a --new-deployment question compares two steps of that other
    deployment: its speculative step (the structural target step and the group's carried
    overhead, not anchored) against its autoregressive step, the fit's step_ar_ms (8 ms at
    C = 1: 125 tok/s), not the measured deployment's AR row (133 tok/s: 1000 / 133 ms,
    anchored). With the system scatter 0 the flagged step is the structural one, so at
    accept 3.25 the flagged rate is 3250 / 25.33 ms = 128.3 tok/s: faster than 125 in every
    draw (P 1), slower than 133 in every draw (the P 0 it printed). At C = 8, accept 2.6:
    2600 / 37.46 ms = 69.4 tok/s against the fit's 67.1 (P 1), not the anchored 71.4.
    The unflagged question keeps the measured deployment's anchored AR step on both sides."""
    draws = carried_point_mass()
    ar = ask(draws, method="ar", new_deployment=False)
    structural_ar = P.step_components(draws, ar, np.random.default_rng(0), anchor=False)[0]
    anchored_ar = P.step_components(draws, ar, np.random.default_rng(0))[0]
    assert structural_ar["step"][0] == pytest.approx(8.0, rel=1e-12)
    assert anchored_ar["step"][0] == pytest.approx(1000 / 133, rel=1e-12)
    for c, accept in ((1, 3.25), (8, 2.6)):
        sc = dataclasses.replace(ask(draws), concurrency=c)
        spec = P.step_components(draws, sc, np.random.default_rng(0))[0]["step"]
        ar_c = dataclasses.replace(ar, concurrency=c)
        own = P.step_components(draws, ar_c, np.random.default_rng(0), anchor=False)[0]["step"]
        measured = P.step_components(draws, ar_c, np.random.default_rng(0))[0]["step"]
        assert np.all(accept / spec > 1 / own) and np.all(accept / spec < 1 / measured)
        got = P.p_faster_than_ar(draws, sc, np.full(draws.n_draws, accept),
                                 np.random.default_rng(0))
        assert got == 1.0
        plain = dataclasses.replace(sc, new_deployment=False)
        anchored = P.step_components(draws, plain, np.random.default_rng(0))[0]["step"]
        assert P.p_faster_than_ar(draws, plain, np.full(draws.n_draws, accept),
                                  np.random.default_rng(0)) == float(
            np.mean(accept / anchored > 1 / measured))
    rows = P.predict(draws, hardware="b300", gpus=8, engines=["sglang"], method="ddtree",
                     block=16, budget=32, accept="3.25", concurrency=[1],
                     new_deployment=True)
    assert rows[0]["p_faster_than_ar"] == 1.0


def test_optimize_new_deployment_compares_with_its_own_ar_step():
    """optimize's note "autoregressive decoding ... is faster than the best budget" under
    --new-deployment compares with the other deployment's AR step (the fit's, 125 tok/s per
    user on the point mass), not the measured AR row's 133: a budget at 129 tok/s in every
    draw beats the one and loses to the other."""
    from ddtree_bayes.workflows.decisions.optimize import ar_beats

    draws = carried_point_mass()
    tok = np.full(draws.n_draws, 129.0)
    flagged, plain = ask(draws), ask(draws, new_deployment=False)
    assert ar_beats(draws, flagged, tok, 32, 1, 7) == []
    (note,) = ar_beats(draws, plain, tok, 32, 1, 7)
    assert note.startswith("autoregressive decoding (133 tok/s per user, median) is faster")


def test_predict_says_what_a_new_deployments_p_faster_than_ar_compares(pm, tmp_path):
    """The table's line after the crossover lines: P(> AR) of a new deployment is against that
    deployment's AR step, the fit's, not the measured AR rows; absent without the flag."""
    from ddtree_bayes.cli.predict import NEW_DEPLOYMENT_VERSUS_AR

    q = ["predict", "--hardware", "b300", "--engine", "sglang", "--method", "ddtree",
         "--block", "16", "--budget", "32", "--accept", "3.25", "--concurrency", "1,8"]
    code, out, err = run_cli(pm, *q, "--new-deployment")
    assert code == 0, err
    assert NEW_DEPLOYMENT_VERSUS_AR + "\n" in out
    code, out, err = run_cli(pm, *q)
    assert code == 0, err
    assert "P(> AR) of a new deployment" not in out


def test_a_model_average_says_which_fit_the_flag_changes_nothing_in():
    """predict --model-average --new-deployment mixing a structured fit (the flag carries its
    group) with one of the fraction step form (the flag changes nothing there): with the
    structured fit asked (--fit) the answer, labelled "new deployment", was 95% the fraction
    fit's anchored one without a word (the warning was the asked fit's alone); with the
    fraction fit asked, "changes nothing" was said of an answer the structured part changed.
    Each fit of the mixture the flag changes nothing in is named, with its weight."""
    from ddtree_bayes.engine.testing import point_mass_draws

    structured, fraction = carried_point_mass(), point_mass_draws()
    fraction.meta["fit_id"] = "fraction-fit"
    structured.meta["fit_id"] = "structured-fit"
    mixture = [(structured, 0.05), (fraction, 0.95)]
    kw = dict(hardware="b300", gpus=8, engines=["sglang"], method="ddtree", block=16,
              budget=32, accept="14", new_deployment=True, mixture=mixture)
    for asked in (structured, fraction):
        said: list[str] = []
        P.predict(asked, warnings=said, **kw)
        lines = [w for w in said if w.startswith("--new-deployment changes nothing")]
        assert lines == [
            "--new-deployment changes nothing for sglang ddtree on b300x8 in fit fraction-fit "
            "(weight 0.95 of the model average): the fit's fraction step form has no group "
            "costs to carry (fit the structured form for it)"], lines
    # without a mixture the asked fit's own line, as before
    said = []
    P.predict(fraction, warnings=said, **{**kw, "mixture": None})
    assert [w for w in said if w.startswith("--new-deployment")] == [
        "--new-deployment changes nothing for sglang ddtree on b300x8: the fit's fraction step "
        "form has no group costs to carry (fit the structured form for it)"]


def test_predict_model_average_names_the_fit_the_flag_changes_nothing_in(pm, tmp_path,
                                                                        monkeypatch):
    """The CLI's predict --model-average --new-deployment says the same as the API: the
    mixture (here the point-mass fit asked, structured, weight 0.05, and a fraction-form fit,
    0.95; PSIS-LOO weights need real fits, so the mixture is given) gets one line per engine
    naming the fraction fit; the asked fit's own line (none: it is structured) was all."""
    from ddtree_bayes.engine import compare
    from ddtree_bayes.engine.testing import point_mass_draws

    fraction = point_mass_draws()
    fraction.meta["fit_id"] = "fraction-fit"
    monkeypatch.setattr(compare, "model_average",
                        lambda draws, *a, **k: [(draws, 0.05), (fraction, 0.95)])
    code, out, err = run_cli(pm, "predict", "--hardware", "b300", "--engine", "sglang",
                             "--method", "ddtree", "--block", "16", "--budget", "32",
                             "--accept", "14", "--model-average", "--new-deployment")
    assert code == 0, err
    assert ("warning: --new-deployment changes nothing for sglang ddtree on b300x8 in fit "
            "fraction-fit (weight 0.95 of the model average): the fit's fraction step form "
            "has no group costs to carry") in err
    assert err.count("--new-deployment changes nothing") == 1


def test_diff_names_the_fit_a_tracked_flag_changes_nothing_in(pm, tmp_path):
    """A tracked --new-deployment query under `diff A B` (and update) of a fraction-form fit A
    and a structured fit B: the flag changed nothing in A (its answer was the measured
    deployment's, anchored) and carried B's group, so the line's width change is mostly the
    flag's; the warnings were B's alone (none here). Each fit's "changes nothing" line is
    said, naming the fit; B to A too."""
    from ddtree_bayes.engine.testing import point_mass_draws
    from test_cli_support import write_point_mass_fit

    work = shutil.copytree(pm, tmp_path / "w")
    data, models = work / "data", work / "models"
    structured = json.loads((models / "latest.json").read_text())["fit_id"]
    fraction = point_mass_draws(16, noise_sd=[0.05])
    write_point_mass_fit(models, data / "measurements.csv", models / "priors.toml",
                         data / "hardware.csv", fit_id="20260101T000001Z-fraction",
                         draws=fraction)
    code, out, err = run_cli(work, "track", "--hardware", "b300", "--engine", "sglang",
                             "--method", "ddtree", "--block", "16", "--budget", "32",
                             "--accept", "14", "--new-deployment")
    assert code == 0, err
    line = ("--new-deployment changes nothing for sglang ddtree on b300x8 in fit "
            "20260101T000001Z-fraction ({}): the fit's fraction step form has no group costs "
            "to carry (fit the structured form for it)")
    for a, b, which in (("20260101T000001Z-fraction", structured, "before"),
                        (structured, "20260101T000001Z-fraction", "after")):
        code, out, err = run_cli(work, "diff", a, b)
        assert code == 0, err
        said = [w for w in err.splitlines() if "--new-deployment changes nothing" in w]
        assert said == ["ddtree-bayes: warning: tracked query 'b300-sglang-ddtree-b16-B32-a14-new-"
                        "deployment': " + line.format(which)], said


def test_an_ar_question_flagged_says_its_answer_is_not_what_p_faster_than_ar_compares_with():
    """`predict --method ar --new-deployment` answers the measured deployment's AR step,
    anchored to its AR row (133 tok/s on the point mass: the row's 1000 / 133 ms), where the
    flagged speculative question's P(faster than AR) compares with the fit's AR step, not
    anchored (8 ms: 125 tok/s). Its warning said the flag changed nothing because "the target
    step is the fit's either way", which read as if 133 were what P(> AR) compares with:
    DDTree 16/32 at accept 3.25 (128.3 tok/s) is "faster than AR" in every draw beside an AR
    answer of 133. The warning now says which AR step each is."""
    draws = carried_point_mass()
    rows = P.predict(draws, hardware="b300", gpus=8, engines=["sglang"], method="ar",
                     accept="1", new_deployment=True)
    assert rows[0]["median"] == pytest.approx(133.0, rel=1e-9)   # (anchored: the row's)
    ar = ask(draws, method="ar")
    assert 1000 / P.step_components(draws, ar, np.random.default_rng(0), anchor=False)[0][
        "step"][0] == pytest.approx(125.0)   # (the fit's: what P(> AR) compares with)
    (said,) = [w for w in resolve(draws, Flags(hardware="b300", gpus=8, engines=("sglang",),
                                               method="ar", accept="1",
                                               new_deployment=True)).warnings
               if w.startswith("--new-deployment")]
    assert said == (
        "--new-deployment changes nothing for sglang ar on b300x8: an autoregressive step has "
        "no speculative overhead group to carry; this answer is the measured deployment's AR "
        "step, anchored to its AR rows where the fit has them, while P(> AR) of a speculative "
        "question with the flag compares with the fit's AR step, not anchored to them")


def test_the_p_faster_than_ar_line_is_not_said_where_the_flag_changes_nothing(tmp_path):
    """The line after the table, "P(> AR) of a new deployment: against that deployment's
    autoregressive step, the fit's (not anchored to the measured AR rows ...)", was printed
    for every flagged question, also where the flag changes nothing (a group the fit did not
    measure: EAGLE-3 in SGLang on the B300 point mass, its overhead drawn from the population)
    and P(> AR) is against the measured AR row's anchored step (133 tok/s, not the fit's 125),
    beside the warning that says the flag changes nothing. It is said only where it is so."""
    from ddtree_bayes.cli.predict import NEW_DEPLOYMENT_VERSUS_AR

    draws = carried_point_mass(16)
    for k, v in (("spec_fixed_log_mu", math.log(0.05)), ("spec_pass_log_mu", math.log(0.1)),
                 ("spec_tree_log_mu", math.log(0.002)), ("spec_fixed_log_sd", 0.0),
                 ("spec_pass_log_sd", 0.0), ("spec_tree_log_sd", 0.0)):
        draws.variables[k] = np.full(16, v)
    eagle = dataclasses.replace(ask(draws), method="eagle3", block=3, budget=3,
                                verify_tokens=4)
    assert P.new_deployment_group(draws, eagle) is None and P.ar_anchored(draws, eagle)
    ar = ask(draws, method="ar", new_deployment=False)
    assert 1000 / P.step_components(draws, ar, np.random.default_rng(0))[0]["step"][0] == (
        pytest.approx(133.0))   # (what its P(> AR) compares with: the AR row's step)
    work = make_point_mass_workdir(tmp_path / "w", draws=draws, n=16)
    q = ["predict", "--hardware", "b300", "--gpus", "8", "--engine", "sglang", "--accept", "2",
         "--concurrency", "1", "--new-deployment"]
    code, out, err = run_cli(work, *q, "--method", "eagle3", "--block", "3", "--drafter",
                             "lightseekorg/kimi-k2.5-eagle3-mla")
    assert code == 0, err
    assert "--new-deployment changes nothing for sglang eagle3 on b300x8" in err
    assert "P(> AR) of a new deployment" not in out
    code, out, err = run_cli(work, *q, "--method", "ddtree", "--block", "16", "--budget", "32")
    assert code == 0, err
    assert NEW_DEPLOYMENT_VERSUS_AR + "\n" in out   # (the carried group: said, as before)

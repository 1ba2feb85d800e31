"""``next``'s expected width is what ``add`` + ``update`` + ``predict`` would show.

On the bundled fit, ``next --query '--engine sglang --accept 14'`` promised E[90% width] 124
+- 3.7 tok/s for measuring the query itself, while adding such a row (at next's own simulated
results) and running ``update`` gave 90 +- 3.6 on average (84 at the median result): next
reweighted the draws of the query's answer *before* the measurement, whose mean carries the
discrepancy of the row it is anchored to now (budget 8, a per-draw shift of sd 0.034) and its
own discrepancy, neither of which a measurement of the query could move. After ``update`` the
query is anchored to its own new row: its discrepancy is conditioned on that row's residual.
"""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.model_cards import ModelCard
from ddtree_bayes.core.pairs import target_models_meta
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.workflows import decisions as D
from test_structure_model import structured_point_mass

#: z of the 95th percentile (a 90% equal-tailed interval is +-1.6449 sd of log tok/s)
Z95 = 1.6448536269514722


def b300_point_mass(n: int, run: float, structure_sd: float):
    """The structured point mass on B300 (AR 133 tok/s and DDTree block 8 budget 8 at 303),
    its rows only and the model metadata a fit of them stores (so that ``update`` could
    reweight it: the same parameters once a row is added in its overhead group)."""
    # (the per-pass and per-node population with no spread: each group's own ratio is its
    # mean, so restructuring the group as a second tree budget arrives changes no number)
    draws = structured_point_mass(
        n=n, noise_sd=run, structure_sd=structure_sd,
        **{f"spec_{part}_{name}": value
           for part, ratio in (("pass", 0.1), ("tree", 0.002))
           for name, value in (("log_mu", math.log(ratio)), ("log_sd", 0.0), ("z", [0.0]))})
    lines = draws.data_csv.splitlines(keepends=True)
    text = "".join([lines[0], *(line for line in lines[1:] if ",b300," in line)])
    draws = dataclasses.replace(draws, data_csv=text, memo={})
    draws.__dict__.pop("measurements", None)
    model = draws.meta["model"]
    cards = {model["card"]["model"]: ModelCard(**model["card"])}
    priors = dataclasses.replace(draws.priors, moe_form="roofline", step_form="structured")
    spec = S.build_spec(draws.measurements, priors, hardware=draws.hardware, cards=cards,
                        drafters=None)
    made = json.loads(json.dumps({**target_models_meta(draws.measurements),
                                  **S.model_meta(spec, priors)}))
    draws.meta["model"] = {**model, **made}
    draws.meta["coords"] = {k: list(v) for k, v in spec.coords.items()}
    return draws


def test_measuring_the_query_itself_anchors_it_to_the_new_row_by_hand():
    """Every parameter is a point mass, so no measurement can move the weights of the draws:
    next said E[width] = now for measuring the query itself (reduction exactly 0). What the
    query's answer does after ``add`` and ``update`` is conditioning its configuration's
    discrepancy e ~ Normal(0, A) on the row's residual r = y - mu (the likelihood's, with
    run-to-run sd s_run): e | r ~ Normal(A r / (A + s_run^2), A s_run^2 / (A + s_run^2)), and a
    new run adds s_run again. So log tok/s ~ Normal(mu + A r / (A + s_run^2), s^2), s^2 =
    A s_run^2 / (A + s_run^2) + s_run^2, whose 90% width is exp(centre) x 2 sinh(1.6449 s)."""
    n, run, seed, k = 4000, 0.03, 7, 8
    draws = b300_point_mass(n, run, structure_sd=0.2)
    query = D.parse_query(draws, "--hardware b300 --engine sglang --method ddtree --block 16 "
                                 "--budget 32 --accept 14")
    itself = D.Candidate(query.scenario, 14.0, "the query itself")
    out = D.next_measurements(draws, query, [itself], k=k, seed=seed)
    row = out["rows"][0]
    # the candidate's likelihood: the structural step, sd^2 = s_run^2 + A at its distance
    parts = P.step_components(draws, query.scenario, np.random.default_rng(0), anchor=False)[0]
    mu = math.log(14.0 * 1000.0 / parts["step"][0])
    sd = float(parts["log_sd"][0])
    a = sd ** 2 - run ** 2
    assert a > 10 * run ** 2   # (the discrepancy dominates: the anchor moves a lot)
    # next's simulated results: y_k = mu + sd eps_k (every draw is the same draw)
    rng = np.random.default_rng([seed, 11])
    rng.integers(0, n, size=k)
    eps = rng.standard_normal(k)
    r = sd * eps
    s = math.sqrt(a * run ** 2 / (a + run ** 2) + run ** 2)
    widths = np.exp(mu + a * r / (a + run ** 2)) * 2.0 * math.sinh(Z95 * s)
    assert row["expected_width"] == pytest.approx(widths.mean(), rel=0.03)
    # ~ sqrt(2) s_run: a quarter of the width now (sqrt(s_run^2 + A))
    assert row["reduction_rel"] > 0.6


def test_a_query_without_accept_takes_the_measured_acceptance_of_its_own_row():
    """Without --accept the query's acceptance is predict's: here the acceptance prior of
    DDTree b16/B32 (next said so, and that "the part of the width it causes stays, whatever
    is measured"). But a run of the query's configuration reports its acceptance, and predict
    then takes that measured acceptance (on the bundled fit, 293-739 tok/s became 527-595
    after adding one such row; next had promised 425 +- 4.5 of width). next measures the
    candidate at the query's acceptance draw a_k of the draw its result was simulated from:
    the query is then a_k x 1000 / step x exp(centre + s z) as in the test above."""
    n, run, seed, k = 4000, 0.03, 11, 8
    draws = b300_point_mass(n, run, structure_sd=0.2)
    query = D.parse_query(draws, "--hardware b300 --engine sglang --method ddtree --block 16 "
                                 "--budget 32")
    assert query.accept is None and query.source.kind == "prior"
    itself = D.Candidate(query.scenario, None, "the query itself")
    out = D.next_measurements(draws, query, [itself], k=k, seed=seed)
    row = out["rows"][0]
    accept = D.query_acceptance(draws, query, P.keyed_rng(seed, repr(query.source)))[0]
    assert accept.std() > 1.0   # (the prior: most of the width now)
    parts = P.step_components(draws, query.scenario, np.random.default_rng(0), anchor=False)[0]
    mu = math.log(1000.0 / parts["step"][0])   # (per step: the candidate has no accept_len)
    sd = float(parts["log_sd"][0])
    a = sd ** 2 - run ** 2
    rng = np.random.default_rng([seed, 11])
    picks = rng.integers(0, n, size=k)
    r = sd * rng.standard_normal(k)
    s = math.sqrt(a * run ** 2 / (a + run ** 2) + run ** 2)
    widths = accept[picks] * np.exp(mu + a * r / (a + run ** 2)) * 2.0 * math.sinh(Z95 * s)
    assert row["expected_width"] == pytest.approx(widths.mean(), rel=0.03)
    assert row["reduction_rel"] > 0.8


def test_a_candidate_update_would_refit_for_is_flagged():
    """A measurement at a concurrency the fit never measured makes ``update`` refit (the row
    brings parameters the fit lacks); next's E[width] for it reweights today's draws, which
    cannot learn them: on the bundled fit "the query itself" at C = 16 was promised 350 +- 11
    tok/s of width where add + update (a refit) + predict gave 36 +- 9. Every parameter here is
    a point mass, so no reweighting moves anything: E[width] of the C = 16 run equals today's
    width exactly, while the same configuration at C = 1 (an update without a refit) narrows
    it. The row says which one is which (``refit_needed``), and the table's note too."""
    draws = b300_point_mass(4000, 0.03, structure_sd=0.2)
    flags = "--hardware b300 --engine sglang --method ddtree --block 16 --budget 32 --accept 14"
    query = D.parse_query(draws, flags)
    at16 = D.parse_query(draws, flags + " --concurrency 16").scenario
    out = D.next_measurements(draws, query, [D.Candidate(query.scenario, 14.0, "itself"),
                                             D.Candidate(at16, 14.0, "at C = 16")], k=8, seed=7)
    rows = {r["why"]: r for r in out["rows"]}
    assert rows["itself"]["refit_needed"] is False
    assert rows["itself"]["reduction_rel"] > 0.6
    assert rows["at C = 16"]["refit_needed"] is True
    assert rows["at C = 16"]["reduction"] == pytest.approx(0.0, abs=1e-9)


def test_the_table_notes_a_candidate_update_would_refit_for(tmp_path):
    """The table notes every candidate whose JSON row says ``refit_needed``, and explains the
    note once. (The point-mass workdir's fit stores no inputs that give its model, so update
    would refit for any row: every candidate is flagged here; the test above tells the two
    kinds apart.)"""
    from ddtree_bayes.cli.decisions import REFIT_NOTE
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05)
    query = "--hardware b300 --engine sglang --budget 32 --accept 14 --concurrency 16"
    code, text, err = run_cli(work, "next", "--k", "2", "--format", "json", "--query", query)
    assert code == 0, err
    rows = json.loads(text)["rows"]
    code, out, err = run_cli(work, "next", "--k", "2", "--query", query)
    assert code == 0, err
    lines = out.splitlines()
    for r in rows:
        (line,) = [ln for ln in lines if f"  {r['candidate']}  " in ln]
        assert (REFIT_NOTE in line) is r["refit_needed"], line
    assert sum(r["refit_needed"] for r in rows) == len(rows) > 10
    assert sum(ln.startswith(REFIT_NOTE + ":") for ln in lines) == 1


@pytest.mark.parametrize("accept, says", [
    ("", "unless a run of the query's configuration on its system reports its acceptance"),
    (" --accept 12:16", "whatever is measured")])
def test_next_says_which_acceptance_a_measurement_can_replace(tmp_path, accept, says):
    """The query's acceptance prior (no --accept) is replaced by the acceptance a run of its
    configuration reports (predict takes the measured one); a range the query gives is not."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05)
    code, out, err = run_cli(work, "next", "--k", "2", "--query",
                             "--hardware b300 --engine sglang --budget 32" + accept)
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("acceptance ")]
    assert says in line


@pytest.mark.slow
@pytest.mark.parametrize("question", ["--engine sglang --accept 14", "--engine sglang"])
def test_next_expected_width_is_what_add_update_predict_show(fitted_workdir, tmp_path,
                                                             question):
    """Calibration through the CLI on the bundled fit: for "the query itself" of
    ``next --query QUESTION``, add each of next's first K = 8 simulated results as a row (a
    scratch copy of the workspace each), run ``update`` (a reweight, or the refit it decides
    on) and ``predict`` the question: the mean of those 90% widths is next's E[width] within 3
    of the two Monte Carlo standard errors combined. Before next weighed the query's answer
    under the new data, it promised 124 +- 3.7 tok/s at accept 14 where these 8 gave 94.9 +-
    4.4, and 425 +- 4.5 for the acceptance prior (no --accept) where they gave 71.0 +- 4.8."""
    import shlex
    import shutil

    from ddtree_bayes.engine import store
    from ddtree_bayes.workflows.decisions.common import DEFAULT_K, shared_components
    from test_cli_support import run_cli

    work, _ = fitted_workdir
    base = tmp_path / "base"
    shutil.copytree(work, base)
    (base / "data" / "measurements.csv").chmod(0o644)
    code, out, err = run_cli(base, "next", "--query", question, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    (row,) = [r for r in result["rows"] if r["why"] == "the query itself"]
    seed = result["seed"]
    # next's simulated results, as it draws them (common random numbers: seed, 11), at the
    # query's acceptance draw of each picked draw when the query gives none
    draws = store.load_fit(store.resolve(base / "models", result["fit_id"]))
    query = D.parse_query(draws, question)
    sc = query.scenario
    parts = shared_components(draws, sc, seed, anchor=False,
                              step_rng=P.keyed_rng(seed, P.scenario_key(sc)))[0]
    a = row["accept_len"] or 1.0
    rng = np.random.default_rng([seed, 11])
    picks = rng.integers(0, draws.n_draws, size=DEFAULT_K)
    eps = rng.standard_normal(DEFAULT_K)
    k = 8
    per_step = np.exp(np.log(1000.0 / parts["step"][picks]) + parts["log_sd"][picks] * eps)
    accept = (np.full(DEFAULT_K, a) if row["accept_len"] is not None else
              D.query_acceptance(draws, query, P.keyed_rng(seed, repr(query.source)))[0][picks])
    widths = []
    for i in range(k):
        here = tmp_path / f"k{i}"
        shutil.copytree(base, here)
        code, _, err = run_cli(here, "add", "--hardware", sc.hardware, "--gpus", str(sc.gpus),
                               "--engine", sc.engine, "--method", sc.method, "--block",
                               str(sc.block), "--budget", str(sc.budget), "--accept",
                               f"{accept[i]:.6g}", "--tok-s", f"{accept[i] * per_step[i]:.6g}",
                               "--source", f"simulated result {i}")
        assert code == 0, err
        code, _, err = run_cli(here, "update", "--format", "json")
        assert code == 0, err
        code, out, err = run_cli(here, "predict", *shlex.split(question), "--format", "json")
        assert code == 0, err
        answer = json.loads(out)["rows"][0]
        widths.append(answer["hi90"] - answer["lo90"])
        shutil.rmtree(here)
    realised = float(np.mean(widths))
    se = float(np.std(widths, ddof=1) / math.sqrt(k))
    tolerance = 3.0 * math.sqrt(row["width_se"] ** 2 + se ** 2)
    assert abs(row["expected_width"] - realised) < tolerance, (row["expected_width"],
                                                                 row["width_se"], widths)


def test_next_on_a_reweighted_fit_weighs_its_proposals_draws(monkeypatch):
    """``update`` after a reweighted update reweights the NUTS draws the resample was drawn
    from (its proposal) by every row added since, never the resample again. next weighed the
    resample: its 4000 draws, each distinct draw there several times, counted as 4000 in the
    weights' ESS (on the bundled data after one reweighted update, a candidate's ESS said 3530
    where `update` with that row said 943) and its interval read from them. Here the resample
    holds 1000 distinct draws of the proposal 4 times each and no row was added since: what
    ``add`` + ``update`` do with a repeat of the measured budget-8 run is the proposal's own."""
    from ddtree_bayes.workflows.decisions.next_measurement import simulated_update
    from ddtree_bayes.workflows.living import reweight as RW

    n, seed = 4000, 7
    proposal = b300_point_mass(n, 0.03, structure_sd=0.2)
    # (draws that differ: a repeat's likelihood weighs them)
    proposal = proposal.view(variables={**proposal.variables,
                                        "noise_sd": np.linspace(0.01, 0.06, n)})
    index = np.repeat(np.arange(0, n, 4), 4)
    resample = proposal.view(
        meta={**proposal.meta, "made_by": RW.MADE_BY_REWEIGHT,
              "reweight": {"proposal_fit": "the proposal"}},
        variables={name: np.asarray(v)[index] for name, v in proposal.variables.items()})
    monkeypatch.setattr(RW, "proposal_of", lambda previous, models: (
        (proposal, None) if previous is resample else (previous, None)))
    query = D.parse_query(resample, "--hardware b300 --engine sglang --method ddtree "
                                    "--block 16 --budget 32 --accept 14")
    (b8,) = [r for r in resample.measurements.rows if r.method == "ddtree"]
    again = D.Candidate(P.resolve_scenario(resample, hardware="b300", gpus=8, engine="sglang",
                                           method="ddtree", block=b8.block, budget=b8.budget,
                                           verify_tokens=None, context_tokens=0.0),
                        b8.accept_len, "budget 8 again")
    assert P.at_measured_configuration(resample, again.scenario)
    accept = np.full(n, 14.0)
    per_token = P.per_token_draws(resample, query.scenario, seed)[0]
    y = math.log(b8.tok_s / b8.accept_len)
    got = {}
    for name, fit in (("resample", resample), ("proposal", proposal)):
        updated, refit = simulated_update(fit, query, accept, per_token, again, seed,
                                            (np.zeros(n), np.ones(n), None))
        assert updated is not None and refit is False
        got[name] = updated(y, 0)
    for mine, theirs in zip(got["resample"], got["proposal"], strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_next_refit_candidates_on_a_reweighted_fit_weigh_its_proposals_draws(monkeypatch):
    """A candidate ``update`` would refit for (here a concurrency the fit never measured) is
    weighed by its likelihood alone; on a reweighted fit next weighed the resample, whose
    copies of a draw its ESS counted as distinct draws, while the candidates ``update`` would
    reweight for weigh the proposal's draws (d3d6e40). Here the proposal holds 400 distinct
    draws (noise_sd 0.01..0.5, every other parameter a point mass) and the resample 100 of
    them 4 times each (the 100 of least noise), no row added since (every proposal weight
    equal). By hand: the candidate's log tok/s is mu +- sqrt(noise_sd^2 + A) (A the
    discrepancy at its distance, the same in every draw), next's K simulated results are
    y_k = mu + sd[pick_k] eps_k from the resample's draws, and each weighs the proposal's draw
    s by Normal(y_k | mu, sd_s): ESS_k = 1 / sum(w^2) of those normalised weights. Before:
    ESS median 399.9 (min 399.3), the resample's 100 distinct draws counted as 400; after
    396.1 (381.1), the proposal's."""
    from ddtree_bayes.workflows.decisions.common import shared_components
    from ddtree_bayes.workflows.living import reweight as RW

    n, seed, k = 400, 7, 8
    proposal = b300_point_mass(n, 0.03, structure_sd=0.2)
    noise = np.linspace(0.01, 0.5, n)
    proposal = proposal.view(variables={**proposal.variables, "noise_sd": noise})
    index = np.repeat(np.arange(n // 4), 4)
    resample = proposal.view(
        meta={**proposal.meta, "fit_id": "the resample", "made_by": RW.MADE_BY_REWEIGHT,
              "reweight": {"proposal_fit": proposal.meta["fit_id"]}},
        variables={name: np.asarray(v)[index] for name, v in proposal.variables.items()})
    monkeypatch.setattr(RW, "proposal_of", lambda previous, models: (
        (proposal, None) if previous is resample else (previous, None)))
    query = D.parse_query(resample, "--hardware b300 --engine sglang --method ddtree "
                                    "--block 16 --budget 32 --accept 14")
    c16 = D.Candidate(P.resolve_scenario(resample, hardware="b300", gpus=8, engine="sglang",
                                         method="ar", block=None, budget=None,
                                         verify_tokens=None, context_tokens=0.0,
                                         concurrency=16), 1.0, "AR at C = 16")
    row = D.next_measurements(resample, query, [c16], k=k, seed=seed)["rows"][0]
    assert row["refit_needed"] is True
    # the candidate's likelihood: mu in every draw, sd^2 = noise_sd^2 + A
    parts = shared_components(proposal, c16.scenario, seed, anchor=False)[0]
    mu = math.log(1000.0 / parts["step"][0])
    a = parts["log_sd"] ** 2 - noise ** 2
    np.testing.assert_allclose(np.log(1000.0 / parts["step"]), mu, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a, a[0], rtol=1e-9)
    sd = np.sqrt(noise ** 2 + a[0])
    rng = np.random.default_rng([seed, 11])   # (next's simulated results)
    picks = rng.integers(0, n, size=k)
    eps = rng.standard_normal(k)
    y = mu + sd[index][picks] * eps
    ess = []
    for y_k in y:
        log_w = -0.5 * ((y_k - mu) / sd) ** 2 - np.log(sd)
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        ess.append(1.0 / np.sum(w ** 2))
    assert row["ess_median"] == pytest.approx(float(np.median(ess)), rel=1e-9)
    assert row["ess_min"] == pytest.approx(min(ess), rel=1e-9)
    assert row["ess_min"] < 390   # (the resample's copies: 399.3)


def test_a_reweighted_fits_start_is_weighted_as_update_weighted_it():
    """``update`` resampled a reweighted fit's draws by the Pareto-smoothed weights of its
    proposal's draws (reweight.importance_weights); next's refit candidates weighed those
    draws by the raw ratios instead, the heavier tail of which stands for another posterior
    than the fit holds. Here the proposal's noise_sd is spread over 0.001..0.3 and the fit
    added a repeat of the budget-8 run at 304 tok/s, whose likelihood grows as 1/noise_sd
    for the draws of least noise: smoothed, the weights' ESS is 890.2 (update's), raw 872.0.
    Now the start's weights are update's, digit for digit."""
    from ddtree_bayes.workflows.decisions.next_measurement import proposal_start
    from ddtree_bayes.workflows.living import reweight as RW

    n, seed = 4000, 7
    proposal = b300_point_mass(n, 0.03, structure_sd=0.2)
    noise = np.random.default_rng(1).uniform(0.001, 0.3, n)
    proposal = proposal.view(variables={**proposal.variables, "noise_sd": noise})
    text = proposal.data_csv + "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,,304,made up,\n"
    fit = proposal.view(meta={**proposal.meta, "made_by": RW.MADE_BY_REWEIGHT,
                              "fit_id": "the reweighted fit",
                              "reweight": {"proposal_fit": proposal.meta["fit_id"]}},
                        data_csv=text)
    query = D.parse_query(fit, "--hardware b300 --engine sglang --method ddtree --block 16 "
                               "--budget 32 --accept 14")
    start = proposal_start(fit, (proposal, None), query, seed)
    assert start is not None
    added, kept, gone = RW.pair_rows(proposal.measurements, fit.measurements)
    assert (len(added), gone) == (1, [])
    update = RW.importance_weights(proposal, proposal.measurements, fit.measurements, added,
                                   kept, model=fit.meta["model"], seed=seed)
    np.testing.assert_allclose(start.log_w, update.log_weights, rtol=0, atol=1e-12)
    assert update.weights_ess == pytest.approx(890.24, abs=0.01)


def test_the_table_says_when_the_query_itself_ranks_below_others_for_a_refit():
    """On the bundled fit, `next --query '--accept 14 --concurrency 4'` ranked the query itself
    fourth (E[90% width] 290 +- 5.5 against budget 128 at C = 1's 219): update would refit for
    it (a concurrency the fit never measured), so its E[width] reweights today's draws, while
    add + update + predict at the query's median (2060 tok/s for 4 streams) gave 484-548, a
    width of 64: the refit anchors the query to its own row. The row's note said "likely too
    wide"; nothing said what that does to the ranking. A line names the query's rank when
    its own row is flagged and ranked below another; none when it ranks first or is not
    flagged, or no row is the query's configuration."""
    from ddtree_bayes.cli.decisions import query_itself_note

    query = {"hardware": "b300", "gpus": 8, "engine": "sglang", "method": "ddtree",
             "block": 16, "budget": 32, "verify_tokens": 33, "context_tokens": 0.0,
             "concurrency": 4}
    itself = {**query, "accept_len": 14.0, "refit_needed": True}
    others = [{**query, "budget": b, "verify_tokens": b + 1, "concurrency": c,
               "refit_needed": c != 1} for b, c in ((128, 1), (32, 1), (32, 2))]
    assert query_itself_note({"query": query, "rows": [*others, itself]}) == (
        "the query itself ranks 4 of 4 by E[width]: `update` would refit for it, and the refit "
        "anchors the query's answer to its own new row (as predict anchors any measured "
        "configuration), which E[width], reweighting today's draws, cannot show: measured, "
        "it may narrow the query more than the candidates above it")
    assert query_itself_note({"query": query, "rows": [itself, *others]}) is None
    assert query_itself_note({"query": query, "rows": [
        *others, {**itself, "refit_needed": False}]}) is None
    assert query_itself_note({"query": query, "rows": others}) is None
    # a query at one stream says no concurrency (its rows say 1)
    one = {k: v for k, v in query.items() if k != "concurrency"}
    assert query_itself_note({"query": one, "rows": [
        others[0], {**itself, "concurrency": 1}]}).startswith("the query itself ranks 2 of 2")


def test_next_json_carries_the_query_itself_line(tmp_path, monkeypatch):
    """The line naming the query's own rank (query_itself_note) was printed in the table only:
    `next --format json` had nothing of it. Now `query_itself` holds its rank, the candidates
    ranked and the line; null when the table prints none. By hand: the point-mass fit ranks
    the query itself first of 10 (no line, null); moved last (as the bundled fit's C = 4 query
    ranks 4 of 14), it is rank 10 of 10, the line's words."""
    from ddtree_bayes.cli.decisions import query_itself_note
    from test_cli_support import make_point_mass_workdir, run_cli
    from test_json_schemas import validate_output

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05)
    argv = ("next", "--k", "4", "--query", "--accept 14 --concurrency 4", "--format", "json")
    code, out, err = run_cli(work, *argv)
    assert code == 0, err
    first = json.loads(out)
    validate_output("next", first)
    assert first["rows"][0]["why"] == "the query itself" and first["query_itself"] is None
    real = D.next_measurements

    def itself_last(*a, **kw):
        got = real(*a, **kw)
        return {**got, "rows": [*got["rows"][1:], got["rows"][0]]}

    monkeypatch.setattr(D, "next_measurements", itself_last)
    code, out, err = run_cli(work, *argv)
    assert code == 0, err
    last = json.loads(out)
    validate_output("next", last)
    assert len(last["rows"]) == 10
    assert last["query_itself"] == {"rank": 10, "candidates": 10,
                                    "note": query_itself_note(last)}
    assert last["query_itself"]["note"].startswith("the query itself ranks 10 of 10 by E[width]")
    code, text, err = run_cli(work, *argv[:-2])
    assert code == 0 and f"{last['query_itself']['note']}." in text.splitlines(), err



def test_next_and_predict_print_a_rate_below_10_alike():
    """predict's cells (``.2g``) dropped a trailing zero where next's kept it: 1.04 tok/s read
    "1" in predict and "1.0" in next, 3.0 read "3". One formatter below 10 tok/s: two
    significant digits, the trailing zero kept; above, next keeps its one decimal to 100."""
    from ddtree_bayes.cli.decisions import _n
    from ddtree_bayes.core.data import tok_text

    assert (tok_text(1.04), tok_text(3.0), tok_text(0.5), tok_text(9.94)) == (
        "1.0", "3.0", "0.50", "9.9")
    for x in (1.04, 3.0, 0.5, 9.94, 0.0317, 2.1e-05, 0.0, -1.0, -0.1):
        assert _n(x) == tok_text(x), x
    assert (_n(9.96), tok_text(9.96), _n(42.25), tok_text(42.25)) == ("10.0", "10", "42.2", "42")


def test_a_reduction_that_rounds_to_no_percent_keeps_a_decimal():
    """`next` printed a reduction of -1.0 tok/s of a 446 tok/s width as "-1.0 (-0%)": a
    widening of 1.0 / 446 = 0.224%. Where the whole percent rounds to 0 the cell keeps one
    decimal, "(-0.2%)"; whole percents and an exact 0 read as before."""
    from ddtree_bayes.cli.decisions import reduction_cell

    assert reduction_cell(-1.0, -1.0 / 446) == "-1.0 (-0.2%)"
    assert reduction_cell(1.0, 1.0 / 446) == "1.0 (0.2%)"
    assert reduction_cell(120.4, 120.4 / 446) == "120 (27%)"
    assert reduction_cell(0.0, 0.0) == "0 (0%)"
    assert reduction_cell(2.2, 2.2 / 446) == "2.2 (0.5%)"   # (0.49%: whole, "0")
    # (below 10 tok/s predict's cells: two significant digits, the trailing zero kept)
    assert reduction_cell(-0.1, -0.1 / 446) == "-0.10 (-0.02%)"

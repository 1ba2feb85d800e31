"""``predict --explain``: each row's predictive variance split among the step's terms, on the
very draws its interval is read from, each term saying where its draws come from (the brief:
"widen only where the physics is unknown, and say which term is prior-driven")."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.question import Flags, resolve
from ddtree_bayes.engine.testing import multi_model_draws, point_mass_draws
from test_cli_support import make_point_mass_workdir, run_cli
from test_json_schemas import validate_output

pytestmark = pytest.mark.fast


def var_log_uniform(a: float, b: float) -> float:
    """Var(log X), X ~ U(a, b), by hand: E log X = [x ln x - x] / (b - a), E (log X)^2 =
    [x ((ln x)^2 - 2 ln x + 2)] / (b - a)."""
    m1 = ((b * math.log(b) - b) - (a * math.log(a) - a)) / (b - a)
    m2 = ((b * (math.log(b) ** 2 - 2 * math.log(b) + 2))
          - (a * (math.log(a) ** 2 - 2 * math.log(a) + 2))) / (b - a)
    return m2 - m1 ** 2


def explained(draws, **flags):
    question = resolve(draws, Flags(**flags))
    with np.errstate(invalid="ignore", divide="ignore"):   # (as the CLI: a spread of 0 is 0/0)
        return P.predict_rows(draws, question, explain=True)


def terms(row) -> dict:
    return {t["term"]: t for t in row["explain"]["terms"]}


def test_the_split_is_of_the_rows_own_draws_and_adds_up_by_hand():
    """The point-mass fit: every parameter one value (SGLang's step 20 ms: a 16 ms target
    step, an overhead fraction of 0.2, 4 ms), here with a run-to-run sd of 0.05, so only the
    acceptance and the run noise vary. A given acceptance leaves all the variance to the
    noise; U(12, 16) splits it as Var(log U) : 0.05^2, computed by hand."""
    d = point_mass_draws(n=20_000, noise_sd=0.05)
    (given,) = explained(d, engines=("sglang",), accept="12")
    t = terms(given)
    assert t["acceptance"]["share"] == pytest.approx(0.0, abs=1e-9)
    assert t["noise and discrepancy"]["share"] == pytest.approx(1.0, abs=1e-6)
    assert t["target step"]["median"] == pytest.approx(16.0) and t["target step"]["unit"] == "ms"
    assert t["speculative overhead"]["median"] == pytest.approx(4.0)
    assert given["explain"]["r2"] == pytest.approx(1.0, abs=1e-6)
    # the row's own draws: its variance is the noise's, sd^2
    sd = t["noise and discrepancy"]["median"]
    assert sd == pytest.approx(0.05)
    assert given["explain"]["var_log_tok_s"] == pytest.approx(sd ** 2, rel=0.05)
    uniform = explained(d, engines=("sglang",), accept="12:16")[-1]   # (12, ..., 16, U)
    assert uniform["accept"] == "U(12,16)"
    u = terms(uniform)
    va = var_log_uniform(12.0, 16.0)   # (a midpoint sum of 200,000 slices: 0.0068683)
    assert va == pytest.approx(0.0068683, abs=1e-7)
    assert u["acceptance"]["share"] == pytest.approx(va / (va + sd ** 2), abs=0.02)
    assert u["acceptance"]["share"] + u["noise and discrepancy"]["share"] == pytest.approx(
        1.0, abs=1e-6)
    assert u["acceptance"]["lo"] == pytest.approx(12.2, abs=0.05)   # the 5th percentile
    assert u["acceptance"]["from"] == "given range, uniform"
    assert t["acceptance"]["from"] == "given (no spread)"
    # the numbers of the answer itself are unchanged by --explain
    plain = P.predict_rows(d, resolve(d, Flags(engines=("sglang",), accept="12:16")))
    assert {k: v for k, v in uniform.items() if k != "explain"} == plain[-1]


def test_a_term_that_does_not_vary_has_a_share_of_exactly_zero():
    """A given --accept 12 on the point-mass fit: the acceptance, target step and overhead
    are one value each, so their shares are 0 exactly and the noise's 1 (the regression
    left 9.25e-18 on each and 0.9999999999999998 on the noise, printed as 9e-18)."""
    d = point_mass_draws(n=20_000, noise_sd=0.05)
    for accept in ("12", "14", "2.5"):
        (given,) = explained(d, engines=("sglang",), accept=accept)
        t = terms(given)
        assert [t[k]["share"] for k in ("acceptance", "target step", "speculative overhead",
                                        "noise and discrepancy")] == [0.0, 0.0, 0.0, 1.0]
    # a range still splits by hand (Var(log U(12,16)) : 0.05^2), nothing rounded away
    (*_, u) = explained(d, engines=("sglang",), accept="12:16")
    va = var_log_uniform(12, 16)
    assert terms(u)["acceptance"]["share"] == pytest.approx(va / (va + 0.05 ** 2), abs=0.02)
    assert 0 < terms(u)["acceptance"]["share"] < 1


def test_the_target_step_of_an_unmeasured_system_names_the_system_it_is_transferred_from():
    """--explain's target-step column of a system never measured said "transferred (prior-
    driven roofline and transfer spread)" without saying from where, where predict's warning
    and optimize's footnote name the system whose rows stand behind the step
    (engine/transfer.rows_behind). The point-mass fit measured b300x8 alone, so h200x8 (and
    one RTX PRO 6000) is transferred from b300x8, the reference by hand; its own rows stay
    "fitted to b300x8's rows"."""
    d = point_mass_draws()
    for hardware, gpus in (("h200", 8), ("rtx-pro-6000", 1)):
        (row,) = explained(d, hardware=hardware, gpus=gpus, engines=("sglang",), accept="14")
        assert terms(row)["target step"]["from"] == (
            f"{hardware}x{gpus} not measured: transferred from b300x8 (prior-driven roofline "
            "and transfer spread)")
    (own,) = explained(d, engines=("sglang",), budget=8, accept="6")
    assert terms(own)["target step"]["from"] == "fitted to b300x8's rows"


def test_each_term_says_where_its_draws_come_from():
    """Fitted to the measured system's rows (past the most tokens a row verified: the
    roofline's, partly prior-driven), the measured group's overhead, native's overhead
    scaled by the relation's prior (no native row), and a system never measured
    (transferred)."""
    d = point_mass_draws()
    rows = explained(d, accept="14")
    sglang, native = (terms(r) for r in rows)
    assert sglang["target step"]["from"] == (
        "fitted to b300x8's rows (at most 9 tokens verified a step); 33 is the roofline's "
        "growth past them (compute knee, experts: partly prior-driven)")
    assert sglang["speculative overhead"]["from"] == "fitted to its group's rows"
    assert native["speculative overhead"]["from"] == (
        "fitted to its group's rows, x (1 - reduction[native]): the relation's prior "
        "(prior-driven)")
    (at_budget_8,) = explained(d, engines=("sglang",), budget=8, accept="6")
    assert terms(at_budget_8)["target step"]["from"] == "fitted to b300x8's rows"
    assert terms(at_budget_8)["speculative overhead"]["from"] == "fitted to its group's rows"
    m = multi_model_draws()
    (h200,) = explained(m, model="kimi-k2.6", hardware="h200", gpus=8, engines=("sglang",),
                        accept="14")
    assert terms(h200)["target step"]["from"] == (
        "kimi-k2.6@h200x8 not measured: from the pair roofline, learned across the measured "
        "pairs (prior-driven roofline and pair scatter)")
    (ar,) = explained(m, model="llama-3.1-8b-instruct", hardware="h100", gpus=1,
                      engines=("vllm",), method="ar", accept="1")
    assert terms(ar)["speculative overhead"]["from"] == "none: autoregressive"
    from ddtree_bayes.cli.predict import explain_lines

    assert "  1 token  " in "\n".join(explain_lines([ar], 0.9))   # (not "1 tokens")
    assert terms(ar)["speculative overhead"]["share"] == pytest.approx(0.0, abs=1e-9)


def test_a_measured_group_asked_past_its_rows_says_whose_cost_prices_the_rest():
    """The structured form: the bundled B300 DDTree group measured one tree (budget 8: 8 tree
    nodes, one drafter pass), so its own per-node cost is not identified (it takes the
    population's, engine/model.py): a budget-32 question's 32 nodes, or budget 8 at C = 8
    (8 streams' trees: 64 nodes), are priced past its rows by that population cost."""
    from test_engine_effects import structured_engine_fit

    d = structured_engine_fit()
    d.variables["noise_sd"] = np.full(d.n_draws, 0.02)   # (a scatter: no 0 / 0 in the anchor)
    (at_8,) = explained(d, engines=("sglang",), budget=8, accept="6")
    assert terms(at_8)["speculative overhead"]["from"] == "fitted to its group's rows"
    (at_32,) = explained(d, engines=("sglang",), accept="14")
    assert terms(at_32)["speculative overhead"]["from"] == (
        "fitted to its group's rows (at most 8 tree nodes a step; 32 here: the cost of the "
        "rest is the population's per-node cost, prior- and corpus-driven)")
    at_c8 = explained(d, engines=("sglang",), budget=8, accept="6", concurrency=(1, 8))
    assert terms(at_c8[0])["speculative overhead"]["from"] == "fitted to its group's rows"
    assert terms(at_c8[1])["speculative overhead"]["from"] == (
        "fitted to its group's rows (at most 8 tree nodes a step; 64 here: the cost of the "
        "rest is the population's per-node cost, prior- and corpus-driven)")


def test_the_population_is_called_corpus_driven_only_with_another_pairs_groups():
    """A new user's fit of one AR row was told its overhead is "prior- and corpus-driven":
    there was no corpus in it. The population of groups is the corpus's only when the fit
    measured a speculative group on another model or system. The point mass (Kimi K2.6: an
    SGLang DDTree group on b300x8, a vLLM EAGLE-3 group on rtx-pro-6000x8) asked SGLang
    EAGLE-3 on b300x8: the RTX PRO 6000 group is another system's (corpus); with the B300
    rows alone, the population is learned from b300x8's own group; with the AR rows alone,
    from no group at all."""
    d = point_mass_draws()
    lines = d.data_csv.splitlines(True)
    only_b300 = d.view(data_csv="".join([lines[0]] + [x for x in lines[1:] if ",b300," in x]))
    only_ar = d.view(data_csv="".join([lines[0]] + [x for x in lines[1:] if ",ar," in x]))
    assert {(r.system, r.method) for r in only_b300.measurements.rows} == {
        ("b300x8", "ar"), ("b300x8", "ddtree")}
    assert {r.method for r in only_ar.measurements.rows} == {"ar"}
    q = dict(engines=("sglang",), method="eagle3", block=3, accept="3")
    said = [terms(explained(f, **q)[0])["speculative overhead"]["from"]
            for f in (d, only_b300, only_ar)]
    assert said == [
        "no group measured: drawn from the population of groups (prior- and corpus-driven)",
        "no group measured: drawn from the population of groups (prior-driven, learned from "
        "b300x8's groups alone: no other model or system measured one)",
        "no group measured: drawn from the population of groups (prior-driven: the fit has no "
        "speculative row)"]
    # a fit of several models: Llama on its H100 takes Kimi's B300 group (another model)
    m = multi_model_draws()
    (llama,) = explained(m, model="llama-3.1-8b-instruct", hardware="h100", gpus=1,
                         engines=("vllm",), method="eagle3", block=3, accept="2.5")
    assert terms(llama)["speculative overhead"]["from"] == (
        "no group measured: drawn from the population of groups (prior- and corpus-driven)")
    # a measured group asked past its rows: the population's per-node cost, said the same way
    from test_engine_effects import structured_engine_fit

    e = structured_engine_fit()
    e.variables["noise_sd"] = np.full(e.n_draws, 0.02)
    b300 = e.view(data_csv="".join([lines[0]] + [x for x in lines[1:] if ",b300," in x]))
    assert terms(explained(b300, engines=("sglang",), accept="14")[0])[
        "speculative overhead"]["from"] == (
        "fitted to its group's rows (at most 8 tree nodes a step; 32 here: the cost of the rest "
        "is the population's per-node cost, prior-driven, learned from b300x8's groups alone: "
        "no other model or system measured one)")


def test_a_dense_models_target_step_names_no_experts():
    """A walkthrough on Gemma 3 27B (dense; two AR rows on one H100) asked a draft-model chain
    of depth 4 with --explain: "fitted to gemma-3-27b-it@h100x1's rows (at most 1 tokens
    verified a step); 5 is the roofline's growth past them (compute knee, experts: partly
    prior-driven)". A dense model has no experts for the growth to come from, and one token is
    no "tokens": Llama-3.1-8B (dense, one AR row on one H100) says the compute knee alone; an
    MoE (Kimi K2.6) keeps both."""
    m = multi_model_draws()
    (eagle,) = explained(m, model="llama-3.1-8b-instruct", hardware="h100", gpus=1,
                         engines=("vllm",), method="eagle3", block=3, accept="2.5")
    assert terms(eagle)["target step"]["from"] == (
        "fitted to llama-3.1-8b-instruct@h100x1's rows (at most 1 token verified a step); 4 "
        "is the roofline's growth past them (compute knee: partly prior-driven)")
    (kimi,) = explained(m, model="kimi-k2.6", hardware="b300", gpus=8, engines=("sglang",),
                        accept="14")
    assert terms(kimi)["target step"]["from"] == (
        "fitted to kimi-k2.6@b300x8's rows (at most 9 tokens verified a step); 33 is the "
        "roofline's growth past them (compute knee, experts: partly prior-driven)")


def test_explain_of_a_model_average_is_refused():
    d = point_mass_draws()
    with pytest.raises(QueryError, match="--explain splits one fit's draws"):
        P.predict_rows(d, resolve(d, Flags(accept="14")), mixture=[(d, 1.0)], explain=True)


def test_the_cli_prints_the_split_and_its_json_fits_the_schema(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--accept", "12:16", "--engine", "sglang",
                             "--explain")
    assert code == 0, err
    lines = out.splitlines()
    top = lines.index("why the intervals are as wide as they are (shares of the variance of "
                      "log tok/s, draw by draw):")
    assert lines[top + 1].split() == ["engine", "accept", "term", "share", "median", "90%",
                                      "from"]
    assert any(x.startswith("sglang  U(12,16)  acceptance ") for x in lines[top + 3:])
    code, out, err = run_cli(work, "predict", "--accept", "14", "--engine", "sglang",
                             "--concurrency", "1,8", "--explain")
    assert code == 0, err
    lines = out.splitlines()
    top = next(i for i, x in enumerate(lines) if x.startswith("why the intervals"))
    assert lines[top + 1].split()[:4] == ["engine", "accept", "C", "term"]
    assert lines[top + 3].startswith("sglang  14      1  acceptance ")
    assert lines[top + 7].startswith("sglang  14      8  acceptance ")
    assert "(memory-read cap)" not in out   # (the point mass: nothing varies, nothing capped)
    code, out, err = run_cli(work, "predict", "--accept", "12:16", "--engine", "sglang",
                             "--explain", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("predict", payload)
    u = payload["rows"][-1]
    assert u["accept_kind"] == "uniform"
    shares = [t["share"] for t in u["explain"]["terms"]]
    # the point mass: only the acceptance varies, so it takes all of it
    assert shares == pytest.approx([1.0, 0.0, 0.0, 0.0], abs=1e-6)
    assert sum(shares) == pytest.approx(u["explain"]["r2"], abs=1e-9)
    code, out, err = run_cli(work, "predict", "--accept", "14", "--format", "json")
    assert "explain" not in json.loads(out)["rows"][0]   # only when asked
    assert np.isfinite(shares).all()


def test_the_api_takes_explain_and_a_list_of_acceptances():
    """The Python API: ``explain=True`` gives each row's split, as --explain; ``accept`` as a
    list of numbers (refused before: "'[12, 14]' is not a number, list or range") is the
    same question as "12,14"."""
    d = point_mass_draws()
    listed = P.predict(d, engines=["sglang"], accept=[12, 14])
    assert [r["median"] for r in listed] == [r["median"] for r in P.predict(
        d, engines=["sglang"], accept="12,14")] == pytest.approx([600.0, 700.0])
    (row,) = P.predict(d, engines=["sglang"], accept=14, explain=True)
    assert [t["term"] for t in row["explain"]["terms"]] == [
        "acceptance", "target step", "speculative overhead", "noise and discrepancy"]


def test_the_split_of_each_concurrency_says_its_c(tmp_path):
    """`predict --concurrency 1,16 --explain` printed two blocks both headed "sglang  14",
    with different shares (on the bundled fit the target step 66% at C = 1, 22% at C = 16)
    and nothing saying which C each was. Each row's block names its C, as the answer's
    table does."""
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--accept", "14", "--engine", "sglang",
                             "--concurrency", "1,4", "--explain")
    assert code == 0, err
    lines = out.splitlines()
    why = ("why the intervals are as wide as they are (shares of the variance of log tok/s, "
           "draw by draw):")
    top = lines.index(why)
    assert lines[top + 1].split() == ["engine", "accept", "C", "term", "share", "median", "90%",
                                      "from"]
    firsts = [x.split()[:4] for x in lines[top + 3:] if x.startswith("sglang")]
    assert firsts == [["sglang", "14", "1", "acceptance"], ["sglang", "14", "4", "acceptance"]]
    code, out, err = run_cli(work, "predict", "--accept", "14", "--engine", "sglang",
                             "--explain")
    assert code == 0, err
    lines = out.splitlines()
    top = lines.index(why)
    assert lines[top + 1].split()[:3] == ["engine", "accept", "term"]   # (no --concurrency)


def test_a_context_the_system_never_measured_is_said_prior_driven():
    """`predict --accept 14 --engine sglang --context 131072 --explain` on the bundled fit gave
    the target step 83% of the variance (92.6 ms, 90% 30.4-483) "fitted to b300x8's rows",
    though every b300x8 row is at context 0: its context cost per token there is the prior's
    (predict's own warning: ctx_ms_per_unit[b300x8], prior-driven). The source says so; with
    a b300x8 row at 65536 a context up to it stays fitted, and 131072 is extrapolated."""
    d = point_mass_draws()
    (b300,) = explained(d, engines=("sglang",), budget=8, accept="6", context="131072")
    assert terms(b300)["target step"]["from"] == (
        "fitted to b300x8's rows; their contexts reach 0: the context term at 131072 is the "
        "prior's (ctx_ms_per_unit[b300x8], prior-driven)")
    (short,) = explained(d, engines=("sglang",), budget=8, accept="6")   # (context 0)
    assert terms(short)["target step"]["from"] == "fitted to b300x8's rows"
    ddtree = "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,,303,"
    assert d.data_csv.count(ddtree) == 1
    long = d.view(data_csv=d.data_csv.replace(ddtree, ddtree.replace(",,303,", ",65536,303,")))
    (at,) = explained(long, engines=("sglang",), budget=8, accept="6", context="65536")
    assert terms(at)["target step"]["from"] == "fitted to b300x8's rows"
    (far,) = explained(long, engines=("sglang",), budget=8, accept="6", context="131072")
    assert terms(far)["target step"]["from"] == (
        "fitted to b300x8's rows; their contexts reach 65536: the context term at 131072 is "
        "extrapolated linearly past them")


def test_an_engine_relation_measured_by_rows_is_said_fitted_to_them():
    """native's overhead is (1 - reduction[native]) x SGLang's group's. With no native row
    the reduction is its prior's, and the source says so; with one (a native DDTree row on
    b300x8) it said only "fitted to its group's rows", as if native's overhead were the
    group's own. It names the relation and the rows that fit it."""
    d = point_mass_draws()
    native = "kimi-k2.6,b300,8,native,ddtree,8,8,9,4.4,,330,x,\n"
    v = d.view(data_csv=d.data_csv.rstrip("\n") + "\n" + native)
    (row,) = explained(v, engines=("native",), accept="14")
    assert terms(row)["speculative overhead"]["from"] == (
        "fitted to its group's rows, x (1 - reduction[native]): fitted to native's 1 row")
    (sglang,) = explained(v, engines=("sglang",), accept="14")
    assert terms(sglang)["speculative overhead"]["from"] == "fitted to its group's rows"
    # a native AR row alone has no overhead to scale: the reduction stays the prior's (it was
    # said fitted, "prior-driven" dropped, by any native row)
    ar = d.view(data_csv=d.data_csv.rstrip("\n") + "\nkimi-k2.6,b300,8,native,ar,,,1,1.0,,140,x,\n")
    (row,) = explained(ar, engines=("native",), accept="14")
    assert terms(row)["speculative overhead"]["from"] == (
        "fitted to its group's rows, x (1 - reduction[native]): the relation's prior "
        "(prior-driven)")


def test_the_csv_has_a_column_per_term(tmp_path):
    """`--explain --format csv` wrote the terms as one cell of Python's repr (single quotes,
    no column per share); each term's fields are now columns."""
    import csv
    import io

    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--accept", "12:16", "--engine", "sglang",
                             "--explain", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    u = rows[-1]
    assert u["accept_kind"] == "uniform" and "explain_terms" not in u
    assert float(u["explain_terms_acceptance_share"]) == pytest.approx(1.0, abs=1e-6)
    assert u["explain_terms_speculative_overhead_from"] == "fitted to its group's rows"
    assert float(u["explain_r2"]) == pytest.approx(1.0, abs=1e-6)


def test_a_system_whose_compute_eff_median_exceeds_1_is_said_priced_at_the_wrong_precision():
    """compute_eff is the share of the dense peak (at the card's compute precision) a verify
    pass reaches: a pass cannot beat that peak, yet the public corpus's syv-ai RTX 3090 sat at
    a median of 1.09 (docs/validation.md, "What the compute knee depends on") and nothing said
    so. The model is left unbounded (a bound would move every roofline fit's draws); the
    target step's words say it instead. Eight draws 0.6 ... 1.5: median (1.0 + 1.2) / 2 = 1.1
    by hand; 0.6 ... 1.4 with 1.0 in the middle: median 1.0, not above 1, nothing said; a
    system never measured (h200x8, drawing its own from the population) says nothing."""
    d = point_mass_draws()
    d.variables["compute_eff"] = np.array([[x] for x in
                                           (0.6, 0.7, 0.8, 1.0, 1.2, 1.3, 1.4, 1.5)])
    (own,) = explained(d, engines=("sglang",), budget=8, accept="6")
    assert terms(own)["target step"]["from"] == (
        "fitted to b300x8's rows; compute_eff[b300x8] median 1.10 > 1: its verify passes beat "
        "the dense peak at the card's compute precision, so that precision is likely not the "
        "deployment's (check the card's compute_dtype)")
    (h200,) = explained(d, hardware="h200", gpus=8, engines=("sglang",), accept="14")
    assert "compute_eff" not in terms(h200)["target step"]["from"]
    d.variables["compute_eff"] = np.array([[x] for x in
                                           (0.6, 0.7, 0.8, 1.0, 1.0, 1.2, 1.3, 1.4)])
    (at_1,) = explained(d, engines=("sglang",), budget=8, accept="6")
    assert terms(at_1)["target step"]["from"] == "fitted to b300x8's rows"

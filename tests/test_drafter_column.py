"""The optional ``drafter`` column of a measurement file: which drafter card a run drafted
with, when it is not its target's default card for the method (two EAGLE-3 heads, Kimi K2.5's
and K2.6's, both run against Kimi K2.6 in vLLM on 8x RTX PRO 6000)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.drafters import (
    DRAFTER_COLUMNS,
    check_row_drafters,
    drafter_for,
    drafter_table,
    load_drafter_cards,
    row_drafter,
)
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.likelihood import group_rows
from ddtree_bayes.core.paths import bundled
from test_cli_support import copy_bundled_data, run_cli

HEADER = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
          "context_tokens,tok_s,source,notes,drafter\n")
AR = "kimi-k2.6,rtx-pro-6000,8,vllm,ar,,,1,1.0,0,91.5,s,,\n"
K26 = "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,,0,125.0,s,,\n"
K25 = "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,,0,112.5,s,,test/k25-head\n"
#: a drafter-card file with a second, not-default, EAGLE-3 head for kimi-k2.6
CARDS = (",".join(DRAFTER_COLUMNS) + ",default\n"
         "test/k26-head,kimi-k2.6,eagle3,eagle3_head,1,0.9,0.15,1,s,\n"
         "test/k25-head,kimi-k2.6,eagle3,eagle3_head,1,1.8,0.15,1,s,no\n")


@pytest.fixture(scope="module")
def hw():
    return load_hardware(bundled("hardware.csv"))


def test_a_row_names_its_drafter_and_a_blank_one_is_the_default(hw):
    data = load_measurements("m.csv", hw, text=HEADER + AR + K26 + K25)
    assert [m.drafter for m in data.rows] == [None, None, "test/k25-head"]
    # the K2.5 head's row is another configuration than the default head's (same shape)
    codes, _ = group_rows(data.rows)
    assert codes.tolist() == [0, 1, 2]


def test_a_file_without_the_column_reads_as_before(hw):
    text = HEADER.replace(",drafter", "") + AR[:-2] + "\n"
    assert load_measurements("m.csv", hw, text=text).rows[0].drafter is None


def test_an_autoregressive_row_that_names_a_drafter_is_refused(hw):
    with pytest.raises(DataError) as err:
        load_measurements("m.csv", hw, text=HEADER + AR.replace(",,\n", ",,test/k25-head\n"))
    assert str(err.value).startswith("m.csv, row 2, column 'drafter': an autoregressive row "
                                     "drafts nothing")


def test_cards_one_default_per_target_and_method_others_named_only():
    cards = load_drafter_cards("d.csv", CARDS)
    assert [c.default for c in cards] == [True, False]
    assert drafter_for(cards, "kimi-k2.6", "eagle3").drafter == "test/k26-head"
    assert row_drafter(cards, "kimi-k2.6", "eagle3", None).drafter == "test/k26-head"
    assert row_drafter(cards, "kimi-k2.6", "eagle3", "test/k25-head").params_active_b == 1.8
    # only the not-default head: no default card (a blank row is priced by a generic drafter)
    alone = load_drafter_cards("d.csv", CARDS.replace(
        "test/k26-head,kimi-k2.6,eagle3,eagle3_head,1,0.9,0.15,1,s,\n", ""))
    assert drafter_for(alone, "kimi-k2.6", "eagle3") is None
    # an own not-default card does not take the target's method over from a built-in card
    own = drafter_table("drafters.csv", CARDS.replace("kimi-k2.6", "qwen3-30b-a3b").replace(
        "test/k26-head,qwen3-30b-a3b,eagle3,eagle3_head,1,0.9,0.15,1,s,\n", ""))
    assert drafter_for(own, "qwen3-30b-a3b", "eagle3").drafter == \
        "zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead"


def test_an_own_default_card_leaves_a_built_in_named_only_card_its_methods(hw):
    """An own default card for kimi-k2.6's eagle3 (`card add --target kimi-k2.6` of the K2.6
    head) took eagle3 over from every built-in card of that target and method, the K2.5 head's
    too (default no, which blank rows never used): the card vanished from the table, and the
    bundled rows naming it were refused ("no drafter card 'lightseekorg/kimi-k2.5-eagle3-mla'").
    A card only rows name keeps its methods; a built-in default card still gives them up."""
    own = CARDS.replace("test/k25-head,kimi-k2.6,eagle3,eagle3_head,1,1.8,0.15,1,s,no\n", "")
    cards = drafter_table("drafters.csv", own)
    assert drafter_for(cards, "kimi-k2.6", "eagle3").drafter == "test/k26-head"
    (k25,) = [c for c in cards if c.drafter == "lightseekorg/kimi-k2.5-eagle3-mla"]
    assert (k25.methods, k25.default) == (("eagle3",), False)
    from ddtree_bayes.core.config import load_priors

    path = Path(__file__).resolve().parents[1] / "data" / "examples" / "public_multi_model.csv"
    data = load_measurements(str(path), hw, methods=load_priors(bundled("priors.toml")).methods)
    check_row_drafters(data.rows, cards, data.path)
    # (a built-in default card: its method taken over, as before)
    qwen = drafter_table("drafters.csv", own.replace("kimi-k2.6", "qwen3-30b-a3b"))
    assert drafter_for(qwen, "qwen3-30b-a3b", "eagle3").drafter == "test/k26-head"
    assert not any(c.drafter.startswith("zhuyksir/") for c in qwen)


def test_two_default_cards_of_one_target_and_method_are_refused():
    with pytest.raises(DataError) as err:
        load_drafter_cards("d.csv", CARDS.replace(",s,no\n", ",s,\n"))
    assert str(err.value).startswith("d.csv, row 3, column 'default': a second default drafter "
                                     "card for 'kimi-k2.6' eagle3")
    with pytest.raises(DataError) as err:
        load_drafter_cards("d.csv", CARDS.replace("test/k25-head", "test/k26-head"))
    assert "row 3, column 'drafter': a second drafter card named 'test/k26-head'" in str(err.value)
    with pytest.raises(DataError) as err:
        load_drafter_cards("d.csv", CARDS.replace(",s,no\n", ",s,maybe\n"))
    assert "column 'default': default must be yes or no, got 'maybe'" in str(err.value)


@pytest.mark.parametrize(("cell", "problem"), [
    ("test/nope", "no drafter card 'test/nope'"),
    ("test/mtp-head", "drafter 'test/mtp-head' drafts mtp, not eagle3"),
    ("test/other-head", "drafter 'test/other-head' drafts for qwen3-8b, not kimi-k2.6"),
])
def test_a_row_naming_a_drafter_that_does_not_serve_it_is_refused(hw, cell, problem):
    cards = load_drafter_cards("d.csv", CARDS
                               + "test/mtp-head,kimi-k2.6,mtp,mtp_module,1,0.9,0.15,1,s,no\n"
                               + "test/other-head,qwen3-8b,eagle3,eagle3_head,1,0.9,0.1,1,s,\n")
    data = load_measurements("m.csv", hw, text=HEADER + AR + K26 + K25.replace("test/k25-head",
                                                                               cell))
    with pytest.raises(DataError) as err:
        check_row_drafters(data.rows, cards, data.path)
    assert str(err.value).startswith(f"m.csv, row 4, column 'drafter': {problem} (fix: ")


def test_a_row_naming_its_default_drafter_card_is_refused_blank_is_that_card(hw):
    """A blank drafter column is the default card: a row naming that card was another
    acceptance group and configuration (``kimi-k2.6/eagle3/b3/B3 drafter test/k26-head``
    beside ``kimi-k2.6/eagle3/b3/B3``), while a query's ``--drafter test/k26-head`` asked the
    blank rows' (scenario.drafter_asked): one drafter read two ways. One spelling only."""
    cards = load_drafter_cards("d.csv", CARDS)
    named = K26.replace("125.0,s,,", "124.0,s,,test/k26-head")
    data = load_measurements("m.csv", hw, text=HEADER + AR + K26 + named)
    with pytest.raises(DataError) as err:
        check_row_drafters(data.rows, cards, data.path)
    assert str(err.value).startswith(
        "m.csv, row 4, column 'drafter': drafter 'test/k26-head' is kimi-k2.6's default eagle3 "
        "card, which a blank drafter column names (fix: clear the drafter")
    # a deployment card of the target (its quantisation) has the same default card
    deployed = named.replace("kimi-k2.6,", "kimi-k2.6-int4,")
    with pytest.raises(DataError) as err:
        check_row_drafters(load_measurements("m.csv", hw, text=HEADER + deployed).rows, cards,
                           "m.csv")
    assert "is kimi-k2.6-int4's default eagle3 card" in str(err.value)
    # the other, not-default head is still named
    check_row_drafters(load_measurements("m.csv", hw, text=HEADER + K26 + K25).rows, cards,
                       "m.csv")


def _workdir(tmp_path: Path, rows: str) -> Path:
    work = copy_bundled_data(tmp_path, writable=True)
    (work / "data" / "drafters.csv").write_text(CARDS)
    text = (work / "data" / "measurements.csv").read_text()
    (work / "data" / "measurements.csv").write_text(text + rows)
    return work


def test_fit_refuses_a_row_naming_an_unknown_drafter_in_one_line(tmp_path):
    work = copy_bundled_data(tmp_path, writable=True)
    (work / "data" / "drafters.csv").write_text(CARDS)
    data = work / "data" / "measurements.csv"
    lines = data.read_text().splitlines()
    data.write_text("\n".join([lines[0] + ",drafter"] + [line + "," for line in lines[1:]]
                              + [K25.replace("test/k25-head", "test/nope").rstrip("\n")]) + "\n")
    code, out, err = run_cli(work, "fit")
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "measurements.csv, row 11, column 'drafter': no drafter card 'test/nope'" in err
    # (the built-in K2.5 head, default no, serves kimi-k2.6 beside the own default card)
    assert "name one of lightseekorg/kimi-k2.5-eagle3-mla, test/k25-head, test/k26-head" in err
    assert not (work / "fits").exists()


def test_add_drafter_writes_the_column_and_refuses_a_drafter_of_another_method(tmp_path):
    work = _workdir(tmp_path, "")
    data = work / "data" / "measurements.csv"
    before = data.read_text()
    flags = ("add", "--hardware", "rtx-pro-6000", "--engine", "vllm", "--method", "eagle3",
             "--block", "3", "--accept", "infer", "--context", "0", "--tok-s", "112.5",
             "--source", "s")
    code, out, err = run_cli(work, *flags, "--drafter", "test/nope")
    assert code == 2 and err.count("\n") == 1
    assert "column 'drafter': no drafter card 'test/nope'" in err
    assert data.read_text() == before
    code, out, err = run_cli(work, *flags, "--drafter", "test/k25-head", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["drafter"] == "test/k25-head"
    lines = data.read_text().splitlines()
    assert lines[0].endswith(",drafter") and lines[1].endswith(",")
    assert lines[-1].endswith(",test/k25-head")
    assert load_measurements(str(data), load_hardware(bundled("hardware.csv"))
                             ).rows[-1].drafter == "test/k25-head"


def test_a_fit_stored_before_the_default_column_sees_no_changed_drafter_card(tmp_path):
    """Its stored cards have no ``default`` key: the same cards as the built-in ones here."""
    import dataclasses

    from ddtree_bayes.engine.scenario import drafter_card_changes
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()   # (of kimi-k2.6: the cards of CARDS bear on it)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "drafters.csv").write_text(CARDS)
    old = []
    for card in drafter_table(tmp_path / "data" / "drafters.csv"):
        d = {**dataclasses.asdict(card), "methods": list(card.methods)}
        if d["default"]:   # (as a fit before the column stored it; it had no other kind)
            del d["default"]
        old.append(d)
    draws.meta["model"]["drafter_cards"] = old
    assert drafter_card_changes(draws, None, workdir=tmp_path) == []
    old[-1]["default"] = True   # (the K2.5 head stored as the default: it differs)
    assert "test/k25-head" in drafter_card_changes(draws, None, workdir=tmp_path)[0]
    # a card only rows name (default no), added since the fit, prices none of its answers
    # (its rows name none): not said; asked with --drafter it is
    draws.meta["model"]["drafter_cards"] = old[:-1]
    assert drafter_card_changes(draws, None, workdir=tmp_path) == []
    assert "test/k25-head" in drafter_card_changes(draws, [("kimi-k2.6", "eagle3")],
                                                   drafter="test/k25-head", workdir=tmp_path)[0]


# ------------------------------------------------------------------ acceptance groups
def _spec(hw, text: str):
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.spec import build_spec

    priors = load_priors(bundled("priors.toml"))
    data = load_measurements("m.csv", hw, text=text, methods=priors.methods)
    return build_spec(data, priors, hardware=hw,
                      drafters=load_drafter_cards("d.csv", CARDS))


def test_each_drafter_infers_its_own_acceptance_in_one_overhead_group(hw):
    spec = _spec(hw, HEADER + AR + K26 + K25 + K25.replace("112.5", "113.0"))
    assert [g.label for g in spec.accept_groups] == [
        "kimi-k2.6/eagle3/b3/B3", "kimi-k2.6/eagle3/b3/B3 drafter test/k25-head"]
    assert [g.rows for g in spec.accept_groups] == [(3,), (4, 5)]
    assert [g.drafter for g in spec.accept_groups] == [None, "test/k25-head"]
    assert spec.row_accept_group.tolist() == [-1, 0, 1, 1]
    # the speculative overhead is the system's, engine's and method's: one group for both
    assert spec.groups == ("rtx-pro-6000x8/vllm/eagle3",)
    meta = [g.as_meta() for g in spec.accept_groups]
    assert [m["drafter"] for m in meta] == [None, "test/k25-head"]


def test_a_named_drafters_group_does_not_take_the_default_drafters_acceptance_prior(hw):
    """The bundled priors' [[acceptance]] entry for Kimi K2.6 EAGLE-3 block 3, truncnormal(1.94,
    0.15), is the K2.6 head's server accept rate (the Turin retest, 0.31-0.32); an entry names
    no drafter. The K2.5 head's group took it as its prior too, holding its inferred acceptance
    within ~0.3 of the other head's, which the drafter column was to keep apart. A named
    drafter's group now has the physical range, Uniform(1, 4) at M = 4; the blank rows' group
    keeps the entry."""
    spec = _spec(hw, HEADER + AR + K26 + K25)
    blank, named = spec.accept_groups
    assert (blank.prior.dist, blank.prior.params["mu"], blank.prior.params["sigma"]) == (
        "truncnormal", 1.94, 0.15)
    assert blank.prior_from.startswith("[[acceptance]] model=kimi-k2.6 method=eagle3 block=3")
    assert (named.prior.dist, named.prior.params) == ("uniform", {"lower": 1.0, "upper": 4.0})
    assert named.prior_from == ("default uniform(lower=1, upper=4) (a drafter a row names: "
                                "no [[acceptance]] entry names it, and those without a drafter "
                                "are the default drafter's)")


def test_predict_drafter_does_not_answer_with_the_default_drafters_prior():
    """`predict --drafter` of a drafter whose acceptance the fit neither inferred nor measured
    on the system, only elsewhere, answered with the priors' [[acceptance]] entry, which is
    the default drafter's; now with its own rows' mean measured on the other system."""
    import dataclasses

    draws = _two_drafters_fit()
    text = draws.data_csv + ("kimi-k2.6,h200,8,sglang,eagle3,3,3,4,1.6,,150,test,,"
                             "test/k25-head\n")
    model = dict(draws.meta["model"])
    model["acceptance_groups"] = model["acceptance_groups"][:1]
    priors = draws.priors_toml + (
        '\n[[acceptance]]\nmodel = "kimi-k2.6"\nmethod = "eagle3"\nblock = 3\n'
        'dist = "truncnormal"\nmu = 1.94\nsigma = 0.15\nlower = 1.0\nupper = 4.0\n'
        'rationale = "the default head"\nsource = "test"\n')
    draws = dataclasses.replace(draws, data_csv=text, priors_toml=priors,
                                meta={**draws.meta, "model": model}, memo={})
    (source,) = _ask(draws, drafter="test/k25-head").asked[0].accept
    assert (source.kind, source.value) == ("measured", 1.6)
    # without --drafter: the default drafter's inferred acceptance, as before
    (source,) = _ask(draws).asked[0].accept
    assert (source.kind, source.group_index) == ("posterior", 0)


def test_a_stored_group_without_a_drafter_key_is_the_default_drafters():
    """A fit made before the drafter column stored groups without one: found as before, for
    the rows that name no drafter (and not for a named drafter)."""
    from ddtree_bayes.core import acceptance_latent as AL

    old = {"label": "kimi-k2.6/eagle3/b3/B3", "model": "kimi-k2.6", "method": "eagle3",
           "block": 3, "budget": 3, "rows": [9], "prior": {"dist": "uniform", "params": {
               "lower": 1.0, "upper": 4.0}}, "prior_from": "default"}
    meta = {"model": {"target_model": "kimi-k2.6", "acceptance_groups": [old]}}
    assert AL.find(meta, None, "eagle3", 3, 4) == (0, old)
    assert AL.find(meta, "kimi-k2.6", "eagle3", 3, 4, "test/k25-head") is None
    named = {**old, "label": old["label"] + " drafter test/k25-head", "drafter": "test/k25-head"}
    meta["model"]["acceptance_groups"] = [named, old]
    assert AL.find(meta, None, "eagle3", 3, 4) == (1, old)
    assert AL.find(meta, None, "eagle3", 3, 4, "test/k25-head") == (0, named)
    import numpy as np

    rows = AL.summarise(meta, {AL.NAME: np.array([[2.1, 1.9], [2.3, 1.95]])})
    assert [(r["group"], r["drafter"], round(r["median"], 6)) for r in rows] == [
        ("kimi-k2.6/eagle3/b3/B3 drafter test/k25-head", "test/k25-head", 2.2),
        ("kimi-k2.6/eagle3/b3/B3", None, 1.925)]


# ------------------------------------------------------------------ drafter passes
def test_a_named_drafters_passes_are_priced_from_its_own_card(hw):
    """The group's roofline is its default card's; the K2.5 head's configuration pays the
    group's per-pass multiple of its own card's roofline. On 8x RTX PRO 6000 (1.792 TB/s each,
    PCIe: 0.03 + 0.10 ms a layer, bw_eff 0.625), an EAGLE-3 head of 1 layer at 1 B/weight:
    0.9 B params -> 0.9 / (1.792 x 8) / 0.625 + 2 x 0.13 = 0.36045 ms; 1.8 B -> 0.46089 ms."""
    spec = _spec(hw, HEADER + AR + K26 + K25)
    assert spec.group_pass_roof_ms.tolist() == pytest.approx([0.36045], abs=5e-6)
    assert spec.config_pass_scale.tolist() == pytest.approx([1.0, 1.0, 0.46089 / 0.36045],
                                                            abs=5e-5)
    assert spec.config_pass_how == (
        "rtx-pro-6000x8/vllm/eagle3 drafter test/k25-head (row 4): 0.461 ms, 1.28x the group's "
        "(drafter card test/k25-head: 1.8 B parameters read per pass)",)
    # without a named drafter nothing changes: no scale at all (the model is the one before)
    assert _spec(hw, HEADER + AR + K26).config_pass_scale is None


# ------------------------------------------------------------------ predict --drafter
def _two_drafters_fit():
    """The structured point mass on 8x B300 (test_structure_model) whose stored rows gain two
    EAGLE-3 rows without accept_len, one per head, and whose fit inferred 2.0 for the default
    head's rows (row 4) and 1.7 for the K2.5 head's (row 5)."""
    import dataclasses

    import numpy as np

    from test_structure_model import structured_point_mass

    draws = structured_point_mass()
    lines = draws.data_csv.rstrip("\n").split("\n")
    text = "\n".join([lines[0] + ",drafter", *(ln + "," for ln in lines[1:]),
                      "kimi-k2.6,b300,8,sglang,eagle3,3,3,4,,,200,test,,",
                      "kimi-k2.6,b300,8,sglang,eagle3,3,3,4,,,180,test,,test/k25-head"]) + "\n"
    model = dict(draws.meta["model"])
    prior = {"dist": "uniform", "params": {"lower": 1.0, "upper": 4.0}}
    model["acceptance_groups"] = [
        {"label": "kimi-k2.6/eagle3/b3/B3", "model": "kimi-k2.6", "method": "eagle3",
         "drafter": None, "block": 3, "budget": 3, "rows": [4], "prior": prior,
         "prior_from": "default"},
        {"label": "kimi-k2.6/eagle3/b3/B3 drafter test/k25-head", "model": "kimi-k2.6",
         "method": "eagle3", "drafter": "test/k25-head", "block": 3, "budget": 3, "rows": [5],
         "prior": prior, "prior_from": "default"}]
    model["drafter_cards"] = [{**dataclasses.asdict(c), "methods": list(c.methods)}
                              for c in load_drafter_cards("d.csv", CARDS)]
    n = draws.n_draws
    variables = {**draws.variables,
                 "accept_latent": np.column_stack([np.full(n, 2.0), np.full(n, 1.7)])}
    return dataclasses.replace(draws, data_csv=text, meta={**draws.meta, "model": model},
                               variables=variables, memo={})


def _ask(draws, drafter=None, accept=None):
    from ddtree_bayes.engine.question import Flags, resolve

    return resolve(draws, Flags(hardware="b300", gpus=8, engines=("sglang",), method="eagle3",
                                block=3, drafter=drafter, accept=accept))


def test_predict_drafter_takes_the_named_drafters_inferred_acceptance_and_card():
    draws = _two_drafters_fit()
    q = _ask(draws, drafter="test/k25-head")
    (asked,) = q.asked
    (source,) = asked.accept
    assert (source.kind, source.group["label"], source.group_index) == (
        "posterior", "kimi-k2.6/eagle3/b3/B3 drafter test/k25-head", 1)
    assert asked.scenario.drafter.drafter == "test/k25-head"
    assert not any("--drafter" in w for w in q.warnings)
    # the default head named: the blank rows' acceptance
    (source,) = _ask(draws, drafter="test/k26-head").asked[0].accept
    assert (source.group["label"], source.group_index) == ("kimi-k2.6/eagle3/b3/B3", 0)


def test_predict_without_drafter_answers_for_the_default_drafter_and_says_so():
    q = _ask(_two_drafters_fit())
    (source,) = q.asked[0].accept
    assert (source.group["label"], source.group_index) == ("kimi-k2.6/eagle3/b3/B3", 0)
    assert q.asked[0].scenario.drafter is None
    assert [w for w in q.warnings if "--drafter" in w] == [
        "the fit's rows of this configuration name the drafter test/k25-head too, each with "
        "its own acceptance: this answer is the default drafter's (rows with a blank drafter "
        "column); ask --drafter test/k25-head for its"]
    # with --accept the acceptance is the user's: nothing to say
    assert not any("--drafter" in w for w in _ask(_two_drafters_fit(), accept="2").warnings)


def test_predict_drafter_without_its_acceptance_is_refused_in_one_line():
    from ddtree_bayes.core.errors import QueryError

    draws = _two_drafters_fit()
    draws.meta["model"]["acceptance_groups"] = draws.meta["model"]["acceptance_groups"][:1]
    with pytest.raises(QueryError) as err:
        _ask(draws, drafter="test/k25-head")
    assert str(err.value).startswith("--drafter test/k25-head: the fit measured no acceptance "
                                     "of it for ")
    assert "--accept" in str(err.value)


def test_a_rows_check_against_the_fit_prices_its_named_drafter():
    """Every check of a row against a fit (posterior predictive, validate's scores) asks its
    scenario: a row naming a drafter is asked with that drafter's stored card, as the fit
    priced its passes; a row naming none, without one (the default card)."""
    from ddtree_bayes.engine.scenario import row_scenario

    draws = _two_drafters_fit()
    blank, named = draws.measurements.rows[-2:]
    assert row_scenario(draws, blank).drafter is None
    assert row_scenario(draws, named).drafter.drafter == "test/k25-head"
    assert row_scenario(draws, named).drafter.params_active_b == 1.8


def test_a_new_rows_drafter_card_added_since_the_fit_prices_its_check(tmp_path, monkeypatch):
    """``update`` scores (and reweights with) a new row naming a card ``card add
    --not-default`` wrote after the fit: the fit stored no such card, and the row was asked
    without one, its passes priced by the default card's roofline (0.9 B parameters a pass
    where the named head reads 1.8 B). It is asked with the card here, as ``predict --drafter``
    prices a card the fit did not store; a stored card is still the one the fit priced with."""
    from ddtree_bayes.engine.scenario import row_scenario

    draws = _two_drafters_fit()
    model = draws.meta["model"]
    model["drafter_cards"] = [d for d in model["drafter_cards"]
                              if d["drafter"] != "test/k25-head"]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "drafters.csv").write_text(CARDS)
    monkeypatch.chdir(tmp_path)
    named = draws.measurements.rows[-1]
    sc = row_scenario(draws, named)
    assert sc.drafter is not None
    assert (sc.drafter.drafter, sc.drafter.params_active_b) == ("test/k25-head", 1.8)
    # a card the fit stored wins over the one here (as the fit priced the row)
    (tmp_path / "data" / "drafters.csv").write_text(CARDS.replace(",1.8,", ",2.4,"))
    stored = _two_drafters_fit()
    assert row_scenario(stored, named).drafter.params_active_b == 1.8
    # a fit that stores no cards prices no drafter pass (the fraction form): none, as before
    del stored.meta["model"]["drafter_cards"]
    assert row_scenario(stored, named).drafter is None


def test_validate_concurrency_crossovers_price_each_drafters_passes(hw, monkeypatch):
    """`validate --concurrency`'s crossovers asked P(faster than AR) of a sweep's speculative
    rows without their drafter: the K2.5 head's rows (the bundled Kimi sweeps name it) were
    priced by the default card's roofline, while their scores (row_scenario) used the K2.5
    card; and two drafters of one configuration were pooled, the last row per C winning. Each
    drafter's rows are a crossover of their own, asked with their card."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.workflows.concurrency_check import crossovers

    draws = _two_drafters_fit()
    rows = ("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,0,100,test,,{c},",
            "kimi-k2.6,b300,8,sglang,eagle3,3,3,4,,0,{t},test,,{c},",
            "kimi-k2.6,b300,8,sglang,eagle3,3,3,4,,0,{t},test,,{c},test/k25-head")
    text = HEADER.replace("notes,drafter", "notes,concurrency,drafter") + "".join(
        line.format(c=c, t=t) + "\n" for c, t in ((1, 150), (4, 90)) for line in rows)
    data = load_measurements("sweep.csv", hw, text=text)
    asked = []

    def p_faster(fit, sc, accept, rng):
        asked.append((sc.concurrency, None if sc.drafter is None else sc.drafter.drafter,
                      round(float(accept.mean()), 3)))
        return 0.5 + 0.1 * (sc.drafter is None)

    monkeypatch.setattr(P, "p_faster_than_ar", p_faster)
    out = crossovers(draws, list(data.rows), seed=0)
    # the default head's rows (inferred 2.0), then the K2.5 head's (inferred 1.7, its card)
    assert sorted(asked, key=str) == sorted([(1, None, 2.0), (4, None, 2.0),
                                             (1, "test/k25-head", 1.7),
                                             (4, "test/k25-head", 1.7)], key=str)
    assert len(out) == 2
    assert sorted(x["p_faster_than_ar"] for x in out) == [[0.5, 0.5], [0.6, 0.6]]


# ------------------------------------------------------------------ the public data
K25_HEAD = "lightseekorg/kimi-k2.5-eagle3-mla"


def test_the_k25_head_has_a_card_that_blank_rows_do_not_use():
    """Its card drafts eagle3 for kimi-k2.6 with default no: a blank kimi-k2.6 eagle3 row (the
    Turin retest's K2.6 head, the bundled rows) is still priced by the generic drafter. Its
    pass, 3.0 B parameters at 2 B/weight (the checkpoint's ~6 GB), on 8x RTX PRO 6000:
    6.0 / (1.792 x 8) / 0.625 + 2 x 0.13 = 0.92964 ms."""
    from ddtree_bayes.core.drafters import PassRoofline, pass_roofline_ms
    from ddtree_bayes.core.model_cards import load_model_cards

    cards = drafter_table()
    (card,) = [c for c in cards if c.drafter == K25_HEAD]
    assert (card.target_model, card.methods, card.default, card.pass_params_b,
            card.bytes_per_weight) == ("kimi-k2.6", ("eagle3",), False, 3.0, 2.0)
    assert drafter_for(cards, "kimi-k2.6", "eagle3") is None
    ms, _ = pass_roofline_ms(card, load_model_cards(bundled("models.csv"))["kimi-k2.6"],
                             "eagle3", load_hardware(bundled("hardware.csv"))["rtx-pro-6000"], 8,
                             PassRoofline(0.625, 0.03, 0.05, 0.10))
    assert ms == pytest.approx(0.92964, abs=5e-6)
    assert (Path(__file__).resolve().parents[1] / "data" / "drafters.csv").read_bytes() == \
        bundled("drafters.csv").read_bytes()


@pytest.mark.parametrize("name", [
    "vllm_eagle3_kimi_k26_rtxpro6000x8_ctx.csv",
    "conc/vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv",
    "conc/vllm_eagle3_kimi_k26_rtxpro6000x8_dcp4_conc.csv",
    "conc/vllm_eagle3_kimi_k26_rtxpro6000x8_dcp8_conc.csv"])
def test_the_rows_that_ran_the_k25_head_name_it(name):
    """Every eagle3 row whose notes name the K2.5 head names it in its drafter column, every
    other row is blank (the AR rows; the Turin retest's K2.6 head has no column at all)."""
    import csv
    import io

    root = Path(__file__).resolve().parents[1] / "data" / "public"
    rows = list(csv.DictReader(io.StringIO((root / name).read_text(encoding="utf-8"))))
    assert rows and all((r["drafter"] == K25_HEAD) == (r["method"] == "eagle3"
                                                       and K25_HEAD in r["notes"]) for r in rows)
    assert all(r["drafter"] in ("", K25_HEAD) for r in rows)
    assert sum(r["drafter"] == K25_HEAD for r in rows) == (5 if "ctx" in name else 40)
    turin = (root / "vllm_eagle3_kimi_k26_rtxpro6000x8_turin_ctx.csv").read_text()
    assert "drafter" not in turin.splitlines()[0]


def test_the_combined_corpus_keeps_the_drafter_column(hw):
    """scripts/combine_public.py writes the column (its rows load, the K2.5 head's five rows
    name it, and they are not taken as repeats of the Turin rows)."""
    from ddtree_bayes.core.config import load_priors

    path = Path(__file__).resolve().parents[1] / "data" / "examples" / "public_multi_model.csv"
    data = load_measurements(str(path), hw,
                             methods=load_priors(bundled("priors.toml")).methods)
    named = [m for m in data.rows if m.drafter is not None]
    assert [(m.model, m.method, m.drafter) for m in named] == [
        ("kimi-k2.6", "eagle3", K25_HEAD)] * 5
    assert [m.context_tokens for m in named] == [0.0, 16384.0, 32768.0, 65536.0, 131072.0]
    check_row_drafters(data.rows, drafter_table(), data.path)


def test_validate_concurrency_refuses_a_sweep_naming_an_unknown_drafter(tmp_path):
    """The C > 1 sweeps (data/public/conc) are loaded before any fit: one naming a drafter no
    card has is refused there (file, row, column), not fitted with a generic drafter."""
    from ddtree_bayes.workflows import concurrency_check as CC

    src = (Path(__file__).resolve().parents[1] / "data" / "public" / "conc"
           / "vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv")
    bad = tmp_path / src.name
    bad.write_text(src.read_text().replace(K25_HEAD, "test/nope"))
    with pytest.raises(DataError) as err:
        CC.extrapolate_concurrency([bad], workdir=tmp_path, progress=False)
    assert str(err.value).startswith(f"{bad}, row ")
    assert "column 'drafter': no drafter card 'test/nope'" in str(err.value)


# ------------------------------------------------------------------ card add --not-default
def test_card_add_not_default_writes_a_second_head_rows_name(tmp_path):
    """A second EAGLE-3 head for one target and method was refused ("a second default drafter
    card") with no way to say it is one rows name: `--not-default` writes it with default no,
    into a file whose header lacks the column too (the column is added; the other rows, one
    field short, read it blank);
    the default card stays the first one."""
    import json

    from ddtree_bayes.engine.fitting import FitInputs
    from test_cards import FIX
    from test_json_schemas import validate_output

    args = ("card", "add", "--hf-config", str(FIX / "llama3-8b-eagle3"), "--target",
            "llama-3.1-8b-instruct")
    (tmp_path / "data").mkdir()
    head = bundled("drafters.csv").read_text().splitlines()[0]
    (tmp_path / "data" / "drafters.csv").write_text(head.removesuffix(",default,block_size") + "\n")
    assert run_cli(tmp_path, *args, "--name", "first-head")[0] == 0
    code, out, err = run_cli(tmp_path, *args, "--name", "other-head", "--not-default",
                             "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("card-add", payload)
    assert payload["drafters"][0]["default"] == "no"
    lines = (tmp_path / "data" / "drafters.csv").read_text().splitlines()
    assert lines[0].endswith(",default") and lines[2].endswith(",no")
    cards = FitInputs.read(workdir=tmp_path).drafters
    assert drafter_for(cards, "llama-3.1-8b-instruct", "eagle3").drafter == "first-head"
    assert [c.default for c in cards if c.drafter == "other-head"] == [False]
    # a model card's config (no drafter row) cannot be one
    code, out, err = run_cli(tmp_path, "card", "add", "--hf-config", str(FIX / "llama-3.1-8b"),
                             "--name", "x-8b", "--not-default")
    assert code == 2 and err.count("\n") == 1 and "--not-default" in err


def _measured_default_head_fit():
    """:func:`_two_drafters_fit` with the default head's row measured (accept_len 2.0): its
    configuration anchors answers; the K2.5 head's row still infers its acceptance (1.7)."""
    import dataclasses

    import numpy as np

    draws = _two_drafters_fit()
    text = draws.data_csv.replace("kimi-k2.6,b300,8,sglang,eagle3,3,3,4,,,200,test,,",
                                  "kimi-k2.6,b300,8,sglang,eagle3,3,3,4,2.0,,200,test,,")
    model = dict(draws.meta["model"])
    model["acceptance_groups"] = model["acceptance_groups"][1:]
    variables = {**draws.variables,
                 "accept_latent": np.full((draws.n_draws, 1), 1.7)}
    return dataclasses.replace(draws, data_csv=text, meta={**draws.meta, "model": model},
                               variables=variables, memo={})


def test_a_named_drafter_is_not_anchored_to_the_default_heads_measured_row():
    """An answer is anchored to the discrepancy of the nearest measured configuration of its
    system, engine and method; the drafter column makes each drafter's rows a configuration
    of their own (core/likelihood.py), but the anchor ignored it: ``predict --drafter`` of the
    Kimi K2.5 head on the RTX PRO 6000 was anchored to the K2.6 head's measured row (123 tok/s
    where the K2.5 row measured 112.5). A named drafter is anchored to its own configurations
    only (none here: its row has no accept_len, so it anchors nothing), the default head's
    answer to the default head's."""
    from ddtree_bayes.engine.predictive import _nearest_measured, anchor_shift

    draws = _measured_default_head_fit()
    default = _ask(draws).asked[0].scenario
    named = _ask(draws, drafter="test/k25-head").asked[0].scenario
    found = _nearest_measured(draws, default)
    assert found is not None and [r.row for r in found[0]] == [11] and found[1] == 0.0
    assert _nearest_measured(draws, named) is None and anchor_shift(draws, named) is None
    # the default card named is the default head: anchored as without --drafter
    same = _nearest_measured(draws, _ask(draws, drafter="test/k26-head").asked[0].scenario)
    assert same is not None and [r.row for r in same[0]] == [11]


def test_the_default_card_named_draws_what_the_question_without_it_draws():
    """``predict --drafter X`` with X the default card of the model and method is the question
    without ``--drafter`` (the same card prices the passes): its random numbers were keyed
    apart, so the two answered by Monte Carlo noise apart (287.9 against 290.6 tok/s on a
    point mass with run-to-run noise). A named-only card keeps a stream of its own."""
    import dataclasses

    from ddtree_bayes.engine.predictive import scenario_key

    draws = _two_drafters_fit()
    plain = _ask(draws).asked[0].scenario
    default = _ask(draws, drafter="test/k26-head").asked[0].scenario
    named = _ask(draws, drafter="test/k25-head").asked[0].scenario
    assert default.drafter is not None and default.drafter.default
    assert scenario_key(default) == scenario_key(plain) == scenario_key(
        dataclasses.replace(plain, drafter=None))
    assert scenario_key(named) != scenario_key(plain)


def test_whether_a_drafter_is_the_default_is_decided_once_by_the_fit(tmp_path, monkeypatch):
    """Whether ``--drafter X`` is the default card was decided two ways: the random numbers
    (predictive.scenario_key) by the card's own ``default`` flag, the acceptance and anchors
    by the fit's stored default card. A card edited after the
    fit (here the K2.5 head made the default in the working directory's drafters.csv) drew
    the plain question's numbers at the K2.5 rows' acceptance. One rule now, the fit's: the
    rows that name no drafter ran its stored default card."""
    from ddtree_bayes.engine.predictive import scenario_key

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "drafters.csv").write_text(   # (the two heads' flags swapped)
        ",".join(DRAFTER_COLUMNS) + ",default\n"
        "test/k26-head,kimi-k2.6,eagle3,eagle3_head,1,0.9,0.15,1,s,no\n"
        "test/k25-head,kimi-k2.6,eagle3,eagle3_head,1,1.8,0.15,1,s,yes\n")
    monkeypatch.chdir(tmp_path)
    draws = _two_drafters_fit()
    plain = _ask(draws).asked[0].scenario
    named = _ask(draws, drafter="test/k25-head").asked[0].scenario
    # (the card the fit stored prices it, not the one here: named_drafter)
    assert named.drafter is not None and not named.drafter.default
    assert named.drafter_named == "test/k25-head"   # (the fit's rows say not)
    assert scenario_key(named) != scenario_key(plain)
    # the fit's own default card, named, is still the plain question
    k26 = _ask(draws, drafter="test/k26-head").asked[0].scenario
    assert k26.drafter_named is None and scenario_key(k26) == scenario_key(plain)


def test_update_json_new_rows_say_each_rows_drafter():
    """``update --format json``'s new_rows carried every column of a row but its drafter: a
    new row of the K2.5 head and one of the default head read alike (same configuration,
    system, engine), though each was scored with its own drafter's acceptance and card."""
    import dataclasses

    import jsonschema
    import numpy as np

    from ddtree_bayes.workflows import living
    from test_json_schemas import schema

    draws = _two_drafters_fit()
    # (the overhead group b300x8/sglang/eagle3 is unmeasured: drawn around the population)
    zero = np.zeros(draws.n_draws)
    draws = dataclasses.replace(draws, memo={}, variables={
        **draws.variables, **{f"spec_{part}_log_{k}": zero for part in ("fixed", "pass", "tree")
                              for k in ("mu", "sd")}})
    blank, named = draws.measurements.rows[-2:]
    scores = living.score_rows(draws, [blank, named], seed=0)
    assert [s["status"] for s in scores] != ["unpredictable"] * 2
    assert [s["drafter"] for s in scores] == [None, "test/k25-head"]
    items = jsonschema.Draft202012Validator(schema("update")["properties"]["new_rows"]["items"])
    for score in scores:
        items.validate(score)


def _named_only_fit(default_card: bool = False):
    """:func:`_two_drafters_fit` whose kimi-k2.6 EAGLE-3 rows all name the K2.5 head (no row
    with a blank drafter column) and whose only K2.6 EAGLE-3 card is that head (default no),
    or beside it the default K2.6 head (``default_card``)."""
    import dataclasses

    import numpy as np

    draws = _two_drafters_fit()
    lines = draws.data_csv.rstrip("\n").split("\n")
    text = "\n".join(ln for ln in lines if not (",eagle3," in ln and ln.endswith(","))) + "\n"
    model = dict(draws.meta["model"])
    model["acceptance_groups"] = [g for g in model["acceptance_groups"] if g["drafter"]]
    header, k26, k25 = CARDS.splitlines()
    cards = "\n".join([header, *((k26,) if default_card else ()), k25]) + "\n"
    model["drafter_cards"] = [{**dataclasses.asdict(c), "methods": list(c.methods)}
                              for c in load_drafter_cards("d.csv", cards)]
    variables = {**draws.variables, "accept_latent": np.full((draws.n_draws, 1), 1.7)}
    return dataclasses.replace(draws, data_csv=text, meta={**draws.meta, "model": model},
                               variables=variables, memo={})


def test_predict_without_drafter_of_a_named_only_drafter_says_no_default_drafter_ran(
        monkeypatch, tmp_path):
    """A model and method whose rows all name a drafter and whose only card is that drafter's
    (default no): predict without --drafter warned "the fit's rows of this configuration name
    the drafter test/k25-head too ...: this answer is the default drafter's (rows with a blank
    drafter column)" - no row has a blank drafter column, and no default card exists: the
    answer is of a drafter nobody measured, priced as a generic one."""
    monkeypatch.chdir(tmp_path)   # (no data/drafters.csv here: the fit's cards alone)
    draws = _named_only_fit()
    assert {r.drafter for r in draws.measurements.rows if r.method == "eagle3"} == {
        "test/k25-head"}
    q = _ask(draws)
    assert [w for w in q.warnings if "--drafter" in w] == [
        "the fit's rows of this configuration all name the drafter test/k25-head, and no "
        "default eagle3 drafter card serves kimi-k2.6: this answer is of a drafter no row "
        "measured and no card describes (a generic eagle3 drafter); ask --drafter "
        "test/k25-head for the measured one"]
    # a default card no row ran: the answer is that card's, and no row is said to be blank
    q = _ask(_named_only_fit(default_card=True))
    assert [w for w in q.warnings if "--drafter" in w] == [
        "the fit's rows of this configuration name only the drafter test/k25-head, each with "
        "its own acceptance: this answer is the default drafter's (the card test/k26-head, "
        "which no row of it measured); ask --drafter test/k25-head for its"]


def test_predict_accept_without_drafter_of_a_named_only_drafter_says_whose_passes(
        monkeypatch, tmp_path):
    """The same configuration asked with --accept: the note was given only without it (it
    spoke of acceptance), so the answer priced the drafter passes of a drafter no row ran
    without a word. On a fit of data/public/conc/vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv
    (C <= 4, rows all naming lightseekorg/kimi-k2.5-eagle3-mla, 2.92x the generic drafter's
    pass), `--accept 2.23` answered 123 (108-135) tok/s, `--drafter` that card 112 (95-127).
    Now said, of the passes; where rows with a blank drafter column measured the default
    drafter, --accept is that drafter's measured configuration and nothing is said."""
    import dataclasses

    import numpy as np

    from ddtree_bayes.engine import predictive as P

    monkeypatch.chdir(tmp_path)
    draws = _named_only_fit()
    q = _ask(draws, accept="1.7")
    assert [w for w in q.warnings if "--drafter" in w] == [
        "the fit's rows of this configuration all name the drafter test/k25-head, and no "
        "default eagle3 drafter card serves kimi-k2.6: this answer at the acceptance asked "
        "prices the drafter passes of a drafter no row measured and no card describes (a "
        "generic eagle3 drafter); ask --drafter test/k25-head for the measured one"]
    ask = {"hardware": "b300", "gpus": 8, "engines": ["sglang"], "method": "eagle3",
           "block": 3, "accept": "1.7"}
    # (the overhead group b300x8/sglang/eagle3 is unmeasured: drawn around the population)
    zero = np.zeros(draws.n_draws)
    priced = dataclasses.replace(draws, memo={}, variables={
        **draws.variables, **{f"spec_{part}_log_{k}": zero for part in ("fixed", "pass", "tree")
                              for k in ("mu", "sd")}})
    generic = P.predict(priced, **ask)[0]["median"]
    measured = P.predict(priced, drafter="test/k25-head", **ask)[0]["median"]
    assert generic != pytest.approx(measured, rel=1e-3)   # (the passes priced otherwise)
    q = _ask(_named_only_fit(default_card=True), accept="1.7")
    assert [w for w in q.warnings if "--drafter" in w] == [
        "the fit's rows of this configuration name only the drafter test/k25-head: this "
        "answer at the acceptance asked prices the drafter passes of the default drafter (the "
        "card test/k26-head, which no row of it measured); ask --drafter test/k25-head for its"]
    # rows with a blank drafter column ran the default drafter: nothing to say at --accept
    assert not [w for w in _ask(_two_drafters_fit(), accept="1.7").warnings
                if "--drafter" in w]


# ------------------------------------------------------------------ [[acceptance]] drafter
K25_ENTRY = ('\n[[acceptance]]\nmodel = "kimi-k2.6"\nmethod = "eagle3"\nblock = 3\n'
             'drafter = "test/k25-head"\ndist = "truncnormal"\nmu = 1.6\nsigma = 0.2\n'
             'lower = 1.0\nupper = 4.0\nrationale = "the K2.5 head on K2.6"\nsource = "test"\n')


def test_an_acceptance_entry_may_name_a_drafter_and_is_then_that_drafters_alone(hw):
    """An [[acceptance]] entry had no drafter key: an entry is the default drafter's, and a
    named drafter's group took Uniform(1, max_accept) whatever the file said (261dfa1). An
    optional ``drafter`` names the card whose acceptance the entry is: its group takes it,
    and the default drafter's group keeps the entry without one."""
    from ddtree_bayes.core.config import parse_priors
    from ddtree_bayes.core.spec import build_spec

    priors = parse_priors(bundled("priors.toml").read_text() + K25_ENTRY, "p.toml")
    assert [a.drafter for a in priors.acceptance] == [None, None, None, None, "test/k25-head"]
    data = load_measurements("m.csv", hw, text=HEADER + AR + K26 + K25, methods=priors.methods)
    spec = build_spec(data, priors, hardware=hw, drafters=load_drafter_cards("d.csv", CARDS))
    blank, named = spec.accept_groups
    assert (blank.prior.params["mu"], blank.prior.params["sigma"]) == (1.94, 0.15)
    assert (named.prior.dist, named.prior.params["mu"], named.prior.params["sigma"]) == (
        "truncnormal", 1.6, 0.2)
    assert named.prior_from.startswith(
        "[[acceptance]] model=kimi-k2.6 method=eagle3 block=3 drafter=test/k25-head: ")
    # the entry is the K2.5 head's alone: no question of the default drafter takes it
    assert priors.acceptance_for("eagle3", 3, 4, "kimi-k2.6").prior.params["mu"] == 1.94
    assert priors.acceptance_for("eagle3", 3, 4, "kimi-k2.6", "test/k25-head"
                                 ).prior.params["mu"] == 1.6
    assert priors.acceptance_for("eagle3", 3, 4, "kimi-k2.6", "test/other") is None


@pytest.mark.parametrize(("line", "column", "says"), [
    ('drafter = ""', "acceptance[5].drafter", "'drafter' must be a drafter card's name"),
    ("drafter = 3", "acceptance[5].drafter", "'drafter' must be a drafter card's name"),
    ('method = "ar"', "acceptance[5].drafter", "autoregressive decoding has no drafter"),
])
def test_an_acceptance_entrys_drafter_must_be_a_name(line, column, says):
    from ddtree_bayes.core.config import parse_priors
    from ddtree_bayes.core.errors import PriorsError

    entry = K25_ENTRY.replace('method = "eagle3"\nblock = 3\n', "method = \"ar\"\n") if (
        line == 'method = "ar"') else K25_ENTRY.replace('drafter = "test/k25-head"', line)
    with pytest.raises(PriorsError) as err:
        parse_priors(bundled("priors.toml").read_text() + entry, "p.toml")
    assert err.value.column == column and says in str(err.value), str(err.value)


@pytest.mark.parametrize(("drafter", "says"), [
    ("test/k25-haed", "no drafter card 'test/k25-haed' (fix: name one of "),
    ("test/k26-head", "drafter 'test/k26-head' is kimi-k2.6's default eagle3 card, which an "
                      "entry without a drafter is"),
    ("z-lab/Qwen3-8B-DFlash-b16", "drafter 'z-lab/Qwen3-8B-DFlash-b16' drafts dflash, "
                                  "ddtree, not eagle3"),
])
def test_fit_refuses_an_acceptance_entry_of_a_drafter_no_card_of_it_serves(tmp_path, drafter,
                                                                             says):
    work = _workdir(tmp_path, "")
    (work / "models").mkdir()
    (work / "models" / "priors.toml").write_text(
        bundled("priors.toml").read_text() + K25_ENTRY.replace("test/k25-head", drafter))
    code, out, err = run_cli(work, "fit")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "priors.toml, column 'acceptance[5].drafter': " + says in err, err
    assert not (work / "models" / "fits").exists()
    # the entry of the named head is fitted (its rows' group takes it)
    (work / "models" / "priors.toml").write_text(bundled("priors.toml").read_text() + K25_ENTRY)
    from ddtree_bayes.engine.fitting import FitInputs

    FitInputs.read(work / "data" / "measurements.csv", work / "models" / "priors.toml",
                   workdir=work).check()


def test_predict_drafter_takes_an_acceptance_entry_of_that_drafter():
    """predict --drafter of a drafter the fit has no acceptance of anywhere: refused without
    --accept (test_predict_drafter_without_its_acceptance_is_refused_in_one_line); with an
    [[acceptance]] entry naming it, the entry is its prior, as the default drafter's entry
    is the default drafter's."""
    import dataclasses

    draws = _two_drafters_fit()
    model = dict(draws.meta["model"])
    model["acceptance_groups"] = model["acceptance_groups"][:1]
    draws = dataclasses.replace(draws, priors_toml=draws.priors_toml + K25_ENTRY,
                                meta={**draws.meta, "model": model}, memo={})
    (source,) = _ask(draws, drafter="test/k25-head").asked[0].accept
    assert (source.kind, source.prior.prior.params["mu"]) == ("prior", 1.6)
    (source,) = _ask(draws).asked[0].accept   # (the default drafter's: its inferred one)
    assert (source.kind, source.group_index) == ("posterior", 0)


def test_the_no_drafter_warning_names_the_cards_only_rows_name(monkeypatch, tmp_path):
    """A model and method no row measured whose only cards are named ones (default no: the
    built-in Kimi K2.5 head for kimi-k2.6 eagle3, and an own one): predict warned "no drafter
    card serves kimi-k2.6's eagle3 ... (`ddtree-bayes card add` one)" without --drafter, and
    with --drafter of such a card too, though the card was there and asked."""
    import dataclasses

    from ddtree_bayes.engine.scenario import drafter_gap_warnings

    monkeypatch.chdir(tmp_path)   # (no data/drafters.csv here: the stored and built-in cards)
    draws = _named_only_fit()
    text = "\n".join(ln for ln in draws.data_csv.rstrip("\n").split("\n")
                     if ",eagle3," not in ln) + "\n"
    model = {**draws.meta["model"], "acceptance_groups": []}
    draws = dataclasses.replace(draws, data_csv=text, meta={**draws.meta, "model": model},
                                memo={})
    assert drafter_gap_warnings(draws, [("kimi-k2.6", "eagle3")]) == [
        "no default drafter card serves kimi-k2.6's eagle3 and the fit measured none: only "
        "cards that rows name serve it (lightseekorg/kimi-k2.5-eagle3-mla, test/k25-head), "
        "and a question without --drafter prices a generic eagle3 drafter: ask --drafter "
        "one of them"]
    assert drafter_gap_warnings(draws, [("kimi-k2.6", "eagle3")], drafter="test/k25-head") == []
    # a method no card serves at all: as before
    assert drafter_gap_warnings(draws, [("kimi-k2.6", "mtp")]) == [
        "no drafter card serves kimi-k2.6's mtp and the fit measured none: there is no drafter "
        "to run it with (`ddtree-bayes card add` one)"]


# ------------------------------------------------------------------ a deployment's own MTP card
def test_a_named_mtp_card_is_read_at_its_own_bytes_per_weight():
    """An MTP module is stored in its target's checkpoint: the default card is read at the
    deployment card's bytes per weight (quantised with it). A card rows name (default no)
    describes one deployment's checkpoint, whose module may ship unquantised: its own
    bytes_per_weight prices the pass. Qwen3.8-27B's MTP module and head, 0.4247 + 1.2714 B,
    against a 0.5 B/weight target on one 3.35 TB/s GPU (efficiency 1, no launch costs):
    1.6961 x 0.5 / 3.35 = 0.25315 ms by default, 1.6961 x 2 / 3.35 = 1.01260 ms named."""
    import dataclasses

    from ddtree_bayes.core.drafters import DrafterCard, PassRoofline, pass_roofline_ms
    from ddtree_bayes.core.model_cards import ModelCard

    target = ModelCard("q", 27, 27, 64, None, None, 0.5, "bf16", "s")
    default = DrafterCard("q-mtp", "q", ("mtp",), "mtp_module", 1, 0.4247, 1.2714, 2.0, "s")
    named = dataclasses.replace(default, drafter="q-mtp-bf16", default=False)
    hw = {"hardware": "h", "mem_bw_tb_s": "3.35", "interconnect": "x"}
    flat = PassRoofline(1.0, 0.0, 0.0, 0.0)
    assert pass_roofline_ms(default, target, "mtp", hw, 1, flat)[0] == pytest.approx(
        0.253149, abs=1e-6)
    assert pass_roofline_ms(named, target, "mtp", hw, 1, flat)[0] == pytest.approx(
        1.012597, abs=1e-6)


def test_an_acceptance_entrys_drafter_fix_says_what_to_do_with_the_entry():
    """The fix of an [[acceptance]] entry's drafter problem was chosen by whether the
    problem's text held the word "default": a card named org/default-head of another target
    was told "leave drafter out (an entry without one is the default card's)", which turns
    the entry into the default drafter's of a model the card does not even draft for; an
    entry of every model naming qwen3-8b's default card was told the same, which makes it
    every model's default drafter's; and a card that does not exist was told "blank: the
    target's own drafter card", a measurement row's words."""
    from ddtree_bayes.core.config import drafter_entry_problem

    cards = load_drafter_cards("d.csv", CARDS + "org/default-head,llama-3.1-8b-instruct,eagle3,"
                                                "eagle3_head,1,0.4,0.1,1,s,no\n")
    cards += tuple(c for c in load_drafter_cards(bundled("drafters.csv"))
                   if c.drafter == "z-lab/Qwen3-8B-DFlash-b16")
    problem, fix = drafter_entry_problem(cards, "kimi-k2.6", "eagle3", "org/default-head")
    assert problem == "drafter 'org/default-head' drafts for llama-3.1-8b-instruct, not kimi-k2.6"
    assert fix.startswith("name a drafter card whose target_model is kimi-k2.6"), fix
    # the default card, of an entry of one model: leave the drafter out
    assert drafter_entry_problem(cards, "kimi-k2.6", "eagle3", "test/k26-head") == (
        "drafter 'test/k26-head' is kimi-k2.6's default eagle3 card, which an entry without a "
        "drafter is", "leave drafter out (an entry without one is the default card's)")
    # of an entry of every model: name the model too (else it is every model's)
    assert drafter_entry_problem(cards, None, "ddtree", "z-lab/Qwen3-8B-DFlash-b16")[1] == (
        'set model = "qwen3-8b" and leave drafter out (an entry without a drafter is the '
        "default card's; without a model too, every model's default drafter's)")
    problem, fix = drafter_entry_problem(cards, "kimi-k2.6", "eagle3", "test/k25-haed")
    assert problem == "no drafter card 'test/k25-haed'"
    assert fix.endswith("or leave drafter out (the entry is then the default drafter's)"), fix
    assert "blank" not in fix


def _workdir_with_a_named_card(tmp_path):
    """A working directory whose own data/drafters.csv holds `my/q38-mtp` (a qwen3.8-27b MTP
    card, default no), a sweep file whose MTP rows name it, and another directory, the
    current one, that has no such card."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "data").mkdir(parents=True)
    elsewhere.mkdir()
    head = bundled("drafters.csv").read_text().splitlines()[0]
    (work / "data" / "drafters.csv").write_text(
        head + "\nmy/q38-mtp,qwen3.8-27b,mtp,mtp_module,1,,,0.4247,0.4247,1.2714,yes,yes,,2,,"
        "me,,,no\n")
    src = (Path(__file__).resolve().parents[1] / "data" / "public"
           / "llamacpp_mtp_qwen38_27b_rtx5090.csv").read_text().splitlines()
    lines = [src[0] + ",drafter"] + [
        line + (",my/q38-mtp" if ",mtp," in line.split('"')[0] else ",") for line in src[1:]]
    sweep = work / "sweep.csv"
    sweep.write_text("\n".join(lines) + "\n")
    return work, elsewhere, sweep


def test_extrapolate_reads_the_workdirs_drafter_cards(tmp_path, monkeypatch):
    """The Python API's `extrapolate(..., workdir=W)` read the drafter cards of the current
    directory, not W's, for its sweeps (extrapolation.py usable_sweeps): a sweep whose rows
    name a card of W's data/drafters.csv was skipped ("no drafter card"), and no sweep could
    be split. It now reads W's cards, as the fits of the sweeps (card_texts(W)) do."""
    from ddtree_bayes.workflows import extrapolation as X

    work, elsewhere, sweep = _workdir_with_a_named_card(tmp_path)
    monkeypatch.chdir(elsewhere)
    tasks = []

    def dispatch(run, todo, **kw):
        tasks.extend(todo)
        raise SystemExit(0)   # (the fits are not this test's)
    monkeypatch.setattr(X, "dispatch", dispatch)
    with pytest.raises(SystemExit):
        X.extrapolate([sweep], workdir=work, progress=False)
    assert {t[0].name for t in tasks} == {"llamacpp-mtp-qwen38-27b-rtx5090"}


def test_from_smallest_corpus_reads_the_workdirs_drafter_cards(tmp_path, monkeypatch):
    """`from_smallest(..., workdir=W, corpus=F)` checked the corpus rows' drafter column
    against the current directory's cards (from_smallest.py with_corpus): rows naming a card
    of W's data/drafters.csv were refused. They are now checked against W's cards."""
    from ddtree_bayes.workflows import from_smallest as FS

    work, elsewhere, sweep = _workdir_with_a_named_card(tmp_path)
    corpus = work / "corpus.csv"   # (the sweep's rows, on another system: kept beside it)
    corpus.write_text("\n".join(
        ",".join(line.split(",")[1:]).replace(",rtx-5090,", ",rtx-4090,")
        for line in sweep.read_text().splitlines()) + "\n")
    monkeypatch.chdir(elsewhere)
    tasks = []

    def dispatch(run, todo, **kw):
        tasks.extend(todo)
        raise SystemExit(0)   # (the fits are not this test's)
    monkeypatch.setattr(FS.V, "dispatch", dispatch)
    with pytest.raises(SystemExit):
        FS.from_smallest([sweep], workdir=work, corpus=corpus, progress=False)
    assert tasks and {t[0].sweep for t in tasks} == {"llamacpp-mtp-qwen38-27b-rtx5090"}


def test_a_named_drafter_is_priced_with_the_card_the_fit_stored(tmp_path, monkeypatch):
    """A drafter card the fit stored and data/drafters.csv now gives otherwise (5 layers
    stored, 10 here) was looked up three ways: a row's drafter column (update's scoring) took
    the stored card, `predict --drafter` and optimize's acceptance-file rows the card here
    (card_named takes the last of stored + here). A saved fit answers with the cards it was
    fitted with, as it does for model cards and the default drafter (its learned multiple of
    the drafter's roofline is of the stored card): all three take the stored card, and the
    card here only for a name the fit did not store. A data/drafters.csv that does not load
    was refused by --drafter but read as the built-in table by optimize's rows: one error."""
    import dataclasses
    from types import SimpleNamespace as NS

    import numpy as np

    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.engine import scenario as S
    from ddtree_bayes.workflows.decisions.acceptance_curve import AcceptanceRows
    from ddtree_bayes.workflows.decisions.optimize import rows_card
    from test_structure_model import structured_point_mass

    head = bundled("drafters.csv").read_text().splitlines()[0]
    row = "test/k26-block,kimi-k2.6,ddtree,dflash_block,5,,,5.2,5.2,1,yes,yes,,2,,me,,,no"
    (card,) = load_drafter_cards("d.csv", f"{head}\n{row}\n")
    draws = structured_point_mass()
    draws.meta["model"].update({"target_model": "kimi-k2.6", "drafter_cards": [
        {**dataclasses.asdict(card), "methods": list(card.methods)}]})
    (tmp_path / "data").mkdir()
    here = tmp_path / "data" / "drafters.csv"
    here.write_text(f"{head}\n{row.replace(',5,,,5.2,5.2,', ',10,,,10.4,10.4,')}\n")
    monkeypatch.chdir(tmp_path)
    sc = S.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=None)
    found = AcceptanceRows(np.array([32]), np.array([9.0]), "kimi-k2.6", "test/k26-block", 2)

    def layers():
        return [S.with_drafter(draws, sc, "test/k26-block").drafter.layers,
                S.with_row_drafter(draws, sc, NS(drafter="test/k26-block")).drafter.layers,
                rows_card(draws, found, "ddtree", "kimi-k2.6")[0].layers]

    assert layers() == [5, 5, 5]   # (was [10, 5, 10])
    (line,) = S.drafter_card_changes(draws, [("kimi-k2.6", "ddtree")], tmp_path,
                                     drafter="test/k26-block")
    assert ("this answer prices --drafter test/k26-block with its card as fit point-mass "
            "stored it; re-run") in line
    draws.meta["model"]["drafter_cards"] = []   # a card added since the fit: the one here
    assert layers() == [10, 10, 10]
    here.write_text("drafter,target_model\nx,\n")
    errors = []
    for ask in (lambda: S.with_drafter(draws, sc, "test/k26-block"),
                lambda: rows_card(draws, found, "ddtree", "kimi-k2.6")):
        with pytest.raises(InputError) as err:
            ask()
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "drafters.csv" in errors[0]


def test_a_named_drafters_refusal_says_the_fit_stored_its_card(tmp_path, monkeypatch):
    """bad6c3f0 prices a named drafter with the card the fit stored. A user who corrects that
    card's target_model in data/drafters.csv (stored: kimi-k2.5, here: kimi-k2.6) and asks
    `predict --drafter test/k26-block` was refused "drafts for kimi-k2.5, not kimi-k2.6
    (fix: use a drafter trained for the target model)": the file they just edited says
    kimi-k2.6, and the refusal came before the "differs from the fit's" line could say why.
    The fix now says the fit stored the card and how to use the one here: fit again."""
    import dataclasses

    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine import scenario as S
    from test_structure_model import structured_point_mass

    head = bundled("drafters.csv").read_text().splitlines()[0]
    row = "test/k26-block,kimi-k2.6,ddtree,dflash_block,5,,,5.2,5.2,1,yes,yes,,2,,me,,,no"
    (card,) = load_drafter_cards("d.csv", f"{head}\n{row.replace('kimi-k2.6', 'kimi-k2.5')}\n")
    draws = structured_point_mass()
    draws.meta["model"].update({"target_model": "kimi-k2.6", "drafter_cards": [
        {**dataclasses.asdict(card), "methods": list(card.methods)}]})
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "drafters.csv").write_text(f"{head}\n{row}\n")
    monkeypatch.chdir(tmp_path)
    sc = S.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=16, budget=32, verify_tokens=None, context_tokens=None)
    with pytest.raises(QueryError) as err:
        S.with_drafter(draws, sc, "test/k26-block")
    assert str(err.value) == (
        "drafter 'test/k26-block' drafts for kimi-k2.5, not kimi-k2.6 (fix: use a drafter "
        "trained for the target model; fit point-mass prices test/k26-block with the card it "
        "stored, and data/drafters.csv's differs: re-run `ddtree-bayes fit` to fit with it)")


def test_track_and_next_query_ask_a_named_drafter_as_predict_does(tmp_path):
    """`next --query` and `track add` took no --drafter ("unrecognized arguments"), so a
    predict --drafter question could be neither ranked nor tracked. Both take it now, with
    predict's semantics: the fit above inferred 2.0 for the default head's rows and 1.7 for
    the K2.5 head's (by hand, its accept_latent columns); predict --drafter test/k25-head
    asks the second, and so do a tracked query and next's query naming it (and, without it,
    the default head's first)."""
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.workflows.decisions import parse_query
    from ddtree_bayes.workflows.living import tracking as T

    draws = _two_drafters_fit()
    base = {"hardware": "b300", "gpus": 8, "engine": "sglang", "method": "eagle3", "block": 3}
    text = "--hardware b300 --gpus 8 --engine sglang --method eagle3 --block 3"
    n = draws.n_draws
    for drafter, group, inferred in (("test/k25-head", 1, 1.7), (None, 0, 2.0)):
        (predicts,) = _ask(draws, drafter=drafter).asked[0].accept
        saved = T.normalize_query({**base, "drafter": drafter})
        assert ("drafter" in saved) == (drafter is not None)   # (no key when not given)
        tracked = resolve(draws, Flags.of(T.asked_query(draws, saved))).asked[0]
        queried = parse_query(draws, text + (f" --drafter {drafter}" if drafter else ""))
        for source, sc in ((predicts, None), (tracked.accept[0], tracked.scenario),
                           (queried.source, queried.scenario)):
            assert (source.kind, source.group_index) == ("posterior", group)
            assert draws.variables["accept_latent"][:, source.group_index].tolist() == (
                [inferred] * n)
            assert sc is None or sc.drafter_named == drafter
    assert T.query_name(T.normalize_query({**base, "drafter": "test/k25-head"})) == (
        "b300-x8-sglang-eagle3-b3-dtest_k25-head")
    # the command line: track saves it (the point-mass fit, not of the structured step, says
    # it cannot answer it yet, as predict refuses it); next passes it to the query; a blank
    # name is refused, nothing saved
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    flags = ["--method", "eagle3", "--block", "3", "--engine", "sglang", "--accept", "2"]
    code, out, err = run_cli(work, "track", "add", *flags, "--drafter", "test/k25-head")
    assert code == 0, err
    assert "--drafter test/k25-head" in out and "--drafter needs a fit of the structured step" in out
    saved = json.loads((work / "models" / "tracked.json").read_text())["queries"][-1]["query"]
    assert saved["drafter"] == "test/k25-head"
    from test_json_schemas import validate_output

    code, out, err = run_cli(work, "track", "add", *flags, "--drafter", "test/k26-head",
                             "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("track", payload)
    assert payload["query"]["query"]["drafter"] == "test/k26-head"
    code, out, err = run_cli(work, "track", "list", "--format", "json")
    validate_output("track", json.loads(out))
    code, out, err = run_cli(work, "next", "--query", " ".join([*flags, "--drafter", "x/y"]))
    assert (code, out) == (2, "") and "--query: --drafter needs a fit of the structured step" in err
    before = (work / "models" / "tracked.json").read_text()
    code, out, err = run_cli(work, "track", "add", *flags, "--drafter", " ")
    assert (code, out) == (2, "") and "argument --drafter: ' ' is not a drafter card's name" in err
    assert (work / "models" / "tracked.json").read_text() == before


@pytest.mark.parametrize("block", [2, 3, 5])
def test_the_drafter_refusals_example_acceptance_is_one_the_configuration_can_emit(block):
    """A --drafter without its acceptance is refused with a fix giving an example --accept:
    it was "--accept 3:4" whatever was asked, so an EAGLE-3 chain of depth 2 (at most 3 tokens
    per step: depth + 1) was told to pass what it then refused ("--accept 3:4 (up to 4) is
    above what eagle3 with block 2 can emit"). The example now ends at the configuration's own
    limit (by hand: depth + 1 = 3, 4, 6), and asking with it answers."""
    import re

    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.question import Flags, resolve

    draws = _two_drafters_fit()
    draws.meta["model"]["acceptance_groups"] = draws.meta["model"]["acceptance_groups"][:1]
    ask = {"hardware": "b300", "gpus": 8, "engines": ("sglang",), "method": "eagle3",
           "block": block, "drafter": "test/k25-head"}
    with pytest.raises(QueryError) as err:
        resolve(draws, Flags(**ask))
    example = re.search(r"e\.g\. --accept (\S+?)\)?$", str(err.value)).group(1)
    lo, hi = (float(x) for x in example.split(":"))
    assert (lo, hi) == (block, block + 1)   # (depth + 1 tokens at most, by hand)
    (asked,) = resolve(draws, Flags(**ask, accept=example)).asked   # (answered, not refused)
    assert max(s.value for s in asked.accept if s.value is not None) == block + 1


def test_next_leaves_out_a_default_drafter_candidate_when_no_default_drafter_exists(
        monkeypatch, tmp_path):
    """next measures a candidate with the default drafter (a blank drafter column). Where the
    fit's rows of the model's method all name a card and no default card serves it, that
    drafter is one predict says "no row measured and no card describes": on a fit of
    data/public/conc/vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv (C <= 8), `next --query
    "--method eagle3 --drafter lightseekorg/kimi-k2.5-eagle3-mla --concurrency 8"` ranked
    first "the query's configuration, with the default drafter" - a run nobody can make.
    Now left out with why, as a method without any drafter is; with a default card (or rows
    that ran the default drafter) it stays."""
    from ddtree_bayes.workflows.decisions import next_measurement as N

    monkeypatch.chdir(tmp_path)   # (no data/drafters.csv here: the fit's cards alone)
    ask = "--hardware b300 --engine sglang --method eagle3 --block 3"
    for flags in (" --drafter test/k25-head", " --accept 1.7"):
        draws = _named_only_fit()
        left: list = []
        kept = N.default_candidates(draws, N.parse_query(draws, ask + flags), left)
        assert not [c for c in kept if c.scenario.method == "eagle3"]
        (why,) = {why for c, why in left if "sglang eagle3" in c.describe()}
        assert why == ("no default eagle3 drafter card serves kimi-k2.6, and the fit's eagle3 "
                       "rows of it all name the drafter test/k25-head: a candidate is measured "
                       "with the default drafter (a blank drafter column), which no row ran "
                       "and no card describes (`ddtree-bayes card add` a default one)")
        # (the AR and DDTree candidates are kept)
        assert {c.why for c in kept} >= {"AR, context 0", "DDTree budget 8"}
    for draws in (_named_only_fit(default_card=True), _two_drafters_fit()):
        kept = N.default_candidates(draws, N.parse_query(draws, ask + " --accept 1.7"), [])
        assert [c.why for c in kept if c.scenario.method == "eagle3"] == ["the query itself"]


def test_a_drafter_cards_key_is_built_once_and_a_refusal_parses_the_stored_cards_once(
        monkeypatch):
    """Each card's comparison key (core/drafters.py card_key, the one key of predict's "cards
    differ" line, a refusal's "the fit stored its card", diff and the model average) is built
    once per card: drafter_card_changes built a card's stored_card_dict again to read its
    "default" (2 stored + 2 here, one stored card changed: 4 builds, not 6). And with_drafter
    parsed the fit's stored cards a second time to word a refusal's suggestions (1 parse,
    not 2); the refusal's words are the same."""
    import dataclasses

    from ddtree_bayes.core import drafters as DR
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.scenario import drafter_card_changes, resolve_scenario, with_drafter
    from ddtree_bayes.engine.testing import point_mass_draws

    cards = {c.drafter: c for c in drafter_table()}
    here = (dataclasses.replace(cards["lightseekorg/kimi-k2.5-eagle3-mla"], default=True),
            cards["z-lab/Qwen3-8B-DFlash-b16"])   # (Kimi K2.6's eagle3 default, another's)
    draws = point_mass_draws()
    stored = [DR.card_dict(c) for c in here]
    stored[0] = {**stored[0], "params_active_b": stored[0]["params_active_b"] * 2}
    draws.meta["model"]["drafter_cards"] = stored
    built: list[str] = []
    real = DR.stored_card_dict
    monkeypatch.setattr(DR, "stored_card_dict", lambda d: built.append(d["drafter"]) or real(d))
    said = drafter_card_changes(draws, None, cards=here)
    assert len(said) == 1 and here[0].drafter in said[0]
    assert len(built) == 2 + 2
    # with_drafter's refusal of a name no card has: the stored cards parsed once
    draws.meta["model"].update(step_form="structured", card={"model": "kimi-k2.6"})
    sc = resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                          block=16, budget=32, verify_tokens=None, context_tokens=0)
    parsed: list[int] = []
    real_parse = DR.stored_cards
    monkeypatch.setattr(DR, "stored_cards", lambda rows: parsed.append(1) or real_parse(rows))
    with pytest.raises(QueryError) as err:
        with_drafter(draws, dataclasses.replace(sc), "no/such-card")
    assert len(parsed) == 1
    assert str(err.value).startswith("no drafter card 'no/such-card' (fix: ")


def test_next_says_which_drafter_card_each_candidate_drafts_with(tmp_path):
    """`next --candidates` ranked candidates of one system whose drafter passes are priced
    with different cards (their model's default card for each method: here a DDTree and an
    EAGLE-3 card of Kimi K2.6) without saying which: the rows now carry predict's
    ``pass_drafter`` (the card; null a generic drafter; absent for AR, which drafts nothing)
    and the table a drafter column (the card, ``generic``, ``-``)."""
    import dataclasses

    from ddtree_bayes.core.drafters import card_dict
    from ddtree_bayes.workflows import decisions as D
    from ddtree_bayes.workflows.decisions.next_measurement import drafter_cell
    from test_engine_effects import structured_engine_fit
    from test_json_schemas import validate_output

    draws = structured_engine_fit(64, noise_sd=0.036, structure_sd=0.04)
    head = {c.drafter: c for c in drafter_table()}["lightseekorg/kimi-k2.5-eagle3-mla"]
    draws.meta["model"]["drafter_cards"] += [card_dict(c) for c in (
        dataclasses.replace(head, drafter="test/kimi-eagle3", default=True),
        dataclasses.replace(head, drafter="test/kimi-ddtree", methods=("ddtree",),
                            kind="dflash_block", default=True))]
    path = tmp_path / "candidates.csv"
    path.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
                    "b300,8,sglang,ddtree,16,8,3,0\nb300,8,sglang,eagle3,3,3,3,0\n"
                    "b300,8,sglang,ar,,,1,0\nb300,8,sglang,mtp,2,2,2,0\n")
    query = D.parse_query(draws, "--engine sglang --accept 12")
    left: list = []
    out = D.next_measurements(draws, query, D.read_candidates(draws, path, query,
                                                                left_out=left), k=2)
    got = {r["method"]: (r.get("pass_drafter", "absent"), drafter_cell(r)) for r in out["rows"]}
    assert got == {"ddtree": ("test/kimi-ddtree", "test/kimi-ddtree"),
                   "eagle3": ("test/kimi-eagle3", "test/kimi-eagle3"), "ar": ("absent", "-")}
    assert [c.scenario.method for c, _ in left] == ["mtp"]   # (no card, no row: nobody can)
    # a generic drafter (no card of the model serves the method): null, "generic"
    draws = draws.view(meta={**draws.meta, "model": {
        **draws.meta["model"], "drafter_cards": draws.meta["model"]["drafter_cards"][:-1]}})
    out = D.next_measurements(draws, query, D.read_candidates(draws, path, query,
                                                                left_out=[]), k=2)
    (tree,) = [r for r in out["rows"] if r["method"] == "ddtree"]
    assert tree["pass_drafter"] is None and drafter_cell(tree) == "generic"
    validate_output("next", {**out, "query": {**out["query"], "accept": 12.0,
                                              "accept_distribution": None,
                                              "accept_kind": "given"},
                             "query_itself": None, "warnings": []})

"""A block drafter's trained block (its card's ``block_size``, core/drafters.py): z-lab's
Qwen3-8B DFlash drafter was trained at block 16, yet ``add --model qwen3-8b --method ddtree
--block 32 --budget 64 --accept 20`` was appended, and predict, optimize and next answered at
block 32 with acceptances up to 20, more than a block-16 drafter emits in a step. A block
above the trained one is refused (one line, exit 2, nothing written) where a model's card
names it, and with no block given the trained block bounds the acceptance."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.drafters import (
    DrafterCard,
    block_problem,
    check_row_drafters,
    drafter_table,
    load_drafter_cards,
    stored_card_dict,
    stored_cards,
    trained_block,
)
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.methods import max_accept
from ddtree_bayes.core.paths import bundled
from test_add_intake import workdir
from test_cli_support import (
    listing,
    make_point_mass_workdir,
    refits_seen,
    run_cli,
    write_point_mass_fit,
)

pytestmark = pytest.mark.fast

BENCH = Path(__file__).resolve().parent / "fixtures" / "bench"
QWEN_ROW = ["--model", "qwen3-8b", "--hardware", "h200", "--gpus", "1", "--engine", "hf",
            "--method", "ddtree", "--tok-s", "700", "--source", "test"]
#: a block-8 DDTree drafter of the point-mass fit's model (kimi-k2.6), in data/drafters.csv
KIMI_B8 = ("drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
           "bytes_per_weight,source,block_size\n"
           "my/kimi-dflash-b8,kimi-k2.6,ddtree;dflash,dflash_block,5,1.0,1.0,2,a test card,8\n")


def test_the_bundled_block_drafters_name_their_trained_block():
    """z-lab/Qwen3-8B-DFlash-b16: block_size 16 (the z-lab source config its source cites);
    DFlash2: 8 (its config.json as the design note quotes it, "block-8 checkpoint"); no other
    kind drafts a block."""
    cards = load_drafter_cards(bundled("drafters.csv"))
    sizes = {c.drafter: c.block_size for c in cards}
    assert sizes["z-lab/Qwen3-8B-DFlash-b16"] == 16
    assert sizes["incoai/Qwen3.8-27B-DFlash2 (also published as z-lab/Qwen3.8-27B-DFlash2)"] == 8
    assert {c.drafter for c in cards if c.block_size is not None} == {
        "z-lab/Qwen3-8B-DFlash-b16",
        "incoai/Qwen3.8-27B-DFlash2 (also published as z-lab/Qwen3.8-27B-DFlash2)"}
    assert trained_block(cards, "qwen3-8b", "ddtree")[0] == 16
    assert trained_block(cards, "qwen3.8-27b-q4_k_m", "dflash")[0] == 8   # (a deployment card)
    assert trained_block(cards, "llama-3.1-8b-instruct", "eagle3") is None
    assert bundled("drafters.csv").read_bytes() == (
        Path(__file__).resolve().parents[1] / "data" / "drafters.csv").read_bytes()


def test_the_trained_block_bounds_what_a_step_emits_when_no_block_is_given():
    """ddtree budget 64 and no block: budget + 1 = 65 tokens bounded it; a drafter trained at
    block 16 emits at most 15 drafts + the bonus token = 16."""
    assert max_accept("ddtree", None, 64, None, 65).tokens == 65
    limit = max_accept("ddtree", None, 64, None, 65, trained_block=16)
    assert (limit.tokens, limit.rule) == (16, "the trained block - 1 drafts + 1")
    # a block of its own, within the trained one, is still its own bound
    assert max_accept("ddtree", 8, 64, None, 65, trained_block=16).tokens == 8


def test_add_refuses_a_block_above_the_drafters_and_nothing_is_written(tmp_path):
    root = workdir(tmp_path)
    path = root / "data" / "measurements.csv"
    before = path.read_bytes()
    code, out, err = run_cli(root, "add", *QWEN_ROW, "--block", "32", "--budget", "64",
                             "--accept", "20")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err == ("ddtree-bayes: error: data/measurements.csv (new row), row 11, column "
                   "'block': block 32 is above the block 16 qwen3-8b's ddtree drafter "
                   "z-lab/Qwen3-8B-DFlash-b16 was trained at (its card's block_size) (fix: "
                   "give a block of at most 16, or name a drafter trained at block 32 (its "
                   "card in data/drafters.csv, with its block_size))\n")
    assert path.read_bytes() == before
    # no block: acceptance 20 is above the 16 a block-16 drafter emits (65 bounded it)
    code, _, err = run_cli(root, "add", *QWEN_ROW, "--budget", "64", "--verify-tokens", "65",
                           "--accept", "20")
    assert code == 2 and "column 'accept_len': accept_len 20 is above what ddtree with a " \
        "drafter trained at block 16 can emit (at most 16 tokens per step" in err, err
    assert path.read_bytes() == before
    # the trained block itself, and another model's block 32 (no card names a block), pass
    assert run_cli(root, "add", *QWEN_ROW, "--block", "16", "--budget", "64",
                   "--accept", "12")[0] == 0
    rows = load_measurements(path, load_hardware(root / "data" / "hardware.csv")).rows
    assert (rows[-1].model, rows[-1].block, rows[-1].accept_len) == ("qwen3-8b", 16, 12.0)


def test_add_from_bench_refuses_a_block_above_the_drafters(tmp_path):
    """A vLLM DFlash run of block 32 (31 drafts a step) against qwen3-8b, whose DFlash
    drafter was trained at block 16."""
    root = workdir(tmp_path)
    path = root / "data" / "measurements.csv"
    before = path.read_bytes()
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "dflash32.json"
    src.write_text(json.dumps(dict(
        raw, model_id="Qwen/Qwen3-8B", tokenizer_id="Qwen/Qwen3-8B",
        spec_decode_num_drafts=1000, spec_decode_draft_tokens=31000,
        spec_decode_accepted_tokens=19000, spec_decode_acceptance_length=20.0,
        spec_decode_acceptance_rate=19000 / 31000 * 100,
        spec_decode_per_position_acceptance_rates=[0.95] * 19 + [0.0] * 12)))
    argv = ["add", "--from-bench", str(src), "--hardware", "h200", "--gpus", "1",
            "--engine", "vllm", "--method", "dflash", "--model", "qwen3-8b"]
    code, out, err = run_cli(root, *argv, "--block", "32")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "column 'block': block 32 is above the block 16 qwen3-8b's dflash drafter " \
        "z-lab/Qwen3-8B-DFlash-b16 was trained at" in err, err
    assert path.read_bytes() == before


def test_a_data_file_with_a_block_above_the_drafters_is_refused_as_fit_reads_it(tmp_path):
    """fit's check of the rows (core/drafters.py check_row_drafters): a hand-edited row."""
    csv = tmp_path / "m.csv"
    head = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
            "context_tokens,tok_s,source,notes\n")
    csv.write_text(head + "qwen3-8b,h200,1,hf,ddtree,32,64,65,20,,700,s,\n")
    data = load_measurements(csv, load_hardware(bundled("hardware.csv")))
    with pytest.raises(DataError, match=r"m\.csv, row 2, column 'block': block 32 is above the "
                                        r"block 16 qwen3-8b's ddtree drafter"):
        check_row_drafters(data.rows, drafter_table(), str(csv))
    csv.write_text(head + "qwen3-8b,h200,1,hf,ddtree,16,64,65,12,,700,s,\n")
    data = load_measurements(csv, load_hardware(bundled("hardware.csv")))
    check_row_drafters(data.rows, drafter_table(), str(csv))


@pytest.fixture
def kimi_b8(tmp_path) -> Path:
    root = make_point_mass_workdir(tmp_path / "w")
    (root / "data" / "drafters.csv").write_text(KIMI_B8)
    return root


def test_predict_optimize_and_next_refuse_a_block_above_the_drafters(kimi_b8, tmp_path):
    for argv in (["predict", "--engine", "sglang", "--block", "16", "--budget", "32",
                  "--accept", "6"],
                 ["optimize", "--block", "16"],
                 ["next", "--query", "--block 16 --budget 32 --engine sglang --accept 6"]):
        code, out, err = run_cli(kimi_b8, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert err.startswith("ddtree-bayes: error: block 16 is above the block 8 kimi-k2.6's "
                              "ddtree drafter my/kimi-dflash-b8 was trained at"), (argv, err)
    cands = tmp_path / "c.csv"
    cands.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
                     "b300,8,sglang,ddtree,16,32,6,\n")
    code, _, err = run_cli(kimi_b8, "next", "--query", "--block 8 --budget 32 --engine sglang "
                           "--accept 6", "--candidates", str(cands))
    assert code == 2 and err.startswith(
        f"ddtree-bayes: error: {cands}, row 2, column 'block': block 16 is above the block 8"), err
    # at its trained block it answers: 8 tokens a step at most (block - 1 drafts + 1)
    code, out, err = run_cli(kimi_b8, "predict", "--engine", "sglang", "--block", "8",
                             "--budget", "32", "--accept", "6", "--format", "json")
    assert code == 0, err
    assert [r["median"] for r in json.loads(out)["rows"]] == [pytest.approx(300.0)]
    code, _, err = run_cli(kimi_b8, "predict", "--engine", "sglang", "--block", "8",
                           "--budget", "32", "--accept", "9")
    assert code == 2 and "at most 8 tokens per step" in err, err


def test_track_add_bounds_the_acceptance_by_the_drafters_trained_block(kimi_b8):
    """track's own acceptance check (workflows/living/tracking.py check_accept_limit) took no
    trained block: --method ddtree --budget 32 --accept 12 of kimi-k2.6, whose DDTree drafter
    was trained at block 8, was tracked (bounded by budget + 1 = 33; exit 0, "cannot answer it
    yet"), where predict refuses above 8 (block 8 - 1 drafts + 1). Now one line, exit 2,
    nothing written, as predict; 8 itself is tracked."""
    asked = ["--method", "ddtree", "--budget", "32", "--engine", "sglang"]
    tracked = kimi_b8 / "models" / "tracked.json"
    before = tracked.read_bytes() if tracked.exists() else None
    code, _, err = run_cli(kimi_b8, "predict", *asked, "--accept", "12")
    assert code == 2 and "at most 8 tokens per step" in err, err
    code, out, err = run_cli(kimi_b8, "track", "add", *asked, "--accept", "12")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("ddtree-bayes: error: --accept 12 is above what ddtree with a drafter "
                          "trained at block 8 can emit (at most 8 tokens per step"), err
    assert (tracked.read_bytes() if tracked.exists() else None) == before
    code, out, err = run_cli(kimi_b8, "track", "add", *asked, "--accept", "8")
    assert code == 0 and "cannot answer" not in out, (out, err)
    assert json.loads(tracked.read_text())   # (written)


def test_a_named_drafters_trained_block_is_its_own(tmp_path):
    """A card rows or --drafter name (default no): its block bounds the question, not the
    default card's."""
    own = tmp_path / "drafters.csv"
    own.write_text(KIMI_B8.replace(",block_size\n", ",block_size,default\n")
                   + "my/kimi-dflash-b32,kimi-k2.6,ddtree,dflash_block,5,1.0,1.0,2,t,32,no\n")
    cards = drafter_table(own)
    assert trained_block(cards, "kimi-k2.6", "ddtree")[0] == 8
    assert trained_block(cards, "kimi-k2.6", "ddtree", "my/kimi-dflash-b32")[0] == 32
    assert block_problem(cards, "kimi-k2.6", "ddtree", 16, "my/kimi-dflash-b32") is None
    assert block_problem(cards, "kimi-k2.6", "ddtree", 16)[0].startswith(
        "block 16 is above the block 8 kimi-k2.6's ddtree drafter my/kimi-dflash-b8")


def test_a_card_file_or_stored_fit_without_the_column_still_reads(tmp_path):
    """A drafter file without block_size (every card file before it) reads as not known; a
    fit that stored its cards before the column loads them (block_size None) and its cards
    compare equal to today's (block_size prices no pass: no "differs from the fit's")."""
    own = tmp_path / "drafters.csv"
    own.write_text(KIMI_B8.replace(",block_size\n", "\n").replace(",8\n", "\n"))
    (card,) = load_drafter_cards(own)
    assert card.block_size is None and trained_block((card,), "kimi-k2.6", "ddtree") is None
    today = dataclasses.asdict(load_drafter_cards(bundled("drafters.csv"))[7])
    older = {k: v for k, v in today.items() if k != "block_size"}
    assert stored_cards([{**older, "methods": list(older["methods"])}])[0].block_size is None
    assert stored_card_dict(today) == stored_card_dict(older)
    from ddtree_bayes.engine.store import _card_problem

    assert _card_problem(older, DrafterCard) is None and _card_problem(today, DrafterCard) is None
    assert _card_problem({**today, "block_size": "16"}, DrafterCard) is not None


@pytest.mark.parametrize("kind, size, message", [
    ("eagle3_head", "16", "a eagle3_head drafts no block: block_size is for dflash_block cards"),
    ("dflash_block", "1", "block_size '1' is not a block of 2 or more"),
    ("dflash_block", "16.5", "block_size"),
])
def test_a_block_size_no_drafter_has_is_refused(tmp_path, kind, size, message):
    own = tmp_path / "drafters.csv"
    own.write_text(KIMI_B8.replace("dflash_block", kind).replace(",8\n", f",{size}\n"))
    with pytest.raises(DataError, match="row 2, column 'block_size'") as err:
        load_drafter_cards(own)
    assert message in str(err.value)


def test_the_workdirs_card_over_a_copy_of_the_built_in_one(tmp_path):
    """An own card of the same name with another block_size replaces the built-in one's."""
    src = bundled("drafters.csv").read_text().splitlines()
    line = next(x for x in src if x.startswith("z-lab/Qwen3-8B-DFlash-b16,"))
    own = tmp_path / "drafters.csv"
    own.write_text(src[0] + "\n" + line.removesuffix(",16") + ",8\n")
    assert trained_block(drafter_table(own), "qwen3-8b", "ddtree")[0] == 8


def _fit_with_a_row_of_the_b32_card():
    """The structured point mass on 8x B300 storing two DDTree cards of kimi-k2.6: the default
    one trained at block 8 and my/kimi-dflash-b32 (default no) at 32, with a row of block 16
    that names the b32 card (add and fit's row check take it: its own card's block bounds it)."""
    from test_structure_model import structured_point_mass

    cards = load_drafter_cards("d.csv", KIMI_B8.replace(",block_size\n", ",block_size,default\n")
                               .replace(",8\n", ",8,\n")
                               + "my/kimi-dflash-b32,kimi-k2.6,ddtree,dflash_block,5,1.0,1.0,"
                                 "2,t,32,no\n")
    draws = structured_point_mass()
    lines = draws.data_csv.rstrip("\n").split("\n")
    text = "\n".join([lines[0] + ",drafter", *(ln + "," for ln in lines[1:]),
                      "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,6,,310,test,,"
                      "my/kimi-dflash-b32"]) + "\n"
    model = {**draws.meta["model"], "drafter_cards": [
        {**dataclasses.asdict(c), "methods": list(c.methods)} for c in cards]}
    return dataclasses.replace(draws, data_csv=text, meta={**draws.meta, "model": model},
                               memo={})


def test_a_rows_check_against_the_fit_takes_the_trained_block_of_the_card_it_names():
    """Every check of a row against a fit (fit's posterior predictive, update's scores and
    reweighting, validate, the report) asks row_scenario; it resolved the row without its
    drafter, so a block-16 row naming a block-32 card was refused against the default card's
    block 8 ("update": "cannot predict it (block 16 is above the block 8 ... my/kimi-dflash-b8
    was trained at)"), though add and fit's row check took it. Its own card bounds it: block
    16, at most 16 tokens a step (block - 1 drafts + 1)."""
    from ddtree_bayes.core.drafters import check_row_drafters
    from ddtree_bayes.engine.scenario import row_scenario

    draws = _fit_with_a_row_of_the_b32_card()
    row = draws.measurements.rows[-1]
    assert (row.drafter, row.block) == ("my/kimi-dflash-b32", 16)
    check_row_drafters([row], stored_cards(draws.meta["model"]["drafter_cards"]), "m.csv")
    sc = row_scenario(draws, row)
    assert sc.drafter.drafter == "my/kimi-dflash-b32"
    assert (sc.accept_limit.tokens, sc.accept_limit.subject) == (16, "ddtree with block 16")


def test_a_rows_drafter_problems_are_one_rule_for_add_and_fit():
    """add (workflows/living/records.py) and fit's row check (check_row_drafters) each wrote
    out the two drafter checks of a row, the drafter it names and its block against the
    drafter's trained one: core/drafters.py ``row_drafter_problem`` is both, first problem
    first, with the column it is in."""
    from ddtree_bayes.core.data import Measurement
    from ddtree_bayes.core.drafters import row_drafter_problem

    cards = drafter_table()

    def row(block, drafter=None, accept=12.0):
        return Measurement(2, "qwen3-8b", "h200", 1, "hf", "ddtree", block, 64, 65, accept,
                           None, 700.0, "s", "", drafter=drafter)

    assert row_drafter_problem(cards, row(16)) is None
    problem, fix, column = row_drafter_problem(cards, row(32))
    assert column == "block" and problem.startswith("block 32 is above the block 16 qwen3-8b's")
    problem, fix, column = row_drafter_problem(cards, row(None, accept=20.0))
    assert column == "accept_len" and "at most 16 tokens per step" in problem
    problem, fix, column = row_drafter_problem(cards, row(32, drafter="no/such-card"))
    assert column == "drafter", problem   # (the drafter's own problem first)


def test_an_inferred_acceptance_drawn_from_its_prior_stops_at_the_trained_block(
        kimi_b8, monkeypatch):
    """A row of a configuration the fit inferred no acceptance for (scoring new rows in
    update, validation) draws it from the group's prior: DDTree budget 32 with no block nor
    accept_len was drawn up to budget + 1 = 33 (Uniform(1, 33)) for kimi-k2.6, whose drafter
    my/kimi-dflash-b8 emits at most 8 a step (block 8 - 1 drafts + 1), as predict bounds it."""
    import numpy as np

    from ddtree_bayes import api
    from ddtree_bayes.engine.scenario import latent_acceptance

    monkeypatch.chdir(kimi_b8)
    draws = api.load(workdir=kimi_b8)
    accept, group = latent_acceptance(draws, "kimi-k2.6", "ddtree", None, 33,
                                      np.random.default_rng(0))
    assert group is None and accept.size == draws.n_draws
    assert 1.0 <= accept.min() and accept.max() <= 8.0   # (before: 1.09 to 30.9)


def _no_fit(tmp_path: Path) -> Path:
    """A folder with kimi-k2.6's block-8 DDTree drafter in data/drafters.csv and no fit (its
    measurements: the bundled Kimi K2.6 rows, which the first fit here will read)."""
    (tmp_path / "data").mkdir(parents=True)
    (tmp_path / "data" / "drafters.csv").write_text(KIMI_B8)
    return tmp_path


@pytest.mark.parametrize(("argv", "line"), [
    # no block: the trained block bounds --accept (8 - 1 drafts + 1), not budget + 1 = 33
    (["--budget", "32", "--accept", "12"],
     "--accept 12 is above what ddtree with a drafter trained at block 8 can emit (at most 8 "
     "tokens per step: the trained block - 1 drafts + 1)"),
    # a block asked above the trained one, as predict refuses it (with --accept or without)
    (["--block", "16", "--budget", "32", "--accept", "6"],
     "block 16 is above the block 8 kimi-k2.6's ddtree drafter my/kimi-dflash-b8 was trained "
     "at (its card's block_size) (fix: give a block of at most 8"),
    (["--block", "16", "--budget", "32"],
     "block 16 is above the block 8 kimi-k2.6's ddtree drafter my/kimi-dflash-b8 was trained "
     "at"),
])
def test_track_add_without_a_fit_reads_the_drafter_cards_here(tmp_path, argv, line):
    """Without a fit, track read no card: --budget 32 --accept 12 and --block 16 of a kimi-k2.6
    whose DDTree drafter was trained at block 8 were tracked (exit 0, "no fit yet"), where the
    same flags with a fit, and predict's, are refused. It now reads the drafter cards a fit here
    would (the built-in ones overlaid by data/drafters.csv) for the query's model (--model,
    else the first row's of the data a fit here reads, as a query asks a fit of several
    models), with the one rule (core/drafters.py block_problem, trained_block)."""
    work = _no_fit(tmp_path)
    before = listing(work)
    code, out, err = run_cli(work, "track", "add", "--method", "ddtree", "--engine", "sglang",
                             *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err.startswith(f"ddtree-bayes: error: {line}"), err
    assert listing(work) == before
    # within the trained block it is tracked
    code, out, err = run_cli(work, "track", "add", "--method", "ddtree", "--engine", "sglang",
                             "--block", "8", "--budget", "32", "--accept", "8")
    assert code == 0 and "no fit yet" in out, (out, err)


def test_track_add_without_a_fit_of_a_model_it_names(tmp_path):
    """--model qwen3-8b: its built-in DDTree drafter z-lab/Qwen3-8B-DFlash-b16 (block 16)."""
    code, _, err = run_cli(_no_fit(tmp_path), "track", "add", "--model", "qwen3-8b",
                           "--hardware", "h200", "--gpus", "1", "--engine", "hf", "--method",
                           "ddtree", "--block", "32", "--budget", "64")
    assert code == 2 and err.startswith(
        "ddtree-bayes: error: block 32 is above the block 16 qwen3-8b's ddtree drafter "
        "z-lab/Qwen3-8B-DFlash-b16 was trained at"), err


def test_track_add_with_a_fit_refuses_a_block_asked_above_the_trained_one(kimi_b8):
    """With a fit, --block 16 was tracked ("the latest fit cannot answer it yet (block 16 is
    above the block 8 ...)"), where predict refuses the same flags: refused now, nothing
    written. The default question's block 16, which the query did not ask (its method alone),
    is still tracked and told so."""
    tracked = kimi_b8 / "models" / "tracked.json"
    before = tracked.read_bytes() if tracked.exists() else None
    code, out, err = run_cli(kimi_b8, "track", "add", "--method", "ddtree", "--engine",
                             "sglang", "--block", "16", "--budget", "32", "--accept", "6")
    assert code == 2 and out == "" and err.startswith(
        "ddtree-bayes: error: block 16 is above the block 8 kimi-k2.6's ddtree drafter "
        "my/kimi-dflash-b8 was trained at"), (out, err)
    assert (tracked.read_bytes() if tracked.exists() else None) == before
    code, out, err = run_cli(kimi_b8, "track", "add", "--method", "ddtree", "--engine",
                             "sglang")
    assert code == 0 and "the latest fit cannot answer it yet (block 16 is above the block 8" \
        in out, (out, err)


def test_an_acceptance_files_block_bound_is_the_questions_one_rule(tmp_path, monkeypatch):
    """``optimize --acceptance-file F`` whose rows name a drafter checked the block against
    that drafter's trained block with its own copy of the rule (workflows/decisions/optimize.py
    ``rows_block_check`` called core/drafters.py ``block_problem`` itself), beside the one
    every question's block goes through (engine/scenario.py ``trained_block_of``). It is that
    one: what it refuses, the file's row and block column say."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine import scenario as S
    from ddtree_bayes.workflows import decisions as D
    from test_structure_model import structured_point_mass

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "drafters.csv").write_text(
        "drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
        "bytes_per_weight,source,block_size,default\n"
        "my/kimi-dflash-b32,kimi-k2.6,ddtree,dflash_block,5,1.0,1.0,2,a test card,32,no\n")
    monkeypatch.chdir(tmp_path)
    draws = structured_point_mass()
    curve = parse_acceptance_curve(draws.priors_toml)
    acc = tmp_path / "acc.csv"
    acc.write_text("model,drafter,method,block,budget,accept_len\n"
                   "kimi-k2.6,my/kimi-dflash-b32,ddtree,16,16,9.0\n"
                   "kimi-k2.6,my/kimi-dflash-b32,ddtree,16,32,9.6\n")
    ask = {"hardware": "b300", "engine": "sglang", "block": 16, "budgets": (16, 32)}
    real = S.trained_block_of
    asked: list[tuple] = []

    def rule(draws, model, method, block, drafter=None, prefix=""):
        asked.append((model, method, block, drafter))
        if drafter == "my/kimi-dflash-b32":   # (a rule the copy did not know)
            raise QueryError("block 16 is refused by the one rule", fix="ask block 8")
        return real(draws, model, method, block, drafter, prefix)

    monkeypatch.setattr(S, "trained_block_of", rule)
    with pytest.raises(DataError) as err:
        D.optimize(draws, curve, acceptance_file=acc, **ask)
    assert str(err.value) == (f"{acc}, row 2, column 'block': block 16 is refused by the one "
                              "rule (fix: ask block 8)")
    assert asked == [("kimi-k2.6", "ddtree", 16, "my/kimi-dflash-b32")]
    # the rule itself: block 16 is within the b32 card's trained block, and answers
    monkeypatch.setattr(S, "trained_block_of", real)
    assert D.optimize(draws, curve, acceptance_file=acc, **ask)["scenario"]["drafter"] == \
        "my/kimi-dflash-b32"


def test_simulate_refuses_a_design_row_above_the_drafters_trained_block(tmp_path):
    """simulate wrote `qwen3-8b,h100,1,vllm,ddtree,32,64,65,20.0,0,883.7,...` (exit 0) for a
    design row at block 32, accept 20: z-lab/Qwen3-8B-DFlash-b16 drafts at block 16 and emits
    at most 16 tokens a step, so `fit` refuses the file it wrote (column 'block'). The design
    row is refused as a measurement row is: block 32 at 'block'; with no block, accept 20 at
    'accept_len' (at most 16: the trained block - 1 drafts + 1); block 16 accept 16 passes."""
    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.workflows.simulate import load_design, load_truth, simulate_from_files

    truth_path = tmp_path / "truth.toml"
    truth_path.write_text('model = "qwen3-8b"\nnoise_sd = 0.0\nctx_verify_exponent = 0.5\n'
                          '[systems."h100x1"]\n'
                          "step_ar_ms = 9.0\nmoe_share = 0.55\nmoe_shape = 0.25\n"
                          'ctx_ms_per_unit = 2.0\n[groups."h100x1/vllm/ddtree"]\n'
                          "overhead_frac = 0.2\n")
    truth = load_truth(truth_path)
    head = "hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
    design = tmp_path / "design.csv"
    for row, column, words in (
            ("h100,1,vllm,ddtree,32,64,20,0", "block",
             "block 32 is above the block 16 qwen3-8b's ddtree drafter "
             "z-lab/Qwen3-8B-DFlash-b16 was trained at"),
            ("h100,1,vllm,ddtree,,64,20,0", "accept_len",
             "accept_len 20 is above what ddtree with a drafter trained at block 16 can "
             "emit (at most 16 tokens per step: the trained block - 1 drafts + 1)")):
        design.write_text(head + "h100,1,vllm,ar,,,1,0\n" + row + "\n")
        with pytest.raises(InputError) as info:
            load_design(design, truth, drafters=drafter_table())
        assert (info.value.row, info.value.column) == (3, column), str(info.value)
        assert words in str(info.value), str(info.value)
        out = tmp_path / "sim.csv"
        code, _, err = run_cli(tmp_path, "simulate", "--truth", str(truth_path), "--design",
                               str(design), "--out", str(out))
        assert code == 2 and words in err and not out.exists()
    design.write_text(head + "h100,1,vllm,ar,,,1,0\nh100,1,vllm,ddtree,16,32,16,0\n")
    text = simulate_from_files(truth_path, design, seed=1, workdir=tmp_path)
    # the file simulate writes is one fit reads: 16 tokens per step of a block-16 drafter
    assert ",ddtree,16,32,33,16.0,0," in text


#: kimi-k2.6's DDTree drafter retrained at block 16: the card the track fix asks for
KIMI_B16 = KIMI_B8.replace("my/kimi-dflash-b8", "my/kimi-dflash-b16").replace(
    "a test card,8\n", "a test card,16\n")


def test_tracks_refusal_of_a_block_is_predicts_now_that_track_takes_drafter(
        tmp_path, kimi_b8):
    """track had no --drafter, so its refusal of --block 16 asked for a default card trained
    at block 16 ("track has no --drafter: ..."); it takes --drafter now, as predict does, so
    the refusal is predict's, with a fit and without one ("name a drafter trained at block
    16"), and following the other way (a default card trained at block 16 in
    data/drafters.csv) still tracks the same flags."""
    flags = ("track", "add", "--method", "ddtree", "--engine", "sglang", "--block", "16",
             "--budget", "32")
    for work in (_no_fit(tmp_path / "nofit"), kimi_b8):
        code, out, err = run_cli(work, *flags)
        assert code == 2 and out == "", (code, out, err)
        assert err.endswith(
            "(fix: give a block of at most 8, or name a drafter trained at block 16 (its card "
            "in data/drafters.csv, with its block_size))\n"), err
        (work / "data" / "drafters.csv").write_text(KIMI_B16)
        code, out, err = run_cli(work, *flags)
        assert code == 0, (work, out, err)


def test_optimize_and_nexts_candidates_refusal_of_a_block_asks_for_a_default_drafter(
        kimi_b8, tmp_path):
    """optimize and next's candidates have no --drafter (next's candidates, optimize without
    an --acceptance-file naming one, ask the model's default drafter), yet their refusal said
    "name a drafter trained at block 16" as predict's does: their fix asks for a default card
    trained at block 16 and a fit again. predict and next's --query, which can name one
    (--drafter), keep predict's fix."""
    cands = tmp_path / "c.csv"
    cands.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
                     "b300,8,sglang,ddtree,16,32,6,\n")
    tail = ("(its card in data/drafters.csv, with block_size 16, then fit again; {})")
    for argv, why in (
            (["optimize", "--block", "16"], "optimize has no --drafter: it asks the model's "
             "default drafter, or the one an --acceptance-file's rows name"),
            (["next", "--query", "--block 8 --budget 32 --engine sglang --accept 6",
              "--candidates", str(cands)],
             "next's candidates draft with the model's default drafter (its --query takes "
             "--drafter)")):
        code, out, err = run_cli(kimi_b8, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert err.endswith("(fix: give a block of at most 8, or give kimi-k2.6 a default "
                            "ddtree drafter trained at block 16 " + tail.format(why)
                            + ")\n"), (argv, err)
    predicts = ("or name a drafter trained at block 16 (its card in data/drafters.csv, with "
                "its block_size))\n")
    code, _, err = run_cli(kimi_b8, "predict", "--engine", "sglang", "--block", "16",
                           "--budget", "32", "--accept", "6")
    assert code == 2 and err.endswith(predicts), err
    code, _, err = run_cli(kimi_b8, "next", "--query",
                           "--block 16 --budget 32 --engine sglang --accept 6")
    assert code == 2 and err.endswith(predicts), err
    # followed (this fit stores no kimi-k2.6 DDTree card: the one here is the default)
    (kimi_b8 / "data" / "drafters.csv").write_text(KIMI_B16)
    code, _, err = run_cli(kimi_b8, "optimize", "--block", "16")
    assert code == 0, err


def test_a_stored_card_takes_its_trained_block_from_the_card_here(tmp_path, monkeypatch):
    """block_size prices no pass, so a fit compares its stored cards with the ones here without
    it (core/drafters.py stored_card_dict) and trained_block reads the block from the cards
    here, after the stored ones "which an older version stored without it". bad6c3f0 made
    drafter_cards drop a card here whose name the fit stored: a fit that stored
    my/kimi-dflash-b32 before the column (no block_size) then knew no trained block for it,
    and --drafter my/kimi-dflash-b32 --block 64 was answered where data/drafters.csv says
    it was trained at 32 (before bad6c3f0: refused); a block_size edited here from 32 to 16
    was ignored with no word (no "differs from the fit's" either). The card here's block,
    as before: 32 for the older fit, 16 after the edit."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine import scenario as S
    draws = _fit_with_a_row_of_the_b32_card()
    older = [{k: v for k, v in d.items() if k != "block_size"}
             for d in draws.meta["model"]["drafter_cards"]]
    draws = dataclasses.replace(draws, meta={**draws.meta, "model": {
        **draws.meta["model"], "drafter_cards": older}}, memo={})
    (tmp_path / "data").mkdir()
    here = tmp_path / "data" / "drafters.csv"
    header = KIMI_B8.replace(",block_size\n", ",block_size,default\n").split("\n")[0]
    here.write_text(header + "\nmy/kimi-dflash-b32,kimi-k2.6,ddtree,dflash_block,5,1.0,1.0,2,t,"
                    "32,no\n")
    monkeypatch.chdir(tmp_path)
    assert S.trained_block_of(draws, None, "ddtree", None, "my/kimi-dflash-b32") == 32
    with pytest.raises(QueryError, match="block 64 is above the block 32"):
        S.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                           block=64, budget=64, verify_tokens=None, context_tokens=None,
                           drafter="my/kimi-dflash-b32")
    here.write_text(here.read_text().replace(",t,32,no", ",t,16,no"))
    assert S.trained_block_of(draws, None, "ddtree", None, "my/kimi-dflash-b32") == 16
    assert S.named_drafter(draws, "my/kimi-dflash-b32").block_size == 16
    # named_drafter parsed the fit's stored cards twice (once itself, once in drafter_cards to
    # find the same card): once now, the same card (the stored one, the block here's)
    from ddtree_bayes.core import drafters as Dr

    calls = []
    real = Dr.stored_cards
    monkeypatch.setattr(Dr, "stored_cards", lambda rows: calls.append(1) or real(rows))
    card = S.named_drafter(draws, "my/kimi-dflash-b32")
    assert len(calls) == 1
    assert card == dataclasses.replace(
        Dr.card_named(real(older), "my/kimi-dflash-b32"), block_size=16)
    assert card == Dr.card_named(S.drafter_cards(draws), "my/kimi-dflash-b32")


def test_simulate_derives_a_rows_verified_tokens_by_the_methods_table_fit_reads(tmp_path):
    """Which tokens does a design row verify? simulate derived them by the bundled
    [methods] table while fit derives them by the priors file's (the one simulate already read
    for its context unit): with a priors file that declares a chain method whose block holds
    its anchor (depth = "block - 1", as DFlash's), a chain of block 4 verifies 4 tokens for
    fit, and simulate, which knew no such method (a chain of its block), wrote 5: a row fit
    refuses. Now one table for both: 4."""
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.data import derive_verify_tokens
    from ddtree_bayes.workflows.simulate import simulate_from_files

    repo = Path(__file__).resolve().parent.parent
    priors = tmp_path / "priors.toml"
    priors.write_text(bundled("priors.toml").read_text() + (
        '\n[methods.anchored-chain]\npasses = "block"\ntree = false\ndepth = "block - 1"\n'
        'rationale = "a test\'s chain whose block holds its anchor"\nsource = "this test"\n'))
    cfg = load_priors(priors)
    assert derive_verify_tokens("anchored-chain", 4, None, cfg.methods) == 4
    assert derive_verify_tokens("anchored-chain", 4, None) == 5   # (no table: a chain)
    truth = tmp_path / "truth.toml"
    truth.write_text((repo / "data" / "examples" / "truth_moe_4gpu.toml").read_text()
                     + '\n[groups."h200x4/vllm/anchored-chain"]\noverhead_frac = 0.1\n')
    design = tmp_path / "design.csv"
    design.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
                      "h200,4,vllm,anchored-chain,4,,2.5,0\n")
    text = simulate_from_files(truth, design, seed=1, priors=priors, workdir=tmp_path)
    row = dict(zip(*[line.split(",") for line in text.splitlines()[:2]], strict=True))
    assert row["verify_tokens"] == "4"
    out = tmp_path / "sim.csv"
    out.write_text(text)
    m = load_measurements(str(out), load_hardware(str(bundled("hardware.csv"))),
                          methods=cfg.methods)
    assert [r.verify_tokens for r in m.rows] == [4]


def test_the_default_drafter_a_note_names_is_the_one_the_answer_is_priced_with():
    """Which drafter card does a question without --drafter draft with? The pricing
    (engine/structure.py ``pricing_drafter``) and the rows' drafter keys took the default card
    of the cards the fit stored; predict's note on the other drafters of a configuration and
    optimize's on an acceptance file's drafter took it from the fit's cards and the ones here
    (``drafter_cards``). A fit that stored no eagle3 card for Llama 3.1 8B (an older fit; or a
    card added since) priced a generic drafter, while the note named the built-in
    yuhuili/EAGLE3-LLaMA3.1-Instruct-8B as "the default drafter's" answer. All ask
    ``scenario.default_card`` now."""
    import dataclasses

    from ddtree_bayes.engine.scenario import default_card, other_drafters_note, resolve_scenario
    from ddtree_bayes.engine.structure import pricing_drafter
    from ddtree_bayes.engine.testing import multi_model_draws
    from ddtree_bayes.workflows.decisions.optimize import unpriced_drafter_note

    d = multi_model_draws()
    llama = "llama-3.1-8b-instruct"
    assert any(c.default and c.target_model == llama and "eagle3" in c.methods
               for c in drafter_table())   # (the built-in card the notes named)
    ar = resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="ar", block=None,
                          budget=None, verify_tokens=None, context_tokens=0.0, model=llama)
    sc = dataclasses.replace(ar, method="eagle3", block=3, verify_tokens=4)
    assert pricing_drafter(d, sc) is None and default_card(d, llama, "eagle3") is None
    note = other_drafters_note(d, sc, ["someone/else"])
    assert "no default eagle3 drafter card serves llama-3.1-8b-instruct" in note, note
    assert "yuhuili" not in note
    file_note = unpriced_drafter_note(d, sc, "someone/else", "acc.csv")
    assert "a generic eagle3 drafter" in file_note and "yuhuili" not in file_note, file_note


def test_predict_names_the_fits_stored_card_when_the_cards_block_was_edited(tmp_path):
    """A fit that stored kimi-k2.6's DDTree drafter card at block_size 8, and data/drafters.csv
    edited since to block_size 4: a question without a block whose measured acceptance (a row
    of budget 32 and no block, accept_len 6) is above the 4 tokens a block-4 drafter emits
    was refused with "(fix: tokens per step lie in 1 .. 4 ...)", which no flag of the user's
    can meet and which did not say that the fit stored the block-8 card. The line names both
    cards' blocks and the two ways out (fit again with the edited card, or restore it): one
    line, exit 2, nothing written."""
    from ddtree_bayes.core.drafters import card_dict
    from ddtree_bayes.engine.testing import point_mass_draws

    own = KIMI_B8.replace("my/kimi-dflash-b8,", "my/kimi-dflash,")
    (tmp_path / "c.csv").write_text(own)
    row = "kimi-k2.6,b300,8,sglang,ddtree,,32,33,6,,310,a row of no block,\n"
    draws = point_mass_draws(n=16, noise_sd=0.05)   # (next refuses a noiseless fit)
    draws = dataclasses.replace(draws, data_csv=draws.data_csv + row, memo={})
    draws.meta["model"]["drafter_cards"] = [card_dict(load_drafter_cards(tmp_path / "c.csv")[0])]
    root = make_point_mass_workdir(tmp_path / "w", draws=draws)
    data = root / "data" / "measurements.csv"
    data.write_text(data.read_text() + row)
    write_point_mass_fit(root / "models", data, root / "models" / "priors.toml",
                         root / "data" / "hardware.csv", draws=draws)
    (root / "data" / "drafters.csv").write_text(own.replace(",8\n", ",4\n"))
    before = listing(root)
    code, out, err = run_cli(root, "predict", "--engine", "sglang", "--method", "ddtree",
                             "--budget", "32", "--verify-tokens", "33")
    assert (code, out, err.count("\n")) == (2, "", 1), err
    assert err == (
        "ddtree-bayes: error: acceptance 6 measured (1 row) of b300 x8, sglang, ddtree, "
        "budget 32, verify 33, context 0: it is above what ddtree with a drafter trained at "
        "block 4 can emit (at most 4 tokens per step: the trained block - 1 drafts + 1); fit "
        "20260101T000000Z-pointmss stored kimi-k2.6's ddtree drafter my/kimi-dflash at "
        "block_size 8, and data/drafters.csv gives it block_size 4 (fix: re-run `ddtree-bayes "
        "fit` to fit with the edited card, or restore block_size 8 in data/drafters.csv to "
        "answer from this fit)\n"), err
    assert listing(root) == before
    # next's --query, as predict's (its own prefix)
    code, out, err = run_cli(root, "next", "--query", "--engine sglang --method ddtree "
                             "--budget 32 --verify-tokens 33")
    assert (code, out, err.count("\n")) == (2, "", 1), err
    assert err.startswith("ddtree-bayes: error: --query: acceptance 6 measured (1 row)"), err
    assert err.endswith("data/drafters.csv gives it block_size 4 (fix: re-run `ddtree-bayes fit` "
                        "to fit with the edited card, or restore block_size 8 in "
                        "data/drafters.csv to answer from this fit)\n"), err
    assert listing(root) == before


def test_update_refits_when_a_stored_drafter_cards_block_size_alone_was_edited(
        tmp_path, monkeypatch):
    """A fit that stored kimi-k2.6's DDTree drafter card at block_size 16, the card's
    block_size then edited to 12 in data/drafters.csv (nothing else): `update` compared the
    cards without block_size (core/drafters.py card_key) and said "fit ... is up to date ...
    nothing to refit", keeping the draws fitted under the block-16 card (the bound of its
    inferred acceptances), while predict then read block 12. The edit is a change of the
    cards, as an edit of any other field is: update refits, saying so. A fit stored before the
    column (no block_size) still compares its cards without it."""
    from ddtree_bayes.core.drafters import card_dict
    from ddtree_bayes.engine import inference
    from ddtree_bayes.engine.testing import point_mass_draws
    from test_cli_support import fitted_inputs

    card = KIMI_B8.replace("my/kimi-dflash-b8,", "my/kimi-dflash,").replace(",8\n", ",16\n")
    (tmp_path / "c.csv").write_text(card)
    draws = point_mass_draws()
    draws.meta["model"]["drafter_cards"] = [card_dict(load_drafter_cards(tmp_path / "c.csv")[0])]
    work = make_point_mass_workdir(tmp_path / "w", draws=draws)
    (work / "data" / "drafters.csv").write_text(card)
    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))  # up to date
    seen = refits_seen(monkeypatch)
    code, out, err = run_cli(work, "update")
    assert (code, seen) == (0, []) and "is up to date" in out, err
    (work / "data" / "drafters.csv").write_text(card.replace(",16\n", ",12\n"))
    code, out, err = run_cli(work, "update")
    assert code == 130 and len(seen) == 1, (code, out, err)
    assert "changed since fit 20260101T000000Z-pointmss: model or drafter cards" in out, out
    assert seen[0]["extra_meta"]["refit_reasons"] == [
        "model or drafter cards changed since fit 20260101T000000Z-pointmss"]
    # a fit that stored its cards before the block_size column: no block to compare
    older = [{k: v for k, v in d.items() if k != "block_size"}
             for d in draws.meta["model"]["drafter_cards"]]
    draws.meta["model"]["drafter_cards"] = older
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                         work / "models" / "priors.toml", work / "data" / "hardware.csv",
                         draws=draws)
    code, out, err = run_cli(work, "update")
    assert (code, len(seen)) == (0, 1) and "is up to date" in out, (code, out, err)


def test_an_accept_asked_above_an_edited_cards_block_names_the_stored_card(tmp_path):
    """The fit of test_predict_names_the_fits_stored_card_when_the_cards_block_was_edited
    (kimi-k2.6's DDTree card stored at block_size 8, data/drafters.csv edited since to 4):
    `predict --accept 6` (and `track add`, `next --query` with it) was refused with "--accept 6
    is above what ddtree with a drafter trained at block 4 can emit ... (fix: ... give --accept
    of at most 4 ...)", not a word of the block-8 card the fit stored and answers with
    (check_accept, where the acceptance a fit measured got edited_block's note). The one line
    names the stored card, the file and both blocks, and the fixes: fit again, restore the
    block, or ask at most 4."""
    from ddtree_bayes.core.drafters import card_dict
    from ddtree_bayes.engine.testing import point_mass_draws

    own = KIMI_B8.replace("my/kimi-dflash-b8,", "my/kimi-dflash,")
    (tmp_path / "c.csv").write_text(own)
    draws = point_mass_draws(n=16, noise_sd=0.05)   # (next refuses a noiseless fit)
    draws.meta["model"]["drafter_cards"] = [card_dict(load_drafter_cards(tmp_path / "c.csv")[0])]
    root = make_point_mass_workdir(tmp_path / "w", draws=draws)
    (root / "data" / "drafters.csv").write_text(own.replace(",8\n", ",4\n"))
    before = listing(root)
    said = ("--accept 6 is above what ddtree with a drafter trained at block 4 can emit (at most "
            "4 tokens per step: the trained block - 1 drafts + 1); fit 20260101T000000Z-pointmss "
            "stored kimi-k2.6's ddtree drafter my/kimi-dflash at block_size 8, and "
            "data/drafters.csv gives it block_size 4 (fix: re-run `ddtree-bayes fit` to fit with "
            "the edited card, or restore block_size 8 in data/drafters.csv to answer from this "
            "fit, or give --accept of at most 4)\n")
    query = "--engine sglang --method ddtree --budget 32 --verify-tokens 33 --accept 6"
    for argv, prefix in ((["predict", *query.split()], ""),
                         (["track", "add", *query.split()], ""),
                         (["next", "--query", query], "--query: ")):
        code, out, err = run_cli(root, *argv)
        assert (code, out, err) == (2, "", f"ddtree-bayes: error: {prefix}{said}"), (argv, err)
        assert listing(root) == before
    # an --accept the edited card can emit is answered (with the block here, as before)
    code, out, err = run_cli(root, "predict", *query.replace("6", "3.5").split())
    assert code == 0, err


def test_an_edited_block_from_the_built_in_cards_is_not_said_to_be_your_files(tmp_path,
                                                                             monkeypatch):
    """The refusal above named "data/drafters.csv" as the file giving the card's new block even
    where no such file exists and the card here is the package's own (a fit made with an older
    version, whose built-in card had another block): the user was sent to a file they do not
    have. Now it says the built-in drafter cards give it."""
    from ddtree_bayes.core import drafters as D
    from ddtree_bayes.core.drafters import card_dict
    from ddtree_bayes.engine.testing import point_mass_draws

    own = KIMI_B8.replace("my/kimi-dflash-b8,", "my/kimi-dflash,")
    (tmp_path / "c.csv").write_text(own)
    (tmp_path / "b4.csv").write_text(own.replace(",8\n", ",4\n"))
    draws = point_mass_draws(n=16, noise_sd=0.05)
    draws.meta["model"]["drafter_cards"] = [card_dict(load_drafter_cards(tmp_path / "c.csv")[0])]
    root = make_point_mass_workdir(tmp_path / "w", draws=draws)
    (root / "data" / "drafters.csv").unlink(missing_ok=True)
    table = D.drafter_table
    # (the package's built-in cards, with the block-4 card among them)
    monkeypatch.setattr(D, "drafter_table", lambda path=None, *a, **k: (
        table(tmp_path / "b4.csv", *a, **k) if path is None else table(path, *a, **k)))
    query = "--engine sglang --method ddtree --budget 32 --verify-tokens 33 --accept 6"
    code, out, err = run_cli(root, "predict", *query.split())
    assert code == 2 and out == ""
    assert ("stored kimi-k2.6's ddtree drafter my/kimi-dflash at block_size 8, and the built-in "
            "drafter cards give it block_size 4 (fix: ") in err
    assert "data/drafters.csv gives" not in err


def test_a_questions_trained_block_is_read_in_one_place(tmp_path, monkeypatch):
    """Which block was a question's drafter trained at? ``trained_block_of`` (the block
    refusal and the bound of what a step emits), ``latent_acceptance`` (the bound of an
    acceptance drawn from its group's prior) and ``edited_block`` (a refusal naming a card
    edited since the fit) each read it, with the same four steps written three times (the
    target priced, none for AR, the cards here over the fit's, core's ``trained_block``).
    One helper now, ``scenario.drafter_trained_block``: the block-8 card my/kimi-dflash-b8
    (stored by the fit and here) gives 8 to all three; the helper made to say 4 is what
    each of them takes, each asking it once."""
    import numpy as np

    from ddtree_bayes import api
    from ddtree_bayes.core.drafters import card_dict
    from ddtree_bayes.engine import scenario as S

    root = make_point_mass_workdir(tmp_path / "w")
    (root / "data" / "drafters.csv").write_text(KIMI_B8)
    card = load_drafter_cards(root / "data" / "drafters.csv")[0]
    monkeypatch.chdir(root)
    draws = api.load(workdir=root)
    draws.meta["model"]["drafter_cards"] = [card_dict(card)]   # (the fit stored it)

    def ask(**kw):
        return S.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                  method="ddtree", block=None, budget=32, verify_tokens=33,
                                  context_tokens=None, **kw)

    found = S.drafter_trained_block(draws, None, "ddtree")
    assert found is not None and found[0] == 8 and found[1].drafter == "my/kimi-dflash-b8"
    assert S.drafter_trained_block(draws, None, "ar") is None
    assert S.trained_block_of(draws, None, "ddtree", None) == 8
    sc = ask()
    assert sc.limit.tokens == 8 and S.edited_block(draws, sc) is None   # (stored 8, here 8)
    rng = np.random.default_rng(0)
    assert S.latent_acceptance(draws, None, "ddtree", None, 33, rng)[0].max() <= 8.0

    calls = []
    monkeypatch.setattr(S, "drafter_trained_block",
                        lambda *a, **k: calls.append(a[1:]) or (4, found[1]))
    assert S.trained_block_of(draws, None, "ddtree", None) == 4 and len(calls) == 1
    sc = ask()
    assert sc.limit.tokens == 4 and len(calls) == 2
    edited = S.edited_block(draws, sc)
    assert len(calls) == 3 and edited is not None
    assert "my/kimi-dflash-b8 at block_size 8, and data/drafters.csv gives it block_size 4" \
        in edited[0], edited
    accept = S.latent_acceptance(draws, None, "ddtree", None, 33, rng)[0]
    assert len(calls) == 4 and accept.max() <= 4.0 and accept.max() > 3.0, accept.max()


def test_a_configurations_limit_with_its_drafter_is_set_in_one_place(kimi_b8, monkeypatch):
    """What a step can emit with its drafter (the methods table's bound at the block the
    drafter was trained at) was set on a scenario twice, each writing ``trained_block_of``
    then ``accept_limit``: by ``resolve_scenario`` (the default card's, or ``--drafter``'s)
    and by ``with_drafter`` (the card ``--drafter`` names). Both ask ``drafter_limit`` now:
    by hand, DDTree budget 32 with no block and the block-8 card my/kimi-dflash-b8 emits at
    most 8 tokens a step (8 - 1 drafts + 1), not 33 (M); the helper made to say 5 is what
    both scenarios carry, each asking it once."""
    from ddtree_bayes import api
    from ddtree_bayes.core.methods import max_accept
    from ddtree_bayes.engine import scenario as S

    monkeypatch.chdir(kimi_b8)
    draws = api.load(workdir=kimi_b8)
    draws.meta["model"]["step_form"] = "structured"   # (--drafter's; no step is priced here)

    def ask():
        return S.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang",
                                  method="ddtree", block=None, budget=32, verify_tokens=33,
                                  context_tokens=None)

    sc = ask()
    assert sc.limit.tokens == 8 and sc.limit.rule.startswith("the trained block")
    assert S.with_drafter(draws, sc, "my/kimi-dflash-b8").limit.tokens == 8
    assert S.drafter_limit(draws, None, "ddtree", None, 32, 33).tokens == 8
    assert S.drafter_limit(draws, None, "ar", None, None, 1).tokens == 1

    calls = []
    five = max_accept("ddtree", None, 32, draws.methods, 33, trained_block=5)
    monkeypatch.setattr(S, "drafter_limit", lambda *a, **k: calls.append(a[1:]) or five)
    sc = ask()
    assert sc.limit.tokens == 5 and len(calls) == 1
    assert S.with_drafter(draws, sc, "my/kimi-dflash-b8").limit.tokens == 5 and len(calls) == 2
    assert calls[1][5] == "my/kimi-dflash-b8"   # (the card --drafter names)


def test_tracks_acceptance_bound_is_the_one_predict_sets(kimi_b8, monkeypatch):
    """``track``'s check of a query's ``--accept`` with a fit (workflows/living/tracking.py
    ``check_accept_limit``) wrote the bound a third time (``trained_block_of``, then core's
    ``max_accept``); it asks ``scenario.drafter_limit`` now, as ``resolve_scenario`` and
    ``with_drafter`` do. By hand: DDTree budget 32, no block, of kimi-k2.6 with the block-8
    card: ``--accept 8`` tracked, 9 refused; the helper made to say 5 refuses 6, once per
    check."""
    from ddtree_bayes import api
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.core.methods import max_accept
    from ddtree_bayes.engine import scenario as S
    from ddtree_bayes.workflows import living

    monkeypatch.chdir(kimi_b8)
    draws = api.load(workdir=kimi_b8)

    def check(accept):
        living.check_accept_limit(living.normalize_query(
            {"method": "ddtree", "budget": 32, "engine": "sglang", "accept": accept}), draws)

    check("8")
    with pytest.raises(QueryError, match="at most 8 tokens per step"):
        check("9")
    calls = []
    five = max_accept("ddtree", None, 32, draws.methods, 33, trained_block=5)
    monkeypatch.setattr(S, "drafter_limit", lambda *a, **k: calls.append(a[1:]) or five)
    check("5")
    assert len(calls) == 1
    with pytest.raises(QueryError, match="at most 5 tokens per step"):
        check("6")
    assert len(calls) == 2

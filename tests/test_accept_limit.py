"""What a method can emit: one rule (core/methods.py max_accept) for the most tokens a step
of a configuration can emit, and every place acceptance enters keeping to it (issue 18,
"Impossible acceptances are answered")."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.methods import max_accept
from ddtree_bayes.core.paths import bundled
from test_cli_support import listing, make_point_mass_workdir, run_cli

METHODS = parse_priors(bundled("priors.toml").read_text(), "bundled").methods
#: the bound of a DFlash / DDTree block, whose position 0 is the anchor (see the end)
ANCHOR = "block - 1 drafts + 1"


# ------------------------------------------------------------------ the rule, by hand
@pytest.mark.parametrize(("method", "block", "budget", "verify", "tokens", "rule"), [
    # a block-16 DDTree: the anchor and 15 draft positions, a tree of 32 nodes built on them,
    # 33 verified: 15 drafts + the bonus token
    ("ddtree", 16, 32, 33, 16, "block - 1 drafts + 1"),
    ("ddtree", 16, 16, 17, 16, "block - 1 drafts + 1"),
    ("ddtree", 16, 8, 9, 9, "budget + 1"),          # an 8-node tree is at most 8 deep
    ("ddtree", None, 32, 33, 33, "budget + 1"),     # depth not known: the budget bounds it
    ("ddtree", 16, 32, 10, 10, "the tokens it verifies"),   # an explicit --verify-tokens 10
    # a DFlash-16 chain verifies 16 tokens (1 anchor + 15 drafted): 15 + the bonus token
    # (the first of equal bounds names it: the block's)
    ("dflash", 16, 15, 16, 16, "block - 1 drafts + 1"),
    # chains: block = depth = k draft tokens + the bonus token
    ("eagle3", 4, 4, 5, 5, "depth + 1 (block = depth)"),
    ("mtp", 3, 3, 4, 4, "depth + 1 (block = depth)"),
    ("draft-model", 5, None, 6, 6, "depth + 1 (block = depth)"),
    # an EAGLE top-k tree: 8 head passes deep, 63 nodes -> 9, not 64
    ("eagle3", 8, 63, 64, 9, "depth + 1 (block = depth)"),
    ("eagle2", 8, None, None, 9, "depth + 1 (block = depth)"),
    ("medusa", 4, 42, 43, 5, "block + 1"),
    ("ar", None, None, 1, 1, "autoregressive decoding emits exactly 1"),
    # a method with no [methods] table (the fraction form needs none): the block bounds it
    ("lookahead", 6, None, 7, 7, "block + 1"),
])
def test_the_rule_by_hand(method, block, budget, verify, tokens, rule):
    limit = max_accept(method, block, budget, METHODS, verify)
    assert (limit.tokens, limit.rule) == (tokens, rule)
    assert limit.admits(tokens) and not limit.admits(tokens + 0.01) and not limit.admits(0.99)


def test_nothing_known_is_unbounded_and_the_words_name_the_bound():
    assert math.isinf(max_accept("eagle3", None, None, METHODS).tokens)
    limit = max_accept("ddtree", 16, 32, METHODS, 33)
    assert limit.refusal("--accept 20") == ("--accept 20 is above what ddtree with block 16 can "
                                            "emit (at most 16 tokens per step: block - 1 drafts "
                                            "+ 1)")
    assert max_accept("ar", None, None).describe() == (
        "at most 1 token per step: autoregressive decoding emits exactly 1")


# ------------------------------------------------------------------ every command, one limit
# The point-mass fit (engine/testing.py): a B300 DDTree block-16 step at budget B takes
# 10 * (1 + B / 32) ms in SGLang, so budget 32 (M = 33) is 20 ms: 50 tok/s per token.
@pytest.fixture(scope="module")
def pm(tmp_path_factory):
    return make_point_mass_workdir(tmp_path_factory.mktemp("accept_limit") / "w")


@pytest.fixture
def work(pm, tmp_path):
    return Path(shutil.copytree(pm, tmp_path / "w"))


def refused(code: int, out: str, err: str) -> str:
    """Exit 2, nothing on stdout, one line on stderr with a fix."""
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and "(fix: " in err and "Traceback" not in err, err
    return err


BLOCK16 = "ddtree with block 16 can emit (at most 16 tokens per step: block - 1 drafts + 1)"


def test_predict_refuses_what_a_block16_ddtree_cannot_emit_and_answers_16(work):
    for accept in ("20", "33", "12,14,20", "12:20", "16.5", "17"):
        err = refused(*run_cli(work, "predict", "--accept", accept, "--format", "json"))
        assert err.startswith(f"ddtree-bayes: error: --accept {accept}") and BLOCK16 in err
    code, out, err = run_cli(work, "predict", "--accept", "16", "--engine", "sglang",
                             "--format", "json")
    (row,) = json.loads(out)["rows"]
    assert code == 0 and row["accept"] == 16.0 and row["median"] == pytest.approx(16 * 50)
    assert (row["accept_max"], row["accept_max_rule"]) == (16.0, ANCHOR)
    code, out, _ = run_cli(work, "predict", "--accept", "12:16", "--engine", "sglang",
                           "--format", "json")
    assert code == 0 and json.loads(out)["rows"][-1]["accept_distribution"]["upper"] == 16.0


def test_predict_refuses_more_than_a_depth4_chain_emits(work):
    flags = ("predict", "--method", "eagle3", "--block", "4", "--engine", "sglang")
    err = refused(*run_cli(work, *flags, "--accept", "6"))
    assert ("--accept 6 is above what eagle3 with block 4 can emit (at most 5 tokens per "
            "step: depth + 1 (block = depth))") in err
    code, out, _ = run_cli(work, *flags, "--accept", "5", "--format", "json")
    (row,) = json.loads(out)["rows"]
    assert code == 0 and (row["verify_tokens"], row["accept_max"]) == (5, 5.0)


def test_next_and_track_refuse_as_predict_does(work):
    for query in ("--accept 20", "--accept 12:17", "--method ddtree --block 16 --budget 64 "
                  "--accept 17", "--method eagle3 --block 4 --accept 6"):
        err = refused(*run_cli(work, "next", "--query", query))
        assert err.startswith("ddtree-bayes: error: --query: --accept") and "can emit" in err
    # (next needs measurement noise to weigh a candidate: a noisy point mass)
    noisy = make_point_mass_workdir(work.parent / "noisy", noise_sd=0.05)
    code, out, err = run_cli(noisy, "next", "--query", "--accept 16 --engine sglang", "--format",
                             "json")
    query = json.loads(out)["query"]
    assert code == 0 and query["accept"] == 16.0
    assert query["median"] == pytest.approx(16 * 50, rel=0.02)
    before = listing(work)
    err = refused(*run_cli(work, "track", "--accept", "17"))
    assert BLOCK16 in err
    err = refused(*run_cli(work, "track", "--method", "eagle3", "--block", "4",
                           "--accept", "5.5"))
    assert "(at most 5 tokens per step: depth + 1 (block = depth))" in err
    assert listing(work) == before and not (work / "models" / "tracked.json").exists()
    code, out, _ = run_cli(work, "track", "--accept", "16", "--engine", "sglang",
                           "--format", "json")
    now = json.loads(out)["now"]
    assert code == 0 and now["rows"][0]["median"] == pytest.approx(16 * 50)


def test_track_refuses_without_a_fit_from_the_priors_methods(tmp_path):
    root = tmp_path / "nofit"
    (root / "models").mkdir(parents=True)
    err = refused(*run_cli(root, "track", "--accept", "17"))
    assert BLOCK16 in err and not (root / "models" / "tracked.json").exists()


def test_track_refuses_a_tree_method_given_only_its_depth(tmp_path):
    """`track add --method eagle2 --block 4` was stored, and every later update then reported
    an error for it: EAGLE-2 verifies a tree, and the block is its depth, not its size."""
    root = tmp_path / "nofit"
    (root / "models").mkdir(parents=True)
    code, _, err = run_cli(root, "track", "--method", "eagle2", "--block", "4", "--engine",
                           "sglang", "--accept", "3")
    assert code == 2 and not (root / "models" / "tracked.json").exists()
    assert err.strip().endswith(
        "cannot tell how many tokens eagle2 verifies per step: eagle2 verifies a tree, and "
        "--block is its depth (fix: give --budget (the tree's draft tokens) or --verify-tokens)")


def test_optimize_caps_at_the_limit_predict_refuses_above(work):
    """An acceptance curve at the most a step emits at its reference budget (16), growing past
    it with the bundled gain: optimize's acceptance stops where predict stops answering (16 =
    block from budget 16 on, the block's position 0 being the anchor; B + 1 = 9 at budget 8).
    An accept_ref prior above it (a point at 30) is refused, as an [[acceptance]] entry's is
    (adv8: it answered every budget at the cap, exit 0)."""
    text = (work / "models" / "priors.toml").read_text()
    start = text.index("[acceptance_curve.accept_ref]")
    end = text.index("[acceptance_curve.gain]")
    for name, value in (("greedy.toml", "16.0"), ("greedy30.toml", "30.0")):
        (work / name).write_text(
            text[:start] + f'[acceptance_curve.accept_ref]\ndist = "point"\nvalue = {value}\n'
            'rationale = "r"\nsource = "s"\n\n' + text[end:])
    refused(*run_cli(work, "optimize", "--engine", "sglang", "--priors", "greedy30.toml"))
    code, out, err = run_cli(work, "optimize", "--engine", "sglang", "--budgets", "8,16,32,64",
                             "--priors", "greedy.toml", "--format", "json")
    assert code == 0, err
    rows = {r["budget"]: r for r in json.loads(out)["rows"]}
    assert {b: r["accept"] for b, r in rows.items()} == {8: 9.0, 16: 16.0, 32: 16.0, 64: 16.0}
    assert {b: r["accept_max"] for b, r in rows.items()} == {8: 9.0, 16: 16.0, 32: 16.0,
                                                             64: 16.0}
    for budget, row in rows.items():
        flags = ("predict", "--budget", str(budget), "--engine", "sglang", "--format", "json")
        code, out, _ = run_cli(work, *flags, "--accept", f"{row['accept_max']:g}")
        assert code == 0 and json.loads(out)["rows"][0]["accept_max"] == row["accept_max"]
        refused(*run_cli(work, *flags, "--accept", f"{row['accept_max'] + 0.5:g}"))
    # the bundled curve stays inside too
    code, out, _ = run_cli(work, "optimize", "--engine", "sglang", "--format", "json")
    assert code == 0 and all(r["accept_hi"] <= r["accept_max"] for r in json.loads(out)["rows"])


def test_the_report_fan_and_variance_stay_within_the_limit():
    """The bundled default's fan (1..20 asked) stops at 16 and says which it left out; the
    variance shares' U(12, 16) is inside already."""
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import _section_map

    draws = point_mass_draws()
    from ddtree_bayes.engine.question import default_question

    d = default_question(draws)
    fan = sections.fan_section(draws, 1, None, d)
    assert fan["accept"] == [float(a) for a in range(1, 17)]
    assert (fan["accept_max"], fan["accept_max_rule"]) == (16.0, ANCHOR)
    assert fan["accept_clipped"] == [17.0, 18.0, 19.0, 20.0]
    for e in fan["engines"].values():
        assert len(e["quantiles"]) == 16 and len(e["original"] or [0] * 16) == 16
    # 16 tokens in 20 ms (SGLang): 800 tok/s at the top of the grid, nothing beyond it
    assert fan["engines"]["sglang"]["quantiles"][-1][2] == pytest.approx(800)
    assert "acceptance U(12,16)" in sections.variance_shares(draws, 1, None, d)["sglang"]["shares"]
    # the report's first table: rows at 4, 8, 12, 14, 16 and the limit, and a title saying so
    summary = {"sampling": {"parameters": []}, "prior_posterior": [], "ppc": {"rows": []},
               "loo": {"elpd": 0.0, "se": 0.0, "p_loo": 0.0, "n_flagged": 0, "pareto_k": [],
                       "loo_pit": []},
               "psense": {"headline": "x", "headline_by_prior": {}, "overall": []},
               "fan": fan, "variance": {}, "breakdown": []}
    title, _, rows, _ = _section_map(summary)["prediction"]
    assert {r[1] for r in rows} == {"4", "8", "12", "14", "16"}   # (shown as accept_shown)
    assert f"acceptance stops at 16, the most a step can emit ({ANCHOR})" in title


def test_prior_draws_stop_at_the_limit_and_say_so():
    """A method-wide ddtree prior (no block) asked of a block-4 tree: truncated at 4 (3
    drafts + 1). With the point mass, M = 5 is a 9 / 0.8 = 11.25 ms step in SGLang, 88.9 tok/s
    per token."""

    from ddtree_bayes.cli.predict import typed_rows
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws(n=4000)
    text = draws.priors_toml.replace(
        '[[acceptance]]\nmodel = "kimi-k2.6"\nmethod = "ddtree"\nblock = 8\nbudget = 8\n',
        '[[acceptance]]\nmethod = "ddtree"\n')
    assert text != draws.priors_toml
    draws = draws.view(priors_toml=text)
    rows = P.predict(draws, hardware="b300", method="ddtree", block=4, budget=4,
                          engines=["sglang"])
    (row,) = rows
    assert row["accept_kind"] == "prior" and f"upper=4, truncated at {ANCHOR}" in row["accept"]
    assert row["hi90"] <= 4 * 1000 / 11.25 + 1e-9
    (typed,) = typed_rows(rows)
    assert typed["accept_distribution"]["params"]["upper"] == 4.0
    assert typed["accept_distribution"]["truncated_at"] == 4.0


def test_fit_and_add_refuse_an_accept_len_above_its_limit(work):
    """A block-16 DDTree row claiming 20 tokens per step (below its 33 verified): fit
    refuses the file, add refuses the row; one line naming file, row, column and limit;
    nothing written."""
    data = work / "data" / "measurements.csv"
    bad = work / "bad.csv"
    bad.write_text(data.read_text() + "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,20,,900,test,\n")
    row = len(bad.read_text().splitlines())
    before, data_bytes = listing(work), data.read_bytes()
    err = refused(*run_cli(work, "fit", "--data", "bad.csv"))
    assert (f"bad.csv, row {row}, column 'accept_len': accept_len 20 is above what {BLOCK16}"
            in err)
    assert listing(work) == before
    err = refused(*run_cli(work, "add", "--hardware", "b300", "--engine", "sglang", "--method",
                           "ddtree", "--block", "16", "--budget", "32", "--accept", "20",
                           "--tok-s", "900", "--source", "test"))
    assert "column 'accept_len': accept_len 20 is above what " + BLOCK16 in err
    # (add leaves its lock file, as always; the data file is untouched)
    assert data.read_bytes() == data_bytes
    assert set(listing(work)) - set(before) <= {"data/.measurements.csv.lock"}


def test_simulate_refuses_a_design_row_no_step_can_emit(tmp_path):
    """A design row asking a depth-3 eagle3 chain for 4.5 tokens per step would simulate a
    file that fit then refuses: simulate says so first, naming the row and the limit."""
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.workflows.simulate import load_design, load_truth

    examples = Path(__file__).resolve().parents[1] / "data" / "examples"
    truth = load_truth(examples / "truth_dense_consumer.toml")
    lines = (examples / "design_dense_consumer.csv").read_text().splitlines()
    eagle = next(i for i, line in enumerate(lines) if ",eagle3,3," in line)
    fields = lines[eagle].split(",")
    fields[6] = "4.5"                                   # accept_len of a block-3 chain
    lines[eagle] = ",".join(fields)
    design = tmp_path / "design.csv"
    design.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        load_design(design, truth)
    err = info.value
    assert (err.row, err.column) == (eagle + 1, "accept_len")
    assert "accept_len 4.5 is above what eagle3 with block 3 can emit (at most 4" in str(err)


# ------------------------------------------------------------------ the anchor of a block drafter
# A DFlash block-B drafter's block holds the anchor (the previous step's bonus token) at
# position 0 and drafts B - 1 positions (z-lab/dflash dflash/model.py dflash_generate:
# block_output_ids[:, 1:] holds the drafts, a step emits acceptance_length + 1 <= B); DDTree
# builds its tree from those B - 1 distributions (liranringel/ddtree ddtree.py: draft_horizon
# = block_size - 1 is the depth limit). So both emit at most B tokens a step, not B + 1.


@pytest.mark.parametrize(("method", "block", "budget", "verify", "tokens"), [
    ("ddtree", 16, 32, 33, 16), ("ddtree", 8, 8, 9, 8), ("ddtree", 16, 16, 17, 16),
    ("dflash", 16, None, None, 16), ("dflash", 8, None, 9, 8),
])
def test_a_block_drafter_with_an_anchor_emits_at_most_its_block(method, block, budget, verify,
                                                                tokens):
    for table in (METHODS, None):   # the bundled table, and a reader with none of its own
        limit = max_accept(method, block, budget, table, verify)
        assert (limit.tokens, limit.rule) == (tokens, ANCHOR)
    assert METHODS[method].depth == "block - 1"
    # the sequential and head drafters keep block + 1 (depth + 1)
    assert max_accept("medusa", 16, 32, METHODS, 33).tokens == 17
    assert max_accept("pard", 16, None, METHODS, 17).tokens == 17
    assert max_accept("eagle3", 16, 16, METHODS, 17).tokens == 17


@pytest.mark.parametrize("flags", [
    ("--method", "ddtree", "--block", "8", "--budget", "8", "--accept", "9"),
    ("--method", "dflash", "--block", "16", "--accept", "17"),
])
def test_predict_refuses_one_token_more_than_the_block(work, flags):
    method, block = flags[1], flags[3]
    err = refused(*run_cli(work, "predict", "--engine", "sglang", *flags))
    assert (f"--accept {flags[-1]} is above what {method} with block {block} can emit (at most "
            f"{block} tokens per step: {ANCHOR})") in err
    code, out, err = run_cli(work, "predict", "--engine", "sglang", *flags[:-1], block,
                             "--format", "json")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["accept_max"] == float(block)


def test_add_refuses_accept_len_17_of_a_block16_ddtree(work):
    before = (work / "data" / "measurements.csv").read_bytes()
    err = refused(*run_cli(work, "add", "--hardware", "b300", "--engine", "sglang", "--method",
                           "ddtree", "--block", "16", "--budget", "32", "--accept", "17",
                           "--tok-s", "600", "--source", "test"))
    assert ("column 'accept_len': accept_len 17 is above what ddtree with block 16 can emit "
            f"(at most 16 tokens per step: {ANCHOR})") in err
    assert (work / "data" / "measurements.csv").read_bytes() == before


def test_a_table_without_the_method_bounds_it_as_the_bundled_table_does(tmp_path):
    """max_accept bounded a method its given [methods] table lacks as ``depth = "block"``
    (block + 1 = 17 for a block-16 DDTree) where method_spec, which every other reader asks,
    falls back to the bundled table (depth "block - 1": 16): a fraction-form priors file
    without [methods.ddtree] (the form needs none) let `predict --accept 16.5` answer."""
    from test_cli_support import write_point_mass_fit

    without = {name: spec for name, spec in METHODS.items() if name != "ddtree"}
    limit = max_accept("ddtree", 16, 32, without, 33)
    assert (limit.tokens, limit.rule) == (16.0, ANCHOR)
    work = make_point_mass_workdir(tmp_path / "w")
    priors = work / "models" / "priors.toml"
    text = priors.read_text().replace('step_form = "structured"', 'step_form = "fraction"', 1)
    start = text.index("[methods.ddtree]\n")
    end = text.index("\n[", start + 1) + 1
    priors.write_text(text[:start] + text[end:])
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv", priors,
                         work / "data" / "hardware.csv")
    err = refused(*run_cli(work, "predict", "--accept", "16.5", "--format", "json"))
    assert err.startswith("ddtree-bayes: error: --accept 16.5") and BLOCK16 in err

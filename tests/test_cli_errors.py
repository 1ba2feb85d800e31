"""Regressions found by trying the CLI as a new user (issue 12), names checked at predict,
and the last-resort error handler. A point-mass fit answers by hand: the default scenario
(B300 x8, DDTree budget 32, M = 33) steps in 20 ms in SGLang, so acceptance 12 gives 600
tok/s (tests/test_cli_support.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ddtree_bayes.engine import names as N
from ddtree_bayes.engine.testing import point_mass_draws
from test_cli_support import BEYOND_M33, listing, make_point_mass_workdir, run_cli


@pytest.fixture(scope="module")
def pm(tmp_path_factory):
    return make_point_mass_workdir(tmp_path_factory.mktemp("errors") / "w")


@pytest.fixture
def work(pm, tmp_path):
    return Path(shutil.copytree(pm, tmp_path / "w"))


def one_error(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "(fix: " in err
    return err


# ---------------------------------------------------------------- the three crashes
def test_predict_gpus_0_is_a_usage_error_not_a_zero_division(work):
    err = one_error(*run_cli(work, "predict", "--gpus", "0"))
    assert err == ("ddtree-bayes: error: argument --gpus: 0 is outside 1..1024 "
                   "(fix: give the GPU count, e.g. --gpus 8)\n")
    for bad in ("-1", "8.5", "eight", "", "99999999999999999999"):
        assert "argument --gpus: " in one_error(*run_cli(work, "predict", "--gpus", bad))


def test_an_out_of_range_value_is_echoed_as_typed(work):
    """20 nines were read through a float and echoed as 1 followed by 20 zeros; 1e30 tokens
    of context was called "not a finite token count"."""
    err = one_error(*run_cli(work, "predict", "--concurrency", "9" * 20))
    assert err.startswith(f"ddtree-bayes: error: argument --concurrency: {'9' * 20} is "
                          "outside 1..4096 (fix: ")
    err = one_error(*run_cli(work, "predict", "--concurrency", "+" + "9" * 20))
    assert f"--concurrency: {'9' * 20} is outside 1..4096" in err
    err = one_error(*run_cli(work, "predict", "--context", "1e30"))
    assert err.startswith("ddtree-bayes: error: argument --context: '1e30' is above the "
                          "longest context taken (1,099,511,627,776 tokens) (fix: ")
    err = one_error(*run_cli(work, "predict", "--context", "nan"))
    assert "'nan' is not a token count" in err


def test_a_value_starting_with_a_dash_says_to_write_flag_equals_value(work):
    """argparse reads `--source -x` as a flag and refused it with "expected one argument"
    and `see --help`, which does not say the way that works: `--source=-x`. The fix says it
    (the dry part: nothing written); `--source=-x` is taken."""
    row = ["--hardware", "b300", "--engine", "sglang", "--method", "ar", "--accept", "1",
           "--tok-s", "100"]
    before = listing(work)
    err = one_error(*run_cli(work, "add", *row, "--source", "-x"))
    assert err == ("ddtree-bayes: error: argument --source: expected one argument: '-x' "
                   "starts with '-' and was read as a flag (fix: write --source=-x to give a "
                   "value that starts with '-')\n")
    assert listing(work) == before
    err = one_error(*run_cli(work, "add", *row, "--source", "-x", "--notes", "-a b c"))
    assert "(fix: write --source=-x to give a value that starts with '-')" in err
    err = one_error(*run_cli(work, "predict", "--context", "--gpus", "8"))   # no value at all
    assert err == ("ddtree-bayes: error: argument --context: expected one argument (fix: see "
                   "`ddtree-bayes predict --help`)\n")
    code, _, err = run_cli(work, "add", *row, "--source=-x")
    assert code == 0, err
    assert (work / "data" / "measurements.csv").read_text().splitlines()[-1].endswith(",-x,")


@pytest.mark.parametrize(("flag", "text", "problem"), [
    ("--gpus", "1_6", "is not a whole number"),        # Python's int() read it as 16
    ("--gpus", "\uff18", "is not a whole number"),      # a full-width 8, read as 8
    ("--accept", "1_2", "is not a number, list or range"),   # read as 12
    ("--accept", "12:1_6", "is not a number, list or range"),
    ("--prob", "0.1_5", "is not a number"),
])
def test_numbers_only_python_reads_are_refused_as_a_measurement_file_refuses_them(
        work, flag, text, problem):
    err = one_error(*run_cli(work, "predict", flag, text))
    assert f"argument {flag}: {text!r} {problem}" in err


def test_numbers_a_measurement_file_takes_are_taken_by_the_flags(work):
    """``8.0`` and ``1e5`` are numbers in a CSV row: the flags take them too (the answer of
    ``--gpus 8.0`` is the answer of ``--gpus 8``)."""
    code, a, _ = run_cli(work, "predict", "--gpus", "8.0", "--accept", "12", "--format", "json")
    code2, b, _ = run_cli(work, "predict", "--gpus", "8", "--accept", "12", "--format", "json")
    assert code == code2 == 0
    assert json.loads(a)["rows"] == json.loads(b)["rows"]
    code, out, err = run_cli(work, "predict", "--context", "1e3", "--accept", "12", "--format",
                             "json")
    assert code == 0, err
    assert {r["context_tokens"] for r in json.loads(out)["rows"]} == {1000}


def test_predict_budget_0_blames_the_budget(work):
    err = one_error(*run_cli(work, "predict", "--budget", "0"))
    assert "argument --budget: 0 is outside 1..1000000" in err and "prior" not in err


def test_predict_engine_typo_warns_with_the_closest_name(work):
    code, out, err = run_cli(work, "predict", "--engine", "sglnag", "--accept", "12")
    assert code == 0
    assert err == ("ddtree-bayes: warning: --engine 'sglnag' was never measured, nor given a "
                   "relation in the priors file: its speculative overhead is drawn from the "
                   "pooled population (a wide interval); did you mean sglang?\n"
                   f"ddtree-bayes: warning: {BEYOND_M33}\n")   # (budget 32 past the rows' 8)
    assert "sglnag  12" in out  # still answered, from the pooled population
    err = one_error(*run_cli(work, "predict", "--engine", "sglnag", "--accept", "12",
                             "--strict"))
    assert "did you mean sglang?" in err and "drop --strict" in err


# ---------------------------------------------------------------- names
def test_known_names_of_the_point_mass():
    known = N.known_names(point_mass_draws())
    assert {"sglang", "native"} <= known["engine"]  # measured; declared by the relation
    assert {"ar", "ddtree", "eagle3"} <= known["method"]  # built in; acceptance priors
    assert {"b300", "h200", "rtx-pro-6000"} <= known["hardware"]  # the hardware table
    assert "kimi-k2.6" in known["model"]


@pytest.mark.parametrize(("kwargs", "kind", "suggestions"), [
    ({"engines": ["sglang", "natve"]}, "engine", ("native",)),
    ({"method": "ddtre"}, "method", ("ddtree",)),
    ({"hardware": "h2000"}, "hardware", ("h200",)),
    ({"model": "kimi-k2.5"}, "model", ("kimi-k2.6",)),
    ({"engines": ["mlc"]}, "engine", ()),
])
def test_unknown_names_and_suggestions(kwargs, kind, suggestions):
    (u,) = N.unknown_names(point_mass_draws(), **kwargs)
    assert (u.kind, u.suggestions[:len(suggestions)]) == (kind, suggestions)
    assert u.message().startswith(f"--{kind} ")
    if not suggestions:
        assert u.message().endswith("; known: native, sglang, vllm")
    assert N.unknown_names(point_mass_draws(), engines=["sglang", "native"], method="ddtree",
                           hardware="b300") == []


def test_unknown_hardware_is_an_error_with_suggestions(work):
    err = one_error(*run_cli(work, "predict", "--hardware", "b30", "--accept", "12"))
    assert "--hardware 'b30'" in err and "did you mean b300 or gb300?" in err


def test_method_typo_and_query_typo_warn(work):
    code, _, err = run_cli(work, "predict", "--method", "ddtre", "--budget", "32",
                           "--accept", "12", "--engine", "sglang")
    assert code == 0 and "--method 'ddtre'" in err and "did you mean ddtree?" in err
    code, _, err = run_cli(work, "optimize", "--engine", "sglnag", "--format", "json")
    assert code == 0 and "did you mean sglang?" in err


# ---------------------------------------------------------------- other bounds, by hand
def test_accept_beyond_the_verified_tokens_names_the_flag(work):
    err = one_error(*run_cli(work, "predict", "--accept", "12,40"))
    assert ("--accept 12,40 (up to 40) is above what ddtree with block 16 can emit (at most 16 "
            "tokens per step: block - 1 drafts + 1)") in err
    err = one_error(*run_cli(work, "predict", "--method", "ar", "--accept", "2"))
    assert ("--accept 2 is above what ar can emit (at most 1 token per step: autoregressive "
            "decoding emits exactly 1)") in err
    # a block-16 DDTree verifies 33 tokens but emits at most 16 (15 drafts after the anchor +
    # the bonus token): 33 and 17 are refused, 16 answers
    for accept in ("33", "17"):
        err = one_error(*run_cli(work, "predict", "--accept", accept, "--engine", "sglang"))
        assert f"--accept {accept} is above what ddtree with block 16 can emit" in err
    code, out, _ = run_cli(work, "predict", "--accept", "16", "--engine", "sglang",
                           "--format", "json")
    assert code == 0 and json.loads(out)["rows"][0]["median"] == pytest.approx(16 * 50)


def test_ar_with_a_block_or_budget_is_refused_wherever_a_question_is_asked(work):
    """`predict --method ar --budget 32` answered "ar, budget 32, verify 1 tokens"."""
    line = ("ddtree-bayes: error: autoregressive decoding (ar) drafts nothing: {} is no "
            "configuration of it (fix: drop --block/--budget, or give the speculative "
            "--method)\n")
    before = listing(work)
    for argv, flag in ((("predict", "--method", "ar", "--budget", "32"), "--budget 32"),
                       (("predict", "--method", "ar", "--block", "4"), "--block 4"),
                       (("predict", "--method", "ar", "--block", "4", "--budget", "8"),
                        "--block 4"),
                       (("next", "--query", "--method ar --budget 32"), "--budget 32"),
                       (("track", "add", "--method", "ar", "--block", "4"), "--block 4")):
        assert one_error(*run_cli(work, *argv)) == line.format(flag), argv
    assert listing(work) == before
    code, out, err = run_cli(work, "predict", "--method", "ar", "--engine", "sglang")
    assert code == 0, err
    assert out.splitlines()[1] == "b300 x8, ar, verify 1 token, context 0"


def test_json_numbers_are_numbers(work):
    code, out, _ = run_cli(work, "predict", "--accept", "12", "--engine", "sglang",
                           "--context", "1k", "--format", "json")
    (row,) = json.loads(out)["rows"]
    # context 1024 tokens = 1/64 unit: target 16 + 2 * (1/64) * 33**0.5 ms, / 0.8
    assert row["accept"] == 12.0 and row["context_tokens"] == 1024
    assert isinstance(row["context_tokens"], int)
    assert row["median"] == pytest.approx(12 / ((16 + 2 / 64 * 33 ** 0.5) / 0.8) * 1000)


def test_next_query_is_checked_like_predict(work):
    err = one_error(*run_cli(work, "next", "--query", "--gpus 0"))
    assert err.startswith("ddtree-bayes: error: --query '--gpus 0': argument --gpus: 0 is "
                          "outside 1..1024 (fix: give the GPU count")
    assert err.count("(fix:") == 1
    err = one_error(*run_cli(work, "next", "--query", "--hardware b30"))
    assert "--query: --hardware 'b30'" in err and "did you mean b300 or gb300?" in err
    err = one_error(*run_cli(work, "next", "--query", "--accept 40"))
    assert "--query: --accept 40 is above what ddtree with block 16 can emit (at most 16" in err


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--engine", "", "'' is not a name (lowercase letters, digits and . _ + -) (fix: use "
                     "engine names, e.g. --engine sglang,native)"),
    ("--model", "", "'' is not a model name (fix: use the name in the data's model column, "
                    "e.g. --model kimi-k2.6)"),
    ("--hardware", "", "'' is not a name (lowercase letters, digits and . _ + -) (fix: use a "
                       "GPU name from data/hardware.csv, e.g. --hardware b300)"),
    ("--method", "", "'' is not a name (lowercase letters, digits and . _ + -) (fix: use e.g. "
                     "--method ddtree, eagle3 or ar)"),
    ("--drafter", "", "'' is not a drafter card's name (fix: use a name from data/drafters.csv "
                      "or the built-in cards, e.g. --drafter yuhuili/EAGLE3-LLaMA3.1-Instruct-8B)"),
    ("--drafter", " ", "' ' is not a drafter card's name (fix: use a name from "
                       "data/drafters.csv or the built-in cards, e.g. --drafter "
                       "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B)")])
def test_an_empty_name_is_refused_in_predicts_words_in_next_query_and_track(work, flag, value,
                                                                           words):
    """An empty name is no name given: predict, next --query and track add each refuse it in
    the same words (exit 2, nothing written). `--drafter ''` was refused by predict and next
    as "--drafter needs a fit of the structured step (fix: refit ...)", which a refit would
    not mend, and by track add as not a drafter card's name."""
    before = listing(work)
    err = one_error(*run_cli(work, "predict", "--accept", "12", flag, value))
    assert err == f"ddtree-bayes: error: argument {flag}: {words}\n"
    query = f"--accept 12 {flag} {value!r}"
    err = one_error(*run_cli(work, "next", "--query", query))
    assert err == f"ddtree-bayes: error: --query {query!r}: argument {flag}: {words}\n"
    err = one_error(*run_cli(work, "track", "add", "--accept", "12", flag, value))
    assert err == f"ddtree-bayes: error: argument {flag}: {words}\n"
    assert listing(work) == before


def test_next_query_refuses_a_range_step_it_would_not_use(work):
    """`next --query "--accept 12:16:1"` answered for U(12,16) with the step dropped without a
    word (`--accept 12:16:3` too): a step sets the rows predict tabulates beside its U(12,16)
    row, but next answers one acceptance, the range's Uniform. Refused, the fix the range
    alone; the range and a single value are answered as before."""
    for text, lo_hi in (("12:16:1", "12:16"), ("12:16:0.5", "12:16"), ("13.5:15:1", "13.5:15")):
        before = listing(work)
        err = one_error(*run_cli(work, "next", "--query", f"--accept {text}"))
        assert err == (f"ddtree-bayes: error: --query --accept {text}: a step sets the rows "
                       "predict tabulates, but next answers one acceptance, the range as "
                       f"Uniform({lo_hi.replace(':', ', ')}) (fix: give --accept {lo_hi}, "
                       "or one value)\n")
        assert listing(work) == before


def test_a_binary_priors_file_is_named(work):
    (work / "bad.toml").write_bytes(b"\xff\xfe\x00")
    for argv in (("fit", "--priors", "bad.toml"), ("optimize", "--priors", "bad.toml"),
                 ("validate", "--priors", "bad.toml")):
        err = one_error(*run_cli(work, *argv))
        assert "--priors bad.toml: not UTF-8 text (byte 0)" in err


def test_update_chains_0_is_refused_before_anything_runs(work):
    before = listing(work)
    err = one_error(*run_cli(work, "update", "--chains", "0", "--force"))
    assert "argument --chains: 0 is outside 1..64" in err
    assert listing(work) == before


# ---------------------------------------------------------------- the last resort
def test_a_bug_is_one_line_and_the_traceback_is_opt_in(work, monkeypatch):
    from ddtree_bayes.engine import predictive as P

    def boom(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(P, "predict_rows", boom)   # (budget 8: measured, nothing to warn of)
    code, out, err = run_cli(work, "predict", "--accept", "4", "--block", "8", "--budget", "8")
    assert code == 1 and out == ""
    assert err == ("ddtree-bayes: internal error: ZeroDivisionError: float division by zero "
                   "(fix: this is a bug; rerun with DDTREE_BAYES_TRACEBACK=1 and report the "
                   "traceback)\n")
    monkeypatch.setenv("DDTREE_BAYES_TRACEBACK", "1")
    with pytest.raises(ZeroDivisionError):
        run_cli(work, "predict", "--accept", "12")


def test_an_unwritable_path_is_exit_2_naming_it(work):
    (work / "sim.csv").mkdir()
    examples = Path(__file__).parents[1] / "data" / "examples"
    err = one_error(*run_cli(work, "simulate", "--truth",
                             str(examples / "truth_dense_consumer.toml"), "--design",
                             str(examples / "design_dense_consumer.csv"), "--out", "sim.csv"))
    assert "--out sim.csv is a folder" in err
    err = one_error(*run_cli(work, "simulate", "--truth",
                             str(examples / "truth_dense_consumer.toml"), "--design",
                             str(examples / "design_dense_consumer.csv"), "--out",
                             "/proc/no/sim.csv"))
    assert "--out /proc/no/sim.csv: cannot write there (No such file or directory)" in err


@pytest.mark.parametrize(("cells", "fragment"), [
    ({"context_tokens": "-1000000"}, "column 'context_tokens': context_tokens must be a finite "
                                     "number >= 0, got -1000000"),   # wrote tok_s -46.01
    ({"context_tokens": "nan"}, "context_tokens must be a finite number >= 0, got nan"),
    ({"block": "0"}, "column 'block': block must be >= 1, got 0"),    # wrote a row at M = 1
    (None, "fields, header has"),                                     # a KeyError before
    # written as the truth's model at C = 1, exit 0
    ({"model": "other-model"}, "column 'model': model 'other-model': the truth file simulates"),
    ({"concurrency": "8"}, "column 'concurrency': concurrency 8: simulate writes single-stream"),
    ({"verify_tokens": "5"}, "column 'verify_tokens': verify_tokens 5: simulate derives"),
    # read by int(): simulated as 4 GPUs, exit 0
    ({"gpus": "0_4"}, "column 'gpus': '0_4' is not a plain number"),
    ({"accept_len": "2_5"}, "column 'accept_len': '2_5' is not a plain number"),
    # named no column ("row 2: not a number: '1.5' is not a whole number")
    ({"gpus": "1.5"}, "column 'gpus': '1.5' is not a whole number (fix: write "
                      "gpus as a whole number)"),
])
def test_a_design_row_no_run_can_have_is_refused(work, cells, fragment):
    """simulate --design: a negative context made a negative tok/s, block 0 an EAGLE row
    verifying 1 token, a short row an internal error, a model or concurrency column was
    dropped; one line each, nothing written."""
    examples = Path(__file__).parents[1] / "data" / "examples"
    lines = (examples / "design_dense_consumer.csv").read_text().splitlines()
    header = lines[0].split(",")
    row = next(line.split(",") for line in lines[1:] if ",eagle3," in line or ",mtp," in line)
    if cells is None:
        row = row[:-2]
    else:
        for col, value in cells.items():
            if col not in header:
                header, row = [*header, col], [*row, ""]
            row[header.index(col)] = value
    (work / "design.csv").write_text("\n".join([",".join(header), ",".join(row)]) + "\n")
    err = one_error(*run_cli(work, "simulate", "--truth",
                             str(examples / "truth_dense_consumer.toml"), "--design", "design.csv",
                             "--out", "sim.csv"))
    assert "design.csv, row 2" in err and fragment in err
    assert not (work / "sim.csv").exists()


def test_a_fractional_context_is_refused_as_a_measurement_file_refuses_it(work):
    """simulate wrote a design row's context 100.7 (and 1.5) to its output, a file `fit` then
    refuses (context_tokens takes whole tokens, as --context does); a context of 1e30 was
    simulated past the 2 ** 40 every other input stops at. Both refused in one line, nothing
    written; a whole count is written as given."""
    import csv

    examples = Path(__file__).parents[1] / "data" / "examples"
    lines = (examples / "design_dense_consumer.csv").read_text().splitlines()
    col = lines[0].split(",").index("context_tokens")

    def design(ctx: str) -> None:
        row = lines[1].split(",")
        row[col] = ctx
        (work / "design.csv").write_text("\n".join([lines[0], ",".join(row)]) + "\n")

    argv = ("simulate", "--truth", str(examples / "truth_dense_consumer.toml"), "--design",
            "design.csv", "--out", "sim.csv")
    for ctx, says in (("100.7", "context_tokens must be a whole number of tokens, got 100.7"),
                      ("1e30", "context_tokens must be 0 to 1099511627776 (2 ** 40), got 1e30")):
        design(ctx)
        err = one_error(*run_cli(work, *argv))
        assert f"design.csv, row 2, column 'context_tokens': {says} (fix: " in err, err
        assert not (work / "sim.csv").exists()
    design("32768")
    code, _, err = run_cli(work, *argv)
    assert code == 0, err
    with open(work / "sim.csv", newline="") as f:
        assert [r["context_tokens"] for r in csv.DictReader(f)] == ["32768"]


@pytest.mark.parametrize(("edit", "fragment"), [
    ("groups = 3\n", "groups must be tables [groups.\"<label>\"], got 3"),
    ('[groups]\n"rtx-4090x1/vllm/eagle3" = 0.2\n', "groups must be tables"),
])
def test_a_truth_file_whose_tables_are_not_tables_is_refused(work, edit, fragment):
    """`groups = 3` in a truth file was an internal error (AttributeError: 'int' object has no
    attribute 'items'), exit 1."""
    examples = Path(__file__).parents[1] / "data" / "examples"
    truth = (examples / "truth_dense_consumer.toml").read_text()
    no_groups = truth[:truth.index("[groups.")]          # the file's groups come last
    head, sep, rest = no_groups.partition("[")
    (work / "truth.toml").write_text(head + edit + sep + rest if edit.startswith("groups")
                                     else no_groups + edit)
    err = one_error(*run_cli(work, "simulate", "--truth", "truth.toml", "--design",
                             str(examples / "design_dense_consumer.csv"), "--out", "sim.csv"))
    assert "truth.toml" in err and fragment in err
    assert not (work / "sim.csv").exists()


@pytest.mark.parametrize(("old", "new", "column"), [
    ('moe_form = "power"', 'moe_from = "linear"', "moe_from"),
    ("moe_shape = 0.25", "moe_shpae = 0.25\nmoe_shape = 0.25", "systems.rtx-5090x1.moe_shpae"),
    ("overhead_frac = 0.20", "overhead_frac = 0.20\noverhead = 0.3",
     "groups.rtx-5090x1/vllm/eagle3.overhead"),
])
def test_a_truth_file_with_an_unknown_key_is_refused(work, old, new, column):
    """A typo in a truth file was ignored: `moe_from = "linear"` simulated the power form
    (an EAGLE-3 block-5 row at 205.6 tok/s where the linear form gives 159.7), exit 0."""
    examples = Path(__file__).parents[1] / "data" / "examples"
    truth = (examples / "truth_dense_consumer.toml").read_text()
    assert truth.count(old) == 1
    (work / "truth.toml").write_text(truth.replace(old, new))
    err = one_error(*run_cli(work, "simulate", "--truth", "truth.toml", "--design",
                             str(examples / "design_dense_consumer.csv"), "--out", "sim.csv"))
    assert f"truth.toml, column '{column}': unknown key" in err, err
    assert not (work / "sim.csv").exists()


def test_latest_names_the_latest_fit_and_a_fit_compared_with_itself_is_refused(tmp_path):
    """`--fit latest` is the latest fit, as `history` marks it (every command resolves fit
    ids through store.resolve); `compare --fits A,A` compared a fit with itself (exit 0,
    weight 1.00): refused with the id named."""
    import argparse

    from ddtree_bayes.cli import args as A
    from ddtree_bayes.engine import store

    models = tmp_path / "models"
    (models / "fits").mkdir(parents=True)
    (models / "fits" / "20261202T000000Z-abcdef12.nc").write_bytes(b"")
    (models / "latest.json").write_text(json.dumps(
        {"fit_id": "20261202T000000Z-abcdef12", "file": "fits/20261202T000000Z-abcdef12.nc"}))
    assert store.resolve(models, "latest") == store.resolve(models) == \
        models / "fits" / "20261202T000000Z-abcdef12.nc"
    with pytest.raises(argparse.ArgumentTypeError, match="names A1 twice"):
        A.fit_ids("A1,B2,A1")
    assert A.fit_ids("A1,B2") == "A1,B2"


@pytest.mark.parametrize("text", ["[]", '"fits/x.nc"', '{"file": 5}', '{"file": ""}',
                                  '{"file": null}'])
def test_a_latest_json_of_another_shape_is_unreadable(tmp_path, text):
    """`[]` in models/latest.json was "internal error: TypeError: list indices must be
    integers or slices, not str"; now it is the unreadable pointer, as cut-off JSON is."""
    from ddtree_bayes.core.errors import ArtifactError
    from ddtree_bayes.engine import store

    models = tmp_path / "models"
    (models / "fits").mkdir(parents=True)
    (models / "latest.json").write_text(text)
    with pytest.raises(ArtifactError) as err:
        store.resolve(models)
    assert str(err.value) == (f"{models / 'latest.json'} is unreadable (fix: re-run "
                              "`ddtree-bayes fit`)")


def test_a_malformed_fit_id_is_bad_input_not_a_missing_fit(work):
    """`diff <id> garbage` and `predict --fit garbage` exited 3, which the docs keep for a
    well-formed fit id that names no fit: a malformed one is bad input (exit 2)."""
    line = ("ddtree-bayes: error: 'garbage' is not a fit id (they read <UTC time>-<hash>, e.g. "
            "20261202T154255Z-d2899bb5) (fix: copy one from `ddtree-bayes history`, or say "
            "latest)\n")
    before = listing(work)
    for argv in (("diff", "latest", "garbage"), ("predict", "--fit", "garbage"),
                 ("compare", "--fits", "latest,garbage")):
        assert one_error(*run_cli(work, *argv)) == line, argv
    code, out, err = run_cli(work, "predict", "--fit", "20990101T000000Z-nope")
    assert (code, out) == (3, "")
    assert err.startswith("ddtree-bayes: error: no fit '20990101T000000Z-nope' in ")
    code, _, err = run_cli(work, "diff", "latest", "20260101T000000Z-pointmss")   # (it exists)
    assert code == 0, err
    assert listing(work) == before


def test_track_says_concurrency_is_not_tracked(work):
    """`track --accept 14 --concurrency 8` said "argument action: invalid choice: '8'"."""
    err = one_error(*run_cli(work, "track", "--accept", "14", "--concurrency", "8"))
    assert "argument --concurrency: '8': not tracked" in err
    assert "ddtree-bayes predict --concurrency" in err
    assert not (work / "models" / "tracked.json").exists()


def test_next_in_a_fit_of_several_models_says_to_name_the_model_in_its_query(work,
                                                                              monkeypatch):
    """`next` on a fit of several models said "say which with --model (fix: e.g. --model
    kimi-k2.6)", and `next --model kimi-k2.6` is refused by its parser: the model goes inside
    --query."""
    from ddtree_bayes.cli import decisions
    from ddtree_bayes.engine.testing import multi_model_draws

    monkeypatch.setattr(decisions, "_load", lambda args, warned: multi_model_draws())
    err = one_error(*run_cli(work, "next"))
    assert "holds 2 models (kimi-k2.6, llama-3.1-8b-instruct)" in err
    assert 'say which with --query "--model"' in err
    assert 'fix: e.g. --query "--model kimi-k2.6"' in err


def test_a_wide_interval_on_few_draws_is_said_to_be_noisy(work):
    """--prob 0.999 on 4000 draws rests each tail on ~2 draws and said nothing; this point-mass
    fit's 16 draws put 0.4 of a draw in each tail of a 95% interval."""
    code, out, err = run_cli(work, "predict", "--accept", "14", "--prob", "0.95")
    assert code == 0 and ("--prob 0.95: each tail of the wide interval rests on about 0.4 of "
                          "the fit's 16 draws") in err, err
    code, out, err = run_cli(work, "predict", "--accept", "14")
    assert code == 0 and "tail" not in err, err


def test_a_reweighted_fits_wide_interval_counts_its_effective_draws():
    """A fit ``update`` made by PSIS (no refit) stores 4000 draws, an importance resample
    worth about ``reweight.n_eff`` of them (~750-1500): at --prob 0.99 predict counted
    (1 - 0.99) / 2 x 4000 = 20 draws in each tail and said nothing, where the tails rest on
    (1 - 0.99) / 2 x 1000 = 5 effective draws. A sampled fit, and a reweighted fit whose draws
    were kept as they were (every stored draw distinct), count the stored draws."""
    from ddtree_bayes.engine import predictive as P

    assert P.wide_interval_warnings(0.99, 4000) == []                       # 20 per tail
    assert P.wide_interval_warnings(0.99, 4000, effective=1000.0) == [
        "--prob 0.99: each tail of the wide interval rests on about 5 of the fit's about 1000 "
        "effective draws (4000 stored: an importance resample), so its ends are noisy "
        "(`update --refit` samples afresh, or a smaller --prob)"]
    assert P.wide_interval_warnings(0.98, 4000, effective=1000.0) == []     # 10.0 per tail
    assert len(P.wide_interval_warnings(0.981, 4000, effective=1000.0)) == 1  # 9.5
    fit = point_mass_draws(n=8)
    assert fit.effective_draws is None
    fit.meta.update({"made_by": "psis-reweight",
                     "reweight": {"n_eff": 3.2, "n_draws": 8, "distinct_draws": 5}})
    assert fit.effective_draws == 3.2
    fit.meta["reweight"]["distinct_draws"] = 8    # kept as they were: the draws themselves
    assert fit.effective_draws is None


def test_predict_on_a_reweighted_fit_warns_of_its_effective_draws(work, monkeypatch):
    """The CLI's predict (and optimize/next, the API) take the fit's effective draws: this
    point-mass fit's 16 draws as a resample worth 3.2 of them put (1 - 0.95) / 2 x 3.2 = 0.08
    of a draw in each tail of a 95% interval (0.4 of the 16 stored)."""
    from ddtree_bayes.engine import store

    load = store.load

    def reweighted(*args, **kwargs):
        fit = load(*args, **kwargs)
        fit.meta.update({"made_by": "psis-reweight",
                         "reweight": {"n_eff": 3.2, "n_draws": 16, "distinct_draws": 6}})
        return fit

    monkeypatch.setattr(store, "load", reweighted)
    code, out, err = run_cli(work, "predict", "--accept", "14", "--prob", "0.95")
    assert code == 0 and ("--prob 0.95: each tail of the wide interval rests on about 0.08 of "
                          "the fit's about 3 effective draws (16 stored: an importance "
                          "resample)") in err, err
    # and the header, which said "(16 draws)" as of a sampled fit, says what they are worth
    assert out.startswith("ddtree-bayes predict: fit 20260101T000000Z-pointmss (16 draws: an "
                          "importance resample worth about 3, "), out


@pytest.mark.parametrize("argv", [("optimize",), ("next", "--k", "2")])
def test_optimize_and_next_say_a_wide_interval_on_few_draws_is_noisy(tmp_path, argv):
    """optimize --prob 0.95 and next --prob 0.95 on this point-mass fit's 16 draws printed a
    95% interval whose tails rest on 0.4 of a draw without the warning predict gives."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)   # (next reweights by it)
    code, out, err = run_cli(work, *argv, "--prob", "0.95")
    assert code == 0 and ("--prob 0.95: each tail of the wide interval rests on about 0.4 of "
                          "the fit's 16 draws") in err, err
    code, out, err = run_cli(work, *argv)
    assert code == 0 and "tail" not in err, err


@pytest.mark.parametrize("argv, help_of", [
    (("optimize", "--accept", "14"), "optimize"),    # was read as --acceptance-file 14
    (("predict", "--acc", "14"), "predict"),          # was read as --accept 14
    (("hardware", "list", "--form", "json"), "hardware list"),
])
def test_flags_are_never_abbreviated(tmp_path, argv, help_of):
    code, out, err = run_cli(tmp_path, *argv)
    assert code == 2 and out == ""
    assert err == (f"ddtree-bayes: error: unrecognized arguments: {' '.join(argv[-2:])} "
                   f"(fix: see `ddtree-bayes {help_of} --help`)\n")


def test_an_output_path_that_cannot_be_written_is_refused_before_the_work(tmp_path):
    """`validate --sbc 2 --plot /nonexistent/dir/x.png` ran both replicates (35 s; 30 min at
    --sbc 100) and then failed without naming the flag; `report --out FILE` after 27 s."""
    work = make_point_mass_workdir(tmp_path / "w", n=100)
    before = listing(work)
    code, out, err = run_cli(work, "validate", "--sbc", "2", "--plot", "/nonexistent/dir/x.png")
    assert code == 2 and listing(work) == before
    assert err.startswith("ddtree-bayes: error: --plot /nonexistent/dir/x.png: cannot write "
                          "there (no such folder /nonexistent/dir)")
    code, out, err = run_cli(work, "validate", "--plot", "x.png")
    assert code == 2 and "--plot draws the rank histograms of --sbc" in err
    (work / "afile").write_text("x")
    code, out, err = run_cli(work, "report", "--out", "afile")
    assert code == 2 and "afile is a file, not a folder to write reports into" in err
    assert not (work / "reports").exists()


def test_track_gives_no_answer_from_a_fit_that_failed_its_gates(tmp_path):
    """A trust pass: with an unconverged latest fit, `predict` exits 5 but `track` printed
    "now (fit ...): ... median 700, 90% 700-700 tok/s" from it (exit 0)."""
    work = make_point_mass_workdir(tmp_path / "w", converged=False)
    code, out, err = run_cli(work, "predict", "--accept", "14")
    assert code == 5 and out == "", err
    code, out, err = run_cli(work, "track", "--accept", "14")
    assert code == 0, err
    assert out.splitlines()[1:] == [
        "  the latest fit 20260101T000000Z-pointmss failed its convergence gates (max R-hat 1.2 "
        "> 1.01 (moe_share[b300x8])): no answer from it; `update` and `diff` show it once a fit "
        "passes"]
    assert "median" not in out
    code, out, _ = run_cli(work, "track", "--accept", "13", "--format", "json")
    now = json.loads(out)["now"]
    assert (code, now["fit_id"], now["rows"]) == (0, "20260101T000000Z-pointmss", [])
    assert now["note"].startswith("the latest fit 20260101T000000Z-pointmss failed its "
                                  "convergence gates")


def test_diff_gives_no_interval_from_a_fit_that_failed_its_gates(tmp_path):
    """A trust pass: `diff <converged> <unconverged>` printed the tracked queries' intervals
    under the unconverged fit (exit 0, "90% 700-700 -> 700-700 tok/s") that predict refuses."""
    from test_cli_support import write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    data, models = work / "data", work / "models"
    write_point_mass_fit(models, data / "measurements.csv", models / "priors.toml",
                         data / "hardware.csv", fit_id="20260101T000001Z-unconvgd",
                         converged=False)
    code, out, err = run_cli(work, "diff", "20260101T000000Z-pointmss", "latest")
    assert code == 0, err
    gates = ("fit 20260101T000001Z-unconvgd failed its convergence gates: max R-hat 1.2 > 1.01 "
             "(moe_share[b300x8])")
    tracked = out[out.index("tracked queries"):].splitlines()[1:]
    assert tracked == [
        f"  default: b300 x8 {engine} ddtree b16/B32 accept 14: 90% {now} -> - tok/s "
        f"(after: {gates})" for engine, now in (("sglang", "700-700"), ("native", "778-778"))]
    # the parameter table stays (it diagnoses the fit), flagged: it was unmarked
    assert out.splitlines()[1] == (
        "fit 20260101T000001Z-unconvgd failed its convergence gates (max R-hat 1.2 > 1.01 "
        "(moe_share[b300x8])): its intervals below are not a posterior")
    out = json.loads(run_cli(work, "diff", "20260101T000000Z-pointmss", "latest", "--format",
                             "json")[1])
    assert [(c["after"], c["after_error"]) for c in out["tracked"]] == [(None, gates)] * 2
    assert out["unconverged"] == ["20260101T000001Z-unconvgd"]


def test_diff_says_when_the_two_fits_had_other_seeds(tmp_path):
    """`diff A B` of the same rows fitted with two seeds printed "same measurements" and every
    parameter's change without a word that the change is the sampler's Monte Carlo noise
    (adv3, round 3): it says the seeds differ, and which to refit with."""
    from test_cli_support import write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    data, models = work / "data", work / "models"
    write_point_mass_fit(models, data / "measurements.csv", models / "priors.toml",
                         data / "hardware.csv", fit_id="20260101T000001Z-otherseed", seed=7)
    code, out, err = run_cli(work, "diff", "20260101T000000Z-pointmss", "latest")
    assert code == 0, err
    head = out[:out.index("posterior median")]
    assert "  same measurements" in head
    assert ("sampler seeds differ between the two fits: 20261130 -> 7 (part of every change "
            "below is Monte Carlo noise; `fit --seed 20261130` makes B's draws comparable)"
            ) in head
    out = json.loads(run_cli(work, "diff", "20260101T000000Z-pointmss", "latest", "--format",
                             "json")[1])
    assert out["inputs_differ"] == ["seed"]
    from test_json_schemas import validate_output

    validate_output("diff", out)


def test_diff_says_when_the_two_fits_sampled_otherwise(tmp_path):
    """`diff A B` of the bundled rows fitted twice with one seed, B with `fit --chains 2
    --draws 2000` (A: 4 x 1000), printed "same measurements" and every parameter's change
    (spec_tree_log_mu -4.57 -> -4.6, the default's width -1%) without a word that all of it
    is the sampler's Monte Carlo noise: one seed, other chains and draws, are other draws. It
    says which settings differ, and how to refit B comparably; the backend (nutpie or PyMC's
    NUTS) and target_accept likewise."""
    import h5py

    from ddtree_bayes.engine import store
    from test_cli_support import write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    data, models = work / "data", work / "models"
    write_point_mass_fit(models, data / "measurements.csv", models / "priors.toml",
                         data / "hardware.csv", fit_id="20260101T000001Z-othersmp")
    path = store.fits_dir(models) / "20260101T000001Z-othersmp.nc"
    with h5py.File(path, "r+") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        before = dict(meta["sampler"])
        meta["sampler"].update(chains=2, backend="pymc")
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    code, out, err = run_cli(work, "diff", "20260101T000000Z-pointmss", "latest")
    assert code == 0, err
    head = out[:out.index("posterior median")]
    assert "  same measurements" in head
    assert (f"sampler settings differ between the two fits: chains {before['chains']} -> 2, "
            "backend nutpie -> pymc (other draws of one seed: part of every change below is "
            f"Monte Carlo noise; `fit --chains {before['chains']} --backend nutpie` makes B's "
            "draws comparable)") in head
    got = json.loads(run_cli(work, "diff", "20260101T000000Z-pointmss", "latest", "--format",
                             "json")[1])
    assert got["inputs_differ"] == ["sampler"]
    from test_json_schemas import validate_output

    validate_output("diff", got)
    code, out, _ = run_cli(work, "diff", "20260101T000000Z-pointmss",
                           "20260101T000000Z-pointmss")
    assert code == 0 and "sampler settings differ" not in out
    # settings B's remedy ladder chose: no flags to ask for them again, it says whose
    with h5py.File(path, "r+") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        meta["remedies"] = {"enabled": True, "outcome": "remedied", "remedy": 1,
                            "attempts": []}
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    code, out, err = run_cli(work, "diff", "20260101T000000Z-pointmss", "latest")
    assert code == 0, err
    assert ("Monte Carlo noise; the remedy ladder of fit 20260101T000001Z-othersmp chose its "
            "settings)") in out


def test_diff_says_when_the_hardware_table_or_model_form_differ(tmp_path):
    """A trust pass: `diff A B` of two fits of the same rows, B made with another hardware
    table (b300 at 6 TB/s) and another MoE form, printed "same measurements" and the changed
    parameters and tracked intervals without a word on why they moved (it named priors only)."""
    from test_cli_support import write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    data, models = work / "data", work / "models"
    other = work / "data" / "hardware_slow.csv"
    lines = (data / "hardware.csv").read_text().splitlines(keepends=True)
    lines[1:] = [ln.replace(",288,8.0,", ",288,6.0,", 1) if ln.startswith("b300,") else ln
                 for ln in lines[1:]]
    other.write_text("".join(lines))
    assert other.read_text() != (data / "hardware.csv").read_text()
    write_point_mass_fit(models, data / "measurements.csv", models / "priors.toml", other,
                         fit_id="20260101T000001Z-otherhw0", moe_form="power")
    code, out, err = run_cli(work, "diff", "20260101T000000Z-pointmss", "latest")
    assert code == 0, err
    head = out[:out.index("posterior median")]
    assert "  same measurements" in head
    assert "hardware table differs between the two fits" in head
    assert "MoE form differs between the two fits: linear -> power" in head
    out = json.loads(run_cli(work, "diff", "20260101T000000Z-pointmss", "latest", "--format",
                             "json")[1])
    assert out["inputs_differ"] == ["hardware table", "moe_form"]
    code, out, _ = run_cli(work, "diff", "20260101T000000Z-pointmss", "20260101T000000Z-pointmss")
    assert code == 0 and "differs" not in out
    # the same values in another row order, one source reworded: no difference (a review:
    # the stored texts were compared)
    same = work / "data" / "hardware_same.csv"
    rows = (data / "hardware.csv").read_text().splitlines(keepends=True)
    body = [ln.replace("NVIDIA", "Nvidia", 1) if ln.startswith("b300,") else ln
            for ln in rows[1:]]
    same.write_text(rows[0] + "".join(reversed(body)))
    write_point_mass_fit(models, data / "measurements.csv", models / "priors.toml", same,
                         fit_id="20260101T000002Z-samehw00")
    code, out, _ = run_cli(work, "diff", "20260101T000000Z-pointmss", "20260101T000002Z-samehw00")
    assert code == 0 and "differs" not in out, out


def test_diff_says_when_the_model_or_drafter_cards_differ(tmp_path):
    """A trust pass: two fits of the same rows, B made after data/models.csv gave Kimi K2.6
    1.0 bytes per weight (0.5 built in): `diff A B` printed "same measurements" and the
    moved parameters without a word on why (inputs_differ []), as it did for the hardware
    table before. So for a drafter card added between the fits."""
    import dataclasses

    import h5py

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine import store
    from test_cli_support import write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    data, models = work / "data", work / "models"
    card = dataclasses.asdict(load_model_cards(bundled("models.csv"))["kimi-k2.6"])
    assert card["bytes_per_weight"] == 0.5
    drafter = {"drafter": "my-kimi-5l", "target_model": "kimi-k2.6", "methods": ["ddtree"],
               "kind": "dflash_block", "layers": 5, "params_active_b": 5.2,
               "lm_head_params_b": 0.9, "bytes_per_weight": 2.0, "source": "test"}   # (whole:
    # a fit whose card lacks a field is refused on read, tests/test_fit_metadata.py)

    def with_cards(fit_id: str, model_card: dict, drafters: list[dict],
                   proxy: bool = False) -> None:
        path = store.fits_dir(models) / f"{fit_id}.nc"
        with h5py.File(path, "r+") as fh:
            meta = json.loads(fh.attrs[store.META_ATTR])
            meta["model"].update(card=model_card, drafter_cards=drafters)
            if proxy:   # (a fit of rows without a card: core/proxy_card.py, as_meta)
                meta["model"]["proxy_card"] = {"model": "kimi-k2.6", "rows": [2]}
            fh.attrs[store.META_ATTR] = json.dumps(meta)

    with_cards("20260101T000000Z-pointmss", card, [])
    for fit_id, model_card, drafters in (
            ("20260101T000001Z-heavier0", {**card, "bytes_per_weight": 1.0}, []),
            ("20260101T000002Z-drafter0", card, [drafter]),
            # only a field no answer reads (the memory checks'): the same model
            ("20260101T000003Z-kvonly00", {**card, "max_context_tokens": 131072}, []),
            # a proxy card made from the rows (no card here) against the real card
            ("20260101T000004Z-proxy000", {**card, "layers": 40, "bytes_per_weight": 2.0}, [])):
        write_point_mass_fit(models, data / "measurements.csv", models / "priors.toml",
                             data / "hardware.csv", fit_id=fit_id)
        with_cards(fit_id, model_card, drafters, proxy=fit_id.endswith("proxy000"))
    expect = {"20260101T000001Z-heavier0": (
                  ["model cards"], "the model card of kimi-k2.6 differs between the two fits"),
              "20260101T000002Z-drafter0": (
                  ["drafter cards"], "the drafter card my-kimi-5l differs between the two fits "
                                     "(changed, added or removed)"),
              "20260101T000003Z-kvonly00": ([], None),
              "20260101T000004Z-proxy000": (
                  ["model cards"], "the model card of kimi-k2.6 differs between the two fits "
                                   "(fit 20260101T000004Z-proxy000's is a proxy made from its "
                                   "rows)")}
    for fit_id, (keys, line) in expect.items():
        code, out, err = run_cli(work, "diff", "20260101T000000Z-pointmss", fit_id)
        assert code == 0, err
        head = out[:out.index("posterior median")].splitlines()
        assert head[1:] == ([line] if line else []) + ["  same measurements", ""], head
        code, out, err = run_cli(work, "diff", "20260101T000000Z-pointmss", fit_id, "--format",
                                 "json")
        assert code == 0 and json.loads(out)["inputs_differ"] == keys, err


@pytest.mark.parametrize("text", ["1,,4", "1,4,", ",4", " , "])
def test_an_empty_item_of_a_list_flag_is_refused_not_dropped(work, text):
    """`predict --concurrency 1,,4` answered C = 1 and 4 without a word on the blank between
    (a typo, or a number lost); `--budgets 8,,16` likewise."""
    err = one_error(*run_cli(work, "predict", "--accept", "12", "--concurrency", text))
    assert f"argument --concurrency: {text!r} " in err
    assert "empty item" in err or "holds no number" in err
    err = one_error(*run_cli(work, "optimize", "--budgets", "8,,16"))
    assert "argument --budgets: '8,,16' has an empty item" in err


def test_an_empty_item_of_every_comma_list_flag_is_refused_not_dropped(work):
    """`compare --fits A,,B` compared A and B without a word on the blank between (cli/args
    fit_ids dropped it) where `--concurrency 1,,4` is refused; `--engine sglang,,native` and
    `--accept 12,,14` were refused in other words ("'' is not a name", "is not a number, list
    or range"). Every comma-list flag now says the one thing: an empty item, nothing compared,
    exit 2; and the library's readers (Flags.of a query's engine text, optimize's budgets)
    refuse it too rather than drop it."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.question import Flags
    from ddtree_bayes.workflows.decisions import parse_budgets

    a, b = "20260101T000000Z-pointmss", "20260101T000000Z-otherfit"
    empty = "has an empty item (two commas in a row, or one at an end)"
    for text in (f"{a},,{b}", f"{a},{b},", f",{a},{b}"):
        err = one_error(*run_cli(work, "compare", "--fits", text))
        assert err.startswith(f"ddtree-bayes: error: argument --fits: {text!r} {empty} (fix: "
                              "give two or more ids"), err
    for cmd, flag, text in (("predict", "--engine", "sglang,,native"),
                            ("track", "--engine", "sglang,"),
                            ("predict", "--accept", "12,,14"),
                            ("predict", "--accept", "12,14,")):
        args = ["track", "add"] if cmd == "track" else [cmd]
        err = one_error(*run_cli(work, *args, flag, text))
        assert f"argument {flag}: {text!r} {empty}" in err, err
    with pytest.raises(QueryError, match="engines holds '', which is not an engine name"):
        Flags.of({"engine": "sglang,,native"})
    with pytest.raises(QueryError, match="has an empty item"):
        parse_budgets("8,,16")
    assert Flags.of({"engine": "sglang,native"}).engines == ("sglang", "native")


def test_an_empty_item_of_bench_records_is_refused_not_dropped():
    """`add --from-bench F --bench-records 1,,4` took records 1 and 4 without a word on the
    blank between, as the list flags did."""
    import argparse

    from ddtree_bayes.cli.args import record_list

    assert record_list("1-3, 7") == [1, 2, 3, 7]
    for text in ("1,,4", "1,4,", ",4"):
        with pytest.raises(argparse.ArgumentTypeError, match="has an empty item"):
            record_list(text)


def test_validate_jobs_is_bounded_and_not_dropped_under_a_scheduler(work):
    """A trust pass: `validate --jobs 100000` was accepted, and `--scheduler ADDR --jobs 4`
    dropped --jobs (the cluster's workers run the folds) without a word."""
    err = one_error(*run_cli(work, "validate", "--jobs", "100000"))
    assert "argument --jobs: 100000 is outside 1..1024" in err
    err = one_error(*run_cli(work, "validate", "--jobs", "4", "--scheduler", "tcp://x:1"))
    assert err.startswith("ddtree-bayes: error: --jobs 4 does not apply with --scheduler")


@pytest.mark.parametrize("command", [("predict", "--accept", "12"), ("optimize",),
                                     ("track", "--accept", "12"), ("add",), ("next",)])
@pytest.mark.parametrize(("text", "tokens"), [("0.5", "0.5"), ("0.3k", "307.2"),
                                               ("1.5e2", "150")])
def test_a_context_that_is_not_a_whole_token_count_is_refused(work, command, text, tokens):
    """`--context 0.5` (half a token) and `--context 0.3k` (307.2 tokens) were answered: no
    run measures a fractional context. Every flag that takes a context refuses it (next's
    in its --query), and a whole count written with a point (1.5e2) is taken."""
    argv = ((*command, "--context", text) if command != ("next",) else
            ("next", "--query", f"--accept 12 --context {text}"))
    if tokens == "150":
        assert "argument --context" not in run_cli(work, *argv)[2]
        return
    err = one_error(*run_cli(work, *argv))
    where = "" if command != ("next",) else f"--query '--accept 12 --context {text}': "
    assert err == (f"ddtree-bayes: error: {where}argument --context: {text!r} is {tokens} "
                   "tokens, not a whole number (fix: give a whole number of tokens, e.g. 32768 "
                   "or 32k)\n")


def test_each_error_names_the_right_flag_and_fix(work, tmp_path):
    """A walkthrough found fixes pointing elsewhere: a missing --hardware-file said "pass an
    existing CSV with --data"; a folder given to --data said "save it as UTF-8 CSV"; a
    mis-cased --model said "check the spelling" where --hardware B300 says names are
    lowercase; a TOK_S header said "missing column" with no word about case; a row with one
    trailing comma said "quote fields that contain commas"."""
    missing = tmp_path / "nonexistent.csv"
    for argv in (("hardware", "list"), ("fit",)):
        err = one_error(*run_cli(work, *argv, "--hardware-file", str(missing)))
        assert err == (f"ddtree-bayes: error: {missing}: file not found (fix: pass an existing "
                       "CSV with --hardware-file)\n")
    err = one_error(*run_cli(work, "fit", "--data", str(tmp_path)))
    assert err == (f"ddtree-bayes: error: {tmp_path}: is a folder, not a CSV file (fix: pass "
                   "a CSV file with --data)\n")
    err = one_error(*run_cli(work, "predict", "--model", "Kimi-K2.6"))
    assert err == ("ddtree-bayes: error: --model 'Kimi-K2.6' is not a lowercase name (fix: "
                   "write it in lowercase, e.g. 'kimi-k2.6')\n"), err
    lines = (work / "data" / "measurements.csv").read_text().splitlines()
    upper = tmp_path / "upper.csv"
    upper.write_text("\n".join([lines[0].replace("tok_s", "TOK_S"), *lines[1:]]) + "\n")
    err = one_error(*run_cli(work, "fit", "--data", str(upper)))
    assert err == (f"ddtree-bayes: error: {upper}, row 1, column 'tok_s': missing column "
                   "(fix: column names are lowercase: rename 'TOK_S' to 'tok_s')\n")
    comma = tmp_path / "comma.csv"
    comma.write_text("\n".join([*lines, lines[1] + ","]) + "\n")
    width = lines[0].count(",") + 1
    err = one_error(*run_cli(work, "fit", "--data", str(comma)))
    assert err == (f"ddtree-bayes: error: {comma}, row {len(lines) + 1}: {width + 1} fields, "
                   f"header has {width}, the last empty (fix: drop the trailing comma)\n")


@pytest.mark.parametrize("argv", [("predict", "--accept", "14"), ("optimize",),
                                  ("next", "--k", "2")])
@pytest.mark.parametrize(("text", "rounded"), [("0.9999999", "1"), ("0.0000001", "0")])
def test_a_prob_that_rounds_to_0_or_1_is_refused(tmp_path, argv, text, rounded):
    """Intervals are labelled and keyed at 6 decimals of --prob: `predict --prob 0.9999999`
    printed a "100% interval" (the draws' min to max, 243-989 tok/s on the bundled fit) with
    exit 0 and JSON interval_probs [0.5, 1.0], and `--prob 0.0000001` a "0% interval" of
    width 0 (708-708). An interval of probability 1 or 0 is no answer: refused at the flag."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)   # (next reweights by it)
    err = one_error(*run_cli(work, *argv, "--prob", text))
    assert err == (f"ddtree-bayes: error: argument --prob: {float(text)!r} rounds to {rounded} "
                   "at the 6 "
                   "decimals intervals are labelled with, and an interval of probability 0 or "
                   "1 is none (fix: give a probability from 0.000001 to 0.999999, e.g. --prob "
                   "0.8)\n")
    # the ends themselves are taken: 6 decimals label them
    code, out, err = run_cli(work, *argv, "--prob", "0.999999", "--format", "json")
    assert code == 0, err


def test_a_method_a_structured_fit_never_declared_is_refused_in_one_line(fitted_workdir,
                                                                        tmp_path):
    """A structured fit (the bundled data's) prices a method's drafter passes and tree nodes
    from its [methods] entry: one it never declared cannot be answered. predict printed two
    warnings that it would be ("no drafter card serves kimi-k2.6's mystery", "its overhead
    is drawn from the pooled population") and then refused it (exit 2, three lines); with
    --strict it refused it in the warning's words (pooled population), not for its reason."""
    work = Path(shutil.copytree(fitted_workdir[0], tmp_path / "w"))
    before = listing(work)
    for argv in (("predict", "--method", "mystery", "--block", "4", "--accept", "5"),
                 ("predict", "--method", "mystery", "--block", "4", "--accept", "5",
                  "--engine", "sglang", "--strict", "--format", "json"),
                 ("next", "--query", "--method mystery --block 4 --accept 5")):
        err = one_error(*run_cli(work, *argv))
        assert "method 'mystery' is not declared in the fit's priors ([methods])" in err, err
        assert "pooled population" not in err and "use one of ddtree, dflash" in err, err
    assert listing(work) == before
    # a declared method never measured is answered, as before (its overhead pooled)
    code, out, err = run_cli(work, "predict", "--method", "medusa", "--block", "4",
                             "--budget", "4", "--accept", "5", "--engine", "sglang")
    assert code == 0 and "sglang  5 " in out, err


@pytest.mark.parametrize(("argv", "line"), [
    # --verify-tokens 1 of the default DDTree: a tree of no nodes, 10.3 ms in a step
    (("--verify-tokens", "1", "--accept", "1"),
     "ddtree verifying 1 token per step drafts nothing: a speculative step verifies its "
     "draft tokens plus one"),
    # DDTree block 1: position 0 is the anchor, so 0 drafts, yet a tree of 32 nodes
    (("--block", "1", "--accept", "1"),
     "ddtree with block 1 drafts nothing: position 0 of its block is the anchor, so a step "
     "drafts block - 1 = 0 tokens"),
    (("--method", "dflash", "--block", "1", "--accept", "1"),
     "dflash with block 1 drafts nothing: position 0 of its block is the anchor, so a step "
     "drafts block - 1 = 0 tokens"),
])
def test_a_speculative_configuration_that_drafts_nothing_is_refused(work, argv, line):
    """No engine runs a speculative step that drafts nothing; predict answered one (exit 0):
    `--verify-tokens 1` as "ddtree, verify 1 token" (the drafter's pass and the fixed
    overhead over an AR step), `--block 1` as DDTree block 1 budget 32 (33 tokens verified
    of a block that drafts none), and `add` appended such rows. Refused now, naming the
    flag (or column) and the fix, as the other impossible shapes are."""
    before = listing(work)
    err = one_error(*run_cli(work, "predict", *argv))
    assert err.startswith(f"ddtree-bayes: error: {line} (fix: "), err
    assert "--method ar" in err
    column = "verify_tokens" if "verify" in line else "block"
    head = "model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
    method, block = ("dflash", "1") if "dflash" in line else ("ddtree", "1" if "block" in
                                                                         column else "")
    budget, verify = ("", "1") if column == "verify_tokens" else (
        ("", "") if method == "dflash" else ("8", "9"))
    rows = work / "rows.csv"
    rows.write_text(head + "context_tokens,tok_s,source,notes\nkimi-k2.6,b300,8,sglang,"
                    f"{method},{block},{budget},{verify},1,,100,HYPOTHETICAL,\n")
    err = one_error(*run_cli(work, "add", "--from", str(rows)))
    assert f"row 2, column '{column}': {line} (fix: " in err, err
    after = listing(work)   # (add's lock file aside: the measurement file untouched)
    assert {k: v for k, v in after.items() if k not in ("rows.csv",
                                                         "data/.measurements.csv.lock")} == before


@pytest.mark.parametrize(("truth_edit", "design_edit", "where"), [
    # an AR row's engine (no group looked up for it): written as is, exit 0
    (None, ("rtx-5090,1,vllm,ar,", "rtx-5090,1,VLLM,ar,"),
     "design.csv, row 2, column 'engine': 'VLLM' is not a lowercase name"),
    # the truth's system and the design's hardware spelt alike
    (("rtx-5090x1", "RTX-5090x1"), ("rtx-5090,", "RTX-5090,"),
     "design.csv, row 2, column 'hardware': 'RTX-5090' is not a lowercase name"),
    (('model = "dense-8b"', 'model = "Dense-8B"'), None,
     "truth.toml, column 'model': 'Dense-8B' is not a lowercase name"),
    (('model = "dense-8b"', 'model = "dense 8b"'), None,
     "truth.toml, column 'model': 'dense 8b' is not a name"),
])
def test_simulate_refuses_names_a_measurement_file_refuses(work, truth_edit, design_edit,
                                                           where):
    """simulate wrote rows named 'Dense-8B' (the truth's model), 'RTX-5090' or 'VLLM' (the
    design's) with exit 0, a measurement file `fit` then refuses ("'Dense-8B' is not a
    lowercase name"): each refused in one line naming the file and column, nothing
    written."""
    examples = Path(__file__).parents[1] / "data" / "examples"
    truth = (examples / "truth_dense_consumer.toml").read_text()
    design = (examples / "design_dense_consumer.csv").read_text()
    if truth_edit:
        assert truth_edit[0] in truth
        truth = truth.replace(*truth_edit)
    if design_edit:
        assert design_edit[0] in design
        design = design.replace(*design_edit)
    (work / "truth.toml").write_text(truth)
    (work / "design.csv").write_text(design)
    err = one_error(*run_cli(work, "simulate", "--truth", "truth.toml", "--design",
                             "design.csv", "--out", "sim.csv"))
    assert where in err, err
    assert not (work / "sim.csv").exists()


def test_validate_scheduler_that_cannot_be_reached_is_one_line(work):
    """`validate --scheduler foo` ended in "internal error: ValueError: missing port number in
    address 'foo'" (exit 1), and `--scheduler tcp://127.0.0.1:1` (no scheduler there) in
    "Timed out trying to connect ... with no file named (most likely standard output) (fix:
    check where standard output goes and its free space)": dask's OSError read as a failed
    write. Both are now one line naming --scheduler and the address, exit 2."""
    import dask

    err = one_error(*run_cli(work, "validate", "--quiet", "--scheduler", "foo"))
    assert err.startswith("ddtree-bayes: error: --scheduler 'foo': ")
    assert "standard output" not in err and "internal error" not in err
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        err = one_error(*run_cli(work, "validate", "--quiet", "--sbc", "2", "--scheduler",
                                 "tcp://127.0.0.1:1"))
    assert err.startswith("ddtree-bayes: error: --scheduler 'tcp://127.0.0.1:1': ")
    assert "standard output" not in err
    # the Client that failed to connect left dask's scheduler set to it: in a Python session
    # every later netCDF write (a fit's save) failed "Requested dask.distributed scheduler but
    # no Client active"; the config is as it was
    assert dask.config.get("scheduler", None) is None

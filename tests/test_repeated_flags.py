"""A flag given twice with two values is refused, not resolved silently: argparse keeps the
last one, so `add --tok-s 612 ... --tok-s 61.2` appended a row of 61.2 tok/s and `predict
--context 32k ... --context 0` answered at context 0, each with exit 0."""

from __future__ import annotations

import pytest

from test_cli_support import listing, make_point_mass_workdir, run_cli

ADD = ("add", "--hardware", "b300", "--gpus", "8", "--engine", "sglang", "--method", "ddtree",
       "--block", "16", "--budget", "32", "--accept", "13", "--source", "run 1")


def test_add_with_a_flag_given_twice_writes_nothing(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    before = listing(work)
    code, out, err = run_cli(work, *ADD, "--tok-s", "612", "--tok-s", "61.2")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: argument --tok-s: given twice, '612' and '61.2': "
                   "which one is meant is not for this tool to guess (fix: give --tok-s once)\n")
    assert listing(work) == before
    # the --flag=value spelling is the same flag
    code, _, err = run_cli(work, *ADD, "--tok-s=612", "--hardware=h100")
    assert code == 2 and err.startswith("ddtree-bayes: error: argument --hardware: given "
                                        "twice, 'b300' and 'h100'")
    assert listing(work) == before


@pytest.mark.parametrize("argv, flag", [
    (("predict", "--accept", "14", "--context", "32k", "--context", "0"), "--context"),
    (("predict", "--accept", "12", "--accept", "16"), "--accept"),
    (("predict", "--accept", "14", "--engine", "sglang", "--engine", "native"), "--engine"),
    (("optimize", "--budgets", "8,16", "--budgets", "32"), "--budgets"),
    (("card", "add", "--hf-config", "a.json", "--name", "a", "--name", "b"), "--name"),
])
def test_every_command_refuses_a_flag_given_twice(tmp_path, argv, flag):
    work = make_point_mass_workdir(tmp_path / "w")
    before = listing(work)
    code, out, err = run_cli(work, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"ddtree-bayes: error: argument {flag}: given twice, ")
    assert err.endswith(f"(fix: give {flag} once)\n") and err.count("\n") == 1
    assert listing(work) == before


def test_a_flag_repeated_with_its_own_value_is_one_value(tmp_path):
    """Nothing to guess: the same text twice (an alias that sets a flag the command repeats)."""
    work = make_point_mass_workdir(tmp_path / "w")
    once = run_cli(work, "predict", "--accept", "14", "--engine", "sglang", "--format", "json")
    twice = run_cli(work, "predict", "--accept", "14", "--accept", "14", "--engine", "sglang",
                    "--format", "json")
    assert once[0] == 0 and twice == once


def test_a_value_that_looks_like_the_flag_is_a_value(tmp_path):
    """Only flags count: `--notes --tok-s` is refused by argparse itself (a value starting with
    '-'), and `--notes=--tok-s 5` is a note, not a second --tok-s."""
    work = make_point_mass_workdir(tmp_path / "w")
    code, _, err = run_cli(work, *ADD, "--tok-s", "612", "--notes=--tok-s 5")
    assert code == 0, err


def test_next_query_refuses_a_flag_given_twice():
    from ddtree_bayes.cli.args import check_query
    from ddtree_bayes.core.errors import QueryError

    with pytest.raises(QueryError) as info:
        check_query("--accept 12 --accept 14")
    assert str(info.value).startswith("--query '--accept 12 --accept 14': argument --accept: "
                                      "given twice, '12' and '14'")
    assert check_query("--accept 14 --accept 14").accept is not None


def test_a_list_flag_given_twice_is_refused(tmp_path):
    """`validate --sweeps A B --sweeps C` validated C alone: argparse's store of a flag taking
    several values keeps the last group, so A and B were dropped without a word (here neither
    file exists: only C was read, and named missing). Refused as a single-value flag is; the
    same files twice is one value."""
    work = make_point_mass_workdir(tmp_path / "w")
    before = listing(work)
    code, out, err = run_cli(work, "validate", "--extrapolate", "--sweeps", "a.csv", "b.csv",
                             "--sweeps", "c.csv")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: argument --sweeps: given twice, 'a.csv b.csv' and "
                   "'c.csv': which one is meant is not for this tool to guess (fix: give "
                   "--sweeps once)\n")
    assert listing(work) == before


def test_given_twice_reads_a_list_flags_values_as_argparse_does():
    import argparse

    from ddtree_bayes.cli.args import given_twice

    p = argparse.ArgumentParser()
    p.add_argument("--sweeps", nargs="+")
    p.add_argument("--pair", nargs=2)
    p.add_argument("--jobs")
    p.add_argument("rest", nargs="*")
    assert given_twice(p, ["--sweeps", "a", "b", "--jobs", "2", "--sweeps", "a", "b"]) is None
    assert given_twice(p, ["--sweeps=a", "--sweeps", "a"]) is None
    assert "'a b' and 'a'" in given_twice(p, ["--sweeps", "a", "b", "--sweeps", "a"])
    assert "'a' and 'b'" in given_twice(p, ["--sweeps=a", "--sweeps=b"])
    assert "'1 2' and '1 3'" in given_twice(p, ["--pair", "1", "2", "x", "--pair", "1", "3"])
    # (after "--" every token is a value)
    assert given_twice(p, ["--sweeps", "a", "--", "--sweeps", "b"]) is None


def test_one_value_in_two_spellings_is_one_value(tmp_path):
    """`predict --context 32k --context 32768` was refused as "given twice": both are 32768
    tokens. The flag's own parser decides what a value means; the answer is the one given
    once, and two different values are still refused with the texts as typed."""
    work = make_point_mass_workdir(tmp_path / "w")
    once = run_cli(work, "predict", "--accept", "14", "--context", "32768", "--format", "json")
    twice = run_cli(work, "predict", "--accept", "14", "--context", "32k", "--context",
                    "32768", "--format", "json")
    assert once[0] == 0 and twice == once
    code, out, err = run_cli(work, "predict", "--accept", "12:16", "--context", "32k",
                             "--context", "32K", "--accept", "12.0:16.0", "--format", "json")
    assert code == 0, err
    code, out, err = run_cli(work, "predict", "--accept", "14", "--context", "32k",
                             "--context", "32000")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: argument --context: given twice, '32k' and '32000': "
                   "which one is meant is not for this tool to guess (fix: give --context "
                   "once)\n")


def test_given_twice_compares_what_the_flags_parser_reads():
    """Each normalising parser: context suffixes, --accept ranges and lists, integer lists
    (--budgets keeps the text, --bench-records expands ranges), numbers and whole numbers."""
    import argparse

    from ddtree_bayes.cli import args as A
    from ddtree_bayes.cli.args import given_twice

    p = argparse.ArgumentParser()
    p.add_argument("--context", type=A.context)
    p.add_argument("--accept", type=A.accept)
    p.add_argument("--budgets", type=A.budgets)
    p.add_argument("--records", type=A.record_list)
    p.add_argument("--prob", type=A.PROB)
    p.add_argument("--gpus", type=A.GPUS)
    p.add_argument("--fits", type=A.fit_ids)
    same = [("--context", "32k", "32768"), ("--context", "1m", "1048576"),
            ("--context", "32K", "32k"), ("--context", "1e5", "100000"),
            ("--accept", "12:16", "12.0:16.0"), ("--accept", "14", "14.0"),
            ("--accept", "12,14", "12.0,14,12"), ("--budgets", "8,16", "8,16,8"),
            ("--records", "1-3,7", "1,2,3,7"), ("--prob", "0.9", "0.90"),
            ("--gpus", "8", "+8"), ("--fits", "a,b", "a, b")]
    for flag, one, other in same:
        assert given_twice(p, [flag, one, f"{flag}={other}"]) is None, (flag, one, other)
    different = [("--context", "32k", "32000"), ("--accept", "12:16", "12,13,14,15,16"),
                 ("--accept", "12,14", "14,12"), ("--budgets", "8,16", "16,8"),
                 ("--records", "1-3", "1,3"), ("--prob", "0.9", "0.8"), ("--gpus", "8", "4"),
                 ("--fits", "a,b", "b,a")]
    for flag, one, other in different:
        assert given_twice(p, [flag, one, flag, other]) == (
            f"argument {flag}: given twice, {one!r} and {other!r}: which one is meant is not "
            f"for this tool to guess (fix: give {flag} once)"), (flag, one, other)
    # a value its parser refuses is compared as typed (argparse then names what is wrong)
    assert given_twice(p, ["--context", "lots", "--context", "lots"]) is None
    assert "'lots' and 'many'" in given_twice(p, ["--context", "lots", "--context", "many"])


def test_add_reads_a_number_given_twice_in_two_spellings_as_one_value(tmp_path):
    """`add --tok-s 612 --tok-s 612.0` was refused as given twice: add's numeric flags keep
    the text (the data schema checks it, naming the row and column), so given_twice compared
    the texts, where predict's flags compare what they mean. One number in two spellings is
    one value (the row is written once, 612 tok/s); two numbers are still refused."""
    import csv
    import io

    work = make_point_mass_workdir(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    rows_before = len(list(csv.DictReader(io.StringIO(data.read_text()))))
    flags = [a for a in ADD if a not in ("--gpus", "8", "--block", "16", "--accept", "13")]
    code, out, err = run_cli(work, *flags, "--gpus", "8", "--gpus", "8.0", "--block", "16",
                             "--block", "1.6e1", "--accept", "13", "--accept", "13.0",
                             "--tok-s", "612", "--tok-s", "612.0", "--verify-tokens", "33",
                             "--verify-tokens", "33.", "--budget", "32")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(data.read_text())))
    assert len(rows) == rows_before + 1
    new = rows[-1]
    assert (float(new["gpus"]), float(new["block"]), float(new["budget"]),
            float(new["verify_tokens"]), float(new["accept_len"]), float(new["tok_s"])) == (
        8, 16, 32, 33, 13, 612)
    before = listing(work)
    code, out, err = run_cli(work, *ADD, "--tok-s", "612", "--tok-s", "612.5")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: argument --tok-s: given twice, '612' and '612.5': "
                   "which one is meant is not for this tool to guess (fix: give --tok-s once)\n")
    code, out, err = run_cli(work, *ADD, "--tok-s", "612", "--accept", "infer", "--accept",
                             "13")
    assert code == 2 and "argument --accept: given twice, '13' and 'infer'" in err
    assert listing(work) == before

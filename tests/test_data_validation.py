"""Validation of measurement and hardware files, verify_tokens derivation, and the CLI's
bad-input path (exit code, one-line error, nothing written, no sampling).

Every bad-input case starts from a copy of data/measurements.csv with one cell or row
broken. Row numbers are file line numbers; the header is row 1, so the bundled data rows
are rows 2..10:

    2  b300 sglang ar               6  rtx-pro-6000 vllm ar, 32k context
    3  b300 sglang ddtree 8/8       7  rtx-pro-6000 vllm ar, 64k context
    4  rtx-pro-6000 vllm ar, ctx 0  8  rtx-pro-6000 vllm ar, 128k context
    5  rtx-pro-6000 vllm ar, 16k    9  rtx-pro-6000 vllm eagle3 3, ctx 0
                                   10  rtx-pro-6000 vllm eagle3 3, 128k context
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pytest

from ddtree_bayes import api
from ddtree_bayes.cli.args import MAX_DRAWS
from ddtree_bayes.cli.main import main
from ddtree_bayes.core.config import load_priors
from ddtree_bayes.core.data import (
    COLUMNS,
    REQUIRED,
    derive_verify_tokens,
    load_hardware,
    load_measurements,
)
from ddtree_bayes.core.errors import DataError, InputError
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import inference

ROOT = Path(__file__).resolve().parents[1]
MEASUREMENTS = ROOT / "data" / "measurements.csv"
HARDWARE = ROOT / "data" / "hardware.csv"
PRIORS = ROOT / "models" / "priors.toml"
LINES = MEASUREMENTS.read_text(encoding="utf-8").splitlines()
KNOWN_HARDWARE = ("a100-40gb, a100-80gb, a100-pcie-40gb, a100-pcie-80gb, b200, b300, gb200, gb300, "
                  "h100, h100-nvl, h100-pcie, h20, h200, h200-nvl, l4, l40s, mi250x, mi300x, "
                  "mi325x, mi355x, rtx-3090, rtx-3090-ti, rtx-4080, rtx-4090, rtx-5060-ti, "
                  "rtx-5070-ti, rtx-5080, rtx-5090, rtx-6000-ada, rtx-a6000, rtx-pro-6000, "
                  "rtx-pro-6000-maxq, rtx-pro-6000-server, rx-7900-xt, rx-7900-xtx, v100, v100-sxm2")


# ------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def hw() -> dict[str, dict[str, str]]:
    return load_hardware(HARDWARE)


def _fields(line: str) -> list[str]:
    (fields,) = list(csv.reader([line]))
    return fields


def _line(fields: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerow(fields)  # quotes fields with \r or \n
    return buf.getvalue().removesuffix("\r\n")


def edited(**cells_by_row: dict[str, str]) -> list[str]:
    """The bundled lines with cells replaced: ``edited(r5={"tok_s": "x"})`` edits row 5."""
    lines = list(LINES)
    for key, cells in cells_by_row.items():
        row = int(key[1:])
        fields = _fields(lines[row - 1])
        for column, value in cells.items():
            fields[COLUMNS.index(column)] = value
        lines[row - 1] = _line(fields)
    return lines


def write(tmp_path: Path, lines: list[str] | str, name: str = "measurements.csv") -> Path:
    path = tmp_path / name
    text = lines if isinstance(lines, str) else "\n".join(lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def expect_error(path: Path, hw, row: int | None, column: str | None, *fragments: str,
                 **kwargs) -> DataError:
    with pytest.raises(DataError) as info:
        load_measurements(path, hw, **kwargs)
    err = info.value
    assert err.file == str(path)
    assert err.row == row
    assert err.column == column
    text = str(err)
    assert "\n" not in text
    assert "fix:" in text
    where = [str(path)]
    if row is not None:
        where.append(f"row {row}")
    if column is not None:
        where.append(f"column '{column}'")
    assert text.startswith(", ".join(where) + ": "), text
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    assert err.exit_code == 2
    return err


def test_bundled_data_file_matches_the_packaged_copy():
    # the tests below edit data/measurements.csv; the CLI falls back to the packaged copy
    assert MEASUREMENTS.read_text() == bundled("measurements.csv").read_text()
    assert HARDWARE.read_text() == bundled("hardware.csv").read_text()


def test_known_hardware_constant_matches_the_table(hw):
    assert ", ".join(sorted(hw)) == KNOWN_HARDWARE


# ------------------------------------------------------------------ 1. measurement validation
@pytest.mark.parametrize("column", ["tok_s", "model", "verify_tokens", "notes"])
def test_missing_column_is_row_1(tmp_path, hw, column):
    i = COLUMNS.index(column)
    lines = [_line([f for j, f in enumerate(_fields(line)) if j != i]) for line in LINES]
    path = write(tmp_path, lines)
    err = expect_error(path, hw, 1, column, "missing column")
    assert err.fix == f"the header must contain {','.join(COLUMNS)}"


def test_missing_columns_reports_the_first_in_schema_order(tmp_path, hw):
    drop = {COLUMNS.index("tok_s"), COLUMNS.index("accept_len")}
    lines = [_line([f for j, f in enumerate(_fields(line)) if j not in drop]) for line in LINES]
    expect_error(write(tmp_path, lines), hw, 1, "accept_len", "missing column")


@pytest.mark.parametrize("raw", ["fast", "84,6", "1.2.3", "12tok"])
def test_non_numeric_tok_s(tmp_path, hw, raw):
    path = write(tmp_path, edited(r5={"tok_s": raw}))
    expect_error(path, hw, 5, "tok_s", f"not a number: {raw!r}", "fix: write a plain number")


@pytest.mark.parametrize(("raw", "tokens"), [("32k", "32768"), ("1m", "1048576"),
                                             ("0.5K", "512"), ("1.5 k", "1536")])
def test_a_context_with_a_k_suffix_is_refused_naming_its_token_count(tmp_path, hw, raw, tokens):
    """`--context 32k` is 32768 tokens; a data cell `32k` was "not a number" with the fix
    "write a plain number", which left the user to work out that --context's k is 1024.
    The fix now says the exact number (a data file holds plain numbers: docs/cli.md)."""
    path = write(tmp_path, edited(r5={"context_tokens": raw}))
    err = expect_error(path, hw, 5, "context_tokens", f"not a number: {raw!r}")
    assert err.fix == (f"write {tokens}: {raw} is {tokens} tokens as --context reads it "
                       "(k = 1024, m = 1048576), and a data file holds plain numbers")


@pytest.mark.parametrize(("raw", "mean"), [("131.42 ± 0.59", "131.42"),
                                           ("118.3 +- 0.4", "118.3"),
                                           ("96.1+/-0.3", "96.1")])
def test_a_mean_with_its_spread_is_refused_naming_the_mean(tmp_path, hw, raw, mean):
    """llama-bench prints t/s as "131.42 ± 0.59" (the mean of its -r runs and their standard
    deviation). A user typing its table into a CSV got "not a number ... write a plain number",
    which did not say which number: the fix now names the mean, the one number the row is."""
    path = write(tmp_path, edited(r5={"tok_s": raw}))
    err = expect_error(path, hw, 5, "tok_s", f"not a number: {raw!r}")
    assert err.fix == (f"write the mean alone, {mean}: '{raw}' is a mean and its spread (as "
                       "llama-bench prints t/s), and a data file holds plain numbers (the "
                       "spread has no column: repeated runs go in as rows of their own)")


def test_non_numeric_accept_len(tmp_path, hw):
    path = write(tmp_path, edited(r3={"accept_len": "four"}))
    expect_error(path, hw, 3, "accept_len", "not a number: 'four'")


@pytest.mark.parametrize("raw", ["0", "0.0", "-84.6", "-1"])
def test_tok_s_must_be_positive(tmp_path, hw, raw):
    path = write(tmp_path, edited(r5={"tok_s": raw}))
    expect_error(path, hw, 5, "tok_s", f"tok_s must be > 0, got {raw}",
                 "fix: write the measured tokens per second")


@pytest.mark.parametrize(("raw", "step"), [
    ("1e308", "4.4e-305 ms"),    # row 3: accept 4.4 x 1 stream / 1e308 tok/s
    ("88001", "0.05 ms"),        # 4.4 / 88,001 = 0.049999 ms, just under the floor
    ("0.0001", "4.4e+07 ms"),    # 4.4e7 ms = 12 hours
])
def test_a_tok_s_no_decoding_step_can_give_is_refused(tmp_path, hw, raw, step):
    """tok_s implies the step (accept_len x concurrency / tok_s): 0.05 ms to 60 s. 1e308 (an
    overflow) and 0.0001 (tokens per hour?) fit on nothing a GPU does; `add` then `update`
    used to refit on 1e308 and predict 1.6e35 tok/s, exit 0. 88,000 tok/s (0.05 ms) is kept."""
    load_measurements(write(tmp_path, edited(r3={"tok_s": "88000"})), hw)
    path = write(tmp_path, edited(r3={"tok_s": raw}))
    expect_error(path, hw, 3, "tok_s", f"tok_s {raw} means a decoding step of {step}",
                 "a step takes 0.05 ms to 60 s", "fix: check the units")


def test_a_column_named_twice_in_the_header_is_refused(tmp_path, hw):
    """A second tok_s column at the end of the header: its values silently won (fit sampled
    on them). Refused at row 1, naming the column; also in the other CSVs (hardware)."""
    lines = [LINES[0] + ",tok_s"] + [line + ",999" for line in LINES[1:]]
    expect_error(write(tmp_path, lines), hw, 1, "tok_s", "appears twice in the header",
                 "fix: keep one of the two columns")
    table = HARDWARE.read_text().splitlines()
    bad = write(tmp_path, [table[0] + ",source"] + [t + ",x" for t in table[1:]], "hw.csv")
    with pytest.raises(DataError, match="row 1, column 'source': appears twice"):
        load_hardware(bad)


def test_a_blank_acceptance_bounds_the_step_at_what_the_configuration_can_emit(tmp_path, hw):
    """Row 3 (DDTree block 8, budget 8, 9 verified tokens, at most 8 emitted) without
    accept_len: at 150,000 tok/s the step is 0.0067 ms at acceptance 1 but 0.053 ms at 8, so it
    is kept; at 200,000 even 8 tokens give 0.04 ms: refused, with the range. A repeated run
    takes the same check."""
    ok = write(tmp_path, edited(r3={"accept_len": "", "tok_s": "150000"}))
    assert load_measurements(ok, hw).rows[1].tok_s == 150000
    bad = write(tmp_path, edited(r3={"accept_len": "", "tok_s": "200000"}))
    expect_error(bad, hw, 3, "tok_s", "a decoding step of 0.005-0.04 ms")
    lines = list(LINES)
    repeat = _fields(lines[2])
    repeat[COLUMNS.index("tok_s")] = "1e308"
    repeat[COLUMNS.index("notes")] = "second run"
    expect_error(write(tmp_path, lines + [_line(repeat)]), hw, 11, "tok_s",
                 "tok_s 1e308 means a decoding step of 4.4e-305 ms")


@pytest.mark.parametrize("raw", ["0.5", "0", "-4.4", "0.999"])
def test_accept_len_below_one(tmp_path, hw, raw):
    path = write(tmp_path, edited(r3={"accept_len": raw}))
    expect_error(path, hw, 3, "accept_len",
                 f"accept_len must be >= 1 (the bonus token), got {float(raw):g}")


def test_accept_len_exceeds_what_the_block_can_emit(tmp_path, hw):
    # ddtree block 8: the anchor and 7 drafted positions -> at most 8
    path = write(tmp_path, edited(r3={"accept_len": "8.5"}))
    expect_error(path, hw, 3, "accept_len", "accept_len 8.5 is above what ddtree with block 8 "
                 "can emit (at most 8 tokens per step: block - 1 drafts + 1)",
                 "fix: accept_len counts accepted draft tokens plus the bonus token")


def test_accept_len_above_block_plus_one_but_within_verify_tokens(tmp_path, hw):
    """A block-16 DDTree verifying 33 tokens emits at most 16 (15 drafts after the anchor + the
    bonus token): accept_len 20, and 17, are data errors (20 used to pass, being below the 33
    verified; 17 as block + 1), with the priors' methods table or without (the bundled one)."""
    path = write(tmp_path, edited(r3={"block": "16", "budget": "32", "verify_tokens": "33",
                                      "accept_len": "20"}))
    for methods in (None, load_priors(PRIORS).methods):
        err = expect_error(path, hw, 3, "accept_len", "accept_len 20 is above what ddtree with "
                           "block 16 can emit (at most 16 tokens per step: block - 1 drafts "
                           "+ 1)", methods=methods)
        assert err.column == "accept_len"
    expect_error(write(tmp_path, edited(r3={"block": "16", "budget": "32", "verify_tokens": "33",
                                            "accept_len": "17"})), hw, 3, "accept_len",
                 "accept_len 17 is above what ddtree with block 16 can emit (at most 16")
    data = load_measurements(write(tmp_path, edited(r3={
        "block": "16", "budget": "32", "verify_tokens": "33", "accept_len": "16"})), hw)
    assert data.rows[1].accept_len == 16.0


def test_accept_len_exceeds_derived_verify_tokens(tmp_path, hw):
    # eagle3 block 3, verify_tokens blank -> derived 4; a sequential drafter: the block is
    # its depth (the methods table says so; without one, or with one that lacks the method,
    # the bundled table says so, as method_spec reads it)
    path = write(tmp_path, edited(r10={"verify_tokens": "", "accept_len": "4.5"}))
    expect_error(path, hw, 10, "accept_len", "accept_len 4.5 is above what eagle3 with block 3 "
                 "can emit (at most 4 tokens per step: depth + 1 (block = depth))", methods={})
    for methods in (None, load_priors(PRIORS).methods):
        expect_error(path, hw, 10, "accept_len", "(at most 4 tokens per step: depth + 1 "
                     "(block = depth))", methods=methods)


def test_accept_len_equal_to_verify_tokens_is_allowed(tmp_path, hw):
    # eagle3 block 3 verifying 4 tokens (a chain of depth 3) emits at most 4
    data = load_measurements(write(tmp_path, edited(r10={"accept_len": "4"})), hw)
    assert data.rows[8].row == 10
    assert data.rows[8].accept_len == 4.0
    assert data.rows[8].verify_tokens == 4


@pytest.mark.parametrize("raw", ["1.5", "2", "4.4"])
def test_ar_row_accept_len_must_be_one(tmp_path, hw, raw):
    path = write(tmp_path, edited(r2={"accept_len": raw}))
    # an AR row verifies exactly 1 token, so any accept_len != 1 is rejected on accept_len
    err = expect_error(path, hw, 2, "accept_len", f"{float(raw):g}")
    assert "autoregressive rows emit 1 token per step" in str(err)


@pytest.mark.parametrize("raw", ["2", "9", "33"])
def test_ar_row_verify_tokens_must_be_one(tmp_path, hw, raw):
    path = write(tmp_path, edited(r4={"verify_tokens": raw}))
    expect_error(path, hw, 4, "verify_tokens", f"autoregressive rows verify 1 token, got {raw}",
                 "fix: set verify_tokens to 1 or fix the method")


def test_unknown_hardware_names_the_closest_built_in_gpus(tmp_path, hw):
    path = write(tmp_path, edited(r3={"hardware": "gb400"}))
    err = expect_error(path, hw, 3, "hardware", "unknown hardware 'gb400'")
    assert err.fix == ("use one of the 37 GPUs `ddtree-bayes hardware list` shows (closest: "
                       "gb300, gb200, b300; names are case-sensitive) or add it: `ddtree-bayes "
                       "hardware add gb400 --like GPU --mem-bw-tb-s N --source ...` (a GPU like a "
                       "known one) or a row in data/hardware.csv")


def test_hardware_names_are_case_sensitive(tmp_path, hw):
    # the fix said `hardware add B300`, which refuses an uppercase name: the table's own
    # lowercase name, or the name hardware add takes
    path = write(tmp_path, edited(r7={"hardware": "RTX-PRO-6000"}))
    err = expect_error(path, hw, 7, "hardware", "unknown hardware 'RTX-PRO-6000'")
    assert err.fix == "names are lowercase: write 'rtx-pro-6000'"
    path = write(tmp_path, edited(r7={"hardware": "RTX-9090"}))
    err = expect_error(path, hw, 7, "hardware", "unknown hardware 'RTX-9090'")
    assert "`ddtree-bayes hardware add rtx-9090 --like GPU" in err.fix


def test_unknown_hardware_with_a_custom_hardware_table(tmp_path):
    table = load_hardware(write(tmp_path, ["hardware,mem_bw_tb_s,interconnect,source",
                                           "b300,8.0,NVLink5,spec", "h100,3.35,NVLink4,spec"],
                                "hardware.csv"))
    path = write(tmp_path, LINES)
    err = expect_error(path, table, 4, "hardware", "unknown hardware 'rtx-pro-6000'")
    assert "(b300, h100)" in err.fix


def test_duplicate_row_appended_at_end(tmp_path, hw):
    path = write(tmp_path, LINES + [LINES[5]])  # copy of row 6, becomes row 11
    err = expect_error(path, hw, 11, None, "duplicate of row 6")
    assert "fix: delete the repeat" in str(err)


def test_duplicate_row_right_after_its_original(tmp_path, hw):
    lines = LINES[:4] + [LINES[3]] + LINES[4:]  # row 4 repeated as row 5
    expect_error(write(tmp_path, lines), hw, 5, None, "duplicate of row 4")


def test_duplicate_row_numbers_count_blank_lines(tmp_path, hw):
    lines = LINES[:3] + ["", ""] + LINES[3:] + [LINES[1]]  # rows 4-5 blank; copy of row 2
    expect_error(write(tmp_path, lines), hw, 13, None, "duplicate of row 2")


def test_duplicate_ignores_surrounding_whitespace(tmp_path, hw):
    spaced = _line([f" {f} " for f in _fields(LINES[2])])
    expect_error(write(tmp_path, LINES + [spaced]), hw, 11, None, "duplicate of row 3")


@pytest.mark.parametrize("cells", [{"budget": ""}, {"verify_tokens": ""},
                                   {"budget": "", "verify_tokens": ""}, {"tok_s": "125"}])
def test_duplicate_written_another_way_is_a_duplicate(tmp_path, hw, cells):
    """Row 9 (eagle3, block 3, budget 3, verify 4, 125.0 tok/s) again with its budget blank
    (a chain's budget is its depth, 3), its verify tokens blank (budget + 1 = 4) or 125 for
    125.0: the same measurement, which loaded as a second one (two rows of one run)."""
    fields = _fields(LINES[8])
    for column, value in cells.items():
        fields[COLUMNS.index(column)] = value
    expect_error(write(tmp_path, LINES + [_line(fields)]), hw, 11, None, "duplicate of row 9")


def test_rows_differing_only_in_notes_are_not_duplicates(tmp_path, hw):
    fields = _fields(LINES[5])
    fields[COLUMNS.index("notes")] = "second run"
    data = load_measurements(write(tmp_path, LINES + [_line(fields)]), hw)
    assert [r.row for r in data.rows] == list(range(2, 12))


def test_allow_duplicates_keeps_both_rows(tmp_path, hw):
    data = load_measurements(write(tmp_path, LINES + [LINES[5]]), hw, allow_duplicates=True)
    assert len(data.rows) == 10
    assert data.rows[-1].row == 11
    assert data.rows[-1].context_tokens == data.rows[4].context_tokens == 32768.0


@pytest.mark.parametrize(("row", "column", "raw"), [
    (5, "tok_s", "nan"),
    (5, "tok_s", "inf"),
    (3, "accept_len", "NaN"),
    (3, "accept_len", "Infinity"),
    (8, "context_tokens", "-inf"),
    (4, "gpus", "nan"),
    (9, "block", "inf"),
    (5, "tok_s", "1e400"),
])
def test_non_finite_numbers(tmp_path, hw, row, column, raw):
    path = write(tmp_path, edited(**{f"r{row}": {column: raw}}))
    expect_error(path, hw, row, column, f"not a finite number: {raw!r}",
                 "fix: write a finite number or remove the row")


@pytest.mark.parametrize("column", REQUIRED)
def test_empty_required_value(tmp_path, hw, column):
    path = write(tmp_path, edited(r7={column: ""}))
    err = expect_error(path, hw, 7, column, "empty value")
    assert err.fix == f"fill in {column} (every row needs {', '.join(REQUIRED)})"


def test_whitespace_only_required_value_is_empty(tmp_path, hw):
    path = write(tmp_path, edited(r9={"source": "   "}))
    expect_error(path, hw, 9, "source", "empty value")


@pytest.mark.parametrize(("row", "column", "raw", "message"), [
    (4, "gpus", "8.5", "not a whole number: '8.5'"),
    (2, "gpus", "7.999", "not a whole number: '7.999'"),
    (9, "block", "2.5", "not a whole number: '2.5'"),
    (3, "budget", "8.1", "not a whole number: '8.1'"),
    (3, "verify_tokens", "9.5", "not a whole number: '9.5'"),
    (4, "gpus", "0", "must be >= 1, got 0"),
    (4, "gpus", "-8", "must be >= 1, got -8"),
    (3, "budget", "0", "must be >= 1, got 0"),
    (4, "gpus", "eight", "not a number: 'eight'"),
    # the bounds of predict's --block / --budget (a block of 5000 was fitted)
    (9, "block", "5000", "block must be 1 to 4096, got 5000"),
    (4, "gpus", "1_6", "not a plain number: '1_6'"),
])
def test_integer_columns(tmp_path, hw, row, column, raw, message):
    path = write(tmp_path, edited(**{f"r{row}": {column: raw}}))
    expect_error(path, hw, row, column, message)


def test_whole_number_written_as_float_is_accepted(tmp_path, hw):
    data = load_measurements(write(tmp_path, edited(r4={"gpus": "8.0"})), hw)
    assert data.rows[2].gpus == 8
    assert isinstance(data.rows[2].gpus, int)
    assert data.systems == ("b300x8", "rtx-pro-6000x8")


@pytest.mark.parametrize("raw", ["-32768", "1e30", "1099511627777"])
def test_context_tokens_outside_what_a_question_may_ask(tmp_path, hw, raw):
    """A row's context is bounded as --context is (2 ** 40 tokens): a CSV context of 1e30 was
    fitted, while no question could ask for it."""
    path = write(tmp_path, edited(r6={"context_tokens": raw}))
    expect_error(path, hw, 6, "context_tokens",
                 f"context_tokens must be 0 to 1099511627776 (2 ** 40), got {raw}")


def test_a_context_of_a_fraction_of_a_token_is_refused_a_mean_is_not(tmp_path, hw):
    """A context of half a token was fitted (and `add --context 0.5` wrote one): refused. But a
    row's context may be a mean (a serving benchmark's total input tokens / requests, which
    `add --from-bench` wrote unrounded before 50924b1): 16384.4 is a context a data file holds,
    and refusing it stopped fit, update and add on a file the tool had written itself (a
    review). A saved fit's copy is read as it was fitted."""
    path = write(tmp_path, edited(r6={"context_tokens": "0.5"}))
    expect_error(path, hw, 6, "context_tokens",
                 "context_tokens must be 0 or at least 1 token, got 0.5 (fix: write the "
                 "context length in tokens, or leave it blank)")
    assert load_measurements(path, hw, stored=True).rows[4].context_tokens == 0.5
    data = load_measurements(write(tmp_path, edited(r6={"context_tokens": "16384.4"})), hw)
    assert data.rows[4].context_tokens == 16384.4
    data = load_measurements(write(tmp_path, edited(r6={"context_tokens": "3.2768e4"})), hw)
    assert data.rows[4].context_tokens == 32768


def test_the_longest_context_is_accepted(tmp_path, hw):
    data = load_measurements(write(tmp_path, edited(r6={"context_tokens": "1099511627776"})), hw)
    assert data.rows[4].context_tokens == 2 ** 40


def test_too_many_fields(tmp_path, hw):
    lines = list(LINES)
    lines[5] += ",extra"
    err = expect_error(write(tmp_path, lines), hw, 6, None, "14 fields, header has 13")
    assert err.fix == "quote fields that contain commas"


def test_too_few_fields(tmp_path, hw):
    lines = list(LINES)
    lines[8] = _line(_fields(lines[8])[:-1])
    expect_error(write(tmp_path, lines), hw, 9, None, "12 fields, header has 13")


def test_unquoted_comma_in_notes(tmp_path, hw):
    fields = _fields(LINES[6])
    lines = list(LINES)
    lines[6] = ",".join(fields)  # "as above, 64k context" loses its quotes
    expect_error(write(tmp_path, lines), hw, 7, None, "14 fields, header has 13")


def test_empty_file(tmp_path, hw):
    path = write(tmp_path, "")
    err = expect_error(path, hw, None, None)
    assert str(err) == f"{path}: empty file (fix: start with the header {','.join(COLUMNS)})"


def test_header_only(tmp_path, hw):
    path = write(tmp_path, LINES[:1])
    err = expect_error(path, hw, None, None)
    assert str(err) == f"{path}: no measurement rows (fix: add at least one row under the header)"


def test_header_and_blank_lines_only(tmp_path, hw):
    path = write(tmp_path, LINES[:1] + ["", ",,,,,,,,,,,,", ""])
    expect_error(path, hw, None, None, "no measurement rows")


def test_missing_file(tmp_path, hw):
    path = tmp_path / "nope.csv"
    err = expect_error(path, hw, None, None, "file not found")
    assert err.fix == "pass an existing CSV with --data"


def test_two_target_models_load_as_pairs(tmp_path, hw):
    # several models in one file: parameters per (model, system) pair (issue 11)
    lines = edited(**{f"r{r}": {"model": "qwen3-8b"} for r in range(4, 11)})
    data = load_measurements(write(tmp_path, lines), hw)
    assert data.models == ("kimi-k2.6", "qwen3-8b") and data.multi_model
    assert data.pairs == ("kimi-k2.6@b300x8", "qwen3-8b@rtx-pro-6000x8")
    assert [data.pair(r) for r in data.rows[:3]] == ["kimi-k2.6@b300x8", "kimi-k2.6@b300x8",
                                                      "qwen3-8b@rtx-pro-6000x8"]


def test_one_target_model_keeps_system_labels(hw):
    data = load_measurements(MEASUREMENTS, hw)
    assert not data.multi_model and data.pairs == data.systems == ("b300x8", "rtx-pro-6000x8")


def test_first_problem_wins(tmp_path, hw):
    # row 4 and row 8 are both broken; the error names row 4
    path = write(tmp_path, edited(r4={"tok_s": "x"}, r8={"hardware": "tpu"}))
    expect_error(path, hw, 4, "tok_s", "not a number: 'x'")


def test_text_argument_is_validated_with_the_given_path(hw):
    text = "\n".join(edited(r5={"tok_s": "-1"})) + "\n"
    with pytest.raises(DataError) as info:
        load_measurements("inline.csv", hw, text=text)
    assert (info.value.file, info.value.row, info.value.column) == ("inline.csv", 5, "tok_s")


def test_row_is_the_file_line_after_a_multiline_field(tmp_path, hw):
    fields = _fields(LINES[1])
    fields[COLUMNS.index("notes")] = "first line\nsecond line"
    lines = [LINES[0], _line(fields)] + edited(r4={"tok_s": "abc"})[2:]
    path = write(tmp_path, lines)
    # row 2 spans file lines 2-3, so the broken bundled row 4 is on file line 5
    assert ",abc," in path.read_text().splitlines()[4]
    expect_error(path, hw, 5, "tok_s", "not a number: 'abc'")


# ------------------------------------------------------------------ hardware table
def test_hardware_missing_column(tmp_path):
    path = write(tmp_path, ["hardware,interconnect,source", "b300,NVLink5,spec"], "hw.csv")
    with pytest.raises(DataError) as info:
        load_hardware(path)
    err = info.value
    assert (err.file, err.row, err.column) == (str(path), 1, "mem_bw_tb_s")
    assert "missing column" in str(err) and "fix:" in str(err)


def test_hardware_duplicate_and_empty_names(tmp_path):
    rows = HARDWARE.read_text().splitlines()
    path = write(tmp_path, rows + [rows[3]], "hw.csv")
    with pytest.raises(DataError) as info:
        load_hardware(path)
    assert (info.value.row, info.value.column) == (len(rows) + 1, "hardware")
    assert "duplicate hardware 'h200'" in str(info.value)

    fields = _fields(rows[2])
    fields[0] = ""
    path = write(tmp_path, rows[:2] + [_line(fields)] + rows[3:], "hw2.csv")
    with pytest.raises(DataError) as info:
        load_hardware(path)
    assert (info.value.row, info.value.column) == (3, "hardware")
    assert "empty value" in str(info.value)


def test_bundled_hardware_table():
    table = load_hardware(HARDWARE)
    assert len(table) == 37
    assert table["b300"]["mem_bw_tb_s"] == "8.0"
    assert table["b300"]["dense_bf16_tflops"] == "2250"   # peak FLOPs for the roofline form
    assert table["rtx-pro-6000"]["interconnect"] == "PCIe Gen5 (no NVLink)"


# ------------------------------------------------------------------ 2. verify_tokens derivation
@pytest.mark.parametrize(("method", "block", "budget", "expected"), [
    ("ar", None, None, 1),
    ("ar", 16, 32, 1),
    ("ddtree", 8, 8, 9),
    ("ddtree", 16, 32, 33),
    ("ddtree", None, 32, 33),
    ("ddtree", 16, None, None),
    ("ddtree", None, None, None),
    ("eagle3", 3, None, 4),
    ("eagle3", 3, 3, 4),
    ("eagle3", 3, 7, 8),     # an EAGLE-3 tree: depth 3, 7 nodes verified as 8
    ("dflash-chain", 16, None, 17),
    ("eagle3", None, None, None),
])
def test_derive_verify_tokens(method, block, budget, expected):
    assert derive_verify_tokens(method, block, budget) == expected


def test_blank_verify_tokens_ar_derives_one(tmp_path, hw):
    data = load_measurements(write(tmp_path, edited(r2={"verify_tokens": ""})), hw)
    row = data.rows[0]
    assert (row.row, row.method, row.verify_tokens, row.accept_len) == (2, "ar", 1, 1.0)


def test_blank_verify_tokens_ddtree_derives_budget_plus_one(tmp_path, hw):
    # budget 12 with block 8: verify tokens come from the budget, not the block
    lines = edited(r3={"verify_tokens": "", "budget": "12"})
    data = load_measurements(write(tmp_path, lines), hw)
    row = data.rows[1]
    assert (row.row, row.method, row.block, row.budget, row.verify_tokens) == (
        3, "ddtree", 8, 12, 13)
    assert isinstance(row.verify_tokens, int)


def test_blank_verify_tokens_chain_derives_block_plus_one(tmp_path, hw):
    lines = edited(r9={"verify_tokens": "", "block": "5", "budget": ""})
    data = load_measurements(write(tmp_path, lines), hw)
    row = data.rows[7]
    # (a chain's budget is its depth: a blank budget reads as the block, core.methods.shaped_budget)
    assert (row.row, row.method, row.block, row.budget, row.verify_tokens, row.accept_len) == (
        9, "eagle3", 5, 5, 6, 1.948)


def test_explicit_verify_tokens_is_kept(tmp_path, hw):
    # (a tree whose budget is not written: its verify tokens are the only size it has, so the
    # budget follows, by the bundled methods table when the reader is given none)
    data = load_measurements(write(tmp_path, edited(r3={"verify_tokens": "12", "budget": ""})), hw)
    assert data.rows[1].verify_tokens == 12 and data.rows[1].budget == 11


def test_blank_underivable_verify_tokens_tree(tmp_path, hw):
    path = write(tmp_path, edited(r3={"verify_tokens": "", "budget": ""}))
    err = expect_error(path, hw, 3, "verify_tokens",
                       "verify_tokens is blank and cannot be derived")
    assert err.fix == "fill in verify_tokens or budget"


@pytest.mark.parametrize("method", ["eagle2", "medusa"])
def test_a_tree_method_with_only_its_block_is_refused(tmp_path, hw, method):
    # EAGLE-2 and Medusa always verify a tree (tree = true in the methods table): the block is
    # the tree's depth, not its size. Such a row was read as a chain of block + 1 tokens (a
    # public EAGLE-2 row of depth 8 whose draft tokens its source does not state became M = 9).
    path = write(tmp_path, edited(r9={"method": method, "verify_tokens": "", "block": "8",
                                      "budget": "", "accept_len": "3.76"}))
    err = expect_error(path, hw, 9, "verify_tokens",
                       "verify_tokens is blank and cannot be derived")
    assert err.fix == "fill in verify_tokens or budget"
    # with the tree's size it loads: a budget of 63 verifies 64 tokens
    data = load_measurements(write(tmp_path, edited(r9={
        "method": method, "verify_tokens": "", "block": "8", "budget": "63",
        "accept_len": "3.76"})), hw)
    assert (data.rows[7].method, data.rows[7].verify_tokens) == (method, 64)


def test_a_saved_fit_reads_a_lone_tree_block_as_it_was_fitted(hw):
    """A fit made before EAGLE-2 needed its size stored such a row (the corpus had one): the
    stored copy is read as fitted (a chain of block + 1), so the fit still answers; a file
    read anew refuses it."""
    from ddtree_bayes.engine.testing import point_mass_draws

    lines = edited(r9={"method": "eagle2", "verify_tokens": "", "block": "8", "budget": "",
                       "accept_len": "3.76"})
    text = "\n".join(lines) + "\n"
    with pytest.raises(DataError, match="verify_tokens is blank and cannot be derived"):
        load_measurements("m.csv", hw, text=text)
    draws = point_mass_draws()
    draws = type(draws)(**{**draws.__dict__, "data_csv": text})
    row = draws.measurements.rows[7]
    # (as the fit read it: M = 9, a tree of 8 draft nodes)
    assert (row.method, row.block, row.budget, row.verify_tokens) == ("eagle2", 8, 8, 9)


def test_blank_underivable_verify_tokens_chain(tmp_path, hw):
    path = write(tmp_path, edited(r9={"verify_tokens": "", "block": "", "budget": ""}))
    err = expect_error(path, hw, 9, "verify_tokens",
                       "verify_tokens is blank and cannot be derived")
    assert err.fix == "fill in verify_tokens or block"


def test_bundled_measurements_load(hw):
    data = load_measurements(MEASUREMENTS, hw)
    assert len(data.rows) == 9
    assert data.systems == ("b300x8", "rtx-pro-6000x8")
    assert data.model == "kimi-k2.6"
    assert data.path == str(MEASUREMENTS)
    assert data.text == MEASUREMENTS.read_text()
    assert [r.row for r in data.rows] == list(range(2, 11))
    assert [r.method for r in data.rows] == ["ar", "ddtree"] + ["ar"] * 5 + ["eagle3"] * 2
    assert [r.verify_tokens for r in data.rows] == [1, 9, 1, 1, 1, 1, 1, 4, 4]

    tree = data.rows[1]
    assert (tree.row, tree.system, tree.engine, tree.method) == (3, "b300x8", "sglang", "ddtree")
    assert (tree.block, tree.budget, tree.verify_tokens) == (8, 8, 9)
    assert tree.accept_len == 4.4
    assert tree.tok_s == 303.0
    assert tree.context_tokens is None
    assert tree.is_speculative
    assert tree.step_ms == pytest.approx(4.4 / 303 * 1000)

    ar = data.rows[0]
    assert (ar.system, ar.block, ar.budget, ar.context_tokens) == ("b300x8", None, None, None)
    assert not ar.is_speculative
    assert ar.step_ms == pytest.approx(1000 / 133)

    # context 0 is a value, not blank
    assert [r.context_tokens for r in data.rows[2:]] == [
        0.0, 16384.0, 32768.0, 65536.0, 131072.0, 0.0, 131072.0]
    assert data.rows[7].accept_len == 1.948


def test_blank_context_tokens_stays_none(tmp_path, hw):
    data = load_measurements(write(tmp_path, edited(r6={"context_tokens": ""})), hw)
    assert data.rows[4].row == 6
    assert data.rows[4].context_tokens is None
    assert data.rows[3].context_tokens == 16384.0


def test_load_inputs_reports_bad_data(tmp_path):
    bad = write(tmp_path, edited(r8={"accept_len": "0.5"}))
    with pytest.raises(DataError) as info:
        api.load_inputs(bad, PRIORS, HARDWARE, workdir=tmp_path)
    assert (info.value.file, info.value.row, info.value.column) == (str(bad), 8, "accept_len")


def test_load_inputs_defaults_to_bundled_files(tmp_path):
    data, cfg = api.load_inputs(workdir=tmp_path)  # tmp_path has no data/ or models/
    assert Path(data.path) == bundled("measurements.csv")
    assert Path(cfg.path) == bundled("priors.toml")
    assert len(data.rows) == 9


# ------------------------------------------------------------------ 3. CLI, bad input
@pytest.fixture
def cli_dir(tmp_path, monkeypatch):
    """An empty working directory; any attempt to start sampling fails the test."""
    monkeypatch.chdir(tmp_path)

    def no_sampling(*args, **kwargs):
        raise AssertionError("input validation passed and sampling was about to start")

    monkeypatch.setattr(inference, "reproducible_pytensor", no_sampling)
    monkeypatch.setattr(inference, "sample", no_sampling)
    return tmp_path


def run_cli(argv: list[str]) -> int:
    before = set(sys.modules)
    code = main(argv)
    heavy = sorted(m for m in set(sys.modules) - before
                   if m.split(".")[0] in ("pymc", "pytensor", "nutpie", "arviz", "xarray"))
    assert heavy == [], f"bad input should fail before importing {heavy[:3]}"
    return code


def one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    assert err.endswith("\n")
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ddtree-bayes: error: ")
    return lines[0]


def nothing_written(directory: Path, *inputs: Path) -> None:
    assert not (directory / "models").exists()
    assert sorted(directory.iterdir()) == sorted(inputs)


@pytest.mark.parametrize(("cells", "row", "column", "message"), [
    ({"r5": {"tok_s": "fast"}}, 5, "tok_s", "not a number: 'fast'"),
    ({"r3": {"hardware": "gb400"}}, 3, "hardware", "unknown hardware 'gb400'"),
    ({"r4": {"verify_tokens": "2"}}, 4, "verify_tokens", "autoregressive rows verify 1 token"),
    ({"r10": {"accept_len": "0.9"}}, 10, "accept_len", "accept_len must be >= 1"),
])
def test_cli_fit_bad_data(cli_dir, capsys, cells, row, column, message):
    bad = write(cli_dir, edited(**cells), "bad.csv")
    assert run_cli(["fit", "--data", str(bad), "--quiet"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"ddtree-bayes: error: {bad}, row {row}, column '{column}': ")
    assert message in line
    assert "(fix: " in line
    nothing_written(cli_dir, bad)


def test_cli_fit_missing_column(cli_dir, capsys):
    i = COLUMNS.index("tok_s")
    bad = write(cli_dir, [_line([f for j, f in enumerate(_fields(x)) if j != i]) for x in LINES],
                "bad.csv")
    assert run_cli(["fit", "--data", str(bad)]) == 2
    line = one_error_line(capsys)
    assert line == (f"ddtree-bayes: error: {bad}, row 1, column 'tok_s': missing column "
                    f"(fix: the header must contain {','.join(COLUMNS)})")
    nothing_written(cli_dir, bad)


def test_cli_fit_duplicate_row(cli_dir, capsys):
    bad = write(cli_dir, LINES + [LINES[2]], "bad.csv")
    assert run_cli(["fit", "--data", str(bad), "--format", "json"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"ddtree-bayes: error: {bad}, row 11: duplicate of row 3 (fix: ")
    nothing_written(cli_dir, bad)


def test_cli_fit_two_models_one_without_card(cli_dir, capsys):
    # a fit of several models needs every model's card; checked before any sampling
    bad = write(cli_dir, edited(r2={"model": "other-model"}), "bad.csv")
    assert run_cli(["fit", "--data", str(bad)]) == 2
    line = one_error_line(capsys)
    # (it named data/models.csv, not the row that names the model)
    assert line == (f"ddtree-bayes: error: {bad}, row 2, column 'model': no model card for "
                    "'other-model' (fix: add its card (`ddtree-bayes card add --hf-config "
                    "PATH/config.json --name other-model`, or --gguf FILE.gguf, or a row in "
                    "data/models.csv), or correct the name)")
    nothing_written(cli_dir, bad)


def test_cli_fit_missing_data_file(cli_dir, capsys):
    missing = cli_dir / "nope.csv"
    assert run_cli(["fit", "--data", str(missing)]) == 2
    assert one_error_line(capsys) == (f"ddtree-bayes: error: {missing}: file not found "
                                      "(fix: pass an existing CSV with --data)")
    nothing_written(cli_dir)


def test_cli_fit_empty_data_file(cli_dir, capsys):
    bad = write(cli_dir, "", "empty.csv")
    assert run_cli(["fit", "--data", str(bad)]) == 2
    assert one_error_line(capsys).startswith(f"ddtree-bayes: error: {bad}: empty file (fix: ")
    nothing_written(cli_dir, bad)


def test_cli_fit_bad_hardware_file(cli_dir, capsys):
    bad = write(cli_dir, ["hardware,mem_bw_tb_s,source", "b300,8.0,spec"], "hw.csv")
    assert run_cli(["fit", "--hardware-file", str(bad)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"ddtree-bayes: error: {bad}, row 1, column 'interconnect': "
                           "missing column (fix: ")
    nothing_written(cli_dir, bad)


def test_cli_fit_misspelt_required_column_of_a_card_table(cli_dir, capsys):
    """fit --hardware-file with `mem_bw_tbs`, and a working directory's data/models.csv with
    `params_activ_b`, said "missing column 'mem_bw_tb_s'" (and 'params_active_b'): the typo is
    named, as measurements.csv's is."""
    text = bundled("hardware.csv").read_text(encoding="utf-8")
    bad = cli_dir / "hw.csv"
    bad.write_text(text.replace("mem_bw_tb_s", "mem_bw_tbs", 1))
    assert run_cli(["fit", "--hardware-file", str(bad)]) == 2
    assert one_error_line(capsys) == (
        f"ddtree-bayes: error: {bad}, row 1, column 'mem_bw_tbs': unknown column, read as no "
        "column (fix: did you mean 'mem_bw_tb_s'? rename it: a column this reader does not "
        "know is ignored)")
    nothing_written(cli_dir, bad)
    bad.unlink()
    models = cli_dir / "data" / "models.csv"
    models.parent.mkdir()
    models.write_text(bundled("models.csv").read_text(encoding="utf-8")
                      .replace("params_active_b", "params_activ_b", 1))
    assert run_cli(["fit"]) == 2
    assert one_error_line(capsys) == (
        f"ddtree-bayes: error: {models}, row 1, column 'params_activ_b': unknown column, read as "
        "no column (fix: did you mean 'params_active_b'? rename it: a column this reader does "
        "not know is ignored)")
    nothing_written(cli_dir, models.parent)


@pytest.mark.parametrize(("edit", "column", "message"), [
    (lambda t: t.replace('moe_form = "roofline"\n', 'moe_form = "roofline\n', 1), None,
     "not valid TOML: Illegal character '\\n' (at line 19, column 21)"),
    (lambda t: t.replace("[priors.noise_sd]", "[priors.noise_scale]", 1), "priors.noise_sd",
     "missing prior"),
    (lambda t: t.replace('dist = "halfnormal"\nsigma = 0.05', 'dist = "halfnormal"\nsigma = 0',
                         1), "priors.moe_hw_sd", "'sigma' must be > 0, got 0"),
], ids=["invalid-toml", "missing-prior", "zero-sigma"])
def test_cli_fit_bad_priors(cli_dir, capsys, edit, column, message):
    text = PRIORS.read_text()
    new = edit(text)
    assert new != text
    bad = cli_dir / "bad.toml"
    bad.write_text(new)
    assert run_cli(["fit", "--priors", str(bad)]) == 2
    line = one_error_line(capsys)
    where = f"{bad}, column '{column}'" if column else str(bad)
    assert line.startswith(f"ddtree-bayes: error: {where}: {message}"), line
    assert "(fix: " in line
    nothing_written(cli_dir, bad)


def test_cli_fit_missing_priors_file(cli_dir, capsys):
    missing = cli_dir / "nope.toml"
    assert run_cli(["fit", "--priors", str(missing)]) == 2
    assert one_error_line(capsys) == (
        f"ddtree-bayes: error: {missing}: cannot read priors file: No such file or directory "
        "(fix: pass an existing file with --priors)")
    nothing_written(cli_dir)


def test_cli_fit_bad_sampler_settings(cli_dir, capsys):
    assert run_cli(["fit", "--chains", "0"]) == 2
    assert one_error_line(capsys) == (  # checked where it is parsed (issue 12)
        "ddtree-bayes: error: argument --chains: 0 is outside 1..64 "
        "(fix: use e.g. --chains 4)")
    nothing_written(cli_dir)
    assert run_cli(["fit", "--tune", "0"]) == 2   # nutpie panicked with a traceback
    assert one_error_line(capsys) == (
        f"ddtree-bayes: error: argument --tune: 0 is outside 1..{MAX_DRAWS} (fix: use e.g. --tune 1000)"
        )
    nothing_written(cli_dir)


def test_cli_fit_prefers_local_data_dir(cli_dir, capsys):
    (cli_dir / "data").mkdir()
    local = write(cli_dir / "data", edited(r6={"gpus": "x"}))
    assert run_cli(["fit"]) == 2
    assert one_error_line(capsys).startswith(
        f"ddtree-bayes: error: {local}, row 6, column 'gpus': not a number: 'x'")
    assert not (cli_dir / "models").exists()


def test_cli_predict_without_a_fit(cli_dir, capsys):
    assert run_cli(["predict"]) == 3
    line = one_error_line(capsys)
    assert line == (f"ddtree-bayes: error: no fit found in {cli_dir / 'models'} "
                    "(fix: run `ddtree-bayes fit` first)")
    nothing_written(cli_dir)


def test_cli_predict_unknown_fit_id(cli_dir, capsys):
    assert run_cli(["predict", "--fit", "20990101T000000Z-deadbeef", "--accept", "4"]) == 3
    line = one_error_line(capsys)
    assert line.startswith("ddtree-bayes: error: no fit '20990101T000000Z-deadbeef' in "
                           f"{cli_dir / 'models' / 'fits'} (fix: ")
    nothing_written(cli_dir)


def test_error_classes_and_exit_codes():
    assert issubclass(DataError, InputError)
    err = DataError("boom", file="f.csv", row=7, column="tok_s", fix="do x")
    assert str(err) == "f.csv, row 7, column 'tok_s': boom (fix: do x)"
    assert err.exit_code == 2
    assert str(DataError("boom")) == "boom"


def test_utf8_bom_from_excel_is_accepted(tmp_path, hw):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + MEASUREMENTS.read_bytes())
    assert len(load_measurements(path, hw).rows) == 9


@pytest.mark.parametrize("column,raw", [("method", "AR"), ("engine", "SGLang")])
def test_engine_and_method_must_be_lowercase_names(tmp_path, hw, column, raw):
    path = write(tmp_path, edited(r2={column: raw}))
    expect_error(path, hw, 2, column, "not a lowercase name", f"'{raw.lower()}'")


@pytest.mark.parametrize("column,raw,fix", [("method", "dd tree", "'dd-tree'"),
                                            ("engine", "sg lang", "'sg-lang'"),
                                            ("method", "\u00e9agle3", "'eagle3'"),
                                            ("engine", "\u30bd\u30fc\u30b9",
                                             "write it with those only")])
def test_a_name_lowercasing_does_not_mend_gets_a_name_that_is_one(tmp_path, hw, column, raw, fix):
    """'sg lang' was "not a lowercase name (fix: write it in lowercase, e.g. 'sg lang')": the
    fix repeated the name it refused. Now the message says what a name may hold and the fix
    gives one it takes."""
    path = write(tmp_path, edited(r2={column: raw}))
    err = expect_error(path, hw, 2, column, f"{raw!r} is not a name (lowercase letters, digits "
                       "and . _ + -)", fix)
    assert f"e.g. {raw.lower()!r}" not in str(err)


@pytest.mark.parametrize("raw,message", [
    ("Kimi-K2.6", "'Kimi-K2.6' is not a lowercase name (fix: write it in lowercase, e.g. "
                  "'kimi-k2.6')"),
    ("My Model", "'My Model' is not a name (lowercase letters, digits and . _ + -) (fix: write "
                 "it with those only, e.g. 'my-model')")])
def test_a_model_no_card_can_be_named_is_refused(tmp_path, hw, raw, message):
    """The model column holds card names. 'Kimi-K2.6' was fitted without the bundled
    kimi-k2.6 card, on a proxy card, whose note said `card add ... --name Kimi-K2.6`, a name
    card add refuses; 'My Model' could never get a card at all."""
    path = write(tmp_path, [line.replace("kimi-k2.6,", f"{raw},") for line in edited()])
    err = expect_error(path, hw, 2, "model")
    assert str(err) == f"{path}, row 2, column 'model': {message}"


@pytest.mark.parametrize(("column", "value", "fragment"), [
    ("mem_bw_tb_s", "3350", "column 'mem_bw_tb_s': 3350 is above 100, more than any one GPU has "
                            "(fix: write it in TB/s per GPU (3.35 for an H100))"),   # GB/s
    ("dense_bf16_tflops", "989000000000000", "is above 100000"),                       # FLOPS
    ("memory_gb", "640", None),                 # 8 x 80 GB is a node, but 640 GB fits a GPU row
    ("hardware", "My GPU", "column 'hardware': 'My GPU' is not a lowercase name (fix: write it "
                           "as --hardware takes it, e.g. 'my-gpu')"),
    ("interconnect", "", "column 'interconnect': empty value"),   # was read as NVLink-class
    ("interconnect", "none", "column 'interconnect': 'none' names neither PCIe nor an "
                             "NVLink-class fabric (fix: write e.g. 'PCIe Gen5'"),   # so was this
])
def test_a_hardware_row_no_gpu_has_is_refused(tmp_path, column, value, fragment):
    """A unit slip in a user's GPU row priced every step on it (a GB/s figure in the TB/s
    column: a 1000x faster read); a name --hardware cannot take made the row unreachable; a
    blank interconnect was silently read as NVLink-class (audit)."""
    lines = HARDWARE.read_text().splitlines()
    header = next(csv.reader([lines[0]]))
    row = next(csv.reader([lines[1]]))
    row[header.index("hardware")] = "my-gpu"
    row[header.index(column)] = value
    path = write(tmp_path, [lines[0], _line(row)], "hw.csv")
    if fragment is None:
        assert load_hardware(path)["my-gpu"][column] == value
        return
    with pytest.raises(DataError) as err:
        load_hardware(path)
    assert str(err.value).startswith(f"{path}, row 2, column '{column}': ")
    assert fragment in str(err.value)


def test_an_autoregressive_row_with_a_drafter_shape_or_a_huge_gpu_count_is_refused(tmp_path, hw):
    """An `ar` row with a block (a speculative run mislabelled, or a stale cell) and 100,000
    GPUs (predict takes at most 1024) were accepted (audit)."""
    expect_error(write(tmp_path, edited(r2={"block": "16"})), hw, 2, "block",
                 "an autoregressive row drafts nothing: block and budget are blank")
    expect_error(write(tmp_path, edited(r4={"budget": "8"})), hw, 4, "budget")
    expect_error(write(tmp_path, edited(r2={"gpus": "100000"})), hw, 2, "gpus",
                 "100000 GPUs in one system is more than 1024")


@pytest.mark.parametrize("verify", ["500", "5", "8"])
def test_verify_tokens_that_are_not_the_budgets_are_refused(tmp_path, hw, verify):
    """A DDTree of 8 nodes verifies 9 tokens (row 3): 500 or 5 were appended and fitted."""
    path = write(tmp_path, edited(r3={"verify_tokens": verify}))
    expect_error(path, hw, 3, "verify_tokens", "a budget of 8 draft tokens is verified as 9 "
                 f"tokens per step, not {verify}", "set verify_tokens to 9")


def test_an_eagle_tree_verifies_its_budget_plus_one(tmp_path, hw):
    # depth 3 (the block) and 7 nodes verify 8 tokens, as the SpecForge rows write it
    path = write(tmp_path, edited(r9={"block": "3", "budget": "7", "verify_tokens": "8"}))
    assert load_measurements(path, hw).rows[7].verify_tokens == 8


def test_an_eagle_tree_with_a_blank_verify_count_verifies_its_budget_plus_one(tmp_path, hw):
    """derive_verify_tokens said block + 1 for every tree but DDTree's, so a blank verify
    count on an EAGLE-3 tree of depth 3 and 7 nodes loaded as M = 4 (and a review found the
    new budget check then refusing every such question)."""
    path = write(tmp_path, edited(r9={"block": "3", "budget": "7", "verify_tokens": ""}))
    assert load_measurements(path, hw).rows[7].verify_tokens == 8


def test_a_tree_given_only_its_verify_count_has_that_budget_and_a_chain_no_more_than_its_block(
        tmp_path, hw):
    """A review: a DDTree of verify 12 and no budget was priced as a tree of 0 nodes; a DFlash
    chain of block 8 with budget 16 (verify 17) was taken, though a chain drafts at most its
    block."""
    from ddtree_bayes.core.config import load_priors

    methods = load_priors(bundled("priors.toml")).methods
    path = write(tmp_path, edited(r3={"verify_tokens": "12", "budget": ""}))
    assert load_measurements(path, hw, methods=methods).rows[1].budget == 11
    path = write(tmp_path, edited(r3={"method": "dflash", "block": "8", "budget": "16",
                                      "verify_tokens": "", "accept_len": "4"}))
    expect_error(path, hw, 3, "budget", "dflash drafts a chain of at most 7 tokens per step "
                 "(block 8 less its anchor), not a budget of 16", methods=methods)
    # a block of 8 holds its anchor: 7 drafts (dflash,8,7,8), so a budget of 8 is refused too,
    # and a blank budget verifying 8 tokens is that chain of 7
    path = write(tmp_path, edited(r3={"method": "dflash", "block": "8", "budget": "8",
                                      "verify_tokens": "", "accept_len": "4"}))
    expect_error(path, hw, 3, "budget", "(block 8 less its anchor), not a budget of 8",
                 methods=methods)
    path = write(tmp_path, edited(r3={"method": "dflash", "block": "8", "budget": "",
                                      "verify_tokens": "", "accept_len": "4"}))
    row = load_measurements(path, hw, methods=methods).rows[1]
    assert (row.budget, row.verify_tokens) == (7, 8)


@pytest.mark.parametrize("raw", ["7_00", "\uff16\uff15\uff10", "1_048_576"])
def test_a_number_only_python_reads_is_refused(tmp_path, hw, raw):
    """`add --tok-s 7_00` (and fullwidth digits) were written to the CSV as typed: the tool read
    them back through float(), other CSV readers do not."""
    path = write(tmp_path, edited(r6={"tok_s": raw}))
    err = expect_error(path, hw, 6, "tok_s", f"not a plain number: {raw!r}")
    assert str(err).endswith("(fix: write it with the digits 0-9, a point and an exponent only "
                             f"(e.g. {int(float(raw))}): other CSV readers take nothing else)")


@pytest.mark.parametrize(("name", "meant"), [("concurency", "concurrency"),
                                              ("Concurrency", "concurrency"),
                                              ("concurrenc", "concurrency")])
def test_a_misspelt_column_is_refused_not_ignored(tmp_path, hw, name, meant):
    """A ``concurency`` column (value 8) was ignored: every row read as one stream, exit 0."""
    lines = list(LINES)
    lines[0] += f",{name}"
    lines[1:] = [line + ",8" for line in lines[1:]]
    err = expect_error(write(tmp_path, lines), hw, 1, name, "unknown column")
    assert f"did you mean {meant!r}?" in str(err)


def test_other_extra_columns_stay_allowed(tmp_path, hw):
    """The public sweeps' columns, a known name with more to it, and a name near a column the
    header already has (a review found accept_len_std and max_concurrency refused)."""
    lines = list(LINES)
    extra = ["sweep", "derived", "accept_len_std", "max_concurrency", "note", "gpu"]
    lines[0] += "," + ",".join(extra)
    lines[1:] = [line + ",1" * len(extra) for line in lines[1:]]
    assert len(load_measurements(write(tmp_path, lines), hw).rows) == len(LINES) - 1


@pytest.mark.parametrize("name", ["max_concurrency", "batch_size", "num_streams", "n_streams",
                                  "concurrency_level", "num_concurrent", "Max-Concurrency",
                                  "users", "concurrent_users", "num_users", "Concurrent Users",
                                  "clients", "num_clients"])
def test_a_stream_count_column_above_one_without_concurrency_is_refused(tmp_path, hw, name):
    """A hand-made file with a ``max_concurrency`` column of 8 (tok_s the 8 streams' total, as
    `vllm bench serve --max-concurrency 8` reports it) and no ``concurrency`` column was
    fitted as one stream per row, exit 0: each step priced 8x too short. Such a column is
    refused at its first value above 1 (row 3 here); at 1 or blank it stays allowed
    (test_other_extra_columns_stay_allowed), and beside a ``concurrency`` column too. A load
    test's ``users`` / ``concurrent_users`` / ``clients`` (what a results table copied from a
    load generator calls the streams) were read as no column, the same wrong number."""
    lines = list(LINES)
    lines[0] += f",{name}"
    lines[1:] = [line + (",8" if i == 1 else ",1") for i, line in enumerate(lines[1:])]
    err = expect_error(write(tmp_path, lines), hw, 3, name,
                       f"{name} 8 but no concurrency column: the row is read as one stream")
    assert str(err).endswith("(fix: if tok_s is the 8 streams' total, rename the column "
                             "concurrency; if it is one stream's, rename or drop the column)")
    lines[0] += ",concurrency"
    lines[1:] = [line + (",1" if i == 1 else ",") for i, line in enumerate(lines[1:])]
    assert len(load_measurements(write(tmp_path, lines), hw).rows) == len(LINES) - 1


def test_a_stream_count_above_one_beside_a_blank_concurrency_cell_is_refused(tmp_path, hw):
    """The check stopped at a header holding ``concurrency``: a row whose concurrency cell was
    blank but whose max_concurrency was 8 was fitted as one stream, exit 0. Each row is
    checked: a blank concurrency cell beside a stream count above 1 is refused (row 4 here),
    a concurrency cell written (1 at row 3) says what tok_s is and is kept."""
    lines = list(LINES)
    lines[0] += ",concurrency,max_concurrency"
    cells = {3: ",1,8", 4: ",,8"}
    lines[1:] = [line + cells.get(row, ",,") for row, line in enumerate(lines[1:], start=2)]
    err = expect_error(write(tmp_path, lines), hw, 4, "max_concurrency",
                       "max_concurrency 8 but concurrency blank: the row is read as one stream")
    assert str(err).endswith("(fix: if tok_s is the 8 streams' total, set concurrency to 8; if "
                             "it is one stream's, set concurrency to 1)")
    lines[3] = lines[3].removesuffix(",,8") + ",1,8"
    assert len(load_measurements(write(tmp_path, lines), hw).rows) == len(LINES) - 1


@pytest.mark.parametrize("name", ["tok_s_per_user", "per_user_tok_s", "Per-User tok/s",
                                  "tps_per_user", "output_throughput_per_user", "user_tok_s",
                                  "per_stream_tok_s", "tokens_per_second_per_user"])
def test_a_per_user_throughput_column_that_contradicts_tok_s_is_refused(tmp_path, hw, name):
    """A hand-made file with ``concurrency`` 8 and a per-user throughput column beside tok_s
    was read with tok_s as the 8 streams' total and the other column ignored, even when the
    two were equal, which says tok_s is one stream's: tok_s 100 at C = 8 was fitted as 12.5
    tok/s per user (an 80 ms step where the row's own numbers say 10 ms), exit 0. A row
    whose tok_s is below C times its per-user cell by more than a factor 1.5 is refused; at
    C = 1 the same (tok_s 303 beside a per-user 500). A tok_s above it is kept, at C = 1 too:
    a per-user rate counting the first token's wait is below the decode-only rate by any
    factor (test_a_per_user_rate_that_counts_the_first_token_wait_is_no_contradiction)."""
    lines = list(LINES)
    lines[0] += f",concurrency,{name}"
    per_user = {2: ",1,133", 3: ",8,100"}   # row 3: tok_s 303 is about 3 x 100, not 8 x
    lines[1:] = [line + per_user.get(row, ",,") for row, line in enumerate(lines[1:], start=2)]
    err = expect_error(write(tmp_path, lines), hw, 3, name,
                       f"tok_s 303 is 3.03 x its {name} 100, but concurrency is 8: tok_s at "
                       "C > 1 is the C streams' total (8 x 100 = 800)")
    assert str(err).endswith("(fix: write the 8 streams' total in tok_s, or set concurrency to "
                             "the streams the run decoded)")
    lines[2] = lines[2].removesuffix(",8,100") + ",8,37.9"   # 303 / 8 = 37.9: consistent
    assert len(load_measurements(write(tmp_path, lines), hw).rows) == len(LINES) - 1
    lines[2] = lines[2].removesuffix(",8,37.9") + ",1,500"   # one stream below its per-user
    err = expect_error(write(tmp_path, lines), hw, 3, name,
                       f"tok_s 303 is 0.606 x its {name} 500, but concurrency is 1: tok_s at "
                       "C = 1 is the one stream's decode rate, at least its per-user rate")
    assert str(err).endswith("(fix: write the one stream's tok/s (1000 / TPOT) in tok_s)")
    lines[2] = lines[2].removesuffix(",1,500") + ",,500"   # a blank concurrency is 1 too
    expect_error(write(tmp_path, lines), hw, 3, name, "but concurrency is 1")


@pytest.mark.parametrize(("conc", "tok_s"), [("4", "266.67"), ("1", "66.67"), ("", "66.67")])
def test_a_per_user_rate_that_counts_the_first_token_wait_is_no_contradiction(tmp_path, hw,
                                                                               conc, tok_s):
    """trtllm-bench's ``output_throughput_per_user_tok_s`` ("Per User Output Throughput [w/
    ctx]") is a request's output tokens over its whole latency, TTFT included, so it is below
    the decode-only 1000 / TPOT that tok_s is made of (docs/howto/own-data.md) by 1 + TTFT /
    ((n - 1) x TPOT), with no bound. A 32k-token prompt and 128 output tokens, by hand: TTFT
    3000 ms, TPOT 15 ms, per user 128 x 1000 / (3000 + 127 x 15) = 26.1 tok/s, and a correct
    tok_s of 4 x 1000 / 15 = 266.67 at C = 4 (66.67 at C = 1) is 2.55 x C x 26.1. It was
    refused (\"tok_s at C = 1 is the one stream's\", fix: set concurrency to 3): only a tok_s
    below C x the per-user value contradicts it (one stream's rate read as the total)."""
    name = "output_throughput_per_user_tok_s"
    lines = list(LINES)
    lines[0] += f",concurrency,{name}"
    lines[1:] = [line + ",," for line in lines[1:]]
    fields = lines[2].removesuffix(",,").split(",")
    fields[LINES[0].split(",").index("tok_s")] = tok_s
    lines[2] = ",".join(fields) + f",{conc},26.1"
    assert len(load_measurements(write(tmp_path, lines), hw).rows) == len(LINES) - 1


@pytest.mark.parametrize("name", ["max_tok_s_per_user", "TPS/user MAXIMUM", "p99_tps_per_user",
                                  "peak_per_user_tok_s", "p90_tok_s_per_user"])
def test_an_extreme_of_the_per_user_rates_is_not_compared_with_tok_s(tmp_path, hw, name):
    """A benchmark's per-user percentiles ("[TPS/user] MAXIMUM", P99) are its fastest
    requests': at C = 64 the last requests of a run decode nearly alone, by hand 1000 /
    10.5 ms = 95 tok/s, beside a median TPOT of 33.3 ms under load (30 tok/s a user, tok_s
    64 x 30 = 1920). 1920 / (64 x 95) = 0.316 < 1 / 1.5 was refused as one stream's rate
    read as the total; such a column is no user's typical rate and is not compared (a
    median, p50 or mean is)."""
    lines = list(LINES)
    lines[0] += f",concurrency,{name}"
    lines[1:] = [line + ",," for line in lines[1:]]
    fields = lines[2].removesuffix(",,").split(",")
    fields[LINES[0].split(",").index("tok_s")] = "1920"
    lines[2] = ",".join(fields) + ",64,95"
    assert len(load_measurements(write(tmp_path, lines), hw).rows) == len(LINES) - 1
    lines[0] = lines[0].removesuffix(name) + "p50_tok_s_per_user"   # the median is compared
    expect_error(write(tmp_path, lines), hw, 3, "p50_tok_s_per_user",
                 "tok_s 1920 is 20.2 x its p50_tok_s_per_user 95, but concurrency is 64")


@pytest.mark.parametrize("name", ["user", "per_user_ttft_ms", "users_tok_s_total",
                                  "total_tok_s", "stream_id", "tok_s_per_user_std",
                                  "per_user_tps_ratio"])
def test_other_user_or_stream_columns_are_not_read_as_per_user_throughput(tmp_path, hw, name):
    """Only a column named as one user's (stream's) throughput is compared with tok_s: a
    user name, a per-user latency, a total, a spread or a ratio are other quantities and
    stay ignored."""
    lines = list(LINES)
    lines[0] += f",concurrency,{name}"
    lines[1:] = [line + ",1,5" for line in lines[1:]]
    assert len(load_measurements(write(tmp_path, lines), hw).rows) == len(LINES) - 1


@pytest.mark.parametrize("name", ["n_batch", "n_ubatch", "max_num_batched_tokens", "batch",
                                  "cuda_streams", "stream_id"])
def test_a_column_that_only_contains_a_stream_word_stays_allowed(tmp_path, hw, name):
    """The stream-count names were matched as substrings: llama-bench's ``n_batch`` 2048,
    vLLM's ``max_num_batched_tokens`` 8192, a run-id ``batch`` column were refused, with a fix
    ("rename the column concurrency") that would price every step 2048x too long. Only a
    whole stream-count name is read as one; these files load as before."""
    lines = list(LINES)
    lines[0] += f",{name}"
    lines[1:] = [line + ",2048" for line in lines[1:]]
    assert len(load_measurements(write(tmp_path, lines), hw).rows) == len(LINES) - 1


def test_the_own_data_page_describes_the_columns_the_reader_takes():
    """docs/howto/own-data.md said "one row per benchmark run at concurrency 1" and "tok_s is
    decode throughput of the one stream", though the data take a `concurrency` column (tok_s
    the C streams' total) and `add --from-bench` imports serving runs at C > 1."""
    from ddtree_bayes.core.data import COLUMNS, OPTIONAL_COLUMNS

    page = (Path(__file__).resolve().parents[1] / "docs" / "howto" / "own-data.md").read_text()
    section = page[page.index("## The measurement file"):]
    section = section[:section.index("\n## ", 1)]
    assert "    " + ",".join(COLUMNS) + "\n" in section
    assert OPTIONAL_COLUMNS == ("concurrency", "drafter")
    assert "at concurrency 1:" not in section
    assert "an optional `drafter` column: the drafter card" in " ".join(section.split())
    assert ("an optional `concurrency` column: the streams decoded together, blank = 1"
            in " ".join(section.split()))
    assert "the C streams' total" in " ".join(section.split())
    # it said "as `vllm bench serve --max-concurrency C` and SGLang `bench_serving` report it":
    # their output throughput counts the prefill and the ramp-up, where add --from-bench takes
    # the decode rate, C x 1000 / TPOT (a hand-copied row would be below an imported one)
    assert "`bench_serving` report it" not in " ".join(section.split())
    assert "C x 1000 / TPOT" in " ".join(section.split())


def test_a_chain_verifying_fewer_tokens_than_its_block_is_refused_with_a_blank_budget(tmp_path,
                                                                                    hw):
    """`eagle3,3,,2` was read (block 3, 2 verified); `eagle3,3,3,2` was refused. A sequential
    drafter's blank budget is the chain of depth block, verified as block + 1 = 4 tokens."""
    path = write(tmp_path, edited(r10={"budget": "", "verify_tokens": "2", "accept_len": "1.5"}))
    for methods in (None, load_priors(PRIORS).methods):
        expect_error(path, hw, 10, "verify_tokens", "eagle3 with block 3 and no budget is a "
                     "chain of 3 draft tokens, verified as 4 tokens per step, not 2",
                     "(fix: set verify_tokens to 4 (or blank), or give the budget of the tree "
                     "it verifies)", methods=methods)
    # the explicit budget is refused as before; a tree (verify above block + 1) is read
    expect_error(write(tmp_path, edited(r10={"verify_tokens": "2", "accept_len": "1.5"})), hw,
                 10, "verify_tokens", "a budget of 3 draft tokens is verified as 4 tokens per "
                 "step, not 2")
    tree = load_measurements(write(tmp_path, edited(r10={"budget": "", "verify_tokens": "9"})),
                             hw)
    assert (tree.rows[8].block, tree.rows[8].verify_tokens) == (3, 9)


def test_cli_fit_warns_of_an_engine_one_edit_from_another_before_sampling(cli_dir, capsys):
    """A data file with 'sglnag' beside 'sglang' was fitted with no word: the typo became a
    new engine. fit warns on stderr (before sampling) naming the row and the likelier name."""
    bad = write(cli_dir, edited(r3={"engine": "sglnag"}), "bad.csv")
    main(["fit", "--data", str(bad)])   # (cli_dir stops it where sampling would start)
    out, err = capsys.readouterr()
    assert "sampling was about to start" in err.splitlines()[-1]
    assert err.splitlines()[0] == (
        f"ddtree-bayes: warning: {bad}, row 3: engine 'sglnag' is one edit from 'sglang' "
        "(1 row): did you mean 'sglang'? (as written it is fitted as another engine)")


def test_a_dflash_chain_verifying_another_count_than_its_block_is_refused(tmp_path, hw):
    """DFlash (tree = false, depth = "block - 1") with block 16 and no budget drafts a chain
    of 15 tokens after its anchor and verifies 16; `dflash,16,,17` (the old block + 1 way of
    writing it) and `dflash,16,,12` were read as configurations of their own. Refused, as
    `eagle3,3,,2` is, naming verify_tokens and the count; `dflash,16,,16` (and blank) is read
    as the chain of 15."""
    for methods in (None, load_priors(PRIORS).methods):
        for wrong in ("17", "12"):
            path = write(tmp_path, edited(r3={"method": "dflash", "block": "16", "budget": "",
                                              "verify_tokens": wrong, "accept_len": "5"}))
            expect_error(path, hw, 3, "verify_tokens", "dflash with block 16 and no budget is "
                         "a chain of 15 draft tokens (block 16 less its anchor), verified as 16 "
                         f"tokens per step, not {wrong} (fix: set verify_tokens to 16 (or "
                         "blank), give the budget of a shorter chain, or a method that verifies "
                         "a tree)", methods=methods)
    for right in ("16", ""):
        rows = load_measurements(write(tmp_path, edited(r3={
            "method": "dflash", "block": "16", "budget": "", "verify_tokens": right,
            "accept_len": "5"})), hw).rows
        assert (rows[1].method, rows[1].block, rows[1].budget, rows[1].verify_tokens) == (
            "dflash", 16, 15, 16)

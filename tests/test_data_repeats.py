"""The fast path of load_measurements: repeated runs of one configuration.

A row whose configuration columns match an earlier valid row is checked only in tok_s and
source. These tests hold it to the loader it replaced: :func:`reference_load` below is that
loader verbatim (every row through parse_row), and every file here, hand-made or generated,
must give the same rows or the same error (message, file, row, column) from both.
"""

from __future__ import annotations

import csv
import dataclasses
import gc
import io
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddtree_bayes.core.data import (
    COLUMNS,
    CONFIGURATION,
    Measurement,
    fields_problem,
    load_hardware,
    load_measurements,
    parse_row,
)
from ddtree_bayes.core.errors import DataError

ROOT = Path(__file__).resolve().parents[1]
HW = load_hardware(ROOT / "data" / "hardware.csv")
HEADER, *BUNDLED = list(csv.reader(io.StringIO((ROOT / "data" / "measurements.csv").read_text())))
TOK = COLUMNS.index("tok_s")


def reference_load(path: str, text: str, allow_duplicates: bool = False) -> tuple:
    """The loader before the fast path (records numbered by their first line, every row
    through parse_row), returning load_measurements' rows, or raising. The one-model check
    that follows is not repeated here: every generated file holds one model."""
    reader = csv.reader(io.StringIO(text, newline=""))
    records, start = [], 1
    for fields in reader:
        records.append((start, fields))
        start = reader.line_num + 1
    header, body = [h.strip() for h in records[0][1]], records[1:]
    rows: list[Measurement] = []
    seen: dict[tuple[str, ...], int] = {}
    for i, values in body:
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(header):
            problem, fix = fields_problem(len(values), len(header), values)   # (its wording)
            raise DataError(problem, file=path, row=i, fix=fix)
        raw = {h: v.strip() for h, v in zip(header, values, strict=True)}
        key = tuple(raw[c] for c in COLUMNS)
        if key in seen and not allow_duplicates:
            raise DataError(f"duplicate of row {seen[key]}", file=path, row=i,
                            fix="delete the repeat, or note what differs in the notes column")
        seen.setdefault(key, i)
        rows.append(parse_row(path, i, raw, HW))
    if not rows:
        raise DataError("no measurement rows", file=path, fix="add at least one row under the header")
    return tuple(rows)


def outcome(fn, *args, **kwargs):
    """("rows", rows) or ("error", message, row, column) of one loader call."""
    try:
        result = fn(*args, **kwargs)
    except DataError as err:
        return ("error", str(err), err.row, err.column)
    return ("rows", result.rows if hasattr(result, "rows") else result)


def csv_text(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(rows)
    return buf.getvalue()


def runs_of(base: list[str], *tok_s: str, **cells: str) -> list[list[str]]:
    """Rows repeating ``base`` with each tok_s in turn (other cells replaced by ``cells``)."""
    out = []
    for t in tok_s:
        row = list(base)
        row[TOK] = t
        for column, value in cells.items():
            row[COLUMNS.index(column)] = value
        out.append(row)
    return out


def same_as_reference(text: str, **kwargs) -> tuple:
    new = outcome(load_measurements, "m.csv", HW, text=text, **kwargs)
    old = outcome(reference_load, "m.csv", text, **kwargs)
    assert new == old
    return new


# ------------------------------------------------------------------ repeated runs are data
def test_repeated_runs_of_one_configuration_with_different_tok_s_are_kept():
    text = csv_text(BUNDLED + runs_of(BUNDLED[1], "290", "310.5", "299.25"))
    kind, rows = same_as_reference(text)
    assert kind == "rows" and len(rows) == 12
    repeats = rows[9:]
    assert [r.row for r in repeats] == [11, 12, 13]
    assert [r.tok_s for r in repeats] == [290.0, 310.5, 299.25]
    # every validated field is the configuration's: ddtree 8/8 on b300x8, accept 4.4
    assert {(r.method, r.block, r.budget, r.verify_tokens, r.accept_len, r.system)
            for r in repeats} == {("ddtree", 8, 8, 9, 4.4, "b300x8")}
    assert repeats[0].step_ms == pytest.approx(4.4 / 290 * 1000)


def test_a_repeat_keeps_its_own_source_and_notes():
    text = csv_text([BUNDLED[0]] + runs_of(BUNDLED[0], "140", source="rerun log 7",
                                           notes="driver 580"))
    kind, rows = same_as_reference(text)
    assert (rows[1].row, rows[1].source, rows[1].notes, rows[1].tok_s) == (
        3, "rerun log 7", "driver 580", 140.0)
    assert (rows[0].source, rows[0].tok_s) == (BUNDLED[0][COLUMNS.index("source")], 133.0)


def test_an_identical_repeat_is_still_refused_after_many_runs():
    runs = runs_of(BUNDLED[1], *(f"{310.5 + k}" for k in range(50)))
    text = csv_text(BUNDLED + runs + [runs[17]])
    assert same_as_reference(text)[:4] == (
        "error", "m.csv, row 61: duplicate of row 28 (fix: delete the repeat, or note what "
        "differs in the notes column)", 61, None)
    kind, rows = same_as_reference(text, allow_duplicates=True)
    assert kind == "rows" and len(rows) == 60


def test_a_repeat_that_differs_only_by_surrounding_spaces_is_a_duplicate():
    spaced = [f" {v} " for v in BUNDLED[1]]
    assert same_as_reference(csv_text(BUNDLED + [spaced]))[2:] == (11, None)


@pytest.mark.parametrize(("tok_s", "message"), [
    ("x", "not a number: 'x'"), ("0", "tok_s must be > 0, got 0"),
    ("-3", "tok_s must be > 0, got -3"), ("nan", "not a finite number: 'nan'"),
    ("inf", "not a finite number: 'inf'"), ("", "empty value"),
    ("7_00", "not a plain number: '7_00'"),   # (the fast path read it as 700)
])
def test_a_bad_tok_s_on_a_repeat_gives_the_error_of_a_first_row(tok_s, message):
    text = csv_text(BUNDLED + runs_of(BUNDLED[8], "60", tok_s))
    kind, text_, row, column = same_as_reference(text)
    assert (kind, row, column) == ("error", 12, "tok_s")
    assert text_.startswith(f"m.csv, row 12, column 'tok_s': {message}")


def test_an_empty_source_on_a_repeat_is_reported():
    text = csv_text(BUNDLED + runs_of(BUNDLED[8], "60", source=""))
    assert same_as_reference(text)[2:] == (11, "source")


def test_an_empty_tok_s_and_source_on_a_repeat_reports_tok_s_first():
    text = csv_text(BUNDLED + runs_of(BUNDLED[8], "", source=""))
    assert same_as_reference(text)[2:] == (11, "tok_s")  # REQUIRED order: tok_s before source


def test_an_invalid_configuration_is_reported_at_its_first_row_every_time():
    bad = runs_of(BUNDLED[7], "120", "121", accept_len="9")  # accept 9 > verify 4
    assert same_as_reference(csv_text(BUNDLED + bad))[2:] == (11, "accept_len")


def test_another_run_is_a_frozen_equal_measurement():
    (first,) = load_measurements("m.csv", HW, text=csv_text([BUNDLED[1]])).rows
    again = first.another_run(7, 301.0, "s", "n")
    assert again == dataclasses.replace(first, row=7, tok_s=301.0, source="s", notes="n")
    assert list(again.__dict__) == [f.name for f in dataclasses.fields(Measurement)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.tok_s = 1.0  # type: ignore[misc]
    assert first.tok_s == 303.0


@pytest.mark.parametrize("enabled", [True, False])
def test_the_garbage_collector_state_is_restored(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        load_measurements("m.csv", HW, text=csv_text(BUNDLED))
        assert gc.isenabled() is enabled
        with pytest.raises(DataError):
            load_measurements("m.csv", HW, text=csv_text(runs_of(BUNDLED[0], "x")))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_configuration_columns_are_every_column_but_result_and_free_text():
    assert set(COLUMNS) - set(CONFIGURATION) == {"tok_s", "source", "notes"}


# ------------------------------------------------------------------ generated files
CELL_EDITS = {
    "model": ["", " kimi-k2.6 "],
    "tok_s": ["250", "0", "-1", "x", "", "nan", "1e400", " 99 ", "1_000", "inf"],
    "source": ["", "lab run", " "],
    "notes": ["", "repeat", "a, b", "line one\nline two"],
    "accept_len": ["", "0.5", "2", "50", "1.0"],
    "context_tokens": ["", "-5", "1024", "1k"],
    "hardware": ["b300", "tpu", "h100"],
    "engine": ["sglang", "SGLang", "vllm"],
    "block": ["", "3", "2.5", "0"],
    "gpus": ["8", "0", "x"],
}


@st.composite
def measurement_files(draw) -> str:
    """Up to 30 rows drawn from the bundled rows, most repeated with a new tok/s, some with
    one cell edited (valid or not), some exact copies, some blank or short."""
    rows: list[list[str]] = []
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["repeat", "repeat", "repeat", "edit", "copy", "blank",
                                     "short"]))
        if kind == "copy" and rows:
            rows.append(list(draw(st.sampled_from(rows))))
            continue
        if kind == "blank":
            rows.append(draw(st.sampled_from([[""], [" "] * len(HEADER), [""] * len(HEADER)])))
            continue
        row = list(draw(st.sampled_from(BUNDLED)))
        row[TOK] = str(draw(st.integers(50, 400)))
        if kind == "edit":
            column = draw(st.sampled_from(sorted(CELL_EDITS)))
            row[COLUMNS.index(column)] = draw(st.sampled_from(CELL_EDITS[column]))
        elif kind == "short":
            row = row[:-1]
        rows.append(row)
    return csv_text(rows)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(text=measurement_files(), allow_duplicates=st.booleans())
def test_generated_files_load_exactly_as_the_reference_loader(text, allow_duplicates):
    result = same_as_reference(text, allow_duplicates=allow_duplicates)
    if result[0] == "rows":
        assert all(r.tok_s > 0 and math.isfinite(r.tok_s) for r in result[1])

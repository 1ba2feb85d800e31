"""The tables the CLI prints for people (cli/output.py): column widths, which columns are
left-aligned, the dashes under the header, no trailing blanks; by hand."""

from __future__ import annotations

from ddtree_bayes.cli.output import aligned_table, render_table

HEADERS = ["engine", "accept", "tok/s", "note"]
ROWS = [["sglang", "12", "598", "ok"], ["native", "9.5", "1044", "-"]]


def test_render_table_left_aligns_the_first_two_columns():
    assert render_table(HEADERS, ROWS).splitlines() == [
        "engine  accept  tok/s  note",
        "------  ------  -----  ----",
        "sglang  12        598    ok",
        "native  9.5      1044     -"]
    assert render_table(["a", "bb", "ccc"], []) == "a  bb  ccc\n-  --  ---"


def test_aligned_table_left_columns_and_a_text_last_column():
    assert aligned_table(HEADERS, ROWS, left=1, text_last=True).splitlines() == [
        "engine  accept  tok/s  note",
        "------  ------  -----  ----",
        "sglang      12    598  ok",
        "native     9.5   1044  -"]
    assert aligned_table(HEADERS, ROWS, left=3).splitlines()[2:] == [
        "sglang  12      598      ok",
        "native  9.5     1044      -"]
    # the defaults: the first two columns left-aligned, the rest right-aligned (render_table's)
    assert aligned_table(HEADERS, ROWS).splitlines() == [
        "engine  accept  tok/s  note",
        "------  ------  -----  ----",
        "sglang  12        598    ok",
        "native  9.5      1044     -"]

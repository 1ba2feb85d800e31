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


def test_counts_of_one_are_singular_in_the_cli_lines(monkeypatch, tmp_path, capsys):
    """"1 rows"-style counts where the CLI formats a count of rows, measurements or
    configurations by hand: fit's check of repeated runs ("2 rows in 1 configurations"),
    validate's --keep-ar header ("1 speculative rows
    scored") and --from-smallest header ("beside the 1 rows of"), simulate --out ("wrote 1
    simulated measurements"). Counts other than 1 read as before."""
    import argparse
    import json
    from pathlib import Path

    from ddtree_bayes.cli import analysis, history
    from ddtree_bayes.cli.fit import _print_ppc
    from ddtree_bayes.workflows import living, simulate

    row = {"system": "b300x8", "engine": "sglang", "method": "ar", "verify_tokens": 1,
           "context_tokens": 0.0, "concurrency": 1, "accept_len": 1.0, "measured": 100.0,
           "median": 100.0, "lo50": 90.0, "hi50": 110.0, "lo90": 80.0, "hi90": 120.0,
           "percentile": 0.5}
    _print_ppc([{**row, "row": 2, "configuration": 2}, {**row, "row": 3, "configuration": 2}])
    assert "posterior predictive check (tok/s), 2 rows in 1 configuration (repeated runs): " \
        "per configuration" in capsys.readouterr().out
    _print_ppc([{**row, "row": r, "configuration": c} for r, c in ((2, 2), (3, 2), (4, 4))])
    assert ", 3 rows in 2 configurations (repeated runs): " in capsys.readouterr().out

    fit = {"fit_id": "B", "readable": True, "latest": True, "made_by": "refit",
           "converged": True, "total_s": 1.0, "created_utc": "2026-12-01T00:00:00+00:00",
           "data_sha256": "ab" * 32, "rows": 10}
    monkeypatch.chdir(tmp_path)
    # (history's "+added/-removed rows" names a change of two counts: plural throughout)
    for added, removed, says in ((1, 0, "+1/-0 rows,"), (2, 0, "+2/-0 rows,"),
                                 (0, 0, "+0/-0 rows,")):
        up = {"previous_fit": "A", "added_rows": list(range(added)), "removed_rows": removed}
        monkeypatch.setattr(living, "list_fits", lambda models, up=up: [{**fit, "update": up}])
        assert history.cmd_history(argparse.Namespace(format="table")) == 0
        assert f"latest, update of A: {says} refit" in capsys.readouterr().out

    docs = Path(__file__).resolve().parents[1] / "docs"
    keep = json.loads((docs / "transfer_baseline.json").read_text())
    n = keep["summary"]["ar_kept"]["n"]
    assert f"; {n} speculative rows scored (" in analysis.render_keep_ar(keep) and n != 1
    keep["summary"]["ar_kept"]["n"] = 1
    assert "; 1 speculative row scored (" in analysis.render_keep_ar(keep)
    smallest = json.loads((docs / "headline_shape_corpus.json").read_text())
    n = smallest["corpus"]["rows"]
    assert f", beside the {n} rows of " in analysis.render_from_smallest(smallest) and n != 1
    smallest["corpus"]["rows"] = 1
    assert ", beside the 1 row of " in analysis.render_from_smallest(smallest)

    for lines, says in ((1, "wrote 1 simulated measurement to sim.csv"),
                        (2, "wrote 2 simulated measurements to sim.csv")):
        monkeypatch.setattr(simulate, "simulate_from_files",
                            lambda truth, design, seed, lines=lines: "h\n" + "r\n" * lines)
        assert analysis.cmd_simulate(argparse.Namespace(
            truth="t.toml", design="d.csv", seed=1, out="sim.csv")) == 0
        assert capsys.readouterr().out == says + "\n"

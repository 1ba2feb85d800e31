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


def test_row_counts_of_one_are_singular_in_the_workflow_lines(monkeypatch, tmp_path, capsys):
    """An audit: "posterior of the 1 measured rows"; the same "1 rows" where the workflows
    count rows by hand: a sweep left out ("1 rows lack them"), the progress lines of validate
    --extrapolate --from-smallest ("1 rows predicted"), --keep-ar ("1 speculative rows
    scored"), --extrapolate --concurrency ("1 rows scored"), and validate's note on the
    original estimate ("the 0 of 1 held-out rows"). Counts other than 1 read as before."""
    import shutil
    from pathlib import Path

    import pytest

    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.workflows import ar_kept as T
    from ddtree_bayes.workflows import concurrency_check as CC
    from ddtree_bayes.workflows import extrapolation as X
    from ddtree_bayes.workflows import from_smallest as F
    from ddtree_bayes.workflows import validation as V
    from test_cli_support import run_cli

    repo = Path(__file__).resolve().parents[1]
    hw_text = bundled("hardware.csv").read_text()
    # a sweep of an AR row and MTP at depths 1 and 2 (two configurations: fewer than the 3
    # --extrapolate holds out from), and 1 or 2 MTP rows without an acceptance
    rows = (repo / "data" / "public" / "llamacpp_mtp_qwen38_27b_rtx5090.csv").read_text(
        ).splitlines(keepends=True)
    no_accept = rows[3].replace(",2.580,", ",,", 1)
    assert no_accept != rows[3]
    for lacking, says in ((1, "; 1 row lacks them"), (2, "; 2 rows lack them")):
        sweep = tmp_path / f"lack{lacking}.csv"
        sweep.write_text("".join(rows[:3]) + no_accept * lacking)
        _, notes = X.load_sweeps([sweep], hw_text)
        assert len(notes) == 1 and notes[0].endswith(says + ")"), notes
    # from-smallest: a sweep of AR rows only, one row lacking what it needs
    ar_only = load_measurements("s.csv", load_hardware("hardware.csv", text=hw_text),
                                text="".join(rows[:2]))
    for lacking, says in ((1, "1 row lacks them)"), (2, "2 rows lack them)")):
        assert F.splits_of("s", "s.csv", "", ar_only, lacking)[1][0].endswith(says)
    # the progress lines, up to the first fit (stopped there)

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(V, "dispatch", stop)
    work = tmp_path / "w"
    work.mkdir()
    smallest = tmp_path / "smallest.csv"
    smallest.write_text("".join(rows[:4]))   # AR, depth 1 and depth 2: depth 2 predicted
    with pytest.raises(Stop):
        F.from_smallest([smallest], bundled("priors.toml"), workdir=work, progress=True)
    assert capsys.readouterr().err.splitlines()[0].endswith(" job(s); 1 row predicted")
    b300 = tmp_path / "b300.csv"   # the bundled B300 AR and DDTree rows: one pair, 1 scored
    lines = bundled("measurements.csv").read_text().splitlines(keepends=True)
    b300.write_text(lines[0] + "".join(ln for ln in lines[1:] if ",b300," in ln))
    with pytest.raises(Stop):
        T.validate_keep_ar(b300, bundled("priors.toml"), workdir=work, progress=True)
    assert capsys.readouterr().err.splitlines()[0].endswith(" job(s); 1 speculative row scored")
    conc = repo / "data" / "public" / "conc" / "vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv"
    shutil.copy(conc, tmp_path / conc.name)
    monkeypatch.setattr(CC, "check_sweep", lambda *a, **k: {"n": 1, "seconds": 0.0})
    monkeypatch.setattr(CC, "converged_only", stop)
    with pytest.raises(Stop):
        CC.extrapolate_concurrency([tmp_path / conc.name], bundled("priors.toml"),
                                   workdir=work, progress=True)
    assert capsys.readouterr().err == f"[concurrency] 1/1 {conc.name}: 1 row scored (0 s)\n"
    # validate: the original estimate scored on none of 1 held-out row (no accept_len)
    score = {"coverage50": 1.0, "coverage90": 1.0, "mdape": 0.01, "mape": 0.01,
             "mean_width90_rel": 0.1}
    res = {"group": "row", "folds": [{"fold": "row 2", "converged": True, "failures": []}],
           "rows": [], "seconds": 0.0,
           "summary": {"n": 1, "posterior": score, "baseline": {**score, "n": 0}}}
    monkeypatch.setattr(V, "validate", lambda *a, **k: res)
    code, out, err = run_cli(work, "validate", "--quiet")
    assert code == 0, err
    assert "original +-30%: scored on the 0 of 1 held-out row with an accept_len" in out

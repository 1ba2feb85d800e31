"""`update` after the first `add` in a folder whose latest fit was made on the bundled data:
the new data/measurements.csv holds the added row only, and update described each of the
fit's 9 bundled rows as "no longer in the data (edited or deleted)" though nobody edited or
deleted them: the fit's data file is another file than the one update reads now."""

from __future__ import annotations

import argparse
import contextlib
import io

from ddtree_bayes.cli.update import _cheap_reasons, _print_scores
from ddtree_bayes.core.data import load_measurements
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine.testing import point_mass_draws
from ddtree_bayes.workflows.living import changed_rows

HEADER = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
          "context_tokens,tok_s,source,notes\n")


def printed(previous, path) -> tuple[str, list]:
    stored = previous.measurements
    now = load_measurements(path, previous.hardware)
    added, removed = changed_rows(stored, now)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _print_scores(previous, stored, now, path, [], removed, [], [], 1)
    return out.getvalue(), removed


def test_the_fits_rows_in_another_file_are_not_said_deleted(tmp_path):
    previous = point_mass_draws()   # (made on the bundled data: 9 rows)
    path = tmp_path / "measurements.csv"
    path.write_text(HEADER + "kimi-k2.6,b300,8,sglang,ar,,,1,1,,131,test row,\n")
    text, removed = printed(previous, path)
    assert len(removed) == 9
    assert "no longer in the data" not in text and "edited or deleted" not in text
    lines = text.splitlines()
    assert lines[1] == (f"fit point-mass was made on the bundled data ({bundled('measurements.csv')}"
                        f", 9 rows), not on {path}, which holds none of its rows: the refit "
                        f"fits {path} alone (copy the rows to keep into it):")
    assert lines[2] == "  row 2: b300 x8 sglang ar M=1 accept 1: 133 tok/s"
    assert len(lines) == 2 + 9
    args = argparse.Namespace(refit=False, force=False, chains=None, draws=None, tune=None,
                              backend=None, moe_form=None, step_form=None)
    assert _cheap_reasons(args, previous, [], removed, [], data_path=path) == [
        f"fit point-mass was made on another data file: 9 of its rows are not in {path}"]


def test_a_row_edited_in_the_fits_own_file_is_still_said_so(tmp_path):
    previous = point_mass_draws()
    text, removed = printed(previous, bundled("measurements.csv"))
    assert removed == [] and "no longer in the data" not in text

"""Tables print tok/s as whole numbers (``core.data.tok_text``), which turned a value below 10
into one digit: 1.4 printed "1" and 2.6 "3" (a 1.4 tok/s measurement scored "predicted 1,
90% 1-2" beside its measured 1.4), where JSON carries the exact value. Below 10 a cell keeps
two significant digits, as below 1 it already did (a trailing zero too: 1.0, 0.50); 10 and up
stay whole."""

from __future__ import annotations

from ddtree_bayes.core.data import tok_text


def test_values_below_ten_keep_their_digits():
    # (a trailing zero kept: 1.0 and 3.0 read "1" and "3", and 1.04 "1" where next read "1.0")
    assert [tok_text(x) for x in (1.4, 2.6, 9.4, 1.0, 3.0, 1.04)] == ["1.4", "2.6", "9.4", "1.0",
                                                                    "3.0", "1.0"]


def test_whole_number_output_is_unchanged():
    assert [tok_text(x) for x in (607.4, 12.0, 10.2, 99.5, 0.5, 2.1e-05)] == [
        "607", "12", "10", "100", "0.50", "2.1e-05"]


def test_update_scores_a_slow_row_with_its_digits():
    from ddtree_bayes.cli.update import _score_table

    row = {"row": 11, "configuration": "x", "measured": 1.4, "status": "ok", "median": 1.43,
           "lo50": 1.35, "hi50": 1.52, "lo90": 1.2, "hi90": 2.6, "percentile": 0.45}
    assert _score_table([row]).splitlines()[2].split()[3:7] == ["1.4", "1.4", "1.4-1.5",
                                                                "1.2-2.6"]

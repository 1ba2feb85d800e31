"""A `next --candidates` row's error names the file, row and column, not predict's flags
(workflows/decisions/next_measurement.candidate_error)."""

from __future__ import annotations

from test_cli_support import run_cli


def test_a_candidates_rows_error_names_its_file_row_and_column(tmp_path):
    """`next --candidates` wrapped the scenario's error, written for predict's flags: "row 3:
    kimi-k2.6's weights ... do not fit in 1 x h200 (fix: --gpus 5 or more of them ...)" told
    to pass a flag `next` has no use for in a candidate; the column is the file's."""
    from test_pairs import _multi_dir

    work = _multi_dir(tmp_path, noise_sd=0.03)   # (next needs noise; kimi's card is stored)
    cands = work / "cands.csv"
    cands.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens,model\n"
                     "h100,1,vllm,ar,,,,0,\nh200,1,vllm,ar,,,,0,kimi-k2.6\n"
                     "h999,1,vllm,ar,,,,0,\n")
    query = "--model llama-3.1-8b-instruct --hardware h100 --engine vllm --method ar"
    code, out, err = run_cli(work, "next", "--query", query, "--candidates", str(cands))
    assert code == 2 and out == ""
    assert err == (f"ddtree-bayes: error: {cands}, row 3, column 'gpus': kimi-k2.6's weights "
                   "(600.0 GB: 1000B parameters at 0.6 bytes) do not fit in 1 x h200 (141.0 "
                   "GB) (fix: gpus 5 or more of them (8, 16 or 32 for a tensor-parallel "
                   "engine, which shards kimi-k2.6's 64 heads evenly; llama.cpp splits layers "
                   "over any count), or a GPU with more memory)\n")
    # an unknown GPU: its column, though the message names no flag
    cands.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
                     "h100,1,vllm,ar,,,,0\nh999,1,vllm,ar,,,,0\n")
    code, out, err = run_cli(work, "next", "--query", query, "--candidates", str(cands))
    assert code == 2 and err.startswith(f"ddtree-bayes: error: {cands}, row 3, column "
                                        "'hardware': hardware 'h999' is neither measured")
    assert err.count("\n") == 1


def test_a_candidates_acceptance_that_is_no_number_is_told_its_range():
    """accept_len 'nan' (or 'inf') was told "give a non-negative number", and the 0 that
    invites is refused next ("below 1 (the bonus token)"): the fix names the range a step
    emits, at least 1, as the row's next error does."""
    import pytest

    from ddtree_bayes.core.errors import DataError
    from ddtree_bayes.workflows.decisions.next_measurement import _csv_number

    for raw in ("nan", "inf", "-2"):
        with pytest.raises(DataError) as info:
            _csv_number("c.csv", 2, {"accept_len": raw}, "accept_len")
        assert str(info.value) == (f"c.csv, row 2, column 'accept_len': {raw!r} is not a valid "
                                   "accept_len (fix: give the tokens a step emits, at least 1 "
                                   "(the bonus token), or leave it blank)"), str(info.value)
    with pytest.raises(DataError) as info:
        _csv_number("c.csv", 2, {"context_tokens": "-5"}, "context_tokens")
    assert str(info.value).endswith("(fix: give a non-negative number)")

"""Property tests of ``predict`` over generated flag combinations, run in-process on the
point-mass fit of tests/test_cli_support.py (noise and a little jitter, 64 draws: intervals
have width, every run takes milliseconds).

A valid question (--method, --block, --budget, --accept single, list and range, --context,
--concurrency lists, --engine, --hardware/--gpus, --target, --prob) exits 0 in every
format, and: the JSON validates against its schema; the table, JSON and CSV say the same
medians and intervals (to the digits the table prints); the table's scenario line is the
rows'; the total at C streams is C x per user; every interval holds its median and the 50%
interval sits inside the wide one; a question at the measured configuration says so.

An invalid one (unknown names, zero and negative numbers, an acceptance above what the
method can emit, malformed ranges, contradictory flags) exits 2 in every format with exactly
one stderr line, no traceback and nothing on stdout or on disk.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_cli_support import listing, make_point_mass_workdir, run_cli
from test_json_schemas import validate_output
from test_output_agreement import check_predict_csv, check_predict_table

FAST = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_point_mass_workdir(tmp_path_factory.mktemp("props_predict") / "w",
                                   noise_sd=0.05, n=64, jitter=0.02)


# ---------------------------------------------------------------- valid questions
#: (method, block, budget, the most tokens a step emits, whether --accept may be left out:
#: the priors file's acceptance prior (ddtree 16/32), the measured row (ddtree 8/8), ar)
CONFIGS = [("ddtree", 16, 32, 16, True), ("ddtree", 8, 8, 8, True), ("ddtree", 8, 16, 8, False),
           ("ddtree", None, None, 16, True), ("eagle3", 3, None, 4, False),
           ("eagle3", 4, 8, 5, False), ("ar", None, None, 1, True)]
SYSTEMS = [(None, None), ("b300", 8), ("b300", 4), ("h100", 8), ("rtx-pro-6000", 8)]


@st.composite
def accepts(draw, top: int, optional: bool) -> str | None:
    """--accept at most ``top``: none (when ``optional``), one value, a list, a range, a
    stepped range."""
    if top == 1:
        return draw(st.sampled_from([None, "1"]))
    kind = draw(st.sampled_from(["none"] * optional + ["one", "list", "range", "stepped"]))
    value = st.integers(100, top * 100).map(lambda v: v / 100)
    if kind == "none":
        return None
    if kind == "one":
        return f"{draw(value):g}"
    if kind == "list":
        return ",".join(f"{v:g}" for v in sorted(draw(st.lists(value, min_size=2, max_size=3,
                                                                unique=True))))
    lo = draw(st.integers(1, top - 1))
    hi = draw(st.integers(lo + 1, top))
    return f"{lo}:{hi}" if kind == "range" else f"{lo}:{hi}:{draw(st.sampled_from([0.5, 1]))}"


@st.composite
def questions(draw) -> list[str]:
    method, block, budget, top, optional = draw(st.sampled_from(CONFIGS))
    hardware, gpus = draw(st.sampled_from(SYSTEMS))
    argv = ["predict"]
    if method != "ddtree" or (block is not None and draw(st.booleans())):
        argv += ["--method", method]
    argv += ["--block", str(block)] if block is not None else []
    argv += ["--budget", str(budget)] if budget is not None else []
    # (any configuration flag leaves the default scenario: --method ddtree alone has no budget)
    argv += ["--hardware", hardware] if hardware else []
    argv += ["--gpus", str(gpus)] if gpus and draw(st.booleans()) else []
    accept = draw(accepts(top, optional))
    argv += ["--accept", accept] if accept is not None else []
    engines = draw(st.sampled_from([None, "sglang", "native", "sglang,native"]))
    if method == "ar" and engines and "native" in engines and draw(st.booleans()):
        engines = "sglang"
    argv += ["--engine", engines] if engines else []
    context = draw(st.sampled_from([None, "0", "4096", "32k"]))
    argv += ["--context", context] if context else []
    streams = draw(st.sampled_from([None, "1", "1,4", "2,8", "16,1,4"]))
    argv += ["--concurrency", streams] if streams else []
    target = draw(st.sampled_from([None, "0", "300", "650.5"]))
    argv += ["--target", target] if target else []
    prob = draw(st.sampled_from([None, "0.8", "0.95"]))
    argv += ["--prob", prob] if prob else []
    return argv


def three_forms(work, argv: list[str]):
    """``argv`` as table, JSON and CSV: each exits 0 with the same stderr."""
    code, table, err = run_cli(work, *argv)
    assert code == 0, (argv, err)
    assert "Traceback" not in err
    code, out, err_json = run_cli(work, *argv, "--format", "json")
    assert code == 0 and err_json == err, (argv, err_json)
    code, csv_out, err_csv = run_cli(work, *argv, "--format", "csv")
    assert code == 0 and err_csv == err, (argv, err_csv)
    return table, json.loads(out), csv_out


def question_of(argv: list[str]) -> dict:
    return {"concurrency": True} if "--concurrency" in argv else {}


def check_row_numbers(row: dict, probs: list[float]) -> None:
    """Each interval holds the median; the narrower interval sits inside the wider; the
    total at C streams is C x the per-user numbers."""
    labels = [f"{p * 100:g}" for p in probs]
    for label in labels:
        assert row[f"lo{label}"] <= row["median"] <= row[f"hi{label}"], label
    for narrow, wide in zip(labels, labels[1:], strict=False):
        assert row[f"lo{wide}"] <= row[f"lo{narrow}"] and row[f"hi{narrow}"] <= row[f"hi{wide}"]
    if "concurrency" in row:
        c, total = row["concurrency"], row["total"]
        for key in ("median", *(f"{e}{label}" for label in labels for e in ("lo", "hi"))):
            assert total[key] == pytest.approx(c * row[key], rel=1e-9), (key, c)


def scenario_line(row: dict) -> str:
    """The table's second line, written out from a JSON row."""
    ctx = row["context_tokens"]
    return (f"{row['hardware']} x{row['gpus']}, {row['method']}"
            + (f", block {row['block']}" if row["block"] is not None else "")
            + (f", budget {row['budget']}" if row["budget"] is not None else "")
            + f", verify {row['verify_tokens']} token{'s' * (row['verify_tokens'] != 1)}, "
            f"context {ctx}")


@FAST
@given(argv=questions())
def test_predict_valid_questions_agree_in_every_form(work, argv):
    table, payload, csv_out = three_forms(work, argv)
    validate_output("predict", payload)
    question = question_of(argv)
    check_predict_table(table, payload, question)
    check_predict_csv(csv_out, payload)
    rows, probs = payload["rows"], payload["interval_probs"]
    assert rows
    for row in rows:
        check_row_numbers(row, probs)
        # every row is the scenario the table's one line names
        assert scenario_line(row) == table.splitlines()[1]
    if "--prob" in argv:
        assert probs[-1] == float(argv[argv.index("--prob") + 1])
    if "--concurrency" in argv:
        asked = sorted(int(c) for c in argv[argv.index("--concurrency") + 1].split(","))
        per_engine: dict[str, list[int]] = {}
        for row in rows:
            per_engine.setdefault(row["engine"], []).append(row["concurrency"])
        for cs in per_engine.values():
            assert sorted(set(cs)) == asked
    if "--engine" in argv:
        asked_engines = set(argv[argv.index("--engine") + 1].split(","))
        assert {r["engine"] for r in rows} == asked_engines
    if "--accept" in argv:
        assert all(r["accept_kind"] in ("given", "uniform") for r in rows)


# ---------------------------------------------------------------- a measured configuration
@pytest.mark.parametrize("argv", [
    ["predict", "--block", "8", "--budget", "8", "--engine", "sglang"],
    ["predict", "--block", "8", "--budget", "8", "--engine", "sglang", "--format", "json"],
    ["predict", "--block", "8", "--budget", "8", "--engine", "sglang", "--format", "csv"],
])
def test_predict_at_the_measured_configuration_says_measured(work, argv):
    """The working directory's fit measured b300 x8 sglang ddtree block 8 budget 8 (accept
    4.4): a question there takes the measured acceptance and the measured overhead group,
    and says so in every form."""
    code, out, err = run_cli(work, *argv)
    assert code == 0, err
    if "json" in argv:
        (row,) = json.loads(out)["rows"]
    elif "csv" in argv:
        (row,) = list(csv.DictReader(io.StringIO(out)))
        row["accept"] = float(row["accept"])
    else:
        assert "4.4 measured (1 row)" in out
        assert "sglang: overhead of measured group b300x8/sglang/ddtree" in out
        return
    assert (row["accept"], row["accept_kind"]) == (4.4, "measured")
    assert row["overhead_from"] == "overhead of measured group b300x8/sglang/ddtree"


@pytest.fixture(scope="module")
def anchored(tmp_path_factory):
    """A structured-form fit (tests/test_engine_effects.py's, as test_output_agreement builds
    it): a question near a measured configuration is anchored to it."""
    from test_output_agreement import _fit

    return make_point_mass_workdir(tmp_path_factory.mktemp("props_anchor") / "w",
                                   draws=_fit("structured"))


@pytest.mark.parametrize(("flags", "anchor"), [
    (["--block", "8", "--budget", "8"], "anchored to the measured ddtree budget 8 (M = 9, 1 row)"),
    (["--method", "ar"], "anchored to the measured ar (M = 1, 1 row)"),
    (["--block", "8", "--budget", "8", "--concurrency", "1,4"],
     "anchored to the measured ddtree budget 8 (M = 9, 1 row)"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_predict_at_a_measured_configuration_names_its_anchor(anchored, flags, anchor):
    """At the measured b300 x8 sglang rows (AR 133 tok/s; DDTree 8/8 303 tok/s, accept 4.4)
    the structured fit's answer names the measurement it is anchored to, in table, JSON and
    CSV alike, and its 90% interval holds the measured tok/s; at C = 4, never measured, the
    note says the anchor's C = 1."""
    argv = ["predict", *flags, "--engine", "sglang"]
    table, payload, csv_out = three_forms(anchored, argv)
    measured = 133 if "ar" in flags else 303
    for row, line in zip(payload["rows"], csv.DictReader(io.StringIO(csv_out)), strict=True):
        assert line["overhead_from"] == row["overhead_from"]
        if row.get("concurrency", 1) == 1:
            assert row["overhead_from"].endswith(anchor), row["overhead_from"]
            assert row["lo90"] <= measured <= row["hi90"], row
        else:
            assert row["overhead_from"].endswith(anchor.replace("1 row", "C = 1, 1 row"))
        assert row["overhead_from"] in table


# ---------------------------------------------------------------- invalid questions
INVALID = [
    ["--hardware", "nosuch"], ["--hardware", "B300"], ["--model", "nosuch"],
    ["--method", "nosuch", "--accept", "2"], ["--engine", "nosuch", "--strict"],
    ["--gpus", "0"], ["--gpus", "-8"], ["--block", "0"], ["--budget", "0"], ["--budget", "-1"],
    ["--concurrency", "0"], ["--concurrency", "1,-4"], ["--concurrency", "1,,4"],
    ["--context", "-1"], ["--context", "k"], ["--target", "-5"], ["--prob", "0"],
    ["--prob", "1"], ["--accept", "0"], ["--accept", "-3"], ["--accept", "17"],
    ["--accept", "12:17"], ["--accept", "16:12"], ["--accept", "12:16:0"], ["--accept", "12:"],
    ["--accept", "12::16"], ["--accept", "nan"], ["--accept", ""],
    ["--method", "ar", "--accept", "2"], ["--method", "ar", "--block", "4"],
    ["--method", "ar", "--drafter", "x"], ["--method", "eagle3", "--block", "3", "--accept", "5"],
    ["--block", "16", "--budget", "32", "--verify-tokens", "20"],
    ["--block", "16", "--budget", "1", "--accept", "14"],
    ["--method", "dflash", "--block", "16", "--budget", "32", "--accept", "4"],
    ["--seed", "-1"], ["--fit", "../x"], ["--fit", "20990101T000000Z-nope"],
    # (one model form only: --model-average refused, after questions that warn)
    ["--model-average"], ["--engine", "nosuch", "--accept", "14", "--model-average"],
    ["--accept", "14", "--context", "1m", "--model-average"],
    ["--accept", "14", "--prob", "0.999", "--model-average"],
]


@st.composite
def bad_questions(draw) -> list[str]:
    """One invalid flag set, maybe beside valid flags that do not fix it."""
    bad = draw(st.sampled_from(INVALID))
    extra = draw(st.sampled_from([[], ["--engine", "sglang"], ["--concurrency", "1,4"],
                                  ["--context", "32k"], ["--target", "500"]]))
    if any(flag in bad for flag in extra[::2]):
        extra = []
    return ["predict", *bad, *extra]


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=bad_questions(), fmt=st.sampled_from(["table", "json", "csv"]))
def test_predict_invalid_questions_exit_2_with_one_line(work, argv, fmt):
    before = listing(work)
    code, out, err = run_cli(work, *argv, "--format", fmt)
    expected = 3 if "20990101T000000Z-nope" in argv else 2
    assert (code, out) == (expected, ""), (argv, code, out, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, (argv, err)
    assert lines[0].startswith("ddtree-bayes: error: ") and "(fix: " in lines[0], lines[0]
    assert listing(work) == before


def test_every_invalid_case_is_refused(work):
    """(each case of INVALID once, so a case hypothesis never draws still runs)"""
    for bad in INVALID:
        code, out, err = run_cli(work, "predict", *bad)
        assert code in (2, 3) and out == "" and len(err.splitlines()) == 1, (bad, err)

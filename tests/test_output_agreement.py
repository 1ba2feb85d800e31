"""Every output form of one answer says the same numbers: the table, ``--format json``
(validated against its schema), ``--format csv`` and the Python API, for one question and
seed; the warnings the table prints on stderr are the JSON's ``warnings`` (and the API's
``UserWarning``s); an error exits 2 with nothing on stdout, whatever the format.

The working directory holds the point-mass fit of tests/test_cli_support.py with noise and a
little jitter (64 draws), so intervals have width and every command answers in milliseconds.
A table cell is compared with the JSON's number formatted as the table rounds it, written
out here (whole tok/s at 1 and above, two significant digits below), not with the CLI's own
formatter.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_cli_support import make_point_mass_workdir, run_cli
from test_json_schemas import validate_output

REPO = Path(__file__).resolve().parents[1]
WARN = "ddtree-bayes: warning: "


# ---------------------------------------------------------------- the working directory
def _fit(kind: str):
    """The draws of a working directory: ``point`` (tests/test_cli_support.py's point mass,
    fraction step form), ``structured`` (tests/test_engine_effects.py's, anchored to its
    measured row, drafter passes priced) or ``multi`` (two models, engine/testing.py's)."""
    if kind == "point":
        return None
    if kind == "structured":
        from test_engine_effects import structured_engine_fit

        return structured_engine_fit(64, structure_sd=0.04, run_sd=0.03, config_sd=0.02,
                                     noise_sd=0.036)
    from ddtree_bayes.engine.testing import multi_model_draws

    return multi_model_draws(n=64, noise_sd=0.05)


@pytest.fixture(scope="module")
def works(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("agree")
    out = {"point": make_point_mass_workdir(root / "point", noise_sd=0.05, n=64, jitter=0.02)}
    for kind in ("structured", "multi"):
        out[kind] = make_point_mass_workdir(root / kind, draws=_fit(kind))
    return out


@pytest.fixture
def work(works) -> Path:
    return works["point"]


# ---------------------------------------------------------------- reading the forms
def table_of(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the table in ``text`` whose header starts with ``first_header``: each a
    dict of header -> cell text, the columns cut where the dashed rule's runs are (cells may
    hold spaces: ``572 (400-743)``). The table ends at the first line that is blank or does
    not fit the columns."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines[:-1])
              if line.startswith(first_header) and set(lines[i + 1]) <= {"-", " "})
    spans = [m.span() for m in re.finditer(r"-+", lines[at + 1])]
    heads = [lines[at][a:b].strip() for a, b in spans]
    rows = []
    for line in lines[at + 2:]:
        if not line.strip() or line[spans[-1][1]:].strip() or any(
                line[b:b + 2].strip() for _, b in spans[:-1] if b < len(line)):
            break
        rows.append({h: line[a:b].strip() for h, (a, b) in zip(heads, spans, strict=True)})
    return rows


def tok(x: float) -> str:
    """tok/s as the tables print it: a whole number from 10 up, two significant digits below
    (a trailing zero kept: 1.04 reads "1.0"; zero "0")."""
    return f"{x:.0f}" if abs(x) >= 9.95 else f"{x:#.2g}" if x else "0"


def span(lo: float, hi: float) -> str:
    return f"{tok(lo)}-{tok(hi)}"


def warned(err: str) -> list[str]:
    """The warning lines of stderr, without their prefix."""
    return [line.removeprefix(WARN) for line in err.splitlines() if line.startswith(WARN)]


def forms(work: Path, *argv: str) -> tuple[str, str, dict, str, list[str]]:
    """``argv`` as a table, as JSON and as CSV: (table stdout, table stderr, JSON, CSV
    stdout, the JSON run's warning lines); each exits 0 and the three stderrs agree."""
    code, table, err = run_cli(work, *argv)
    assert code == 0, err
    code, out, err_json = run_cli(work, *argv, "--format", "json")
    assert code == 0, err_json
    assert err_json == err   # (the same notes and warnings, whatever the format)
    payload = json.loads(out)
    csv_out = ""
    if argv[0] == "predict":
        code, csv_out, err_csv = run_cli(work, *argv, "--format", "csv")
        assert code == 0, err_csv
        assert err_csv == err
    return table, err, payload, csv_out, warned(err)


# ---------------------------------------------------------------- predict
#: predict's questions, as the API's keywords (the CLI's flags are made from them), each with
#: the working directory it is asked in.
PREDICT = [
    ("point", {"accept": "12:16", "target": 600}),                  # integers and U(12,16)
    ("point", {"accept": "12.25,12.75", "engines": "sglang"}),      # a list
    ("point", {"accept": "12:13:0.5", "engines": "sglang,native"}), # a stepped range
    ("point", {"accept": "14", "context": "32k"}),                  # a context: prior-driven
    ("point", {"accept": "14", "concurrency": [1, 4], "target": 500}),   # per user and total
    ("point", {"accept": "14", "explain": True, "prob": 0.8}),
    ("point", {"accept": "12:16", "concurrency": [1, 4], "explain": True, "engines": "sglang"}),
    ("point", {"method": "ar"}),                                    # native left out
    ("point", {"method": "ar", "engines": "sglang,native"}),
    ("point", {"method": "eagle3", "block": 3, "accept": "2.5"}),   # a chain, no drafter card
    ("point", {"hardware": "h100", "gpus": 8, "accept": "14"}),     # transferred
    ("point", {"hardware": "rtx-pro-6000", "accept": "14", "context": "64k"}),
    ("point", {"engines": "sglang"}),                               # the acceptance prior
    ("point", {"block": 8, "budget": 8, "engines": "sglang"}),      # the measured acceptance
    ("point", {"accept": "14", "engines": "vllm"}),                 # never measured
    ("point", {"accept": "14", "prob": 0.99, "engines": "sglang"}), # a tail of few draws
    ("structured", {"accept": "12:16"}),                # anchored; drafter passes priced
    ("structured", {"block": 8, "budget": 8, "engines": "sglang", "explain": True}),
    ("structured", {"method": "eagle3", "block": 3, "accept": "2.5", "explain": True,
                    "concurrency": [1, 8]}),
    ("structured", {"method": "ar", "concurrency": [1, 4]}),
    ("multi", {"model": "llama-3.1-8b-instruct", "hardware": "h100", "gpus": 1,
               "engines": "vllm", "method": "ar", "context": "128k", "concurrency": [1, 16],
               "kv_cache": "bf16"}),                    # capped at the memory read
    ("multi", {"model": "kimi-k2.6", "accept": "14", "engines": "sglang"}),
]


def argv_of(question: dict) -> list[str]:
    flags = {"engines": "--engine", "concurrency": "--concurrency", "explain": "--explain"}
    argv = ["predict"]
    for key, value in question.items():
        flag = flags.get(key, "--" + key.replace("_", "-"))
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return argv


def accept_label(row: dict) -> str:
    """The table's accept cell from a JSON row: the number (``%g``), else the label of what
    it is drawn from."""
    if row["accept"] is not None:
        return f"{row['accept']:g}" if row["accept_kind"] == "given" else row["accept_from"]
    return row["accept_distribution"]["label"]


def check_predict_table(table: str, payload: dict, question: dict) -> None:
    rows = payload["rows"]
    cells = table_of(table, "engine")
    assert len(cells) == len(rows)
    probs = payload["interval_probs"]
    labels = [f"{p * 100:g}" for p in probs]
    streams = "concurrency" in question
    for cell, row in zip(cells, rows, strict=True):
        assert cell["engine"] == row["engine"]
        if row["accept_kind"] == "measured":   # "4.4 measured (1 row)"
            assert cell["accept"].startswith(f"{row['accept']:g} measured")
        else:
            assert cell["accept"] == accept_label(row)
        assert cell["per user" if streams else "median"] == tok(row["median"])
        for label in labels:
            assert cell[f"{label}% interval"] == span(row[f"lo{label}"], row[f"hi{label}"])
        if streams:
            assert cell["C"] == str(row["concurrency"])
            t, wide = row["total"], labels[-1]
            assert cell[f"total, {wide}%"] == (f"{tok(t['median'])} "
                                               f"({span(t[f'lo{wide}'], t[f'hi{wide}'])})")
            if "p_faster_than_ar" in row:   # (two decimals, more beside a verdict's cut)
                shown = cell["P(> AR)"].lstrip("<>")
                digits = len(shown.partition(".")[2])
                assert abs(float(shown) - row["p_faster_than_ar"]) <= 0.5 * 10 ** -digits + 1e-9
        elif row["original"] is None:
            assert cell["original +-30%"] == "-"
        else:
            assert cell["original +-30%"] == (f"{row['original']:.0f} ({row['original_lo']:.0f}"
                                              f"-{row['original_hi']:.0f})")
        if payload["target"] is not None:
            head = (f"P(user>={payload['target']:g})" if streams
                    else f"P(>={payload['target']:g})")
            assert cell[head] == f"{row['p_ge_target']:.2f}"
    # the lines under it: the overhead's provenance, the crossover, what was left out
    for row in rows:
        assert row["overhead_from"] in table
    for x in payload.get("crossover", []):
        assert x["line"] in table.splitlines()
    if any("explain" in r for r in rows):
        explained = table_of(table.split("why the intervals are as wide")[1], "engine")
        terms = [t for r in rows for t in r["explain"]["terms"]]
        listed = [c for c in explained if c["term"] != "(memory-read cap)"]
        assert [c["term"] for c in listed] == [t["term"] for t in terms]
        for c, t in zip(listed, terms, strict=True):
            assert c["share"] == f"{t['share']:.0%}"
            assert c["from"] == t["from"]
            if t["lo"] is not None:
                assert c[f"{labels[-1]}%"] == f"{t['lo']:.3g}-{t['hi']:.3g}"


def check_predict_csv(text: str, payload: dict) -> None:
    got = list(csv.DictReader(io.StringIO(text)))
    assert len(got) == len(payload["rows"])
    for line, row in zip(got, payload["rows"], strict=True):
        flat = dict(flat_cells(row))
        assert set(line) >= set(flat)
        for key, value in flat.items():
            if isinstance(value, bool):
                assert line[key] == str(value)
            elif isinstance(value, int | float):
                assert float(line[key]) == value, key
            elif value is None:
                assert line[key] == "", key
            else:
                assert line[key] == value, key


def flat_cells(row: dict, prefix: str = ""):
    """A JSON row's cells as the CSV names them (written out here: a nested object with a
    label is the label, another a column per key, a list of terms a column per term)."""
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            if "label" in value:
                yield name, value["label"]
            else:
                yield from flat_cells(value, f"{name}_")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for t in value:
                yield from flat_cells({k: v for k, v in t.items() if k != "term"},
                                      f"{name}_{t['term'].replace(' ', '_')}_")
        else:
            yield name, value


def api_answer(work: Path, question: dict):
    import ddtree_bayes as db

    fit = db.load(workdir=work)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = db.predict(fit, seed=20261130, workdir=work, **question)
    return frame, [str(w.message) for w in caught if w.category is UserWarning]


def check_api(frame, payload: dict) -> None:
    records = frame.to_dict("records")
    assert len(records) == len(payload["rows"])
    for rec, row in zip(records, payload["rows"], strict=True):
        for key in ("engine", "hardware", "gpus", "method", "verify_tokens", "context_tokens",
                    "accept_kind", "overhead_from"):
            assert rec[key] == row[key], key
        # (the frame's accept is the table's label; its number is accept_value, the JSON's
        # accept)
        for key, value in row.items():
            if isinstance(value, float) and key != "accept":
                assert rec[key] == value, key
        for key, value in row.get("total", {}).items():
            assert rec[f"total_{key}"] == value, key
        if row["accept"] is None:
            assert rec["accept_value"] is None or math.isnan(rec["accept_value"])
        else:
            assert rec["accept_value"] == row["accept"]
        if "explain" in row:
            assert json.loads(json.dumps(rec["explain"])) == row["explain"]


@pytest.mark.parametrize(("kind", "question"), PREDICT,
                         ids=[f"{k}: {' '.join(argv_of(q)[1:])}" for k, q in PREDICT])
def test_predict_forms_agree(works, kind, question):
    work = works[kind]
    table, err, payload, csv_out, printed = forms(work, *argv_of(question))
    validate_output("predict", payload)
    check_predict_table(table, payload, question)
    check_predict_csv(csv_out, payload)
    # the table's warnings are the JSON's (and an engine left out is a warning there, a note
    # under the table)
    left_out = [w for w in payload["warnings"] if w not in printed]
    assert payload["warnings"][:len(printed)] == printed
    assert all(f"  {w}" in table.splitlines() for w in left_out)
    frame, said = api_answer(work, question)
    check_api(frame, payload)
    assert said == payload["warnings"]


FAST = settings(max_examples=6, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(values=st.lists(st.integers(100, 1600), min_size=1, max_size=3, unique=True),
       ranged=st.booleans(), streams=st.sampled_from([None, [1], [1, 4], [2, 8]]),
       engines=st.sampled_from([None, "sglang", "native,sglang"]),
       target=st.sampled_from([None, 0, 450.5, 700]), prob=st.sampled_from([0.9, 0.8, 0.95]))
def test_predict_forms_agree_on_generated_questions(works, values, ranged, streams, engines,
                                                   target, prob):
    """Acceptances of two decimals from 1 to 16 (a list, or a range from the smallest),
    concurrencies, engines, a target and an interval: the table, JSON, CSV and API agree."""
    accept = sorted(v / 100 for v in values)
    question = {"accept": (f"{accept[0]:g}:{max(accept[0] + 1, accept[-1]):g}" if ranged
                           else ",".join(f"{a:g}" for a in accept)), "prob": prob}
    question |= {k: v for k, v in (("concurrency", streams), ("engines", engines),
                                   ("target", target)) if v is not None}
    work = works["point"]
    table, _, payload, csv_out, printed = forms(work, *argv_of(question))
    validate_output("predict", payload)
    check_predict_table(table, payload, question)
    check_predict_csv(csv_out, payload)
    assert payload["warnings"] == printed
    frame, said = api_answer(work, question)
    check_api(frame, payload)
    assert said == payload["warnings"]


# ---------------------------------------------------------------- optimize
OPTIMIZE = [
    ["--budgets", "8,16,32,64"],
    ["--budgets", "16,32", "--concurrency", "4", "--prob", "0.8", "--engine", "native"],
    ["--budgets", "32", "--hardware", "h100", "--acceptance-file", "ACCEPTANCE"],
    ["--budgets", "8,16", "--context", "300k", "--engine", "sglnag"],
]


def one_decimal(x: float, lo: float, hi: float) -> str:
    return f"{x:.1f} ({lo:.1f}-{hi:.1f})"


@pytest.mark.parametrize("flags", OPTIMIZE, ids=" ".join)
def test_optimize_forms_agree(work, flags):
    flags = [str(REPO / "data" / "acceptance_reference.csv") if f == "ACCEPTANCE" else f
             for f in flags]
    table, err, out, _, printed = forms(work, "optimize", *flags)
    validate_output("optimize", out)
    assert out["warnings"] == printed
    lines = table.splitlines()
    assert lines[0] == (f"ddtree-bayes optimize: fit {out['fit_id']} ({out['draws']} draws), "
                        f"seed {out['seed']}")
    label = f"{round(out['interval_prob'] * 100, 4):g}"
    cells = table_of(table, "budget")
    assert len(cells) == len(out["rows"])
    for cell, r in zip(cells, out["rows"], strict=True):
        assert cell["budget"] == str(r["budget"]) and cell["M"] == str(r["verify_tokens"])
        assert cell["accept"] == one_decimal(r["accept"], r["accept_lo"], r["accept_hi"])
        assert cell["step ms"] == f"{r['step_ms']:.1f}"
        assert cell["tok/s median"] == tok(r["median"])
        assert cell[f"{label}% interval"] == span(r[f"lo{label}"], r[f"hi{label}"])
        assert cell["E[tok/s]"] == tok(r["tok_s_mean"])
        assert cell["P(best)"] == f"{r['p_best']:.2f}"
        assert cell["E[regret]"] == f"{r['regret']:.1f}"
        flagged = [f for f, on in (("step", r["extrapolated"]),
                                   ("accept", r["accept_extrapolated"])) if on]
        assert cell["extrapolated"] == ("+".join(flagged) or "-")
    assert f"recommended budget: {out['recommended']} (" in table
    c = out["curve"]
    assert f"acceptance curve: {c['source']}" in lines
    if c["ess"] is not None:
        for name in ("accept_ref", "gain", "decay"):
            m, lo, hi = c[name]
            assert f"{name} {m:.2f} ({lo:.2f}-{hi:.2f})" in table
        assert f"decay-weight ESS {c['ess']:.0f}" in table
    extrap = [str(r["budget"]) for r in out["rows"] if r["extrapolated"]]
    if extrap:
        assert f"for budgets {', '.join(extrap)}: " in table
    assert f"  {out['scenario']['engine']}: {out['overhead_from']}" in lines


# ---------------------------------------------------------------- next
def n_text(x: float) -> str:
    """next's tok/s: whole from 100, one decimal from 10, predict's cells below (two
    significant digits, a trailing zero kept: 0.40, 2.0)."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 9.95 else tok(x)


NEXT = [
    ["--k", "6", "--query", "--accept 14 --engine native"],
    ["--k", "6", "--query", "--accept 12:16 --concurrency 4", "--prob", "0.8"],
    ["--k", "6", "--query", "--accept 14 --context 300k --engine sglnag"],
    ["--k", "6", "--query", "--hardware h100 --gpus 8 --accept 14", "--min-ess", "10"],
    ["--k", "6", "--query", "--block 8 --budget 8"],       # the measured acceptance, 4.4
    ["--k", "6", "--query", "--method ar"],
]


@pytest.mark.parametrize("flags", NEXT, ids=" ".join)
def test_next_forms_agree(work, flags):
    from ddtree_bayes.cli.decisions import reduction_cell

    table, err, out, _, printed = forms(work, "next", *flags)
    validate_output("next", out)
    assert out["warnings"] == printed
    q = out["query"]
    lines = table.splitlines()
    assert lines[0] == (f"ddtree-bayes next: fit {out['fit_id']} ({out['draws']} draws), "
                        f"seed {out['seed']}, {out['k']} simulated results per candidate")
    # one number (given, or measured: "4.4 measured (1 row)") is the JSON's accept; a range
    # or a prior its accept_distribution
    head = f"query: {q['describe']}, accept "
    assert lines[1].startswith(head)
    shown = lines[1][len(head):].split(", KV cache")[0]
    if q["accept_fixed"]:
        assert q["accept"] is not None and q["accept_distribution"] is None
        assert shown.split(" ")[0] == f"{q['accept']:g}"
        assert (shown != f"{q['accept']:g}") == (q["accept_kind"] == "measured")
    else:
        assert q["accept"] is None and shown == q["accept_distribution"]
    label = f"{round(out['interval_prob'] * 100, 4):g}"
    per = " per user" if q.get("concurrency", 1) != 1 else ""
    assert lines[2] == (f"now: median {n_text(q['median'])} tok/s{per}, {label}% interval "
                        f"{n_text(q['lo'])}-{n_text(q['hi'])} (width {n_text(q['width'])})")
    assert f"  {q['engine']}: {q['overhead_from']}" in lines
    cells = table_of(table, "rank")
    assert len(cells) == len(out["rows"])
    for i, (cell, r) in enumerate(zip(cells, out["rows"], strict=True), start=1):
        assert cell["rank"] == str(i) and cell["candidate"] == r["candidate"]
        assert cell["drafter"] == ("-" if "pass_drafter" not in r else
                                   r["pass_drafter"] or "generic")
        assert cell["why"] == r["why"]
        assert cell[f"E[{label}% width]"] == (f"{n_text(r['expected_width'])} +- "
                                              f"{n_text(r['width_se'])}")
        assert cell["reduction"] == reduction_cell(r["reduction"], r["reduction_rel"])
        assert cell["ESS"] == f"{r['ess_median']:.0f}"
        if r["unreliable"]:
            assert cell["note"].startswith("unreliable")
        else:
            assert ("within MC error" in cell["note"]) == r["within_mc_error"]
            assert ("same overhead group" in cell["note"]) == r["shares_query_overhead"]
    for left in out["left_out"]:
        assert left["candidate"] in table and left["reason"] in table


def test_next_json_says_a_measured_acceptance_as_its_number(work):
    """`next --query "--block 8 --budget 8"` asks at the mean accept_len measured of that
    configuration (the bundled B300 DDTree row: 4.4, one row). The table said "accept 4.4
    measured (1 row)" but the JSON said accept null and accept_fixed true, the 4.4 only in
    accept_distribution's text; predict's JSON of the same question says accept 4.4."""
    code, out, err = run_cli(work, "next", "--k", "4", "--query", "--block 8 --budget 8",
                             "--format", "json")
    assert code == 0, err
    q = json.loads(out)["query"]
    assert (q["accept"], q["accept_distribution"], q["accept_fixed"]) == (4.4, None, True)
    assert q["accept_kind"] == "measured"
    code, out, err = run_cli(work, "predict", "--block", "8", "--budget", "8", "--engine",
                             "sglang", "--format", "json")
    (row,) = json.loads(out)["rows"]
    assert (row["accept"], row["accept_kind"]) == (q["accept"], q["accept_kind"])
    assert row["median"] == q["median"] and (row["lo90"], row["hi90"]) == (q["lo"], q["hi"])


# ---------------------------------------------------------------- report
def test_report_json_carries_the_warnings_its_table_prints(work, monkeypatch, tmp_path):
    """`report` of a fit whose data file changed since warns of it on stderr, in both
    formats, but its JSON had no `warnings` (predict, optimize and next carry theirs), and a
    figure that could not be drawn was a stderr warning under the table only: with --format
    json nothing said it but figure_errors. The report itself (minutes on a real fit) is
    replaced by its summary: the CLI's part is what is checked."""
    from ddtree_bayes.workflows import report

    stale = (f"{work / 'data' / 'measurements.csv'} changed since fit x; run `ddtree-bayes "
             "update` (or `fit`) to use it")
    summary = {"fit_id": "x", "stale": [stale], "figure_errors": {"trace": "ValueError: no"},
               "verdict": {"converged": True, "failures": [],
                           "text": "converged: every gate passed"}}
    monkeypatch.setattr(report, "write_report", lambda *a, **k: (tmp_path, summary))
    code, table, err = run_cli(work, "report", "--quiet")
    assert code == 0 and table.startswith("converged: every gate passed\n")
    code, out, err_json = run_cli(work, "report", "--quiet", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    validate_output("report", payload)
    printed = [stale, "figure trace failed: ValueError: no"]
    assert warned(err) == warned(err_json) == payload["warnings"] == printed


# ---------------------------------------------------------------- two model forms
@pytest.fixture(scope="module")
def two_forms(tmp_path_factory) -> Path:
    """The point-mass directory with two more fits, power and linear MoE forms (400 draws,
    jittered so PSIS-LOO has spread), as tests/test_json_schemas.py compares them."""
    from test_cli_support import write_point_mass_fit

    work = make_point_mass_workdir(tmp_path_factory.mktemp("forms") / "w", noise_sd=0.05,
                                   n=64, jitter=0.02)
    for form, fit_id in (("power", "20260101T000001Z-power"), ("linear", "20260101T000002Z-lin")):
        write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                             work / "models" / "priors.toml", work / "data" / "hardware.csv",
                             fit_id=fit_id, n=400, moe_form=form, noise_sd=0.05, jitter=0.02)
    return work


def test_compare_forms_agree(two_forms):
    table, _, out, _, printed = forms(two_forms, "compare", "--fits",
                                      "20260101T000001Z-power,20260101T000002Z-lin")
    validate_output("compare", out)
    assert printed == []
    limits = {f"{round(r['pareto_k_threshold'], 2):g}" for r in out["rows"]}
    k_head = f"Pareto k > {limits.pop() if len(limits) == 1 else 'limit'}"
    cells = table_of(table, "model")
    assert len(cells) == len(out["rows"]) == 2
    for cell, r in zip(cells, out["rows"], strict=True):
        assert cell["model"] == r["model"] and cell["rank"] == str(r["rank"])
        for key in ("elpd_loo", "se", "elpd_diff", "dse", "p_loo"):
            assert cell[key] == f"{r[key]:.2f}", key
        assert cell[f"weight ({out['method']})"] == f"{r['weight']:.2f}"
        assert cell[k_head].split()[0] == str(r["pareto_k_above_threshold"])
        assert out["weights"][r["model"].split(" ")[0]] == r["weight"]
    for note in out["notes"]:
        assert f"note: {note}" in table.splitlines()


def test_predict_model_average_forms_agree(two_forms):
    """--model-average: the table's header names the fits and weights of the JSON's
    model_average (and the API's attrs), and the numbers agree in every form."""
    question = {"accept": "12:14", "model_average": True}
    table, err, payload, csv_out, printed = forms(two_forms, "predict", "--accept", "12:14",
                                                  "--model-average")
    validate_output("predict", payload)
    check_predict_table(table, payload, question)
    check_predict_csv(csv_out, payload)
    average = payload["model_average"]
    assert table.splitlines()[0].startswith(
        "ddtree-bayes predict: model average of fits " + ", ".join(
            f"{a['fit_id']} ({a['form']}) {a['weight']:.2f}" for a in average))
    assert payload["warnings"] == printed
    frame, said = api_answer(two_forms, question)
    check_api(frame, payload)
    assert frame.attrs["model_average"] == average
    # (the API names its keyword where the CLI names its flag; it weighs the fits before it
    # resolves the question, the CLI after: the same lines, in another order)
    assert sorted(said) == sorted(w.replace("--model-average", "model_average=True", 1)
                                  for w in payload["warnings"])


# ---------------------------------------------------------------- errors
ERRORS = [
    ["predict", "--accept", "3", "--method", "ar"],
    ["predict", "--accept", "99"],
    ["predict", "--prob", "1.5"],
    ["predict", "--hardware", "nosuch"],
    ["predict", "--accept", "14", "--engine", "vllm", "--block", "4", "--budget", "64"],
    ["predict", "--model-average"],                  # one form only
    ["optimize", "--budgets", "0"],
    ["optimize", "--hardware", "nosuch"],
    ["next", "--min-ess", "1e6"],
    ["next", "--query", "--accept 99"],
    ["next", "--candidates", "missing.csv"],
    ["compare", "--fits", "a"],
]


@pytest.mark.parametrize("argv", ERRORS, ids=" ".join)
def test_an_error_is_one_line_exit_2_and_nothing_on_stdout_in_every_format(work, argv):
    formats = ("table", "json", "csv") if argv[0] == "predict" else ("table", "json")
    said = set()
    for fmt in formats:
        code, out, err = run_cli(work, *argv, "--format", fmt)
        errors = [line for line in err.splitlines() if line.startswith("ddtree-bayes: error: ")]
        assert (code, out, len(errors)) == (2, "", 1), (fmt, err)
        assert "(fix: " in errors[0]
        said.add(err)
    assert len(said) == 1   # (the same lines whatever the format)


def test_report_summary_parts_are_the_commands_answers(work):
    """The report's summary.json parts that answer a command's question say that command's
    JSON numbers for the same fit and seed: the several-streams section is predict
    --concurrency 1,...,128 (5/25/50/75/95% quantiles and where speculation pays), the budget
    section optimize, the next section next, the hardware table predict on each GPU."""
    import numpy as np

    from ddtree_bayes.engine import store
    from ddtree_bayes.workflows.report.sections import (
        CONCURRENCY_GRID,
        NEXT_QUERY,
        concurrency_section,
        decisions_section,
    )

    draws = store.load(None, work)
    seed = "20261130"
    conc = concurrency_section(draws, int(seed))
    grid = ",".join(map(str, CONCURRENCY_GRID))
    for engine, entry in conc["engines"].items():
        flags = (["--method", "ar", "--engine", "sglang"] if engine == "ar" else
                 ["--engine", engine, "--accept", f"{conc['accept']:g}"])
        out = json.loads(run_cli(work, "predict", *flags, "--concurrency", grid, "--seed", seed,
                                 "--format", "json")[1])
        for q, t, row in zip(entry["per_user"], entry["total"], out["rows"], strict=True):
            assert q == pytest.approx([row[k] for k in ("lo90", "lo50", "median", "hi50",
                                                          "hi90")], rel=1e-12)
            assert t == pytest.approx([row["total"][k] for k in ("lo90", "lo50", "median",
                                                                   "hi50", "hi90")], rel=1e-12)
        if engine != "ar":
            (x,) = out["crossover"]
            assert entry["p_faster_than_ar"] == x["p_faster_than_ar"]
            for key in ("pays", "pays_at", "stops_paying_at", "starts_paying_at",
                        "uncertain_at"):
                assert entry[key] == x[key], key
    dec = decisions_section(draws, int(seed))
    for engine, opt in dec["optimize"].items():
        out = json.loads(run_cli(work, "optimize", "--engine", engine, "--seed", seed,
                                 "--format", "json")[1])
        assert opt["rows"] == out["rows"] and opt["recommended"] == out["recommended"]
        assert opt["warnings"] == out["warnings"]
    out = json.loads(run_cli(work, "next", "--query", NEXT_QUERY, "--seed", seed,
                             "--format", "json")[1])
    assert dec["next"]["rows"] == out["rows"]
    assert [dec["next"]["query"][k] for k in ("median", "lo", "hi", "width")] == [
        out["query"][k] for k in ("median", "lo", "hi", "width")]
    hardware = [r for r in dec["hardware"] if "error" not in r]
    for r in hardware[:: max(1, len(hardware) // 6)]:   # (six GPUs, measured and transferred)
        (row,) = json.loads(run_cli(
            work, "predict", "--hardware", r["hardware"], "--gpus", str(r["gpus"]), "--engine",
            "sglang", "--accept", "14", "--seed", seed, "--format", "json")[1])["rows"]
        assert r["ddtree"] == [row["lo90"], row["median"], row["hi90"]], r["hardware"]
    assert np.isfinite([r["ddtree"] for r in hardware]).all()


def test_the_report_says_under_its_answer_line_what_predict_warns_of_it(work, monkeypatch,
                                                                         tmp_path):
    """The answer line asks the default question (predict without configuration flags) and
    said its number without the warnings predict gives it: B300 DDTree at M = 33 from B300
    rows of M <= 9 ("partly prior-driven"), or on a fit whose eagle3 rows all name a drafter
    card (data/public/conc/vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv) "vllm 107 tok/s"
    of a generic drafter no row ran, priced at 1/2.92 of the measured one's pass. The
    report's summary holds predict's warnings (its JSON's, word for word), the page and
    summary.md print them under the answer line, and `report` on stderr and in its JSON."""
    import importlib

    from ddtree_bayes.engine import store
    from ddtree_bayes.workflows import report
    from ddtree_bayes.workflows.report.sections import answer_warnings, fan_section

    render = importlib.import_module("ddtree_bayes.workflows.report.render")

    draws = store.load(None, work)
    said = answer_warnings(draws, 20261130)
    code, out, _ = run_cli(work, "predict", "--format", "json")
    assert code == 0
    assert said == json.loads(out)["warnings"]
    assert any("more than any measured on b300x8 (at most 9)" in w for w in said), said
    summary = {"fit_id": "x", "verdict": {"converged": True, "failures": [],
                                          "text": "converged: every gate passed"},
               "fan": fan_section(draws, 20261130), "answer_warnings": said}
    lines = render.markdown(summary).splitlines()
    answer = lines.index(render.headline(summary))
    assert lines[answer + 2:answer + 2 * len(said) + 1:2] == [f"Warning: {w}" for w in said]
    page = render.page(summary, {})
    assert page.index("class='answer'") < page.index(f"Warning: {said[0]}"[:60])
    monkeypatch.setattr(report, "write_report", lambda *a, **k: (tmp_path, summary))
    code, _, err = run_cli(work, "report", "--quiet")
    assert code == 0 and warned(err) == said
    code, out, _ = run_cli(work, "report", "--quiet", "--format", "json")
    assert json.loads(out)["warnings"] == said

"""One question, one number, whichever command asks it (trust review round 14).

The same configuration, seed and fit asked through ``predict`` (table, ``--format json`` and
``csv``, ``--explain``, ``--concurrency``), ``next --query`` (its "now"), ``track add`` (its
"now"), ``report`` (its default question) and the Python API gives the same median and
intervals; each output is consistent in itself (lo90 <= lo50 <= median <= hi50 <= hi90, total =
per user x C on the same draws, probabilities in [0, 1]); and the ``original +-30%`` column is
the seed estimate table's own figure where the configuration and acceptance are a row of it.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from ddtree_bayes import api
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.testing import point_mass_draws
from test_cli_support import run_cli
from test_json_schemas import validate_output
from test_output_agreement import span, table_of, tok

# ---------------------------------------------------------------- the original +-30% column
#: data/seed_estimates.csv's deterministic rows (B300 x8, DDTree block 16 budget 32, M = 33):
#: (engine, accept) -> the tok/s the original estimate quoted.
SEED_ROWS = {("sglang", 12.0): 570.0, ("sglang", 16.0): 765.0,
             ("native", 12.0): 815.0, ("native", 16.0): 1090.0}


def test_original_column_quotes_the_seed_table_at_its_own_rows():
    """At accept 12 the original estimate said 570 tok/s (+-30%: 399-741); predict printed
    572 (400-743), accept / the mean step of the table's two rows (12/570 and 16/765 ms per
    token, 21.05 and 20.92 ms per step: the quoted figures are rounded to 5 tok/s), and 762
    for its 765, 816 for 815, 1088 for 1090. A row of the table is quoted as it is; an
    acceptance between them (14, U(12,16)'s mean 14) keeps accept / the mean step."""
    rows = P.predict(point_mass_draws(), accept="12,14,16", engines=["sglang", "native"])
    got = {(r["engine"], float(r["accept"])): r for r in rows}
    for key, figure in SEED_ROWS.items():
        assert got[key]["original"] == pytest.approx(figure, abs=1e-9), key
        assert got[key]["original_lo"] == pytest.approx(figure * 0.7, abs=1e-9)
        assert got[key]["original_hi"] == pytest.approx(figure * 1.3, abs=1e-9)
    step = (12 / 570 + 16 / 765) / 2 * 1000   # ms per step, the mean of the two rows'
    assert got[("sglang", 14.0)]["original"] == pytest.approx(14 / step * 1000)
    native_step = (12 / 815 + 16 / 1090) / 2 * 1000
    assert got[("native", 14.0)]["original"] == pytest.approx(14 / native_step * 1000)


# ---------------------------------------------------------------- every path, one fit
# A real fit of the bundled data (the session's ``fitted_workdir``, copied: ``track add``
# writes models/tracked.json); configurations generated within its range.
HARDWARE = ("b300", "rtx-pro-6000", "h100")   # (h100: never measured, transferred)


@st.composite
def configurations(draw) -> dict:
    """One configuration as predict's flags: hardware, engine, method and its shape, an
    acceptance (a value, a range, or none: the prior or measured one), a context and a C."""
    method = draw(st.sampled_from(["ddtree", "ddtree", "eagle3", "ar"]))
    q: dict = {"hardware": draw(st.sampled_from(HARDWARE)),
               "engine": draw(st.sampled_from(["sglang", "vllm", "native"])), "method": method}
    top = 1.0
    if method == "ddtree":
        q["block"], q["budget"] = draw(st.sampled_from([8, 16])), draw(st.sampled_from(
            [4, 8, 16, 32, 64]))
        top = float(min(q["block"], q["budget"] + 1))
    elif method == "eagle3":
        q["block"] = draw(st.integers(1, 3))
        top = q["block"] + 1.0
    if method != "ar":
        kind = draw(st.sampled_from(["value", "range", "none"]))
        ends = sorted(round(draw(st.floats(1.0, top)), 2) for _ in range(2))
        if kind == "value":
            q["accept"] = f"{ends[1]:g}"
        elif kind == "range" and ends[0] < ends[1]:
            q["accept"] = f"{ends[0]:g}:{ends[1]:g}"
    q["context"] = draw(st.sampled_from([0, 0, 4096, 32768, 131072]))
    q["concurrency"] = draw(st.sampled_from([2, 4, 16]))
    return q


def flags_of(q: dict, *, streams: bool = False) -> list[str]:
    argv = [f"--{k}={v}" for k, v in q.items() if k != "concurrency"]
    return argv + ([f"--concurrency=1,{q['concurrency']}"] if streams else [])


def json_rows(work: Path, *argv: str) -> list[dict]:
    code, out, err = run_cli(work, *argv, "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output(argv[0], payload)
    return payload["rows"] if argv[0] == "predict" else payload


NUMBERS = ("median", "lo50", "hi50", "lo90", "hi90")


def ordered(row: dict) -> bool:
    return row["lo90"] <= row["lo50"] <= row["median"] <= row["hi50"] <= row["hi90"]


@pytest.fixture(scope="module")
def asked(fitted_workdir, tmp_path_factory) -> Path:
    work, _ = fitted_workdir
    copy = tmp_path_factory.mktemp("one_question") / "work"
    shutil.copytree(work, copy)
    return copy


HEADLINE = {"hardware": "b300", "engine": "sglang", "method": "ddtree", "block": 16,
            "budget": 32, "accept": "12", "context": 0, "concurrency": 4}


@pytest.mark.nuts
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example(q=HEADLINE)
@example(q={**HEADLINE, "engine": "native", "accept": "12:16"})
@example(q={"hardware": "rtx-pro-6000", "engine": "vllm", "method": "eagle3", "block": 3,
            "context": 131072, "concurrency": 2})   # its measured acceptance
@given(q=configurations())
def test_one_configuration_one_number_through_every_path(asked, q):
    """predict's table, JSON, CSV, --explain, --concurrency 1,C; next --query (its now, at C);
    track add (its now); api.predict: the same median and intervals, to the digit where both
    carry all of them and to the printed precision where one is a table."""
    work = asked
    code, out, err = run_cli(work, "predict", *flags_of(q), "--format", "json")
    assume(code == 0)   # (a configuration predict refuses: one line, exit 2, elsewhere)
    rows = json.loads(out)["rows"]
    assert rows and all(ordered(r) for r in rows)

    # the table and the CSV carry the JSON's numbers
    code, table, err = run_cli(work, "predict", *flags_of(q))
    assert code == 0, err
    cells = table_of(table, "engine")
    assert len(cells) == len(rows)
    for r, c in zip(rows, cells, strict=True):
        assert (c["median"], c["50% interval"], c["90% interval"]) == (
            tok(r["median"]), span(r["lo50"], r["hi50"]), span(r["lo90"], r["hi90"]))
        assert c["original +-30%"] == ("-" if r["original"] is None else
                                       f"{r['original']:.0f} ({r['original_lo']:.0f}-"
                                       f"{r['original_hi']:.0f})")
    code, out, err = run_cli(work, "predict", *flags_of(q), "--format", "csv")
    assert code == 0, err
    for r, c in zip(rows, csv.DictReader(io.StringIO(out)), strict=True):
        assert all(float(c[k]) == r[k] for k in NUMBERS)
        assert (c["original"] or None) == (None if r["original"] is None
                                           else repr(r["original"]))

    # the original estimate: the seed table's figure at its own rows
    for r in rows:
        seed = SEED_ROWS.get((r["engine"], r["accept"]))
        if (r["hardware"], r["gpus"], r["method"], r["block"], r["budget"],
                r["context_tokens"]) == ("b300", 8, "ddtree", 16, 32, 0) and seed is not None:
            assert r["original"] == seed

    # --explain splits the same draws
    explained = json_rows(work, "predict", *flags_of(q), "--explain")
    assert [[e[k] for k in NUMBERS] for e in explained] == [[r[k] for k in NUMBERS]
                                                            for r in rows]

    # the Python API
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = api.predict(api.load(workdir=work), workdir=work, hardware=q["hardware"],
                            engine=q["engine"], method=q["method"], block=q.get("block"),
                            budget=q.get("budget"), accept=q.get("accept"),
                            context=q["context"])
    assert frame[list(NUMBERS)].to_numpy().tolist() == [[r[k] for k in NUMBERS] for r in rows]

    # --concurrency 1,C: C = 1 is the plain answer; total = C x per user, draw by draw
    streams = json_rows(work, "predict", *flags_of(q, streams=True))
    c = q["concurrency"]
    one = [s for s in streams if s["concurrency"] == 1]
    at_c = [s for s in streams if s["concurrency"] == c]
    assert [[s[k] for k in NUMBERS] for s in one] == [[r[k] for k in NUMBERS] for r in rows]
    for s in at_c:
        assert ordered(s) and ordered(s["total"])
        for k in NUMBERS:
            assert s["total"][k] == pytest.approx(c * s[k], rel=1e-12)
        assert 0.0 <= s.get("p_faster_than_ar", 0.0) <= 1.0

    # next --query (one engine, one acceptance: a range's Uniform row) at C
    answer = at_c[-1]
    code, out, err = run_cli(work, "next", "--query",
                             " ".join(flags_of(q) + [f"--concurrency={c}"]), "--k", "2",
                             "--format", "json")
    assert code == 0, err
    now = json.loads(out)["query"]
    assert (now["median"], now["lo"], now["hi"]) == (answer["median"], answer["lo90"],
                                                     answer["hi90"])

    # track add: its "now" is predict's (one stream), then removed again
    added = json_rows(work, "track", "add", *flags_of(q))
    assert [(t["median"], t["lo90"], t["hi90"]) for t in added["now"]["rows"]] == [
        (r["median"], r["lo90"], r["hi90"]) for r in rows]
    code, _, err = run_cli(work, "track", "remove", added["query"]["name"])
    assert code == 0, err


# ---------------------------------------------------------------- the asked system's own rows
LLAMA = "llama-3.1-8b-instruct"
#: Llama on one H100: eagle3 block 7 (its most-measured configuration) and one mtp block 2 row.
H100_ROWS = (f"{LLAMA},h100,1,vllm,eagle3,7,7,8,3.5,,200,test,\n"
             f"{LLAMA},h100,1,vllm,eagle3,7,7,8,3.6,,205,test,\n"
             f"{LLAMA},h100,1,vllm,mtp,2,2,3,2.2,,180,test,\n")
#: ... and on one H200, five eagle3 rows: then H200, not H100, is Llama's default system.
H200_ROWS = "".join(f"{LLAMA},h200,1,vllm,eagle3,{b},{b},{b + 1},3.5,,230,test,\n"
                    for b in (3, 4, 5, 6, 7))


def _llama_fit(extra: str, systems: tuple[str, ...]):
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws

    d = multi_model_draws()
    return d.view(data_csv=MULTI_DATA + extra,
                  meta={**d.meta, "coords": {**d.meta["coords"], "system": list(systems)}})


@pytest.mark.parametrize("h200", [False, True], ids=["h100-is-the-default", "h200-is"])
def test_the_asked_systems_own_rows_shape_a_method_whether_or_not_it_is_the_default(h200):
    """``--hardware h100 --gpus 1 --engine vllm --method mtp`` (no block) takes H100's own
    mtp rows' shape, block 2, whichever system is the model's default: it was refused
    ("cannot tell how many tokens mtp verifies per step") when H100 was the default system
    (eagle3 block 7) and answered block 2 when H200 was. On a real fit of
    data/examples/public_multi_model.csv, `next --query "--model qwen3.8-27b --hardware
    rtx-3090 --gpus 1 --engine vllm --method dflash"` exited 2 so where predict answered:
    the query itself, simulated as measured, made RTX 3090 the model's default system. Both
    commands resolve the query alike."""
    from ddtree_bayes.engine.question import Flags, default_question, resolve
    from ddtree_bayes.workflows.decisions.next_measurement import parse_query

    systems = ("kimi-k2.6@b300x8", f"{LLAMA}@h100x1") + ((f"{LLAMA}@h200x1",) if h200 else ())
    fit = _llama_fit(H100_ROWS + (H200_ROWS if h200 else ""), systems)
    assert default_question(fit, LLAMA).hardware == ("h200" if h200 else "h100")
    q = resolve(fit, Flags(model=LLAMA, hardware="h100", gpus=1, engines=("vllm",),
                           method="mtp"))
    sc = q.asked[0].scenario
    assert (sc.hardware, sc.method, sc.block, sc.budget, sc.verify_tokens) == (
        "h100", "mtp", 2, 2, 3)
    assert "the flags not given come from its own rows: --block 2 --budget 2" in q.note
    asked = parse_query(fit, f"--model {LLAMA} --hardware h100 --gpus 1 --engine vllm "
                             "--method mtp").scenario
    assert asked == sc
    # the default's own method keeps the default's shape, as before
    own = resolve(fit, Flags(model=LLAMA, hardware="h100", gpus=1, method="eagle3"))
    assert (own.asked[0].scenario.block, own.asked[0].scenario.budget) == (7, 7)


def test_the_context_a_blank_context_takes_is_read_in_one_place():
    """Which context does a question without --context, or a row with a blank
    context_tokens, take? The fit's default_context_tokens: engine/question.py asked it through
    ``blank_context``, and eight other places (the scenario, the rows behind a question, the
    anchors and the blank-acceptance rows of the predictive, the fitted rows, optimize's
    measured budgets, the crossover check) read the metadata field themselves, with three
    fallbacks between them (none, ``or 0.0``, ``float``). All ask ``posterior.blank_context``
    now: a fit stored at 4096 tokens answers 4096 through the scenario and the rows behind."""
    import re

    from ddtree_bayes.engine.posterior import blank_context
    from ddtree_bayes.engine.scenario import resolve_scenario
    from ddtree_bayes.engine.transfer import rows_behind

    d = point_mass_draws(n=4)
    d.meta["model"]["default_context_tokens"] = 4096.0
    sc = resolve_scenario(d, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                          block=16, budget=32, verify_tokens=None, context_tokens=None)
    assert sc.context_tokens == blank_context(d) == 4096.0
    blank_rows = [r for r in d.measurements.rows if r.context_tokens is None]
    assert blank_rows and rows_behind(d, sc).max_context == 4096.0
    src = Path(P.__file__).resolve().parent.parent
    readers = sorted(str(f.relative_to(src)) for f in src.rglob("*.py")
                     if re.search(r"""(\["|get\(")default_context_tokens"""
                                  r"""("\]|"\))""", f.read_text())
                     and f.name != "posterior.py")
    assert readers == [], readers

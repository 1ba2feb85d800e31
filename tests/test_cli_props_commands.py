"""Property tests of ``optimize``, ``next``, ``diff``, ``history``, ``track`` and ``compare``
over generated flags, in-process on point-mass fits (tests/test_cli_support.py): every
valid run exits 0, its ``--format json`` validates against the command's schema and says
the numbers its table prints; every invalid one exits as ``ddtree-bayes --help`` documents
(2 bad input, 3 no such fit) with one stderr line, no traceback and nothing written; and a
flag a command accepts changes its answer or is refused, never silently ignored.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_cli_support import FIT_ID, listing, make_point_mass_workdir, run_cli, write_point_mass_fit
from test_json_schemas import validate_output
from test_output_agreement import span, table_of, tok

FAST = settings(max_examples=10, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
POWER, LINEAR = "20260101T000001Z-power", "20260101T000002Z-lin"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """The point-mass fit (noise, jitter, 64 draws) and two more of the power and linear
    MoE forms (400 draws, wider noise): the latest is the linear one."""
    w = make_point_mass_workdir(tmp_path_factory.mktemp("props_cmds") / "w", noise_sd=0.05,
                                n=64, jitter=0.02)
    for form, fit_id in (("power", POWER), ("linear", LINEAR)):
        write_point_mass_fit(w / "models", w / "data" / "measurements.csv",
                             w / "models" / "priors.toml", w / "data" / "hardware.csv",
                             fit_id=fit_id, n=400, moe_form=form, noise_sd=0.08, jitter=0.02)
    return w


def ok_json(work: Path, command: str, *argv: str) -> tuple[str, dict]:
    """``argv`` as a table and as JSON (validated): both exit 0 with the same stderr."""
    code, table, err = run_cli(work, command, *argv)
    assert code == 0, (argv, err)
    code, out, err_json = run_cli(work, command, *argv, "--format", "json")
    assert code == 0 and err_json == err, (argv, err_json)
    payload = json.loads(out)
    validate_output(command, payload)
    return table, payload


def unlocked(files: dict) -> dict:
    """A listing without lock files (a lock taken to read is left empty, as the suite's other
    property tests allow)."""
    return {k: v for k, v in files.items() if not k.endswith(".lock")}


def refused(work: Path, argv: list[str], code: int = 2) -> str:
    """``argv`` exits ``code`` with one error line, nothing on stdout, nothing written."""
    before = listing(work)
    got, out, err = run_cli(work, *argv)
    assert (got, out) == (code, ""), (argv, got, out, err)
    assert "Traceback" not in err, (argv, err)
    # one line: no warning of the question before the error that refuses it
    assert len(err.splitlines()) == 1, (argv, err)
    assert err.startswith("ddtree-bayes: error: ") and "(fix: " in err, (argv, err)
    assert unlocked(listing(work)) == unlocked(before), argv
    return err


# ---------------------------------------------------------------- optimize
@st.composite
def optimize_flags(draw) -> list[str]:
    flags = ["--budgets", draw(st.sampled_from(["8,16,32", "16", "4,8", "16,64,128"]))]
    for flag, values in (("--concurrency", ["2", "8"]), ("--context", ["32k", "1m"]),
                         ("--engine", ["sglang", "native", "vllm"]),
                         ("--hardware", ["b300", "h100", "rtx-pro-6000"]),
                         ("--gpus", ["4", "8"]), ("--prob", ["0.5", "0.8"]),
                         ("--kv-cache", ["fp8", "bf16"])):
        if draw(st.booleans()):
            flags += [flag, draw(st.sampled_from(values))]
    return flags


@FAST
@given(flags=optimize_flags())
def test_optimize_json_is_its_table(work, flags):
    table, out = ok_json(work, "optimize", *flags)
    asked = sorted({int(b) for b in flags[1].split(",")})
    assert [r["budget"] for r in out["rows"]] == asked
    label = f"{round(out['interval_prob'] * 100, 4):g}"
    cells = table_of(table, "budget")
    assert len(cells) == len(out["rows"])
    for cell, r in zip(cells, out["rows"], strict=True):
        assert r[f"lo{label}"] <= r["median"] <= r[f"hi{label}"]
        assert cell["tok/s median"] == tok(r["median"])
        assert cell[f"{label}% interval"] == span(r[f"lo{label}"], r[f"hi{label}"])
        assert cell["P(best)"] == f"{r['p_best']:.2f}"
        assert r["regret"] >= 0
    assert sum(r["p_best"] for r in out["rows"]) == pytest.approx(1.0, abs=1e-9)
    assert f"recommended budget: {out['recommended']} (" in table
    assert out["recommended"] in asked
    sc = out["scenario"]
    for flag, key in (("--engine", "engine"), ("--hardware", "hardware")):
        if flag in flags:
            assert sc[key] == flags[flags.index(flag) + 1]
    if "--gpus" in flags:
        assert sc["gpus"] == int(flags[flags.index("--gpus") + 1])
    if "--concurrency" in flags:
        assert sc["concurrency"] == int(flags[flags.index("--concurrency") + 1])


# ---------------------------------------------------------------- next
@st.composite
def next_flags(draw) -> list[str]:
    query = [draw(st.sampled_from(["--accept 14", "--accept 12:16", "--block 8 --budget 8",
                                   "--method ar"]))]
    for flag, values in (("--concurrency", ["2", "8"]), ("--context", ["32k"]),
                         ("--engine", ["native", "sglang"]), ("--hardware", ["h100"])):
        if draw(st.booleans()):
            query.append(f"{flag} {draw(st.sampled_from(values))}")
    flags = ["--k", "4", "--query", " ".join(query)]
    if draw(st.booleans()):
        flags += ["--prob", draw(st.sampled_from(["0.5", "0.8"]))]
    return flags


@FAST
@given(flags=next_flags())
def test_next_json_is_its_table(work, flags):
    table, out = ok_json(work, "next", *flags)
    q = out["query"]
    assert q["lo"] <= q["median"] <= q["hi"]
    assert q["width"] == pytest.approx(q["hi"] - q["lo"])
    if "--prob" in flags:
        assert out["interval_prob"] == float(flags[flags.index("--prob") + 1])
    cells = table_of(table, "rank")
    assert [c["candidate"] for c in cells] == [r["candidate"] for r in out["rows"]]
    # the same question asked of predict answers the same "now"
    pq = json.loads(run_cli(work, "predict", *json_flags(flags[3]), "--format", "json",
                            "--prob", str(out["interval_prob"]))[1])
    (row,) = [r for r in pq["rows"] if r["engine"] == q["engine"]
              and r.get("concurrency", 1) == q.get("concurrency", 1)
              and (r["accept_distribution"] is None) == (q["accept_distribution"] is None)]
    wide = f"{round(out['interval_prob'] * 100, 4):g}"
    assert (row["median"], row[f"lo{wide}"], row[f"hi{wide}"]) == (q["median"], q["lo"],
                                                                   q["hi"])


def json_flags(query: str) -> list[str]:
    """next's --query as predict flags: one engine (next asks sglang unless told)."""
    argv = query.split()
    if "--engine" not in argv:
        argv += ["--engine", "sglang"]
    return argv


# ---------------------------------------------------------------- history, diff, compare
def test_history_json_is_its_table(work):
    table, out = ok_json(work, "history")
    cells = table_of(table, "fit id")
    assert [c["fit id"] for c in cells] == [r["fit_id"] for r in out["rows"]]
    assert [r["fit_id"] for r in out["rows"]] == [FIT_ID, POWER, LINEAR]
    for cell, r in zip(cells, out["rows"], strict=True):
        assert cell["rows"] == str(r["rows"])
        assert cell["converged"] == ("yes" if r["converged"] else "NO")
        assert ("latest" in cell["notes"]) == r["latest"]


@pytest.mark.parametrize("extra", [[], ["--all"], ["--seed", "7"]], ids=str)
def test_diff_json_is_its_table(work, extra):
    table, out = ok_json(work, "diff", FIT_ID, LINEAR, *extra)
    assert (out["fit_a"], out["fit_b"]) == (FIT_ID, LINEAR)
    cells = {c["parameter"]: c for c in table_of(table, "parameter")}
    assert set(cells) == {p["parameter"] for p in out["parameters"]}
    for p in out["parameters"]:
        a, b = p["a"], p["b"]
        assert a["lo90"] <= a["median"] <= a["hi90"] and b["lo90"] <= b["median"] <= b["hi90"]
        if p["parameter"] == "noise_sd":   # 0.05 -> 0.08: +60%
            assert p["median_change"] == pytest.approx(0.6, abs=0.03)
            assert cells["noise_sd"]["median change"] == f"{p['median_change']:+.0%}"
    if "--all" not in extra:
        assert not any(p["parameter"].endswith("_z") for p in out["parameters"])
    assert out["seed"] == (int(extra[1]) if "--seed" in extra else 20261130)
    assert out["tracked"]   # (the built-in default question, in each engine)
    lines = table.splitlines()
    for t in out["tracked"]:
        a, b = t["before"], t["after"]
        head = (f"  {t['name']}: {t['label']}: 90% {span(a['lo90'], a['hi90'])} -> "
                f"{span(b['lo90'], b['hi90'])} tok/s (median {tok(a['median'])} -> "
                f"{tok(b['median'])}, width ")
        assert any(line.startswith(head) for line in lines), head


def test_compare_weights_sum_to_one_and_match_the_table(work):
    table, out = ok_json(work, "compare", "--fits", f"{POWER},{LINEAR}")
    assert sum(out["weights"].values()) == pytest.approx(1.0)
    cells = table_of(table, "model")
    assert [c["model"] for c in cells] == [r["model"] for r in out["rows"]]
    for cell, r in zip(cells, out["rows"], strict=True):
        assert cell[f"weight ({out['method']})"] == f"{r['weight']:.2f}"


# ---------------------------------------------------------------- track
def test_track_add_list_remove(work):
    base = Path(tempfile.mkdtemp(prefix="ddtree-track-"))
    try:
        w = base / "w"
        shutil.copytree(work, w)
        code, out, err = run_cli(w, "track", "--accept", "13", "--engine", "sglang", "--name",
                                 "q13", "--format", "json")
        assert code == 0, err
        added = json.loads(out)
        validate_output("track", added)
        _, listed = ok_json(w, "track", "list")
        assert [r["name"] for r in listed["rows"]] == ["default", "q13"]
        # the interval track says now is predict's of the same question
        pred = json.loads(run_cli(w, "predict", "--accept", "13", "--engine", "sglang",
                                  "--format", "json")[1])["rows"][0]
        (now,) = added["now"]["rows"]
        assert (now["median"], now["lo90"], now["hi90"]) == (pred["median"], pred["lo90"],
                                                              pred["hi90"])
        # and the table's now line (the same query, added as a table) says those numbers
        assert run_cli(w, "track", "remove", "q13")[0] == 0
        code, table, err = run_cli(w, "track", "--accept", "13", "--engine", "sglang",
                                   "--name", "q13")
        assert code == 0, err
        assert (f"  now (fit {added['now']['fit_id']}): {now['label']}: median "
                f"{tok(now['median'])}, 90% {span(now['lo90'], now['hi90'])} tok/s"
                ) in table.splitlines(), table
        code, out, err = run_cli(w, "track", "remove", "q13")
        assert code == 0, err
        _, listed = ok_json(w, "track", "list")
        assert [r["name"] for r in listed["rows"]] == ["default"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- refused
INVALID = [
    (["optimize", "--budgets", "0"], 2), (["optimize", "--budgets", "8,,16"], 2),
    (["optimize", "--budgets", "-8"], 2), (["optimize", "--hardware", "nosuch"], 2),
    (["optimize", "--gpus", "0"], 2), (["optimize", "--concurrency", "0"], 2),
    (["optimize", "--concurrency", "1,4"], 2), (["optimize", "--context", "-1"], 2),
    (["optimize", "--engine", "sglang,native"], 2), (["optimize", "--method", "ar"], 2),
    (["optimize", "--block", "8"], 2), (["optimize", "--prob", "1"], 2),
    (["optimize", "--fit", "20990101T000000Z-nope"], 3),
    (["next", "--k", "1"], 2), (["next", "--query", "--accept 99"], 2),
    (["next", "--query", "--engine sglang,native"], 2), (["next", "--query", "--bogus 1"], 2),
    (["next", "--query", "--accept 12,14"], 2), (["next", "--query", "--concurrency 0"], 2),
    (["next", "--min-ess", "-1"], 2), (["next", "--candidates", "missing.csv"], 2),
    (["next", "--candidates", "data/hardware.csv"], 2),
    (["next", "--query", "--accept 14 --engine nosuch", "--candidates", "missing.csv"], 2),
    (["optimize", "--engine", "nosuch", "--acceptance-file", "missing.csv"], 2),
    (["optimize", "--engine", "nosuch", "--acceptance-file", "data/hardware.csv"], 2),
    (["optimize", "--context", "1m", "--budgets", "8", "--acceptance-file", "missing.csv"], 2),
    (["diff", FIT_ID], 2), (["diff", FIT_ID, "20990101T000000Z-nope"], 3),
    (["diff", FIT_ID, "../x"], 2), (["history", "--format", "csv"], 2),
    (["track", "list", "--accept", "14"], 2), (["track", "remove", "nosuch"], 2),
    (["track", "--accept", "14", "--concurrency", "4"], 2), (["track", "--accept", "99"], 2),
    (["track", "--hardware", "nosuch"], 2),
    (["compare", "--fits", FIT_ID], 2), (["compare", "--fits", f"{FIT_ID},{FIT_ID}"], 2),
    (["compare", "--weights", "nosuch"], 2),
    (["compare", "--fits", f"{POWER},20990101T000000Z-nope"], 3),
]


@pytest.mark.parametrize(("argv", "code"), INVALID, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else str(v))
def test_invalid_flags_are_refused(work, argv, code):
    refused(work, argv, code)


@pytest.mark.parametrize("argv", [
    ["optimize", "--budgets", "16", "--engine", "nosuch"],
    ["optimize", "--budgets", "16", "--engine", "sglnag"],
    ["next", "--k", "4", "--query", "--accept 14 --engine nosuch"],
    ["predict", "--accept", "14", "--engine", "nosuch"],
], ids=" ".join)
def test_strict_refuses_a_name_never_measured_in_every_command(work, argv):
    """--strict: "error ... for an engine, method or hardware name that was never measured
    nor declared" (predict --help). predict and next refused; optimize took --strict, warned
    and answered for the typo as for a new engine (exit 0), the flag silently ignored."""
    code, _, err = run_cli(work, *argv)
    assert code == 0 and "was never measured" in err, err   # without --strict: a warning
    line = refused(work, [*argv, "--strict"])
    assert "was never measured" in line and "drop --strict" in line, line


# ---------------------------------------------------------------- exit codes 4 and 5
QUESTIONS = [["predict", "--accept", "14"], ["predict", "--accept", "14", "--format", "csv"],
             ["optimize", "--budgets", "16"], ["next", "--k", "4"]]


@pytest.fixture(scope="module")
def stale(tmp_path_factory) -> Path:
    """The point-mass working directory with a row added to its data file since the fit."""
    w = make_point_mass_workdir(tmp_path_factory.mktemp("props_stale") / "w", noise_sd=0.05)
    with open(w / "data" / "measurements.csv", "a") as fh:
        fh.write("kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.5,,305,added,\n")
    return w


@pytest.fixture(scope="module")
def unconverged(tmp_path_factory) -> Path:
    """The point-mass working directory whose fit failed its gates."""
    import h5py

    from ddtree_bayes.engine import store

    w = make_point_mass_workdir(tmp_path_factory.mktemp("props_unconv") / "w", noise_sd=0.05)
    with h5py.File(w / "models" / "fits" / f"{FIT_ID}.nc", "r+") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        meta.update(converged=False, failures=["r_hat 1.2 > 1.01"])
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    return w


@pytest.mark.parametrize("argv", QUESTIONS, ids=" ".join)
def test_stale_fit_with_strict_exits_4(stale, argv):
    code, out, err = run_cli(stale, *argv)
    assert code == 0 and "changed since fit" in err, err   # a warning without --strict
    # (one line naming the file, what to run, and its fix as every error writes it)
    before = unlocked(listing(stale))
    code, out, err = run_cli(stale, *argv, "--strict")
    assert (code, out, len(err.splitlines())) == (4, "", 1), err
    assert err.startswith("ddtree-bayes: error: ") and "data/measurements.csv changed since fit" \
        in err and "run `ddtree-bayes update` (or `fit`) to use it: --strict refuses it (fix: " \
        in err and err.rstrip().endswith(")"), err
    assert unlocked(listing(stale)) == before


@pytest.mark.parametrize("argv", QUESTIONS, ids=" ".join)
def test_unconverged_fit_exits_5_unless_allowed(unconverged, argv):
    line = refused(unconverged, argv, code=5)
    assert "failed its convergence gates" in line and "--allow-unconverged" in line
    code, out, err = run_cli(unconverged, *argv, "--allow-unconverged")
    assert code == 0 and out and "used anyway (--allow-unconverged)" in err, err

"""`ddtree-bayes add --from-bench FILE`: benchmark tools' result files into the measurement
file (fixtures and their sources: tests/fixtures/bench/README.md). What the file lacks comes
from flags; the numbers it holds are checked against values worked out by hand from the
fixture; the same all-or-nothing rules as `add`. The end-to-end test imports three formats
into a copy of the session's real fit, refits with `update` and checks that `predict` moved
to the imported numbers."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from test_cli_support import listing, make_point_mass_workdir, run_cli

BENCH = Path(__file__).resolve().parent / "fixtures" / "bench"
CONFIG = ["--hardware", "b300", "--engine", "sglang"]


@pytest.fixture(scope="module")
def pm(tmp_path_factory):
    return make_point_mass_workdir(tmp_path_factory.mktemp("bench") / "w")


@pytest.fixture
def work(pm, tmp_path):
    return Path(shutil.copytree(pm, tmp_path / "w"))


def new_rows(work: Path) -> list[dict]:
    with open(work / "data" / "measurements.csv", newline="") as fh:
        return list(csv.DictReader(fh))[2:]  # after the two B300 rows


def one_error(work: Path, *argv: str) -> str:
    before = listing(work)
    code, out, err = run_cli(work, "add", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "(fix: " in err and "Traceback" not in err
    assert {k: v for k, v in listing(work).items() if not k.endswith(".lock")} == {
        k: v for k, v in before.items() if not k.endswith(".lock")}
    return err


def first_line(src: Path, dst: Path) -> Path:
    dst.write_text(src.read_text().splitlines()[0] + "\n")
    return dst


# ---------------------------------------------------------------- per format, by hand
def test_sglang_serving_acceptance_from_the_file(work, tmp_path):
    src = first_line(BENCH / "sglang_serving.jsonl", tmp_path / "eagle.jsonl")  # EAGLE3 run
    code, out, err = run_cli(work, "add", "--from-bench", str(src), *CONFIG,
                             "--method", "eagle3", "--block", "3")
    assert code == 0, err
    (row,) = new_rows(work)
    # median_tpot_ms 2.4924749999999998 -> 1000 / 2.492475 = 401.2076 tok/s; 16384 / 16 tokens
    assert row["tok_s"] == "401.208" and row["accept_len"] == "3.4172"
    assert row["context_tokens"] == "1024" and row["verify_tokens"] == ""
    assert row["source"] == "sglang-serving eagle.jsonl record 1"
    assert row["notes"].startswith("sglang.bench_serving (sglang-serving): tok_s = 1000/median_tpot_ms")
    assert "appended 1 row" in out and "M=4 ctx 1024 accept 3.4172: 401.208 tok/s" in out


def test_vllm_serve_and_a_contradicting_accept(work):
    err = one_error(work, "--from-bench", str(BENCH / "vllm_serve.json"), *CONFIG,
                    "--method", "eagle3", "--block", "3", "--accept", "2")
    assert "records acceptance length 3.14593; --accept 2 would contradict it" in err
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / "vllm_serve.json"),
                           "--hardware", "b300", "--engine", "vllm", "--method", "eagle3",
                           "--block", "3", "--source", "my serve run")
    assert code == 0, err
    (row,) = new_rows(work)
    payload = json.loads((BENCH / "vllm_serve.json").read_text())
    assert float(row["tok_s"]) == pytest.approx(1000 / payload["median_tpot_ms"], rel=1e-5)
    assert float(row["accept_len"]) == pytest.approx(
        payload["spec_decode_acceptance_length"], rel=1e-5)
    assert row["context_tokens"] == "1024" and row["source"] == "my serve run"


@pytest.mark.parametrize("name", ["llama_bench.json", "llama_bench.csv"])
def test_llama_bench_imports_its_generation_tests(work, name):
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / name), "--hardware", "b300",
                           "--engine", "llama.cpp", "--method", "ar", "--format", "json")
    assert code == 0, err
    rows = new_rows(work)
    # tg128 and tg128 @ d4096 (the pp512 test is skipped): avg_ts as printed
    assert [(r["tok_s"], r["context_tokens"], r["accept_len"]) for r in rows] == [
        ("150.62", "0", "1"), ("127.493", "4096", "1")]


def test_sglang_one_batch_and_a_batch_sweep(work):
    src = str(BENCH / "sglang_one_batch_bs1_bs8.jsonl")   # line 1 batch 1, line 2 batch 8
    err = one_error(work, "--from-bench", src, *CONFIG, "--method", "ar")
    assert err.endswith("line 2: batch_size 8: only single-stream (batch 1) runs can be imported "
                        "(fix: import the file's single-stream records (line 1) with "
                        "--single-stream-only or --bench-records 1, or rerun "
                        "sglang.bench_one_batch with --batch-size 1)\n")
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / "sglang_one_batch.jsonl"),
                           *CONFIG, "--method", "ar")
    assert code == 0, err
    # median_decode_throughput = 1 / median_decode_latency: 1 / 0.0067413, 1 / 0.0071986
    assert [(r["tok_s"], r["context_tokens"]) for r in new_rows(work)] == [
        (f"{1 / 0.0067413:.6g}", "512"), (f"{1 / 0.0071986:.6g}", "2048")]


def imported_rows(work: Path, *argv: str) -> tuple[list[dict], str]:
    code, out, err = run_cli(work, "add", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)["rows"], err


@pytest.mark.parametrize("select", [["--bench-records", "1"], ["--single-stream-only"]])
def test_a_sweep_imports_its_batch1_record(work, select):
    src = BENCH / "sglang_one_batch_bs1_bs8.jsonl"
    rows, err = imported_rows(work, "--from-bench", str(src), *CONFIG, "--method", "ar", *select)
    assert [(r["tok_s"], r["context_tokens"], r["accept_len"], r["source"]) for r in rows] == [
        (float(f"{1 / 0.0067413:.6g}"), 512, 1.0, "sglang-one-batch sglang_one_batch_bs1_bs8.jsonl line 1")]
    if select == ["--single-stream-only"]:
        assert err == (f"ddtree-bayes: note: {src}: --single-stream-only left out line 2 "
                       "(batch_size 8)\n")


def test_a_vllm_append_result_sweep_imports_its_concurrency1_run(work, tmp_path):
    """`vllm bench serve --max-concurrency 1` then `4`, both with --append-result."""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "sweep.json"
    src.write_text(json.dumps(raw) + "\n" + json.dumps(dict(raw, max_concurrency=4,
                                                             median_tpot_ms=4.0)))
    argv = ["--from-bench", str(src), "--hardware", "b300", "--engine", "vllm", "--method",
            "eagle3", "--block", "3"]
    assert "line 2: max_concurrency 4: only single-stream" in one_error(work, *argv)
    (row,), _ = imported_rows(work, *argv, "--single-stream-only")
    assert row["tok_s"] == float(f"{1000 / raw['median_tpot_ms']:.6g}")
    assert row["source"] == "vllm-serve sweep.json line 1"


def test_a_forced_format_that_is_not_the_files_is_refused(work, tmp_path):
    """An SGLang EAGLE-3 record forced as vLLM's: it used to land as an `ar` row."""
    src = first_line(BENCH / "sglang_serving.jsonl", tmp_path / "eagle.jsonl")
    err = one_error(work, "--from-bench", str(src), *CONFIG, "--method", "ar", "--bench-format",
                    "vllm-serve")
    assert err == (f"ddtree-bayes: error: {src}, record 1: --bench-format vllm-serve, but this is "
                   "sglang.bench_serving output (sglang-serving: accept_length, random_range_ratio, "
                   "sharegpt_output_len, total_output_tokens_retokenized) (fix: drop --bench-format "
                   "(the format is detected), or pass the file vllm bench serve wrote)\n")


def test_vllm_latency_needs_the_runs_flags(work, tmp_path):
    err = one_error(work, "--from-bench", str(BENCH / "vllm_latency.json"), *CONFIG,
                    "--method", "ar")
    assert "batch_size is unknown" in err and "pass the run's --batch-size and --output-len" in err
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / "vllm_latency.json"),
                           *CONFIG, "--method", "ar", "--batch-size", "1", "--output-len", "128",
                           "--input-len", "512")
    assert code == 0, err
    (row,) = new_rows(work)
    avg = json.loads((BENCH / "vllm_latency.json").read_text())["avg_latency"]
    assert row["tok_s"] == f"{128 / avg:.6g}" and row["context_tokens"] == "512"


def test_vllm_latency_side_file_gives_the_flags_and_accept_comes_from_the_flag(work):
    err = one_error(work, "--from-bench", str(BENCH / "vllm_latency_eagle3.json"), *CONFIG,
                    "--method", "eagle3", "--block", "3")
    assert "records no acceptance length" in err and "pass --accept" in err
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / "vllm_latency_eagle3.json"),
                           *CONFIG, "--method", "eagle3", "--block", "3", "--accept", "2.6")
    assert code == 0, err
    (row,) = new_rows(work)
    assert row["accept_len"] == "2.6" and row["context_tokens"] == "1024"  # from the side file


def test_a_mixed_file_is_all_or_nothing_and_records_pick(work):
    src = str(BENCH / "sglang_serving.jsonl")  # line 1 EAGLE3 (accept 3.4172), line 2 plain
    err = one_error(work, "--from-bench", src, *CONFIG, "--method", "eagle3", "--block", "3")
    assert "line 2): sglang-serving records no acceptance length" in err
    err = one_error(work, "--from-bench", src, *CONFIG, "--method", "ar")
    assert "line 1): the file records acceptance length 3.4172, a speculative run" in err
    code, _, err = run_cli(work, "add", "--from-bench", src, *CONFIG, "--method", "ar",
                           "--bench-records", "2")
    assert code == 0, err
    (row,) = new_rows(work)
    assert row["accept_len"] == "1" and row["source"] == "sglang-serving sglang_serving.jsonl line 2"


def test_errors_are_one_line(work, tmp_path):
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8 text" in one_error(work, "--from-bench", str(tmp_path / "bin.json"),
                                         *CONFIG, "--method", "ar")
    assert "cannot read the file" in one_error(work, "--from-bench", str(tmp_path / "no.json"),
                                               *CONFIG, "--method", "ar")
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), *CONFIG,
                    "--method", "ar", "--bench-format", "vllm-serve")
    assert "llama_bench.json, record 1: --bench-format vllm-serve, but this is llama-bench output" in err
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), "--method", "ar")
    assert "--from-bench needs --hardware, --engine" in err
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), *CONFIG,
                    "--method", "ar", "--tok-s", "5")
    assert "--tok-s comes from the --from-bench file" in err
    assert "only applies to --from-bench" in one_error(work, *CONFIG, "--bench-records", "1")
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), *CONFIG,
                    "--method", "ar", "--bench-records", "7")
    assert "llama_bench.json: no record 7 in the file (it holds records 1-3)" in err


def test_the_same_file_twice_is_a_duplicate(work):
    argv = ["--from-bench", str(BENCH / "llama_bench.json"), *CONFIG, "--method", "ar"]
    assert run_cli(work, "add", *argv)[0] == 0
    err = run_cli(work, "add", *argv)[2]
    assert "2 problems, nothing appended" in err
    assert "record 2), row 6: identical to row 4" in err
    assert "record 3), row 6: identical to row 5" in err
    code, _, err = run_cli(work, "add", *argv, "--allow-duplicate")
    assert code == 0, err
    notes = [r["notes"] for r in new_rows(work)]
    assert [n.endswith("Q4_K_M.gguf") for n in notes] == [True, True, False, False]
    assert [n[-15:] for n in notes[2:]] == ["repeat of row 4", "repeat of row 5"]


# ---------------------------------------------------------------- import -> update -> predict
IMPORTS = [  # format, file, flags: three new configurations, none measured before; one
    # context each (the fixtures' made-up context sweeps imply a context cost ten times the
    # prior's, which is beside the point here)
    ("llama-bench", "llama_bench.json", ["--hardware", "h200", "--gpus", "8", "--engine",
                                         "llama.cpp", "--method", "ar", "--bench-records", "2"]),
    ("sglang-one-batch", "sglang_one_batch.jsonl", ["--hardware", "b200", "--gpus", "8",
                                                    "--engine", "sglang", "--method", "ar",
                                                    "--bench-records", "1"]),
    ("vllm-serve", "vllm_serve.json", ["--hardware", "h200", "--gpus", "8", "--engine", "vllm",
                                       "--method", "eagle3", "--block", "3"]),
]
QUERIES = {  # the imported configuration and the tok/s imported for it
    "llama-bench": (["--hardware", "h200", "--engine", "llama.cpp", "--method", "ar",
                     "--accept", "1", "--context", "0"], 150.62),
    "sglang-one-batch": (["--hardware", "b200", "--engine", "sglang", "--method", "ar",
                          "--accept", "1", "--context", "512"], 1 / 0.0067413),
    "vllm-serve": (["--hardware", "h200", "--engine", "vllm", "--method", "eagle3", "--block",
                    "3", "--accept", "3.14593", "--context", "1024"],
                   1000 / json.loads((BENCH / "vllm_serve.json").read_text())["median_tpot_ms"]),
}


def predict(work: Path, argv: list[str]) -> dict:
    code, out, err = run_cli(work, "predict", *argv, "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    return row


@pytest.fixture(scope="module")
def imported(fitted_workdir, tmp_path_factory):
    work0, _ = fitted_workdir
    work = Path(shutil.copytree(work0, tmp_path_factory.mktemp("bench-e2e") / "w"))
    (work / "data" / "measurements.csv").chmod(0o644)
    before = {fmt: predict(work, argv) for fmt, (argv, _) in QUERIES.items()}
    for _, name, flags in IMPORTS:
        code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / name), *flags)
        assert code == 0, err
    code, out, err = run_cli(work, "update", "--quiet")
    assert code == 0, err
    after = {fmt: predict(work, argv) for fmt, (argv, _) in QUERIES.items()}
    return out, before, after


def test_update_scores_every_imported_row(imported):
    out, _, _ = imported
    assert "3 new measurements, scored against fit" in out
    for label in ("h200 x8 llama.cpp ar M=1", "b200 x8 sglang ar M=1", "h200 x8 vllm eagle3 b3"):
        assert label in out, label


@pytest.mark.parametrize("fmt", list(QUERIES))
def test_predict_moves_to_the_imported_measurement(imported, fmt):
    _, before, after = imported
    measured = QUERIES[fmt][1]
    b, a = before[fmt], after[fmt]
    # before: an unmeasured system, answered by hardware transfer: wide
    assert "transferred" in b["overhead_from"] and "transferred" not in a["overhead_from"]
    # after: the measurement sits inside a 90% interval at most half as wide as before
    assert a["lo90"] <= measured <= a["hi90"]
    assert (a["hi90"] - a["lo90"]) < 0.5 * (b["hi90"] - b["lo90"])
    assert abs(a["median"] - measured) < abs(b["median"] - measured) or (
        abs(a["median"] / measured - 1) < 0.05)


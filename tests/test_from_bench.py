"""`ddtree-bayes add --from-bench FILE`: benchmark tools' result files into the measurement
file (fixtures and their sources: tests/fixtures/bench/README.md). What the file lacks comes
from flags; the numbers it holds are checked against values worked out by hand from the
fixture; the same all-or-nothing rules as `add`. The end-to-end test imports three formats
into a copy of the session's real fit, refits with `update` and checks that `predict` moved
to the imported numbers."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from test_cli_support import listing, make_point_mass_workdir, run_cli

BENCH = Path(__file__).resolve().parent / "fixtures" / "bench"
CONFIG = ["--hardware", "b300", "--engine", "sglang"]
VLLM = ["--hardware", "b300", "--engine", "vllm"]   # (a vLLM file names its engine)


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
    # of prompt and 8192 / 16 = 512 decoded: the mean KV read 1024 + 512 / 2 = 1280
    assert row["tok_s"] == "401.208" and row["accept_len"] == "3.4172"
    assert row["context_tokens"] == "1280" and row["verify_tokens"] == "4"   # (as add writes)
    assert row["source"] == "sglang-serving eagle.jsonl record 1"
    assert row["notes"].startswith("sglang.bench_serving (sglang-serving): tok_s = 1000/median_tpot_ms")
    assert "appended 1 row" in out and "M=4 ctx 1280 accept 3.4172: 401.208 tok/s" in out


def test_vllm_serve_and_a_contradicting_accept(work):
    err = one_error(work, "--from-bench", str(BENCH / "vllm_serve.json"), *VLLM,
                    "--method", "eagle3", "--block", "3", "--accept", "2")
    assert "records acceptance length 3.14593; --accept 2 would contradict it" in err
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / "vllm_serve.json"),
                           "--hardware", "b300", "--gpus", "8", "--engine", "vllm", "--method",
                           "eagle3", "--block", "3", "--source", "my serve run")
    assert code == 0, err
    (row,) = new_rows(work)
    payload = json.loads((BENCH / "vllm_serve.json").read_text())
    assert float(row["tok_s"]) == pytest.approx(1000 / payload["median_tpot_ms"], rel=1e-5)
    assert float(row["accept_len"]) == pytest.approx(
        payload["spec_decode_acceptance_length"], rel=1e-5)
    # 8192 / 8 = 1024 prompt tokens, 4096 / 8 = 512 decoded: 1024 + 256
    assert row["context_tokens"] == "1280" and row["source"] == "my serve run"


def test_a_row_imported_from_a_bench_file_is_the_row_add_writes_from_flags(pm, tmp_path):
    """An audit: `add --method eagle3 --block 3 ...` wrote verify_tokens 4 (derived, as the
    row is checked), `add --from-bench` of the same run left the cell blank: one
    configuration spelled two ways in data/measurements.csv. Both fill it alike now: the
    imported row and the same values given as flags are the same bytes."""
    bench, flags = (Path(shutil.copytree(pm, tmp_path / name)) for name in ("bench", "flags"))
    code, _, err = run_cli(bench, "add", "--from-bench", str(BENCH / "vllm_serve.json"),
                           "--hardware", "b300", "--gpus", "8", "--engine", "vllm", "--method",
                           "eagle3", "--block", "3", "--source", "my serve run")
    assert code == 0, err
    (row,) = new_rows(bench)
    assert (row["block"], row["budget"], row["verify_tokens"]) == ("3", "3", "4")   # 3 + 1
    code, _, err = run_cli(flags, "add", "--model", row["model"], "--hardware", "b300",
                           "--gpus", "8", "--engine", "vllm", "--method", "eagle3", "--block",
                           "3", "--accept",
                           row["accept_len"], "--context", row["context_tokens"], "--tok-s",
                           row["tok_s"], "--source", row["source"], "--notes", row["notes"])
    assert code == 0, err
    assert ((bench / "data" / "measurements.csv").read_bytes()
            == (flags / "data" / "measurements.csv").read_bytes())


@pytest.mark.parametrize("name", ["llama_bench.json", "llama_bench.csv"])
def test_llama_bench_imports_its_generation_tests(work, name):
    # the file's GPU, 'NVIDIA H100 80GB HBM3', is h100; its model, Meta-Llama-3.1-8B-Instruct,
    # is mapped to the card by --model (8.03B parameters, as the card)
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / name), "--gpus", "1",
                           "--model", "llama-3.1-8b-instruct", "--engine", "llama.cpp",
                           "--method", "ar", "--format", "json")
    assert code == 0, err
    rows = new_rows(work)
    # tg128 and tg128 @ d4096 (the pp512 test is skipped, with a note): avg_ts as printed;
    # 128 decode steps read depth + 1..128 tokens: + 64.5, rounded half to even, 64 and 4160
    assert [(r["model"], r["hardware"], r["tok_s"], r["context_tokens"], r["accept_len"])
            for r in rows] == [("llama-3.1-8b-instruct", "h100", "150.62", "64", "1"),
                               ("llama-3.1-8b-instruct", "h100", "127.493", "4160", "1")]
    assert err.count("ddtree-bayes: note: ") == 1 and "(pp512) measures prompt processing" in err


def test_a_refused_import_is_one_line_without_the_files_notes(tmp_path):
    """An import refused after the file was read (here: in an empty folder, no
    data/measurements.csv) printed the file's "pp512 ... not imported" note before its
    one-line error (a docs walk); the notes are now said with the warnings, once the rows are
    in."""
    code, out, err = run_cli(tmp_path, "add", "--from-bench", str(BENCH / "llama_bench.json"),
                             "--gpus", "1", "--model", "llama-3.1-8b-instruct", "--engine",
                             "llama.cpp", "--method", "ar")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("ddtree-bayes: error: data/measurements.csv: file not found (fix: ")
    assert list(tmp_path.iterdir()) == []


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
    # median_decode_throughput = 1 / median_decode_latency: 1 / 0.0067413, 1 / 0.0071986;
    # input 512 and 2048, output 256: + 128 each
    assert [(r["tok_s"], r["context_tokens"]) for r in new_rows(work)] == [
        (f"{1 / 0.0067413:.6g}", "640"), (f"{1 / 0.0071986:.6g}", "2176")]


def imported_rows(work: Path, *argv: str) -> tuple[list[dict], str]:
    code, out, err = run_cli(work, "add", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)["rows"], err


@pytest.mark.parametrize("select", [["--bench-records", "1"], ["--single-stream-only"]])
def test_a_sweep_imports_its_batch1_record(work, select):
    src = BENCH / "sglang_one_batch_bs1_bs8.jsonl"
    rows, err = imported_rows(work, "--from-bench", str(src), *CONFIG, "--method", "ar",
                              "--gpus", "8", *select)
    assert [(r["tok_s"], r["context_tokens"], r["accept_len"], r["source"]) for r in rows] == [
        (float(f"{1 / 0.0067413:.6g}"), 640, 1.0, "sglang-one-batch sglang_one_batch_bs1_bs8.jsonl line 1")]
    if select == ["--single-stream-only"]:
        assert err == (f"ddtree-bayes: note: {src}: --single-stream-only left out line 2 "
                       "(batch_size 8)\n"
                       f"ddtree-bayes: warning: {src}: the file names no model; its row was "
                       "filed under kimi-k2.6, the model of data/measurements.csv (if the run "
                       "was of another model, remove it and import the file again with "
                       "--model <card>)\n")


def test_a_vllm_append_result_sweep_imports_each_concurrency(work, tmp_path):
    """`vllm bench serve --max-concurrency 1` then `8`, both with --append-result: the C = 8
    run goes in the concurrency column (added to a file without one, blank = 1 in the rows
    already there) with tok_s the 8 streams' total, 8 x 1000 / TPOT; --single-stream-only
    keeps the C = 1 run only."""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "sweep.json"
    src.write_text(json.dumps(raw) + "\n" + json.dumps(dict(raw, max_concurrency=8,
                                                             max_concurrent_requests=8,
                                                             median_tpot_ms=4.0)))
    argv = ["--from-bench", str(src), "--hardware", "b300", "--gpus", "8", "--engine", "vllm",
            "--method", "eagle3", "--block", "3"]
    before = (work / "data" / "measurements.csv").read_text().splitlines()
    one, eight = imported_rows(Path(shutil.copytree(work, tmp_path / "both")), *argv)[0]
    assert (one["concurrency"], eight["concurrency"]) == (1, 8)
    assert one["tok_s"] == float(f"{1000 / raw['median_tpot_ms']:.6g}")
    assert eight["tok_s"] == 2000.0 and eight["source"] == "vllm-serve sweep.json line 2"
    after = (tmp_path / "both" / "data" / "measurements.csv").read_text().splitlines()
    assert after[0] == before[0] + ",concurrency"
    assert after[1:len(before)] == [line + "," for line in before[1:]]
    assert after[-1].endswith(",8") and after[-2].endswith(",")
    (row,), _ = imported_rows(work, *argv, "--single-stream-only")
    assert row["tok_s"] == float(f"{1000 / raw['median_tpot_ms']:.6g}")
    assert row["source"] == "vllm-serve sweep.json line 1"
    assert "concurrency" not in (work / "data" / "measurements.csv").read_text().split("\n")[0]


def test_a_block_the_file_contradicts_is_refused(work, tmp_path):
    """The vLLM fixture drafted 3,906 tokens in 1,302 drafts: 3 per step. `--block 5` made a
    row at M = 6 (audit); a run whose every request failed (completed 0) was imported too."""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "serve.json"
    src.write_text(json.dumps(raw))
    argv = ["--from-bench", str(src), "--hardware", "b300", "--gpus", "8", "--engine", "vllm",
            "--method", "eagle3"]
    err = one_error(work, *argv, "--block", "5")
    assert ("the file drafted 3 tokens per step (spec_decode_draft_tokens / "
            "spec_decode_num_drafts), but --block is 5 (fix: give --block 3") in err
    (row,), _ = imported_rows(Path(shutil.copytree(work, tmp_path / "ok")), *argv, "--block", "3")
    assert row["verify_tokens"] == 4
    src.write_text(json.dumps(dict(raw, completed=0)))
    assert "completed 0: no request finished" in one_error(work, *argv, "--block", "3")


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
    err = one_error(work, "--from-bench", str(BENCH / "vllm_latency.json"), *VLLM,
                    "--method", "ar")
    assert "batch_size is unknown" in err and "pass the run's --batch-size and --output-len" in err
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / "vllm_latency.json"),
                           *VLLM, "--method", "ar", "--batch-size", "1", "--output-len", "128",
                           "--input-len", "512")
    assert code == 0, err
    (row,) = new_rows(work)
    avg = json.loads((BENCH / "vllm_latency.json").read_text())["avg_latency"]
    # --input-len 512, --output-len 128: the decode reads 512 + 128 / 2 on average
    assert row["tok_s"] == f"{128 / avg:.6g}" and row["context_tokens"] == "576"


def test_vllm_latency_flags_are_refused_for_another_tools_file(work, tmp_path):
    """--batch-size 8 --input-len 99 with an SGLang serving file appended the file's
    single-stream row at its own context 1024, the flags dropped without a word."""
    src = first_line(BENCH / "sglang_serving.jsonl", tmp_path / "eagle.jsonl")
    err = one_error(work, "--from-bench", str(src), *CONFIG, "--method", "eagle3", "--block",
                    "3", "--batch-size", "8", "--input-len", "99")
    assert err == (f"ddtree-bayes: error: {src}: --batch-size, --input-len apply only to vllm "
                   "bench latency output, and this is sglang.bench_serving output "
                   "(sglang-serving), which records its own run (fix: drop --batch-size, "
                   "--input-len (--context sets the context))\n")
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), "--engine",
                    "llama.cpp", "--method", "ar", "--gpus", "1", "--output-len", "5")
    assert err.endswith(": --output-len applies only to vllm bench latency output, and this is "
                        "llama-bench output (llama-bench), which records its own run (fix: drop "
                        "--output-len)\n")


def test_vllm_latency_side_file_gives_the_flags_and_accept_comes_from_the_flag(work):
    err = one_error(work, "--from-bench", str(BENCH / "vllm_latency_eagle3.json"), *VLLM,
                    "--method", "eagle3", "--block", "3")
    assert "records no acceptance length" in err and "pass --accept" in err
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / "vllm_latency_eagle3.json"),
                           *VLLM, "--method", "eagle3", "--block", "3", "--accept", "2.6")
    assert code == 0, err
    (row,) = new_rows(work)
    # input_len 1024 and output_len 128 from the side file: 1024 + 64
    assert row["accept_len"] == "2.6" and row["context_tokens"] == "1088"
    assert row["model"] == "llama-3.1-8b-instruct"   # the side file's args.model


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


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be"])
def test_a_utf16_file_with_a_bom_is_read_as_its_text(work, tmp_path, codec):
    """Windows PowerShell 5's `>` writes UTF-16 LE with a byte-order mark: it was refused as
    "not UTF-8 text (byte 0)", pointing at the wrong fix. A UTF-16 file (LE or BE) with its
    BOM is decoded: the same row as the UTF-8 file's (test_sglang_serving_...)."""
    line = (BENCH / "sglang_serving.jsonl").read_text().splitlines()[0] + "\r\n"
    src = tmp_path / "eagle.jsonl"
    src.write_bytes((b"\xfe\xff" if codec == "utf-16-be" else b"") + line.encode(codec))
    assert src.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")
    code, out, err = run_cli(work, "add", "--from-bench", str(src), *CONFIG,
                             "--method", "eagle3", "--block", "3")
    assert code == 0, err
    (row,) = new_rows(work)
    assert row["tok_s"] == "401.208" and row["accept_len"] == "3.4172"
    assert row["context_tokens"] == "1280" and row["source"] == "sglang-serving eagle.jsonl record 1"


def test_a_utf16_file_that_does_not_decode_says_to_resave_it_as_utf8(work, tmp_path):
    (tmp_path / "odd.json").write_bytes(b"\xff\xfe{\x00\x00")   # a BOM, then 3 bytes
    err = one_error(work, "--from-bench", str(tmp_path / "odd.json"), *CONFIG, "--method", "ar")
    assert err == (f"ddtree-bayes: error: {tmp_path / 'odd.json'}: not UTF-16 text though it "
                   "starts with a UTF-16 byte-order mark (byte 4) (fix: re-save the file as "
                   "UTF-8, e.g. PowerShell's `Out-File -Encoding utf8`)\n")


def test_errors_are_one_line(work, tmp_path):
    (tmp_path / "bin.json").write_bytes(b"{\xff\x00")
    assert "not UTF-8 text" in one_error(work, "--from-bench", str(tmp_path / "bin.json"),
                                         *CONFIG, "--method", "ar")
    assert "cannot read the file" in one_error(work, "--from-bench", str(tmp_path / "no.json"),
                                               *CONFIG, "--method", "ar")
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), *CONFIG,
                    "--method", "ar", "--bench-format", "vllm-serve")
    assert "llama_bench.json, record 1: --bench-format vllm-serve, but this is llama-bench output" in err
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), "--engine", "llama.cpp")
    assert "--from-bench needs --method, the data's name of the decoding method" in err
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), *CONFIG,
                    "--method", "ar", "--tok-s", "5")
    assert "--tok-s comes from the --from-bench file" in err
    assert "only applies to --from-bench" in one_error(work, *CONFIG, "--bench-records", "1")
    err = one_error(work, "--from-bench", str(BENCH / "llama_bench.json"), "--engine", "llama.cpp",
                    "--method", "ar", "--bench-records", "7")
    assert "llama_bench.json: no record 7 in the file (it holds records 1-3)" in err


def test_the_same_file_twice_is_a_duplicate(work):
    """The same file twice is one run twice: refused by its result (the notes' `bench result
    <id>`), with or without --allow-duplicate, which is for a true repeat (another run that
    measured the same numbers); before, --allow-duplicate appended it as 'repeat of row 4'."""
    argv = ["--from-bench", str(BENCH / "llama_bench.json"), "--model", "llama-3.1-8b-instruct",
            "--gpus", "1", "--engine", "llama.cpp", "--method", "ar"]
    assert run_cli(work, "add", *argv)[0] == 0
    notes = [r["notes"] for r in new_rows(work)]
    assert all("; model in the file: /models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf; GPU in the "
               "file: NVIDIA H100 80GB HBM3" in n for n in notes)
    ids = [n.split("; bench result ")[1][:12] for n in notes]
    for extra in ([], ["--allow-duplicate"]):
        code, _, err = run_cli(work, "add", *argv, *extra)
        assert code == 2 and "2 problems, nothing appended" in err
        # each record is named at the row it would be (both said "row 6": a refused record
        # did not move the next one on)
        assert (f"record 2), row 6: the same benchmark result as row 4 (bench result {ids[0]}):"
                " imported again, one run would count as two (fix: it is in the data already; "
                "to import it with other flags, delete row 4 first)") in err
        assert f"record 3), row 7: the same benchmark result as row 5 (bench result {ids[1]})" in err
    assert len(new_rows(work)) == 2


def test_a_vllm_latency_result_again_with_other_flags_is_a_duplicate(work):
    """vllm bench latency's JSON records latencies only: its tok/s and context come from
    --output-len, --batch-size and --input-len. The result's id hashed the row those flags made,
    so the same file imported again with --output-len 256 (tok/s 250.6 where the run measured
    125.3) or --input-len 1024 was another result: one run appended three times, two of them
    with numbers it never measured, exit 0. Its id is the file's own measurement (avg_latency,
    the latencies, what the run's args record), so any flags name the same result; the fix
    says to delete the first row to import it with other flags."""
    argv = ["--from-bench", str(BENCH / "vllm_latency.json"), *VLLM, "--method", "ar",
            "--batch-size", "1"]
    code, _, err = run_cli(work, "add", *argv, "--output-len", "128", "--input-len", "512")
    assert code == 0, err
    (row,) = new_rows(work)
    rid = row["notes"].split("; bench result ")[1][:12]
    for other in (["--output-len", "256", "--input-len", "512"],
                  ["--output-len", "128", "--input-len", "1024"]):
        err = one_error(work, *argv, *other)
        assert (f"record 1), row 5: the same benchmark result as row 4 (bench result {rid}): "
                "imported again, one run would count as two (fix: it is in the data already; "
                "to import it with other flags, delete row 4 first)") in err
    assert len(new_rows(work)) == 1


def test_rows_of_an_imported_result_merged_from_another_file_are_a_duplicate(work, tmp_path):
    """Two people import the same result file (under their own names) into their own
    measurement files; merging one into the other with `add --from` appended the row again,
    its `bench result <id>` the same but its source naming the other file name: one run
    counted twice, exit 0 and not a word, where `add --from-bench` of the renamed copy is
    refused. A row whose notes name a result the data holds is refused the same way, and so
    is a file holding two (a merge by hand: `fit` reads it)."""
    renamed = tmp_path / "my_run.json"
    shutil.copy(BENCH / "vllm_serve.json", renamed)
    argv = [*VLLM, "--gpus", "8", "--method", "eagle3", "--block", "3"]
    assert run_cli(work, "add", "--from-bench", str(BENCH / "vllm_serve.json"), *argv)[0] == 0
    (row,) = new_rows(work)
    rid = row["notes"].split("; bench result ")[1][:12]
    theirs = tmp_path / "theirs.csv"
    data = work / "data" / "measurements.csv"
    header = data.read_text().splitlines()[0]
    assert run_cli(work, "add", "--from-bench", str(renamed), *argv, "--data", str(theirs))[0] == 0
    assert theirs.read_text().splitlines()[0] == header
    err = one_error(work, "--from", str(theirs))
    assert (f"{theirs}, row 2: the same benchmark result as row 4 (bench result {rid}): "
            "imported again, one run would count as two (fix: it is in the data already; ") in err
    merged = work / "merged.csv"
    merged.write_text(data.read_text() + theirs.read_text().splitlines()[1] + "\n")
    code, _, err = run_cli(work, "fit", "--data", str(merged))
    assert code == 2 and err.count("\n") == 1, err
    assert (f"{merged}, row 5, column 'notes': the same benchmark result as row 4 (bench result "
            f"{rid}): one run would count as two (fix: delete one of the two rows)") in err


def test_a_measurement_file_naming_one_result_twice_is_refused_with_a_fix_that_applies(
        work, tmp_path):
    """`add --from` a file whose two rows name one benchmark result was refused with the fix
    of a --from-bench import ("import each result once (--bench-records picks records)"), a
    flag --from has nothing to do with: the fix is to delete one of the two rows."""
    theirs = tmp_path / "theirs.csv"
    argv = [*VLLM, "--gpus", "8", "--method", "eagle3", "--block", "3", "--data", str(theirs)]
    assert run_cli(work, "add", "--from-bench", str(BENCH / "vllm_serve.json"), *argv)[0] == 0
    lines = theirs.read_text().splitlines()
    theirs.write_text("\n".join([*lines, lines[1]]) + "\n")
    rid = lines[1].split("bench result ")[1][:12]
    err = one_error(work, "--from", str(theirs))
    assert (f"{theirs}, row 3: the same benchmark result as row 2 of {theirs} (bench result "
            f"{rid}): imported again, one run would count as two (fix: delete one of the two "
            f"rows from {theirs})") in err, err
    assert "--bench-records" not in err


# ---------------------------------------------------------------- the file's model and GPU
README_FILES = {  # where the tg128 record is, and its avg_ts as the data file keeps it (6 digits)
    "llama_bench_readme.json": ("record 2", 118.882),      # avg_ts 118.881588
    "llama_bench_readme.jsonl": ("line 2", 119.845),       # avg_ts 119.844681
    "llama_bench_readme.csv": ("line 3", 119.915)}         # avg_ts 119.915244
README_MODEL = "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
#: A card for the README's model, for the tests only (its GPU, the RTX 4080, is built in).
QWEN_CARD = ('qwen2.5-7b-instruct,7.62,7.62,28,3584,,,,2,bf16,57344,"GQA 28 q heads / 4 kv heads, '
             'head_dim 128",Qwen/Qwen2.5-7B-Instruct config.json (a test card),\n')
README_FLAGS = ["--engine", "llama.cpp", "--method", "ar", "--gpus", "1"]


def with_cards(work: Path, *, qwen: bool = True) -> list[str]:
    """Give ``work`` the bundled cards (plus the README model's); the flags that name the
    workdir's hardware table."""
    from ddtree_bayes.core.paths import bundled

    cards = bundled("models.csv").read_text()
    (work / "data" / "models.csv").write_text(cards + (QWEN_CARD if qwen else ""))
    return ["--hardware-file", str(work / "data" / "hardware.csv")]


@pytest.mark.parametrize("name", list(README_FILES))
def test_llama_cpp_readme_outputs_import_as_the_model_and_gpu_they_name(work, name):
    """llama.cpp's README: a real run of Qwen2.5-7B-Instruct Q4_K_M on an RTX 4080. With a
    card and a hardware row of those names it lands as them (it used to land as the data
    file's kimi-k2.6 with --hardware's GPU)."""
    table = with_cards(work)
    where, avg_ts = README_FILES[name]
    rows, err = imported_rows(work, "--from-bench", str(BENCH / name), *README_FLAGS, *table)
    (row,) = rows
    assert {k: row[k] for k in ("model", "hardware", "gpus", "engine", "method", "accept_len",
                                "context_tokens", "tok_s", "source")} == {
        "model": "qwen2.5-7b-instruct", "hardware": "rtx-4080", "gpus": 1, "engine": "llama.cpp",
        "method": "ar", "accept_len": 1.0, "context_tokens": 64, "tok_s": avg_ts,   # tg128
        "source": f"llama-bench {name} {where}"}
    assert row["notes"].endswith(f"; model in the file: {README_MODEL}; GPU in the file: NVIDIA "
                                 "GeForce RTX 4080")
    (data_row,) = new_rows(work)
    assert (data_row["model"], data_row["hardware"], data_row["tok_s"]) == (
        "qwen2.5-7b-instruct", "rtx-4080", f"{avg_ts:g}")


@pytest.mark.parametrize("name", list(README_FILES))
def test_a_model_without_a_card_needs_model_and_is_checked_against_it(work, name):
    table = with_cards(work, qwen=False)
    src = str(BENCH / name)
    where = README_FILES[name][0]
    err = one_error(work, "--from-bench", src, *README_FLAGS, *table)
    assert err.startswith(f"ddtree-bayes: error: {src}, {where}: the file's model '{README_MODEL}' "
                          "matches no card in data/models.csv (compared as "
                          "qwen2.5-7b-instruct-q4_k_m / qwen2.5-7b-instruct) (fix: say which card "
                          "it is with --model <card> (cards: deepseek-r1, ")
    # a card of a clearly different size: refused with both names
    err = one_error(work, "--from-bench", src, *README_FLAGS, *table, "--model", "kimi-k2.6")
    assert err == (f"ddtree-bayes: error: {src}, {where}: the file's model '{README_MODEL}' has "
                   "7.62B parameters (model_n_params), but --model kimi-k2.6's card 1000B (fix: "
                   "give the card of the model the file ran with --model, or add its card to "
                   "data/models.csv first)\n")
    # --model maps the name to a card of a size that agrees (7.62B, 8.19B): the user's call,
    # and the file's name stays in the notes
    (row,), _ = imported_rows(work, "--from-bench", src, *README_FLAGS, *table, "--model",
                              "qwen3-8b")
    assert row["model"] == "qwen3-8b" and f"model in the file: {README_MODEL}" in row["notes"]


def test_a_model_flag_naming_another_card_than_the_files_is_refused(work):
    table = with_cards(work)
    src = str(BENCH / "llama_bench_readme.json")
    err = one_error(work, "--from-bench", src, *README_FLAGS, *table, "--model", "kimi-k2.6")
    assert err == (f"ddtree-bayes: error: {src}, record 2: the file's model '{README_MODEL}' is "
                   "card qwen2.5-7b-instruct, but --model kimi-k2.6 (fix: drop --model (the "
                   "file's model is used), or import the file of the kimi-k2.6 run)\n")
    (row,), _ = imported_rows(work, "--from-bench", src, *README_FLAGS, *table, "--model",
                              "qwen2.5-7b-instruct")
    assert row["model"] == "qwen2.5-7b-instruct"


def test_the_files_gpu_is_checked_against_the_hardware_table_and_flag(work, tmp_path):
    # the README's run, as if made on a GPU that is not built in (a GTX 1080 Ti)
    src = str(tmp_path / "llama_bench_1080ti.json")
    Path(src).write_text((BENCH / "llama_bench_readme.json").read_text().replace(
        "NVIDIA GeForce RTX 4080", "NVIDIA GeForce GTX 1080 Ti"))
    table = with_cards(work)
    err = one_error(work, "--from-bench", src, *README_FLAGS, *table)
    assert err.startswith(f"ddtree-bayes: error: {src}, record 2: the file ran on 'NVIDIA GeForce "
                          "GTX 1080 Ti', which is no name in the hardware table (fix: say which it "
                          "is with --hardware (names: ")
    err = one_error(work, "--from-bench", src, *README_FLAGS, *table, "--hardware", "rtx-5090")
    assert err == (f"ddtree-bayes: error: {src}, record 2: the file ran on 'NVIDIA GeForce GTX "
                   "1080 Ti', not on a rtx-5090 (fix: give the GPU the file ran on with "
                   "--hardware, or add it to data/hardware.csv (or --hardware-file))\n")
    src = str(BENCH / "llama_bench_readme.json")
    err = one_error(work, "--from-bench", src, *README_FLAGS, *table, "--hardware", "h100")
    assert err == (f"ddtree-bayes: error: {src}, record 2: the file ran on 'NVIDIA GeForce RTX "
                   "4080' (hardware rtx-4080), but --hardware h100 (fix: drop --hardware (the "
                   "file's GPU is used), or import the file of the h100 run; a row of your own "
                   "edition of rtx-4080, `hardware add NAME --like rtx-4080`, is taken as "
                   "--hardware NAME)\n")


def test_a_file_of_your_own_edition_of_its_gpu_imports_under_your_gpu(work, tmp_path):
    """`hardware add h100-oc --like h100 --mem-bw-tb-s 3.9` is the documented row of a memory
    overclock; its llama-bench file still says 'NVIDIA H100 80GB HBM3'. `--hardware h100-oc`
    was refused ("the file ran on ... (hardware h100), but --hardware h100-oc (fix: drop
    --hardware (the file's GPU is used) ...)"), and the fix filed the run under the stock
    h100 (3.35 TB/s) without a word: a fit then prices its steps at the wrong bandwidth. A row
    of yours copied from the file's GPU (hardware add's "as h100" source, through another of
    yours too) is that GPU's edition: the rows land under it, the file's numbers unchanged
    (150.62 and 127.493 tok/s, as under h100); a GPU of yours copied from another is refused
    as before."""
    src = str(BENCH / "llama_bench.json")
    argv = ["--from-bench", src, "--gpus", "1", "--model", "llama-3.1-8b-instruct", "--engine",
            "llama.cpp", "--method", "ar"]
    for name, like in (("h100-oc", "h100"), ("h100-oc2", "h100-oc"), ("mine", "b200")):
        code, _, err = run_cli(work, "hardware", "add", name, "--like", like, "--mem-bw-tb-s",
                               "3.9", "--source", "memory +10%")
        assert code == 0, err
    other = Path(shutil.copytree(work, tmp_path / "other"))   # (one import of a file each)
    for where, name in ((work, "h100-oc"), (other, "h100-oc2")):
        code, _, err = run_cli(where, "add", *argv, "--hardware", name)
        assert code == 0, err
        assert [(r["hardware"], r["tok_s"], r["context_tokens"]) for r in new_rows(where)] == [
            (name, "150.62", "64"), (name, "127.493", "4160")]
    err = one_error(work, *argv, "--hardware", "mine")
    assert err == (f"ddtree-bayes: error: {src}, record 2: the file ran on 'NVIDIA H100 80GB "
                   "HBM3' (hardware h100), but --hardware mine (fix: drop --hardware (the "
                   "file's GPU is used), or import the file of the mine run; a row of your own "
                   "edition of h100, `hardware add NAME --like h100`, is taken as --hardware "
                   "NAME)\n")


def test_the_docs_vllm_example_lands_as_the_model_it_ran(work):
    """docs/cli.md's vLLM example, a Llama-3.1-8B-Instruct run, used to land as kimi-k2.6."""
    src = str(BENCH / "vllm_serve.json")
    argv = ["--from-bench", src, "--hardware", "b300", "--engine", "vllm", "--method", "eagle3",
            "--block", "3"]
    err = one_error(work, *argv, "--model", "kimi-k2.6")
    assert err == (f"ddtree-bayes: error: {src}, record 1: the file's model "
                   "'meta-llama/Llama-3.1-8B-Instruct' is card llama-3.1-8b-instruct, but --model "
                   "kimi-k2.6 (fix: drop --model (the file's model is used), or import the file of "
                   "the kimi-k2.6 run)\n")
    # a vLLM serve JSON records no GPU count: kimi-k2.6's 8 B300 are another model's
    err = one_error(work, *argv)
    assert err == (f"ddtree-bayes: error: {src} (vllm-serve, record 1), row 4, column 'gpus': "
                   "no llama-3.1-8b-instruct row on b300 in data/measurements.csv to take the "
                   "GPU count from (only kimi-k2.6's: another model's count is no default) "
                   "(fix: pass --gpus N, the GPUs the run used)\n")
    code, out, err = run_cli(work, "add", *argv, "--gpus", "8")
    assert code == 0 and err == "", err
    # (a chain's budget is its depth: written, and shown, as 3)
    assert "  row 4: llama-3.1-8b-instruct, b300 x8 vllm eagle3 b3/B3 M=4 ctx 1280 accept 3.14593: " in out
    (row,) = new_rows(work)
    assert (row["model"], row["hardware"], row["gpus"]) == ("llama-3.1-8b-instruct", "b300", "8")


#: The user's card of Qwen3-30B-A3B's FP8 checkpoint, as `card add --hf-config` writes it from
#: the published config.json (30,532,122,624 parameters; 3,353,032,704 active, the input
#: embedding counted whole; e4m3 weights with a fp32 scale per 128 x 128 block, embedding,
#: lm_head, router and norms bf16: 1.1896 bytes over the active weights).
FP8_CARD = ('my-qwen3-30b-a3b-fp8,30.5321,3.353,48,2048,128,8,0,1.1896,fp8,98304,"GQA 32 q heads '
            '/ 4 kv heads, head_dim 128",Qwen3-30B-A3B-FP8/config.json (a test card),,40960,1.021,,\n')


def test_a_quantised_checkpoints_own_card_is_taken_with_model(work, tmp_path):
    """A vLLM run of Qwen/Qwen3-30B-A3B-FP8: without its tag the name is the bundled card
    qwen3-30b-a3b (bf16, 2 bytes per weight). `--model` naming the user's card of the FP8
    checkpoint was refused ("drop --model"), and without it the run landed as the bf16 card,
    whose warning (weights that do not fit) says to give the quantisation its own card and
    name it with --model: no way in for the right card. A card of the same size (a
    quantisation of the model the name says) is taken; another size, or a name that is a card
    exactly, is still refused."""
    table = with_cards(work, qwen=False)
    with open(work / "data" / "models.csv", "a") as fh:
        fh.write(FP8_CARD)
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    argv = ["--hardware", "h100", "--gpus", "1", "--engine", "vllm", "--method", "eagle3",
            "--block", "3", *table]
    for name, model_id in (("fp8", "Qwen/Qwen3-30B-A3B-FP8"), ("bf16", "Qwen/Qwen3-30B-A3B")):
        (tmp_path / f"{name}.json").write_text(json.dumps(
            {**raw, "model_id": model_id, "tokenizer_id": model_id}))
    fp8, bf16 = str(tmp_path / "fp8.json"), str(tmp_path / "bf16.json")
    err = one_error(work, "--from-bench", fp8, *argv, "--model", "kimi-k2.6")
    assert err == (f"ddtree-bayes: error: {fp8}, record 1: the file's model "
                   "'Qwen/Qwen3-30B-A3B-FP8' is card qwen3-30b-a3b, but --model kimi-k2.6 (fix: "
                   "drop --model (the file's model is used), or import the file of the kimi-k2.6 "
                   "run)\n")
    err = one_error(work, "--from-bench", bf16, *argv, "--model", "my-qwen3-30b-a3b-fp8")
    assert "the file's model 'Qwen/Qwen3-30B-A3B' is card qwen3-30b-a3b, but --model " \
           "my-qwen3-30b-a3b-fp8" in err
    (row,), err = imported_rows(work, "--from-bench", fp8, *argv, "--model",
                                "my-qwen3-30b-a3b-fp8")
    assert row["model"] == "my-qwen3-30b-a3b-fp8"
    assert row["notes"].endswith("; model in the file: Qwen/Qwen3-30B-A3B-FP8")
    # 1000 / median_tpot_ms, the file's acceptance
    assert (row["tok_s"], row["accept_len"]) == (float(f"{1000 / raw['median_tpot_ms']:.6g}"),
                                                 pytest.approx(3.14593, abs=1e-5))
    (data_row,) = new_rows(work)
    assert data_row["model"] == "my-qwen3-30b-a3b-fp8"


def test_a_quantised_name_matched_to_a_card_of_other_bytes_is_said(work, tmp_path):
    """An audit: a vLLM run of Qwen/Qwen3-30B-A3B-FP8 without --model lands, silently, as
    the bundled bf16 card qwen3-30b-a3b (2 bytes per weight) on a GPU that holds its bf16
    weights, so a fit prices twice the bytes the run read. The name's tag says ~8 bits per
    weight against the card's 16: kept, as llama-bench's own byte count already is, but said
    in one line with the fix. A name that is the card itself, or whose tag agrees with the
    card's bytes, says nothing."""
    table = with_cards(work, qwen=False)
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    argv = ["--hardware", "h100", "--gpus", "1", "--engine", "vllm", "--method", "eagle3",
            "--block", "3", *table]
    for name, model_id in (("fp8", "Qwen/Qwen3-30B-A3B-FP8"), ("bf16", "Qwen/Qwen3-30B-A3B"),
                           ("tagged_bf16", "Qwen/Qwen3-30B-A3B-BF16")):
        (tmp_path / f"{name}.json").write_text(json.dumps(
            {**raw, "model_id": model_id, "tokenizer_id": model_id}))
    fp8 = str(tmp_path / "fp8.json")
    (row,), err = imported_rows(work, "--from-bench", fp8, *argv)
    assert row["model"] == "qwen3-30b-a3b"
    assert err == (f"ddtree-bayes: warning: {fp8}: the file's model 'Qwen/Qwen3-30B-A3B-FP8' "
                   "is a quantisation (FP8: ~8 bits per weight) and card qwen3-30b-a3b's "
                   "checkpoint is 2 bytes per weight (16 bits), 2x: kept as qwen3-30b-a3b, but "
                   "a fit prices the card's bytes_per_weight, 2, not the run's (give the "
                   "quantisation its own card, `ddtree-bayes card add --hf-config config.json "
                   "--name NAME`, and import it with --model NAME)\n")
    for name in ("bf16", "tagged_bf16"):
        (row,), err = imported_rows(work, "--from-bench", str(tmp_path / f"{name}.json"), *argv,
                                    "--allow-duplicate")
        assert row["model"] == "qwen3-30b-a3b" and err == "", err


def test_a_quantised_checkpoints_own_card_is_not_told_to_make_one(work, tmp_path):
    """A review: a vLLM run of RedHatAI/Qwen3-Coder-Next-NVFP4 imported as the card `card add
    --hf-config` made of that very checkpoint (named as the file names it) was warned that it
    "is a quantisation (NVFP4: ~4.25 bits per weight) of card qwen3-coder-next-nvfp4, whose
    bytes_per_weight is 1.2625 (10.1 bits), 2.4x", and told to do what it had done: the tag
    was held against ``bytes_per_weight``, the average over the weights a token reads (in
    this small-active MoE mostly the bf16 attention, router and lm_head), not against the
    checkpoint's, 0.5965 bytes (4.77 bits, 1.12x), which llama-bench's byte count is held
    against. A name that is its card says nothing; a card named with --model is held against
    its checkpoint's bytes."""
    from ddtree_bayes.core.bench_import.reading import BenchRecord
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.workflows.living.bench import _tagged_quantisation

    table = with_cards(work, qwen=False)
    config = Path(__file__).resolve().parent / "fixtures" / "cards" / "qwen3-coder-next-nvfp4"
    code, _, err = run_cli(work, "card", "add", "--hf-config", str(config / "config.json"),
                           "--name", "qwen3-coder-next-nvfp4")
    assert code == 0, err
    card = dict(load_model_cards(work / "data" / "models.csv"))["qwen3-coder-next-nvfp4"]
    # (1.1981 over the weights a token reads since it reads one row of the bf16 input
    # embedding: tests/test_cards.py; 1.2625 over every active weight before)
    assert (card.bytes_per_weight, card.file_bytes_per_weight) == (1.1981, 0.5965)
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    name = "RedHatAI/Qwen3-Coder-Next-NVFP4"
    src = tmp_path / "nvfp4.json"
    src.write_text(json.dumps({**raw, "model_id": name, "tokenizer_id": name}))
    (row,), err = imported_rows(work, "--from-bench", str(src), "--hardware", "h100", "--gpus",
                                "1", "--engine", "vllm", "--method", "eagle3", "--block", "3",
                                *table)
    assert row["model"] == "qwen3-coder-next-nvfp4" and err == "", err
    # the same card under another name (--model): its checkpoint's 4.77 bits against ~4.25
    rec = BenchRecord(tok_s=300.0, accept_len=None, context_tokens=None, batch_size=1,
                      model=name, notes="", index=1)
    assert _tagged_quantisation(src, rec, "my-coder", card) is None
    # a card of other bytes is still said, by its checkpoint's bytes
    bf16 = dataclasses.replace(card, bytes_per_weight=2.0, file_bytes_per_weight=1.9)
    said = _tagged_quantisation(src, rec, "my-coder", bf16)
    assert said is not None and "card my-coder's checkpoint is 1.9 bytes per weight" in said


def test_a_defaulted_gpu_count_is_the_same_models_and_says_where_it_came_from(work):
    """The walkthrough: `add --from-bench vllm_serve.json --hardware h200 ...` wrote
    llama-3.1-8b-instruct on h200 x8, the 8 taken from kimi-k2.6's H200 rows, without a word.
    A count is defaulted only from the same model's rows on that hardware, and said."""
    assert run_cli(work, "add", "--hardware", "h200", "--gpus", "8", "--engine", "sglang",
                   "--method", "ar", "--accept", "1", "--tok-s", "112", "--source", "walk")[0] == 0
    src = str(BENCH / "vllm_serve.json")
    argv = ["--from-bench", src, "--hardware", "h200", "--engine", "vllm", "--method", "eagle3",
            "--block", "3"]
    err = one_error(work, *argv)
    assert ("row 5, column 'gpus': no llama-3.1-8b-instruct row on h200 in "
            "data/measurements.csv to take the GPU count from (only kimi-k2.6's") in err
    # kimi-k2.6's own rows: defaulted, and said (stderr; the JSON's warnings)
    eagle = ["add", "--hardware", "h200", "--engine", "sglang", "--method", "eagle3", "--block",
             "3", "--accept", "2.6", "--source", "walk"]
    code, out, err = run_cli(work, *eagle, "--tok-s", "195")
    assert code == 0, err
    assert err == ("ddtree-bayes: warning: row 5: --gpus not given: 8, the GPU count of "
                   "kimi-k2.6's h200 row in data/measurements.csv (row 4); pass --gpus N if the "
                   "run used another\n")
    code, out, err = run_cli(work, *eagle, "--tok-s", "196", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [
        "row 6: --gpus not given: 8, the GPU count of kimi-k2.6's h200 rows in "
        "data/measurements.csv (rows 4, 5); pass --gpus N if the run used another"]
    assert [r["gpus"] for r in new_rows(work)] == ["8", "8", "8"]


def two_models(folder: Path) -> Path:
    """`llama-bench -m Qwen2.5-7B... -m Llama-3.1-8B... -o json`: the README's two records, then
    the same two tests of a Llama-3.1-8B-Instruct Q4_K_M (model fields changed, numbers kept)."""
    qwen = json.loads((BENCH / "llama_bench_readme.json").read_text())
    llama = [dict(r, model_filename="models/Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                  model_type="llama 8B Q4_K - Medium", model_n_params=8030261312) for r in qwen]
    path = folder / "two_models.json"
    path.write_text(json.dumps(qwen + llama, indent=2))
    return path


def test_a_two_model_file_is_never_one_configuration(work, tmp_path):
    src = two_models(tmp_path)
    table = with_cards(work, qwen=False)
    models = (f"('{README_MODEL}': record 2; 'models/Llama-3.1-8B-Instruct-Q4_K_M.gguf': "
              "record 4)")
    err = one_error(work, "--from-bench", str(src), *README_FLAGS, *table)
    assert err == (f"ddtree-bayes: error: {src}: the records are runs of 2 models {models}; not every one "
                   "is a name of data/models.csv (fix: import one at a time: --bench-records 2 "
                   "--model <name>, and so on)\n")
    err = one_error(work, "--from-bench", str(src), *README_FLAGS, *table, "--model", "qwen3-8b")
    assert err == (f"ddtree-bayes: error: {src}: the records are runs of 2 models {models}; one --model "
                   "qwen3-8b cannot be all of them (fix: import one at a time: --bench-records 2 "
                   "--model <name>, and so on)\n")
    (row,), _ = imported_rows(work, "--from-bench", str(src), *README_FLAGS, *table,
                              "--bench-records", "1-2", "--model", "qwen3-8b")
    assert (row["model"], row["tok_s"]) == ("qwen3-8b", 118.882)


def test_a_two_model_file_whose_models_are_both_cards_is_split(work, tmp_path):
    src = two_models(tmp_path)
    rows, _ = imported_rows(work, "--from-bench", str(src), *README_FLAGS, *with_cards(work))
    assert [(r["model"], r["tok_s"], r["source"]) for r in rows] == [
        ("qwen2.5-7b-instruct", 118.882, "llama-bench two_models.json record 2"),
        ("llama-3.1-8b-instruct", 118.882, "llama-bench two_models.json record 4")]


def test_a_file_of_two_gpus_is_split_or_refused(work, tmp_path):
    """Two llama-bench runs appended to one file, one on an RTX 4080, one on an H100."""
    qwen = json.loads((BENCH / "llama_bench_readme.json").read_text())[1]
    src = tmp_path / "two_gpus.jsonl"
    src.write_text(json.dumps(qwen) + "\n" + json.dumps(dict(qwen, gpu_info="NVIDIA H100 80GB HBM3"))
                   + "\n")
    table = with_cards(work)
    err = one_error(work, "--from-bench", str(src), *README_FLAGS, *table, "--hardware", "h100")
    assert err == (f"ddtree-bayes: error: {src}: the records ran on 2 different GPUs ('NVIDIA "
                   "GeForce RTX 4080': line 1; 'NVIDIA H100 80GB HBM3': line 2); one --hardware "
                   "h100 cannot be all of them (fix: import one at a time: --bench-records 1 "
                   "--hardware <name>, and so on)\n")
    rows, _ = imported_rows(work, "--from-bench", str(src), *README_FLAGS, *table)
    assert [(r["hardware"], r["source"]) for r in rows] == [
        ("rtx-4080", "llama-bench two_gpus.jsonl line 1"), ("h100", "llama-bench two_gpus.jsonl line 2")]


@pytest.mark.parametrize(("key", "values"), [("n_gpu_layers", (10, 99)), ("flash_attn", (0, 1))])
def test_a_file_mixing_gpu_layers_or_flash_attention_is_refused(work, tmp_path, key, values):
    """`llama-bench -ngl 10,99` / `-fa 0,1`: the README's tg record under each setting."""
    tg = json.loads((BENCH / "llama_bench_readme.json").read_text())[1]
    src = tmp_path / "sweep.jsonl"
    src.write_text("".join(json.dumps(dict(tg, **{key: v})) + "\n" for v in values))
    table = with_cards(work)
    err = one_error(work, "--from-bench", str(src), *README_FLAGS, *table)
    assert err == (f"ddtree-bayes: error: {src}: the records differ in {key} ({key} {values[0]}: "
                   f"line 1; {key} {values[1]}: line 2), which no data column holds: imported "
                   "together they would be repeats of one configuration (fix: import one setting "
                   "at a time, e.g. --bench-records 1)\n")
    (row,), _ = imported_rows(work, "--from-bench", str(src), *README_FLAGS, *table,
                              "--bench-records", "2")
    assert row["source"] == "llama-bench sweep.jsonl line 2"
    assert f"{key} {values[1]}" in row["notes"]


def test_log_lines_before_the_json_are_skipped_with_a_note(work, tmp_path):
    from test_bench_import import VULKAN_LOG

    src = tmp_path / "bench.json"
    src.write_text(VULKAN_LOG + (BENCH / "llama_bench_readme.json").read_text())
    (row,), err = imported_rows(work, "--from-bench", str(src), *README_FLAGS, *with_cards(work))
    assert row["tok_s"] == 118.882 and row["model"] == "qwen2.5-7b-instruct"
    assert err.splitlines()[0] == (f"ddtree-bayes: note: {src}: skipped 2 lines before the JSON "
                                   "(lines 1-2): not part of the result (log output)")


# ---------------------------------------------------------------- import -> update -> predict
IMPORTS = [  # format, file, flags: three new configurations, none measured before; one
    # context each (the fixtures' made-up context sweeps imply a context cost ten times the
    # prior's, which is beside the point here)
    ("llama-bench", "llama_bench.json", ["--gpus", "8", "--engine", "llama.cpp", "--method",
                                         "ar", "--bench-records", "2"]),
    ("sglang-one-batch", "sglang_one_batch.jsonl", ["--hardware", "b200", "--gpus", "8",
                                                    "--engine", "sglang", "--method", "ar",
                                                    "--bench-records", "1"]),
    ("vllm-serve", "vllm_serve.json", ["--hardware", "h200", "--gpus", "8", "--engine", "vllm",
                                       "--method", "eagle3", "--block", "3"]),
]
#: The fit has one model, Kimi-K2.6, and a fit of one model cannot predict another; the
#: llama-bench and vLLM fixtures name Llama-3.1-8B (which the import now keeps: it would be a
#: second model, and as kimi-k2.6 it is refused). Here their runs are relabelled as Kimi-K2.6
#: runs (llama-bench's GPU as eight H200s: its gpu_info lists the devices it ran on, and one
#: of them would not be the --gpus 8 of IMPORTS), the numbers untouched.
AS_KIMI = {"llama_bench.json": {"model_filename": "/models/Kimi-K2.6-Q4_K_M.gguf",
                                "model_n_params": 1_000_000_000_000,
                                "gpu_info": ", ".join(["NVIDIA H200"] * 8)},
           "vllm_serve.json": {"model_id": "moonshotai/Kimi-K2.6",
                               "tokenizer_id": "moonshotai/Kimi-K2.6"}}


def as_kimi(name: str, folder: Path) -> Path:
    if name not in AS_KIMI:
        return BENCH / name
    raw = json.loads((BENCH / name).read_text())
    records = raw if isinstance(raw, list) else [raw]
    for rec in records:
        rec.update(AS_KIMI[name])
    (folder / name).write_text(json.dumps(raw))
    return folder / name


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
        code, out, err = run_cli(work, "add", "--from-bench", str(as_kimi(name, work)), *flags,
                                 "--format", "json")
        assert code == 0, err
        assert [r["model"] for r in json.loads(out)["rows"]] == ["kimi-k2.6"]
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


def test_a_context_flag_says_it_replaced_the_files_prompt_length(work):
    """--context 64k replaced the file's measured context (1024-token prompts, 512 decoded:
    1280) while the row's notes still read 'context_tokens = total_input_tokens/completed'."""
    code, _, err = run_cli(work, "add", "--from-bench", str(BENCH / "vllm_serve.json"),
                           "--hardware", "b300", "--gpus", "8", "--engine", "vllm", "--method",
                           "eagle3", "--block", "3", "--context", "65536")
    assert code == 0, err
    (row,) = new_rows(work)
    assert row["context_tokens"] == "65536"
    assert "context_tokens = --context 65536 (the file's: 1280)" in row["notes"]
    assert "total_input_tokens/completed" not in row["notes"]


def test_the_prompt_alone_warning_is_not_said_once_context_replaces_it(work, pm, tmp_path):
    """A serving file without total_output_tokens goes in at its prompt (1024), a warning
    saying the half answer is left out and to pass --context P + N/2; with --context 1536
    the warning still told the user to pass the --context they had passed."""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    del raw["total_output_tokens"]
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    argv = ["add", "--from-bench", str(path), "--hardware", "b300", "--gpus", "8", "--engine",
            "vllm", "--method", "eagle3", "--block", "3"]
    code, _, err = run_cli(work, *argv)
    assert code == 0, err
    assert err == (f"ddtree-bayes: warning: {path}, record 1: context_tokens 1024 is the prompt "
                   "alone: the file records no total_output_tokens, so the half of each answer "
                   "a decode step also reads on average is left out (pass --context P + N/2 for "
                   "P-token prompts and N-token answers)\n")
    other = Path(shutil.copytree(pm, tmp_path / "other"))
    code, _, err = run_cli(other, *argv, "--context", "1536")
    assert code == 0 and err == "", err
    assert [r["context_tokens"] for r in new_rows(work) + new_rows(other)] == ["1024", "1536"]


def test_a_tok_s_overflowing_the_step_range_is_named_in_a_few_digits(work, tmp_path):
    """A TPOT of 1e-300 ms made tok_s 8e300, written as its 301 digits by the CSV cell's
    whole-number rule, and the refusal quoted all of them. (Its TTFT and output_throughput
    agree with that TPOT, as the import checks: 512 tokens in 512e-300 ms, 1e303 tok/s.)"""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "tiny.json"
    src.write_text(json.dumps(dict(raw, median_tpot_ms=1e-300, mean_ttft_ms=1e-300,
                                   output_throughput=1e303)))
    err = one_error(work, "--from-bench", str(src), "--hardware", "b300", "--gpus", "8",
                    "--engine", "vllm", "--method", "eagle3", "--block", "3")
    assert "column 'tok_s': tok_s 1e+303 means a decoding step of 3.15e-300 ms" in err, err
    assert len(err) < 400


def test_the_gpu_count_comes_from_the_file_when_it_says(work, tmp_path):
    """A trust pass: a llama-bench run on one B300 (its gpu_info lists one device) was appended
    as b300 x8, the count of the data's Kimi-K2.6 rows, and a vLLM latency run whose args say
    tensor_parallel_size 1 likewise; --gpus 8 against either was taken as given."""
    records = json.loads((BENCH / "llama_bench.json").read_text())
    one = tmp_path / "one_b300.json"
    one.write_text(json.dumps([dict(r, gpu_info="NVIDIA B300") for r in records]))
    table = with_cards(work)
    argv = ["--from-bench", str(one), "--engine", "llama.cpp", "--method", "ar", "--model",
            "llama-3.1-8b-instruct", "--bench-records", "2", *table]
    err = one_error(work, *argv, "--gpus", "8")
    assert err == (f"ddtree-bayes: error: {one} (llama-bench, record 2): the file ran on 1 GPU "
                   "(the devices of its gpu_info), but --gpus is 8 (fix: drop --gpus (the file's "
                   "count is used), or import the file of the 8-GPU run)\n")
    (row,), _ = imported_rows(work, *argv)
    assert (row["hardware"], row["gpus"], row["tok_s"]) == ("b300", 1, 150.62)
    # two devices: both ran it, unless split_mode none put it on one
    two = tmp_path / "two_b300.json"
    for split, count in (("layer", 2), ("none", 1)):
        two.write_text(json.dumps([dict(r, gpu_info="NVIDIA B300, NVIDIA B300",
                                        split_mode=split) for r in records]))
        (row,), _ = imported_rows(work, *argv[:1], str(two), *argv[2:], "--allow-duplicate")
        assert row["gpus"] == count
    side = {"vllm_latency_eagle3.json": "lat.json", "vllm_latency_eagle3.pytorch.json": "lat.pytorch.json"}
    for name, copy in side.items():
        shutil.copy(BENCH / name, tmp_path / copy)
    (row,), _ = imported_rows(work, "--from-bench", str(tmp_path / "lat.json"), *VLLM,
                              "--method", "eagle3", "--block", "3", "--accept", "3")
    assert (row["model"], row["hardware"], row["gpus"]) == ("llama-3.1-8b-instruct", "b300", 1)


def test_a_vllm_latency_run_with_speculation_is_not_an_ar_row(work, tmp_path):
    """A trust pass: the EAGLE-3 latency run (its .pytorch.json args hold speculative_config
    eagle3, num_speculative_tokens 3) was appended as `--method ar` with acceptance 1, and as
    `--block 5`."""
    for name, copy in {"vllm_latency_eagle3.json": "lat.json",
                       "vllm_latency_eagle3.pytorch.json": "lat.pytorch.json"}.items():
        shutil.copy(BENCH / name, tmp_path / copy)
    src = tmp_path / "lat.json"
    err = one_error(work, "--from-bench", str(src), *VLLM, "--method", "ar")
    assert err == (f"ddtree-bayes: error: {src} (vllm-latency, record 1): the file's run decoded "
                   "speculatively (speculative_config method eagle3), but --method is ar (fix: "
                   "give the run's --method (and --block/--budget, and --accept), or import a run "
                   "without speculative decoding)\n")
    err = one_error(work, "--from-bench", str(src), *VLLM, "--method", "eagle3", "--block", "5",
                    "--accept", "3")
    assert err == (f"ddtree-bayes: error: {src} (vllm-latency, record 1): the file drafted 3 "
                   "tokens per step (speculative_config num_speculative_tokens), but --block is 5 "
                   "(fix: give --block 3, the run's num_speculative_tokens)\n")


def test_a_sglang_one_batch_run_is_no_speculative_row(work):
    """A trust pass: sglang.bench_one_batch runs plain decode steps (its notes said so), yet
    `--method ddtree --block 16 --budget 32 --accept 10` appended its 148 tok/s as a DDTree
    run accepting 10 tokens per step (step 67.4 ms)."""
    src = BENCH / "sglang_one_batch.jsonl"
    err = one_error(work, "--from-bench", str(src), *CONFIG, "--method", "ddtree", "--block",
                    "16", "--budget", "32", "--accept", "10", "--bench-records", "1")
    assert err == (f"ddtree-bayes: error: {src} (sglang-one-batch, line 1): sglang.bench_one_batch "
                   "runs the model's forward passes without speculative decoding, but --method "
                   "is ddtree (fix: import it with --method ar, or import the result file of a "
                   "tool that ran ddtree (e.g. sglang.bench_serving against a speculative "
                   "server))\n")


def test_a_llama_bench_run_is_no_speculative_row(work):
    """A trust pass: llama-bench's tg test decodes one token per forward pass (the tool loads
    no draft model), yet `--method eagle3 --block 3 --accept 2.5` appended its 150.62 tok/s as
    an EAGLE-3 run accepting 2.5 tokens per step (step 16.6 ms), exit 0; `--method draft-model
    --accept infer` alike. As sglang.bench_one_batch's, it is an `ar` row or none."""
    src = BENCH / "llama_bench.json"
    flags = ["--model", "llama-3.1-8b-instruct", "--bench-records", "2", *with_cards(work)]
    for method, more in (("eagle3", ["--block", "3", "--accept", "2.5"]),
                         ("draft-model", ["--block", "4", "--accept", "infer"])):
        err = one_error(work, "--from-bench", str(src), *flags, "--method", method, *more)
        assert err == (f"ddtree-bayes: error: {src} (llama-bench, record 2): llama-bench's "
                       "text-generation test decodes one token per forward pass, without "
                       "speculative decoding (it loads no draft model), but --method is "
                       f"{method} (fix: import it with --method ar, or import the result file "
                       f"of a tool that ran {method} (e.g. sglang.bench_serving against a "
                       "speculative server))\n")
    (row,), _ = imported_rows(work, "--from-bench", str(src), *flags, "--method", "ar")
    assert (row["method"], row["accept_len"], row["tok_s"]) == ("ar", 1, 150.62)


def test_a_vllm_latency_side_file_is_read_with_the_flags_too(work, tmp_path):
    """A trust pass: with --batch-size and --output-len given, the .pytorch.json beside the
    file was not read at all: the Llama-3.1-8B EAGLE-3 run (tensor_parallel_size 1) was
    appended as kimi-k2.6 (the data file's model), b300 x8, `--method ar`."""
    for name, copy in {"vllm_latency_eagle3.json": "lat.json",
                       "vllm_latency_eagle3.pytorch.json": "lat.pytorch.json"}.items():
        shutil.copy(BENCH / name, tmp_path / copy)
    src = tmp_path / "lat.json"
    flags = ["--batch-size", "1", "--output-len", "128"]
    err = one_error(work, "--from-bench", str(src), *VLLM, "--method", "ar", *flags)
    assert "the file's run decoded speculatively (speculative_config method eagle3)" in err
    (row,), _ = imported_rows(work, "--from-bench", str(src), *VLLM, "--method", "eagle3",
                              "--block", "3", "--accept", "3", *flags)
    assert (row["model"], row["hardware"], row["gpus"]) == ("llama-3.1-8b-instruct", "b300", 1)
    assert "batch_size/output_len from flags" in row["notes"]


@pytest.mark.parametrize(("setting", "problem"), [
    ({"n_gpu_layers": 0}, "n_gpu_layers 0: the weights stayed on the CPU"),
    ({"n_gpu_layers": 10}, "n_gpu_layers 10 of qwen2.5-7b-instruct's 28 layers: the weights of "
                           "the others stayed on the CPU"),
    ({"n_cpu_moe": 4}, "n_cpu_moe 4: the expert weights of those layers stayed on the CPU"),
    # -ngl equal to the layers: llama.cpp's "offloaded 28/29 layers", lm_head on the CPU
    ({"n_gpu_layers": 28}, "n_gpu_layers 28: qwen2.5-7b-instruct's 28 layers, but llama.cpp "
                           "counts the output layer as one more, so lm_head stayed on the CPU"),
    ({"tensor_buft_overrides": "exps=CPU"}, "tensor_buft_overrides 'exps=CPU': the tensors it "
                                            "names stayed on the CPU"),
    ({"no_kv_offload": True}, "no_kv_offload: the KV cache stayed in host memory"),
    # a build without a GPU backend: llama-bench's get_backend() writes "CPU" when no other
    # backend registered (a BLAS build: "BLAS"), gpu_info is empty, -ngl 99 offloads nothing
    ({"backends": "CPU", "gpu_info": ""},
     "backends 'CPU': a llama.cpp build without a GPU backend, so the CPU decoded"),
    ({"backends": "BLAS", "gpu_info": ""},
     "backends 'BLAS': a llama.cpp build without a GPU backend, so the CPU decoded")])
def test_a_run_with_weights_on_the_cpu_is_refused(work, tmp_path, setting, problem):
    """`llama-bench -ngl 0` (or -ngl 10 of 28 layers, or -ncmoe 4) with `--hardware rtx-4080`
    was appended as an RTX 4080 measurement, exit 0 (without --hardware the -ngl 0 error's fix
    asked for it): a decode reading weights from host memory, priced as the GPU's step. So was
    the run of a CPU-only build (`backends` "CPU", no gpu_info) with `--hardware rtx-4080`:
    150.62 tok/s of a CPU appended as the GPU's."""
    tg = json.loads((BENCH / "llama_bench_readme.json").read_text())[1]
    src = tmp_path / "cpu.json"
    src.write_text(json.dumps([dict(tg, **setting)]))
    table = with_cards(work)
    for hardware in (["--hardware", "rtx-4080"], []):
        err = one_error(work, "--from-bench", str(src), *README_FLAGS, *table, *hardware)
        assert err == (f"ddtree-bayes: error: {src} (llama-bench, record 1): {problem}: the step "
                       "is priced from the GPU's memory bandwidth, not the host's (fix: rerun "
                       "llama-bench with every layer on the GPU (-ngl 99, without -ncmoe, "
                       "-ot ...=CPU or -nkvo))\n")
    # every layer and the output layer on the GPU (28 + 1; -ngl -1, llama.cpp's "all"): imported
    for ngl in (29, -1):
        src.write_text(json.dumps([dict(tg, n_gpu_layers=ngl, n_cpu_moe=0)]))
        (row,), _ = imported_rows(work, "--from-bench", str(src), *README_FLAGS, *table)
        assert row["hardware"] == "rtx-4080" and row["tok_s"] == 118.882
        (work / "data" / "measurements.csv").write_text(
            (work / "data" / "measurements.csv").read_text().rsplit("\n", 2)[0] + "\n")


def test_a_configuration_the_flags_leave_underivable_names_the_flags(work):
    """`add --from-bench vllm_serve.json --method eagle3` without --block said "column
    'verify_tokens': verify_tokens is blank ... (fix: fill in verify_tokens or block)", CSV
    columns the user never wrote; the flags the row came from are named now (a tree method:
    --budget). `add` from flags alike; a CSV row keeps its columns."""
    # (the point-mass data file: a header and two B300 rows; the new row would be row 4)
    where = f"{BENCH / 'vllm_serve.json'} (vllm-serve, record 1), row 4, column 'verify_tokens'"
    err = one_error(work, "--from-bench", str(BENCH / "vllm_serve.json"), *VLLM, "--gpus", "8",
                    "--method", "eagle3")
    assert err == (f"ddtree-bayes: error: {where}: verify_tokens is blank and cannot be derived "
                   "(fix: pass --block or --verify-tokens)\n")
    err = one_error(work, "--from-bench", str(BENCH / "vllm_serve.json"), *VLLM, "--gpus", "8",
                    "--method", "eagle2")
    assert err.endswith("(fix: pass --budget or --verify-tokens)\n")
    err = one_error(work, *CONFIG, "--gpus", "8", "--method", "eagle3", "--accept", "2", "--tok-s", "300",
                    "--source", "test")
    assert err.endswith("column 'verify_tokens': verify_tokens is blank and cannot be derived "
                        "(fix: pass --block or --verify-tokens)\n")


def test_a_llama_bench_file_of_another_quantisation_than_the_card_is_warned_of(work):
    """llama-bench records its model's bytes (``model_size``) beside its parameters: the
    fixture's Llama-3.1-8B Q4_K_M takes 4,912,898,304 bytes for 8,030,261,312 parameters,
    0.612 bytes per weight. Imported with --model llama-3.1-8b-instruct, a bf16 card (2 bytes
    per weight, 8.03B x 2 = 16.1 GB), it was appended without a word, and a fit priced that
    pair's step as reading 16.1 GB where the run read 4.9 (3.3x): on an H100 the step (6.6 ms)
    is longer than either read, so no other check fires. Kept, with a warning; a card at the
    file's bytes imports it silently."""
    argv = ["--from-bench", str(BENCH / "llama_bench.json"), "--engine", "llama.cpp",
            "--method", "ar", "--gpus", "1", *with_cards(work)]
    data = work / "data" / "measurements.csv"
    before = data.read_bytes()
    code, out, err = run_cli(work, "add", *argv, "--model", "llama-3.1-8b-instruct",
                             "--format", "json")
    assert code == 0, err
    warning = (f"{BENCH / 'llama_bench.json'}: the file's model "
               "'/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf' takes 4.91 GB for 8.03B "
               "parameters (0.612 bytes per weight: model_size / model_n_params), but card "
               "llama-3.1-8b-instruct's checkpoint is 2 bytes per weight (16.1 GB), 3.3x: "
               "kept, but a fit prices the card's bytes_per_weight, 2, not the run's (give the "
               "quantisation its own card, `ddtree-bayes card add --gguf FILE.gguf --name "
               "NAME`, and import it with --model NAME)")
    assert json.loads(out)["warnings"] == [warning]   # once for the file's two records
    assert err.count(f"ddtree-bayes: warning: {warning}\n") == 1
    assert len(new_rows(work)) == 2
    # a card of the file's quantisation (its bytes per weight to 4 digits: 0.6118), the rows
    # of the first import deleted (one run is imported once)
    data.write_bytes(before)
    (work / "data" / "models.csv").write_text(
        (work / "data" / "models.csv").read_text()
        + "llama-3.1-8b-instruct-q4_k_m,8.03,8.03,32,4096,,,,0.6118,int8,131072,GQA,test card,\n")
    code, out, err = run_cli(work, "add", *argv, "--model", "llama-3.1-8b-instruct-q4_k_m",
                             "--format", "json")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [] and "warning" not in err
    assert [r["model"] for r in new_rows(work)][-2:] == ["llama-3.1-8b-instruct-q4_k_m"] * 2


def test_the_quantisation_warning_names_the_checkpoint_and_what_the_fit_prices():
    """The warning compared the run's bytes per weight with the card's checkpoint average
    (``weights_bytes_per_weight``: ``file_bytes_per_weight`` when given, a memory-check column)
    but said that was what the card "prices": Kimi K2.6's card prices 0.5 bytes per active
    weight (``bytes_per_weight``) and keeps 0.6 for its ~600 GB file. It printed a 1 T-weight
    run as "1e+03B parameters". Kimi-K2.6 Q2_K_XL: 381 GB / 1,000 B weights = 0.381 bytes per
    weight; the card's checkpoint 0.6 x 1,000 B = 600 GB, 0.6 / 0.381 = 1.6x."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.core import paths
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.workflows.living.bench import _other_quantisation

    card = load_model_cards(paths.bundled("models.csv"))["kimi-k2.6"]
    assert (card.bytes_per_weight, card.file_bytes_per_weight) == (0.5, 0.6)
    rec = NS(model="/models/Kimi-K2.6-UD-Q2_K_XL.gguf", model_bytes=381e9, model_params=1.0e12)
    assert _other_quantisation(Path("kimi_bench.json"), rec, "kimi-k2.6", card) == (
        "kimi_bench.json: the file's model '/models/Kimi-K2.6-UD-Q2_K_XL.gguf' takes 381 GB for "
        "1,000B parameters (0.381 bytes per weight: model_size / model_n_params), but card "
        "kimi-k2.6's checkpoint is 0.6 bytes per weight (600 GB), 1.6x: kept, but a fit prices "
        "the card's bytes_per_weight, 0.5, not the run's (give the quantisation its own card, "
        "`ddtree-bayes card add --gguf FILE.gguf --name NAME`, and import it with --model NAME)")


def test_one_token_drafted_per_step_is_singular(work, tmp_path):
    """A run drafting one token per step (1,302 tokens in 1,302 drafts) was refused with "the
    file drafted 1 tokens per step"."""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "serve.json"
    src.write_text(json.dumps(dict(raw, spec_decode_draft_tokens=1302,
                                   spec_decode_accepted_tokens=1000,
                                   spec_decode_acceptance_length=1000 / 1302 + 1,
                                   spec_decode_per_position_acceptance_rates=[1000 / 1302],
                                   spec_decode_acceptance_rate=1000 / 1302 * 100)))
    err = one_error(work, "--from-bench", str(src), "--hardware", "b300", "--gpus", "8",
                    "--engine", "vllm", "--method", "eagle3", "--block", "5")
    assert ("the file drafted 1 token per step (spec_decode_draft_tokens / "
            "spec_decode_num_drafts), but --block is 5 (fix: give --block 1") in err


def test_a_file_that_names_no_model_says_whose_rows_it_made(work):
    """vLLM's latency JSON (and sglang.bench_one_batch's) names no model: imported without
    --model, its row went under the measurement file's model, kimi-k2.6, without a word (exit
    0), whatever model the run was of. One warning line now says so, with the fix; --model
    silences it, and the row is the same."""
    argv = ["add", "--from-bench", str(BENCH / "vllm_latency.json"), *VLLM, "--method", "ar",
            "--batch-size", "1", "--output-len", "128", "--input-len", "512", "--gpus", "8"]
    code, out, err = run_cli(work, *argv, "--format", "json")
    warning = (f"{BENCH / 'vllm_latency.json'}: the file names no model; its row was filed "
               "under kimi-k2.6, the model of data/measurements.csv (if the run was of another "
               "model, remove it and import the file again with --model <card>)")
    assert code == 0 and f"ddtree-bayes: warning: {warning}\n" in err, err
    assert warning in json.loads(out)["warnings"]
    others = err.replace(f"ddtree-bayes: warning: {warning}\n", "")
    (row,) = new_rows(work)
    assert row["model"] == "kimi-k2.6"
    (work / "data" / "measurements.csv").write_text(
        "".join((work / "data" / "measurements.csv").read_text().splitlines(True)[:-1]))
    code, out, err = run_cli(work, *argv, "--model", "kimi-k2.6")
    assert code == 0 and err == others, err   # (the prefill's warning, as before)
    assert new_rows(work) == [row]


def test_an_acceptance_length_its_own_counts_contradict_is_refused(work, tmp_path):
    """vllm bench serve writes spec_decode_acceptance_length = 1 + accepted / drafts (the
    fixture: 1 + 2794 / 1302 = 3.14593). A file whose acceptance says 3.9 beside those counts
    was imported at 3.9 (exit 0): 24% more tokens a step than the run accepted."""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "serve.json"
    argv = ["--from-bench", str(src), "--hardware", "b300", "--gpus", "8", "--engine", "vllm",
            "--method", "eagle3", "--block", "3"]
    src.write_text(json.dumps(dict(raw, spec_decode_acceptance_length=3.9)))
    err = one_error(work, *argv)
    assert ("spec_decode_acceptance_length 3.9 is not 1 + spec_decode_accepted_tokens / "
            "spec_decode_num_drafts = 1 + 2794 / 1302 = 3.14593") in err, err
    # the acceptance rounded as a person writes it is the same value
    src.write_text(json.dumps(dict(raw, spec_decode_acceptance_length=3.146)))
    (row,), _ = imported_rows(Path(shutil.copytree(work, tmp_path / "ok")), *argv)
    assert row["accept_len"] == 3.146


def test_a_depth_the_per_position_rates_contradict_is_refused(work, tmp_path):
    """A run whose drafts were not all of one length (3900 tokens in 1302 drafts: 2.995 a
    step, an n-gram drafter's short matches) gives no whole tokens per step, and `--block 5`
    was imported at M = 6; its per-position acceptance rates, one per drafted position
    (vLLM's counter of num_speculative_tokens positions), say the run drafted 3."""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "serve.json"
    src.write_text(json.dumps(dict(raw, spec_decode_draft_tokens=3900)))
    argv = ["--from-bench", str(src), "--hardware", "b300", "--gpus", "8", "--engine", "vllm",
            "--method", "eagle3"]
    err = one_error(work, *argv, "--block", "5")
    assert ("the file drafted 3 tokens per step (the positions of "
            "spec_decode_per_position_acceptance_rates), but --block is 5 (fix: give --block 3"
            ) in err, err
    (row,), _ = imported_rows(Path(shutil.copytree(work, tmp_path / "ok")), *argv, "--block", "3")
    assert row["verify_tokens"] == 4


def test_a_dflash_block_drafts_its_block_less_its_anchor(work, tmp_path):
    """A DFlash run of block 16 drafts 15 tokens a step (the block's position 0 is the anchor:
    the public rows write it dflash,16,15,16), and vLLM counts those 15 (15000 draft tokens in
    1000 drafts). `--method dflash --block 16` was refused ("but --block is 16 (fix: give
    --block 15 ...)"), and the --block 15 it asked for imported as dflash b15/B14 M=15 (exit
    0): a block of 14 drafts where the run drafted 15 and verified 16."""
    raw = json.loads((BENCH / "vllm_serve.json").read_text())
    src = tmp_path / "dflash.json"
    src.write_text(json.dumps(dict(
        raw, spec_decode_num_drafts=1000, spec_decode_draft_tokens=15000,
        spec_decode_accepted_tokens=6500, spec_decode_acceptance_length=7.5,
        spec_decode_acceptance_rate=6500 / 15000 * 100,
        spec_decode_per_position_acceptance_rates=[0.9] * 5 + [0.5] * 4 + [0.125] * 4 + [0.0] * 2)))
    argv = ["--from-bench", str(src), "--hardware", "b300", "--gpus", "8", "--engine", "vllm",
            "--method", "dflash", "--model", "llama-3.1-8b-instruct"]
    (row,), _ = imported_rows(Path(shutil.copytree(work, tmp_path / "ok")), *argv,
                              "--block", "16")
    assert (row["block"], row["budget"], row["verify_tokens"], row["accept_len"]) == (
        16, 15, 16, 7.5)
    err = one_error(work, *argv, "--block", "15")
    assert ("the file drafted 15 tokens per step (spec_decode_draft_tokens / "
            "spec_decode_num_drafts), but --block 15 drafts 14 (dflash: the block less its "
            "anchor) (fix: give --block 16, the run's num_speculative_tokens + 1)") in err, err

"""Import of benchmark-tool result files (ddtree_bayes.core.bench_import).

Expected numbers are recomputed by hand from the raw keys of each fixture (see
tests/fixtures/bench/README.md for where each format comes from)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ddtree_bayes.core.bench_import import (
    FORMATS,
    BenchFormatError,
    BenchRecord,
    detect_format,
    parse_bench_file,
)

BENCH = Path(__file__).resolve().parent / "fixtures" / "bench"


def _json(name: str):
    return json.loads((BENCH / name).read_text())


def _jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (BENCH / name).read_text().splitlines() if line.strip()]


def _one_line(err: pytest.ExceptionInfo[BenchFormatError]) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(("name", "fmt"), [
    ("vllm_latency.json", "vllm-latency"),
    ("vllm_latency_eagle3.json", "vllm-latency"),
    ("vllm_latency_eagle3.pytorch.json", "vllm-latency"),
    ("vllm_serve.json", "vllm-serve"),
    ("sglang_one_batch.jsonl", "sglang-one-batch"),
    ("sglang_one_batch_bs1_bs8.jsonl", "sglang-one-batch"),
    ("sglang_serving.jsonl", "sglang-serving"),
    ("llama_bench.json", "llama-bench"),
    ("llama_bench.csv", "llama-bench"),
])
def test_detect_format_of_every_fixture(name, fmt):
    path = BENCH / name
    assert detect_format(path, path.read_text()) == fmt
    assert fmt in FORMATS


def test_every_fixture_is_covered():
    names = {p.name for p in BENCH.iterdir()} - {"README.md"}
    assert names == {"vllm_latency.json", "vllm_latency_eagle3.json", "vllm_latency_eagle3.pytorch.json",
                     "vllm_serve.json", "sglang_one_batch.jsonl", "sglang_one_batch_bs1_bs8.jsonl",
                     "sglang_serving.jsonl", "llama_bench.json", "llama_bench.csv"}
    readme = (BENCH / "README.md").read_text()
    for name in names:
        assert f"`{name}`" in readme


# --------------------------------------------------------------------------- vLLM latency


def test_vllm_latency_needs_flags_and_computes_single_stream_rate():
    raw = _json("vllm_latency.json")
    assert math.isclose(raw["avg_latency"], sum(raw["latencies"]) / len(raw["latencies"]), rel_tol=1e-12)
    fmt, recs = parse_bench_file(BENCH / "vllm_latency.json", batch_size=1, output_len=128, input_len=512)
    assert fmt == "vllm-latency"
    (rec,) = recs
    assert rec.tok_s == 1 * 128 / raw["avg_latency"]
    assert rec.context_tokens == 512.0
    assert rec.batch_size == 1 and rec.accept_len is None and rec.model is None and rec.index == 1
    assert "avg_latency" in rec.notes and "prefill" in rec.notes


def test_vllm_latency_without_flags_is_refused():
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(BENCH / "vllm_latency.json")
    msg = _one_line(err)
    assert msg.startswith(f"{BENCH / 'vllm_latency.json'}, record 1: batch_size is unknown")
    assert "(fix: " in msg and "--batch-size" in msg
    assert err.value.key == "batch_size"


def test_vllm_latency_batch8_flag_is_refused():
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(BENCH / "vllm_latency.json", batch_size=8, output_len=128)
    msg = _one_line(err)
    assert "record 1: batch_size 8: only single-stream (batch 1) runs can be imported" in msg
    assert msg.endswith("(fix: rerun vllm bench latency with --batch-size 1)")


def test_vllm_latency_reads_args_from_pytorch_side_file():
    avg = _json("vllm_latency_eagle3.json")["avg_latency"]
    args = _json("vllm_latency_eagle3.pytorch.json")[0]["benchmark"]["extra_info"]["args"]
    assert (args["batch_size"], args["output_len"], args["input_len"]) == (1, 128, 1024)
    for name in ("vllm_latency_eagle3.json", "vllm_latency_eagle3.pytorch.json"):
        fmt, (rec,) = parse_bench_file(BENCH / name)
        assert fmt == "vllm-latency"
        assert rec.tok_s == 1 * 128 / avg
        assert rec.context_tokens == 1024.0
        assert rec.model == "meta-llama/Llama-3.1-8B-Instruct"
        assert "eagle3" in rec.notes and rec.accept_len is None


def test_vllm_latency_flags_override_side_file():
    avg = _json("vllm_latency_eagle3.json")["avg_latency"]
    _, (rec,) = parse_bench_file(BENCH / "vllm_latency_eagle3.json", batch_size=1, output_len=64)
    assert rec.tok_s == 64 / avg


def test_vllm_latency_side_file_batch8_is_refused(tmp_path):
    raw = _json("vllm_latency_eagle3.pytorch.json")
    raw[0]["benchmark"]["extra_info"]["args"]["batch_size"] = 8
    bad = tmp_path / "lat.pytorch.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError, match=r"record 1: batch_size 8: only single-stream"):
        parse_bench_file(bad)


# --------------------------------------------------------------------------- vLLM serve


def test_vllm_serve():
    raw = _json("vllm_serve.json")
    fmt, (rec,) = parse_bench_file(BENCH / "vllm_serve.json")
    assert fmt == "vllm-serve"
    assert rec.tok_s == 1000.0 / raw["median_tpot_ms"]
    assert rec.accept_len == raw["spec_decode_acceptance_length"]
    assert rec.accept_len == 1 + raw["spec_decode_accepted_tokens"] / raw["spec_decode_num_drafts"]
    assert rec.context_tokens == raw["total_input_tokens"] / raw["completed"] == 1024.0
    assert rec.batch_size == 1 and rec.model == raw["model_id"] and rec.index == 1
    assert "median_tpot_ms" in rec.notes


def test_vllm_serve_unbounded_concurrency_is_refused(tmp_path):
    raw = _json("vllm_serve.json")
    raw["max_concurrency"] = None
    bad = tmp_path / "serve.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(bad)
    msg = _one_line(err)
    assert "max_concurrency is not set" in msg and "--max-concurrency 1" in msg


def test_vllm_serve_appended_results_are_json_lines(tmp_path):
    raw = _json("vllm_serve.json")
    second = dict(raw, max_concurrency=4)
    path = tmp_path / "appended.json"  # --append-result: objects separated by "\n"
    path.write_text(json.dumps(raw) + "\n" + json.dumps(second))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert _one_line(err).startswith(f"{path}, line 2: max_concurrency 4: only single-stream")


def test_vllm_serve_falls_back_to_mean_tpot_and_needs_tpot(tmp_path):
    raw = _json("vllm_serve.json")
    del raw["median_tpot_ms"]
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    _, (rec,) = parse_bench_file(path)
    assert rec.tok_s == 1000.0 / raw["mean_tpot_ms"]
    del raw["mean_tpot_ms"]
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError, match=r"record 1: missing key 'median_tpot_ms' \(vllm-serve\)"):
        parse_bench_file(path)


# --------------------------------------------------------------------------- SGLang


def test_sglang_one_batch():
    raw = _jsonl("sglang_one_batch.jsonl")
    fmt, recs = parse_bench_file(BENCH / "sglang_one_batch.jsonl")
    assert fmt == "sglang-one-batch"
    assert [r.index for r in recs] == [1, 2]
    for rec, row in zip(recs, raw, strict=True):
        assert rec.tok_s == row["median_decode_throughput"]
        assert math.isclose(rec.tok_s, 1 / row["median_decode_latency"], rel_tol=1e-12)
        assert rec.context_tokens == float(row["input_len"])
        assert rec.batch_size == 1 and rec.accept_len is None and rec.model is None
    assert [r.context_tokens for r in recs] == [512.0, 2048.0]


def test_sglang_one_batch_batch8_is_refused():
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(BENCH / "sglang_one_batch_bs1_bs8.jsonl")
    msg = _one_line(err)
    assert msg == (f"{BENCH / 'sglang_one_batch_bs1_bs8.jsonl'}, line 2: batch_size 8: only single-stream "
                   "(batch 1) runs can be imported (fix: rerun sglang.bench_one_batch with --batch-size 1, "
                   "or delete line 2)")
    assert err.value.key == "batch_size" and err.value.index == 2


def test_sglang_serving():
    raw = _jsonl("sglang_serving.jsonl")
    assert raw[0]["request_rate"] == math.inf  # json.dumps wrote Infinity
    fmt, recs = parse_bench_file(BENCH / "sglang_serving.jsonl")
    assert fmt == "sglang-serving"
    spec, plain = recs
    assert spec.tok_s == 1000.0 / raw[0]["median_tpot_ms"]
    assert spec.accept_len == raw[0]["accept_length"] == 3.4172
    assert plain.tok_s == 1000.0 / raw[1]["median_tpot_ms"]
    assert plain.accept_len is None
    assert spec.context_tokens == plain.context_tokens == 16384 / 16
    assert (spec.index, plain.index) == (1, 2)
    assert spec.batch_size == plain.batch_size == 1


def test_sglang_serving_model_from_server_info(tmp_path):
    row = _jsonl("sglang_serving.jsonl")[0]
    row["server_info"] = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "internal_states": []}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(row) + "\n")
    _, (rec,) = parse_bench_file(path)
    assert rec.model == "meta-llama/Llama-3.1-8B-Instruct"


def test_sglang_serving_bad_accept_length(tmp_path):
    row = _jsonl("sglang_serving.jsonl")[0]
    row["accept_length"] = 0.8
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(BenchFormatError, match=r"'accept_length' is 0.8; an acceptance length counts"):
        parse_bench_file(path)


# --------------------------------------------------------------------------- llama-bench


def test_llama_bench_json_takes_tg_rows_only():
    raw = _json("llama_bench.json")
    tests = [(r["n_prompt"], r["n_gen"], r["n_depth"]) for r in raw]
    assert tests == [(512, 0, 0), (0, 128, 0), (0, 128, 4096)]
    fmt, recs = parse_bench_file(BENCH / "llama_bench.json")
    assert fmt == "llama-bench"
    assert [r.index for r in recs] == [2, 3]
    for rec, row in zip(recs, raw[1:], strict=True):
        assert rec.tok_s == row["avg_ts"]
        by_hand = sum(1e9 * row["n_gen"] / ns for ns in row["samples_ns"]) / len(row["samples_ns"])
        assert math.isclose(rec.tok_s, by_hand, rel_tol=1e-6)
        assert rec.batch_size == 1 and rec.accept_len is None
        assert rec.model == row["model_filename"]
    assert [r.context_tokens for r in recs] == [0.0, 4096.0]
    assert "tg128 @ d4096" in recs[1].notes


def test_llama_bench_csv_matches_json():
    _, from_json = parse_bench_file(BENCH / "llama_bench.json")
    fmt, from_csv = parse_bench_file(BENCH / "llama_bench.csv")
    assert fmt == "llama-bench"
    assert [r.tok_s for r in from_csv] == [r.tok_s for r in from_json]
    assert [r.context_tokens for r in from_csv] == [0.0, 4096.0]
    assert [r.index for r in from_csv] == [3, 4]  # CSV line numbers (header is line 1)


def test_llama_bench_jsonl(tmp_path):
    raw = _json("llama_bench.json")
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in raw))
    fmt, recs = parse_bench_file(path)
    assert fmt == "llama-bench"
    assert [r.tok_s for r in recs] == [raw[1]["avg_ts"], raw[2]["avg_ts"]]
    assert [r.index for r in recs] == [2, 3]


def test_llama_bench_without_tg_is_refused(tmp_path):
    raw = _json("llama_bench.json")[:1]
    path = tmp_path / "pp_only.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError, match=r"no text-generation test .*tests seen: pp512 \(fix: rerun "
                                               r"llama-bench with -n 128"):
        parse_bench_file(path)


def test_llama_bench_markdown_is_refused(tmp_path):
    path = tmp_path / "bench.md"
    path.write_text("| model | size | params | backend | ngl | test | t/s |\n| --- |\n")
    with pytest.raises(BenchFormatError, match=r"line 1: this is a Markdown table .*\(fix: rerun llama-bench "
                                               r"with -o json\)"):
        parse_bench_file(path)


# --------------------------------------------------------------------------- errors


def test_missing_file(tmp_path):
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(tmp_path / "nope.json")
    assert _one_line(err).startswith(f"{tmp_path / 'nope.json'}: cannot read the file")


def test_unreadable_bytes(tmp_path):
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BenchFormatError, match=r"not UTF-8 text"):
        parse_bench_file(path)


@pytest.mark.parametrize("text", ["", "   \n\n"])
def test_empty_file(tmp_path, text):
    path = tmp_path / "empty.json"
    path.write_text(text)
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert _one_line(err).startswith(f"{path}: the file is empty (fix: ")


def test_invalid_json_names_the_line(tmp_path):
    text = (BENCH / "vllm_latency.json").read_text()
    path = tmp_path / "cut.json"
    path.write_text(text.replace('"std_latency"', '"std_latency', 1))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    msg = _one_line(err)
    assert msg.startswith(f"{path}, line 3: invalid JSON: ") and "(fix: " in msg


def test_truncated_json_lines_names_the_line(tmp_path):
    lines = (BENCH / "sglang_serving.jsonl").read_text().splitlines()
    path = tmp_path / "cut.jsonl"
    path.write_text(lines[0] + "\n" + lines[1][:80] + "\n")
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert _one_line(err).startswith(f"{path}, line 2: invalid JSON: ")


def test_unknown_format_names_what_was_seen(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"throughput": 3.0, "foo": 1}))
    with pytest.raises(BenchFormatError) as err:
        detect_format(path, path.read_text())
    msg = _one_line(err)
    assert msg.startswith(f"{path}, record 1: unknown benchmark format; keys seen: foo, throughput (fix: ")
    assert "llama-bench" in msg


def test_unknown_format_name(tmp_path):
    with pytest.raises(BenchFormatError, match=r"unknown format 'tgi'"):
        parse_bench_file(BENCH / "vllm_serve.json", fmt="tgi")


def test_forced_wrong_format_reports_missing_key():
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(BENCH / "vllm_serve.json", fmt="sglang-one-batch")
    assert "record 1: missing key 'batch_size' (sglang-one-batch)" in _one_line(err)


def test_missing_required_key(tmp_path):
    rows = _jsonl("sglang_one_batch.jsonl")
    del rows[1]["median_decode_throughput"]  # what output_len 1 produces
    path = tmp_path / "ob.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    msg = _one_line(err)
    assert msg.startswith(f"{path}, line 2: missing key 'median_decode_throughput' (sglang-one-batch)")
    assert "--output-len > 1" in msg
    assert err.value.key == "median_decode_throughput"


@pytest.mark.parametrize("value", [0, -3.0, "NaN", "Infinity"])
def test_non_positive_or_non_finite_throughput(tmp_path, value):
    text = (BENCH / "sglang_one_batch.jsonl").read_text().splitlines()[0]
    row = json.loads(text)
    path = tmp_path / "ob.jsonl"
    literal = value if isinstance(value, str) else json.dumps(value)
    path.write_text(json.dumps(row).replace(
        f'"median_decode_throughput": {json.dumps(row["median_decode_throughput"])}',
        f'"median_decode_throughput": {literal}') + "\n")
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    msg = _one_line(err)
    assert "'median_decode_throughput' is " in msg and "must be positive and finite" in msg


def test_zero_avg_latency(tmp_path):
    raw = _json("vllm_latency.json")
    raw["avg_latency"] = 0.0
    path = tmp_path / "lat.json"
    path.write_text(json.dumps(raw, indent=4))
    with pytest.raises(BenchFormatError, match=r"record 1: 'avg_latency' is 0; throughput and latency"):
        parse_bench_file(path, batch_size=1, output_len=128)


def test_non_numeric_value(tmp_path):
    raw = _json("vllm_serve.json")
    raw["median_tpot_ms"] = "fast"
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError, match=r"'median_tpot_ms' must be a number, got 'fast'"):
        parse_bench_file(path)


def test_array_of_non_objects(tmp_path):
    path = tmp_path / "arr.json"
    path.write_text("[1, 2]")
    with pytest.raises(BenchFormatError, match=r"record 1: expected a JSON object, got int"):
        parse_bench_file(path)


def test_error_is_plain_exception_and_record_is_frozen():
    assert issubclass(BenchFormatError, Exception)
    _, (rec,) = parse_bench_file(BENCH / "vllm_serve.json")
    assert isinstance(rec, BenchRecord)
    with pytest.raises(AttributeError):
        rec.tok_s = 1.0  # type: ignore[misc]

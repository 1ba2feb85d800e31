"""Import of benchmark-tool result files (ddtree_bayes.core.bench_import).

Expected numbers are recomputed by hand from the raw keys of each fixture (see
tests/fixtures/bench/README.md for where each format comes from)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddtree_bayes.core.bench_import import (
    FORMATS,
    TOOLS,
    BenchFormatError,
    BenchRecord,
    detect_format,
    parse_bench_file,
    span,
)

BENCH = Path(__file__).resolve().parent / "fixtures" / "bench"


def parse(*args, **kwargs) -> tuple[str, list[BenchRecord]]:
    """(format, records) of parse_bench_file."""
    got = parse_bench_file(*args, **kwargs)
    return got.format, got.records


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
    ("llama_bench_readme.json", "llama-bench"),
    ("llama_bench_readme.jsonl", "llama-bench"),
    ("llama_bench_readme.csv", "llama-bench"),
])
def test_detect_format_of_every_fixture(name, fmt):
    path = BENCH / name
    assert detect_format(path, path.read_text()) == fmt
    assert fmt in FORMATS


def test_every_fixture_is_covered():
    names = {p.name for p in BENCH.iterdir()} - {"README.md"}
    assert names == {"vllm_latency.json", "vllm_latency_eagle3.json", "vllm_latency_eagle3.pytorch.json",
                     "vllm_serve.json", "sglang_one_batch.jsonl", "sglang_one_batch_bs1_bs8.jsonl",
                     "sglang_serving.jsonl", "llama_bench.json", "llama_bench.csv",
                     "llama_bench_readme.json", "llama_bench_readme.jsonl", "llama_bench_readme.csv",
                     "llama_bench_readme.md"}
    readme = (BENCH / "README.md").read_text()
    for name in names:
        assert f"`{name}`" in readme


# --------------------------------------------------------------------------- vLLM latency


def test_vllm_latency_needs_flags_and_computes_single_stream_rate():
    raw = _json("vllm_latency.json")
    assert math.isclose(raw["avg_latency"], sum(raw["latencies"]) / len(raw["latencies"]), rel_tol=1e-12)
    fmt, recs = parse(BENCH / "vllm_latency.json", batch_size=1, output_len=128, input_len=512)
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
        fmt, (rec,) = parse(BENCH / name)
        assert fmt == "vllm-latency"
        assert rec.tok_s == 1 * 128 / avg
        assert rec.context_tokens == 1024.0
        assert rec.model == "meta-llama/Llama-3.1-8B-Instruct"
        assert "eagle3" in rec.notes and rec.accept_len is None


def test_vllm_latency_flags_that_contradict_the_side_file_are_refused():
    """--output-len 64 against a side file recording 128 halved tok/s with exit 0 (the flags
    overrode the run's own record); flags that agree with it are taken."""
    avg = _json("vllm_latency_eagle3.json")["avg_latency"]
    with pytest.raises(BenchFormatError) as err:
        parse(BENCH / "vllm_latency_eagle3.json", batch_size=1, output_len=64)
    assert "--output-len 64, but vllm_latency_eagle3.pytorch.json records output_len 128 for " \
        "this run" in str(err.value)
    assert "drop --output-len (the file's record is the run's)" in str(err.value)
    _, (rec,) = parse(BENCH / "vllm_latency_eagle3.json", batch_size=1, output_len=128)
    assert rec.tok_s == 128 / avg


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
    fmt, (rec,) = parse(BENCH / "vllm_serve.json")
    assert fmt == "vllm-serve"
    assert rec.tok_s == 1000.0 / raw["median_tpot_ms"]
    assert rec.accept_len == raw["spec_decode_acceptance_length"]
    assert rec.accept_len == 1 + raw["spec_decode_accepted_tokens"] / raw["spec_decode_num_drafts"]
    assert rec.context_tokens == raw["total_input_tokens"] / raw["completed"] == 1024.0
    assert rec.batch_size == 1 and rec.model == raw["model_id"] and rec.index == 1
    assert "median_tpot_ms" in rec.notes


def test_vllm_serve_unbounded_concurrency_is_refused(tmp_path):
    raw = _json("vllm_serve.json")
    raw["max_concurrency"] = None   # all 8 prompts at once (rate inf): vLLM saw 8 at its peak
    raw["max_concurrent_requests"] = 8
    bad = tmp_path / "serve.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(bad)
    msg = _one_line(err)
    # a serving run at any C is imported at C: the fix names C, not the single stream of old
    assert msg == (f"{bad}, record 1: max_concurrency is not set, so requests ran concurrently "
                   "(fix: rerun vllm bench serve with --max-concurrency C, the streams to "
                   "measure: 1 for one stream; a run at C > 1 is imported at C)")


def test_vllm_serve_without_a_cap_that_saw_one_request_at_once_is_one_stream(tmp_path):
    """No --max-concurrency, but vLLM saw at most one request at once (a slow request rate):
    refused as "requests ran concurrently", though nothing overlapped (an audit's find). Its
    TPOT is one stream's, so it imports at C = 1; with two at once it stays refused."""
    raw = dict(_json("vllm_serve.json"), max_concurrency=None, request_rate=0.2,
               max_concurrent_requests=1)
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    rec = parse_bench_file(path).records[0]
    assert rec.batch_size == 1 and rec.tok_s == pytest.approx(1000.0 / raw["median_tpot_ms"])
    path.write_text(json.dumps(dict(raw, max_concurrent_requests=2)))
    with pytest.raises(BenchFormatError, match="max_concurrency is not set, so requests ran "
                                               "concurrently"):
        parse_bench_file(path)


@pytest.mark.parametrize("fmt, name, tool", [
    ("vllm-serve", "vllm_serve.json", "vllm bench serve"),
    ("sglang-serving", "sglang_serving.jsonl", "sglang.bench_serving")])
def test_single_stream_only_of_a_file_of_c_above_1_says_it_imports_them(tmp_path, fmt, name,
                                                                        tool):
    """--single-stream-only of a file whose runs are all at C = 4: the fix said only "rerun
    with --max-concurrency 1", though without the flag the runs are imported at C = 4."""
    raw = _json(name) if name.endswith(".json") else _jsonl(name)[0]
    path = tmp_path / name
    path.write_text(json.dumps(dict(raw, max_concurrency=4, max_concurrent_requests=4,
                                    num_prompts=16, completed=16, concurrency=4.0)))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path, single_stream_only=True)
    assert _one_line(err).endswith(
        "no single-stream record (max_concurrency 4) (fix: drop --single-stream-only to import "
        f"them at their concurrency, or rerun {tool} with --max-concurrency 1)")


def test_vllm_serve_appended_results_are_json_lines(tmp_path):
    raw = _json("vllm_serve.json")
    second = dict(raw, max_concurrency=4, max_concurrent_requests=4)
    path = tmp_path / "appended.json"  # --append-result: objects separated by "\n"
    path.write_text(json.dumps(raw) + "\n" + json.dumps(second))
    # a sweep over --max-concurrency: each run at its concurrency, tok_s the C streams' total
    # (C x 1000 / TPOT: a serving benchmark's TPOT is one stream's time per output token)
    both = parse_bench_file(path)
    assert [(r.index, r.batch_size) for r in both.records] == [(1, 1), (2, 4)]
    assert both.records[1].tok_s == pytest.approx(4 * 1000.0 / raw["median_tpot_ms"])
    assert "4 x 1000/median_tpot_ms (" in both.records[1].notes
    assert "; total of 4 streams)" in both.records[1].notes
    got = parse_bench_file(path, single_stream_only=True)
    assert [(r.index, r.tok_s) for r in got.records] == [(1, 1000.0 / raw["median_tpot_ms"])]
    assert got.notes == [f"{path}: --single-stream-only left out line 2 (max_concurrency 4)"]


def test_a_serving_run_counts_the_streams_that_ran_not_its_cap(tmp_path):
    """--max-concurrency is a cap: with 8 prompts at most 8 streams ran (vLLM's
    max_concurrent_requests says 8), so tok_s is 8 x 1000 / TPOT, not 64 x (it was 21,990 for
    a run whose 8 streams made 2,749); an SGLang run that averaged 0.99 requests in flight
    (its measured `concurrency`) under a cap of 4 is a single-stream run."""
    raw = _json("vllm_serve.json")
    path = tmp_path / "c64.json"
    path.write_text(json.dumps(dict(raw, max_concurrency=64, num_prompts=8,
                                    max_concurrent_requests=8)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 8
    assert rec.tok_s == pytest.approx(8 * 1000.0 / raw["median_tpot_ms"])
    sg = _jsonl("sglang_serving.jsonl")[0]
    assert sg["concurrency"] == pytest.approx(0.997, abs=1e-3)
    capped = tmp_path / "sg.jsonl"
    capped.write_text(json.dumps(dict(sg, max_concurrency=4)))
    (rec,) = parse_bench_file(capped).records
    assert rec.batch_size == 1 and rec.tok_s == pytest.approx(1000.0 / sg["median_tpot_ms"])


def test_a_vllm_run_with_a_ramped_request_rate_is_no_one_concurrency(tmp_path):
    """`vllm bench serve --ramp-up-strategy linear --ramp-up-start-rps 1 --ramp-up-end-rps 20
    --max-concurrency 8` writes request_rate "inf" (a ramp takes no --request-rate) beside
    ramp_up_strategy: its arrivals rose from 1 to 20 requests/s, so the streams in flight
    rose over the run, and its median TPOT is no one concurrency's. It was imported as a
    closed loop of 8 streams, 8 x 1000 / TPOT, exit 0. A ramped run at one stream stays
    single-stream, and --single-stream-only leaves a ramped run at 8 out as any other."""
    raw = _json("vllm_serve.json")
    ramp = dict(raw, max_concurrency=8, num_prompts=64, completed=64, max_concurrent_requests=8,
                ramp_up_strategy="linear", ramp_up_start_rps=1.0, ramp_up_end_rps=20.0)
    path = tmp_path / "ramp.json"
    path.write_text(json.dumps(ramp))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert _one_line(err) == (
        f"{path}, record 1: ramp_up_strategy 'linear': the request rate ramped from 1 to 20 "
        "requests/s, so the streams in flight (up to 8) changed over the run and its TPOT is "
        "no one concurrency's (fix: rerun vllm bench serve without --ramp-up-strategy: "
        "--max-concurrency C with the default --request-rate inf)")
    path.write_text(json.dumps(dict(ramp, max_concurrency=1, max_concurrent_requests=1)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 1 and rec.tok_s == pytest.approx(1000.0 / raw["median_tpot_ms"])
    path.write_text(json.dumps(raw) + "\n" + json.dumps(ramp))
    got = parse_bench_file(path, single_stream_only=True)
    assert [r.index for r in got.records] == [1]


@pytest.mark.parametrize("mean", [float("nan"), -2.0])
def test_an_sglang_mean_in_flight_that_is_no_count_is_refused(tmp_path, mean):
    """A trust pass: SGLang's measured mean 'concurrency' of NaN or -2 was ignored without a
    word, and the cap (8) taken as the streams."""
    sg = _jsonl("sglang_serving.jsonl")[0]
    path = tmp_path / "sg.jsonl"
    path.write_text(json.dumps(dict(sg, max_concurrency=8, concurrency=mean)))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert (f"'concurrency' is {mean:g}: the mean of the streams in flight is a number >= 0"
            in _one_line(err))


def test_an_sglang_mean_in_flight_of_0_with_completed_requests_is_refused(tmp_path):
    """A trust pass: a measured mean 'concurrency' of 0 under a cap of 8 with 16 requests
    completed (their latencies sum to more than 0) was passed over and the cap taken: 8
    streams, 8 x 1000 / TPOT, where a mean of 0.4 gave 1 stream."""
    sg = _jsonl("sglang_serving.jsonl")[0]
    path = tmp_path / "sg.jsonl"
    path.write_text(json.dumps(dict(sg, max_concurrency=8, concurrency=0.0)))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert ("'concurrency' is 0, but 16 requests completed: the mean of the streams in "
            "flight is above 0" in _one_line(err))
    path.write_text(json.dumps(dict(sg, max_concurrency=8, concurrency=0.4)))
    assert parse_bench_file(path).records[0].batch_size == 1


def test_a_rate_limited_vllm_run_counts_the_streams_in_flight(tmp_path):
    """--request-rate 0.05 under --max-concurrency 8: by Little's law 0.0499 req/s x 2.34 s
    = 0.117 requests were in flight, so the run is single-stream (it was imported as 8 streams
    at 8 x 1000 / TPOT, 8x its own output throughput)."""
    raw = _json("vllm_serve.json")
    path = tmp_path / "rate.json"
    path.write_text(json.dumps(dict(raw, request_rate=0.05, max_concurrency=8, num_prompts=64,
                                    completed=64, max_concurrent_requests=8,
                                    request_throughput=0.0499, mean_e2el_ms=2340.0)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 1 and rec.tok_s == pytest.approx(1000.0 / raw["median_tpot_ms"])
    assert "0.12 in flight (Little's law)" in rec.notes
    # without mean_e2el_ms: ttft + tpot x (512 - 1) tokens = 24.87 + 2.9105 x 511 = 1512.1 ms;
    # at 3.0 requests/s that is 4.54 in flight -> 5 streams
    path.write_text(json.dumps(dict(raw, request_rate=4.0, max_concurrency=8, num_prompts=64,
                                    completed=8, max_concurrent_requests=8,
                                    request_throughput=3.0)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 5 and rec.tok_s == pytest.approx(5 * 1000.0 / raw["median_tpot_ms"])
    # a rate that offers more than the cap (1000 requests/s x 1.51 s) is a closed loop: the cap
    # binds (the measured mean, 3.0 x 1.51 = 4.5, would count the ramp-down as fewer streams)
    path.write_text(json.dumps(dict(raw, request_rate=1000.0, max_concurrency=8,
                                    num_prompts=64, completed=8, max_concurrent_requests=8,
                                    request_throughput=3.0)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 8 and "Little" not in rec.notes
    # an unbounded rate keeps the cap (a closed loop of 8 streams)
    path.write_text(json.dumps(dict(raw, max_concurrency=8, num_prompts=64, completed=64,
                                    max_concurrent_requests=8, request_throughput=3.0)))
    assert parse_bench_file(path).records[0].batch_size == 8
    # a finite rate and no latency to measure the streams with: refused
    bare = {k: v for k, v in raw.items() if k not in ("mean_ttft_ms",)}
    path.write_text(json.dumps(dict(bare, request_rate=4.0, max_concurrency=8,
                                    max_concurrent_requests=8)))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert "request_rate is finite" in _one_line(err) and "--request-rate inf" in str(err.value)


def test_an_sglang_closed_loop_counts_its_cap_and_a_rate_limited_run_its_streams(tmp_path):
    """A trust pass: an SGLang run at --request-rate inf (a closed loop) under
    --max-concurrency 8 with 64 requests ran 8 streams, but its measured mean in flight
    (7.3: the ramp-up and ramp-down counted) made it 7, tok_s 7 x 1000 / TPOT = 2808 where
    vLLM's same run is 8 streams, 3210; and a run at --request-rate 2 under the cap of 8
    from an SGLang that writes no 'concurrency' was 8 streams (3210 tok/s), where Little's
    law gives 1.95 req/s x 1.3047 s = 2.54 in flight: 3 streams, 1204 tok/s."""
    sg = _jsonl("sglang_serving.jsonl")[0]
    tpot = sg["median_tpot_ms"]   # 2.492475 ms
    path = tmp_path / "sg.jsonl"
    path.write_text(json.dumps(dict(sg, max_concurrency=8, completed=64, concurrency=7.3)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 8 and rec.tok_s == pytest.approx(8 * 1000.0 / tpot)  # 3209.66
    assert "measured mean in flight 7.30" in rec.notes
    rated = {k: v for k, v in sg.items() if k != "concurrency"}
    path.write_text(json.dumps(dict(rated, request_rate=2.0, max_concurrency=8, completed=64,
                                    request_throughput=1.95)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 3 and rec.tok_s == pytest.approx(3 * 1000.0 / tpot)  # 1203.62
    assert "2.54 in flight (Little's law)" in rec.notes
    # the measured mean of a rate-limited run counts its streams (2.4 -> 2)
    path.write_text(json.dumps(dict(sg, request_rate=2.0, max_concurrency=8, completed=64,
                                    request_throughput=1.95, concurrency=2.4)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 2 and "2.40 in flight (the file's measured mean)" in rec.notes
    # a rate that offers more than the cap (100 req/s x 1.30 s = 130) is a closed loop too
    path.write_text(json.dumps(dict(sg, request_rate=100.0, max_concurrency=8, completed=64,
                                    concurrency=7.3)))
    assert parse_bench_file(path).records[0].batch_size == 8


@pytest.mark.parametrize(("counts", "says"), [
    ({"num_prompts": 64, "completed": 4, "failed": 60},
     "60 of 64 requests failed, so fewer completed (4) than the 8 streams the run could keep"),
    ({"num_prompts": 64, "completed": 32, "failed": 32},
     "32 of 64 requests failed: the run did not decode steadily at its concurrency"),
    ({"num_prompts": 12, "completed": 6, "failed": 6, "max_concurrency": 1},
     "6 of 12 requests failed: the run did not decode steadily"),
])
def test_a_serving_run_whose_requests_mostly_failed_is_refused(tmp_path, counts, says):
    """A trust pass: num_prompts 64, completed 4, failed 60 under max_concurrency 8 was
    imported as 4 streams (4 x 1000 / TPOT = 1374 tok/s), exit 0: the cap cut to the
    requests that happened to finish, of a run that never decoded steadily at its cap."""
    raw = dict(_json("vllm_serve.json"), max_concurrency=8, max_concurrent_requests=8)
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(dict(raw, **counts)))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    msg = _one_line(err)
    assert says in msg and "serve.json" in msg and "record 1" in msg
    assert "look at the server log" in msg and "rerun the benchmark" in msg


def test_failed_requests_are_weighed_against_the_streams_the_run_could_keep(tmp_path):
    """A review: 1 of 10 requests failed under max_concurrency 64 with 10 requests sent was
    refused as 'fewer completed (9) than max_concurrency 64 streams', though at most 10
    could ever run: the cap bounded by the requests sent is what 9 is weighed against (9 < 10:
    still refused, with the right count); and a file without 'completed' said '3 of 3
    requests failed' of 3 failures."""
    raw = _json("vllm_serve.json")
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(dict(raw, max_concurrency=64, max_concurrent_requests=10,
                                    num_prompts=10, completed=9, failed=1)))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert "1 of 10 requests failed, so fewer completed (9) than the 10 streams" in _one_line(err)
    path.write_text(json.dumps(dict(raw, max_concurrency=8, max_concurrent_requests=8,
                                    num_prompts=64, completed=62, failed=2)))
    assert "2 of 64 requests failed" in parse_bench_file(path).records[0].notes
    path.write_text(json.dumps(dict({k: v for k, v in raw.items() if k != "completed"},
                                    max_concurrency=8, num_prompts=64, failed=3)))
    assert ", 3 requests failed" in parse_bench_file(path).records[0].notes


def test_a_serving_run_with_a_few_failed_requests_says_so_in_its_note(tmp_path):
    """2 of 64 requests failed under a cap of 8: 62 completed, the cap's 8 streams decoded
    (8 x 1000 / TPOT), and the row's note says 2 failed."""
    raw = _json("vllm_serve.json")
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(dict(raw, max_concurrency=8, max_concurrent_requests=8,
                                    num_prompts=64, completed=62, failed=2)))
    (rec,) = parse_bench_file(path).records
    assert rec.batch_size == 8 and rec.tok_s == pytest.approx(8 * 1000.0 / raw["median_tpot_ms"])
    assert "2 of 64 requests failed" in rec.notes


def test_a_serving_runs_note_keeps_the_tpot_beside_its_formula(tmp_path):
    """The note of a run with failures (or a rate, or a ramp) read "tok_s = 8 x
    1000/median_tpot_ms (total of 8 streams), 2 of 64 requests failed (2.91046 ms; decode
    only, first token excluded)": the TPOT's milliseconds after the failure clause, as if the
    failures took 2.9 ms. The milliseconds follow the formula; what the run says comes after."""
    raw = _json("vllm_serve.json")
    tpot = f"{raw['median_tpot_ms']:g}"
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(dict(raw, max_concurrency=8, max_concurrent_requests=8,
                                    num_prompts=64, completed=62, failed=2)))
    assert parse_bench_file(path).records[0].notes.startswith(
        f"vllm bench serve (vllm-serve): tok_s = 8 x 1000/median_tpot_ms ({tpot} ms; decode "
        "only, first token excluded; total of 8 streams), 2 of 64 requests failed; "
        "context_tokens = total_input_tokens/completed")
    path.write_text(json.dumps(raw))   # one stream, nothing to say: as before
    assert parse_bench_file(path).records[0].notes.startswith(
        f"vllm bench serve (vllm-serve): tok_s = 1000/median_tpot_ms ({tpot} ms; decode only, "
        "first token excluded); context_tokens = ")
    sg = _jsonl("sglang_serving.jsonl")[0]
    sg_tpot = f"{sg['median_tpot_ms']:g}"
    path.write_text(json.dumps(dict(sg, max_concurrency=8, completed=62, failed=2,
                                    concurrency=7.3)))
    assert parse_bench_file(path).records[0].notes.startswith(
        f"sglang.bench_serving (sglang-serving): tok_s = 8 x 1000/median_tpot_ms ({sg_tpot} ms; "
        "decode only, first token excluded; total of 8 streams), measured mean in flight 7.30 "
        "('concurrency': a closed loop's ramp-up and ramp-down counted); 2 of 64 requests "
        "failed; context_tokens = total_input_tokens/completed")


@pytest.mark.parametrize(("key", "value", "says"), [
    ("max_concurrency", 0, "'max_concurrency' is 0: a count of requests cannot be below 1"),
    ("max_concurrency", -4, "'max_concurrency' is -4"),
    ("completed", -3, "'completed' is -3: a count of requests cannot be negative"),
    ("num_prompts", -1, "'num_prompts' is -1"),
    ("failed", -2, "'failed' is -2: a count of requests cannot be negative"),
])
def test_vllm_serve_request_counts_below_their_minimum_are_refused(tmp_path, key, value, says):
    """max_concurrency 0 was imported as one stream, completed -3 (cap 8) as 8 streams with a
    blank context, max_concurrency -4 was refused as 'tok_s must be > 0, got -506.329'."""
    raw = dict(_json("vllm_serve.json"), max_concurrency=8, max_concurrent_requests=8)
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(dict(raw, **{key: value})))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert says in _one_line(err)


def test_vllm_serve_falls_back_to_mean_tpot_and_needs_tpot(tmp_path):
    raw = _json("vllm_serve.json")
    del raw["median_tpot_ms"]
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.tok_s == 1000.0 / raw["mean_tpot_ms"]
    del raw["mean_tpot_ms"]
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError, match=r"record 1: missing key 'median_tpot_ms' \(vllm-serve\)"):
        parse_bench_file(path)


# --------------------------------------------------------------------------- SGLang


def test_sglang_one_batch():
    raw = _jsonl("sglang_one_batch.jsonl")
    fmt, recs = parse(BENCH / "sglang_one_batch.jsonl")
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
                   "(batch 1) runs can be imported (fix: import the file's single-stream records (line 1) "
                   "with --single-stream-only or --bench-records 1, or rerun sglang.bench_one_batch with "
                   "--batch-size 1)")
    assert err.value.key == "batch_size" and err.value.index == 2


@pytest.mark.parametrize("select", [{"records": [1]}, {"single_stream_only": True}])
def test_a_sweep_imports_its_batch1_record_when_selected(select):
    raw = _jsonl("sglang_one_batch_bs1_bs8.jsonl")
    got = parse_bench_file(BENCH / "sglang_one_batch_bs1_bs8.jsonl", **select)
    assert got.format == "sglang-one-batch" and got.unit == "line"
    assert [(r.index, r.tok_s, r.context_tokens, r.batch_size) for r in got.records] == [
        (1, raw[0]["median_decode_throughput"], 512.0, 1)]
    if "single_stream_only" in select:
        assert got.notes == [f"{BENCH / 'sglang_one_batch_bs1_bs8.jsonl'}: --single-stream-only left out "
                             "line 2 (batch_size 8)"]


def test_single_stream_only_of_a_file_without_one_is_refused(tmp_path):
    row = _jsonl("sglang_one_batch_bs1_bs8.jsonl")[1]
    path = tmp_path / "b8.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(dict(row, batch_size=16)) + "\n")
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path, single_stream_only=True)
    assert _one_line(err) == (f"{path}: no single-stream record (batch_size 16, 8) (fix: rerun "
                              "sglang.bench_one_batch with --batch-size 1)")


def test_sglang_serving():
    raw = _jsonl("sglang_serving.jsonl")
    assert raw[0]["request_rate"] == math.inf  # json.dumps wrote Infinity
    fmt, recs = parse(BENCH / "sglang_serving.jsonl")
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
    _, (rec,) = parse(path)
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
    fmt, recs = parse(BENCH / "llama_bench.json")
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


@pytest.mark.parametrize(("n_gen", "depth", "context"), [(127, 0, 64.0), (1, 4096, 4097.0),
                                                         (3, 0, 2.0)])
def test_llama_benchs_context_counts_the_token_each_step_feeds(tmp_path, n_gen, depth, context):
    """llama-bench's tg test decodes n_gen single tokens after n_depth prefilled ones (its
    test_gen: a BOS or random token, then n_gen - 1 random ones), each step's attention
    reading the depth, the tokens fed before and its own: depth + 1 .. depth + n_gen, a mean of
    depth + (n_gen + 1) / 2, the count a serving run's decode gets (the step that makes the
    k-th token feeds the (k-1)-th: prompt + k - 1 read). The import added (n_gen - 1) / 2:
    tg127 at depth 0 went in at 63 (its steps read 1..127, mean 64), tg1 at 4096 at 4096
    (its one step reads 4097), tg3 at depth 0 at 1 (its steps read 1, 2, 3: a mean of 2)."""
    raw = _json("llama_bench.json")
    raw[1]["n_gen"], raw[1]["n_depth"] = n_gen, depth
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(raw))
    _, recs = parse(path)
    assert recs[0].context() == context
    assert "context_tokens = n_depth + [n_gen + 1]/2, rounded" in recs[0].notes


def test_llama_bench_csv_matches_json():
    _, from_json = parse(BENCH / "llama_bench.json")
    fmt, from_csv = parse(BENCH / "llama_bench.csv")
    assert fmt == "llama-bench"
    assert [r.tok_s for r in from_csv] == [r.tok_s for r in from_json]
    assert [r.context_tokens for r in from_csv] == [0.0, 4096.0]
    assert [r.index for r in from_csv] == [3, 4]  # CSV line numbers (header is line 1)


def test_llama_bench_jsonl(tmp_path):
    raw = _json("llama_bench.json")
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in raw))
    fmt, recs = parse(path)
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
    path.write_bytes(b"{\xff\x00garbage")   # (\xff\xfe would be UTF-16's byte-order mark)
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


DETECTED = {"vllm_latency.json": "vllm-latency", "vllm_serve.json": "vllm-serve",
            "sglang_one_batch.jsonl": "sglang-one-batch", "sglang_serving.jsonl": "sglang-serving",
            "llama_bench_readme.json": "llama-bench", "llama_bench_readme.csv": "llama-bench"}


@pytest.mark.parametrize(("name", "forced"), [(n, f) for n in DETECTED for f in FORMATS
                                              if f != DETECTED[n]])
def test_a_forced_format_that_is_not_the_files_is_refused_naming_the_tool(name, forced):
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(BENCH / name, fmt=forced, batch_size=1, output_len=128)
    msg = _one_line(err)
    detected = DETECTED[name]
    assert f": --bench-format {forced}, but this is {TOOLS[detected]} output ({detected}: " in msg
    assert msg.endswith(f"(fix: drop --bench-format (the format is detected), or pass the file "
                        f"{TOOLS[forced]} wrote)")


def test_a_forced_format_settles_a_serving_result_without_either_tools_keys(tmp_path):
    raw = _json("vllm_serve.json")
    for key in ("model_id", "burstiness", "endpoint_type", "spec_decode_acceptance_length"):
        del raw[key]
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError, match=r"record 1: a serving benchmark's result, but without "
                                               r"the keys .* \(fix: pass --bench-format vllm-serve or "
                                               r"sglang-serving\)"):
        parse_bench_file(path)
    assert parse(path, fmt="vllm-serve")[0] == "vllm-serve"
    with pytest.raises(BenchFormatError, match=r"--bench-format llama-bench, but this is a serving"):
        parse_bench_file(path, fmt="llama-bench")


def test_one_file_of_two_tools_is_refused(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text((BENCH / "sglang_serving.jsonl").read_text().splitlines()[0] + "\n"
                    + json.dumps(_json("vllm_serve.json")) + "\n")
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert _one_line(err) == (f"{path}, line 2: line 1 is sglang.bench_serving output (sglang-serving), "
                              "line 2 vllm bench serve output (vllm-serve) (fix: import one tool's "
                              "records at a time with --bench-records)")
    assert parse(path, records=[2])[0] == "vllm-serve"


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
    _, (rec,) = parse(BENCH / "vllm_serve.json")
    assert isinstance(rec, BenchRecord)
    with pytest.raises(AttributeError):
        rec.tok_s = 1.0  # type: ignore[misc]


# --------------------------------------------------------------------------- llama.cpp's README


README = {"llama_bench_readme.json": ("record", 2, 118.881588),
          "llama_bench_readme.jsonl": ("line", 2, 119.844681),
          "llama_bench_readme.csv": ("line", 3, 119.915244)}


@pytest.mark.parametrize("name", list(README))
def test_llama_cpp_readme_outputs(name):
    """The real -o json / -o jsonl / -o csv outputs of llama.cpp's README: the tg128 record,
    with the model, its parameter count and the GPU the file names."""
    unit, index, avg_ts = README[name]
    got = parse_bench_file(BENCH / name)
    assert (got.format, got.unit) == ("llama-bench", unit)
    (rec,) = got.records
    assert (rec.index, rec.tok_s, rec.context_tokens, rec.batch_size, rec.accept_len) == (
        index, avg_ts, 0.0, 1, None)
    assert rec.model == "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
    assert rec.model_params == 7615616512 and rec.gpu == "NVIDIA GeForce RTX 4080"
    assert dict(rec.setup)["n_gpu_layers"] == "99" and dict(rec.setup)["flash_attn"] == "0"
    assert rec.notes.endswith("model_type 'qwen2 7B Q4_K - Medium'; n_gpu_layers 99, flash_attn 0, "
                              "type_k f16, type_v f16, split_mode layer")
    assert got.notes == [f"{BENCH / name}: {unit} {index - 1} (pp512) measures prompt processing, "
                         "not decode; not imported"]


def test_llama_cpp_readme_markdown_is_refused():
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(BENCH / "llama_bench_readme.md")
    assert _one_line(err) == (f"{BENCH / 'llama_bench_readme.md'}, line 1: this is a Markdown table "
                              "(llama-bench's default output), not a result file (fix: rerun "
                              "llama-bench with -o json)")


#: What a Vulkan build of llama-bench printed before `-o json`'s array (ggml-org/llama.cpp
#: issue #15554).
VULKAN_LOG = ("ggml_vulkan: Found 1 Vulkan devices:\n"
              "ggml_vulkan: 0 = AMD Radeon RX 580 Series (RADV POLARIS10) (radv) | uma: 0 | fp16: 0 | "
              "bf16: 0 | warp size: 64 | shared memory: 65536 | int dot: 0 | matrix cores: none\n")


@pytest.mark.parametrize("name", list(README))
def test_log_lines_before_the_body_are_skipped_with_a_note(tmp_path, name):
    path = tmp_path / name
    path.write_text(VULKAN_LOG + (BENCH / name).read_text())
    plain, logged = parse_bench_file(BENCH / name), parse_bench_file(path)
    body = "CSV" if name.endswith(".csv") else "JSON"
    assert logged.notes[0] == (f"{path}: skipped 2 lines before the {body} (lines 1-2): not part of "
                               "the result (log output)")
    shift = 0 if plain.unit == "record" else 2   # line numbers stay the file's
    assert [(r.index, r.tok_s) for r in logged.records] == [
        (r.index + shift, r.tok_s) for r in plain.records]


def test_a_bracketed_log_line_is_not_taken_for_the_json(tmp_path):
    path = tmp_path / "b.json"
    path.write_text("[INFO] loading model\n[2025-09-12 10:00:00] done\n"
                    + (BENCH / "llama_bench_readme.json").read_text())
    got = parse_bench_file(path)
    assert [r.tok_s for r in got.records] == [118.881588]
    assert "skipped 2 lines before the JSON (lines 1-2)" in got.notes[0]


def test_text_that_never_becomes_json_is_refused(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text(VULKAN_LOG)
    with pytest.raises(BenchFormatError, match=r"line 1: not JSON: starts with 'ggml_vulkan: Found 1 "):
        parse_bench_file(path)


# --------------------------------------------------------------------------- broken records


def test_a_truncated_json_lines_file_imports_its_complete_lines_when_selected(tmp_path):
    lines = (BENCH / "sglang_serving.jsonl").read_text().splitlines()
    path = tmp_path / "cut.jsonl"
    path.write_text(lines[0] + "\n" + lines[1][:80])   # killed while writing line 2
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    assert "line 2: invalid JSON: " in _one_line(err) and "it is truncated" in _one_line(err)
    assert [r.index for r in parse(path, records=[1])[1]] == [1]


def test_an_edited_middle_line_is_not_called_truncated(tmp_path):
    lines = (BENCH / "sglang_one_batch.jsonl").read_text().splitlines()
    path = tmp_path / "edit.jsonl"
    path.write_text(lines[0][:-1] + ",}\n" + lines[1] + "\n")
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    msg = _one_line(err)
    assert msg.startswith(f"{path}, line 1: invalid JSON: ")
    assert "truncated" not in msg.removeprefix(str(path))
    assert [r.index for r in parse(path, records=[2])[1]] == [2]


def test_csv_truncated_only_when_the_last_line_is_cut(tmp_path):
    text = (BENCH / "llama_bench_readme.csv").read_text().splitlines()
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(text[:2] + [text[2][:120]]))   # 6 of the 33 fields
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(cut)
    assert _one_line(err).startswith(f"{cut}, line 3: 6 fields, the header has 33: the last line is "
                                     "cut short, the file is truncated (fix: ")
    with pytest.raises(BenchFormatError, match=r"line 2: no text-generation test"):
        parse_bench_file(cut, records=[2])   # the cut line is left out; line 2 is pp512
    edited = tmp_path / "edited.csv"
    edited.write_text("\n".join([text[0], text[1].replace('"CUDA",', ""), text[2]]) + "\n")
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(edited)
    msg = _one_line(err)
    assert msg.startswith(f"{edited}, line 2: 32 fields, the header (line 1) has 33 (fix: ")
    assert "truncated" not in msg.removeprefix(str(edited))
    assert [r.tok_s for r in parse(edited, records=[3])[1]] == [119.915244]


def test_csv_runs_appended_with_their_headers(tmp_path):
    """`llama-bench -o csv >> runs.csv` twice: the second header starts a new block."""
    text = (BENCH / "llama_bench_readme.csv").read_text()
    path = tmp_path / "runs.csv"
    path.write_text(text + text)
    got = parse_bench_file(path)
    assert [(r.index, r.tok_s) for r in got.records] == [(3, 119.915244), (6, 119.915244)]


# --------------------------------------------------------------------------- one configuration


def _readme_tg(**changes) -> dict:
    return dict(_json("llama_bench_readme.json")[1], **changes)


@pytest.mark.parametrize(("key", "values"), [("n_gpu_layers", (10, 99)), ("flash_attn", (False, True))])
def test_records_differing_in_a_setting_are_refused_unless_one_is_picked(tmp_path, key, values):
    """`llama-bench -ngl 10,99` / `-fa 0,1`: the records are two configurations the data has no
    column to tell apart; imported together they would be repeats of one."""
    path = tmp_path / "sweep.jsonl"
    a, b = values
    path.write_text("".join(json.dumps(_readme_tg(**{key: v})) + "\n" for v in (a, a, b)))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    shown = {"n_gpu_layers": ("10", "99"), "flash_attn": ("0", "1")}[key]
    assert _one_line(err) == (f"{path}: the records differ in {key} ({key} {shown[0]}: lines 1-2; "
                              f"{key} {shown[1]}: line 3), which no data column holds: imported "
                              "together they would be repeats of one configuration (fix: import "
                              "one setting at a time, e.g. --bench-records 1-2)")
    assert [r.index for r in parse(path, records=[3])[1]] == [3]
    assert [r.index for r in parse(path, records=[1, 2])[1]] == [1, 2]


def test_a_two_model_file_keeps_each_records_model(tmp_path):
    """`llama-bench -m A -m B`: the records keep the model each names (the import decides)."""
    path = tmp_path / "two.json"
    llama = _readme_tg(model_filename="models/Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                       model_type="llama 8B Q4_K - Medium", model_n_params=8030261312)
    path.write_text(json.dumps([_readme_tg(), llama]))
    recs = parse(path)[1]
    assert [(r.model, r.model_params) for r in recs] == [
        ("models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", 7615616512),
        ("models/Llama-3.1-8B-Instruct-Q4_K_M.gguf", 8030261312)]


def test_a_cpu_run_names_no_gpu(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps([_readme_tg(n_gpu_layers=0)]))
    (rec,) = parse(path)[1]
    assert rec.gpu is None and "n_gpu_layers 0" in rec.notes


def test_records_that_are_not_in_the_file(tmp_path):
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(BENCH / "llama_bench_readme.csv", records=[9])
    assert _one_line(err) == (f"{BENCH / 'llama_bench_readme.csv'}: no record 9 in the file (it holds "
                              "lines 2-3) (fix: pick from the records listed, or drop --bench-records)")
    with pytest.raises(BenchFormatError, match=r"record 1: no text-generation test .* tests seen: "
                                               r"pp512 \(fix: pick tg tests with --bench-records\)"):
        parse_bench_file(BENCH / "llama_bench_readme.json", records=[1])


# --------------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          print_blob=True)
@given(batches=st.lists(st.sampled_from([1, 1, 2, 8, 16]), min_size=1, max_size=8),
       log=st.lists(st.sampled_from(["ggml_vulkan: Found 1 Vulkan devices:",
                                     "load_backend: loaded CUDA backend from libggml-cuda.so",
                                     "[INFO] warming up", ""]), max_size=3))
def test_a_sweep_imports_exactly_its_batch1_lines(tmp_path_factory, batches, log):
    """Any bench_one_batch sweep, after any log lines: --single-stream-only keeps exactly the
    batch-1 lines (their own tok/s, their own line numbers); without it, the file is refused
    at its first line of batch > 1, or imported whole when there is none."""
    base = _jsonl("sglang_one_batch_bs1_bs8.jsonl")[0]
    rows = [dict(base, batch_size=b, median_decode_throughput=100.0 + i) for i, b in enumerate(batches)]
    path = tmp_path_factory.mktemp("sweep") / "sweep.jsonl"
    path.write_text("".join(line + "\n" for line in log)
                    + "".join(json.dumps(r) + "\n" for r in rows))
    # line numbers are the file's; a file of one object is one JSON document: record 1
    first = len(log) + 1 if len(rows) > 1 else 1
    ones = [(first + i, 100.0 + i) for i, b in enumerate(batches) if b == 1]
    if not ones:
        with pytest.raises(BenchFormatError, match=r"no single-stream record"):
            parse_bench_file(path, single_stream_only=True)
    else:
        assert [(r.index, r.tok_s) for r in parse(path, single_stream_only=True)[1]] == ones
    if all(b == 1 for b in batches):
        assert [(r.index, r.tok_s) for r in parse(path)[1]] == ones
    else:
        bad = first + next(i for i, b in enumerate(batches) if b != 1)
        with pytest.raises(BenchFormatError) as err:
            parse_bench_file(path)
        assert err.value.index == bad and "only single-stream" in str(err.value)


@settings(max_examples=100, deadline=None, database=None, derandomize=True,
          print_blob=True)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=12))
def test_span_reads_back_as_bench_records(indices):
    from ddtree_bayes.cli.args import record_list

    assert record_list(span(indices).replace(" ", "")) == sorted(set(indices))


# --------------------------------------------------------------------------- identity
CARDS = ["llama-3.1-8b-instruct", "llama-3.3-70b-instruct", "qwen3-8b", "deepseek-r1", "kimi-k2.6",
         "qwen3.8-27b", "qwen3.8-27b-q4_k_m", "qwen3.8-27b-q8_0", "qwen3-30b-a3b", "gemma-4-12b-it"]
HARDWARE = ["b300", "b200", "h200", "h100", "rtx-pro-6000", "rtx-pro-6000-server", "mi355x",
            "rtx-5090", "rtx-3090", "rtx-pro-6000-maxq", "rtx-a6000", "v100"]


@pytest.mark.parametrize(("name", "card"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct"),      # vLLM model_id
    ("/models/Llama-3.1-8B-Instruct-Q4_K_M.gguf", "llama-3.1-8b-instruct"),
    ("/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", None),           # nothing else guessed
    ("Qwen/Qwen3.8-27B", "qwen3.8-27b"),
    ("qwen3.8-27b-Q4_K_M.gguf", "qwen3.8-27b-q4_k_m"),                  # a card of that quant
    ("Qwen3.8-27B-Q6_K.gguf", "qwen3.8-27b"),
    ("deepseek-ai/DeepSeek-R1", "deepseek-r1"), ("nvidia/DeepSeek-R1-FP4", "deepseek-r1"),
    ("Kimi-K2.6-Q4_K_M-00001-of-00013.gguf", "kimi-k2.6"),
    ("models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", None), ("models/7B/ggml-model-q4_0.gguf", None),
])
def test_match_card(name, card):
    from ddtree_bayes.core.bench_import.identity import match_card

    assert match_card(name, CARDS) == card


@pytest.mark.parametrize(("tag", "bits"), [
    # llama-quantize --help (ggml-org/llama.cpp tools/quantize/quantize.cpp, QUANT_OPTIONS):
    # "Q1_0 : 1.125 bpw quantization", "Q2_0 : 2.25 bpw quantization (group 64)"
    ("Q1_0", 1.125), ("q2_0", 2.25),
    # listed in bits per weight, as before; an unlisted IQ1 type no lower than IQ1_S
    ("IQ1_S", 1.56), ("TQ1_0", 1.69), ("IQ1_X", 1.56)])
def test_a_gguf_tag_is_read_at_its_listed_bits(tag, bits):
    """tag_bits took llama-quantize's table for the IQ and k-quant types but read the 1- and
    2-bit legacy types, listed there as Q1_0 1.125 and Q2_0 2.25 bits per weight, by the
    "Qn: n + 0.5" rule and the IQ1_S floor: Q1_0 as 1.56 (1.39x its bits), Q2_0 as 2.5."""
    from ddtree_bayes.core.bench_import.identity import tag_bits

    assert tag_bits(tag) == bits


def test_a_q1_0_name_on_its_own_cards_bytes_is_not_said(tmp_path):
    """A Q1_0 run (1.125 bits per weight) imported as a card of that checkpoint under another
    name (0.140625 bytes = 1.125 bits per weight) agrees with its tag: nothing said. Read as
    1.56 bits the tag was 1.39x the card's, past the 1.2x test, and the warning told the user
    to make the card they had."""
    from ddtree_bayes.core.model_cards import ModelCard
    from ddtree_bayes.workflows.living.bench import _tagged_quantisation

    card = ModelCard("my-bonsai", 8.19, 8.19, 36, None, None, 0.140625, "bf16", "s")
    rec = BenchRecord(tok_s=300.0, accept_len=None, context_tokens=None, batch_size=1,
                      model="prism-ml/Bonsai-8B-Q1_0", notes="", index=1)
    assert _tagged_quantisation(tmp_path / "b.json", rec, "my-bonsai", card) is None
    bf16 = ModelCard("qwen3-8b", 8.19, 8.19, 36, None, None, 2.0, "bf16", "s")
    said = _tagged_quantisation(tmp_path / "b.json", rec, "qwen3-8b", bf16)
    assert said is not None and "(Q1_0: ~1.125 bits per weight)" in said and "14x" in said


@pytest.mark.parametrize(("gpu_info", "hardware"), [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA H100 80GB HBM3/NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
    ("NVIDIA B200", "b200"), ("NVIDIA GH200 480GB", None),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-server"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "rtx-pro-6000-maxq"),
    ("NVIDIA GeForce RTX 5090", "rtx-5090"), ("NVIDIA GeForce RTX 3090 Ti", None),
    ("NVIDIA GeForce RTX 4080", None), ("NVIDIA RTX A6000", "rtx-a6000"),
    ("Tesla V100-SXM2-32GB", "v100"), ("AMD Instinct MI355X", "mi355x"),
    ("NVIDIA H100 80GB HBM3, NVIDIA GeForce RTX 5090", None), ("", None),
])
def test_match_gpu(gpu_info, hardware):
    from ddtree_bayes.core.bench_import.identity import match_gpu

    assert match_gpu(gpu_info, HARDWARE) == hardware


@pytest.mark.parametrize(("gpu_info", "hardware"), [
    # nvidia-smi's names: the A100 PCIe 80GB writes its memory before its form factor
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"), ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200 NVL", "h200-nvl"),
    ("Tesla V100-SXM2-32GB", "v100-sxm2"), ("Tesla V100-PCIE-32GB", "v100"),
    ("NVIDIA GeForce RTX 3090 Ti", "rtx-3090-ti"), ("NVIDIA GeForce RTX 4080 SUPER", None)])
def test_match_gpu_on_the_built_in_table(gpu_info, hardware):
    """Against every built-in name. "NVIDIA A100 80GB PCIe" (nvidia-smi's name of the A100
    PCIe 80GB) was a100-80gb, the SXM4 row (2.039 TB/s, NVLink fabric) rather than
    a100-pcie-80gb (1.935 TB/s, PCIe): the name's words were matched in order, and its memory
    size stands after the form factor there, before it in the description; an import of such
    a run was priced with the SXM part's bandwidth and link, exit 0."""
    from ddtree_bayes.core.bench_import.identity import match_gpu
    from ddtree_bayes.core.hardware_table import hardware_table

    names = list(hardware_table(workdir="/nonexistent").rows)
    assert {"a100-80gb", "a100-pcie-80gb", "h100-pcie", "v100-sxm2"} <= set(names)
    assert match_gpu(gpu_info, names) == hardware


@settings(max_examples=80, deadline=None, database=None, derandomize=True,
          print_blob=True)
@given(card=st.sampled_from(CARDS), org=st.sampled_from(["", "org/", "/mnt/models/", "C:\\models\\"]),
       case=st.sampled_from([str.lower, str.upper, str.title]),
       quant=st.sampled_from(["", "-Q4_K_M", "-Q8_0", "-IQ4_XS", "-BF16", "-FP8"]),
       gguf=st.booleans())
def test_a_card_name_in_any_obvious_form_is_that_card(card, org, case, quant, gguf):
    """A card's name as a repo id or a file path, in any case, with a quantisation tag and
    .gguf: that card, unless a card of exactly that quantisation exists (then that one)."""
    from ddtree_bayes.core.bench_import.identity import match_card

    name = org + case(card) + quant + (".gguf" if gguf else "")
    exact = (card + quant).lower()
    assert match_card(name, CARDS) == (exact if exact in CARDS else card)


def test_a_mean_prompt_is_rounded_to_whole_tokens(tmp_path):
    """A serving run's prompt is total_input_tokens / completed: 3071 / 3 = 1023.67 tokens was
    written to the context_tokens column, which takes whole tokens. Its context adds half the
    mean output, 4096 / 3 / 2 = 682.67, to that whole prompt: 1024 + 682.67 -> 1707."""
    raw = _json("vllm_serve.json")
    raw["total_input_tokens"], raw["completed"] = 3071, 3
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.context_tokens == 1024.0 and rec.decode_kv == pytest.approx(4096 / 6)
    assert rec.context() == 1707.0
    assert ("context_tokens = total_input_tokens/completed + total_output_tokens/completed/2, "
            "rounded: the mean KV a decode step reads") in rec.notes


def test_a_serving_runs_context_is_the_mean_kv_its_decode_reads(tmp_path):
    """A decode step's attention reads the whole KV cache, prompt and tokens decoded so far,
    and the step model's context cost is linear in it: a 1024-in / 1024-out serving run reads
    1024 + 512 = 1536 tokens on average (the k-th output token reads 1024 + k - 1, tokens 2..n
    decoded), not the 1024 the import wrote. With no output count the prompt stands."""
    raw = _json("vllm_serve.json")
    raw["total_input_tokens"], raw["total_output_tokens"], raw["completed"] = 8192, 8192, 8
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.context() == 1536.0
    del raw["total_output_tokens"]
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.context() == 1024.0 and rec.decode_kv == 0.0


@pytest.mark.parametrize("name", ["vllm_serve.json", "sglang_serving.jsonl"])
def test_a_serving_file_without_output_tokens_says_its_context_is_the_prompt_alone(tmp_path,
                                                                                   name):
    """A serving result without total_output_tokens went in at its prompt alone, 1024, while
    its notes said "context_tokens = total_input_tokens/completed +
    total_output_tokens/completed/2", a rule the row did not follow, exit 0 and no word of the
    half answer left out. The notes now say the prompt alone, and a warning says why."""
    raw = _json(name) if name.endswith(".json") else _jsonl(name)[0]
    del raw["total_output_tokens"]
    path = tmp_path / name
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.context() == 1024.0
    assert "total_output_tokens/completed/2" not in rec.notes
    assert ("context_tokens = total_input_tokens/completed, rounded: the prompt alone, as the "
            "file records no total_output_tokens") in rec.notes
    assert rec.context_caveat == (
        "context_tokens 1024 is the prompt alone: the file records no total_output_tokens, so "
        "the half of each answer a decode step also reads on average is left out (pass "
        "--context P + N/2 for P-token prompts and N-token answers)")
    assert rec.caveat is None   # (the tok/s caveat, said whatever --context says)


@pytest.mark.parametrize(("value", "says"), [
    (-4096, "'total_output_tokens' is -4096: a count of tokens cannot be negative"),
    (float("nan"), "'total_output_tokens' is nan: a count of tokens is a finite number"),
    (float("inf"), "'total_output_tokens' is inf: a count of tokens is a finite number")])
def test_a_serving_files_bad_output_token_count_is_refused(tmp_path, value, says):
    """A negative, NaN or infinite total_output_tokens was taken as 'no output count': the row
    went in at its prompt, 1024, with notes claiming half the output was added, exit 0 (a
    negative total_input_tokens is refused by its key). Now refused the same way."""
    raw = _json("vllm_serve.json")
    raw["total_output_tokens"] = value
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError) as err:
        parse(path)
    assert str(err.value) == (f"{path}, record 1: {says} (fix: pass an unedited vllm-serve "
                              "result file)")


def test_the_result_id_hashes_the_prompt_not_the_context():
    """Files imported before the context counted the decode keep their id: the id hashes the
    prompt (context_tokens), so the same run imported again is still found a duplicate."""
    old = BenchRecord(336.4, None, 1024.0, 1, None, "", 1)
    assert BenchRecord(336.4, None, 1024.0, 1, None, "", 1,
                       decode_kv=256.0).result_id() == old.result_id()


def test_two_appended_llama_bench_documents_say_so(tmp_path):
    """Two `llama-bench -o json` outputs appended to one file were refused as a line "edited
    or holding another program's output", with --bench-records as the fix, which cannot help
    a file that is not one document (an audit's find)."""
    one = (BENCH / "llama_bench.json").read_text()
    path = tmp_path / "two.json"
    path.write_text(one + one)
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    line = len(one.splitlines()) + 1
    assert _one_line(err) == (
        f"{path}, line {line}: holds 2 JSON documents one after another (the outputs of "
        "several runs appended, `>>`?), where a result file is one (fix: split it into one "
        "file per run and import each)")


# ------------------------------------------------- TPOT against the file's output_throughput
def _one_stream_rate(raw: dict) -> float:
    """tok/s of one stream at the file's TPOT, each request paying its TTFT: mean output
    tokens / (mean_ttft + (tokens - 1) x median_tpot). vLLM's and SGLang's TPOT of a request
    is (latency - ttft) / (output tokens - 1), and output_throughput is the total output
    tokens / the run's duration: a closed loop's C streams make at most C of these, and at
    least one (no wait between requests)."""
    n = raw["total_output_tokens"] / raw["completed"]
    return n * 1000.0 / (raw["mean_ttft_ms"] + (n - 1) * raw["median_tpot_ms"])


def test_the_real_serving_layouts_agree_with_their_own_output_throughput():
    """The fixtures (layouts as vLLM and SGLang write them): output_throughput within 3% of
    one stream's rate at their TPOT (C = 1), so the check below has room on either side."""
    for raw in (_json("vllm_serve.json"), *_jsonl("sglang_serving.jsonl")):
        assert raw["output_throughput"] / _one_stream_rate(raw) == pytest.approx(1.0, abs=0.03)
    for name in ("vllm_serve.json", "sglang_serving.jsonl"):
        assert parse_bench_file(BENCH / name).records   # (still imported)


@pytest.mark.parametrize(("name", "scale", "said"), [
    ("vllm_serve.json", 1000.0,
     "median_tpot_ms 2910.46 ms makes 1 stream decode at most 0.344 tok/s (mean_ttft_ms "
     "24.87 ms and 512 output tokens a request), but its output_throughput is 336 tok/s, 977x "
     "that: median_tpot_ms is not this run's milliseconds per output token"),
    ("sglang_serving.jsonl", 1e-3,
     "median_tpot_ms 0.00249247 ms makes one stream alone decode 15757 tok/s (mean_ttft_ms "
     "31.22 ms and 512 output tokens a request), but the output_throughput of its 1 stream, "
     "with no wait between requests, is 391 tok/s, 1/40.3 of that: median_tpot_ms is not "
     "this run's milliseconds per output token")])
def test_a_tpot_that_contradicts_the_files_output_throughput_is_refused(tmp_path, name, scale,
                                                                        said):
    """A TPOT edited x1000 (seconds written as ms, a hand-edited file) imported 0.34 tok/s
    with exit 0 from a run whose output_throughput says 336; /1000, 401,000 tok/s. By hand:
    512 x 1000 / (24.87 + 511 x 2910.46) = 0.344, 336.37 / 0.344 = 977; 512 x 1000 / (31.22
    + 511 x 0.00249247) = 15757, 15757 / 391.22 = 40.3."""
    raw = _json(name) if name.endswith(".json") else _jsonl(name)[0]
    path = tmp_path / name
    path.write_text(json.dumps(dict(raw, median_tpot_ms=raw["median_tpot_ms"] * scale)))
    with pytest.raises(BenchFormatError) as err:
        parse_bench_file(path)
    msg = _one_line(err)
    assert msg.startswith(f"{path}, record 1: median_tpot_ms ")
    assert said in msg, msg
    assert msg.endswith("(fix: pass the result file the benchmark wrote, unedited: its "
                        "*_tpot_ms keys are milliseconds per output token)")


def test_output_throughput_between_one_stream_and_c_streams_is_kept(tmp_path):
    """At C = 8 a closed loop makes between one stream's rate (its tail: the last requests
    decoding alone) and 8 streams' (x 3 of slack each way: the TPOT is the median request's);
    a rate-limited run waits between arrivals, so far below one stream's rate is no
    contradiction there."""
    raw = _json("vllm_serve.json")
    one = _one_stream_rate(raw)
    for out in (one / 2.9, 3 * one, 8 * 2.9 * one):
        path = tmp_path / f"c8_{out:.0f}.json"
        path.write_text(json.dumps(dict(raw, max_concurrency=8, num_prompts=64, completed=64,
                                        max_concurrent_requests=8, output_throughput=out,
                                        total_output_tokens=64 * 512)))
        (rec,) = parse_bench_file(path).records
        assert rec.batch_size == 8
    for out, side in ((one / 3.1, "one stream alone"), (8 * 3.1 * one, "8 streams decode")):
        path.write_text(json.dumps(dict(raw, max_concurrency=8, num_prompts=64, completed=64,
                                        max_concurrent_requests=8, output_throughput=out,
                                        total_output_tokens=64 * 512)))
        with pytest.raises(BenchFormatError) as err:
            parse_bench_file(path)
        assert side in _one_line(err)
    # Poisson arrivals at 0.05 requests/s: 0.117 in flight, output_throughput ~12% of a stream
    slow = tmp_path / "rate.json"
    slow.write_text(json.dumps(dict(raw, request_rate=0.05, max_concurrency=None,
                                    request_throughput=0.0499, mean_e2el_ms=1512.0,
                                    output_throughput=0.0499 * 512)))
    (rec,) = parse_bench_file(slow).records
    assert rec.batch_size == 1 and rec.tok_s == pytest.approx(1000.0 / raw["median_tpot_ms"])


def _detailed_serve(tmp_path, name: str, **extra) -> Path:
    """The vllm_serve.json fixture as `vllm bench serve --save-detailed` writes it for two
    requests at --max-concurrency 2: 1000-token prompts, 101 and 301 output tokens."""
    raw = _json("vllm_serve.json")
    raw.update(max_concurrency=2, num_prompts=2, completed=2, max_concurrent_requests=2,
               total_input_tokens=2000, total_output_tokens=402, input_lens=[1000, 1000],
               output_lens=[101, 301], ttfts=[0.025, 0.025], errors=["", ""],
               generated_texts=["", ""], **extra)
    path = tmp_path / name
    path.write_text(json.dumps(raw))
    return path


def test_a_detailed_serving_runs_context_weighs_each_request_by_its_steps(tmp_path):
    """Per-request lengths (--save-detailed: input_lens, output_lens) were passed over for the
    means: 1000 + 402 / 2 / 2 = 1100.5 -> 1100, exit 0. At C streams a request's TPOT is its
    own mean KV beside the C - 1 others in flight, and a long request is in flight for more
    steps. By hand: request-weighted 1000 + (50.5 + 150.5) / 2 = 1100.5; step-weighted
    1000 + (100 x 50.5 + 300 x 150.5) / 400 = 1125.5; at C = 2: (1100.5 + 1125.5) / 2 = 1113."""
    _, (rec,) = parse(_detailed_serve(tmp_path, "serve.json"))
    assert rec.context_tokens == 1000.0   # (the prompt, which the result's id hashes)
    assert rec.decode_kv == pytest.approx(113.0)
    assert rec.context() == 1113.0
    assert ("context_tokens = the mean KV a decode step reads, from each request's input_lens "
            "and output_lens, the k-th of n output tokens reading the prompt + k - 1: at C = 2 "
            "streams [the requests' mean + 1 x the mean over their decode steps] / 2, rounded, "
            "1113.0, where the means alone give 1100.5") in rec.notes
    assert "total_output_tokens/completed/2" not in rec.notes


def test_a_detailed_serving_run_at_one_stream_weighs_requests_alike(tmp_path):
    """At one stream a request's TPOT reads its own KV only: the mean TPOT is the requests'
    mean, 1000 + (50.5 + 150.5) / 2 = 1100.5 -> 1100 (as the means give); a failed request
    (output 0, its error said) is no TPOT and is left out: 1000 + 150.5 = 1150.5 -> 1150
    beside a 500-token prompt that failed (1 of 20 requests)."""
    raw = _json("vllm_serve.json")
    raw.update(num_prompts=2, completed=2, total_input_tokens=2000, total_output_tokens=402,
               input_lens=[1000, 1000], output_lens=[101, 301], errors=["", ""])
    path = tmp_path / "one.json"
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.context() == 1100.0
    raw.update(num_prompts=20, completed=19, failed=1, total_input_tokens=19000,
               total_output_tokens=19 * 301, input_lens=[500] + [1000] * 19,
               output_lens=[0] + [301] * 19, errors=["timeout"] + [""] * 19)
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.context() == 1150.0


def test_detailed_lengths_that_are_not_the_runs_are_refused(tmp_path):
    """Per-request lengths whose sum is not the run's total_output_tokens are not this run's
    (an edited file): refused by their key, nothing imported."""
    path = _detailed_serve(tmp_path, "serve.json")
    raw = json.loads(path.read_text())
    raw["output_lens"] = [101, 999]
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError) as err:
        parse(path)
    assert _one_line(err) == (
        f"{path}, record 1: 'output_lens' sum to 1100 tokens over the 2 completed requests, "
        "but total_output_tokens is 402: the lengths are not this run's (fix: pass an "
        "unedited vllm-serve result file)")


@pytest.mark.parametrize(("errors", "says"), [
    (["", "", "timeout"], "'errors' lists 3 requests but 'output_lens' 2: the errors are not "
                          "these requests'"),
    (["timeout"], "'errors' lists 1 requests but 'output_lens' 2: the errors are not these "
                  "requests'"),
    ([], "'errors' lists 0 requests but 'output_lens' 2: the errors are not these requests'"),
    ("timeout", "'errors' is 'timeout', not a list of one error per request"),
])
def test_detailed_errors_that_are_not_one_per_request_are_refused(tmp_path, errors, says):
    """An 'errors' list of another length than the lengths' (or no list) says nothing of
    which request failed: it was read as "none failed" and the run imported with exit 0
    (ctx 1113, as if the file said so). Refused by its key, nothing imported."""
    path = _detailed_serve(tmp_path, "serve.json")
    raw = json.loads(path.read_text())
    raw["errors"] = errors
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError) as err:
        parse(path)
    assert _one_line(err) == (f"{path}, record 1: {says} (fix: pass an unedited vllm-serve "
                              "result file)")
    assert err.value.key == "errors"


@pytest.mark.parametrize(("key", "values", "says"), [
    ("input_lens", [1023.5, 1000], "'input_lens' request 1 is 1023.5 tokens: a count of tokens "
                                   "is a whole number"),
    ("output_lens", [101.5, 300.5], "'output_lens' request 1 is 101.5 tokens: a count of "
                                    "tokens is a whole number"),
    ("input_lens", [1000, -1000], "'input_lens' request 2 is -1000 tokens: a count of tokens "
                                  "cannot be negative"),
    ("output_lens", [101, -301], "'output_lens' request 2 is -301 tokens: a count of tokens "
                                 "cannot be negative"),
    ("input_lens", [1000, "1000"], "'input_lens' request 2 is '1000', not a number of tokens"),
    ("output_lens", [101, None], "'output_lens' request 2 is None, not a number of tokens"),
    ("input_lens", [1000, True], "'input_lens' request 2 is True, not a number of tokens"),
    ("input_lens", 2000, "'input_lens' is 2000, not a list of one count per request"),
])
def test_detailed_lengths_that_are_no_token_counts_are_refused(tmp_path, key, values, says):
    """A length of 1023.5 tokens was taken as given (ctx 1122 instead of 1113, exit 0); a
    negative one was refused as 'not a list of token counts', which named neither the request
    nor what was wrong. Each is refused naming the key, the request (1-based) and the value."""
    path = _detailed_serve(tmp_path, "serve.json")
    raw = json.loads(path.read_text())
    raw[key] = values
    path.write_text(json.dumps(raw))
    with pytest.raises(BenchFormatError) as err:
        parse(path)
    assert _one_line(err) == (f"{path}, record 1: {says} (fix: pass an unedited vllm-serve "
                              "result file)")
    assert err.value.key == key


def test_detailed_lengths_written_as_whole_floats_are_counts(tmp_path):
    """1000.0 is a whole count (a JSON writer may spell it so): the same context, 1113."""
    path = _detailed_serve(tmp_path, "serve.json")
    raw = json.loads(path.read_text())
    raw.update(input_lens=[1000.0, 1000.0], output_lens=[101.0, 301.0])
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.context() == 1113.0


def test_a_serving_run_of_varied_outputs_without_their_lengths_says_so(tmp_path):
    """sglang.bench_serving --random-range-ratio 0.5 --random-output-len 512 drew each output
    from 256..512 tokens; at 4 streams its decode steps read more than prompt + half the mean
    output (a long request is in flight for more steps), which the file cannot say without
    --output-details: the notes say so, with the size for outputs uniform on the 257 whole
    numbers 256..512: (C - 1) / C x Var(n) / (2 E[n]) = 3/4 x (257^2 - 1)/12 / (2 x 384)
    = 3/4 x 5504 / 768 = 5.375 tokens. At range ratio 1 (every output 512) nothing is said."""
    raw = dict(_jsonl("sglang_serving.jsonl")[0], random_range_ratio=0.5, max_concurrency=4,
               concurrency=3.99, total_output_tokens=16 * 384,
               output_throughput=4 * 1000 / 2.4924749999999998 * 0.9)
    path = tmp_path / "sg.jsonl"
    path.write_text(json.dumps(raw) + "\n")
    _, (rec,) = parse(path)
    assert rec.context() == 1024 + 192
    assert ("output lengths drawn from 256..512 tokens (random_range_ratio 0.5, "
            "random_output_len 512) and no output_lens: at 4 streams the decode steps read "
            "about 5.4 tokens more than this mean, (C - 1) / C x Var(n) / (2 E[n]), left out "
            "(--output-details lists each request's lengths)") in rec.notes
    path.write_text(json.dumps(dict(raw, random_range_ratio=1.0)) + "\n")
    _, (rec,) = parse(path)
    assert "output lengths drawn" not in rec.notes


def test_a_sharegpt_serving_run_without_its_lengths_says_they_varied(tmp_path):
    """sglang.bench_serving --dataset-name sharegpt without --sharegpt-output-len decodes each
    conversation's own answer length, which varies by an order of magnitude: at 4 streams
    the decode steps read more than prompt + half the mean output, by an amount the file
    cannot say without --output-details; the notes say so. With --sharegpt-output-len every
    output has that length (ignore_eos is on by default) and nothing is said."""
    raw = dict(_jsonl("sglang_serving.jsonl")[0], dataset_name="sharegpt", max_concurrency=4,
               concurrency=3.99, output_throughput=4 * 1000 / 2.4924749999999998 * 0.9)
    path = tmp_path / "sg.jsonl"
    path.write_text(json.dumps(raw) + "\n")
    _, (rec,) = parse(path)
    assert ("output lengths of the sharegpt dataset's answers (no sharegpt_output_len) and no "
            "output_lens: at 4 streams the decode steps read more than this mean, by "
            "(C - 1) / C x Var(n) / (2 E[n]), left out (--output-details lists each request's "
            "lengths)") in rec.notes
    path.write_text(json.dumps(dict(raw, sharegpt_output_len=256)) + "\n")
    _, (rec,) = parse(path)
    assert "sharegpt dataset's answers" not in rec.notes


def _serve_with(tmp_path, **change) -> Path:
    """:func:`_detailed_serve` with ``change`` applied (lists of any length)."""
    path = _detailed_serve(tmp_path, "serve.json")
    raw = json.loads(path.read_text())
    raw.update(change)
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize(("change", "key", "says"), [
    # completed 2, failed 0, but request 2's error is written: a request with an error did
    # not complete (both tools write an error text for a failed request only)
    ({"errors": ["", "timeout"], "output_lens": [101, 0], "total_output_tokens": 101},
     "errors", "'errors' holds 1 error message but failed is 0: a request with an error "
               "did not complete"),
    # completed 10 (of 10 listed), failed 0, 3 errors: the brief's case
    ({"num_prompts": 10, "completed": 10, "input_lens": [1000] * 10,
      "output_lens": [101] * 7 + [0] * 3, "total_output_tokens": 707,
      "errors": [""] * 7 + ["timeout", "reset", "500"], "total_input_tokens": 10000},
     "errors", "'errors' holds 3 error messages but failed is 0: a request with an error did "
               "not complete"),
    # one failed request of five, but none shows it: no error, every request decoded tokens
    ({"num_prompts": 5, "completed": 4, "failed": 1, "input_lens": [1000] * 5,
      "output_lens": [101, 301, 101, 301, 50], "total_output_tokens": 854,
      "errors": [""] * 5, "total_input_tokens": 5000},
     "failed", "failed is 1 but 'errors' and 'output_lens' show 0 failed requests (an error "
               "message, or no output token): the counts are not these requests'"),
    # three requests listed, but completed 2 + failed 0 is 2
    ({"input_lens": [1000] * 3, "output_lens": [101, 301, 0], "errors": ["", "", ""]},
     "errors", "'errors' lists 3 requests but completed 2 + failed 0 is 2: the errors are not "
               "these requests'"),
])
def test_errors_that_contradict_the_runs_counts_are_refused(tmp_path, change, key, says):
    """vLLM's serve.py and SGLang's bench_serving write one 'errors' entry per request sent
    (completed + failed of them), an error text only for a failed request (a success keeps
    RequestFuncOutput's "", a failure the HTTP reason or the traceback) and 0 output tokens
    for a failed one. A file whose errors say otherwise than its counts was imported with
    exit 0 (ctx from lengths read as "none failed"). Refused by the key, nothing imported."""
    path = _serve_with(tmp_path, **change)
    with pytest.raises(BenchFormatError) as err:
        parse(path)
    assert _one_line(err) == (f"{path}, record 1: {says} (fix: pass an unedited vllm-serve "
                              "result file)")
    assert err.value.key == key


def test_errors_that_agree_with_the_counts_are_imported(tmp_path):
    """A failed request whose error text is empty (a server that sent no HTTP reason phrase)
    but whose output is 0 tokens agrees with failed 1; so does the SGLang layout, which
    writes no 'failed' key (its failures are the requests that did not complete)."""
    path = _serve_with(tmp_path, num_prompts=5, completed=4, failed=1,
                       input_lens=[1000] * 5, output_lens=[101, 301, 101, 301, 0],
                       total_output_tokens=804, errors=[""] * 5, total_input_tokens=4000)
    _, (rec,) = parse(path)
    assert rec.context_tokens == 1000.0
    raw = _jsonl("sglang_serving.jsonl")[0]
    raw.update(num_prompts=3, completed=2, input_lens=[1024] * 3, output_lens=[512, 512, 0],
               total_input_tokens=2048, total_output_tokens=1024, errors=["", "", "timeout"])
    (tmp_path / "s.jsonl").write_text(json.dumps(raw) + "\n")
    _, (rec,) = parse(tmp_path / "s.jsonl")
    assert rec.context() == 1024 + 256
    raw.update(errors=["", "reset", "timeout"])
    (tmp_path / "s.jsonl").write_text(json.dumps(raw) + "\n")
    with pytest.raises(BenchFormatError) as err:
        parse(tmp_path / "s.jsonl")
    assert "'errors' holds 2 error messages but 2 of its 3 requests completed: a request " \
           "with an error did not complete" in _one_line(err)


@pytest.mark.parametrize(("change", "says"), [
    ({"total_input_tokens": -1234567}, "'total_input_tokens' is -1234567: a count of tokens "
                                       "cannot be negative"),
    ({"total_output_tokens": -1234567}, "'total_output_tokens' is -1234567: a count of tokens "
                                        "cannot be negative"),
    ({"output_lens": [1234567.5, 301]}, "'output_lens' request 1 is 1234567.5 tokens: a count "
                                        "of tokens is a whole number"),
    ({"input_lens": [1000, -1234567]}, "'input_lens' request 2 is -1234567 tokens: a count of "
                                       "tokens cannot be negative"),
    ({"output_lens": [101, 1234567], "total_output_tokens": 1234568},
     "'output_lens' sum to 1234668 tokens over the 2 completed requests, but "
     "total_output_tokens is 1234568: the lengths are not this run's"),
])
def test_counts_in_messages_are_the_files_numbers(tmp_path, change, says):
    """Counts were printed with {:g}: 1234567 tokens read "-1.23457e+06", another number
    than the file's (a user searching the file for it found nothing). Integers print as
    integers, other values with every digit they have."""
    path = _serve_with(tmp_path, **change)
    with pytest.raises(BenchFormatError) as err:
        parse(path)
    assert _one_line(err) == (f"{path}, record 1: {says} (fix: pass an unedited vllm-serve "
                              "result file)")


def test_a_long_prompt_alone_is_said_at_its_count(tmp_path):
    """The prompt-alone caveat said 'context_tokens 1.23457e+06' for a 1234567-token prompt."""
    raw = _json("vllm_serve.json")
    del raw["total_output_tokens"]
    raw.update(total_input_tokens=1234567 * raw["completed"])
    path = tmp_path / "serve.json"
    path.write_text(json.dumps(raw))
    _, (rec,) = parse(path)
    assert rec.context_caveat is not None
    assert rec.context_caveat.startswith("context_tokens 1234567 is the prompt alone")

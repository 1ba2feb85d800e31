"""Read decode throughput (one stream, or a serving run's C streams) out of the result files
of benchmark tools.

Pure parsing: stdlib only, no pandas/numpy, nothing written. Each supported format was
taken from the tool's source (see ``tests/fixtures/bench/README.md`` for the exact
repository, path and function):

``vllm-latency``
    ``vllm bench latency --output-json FILE`` (vllm/benchmarks/latency.py ``main``; older
    benchmarks/benchmark_latency.py): ``{"avg_latency", "std_latency", "latencies",
    "percentiles"}``. The run's flags are NOT saved, so ``batch_size`` and ``output_len``
    must be given, or read from the ``FILE.pytorch.json`` side file that vLLM writes when
    ``SAVE_TO_PYTORCH_BENCHMARK_FORMAT`` is set (that file is also accepted directly).
    ``tok_s = output_len / avg_latency``: one whole generation, so it includes the prefill
    of ``input_len`` tokens and the engine overhead.
``vllm-serve``
    ``vllm bench serve --save-result`` (vllm/benchmarks/serve.py ``main_async``/``benchmark``):
    ``tok_s = 1000 / median_tpot_ms`` (decode only, first token excluded); ``accept_len``
    from ``spec_decode_acceptance_length`` (= 1 + accepted/drafts, bonus included).
``sglang-one-batch``
    ``python -m sglang.bench_one_batch --result-filename`` (python/sglang/bench_one_batch.py
    ``latency_test_run_once``): JSON Lines; ``tok_s = median_decode_throughput``
    (= batch_size / median per-step decode latency; no speculative decoding in this tool).
``sglang-serving``
    ``python -m sglang.bench_serving --output-file`` (python/sglang/bench_serving.py
    ``benchmark``): JSON Lines; ``tok_s = 1000 / median_tpot_ms``; ``accept_len`` from
    ``accept_length`` (the server's ``avg_spec_accept_length``, bonus token included).
``llama-bench``
    ``llama-bench -o json`` / ``-o jsonl`` / ``-o csv`` (tools/llama-bench/llama-bench.cpp
    ``json_printer``/``jsonl_printer``/``csv_printer``): text-generation rows (``n_prompt == 0``,
    ``n_gen > 0``) give ``tok_s = avg_ts``; prompt-processing and pp+tg rows are skipped.

Every format's context is the mean KV a decode step of the run read (``BenchRecord.context``):
its prompt (``total_input_tokens / completed``, ``input_len``, ``n_depth``) plus half what each
stream decoded (``total_output_tokens / completed / 2``, ``output_len / 2``, ``(n_gen + 1) / 2``
for llama-bench, whose every generated token is a decode step that also reads the token it
feeds: depth + 1 .. depth + n_gen), since the step model's context cost is linear in it.

A serving run at concurrency C > 1 (vLLM ``bench serve``, SGLang ``bench_serving``) is
imported at C (the streams that ran: ``max_concurrency`` capped by the requests, vLLM's
``max_concurrent_requests`` and SGLang's measured mean in flight) with tok_s the C streams'
total; another batched record is refused unless the caller selects records first
(``records``, ``single_stream_only``): selection happens before any record is validated, so a
sweep (``--batch-size 1 8 16``) imports its batch-1 records. A
forced format is checked against the file's keys and refused when the file is another tool's
output. Records that differ in a setting the data has no column for (llama-bench
``n_gpu_layers``, ``flash_attn``, ...; SGLang ``run_name``) are refused together.

Modules: ``records`` (the record type, the error, file loading and format detection),
``formats`` (one parser per tool, selection, and :func:`parse_bench_file`) and ``identity``
(which model card and GPU a file's names are).
"""

from __future__ import annotations

from ddtree_bayes.core.bench_import.formats import parse_bench_file
from ddtree_bayes.core.bench_import.reading import (
    FORMATS,
    TOOLS,
    BenchFile,
    BenchFormatError,
    BenchRecord,
    detect_format,
    span,
)

__all__ = ["FORMATS", "TOOLS", "BenchFile", "BenchFormatError", "BenchRecord", "detect_format",
           "parse_bench_file", "span"]

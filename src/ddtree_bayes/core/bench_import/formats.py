"""Bench import: one parser per benchmark tool, and ``parse_bench_file`` which dispatches."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ddtree_bayes.core.bench_import.records import (
    _FIX_FMT,
    FORMATS,
    BenchFormatError,
    BenchRecord,
    _detect,
    _Doc,
    _is_vllm_pytorch,
    _load,
    _read_text,
    _Rec,
)

# --------------------------------------------------------------------------- formats


_VLLM_LAT_FIX = ("give the run's flags: batch_size=1 and output_len=N (vllm bench latency does not save "
                 "--batch-size/--output-len), or keep the FILE.pytorch.json written with "
                 "SAVE_TO_PYTORCH_BENCHMARK_FORMAT=1 next to it")


def _vllm_sidecar(path: Path) -> Path | None:
    """The ``<stem>.pytorch.json`` vLLM writes next to ``--output-json`` (os.path.splitext rule)."""
    if path.name.endswith(".pytorch.json"):
        return None
    side = path.with_name(path.stem + ".pytorch.json")
    return side if side.is_file() else None


def _vllm_pytorch_latency(path: Path, doc: _Doc) -> tuple[int, dict[str, Any], dict[str, Any], str | None]:
    """(index, metric extra_info + values, args, model) of the 'latency' record of a pytorch-format file."""
    for index, rec in doc.records:
        metric = rec.get("metric")
        if _is_vllm_pytorch(rec) and isinstance(metric, dict) and metric.get("name") == "latency":
            info = metric.get("extra_info")
            info = info if isinstance(info, dict) else {}
            bench = rec["benchmark"].get("extra_info")
            args = bench.get("args") if isinstance(bench, dict) else None
            if not isinstance(args, dict):
                raise BenchFormatError("missing key 'benchmark.extra_info.args' (vllm-latency)", file=path,
                                       index=index, unit=doc.unit, key="args",
                                       fix="pass the .pytorch.json file vLLM wrote, unedited")
            data = dict(info)
            data["latencies"] = metric.get("benchmark_values")
            model = rec["model"].get("name") if isinstance(rec.get("model"), dict) else None
            return index, data, args, model if isinstance(model, str) else None
    index = doc.records[0][0]
    raise BenchFormatError("no record with metric.name 'latency' (only vllm bench latency's "
                           "PyTorch-format file is supported)", file=path, index=index, unit=doc.unit,
                           key="metric.name", fix="pass the --output-json file of vllm bench latency")


def _parse_vllm_latency(path: Path, doc: _Doc, flags: dict[str, int | None]) -> list[BenchRecord]:
    args: dict[str, Any] = {}
    model: str | None = None
    source = "flags"
    if _is_vllm_pytorch(doc.records[0][1]):
        index, data, args, model = _vllm_pytorch_latency(path, doc)
        source = "benchmark.extra_info.args"
    else:
        index, data = doc.records[0]
        side = _vllm_sidecar(path)
        if side is not None and (flags["batch_size"] is None or flags["output_len"] is None):
            side_doc = _load(side, _read_text(side))
            _, _, args, model = _vllm_pytorch_latency(side, side_doc)
            source = f"{side.name} args"
    rec = _Rec(path, index, doc.unit, "vllm-latency", data)
    avg = rec.positive("avg_latency")
    arg = _Rec(path, index, doc.unit, "vllm-latency", args)
    batch = flags["batch_size"] if flags["batch_size"] is not None else arg.integer(
        "batch_size", required=False)
    out_len = flags["output_len"] if flags["output_len"] is not None else arg.integer(
        "output_len", required=False)
    in_len = flags["input_len"] if flags["input_len"] is not None else arg.integer(
        "input_len", required=False)
    if batch is None or out_len is None:
        missing = "batch_size" if batch is None else "output_len"
        raise rec.error(f"{missing} is unknown: the JSON records only latencies", key=missing,
                        fix=_VLLM_LAT_FIX)
    rec.single_stream("batch_size", batch, fix="rerun vllm bench latency with --batch-size 1")
    n = arg.integer("n", required=False)
    if (n is not None and n != 1) or args.get("use_beam_search") is True:
        raise rec.error(f"n {n} / beam search: several sequences per prompt are not single-stream",
                        key="n", fix="rerun vllm bench latency with --n 1 and without --use-beam-search")
    if out_len <= 0:
        raise rec.error(f"output_len {out_len} must be positive", key="output_len", fix=_VLLM_LAT_FIX)
    tok_s = batch * out_len / avg
    notes = (f"vllm bench latency (vllm-latency): tok_s = batch_size*output_len/avg_latency = "
             f"{batch}*{out_len}/{avg:g}; batch_size/output_len from {source}; whole generation, "
             f"includes the prefill of input_len tokens and engine overhead")
    spec = args.get("speculative_config")
    if spec:
        method = spec.get("method") if isinstance(spec, dict) else None
        notes += (f"; speculative decoding ({method or 'speculative_config set'}) but the file "
                  "records no acceptance length")
    return [BenchRecord(tok_s=tok_s, accept_len=None,
                        context_tokens=float(in_len) if in_len is not None else None,
                        batch_size=batch, model=model or arg.text("model"), notes=notes, index=index)]


def _tpot_tok_s(rec: _Rec) -> tuple[float, str]:
    fix = "rerun with the default --percentile-metrics (they include tpot) and streaming on"
    for key in ("median_tpot_ms", "mean_tpot_ms"):
        if rec.data.get(key) is not None:
            return 1000.0 / rec.positive(key, fix=fix), key
    raise rec.error(f"missing key 'median_tpot_ms' ({rec.fmt})", key="median_tpot_ms", fix=fix)


def _serving_concurrency(rec: _Rec, fix: str) -> int:
    conc = rec.integer("max_concurrency", required=False)
    if conc is None and rec.integer("completed", required=False) == 1:
        return 1  # one request: nothing could overlap
    return rec.single_stream("max_concurrency", conc, fix=fix)


def _mean_prompt(rec: _Rec) -> float | None:
    total = rec.number("total_input_tokens", required=False)
    done = rec.number("completed", required=False)
    if total is None or not done or not math.isfinite(total) or done <= 0:
        return None
    return total / done


def _parse_vllm_serve(path: Path, doc: _Doc) -> list[BenchRecord]:
    out = []
    for index, data in doc.records:
        rec = _Rec(path, index, doc.unit, "vllm-serve", data)
        conc = _serving_concurrency(rec, fix="rerun vllm bench serve with --max-concurrency 1")
        tok_s, key = _tpot_tok_s(rec)
        accept = rec.accept("spec_decode_acceptance_length")
        notes = (f"vllm bench serve (vllm-serve): tok_s = 1000/{key} ({rec.data[key]:g} ms; decode only, "
                 "first token excluded); context_tokens = total_input_tokens/completed"
                 + ("; accept_len = spec_decode_acceptance_length" if accept is not None else ""))
        out.append(BenchRecord(tok_s=tok_s, accept_len=accept, context_tokens=_mean_prompt(rec),
                               batch_size=conc, model=rec.text("model_id", "model"), notes=notes,
                               index=index))
    return out


def _parse_sglang_serving(path: Path, doc: _Doc) -> list[BenchRecord]:
    out = []
    for index, data in doc.records:
        rec = _Rec(path, index, doc.unit, "sglang-serving", data)
        conc = _serving_concurrency(rec, fix="rerun sglang.bench_serving with --max-concurrency 1")
        tok_s, key = _tpot_tok_s(rec)
        accept = rec.accept("accept_length")
        info = data.get("server_info")
        model = rec.text("model", "model_path", "model_id")
        if model is None and isinstance(info, dict):
            model = _Rec(path, index, doc.unit, "sglang-serving", info).text("model_path",
                                                                             "served_model_name")
        notes = (f"sglang.bench_serving (sglang-serving): tok_s = 1000/{key} ({rec.data[key]:g} ms; "
                 "decode only, first token excluded); context_tokens = total_input_tokens/completed"
                 + ("; accept_len = accept_length (server avg_spec_accept_length)"
                    if accept is not None else ""))
        out.append(BenchRecord(tok_s=tok_s, accept_len=accept, context_tokens=_mean_prompt(rec),
                               batch_size=conc, model=model, notes=notes, index=index))
    return out


def _parse_sglang_one_batch(path: Path, doc: _Doc) -> list[BenchRecord]:
    out = []
    for index, data in doc.records:
        rec = _Rec(path, index, doc.unit, "sglang-one-batch", data)
        batch = rec.integer("batch_size")
        rec.single_stream("batch_size", batch, fix=f"rerun sglang.bench_one_batch with --batch-size 1, "
                                                   f"or delete {doc.unit} {index}")
        in_len = rec.integer("input_len")
        out_len = rec.integer("output_len")
        tok_s = rec.positive("median_decode_throughput",
                             fix="rerun sglang.bench_one_batch with --output-len > 1 (decode timing "
                                 "is recorded from the 2nd output token)")
        notes = (f"sglang.bench_one_batch (sglang-one-batch): tok_s = median_decode_throughput "
                 f"(batch_size/median_decode_latency, decode steps only); input_len {in_len}, "
                 f"output_len {out_len}, run_name {data.get('run_name')!r}; run without speculative decoding")
        assert in_len is not None
        out.append(BenchRecord(tok_s=tok_s, accept_len=None, context_tokens=float(in_len),
                               batch_size=batch, model=rec.text("model", "model_path"), notes=notes,
                               index=index))
    return out


def _parse_llama_bench(path: Path, doc: _Doc) -> list[BenchRecord]:
    out = []
    kinds: list[str] = []
    for index, data in doc.records:
        rec = _Rec(path, index, doc.unit, "llama-bench", data)
        n_prompt = rec.integer("n_prompt")
        n_gen = rec.integer("n_gen")
        assert n_prompt is not None and n_gen is not None
        if n_prompt != 0 or n_gen <= 0:
            kinds.append(f"pp{n_prompt}" if n_gen == 0 else f"pp{n_prompt}+tg{n_gen}")
            continue
        depth = rec.integer("n_depth", required=False) or 0
        tok_s = rec.positive("avg_ts")
        model_type = rec.text("model_type")
        notes = (f"llama-bench (llama-bench {doc.kind}): tok_s = avg_ts of test tg{n_gen}"
                 + (f" @ d{depth}" if depth else "") + " (mean of samples_ts, generation only); "
                 f"context_tokens = n_depth; model_type {model_type!r}")
        out.append(BenchRecord(tok_s=tok_s, accept_len=None, context_tokens=float(depth), batch_size=1,
                               model=rec.text("model_filename") or model_type, notes=notes, index=index))
    if not out:
        seen = ", ".join(sorted(set(kinds))) or "none"
        raise BenchFormatError(f"no text-generation test (n_prompt 0, n_gen > 0); tests seen: {seen}",
                               file=path, index=doc.records[0][0], unit=doc.unit, key="n_gen",
                               fix="rerun llama-bench with -n 128 (a tg test) and -o json")
    return out


def parse_bench_file(path: str | Path, fmt: str | None = None, *, batch_size: int | None = None,
                     output_len: int | None = None,
                     input_len: int | None = None) -> tuple[str, list[BenchRecord]]:
    """Parse a benchmark result file into single-stream records: ``(format, records)``.

    ``fmt`` forces a format (one of ``FORMATS``); by default it is detected. ``batch_size``,
    ``output_len`` and ``input_len`` are the run's flags for ``vllm-latency``, whose JSON does
    not record them; they override the ``.pytorch.json`` side file. Other formats ignore them.
    Raises ``BenchFormatError`` (one line: file, record, key and fix) on any problem.
    """
    path = Path(path)
    if fmt is not None and fmt not in FORMATS:
        raise BenchFormatError(f"unknown format {fmt!r}", file=path, fix=_FIX_FMT)
    text = _read_text(path)
    doc = _load(path, text)
    fmt = fmt or _detect(path, doc)
    if fmt == "vllm-latency":
        records = _parse_vllm_latency(path, doc, {"batch_size": batch_size, "output_len": output_len,
                                                  "input_len": input_len})
    elif fmt == "vllm-serve":
        records = _parse_vllm_serve(path, doc)
    elif fmt == "sglang-serving":
        records = _parse_sglang_serving(path, doc)
    elif fmt == "sglang-one-batch":
        records = _parse_sglang_one_batch(path, doc)
    else:
        records = _parse_llama_bench(path, doc)
    return fmt, records

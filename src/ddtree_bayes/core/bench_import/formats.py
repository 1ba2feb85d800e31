"""Bench import: one parser per benchmark tool, and ``parse_bench_file``, which selects the
records (``records``, ``single_stream_only``) before anything else is checked, checks the
format against the file, parses, and refuses a file whose records differ in a setting the
data has no column for."""
from __future__ import annotations

import math
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ddtree_bayes.core.bench_import.identity import engine_of_backend, gpu_devices
from ddtree_bayes.core.bench_import.reading import (
    FIX_FORMAT,
    FORMATS,
    TOOLS,
    BenchFile,
    BenchFormatError,
    BenchRecord,
    BenchRow,
    Document,
    detect_tool,
    is_vllm_pytorch,
    load_document,
    numbered,
    read_bench_text,
    span,
)
from ddtree_bayes.core.data import plain_text

#: llama-bench fields that change the decode rate but have no column in the data: the records
#: of one import must agree on them (``-ngl 10,99`` or ``-fa 0,1`` sweeps are imported one
#: setting at a time).
LLAMA_SETUP = ("n_gpu_layers", "n_cpu_moe", "flash_attn", "type_k", "type_v", "split_mode",
               "main_gpu", "no_kv_offload", "tensor_split", "devices", "n_threads", "backends",
               "tensor_buft_overrides")
#: Of those, the ones written into a row's notes.
_LLAMA_NOTED = ("n_gpu_layers", "flash_attn", "type_k", "type_v", "n_cpu_moe", "split_mode")
#: The key holding each format's batch size or concurrency, and the tool that wrote it.
_STREAM_KEY = {"vllm-serve": "max_concurrency", "sglang-serving": "max_concurrency",
               "sglang-one-batch": "batch_size"}
_TOOL = {"vllm-serve": "vllm bench serve", "sglang-serving": "sglang.bench_serving",
         "sglang-one-batch": "sglang.bench_one_batch"}


def _rerun(fmt: str, single: bool = False) -> str:
    """How to rerun a refused record: a serving run at any concurrency C it sets (a run at
    C > 1 is imported at C), or at one stream when ``single`` (``--single-stream-only``) or
    the tool's batched runs are refused (``bench_one_batch``).

    >>> _rerun("vllm-serve")[:74]
    'rerun vllm bench serve with --max-concurrency C, the streams to measure: 1'
    >>> _rerun("sglang-serving", single=True)
    'rerun sglang.bench_serving with --max-concurrency 1'
    >>> _rerun("sglang-one-batch")
    'rerun sglang.bench_one_batch with --batch-size 1'
    """
    if fmt not in CONCURRENT_FORMATS:
        return f"rerun {_TOOL[fmt]} with --batch-size 1"
    if single:
        return f"rerun {_TOOL[fmt]} with --max-concurrency 1"
    return (f"rerun {_TOOL[fmt]} with --max-concurrency C, the streams to measure: 1 for one "
            "stream; a run at C > 1 is imported at C")


def _setting(value: Any) -> str:
    """A setting's value as text, the same for JSON (false, 1.0) and CSV ("0", "1")."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value).strip()


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


def _vllm_pytorch_latency(path: Path, doc: Document
                          ) -> tuple[int, dict[str, Any], dict[str, Any], str | None]:
    """(index, metric extra_info + values, args, model) of the 'latency' record of a pytorch-format file."""
    for index, rec in doc.records:
        metric = rec.get("metric")
        if is_vllm_pytorch(rec) and isinstance(metric, dict) and metric.get("name") == "latency":
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


def _parse_vllm_latency(path: Path, doc: Document, flags: dict[str, int | None]) -> list[BenchRecord]:
    args: dict[str, Any] = {}
    model: str | None = None
    source = "flags"
    if is_vllm_pytorch(doc.records[0][1]):
        index, data, args, model = _vllm_pytorch_latency(path, doc)
        source = "benchmark.extra_info.args"
    else:
        index, data = doc.records[0]
        side = _vllm_sidecar(path)
        if side is not None:   # also with the flags, which override its batch and lengths:
            # the side file still names the run's model, GPUs and speculation
            side_doc = load_document(side, read_bench_text(side))
            _, _, args, model = _vllm_pytorch_latency(side, side_doc)
            source = f"{side.name} args"
    rec = BenchRow(path, index, doc.unit, "vllm-latency", data)
    avg = rec.positive("avg_latency")
    arg = BenchRow(path, index, doc.unit, "vllm-latency", args)
    for key in ("batch_size", "output_len", "input_len"):
        # a flag that says otherwise than the run's own record: --output-len 64 against a
        # side file of 128 halved tok/s, exit 0
        recorded = arg.integer(key, required=False)
        if flags[key] is not None and recorded is not None and flags[key] != recorded:
            flag = "--" + key.replace("_", "-")
            raise rec.error(f"{flag} {flags[key]}, but {source.removesuffix(' args')} records "
                            f"{key} {recorded} for this run", key=key,
                            fix=f"drop {flag} (the file's record is the run's), or pass the "
                                "record of the run you mean")
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
    told = "flags" if flags["batch_size"] is not None and flags["output_len"] is not None \
        else source
    notes = (f"vllm bench latency (vllm-latency): tok_s = batch_size*output_len/avg_latency = "
             f"{batch}*{out_len}/{avg:g}; batch_size/output_len from {told}; whole generation, "
             f"includes the prefill of input_len tokens and engine overhead"
             + (f"; context_tokens = input_len + output_len/2 = {in_len} + {out_len}/2, rounded: "
                "the mean KV a decode step reads" if in_len is not None else ""))
    spec = args.get("speculative_config")
    speculative, drafted, plain, method = None, None, None, None
    if args and not spec:   # (the side file's args: the run's engine arguments)
        plain = "the run's args hold no speculative_config: vLLM decoded without speculation"
    if spec:
        method = spec.get("method") if isinstance(spec, dict) else None
        speculative = f"speculative_config method {method}" if method else "speculative_config set"
        notes += (f"; speculative decoding ({method or 'speculative_config set'}) but the file "
                  "records no acceptance length")
        k = spec.get("num_speculative_tokens") if isinstance(spec, dict) else None
        if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
            drafted = k
    return [BenchRecord(tok_s=tok_s, accept_len=None,
                        context_tokens=float(in_len) if in_len is not None else None,
                        decode_kv=out_len / 2,
                        batch_size=batch, model=model or arg.text("model"), notes=notes, index=index,
                        gpus=_vllm_gpus(arg), draft_tokens=drafted,
                        draft_key="speculative_config num_speculative_tokens",
                        speculative=speculative, not_speculative=plain,
                        caveat=_prefill_caveat(out_len, in_len, avg),
                        spec_method=method if isinstance(method, str) else None,
                        spec_parallel=isinstance(spec, dict) and spec.get("parallel_drafting") is True,
                        engine="vllm",
                        engine_said=_ONE_ENGINE["vllm-latency"],
                        measured=("vllm-latency", repr(avg), repr(rec.data.get("latencies"))))]


def _prefill_caveat(out_len: int, in_len: int | None, avg: float) -> str | None:
    """The warning on a vLLM latency run whose prompt is longer than its output: its
    avg_latency is one whole generation, the prefill of ``in_len`` tokens included, so
    ``out_len / avg_latency`` is a lower bound of the decode rate, by a share the file cannot
    tell (it keeps no prefill time). None for a prompt no longer than the output. (One
    stream: a batch above 1 is refused before.)"""
    if in_len is None or in_len <= out_len:
        return None
    return (f"tok_s = output_len/avg_latency = {out_len}/{avg:g} s includes the prefill of "
            f"input_len {in_len} tokens, "
            f"{in_len / out_len:.3g}x the {out_len} decoded: kept as a lower bound of the "
            "decode rate (vllm bench serve's TPOT, which leaves out the first token, measures "
            "decode alone)")


def _vllm_gpus(arg: BenchRow) -> int | None:
    """GPUs of a vLLM run whose args the file keeps: tensor x pipeline parallel size (None
    when the args do not say)."""
    tp = arg.integer("tensor_parallel_size", required=False)
    pp = arg.integer("pipeline_parallel_size", required=False)
    if tp is None or tp < 1 or (pp is not None and pp < 1):
        return None
    return tp * (pp or 1)


#: Why each format that only one engine writes is that engine's (its tool runs the engine
#: in-process): the record's ``engine_said``.
_ONE_ENGINE = {"vllm-latency": "vllm bench latency runs vLLM's engine in-process",
               "sglang-one-batch": "sglang.bench_one_batch runs SGLang's model runner in-process",
               "llama-bench": "llama-bench measures llama.cpp only"}


def _backend_engine(rec: BenchRow, generic: tuple[str, str] | None = None
                    ) -> tuple[str | None, str]:
    """(``engine``, ``engine_said``) of a serving result: the engine its ``backend`` (vLLM's
    older files: ``endpoint_type``) names (:func:`engine_of_backend`), else None; the backend
    is said even when it names none ("" without one). ``generic``: (a backend, why) the
    format's client sends to any server, which names no engine there."""
    key = "backend" if rec.text("backend") is not None else "endpoint_type"
    backend = rec.text(key)
    if backend is None:
        return None, ""
    said = f"its {key} {backend!r}"
    if generic is not None and backend.strip().lower() == generic[0]:
        return None, f"{said} ({generic[1]})"
    return engine_of_backend(backend), said


def _tpot_tok_s(rec: BenchRow) -> tuple[float, str]:
    fix = "rerun with the default --percentile-metrics (they include tpot) and streaming on"
    for key in ("median_tpot_ms", "mean_tpot_ms"):
        if rec.data.get(key) is not None:
            return 1000.0 / rec.positive(key, fix=fix), key
    raise rec.error(f"missing key 'median_tpot_ms' ({rec.fmt})", key="median_tpot_ms", fix=fix)


def _mean_prompt(rec: BenchRow) -> float | None:
    total = rec.number("total_input_tokens", required=False)
    if total is not None and total < 0:   # (else refused as the row's context, a value of -1)
        raise rec.error(f"'total_input_tokens' is {plain_text(total)}: a count of tokens "
                        "cannot be negative", key="total_input_tokens",
                        fix=f"pass an unedited {rec.fmt} result file")
    done = rec.number("completed", required=False)
    if total is None or not done or not math.isfinite(total) or done <= 0:
        return None
    return float(round(total / done))   # (the context column takes whole tokens)


#: How a serving result's context is worked out (said in each imported row's notes).
_SERVING_CONTEXT = ("context_tokens = total_input_tokens/completed + "
                    "total_output_tokens/completed/2, rounded: the mean KV a decode step reads, "
                    "the prompt plus half the output")
#: ... when the file records no output count: the prompt alone, and why.
_PROMPT_ALONE = ("context_tokens = total_input_tokens/completed, rounded: the prompt alone, as "
                 "the file records no total_output_tokens")


def _half_output(rec: BenchRow) -> float | None:
    """Half the tokens each request decoded (``total_output_tokens / completed / 2``): what a
    serving run's decode steps read beyond the prompt, on average (the first output token
    comes from the prefill; the k-th of n reads the prompt and k - 1 tokens, a mean of n / 2
    over tokens 2..n). None when the file does not say; a count that is negative, NaN or
    infinite is refused by its key (it was taken as 'not said', under notes that said half
    the output was added)."""
    total = rec.number("total_output_tokens", required=False)
    if total is not None and (not math.isfinite(total) or total < 0):
        said = ("cannot be negative" if math.isfinite(total)
                else "is a finite number")
        raise rec.error(f"'total_output_tokens' is {plain_text(total)}: a count of tokens {said}",
                        key="total_output_tokens", fix=f"pass an unedited {rec.fmt} result file")
    done = rec.number("completed", required=False)
    if total is None or not done or not math.isfinite(done) or done <= 0:
        return None
    return total / done / 2


#: How a serving result's context is worked out from its per-request lengths (no ";" or ")":
#: add --context replaces the clause up to either).
_DETAILED_CONTEXT = ("context_tokens = the mean KV a decode step reads, from each request's "
                     "input_lens and output_lens, the k-th of n output tokens reading the "
                     "prompt + k - 1: at C = {streams} stream{s} [the requests' mean + {others} x "
                     "the mean over their decode steps] / {streams}, rounded, {value:.1f}, where "
                     "the means alone give {means:.1f}")


def _detailed_context(rec: BenchRow, streams: int) -> float | None:
    """The mean KV a decode step of the run reads, from its per-request lengths (``vllm bench
    serve --save-detailed`` and ``sglang.bench_serving --output-details`` write
    ``input_lens`` and ``output_lens``, a failed request's output as 0), or None when the file
    has none. A request of p prompt and n output tokens decodes n - 1 steps (the first token
    is the prefill's), reading p + n / 2 on average. Its TPOT is its own read beside the
    C - 1 other streams in flight at each of its steps, and a long request is in flight for
    more of them: the mean TPOT, linear in the KV read, is at the per-stream context
    (E_requests[p + n / 2] + (C - 1) x E_steps[p + n / 2]) / C, the steps weighing request i
    by n_i - 1. At one stream that is the requests' mean, which the means give; at C > 1 a
    run whose outputs vary reads more than the means say (by (C - 1) / C x Var(n) / (2 E[n])
    for outputs independent of the prompts). Requests that decoded one token or failed have
    no TPOT and are left out. Lengths whose output sum is not total_output_tokens are refused."""
    ins, outs = rec.data.get("input_lens"), rec.data.get("output_lens")
    if ins is None or outs is None:
        return None
    fix = f"pass an unedited {rec.fmt} result file"

    def counts(key: str, values: Any) -> list[float]:
        if not isinstance(values, list):
            raise rec.error(f"{key!r} is {values!r}, not a list of one count per request",
                            key=key, fix=fix)
        for i, v in enumerate(values, 1):
            if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
                raise rec.error(f"{key!r} request {i} is {v!r}, not a number of tokens",
                                key=key, fix=fix)
            if v < 0 or not float(v).is_integer():
                said = "cannot be negative" if v < 0 else "is a whole number"
                told = v if isinstance(v, int) else plain_text(v)   # (the file's digits)
                raise rec.error(f"{key!r} request {i} is {told} tokens: a count of tokens "
                                f"{said}", key=key, fix=fix)
        return [float(v) for v in values]

    p_all, n_all = counts("input_lens", ins), counts("output_lens", outs)
    if len(p_all) != len(n_all):
        raise rec.error(f"'input_lens' lists {len(p_all)} requests but 'output_lens' "
                        f"{len(n_all)}", key="output_lens", fix=fix)
    errors = rec.data.get("errors")
    if errors is not None and not isinstance(errors, list):
        raise rec.error(f"'errors' is {errors!r}, not a list of one error per request",
                        key="errors", fix=fix)
    if errors is not None and len(errors) != len(n_all):
        # (read as "none failed", a failed request's output 0 would have been no TPOT only
        # by luck, and a list of 2 errors beside 8 lengths says nothing of which failed)
        raise rec.error(f"'errors' lists {len(errors)} requests but 'output_lens' "
                        f"{len(n_all)}: the errors are not these requests'", key="errors",
                        fix=fix)
    failed = [bool(e) for e in errors] if errors is not None else [False] * len(n_all)
    if errors is not None:
        _errors_agree(rec, failed, n_all)
    done = [(p, n) for p, n, bad in zip(p_all, n_all, failed, strict=True) if n > 0 and not bad]
    total = rec.number("total_output_tokens", required=False)
    said = sum(n for _, n in done)
    if total is not None and abs(said - total) > 0.5:
        raise rec.error(f"'output_lens' sum to {plain_text(said)} tokens over the {len(done)} "
                        f"completed requests, but total_output_tokens is {plain_text(total)}: "
                        "the lengths are not this run's", key="output_lens", fix=fix)
    timed = [(p + n / 2, n - 1) for p, n in done if n > 1]
    if not timed:
        return None
    by_request = sum(kv for kv, _ in timed) / len(timed)
    by_step = sum(kv * steps for kv, steps in timed) / sum(steps for _, steps in timed)
    return (by_request + (streams - 1) * by_step) / streams


def _errors_agree(rec: BenchRow, failed: list[bool], outputs: list[float]) -> None:
    """Refuse a detailed serving result whose ``errors`` contradict its ``completed`` and
    ``failed`` counts. vLLM's serve.py and SGLang's bench_serving write one entry per request
    sent, so ``completed + failed`` of them (SGLang writes no ``failed``: its failures are
    the requests that did not complete); a request's error text only when it failed (a
    success keeps RequestFuncOutput's "", a failure the HTTP reason, a traceback or "Never
    received a valid chunk"), and a failed request's output as 0 tokens. So: the entries
    are the counts' sum; no more error texts than failures; and no more failures than the
    requests that show one, by an error text or no output token (a failure's text is empty
    only when the server sent no HTTP reason phrase). ``failed`` flags the entries with a
    text, ``outputs`` are the ``output_lens``, one per entry (checked before)."""
    fix = f"pass an unedited {rec.fmt} result file"
    done, bad = (rec.integer(k, required=False) for k in ("completed", "failed"))
    sent, texts = len(failed), sum(failed)
    if done is not None and bad is not None and done + bad != sent:
        raise rec.error(f"'errors' lists {sent} requests but completed {done} + failed {bad} "
                        f"is {done + bad}: the errors are not these requests'", key="errors",
                        fix=fix)
    if done is not None and bad is None and done > sent:
        raise rec.error(f"'errors' lists {sent} requests but completed is {done}: the errors "
                        "are not these requests'", key="errors", fix=fix)
    if done is None and bad is None:
        return
    failures = bad if bad is not None else sent - (done or 0)
    said = (f"failed is {bad}" if bad is not None
            else f"{done} of its {sent} requests completed")
    if texts > failures:
        raise rec.error(f"'errors' holds {texts} error message{'s' * (texts != 1)} but "
                        f"{said}: a request with an error did not complete", key="errors",
                        fix=fix)
    shown = sum(1 for text, n in zip(failed, outputs, strict=True) if text or n == 0)
    if failures > shown:
        raise rec.error(f"{said} but 'errors' and 'output_lens' show {shown} failed "
                        f"request{'s' * (shown != 1)} (an error message, or no output token): "
                        "the counts are not these requests'",
                        key="failed" if bad is not None else "completed", fix=fix)


def _serving_context(rec: BenchRow, streams: int = 1
                     ) -> tuple[float | None, float, str, str | None]:
    """(prompt, what decode reads beyond it, the notes' clause, a caveat) of a serving result
    of ``streams`` streams: its context is the prompt plus half the output
    (:func:`_half_output`), or, where the file lists each request's lengths, the mean KV its
    steps read (:func:`_detailed_context`); without an output count, the prompt alone,
    which the notes and a warning say."""
    prompt, half = _mean_prompt(rec), _half_output(rec)
    detailed = _detailed_context(rec, streams)
    if prompt is not None and detailed is not None:
        means = prompt + (half or 0.0)
        clause = _DETAILED_CONTEXT.format(streams=streams, s="s" * (streams > 1),
                                          others=streams - 1, value=detailed, means=means)
        return prompt, detailed - prompt, clause, None
    if prompt is None or half is not None:
        return prompt, half or 0.0, _SERVING_CONTEXT, None
    return prompt, 0.0, _PROMPT_ALONE, (
        f"context_tokens {plain_text(prompt)} is the prompt alone: the file records no "
        "total_output_tokens, so the half of each answer a decode step also reads on average "
        "is left out (pass --context P + N/2 for P-token prompts and N-token answers)")


#: Formats whose runs at concurrency C > 1 are imported (into the concurrency column): a
#: serving benchmark's TPOT is one stream's decode time per token at that concurrency.
CONCURRENT_FORMATS = frozenset({"vllm-serve", "sglang-serving"})


def _streams_tok_s(rec: BenchRow) -> tuple[float, int, str]:
    """(total decode tok/s of the record's C streams, C, how): C x 1000 / TPOT. A run where
    no request completed measured nothing. ``how`` is the formula with the TPOT beside it,
    then what the run says (its streams' count, its failures): the TPOT's milliseconds once
    followed the failure clause ("2 of 64 requests failed (2.91 ms; ...")."""
    if rec.integer("completed", required=False) == 0:
        raise rec.error("completed 0: no request finished, so its TPOT measures nothing",
                        key="completed", fix="look at the server log and rerun the benchmark")
    per_stream, key = _tpot_tok_s(rec)
    count, said = _stream_count(rec.fmt, rec)
    streams = count or 1
    _steady_rate(rec, streams)
    _tpot_agrees(rec, key, streams)
    total = "" if streams == 1 else f"; total of {streams} streams"
    how = (f"{'' if streams == 1 else f'{streams} x '}1000/{key} ({rec.number(key):g} ms; "
           f"decode only, first token excluded{total})")
    return per_stream * streams, streams, how if said is None else f"{how}, {said}"


#: How far a serving run's output_throughput may stray from what its TPOT makes it (one
#: stream's rate at least in a closed loop, C streams' at most), either way: the TPOT is the
#: median request's, and the tokens and TTFT per request are means.
TPOT_SLACK = 3.0


def _tpot_agrees(rec: BenchRow, key: str, streams: int) -> None:
    """Refuse a serving run whose TPOT (``key``, the one tok_s is made of) contradicts its own
    ``output_throughput``. Both tools write a request's TPOT as (latency - TTFT) / (output
    tokens - 1) and output_throughput as the output tokens / the run's duration, so one stream
    at that TPOT makes ``n x 1000 / (TTFT + (n - 1) x TPOT)`` tok/s (``n`` the mean output
    tokens a request, TTFT its mean): the run's C streams make at most C times that (fewer
    in flight while it ramps up and down), and, in a closed loop (``request_rate`` inf), at
    least one stream's (no request waits for an arrival); a rate-limited run waits between
    arrivals and is bounded above only. Each within :data:`TPOT_SLACK`. A TPOT written x1000
    (seconds as ms, an edited file) imported 0.34 tok/s from a run whose output_throughput
    was 336, with exit 0. Unchecked when the file lacks output_throughput, the counts or a
    TTFT (older layouts), or a request decoded one token (no TPOT)."""
    out = rec.number("output_throughput", required=False)
    total = rec.number("total_output_tokens", required=False)
    done = rec.number("completed", required=False)
    ttft_key = next((k for k in ("mean_ttft_ms", "median_ttft_ms")
                     if rec.number(k, required=False) is not None), None)
    if None in (out, total, done, ttft_key):
        return
    assert out is not None and total is not None and done is not None and ttft_key is not None
    tpot, ttft = rec.number(key), rec.number(ttft_key)
    assert tpot is not None and ttft is not None
    if not all(map(math.isfinite, (out, total, done, ttft))) or done <= 0 or ttft < 0:
        return
    n = total / done
    if n <= 1.0 or out <= 0:
        return
    one = n * 1000.0 / (ttft + (n - 1.0) * tpot)
    if not (math.isfinite(one) and one > 0):
        return
    per_request = (f"({ttft_key} {ttft:g} ms and {n:.0f} output tokens a request)")
    said = f"{key} is not this run's milliseconds per output token"
    fix = ("pass the result file the benchmark wrote, unedited: its *_tpot_ms keys are "
           "milliseconds per output token")
    most = streams * one
    if out > TPOT_SLACK * most:
        raise rec.error(f"{key} {tpot:g} ms makes {streams} stream{'s' * (streams > 1)} "
                        f"decode at most {most:.3g} tok/s {per_request}, but its "
                        f"output_throughput is {out:.3g} tok/s, {out / most:.3g}x that: {said}",
                        key=key, fix=fix)
    if not _rate_limited(rec) and out * TPOT_SLACK < one:
        raise rec.error(f"{key} {tpot:g} ms makes one stream alone decode {one:.5g} tok/s "
                        f"{per_request}, but the output_throughput of its {streams} "
                        f"stream{'s' * (streams > 1)}, with no wait between requests, is "
                        f"{out:.3g} tok/s, 1/{one / out:.3g} of that: {said}", key=key, fix=fix)


def _steady_rate(rec: BenchRow, streams: int) -> None:
    """Refuse a serving run of more than one stream whose request rate ramped (vLLM's
    ``--ramp-up-strategy``, written as ``ramp_up_strategy`` beside a ``request_rate`` of
    "inf", since a ramp takes no fixed rate): the streams in flight rose with the rate, so
    its TPOT is no one concurrency's. At one stream nothing overlapped, whatever the rate."""
    strategy = rec.data.get("ramp_up_strategy")
    if strategy is None or streams <= 1:
        return
    start, end = (rec.number(k, required=False) for k in ("ramp_up_start_rps", "ramp_up_end_rps"))
    rates = f" from {start:g} to {end:g} requests/s" if start is not None and end is not None else ""
    raise rec.error(f"ramp_up_strategy {strategy!r}: the request rate ramped{rates}, so the "
                    f"streams in flight (up to {streams}) changed over the run and its TPOT is "
                    "no one concurrency's", key="ramp_up_strategy",
                    fix=f"rerun {_TOOL.get(rec.fmt, 'the benchmark')} without "
                        "--ramp-up-strategy: --max-concurrency C with the default "
                        "--request-rate inf")


#: What vLLM's benchmark client says of its backend 'vllm': the default of its older versions
#: (now 'openai'), sent to one OpenAI-compatible API like every other backend it has, so a
#: run with it may be any engine's server (SGLang's bench_serving, by contrast, picks the
#: server's own endpoint by its backend).
VLLM_CLIENT_DEFAULT = ("the default of vLLM's older benchmark client, whose requests any "
                       "OpenAI-compatible server answers")


def _vllm_serve(rec: BenchRow) -> BenchRecord:
    engine, said = _backend_engine(rec, ("vllm", VLLM_CLIENT_DEFAULT))
    tok_s, streams, how = _streams_tok_s(rec)
    accept = rec.accept("spec_decode_acceptance_length")
    _acceptance_agrees(rec, accept)
    prompt, half, context, caveat = _serving_context(rec, streams)
    notes = (f"vllm bench serve (vllm-serve): tok_s = {how}; {context}"
             + ("; accept_len = spec_decode_acceptance_length" if accept is not None else ""))
    setup = (("label", _setting(rec.data["label"])),) if "label" in rec.data else ()
    drafted, draft_key = _drafted_per_step(rec)
    return BenchRecord(tok_s=tok_s, accept_len=accept, context_tokens=prompt, decode_kv=half,
                       batch_size=streams, model=rec.text("model_id", "model"), notes=notes,
                       index=rec.index, setup=setup, context_caveat=caveat,
                       draft_tokens=drafted, draft_key=draft_key, engine=engine,
                       engine_said=said, stamp=rec.text("date"))


#: How far a vLLM serve result's acceptance length may stray from 1 + accepted / drafts, the
#: formula vllm bench serve writes it with (relative): a value rounded by hand to three
#: decimals stays within it.
ACCEPT_SLACK = 1e-3


def _acceptance_agrees(rec: BenchRow, accept: float | None) -> None:
    """Refuse a vLLM serve result whose ``spec_decode_acceptance_length`` is not what its own
    counts make it: vllm bench serve writes it as ``1 + spec_decode_accepted_tokens /
    spec_decode_num_drafts`` (the bonus token, and the tokens accepted per draft). An
    acceptance of 3.9 beside the fixture's counts (3.14593) was imported at 3.9, exit 0.
    Unchecked when the file lacks either count (older layouts)."""
    drafts = rec.number("spec_decode_num_drafts", required=False)
    accepted = rec.number("spec_decode_accepted_tokens", required=False)
    if (accept is None or drafts is None or accepted is None
            or not (math.isfinite(drafts) and math.isfinite(accepted)) or drafts <= 0):
        return
    counted_accept = 1.0 + accepted / drafts
    if abs(accept - counted_accept) <= ACCEPT_SLACK * counted_accept:
        return
    raise rec.error(f"spec_decode_acceptance_length {accept:g} is not 1 + "
                    f"spec_decode_accepted_tokens / spec_decode_num_drafts = 1 + {accepted:g} / "
                    f"{drafts:g} = {counted_accept:.6g}, as vllm bench serve writes it",
                    key="spec_decode_acceptance_length",
                    fix="pass the result file the benchmark wrote, unedited")


#: Where :func:`_drafted_per_step` read the tokens drafted per step from, as messages name it.
PER_POSITION_KEY = "the positions of spec_decode_per_position_acceptance_rates"


def _drafted_per_step(rec: BenchRow) -> tuple[int | None, str]:
    """Tokens drafted per speculative step, as vLLM's serve result records them, and where:
    ``spec_decode_draft_tokens / spec_decode_num_drafts``, a whole number for a fixed depth;
    else, when drafts were not all of one length (an n-gram drafter's short matches: 3900
    tokens in 1302 drafts), the number of ``spec_decode_per_position_acceptance_rates``,
    one per position vLLM's counter keeps, num_speculative_tokens of them (a per-step mean
    above it is no such list: not read); else None."""
    key = "spec_decode_draft_tokens / spec_decode_num_drafts"
    drafts = rec.number("spec_decode_num_drafts", required=False)
    tokens = rec.number("spec_decode_draft_tokens", required=False)
    if (drafts is None or tokens is None or not math.isfinite(drafts)
            or not math.isfinite(tokens) or drafts <= 0):
        return None, key
    per = tokens / drafts
    if abs(per - round(per)) < 1e-9 and per >= 1:
        return int(round(per)), key
    positions = rec.data.get("spec_decode_per_position_acceptance_rates")
    if isinstance(positions, list) and positions and per <= len(positions):
        return len(positions), PER_POSITION_KEY
    return None, key


def _varied_outputs(rec: BenchRow, streams: int) -> str | None:
    """What the notes say of a run of several streams whose output lengths varied, without
    the per-request lengths that would give its context (:func:`_detailed_context`):
    sglang.bench_serving's random dataset at ``random_range_ratio`` r < 1 draws each output
    uniformly from ``int(r x L)``..L tokens (``np.random.randint``), and a long request is in
    flight for more steps, so the decode steps read about (C - 1) / C x Var(n) / (2 E[n])
    more than the mean's prompt + E[n] / 2. Its sharegpt dataset without
    ``sharegpt_output_len`` decodes each conversation's own answer length (said without a
    size: the file does not give their spread). None when nothing varied or the lengths are
    listed."""
    if streams <= 1 or rec.data.get("output_lens") is not None:
        return None
    if rec.data.get("dataset_name") == "sharegpt" and rec.data.get("sharegpt_output_len") is None:
        return ("output lengths of the sharegpt dataset's answers (no sharegpt_output_len) and "
                f"no output_lens: at {streams} streams the decode steps read more than this "
                "mean, by (C - 1) / C x Var(n) / (2 E[n]), left out (--output-details lists "
                "each request's lengths)")
    ratio, length = (rec.number(k, required=False)
                     for k in ("random_range_ratio", "random_output_len"))
    if (ratio is None or length is None
            or str(rec.data.get("dataset_name", "random")) != "random"
            or not (0 <= ratio < 1) or not math.isfinite(length) or length < 1):
        return None
    low, high = max(int(length * ratio), 1), int(length)
    if low >= high:
        return None
    values = high - low + 1   # (uniform over the whole numbers low..high)
    mean, var = (low + high) / 2, (values ** 2 - 1) / 12
    more = (streams - 1) / streams * var / (2 * mean)
    return (f"output lengths drawn from {low}..{high} tokens (random_range_ratio {ratio:g}, "
            f"random_output_len {high}) and no output_lens: at {streams} streams the decode "
            f"steps read about {more:.1f} tokens more than this mean, (C - 1) / C x Var(n) / "
            "(2 E[n]), left out (--output-details lists each request's lengths)")


def _sglang_serving(rec: BenchRow) -> BenchRecord:
    engine, said = _backend_engine(rec)
    tok_s, streams, how = _streams_tok_s(rec)
    accept = rec.accept("accept_length")
    info = rec.data.get("server_info")
    model = rec.text("model", "model_path", "model_id")
    if model is None and isinstance(info, dict):
        model = BenchRow(rec.path, rec.index, rec.unit, rec.fmt, info).text("model_path",
                                                                        "served_model_name")
    prompt, half, context, caveat = _serving_context(rec, streams)
    varied = _varied_outputs(rec, streams)
    notes = (f"sglang.bench_serving (sglang-serving): tok_s = {how}; {context}"
             + (f"; {varied}" if varied else "")
             + ("; accept_len = accept_length (server avg_spec_accept_length)"
                if accept is not None else ""))
    return BenchRecord(tok_s=tok_s, accept_len=accept, context_tokens=prompt, decode_kv=half,
                       batch_size=streams, model=model, notes=notes, index=rec.index,
                       engine=engine, engine_said=said, context_caveat=caveat)


def _sglang_one_batch(rec: BenchRow) -> BenchRecord:
    in_len = rec.integer("input_len")
    out_len = rec.integer("output_len")
    tok_s = rec.positive("median_decode_throughput",
                         fix="rerun sglang.bench_one_batch with --output-len > 1 (decode timing "
                             "is recorded from the 2nd output token)")
    run_name = rec.data.get("run_name")
    notes = (f"sglang.bench_one_batch (sglang-one-batch): tok_s = median_decode_throughput "
             f"(batch_size/median_decode_latency, decode steps only); input_len {in_len}, "
             f"output_len {out_len}, run_name {run_name!r}; run without speculative decoding; "
             f"context_tokens = input_len + output_len/2, rounded: the mean KV a decode step "
             "reads")
    assert in_len is not None and out_len is not None
    return BenchRecord(tok_s=tok_s, accept_len=None, context_tokens=float(in_len), batch_size=1,
                       decode_kv=out_len / 2,
                       model=rec.text("model", "model_path"), notes=notes, index=rec.index,
                       setup=(("run_name", _setting(run_name)),) if "run_name" in rec.data else (),
                       not_speculative="sglang.bench_one_batch runs the model's forward passes "
                                       "without speculative decoding", engine="sglang",
                       engine_said=_ONE_ENGINE["sglang-one-batch"])


def _llama_test(rec: BenchRow) -> str | None:
    """None for a text-generation test (n_prompt 0, n_gen > 0), else the test's name."""
    n_prompt = rec.integer("n_prompt")
    n_gen = rec.integer("n_gen")
    assert n_prompt is not None and n_gen is not None
    if n_prompt == 0 and n_gen > 0:
        return None
    return f"pp{n_prompt}" if n_gen == 0 else f"pp{n_prompt}+tg{n_gen}"


def _llama_bench(rec: BenchRow, kind: str) -> BenchRecord:
    data = rec.data
    n_gen = rec.integer("n_gen")
    assert n_gen is not None   # (required: raised on a missing n_gen)
    depth = rec.integer("n_depth", required=False) or 0
    tok_s = rec.positive("avg_ts")
    model_type = rec.text("model_type")
    setup = tuple((k, _setting(data[k])) for k in LLAMA_SETUP if k in data)
    settings = dict(setup)
    noted = ", ".join(f"{k} {settings[k]}" for k in _LLAMA_NOTED if k in settings)
    gpu = rec.text("gpu_info")
    if settings.get("n_gpu_layers") == "0":
        gpu = None   # the weights stayed on the CPU: the GPU listed did not run the decode
    notes = (f"llama-bench (llama-bench {kind}): tok_s = avg_ts of test tg{n_gen}"
             + (f" @ d{depth}" if depth else "") + " (mean of samples_ts, generation only); "
             f"context_tokens = n_depth + [n_gen + 1]/2, rounded: the mean KV a decode step "
             f"reads; model_type {model_type!r}"
             + (f"; {noted}" if noted else ""))
    params = rec.number("model_n_params", required=False)
    size = rec.number("model_size", required=False)
    return BenchRecord(tok_s=tok_s, accept_len=None, context_tokens=float(depth), batch_size=1,
                       decode_kv=(n_gen + 1) / 2,
                       model=rec.text("model_filename") or model_type, notes=notes,
                       index=rec.index, model_params=params if params and params > 0 else None,
                       model_bytes=size if size and math.isfinite(size) and size > 0 else None,
                       gpu=gpu, setup=setup, gpus=_llama_gpus(gpu, settings),
                       not_speculative="llama-bench's text-generation test decodes one token "
                                       "per forward pass, without speculative decoding (it "
                                       "loads no draft model)",
                       engine="llama.cpp", engine_said=_ONE_ENGINE["llama-bench"],
                       stamp=rec.text("test_time"))


def _llama_gpus(gpu: str | None, settings: dict[str, str]) -> int | None:
    """GPUs a llama-bench test ran on: ``gpu_info`` lists every visible GPU and the default
    ``split_mode layer`` spreads the layers over all of them; ``split_mode none`` runs on one.
    None (not counted) when ``devices`` or a ``tensor_split`` picks some of them.

    >>> _llama_gpus("NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3", {"tensor_split": "0.00"})
    2
    >>> _llama_gpus("NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3", {"split_mode": "none"})
    1
    """
    if gpu is None:
        return None
    if settings.get("split_mode") == "none":
        return 1
    if settings.get("devices", "auto") not in ("auto", ""):
        return None
    try:
        split = [float(x) for x in re.split(r"[/,;]", settings.get("tensor_split", "")) if x.strip()]
    except ValueError:
        return None
    if any(x != 0 for x in split):
        return None
    return len(gpu_devices(gpu))


_PARSERS = {"vllm-serve": _vllm_serve, "sglang-serving": _sglang_serving,
            "sglang-one-batch": _sglang_one_batch}


# --------------------------------------------------------------------------- selection


def _select(path: Path, doc: Document, records: Collection[int] | None) -> list[int]:
    """The indices of the records to import; a record that could not be read is an error only
    when it is selected (no selection selects every record)."""
    if records is None:
        if doc.broken:
            raise doc.broken[min(doc.broken)]
        return [i for i, _ in doc.records]
    wanted = set(records)
    missing = sorted(wanted - set(doc.indices))
    if missing:
        raise BenchFormatError(f"no record {missing[0]} in the file (it holds "
                               f"{numbered(doc.unit, doc.indices)})", file=path,
                               fix="pick from the records listed, or drop --bench-records")
    bad = sorted(wanted & set(doc.broken))
    if bad:
        raise doc.broken[bad[0]]
    return [i for i, _ in doc.records if i in wanted]


def _streams(fmt: str, rec: BenchRow) -> int | None:
    """The record's batch size or concurrency; None when unbounded (not set). A serving run's
    ``max_concurrency`` is a cap: no more streams than requests ran (``num_prompts``,
    ``completed``), nor than vLLM saw at once (``max_concurrent_requests``), nor, rounded,
    than a rate-limited run kept in flight (:func:`_rate_bound`: SGLang's measured mean
    ``concurrency``, else Little's law; a rate-limited run stays near 1)."""
    return _stream_count(fmt, rec)[0]


def _stream_count(fmt: str, rec: BenchRow) -> tuple[int | None, str | None]:
    """(:func:`_streams`, what the row's note says of how they were counted, else None): the
    streams in flight of a rate-limited run when they set the count, or SGLang's measured
    mean when it is below the cap of a closed loop, whose streams are the cap (as vLLM's
    are), unless the mean says no two requests overlapped (it rounds to 1)."""
    if fmt == "sglang-one-batch":
        return rec.integer("batch_size"), None
    counts = {key: rec.integer(key, required=False)
              for key in ("max_concurrency", "num_prompts", "completed", "max_concurrent_requests",
                          "failed")}
    for key, value in counts.items():
        if value is not None and value < (1 if key == "max_concurrency" else 0):
            raise rec.error(f"'{key}' is {value}: a count of requests cannot be "
                            f"{'below 1' if key == 'max_concurrency' else 'negative'}", key=key,
                            fix=f"pass an unedited {rec.fmt} result file")
    conc = counts["max_concurrency"]
    failed, done = counts["failed"], counts["completed"]
    # the most streams that could run: the cap, bounded by the requests sent and seen at once
    could = None if conc is None else min([conc] + [
        n for k in ("num_prompts", "max_concurrent_requests") if (n := counts[k])])
    if failed and done is not None and (failed >= done or (could is not None and done < could)):
        # 60 of 64 requests failed under a cap of 8: the 4 that completed made "4 streams",
        # a run that never decoded steadily at its cap, imported with exit 0
        why = (f"{failed} of {failed + done} requests failed" + (
            f", so fewer completed ({done}) than the {could} streams the run could keep "
            "(max_concurrency, bounded by the requests sent): how many decoded together is "
            "unknown" if could is not None and done < could else
            ": the run did not decode steadily at its concurrency"))
        raise rec.error(why, key="failed",
                        fix="look at the server log for why they failed (out of memory, "
                            "timeouts, a crash) and rerun the benchmark")
    if conc is None and 1 in (counts["completed"], counts["max_concurrent_requests"]):
        return 1, None  # one request, or vLLM never saw two at once: nothing overlapped
    said = None
    if conc is not None and conc > 1:
        for key in ("num_prompts", "completed", "max_concurrent_requests"):
            ran = counts[key]
            if ran is not None and ran >= 1:
                conc = min(conc, ran)
        mean = rec.number("concurrency", required=False)
        if mean is not None and not (math.isfinite(mean) and mean >= 0):
            raise rec.error(f"'concurrency' is {mean:g}: the mean of the streams in flight "
                            "is a number >= 0", key="concurrency",
                            fix=f"pass an unedited {rec.fmt} result file")
        done = counts["completed"]
        if mean == 0 and done:   # (passed over: the cap taken, where 0.4 gave 1 stream)
            raise rec.error(f"'concurrency' is 0, but {done} request{'s' if done > 1 else ''} "
                            "completed: the mean of the streams in flight is above 0",
                            key="concurrency", fix=f"pass an unedited {rec.fmt} result file")
        bound = _rate_bound(rec, conc, mean)
        if bound is not None and max(1, round(bound[0])) < conc:
            in_flight, how = bound
            conc = max(1, round(in_flight))
            said = (f"streams set by request_rate {rec.data['request_rate']}: "
                    f"{in_flight:.2f} in flight ({how}), rounded")
        elif mean is not None and round(mean) <= 1:   # nothing overlapped, whatever the cap
            conc = 1
        elif mean is not None and round(mean) < conc:
            # a closed loop (an unbounded rate, or one offering more than the cap): its
            # streams are the cap; the mean also counts the ramp-up and ramp-down (it made
            # a run of 8 streams 7, and 7 x 1000 / TPOT its total)
            said = (f"measured mean in flight {mean:.2f} ('concurrency': a closed loop's "
                    "ramp-up and ramp-down counted)")
    if failed:   # a few failures beside many completed requests: the row says so
        few = (f"{failed} of {failed + done} requests failed" if done is not None
               else f"{failed} requests failed")
        said = few if said is None else f"{said}; {few}"
    return conc, said


def _rate_bound(rec: BenchRow, cap: int, measured: float | None) -> tuple[float, str] | None:
    """(the streams in flight of a serving run whose arrival rate, not its
    ``max_concurrency`` ``cap``, set them, how they were counted), or None: the rate is
    unbounded, or it offers at least ``cap`` requests at once (``request_rate`` x mean
    latency), so the cap bound (the measured mean would count the run's ramp-down as fewer
    streams while TPOT was measured at the cap). The streams in flight are SGLang's measured
    mean (``measured``), else Little's law (:func:`_in_flight`)."""
    if not _rate_limited(rec):
        return None
    if measured is None:
        in_flight, latency_s = _in_flight(rec)
        how = "Little's law"
    else:
        in_flight, how = measured, "the file's measured mean"
        try:
            latency_s = _in_flight(rec)[1]
        except BenchFormatError:   # (no latency to weigh the rate with: the measurement)
            return in_flight, how
    offered = float(rec.data["request_rate"]) * latency_s
    return (in_flight, how) if offered < cap else None


def _rate_limited(rec: BenchRow) -> bool:
    """A serving run with a finite ``request_rate`` (Poisson arrivals): its
    ``max_concurrency`` is only a cap, the streams in flight are set by the rate."""
    rate = rec.data.get("request_rate")
    if rate is None or (isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity")):
        return False
    try:
        return math.isfinite(float(rate))
    except (TypeError, ValueError):
        return False


#: The key of the mean request latency (ms) in each serving format.
_E2E_KEY = {"vllm-serve": "mean_e2el_ms", "sglang-serving": "mean_e2e_latency_ms"}


def _in_flight(rec: BenchRow) -> tuple[float, float]:
    """(requests in flight on average over a rate-limited serving run by Little's law, the
    mean request latency in s): ``request_throughput`` x the mean latency (vLLM's
    ``mean_e2el_ms``, SGLang's ``mean_e2e_latency_ms``, else ``mean_ttft_ms`` plus
    ``mean_tpot_ms`` per further output token).

    >>> from pathlib import Path
    >>> row = BenchRow(Path("r.json"), 1, "record", "vllm-serve",
    ...                {"request_rate": 0.05, "request_throughput": 0.0499, "mean_e2el_ms": 2340})
    >>> [round(x, 3) for x in _in_flight(row)]
    [0.117, 2.34]
    """
    tool = _TOOL.get(rec.fmt, "the benchmark")
    e2e = _E2E_KEY.get(rec.fmt, "mean_e2el_ms")
    fix = (f"rerun {tool} with --request-rate inf (the default) so that "
           "--max-concurrency sets the streams, or keep its e2e/ttft/tpot metrics")
    throughput = rec.positive("request_throughput", fix=fix)
    latency = rec.number(e2e, required=False)
    if latency is None:
        ttft = rec.number("mean_ttft_ms", required=False)
        tpot = rec.number("mean_tpot_ms", required=False)
        out = rec.number("total_output_tokens", required=False)
        done = rec.number("completed", required=False)
        if None in (ttft, tpot, out, done) or not done:
            raise rec.error("request_rate is finite, so the streams in flight are set by the "
                            f"rate, and the file has no latency to measure them ({e2e}, "
                            "or mean_ttft_ms, mean_tpot_ms and total_output_tokens)",
                            key="request_rate", fix=fix)
        assert ttft is not None and tpot is not None and out is not None and done is not None
        latency = ttft + tpot * max(out / done - 1.0, 0.0)
    if not math.isfinite(latency) or latency <= 0:
        raise rec.error(f"mean request latency {latency:g} ms: cannot measure the streams in "
                        "flight", key=e2e, fix=fix)
    return throughput * latency / 1000.0, latency / 1000.0


def _single_stream(path: Path, doc: Document, fmt: str, chosen: list[int], only: bool,
                   notes: list[str]) -> list[int]:
    """``chosen`` without the records of batch/concurrency above 1 (``only``), or the error
    naming the first such record and the single-stream records the file does hold."""
    if fmt not in _STREAM_KEY:
        return chosen
    key, data = _STREAM_KEY[fmt], dict(doc.records)
    streams = {i: _streams(fmt, BenchRow(path, i, doc.unit, fmt, data[i])) for i in chosen}
    single = [i for i in chosen if streams[i] == 1]
    others = [i for i in chosen if streams[i] != 1]
    if fmt in CONCURRENT_FORMATS and not only:   # a known C > 1 goes to the concurrency column
        others = [i for i in others if streams[i] is None]
    if not others:
        return chosen
    values = ", ".join(sorted({"not set" if streams[i] is None else str(streams[i])
                               for i in others}))
    if only and single:
        notes.append(f"{path}: --single-stream-only left out {numbered(doc.unit, others)} "
                     f"({key} {values})")
        return single
    first = others[0]
    problem = (f"{key} is not set, so requests ran concurrently" if streams[first] is None
               else f"{key} {streams[first]}: only single-stream (batch 1) runs can be imported")
    if only:
        problem = f"no single-stream record ({key} {values})"
    fix = _rerun(fmt, single=only)
    if only and fmt in CONCURRENT_FORMATS and all(streams[i] is not None for i in others):
        # without the flag they are imported at the concurrency they ran
        fix = f"drop --single-stream-only to import them at their concurrency, or {fix}"
    if single:
        fix = (f"import the file's single-stream records ({numbered(doc.unit, single)}) with "
               f"--single-stream-only or --bench-records {span(single).replace(' ', '')}, or {fix}")
    raise BenchFormatError(problem, file=path, index=None if only else first, unit=doc.unit,
                           key=key, fix=fix)


def _one_setup(path: Path, doc: Document, parsed: list[BenchRecord]) -> None:
    """Refuse records that differ in a setting without a data column (they would become repeats
    of one configuration), naming the records of each setting."""
    groups: dict[tuple[tuple[str, str], ...], list[int]] = {}
    for rec in parsed:
        groups.setdefault(rec.setup, []).append(rec.index)
    if len(groups) < 2:
        return
    settings = [dict(s) for s in groups]
    keys = [k for k in dict.fromkeys(k for s in settings for k in s)
            if len({s.get(k) for s in settings}) > 1]
    shown = [", ".join(f"{k} {s.get(k, '(none)')}" for k in keys) + f": {numbered(doc.unit, idx)}"
             for s, idx in zip(settings, groups.values(), strict=True)]
    more = f"; {len(shown) - 4} more" if len(shown) > 4 else ""
    first = next(iter(groups.values()))
    raise BenchFormatError(f"the records differ in {', '.join(keys)} ({'; '.join(shown[:4])}{more}), "
                           "which no data column holds: imported together they would be repeats "
                           "of one configuration", file=path,
                           fix=f"import one setting at a time, e.g. --bench-records "
                               f"{span(first).replace(' ', '')}")


def parse_bench_file(path: str | Path, fmt: str | None = None, *, batch_size: int | None = None,
                     output_len: int | None = None, input_len: int | None = None,
                     records: Collection[int] | None = None,
                     single_stream_only: bool = False) -> BenchFile:
    """Parse a benchmark result file into records of one stream, or of a serving run's C.

    Order: load (log lines before the JSON/CSV body skipped, with a note), select ``records``
    (indices as the messages number them; a record that cannot be read is an error only when
    selected), check the format of the selected records (``fmt`` forces one, and is refused
    when the file is another tool's output), keep the single-stream records
    (``single_stream_only``; otherwise a serving run at C > 1 is kept at C, an unbounded one
    or another batch above 1 is an error), parse them,
    and refuse records that differ in a setting the data has no column for (llama-bench
    ``n_gpu_layers``, ``flash_attn``, ...). ``batch_size``, ``output_len`` and ``input_len``
    are the run's flags for ``vllm-latency``, whose JSON does not record them; they override
    the ``.pytorch.json`` side file. Raises ``BenchFormatError`` (one line: file, record, key
    and fix) on any problem.

    >>> import json, pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tg.json"
    >>> _ = path.write_text(json.dumps({"model_filename": "m.gguf", "n_prompt": 0, "n_gen": 128,
    ...                                 "n_depth": 0, "avg_ts": 120.5}))
    >>> got = parse_bench_file(path)
    >>> got.format, [(r.index, r.tok_s, r.model) for r in got.records]
    ('llama-bench', [(1, 120.5, 'm.gguf')])
    """
    path = Path(path)
    if fmt is not None and fmt not in FORMATS:
        raise BenchFormatError(f"unknown format {fmt!r}", file=path, fix=FIX_FORMAT)
    doc = load_document(path, read_bench_text(path))
    notes = []
    if doc.skipped:
        n, a, b = doc.skipped
        lines = f"line {a}" if a == b else f"lines {a}-{b}"
        notes.append(f"{path}: skipped {n} line{'s' if n > 1 else ''} before the "
                     f"{'CSV' if doc.kind == 'csv' else 'JSON'} ({lines}): not part of the "
                     "result (log output)")
    chosen = _select(path, doc, records)
    fmt = detect_tool(path, doc, fmt, set(chosen))
    run_flags = {"--batch-size": batch_size, "--output-len": output_len, "--input-len": input_len}
    given = [flag for flag, value in run_flags.items() if value is not None]
    if given and fmt != "vllm-latency":   # (they were dropped without a word)
        raise BenchFormatError(
            f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} only to vllm bench "
            f"latency output, and this is {TOOLS[fmt]} output ({fmt}), which records its "
            "own run", file=path,
            fix=f"drop {', '.join(given)}" + (" (--context sets the context)"
                                              if input_len is not None else ""))
    if fmt == "vllm-latency":
        return BenchFile(fmt, _parse_vllm_latency(path, doc, {
            "batch_size": batch_size, "output_len": output_len, "input_len": input_len}), notes,
            doc.unit)
    chosen = _single_stream(path, doc, fmt, chosen, single_stream_only, notes)
    data = dict(doc.records)
    parsed: list[BenchRecord] = []
    other_tests: dict[int, str] = {}
    for index in chosen:
        rec = BenchRow(path, index, doc.unit, fmt, data[index])
        if fmt == "llama-bench":
            test = _llama_test(rec)
            if test is not None:
                other_tests[index] = test
                continue
            parsed.append(_llama_bench(rec, doc.kind))
        else:
            parsed.append(_PARSERS[fmt](rec))
    if other_tests:
        seen = ", ".join(sorted(set(other_tests.values())))
        if not parsed:
            raise BenchFormatError(f"no text-generation test (n_prompt 0, n_gen > 0); tests seen: "
                                   f"{seen}", file=path, index=min(other_tests), unit=doc.unit,
                                   key="n_gen",
                                   fix="rerun llama-bench with -n 128 (a tg test) and -o json"
                                   if records is None else "pick tg tests with --bench-records")
        several = len(other_tests) > 1
        notes.append(f"{path}: {numbered(doc.unit, list(other_tests))} ({seen}) "
                     f"measure{'' if several else 's'} prompt processing, not decode; not imported")
    _one_setup(path, doc, parsed)
    return BenchFile(fmt, parsed, notes, doc.unit)

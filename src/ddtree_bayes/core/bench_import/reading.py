"""Bench import: the record and error types, loading JSON / JSON Lines / CSV, format detection."""

from __future__ import annotations

import codecs
import csv
import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Names of the supported formats, as ``detect_format`` returns them.
FORMATS: tuple[str, ...] = ("vllm-latency", "vllm-serve", "sglang-one-batch", "sglang-serving",
                            "llama-bench")
#: The command that writes each format, for messages.
TOOLS: dict[str, str] = {"vllm-latency": "vllm bench latency", "vllm-serve": "vllm bench serve",
                         "sglang-one-batch": "sglang.bench_one_batch",
                         "sglang-serving": "sglang.bench_serving", "llama-bench": "llama-bench"}

FIX_FORMAT = ("pass one of " + ", ".join(FORMATS)
              + " as the format, or use a file written by one of these tools")
#: Keys only vLLM's / only SGLang's serving benchmark writes (both write the tpot/throughput keys).
_VLLM_SERVE_KEYS = frozenset({"model_id", "burstiness", "endpoint_type", "spec_decode_acceptance_length"})
_SGLANG_SERVE_KEYS = frozenset({"accept_length", "sharegpt_output_len", "random_range_ratio",
                                "total_output_tokens_retokenized"})
#: A serving result of either tool: one of these, and neither tool's own keys.
SERVING = "serving"


class BenchFormatError(Exception):
    """A benchmark file cannot be imported. ``str(err)`` is one line:
    ``FILE, record N: problem (fix: ...)`` (``line N`` for line-oriented files)."""

    def __init__(self, problem: str, *, file: str | Path, index: int | None = None,
                 unit: str = "record", key: str | None = None, fix: str | None = None) -> None:
        self.file, self.index, self.unit, self.key, self.fix = str(file), index, unit, key, fix
        self.problem = problem
        where = self.file if index is None else f"{self.file}, {unit} {index}"
        text = f"{where}: {problem}"
        if fix:
            text += f" (fix: {fix})"
        super().__init__(" ".join(text.split()))


@dataclass(frozen=True)
class BenchRecord:
    """One imported measurement: decode throughput (one stream, or a serving run's C streams)
    and what the file says about it."""

    tok_s: float                  #: decode tokens/s: of one stream, the C streams' total at C > 1
    accept_len: float | None      #: mean tokens per verify step incl. the bonus token, if recorded
    context_tokens: float | None  #: prompt/input length when known
    batch_size: int | None        #: streams decoded together: 1, or a serving run's C
    model: str | None             #: model name/path if the file records it
    notes: str                    #: how tok_s was computed: tool, format and keys
    index: int                    #: 1-based record (array) or line (JSON Lines/CSV) number
    #: parameter count the file records for its model (llama-bench ``model_n_params``), if any
    model_params: float | None = None
    #: bytes the file records its model's weights take (llama-bench ``model_size``), if any
    model_bytes: float | None = None
    #: the GPU(s) the file says the run used (llama-bench ``gpu_info``), if any
    gpu: str | None = None
    #: the run's settings that change tok/s but have no column in the data (llama-bench
    #: ``n_gpu_layers``, ``flash_attn``, ...; SGLang ``run_name``): (key, value) pairs
    setup: tuple[tuple[str, str], ...] = ()
    #: tokens drafted per speculative step the file records (vLLM serve), if any
    draft_tokens: int | None = None
    #: where the file records ``draft_tokens``
    draft_key: str = "spec_decode_draft_tokens / spec_decode_num_drafts"
    #: the file's word that the run decoded speculatively (vLLM latency args'
    #: ``speculative_config``), when it records no acceptance length to show it
    speculative: str | None = None
    #: the speculative method the file names, in the engine's words (vLLM latency args'
    #: ``speculative_config.method``), if any
    spec_method: str | None = None
    #: the file says the drafter proposed its tokens in one pass (vLLM latency args'
    #: ``speculative_config.parallel_drafting``: PARD, P-EAGLE)
    spec_parallel: bool = False
    #: why the run cannot have decoded speculatively (a tool without speculative decoding),
    #: else None
    not_speculative: str | None = None
    #: GPUs the run used, when the file says (llama-bench ``gpu_info`` devices, vLLM latency
    #: ``tensor_parallel_size`` x ``pipeline_parallel_size``), else None
    gpus: int | None = None
    #: the engine the file says ran (the data's name: ``vllm``, ``sglang``, ``llama.cpp``,
    #: ...): the only engine its tool runs, or a serving result's ``backend``; else None
    engine: str | None = None
    #: how the file says ``engine`` (for messages)
    engine_said: str = ""
    #: the file's own date of the run (llama-bench ``test_time``, vLLM serve ``date``), if any
    stamp: str | None = None
    #: what the row's tok/s does not measure, said as a warning when it is imported (a vLLM
    #: latency run whose prompt is longer than its output: the prefill is in avg_latency)
    caveat: str | None = None
    #: the warning on a context the file leaves short (a serving result without
    #: total_output_tokens: the prompt alone), not said when --context replaces it
    context_caveat: str | None = None
    #: tokens the run's decode steps read beyond the prompt, on average: half its output
    #: (``n / 2`` when the first of n tokens comes from the prefill, the steps reading
    #: prompt + 1 .. prompt + n - 1; ``(n + 1) / 2`` when all n are decode steps, reading
    #: prompt + 1 .. prompt + n, each step counting the token it feeds), or, for a serving
    #: result that lists each request's lengths, what its steps read beyond the mean prompt
    #: with long requests weighed by their steps (formats._detailed_context); 0 when the file
    #: does not say how many tokens each stream decoded
    decode_kv: float = 0.0
    #: the values the file itself measured, when tok_s, the context and the batch are worked
    #: out with the run's flags (vLLM latency: avg_latency and its latencies, beside
    #: --output-len, --input-len, --batch-size): the result's id hashes these instead, so
    #: other flags do not make the same run another result; empty for a file that records
    #: its tok/s
    measured: tuple = ()

    def result_id(self) -> str:
        """What tells this result from another run's, whatever the file is called: 12 hex
        digits of a SHA-256 over the measured values, the configuration the file records and
        its own date of the run (not the file's name, the record's number or how the notes
        word it). A renamed copy, or the same llama-bench run saved as JSON and as CSV, has
        the same id. A record whose tok/s the flags work out (:attr:`measured` given) hashes
        the file's own values in place of tok/s, context and batch: a vLLM latency file
        imported again with another --output-len is the same run, not another.

        >>> a = BenchRecord(150.62, None, 0.0, 1, "m.gguf", "llama-bench json ...", 2)
        >>> b = BenchRecord(150.62, None, 0.0, 1, "m.gguf", "llama-bench csv ...", 3)
        >>> a.result_id() == b.result_id(), a.result_id() == BenchRecord(
        ...     150.63, None, 0.0, 1, "m.gguf", "", 2).result_id()
        (True, False)
        >>> c = BenchRecord(125.3, None, 512.0, 1, None, "", 1, measured=("1.02",))
        >>> c.result_id() == BenchRecord(250.6, None, 1024.0, 1, None, "", 1,
        ...                              measured=("1.02",)).result_id()
        True
        """
        flagged = (repr(self.tok_s), repr(self.context_tokens), self.batch_size)
        measured = (*(self.measured or flagged), repr(self.accept_len),
                    self.model, repr(self.model_params), repr(self.model_bytes),
                    self.gpu, self.setup, self.draft_tokens, self.speculative, self.gpus,
                    self.engine, self.stamp)
        return hashlib.sha256(repr(measured).encode()).hexdigest()[:12]

    def context(self) -> float | None:
        """The row's ``context_tokens``: the mean KV length a decode step of the run reads,
        its prompt plus half what it decoded, in whole tokens (the step model's context cost
        is linear in it); None when the file records no prompt length. The result's id hashes
        the prompt alone, so files imported before this rule keep their id.

        >>> BenchRecord(336.4, None, 1024.0, 1, None, "", 1, decode_kv=256.0).context()
        1280.0
        >>> BenchRecord(150.6, None, 0.0, 1, None, "", 1, decode_kv=64.5).context()
        64.0
        """
        if self.context_tokens is None:
            return None
        return float(round(self.context_tokens + self.decode_kv))


@dataclass(frozen=True)
class BenchFile:
    """What :func:`~ddtree_bayes.core.bench_import.parse_bench_file` read: the format, the
    imported records, and notes on what was skipped (log lines, records not selected)."""

    format: str
    records: list[BenchRecord]
    notes: list[str] = field(default_factory=list)
    unit: str = "record"   #: what a record's index counts: "record" (JSON) or "line"


def span(indices: list[int] | tuple[int, ...] | set[int]) -> str:
    """Record numbers as the messages write them, runs as ranges (``--bench-records`` reads
    the same form without the spaces).

    >>> span([1, 2, 3, 7, 9, 10])
    '1-3, 7, 9-10'
    """
    nums = sorted(set(indices))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(parts)


def numbered(unit: str, indices: list[int] | tuple[int, ...] | set[int]) -> str:
    """``line 2`` or ``lines 2-4, 7``.

    >>> numbered("line", [2]), numbered("record", [1, 2, 3, 7])
    ('line 2', 'records 1-3, 7')
    """
    return f"{unit}{'s' if len(set(indices)) > 1 else ''} {span(indices)}"


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Document:
    """The parsed file: its records as (index, object), what the index counts, the records that
    could not be read (kept aside so that a selection can leave them out), and the log lines
    skipped before the body."""

    unit: str                                 # "record" (JSON array/object) or "line"
    records: list[tuple[int, dict[str, Any]]]
    kind: str                                 # "json", "jsonl" or "csv"
    broken: dict[int, BenchFormatError] = field(default_factory=dict)
    skipped: tuple[int, int, int] | None = None   # (count, first line, last line) of log lines

    @property
    def indices(self) -> list[int]:
        return sorted([i for i, _ in self.records] + list(self.broken))


def read_bench_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise BenchFormatError(f"cannot read the file: {err.strerror or err}", file=path,
                               fix="check the path and its permissions") from None
    # UTF-16 with its byte-order mark (LE or BE): what Windows PowerShell 5's `>` writes
    utf16 = raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    try:
        text = raw.decode("utf-16" if utf16 else "utf-8-sig")
    except UnicodeDecodeError as err:
        if utf16:
            raise BenchFormatError(
                f"not UTF-16 text though it starts with a UTF-16 byte-order mark (byte "
                f"{err.start})", file=path,
                fix="re-save the file as UTF-8, e.g. PowerShell's `Out-File -Encoding utf8`"
            ) from None
        raise BenchFormatError(f"not UTF-8 text (byte {err.start})", file=path,
                               fix="pass the JSON/JSONL/CSV file the benchmark tool wrote") from None
    if not text.strip():
        raise BenchFormatError("the file is empty", file=path,
                               fix="rerun the benchmark with its output-file option, e.g. "
                                   "--output-json, --result-filename or -o json")
    return text


def _as_records(path: Path, obj: Any, unit: str, first: int = 1) -> list[tuple[int, dict[str, Any]]]:
    items = obj if isinstance(obj, list) else [obj]
    if not items:
        raise BenchFormatError("the JSON array holds no records", file=path,
                               fix="rerun the benchmark; it wrote no results")
    out = []
    for i, item in enumerate(items, start=first):
        if not isinstance(item, dict):
            raise BenchFormatError(f"expected a JSON object, got {type(item).__name__}", file=path,
                                   index=i, unit=unit, fix="pass the result file the benchmark tool wrote")
        out.append((i, item))
    return out


#: A line that surely starts a JSON body: an object, or an array whose first line is "[" alone
#: or "[" then "{" / "]" (a log line such as "[INFO] ..." or "[2025-09-12 ...]" is not).
_JSON_START = re.compile(r"\{|\[\s*(\{|\]|$)")


def _is_csv_header(line: str) -> bool:
    return line.startswith(("build_commit,", '"build_commit"')) or (
        "avg_ts" in line and "," in line and not line.startswith(("{", "[")))


def load_document(path: Path, text: str) -> Document:
    """The records of ``text``. Lines before the JSON/CSV body (the log lines llama.cpp's
    backends print to stdout) are skipped and counted in ``Document.skipped``."""
    lines = text.removeprefix("\ufeff").splitlines()
    loose = strict = None   # first line starting with "{"/"[", first surely starting the body
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("|") and loose is None:
            raise BenchFormatError("this is a Markdown table (llama-bench's default output), not a "
                                   "result file", file=path, index=i + 1, unit="line",
                                   fix="rerun llama-bench with -o json")
        if _JSON_START.match(stripped) or _is_csv_header(stripped):
            strict = i
            loose = i if loose is None else loose
            break
        if stripped.startswith("[") and loose is None:
            loose = i
    if loose is None:
        first = next(i for i, line in enumerate(lines) if line.strip())
        raise BenchFormatError(f"not JSON: starts with {lines[first].strip()[:40]!r}", file=path,
                               index=first + 1, unit="line",
                               fix="pass the JSON/JSONL result file (--output-json, --save-result, "
                                   "--result-filename, --output-file or llama-bench -o json)")
    try:
        start, doc = loose, _load_body(path, lines, loose)
    except BenchFormatError:
        if strict is None or strict == loose:
            raise
        start, doc = strict, _load_body(path, lines, strict)   # the "[" line was a log line
    log = [i + 1 for i in range(start) if lines[i].strip()]
    if not log:
        return doc
    return Document(doc.unit, doc.records, doc.kind, doc.broken, (len(log), log[0], log[-1]))


def _load_body(path: Path, lines: list[str], start: int) -> Document:
    body = lines[start:]
    if _is_csv_header(body[0].strip()):
        return _load_csv(path, body, start)
    return _load_json(path, body, start)


def _json_error(path: Path, err: json.JSONDecodeError, lineno: int, *, last: bool,
                text: str) -> BenchFormatError:
    """The error of a line (or document) that is not JSON; 'truncated' only when the text
    stops inside the JSON (its last line, cut short)."""
    if last and (err.pos >= len(text.rstrip()) or err.msg.startswith("Unterminated string")):
        return BenchFormatError(f"invalid JSON: {err.msg} at the end of the file: it is truncated",
                                file=path, index=lineno, unit="line",
                                fix="rerun the benchmark, or import the complete records with "
                                    "--bench-records")
    return BenchFormatError(f"invalid JSON: {err.msg} (column {err.colno})", file=path,
                            index=lineno, unit="line",
                            fix="the line was edited or holds another program's output; repair "
                                "or delete it, or import the other records with --bench-records")


def _beyond_limits(path: Path, err: ValueError | RecursionError, lineno: int
                   ) -> BenchFormatError:
    """The error of JSON that Python's reader stops on before its syntax: nested past the
    recursion limit, or a whole number of more digits than it converts (4300 by default)."""
    problem = ("nested deeper than Python's JSON reader goes" if isinstance(err, RecursionError)
               else f"a whole number of more than {sys.get_int_max_str_digits()} digits"
               if "digits" in str(err) else str(err))
    return BenchFormatError(f"invalid JSON: {problem}", file=path, index=lineno, unit="line",
                            fix="pass the result file the benchmark tool wrote, unedited")


def _load_json(path: Path, body: list[str], offset: int) -> Document:
    text = "\n".join(body)
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as err:   # (JSONDecodeError is a ValueError)
        if _json_lines(body):
            return _load_jsonl(path, body, offset)  # JSON Lines: one object per line
        # one document (an array, or a pretty-printed object)
        if isinstance(err, json.JSONDecodeError):
            if err.msg == "Extra data" and (count := _documents(text)) > 1:
                raise BenchFormatError(
                    f"holds {count} JSON documents one after another (the outputs of several "
                    "runs appended, `>>`?), where a result file is one", file=path,
                    index=err.lineno + offset, unit="line",
                    fix="split it into one file per run and import each") from None
            raise _json_error(path, err, err.lineno + offset, last=True, text=text) from None
        raise _beyond_limits(path, err, offset + 1) from None
    return Document("record", _as_records(path, obj, "record"), "json")


def _documents(text: str) -> int:
    """How many whole JSON documents ``text`` holds one after another (0 when any part is
    not JSON): two `llama-bench -o json` outputs appended to one file read as "Extra data".

    >>> _documents('[{"a": 1}]\\n[{"a": 2}]\\n'), _documents('{"a": 1} x')
    (2, 0)
    """
    decoder, count, pos = json.JSONDecoder(), 0, 0
    while (pos := len(text) - len(text[pos:].lstrip())) < len(text):
        try:
            _, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return 0
        count += 1
    return count


def _json_lines(body: list[str]) -> bool:
    """Whether text that is not one JSON document reads as JSON Lines: two or more lines, the
    first a whole object on its line (not a pretty-printed object's lone ``{``)."""
    nonblank = [ln.strip() for ln in body if ln.strip()]
    return len(nonblank) >= 2 and nonblank[0].startswith("{") and nonblank[0] != "{"


def _load_jsonl(path: Path, body: list[str], offset: int) -> Document:
    records: list[tuple[int, dict[str, Any]]] = []
    broken: dict[int, BenchFormatError] = {}
    last = max(i for i, ln in enumerate(body) if ln.strip())
    for i, line in enumerate(body):
        if not line.strip():
            continue
        lineno = offset + i + 1
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            broken[lineno] = _json_error(path, err, lineno, last=i == last, text=line)
            continue
        except (ValueError, RecursionError) as err:
            broken[lineno] = _beyond_limits(path, err, lineno)
            continue
        if not isinstance(obj, dict):
            broken[lineno] = BenchFormatError(
                f"expected a JSON object, got {type(obj).__name__}", file=path, index=lineno,
                unit="line", fix="delete the line, or import the other records with --bench-records")
            continue
        records.append((lineno, obj))
    return Document("line", records, "jsonl", broken)


def _csv_row(path: Path, line: str, lineno: int) -> list[str]:
    """The fields of one CSV ``line``; a field past the csv module's limit (131072
    characters) is a :class:`BenchFormatError` naming the line, not ``_csv.Error``."""
    try:
        return next(csv.reader([line]))
    except csv.Error:
        raise BenchFormatError(f"a field longer than {csv.field_size_limit()} characters",
                               file=path, index=lineno, unit="line",
                               fix="the line was edited or two outputs were mixed; repair or "
                                   "delete it, or import the other lines with --bench-records"
                               ) from None


def _load_csv(path: Path, body: list[str], offset: int) -> Document:
    """llama-bench -o csv: a header, then one row per test. ``-o csv >>`` appends a new header
    per run; each header line starts a new block (its columns may differ between versions)."""
    header_line = offset + 1
    header = _csv_row(path, body[0], header_line)
    records: list[tuple[int, dict[str, Any]]] = []
    broken: dict[int, BenchFormatError] = {}
    last = max(i for i, ln in enumerate(body) if ln.strip())
    for i, line in enumerate(body[1:], start=1):
        if not line.strip():
            continue
        lineno = offset + i + 1
        try:
            row = _csv_row(path, line, lineno)
        except BenchFormatError as err:
            broken[lineno] = err
            continue
        if _is_csv_header(line.strip()):
            header, header_line = row, lineno
            continue
        if len(row) == len(header):
            records.append((lineno, dict(zip(header, row, strict=True))))
        elif i == last and len(row) < len(header):
            broken[lineno] = BenchFormatError(
                f"{len(row)} fields, the header has {len(header)}: the last line is cut short, "
                "the file is truncated", file=path, index=lineno, unit="line",
                fix="rerun llama-bench, or import the complete lines with --bench-records")
        else:
            broken[lineno] = BenchFormatError(
                f"{len(row)} fields, the header (line {header_line}) has {len(header)}", file=path,
                index=lineno, unit="line",
                fix="the line was edited or two outputs were mixed; repair or delete it, or "
                    "import the other lines with --bench-records")
    if not records and not broken:
        raise BenchFormatError("the CSV has a header but no rows", file=path,
                               fix="rerun llama-bench; it wrote no results")
    return Document("line", records, "csv", broken)


# --------------------------------------------------------------------------- detection


def is_vllm_pytorch(rec: dict[str, Any]) -> bool:
    return isinstance(rec.get("benchmark"), dict) and isinstance(rec.get("metric"), dict)


def record_format(rec: dict[str, Any]) -> str | None:
    """The format whose signature keys ``rec`` carries; ``SERVING`` for a serving result
    without either tool's own keys; None for none.

    >>> record_format({"avg_ts": 1.0, "n_gen": 128, "n_prompt": 0})
    'llama-bench'
    >>> record_format({"median_tpot_ms": 2.5, "accept_length": 3.1})
    'sglang-serving'
    """
    keys = set(rec)
    if {"avg_ts", "n_gen", "n_prompt"} <= keys:
        return "llama-bench"
    if {"avg_latency", "latencies"} <= keys or is_vllm_pytorch(rec):
        return "vllm-latency"
    if {"run_name", "prefill_latency"} <= keys or {"median_decode_throughput", "input_len"} <= keys:
        return "sglang-one-batch"
    if keys & {"output_throughput", "median_tpot_ms", "mean_tpot_ms"}:
        if keys & _VLLM_SERVE_KEYS:
            return "vllm-serve"
        if keys & _SGLANG_SERVE_KEYS:
            return "sglang-serving"
        return SERVING
    return None


def _keys_seen(rec: dict[str, Any]) -> str:
    keys = sorted(rec)
    return ", ".join(keys[:8]) + (", ..." if len(keys) > 8 else "") or "none"


def _evidence(fmt: str, rec: dict[str, Any]) -> str:
    """The keys of ``rec`` that say it is ``fmt`` (for a refused --bench-format)."""
    own = {"vllm-serve": _VLLM_SERVE_KEYS, "sglang-serving": _SGLANG_SERVE_KEYS,
           "llama-bench": {"avg_ts", "n_gen", "n_prompt"},
           "vllm-latency": {"avg_latency", "latencies", "benchmark", "metric"},
           "sglang-one-batch": {"run_name", "prefill_latency", "median_decode_throughput"}}[fmt]
    return ", ".join(sorted(set(rec) & own))


def detect_tool(path: Path, doc: Document, forced: str | None = None,
            indices: set[int] | None = None) -> str:
    """The format of the records ``indices`` (default: all), checked against ``forced``."""
    seen: dict[str, int] = {}
    for index, rec in doc.records:
        if indices is not None and index not in indices:
            continue
        fmt = record_format(rec)
        if fmt is None:
            raise BenchFormatError(f"unknown benchmark format; keys seen: {_keys_seen(rec)}",
                                   file=path, index=index, unit=doc.unit,
                                   fix=FIX_FORMAT if forced is None else
                                   f"this is not {forced} output; pass the file {TOOLS[forced]} wrote")
        if forced is not None and fmt not in (forced, SERVING):
            raise BenchFormatError(
                f"--bench-format {forced}, but this is {TOOLS[fmt]} output ({fmt}: "
                f"{_evidence(fmt, rec)})", file=path, index=index, unit=doc.unit,
                fix="drop --bench-format (the format is detected), or pass the file "
                    f"{TOOLS[forced]} wrote")
        if fmt == SERVING and forced is not None and forced not in ("vllm-serve", "sglang-serving"):
            raise BenchFormatError(f"--bench-format {forced}, but this is a serving benchmark's "
                                   "result", file=path, index=index, unit=doc.unit,
                                   fix="pass --bench-format vllm-serve or sglang-serving")
        seen.setdefault(fmt, index)
    concrete = {f: i for f, i in seen.items() if f != SERVING}
    if len(concrete) > 1:
        (f1, i1), (f2, i2) = sorted(concrete.items(), key=lambda kv: kv[1])[:2]
        raise BenchFormatError(f"{doc.unit} {i1} is {TOOLS[f1]} output ({f1}), {doc.unit} {i2} "
                               f"{TOOLS[f2]} output ({f2})", file=path, index=i2, unit=doc.unit,
                               fix="import one tool's records at a time with --bench-records")
    if forced is not None:
        return forced
    if concrete:
        return next(iter(concrete))
    if seen:
        raise BenchFormatError("a serving benchmark's result, but without the keys that tell "
                               "vllm bench serve from sglang.bench_serving", file=path,
                               index=seen[SERVING], unit=doc.unit,
                               fix="pass --bench-format vllm-serve or sglang-serving")
    raise BenchFormatError("no record to read", file=path, fix="pick records with --bench-records")


def detect_format(path: Path, text: str) -> str:
    """Name of the format of ``text`` (the contents of ``path``), one of ``FORMATS``.

    Raises ``BenchFormatError`` naming the file and the keys it saw when no format matches."""
    path = Path(path)
    if not text.strip():
        raise BenchFormatError("the file is empty", file=path,
                               fix="rerun the benchmark with its output-file option")
    doc = load_document(path, text)
    if doc.broken and not doc.records:
        raise next(iter(doc.broken.values()))
    return detect_tool(path, doc)


# --------------------------------------------------------------------------- field access


class BenchRow:
    """One record with error context, so each check names file, record and key."""

    def __init__(self, path: Path, index: int, unit: str, fmt: str, data: dict[str, Any]) -> None:
        self.path, self.index, self.unit, self.fmt, self.data = path, index, unit, fmt, data

    def error(self, problem: str, *, key: str | None = None, fix: str) -> BenchFormatError:
        return BenchFormatError(problem, file=self.path, index=self.index, unit=self.unit, key=key, fix=fix)

    def number(self, key: str, *, required: bool = True, fix: str | None = None) -> float | None:
        if key not in self.data or self.data[key] is None:
            if not required:
                return None
            raise self.error(f"missing key '{key}' ({self.fmt})", key=key,
                             fix=fix or f"pass an unedited {self.fmt} result file")
        value = self.data[key]
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                value = None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"'{key}' must be a number, got {self.data[key]!r}", key=key,
                             fix=f"pass an unedited {self.fmt} result file")
        return float(value)

    def positive(self, key: str, *, fix: str | None = None) -> float:
        value = self.number(key, fix=fix)
        assert value is not None
        if not math.isfinite(value) or value <= 0:
            raise self.error(f"'{key}' is {value:g}; throughput and latency must be positive and finite",
                             key=key, fix="rerun the benchmark; this run produced no valid timing")
        return value

    def integer(self, key: str, *, required: bool = True, fix: str | None = None) -> int | None:
        value = self.number(key, required=required, fix=fix)
        if value is None:
            return None
        if not math.isfinite(value) or value != int(value):
            raise self.error(f"'{key}' must be a whole number, got {self.data[key]!r}", key=key,
                             fix=f"pass an unedited {self.fmt} result file")
        return int(value)

    def single_stream(self, key: str, value: int | None, fix: str) -> int:
        if value is None:
            raise self.error(f"{key} is not set, so requests ran concurrently", key=key, fix=fix)
        if value != 1:
            raise self.error(f"{key} {value}: only single-stream (batch 1) runs can be imported",
                             key=key, fix=fix)
        return value

    def accept(self, key: str) -> float | None:
        value = self.number(key, required=False)
        if value is None:
            return None
        if not math.isfinite(value) or value < 1:
            raise self.error(f"'{key}' is {value:g}; an acceptance length counts the bonus token, so >= 1",
                             key=key, fix="drop the record or rerun with speculative decoding metrics")
        return value

    def text(self, *keys: str) -> str | None:
        for key in keys:
            value = self.data.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return None

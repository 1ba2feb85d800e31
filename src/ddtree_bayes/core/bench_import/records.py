"""Bench import: the record and error types, loading JSON / JSON Lines / CSV, format detection."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Names of the supported formats, as ``detect_format`` returns them.
FORMATS: tuple[str, ...] = ("vllm-latency", "vllm-serve", "sglang-one-batch", "sglang-serving",
                            "llama-bench")

_FIX_FMT = "pass one of " + ", ".join(FORMATS) + " as the format, or use a file written by one of these tools"


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
    """One imported measurement: single-stream decode throughput and what the file says about it."""

    tok_s: float                  #: single-stream decode tokens/s
    accept_len: float | None      #: mean tokens per verify step incl. the bonus token, if recorded
    context_tokens: float | None  #: prompt/input length when known
    batch_size: int | None        #: batch size or max concurrency (always 1 when imported)
    model: str | None             #: model name/path if the file records it
    notes: str                    #: how tok_s was computed: tool, format and keys
    index: int                    #: 1-based record (array) or line (JSON Lines/CSV) number


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class _Doc:
    """The parsed file: its records as (index, object) and what the index counts."""

    unit: str                                 # "record" (JSON array/object) or "line"
    records: list[tuple[int, dict[str, Any]]]
    kind: str                                 # "json", "jsonl" or "csv"


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise BenchFormatError(f"cannot read the file: {err.strerror or err}", file=path,
                               fix="check the path and its permissions") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise BenchFormatError(f"not UTF-8 text (byte {err.start})", file=path,
                               fix="pass the JSON/JSONL/CSV file the benchmark tool wrote") from None
    if not text.strip():
        raise BenchFormatError("the file is empty", file=path,
                               fix="rerun the benchmark with its output-file option, e.g. "
                                   "--output-json, --result-filename or -o json")
    return text


def _json_error(path: Path, err: json.JSONDecodeError, line_offset: int = 0) -> BenchFormatError:
    return BenchFormatError(f"invalid JSON: {err.msg} (column {err.colno})", file=path,
                            index=err.lineno + line_offset, unit="line",
                            fix="the file is truncated or was edited; rerun the benchmark "
                                "or repair that line")


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


def _load(path: Path, text: str) -> _Doc:
    text = text.removeprefix("\ufeff")
    stripped = text.lstrip()
    first_line = stripped.splitlines()[0] if stripped else ""
    if first_line.startswith("|"):
        raise BenchFormatError("this is a Markdown table (llama-bench's default output), not a result file",
                               file=path, index=1, unit="line", fix="rerun llama-bench with -o json")
    if not stripped.startswith(("{", "[")):
        if first_line.startswith(("build_commit,", '"build_commit"')) or "avg_ts" in first_line:
            return _load_csv(path, text)
        raise BenchFormatError(f"not JSON: starts with {first_line[:40]!r}", file=path, index=1, unit="line",
                               fix="pass the JSON/JSONL result file (--output-json, --save-result, "
                                   "--result-filename, --output-file or llama-bench -o json)")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if stripped.startswith("[") or len(lines) < 2 or not all(ln.startswith("{") for ln in lines):
            raise _json_error(path, err) from None  # one document (array or pretty-printed object)
        return _load_jsonl(path, text)  # JSON Lines: one object per line
    return _Doc("record", _as_records(path, obj, "record"), "json")


def _load_jsonl(path: Path, text: str) -> _Doc:
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise _json_error(path, err, line_offset=lineno - 1) from None
        records.extend(_as_records(path, obj, "line", first=lineno))
    return _Doc("line", records, "jsonl")


def _load_csv(path: Path, text: str) -> _Doc:
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    records = []
    for lineno, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise BenchFormatError(f"{len(row)} fields, the header has {len(header)}", file=path,
                                   index=lineno, unit="line", fix="the CSV is truncated; rerun llama-bench")
        records.append((lineno, dict(zip(header, row, strict=True))))
    if not records:
        raise BenchFormatError("the CSV has a header but no rows", file=path,
                               fix="rerun llama-bench; it wrote no results")
    return _Doc("line", records, "csv")


# --------------------------------------------------------------------------- detection


def _is_vllm_pytorch(rec: dict[str, Any]) -> bool:
    return isinstance(rec.get("benchmark"), dict) and isinstance(rec.get("metric"), dict)


def _detect(path: Path, doc: _Doc) -> str:
    index, rec = doc.records[0]
    keys = set(rec)
    if {"avg_ts", "n_gen", "n_prompt"} <= keys:
        return "llama-bench"
    if {"avg_latency", "latencies"} <= keys or _is_vllm_pytorch(rec):
        return "vllm-latency"
    if {"run_name", "prefill_latency"} <= keys or {"median_decode_throughput", "input_len"} <= keys:
        return "sglang-one-batch"
    if "output_throughput" in keys or "median_tpot_ms" in keys:
        if keys & {"model_id", "burstiness", "endpoint_type", "spec_decode_acceptance_length"}:
            return "vllm-serve"
        if keys & {"accept_length", "sharegpt_output_len", "random_range_ratio",
                   "total_output_tokens_retokenized"}:
            return "sglang-serving"
    shown = ", ".join(sorted(keys)[:8]) + (", ..." if len(keys) > 8 else "")
    raise BenchFormatError(f"unknown benchmark format; keys seen: {shown or 'none'}", file=path, index=index,
                           unit=doc.unit, fix=_FIX_FMT)


def detect_format(path: Path, text: str) -> str:
    """Name of the format of ``text`` (the contents of ``path``), one of ``FORMATS``.

    Raises ``BenchFormatError`` naming the file and the keys it saw when no format matches."""
    path = Path(path)
    if not text.strip():
        raise BenchFormatError("the file is empty", file=path,
                               fix="rerun the benchmark with its output-file option")
    return _detect(path, _load(path, text))


# --------------------------------------------------------------------------- field access


class _Rec:
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

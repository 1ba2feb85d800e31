"""Printing helpers every CLI module shares: tables for people, JSON/CSV for machines."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path

from ddtree_bayes.core.data import counted as counted  # (re-exported: the CLI uses them)
from ddtree_bayes.core.data import percent_text as percent_text
from ddtree_bayes.core.data import tok_text as tok_text
from ddtree_bayes.core.paths import shown

PROG = "ddtree-bayes"


def print_warnings(lines, into: list[str] | None = None) -> None:
    """Each of ``lines`` on stderr as ``ddtree-bayes: warning: <line>``, and appended to
    ``into`` when given: the ``warnings`` array of a command's ``--format json`` (the same
    lines without the prefix, so a program reading the JSON sees what the table warns of)."""
    for line in lines:
        print(f"{PROG}: warning: {line}", file=sys.stderr)
        if into is not None:
            into.append(line)


def fmt_value(value, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    """Left-align the first two columns of text, right-align the rest; one line per row
    (:func:`aligned_table`'s default)."""
    return aligned_table(headers, rows)


#: Keys whose values are counts: written as JSON integers even when computed as floats.
INT_KEYS = frozenset({"context_tokens", "gpus", "block", "budget", "verify_tokens", "row",
                      "rows", "total_rows", "draws", "chains", "tune", "seed", "divergences",
                      "rank", "k", "repeat_of"})


def json_ready(value, key: str | None = None):
    """``value`` with only JSON types: numpy scalars and arrays as numbers and lists,
    non-finite floats as null (JSON has no NaN), whole-valued counts (:data:`INT_KEYS`) as
    integers, paths and anything else as strings. (Dispatches on the exact type first: a
    fit's check of 100,000 rows is 1.6 million values.)"""
    kind = type(value)
    if kind is float:
        if not math.isfinite(value):
            return None
        return int(value) if key in INT_KEYS and value.is_integer() else value
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {str(k): json_ready(v, str(k)) for k, v in value.items()}
    if isinstance(value, dict):
        return {str(k): json_ready(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_ready(v, key) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return json_ready(asdict(value), key)
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):  # numpy
        return json_ready(value.tolist(), key)
    if isinstance(value, str | int):   # subclasses, e.g. an IntEnum
        return value
    if isinstance(value, float):
        return json_ready(float(value), key)
    return str(value)


#: Above this size JSON output is written without indentation (the indenting encoder is
#: pure Python: ~4 s for the 44 MB check of a 100,000-row fit, against ~1.4 s compact).
INDENT_LIMIT = 1_000_000


def emit_json(payload) -> None:
    """Print ``payload`` as strict JSON (see :func:`json_ready`): indented, or compact when
    it is longer than :data:`INDENT_LIMIT` characters (same content)."""
    ready = json_ready(payload)
    text = json.dumps(ready, allow_nan=False)
    print(json.dumps(ready, indent=2, allow_nan=False) if len(text) <= INDENT_LIMIT else text)


def emit_result(result: dict, fmt: str, render: Callable[[dict], str]) -> None:
    """A command's result as JSON (``--format json``) or as ``render(result)``."""
    if fmt == "json":
        emit_json(result)
    else:
        print(render(result))


def emit_rows(rows: list[dict], fmt: str, extra: dict | None = None) -> None:
    """Rows as JSON (``{**extra, "rows": rows}``) or CSV (rows only; a nested value as
    its ``label``, or without one as a column per key: ``total`` -> ``total_median``, ...).
    The CSV header is every row's columns in order of first appearance (a row capped at the
    memory read has ``read_ceiling_*`` columns the rows before it lack; the header was the
    first row's, and the writer stopped); a row without a column leaves its cell blank."""
    if fmt == "json":
        emit_json({**(extra or {}), "rows": rows})
    else:
        flat = [dict(_flat_cells(json_ready(r))) for r in rows]
        buf = io.StringIO()
        if flat:
            columns = list(dict.fromkeys(k for row in flat for k in row))
            writer = csv.DictWriter(buf, fieldnames=columns)
            writer.writeheader()
            writer.writerows(flat)
        sys.stdout.write(buf.getvalue())


def _flat_cells(row: dict):
    """A row's CSV cells: a nested dict with a ``label`` is that label, any other nested dict
    a column per key (``total`` -> ``total_median``, ``total_lo90``, ...), and a list of dicts
    named by their ``term`` (``--explain``'s terms) a column per term and key
    (``explain_terms_target_step_share``; it was one cell of Python's repr).

    >>> dict(_flat_cells({"a": 1, "d": {"label": "U(1,2)"}, "total": {"median": 9}}))
    {'a': 1, 'd': 'U(1,2)', 'total_median': 9}
    >>> dict(_flat_cells({"explain": {"r2": 1.0, "terms": [{"term": "target step",
    ...                                                     "share": 0.6, "from": "x"}]}}))
    {'explain_r2': 1.0, 'explain_terms_target_step_share': 0.6, 'explain_terms_target_step_from': 'x'}
    """
    for k, v in row.items():
        if isinstance(v, dict) and "label" not in v:
            yield from ((f"{k}_{sub}", x) for sub, x in _flat_cells(v))
        elif isinstance(v, list) and v and all(isinstance(t, dict) and "term" in t for t in v):
            for t in v:
                name = str(t["term"]).replace(" ", "_")
                yield from ((f"{k}_{name}_{sub}", x) for sub, x in t.items() if sub != "term")
        else:
            yield k, (v.get("label") if isinstance(v, dict) else v)


# ---------------------------------------------------------------- living-posterior commands
#: ``add`` flags that describe one row (not allowed together with --from).
ROW_FLAGS = ("hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
             "accept", "context", "concurrency", "tok_s", "source", "notes", "model")


def aligned_table(headers: list[str], rows: list[list[str]], left: int = 2,
                  text_last: bool = False) -> str:
    """The first ``left`` columns (and the last, with ``text_last``) left-aligned, the rest
    right-aligned."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    last = len(headers) - 1 if text_last else -1

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left or i == last else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def default_data_path(data: str | None) -> Path:
    """``--data`` or ./data/measurements.csv; never the read-only copy inside the package."""
    return Path(data) if data else Path("data") / "measurements.csv"


#: A path as the user would type it: relative when it is under the working directory.
shown_path = shown


def hardware_rows(hardware_file: str | None):
    """The effective hardware table's rows: the built-in GPUs overlaid by data/hardware.csv
    (or ``--hardware-file``)."""
    from ddtree_bayes.core.hardware_table import hardware_table

    return hardware_table(None, hardware_file).rows

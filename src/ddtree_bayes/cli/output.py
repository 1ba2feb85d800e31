"""Printing helpers every CLI module shares: tables for people, JSON/CSV for machines."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

PROG = "ddtree-bayes"


def _fmt(value, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    """Left-align the first columns of text, right-align the rest; one line per row."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _emit_machine(rows: list[dict], fmt: str, extra: dict | None = None) -> None:
    if fmt == "json":
        print(json.dumps({**(extra or {}), "rows": rows}, indent=2))
    else:
        buf = io.StringIO()
        if rows:
            writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        sys.stdout.write(buf.getvalue())


# ---------------------------------------------------------------- living-posterior commands
#: ``add`` flags that describe one row (not allowed together with --from).
ROW_FLAGS = ("hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
             "accept", "context", "tok_s", "source", "notes", "model")


def _table(headers: list[str], rows: list[list[str]], left: int = 2,
           text_last: bool = False) -> str:
    """The first ``left`` columns (and the last, with ``text_last``) left-aligned, the rest
    right-aligned."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    last = len(headers) - 1 if text_last else -1

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left or i == last else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _json(payload) -> None:
    print(json.dumps(payload, indent=2, default=str))


def _default_data_path(data: str | None) -> Path:
    """``--data`` or ./data/measurements.csv; never the read-only copy inside the package."""
    return Path(data) if data else Path("data") / "measurements.csv"


def _show(path: Path | str) -> str:
    """A path as the user would type it: relative when it is under the working directory."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _hardware_table(hardware_file: str | None):
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.data import load_hardware

    return load_hardware(Path(hardware_file) if hardware_file else paths.data_file("hardware.csv"))

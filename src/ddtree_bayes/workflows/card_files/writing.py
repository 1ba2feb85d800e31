"""Writing card rows: data/models.csv and data/drafters.csv, under the file's lock, all or
nothing, by atomic rename (the conventions of ``add``; ``workflows.living.records``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ddtree_bayes.core import per_call
from ddtree_bayes.core.data import csv_line, read_records
from ddtree_bayes.core.errors import DataError, InputError
from ddtree_bayes.workflows.living.records import exclusive_lock, write_text_atomically


@dataclass(frozen=True)
class Written:
    """One row written: its file, key, line number, and whether it replaced a row."""

    file: str
    name: str
    row: int
    replaced: bool
    created: bool


def existing_row(path: Path, key: str, name: str) -> int | None:
    """The line of ``name`` in the ``key`` column of ``path`` (None if absent or no file)."""
    if not path.is_file():
        return None
    _, header, body = read_records(path)
    if key not in header:
        return None
    j = header.index(key)
    return next((i for i, v in body if len(v) > j and v[j].strip() == name), None)


def plan_text(path: Path, seed_text: str, key: str, rows: list[dict[str, str]], *,
              replace: bool, optional: tuple[str, ...] = ()) -> tuple[str, list[tuple[str, int, bool]]]:
    """The file's new text with ``rows`` appended (or, with ``replace``, put in place of the
    rows of the same ``key``), and (name, line, replaced) per row. Raises before anything is
    written: a name that exists without ``replace``, a column the file lacks (but for the
    ``optional`` columns, added to its header when a row fills them: the file's other rows
    leave them blank)."""
    text = (per_call.read_text(path, encoding="utf-8-sig") if path.is_file()   # (once a call)
            else seed_text)
    _, header, body = read_records(str(path), text)
    add = [c for c in optional if c not in header and any(str(r.get(c, "")).strip() for r in rows)]
    if add:
        head, _, rest = text.partition("\n")
        cr = "\r" if head.endswith("\r") else ""
        text = f"{head.removesuffix(cr)},{','.join(add)}{cr}\n{rest}"
        _, header, body = read_records(str(path), text)
    missing = [c for c in rows[0] if c not in header and c not in optional] if rows else []
    if missing:
        raise DataError(f"no column {missing[0]!r}; the row's value would be lost", file=str(path),
                        row=1, column=missing[0],
                        fix=f"add the columns {', '.join(missing)} to the header (see the "
                            "bundled file)")
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    starts = [i for i, _ in body] + [len(lines) + 1]
    j = header.index(key)
    placed: list[tuple[str, int, bool]] = []
    for row in rows:
        name = row[key]
        at = next((k for k, (i, v) in enumerate(body) if len(v) > j and v[j].strip() == name), None)
        if at is not None and not replace:
            where = (f"in {path}, row {body[at][0]}" if path.is_file() else
                     f"a bundled card (row {body[at][0]} of the cards {path} would start from)")
            raise InputError(f"{name!r} is already {where}",
                             fix="pass --replace to overwrite that row, or --name to add it "
                                 "under another name")
        if at is None:
            lines.append(csv_line(header, row, newline))
        else:   # the record's lines (a quoted field may span several) become the new row
            first, end = body[at][0], starts[at + 1]
            lines[first - 1:end - 1] = [csv_line(header, row, newline)] + [""] * (end - 1 - first)
        placed.append((name, 0, at is not None))
    new_text = "".join(lines)
    _, _, new_body = read_records(str(path), new_text)
    line_of = {v[j].strip(): i for i, v in new_body if len(v) > j}
    return new_text, [(name, line_of[name], rep) for name, _, rep in placed]


def check_writable(path: Path) -> None:
    """Refuse a file a write would have to overwrite against its protection: a read-only
    file (the atomic rename would replace it all the same) or a folder."""
    if path.exists() and not path.is_file():
        raise InputError("not a file", file=str(path), fix="pass a CSV file to write")
    if path.exists() and not path.stat().st_mode & 0o222:
        raise DataError("the file is read-only; nothing was written", file=str(path),
                        fix=f"make it writable (chmod u+w {path}) or pass another file")


#: One file's rows to write: (file, seed text when absent, key column, rows, the new text's
#: check (path, text) or None, optional columns).
Plan = tuple[Path, str, str, list[dict[str, str]], Callable | None, tuple[str, ...]]


def write_plans(plans: list[Plan], *, replace: bool, what: str) -> list[Written]:
    """Write every plan's rows, all or nothing: every file is checked (writable, each new
    text planned and validated, under every file's lock) before any is written, and the
    renames are one commit (:func:`~ddtree_bayes.core.interrupts.commit`, ``what``), so a
    refusal or a signal leaves every file as it was. A model card written without the
    drafter row its config declares (a read-only data/drafters.csv) was refused "nothing was
    written" after data/models.csv had been written."""
    from ddtree_bayes.core import interrupts

    plans = [p for p in plans if p[3]]
    for path, *_ in plans:
        check_writable(path)
    with ExitStack() as locks:
        for path, *_ in plans:
            path.parent.mkdir(parents=True, exist_ok=True)
            locks.enter_context(exclusive_lock(path))
        ready = []
        for path, seed, key, rows, check, optional in plans:
            text, placed = plan_text(path, seed, key, rows, replace=replace, optional=optional)
            if check is not None:
                check(str(path), text)
            ready.append((path, text, placed, not path.exists()))
        with interrupts.commit(what):
            for path, text, _, _ in ready:
                write_text_atomically(path, text)
    return [Written(str(path), n, line, rep, created)
            for path, _, placed, created in ready for n, line, rep in placed]


def write_rows(path: Path, seed_text: str, key: str, rows: list[dict[str, str]], *,
               replace: bool, check=None, optional: tuple[str, ...] = ()) -> list[Written]:
    """Write ``rows`` into ``path`` (created from ``seed_text`` when absent), validating the
    whole new text with ``check(path, text)`` first; nothing is written on any error."""
    return write_plans([(path, seed_text, key, rows, check, optional)], replace=replace,
                       what=path.name)

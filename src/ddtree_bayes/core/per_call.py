"""One command, each input read once: within :func:`call` (the CLI runs every command in one),
a file's bytes are read once while its size, modification time and inode stay the same, and
what is parsed from them (:func:`parsed`) is parsed once; both are forgotten when the call
ends. Outside a call every read goes to the disk, as before (the Python API: a card added
while a session holds a fit counts).

The commands asked one file several times: ``predict`` opened ``data/drafters.csv`` four times
(the drafter cards' changes, their gaps and ``--drafter`` each read its bytes), ``report``
parsed the built-in drafter cards 20 times and read ``data/seed_estimates.csv`` 39 times (once
per question), ``optimize`` read the priors file twice (the fit's staleness, the acceptance
curve). The key is exact within one call short of a rewrite in place at the same size inside
one modification-time tick (the package's own writers rename a new file into place: a new
inode); the entries live no longer than the call.

Standard library only (the bottom layer).

>>> import tempfile
>>> p = Path(tempfile.mkdtemp()) / "x.csv"
>>> _ = p.write_text("a\\r\\nb\\n")
>>> with call():
...     first = read_text(p)
...     again = parsed("lines", p, lambda: first.splitlines())
...     same = parsed("lines", p, lambda: ["not parsed again"])
>>> first, again is same, again
('a\\nb\\n', True, ['a', 'b'])
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The call under way: (stamp of the file, its bytes) by resolved path, and parses by
#: (kind, resolved path, stamp). None outside a call.
_CALL: dict[str, dict] | None = None


@contextmanager
def call() -> Iterator[None]:
    """Run a command as one call: each file read once, each parse made once (a call inside a
    call is part of it)."""
    global _CALL
    if _CALL is not None:
        yield
        return
    _CALL = {"bytes": {}, "parsed": {}}
    try:
        yield
    finally:
        _CALL = None


def _stamp(path: Path) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def read_bytes(path: str | Path) -> bytes:
    """The bytes of ``path`` (its OSError as ``Path.read_bytes`` raises it), read once per
    call while the file is unchanged."""
    if _CALL is None:
        return Path(path).read_bytes()
    key = str(Path(path).resolve())
    stamp = _stamp(Path(path))
    held = _CALL["bytes"].get(key)
    if held is None or held[0] != stamp:
        held = _CALL["bytes"][key] = (stamp, Path(path).read_bytes())
    return held[1]


def read_text(path: str | Path, encoding: str | None = None) -> str:
    """The text of ``path`` as ``Path(path).read_text(encoding)`` reads it (universal
    newlines; its UnicodeDecodeError), from :func:`read_bytes`."""
    raw = read_bytes(path)
    return io.TextIOWrapper(io.BytesIO(raw), encoding=encoding).read()


def open_text(path: str | Path, encoding: str = "utf-8-sig") -> io.StringIO:
    """The file as ``open(path, newline="", encoding=encoding)`` reads it (no newline
    translation: a CSV reader's own; a byte-order mark dropped), from :func:`read_bytes`."""
    return io.StringIO(read_bytes(path).decode(encoding), newline="")


def parsed[T](kind: str, path: str | Path, make: Callable[[], T], *more: Any) -> T:
    """``make()``, the parse ``kind`` of the file ``path`` (and of ``more``: other inputs it
    depends on, hashable), made once per call while the file is unchanged. Give only results
    the callers do not change (frozen dataclasses, tuples of them)."""
    if _CALL is None:
        return make()
    try:
        stamp = _stamp(Path(path))
    except OSError:   # (no such file: the parse names it, file and fix, as outside a call)
        return make()
    key = (kind, str(Path(path).resolve()), stamp, *more)
    held = _CALL["parsed"]
    if key not in held:
        held[key] = make()
    return held[key]


def parsed_text[T](kind: str, text: str, make: Callable[[], T]) -> T:
    """``make()``, the parse ``kind`` of ``text`` (a file's, or the copy a fit stores: one
    text, parsed once per call whichever input it came from). A parse that raises is not
    kept (each caller's error names its own input). Read-only results only, as :func:`parsed`."""
    if _CALL is None:
        return make()
    key = (kind, text)
    held = _CALL["parsed"]
    if key not in held:
        held[key] = make()
    return held[key]


def in_call() -> bool:
    """Whether a call is under way."""
    return _CALL is not None

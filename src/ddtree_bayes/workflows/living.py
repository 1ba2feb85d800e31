"""The living posterior: new measurements in, updated intervals out, nothing lost.

The library side of ``ddtree-bayes add | update | history | diff | track`` (the commands
are in ``cli_living``):

- :func:`append_rows` appends validated rows to a measurement file. It holds an exclusive
  ``fcntl.flock`` on ``.<file>.lock`` next to the file across read, validate and write, and
  replaces the file atomically (temp file, fsync, rename): parallel appends all land, and a
  process killed at any point leaves either the old or the new file, never a mix.
- :func:`changed_rows` and :func:`score_rows`: which measurements are new since a fit, and
  where each falls in that fit's posterior predictive (a surprise beyond the 1st/99th
  percentile may be a regime change: a new driver, kernel or engine version).
- tracked queries (``models/tracked.json``), :func:`query_rows` and :func:`compare_queries`:
  the intervals to watch before and after a refit; :func:`parameter_table` and
  :func:`list_fits` for ``diff`` and ``history``.

Only the CSV layer is imported at module level, so ``add`` starts fast; numpy and the
predictive code are imported where they are used.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ddtree_bayes.core.data import (
    COLUMNS,
    NAME_RE,
    Measurement,
    Measurements,
    load_measurements,
    parse_row,
    read_records,
)
from ddtree_bayes.core.errors import DataError, DDTreeBayesError, InputError, QueryError

#: Predictive percentiles outside [SURPRISE_LO, SURPRISE_HI] are flagged as surprises.
SURPRISE_LO, SURPRISE_HI = 0.01, 0.99
#: Tracked queries live in ``models/tracked.json``.
TRACKED_FILE = "tracked.json"
#: The built-in tracked query: the default scenario (B300, DDTree block 16 / budget 32,
#: SGLang and native) at acceptance 14, the middle of the original estimate's 12-16.
DEFAULT_QUERY: dict[str, Any] = {"accept": "14"}
#: How long ``add`` waits for another process's lock before giving up.
LOCK_TIMEOUT_S = 120.0


class LockTimeout(DDTreeBayesError):
    """Another process held the measurement file's lock for too long (nothing written)."""


class RowErrors(DataError):
    """Several rows of a file are invalid: every problem is listed, nothing was appended."""

    def __init__(self, what: str, errors: list[DataError]) -> None:
        self.errors = errors
        n = len(errors)
        lines = "\n".join(f"  {e}" for e in errors)
        super().__init__(f"{what}: {n} problem{'s' if n != 1 else ''}, nothing appended:\n{lines}")


class SurpriseError(InputError):
    """``update --reject-surprises`` found a measurement outside the 1st-99th percentile."""


# ---------------------------------------------------------------- locking and atomic writes
def lock_path(path: Path) -> Path:
    """The lock file of ``path``: ``.<name>.lock`` in the same folder."""
    return path.with_name(f".{path.name}.lock")


@contextmanager
def exclusive_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive ``flock`` on :func:`lock_path` of ``path`` (released on exit, and by
    the kernel if the process dies)."""
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise InputError(f"cannot open the lock file {lock}: {err.strerror}; nothing was "
                         "written", fix="the folder must be writable") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout(f"{lock} is held by another process for more than "
                                      f"{timeout:g} s; nothing was written (fix: wait for "
                                      "the other `ddtree-bayes add` to finish)") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` (temp file + fsync + rename), keeping its permissions."""
    from ddtree_bayes.engine import store

    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    store.atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def _remove_stale_temps(path: Path) -> None:
    """Temp files of writers killed before their rename (only called under the lock, when no
    other writer of ``path`` can be running)."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------- appending rows
def row_key(m: Measurement) -> tuple:
    """What makes two measurements identical: every parsed value except the row number
    (so ``612`` and ``612.0``, or a blank and a derived verify_tokens, are the same)."""
    return tuple(getattr(m, f.name) for f in fields(m) if f.name != "row")


@dataclass
class NewRow:
    """A row to append: raw column -> text, and where it came from (for error messages).

    ``line`` None means "the row it will become in the data file". ``gpus`` or ``model``
    set to None are filled in from the data file (the GPU count measured for that hardware,
    the file's model).
    """

    origin: str
    line: int | None
    values: dict[str, str | None]


@dataclass
class Appended:
    """What :func:`append_rows` wrote."""

    path: Path
    rows: list[Measurement]
    total_rows: int
    repeats: dict[int, int] = field(default_factory=dict)  # new row -> row it repeats


def _csv_line(header: list[str], values: dict[str, str], newline: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=newline).writerow([values.get(h, "") for h in header])
    return buf.getvalue()


def _gpus_for(current: Measurements, hardware: str, origin: str, line: int) -> str:
    counts = sorted({m.gpus for m in current.rows if m.hardware == hardware})
    if not counts:
        raise DataError(f"no {hardware} row in {current.path} to take the GPU count from",
                        file=origin, row=line, column="gpus", fix="pass --gpus")
    if len(counts) > 1:
        raise DataError(f"{hardware} was measured with {', '.join(map(str, counts))} GPUs",
                        file=origin, row=line, column="gpus", fix="say which with --gpus")
    return str(counts[0])


def append_rows(data_path: Path, hardware: dict[str, dict[str, str]], new: list[NewRow], *,
                allow_duplicate: bool = False, fill_verify_tokens: bool = False,
                what: str | None = None) -> Appended:
    """Append ``new`` rows to the measurement file ``data_path``, all or none.

    Under the file's lock: re-read and validate the current file (hand edits are checked
    here too), validate every new row with :func:`~ddtree_bayes.core.data.parse_row`, refuse a
    row identical to an existing one (``allow_duplicate`` appends it with "repeat of row
    N" in its notes instead, so the file stays valid), check the whole new file with
    :func:`~ddtree_bayes.core.data.load_measurements`, then replace the file atomically.

    Raises :class:`DataError` (one problem) or :class:`RowErrors` (several; ``what`` names
    the source in the summary line). Nothing is written on any error.
    """
    data_path = Path(data_path)
    if not data_path.is_file():
        raise DataError("file not found", file=str(data_path),
                        fix="run in the project folder (with data/measurements.csv) or pass "
                            "--data FILE; a new file needs its header line first")
    if not data_path.stat().st_mode & 0o222:
        # the atomic rename would replace even a read-only file: respect the protection
        raise DataError("the file is read-only; nothing was written", file=str(data_path),
                        fix="append to a writable copy with --data FILE, or make it writable "
                            f"(chmod u+w {data_path}) if it is meant to change")
    with exclusive_lock(data_path):
        raw = data_path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"cannot read: {err}", file=str(data_path),
                            fix="save it as UTF-8 CSV") from None
        current = load_measurements(data_path, hardware, text=text)
        _, header, _ = read_records(data_path, text)
        newline = "\r\n" if "\r\n" in text else "\n"
        body = text if text.endswith(("\n", "\r")) else text + newline
        next_line = body.count("\n") + 1
        keys = {row_key(m): m.row for m in current.rows}
        errors: list[DataError] = []
        lines: list[str] = []
        expected: list[int] = []
        repeats: dict[int, int] = {}
        for item in new:
            line = item.line if item.line is not None else next_line
            values = {k: ("" if v is None else str(v).strip()) for k, v in item.values.items()}
            try:
                extra = [c for c in values if c not in header and values[c]]
                if extra:
                    raise DataError(f"{data_path} has no column {extra[0]!r}; its value would be "
                                    "lost", file=item.origin, row=line, column=extra[0],
                                    fix=f"drop the column, or add it to {data_path}'s header")
                if item.values.get("model") is None:
                    values["model"] = current.model
                if values.get("hardware") and values["hardware"] not in hardware:
                    raise DataError(f"unknown hardware {values['hardware']!r}", file=item.origin,
                                    row=line, column="hardware",
                                    fix="use a name from data/hardware.csv ("
                                        + ", ".join(sorted(hardware)) + ") or add the GPU there")
                if item.values.get("gpus") is None and values.get("hardware"):
                    values["gpus"] = _gpus_for(current, values["hardware"], item.origin, line)
                m = parse_row(item.origin, line, values, hardware)
                if m.model != current.model:
                    raise DataError(f"model {m.model!r}, but {data_path} holds {current.model!r}",
                                    file=item.origin, row=line, column="model",
                                    fix="one target model per file: put it in its own file "
                                        "(--data)")
                if fill_verify_tokens and not values.get("verify_tokens"):
                    values["verify_tokens"] = str(m.verify_tokens)
                key = row_key(m)
                if key in keys:
                    if not allow_duplicate:
                        raise DataError(f"identical to row {keys[key]}" + (
                                            "" if item.origin.startswith(str(data_path))
                                            else f" of {data_path}"),
                                        file=item.origin, row=line,
                                        fix="if it is a true repeat of that measurement, pass "
                                            "--allow-duplicate (its notes then say "
                                            f"'repeat of row {keys[key]}')")
                    first, n, notes = keys[key], 1, values.get("notes", "")
                    while key in keys:
                        tag = f"repeat of row {first}" if n == 1 else f"repeat {n} of row {first}"
                        values["notes"] = f"{notes}; {tag}" if notes else tag
                        key = row_key(parse_row(item.origin, line, values, hardware))
                        n += 1
                    repeats[next_line] = first
            except DataError as err:
                errors.append(err)
                continue
            out = _csv_line(header, {k: v for k, v in values.items() if v is not None}, newline)
            keys[key] = next_line
            expected.append(next_line)
            next_line += out.count("\n")
            lines.append(out)
        if errors:
            if len(errors) == 1 and what is None:
                raise errors[0]
            raise RowErrors(what or str(data_path), errors)
        new_text = body + "".join(lines)
        final = load_measurements(data_path, hardware, text=new_text)
        wanted = set(expected)
        appended = [m for m in final.rows if m.row in wanted]
        if len(appended) != len(new):  # pragma: no cover - a bug, not a user error
            raise DataError(f"internal error: expected {len(new)} new rows, found "
                            f"{len(appended)}; nothing was written", file=str(data_path))
        write_text_atomically(data_path, new_text)
        _remove_stale_temps(data_path)
    return Appended(path=data_path, rows=appended, total_rows=len(final.rows), repeats=repeats)


def rows_from_file(path: Path, data_header: tuple[str, ...] = COLUMNS) -> list[NewRow]:
    """The rows of a ``--from`` CSV as :class:`NewRow` (same schema as the data file).

    Structural problems (missing columns, wrong field counts) of every row are collected
    and raised together as :class:`RowErrors`; values are checked by :func:`append_rows`.
    """
    name = str(path)
    _, header, body = read_records(path)
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DataError(f"missing column{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(missing)}", file=name, row=1,
                        column=missing[0], fix=f"the header must contain {','.join(COLUMNS)}")
    rows, errors = [], []
    for line, cells in body:
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            errors.append(DataError(f"{len(cells)} fields, header has {len(header)}", file=name,
                                    row=line, fix="quote fields that contain commas"))
            continue
        rows.append(NewRow(name, line, {h: c.strip() for h, c in zip(header, cells, strict=True)}))
    if errors:
        raise RowErrors(name, errors)
    if not rows:
        raise DataError("no measurement rows", file=name, fix="add at least one row under the header")
    return rows


def describe_config(m: Measurement) -> str:
    """``b300 x8 sglang ddtree b16/B32 M=33 accept 13.1`` (context shown when given)."""
    parts = [f"{m.hardware} x{m.gpus}", m.engine, m.method]
    size = "/".join(s for s in ((f"b{m.block}" if m.block is not None else ""),
                                (f"B{m.budget}" if m.budget is not None else "")) if s)
    if size:
        parts.append(size)
    parts.append(f"M={m.verify_tokens}")
    if m.context_tokens:
        parts.append(f"ctx {m.context_tokens:g}")
    parts.append(f"accept {m.accept_len:g}")
    return " ".join(parts)


def describe_row(m: Measurement) -> str:
    """One line: configuration, acceptance and throughput of a measurement."""
    return f"{describe_config(m)}: {m.tok_s:g} tok/s"


# ---------------------------------------------------------------- what is new since a fit
def changed_rows(stored: Measurements, current: Measurements
                 ) -> tuple[list[Measurement], list[Measurement]]:
    """(rows of ``current`` not in ``stored``, rows of ``stored`` no longer in ``current``),
    matched by content (:func:`row_key`), not by row number: a hand-edited row counts as
    one removed and one added."""
    def unmatched(rows, others) -> list[Measurement]:
        """Rows of ``rows`` left over after pairing each with an equal row of ``others``."""
        left = Counter(row_key(m) for m in others)
        out = []
        for m in rows:
            k = row_key(m)
            if left[k]:
                left[k] -= 1
            else:
                out.append(m)
        return out

    return unmatched(current.rows, stored.rows), unmatched(stored.rows, current.rows)


def without_fix(err: InputError) -> str:
    """The error's text without its ``(fix: ...)`` tail (which speaks to ``predict``)."""
    text, tail = str(err), f" (fix: {err.fix})"
    return text[: -len(tail)] if err.fix and text.endswith(tail) else text


def _normal_cdf(z):
    import numpy as np

    return 0.5 * np.vectorize(math.erfc, otypes=[float])(-np.asarray(z) / math.sqrt(2.0))


def score_rows(draws, rows: list[Measurement], seed: int) -> list[dict]:
    """Each measurement against the fit's posterior predictive (including its noise).

    ``percentile`` is P(predicted tok/s < measured), computed exactly per draw from the
    log-normal noise (not by counting 4000 samples, so 1e-6 is not rounded to 0);
    ``status`` is ``ok``, ``surprise`` (outside the 1st-99th percentile) or
    ``unpredictable`` (the fit cannot answer: e.g. a GPU missing from the hardware table
    stored in the fit, or another model; ``reason`` says why). ``transferred`` marks a row
    of a system the fit has no measurement of, predicted by hardware transfer from a
    measured one (``overhead_from`` says which).
    """
    import numpy as np

    from ddtree_bayes.engine import predictive as P

    rng = np.random.default_rng(seed)
    fit_model = draws.meta.get("model", {}).get("target_model")
    sd = np.asarray(draws.variables["noise_sd"], dtype=float)
    out = []
    for m in rows:
        base: dict[str, Any] = {
            "row": m.row, "system": m.system, "engine": m.engine, "method": m.method,
            "block": m.block, "budget": m.budget, "verify_tokens": m.verify_tokens,
            "context_tokens": m.context_tokens, "accept_len": m.accept_len, "measured": m.tok_s,
            "source": m.source, "notes": m.notes, "configuration": describe_config(m),
            "description": describe_row(m)}
        if fit_model and m.model != fit_model:
            out.append({**base, "status": "unpredictable",
                        "reason": f"fit {draws.meta['fit_id']} is of {fit_model}, this row of "
                                  f"{m.model}"})
            continue
        try:
            sc = P.resolve_scenario(draws, hardware=m.hardware, gpus=m.gpus, engine=m.engine,
                                    method=m.method, block=m.block, budget=m.budget,
                                    verify_tokens=m.verify_tokens,
                                    context_tokens=m.context_tokens)
            step, how = P.step_draws(draws, sc, rng)
        except QueryError as err:
            out.append({**base, "status": "unpredictable", "reason": without_fix(err)})
            continue
        log_mu = np.log(m.accept_len * 1000.0 / step)
        diff = math.log(m.tok_s) - log_mu
        with np.errstate(divide="ignore", invalid="ignore"):
            cdf = np.where(sd > 0, _normal_cdf(diff / np.where(sd > 0, sd, 1.0)),
                           (diff > 0) + 0.5 * (diff == 0))
        pct = float(np.mean(cdf))
        samples = np.exp(log_mu + sd * rng.standard_normal(sd.shape[0]))
        summary = P.summarize(samples, (0.5, 0.9), None)
        status = "surprise" if pct < SURPRISE_LO or pct > SURPRISE_HI else "ok"
        out.append({**base, **summary, "percentile": pct, "status": status,
                    "transferred": not getattr(sc, "measured", True), "overhead_from": how})
    return out


def format_percentile(p: float) -> str:
    """``38.2%``; the tails as ``<0.1%`` / ``>99.9%``."""
    if p < 0.001:
        return "<0.1%"
    if p > 0.999:
        return ">99.9%"
    return f"{p * 100:.1f}%"


# ---------------------------------------------------------------- tracked queries
QUERY_KEYS = ("hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
              "context", "accept")


@dataclass(frozen=True)
class Tracked:
    """A saved predict-style query; ``builtin`` for the default one (not removable)."""

    name: str
    query: dict[str, Any]
    added_utc: str | None = None
    builtin: bool = False


def tracked_path(models: Path) -> Path:
    return models / TRACKED_FILE


def _read_tracked_file(path: Path) -> list[Tracked]:
    if not path.exists():
        return []
    try:
        payload = json.loads(path.read_text())
        entries = payload["queries"]
        out = [Tracked(name=str(e["name"]), query={k: e["query"].get(k) for k in QUERY_KEYS},
                       added_utc=e.get("added_utc")) for e in entries]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise InputError(f"cannot read tracked queries: {err}", file=str(path),
                         fix="fix the JSON by hand, or delete the file to start again") from None
    return out


def load_tracked(models: Path, *, include_default: bool = True) -> list[Tracked]:
    """The default query, then the saved ones in the order they were added."""
    saved = _read_tracked_file(tracked_path(models))
    default = [Tracked("default", dict(DEFAULT_QUERY), builtin=True)] if include_default else []
    return default + saved


def normalize_query(query: dict[str, Any]) -> dict[str, Any]:
    """Validate a query's syntax (not whether a fit can answer it); keys of QUERY_KEYS."""
    from ddtree_bayes.engine import predictive as P

    q = {k: query.get(k) for k in QUERY_KEYS}
    for key in ("gpus", "block", "budget", "verify_tokens"):
        value = q[key]
        if value is not None and (not isinstance(value, int) or value < 1):
            raise QueryError(f"--{key.replace('_', '-')} must be a positive whole number",
                             fix="e.g. --budget 32")
    for key in ("engine", "method"):
        if q[key] is not None:
            names = str(q[key]).split(",") if key == "engine" else [str(q[key])]
            for name in names:
                if not NAME_RE.fullmatch(name):
                    raise QueryError(f"--{key} {name!r} is not a lowercase name",
                                     fix=f"write it in lowercase, e.g. '{name.lower()}'")
    if q["accept"] is not None:
        P.parse_accept(str(q["accept"]))
        q["accept"] = str(q["accept"])
    if q["context"] is not None:
        P.parse_context(str(q["context"]))
        q["context"] = str(q["context"])
    return q


def query_name(query: dict[str, Any]) -> str:
    """A readable default name, e.g. ``b300-native-ddtree-b16-B32-a14``."""
    q = query
    parts = [q.get("hardware") or "b300"]
    if q.get("gpus"):
        parts.append(f"x{q['gpus']}")
    parts.append((q.get("engine") or "sglang+native").replace(",", "+"))
    parts.append(q.get("method") or "ddtree")
    for key, tag in (("block", "b"), ("budget", "B"), ("verify_tokens", "M"), ("context", "ctx"),
                     ("accept", "a")):
        if q.get(key) is not None:
            parts.append(f"{tag}{q[key]}")
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(str(p) for p in parts))


def track_add(models: Path, query: dict[str, Any], name: str | None = None) -> Tracked:
    """Save a query in ``models/tracked.json`` (locked, atomic). Refuses a duplicate name or
    an identical query."""
    q = normalize_query(query)
    name = name or query_name(q)
    if not re.fullmatch(r"[A-Za-z0-9._+-]+", name):
        raise InputError(f"query name {name!r} may only hold letters, digits and . _ + -",
                         fix="pass another --name")
    path = tracked_path(models)
    models.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path):
        existing = load_tracked(models)
        for t in existing:
            if t.query == q:
                raise InputError(f"this query is already tracked as {t.name!r}",
                                 fix="nothing to do")
        for t in existing:
            if t.name == name:
                raise InputError(f"a tracked query is already called {name!r}",
                                 fix="pick another --name, or `ddtree-bayes track remove "
                                     f"{name}` first" if not t.builtin else
                                     "'default' is built in: pick another --name")
        entry = Tracked(name, q, datetime.now(UTC).isoformat(timespec="seconds"))
        saved = [t for t in existing if not t.builtin] + [entry]
        payload = {"version": 1, "queries": [{"name": t.name, "query": t.query,
                                              "added_utc": t.added_utc} for t in saved]}
        write_text_atomically(path, json.dumps(payload, indent=2) + "\n")
    return entry


def track_remove(models: Path, name: str) -> Tracked:
    """Remove a saved query by name (locked, atomic)."""
    path = tracked_path(models)
    if name == "default":
        raise InputError("the default query is built in and always tracked",
                         fix="remove one of your own queries (see `ddtree-bayes track list`)")
    with exclusive_lock(path):
        saved = _read_tracked_file(path)
        gone = [t for t in saved if t.name == name]
        if not gone:
            raise InputError(f"no tracked query called {name!r}"
                             + (f" (tracked: {', '.join(t.name for t in saved)})" if saved else ""),
                             fix="see `ddtree-bayes track list`")
        keep = [t for t in saved if t.name != name]
        payload = {"version": 1, "queries": [{"name": t.name, "query": t.query,
                                              "added_utc": t.added_utc} for t in keep]}
        write_text_atomically(path, json.dumps(payload, indent=2) + "\n")
    return gone[0]


def query_rows(draws, query: dict[str, Any], seed: int, workdir: Path | None = None
               ) -> list[dict]:
    """Posterior predictive rows for a saved query, with ``predict``'s defaults: no
    configuration flag means the default scenario; otherwise b300 / ddtree / sglang,native
    fill in what is missing."""
    from ddtree_bayes.core.config import DEFAULT_SCENARIO
    from ddtree_bayes.engine import predictive as P

    q = query
    engines = str(q["engine"]).split(",") if q.get("engine") else None
    if q.get("hardware") is None and q.get("method") is None and not any(
            q.get(k) for k in ("gpus", "block", "budget", "verify_tokens")):
        hardware = method = None
    else:
        hardware = q.get("hardware") or DEFAULT_SCENARIO.hardware
        method = q.get("method") or DEFAULT_SCENARIO.method
        engines = engines or list(DEFAULT_SCENARIO.engines)
    return P.predict_rows(draws, hardware=hardware, gpus=q.get("gpus"), engines=engines,
                          method=method, block=q.get("block"), budget=q.get("budget"),
                          verify_tokens=q.get("verify_tokens"), context_tokens=q.get("context"),
                          accept=q.get("accept"), prob=0.9, seed=seed, workdir=workdir)


def row_label(r: dict) -> str:
    """``b300 x8 native ddtree b16/B32 accept 14`` (context shown when not 0)."""
    parts = [f"{r['hardware']} x{r['gpus']}", r["engine"], r["method"]]
    size = "/".join(s for s in ((f"b{r['block']}" if r["block"] is not None else ""),
                                (f"B{r['budget']}" if r["budget"] is not None else "")) if s)
    if size:
        parts.append(size)
    if r["context_tokens"]:
        parts.append(f"ctx {r['context_tokens']:g}")
    parts.append(f"accept {r['accept']}")
    return " ".join(parts)


def _interval(r: dict) -> dict:
    return {"median": r["median"], "lo90": r["lo90"], "hi90": r["hi90"]}


def compare_queries(before, after, tracked: list[Tracked], seed: int,
                    workdir: Path | None = None) -> list[dict]:
    """Each tracked query under two fits (``before`` may be None), same seed for both.

    One dict per (query, engine, acceptance) row: ``name``, ``label``, ``before`` and
    ``after`` (median, lo90, hi90 or None) and ``before_error`` / ``after_error`` when a fit
    cannot answer the query (e.g. an unmeasured system).
    """
    out: list[dict[str, Any]] = []
    for t in tracked:
        results: dict[str, dict[tuple[str, str], dict]] = {}
        errors: dict[str, str | None] = {}
        labels: dict[tuple[str, str], str] = {}
        for which, draws in (("before", before), ("after", after)):
            results[which], errors[which] = {}, None
            if draws is None:
                continue
            try:
                for r in query_rows(draws, t.query, seed, workdir):
                    key = (r["engine"], r["accept"])
                    results[which][key] = _interval(r)
                    labels.setdefault(key, row_label(r))
            except QueryError as err:
                errors[which] = without_fix(err)
        keys = list(dict.fromkeys([*results["before"], *results["after"]]))
        if not keys:
            out.append({"name": t.name, "label": query_name(t.query), "before": None,
                        "after": None, "before_error": errors["before"],
                        "after_error": errors["after"]})
        for key in keys:
            out.append({"name": t.name, "label": labels[key],
                        "before": results["before"].get(key),
                        "after": results["after"].get(key),
                        "before_error": errors["before"], "after_error": errors["after"]})
    return out


def format_change(c: dict) -> str:
    """``default: b300 x8 native ddtree b16/B32 accept 14: 90% 640-1180 -> 780-960 tok/s
    (median 890 -> 860, width -60%)``."""
    def iv(x: dict | None) -> str:
        return "-" if x is None else f"{x['lo90']:.0f}-{x['hi90']:.0f}"

    b, a = c["before"], c["after"]
    text = f"{c['name']}: {c['label']}: 90% {iv(b)} -> {iv(a)} tok/s"
    if b and a:
        wb, wa = b["hi90"] - b["lo90"], a["hi90"] - a["lo90"]
        width = f"{round((wa / wb - 1) * 100):+d}%" if wb > 0 else "n/a"
        text += f" (median {b['median']:.0f} -> {a['median']:.0f}, width {width})"
    elif a and not b:
        text += f" (median {a['median']:.0f}; " + (
            f"before: {c['before_error']})" if c.get("before_error") else "new)")
    elif b and not a:
        text += f" (after: {c.get('after_error') or 'not predicted'})"
    else:
        text = f"{c['name']}: {c['label']}: not predictable ({c.get('after_error')})"
    return text


# ---------------------------------------------------------------- parameters, history
def scalar_parameters(draws, include_auxiliary: bool = False) -> dict[str, Any]:
    """``{"moe_share[b300x8]": draws, ...}`` for every scalar of the posterior, labelled by
    coordinate. The non-centred auxiliaries (``*_z``) are left out unless asked for."""
    import numpy as np

    labels_by_var: dict[str, list[str]] = {}
    for p in draws.meta.get("diagnostics", {}).get("parameters", []):
        name, _, rest = p["parameter"].partition("[")
        if rest:
            labels_by_var.setdefault(name, []).append(rest[:-1])
    coords = draws.meta.get("coords", {})
    out: dict[str, Any] = {}
    for name, arr in draws.variables.items():
        if name.endswith("_z") and not include_auxiliary:
            continue
        arr = np.asarray(arr).reshape(arr.shape[0], -1) if np.ndim(arr) > 1 else np.asarray(arr)
        if arr.ndim == 1:
            out[name] = arr
            continue
        labels = labels_by_var.get(name, [])
        if len(labels) != arr.shape[1]:
            same = [v for v in coords.values() if len(v) == arr.shape[1]]
            labels = [str(x) for x in same[0]] if len(same) == 1 else [
                str(i) for i in range(arr.shape[1])]
        for j, lab in enumerate(labels):
            out[f"{name}[{lab}]"] = arr[:, j]
    return out


def parameter_table(a, b, include_auxiliary: bool = False) -> list[dict]:
    """Median and 90% interval of every scalar parameter in fits ``a`` and ``b``."""
    import numpy as np

    pa = scalar_parameters(a, include_auxiliary)
    pb = scalar_parameters(b, include_auxiliary)
    rows = []
    for name in dict.fromkeys([*pb, *pa]):
        row: dict[str, Any] = {"parameter": name}
        for tag, p in (("a", pa), ("b", pb)):
            if name in p:
                lo, med, hi = np.quantile(p[name], [0.05, 0.5, 0.95])
                row[tag] = {"median": float(med), "lo90": float(lo), "hi90": float(hi)}
            else:
                row[tag] = None
        if row["a"] and row["b"]:
            wa = row["a"]["hi90"] - row["a"]["lo90"]
            wb = row["b"]["hi90"] - row["b"]["lo90"]
            row["width_change"] = (wb / wa - 1) if wa > 0 else None
            ma = row["a"]["median"]
            row["median_change"] = ((row["b"]["median"] - ma) / abs(ma)) if ma else None
        rows.append(row)
    return rows


def list_fits(models: Path) -> list[dict]:
    """Every saved fit, oldest first, from its metadata only (h5py attributes)."""
    from ddtree_bayes.engine import store

    latest = None
    try:
        latest = store.resolve(models).stem
    except DDTreeBayesError:
        pass
    out = []
    for path in store.fit_files(models):
        try:
            meta = store.load_meta(path)
        except DDTreeBayesError as err:
            out.append({"fit_id": path.stem, "path": str(path), "readable": False,
                        "error": str(err), "created_utc": None, "latest": path.stem == latest})
            continue
        data = meta.get("data", {})
        out.append({
            "fit_id": meta.get("fit_id", path.stem), "path": str(path), "readable": True,
            "created_utc": meta.get("created_utc"), "data_sha256": data.get("sha256"),
            "rows": data.get("rows"), "converged": meta.get("converged"),
            "failures": meta.get("failures", []), "seed": meta.get("seed"),
            "sampler": meta.get("sampler"), "total_s": meta.get("timings", {}).get("total_s"),
            "update": meta.get("update"), "latest": path.stem == latest})
    out.sort(key=lambda r: (r["created_utc"] or "", r["fit_id"]))
    return out


def stored_rows(draws) -> Measurements:
    """The measurements a fit was made on (from the text stored in the artifact)."""
    from ddtree_bayes.engine import predictive as P

    return P.stored_measurements(draws)

"""Adding measurements: an exclusive lock, all-or-nothing validation, an atomic rename."""

from __future__ import annotations

import csv
import dataclasses
import difflib
import fcntl
import io
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddtree_bayes.core.data import (
    BENCH_RESULT_TAG,
    COLUMNS,
    OPTIONAL_COLUMNS,
    OPTIONAL_DEFAULTS,
    Measurement,
    Measurements,
    check_named_columns,
    comment_problem,
    csv_line,
    fields_problem,
    kv_cache_problem,
    load_measurements,
    misspelt_names,
    one_edit,
    parse_row,
    plain_float,
    plain_text,
    read_records,
    unknown_hardware_fix,
    weights_problem,
)
from ddtree_bayes.core.drafters import row_drafter_problem
from ddtree_bayes.core.errors import DataError, DDTreeBayesError, InputError, closest
from ddtree_bayes.core.methods import AR_METHOD, MethodSpec
from ddtree_bayes.core.pairs import impossible_step
from ddtree_bayes.core.row_notes import card_weights_note, cross_row_notes, physics_notes

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
        if n == 1:  # one problem, one line
            super().__init__(f"{what}: 1 problem, nothing appended: {errors[0]}")
            return
        lines = "\n".join(f"  {e}" for e in errors)
        super().__init__(f"{what}: {n} problems, nothing appended:\n{lines}")


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
    """What makes two measurements identical (:meth:`Measurement.key`)."""
    return m.key()


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
    #: the configuration came from ``add``'s flags (``--from-bench``, a row given as flags),
    #: not a CSV row: a fix names the flag (``--block``), not the column
    flags: bool = False
    #: a benchmark result's id (``BenchRecord.result_id``), which its notes carry as
    #: ``bench result <id>`` (:func:`result_tag`): the same result is refused a second time
    result_id: str | None = None


def result_tag(result_id: str) -> str:
    """The words a row's notes name its benchmark result by.

    >>> result_tag("0123456789ab"), BENCH_RESULT_TAG.findall("x; bench result 0123456789ab; y")
    ('bench result 0123456789ab', ['0123456789ab'])
    """
    return f"bench result {result_id}"


@dataclass
class Appended:
    """What :func:`append_rows` wrote."""

    path: Path
    rows: list[Measurement]
    total_rows: int
    repeats: dict[int, int] = field(default_factory=dict)  # new row -> row it repeats
    #: what the rows are kept with but a fit would price wrongly (core/row_notes)
    warnings: list[str] = field(default_factory=list)
    #: the file did not exist: it was made, with the standard header (``create``)
    created: bool = False


def _with_optional_columns(text: str, header: list[str], new: list[NewRow], newline: str
                           ) -> tuple[str, list[str]]:
    r"""The file's text and header with each optional column (``concurrency``) a new row fills
    with other than its default and the file lacks added at the end, blank (= its default) in
    every existing row. A cell of the default (concurrency 1: ``1``, ``1.0``) adds nothing:
    the row reads the same without it, and every row of the file would change.

    Each record keeps its text (its quoting, blanks, line ends, a quoted field over several
    lines): the header gains ``,concurrency``, every other record a ``,`` before its end, a
    blank line nothing (a user's file changes only by the column).

    >>> _with_optional_columns('a,b\r\n"x",\r\n\r\n"1\n2" ,z', ["a", "b"],
    ...                        [NewRow("f", 2, {"concurrency": "4"})], "\r\n")[0]
    'a,b,concurrency\r\n"x",,\r\n\r\n"1\n2" ,z,'
    """
    missing = [c for c in OPTIONAL_COLUMNS if c not in header
               and any(not _is_default(c, item.values.get(c)) for item in new)]
    if not missing:
        return text, header
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(missing)
    named, blank = "," + buf.getvalue(), "," * len(missing)
    # the file's lines as the loader reads them (core/data read_csv_file), each with its end
    lines = io.StringIO(text, newline="").readlines()
    reader = csv.reader(iter(lines))
    out, done = [], 0
    for i, row in enumerate(reader):
        record = lines[done:reader.line_num]
        done = reader.line_num
        if any(row):   # the record's last line: the cells go before its line end
            last = record[-1]
            body = last.rstrip("\r\n")
            record[-1] = body + (named if i == 0 else blank) + last[len(body):]
        out += record
    out += lines[done:]
    return "".join(out), [*header, *missing]


def _is_default(column: str, value: object) -> bool:
    """Whether an optional column's cell is blank or its default (:data:`OPTIONAL_DEFAULTS`);
    a cell that is no number is not (the row's check refuses it).

    >>> [_is_default("concurrency", v) for v in (" 1.0 ", "", "4", "x")]
    [True, True, False, False]
    """
    text = str(value or "").strip()
    if not text:
        return True
    if column not in OPTIONAL_DEFAULTS:   # (a drafter's name: any name is not the default)
        return False
    try:
        return plain_float(text) == OPTIONAL_DEFAULTS[column]
    except ValueError:
        return False


def line_end(text: str) -> str:
    r"""The line end of a data file's ``text``, which appended rows take: CRLF, a bare CR
    (what older spreadsheets on a Mac save; the csv module reads it as a line end), else LF.

    >>> [line_end(t) for t in ("a\r\nb\r\n", "a\rb\r", "a\nb\n", "a")]
    ['\r\n', '\r', '\n', '\n']
    """
    if "\r\n" in text:
        return "\r\n"
    return "\r" if "\r" in text and "\n" not in text else "\n"


def count_lines(text: str) -> int:
    r"""Lines of ``text`` as the csv module counts them (its rows' numbers): ended by LF, CRLF
    or a bare CR.

    >>> count_lines("h\r1\r"), count_lines("h\r\n1\r\n"), count_lines('h\n"a\nb"\n')
    (2, 2, 3)
    """
    return len(io.StringIO(text, newline="").readlines())


def _cards() -> dict:
    """The model cards of data/models.csv (or the bundled copy); empty if unreadable."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.core.model_cards import load_model_cards

    try:
        return load_model_cards(paths.data_file("models.csv"))
    except InputError:
        return {}


def _drafter_cards() -> tuple:
    """The drafter cards a row's ``drafter`` may name: the built-in ones overlaid by
    data/drafters.csv (core/drafters.py ``drafter_table``; a file that does not load raises,
    naming its problem)."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.drafters import drafter_table

    return drafter_table(paths.own_data_file("drafters.csv"))


def _unknown_model(current: Measurements, cards: dict, model: str | None, data_path: Path
                   ) -> tuple[str, str] | None:
    """A model neither in the file nor with a card: a new model makes a file of several
    models, fine if the fit can read its card; a name without one is most likely a typo.
    (message, fix), or None."""
    if not current.rows or not model or model in current.models or model in cards:
        return None
    return (f"model {model!r}, but {data_path} holds {', '.join(map(repr, current.models))} "
            "and there is no model card for it",
            "correct the name, or add its card to data/models.csv first (a fit of several "
            "models needs every model's card)")


def _cardless_near_a_card(rows: list[Measurement], cards: dict) -> list[str]:
    """A line per model of ``rows`` (the rows ``add`` appends) with no card but one edit
    (:func:`~ddtree_bayes.core.data.one_edit`, or only its case) from a card's name: kept, as a
    model without a card may be (a fit of one model makes it a proxy card), but most likely a
    typo of the card the user made."""
    from ddtree_bayes.core import paths

    own = paths.own_data_file("models.csv")
    where = f" ({paths.shown(own)})" if own is not None else " (the bundled cards)"
    rows_of: dict[str, list[int]] = {}
    for m in rows:
        rows_of.setdefault(m.model, []).append(m.row)
    out = []
    for name, at in rows_of.items():
        if name in cards:
            continue
        near = [c for c in cards if c.lower() == name.lower()] or \
            [c for c in closest(name, cards) if one_edit(name, c)]
        if near:
            out.append(f"row{'s' if len(at) > 1 else ''} {', '.join(map(str, at))}: model "
                       f"{name!r} has no model card, and is one edit from the card {near[0]!r}"
                       f"{where}: did you mean {near[0]!r}? (as written a fit makes it a proxy "
                       "card from its AR step: transfer to other GPUs is weaker)")
    return out


def _gpus_for(current: Measurements, hardware: str, origin: str, line: int,
              model: str | None = None) -> tuple[str, str]:
    """The GPU count of a row added without one: the count of ``model``'s rows on
    ``hardware`` in the data file, and the line saying so (a guess the user should see). Only
    the same model's: another model's count is no default (a Llama 8B run imported from a vLLM
    serve JSON, which records no GPU count, landed on 8 H200 because Kimi K2.6 ran on 8).
    Refused (:class:`DataError`) when there is none, or several."""
    rows = [m for m in current.rows if m.hardware == hardware and m.model == model]
    counts = sorted({m.gpus for m in rows})
    if not counts:
        others = sorted({m.model for m in current.rows if m.hardware == hardware})
        only = (f" (only {', '.join(f'{o}' + chr(39) + 's' for o in others)}: another model's "
                "count is no default)" if others else "")
        raise DataError(f"no {model} row on {hardware} in {current.path} to take the GPU count "
                        f"from{only}", file=origin, row=line, column="gpus",
                        fix="pass --gpus N, the GPUs the run used")
    if len(counts) > 1:
        raise DataError(f"{model} on {hardware} was measured with {', '.join(map(str, counts))} "
                        "GPUs", file=origin, row=line, column="gpus", fix="say which with --gpus")
    at = [m.row for m in rows]
    where = f"row{'s' * (len(at) > 1)} {', '.join(map(str, at[:3]))}" + (
        f" and {len(at) - 3} more" if len(at) > 3 else "")
    return str(counts[0]), (f"--gpus not given: {counts[0]}, the GPU count of {model}'s "
                            f"{hardware} row{'s' * (len(at) > 1)} in {current.path} ({where}); "
                            "pass --gpus N if the run used another")


def append_rows(data_path: Path, hardware: dict[str, dict[str, str]], new: list[NewRow], *,
                allow_duplicate: bool = False,
                what: str | None = None,
                methods: Mapping[str, MethodSpec] | None = None,
                declared: bool = False, create: bool = False,
                known: Mapping[str, set[str]] | None = None,
                default_context: float = 0.0,
                check_existing: Callable[[Path, Measurements], tuple[dict, tuple] | None]
                | None = None) -> Appended:
    """Append ``new`` rows to the measurement file ``data_path``, all or none.

    Under the file's lock: re-read and validate the current file (hand edits are checked
    here too), validate every new row with :func:`~ddtree_bayes.core.data.parse_row`, refuse a
    row identical to an existing one (``allow_duplicate`` appends it with "repeat of row
    N" in its notes instead, so the file stays valid), check the whole new file with
    :func:`~ddtree_bayes.core.data.load_measurements`, then replace the file atomically.

    A row whose configuration came from ``add``'s flags (``NewRow.flags``: a row given as
    flags, or imported with ``--from-bench``) is written with its verify tokens and budget
    derived when not given, so one configuration is spelled one way whichever way it came
    (``--from-bench`` left verify_tokens blank where ``add --block 3`` wrote 4); a ``--from``
    CSV row keeps its cells as written (its budget aside).

    ``methods`` (the priors' ``[methods]`` table) bounds each row's accept_len by what its
    configuration can emit (:func:`~ddtree_bayes.core.methods.max_accept`); with ``declared``
    (the structured step form, which ``fit`` refuses them under) a speculative method it does
    not declare is refused.

    A new row's engine or method one edit from another (the file's, or ``known``: the
    priors' :meth:`~ddtree_bayes.core.config.PriorsConfig.declared_names`) is kept with a
    warning naming it (:func:`~ddtree_bayes.core.data.misspelt_names`). A row's context is
    checked against its model's card at the context the fit will read it at: a blank one is
    ``default_context`` (the priors' ``default_context_tokens``).

    With ``create`` (``add --data FILE``) a file that does not exist in an existing folder is
    started, under the same lock and atomic write: the standard header (:data:`COLUMNS`, plus
    the optional columns the new rows fill), then the rows. A file of its header alone is a
    start as well.

    ``check_existing`` (``add``: ``fit``'s own check before sampling,
    :class:`~ddtree_bayes.engine.fitting.FitInputs` ``read`` and ``check``) is called on the
    file under the lock when it holds rows, with its rows as read here: a row the loader
    reads and fit refuses (a step faster than reading the weights, a KV cache the GPUs cannot
    hold, a method the priors do not declare, a second model without a card) is refused in
    fit's words, not appended to (the file would still not fit). It returns the model cards
    (as the cards file says them) and the drafter cards it read, which the new rows are
    checked against (else they are read here). Called, not imported: fit's module reaches
    PyMC, which this one (update's reweighting path) must not.

    Raises :class:`DataError` (one problem) or :class:`RowErrors` (several; ``what`` names
    the source in the summary line). Nothing is written on any error.
    """
    data_path = Path(data_path)
    if data_path.is_dir():   # (as fit --data words it: core/data read_csv_file)
        raise DataError("is a folder, not a CSV file", file=str(data_path),
                        fix="pass a CSV file with --data")
    if create and not data_path.exists():
        if not data_path.parent.is_dir():
            raise DataError(f"the folder {data_path.parent} does not exist", file=str(data_path),
                            fix="create it first, or give --data a file in an existing folder")
    elif not data_path.is_file():
        # (not a workspace: card add or hardware add makes it one, docs/howto/own-data.md)
        raise DataError("file not found", file=str(data_path),
                        fix="run in the project folder (with data/measurements.csv), pass "
                            "--data FILE (a new file is started with its header), or make "
                            "this folder a workspace with `ddtree-bayes card add` (your "
                            "model's card; or `hardware add`, your GPU's row): add then "
                            "starts data/measurements.csv")
    if data_path.exists() and not data_path.stat().st_mode & 0o222:
        # the atomic rename would replace even a read-only file: respect the protection
        raise DataError("the file is read-only; nothing was written", file=str(data_path),
                        fix="append to a writable copy with --data FILE, or make it writable "
                            f"(chmod u+w {data_path}) if it is meant to change")
    with exclusive_lock(data_path):
        created = not data_path.exists()   # (under the lock: another add may have made it)
        raw = ",".join(COLUMNS).encode() + b"\n" if created else data_path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"cannot read: {err}", file=str(data_path),
                            fix="save it as UTF-8 CSV") from None
        records = read_records(data_path, text)
        current = load_measurements(data_path, hardware, text=text, methods=methods,
                                    allow_empty=True, records=records)
        checked = None
        if check_existing is not None and current.rows:   # (fit's check of the file as it is)
            checked = check_existing(data_path, current)
        header = records[1]
        newline = line_end(text)
        text, header = _with_optional_columns(text, header, new, newline)
        body = text if text.endswith(("\n", "\r")) else text + newline
        next_line = count_lines(body) + 1
        keys = {row_key(m): m.row for m in current.rows}
        # the benchmark results the rows were imported from: one run imported twice (a
        # renamed copy: its source differs) would count as two repeats
        results: dict[str, tuple[str, int | None]] = {}
        for m in current.rows:
            for rid in BENCH_RESULT_TAG.findall(m.notes):
                results.setdefault(rid, (str(data_path), m.row))
        # (the cards fit's check read, else read here)
        cards, drafters = checked if checked is not None else (_cards(), _drafter_cards())
        # a row of this batch: where it came from (its file and row), which a duplicate names
        # (its row in the data file does not exist yet)
        batch: dict[tuple, tuple[str, int | None]] = {}
        errors: list[DataError] = []
        lines: list[str] = []
        expected: list[int] = []
        warnings: list[str] = []
        repeats: dict[int, int] = {}
        joined: list[Measurement] = []   # this batch's rows, numbered as in the data file
        for item in new:
            line = item.line if item.line is not None else next_line
            values = {k: ("" if v is None else str(v).strip()) for k, v in item.values.items()}
            # the result it was imported from: a --from-bench record's id, or the one a row
            # of another file names in its notes (a merge of two people's imports of one run)
            rids = ([item.result_id] if item.result_id is not None
                    else BENCH_RESULT_TAG.findall(values.get("notes", "")))
            rid = next((r for r in rids if r in results), None)
            try:
                if rid is not None:
                    origin, at = results[rid]
                    where = (f"row {at}" if origin == str(data_path) else
                             origin if at is None else f"row {at} of {origin}")
                    fix = ("it is in the data already; to import it with other flags, delete "
                           f"{where} first" if origin == str(data_path) else
                           "import each result once (--bench-records picks records)"
                           if item.result_id is not None else   # (a row of an --from file)
                           f"delete one of the two rows from {item.origin}")
                    raise DataError(f"the same benchmark result as {where} "
                                    f"({result_tag(rid)}): imported again, one run "
                                    "would count as two", file=item.origin, row=line, fix=fix)
                extra = [c for c in values if c not in header and values[c]
                         and not (c in OPTIONAL_DEFAULTS and _is_default(c, values[c]))]
                if extra:
                    raise DataError(f"{data_path} has no column {extra[0]!r}; its value would be "
                                    "lost", file=item.origin, row=line, column=extra[0],
                                    fix=f"drop the column, or add it to {data_path}'s header")
                if item.values.get("model") is None:
                    if not current.rows:
                        raise DataError(f"{data_path} has no rows yet to take the model from",
                                        file=item.origin, row=line, column="model",
                                        fix="name the target model with --model")
                    if current.multi_model:
                        raise DataError(f"{data_path} holds {len(current.models)} models "
                                        f"({', '.join(current.models)}); which one?",
                                        file=item.origin, row=line, column="model",
                                        fix=f"say which with --model (e.g. --model "
                                            f"{current.models[0]}) or a model column")
                    values["model"] = current.model
                if values.get("hardware") and values["hardware"] not in hardware:
                    raise DataError(f"unknown hardware {values['hardware']!r}", file=item.origin,
                                    row=line, column="hardware",
                                    fix=unknown_hardware_fix(values["hardware"], hardware))
                gpus_note = None
                if item.values.get("gpus") is None and values.get("hardware"):
                    # (a model without rows or card: that, not a GPU count, is the problem)
                    unknown = _unknown_model(current, cards, values.get("model"), data_path)
                    if unknown is not None:
                        raise DataError(unknown[0], file=item.origin, row=line,
                                        column="model", fix=unknown[1])
                    values["gpus"], gpus_note = _gpus_for(current, values["hardware"],
                                                          item.origin, line, values.get("model"))
                m = parse_row(item.origin, line, values, hardware, methods, flags=item.flags)
                if declared and m.method != AR_METHOD and m.method not in (methods or {}):
                    close = difflib.get_close_matches(m.method, list(methods or {}), n=1)
                    raise DataError(f"method {m.method!r} is not declared in the priors' "
                                    "[methods], so fit would refuse it", file=item.origin,
                                    row=line, column="method",
                                    fix=(f"did you mean {close[0]!r}? Or d" if close else "D")
                                    + f"eclare [methods.{m.method}] in models/priors.toml "
                                      "first")
                problem = weights_problem(cards.get(m.model), hardware, m)
                if problem is not None:
                    raise DataError(problem[0], file=item.origin, row=line, column="gpus",
                                    fix=problem[1])
                problem = impossible_step(cards.get(m.model), hardware.get(m.hardware), m)
                if problem is not None:
                    raise DataError(problem[0], file=item.origin, row=line, column="tok_s",
                                    fix=problem[1])
                problem = kv_cache_problem(cards.get(m.model), hardware, m)
                if problem is not None:
                    raise DataError(problem[0], file=item.origin, row=line,
                                    column="context_tokens", fix=problem[1])
                # a drafter no card of it serves; a block above the drafter's trained one, or
                # an accept_len above what it can emit: fit's check of the rows, each
                if (drafted := row_drafter_problem(drafters, m)) is not None:
                    raise DataError(drafted[0], file=item.origin, row=line, column=drafted[2],
                                    fix=drafted[1])
                note = card_weights_note(cards.get(m.model), hardware, m)
                unknown = _unknown_model(current, cards, m.model, data_path)
                if unknown is not None:
                    raise DataError(unknown[0], file=item.origin, row=line, column="model",
                                    fix=unknown[1])
                if item.flags and not values.get("verify_tokens"):
                    values["verify_tokens"] = str(m.verify_tokens)
                if not values.get("budget") and m.budget is not None:
                    # the budget the shape implies (a chain's is its depth): every writer
                    # spells one configuration one way (core.methods.shaped_budget)
                    values["budget"] = str(m.budget)
                key = row_key(m)
                if key in keys:
                    if not allow_duplicate:
                        if key in batch:
                            origin, at = batch[key]
                            where = (origin if at is None else f"row {at}" + (
                                "" if origin == item.origin else f" of {origin}"))
                            becomes = f": {where} becomes row {keys[key]} of {data_path}"
                        else:
                            where = f"row {keys[key]}" + (
                                "" if item.origin.startswith(str(data_path))
                                else f" of {data_path}")
                            becomes = ""
                        raise DataError(f"identical to {where}", file=item.origin, row=line,
                                        fix="if it is a true repeat of that measurement, pass "
                                            "--allow-duplicate (its notes then say "
                                            f"'repeat of row {keys[key]}'{becomes})")
                    first, n, notes = keys[key], 1, values.get("notes", "")
                    while key in keys:
                        tag = f"repeat of row {first}" if n == 1 else f"repeat {n} of row {first}"
                        values["notes"] = f"{notes}; {tag}" if notes else tag
                        key = row_key(parse_row(item.origin, line, values, hardware, methods))
                        n += 1
                    repeats[next_line] = first
            except DataError as err:
                errors.append(err)
                if item.line is None:   # the next record would be the row after this one
                    next_line += 1
                continue
            physics = physics_notes(cards.get(m.model), hardware, m, read_floor=note is None,
                                    default_context=default_context)
            cross = cross_row_notes(m, [*current.rows, *joined],
                                    default_context=default_context)
            warnings += [f"row {next_line}: {w}" for w in (gpus_note, note, *physics, *cross)
                         if w is not None]
            joined.append(dataclasses.replace(m, row=next_line))
            out = csv_line(header, {k: v for k, v in values.items() if v is not None}, newline)
            keys[key] = next_line
            batch[key] = (item.origin, item.line)
            for rid in rids:
                results.setdefault(rid, (item.origin, item.line))
            expected.append(next_line)
            next_line += count_lines(out)
            lines.append(out)
        if errors:
            if len(errors) == 1 and what is None:
                raise errors[0]
            raise RowErrors(what or str(data_path), errors)
        new_text = body + "".join(lines)
        final = load_measurements(data_path, hardware, text=new_text, methods=methods)
        wanted = set(expected)
        appended = [m for m in final.rows if m.row in wanted]
        warnings += misspelt_names(final.rows, known or {}, only=wanted)
        warnings += _cardless_near_a_card(appended, cards)
        if len(appended) != len(new):  # pragma: no cover - a bug, not a user error
            raise DataError(f"internal error: expected {len(new)} new "
                            f"row{'s' * (len(new) != 1)}, found "
                            f"{len(appended)}; nothing was written", file=str(data_path))
        write_text_atomically(data_path, new_text)
        _remove_stale_temps(data_path)
    return Appended(path=data_path, rows=appended, total_rows=len(final.rows), repeats=repeats,
                    warnings=warnings, created=created)


def rows_from_file(path: Path, data_header: tuple[str, ...] = COLUMNS) -> list[NewRow]:
    """The rows of a ``--from`` CSV as :class:`NewRow` (same schema as the data file).

    Structural problems (missing columns, wrong field counts) of every row are collected
    and raised together as :class:`RowErrors`; values are checked by :func:`append_rows`.
    """
    name = str(path)
    if not Path(path).is_file():
        raise DataError("file not found" if not Path(path).exists() else "not a file",
                        file=name, fix="pass an existing CSV with --from")
    _, header, body = read_records(path)
    check_named_columns(name, header, COLUMNS, OPTIONAL_COLUMNS,
                        f"the header must contain {','.join(COLUMNS)}")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DataError(f"missing column{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(missing)}", file=name, row=1,
                        column=missing[0], fix=f"the header must contain {','.join(COLUMNS)}")
    rows, errors = [], []
    for line, cells in body:
        comment = comment_problem(cells, header)
        if comment is not None:
            errors.append(DataError(comment[0], file=name, row=line, fix=comment[1]))
            continue
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            problem, fix = fields_problem(len(cells), len(header), cells)
            errors.append(DataError(problem, file=name, row=line, fix=fix))
            continue
        rows.append(NewRow(name, line, {h: c.strip() for h, c in zip(header, cells, strict=True)}))
    if errors:
        raise RowErrors(name, errors)
    if not rows:
        raise DataError("no measurement rows", file=name, fix="add at least one row under the header")
    return rows


def describe_config(m: Measurement) -> str:
    """``b300 x8 sglang ddtree b16/B32 M=33 accept 13.1`` (context shown when given;
    ``accept inferred`` for a row without accept_len)."""
    parts = [f"{m.hardware} x{m.gpus}", m.engine, m.method]
    size = "/".join(s for s in ((f"b{m.block}" if m.block is not None else ""),
                                (f"B{m.budget}" if m.budget is not None else "")) if s)
    if size:
        parts.append(size)
    parts.append(f"M={m.verify_tokens}")
    if m.context_tokens:
        parts.append(f"ctx {plain_text(m.context_tokens)}")
    if m.concurrency != 1:
        parts.append(f"C={m.concurrency}")
    if m.drafter is not None:
        parts.append(f"drafter {m.drafter}")
    parts.append("accept inferred" if m.accept_len is None else f"accept {m.accept_len:g}")
    return " ".join(parts)


def describe_row(m: Measurement, model: bool = False) -> str:
    """One line: configuration, acceptance and throughput of a measurement; ``model``: its
    model first (a file of several models, where the configuration alone does not say it)."""
    return f"{f'{m.model}, ' if model else ''}{describe_config(m)}: {m.tok_s:g} tok/s"

"""``add --from-bench``: a benchmark tool's result file -> rows to append.

The parsing is :mod:`ddtree_bayes.core.bench_import` (selection, format check, one parser per
tool). Here each imported record becomes a :class:`~ddtree_bayes.workflows.living.records.NewRow`:
the throughput (and acceptance length and context, when the file records them) from the file;
everything the file does not say (hardware, GPU count, engine, method, block, budget, model)
from the flags. The rows then go through :func:`append_rows` like any other: validated, all
or nothing, under the file's lock.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from ddtree_bayes.core.bench_import import BenchFormatError, parse_bench_file
from ddtree_bayes.core.data import AR_METHOD
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.workflows.living.records import NewRow

#: The configuration flags of ``add`` that a benchmark file never holds.
CONFIG_KEYS = ("hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
               "model")


@dataclass(frozen=True)
class BenchImport:
    """The rows of a benchmark file, its format, and notes on what was skipped."""

    format: str
    rows: list[NewRow]
    notes: list[str]


def _number(x: float) -> str:
    """A number as the CSV writes it: whole numbers without '.0', others to 6 digits."""
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def rows_from_bench(path: Path, config: dict[str, str | None], *, fmt: str | None = None,
                    accept: str | None = None, context: str | None = None,
                    source: str | None = None, notes: str | None = None,
                    batch_size: int | None = None, output_len: int | None = None,
                    input_len: int | None = None, records: Collection[int] | None = None,
                    single_stream_only: bool = False) -> BenchImport:
    """The rows of the benchmark file ``path``, its format and notes on what was skipped.

    ``records`` and ``single_stream_only`` select records before anything is validated
    (:func:`~ddtree_bayes.core.bench_import.parse_bench_file`). ``config`` gives the columns
    the file lacks (``CONFIG_KEYS``; None: the data file's GPU count for that hardware, the
    data file's model). The acceptance length comes from the file when it records one, else
    from ``accept`` (autoregressive runs: 1); asking for both is an error. ``context``
    replaces the file's input length. ``source`` defaults to the tool, file name and record
    number (as the messages number it: record or line); the parser's note on how tok/s was
    computed is kept in ``notes``. Raises :class:`DataError` (one line naming the file and the
    record) on any problem; nothing is read beyond the file.
    """
    path = Path(path)
    try:
        got = parse_bench_file(path, fmt, batch_size=batch_size, output_len=output_len,
                               input_len=input_len, records=records,
                               single_stream_only=single_stream_only)
    except BenchFormatError as err:
        where = err.file if err.index is None else f"{err.file}, {err.unit} {err.index}"
        fix = err.fix or "pass --bench-format"
        if err.key in ("batch_size", "output_len") and "records only latencies" in err.problem:
            fix = ("pass the run's --batch-size and --output-len (vllm bench latency does not "
                   "save them), or keep the FILE.pytorch.json it writes beside the file")
        raise DataError(f"{where}: {err.problem}", fix=fix) from None
    fmt, parsed, unit = got.format, got.records, got.unit
    method = config.get("method")
    rows = []
    for rec in parsed:
        origin = f"{path} ({fmt}, {unit} {rec.index})"
        if rec.accept_len is not None and method == AR_METHOD and rec.accept_len != 1:
            raise DataError(f"the file records acceptance length {rec.accept_len:g}, a "
                            "speculative run, but --method is ar", file=origin,
                            fix="give the run's --method (and --block/--budget), or pick the "
                                "autoregressive records with --bench-records")
        if rec.accept_len is not None and accept and method != AR_METHOD:  # ("": infer)
            raise DataError(f"the file records acceptance length {rec.accept_len:g}; --accept "
                            f"{accept} would contradict it", file=origin,
                            fix="drop --accept (the file's value is used)")
        if method == AR_METHOD:
            accept_len = accept if accept is not None else "1"
        elif rec.accept_len is not None:
            accept_len = _number(rec.accept_len)
        elif accept is not None:
            accept_len = accept   # "" for --accept infer: inferred by the fit
        else:
            raise DataError(f"{fmt} records no acceptance length for this "
                            f"{method or 'speculative'} run", file=origin,
                            fix="pass --accept (accepted tokens per step incl. the bonus "
                                "token; --accept infer lets the fit infer it), --method ar for "
                                "a run without speculation, or pick records with "
                                "--bench-records")
        if context is not None:
            ctx = context
        else:
            ctx = "" if rec.context_tokens is None else _number(rec.context_tokens)
        note = rec.notes + (f"; model in the file: {rec.model}" if rec.model else "")
        values: dict[str, str | None] = {k: config.get(k) for k in CONFIG_KEYS}
        values.update({
            "block": config.get("block") or "", "budget": config.get("budget") or "",
            "verify_tokens": config.get("verify_tokens") or "", "accept_len": accept_len,
            "context_tokens": ctx, "tok_s": _number(rec.tok_s),
            "source": source or f"{fmt} {path.name} {unit} {rec.index}",
            "notes": f"{notes}; {note}" if notes else note})
        rows.append(NewRow(origin, None, values))
    return BenchImport(fmt, rows, got.notes)

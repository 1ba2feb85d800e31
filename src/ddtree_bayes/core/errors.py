"""Named exceptions. Each maps to one CLI exit code and carries a one-line fix-it message."""

from __future__ import annotations

import errno

#: an OSError of a write that found no room: a full disk, a quota, a file-size limit
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class DDTreeBayesError(Exception):
    """Base class: ``str(err)`` is the one line the CLI prints; ``exit_code`` is its exit status."""

    exit_code = 1


class InputError(DDTreeBayesError):
    """A user-supplied file or argument is malformed. Nothing was written."""

    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 column: str | None = None, fix: str | None = None) -> None:
        self.file, self.row, self.column, self.fix = file, row, column, fix
        where = []
        if file is not None:
            where.append(str(file))
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column '{column}'")
        text = (": ".join([", ".join(where), message]) if where else message)
        if fix:
            text += f" (fix: {fix})"
        super().__init__(text)


def without_fix(err: InputError) -> str:
    """The error's text without its ``(fix: ...)`` tail (which speaks to the command that
    raised it), for a line that quotes the error inside another answer.

    >>> without_fix(QueryError("no such system", fix="use b300"))
    'no such system'
    """
    text, tail = str(err), f" (fix: {err.fix})"
    return text[: -len(tail)] if err.fix and text.endswith(tail) else text


class DataError(InputError):
    """The measurement, hardware or seed file is malformed (file, row and column named)."""


class PriorsError(InputError):
    """The priors file is malformed (file, entry and field named)."""


class QueryError(InputError):
    """A predict query cannot be answered from this fit (e.g. an unmeasured system)."""

    #: what is wrong with a flag's value, without the flag (its argparse type words the line)
    reason: str | None = None


class StoredTextError(InputError):
    """A text a fit stores (its data, priors or hardware table) that this version cannot read,
    damaged or older than its checks: the fit is unusable (exit 3, refit), not the user's
    file. Still an :class:`InputError`, so what reads a stored text leniently (the names a fit
    knows, engine/names.py) still falls back to its columns."""

    exit_code = 3


class ArtifactError(DDTreeBayesError):
    """No usable fit artifact: missing, unreadable, or from another package version."""

    exit_code = 3


class StaleArtifactError(ArtifactError):
    """The data or priors changed since the fit (raised only with ``--strict``)."""

    exit_code = 4


class UnconvergedError(DDTreeBayesError):
    """The fit failed its convergence gates; predictions from it are refused."""

    exit_code = 5


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the work before anything was written (CLI exit 130).

    A :class:`KeyboardInterrupt`, so code that cleans up on one (temp files) cleans up on
    this too; raised by :mod:`ddtree_bayes.core.interrupts` and when a sampler returns fewer
    draws than asked (nutpie hands back a partial trace when interrupted)."""

    exit_code = 130


def closest(name: str, known, n: int = 3) -> list[str]:
    """Up to ``n`` known names closest to ``name`` (difflib ratio >= 0.6), best first: the
    "did you mean" of a name never seen (predict's flags, a data file's engines and methods,
    a model without a card). Here, where core/pairs.py and core/data.py both import from,
    so they share it without an import cycle.

    >>> closest("sglnag", {"sglang", "native", "vllm"})
    ['sglang']
    """
    import difflib

    return difflib.get_close_matches(name, sorted(known), n=n, cutoff=0.6)


def typo_fix(key: str, known, takes: str) -> str:
    """The fix of a refused key or name no reader reads: the closest of ``known`` (if one is
    close), then what the place takes (``takes``), then that a typo is never ignored.

    >>> typo_fix("sigam", ("mu", "sigma"), "it takes mu, sigma")
    'did you mean sigma? it takes mu, sigma (a typo is never ignored)'
    """
    import difflib

    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return (f"did you mean {close[0]}? " if close else "") + f"{takes} (a typo is never ignored)"

"""Where things live: the working directory's data/ and models/, or the bundled copies."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import resources
from pathlib import Path

BUNDLED_FILES = ("measurements.csv", "hardware.csv", "seed_estimates.csv", "priors.toml",
                 "models.csv")

#: The working directory a Python API call was given (:func:`working_in`), for the readers
#: that take none (the drafter and model cards an answer reads "here"); None: the current one.
_WORKDIR: ContextVar[Path | None] = ContextVar("ddtree_bayes_workdir", default=None)


@contextmanager
def working_in(workdir: str | Path | None) -> Iterator[None]:
    """Within the block, a file read "here" (``data/`` and ``models/`` of the working
    directory, :func:`data_file` and :func:`own_data_file` without ``workdir``) is read from
    ``workdir``. None changes nothing: the directory an enclosing block gave, else the current
    one (it reset an enclosing ``db.predict(workdir=W)``'s to the current directory, so a call
    inside naming no workdir read another folder's cards). ``db.predict(workdir=W,
    drafter=NAME)`` priced NAME with the current directory's data/drafters.csv, not W's.

    >>> with working_in("/w"), working_in(None):
    ...     _root(None) == Path("/w")
    True
    """
    if workdir is None:
        yield
        return
    token = _WORKDIR.set(Path(workdir))
    try:
        yield
    finally:
        _WORKDIR.reset(token)


def _root(workdir: str | Path | None) -> Path:
    """The working directory: ``workdir`` (a str or Path, as the Python API is called with
    either), else the one a Python API call was given (:func:`working_in`), else the current
    directory."""
    if workdir is not None:
        return Path(workdir)
    given = _WORKDIR.get()
    return Path.cwd() if given is None else given


def bundled(name: str) -> Path:
    """Path of a file bundled with the installed package (data and default priors)."""
    return Path(str(resources.files("ddtree_bayes") / "_bundled" / name))


def data_file(name: str, workdir: str | Path | None = None) -> Path:
    """``<workdir>/data/<name>`` when the working directory has a data/ folder, else the bundled copy."""
    return own_data_file(name, workdir) or bundled(name)


def own_data_file(name: str, workdir: str | Path | None = None) -> Path | None:
    """``<workdir>/data/<name>`` when it exists (the user's own file), else None."""
    local = _root(workdir) / "data" / name
    return local if local.parent.is_dir() and local.exists() else None


#: The files of data/ that ``card add`` and ``hardware add`` write: each by its name, the column
#: its header starts with and one only its header has. A data/ folder holding one of them is
#: this tool's workspace (:func:`workspace_file`).
WORKSPACE_FILES = (("models.csv", "model", "params_active_b"),
                   ("hardware.csv", "hardware", "mem_bw_tb_s"),
                   ("drafters.csv", "drafter", "target_model"))


def workspace_file(workdir: str | Path | None = None) -> Path | None:
    """The first of ``<workdir>/data/``'s models.csv, hardware.csv or drafters.csv with this
    tool's header (``card add`` / ``hardware add`` wrote it, or a copy of the bundled one),
    else None: the folder is a workspace whose measurements ``add`` may start, where a data/
    of someone else's files is not."""
    for name, first, own in WORKSPACE_FILES:
        path = _root(workdir) / "data" / name
        if not path.is_file():
            continue
        try:
            with path.open(encoding="utf-8-sig", errors="replace", newline="") as f:
                header = [c.strip() for c in f.readline().split(",")]
        except OSError:
            continue
        if header[0] == first and own in header:
            return path
    return None


def priors_file(workdir: str | Path | None = None) -> Path:
    """``<workdir>/models/priors.toml`` when present, else the bundled default priors."""
    local = _root(workdir) / "models" / "priors.toml"
    return local if local.exists() else bundled("priors.toml")


def models_dir(workdir: str | Path | None = None) -> Path:
    """Where fits are written: ``<workdir>/models``."""
    return _root(workdir) / "models"


def data_flag(path: Path | str, workdir: str | Path | None = None) -> str:
    """What ``update`` and ``fit`` need to read the measurements ``path``: nothing for the
    default file (:func:`data_file`, which they read without --data), else `` --data PATH``
    as the user would type it, quoted for a shell (a path with spaces pastes).

    >>> data_flag("my runs.csv"), data_flag(data_file("measurements.csv"))
    (" --data 'my runs.csv'", '')
    """
    import shlex

    if Path(path).resolve() == data_file("measurements.csv", workdir).resolve():
        return ""
    return f" --data {shlex.quote(shown(path))}"


def shown(path: Path | str) -> str:
    """A path as the user would type it: relative when it is under the working directory."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)

"""Where things live: the working directory's data/ and models/, or the bundled copies."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

BUNDLED_FILES = ("measurements.csv", "hardware.csv", "seed_estimates.csv", "priors.toml",
                 "models.csv")


def _root(workdir: str | Path | None) -> Path:
    """The working directory: ``workdir`` (a str or Path, as the Python API is called with
    either) or the current directory."""
    return Path.cwd() if workdir is None else Path(workdir)


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

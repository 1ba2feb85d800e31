"""The fit artifact: one netCDF file per fit, the only module that knows its format.

A fit is ``models/fits/<fit_id>.nc``: an ArviZ 1.x DataTree (posterior, sample_stats,
observed_data, constant_data) whose root attributes carry the JSON metadata (package
version, seed, sampler settings, hashes, diagnostics) and the exact text of the data
and priors it was fit on. ``models/latest.json`` names the newest fit. Every write goes
to a temporary file in the same folder and is renamed into place (then the folder is
fsynced, so the rename survives a power failure), so an interrupted fit never leaves a
half-written artifact and the previous one stays usable; the temp files a killed writer
leaves behind are removed by the next command (:func:`remove_stale_temps`).

Reading draws for ``predict`` uses h5py directly (no xarray, no ArviZ) to keep it fast.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ddtree_bayes.core.errors import FULL_ERRNOS, ArtifactError, InputError
from ddtree_bayes.engine.posterior import Fit

if TYPE_CHECKING:
    from ddtree_bayes.core.config import PriorsConfig
    from ddtree_bayes.core.data import Measurements

FORMAT_VERSION = 1
META_ATTR = "ddtree_bayes_meta"
DATA_ATTR = "ddtree_bayes_data_csv"
PRIORS_ATTR = "ddtree_bayes_priors_toml"
HARDWARE_ATTR = "ddtree_bayes_hardware_csv"
LATEST = "latest.json"
#: A fit id as ``fit`` makes them (engine.inference.new_fit_id): ``<UTC time>-<hash>``, with
#: ``-<n>`` when two fits share both (groups: the time and hash; n, for :func:`fit_order`).
FIT_ID_RE = re.compile(r"([0-9]{8}T[0-9]{6}Z-[A-Za-z0-9]+)(?:-([0-9]+))?")


def fits_dir(models: Path) -> Path:
    return models / "fits"


#: Temp files of an atomic write: ``.<name>.<writer pid>.<random>.tmp`` in the target's folder.
TEMP_RE = re.compile(r"^\..+\.(\d+)\.[^.]+\.tmp$")
#: A temp file without a writer pid (older versions) is stale after this long.
STALE_TEMP_AGE_S = 3600.0


def _temp_prefix(name: str) -> str:
    return f".{name}.{os.getpid()}."


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable: the new name lives in the directory, which has
    to be flushed itself (a power failure can otherwise lose a completed rename)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # a filesystem that refuses fsync on directories: nothing more to do
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, payload: bytes, *, mode: int | None = None) -> None:
    """Write ``payload`` to ``path`` via a temp file in the same folder + fsync + rename +
    fsync of the folder. A signal before the rename removes the temp file; the rename is a
    commit (:func:`ddtree_bayes.core.interrupts.commit`): once done, the command finishes.

    ``mode`` sets the permission bits of the new file (the temp file is created 0600).
    """
    from ddtree_bayes.core import interrupts

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        _write_all(fd, payload, path)
        with interrupts.commit(path.name):   # after the rename, SIGINT/SIGTERM cannot undo it
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _write_all(fd: int, payload: bytes | memoryview, path: Path) -> None:
    """Write ``payload`` to the open temp file ``fd`` (closed here) and fsync it; an OSError
    (a full disk: ENOSPC) names ``path``, the file the user asked for, not the temp file
    (a write error names no file, and the CLI blamed standard output)."""
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temps(models: Path) -> list[Path]:
    """Remove the temp files that killed writers left in ``models/`` and ``models/fits/``
    (their writer's process is gone, or, without a pid in the name, they are older than
    :data:`STALE_TEMP_AGE_S`); returns what was removed. A live writer's temp is kept."""
    import time

    removed = []
    for folder in (models, fits_dir(models)):
        if not folder.is_dir():
            continue
        for tmp in sorted(folder.glob(".*.tmp")):
            m = TEMP_RE.match(tmp.name)
            try:
                stale = (not _alive(int(m.group(1)))) if m else (
                    time.time() - tmp.stat().st_mtime > STALE_TEMP_AGE_S)
                if stale:
                    tmp.unlink()
                    removed.append(tmp)
            except OSError:
                continue  # gone already, or not ours to remove
    return removed


def write_root_attrs(attrs, meta: dict, texts: dict[str, str]) -> dict:
    """Write a fit's four root attributes into ``attrs`` (a DataTree's or an h5py file's):
    the metadata with its texts' digests (:func:`with_digests`) and the three stored texts
    (``texts``: ``data``, ``priors``, ``hardware``). Returns the metadata written. The one
    writer of them: :func:`save` and :func:`save_resampled` each wrote all four."""
    meta = with_digests(meta)
    attrs[META_ATTR] = json.dumps(meta, sort_keys=True)
    attrs[DATA_ATTR] = texts["data"]
    attrs[PRIORS_ATTR] = texts["priors"]
    attrs[HARDWARE_ATTR] = texts["hardware"]
    return meta


def save(dt, meta: dict, texts: dict[str, str], models: Path) -> Path:
    """Write a fit DataTree with its metadata atomically and point latest.json at it."""
    bad = _nonfinite({name: np.asarray(da.values)
                      for name, da in dt["posterior"].to_dataset().data_vars.items()})
    if bad:
        raise ArtifactError(f"refusing to save fit {meta['fit_id']}: non-finite draws ({bad}); "
                            "nothing was written (fix: re-run `ddtree-bayes fit`)")
    dt = dt.copy()
    meta = write_root_attrs(dt.attrs, meta, texts)
    target = fits_dir(models) / f"{meta['fit_id']}.nc"
    target.parent.mkdir(parents=True, exist_ok=True)
    # serialised in memory, written by Python: HDF5 writing the file itself crashed the
    # process on a full disk (its objects' deallocators failed: SIGSEGV, exit 139, the temp
    # file left); a Python write raises one OSError naming the fit's file
    buffer = io.BytesIO()
    dt.to_netcdf(buffer, engine="h5netcdf")
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target.name), suffix=".tmp",
                               dir=target.parent)
    try:
        _write_all(fd, buffer.getbuffer(), target)
        del buffer
        target = _commit(tmp, target, models, meta, texts)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def data_groups(spec) -> dict[str, dict[str, np.ndarray]]:
    """The ``observed_data`` and ``constant_data`` groups of an artifact, from the model's
    :class:`~ddtree_bayes.core.spec.ModelSpec` (each over the ``measurement`` dimension,
    whose labels are the rows' line numbers)."""
    measurement = np.array([str(r) for r in spec.rows], dtype=object)
    return {"observed_data": {"measurement": measurement, "log_tok_s": spec.log_tok_s},
            "constant_data": {
                "measurement": measurement, "verify_tokens": spec.verify_tokens,
                "accept_len": spec.accept_len, "context_units": spec.context_units,
                "system": np.array([spec.systems[i] for i in spec.row_system], dtype=object),
                # the row's configuration (named by its first row): repeated runs share it
                "configuration": np.asarray(spec.rows)[spec.configs.first_row][spec.row_config]}}


def _h5_text(values: np.ndarray) -> tuple[np.ndarray, object]:
    """(data, dtype) for h5netcdf: text as variable-length UTF-8 strings, as xarray writes it."""
    if values.dtype.kind in "OSU":
        import h5py

        text = [v.decode() if isinstance(v, bytes) else str(v) for v in values.ravel()]
        return np.array(text, dtype=object).reshape(values.shape), h5py.string_dtype()
    return values, values.dtype


def save_resampled(parent: Path, index: np.ndarray, groups: dict[str, dict[str, np.ndarray]],
                   meta: dict, texts: dict[str, str], models: Path,
                   replace: dict[str, np.ndarray] | None = None) -> Path:
    """Save a new fit whose posterior is the ``parent`` fit's draws taken at ``index`` (flat
    (chain, draw) positions, as many as the parent has draws: e.g. an importance resample),
    with the parent's ``sample_stats`` (its sampler's record) and new ``observed_data`` /
    ``constant_data`` ``groups`` (:func:`data_groups`); written atomically as :func:`save`
    writes a fit, and latest.json pointed at it. ``replace`` maps posterior variables to
    flat (draws, ...) values to resample instead of the parent's (deterministics the new
    data's model computes differently); a name the parent's posterior lacks is added, with
    dimensions (chain, draw) (a parameter the new data's model adds: ``config_sd``).

    A copy of the parent's file, its posterior overwritten in place with h5py and the two
    data groups rewritten with h5netcdf: the layout xarray writes (``load_fit`` and
    ``load_datatree`` read it like any fit) without importing xarray (~1 s) or re-creating
    every variable through h5netcdf (~1 s). The copy is of the bytes the command holds
    (:func:`load_held` read them, core/per_call.py): the parent is read once."""
    import h5netcdf
    import h5py

    target = fits_dir(models) / f"{meta['fit_id']}.nc"
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target.name), suffix=".tmp",
                               dir=target.parent)
    os.close(fd)
    index = np.asarray(index)
    try:
        from ddtree_bayes.core import per_call

        with open(tmp, "wb") as out:
            out.write(per_call.read_bytes(parent))
        with h5py.File(tmp, "r+") as fh:
            post = fh["posterior"]
            shape = (post["chain"].shape[0], post["draw"].shape[0])
            if index.shape != (shape[0] * shape[1],):
                raise ValueError(f"a resample of {parent.name} must keep its "
                                 f"{shape[0] * shape[1]} draws")
            for name, ds in post.items():
                if ds.ndim < 2 or ds.shape[:2] != shape:
                    continue   # coordinates (chain, draw, system, ...): one dimension each
                flat = (np.asarray(replace[name]) if replace and name in replace
                        else ds[...].reshape(-1, *ds.shape[2:]))
                ds[...] = flat[index].reshape(ds.shape)
            for name in groups:
                if name in fh:
                    del fh[name]
            meta = write_root_attrs(fh.attrs, meta, texts)
        with h5netcdf.File(tmp, "a") as dst:
            post = dst["posterior"]
            for name, flat in (replace or {}).items():
                if name not in post.variables:
                    post.create_variable(name, ("chain", "draw"),
                                         data=np.asarray(flat)[index].reshape(shape))
            for name, values in groups.items():
                g = dst.create_group(name)
                g.dimensions["measurement"] = len(values["measurement"])
                for vname, arr in values.items():
                    data, dtype = _h5_text(np.asarray(arr))
                    g.create_variable(vname, ("measurement",), dtype=dtype, data=data,
                                      fillvalue=np.nan if data.dtype.kind == "f" else None)
        target = _commit(tmp, target, models, meta, texts)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        if err.errno in FULL_ERRNOS:   # name the fit asked for, not the copy's source or temp file
            raise OSError(err.errno, err.strerror, str(target)) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def resolve(models: Path, fit_id: str | None = None) -> Path:
    """Path of fit ``fit_id`` or of the latest fit (``fit_id`` None or ``"latest"``, as
    ``history`` marks it); :class:`ArtifactError` if there is none, :class:`InputError` for
    an id no fit has that is not of the form fit ids take (:data:`FIT_ID_RE`)."""
    if fit_id and fit_id != "latest":
        path = fits_dir(models) / f"{fit_id}.nc"
        if not path.exists() and not FIT_ID_RE.fullmatch(fit_id):
            # bad input, not a missing fit (exit 3 is for a fit id that names no fit)
            raise InputError(f"{fit_id!r} is not a fit id (they read <UTC time>-<hash>, e.g. "
                             "20261202T154255Z-d2899bb5)",
                             fix="copy one from `ddtree-bayes history`, or say latest")
        if not path.exists():
            raise ArtifactError(f"no fit {fit_id!r} in {fits_dir(models)} "
                                "(fix: run `ddtree-bayes fit`, or pick an existing fit id)")
        return path
    pointer = models / LATEST
    if not pointer.exists():
        raise ArtifactError(f"no fit found in {models} (fix: run `ddtree-bayes fit` first)")
    try:
        name = json.loads(pointer.read_text())["file"]
    except (ValueError, KeyError, TypeError, OSError):   # (TypeError: a list, a string)
        name = None
    if not isinstance(name, str) or not name:
        raise ArtifactError(f"{pointer} is unreadable (fix: re-run `ddtree-bayes fit`)")
    path = models / name
    if not path.exists():
        raise ArtifactError(f"{pointer} names {name}, which is missing "
                            "(fix: re-run `ddtree-bayes fit`)")
    return path


def _attr_text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _unreadable(path: Path, err: BaseException) -> ArtifactError:
    """The one line for a fit file that cannot be opened or read as a fit."""
    return ArtifactError(f"{path} is not a readable ddtree-bayes fit ({_one_line(err)}) "
                         "(fix: re-run `ddtree-bayes fit`)")


def load_held(path: Path, **kwargs) -> Fit:
    """:func:`load_fit` (``kwargs`` as it takes them) of the fit file's bytes as
    core/per_call.py holds them for the command, so that a command that copies the file later
    in the same call (``update``'s reweight: :func:`save_resampled`) reads it once. A file
    those bytes cannot be read or opened from is :func:`load_fit`'s, with its one line;
    outside a call, the disk each time."""
    import h5py

    from ddtree_bayes.core import per_call

    try:
        fh = h5py.File(io.BytesIO(per_call.read_bytes(path)), "r")
    except (OSError, KeyError, ValueError, TypeError):
        return load_fit(path, **kwargs)   # (its error names the file and the problem)
    with fh:
        return load_fit(path, handle=fh, **kwargs)


@contextlib.contextmanager
def opened(path: Path) -> Iterator:
    """The fit's file at ``path``, opened once for reading (an ``h5py.File``), for a reader
    of both its draws and its whole tree: :func:`load_fit` and :func:`load_datatree` given
    it as ``handle`` read from it instead of opening the file again (``report``)."""
    import h5py

    try:
        fh = h5py.File(path, "r")
    except (OSError, KeyError, ValueError, TypeError) as err:
        raise _unreadable(path, err) from None
    with fh:
        yield fh


def load_fit(path: Path, *, rederive: bool = True, measurements: Measurements | None = None,
             handle=None, priors: PriorsConfig | None = None) -> Fit:
    """Read the posterior group and metadata of a fit with h5py (fast, no xarray).

    ``rederive=False``: the draws' R-hat and bulk ESS are not derived again
    (:func:`_check_gates`; ~0.05 s for the bundled fit), for the process that diagnosed
    these draws itself a moment before it saved them (``fit``); the stored diagnostics and
    the divergences are gated all the same. ``measurements``: the measurements the fit was
    made on as that process read them (:meth:`Fit.knowing`), which the checks of the fit's
    model then use instead of parsing the stored copy of the same text again; ``priors``:
    likewise the priors file it validated (:meth:`Fit.knowing`). ``handle``:
    the file already open (:func:`opened`), read instead of opening ``path`` again."""
    import h5py

    try:
        with (contextlib.nullcontext(handle) if handle is not None
              else h5py.File(path, "r")) as fh:
            attrs = fh.attrs
            meta = json.loads(_attr_text(attrs[META_ATTR]))
            if not isinstance(meta, dict):
                raise ArtifactError(f"{path} has malformed metadata (fix: re-run "
                                    "`ddtree-bayes fit`)")
            _check_version(meta, path)
            _check_fields(meta, path)
            post = fh["posterior"]
            labels = _dimension_labels(post)
            _check_coords(meta, labels, path)
            skip = {"chain", "draw", *meta["coords"]}
            variables = {}
            dims_of: dict[str, list[str]] = {}   # (the dimensions a diagnostics label names)
            chains = 0
            for name, ds in post.items():
                if name in skip:
                    continue
                arr = np.asarray(ds[...], dtype=float)
                chains = arr.shape[0]
                variables[name] = arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])
                extra = [ds.dims[i] for i in range(2, ds.ndim)]   # (h5py: no slices)
                if extra and all(len(d) for d in extra):
                    dims_of[name] = [d[0].name.rsplit("/", 1)[-1] for d in extra]
            texts = [_attr_text(attrs[k]) for k in (DATA_ATTR, PRIORS_ATTR, HARDWARE_ATTR)]
            stats = fh.get("sample_stats")
            logp = next((np.asarray(stats[k][...], dtype=float) for k in ("logp", "lp")
                         if stats is not None and k in stats), None)
            diverging = (np.asarray(stats["diverging"][...]) if stats is not None
                         and "diverging" in stats else None)
    except (OSError, KeyError, ValueError, TypeError) as err:
        raise _unreadable(path, err) from None
    _check_texts(meta, texts, path)
    _check_draws(meta, variables, path)
    bad = _nonfinite(variables)
    if logp is not None and not np.isfinite(logp).all():
        bad += (", " if bad else "") + (f"log-density {int((~np.isfinite(logp)).sum())} of "
                                        f"{logp.size}")
    if bad:
        raise ArtifactError(f"fit {meta.get('fit_id', path.stem)} holds non-finite draws "
                            f"({bad}) and cannot answer; an interrupted sampler's partial trace"
                            " (saved by a version before this check) looks like this (fix: "
                            "re-run `ddtree-bayes fit`, or pass --fit to use another fit)")
    from ddtree_bayes.core.gates import element_labels

    element_names = {name: element_labels([meta["coords"].get(d, []) for d in dims])
                     for name, dims in dims_of.items()}
    _check_means(meta, variables, element_names, path)   # (of finite draws: refused above)
    _gate_again(meta)
    _check_gates(meta, path, _Draws(variables, chains, element_names, diverging)
                 if labels else None, rederive=rederive)
    fit = Fit(path=path, meta=meta, variables=variables, data_csv=texts[0],
              priors_toml=texts[1], hardware_csv=texts[2],
              dims={name: tuple(dims) for name, dims in dims_of.items()})
    if measurements is not None or priors is not None:
        fit.knowing(measurements, priors)
    _check_model(fit, labelled=bool(labels))
    return fit


def _one_line(err: BaseException) -> str:
    """An exception's text on one line (h5py's error for a folder ends its time stamp with a
    newline)."""
    return " ".join(str(err).split())


#: What every reader of a fit's metadata relies on: field -> the JSON type it must have. A fit
#: of this format version lacking one was written by an older ddtree-bayes (the model's
#: context fields came with the structured step, 2026-12-01) or edited. The paths and digests
#: of the inputs were there from the first fit. What the model's other fields must be is
#: :func:`_check_model`'s (against the stored priors and data, and the draws).
REQUIRED_FIELDS: dict[str, str] = {
    "fit_id": "text", "converged": "boolean", "coords": "object", "data": "object",
    "priors": "object", "model": "object", "model.moe_form": "string",
    "model.context_unit_tokens": "number", "model.default_context_tokens": "number",
    "model.relation_bases": "object", "data.path": "text", "data.sha256": "text",
    "priors.path": "text", "priors.sha256": "text", "inputs_sha256": "text"}
#: Fields some fits lack (older ones, or a model that has no use for them), and the type they
#: have where present.
OPTIONAL_FIELDS: dict[str, str] = {
    "failures": "array", "diagnostics": "object", "sampler": "object", "timings": "object",
    "created_utc": "string", "seed": "number", "model.step_form": "string",
    "model.knee": "number", "model.methods": "object", "model.card": "object",
    "model.model_cards": "object",
    "model.engines": "array", "model.group_varies": "object", "model.drafter_cards": "array",
    "model.acceptance_drafter_cards": "array",
    "model.group_engine": "array", "model.group_system": "array",
    "model.group_pass_roof_ms": "array", "model.group_pass_how": "array",
    "model.pass_roofline": "object", "model.target_models": "array", "cards_sha256": "text",
    "derived_sha256": "object"}
_KINDS = {"string": ("a string", lambda v: isinstance(v, str)),
          "text": ("a non-empty string", lambda v: isinstance(v, str) and bool(v)),
          "boolean": ("true or false", lambda v: isinstance(v, bool)),
          "number": ("a number", lambda v: isinstance(v, int | float)
                     and not isinstance(v, bool)),
          "object": ("an object", lambda v: isinstance(v, dict)),
          "array": ("an array", lambda v: isinstance(v, list))}


def _check_fields(meta: dict, path: Path) -> None:
    """Refuse metadata lacking a field of :data:`REQUIRED_FIELDS`, or holding a field of
    either table with another JSON type, in one line naming the file and the field (a field
    this version does not know, as a newer one may add, is read past)."""
    for fields, required in ((REQUIRED_FIELDS, True), (OPTIONAL_FIELDS, False)):
        for field, kind in fields.items():
            *outer, name = field.split(".")
            holder = meta.get(outer[0]) if outer else meta
            if not isinstance(holder, dict):
                continue   # (the outer field's own check says what it is)
            if name not in holder:
                if required:
                    raise _lacking(path, field)
                continue
            words, fits = _KINDS[kind]
            if not fits(holder[name]):
                raise _edited(path, field, holder[name], f"not {words}")
    _check_converged(meta, path)


def _check_converged(meta: dict, path: Path) -> None:
    """Refuse ``converged`` that contradicts the failed gates listed beside it (a fit writes
    ``converged = not failures``)."""
    failures = meta.get("failures")
    if isinstance(failures, list) and meta["converged"] == bool(failures):
        gates = "gate" if len(failures) == 1 else "gates"
        raise ArtifactError(f"{path}: its metadata says converged "
                            f"{json.dumps(meta['converged'])} but lists {len(failures)} failed "
                            f"{gates} (an edited fit) (fix: re-run `ddtree-bayes fit`)")


#: What xarray stores as a dimension without labels (a netCDF dimension scale, not a variable).
_PHONY_DIMENSION = b"This is a netCDF dimension but not a netCDF variable"


def _dimension_labels(post) -> dict[str, list[str]]:
    """The labels of each dimension the posterior group ``post`` (h5py; None: no group)
    stores them for, as xarray writes a coordinate (a one-dimensional dimension scale; chain
    and draw are not labels)."""
    out: dict[str, list[str]] = {}
    for dim, ds in (post.items() if post is not None else ()):
        if dim in ("chain", "draw") or not ds.is_scale or ds.ndim != 1:
            continue
        name = ds.attrs.get("NAME", b"")
        if (name if isinstance(name, bytes) else str(name).encode()).startswith(
                _PHONY_DIMENSION):
            continue
        out[dim] = [_attr_text(x) for x in ds[...]]
    return out


def _check_coords(meta: dict, labels: dict[str, list[str]], path: Path) -> None:
    """Refuse ``coords`` that do not name the labels the draws are stored with: each a list
    of names, and, where the posterior group holds a dimension's labels (``labels``: every
    fit `fit` writes), those labels in that order (the draws of ``step_ar_ms[i]`` are the
    i-th system's); a labelled dimension the metadata lacks is a lacking field."""
    coords = meta["coords"]
    for dim, names in coords.items():
        if not (isinstance(names, list) and all(isinstance(x, str) for x in names)):
            raise _edited(path, f"coords.{dim}", names, "not a list of names")
    for dim, held in labels.items():
        if dim not in coords:
            raise _lacking(path, f"coords.{dim}")
        if coords[dim] != held:
            raise _edited(path, f"coords.{dim}", coords[dim],
                          f"not the labels its draws hold ({_one_line_json(held)})")


#: What a structured fit with speculative groups stores beside its methods table (core.spec's
#: ``model_meta``), each read by the question side without a default that answers the same.
STRUCTURED_FIELDS = ("methods", "group_varies", "engines", "group_engine",
                     "group_pass_roof_ms", "group_pass_how", "pass_roofline", "drafter_cards")
#: The variable only a form's draws hold (core.likelihood's names).
_FORM_VARIABLES = {"fraction": "overhead_frac", "structured": "spec_fixed_ratio",
                   "roofline": "moe_distinct_exponent",
                   "linear": "moe_slope", "power": "moe_exponent"}


def _edited(path: Path, field: str, value, what: str) -> ArtifactError:
    """The refusal of a metadata ``field`` whose ``value`` is ``what`` it should not be."""
    return ArtifactError(f"{path}: its metadata's {field} is {_one_line_json(value)}, {what} "
                         "(an edited fit) (fix: re-run `ddtree-bayes fit`)")


def _lacking(path: Path, field: str) -> ArtifactError:
    """The refusal of metadata without a ``field`` the fit needs."""
    return ArtifactError(f"{path} lacks {field} in its metadata: an older ddtree-bayes wrote "
                         "it, or it was edited (fix: re-run `ddtree-bayes fit`)")


def _check_model(fit: Fit, labelled: bool = True) -> None:
    """Refuse ``meta["model"]`` that is not what the fit computed with, where this can be
    told: the fields a fit derives from its priors (checked against the stored priors, whose
    digest :func:`_check_texts` checked) other than its forms, the forms against the draws
    (the variables only a form samples), its target model against its stored data, and, in a
    structured fit with speculative groups, the fields its question side reads (present, one
    per overhead group, engines as the draws label them). The readers' defaults for a lacking
    field answered otherwise, exit 0 (a fit of the bundled data: knee lacking moved the
    default question's intervals). ``labelled``: an artifact whose posterior labels its
    draws, as every one `fit` and `update` write does; the tests' artifacts, written with
    h5py, store only the fields they read, and their own knee, methods and pass roofline."""
    import dataclasses

    from ddtree_bayes.core.config import MOE_FORMS, STEP_FORMS
    from ddtree_bayes.core.spec import pass_roofline_constants

    path, model, coords, variables = fit.path, fit.meta["model"], fit.meta["coords"], fit.variables
    step_form = model.get("step_form", "fraction")
    for field, form, forms in (("model.moe_form", model["moe_form"], MOE_FORMS),
                               ("model.step_form", step_form, STEP_FORMS)):
        if form not in forms:
            raise _edited(path, field, form, f"not one of {', '.join(forms)}")
    groups = coords.get("overhead_group") or []
    if groups and _FORM_VARIABLES[step_form] not in variables:
        raise _edited(path, "model.step_form", model.get("step_form"),
                      f"not the form of its draws (they hold no {_FORM_VARIABLES[step_form]})")
    moe_variable = _FORM_VARIABLES[model["moe_form"]]
    if moe_variable not in variables and any(v in variables for v in (
            _FORM_VARIABLES["roofline"], _FORM_VARIABLES["linear"], _FORM_VARIABLES["power"])):
        raise _edited(path, "model.moe_form", model["moe_form"],
                      f"not the form of its draws (they hold no {moe_variable})")
    priors = fit.priors
    if "knee" not in model:   # (the fit priced the knee with its priors' value)
        model["knee"] = priors.knee_sharpness
    methods = {n: {"passes": m.passes, "tree": m.tree} for n, m in priors.methods.items()}
    derived: dict[str, object] = {
        "context_unit_tokens": priors.context_unit_tokens,
        "default_context_tokens": priors.default_context_tokens,
        "relation_bases": {e: r.base for e, r in priors.relations.items()},
        "methods": {n: methods.get(n) for n in model.get("methods") or {}}}   # (those named)
    if labelled:   # (a fit `fit` wrote: all of them, as its priors give them)
        derived.update(knee=priors.knee_sharpness, methods=methods)
        if "pass_roofline" in model:
            derived["pass_roofline"] = dataclasses.asdict(pass_roofline_constants(priors))
    for name, value in derived.items():
        if name not in model:
            continue   # (a test's fit; the structured fields below are required)
        if model[name] != value:
            raise _edited(path, f"model.{name}", model[name],
                          f"not what its stored priors give ({_one_line_json(value)})")
    _check_target_models(fit)
    if model["moe_form"] == "roofline" and not model.get("card") and not model.get("model_cards"):
        raise ArtifactError(f"{path} lacks model.card in its metadata (the roofline form prices "
                            "the step from it): an older ddtree-bayes wrote it, or it was "
                            "edited (fix: re-run `ddtree-bayes fit`)")
    _check_cards(path, model)
    _check_digests(fit.meta, path)
    if step_form != "structured" or not groups or not labelled:
        if labelled:
            _check_derived(fit)
        return   # (a test's artifact, written without labels, stores only what it reads)
    for name in STRUCTURED_FIELDS:
        if name not in model:
            raise _lacking(path, f"model.{name}")
    engines = model["engines"]
    if "engine" in coords and engines != coords["engine"]:
        raise _edited(path, "model.engines", engines,
                      f"not the engines its draws are labelled with ({_one_line_json(coords['engine'])})")
    varies = model["group_varies"]
    per_group = {"model.group_engine": model["group_engine"],
                 "model.group_pass_roof_ms": model["group_pass_roof_ms"],
                 "model.group_pass_how": model["group_pass_how"],
                 "model.group_system": model.get("group_system", groups),
                 "model.group_varies.pass": varies.get("pass") if isinstance(varies, dict) else None,
                 "model.group_varies.tree": varies.get("tree") if isinstance(varies, dict) else None}
    for field, values in per_group.items():
        if not isinstance(values, list) or len(values) != len(groups):
            raise _edited(path, field, values, f"not one entry per overhead group ({len(groups)})")
    for field, values, n in (("model.group_engine", model["group_engine"], len(engines)),
                             ("model.group_system", model.get("group_system"),
                              len(coords.get("system") or []))):
        if values is not None and not all(_index(v, n) for v in values):
            raise _edited(path, field, values, f"not indices below {n}")
    if not all(isinstance(v, int | float) and not isinstance(v, bool)
               for v in model["group_pass_roof_ms"]):
        raise _edited(path, "model.group_pass_roof_ms", model["group_pass_roof_ms"],
                      "not a list of numbers")
    for field in ("model.group_varies.pass", "model.group_varies.tree"):
        if not all(isinstance(v, bool) for v in per_group[field]):
            raise _edited(path, field, per_group[field], "not a list of true or false")
    _check_derived(fit)   # (the values, once their shapes are known to be right)


#: The fields of ``meta["model"]`` a fit derives from its stored inputs (data, priors, hardware
#: table) and the cards it stores (core.spec.model_meta), which the question side reads as
#: stored: checked against the same derivation on read by :func:`_check_derived`.
DERIVED_FIELDS = ("group_varies", "engines", "group_engine", "group_system",
                  "group_pass_roof_ms", "group_pass_how", "config_pass_how", "group_recurrent",
                  "group_amd", "system_flop_ms", "flops_how", "system_ctx_prior",
                  "allreduce_volume", "system_tp_mb", "system_link", "tp_how", "repeated_runs",
                  "concurrent", "acceptance_groups", "pair_models")


#: The fields of ``meta["model"]`` holding the cards a fit priced with (inputs the artifact
#: stores nowhere else), as :func:`cards_digest` hashes them.
CARD_FIELDS = ("card", "model_cards", "drafter_cards", "acceptance_drafter_cards")


def cards_digest(model: dict) -> str:
    """The sha256 of the cards a fit's ``meta["model"]`` stores (:data:`CARD_FIELDS`, as
    canonical JSON): recorded as ``cards_sha256`` when the fit is saved, checked on read. A
    card field that feeds no stored derived value (a card's experts or experts_topk, which
    price the distinct experts a query's verify pass reads) is checked by nothing else: edited,
    it moved `predict --block 16 --budget 64`'s median from 605 to 678 tok/s, exit 0."""
    return _json_sha256({k: model.get(k) for k in CARD_FIELDS if model.get(k) is not None})


def derived_digests(model: dict) -> dict[str, str]:
    """The sha256 of each derived value a fit's ``meta["model"]`` stores
    (:data:`DERIVED_FIELDS`, those present, each as canonical JSON): recorded as
    ``derived_sha256`` when the fit is saved. Read back, they tell a value edited after the fit
    (its digest disagrees: refused naming the field, also by ``history``) from one an older
    ddtree-bayes derived otherwise than this one (the digest agrees, today's derivation does
    not: refused by :func:`_check_derived` with those words)."""
    return {k: _json_sha256(model[k]) for k in DERIVED_FIELDS if k in model}


def _json_sha256(value) -> str:
    """The sha256 of ``value`` as canonical JSON (keys sorted): what the digests hash."""
    import hashlib

    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def with_digests(meta: dict) -> dict:
    """``meta`` with ``cards_sha256`` of its model's cards and ``derived_sha256`` of its
    derived values (a copy; :func:`cards_digest`, :func:`derived_digests`)."""
    model = meta.get("model")
    if not isinstance(model, dict):
        return meta
    return {**meta, "cards_sha256": cards_digest(model), "derived_sha256": derived_digests(model)}


def stored_structure(fit: Fit) -> tuple:
    """(the priors the fit was made with, in its MoE and step forms; the ``build_spec`` keywords
    of its stored hardware table, model cards and drafter cards): what derives its model from
    data (:func:`_check_derived`; ``next`` asks what a simulated row makes of it)."""
    import dataclasses

    from ddtree_bayes.core.drafters import stored_cards
    from ddtree_bayes.core.model_cards import ModelCard

    model = fit.meta["model"]
    stored = {**({model["card"]["model"]: model["card"]} if model.get("card") else {}),
              **(model.get("model_cards") or {})}
    cards = {name: ModelCard(**card) for name, card in stored.items()} or None
    # (a fit of the fraction form stores only the cards whose trained block bounds one of its
    # acceptance groups; one made before it stored them, or that needs none: none)
    stored_drafters = model.get("drafter_cards", model.get("acceptance_drafter_cards"))
    drafters = stored_cards(stored_drafters) if stored_drafters is not None else None
    priors = dataclasses.replace(fit.priors, moe_form=model["moe_form"],
                                 step_form=model.get("step_form", "fraction"))
    return priors, {"hardware": fit.hardware, "cards": cards, "drafters": drafters}


def _check_derived(fit: Fit) -> None:
    """Refuse stored derived values (:data:`DERIVED_FIELDS`) that are not what the fit's
    stored data, priors (with its forms) and hardware table give with the model and drafter
    cards it stores, as ``fit`` derived them (core.spec.build_spec and model_meta: ~10 ms,
    the stored data parsed once for every answer). A value edited after the fit answered from
    the edit, exit 0 (group_varies.tree of B300's DDTree group set true narrowed the default
    question's interval); so did a stored card's field that prices the passes, the FLOPs or
    the context read (params_active_b x2 moved an H100 transfer from 575 to 547 tok/s),
    whose derived values now disagree with it. Not checked: an importance resample's
    (``update``'s, whose model is its proposal's in the proposal's order), and a fit lacking a
    field (an older version's: :func:`_check_model` requires those the answers need)."""
    from ddtree_bayes.core import spec as S

    meta, model, path = fit.meta, fit.meta["model"], fit.path
    if "reweight" in meta or meta.get("held_out_systems"):
        return
    priors, structure = stored_structure(fit)
    try:
        spec = S.build_spec(fit.measurements, priors, **structure)
    except InputError as err:
        raise ArtifactError(f"{path}: its stored inputs no longer give its model "
                            f"({_one_line(err)}): edited, or made by an older ddtree-bayes "
                            "(fix: re-run `ddtree-bayes fit`)") from None
    now = json.loads(json.dumps(S.model_meta(spec, priors)))
    for name in DERIVED_FIELDS:   # (one the fit lacks and these inputs give: an older fit's)
        if name not in model:
            continue
        differs = (first_difference(model[name], now[name], f"model.{name}") if name in now
                   else (f"model.{name}", _one_line_json(model[name]), "none"))
        if differs:
            field, stored, gives = differs
            why = ("made by an older ddtree-bayes that derived it otherwise (its derived_sha256 "
                   "says the values it was fit with are intact: not an edit)"
                   if "derived_sha256" in meta else "edited, or made by an older ddtree-bayes")
            raise ArtifactError(f"{path}: its metadata's {field} is {stored}, not what its "
                                f"stored inputs and cards give ({gives}): {why} (fix: re-run "
                                "`ddtree-bayes fit`)")


#: Keys of a derived record that only explain it to people (where an acceptance group's prior
#: came from, how a context read was priced): no answer's number reads them, and a later version
#: words them anew (6e97447 reworded a named drafter's ``prior_from``), so they are not compared.
EXPLAINING_KEYS = frozenset({"prior_from", "how"})


def first_difference(a, b, where: str) -> tuple[str, str, str] | None:
    """Where a stored derived value ``a`` and the one derived again ``b`` first differ: (the
    field, ``where`` followed down by keys and list indices, a list entry that has a
    ``label`` named by it; its stored value; its derived value, each as one line of JSON,
    "none" for a key one side lacks, "N entries" for lists of two lengths), or None where they
    agree. Numbers agree to 1e-9 relative (a derivation repeated on another machine). A
    record's :data:`EXPLAINING_KEYS` are not compared, and a key it lacks whose derived value
    is null is an older version's record (an acceptance group stored before groups named their
    drafter: none), not a difference. A fit an older version derived otherwise was refused
    with both whole fields cut at 60 characters, which hid what changed.

    >>> first_difference({"tree": [True, False]}, {"tree": [True, True]}, "model.group_varies")
    ('model.group_varies.tree[1]', 'false', 'true')
    >>> first_difference([{"label": "g", "prior": {"upper": 65.0}, "prior_from": "x"}],
    ...                  [{"label": "g", "prior": {"upper": 16.0}, "prior_from": "y"}], "m")
    ("m['g'].prior.upper", '65.0', '16.0')
    """
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a:
            if key not in b:
                return f"{where}.{key}", _one_line_json(a[key]), "none"
            if key not in EXPLAINING_KEYS and (
                    differs := first_difference(a[key], b[key], f"{where}.{key}")):
                return differs
        added = [k for k in b if k not in a and b[k] is not None]   # (null: added since)
        return (f"{where}.{added[0]}", "none", _one_line_json(b[added[0]])) if added else None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            label = x.get("label") if isinstance(x, dict) and isinstance(y, dict) else None
            named = f"{where}[{label!r}]" if isinstance(label, str) and label == y.get(
                "label") else f"{where}[{i}]"
            if differs := first_difference(x, y, named):
                return differs
        return None if len(a) == len(b) else (where, f"{len(a)} entries", f"{len(b)} entries")
    if (isinstance(a, int | float) and isinstance(b, int | float)
            and not isinstance(a, bool) and not isinstance(b, bool)):
        same = abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    else:
        same = bool(a == b)
    return None if same else (where, _one_line_json(a), _one_line_json(b))


def _check_target_models(fit: Fit) -> None:
    """The model(s) the fit names: a fit of several names them in ``target_models`` (a list
    of names) beside a null ``target_model``; a fit of one names the model of its stored data
    (whose digest was checked; its measurements, parsed here once for every answer that
    reads them) in ``target_model``. A fit made before it named them
    (2026-12-01) is told it here, in memory, as a fit of this version names it."""
    model, path = fit.meta["model"], fit.path
    several = model.get("target_models")
    if several is not None:
        if not several or not all(isinstance(m, str) and m for m in several):
            raise _edited(path, "model.target_models", several, "not a list of model names")
        if model.get("target_model") is not None:
            raise _edited(path, "model.target_model", model["target_model"],
                          "not null beside the target_models of a fit of several models")
        return
    models = list(fit.measurements.models)   # (parsed once: what the answers read)
    if len(models) > 1:
        raise ArtifactError(f"{path} lacks model.target_models in its metadata (its stored "
                            "data holds several models): it was edited (fix: re-run "
                            "`ddtree-bayes fit`)")
    if not models:
        return
    if "target_model" not in model:
        model["target_model"] = models[0]
    elif model["target_model"] != models[0]:
        raise _edited(path, "model.target_model", model["target_model"],
                      f"not the model its stored data holds ({_one_line_json(models[0])})")


def _index(value, n: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n


def _check_cards(path: Path, model: dict) -> None:
    """Refuse a stored model or drafter card a reader cannot build (a field lacking, or of
    another type than the card's own: core.model_cards.ModelCard, core.drafters.DrafterCard)."""
    from ddtree_bayes.core.drafters import DrafterCard
    from ddtree_bayes.core.model_cards import ModelCard

    cards: list[tuple[str, object, type]] = [("model.card", model.get("card"), ModelCard)]
    cards += [(f"model.model_cards.{k}", v, ModelCard)
              for k, v in (model.get("model_cards") or {}).items()]
    cards += [(f"model.{key}[{i}]", v, DrafterCard)
              for key in ("drafter_cards", "acceptance_drafter_cards")
              for i, v in enumerate(model.get(key) or [])]
    for field, card, cls in cards:
        if card is None and field == "model.card":
            continue
        problem = _card_problem(card, cls)
        if problem:
            raise _edited(path, field, card, problem)


def _card_problem(card, cls) -> str | None:
    """What makes ``card`` (a stored card's dict) no ``cls`` (a card dataclass), or None."""
    import dataclasses
    import typing

    if not isinstance(card, dict):
        return "not an object"
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, f in fields.items():
        if name not in card:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                return f"lacking {name}"
            continue
        if not _of_type(card[name], hints[name]):
            return f"its {name} {_one_line_json(card[name])} not of the card's type"
    unknown = sorted(set(card) - set(fields))
    return f"with fields no card has ({', '.join(unknown)})" if unknown else None


def _of_type(value, hint) -> bool:
    """Whether a stored JSON value fits a card field's annotation (str, int, float, bool,
    tuples of str, and ``X | None``); an int is a float."""
    import types
    import typing

    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_of_type(value, a) for a in args)
    if hint is type(None):
        return value is None
    if typing.get_origin(hint) is tuple:
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    return True


def _one_line_json(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def text_digests(data: str, priors: str, hardware: str) -> dict[str, str]:
    """The sha256 a fit's metadata records of the texts it stores: ``data.sha256``,
    ``priors.sha256`` and ``inputs_sha256`` (the hash of the three texts' hashes, data,
    hardware table, priors: :func:`ddtree_bayes.engine.inference.inputs_sha256`, the only
    record of the hardware table's)."""
    import hashlib

    parts = {name: hashlib.sha256(text.encode()) for name, text in
             (("data", data), ("hardware", hardware), ("priors", priors))}
    inputs = hashlib.sha256()
    for part in parts.values():
        inputs.update(part.digest())
    return {"data.sha256": parts["data"].hexdigest(), "priors.sha256": parts["priors"].hexdigest(),
            "inputs_sha256": inputs.hexdigest()}


#: The stored texts as :func:`_check_texts` names them, by the metadata field holding the
#: digest that checks them.
_TEXT_NAMES = {"data.sha256": "measurements (data.csv)", "priors.sha256": "priors (priors.toml)",
               "inputs_sha256": "hardware table (hardware.csv)"}


def _check_texts(meta: dict, texts: list[str], path: Path) -> None:
    """Refuse a stored text (data, priors, hardware table) that is not the one the fit was
    made on, as the sha256 its metadata records says: an edited copy answered from the edit.
    The data and priors are checked first, so a disagreeing ``inputs_sha256`` is the hardware
    table's. A digest the metadata lacks is not checked (every fit of this format records
    them; a lacking one is :func:`_check_fields`' to refuse where it is required)."""
    got = text_digests(*texts)
    for field, name in _TEXT_NAMES.items():
        *outer, key = field.split(".")
        holder = meta.get(outer[0]) if outer else meta
        want = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(want, str) and want != got[field]:
            raise ArtifactError(f"{path}: its stored copy of the {name} is not the text it "
                                f"was fit on (sha256 {got[field][:12]}; its metadata's {field} "
                                f"records {want[:12]}): edited or damaged (fix: re-run "
                                "`ddtree-bayes fit`)")


def _check_draws(meta: dict, variables: dict, path: Path) -> None:
    """Refuse a fit whose posterior lacks the draws of a parameter its diagnostics name (the
    fit sampled it; the file lost it)."""
    rows = (meta.get("diagnostics") or {}).get("parameters")
    names = {str(r.get("parameter", "")).split("[", 1)[0] for r in rows
             if isinstance(r, dict)} if isinstance(rows, list) else set()
    missing = sorted(n for n in names if n and n not in variables)
    if missing:
        from ddtree_bayes.core.gates import names as listed

        raise ArtifactError(f"{path} lacks the draws of {listed(missing)}, which its "
                            "diagnostics name (fix: re-run `ddtree-bayes fit`)")


def _check_means(meta: dict, variables: dict, element_names: dict[str, list[str]],
                 path: Path) -> None:
    """Refuse draws other than the ones the fit diagnosed: each parameter's mean in the
    diagnostics was computed from the draws it saved (engine.inference, over the flattened
    draws, as ``variables`` holds them), so draws that average otherwise were edited or damaged.
    A label is looked up among the variable's element labels (``element_names``, core/gates
    ``element_labels``: every coordinate, as diagnose names them; a variable without named
    dimensions, as a test writes it, is checked only unlabelled). The diagnostics of an
    importance resample (``update``) are its proposal fit's, whose draws it resampled: not
    checked."""
    diagnostics = meta.get("diagnostics") or {}
    rows = diagnostics.get("parameters")
    if not isinstance(rows, list) or "of_fit" in diagnostics or "reweight" in meta:
        return
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("mean"), int | float):
            continue
        name, _, label = str(row.get("parameter", "")).partition("[")
        values = variables.get(name)
        if values is None:
            continue   # (_check_draws refused a parameter it lacks)
        flat = values.reshape(values.shape[0], -1)
        if label:
            labels = element_names.get(name, [])
            if label[:-1] not in labels:
                continue
            column = flat[:, labels.index(label[:-1])]
        elif flat.shape[1] == 1:
            column = flat[:, 0]
        else:
            continue
        mean, recorded = float(column.mean()), float(row["mean"])
        if not np.isfinite(recorded):
            continue   # (a non-finite mean is the gates' to mark: _gate_again)
        spread = float(row["sd"]) if isinstance(row.get("sd"), int | float) else 0.0
        if not abs(mean - recorded) <= 1e-6 * (abs(spread) + abs(recorded)) + 1e-12:
            raise ArtifactError(f"{path}: its draws of {row['parameter']} average {mean:g}, "
                                f"not the {recorded:g} its diagnostics record (edited or "
                                "damaged) (fix: re-run `ddtree-bayes fit`)")


def _check_version(meta, path: Path) -> None:
    """Refuse metadata of another artifact format version (or none)."""
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        version = meta.get("format_version") if isinstance(meta, dict) else None
        raise ArtifactError(f"{path} has format version {version}, this "
                            f"ddtree-bayes reads {FORMAT_VERSION} (fix: re-run `ddtree-bayes fit`)")


def _check_digests(meta: dict, path: Path) -> None:
    """The stored model and drafter cards against the ``cards_sha256`` the fit recorded, and
    each stored derived value against its ``derived_sha256`` entry (a fit made before they
    were recorded has none: nothing to compare)."""
    model = meta.get("model")
    if not isinstance(model, dict):
        return
    recorded, cards = meta.get("cards_sha256"), cards_digest(model)
    if recorded is not None and recorded != cards:
        raise ArtifactError(f"{path}: its stored model and drafter cards are not the ones it "
                            f"was fit with (sha256 {cards[:12]}; its metadata's "
                            f"cards_sha256 records {recorded[:12]}): edited or damaged (fix: "
                            "re-run `ddtree-bayes fit`)")
    recorded, now = meta.get("derived_sha256"), derived_digests(model)
    if recorded is None:
        return
    # (a fit that records them recorded every derived field it stored: one without its digest
    # was added, or its digest taken away, after the fit, not derived otherwise by an older
    # ddtree-bayes, which _check_derived would call it)
    for name in now:
        if name not in recorded:
            raise ArtifactError(f"{path}: its metadata's model.{name} is not a value it was fit "
                                "with (its derived_sha256 records none for it): edited or "
                                "damaged (fix: re-run `ddtree-bayes fit`)")
    for name, digest in recorded.items():
        if now.get(name) != digest:
            found = (f"is not the value it was fit with (sha256 {now[name][:12]}; its "
                     if name in now else "is lacking (its ")
            raise ArtifactError(f"{path}: its metadata's model.{name} {found}derived_sha256 "
                                f"records {str(digest)[:12]}): edited or damaged (fix: re-run "
                                "`ddtree-bayes fit`)")


def load_meta(path: Path) -> dict:
    """Only the JSON metadata of a fit (h5py, root attributes: no draws are read), with the
    checks that need no draws: its fields, its coordinates, its stored texts and cards against
    the digests it records (three short texts and the cards hashed), and ``converged``
    against its stored diagnostics (``history`` lists a fit these refuse as unreadable, with the words predict
    refuses it with; an edit only the draws tell, such as draws that average otherwise than
    the diagnostics say, is load_fit's)."""
    import h5py

    try:
        with h5py.File(path, "r") as fh:
            meta = json.loads(_attr_text(fh.attrs[META_ATTR]))
            labels = _dimension_labels(fh.get("posterior"))
            texts = [fh.attrs.get(k) for k in (DATA_ATTR, PRIORS_ATTR, HARDWARE_ATTR)]
    except (OSError, KeyError, ValueError) as err:
        raise ArtifactError(f"{path} is not a readable ddtree-bayes fit ({err}) "
                            "(fix: re-run `ddtree-bayes fit`)") from None
    if not isinstance(meta, dict):
        raise ArtifactError(f"{path} has malformed metadata (fix: re-run `ddtree-bayes fit`)")
    _check_version(meta, path)   # (history listed such a fit as readable; predict refuses it)
    _check_fields(meta, path)
    _check_coords(meta, labels, path)
    if all(t is not None for t in texts):   # (a text lacking: load_fit's to refuse)
        _check_texts(meta, [_attr_text(t) for t in texts], path)
    _check_digests(meta, path)
    _gate_again(meta)
    _check_gates(meta, path)
    return meta


def _nonfinite(variables: dict[str, np.ndarray]) -> str:
    """``name count of total, ...`` for the variables holding a non-finite value (NaN, inf),
    or the empty string."""
    from ddtree_bayes.core.gates import names

    bad = []
    for name, values in variables.items():
        values = np.asarray(values)
        if values.dtype.kind in "fc":
            count = int((~np.isfinite(values)).sum())
            if count:
                bad.append(f"{name} {count} of {values.size}")
    return names(bad)


def _gate_again(meta: dict) -> None:
    """The gates again, on the diagnostics the artifact stores: a non-finite posterior
    mean, R-hat or ESS marks it unconverged (``meta`` changed in place: predict then refuses
    it without --allow-unconverged), whatever the version that wrote it said."""
    from ddtree_bayes.core.gates import nonfinite_failures

    rows = (meta.get("diagnostics") or {}).get("parameters")
    if not isinstance(rows, list):
        return
    known = list(meta.get("failures") or [])
    found = [f for f in nonfinite_failures(rows) if not any(k.startswith(f) for k in known)]
    if found:
        meta["converged"] = False
        meta["failures"] = known + ["; ".join(found) + " (found when the fit was read)"]


class _Draws(NamedTuple):
    """A fit's draws as :func:`_check_gates` re-diagnoses them: ``variables`` (flattened over
    (chain, draw)), ``chains``, each variable's element labels (core/gates ``element_labels``),
    and the sampler's ``diverging`` flags (None: the file stores none)."""

    variables: dict[str, np.ndarray]
    chains: int
    labels: dict[str, list[str]]
    diverging: np.ndarray | None


#: The most stored draw values (parameters x chains x draws) whose R-hat and bulk ESS a read
#: derives again (~0.4 us a value: 0.1 s for the bundled fit, 3-7 s on every predict of a fit
#: of ten models); a larger fit has its stored diagnostics gated and its divergences counted.
REDERIVE_MAX_VALUES = 1_000_000


def _check_gates(meta: dict, path: Path, draws: _Draws | None = None, *,
                 rederive: bool = True) -> None:
    """Refuse a fit whose metadata says converged while the gates fail: on the diagnostics
    it stores (R-hat, bulk ESS, divergences: cheap, every read), and, given its ``draws``, on
    divergences and, for a fit of at most :data:`REDERIVE_MAX_VALUES` stored values, R-hat and
    bulk ESS re-derived from them (core.gates.rederived_rows, ~0.1 s for the bundled fit)
    unless the draws are an importance resample (``update``'s, whose diagnostics are its
    proposal fit's) or ``rederive`` is False (the process that diagnosed them wrote them).
    ``converged`` is the only thing predict asks of a fit before answering:
    edited to true (with its failures emptied, or the stored R-hat too), an unconverged fit
    answered without --allow-unconverged, exit 0. A non-finite stored statistic is
    :func:`_gate_again`'s (it marks the fit unconverged)."""
    from ddtree_bayes.core.config import MAX_DIVERGENCES
    from ddtree_bayes.core.gates import (
        REDERIVED_SLACK,
        nonfinite_failures,
        rederived_rows,
        threshold_failures,
    )

    if meta.get("converged") is not True:
        return
    diagnostics = meta.get("diagnostics") or {}
    rows = diagnostics.get("parameters")
    rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
    failures = threshold_failures(rows)
    divergences = diagnostics.get("divergences")
    if isinstance(divergences, int | float) and divergences > MAX_DIVERGENCES:
        failures.append(f"{divergences:g} divergent transitions")
    source = "its diagnostics record"
    if not failures and draws is not None and not (
            "of_fit" in diagnostics or "reweight" in meta):
        source = "its draws give"
        if rederive and (sum(np.size(v) for v in draws.variables.values())
                         <= REDERIVE_MAX_VALUES):
            redone = rederived_rows(draws.variables, draws.chains, draws.labels)
            failures = (nonfinite_failures(redone, ("rhat", "ess_bulk"))
                        + threshold_failures(redone, REDERIVED_SLACK))
        if draws.diverging is not None:
            count = int(np.count_nonzero(draws.diverging))
            if count > MAX_DIVERGENCES:
                failures.append(f"{count} divergent transitions")
    if failures:
        raise ArtifactError(f"{path}: its metadata says converged, but {source} "
                            f"{'; '.join(failures)} (an edited fit) (fix: re-run "
                            "`ddtree-bayes fit`, or pass --fit to use another fit)")


def fit_order(created_utc: str | None, fit_id: str, name: str = ""
              ) -> tuple[str, str, int, str, str]:
    """Where a fit stands among the saved fits, oldest first: the creation time its metadata
    records (``created_utc``; a fit without one, made by an older ddtree-bayes or unreadable,
    the time its id carries, :func:`id_time`), then a same-second id's suffix as a number (X,
    X-2, X-9, X-10), then its id and file ``name``. The one order of "latest" (``history``,
    ``compare``, ``--model-average``): file names sorted ``backup.nc`` (a copy of an older fit)
    after every dated id, and X-2.nc before X.nc.

    >>> at = "2026-12-07T12:00:00+00:00"
    >>> ids = ["20261207T120000Z-b1-10", "20261207T120000Z-b1", "20261207T120000Z-b1-2"]
    >>> sorted(ids, key=lambda i: fit_order(at, i))
    ['20261207T120000Z-b1', '20261207T120000Z-b1-2', '20261207T120000Z-b1-10']
    """
    parts = FIT_ID_RE.fullmatch(fit_id)
    base, n = (parts.group(1), int(parts.group(2) or 1)) if parts else (fit_id, 1)
    return (created_utc or id_time(fit_id), base, n, fit_id, name)


def inputs_meta(measurements: Measurements, cfg: PriorsConfig, inputs_hash: str) -> dict[str, Any]:
    """What a new fit records of the inputs it was made on (``fit`` and ``update``'s
    reweighted fit alike): the measurement file's resolved path, the SHA-256 of its text and
    its row count, the priors file's path and SHA-256, and the hash of all the inputs
    (engine/inference.py ``inputs_sha256``), which staleness checks compare.

    >>> from types import SimpleNamespace as N
    >>> m = N(path="/d/m.csv", sha256="ab", rows=(1, 2, 3))
    >>> inputs_meta(m, N(path="/d/p.toml", sha256="cd"), "ef")
    {'data': {'path': '/d/m.csv', 'sha256': 'ab', 'rows': 3}, \
'priors': {'path': '/d/p.toml', 'sha256': 'cd'}, 'inputs_sha256': 'ef'}
    """
    return {"data": {"path": str(Path(measurements.path).resolve()),
                     "sha256": measurements.sha256, "rows": len(measurements.rows)},
            "priors": {"path": str(Path(cfg.path).resolve()), "sha256": cfg.sha256},
            "inputs_sha256": inputs_hash}


def id_time(fit_id: str) -> str:
    """The creation time a fit id carries, as ``created_utc`` records it (ISO 8601, UTC:
    the one reading of an id's time: ``fit`` and ``update`` record a new fit's
    ``created_utc`` with it), "" for an id without one (``mine``).

    >>> id_time("20261201T152424Z-b6b7ea56"), id_time("mine")
    ('2026-12-01T15:24:24+00:00', '')
    """
    from datetime import UTC, datetime

    try:
        return datetime.strptime(fit_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).isoformat()
    except ValueError:
        return ""


def fit_files(models: Path) -> list[Path]:
    """Every saved fit ``models/fits/*.nc`` (temp files of interrupted saves excluded)."""
    folder = fits_dir(models)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.nc") if not p.name.startswith("."))


def load_datatree(path: Path, handle=None):
    """The whole fit as an ``xarray.DataTree`` (for reports and notebooks); ``handle``: the
    file already open (:func:`opened`), read instead of opening ``path`` again."""
    import xarray as xr

    try:
        return xr.open_datatree(handle if handle is not None else path,
                                engine="h5netcdf").load()
    except (OSError, ValueError) as err:
        raise ArtifactError(f"{path} is not a readable netCDF fit ({err}) "
                            "(fix: re-run `ddtree-bayes fit`)") from None


def load(fit_id: str | None = None, workdir: Path | None = None) -> Fit:
    """Posterior draws and metadata of a fit (latest by default) in ``<workdir>/models``."""
    from ddtree_bayes.core import paths

    return load_fit(resolve(paths.models_dir(workdir), fit_id))


def _commit(tmp: str, target: Path, models: Path, meta: dict, texts: dict[str, str]) -> Path:
    """Publish a finished temp file as fit ``target`` and point latest.json at it: both
    renames or, when SIGINT/SIGTERM arrived first, neither (a signal arriving between them
    waits until both are done: :func:`ddtree_bayes.core.interrupts.commit`). Returns the
    fit's path.

    A fit file is never replaced: two fits that took one id (each looked for a free id before
    the other wrote: two processes saving at once in one folder) both keep their own. When
    ``target`` appeared meanwhile, the temp file's metadata is rewritten under the next free
    id (:func:`next_free_id`) and published under it; before, ``os.replace`` put the second
    fit over the first (tests/test_fit_ids.py)."""
    from ddtree_bayes.core import interrupts

    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    while True:
        with interrupts.commit(f"fit {meta['fit_id']}"):
            if _publish(tmp, target):
                fsync_dir(target.parent)
                _point_latest(models, meta, target)
                return target
        meta = {**meta, "fit_id": next_free_id(target.parent, meta["fit_id"])}
        import h5py

        with h5py.File(tmp, "r+") as fh:
            meta = write_root_attrs(fh.attrs, meta, texts)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        target = target.parent / f"{meta['fit_id']}.nc"


def _publish(tmp: str, target: Path) -> bool:
    """Rename ``tmp`` to ``target`` unless ``target`` exists (False, nothing done): a hard
    link, which fails on an existing name whatever another process does meanwhile, then the
    temp name removed; where the file system has no hard links, a check then a rename."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    except OSError:   # no hard links here (some network and FUSE file systems)
        if target.exists():
            return False
        os.replace(tmp, target)
        return True
    os.unlink(tmp)
    return True


def next_free_id(fits: Path, fit_id: str) -> str:
    """The first of ``<base>-2``, ``<base>-3``, ... without a file in ``fits`` (``<base>``:
    ``fit_id`` without its own suffix), as engine/inference.py ``new_fit_id`` numbers fits
    stamped the same second.

    >>> import tempfile
    >>> next_free_id(Path(tempfile.mkdtemp()), "20261201T000000Z-3bd953e0-2")
    '20261201T000000Z-3bd953e0-2'
    """
    parts = FIT_ID_RE.fullmatch(fit_id)
    base = parts.group(1) if parts else fit_id
    n = 2
    while (fits / f"{base}-{n}.nc").exists():
        n += 1
    return f"{base}-{n}"


def _point_latest(models: Path, meta: dict, target: Path) -> Path:
    """Point ``models/latest.json`` at the fit just written (atomically)."""
    latest = {"fit_id": meta["fit_id"], "file": f"fits/{target.name}",
              "converged": meta["converged"]}
    atomic_write_bytes(models / LATEST, (json.dumps(latest, indent=2) + "\n").encode())
    return target


def made_in(workdir: Path) -> dict[str, str]:
    """Where a fit was made (``meta["workdir"]``: the resolved working directory whose
    ``models/`` holds it), so that ``update`` tells a fit made here, whose files may live
    anywhere (``fit --priors /shared/tight.toml``), from one made in a copied workspace.
    Here, not in engine/fitting.py: update's reweighting records it too and must not import
    the sampler."""
    return {"workdir": str(Path(workdir).resolve())}


def made_elsewhere(meta: dict, here: Path) -> bool | None:
    """Whether a fit was made in another directory than ``here`` (a copied workspace), by the
    record :func:`made_in` keeps; None for a fit made before fits recorded it."""
    made = meta.get("workdir")
    return None if not made else Path(made).resolve() != Path(here).resolve()

"""Fitting: sample the model with NUTS, check convergence, save the artifact.

One seed flows through every random call. nutpie (Rust NUTS on a numba-compiled
log-density) is the default backend; PyMC's own NUTS (``backend="pymc"``) is the fallback
and is used automatically when nutpie is not installed.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddtree_bayes.core import gates, interrupts
from ddtree_bayes.core.config import (
    MAX_DIVERGENCES,
    PriorsConfig,
    SamplerSettings,
)
from ddtree_bayes.core.data import Measurements
from ddtree_bayes.engine import callbacks


def reproducible_pytensor() -> None:
    """Turn off numba fastmath, so cold and warm compile caches give bit-identical draws.

    PyTensor's numba backend compiles with ``fastmath`` by default; a function compiled fresh
    and the same function loaded from the cache then differ in the last bits, and the seeded
    chains diverge (a first fit on a machine and a later one printed 578 and 575 tok/s).
    Called where PyTensor is first imported (engine/model.py), so every model is compiled
    without it, whatever asked for it: a user's own ``numba__fastmath=True`` (in
    ``PYTENSOR_FLAGS`` or a ``.pytensorrc``) made the same seed's draws differ between a cold
    and a warm cache, with nothing said (round 18). ``callbacks.compile_model`` turns it off
    again for the compile, should a caller set it after this import.
    """
    import pytensor

    pytensor.config.numba__fastmath = False


@contextmanager
def without_dask() -> Iterator[None]:
    """xarray without dask while a fit's arrays go through it: no dask or distributed imported.

    Every array of a fit is a numpy array, yet xarray imports ``dask.array`` the first time it
    builds a DataArray (to ask whether the data is a dask array: nutpie's DataTree) and its
    netCDF writer imports ``distributed`` (to ask for dask's scheduler): ~0.4 s of a warm
    ``fit`` (docs/performance.md). Inside, ``dask`` is marked absent (``None`` in
    ``sys.modules``) and xarray's records of whether it is installed are forgotten, so it
    asks again and finds it absent; on the way out (an error or an interrupt too) the mark
    is removed and those records forgotten again, so xarray finds dask as before. Nothing
    changes once dask is imported (a dask worker, a validation on a cluster). One process at a
    time: a thread importing dask while it is in force gets an ImportError (the CLI's ``fit``
    uses it; ``ddtree_bayes.fit`` does not)."""
    if "dask" in sys.modules:
        yield
        return
    sys.modules["dask"] = None  # type: ignore[assignment]
    _forget_xarray_dask()
    try:
        yield
    finally:
        if "dask" in sys.modules and sys.modules["dask"] is None:
            del sys.modules["dask"]
        _forget_xarray_dask()


def _forget_xarray_dask() -> None:
    """Forget xarray's records of dask (:func:`_xarray_dask_records`) if xarray is imported;
    nothing otherwise: xarray is not imported for it, so a fit whose input is refused fails
    before importing it (tests/test_data_validation.py ``test_cli_fit_bad_data``, which passed
    only after another test had imported xarray). An xarray first imported while dask is
    marked absent records it absent; forgetting on the way out lets it find dask again."""
    if "xarray" in sys.modules:
        _xarray_dask_records()()


def _xarray_dask_records() -> Callable[[], None]:
    """A function forgetting what xarray has recorded of dask being installed (its cache of
    ``module_available``, of the dask array type, of the chunk managers) and asking again what
    it asked once at import (``daskmanager.dask_available``); nothing to forget in an xarray
    without them. Called with xarray imported (:func:`_forget_xarray_dask`)."""
    import xarray  # noqa: F401

    clears: list[Callable[[], None]] = []
    try:
        from xarray.namedarray import parallelcompat, pycompat
        from xarray.namedarray import utils as nutils
    except ImportError:
        return lambda: None
    for fn in (getattr(nutils, "module_available", None),
               getattr(parallelcompat, "list_chunkmanagers", None)):
        clear = getattr(fn, "cache_clear", None)
        if clear is not None:
            clears.append(clear)
    cached = getattr(pycompat, "_cached_duck_array_modules", None)
    if isinstance(cached, dict):
        clears.append(lambda: cached.pop("dask", None))
    # asked once, when xarray imports it: asked again (after module_available's cache is)
    daskmanager = sys.modules.get("xarray.namedarray.daskmanager")
    if daskmanager is not None and hasattr(daskmanager, "dask_available"):
        def ask_again() -> None:
            found = nutils.module_available("dask")
            daskmanager.dask_available = found  # type: ignore[attr-defined]
            if hasattr(daskmanager, "DaskManager"):
                daskmanager.DaskManager.available = found
        clears.append(ask_again)

    def forget() -> None:
        for clear in clears:
            clear()
    return forget


@dataclass
class FitResult:
    """What ``fit`` produced: where the artifact is, whether it passed the gates, and why not."""

    fit_id: str
    path: Path
    converged: bool
    failures: list[str]
    diagnostics: list[dict]
    divergences: int
    timings: dict[str, float] = field(default_factory=dict)
    #: the remedy ladder's record (engine/remedies.py): outcome, remedy, attempts
    remedies: dict = field(default_factory=dict)
    #: the measurements it was fit on, as validated (so reading the fit back does not
    #: validate them again: :meth:`ddtree_bayes.engine.posterior.Fit.knowing`)
    measurements: Measurements | None = field(default=None, repr=False)
    #: the priors file as ``fit`` validated it (its own forms, not ``--moe-form``'s), so
    #: reading the fit back does not validate the stored copy of the same text again
    #: (:meth:`ddtree_bayes.engine.posterior.Fit.knowing`)
    priors: PriorsConfig | None = field(default=None, repr=False)
    #: what fit warned of on stderr before sampling (a name one edit from another, runs of one
    #: configuration more than 2x apart)
    warnings: list[str] = field(default_factory=list)

    def raise_if_unconverged(self) -> None:
        """Raise :class:`UnconvergedError` (CLI exit 5) naming the failed gates."""
        if not self.converged:
            from ddtree_bayes.core.errors import UnconvergedError

            raise UnconvergedError(f"fit {self.fit_id} failed its convergence gates: "
                                   + "; ".join(self.failures)
                                   + "; the artifact is saved, marked unconverged (fix: re-run "
                                   "`ddtree-bayes fit`, or pass --allow-unconverged to predict "
                                   "to answer from it anyway)")


def inputs_sha256(data: Measurements, priors: PriorsConfig, hardware_text: str) -> str:
    """One hash of everything a fit depends on (data, hardware table, priors)."""
    h = hashlib.sha256()
    for part in (data.text, hardware_text, priors.text):
        h.update(hashlib.sha256(part.encode()).digest())
    return h.hexdigest()


def log(progress: bool, msg: str) -> None:
    """One ``[fit] ...`` step line on stderr (unless ``progress`` is off: ``--quiet``)."""
    if progress:
        print(f"[fit] {msg}", file=sys.stderr, flush=True)


def run_nutpie(compiled, *, draws: int, say: Callable[[str], None] | None = None, **kwargs):
    """``nutpie.sample`` that never hands back a partial trace.

    nutpie 0.16 catches ``KeyboardInterrupt`` while it samples and returns the trace so far:
    no draws at all during tuning, and chains padded with NaN during sampling (an older
    version saved that as a converged fit). Here the sampler runs in the background; an
    interrupt cancels it and is raised again, a signal that something else swallowed is
    raised (:func:`ddtree_bayes.core.interrupts.check`), a trace with fewer draws than
    asked raises :class:`~ddtree_bayes.core.errors.Interrupted` and one with fewer chains
    than asked (``chains=``) a failed fit (:func:`require_draws`).
    ``say`` (without nutpie's bar: a log file) gets one line when every chain has tuned."""
    import nutpie

    if say is not None:
        kwargs["progress_callback"] = _tuned_callback(say, time.perf_counter())
    sampler = nutpie.sample(compiled, draws=draws, blocking=False, **kwargs)
    try:
        dt = sampler.wait()
    except KeyboardInterrupt:
        sampler.cancel()
        raise
    interrupts.check()
    require_draws(dt, draws, "nutpie", chains=kwargs.get("chains"))
    return dt


def _tuned_callback(say: Callable[[str], None], t0: float) -> Callable[[list], None]:
    """nutpie's ``progress_callback`` (a background thread): ``say`` once, when no chain is
    tuning any more."""
    said = threading.Event()

    def callback(chains: list) -> None:
        if not said.is_set() and chains and not any(c.tuning for c in chains):
            said.set()
            say(f"tuning done after {time.perf_counter() - t0:.1f} s; drawing")
    return callback


def require_draws(dt, draws: int, sampler: str, chains: int | None = None) -> None:
    """Raise :class:`Interrupted` when the posterior has fewer than ``draws`` per chain, and
    :class:`UnconvergedError` (a failed fit: nothing is saved) when it has fewer than
    ``chains`` chains (a chain the sampler dropped; the gates would judge the rest alone)."""
    sizes = dt["posterior"].to_dataset().sizes
    got = int(sizes.get("draw", 0))
    if got < draws:
        from ddtree_bayes.core.errors import Interrupted

        raise Interrupted(f"{sampler} returned {got} of {draws} draws per chain")
    n_chains = int(sizes.get("chain", 0))
    if chains is not None and n_chains < chains:
        from ddtree_bayes.core.errors import UnconvergedError

        raise UnconvergedError(f"{sampler} returned {n_chains} of {chains} chains: the fit "
                               "failed and nothing was saved (fix: fit again; another --seed "
                               "if it happens again)")


def sample(model, settings: SamplerSettings, seed: int, progress: bool = True,
           cache: dict | None = None):
    """Run NUTS on ``model``; returns (DataTree with posterior + sample_stats, timings, backend).

    ``cache`` (a dict kept by the caller for this model) keeps nutpie's compiled model, so
    sampling the same model again with other settings or seeds does not compile it again
    (``compile_s`` is then 0)."""
    backend = settings.backend
    timings: dict[str, float] = {}
    if backend == "nutpie":
        try:
            callbacks.import_nutpie()   # (is it installed? without ArviZ's plotting)
        except ImportError:
            log(progress, "nutpie is not installed; falling back to PyMC's NUTS")
            backend = "pymc"
    t0 = time.perf_counter()
    if backend == "nutpie":
        from ddtree_bayes.engine import deterministics

        compiled = None if cache is None else cache.get("nutpie")
        if compiled is None:
            log(progress, "compiling the model (numba; ~4 s, ~30 s the first time on a machine)")
            # the deterministics are computed after sampling (engine/deterministics.py)
            compiled = callbacks.compile_model(model, free_only=True)
            if cache is not None:
                cache["nutpie"] = compiled
        timings["compile_s"] = time.perf_counter() - t0
        omitted = deterministics.omitted(model, compiled)
        log(progress, f"sampling {settings.chains_x_draws()} (+{settings.tune} tuning) "
                       "with nutpie")
        t1 = time.perf_counter()
        bar = progress and sys.stderr.isatty()
        dt = run_nutpie(compiled, draws=settings.n_draws, tune=settings.tune,
                        chains=settings.chains, cores=min(settings.chains, os.cpu_count() or 1),
                        seed=seed, target_accept=settings.target_accept, save_warmup=False,
                        progress_bar=bar, store_unconstrained=bool(omitted),
                        say=(lambda msg: log(True, msg)) if progress and not bar else None)
        if omitted:
            dt = deterministics.complete(dt, model, compiled, omitted)
        timings["sample_s"] = time.perf_counter() - t1   # (with the deterministics: ~0.5 s)
    elif backend == "pymc":
        import pymc as pm

        log(progress, f"sampling {settings.chains_x_draws()} (+{settings.tune} tuning) "
                       "with PyMC's NUTS")
        dt = pm.sample(draws=settings.n_draws, tune=settings.tune, chains=settings.chains,
                       cores=min(settings.chains, os.cpu_count() or 1),
                       target_accept=settings.target_accept, random_seed=seed, model=model,
                       nuts_sampler="pymc", progressbar=progress and sys.stderr.isatty(),
                       compute_convergence_checks=False)
        interrupts.check()   # PyMC, too, returns what it has on KeyboardInterrupt
        require_draws(dt, settings.n_draws, "PyMC", chains=settings.chains)
        timings["sample_s"] = time.perf_counter() - t0
    else:
        raise ValueError(f"unknown backend {backend!r}: use 'nutpie' or 'pymc'")
    return dt, timings, backend


def finite_failures(posterior, sample_stats) -> list[str]:
    """The gates on the draws themselves: there are some, every draw of every parameter is
    finite, and so is every draw's log-density (``logp`` from nutpie, ``lp`` from PyMC).
    A failure names the parameters and counts (nutpie pads the chains of an interrupted run
    with NaN; an older version saved such a trace as converged)."""
    import numpy as np

    n = int(posterior.sizes.get("chain", 0)) * int(posterior.sizes.get("draw", 0))
    if n == 0:
        return ["no draws (the sampler returned none: interrupted?)"]
    failures = []
    bad = []
    for name in posterior.data_vars:
        values = np.asarray(posterior[name].values, dtype=float)
        if values.size == 0:
            continue
        per_draw = (~np.isfinite(values)).reshape(n, -1).any(axis=1)
        if per_draw.any():
            bad.append(f"{name} {int(per_draw.sum())}/{n}")
    if bad:
        failures.append(f"non-finite draws ({gates.names(bad)})")
    for stat in ("logp", "lp"):
        if stat in sample_stats:
            logp = np.asarray(sample_stats[stat].values, dtype=float)
            if not np.isfinite(logp).all():
                failures.append(f"non-finite log-density in {int((~np.isfinite(logp)).sum())} "
                                f"of {logp.size} draws")
            break
    return failures


#: arviz-base's default ``stats.ci_prob``, if its rcParams cannot be read
CI_PROB = 0.89


def ci_prob() -> float:
    """The probability arviz-stats' tail ESS takes its quantiles at (``rcParams``)."""
    try:
        from arviz_base import rcParams
    except ImportError:   # (installed with nutpie: not expected)
        return CI_PROB
    return float(rcParams["stats.ci_prob"])


def diagnose(posterior, sample_stats) -> tuple[list[dict], int, list[str]]:
    """R-hat, bulk/tail ESS and MCSE per scalar parameter; divergences; failed gates.

    Every gate fails on a non-finite value (a NaN compares false with any threshold, so a
    gate written as ``rhat > 1.01`` alone passes it): non-finite draws or log-density
    (:func:`finite_failures`), and a non-finite R-hat or ESS, each naming its parameters
    (:func:`ddtree_bayes.core.gates.row_failures`). The statistics are arviz-stats' to the
    bit, every element of every variable at once (``core.convergence``: the function a read
    of the stored fit derives R-hat and bulk ESS again with, so the two agree exactly). A
    row names a scalar ``name``, an element ``name[label]`` by its coordinate, or, of a
    variable of several dimensions after the draws, ``name[a, b]`` by every coordinate in
    the variable's dimension order.
    """
    import warnings

    import numpy as np

    from ddtree_bayes.core import convergence

    failures = finite_failures(posterior, sample_stats)
    if failures and failures[0].startswith("no draws"):
        return [], 0, failures
    # priors with dist = "point" are constants in the posterior: no R-hat or ESS to speak of
    constant = [n for n in posterior.data_vars if np.ptp(np.asarray(posterior[n].values)) == 0]
    posterior = posterior.drop_vars(constant)
    arrays = {name: posterior[name].transpose("chain", "draw", ...) for name in posterior.data_vars}
    stats: dict[str, np.ndarray] = {}
    if arrays:
        stacked = np.concatenate([np.asarray(da.values, dtype=float).reshape(
            da.shape[0], da.shape[1], -1) for da in arrays.values()], axis=2)
        stats = convergence.summaries(stacked, ci_prob())
    rows: list[dict[str, Any]] = []
    start = 0
    for name, da in arrays.items():
        extra = [d for d in da.dims if d not in ("chain", "draw")]
        if extra:
            # every element by all its coordinates, in the order the reshape below flattens
            # them (the first extra dimension's labels alone named the first few elements of
            # a (chain, draw, a, b) variable, and left the rest out)
            names = [f"{name}[{lab}]" for lab in gates.element_labels(
                [da[d].values for d in extra])]
        else:
            names = [name]
        flat = np.asarray(da.values).reshape(da.shape[0] * da.shape[1], -1)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # inf draws: the gates say so below
            for j, label in enumerate(names):
                if np.ptp(flat[:, j]) == 0:   # a constant element (tp_tok_ms of one GPU: 0)
                    continue
                rows.append({"parameter": label, "mean": float(flat[:, j].mean()),
                             "sd": float(flat[:, j].std()),
                             **{k: float(v[start + j]) for k, v in stats.items()}})
        start += flat.shape[1]
    divergences = int(np.asarray(sample_stats["diverging"].values).sum())
    failures += gates.row_failures(rows)
    if divergences > MAX_DIVERGENCES:
        failures.append(f"{divergences} divergent transitions")
    return rows, divergences, failures


def new_fit_id(inputs_hash: str, seed: int, models: Path, made: str = "") -> str:
    """``<UTC time>-<hash of inputs and seed>``, unique in ``models/fits`` (the time from
    :func:`ddtree_bayes.core.clock.utc_now`; engine/store.py ``id_time`` reads it back).
    ``made``: what made the posterior beyond its inputs and seed when it is not a plain
    ``fit``'s (engine/fitting.py ``made_by``: the sampler and its settings, the forms asked
    for, remedies off), hashed with them; "" (a plain fit) hashes the inputs and seed alone,
    as every id did before (the bundled fit's 20261201T000000Z-3bd953e0). Without it a
    ``fit --backend pymc`` or ``fit --chains 2`` of the same inputs and seed, under the
    reproducible clock, took the plain fit's id (tests/test_fit_ids.py)."""
    from ddtree_bayes.core.clock import utc_now

    stamp = utc_now(models).strftime("%Y%m%dT%H%M%SZ")
    key = f"{inputs_hash}:{seed}" + (f":{made}" if made else "")
    base = f"{stamp}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
    fit_id, n = base, 1
    while (models / "fits" / f"{fit_id}.nc").exists():
        n += 1
        fit_id = f"{base}-{n}"
    return fit_id

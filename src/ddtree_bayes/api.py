"""The Python API: ``fit``, ``load``, ``predict`` (and ``load_inputs``). A facade: the
pipeline is :mod:`ddtree_bayes.engine.fitting`, the question
:mod:`ddtree_bayes.engine.question`, the numbers :mod:`ddtree_bayes.engine.predictive`;
the CLI goes the same way.

Typical notebook use (a fit samples for ~10 s, so this is not run as a doctest;
tests/test_api.py runs the same calls)::

    import ddtree_bayes as db
    result = db.fit()                                # samples, saves models/fits/<id>.nc
    table = db.predict(accept="12:16", target=800)   # pandas DataFrame, one row per case
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtree_bayes.core.config import DEFAULT_SEED, SamplerSettings

if TYPE_CHECKING:
    from ddtree_bayes.core.config import PriorsConfig
    from ddtree_bayes.core.data import Measurements
    from ddtree_bayes.engine.inference import FitResult
    from ddtree_bayes.engine.posterior import Fit


def _paths(call: str, **given: Any) -> None:
    """Refuse a path argument that is no path: pathlib's own TypeError ("argument should be a
    str or an os.PathLike object ...") named no argument (``db.load_inputs(["m.csv"])``,
    ``db.fit(workdir=7)``)."""
    import os

    for name, value in given.items():
        if value is not None and not isinstance(value, str | os.PathLike):
            raise TypeError(f"{call}({name}=...) takes a path (a str or pathlib.Path) or None, "
                            f"not {type(value).__name__} (fix: give the "
                            f"{'folder' if name == 'workdir' else 'file'}'s path)")


def fit(data: str | Path | None = None, priors: str | Path | None = None, *,
        seed: int = DEFAULT_SEED, chains: int = 4, draws: int | None = None, tune: int = 1000,
        target_accept: float = SamplerSettings.target_accept, backend: str = "nutpie",
        hardware: str | Path | None = None, workdir: Path | None = None, progress: bool = True,
        moe_form: str | None = None, step_form: str | None = None, remedies: bool = True,
        extra_meta: dict | None = None) -> FitResult:
    """Fit the step model to a measurement file (default ``data/measurements.csv``) and save
    the posterior as ``models/fits/<fit id>.nc``.

    Returns a :class:`~ddtree_bayes.engine.inference.FitResult` (``fit_id``, ``path``,
    ``converged``, ``failures``, ``diagnostics``, ``timings``); ``converged`` is False when
    a convergence gate failed after the remedy ladder (the artifact is saved, marked
    unconverged, and ``predict`` refuses it). ``moe_form`` / ``step_form`` override the
    priors file's model forms; ``remedies=False`` samples once. See
    :func:`ddtree_bayes.engine.fitting.fit`.

    Example::

        import ddtree_bayes as db
        result = db.fit()                       # data/measurements.csv, ~10-30 s of sampling
        result.fit_id, result.converged         # ('20261201T000000Z-3bd953e0', True)
        db.fit("mine.csv", step_form="fraction")   # another file, the earlier SPEC form
    """
    from ddtree_bayes.engine import fitting

    _paths("fit", data=data, priors=priors, hardware=hardware, workdir=workdir)
    return fitting.fit(data, priors, seed=seed, chains=chains, draws=draws, tune=tune,
                       target_accept=target_accept, backend=backend, hardware=hardware,
                       workdir=workdir, progress=progress, extra_meta=extra_meta,
                       moe_form=moe_form, step_form=step_form, remedies=remedies)


def load(fit_id: str | None = None, workdir: Path | None = None) -> Fit:
    """A saved fit (latest by default): its draws, metadata and stored inputs, as a
    :class:`~ddtree_bayes.engine.posterior.Fit`.

    Example::

        import ddtree_bayes as db
        fit = db.load()                                  # models/latest.json's fit
        fit.meta["fit_id"], fit.meta["converged"]
        older = db.load("20261201T000000Z-3bd953e0")     # an id from `ddtree-bayes history`
    """
    from ddtree_bayes.engine import store

    if fit_id is not None and not isinstance(fit_id, str):   # (re's TypeError, unexplained)
        raise TypeError(f"load(fit_id=...) takes a fit id string, 'latest' or None, not "
                        f"{type(fit_id).__name__} (fix: copy an id from `ddtree-bayes history`)")
    _paths("load", workdir=workdir)
    return store.load(fit_id, workdir)


def predict(fit: Fit | None = None, *, allow_unconverged: bool = False, strict: bool = False,
            model_average: bool = False, **query: Any):
    """Posterior throughput intervals as a tidy pandas DataFrame, one row per engine and
    acceptance.

    ``fit`` is a :class:`~ddtree_bayes.engine.posterior.Fit` (from :func:`load`) or None for the
    latest fit; the keyword arguments are ``predict``'s flags (``model``, ``hardware``,
    ``gpus``, ``engines`` or its alias ``engine``: a name, comma-separated names or a list,
    ``method``, ``block``, ``budget``, ``verify_tokens``, ``context``,
    ``accept``: as ``--accept`` or a sequence of numbers (a list, range, numpy array or
    pandas Series, as ``concurrency`` takes them), ``concurrency``: one C or a list, per
    user with ``total_*`` columns; ``explain``: each row's variance split, as ``--explain``;
    ``kv_cache``: the KV cache's dtype, bf16, fp16, fp8, q8_0 or q4_0, as ``--kv-cache``;
    ``drafter``: a drafter card's name, as ``--drafter``; ``new_deployment``: True to price a
    measured group's question as another deployment of it, as ``--new-deployment``;
    ``model_average``: mix the latest
    converged fit of each model form, as ``--model-average``, the fits and weights in the
    frame's ``attrs["model_average"]``) and ``target``, ``prob``, ``seed``, ``workdir`` (where
    ``data/`` and ``models/`` are: the latest fit, and the cards ``predict`` run there reads,
    e.g. a ``drafter`` the fit did not store); any
    other keyword raises :class:`~ddtree_bayes.core.errors.QueryError` naming them. The
    question is resolved as the CLI
    resolves it (:func:`ddtree_bayes.engine.question.resolve`). A number that comes out
    non-finite raises :class:`~ddtree_bayes.core.errors.QueryError`; a fit that failed its
    convergence gates raises :class:`~ddtree_bayes.core.errors.UnconvergedError` unless
    ``allow_unconverged`` (the CLI's ``--allow-unconverged``). What the CLI prints as a
    warning (the data or priors file the fit names changed since; an engine
    never measured nor declared, a context far past the measured ones), and its line saying
    which question the fit's default filled in (a fit that never measured B300 asks its own
    most-measured system), is a ``UserWarning``;
    with ``strict`` (the CLI's ``--strict``) a stale fit raises
    :class:`~ddtree_bayes.core.errors.StaleArtifactError` instead, and an engine or method
    never measured nor declared a :class:`~ddtree_bayes.core.errors.QueryError`.

    Example::

        import ddtree_bayes as db
        table = db.predict(db.load(), accept="12:16", target=800)   # the README's question
        table[["engine", "accept", "median", "lo90", "hi90", "p_ge_target"]]
        db.predict(hardware="h200", engine="sglang", accept=14, explain=True)
    """
    from ddtree_bayes.core.paths import working_in

    _paths("predict", workdir=query.get("workdir"))
    # (the cards an answer reads "here", a --drafter or --model the fit did not store: the
    # workdir's, as `predict` run there reads them; they were the current directory's)
    with working_in(query.get("workdir")):
        return _predict(fit, allow_unconverged=allow_unconverged, strict=strict,
                        model_average=model_average, **query)


def _predict(fit: Fit | None, *, allow_unconverged: bool, strict: bool, model_average: bool,
             **query: Any):
    """:func:`predict` within its workdir."""
    import inspect

    from ddtree_bayes.core.errors import QueryError, UnconvergedError
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.posterior import Fit

    # predict's flags (a name P.predict does not take raised its raw TypeError): engine is
    # --engine, an alias of engines; mixture, warnings and strict are this function's to give
    flags = set(inspect.signature(P.predict).parameters) - {"fit", "mixture", "warnings",
                                                            "strict", "notes"}
    valid = sorted(flags | {"engine", "model_average"})
    unknown = next((k for k in query if k not in flags and k != "engine"), None)
    if unknown is not None:
        raise QueryError(f"predict() got an unknown keyword argument {unknown!r}",
                         fix=f"give predict's flags as keywords: {', '.join(valid)}")
    if "engine" in query:
        if query.get("engines") is not None:
            raise QueryError("predict() got engine= and engines= (engine is an alias of engines)",
                             fix="give engine= or engines=, not both")
        query["engines"] = query.pop("engine")

    if fit is not None and not isinstance(fit, Fit):   # (an AttributeError on .meta before)
        fit_id = getattr(fit, "fit_id", fit if isinstance(fit, str) else None)
        raise TypeError(f"predict(fit=...) takes a Fit from ddtree_bayes.load() or None, not "
                        f"{type(fit).__name__} (fix: "
                        + (f"ddtree_bayes.load({fit_id!r})" if isinstance(fit_id, str)
                           else "ddtree_bayes.load() the fit first") + ")")
    draws = fit if fit is not None else load(workdir=query.get("workdir"))
    meta = draws.meta
    if not meta["converged"] and not allow_unconverged:   # (it answered such a fit)
        raise UnconvergedError(
            f"fit {meta['fit_id']} failed its convergence gates "
            f"({'; '.join(meta.get('failures') or [])}) (fix: re-run the fit, or pass "
            "allow_unconverged=True to use it anyway)")
    # (stale: the CLI's warnings, no longer silent; strict refuses an unknown engine or
    # method, as --strict)
    said = P.check_fit(draws, allow_unconverged=True, strict=strict, here=False,
                       ignore_priors_sections=P.NOT_FITTED_PRIORS)
    mixture = None
    if model_average:   # (as --model-average: the latest converged fit of each form)
        from ddtree_bayes.engine import compare

        mixture = compare.model_average(draws, query.get("seed", DEFAULT_SEED),
                                        "model_average=True", query.get("workdir"), said)
    notes: list[str] = []
    rows = P.predict(draws, **query, strict=strict, warnings=said, mixture=mixture,
                     notes=notes)
    import warnings

    # what the CLI prints as warnings (they were dropped), after the line saying which
    # question the fit's default filled in (a fit that never measured B300 answered its own
    # system's without a word)
    for text in [*notes, *said]:
        warnings.warn(text, UserWarning, stacklevel=3)
    P.require_finite(rows)   # a QueryError, not a table of NaN
    table = P.to_frame(rows)
    if mixture is not None:   # (the CLI's JSON model_average)
        from ddtree_bayes.engine.compare import mixture_entries

        table.attrs["model_average"] = mixture_entries(mixture)
    return table


def load_inputs(data: str | Path | None = None, priors: str | Path | None = None,
                hardware: str | Path | None = None, workdir: Path | None = None
                ) -> tuple[Measurements, PriorsConfig]:
    """Read and validate a measurement file and the priors (defaults: ``data/`` and
    ``models/``) without fitting: every problem ``fit`` refuses before sampling (of one file,
    or of the files together: a row's undeclared method, a model without a card) raises an
    :class:`~ddtree_bayes.core.errors.InputError`.

    Example::

        import ddtree_bayes as db
        measurements, priors = db.load_inputs()          # data/ and models/ here
        len(measurements.rows), priors.moe_form          # (9, 'roofline') on the bundled data
        db.load_inputs("mine.csv")                       # InputError: file, row, column, fix
    """
    from ddtree_bayes.engine.fitting import FitInputs

    _paths("load_inputs", data=data, priors=priors, hardware=hardware, workdir=workdir)
    inputs = FitInputs.read(data, priors, hardware, workdir).check()
    return inputs.measurements, inputs.priors

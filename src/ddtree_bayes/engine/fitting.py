"""Fitting: read the inputs (each file once), build the model, sample it up the remedy ladder,
gate the draws, save the artifact. The pipeline behind ``ddtree-bayes fit``,
``ddtree_bayes.fit`` and ``update``'s refits; PyMC is imported only inside :func:`fit`."""

from __future__ import annotations

import json
import numbers
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ddtree_bayes.core import __version__, paths
from ddtree_bayes.core.config import (
    DEFAULT_SEED,
    MAX_SEED,
    PriorsConfig,
    SamplerSettings,
    is_seed,
    load_priors,
)
from ddtree_bayes.core.data import (
    Measurements,
    kv_cache_problem,
    load_measurements,
    misspelt_names,
    weights_problem,
)
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.gates import UNUSABLE_DRAWS
from ddtree_bayes.core.hardware_table import HardwareTable, hardware_table


@dataclass(frozen=True)
class FitInputs:
    """Everything a fit reads from disk, each file read once: the measurements, the priors,
    the hardware table (built-in GPUs overlaid by the user's rows), the model cards and the
    drafter cards (built-in ones overlaid by ``data/drafters.csv``, which ``card add`` writes)."""

    measurements: Measurements
    priors: PriorsConfig
    hardware: HardwareTable
    cards: dict
    drafters: tuple
    #: the proxy card of a model without one (core/proxy_card.py), as its metadata, or None
    proxy: dict | None = None
    #: what a data/models.csv copied before a card column says less than the built-in card
    #: of the same name (core/model_cards.stale_hybrid_cards); () for the built-in cards
    card_warnings: tuple[str, ...] = ()

    @classmethod
    def read(cls, data: str | Path | None = None, priors: str | Path | None = None,
             hardware: str | Path | None = None, workdir: Path | None = None, *,
             table: HardwareTable | None = None, cfg: PriorsConfig | None = None,
             measurements: Measurements | None = None) -> FitInputs:
        """Read and validate the inputs (defaults: ``data/`` and ``models/`` of ``workdir``).
        Every problem of one file raises an :class:`~ddtree_bayes.core.errors.InputError`
        before anything runs; those of the files together under the priors' forms (a method
        the structured form has no ``[methods]`` table of, a model without a card) are found
        by :meth:`check` (a fit finds them building its model, under the forms it is asked
        for). The priors are read before the data: their ``[methods]`` table bounds each row's
        accept_len (:func:`~ddtree_bayes.core.methods.max_accept`).

        ``table``, ``cfg``, ``measurements``: those files as the caller already read them
        (``add``, which checks the file it appends to as ``fit`` would: the hardware table
        and priors it read for the new rows, the file's rows it read under its lock), not
        read again; the measurements must have been read against ``table`` and ``cfg``'s
        ``[methods]``."""
        from ddtree_bayes.core.drafters import check_row_drafters, drafter_table
        from ddtree_bayes.core.model_cards import load_model_cards, stale_hybrid_cards
        from ddtree_bayes.core.pairs import impossible_step

        if table is None:
            table = hardware_table(workdir, hardware)
        if cfg is None:
            cfg = load_priors(Path(priors) if priors else paths.priors_file(workdir))
        if measurements is None:
            data_path = Path(data) if data else paths.data_file("measurements.csv", workdir)
            measurements = load_measurements(data_path, table.rows, methods=cfg.methods)
        own_cards = paths.own_data_file("models.csv", workdir)
        cards = load_model_cards(own_cards or paths.data_file("models.csv", workdir))
        card_warnings = () if own_cards is None else tuple(
            stale_hybrid_cards(cards, {m.model for m in measurements.rows}))
        drafters = drafter_table(paths.own_data_file("drafters.csv", workdir))
        check_names(cfg, measurements.rows, cards, own_cards is not None, drafters,
                    where=str(measurements.path))
        check_row_drafters(measurements.rows, drafters, measurements.path)
        for m in measurements.rows:   # (a model without a card: its proxy is read off the rows)
            card = cards.get(m.model)   # (the rows `add` refuses, refused in a hand-edited file)
            for column, problem in (
                    ("gpus", weights_problem(card, table.rows, m)),
                    ("tok_s", impossible_step(card, table.rows.get(m.hardware), m)),
                    ("context_tokens", kv_cache_problem(card, table.rows, m))):
                if problem is not None:
                    raise DataError(problem[0], file=measurements.path, row=m.row,
                                    column=column, fix=problem[1])
        proxy = None
        if not measurements.multi_model and measurements.model not in cards:
            from ddtree_bayes.core import spec as S
            from ddtree_bayes.core.proxy_card import proxy_card

            constants = S.pass_roofline_constants(cfg)
            found = proxy_card(measurements, table.rows, bw_eff=constants.bw_eff,
                               layer_ms=constants.layer_ms,
                               allreduce_fabric_ms=constants.allreduce_fabric_ms,
                               allreduce_pcie_ms=constants.allreduce_pcie_ms,
                               default_context_tokens=cfg.default_context_tokens)
            if found is not None:
                cards = {**cards, measurements.model: found.card}
                proxy = found.as_meta()
        return cls(measurements, cfg, table, cards, drafters, proxy, card_warnings)

    def check(self) -> FitInputs:
        """These inputs, once the model a fit of them under the priors' own forms would
        sample is built (:func:`~ddtree_bayes.core.spec.build_spec`, no PyMC): every problem
        ``fit`` refuses before sampling raises its InputError here (a row's undeclared
        method, a model without a card, a prior the rows need)."""
        model_spec(self, self.priors)
        return self

    def warnings(self, cfg: PriorsConfig) -> list[str]:
        """What ``fit`` warns of before sampling (stderr, and its JSON's ``warnings``), one
        line each, naming the data file: an engine or method one edit from another (the
        file's or ``cfg``'s: a typo is fitted as another engine), and a configuration whose
        runs are more than 2x apart (core/likelihood ``far_apart_repeats``: a unit or entry
        error is read as every configuration's scatter), and what ``add`` warns of a row it
        keeps (core/row_notes ``row_notes``: a step shorter than reading the card's weights, a
        context above the card's longest, weights the GPUs hold only at a smaller quantisation,
        a C > 1 total below one stream's AR tok/s, a speculative row at accept_len 1 faster
        than AR), one line per row: a row typed in by hand is said as ``add`` would say it.
        A model fitted on a proxy card (core/proxy_card.py, read off its own rows) is held
        against no card."""
        from ddtree_bayes.core.config import priors_names_warnings
        from ddtree_bayes.core.likelihood import far_apart_repeats
        from ddtree_bayes.core.row_notes import row_notes

        rows = self.measurements.rows
        notes = row_notes(rows, self.file_cards, self.hardware.rows, cfg.default_context_tokens)
        return [*(f"{self.measurements.path}, {line}"
                  for line in (*misspelt_names(rows, cfg.declared_names()),
                               *far_apart_repeats(rows),
                               *(f"row {row}: {note}" for row, note in notes))),
                *priors_names_warnings(cfg, {m.engine for m in rows}), *self.card_warnings]

    @property
    def file_cards(self) -> dict:
        """The model cards as the cards file says them: :attr:`cards` without a proxy card
        (which no file holds)."""
        if self.proxy is None:
            return self.cards
        return {k: v for k, v in self.cards.items() if k != self.measurements.model}

    def structure(self) -> dict:
        """The hardware table, model and drafter cards the roofline form needs (``build_spec``
        kwargs)."""
        return {"hardware": self.hardware.rows, "cards": self.cards, "drafters": self.drafters}

    def with_forms(self, moe_form: str | None, step_form: str | None) -> FitInputs:
        """These inputs with the priors' MoE and/or step form overridden (:func:`with_forms`)."""
        import dataclasses

        return dataclasses.replace(self, priors=with_forms(self.priors, moe_form, step_form))


def with_forms(cfg: PriorsConfig, moe_form: str | None, step_form: str | None
                ) -> PriorsConfig:
    """``cfg`` with its MoE and/or step form overridden; the priors they need must be there."""
    import dataclasses

    from ddtree_bayes.core.config import FORM_PRIORS, MOE_FORMS, STEP_FORMS
    from ddtree_bayes.core.errors import PriorsError

    moe_form = moe_form or cfg.moe_form
    step_form = step_form or cfg.step_form
    if moe_form not in MOE_FORMS:
        raise PriorsError(f"unknown MoE form {moe_form!r}", fix="use --moe-form roofline, power or linear")
    if step_form not in STEP_FORMS:
        raise PriorsError(f"unknown step form {step_form!r}", fix="use --step-form structured or fraction")
    needed = (MOE_FORMS[moe_form], *FORM_PRIORS.get(moe_form, ()), *FORM_PRIORS[step_form])
    for name in needed:
        if name not in cfg.priors:
            form = moe_form if name not in FORM_PRIORS[step_form] else step_form
            raise PriorsError(f"the {form} form needs a prior", file=cfg.path,
                              column=f"priors.{name}",
                              fix=f"add [priors.{name}] (see the bundled priors)")
    if step_form == "structured" and not cfg.methods:
        raise PriorsError("the structured step form needs a [methods.<name>] table per method",
                          file=cfg.path, column="methods",
                          fix="copy [methods.*] from the bundled priors")
    return dataclasses.replace(cfg, moe_form=moe_form, step_form=step_form)


def check_names(cfg: PriorsConfig, rows, cards: dict, own_cards: bool, drafters: tuple = (),
                *, where: str) -> None:
    """Refuse a name of the priors that names nothing the rows (of the data file ``where``)
    or the model cards (the user's, and the built-in ones beside them) know
    (:func:`~ddtree_bayes.core.config.check_priors_names`): a relation's base engine, an
    ``[[acceptance]]`` entry's model and the ``[acceptance_curve]``'s model and method, which
    ``optimize`` reads, and an entry's drafter card (of ``drafters``). The one check of every
    command that reads measurements with priors: :meth:`FitInputs.read` (fit, add, validate,
    update) and, through :func:`names_checker`, ``validate --extrapolate``'s sweeps."""
    from ddtree_bayes.core.config import check_priors_names
    from ddtree_bayes.core.model_cards import load_model_cards

    rows = list(rows)
    known = set(cards)
    models = {m.model for m in rows}
    named = [a.model for a in cfg.acceptance if a.model] + [cfg.curve_model or ""]
    if own_cards and any(n and n not in known and n not in models for n in named):
        # (a card of the built-in table names a model too; read only when needed)
        known |= set(load_model_cards(paths.bundled("models.csv")))
    check_priors_names(cfg, engines={m.engine for m in rows}, models=models, where=where,
                       cards=known, drafters=drafters)


def names_checker(cfg: PriorsConfig, workdir: Path | None = None,
                  drafters: tuple | None = None):
    """:func:`check_names` of ``cfg`` for measurements read outside :meth:`FitInputs.read`
    (``validate --extrapolate``'s sweeps, ``--from-smallest``'s corpus, ``--concurrency``'s
    sweeps), each fitted with these priors: a function of one
    :class:`~ddtree_bayes.core.data.Measurements`, with the model cards a fit in ``workdir``
    reads, read once, and ``drafters`` (default: the built-in drafter cards overlaid by
    ``workdir``'s data/drafters.csv)."""
    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.core.model_cards import load_model_cards

    own = paths.own_data_file("models.csv", workdir)
    cards = load_model_cards(own or paths.data_file("models.csv", workdir))
    table = (drafter_table(paths.own_data_file("drafters.csv", workdir)) if drafters is None
             else drafters)

    def check(data: Measurements) -> None:
        check_names(cfg, data.rows, cards, own is not None, table, where=str(data.path))
    return check


def fit(data: str | Path | None = None, priors: str | Path | None = None, *,
        seed: int = DEFAULT_SEED, chains: int = 4, draws: int | None = None, tune: int = 1000,
        target_accept: float = SamplerSettings.target_accept, backend: str = "nutpie",
        hardware: str | Path | None = None,
        workdir: Path | None = None, progress: bool = True, extra_meta: dict | None = None,
        moe_form: str | None = None, step_form: str | None = None, remedies: bool = True,
        inputs: FitInputs | None = None):
    """Fit the step model to a measurement file and save the artifact under ``models/``.

    Returns a :class:`~ddtree_bayes.engine.inference.FitResult`; ``result.converged`` is False when
    a convergence gate failed (the artifact is still saved, marked unconverged), except for
    draws that are not a posterior at all (none, or a non-finite draw or log-density):
    :class:`~ddtree_bayes.core.errors.UnconvergedError`, nothing written. An interrupted
    sampler raises :class:`~ddtree_bayes.core.errors.Interrupted`, nothing written.
    ``extra_meta`` adds keys to the artifact's metadata (``update`` records its parent fit).
    ``moe_form`` ("roofline", "power" or "linear") and ``step_form`` ("structured" or
    "fraction") override the priors file's ``[model]`` forms, to fit several forms from one
    file and compare them (``ddtree-bayes compare``).
    A fit that fails its gates climbs the remedy ladder of :mod:`ddtree_bayes.engine.remedies`
    (longer tuning, higher target acceptance, a reparameterisation; one line on stderr per
    rung) unless ``remedies=False``; the artifact's metadata records every attempt.
    ``inputs`` (already read: :class:`FitInputs`) replaces ``data``, ``priors``, ``hardware``.
    ``draws`` None: :func:`~ddtree_bayes.core.config.default_draws` for the model (1000 per
    chain, 3000 above 100 free parameters).
    """
    from ddtree_bayes.engine import inference

    t_start = time.perf_counter()
    inputs = inputs or FitInputs.read(data, priors, hardware, workdir)
    measurements = inputs.measurements
    cfg = forms_of(inputs.priors, moe_form, step_form)
    hardware_text = inputs.hardware.text
    # (nutpie panics with no tuning step: a PanicException after the compile, not an error)
    # (a count that is no whole number, or a bool, got past `>= 1`: chains=1.5 died in a
    # TypeError after the compile, chains=True sampled one chain, draws="100" a TypeError here)
    def count(v) -> bool:
        return not isinstance(v, bool) and isinstance(v, numbers.Integral) and int(v) >= 1

    bad = [f"{k} {v!r}" for k, v, ok in (
        ("chains", chains, count(chains)), ("draws", draws, draws is None or count(draws)),
        ("tune", tune, count(tune)),
        ("target_accept", target_accept, not isinstance(target_accept, bool)
         and isinstance(target_accept, numbers.Real) and 0 < target_accept < 1),
        ("seed", seed, is_seed(seed))) if not ok]
    if bad:
        raise DataError(f"sampler settings out of range: {', '.join(bad)}",
                        fix="chains >= 1, draws >= 1, tune >= 1, 0 < target_accept < 1, "
                            f"seed a whole number 0 to {MAX_SEED}")
    seed = int(seed)   # (a numpy integer would reach the JSON metadata after sampling)
    extra_meta = _extra_meta(extra_meta)
    settings = SamplerSettings(chains=int(chains), draws=None if draws is None else int(draws),
                               tune=int(tune), target_accept=float(target_accept),
                               backend=backend)
    from ddtree_bayes.engine import remedies as R

    spec = model_spec(inputs, cfg)
    if inputs.proxy is not None:   # one line, even under --quiet: it changes what to trust
        from ddtree_bayes.core.proxy_card import describe

        print(f"ddtree-bayes: note: {describe(inputs.proxy)}", file=sys.stderr)
    # a name one edit from another engine or method (the file's or the priors'): likewise
    # before sampling, as predict warns of it (a typo is fitted as another engine)
    warnings = inputs.warnings(cfg)
    for line in warnings:
        print(f"ddtree-bayes: warning: {line}", file=sys.stderr)
    shadowed = inputs.hardware.shadowed_note()
    if shadowed is not None:   # likewise: a stale copy of the table hides built-in values
        print(f"ddtree-bayes: note: {shadowed}", file=sys.stderr)
    sampler = R.ModelSampler(R.builder(spec, cfg), seed, progress)
    n_free = R.free_size(sampler.model())
    settings = asked = settings.for_model(n_free)
    t_built = time.perf_counter()
    kept, ladder = R.run(sampler, settings, enabled=remedies,
                         parameterisations=sampler.parameterisations)
    settings, used_backend = kept.settings, kept.backend
    diag_rows, divergences, failures = kept.diagnostics, kept.divergences, kept.failures
    unusable = [f for f in failures if f.startswith(UNUSABLE_DRAWS)]
    if unusable:  # not a posterior at all: nothing to save, even marked unconverged
        from ddtree_bayes.core.errors import UnconvergedError

        raise UnconvergedError(f"the fit failed its convergence gates: {'; '.join(unusable)};"
                               " nothing was written (fix: re-run `ddtree-bayes fit`; if it "
                               "happens again, check the priors file for a prior that allows "
                               "impossible values)")
    timings: dict[str, float] = {k: sum(a[k] for a in ladder["attempts"])
                                 for k in ("compile_s", "sample_s")
                                 if k in kept.timings}  # compile_s: nutpie only
    timings["setup_s"] = t_built - t_start
    timings["diagnose_s"] = kept.timings["diagnose_s"]
    dt = artifact_tree(kept.dt, spec)
    models = paths.models_dir(workdir)
    inputs_hash = inference.inputs_sha256(measurements, cfg, hardware_text)
    made = made_by(asked, used_backend, n_free=n_free, remedies=bool(remedies),
                   forms=(cfg.moe_form, cfg.step_form),
                   file_forms=(inputs.priors.moe_form, inputs.priors.step_form))
    fit_id = inference.new_fit_id(inputs_hash, seed, models, made=made)
    timings["total_s"] = time.perf_counter() - t_start
    meta = fit_metadata(inputs, models, ladder, fit_id, measurements, cfg, spec, settings,
                        used_backend, seed, inputs_hash, diag_rows, divergences, failures,
                        timings)
    # (extra_meta was checked once, before sampling, against OWN_META_KEYS: every key
    # fit_metadata and store.save write, as tests/test_api.py checks)
    meta.update(extra_meta)
    from ddtree_bayes.engine import store

    t_save = time.perf_counter()
    inference.log(progress, f"saving fit {fit_id}")
    path = store.save(dt, meta, {"data": measurements.text, "priors": cfg.text,
                                 "hardware": hardware_text}, models)
    timings["save_s"] = time.perf_counter() - t_save
    # (the id saved under: another, should a fit taking the same id have been saved meanwhile)
    return inference.FitResult(fit_id=path.stem, path=path, converged=not failures,
                               failures=failures, diagnostics=diag_rows,
                               divergences=divergences, timings=timings, remedies=ladder,
                               measurements=measurements, priors=inputs.priors,
                               warnings=warnings)


def made_by(asked: SamplerSettings, backend: str, *, n_free: int, remedies: bool,
            forms: tuple[str, str], file_forms: tuple[str, str]) -> str:
    """What made a fit's posterior beyond its inputs and seed, for its id's hash
    (engine/inference.py ``new_fit_id``): "" for a plain ``fit`` (nutpie, 4 chains, the
    model's default draws, 1000 tuning steps, target acceptance 0.99, remedies on, the priors
    file's forms), else ``sampler {...}`` (the settings asked for, draws resolved, with the
    backend that sampled: PyMC when nutpie is missing), ``forms <moe> <step>`` when
    ``--moe-form``/``--step-form`` changed the file's, and ``no remedies``, joined by "; ".

    >>> made_by(SamplerSettings().for_model(10), "nutpie", n_free=10, remedies=True,
    ...         forms=("linear", "structured"), file_forms=("linear", "structured"))
    ''
    """
    parts = []
    sampler = {**asked.as_dict(), "backend": backend}
    plain = {**SamplerSettings().for_model(n_free).as_dict(), "backend": "nutpie"}
    if sampler != plain:
        parts.append(f"sampler {json.dumps(sampler, sort_keys=True)}")
    if tuple(forms) != tuple(file_forms):
        parts.append(f"forms {forms[0]} {forms[1]}")
    if not remedies:
        parts.append("no remedies")
    return "; ".join(parts)


def fit_metadata(inputs: FitInputs, models: Path, ladder: dict, fit_id: str, measurements,
                 cfg: PriorsConfig, spec, settings, backend, seed: int, inputs_hash: str,
                 diag_rows, divergences, failures, timings) -> dict:
    """Every metadata key a fit writes itself before ``store.save`` (which adds the digests):
    :func:`metadata`, the remedy ladder, where it was made, the user's hardware file and a
    proxy card (inside ``model``); :data:`OWN_META_KEYS` names them all."""
    from ddtree_bayes.engine import store

    meta = metadata(fit_id, measurements, cfg, spec, settings, backend, seed, inputs_hash,
                    diag_rows, divergences, failures, timings)
    meta["remedies"] = ladder
    meta.update(store.made_in(models.parent))
    hardware_file = hardware_meta(inputs.hardware)
    if hardware_file is not None:
        meta["hardware"] = hardware_file
    if inputs.proxy is not None:
        meta["model"]["proxy_card"] = inputs.proxy
    return meta


#: The metadata keys a fit writes itself (:func:`fit_metadata`: :func:`metadata`, the remedy
#: ladder, where it was made, the user's hardware file; the digests store.save adds:
#: ``with_digests``):
#: ``extra_meta`` adds keys beside them, never over them.
OWN_META_KEYS = frozenset({
    "format_version", "fit_id", "created_utc", "package_version", "libraries", "seed",
    "sampler", "model", "coords", "data", "priors", "inputs_sha256", "diagnostics",
    "converged", "failures", "timings", "remedies", "workdir", "hardware", "cards_sha256",
    "derived_sha256"})


def _extra_meta(extra: object) -> dict:
    """``fit``'s ``extra_meta`` (None: no keys), refused before anything is compiled when it is
    no dict of string keys or names a key the fit writes itself: {"fit_id": "x"} saved the fit
    as models/fits/x.nc under an id its FitResult did not name (an existing fit's id replaced
    that fit's file), and [1] died in a bare TypeError after sampling.

    >>> _extra_meta(None), _extra_meta({"made_by": "refit"})
    ({}, {'made_by': 'refit'})
    """
    if extra is None:
        return {}
    if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
        raise TypeError(f"extra_meta {extra!r} is not a dict of metadata keys (str) "
                        "(fix: give a dict such as {'note': '...'}, or None)")
    clash = sorted(set(extra) & OWN_META_KEYS)
    if clash:
        raise ValueError(f"extra_meta {extra!r} would overwrite the fit's own metadata "
                         f"({', '.join(clash)}) (fix: give keys of your own, beside "
                         f"{', '.join(sorted(OWN_META_KEYS))})")
    return dict(extra)


def forms_of(cfg: PriorsConfig, moe_form: str | None, step_form: str | None) -> PriorsConfig:
    """``cfg``, or with its forms overridden (:func:`with_forms`) when ``moe_form`` /
    ``step_form`` ask for others than its own."""
    if (moe_form or cfg.moe_form, step_form or cfg.step_form) != (cfg.moe_form, cfg.step_form):
        return with_forms(cfg, moe_form, step_form)
    return cfg


def model_spec(inputs: FitInputs, cfg: PriorsConfig):
    """The spec of the model a fit of ``inputs`` under the priors ``cfg`` samples."""
    from ddtree_bayes.core import spec as S

    return S.build_spec(inputs.measurements, cfg, **inputs.structure())


def compile_only(inputs: FitInputs, *, moe_form: str | None = None,
                 step_form: str | None = None, progress: bool = True) -> dict:
    """Compile the log density a fit of ``inputs`` samples first and sample nothing.

    nutpie's callbacks are cached on disk per model and machine (engine/callbacks.py), with
    the numba kernels of PyTensor's graph under its ``base_compiledir``: the next fit of the
    same model loads them (a warm fit) instead of spending ~30 s in numba's typing (a first
    fit on a machine). A model with other data but the same graph reuses the kernels and
    compiles only its outer function (docs/performance.md, "A first fit after the install").
    ``scripts/bootstrap.sh`` runs this once on the bundled data (``fit --compile-only``).
    Nothing is written under ``models/``. Returns the seconds it took, the cache directory and
    whether the callbacks are in it (not when the cache is off or cannot be written: the next
    fit then compiles again).
    """
    from ddtree_bayes.engine import callbacks, inference
    from ddtree_bayes.engine import remedies as R

    t0 = time.perf_counter()
    cfg = forms_of(inputs.priors, moe_form, step_form)
    model = R.builder(model_spec(inputs, cfg), cfg)("default")
    inference.log(progress, "compiling the model (numba; ~4 s, ~30 s the first time on a "
                            "machine); nothing is sampled or saved")
    callbacks.compile_model(model, free_only=True)
    return {"compile_s": time.perf_counter() - t0, "cache": str(callbacks.cache_dir()),
            "cached": callbacks.last_compile_cached()}


def hardware_meta(table) -> dict | None:
    """The user's hardware file a fit was made with (``--hardware-file``, else
    data/hardware.csv), as ``meta["hardware"]``: its resolved path and the sha256 of its text
    as the table read it (the file is not read again: a fit reads each input once), so that
    ``update`` without ``--hardware-file`` can tell the default table from the one the fit
    read. None for the built-in table alone."""
    if table.user_file is None:
        return None
    return {"path": str(Path(table.user_file).resolve()), "sha256": table.user_sha256}


def artifact_tree(dt, spec):
    """Keep posterior + sample_stats; add observed_data and constant_data from the spec
    (:func:`store.data_groups`, which a reweighting ``update`` writes too)."""
    import xarray as xr

    from ddtree_bayes.engine import store

    stats = dt["sample_stats"].to_dataset()
    stats = stats.drop_vars([v for v in stats.data_vars if stats[v].dtype == object])
    groups = {name: xr.Dataset({k: ("measurement", v.astype(str) if v.dtype == object else v)
                                for k, v in values.items() if k != "measurement"},
                               coords={"measurement": list(values["measurement"])})
              for name, values in store.data_groups(spec).items()}
    return xr.DataTree.from_dict({"posterior": dt["posterior"].to_dataset(),
                                  "sample_stats": stats, **groups})


def metadata(fit_id, measurements, cfg, spec, settings, backend, seed, inputs_hash, diag_rows,
              divergences, failures, timings) -> dict:
    from importlib.metadata import version

    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.pairs import target_models_meta
    from ddtree_bayes.engine import store

    libs: dict[str, str | None] = {}
    for lib in ("pymc", "pytensor", "nutpie", "arviz-stats", "numpy"):
        try:
            libs[lib] = version(lib)
        except Exception:  # noqa: BLE001 - optional libraries may be missing
            libs[lib] = None
    return {
        "format_version": store.FORMAT_VERSION,
        "fit_id": fit_id,
        "created_utc": store.id_time(fit_id),
        "package_version": __version__,
        "libraries": libs,
        "seed": seed,
        "sampler": {**settings.as_dict(), "backend": backend},
        "model": {**target_models_meta(measurements), **S.model_meta(spec, cfg)},
        "coords": {k: list(v) for k, v in spec.parameter_coords.items()},
        **store.inputs_meta(measurements, cfg, inputs_hash),
        "diagnostics": {"parameters": diag_rows, "divergences": divergences},
        "converged": not failures,
        "failures": failures,
        "timings": timings,
    }

"""A fit: the posterior draws of one artifact, and everything derived from the inputs it
stores, each parsed once.

:class:`Fit` is what :func:`ddtree_bayes.engine.store.load_fit` returns and what every numeric
function of the engine and the workflows takes. The priors, the hardware table, the methods
table and the measurements a fit was made on are parsed from the texts stored in the artifact
the first time they are asked for, and kept on the object: one ``predict`` parses each once.
Lookups derived from them (the configurations measured per system, the drafter passes a group
measured) are kept in :attr:`Fit.memo`, never in the metadata. numpy and the standard library
only (the predict path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ddtree_bayes.core.config import PriorsConfig
    from ddtree_bayes.core.data import Measurements
    from ddtree_bayes.core.methods import MethodSpec

#: The label of a fit's stored priors in what their parse says (an error, ``PriorsConfig.path``).
STORED_PRIORS = "priors stored in the fit"

#: The cached attributes a view shares with its fit when it keeps the same input texts.
_SHARED_BY_TEXT = {"priors_tables": "priors_toml", "priors": "priors_toml", "methods": "priors_toml",
                   "hardware": "hardware_csv"}


@dataclass(frozen=True, eq=False)
class Fit:
    """Posterior draws flattened over (chain, draw), the fit's metadata and the exact texts of
    the data, priors and hardware table it was fit on.

    Examples
    --------
    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> fit = point_mass_draws(n=4)
    >>> fit.n_draws, fit.priors is fit.priors, sorted(fit.hardware)[:2]
    (4, True, ['a100-40gb', 'a100-80gb'])
    """

    path: Path
    meta: dict
    variables: dict[str, np.ndarray]
    data_csv: str
    priors_toml: str
    hardware_csv: str
    #: each posterior variable's dimensions after (chain, draw), as its artifact names them
    #: (the netCDF dimension scales xarray attaches: ``spec_fixed_engine`` -> ``("engine",)``;
    #: engine/store.py ``load_fit``); a variable without them, or an in-memory fit: none
    dims: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False, compare=False)
    #: lookups derived from the fit's inputs, computed on first use (engine/structure.py)
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_draws(self) -> int:
        return next(iter(self.variables.values())).shape[0]

    @property
    def effective_draws(self) -> float | None:
        """What the stored draws are worth when fewer than :attr:`n_draws`, else None: a fit
        ``update`` reweighted by PSIS holds an importance resample of its proposal's draws,
        worth about ``reweight.n_eff`` (its metadata; ~750-1500 of 4000), with repeats. None for
        a sampled fit, and for a reweighted one whose draws were kept as they were (every
        stored draw distinct: nothing was resampled)."""
        rw = self.meta.get("reweight")
        if self.meta.get("made_by") != "psis-reweight" or not isinstance(rw, dict):
            return None
        n_eff, distinct = rw.get("n_eff"), rw.get("distinct_draws")
        if isinstance(distinct, int) and distinct >= self.n_draws:
            return None
        if not isinstance(n_eff, (int, float)) or not 0 < n_eff < self.n_draws:
            return None
        return float(n_eff)

    @property
    def fit_id(self) -> str:
        return str(self.meta.get("fit_id", self.path.stem if self.path else "?"))

    def _stored[T](self, read: Callable[[], T]) -> T:
        """``read()`` of a text the fit stores; its :class:`InputError` (a row, a TOML key)
        becomes a :class:`StoredTextError`: exit 3 and refit, where it said exit 2 with the fix
        for a file the user edits ("write a plain number"), which the fit's copy is not."""
        from ddtree_bayes.core.errors import InputError, StoredTextError, without_fix

        try:
            return read()
        except StoredTextError:
            raise
        except InputError as err:
            said = without_fix(err)
            where = "" if str(self.path) in said else f"{self.path}: "
            raise StoredTextError(f"{where}{said} (the fit's stored copy, which this "
                                  "ddtree-bayes cannot read: damaged, or older than its checks)",
                                  fix="re-run `ddtree-bayes fit`") from None

    @cached_property
    def priors_tables(self) -> dict:
        """The stored priors TOML parsed (read-only): what :attr:`priors`, :attr:`methods` and
        the stored acceptance curve are read from, so one answer parses it once."""
        from ddtree_bayes.core.methods import toml_tables

        return self._stored(lambda: toml_tables(self.priors_toml, STORED_PRIORS))

    @cached_property
    def priors(self) -> PriorsConfig:
        """The priors file the fit was made with."""
        from ddtree_bayes.core.config import parse_priors

        return self._stored(lambda: parse_priors(self.priors_toml, STORED_PRIORS,
                                                 stored=True, tables=self.priors_tables))

    @cached_property
    def methods(self) -> dict[str, MethodSpec]:
        """The ``[methods]`` table of the stored priors (the only part an old priors text
        that no longer validates as a whole still has to give)."""
        from ddtree_bayes.core.methods import load_methods

        return self._stored(lambda: load_methods(self.priors_toml, STORED_PRIORS,
                                                 tables=self.priors_tables))

    @cached_property
    def hardware(self) -> dict[str, dict[str, str]]:
        """The hardware table the fit was made with (built-in GPUs plus the user's rows)."""
        from ddtree_bayes.core.data import load_hardware

        return self._stored(lambda: load_hardware("hardware table stored in the fit",
                                                  text=self.hardware_csv, stored=True))

    @cached_property
    def measurements(self) -> Measurements:
        """The measurements the fit was made on, validated again from the stored text."""
        from ddtree_bayes.core.data import load_measurements

        where = f"{self.path} (stored data)"
        return self._stored(lambda: load_measurements(
            where, self.hardware, text=self.data_csv, allow_duplicates=True,
            methods=self.methods, stored=True))

    @cached_property
    def measured_systems(self) -> tuple[str, ...]:
        """Systems (pairs, in a fit of several models) the fit has data for (a validation fold
        may hold some out)."""
        held_out = set(self.meta.get("held_out_systems", ()))
        return tuple(s for s in self.meta["coords"]["system"] if s not in held_out)

    def view(self, **changes: Any) -> Fit:
        """The same fit with some fields replaced (``meta``, ``variables``, ``data_csv``...),
        keeping what was parsed from the texts it shares with this one: the one way to derive
        a fit from another. Its :attr:`memo` starts empty unless ``changes`` give one (this
        fit's, to share lookups that still hold)."""
        out = replace(self, **{"memo": {}, **changes})
        for name, text in _SHARED_BY_TEXT.items():
            if name in self.__dict__ and getattr(out, text) == getattr(self, text):
                out.__dict__[name] = self.__dict__[name]
        if ("measurements" in self.__dict__ and out.data_csv == self.data_csv
                and out.hardware_csv == self.hardware_csv):
            out.__dict__["measurements"] = self.__dict__["measurements"]
        return out

    def knowing(self, measurements: Measurements | None,
                priors: PriorsConfig | None = None) -> Fit:
        """This fit, told the measurements it was made on (already validated by the process
        that fit it: a 100,000-row file takes a second to validate again) and the priors file
        it was made with as that process validated it (``fit``: the file's text, strictly; the
        stored copy of that text is read more leniently, so the same values, labelled as the
        stored copy's errors are). Returns ``self``."""
        if measurements is not None:
            if measurements.text != self.data_csv:
                raise ValueError("these measurements are not the fit's")
            self.__dict__["measurements"] = measurements
        if priors is not None:
            if priors.text != self.priors_toml:
                raise ValueError("these priors are not the fit's")
            self.__dict__["priors"] = replace(priors, path=STORED_PRIORS)
            self.__dict__["methods"] = priors.methods   # (its [methods], as load_methods reads it)
        return self


def blank_context(fit: Fit) -> float:
    """The context a row or a question with a blank ``context_tokens`` takes: the fit's
    ``default_context_tokens`` (the priors' ``[model]`` entry; 0 for a stand-in without it),
    as :meth:`~ddtree_bayes.core.data.Measurement.context` reads it. The one reader of that
    field: the question's context, the rows behind it, the anchors, the fitted rows, the
    crossover check and optimize's measured budgets all ask here.

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> d = point_mass_draws(n=2)
    >>> d.meta["model"]["default_context_tokens"] = 4096.0
    >>> blank_context(d), blank_context(object())
    (4096.0, 0.0)
    """
    return float(getattr(fit, "meta", {}).get("model", {}).get("default_context_tokens") or 0.0)

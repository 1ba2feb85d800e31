"""The ``[acceptance_curve]`` section of the priors file: acceptance as a function of the tree
budget, used only by ``optimize`` (fit and predict ignore it)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ddtree_bayes.core.config import (
    ACCEPTANCE_DISTS,
    Prior,
    parse_prior,
    target_model,
    undeclared_curve_method,
)
from ddtree_bayes.core.errors import PriorsError, typo_fix
from ddtree_bayes.core.methods import MethodSpec, toml_tables

#: Distributions each acceptance-curve parameter may use, and the support it must respect.
CURVE_PARAMS: dict[str, tuple[tuple[str, ...], float, float]] = {
    # name: (allowed dists, smallest allowed value, largest allowed value)
    "accept_ref": (ACCEPTANCE_DISTS, 1.0, math.inf),
    "gain": (("point", "uniform", "truncnormal", "halfnormal", "lognormal"), 0.0, math.inf),
    "decay": (("point", "uniform", "truncnormal", "beta"), 0.0, 1.0),
}
#: Keys of the ``[acceptance_curve]`` table besides its parameters' tables.
CURVE_KEYS = ("model", "method", "block", "reference_budget", "measurement_sd")


@dataclass(frozen=True)
class AcceptanceCurve:
    """Acceptance length as a function of the tree budget B (used by ``optimize``)::

        accept(B) = min(max_accept, accept_ref + gain * (1 - decay**d) / (1 - decay))
        d = log2(B / reference_budget)

    ``gain`` tokens for the first doubling above the reference budget, ``decay`` times the
    previous gain for every further doubling (``decay = 1``: log-linear, no saturation).
    ``measurement_sd`` is the noise of one acceptance measurement when the curve is
    updated from an acceptance file.
    """

    path: str
    method: str
    block: int
    reference_budget: int
    measurement_sd: float
    accept_ref: Prior
    gain: Prior
    decay: Prior
    #: the target model the curve was written for (None: not said); ``optimize`` of another
    #: model without an acceptance file says its acceptance is that model's prior
    model: str | None = None

    def describe(self) -> str:
        def one(p: Prior) -> str:
            return f"{p.dist}({', '.join(f'{k}={v:g}' for k, v in p.params.items())})"

        return (f"accept_ref ~ {one(self.accept_ref)} (at budget {self.reference_budget}), "
                f"gain ~ {one(self.gain)}, decay ~ {one(self.decay)}")


def parse_acceptance_curve(text: str, path: str = "<priors>", *, stored: bool = False,
                           tables: dict | None = None,
                           methods: Callable[[], Mapping[str, MethodSpec] | None] | None = None
                           ) -> AcceptanceCurve | None:
    """The ``[acceptance_curve]`` section of priors TOML ``text`` (None if there is none).
    A key it does not know is refused (``metod = "eagle3"`` left the method at ddtree),
    unless ``stored``: the curve a saved fit holds, read as it was fitted. ``methods``: asked
    for ``text``'s ``[methods]`` table when the ``accept_ref`` check needs it, a caller's that
    has it parsed already (a fit's, of the same text); None from it, or no ``methods``: parsed
    here (:func:`~ddtree_bayes.core.methods.load_methods`, its errors naming ``path``).

    >>> from ddtree_bayes.core.paths import bundled
    >>> curve = parse_acceptance_curve(bundled("priors.toml").read_text())
    >>> curve.method, curve.block, curve.reference_budget, curve.decay.dist
    ('ddtree', 16, 16, 'beta')
    """
    raw = tables if tables is not None else toml_tables(text, path)
    section = raw.get("acceptance_curve")
    if section is None:
        return None
    where = "acceptance_curve"
    if not isinstance(section, dict):
        raise PriorsError("must be a table", file=path, column=where,
                          fix="write it as [acceptance_curve] with [acceptance_curve.<param>] tables")
    unknown = [k for k in section if k not in (*CURVE_KEYS, *CURVE_PARAMS)] if not stored else []
    if unknown:
        known = (*CURVE_KEYS, *CURVE_PARAMS)
        raise PriorsError(f"unknown key {unknown[0]!r}", file=path, column=where,
                          fix=typo_fix(unknown[0], known, "it takes " + ", ".join(known)))
    method = section.get("method", "ddtree")
    if not isinstance(method, str) or not method:
        raise PriorsError("'method' must be a method name", file=path, column=f"{where}.method",
                          fix='set method = "ddtree"')
    declared = raw.get("methods")
    if not stored and isinstance(declared, dict) and (
            err := undeclared_curve_method(method, declared, path)) is not None:
        raise err
    ints = {}
    for key in ("block", "reference_budget"):
        value = section.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PriorsError(f"'{key}' must be a positive integer", file=path,
                              column=f"{where}.{key}", fix=f"set {key} = <integer>, e.g. 16")
        ints[key] = value
    sd = section.get("measurement_sd")
    if isinstance(sd, bool) or not isinstance(sd, int | float) or not (math.isfinite(sd) and sd > 0):
        raise PriorsError("'measurement_sd' must be a positive number", file=path,
                          column=f"{where}.measurement_sd",
                          fix="set measurement_sd = 0.1 (tokens per step)")
    params: dict[str, Prior] = {}
    for name, (dists, low, high) in CURVE_PARAMS.items():
        if name not in section:
            raise PriorsError("missing prior", file=path, column=f"{where}.{name}",
                              fix=f"add an [{where}.{name}] table (see the bundled models/priors.toml)")
        prior = parse_prior(path, name, section[name], where=where, strict=not stored)
        if prior.dist not in dists:
            raise PriorsError(f"{name} cannot use dist {prior.dist!r}", file=path,
                              column=f"{where}.{name}", fix="use one of " + ", ".join(dists))
        p = prior.params
        lo = p.get("lower", p.get("value", low))
        hi = p.get("upper", p.get("value", high))
        if lo < low or hi > high or (name == "decay" and prior.dist == "point" and p["value"] <= 0):
            raise PriorsError(f"{name} must lie in [{low:g}, {high:g}]"
                              + (" and be > 0" if name == "decay" else ""),
                              file=path, column=f"{where}.{name}",
                              fix=f"keep its bounds inside [{low:g}, {high:g}]")
        params[name] = prior
    if not stored:
        _accept_ref_within_a_step(raw, path, method, ints["block"], ints["reference_budget"],
                                  params["accept_ref"], methods)
    return AcceptanceCurve(path=path, method=method, block=ints["block"],
                           reference_budget=ints["reference_budget"], measurement_sd=float(sd),
                           accept_ref=params["accept_ref"], gain=params["gain"],
                           decay=params["decay"],
                           model=target_model(section, path, f"{where}.model", stored=stored))


def _accept_ref_within_a_step(raw: dict, path: str, method: str, block: int,
                              reference_budget: int, prior: Prior,
                              methods: Callable[[], Mapping[str, MethodSpec] | None] | None = None
                              ) -> None:
    """Refuse an ``accept_ref`` prior reaching above what a step of ``method`` with ``block``
    at ``reference_budget`` can emit (core/methods ``max_accept``), as an ``[[acceptance]]``
    entry's is refused: a TruncNormal(30, 2.4, 1, 40) at a block-16 DDTree's budget 16 made
    optimize answer every budget at the cap, 16.0 (16.0-16.0), P(best) 1.00."""
    from ddtree_bayes.core.methods import load_methods, max_accept

    declared = None
    if isinstance(raw.get("methods"), dict):
        declared = methods() if methods is not None else None
        if declared is None:
            declared = load_methods("", path, tables=raw)
    max_accept(method, block, reference_budget, declared or None).refuse_prior_above(
        prior.params, path, "acceptance_curve.accept_ref")

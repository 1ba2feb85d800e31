"""Acceptance as a function of the tree budget, from the ``[acceptance_curve]`` priors::

    accept(B) = min(max_accept(B), accept_ref + gain * (1 - decay**d) / (1 - decay))
    d = log2(B / reference_budget)

``max_accept(B)``: the most tokens a step of the curve's method and block at budget B can emit
(:func:`~ddtree_bayes.core.methods.max_accept`: block for DDTree, never above B + 1).

Its three parameters are drawn from their priors, or from their posterior given an
acceptance file (a conjugate Gaussian update, :func:`update_curve`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ddtree_bayes.core.acceptance_config import AcceptanceCurve
from ddtree_bayes.core.config import (
    Prior,
)
from ddtree_bayes.core.data import MAX_BLOCK, MAX_BUDGET, NotPlain, plain_float
from ddtree_bayes.core.errors import DataError, QueryError
from ddtree_bayes.core.methods import AcceptLimit, MethodSpec, max_accept
from ddtree_bayes.core.sampling import prior_sample

if TYPE_CHECKING:
    from ddtree_bayes.engine.posterior import Fit

# ------------------------------------------------------------------ priors and the curve
sample_prior = prior_sample  # one sampler for every prior of the priors file


def doublings(budgets, reference_budget: float, decay) -> np.ndarray:
    """``(1 - decay**d) / (1 - decay)`` with ``d = log2(B / reference)``: the number of
    'first-doubling gains' budget B adds over the reference (``d`` itself when decay = 1).

    Shapes: ``budgets`` (nb,), ``decay`` (n,) -> (n, nb).

    >>> doublings([8, 16, 32, 64], 16, np.array([0.5, 1.0])).tolist()
    [[-2.0, 0.0, 1.0, 1.5], [-1.0, 0.0, 1.0, 2.0]]
    """
    d = np.log2(np.asarray(budgets, dtype=float) / reference_budget)[None, :]
    r = np.asarray(decay, dtype=float)[:, None]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ratio = -np.expm1(d * np.log(r)) / (1.0 - r)
    h = np.where(np.abs(1.0 - r) < 1e-9, d, ratio)
    return np.where(np.isfinite(h), h, -1e300)   # decay -> 0 below the reference: floor at 1


def curve_limits(curve: AcceptanceCurve, budgets, methods: Mapping[str, MethodSpec] | None = None
                 ) -> np.ndarray:
    """Per budget B, the most tokens a step of the curve's method and block can emit
    (:func:`~ddtree_bayes.core.methods.max_accept` with ``methods``, the fit's table, and
    M = B + 1).

    >>> from ddtree_bayes.core.paths import bundled
    >>> from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    >>> curve_limits(parse_acceptance_curve(bundled("priors.toml").read_text()), [4, 16, 64])
    array([ 5., 16., 16.])
    """
    return np.array([max_accept(curve.method, curve.block, int(b), methods, int(b) + 1).tokens
                     for b in budgets])


def curve_accept(budgets, accept_ref, gain, decay, *, reference_budget: float,
                 limits) -> np.ndarray:
    """Acceptance per draw and budget, (n, nb): the curve of :class:`AcceptanceCurve`,
    capped per budget at ``limits`` (what a step can emit, :func:`curve_limits`: block for
    a block-k DDTree, B + 1 for a B-node tree) and floored at 1.

    >>> a = curve_accept([8, 16, 32, 64, 1024], np.array([8.0]), np.array([1.0]),
    ...                  np.array([0.5]), reference_budget=16, limits=[9, 17, 17, 17, 17])
    >>> a.round(4).tolist()
    [[6.0, 8.0, 9.0, 9.5, 9.9688]]
    """
    budgets = np.asarray(budgets, dtype=float)
    h = doublings(budgets, reference_budget, decay)
    raw = np.asarray(accept_ref, float)[:, None] + np.asarray(gain, float)[:, None] * h
    raw = np.where(np.isfinite(raw), raw, 1.0)
    cap = np.asarray(limits, dtype=float)[None, :]
    return np.clip(raw, 1.0, cap)


@dataclass(frozen=True)
class CurveDraws:
    """Draws of the acceptance-curve parameters and where they came from."""

    accept_ref: np.ndarray
    gain: np.ndarray
    decay: np.ndarray
    source: str
    ess: float | None = None
    rows: int = 0
    #: draws of (accept_ref, gain) whose posterior given their decay lay (almost) wholly
    #: outside the prior's bounds: set to the clipped mean, not drawn
    clipped: int = 0

    def accept(self, budgets, curve: AcceptanceCurve,
               methods: Mapping[str, MethodSpec] | None = None) -> np.ndarray:
        """Acceptance per draw and budget, capped at what a step can emit (``methods``: the
        fit's methods table, :func:`curve_limits`)."""
        return curve_accept(budgets, self.accept_ref, self.gain, self.decay,
                            reference_budget=curve.reference_budget,
                            limits=curve_limits(curve, budgets, methods))


def sample_curve(curve: AcceptanceCurve, n: int, rng: np.random.Generator) -> CurveDraws:
    """``n`` joint draws of (accept_ref, gain, decay) from their (independent) priors."""
    return CurveDraws(sample_prior(curve.accept_ref, n, rng), sample_prior(curve.gain, n, rng),
                      sample_prior(curve.decay, n, rng), source=f"prior from {curve.path}")


@dataclass(frozen=True)
class AcceptanceRows:
    """The rows of an acceptance CSV read by :func:`read_acceptance_rows`: their budgets and
    accept_len, their one model, and their one drafter card (``drafter``, named in the
    optional drafter column, and the first row naming it, ``drafter_row``; None: blank, the
    target's default drafter)."""

    budgets: np.ndarray
    values: np.ndarray
    model: str
    drafter: str | None = None
    drafter_row: int | None = None


def read_acceptance_file(path: str | Path, method: str, block: int,
                         limit: Callable[[str, int, int], AcceptLimit] | None = None
                         ) -> tuple[np.ndarray, np.ndarray, str]:
    """(budgets, accept_len, model) of the rows of an acceptance CSV (the schema of
    data/acceptance_reference.csv) with this method and block (:func:`read_acceptance_rows`,
    whose drafter this leaves out)."""
    rows = read_acceptance_rows(path, method, block, limit)
    return rows.budgets, rows.values, rows.model


def read_acceptance_rows(path: str | Path, method: str, block: int,
                         limit: Callable[[str, int, int], AcceptLimit] | None = None
                         ) -> AcceptanceRows:
    """The rows of an acceptance CSV (the schema of data/acceptance_reference.csv) with this
    method and block. One model and one drafter only (the optional drafter column: blank is
    the target's default drafter). Every row of the file is checked, the ones of other
    methods and blocks too (a file with a row no drafter can reach is bad input wherever the
    row is): ``limit(method, block, budget)`` is what a step of that configuration can emit
    (:func:`~ddtree_bayes.core.methods.max_accept`); a row above it is refused, as
    ``predict --accept`` refuses it."""
    from ddtree_bayes.core import per_call

    path = str(path)
    try:
        with per_call.open_text(path) as fh:   # (the bytes the CLI's check read: once)
            reader = csv.DictReader(fh)   # (rows numbered by the line each record ends on)
            lines = [(rec, reader.line_num) for rec in reader]
            header = reader.fieldnames or []
    except OSError as err:
        raise DataError(f"cannot read acceptance file: {err.strerror}", file=path,
                        fix="pass an existing CSV with --acceptance-file") from None
    for column in ("model", "method", "block", "budget", "accept_len"):
        if column not in header:
            raise DataError("missing column", file=path, column=column,
                            fix="use the columns of data/acceptance_reference.csv")
    budgets, values, models = [], [], set()
    # (the optional drafter column: one curve is one drafter's; blank is the target's default
    # drafter, not "unsaid": the first row of each)
    drafters: dict[str, int] = {}
    seen: dict[tuple, int] = {}
    for rec, i in lines:
        if not (rec["method"] or "").strip():   # (skipped before: a row of no curve at all)
            raise DataError("the method is blank", file=path, row=i, column="method",
                            fix="name the row's speculative method, e.g. ddtree, as in "
                                "data/acceptance_reference.csv")
        numbers = {}
        for column in ("block", "budget", "accept_len"):
            try:
                numbers[column] = plain_float(rec[column] or "")
            except NotPlain:
                raise DataError(f"{rec[column]!r} is not a plain number", file=path, row=i,
                                column=column, fix="write it with the digits 0-9, a point and "
                                                   "an exponent only") from None
            except ValueError:
                raise DataError(f"{rec[column]!r} is not a number", file=path, row=i,
                                column=column, fix="give a number") from None
            if not math.isfinite(numbers[column]):   # ('inf', or '1e400' read as inf)
                raise DataError(f"{rec[column]!r} is not a finite number", file=path, row=i,
                                column=column, fix="give a finite number, at least 1")
            if numbers[column] < 1:
                raise DataError(f"{rec[column]!r} must be >= 1", file=path, row=i,
                                column=column, fix="give a positive number")
            if column != "accept_len" and not numbers[column].is_integer():
                raise DataError(f"{rec[column]!r} is not a whole number", file=path, row=i,
                                column=column, fix=f"a {column} counts tokens: give a whole number")
            most = {"block": MAX_BLOCK, "budget": MAX_BUDGET}.get(column)
            if most is not None and numbers[column] > most:   # (as every other input)
                raise DataError(f"{column} must be 1 to {most}, got {rec[column]}", file=path,
                                row=i, column=column, fix="write a positive whole number")
        key = tuple((v or "").strip() for k, v in rec.items() if k is not None)
        if key in seen:   # a copied row would count as a second measurement
            raise DataError(f"repeats row {seen[key]} in every column", file=path, row=i,
                            fix="remove the copy, or say in its source or notes what differs "
                                "(another dataset, run or drafter is another measurement)")
        seen[key] = i
        row_method = (rec["method"] or "").strip()
        cap = None if limit is None else limit(row_method, int(numbers["block"]),
                                               int(numbers["budget"]))
        if cap is not None and not cap.admits(numbers["accept_len"]):
            raise DataError(cap.refusal(f"accept_len {numbers['accept_len']:g}"), file=path,
                            row=i, column="accept_len", fix=cap.fix("an accept_len"))
        if row_method != method or numbers["block"] != block:
            continue
        budgets.append(numbers["budget"])
        values.append(numbers["accept_len"])
        models.add((rec["model"] or "").strip())
        drafters.setdefault((rec.get("drafter") or "").strip(), i)
    if not budgets:
        raise QueryError(f"{path} has no {method} rows with block {block}",
                         fix=f"add rows with method {method} and block {block}, or change --block")
    if len(models) > 1:
        raise QueryError(f"{path} has {method} block-{block} rows of several models "
                         f"({', '.join(sorted(models))})", fix="keep the rows of one target model")
    named = sorted(set(drafters) - {""})
    if len(named) > 1:
        raise QueryError(f"{path} has {method} block-{block} rows of several drafters "
                         f"({', '.join(named)})",
                         fix="keep the rows of one drafter")
    if named and "" in drafters:
        # a blank drafter is the target's default drafter: two drafters' acceptances, which
        # one curve would average into one that neither drafter has
        row = max(drafters.values())
        raise DataError(f"{method} block-{block} rows of a blank drafter (the target's default "
                        f"drafter; row {drafters['']}) and of {named[0]} (row "
                        f"{drafters[named[0]]}): one curve would mix two drafters' acceptances",
                        file=path, row=row, column="drafter",
                        fix="keep the rows of one drafter (blank in every row: the default "
                            "drafter; its name in every row: that drafter)")
    return AcceptanceRows(np.array(budgets), np.array(values), models.pop(),
                          named[0] if named else None, drafters[named[0]] if named else None)


def _gaussian(prior: Prior) -> tuple[float, float, float, float]:
    """(mean, sd, lower, upper) of a normal, truncnormal or point prior (conjugate update)."""
    p = prior.params
    if prior.dist == "point":
        return p["value"], 0.0, -math.inf, math.inf
    if prior.dist in ("normal", "truncnormal"):
        return p["mu"], p["sigma"], p.get("lower", -math.inf), p.get("upper", math.inf)
    raise QueryError(f"--acceptance-file needs a normal, truncnormal or point prior on "
                     f"{prior.name}, not {prior.dist}",
                     fix=f"change [acceptance_curve.{prior.name}] in the priors file")


def update_curve(curve: AcceptanceCurve, budgets: np.ndarray, accept: np.ndarray, n: int,
                 rng: np.random.Generator, source: str = "acceptance file") -> CurveDraws:
    """Posterior draws of the curve given acceptance measurements.

    Observation model: ``accept_i = accept_ref + gain * doublings(B_i, decay) + e_i``,
    ``e_i ~ Normal(0, measurement_sd)`` (the cap and floor of the curve are ignored here).
    Given ``decay`` this is linear in (accept_ref, gain), so their (normal or truncated
    normal) priors update conjugately; ``decay`` is drawn from its prior and reweighted by
    the marginal likelihood of the data (resampled), then (accept_ref, gain) are drawn from
    their bivariate normal posterior given each decay draw, truncated to their prior bounds
    by rejection. The truncation's effect on the decay weights is ignored.
    """
    m_a, s_a, lo_a, hi_a = _gaussian(curve.accept_ref)
    m_g, s_g, lo_g, hi_g = _gaussian(curve.gain)
    decay = sample_prior(curve.decay, n, rng)
    X1 = doublings(budgets, curve.reference_budget, decay)          # (n, m)
    X = np.stack([np.ones_like(X1), X1], axis=2)                     # (n, m, 2)
    m0 = np.array([m_a, m_g])
    S0 = np.diag([s_a ** 2, s_g ** 2])
    k = len(budgets)
    C = X @ S0 @ X.transpose(0, 2, 1) + curve.measurement_sd ** 2 * np.eye(k)   # (n, m, m)
    resid = accept[None, :] - X @ m0                                             # (n, m)
    sol = np.linalg.solve(C, resid[..., None])[..., 0]
    _, logdet = np.linalg.slogdet(C)
    loglik = -0.5 * (np.sum(resid * sol, axis=1) + logdet)
    w = np.exp(loglik - loglik.max())
    w /= w.sum()
    ess = float(1.0 / np.sum(w ** 2))
    idx = rng.choice(n, size=n, p=w)
    Xi, Ci, soli = X[idx], C[idx], sol[idx]
    gain_k = S0 @ Xi.transpose(0, 2, 1)                                          # (n, 2, m)
    mean = m0 + (gain_k @ soli[..., None])[..., 0]
    cov = S0 - gain_k @ np.linalg.solve(Ci, Xi @ S0)
    cov = 0.5 * (cov + cov.transpose(0, 2, 1)) + 1e-12 * np.eye(2)
    chol = np.linalg.cholesky(cov)
    out = np.empty((n, 2))
    todo = np.arange(n)
    for _ in range(200):
        z = rng.standard_normal((todo.size, 2))
        x = mean[todo] + (chol[todo] @ z[..., None])[..., 0]
        ok = (x[:, 0] >= lo_a) & (x[:, 0] <= hi_a) & (x[:, 1] >= lo_g) & (x[:, 1] <= hi_g)
        out[todo[ok]] = x[ok]
        todo = todo[~ok]
        if todo.size == 0:
            break
    if todo.size:
        out[todo] = np.clip(mean[todo], [lo_a, lo_g], [hi_a, hi_g])
    return CurveDraws(out[:, 0], out[:, 1], decay[idx], source=source, ess=ess, rows=k,
                      clipped=int(todo.size))


def misfit_warning(cd: CurveDraws, path: str, min_ess: float) -> str | None:
    """What says that an acceptance file's posterior could not be drawn (``None``: it was):
    more than 1% of the draws clipped to the prior's bounds (:func:`update_curve`), or fewer
    than ``min_ess`` effective draws of decay. Its intervals and P(best) would read as
    certain."""
    n = cd.decay.size
    why = ([f"{cd.clipped} of {n} draws of accept_ref and gain fell outside their prior bounds "
            "and were set to the nearest bound"] if cd.clipped > 0.01 * n else [])
    if cd.ess is not None and cd.ess < min_ess:
        why.append(f"{cd.ess:.0f} effective draws of decay of {n}")
    if not why:
        return None
    return (f"--acceptance-file {path}: its rows do not fit the curve ({', '.join(why)}): the "
            "acceptance intervals and P(best) below are narrower than the rows support; check "
            "the rows (a bigger tree never accepts less, and accept_len counts the bonus token)")


def curve_for(priors_text: str, path: str, draws: Fit | None = None) -> AcceptanceCurve:
    """The ``[acceptance_curve]`` of a priors file, or a QueryError saying how to add one.
    ``draws``: a fit whose stored priors, when they are this text, give its ``[methods]``
    table to the curve's check (:func:`_fits_methods`), not parsed a second time."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve

    curve = parse_acceptance_curve(priors_text, path,
                                   methods=None if draws is None else _fits_methods(draws,
                                                                                    priors_text))
    if curve is None:
        raise QueryError(f"{path} has no [acceptance_curve] section",
                         fix="copy it from the bundled models/priors.toml, or pass --priors")
    return curve


def _answers(curve: AcceptanceCurve) -> tuple:
    """What of a curve its answers read: not its path, nor its priors' rationale and source."""
    return (curve.model, curve.method, curve.block, curve.reference_budget, curve.measurement_sd,
            *((p.dist, p.params) for p in (curve.accept_ref, curve.gain, curve.decay)))


def curve_priors_file(draws: Fit, priors_path: str | Path | None = None) -> Path:
    """The priors file whose ``[acceptance_curve]`` ``optimize`` and the report's budget
    section ask: ``priors_path`` (``--priors``), else the file the fit was made with (its
    ``meta["priors"]["path"]``, the one ``check_fit`` compares) while it exists, else
    ``models/priors.toml`` here, else the bundled priors. (After ``fit --priors custom.toml``
    both answer from custom.toml's curve unless told otherwise.)"""
    from ddtree_bayes.core import paths

    if priors_path is not None:
        return Path(priors_path)
    made_with = draws.meta.get("priors", {}).get("path")
    if made_with and Path(made_with).is_file():
        return Path(made_with)
    return paths.priors_file()


def _fits_methods(draws: Fit, text: str):
    """What gives a priors ``text``'s ``[methods]`` table from the fit ``draws``: its own
    (:attr:`Fit.methods`) when it stores that text, else None (the caller parses it). A stored
    copy that does not parse gives None too, so the file's own parse says what is wrong, as it
    said it before: one text, one ``[methods]`` table (``optimize`` and ``report`` built it
    from the fit's stored priors and again for the priors file's ``[acceptance_curve]``)."""
    from ddtree_bayes.core.errors import StoredTextError

    def known():
        if text != draws.priors_toml:
            return None
        try:
            return draws.methods
        except StoredTextError:
            return None

    return known


def read_curve(path: str | Path, draws: Fit | None = None) -> AcceptanceCurve:
    """The ``[acceptance_curve]`` of the priors file ``path`` (``--priors``): PriorsError when
    the file cannot be read, QueryError when it has no curve. ``draws``: as
    :func:`curve_for` takes it."""
    from ddtree_bayes.core import paths, per_call
    from ddtree_bayes.core.errors import PriorsError

    try:
        text = per_call.read_text(path)
    except OSError as err:
        raise PriorsError(f"cannot read priors file: {err.strerror}", file=str(path),
                          fix="pass an existing file with --priors") from None
    return curve_for(text, paths.shown(path), draws)


def acceptance_curve_for(draws: Fit, priors_path: str | Path | None = None
                         ) -> tuple[AcceptanceCurve, list[str]]:
    """The acceptance curve ``optimize`` and the report's budget section ask, and what to warn
    of it. The curve is not fitted (fit and predict ignore it; editing it needs no refit): it is
    the ``[acceptance_curve]`` of the priors file :func:`curve_priors_file` names
    (``priors_path``, ``--priors``; else the fit's own file while it exists; else the working
    directory's). The warning says when it differs from the curve the fit stored, naming the
    one used (``check_fit`` ignores the section, so nothing else says it). PriorsError when the
    file cannot be read, QueryError when it has no curve."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve

    curve = read_curve(curve_priors_file(draws, priors_path), draws)
    stored = parse_acceptance_curve(draws.priors_toml, "priors stored in the fit", stored=True,
                                    tables=draws.priors_tables)
    if stored is not None and _answers(stored) == _answers(curve):
        return curve, []
    was = "none" if stored is None else stored.describe()
    return curve, [f"the acceptance curve ([acceptance_curve] in {curve.path}) differs from "
                   f"the one fit {draws.meta['fit_id']} stored ({was}): this answer uses "
                   f"{curve.path}'s (the curve is not fitted: editing it needs no refit)"]

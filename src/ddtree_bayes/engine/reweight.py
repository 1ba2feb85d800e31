"""The likelihood of measurements under stored posterior draws, in numpy, and the importance
ratios that turn a fit's posterior into the posterior of more data.

A row's log-likelihood is ``log N(log tok_s | mu, sigma)`` with the model's own ``mu`` and
``sigma`` (``engine/model.py``): ``mu = log(accept * 1000 / step_ms)`` with the step from
:func:`~ddtree_bayes.engine.predictive.step_components` (the predict path, the same
``core.spec`` arithmetic the PyMC model is built from) and ``sigma`` from
:func:`~ddtree_bayes.engine.measured.measurement_log_sd` (the noise, plus the structured
form's discrepancy for the row's distance from the other configurations measured on its
system). tests/test_reweight_model.py checks both against the PyMC model's log density to
1e-9, in the default and the roofline/structured forms.

If the model of the new data has the same parameters and priors as the fit's (same systems,
overhead groups, relations, model card ...: :mod:`ddtree_bayes.workflows.living.reweight`
checks), the new posterior is the fit's times ``exp(log_ratios)``: the new rows' likelihood,
and for a kept row whose likelihood changed its new likelihood over its old one (in the
structured form: a new configuration moved its distance, so its ``sigma``; or its group's
drafter passes or tree nodes now vary, so the group's own ratio replaces the population's,
:func:`restructured`). numpy only: no PyMC (the predict path).
"""

from __future__ import annotations

import math

import numpy as np

from ddtree_bayes.core.data import Measurements
from ddtree_bayes.engine.measured import measurement_log_sd
from ddtree_bayes.engine.predictive import resolve_scenario, step_components
from ddtree_bayes.engine.store import Draws

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def log_mu(draws: Draws, measurements: Measurements, which: list[int]) -> np.ndarray:
    """(draws, len(which)) modelled log tok/s (the likelihood's mean) of rows ``which``
    (indices into ``measurements.rows``)."""
    rng = np.random.default_rng(0)   # only unmeasured groups/systems draw; never reweighted
    cols = []
    for i in which:
        m = measurements.rows[i]
        sc = resolve_scenario(draws, hardware=m.hardware, gpus=m.gpus, engine=m.engine,
                              method=m.method, block=m.block, budget=m.budget,
                              verify_tokens=m.verify_tokens, context_tokens=m.context_tokens)
        parts, _ = step_components(draws, sc, rng)
        cols.append(np.log(m.accept_len * 1000.0) - np.log(parts["step"]))
    return np.stack(cols, axis=1) if cols else np.zeros((draws.n_draws, 0))


def normal_logpdf(y: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    z = (y - mu) / sigma
    return -0.5 * z * z - np.log(sigma) - LOG_SQRT_2PI


def log_likelihood(draws: Draws, measurements: Measurements, which: list[int] | None = None,
                   sd: np.ndarray | None = None) -> np.ndarray:
    """(draws, rows) pointwise log-likelihood of rows ``which`` (default: all) of
    ``measurements`` under ``draws``; ``sd`` is :func:`measurement_log_sd` of the whole
    ``measurements`` if already computed."""
    which = list(range(len(measurements.rows))) if which is None else list(which)
    if sd is None:
        sd = measurement_log_sd(draws, measurements)
    y = np.log(np.array([measurements.rows[i].tok_s for i in which], dtype=float))
    return normal_logpdf(y[None, :], log_mu(draws, measurements, which), sd[:, which])


def group_log_ratio(draws: Draws, part: str) -> np.ndarray | None:
    """(draws, groups) each overhead group's own log per-``part`` ratio in the structured
    form (centred ``spec_<part>_log`` or ``mu + sd * spec_<part>_z``), None if not stored."""
    v = draws.variables
    if f"spec_{part}_log" in v:
        return v[f"spec_{part}_log"]
    if f"spec_{part}_z" in v:
        return (v[f"spec_{part}_log_mu"][:, None]
                + v[f"spec_{part}_log_sd"][:, None] * v[f"spec_{part}_z"])
    return None


def restructured(draws: Draws, model: dict, data_csv: str
                 ) -> tuple[Draws, dict[str, np.ndarray], list[str]]:
    """The same parameter draws under the model of other data: ``model`` is that data's
    ``meta["model"]`` (same parameters and coordinates), ``data_csv`` its text.

    In the structured form a group whose drafter passes (tree nodes) did not vary in the
    fit's data uses the population's per-pass (per-node) ratio, ``exp(mu)``; once the new
    data varies them, its own, ``exp(log ratio of the group)`` (engine/model.py). The
    deterministic ``spec_<part>_ratio`` of those groups is recomputed from the draws' free
    parameters. Returns (the view, the recomputed variables, the groups that changed)."""
    old = draws.meta["model"].get("group_varies")
    new = model.get("group_varies")
    groups = draws.meta["coords"]["overhead_group"]
    replaced: dict[str, np.ndarray] = {}
    flipped: set[str] = set()
    if old != new:
        if old is None or new is None:
            raise ValueError("the structured form's group_varies cannot appear or vanish")
        for part in ("pass", "tree"):
            flips = [g for g in range(len(groups)) if bool(old[part][g]) != bool(new[part][g])]
            if not flips:
                continue
            log_ratio = group_log_ratio(draws, part)
            if log_ratio is None or any(not new[part][g] for g in flips):
                raise ValueError(f"cannot recompute spec_{part}_ratio for {flips}")
            ratio = np.array(draws.variables[f"spec_{part}_ratio"], dtype=float, copy=True)
            ratio[:, flips] = np.exp(log_ratio[:, flips])
            replaced[f"spec_{part}_ratio"] = ratio
            flipped.update(groups[g] for g in flips)
    meta = {k: v for k, v in draws.meta.items() if not k.startswith("_")}
    view = Draws(path=draws.path, meta={**meta, "model": model},
                 variables={**draws.variables, **replaced}, data_csv=data_csv,
                 priors_toml=draws.priors_toml, hardware_csv=draws.hardware_csv)
    return view, replaced, sorted(flipped)


def _group_of(model: dict, m) -> str | None:
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.data import AR_METHOD

    if m.method == AR_METHOD:
        return None
    return S.group_label(m.system, model["relation_bases"].get(m.engine, m.engine), m.method)


def log_ratios(draws: Draws, old: Measurements, new: Measurements, added: list[int],
               kept: list[tuple[int, int]], target: Draws | None = None
               ) -> tuple[np.ndarray, list[int]]:
    """Per draw, log p(new data | theta) - log p(old data | theta).

    ``draws`` carries the old data's model, ``target`` (default: the same) the new data's
    (:func:`restructured`). ``added`` indexes the rows of ``new`` that ``old`` lacks;
    ``kept`` pairs each row of ``old`` with its equal in ``new`` (``(old index, new
    index)``); every row of ``old`` must be kept. Returns the log ratios and the kept rows
    (indices into ``new``) whose likelihood changed (their sd, or their group's structure),
    i.e. contributed a new-over-old term."""
    if len(kept) != len(old.rows):
        raise ValueError("every row of the old data must be kept to reweight")
    target = draws if target is None else target
    sd_new = measurement_log_sd(target, new)
    total = log_likelihood(target, new, added, sd_new).sum(axis=1)
    sd_old = measurement_log_sd(draws, old)
    moved = {g for part in ("pass", "tree") for g, (a, b) in enumerate(zip(
        (draws.meta["model"].get("group_varies") or {}).get(part, []),
        (target.meta["model"].get("group_varies") or {}).get(part, []), strict=True)) if a != b}
    moved_labels = {draws.meta["coords"]["overhead_group"][g] for g in moved}
    changed = [(i, j) for i, j in kept
               if _group_of(target.meta["model"], new.rows[j]) in moved_labels
               or not np.array_equal(sd_old[:, i], sd_new[:, j])]
    if changed:
        total = total + log_likelihood(target, new, [j for _, j in changed], sd_new).sum(axis=1)
        total = total - log_likelihood(draws, old, [i for i, _ in changed], sd_old).sum(axis=1)
    return total, sorted(j for _, j in changed)

"""The likelihood of measurements under stored posterior draws, in numpy, and the importance
ratios that turn a fit's posterior into the posterior of more data.

A row's log-likelihood is ``log N(log tok_s | mu, sigma)`` with the model's own ``mu`` and
``sigma`` (``engine/model.py``): ``mu = log(accept * 1000 / step_ms)`` with the step from
:func:`~ddtree_bayes.engine.predictive.step_components` (the predict path, the same
``core.spec`` arithmetic the PyMC model is built from) and ``sigma`` from
:func:`~ddtree_bayes.engine.structure.measurement_log_sd` (the noise, plus the structured
form's discrepancy for the row's distance from the other configurations measured on its
system). tests/test_reweight_model.py checks both against the PyMC model's log density to
1e-9, in the default and the roofline/structured forms.

If the model of the new data has the same parameters and priors as the fit's (same systems,
overhead groups, relations, model card ...: :mod:`ddtree_bayes.workflows.living.reweight`
checks), the new posterior is the fit's times ``exp(log_ratios)``: the new rows' likelihood,
and for a kept row whose ``sigma`` changed (a new configuration moved its distance in the
structured form) its new likelihood over its old one. numpy only: no PyMC (the predict path).
"""

from __future__ import annotations

import math

import numpy as np

from ddtree_bayes.core.data import Measurements
from ddtree_bayes.engine.predictive import resolve_scenario, step_components
from ddtree_bayes.engine.store import Draws
from ddtree_bayes.engine.structure import measurement_log_sd

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


def log_ratios(draws: Draws, old: Measurements, new: Measurements, added: list[int],
               kept: list[tuple[int, int]]) -> tuple[np.ndarray, list[int]]:
    """Per draw, log p(new data | theta) - log p(old data | theta).

    ``added`` indexes the rows of ``new`` that ``old`` lacks; ``kept`` pairs each row of
    ``old`` with its equal in ``new`` (``(old index, new index)``); every row of ``old`` must
    be kept. Returns the log ratios and the kept rows (indices into ``new``) whose likelihood
    sd changed, i.e. contributed a new-over-old term."""
    if len(kept) != len(old.rows):
        raise ValueError("every row of the old data must be kept to reweight")
    sd_new = measurement_log_sd(draws, new)
    total = log_likelihood(draws, new, added, sd_new).sum(axis=1)
    sd_old = measurement_log_sd(draws, old)
    changed = [(i, j) for i, j in kept if not np.array_equal(sd_old[:, i], sd_new[:, j])]
    if changed:
        total = total + log_likelihood(draws, new, [j for _, j in changed], sd_new).sum(axis=1)
        total = total - log_likelihood(draws, old, [i for i, _ in changed], sd_old).sum(axis=1)
    return total, sorted(j for _, j in changed)

"""The fit's own measurements under its posterior, evaluated once per configuration.

The rows of one configuration (:mod:`ddtree_bayes.core.likelihood`) share the modelled step and
the likelihood's sd; row i's modelled log tok/s is ``log(accept_i * 1000) - log step_c``. So
the step is computed once per configuration ((draws, configurations) arrays) and rows are
mapped onto it: 100,000 repeated runs of 9 configurations cost 9 step evaluations, and no
(draws, rows) array is built unless a caller asks for one (small data only).

PSIS-LOO's pointwise unit (:func:`loo_unit`): one row while the data have at most
:data:`LOO_ROW_LIMIT` rows, else one configuration (all its repeated runs; the joint
log-likelihood of its rows, from their sufficient statistics), since a (draws, rows)
log-likelihood would take draws x rows x 8 bytes (3.2 GB for 4000 draws of 100,000 rows).
The two coincide when no configuration is repeated. numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core.config import DEFAULT_SEED
from ddtree_bayes.core.data import Measurements
from ddtree_bayes.engine.posterior import Fit, blank_context
from ddtree_bayes.engine.scenario import row_scenario
from ddtree_bayes.engine.structure import draft_structure
from ddtree_bayes.engine.target_models import row_pair

#: Above this many rows PSIS-LOO leaves out configurations instead of rows.
LOO_ROW_LIMIT = 2000


@dataclass(frozen=True)
class Moments:
    """Per configuration, the likelihood's mean and sd of ``z = log tok_s - log(accept*1000)``
    under every posterior draw, with the rows mapped to their configuration."""

    measurements: Measurements
    row_config: np.ndarray     # per row
    first: np.ndarray          # per configuration: position of its first row
    offset: np.ndarray         # per row: log(accept_len * 1000) (log 1000: inferred acceptance)
    log_tok_s: np.ndarray      # per row
    mean: np.ndarray           # (draws, configurations): -log step (+ log accept_latent)
    run: np.ndarray            # (draws, 1): run-to-run sd
    between: np.ndarray        # (draws, configurations): the configuration's own error sd
    nu: float | None = None    # the likelihood's Student-t degrees of freedom (None: normal)

    @property
    def sd(self) -> np.ndarray:
        """(draws, configurations) sd of one run's log tok/s."""
        return np.sqrt(self.run ** 2 + self.between ** 2)

    @property
    def repeated(self) -> bool:
        """Whether some configuration has several rows (their errors are not independent)."""
        return len(self.first) < len(self.row_config)

    @property
    def z(self) -> np.ndarray:
        return self.log_tok_s - self.offset

    def stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(n, zbar, S2) of every configuration's rows."""
        return C.sufficient_stats(self.row_config, self.z, len(self.first))

    def row_log_mu(self) -> np.ndarray:
        """(draws, rows) modelled log tok/s (small data only: draws x rows floats)."""
        return self.offset[None, :] + self.mean[:, self.row_config]


def moments(draws: Fit, seed: int = DEFAULT_SEED,
            measurements: Measurements | None = None) -> Moments:
    """The step of every measured configuration under every draw (one
    :func:`~ddtree_bayes.engine.predictive.step_draws` call per configuration, in the order of
    their first rows, with one generator), and the likelihood's sd: the run-to-run noise, plus
    in the structured form the discrepancy for the configuration's distance from the other
    configurations measured on its system (as the model's likelihood has it). A configuration
    of rows without accept_len adds each draw's log inferred acceptance to its mean."""
    from ddtree_bayes.engine.predictive import step_draws
    from ddtree_bayes.engine.scenario import row_acceptance

    measurements = draws.measurements if measurements is None else measurements
    rows = measurements.rows
    row_config, first = C.group_rows(rows)
    rng = np.random.default_rng(seed)
    cols = []
    for i in first:
        m = rows[i]
        sc = row_scenario(draws, m)
        step, _ = step_draws(draws, sc, rng, anchor=False)   # the likelihood's mean
        # (the offsets hold log(accept x 1000 x C): a row at C > 1 measures the C streams)
        if m.accept_len is None:   # its rows' offset is log 1000 (core/configs.offsets)
            cols.append(np.log(row_acceptance(draws, m, rng)) - np.log(step))
        else:
            cols.append(-np.log(step))
    mean = np.stack(cols, axis=1)
    log_tok = np.log(np.fromiter((r.tok_s for r in rows), float, len(rows)))
    return Moments(measurements, row_config, first, C.offsets(rows), log_tok, mean,
                   *config_sds(draws, measurements, first), C.likelihood_nu(draws.variables))


def config_sds(draws: Fit, measurements: Measurements, first: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """(run-to-run sd (draws, 1), a configuration's own error sd (draws, configurations)):
    the two sds of :func:`ddtree_bayes.core.likelihood.grouped_logp`. The second is the
    structured form's discrepancy for the configuration's distance from the other
    configurations measured on its system and, with repeated runs, ``config_sd``."""
    run, own = C.scatter_parts(draws.variables)
    noise = np.asarray(run)[:, None]
    between = np.zeros((draws.n_draws, len(first))) + np.asarray(own)[..., None] ** 2
    if "structure_sd" in draws.variables:
        between = between + (draws.variables["structure_sd"][:, None]
                             * _distances(draws, measurements, first)[None, :]) ** 2
    return noise, np.sqrt(between)


def config_log_sd(draws: Fit, measurements: Measurements, first: np.ndarray) -> np.ndarray:
    """(draws, configurations) sd of one run's log tok/s (see :func:`moments`): the run-to-run
    noise and the configuration's own error (:func:`config_sds`) together."""
    noise, between = config_sds(draws, measurements, first)
    return np.sqrt(noise ** 2 + between ** 2)


def _distances(draws: Fit, measurements: Measurements, first: np.ndarray) -> np.ndarray:
    """Each configuration's distance from the nearest other one measured on its system."""
    model = draws.meta["model"]
    reps = [measurements.rows[i] for i in first]
    systems = sorted({row_pair(draws, r) for r in reps})   # pairs, with several models
    system = np.array([systems.index(row_pair(draws, r)) for r in reps])
    passes = np.array([draft_structure(model, r.method, r.block, r.budget)[0] for r in reps])
    batch = np.array([r.verify_tokens * r.concurrency for r in reps], dtype=float)
    return C.config_distances(system, batch, passes)


def measurement_log_mu(draws: Fit, seed: int = DEFAULT_SEED):
    """(measurements, (draws, rows)) modelled log tok/s of every measured row, without
    measurement noise: the mean of the likelihood (small data: a (draws, rows) array)."""
    mo = moments(draws, seed)
    return mo.measurements, mo.row_log_mu()


def measurement_log_sd(draws: Fit, measurements: Measurements) -> np.ndarray:
    """(draws, rows) likelihood sd of each measured row's log tok/s (small data)."""
    row_config, first = C.group_rows(measurements.rows)
    return config_log_sd(draws, measurements, first)[:, row_config]


def simulate_log_tok_s(draws: Fit, measurements: Measurements, log_mu: np.ndarray,
                       rng: np.random.Generator, repeated: bool = False) -> np.ndarray:
    """Simulated log tok/s of every row under the first draw, about its modelled ``log_mu``
    (rows,): with ``repeated`` one error per configuration (its own sd, shared by its runs)
    plus one per run; else one per row with the likelihood's sd (the noise, plus the
    structured form's discrepancy)."""
    nu = C.likelihood_nu(draws.variables)
    if not repeated:
        return log_mu + measurement_log_sd(draws, measurements)[0] * C.standard_noise(
            rng, len(log_mu), nu)
    row_config, first = C.group_rows(measurements.rows)
    run, between = config_sds(draws, measurements, first)
    if nu is None:
        shared = between[0] * rng.standard_normal(len(first))
        return log_mu + shared[row_config] + run[0, 0] * rng.standard_normal(len(log_mu))
    # Student-t: the runs' mean deviates by sqrt(between^2 + run^2 / n) t_nu, and the runs
    # scatter about their mean as normal run-to-run noise (core/likelihood.config_logp)
    n = np.bincount(row_config, minlength=len(first)).astype(float)
    eps = run[0, 0] * rng.standard_normal(len(log_mu))
    eps = eps - (np.bincount(row_config, weights=eps, minlength=len(first)) / n)[row_config]
    shared = np.sqrt(between[0] ** 2 + run[0, 0] ** 2 / n) * rng.standard_t(nu, len(first))
    return log_mu + shared[row_config] + eps


def loo_unit(n_rows: int, repeated: bool = False) -> str:
    """``"row"`` or ``"configuration"``: what PSIS-LOO leaves out (see the module notes). Data
    with repeated runs leave out configurations: the runs of one share its own error, so
    one run's likelihood given the others is not its own density."""
    return "row" if n_rows <= LOO_ROW_LIMIT and not repeated else "configuration"


def data_loo_unit(measurements: Measurements) -> str:
    """:func:`loo_unit` of a fit's ``measurements``: what its PSIS-LOO leaves out, so what
    its Pareto k values are of, without the posterior (configurations: one dict lookup a
    row)."""
    rows = measurements.rows
    return loo_unit(len(rows), data_repeated(measurements))


def data_repeated(measurements: Measurements) -> bool:
    """Whether some configuration of ``measurements`` has several rows (repeated runs)."""
    rows = measurements.rows
    return len(C.group_rows(rows)[1]) < len(rows)


def loo_unit_reason(n_rows: int, repeated: bool = False) -> str | None:
    """Why PSIS-LOO leaves out configurations (:func:`loo_unit`, same arguments): more than
    :data:`LOO_ROW_LIMIT` rows, repeated runs, or both; None when it leaves out rows.

    >>> loo_unit_reason(9, True), loo_unit_reason(9)
    ('repeated runs of a configuration', None)
    """
    big = n_rows > LOO_ROW_LIMIT
    if big and repeated:
        return f"more than {LOO_ROW_LIMIT} rows, with repeated runs of a configuration"
    if repeated:
        return "repeated runs of a configuration"
    return f"more than {LOO_ROW_LIMIT} rows" if big else None


def pointwise(mo: Moments, rng: np.random.Generator, unit: str | None = None) -> dict:
    """The pointwise log-likelihood, posterior predictive draws and observed values of log
    tok/s, per row or per configuration (``unit``, default :func:`loo_unit`).

    Per configuration the log-likelihood is its rows' joint one and the predictive and
    observed values are of their mean log tok/s."""
    unit = unit or loo_unit(len(mo.row_config), mo.repeated)
    nu = mo.nu
    if unit == "row":
        log_mu = mo.row_log_mu()
        sd = mo.sd[:, mo.row_config]
        loglik = C.row_logp(mo.log_tok_s[None, :], log_mu, sd, nu)
        pp = log_mu + sd * C.standard_noise(rng, log_mu.shape, nu)
        labels = [str(r.row) for r in mo.measurements.rows]
        return {"unit": unit, "labels": labels, "loglik": loglik, "pp": pp,
                "observed": mo.log_tok_s}
    n, zbar, s2 = mo.stats()
    mean_offset = np.bincount(mo.row_config, weights=mo.offset) / n
    loglik = C.config_logp(mo.mean, mo.run, mo.between, n[None, :], zbar[None, :],
                           s2[None, :], nu, np.log)
    mean_sd = np.sqrt(mo.between ** 2 + mo.run ** 2 / n[None, :])   # of the runs' mean
    pp = mean_offset[None, :] + mo.mean + mean_sd * C.standard_noise(rng, mo.mean.shape, nu)
    labels = [str(mo.measurements.rows[i].row) for i in mo.first]
    return {"unit": unit, "labels": labels, "loglik": loglik, "pp": pp,
            "observed": zbar + mean_offset}


def check_measurements(draws: Fit, prob: float = 0.9, seed: int = DEFAULT_SEED) -> list[dict]:
    """Posterior predictive check: each measurement the fit used against its predictive
    median, 50% and ``prob`` intervals and its predictive percentile; ``configuration`` names
    the row's configuration by its first row (repeated runs share it).

    One predictive sample per configuration (its rows differ by a known factor, accept_len x
    1000): the quantiles of a row are its configuration's scaled, its percentile a binary
    search in the configuration's sorted draws; linear in the rows."""
    from ddtree_bayes.engine.predictive import interval_probs

    probs = interval_probs(prob)
    mo = moments(draws, seed)
    rng = np.random.default_rng(seed + 1)
    # tok/s per (accept_len x 1000) of a new run of each configuration
    per_unit = np.exp(mo.mean + mo.sd * C.standard_noise(rng, mo.mean.shape, mo.nu))
    qs = [0.5]
    for p in probs:
        qs += [(1 - p) / 2, (1 + p) / 2]
    quant = np.quantile(per_unit, qs, axis=0)               # (len(qs), configurations)
    ordered = np.sort(per_unit, axis=0)
    scale = np.exp(mo.offset)
    rows = mo.measurements.rows
    tok = np.exp(mo.log_tok_s)
    below = np.empty(len(rows))
    for c, idx in enumerate(C.rows_of(mo.row_config, len(mo.first))):
        below[idx] = np.searchsorted(ordered[:, c], tok[idx] / scale[idx], side="left")
    percentile = (below / draws.n_draws).tolist()
    default_ctx = blank_context(draws)
    names = ["median"] + [f"{side}{p * 100:g}" for p in probs for side in ("lo", "hi")]
    values = (scale[:, None] * quant[:, mo.row_config].T).tolist()      # (rows, quantiles)
    config_of = [rows[i].row for i in mo.first]
    out = []
    for m, c, vals, pct in zip(rows, mo.row_config.tolist(), values, percentile, strict=True):
        row = {"row": m.row, "configuration": config_of[c], "system": row_pair(draws, m),
               "engine": m.engine, "method": m.method, "verify_tokens": m.verify_tokens,
               "context_tokens": m.context(default_ctx),
               "concurrency": m.concurrency, "accept_len": m.accept_len, "measured": m.tok_s}
        row.update(zip(names, vals, strict=True))
        row["percentile"] = pct
        out.append(row)
    return out

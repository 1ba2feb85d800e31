"""The likelihood of measurements under stored posterior draws, in numpy, and the importance
ratios that turn a fit's posterior into the posterior of more data.

A row's log-likelihood is ``log N(log tok_s | mu, sigma)`` with the model's own ``mu`` and
``sigma`` (``engine/model.py``): ``mu = log(accept * 1000) - log step_ms`` with the step from
:func:`~ddtree_bayes.engine.predictive.step_components` (the predict path, the same
``core.spec`` arithmetic the PyMC model is built from) and ``sigma`` from
:func:`~ddtree_bayes.engine.fitted_rows.config_log_sd` (the noise, plus the structured form's
discrepancy for the configuration's distance from the other configurations measured on its
system). Rows of one configuration share the step and sigma (:mod:`ddtree_bayes.core.likelihood`),
so the step is computed once per configuration and a sum over rows uses their sufficient
statistics, as the model does. tests/test_reweight_model.py checks both against the PyMC
model's log density to 1e-9, in the power/fraction and the roofline/structured forms.

If the model of the new data has the same parameters and priors as the fit's (same systems,
overhead groups, relations, model card ...: :mod:`ddtree_bayes.workflows.living.reweight`
checks), the new posterior is the fit's times ``exp(log_ratios)``: the new rows' likelihood,
and for a kept row whose likelihood changed its new likelihood over its old one (in the
structured form: a new configuration moved its distance, so its ``sigma``; or its group's
drafter passes or tree nodes now vary, so the group's own ratio replaces the population's,
:func:`restructured`). numpy only: no PyMC (the predict path).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core.data import Measurements
from ddtree_bayes.engine.fitted_rows import config_sds
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.predictive import step_components
from ddtree_bayes.engine.scenario import row_scenario
from ddtree_bayes.engine.structure import row_group


@dataclass(frozen=True)
class Table:
    """A measurement file's rows grouped into configurations, with the likelihood's two sds
    under some draws: run-to-run ``run`` ((draws, 1)) and each configuration's own error
    ``between`` ((draws, configurations); :func:`ddtree_bayes.core.likelihood.grouped_logp`)."""

    measurements: Measurements
    row_config: np.ndarray
    first: np.ndarray
    run: np.ndarray
    between: np.ndarray

    @property
    def sd(self) -> np.ndarray:
        """(draws, configurations) sd of one run's log tok/s."""
        return np.sqrt(self.run ** 2 + self.between ** 2)

    def sd_of(self, c: int) -> np.ndarray:
        """(draws,) :attr:`sd` of configuration ``c`` alone (no draws x configurations array)."""
        return np.sqrt(self.run[:, 0] ** 2 + self.between[:, c] ** 2)


def table(draws: Fit, measurements: Measurements) -> Table:
    row_config, first = C.group_rows(measurements.rows)
    return Table(measurements, row_config, first, *config_sds(draws, measurements, first))


def config_log_step(draws: Fit, t: Table, configs: np.ndarray) -> np.ndarray:
    """(draws, len(configs)) ``-log step_ms`` of configurations ``configs`` of ``t``, plus each
    draw's log inferred acceptance for a configuration of rows without accept_len (their
    offset is ``log 1000``: core/likelihood.py), as in the model."""
    from ddtree_bayes.engine.scenario import row_acceptance

    rng = np.random.default_rng(0)   # only unmeasured groups/systems draw; never reweighted
    cols = []
    for c in configs:
        m = t.measurements.rows[t.first[c]]
        sc = row_scenario(draws, m)
        parts, _ = step_components(draws, sc, rng, anchor=False)   # the likelihood's mean
        latent = 0.0 if m.accept_len is not None else np.log(row_acceptance(draws, m, rng))
        cols.append(latent - np.log(parts["step"]))
    return np.stack(cols, axis=1) if cols else np.zeros((draws.n_draws, 0))


def log_likelihood(draws: Fit, measurements: Measurements, which: list[int] | None = None,
                   t: Table | None = None) -> np.ndarray:
    """(draws, len(which)) pointwise log-likelihood of rows ``which`` (default: all; small
    data: one column per row): each row's own density, its configuration's error integrated
    out (the joint density of repeated runs is not their product: :func:`summed_log_likelihood`)."""
    t = table(draws, measurements) if t is None else t
    idx = np.arange(len(measurements.rows)) if which is None else np.asarray(which, dtype=int)
    configs, local = np.unique(t.row_config[idx], return_inverse=True)
    mean = config_log_step(draws, t, configs)[:, local]
    rows = [measurements.rows[i] for i in idx]
    z = np.log(np.array([r.tok_s for r in rows], dtype=float)) - C.offsets(rows)
    sd = t.sd[:, configs][:, local]
    return C.row_logp(z[None, :], mean, sd, C.likelihood_nu(draws.variables))


def summed_log_likelihood(draws: Fit, t: Table, which) -> np.ndarray:
    """(draws,) the joint log-likelihood of rows ``which`` of ``t``'s data: per configuration
    from the rows' sufficient statistics (memory: draws x configurations). The rows of a
    configuration share its own error, so ``which`` should hold all of a configuration's rows
    or none (:func:`log_ratios` does)."""
    which = np.asarray(which, dtype=int)
    if which.size == 0:
        return np.zeros(draws.n_draws)
    configs, local = np.unique(t.row_config[which], return_inverse=True)
    rows = [t.measurements.rows[i] for i in which]
    z = np.log(np.array([r.tok_s for r in rows], dtype=float)) - C.offsets(rows)
    n, zbar, s2 = C.sufficient_stats(local, z, len(configs))
    mean = config_log_step(draws, t, configs)
    return C.config_logp(mean, t.run, t.between[:, configs], n, zbar, s2,
                         C.likelihood_nu(draws.variables), np.log).sum(axis=1)


def group_log_ratio(draws: Fit, part: str) -> np.ndarray | None:
    """(draws, groups) each overhead group's own log per-``part`` ratio in the structured
    form (``spec_<part>_log``, a deterministic of the non-centred ``_z`` or rung 3's centred
    variable, or ``mu + sd * spec_<part>_z`` for a learned spread), None if not stored."""
    v = draws.variables
    if f"spec_{part}_log" in v:
        return v[f"spec_{part}_log"]
    if f"spec_{part}_z" in v:
        mean = (v[f"spec_{part}_mean"] if f"spec_{part}_mean" in v    # (its group's mean)
                else v[f"spec_{part}_log_mu"][:, None])
        return mean + v[f"spec_{part}_log_sd"][:, None] * v[f"spec_{part}_z"]
    return None


def restructured(draws: Fit, model: dict, data_csv: str
                 ) -> tuple[Fit, dict[str, np.ndarray], list[str]]:
    """The same parameter draws under the model of other data: ``model`` is that data's
    ``meta["model"]`` (same parameters and coordinates), ``data_csv`` its text.

    In the structured form a group whose drafter passes (tree nodes) did not vary in the
    fit's data uses the population's per-pass (per-node) ratio, ``exp(mu)``; once the new
    data varies them, its own, ``exp(log ratio of the group)`` (engine/model.py). The
    deterministic ``spec_<part>_ratio`` of those groups is recomputed from the draws' own log
    ratios (:func:`group_log_ratio`). Returns (the view, the recomputed variables, the groups
    that changed)."""
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
    view = draws.view(meta={**draws.meta, "model": model},
                      variables={**draws.variables, **replaced}, data_csv=data_csv)
    return view, replaced, sorted(flipped)


def augmented(draws: Fit, rng: np.random.Generator) -> tuple[Fit, dict[str, np.ndarray]]:
    """``draws`` in the model of data that first repeat a configuration: (the view, the
    variables it adds).

    That model has one parameter more, ``config_share``: the share of one run's scatter
    (``noise_sd``, whose meaning and prior do not change) that is the configuration's own error
    (core/likelihood.py). Without repeats the likelihood does not depend on it, so the fit's
    posterior times its prior is the new model's posterior of the fit's data, exactly; each
    draw gets a share drawn from the prior and the deterministic ``run_sd`` and ``config_sd``
    it implies. A singleton's sd ``sqrt(run_sd^2 + config_sd^2)`` is its ``noise_sd``, so the
    importance ratios (:func:`log_ratios`) move only the repeated configurations: a
    re-measured configuration is absorbed without a refit."""
    if not draws.meta["model"].get("repeated_runs") or C.CONFIG_SHARE in draws.variables:
        return draws, {}
    from ddtree_bayes.core.sampling import prior_sample

    prior = draws.priors.priors[C.CONFIG_SHARE]
    share = prior_sample(prior, draws.n_draws, rng)
    noise = np.asarray(draws.variables["noise_sd"], dtype=float)
    extra = {C.CONFIG_SHARE: share, C.RUN_SD: noise * np.sqrt(1.0 - share),
             C.CONFIG_SD: noise * np.sqrt(share)}
    return draws.view(variables={**draws.variables, **extra}), extra


def log_ratios(draws: Fit, old: Measurements, new: Measurements, added: list[int],
               kept: list[tuple[int, int]], target: Fit | None = None
               ) -> tuple[np.ndarray, list[int]]:
    """Per draw, log p(new data | theta) - log p(old data | theta).

    ``draws`` carries the old data's model, ``target`` (default: the same) the new data's
    (:func:`restructured`). ``added`` indexes the rows of ``new`` that ``old`` lacks;
    ``kept`` pairs each row of ``old`` with its equal in ``new`` (``(old index, new
    index)``); every row of ``old`` must be kept. Returns the log ratios and the kept rows
    (indices into ``new``) whose likelihood changed (their sd, or their group's structure),
    i.e. contributed a new-over-old term. Linear in the rows; memory draws x configurations."""
    if len(kept) != len(old.rows):
        raise ValueError("every row of the old data must be kept to reweight")
    target = draws if target is None else target
    t_new, t_old = table(target, new), table(draws, old)
    varies = [(draws.meta["model"].get("group_varies") or {}).get(part, [])
              for part in ("pass", "tree")]
    varies_new = [(target.meta["model"].get("group_varies") or {}).get(part, [])
                  for part in ("pass", "tree")]
    groups = draws.meta["coords"]["overhead_group"]
    moved = {groups[g] for a, b in zip(varies, varies_new, strict=True)
             for g, (x, y) in enumerate(zip(a, b, strict=True)) if x != y}
    same_sd: dict[tuple[int, int], bool] = {}
    changed = []
    for i, j in kept:
        key = (int(t_old.row_config[i]), int(t_new.row_config[j]))
        if key not in same_sd:
            # (to rounding: a first repeat splits noise_sd into run_sd and config_sd)
            same_sd[key] = np.allclose(t_old.sd_of(key[0]), t_new.sd_of(key[1]),
                                       rtol=1e-12, atol=0.0)
        if not same_sd[key] or row_group(target, new.rows[j]) in moved:
            changed.append((i, j))
    # every configuration with an added or a changed row, all its rows: new over old (the runs
    # of a configuration share its error, so its added rows' density depends on its kept ones)
    touched = set(t_new.row_config[np.asarray(added, dtype=int)].tolist())
    touched.update(int(t_new.row_config[j]) for _, j in changed)
    old_rows = [i for i, j in kept if int(t_new.row_config[j]) in touched]
    new_rows = np.flatnonzero(np.isin(t_new.row_config, list(touched)))
    total = (summed_log_likelihood(target, t_new, new_rows)
             - summed_log_likelihood(draws, t_old, old_rows))
    return total, sorted(j for _, j in changed)

"""Model comparison by PSIS-LOO (arviz-stats) and model weights for model averaging.

Fits of the same data with different model forms (e.g. ``moe_form = "power"`` vs
``"linear"``) are compared on their pointwise log-likelihood of log tok/s.
"""

from __future__ import annotations

import math

import numpy as np

from ddtree_bayes.core.config import DEFAULT_SEED, form_label
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.store import Draws


def pointwise_loglik(draws: Draws, seed: int = DEFAULT_SEED):
    """(measurements, log-likelihood (draws, rows), modelled log tok/s (draws, rows))."""
    measurements, log_mu = P.measurement_log_mu(draws, seed)
    obs = np.log([m.tok_s for m in measurements.rows])
    sd = P.measurement_log_sd(draws, measurements)
    loglik = (-0.5 * ((obs[None, :] - log_mu) / sd) ** 2 - np.log(sd)
              - 0.5 * math.log(2 * math.pi))
    return measurements, loglik, log_mu


def loo_tree(draws: Draws, chains: int, seed: int = DEFAULT_SEED):
    """A DataTree with the groups arviz-stats' LOO functions need."""
    import xarray as xr

    measurements, loglik, log_mu = pointwise_loglik(draws, seed)
    rows = [str(m.row) for m in measurements.rows]
    shape = (chains, draws.n_draws // chains, len(rows))
    rng = np.random.default_rng(seed)
    pp = log_mu + P.measurement_log_sd(draws, measurements) * rng.standard_normal(log_mu.shape)

    def ds(arr):
        return xr.Dataset({"log_tok_s": (("chain", "draw", "measurement"), arr.reshape(shape))},
                          coords={"measurement": rows})

    posterior = xr.Dataset({k: (("chain", "draw"), v.reshape(shape[:2]))
                            for k, v in draws.variables.items() if v.ndim == 1})
    obs = np.log([m.tok_s for m in measurements.rows])
    return xr.DataTree.from_dict({
        "posterior": posterior, "log_likelihood": ds(loglik), "posterior_predictive": ds(pp),
        "observed_data": xr.Dataset({"log_tok_s": ("measurement", obs)},
                                    coords={"measurement": rows})})


#: Model weights: Bayesian-bootstrap pseudo-BMA+ hedges for the uncertainty of elpd. On
#: this little data stacking is winner-take-all and its weights flip between refits.
WEIGHT_METHODS = ("bb-pseudo-bma", "stacking", "pseudo-bma")


def compare_fits(fits: list[Draws], seed: int = DEFAULT_SEED,
                 method: str = WEIGHT_METHODS[0]) -> dict:
    """PSIS-LOO comparison with model weights; refuses fits of different data."""
    import warnings

    import arviz_stats as azs

    if len(fits) < 2:
        raise QueryError("need at least two fits to compare",
                         fix="fit the other form, e.g. `ddtree-bayes fit --moe-form linear`")
    hashes = {d.meta["data"]["sha256"] for d in fits}
    if len(hashes) > 1:
        raise QueryError("the fits were made on different data; LOO compares models on the "
                         "same data only", fix="refit both on the current data")
    trees = {}
    for d in fits:
        label = f"{d.meta['fit_id']} ({form_label(d.meta)})"
        trees[label] = loo_tree(d, int(d.meta["sampler"]["chains"]), seed)
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = azs.compare(trees, method=method, round_to=None)
        khat = {k: [float(x) for x in np.asarray(azs.loo(t, pointwise=True).pareto_k.values).ravel()]
                for k, t in trees.items()}
    notes += sorted({str(w.message).split(".")[0] for w in caught})
    rows = []
    for label, r in table.iterrows():
        rows.append({"model": label, "rank": int(r["rank"]), "elpd_loo": float(r["elpd"]),
                     "p_loo": float(r["p"]), "elpd_diff": float(r["elpd_diff"]),
                     "se": float(r["se"]), "dse": float(r["dse"]), "weight": float(r["weight"]),
                     "pareto_k_above_0.7": sum(k > 0.7 for k in khat[label])})
    ids = {f"{d.meta['fit_id']} ({form_label(d.meta)})": d.meta["fit_id"] for d in fits}
    return {"rows": rows, "weights": {ids[r["model"]]: r["weight"] for r in rows},
            "method": method, "notes": notes}


"""The priors as numpy: log densities, draws and scalar columns for prior-vs-posterior."""

from __future__ import annotations

import numpy as np

from ddtree_bayes.core.config import (
    Prior,
    PriorsConfig,
)
from ddtree_bayes.core.sampling import prior_sample


# ------------------------------------------------------------------ priors as numpy
def prior_logpdf(prior: Prior, x: np.ndarray) -> np.ndarray:
    """Log density of one prior at ``x`` (elementwise)."""
    from scipy import stats

    p, d = prior.params, prior.dist
    if d == "normal":
        return stats.norm.logpdf(x, p["mu"], p["sigma"])
    if d == "halfnormal":
        return stats.halfnorm.logpdf(x, scale=p["sigma"])
    if d == "lognormal":
        return stats.lognorm.logpdf(x, s=p["sigma"], scale=p["median"])
    if d == "beta":
        return stats.beta.logpdf(x, p["alpha"], p["beta"])
    if d == "uniform":
        return stats.uniform.logpdf(x, p["lower"], p["upper"] - p["lower"])
    raise ValueError(f"no log density for prior {prior.name} ({d})")


def prior_draws(priors: PriorsConfig, coords: dict, n: int, seed: int) -> dict[str, np.ndarray]:
    """Prior draws of every posterior variable (same names and shapes as the posterior)."""
    rng = np.random.default_rng(seed)
    P_ = priors.priors
    n_sys, n_grp = len(coords["system"]), len(coords["overhead_group"])
    out: dict[str, np.ndarray] = {}
    for name in ("step_ar_ms", "moe_share", "ctx_ms_per_unit"):
        out[name] = np.stack([prior_sample(P_[name], n, rng) for _ in range(n_sys)], axis=1)
    for name in ("moe_hw_sd", "ctx_verify_exponent", "overhead_logit_mu", "overhead_logit_sd",
                 "noise_sd"):
        out[name] = prior_sample(P_[name], n, rng)
    out["moe_z"] = rng.standard_normal((n, n_sys))
    if priors.moe_form == "power":
        out["moe_exponent_mu"] = prior_sample(P_["moe_exponent_mu"], n, rng)
        out["moe_exponent"] = out["moe_exponent_mu"][:, None] + out["moe_hw_sd"][:, None] * out["moe_z"]
    else:
        out["moe_slope_mu"] = prior_sample(P_["moe_slope_mu"], n, rng)
        out["moe_slope"] = out["moe_slope_mu"][:, None] * np.exp(out["moe_hw_sd"][:, None] * out["moe_z"])
    out["overhead_z"] = rng.standard_normal((n, n_grp))
    logit = out["overhead_logit_mu"][:, None] + out["overhead_logit_sd"][:, None] * out["overhead_z"]
    out["overhead_frac"] = 1.0 / (1.0 + np.exp(-logit))
    out["reduction"] = np.stack([prior_sample(priors.relations[e].prior, n, rng)
                                 for e in coords["relation"]], axis=1) if coords["relation"] \
        else np.zeros((n, 0))
    return out


def log_prior(priors: PriorsConfig, coords: dict, v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Log prior density of each free parameter at every draw (for power-scaling)."""
    from scipy import stats

    P_ = priors.priors
    out = {}
    for name in ("step_ar_ms", "moe_share", "ctx_ms_per_unit"):
        out[name] = prior_logpdf(P_[name], v[name]).sum(axis=1)
    mu_name = "moe_exponent_mu" if priors.moe_form == "power" else "moe_slope_mu"
    for name in ("moe_hw_sd", "ctx_verify_exponent", "overhead_logit_mu", "overhead_logit_sd",
                 "noise_sd", mu_name):
        out[name] = prior_logpdf(P_[name], v[name])
    out["moe_z"] = stats.norm.logpdf(v["moe_z"]).sum(axis=1)
    if coords["overhead_group"]:
        out["overhead_z"] = stats.norm.logpdf(v["overhead_z"]).sum(axis=1)
    for k, e in enumerate(coords["relation"]):
        out[f"reduction_{e}"] = prior_logpdf(priors.relations[e].prior, v["reduction"][:, k])
    return out


# ------------------------------------------------------------------ helpers
def scalar_columns(v: dict[str, np.ndarray], coords: dict) -> dict[str, np.ndarray]:
    """Flatten vector parameters into labelled scalars: ``moe_share[b300x8]``."""
    dims = {"step_ar_ms": "system", "moe_share": "system", "ctx_ms_per_unit": "system",
            "moe_z": "system", "moe_exponent": "system", "moe_slope": "system",
            "overhead_z": "overhead_group", "overhead_frac": "overhead_group",
            "reduction": "relation"}
    out = {}
    for name, arr in v.items():
        if arr.ndim == 1:
            out[name] = arr
        else:
            for j, label in enumerate(coords[dims[name]]):
                out[f"{name}[{label}]"] = arr[:, j]
    return out

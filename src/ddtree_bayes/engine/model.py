"""Build the PyMC model from a :class:`~ddtree_bayes.core.spec.ModelSpec` and the priors.

Only builds: no sampling, no file I/O. The likelihood is on log tok/s:
``log tok_s_i ~ Normal(log(accept_i / step_ms_i * 1000), noise_sd)``.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import Prior, PriorsConfig


def prior_rv(prior: Prior, name: str, **kwargs) -> pt.TensorVariable:
    """A PyMC random variable for a prior from the priors file."""
    p = prior.params
    if prior.dist == "normal":
        return pm.Normal(name, mu=p["mu"], sigma=p["sigma"], **kwargs)
    if prior.dist == "halfnormal":
        return pm.HalfNormal(name, sigma=p["sigma"], **kwargs)
    if prior.dist == "lognormal":
        return pm.LogNormal(name, mu=math.log(p["median"]), sigma=p["sigma"], **kwargs)
    if prior.dist == "beta":
        return pm.Beta(name, alpha=p["alpha"], beta=p["beta"], **kwargs)
    if prior.dist == "truncnormal":
        return pm.TruncatedNormal(name, mu=p["mu"], sigma=p["sigma"], lower=p["lower"],
                                  upper=p["upper"], **kwargs)
    if prior.dist == "uniform":
        return pm.Uniform(name, lower=p["lower"], upper=p["upper"], **kwargs)
    raise ValueError(f"prior {name}: dist {prior.dist!r} cannot be a model parameter")


#: Free parameters sampled by NUTS (the others in the posterior are deterministic).
def free_parameter_names(moe_form: str) -> tuple[str, ...]:
    mu = "moe_exponent_mu" if moe_form == "power" else "moe_slope_mu"
    return ("step_ar_ms", "moe_share", mu, "moe_hw_sd", "moe_z", "ctx_ms_per_unit",
            "ctx_verify_exponent", "overhead_logit_mu", "overhead_logit_sd", "overhead_z",
            "reduction", "noise_sd")


def build_model(spec: S.ModelSpec, priors: PriorsConfig, *, refittable: bool = False
                ) -> pm.Model:
    """The PyMC model of log tok/s for every measured row.

    ``refittable=True`` makes the observed values and per-row likelihood weights data
    containers (``log_tok_s_observed``, ``row_weight``), so one compiled model can be refit
    on other values or with rows held out (validation folds, SBC) without recompiling. A
    plain fit leaves them constants: the data containers cost ~2.5 s of extra numba
    compilation on every fit (docs/performance.md). The two give the same posterior.

    Examples
    --------
    >>> from ddtree_bayes.api import load_inputs
    >>> data, cfg = load_inputs()
    >>> m = build_model(S.build_spec(data, cfg), cfg)
    >>> sorted(m.coords["system"])
    ['b300x8', 'rtx-pro-6000x8']
    """
    P = priors.priors
    with pm.Model(coords=spec.coords) as model:
        step_ar = prior_rv(P["step_ar_ms"], "step_ar_ms", dims="system")
        moe_share = prior_rv(P["moe_share"], "moe_share", dims="system")
        moe_hw_sd = prior_rv(P["moe_hw_sd"], "moe_hw_sd")
        moe_z = pm.Normal("moe_z", 0.0, 1.0, dims="system")
        if spec.moe_form == "power":
            mu = prior_rv(P["moe_exponent_mu"], "moe_exponent_mu")
            moe_shape = pm.Deterministic("moe_exponent", mu + moe_hw_sd * moe_z, dims="system")
        else:
            mu = prior_rv(P["moe_slope_mu"], "moe_slope_mu")
            moe_shape = pm.Deterministic("moe_slope", mu * pt.exp(moe_hw_sd * moe_z),
                                         dims="system")
        ctx_ms = prior_rv(P["ctx_ms_per_unit"], "ctx_ms_per_unit", dims="system")
        ctx_exp = prior_rv(P["ctx_verify_exponent"], "ctx_verify_exponent")
        ov_mu = prior_rv(P["overhead_logit_mu"], "overhead_logit_mu")
        ov_sd = prior_rv(P["overhead_logit_sd"], "overhead_logit_sd")
        noise = prior_rv(P["noise_sd"], "noise_sd")

        frac_rows = pt.zeros(len(spec.rows))
        if spec.groups:
            ov_z = pm.Normal("overhead_z", 0.0, 1.0, dims="overhead_group")
            frac = pm.Deterministic("overhead_frac", pm.math.sigmoid(ov_mu + ov_sd * ov_z),
                                    dims="overhead_group")
            frac_rows = pt.concatenate([frac, pt.zeros(1)])[spec.row_group]
        scale_rows = pt.ones(len(spec.rows))
        if spec.relations:
            rel = [priors.relations[e].prior.params for e in spec.relations]
            reduction = pm.Beta("reduction", alpha=np.array([p["alpha"] for p in rel]),
                                beta=np.array([p["beta"] for p in rel]), dims="relation")
            scale_rows = pt.concatenate([1.0 - reduction, pt.ones(1)])[spec.row_relation]

        s = spec.row_system
        target = S.target_ms(step_ar[s], moe_share[s], moe_shape[s], ctx_ms[s], ctx_exp,
                             spec.verify_tokens, spec.context_units, spec.moe_form,
                             pt.exp, pt.log)
        step = S.step_ms(target, frac_rows, scale_rows)
        mu_log = np.log(spec.accept_len * 1000.0) - pt.log(step)
        if not refittable:
            pm.Normal("log_tok_s", mu=mu_log, sigma=noise, observed=spec.log_tok_s,
                      dims="measurement")
            return model
        # observed values and per-row weights as data: see workflows/validation.py
        observed = pm.Data("log_tok_s_observed", spec.log_tok_s, dims="measurement")
        weight = pm.Data("row_weight", np.ones(len(spec.rows)), dims="measurement")
        like = pm.Normal("log_tok_s", mu=mu_log, sigma=noise, observed=observed,
                         dims="measurement")
        # weight 1 everywhere (the default) adds 0; weight 0 removes a row's likelihood
        pm.Potential("row_weight_adjustment", pt.sum((weight - 1.0) * pm.logp(like, observed)))
    return model

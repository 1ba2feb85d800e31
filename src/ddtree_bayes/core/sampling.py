"""Draws from the priors file's distributions with numpy (no PyMC): used for prior
predictive pictures, SBC truths and the predict-time hardware-transfer priors."""

from __future__ import annotations

import numpy as np

from ddtree_bayes.core.config import Prior
from ddtree_bayes.core.errors import PriorsError


def prior_sample(prior: Prior, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws from one prior of the priors file.

    >>> from ddtree_bayes.core.config import Prior
    >>> x = prior_sample(Prior("x", "lognormal", {"median": 2.0, "sigma": 0.5}), 100_000,
    ...                  np.random.default_rng(0))
    >>> round(float(np.median(x)), 1)
    2.0
    """
    p, dist = prior.params, prior.dist
    if dist == "point":
        return np.full(n, p["value"])
    if dist == "uniform":
        return rng.uniform(p["lower"], p["upper"], n)
    if dist == "normal":
        return rng.normal(p["mu"], p["sigma"], n)
    if dist == "halfnormal":
        return np.abs(rng.normal(0.0, p["sigma"], n))
    if dist == "lognormal":
        return p["median"] * np.exp(p["sigma"] * rng.standard_normal(n))
    if dist == "beta":
        return rng.beta(p["alpha"], p["beta"], n)
    if dist == "truncnormal":  # by rejection
        out = np.empty(0)
        for _ in range(1000):
            x = rng.normal(p["mu"], p["sigma"], 4 * n)
            out = np.concatenate([out, x[(x >= p["lower"]) & (x <= p["upper"])]])
            if out.size >= n:
                return out[:n]
        raise PriorsError(f"prior {prior.name} has almost no mass inside its bounds",
                          fix="widen lower/upper in the priors file")
    raise PriorsError(f"prior {prior.name}: dist {dist!r} cannot be sampled",
                      fix="use point, uniform, normal, truncnormal, halfnormal, lognormal or beta")

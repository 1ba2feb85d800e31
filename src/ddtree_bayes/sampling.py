"""Draws from the priors file's distributions with numpy (no PyMC): used for prior
predictive pictures, SBC truths and the predict-time hardware-transfer priors."""

from __future__ import annotations

import numpy as np

from ddtree_bayes.config import Prior


def prior_sample(prior: Prior, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws from one prior of the priors file.

    >>> from ddtree_bayes.config import Prior
    >>> x = prior_sample(Prior("x", "lognormal", {"median": 2.0, "sigma": 0.5}), 100_000,
    ...                  np.random.default_rng(0))
    >>> round(float(np.median(x)), 1)
    2.0
    """
    p, d = prior.params, prior.dist
    if d == "normal":
        return rng.normal(p["mu"], p["sigma"], n)
    if d == "halfnormal":
        return np.abs(rng.normal(0.0, p["sigma"], n))
    if d == "lognormal":
        return p["median"] * np.exp(p["sigma"] * rng.standard_normal(n))
    if d == "beta":
        return rng.beta(p["alpha"], p["beta"], n)
    if d == "uniform":
        return rng.uniform(p["lower"], p["upper"], n)
    raise ValueError(f"cannot sample prior {prior.name} ({d})")

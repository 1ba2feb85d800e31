"""The tensor-parallel all-reduce volume of the verified tokens on a system a fit did not
measure (the model's ``tp_tok_ms``, engine/model.py). numpy only (the predict path)."""

from __future__ import annotations

import numpy as np

from ddtree_bayes.core import spec as S
from ddtree_bayes.engine.posterior import Fit


def allreduce_tok_ms(draws: Fit, card, hardware_row: dict[str, str], gpus: int,
                     rng: np.random.Generator) -> tuple[np.ndarray | None, str]:
    """Per-draw ms of tensor-parallel all-reduce per extra verified token on a system the fit
    did not measure (engine/model.py ``allreduce_tok_ms``): the card's volume over the posterior
    bus bandwidth of the system's link class, or its prior when the fit had no system of
    that class (then said, as prior-driven). (None, "") for one GPU, and for a fit made
    before the term existed (its answers stay what they were)."""
    from ddtree_bayes.core.pairs import link
    from ddtree_bayes.core.sampling import prior_sample

    if not draws.meta["model"].get("allreduce_volume"):
        return None, ""
    mb, _ = card.allreduce_mb_per_token(gpus)
    if mb <= 0:
        return None, ""
    cls = link(hardware_row, gpus)
    name = S.tp_prior(cls)
    if name in draws.variables:
        return mb / draws.variables[name], ""
    busbw = prior_sample(draws.priors.priors[name], draws.n_draws, rng)
    return mb / busbw, (f"the {cls} all-reduce bandwidth is its prior (no {cls} system "
                        "measured: prior-driven); ")

"""The estimator this project replaces, as a comparison for every validation: the original
three-term formula refit by least squares on the same training rows, with its flat +-30%."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ddtree_bayes.core.config import PriorsConfig
from ddtree_bayes.core.data import Measurement


def baseline_fit(rows: list[Measurement], cfg: PriorsConfig, systems: Iterable[str]):
    """The original three-term formula as a deterministic least-squares fit.

    Point parameters: per system the M=1 step ``t1`` and the context slope; shared: a linear
    MoE slope (MoE share fixed at the prior mean, as the original fixed its split), one
    speculative overhead fraction and the context-verify exponent. Residuals are on log
    tok/s; a weak ridge (1e-3) towards the prior medians keeps parameters that a fold leaves
    unidentified at those medians, which is what a deterministic estimator would assume.

    The formula needs each row's acceptance: rows with a blank accept_len are left out of the
    least squares, and the returned predictor gives None for them (the original estimator
    cannot answer without an acceptance).
    """
    from scipy.optimize import least_squares

    systems = list(systems)
    share = cfg.priors["moe_share"].mean()
    unit = cfg.context_unit_tokens
    p0 = np.array([math.log(cfg.priors["step_ar_ms"].params["median"])] * len(systems)
                  + [math.log(cfg.priors["ctx_ms_per_unit"].params["median"])] * len(systems)
                  + [math.log(0.15), -1.1, 0.0])

    def unpack(p):
        n = len(systems)
        return (np.exp(p[:n]), np.exp(p[n:2 * n]), math.exp(p[2 * n]),
                1 / (1 + math.exp(-p[2 * n + 1])), 1 / (1 + math.exp(-p[2 * n + 2])))

    def predict(p, m: Measurement) -> float:
        assert m.accept_len is not None
        t1, ctx, slope, frac, b = unpack(p)
        s = systems.index(m.system)
        c = (m.context_tokens if m.context_tokens is not None else cfg.default_context_tokens) / unit
        moe = share * t1[s] * (1 + slope * (m.verify_tokens - 1))
        target = moe + (1 - share) * t1[s] + ctx[s] * c * m.verify_tokens ** b
        step = target / (1 - frac) if m.is_speculative else target
        return m.accept_len * 1000.0 / step

    known = [m for m in rows if m.accept_len is not None]

    def resid(p):
        r = [math.log(predict(p, m)) - math.log(m.tok_s) for m in known]
        return np.concatenate([r, 1e-3 * (p - p0)])

    fit = least_squares(resid, p0)

    def baseline(m: Measurement) -> float | None:
        return None if m.accept_len is None else predict(fit.x, m)

    return baseline

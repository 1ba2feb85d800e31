"""The estimator this project replaces, as a comparison for every validation: the original
three-term formula refit by least squares on the same training rows, with its flat +-30%."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from ddtree_bayes.core.config import PriorsConfig
from ddtree_bayes.core.data import Measurement


def baseline_fit(rows: list[Measurement], cfg: PriorsConfig, systems: Iterable[str], *,
                 label: Callable[[Measurement], str] | None = None,
                 roofline: dict[str, dict[str, float]] | None = None):
    """The original three-term formula as a deterministic least-squares fit.

    Point parameters: per system the M=1 step ``t1`` and the context slope; shared: a linear
    MoE slope (MoE share fixed at the prior mean, as the original fixed its split), one
    speculative overhead fraction and the context-verify exponent. Residuals are on log
    tok/s; a weak ridge (1e-3) towards the prior medians keeps parameters that a fold leaves
    unidentified at those medians, which is what a deterministic estimator would assume.

    The formula needs each row's acceptance: rows with a blank accept_len are left out of the
    least squares, and the returned predictor gives None for them (the original estimator
    cannot answer without an acceptance).

    ``label`` maps a row to its entry of ``systems`` (default: its system; a fit of several
    models passes the (model, system) pair). With ``roofline`` (pair label -> the pair
    roofline's inputs, core/pairs.py), a pair without training rows gets its ``t1`` from the
    pair roofline, its four parameters fitted to the other pairs' ``t1``
    (:func:`pair_roofline_fit`): the deterministic counterpart of the posterior's answer for a
    pair never measured.
    """
    from scipy.optimize import least_squares

    systems = list(systems)
    label = label or (lambda m: m.system)
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
        s = systems.index(label(m))
        c = m.context(cfg.default_context_tokens) / unit
        moe = share * t1[s] * (1 + slope * (m.verify_tokens - 1))
        target = moe + (1 - share) * t1[s] + ctx[s] * c * m.verify_tokens ** b
        step = target / (1 - frac) if m.is_speculative else target
        return m.accept_len * 1000.0 / step

    # the original formula is single-stream: rows at concurrency C > 1 neither fit nor get it
    known = [m for m in rows if m.accept_len is not None and m.concurrency == 1]

    def resid(p):
        r = [math.log(predict(p, m)) - math.log(m.tok_s) for m in known]
        return np.concatenate([r, 1e-3 * (p - p0)])

    fit = least_squares(resid, p0)
    x = fit.x
    trained = {label(m) for m in known}
    if roofline is not None and trained != set(systems):
        x = x.copy()
        t1 = np.exp(x[:len(systems)])
        # only pairs whose t1 the fit identifies apart from their context slope: a row at
        # context 0 (every row of the DeepSeek-R1 sweep is at 1k: t1 0.04 ms there, the slope
        # carrying the step)
        at_zero = {label(m) for m in known
                   if m.context(cfg.default_context_tokens) == 0}
        fitted = pair_roofline_fit({k: t1[systems.index(k)] for k in trained & at_zero},
                                   roofline, cfg)
        for k in set(systems) - trained:
            x[systems.index(k)] = math.log(fitted(roofline[k]))

    def baseline(m: Measurement) -> float | None:
        return None if m.accept_len is None or m.concurrency != 1 else predict(x, m)

    return baseline


def pair_roofline_fit(t1: dict[str, float], roofline: dict[str, dict[str, float]],
                      cfg: PriorsConfig) -> Callable[[dict[str, float]], float]:
    """The pair roofline (core/pairs.py) fitted by robust (soft-L1) least squares on log ``t1``
    of the pairs given, with the priors as a ridge (their centres, their log-scale sds, in units
    of ``pair_step_sd``'s median): the point estimate of the posterior's regression. Returns
    the fitted roofline as a function of a pair's inputs."""
    from scipy.optimize import least_squares

    from ddtree_bayes.core.pairs import PAIR_PRIORS, roofline_step_ms

    def centre(name: str, default: float) -> tuple[float, float]:
        """The prior's centre and its sd on the log scale (a beta's by the delta method)."""
        prior = cfg.priors.get(name)
        if prior is None:
            return default, 1.0
        p = prior.params
        if prior.dist == "lognormal":
            return p["median"], p["sigma"]
        mean = prior.mean()
        var = (p["alpha"] * p["beta"] / ((p["alpha"] + p["beta"]) ** 2
                                         * (p["alpha"] + p["beta"] + 1))) if prior.dist == "beta" else 1.0
        return mean, math.sqrt(var) / mean

    names = PAIR_PRIORS[:4]
    centres = [centre(n, d) for n, d in zip(names, (0.6, 0.03, 0.05, 0.1), strict=True)]
    p0 = np.log([c for c, _ in centres])
    # the priors as a ridge, in units of a pair's scatter around the roofline (pair_step_sd's
    # median): a point estimate of the same regression (MAP), not an unregularised fit whose
    # per-layer costs collapse to 0 when the single-GPU pairs are explained by streaming alone
    scatter = centre("pair_step_sd", 0.25)[0]
    ridge = np.array([scatter / sd for _, sd in centres])

    def step(p, f):
        eff, layer, fabric, pcie = np.exp(p)
        return roofline_step_ms(f["stream_ms"], f["layers"], f["fabric"], f["pcie"],
                                min(eff, 1.0), layer, fabric, pcie)

    keys = sorted(t1)

    def resid(p):
        r = [math.log(step(p, roofline[k])) - math.log(t1[k]) for k in keys]
        return np.concatenate([r, ridge * (p - p0)])

    # soft-L1: one badly fitted pair must not drag the roofline for every other pair
    x = least_squares(resid, p0, loss="soft_l1", f_scale=0.3).x
    return lambda f: float(step(x, f))


def pair_roofline_of(spec) -> dict[str, dict[str, float]] | None:
    """A spec's pair roofline inputs by pair label (a fit of several models; else None)."""
    f = spec.pair_roofline
    if f is None:
        return None
    return {label: {k: float(f[k][i]) for k in f} for i, label in enumerate(spec.systems)}

"""Hardware transfer: the step parameters of a system the fit has no measurements of, from the
measured system it is most like. numpy only (the predict path)."""

from __future__ import annotations

import math

import numpy as np

from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.scenario import Scenario


def bandwidth(table: dict[str, dict[str, str]], hardware: str, gpus: int) -> float:
    """Aggregate memory bandwidth (TB/s) of ``gpus`` GPUs of ``hardware``."""
    try:
        return float(table[hardware]["mem_bw_tb_s"]) * gpus
    except (KeyError, ValueError):
        raise QueryError(f"no memory bandwidth for {hardware} in the hardware table",
                         fix="fill in mem_bw_tb_s in data/hardware.csv") from None


def fabric(table: dict[str, dict[str, str]], hardware: str) -> bool:
    """Whether the GPUs talk over an NVLink-class fabric (else PCIe only)."""
    return "pcie" not in table[hardware].get("interconnect", "").lower()


def transfer_reference(fit: Fit, hardware: str, gpus: int) -> tuple[str, str, int]:
    """The measured system an unmeasured ``hardware x gpus`` is transferred from: (its label,
    GPU, count). One with the same interconnect class (PCIe or an NVLink-class fabric) if one
    was measured, the nearest in aggregate memory bandwidth among them."""
    table = fit.hardware
    parsed = [(s, s.rsplit("x", 1)[0], int(s.rsplit("x", 1)[1])) for s in fit.measured_systems]
    same = [p for p in parsed if fabric(table, p[1]) == fabric(table, hardware)] or parsed
    target_bw = bandwidth(table, hardware, gpus)
    return min(same, key=lambda p: abs(math.log(bandwidth(table, p[1], p[2]) / target_bw)))


def transferred_parameters(draws: Fit, sc: Scenario, rng: np.random.Generator
                           ) -> tuple[dict[str, np.ndarray], str]:
    """Per-draw step parameters of an unmeasured system, from a measured reference system.

    The reference has the same interconnect class (PCIe or an NVLink-class fabric) if one was
    measured, else the nearest aggregate memory bandwidth. MOE(1) and the context cost
    scale with (bandwidth_ref / bandwidth) ** elasticity, ATTN_BASE with the interconnect
    factor when the class differs, everything with a log-normal system scatter; the MoE
    exponent comes from its pooled population. Transfer parameters are drawn from the
    ``[transfer]`` priors (or taken from ``draws.variables["transfer_<name>"]`` if present).

    In a fit of several models a (model, system) pair without measurements gets its step from
    the pair roofline instead, learned across the measured pairs
    (:func:`ddtree_bayes.engine.target_models.pair_parameters`).
    """
    from ddtree_bayes.engine import target_models

    if target_models.is_multi(draws):
        return target_models.pair_parameters(draws, sc, rng)

    from ddtree_bayes.core.sampling import prior_sample

    v, meta, n = draws.variables, draws.meta, draws.n_draws
    table = draws.hardware
    ref, ref_hw, ref_gpus = transfer_reference(draws, sc.hardware, sc.gpus)
    target_bw, ref_bw = bandwidth(table, sc.hardware, sc.gpus), bandwidth(table, ref_hw, ref_gpus)
    r = meta["coords"]["system"].index(ref)
    priors = draws.priors.transfer

    def draw(name: str) -> np.ndarray:
        key = f"transfer_{name}"
        return v[key] if key in v else prior_sample(priors[name], n, rng)

    elasticity, factor, scatter = (draw(k) for k in ("bandwidth_elasticity",
                                                     "interconnect_factor", "system_sd"))
    noise = np.exp(scatter * rng.standard_normal(n))
    ratio = (ref_bw / target_bw) ** elasticity
    steps = int(fabric(table, ref_hw)) - int(fabric(table, sc.hardware))  # +1 fabric -> PCIe
    moe1 = v["moe_share"][:, r] * v["step_ar_ms"][:, r] * ratio * noise
    attn = (1.0 - v["moe_share"][:, r]) * v["step_ar_ms"][:, r] * factor ** steps * noise
    moe1, floored = streaming_floor(draws, sc, (ref_hw, ref_gpus), v["step_ar_ms"][:, r], moe1,
                                    attn, noise, rng)
    form = meta["model"]["moe_form"]
    shape = target_models.pooled_shape(draws, rng)
    params = {"step_ar_ms": moe1 + attn, "moe_share": moe1 / (moe1 + attn), "moe_shape": shape,
              "ctx_ms_per_unit": v["ctx_ms_per_unit"][:, r] * ratio * noise}
    tp_how = ""
    if form == "roofline":
        from ddtree_bayes.core.model_cards import ModelCard
        from ddtree_bayes.engine.unmeasured import roofline_parameters

        roof, tp_how = roofline_parameters(draws, ModelCard(**meta["model"]["card"]),
                                           table[sc.hardware], sc.gpus, moe1, rng)
        params.update(roof)
    how = (f"{sc.system} not measured: transferred from {ref} "
           f"({'same' if steps == 0 else 'different'} interconnect class, bandwidth ratio "
           f"{ref_bw / target_bw:.2f}"
           f"{'' if not floored else f'; {max(floored, 0.01):.0%} of draws raised to reading the weights'}"
           f"{'; the model card is a proxy, so weaker' if 'proxy_card' in meta['model'] else ''}"
           f"); {tp_how}")
    return params, how



def streaming_floor(draws: Fit, sc: Scenario, ref: tuple[str, int], ref_step: np.ndarray,
                    moe1: np.ndarray, attn: np.ndarray, noise: np.ndarray,
                    rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """``moe1`` with each draw's M = 1 step (``moe1 + attn``) raised to at least the time to
    stream the model card's active weights once over the target's GPUs, and the share of
    draws raised. The transfer scales a measured step by bandwidth ** elasticity (mostly not
    bandwidth-bound, as Kimi K2.6 on 8 B300 is), so a step near its roofline on the measured
    GPU (a dense model on one GPU) came out faster than its weights can be read on a slower
    one. The efficiency of that read is drawn from the pair roofline's prior (``pair_bw_eff``,
    Beta(5, 3)) but not below what the reference ``ref`` (GPU, count) demonstrably reached: its
    streaming time over its measured step ``ref_step`` (a lower bound, the step holding more
    than the read), with the transfer's own system scatter (``noise``), and never faster than
    the read at the full bandwidth. Without a card or that prior, unchanged. The efficiencies
    come from a stream spawned off ``rng``, so the other draws stay as they were.

    >>> from types import SimpleNamespace as NS
    >>> from ddtree_bayes.core.config import parse_priors
    >>> from ddtree_bayes.core.paths import bundled
    >>> card = {"model": "m", "params_total_b": 8, "params_active_b": 8, "layers": 32,
    ...         "experts": None, "experts_topk": None, "bytes_per_weight": 2.0,
    ...         "compute_dtype": "bf16", "source": "s"}
    >>> hw = {"slow": {"mem_bw_tb_s": "0.5", "interconnect": "PCIe"},
    ...       "ref": {"mem_bw_tb_s": "1.0", "interconnect": "PCIe"}}
    >>> fit = NS(meta={"model": {"card": card}}, n_draws=4, hardware=hw,
    ...          priors=parse_priors(bundled("priors.toml").read_text(), "p"))
    >>> # 16 GB: 16 ms on the reference's 1 TB/s, measured at 20 ms (80% at least); on 0.5 TB/s
    >>> # 32 ms at 100%, 40 ms at 80%: the transferred 24 ms is raised into 32-40 ms; with a
    >>> # scatter of x0.5 into 32 ms (no faster than the full bandwidth), of x1.2 into 38-48 ms
    >>> def steps(noise):
    ...     moe1, share = streaming_floor(fit, NS(hardware="slow", gpus=1), ("ref", 1),
    ...                                   np.full(4, 20.0), np.full(4, 20.0), np.full(4, 4.0),
    ...                                   np.full(4, noise), np.random.default_rng(0))
    ...     return moe1 + 4.0, share
    >>> (s1, share), (s05, _), (s12, _) = steps(1.0), steps(0.5), steps(1.2)
    >>> bool(np.all((32 <= s1) & (s1 <= 40))), share, bool(np.all(s05 == 32.0))
    (True, 1.0, True)
    >>> bool(np.all((38.4 <= s12) & (s12 <= 48)))
    True
    """
    from ddtree_bayes.core.model_cards import ModelCard
    from ddtree_bayes.core.pairs import pair_features
    from ddtree_bayes.core.sampling import prior_sample

    card, prior = draws.meta["model"].get("card"), draws.priors.priors.get("pair_bw_eff")
    if not card or prior is None:
        return moe1, 0.0
    model = ModelCard(**card)
    stream = pair_features(model, draws.hardware[sc.hardware], sc.gpus).stream_ms
    reached = pair_features(model, draws.hardware[ref[0]], ref[1]).stream_ms / ref_step
    eff = np.clip(np.maximum(prior_sample(prior, draws.n_draws, rng.spawn(1)[0]), reached),
                  None, 1.0)
    short = np.maximum(np.maximum(stream / eff * noise, stream) - (moe1 + attn), 0.0)
    return moe1 + short, float(np.mean(short > 0))

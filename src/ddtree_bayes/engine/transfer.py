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
           f"{'; the model card is a proxy, so weaker' if 'proxy_card' in meta['model'] else ''}"
           f"); {tp_how}")
    return params, how

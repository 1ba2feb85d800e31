"""The roofline parameters of a system a fit did not measure: one token's compute time (the
model's ``compute_tok_ratio``) and the tensor-parallel all-reduce volume of the verified tokens
(``tp_tok_ms``), shared by hardware transfer (engine/transfer.py) and a pair never measured
(engine/target_models.py). numpy only (the predict path)."""

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


def roofline_parameters(draws: Fit, card, hardware_row: dict[str, str], gpus: int, moe1,
                        rng: np.random.Generator) -> tuple[dict[str, np.ndarray], str]:
    """``tok_ratio`` (one token's FLOPs at an efficiency drawn from the pooled population, in
    units of the M = 1 verify cost ``moe1``) and, on several GPUs, ``tp_tok_ms``
    (:func:`allreduce_tok_ms`), with what to say about them: a row without peak FLOPs (its
    compute knee at bandwidth x 200 FLOP/B, which `hardware add` notes once) is said too."""
    from ddtree_bayes.core.model_cards import (
        FALLBACK_RIDGE_FLOP_PER_BYTE,
        NO_PEAK,
        flop_ms_per_token,
    )

    v, n = draws.variables, draws.n_draws
    flop_ms, flop_how = flop_ms_per_token(card, hardware_row, gpus)
    eff = np.exp(v["compute_eff_log_mu"] + v["compute_eff_log_sd"] * rng.standard_normal(n))
    params = {"tok_ratio": flop_ms / eff / moe1}
    tp, how = allreduce_tok_ms(draws, card, hardware_row, gpus, rng)
    if tp is not None:
        params["tp_tok_ms"] = tp
    if NO_PEAK in flop_how:
        name = hardware_row.get("hardware", "?")
        peak = float(hardware_row["mem_bw_tb_s"]) * FALLBACK_RIDGE_FLOP_PER_BYTE
        how += (f"the compute peak is assumed: no peak FLOPs for {name} in the hardware table, "
                f"{peak:g} TFLOPS = bandwidth x {FALLBACK_RIDGE_FLOP_PER_BYTE:g} FLOP/B "
                "(prior-driven; fix: its dense_bf16_tflops in data/hardware.csv); ")
    return params, how

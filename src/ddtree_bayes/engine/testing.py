"""Hand-checkable fixtures: a point-mass posterior whose predictions can be computed by hand.

With the defaults (linear MoE form) the default scenario (B300, DDTree budget 32, M=33) has
MOE(33) = 4 * (1 + 0.0625 * 32) = 12 ms, ATTN_BASE = 4 ms, target = 16 ms; the SGLang
overhead fraction 0.2 gives step = 16 / 0.8 = 20 ms, and the native engine with
reduction 0.5 gives step = 16 * (1 + 0.5 * 0.25) = 18 ms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.store import FORMAT_VERSION

POINT_MASS = {
    "step_ar_ms": [8.0], "moe_share": [0.5], "moe_slope": [0.0625], "moe_exponent": [0.5],
    "ctx_ms_per_unit": [2.0], "ctx_verify_exponent": 0.5, "overhead_frac": [0.2],
    "overhead_logit_mu": float(np.log(0.2 / 0.8)), "overhead_logit_sd": 0.0,
    "reduction": [0.5], "noise_sd": 0.0,
    "moe_slope_mu": 0.0625, "moe_exponent_mu": 0.5, "moe_hw_sd": 0.0,
}


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def point_mass_draws(n: int = 8, moe_form: str = "linear", converged: bool = True,
                     **overrides) -> Fit:
    """A :class:`Fit` where every one of ``n`` draws equals :data:`POINT_MASS` (+overrides)."""
    values = {**POINT_MASS, **overrides}
    variables = {k: np.tile(np.asarray(v, dtype=float), (n, 1)).reshape(n, *np.shape(v))
                 for k, v in values.items()}
    priors_path = bundled("priors.toml")
    meta = {
        "format_version": FORMAT_VERSION, "fit_id": "point-mass", "converged": converged,
        "failures": [] if converged else ["max R-hat 1.2 > 1.01 (moe_share[b300x8])"],
        "model": {"moe_form": moe_form, "context_unit_tokens": 65536.0,
                  "default_context_tokens": 0.0, "relation_bases": {"native": "sglang"}},
        "coords": {"system": ["b300x8"], "overhead_group": ["b300x8/sglang/ddtree"],
                   "relation": ["native"]},
        # (the files' own hashes: a point-mass fit is as fresh as a fit of the bundled files)
        "data": {"path": str(bundled("measurements.csv")),
                 "sha256": _sha256(bundled("measurements.csv").read_text())},
        "priors": {"path": str(priors_path), "sha256": _sha256(priors_path.read_text())},
        "seed": 0,
    }
    return Fit(path=Path("point-mass.nc"), meta=meta, variables=variables,
                 data_csv=bundled("measurements.csv").read_text(),
                 priors_toml=priors_path.read_text(),
                 hardware_csv=bundled("hardware.csv").read_text())


#: A fit of two models whose predictions can be computed by hand: Kimi K2.6 on 8x B300 as in
#: :data:`POINT_MASS` and Llama-3.1-8B on one H100 (M = 1 step 7 ms), with the pair roofline
#: at efficiency 0.8, 0.03 ms per layer, all-reduces 0.05 (fabric) / 0.1 (PCIe) ms per layer and
#: no scatter, so a pair never measured has step = stream_ms / 0.8 + layers x per-layer cost.
MULTI_PAIRS = ("kimi-k2.6@b300x8", "llama-3.1-8b-instruct@h100x1")
MULTI_POINT_MASS = {
    **POINT_MASS, "step_ar_ms": [8.0, 7.0], "moe_share": [0.5, 0.5], "moe_slope": [0.0625, 0.0625],
    "moe_exponent": [0.5, 0.5], "ctx_ms_per_unit": [2.0, 2.0],
    "pair_bw_eff": 0.8, "pair_layer_ms": 0.03, "pair_allreduce_fabric_ms": 0.05,
    "pair_allreduce_pcie_ms": 0.1, "pair_step_sd": 0.0,
}
MULTI_DATA = (
    "model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,context_tokens,"
    "tok_s,source,notes\n"
    "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,133,test,\n"
    "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,,303,test,\n"
    "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,141.44,test,\n")


def multi_model_draws(n: int = 8, **overrides) -> Fit:
    """A point-mass fit of two models (:data:`MULTI_POINT_MASS` + overrides), linear MoE form,
    every model card of the bundled ``models.csv`` stored as a fit of several models stores
    them."""
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards

    draws = point_mass_draws(n, **{**MULTI_POINT_MASS, **overrides})
    cards = {k: dataclasses.asdict(c) for k, c in load_model_cards(bundled("models.csv")).items()}
    draws.meta["model"].update({
        "target_model": None, "target_models": ["kimi-k2.6", "llama-3.1-8b-instruct"],
        "pair_models": {p: p.split("@")[0] for p in MULTI_PAIRS}, "model_cards": cards})
    draws.meta["coords"].update({"system": list(MULTI_PAIRS),
                                 "overhead_group": ["kimi-k2.6@b300x8/sglang/ddtree"]})
    return Fit(path=draws.path, meta=draws.meta, variables=draws.variables, data_csv=MULTI_DATA,
                 priors_toml=draws.priors_toml, hardware_csv=draws.hardware_csv)

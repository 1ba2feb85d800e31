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
from ddtree_bayes.engine.store import FORMAT_VERSION, Draws

POINT_MASS = {
    "step_ar_ms": [8.0], "moe_share": [0.5], "moe_slope": [0.0625], "moe_exponent": [0.5],
    "ctx_ms_per_unit": [2.0], "ctx_verify_exponent": 0.5, "overhead_frac": [0.2],
    "overhead_logit_mu": float(np.log(0.2 / 0.8)), "overhead_logit_sd": 0.0,
    "reduction": [0.5], "noise_sd": 0.0,
    "moe_slope_mu": 0.0625, "moe_exponent_mu": 0.5, "moe_hw_sd": 0.0,
}


def point_mass_draws(n: int = 8, moe_form: str = "linear", converged: bool = True,
                     **overrides) -> Draws:
    """A :class:`Draws` where every one of ``n`` draws equals :data:`POINT_MASS` (+overrides)."""
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
        "data": {"path": str(bundled("measurements.csv")), "sha256": "unknown"},
        "priors": {"path": str(priors_path), "sha256": "unknown"},
        "seed": 0,
    }
    return Draws(path=Path("point-mass.nc"), meta=meta, variables=variables,
                 data_csv=bundled("measurements.csv").read_text(),
                 priors_toml=priors_path.read_text(),
                 hardware_csv=bundled("hardware.csv").read_text())

"""Synthetic measurements from known parameters (for parameter recovery and calibration).

numpy only; the step arithmetic is the model's own (:mod:`ddtree_bayes.spec`).
"""

from __future__ import annotations

import csv
import io

import numpy as np

from ddtree_bayes import spec as S
from ddtree_bayes.data import COLUMNS, derive_verify_tokens, system_label


def simulate_measurements(truth: dict, design: list[dict], *, seed: int, model: str = "sim-moe",
                          context_unit_tokens: float = 65536.0, moe_form: str = "power") -> str:
    """A measurement CSV (text) for ``design`` rows under known parameters ``truth``.

    ``truth`` holds per-system dicts ``step_ar_ms``, ``moe_share``, ``moe_shape``,
    ``ctx_ms_per_unit`` (keyed by system label, e.g. ``b300x8``), a global
    ``ctx_verify_exponent`` and ``noise_sd``, ``overhead_frac`` keyed by group label
    (``system/engine/method``). Each design row gives hardware, gpus, engine, method, block,
    budget, accept_len and context_tokens; tok/s gets lognormal noise ``noise_sd``.

    Examples
    --------
    >>> truth = {"step_ar_ms": {"b300x8": 8.0}, "moe_share": {"b300x8": 0.5},
    ...          "moe_shape": {"b300x8": 0.5}, "ctx_ms_per_unit": {"b300x8": 2.0},
    ...          "ctx_verify_exponent": 0.5, "overhead_frac": {}, "noise_sd": 0.0}
    >>> row = {"hardware": "b300", "gpus": 8, "engine": "e", "method": "ar", "accept_len": 1}
    >>> simulate_measurements(truth, [row], seed=0).splitlines()[1].split(",")[10]
    '125'
    """
    rng = np.random.default_rng(seed)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for d in design:
        system = system_label(d["hardware"], int(d["gpus"]))
        block, budget = d.get("block"), d.get("budget")
        verify = derive_verify_tokens(d["method"], block, budget)
        assert verify is not None, f"design row {d} needs block or budget"
        ctx = float(d.get("context_tokens") or 0.0)
        target = S.target_ms(truth["step_ar_ms"][system], truth["moe_share"][system],
                             truth["moe_shape"][system], truth["ctx_ms_per_unit"][system],
                             truth["ctx_verify_exponent"], float(verify),
                             ctx / context_unit_tokens, moe_form, np.exp, np.log)
        frac = 0.0 if d["method"] == "ar" else truth["overhead_frac"][
            S.group_label(system, d["engine"], d["method"])]
        step = S.step_ms(target, frac, 1.0)
        tok = S.tok_s(d["accept_len"], step) * float(np.exp(truth["noise_sd"]
                                                            * rng.standard_normal()))
        writer.writerow({"model": model, "hardware": d["hardware"], "gpus": d["gpus"],
                         "engine": d["engine"], "method": d["method"],
                         "block": "" if block is None else block,
                         "budget": "" if budget is None else budget, "verify_tokens": verify,
                         "accept_len": d["accept_len"],
                         "context_tokens": "" if d.get("context_tokens") is None else int(ctx),
                         "tok_s": f"{tok:.4g}", "source": f"simulated (seed {seed})",
                         "notes": ""})
    return out.getvalue()

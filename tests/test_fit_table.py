"""fit's parameter table for a dense target: the roofline's distinct-expert parameters
(``moe_z``, ``moe_distinct_exponent`` of a dense system, and their population ``_mu`` and
``moe_hw_sd`` when every system is dense) price nothing there (distinct(M) = 1, so
``distinct ** exponent`` is 1 whatever the exponent: core/spec.py ``roofline_ms``) and are left
out of the table; ``moe_share`` is the share of the M = 1 step the verify's compute overtakes,
for a dense target its weight read, and a note line says so."""

from __future__ import annotations

import dataclasses

import numpy as np

from ddtree_bayes.cli.fit import parameter_table
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.paths import bundled

CARDS = load_model_cards(bundled("models.csv"))
DENSE = dataclasses.asdict(CARDS["qwen3-8b"])
MOE = dataclasses.asdict(CARDS["kimi-k2.6"])


def diag(name: str, mean: float = 0.5) -> dict:
    return {"parameter": name, "mean": mean, "sd": 0.1, "rhat": 1.001, "ess_bulk": 4000.0,
            "ess_tail": 3000.0, "mcse_mean": 0.002}


def names(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines()[2:]
            if line and not line.startswith("note:")]


def test_the_exponent_prices_nothing_for_a_dense_target():
    """Why they are left out: for a dense card distinct(M) = 1 at any M, and the verify cost is
    the same at exponents 0.1 and 0.9 (hand: 2 x sqrt(1 + (0.05 x 9)^2) / sqrt(1 + 0.05^2)
    = 2.1904 ms at M = 9); for Kimi K2.6 it is not."""
    m = np.array([9.0])
    dense = CARDS["qwen3-8b"].distinct_ratio(m)
    assert float(dense[0]) == 1.0
    at = [float(S.roofline_ms(2.0, 9.0, e, 0.05, dense, 2.0, np.exp, np.log)[0]) for e in (0.1, 0.9)]
    assert at[0] == at[1] and round(at[0], 4) == round(2 * np.sqrt(1 + 0.45 ** 2)
                                                       / np.sqrt(1 + 0.05 ** 2), 4) == 2.1904
    kimi = CARDS["kimi-k2.6"].distinct_ratio(m)
    moe = [float(S.roofline_ms(2.0, 9.0, e, 0.05, kimi, 2.0, np.exp, np.log)[0]) for e in (0.1, 0.9)]
    assert moe[1] > moe[0] * 1.5


def test_a_dense_fit_leaves_the_expert_parameters_out_and_notes_moe_share():
    meta = {"model": {"moe_form": "roofline", "card": DENSE, "target_model": "qwen3-8b"},
            "coords": {"system": ["rtx-4090dx1"]}}
    diagnostics = [diag("moe_z[rtx-4090dx1]", 0.02463), diag("moe_distinct_exponent_mu"),
                   diag("step_ar_ms[rtx-4090dx1]", 12.32), diag("moe_share[rtx-4090dx1]", 0.3974),
                   diag("moe_hw_sd", 0.04), diag("moe_distinct_exponent[rtx-4090dx1]"),
                   diag("noise_sd", 0.031)]
    table = parameter_table(diagnostics, meta)
    assert names(table) == ["step_ar_ms[rtx-4090dx1]", "moe_share[rtx-4090dx1]", "noise_sd"]
    assert table.splitlines()[-1] == (
        "note: qwen3-8b is dense (no experts): moe_share is the share of its M = 1 step that "
        "reads the weights, the part the verify's compute overtakes past the knee; "
        "moe_distinct_exponent, moe_distinct_exponent_mu, moe_hw_sd and moe_z (the distinct "
        "experts M tokens read) price nothing for it and are left out (--format json lists "
        "them)")


def test_a_fit_of_a_dense_and_an_moe_model_keeps_what_the_moe_reads():
    dense, moe = "qwen3-8b@rtx-4090dx1", "kimi-k2.6@b300x8"
    meta = {"model": {"moe_form": "roofline", "card": MOE, "target_model": "kimi-k2.6",
                      "model_cards": {"kimi-k2.6": MOE, "qwen3-8b": DENSE}},
            "coords": {"system": [moe, dense]}}
    diagnostics = [diag(f"moe_z[{moe}]"), diag(f"moe_z[{dense}]"),
                   diag("moe_distinct_exponent_mu"), diag("moe_hw_sd"),
                   diag(f"moe_share[{moe}]"), diag(f"moe_share[{dense}]"),
                   diag(f"moe_distinct_exponent[{moe}]"), diag(f"moe_distinct_exponent[{dense}]")]
    table = parameter_table(diagnostics, meta)
    assert names(table) == [f"moe_z[{moe}]", "moe_distinct_exponent_mu", "moe_hw_sd",
                            f"moe_share[{moe}]", f"moe_share[{dense}]",
                            f"moe_distinct_exponent[{moe}]"]
    assert table.splitlines()[-1].startswith(
        "note: qwen3-8b is dense (no experts): moe_share is the share of its M = 1 step")
    assert "moe_distinct_exponent and moe_z (the distinct" in table.splitlines()[-1]


def test_the_power_form_keeps_every_parameter():
    """In the power form MOE(M) = moe1 x M ** alpha grows for a dense model too: nothing is
    left out and nothing noted; nor for an MoE target in the roofline form."""
    for form, card in (("power", DENSE), ("roofline", MOE)):
        meta = {"model": {"moe_form": form, "card": card}, "coords": {"system": ["h100x1"]}}
        diagnostics = [diag("moe_z[h100x1]"), diag("moe_share[h100x1]"), diag("moe_hw_sd")]
        table = parameter_table(diagnostics, meta)
        assert names(table) == ["moe_z[h100x1]", "moe_share[h100x1]", "moe_hw_sd"]
        assert "note:" not in table

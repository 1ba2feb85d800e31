"""Follow-ups on the trust of an answer: the Student-t run noise beside a measured
configuration, a quote opened after a quoted word, what `add --data` checks of its file, and a
KV cache scheme's fields `card add` does not read."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ddtree_bayes.engine import predictive as P
from test_structure_model import structured_point_mass

SEED = 20261130


# ------------------------------------------------ Student-t noise beside a measured configuration
def _t_fit(nu: float = 4.0, n: int = 20000, **overrides):
    """The structured B300 point mass with run-to-run noise 0.03 and a Student-t likelihood."""
    return structured_point_mass(n=n, noise_sd=0.03, likelihood_nu=nu, **overrides)


def _ddtree(draws, budget: int, context: float = 0.0):
    return P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                              block=8, budget=budget, verify_tokens=None, context_tokens=context)


def _anchor_var(draws, nu: float) -> float:
    """By hand: the variance of the budget-8 anchor's discrepancy under the t likelihood,
    Normal(A r / T, A - A^2 / T) divided by a weight Gamma((nu + 1) / 2, rate (nu + r^2/T) / 2),
    whose mean inverse is (nu + r^2 / T) / (nu - 1); A = (0.04 log 9)^2, T = A + 0.03^2, r the
    row's log offset from the structural step (4.4 / 303 x 1000 = 14.521 ms against 16.842)."""
    (row,) = [r for r in draws.measurements.rows if r.method == "ddtree"]
    structural = P.step_components(draws, _ddtree(draws, 8), np.random.default_rng(0),
                                   anchor=False)[0]["step"][0]
    r = math.log(row.tok_s / (row.accept_len * 1000.0)) + math.log(structural)
    a = (0.04 * math.log(9.0)) ** 2
    total = a + 0.03 ** 2
    return (a - a ** 2 / total) * (nu + r ** 2 / total) / (nu - 1.0)


def test_student_t_noise_one_token_above_a_measured_context_is_the_measured_ones():
    """Under a Student-t likelihood a run at the measured SGLang budget-8 configuration drew
    normal noise about its anchored mean, and one token of context above it (the same
    deployment, its own deviation drawn by the same anchor, nothing more to add) drew t noise
    of the same sd: its 90% interval went from 62.39-73.56 tok/s per emitted token to
    61.73-74.54 (nu 4), a family change at one token. The run's scatter about a configuration
    is normal in the likelihood (its S2 factor): both are now. By hand, Var(log tok/s) = the
    anchor's variance + 0.03^2 at both (the t's would be 0.03^2 x 4 / 2 at the second)."""
    draws = _t_fit()
    at, _ = P.per_token_draws(draws, _ddtree(draws, 8), SEED)
    above, _ = P.per_token_draws(draws, _ddtree(draws, 8, context=1.0), SEED)
    q = [0.05, 0.25, 0.5, 0.75, 0.95]
    np.testing.assert_allclose(np.quantile(above, q), np.quantile(at, q), rtol=0.003)
    hand = _anchor_var(draws, 4.0) + 0.03 ** 2
    assert hand == pytest.approx(0.002659, abs=1e-6)
    for tok_s in (at, above):
        assert np.var(np.log(tok_s)) == pytest.approx(hand, rel=0.08)


def test_student_t_noise_one_budget_above_a_measured_one_adds_only_its_discrepancy_as_t():
    """One budget above the measured one (budget 9, M = 10, distance log(10/9) = 0.105 from
    it) the run drew t noise of sd sqrt(0.03^2 + (0.04 x 0.105)^2): Var(log tok/s) 0.00353
    against 0.00267 at budget 8. The run's scatter stays normal; the configuration's new
    discrepancy, 0.0042, is t: by hand the anchor's variance + 0.03^2 + 0.0042^2 x 4 / 2."""
    draws = _t_fit()
    got, _ = P.per_token_draws(draws, _ddtree(draws, 9), SEED)
    hand = _anchor_var(draws, 4.0) + 0.03 ** 2 + (0.04 * math.log(10 / 9)) ** 2 * 2.0
    assert np.var(np.log(got)) == pytest.approx(hand, rel=0.08)
    # far from it the configuration's discrepancy dominates, and it is t (budget 32, block 16:
    # the default question)
    far = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                             block=16, budget=32, verify_tokens=None, context_tokens=0.0)
    got, _ = P.per_token_draws(draws, far, SEED)
    d = math.log(33 / 9)
    hand = _anchor_var(draws, 4.0) + 0.03 ** 2 + (0.04 * d) ** 2 * 2.0
    assert np.var(np.log(got)) == pytest.approx(hand, rel=0.08)


def test_update_scores_a_row_one_token_above_a_measured_context_as_predict_draws_it():
    """`update` scored a new row with predict's noise family: t one token above the measured
    budget-8 context, normal at it. A row at the measured configuration's 95th percentile of
    runs (by predict's own draws) sat at the 94.9th there and the 92.9th one token above (nu
    4). Both now split the noise as predict does (the percentile through the t's scale
    mixture where both parts are there), and the percentile is the share of predict's draws
    below the row, to Monte Carlo."""
    from ddtree_bayes.core.data import parse_row
    from ddtree_bayes.workflows import living

    draws = _t_fit(n=4000)
    at, _ = P.per_token_draws(draws, _ddtree(draws, 8), SEED)
    tok_s = float(np.quantile(4.4 * at, 0.95))
    rows = [parse_row("t", 2 + i, {"model": "kimi-k2.6", "hardware": "b300", "gpus": "8",
                                   "engine": "sglang", "method": "ddtree", "block": "8",
                                   "budget": str(budget), "verify_tokens": "",
                                   "accept_len": "4.4", "context_tokens": context,
                                   "tok_s": repr(tok_s), "source": "t", "notes": ""},
                      {"b300": {}})
            for i, (budget, context) in enumerate(((8, ""), (8, "1"), (9, "")))]
    scores = living.score_rows(draws, rows, seed=SEED)
    assert scores[0]["percentile"] == pytest.approx(0.95, abs=0.01)
    assert scores[1]["percentile"] == pytest.approx(scores[0]["percentile"], abs=0.002)
    # budget 9: normal run noise and a t discrepancy of 0.0042, its percentile the share of
    # predict's draws there below the row
    nine, _ = P.per_token_draws(draws, _ddtree(draws, 9), SEED)
    assert scores[2]["percentile"] == pytest.approx(np.mean(4.4 * nine < tok_s), abs=0.01)

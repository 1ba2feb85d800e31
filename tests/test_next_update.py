"""``next``'s expected width is what ``add`` + ``update`` + ``predict`` would show.

On the bundled fit, ``next --query '--engine sglang --accept 14'`` promised E[90% width] 124
+- 3.7 tok/s for measuring the query itself, while adding such a row (at next's own simulated
results) and running ``update`` gave 90 +- 3.6 on average (84 at the median result): next
reweighted the draws of the query's answer *before* the measurement, whose mean carries the
discrepancy of the row it is anchored to now (budget 8, a per-draw shift of sd 0.034) and its
own discrepancy, neither of which a measurement of the query could move. After ``update`` the
query is anchored to its own new row: its discrepancy is conditioned on that row's residual.
"""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.model_cards import ModelCard
from ddtree_bayes.core.pairs import target_models_meta
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.workflows import decisions as D
from test_structure_model import structured_point_mass

#: z of the 95th percentile (a 90% equal-tailed interval is +-1.6449 sd of log tok/s)
Z95 = 1.6448536269514722


def b300_point_mass(n: int, run: float, structure_sd: float):
    """The structured point mass on B300 (AR 133 tok/s and DDTree block 8 budget 8 at 303),
    its rows only and the model metadata a fit of them stores (so that ``update`` could
    reweight it: the same parameters once a row is added in its overhead group)."""
    # (the per-pass and per-node population with no spread: each group's own ratio is its
    # mean, so restructuring the group as a second tree budget arrives changes no number)
    draws = structured_point_mass(
        n=n, noise_sd=run, structure_sd=structure_sd,
        **{f"spec_{part}_{name}": value
           for part, ratio in (("pass", 0.1), ("tree", 0.002))
           for name, value in (("log_mu", math.log(ratio)), ("log_sd", 0.0), ("z", [0.0]))})
    lines = draws.data_csv.splitlines(keepends=True)
    text = "".join([lines[0], *(line for line in lines[1:] if ",b300," in line)])
    draws = dataclasses.replace(draws, data_csv=text, memo={})
    draws.__dict__.pop("measurements", None)
    model = draws.meta["model"]
    cards = {model["card"]["model"]: ModelCard(**model["card"])}
    priors = dataclasses.replace(draws.priors, moe_form="roofline", step_form="structured")
    spec = S.build_spec(draws.measurements, priors, hardware=draws.hardware, cards=cards,
                        drafters=None)
    made = json.loads(json.dumps({**target_models_meta(draws.measurements),
                                  **S.model_meta(spec, priors)}))
    draws.meta["model"] = {**model, **made}
    draws.meta["coords"] = {k: list(v) for k, v in spec.coords.items()}
    return draws


def test_measuring_the_query_itself_anchors_it_to_the_new_row_by_hand():
    """Every parameter is a point mass, so no measurement can move the weights of the draws:
    next said E[width] = now for measuring the query itself (reduction exactly 0). What the
    query's answer does after ``add`` and ``update`` is conditioning its configuration's
    discrepancy e ~ Normal(0, A) on the row's residual r = y - mu (the likelihood's, with
    run-to-run sd s_run): e | r ~ Normal(A r / (A + s_run^2), A s_run^2 / (A + s_run^2)), and a
    new run adds s_run again. So log tok/s ~ Normal(mu + A r / (A + s_run^2), s^2), s^2 =
    A s_run^2 / (A + s_run^2) + s_run^2, whose 90% width is exp(centre) x 2 sinh(1.6449 s)."""
    n, run, seed, k = 4000, 0.03, 7, 8
    draws = b300_point_mass(n, run, structure_sd=0.2)
    query = D.parse_query(draws, "--hardware b300 --engine sglang --method ddtree --block 16 "
                                 "--budget 32 --accept 14")
    itself = D.Candidate(query.scenario, 14.0, "the query itself")
    out = D.next_measurements(draws, query, [itself], k=k, seed=seed)
    row = out["rows"][0]
    # the candidate's likelihood: the structural step, sd^2 = s_run^2 + A at its distance
    parts = P.step_components(draws, query.scenario, np.random.default_rng(0), anchor=False)[0]
    mu = math.log(14.0 * 1000.0 / parts["step"][0])
    sd = float(parts["log_sd"][0])
    a = sd ** 2 - run ** 2
    assert a > 10 * run ** 2   # (the discrepancy dominates: the anchor moves a lot)
    # next's simulated results: y_k = mu + sd eps_k (every draw is the same draw)
    rng = np.random.default_rng([seed, 11])
    rng.integers(0, n, size=k)
    eps = rng.standard_normal(k)
    r = sd * eps
    s = math.sqrt(a * run ** 2 / (a + run ** 2) + run ** 2)
    widths = np.exp(mu + a * r / (a + run ** 2)) * 2.0 * math.sinh(Z95 * s)
    assert row["expected_width"] == pytest.approx(widths.mean(), rel=0.03)
    # ~ sqrt(2) s_run: a quarter of the width now (sqrt(s_run^2 + A))
    assert row["reduction_rel"] > 0.6


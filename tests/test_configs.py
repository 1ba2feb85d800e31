"""Rows -> configurations (core/likelihood.py): the key, the sufficient statistics, the
per-configuration distances, and the per-configuration posterior checks (engine/fitted_rows.py).
numpy only: the PyMC likelihood on these statistics is checked in test_model.py and
test_structure_model.py."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import load_priors
from ddtree_bayes.core.data import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    Measurement,
    load_hardware,
    load_measurements,
)
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import fitted_rows as M
from ddtree_bayes.engine.testing import point_mass_draws

REPO = Path(__file__).resolve().parents[1]
BASE = Measurement(row=2, model="kimi-k2.6", hardware="b300", gpus=8, engine="sglang",
                   method="ddtree", block=8, budget=8, verify_tokens=9, accept_len=4.4,
                   context_tokens=None, tok_s=303.0, source="notes", notes="")
#: another valid value for every column that enters step_ms or the likelihood's sd
OTHER = {"model": "qwen3-8b", "hardware": "rtx-pro-6000", "gpus": 4, "engine": "vllm",
         "method": "eagle3", "block": 16, "budget": 32, "verify_tokens": 33,
         "context_tokens": 0.0, "concurrency": 8, "drafter": "test/k25-head"}


def test_every_column_is_classified():
    assert set(C.CONFIG_COLUMNS) | set(C.ROW_COLUMNS) == set(COLUMNS + OPTIONAL_COLUMNS)
    assert not set(C.CONFIG_COLUMNS) & set(C.ROW_COLUMNS)
    assert set(OTHER) == set(C.CONFIG_COLUMNS)


@pytest.mark.parametrize("column", C.CONFIG_COLUMNS)
def test_rows_differing_in_a_step_column_are_not_merged(column):
    other = dataclasses.replace(BASE, row=3, **{column: OTHER[column]})
    row_config, first = C.group_rows([BASE, other, dataclasses.replace(BASE, row=4)])
    assert row_config.tolist() == [0, 1, 0] and first.tolist() == [0, 1]


def test_rows_differing_only_in_acceptance_tok_s_source_notes_are_merged():
    runs = [BASE, dataclasses.replace(BASE, row=3, accept_len=4.1, tok_s=290.0,
                                      source="rerun", notes="second run")]
    row_config, first = C.group_rows(runs)
    assert row_config.tolist() == [0, 0] and first.tolist() == [0]
    z = np.log([303.0 / 4400.0, 290.0 / 4100.0])
    n, zbar, s2 = C.sufficient_stats(row_config, z, 1)
    assert (n[0], zbar[0]) == (2.0, pytest.approx(z.mean(), rel=1e-14))
    assert s2[0] == pytest.approx((z[0] - z[1]) ** 2 / 2, rel=1e-12)


def test_normal_logp_from_stats_equals_the_row_sum():
    rng = np.random.default_rng(3)
    z = rng.normal(0.2, 0.1, size=7)
    idx = np.array([0, 1, 1, 1, 2, 2, 0])
    mean, sd = np.array([0.1, 0.25, 0.3]), np.array([0.05, 0.2, 0.1])
    rows = (-0.5 * ((z - mean[idx]) / sd[idx]) ** 2 - np.log(sd[idx])
            - 0.5 * math.log(2 * math.pi))
    for w in (np.ones(7), np.array([1, 0, 1, 1, 0, 0, 1.0])):   # row 4 and 5: n = 0
        got = C.normal_logp(mean, sd, *C.sufficient_stats(idx, z, 3, w), np.log)
        want = np.bincount(idx, weights=w * rows, minlength=3)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert C.normal_logp(mean, sd, *C.sufficient_stats(idx, z, 3, np.zeros(7)), np.log
                         ).tolist() == [0.0, 0.0, 0.0]


def _row_distances_reference(rows, verify, passes):
    """The former per-row O(rows^2) definition: distance from the nearest row on the same
    system with another (verify, passes)."""
    out = np.zeros(len(rows))
    for i, r in enumerate(rows):
        others = [j for j, o in enumerate(rows) if o.system == r.system
                  and (verify[j], passes[j]) != (verify[i], passes[i])]
        out[i] = S.config_distance(verify[i], passes[i], verify[others], passes[others])
    return out


@pytest.mark.parametrize("name", ["llamacpp_mtp_qwen38_27b_rtx5090.csv",
                                  "vllm_ddtree_qwen38_27b_rtxa6000_budget.csv"])
def test_config_distances_match_the_row_definition(name):
    from ddtree_bayes.core.config import parse_priors
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.workflows.extrapolation import with_forms

    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements(REPO / "data" / "public" / name, hw)
    cfg = parse_priors(with_forms(bundled("priors.toml").read_text(), "roofline", "structured"))
    spec = S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv")))
    want = _row_distances_reference(data.rows, spec.verify_tokens, spec.row_passes)
    np.testing.assert_allclose(spec.row_distance, want, rtol=0, atol=1e-15)
    assert want.max() > 0


def test_build_spec_groups_repeated_runs():
    from test_model import repeated_runs_csv

    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements("r.csv", hw,
                             text=repeated_runs_csv(bundled("measurements.csv").read_text()))
    spec = S.build_spec(data, load_priors(bundled("priors.toml")))
    assert spec.row_config.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1]
    assert spec.config_labels == tuple(str(r) for r in range(2, 11))
    assert spec.verify_tokens.tolist() == [1, 9, 1, 1, 1, 1, 1, 4, 4, 9, 9]
    assert spec.configs.verify_tokens.tolist() == [1, 9, 1, 1, 1, 1, 1, 4, 4]
    assert "measurement" not in spec.coords and len(spec.coords["configuration"]) == 9


# ------------------------------------------------------------ posterior checks per config
def _b300_repeats(draws, extra: list[tuple[float, float]]):
    """Point-mass draws over the two B300 rows plus more runs of the DDTree one."""
    lines = [ln for ln in draws.data_csv.splitlines() if ln.startswith("model,") or ",b300," in ln]
    ddtree = lines[2].split(",")
    for accept, tok in extra:
        row = list(ddtree)
        row[8], row[10] = str(accept), str(tok)
        lines.append(",".join(row[:11] + ['"HYPOTHETICAL repeat"', f'"run {tok}"']))
    return dataclasses.replace(draws, data_csv="\n".join(lines) + "\n")


def test_check_measurements_scales_a_configuration_to_each_row():
    """Two runs of one configuration with acceptance 4.4 and 5.5: the same step, so their
    predictive quantiles differ by the factor 5.5 / 4.4; percentiles as counted by hand."""
    draws = _b300_repeats(point_mass_draws(n=4000, noise_sd=0.05), [(5.5, 380.0)])
    ppc = M.check_measurements(draws, seed=5)
    assert [r["configuration"] for r in ppc] == [2, 3, 3]
    a, b = ppc[1], ppc[2]
    for k in ("median", "lo50", "hi50", "lo90", "hi90"):
        assert b[k] / a[k] == pytest.approx(5.5 / 4.4, rel=1e-12)
    # the point mass: step 8 * (0.5 + 0.5 * (1 + 0.0625 * 8)) / 0.8 = 12.5 ms at M = 9
    mo = M.moments(draws, seed=5)
    assert np.exp(-mo.mean[0, 1]) == pytest.approx(12.5)
    # check_measurements' draws: one noise sample per (draw, configuration), seed + 1
    per_unit = np.exp(mo.mean + mo.sd * np.random.default_rng(6).standard_normal((4000, 2)))
    for r in (a, b):
        want = np.mean(per_unit[:, 1] * r["accept_len"] * 1000 < r["measured"])
        assert r["percentile"] == pytest.approx(want, abs=1e-12)


def test_pointwise_per_configuration_is_the_joint_of_its_rows():
    draws = _b300_repeats(point_mass_draws(n=8, noise_sd=0.05), [(5.5, 380.0), (4.0, 280.0)])
    mo = M.moments(draws)
    rows = M.pointwise(mo, np.random.default_rng(0), "row")
    configs = M.pointwise(mo, np.random.default_rng(0), "configuration")
    assert rows["loglik"].shape == (8, 4) and configs["loglik"].shape == (8, 2)
    np.testing.assert_allclose(configs["loglik"][:, 1], rows["loglik"][:, 1:].sum(axis=1),
                               rtol=1e-12)
    np.testing.assert_allclose(configs["loglik"][:, 0], rows["loglik"][:, 0], rtol=1e-12)
    assert configs["labels"] == ["2", "3"]
    assert configs["observed"][1] == pytest.approx(np.mean(np.log([303.0, 380.0, 280.0])))
    assert M.loo_unit(M.LOO_ROW_LIMIT) == "row"
    assert M.loo_unit(M.LOO_ROW_LIMIT + 1) == "configuration"


def test_student_t_readers_use_the_fits_likelihood():
    """A fit with ``likelihood_nu`` 4: the pointwise log-likelihood (PSIS-LOO's input) of a
    row is t_4(log tok_s | mu, sd) and that of a configuration of repeated runs is
    core/likelihood.config_logp's; importance weights (update) read the same density; and the
    same fit without it reads the normal ones. mu and sd by hand: the point mass's B300
    DDTree step 12.5 ms, sd 0.05."""
    from scipy import stats

    from ddtree_bayes.engine import importance as I

    normal = _b300_repeats(point_mass_draws(n=8, noise_sd=0.05), [(5.5, 380.0)])
    t4 = dataclasses.replace(normal, variables={**normal.variables,
                                                "likelihood_nu": np.full(8, 4.0)})
    mo = M.moments(t4)
    assert mo.nu == 4.0 and M.moments(normal).nu is None
    rows = M.pointwise(mo, np.random.default_rng(0), "row")
    mu = math.log(4.4 * 1000 / 12.5)
    assert rows["loglik"][0, 1] == pytest.approx(stats.t.logpdf(math.log(303.0), 4.0, mu, 0.05),
                                                 rel=1e-12)
    assert M.pointwise(M.moments(normal), np.random.default_rng(0), "row")["loglik"][0, 1] \
        == pytest.approx(stats.norm.logpdf(math.log(303.0), mu, 0.05), rel=1e-12)
    configs = M.pointwise(mo, np.random.default_rng(0), "configuration")
    n, zbar, s2 = mo.stats()
    want = C.config_logp(mo.mean, mo.run, mo.between, n[None, :], zbar[None, :], s2[None, :],
                         4.0, np.log)
    np.testing.assert_allclose(configs["loglik"], want, rtol=1e-12)
    # importance (update's reweighting): the rows' density under the same likelihood
    table = I.table(t4, t4.measurements)
    np.testing.assert_allclose(I.log_likelihood(t4, t4.measurements, t=table)[:, 1:3],
                               rows["loglik"][:, 1:3], rtol=1e-12)
    np.testing.assert_allclose(I.summed_log_likelihood(t4, table, [1, 2]),
                               configs["loglik"][:, 1], rtol=1e-12)


def test_student_t_simulation_keeps_the_runs_scatter_normal():
    """SBC's simulated data under a t likelihood with repeated runs: each configuration's runs
    scatter about their mean with the run-to-run sd (S2 / (n - 1) ~ run^2 on average), and
    their mean deviates from mu with the t's heavy tails (kurtosis well above the normal's 3)."""
    draws = _b300_repeats(point_mass_draws(n=4, noise_sd=0.05, likelihood_nu=4.5),
                          [(4.4, 303.0)] * 3)
    measurements, log_mu = M.measurement_log_mu(draws)
    rng = np.random.default_rng(11)
    sims = np.array([M.simulate_log_tok_s(draws, measurements, log_mu[0], rng, repeated=True)
                     for _ in range(20000)])
    ddtree = sims[:, [1, 2, 3, 4]] - log_mu[0][[1, 2, 3, 4]]
    run2 = draws.variables["noise_sd"][0] ** 2   # no config_share in the point mass: all run
    assert np.var(ddtree - ddtree.mean(axis=1, keepdims=True), ddof=1, axis=1).mean() \
        == pytest.approx(run2, rel=0.02)
    mean_dev = ddtree.mean(axis=1)
    kurtosis = np.mean(mean_dev ** 4) / np.mean(mean_dev ** 2) ** 2
    assert kurtosis > 5.0


def test_row_logp_without_nu_is_the_normal_written_as_before():
    """The default (normal) per-row density feeds PSIS-LOO: the same digits as the expression
    it always was, not only close to them."""
    rng = np.random.default_rng(3)
    z, mean, sd = rng.normal(size=500), rng.normal(size=500), rng.uniform(0.01, 0.2, 500)
    old = -0.5 * ((z - mean) / sd) ** 2 - np.log(sd) - 0.5 * math.log(2 * math.pi)
    assert np.array_equal(C.row_logp(z, mean, sd, None), old)


def test_update_scores_a_row_with_the_fits_likelihood():
    """update's percentile of a new row (a configuration the fit did not measure: budget
    32 on B300) is the mean over draws of the normal CDF, or of the t_4 CDF for a fit with
    likelihood_nu 4 (a 3-sd row: surprise under the normal, not under the t)."""
    from scipy import stats

    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.workflows.living.scoring import score_rows

    base = point_mass_draws(n=8, noise_sd=0.05)
    row = dataclasses.replace(BASE, row=99, block=16, budget=32, verify_tokens=33,
                              accept_len=10.0)
    sc = P.row_scenario(base, row)
    parts, _ = P.step_components(base, sc, np.random.default_rng(0))
    log_mu = math.log(10.0 * 1000.0 / parts["step"][0])
    sd = float(parts["log_sd"][0])
    row = dataclasses.replace(row, tok_s=math.exp(log_mu + 3.0 * sd))
    t4 = dataclasses.replace(base, variables={**base.variables,
                                              "likelihood_nu": np.full(8, 4.0)})
    normal, student = score_rows(base, [row], 1)[0], score_rows(t4, [row], 1)[0]
    assert normal["percentile"] == pytest.approx(stats.norm.cdf(3.0), rel=1e-9)
    assert student["percentile"] == pytest.approx(stats.t.cdf(3.0, 4.0), rel=1e-9)
    assert (normal["status"], student["status"]) == ("surprise", "ok")


def test_a_count_of_one_is_singular():
    """Texts that counted with a fixed plural read "a budget of 1 draft tokens", "a chain of
    at most 1 tokens per step", "eagle3 verifying 1 tokens per step", "the fit measured h100
    on 1 GPUs" and "sampling 1 chains x 1 draws"."""
    from types import SimpleNamespace as NS

    from ddtree_bayes.core.config import SamplerSettings
    from ddtree_bayes.core.methods import load_methods, max_accept, shaped_budget
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine.scenario import node_warning
    from ddtree_bayes.engine.testing import multi_model_draws

    table = load_methods(bundled("priors.toml").read_text())
    assert shaped_budget("ddtree", 16, 1, 5, table)[1] == (
        "a budget of 1 draft token is verified as 2 tokens per step, not 5")
    assert shaped_budget("eagle3", 1, None, 1, table)[1] == (
        "eagle3 with block 1 and no budget is a chain of 1 draft token, verified as 2 tokens "
        "per step, not 1")
    assert shaped_budget("dflash", 2, 2, None, table)[1] == (
        "dflash drafts a chain of at most 1 token per step (block 2 less its anchor), not a "
        "budget of 2")
    assert max_accept("eagle3", None, None, table, 1).refusal("--accept 2") == (
        "--accept 2 is above what eagle3 verifying 1 token per step can emit (at most 1 token "
        "per step: the tokens it verifies)")
    # (llama-3.1-8b-instruct measured on one H100: 16 of them are more than a node's 8)
    said = node_warning(multi_model_draws(), NS(hardware="h100", gpus=16, measured=False))
    assert said is not None and said.endswith("(the fit measured h100 on 1 GPU)")
    assert SamplerSettings(chains=1, draws=1).chains_x_draws() == "1 chain x 1 draw"
    assert SamplerSettings(chains=4).chains_x_draws() == "4 chains x auto draws"
    assert SamplerSettings(chains=4, draws=1000).chains_x_draws() == "4 chains x 1000 draws"


def test_identical_repeats_are_read_to_the_records_resolution():
    """Eight runs recorded at one value (565 tok/s eight times: S2 = 0) cannot show a
    run-to-run scatter below the records' resolution. Read literally, their within-
    configuration density ``-(n - 1) log run_sd`` grows without bound as run_sd -> 0, and with
    n >= 5 outgrows config_share's Beta(2, 2) prior ((1 - share)^(1 - (n - 1)/2): an improper
    posterior, R-hat 5.7 in the 17-row refit). Their spread is read as at least the
    resolution, S2 >= (n - 1) q^2 with q = C.RESOLUTION: the density of eight runs that
    scatter by exactly that about the same mean, by hand and by scipy."""
    from scipy import stats

    q = C.RESOLUTION
    assert q == 0.001
    z = np.full(8, math.log(565.0 / 13100.0))
    n, zbar, s2 = C.sufficient_stats(np.zeros(8, dtype=int), z, 1)
    assert n.tolist() == [8.0] and s2[0] < 1e-24
    got = C.grouped_logp(zbar - 0.01, 0.001, 0.02, n, zbar, s2, np.log)[0]
    by_hand = (-4 * math.log(2 * math.pi) - 7 * math.log(0.001)
               - 0.5 * math.log(0.001 ** 2 + 8 * 0.02 ** 2) - 7 * q ** 2 / (2 * 0.001 ** 2)
               - 8 * 0.01 ** 2 / (2 * (0.001 ** 2 + 8 * 0.02 ** 2)))
    assert got == pytest.approx(by_hand, rel=1e-12)
    assert got == pytest.approx(40.374924696234785 - 0.0008 / 0.006402, rel=1e-12)
    spread = zbar[0] + q * math.sqrt(7 / 8) * np.array([1, -1] * 4)   # S2 = 7 q^2, same mean
    cov = 0.001 ** 2 * np.eye(8) + 0.02 ** 2
    assert got == pytest.approx(stats.multivariate_normal(np.full(8, zbar[0] - 0.01), cov)
                                .logpdf(spread), rel=1e-10)
    # bounded as run_sd -> 0 (it rose as -7 log run_sd): its largest value is at run_sd = q
    runs = np.geomspace(1e-7, 0.1, 801)
    dens = C.grouped_logp(zbar - 0.01, runs, 0.02, n, zbar, s2, np.log)
    assert runs[np.argmax(dens)] == pytest.approx(q, rel=0.02)
    assert dens[0] < dens.max() - 1e6
    # the Student-t likelihood reads the runs' scatter about their mean alike
    assert C.config_logp(zbar - 0.01, 0.002, 0.02, n, zbar, s2, 4.0, np.log)[0] == pytest.approx(
        C.config_logp(zbar - 0.01, 0.002, 0.02, n, zbar, np.full(1, 7 * q ** 2), 4.0,
                      np.log)[0], rel=1e-12)
    # a singleton, and repeats that differ by more than the resolution, are read as they are
    one = C.grouped_logp(0.1, 0.03, 0.02, np.ones(1), np.full(1, 0.15), np.zeros(1), np.log)[0]
    assert one == pytest.approx(stats.norm(0.1, math.hypot(0.03, 0.02)).logpdf(0.15), rel=1e-12)
    two = np.log([131.0, 133.0])
    n2, zbar2, s22 = C.sufficient_stats(np.zeros(2, dtype=int), two, 1)
    assert C.grouped_logp(4.88, 0.03, 0.02, n2, zbar2, s22, np.log)[0] == pytest.approx(
        stats.multivariate_normal(np.full(2, 4.88), 0.03 ** 2 * np.eye(2) + 0.02 ** 2)
        .logpdf(two), rel=1e-12)

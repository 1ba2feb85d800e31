"""The PyMC model built without sampling: variables, shapes, log-density at a known point."""

import math

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.engine.inference import reproducible_pytensor

reproducible_pytensor()
import pymc as pm  # noqa: E402

from ddtree_bayes.engine.model import build_model  # noqa: E402


@pytest.fixture(autouse=True)
def fast_compile():
    """Compile test graphs with PyTensor's Python backend: seconds instead of numba's tens."""
    import pytensor

    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        yield


@pytest.fixture(scope="module")
def built(bundled_inputs):
    """The earlier default forms (power-law MoE, SPEC a fraction); the structured and
    roofline forms have their own hand-checked likelihood in tests/test_structure.py."""
    import dataclasses

    data, cfg = bundled_inputs
    cfg = dataclasses.replace(cfg, moe_form="power", step_form="fraction")
    spec = S.build_spec(data, cfg)
    return spec, cfg, build_model(spec, cfg)


def test_variables_and_shapes(built):
    spec, _, m = built
    free = {rv.name for rv in m.free_RVs}
    assert free == {"step_ar_ms", "moe_share", "moe_exponent_mu", "moe_hw_sd", "moe_z",
                    "ctx_ms_per_unit", "ctx_verify_exponent", "overhead_logit_mu",
                    "overhead_logit_sd", "overhead_z", "reduction", "noise_sd"}
    point = m.initial_point()
    assert point["step_ar_ms_log__"].shape == (2,)
    assert point["overhead_z"].shape == (2,)
    assert point["reduction_logodds__"].shape == (1,)
    # the likelihood is a Potential on the 9 configurations' sufficient statistics
    assert m.observed_RVs == []
    assert [p.name for p in m.potentials] == ["log_tok_s"]
    assert m.coords["configuration"] == tuple(str(r) for r in range(2, 11))
    assert {d.name for d in m.deterministics} == {"moe_exponent", "overhead_frac"}


def hand_point():
    """A hand-picked parameter point (constrained scale)."""
    return {"step_ar_ms": np.array([7.5, 11.0]), "moe_share": np.array([0.4, 0.3]),
            "moe_exponent_mu": 0.42, "moe_hw_sd": 0.05, "moe_z": np.array([0.5, -0.5]),
            "ctx_ms_per_unit": np.array([3.0, 3.3]), "ctx_verify_exponent": 0.6,
            "overhead_logit_mu": -1.5, "overhead_logit_sd": 0.3,
            "overhead_z": np.array([0.2, -0.4]), "reduction": np.array([0.4]),
            "noise_sd": 0.03}


def unconstrained(m, p):
    """A constrained-scale parameter point -> the sampler's unconstrained point."""
    import pytensor.tensor

    ip = {}
    for rv in m.free_RVs:
        value_var = m.rvs_to_values[rv]
        tr = m.rvs_to_transforms[rv]
        x = np.asarray(p[rv.name], dtype=float)
        ip[value_var.name] = (tr.forward(pytensor.tensor.as_tensor_variable(x)).eval() if tr is not None
                                  else x)
    return ip


def hand_mu(spec, p):
    """Per row, the modelled log tok/s log(accept * 1000 / step) of the power/fraction forms."""
    expo = p["moe_exponent_mu"] + p["moe_hw_sd"] * p["moe_z"]
    frac = 1 / (1 + np.exp(-(p["overhead_logit_mu"] + p["overhead_logit_sd"] * p["overhead_z"])))
    s = spec.row_system
    target = S.target_ms(p["step_ar_ms"][s], p["moe_share"][s], expo[s],
                         p["ctx_ms_per_unit"][s], p["ctx_verify_exponent"], spec.verify_tokens,
                         spec.context_units, "power", np.exp, np.log)
    f_rows = np.concatenate([frac, [0.0]])[spec.row_group]
    scale = np.concatenate([1 - p["reduction"], [1.0]])[spec.row_relation]
    return np.log(spec.accept_len * 1000 / S.step_ms(target, f_rows, scale))


def hand_row_loglik(spec, p):
    """Per row, log Normal(log tok_s | log(accept * 1000 / step), noise_sd), by hand."""
    mu = hand_mu(spec, p)
    sd = p["noise_sd"]
    return -0.5 * ((spec.log_tok_s - mu) / sd) ** 2 - np.log(sd) - 0.5 * math.log(2 * math.pi)


def test_likelihood_matches_the_numpy_formula(built):
    spec, _, m = built
    p = hand_point()
    ip = unconstrained(m, p)
    loglik = m.compile_logp(vars=[m["log_tok_s"]])(ip)
    # the same likelihood by hand with numpy, one Normal per row
    expected = np.sum(hand_row_loglik(spec, p))
    assert np.isfinite(loglik)
    assert loglik == pytest.approx(expected, rel=1e-9)
    # and the total log-density is finite at that point
    assert np.isfinite(m.compile_logp()(ip))


def repeated_runs_csv(text: str) -> str:
    """The bundled file plus two more runs of the B300 DDTree configuration (file row 3) that
    differ from it in acceptance, tok/s, source and notes only: a configuration of 3 rows."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(rows)
    base = dict(zip(rows[0], rows[2], strict=True))
    for accept, tok, note in (("4.1", "290", "run 2"), ("4.65", "321.5", "run 3")):
        writer.writerow([{**base, "accept_len": accept, "tok_s": tok, "notes": note,
                          "source": "HYPOTHETICAL repeat (test)"}[c] for c in rows[0]])
    return out.getvalue()


def hand_config_loglik(spec, p, rows, share):
    """The joint log-density of some rows of one configuration by hand: multivariate normal,
    covariance run^2 I + config^2 (a shared configuration error integrated out), one run's
    scatter noise_sd split as config^2 = share noise^2, run^2 = (1 - share) noise^2."""
    from scipy import stats

    mu = hand_mu(spec, p)[rows]
    noise2 = p["noise_sd"] ** 2
    cov = (1.0 - share) * noise2 * np.eye(len(rows)) + share * noise2
    return stats.multivariate_normal(mu, cov).logpdf(spec.log_tok_s[rows])


def test_repeated_runs_share_a_configuration_error(built):
    """With repeated runs the rows of a configuration share its own error (config_sd, a share
    config_share of noise_sd's variance): the sufficient statistics give exactly the
    multivariate normal of its rows, by hand; 9 configurations, one of 3 rows (n = 3) and
    eight of 1, at a hand-picked point; then with rows held out (one of the 3 runs, and the
    only row of the 128k-context Eagle3 configuration: n = 0)."""
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.workflows.validation import refit_data

    _, cfg, _ = built
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements("repeats.csv", hw,
                             text=repeated_runs_csv(bundled("measurements.csv").read_text()))
    spec = S.build_spec(data, cfg)
    assert len(spec.rows) == 11 and len(spec.configs) == 9 and spec.repeated
    assert spec.configs.n.tolist() == [1, 3, 1, 1, 1, 1, 1, 1, 1]
    z = spec.log_tok_s - np.log(spec.accept_len * 1000)
    assert spec.configs.zbar[1] == pytest.approx(np.mean(z[[1, 9, 10]]), rel=1e-12)
    assert spec.configs.s2[1] == pytest.approx(np.var(z[[1, 9, 10]]) * 3, rel=1e-9)
    p = {**hand_point(), "config_share": 0.3}
    configs = [[0], [1, 9, 10], *[[k] for k in range(2, 9)]]
    by_hand = [hand_config_loglik(spec, p, rows, 0.3) for rows in configs]
    # a singleton's density does not depend on the share: Normal(mu, noise_sd)
    assert by_hand[0] == pytest.approx(hand_config_loglik(spec, p, [0], 0.9), rel=1e-12)
    for refittable in (False, True):
        m = build_model(spec, cfg, refittable=refittable)
        assert "config_share" in {rv.name for rv in m.free_RVs}
        assert {"config_sd", "run_sd"} <= {d.name for d in m.deterministics}
        ip = unconstrained(m, p)
        (per_config,) = m.compile_logp(vars=[m["log_tok_s"]], sum=False)(ip)
        assert per_config == pytest.approx(by_hand, rel=1e-10)
        # n = 1: Normal(mu, noise_sd); n = 3: not the product of 3 of them
        assert per_config[1] != pytest.approx(
            sum(hand_config_loglik(spec, p, [r], 0.3) for r in (1, 9, 10)), rel=1e-3)
    w = np.ones(11)
    w[[9, 8]] = 0.0        # one of the 3 DDTree runs; the only 128k Eagle3 row
    updates = refit_data(spec, w)
    assert updates["config_n"].tolist() == [1, 2, 1, 1, 1, 1, 1, 1, 0]
    for name, value in updates.items():
        m.set_data(name, value)
    kept = [[r for r in rows if w[r] > 0] for rows in configs]
    assert m.compile_logp(vars=[m["log_tok_s"]])(ip) == pytest.approx(
        sum(hand_config_loglik(spec, p, rows, 0.3) for rows in kept if rows), rel=1e-10)


def test_identical_repeated_runs_are_read_to_the_records_resolution(built):
    """Eight runs of the B300 DDTree configuration recorded at one value (S2 = 0): the model's
    density is that of eight runs scattered by the records' resolution q about the same mean
    (S2 = 7 q^2; core/likelihood.RESOLUTION), by hand with scipy's multivariate normal; read
    literally it grew as -7 log run_sd without bound as config_share -> 1 (an improper
    posterior that NUTS could not sample: R-hat 5.7)."""
    import csv
    import io

    from scipy import stats

    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.likelihood import RESOLUTION
    from ddtree_bayes.core.paths import bundled

    _, cfg, _ = built
    text = bundled("measurements.csv").read_text()
    rows = list(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(rows)
    base = dict(zip(rows[0], rows[2], strict=True))
    for k in range(7):
        writer.writerow([{**base, "source": f"HYPOTHETICAL repeat {k} (test)"}[c]
                         for c in rows[0]])
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements("repeats.csv", hw, text=out.getvalue(), allow_duplicates=True)
    spec = S.build_spec(data, cfg)
    assert spec.configs.n.tolist() == [1, 8, 1, 1, 1, 1, 1, 1, 1]
    assert spec.configs.s2[1] < 1e-24
    share = 0.3
    p = {**hand_point(), "config_share": share}
    noise2 = p["noise_sd"] ** 2
    mu = hand_mu(spec, p)
    same = [1, *range(9, 16)]
    z = spec.log_tok_s[same] + RESOLUTION * math.sqrt(7 / 8) * np.array([1, -1] * 4)
    cov = (1.0 - share) * noise2 * np.eye(8) + share * noise2
    by_hand = stats.multivariate_normal(mu[same], cov).logpdf(z)
    m = build_model(spec, cfg)
    (per_config,) = m.compile_logp(vars=[m["log_tok_s"]], sum=False)(unconstrained(m, p))
    assert per_config[1] == pytest.approx(by_hand, rel=1e-10)
    # bounded as config_share -> 1 (run_sd -> 0): it rose without bound
    near_one = m.compile_logp(vars=[m["log_tok_s"]])(
        unconstrained(m, {**p, "config_share": 1 - 1e-9}))
    assert near_one < m.compile_logp(vars=[m["log_tok_s"]])(unconstrained(m, p))


def test_without_repeats_the_model_has_no_configuration_error(built):
    """One row per configuration: no config_share (it could not be told from the data) and
    the likelihood is one Normal per row, as before."""
    spec, _, m = built
    assert not spec.repeated
    assert not {"config_share", "config_sd", "run_sd"} & {v.name for v in m.named_vars.values()}


def test_held_out_row_removes_exactly_that_rows_likelihood(built):
    """Refittable: a validation fold's recomputed sufficient statistics (the held-out row's
    configuration gets n = 0) remove exactly that row's Normal log-density (the fraction
    form: no discrepancy distances that a held-out configuration would change)."""
    from ddtree_bayes.workflows.validation import refit_data

    spec, cfg, _ = built
    m = build_model(spec, cfg, refittable=True)
    ip = m.initial_point()
    full = m.compile_logp()(ip)
    (config_loglik,) = m.compile_logp(vars=[m["log_tok_s"]], sum=False)(ip)
    w = np.ones(len(spec.rows))
    w[1] = 0.0  # hold out the B300 DDTree row
    updates = refit_data(spec, w)
    assert updates["config_n"].tolist() == [1, 0, 1, 1, 1, 1, 1, 1, 1]
    for name, value in updates.items():
        m.set_data(name, value)
    held_out = m.compile_logp()(ip)
    assert full - held_out == pytest.approx(config_loglik[1], rel=1e-10)
    # new observed values change the likelihood without rebuilding the model
    for name, value in refit_data(spec, np.ones(len(spec.rows)), spec.log_tok_s + 0.01).items():
        m.set_data(name, value)
    assert m.compile_logp()(ip) != pytest.approx(full)


def test_prior_predictive_is_plausible(built):
    spec, _, m = built
    # the likelihood is a Potential: the prior draws ignore it, as they should
    with m, pytest.warns(UserWarning, match="Potentials"):
        prior = pm.sample_prior_predictive(draws=500, random_seed=1).prior
    step_ar = prior["step_ar_ms"].values.reshape(500, -1)
    noise = prior["noise_sd"].values.reshape(500)
    # B300 AR row (first measurement, M = 1 at context 0): step = step_ar_ms, tok/s = 1000 /
    # step with log-normal noise; the prior must cover the measured 133 tok/s widely
    b300 = spec.systems.index("b300x8")
    tok = 1000.0 / step_ar[:, b300] * np.exp(noise * np.random.default_rng(1).standard_normal(500))
    lo, hi = np.quantile(tok, [0.05, 0.95])
    assert lo < 133 < hi
    assert 20 < lo and hi < 600


def test_linear_form_builds(bundled_inputs):
    import dataclasses

    data, cfg = bundled_inputs
    cfg_lin = dataclasses.replace(cfg, moe_form="linear")
    m = build_model(S.build_spec(data, cfg_lin), cfg_lin)
    names = {rv.name for rv in m.free_RVs}
    assert "moe_slope_mu" in names and "moe_exponent_mu" not in names
    assert np.isfinite(m.compile_logp()(m.initial_point()))


def test_real_line_parameters_are_named(bundled_inputs):
    """`diff` shows a change of a parameter that can be 0 or negative as B - A, not in %
    (core.spec.on_real_line: its prior's support, else a name list kept beside SHAPE_NAMES):
    every parameter of the default model (structured overhead, roofline MoE, non-centred) that
    takes a value <= 0 under its prior must be on that list, and every free parameter with an
    unbounded prior too."""
    data, cfg = bundled_inputs
    m = build_model(S.build_spec(data, cfg), cfg)
    names = [v.name for v in (*m.free_RVs, *m.deterministics)]
    draws = pm.draw([m[n] for n in names], draws=300, random_seed=3)
    seen_negative = {n for n, d in zip(names, draws, strict=True) if np.min(d) <= 0}
    real = {n for n in names if S.on_real_line(n, cfg.priors.get(n))}
    assert seen_negative <= real, seen_negative - real
    assert {"spec_tree_engine", "spec_fixed_log_mu", "spec_fixed_log", "moe_distinct_exponent",
            "compute_eff_log", "spec_tree_mean"} <= real
    assert not real & {"step_ar_ms", "spec_tree_ratio", "compute_eff", "noise_sd",
                       "moe_share", "structure_sd"}


def with_student_t(cfg, nu=4.0):
    """The priors plus ``likelihood_nu``: a configuration's mean Student-t."""
    import dataclasses

    from ddtree_bayes.core.config import Prior

    priors = {**cfg.priors, "likelihood_nu": Prior("likelihood_nu", "point", {"value": nu})}
    return dataclasses.replace(cfg, priors=priors)


def test_student_t_likelihood_by_hand(built):
    """With ``likelihood_nu`` 4: a configuration of one row is t_4(z | mu, noise_sd); one of
    three repeated runs is their normal scatter about their mean times a t_4 of the mean
    (scale sqrt(config^2 + run^2 / 3)), the normal factorisation's second factor swapped; a
    held-out configuration (n = 0) adds nothing. By hand with scipy, at a hand-picked point."""
    from scipy import stats

    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.workflows.validation import refit_data

    _, cfg, _ = built
    cfg = with_student_t(cfg)
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements("repeats.csv", hw,
                             text=repeated_runs_csv(bundled("measurements.csv").read_text()))
    spec = S.build_spec(data, cfg)
    p = {**hand_point(), "config_share": 0.3}
    mu = hand_mu(spec, p)
    noise = p["noise_sd"]
    run, own = noise * math.sqrt(0.7), noise * math.sqrt(0.3)
    configs = [[0], [1, 9, 10], *[[k] for k in range(2, 9)]]

    def by_hand(rows):
        if len(rows) == 1:
            return stats.t.logpdf(spec.log_tok_s[rows[0]], 4.0, mu[rows[0]], noise)
        z, m = spec.log_tok_s[rows], mu[rows]
        scale = math.sqrt(own ** 2 + run ** 2 / len(rows))
        joint = hand_config_loglik(spec, p, rows, 0.3)          # the normal model's
        mean_part = stats.norm.logpdf(np.mean(z - m), 0.0, scale)
        return joint - mean_part + stats.t.logpdf(np.mean(z - m), 4.0, 0.0, scale)

    want = [by_hand(rows) for rows in configs]
    for refittable in (False, True):
        m = build_model(spec, cfg, refittable=refittable)
        assert float(m["likelihood_nu"].eval()) == 4.0
        ip = unconstrained(m, p)
        (per_config,) = m.compile_logp(vars=[m["log_tok_s"]], sum=False)(ip)
        assert per_config == pytest.approx(want, rel=1e-10)
    w = np.ones(11)
    w[[9, 8]] = 0.0        # one of the 3 DDTree runs; the only 128k Eagle3 row (n = 0)
    for name, value in refit_data(spec, w).items():
        m.set_data(name, value)
    (per_config,) = m.compile_logp(vars=[m["log_tok_s"]], sum=False)(ip)
    assert per_config[-1] == pytest.approx(0.0, abs=1e-12)
    assert per_config[1] == pytest.approx(by_hand([1, 10]), rel=1e-10)


def test_student_t_without_repeats_is_one_t_per_row(built):
    """One row per configuration: the likelihood is t_nu(log tok_s | mu, noise_sd) per row,
    and a likelihood_nu that is not a fixed value above 2 is refused."""
    from scipy import stats

    spec, cfg, _ = built
    p = hand_point()
    m = build_model(spec, with_student_t(cfg, 5.0))
    ip = unconstrained(m, p)
    want = stats.t.logpdf(spec.log_tok_s, 5.0, hand_mu(spec, p), p["noise_sd"]).sum()
    assert m.compile_logp(vars=[m["log_tok_s"]])(ip) == pytest.approx(want, rel=1e-10)
    with pytest.raises(ValueError, match="a fixed value above 2"):
        build_model(spec, with_student_t(cfg, 2.0))

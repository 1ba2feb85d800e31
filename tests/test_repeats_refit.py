"""A user's repeated measurements of one configuration, recorded at one value, refit by NUTS.

Eight runs of the headline configuration (B300 x8, SGLang, DDTree block 16 budget 32) all
written as 565 tok/s (each at about the 6.5th percentile of the bundled fit's predictive: no
surprise) made `update` refit, and the refit never converged: max R-hat 5.657
(spec_tree_log), 1000 divergences, every chain frozen at config_share = 1 - 2e-16 (run_sd
4e-10, step size 4e-11). Runs with no scatter between them made the within-configuration
density grow without bound as run_sd -> 0 (an improper posterior); their scatter is now read
no finer than the records' resolution (core/likelihood.RESOLUTION, tests/test_configs.py)."""

from __future__ import annotations

import shutil

import pytest

from ddtree_bayes.core.paths import bundled
from test_cli_support import copy_bundled_data

#: one HYPOTHETICAL run of the headline configuration (not a measurement)
RUN = "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,13.1,,{tok},HYPOTHETICAL repeat {k} (test),\n"


@pytest.mark.slow
def test_eight_runs_recorded_at_one_value_refit_converges(tmp_path):
    """The 17-row refit passes every gate at once (R-hat <= 1.01, bulk ESS >= 400, no
    divergence: no remedy); the step model's predictive median of the configuration (the fit's
    posterior predictive check; 570 on seed 20261130) sits between the eight runs' 565 tok/s and
    the bundled fit's median for it (665 at accept 13.1, docs/howto/update.md), and predict,
    anchored to the eight runs, answers at them (565, 90% 563-567)."""
    from ddtree_bayes import api
    from ddtree_bayes.engine.fitted_rows import check_measurements

    work = copy_bundled_data(tmp_path, writable=True)
    (work / "models").mkdir()
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    with (work / "data" / "measurements.csv").open("a") as f:
        f.writelines(RUN.format(tok=565, k=k) for k in range(1, 9))
    result = api.fit(workdir=work, progress=False)
    assert result.converged, result.failures
    assert result.remedies["outcome"] == "passed"
    assert result.divergences == 0
    assert max(r["rhat"] for r in result.diagnostics) <= 1.01
    assert min(r["ess_bulk"] for r in result.diagnostics) >= 400
    fit = api.load(workdir=work)
    checked = [r for r in check_measurements(fit) if r["verify_tokens"] == 33]
    assert len(checked) == 8
    assert all(565.0 < r["median"] < 665.0 for r in checked)
    table = api.predict(fit, hardware="b300", engine="sglang", method="ddtree", block=16,
                        budget=32, accept=13.1, workdir=work)
    assert float(table["median"].iloc[0]) == pytest.approx(565.0, rel=0.002)
    assert float(table["hi90"].iloc[0]) < 600.0

"""Shared fixtures. Real NUTS runs here are session-scoped and few; full-size
parameter-recovery fits live behind the `slow` marker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ddtree_bayes.core.paths import bundled

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def bundled_inputs():
    from ddtree_bayes.api import load_inputs

    return load_inputs(bundled("measurements.csv"), bundled("priors.toml"),
                       bundled("hardware.csv"))


@pytest.fixture(scope="session")
def fitted_workdir(tmp_path_factory):
    """A working directory with data/, models/priors.toml and one real default fit
    (4 chains x 1000 draws with nutpie: the production settings)."""
    from ddtree_bayes import api
    from test_cli_support import copy_bundled_data

    work = copy_bundled_data(tmp_path_factory.mktemp("fitted"))
    (work / "models").mkdir()
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    result = api.fit(workdir=work, progress=False)
    return work, result

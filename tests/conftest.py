"""Shared fixtures. Real NUTS runs here are session-scoped and few; full-size
parameter-recovery fits live behind the `slow` marker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ddtree_bayes.core.paths import bundled

REPO = Path(__file__).resolve().parents[1]

#: Fixtures that run NUTS (a real fit of the bundled data or of a small file): a test using
#: one is in the `nuts` tier, not the fast one.
NUTS_FIXTURES = frozenset({"fitted_workdir", "rtx5090"})


def pytest_collection_modifyitems(config, items):
    """Tiers: every test that is neither `slow` nor `nuts` (marked, or using a fixture of
    :data:`NUTS_FIXTURES`) is `fast` (`pytest -m fast`: the inner loop, no sampling)."""
    for item in items:
        if item.get_closest_marker("slow") or item.get_closest_marker("nuts"):
            continue
        if NUTS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.nuts)
        else:
            item.add_marker(pytest.mark.fast)


@pytest.fixture(autouse=True)
def _fast_tests_never_sample(request, monkeypatch):
    """A test in the fast tier that reaches NUTS fails, naming the fix, instead of making the
    tier slow without anyone noticing (fits in subprocesses are marked `nuts` by hand)."""
    if request.node.get_closest_marker("fast") is None:
        return

    def refuse(*args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} is in the fast tier but ran NUTS: mark it "
                             "@pytest.mark.nuts (or use a point-mass posterior)")

    monkeypatch.setattr("ddtree_bayes.engine.inference.sample", refuse)
    monkeypatch.setattr("ddtree_bayes.workflows.validation.sample_weighted", refuse)


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

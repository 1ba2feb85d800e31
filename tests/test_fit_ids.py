"""A fit's id names what made its posterior, not only its inputs (round 18).

``<UTC time>-<hash>``: the hash was of the inputs and the seed alone, so with the reproducible
clock (``SOURCE_DATE_EPOCH``) ``fit --chains 2 --draws 200 --no-remedy`` in a fresh copy of the
bundled data was saved as ``20261201T000000Z-3bd953e0``, the id the documentation cites for
the bundled 4 x 1000-draw fit, and ``fit --backend pymc`` likewise: one id, three posteriors.
Two such fits saving at once in one folder took the same id and the second replaced the
first's file. The hash now holds the sampler and its settings, the forms asked for and
whether remedies ran, whenever they are not a plain ``fit``'s (so a plain fit's id is what it
always was), and a fit file is never replaced.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import xarray as xr

from ddtree_bayes.core.config import SamplerSettings
from ddtree_bayes.engine import fitting, inference, store

H = "ab" * 32   # an inputs hash
SEED = 20261130


def test_a_plain_fits_id_hashes_its_inputs_and_seed_as_before(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796083200")
    plain = hashlib.sha256(f"{H}:{SEED}".encode()).hexdigest()[:8]
    assert inference.new_fit_id(H, SEED, tmp_path) == f"20261201T000000Z-{plain}"
    assert inference.new_fit_id(H, SEED, tmp_path, made="") == f"20261201T000000Z-{plain}"
    other = hashlib.sha256(f"{H}:{SEED}:pymc".encode()).hexdigest()[:8]
    assert inference.new_fit_id(H, SEED, tmp_path, made="pymc") == f"20261201T000000Z-{other}"
    assert other != plain


def test_the_bundled_fits_id_is_unchanged(tmp_path):
    """docs/examples cite 20261201T000000Z-3bd953e0: the bundled inputs, seed 20261130."""
    from ddtree_bayes.core.paths import bundled

    inputs = fitting.FitInputs.read(bundled("measurements.csv"), bundled("priors.toml"),
                                    bundled("hardware.csv"), tmp_path)
    h = inference.inputs_sha256(inputs.measurements, inputs.priors, inputs.hardware.text)
    assert hashlib.sha256(f"{h}:{SEED}".encode()).hexdigest()[:8] == "3bd953e0"


@pytest.mark.parametrize("change, made", [
    ({}, ""),
    ({"backend": "pymc"}, 'sampler {"backend": "pymc", "chains": 4, "draws": 1000, '
                          '"target_accept": 0.99, "tune": 1000}'),
    ({"chains": 2, "draws": 200, "tune": 200}, 'sampler {"backend": "nutpie", "chains": 2, '
     '"draws": 200, "target_accept": 0.99, "tune": 200}'),
    ({"target_accept": 0.995}, 'sampler {"backend": "nutpie", "chains": 4, "draws": 1000, '
                               '"target_accept": 0.995, "tune": 1000}'),
])
def test_what_made_a_posterior_beyond_a_plain_fit(change, made):
    """For 10 free parameters a plain fit draws 4 chains x 1000 (+1000 tuning) at 0.99 with
    nutpie: nothing to add; anything else is said, as the metadata's ``sampler`` says it."""
    asked = SamplerSettings(**{"draws": None, **change}).for_model(10)
    assert fitting.made_by(asked, asked.backend, n_free=10, remedies=True,
                           forms=("linear", "structured"),
                           file_forms=("linear", "structured")) == made


def test_remedies_off_and_forms_asked_for_are_said():
    asked = SamplerSettings().for_model(10)
    assert fitting.made_by(asked, "nutpie", n_free=10, remedies=False,
                           forms=("linear", "structured"),
                           file_forms=("linear", "structured")) == "no remedies"
    assert fitting.made_by(asked, "nutpie", n_free=10, remedies=True,
                           forms=("power", "structured"),
                           file_forms=("linear", "structured")) == "forms power structured"
    # (the PyMC fallback when nutpie is missing: the backend used, not the one asked for)
    assert fitting.made_by(asked, "pymc", n_free=10, remedies=True,
                           forms=("linear", "structured"),
                           file_forms=("linear", "structured")).startswith(
                               'sampler {"backend": "pymc"')
    # (more than 100 free parameters: 3000 draws are the plain fit's)
    big = SamplerSettings().for_model(150)
    assert big.draws == 3000
    assert fitting.made_by(big, "nutpie", n_free=150, remedies=True, forms=("a", "b"),
                           file_forms=("a", "b")) == ""


def _tree(values):
    post = xr.Dataset({"a": (("chain", "draw"), np.asarray(values, float).reshape(2, 4))})
    return xr.DataTree.from_dict({"posterior": post})


def _read(path) -> tuple[str, list[float]]:
    """(the metadata's fit id, the posterior's ``a`` flat) of a saved file."""
    import json

    import h5py

    with h5py.File(path, "r") as fh:
        return (json.loads(fh.attrs[store.META_ATTR])["fit_id"],
                fh["posterior"]["a"][()].ravel().tolist())


TEXTS = {"data": "model,hardware\nk,b300\n", "priors": "[model]\n", "hardware": "h\n"}


def test_a_fit_file_is_never_replaced_by_another_fits(tmp_path):
    """Two fits that took one id (saving at once: each looked before the other wrote) each
    keep their own file: the second is saved under the next free id, its metadata saying
    so, and latest.json points at it. Before, os.replace put the second over the first."""
    models = tmp_path / "models"
    meta = {"fit_id": "20261201T000000Z-3bd953e0", "converged": True}
    first = store.save(_tree(np.arange(8)), dict(meta), TEXTS, models)
    second = store.save(_tree(np.arange(8) + 100), dict(meta), TEXTS, models)
    assert first.name == "20261201T000000Z-3bd953e0.nc"
    assert second.name == "20261201T000000Z-3bd953e0-2.nc"
    assert _read(first) == ("20261201T000000Z-3bd953e0", list(range(8)))
    assert _read(second) == ("20261201T000000Z-3bd953e0-2", list(range(100, 108)))
    assert store.resolve(models) == second
    # a resample likewise (update's reweighted fit)
    third = store.save_resampled(first, np.arange(8)[::-1], {}, dict(meta), TEXTS, models)
    assert third.name == "20261201T000000Z-3bd953e0-3.nc"
    assert _read(third) == ("20261201T000000Z-3bd953e0-3", list(range(8))[::-1])
    assert _read(first) == ("20261201T000000Z-3bd953e0", list(range(8)))
    assert sorted(p.name for p in (models / "fits").iterdir()) == [
        "20261201T000000Z-3bd953e0-2.nc", "20261201T000000Z-3bd953e0-3.nc",
        "20261201T000000Z-3bd953e0.nc"]


@pytest.mark.nuts
def test_a_short_fits_id_says_its_sampler(tmp_path, monkeypatch):
    """A real fit of the bundled data under the reproducible clock, 2 chains x 30 draws (+30
    tuning) without remedies: its id hashes the inputs, the seed and what made it, written
    here by hand (it was 20261201T000000Z-3bd953e0, the plain 4 x 1000 fit's id)."""
    import shutil

    import ddtree_bayes as db
    from ddtree_bayes.core.paths import bundled
    from test_cli_support import copy_bundled_data

    work = copy_bundled_data(tmp_path / "work")
    (work / "models").mkdir()
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796083200")
    r = db.fit(workdir=work, progress=False, chains=2, draws=30, tune=30, remedies=False,
               seed=SEED)
    inputs = fitting.FitInputs.read(workdir=work)
    h = inference.inputs_sha256(inputs.measurements, inputs.priors, inputs.hardware.text)
    assert hashlib.sha256(f"{h}:{SEED}".encode()).hexdigest()[:8] == "3bd953e0"
    made = ('sampler {"backend": "nutpie", "chains": 2, "draws": 30, "target_accept": 0.99, '
            '"tune": 30}; no remedies')
    want = hashlib.sha256(f"{h}:{SEED}:{made}".encode()).hexdigest()[:8]
    assert r.fit_id == f"20261201T000000Z-{want}" and r.path.stem == r.fit_id
    assert want != "3bd953e0"

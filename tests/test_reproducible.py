"""Same data, priors and seed give the same draws, bit for bit, whether the compile cache is
empty (a first fit on a machine) or warm (every later fit).

PyTensor's numba backend compiles with fastmath by default; a function compiled fresh and
the same function loaded from the cache then differ in the last bits and the seeded chains
diverge (issue 18: 578 vs 575 tok/s). ``engine/model.py`` turns fastmath off before any
model is compiled; these are whole processes, as a user runs them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_bayes.core.paths import bundled

FIT = """
import hashlib, sys
import h5py, numpy as np
import ddtree_bayes as db
r = db.fit(workdir=sys.argv[1], progress=False, chains=2, draws=60, tune=60, remedies=False)
h = hashlib.sha256()
with h5py.File(r.path) as f:
    post = f["posterior"]
    for name in sorted(post):
        if name not in ("chain", "draw") and post[name].dtype.kind == "f":
            h.update(name.encode() + np.ascontiguousarray(post[name][()]).tobytes())
print(h.hexdigest())
"""


def _fit_digest(work: Path, cache: Path, flags: str = "") -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTENSOR_FLAGS"}
    env["PYTENSOR_FLAGS"] = f"base_compiledir={cache}{flags}"
    out = subprocess.run([sys.executable, "-c", FIT, str(work)], env=env, text=True,
                         capture_output=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()[-1]


@pytest.fixture
def workdir(tmp_path):
    from test_cli_support import copy_bundled_data

    work = copy_bundled_data(tmp_path / "work")
    (work / "models").mkdir()
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    return work


@pytest.mark.nuts
def test_cold_and_warm_compile_caches_give_the_same_draws(workdir, tmp_path):
    cache = tmp_path / "cache"
    cold = _fit_digest(workdir, cache)            # empty cache: everything compiled fresh
    compiled = sorted(p.name for p in (cache / "numba").iterdir())
    assert compiled, "the fit should have filled the numba cache"
    assert all("fastmath0" in name for name in compiled if "fastmath" in name), compiled[:3]
    warm = _fit_digest(workdir, cache)            # the same cache, now full
    assert cold == warm
    assert len(cold) == 64 and cold != hashlib.sha256(b"").hexdigest()


FASTMATH = """
import pytensor
import ddtree_bayes.engine.model
print(pytensor.config.numba__fastmath)
"""


def test_a_users_fastmath_setting_is_turned_off_for_the_model(tmp_path):
    """A user's own ``numba__fastmath=True`` (in PYTENSOR_FLAGS or a .pytensorrc) reached the
    model's compile, and with it the digits of a fit depended on the compile cache: with
    ``PYTENSOR_FLAGS=...,numba__fastmath=True`` the same seed gave posterior digests
    fe804c3d... cold and 295f9187... warm (2 chains x 60 draws; round 18), with nothing said.
    Importing the model turns it off whatever asked for it."""
    rc = tmp_path / "pytensorrc"
    rc.write_text("[numba]\nfastmath = True\n")
    base = {k: v for k, v in os.environ.items() if k not in ("PYTENSOR_FLAGS", "PYTENSORRC")}
    for extra in ({"PYTENSOR_FLAGS": "numba__fastmath=True"}, {"PYTENSORRC": str(rc)}):
        shown = subprocess.run([sys.executable, "-c", "import pytensor; "
                                "print(pytensor.config.numba__fastmath)"],
                               env={**base, **extra}, text=True, capture_output=True,
                               timeout=300)
        assert shown.stdout.split()[-1] == "True", (extra, shown.stderr[-500:])  # the user's
        out = subprocess.run([sys.executable, "-c", FASTMATH], env={**base, **extra},
                             text=True, capture_output=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split()[-1] == "False", extra


@pytest.mark.nuts
def test_a_users_fastmath_flag_changes_no_digit(workdir, tmp_path):
    """Cold and warm caches under the user's ``numba__fastmath=True`` give the draws a fit
    gives without it (before: fe804c3d... cold, 295f9187... warm, 8c41c311... without it)."""
    plain = _fit_digest(workdir, tmp_path / "plain")
    cache = tmp_path / "fastmath"
    cold = _fit_digest(workdir, cache, ",numba__fastmath=True")
    warm = _fit_digest(workdir, cache, ",numba__fastmath=True")
    assert cold == warm == plain

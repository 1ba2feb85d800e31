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


def _fit_digest(work: Path, cache: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTENSOR_FLAGS"}
    env["PYTENSOR_FLAGS"] = f"base_compiledir={cache}"
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

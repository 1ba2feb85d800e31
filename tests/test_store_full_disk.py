"""A fit saved onto a full disk (engine/store.py ``save``): one OSError naming the fit's file,
nothing left behind. HDF5 wrote the artifact itself and, on ENOSPC, its objects' deallocators
raised inside ``__dealloc__`` and the process crashed: `fit` on a 200 KB tmpfs printed
screens of "Can't decrement id ref count ... No space left on device" tracebacks and died
with SIGSEGV (exit 139), its temp file left in models/fits. Here the write limit is a
process's RLIMIT_FSIZE (EFBIG, no root needed), as a full disk ENOSPC is."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"

SCRIPT = textwrap.dedent("""
    import errno, resource, signal, sys
    from pathlib import Path
    import numpy as np, xarray as xr
    from ddtree_bayes.engine import store
    models = Path(sys.argv[1])
    # 4 x 25,000 doubles: 800,000 bytes of draws, past a 100,000-byte limit
    post = xr.Dataset({"a": (("chain", "draw"), np.random.default_rng(0).normal(size=(4, 25000)))})
    dt = xr.DataTree.from_dict({"posterior": post})
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))
    try:
        store.save(dt, {"fit_id": "x", "converged": True},
                   {"data": "", "priors": "", "hardware": ""}, models)
    except OSError as err:
        print(errno.errorcode[err.errno], err.filename)
""")


def test_a_fit_saved_onto_a_full_disk_is_one_oserror_and_nothing(tmp_path):
    models = tmp_path / "models"
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(models)], capture_output=True,
                         text=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
                         timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert "Traceback" not in run.stderr
    assert run.stdout.split() == ["EFBIG", str(models / "fits" / "x.nc")]
    assert [p.name for p in models.rglob("*")] == ["fits"]   # no .nc, no .tmp, no latest


def test_add_onto_a_full_disk_names_the_measurement_file(tmp_path):
    """`add` whose data/measurements.csv cannot grow (a 1,000-byte write limit under the
    bundled file's 1,774 bytes) blamed standard output: "File too large, with no file named
    (most likely standard output)". The write error now names the file, and says nothing was
    written; the file is unchanged."""
    import os
    import resource
    import shutil
    import signal

    work = tmp_path / "w"
    shutil.copytree(REPO / "data", work / "data")
    (work / "models").mkdir()
    before = (work / "data" / "measurements.csv").read_bytes()

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))

    run = subprocess.run([sys.executable, "-m", "ddtree_bayes", "add", "--model", "kimi-k2.6",
                          "--hardware", "b300", "--gpus", "8", "--engine", "sglang",
                          "--method", "ar", "--context", "4096", "--tok-s", "134",
                          "--source", "test"], cwd=work, preexec_fn=limit,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        "ddtree-bayes: error: data/measurements.csv: File too large (fix: free space where it "
        "is written and re-run; nothing was written)"]
    assert (work / "data" / "measurements.csv").read_bytes() == before
    assert not list((work / "data").glob(".*.tmp"))


RESAMPLED = textwrap.dedent("""
    import errno, resource, signal, sys
    from pathlib import Path
    import numpy as np, xarray as xr
    from ddtree_bayes.engine import store
    models = Path(sys.argv[1])
    post = xr.Dataset({"a": (("chain", "draw"), np.random.default_rng(0).normal(size=(4, 25000)))})
    texts = {"data": "", "priors": "", "hardware": ""}
    parent = store.save(xr.DataTree.from_dict({"posterior": post}),
                        {"fit_id": "p", "converged": True}, texts, models)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))
    try:
        store.save_resampled(parent, np.arange(100_000)[::-1], {},
                             {"fit_id": "r", "converged": True}, texts, models)
    except OSError as err:
        print(errno.errorcode[err.errno], err.filename)
""")


def test_a_reweighted_fit_saved_onto_a_full_disk_names_its_file(tmp_path):
    """`update`'s reweighted fit (``save_resampled``: a copy of its parent rewritten in place)
    on a full disk: the error named the hidden temp file (``.r.nc.<pid>.<rand>.tmp``), which the
    user never asked for and which is gone when the line is read; it names the fit's file now,
    as ``save`` does, and leaves the parent alone and nothing else."""
    models = tmp_path / "models"
    run = subprocess.run([sys.executable, "-c", RESAMPLED, str(models)], capture_output=True,
                         text=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
                         timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.split() == ["EFBIG", str(models / "fits" / "r.nc")]
    assert sorted(p.name for p in (models / "fits").iterdir()) == ["p.nc"]

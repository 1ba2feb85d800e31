"""``inference.without_dask``: a fit's xarray work (nutpie's DataTree, the deterministics, the
diagnostics, the netCDF write) imports neither dask nor distributed (~0.4 s of a warm fit:
xarray imports ``dask.array`` to ask whether an array is one, and its netCDF writer
``distributed`` to ask for dask's scheduler), and leaves xarray able to use dask after."""

from __future__ import annotations

import subprocess
import sys

import pytest

# A DataTree of numpy arrays built, written with h5netcdf and read back inside the context,
# as a fit does; then dask used through xarray after it.
SCRIPT = """
import sys
import numpy as np
import xarray as xr
from ddtree_bayes.engine import inference

with inference.without_dask():
    da = xr.DataArray(np.arange(6.0).reshape(2, 3), dims=("chain", "draw"))
    dt = xr.DataTree.from_dict({"posterior": xr.Dataset({"x": da}),
                                "sample_stats": xr.Dataset({"y": da + 1})})
    dt.to_netcdf(sys.argv[1], engine="h5netcdf")
    back = xr.open_datatree(sys.argv[1], engine="h5netcdf")
    same = bool((back["posterior"]["x"].values == da.values).all())
    back.close()
    inside = sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed")
                    and sys.modules[m] is not None)
print("INSIDE", same, inside)
print("LEFT", "dask" in sys.modules)
import dask.array
from xarray.namedarray.utils import is_duck_dask_array
lazy = xr.DataArray(dask.array.ones((2, 3), chunks=1), dims=("chain", "draw"))
print("AFTER", lazy.chunks is not None, is_duck_dask_array(lazy.data),
      float((lazy + da).sum().compute()))
print("CHUNKED", xr.DataArray(np.arange(6.0), dims="a").chunk(2).chunks)
"""


def _run(code: str, *argv: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_a_fits_xarray_work_imports_no_dask_and_leaves_it_usable(tmp_path):
    out = _run(SCRIPT, str(tmp_path / "t.nc"))
    assert out[0] == "INSIDE True []"
    assert out[1] == "LEFT False"          # no stand-in left behind
    assert out[2] == "AFTER True True 21.0"  # 6 ones + (0 + 1 + ... + 5)
    assert out[3] == "CHUNKED ((2, 2, 2),)"  # xarray's dask chunk manager found again


def test_without_dask_changes_nothing_once_dask_is_imported():
    code = ("import sys, dask\nfrom ddtree_bayes.engine import inference\n"
            "with inference.without_dask():\n"
            "    print(sys.modules['dask'] is dask)\n"
            "print(sys.modules['dask'] is dask)\n")
    assert _run(code) == ["True", "True"]


@pytest.mark.parametrize("raised", [ValueError, KeyboardInterrupt])
def test_without_dask_restores_on_the_way_out_of_an_error(raised):
    code = ("import sys\nfrom ddtree_bayes.engine import inference\n"
            "try:\n"
            "    with inference.without_dask():\n"
            f"        raise {raised.__name__}\n"
            f"except {raised.__name__}:\n"
            "    pass\n"
            "print('dask' in sys.modules)\nimport dask\nprint(dask.__name__)\n")
    assert _run(code) == ["False", "dask"]


def test_entering_imports_no_xarray_and_one_imported_inside_finds_dask_after(tmp_path):
    """A refused input fails before xarray is imported (``fit``'s bad data, ~0.3 s): entering
    imported it to forget its records of dask. xarray first imported inside the context
    records dask absent; on the way out those records are forgotten, so dask works after."""
    code = SCRIPT.replace("import xarray as xr\nfrom ddtree_bayes.engine import inference\n\n"
                          "with inference.without_dask():\n",
                          "from ddtree_bayes.engine import inference\n\n"
                          "with inference.without_dask():\n"
                          "    print('ENTERED', 'xarray' in sys.modules)\n"
                          "    import xarray as xr\n")
    assert code != SCRIPT
    out = _run(code, str(tmp_path / "t.nc"))
    assert out[0] == "ENTERED False"
    assert out[1] == "INSIDE True []"
    assert out[2] == "LEFT False"
    assert out[3] == "AFTER True True 21.0"
    assert out[4] == "CHUNKED ((2, 2, 2),)"

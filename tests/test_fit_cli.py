"""End to end on real fits: the production fit passes its gates and reproduces the
measurements; the CLI prints tables, JSON and CSV; artifacts are self-describing."""

import csv
import io
import json

import numpy as np
import pytest

from ddtree_bayes.cli import main as cli
from ddtree_bayes.core.config import MAX_RHAT, MIN_ESS_BULK
from ddtree_bayes.engine import store


def run(capsys, monkeypatch, workdir, *argv):
    monkeypatch.chdir(workdir)
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_default_fit_passes_the_gates_with_margin(fitted_workdir):
    _, result = fitted_workdir
    assert result.converged, result.failures
    assert result.divergences == 0
    assert max(d["rhat"] for d in result.diagnostics) <= MAX_RHAT
    assert min(d["ess_bulk"] for d in result.diagnostics) >= 2 * MIN_ESS_BULK


def test_posterior_predictive_reproduces_the_b300_points(fitted_workdir):
    from ddtree_bayes.engine import fitted_rows as M

    work, result = fitted_workdir
    ppc = {r["row"]: r for r in M.check_measurements(store.load_fit(result.path))}
    for row, measured in ((2, 133.0), (3, 303.0)):  # B300 AR and DDTree block 8
        r = ppc[row]
        assert r["measured"] == measured
        assert r["lo50"] <= measured <= r["hi50"], r
    # every bundled measurement falls inside its 90% interval
    assert all(r["lo90"] <= r["measured"] <= r["hi90"] for r in ppc.values())


def test_artifact_is_self_describing(fitted_workdir):
    work, result = fitted_workdir
    dt = store.load_datatree(result.path)
    assert {"posterior", "sample_stats", "observed_data", "constant_data"} <= set(dt.children)
    assert dt["posterior"]["step_ar_ms"].shape == (4, 1000, 2)
    meta = json.loads(dt.attrs[store.META_ATTR])
    assert meta["seed"] == 20261130 and meta["sampler"]["backend"] == "nutpie"
    assert meta["data"]["rows"] == 9 and meta["converged"] is True
    assert dt.attrs[store.DATA_ATTR] == (work / "data" / "measurements.csv").read_text()
    assert dt.attrs[store.PRIORS_ATTR] == (work / "models" / "priors.toml").read_text()
    latest = json.loads((work / "models" / "latest.json").read_text())
    assert latest["fit_id"] == result.fit_id
    # the fast reader sees the same draws as xarray
    draws = store.load_fit(result.path)
    np.testing.assert_array_equal(draws.variables["moe_share"][:, 0],
                                  dt["posterior"]["moe_share"].values[..., 0].reshape(-1))
    assert not list((work / "models" / "fits").glob("*.tmp"))


def test_predict_table_json_csv(fitted_workdir, capsys, monkeypatch):
    work, result = fitted_workdir
    code, out, err = run(capsys, monkeypatch, work, "predict", "--accept", "12:16",
                         "--target", "800")
    assert code == 0, err
    lines = out.splitlines()
    assert result.fit_id in lines[0]
    assert "b300 x8, ddtree, block 16, budget 32, verify 33" in lines[1]
    assert sum(line.startswith(("sglang ", "native ")) for line in lines) == 12
    assert "P(>=800)" in out and "U(12,16)" in out
    code, out, _ = run(capsys, monkeypatch, work, "predict", "--accept", "12:16",
                       "--format", "json", "--prob", "0.8")
    payload = json.loads(out)
    assert payload["fit_id"] == result.fit_id and payload["interval_probs"] == [0.5, 0.8]
    rows = payload["rows"]
    assert len(rows) == 12
    for r in rows:
        assert r["lo80"] <= r["lo50"] <= r["median"] <= r["hi50"] <= r["hi80"]
    sg = {r["accept"]: r["median"] for r in rows if r["engine"] == "sglang"}
    # tok/s rises with acceptance at a fixed step time
    assert sg[12.0] < sg[13.0] < sg[14.0] < sg[15.0] < sg[16.0]  # accept is a number (issue 12)
    code, out, _ = run(capsys, monkeypatch, work, "predict", "--accept", "13.5", "--format",
                       "csv")
    table = list(csv.DictReader(io.StringIO(out)))
    assert [r["engine"] for r in table] == ["sglang", "native"]
    assert float(table[0]["median"]) > 0


def test_predict_is_reproducible_with_a_seed(fitted_workdir, capsys, monkeypatch):
    work, _ = fitted_workdir
    args = ["predict", "--accept", "12:16", "--format", "json"]
    a = run(capsys, monkeypatch, work, *args, "--seed", "5")[1]
    b = run(capsys, monkeypatch, work, *args, "--seed", "5")[1]
    c = run(capsys, monkeypatch, work, *args, "--seed", "6")[1]
    assert a == b and a != c


def test_predict_warns_then_refuses_when_data_changed(fitted_workdir, capsys, monkeypatch):
    work, _ = fitted_workdir
    # the artifact records its data file by absolute path and hash; edit it, then restore
    data = work / "data" / "measurements.csv"
    original = data.read_text()
    try:
        data.write_text(original + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,131,new,\n")
        code, out, err = run(capsys, monkeypatch, work, "predict", "--accept", "12")
        assert code == 0 and "warning" in err and "changed since fit" in err
        code, out, err = run(capsys, monkeypatch, work, "predict", "--accept", "12", "--strict")
        assert code == 4 and out == "" and err.count("\n") == 1
    finally:
        data.write_text(original)


@pytest.mark.nuts
def test_tiny_fit_is_refused_and_reproducible(tmp_path, capsys, monkeypatch):
    """A 2-chain x 60-draw fit fails the ESS gate: exit 5, artifact saved and marked,
    predict refuses it unless told; the same seed gives bit-identical draws."""
    code, out, err = run(capsys, monkeypatch, tmp_path, "fit", "--chains", "2", "--draws", "60",
                         "--tune", "60", "--quiet", "--seed", "11", "--format", "json")
    assert code == 5
    first = json.loads(out)
    assert first["converged"] is False and any("ESS" in f for f in first["failures"])
    assert "convergence gates" in err
    code, out, err = run(capsys, monkeypatch, tmp_path, "predict", "--accept", "12")
    assert code == 5 and "--allow-unconverged" in err
    code, out, err = run(capsys, monkeypatch, tmp_path, "predict", "--accept", "12",
                         "--allow-unconverged")
    assert code == 0 and "UNCONVERGED" in out
    code, out, err = run(capsys, monkeypatch, tmp_path, "fit", "--chains", "2", "--draws", "60",
                         "--tune", "60", "--quiet", "--seed", "11", "--format", "json")
    second = json.loads(out)
    a = store.load_fit(store.resolve(tmp_path / "models", first["fit_id"]))
    b = store.load_fit(store.resolve(tmp_path / "models", second["fit_id"]))
    assert first["fit_id"] != second["fit_id"]
    for name in a.variables:
        np.testing.assert_array_equal(a.variables[name], b.variables[name])


def test_interrupted_save_keeps_the_previous_fit(fitted_workdir, tmp_path, monkeypatch):
    import os
    import shutil

    work, result = fitted_workdir
    copy = tmp_path / "w"
    shutil.copytree(work, copy)
    dt = store.load_datatree(result.path)

    def boom(fd, payload, path):   # the interrupt lands with half the file in its temp file
        with os.fdopen(fd, "wb") as fh:
            fh.write(bytes(payload[: len(payload) // 2]))
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "_write_all", boom)
    meta = json.loads(dt.attrs[store.META_ATTR]) | {"fit_id": "interrupted"}
    with pytest.raises(KeyboardInterrupt):
        store.save(dt, meta, {"data": "", "priors": "", "hardware": ""}, copy / "models")
    assert sorted(p.name for p in (copy / "models" / "fits").iterdir()) == [result.path.name]
    assert store.resolve(copy / "models").name == result.path.name
    store.load_fit(store.resolve(copy / "models"))

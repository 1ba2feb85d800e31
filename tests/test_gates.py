"""Never a silent wrong answer (issue 18): every convergence gate fails on a non-finite draw,
R-hat, ESS or log-density, at fit time (engine/inference.py ``diagnose``, core/gates.py) and
again when an artifact is read (engine/store.py), so a NaN posterior an older version saved
as "converged" cannot answer; a sampler that hands back fewer draws than asked is an
interrupt; and predict never prints ``nan``.

Fit here are made by hand (numpy), artifacts written by hand (h5py): nothing samples.
"""

from __future__ import annotations

import importlib
import json
import math
import types

import numpy as np
import pytest

from ddtree_bayes.core import gates
from ddtree_bayes.core.errors import ArtifactError, Interrupted, QueryError, UnconvergedError
from ddtree_bayes.engine import inference, store
from test_cli_support import BEYOND_M33, FIT_ID, make_point_mass_workdir, run_cli

CHAINS, DRAWS = 4, 300


def trace(a=None, b=None, logp=None):
    """posterior (a, b[2]) and sample_stats (diverging, logp) Datasets of 4 x 300 iid draws."""
    import xarray as xr

    rng = np.random.default_rng(5)
    a = rng.normal(size=(CHAINS, DRAWS)) if a is None else a
    b = rng.normal(size=(CHAINS, DRAWS, 2)) if b is None else b
    logp = -0.5 * a**2 if logp is None else logp
    post = xr.Dataset({"a": (("chain", "draw"), a), "b": (("chain", "draw", "k"), b)},
                      coords={"k": ["x", "y"]})
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros(a.shape, dtype=bool)),
                        "logp": (("chain", "draw"), logp)})
    return post, stats


def padded(x: np.ndarray, n: int = 100) -> np.ndarray:
    """``x`` with chain 3's last ``n`` draws NaN: how nutpie pads an interrupted chain."""
    x = x.copy()
    x[3, -n:] = np.nan
    return x


# ------------------------------------------------------------------ the gates at fit time
def test_clean_draws_pass():
    rows, divergences, failures = inference.diagnose(*trace())
    assert failures == [] and divergences == 0
    assert [r["parameter"] for r in rows] == ["a", "b[x]", "b[y]"]


def test_a_constant_element_of_a_vector_is_no_parameter():
    """A deterministic that is 0 for some of its systems (tp_tok_ms of a one-GPU system in a
    fit that also has a multi-GPU one) has no R-hat there: the element is skipped, not failed
    (it used to send every such fit up the whole remedy ladder and save it unconverged)."""
    post, stats = trace()
    b = post["b"].values.copy()
    b[..., 1] = 0.0
    rows, _, failures = inference.diagnose(*trace(b=b))
    assert failures == []
    assert [r["parameter"] for r in rows] == ["a", "b[x]"]


def test_an_interrupted_chain_padded_with_nan_fails_every_gate_it_touches():
    post, stats = trace()
    a, b = padded(post["a"].values), padded(post["b"].values)
    rows, _, failures = inference.diagnose(*trace(a, b, logp=padded(stats["logp"].values)))
    assert failures[:2] == ["non-finite draws (a 100/1200, b 100/1200)",
                            "non-finite log-density in 100 of 1200 draws"]
    assert "non-finite R-hat (a, b[x], b[y])" in failures
    assert "non-finite bulk ESS (a, b[x], b[y])" in failures
    assert all(math.isnan(r["rhat"]) for r in rows)  # recorded as they are, and failed


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_one_non_finite_draw_fails(value):
    post, _ = trace()
    a = post["a"].values.copy()
    a[1, 17] = value
    _, _, failures = inference.diagnose(*trace(a=a))
    assert failures[0] == "non-finite draws (a 1/1200)"


def test_a_non_finite_log_density_fails_even_with_finite_draws():
    _, stats = trace()
    logp = stats["logp"].values.copy()
    logp[0, 0] = -np.inf
    _, _, failures = inference.diagnose(*trace(logp=logp))
    assert failures == ["non-finite log-density in 1 of 1200 draws"]


def test_no_draws_is_a_failure_not_a_crash():
    """nutpie interrupted during tuning returns zero draws; diagnose used to end in
    'ValueError: zero-size array to reduction operation'."""
    post, stats = trace(a=np.zeros((4, 0)), b=np.zeros((4, 0, 2)), logp=np.zeros((4, 0)))
    assert inference.diagnose(post, stats) == ([], 0, [
        "no draws (the sampler returned none: interrupted?)"])


def test_row_gates_fail_on_non_finite_statistics_and_still_judge_the_rest():
    ok = {"parameter": "a", "mean": 1.0, "rhat": 1.002, "ess_bulk": 900.0, "ess_tail": 800.0}
    assert gates.row_failures([ok]) == []
    nan = float("nan")
    rows = [ok, {**ok, "parameter": "b", "rhat": nan, "ess_bulk": nan},
            {**ok, "parameter": "c", "rhat": 1.05, "ess_tail": float("inf")}]
    assert gates.row_failures(rows) == ["non-finite R-hat (b)", "non-finite bulk ESS (b)",
                                        "non-finite tail ESS (c)",
                                        "max R-hat 1.050 > 1.01 (c)"]
    # every statistic NaN (the reported fit): the old max()/min() gates passed it
    all_nan = [{"parameter": p, "mean": nan, "rhat": nan, "ess_bulk": nan, "ess_tail": nan}
               for p in "abcde"]
    assert gates.row_failures(all_nan)[0] == "non-finite posterior mean (a, b, c and 2 more)"


# ------------------------------------------------------------------ a fit never saves them
def test_a_fit_whose_draws_are_not_finite_writes_nothing(tmp_path, monkeypatch):
    """Every attempt of the ladder returns a NaN-padded trace: exit 5, one line naming the
    gate, no artifact, no latest.json."""
    import xarray as xr

    from test_cli_support import copy_bundled_data

    work = copy_bundled_data(tmp_path)
    tried = []

    def sample(model, settings, seed, progress=True, cache=None):
        tried.append(settings)
        names = [v.name for v in model.free_RVs]
        rng = np.random.default_rng(len(tried))
        post = xr.Dataset({n: (("chain", "draw"), padded(rng.normal(size=(4, 200))))
                           for n in names})
        stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((4, 200), bool))})
        return xr.DataTree.from_dict({"posterior": post, "sample_stats": stats}), {}, "nutpie"

    monkeypatch.setattr(inference, "sample", sample)
    code, out, err = run_cli(work, "fit", "--quiet")
    assert code == 5 and out == ""
    lines = [ln for ln in err.splitlines() if not ln.startswith("fit: ")]  # the ladder's lines
    assert len(lines) == 1 and lines[0].startswith(
        "ddtree-bayes: error: the fit failed its convergence gates: non-finite draws (")
    assert "nothing was written" in lines[0] and len(tried) > 1  # the ladder was climbed
    assert not (work / "models" / "fits").exists() or not list((work / "models").rglob("*.nc"))
    assert not (work / "models" / "latest.json").exists()


def test_store_refuses_to_save_non_finite_draws(tmp_path):
    import xarray as xr

    post, stats = trace(a=padded(trace()[0]["a"].values))
    dt = xr.DataTree.from_dict({"posterior": post, "sample_stats": stats})
    with pytest.raises(ArtifactError, match=r"refusing to save fit x: non-finite draws \(a "):
        store.save(dt, {"fit_id": "x", "converged": True}, {"data": "", "priors": "",
                                                            "hardware": ""}, tmp_path)
    assert not list(tmp_path.rglob("*.nc")) and not list(tmp_path.rglob("*.tmp"))


# ------------------------------------------------------------------ and no load answers them
def _edit_artifact(work, *, variable=None, value=np.nan, logp=None, rows=None):
    """Change the point-mass artifact as an older version could have written it."""
    import h5py

    path = store.resolve(work / "models")
    with h5py.File(path, "r+") as fh:
        if variable is not None:
            arr = fh["posterior"][variable][...]
            arr.reshape(-1)[-3:] = value
            fh["posterior"][variable][...] = arr
        if logp is not None:
            fh.create_group("sample_stats")["logp"] = logp
        if rows is not None:
            meta = json.loads(fh.attrs[store.META_ATTR])
            meta["diagnostics"]["parameters"] = rows
            fh.attrs[store.META_ATTR] = json.dumps(meta)   # NaN as JSON's NaN, as json writes it
    return path


NAN_ROWS = [{"parameter": "noise_sd", "mean": float("nan"), "sd": float("nan"),
             "rhat": float("nan"), "ess_bulk": float("nan"), "ess_tail": float("nan"),
             "mcse_mean": float("nan")}]


def test_an_old_all_nan_artifact_marked_converged_cannot_answer(tmp_path):
    """The reported fit: NaN draws, NaN means, R-hat and ESS, and "converged": true."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = _edit_artifact(work, variable="noise_sd", rows=NAN_ROWS)
    with pytest.raises(ArtifactError, match="holds non-finite draws"):
        store.load_fit(path)
    for argv in (["predict"], ["predict", "--allow-unconverged", "--format", "json"]):
        code, out, err = run_cli(work, *argv)
        assert code == 3 and out == "" and "nan" not in err.split("(noise_sd")[0]
        assert err.count("\n") == 1 and err.startswith(
            f"ddtree-bayes: error: fit {FIT_ID} holds non-finite draws (noise_sd 3 of 16)")
    code, out, _ = run_cli(work, "history")
    assert code == 0 and "NO" in out and "non-finite posterior mean (noise_sd)" in out


@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_a_non_finite_stored_log_density_cannot_answer(tmp_path, value):
    work = make_point_mass_workdir(tmp_path / "w")
    logp = np.zeros((1, 16))
    logp[0, 5] = value
    _edit_artifact(work, logp=logp)
    code, out, err = run_cli(work, "predict")
    assert code == 3 and out == "" and "log-density 1 of 16" in err


def test_finite_draws_with_a_stored_nan_r_hat_are_unconverged(tmp_path):
    """The gates again at load: the artifact said converged; it is refused as unconverged
    (exit 5, the gate named), and answers with --allow-unconverged (its draws are finite)."""
    work = make_point_mass_workdir(tmp_path / "w")
    row = {"parameter": "noise_sd", "mean": 0.0, "sd": 0.0, "rhat": float("nan"),
           "ess_bulk": 900.0, "ess_tail": 900.0, "mcse_mean": 0.0}
    path = _edit_artifact(work, rows=[row])
    meta = store.load_meta(path)
    assert meta["converged"] is False
    assert meta["failures"] == ["non-finite R-hat (noise_sd) (found when the fit was read)"]
    code, out, err = run_cli(work, "predict")
    assert code == 5 and out == "" and "non-finite R-hat (noise_sd)" in err
    code, out, err = run_cli(work, "predict", "--allow-unconverged", "--accept", "14")
    assert code == 0 and "UNCONVERGED" in out and "nan" not in out


def test_api_predict_refuses_an_unconverged_fit(tmp_path):
    """db.predict answered from a fit that failed its gates, without a word, where
    `predict` exits 5 and db.fit's docstring says predict refuses it."""
    import ddtree_bayes as db

    work = make_point_mass_workdir(tmp_path / "w")
    row = {"parameter": "noise_sd", "mean": 0.0, "sd": 0.0, "rhat": float("nan"),
           "ess_bulk": 900.0, "ess_tail": 900.0, "mcse_mean": 0.0}
    _edit_artifact(work, rows=[row])
    fit = db.load(workdir=work)
    with pytest.raises(UnconvergedError) as info:
        db.predict(fit, accept=14, engines="sglang")
    assert str(info.value) == (
        f"fit {FIT_ID} failed its convergence gates (non-finite R-hat (noise_sd) (found when "
        "the fit was read)) (fix: re-run the fit, or pass allow_unconverged=True to use it "
        "anyway)")
    with pytest.raises(UnconvergedError):
        db.predict(accept=14, workdir=work)   # the latest fit, loaded by predict
    with pytest.warns(UserWarning) as said:
        table = db.predict(fit, accept=14, engines="sglang", allow_unconverged=True)
    assert table["median"].tolist() == pytest.approx([700.0])
    assert [str(w.message) for w in said] == [UNCONVERGED_LINE, BEYOND_M33]   # (budget 32)


#: The warning of the fit of :func:`_unconverged_workdir` used anyway.
UNCONVERGED_LINE = (f"fit {FIT_ID} failed its convergence gates (non-finite R-hat (noise_sd) "
                    "(found when the fit was read)) and is used anyway (--allow-unconverged): "
                    "its draws need not be the posterior")


def _unconverged_workdir(tmp_path):
    """A point-mass workdir whose fit fails its gates when read (a stored NaN R-hat)."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05)   # (next needs noise)
    row = {"parameter": "noise_sd", "mean": 0.05, "sd": 0.0, "rhat": float("nan"),
           "ess_bulk": 900.0, "ess_tail": 900.0, "mcse_mean": 0.0}
    _edit_artifact(work, rows=[row])
    return work


@pytest.mark.parametrize("argv", [["predict", "--accept", "14"], ["optimize"], ["next"]])
def test_an_unconverged_fit_used_anyway_is_warned_of(tmp_path, argv):
    """A walkthrough: `predict|optimize|next --allow-unconverged --format json` on a fit that
    failed its gates exited 0 with nothing in `warnings` and no `converged` field: only the
    table's header said UNCONVERGED. The line is one of the warnings now (stderr and JSON)."""
    work = _unconverged_workdir(tmp_path)
    code, out, err = run_cli(work, *argv, "--allow-unconverged", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["warnings"][0] == UNCONVERGED_LINE
    assert f"ddtree-bayes: warning: {UNCONVERGED_LINE}\n" in err


# ------------------------------------------------------------------ predict never prints nan
@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_predict_refuses_a_non_finite_answer(tmp_path, fmt):
    """Finite draws whose arithmetic overflows (a noise sd of 1e300): it printed '0-nan'."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=1e300)
    code, out, err = run_cli(work, "predict", "--accept", "14", "--target", "800",
                             "--format", fmt)
    assert code == 2 and out == ""
    warning, error = err.splitlines()   # (budget 32 past the measured 8: warned of first)
    assert warning == f"ddtree-bayes: warning: {BEYOND_M33}" and error.startswith(
        "ddtree-bayes: error: the answer for sglang is not a finite number (hi50 nan)")


def test_api_predict_refuses_a_non_finite_answer():
    from ddtree_bayes import api
    from ddtree_bayes.engine.testing import point_mass_draws

    with (np.errstate(all="ignore"), pytest.raises(QueryError, match="not a finite number"),
          pytest.warns(UserWarning, match="a step verifies 33 tokens")):   # (budget 32)
        api.predict(point_mass_draws(noise_sd=1e300), accept="14")


# ------------------------------------------------------------------ partial traces
class FakeBackground:
    """What ``nutpie.sample(..., blocking=False)`` returns: ``wait`` gives ``result`` (or
    raises it), ``cancel`` is recorded."""

    def __init__(self, result):
        self.result, self.cancelled = result, False

    def wait(self):
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result

    def cancel(self):
        self.cancelled = True


def _tree(draws: int, chains: int = 4):
    import xarray as xr

    post, stats = trace(a=np.zeros((chains, draws)), b=np.zeros((chains, draws, 2)),
                        logp=np.zeros((chains, draws)))
    return xr.DataTree.from_dict({"posterior": post, "sample_stats": stats})


def test_run_nutpie_cancels_and_reraises_an_interrupt(monkeypatch):
    nutpie = importlib.import_module("nutpie")
    background = FakeBackground(KeyboardInterrupt())
    asked = {}

    def sample(compiled, **kwargs):
        asked.update(kwargs)
        return background

    monkeypatch.setattr(nutpie, "sample", sample)
    with pytest.raises(KeyboardInterrupt):
        inference.run_nutpie("compiled", draws=300, tune=300)
    assert background.cancelled and asked["blocking"] is False


@pytest.mark.parametrize("got", [0, 120])
def test_a_trace_shorter_than_asked_is_an_interrupt(monkeypatch, got):
    """nutpie's own KeyboardInterrupt handling (blocking=True) returns what it has: 0 draws
    during tuning, fewer during sampling."""
    nutpie = importlib.import_module("nutpie")
    monkeypatch.setattr(nutpie, "sample", lambda compiled, **kw: FakeBackground(_tree(got)))
    with pytest.raises(Interrupted, match=f"nutpie returned {got} of 300 draws per chain"):
        inference.run_nutpie("compiled", draws=300)
    assert Interrupted.exit_code == 130 and issubclass(Interrupted, KeyboardInterrupt)


@pytest.mark.parametrize("got", [0, 3])
def test_a_trace_with_fewer_chains_than_asked_is_a_failed_fit(monkeypatch, got):
    """Every draw of 3 chains when 4 were asked: a chain the sampler dropped is a failed fit
    (exit 5, one line), not 3 chains the gates judge alone and a fit saved from them."""
    nutpie = importlib.import_module("nutpie")
    monkeypatch.setattr(nutpie, "sample", lambda compiled, **kw: FakeBackground(_tree(300, got)))
    with pytest.raises(UnconvergedError) as err:
        inference.run_nutpie("compiled", draws=300, chains=4)
    assert str(err.value).startswith(f"nutpie returned {got} of 4 chains: the fit failed")
    assert "\n" not in str(err.value) and err.value.exit_code == 5
    # as many chains as asked (or none named: nutpie's own default) pass
    tree = _tree(300, 4)
    monkeypatch.setattr(nutpie, "sample", lambda compiled, **kw: FakeBackground(tree))
    assert inference.run_nutpie("compiled", draws=300, chains=4) is tree
    assert inference.run_nutpie("compiled", draws=300) is tree


def test_a_whole_trace_passes_through(monkeypatch):
    nutpie = importlib.import_module("nutpie")
    tree = _tree(300)
    monkeypatch.setattr(nutpie, "sample", lambda compiled, **kw: FakeBackground(tree))
    assert inference.run_nutpie("compiled", draws=300) is tree


def test_tuned_callback_says_once_when_every_chain_has_tuned():
    said: list[str] = []
    callback = inference._tuned_callback(said.append, 0.0)
    chain = types.SimpleNamespace
    callback([chain(tuning=True), chain(tuning=False)])
    assert said == []
    callback([chain(tuning=False), chain(tuning=False)])
    callback([chain(tuning=False), chain(tuning=False)])
    assert len(said) == 1 and said[0].startswith("tuning done after ")


def test_every_artifact_refusal_ends_with_its_fix(tmp_path):
    """An audit of the error lines: `fit`'s (and `update`'s) unconverged refusal ended "(the
    artifact is saved but marked unconverged; predict refuses it without
    --allow-unconverged)", and a fit file whose metadata cannot be read, or whose netCDF
    cannot, was named without a fix; every other such line ends "(fix: ...)"."""
    from pathlib import Path

    result = inference.FitResult("f1", Path("f1.nc"), False, ["max R-hat 1.2 > 1.01 (x)"], [],
                                 0)
    with pytest.raises(UnconvergedError) as err:
        result.raise_if_unconverged()
    assert str(err.value) == ("fit f1 failed its convergence gates: max R-hat 1.2 > 1.01 (x); "
                              "the artifact is saved, marked unconverged (fix: re-run "
                              "`ddtree-bayes fit`, or pass --allow-unconverged to predict to "
                              "answer from it anyway)")
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not a fit")
    for read in (store.load_meta, store.load_datatree):
        with pytest.raises(ArtifactError) as err:
            read(junk)
        assert str(err.value).startswith(f"{junk} is not a readable ")
        assert str(err.value).endswith(" (fix: re-run `ddtree-bayes fit`)")
    import h5py

    listed = tmp_path / "listed.nc"
    with h5py.File(listed, "w") as fh:
        fh.attrs[store.META_ATTR] = "[1, 2]"
    with pytest.raises(ArtifactError) as err:
        store.load_meta(listed)
    assert str(err.value) == f"{listed} has malformed metadata (fix: re-run `ddtree-bayes fit`)"

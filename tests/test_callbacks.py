"""nutpie's C callbacks cached across processes (engine/callbacks.py): a second compile of
the same model loads them and draws bit for bit what the first drew; other constants, other
key; shared data keyed by their layout, not their values."""

from __future__ import annotations

import numpy as np
import pytest

from ddtree_bayes.engine import callbacks


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(callbacks, "cache_root", tmp_path / "cache")
    monkeypatch.delenv("DDTREE_BAYES_NUTPIE_PATCH", raising=False)
    return tmp_path / "cache"


def bundled_model(bundled_inputs, *, refittable: bool = False, data=None):
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.engine.model import build_model

    cfg = bundled_inputs[1]
    data = data or bundled_inputs[0]
    return build_model(S.build_spec(data, cfg), cfg, refittable=refittable)


def first_row_faster(tmp_path):
    """The bundled measurements with the first row's tok_s 1% higher."""
    import csv

    from ddtree_bayes.api import load_inputs
    from ddtree_bayes.core.paths import bundled

    with open(bundled("measurements.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    rows[0]["tok_s"] = str(round(float(rows[0]["tok_s"]) * 1.01, 3))
    path = tmp_path / "faster.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return load_inputs(path, bundled("priors.toml"), bundled("hardware.csv"))[0]


def hits(compiled) -> tuple[int, int]:
    return (compiled.compiled_logp_func._cache_hits, compiled.compiled_expand_func._cache_hits)


def index_files(cache) -> list[str]:
    return sorted(p.name for p in cache.glob("*.nbi"))   # one per callback and key


@pytest.mark.nuts
def test_second_compile_loads_both_callbacks_and_draws_the_same(cache, bundled_inputs):
    import nutpie

    first = callbacks.compile_model(bundled_model(bundled_inputs))
    assert hits(first) == (0, 0)
    assert len(index_files(cache)) == 2          # one per callback
    second = callbacks.compile_model(bundled_model(bundled_inputs))
    assert hits(second) == (1, 1)
    assert len(index_files(cache)) == 2

    def draws(compiled):
        dt = nutpie.sample(compiled, draws=100, tune=100, chains=2, cores=1, seed=3,
                           progress_bar=False)
        return dt["posterior"]["moe_share"].values

    np.testing.assert_array_equal(draws(first), draws(second))


@pytest.mark.nuts
def test_a_new_process_loads_what_another_saved(cache, bundled_inputs):
    """The promise is across processes: a subprocess compiles (and saves) the bundled model,
    this one loads both callbacks from its files."""
    import subprocess
    import sys

    code = f"""
from pathlib import Path
from ddtree_bayes.api import load_inputs
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import callbacks
from ddtree_bayes.engine.model import build_model
callbacks.cache_root = Path({str(cache)!r})
data, cfg = load_inputs(*[bundled(n) for n in ("measurements.csv", "priors.toml", "hardware.csv")])
c = callbacks.compile_model(build_model(S.build_spec(data, cfg), cfg))
print(c.compiled_logp_func._cache_hits, c.compiled_expand_func._cache_hits)
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.split()
    assert out == ["0", "0"]
    assert hits(callbacks.compile_model(bundled_model(bundled_inputs))) == (1, 1)


@pytest.mark.nuts
def test_other_constants_other_key(cache, bundled_inputs, tmp_path):
    callbacks.compile_model(bundled_model(bundled_inputs))
    assert len(index_files(cache)) == 2
    faster = first_row_faster(tmp_path)
    other = callbacks.compile_model(bundled_model(bundled_inputs, data=faster))
    # the measured values are in the log density's key; the deterministics do not read them
    assert hits(other) == (0, 1)
    assert len(index_files(cache)) == 3


@pytest.mark.nuts
def test_shared_data_cached_by_layout_and_read_at_run_time(cache, bundled_inputs, tmp_path):
    """A model with shared data (validation folds, SBC) is cached too, keyed without its
    values: the same graph on other values loads both callbacks, and they read the values
    nutpie passes, not the ones of the compile that saved them (they draw what a fresh
    compile of the other values draws)."""
    import nutpie

    def draws(compiled):
        dt = nutpie.sample(compiled, draws=60, tune=60, chains=1, cores=1, seed=5,
                           progress_bar=False)
        return dt["posterior"]["moe_share"].values

    shared = callbacks.compile_model(bundled_model(bundled_inputs, refittable=True))
    assert hits(shared) == (0, 0)
    assert len(index_files(cache)) == 2
    faster = first_row_faster(tmp_path)
    loaded = callbacks.compile_model(bundled_model(bundled_inputs, refittable=True,
                                                   data=faster))
    assert hits(loaded) == (1, 1)
    assert len(index_files(cache)) == 2          # one key for both values
    callbacks.cache_root = cache.parent / "fresh"   # (the fixture restores it)
    fresh = callbacks.compile_model(bundled_model(bundled_inputs, refittable=True,
                                                  data=faster))
    assert hits(fresh) == (0, 0)
    assert len(index_files(cache.parent / "fresh")) == 2
    np.testing.assert_array_equal(draws(loaded), draws(fresh))
    assert not np.array_equal(draws(loaded), draws(shared))   # (the values do matter)


class _Var:
    """What nutpie's record reads of a shared variable: its rank."""

    def __init__(self, ndim: int):
        self.ndim = ndim


def nutpie_record(values: dict[str, np.ndarray]):
    """nutpie's record of shared ``values`` (its names: the dict's keys)."""
    from nutpie.compile_pymc import make_user_data

    return make_user_data({_Var(v.ndim): k for k, v in values.items()}, values)


def test_stable_names_by_position_in_nutpies_record():
    """nutpie's record of shared values under random names, renamed by position: the same
    layout; the same key whatever the names and values, another for another layout."""
    values = {"9f1c": np.array([1.0, 2.0, 3.0]), "03ab": np.array([0.5])}
    record = nutpie_record(values)
    keys, data, dtype, layout = callbacks.stable_names(record, ["03ab"], values)
    assert keys == ["shared1"]
    assert data["shared1"] is values["03ab"] and sorted(data) == ["shared0", "shared1"]
    assert dtype["shared"]["data"].names == ("shared0", "shared1")
    assert dtype.itemsize == record.dtype.itemsize
    for part in ("data", "size", "shape"):   # every field at its old offset
        assert [dtype["shared"][part].fields[f"shared{i}"][1] for i in (0, 1)] == \
            [record.dtype["shared"][part].fields[k][1] for k in ("9f1c", "03ab")]
    other = {"77aa": np.array([7.0, 8.0, 9.0, 10.0]), "e2e2": np.array([4.0])}
    assert callbacks.stable_names(nutpie_record(other), ["e2e2"], other)[3] == layout
    rank2 = {"77aa": np.ones((1, 3)), "e2e2": np.array([4.0])}
    assert callbacks.stable_names(nutpie_record(rank2), ["e2e2"], rank2)[3] != layout

    def inner():
        return None

    from types import SimpleNamespace

    from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

    jitted = SimpleNamespace(py_func=inner)   # a numba dispatcher of PyTensor's
    CACHED_SRC_FUNCTIONS[inner] = "graph key"
    assert callbacks.callback_key("src", jitted, {"n_dim": 3}, ["shared1"]) is None
    key = callbacks.callback_key("src", jitted, {"n_dim": 3}, ["shared1"], layout)
    assert key is not None and key != callbacks.callback_key("src", jitted, {"n_dim": 3}, [])


def test_callback_key_none_without_a_stable_key():
    def inner():
        return None

    assert callbacks.callback_key("src", inner, {"n_dim": 3}, shared_keys=[]) is None
    assert callbacks.callback_key("src", inner, {"n_dim": 3}, shared_keys=["k"]) is None


def test_build_refuses_an_unkeyed_callback_only_when_a_cache_was_asked(monkeypatch):
    def inner():
        return None

    func = callbacks.build(callbacks.LOGP_SOURCE, "logp_numba", inner, extract=None,
                           sizes={"n_dim": 2}, shared_keys=[])
    assert func.__name__ == "logp_numba" and func.__globals__["n_dim"] == 2
    assert func.__closure__ is None              # numba keys closures by a random pickle
    monkeypatch.setitem(callbacks._state, "want_cache", True)
    with pytest.raises(callbacks.Uncacheable):
        callbacks.build(callbacks.LOGP_SOURCE, "logp_numba", inner, extract=None,
                        sizes={"n_dim": 2}, shared_keys=[])


@pytest.fixture
def recorded(monkeypatch):
    """nutpie's compile replaced by a recorder of its keyword arguments (no numba): the
    model "unreadable cache" registers a key and fails while the cache holds its file."""
    import nutpie

    calls: list[dict] = []

    def compile_pymc_model(model, **kwargs):
        calls.append(kwargs)
        if kwargs.get("cache") and model == "broken cache":
            callbacks._state["keys"].append("k3")
            raise OSError("Input/output error")
        if model == "bad model":
            raise ValueError("a modelling error, before any callback")
        if kwargs.get("cache") and model == "unreadable cache":
            callbacks._state["keys"].append("k1")
            entry = callbacks.cache_dir() / "logp_numba-k1.py312.1.nbc"
            if entry.exists():
                raise EOFError("Ran out of input")   # what pickle says of a truncated file
            entry.write_text("saved again")
        return "compiled"

    monkeypatch.setattr(nutpie, "compile_pymc_model", compile_pymc_model)
    monkeypatch.delenv("DDTREE_BAYES_NUTPIE_PATCH", raising=False)
    return calls


def test_the_cache_only_ever_costs_time(recorded, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setattr(callbacks, "cache_root", cache)
    assert callbacks.compile_model("model") == "compiled"
    assert recorded == [{"cache": True}]
    recorded.clear()
    # an entry that cannot be read: deleted, compiled and saved again
    cache.mkdir(exist_ok=True)
    (cache / "logp_numba-k1.py312.1.nbc").write_text("trunc")
    (cache / "logp_numba-k1.py312.nbi").write_text("index")
    (cache / "logp_numba-k2.py312.nbi").write_text("another model's")
    assert callbacks.compile_model("unreadable cache") == "compiled"
    assert recorded == [{"cache": True}, {"cache": True}]
    assert sorted(p.name for p in cache.iterdir()) == ["logp_numba-k1.py312.1.nbc",
                                                       "logp_numba-k2.py312.nbi"]
    assert (cache / "logp_numba-k1.py312.1.nbc").read_text() == "saved again"
    assert callbacks._state["want_cache"] is False
    recorded.clear()
    # failing again after that: compiled without the cache
    assert callbacks.compile_model("broken cache") == "compiled"
    assert recorded == [{"cache": True}, {"cache": True}, {}]
    recorded.clear()
    # an error before any callback was built is the model's: raised at once
    with pytest.raises(ValueError, match="modelling error"):
        callbacks.compile_model("bad model")
    assert recorded == [{"cache": True}]
    recorded.clear()
    # a directory that cannot be created (a file in the way): no cache asked at all
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(callbacks, "cache_root", tmp_path / "file" / "cache")
    assert callbacks.compile_model("model") == "compiled"
    assert recorded == [{}]


class _Compiled(Exception):
    """Raised by the spy below once the fit has compiled: nothing is sampled."""


@pytest.mark.nuts
@pytest.mark.parametrize("moe_form", [None, "power"])
def test_compile_only_fills_the_cache_the_fit_loads(cache, tmp_path, capsys, monkeypatch,
                                                    moe_form):
    """`fit --compile-only` (what scripts/bootstrap.sh runs once) compiles exactly the model
    the real fit of the same inputs and forms compiles first: that fit's compile (`api.fit`,
    spied on and stopped before sampling) loads both callbacks. It samples nothing and writes
    nothing under models/."""
    import json

    from ddtree_bayes import api
    from ddtree_bayes.cli import main as cli
    from test_json_schemas import validate_output

    forms = ("--moe-form", moe_form) if moe_form else ()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert cli.main(["fit", "--compile-only", "--quiet", "--format", "json", *forms]) == 0
    out = json.loads(capsys.readouterr().out)
    validate_output("fit", out)
    assert out["compiled"] is True and out["cached"] is True and out["cache"] == str(cache)
    assert len(index_files(cache)) == 2
    assert list(work.iterdir()) == []      # no models/, nothing else

    seen = []
    real = callbacks.compile_model

    def spy(model, **kw):
        seen.append((real(model, **kw), kw))
        raise _Compiled

    monkeypatch.setattr(callbacks, "compile_model", spy)
    with pytest.raises(_Compiled):   # what `fit [--moe-form power]` calls
        api.fit(workdir=work, progress=False, moe_form=moe_form)
    ((compiled, kw),) = seen
    assert kw == {"free_only": True} and hits(compiled) == (1, 1)
    assert len(index_files(cache)) == 2
    assert list(work.iterdir()) == []


def test_compile_only_says_when_nothing_was_kept(tmp_path, capsys, monkeypatch):
    """With the cache off (or not writable) the compile is for nothing: one warning line, and
    `cached` false in the JSON."""
    import json

    from ddtree_bayes.cli import main as cli
    from ddtree_bayes.engine import fitting

    monkeypatch.setattr(fitting, "compile_only", lambda inputs, **kw: {
        "compile_s": 1.0, "cache": "/nowhere", "cached": False})
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "--compile-only", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["cached"] is False
    assert captured.err.count("\n") == 1 and "could not be kept in /nowhere" in captured.err


def test_compile_only_refuses_the_pymc_backend(tmp_path, capsys, monkeypatch):
    from ddtree_bayes.cli import main as cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "--compile-only", "--backend", "pymc"]) == 2
    err = capsys.readouterr().err
    assert "--compile-only compiles nutpie's callbacks" in err and "fix:" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flags", [("--draws", "100"), ("--chains", "2"), ("--tune", "50"),
                                   ("--target-accept", "0.9"), ("--seed", "7"),
                                   ("--no-remedy",)])
def test_compile_only_refuses_the_sampler_flags_it_would_ignore(tmp_path, capsys, monkeypatch,
                                                                flags):
    """`fit --compile-only --draws 100` compiled, exit 0, and dropped --draws without a word
    (only --help said so); `validate` refuses a flag its check does not read, and so does
    this: one line naming the flag, before anything is compiled."""
    from ddtree_bayes.cli import main as cli
    from ddtree_bayes.engine import fitting

    def compile_only(inputs, **kw):
        raise AssertionError("compiled")

    monkeypatch.setattr(fitting, "compile_only", compile_only)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "--compile-only", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ddtree-bayes: error: "), err
    assert f"{flags[0]} does not apply to fit --compile-only" in err and "fix:" in err
    assert list(tmp_path.iterdir()) == []


def small_model():
    """A scalar on a log scale, a vector over 3 groups and a zero-sum vector (its value has
    one element fewer than the variable: 2)."""
    import pymc as pm

    with pm.Model(coords={"g": ["a", "b", "c"]}) as model:
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("x", 0.0, sd, dims="g")
        pm.ZeroSumNormal("z", sigma=1.0, dims="g")
    return model


def test_free_shapes_are_nutpies_read_off_an_initial_point():
    """The free values' shapes a compile needs, read off a point of them: what nutpie's own
    ``_compute_shapes`` (a second initial-point function and a shape function) gives, as
    int64 arrays (a reshape to another type would be another graph: another cache key)."""
    import nutpie.compile_pymc as ncp
    from pymc.initial_point import make_initial_point_fn

    model = small_model()
    point = make_initial_point_fn(model=model, jitter_rvs=set(model.free_RVs))(7)
    shapes = callbacks.free_shapes(model, point)
    assert {k: v.tolist() for k, v in shapes.items()} == \
        {"sd_log__": [], "x": [3], "z_zerosum__": [2]}
    assert all(v.dtype == np.int64 for v in shapes.values())
    nutpies = ncp._compute_shapes(model)
    for name, shape in shapes.items():
        assert nutpies[name].dtype == shape.dtype
        np.testing.assert_array_equal(nutpies[name], shape)
    del point["x"]
    assert callbacks.free_shapes(model, point) is None   # (nutpie's own then)


def test_a_free_only_compile_builds_no_second_initial_point_function(monkeypatch):
    """nutpie's ``_make_functions`` is handed the initial-point function it samples from;
    its ``_compute_shapes`` built a second one (and a shape function) per compile, ~0.3 s of
    a warm fit. With the free variables only, the shapes come from the one it was handed,
    called once at seed 0; without (shared data, deterministics), nutpie's own, as before."""
    import nutpie.compile_pymc as ncp
    import pymc.initial_point
    from pymc.initial_point import make_initial_point_fn

    monkeypatch.delenv("DDTREE_BAYES_NUTPIE_PATCH", raising=False)
    assert callbacks.patch_nutpie()
    model = small_model()
    given = make_initial_point_fn(model=model, jitter_rvs=set(model.free_RVs))
    seeds: list[int] = []

    def handed(seed):
        seeds.append(seed)
        return given(seed)

    def no_second(**kwargs):
        raise AssertionError("a second initial-point function")

    def shapes_seen(model, **kwargs):   # _make_functions up to its shapes
        return ncp._compute_shapes(model)

    monkeypatch.setattr(callbacks, "_nutpie_make_functions", shapes_seen)
    monkeypatch.setattr(pymc.initial_point, "make_initial_point_fn", no_second)
    monkeypatch.setitem(callbacks._state, "free_only", True)
    shapes = ncp._make_functions(model, mode="NUMBA", compute_grad=True, join_expanded=True,
                                 pymc_initial_point_fn=handed, var_names=[])
    assert seeds == [0]
    assert {k: v.tolist() for k, v in shapes.items()} == \
        {"sd_log__": [], "x": [3], "z_zerosum__": [2]}
    assert callbacks._state["initial_point_fn"] is None   # (not kept past the compile)
    monkeypatch.setitem(callbacks._state, "free_only", False)
    with pytest.raises(AssertionError, match="a second initial-point function"):
        ncp._make_functions(model, mode="NUMBA", compute_grad=True, join_expanded=True,
                            pymc_initial_point_fn=handed, var_names=None)


def test_a_compile_records_no_stack_trace_on_its_graph_nodes(monkeypatch, tmp_path):
    """PyTensor keeps, on every variable it creates, the 8 stack frames it was created from
    (``traceback__limit``; for its error messages), reading their source lines: ~0.2 s of a
    warm fit's compile. Off while a model compiles (restored after, an error or not); a
    user's own PYTENSOR_FLAGS naming it wins."""
    import nutpie
    import pytensor
    import pytensor.tensor as pt

    seen: list = []

    def compile_pymc_model(model, **kwargs):
        seen.append((pytensor.config.traceback__limit, pt.dvector("v").tag.trace))
        if model == "bad model":
            raise ValueError("a modelling error")
        return "compiled"

    monkeypatch.setattr(nutpie, "compile_pymc_model", compile_pymc_model)
    monkeypatch.setattr(callbacks, "cache_root", tmp_path / "cache")
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    before = pytensor.config.traceback__limit
    assert before == 8 and pt.dvector("v").tag.trace != []
    assert callbacks.compile_model("model") == "compiled"
    assert seen == [(0, [])]
    assert pytensor.config.traceback__limit == before
    with pytest.raises(ValueError, match="a modelling error"):
        callbacks.compile_model("bad model")
    assert seen[-1] == (0, []) and pytensor.config.traceback__limit == before
    monkeypatch.setenv("PYTENSOR_FLAGS", "traceback__limit=8")
    callbacks.compile_model("model")
    assert seen[-1][0] == 8 and seen[-1][1] != []


def test_a_model_compiles_without_fastmath_whatever_the_caller_set(monkeypatch, tmp_path):
    """An API caller's ``pytensor.config.numba__fastmath = True`` after importing the model
    reached nutpie's compile (fastmath code compiled fresh and loaded from the cache differ in
    the last bits: a fit's digits then depend on the cache). Off while a model compiles,
    restored after."""
    import nutpie
    import pytensor

    seen: list = []
    monkeypatch.setattr(nutpie, "compile_pymc_model",
                        lambda model, **kw: seen.append(pytensor.config.numba__fastmath) or "c")
    monkeypatch.setattr(callbacks, "cache_root", tmp_path / "cache")
    with pytensor.config.change_flags(numba__fastmath=True):
        assert callbacks.compile_model("model") == "c"
        assert pytensor.config.numba__fastmath is True
    assert seen == [False]


def test_nutpie_imported_without_arviz_plots():
    """nutpie's sample module imports the ``arviz`` umbrella (arviz-base, -stats and -plots,
    with matplotlib: ~0.25 s of a fit) for two functions of arviz-base. Imported through
    :func:`callbacks.import_nutpie`, nutpie holds arviz-base itself and neither arviz nor
    matplotlib is imported; a later ``import arviz`` is the whole package, as before."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ddtree_bayes.engine import callbacks\n"
        "nutpie = callbacks.import_nutpie()\n"
        "ns = sys.modules['nutpie.sample']\n"
        "print(ns.arviz.__name__, 'arviz' in sys.modules, 'matplotlib' in sys.modules)\n"
        "import arviz, arviz_base\n"
        "print(arviz.from_dict is arviz_base.from_dict is ns.arviz.from_dict,\n"
        "      arviz.dict_to_dataset is ns.arviz.dict_to_dataset,\n"
        "      hasattr(arviz, 'plot_dist'), 'matplotlib' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert out[0] == "arviz_base False False"
    assert out[1] == "True True True True"


def test_a_nutpie_that_needs_more_of_arviz_than_arviz_base_is_imported_with_arviz(tmp_path):
    """With arviz-base standing in for ``arviz``, a nutpie whose import takes a name arviz-base
    lacks (``from arviz import rhat``: arviz-stats', through the umbrella) raised ImportError,
    which the sampler reads as "nutpie is not installed; falling back to PyMC's NUTS": another
    sampler, other draws, for an installed nutpie. Such an import is made again with the
    whole ``arviz``, as nutpie imports it itself; no stand-in is left in ``sys.modules``."""
    import os
    import subprocess
    import sys

    fake = tmp_path / "nutpie"
    fake.mkdir()
    (fake / "__init__.py").write_text("from nutpie import sample\n")
    (fake / "sample.py").write_text("import arviz\nfrom arviz import rhat\n")
    code = (
        "import sys\n"
        "from ddtree_bayes.engine import callbacks\n"
        "nutpie = callbacks.import_nutpie()\n"
        "import arviz, arviz_base\n"
        "print(nutpie.__file__.startswith(sys.argv[1]), nutpie.sample.arviz is arviz,\n"
        "      arviz is not arviz_base, nutpie.sample.rhat is arviz.rhat)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "True"]


def test_arviz_base_imported_without_reading_the_source_of_the_stack():
    """arviz-base's import calls ``lazy_loader.load("jax")`` and ``("numpyro")``; neither
    installed, each called ``inspect.stack()``, which reads the source line of every frame on
    the stack and first maps every imported module to its file (~0.1-0.25 s of a fit, after
    PyMC's ~1,200 modules). :func:`callbacks.import_nutpie` imports arviz-base with the frames
    alone (file, line, function; the standard ``inspect.stack`` is not called): the same
    stand-in modules, whose error still names the module and the file and line it was asked
    for; ``inspect.stack`` is the standard one again after."""
    import subprocess
    import sys

    code = (
        "import inspect, sys\n"
        "import pymc\n"
        "orig, asked = inspect.stack, []\n"
        "def stack(context=1):\n"
        "    asked.append(context)\n"
        "    return orig(context)[1:]\n"
        "inspect.stack = stack\n"
        "from ddtree_bayes.engine import callbacks\n"
        "callbacks.import_nutpie()\n"
        "print(asked, inspect.stack is stack)\n"
        "import arviz_base.io_numpyro as io\n"
        "try:\n"
        "    io.jax.numpy\n"
        "except ModuleNotFoundError as e:\n"
        "    print(str(e).splitlines()[0], 'io_numpyro.py, line 21, in <module>' in str(e))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "[] True"
    assert out[1] == "No module named 'jax' True"


def entries(cache) -> list:
    return sorted((cache / "models").glob("*.json"))


def unconstrained_draws(compiled):
    import nutpie

    dt = nutpie.sample(compiled, draws=50, tune=50, chains=2, cores=1, seed=11,
                       progress_bar=False, store_unconstrained=True)
    stats = dt["sample_stats"].to_dataset()
    return {k: stats[k].values for k in ("unconstrained_draw", "logp", "step_size")}


@pytest.mark.nuts
def test_a_compiled_model_is_found_again_without_pytensor(cache, monkeypatch):
    """A second compile of the free variables of the same model (rebuilt) finds the index
    entry the first wrote and loads both callbacks without nutpie or PyTensor compiling
    anything: the same fields, initial points and draws, bit for bit."""
    import nutpie.compile_pymc as ncp

    from test_model_key import small_model

    first = callbacks.compile_model(small_model(), free_only=True)
    assert hits(first) == (0, 0) and len(entries(cache)) == 1
    with monkeypatch.context() as m:
        def compiled_again(*args, **kwargs):
            raise AssertionError("compiled again")

        m.setattr(ncp, "_compile_pymc_model_numba", compiled_again)
        m.setattr("pymc.pytensorf.compile", compiled_again)
        second = callbacks.compile_model(small_model(), free_only=True)
    assert hits(second) == (1, 1) and callbacks.last_compile_cached()
    assert second.n_dim == first.n_dim == 3 and second.n_expanded == first.n_expanded
    assert second.shape_info[:2] == first.shape_info[:2]
    assert [tuple(s) for s in second.shape_info[2]] == [tuple(s) for s in first.shape_info[2]]
    assert second.reparameterized_names == first.reparameterized_names == ["sd_log__"]
    assert second.dims == first.dims
    assert {k: list(v) for k, v in second.coords.items()} == {
        k: list(v) for k, v in first.coords.items()}
    assert second.user_data.dtype == first.user_data.dtype
    for seed in (0, 7):
        np.testing.assert_array_equal(second.initial_point_func(seed),
                                      first.initial_point_func(seed))
    a, b = unconstrained_draws(first), unconstrained_draws(second)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


@pytest.mark.nuts
def test_an_index_entry_is_only_ever_a_shortcut(cache, tmp_path):
    """Other data: another key, compiled. An entry that is not one, or whose callbacks are
    gone from numba's cache: compiled as before (the same draws) and written again."""
    from test_model_key import small_model

    first = callbacks.compile_model(small_model(), free_only=True)
    (entry,) = entries(cache)
    other = callbacks.compile_model(small_model(y=(0.5, 1.5, 2.5)), free_only=True)
    assert hits(other) == (0, 1) and len(entries(cache)) == 2   # (the copy reads no data)
    entry.write_text('{"logp": "not a key"}')
    assert hits(callbacks.compile_model(small_model(), free_only=True)) == (1, 1)
    assert callbacks.read_entry(entry.stem) is not None          # written again
    for path in cache.glob("*.nb[ic]"):
        path.unlink()
    again = callbacks.compile_model(small_model(), free_only=True)
    assert hits(again) == (0, 0) and callbacks.read_entry(entry.stem) is not None
    a, b = unconstrained_draws(first), unconstrained_draws(again)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


#: A process that compiles the copy callback into the cache at ``cache`` (argv[1]) and says
#: whether the callback was loaded from it instead ("loaded") or not there ("compiled").
_LOAD_OR_COMPILE = """
import sys
from pathlib import Path
from ddtree_bayes.engine import callbacks as C
from numba.core.ccallback import CFunc
from numba.core.sigutils import normalize_signature

C.cache_root = Path(sys.argv[1])
assert C._register_locator()
sizes = {"n_dim": 3}
key = C.callback_key(C.COPY_SOURCE, None, sizes, [], "")
if C.load_callback(C.COPY_SOURCE, "copy_numba", key, sizes, C.expand_signature()) is not None:
    print("loaded")
else:
    func = C.define(C.COPY_SOURCE, "copy_numba", None, sizes)
    C._KEYS[func] = key
    cfunc = CFunc(func, normalize_signature(C.expand_signature()), locals={}, options={})
    cfunc.enable_caching()
    cfunc.compile()
    print("compiled")
"""


@pytest.mark.parametrize("setting", [("NUMBA_OPT", "0"), ("NUMBA_BOUNDSCHECK", "1"),
                                     ("NUMBA_LOOP_VECTORIZE", "0"),
                                     ("NUMBA_SLP_VECTORIZE", "1"), ("NUMBA_OPT", "max")])
def test_a_callback_compiled_under_other_numba_settings_is_not_loaded(tmp_path, setting):
    """numba's cache index keys a function on its signature, bytecode and CPU (name and
    features: NUMBA_CPU_NAME, NUMBA_CPU_FEATURES and NUMBA_ENABLE_AVX are in it), not on the
    settings that change the machine code it generates. A callback compiled under
    NUMBA_OPT=0 (or bounds-checked, or with the vectorizers switched) was loaded by a
    process at the defaults, and the other way round: the same key, a stale callback. Each
    setting is now in the callbacks' key (and the model key); at the defaults the keys are
    what they were, so the callbacks cached before stay valid."""
    import os
    import subprocess
    import sys

    name, value = setting
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}

    def run(**extra: str) -> str:
        done = subprocess.run([sys.executable, "-c", _LOAD_OR_COMPILE, str(tmp_path)],
                              capture_output=True, text=True, env={**env, **extra},
                              timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run(**{name: value}) == "compiled"
    assert run() == "compiled"            # (was: "loaded", the callback of the other setting)
    assert run(**{name: value}) == "loaded"
    assert run() == "loaded"


def test_the_callbacks_keys_at_numbas_defaults_are_those_cached_before():
    """At numba's default settings no line is added: the key is the sha256 of the source,
    the inner key, the sizes and the versions, as before, so no cache is invalidated."""
    import hashlib
    from importlib.metadata import version

    sizes = {"n_dim": 3}
    text = "\n".join([callbacks.COPY_SOURCE, "-", repr(sorted(sizes.items())),
                      *(f"{p}={version(p)}" for p in ("nutpie", "pytensor", "numba"))])
    assert callbacks.callback_key(callbacks.COPY_SOURCE, None, sizes, [], "") == (
        hashlib.sha256(text.encode()).hexdigest())


def test_a_cached_callback_cut_short_is_compiled_again(tmp_path):
    """A callback's cache file cut short (a full disk, a copy interrupted: the .nbc halved)
    ended `fit` in "internal error: UnpicklingError: pickle data was truncated" (exit 1):
    the shortcut that loads a fit's compiled model without PyTensor
    (:func:`~ddtree_bayes.engine.callbacks.compile_free`) let numba's error through, where
    the cache is an optimisation only. Now the unreadable callback is forgotten (its files
    deleted) and compiled again, and the next process loads the new one."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", _LOAD_OR_COMPILE, str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-1000:]
        return done.stdout.strip()

    assert run() == "compiled"
    (data,) = tmp_path.glob("*.nbc")
    payload = data.read_bytes()
    data.write_bytes(payload[: len(payload) // 2])
    assert run() == "compiled"     # (was: UnpicklingError, exit 1)
    assert run() == "loaded"


def three_normals():
    """A model whose point is as long as test_model_key's ``small_model`` (3: ``mu`` of 2 and
    ``sd_log__``) but another one: three free normals ``a`` and a likelihood of its own."""
    import pymc as pm

    with pm.Model() as model:
        a = pm.Normal("a", 1.0, 2.0, shape=3)
        pm.Normal("obs", a.sum(), 1.0, observed=np.array([0.25, 4.0]))
    return model


def model_key_of(model) -> str:
    from pymc.initial_point import make_initial_point_fn

    from ddtree_bayes.engine import graph_key

    point = make_initial_point_fn(model=model, jitter_rvs=set(model.free_RVs),
                                  return_transformed=True)(0)
    with callbacks.untraced():   # (as a compile keys it: PyTensor's settings are in the key)
        return graph_key.model_key(model, callbacks.free_shapes(model, point))


@pytest.mark.nuts
def test_an_entry_of_another_model_of_the_same_length_is_compiled_over(cache):
    """The index entry of a model key names two callbacks and a length, and the length was
    all that was checked before loading them: an entry of another model whose point is as
    long (3 here) under this model's key served that model's log density. Now the entry
    says the key it was written under and a digest of the model's free values: a mismatch is
    a miss, the model compiles, and its own entry replaces the stray one."""
    from test_model_key import small_model

    first = callbacks.compile_model(small_model(), free_only=True)
    (entry,) = entries(cache)
    theirs = callbacks.read_entry(entry.stem)
    assert first.n_dim == 3 and theirs is not None
    key = model_key_of(three_normals())
    assert key != entry.stem
    callbacks.entry_path(key).write_text(entry.read_text())   # a stray entry under our key
    second = callbacks.compile_model(three_normals(), free_only=True)
    assert second.n_dim == 3
    # its log density compiled (0: not loaded), the copy callback of a length-3 point shared
    assert hits(second) == (0, 1)   # (was: (1, 1), the other model's log density)
    ours = callbacks.read_entry(key)
    assert ours is not None and ours["logp"] != theirs["logp"] and ours["model_key"] == key


def test_an_entry_is_loaded_only_for_the_key_and_layout_it_was_written_for(cache, monkeypatch):
    """:func:`~ddtree_bayes.engine.callbacks.load_compiled` with the loading stubbed: an entry
    of this key and this model's layout loads; the same entry under another key (a copied
    file), for a model of another layout but the same length, or of the old three fields, is
    a miss and nothing is loaded."""
    import json

    from pymc.initial_point import make_initial_point_fn

    from test_model_key import small_model

    loaded = []
    monkeypatch.setattr(callbacks, "load_callback",
                        lambda source, name, key, sizes, sig: loaded.append(key) or name)
    monkeypatch.setattr(callbacks, "assemble", lambda *args: "assembled")

    def shapes_of(model):
        point = make_initial_point_fn(model=model, jitter_rvs=set(model.free_RVs),
                                      return_transformed=True)(0)
        return callbacks.free_shapes(model, point)

    mine, other = small_model(), three_normals()
    mine_shapes, other_shapes = shapes_of(mine), shapes_of(other)
    key, other_key = "1" * 64, "2" * 64
    entry = {"logp": "a" * 64, "copy": "b" * 64, "n_dim": 3, "model_key": key,
             "layout": callbacks.layout_digest(mine, mine_shapes)}
    callbacks.entry_path(key).parent.mkdir(parents=True)

    def load(write: dict, at: str, model, shapes):
        callbacks.entry_path(at).write_text(json.dumps(write))
        loaded.clear()
        got = callbacks.load_compiled(model, at, None, shapes)
        return got, list(loaded)

    assert load(entry, key, mine, mine_shapes) == ("assembled", ["a" * 64, "b" * 64])
    assert load(entry, other_key, mine, mine_shapes) == (None, [])        # copied elsewhere
    assert callbacks.layout_digest(other, other_shapes) != entry["layout"]
    assert load(entry, key, other, other_shapes) == (None, [])            # another model, 3 long
    old = {k: entry[k] for k in ("logp", "copy", "n_dim")}
    assert load(old, key, mine, mine_shapes) == (None, [])                # written before

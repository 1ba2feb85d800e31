"""The key a compiled model is found by without PyTensor compiling it (engine/graph_key.py):
exact encodings, and another key for any change of the graph, the data, a prior, the
shapes, PyTensor's settings or the package's code."""

from __future__ import annotations

import numpy as np
import pytest

from ddtree_bayes.engine import graph_key as G


def small_model(y=(0.5, 1.5, 2.0), mu_sd=1.0, check_bounds=True):
    import pymc as pm

    with pm.Model(coords={"g": ["a", "b"]}, check_bounds=check_bounds) as model:
        mu = pm.Normal("mu", 0.0, mu_sd, dims="g")
        sd = pm.HalfNormal("sd", 1.0)
        pm.Normal("y", mu[np.array([0, 1, 1])], sd, observed=np.array(y))
        pm.Deterministic("twice", 2 * mu)
    return model


SHAPES = {"mu": np.array([2]), "sd_log__": np.array([], dtype=np.int64)}


def key(model, shapes=None):
    return G.model_key(model, SHAPES if shapes is None else shapes)


def test_encodings_tell_apart_what_python_equates():
    from pytensor.misc.frozendict import frozendict

    assert len({G.encode(v) for v in (True, 1, 1.0, np.float64(1.0), "1", None)}) == 6
    assert G.encode((1, 2)) != G.encode([1, 2]) != G.encode((1, (2,)))
    assert G.encode(frozendict({0: 1, 1: 0})) == G.encode(frozendict({1: 0, 0: 1}))
    assert G.encode(frozendict({0: 1})) != G.encode(frozendict({0: 0}))
    assert G.encode(slice(0, 3)) != G.encode(slice(0, 3, 1))
    assert G.array_digest(np.float64(2.0)) != G.array_digest(np.array([2.0]))
    assert G.array_digest(np.zeros(2, "f4")) != G.array_digest(np.zeros(2, "f8"))
    assert G.array_digest(np.arange(4).reshape(2, 2).T) == G.array_digest(
        np.array([[0, 2], [1, 3]]))


def test_ops_encoded_by_their_identity():
    import pytensor.scalar as ps
    import pytensor.tensor as pt
    from pytensor.tensor.elemwise import DimShuffle, Elemwise

    x = pt.dvector("x")
    assert G.encode(pt.exp(x).owner.op) == G.encode(Elemwise(ps.exp))
    assert G.encode(pt.exp(x).owner.op) != G.encode(pt.log(x).owner.op)
    assert G.encode(DimShuffle(input_ndim=1, new_order=(0, "x"))) != G.encode(
        DimShuffle(input_ndim=1, new_order=("x", 0)))
    # scalar ops without __props__: the class and its output types (a cast: its type)
    assert G.encode(ps.Cast(ps.float32)) != G.encode(ps.Cast(ps.float64))
    assert G.encode(ps.gt) == G.encode(ps.GT()) != G.encode(ps.LT())


def test_what_has_no_exact_encoding_is_refused():
    class Opaque:
        pass

    for value in (Opaque(), lambda x: x, object()):
        with pytest.raises(G.Unkeyable):
            G.encode(value)


def test_a_model_rebuilt_has_the_same_key_and_any_change_another():
    base = key(small_model())
    assert base is not None and base == key(small_model())
    changed = {
        "a measured value": key(small_model(y=(0.5, 1.5, 2.0000001))),
        "a prior": key(small_model(mu_sd=2.0)),
        "the parameter checks": key(small_model(check_bounds=False)),
        "a shape": key(small_model(), {**SHAPES, "mu": np.array([3])}),
    }
    assert len({base, *changed.values()}) == 1 + len(changed), changed


def test_settings_versions_and_the_packages_code_are_in_the_key(monkeypatch):
    import pytensor

    model = small_model()
    base = key(model)
    with pytensor.config.change_flags(numba__fastmath=not pytensor.config.numba__fastmath):
        assert key(model) != base
    versions = G.versions()
    monkeypatch.setattr(G, "versions", lambda: (*versions, "numba=another"))
    other_versions = key(model)
    monkeypatch.setattr(G, "code_digest", lambda root=None: "another package")
    assert len({base, other_versions, key(model)}) == 3


def test_code_digest_changes_with_any_source_file(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("A = 1\n")
    (package / "sub" / "b.py").write_text("B = 2\n")
    (package / "notes.txt").write_text("not code\n")
    before = G.code_digest.__wrapped__(package)
    (package / "notes.txt").write_text("still not code\n")
    assert G.code_digest.__wrapped__(package) == before
    (package / "sub" / "b.py").write_text("B = 2  # a comment\n")
    assert G.code_digest.__wrapped__(package) != before


def test_the_bundled_model_keyed_and_its_data_and_priors_in_the_key(bundled_inputs, tmp_path):
    import dataclasses

    from ddtree_bayes.core import spec as S
    from ddtree_bayes.engine.model import build_model
    from test_callbacks import bundled_model, first_row_faster

    def shapes(model):
        point = model.initial_point()
        return {v.name: np.array(np.shape(point[v.name])) for v in model.value_vars}

    model = bundled_model(bundled_inputs)
    base = G.model_key(model, shapes(model))
    assert base is not None
    faster = bundled_model(bundled_inputs, data=first_row_faster(tmp_path))
    assert G.model_key(faster, shapes(faster)) not in (None, base)
    data, cfg = bundled_inputs[:2]
    prior = cfg.priors["step_ar_ms"]   # lognormal(median 10 ms, sigma 0.75)
    wider = dataclasses.replace(cfg, priors={**cfg.priors, "step_ar_ms": dataclasses.replace(
        prior, params={**prior.params, "sigma": prior.params["sigma"] * 1.01})})
    other = build_model(S.build_spec(data, wider), wider)
    assert G.model_key(other, shapes(other)) not in (None, base)


def test_numbas_code_settings_are_in_the_key(monkeypatch):
    """NUMBA_OPT (and the vectorizers, bounds checks, debug info, SVML) change the machine
    code of the callbacks but not numba's cache index: another setting is another key; at
    the defaults no line is added (the keys made before stay valid)."""
    import numba
    from numba.core.config import _OptLevel

    model = small_model()
    base = key(model)
    assert G.numba_settings() == ""
    monkeypatch.setattr(numba.config, "OPT", _OptLevel(0))
    assert G.numba_settings() == "numba OPT=0"
    assert key(model) != base
    monkeypatch.setattr(numba.config, "OPT", _OptLevel("max"))
    assert G.numba_settings() == "numba OPT=3max"
    max_key = key(model)
    assert max_key != base
    monkeypatch.setattr(numba.config, "OPT", _OptLevel(3))
    monkeypatch.setattr(numba.config, "BOUNDSCHECK", 1)
    assert key(model) not in (base, max_key)
    monkeypatch.setattr(numba.config, "BOUNDSCHECK", None)
    assert key(model) == base

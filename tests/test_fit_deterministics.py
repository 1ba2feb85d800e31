"""A fit compiles its free variables only and computes the deterministics after sampling
(engine/callbacks.py ``free_only``, engine/deterministics.py): the same posterior as nutpie
compiling the whole model, variable by variable, in the same order, with the same dims."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ddtree_bayes.engine import callbacks


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(callbacks, "cache_root", tmp_path / "cache")
    monkeypatch.delenv("DDTREE_BAYES_NUTPIE_PATCH", raising=False)
    return tmp_path / "cache"


def whole_compile_draws(model, settings, seed):
    """What the fit sampled before: nutpie's draws of the whole model compiled."""
    from ddtree_bayes.engine import inference

    compiled = callbacks.compile_model(model)
    assert compiled.n_expanded > compiled.n_dim
    return inference.run_nutpie(compiled, draws=settings.n_draws, tune=settings.tune,
                                chains=settings.chains, cores=1, seed=seed,
                                target_accept=settings.target_accept, save_warmup=False,
                                progress_bar=False)


ONE_ENGINE = "data/public/llamacpp_mtp_qwen38_27b_rtx5090.csv"


@pytest.mark.nuts
@pytest.mark.parametrize("forms", [(None, None), ("linear", "fraction"), ONE_ENGINE])
def test_deterministics_after_sampling_equal_the_compiled_ones(cache, bundled_inputs, forms,
                                                               monkeypatch):
    """Also a fit of one engine (the llama.cpp RTX 5090 sweep, as docs/howto/own-data.md
    fits it), whose zero-sum engine effects have no free value: reshaping that empty
    variable's draws crashed the fit."""
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import SamplerSettings
    from ddtree_bayes.engine import deterministics, inference
    from ddtree_bayes.engine.fitting import with_forms
    from ddtree_bayes.engine.model import build_model

    data, cfg = bundled_inputs
    if forms == ONE_ENGINE:
        from pathlib import Path

        from ddtree_bayes.api import load_inputs
        from ddtree_bayes.core.paths import bundled

        data, cfg = load_inputs(Path(__file__).resolve().parents[1] / ONE_ENGINE,
                                bundled("priors.toml"), bundled("hardware.csv"))
        assert len({r.engine for r in data.rows}) == 1
    else:
        cfg = with_forms(cfg, *forms)
    model = build_model(S.build_spec(data, cfg), cfg)
    settings = SamplerSettings(chains=2, draws=60, tune=60)
    monkeypatch.setattr("os.cpu_count", lambda: 1)   # cores=1, as whole_compile_draws
    new, _, backend = inference.sample(model, settings, seed=5, progress=False)
    assert backend == "nutpie"
    old = whole_compile_draws(model, settings, seed=5)

    free = {v.name for v in model.value_vars}
    computed = [v.name for v in deterministics.omitted(model, callbacks.compile_model(
        model, free_only=True))]
    assert computed and not free & set(computed)
    assert sorted(new.children) == sorted(old.children) == ["posterior", "sample_stats"]
    a, b = old["posterior"].to_dataset(), new["posterior"].to_dataset()
    assert list(b.data_vars) == list(a.data_vars)   # the same variables, in nutpie's order
    for name in a.data_vars:
        assert b[name].dims == a[name].dims, name
        for dim in a[name].dims:
            np.testing.assert_array_equal(b[dim].values, a[dim].values)
        if name in computed:   # numpy's exp/log against numba's: the last bits at most
            np.testing.assert_allclose(b[name].values, a[name].values, rtol=1e-10,
                                       atol=1e-12, err_msg=name)
        else:                  # sampled: the very same draws
            np.testing.assert_array_equal(b[name].values, a[name].values, err_msg=name)
    sa, sb = old["sample_stats"].to_dataset(), new["sample_stats"].to_dataset()
    assert list(sb.data_vars) == list(sa.data_vars)   # no unconstrained_draw left over
    assert dict(sb.sizes) == dict(sa.sizes)
    np.testing.assert_array_equal(sb["logp"].values, sa["logp"].values)


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    """nutpie's compile replaced by a recorder of its keyword arguments (no numba)."""
    import nutpie

    calls: list[dict] = []

    def compile_pymc_model(model, **kwargs):
        calls.append(kwargs)
        return "compiled"

    monkeypatch.setattr(nutpie, "compile_pymc_model", compile_pymc_model)
    monkeypatch.setattr(callbacks, "cache_root", tmp_path / "cache")
    monkeypatch.delenv("DDTREE_BAYES_NUTPIE_PATCH", raising=False)
    return calls


def fake_model(data_vars=(), dtype="float64"):
    return SimpleNamespace(data_vars=list(data_vars),
                           value_vars=[SimpleNamespace(dtype="float64"),
                                       SimpleNamespace(dtype=dtype)])


def test_free_only_asked_of_nutpie_only_where_the_copy_is_its_expansion(recorded,
                                                                        monkeypatch):
    assert callbacks.compile_model(fake_model(), free_only=True) == "compiled"
    assert recorded.pop() == {"cache": True, "var_names": []}
    callbacks.compile_model(fake_model())
    assert recorded.pop() == {"cache": True}
    # shared data (validation folds, SBC): its deterministics read what nutpie is given,
    # so compiled whole (cached: engine/callbacks.stable_names)
    callbacks.compile_model(fake_model(data_vars=["config_n"]), free_only=True)
    assert recorded.pop() == {"cache": True}
    callbacks.compile_model(fake_model(dtype="int64"), free_only=True)   # not a copy
    assert recorded.pop() == {"cache": True}
    assert callbacks._state["free_only"] is False
    monkeypatch.setenv("DDTREE_BAYES_NUTPIE_PATCH", "0")   # nutpie's own callbacks
    callbacks.compile_model(fake_model(), free_only=True)
    assert recorded.pop() == {}


def test_copy_callback_is_keyed_without_an_inner_function():
    key = callbacks.callback_key(callbacks.COPY_SOURCE, None, {"n_dim": 3}, shared_keys=[])
    assert key is not None
    assert key != callbacks.callback_key(callbacks.COPY_SOURCE, None, {"n_dim": 4}, [])
    assert callbacks.callback_key(callbacks.COPY_SOURCE, None, {"n_dim": 3}, ["k"]) is None

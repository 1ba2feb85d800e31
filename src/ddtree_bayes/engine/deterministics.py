"""The posterior variables nutpie was not asked to compute, computed after sampling.

A fit compiles the free variables only (:func:`ddtree_bayes.engine.callbacks.compile_model`
with ``free_only=True``): numba then types the log density and its gradient and nothing
else, ~10 s less of a first fit on a machine (docs/performance.md, "The C callbacks
cached"). What nutpie would have stored besides, every deterministic and the constrained
value of every transformed variable, is computed here from the draws' unconstrained values:
the graphs nutpie would have compiled (the model's ``unobserved_value_vars``), vectorised
over all draws at once and run by PyTensor's Python linker (numpy; nothing to compile, no
numba). The values are those nutpie computes up to the last bits of ``exp``/``log``
(relative differences up to ~1e-14; ``tests/test_fit_deterministics.py``), and in the same order.
"""

from __future__ import annotations

from typing import Any

#: the sample statistic holding each draw's unconstrained point (``store_unconstrained``)
UNCONSTRAINED = "unconstrained_draw"
#: what ``store_unconstrained`` adds beside it, removed again
_UNCONSTRAINED_GROUPS = ("unconstrained_posterior", "warmup_unconstrained_posterior")


def omitted(model, compiled) -> list:
    """The model's variables a compiled nutpie model leaves out of its draws (graphs of the
    value variables, in the order nutpie would have stored them); empty for a model compiled
    whole."""
    stored = set(compiled.shape_info[0])
    return [v for v in model.unobserved_value_vars if v.name not in stored]


def values_fn(model, outputs: list):
    """A function of the free variables' unconstrained values, each with a leading draw
    axis (in ``model.value_vars`` order), returning ``outputs`` over those draws; outputs
    that do not depend on them come back without the draw axis."""
    import pytensor
    import pytensor.tensor as pt
    from pytensor.compile.mode import Mode
    from pytensor.compile.ops import ViewOp
    from pytensor.graph.replace import graph_replace, vectorize_graph
    from pytensor.graph.traversal import applys_between

    # a Deterministic is a view of its value: identities, which would vectorise to a
    # Python loop over the draws (Blockwise), so they are taken out first
    while views := {node.outputs[0]: node.inputs[0]
                    for node in applys_between(model.value_vars, outputs)
                    if isinstance(node.op, ViewOp)}:   # (a view of a view: one per pass)
        outputs = graph_replace(outputs, views, strict=False)
    batched = {v: pt.tensor(dtype=v.dtype, shape=(None, *v.type.shape), name=v.name)
               for v in model.value_vars}
    vectorised = vectorize_graph(outputs, replace=batched)
    return pytensor.function(list(batched.values()), vectorised,
                             mode=Mode(linker="py", optimizer="None"), on_unused_input="ignore")


def complete(dt, model, compiled, variables: list | None = None):
    """``dt`` (nutpie's draws of a model compiled with ``free_only``, sampled with
    ``store_unconstrained=True``) with the ``variables`` it omits (default
    :func:`omitted`) added to its posterior after the ones it has, the unconstrained
    draws dropped again: the DataTree a model compiled whole gives."""
    import numpy as np
    import xarray as xr

    variables = omitted(model, compiled) if variables is None else variables
    stats = dt["sample_stats"].to_dataset()
    point = np.asarray(stats[UNCONSTRAINED].values)
    n_chains, n_draws = point.shape[:2]
    flat = point.reshape(n_chains * n_draws, -1)
    names, slices, shapes = compiled.shape_info
    where = {n: (sl, tuple(sh)) for n, sl, sh in zip(names, slices, shapes, strict=True)}
    # (len(flat), not -1: a variable of size 0, the zero-sum effects of a fit of one engine,
    # leaves -1 undetermined)
    inputs = [flat[:, where[v.name][0]].reshape(len(flat), *where[v.name][1])
              for v in model.value_vars]
    posterior = dt["posterior"].to_dataset()
    added: dict[str, Any] = {}
    if variables:
        results = values_fn(model, variables)(*inputs)
        for var, value in zip(variables, results, strict=True):
            value = np.asarray(value)
            if value.ndim == var.ndim:   # not a function of the draws: a constant
                value = np.broadcast_to(value, (len(flat), *value.shape))
            value = np.ascontiguousarray(value).reshape(n_chains, n_draws, *value.shape[1:])
            dims = compiled.dims.get(var.name) or [f"{var.name}_dim_{i}"
                                                    for i in range(value.ndim - 2)]
            added[var.name] = xr.DataArray(value, dims=("chain", "draw", *dims))
    coords = {d: posterior.coords[d] for d in ("chain", "draw")}
    for da in added.values():
        for d in da.dims[2:]:
            if d not in coords:
                coords[d] = (compiled.coords[d] if d in compiled.coords
                             else np.arange(da.sizes[d]))
    completed = xr.Dataset({**posterior.data_vars, **added}, coords=coords,
                           attrs=posterior.attrs)
    stats = stats.drop_vars(UNCONSTRAINED)
    used = {d for da in stats.data_vars.values() for d in da.dims}
    stats = stats.drop_vars([c for c in stats.coords if not set(stats[c].dims) <= used])
    groups = {name: dt[name].to_dataset() for name in dt.children
              if name not in _UNCONSTRAINED_GROUPS}
    groups["/"] = dt.to_dataset()
    groups["posterior"], groups["sample_stats"] = completed, stats
    return xr.DataTree.from_dict(groups)

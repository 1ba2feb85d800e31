"""A content hash of what nutpie compiles for a model, before PyTensor is asked to compile it.

A warm fit's compile (~2-3.5 s) is PyTensor building, rewriting and linking the log density
and its gradient, only for the numba cache to hand back callbacks it already holds
(docs/performance.md, "The warm compile without PyTensor"). :func:`model_key` hashes the
log density's graph as the model builds it, before any rewrite, with everything else the
compiled callbacks depend on, so :mod:`ddtree_bayes.engine.callbacks` can find them without
building the rest:

- the graph, node by node in topological order: each op's class and every one of its
  ``__props__`` (which define an op's identity in PyTensor), the edges, each output's type;
  each constant's dtype, shape and bytes; each shared value's type and current value; the
  free variables' value variables by their position in ``model.free_RVs``, with their types,
  their random variables' dtypes and the shapes nutpie reshapes them to;
- ``model.check_bounds`` (nutpie rewrites the parameter checks away without it);
- every PyTensor configuration value but ``blas__ldflags`` (the C backend's BLAS, not used
  by numba, and ~0.7 s to look up);
- the versions of Python, nutpie, PyMC, PyTensor, numba, llvmlite, numpy and scipy (scipy:
  constant folding calls it);
- numba's settings that change the machine code it generates but not its cache's index
  (:func:`numba_settings`: NUMBA_OPT, the vectorizers, bounds checks, debug info, Intel
  SVML), where they differ from numba's defaults;
- a digest of this package's source (every ``.py`` file), so any change of its code is
  another key.

A value it cannot encode exactly (an op without ``__props__``, a function defined inside
another, a graph input that is neither a value variable, a constant nor a shared value)
makes the model unkeyable (None): it compiles as before. Nothing is unpickled or evaluated
from the key; it only names files.
"""

from __future__ import annotations

import hashlib
import sys
import types
from functools import cache
from importlib.metadata import version
from pathlib import Path

#: what the key is of; another scheme is another key
SCHEME = "ddtree-bayes model key 1"
#: PyTensor settings left out of the key (see the module's docstring)
CONFIG_SKIPPED = frozenset({"blas__ldflags"})


class Unkeyable(Exception):
    """A value :func:`encode` has no exact encoding of."""


def encode(value) -> str:
    """An exact text encoding of an op's property (equal values, equal text; unequal,
    unequal text), for the types an op of a model holds; :class:`Unkeyable` for others."""
    import numpy as np

    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({','.join(encode(v) for v in value)})"
    if isinstance(value, (frozenset, set)):
        return f"{type(value).__name__}({','.join(sorted(encode(v) for v in value))})"
    if isinstance(value, slice):
        return f"slice({encode(value.start)},{encode(value.stop)},{encode(value.step)})"
    if isinstance(value, np.dtype):
        return f"dtype:{value.str}"
    if isinstance(value, (np.ndarray, np.generic)):
        return array_digest(value)
    if isinstance(value, type):
        return f"type:{qualified(value)}"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return f"function:{qualified(value)}"
    if hasattr(value, "items") and hasattr(value, "keys"):   # dict, PyTensor's frozendict
        items = sorted(f"{encode(k)}={encode(v)}" for k, v in value.items())
        return f"{qualified(type(value))}{{{','.join(items)}}}"
    props = getattr(type(value), "__props__", None)
    if isinstance(props, tuple):
        fields = ",".join(f"{p}={encode(getattr(value, p))}" for p in props)
        return f"{qualified(type(value))}({fields})"
    if type(value).__eq__ in scalar_op_equalities():
        # a scalar op without props: equal to another of its class with the same output
        # types (and ``bool``, for the comparisons), which is PyTensor's own identity of it
        preference = getattr(value, "output_types_preference", None)
        return (f"{qualified(type(value))}[{encode(preference)},{encode(value.name)},"
                f"{encode(getattr(value, 'bool', None))}]")
    raise Unkeyable(f"{type(value).__module__}.{type(value).__qualname__}")


@cache
def scalar_op_equalities() -> tuple:
    """The ``__eq__`` of PyTensor's scalar ops without ``__props__`` whose whole identity
    :func:`encode` writes out (type, output types, ``bool``)."""
    from pytensor.scalar import basic

    return (basic.ScalarOp.__eq__, basic.LogicalComparison.__eq__,
            basic.FixedLogicalComparison.__eq__)


def qualified(obj) -> str:
    """``module.qualname`` of a class or function defined at a module's top level (one
    defined inside a function has no name that tells two of them apart)."""
    name = f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', None)}"
    if "<" in name or "None" in name.split("."):
        raise Unkeyable(name)
    return name


def array_digest(data) -> str:
    """dtype, shape and the sha256 of the bytes of a numpy array or scalar."""
    import numpy as np

    arr = np.asarray(data)
    if arr.dtype.hasobject:
        raise Unkeyable("an object array")
    digest = hashlib.sha256(arr.tobytes(order="C")).hexdigest()
    return f"array:{arr.dtype.str}:{arr.shape}:{digest}"


@cache
def code_digest(root: Path | None = None) -> str:
    """sha256 of every ``.py`` file of the package under ``root`` (default: this package),
    with their paths: read once per process (~20 ms)."""
    root = root or Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


@cache
def versions() -> tuple[str, ...]:
    """The versions of Python and of the libraries between the graph and the machine code."""
    libs = ("nutpie", "pymc", "pytensor", "numba", "llvmlite", "numpy", "scipy")
    return (f"python={sys.version}", *(f"{p}={version(p)}" for p in libs))


#: numba's settings (``numba.config`` names) that change the machine code it generates, and
#: their values when not set. numba's cache index keys a function on its signature, its
#: bytecode and the CPU (name and features, so NUMBA_CPU_NAME, NUMBA_CPU_FEATURES and
#: NUMBA_ENABLE_AVX are numba's own to key), not on these: a callback compiled under
#: NUMBA_OPT=0 was loaded at the defaults (tests/test_callbacks.py).
NUMBA_CODE_DEFAULTS = {"OPT": "3", "LOOP_VECTORIZE": "1", "SLP_VECTORIZE": "0",
                       "BOUNDSCHECK": "None", "DEBUGINFO_DEFAULT": "0",
                       "EXTEND_VARIABLE_LIFETIMES": "0", "DISABLE_INTEL_SVML": "0"}


def numba_settings() -> str:
    """numba's :data:`NUMBA_CODE_DEFAULTS` settings that are not at their defaults,
    ``name=value`` a line ("" at the defaults, so the keys made before stay valid);
    ``NUMBA_OPT=max`` is ``OPT=3max`` (level 3 with extra passes)."""
    import numba

    lines = []
    for name, default in NUMBA_CODE_DEFAULTS.items():
        value = getattr(numba.config, name, None)
        try:
            text = "None" if value is None else (
                f"{int(value)}{'max' if getattr(value, 'is_opt_max', False) else ''}")
        except (TypeError, ValueError):
            text = repr(value)
        if text != default:
            lines.append(f"numba {name}={text}")
    return "\n".join(lines)


def config_text() -> str:
    """Every PyTensor setting (but :data:`CONFIG_SKIPPED`), ``name=value`` a line."""
    import pytensor

    config = pytensor.config
    return "\n".join(f"{name}={getattr(config, name)!r}"
                     for name in sorted(config._config_var_dict)
                     if name not in CONFIG_SKIPPED)


def graph_lines(model, shapes: dict) -> list[str]:
    """The log density of ``model`` before rewriting, one line per input and node
    (:class:`Unkeyable` when an input or op has no exact encoding). ``shapes``: the free
    values' shapes (name: shape), which nutpie reshapes its flat point to."""
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import graph_inputs, io_toposort

    logp = model.logp()
    values = [model.rvs_to_values[rv] for rv in model.free_RVs]
    position = {v: i for i, v in enumerate(values)}
    lines = [f"check_bounds={model.check_bounds!r}"]
    for i, (rv, value) in enumerate(zip(model.free_RVs, values, strict=True)):
        if value.name not in shapes:
            raise Unkeyable(f"no shape for {value.name}")
        shape = tuple(int(n) for n in shapes[value.name])
        lines.append(f"value {i}: {encode(value.type)} {rv.dtype} {shape}")
    where: dict = {}
    for j, var in enumerate(graph_inputs([logp])):
        if var in position:
            where[var] = f"v{position[var]}"
            continue
        where[var] = f"i{j}"
        if isinstance(var, Constant):
            lines.append(f"i{j} constant {encode(var.type)} {array_digest(var.data)}")
        elif isinstance(var, SharedVariable):
            lines.append(f"i{j} shared {encode(var.type)} "
                         f"{array_digest(var.get_value(borrow=True))}")
        else:
            raise Unkeyable(f"a graph input {var} that is not a value, constant or shared")
    for k, node in enumerate(io_toposort(list(where), [logp])):
        for m, out in enumerate(node.outputs):
            where[out] = f"n{k}.{m}"
        lines.append(f"n{k} {encode(node.op)} ({' '.join(where[v] for v in node.inputs)}) "
                     f"-> {' '.join(encode(o.type) for o in node.outputs)}")
    lines.append(f"logp = {where[logp]}")
    return lines


def model_key(model, shapes: dict, extra: str = "") -> str | None:
    """The sha256 key of what nutpie compiles for ``model`` (the module's docstring), or
    None when the model cannot be keyed exactly. ``extra``: what else the caller's compiled
    result depends on (its callbacks' source, say)."""
    try:
        lines = graph_lines(model, shapes)
    except Unkeyable:
        return None
    h = hashlib.sha256()
    settings = numba_settings()
    for part in (SCHEME, extra, code_digest(), *versions(), *([settings] if settings else []),
                 config_text(), *lines):
        h.update(part.encode() + b"\n")
    return h.hexdigest()

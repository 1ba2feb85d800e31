"""nutpie's two C callbacks, compiled once per model and machine.

nutpie runs NUTS in Rust and calls two numba ``cfunc`` C callbacks: the log density with its
gradient, and the deterministics of each draw. Both wrap functions PyTensor compiled with
numba. PyTensor caches its functions on disk, but nutpie 0.16 builds the callbacks as
closures numba cannot cache: every process typed them again and LLVM generated the machine
code of the whole log density linked into them again, 2.5-4 s of a 16-20 s warm fit
(docs/performance.md, "The C callbacks cached").

Here the two callbacks are built from fixed source with their constants as globals (no
closure), and a cache locator registered with numba keys them on what determines their
machine code: PyTensor's own cache key of the function they wrap (its graph, constants
included), the callback's source, its sizes, the versions of nutpie, PyTensor and numba, and
numba's settings that change its machine code but not its cache's index (NUMBA_OPT and the
like, :func:`ddtree_bayes.engine.graph_key.numba_settings`).
A second fit of the same model on the same machine loads both from
``<PyTensor base_compiledir>/numba/ddtree_bayes`` (numba also checks its version and the CPU)
and draws bit for bit what a fresh compile draws (tests/test_callbacks.py).

A fit compiles the free variables only (``compile_model(model, free_only=True)``): the
deterministics and the constrained values of the transformed variables are not in the
callback, whose deterministics callback then just copies the unconstrained point, and
:mod:`ddtree_bayes.engine.deterministics` computes them after sampling, over all draws at
once in numpy. That takes the deterministics' numba typing (a quarter of the compile) out
of a first fit on a machine; the free variables' draws are the same, the deterministics the
same to the last bits of ``exp``/``log`` (tests/test_fit_deterministics.py).

A fit's compiled model is also found without PyTensor compiling anything (:func:`compile_free`):
an index entry ``<cache directory>/models/<key>.json`` (JSON, two callback keys and a size,
with the key and a digest of the model's free values it was written for, both checked)
keyed by :func:`ddtree_bayes.engine.graph_key.model_key`, the log density's graph before
rewriting with everything else the callbacks depend on, names the two callbacks, which are
loaded as they are: ~2.6 of a warm fit's ~3.4 CPU seconds of compile (docs/performance.md,
"The warm compile without PyTensor").

A model with shared data (``build_model(refittable=True)``: validation folds and SBC) is
cached too: nutpie names each shared value by a random ``uuid4`` that its callback reads the
value's pointer by, so the callbacks here read them by their position instead
(:func:`stable_names`), and the key holds the values' layout, not the values (nutpie passes
them at run time). The same graph on other values, or in another process, loads the same
callbacks.

Single-threaded: one compile at a time per process (the fit, compare and update paths).
Not cached: any function PyTensor itself does not cache; it compiles as before.
``DDTREE_BAYES_NUTPIE_PATCH=0`` uses nutpie's own wrappers, uncached.
"""

from __future__ import annotations

import hashlib
import os
import textwrap
from contextlib import contextmanager
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

# The callbacks check the sizes nutpie passes and copy element by element. nutpie 0.16's own
# copy the gradient with ``out[...] = grad``, which numba lowers through ``fancy_setslice`` and
# its shape-mismatch error path (~2 s more LLVM work); the values, and so the draws, are the
# same. Return codes as nutpie's: 0 ok, 1 an exception, 2 a wrong gradient length, 3 a
# non-finite gradient, 4 a non-finite log density; -1 / -2 for the deterministics.
LOGP_SOURCE = textwrap.dedent("""
    def logp_numba(dim, x_, out_, logp_, user_data_):
        if dim != n_dim:
            return -1
        try:
            x = numba.carray(x_, (n_dim,))
            out = numba.carray(out_, (n_dim,))
            logp = numba.carray(logp_, ())
            logp_val, grad = extract(x, user_data_)
            logp[()] = logp_val
            if grad.shape[0] != n_dim:
                return 2
            for i in range(n_dim):
                out[i] = grad[i]
            if not np.all(np.isfinite(out)):
                return 3
            if not np.isfinite(logp_val):
                return 4
        except Exception:
            return 1
        return 0
""")

EXPAND_SOURCE = textwrap.dedent("""
    def expand_numba(dim, expanded, x_, out_, user_data_):
        if dim != n_dim or expanded != n_expanded:
            return -1
        try:
            x = numba.carray(x_, (n_dim,))
            out = numba.carray(out_, (n_expanded,))
            (values,) = extract(x, user_data_)
            if values.shape[0] != n_expanded:
                return -2
            for i in range(n_expanded):
                out[i] = values[i]
        except Exception:
            return -2
        return 0
""")

# The deterministics callback of a model compiled with its free variables only
# (``var_names=[]``): what nutpie expands the point to is the point itself (the free
# variables' unconstrained values, in order, all float64), so copy it.
COPY_SOURCE = textwrap.dedent("""
    def copy_numba(dim, expanded, x_, out_, user_data_):
        if dim != n_dim or expanded != n_dim:
            return -1
        x = numba.carray(x_, (n_dim,))
        out = numba.carray(out_, (n_dim,))
        for i in range(n_dim):
            out[i] = x[i]
        return 0
""")

# callback function -> its cache key; read by the locator numba asks for a cache directory
_KEYS: WeakKeyDictionary[Any, str] = WeakKeyDictionary()
_state: dict[str, Any] = {"want_cache": False, "locator": False, "keys": [],
                         "free_only": False, "initial_point_fn": None}
# nutpie's own _make_functions and _compute_shapes, which :func:`_install` wraps
_nutpie_make_functions: Any = None
_nutpie_compute_shapes: Any = None
# where the callbacks are cached; None: PyTensor's numba cache directory + /ddtree_bayes
cache_root: Path | None = None


class Uncacheable(Exception):
    """A callback asked to be cached has no stable key (shared data, or PyTensor's key is
    missing): :func:`compile_model` compiles the model again without the cache."""


def cache_dir() -> Path:
    """The directory the callbacks are cached in (inside PyTensor's, so a fresh
    ``base_compiledir`` is a cold cache for both)."""
    if cache_root is not None:
        return cache_root
    from pytensor.link.numba.cache import NUMBA_CACHE_PATH

    return Path(NUMBA_CACHE_PATH) / "ddtree_bayes"


def _register_locator() -> bool:
    """Put a numba cache locator for the callbacks of :data:`_KEYS` first in numba's list;
    False when numba's (private) caching API is not what this was written against."""
    if _state["locator"]:
        return True
    try:
        from numba.core.caching import CacheImpl, _CacheLocator

        locators = CacheImpl._locator_classes
    except (ImportError, AttributeError):
        return False

    class CallbackLocator(_CacheLocator):
        def __init__(self, key: str):
            self._key = key

        def ensure_cache_path(self) -> None:
            cache_dir().mkdir(parents=True, exist_ok=True)

        def get_cache_path(self) -> str:
            return str(cache_dir())

        def get_source_stamp(self) -> int:
            return 0   # the key already holds the source and the versions

        def get_disambiguator(self) -> str:
            return self._key

        @classmethod
        def from_function(cls, py_func, py_file):
            key = _KEYS.get(py_func)
            return None if key is None else cls(key)

    locators.insert(0, CallbackLocator)  # type: ignore[arg-type]
    _state["locator"] = True
    return True


@cache
def _versions() -> tuple[str, ...]:
    """The packages whose code a cached callback holds (read once per process)."""
    return tuple(f"{p}={version(p)}" for p in ("nutpie", "pytensor", "numba"))


def callback_key(source: str, inner, sizes: dict[str, int], shared_keys,
                 shared: str = "") -> str | None:
    """The cache key of a callback around PyTensor's numba function ``inner`` (None: a
    callback that calls none, :data:`COPY_SOURCE`); None when it cannot be cached (shared
    values under nutpie's random names, or PyTensor does not cache ``inner``).

    ``shared``: the layout of the shared values the callback reads, once
    :func:`stable_names` has named them by position (``shared_keys`` then holds those
    names): their values are not in the key, as they are not in the machine code (nutpie
    passes them at run time), so one graph on other data loads the same callback."""
    if shared_keys and not shared:
        return None
    inner_key: str | None = "-"
    if inner is not None:
        from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

        py_func = getattr(inner, "py_func", None)
        inner_key = None if py_func is None else CACHED_SRC_FUNCTIONS.get(py_func)
    if inner_key is None:
        return None
    # (no line for no shared values, nor for numba's code settings at their defaults: the
    # keys of the callbacks cached before stay valid)
    from ddtree_bayes.engine.graph_key import numba_settings

    settings = numba_settings()
    text = "\n".join([source, inner_key, repr(sorted(sizes.items())),
                      *([shared] if shared else []), *_versions(),
                      *([settings] if settings else [])])
    return hashlib.sha256(text.encode()).hexdigest()


#: what :func:`stable_names` calls the shared value at position i of nutpie's record
SHARED_NAME = "shared{}"


def stable_names(user_data, shared_keys, shared_data):
    """nutpie's shared values renamed by their position in its record of them.

    nutpie names each shared value (``pm.Data``) by a random ``uuid4`` and the callback
    reads it from a numpy record by that name, so the name is in the machine code and a
    callback could never be loaded from the cache. The record's layout depends on the
    order, number and ranks of the values only: read by positional names, the same record
    nutpie passes at run time gives the same pointers, and the same graph the same code.
    Returns (keys, data, record dtype) under the new names and the layout for
    :func:`callback_key` (names, ranks, dtypes and the record's descr)."""
    import numpy as np

    order = user_data.dtype["shared"]["data"].names   # nutpie's names, in record order
    name = {key: SHARED_NAME.format(i) for i, key in enumerate(order)}

    def renamed(descr):
        return [(name.get(field, field), renamed(kind) if isinstance(kind, list) else kind,
                 *rest) for field, kind, *rest in descr]

    dtype = np.dtype(renamed(user_data.dtype.descr))
    if dtype.itemsize != user_data.dtype.itemsize:   # (cannot happen: same fields, order)
        raise RuntimeError("the renamed record of shared values has another layout")
    data = {name[k]: v for k, v in shared_data.items()}
    keys = [name[k] for k in shared_keys]
    layout = repr([(k, data[k].ndim, data[k].dtype.str) for k in keys]) + repr(dtype.descr)
    return keys, data, dtype, layout


def define(source: str, name: str, extract, sizes: dict[str, int]):
    """The Python function ``name`` of ``source``, with ``extract`` and ``sizes`` as its
    globals (what numba compiles into a callback, or loads one by)."""
    import numba
    import numpy as np

    # __name__: numba's cache rebuilds a callback's environment by importing its module
    namespace = {"numba": numba, "np": np, "extract": extract, "__name__": __name__, **sizes}
    exec(compile(source, f"<ddtree_bayes-{name}>", "exec"), namespace)  # noqa: S102 - fixed source
    return namespace[name]


def build(source: str, name: str, inner, extract, sizes: dict[str, int], shared_keys,
          shared: str = ""):
    """The callback ``name`` defined by ``source`` with ``extract`` and ``sizes`` as globals,
    keyed for the cache when it can be (else :class:`Uncacheable` if a cache was asked)."""
    func = define(source, name, extract, sizes)
    key = callback_key(source, inner, sizes, shared_keys, shared)
    if key is not None:
        _KEYS[func] = key
        if _state["want_cache"]:
            _state["keys"].append(key)
    elif _state["want_cache"]:
        raise Uncacheable(name)
    return func


def logp_signature():
    """The C signature nutpie calls the log-density callback by."""
    import numba

    double_p = numba.types.CPointer(numba.types.double)
    return numba.types.int64(numba.types.uint64, double_p, double_p, double_p,
                             numba.types.voidptr)


def expand_signature():
    """The C signature nutpie calls the deterministics callback by."""
    import numba

    double_p = numba.types.CPointer(numba.types.double)
    return numba.types.int64(numba.types.uint64, numba.types.uint64, double_p, double_p,
                             numba.types.voidptr)


def _install(ncp) -> None:
    """Replace nutpie's two callback makers with :func:`build` on the fixed sources."""
    make_extraction_fn = ncp.make_extraction_fn

    def extraction(fn, user_data, shared_keys, shared_data):
        if not shared_keys:
            return make_extraction_fn(fn, shared_data, shared_keys, user_data.dtype), [], ""
        keys, data, dtype, layout = stable_names(user_data, shared_keys, shared_data)
        return make_extraction_fn(fn, data, keys, dtype), keys, layout

    def make_logp(n_dim, logp_fn, user_data, shared_keys, shared_data):
        extract, keys, layout = extraction(logp_fn, user_data, shared_keys, shared_data)
        c_sig = logp_signature()
        return build(LOGP_SOURCE, "logp_numba", logp_fn, extract, {"n_dim": n_dim},
                     keys, layout), c_sig

    def make_expand(n_dim, n_expanded, expand_fn, user_data, shared_var_keys, shared_data):
        c_sig = expand_signature()
        if _state["free_only"]:   # nothing to expand: see COPY_SOURCE
            if n_expanded != n_dim:
                raise RuntimeError(f"free variables only, yet {n_expanded} values to "
                                   f"expand {n_dim} to")
            return build(COPY_SOURCE, "copy_numba", None, None, {"n_dim": n_dim},
                         []), c_sig
        extract, keys, layout = extraction(expand_fn, user_data, shared_var_keys, shared_data)
        return build(EXPAND_SOURCE, "expand_numba", expand_fn, extract,
                     {"n_dim": n_dim, "n_expanded": n_expanded}, keys, layout), c_sig

    ncp._make_c_logp_func = make_logp
    ncp._make_c_expand_func = make_expand
    if hasattr(ncp, "_make_functions") and hasattr(ncp, "_compute_shapes"):
        global _nutpie_make_functions, _nutpie_compute_shapes
        _nutpie_make_functions, _nutpie_compute_shapes = ncp._make_functions, ncp._compute_shapes
        ncp._make_functions = _make_functions
        ncp._compute_shapes = _compute_shapes


def free_shapes(model, point: dict):
    """The shapes of ``model``'s free values (its ``value_vars``) as nutpie's
    ``_compute_shapes`` gives them (int64 arrays: a reshape to a tuple would be another
    graph, so another cache key), read off ``point``, an initial point of them (name:
    value); None when ``point`` lacks one."""
    import numpy as np

    shapes = {}
    for var in model.value_vars:
        if var.name not in point:
            return None
        shapes[var.name] = np.array(np.shape(point[var.name]), dtype=np.int64)
    return shapes


def _make_functions(model, *args, **kwargs):
    """nutpie's ``_make_functions``, with the initial-point function it was handed kept for
    :func:`_compute_shapes` while it runs."""
    _state["initial_point_fn"] = kwargs.get("pymc_initial_point_fn")
    try:
        return _nutpie_make_functions(model, *args, **kwargs)
    finally:
        _state["initial_point_fn"] = None


def _compute_shapes(model):
    """nutpie's ``_compute_shapes`` builds a second initial-point function of the model and
    a shape function of every variable it could store (~0.3 s of a warm fit). Compiling the
    free variables only, a compile needs the free values' shapes alone: read off the
    initial point the function nutpie samples from gives at seed 0 (it reseeds itself at
    every call, so the chains' starting points do not change; nor do the shapes, jitter or
    not). Else (deterministics stored, shared data), nutpie's own."""
    fn = _state["initial_point_fn"]
    shapes = free_shapes(model, fn(0)) if _state["free_only"] and fn is not None else None
    return _nutpie_compute_shapes(model) if shapes is None else shapes


def import_nutpie():
    """``import nutpie`` (ImportError when it is not installed), without importing ArviZ's
    plotting.

    nutpie's sample module imports the ``arviz`` umbrella package, which imports arviz-base,
    arviz-stats and arviz-plots (with matplotlib: ~0.25 s of a warm fit), and calls two
    functions of arviz-base through it (``arviz.from_dict`` and ``arviz.dict_to_dataset``:
    the same objects as arviz-base's). When nothing imported ``arviz`` yet, nutpie is
    imported with arviz-base standing in for it in ``sys.modules``, taken out again right
    after: nutpie's ``arviz`` is arviz-base, and a later ``import arviz`` imports the whole
    package, as before. (A lazy module cannot stand in: ``import`` reads its ``__spec__``,
    which loads it.) A nutpie whose import fails so (it takes a name arviz-base lacks) is
    imported again with the whole ``arviz``."""
    import sys

    if "nutpie.sample" in sys.modules or "arviz" in sys.modules:
        import nutpie

        return nutpie
    with _frames_only():
        import arviz_base

    if not all(hasattr(arviz_base, name) for name in ("from_dict", "dict_to_dataset")):
        # (another arviz-base: nutpie imports arviz whole, as it does)
        import nutpie

        return nutpie
    sys.modules["arviz"] = arviz_base
    try:
        import nutpie
    except ImportError:
        # it takes more of arviz than arviz-base holds (a later nutpie, say): imported again
        # below with the whole package, as it imports it itself (an ImportError here would
        # read as "nutpie is not installed" and sample with PyMC's NUTS)
        nutpie = None
    finally:
        if sys.modules.get("arviz") is arviz_base:
            del sys.modules["arviz"]
    if nutpie is None:
        import nutpie
    return nutpie


@contextmanager
def _frames_only():
    """``inspect.stack()`` as the frames alone while arviz-base is imported.

    arviz-base's import calls ``lazy_loader.load("jax")`` and ``("numpyro")``; for a module
    that is not installed, lazy_loader calls ``inspect.stack()`` to say later where it was
    asked for (the file, line and function of its caller). ``inspect.stack()`` reads the
    source line of every frame on the stack and, for the frames of frozen modules (the import
    system's), maps every imported module to its file first: ~0.1-0.2 s of a fit, after
    PyMC's ~1,200 modules, for a message nobody reads unless jax is used. Here it is the
    frames with their file, line and function, without source lines (``code_context`` None,
    which lazy_loader's message allows). Nothing is changed when arviz-base is imported."""
    import inspect
    import sys

    if "arviz_base" in sys.modules:
        yield
        return
    stack = inspect.stack

    def frames_only(context: int = 1) -> list:
        frame: Any = sys._getframe(1)   # (from its caller: without this frame)
        frames = []
        while frame is not None:
            frames.append(inspect.FrameInfo(frame, frame.f_code.co_filename, frame.f_lineno,
                                            frame.f_code.co_name, None, None))
            frame = frame.f_back
        return frames

    inspect.stack = frames_only
    try:
        yield
    finally:
        inspect.stack = stack


def patch_nutpie() -> bool:
    """Use this module's callbacks in nutpie (when it has the functions they replace)."""
    if os.environ.get("DDTREE_BAYES_NUTPIE_PATCH", "1") == "0":
        return False
    import_nutpie()
    import nutpie.compile_pymc as ncp

    if getattr(ncp, "_ddtree_patched", False):
        return True
    needed = ("_make_c_logp_func", "_make_c_expand_func", "make_extraction_fn")
    if not all(hasattr(ncp, name) for name in needed):
        return False
    _install(ncp)
    ncp._ddtree_patched = True
    return True


def cache_enabled() -> bool:
    """PyTensor caches its numba functions (``numba__cache``): without that its functions
    have no key and nothing here could be cached."""
    import pytensor

    return bool(getattr(pytensor.config, "numba__cache", False))


def writable(path: Path) -> bool:
    """Can the cache directory be created and written (not a read-only install)?"""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def forget(keys: list[str]) -> None:
    """Delete the cache files of ``keys`` (an entry that could not be read)."""
    for key in keys:
        for path in cache_dir().glob(f"*{key}*"):
            path.unlink(missing_ok=True)


def free_only_possible(model) -> bool:
    """Can ``model`` be compiled with its free variables only (:func:`compile_model`)? Not
    with shared data (its deterministics would read the values nutpie is given), nor with a
    free variable that is not float64 (the copy would not be nutpie's expansion)."""
    return (not getattr(model, "data_vars", None)
            and all(v.dtype == "float64" for v in model.value_vars))


def compile_model(model, *, free_only: bool = False):
    """``nutpie.compile_pymc_model(model)`` with the callbacks loaded from the cache when
    this model was compiled on this machine before (and saved there when not).

    ``free_only``: compile the log density and nothing else, so the draws hold the free
    variables' unconstrained values only (``var_names=[]``; what else nutpie would have
    stored, :func:`ddtree_bayes.engine.deterministics.omitted` names and
    :func:`~ddtree_bayes.engine.deterministics.complete` computes). Honoured when nutpie
    takes this module's callbacks and :func:`free_only_possible`; else the whole model is
    compiled, as without it. Such a model, once compiled, is found again without PyTensor
    compiling it at all (:func:`compile_free`).

    The cache is an optimisation only. A model it cannot hold and a directory that cannot be
    written compile as nutpie would; an entry that cannot be read (say, cut short by a full
    disk) is deleted and written again, and if that fails too the model compiles without
    the cache, at the cost of a few seconds."""
    free_only = bool(free_only and patch_nutpie() and free_only_possible(model))
    _state["free_only"], _state["keys"] = free_only, []
    try:
        with untraced(), without_fastmath():
            if free_only:
                return compile_free(model)
            return _compile(model, {})
    finally:
        _state["free_only"] = False


def cache_usable() -> bool:
    """Can compiled callbacks be loaded from and saved to the cache (nutpie patched,
    PyTensor's cache on, the directory writable, numba's caching API as expected)?"""
    return (patch_nutpie() and cache_enabled() and writable(cache_dir())
            and _register_locator())


def compile_free(model):
    """:func:`compile_model` of the free variables only.

    A warm compile went to PyTensor building, rewriting and linking the log density and its
    gradient (~2-3.5 s) only for numba's cache to hand back the callbacks it holds. Here the
    model's log density, as the model builds it (before any rewrite), is hashed with what
    else the callbacks depend on (:func:`ddtree_bayes.engine.graph_key.model_key`); an entry
    of that key in ``<cache_dir>/models`` names the two callbacks, which are loaded from
    numba's cache as they are, and nutpie's compiled model is put together around them
    (:func:`assemble`): the same machine code, the same initial points, so the same draws.
    Without an entry (or with one whose callbacks are gone) the model compiles as before and
    the entry is written once the callbacks are in the cache."""
    import pymc as pm

    if not cache_usable() or not isinstance(model, pm.Model):
        return _compile(model, {"var_names": []})
    from ddtree_bayes.engine import graph_key

    initial_point_fn = make_initial_point_fn(model)
    shapes = free_shapes(model, initial_point_fn(0))
    key = None if shapes is None else graph_key.model_key(model, shapes)
    if key is not None:
        compiled = load_compiled(model, key, initial_point_fn, shapes)
        if compiled is not None:
            return compiled
    compiled = _compile(model, {"var_names": []})
    if key is not None and shapes is not None:
        remember(key, model, compiled, shapes)
    return compiled


#: the entries of :func:`compile_free`'s index: what each holds (JSON, not a pickle): the
#: two callbacks' keys, the point's length, and what :func:`load_compiled` checks before it
#: loads them: the model key the entry was written under and :func:`layout_digest` of the
#: model it was written for (an entry of another model of the same length was loaded)
ENTRY_FIELDS = {"logp": str, "copy": str, "n_dim": int, "model_key": str, "layout": str}


def entry_path(key: str) -> Path:
    """Where the index entry of a model key is (inside :func:`cache_dir`)."""
    return cache_dir() / "models" / f"{key}.json"


def make_initial_point_fn(model):
    """The initial-point function nutpie's ``compile_pymc_model`` makes for ``model`` (its
    defaults: every free variable jittered around its support point, transformed values),
    behind its lock."""
    import nutpie.compile_pymc as ncp
    from pymc.initial_point import make_initial_point_fn as make

    fn = make(model=model, overrides=None, default_strategy="support_point",
              jitter_rvs=set(model.free_RVs), return_transformed=True)
    return ncp._wrap_with_lock(fn)


def layout(model, shapes: dict):
    """The free values' names, slices and shapes in nutpie's flat point (``model.free_RVs``
    order), its length, and the names of those with a transform."""
    import math

    names, slices, shape_list, count = [], [], [], 0
    for rv in model.free_RVs:
        name = model.rvs_to_values[rv].name
        shape = shapes[name]
        length = math.prod(int(n) for n in shape)
        names.append(name)
        slices.append(slice(count, count + length))
        shape_list.append(shape)
        count += length
    reparameterized = [model.rvs_to_values[rv].name for rv in model.free_RVs
                       if model.rvs_to_transforms.get(rv) is not None]
    return (names, slices, shape_list), count, reparameterized


def layout_digest(model, shapes: dict) -> str:
    """sha256 of :func:`layout`'s free values of ``model`` (their names, shapes and order in
    nutpie's point, which of them are transformed) and of the point's length: what an index
    entry is written for and checked against before its callbacks are loaded, so a model
    whose point is as long as another's but laid out otherwise is never served the other's
    callbacks."""
    (names, _, shape_list), n_dim, reparameterized = layout(model, shapes)
    text = repr((n_dim, [(name, tuple(int(n) for n in shape))
                         for name, shape in zip(names, shape_list, strict=True)],
                 reparameterized))
    return hashlib.sha256(text.encode()).hexdigest()


def assemble(model, initial_point_fn, shapes: dict, logp_cfunc, copy_cfunc):
    """nutpie's compiled model of ``model``'s free variables around two loaded callbacks: the
    fields ``compile_pymc_model(model, var_names=[])`` fills, filled as it fills them."""
    import nutpie.compile_pymc as ncp

    shape_info, n_dim, reparameterized = layout(model, shapes)
    names, _, shape_list = shape_info
    flat_initial_point = ncp._rv_dict_to_flat_array_wrapper(
        initial_point_fn, names=names, shapes=shape_list)
    dims, coords = ncp._prepare_dims_and_coords(model, shape_info, reparameterized)
    return ncp.CompiledPyMCModel(
        _n_dim=n_dim, dims=dims, _coords=coords,
        _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
        compiled_logp_func=logp_cfunc, compiled_expand_func=copy_cfunc,
        initial_point_func=flat_initial_point, shared_data={}, shared_var_keys={},
        user_data=ncp.make_user_data({}, {}), n_expanded=n_dim, shape_info=shape_info,
        logp_func=None, expand_func=None, reparameterized_names=reparameterized)


def same_layout(model, shapes: dict, compiled) -> bool:
    """Does :func:`assemble` put together what nutpie compiled (``compiled``)? Checked
    before an index entry is written: an entry is only ever a shortcut to the same model."""
    import nutpie.compile_pymc as ncp

    shape_info, n_dim, reparameterized = layout(model, shapes)
    names, slices, shape_list = shape_info
    got_names, got_slices, got_shapes = compiled.shape_info
    return (list(got_names) == names and list(got_slices) == slices
            and [tuple(int(n) for n in s) for s in got_shapes]
            == [tuple(int(n) for n in s) for s in shape_list]
            and compiled.n_dim == n_dim and compiled.n_expanded == n_dim
            and list(compiled.reparameterized_names or []) == reparameterized
            and not compiled.shared_data
            and compiled.user_data.dtype == ncp.make_user_data({}, {}).dtype)


def read_entry(key: str) -> dict | None:
    """The index entry of ``key``, None when there is none or it is not one (read as JSON,
    every field checked)."""
    import json

    try:
        entry = json.loads(entry_path(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or set(entry) != set(ENTRY_FIELDS):
        return None
    if not all(type(entry[k]) is t for k, t in ENTRY_FIELDS.items()):
        return None
    if not all(len(entry[k]) == 64 and set(entry[k]) <= set("0123456789abcdef")
               for k in ("logp", "copy", "model_key", "layout")):
        return None
    return entry


def load_compiled(model, key: str, initial_point_fn, shapes: dict):
    """nutpie's compiled model of ``key`` from the index and numba's cache, None on a miss:
    also when the entry was written under another key (a file copied or renamed) or for a
    model laid out otherwise (:func:`layout_digest`: other free values, another length), so
    another model's callbacks are compiled over, never loaded (an entry of the three fields
    written before these checks is a miss once, and written again)."""
    entry = read_entry(key)
    if entry is None or entry["model_key"] != key:
        return None
    _, n_dim, _ = layout(model, shapes)
    if entry["n_dim"] != n_dim or entry["layout"] != layout_digest(model, shapes):
        return None
    sizes = {"n_dim": n_dim}
    logp = load_callback(LOGP_SOURCE, "logp_numba", entry["logp"], sizes, logp_signature())
    copy = None if logp is None else load_callback(COPY_SOURCE, "copy_numba", entry["copy"],
                                                   sizes, expand_signature())
    if logp is None or copy is None:
        return None
    _state["keys"] = [entry["logp"], entry["copy"]]
    return assemble(model, initial_point_fn, shapes, logp, copy)


class CacheMiss(Exception):
    """A callback :func:`load_callback` asked for is not in numba's cache."""


@cache
def _load_only_cfunc():
    """numba's ``CFunc`` that loads from its cache and never compiles (:class:`CacheMiss`)."""
    from numba.core.ccallback import CFunc

    class LoadOnly(CFunc):
        def _compile_uncached(self):
            raise CacheMiss(self.__qualname__)

    return LoadOnly


def load_callback(source: str, name: str, key: str, sizes: dict[str, int], signature):
    """The callback ``name`` cached under ``key``, loaded from numba's cache (numba checks
    the signature, its version and the CPU); None when it is not there, or cannot be read
    (its files, cut short, are deleted: the model compiles and caches it again)."""
    from numba.core.sigutils import normalize_signature

    func = define(source, name, None, sizes)
    _KEYS[func] = key
    cfunc = _load_only_cfunc()(func, normalize_signature(signature), locals={}, options={})
    cfunc.enable_caching()
    try:
        cfunc.compile()
    except CacheMiss:
        return None
    except Exception:  # noqa: BLE001 - files cut short (UnpicklingError, EOFError): a miss
        forget([key])   # (deleted: the model compiles and caches the callback again)
        return None
    return cfunc


def remember(key: str, model, compiled, shapes: dict) -> None:
    """Write the index entry of ``key`` for ``compiled`` (its callbacks now in numba's
    cache), when :func:`assemble` would put the same model together; a write that fails
    is skipped (the next compile of the model takes the long way again)."""
    import json

    def key_of(cfunc) -> str | None:
        func = getattr(cfunc, "__wrapped__", None)
        return None if func is None else _KEYS.get(func)

    logp_key = key_of(compiled.compiled_logp_func)
    copy_key = key_of(compiled.compiled_expand_func)
    if (not last_compile_cached() or logp_key is None or copy_key is None
            or not same_layout(model, shapes, compiled)):
        return
    path = entry_path(key)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"logp": logp_key, "copy": copy_key,
                                   "n_dim": int(compiled.n_dim), "model_key": key,
                                   "layout": layout_digest(model, shapes)}))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


@contextmanager
def untraced():
    """PyTensor off recording, on every variable it creates, the stack frames it was created
    from (``traceback__limit``, 8 frames with their source lines, for its error messages):
    ~0.2 s of a warm fit's compile, which rewrites the log density and its gradient into
    thousands of new variables. The graphs, their cache keys (``in_c_key=False``) and the
    draws are the same. A user's own ``PYTENSOR_FLAGS`` naming ``traceback`` wins."""
    import pytensor

    if "traceback" in os.environ.get("PYTENSOR_FLAGS", ""):
        yield
        return
    with pytensor.config.change_flags(traceback__limit=0):
        yield


@contextmanager
def without_fastmath():
    """numba's ``fastmath`` off while a model compiles, restored after: fastmath code compiled
    fresh and the same code loaded from the cache differ in the last bits, so a fit's digits
    would depend on whether the cache was warm (engine/inference.py
    ``reproducible_pytensor`` turns it off at import; this, for a caller who set it since).
    Not a user's choice either: the digits of a seed are the package's promise."""
    import pytensor

    with pytensor.config.change_flags(numba__fastmath=False):
        yield


def last_compile_cached() -> bool:
    """Are the callbacks of this process's last :func:`compile_model` in the cache (loaded
    from it or saved to it)? False when the model compiled without it."""
    return bool(_state["keys"])


def _compile(model, kwargs: dict[str, Any]):
    """:func:`compile_model`'s cache logic around ``nutpie.compile_pymc_model(model,
    **kwargs)``."""
    nutpie = import_nutpie()

    if (not patch_nutpie() or not cache_enabled() or not writable(cache_dir())
            or not _register_locator()):
        return nutpie.compile_pymc_model(model, **kwargs)
    for _ in range(2):
        _state["want_cache"], _state["keys"] = True, []
        try:
            return nutpie.compile_pymc_model(model, cache=True, **kwargs)
        except Uncacheable:
            break
        except Exception:
            if not _state["keys"]:   # failed before any callback: the model, not the cache
                raise
            forget(_state["keys"])   # an unreadable entry: forget it, try once more
        finally:
            _state["want_cache"] = False
    _state["keys"] = []   # compiled without the cache after all
    return nutpie.compile_pymc_model(model, **kwargs)

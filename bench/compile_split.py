#!/usr/bin/env python3
"""Where a fit's compile goes: ``engine.fitting.compile_only``'s model, split into phases.

Run in-process with the project's virtualenv python, in the compile cache to measure (an
install's: ``fit --compile-only`` first, as bench/bench_first_fit.py does):

    PYTENSOR_FLAGS=base_compiledir=DIR NUMBA_CACHE_DIR=DIR/numba \\
        .venv/bin/python bench/compile_split.py [--data FILE]

Prints CPU (``time.process_time``) and wall seconds of each phase of
``callbacks.compile_model(model, free_only=True)``, outermost only (never counted twice):
PyMC's initial-point function, the model key (engine/graph_key.py), PyTensor's rewrites
(``FunctionMaker.prepare_fgraph``) and linking (``FunctionMaker.create``), and numba compiling
the C callbacks (``CFunc.compile``: typing the log density's outer function and every kernel
that misses the cache, lowering, LLVM). Within numba: LLVM's per-function and final-module
optimisation and machine code generation, and numba's compile events (cache misses only),
by function name with their exclusive wall seconds. Wraps private PyTensor and numba
functions (PyTensor 3.3, numba 0.68): a measuring tool, not part of the package.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import time

PHASES: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
LLVM: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
_stack: list[str] = []


def outermost(owner, attr: str, label: str) -> None:
    """Time ``owner.attr`` into :data:`PHASES` when no other phase is running."""
    orig = getattr(owner, attr)

    def timed(*args, **kwargs):
        if _stack:
            return orig(*args, **kwargs)
        _stack.append(label)
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return orig(*args, **kwargs)
        finally:
            t = PHASES[label]
            t[0] += time.process_time() - cpu
            t[1] += time.perf_counter() - wall
            t[2] += 1
            _stack.pop()

    static = isinstance(inspect.getattr_static(owner, attr), staticmethod)
    setattr(owner, attr, staticmethod(timed) if static else timed)


def summed(owner, attr: str, label: str) -> None:
    """Add every call's CPU seconds of ``owner.attr`` to :data:`LLVM`."""
    orig = getattr(owner, attr)

    def timed(*args, **kwargs):
        cpu = time.process_time()
        try:
            return orig(*args, **kwargs)
        finally:
            LLVM[label][0] += time.process_time() - cpu
            LLVM[label][1] += 1

    setattr(owner, attr, timed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="measurement file (default: the bundled data)")
    args = p.parse_args()

    from numba.core import ccallback, event
    from numba.core import codegen as NC
    from pytensor.compile.maker import FunctionMaker

    from ddtree_bayes.engine import callbacks, fitting, graph_key
    from ddtree_bayes.engine import remedies as R

    outermost(FunctionMaker, "prepare_fgraph", "PyTensor rewrites (prepare_fgraph)")
    outermost(FunctionMaker, "create", "PyTensor linking (FunctionMaker.create)")
    outermost(ccallback.CFunc, "compile", "numba: the C callbacks (CFunc.compile)")
    outermost(graph_key, "model_key", "model key (graph_key.model_key)")
    outermost(callbacks, "make_initial_point_fn", "PyMC's initial-point function")
    summed(NC.CPUCodeLibrary, "_optimize_functions", "LLVM: per-function optimisation")
    summed(NC.CPUCodeLibrary, "_optimize_final_module",
           "LLVM: final module optimisation (callees linked in)")
    summed(NC.JITCodeLibrary, "_finalize_specific", "LLVM: machine code (finalize_object)")

    misses: list[tuple[str, float]] = []
    open_events: list[list[float]] = []   # [start, seconds of nested compiles]

    class Misses(event.Listener):
        def on_start(self, ev):
            open_events.append([time.perf_counter(), 0.0])

        def on_end(self, ev):
            start, nested = open_events.pop()
            seconds = time.perf_counter() - start
            if open_events:
                open_events[-1][1] += seconds
            d = ev.data["dispatcher"]
            name = getattr(getattr(d, "py_func", None), "__name__", None) or type(d).__name__
            misses.append((name, seconds - nested))

    event.register("numba:compile", Misses())

    inputs = fitting.FitInputs.read(args.data)
    cpu, wall = time.process_time(), time.perf_counter()
    model = R.builder(fitting.model_spec(inputs, inputs.priors), inputs.priors)("default")
    built = (time.process_time() - cpu, time.perf_counter() - wall)
    cpu, wall = time.process_time(), time.perf_counter()
    callbacks.compile_model(model, free_only=True)
    total = (time.process_time() - cpu, time.perf_counter() - wall)
    print(f"building the model: {built[0]:.2f} CPU s, {built[1]:.2f} wall s")
    print(f"compile_model: {total[0]:.2f} CPU s, {total[1]:.2f} wall s; "
          f"cached: {callbacks.last_compile_cached()}")
    accounted = 0.0
    for label, (c, w, n) in PHASES.items():
        accounted += c
        print(f"  {label:55s} {c:7.2f} CPU s {w:7.2f} wall s  ({n} calls)")
    print(f"  {'the rest':55s} {total[0] - accounted:7.2f} CPU s")
    for label, (c, n) in LLVM.items():
        print(f"    {label:53s} {c:7.2f} CPU s  ({n} calls)")
    by_name: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for name, seconds in misses:
        by_name[name][0] += seconds
        by_name[name][1] += 1
    print(f"numba compile events (cache misses): {len(misses)}")
    for name, (s, n) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:15]:
        print(f"  {name[:55]:55s} {s:7.2f} wall s exclusive  x{n:.0f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Does warm-starting nutpie from the previous fit make `ddtree-bayes update` faster?

In one process: fit the bundled data (the "previous" fit), append one hypothetical row
(B300 SGLang DDTree block 16 / budget 32, accept 13.1, 612 tok/s: HYPOTHETICAL, written only
to a temp dir), build the model of the new data, and sample it with four ways of starting
the chains, each with 1000 tuning steps (what `fit` does) and with 300, for several seeds:

- cold: nutpie's default (PyMC's initial point, jittered by U(-1, 1) in unconstrained space);
- init_mean: ``nutpie.sample(init_mean=<previous posterior medians, unconstrained>)``, the
  argument nutpie 0.16.11 documents for this. For PyMC models it is accepted and ignored
  (their start comes from the initial-point function built at compile time): the draws come
  out bit-identical to cold, which this script checks;
- medians: ``compile_pymc_model(initial_points=<previous posterior medians>)``, with nutpie's
  usual jitter on top;
- draws: each chain starts exactly at a random draw of the previous posterior (the best
  start there is: already in the typical set), by wrapping the compiled model's
  initial-point function.

nutpie 0.16.11 takes a start point but no mass matrix or step size from a previous run, so a
warm start can only help by letting the adaptation converge sooner: the tuning length is
fixed, so the cost measure is leapfrog steps (gradient evaluations, tuning included; does
not depend on machine load) plus wall seconds of nutpie.sample. Compilation (~5 s, the
largest part of a fit, the same for every start) is done once per start kind, not timed.

Run: .venv/bin/python bench/bench_warm_start.py [--seeds 5]
Writes bench/results/warm_start.json and .md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

HYPOTHETICAL_ROW = ("kimi-k2.6,b300,8,sglang,ddtree,16,32,33,13.1,,612,HYPOTHETICAL benchmark "
                    "row (bench_warm_start.py; not a measurement),\n")
KINDS = ("cold", "init_mean", "medians", "draws")
TUNES = (1000, 300)


def unconstrained_draws(model, previous) -> dict[str, np.ndarray]:
    """Previous posterior draws of every free variable, in the new model's unconstrained
    space, keyed by value-variable name, coordinates matched by label (NaN where new)."""
    import pytensor
    import pytensor.tensor as pt

    outs, names = [], []
    coords = previous.meta["coords"]
    for rv in model.free_RVs:
        old = previous.variables[rv.name]
        dims = model.named_vars_to_dims.get(rv.name)
        if dims:
            labels = [str(x) for x in coords.get(dims[0], [])]
            x = np.stack([old[:, labels.index(lab)] if lab in labels
                          else np.full(old.shape[0], np.nan)
                          for lab in map(str, model.coords[dims[0]])], axis=1)
        else:
            x = old
        transform = model.rvs_to_transforms.get(rv)
        value = pt.as_tensor(x)
        outs.append(value if transform is None else transform.forward(value, *rv.owner.inputs))
        names.append(model.rvs_to_values[rv].name)
    return dict(zip(names, pytensor.function([], outs, mode="FAST_COMPILE")(), strict=True))


def flat(compiled, values: dict[str, np.ndarray], base: np.ndarray) -> np.ndarray:
    out = base.copy()
    for name, sl, _ in zip(*compiled.shape_info, strict=True):
        if name in values and sl.stop <= compiled.n_dim:
            v = np.asarray(values[name], dtype=float).reshape(-1)
            out[sl] = np.where(np.isfinite(v), v, out[sl])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seeds", type=int, default=5, help="seeds per setting")
    p.add_argument("--out", type=Path, default=C.RESULTS_DIR / "warm_start.json")
    args = p.parse_args(argv)

    from ddtree_bayes.engine import callbacks, inference
    inference.reproducible_pytensor()
    import nutpie

    from ddtree_bayes import api
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.model import build_model

    machine = C.machine_info()
    date = C.now_iso()
    with tempfile.TemporaryDirectory(prefix="ddtree-bench-ws-") as tmp:
        work = Path(tmp)
        print("previous fit: bundled data, default settings", flush=True)
        prev = api.fit(bundled("measurements.csv"), bundled("priors.toml"),
                       hardware=bundled("hardware.csv"), workdir=work, progress=False)
        previous = store.load_fit(prev.path)
        new_data = work / "measurements.csv"
        new_data.write_text(bundled("measurements.csv").read_text() + HYPOTHETICAL_ROW)
        data, cfg = api.load_inputs(new_data, bundled("priors.toml"), bundled("hardware.csv"))
        model = build_model(S.build_spec(data, cfg), cfg)
        callbacks.patch_nutpie()
        t0 = time.perf_counter()
        cold = nutpie.compile_pymc_model(model)
        compile_s = time.perf_counter() - t0
        draws_u = unconstrained_draws(model, previous)
        medians_u = {k: np.median(v, axis=0) for k, v in draws_u.items()}
        init_mean = flat(cold, medians_u, np.zeros(cold.n_dim))
        medians_c = {rv.name: np.median(previous.variables[rv.name], axis=0)
                     for rv in model.free_RVs}  # the new row adds no coordinate here
        medians = nutpie.compile_pymc_model(model, initial_points=medians_c)
        default_start = cold.initial_point_func

        def from_a_draw(seed=None):
            i = np.random.default_rng(seed).integers(previous.n_draws)
            return flat(cold, {k: v[i] for k, v in draws_u.items()}, default_start(seed))

        compiled = {"cold": cold, "init_mean": cold, "medians": medians,
                    "draws": dataclasses.replace(cold, initial_point_func=from_a_draw)}
        settings = {"draws": 1000, "chains": 4, "target_accept": 0.99}
        runs = []
        for i in range(args.seeds):
            seed = 1000 + i
            for tune in TUNES:
                first: dict | None = None
                for kind in KINDS:
                    extra = {"init_mean": init_mean} if kind == "init_mean" else {}
                    t0 = time.perf_counter()
                    dt = nutpie.sample(compiled[kind], tune=tune, seed=seed,
                                       cores=min(4, os.cpu_count() or 1), save_warmup=True,
                                       progress_bar=False, **settings, **extra)
                    wall = time.perf_counter() - t0
                    rows, div, failures = inference.diagnose(dt["posterior"].to_dataset(),
                                                             dt["sample_stats"].to_dataset())
                    steps = int(dt["sample_stats"]["n_steps"].values.sum()
                                + dt["warmup_sample_stats"]["n_steps"].values.sum())
                    first_logp = float(np.median(dt["warmup_sample_stats"]["logp"].values[:, 0]))
                    post = dt["posterior"]["step_ar_ms"].values
                    if kind == "cold":
                        first = {"post": post}
                    same = bool(first is not None and np.array_equal(first["post"], post))
                    rec = {"start": kind, "tune": tune, "seed": seed, "sample_s": wall,
                           "leapfrog_steps": steps, "first_logp_median": first_logp,
                           "min_ess_bulk": min(r["ess_bulk"] for r in rows),
                           "max_rhat": max(r["rhat"] for r in rows), "divergences": div,
                           "converged": not failures, "identical_to_cold": same,
                           "loadavg": C.loadavg()}
                    runs.append(rec)
                    note = ", draws identical to cold" if same and kind != "cold" else ""
                    print(f"seed {seed} tune {tune} {kind:9s}: {wall:.2f} s, {steps} leapfrog "
                          f"steps, logp at first draw {first_logp:.1f}, min ESS "
                          f"{rec['min_ess_bulk']:.0f}, max R-hat {rec['max_rhat']:.3f}, "
                          f"{div} divergences{note}",
                          flush=True)
    summary = []
    for tune in TUNES:
        for kind in KINDS:
            rs = [r for r in runs if r["start"] == kind and r["tune"] == tune]
            summary.append({
                "start": kind, "tune": tune, "runs": len(rs),
                "sample_s_median": statistics.median(r["sample_s"] for r in rs),
                "leapfrog_steps_median": statistics.median(r["leapfrog_steps"] for r in rs),
                "first_logp_median": statistics.median(r["first_logp_median"] for r in rs),
                "min_ess_bulk_median": statistics.median(r["min_ess_bulk"] for r in rs),
                "min_ess_bulk_min": min(r["min_ess_bulk"] for r in rs),
                "max_rhat_max": max(r["max_rhat"] for r in rs),
                "divergences_total": sum(r["divergences"] for r in rs),
                "converged": sum(r["converged"] for r in rs),
                "identical_to_cold": sum(r["identical_to_cold"] for r in rs)})
    headers = ["start", "tune", "runs", "sampling s (median)", "leapfrog steps (median)",
               "logp at first draw (median)", "min bulk ESS (median / worst)", "max R-hat",
               "divergences", "passed gates", "draws identical to cold"]
    table = C.markdown_table(headers, [
        [s["start"], str(s["tune"]), str(s["runs"]), f"{s['sample_s_median']:.2f}",
         f"{s['leapfrog_steps_median']:.0f}", f"{s['first_logp_median']:.1f}",
         f"{s['min_ess_bulk_median']:.0f} / {s['min_ess_bulk_min']:.0f}",
         f"{s['max_rhat_max']:.3f}", str(s["divergences_total"]),
         f"{s['converged']}/{s['runs']}",
         "(reference)" if s["start"] == "cold" else f"{s['identical_to_cold']}/{s['runs']}"]
        for s in summary])
    md = (f"## warm start vs cold start, nutpie sampling only ({date})\n\n"
          f"compile {compile_s:.2f} s (not part of the rows); load average at start "
          f"{machine['loadavg_at_start']}, at end {C.loadavg()}\n\n{table}\n\n"
          f"command: `{C.command_line([sys.executable, *sys.argv])}`\n")
    C.write_json(args.out, {"benchmark": "warm start (in-process nutpie.sample)", "date": date,
                            "machine": machine, "compile_s": compile_s, "summary": summary,
                            "runs": runs, "markdown": md})
    args.out.with_suffix(".md").write_text(md)
    print("\n" + md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

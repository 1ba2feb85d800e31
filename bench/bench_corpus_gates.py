"""How often a fit passes its convergence gates at once, without the remedy ladder.

For seeds 1..N, sample the model of one measurement file once (the first attempt of
`ddtree-bayes fit`, no ladder) and record the failed gates, divergences, leapfrog steps per
draw and sampling seconds. The model is compiled once; every seed samples it again.

    .venv/bin/python bench/bench_corpus_gates.py --seeds 10                 # the corpus, auto draws
    .venv/bin/python bench/bench_corpus_gates.py --seeds 10 --draws 1000    # as before auto draws
    .venv/bin/python bench/bench_corpus_gates.py --data bundled --seeds 10
    .venv/bin/python bench/bench_corpus_gates.py --data bundled --parameterisation offsets

Writes a JSON file (default bench/results/corpus_gates-<label>.json) and prints one line
per seed and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

CORPUS = REPO / "data" / "examples" / "public_multi_model.csv"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--data", default=str(CORPUS),
                    help="measurement CSV, or 'bundled' for the bundled Kimi K2.6 rows")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1..N")
    ap.add_argument("--draws", type=int, default=None,
                    help="draws per chain (default: the fit's default for the model's size)")
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--parameterisation", default="default",
                    choices=("default", "offsets", "offsets+moe"),
                    help="the model's coordinates: the default, or rung 3's flips of the "
                         "remedy ladder (offsets: the pooled group offsets centred)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from ddtree_bayes.engine.inference import reproducible_pytensor

    reproducible_pytensor()
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import SamplerSettings
    from ddtree_bayes.engine import remedies as R
    from ddtree_bayes.engine.fitting import FitInputs

    data = None if args.data == "bundled" else args.data
    inputs = FitInputs.read(data=data, workdir=REPO)
    spec = S.build_spec(inputs.measurements, inputs.priors, **inputs.structure())
    sampler = R.ModelSampler(R.builder(spec, inputs.priors), 1, False)
    n_free = R.free_size(sampler.model())
    settings = SamplerSettings(draws=args.draws, tune=args.tune).for_model(n_free)
    label = f"{Path(args.data).stem}-draws{settings.draws}-tune{settings.tune}"
    if args.parameterisation != "default":
        label += "-" + args.parameterisation.replace("+", "-")
    out = args.out or REPO / "bench" / "results" / f"corpus_gates-{label}.json"
    runs = []
    t_all = time.perf_counter()
    for seed in range(1, args.seeds + 1):
        sampler.seed = seed
        a = sampler(settings, args.parameterisation)
        steps = float(a.dt["sample_stats"]["n_steps"].values.mean())
        runs.append({"seed": seed, "passed": a.passed, "failures": a.failures,
                     "divergences": a.divergences, "steps_per_draw": round(steps, 1),
                     "compile_s": round(a.timings.get("compile_s", 0.0), 2),
                     "sample_s": round(a.timings["sample_s"], 2)})
        print(json.dumps(runs[-1]), flush=True)
    samples = sorted(r["sample_s"] for r in runs)
    summary = {"passed": sum(r["passed"] for r in runs), "seeds": len(runs),
               "median_sample_s": samples[len(samples) // 2]}
    result = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
              "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "load_average": os.getloadavg(), "data": args.data, "free_parameters": n_free,
              "parameterisation": args.parameterisation,
              "settings": settings.as_dict(), "seconds": round(time.perf_counter() - t_all, 1),
              "summary": summary, "runs": runs}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"passed at once: {summary['passed']} of {summary['seeds']}; median sampling "
          f"{summary['median_sample_s']} s ({n_free} free parameters, {settings.draws} draws, "
          f"{settings.tune} tuning); {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

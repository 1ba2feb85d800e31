#!/usr/bin/env python3
"""How often does a fit of a public dataset need the remedy ladder? (issue 11)

For every public sweep the tool can fit (``data/public/*.csv``, read as ``validate
--extrapolate`` reads them: rows without acceptance or tok/s left out, sweeps in relative
units skipped; ``workflows.extrapolation.usable_sweeps``), fit all its rows with the
structured forms (the bundled priors with ``[model] moe_form = "roofline"``, ``step_form =
"structured"``) and the production sampler settings, once per seed, through the same ladder
``ddtree-bayes fit`` climbs (``engine.remedies.run`` with ``engine.remedies.ModelSampler``).
Each sweep's model is compiled once (per parameterisation) and sampled for every seed, as
one ``fit`` process would; nothing is saved.

Counts per sweep: passed at once, passed after remedy 1 / 2 / 3, still failed. Seeds are
the outer loop, so a run that stops at ``--max-minutes`` (default 60; a round of seeds that
would end later is not started) has the same seeds for every sweep and says how many. Run
with the project's virtualenv, one process (nutpie uses both cores):

    .venv/bin/python scripts/remedy_census.py                 # 20 seeds, docs/remedies.json
    .venv/bin/python scripts/remedy_census.py --seeds 2 --out /tmp/census.json   # smoke

The JSON is rewritten after every fit, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=20, help="fits per sweep (seeds 1..N)")
    p.add_argument("--sweeps", nargs="*", type=Path, default=None,
                   help="public sweep CSVs (default: data/public/*.csv)")
    p.add_argument("--only", default=None, help="fit only sweeps whose name contains this")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "remedies.json")
    p.add_argument("--max-minutes", type=float, default=60,
                   help="start no new round of seeds that would end after this")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from ddtree_bayes.engine.inference import reproducible_pytensor

    reproducible_pytensor()
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.config import SamplerSettings, parse_priors
    from ddtree_bayes.core.data import load_hardware
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine import remedies as R
    from ddtree_bayes.workflows.extrapolation import usable_sweeps, with_forms

    files = args.sweeps or sorted(f for f in (REPO / "data" / "public").glob("*.csv")
                                  if f.name != "hardware_flops.csv")
    hardware_csv = (REPO / "data" / "hardware.csv").read_text()
    hardware = load_hardware(REPO / "data" / "hardware.csv")
    cards = load_model_cards(REPO / "data" / "models.csv")
    priors_toml = with_forms(bundled("priors.toml").read_text(), "roofline", "structured")
    cfg = parse_priors(priors_toml)
    found, notes = usable_sweeps(files, hardware_csv)
    if args.only:
        found = [f for f in found if args.only in f[0]]
    settings = SamplerSettings()
    seeds = list(range(1, args.seeds + 1))
    results: dict = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": settings.as_dict(), "forms": {"moe_form": "roofline",
                                                  "step_form": "structured"},
        "seeds": seeds, "skipped": notes, "sweeps": []}
    t_all = time.perf_counter()
    samplers = {}
    for name, path, _text, data, lacking, _total in found:
        entry: dict = {"sweep": name, "file": str(Path(path).relative_to(REPO))
                       if Path(path).is_relative_to(REPO) else str(path),
                       "rows": len(data.rows), "rows_left_out": lacking, "fits": []}
        results["sweeps"].append(entry)
        try:
            spec = S.build_spec(data, cfg, hardware=hardware, cards=cards)
        except InputError as err:
            entry["cannot_fit"] = str(err)
            print(f"{name}: cannot fit ({err})", flush=True)
            continue
        samplers[name] = (entry, R.ModelSampler(R.builder(spec, cfg), seed=0, progress=False))
    # seed-major: a run stopped by --max-minutes has the same seeds for every sweep
    results["seeds_completed"] = 0
    for seed in seeds:
        t_round = time.perf_counter()
        for name, (entry, sampler) in samplers.items():
            sampler.seed = seed
            said: list[str] = []
            t0 = time.perf_counter()
            asked = settings.for_model(R.free_size(sampler.model()))
            _, record = R.run(sampler, asked, say=said.append,
                              parameterisations=sampler.parameterisations)
            fit = {"seed": seed, "outcome": record["outcome"], "remedy": record["remedy"],
                   "seconds": round(time.perf_counter() - t0, 2), "stderr": said,
                   "attempts": [{k: a[k] for k in ("remedy", "kind", "parameterisation",
                                                   "settings", "divergences", "failures",
                                                   "compile_s", "sample_s")}
                                for a in record["attempts"]]}
            entry["fits"].append(fit)
            print(f"{name} seed {seed}: {record['outcome']}"
                  + (f" (remedy {record['remedy']})" if record["remedy"] else "")
                  + f", {fit['seconds']:.1f} s" + "".join(f"\n    {line}" for line in said),
                  flush=True)
            results["elapsed_s"] = round(time.perf_counter() - t_all, 1)
            args.out.write_text(json.dumps(results, indent=1) + "\n")
        results["seeds_completed"] = seed
        elapsed, last = time.perf_counter() - t_all, time.perf_counter() - t_round
        if seed < seeds[-1] and elapsed + last > 60 * args.max_minutes:
            results["stopped"] = (f"after {seed} of {len(seeds)} seeds: another round "
                                  f"(~{last / 60:.0f} min) would pass --max-minutes "
                                  f"{args.max_minutes:g}")
            print(f"stopping {results['stopped']}", flush=True)
            break
    results["table"] = table(results)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print("\n" + results["table"])
    print(f"\n{results['elapsed_s']} s, {results['seeds_completed']} seeds; results: {args.out}")
    return 0


def table(results: dict) -> str:
    """Markdown: per sweep, fits passed at once / after each remedy / still failed; the
    sweeps that cannot be fitted and those skipped are listed under it."""
    head = ("| sweep | rows | fits | passed at once | remedy 1 (tuning) | remedy 2 (target "
            "acceptance) | remedy 3 (reparameterised) | still failed |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    totals = [0] * 6
    notes = []
    for s in results["sweeps"]:
        if "cannot_fit" in s:
            notes.append(f"- {s['sweep']}: cannot be fitted: "
                         + s["cannot_fit"].replace(str(REPO) + "/", ""))
            continue
        fits = s["fits"]
        counts = [len(fits), sum(f["outcome"] == "passed" for f in fits),
                  *(sum(f["remedy"] == k for f in fits) for k in (1, 2, 3)),
                  sum(f["outcome"] == "failed" for f in fits)]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        lines.append(f"| {s['sweep']} | {s['rows']} | " + " | ".join(map(str, counts)) + " |")
    lines.append("| **all** | | " + " | ".join(f"**{c}**" for c in totals) + " |")
    notes += [f"- {n}" for n in results["skipped"]]
    return "\n".join(lines + ([""] + notes if notes else []))


if __name__ == "__main__":
    sys.exit(main())

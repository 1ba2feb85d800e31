"""Score a held-out collection kept outside the repo: fit each pair, predict each question.

A collection's folder (``/work/shared/holdout_s47/`` on the project's machines) holds a
``README.md`` whose ``### `<pair>``` sections each give the pair's fit command
(``ddtree-bayes fit --data fits/data_<pair>.csv ...``) and its questions, one per line:
``ddtree-bayes predict ... --accept <a>   # measured <x> tok/s``; and a ``hardware.csv`` of
the GPUs the built-in table lacks. Per pair this fits ``fits/data_<pair>.csv`` with that
hardware file (the code of this checkout), then asks every question of that fit with this
checkout's code and, for a before/after comparison, with each ``--also NAME=SRC`` source tree
(another checkout's ``src``) on the same fit. Writes ``<out>.json`` (every answer) and prints
a markdown table and the pooled coverage / bias / median abs error / width per code, over all
rows and over the AMD GPUs' rows (``compute_capability`` a gfx target) and the others'::

    .venv/bin/python scripts/score_holdout.py /work/shared/holdout_s47 --workdir /tmp/hs \\
        --out docs/holdout_amd.json --also before=/tmp/old/src
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTION = re.compile(r"^ddtree-bayes (predict .*?)\s+# measured ([0-9.]+) tok/s", re.M)


def run(src: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run([sys.executable, "-m", "ddtree_bayes", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def amd_gpus(folder: Path) -> set[str]:
    """The GPUs of the collection's hardware file and the built-in table that are AMD ones."""
    names = set()
    for path in (folder / "hardware.csv", ROOT / "src" / "ddtree_bayes" / "_bundled" /
                 "hardware.csv"):
        if path.exists():
            with path.open() as f:
                names |= {r["hardware"] for r in csv.DictReader(f)
                          if r.get("compute_capability", "").strip().lower().startswith("gfx")}
    return names


def with_rows(base: Path, extra: list[Path], out: Path) -> Path:
    """``base``'s rows and every ``extra`` file's in one CSV (the union of their columns, a
    cell a file has no column for left blank) at ``out``."""
    tables = []
    for path in (base, *extra):
        with path.open(newline="") as f:
            tables.append(list(csv.DictReader(f)))
    columns = list(dict.fromkeys(c for t in tables for r in t[:1] for c in r))
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns, restval="")
        writer.writeheader()
        for t in tables:
            writer.writerows(t)
    return out


def score(rows: list[dict], name: str) -> dict:
    answers = [(r[name], r["measured"]) for r in rows if "median" in r[name]]
    if not answers:
        return {"n": 0}
    err = [a["median"] / m - 1 for a, m in answers]
    return {"n": len(answers),
            "coverage90": sum(a["lo90"] <= m <= a["hi90"] for a, m in answers) / len(answers),
            "bias": statistics.mean(err), "mdae": statistics.median(abs(e) for e in err),
            "width90": statistics.mean((a["hi90"] - a["lo90"]) / a["median"]
                                       for a, _ in answers)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="the held-out collection's folder")
    ap.add_argument("--workdir", type=Path, required=True, help="where the fits are written")
    ap.add_argument("--out", type=Path, required=True, help="the JSON of every answer")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=SRC",
                    help="another code's src tree to ask the same fits with")
    ap.add_argument("--extra-data", nargs="+", type=Path, default=[], metavar="CSV",
                    help="measurement files added to every pair's fit (an experiment: what "
                         "rows the corpus lacks would teach)")
    args = ap.parse_args(argv)
    codes = {"this": ROOT / "src"}
    for item in args.also:
        name, _, src = item.partition("=")
        codes[name] = Path(src)
    args.workdir.mkdir(parents=True, exist_ok=True)
    text = (args.folder / "README.md").read_text()
    amd = amd_gpus(args.folder)
    rows, fits = [], {}
    for section in re.split(r"^### `", text, flags=re.M)[1:]:
        pair = section.split("`", 1)[0]
        questions = QUESTION.findall(section)
        if not questions:
            continue
        data = args.folder / "fits" / f"data_{pair}.csv"
        if args.extra_data:
            data = with_rows(data, args.extra_data, args.workdir / f"data_{pair}.csv")
        res = run(codes["this"], ["fit", "--data", str(data),
                                  "--hardware-file", str(args.folder / "hardware.csv"),
                                  "--quiet", "--format", "json"], args.workdir)
        if res.returncode:
            print(f"{pair}: fit failed: {res.stderr.strip()[-300:]}", file=sys.stderr)
            continue
        fits[pair] = json.loads(res.stdout)["fit_id"]
        print(f"[holdout] {pair}: fit {fits[pair]}", file=sys.stderr, flush=True)
        for question, measured in questions:
            words = question.split()
            hw = words[words.index("--hardware") + 1]
            row: dict = {"pair": pair, "question": question, "measured": float(measured),
                         "amd": hw in amd}
            for name, src in codes.items():
                res = run(src, [*words, "--fit", fits[pair], "--format", "json"], args.workdir)
                row[name] = ({"error": res.stderr.strip()[-300:]} if res.returncode else
                             {k: v for k, v in json.loads(res.stdout)["rows"][0].items()
                              if k in ("median", "lo90", "hi90", "overhead_from")}
                             | {"warnings": json.loads(res.stdout)["warnings"]})
            rows.append(row)
    summary = {name: {"all": score(rows, name),
                      "amd": score([r for r in rows if r["amd"]], name),
                      "other": score([r for r in rows if not r["amd"]], name)}
               for name in codes}
    args.out.write_text(json.dumps({"folder": str(args.folder), "fits": fits,
                                    "extra_data": [str(p) for p in args.extra_data], "rows": rows,
                                    "summary": summary}, indent=1) + "\n")
    print("| pair | question | measured | " + " | ".join(codes) + " |")
    print("|---|---|---:|" + "---|" * len(codes))
    for r in rows:
        words = r["question"].split()
        asked = " ".join(words[words.index("--method") + 1:])
        cells = [f"{r[n]['median']:.1f} ({r[n]['lo90']:.1f}-{r[n]['hi90']:.1f})"
                 if "median" in r[n] else "error" for n in codes]
        print(f"| {r['pair']} | {asked} | {r['measured']:g} | " + " | ".join(cells) + " |")
    print()
    print("| code | rows | n | in 90% | bias | median abs | mean 90% width |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, parts in summary.items():
        for part, s in parts.items():
            if s["n"]:
                print(f"| {name} | {part} | {s['n']} | {s['coverage90']:.0%} | {s['bias']:+.1%} "
                      f"| {s['mdae']:.1%} | {s['width90']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

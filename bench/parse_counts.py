"""How many times one command reads and parses each input, and resolves its question.

Runs each command as ``cli.main`` in a fresh child process (so no memo of an earlier command
is warm), with counters wrapped around the loader functions and the parsers under them, in a
scratch working directory holding copies of this repository's ``data/*.csv`` and
``models/priors.toml`` (the bundled data):

    fit --quiet --format json                      (4 x 1000 draws unless --fit-args)
    predict --accept 12:16
    predict --concurrency 1,8 --format json
    optimize
    next
    track --hardware h200 --accept 14
    report --quiet
    simulate --truth ... --design ...              (data/examples/*_moe_4gpu.*)
    fit --quiet --format json --seed 7             (a second fit of the same data)
    compare --fits <first>,latest
    add (one valid B300 row)
    update
    diff <the fit before update> latest

(``validate`` is left out: it refits for minutes) and prints one table: per input,
``reads/parses`` per command; a fit's netCDF files are counted together and, in a row of
their own, the most reads of any one of them. A read is an ``open`` of the
file for reading (``h5py.File`` for a fit's netCDF file); a parse is one ``csv.reader`` over
the text (or the file) or one ``tomllib.loads`` of it, attributed to the file by the loader
it runs under (``read_csv_file``'s path, ``toml_tables``' / ``parse_priors``' label; a label
naming a fit's stored copy counts as "fit: stored ..."), else by the text itself. The second
table counts calls of the loader functions (``load_measurements``, ``load_hardware``,
``hardware_table``, ``load_model_cards``, ``drafter_table``, ``parse_priors``, ``load_fit``,
``resolve_scenario``, ``question.resolve``, ...).

Run from the repository root with the project's python and ``PYTHONPATH`` at this checkout's
``src``::

    PYTHONPATH=$PWD/src .venv/bin/python bench/parse_counts.py [--json OUT] [--keep DIR]

``--data FILE`` measures another measurement file (copied over the scratch
``data/measurements.csv``, e.g. ``data/examples/public_multi_model.csv``); ``--model NAME``
asks every command that takes one about that target model (``next`` through ``--query``):
a fit of several models wants it; ``--track FLAGS`` replaces the tracked query's flags
(``--hardware h200 --accept 14``: Kimi K2.6's h200 rows in the public corpus are Eagle3 block 3,
whose step emits at most 4 tokens).

(stdlib only in the parent; the child imports the package.)
"""

from __future__ import annotations

import argparse
import builtins
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (label, argv) of every command measured, in the order they run (add and update last: they
#: change the data and the latest fit; diff after them). ``{first}`` and ``{previous}`` stand
#: for fit ids: the first fit's, and the one ``latest`` named before it last changed.
COMMANDS = (
    ("fit", ["fit", "--quiet", "--format", "json"]),
    ("predict --accept 12:16", ["predict", "--accept", "12:16"]),
    ("predict --concurrency 1,8 --format json", ["predict", "--concurrency", "1,8",
                                                 "--format", "json"]),
    ("optimize", ["optimize"]),
    ("next", ["next"]),
    ("track (add a query)", ["track", "--hardware", "h200", "--accept", "14"]),
    ("report", ["report", "--quiet"]),
    ("simulate", ["simulate", "--truth", "data/truth_moe_4gpu.toml",
                  "--design", "data/design_moe_4gpu.csv"]),
    ("fit (again, another seed)", ["fit", "--quiet", "--format", "json", "--seed", "7"]),
    ("compare (the two fits)", ["compare", "--fits", "{first},latest"]),
    ("add (a B300 row)", ["add", "--hardware", "b300", "--gpus", "8", "--engine", "sglang",
                          "--method", "ddtree", "--block", "8", "--budget", "16",
                          "--accept", "5.1", "--tok-s", "321",
                          "--source", "bench/parse_counts.py: a made-up row"]),
    ("update", ["update"]),
    ("diff (before and after update)", ["diff", "{previous}", "latest"]),
)

#: The example files ``simulate`` reads, copied into the scratch data/ folder.
EXAMPLES = ("truth_moe_4gpu.toml", "design_moe_4gpu.csv")

#: Rows of the table, in this order: the inputs (a key per file) and the question.
INPUT_ROWS = (
    ("data/measurements.csv", "data/measurements.csv"),
    ("fit: stored measurements", "stored data"),
    ("data/models.csv", "data/models.csv"),
    ("_bundled/models.csv", "_bundled/models.csv"),
    ("data/drafters.csv", "data/drafters.csv"),
    ("_bundled/drafters.csv", "_bundled/drafters.csv"),
    ("data/hardware.csv", "data/hardware.csv"),
    ("_bundled/hardware.csv", "_bundled/hardware.csv"),
    ("fit: stored hardware table", "stored hardware"),
    ("data/seed_estimates.csv", "data/seed_estimates.csv"),
    ("models/priors.toml", "models/priors.toml"),
    ("fit: stored priors", "stored priors"),
    ("models/latest.json", "models/latest.json"),
    ("fit: models/fits/<id>.nc", "fit file"),
    ("fit: the most reads of one .nc file", "fit file (most of one)"),
    ("models/tracked.json", "models/tracked.json"),
    ("data/truth_moe_4gpu.toml (simulate)", "data/truth_moe_4gpu.toml"),
    ("data/design_moe_4gpu.csv (simulate)", "data/design_moe_4gpu.csv"),
)

#: The loader functions counted (module, name): every module attribute bound to one of them
#: is replaced by a counting wrapper, so ``from ... import name`` bindings count too.
LOADERS = (
    ("ddtree_bayes.core.data", "read_csv_file"),
    ("ddtree_bayes.core.data", "load_measurements"),
    ("ddtree_bayes.core.data", "load_hardware"),
    ("ddtree_bayes.core.hardware_table", "hardware_table"),
    ("ddtree_bayes.core.hardware_table", "merge_tables"),
    ("ddtree_bayes.core.model_cards", "load_model_cards"),
    ("ddtree_bayes.core.drafters", "load_drafter_cards"),
    ("ddtree_bayes.core.drafters", "drafter_table"),
    ("ddtree_bayes.core.config", "load_priors"),
    ("ddtree_bayes.core.config", "parse_priors"),
    ("ddtree_bayes.core.methods", "toml_tables"),
    ("ddtree_bayes.core.methods", "load_methods"),
    ("ddtree_bayes.engine.store", "resolve"),
    ("ddtree_bayes.engine.store", "load_meta"),
    ("ddtree_bayes.engine.store", "load_fit"),
    ("ddtree_bayes.engine.scenario", "check_fit"),
    ("ddtree_bayes.engine.scenario", "resolve_scenario"),
    ("ddtree_bayes.engine.question", "resolve"),
)

#: Loaders whose first argument (or ``path=``) names the text they parse: a label parses
#: under it are attributed to.
LABELLED = {"read_csv_file": 0, "load_priors": 0, "toml_tables": 1, "parse_priors": 1,
            "load_methods": 1}


#: Commands that take ``--model`` (``next`` asks it through its ``--query``).
MODEL_FLAG = ("predict", "optimize", "track", "report", "add")


def workspace(root: Path, data: Path | None = None) -> Path:
    """``root`` with copies of this repository's data/*.csv and models/priors.toml (``data``
    in place of data/measurements.csv)."""
    (root / "data").mkdir(parents=True)
    (root / "models").mkdir()
    for f in sorted((ROOT / "data").glob("*.csv")):
        shutil.copy(f, root / "data" / f.name)
        (root / "data" / f.name).chmod(0o644)
    if data is not None:
        shutil.copy(data, root / "data" / "measurements.csv")
    shutil.copy(ROOT / "models" / "priors.toml", root / "models" / "priors.toml")
    for name in EXAMPLES:
        shutil.copy(ROOT / "data" / "examples" / name, root / "data" / name)
    return root


# --- the child: one command under the counters -------------------------------------------


class Counts:
    """Reads and parses per input key, and calls per loader."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir.resolve()
        self.reads: Counter[str] = Counter()
        self.parses: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.fit_files: Counter[str] = Counter()   # reads per fit file, by its name
        self.labels: list[str] = []   # the loaders' labels, innermost last
        self.stored: dict[str, str] = {}   # text -> "stored ..." (a loaded fit's texts)

    def path_key(self, path: str | os.PathLike) -> str | None:
        p = Path(path)
        try:
            p = p.resolve()
        except OSError:
            return None
        if p.suffix == ".nc" and p.parent.name == "fits":
            self.fit_files[p.name] += 1   # (the most reads of one fit file: a row of its own)
            self.reads["fit file (most of one)"] = max(self.fit_files.values())
            return "fit file"
        if p.parent.name == "_bundled":
            return f"_bundled/{p.name}"
        try:
            rel = p.relative_to(self.workdir)
        except ValueError:
            return None
        return str(rel) if rel.parts[0] in ("data", "models") and len(rel.parts) == 2 else None

    def label_key(self, label: str, text: str | None) -> str | None:
        if "stored" in label:
            if text is not None and text in self.stored:
                return self.stored[text]
            return ("stored data" if "data" in label else "stored priors" if "priors" in label
                    else "stored hardware" if "hardware" in label else "stored (other)")
        return self.path_key(label) if label and not label.startswith("<") else None

    def text_key(self, text: str) -> str:
        if text in self.stored:
            return self.stored[text]
        for folder in ("data", "models"):
            for f in sorted((self.workdir / folder).glob("*")):
                if f.is_file() and f.suffix in (".csv", ".toml") and _raw_text(f) == text:
                    return f"{folder}/{f.name}"
        return "(other text)"

    def parse(self, text: str | None, fallback: str | None = None) -> None:
        key = None
        if self.labels:
            key = self.label_key(self.labels[-1], text)
        if key is None and text is not None:
            key = self.text_key(text)
        self.parses[key or fallback or "(other text)"] += 1


def _raw_text(path: Path) -> str:
    """A file's text without going through the counted ``open``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8-sig", errors="replace").replace("\r\n", "\n")


def install(counts: Counts) -> None:
    """Wrap ``open``, ``h5py.File``, ``csv.reader``, ``tomllib.loads`` and the loaders."""
    import csv
    import importlib
    import tomllib

    import h5py

    real_open = builtins.open

    def counted_open(file, mode="r", *args, **kwargs):
        if isinstance(file, str | os.PathLike) and "r" in mode and "+" not in mode:
            key = counts.path_key(file)
            if key is not None:
                counts.reads[key] += 1
        return real_open(file, mode, *args, **kwargs)

    builtins.open = io.open = counted_open

    real_file = h5py.File

    class CountedFile(real_file):   # type: ignore[misc, valid-type]
        def __init__(self, name, mode="r", *args, **kwargs):
            if isinstance(name, str | os.PathLike) and mode == "r":
                key = counts.path_key(name)
                if key is not None:
                    counts.reads[key] += 1
            super().__init__(name, mode, *args, **kwargs)

    h5py.File = CountedFile

    real_reader = csv.reader

    def reader(f, *args, **kwargs):
        if isinstance(f, io.StringIO):
            counts.parse(f.getvalue())
        elif hasattr(f, "name") and isinstance(f.name, str):
            counts.parse(None, counts.path_key(f.name) or "(other file)")
        else:
            counts.parse(None, "(csv lines, no file)")
        return real_reader(f, *args, **kwargs)

    csv.reader = reader
    real_loads = tomllib.loads

    def loads(text, *args, **kwargs):
        counts.parse(text)
        return real_loads(text, *args, **kwargs)

    tomllib.loads = loads

    for module_name, name in LOADERS:
        module = importlib.import_module(module_name)
        real = getattr(module, name)
        label = f"{module_name.rsplit('.', 1)[-1]}.{name}"
        where = LABELLED.get(name)

        def wrapper(*args, __real=real, __label=label, __where=where, **kwargs):
            counts.calls[__label] += 1
            if __where is None:
                return __real(*args, **kwargs)
            given = args[__where] if len(args) > __where else kwargs.get("path", "")
            counts.labels.append(str(given))
            try:
                return __real(*args, **kwargs)
            finally:
                counts.labels.pop()

        _rebind(real, wrapper)

    # a loaded fit's texts are told apart from the files they were copied from by the label
    # they are parsed under; the few parsed under none are matched by text
    from ddtree_bayes.engine import store

    real_load_fit = store.load_fit

    def load_fit(*args, **kwargs):
        fit = real_load_fit(*args, **kwargs)
        counts.stored.setdefault(fit.data_csv, "stored data")
        counts.stored.setdefault(fit.priors_toml, "stored priors")
        counts.stored.setdefault(fit.hardware_csv, "stored hardware")
        return fit

    _rebind(real_load_fit, load_fit)


def _rebind(real, wrapper) -> None:
    """``wrapper`` in place of ``real`` wherever a loaded module of the package holds it (a
    name imported with ``from ... import``), with ``real``'s name and docstring."""
    import functools

    functools.update_wrapper(wrapper, real)
    for mod in list(sys.modules.values()):
        if (getattr(mod, "__name__", "") or "").startswith("ddtree_bayes"):
            for attr, value in list(vars(mod).items()):
                if value is real:
                    setattr(mod, attr, wrapper)


def child(workdir: Path, out: Path, argv: list[str]) -> int:
    import contextlib

    counts = Counts(workdir)
    install(counts)
    from ddtree_bayes.cli import main as cli

    os.chdir(workdir)
    stdout, stderr = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    out.write_text(json.dumps({"code": code, "seconds": time.perf_counter() - t0,
                               "reads": counts.reads, "parses": counts.parses,
                               "calls": counts.calls, "stderr": stderr.getvalue()[-2000:]}))
    return 0


# --- the parent: every command, one table --------------------------------------------------


def run_all(workdir: Path, fit_args: list[str], model: str | None = None,
            track: list[str] | None = None) -> dict[str, dict]:
    results = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    ids: list[str] = []   # the fit ids latest.json named, in turn
    for label, argv in COMMANDS:
        if argv[0] == "fit":
            argv = argv + fit_args
        if argv[0] == "track" and track is not None:
            argv = ["track", *track]
        if model is not None and argv[0] in MODEL_FLAG:
            argv = argv + ["--model", model]
        elif model is not None and argv[0] == "next":
            argv = argv + ["--query", f"--model {model}"]
        names = {"first": ids[0] if ids else "", "previous": ids[-2] if len(ids) > 1 else ""}
        argv = [a.format(**names) for a in argv]
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out = Path(f.name)
        proc = subprocess.run([sys.executable, __file__, "--child", str(workdir), str(out),
                               "--", *argv], env=env, check=False)
        if proc.returncode != 0:
            sys.exit(f"{label}: the child process failed (exit {proc.returncode})")
        results[label] = json.loads(out.read_text())
        out.unlink()
        if results[label]["code"] != 0:
            sys.exit(f"{label}: exit {results[label]['code']}\n{results[label]['stderr']}")
        latest = workdir / "models" / "latest.json"
        if latest.is_file():
            fit_id = json.loads(_raw_text(latest))["fit_id"]
            if not ids or ids[-1] != fit_id:
                ids.append(fit_id)
    return results


def table(results: dict[str, dict]) -> str:
    order = [label for label, _ in COMMANDS]
    results = dict(sorted(results.items(), key=lambda kv: order.index(kv[0])
                          if kv[0] in order else len(order)))
    heads = list(results)
    lines = ["| input (reads/parses) | " + " | ".join(f"`{h}`" for h in heads) + " |",
             "|---|" + "---:|" * len(heads)]
    for row, key in INPUT_ROWS:
        cells = [f"{r['reads'].get(key, 0)}/{r['parses'].get(key, 0)}" for r in results.values()]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    extra = sorted({k for r in results.values() for k in r["parses"]}
                   - {k for _, k in INPUT_ROWS})
    for key in extra:
        cells = [f"-/{r['parses'].get(key, 0)}" for r in results.values()]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    lines += ["", "| loader calls | " + " | ".join(f"`{h}`" for h in heads) + " |",
              "|---|" + "---:|" * len(heads)]
    for module_name, name in LOADERS:
        label = f"{module_name.rsplit('.', 1)[-1]}.{name}"
        lines.append(f"| {label} | " + " | ".join(str(r["calls"].get(label, 0))
                                                   for r in results.values()) + " |")
    lines.append("| (in-process seconds) | " + " | ".join(f"{r['seconds']:.2f}"
                                                          for r in results.values()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        sep = argv.index("--")
        return child(Path(argv[1]), Path(argv[2]), argv[sep + 1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the counts here")
    ap.add_argument("--keep", type=Path, help="work in this (new) directory and keep it")
    ap.add_argument("--fit-args", default="", help="extra fit flags, e.g. '--draws 300'")
    ap.add_argument("--data", type=Path, help="measurement file to use in place of "
                                              "data/measurements.csv")
    ap.add_argument("--model", help="target model for the commands that take --model")
    ap.add_argument("--track", help="the tracked query's flags (default: --hardware h200 "
                                    "--accept 14)")
    args = ap.parse_args(argv)
    if args.keep:
        workdir = workspace(args.keep, args.data)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="parse_counts_")
        workdir = workspace(Path(tmp.name), args.data)
    results = run_all(workdir, args.fit_args.split(), args.model,
                      None if args.track is None else args.track.split())
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

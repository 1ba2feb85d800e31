#!/usr/bin/env python3
"""Every command output shown in README.md and docs/: run, saved, pasted, checked.

    .venv/bin/python scripts/docs_examples.py --write         # run all, save, update the pages
    .venv/bin/python scripts/docs_examples.py --check         # run all, compare (exit 1 if stale)
    .venv/bin/python scripts/docs_examples.py --check-pages   # pages vs saved outputs (no runs)
    .venv/bin/python scripts/docs_examples.py --only predict --write

Each example runs in a scratch copy of this repository's ``data/`` and ``models/priors.toml``
(with the files ``WORKSPACE_FILES`` names, such as the benchmark fixtures a page imports, at
the paths the page shows; the repository's own folders are never touched), as a whole process
with the project's interpreter (``python -m ddtree_bayes``), stdout and stderr interleaved as a
terminal shows them. Its output is saved to ``docs/examples/<name>.txt`` and pasted into every page block

    <!-- example: NAME -->
    ```
    ...
    ```
    <!-- /example -->

The scratch folders are always ``/tmp/ddtree-bayes-docs/<workspace>`` (a second run on the same
machine waits for the first: the folders' path is in the outputs) and the fits are stamped
by the reproducible clock (``SOURCE_DATE_EPOCH``, :mod:`ddtree_bayes.core.clock`), so fit ids
and dates are the same on every run. The one thing that differs from run to run is
wall-clock seconds (``23.6 s``), which ``--check`` leaves out of the comparison.
``tests/test_docs_examples.py`` checks the pages against the saved outputs on every test run,
and (in the slow tier, `pytest -m slow`) that a fresh run of this script reproduces them.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "examples"
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "docs" / "howto").glob("*.md")))
BLOCK = re.compile(r"(<!-- example: (?P<name>[\w-]+) -->\n```[a-z]*\n)(?P<body>.*?)(```\n<!-- /example -->)",
                   re.S)
# a duration, with the spaces that right-align it in a column (a fit under 10 s is one
# character narrower than one over)
SECONDS = re.compile(r"( *)\b\d+(?:\.\d+)? s\b")
SCRATCH = Path(tempfile.gettempdir()) / "ddtree-bayes-docs"
#: 2026-12-01T00:00:00Z: the reproducible clock's start (core/clock.py)
EPOCH = "1796083200"
HYPOTHETICAL = "HYPOTHETICAL example for the docs, not a measurement"


@dataclass(frozen=True)
class Example:
    """One command: ``argv`` after ``ddtree-bayes``, in
    workspace ``work``; ``keep`` selects lines of the output (regexes; an excerpt keeps the
    first line matching each, in order, with ``...`` between gaps); ``show`` is the command
    as the page shows it (default: the argv)."""

    name: str
    work: str
    argv: tuple[str, ...]
    keep: tuple[str, ...] = ()
    show: str | None = None
    quiet: bool = False   # run for its effect; the page shows nothing of it


@dataclass
class Workspace:
    name: str
    path: Path


def _ws_files(path: Path, data: str | None, extra: tuple[tuple[str, str], ...] = ()) -> None:
    (path / "models").mkdir(parents=True)
    for source, dest in extra:   # files a page's commands name, at the paths the page shows
        if (REPO / source).is_dir():
            shutil.copytree(REPO / source, path / dest)
        else:
            (path / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / source, path / dest)
    if data == EMPTY:   # a user's own folder: no data/, no priors (the bundled ones are read)
        return
    shutil.copytree(REPO / "data", path / "data")
    shutil.copy(REPO / "models" / "priors.toml", path / "models" / "priors.toml")
    (path / "data" / "measurements.csv").chmod(0o644)
    if data:   # a public sweep or the combined corpus as this workspace's measurements
        shutil.copy(REPO / data, path / "data" / "measurements.csv")
        (path / "data" / "measurements.csv").chmod(0o644)


#: A workspace that starts as an empty folder of the user's own (nothing of data/ or
#: models/priors.toml copied: the commands read the package's bundled copies)
EMPTY = ""

#: workspace -> the measurement file it fits (None: the bundled Kimi K2.6 rows; EMPTY: none)
WORKSPACES: dict[str, str | None] = {
    "main": None,
    "living": None,
    "rtx5090": "data/public/llamacpp_mtp_qwen38_27b_rtx5090.csv",
    "multi": "data/examples/public_multi_model.csv",
    "cli": None,
    "bench": None,
    "mine": "data/examples/own_model_rtx4090.csv",
    "first": EMPTY,
    "firstk": None,
}

#: workspace -> files of this repository copied into it: (repository path, workspace path)
WORKSPACE_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "cli": (("tests/fixtures/cards/deepseek-v3", "DeepSeek-V3"),),
    "bench": (("tests/fixtures/bench", "tests/fixtures/bench"),),
    "mine": (("tests/fixtures/cards/llama-3.1-8b", "my-model"),),
    "first": (("tests/fixtures/cards/qwen3-14b-awq", "qwen3-14b-awq"),),
    "firstk": (("tests/fixtures/cards/qwen3-14b-awq", "qwen3-14b-awq"),),
}

#: docs/howto/own-data.md, a new user's walk-through: a model card from a config.json, a GPU
#: from its spec sheet, one HYPOTHETICAL autoregressive row, a drafter they do not have
FIRST_CARD = ("card", "add", "--hf-config", "qwen3-14b-awq", "--name", "qwen3-14b-awq")
FIRST_GPU = ("hardware", "add", "rtx-4090d", "--like", "rtx-4090", "--dense-bf16-tflops",
             "147.09", "--dense-fp8-tflops", "294.18", "--dense-int8-tflops", "588.35",
             "--source", "hmc-tech.com/gpu/nvidia-geforce-rtx-4090-d: AD102-250, 114 SMs; "
             "tensor FP32-accumulate bf16 147.09, fp8 294.18 TFLOPS, int8 588.35 TOPS")
FIRST_ROW = ("add", "--model", "qwen3-14b-awq", "--hardware", "rtx-4090d", "--gpus", "1",
             "--engine", "vllm", "--method", "ar", "--context", "1536", "--tok-s", "78.4",
             "--source", HYPOTHETICAL + ": vllm bench latency, 1024 in, 1024 out")
FIRST_ASK = ("predict", "--method", "eagle3", "--block", "3", "--accept", "3", "--context",
             "1536", "--explain")

ADD_ROW = ("add", "--hardware", "b300", "--engine", "sglang", "--method", "ddtree", "--block",
           "16", "--budget", "32", "--accept", "13.1", "--tok-s", "612", "--source",
           HYPOTHETICAL)

EXAMPLES: tuple[Example, ...] = (
    # docs/howto/trust.md: the fit's own checks; README: the first answer
    Example("fit", "main", ("fit",), keep=(
        r"^\[fit\] compiling", r"^\[fit\] sampling", r"^parameter", r"^---", r"^step_ar_ms\[b300",
        r"^step_ar_ms\[rtx", r"^noise_sd", r"^divergent", r"^posterior predictive", r"^row ",
        r"^---", r"^row 2 ", r"^row 3 ", r"^row 9 ", r"^fit \d", r"^saved")),
    Example("predict", "main", ("predict", "--accept", "12:16")),
    # docs/howto/ask.md
    Example("predict-target", "main", ("predict", "--accept", "12,14,16", "--target", "800")),
    Example("predict-h200", "main", ("predict", "--hardware", "h200", "--accept", "14")),
    Example("predict-explain", "main", ("predict", "--hardware", "h200", "--engine", "sglang",
                                        "--accept", "14", "--explain")),
    Example("predict-context", "main", ("predict", "--hardware", "rtx-pro-6000", "--engine", "vllm",
                                        "--method", "eagle3", "--block", "3", "--context", "32k",
                                        "--accept", "1.95")),
    Example("predict-impossible", "main", ("predict", "--accept", "20")),
    Example("predict-concurrency", "main", ("predict", "--engine", "sglang", "--accept", "14",
                                            "--concurrency", "1,8,32,128")),
    # docs/howto/decide.md
    Example("optimize", "main", ("optimize", "--hardware", "b300", "--engine", "native")),
    Example("next", "main", ("next", "--query", "--hardware b300 --engine native --method ddtree "
                             "--block 16 --budget 32 --accept 14")),
    # docs/howto/trust.md
    Example("report", "main", ("report",)),
    Example("fit-earlier", "main", ("fit", "--quiet", "--moe-form", "power", "--step-form",
                                    "fraction"), quiet=True),
    Example("compare", "main", ("compare",)),
    # docs/howto/update.md: a new measurement arrives
    Example("u-fit", "living", ("fit", "--quiet"), quiet=True),
    Example("u-track", "living", ("track", "--hardware", "rtx-pro-6000", "--engine", "vllm",
                                  "--method", "eagle3", "--block", "3", "--context", "32k",
                                  "--accept", "1.95")),
    Example("u-add", "living", ADD_ROW),
    Example("u-update", "living", ("update", "--quiet")),
    Example("u-repeat", "living", ("add", "--hardware", "b300", "--engine", "sglang", "--method",
                                   "ar", "--accept", "1", "--tok-s", "131", "--source",
                                   HYPOTHETICAL)),
    Example("u-update-repeat", "living", ("update", "--quiet")),
    Example("u-surprise", "living", ADD_ROW[:-3] + ("900", "--source", HYPOTHETICAL + " (a surprise)")),
    Example("u-reject", "living", ("update", "--quiet", "--reject-surprises")),
    Example("u-history", "living", ("history",)),
    # docs/howto/own-data.md: a fit of your own sweep
    Example("own-fit", "rtx5090", ("fit",), keep=(
        r"^\[fit\] sampling", r"^parameter", r"^---", r"^step_ar_ms", r"^noise_sd", r"^divergent",
        r"^posterior predictive", r"^row ", r"^---", r"^row 2 ", r"^row 8 ", r"^fit \d",
        r"^saved")),
    Example("own-predict", "rtx5090", ("predict",)),
    Example("own-predict-accept", "rtx5090", ("predict", "--accept", "3:5")),
    # docs/json-output.md: a fit's own default scenario
    Example("json-default-scenario", "rtx5090", ("predict", "--accept", "3", "--format", "json"),
            keep=(r'^  "default_scenario"', r'^    "hardware"', r'^    "gpus"', r'^    "method"',
                  r'^    "block"', r'^    "budget"', r'^    "verify_tokens"', r'^    "engines"',
                  r'^      "', r'^    \]', r'^    "accept"', r'^    "why"', r'^    "asked"',
                  r'^  \}')),
    # docs/howto/own-data.md: the cards a run knows
    Example("card-list", "main", ("card", "list"), keep=(
        r"^model ", r"^---", r"^llama-3.1-8b", r"^kimi-k2.6 ", r"^qwen3.8-27b ", r"^$",
        r"^drafter ", r"^---", r"^yuhuili/EAGLE3", r"^Qwen/Qwen3.8-27B MTP", r"^\d+ model cards",
        r"^pass B")),
    # docs/howto/own-data.md: your GPU (a memory overclock of the measured RTX 5090)
    Example("gpu-add", "rtx5090", ("hardware", "add", "rtx-5090-oc", "--like", "rtx-5090",
                                   "--mem-bw-tb-s", "2.048", "--source",
                                   HYPOTHETICAL + ": memory +4 Gbps, 32 Gbps x 512 bit / 8"),
            keep=(r"^GPU ", r"^  memory", r"^  bandwidth", r"^  interconnect", r"^  compute",
                  r"^  dense", r"^wrote", r"^next")),
    Example("gpu-fit", "rtx5090", ("fit", "--quiet"), quiet=True),
    Example("gpu-predict", "rtx5090", ("predict", "--hardware", "rtx-5090-oc", "--accept",
                                       "4.22")),
    # docs/howto/several-models.md
    Example("multi-fit", "multi", ("fit",), keep=(
        r"^fit: ", r"^\[fit\] sampling", r"^fit: remedy", r"^parameter", r"^---",
        r"^pair_bw_eff", r"^pair_step_sd", r"^noise_sd", r"^config_share", r"^divergent",
        r"^inferred acceptance", r"^group", r"^---", r"^qwen3.5", r"^fit \d", r"^saved")),
    Example("multi-predict-nomodel", "multi", ("predict",)),
    Example("multi-predict-h100", "multi", ("predict", "--model", "llama-3.1-8b-instruct",
                                            "--hardware", "h100", "--engine", "vllm", "--method",
                                            "eagle3", "--block", "4", "--accept", "2.79")),
    Example("multi-predict-h200", "multi", ("predict", "--model", "llama-3.1-8b-instruct",
                                            "--hardware", "h200", "--gpus", "1", "--engine",
                                            "vllm", "--method", "eagle3", "--block", "4",
                                            "--accept", "2.79")),
    # docs/cli.md: errors, names, bounds (on the bundled fit)
    Example("cli-fit", "cli", ("fit", "--quiet"), quiet=True),
    Example("cli-gpus-zero", "cli", ("predict", "--gpus", "0")),
    Example("cli-budget-zero", "cli", ("predict", "--budget", "0")),
    Example("cli-engine-typo", "cli", ("predict", "--engine", "sglnag", "--accept", "14")),
    Example("cli-hardware-typo", "cli", ("predict", "--hardware", "h2000", "--accept", "14")),
    Example("cli-accept-eagle3", "cli", ("predict", "--method", "eagle3", "--block", "4",
                                         "--engine", "sglang", "--accept", "6")),
    # docs/json-output.md: predict's JSON
    Example("json-predict", "cli", ("predict", "--engine", "sglang", "--accept", "12:13",
                                    "--format", "json")),
    Example("cli-add-accept", "cli", ("add", "--hardware", "b300", "--engine", "sglang",
                                      "--method", "ddtree", "--block", "16", "--budget", "32",
                                      "--accept", "20", "--tok-s", "900", "--source",
                                      HYPOTHETICAL)),
    Example("cli-add-infer", "cli", ("add", "--hardware", "rtx-pro-6000", "--engine", "vllm",
                                     "--method", "eagle3", "--block", "3", "--context", "16k",
                                     "--accept", "infer", "--tok-s", "99.4", "--source",
                                     "kimi-k26.md DCP=1 MTP=3 table")),
    Example("hardware-list", "cli", ("hardware", "list"), keep=(
        r"^hardware ", r"^---", r"^b300 ", r"^rtx-4090 ", r"^rtx-5060-ti ", r"^\d+ GPUs",
        r"^Peaks", r"^- = ")),
    Example("card-add-dry-run", "cli", ("card", "add", "--hf-config", "./DeepSeek-V3",
                                        "--dry-run")),
    # docs/cli.md: `add --from-bench`, one import after the other in a copy of data/
    Example("bench-model-mismatch", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/vllm_serve.json", "--hardware", "b300",
        "--engine", "vllm", "--method", "eagle3", "--block", "3", "--model", "kimi-k2.6")),
    Example("bench-no-gpus", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/vllm_serve.json", "--hardware", "b300",
        "--engine", "vllm", "--method", "eagle3", "--block", "3")),
    Example("bench-vllm-serve", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/vllm_serve.json", "--hardware", "b300",
        "--engine", "vllm", "--method", "eagle3", "--block", "3", "--gpus", "8")),
    Example("bench-llama", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/llama_bench.json", "--engine", "llama.cpp",
        "--method", "ar", "--model", "llama-3.1-8b-instruct", "--gpus", "1")),
    Example("bench-batched", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/sglang_one_batch_bs1_bs8.jsonl",
        "--hardware", "b300", "--engine", "sglang", "--method", "ar")),
    Example("bench-single-stream", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/sglang_one_batch_bs1_bs8.jsonl",
        "--hardware", "b300", "--engine", "sglang", "--method", "ar", "--single-stream-only",
        "--model", "kimi-k2.6")),
    Example("bench-no-card", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/llama_bench_readme.json", "--engine",
        "llama.cpp", "--method", "ar")),
    Example("bench-card-size", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/llama_bench_readme.json", "--engine",
        "llama.cpp", "--method", "ar", "--model", "kimi-k2.6")),
    Example("bench-wrong-gpu", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/llama_bench_readme.json", "--engine",
        "llama.cpp", "--method", "ar", "--model", "qwen3-8b", "--hardware", "rtx-5090")),
    Example("bench-wrong-format", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/sglang_serving.jsonl", "--hardware", "b300",
        "--engine", "sglang", "--method", "ar", "--bench-format", "vllm-serve")),
    Example("bench-latency-no-batch", "bench", (
        "add", "--from-bench", "tests/fixtures/bench/vllm_latency.json", "--hardware", "b300",
        "--engine", "vllm", "--method", "ar")),
    # docs/howto/own-data.md, docs/cli.md: three HYPOTHETICAL rows of a model without a card
    # on an RTX 4090, fitted with a proxy card, then with the card its config.json gives
    Example("own-proxy-fit", "mine", ("fit", "--quiet"), keep=(
        r"^ddtree-bayes: note: no model card", r"^fit \d")),
    Example("own-card-add", "mine", ("card", "add", "--hf-config", "my-model", "--name",
                                     "my-model")),
    Example("own-card-fit", "mine", ("fit", "--quiet"), keep=(r"^fit \d",)),
    # docs/howto/own-data.md: a new user's model and GPU, from one AR run, in a folder of
    # their own; then the same row beside the bundled Kimi K2.6 rows (a clone)
    Example("first-card-add", "first", FIRST_CARD),
    Example("first-gpu-add", "first", FIRST_GPU),
    Example("first-add", "first", FIRST_ROW),
    Example("first-fit", "first", ("fit", "--quiet"), keep=(r"^posterior predictive", r"^row ",
                                                          r"^---", r"^row 2 ", r"^fit \d")),
    Example("first-predict-bare", "first", ("predict",)),
    Example("first-predict", "first", FIRST_ASK),
    Example("firstk-card-add", "firstk", FIRST_CARD, quiet=True),
    Example("firstk-gpu-add", "firstk", FIRST_GPU, quiet=True),
    Example("firstk-add", "firstk", FIRST_ROW, quiet=True),
    Example("firstk-fit", "firstk", ("fit", "--quiet"), quiet=True),
    Example("firstk-predict", "firstk", FIRST_ASK[:1] + ("--model", "qwen3-14b-awq")
            + FIRST_ASK[1:]),
)


def normalise(text: str) -> str:
    """The text with wall-clock seconds masked: what must not change between runs.

    >>> normalise("yes    11.3 s") == normalise("yes     8.8 s") == "yes <t> s"
    True
    >>> normalise("converged (13.7 s; sampling 3.1 s)")
    'converged (<t> s; sampling <t> s)'
    """
    return SECONDS.sub(lambda m: (" " if m.group(1) else "") + "<t> s", text)


def excerpt(lines: list[str], keep: tuple[str, ...]) -> list[str]:
    """The first line matching each pattern in turn (from where the last match was), with
    ``...`` where lines were left out."""
    out, start = [], 0
    for pattern in keep:
        rx = re.compile(pattern)
        for i in range(start, len(lines)):
            if rx.search(lines[i]):
                if i > start:
                    out.append("...")
                out.append(lines[i])
                start = i + 1
                break
    if start < len(lines):
        out.append("...")
    return out


def run(example: Example, ws: Workspace) -> str:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SOURCE_DATE_EPOCH": EPOCH}
    env.pop("DDTREE_BAYES_TRACEBACK", None)
    proc = subprocess.run([sys.executable, "-m", "ddtree_bayes", *example.argv], cwd=ws.path,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=1800)
    if "internal error" in proc.stdout:   # a crash is a bug to fix, never an output to show
        raise SystemExit(f"docs_examples: {' '.join(example.argv)} crashed in {ws.path}:\n"
                         f"{proc.stdout[-2000:]}")
    shown = example.show or " ".join(_quote(a) for a in example.argv)
    lines = proc.stdout.rstrip("\n").split("\n") if proc.stdout.strip() else []
    if example.keep:
        lines = excerpt(lines, example.keep)
    body = [f"$ ddtree-bayes {shown}", *lines]
    if proc.returncode:
        body.append(f"(exit {proc.returncode})")
    return "\n".join(body) + "\n"


def _quote(arg: str) -> str:
    return arg if re.fullmatch(r"[\w@%+=:,./-]+", arg) else "'" + arg.replace("'", "'\\''") + "'"


def generate(names: set[str] | None) -> dict[str, str]:
    """Run the examples (``names``: only those, and what their workspace ran before them)."""
    wanted = [e for e in EXAMPLES if names is None or e.name in names]
    needed = {e.work for e in wanted}
    out: dict[str, str] = {}
    with scratch_lock():
        return _generate(wanted, needed, names, out)


@contextlib.contextmanager
def scratch_lock():
    """Hold the scratch folder alone: two runs at once (two clones' ``--check``) deleted each
    other's workspaces mid-run. The outputs print the folder's path, so it cannot be made
    unique per run; a second run waits for the first instead."""
    with open(f"{SCRATCH}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[docs] waiting for another run to release {SCRATCH}", file=sys.stderr,
                  flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _generate(wanted, needed, names, out: dict[str, str]) -> dict[str, str]:
    shutil.rmtree(SCRATCH, ignore_errors=True)
    try:
        spaces = {}
        for example in EXAMPLES:
            if example.work not in needed:
                continue
            if example.work not in spaces:
                path = SCRATCH / example.work
                _ws_files(path, WORKSPACES[example.work], WORKSPACE_FILES.get(example.work, ()))
                spaces[example.work] = Workspace(example.work, path)
            print(f"[docs] {example.work}: ddtree-bayes {' '.join(example.argv)}",
                  file=sys.stderr, flush=True)
            text = run(example, spaces[example.work])
            if not example.quiet and (names is None or example.name in names):
                out[example.name] = text
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
    return out


def page_blocks(page: Path) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(page.read_text())}


def check_pages(saved: dict[str, str]) -> list[str]:
    """Problems: a page block that differs from its saved output or names none."""
    problems = []
    for page in PAGES:
        for name, body in page_blocks(page).items():
            if name not in saved:
                problems.append(f"{page.relative_to(REPO)}: example {name!r} has no saved output")
            elif body != saved[name]:
                problems.append(f"{page.relative_to(REPO)}: example {name!r} differs from "
                                f"docs/examples/{name}.txt (run scripts/docs_examples.py --write)")
    return problems


def saved_outputs() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted(OUT.glob("*.txt"))}


def write_pages(saved: dict[str, str]) -> None:
    for page in PAGES:
        text = page.read_text()
        new = BLOCK.sub(lambda m: (m.group(1) + saved.get(m.group("name"), m.group("body"))
                                   + m.group(4)), text)
        if new != text:
            page.write_text(new)
            print(f"[docs] updated {page.relative_to(REPO)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="run, save, update the pages")
    mode.add_argument("--check", action="store_true",
                      help="run, compare with the saved outputs and the pages (exit 1 if stale)")
    mode.add_argument("--check-pages", action="store_true",
                      help="compare the pages with the saved outputs only (no runs)")
    p.add_argument("--only", nargs="+", help="example names (default: all)")
    args = p.parse_args(argv)
    names = set(args.only) if args.only else None
    unknown = (names or set()) - {e.name for e in EXAMPLES}
    if unknown:
        p.error(f"unknown example(s) {sorted(unknown)}")
    if args.check_pages:
        problems = check_pages(saved_outputs())
    else:
        fresh = generate(names)
        if args.write:
            OUT.mkdir(parents=True, exist_ok=True)
            if names is None:
                for stale in set(saved_outputs()) - set(fresh):
                    (OUT / f"{stale}.txt").unlink()
            for name, text in fresh.items():
                (OUT / f"{name}.txt").write_text(text)
            write_pages(saved_outputs())
            problems = check_pages(saved_outputs())
        else:
            saved = saved_outputs()
            problems = []
            for name, text in fresh.items():
                if normalise(saved.get(name, "")) != normalise(text):
                    diff = "".join(difflib.unified_diff(
                        saved.get(name, "").splitlines(True), text.splitlines(True),
                        f"docs/examples/{name}.txt", "fresh run", n=1))
                    problems.append(f"example {name!r} changed:\n{diff}")
            problems += check_pages(saved)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

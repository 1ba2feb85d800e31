#!/usr/bin/env python3
"""Interrupt real `ddtree-bayes fit` processes at random moments of every phase (issue 18).

In a temp copy of the working directory (the repository's data/ and models/priors.toml) one
uninterrupted fit is run first: it leaves a latest fit to fall back on, and times each
phase from its ``[fit]`` progress lines on stderr (compile, tuning, drawing, diagnostics,
save, the checks after the save). Then each of ``--signals`` fits gets one signal (SIGINT by
default; ``--signal both`` alternates SIGINT and SIGTERM), aimed in turn at each phase: the
census waits for the line that opens that phase and sends the signal a uniformly random time
into it (the phase's length as calibrated). Where the signal actually landed is read back
from the interrupted process's own progress lines, not assumed.

After every signal it checks: the exit code (0 or 130 are the two honest endings), no
traceback on stderr, stderr's last line, every fit file's posterior finite (read with h5py,
not through the load-time gates), no temp file left, ``models/latest.json`` loadable, and a
``predict --format json`` answering finite numbers. The summary (counts by phase and exit
code, every run) is printed and written as JSON::

    .venv/bin/python scripts/interrupt_census.py                     # 30 SIGINTs
    .venv/bin/python scripts/interrupt_census.py --signals 4 --signal both --out /tmp/c.json

The first ~0.1 s of a process (the interpreter starting, the CLI module importing) comes
before the CLI installs its handlers; the ``startup`` phase is aimed from --min-start on
(docs/robustness.md measures that window on its own).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).with_name("ddtree-bayes"))

#: (phase, the stderr line that opens it); "startup" opens when the process starts.
PHASES = (("startup", None), ("compile", "[fit] compiling"), ("tuning", "[fit] sampling"),
          ("drawing", "[fit] tuning done"), ("diagnostics", "[fit] diagnosing"),
          ("save", "[fit] saving"), ("after save", "[fit] saved; checking"))
ENDED = "ended before the signal"


def make_workdir(root: Path) -> Path:
    """``root/work`` with copies of the repository's data/ and models/priors.toml."""
    work = root / "work"
    shutil.copytree(REPO / "data", work / "data")
    (work / "models").mkdir()
    shutil.copy(REPO / "models" / "priors.toml", work / "models" / "priors.toml")
    for p in (work / "data").rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    return work


class Run:
    """A `ddtree-bayes` process whose stderr lines are read (with their arrival times,
    seconds after the start) by a thread."""

    def __init__(self, work: Path, argv: list[str]) -> None:
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([CLI, *argv], cwd=work, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[tuple[float, str]] = []
        self.stdout = ""
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._out = threading.Thread(target=self._read_out, daemon=True)
        self._err.start()
        self._out.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def seen(self, prefix: str | None) -> float | None:
        """When the first line starting with ``prefix`` arrived (0 for None), or None."""
        if prefix is None:
            return 0.0
        return next((t for t, line in list(self.lines) if line.startswith(prefix)), None)

    def wait_for(self, prefix: str | None, timeout: float) -> float | None:
        """Block until the line arrives (its time) or the process ends (None)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            t = self.seen(prefix)
            if t is not None:
                return t
            if self.proc.poll() is not None:
                self._err.join(5)
                return self.seen(prefix)
            time.sleep(0.01)
        raise TimeoutError(f"no {prefix!r} line after {timeout:.0f} s")

    def finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._err.join(10)
        self._out.join(10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return code

    def phase_at(self, t: float) -> str:
        """The phase whose opening line is the last one seen at ``t`` seconds."""
        landed = "startup"
        for phase, prefix in PHASES[1:]:
            seen = self.seen(prefix)
            if seen is not None and seen <= t:
                landed = phase
        return landed


def calibrate(work: Path, fit_args: list[str], timeout: float) -> dict:
    """One whole fit: its exit code and when each phase opened (seconds after the start)."""
    run = Run(work, ["fit", *fit_args])
    code = run.finish(timeout)
    opened = {phase: run.seen(prefix) for phase, prefix in PHASES}
    opened["end"] = run.now()
    return {"exit": code, "opened": opened, "stderr": [line for _, line in run.lines]}


def phase_window(opened: dict, phase: str) -> float:
    """How long ``phase`` lasted in the calibration run."""
    names = [p for p, _ in PHASES] + ["end"]
    start = opened[phase]
    later = [opened[n] for n in names[names.index(phase) + 1:] if opened.get(n) is not None]
    if start is None or not later:
        return 0.0
    return max(0.0, min(later) - start)


def finite_artifacts(models: Path) -> tuple[list[str], list[str]]:
    """(fit files holding a non-finite posterior value, fit files h5py cannot read)."""
    import h5py
    import numpy as np

    bad, unreadable = [], []
    for path in sorted((models / "fits").glob("*.nc")):
        try:
            with h5py.File(path, "r") as fh:
                post = fh["posterior"]
                for ds in post.values():
                    arr = np.asarray(ds[...])
                    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
                        bad.append(path.name)
                        break
        except (OSError, KeyError) as err:
            unreadable.append(f"{path.name}: {err}")
    return bad, unreadable


def latest_loadable(models: Path) -> str | None:
    """None when models/latest.json names a fit ``store.load_fit`` reads; else why not."""
    from ddtree_bayes.core.errors import DDTreeBayesError
    from ddtree_bayes.engine import store

    try:
        draws = store.load_fit(store.resolve(models))
    except DDTreeBayesError as err:
        return str(err)
    return None if draws.n_draws > 0 else "no draws"


def predict_finite(work: Path) -> str | None:
    """None when `predict --format json` exits 0 with only finite numbers; else why not."""
    proc = subprocess.run([CLI, "predict", "--format", "json"], cwd=work, capture_output=True,
                          text=True, timeout=120)
    if proc.returncode != 0:
        return f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    try:
        rows = json.loads(proc.stdout)
    except ValueError as err:
        return f"not JSON ({err})"

    def numbers(x):
        if isinstance(x, dict):
            for v in x.values():
                yield from numbers(v)
        elif isinstance(x, list):
            for v in x:
                yield from numbers(v)
        elif isinstance(x, float):
            yield x

    if not rows or any(not math.isfinite(v) for v in numbers(rows)):
        return "a non-finite number (or no rows)"
    return None


def interrupt_once(work: Path, argv: list[str], sig: signal.Signals, aim: str, offset: float,
                   timeout: float = 900.0) -> dict:
    """Run ``ddtree-bayes argv`` and send ``sig`` ``offset`` seconds after the line that
    opens phase ``aim`` (:data:`PHASES`); what happened and what is on disk after."""
    models = work / "models"
    before = {p.name for p in (models / "fits").glob("*.nc")}
    run = Run(work, argv)
    opened = run.wait_for(dict(PHASES)[aim], timeout)
    sent = None
    if opened is not None:
        delay = opened + offset - run.now()
        if delay > 0:
            try:
                run.proc.wait(delay)
            except subprocess.TimeoutExpired:
                pass
        if run.proc.poll() is None:
            sent = run.now()
            run.proc.send_signal(sig)
    code = run.finish(timeout)
    err = [line for _, line in run.lines]
    after = {p.name for p in (models / "fits").glob("*.nc")}
    bad, unreadable = finite_artifacts(models)
    temps = sorted(str(p.relative_to(work)) for p in models.rglob(".*.tmp"))
    return {
        "signal": sig.name, "aimed_at": aim, "offset_s": round(offset, 3),
        "sent_s": None if sent is None else round(sent, 3),
        "landed": ENDED if sent is None else run.phase_at(sent),
        "exit": code, "exit_s": round(run.now(), 2),
        "stderr_last": err[-1] if err else "",
        "traceback": any("Traceback" in line for line in err),
        "new_fits": sorted(after - before), "nonfinite_artifacts": bad,
        "unreadable_artifacts": unreadable, "temp_files": temps,
        "latest_error": latest_loadable(models), "predict_error": predict_finite(work),
    }


def census(n: int, seed: int, signals: str, fit_args: list[str], root: Path,
           min_start: float = 0.25, timeout: float = 900.0, say=print) -> dict:
    """Calibrate, then ``n`` interrupted fits in ``root``'s copy of the workdir; the summary."""
    work = make_workdir(root)
    t_all = time.monotonic()
    calibration = calibrate(work, fit_args, timeout)
    if calibration["exit"] != 0:
        raise RuntimeError(f"the calibration fit exited {calibration['exit']}: "
                           f"{calibration['stderr'][-3:]}")
    opened = calibration["opened"]
    say("calibration fit: " + ", ".join(
        f"{p} at {opened[p]:.1f} s" for p, _ in PHASES if opened[p] is not None)
        + f", end at {opened['end']:.1f} s")
    rng = random.Random(seed)
    kinds = ([signal.SIGINT, signal.SIGTERM] if signals == "both"
             else [signal.Signals[f"SIG{signals}"]])
    aims = [p for p, _ in PHASES if opened[p] is not None]
    runs = []
    for i in range(n):
        aim = aims[i % len(aims)]
        lo = min_start if aim == "startup" else 0.0
        offset = rng.uniform(lo, max(lo, phase_window(opened, aim)))
        r = interrupt_once(work, ["fit", *fit_args, "--seed", str(i + 1)],
                           kinds[i % len(kinds)], aim, offset, timeout)
        runs.append(r)
        say(f"{i + 1:2d}/{n} {r['signal']} aimed at {r['aimed_at']} +{r['offset_s']:.2f} s, "
            f"landed in {r['landed']}: exit {r['exit']} ({r['stderr_last']!r})"
            + ("" if not r["new_fits"] else f", saved {', '.join(r['new_fits'])}"))
    return summarize(runs, calibration, fit_args, n, seed, signals, time.monotonic() - t_all)


def summarize(runs, calibration, fit_args, n, seed, signals, seconds) -> dict:
    by_phase: dict[str, dict[str, int]] = {}
    for r in runs:
        counts = by_phase.setdefault(r["landed"], {})
        counts[str(r["exit"])] = counts.get(str(r["exit"]), 0) + 1
    bad = sorted({a for r in runs for a in r["nonfinite_artifacts"]})
    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "fit_args": fit_args, "signals": n, "signal": signals, "seed": seed,
        "calibration": {k: calibration[k] for k in ("exit", "opened")},
        "by_phase_and_exit": by_phase,
        "exits": {str(c): sum(r["exit"] == c for r in runs)
                  for c in sorted({r["exit"] for r in runs})},
        "saved_fits": sum(bool(r["new_fits"]) for r in runs),
        "saved_with_exit_130": sum(bool(r["new_fits"]) and r["exit"] == 130 for r in runs),
        "tracebacks": sum(r["traceback"] for r in runs),
        "nonfinite_artifacts": bad,
        "unreadable_artifacts": sorted({a for r in runs for a in r["unreadable_artifacts"]}),
        "temp_files_left": sorted({t for r in runs for t in r["temp_files"]}),
        "latest_not_loadable": sum(r["latest_error"] is not None for r in runs),
        "predict_failed": sum(r["predict_error"] is not None for r in runs),
        "seconds": round(seconds, 1),
        "runs": runs,
    }


def problems(summary: dict) -> list[str]:
    """What the census found wrong (empty: every interrupt ended honestly)."""
    out = []
    for i, r in enumerate(summary["runs"], 1):
        what = f"run {i} ({r['signal']} in {r['landed']})"
        if r["exit"] not in (0, 130):
            out.append(f"{what}: exit {r['exit']}")
        if r["traceback"]:
            out.append(f"{what}: a traceback on stderr")
        if r["exit"] == 130 and r["new_fits"]:
            out.append(f"{what}: exit 130 but saved {r['new_fits']}")
        for key in ("nonfinite_artifacts", "unreadable_artifacts", "temp_files"):
            if r[key]:
                out.append(f"{what}: {key} {r[key]}")
        for key in ("latest_error", "predict_error"):
            if r[key] is not None:
                out.append(f"{what}: {key} {r[key]}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--signals", type=int, default=30, help="interrupted fits (default 30)")
    p.add_argument("--signal", choices=("INT", "TERM", "both"), default="INT")
    p.add_argument("--seed", type=int, default=1, help="seed of the random moments")
    p.add_argument("--fit-args", default="",
                   help="extra `fit` flags, e.g. '--draws 4000' (default: the production "
                        "settings)")
    p.add_argument("--min-start", type=float, default=0.25,
                   help="earliest signal of the startup phase, seconds (default 0.25)")
    p.add_argument("--out", type=Path, default=None, help="write the JSON summary here")
    p.add_argument("--keep", action="store_true", help="keep the temp working directory")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="interrupt-census-"))
    try:
        summary = census(args.signals, args.seed, args.signal, args.fit_args.split(), root,
                         min_start=args.min_start, say=lambda m: print(m, flush=True))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    found = problems(summary)
    summary["problems"] = found
    text = json.dumps(summary, indent=1) + "\n"
    if args.out:
        args.out.write_text(text)
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=1))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())

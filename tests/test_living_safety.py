"""Nothing lost: parallel `add` processes all land their rows, and SIGKILL at any point of
`add`, `fit` or `update` leaves the measurement file and the latest fit whole and loadable.

Every process here is a real `ddtree-bayes` subprocess. Kills come two ways: at random
times, and at chosen points (a small wrapper makes ``os.fsync`` / ``os.replace`` announce
themselves on stderr and pause, and the test kills the process there: inside the
temp-file write, just before the rename, just after it). The many-iterations versions are
marked slow; a few iterations of each run in the default suite.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.engine import store
from test_cli_support import copy_bundled_data

CLI = str(Path(sys.executable).parent / "ddtree-bayes")
TINY = ["--chains", "1", "--draws", "20", "--tune", "20", "--quiet"]

# Runs the CLI with os.fsync / os.replace announcing themselves on stderr ("HOOK fsync
# <path>") and pausing for a few seconds when their path matches DDTREE_TEST_HOOK_MATCH
# (and, for replace, DDTREE_TEST_HOOK_PHASE=before|after): a deterministic kill point.
HOOK = r"""
import os, sys, time
match = os.environ["DDTREE_TEST_HOOK_MATCH"]
phase = os.environ.get("DDTREE_TEST_HOOK_PHASE", "fsync")
real_fsync, real_replace = os.fsync, os.replace
def _say(what):
    sys.stderr.write(f"HOOK {what}\n"); sys.stderr.flush(); time.sleep(30)
def fsync(fd):
    name = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
    if phase == "fsync" and match in name:
        _say(f"fsync {name}")
    return real_fsync(fd)
def replace(src, dst, *a, **k):
    hit = match in str(dst)
    if hit and phase == "before":
        _say(f"before-replace {dst}")
    out = real_replace(src, dst, *a, **k)
    if hit and phase == "after":
        _say(f"after-replace {dst}")
    return out
os.fsync, os.replace = fsync, replace
from ddtree_bayes.cli import main as cli
sys.exit(cli.main(sys.argv[1:]))
"""


def add_args(i: int) -> list[str]:
    return ["add", "--hardware", "b300", "--engine", "sglang", "--method", "ddtree", "--block",
            "16", "--budget", "32", "--accept", "13.1", "--tok-s", str(600 + i), "--source",
            f"HYPOTHETICAL test row {i}"]


def make_work(root: Path, with_fit_from: Path | None = None) -> Path:
    work = root / "work"
    if with_fit_from is not None:
        shutil.copytree(with_fit_from, work)
    else:
        copy_bundled_data(work)
    (work / "data" / "measurements.csv").chmod(0o644)
    return work


def data_rows(work: Path):
    hw = load_hardware(work / "data" / "hardware.csv")
    return load_measurements(work / "data" / "measurements.csv", hw).rows


def assert_whole(work: Path, original: bytes, max_new: int | None = None) -> int:
    """The data file validates and starts with the original bytes; every fit file and the
    latest fit are loadable. Returns the number of appended rows."""
    text = (work / "data" / "measurements.csv").read_bytes()
    assert text.startswith(original)
    rows = data_rows(work)
    new = len(rows) - 9
    assert new >= 0 and (max_new is None or new <= max_new)
    models = work / "models"
    if (models / "latest.json").exists():
        latest = store.load_fit(store.resolve(models))
        assert latest.n_draws > 0 and "noise_sd" in latest.variables
        for path in store.fit_files(models):
            store.load_fit(path)
    return new


def spawn(work: Path, argv: list[str], hook: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, **(hook or {})}
    cmd = [sys.executable, "-c", HOOK, *argv] if hook else [CLI, *argv]
    return subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def kill_at_hook(proc: subprocess.Popen, timeout: float = 900) -> str:
    """Wait for the wrapper to announce its kill point, then SIGKILL; returns the line."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    for line in proc.stderr:
        if line.startswith("HOOK "):
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            return line.strip()
        assert time.monotonic() < deadline, "no hook reached"
    proc.communicate()
    raise AssertionError(f"process ended (exit {proc.returncode}) before the hook")


def kill_at_random(proc: subprocess.Popen, delay: float) -> bool:
    """SIGKILL after ``delay`` seconds; False if the process had already finished."""
    try:
        proc.communicate(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        return True


# ---------------------------------------------------------------- concurrency
def test_parallel_adds_all_land(tmp_path):
    from ddtree_bayes.workflows import living

    work = make_work(tmp_path)
    original = (work / "data" / "measurements.csv").read_bytes()
    # hold the lock ourselves first: all 8 processes must wait for it, not write around it
    with living.exclusive_lock(work / "data" / "measurements.csv"):
        procs = [spawn(work, add_args(i)) for i in range(8)]
        time.sleep(1.5)
        assert all(p.poll() is None for p in procs), "an add did not wait for the lock"
        assert (work / "data" / "measurements.csv").read_bytes() == original
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [r[1] for r in results]
    rows = data_rows(work)
    assert len(rows) == 17
    assert sorted(r.tok_s for r in rows[9:]) == [600.0 + i for i in range(8)]
    assert sorted(r.row for r in rows[9:]) == list(range(11, 19))
    # and 8 more with nobody holding the lock, all at once
    procs = [spawn(work, add_args(i)) for i in range(8, 16)]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    assert sorted(r.tok_s for r in data_rows(work)[9:]) == [600.0 + i for i in range(16)]
    assert (work / "data" / "measurements.csv").read_bytes().startswith(original)


# ---------------------------------------------------------------- add, killed
@pytest.mark.parametrize("phase, appended", [("fsync", 0), ("before", 0), ("after", 1)])
def test_add_killed_inside_its_write_leaves_old_or_new_file(tmp_path, phase, appended):
    work = make_work(tmp_path)
    original = (work / "data" / "measurements.csv").read_bytes()
    proc = spawn(work, add_args(1), {"DDTREE_TEST_HOOK_MATCH": "measurements.csv",
                                     "DDTREE_TEST_HOOK_PHASE": phase})
    kill_at_hook(proc)
    assert assert_whole(work, original) == appended
    # the next add works, lands, and removes the killed writer's temp file
    assert subprocess.run([CLI, *add_args(2)], cwd=work, capture_output=True).returncode == 0
    assert assert_whole(work, original) == appended + 1
    assert not list((work / "data").glob(".measurements.csv.*.tmp"))


def _random_add_kills(tmp_path: Path, iterations: int, seed: int) -> None:
    work = make_work(tmp_path)
    original = (work / "data" / "measurements.csv").read_bytes()
    rng = random.Random(seed)
    t0 = time.perf_counter()
    subprocess.run([CLI, *add_args(0)], cwd=work, check=True, capture_output=True)
    duration = time.perf_counter() - t0
    landed, killed = 1, 0
    for i in range(1, iterations + 1):
        proc = spawn(work, add_args(i))
        if kill_at_random(proc, rng.uniform(0, duration * 1.2)):
            killed += 1
        else:
            assert proc.returncode == 0
        new = assert_whole(work, original)
        assert new in (landed, landed + 1)  # the killed row landed whole or not at all
        landed = new
    assert killed >= iterations // 3  # the kills mostly happened before the end


def test_add_killed_at_random_times(tmp_path):
    _random_add_kills(tmp_path, iterations=6, seed=1)


@pytest.mark.slow
def test_add_killed_at_random_times_many(tmp_path):
    _random_add_kills(tmp_path, iterations=120, seed=2)


# ---------------------------------------------------------------- fit / update, killed
@pytest.fixture
def fitted_copy(fitted_workdir, tmp_path):
    work0, result = fitted_workdir
    work = make_work(tmp_path, with_fit_from=work0)
    return work, result


def test_update_killed_while_saving_keeps_the_last_good_fit(fitted_copy):
    work, result = fitted_copy
    original = (work / "data" / "measurements.csv").read_bytes()
    subprocess.run([CLI, *add_args(1)], cwd=work, check=True, capture_output=True)
    proc = spawn(work, ["update", *TINY], {"DDTREE_TEST_HOOK_MATCH": ".nc."})
    line = kill_at_hook(proc)
    assert line.startswith("HOOK fsync") and line.endswith(".tmp")
    assert_whole(work, original)
    assert store.resolve(work / "models").stem == result.fit_id  # still the last good fit
    # the interrupted save left only a temp file, which history does not list as a fit
    assert [p.stem for p in store.fit_files(work / "models")] == [result.fit_id]
    assert list((work / "models" / "fits").glob(".*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["before", "after"])
def test_update_killed_around_latest_json_is_whole(fitted_copy, phase):
    work, result = fitted_copy
    original = (work / "data" / "measurements.csv").read_bytes()
    subprocess.run([CLI, *add_args(1)], cwd=work, check=True, capture_output=True)
    proc = spawn(work, ["update", *TINY], {"DDTREE_TEST_HOOK_MATCH": "latest.json",
                                             "DDTREE_TEST_HOOK_PHASE": phase})
    kill_at_hook(proc)
    assert_whole(work, original)
    latest = json.loads((work / "models" / "latest.json").read_text())["fit_id"]
    assert (latest == result.fit_id) == (phase == "before")
    assert len(store.fit_files(work / "models")) == 2  # the new fit file is complete either way


def _random_fit_kills(work: Path, iterations: int, seed: int, command: list[str]) -> None:
    original = (work / "data" / "measurements.csv").read_bytes()
    rng = random.Random(seed)
    killed = 0
    for i in range(iterations):
        if command[0] == "update":  # something to update with
            subprocess.run([CLI, *add_args(100 + i)], cwd=work, check=True, capture_output=True)
        proc = spawn(work, [*command, *TINY, "--seed", str(i + 1)])
        killed += kill_at_random(proc, rng.uniform(0.2, 14.0))
        assert proc.returncode in (-signal.SIGKILL, 0, 5)  # 5: 20 draws fail the ESS gate
        assert_whole(work, original)
    assert killed >= iterations // 2


def test_fit_killed_at_a_random_time(fitted_copy):
    work, _ = fitted_copy
    _random_fit_kills(work, iterations=1, seed=3, command=["fit"])


@pytest.mark.slow
def test_fit_and_update_killed_at_random_times_many(fitted_copy):
    work, _ = fitted_copy
    _random_fit_kills(work, iterations=10, seed=4, command=["fit"])
    _random_fit_kills(work, iterations=10, seed=5, command=["update"])

"""Durable writes: the folder is fsynced after each atomic rename (a rename lives in the
directory, and is lost on power failure until the directory is flushed), and the next
command removes the temp files a killed writer left in models/ and models/fits/, saying so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddtree_bayes.engine import store
from ddtree_bayes.workflows import living
from test_cli_support import make_point_mass_workdir, run_cli


@pytest.fixture
def work(tmp_path):
    return make_point_mass_workdir(tmp_path / "w")


def fsynced(monkeypatch) -> list[str]:
    """Record the path behind every fd passed to os.fsync."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name an fd")
def test_the_folder_is_fsynced_after_the_file_and_the_rename(tmp_path, monkeypatch):
    seen = fsynced(monkeypatch)
    target = tmp_path / "sub" / "latest.json"
    store.atomic_write_bytes(target, b"{}")
    assert target.read_bytes() == b"{}"
    # first the temp file's data, then (after the rename) the folder that holds the name
    assert len(seen) == 2 and seen[0].startswith(str(tmp_path / "sub" / ".latest.json."))
    assert seen[1] == str(tmp_path / "sub")
    seen.clear()
    living.write_text_atomically(tmp_path / "m.csv", "a,b\n")  # the add/track write helper
    assert seen[-1] == str(tmp_path)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name an fd")
def test_add_fsyncs_the_data_folder(work, monkeypatch):
    seen = fsynced(monkeypatch)
    code, _, err = run_cli(work, "add", "--hardware", "b300", "--engine", "sglang", "--method",
                           "ar", "--accept", "1", "--tok-s", "131", "--source", "durable test")
    assert code == 0, err
    assert seen[-1] == str(work / "data")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_next_command_removes_a_killed_writers_temp_files(work):
    fits = work / "models" / "fits"
    dead = dead_pid()
    stale = [fits / f".20260101T000000Z-x.nc.{dead}.abc123xy.tmp",
             work / "models" / f".latest.json.{dead}.k9j8h7g6.tmp"]
    live = fits / f".20260101T000000Z-y.nc.{os.getpid()}.zzzzzzzz.tmp"  # a writer still at work
    old = fits / ".20260101T000000Z-z.nc.oldname.tmp"  # no pid: removed once an hour old
    young = fits / ".20260101T000000Z-w.nc.newname.tmp"
    for p in (*stale, live, old, young):
        p.write_bytes(b"half a netCDF")
    os.utime(old, (time.time() - 2 * store.STALE_TEMP_AGE_S,) * 2)
    code, out, err = run_cli(work, "history")
    assert code == 0 and "20260101T000000Z-pointmss" in out
    notes = err.splitlines()
    assert len(notes) == 3 and all(n.startswith("ddtree-bayes: note: removed ") for n in notes)
    assert "models/fits/.20260101T000000Z-x.nc." in err and "a killed fit or update" in err
    assert not any(p.exists() for p in (*stale, old))
    assert live.exists() and young.exists()
    assert run_cli(work, "history")[2] == ""  # said once


def test_an_interrupted_save_is_cleaned_by_the_next_command(work, monkeypatch):
    """A save killed between its temp file and the rename (simulated: the temp file of a
    process that no longer exists) leaves the previous fit usable and the temp removed."""
    fits = work / "models" / "fits"
    shutil.copy(fits / "20260101T000000Z-pointmss.nc",
                fits / f".new.nc.{dead_pid()}.q1w2e3r4.tmp")
    code, out, err = run_cli(work, "predict", "--accept", "12", "--engine", "sglang")
    assert code == 0 and "sglang  12         600       600-600       600-600" in out
    assert "note: removed models/fits/.new.nc." in err
    assert [p.name for p in fits.iterdir()] == ["20260101T000000Z-pointmss.nc"]


def test_stdout_whose_reader_left_does_not_stop_the_command():
    """`ddtree-bayes update | head -2`: once the reader has gone, the rest of the output goes
    to the null device and the command carries on (its work is still saved), exit 0."""
    import os

    from ddtree_bayes.cli.main import _ReaderMayLeave

    r, w = os.pipe()
    os.close(r)   # the reader left before the first write
    stream = os.fdopen(w, "w")
    out = _ReaderMayLeave(stream)
    assert out.write("a line\n" * 10000) == 70000   # (a full buffer may break it already)
    out.flush()
    assert out.left   # the pipe broke: what follows goes to the null device
    assert out.write("more\n") == 5
    out.flush()
    stream.close()


def test_a_closed_pipe_exits_zero_without_a_traceback(tmp_path):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "ddtree_bayes", "hardware", "list"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()   # `| head -0`
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_a_full_output_device_is_one_line_naming_standard_output(tmp_path):
    import os
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "ddtree_bayes", "hardware", "list"],
                              cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, timeout=120)
    err = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, err
    assert "most likely standard output" in err[0] and "Traceback" not in err[0]


def test_a_command_process_ends_without_collecting_its_garbage(tmp_path):
    """The interpreter's teardown ran full garbage collections over what a command leaves
    (~440,000 objects after a fit: PyMC's and PyTensor's graphs), ~0.35 s of a warm fit's
    process. The console script (``main()`` without argv) freezes them (gc.freeze) as it
    returns: the process ends and the OS frees them. Its output is whole; main() called
    with argv (tests, the API) leaves the collector alone. A real process of a command that
    writes prints what main returned, and ends with its exit code."""
    code = ("import gc, sys\n"
            "calls = []\n"
            "gc.freeze = lambda: calls.append(gc.get_count())\n"
            "from ddtree_bayes.cli.main import main\n"
            "print(main(['--version']), calls)\n"
            "sys.argv = ['ddtree-bayes', '--version']\n"
            "print(main(), len(calls))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout.splitlines()
    assert out[1] == "0 []" and out[3] == "0 1"   # (lines 0 and 2: the version)
    work = make_point_mass_workdir(tmp_path / "w")
    done = subprocess.run([sys.executable, "-m", "ddtree_bayes", "predict", "--accept", "12",
                           "--format", "json"], capture_output=True, text=True, cwd=work)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("}")   # (the JSON whole)

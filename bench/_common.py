"""Helpers shared by the benchmark scripts in bench/ (plain stdlib, no project imports).

The scripts time the installed ``ddtree-bayes`` CLI as whole, fresh processes. They must be
run with the project's virtualenv python (``.venv/bin/python bench/<script>.py``): the CLI
is looked up next to ``sys.executable``.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = PROJECT_ROOT / "bench" / "results"

# Versions recorded with every result file (None when not installed).
PACKAGES = ("ddtree-bayes", "pymc", "nutpie", "pytensor", "numba", "numpy", "scipy",
            "arviz", "arviz-stats", "xarray", "h5py", "h5netcdf", "pandas")


def venv_python() -> Path:
    """The interpreter running this script (not symlink-resolved: that would leave the venv)."""
    return Path(sys.executable)


def cli_path() -> Path:
    """``ddtree-bayes`` next to ``sys.executable``; exit 2 with a hint when it is not there."""
    cli = venv_python().parent / "ddtree-bayes"
    if not cli.exists():
        sys.exit(f"error: {cli} not found. Run this script with the project's virtualenv "
                 f"python, e.g. {PROJECT_ROOT / '.venv' / 'bin' / 'python'} "
                 f"{Path(sys.argv[0]).name}")
    return cli


def command_line(cmd: list[str], env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> str:
    """A copy-pasteable shell line: ``(cd DIR && VAR=... cmd args)``."""
    line = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    line = f"{line} {shlex.join(cmd)}".strip()
    return f"(cd {shlex.quote(str(cwd))} && {line})" if cwd else line


def run_timed(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None,
              timeout: float | None = None) -> dict:
    """Run ``cmd`` as a fresh process; wall seconds from ``time.perf_counter`` around it, and
    its CPU seconds (user + system, from ``getrusage(RUSAGE_CHILDREN)`` before and after:
    what the process itself used, which other processes' load does not inflate).

    ``env`` holds only the variables set on top of the inherited environment (recorded so
    the exact command can be repeated). Output is captured, never shown, so terminal
    speed does not enter the timing.
    """
    import resource

    full_env = {**os.environ, **(env or {})}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        wall = time.perf_counter() - t0
        rc, out, err, timed_out = proc.returncode, proc.stdout, proc.stderr, False
    except subprocess.TimeoutExpired as exc:
        wall = time.perf_counter() - t0
        rc, timed_out = None, True
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"command": command_line(cmd, env, cwd), "argv": cmd, "cwd": str(cwd),
            "env": dict(env or {}), "returncode": rc, "timed_out": timed_out,
            "wall_s": wall, "cpu_s": cpu, "stdout": out, "stderr": err}


def tail(text: str, n: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-n:])


def summary(values: list[float]) -> dict:
    """median / min / max / n of a list of numbers (all None when the list is empty)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": len(vals), "median": statistics.median(vals), "min": min(vals),
            "max": max(vals)}


def fmt_s(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _numeric(cell: str) -> bool:
    try:
        float(cell.rstrip("x%").replace(",", ""))
        return True
    except ValueError:
        return cell in ("-", "")


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns whose cells are all numbers (or '-') are right-aligned, the rest left."""
    align = ["---:" if rows and all(_numeric(r[i]) for r in rows) else "---"
             for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


_VENV_PROBE = r"""
import json, os, platform, sys, importlib.metadata as md, importlib.util as iu
spec = iu.find_spec("ddtree_bayes")
code = None if spec is None or spec.origin is None else os.path.dirname(spec.origin)
pkgs = {}
for name in sys.argv[1:]:
    try:
        pkgs[name] = md.version(name)
    except md.PackageNotFoundError:
        pkgs[name] = None
print(json.dumps({"python": sys.version, "python_implementation": platform.python_implementation(),
                  "executable": sys.executable, "packages": pkgs, "code_dir": code}))
"""


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _git(*args: str, cwd: Path = PROJECT_ROOT) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=10, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info() -> dict:
    """Machine, interpreter and package versions (read by running the venv's python)."""
    probe = subprocess.run([str(venv_python()), "-c", _VENV_PROBE, *PACKAGES],
                           capture_output=True, text=True, check=True)
    venv = json.loads(probe.stdout)
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count()
    # the commit of the code the interpreter imports (PYTHONPATH may name another clone's
    # src than this checkout's: a result of one commit was labelled with another's)
    code = Path(venv["code_dir"]) if venv.get("code_dir") else PROJECT_ROOT
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=code)
    return {
        "nproc": nproc,
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "mem_total_gib": _mem_total_gib(),
        "platform": platform.platform(),
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        **venv,
        "git_commit": _git("rev-parse", "HEAD", cwd=code),
        "git_dirty": None if status is None else bool(status),
    }


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def loadavg() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def save_results(results: dict, md: str, out: Path) -> Path:
    """Write results JSON (with the markdown inside) and the .md beside it; print both paths."""
    results["markdown"] = md
    out = out if out.is_absolute() else Path.cwd() / out
    write_json(out, results)
    out.with_suffix(".md").write_text(md + "\n")
    print("\n" + md + "\n")
    print(f"results: {out} (and {out.with_suffix('.md')})")
    return out


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


def cache_env(root: Path) -> dict[str, str]:
    """Env vars that put every PyTensor and numba cache under ``root``.

    numba__fastmath=False is what the package sets anyway when PYTENSOR_FLAGS does not
    mention fastmath; it is spelled out so the flags are exactly what we record.
    """
    return {"PYTENSOR_FLAGS": f"base_compiledir={root / 'pytensor'},numba__fastmath=False",
            "NUMBA_CACHE_DIR": str(root / "numba")}


def scratch_root(workdir: Path | None, prefix: str) -> tuple[Path, Path | None]:
    """The scratch directory a benchmark works in: ``workdir`` (created) when given, else a
    fresh ``/tmp/<prefix>*`` one, returned second too so the caller can remove it."""
    if workdir is None:
        tmp_root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
        return tmp_root, tmp_root
    scratch = workdir.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch, None

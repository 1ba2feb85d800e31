"""bench/_common.py: what a result file records of the code it measured."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _common():
    spec = importlib.util.spec_from_file_location("bench_common", ROOT / "bench" / "_common.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                           *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_result_records_the_commit_of_the_code_it_imported(tmp_path, monkeypatch):
    """bench/bench_fit.py run from one checkout with PYTHONPATH at another clone's src (how
    docs/performance.md's A/B of 608eb0e against d219e6d was run) measured the clone's code,
    but its result file recorded the bench checkout's HEAD: the committed
    fit-20261206-warm-608eb0e-2.json says git_commit d219e6d. The commit is the one of the
    ddtree_bayes package the benchmarked interpreter imports, and its directory is said."""
    clone = tmp_path / "clone"
    package = clone / "src" / "ddtree_bayes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "the code measured")
    head = _git(clone, "rev-parse", "HEAD")
    assert head != _git(ROOT, "rev-parse", "HEAD")
    monkeypatch.setenv("PYTHONPATH", str(clone / "src"))
    info = _common().machine_info()
    assert info["git_commit"] == head
    assert info["git_dirty"] is False
    assert info["code_dir"] == str(package)

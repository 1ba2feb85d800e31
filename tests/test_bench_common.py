"""bench/_common.py: what a result file records of the code it measured."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench(name: str, file: str):
    """bench/<file> imported as the module ``name`` (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _common():
    return _bench("bench_common", "_common.py")


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


def _bench_fit():
    return _bench("bench_fit", "bench_fit.py")


def test_the_fit_benchmark_reports_the_least_sampled_parameters_ess_per_second():
    """Equal draws are not equal effective draws: beside the wall ratio the fit benchmark
    reports each run's smallest bulk ESS over the parameters per wall second, and the
    nutpie / PyMC ratio of their medians (hand-computed below)."""
    bf = _bench_fit()
    diags = [{"parameter": "a", "ess_bulk": 3000.0, "ess_tail": 2500.0},
             {"parameter": "b", "ess_bulk": 1200.0, "ess_tail": None},
             {"parameter": "c", "ess_bulk": None, "ess_tail": 900.0}]
    assert bf.min_ess(diags) == {"min_ess_bulk": 1200.0, "min_ess_tail": 900.0}
    assert bf.min_ess([]) == {"min_ess_bulk": None, "min_ess_tail": None}

    def run(phase, wall, ess):
        return {"phase": phase, "ok": True, "converged": True, "divergences": 0, "wall_s": wall,
                "timings": {"total_s": wall - 1}, "min_ess_bulk": ess}
    nut = bf.phase_summary([run("nutpie-warm", 8.0, 1600.0), run("nutpie-warm", 10.0, 1000.0),
                            run("nutpie-warm", 9.0, 1800.0)])
    pym = bf.phase_summary([run("pymc-warm", 30.0, 1500.0), run("pymc-warm", 20.0, 1000.0)])
    # per run: 200, 100, 200 ESS/s -> median 200; 50, 50 -> 50
    assert nut["ess_bulk_per_wall_s"]["median"] == 200.0
    assert nut["min_ess_bulk"]["median"] == 1600.0
    assert pym["ess_bulk_per_wall_s"]["median"] == 50.0
    assert bf.ess_per_wall_s({"min_ess_bulk": None, "wall_s": 3.0}) is None


def _bench_first_fit():
    return _bench("bench_first_fit", "bench_first_fit.py")


def test_the_first_fit_benchmark_installs_as_bootstrap_does():
    """A user's own first fit is timed after the install's compile: the benchmark runs the
    command scripts/bootstrap.sh runs (there `.venv/bin/ddtree-bayes fit --compile-only
    --quiet`), in a fresh cache, then the fit of the user's file, in that order."""
    bff = _bench_first_fit()
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    assert f"ddtree-bayes {' '.join(bff.INSTALL_ARGS)}" in bootstrap
    cli, data = Path("/v/bin/ddtree-bayes"), Path("/d/sweep.csv")
    plan = bff.steps(cli, data, [Path("/d/other.csv")])
    assert [name for name, _ in plan] == ["install", "install other.csv", "fit"]
    assert plan[0][1] == [str(cli), "fit", "--compile-only", "--quiet", "--format", "json"]
    assert plan[1][1][-2:] == ["--data", "/d/other.csv"]
    assert plan[2][1] == [str(cli), "fit", "--data", "/d/sweep.csv", "--quiet", "--format",
                          "json"]
    env = _common().cache_env(Path("/s/cache"))
    assert env["NUMBA_CACHE_DIR"] == "/s/cache/numba"
    assert env["PYTENSOR_FLAGS"].startswith("base_compiledir=/s/cache/pytensor,")


def test_the_first_fit_benchmark_records_cpu_and_the_clis_timings():
    """Each process's wall and CPU seconds, the CLI's timings (a fit's `timings`, the
    compile-only object's top-level `compile_s`) and the load before it; a fit that failed
    its gates (exit 5) is a failure, with the end of its stderr."""
    bff = _bench_first_fit()
    data = Path("/d/sweep.csv")

    def run(rc, stdout):
        return {"command": "c", "returncode": rc, "timed_out": False, "wall_s": 19.6,
                "cpu_s": 17.25, "stdout": stdout, "stderr": "line 1\nline 2"}
    fit = bff.record("fit", data, 1, run(0, json.dumps(
        {"timings": {"compile_s": 11.1, "sample_s": 6.4, "total_s": 18.9}})), [0.5, 0.4, 0.3])
    assert fit["ok"] and fit["cpu_s"] == 17.25
    assert bff.table_row(fit) == ["sweep.csv", "1", "fit", "19.60", "17.25", "11.10", "6.40",
                                  "0.50", "ok"]
    install = bff.record("install", data, 1, run(0, json.dumps(
        {"compiled": True, "compile_s": 24.0, "cached": True})), None)
    assert install["timings"] == {"compile_s": 24.0}
    assert bff.table_row(install)[5:8] == ["24.00", "-", "-"]
    failed = bff.record("fit", data, 2, run(5, json.dumps({"timings": {}})), None)
    assert not failed["ok"] and failed["error"] == "exit 5"
    assert failed["stderr_tail"] == "line 1\nline 2"


def test_a_benchmarks_scratch_is_the_given_workdir_or_a_fresh_tmp_one_it_may_remove(tmp_path):
    """bench_fit.py and bench_first_fit.py share one rule: a given --workdir is created and
    kept (nothing to remove), else a fresh /tmp/<prefix>* directory, returned as the one to
    remove."""
    C = _common()
    given = tmp_path / "a" / "b"
    assert C.scratch_root(given, "x-") == (given.resolve(), None)
    assert given.is_dir()
    scratch, remove = C.scratch_root(None, "ddtree-bench-test-")
    try:
        assert remove == scratch and scratch.parent == Path("/tmp")
        assert scratch.name.startswith("ddtree-bench-test-") and scratch.is_dir()
    finally:
        scratch.rmdir()

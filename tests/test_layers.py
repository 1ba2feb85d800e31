"""The package's layering, as import-linter contracts (pyproject.toml [tool.importlinter]).

The real tree must keep every contract; copies of it with one deliberate violation each must
break the contract that forbids it, so the check can fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")
SRC = ROOT / "src" / "ddtree_bayes"


def lint(src_root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          cwd=src_root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(src_root), "PATH": "/usr/bin:/bin"})


def copy_with(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of src/ with ``line`` appended to ``module`` (a path under ddtree_bayes/)."""
    dst = tmp_path / "src"
    shutil.copytree(SRC, dst / "ddtree_bayes", ignore=shutil.ignore_patterns("__pycache__"))
    target = dst / "ddtree_bayes" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return dst


def test_lint_imports_is_installed():
    assert LINT.exists(), "install the dev extras: scripts/bootstrap.sh --dev"


def test_the_tree_keeps_every_contract():
    out = lint(ROOT / "src")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "5 kept, 0 broken" in out.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    # the predict path importing PyMC (even lazily, inside a function)
    ("engine/predictive.py", "def _heavy():\n    import pymc  # noqa: F401",
     "the predict path never imports"),
    # a lower layer importing a higher one
    ("engine/store.py", "from ddtree_bayes.workflows import simulate  # noqa: F401",
     "never upwards"),
    ("workflows/simulate.py", "from ddtree_bayes.cli import output  # noqa: F401",
     "never upwards"),
    # core importing a plotting library
    ("core/spec.py", "import matplotlib  # noqa: F401", "core imports no modelling"),
    # the report <-> figures cycle the old flat layout had
    ("workflows/report/priors.py", "from ddtree_bayes.workflows.report import figures  # noqa: F401",
     "no import cycles"),
])
def test_a_deliberate_violation_breaks_its_contract(tmp_path, module, line, broken):
    out = lint(copy_with(tmp_path, module, line))
    assert out.returncode != 0
    report = out.stdout
    broken_lines = [ln for ln in report.splitlines() if " BROKEN" in ln]
    assert any(broken in ln for ln in broken_lines), report


HEAVY = ("pymc", "pytensor", "nutpie", "arviz", "arviz_base", "arviz_stats", "arviz_plots",
         "matplotlib", "numba", "pandas", "xarray")


def test_a_predict_process_imports_nothing_heavy(fitted_workdir):
    """What the contract says statically, checked at run time: a whole `predict` process."""
    work, _ = fitted_workdir
    code = ("import sys\nfrom ddtree_bayes.cli.main import main\n"
            "rc = main(['predict', '--accept', '12:16', '--format', 'json'])\n"
            f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
            "print('HEAVY', heavy, file=sys.stderr)\nsys.exit(rc)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"median"' in out.stdout
    assert "HEAVY []" in out.stderr, out.stderr

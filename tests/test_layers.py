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


def test_architecture_names_every_module():
    """ARCHITECTURE.md's module map lists every module of the package (a new module gets its
    line there), and no two modules share a name (a name says what a module is)."""
    text = (SRC.parents[1] / "ARCHITECTURE.md").read_text()
    tree = text[text.index("## The tree, one line per module"):text.index("## Where a new")]
    missing = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
               if p.name != "__init__.py" and p.name not in tree]
    assert not missing, f"add these to ARCHITECTURE.md's module map: {missing}"
    names = [p.name for p in SRC.rglob("*.py") if p.name != "__init__.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_no_module_imports_another_modules_private_names():
    """``from ddtree_bayes.x import _name`` and ``module._name`` across modules: a shared
    helper gets a public name (splits by size made modules borrow each other's privates)."""
    import ast

    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ddtree_bayes"):
                for alias in node.names:
                    modules.add(alias.asname or alias.name)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(SRC)}: {node.module}.{alias.name}")
            if isinstance(node, ast.Import):
                modules.update(a.asname or a.name.split(".")[0] for a in node.names
                               if a.name.startswith("ddtree_bayes"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in modules and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                found.append(f"{path.relative_to(SRC)}: {node.value.id}.{node.attr}")
    assert found == []

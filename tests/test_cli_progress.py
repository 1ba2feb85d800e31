"""`fit` shows sampling progress on a terminal and stays quiet elsewhere: the CLI passes
``progress = not --quiet`` down to engine.inference.sample, which asks nutpie for its
progress bar only when stderr is a terminal (the "[fit]" step lines print unless --quiet).
nutpie is replaced by a fake that records what it was asked and stops the fit."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli_support import copy_bundled_data


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def work(tmp_path):
    return copy_bundled_data(tmp_path)


@pytest.fixture
def asked(monkeypatch):
    """nutpie's compile and sample replaced: sample records its keyword arguments and
    interrupts the fit (exit 130, nothing written)."""
    nutpie = pytest.importorskip("nutpie")
    from ddtree_bayes.engine import callbacks

    calls: list[dict] = []

    def sample(compiled, **kwargs):
        calls.append(kwargs)
        raise KeyboardInterrupt

    from ddtree_bayes.engine import deterministics

    monkeypatch.setattr(callbacks, "compile_model", lambda model, **kwargs: "compiled")
    monkeypatch.setattr(deterministics, "omitted", lambda model, compiled: [])
    monkeypatch.setattr(nutpie, "sample", sample)
    return calls


def fit(work: Path, stderr: io.StringIO, *flags: str) -> int:
    from ddtree_bayes.cli import main as cli

    old = Path.cwd()
    os.chdir(work)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            return cli.main(["fit", "--chains", "2", "--draws", "50", "--tune", "50", *flags])
    finally:
        os.chdir(old)


@pytest.mark.parametrize(("terminal", "flags", "bar", "lines"), [
    (True, (), True, True),      # a person watching: the bar and the step lines
    (False, (), False, True),    # a log file or a pipe: no bar (no escape codes)
    (True, ("--quiet",), False, False),
])
@pytest.mark.nuts
def test_progress_bar_only_on_a_terminal(work, asked, terminal, flags, bar, lines):
    err = Terminal() if terminal else io.StringIO()
    assert fit(work, err, *flags) == 130
    assert asked[0]["progress_bar"] is bar
    assert asked[0]["draws"] == 50 and asked[0]["chains"] == 2
    text = err.getvalue()
    assert ("[fit] sampling 2 chains x 50 draws (+50 tuning) with nutpie" in text) is lines
    assert text.endswith("ddtree-bayes: interrupted; nothing was written\n")
    assert not (work / "models").exists()


@pytest.mark.slow
def test_a_real_fit_in_a_pseudo_terminal_draws_nutpies_bar(work):
    """Under a pseudo-terminal (script(1)) the real nutpie bar is drawn on stderr while the
    JSON on stdout stays clean."""
    script = shutil.which("script")
    if script is None:
        pytest.skip("script(1) not installed")
    cli = Path(sys.executable).with_name("ddtree-bayes")
    out = work / "out.json"
    log = work / "typescript"
    subprocess.run([script, "-qc", f"{cli} fit --chains 1 --draws 60 --tune 60 --format json "
                    f"> {out}", str(log)], cwd=work, timeout=600, capture_output=True)
    assert "Progress" in log.read_text(errors="replace")
    import json

    assert json.loads(out.read_text())["fit_id"]

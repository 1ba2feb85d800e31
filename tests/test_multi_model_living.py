"""`update` and `next` on a fit of several models: each answers for the model it is about.

Point-mass fits of two models (engine/testing.py ``multi_model_draws``: Kimi K2.6 on 8x B300,
Llama-3.1-8B on one H100), so every figure is computed by hand: Llama's default question (it
was measured only autoregressively on its H100) is the bundled DDTree block 16 / budget 32 at
acceptance 14 on h100 x1 in vLLM, M = 33: MOE = 7 x 0.5 x (1 + 0.0625 x 32) = 10.5 ms,
ATTN_BASE = 3.5 ms, target 14 ms, pooled overhead fraction 0.2: step 17.5 ms, 800 tok/s; with
step_ar_ms 8 ms: step 20 ms, 700 tok/s. Kimi's default (B300, M = 33) is 14 / 20 ms = 700
tok/s in SGLang and 14 / 18 ms = 778 in native, in both fits.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
from test_cli_support import FIT_ID, run_cli, write_point_mass_fit
from test_json_schemas import validate_output

LLAMA = "llama-3.1-8b-instruct"
SECOND = "20260101T000001Z-second1"


def _workdir(root: Path, **overrides) -> Path:
    """A working directory whose latest fit is the two-model point mass (+ overrides)."""
    (root / "data").mkdir(parents=True)
    (root / "models").mkdir()
    for name in ("hardware.csv", "seed_estimates.csv", "models.csv"):
        shutil.copy(bundled(name), root / "data" / name)
    (root / "data" / "measurements.csv").write_text(MULTI_DATA)
    shutil.copy(bundled("priors.toml"), root / "models" / "priors.toml")
    write_point_mass_fit(root / "models", root / "data" / "measurements.csv",
                         root / "models" / "priors.toml", root / "data" / "hardware.csv",
                         draws=multi_model_draws(16, **overrides))
    return root


@pytest.fixture
def refit_to(monkeypatch):
    """``refit_to(work, **overrides)``: `update --refit` in ``work`` returns a second
    point-mass fit of the data file as it is (``overrides``: its parameters), not NUTS."""
    from ddtree_bayes import api
    from ddtree_bayes.engine.inference import FitResult

    def arrange(work: Path, **overrides) -> None:
        path = write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                                    work / "models" / "priors.toml",
                                    work / "data" / "hardware.csv", fit_id=SECOND,
                                    draws=multi_model_draws(16, **overrides))
        (work / "models" / "latest.json").write_text(json.dumps(
            {"fit_id": FIT_ID, "file": f"fits/{FIT_ID}.nc", "converged": True}))
        monkeypatch.setattr(api, "fit", lambda *a, **k: FitResult(
            fit_id=SECOND, path=path, converged=True, failures=[], diagnostics=[],
            divergences=0))

    return arrange


def _add_llama_ar(work: Path, tok_s: str = "160") -> None:
    code, _, err = run_cli(work, "add", "--model", LLAMA, "--hardware", "h100", "--gpus", "1",
                           "--engine", "vllm", "--method", "ar", "--accept", "1",
                           "--tok-s", tok_s, "--source", "HYPOTHETICAL test")
    assert code == 0, err


def test_update_tracks_the_default_question_of_the_new_rows_model(tmp_path, refit_to):
    """A fit of Kimi and Llama, a Llama row added: `update` showed how Kimi's default question
    moved (the project's first model: 700 -> 700 tok/s, nothing), not Llama's, which the row
    is about (800 -> 700 here: its M = 1 step 7 -> 8 ms in the refit)."""
    work = _workdir(tmp_path / "w")
    _add_llama_ar(work)
    refit_to(work, step_ar_ms=[8.0, 8.0])
    code, out, err = run_cli(work, "update", "--refit", "--quiet", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("update", report)
    assert [r["row"] for r in report["new_rows"]] == [5]
    defaults = [c for c in report["tracked"] if c["name"] == "default"]
    assert [c["label"] for c in defaults] == [
        f"{LLAMA} h100 x1 vllm ddtree b16/B32 accept 14"]
    (c,) = defaults
    assert c["model"] == LLAMA
    assert c["before"]["median"] == pytest.approx(800.0)
    assert c["after"]["median"] == pytest.approx(700.0)
    code, out, err = run_cli(work, "update", "--refit", "--quiet")   # the table says it too
    assert code == 0, err
    tracked = out[out.index("tracked queries"):].splitlines()[1:-1]
    assert tracked == [f"  default: {LLAMA} h100 x1 vllm ddtree b16/B32 accept 14: 90% 800-800 "
                       "-> 700-700 tok/s (median 800 -> 700, width n/a)"]


def test_update_tracks_each_model_with_new_rows_in_the_order_of_the_rows(tmp_path, refit_to):
    """Rows of both models: each model's default question, Llama's first (its row came
    first), Kimi's SGLang and native rows after it."""
    work = _workdir(tmp_path / "w")
    _add_llama_ar(work)
    code, _, err = run_cli(work, "add", "--model", "kimi-k2.6", "--hardware", "b300", "--gpus",
                           "8", "--engine", "sglang", "--method", "ar", "--accept", "1",
                           "--tok-s", "131", "--source", "HYPOTHETICAL test")
    assert code == 0, err
    refit_to(work)
    code, out, err = run_cli(work, "update", "--refit", "--quiet", "--format", "json")
    assert code == 0, err
    defaults = [(c["model"], c["label"], round(c["after"]["median"]))
                for c in json.loads(out)["tracked"] if c["name"] == "default"]
    assert defaults == [
        (LLAMA, f"{LLAMA} h100 x1 vllm ddtree b16/B32 accept 14", 800),
        ("kimi-k2.6", "kimi-k2.6 b300 x8 sglang ddtree b16/B32 accept 14", 700),
        ("kimi-k2.6", "kimi-k2.6 b300 x8 native ddtree b16/B32 accept 14", 778)]


def test_update_without_new_rows_tracks_the_projects_model_as_before(tmp_path, refit_to):
    """Nothing added (`update --refit` alone): the default question is the project's model's
    (its first row's), as before, and named in the JSON."""
    work = _workdir(tmp_path / "w")
    refit_to(work)
    code, out, err = run_cli(work, "update", "--refit", "--quiet", "--format", "json")
    assert code == 0, err
    defaults = [(c["model"], c["label"]) for c in json.loads(out)["tracked"]
                if c["name"] == "default"]
    assert defaults == [("kimi-k2.6", "kimi-k2.6 b300 x8 sglang ddtree b16/B32 accept 14"),
                        ("kimi-k2.6", "kimi-k2.6 b300 x8 native ddtree b16/B32 accept 14")]


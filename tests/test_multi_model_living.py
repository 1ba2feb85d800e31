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
from pathlib import Path

import pytest

from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
from test_cli_support import FIT_ID, make_multi_model_workdir, run_cli, write_point_mass_fit
from test_json_schemas import validate_output

LLAMA = "llama-3.1-8b-instruct"
SECOND = "20260101T000001Z-second1"


def _workdir(root: Path, **overrides) -> Path:
    """A working directory whose latest fit is the two-model point mass (+ overrides)."""
    return make_multi_model_workdir(root, multi_model_draws(16, **overrides))


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


def _refit_json(work):
    """`update --refit --quiet --format json` in ``work``: its report, schema-checked, and
    its stderr."""
    code, out, err = run_cli(work, "update", "--refit", "--quiet", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("update", report)
    return report, err


#: Llama's default question (AR rows only: the bundled DDTree shape on its H100) has no
#: acceptance measured, inferred or in the priors: predict refuses it, and so does the
#: tracked default (it answered at the bundled 14, Kimi's: 800 -> 700 tok/s)
LLAMA_DEFAULT = f"{LLAMA}-h100-x1-vllm-ddtree-b16-B32"
LLAMA_UNANSWERED = ("no acceptance prior in the priors file and no measured acceptance for "
                    f"{LLAMA}, h100 x1, vllm, ddtree, block 16, budget 32")


def test_update_tracks_the_default_question_of_the_new_rows_model(tmp_path, refit_to):
    """A fit of Kimi and Llama, a Llama row added: `update` showed how Kimi's default question
    moved (the project's first model: 700 -> 700 tok/s, nothing), not Llama's, which the row
    is about; Llama's (AR rows only) is one predict refuses, and update says so."""
    work = _workdir(tmp_path / "w")
    _add_llama_ar(work)
    refit_to(work, step_ar_ms=[8.0, 8.0])
    report, err = _refit_json(work)
    assert [r["row"] for r in report["new_rows"]] == [5]
    defaults = [c for c in report["tracked"] if c["name"] == "default"]
    assert [c["label"] for c in defaults] == [LLAMA_DEFAULT]
    (c,) = defaults
    assert c["model"] == LLAMA and c["before"] is None and c["after"] is None
    assert c["after_error"].startswith(LLAMA_UNANSWERED)
    code, out, err = run_cli(work, "update", "--refit", "--quiet")   # the table says it too
    assert code == 0, err
    tracked = out[out.index("tracked queries"):].splitlines()[1:-1]
    assert len(tracked) == 1 and tracked[0].startswith(
        f"  default: {LLAMA_DEFAULT}: not predictable ({LLAMA_UNANSWERED}")


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
    defaults = [(c["model"], c["label"], c["after"] and round(c["after"]["median"]))
                for c in json.loads(out)["tracked"] if c["name"] == "default"]
    assert defaults == [
        (LLAMA, LLAMA_DEFAULT, None),
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


# ------------------------------------------------------------------ next
LLAMA_QUERY = (f"--model {LLAMA} --hardware h100 --gpus 1 --engine vllm --method eagle3 "
               "--block 3 --accept 2.5")
#: what a candidate on B300 says of Llama there: the fit measured only Kimi on it
LLAMA_ON_B300 = "by transfer: measured there with kimi-k2.6 only"


def test_next_says_a_candidate_on_another_models_system_is_by_transfer(tmp_path):
    """`next` for Llama on its H100 proposed "llama-3.1-8b-instruct b300 x8 sglang ar" with
    why "AR, context 0", as a measured system's candidate reads: the fit measured only Kimi on
    the B300, so Llama's step there is the pair roofline's (transferred), and the JSON row
    named neither the model nor that. Its why says so now, the JSON rows carry the model and
    `transferred`; the candidates on Llama's own H100 stay as they were."""
    work = _workdir(tmp_path / "w", noise_sd=0.03)
    code, out, err = run_cli(work, "next", "--query", LLAMA_QUERY, "--k", "4",
                             "--format", "json")
    assert code == 0, err
    validate_output("next", json.loads(out))
    rows = {r["candidate"]: r for r in json.loads(out)["rows"]}
    assert {c: (r["why"], r["model"], r["transferred"]) for c, r in rows.items()} == {
        f"{LLAMA} b300 x8 sglang ar": (f"AR, context 0 ({LLAMA_ON_B300})", LLAMA, True),
        f"{LLAMA} h100 x1 vllm eagle3 block 3 budget 3 M=4": ("the query itself", LLAMA, False),
        f"{LLAMA} h100 x1 sglang eagle3 block 3 budget 3 M=4": ("the query in sglang", LLAMA,
                                                               False),
        f"{LLAMA} h100 x1 vllm ar": ("AR, context 0", LLAMA, False)}
    # predict answers the transferred candidate (it is no proposal the tool then refuses)
    code, out, err = run_cli(work, "predict", "--model", LLAMA, "--hardware", "b300", "--gpus",
                             "8", "--engine", "sglang", "--method", "ar", "--accept", "1")
    assert code == 0, err
    assert f"{LLAMA}@b300x8 not measured" in out
    code, out, err = run_cli(work, "next", "--query", LLAMA_QUERY, "--k", "4")
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if f"{LLAMA} b300 x8 sglang ar" in x]
    assert f"AR, context 0 ({LLAMA_ON_B300})" in line


def test_next_names_the_model_of_each_candidate_of_a_file(tmp_path):
    """A candidates file may name another model than the query's: its JSON row said only
    hardware, engine and method, so a Kimi row read as a candidate for the Llama query's
    model. Each row carries its model; one on a system its model was never measured on (Kimi
    on 8x H200, measured by no model) says it is by transfer."""
    work = _workdir(tmp_path / "w", noise_sd=0.03)
    (work / "c.csv").write_text(
        "model,hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
        "kimi-k2.6,b300,8,sglang,ar,,,,\n"
        "kimi-k2.6,h200,8,sglang,ar,,,,\n"
        ",h100,1,vllm,ar,,,,\n")
    code, out, err = run_cli(work, "next", "--query", LLAMA_QUERY, "--k", "4",
                             "--candidates", "c.csv", "--format", "json")
    assert code == 0, err
    got = sorted((r["model"], r["hardware"], r["why"], r["transferred"])
                 for r in json.loads(out)["rows"])
    assert got == [
        ("kimi-k2.6", "b300", "c.csv row 2", False),
        ("kimi-k2.6", "h200", "c.csv row 3 (by transfer: h200 x8 never measured)",
         True),
        (LLAMA, "h100", "c.csv row 4", False)]


def test_next_of_one_model_carries_no_model_and_says_transfer_of_a_file_row(tmp_path):
    """A fit of one model: the JSON rows carry no model (as its query carries none) and
    `transferred` for a file's row on a system the fit never measured."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.03)
    (work / "c.csv").write_text(
        "hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
        "b300,8,sglang,ar,,,,\n"
        "h200,8,sglang,ar,,,,\n")
    code, out, err = run_cli(work, "next", "--query", "--engine sglang --accept 14", "--k", "4",
                             "--candidates", "c.csv", "--format", "json")
    assert code == 0, err
    got = sorted((r["hardware"], r["why"], r["transferred"], "model" in r)
                 for r in json.loads(out)["rows"])
    assert got == [("b300", "c.csv row 2", False, False),
                   ("h200", "c.csv row 3 (by transfer: h200 x8 never measured)", True, False)]


def test_the_transfer_note_counts_the_other_models_measured_there():
    """The note names the first model that measured the system and counts the rest; a
    configuration the fit measured has none."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.workflows.decisions.next_measurement import transfer_note

    d = multi_model_draws()
    d = d.view(data_csv=MULTI_DATA + "qwen3-8b,b300,8,sglang,ar,,,1,1.0,,300,test,\n"
               "gemma-3-27b-it,b300,8,sglang,ar,,,1,1.0,,200,test,\n")

    def on(model, hardware, gpus):
        return P.resolve_scenario(d, model=model, hardware=hardware, gpus=gpus,
                                  engine="sglang", method="ar", block=None, budget=None,
                                  verify_tokens=None, context_tokens=0.0)

    assert transfer_note(d, on(LLAMA, "b300", 8)) == (
        "by transfer: measured there with kimi-k2.6 and 2 other models")
    assert transfer_note(d, on(LLAMA, "h200", 1)) == "by transfer: h200 x1 never measured"
    assert transfer_note(d, on("kimi-k2.6", "b300", 8)) is None


# ------------------------------------------------------------------ update: the row notes
#: Llama's EAGLE-3 chain b3/B3 on its H100 (M = 4): MOE = 3.5 x (1 + 0.0625 x 3) = 4.156 ms,
#: + ATTN_BASE 3.5 = 7.656 ms, / (1 - 0.2) (the pooled overhead: no group of Llama's
#: measured it) = 9.57 ms; at acceptance 2.5: 261 tok/s, so 230 is ln(230/261) = -0.127,
#: -4.2 noise sd (0.03) below it (a surprise). Llama's AR on 8x B300, which only Kimi ran on,
#: is the pair roofline's: 16.1 GB / (8 x 8 TB/s) / 0.8 + 32 x (0.03 + 0.05) ms = 2.87 ms,
#: 348 tok/s.
LLAMA_ROWS = (f"{LLAMA},h100,1,vllm,eagle3,3,3,4,2.5,,230,test,\n"
              f"{LLAMA},b300,8,sglang,ar,,,1,1.0,,348,test,\n")


def test_update_names_the_model_in_its_row_notes(tmp_path, refit_to):
    """A fit of Kimi and Llama: `update`'s notes under the score table said "row 5:
    h100x1/vllm/eagle3 was not measured in that fit" and "row 5: h100 x1 vllm eagle3 ...:
    230 tok/s is at the <0.1% percentile", a removed row "h100 x1 vllm ar ...", and the refit
    reason "row 6 is on b300x8, not measured in fit ..." of a system the fit measured (with
    Kimi): none said which model. Each names it now."""
    work = _workdir(tmp_path / "w", noise_sd=0.03)
    data = work / "data" / "measurements.csv"
    # Llama's AR row edited (141.44 -> 140 tok/s: 1000 / 7 ms = 143, ok), two rows added
    data.write_text(MULTI_DATA.replace(",141.44,", ",140,") + LLAMA_ROWS)
    refit_to(work, noise_sd=0.03)
    code, out, err = run_cli(work, "update", "--refit", "--quiet")
    assert code == 0, err
    notes = [x for x in out.splitlines()
             if x.startswith("  row ") or x.startswith("row ") and " of fit " in x]
    assert notes[0] == (f"  row 5: {LLAMA}@h100x1/vllm/eagle3 was not measured in that fit: "
                        "its overhead fraction comes from the pooled population (a wide "
                        "interval)")
    assert notes[1].startswith(f"  row 6: {LLAMA}@b300x8 not measured: M = 1 step 2.9 ms")
    assert notes[2].startswith(f"  row 5: {LLAMA}, h100 x1 vllm eagle3 b3/B3 M=4 accept 2.5: "
                               "230 tok/s is at the <0.1% percentile of the prediction")
    assert notes[3] == (f"row 4 of fit {FIT_ID} is no longer in the data (edited or deleted): "
                        f"{LLAMA}, h100 x1 vllm ar M=1 accept 1: 141.44 tok/s")
    assert len(notes) == 4
    code, out, err = run_cli(work, "update", "--refit", "--quiet", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["refit_reasons"] == [
        "--refit", f"1 row of fit {FIT_ID} removed or edited", "row 5 is a surprise",
        f"row 6 is on b300x8, where fit {FIT_ID} never measured {LLAMA}"]


def test_update_of_one_model_keeps_its_row_notes(tmp_path):
    """A fit of one model: the notes name no model, as before."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.03)
    code, _, err = run_cli(work, "add", "--hardware", "b300", "--gpus", "8", "--engine",
                           "sglang", "--method", "eagle3", "--block", "3", "--accept", "2.5",
                           "--tok-s", "100", "--source", "HYPOTHETICAL test")
    assert code == 0, err
    code, out, err = run_cli(work, "update", "--reject-surprises")
    assert code != 0
    notes = [x for x in out.splitlines() if x.startswith("  row ")]
    assert notes[0].startswith("  row 4: b300x8/sglang/eagle3 was not measured in that fit")
    assert notes[1].startswith("  row 4: b300 x8 sglang eagle3 b3/B3 M=4 accept 2.5: 100 tok/s "
                               "is at the <0.1% percentile")


# ------------------------------------------------------------------ tracked-query warnings
def test_update_names_the_model_a_tracked_query_warns_of(tmp_path, refit_to):
    """A Llama row added and a refit whose Llama M = 1 step is 1 ms, shorter than reading its
    16.1 GB of weights at the H100's 3.35 TB/s (4.79 ms): predict warns of it, and so did
    update, as `tracked query 'default': ...`, though there is one default question per
    model the rows measure (Kimi's warns of nothing). The warning names the model now, on
    stderr and in the JSON; a fit of one model keeps `tracked query 'NAME': `."""
    work = _workdir(tmp_path / "w")
    _add_llama_ar(work)
    # (an acceptance for Llama's default question, which its AR rows do not give: without
    # one predict refuses it, and so does the tracked default)
    with (work / "models" / "priors.toml").open("a") as f:
        f.write(f'\n[[acceptance]]\nmodel = "{LLAMA}"\nmethod = "ddtree"\nblock = 16\n'
                'budget = 32\ndist = "uniform"\nlower = 13.999\nupper = 14.001\n'
                'rationale = "test"\nsource = "test"\n')
    refit_to(work, step_ar_ms=[8.0, 1.0])
    report, err = _refit_json(work)
    head = f"tracked query 'default' of {LLAMA}: the fit's M = 1 step of {LLAMA}@h100x1 is shorter"
    # (and, first, that its default DDTree budget 32 verifies 33 tokens where Llama's rows, AR
    # only, verified 1)
    beyond = (f"tracked query 'default' of {LLAMA}: at C = 1 a step verifies 33 tokens (C x M), "
              f"more than any measured on {LLAMA}@h100x1 (at most 1): ")
    # (under the refit, the fit the user now has: predict's order, its step first)
    assert [w[:len(x)] for w, x in zip(report["warnings"], (head, beyond), strict=True)] == [
        head, beyond]
    assert f"ddtree-bayes: warning: {report['warnings'][0]}" in err
    # the default answer it warns of: 14 x 1000 / ((1 x 0.5 x 3 + 0.5) / 0.8 ms) = 5600 tok/s
    (c,) = [c for c in report["tracked"] if c["model"] == LLAMA]
    assert c["after"]["median"] == pytest.approx(5600.0, rel=1e-4)   # (14 +- 0.001)


# ------------------------------------------------------------------ diff
def _second_fit(work: Path, **overrides) -> None:
    """A second point-mass fit (``SECOND``, ``overrides``: its parameters) of the data file
    as it is now."""
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                         work / "models" / "priors.toml", work / "data" / "hardware.csv",
                         fit_id=SECOND, draws=multi_model_draws(16, **overrides))


def test_diff_tracks_the_default_question_of_the_models_whose_rows_differ(tmp_path):
    """Two fits of Kimi and Llama, the second with a Llama row more: `diff` asked Kimi's
    default question (the project's first model: 700 -> 700 tok/s, nothing), as update did
    before it followed the rows; it asks Llama's now (800 -> 700: its M = 1 step 7 -> 8 ms),
    in the table and the JSON."""
    work = _workdir(tmp_path / "w")
    _add_llama_ar(work)
    _second_fit(work, step_ar_ms=[8.0, 8.0])
    code, out, err = run_cli(work, "diff", FIT_ID, SECOND, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("diff", report)
    assert [r["row"] for r in report["added_rows"]] == [5]
    defaults = [(c["model"], c["label"], c["before"], c["after"])
                for c in report["tracked"] if c["name"] == "default"]
    assert defaults == [(LLAMA, LLAMA_DEFAULT, None, None)]
    (c,) = [c for c in report["tracked"] if c["name"] == "default"]
    assert c["before_error"].startswith(LLAMA_UNANSWERED)
    code, out, err = run_cli(work, "diff", FIT_ID, SECOND)
    assert code == 0, err
    tracked = out[out.index("tracked queries"):].splitlines()[1:]
    assert len(tracked) == 1 and tracked[0].startswith(
        f"  default: {LLAMA_DEFAULT}: not predictable ({LLAMA_UNANSWERED}")


def test_diff_of_the_same_rows_tracks_the_projects_model_as_before(tmp_path):
    """Two fits of the same rows: the project's model's default question (Kimi's, its first
    row's), as before."""
    work = _workdir(tmp_path / "w")
    _second_fit(work, step_ar_ms=[8.0, 8.0])
    code, out, err = run_cli(work, "diff", FIT_ID, SECOND, "--format", "json")
    assert code == 0, err
    defaults = [(c["model"], c["label"], round(c["after"]["median"]))
                for c in json.loads(out)["tracked"] if c["name"] == "default"]
    assert defaults == [("kimi-k2.6", "kimi-k2.6 b300 x8 sglang ddtree b16/B32 accept 14", 700),
                        ("kimi-k2.6", "kimi-k2.6 b300 x8 native ddtree b16/B32 accept 14", 778)]


# ------------------------------------------------------------------ next: left out
#: Kimi K2.6's card: 1000 B parameters at 0.6 bytes, 600 GB; one H100 holds 80 GB
KIMI_ON_H100 = ("kimi-k2.6's weights (600.0 GB: 1000B parameters at 0.6 bytes) do not fit in "
                "1 x h100 (80.0 GB)")


def test_next_lists_the_candidates_whose_weights_do_not_fit(tmp_path):
    """`next` for Kimi takes it to every measured system, Llama's one H100 too, where its
    600 GB of weights do not fit in 80 GB: those candidates (AR, and DDTree budgets 8, 32
    and 128 in vLLM, the engine measured there) were dropped without a word, while a native
    one was listed under `left out:` with its reason. They are listed now, with theirs, in
    the table and the JSON; the ranked rows are as they were."""
    work = _workdir(tmp_path / "w", noise_sd=0.03)
    query = "--model kimi-k2.6 --engine sglang --accept 14"
    code, out, err = run_cli(work, "next", "--query", query, "--k", "4", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    validate_output("next", report)
    assert [r["candidate"] for r in report["rows"]] and all(
        r["hardware"] == "b300" for r in report["rows"])
    native = ("native is a modelled engine (its speculative overhead is sglang's times 1 - "
              "reduction) with no measurement in the fit: there is no such engine to run")
    assert [(x["candidate"], x["why"], x["reason"]) for x in report["left_out"]] == [
        ("kimi-k2.6 b300 x8 native ddtree block 16 budget 32 M=33", "the query in native",
         native),
        ("kimi-k2.6 h100 x1 vllm ar", "AR, context 0", KIMI_ON_H100),
        ("kimi-k2.6 h100 x1 vllm ddtree block 16 budget 8 M=9", "DDTree budget 8",
         KIMI_ON_H100),
        ("kimi-k2.6 h100 x1 vllm ddtree block 16 budget 32 M=33", "DDTree budget 32",
         KIMI_ON_H100),
        ("kimi-k2.6 h100 x1 vllm ddtree block 16 budget 128 M=129", "DDTree budget 128",
         KIMI_ON_H100)]
    code, out, err = run_cli(work, "next", "--query", query, "--k", "4")
    assert code == 0, err
    assert [x for x in out.splitlines() if x.startswith("left out:")] == [
        "left out: kimi-k2.6 b300 x8 native ddtree block 16 budget 32 M=33: " + native + ".",
        "left out: kimi-k2.6 h100 x1 vllm ar; kimi-k2.6 h100 x1 vllm ddtree block 16 budget 8 "
        "M=9; kimi-k2.6 h100 x1 vllm ddtree block 16 budget 32 M=33; kimi-k2.6 h100 x1 vllm "
        f"ddtree block 16 budget 128 M=129: {KIMI_ON_H100}."]


def test_tracked_query_warnings_are_the_fit_the_user_now_has(monkeypatch):
    """`update` printed what predict warns of under both fits: after a budget-32 row was
    added, the default question was still warned "more than any measured on b300x8 (at most
    9)", the older fit's words. Now the later fit's warnings are said (the earlier one's only
    when there is no later fit)."""
    import dataclasses

    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.living import tracking

    def rows(draws, query, seed, workdir=None, builtin=False, warnings=None):
        warnings.append(f"said under {draws.meta['fit_id']}")
        return []

    monkeypatch.setattr(tracking, "query_rows", rows)
    before, after = point_mass_draws(), point_mass_draws()
    before.meta["fit_id"], after.meta["fit_id"] = "old", "new"
    t = tracking.Tracked("q", {"accept": "14"})
    said: list[str] = []
    tracking.compare_queries(before, after, [t], 1, warnings=said)
    assert said == ["tracked query 'q': said under new"]
    said.clear()
    tracking.compare_queries(before, None, [dataclasses.replace(t)], 1, warnings=said)
    assert said == ["tracked query 'q': said under old"]

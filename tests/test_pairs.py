"""Several target models in one fit (issue 11): pair labels, the pair roofline prior of the
M = 1 step (numbers by hand), predict --model routing and its errors, the model's pair
parameters, validate's model / pair folds and the baseline for a pair never measured.

The hand-checkable fit is ``engine.testing.multi_model_draws``: Kimi K2.6 on 8x B300 (the
single-model point mass: M = 1 step 8 ms, default scenario 20 ms) and Llama-3.1-8B on one H100
(step 7 ms), pair roofline at efficiency 0.8, 0.03 ms per layer, all-reduces 0.05 ms (fabric)
and 0.1 ms (PCIe) per layer, no scatter, no noise.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.core import pairs as CP
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import load_priors
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.errors import DataError, QueryError
from ddtree_bayes.core.model_cards import ModelCard, load_model_cards
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws, point_mass_draws
from ddtree_bayes.workflows import validation as V
from ddtree_bayes.workflows.baseline import pair_roofline_fit
from test_cli_support import fitted_inputs, run_cli, write_point_mass_fit

HW = load_hardware(bundled("hardware.csv"))
CARDS = load_model_cards(bundled("models.csv"))
#: billions of parameters a token reads: the active ones less the untied input embedding, of
#: which it reads one row (Llama-3.1-8B 128256 x 4096, Qwen3-8B 151936 x 4096: the cards'
#: embed_params_b); Kimi K2.6's 32 B leave its embedding out already (embed_params_b 0: the
#: Kimi K2 shapes give 31.69 B without it, 32.86 B with it), so a token reads all 32
LLAMA_READ, QWEN8_READ = 8.03 - 0.5253, 8.19 - 0.6223
PRIORS = load_priors(bundled("priors.toml"))


# ------------------------------------------------------------------ the pair roofline by hand
def test_pair_features_and_roofline_step_by_hand():
    # Llama-3.1-8B: (8.03 - 0.5253)e9 params a token reads (its untied input embedding, 128256
    # x 4096, it reads one row of) x 2 bytes over one H100's 3.35 TB/s = 4.4804 ms at the peak
    f = CP.pair_features(CARDS["llama-3.1-8b-instruct"], HW["h100"], 1)
    assert f.stream_ms == pytest.approx(LLAMA_READ * 2 / 3.35)
    assert (f.layers, f.link) == (32, "single")
    # / 0.8 + 32 x 0.03 (one GPU: no all-reduce)
    assert CP.roofline_step_ms(f.stream_ms, f.layers, f.fabric, f.pcie, 0.8, 0.03, 0.05, 0.1) \
        == pytest.approx(4.480418 / 0.8 + 0.96, abs=1e-6)
    # Kimi K2.6: 32e9 x 0.5 bytes over 8 x 8 TB/s = 0.25 ms; NVLink: + 61 x (0.03 + 0.05)
    f = CP.pair_features(CARDS["kimi-k2.6"], HW["b300"], 8)
    assert (f.stream_ms, f.link) == (0.25, "fabric")
    assert CP.roofline_step_ms(f.stream_ms, f.layers, f.fabric, f.pcie, 0.5, 0.03, 0.05, 0.1) \
        == pytest.approx(0.5 + 61 * 0.08)
    # PCIe-only 8x RTX PRO 6000: 16 GB / (8 x 1.792 TB/s) = 1.1161 ms; + 61 x (0.03 + 0.1)
    f = CP.pair_features(CARDS["kimi-k2.6"], HW["rtx-pro-6000"], 8)
    assert f.link == "pcie"
    assert CP.roofline_step_ms(f.stream_ms, f.layers, f.fabric, f.pcie, 1.0, 0.03, 0.05, 0.1) \
        == pytest.approx(16 / (8 * 1.792) + 61 * 0.13)


def test_pair_features_need_a_bandwidth():
    with pytest.raises(DataError, match="no memory bandwidth for x"):
        CP.pair_features(CARDS["qwen3-8b"], {"hardware": "x", "mem_bw_tb_s": ""}, 1)


def test_labels():
    assert CP.pair_label("qwen3-8b", "h100x1", True) == "qwen3-8b@h100x1"
    assert CP.pair_label("qwen3-8b", "h100x1", False) == "h100x1"
    assert CP.split_label("qwen3.5-397b-a17b@rtx-pro-6000-serverx4") == (
        "qwen3.5-397b-a17b", "rtx-pro-6000-server", 4)
    assert CP.split_label("mi355xx8") == (None, "mi355x", 8)


# ------------------------------------------------------------------ predict: routing by hand
@pytest.mark.parametrize(("query", "step_ms"), [
    # measured pairs: each model's own M = 1 step
    ({"model": "llama-3.1-8b-instruct", "hardware": "h100"}, 7.0),
    ({"model": "kimi-k2.6", "hardware": "b300"}, 8.0),
    # never measured: the pair roofline (Llama on one H200: 15.01 GB / 4.8 TB/s / 0.8 + 0.96)
    ({"model": "llama-3.1-8b-instruct", "hardware": "h200", "gpus": 1},
     LLAMA_READ * 2 / 4.8 / 0.8 + 32 * 0.03),
    # a model with a card but no rows: Qwen3-8B on one H100
    ({"model": "qwen3-8b", "hardware": "h100", "gpus": 1},
     QWEN8_READ * 2 / 3.35 / 0.8 + 36 * 0.03),
    # Kimi on 8x H100 (NVLink): 16 GB / 26.8 TB/s / 0.8 + 61 x (0.03 + 0.05)
    ({"model": "kimi-k2.6", "hardware": "h100", "gpus": 8}, 16 / 26.8 / 0.8 + 61 * 0.08),
])
def test_model_routes_to_its_pair(query, step_ms):
    rows = P.predict(multi_model_draws(), method="ar", engines=["vllm"], accept="1",
                          **query)
    assert rows[0]["model"] == query["model"]
    assert rows[0]["median"] == pytest.approx(1000.0 / step_ms)
    assert rows[0]["lo90"] == pytest.approx(rows[0]["hi90"])   # point mass, no scatter


def test_unmeasured_pair_says_how_it_was_obtained():
    row = P.predict(multi_model_draws(), model="qwen3-8b", hardware="h100", gpus=1,
                         method="ar", engines=["vllm"], accept="1")[0]
    assert row["overhead_from"].startswith(
        "qwen3-8b@h100x1 not measured: M = 1 step 6.7 ms (90% 6.7-6.7) from the pair roofline "
        "(card qwen3-8b: 15.1 GB of active weights, 36 layers; h100 x1: 3.35 TB/s per GPU, "
        "single), efficiency and per-layer cost learned from 2 measured pairs, no faster than "
        "reading the active weights at the full bandwidth (4.5 ms); ")   # 15.1 GB / 3.35 TB/s


def test_an_unmeasured_pair_is_never_faster_than_reading_its_weights():
    """An exploratory pass: Llama-3.1-8B on one L4 (15.01 GB of weights a token reads at 0.300
    TB/s: 50.0 ms a step at least, 20.0 tok/s at most) was answered faster than that in 19% of
    draws. With the pair scatter 1.0 and the roofline 50.0 / 0.8 + 32 x 0.03 = 63.5 ms,
    Phi(log(50.0 / 63.5)) = 41% of draws would be; the scatter is now truncated there."""
    d = multi_model_draws(n=2000, pair_step_sd=1.0)
    row = P.predict(d, model="llama-3.1-8b-instruct", hardware="l4", gpus=1, method="ar",
                    engines=["vllm"], accept="1")[0]
    # the step's 5th percentile: Phi^-1(0.406 + 0.05 x 0.594) = -0.162, 63.5 x exp(-0.162) =
    # 54.0 ms: 18.5 tok/s (untruncated: 63.5 x exp(-1.645) = 12.3 ms, 81 tok/s)
    assert row["hi90"] == pytest.approx(18.5, abs=0.4)
    assert row["hi90"] <= 1000 * 0.300 / (LLAMA_READ * 2)   # 19.99 tok/s
    assert "no faster than reading the active weights at the full bandwidth (50 ms)" in (
        row["overhead_from"])


def test_default_scenario_of_a_model_and_the_pair_scatter_widens():
    d = multi_model_draws()
    rows = P.predict(d, model="kimi-k2.6", accept="12", engines=["sglang"])
    assert rows[0]["median"] == pytest.approx(600.0)        # 12 tokens / 20 ms, as one model
    wide = multi_model_draws(n=400, pair_step_sd=0.25)
    q = {"model": "qwen3-8b", "hardware": "h100", "gpus": 1, "method": "ar",
         "engines": ["vllm"], "accept": "1"}
    measured = P.predict(wide, **{**q, "model": "llama-3.1-8b-instruct"})[0]
    new = P.predict(wide, **q)[0]
    assert measured["hi90"] == pytest.approx(measured["lo90"])
    # log-normal scatter 0.25: the 90% interval spans exp(2 x 1.645 x 0.25) = 2.28x
    assert new["hi90"] / new["lo90"] == pytest.approx(np.exp(2 * 1.645 * 0.25), rel=0.15)


def test_several_models_and_none_named_lists_them():
    with pytest.raises(QueryError) as err:
        P.predict(multi_model_draws(), accept="12")
    assert str(err.value) == ("fit point-mass holds 2 models (kimi-k2.6, llama-3.1-8b-instruct); "
                              "say which with --model (fix: e.g. --model kimi-k2.6)")


def test_one_model_fit_model_is_optional_and_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # no data/ here: the bundled cards
    d = point_mass_draws()
    d.meta["model"]["target_model"] = "kimi-k2.6"
    plain = P.predict(d, accept="12")
    assert P.predict(d, accept="12", model="kimi-k2.6") == plain
    assert "model" not in plain[0]
    # qwen3-8b has a card: the fit holds one model, not "never given a model card"
    with pytest.raises(QueryError) as err:
        P.predict(d, accept="12", model="qwen3-8b")
    assert str(err.value) == (
        "--model 'qwen3-8b' has a card in the bundled models.csv, but fit point-mass holds one "
        "model (kimi-k2.6): a model it never measured needs a fit of several models (their "
        "measured pairs teach the roofline of the model cards) (fix: drop --model, or fit a "
        "file holding qwen3-8b and other models)")
    with pytest.raises(QueryError) as err:
        P.predict(d, accept="12", model="gpt-9")
    assert str(err.value) == (
        "--model 'gpt-9' was never measured, nor given a model card: it cannot be predicted (a "
        "fit of several models predicts a model it never measured from its card); known: "
        "kimi-k2.6 (fix: check the spelling)")


def test_model_without_card_is_refused():
    with pytest.raises(QueryError, match="'gpt-9' was never measured, nor given a model card"):
        P.predict(multi_model_draws(), model="gpt-9", hardware="h100", gpus=1, method="ar",
                       engines=["vllm"], accept="1")


# ------------------------------------------------------------------ the CLI
def _multi_dir(tmp_path: Path, **overrides) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "models").mkdir()
    for name in ("hardware.csv", "seed_estimates.csv", "models.csv"):
        shutil.copy(bundled(name), tmp_path / "data" / name)
    data = tmp_path / "data" / "measurements.csv"
    data.write_text(MULTI_DATA)
    shutil.copy(bundled("priors.toml"), tmp_path / "models" / "priors.toml")
    write_point_mass_fit(tmp_path / "models", data, tmp_path / "models" / "priors.toml",
                         tmp_path / "data" / "hardware.csv",
                         draws=multi_model_draws(16, **overrides))
    return tmp_path


@pytest.fixture
def multi_dir(tmp_path: Path) -> Path:
    return _multi_dir(tmp_path)


def test_cli_predict_without_model_is_one_line_exit_2(multi_dir):
    code, out, err = run_cli(multi_dir, "predict", "--accept", "12")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: fit 20260101T000000Z-pointmss holds 2 models (kimi-k2.6, "
                   "llama-3.1-8b-instruct); say which with --model (fix: e.g. --model "
                   "kimi-k2.6)\n")


def test_cli_predict_model(multi_dir):
    code, out, err = run_cli(multi_dir, "predict", "--model", "llama-3.1-8b-instruct",
                             "--hardware", "h200", "--method", "ar", "--engine", "vllm",
                             "--accept", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == "llama-3.1-8b-instruct, h200 x1, ar, verify 1 token, context 0"
    # 15.0094 GB / 4.8 TB/s / 0.8 + 32 x 0.03 = 4.8687 ms: 205 tok/s
    assert lines[4].split()[:3] == ["vllm", "1", "205"]      # 1000 / 4.8687 ms
    assert "llama-3.1-8b-instruct@h200x1 not measured: M = 1 step 4.9 ms" in out


def test_cli_unknown_model_names_the_closest(multi_dir):
    code, out, err = run_cli(multi_dir, "predict", "--model", "qwen3-8", "--accept", "12")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--model 'qwen3-8' was never measured, nor given a model card" in err
    assert "did you mean qwen3-8b" in err


def test_a_hugging_face_repo_id_is_told_its_cards_name(multi_dir):
    """`--model meta-llama/Llama-3.1-8B-Instruct`, the model's Hugging Face repo id, was told
    to write 'meta-llama-llama-3.1-8b-instruct', a slug no card has, though the fit stores
    the card 'llama-3.1-8b-instruct': the repo id's last part, case aside (the rule add
    --from-bench matches a file's model to a card by, core/bench_import/identity.py). The
    fix now names the card; a name that only needs lowercasing is told so as before, and an
    id no card matches keeps the slug."""
    code, out, err = run_cli(multi_dir, "predict", "--model", "meta-llama/Llama-3.1-8B-Instruct",
                             "--hardware", "h100", "--accept", "1", "--method", "ar")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: --model 'meta-llama/Llama-3.1-8B-Instruct' is not a "
                   "name (lowercase letters, digits and . _ + -) (fix: write its card's name: "
                   "'llama-3.1-8b-instruct')\n")
    code, out, err = run_cli(multi_dir, "track", "add", "--name", "llama", "--model",
                             "meta-llama/Llama-3.1-8B-Instruct", "--hardware", "h100")
    assert (code, out) == (2, "")
    assert err.endswith("(fix: write its card's name: 'llama-3.1-8b-instruct')\n"), err
    code, out, err = run_cli(multi_dir, "predict", "--model", "someone/Other-Model-7B")
    assert err == ("ddtree-bayes: error: --model 'someone/Other-Model-7B' is not a name "
                   "(lowercase letters, digits and . _ + -) (fix: write it with those only, "
                   "e.g. 'someone-other-model-7b')\n")


def test_cli_model_carded_after_the_fit_says_so(multi_dir):
    """`card add` of a new model after a fit of several: predict said the model was "never
    measured, nor given a model card ... did you mean ..." although data/models.csv has it."""
    cards = multi_dir / "data" / "models.csv"
    qwen = next(ln for ln in cards.read_text().splitlines() if ln.startswith("qwen3-8b,"))
    with cards.open("a") as fh:
        fh.write(qwen.replace("qwen3-8b,", "my-model,", 1) + "\n")
    code, out, err = run_cli(multi_dir, "predict", "--model", "my-model", "--hardware", "h100",
                             "--method", "ar", "--engine", "vllm", "--accept", "1")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: --model 'my-model' has a card in data/models.csv, but "
                   "fit 20260101T000000Z-pointmss does not store it (the card was written after "
                   "the fit): it cannot be predicted from this fit (fix: re-run `ddtree-bayes "
                   "fit` to predict my-model from its card)\n")


def test_cli_carded_model_on_a_fit_of_one_model(tmp_path):
    """predict, track and update word it through one function (engine.names)."""
    from test_cli_support import make_point_mass_workdir

    work = make_point_mass_workdir(tmp_path / "w")
    line = ("--model 'llama-3.1-8b-instruct' has a card in the bundled models.csv, but fit "
            "20260101T000000Z-pointmss holds one model (kimi-k2.6): a model it never measured "
            "needs a fit of several models (their measured pairs teach the roofline of the "
            "model cards)")
    code, out, err = run_cli(work, "predict", "--model", "llama-3.1-8b-instruct", "--accept", "3")
    assert (code, out) == (2, "")
    assert err == (f"ddtree-bayes: error: {line} (fix: drop --model, or fit a file holding "
                   "llama-3.1-8b-instruct and other models)\n")
    code, out, err = run_cli(work, "track", "add", "--model", "llama-3.1-8b-instruct",
                             "--accept", "3")
    assert code == 0, err
    assert f"the latest fit cannot answer it yet ({line});" in out


def test_cli_json_rows_carry_the_model(multi_dir):
    import json

    code, out, _ = run_cli(multi_dir, "predict", "--model", "kimi-k2.6", "--accept", "12",
                           "--format", "json")
    assert code == 0
    rows = json.loads(out)["rows"]
    assert {r["model"] for r in rows} == {"kimi-k2.6"}
    assert rows[0]["median"] == pytest.approx(600.0)


def test_cli_optimize_takes_model(multi_dir):
    code, out, err = run_cli(multi_dir, "optimize", "--model", "kimi-k2.6", "--engine", "sglang",
                             "--budgets", "8,32")
    assert code == 0, err
    assert out.splitlines()[1].startswith("kimi-k2.6, b300 x8, sglang, ddtree, block 16")
    code, _, err = run_cli(multi_dir, "optimize", "--engine", "sglang")
    assert code == 2 and "holds 2 models" in err


def test_cli_next_takes_model(tmp_path):
    noisy = _multi_dir(tmp_path, noise_sd=0.03)   # next needs a finite measurement
    code, out, err = run_cli(noisy, "next", "--query",
                             "--model kimi-k2.6 --engine sglang --accept 12", "--k", "4")
    assert code == 0, err
    assert "query: kimi-k2.6, b300 x8, sglang, ddtree" in out


# ------------------------------------------------------------------ spec and model
def _two_model_data(tmp_path: Path):
    path = tmp_path / "m.csv"
    path.write_text(MULTI_DATA)
    return load_measurements(path, HW)


def test_spec_of_two_models(tmp_path):
    data = _two_model_data(tmp_path)
    spec = S.build_spec(data, PRIORS, hardware=HW, cards=CARDS)
    assert spec.systems == ("kimi-k2.6@b300x8", "llama-3.1-8b-instruct@h100x1")
    assert spec.groups == ("kimi-k2.6@b300x8/sglang/ddtree",)
    assert spec.pair_models == ("kimi-k2.6", "llama-3.1-8b-instruct")
    f = spec.pair_roofline
    assert f is not None
    np.testing.assert_allclose(f["stream_ms"], [0.25, LLAMA_READ * 2 / 3.35])
    np.testing.assert_array_equal(f["layers"], [61, 32])
    np.testing.assert_array_equal(f["fabric"], [1, 0])
    np.testing.assert_array_equal(f["pcie"], [0, 0])
    meta = S.model_meta(spec, PRIORS)
    assert meta["pair_models"] == {"kimi-k2.6@b300x8": "kimi-k2.6",
                                   "llama-3.1-8b-instruct@h100x1": "llama-3.1-8b-instruct"}
    assert set(meta["model_cards"]) == set(CARDS)


def test_roofline_inputs_read_each_rows_own_card(tmp_path):
    import dataclasses

    path = tmp_path / "m.csv"   # a repeated Llama run: 4 rows, 3 configurations
    path.write_text(MULTI_DATA + "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,133,test,\n")
    data = load_measurements(path, HW)
    cfg = dataclasses.replace(PRIORS, moe_form="roofline")
    spec = S.build_spec(data, cfg, hardware=HW, cards=CARDS)
    # Kimi's DDTree row (M = 9, 384 experts top-8): E (1 - (1 - k/E)^M) / k = 8.285; dense 1
    assert spec.row_distinct is not None
    np.testing.assert_allclose(spec.row_distinct,
                               [1.0, 48 * (1 - (1 - 8 / 384) ** 9), 1.0, 1.0])
    assert spec.system_flop_ms is not None
    # Llama: 2 x 7.5047e9 FLOPs (not the input embedding, a row lookup) at one H100's 989
    # TFLOPS bf16 = 0.015176 ms
    assert spec.system_flop_ms[1] == pytest.approx(2 * LLAMA_READ * 1e9 / 989e12 * 1e3)
    assert spec.flops_how[1].startswith("llama-3.1-8b-instruct@h100x1: h100: bf16 peak 989")


def test_one_model_spec_unchanged(tmp_path):
    data = load_measurements(bundled("measurements.csv"), HW)
    spec = S.build_spec(data, PRIORS, hardware=HW, cards=CARDS)
    assert spec.systems == ("b300x8", "rtx-pro-6000x8") and spec.pair_roofline is None
    assert "pair_models" not in S.model_meta(spec, PRIORS)


def test_several_models_need_the_pair_priors(tmp_path):
    import dataclasses

    from ddtree_bayes.core.errors import PriorsError

    cfg = dataclasses.replace(PRIORS, priors={k: v for k, v in PRIORS.priors.items()
                                              if k != "pair_step_sd"})
    with pytest.raises(PriorsError, match="priors.pair_step_sd'.*needs this prior"):
        S.build_spec(_two_model_data(tmp_path), cfg, hardware=HW, cards=CARDS)


def test_model_step_prior_is_lognormal_around_the_roofline(tmp_path):
    import pymc as pm

    from ddtree_bayes.engine.model import build_model, free_parameter_names

    spec = S.build_spec(_two_model_data(tmp_path), PRIORS, hardware=HW, cards=CARDS)
    model = build_model(spec, PRIORS)
    assert {rv.name for rv in model.free_RVs} == set(
        free_parameter_names(PRIORS.moe_form, PRIORS.step_form, PRIORS, multi_model=True,
                             links=("fabric",)))   # 8x B300 (NVLink) and 1x H100
    point = {"pair_bw_eff": 0.8, "pair_layer_ms": 0.03, "pair_allreduce_fabric_ms": 0.05,
             "pair_allreduce_pcie_ms": 0.1}
    givens = {model[k]: np.float64(v) for k, v in point.items()}
    got = model["pair_roofline_ms"].eval(givens)
    np.testing.assert_allclose(got, [0.25 / 0.8 + 61 * 0.08, LLAMA_READ * 2 / 3.35 / 0.8 + 0.96])
    # the step's log-density: LogNormal(log roofline, pair_step_sd) at step = roofline x e^0.1
    step = got * np.exp(0.1)
    logp = pm.logp(model["step_ar_ms"], step).eval({**givens,
                                                     model["pair_step_sd"]: np.float64(0.25)})
    expected = (-np.log(step) - np.log(0.25) - 0.5 * np.log(2 * np.pi)
                - 0.5 * (0.1 / 0.25) ** 2)
    np.testing.assert_allclose(logp, expected)


# ------------------------------------------------------------------ validate: folds, baseline
def test_model_and_pair_folds(tmp_path):
    data = _two_model_data(tmp_path)
    assert [(f.name, f.held_out) for f in V.make_folds(data, "model")] == [
        ("model=kimi-k2.6", (0, 1)), ("model=llama-3.1-8b-instruct", (2,))]
    assert [f.name for f in V.make_folds(data, "pair")] == [
        "pair=kimi-k2.6@b300x8", "pair=llama-3.1-8b-instruct@h100x1"]
    one = load_measurements(bundled("measurements.csv"), HW)
    assert [f.name for f in V.make_folds(one, "pair")] == ["pair=b300x8", "pair=rtx-pro-6000x8"]
    with pytest.raises(QueryError, match="--group model: .* holds one model \\(kimi-k2.6\\)"):
        V.make_folds(one, "model")


def test_baseline_roofline_recovers_known_parameters():
    truth = (0.7, 0.04, 0.06, 0.12)
    feats = {}
    for i, (card, hw, gpus) in enumerate([("llama-3.1-8b-instruct", "h100", 1),
                                          ("kimi-k2.6", "b300", 8),
                                          ("kimi-k2.6", "rtx-pro-6000", 8),
                                          ("llama-3.3-70b-instruct", "h100", 8),
                                          ("qwen3.8-27b", "rtx-3090", 2),
                                          ("qwen3.8-27b", "v100", 1)]):
        f = CP.pair_features(CARDS[card], HW[hw], gpus)
        feats[f"p{i}"] = {"stream_ms": f.stream_ms, "layers": f.layers, "fabric": f.fabric,
                          "pcie": f.pcie}

    def roof(f):
        return CP.roofline_step_ms(f["stream_ms"], f["layers"], f["fabric"], f["pcie"], *truth)

    fitted = pair_roofline_fit({k: roof(f) for k, f in feats.items()}, feats, PRIORS)
    new = CP.pair_features(CARDS["qwen3-8b"], HW["h200"], 1)
    f = {"stream_ms": new.stream_ms, "layers": new.layers, "fabric": 0.0, "pcie": 0.0}
    # the priors' ridge (centres 0.625, 0.03, 0.05, 0.1) pulls a little: 6.40 ms for 6.315
    assert fitted(f) == pytest.approx(roof(f), rel=0.02)
    # without the pairs' information the prior centres answer: 3.1531 / 0.625 + 36 x 0.03
    prior_only = pair_roofline_fit({}, feats, PRIORS)
    assert prior_only(f) == pytest.approx(QWEN8_READ * 2 / 4.8 / 0.625 + 36 * 0.03, rel=1e-6)


def test_card_of_a_model_without_one_is_named():
    with pytest.raises(DataError, match="no model card for 'gpt-9'"):
        CP.card_for({"qwen3-8b": ModelCard("qwen3-8b", 8, 8, 36, None, None, 2, "bf16", "s")},
                    "gpt-9")


# ------------------------------------------------------------------ add, track, update scoring
def _row(**kw) -> dict:
    return {"model": None, "hardware": "h100", "gpus": None, "engine": "vllm", "method": "ar",
            "accept_len": "1", "tok_s": "140", "source": "test", **kw}


def test_add_to_a_file_of_several_models_needs_the_model(tmp_path):
    from ddtree_bayes.workflows import living

    path = tmp_path / "m.csv"
    path.write_text(MULTI_DATA)
    with pytest.raises(DataError, match="holds 2 models \\(kimi-k2.6, llama-3.1-8b-instruct\\); "
                                        "which one\\?.*--model kimi-k2.6"):
        living.append_rows(path, HW, [living.NewRow("new", None, _row())])
    assert path.read_text() == MULTI_DATA
    out = living.append_rows(path, HW, [living.NewRow(
        "new", None, _row(model="llama-3.1-8b-instruct"))])
    assert [(m.model, m.gpus) for m in out.rows] == [("llama-3.1-8b-instruct", 1)]


def test_add_a_new_model_with_a_card_makes_a_file_of_several(tmp_path):
    from ddtree_bayes.workflows import living

    path = tmp_path / "m.csv"
    path.write_text(MULTI_DATA.split("llama")[0])          # the two Kimi rows
    out = living.append_rows(path, HW, [living.NewRow("new", None, _row(model="qwen3-8b",
                                                                       gpus="1"))])
    assert out.total_rows == 3
    assert load_measurements(path, HW).models == ("kimi-k2.6", "qwen3-8b")
    with pytest.raises(DataError, match="model 'qwen3-9b', but .* there is no model card"):
        living.append_rows(path, HW, [living.NewRow("new", None, _row(model="qwen3-9b",
                                                                     gpus="1"))])


def test_tracked_query_names_its_model_only_when_given():
    from ddtree_bayes.workflows import living

    assert "model" not in living.normalize_query({"accept": "14"})
    q = living.normalize_query({"model": "qwen3-8b", "hardware": "h100", "accept": "1"})
    assert q["model"] == "qwen3-8b"
    assert living.query_name(q) == "qwen3-8b-h100-sglang+native-ddtree-a1"
    rows = living.query_rows(multi_model_draws(), {**q, "gpus": 1, "method": "ar",
                                                   "engine": "vllm"}, seed=1)
    assert rows[0]["median"] == pytest.approx(1000 / (QWEN8_READ * 2 / 3.35 / 0.8 + 36 * 0.03))
    # a review: an AR query saved with a budget before that was refused is asked without it
    # (not "cannot answer" on every update)
    old = living.query_rows(multi_model_draws(), {**q, "gpus": 1, "method": "ar",
                                                  "engine": "vllm", "budget": 32}, seed=1)
    assert old[0]["median"] == rows[0]["median"] and old[0]["budget"] is None


def test_a_tracked_query_is_checked_as_it_is_asked():
    """track's checks (check_accept_limit, same_query) filled a query's flags from the
    bundled question when the fit holds several models, while query_rows asks the project's
    model (its first row's) about its own default: with a Llama EAGLE-3 block-4 chain first,
    `--accept 5.5` was saved (a block-16 DDTree emits 16) and then refused on every update
    (depth 4 emits at most 5); `--accept 5` and `--budget 4 --accept 5`, one question of
    the chain, were two tracked queries. One helper (asked_query) fills all three."""
    from ddtree_bayes.workflows import living
    from ddtree_bayes.workflows.living.tracking import same_query

    head, kimi_ar, kimi_dd, llama_ar = MULTI_DATA.splitlines(keepends=True)
    chain = "llama-3.1-8b-instruct,h100,1,vllm,eagle3,4,,5,2.79,,225,test,\n"
    draws = multi_model_draws().view(data_csv=head + llama_ar + chain + kimi_ar + kimi_dd)
    q = living.normalize_query({"accept": "5.5"})
    says = ("--accept 5.5 is above what eagle3 with block 4 can emit (at most 5 tokens per "
            "step: depth + 1 (block = depth))")
    with pytest.raises(QueryError, match=re.escape(says)):
        living.query_rows(draws, q, seed=1)
    with pytest.raises(QueryError, match=re.escape(says)):
        living.check_accept_limit(q, draws)
    a = living.normalize_query({"accept": "5"})
    assert same_query(a, {**a, "budget": 4}, draws)
    assert not same_query(a, {**a, "budget": 3}, draws)


def test_update_scores_a_row_of_a_model_never_measured(tmp_path):
    from ddtree_bayes.workflows import living

    path = tmp_path / "new.csv"
    # Qwen3-8B AR on one H100 at exactly its pair-roofline step: percentile 1/2 (no noise)
    step = QWEN8_READ * 2 / 3.35 / 0.8 + 36 * 0.03
    path.write_text(MULTI_DATA + f"qwen3-8b,h100,1,vllm,ar,,,1,1.0,,{1000 / step + 1e-9},t,\n")
    rows = load_measurements(path, HW).rows[-1:]
    (s,) = living.score_rows(multi_model_draws(noise_sd=0.03), list(rows), seed=1)
    assert s["model"] == "qwen3-8b" and s["status"] == "ok" and s["transferred"]
    assert s["percentile"] == pytest.approx(0.5, abs=1e-6)
    assert s["configuration"].startswith("qwen3-8b h100 x1 vllm ar")


# ------------------------------------------------------------------ a real fit (slow)
@pytest.mark.slow
def test_two_model_fit_converges_and_an_unmeasured_pair_is_wider(tmp_path):
    """Kimi K2.6 (bundled) + Llama-3.1-8B on one H100 (vLLM TPOT sweep) in one NUTS fit."""
    from ddtree_bayes import api

    (tmp_path / "data").mkdir()
    for name in ("hardware.csv", "seed_estimates.csv", "models.csv"):
        shutil.copy(bundled(name), tmp_path / "data" / name)
    repo = Path(__file__).resolve().parents[1]
    lines = (repo / "data" / "examples" / "public_multi_model.csv").read_text().splitlines()
    keep = [ln for ln in lines[1:] if ln.startswith(("kimi-k2.6,", "llama-3.1-8b-instruct,h100"))]
    (tmp_path / "data" / "measurements.csv").write_text("\n".join([lines[0], *keep]) + "\n")
    result = api.fit(workdir=tmp_path, progress=False)
    assert result.converged, result.failures
    draws = api.load(workdir=tmp_path)
    # (the corpus gained a Kimi K2.6 row on 8x H200 after this test was written)
    assert sorted(draws.meta["coords"]["system"]) == [
        "kimi-k2.6@b300x8", "kimi-k2.6@h200x8", "kimi-k2.6@rtx-pro-6000x8",
        "llama-3.1-8b-instruct@h100x1"]
    q = {"method": "ar", "engines": ["vllm"], "accept": "1"}
    measured = P.predict(draws, model="llama-3.1-8b-instruct", hardware="h100", **q)[0]
    assert 120 < measured["median"] < 165          # measured AR: 133-158 tok/s
    new = P.predict(draws, model="llama-3.1-8b-instruct", hardware="h200", gpus=1, **q)[0]
    assert (new["hi90"] / new["lo90"]) > 2 * (measured["hi90"] / measured["lo90"])
    assert "not measured: M = 1 step" in new["overhead_from"]


def test_a_fitted_step_faster_than_the_weights_can_be_read_is_said():
    """An exploratory pass: the corpus fit put Qwen3.8-27B's M = 1 step on one RTX 3090 (a pair
    with speculative rows only) at 12.9 ms, below the 14.4 ms its 13.5 GB take at 0.936 TB/s,
    and predict answered its AR rate (78 tok/s) without a word. Llama-3.1-8B on one H100 reads
    15.01 GB at 3.35 TB/s (its 8.03 B less the untied input embedding's 0.5253 B): 4.48 ms; a
    fitted 3 ms step is flagged, the 7 ms one is not."""
    from ddtree_bayes.engine.scenario import read_floor_warning

    def warning(step):
        d = multi_model_draws(step_ar_ms=[8.0, step])
        sc = P.resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="ar",
                                block=None, budget=None, verify_tokens=None, context_tokens=0.0,
                                model="llama-3.1-8b-instruct")
        return read_floor_warning(d, sc)

    assert warning(7.0) is None
    assert warning(3.0).startswith(
        "the fit's M = 1 step of llama-3.1-8b-instruct@h100x1 is shorter than reading "
        "llama-3.1-8b-instruct's active weights at the full bandwidth (4.48 ms, 2 bytes per "
        "weight) in 100% of its draws (median 3 ms)")
    # predict, next and optimize print memory_warnings
    from ddtree_bayes.engine.scenario import memory_warnings

    d = multi_model_draws(step_ar_ms=[8.0, 3.0])
    sc = P.resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="eagle3", block=3,
                            budget=None, verify_tokens=None, context_tokens=0.0,
                            model="llama-3.1-8b-instruct")
    assert memory_warnings(d, sc) == (warning(3.0),)


def test_the_read_floor_warning_names_the_measured_ar_row_it_cannot_be_pinned_by():
    """A user's own data (2026-12-05 session): Qwen3-30B-A3B's bf16 card on one RTX 4090 and
    one AR row at 150 tok/s (6.67 ms, 99.7% of reading the 3.3 B active weights' 6.6 GB at
    1.008 TB/s). predict said "an AR row measured there pins it" of a pair whose AR row was
    measured: the row is itself at the read, so the run read fewer bytes than the card's (a
    quantisation), which is the fix to give. Here Llama-3.1-8B on one H100 (read 4.48 ms) is
    measured at 141.44 tok/s (7.07 ms, row 4): a fitted 3 ms step names that row instead."""
    from ddtree_bayes.engine.scenario import read_floor_warning

    d = multi_model_draws(step_ar_ms=[8.0, 3.0])
    sc = P.resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="ar",
                            block=None, budget=None, verify_tokens=None, context_tokens=0.0,
                            model="llama-3.1-8b-instruct")
    line = read_floor_warning(d, sc)
    assert "pins it" not in line
    assert line.endswith(
        "its AR answers here are too fast and P(> AR) too low; its AR row measured there (row "
        "4: 141 tok/s, a 7.07 ms step) is slower than that read: the fit's step does not follow "
        "it (check the pair's other rows)")
    # the measured row itself within 5% of the read (4.48 ms: 220 tok/s, 4.55 ms) -> a
    # quantisation
    # a row faster than the read itself (4.48 ms: 250 tok/s is 4 ms) is said to be shorter
    line = read_floor_warning(d.view(data_csv=d.data_csv.replace(",141.44,", ",250,")), sc)
    assert "(row 4: 250 tok/s, a 4 ms step) is itself shorter than that read, which" in line
    assert d.data_csv.count(",141.44,") == 1
    line = read_floor_warning(d.view(data_csv=d.data_csv.replace(",141.44,", ",220,")), sc)
    assert line.endswith(
        "its AR answers here are too fast and P(> AR) too low; its AR row measured there (row "
        "4: 220 tok/s, a 4.55 ms step) is itself within 5% of that read, which no run reaches "
        "at the card's bytes: the deployment read fewer (a quantisation); give it its own card "
        "(`card add --gguf FILE`, or --bytes-per-weight) and name it with --model")


def test_a_pair_answered_faster_than_a_measured_one_that_reads_faster_is_said():
    """An exploratory pass: Kimi K2.6 on 8x H100, never measured, was answered faster than the
    measured 8x H200 (more bandwidth): the pair roofline has no model or GPU offset. Here
    Kimi's 8x H200 roofline is 16 GB / (8 x 4.8 TB/s) / 0.8 + 61 x (0.03 + 0.05) = 5.40 ms
    against the measured 8x B300's 8 ms (8 TB/s a GPU, same fabric class): said."""
    from ddtree_bayes.engine.scenario import faster_than_measured_warning

    d = multi_model_draws()

    def ask(model, hardware, gpus):
        return P.resolve_scenario(d, hardware=hardware, gpus=gpus, engine="sglang",
                                  method="ar", block=None, budget=None, verify_tokens=None,
                                  context_tokens=0.0, model=model)

    line = faster_than_measured_warning(d, ask("kimi-k2.6", "h200", 8))
    assert line.startswith("kimi-k2.6@h200x8 was never measured: its M = 1 step from the pair "
                           "roofline (median 5.4 ms) is shorter than the measured "
                           "kimi-k2.6@b300x8's (8 ms)")
    assert faster_than_measured_warning(d, ask("kimi-k2.6", "b300", 8)) is None   # measured
    assert faster_than_measured_warning(d, ask("kimi-k2.6", "h200", 16)) is None  # other count
    # Llama on one H200: its measured H100 reads slower, so no peer to compare with
    assert faster_than_measured_warning(d, ask("llama-3.1-8b-instruct", "h200", 1)) is None


def test_llama_cpp_on_several_gpus_says_its_layers_read_in_turn():
    """A new-user walkthrough: `predict --hardware rtx-5090 --gpus 2 --engine llama.cpp` gave a
    read floor and a step of two GPUs reading together, as tensor parallelism does; llama.cpp
    splits whole layers across GPUs by default, so at one stream they read in turn. Said until
    a llama.cpp row of that system is measured; nothing for one GPU or another engine."""
    from ddtree_bayes.engine.scenario import layer_split_warning

    d = multi_model_draws()

    def ask(engine, gpus, hardware="h100"):
        return P.resolve_scenario(d, hardware=hardware, gpus=gpus, engine=engine, method="ar",
                                  block=None, budget=None, verify_tokens=None,
                                  context_tokens=0.0, model="llama-3.1-8b-instruct")

    line = layer_split_warning(d, ask("llama.cpp", 2))
    assert line == (
        "llama.cpp on 2 GPUs: by default (--split-mode layer) each GPU holds whole layers and, "
        "at one stream, they read in turn, so their bandwidth does not add up; this answer's "
        "M = 1 step has the 2 GPUs read together, as tensor parallelism does (vLLM, SGLang, "
        "TensorRT-LLM), and may be up to 2x too fast (less with --split-mode row); a "
        "llama.cpp row measured on 2 x h100 pins it")
    # predict says it whichever engine is asked first (a review: `--engine vllm,llama.cpp`
    # said nothing)
    from ddtree_bayes.engine.question import Flags, resolve

    for engines in (("llama.cpp", "vllm"), ("vllm", "llama.cpp")):
        q = resolve(d, Flags(model="llama-3.1-8b-instruct", hardware="h100", gpus=2,
                             engines=engines, method="ar", accept="1"))
        assert line in q.warnings
    assert layer_split_warning(d, ask("llama.cpp", 1)) is None
    assert layer_split_warning(d, ask("vllm", 2)) is None
    d.measurements.rows[-1].__dict__.update(engine="llama.cpp", gpus=2)   # measured there
    assert layer_split_warning(d, ask("llama.cpp", 2)) is None


def test_a_context_cost_carried_from_another_models_rows_says_so():
    """A new-user walkthrough: a GQA model's 17-token tree at 32k lost 14 ms a step to context
    where its AR step lost 1.5 ms: the context cost grows as M ** ctx_verify_exponent, one
    exponent for every model, learned from Kimi K2.6's EAGLE-3 rows at context (MLA). predict
    said only that the per-token context cost was prior-driven. Now it says where the growth
    with the verified tokens comes from; nothing for AR, context 0, or the model's own rows."""
    from ddtree_bayes.engine.question import Flags, resolve

    ctx_row = "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.0,131072,250,test,\n"
    d = multi_model_draws().view(data_csv=MULTI_DATA + ctx_row)

    def said(fit, **flags):
        q = resolve(fit, Flags(**{"hardware": "h100", "gpus": 1, "engines": ("vllm",),
                                  "accept": "2", **flags}))
        return [w for w in q.warnings if "verified tokens" in w]

    llama = {"model": "llama-3.1-8b-instruct", "method": "eagle3", "block": 3}
    assert said(d, context="32768", **llama) == [
        "llama-3.1-8b-instruct at context 32768, M = 4 verified tokens: its context cost grows "
        "as M ** b with b = 0.5 (90% 0.5-0.5), learned from the rows at context > 0 of "
        "kimi-k2.6, not of llama-3.1-8b-instruct (another attention layout may share its KV "
        "reads among the verified tokens more, or less)"]
    # no speculative row at context anywhere: the prior's, said once the model measured a
    # context (else predict's context warning already says the context cost is the prior's)
    ar_ctx = "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,32768,120,test,\n"
    assert said(multi_model_draws().view(data_csv=MULTI_DATA + ar_ctx), context="32768",
                **llama) == [
        "llama-3.1-8b-instruct at context 32768, M = 4 verified tokens: its context cost grows "
        "as M ** b with b = 0.5 (90% 0.5-0.5), the prior's: the fit has no speculative row at "
        "context > 0 (prior-driven)"]
    assert said(multi_model_draws(), context="32768", **llama) == []
    assert said(d, context="0", **llama) == []
    assert said(d, context="32768", model="llama-3.1-8b-instruct", method="ar", accept="1") == []
    assert said(d, context="32768", model="kimi-k2.6", hardware="b300", gpus=8,
                engines=("sglang",), method="ddtree", block=8, budget=8) == []


def _drafter_dir(tmp_path: Path) -> Path:
    """:func:`_multi_dir` whose fit stores the built-in drafter cards (as a fit of the
    structured step does), and a drafter card for Llama-3.1-8B EAGLE-3 written after it (as
    `card add --hf-config <draft config> --target llama-3.1-8b-instruct` writes one): it takes
    over eagle3 from the built-in yuhuili/EAGLE3-LLaMA3.1-Instruct-8B."""
    import dataclasses

    from ddtree_bayes.core.drafters import drafter_table

    work = _multi_dir(tmp_path)
    draws = multi_model_draws(16, noise_sd=0.03)   # (`next` refuses a noiseless fit)
    draws.meta["model"]["drafter_cards"] = [
        {**dataclasses.asdict(d), "methods": list(d.methods)} for d in drafter_table()]
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                         work / "models" / "priors.toml", work / "data" / "hardware.csv",
                         draws=draws)
    head = bundled("drafters.csv").read_text().splitlines()[0]
    row = {"drafter": "my-eagle3", "target_model": "llama-3.1-8b-instruct", "method": "eagle3",
           "kind": "eagle3_head", "layers": "1", "params_b": "0.4247",
           "params_active_b": "0.4247", "lm_head_params_b": "0.1311", "bytes_per_weight": "2",
           "source": "me"}
    (work / "data" / "drafters.csv").write_text(
        head + "\n" + ",".join(row.get(c, "") for c in head.split(",")) + "\n")
    return work


CHANGED = ("the drafter cards my-eagle3, yuhuili/EAGLE3-LLaMA3.1-Instruct-8B here differ from "
           "fit 20260101T000000Z-pointmss's (changed, added or removed)")


def test_a_drafter_card_added_after_the_fit_is_said_only_where_it_bears(tmp_path):
    """The walkthrough: after `card add` of a Llama drafter, every predict and next (about
    Kimi, about AR decoding) warned that the card "differs from fit ...: re-run
    `ddtree-bayes fit` to use it", although no drafter card bears on those answers."""
    work = _drafter_dir(tmp_path)
    for argv in (["predict", "--model", "kimi-k2.6", "--accept", "12"],
                 ["predict", "--model", "llama-3.1-8b-instruct", "--hardware", "h100",
                  "--engine", "vllm", "--method", "ar", "--accept", "1"],
                 ["next", "--query", "--model kimi-k2.6 --hardware b300 --engine sglang "
                  "--method ddtree --block 16 --budget 32 --accept 12"]):
        code, out, err = run_cli(work, *argv)
        assert code == 0, err
        assert "drafter card" not in err, argv
    code, out, err = run_cli(work, "predict", "--model", "llama-3.1-8b-instruct", "--hardware",
                             "h100", "--engine", "vllm", "--method", "eagle3", "--block", "3",
                             "--accept", "2")
    assert code == 0, err
    (line,) = [ln for ln in err.splitlines() if "drafter card" in ln]
    assert line == (f"ddtree-bayes: warning: {CHANGED}: this answer prices llama-3.1-8b-"
                    "instruct's eagle3 passes with yuhuili/EAGLE3-LLaMA3.1-Instruct-8B as fit "
                    "20260101T000000Z-pointmss stored it (--drafter my-eagle3 prices them with "
                    "its card here); re-run `ddtree-bayes fit` to fit with the cards here")
    code, _, err = run_cli(work, "predict", "--model", "llama-3.1-8b-instruct", "--hardware",
                           "h100", "--engine", "vllm", "--method", "eagle3", "--block", "3",
                           "--accept", "2", "--strict")
    assert code == 4 and err.startswith(f"ddtree-bayes: error: {CHANGED}")


def test_a_question_with_drafter_says_its_card_here_prices_it(tmp_path):
    """`predict --drafter my-eagle3` priced its passes from the card here ("drafter my-eagle3:
    0.466 ms per pass at its roofline") under a warning that said the fit must be re-run to
    use that card."""
    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.scenario import drafter_card_changes

    work = _drafter_dir(tmp_path)
    draws = store.load_fit(store.resolve(work / "models"))
    llama = ("llama-3.1-8b-instruct", "eagle3")
    assert drafter_card_changes(draws, [llama], work, drafter="my-eagle3") == [
        f"{CHANGED}: this answer prices --drafter my-eagle3 with its card here, at the multiple "
        "of its roofline the fit learned with the cards it stored; re-run `ddtree-bayes fit` "
        "to fit with the cards here"]
    assert drafter_card_changes(draws, [("kimi-k2.6", "eagle3")], work) == []
    assert drafter_card_changes(draws, [("llama-3.1-8b-instruct", "ar")], work) == []
    # (update asks no question: every change counts)
    assert drafter_card_changes(draws, None, work) == [
        f"{CHANGED}: re-run `ddtree-bayes fit` to fit with the cards here"]


def test_update_does_not_count_a_drafter_card_of_a_model_the_fit_has_not(tmp_path,
                                                                         monkeypatch):
    """A drafter card written for Qwen3-8B (not a model of this Kimi K2.6 + Llama-3.1-8B fit)
    made `update` refit ("model or drafter cards changed since fit"), and every command
    checking the fit warn, though no answer of the fit (nor its likelihood) prices a Qwen3-8B
    drafter: a question about Qwen3-8B needs a refit on its rows anyway."""
    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.scenario import card_changes

    work = _drafter_dir(tmp_path)
    head = bundled("drafters.csv").read_text().splitlines()[0]
    row = {"drafter": "my-qwen-dflash", "target_model": "qwen3-8b", "method": "dflash",
           "kind": "dflash_block", "layers": "5", "params_b": "1.0", "params_active_b": "1.0",
           "lm_head_params_b": "0.6", "bytes_per_weight": "2", "source": "me"}
    (work / "data" / "drafters.csv").write_text(
        head + "\n" + ",".join(row.get(c, "") for c in head.split(",")) + "\n")
    draws = store.load_fit(store.resolve(work / "models"))
    assert card_changes(draws, work) == []
    from ddtree_bayes.engine import inference

    monkeypatch.setattr(inference, "inputs_sha256", lambda *a: fitted_inputs(work))  # up to date
    code, out, err = run_cli(work, "update")
    assert code == 0, err
    assert "is up to date" in out and "nothing to refit" in out
    assert "drafter card" not in out + err


#: (with the methods Llama's built-in drafter cards serve: the question that can be asked)
NO_LLAMA_DDTREE = ("no drafter card serves llama-3.1-8b-instruct's ddtree and the fit measured "
                   "none: there is no drafter to run it with (`ddtree-bayes card add` one; "
                   "llama-3.1-8b-instruct's drafter cards serve eagle "
                   "(yuhuili/EAGLE-LLaMA3.1-Instruct-8B), eagle3 "
                   "(yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): ask --method eagle or eagle3)")
#: A DDTree budget 32 on Llama's h100 x1, measured AR only (1 token a step).
LLAMA_M33 = ("at C = 1 a step verifies 33 tokens (C x M), more than any measured on "
             "llama-3.1-8b-instruct@h100x1 (at most 1): there the step's growth with M is the "
             "roofline's (compute knee, and for an MoE the distinct experts read): partly "
             "prior-driven")

#: the same tree on h200 x1, a pair never measured: from the pair roofline, learned from
#: kimi-k2.6@b300x8 (at most 9 tokens a step) and llama-3.1-8b-instruct@h100x1
LLAMA_H200_M33 = ("llama-3.1-8b-instruct@h200x1 has no measurements and its step is from the "
                  "pair roofline, learned from 2 measured pairs: at C = 1 a step verifies 33 "
                  "tokens (C x M), more than any measured across those pairs (at most 9, on "
                  "kimi-k2.6@b300x8): there the step's growth with M is the roofline's "
                  "(compute knee, and for an MoE the distinct experts read): partly "
                  "prior-driven")


def test_predict_of_a_model_measured_only_autoregressive_asks_its_own_system(multi_dir):
    """Llama-3.1-8B has one AR row, on one H100: `predict --model` asked the bundled 8x B300
    question (never measured for it) without a note, and failed with "no acceptance prior for
    ddtree block 16 budget 32 ..." naming neither the model nor the system it tried. Its fix
    named only --accept, which answers that DDTree question for a model no DFlash drafter
    serves (a new user's walk-through): it names asking the drafter's own method too."""
    code, out, err = run_cli(multi_dir, "predict", "--model", "llama-3.1-8b-instruct")
    assert (code, out) == (2, "")
    assert err == (
        "ddtree-bayes: error: no acceptance prior in the priors file and no measured "
        "acceptance for llama-3.1-8b-instruct, h100 x1, vllm, ddtree, block 16, budget 32, "
        "verify 33, context 0 (asked as the fit's default question: the fit never measured "
        "b300 for llama-3.1-8b-instruct, nor any speculative method for it: the bundled "
        "question's ddtree block 16 budget 32) (fix: pass --accept, or ask the method and shape "
        "your drafter runs, with the tokens a step emits, e.g. --method eagle3 --block 3 "
        "--accept 2.5:3.5; or add an [[acceptance]] entry to the priors)\n")
    code, out, err = run_cli(multi_dir, "predict", "--model", "llama-3.1-8b-instruct",
                             "--accept", "12")
    assert code == 0, err
    assert out.splitlines()[1] == ("llama-3.1-8b-instruct, h100 x1, ddtree, block 16, budget 32, "
                                   "verify 33 tokens, context 0")
    # in the engines that measured that system (vllm), not the bundled question's two: the
    # table between the dashes and its footnote is one row
    lines = out.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("tok/s, posterior"))
    assert [line.split()[0] for line in lines[4:end]] == ["vllm"]
    assert err == (   # (no drafter card serves Llama's DDTree: said as `next` says it)
        f"ddtree-bayes: warning: {NO_LLAMA_DDTREE}\n"
        f"ddtree-bayes: warning: {LLAMA_M33}\n"
        "ddtree-bayes predict: the fit never measured b300 for llama-3.1-8b-instruct, nor any "
        "speculative method for it: the bundled question's ddtree block 16 budget 32; asking "
        "its most-measured system: vllm ddtree block 16 budget 32 on h100 x1 (pass "
        "--hardware/--method/--block/--budget to ask another)\n")
    # a configuration given in full: the error names it, and no default question
    code, out, err = run_cli(multi_dir, "predict", "--model", "llama-3.1-8b-instruct",
                             "--hardware", "h100", "--engine", "vllm", "--method", "eagle",
                             "--block", "3")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: no acceptance prior in the priors file and no measured "
                   "acceptance for llama-3.1-8b-instruct, h100 x1, vllm, eagle, block 3, budget "
                   "3, verify 4, context 0 (fix: pass --accept, or add an [[acceptance]] entry "
                   "to the priors)\n")   # (a chain's budget is its depth)


def test_predict_naming_its_method_is_not_told_of_the_bundled_ddtree(multi_dir):
    """A walk-through (a new user's model measured autoregressively only): `predict --method
    eagle --block 3` with the GPU and engine filled from the fit's system failed with
    "(asked as the fit's default question: ..., nor any speculative method for it: the bundled
    question's ddtree block 16 budget 32)", a question it did not ask. The error says why the
    flags not given were filled, as the stderr note of an answered question does."""
    code, out, err = run_cli(multi_dir, "predict", "--model", "llama-3.1-8b-instruct",
                             "--method", "eagle", "--block", "3")
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: no acceptance prior in the priors file and no measured "
                   "acceptance for llama-3.1-8b-instruct, h100 x1, vllm, eagle, block 3, budget "
                   "3, verify 4, context 0 (asked as the fit's default question: the fit never "
                   "measured b300 for llama-3.1-8b-instruct) (fix: pass --accept, or add an "
                   "[[acceptance]] entry to the priors)\n")
    assert "block 16" not in err and " ddtree" not in err


def test_next_without_an_acceptance_names_the_query_for_it(multi_dir):
    """`next --query "--model gemma-3-27b-it"` on a model measured only autoregressively failed
    with predict's "(fix: pass --accept, ...)"; `next --accept 3` is then "unrecognized
    arguments": next takes --accept inside --query. Its error says so and names the query,
    as its other --query errors do; predict's stays as it was."""
    code, out, err = run_cli(multi_dir, "next", "--query", "--model llama-3.1-8b-instruct")
    assert (code, out) == (2, "")
    assert err == (
        "ddtree-bayes: error: --query: no acceptance prior in the priors file and no measured "
        "acceptance for llama-3.1-8b-instruct, h100 x1, vllm, ddtree, block 16, budget 32, "
        "verify 33, context 0 (asked as the fit's default question: the fit never measured "
        "b300 for llama-3.1-8b-instruct, nor any speculative method for it: the bundled "
        "question's ddtree block 16 budget 32) (fix: add --accept to the query, e.g. --query "
        "\"--model llama-3.1-8b-instruct --accept 3\", or add an [[acceptance]] entry to the "
        "priors)\n")
    # the query the fix names resolves (this point-mass fit has no noise for next to run on)
    from ddtree_bayes.engine.store import load
    from ddtree_bayes.workflows.decisions import parse_query

    query = parse_query(load(workdir=multi_dir), "--model llama-3.1-8b-instruct --accept 3")
    assert (query.accept, query.source.value) == ("3", 3.0)


def test_more_gpus_than_one_node_holds_is_warned(capsys):
    """A walkthrough: `predict --hardware h200 --gpus 1024` answered 1308 tok/s, exit 0,
    "transferred from b300x8 (same interconnect class)", pricing 1024 GPUs as one
    tensor-parallel group on NVLink. More than 8 GPUs of a system never measured are warned
    of; a count the fit measured on that GPU (b300 x 8) or one node's (8) is not."""
    from ddtree_bayes.engine.scenario import memory_warnings

    d = multi_model_draws()

    def ask(hardware, gpus):
        return P.resolve_scenario(d, hardware=hardware, gpus=gpus, engine="sglang",
                                  method="ar", block=None, budget=None, verify_tokens=None,
                                  context_tokens=0.0, model="kimi-k2.6")

    said = [w for w in memory_warnings(d, ask("b300", 16)) if "one node" in w]
    assert said == ["16 x b300 is more GPUs than one node holds (8): the answer prices them as "
                    "one tensor-parallel group on one interconnect, reading together; across "
                    "nodes the all-reduces cross the network, which the step model does not "
                    "price (the fit measured b300 on 8 GPUs)"]
    assert not [w for w in memory_warnings(d, ask("b300", 8)) if "one node" in w]
    assert not [w for w in memory_warnings(d, ask("h200", 8)) if "one node" in w]


def test_the_default_note_names_only_the_flags_it_filled(multi_dir):
    """Llama-3.1-8B measured AR only, on h100 x1 in vLLM: `predict --hardware h200 --method ar`
    said the bundled question's "ddtree block 16 budget 32 ... vllm ddtree block 16 budget 32
    on h100 x1" filled its flags, though only the engine came from the default. The line now
    names what was filled, with its values; a question naming every flag gets none."""
    base = ("ddtree-bayes predict: the fit never measured b300 for llama-3.1-8b-instruct")
    bundled_shape = (", nor any speculative method for it: the bundled question's ddtree "
                     "block 16 budget 32")
    for flags, why, filled in [
        (("--hardware", "h200", "--method", "ar"), "", "--engine vllm"),
        (("--method", "ar"), "", "--hardware h100 --gpus 1 --engine vllm"),
        (("--hardware", "h200"), bundled_shape,
         "--engine vllm --method ddtree --block 16 --budget 32"),
        (("--block", "8"), bundled_shape,
         "--hardware h100 --gpus 1 --engine vllm --method ddtree --budget 32")]:
        code, out, err = run_cli(multi_dir, "predict", "--model", "llama-3.1-8b-instruct",
                                 *flags, "--accept", "1")
        assert code == 0, err
        names = "/".join(w for w in filled.split() if w.startswith("--"))
        gap = f"ddtree-bayes: warning: {NO_LLAMA_DDTREE}\n" if why else ""   # (a ddtree)
        if why and "--hardware" not in flags:   # (its tree on the h100 measured AR only)
            gap += f"ddtree-bayes: warning: {LLAMA_M33}\n"
        elif why:   # (on the h200, never measured: past every pair the roofline learned from)
            gap += f"ddtree-bayes: warning: {LLAMA_H200_M33}\n"
        assert err == (f"{gap}{base}{why}; the flags not given come from its most-measured system: "
                       f"{filled} (pass {names} to ask another)\n"), flags
    code, out, err = run_cli(multi_dir, "predict", "--model", "llama-3.1-8b-instruct",
                             "--hardware", "h200", "--method", "ar", "--engine", "vllm",
                             "--accept", "1")
    assert code == 0 and err == ""


def test_a_blank_context_is_the_fits_default_when_a_verify_cost_is_learned():
    """verify_context_warnings read a blank context_tokens as 0 where the fit reads it as the
    priors' default_context_tokens (Measurement.context): with the default at 8192, a Llama
    EAGLE-3 row left blank is a speculative row at context 8192, so Kimi's tree at 16384
    learns its M ** b from Llama's row; the warning said the exponent was the prior's."""
    from ddtree_bayes.engine.question import verify_context_warnings

    head = MULTI_DATA.splitlines(keepends=True)[0]
    data = (head + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,4096,133,test,\n"
            "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,0,303,test,\n"
            "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,141.44,test,\n"
            "llama-3.1-8b-instruct,h100,1,vllm,eagle3,4,,5,2.79,,225,test,\n")
    draws = multi_model_draws()
    meta = {**draws.meta, "model": {**draws.meta["model"], "default_context_tokens": 8192.0}}
    draws = draws.view(data_csv=data, meta=meta)
    sc = P.resolve_scenario(draws, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=8, budget=8, verify_tokens=None, context_tokens=16384.0,
                            model="kimi-k2.6")
    (line,) = verify_context_warnings(draws, sc)
    assert line.startswith("kimi-k2.6 at context 16384, M = 9 verified tokens: its context "
                           "cost grows as M ** b with b = ")
    assert line.endswith("learned from the rows at context > 0 of llama-3.1-8b-instruct, not "
                         "of kimi-k2.6 (another attention layout may share its KV reads among "
                         "the verified tokens more, or less)")


def test_a_speculative_question_on_an_amd_gpu_the_fit_never_measured_says_so():
    """A held-out collection (docs/validation.md, "A third held-out collection"): on AMD rigs
    every speculative row ran slower than predicted from its own AR row (8-139%), the
    overhead coming from CUDA deployments. A speculative question on an AMD GPU of a fit
    with no speculative row on one says so, in predict's warnings, even when it measured the
    AMD GPU at AR (the held-out pairs' own shape); AR, an NVIDIA GPU, or a fit with an AMD
    speculative group say nothing."""
    from dataclasses import replace

    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.engine.structure import amd_overhead_warning

    d = multi_model_draws()

    def ask(hardware, method="eagle", gpus=1):
        return P.resolve_scenario(d, hardware=hardware, gpus=gpus, engine="vllm", method=method,
                                  block=3 if method != "ar" else None, budget=None,
                                  verify_tokens=None, context_tokens=0.0,
                                  model="llama-3.1-8b-instruct")

    line = amd_overhead_warning(d, ask("mi300x"))
    assert line is not None and line.startswith(
        "mi300x is an AMD GPU and the fit measured no speculative row on one")
    assert "by 8-139% (median 39%)" in line
    # the in-repo MI325X SGLang sweep ran faster than so predicted: not "likely optimistic"
    assert "an MI325X SGLang deployment ran faster" in line and "optimistic" not in line
    q = resolve(d, Flags(model="llama-3.1-8b-instruct", hardware="mi300x", gpus=1,
                         engines=("vllm",), method="eagle", block=3, accept="2"))
    assert line in q.warnings
    assert amd_overhead_warning(d, ask("mi300x", method="ar")) is None
    assert amd_overhead_warning(d, ask("h200")) is None
    lines = d.hardware_csv.splitlines()
    (i,) = [k for k, row in enumerate(lines) if row.startswith("h100,")]
    lines[i] = lines[i].replace(",9.0,", ",gfx942,", 1)   # the measured H100 read as AMD
    assert lines[i] != d.hardware_csv.splitlines()[i]
    amd = d.view(hardware_csv="\n".join(lines) + "\n")
    # an AMD system measured: its AR rows say nothing of a speculative step on AMD (the
    # held-out pairs' own shape: AR measured on the rig, speculation asked); still warned
    assert amd_overhead_warning(amd, ask("mi300x")) == line
    # a speculative group on an AMD GPU: the fit's AMD term learned from it, no warning
    learned = replace(amd, meta={**amd.meta, "model": {**amd.meta["model"],
                                                                   "group_amd": [True]}},
                                  memo={})
    assert amd_overhead_warning(learned, ask("mi300x")) is None


def test_the_amd_warning_names_the_amd_factor_only_where_the_answer_carries_it():
    """A fit made before the AMD term (2f259a7), or with a priors file without its priors,
    or of the fraction step form (which has no overhead groups to carry it), prices an AMD
    question with no AMD factor (engine/structure.amd_log_effect: 0), yet the warning said
    the overhead was "priced from CUDA deployments times a prior-driven AMD factor centred on
    1". It now says so only where the answer carries it, and otherwise why it has none."""
    import re

    from ddtree_bayes.engine.structure import amd_log_effect, amd_overhead_warning

    fraction = multi_model_draws()   # (the fraction step form: no AMD term at all)
    d = fraction.view(meta={**fraction.meta, "model": {**fraction.meta["model"],
                                                         "step_form": "structured"}})
    sc = P.resolve_scenario(d, hardware="mi300x", gpus=1, engine="vllm", method="eagle",
                            block=3, budget=None, verify_tokens=None, context_tokens=0.0,
                            model="llama-3.1-8b-instruct")
    assert "times a prior-driven AMD factor centred on 1" in amd_overhead_warning(d, sc)
    line = amd_overhead_warning(fraction, sc)
    assert "AMD factor" not in line
    assert ("priced from CUDA deployments with no AMD term (the fit's fraction step form has "
            "none)") in line
    old = d.view(priors_toml=re.sub(r"\[priors\.spec_amd_[a-z_]+\][^\[]*", "", d.priors_toml))
    assert "spec_amd" not in old.priors_toml
    assert amd_log_effect(old, "mi300x", "vllm", np.random.default_rng(0)) == 0.0
    line = amd_overhead_warning(old, sc)
    assert line.startswith("mi300x is an AMD GPU and the fit measured no speculative row on one")
    assert "AMD factor" not in line
    assert ("priced from CUDA deployments with no AMD term (the fit's priors have no "
            "spec_amd_log_mu: a fit made before it, or a priors file without it)") in line

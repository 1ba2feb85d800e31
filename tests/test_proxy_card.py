"""A fit of a model without a card (issue 21, core/proxy_card.py): the proxy card by hand, what
reading the inputs does with it, and end to end a three-row sweep of a cardless model on an
RTX 4090 fitted and asked within the sweep (a tiny sampler: the numbers checked are the card's
and the coverage of the measured rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtree_bayes.core.data import Measurement, Measurements
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.proxy_card import PROXY_LAYERS, describe, proxy_card
from ddtree_bayes.engine import store
from ddtree_bayes.engine.fitting import FitInputs
from test_cli_support import run_cli

HW = {"rtx-4090": {"hardware": "rtx-4090", "mem_bw_tb_s": "1.008", "interconnect": "PCIe Gen4"},
      "h100": {"hardware": "h100", "mem_bw_tb_s": "3.35", "interconnect": "NVLink4 0.9 TB/s"}}
CONST = {"bw_eff": 0.63, "layer_ms": 0.03, "allreduce_fabric_ms": 0.05, "allreduce_pcie_ms": 0.1}
HEADER = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
          "context_tokens,tok_s,source,notes\n")
SWEEP = ("my-model,rtx-4090,1,llama.cpp,ar,,,1,1.0,0,52.1,HYPOTHETICAL bench,\n"
         "my-model,rtx-4090,1,llama.cpp,mtp,2,2,3,2.4,0,98.0,HYPOTHETICAL bench,\n"
         "my-model,rtx-4090,1,llama.cpp,mtp,4,4,5,3.1,0,112.0,HYPOTHETICAL bench,\n")


def m(row, method="ar", tok_s=50.0, *, hardware="rtx-4090", gpus=1, ctx=0, accept=1.0,
      block=None, model="my-model") -> Measurement:
    verify = 1 if method == "ar" else block + 1
    return Measurement(row, model, hardware, gpus, "vllm", method, block, block, verify, accept,
                       ctx, tok_s, "s", "")


def data(*rows) -> Measurements:
    return Measurements("mine.csv", "", tuple(rows))


def test_the_step_is_the_lowest_context_median_on_the_most_measured_system():
    rows = [m(2, tok_s=40.0, ctx=8192), m(3, tok_s=50.0), m(4, tok_s=40.0),   # 4090: 3 AR rows
            m(5, hardware="h100", gpus=8, tok_s=100.0), m(6, "mtp", 90.0, block=3, accept=2.5)]
    p = proxy_card(data(*rows), HW, **CONST)
    # lowest context on the 4090: rows 3 and 4, median of 20 and 25 ms
    assert p.rows == (3, 4) and p.system == "rtx-4090x1" and not p.upper_bound
    assert p.step_ms == pytest.approx(22.5)
    # one GPU: per layer 0.03 ms; (22.5 - 40 x 0.03) x 0.63 x 1.008 TB/s / 2 B per weight
    assert p.card.params_active_b == pytest.approx((22.5 - 1.2) * 0.63 * 1.008 / 2)
    assert (p.card.experts, p.card.layers, p.card.bytes_per_weight) == (None, PROXY_LAYERS, 2.0)
    assert p.card.source.startswith("PROXY: inferred from mine.csv row(s) 3, 4")


def test_a_multi_gpu_step_pays_the_all_reduce_and_a_tiny_step_is_floored():
    p = proxy_card(data(m(2, hardware="h100", gpus=8, tok_s=100.0)), HW, **CONST)
    # NVLink: 0.03 + 0.05 ms per layer; (10 - 40 x 0.08) x 0.63 x 3.35 x 8 / 2
    assert p.card.params_active_b == pytest.approx((10 - 3.2) * 0.63 * 3.35 * 8 / 2)
    # 2 ms < 40 layers x 0.08 ms: half the step streams
    p = proxy_card(data(m(2, hardware="h100", gpus=8, tok_s=500.0)), HW, **CONST)
    assert p.card.params_active_b == pytest.approx(1.0 * 0.63 * 3.35 * 8 / 2)


def test_without_ar_the_fastest_speculative_step_bounds_it_and_latent_rows_give_none():
    rows = [m(2, "mtp", 90.0, block=3, accept=2.7), m(3, "mtp", 100.0, block=5, accept=3.5)]
    p = proxy_card(data(*rows), HW, **CONST)
    assert p.upper_bound and p.rows == (2,) and p.step_ms == pytest.approx(30.0)
    assert "bounded by the fastest speculative step (30 ms" in describe(p.as_meta())
    latent = [m(2, "mtp", 90.0, block=3, accept=None)]
    assert proxy_card(data(*latent), HW, **CONST) is None


def test_reading_the_inputs_makes_the_proxy_only_for_a_model_without_a_card(tmp_path):
    (tmp_path / "mine.csv").write_text(HEADER + SWEEP)
    inputs = FitInputs.read(tmp_path / "mine.csv", workdir=tmp_path)
    assert inputs.proxy is not None and inputs.proxy["rows"] == [2]
    assert inputs.cards["my-model"].source.startswith("PROXY")
    assert inputs.proxy["step_ms"] == pytest.approx(1000 / 52.1)
    assert "--name my-model" in inputs.proxy["fix"]
    known = SWEEP.replace("my-model", "qwen3.8-27b")
    (tmp_path / "known.csv").write_text(HEADER + known)
    assert FitInputs.read(tmp_path / "known.csv", workdir=tmp_path).proxy is None
    # several models: each needs its card (a proxy would count the data twice)
    (tmp_path / "two.csv").write_text(HEADER + SWEEP + known)
    with pytest.raises(DataError, match="no model card for 'my-model'") as err:
        from ddtree_bayes.core import spec as S

        inputs = FitInputs.read(tmp_path / "two.csv", workdir=tmp_path)
        S.build_spec(inputs.measurements, inputs.priors, **inputs.structure())
    assert "ddtree-bayes card add --hf-config" in str(err.value.fix)


@pytest.mark.nuts
def test_a_cardless_sweep_on_an_rtx_4090_fits_and_predicts_within_it(tmp_path: Path):
    (tmp_path / "mine.csv").write_text(HEADER + SWEEP)
    code, out, err = run_cli(tmp_path, "fit", "--data", "mine.csv", "--quiet", "--chains", "2",
                             "--draws", "300", "--tune", "300", "--no-remedy")
    assert code in (0, 5), err
    (note,) = [line for line in err.splitlines() if "proxy card" in line]
    assert note.startswith("ddtree-bayes: note: no model card for 'my-model': a proxy card "
                           "from the measured AR step (19.2 ms on rtx-4090x1, row 2")
    meta = store.load_meta(store.resolve(tmp_path / "models"))
    assert meta["model"]["proxy_card"]["rows"] == [2]
    assert meta["model"]["card"]["source"].startswith("PROXY")
    for block, accept, measured in ((2, 2.4, 98.0), (4, 3.1, 112.0)):
        code, out, err = run_cli(tmp_path, "predict", "--hardware", "rtx-4090", "--engine",
                                 "llama.cpp", "--method", "mtp", "--block", str(block),
                                 "--accept", str(accept), "--format", "json",
                                 "--allow-unconverged")
        assert code == 0, err
        (row,) = json.loads(out)["rows"]
        assert row["lo90"] < measured < row["hi90"]
        assert row["hi90"] / row["lo90"] < 1.4          # pinned by the sweep, not by a card
    code, out, err = run_cli(tmp_path, "predict", "--hardware", "rtx-5090", "--engine",
                             "llama.cpp", "--method", "mtp", "--block", "3", "--accept", "2.8",
                             "--allow-unconverged")
    assert code == 0, err
    assert "the model card is a proxy, so weaker" in out

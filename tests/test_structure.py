"""The structured step (issue 10): model cards, peak FLOPs, the [methods] table, the roofline
verify cost, structured SPEC, the distance-scaled discrepancy, and the extrapolation split.
Numbers are computed by hand here; no sampling."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.errors import DataError, PriorsError
from ddtree_bayes.core.model_cards import ModelCard, flop_ms_per_token, load_model_cards, peak_tflops
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.workflows import extrapolation as X

REPO = Path(__file__).resolve().parents[1]
PRIORS = bundled("priors.toml").read_text()
STRUCTURED = X.with_forms(PRIORS, "roofline", "structured")
KIMI = ModelCard("kimi-k2.6", 1000, 32, 61, 384, 8, 0.5, "bf16", "s")


# ------------------------------------------------------------------ model cards and FLOPs
def test_bundled_cards_cover_the_bundled_model_and_the_corpus():
    cards = load_model_cards(bundled("models.csv"))
    assert cards["kimi-k2.6"].is_moe and cards["kimi-k2.6"].experts_topk == 8
    assert not cards["llama-3.1-8b-instruct"].is_moe
    models = {line.split(",")[1] for f in (REPO / "data" / "public").glob("*.csv")
              if f.name != "hardware_flops.csv" for line in f.read_text().splitlines()[1:]}
    assert models <= set(cards)


def test_distinct_experts_by_hand():
    m = np.array([1.0, 2.0, 9.0])
    expected = [1.0, 384 * (1 - (1 - 8 / 384) ** 2) / 8, 384 * (1 - (1 - 8 / 384) ** 9) / 8]
    assert KIMI.distinct_ratio(m) == pytest.approx(expected)
    dense = ModelCard("d", 8, 8, 32, None, None, 2, "bf16", "s")
    assert dense.distinct_ratio(m).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(("edit", "column"), [
    (lambda t: t.replace("compute_dtype", "dtype", 1), "compute_dtype"),
    (lambda t: re.sub(r"(?m)^(kimi-k2\.6,1000,)32,", r"\g<1>2000,", t), "params_active_b"),
    (lambda t: re.sub(r"(?m)^(kimi-k2\.6,1000,32,61,7168,384,)8,", r"\1,", t), "experts_topk"),
    (lambda t: re.sub(r"(?m)^(kimi-k2\.6,(?:[^,]*,){8})bf16", r"\1int3", t), "compute_dtype"),
])
def test_bad_model_cards_name_the_column(edit, column):
    text = edit(bundled("models.csv").read_text())
    with pytest.raises(DataError) as err:
        load_model_cards("models.csv", text=text)
    assert err.value.column == column


def test_peak_flops_own_entry_derived_and_fallback():
    hw = load_hardware(bundled("hardware.csv"))
    assert peak_tflops(hw["b300"], "bf16")[0] == 2250
    value, how = peak_tflops(hw["rtx-pro-6000"], "bf16")   # only an fp4 entry
    assert value == 500 and "derived from fp4" in how
    value, how = peak_tflops(hw["rtx-pro-6000-server"], "bf16")   # no entry at all
    assert value == pytest.approx(1.597 * 200) and "prior-driven" in how
    value, how = peak_tflops({"hardware": "g", "mem_bw_tb_s": "1", "dense_int8_tflops": "400"},
                             "bf16")   # an int8 entry alone says nothing of bf16
    assert value == pytest.approx(200.0) and "prior-driven" in how
    # Kimi K2.6 on 8x B300: 2 x 32e9 FLOPs / (2250e12 x 8) = 3.556 us per token
    ms, _ = flop_ms_per_token(KIMI, hw["b300"], 8)
    assert ms == pytest.approx(2 * 32e9 / (2250e12 * 8) * 1e3)


# ------------------------------------------------------------------ the [methods] table
def test_methods_table_parses():
    cfg = parse_priors(STRUCTURED)
    assert cfg.step_form == "structured" and cfg.moe_form == "roofline"
    assert cfg.methods["ddtree"].draft_passes(16, 32) == 1
    assert cfg.methods["ddtree"].tree_nodes(16, 32) == 32
    assert cfg.methods["eagle3"].draft_passes(3, 3) == 3
    assert cfg.methods["eagle3"].tree_nodes(3, 3) == 0
    assert cfg.methods["eagle3"].tree_nodes(8, 63) == 63


@pytest.mark.parametrize(("old", "new", "column"), [
    ('passes = 1\ntree = true\ndepth = "block - 1"\nrationale = "DDTree',
     'passes = -1\ntree = true\ndepth = "block - 1"\nrationale = "DDTree', "methods.ddtree.passes"),
    ('passes = 1\ntree = true\ndepth = "block - 1"\nrationale = "DDTree',
     'passes = 1\ntree = "yes"\ndepth = "block - 1"\nrationale = "DDTree', "methods.ddtree.tree"),
    ('passes = 1\ntree = true\ndepth = "block - 1"\nrationale = "DDTree',
     'passes = 1\ntree = true\ndepth = 16\nrationale = "DDTree', "methods.ddtree.depth"),
    ('step_form = "structured"', 'step_form = "fractional"', "model.step_form"),
])
def test_bad_methods_or_forms_are_errors(old, new, column):
    assert old in STRUCTURED
    with pytest.raises(PriorsError) as err:
        parse_priors(STRUCTURED.replace(old, new, 1))
    assert err.value.column == column


def test_structured_form_needs_its_priors_and_methods():
    no_methods = STRUCTURED[: STRUCTURED.index("[methods.eagle]")]
    with pytest.raises(PriorsError, match="needs a \\[methods"):
        parse_priors(no_methods.rsplit("# How each speculative method drafts", 1)[0])
    no_tau = re.sub(r"\[priors\.structure_sd\][^\[]*", "", STRUCTURED)
    with pytest.raises(PriorsError) as err:
        parse_priors(no_tau)
    assert err.value.column == "priors.structure_sd"


# ------------------------------------------------------------------ the spec
@pytest.fixture(scope="module")
def structured_spec():
    cfg = parse_priors(STRUCTURED)
    hw = load_hardware(bundled("hardware.csv"))
    data = load_measurements(bundled("measurements.csv"), hw)
    return S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv"))), cfg


def test_spec_arrays_by_hand(structured_spec):
    spec, _ = structured_spec
    # rows: B300 AR, B300 DDTree b8 (M=9), 5 PRO 6000 AR, 2 PRO 6000 Eagle3 k=3 (M=4)
    assert spec.row_passes.tolist() == [0, 1, 0, 0, 0, 0, 0, 3, 3]
    assert spec.row_nodes.tolist() == [0, 8, 0, 0, 0, 0, 0, 0, 0]
    # each speculative group was measured at one configuration: neither its passes nor its
    # tree nodes vary, so the data cannot split them from its fixed cost
    assert spec.group_passes_vary.tolist() == [False, False]
    assert spec.group_nodes_vary.tolist() == [False, False]
    assert spec.row_distinct[1] == pytest.approx(384 * (1 - (1 - 8 / 384) ** 9) / 8)
    b300 = spec.systems.index("b300x8")
    # 2 x 32e9 FLOPs a token (Kimi's 32 B leave the input embedding out: embed_params_b 0)
    assert spec.system_flop_ms[b300] == pytest.approx(2 * 32e9 / (2250e12 * 8) * 1e3)
    # B300 DDTree row: nearest other B300 configuration is AR (M=1, 0 passes)
    assert spec.row_distance[1] == pytest.approx(max(math.log(9), math.log(2)))
    # Eagle3 k=3 rows: nearest other PRO 6000 configuration is AR: max(log 4, log 4)
    assert spec.row_distance[7] == pytest.approx(math.log(4))
    # an AR row at another context has the same configuration as its AR siblings: its
    # nearest *different* configuration is Eagle3 (M=4, 3 passes)
    assert spec.row_distance[2] == pytest.approx(math.log(4))


def test_model_meta_carries_what_predict_needs(structured_spec):
    spec, cfg = structured_spec
    meta = S.model_meta(spec, cfg)
    assert meta["step_form"] == "structured" and meta["card"]["experts"] == 384
    assert meta["methods"]["ddtree"] == {"passes": 1, "tree": True}
    assert set(meta["system_flop_ms"]) == {"b300x8", "rtx-pro-6000x8"}


# ------------------------------------------------------------------ the extrapolation split
class _Row:
    def __init__(self, method, verify, block):
        self.method, self.verify_tokens, self.block = method, verify, block


def test_hold_out_takes_the_largest_third_per_method():
    rows = [_Row("ar", 1, None)] + [_Row("mtp", k + 1, k) for k in range(1, 7)] \
        + [_Row("eagle", 3, 2), _Row("eagle", 4, 3)]
    # mtp: 6 configurations -> the 2 largest (k = 5, 6); eagle: only 2 -> none held out
    assert X.hold_out(rows) == (5, 6)


def test_with_forms_sets_both_forms():
    text = X.with_forms(PRIORS, "roofline", "structured")
    cfg = parse_priors(text)
    assert (cfg.moe_form, cfg.step_form) == ("roofline", "structured")
    assert parse_priors(X.with_forms(text, "power", "fraction")).step_form == "fraction"


def test_scores_by_hand():
    rows = [{"measured": 100.0, "median": 110.0, "lo50": 105, "hi50": 115, "lo90": 95,
             "hi90": 125, "baseline": 90.0},
            {"measured": 200.0, "median": 190.0, "lo50": 185, "hi50": 199, "lo90": 180,
             "hi90": 210, "baseline": 260.0}]
    s = X.scores(rows)
    assert s["coverage90"] == 1.0 and s["coverage50"] == 0.0
    assert s["bias"] == pytest.approx((0.10 - 0.05) / 2)
    assert s["mae"] == pytest.approx((0.10 + 0.05) / 2)
    assert s["width90"] == pytest.approx((30 / 110 + 30 / 190) / 2)
    b = X.scores(rows, baseline=True)
    # 90 +-30% = 63..117 covers 100; 260 +-30% = 182..338 covers 200
    assert b["coverage90"] == 1.0 and b["bias"] == pytest.approx((-0.1 + 0.3) / 2)


def test_attainability_by_hand():
    """One held-out row, median 100: predictive draws whose errors 100 / y - 1 are 0, -2.0%,
    +2.6%, -9.1%, +11.1%: 3 of 5 meet |bias| <= 3% and mae <= 5%. Measured 104: the observed
    bias -3.8% sits above one predictive bias of five. No noise: the oracle always meets both."""
    rng = np.random.default_rng(0)
    samples = np.array([[100.0, 102.0, 97.5, 110.0, 90.0]])
    a = X.attainability(samples, np.array([100.0]), np.array([104.0]), np.zeros(5), rng)
    assert a["p_bias"] == pytest.approx(0.6) and a["p_mae"] == pytest.approx(0.6)
    assert a["bias_percentile"] == pytest.approx(0.2)
    assert a["noise_p_bias"] == 1.0 and a["noise_p_mae"] == 1.0


def test_attainability_oracle_matches_the_normal():
    """Run-to-run sd 3% on log tok/s: one row meets |exp(-e) - 1| <= 3% when
    -log(1.03) <= e <= -log(0.97), i.e. with probability Phi(1.0152) - Phi(-0.9853) = 0.682;
    the mean of two rows' errors is about -mean(e), sd 3% / sqrt 2: 2 Phi(1.414) - 1 = 0.843."""
    from statistics import NormalDist

    n, sd = 200_000, 0.03
    phi = NormalDist().cdf
    one = phi(-math.log(0.97) / sd) - phi(-math.log(1.03) / sd)
    rng = np.random.default_rng(1)
    a1 = X.attainability(np.full((1, n), 100.0), np.array([100.0]), np.array([100.0]),
                         np.full(n, sd), rng)
    assert a1["noise_p_bias"] == pytest.approx(one, abs=0.005)
    assert one == pytest.approx(0.682, abs=0.002)
    a2 = X.attainability(np.full((2, n), 100.0), np.full(2, 100.0), np.full(2, 100.0),
                         np.full(n, sd), rng)
    assert a2["noise_p_bias"] == pytest.approx(0.843, abs=0.006)


def test_public_sweeps_load_and_split():
    files = [f for f in sorted((REPO / "data" / "public").glob("*.csv"))
             if f.name != "hardware_flops.csv"]
    sweeps, notes = X.load_sweeps(files, bundled("hardware.csv").read_text())
    names = {s.name for s in sweeps}
    assert {"vllm-eagle-llama31-8b-h100-tpot", "llamacpp-mtp-qwen38-27b-rtx5090",
            "trtllm-mtp-deepseek-r1-b200x8"} <= names
    assert all(s.held_out for s in sweeps)
    assert any("sglang-eagle3-llama33-70b" in n for n in notes)


def test_a_sweep_keeps_its_rows_when_one_tree_row_has_no_size():
    # the SGLang Llama-3.1-8B sweep's EAGLE-2 row gives its depth (block 8) but not how many
    # draft tokens it verified: that row is left out, and the sweep's other rows stay usable
    path = REPO / "data" / "public" / "sglang_eagle_llama31_8b_h100.csv"
    found, notes = X.usable_sweeps([path], bundled("hardware.csv").read_text())
    assert notes == []
    [(name, _, _, data, lacking, total)] = found
    assert name == "sglang-eagle-llama31-8b-h100" and (lacking, total) == (3, 6)
    assert [(r.method, r.block, r.verify_tokens) for r in data.rows] == [
        ("ar", None, 1), ("eagle3", 5, 6), ("eagle3", 8, 9)]


def test_every_shipped_csv_row_has_its_header_width():
    """The MTP-vanilla sweep shipped with an unquoted comma in `derived`: its notes went to a
    field with no name, silently (pandas shifted every column: accept_len read 1024)."""
    import csv

    for path in sorted((REPO / "data").rglob("*.csv")):
        with open(path, newline="", encoding="utf-8-sig") as fh:
            widths = {len(row) for row in csv.reader(fh)}
        assert len(widths) == 1, f"{path}: rows of {sorted(widths)} fields"


def test_a_sweep_row_with_an_unquoted_comma_is_refused(tmp_path):
    header = "sweep," + ",".join(X.COLUMNS)
    good = "s,kimi-k2.6,b300,8,sglang,ar,,,1,1,,133,src,"
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{header}\n{good}\n{good}, a note, with commas\n")
    with pytest.raises(DataError) as err:
        X.load_sweeps([bad], bundled("hardware.csv").read_text())
    assert str(err.value) == (f"{bad}, row 3: 16 fields where the header has 14 (fix: quote a "
                              'cell that holds a comma ("a, b"), or fill the missing cells)')


def test_a_sweep_file_named_twice_or_a_sweep_in_two_files_is_refused(tmp_path):
    """`validate --extrapolate --sweeps A A` (an overlapping shell glob) fitted A twice and
    pooled its rows twice; two files holding the same sweep name were scored as one sweep,
    each printed with the other's numbers."""
    src = REPO / "data" / "public" / "lucebox_ddtree_qwen35_27b_rtx3090_budget.csv"
    hw = bundled("hardware.csv").read_text()
    assert len(X.load_sweeps([src], hw)[0]) == 1
    with pytest.raises(DataError) as err:
        X.load_sweeps([src, Path(str(src).replace("/data/", "/data/public/../"))], hw)
    assert "named twice" in str(err.value) and "fix:" in str(err.value)
    copy = tmp_path / "copy.csv"
    copy.write_text(src.read_text())
    with pytest.raises(DataError) as err:
        X.load_sweeps([src, copy], hw)
    message = str(err.value)
    assert message.startswith(f"{copy}, column 'sweep': ") and str(src) in message
    assert "lucebox-ddtree-qwen35-27b-rtx3090-budget" in message and "fix:" in message


def test_a_chain_sweep_measures_its_pass_cost_a_tree_sweep_its_node_cost():
    """Which ratios the data can tell from the fixed cost: a chain measured at several depths
    varies its passes; a DDTree budget sweep varies its tree nodes but not its single pass."""
    hw = load_hardware(bundled("hardware.csv"))
    cfg = parse_priors(STRUCTURED)
    cards = load_model_cards(bundled("models.csv"))
    sweeps, _ = X.load_sweeps([REPO / "data/public/vllm_eagle_llama31_8b_h100_tpot.csv",
                               REPO / "data/public/vllm_ddtree_qwen38_27b_rtxa6000_budget.csv"],
                              bundled("hardware.csv").read_text())
    chain, tree = (load_measurements(s.path, hw, text=s.data_csv) for s in sweeps)
    spec = S.build_spec(chain, cfg, hardware=hw, cards=cards)
    assert spec.groups == ("h100x1/vllm/eagle", "h100x1/vllm/eagle3")
    assert spec.group_passes_vary.tolist() == [True, True]      # K = 2..7
    assert spec.group_nodes_vary.tolist() == [False, False]     # chains: no tree
    spec = S.build_spec(tree, cfg, hardware=hw, cards=cards)
    assert spec.groups == ("rtx-a6000x1/vllm/dflash", "rtx-a6000x1/vllm/ddtree")
    assert spec.group_passes_vary.tolist() == [False, False]    # one block-drafter pass
    assert spec.group_nodes_vary.tolist() == [False, True]      # budgets 8..32


def test_held_out_rows_are_not_measured_configurations():
    """A validation fold recomputes the discrepancy distances and the 'varies' masks from its
    training rows: the held-out deepest MTP configurations do not count as neighbours."""
    hw = load_hardware(bundled("hardware.csv"))
    (sweep,), _ = X.load_sweeps([REPO / "data/public/llamacpp_mtp_qwen38_27b_rtx5090.csv"],
                                bundled("hardware.csv").read_text())
    data = load_measurements(sweep.path, hw, text=sweep.data_csv)
    spec = S.build_spec(data, parse_priors(STRUCTURED), hardware=hw,
                        cards=load_model_cards(bundled("models.csv")))
    measured = np.ones(len(data.rows), dtype=bool)
    measured[list(sweep.held_out)] = False            # MTP k = 5, 6 (M = 6, 7)
    k4 = next(i for i, r in enumerate(data.rows) if r.block == 4)
    # all rows: k = 4 (M = 5) has k = 5 (M = 6) as its nearest neighbour: log(6/5)
    assert spec.row_distance[k4] == pytest.approx(math.log(6 / 5))
    train = S.training_structure(spec, measured.astype(float))
    # training rows only: the nearest is k = 3 (M = 4, 3 passes): log(5/4)
    assert train["config_distance"][spec.row_config[k4]] == pytest.approx(math.log(5 / 4))
    assert train["group_pass_varies"].tolist() == [1.0]   # k = 1..4 still vary


def test_structured_form_with_only_autoregressive_rows_still_predicts_a_drafter():
    """No speculative group measured: the population priors exist, so an unmeasured group is
    drawn from them instead of failing."""
    pm = pytest.importorskip("pymc")
    from ddtree_bayes.engine.model import build_model

    hw = load_hardware(bundled("hardware.csv"))
    text = "\n".join(line for i, line in enumerate(bundled("measurements.csv").read_text()
                                                   .splitlines()) if i == 0 or ",ar," in line)
    data = load_measurements("ar.csv", hw, text=text + "\n")
    cfg = parse_priors(STRUCTURED)
    spec = S.build_spec(data, cfg, hardware=hw, cards=load_model_cards(bundled("models.csv")))
    assert spec.groups == ()
    names = {rv.name for rv in build_model(spec, cfg).free_RVs}
    assert {"spec_fixed_log_mu", "spec_pass_log_mu", "spec_tree_log_mu"} <= names
    assert pm is not None


def test_extrapolation_table_states_the_targets_and_their_odds():
    """The rendered table carries each sweep's odds and the per-structure line of targets."""
    from ddtree_bayes.cli.analysis import render_extrapolation

    score = {"n": 1, "coverage50": 1.0, "coverage90": 1.0, "bias": 0.05, "mae": 0.05,
             "width90": 0.4}
    odds = {"p_bias": 0.17, "p_mae": 0.28, "noise_p_bias": 0.35, "noise_p_mae": 0.57,
            "noise_sd": 0.066, "bias_percentile": 0.65}
    res = {"seconds": 10.0, "notes": [],
           "sweeps": [{"sweep": "s", "train_max_verify": 16, "held_out_verify": [60],
                       "baseline": {**score, "coverage50": None},
                       "structured": {**score, "converged": True, "remedy": None,
                                      "attainability": odds}}],
           "pooled": {"structured": {**score, "targets": {
               "sweeps": 1, "met_bias": 0, "met_mae": 1, "expected_bias": 0.17,
               "expected_mae": 0.28, "p_all_bias": 0.17, "noise_p_all_bias": 0.35,
               "p_all_mae": 0.28, "noise_p_all_mae": 0.004}},
               "baseline": {**score, "coverage50": None}}}
    text = render_extrapolation(res, ("structured",))
    assert "0.17, 0.28 / 0.35, 0.57" in text
    assert ("structured: |bias| <= 3% on 0/1 sweeps (a calibrated model expects 0.2; all 1 with "
            "probability 0.17, 0.35 for an oracle") in text
    assert "mean abs error <= 5% on 1/1 (expected 0.3; all with probability 0.28, oracle 0.004)" \
        in text


def test_extrapolate_pools_the_converged_fits_only(tmp_path, monkeypatch, capsys):
    """`validate --extrapolate` pooled the held-out rows of a fit that failed its convergence
    gates into a structure's pooled scores and its per-sweep targets as if fine. The fits are
    stubbed: sweep b's structured fit fails its gates and predicts twice the measured tok/s;
    every other fit predicts it exactly (each sweep holds out one row, its M = 9 one, row 6).
    Before: pooled structured n 2, bias +50%, |bias| <= 3% on 1 of 2 sweeps. Now the
    converged fits only: n 1, bias 0, 1 of 1 sweep; the baseline beside it scores the same
    row; fraction (converged on both) keeps n 2; unconverged_rows names b's fit and row."""
    import json

    from ddtree_bayes.cli import main as cli
    from test_json_schemas import validate_output

    header = "sweep," + ",".join(X.COLUMNS) + ",derived\n"
    files = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.csv"
        path.write_text(header + "".join(
            f"{name},llama-3.1-8b-instruct,h100,1,vllm,{line},,{tok},src,,\n"
            for line, tok in (("ar,,,1,1.0", 141), ("eagle,2,2,3,2.1", 228),
                              ("eagle,3,3,4,2.3", 230), ("eagle,4,4,5,2.4", 223),
                              ("eagle,8,8,9,2.6", 200))))
        files.append(path)

    def run_split(sweep, structure, priors_toml, hardware_csv, cards, seed, settings):
        failed = (sweep.name, structure) == ("b", "structured")
        scale = 2.0 if failed else 1.0
        rows = [{"sweep": sweep.name, "structure": structure, "row": i + 2, "method": "eagle",
                 "block": 8, "budget": 8, "verify_tokens": 9, "measured": 200.0,
                 "median": 200.0 * scale, "lo50": 190.0 * scale, "hi50": 210.0 * scale,
                 "lo90": 180.0 * scale, "hi90": 220.0 * scale, "baseline": 200.0}
                for i in sweep.held_out]
        odds = {"p_bias": 0.5, "p_mae": 0.5, "noise_p_bias": 0.9, "noise_p_mae": 0.9,
                "noise_sd": 0.03, "bias_percentile": 0.5}
        return {"sweep": sweep.name, "structure": structure, "seconds": 1.0,
                "converged": not failed, "failures": ["max R-hat 1.1 > 1.01 (x)"] if failed else [],
                "remedy": None, "rows": rows, "train_max_verify": 5, "attainability": odds}

    monkeypatch.setattr(X, "run_split", run_split)
    res = X.extrapolate(files, bundled("priors.toml"), workdir=tmp_path, progress=False)
    assert [s["held_out"] for s in res["sweeps"]] == [1, 1]
    structured = res["pooled"]["structured"]
    assert structured["n"] == 1 and structured["bias"] == 0.0 and structured["coverage90"] == 1.0
    t = structured["targets"]
    assert (t["sweeps"], t["met_bias"], t["met_mae"]) == (1, 1, 1)
    assert t["expected_bias"] == 0.5 and t["p_all_bias"] == 0.5
    assert res["pooled"]["fraction"]["n"] == 2 and res["pooled"]["fraction"]["targets"]["sweeps"] == 2
    assert res["pooled"]["baseline"]["n"] == 1
    assert res["unconverged_rows"] == {"b (structured)": [6]}
    b = res["sweeps"][1]["structured"]   # its own line: its scores
    assert b["converged"] is False and b["n"] == 1 and b["bias"] == pytest.approx(1.0)
    assert len(res["rows"]) == 4
    validate_output("validate", json.loads(json.dumps(res)))

    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", "--extrapolate", "--sweeps", *map(str, files), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert ("not counted above: row 6, held out by b (structured), whose refit failed its "
            "convergence gates (max R-hat 1.1 > 1.01 (x)): scored on its own line only, not "
            "pooled") in out
    assert "structured: |bias| <= 3% on 1/1 sweeps" in out

    # no structured fit converged: nothing pooled, said so (scores null, not NaN)
    monkeypatch.setattr(X, "run_split", lambda sweep, structure, *a: {
        **run_split(sweep, structure, *a), "converged": structure != "structured",
        "failures": [] if structure != "structured" else ["x"]})
    res = X.extrapolate(files, bundled("priors.toml"), workdir=tmp_path, progress=False)
    structured = res["pooled"]["structured"]
    assert structured["n"] == 0 and structured["bias"] is None
    assert structured["targets"]["sweeps"] == 0 and res["pooled"]["baseline"]["n"] == 0
    assert res["unconverged_rows"] == {"a (structured)": [6], "b (structured)": [6]}
    validate_output("validate", json.loads(json.dumps(res)))
    from ddtree_bayes.cli.analysis import render_extrapolation

    pooled = next(ln for ln in render_extrapolation(res, ("structured", "fraction")).splitlines()
                  if ln.startswith("POOLED"))
    assert pooled.split()[1:4] == ["structured", "0", "-"]

"""Issue 20's validation modes without NUTS: `validate --group pair --keep-ar` (each pair's
speculative rows held out, its AR rows kept) and `validate --extrapolate --from-smallest` (AR
plus the smallest configuration fitted, every larger one predicted). Fold construction on tiny
hand-written files, the refit mocked by a fake that records the rows it was asked to hold out,
and the summary statistics on hand-made fold results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.core.data import load_hardware, load_measurements
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.workflows import ar_kept as T
from ddtree_bayes.workflows import from_smallest as F
from ddtree_bayes.workflows import validation as V

HEADER = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
          "context_tokens,tok_s,source,notes\n")
# positions: 0-3 kimi on b300 (AR, DDTree with acceptance, Eagle3 without, AR at 16k);
# 4-5 kimi on h200 (AR, Eagle3 without acceptance: the same acceptance group as row 2);
# 6-7 llama on h100 (AR, Eagle3 k=5 without acceptance: a group no other pair has);
# 8 llama on h100x2 (Eagle3 with acceptance, no AR row)
TINY = HEADER + (
    "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,0,133,t,\n"
    "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,0,303,t,\n"
    "kimi-k2.6,b300,8,sglang,eagle3,3,3,4,,0,180,t,\n"
    "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,16384,120,t,\n"
    "kimi-k2.6,h200,8,vllm,ar,,,1,1.0,0,60,t,\n"
    "kimi-k2.6,h200,8,vllm,eagle3,3,3,4,,0,100,t,\n"
    "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,0,141,t,\n"
    "llama-3.1-8b-instruct,h100,1,vllm,eagle3,5,5,6,,0,240,t,\n"
    "llama-3.1-8b-instruct,h100,2,vllm,eagle3,3,3,4,2.5,0,300,t,\n")


@pytest.fixture(scope="module")
def tiny():
    return load_measurements("tiny.csv", load_hardware(bundled("hardware.csv")), text=TINY)


# ------------------------------------------------------------------ --keep-ar: folds
def test_keep_ar_folds_by_hand(tiny):
    splits, notes = T.pair_splits(tiny)
    by = {s.pair: s for s in splits}
    assert list(by) == ["kimi-k2.6@b300x8", "kimi-k2.6@h200x8"]
    b300 = by["kimi-k2.6@b300x8"]
    assert b300.ar == (0, 3) and b300.speculative == (1, 2)
    # AR kept: only the speculative rows leave the fit; whole pair: all four
    assert b300.held_out("ar-kept") == (1, 2)
    assert b300.held_out("whole-pair") == (0, 1, 2, 3)
    # row 2 has no accept_len, but the h200 Eagle3 row of its acceptance group stays in training
    assert b300.scored == (1, 2) and b300.skipped == ()
    h200 = by["kimi-k2.6@h200x8"]
    assert h200.held_out("ar-kept") == (5,) and h200.held_out("whole-pair") == (4, 5)
    assert h200.scored == (5,)
    # the llama h100x1 Eagle3 row: its group has no other row, so nothing is left to score
    assert any(n.startswith("llama-3.1-8b-instruct@h100x1: row 9 (eagle3 M=6): no accept_len")
               for n in notes)
    assert ("llama-3.1-8b-instruct@h100x1: left out (its 1 speculative row cannot be scored)"
            in notes)
    # a pair without AR rows does not ask the question
    assert any(n.startswith("llama-3.1-8b-instruct@h100x2: left out (no AR row") for n in notes)


def test_keep_ar_names_every_pair_it_leaves_out(monkeypatch):
    """A pair measured with AR only (kimi on h100 x8 here) was dropped without a word, in the
    tables and in the JSON; the pairs left out for other reasons were only in ``notes``. Now
    every pair left out is listed with why, in ``skipped_pairs`` and in the tables' notes."""
    import jsonschema

    from ddtree_bayes.cli.analysis import render_keep_ar
    from test_json_schemas import schema

    text = TINY + "kimi-k2.6,h100,8,sglang,ar,,,1,1.0,0,70,t,\n"
    data = load_measurements("tiny.csv", load_hardware(bundled("hardware.csv")), text=text)
    splits, notes = T.pair_splits(data)
    assert [s.pair for s in splits] == ["kimi-k2.6@b300x8", "kimi-k2.6@h200x8"]
    assert ("kimi-k2.6@h100x8: left out (no speculative row: nothing to predict; 1 AR row, "
            "kept in every refit's training)") in notes
    monkeypatch.setattr(V, "refit_without", _fake_refit([]))
    monkeypatch.setattr(V, "predict_row", lambda draws, m, rng: np.full(20, m.tok_s))
    results = [T.run_pair_fold(V.Inputs(text, "", ""), s, kind, 1, V.SamplerSettings())
               for s in splits for kind in T.KINDS]
    out = T.summarize(splits, results, data)
    assert out["skipped_pairs"] == [
        {"pair": "llama-3.1-8b-instruct@h100x1", "ar_rows": 1, "speculative_rows": 1,
         "reason": "its 1 speculative row cannot be scored"},
        {"pair": "llama-3.1-8b-instruct@h100x2", "ar_rows": 0, "speculative_rows": 1,
         "reason": "no AR row: the question does not apply; 1 speculative row; validate "
                   "--group pair covers it"},
        {"pair": "kimi-k2.6@h100x8", "ar_rows": 1, "speculative_rows": 0,
         "reason": "no speculative row: nothing to predict; 1 AR row, kept in every refit's "
                   "training"}]
    keep = json.loads(json.dumps({
        "data": "tiny.csv", "group": "pair", "keep_ar": True, "seed": 1, "settings": {},
        "seconds": 1.0, "folds": [{"fold": r.fold, "seconds": r.seconds, "converged": r.converged,
                                   "failures": r.failures, "remedy": r.remedy} for r in results],
        **out, "notes": notes, "rows": [r for res in results for r in res.rows]}))
    jsonschema.Draft202012Validator(schema("validate")).validate(keep)
    shown = render_keep_ar(keep)
    assert shown.splitlines()[0].endswith(
        "speculative rows scored (2 at an inferred acceptance), 0 skipped; 3 pairs left out "
        "(notes below)")
    assert "  kimi-k2.6@h100x8: left out (no speculative row: nothing to predict" in shown


class FakeDraws:
    meta = {"remedy": None}


def _fake_refit(record):
    """A refit that records what it held out and a baseline predicting 100 tok/s when the row
    has an acceptance (the original formula needs one)."""
    def refit_without(inputs, held_out, seed, settings, cores=1):
        record.append(tuple(held_out))
        data = load_measurements("tiny.csv", load_hardware(bundled("hardware.csv")),
                                 text=inputs.data_csv)
        draws = FakeDraws()
        draws.meta = {"remedy": 1 if len(held_out) > 2 else None}
        return (draws, [] if len(held_out) < 4 else ["R-hat 1.02 > 1.01 (x)"], data,
                lambda m: None if m.accept_len is None else 100.0, [])
    return refit_without


def test_keep_ar_of_a_file_of_one_pair_makes_no_whole_pair_refit(tmp_path, monkeypatch):
    """A user's own file of one pair (one AR row, two Eagle3 rows on their one GPU):
    `validate --group pair --keep-ar` sampled its whole-pair refit with every row held out
    (the prior alone), then died predicting it ("internal error: ValueError: min() iterable
    argument is empty", exit 1) and the AR-kept answer was lost. Now that refit is not made,
    the notes say why, and the AR-kept refit is scored."""
    import jsonschema

    from ddtree_bayes.cli.analysis import render_keep_ar
    from test_json_schemas import schema

    text = HEADER + ("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,0,133,t,\n"
                     "kimi-k2.6,b300,8,sglang,eagle3,3,3,4,2.0,0,180,t,\n"
                     "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,0,303,t,\n")
    (tmp_path / "tiny.csv").write_text(text)
    monkeypatch.chdir(tmp_path)
    held: list[tuple] = []
    monkeypatch.setattr(V, "refit_without", _fake_refit(held))
    monkeypatch.setattr(V, "predict_row", lambda draws, m, rng: np.full(20, m.tok_s * 0.9))
    res = json.loads(json.dumps(T.validate_keep_ar("tiny.csv", progress=False)))
    assert held == [(1, 2)]   # the AR-kept refit only: nothing held out that leaves nothing
    assert [f["fold"] for f in res["folds"]] == ["b300x8 (ar-kept)"]
    note = ("b300x8: no whole-pair refit (every row of tiny.csv is this pair's: "
            "holding them all out leaves nothing to fit); add another pair's rows for that "
            "reference")
    assert note in res["notes"]
    s = res["summary"]
    assert s["ar_kept"]["n"] == 2 and s["ar_kept"]["bias"] == pytest.approx(-0.10)
    assert s["whole_pair"]["n"] == 0 and s["whole_pair"]["bias"] is None
    assert res["by_pair"][0]["whole_pair_fit"] is None
    jsonschema.Draft202012Validator(schema("validate")).validate(res)
    shown = render_keep_ar(res)
    assert shown.splitlines()[0].startswith(
        "AR kept: 1 (model, system) pair, 1 refit (speculative rows held out, AR rows kept; "
        "no whole-pair refit of 1 pair: notes below), ")
    assert f"  {note}" in shown
    assert " ok / not made\n" in shown   # the pair's fits (AR kept / whole)


def test_keep_ar_runs_both_refits_and_scores_the_same_rows(tiny, monkeypatch):
    """The two refits of a pair hold out what they should, predict the same speculative rows,
    and the summary scores them by hand: every predictive draw is 90% of the measured tok/s
    in the AR-kept refit and 120% in the whole-pair one."""
    held = []
    monkeypatch.setattr(V, "refit_without", _fake_refit(held))

    def predict_row(draws, m, rng):
        scale = 1.2 if {0, 4} & set(held[-1]) else 0.9   # an AR row held out: whole pair
        return np.full(50, m.tok_s * scale)

    monkeypatch.setattr(V, "predict_row", predict_row)
    splits, _ = T.pair_splits(tiny)
    inputs = V.Inputs(TINY, "", "")
    results = [T.run_pair_fold(inputs, s, kind, 1, V.SamplerSettings())
               for s in splits for kind in T.KINDS]
    assert held == [(1, 2), (0, 1, 2, 3), (5,), (4, 5)]
    assert [r.fold for r in results] == ["kimi-k2.6@b300x8 (ar-kept)",
                                         "kimi-k2.6@b300x8 (whole-pair)",
                                         "kimi-k2.6@h200x8 (ar-kept)",
                                         "kimi-k2.6@h200x8 (whole-pair)"]
    assert [r["row"] for r in results[0].rows] == [r["row"] for r in results[1].rows] == [3, 4]
    assert results[1].converged is False and results[1].remedy == 1
    out = T.summarize(splits, results, tiny)
    s = out["summary"]
    # the B300 whole-pair refit failed its gates: its rows 3, 4 are not pooled
    assert s["ar_kept"]["n"] == 3 and s["whole_pair"]["n"] == 1
    assert s["unconverged_rows"] == {"kimi-k2.6@b300x8 (whole-pair)": [3, 4]}
    assert s["ar_kept"]["bias"] == pytest.approx(-0.10)
    assert s["whole_pair"]["bias"] == pytest.approx(0.20)
    assert s["ar_kept"]["mdae"] == pytest.approx(0.10)
    assert s["ar_kept"]["coverage90"] == 0.0 and s["ar_kept"]["width90"] == 0.0
    # the baseline (100 tok/s +-30%) scores the DDTree row only (303 measured: -67%, outside)
    assert s["baseline"]["n"] == 1 and s["baseline"]["bias"] == pytest.approx(100 / 303 - 1)
    assert s["baseline"]["coverage90"] == 0.0
    assert s["with_accept_len"]["ar_kept"]["n"] == 1 and s["inferred_accept"]["ar_kept"]["n"] == 2
    assert out["targets"]["met"] == {"coverage90": False, "mdae": False, "width90": True}
    assert list(out["by_engine"]) == ["sglang", "vllm"]
    assert out["by_engine"]["vllm"]["ar_kept"]["n"] == 1
    assert list(out["by_method"]) == ["ddtree", "eagle3"]
    b300 = out["by_pair"][0]
    assert b300["pair"] == "kimi-k2.6@b300x8" and b300["ar_rows"] == 2 and b300["scored"] == 2
    assert b300["whole_pair_fit"] == {"converged": False, "remedy": 1}
    assert b300["ar_kept_fit"] == {"converged": True, "remedy": None}


# ------------------------------------------------------------------ shared scores
def test_scores_by_hand():
    rows = [{"measured": 100.0, "median": 110.0, "lo50": 105, "hi50": 115, "lo90": 95,
             "hi90": 125, "baseline": 90.0},
            {"measured": 200.0, "median": 190.0, "lo50": 185, "hi50": 199, "lo90": 180,
             "hi90": 210, "baseline": 260.0},
            {"measured": 100.0, "median": 70.0, "lo50": 65, "hi50": 75, "lo90": 60,
             "hi90": 80, "baseline": 100.0}]
    s = V.scores(rows)
    assert s["n"] == 3 and s["coverage90"] == pytest.approx(2 / 3) and s["coverage50"] == 0.0
    assert s["bias"] == pytest.approx((0.10 - 0.05 - 0.30) / 3)
    assert s["mae"] == pytest.approx((0.10 + 0.05 + 0.30) / 3)
    assert s["mdae"] == pytest.approx(0.10)
    assert s["width90"] == pytest.approx((30 / 110 + 30 / 190 + 20 / 70) / 3)
    b = V.scores(rows, baseline=True)
    assert b["coverage50"] is None and b["width90"] == pytest.approx(0.6)
    assert b["mdae"] == pytest.approx(0.1) and b["coverage90"] == 1.0
    assert V.scores([])["n"] == 0 and V.scores([])["bias"] is None


# ------------------------------------------------------------------ --from-smallest: splits
SWEEP_HEADER = ("sweep,model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
                "context_tokens,tok_s,source,derived,notes\n")


def _sweep_file(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / f"{name}.csv"
    path.write_text(SWEEP_HEADER + "".join(f"{name},{line},src,,\n" for line in lines))
    return path


def test_from_smallest_splits_by_hand(tmp_path):
    """One split per method at two or more configurations: AR + the smallest trained (both
    runs of it), every larger one predicted, the other method's rows in neither; a row
    without acceptance is read out; a sweep without AR is left out and named."""
    chain = _sweep_file(tmp_path, "chain", [
        "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,141",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,2,2,3,2.1,,228",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,2,2,3,2.2,,231",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,4,4,5,2.4,,223",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,7,7,8,2.5,,192",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,6,6,7,,,200",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle3,2,2,3,2.4,,231",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle3,5,5,6,3.3,,242",
        "llama-3.1-8b-instruct,h100,1,vllm,draft-model,4,4,5,2.0,,150"])
    no_ar = _sweep_file(tmp_path, "noar", [
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,2,2,3,2.1,,228",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,4,4,5,2.4,,223"])
    splits, notes = F.load_splits([chain, no_ar], bundled("hardware.csv").read_text())
    assert [s.name for s in splits] == ["chain/eagle", "chain/eagle3"]
    eagle, eagle3 = splits
    # positions after the row without acceptance is read out: 0 AR, 1-2 eagle M=3,
    # 3 eagle M=5, 4 eagle M=8, 5-6 eagle3 M=3/6, 7 draft-model
    assert eagle.trained == (0, 1, 2) and eagle.predicted == (3, 4)
    assert eagle.trained_verify == 3 and eagle.skipped_rows == 1
    assert eagle.held_out == (3, 4, 5, 6, 7)
    assert eagle3.trained == (0, 5) and eagle3.predicted == (6,)
    assert eagle3.held_out == (1, 2, 3, 4, 6, 7)
    assert "chain: draft-model left out (one configuration: nothing larger to predict)" in notes
    assert any(n.startswith("noar: left out (no AR row") for n in notes)


def test_from_smallest_with_a_corpus_by_hand(tmp_path):
    """--corpus: the corpus rows come first and always train; the rows of the sweep's own
    target on its own system are dropped from it, under any deployment name of the model
    (another GPU count or model is kept); the split's positions shift by the rows kept; the
    corpus is read as `fit` reads a file (BOM, spaced header, blank lines, its concurrency
    column kept)."""
    sweep = _sweep_file(tmp_path, "s", [
        "qwen3.8-27b,rtx-5090,1,llama.cpp,ar,,,1,1.0,,60",
        "qwen3.8-27b,rtx-5090,1,llama.cpp,mtp,1,1,2,1.8,,90",
        "qwen3.8-27b,rtx-5090,1,llama.cpp,mtp,3,3,4,2.6,,120"])
    corpus = tmp_path / "corpus.csv"
    corpus.write_text("\ufeff" + HEADER.replace(",hardware,", ", hardware ,").rstrip("\n")
                      + ",concurrency\n"
                      + "qwen3.8-27b-q4_k_m,rtx-5090,1,llama.cpp,ar,,,1,1.0,,61,deployment,,\n"
                      + "qwen3.8-27b,rtx-5090,2,vllm,ar,,,1,1.0,,80,two gpus,,\n"
                      + "\n"
                      + "qwen3.8-27b,rtx-5090,1,vllm,mtp,2,2,3,2.0,,95,own system,,\n"
                      + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,700,other model,,8\n",
                      encoding="utf-8")
    hw = bundled("hardware.csv").read_text()
    (split,), _ = F.load_splits([sweep], hw)
    assert split.trained == (0, 1) and split.predicted == (2,)
    (both,), n = F.with_corpus([split], corpus, hw, {})
    assert n == 4 and both.corpus_rows == 2
    assert both.trained == (0, 1, 2, 3) and both.predicted == (4,) and both.n_rows == 5
    assert both.held_out == (4,)
    data = load_measurements("c.csv", load_hardware(bundled("hardware.csv")),
                             text=both.data_csv)
    assert [(m.model, m.gpus, m.concurrency, m.tok_s) for m in data.rows] == [
        ("qwen3.8-27b", 2, 1, 80), ("kimi-k2.6", 8, 8, 700), ("qwen3.8-27b", 1, 1, 60),
        ("qwen3.8-27b", 1, 1, 90), ("qwen3.8-27b", 1, 1, 120)]
    assert data.rows[4].accept_len == 2.6 and data.rows[4].row - both.corpus_rows == 4


@pytest.mark.parametrize("line, row, column, words", [
    ("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,fast,x,", 2, "tok_s", ""),
    ("no-such-model,b300,8,sglang,ar,,,1,1.0,,133,x,", 2, "model", "no model card"),
    # a predicted row of the split under another model's name: refused, not trained on
    ("kimi-k2.6,rtx-5090,1,llama.cpp,mtp,3,3,4,2.6,,120,copy,", 2, None, "repeats row 4"),
])
def test_a_corpus_that_cannot_be_used_is_refused(tmp_path, line, row, column, words):
    sweep = _sweep_file(tmp_path, "s", [
        "qwen3.8-27b,rtx-5090,1,llama.cpp,ar,,,1,1.0,,60",
        "qwen3.8-27b,rtx-5090,1,llama.cpp,mtp,1,1,2,1.8,,90",
        "qwen3.8-27b,rtx-5090,1,llama.cpp,mtp,3,3,4,2.6,,120"])
    hw = bundled("hardware.csv").read_text()
    splits, _ = F.load_splits([sweep], hw)
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + line + "\n")
    with pytest.raises(F.DataError) as err:
        F.with_corpus(splits, bad, hw, {})
    assert err.value.file == str(bad) and err.value.row == row and err.value.column == column
    assert words in str(err.value)


def test_a_sweeps_concurrency_column_is_kept(tmp_path):
    """A sweep row at C = 4 stays at C = 4 (its tok/s is the four streams' total), not one
    stream at four times the rate."""
    path = tmp_path / "c.csv"
    path.write_text(SWEEP_HEADER.rstrip("\n") + ",concurrency\n"
                    + "c,llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,141,src,,,\n"
                    + "c,llama-3.1-8b-instruct,h100,1,vllm,eagle,2,2,3,2.1,,228,src,,,4\n"
                    + "c,llama-3.1-8b-instruct,h100,1,vllm,eagle,4,4,5,2.4,,223,src,,,\n")
    (split,), _ = F.load_splits([path], bundled("hardware.csv").read_text())
    data = load_measurements("c.csv", load_hardware(bundled("hardware.csv")),
                             text=split.data_csv)
    assert [m.concurrency for m in data.rows] == [1, 4, 1]


def test_ratio_bins():
    assert [F.ratio_bin(r) for r in (1.25, 2.0, 2.01, 3.0, 3.5, 4.0, 4.3, 15.0)] == \
        ["<=2x", "<=2x", "2-3x", "2-3x", "3-4x", "3-4x", ">4x", ">4x"]


def _row(split, ratio, measured, median, width=0.2, engine="vllm", baseline=None, row=2):
    half = width * median / 2
    return {"split": split, "sweep": split.split("/")[0], "structure": "structured", "row": row,
            "engine": engine, "hardware": "h100", "gpus": 1, "verify_tokens": int(3 * ratio),
            "ratio": ratio, "ratio_bin": F.ratio_bin(ratio), "measured": measured,
            "median": median, "lo50": median - half / 2, "hi50": median + half / 2,
            "lo90": median - half, "hi90": median + half, "baseline": baseline}


def test_from_smallest_summary_by_hand(tmp_path, monkeypatch):
    """Bias by extrapolation ratio, pooled and per engine, from hand-made fold results; the
    refit is asked to hold out everything but the trained rows."""
    held = []
    monkeypatch.setattr(V, "refit_without", lambda inputs, h, seed, settings, cores=1: (
        held.append(tuple(h)) or FakeDraws(), [], load_measurements(
            "s.csv", load_hardware(bundled("hardware.csv")), text=inputs.data_csv),
        lambda m: 0.8 * m.tok_s, []))
    monkeypatch.setattr(V, "predict_row", lambda draws, m, rng: np.full(20, 0.9 * m.tok_s))
    path = _sweep_file(tmp_path, "s", [
        "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,141",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,1,1,2,1.8,,200",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,3,3,4,2.3,,230",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,8,8,9,2.6,,190"])
    (split,), _ = F.load_splits([path], bundled("hardware.csv").read_text())
    res = F.run_from_smallest(split, "structured", bundled("priors.toml").read_text(), "", {},
                              1, V.SamplerSettings())
    assert held == [(2, 3)]
    assert [(r["verify_tokens"], r["ratio"], r["ratio_bin"]) for r in res["rows"]] == \
        [(4, 2.0, "<=2x"), (9, 4.5, ">4x")]
    assert all(r["median"] == pytest.approx(0.9 * r["measured"]) for r in res["rows"])

    # hand-made results of two splits: ratios 1.5 (-10%), 3.5 (-20%, -30%), 6 (+10%)
    results = [
        {"split": "a/eagle", "structure": "structured", "converged": True, "failures": [],
         "remedy": None, "rows": [_row("a/eagle", 1.5, 100, 90, baseline=100.0),
                                  _row("a/eagle", 3.5, 100, 80, width=0.4, baseline=150.0)]},
        {"split": "b/mtp", "structure": "structured", "converged": True,   # after rung 2
         "failures": [], "remedy": 2,
         "rows": [_row("b/mtp", 3.5, 200, 140, engine="llama.cpp"),
                  _row("b/mtp", 6.0, 100, 110, engine="llama.cpp", baseline=100.0)]}]
    splits = [F.Split("a", "a.csv", "", "eagle", (0, 1), (2, 3), 3, 0, 4),
              F.Split("b", "b.csv", "", "mtp", (0, 1), (2, 3), 2, 0, 4)]
    out = F.summarize(splits, results, ("structured",))
    pooled = out["pooled"]["structured"]
    assert pooled["n"] == 4 and pooled["bias"] == pytest.approx((-0.1 - 0.2 - 0.3 + 0.1) / 4)
    assert pooled["mdae"] == pytest.approx(0.15)
    assert list(pooled["by_ratio"]) == ["<=2x", "3-4x", ">4x"]
    assert pooled["by_ratio"]["3-4x"]["bias"] == pytest.approx(-0.25)
    assert pooled["by_ratio"]["3-4x"]["width90"] == pytest.approx(0.3)
    assert pooled["targets_met"] == {"mdae": False, "bias_per_ratio": False, "width90": True}
    base = out["pooled"]["baseline"]
    assert base["n"] == 3 and base["bias"] == pytest.approx((0.0 + 0.5 + 0.0) / 3)
    assert out["by_engine"]["llama.cpp"]["structured"]["bias"] == pytest.approx(-0.1)
    assert out["by_engine"]["vllm"]["baseline"]["n"] == 2
    a, b = out["splits"]
    assert a["predicted_verify"] == [4, 10] and a["engine"] == "vllm"
    assert b["structured"]["converged"] is True and b["structured"]["remedy"] == 2
    assert out["unconverged_rows"] == {}
    assert b["structured"]["by_ratio"][">4x"]["bias"] == pytest.approx(0.1)


# ------------------------------------------------------------------ CLI
def test_flags_go_with_their_mode(tmp_path, monkeypatch, capsys):
    from ddtree_bayes.cli import main as cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", "--keep-ar"]) == 2
    assert cli.main(["validate", "--group", "hardware", "--keep-ar"]) == 2
    assert cli.main(["validate", "--from-smallest"]) == 2
    assert cli.main(["validate", "--extrapolate", "--corpus", "x.csv"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(e.startswith("ddtree-bayes: error: ") for e in err)
    assert "--corpus goes with --extrapolate --from-smallest" in err[3]
    assert "--keep-ar goes with --group pair" in err[0]
    assert "--from-smallest goes with --extrapolate" in err[2]


def test_flags_the_check_would_ignore_are_refused(tmp_path, monkeypatch, capsys):
    """A flag the chosen check does not read used to be dropped silently: `validate
    --train-concurrency 8` ran the leave-one-out refits, `--extrapolate --group pair` the
    plain extrapolation, `--sbc 5 --extrapolate` no SBC. Now one line, exit 2, before any
    refit."""
    from ddtree_bayes.cli import main as cli

    monkeypatch.chdir(tmp_path)
    cases = [
        (["--train-concurrency", "8"], "--train-concurrency does not apply to validate "
         "(leave-one-out refits) (fix: drop --train-concurrency, or run validate --extrapolate "
         "--concurrency)"),
        (["--extrapolate", "--test-concurrency", "32"], "--test-concurrency does not apply to "
         "validate --extrapolate (fix: drop --test-concurrency, or run validate --extrapolate "
         "--concurrency)"),
        (["--extrapolate", "--group", "pair"], "--group does not apply to validate --extrapolate "
         "(fix: drop --group, or run validate --group G)"),
        (["--sbc", "5", "--group", "pair"], "--group does not apply to validate --sbc (fix: drop "
         "--group, or run validate --group G)"),
        (["--sbc", "5", "--extrapolate"], "--sbc does not apply to validate --extrapolate (fix: "
         "drop --sbc, or run validate --sbc N)"),
        (["--structures", "structured"], "--structures does not apply to validate (leave-one-out "
         "refits) (fix: drop --structures, or run validate --extrapolate)"),
        (["--extrapolate", "--concurrency", "--structures", "fraction"], "--structures does not "
         "apply to validate --extrapolate --concurrency (fix: drop --structures, or run validate "
         "--extrapolate)"),
        (["--sweeps", "a.csv"], "--sweeps does not apply to validate (leave-one-out refits) (fix: "
         "drop --sweeps, or run validate --extrapolate)"),
        (["--extrapolate", "--data", "m.csv"], "--data does not apply to validate --extrapolate "
         "(fix: drop --data, or run validate --extrapolate --sweeps CSV)"),
        (["--extrapolate", "--scheduler", "tcp://h:8786"], "--scheduler does not apply to "
         "validate --extrapolate (fix: drop --scheduler, or run validate without --extrapolate)"),
        # (ran every sweep's fit one after another, exit 0, whatever --jobs said)
        (["--extrapolate", "--concurrency", "--jobs", "4"], "--jobs does not apply to validate "
         "--extrapolate --concurrency (its sweeps are fitted one after another) (fix: drop "
         "--jobs, or run validate --extrapolate)"),
    ]
    for argv, message in cases:
        assert cli.main(["validate", *argv]) == 2, argv
        err = capsys.readouterr().err.splitlines()
        assert err == [f"ddtree-bayes: error: {message}"], argv
    assert not list(tmp_path.iterdir())


def test_tables_render_from_saved_json(monkeypatch, tmp_path, tiny):
    """Both tables render from a result built by the workflows' own summaries (the JSON a run
    saves), and the JSON passes the validate schema."""
    import jsonschema

    from ddtree_bayes.cli.analysis import render_from_smallest, render_keep_ar
    from test_json_schemas import schema

    held = []
    monkeypatch.setattr(V, "refit_without", _fake_refit(held))
    monkeypatch.setattr(V, "predict_row", lambda draws, m, rng: np.linspace(0.7, 1.3, 41) * m.tok_s)
    splits, notes = T.pair_splits(tiny)
    results = [T.run_pair_fold(V.Inputs(TINY, "", ""), s, kind, 1, V.SamplerSettings())
               for s in splits for kind in T.KINDS]
    keep = {"data": "tiny.csv", "group": "pair", "keep_ar": True, "seed": 1, "settings": {},
            "seconds": 12.0, "folds": [{"fold": r.fold, "seconds": r.seconds,
                                         "converged": r.converged, "failures": r.failures,
                                         "remedy": r.remedy} for r in results],
            **T.summarize(splits, results, tiny), "notes": notes,
            "rows": [r for res in results for r in res.rows]}
    keep = json.loads(json.dumps(keep))
    jsonschema.Draft202012Validator(schema("validate")).validate(keep)
    text = render_keep_ar(keep)
    assert "posterior, AR kept" in text and "kimi-k2.6@h200x8" in text
    assert "targets (issue 20): coverage 90% >= 90%: 100% met" in text
    assert "1 of 4 refits failed a gate" in text

    # from-smallest: the rows a (mocked) refit predicts, 90% and 70% of the truth
    monkeypatch.setattr(V, "refit_without", lambda inputs, h, seed, settings, cores=1: (
        FakeDraws(), [], load_measurements(
            "s.csv", load_hardware(bundled("hardware.csv")), text=inputs.data_csv),
        lambda m: m.tok_s if m.verify_tokens < 9 else None, []))
    monkeypatch.setattr(V, "predict_row", lambda draws, m, rng: np.full(
        20, (0.9 if m.verify_tokens < 9 else 0.7) * m.tok_s))
    monkeypatch.setattr(FakeDraws, "meta", {"remedy": 1})
    path = _sweep_file(tmp_path, "a", [
        "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,141",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,2,2,3,1.8,,200",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,3,3,4,2.3,,230",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,14,14,15,2.6,,190"])
    (split,), _ = F.load_splits([path], bundled("hardware.csv").read_text())
    results = [F.run_from_smallest(split, "structured", bundled("priors.toml").read_text(), "",
                                   {}, 1, V.SamplerSettings())]
    smallest = {"mode": "from-smallest", "seed": 1, "settings": {}, "seconds": 5.0,
                "structures": {"structured": ["roofline", "structured"]},
                "ratio_bins": [label for _, label in F.RATIO_BINS], "targets": F.TARGETS,
                **F.summarize([split], results, ("structured",)), "notes": ["x: left out"],
                "rows": results[0]["rows"]}
    smallest = json.loads(json.dumps(smallest))
    jsonschema.Draft202012Validator(schema("validate")).validate(smallest)
    text = render_from_smallest(smallest)
    assert "M=3 -> 4,15" in text and "ok after remedy 1" in text
    assert "|bias| <= 5% at every ratio: worst -30.0% at >4x not met" in text
    assert "beside the" not in text
    smallest["corpus"] = {"file": "corpus.csv", "rows": 144}
    jsonschema.Draft202012Validator(schema("validate")).validate(smallest)
    assert ("beside the 144 rows of corpus.csv (less each sweep's own model on its own system)"
            in render_from_smallest(smallest))


@pytest.mark.parametrize("name", ["transfer_baseline.json", "headline_shape_baseline.json",
                                  "headline_shape_corpus.json"])
def test_recorded_baselines_fit_the_schema_and_render(name):
    """The baselines docs/validation.md records (real runs of both modes) still pass the
    schema and render: a change of either output format shows here."""
    import jsonschema

    from ddtree_bayes.cli.analysis import render_from_smallest, render_keep_ar
    from test_json_schemas import schema

    res = json.loads((Path(__file__).resolve().parents[1] / "docs" / name).read_text())
    jsonschema.Draft202012Validator(schema("validate")).validate(res)
    text = (render_keep_ar if "keep_ar" in res else render_from_smallest)(res)
    assert "targets (issue 20)" in text


# ------------------------------------------------------------------ real refits (small sampler)
SMALL = V.SamplerSettings(chains=2, draws=100, tune=100)


@pytest.mark.nuts
def test_from_smallest_end_to_end(monkeypatch, capsys):
    """One public sweep through the CLI: AR + MTP k = 1 fitted, k = 2..5 predicted, ratios and
    scores that obey their definitions, the shipped schema."""
    from ddtree_bayes.cli.main import main
    from test_json_schemas import validate_output

    real = F.from_smallest
    monkeypatch.setattr(F, "from_smallest", lambda *a, **k: real(*a, settings=SMALL, **k))
    sweep = Path(__file__).resolve().parents[1] / "data/public/trtllm_mtp_deepseek_r1_b200.csv"
    assert main(["validate", "--extrapolate", "--from-smallest", "--sweeps", str(sweep),
                 "--quiet", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    validate_output("validate", out)
    (split,) = out["splits"]
    assert split["trained_verify"] == 2 and split["predicted_verify"] == [3, 4, 5, 6]
    assert [r["ratio_bin"] for r in out["rows"]] == ["<=2x", "<=2x", "2-3x", "2-3x"]
    pooled = out["pooled"]["structured"]
    errors = [r["median"] / r["measured"] - 1 for r in out["rows"]]
    if split["structured"]["converged"]:
        assert pooled["bias"] == pytest.approx(np.mean(errors))
        assert pooled["by_ratio"]["2-3x"]["bias"] == pytest.approx(np.mean(errors[2:]))
    else:   # the small sampler's fit may fail its gates: then its rows are named, not pooled
        assert pooled["n"] == 0 and out["unconverged_rows"] == {
            f"{split['split']} (structured)": [r["row"] for r in out["rows"]]}
    assert split["structured"]["bias"] == pytest.approx(np.mean(errors))
    assert all(r["lo90"] < r["median"] < r["hi90"] for r in out["rows"])


@pytest.mark.nuts
def test_keep_ar_end_to_end(tmp_path):
    """Two pairs of two models, real refits: the AR-kept prediction of the B300 DDTree row is
    narrower than the whole-pair one (the pair's own M = 1 step is measured)."""
    data = tmp_path / "two.csv"
    data.write_text(HEADER + (
        "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,0,133,t,\n"
        "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,4.4,0,303,t,\n"
        "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,0,141.44,t,\n"
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,2,2,3,2.1,0,228.83,t,\n"
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,4,4,5,2.39,0,223.21,t,\n"))
    res = T.validate_keep_ar(data, bundled("priors.toml"), settings=SMALL, progress=False,
                             workdir=tmp_path)
    assert [p["pair"] for p in res["by_pair"]] == ["kimi-k2.6@b300x8",
                                                   "llama-3.1-8b-instruct@h100x1"]
    # the small sampler's refits may fail their gates: their rows are listed, not pooled
    s = res["summary"]
    assert len(res["folds"]) == 4 and len([r for r in res["rows"] if r["kind"] == "ar-kept"]) == 3
    assert s["ar_kept"]["n"] + sum(len(rows) for fold, rows in s["unconverged_rows"].items()
                                   if fold.endswith("(ar-kept)")) == 3
    ddtree = {r["kind"]: r for r in res["rows"] if r["row"] == 3}
    width = {k: (r["hi90"] - r["lo90"]) / r["median"] for k, r in ddtree.items()}
    assert width["ar-kept"] < width["whole-pair"]


def test_keep_ar_scores_the_converged_refits_rows_only(tmp_path, monkeypatch, capsys):
    """`validate --group pair --keep-ar` pooled the rows of a refit that failed its
    convergence gates into the scores as if fine. The fake fails the B300 whole-pair refit
    (it holds out 4 rows) and that refit predicts twice the measurement; the others predict
    it exactly (90% interval +-10%). Before: summary.whole_pair scored rows 3, 4 and 6, 90%
    coverage 1/3, mean abs error 2/3. Now the converged refits' rows only: row 6, coverage
    100%, error 0; summary.unconverged_rows names the failed refit's rows and the table says
    they are not pooled. The pair's own line keeps its scores (marked GATES FAILED)."""
    from ddtree_bayes.cli import main as cli
    from test_json_schemas import validate_output

    held = []
    monkeypatch.setattr(V, "refit_without", _fake_refit(held))
    monkeypatch.setattr(V, "predict_row", lambda draws, m, rng: np.linspace(0.9, 1.1, 21)
                        * m.tok_s * (2.0 if len(held[-1]) >= 4 else 1.0))
    data = tmp_path / "tiny.csv"
    data.write_text(TINY)
    monkeypatch.chdir(tmp_path)
    res = T.validate_keep_ar(data, bundled("priors.toml"), workdir=tmp_path, progress=False)
    assert [f["converged"] for f in res["folds"]] == [True, False, True, True]
    s = res["summary"]
    assert s["unconverged_rows"] == {"kimi-k2.6@b300x8 (whole-pair)": [3, 4]}
    assert s["whole_pair"]["n"] == 1 and s["whole_pair"]["coverage90"] == 1.0
    assert s["whole_pair"]["mae"] == 0.0
    assert s["baseline_whole_pair"]["n"] == 0   # row 3 (the one with accept_len): not pooled
    assert s["ar_kept"]["n"] == 3 and s["ar_kept"]["coverage90"] == 1.0
    assert s["with_accept_len"]["whole_pair"]["n"] == 0
    assert res["by_engine"]["sglang"]["whole_pair"]["n"] == 0
    assert res["by_engine"]["sglang"]["ar_kept"]["n"] == 2
    assert res["by_method"]["ddtree"]["whole_pair"]["n"] == 0
    b300 = res["by_pair"][0]   # its own line: its scores, its fit's status
    assert b300["whole_pair"]["n"] == 2 and b300["whole_pair"]["mae"] == pytest.approx(1.0)
    assert b300["whole_pair_fit"]["converged"] is False
    assert len(res["rows"]) == 6   # every scored row is still listed
    validate_output("validate", json.loads(json.dumps(res)))

    assert cli.main(["validate", "--group", "pair", "--keep-ar", "--data", str(data),
                     "--priors", str(bundled("priors.toml")), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert ("not counted above: rows 3, 4, held out by kimi-k2.6@b300x8 (whole-pair), whose "
            "refit failed its convergence gates (R-hat 1.02 > 1.01 (x)): scored on its own line "
            "only, not pooled") in out


def test_from_smallest_pools_the_converged_fits_only(tmp_path, monkeypatch, capsys):
    """`validate --extrapolate --from-smallest` pooled the rows of a fit that failed its
    convergence gates into `pooled` and `by_engine` as if fine. Two sweeps, AR + EAGLE at
    M = 2 fitted, M = 4 predicted (row 4 of each); the refit is mocked: sweep b's fails its
    gates and predicts twice the measured tok/s, a's predicts it exactly. Before: pooled n 2,
    bias +50%. Now a's row only: n 1, bias 0, the baseline beside it on the same row;
    unconverged_rows names b's fit and row, and the text says it is not pooled."""
    from ddtree_bayes.cli import main as cli
    from test_json_schemas import validate_output

    files = [_sweep_file(tmp_path, name, [
        "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1.0,,141",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,1,1,2,1.8,,200",
        "llama-3.1-8b-instruct,h100,1,vllm,eagle,3,3,4,2.3,,230"]) for name in ("a", "b")]

    def refit_without(inputs, held_out, seed, settings, cores=1):
        failed = inputs.data_name.endswith("[b]")
        draws = FakeDraws()
        draws.meta = {"remedy": None, "scale": 2.0 if failed else 1.0}
        data = load_measurements("s.csv", load_hardware(bundled("hardware.csv")),
                                 text=inputs.data_csv)
        return (draws, ["R-hat 1.2 > 1.01 (x)"] if failed else [], data, lambda m: m.tok_s, [])

    monkeypatch.setattr(V, "refit_without", refit_without)
    monkeypatch.setattr(V, "predict_row", lambda draws, m, rng: np.linspace(0.9, 1.1, 21)
                        * m.tok_s * draws.meta["scale"])
    res = F.from_smallest(files, bundled("priors.toml"), workdir=tmp_path, progress=False)
    assert [s["structured"]["converged"] for s in res["splits"]] == [True, False]
    pooled = res["pooled"]["structured"]
    assert pooled["n"] == 1 and pooled["bias"] == 0.0 and pooled["coverage90"] == 1.0
    assert pooled["targets_met"] == {"mdae": True, "bias_per_ratio": True, "width90": True}
    assert res["pooled"]["baseline"]["n"] == 1
    assert res["by_engine"]["vllm"]["structured"]["n"] == 1
    assert res["unconverged_rows"] == {"b/eagle (structured)": [4]}
    b = res["splits"][1]["structured"]   # its own line: its scores
    assert b["n"] == 1 and b["bias"] == pytest.approx(1.0)
    assert len(res["rows"]) == 2
    validate_output("validate", json.loads(json.dumps(res)))

    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", "--extrapolate", "--from-smallest", "--sweeps",
                     *map(str, files), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert ("not counted above: row 4, held out by b/eagle (structured), whose refit failed its "
            "convergence gates (R-hat 1.2 > 1.01 (x)): scored on its own line only, not pooled"
            in out)

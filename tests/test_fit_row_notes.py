"""`fit` warns of what `add` warns of, for rows written into the CSV by hand.

`add` keeps (exit 0) but warns of a row whose card's weights do not fit its GPUs, a step
shorter than reading the card's active weights at full bandwidth, a context above the card's
max_context_tokens, a C > 1 total below one stream's AR tok/s, a speculative row at
accept_len 1 faster than AR and a speculative step shorter than AR's (two deployments under one
name). The same rows typed into data/measurements.csv (or a
`fit --data edited.csv`) were fitted without a word. fit now says each before sampling, one
line naming the file and row, in the words `add` uses (core/row_notes.py holds them both).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import fitting
from test_cli_support import copy_bundled_data, run_cli

#: Kimi K2.6 (card: 32B active at 0.5 bytes per weight, max_context_tokens 262144) on 8 x B300
#: (8 TB/s each): rows 11-13 of the bundled file (a header and 9 rows) plus a concurrency column.
CONTEXT = "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,10000000,100,x,,"
# 100 tok/s for 4 streams against row 2's 133 tok/s for one (both context blank)
TOTAL = "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,100,x,,4"
# 1000 / 5000 = 0.2 ms against 32e9 x 0.5 B / (8 x 8 TB/s) = 0.25 ms (Kimi's 32 B leave the
# input embedding out, embed_params_b 0, so a token reads all of them; the 1.6-bit read,
# 0.1 ms, which fit refuses below, is shorter); context 8192: no repeat of row 2, and more
# than 4096 tokens from row 3's (so its 14.5 ms DDTree step is not held against this one's)
STEP = "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,8192,5000,x,,"

SAYS = {
    11: "context 10000000 is above kimi-k2.6's longest, 262144 tokens (max_position_embeddings,"
        " its card): the model takes no such context unless its RoPE is scaled further: kept, "
        "as a deployment that scales it so takes it; else check --context (tokens, not "
        "characters or bytes)",
    12: "100 tok/s for 4 streams is below one stream's 133 tok/s (row 2: kimi-k2.6 b300x8 "
        "sglang ar, context blank (the default)): was the per-stream tok/s typed as the total? "
        "(tok_s at concurrency C is the C streams' total)",
    13: "step 0.2 ms is shorter than reading kimi-k2.6's active weights at the full bandwidth "
        "(0.25 ms, 0.5 bytes per weight) on 8 x b300: kept, as a deployment quantised below "
        "the card's bytes reads less (give it its own card, `card add --gguf FILE` or "
        "--bytes-per-weight, and name it with --model); else check --tok-s (with "
        "--concurrency, the streams' total), --accept and --gpus",
}


#: What fit says of row 2 (AR at the blank context, 133 tok/s) beside STEP (AR at 8192, 5000
#: tok/s): the row at the shorter context is 1 - 133 / 5000 = 97.3% slower (adv6).
BELOW_STEP = ("133 tok/s at context blank (the default) is 97.3% below row {n}'s 5000 tok/s at "
              "context 8192 of the same configuration ({model} b300x8 sglang ar M=1 at "
              "accept_len 1, 1 stream): a longer context only adds KV cache to read, never a "
              "faster step: was context_tokens the prompt alone? (the mean KV length a decode "
              "step reads, in tokens: the prompt plus half the answer) else check tok_s")


def edited(path: Path, *rows: str) -> Path:
    """The bundled measurements with a concurrency column (blank = 1) and ``rows`` after."""
    header, *body = bundled("measurements.csv").read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([header + ",concurrency", *(r + "," for r in body), *rows])
                    + "\n")
    return path


#: What fit says of a row of a file: add's words, naming the file's columns where add names
#: its flags (a review: fit has no --context, --tok-s or --accept to check).
FIT_SAYS = {
    11: SAYS[11].replace("check --context (", "check context_tokens ("),
    12: SAYS[12],
    13: SAYS[13].replace("name it with --model); else check --tok-s (with --concurrency, the "
                         "streams' total), --accept and --gpus",
                         "name it in the model column); else check tok_s (with concurrency, "
                         "the streams' total), accept_len and gpus"),
}


def test_fit_warns_of_a_hand_edited_row_as_add_does(tmp_path):
    path = edited(tmp_path / "edited.csv", CONTEXT, TOTAL, STEP)
    inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
    assert FIT_SAYS[13] != SAYS[13] and FIT_SAYS[11] != SAYS[11]
    # (STEP's 5000 tok/s at context 8192 also undercuts row 2's 133 at the blank context)
    assert inputs.warnings(inputs.priors) == [
        f"{path}, row 2: " + BELOW_STEP.format(n=13, model="kimi-k2.6"),
        *(f"{path}, row {n}: {FIT_SAYS[n]}" for n in (11, 12, 13))]


@pytest.mark.parametrize("row,n", [(CONTEXT, 11), (TOTAL, 12), (STEP, 13)])
def test_add_says_the_same_words(tmp_path, row, n):
    """`add` of the same row says what fit says of it (its messages are unchanged)."""
    root = copy_bundled_data(tmp_path / "w", writable=True)
    argv = ["--model", "kimi-k2.6", "--hardware", "b300", "--gpus", "8", "--engine",
            "sglang", "--method", "ar", "--accept", "1", "--tok-s", row.split(",")[10],
            "--source", "x"]
    cells = row.split(",")
    if cells[9]:
        argv += ["--context", cells[9]]
    if cells[13]:
        argv += ["--concurrency", cells[13]]
    code, _, err = run_cli(root, "add", *argv)
    assert code == 0
    assert f"ddtree-bayes: warning: row 11: {SAYS[n]}\n" in err


def test_fit_prints_them_before_sampling(tmp_path, monkeypatch, capsys):
    from ddtree_bayes.engine import remedies as R

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    path = edited(tmp_path / "edited.csv", CONTEXT)
    monkeypatch.setattr(R, "ModelSampler", stop)   # (no sampling: the warning comes first)
    with pytest.raises(Stop):
        fitting.fit(path, bundled("priors.toml"), workdir=tmp_path, progress=False)
    assert capsys.readouterr().err == f"ddtree-bayes: warning: {path}, row 11: {FIT_SAYS[11]}\n"


def test_a_row_checked_against_a_later_row(tmp_path):
    """A hand-edited file has no order: a C > 1 row above the AR row it undercuts is warned of
    too (add checks a new row against the rows already there), and said once."""
    header, *body = bundled("measurements.csv").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "above.csv"
    path.write_text("\n".join([header + ",concurrency", TOTAL, *(r + "," for r in body)]) + "\n")
    inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
    assert inputs.warnings(inputs.priors) == [
        f"{path}, row 2: " + SAYS[12].replace("(row 2:", "(row 3:")]


def test_the_bundled_file_is_fitted_without_a_word(tmp_path):
    inputs = fitting.FitInputs.read(bundled("measurements.csv"), bundled("priors.toml"),
                                    workdir=tmp_path)
    assert inputs.warnings(inputs.priors) == []


def test_a_model_without_a_card_is_held_against_no_card(tmp_path):
    """A model without a card is fitted on a proxy card read off its own rows (2 bytes per
    weight assumed): `add` holds such a row against no card, and so does fit (its 0.2 ms step
    is no slip against an assumed read); the rows beside it still say what they say."""
    header, *body = bundled("measurements.csv").read_text(encoding="utf-8").splitlines()
    rows = [r.replace("kimi-k2.6,", "mymodel,") + "," for r in body]
    path = tmp_path / "proxy.csv"
    path.write_text("\n".join([header + ",concurrency", *rows,
                               *(r.replace("kimi-k2.6,", "mymodel,") for r in (STEP, TOTAL))])
                    + "\n")
    inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
    assert inputs.proxy is not None
    assert inputs.warnings(inputs.priors) == [
        f"{path}, row 2: " + BELOW_STEP.format(n=11, model="mymodel"),
        f"{path}, row 12: " + SAYS[12].replace("kimi-k2.6", "mymodel")]


#: HYPOTHETICAL: 16 x B300, two 8-GPU NVLink nodes, at 150 tok/s (0.6 TB of weights fit 4.6 TB)
NODES = "kimi-k2.6,b300,16,sglang,ar,,,1,1.0,,150,x,,"
NODES_SAYS = ("16 x b300 is more GPUs than one node holds (8): kept, but a fit prices them as "
              "one tensor-parallel group on one interconnect, reading together, where across "
              "nodes the all-reduces cross the network, which the step model does not price; "
              "else check --gpus")


def test_a_row_on_more_gpus_than_a_node_holds_is_said(tmp_path):
    """predict says of 16 x B300 (never measured) that one node holds 8 and the network
    between nodes is not priced; `add` and `fit` kept such a row without a word, and once
    fitted the system counts as measured: predict was silent there too. A GB300 rack (one
    NVLink domain of 72) and 8 x B300 are no such rows."""
    path = edited(tmp_path / "nodes.csv", NODES, NODES.replace(",16,", ",72,").replace(
        "b300", "gb300"), NODES.replace(",16,", ",8,").replace(",150,", ",131,"))
    inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
    assert inputs.warnings(inputs.priors) == [
        f"{path}, row 11: " + NODES_SAYS.replace("check --gpus", "check gpus")]
    root = copy_bundled_data(tmp_path / "w", writable=True)
    code, out, err = run_cli(root, "add", "--hardware", "b300", "--gpus", "16", "--engine",
                             "sglang", "--method", "ar", "--accept", "1", "--tok-s", "150",
                             "--source", "x", "--format", "json")
    assert code == 0, err
    assert err == f"ddtree-bayes: warning: row 11: {NODES_SAYS}\n"
    import json

    assert json.loads(out)["warnings"] == [f"row 11: {NODES_SAYS}"]


#: Notes `add --from-bench` wrote before a row's context counted the decode (d4933a6).
OLD_NOTES = {
    "vllm-serve": "vllm bench serve (vllm-serve): tok_s = 1000/median_tpot_ms (2.9 ms; decode "
                  "only, first token excluded); context_tokens = total_input_tokens/completed, "
                  "rounded; bench result 0123456789ab",
    "llama-bench": "llama-bench (llama-bench json): tok_s = avg_ts of test tg128 @ d4096 (mean "
                   "of samples_ts, generation only); context_tokens = n_depth; model_type "
                   "'llama 8B Q4_K - Medium'; bench result 0123456789ac",
    "vllm-latency": "vllm bench latency (vllm-latency): tok_s = batch_size*output_len/"
                    "avg_latency = 1*128/1.02; batch_size/output_len from flags; whole "
                    "generation, includes the prefill of input_len tokens and engine overhead; "
                    "bench result 0123456789ad",
}


def test_fit_says_a_row_imported_with_its_prompt_alone_as_context(tmp_path):
    """Rows `add --from-bench` wrote before 2026-12-06 hold the file's prompt as their context
    (a 1024-in / 1024-out serving run at 1024 where its decode read 1536 on average); the
    import cannot fix them (a second import is refused as a duplicate), so fit names each, from
    the notes the import wrote. A row imported since, one whose --context replaced the file's,
    and a blank context are not named."""
    new = OLD_NOTES["vllm-serve"].replace(
        "rounded;", "rounded + total_output_tokens/completed/2, rounded: the mean KV a decode "
                    "step reads, the prompt plus half the output;")
    replaced = OLD_NOTES["vllm-serve"].replace(
        "total_input_tokens/completed, rounded", "--context 1536 (the file's: 1024)")
    rows = [f"kimi-k2.6,b300,8,vllm,ar,,,1,1.0,{ctx},131,x,\"{re.sub('[0-9a-f]{12}$', f'{i:012x}', notes)}\","
            for i, (ctx, notes) in enumerate((
                (1024, OLD_NOTES["vllm-serve"]), (4096, OLD_NOTES["llama-bench"]),
                (512, OLD_NOTES["vllm-latency"]), (1280, new), (1536, replaced),
                ("", OLD_NOTES["vllm-serve"])))]   # (each its own bench result id)
    path = edited(tmp_path / "imported.csv", *rows)
    inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
    said = [w for w in inputs.warnings(inputs.priors) if "prompt alone" in w]
    assert said == [f"{path}, row {n}: context_tokens {ctx} is its benchmark file's prompt alone "
                    "(an add --from-bench import before 2026-12-06): a decode step read the "
                    "prompt plus half the output on average (1024 in, 1024 out: 1536), which "
                    "the context cost is linear in; write that figure, or delete the row and "
                    "import the file again" for n, ctx in ((11, 1024), (12, 4096), (13, 512))]


def test_fit_says_a_speculative_step_below_ar_once_of_the_speculative_row(tmp_path):
    """An AR row at 50 tok/s (a 20 ms step) typed beside the bundled RTX PRO 6000 rows: row 9's
    EAGLE-3 (accept 1.948 at 125 tok/s, context 0) is a 15.58 ms step, 22.1% shorter, which no
    deployment does (add says it of whichever row comes second). fit says it once, of the
    speculative row, naming the AR row; row 10 (34.97 ms at context 131072) is no contradiction
    (AR's longest step at a context that short or shorter is this 20 ms)."""
    path = edited(tmp_path / "edited.csv", "kimi-k2.6,rtx-pro-6000,8,vllm,ar,,,1,1.0,0,50,x,,")
    inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
    assert inputs.warnings(inputs.priors) == [
        f"{path}, row 9: eagle3's step, 15.6 ms (125 tok/s at accept_len 1.948), is 22.1% "
        "shorter than ar's 20 ms (row 11: 50 tok/s; kimi-k2.6 rtx-pro-6000x8 vllm, context 0): "
        "a speculative step verifies 4 tokens and runs the drafter, never in less time than one "
        "token's step on the same deployment: two deployments under one name (a power limit, "
        "another quantisation or engine version)? give one its own GPU name (`ddtree-bayes "
        "hardware add NAME --like rtx-pro-6000`) or model card; else check accept_len and tok_s",
        # (adv6: the same AR row is 40.9% slower at context 0 than row 5's 84.6 tok/s at 16384)
        f"{path}, row 11: 50 tok/s at context 0 is 40.9% below row 5's 84.6 tok/s at context "
        "16384 of the same configuration (kimi-k2.6 rtx-pro-6000x8 vllm ar M=1 at accept_len 1, "
        "1 stream): a longer context only adds KV cache to read, never a faster step: was "
        "context_tokens the prompt alone? (the mean KV length a decode step reads, in tokens: "
        "the prompt plus half the answer) else check tok_s"]


def test_no_public_file_has_a_speculative_step_below_ar(tmp_path):
    """The rules do not fire on the data the project fits: the public corpus, whose 136 rows
    come from 30-odd deployments, and the bundled file (neither a speculative step below AR's,
    nor a step growing past twice its verified tokens' ratio, nor a total below fewer
    streams', nor a row slower than at a longer context)."""
    corpus = Path(__file__).resolve().parents[1] / "data" / "examples" / "public_multi_model.csv"
    for path in (corpus, bundled("measurements.csv")):
        inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
        assert not [w for w in inputs.warnings(inputs.priors)
                    if "never in less time" in w or "the verified tokens" in w
                    or "never yields fewer" in w or "never a faster step" in w]


def test_fit_says_a_total_below_fewer_streams_once_of_the_row_at_more(tmp_path):
    """adv6: EAGLE-3 at 8 streams and 110 tok/s typed beside row 9 (one stream, 125 tok/s, the
    same accept_len 1.948 and context 0): 12.0% fewer tokens a second for 8 streams than for
    one. fit says it once, of the row at more streams, naming row 9."""
    path = edited(tmp_path / "edited.csv", "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,1.948,0,110,x,,8")
    inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
    assert inputs.warnings(inputs.priors) == [
        f"{path}, row 11: 110 tok/s for 8 streams is 12.0% below row 9's 125 tok/s for 1 stream "
        "of the same configuration (kimi-k2.6 rtx-pro-6000x8 vllm eagle3 M=4 at accept_len "
        "1.948, context 0): decoding more streams together never yields fewer tokens a second "
        "(the weights are read once a step for all of them): was one stream's tok/s typed as "
        "the total? (tok_s at concurrency C is the C streams' total); or did the KV cache "
        "hold fewer than 8 streams (the engine queues the rest: fewer decode together)?"]


def test_two_rows_of_one_configuration_both_without_accept_len_are_compared():
    """Two rows of one configuration that both leave accept_len blank share one inferred
    acceptance in the fit (core/acceptance_latent.py): their tok/s compare as they are, as two
    runs of one drafter emit alike whatever the streams beside them. They were skipped (both
    blank), so the public sweeps' KV-cache-full C = 128 rows went unsaid. By hand: EAGLE-3
    at 8 streams and 80 tok/s beside one stream's 100: 1 - 80 / 100 = 20.0% below; at 4
    streams, context 0 and 300 tok/s beside context 32768's 400: 25.0% below. One row
    measured beside one blank is still not compared (the blank's tok/s per accepted token is
    unknown)."""
    from ddtree_bayes.core.row_notes import cross_row_notes

    one, eight = _row(2, "eagle3", 0.0, 100.0, 1, accept=None), \
        _row(3, "eagle3", 0.0, 80.0, 8, accept=None)
    assert cross_row_notes(eight, [one], repeats=False) == [
        "80 tok/s for 8 streams is 20.0% below row 2's 100 tok/s for 1 stream of the same "
        "configuration (llama-3.1-8b-instruct h100x1 vllm eagle3 M=4 at accept_len blank "
        "(inferred by the fit), context 0): decoding more streams together never yields fewer "
        "tokens a second (the weights are read once a step for all of them): was one stream's "
        "tok/s typed as the total? (tok_s at concurrency C is the C streams' total); or did "
        "the KV cache hold fewer than 8 streams (the engine queues the rest: fewer decode "
        "together)?"]
    short, long = _row(4, "eagle3", 0.0, 300.0, 4, accept=None), \
        _row(5, "eagle3", 32768.0, 400.0, 4, accept=None)
    assert cross_row_notes(short, [long], repeats=False) == [
        "300 tok/s at context 0 is 25.0% below row 5's 400 tok/s at context 32768 of the same "
        "configuration (llama-3.1-8b-instruct h100x1 vllm eagle3 M=4 at accept_len blank "
        "(inferred by the fit), 4 streams): a longer context only adds KV cache to read, never "
        "a faster step: was --context the prompt alone? (the mean KV length a decode step "
        "reads, in tokens: the prompt plus half the answer); or did the KV cache hold fewer "
        "than 4 streams (the engine queues the rest: fewer decode together)? else check "
        "--tok-s"]
    measured = dataclasses.replace(one, accept_len=2.0)
    assert cross_row_notes(eight, [measured], repeats=False) == []


def _public_pairs(shape_pair):
    """(file, row, other row, tok/s-per-accepted-token ratio) of every pair of rows of one
    model, system and engine in data/public and data/public/conc for which ``shape_pair(m, r)``
    holds (files whose rows need a drafter card to derive verify_tokens are not read alone)."""
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.errors import DataError
    from ddtree_bayes.core.likelihood import run_rate

    root = Path(__file__).resolve().parents[1] / "data" / "public"
    methods = load_priors(bundled("priors.toml")).methods
    hardware = load_hardware(bundled("hardware.csv"))
    found = []
    for path in sorted([*root.glob("*.csv"), *root.glob("conc/*.csv")]):
        try:
            rows = load_measurements(path, hardware, methods=methods).rows
        except DataError:   # (hardware_flops.csv; two sweeps of a drafter card's depth)
            continue
        found += [(path.name, m.row, r.row, run_rate(m) / run_rate(r)) for m in rows for r in rows
                  if r is not m and (r.model, r.hardware, r.gpus, r.engine)
                  == (m.model, m.hardware, m.gpus, m.engine) and shape_pair(m, r)]
    return found


def test_no_public_sweep_has_a_total_below_fewer_streams():
    """The public concurrency sweeps hold 2846 pairs of one configuration at two
    concurrencies (the more streams at a context as short or shorter), both with accept_len:
    the more streams' total is at least 1.11x the fewer's per accepted token in every one
    (vLLM EAGLE-3 on 8 x RTX PRO 6000, DCP 1, rows 40 and 39), far from the 0.9 row_notes
    says below. Of the pairs both without accept_len, three are below it (KV caches full)."""
    from ddtree_bayes.core import row_notes as N

    every = _public_pairs(lambda m, r: m.concurrency > r.concurrency and N._same_shape(m, r)
                          and m.context(0.0) <= r.context(0.0)
                          + N.CONTEXT_SLACK_TOKENS / m.concurrency)
    measured = _public_pairs(lambda m, r: m.accept_len is not None and m.concurrency
                             > r.concurrency and N._same_shape(m, r) and m.context(0.0)
                             <= r.context(0.0) + N.CONTEXT_SLACK_TOKENS / m.concurrency)
    assert len(measured) == 2846
    assert min(p[3] for p in measured) == pytest.approx(1.1106, abs=1e-4)
    assert min(measured, key=lambda p: p[3])[:3] == (
        "vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv", 40, 39)
    # pairs that both leave accept_len blank (compared since: one inferred acceptance) add
    # 2661, of which three rows' totals fall below fewer streams', each a KV cache full at
    # 128k (its notes: queue_fraction 0.81 at C = 128 for the Qwen3.5 AWQ row 81)
    assert len(every) == 5507
    assert sorted((p[0], p[1], p[2], round(p[3], 4)) for p in every if p[3] < 0.9) == [
        ("vllm_eagle3_kimi_k26_rtxpro6000x8_dcp1_conc.csv", 80, 79, 0.7147),
        ("vllm_mtp_qwen35_397b_awq_rtxpro6000srvx4_conc.csv", 81, 79, 0.7958),
        ("vllm_mtp_qwen35_397b_awq_rtxpro6000srvx4_conc.csv", 81, 80, 0.4872)]


def test_no_public_sweep_is_slower_at_a_shorter_context():
    """The public sweeps hold pairs of one configuration and concurrency at two contexts more
    than 4096 / C tokens apart: the shorter context's tok/s per accepted token is never below
    the longer's, far from the 0.9 row_notes says below (the corpus's closest, rows 113 and
    104, is 0.975: test_no_public_file_has_a_speculative_step_below_ar)."""
    from ddtree_bayes.core import row_notes as N

    def shorter(m, r):
        return (m.concurrency == r.concurrency and N._same_shape(m, r)
                and m.context(0.0) + N.CONTEXT_SLACK_TOKENS / m.concurrency < r.context(0.0))

    pairs = _public_pairs(shorter)
    measured = _public_pairs(lambda m, r: m.accept_len is not None and shorter(m, r))
    assert len(measured) == 561
    assert min(p[3] for p in measured) == pytest.approx(1.0, abs=1e-9)
    # with the pairs that both leave accept_len blank: 1113, one below 0.9, the Qwen3.5 AWQ
    # sweep's 32k row at 128 streams (queue_fraction 0.77: a KV cache full) under 64k's
    assert len(pairs) == 1113
    assert [(p[0], p[1], p[2], round(p[3], 4)) for p in pairs if p[3] < 0.9] == [
        ("vllm_mtp_qwen35_397b_awq_rtxpro6000srvx4_conc.csv", 65, 73, 0.879)]


def _row(row, method, context, tok_s, concurrency, accept=1.0):
    from ddtree_bayes.core.data import Measurement

    spec = method != "ar"
    return Measurement(row, "llama-3.1-8b-instruct", "h100", 1, "vllm", method,
                       3 if spec else None, None, 4 if spec else 1, accept, context, tok_s,
                       "x", "", concurrency)


@pytest.mark.parametrize(("concurrency", "ar_context", "warned"), [
    (1, 4096.0, True),     # 4096 tokens of KV a step: 0.5 GB beside 16 GB of weights, 3%
    (16, 4096.0, False),   # 16 streams x 4096: 8.6 GB beside 16 GB, +54%: no contradiction
    (16, 200.0, True),     # 16 x 200 = 3200 tokens of KV a step: within the slack
])
def test_the_context_slack_counts_the_kv_every_stream_reads(concurrency, ar_context, warned):
    """A speculative step shorter than AR's at a context up to CONTEXT_SLACK_TOKENS longer was
    said as two deployments under one name, the slack's 4096 tokens justified by one stream's
    KV read (Llama-3.1-8B: 128 KB a token, 0.5 GB beside 16 GB of bf16 weights). A step at C
    reads C streams' KV: AR at C = 16 and context 4096 reads 16 x 4096 x 128 KB = 8.6 GB more
    than at context 0, a step ~1.5x longer, so EAGLE-3 at context 0 and C = 16 (accept 2.5 at
    5000 tok/s: 2.5 x 16 / 5000 = 8 ms) 20% below that AR step (16 / 1600 = 10 ms) is one
    deployment's. The slack now counts KV tokens a step reads: C x the contexts' gap."""
    from ddtree_bayes.core.row_notes import cross_row_notes

    c = concurrency
    ar = _row(2, "ar", ar_context, 100.0 * c, c)              # 1 x C / tok_s = 10 ms
    eagle = _row(3, "eagle3", 0.0, 312.5 * c, c, accept=2.5)  # 2.5 x C / tok_s = 8 ms
    said = [n for n in cross_row_notes(eagle, [ar], repeats=False) if "never in less" in n]
    back = [n for n in cross_row_notes(ar, [eagle], repeats=False) if "never in less" in n]
    assert (len(said), len(back)) == ((1, 1) if warned else (0, 0))
    if warned:
        assert said[0].startswith(f"eagle3's step, 8 ms ({312.5 * c:g} tok/s at accept_len "
                                  "2.5), is 20.0% shorter than ar's 10 ms (row 2: ")


def test_fit_says_a_row_slower_than_at_a_longer_context_once(tmp_path):
    """adv6: an AR row at context 32 (32k typed in thousands) and 75 tok/s beside the bundled
    RTX PRO 6000 sweep: row 5 decodes 84.6 tok/s at 16384 tokens, 11.3% faster than this row at
    32 (1 - 75 / 84.6); row 6's 79.6 at 32768 is 5.8% (within the scatter). fit says it once,
    of the row at the shorter context, naming the thousands it may have been typed in."""
    path = edited(tmp_path / "edited.csv", "kimi-k2.6,rtx-pro-6000,8,vllm,ar,,,1,1.0,32,75,x,,")
    inputs = fitting.FitInputs.read(path, bundled("priors.toml"), workdir=tmp_path)
    assert inputs.warnings(inputs.priors) == [
        f"{path}, row 11: 75 tok/s at context 32 is 11.3% below row 5's 84.6 tok/s at context "
        "16384 of the same configuration (kimi-k2.6 rtx-pro-6000x8 vllm ar M=1 at accept_len 1, "
        "1 stream): a longer context only adds KV cache to read, never a faster step: was "
        "context_tokens typed in thousands (32 for 32768 tokens) or the prompt alone? (the mean "
        "KV length a decode step reads, in tokens: the prompt plus half the answer) else check "
        "tok_s"]


def test_a_blank_context_is_the_default_in_every_check_against_ar():
    """adv8: the two checks of a row against one stream's AR tok/s (a C > 1 total below it; a
    speculative row at accept_len 1 faster than it) compared contexts as written, a blank
    one "only with a blank one", where every other check, and the fit, read a blank context as
    the priors' default. So `add --concurrency 8 --tok-s 120 --context 0` of a DDTree run on
    b300 x8, beside row 2's AR 133 tok/s at the blank (default 0) context, was kept without a
    word (120 < 133: one stream's tok/s typed as the 8 streams' total), and warned only when
    --context was left out. Now both read blank as ``default_context``."""
    from ddtree_bayes.core.data import Measurement
    from ddtree_bayes.core.row_notes import cross_row_notes

    def row(n, method, block, budget, verify, accept, context, tok_s, concurrency=1):
        return Measurement(n, "kimi-k2.6", "b300", 8, "sglang", method, block, budget, verify,
                           accept, context, tok_s, "x", "", concurrency)

    ar = row(2, "ar", None, None, 1, 1.0, None, 133.0)             # blank: the default, 0
    total = row(11, "ddtree", 16, 32, 33, 10.0, 0.0, 120.0, concurrency=8)
    said = ("120 tok/s for 8 streams is below one stream's 133 tok/s (row 2: kimi-k2.6 b300x8 "
            "sglang ar, context blank (the default)): was the per-stream tok/s typed as the "
            "total? (tok_s at concurrency C is the C streams' total)")
    assert cross_row_notes(total, [ar]) == [said]
    assert cross_row_notes(dataclasses.replace(total, context_tokens=None), [ar]) == [said]
    # at a default of 8192 the blank AR row ran at 8192: a total at 0 is still held to it;
    # one at 16384 (longer than the AR row's) is not
    assert cross_row_notes(total, [ar], default_context=8192.0) == [said]
    assert cross_row_notes(dataclasses.replace(total, context_tokens=16384.0), [ar],
                           default_context=8192.0) == []
    # EAGLE-3 at accept_len 1 (one token a step) at 140 tok/s, faster than AR's 133
    one = row(12, "eagle3", 3, None, 4, 1.0, 0.0, 140.0)
    assert [n for n in cross_row_notes(one, [ar]) if n.startswith("eagle3 at accept_len 1")] \
        == ["eagle3 at accept_len 1 (one token a step, each dearer than autoregressive "
            "decoding's) at 140 tok/s is faster than ar's 133 tok/s (row 2: kimi-k2.6 b300x8 "
            "sglang, context blank (the default)): was an acceptance rate (0 to 1) typed as the "
            "length? (accept_len counts the accepted draft tokens plus the bonus token)"]


def test_how_far_below_is_one_rule_for_fewer_streams_and_longer_context():
    """The total below fewer streams and the step faster at a longer context each worked out
    how far one row is below the other and whether that is per accepted token (core/row_notes.py
    ``_fewer_streams``, ``_longer_context``): one helper now. 90 tok/s at accept 4 is 10.0%
    below 100 at accept 4; 150 at accept 6 (25 steps a second) is 16.7% below 120 at accept
    4 (30), per accepted token."""
    from ddtree_bayes.core import row_notes as RN
    from ddtree_bayes.core.data import Measurement

    def row(n: int, tok_s: float, accept: float) -> Measurement:
        return Measurement(n, "m", "b300", 8, "sglang", "ddtree", 16, 32, 33, accept, None,
                           tok_s, "s", "")

    assert RN._how_far_below(row(2, 90.0, 4.0), row(3, 100.0, 4.0)) == ("10.0% below", "")
    assert RN._how_far_below(row(2, 150.0, 6.0), row(3, 120.0, 4.0)) == (
        "16.7% below", " (per accepted token)")


def _ddtree_run(row: int, tok_s: float, accept: float = 4.4):
    from ddtree_bayes.core.data import Measurement

    return Measurement(row, "kimi-k2.6", "b300", 8, "sglang", "ddtree", 8, 8, 9, accept, None,
                       tok_s, "s", "")


def test_runs_far_apart_are_named_by_their_own_tok_s():
    """Two runs of one speculative configuration at the same accept_len (B300 DDTree block 8
    budget 8 at 4.4: row 3's 303 tok/s and a new 1000) were said as "227.3 tok/s is 3.3x apart
    from row 3's 68.86 tok/s": each tok/s divided by the accept_len (steps per second), labelled
    tok/s, numbers no row holds. At the same accept_len the rows' own tok/s are said (the ratio
    is the same, 1000 / 303 = 3.30); at different ones the per-accepted-token rates, so
    labelled, as before (1000 / 5 = 200 against 303 / 4.4 = 68.86: 2.9x)."""
    from ddtree_bayes.core.likelihood import far_apart_repeats
    from ddtree_bayes.core.row_notes import cross_row_notes

    old = _ddtree_run(3, 303.0)
    (note,) = [n for n in cross_row_notes(_ddtree_run(11, 1000.0), [old]) if "apart" in n]
    assert note.startswith("1000 tok/s is 3.3x apart from row 3's 303 tok/s, a run of the "
                           "same configuration (kimi-k2.6, b300x8 sglang ddtree M=9)")
    (line,) = far_apart_repeats([old, _ddtree_run(11, 1000.0)])
    assert "3.3x apart: 303 and 1000 tok/s;" in line
    (note,) = [n for n in cross_row_notes(_ddtree_run(11, 1000.0, accept=5.0), [old])
               if "apart" in n]
    assert note.startswith("200 tok/s per accepted token is 2.9x apart from row 3's 68.86 "
                           "tok/s per accepted token")
    (line,) = far_apart_repeats([old, _ddtree_run(11, 1000.0, accept=5.0)])
    assert "2.9x apart: 68.86 and 200 tok/s per accepted token;" in line

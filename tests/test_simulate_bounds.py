"""``simulate`` bounds a design row as the rest of the tool bounds a question of its model:
a context past the truth model's card's longest (core/row_notes.py ``context_above_max``,
``step_reach_above_max``: what predict, next and optimize say of such a question) and a block
above its drafter's trained block (core/drafters.py ``row_block_problem``: what add, fit and
predict refuse). A design of 1e9 tokens of context simulated a row of 0.03 tok/s, exit 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_cli_support import listing, run_cli

pytestmark = pytest.mark.fast

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "examples"
HEAD = "hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"


def _work(tmp_path: Path, model: str, rows: str) -> Path:
    """A folder with the dense consumer truth (its model renamed ``model``, its ddtree group
    on sglang) and a design of ``rows``."""
    truth = (EXAMPLES / "truth_dense_consumer.toml").read_text()
    assert 'model = "dense-8b"' in truth
    (tmp_path / "truth.toml").write_text(truth.replace('model = "dense-8b"',
                                                       f'model = "{model}"'))
    (tmp_path / "design.csv").write_text(HEAD + rows)
    return tmp_path


def _simulate(work: Path) -> tuple[int, str, str]:
    return run_cli(work, "simulate", "--truth", "truth.toml", "--design", "design.csv",
                   "--out", "sim.csv")


@pytest.mark.parametrize(("rows", "line", "fix"), [
    # qwen3-8b's card: max_context_tokens 40960. AR reads the context itself
    ("rtx-5090,1,vllm,ar,,,1,0\nrtx-5090,1,vllm,ar,,,1,1000000000\n",
     "row 3, column 'context_tokens': context 1000000000 is above qwen3-8b's longest, 40960 "
     "tokens (max_position_embeddings, its card)", 40960),
    ("rtx-5090,1,vllm,ar,,,1,40961\n",
     "row 2, column 'context_tokens': context 40961 is above qwen3-8b's longest, 40960 tokens",
     40960),
    # a chain of block 3 verifies 4 tokens: after 40958 they take 40958 .. 40961 (40958 + 4 - 1)
    ("rtx-5090,1,vllm,eagle3,3,,2.5,40958\n",
     "row 2, column 'context_tokens': a step verifies 4 tokens after a context of 40958, "
     "reaching position 40961, above qwen3-8b's longest, 40960 tokens (its card): no engine "
     "runs such a step", 40957),
])
def test_a_context_past_the_cards_longest_is_refused(tmp_path, rows, line, fix):
    work = _work(tmp_path, "qwen3-8b", rows)
    before = listing(work)
    code, out, err = _simulate(work)
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err.startswith(f"ddtree-bayes: error: design.csv, {line}"), err
    assert err.endswith(f"(fix: write a context of at most {fix} tokens (its verified tokens' "
                        "last position at the card's 40960), or simulate a model whose card "
                        "takes it)\n"), err
    assert listing(work) == before   # (nothing written)


def test_the_longest_context_itself_is_simulated(tmp_path):
    """40960 for AR (position 40960) and 40957 for the block-3 chain (its 4 tokens end at
    40957 + 4 - 1 = 40960) are within the card: simulated."""
    work = _work(tmp_path, "qwen3-8b", "rtx-5090,1,vllm,ar,,,1,40960\n"
                                       "rtx-5090,1,vllm,eagle3,3,,2.5,40957\n")
    code, out, err = _simulate(work)
    assert code == 0, err
    rows = (work / "sim.csv").read_text().splitlines()[1:]
    assert [r.split(",")[9] for r in rows] == ["40960", "40957"]


def test_a_model_without_a_card_or_its_longest_is_not_bounded_by_one(tmp_path):
    """dense-8b (the example truth's) has no card, and qwen3.8-27b's card gives no longest
    context: nothing to hold the context against, simulated as before."""
    for model in ("dense-8b", "qwen3.8-27b"):
        (tmp_path / model).mkdir()
        work = _work(tmp_path / model, model, "rtx-5090,1,vllm,ar,,,1,1000000\n")
        code, _, err = _simulate(work)
        assert code == 0, (model, err)


@pytest.mark.parametrize(("rows", "line"), [
    # qwen3-8b's DDTree drafter, z-lab/Qwen3-8B-DFlash-b16: block_size 16 (data/drafters.csv)
    ("rtx-5090,1,sglang,ddtree,32,64,6,0\n",
     "row 2, column 'block': block 32 is above the block 16 qwen3-8b's ddtree drafter "
     "z-lab/Qwen3-8B-DFlash-b16 was trained at (its card's block_size) (fix: give a block of "
     "at most 16, or give qwen3-8b a default ddtree drafter trained at block 32"),
    # no block: the trained block bounds the acceptance, 16 - 1 drafts + 1 = 16 (budget 64
    # alone allowed 65)
    ("rtx-5090,1,sglang,ddtree,16,64,6,0\nrtx-5090,1,sglang,ddtree,,64,20,0\n",
     "row 3, column 'accept_len': accept_len 20 is above what ddtree with a drafter trained at "
     "block 16 can emit (at most 16 tokens per step: the trained block - 1 drafts + 1)"),
])
def test_a_block_above_the_drafters_trained_block_is_refused(tmp_path, rows, line):
    """A design row of qwen3-8b at DDTree block 32 simulated a row (exit 0) that add and fit
    refuse: simulate now refuses it with their rule (core/drafters.py row_block_problem)."""
    work = _work(tmp_path, "qwen3-8b", rows)
    before = listing(work)
    code, out, err = _simulate(work)
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err.startswith(f"ddtree-bayes: error: design.csv, {line}"), err
    assert listing(work) == before


def test_the_trained_block_itself_and_a_model_without_the_drafter_are_simulated(tmp_path):
    """Block 16 with 16 tokens a step, or no block with 16, is what the drafter emits; the
    example truth's dense-8b has no drafter card: its block 32 is simulated as before."""
    rows = "rtx-5090,1,sglang,ddtree,16,64,16,0\nrtx-5090,1,sglang,ddtree,,64,16,0\n"
    (tmp_path / "q").mkdir()
    code, _, err = _simulate(_work(tmp_path / "q", "qwen3-8b", rows))
    assert code == 0, err
    (tmp_path / "d").mkdir()
    code, _, err = _simulate(_work(tmp_path / "d", "dense-8b",
                                   "rtx-5090,1,sglang,ddtree,32,64,20,0\n"))
    assert code == 0, err


def test_a_designs_block_refusal_asks_for_a_default_drafter_and_following_it_simulates(
        tmp_path):
    """A design has no drafter column (its rows draft with the model's default drafter), yet
    the refusal of block 32 said "name a drafter trained at block 32": it asks now for a
    default card trained at block 32, and with that card in data/drafters.csv (block_size 32)
    the same design is simulated."""
    work = _work(tmp_path, "qwen3-8b", "rtx-5090,1,sglang,ddtree,32,64,6,0\n")
    code, _, err = _simulate(work)
    assert code == 2 and err.endswith(
        "(fix: give a block of at most 16, or give qwen3-8b a default ddtree drafter trained at "
        "block 32 (its card in data/drafters.csv, with block_size 32; a design has no drafter "
        "column: its rows draft with the model's default drafter))\n"), err
    (work / "data").mkdir()
    (work / "data" / "drafters.csv").write_text(
        "drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
        "bytes_per_weight,source,block_size\n"
        "my/qwen3-8b-dflash-b32,qwen3-8b,ddtree,dflash_block,5,1.0,0.6,2,a test card,32\n")
    code, _, err = _simulate(work)
    assert code == 0, err


def test_one_rule_per_command_class_for_a_context_past_the_card():
    """simulate refuses a design row past its model card's longest context (above) while
    predict only warns: one documented rule per command class (docs/cli.md, `simulate`). A
    design is data nothing can measure: refused. A question is answered and warned of, by
    the one resolver predict, next --query, track and optimize (acceptance=False) share:
    Kimi K2.6's card takes 262,144 tokens, so --context 300000 is warned of, not refused."""
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.engine.testing import multi_model_draws
    from ddtree_bayes.workflows.decisions import parse_query

    line = ("context 300000 is above kimi-k2.6's longest, 262144 tokens "
            "(max_position_embeddings, its card): the model takes no such context unless its "
            "RoPE is scaled further, and the answer extrapolates its context cost past it")
    d = multi_model_draws()
    asked = Flags(model="kimi-k2.6", context="300000", accept="14")
    assert line in resolve(d, asked).warnings                          # predict, track
    assert line in resolve(d, Flags(model="kimi-k2.6", context="300000"),
                           acceptance=False).warnings                  # optimize
    assert f"--query: {line}" in parse_query(
        d, "--model kimi-k2.6 --context 300000 --accept 14").warnings   # next --query

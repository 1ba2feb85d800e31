"""One question, one number, whichever command asks it (trust review round 14).

The same configuration, seed and fit asked through ``predict`` (table, ``--format json`` and
``csv``, ``--explain``, ``--concurrency``), ``next --query`` (its "now"), ``track add`` (its
"now"), ``report`` (its default question) and the Python API gives the same median and
intervals; each output is consistent in itself (lo90 <= lo50 <= median <= hi50 <= hi90, total =
per user x C on the same draws, probabilities in [0, 1]); and the ``original +-30%`` column is
the seed estimate table's own figure where the configuration and acceptance are a row of it.
"""

from __future__ import annotations

import pytest

from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.testing import point_mass_draws

# ---------------------------------------------------------------- the original +-30% column
#: data/seed_estimates.csv's deterministic rows (B300 x8, DDTree block 16 budget 32, M = 33):
#: (engine, accept) -> the tok/s the original estimate quoted.
SEED_ROWS = {("sglang", 12.0): 570.0, ("sglang", 16.0): 765.0,
             ("native", 12.0): 815.0, ("native", 16.0): 1090.0}


def test_original_column_quotes_the_seed_table_at_its_own_rows():
    """At accept 12 the original estimate said 570 tok/s (+-30%: 399-741); predict printed
    572 (400-743), accept / the mean step of the table's two rows (12/570 and 16/765 ms per
    token, 21.05 and 20.92 ms per step: the quoted figures are rounded to 5 tok/s), and 762
    for its 765, 816 for 815, 1088 for 1090. A row of the table is quoted as it is; an
    acceptance between them (14, U(12,16)'s mean 14) keeps accept / the mean step."""
    rows = P.predict(point_mass_draws(), accept="12,14,16", engines=["sglang", "native"])
    got = {(r["engine"], float(r["accept"])): r for r in rows}
    for key, figure in SEED_ROWS.items():
        assert got[key]["original"] == pytest.approx(figure, abs=1e-9), key
        assert got[key]["original_lo"] == pytest.approx(figure * 0.7, abs=1e-9)
        assert got[key]["original_hi"] == pytest.approx(figure * 1.3, abs=1e-9)
    step = (12 / 570 + 16 / 765) / 2 * 1000   # ms per step, the mean of the two rows'
    assert got[("sglang", 14.0)]["original"] == pytest.approx(14 / step * 1000)
    native_step = (12 / 815 + 16 / 1090) / 2 * 1000
    assert got[("native", 14.0)]["original"] == pytest.approx(14 / native_step * 1000)


# ---------------------------------------------------------------- the asked system's own rows
LLAMA = "llama-3.1-8b-instruct"
#: Llama on one H100: eagle3 block 7 (its most-measured configuration) and one mtp block 2 row.
H100_ROWS = (f"{LLAMA},h100,1,vllm,eagle3,7,7,8,3.5,,200,test,\n"
             f"{LLAMA},h100,1,vllm,eagle3,7,7,8,3.6,,205,test,\n"
             f"{LLAMA},h100,1,vllm,mtp,2,2,3,2.2,,180,test,\n")
#: ... and on one H200, five eagle3 rows: then H200, not H100, is Llama's default system.
H200_ROWS = "".join(f"{LLAMA},h200,1,vllm,eagle3,{b},{b},{b + 1},3.5,,230,test,\n"
                    for b in (3, 4, 5, 6, 7))


def _llama_fit(extra: str, systems: tuple[str, ...]):
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws

    d = multi_model_draws()
    return d.view(data_csv=MULTI_DATA + extra,
                  meta={**d.meta, "coords": {**d.meta["coords"], "system": list(systems)}})


@pytest.mark.parametrize("h200", [False, True], ids=["h100-is-the-default", "h200-is"])
def test_the_asked_systems_own_rows_shape_a_method_whether_or_not_it_is_the_default(h200):
    """``--hardware h100 --gpus 1 --engine vllm --method mtp`` (no block) takes H100's own
    mtp rows' shape, block 2, whichever system is the model's default: it was refused
    ("cannot tell how many tokens mtp verifies per step") when H100 was the default system
    (eagle3 block 7) and answered block 2 when H200 was. On a real fit of
    data/examples/public_multi_model.csv, `next --query "--model qwen3.8-27b --hardware
    rtx-3090 --gpus 1 --engine vllm --method dflash"` exited 2 so where predict answered:
    the query itself, simulated as measured, made RTX 3090 the model's default system. Both
    commands resolve the query alike."""
    from ddtree_bayes.engine.question import Flags, default_question, resolve
    from ddtree_bayes.workflows.decisions.next_measurement import parse_query

    systems = ("kimi-k2.6@b300x8", f"{LLAMA}@h100x1") + ((f"{LLAMA}@h200x1",) if h200 else ())
    fit = _llama_fit(H100_ROWS + (H200_ROWS if h200 else ""), systems)
    assert default_question(fit, LLAMA).hardware == ("h200" if h200 else "h100")
    q = resolve(fit, Flags(model=LLAMA, hardware="h100", gpus=1, engines=("vllm",),
                           method="mtp"))
    sc = q.asked[0].scenario
    assert (sc.hardware, sc.method, sc.block, sc.budget, sc.verify_tokens) == (
        "h100", "mtp", 2, 2, 3)
    assert "the flags not given come from its own rows: --block 2 --budget 2" in q.note
    asked = parse_query(fit, f"--model {LLAMA} --hardware h100 --gpus 1 --engine vllm "
                             "--method mtp").scenario
    assert asked == sc
    # the default's own method keeps the default's shape, as before
    own = resolve(fit, Flags(model=LLAMA, hardware="h100", gpus=1, method="eagle3"))
    assert (own.asked[0].scenario.block, own.asked[0].scenario.budget) == (7, 7)

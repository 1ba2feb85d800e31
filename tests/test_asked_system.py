"""A question that names a measured system takes the flags it leaves out from that system's
own rows (core/default_question.py ``system_default``, engine/question.py
``question_default``), not from another system's: ``predict --model qwen3.8-27b --hardware
rtx-3090 --gpus 2 --method mtp --block 1`` filled ``--engine llama.cpp`` from the model's
most-measured system (an RTX 5090) and answered 93 tok/s where the 3090s measured vLLM at 56;
``predict --hardware rtx-pro-6000`` on the bundled fit answered sglang/native DDTree where
only vLLM EAGLE-3 was measured there."""

from __future__ import annotations

from ddtree_bayes.core.config import DEFAULT_QUESTION
from ddtree_bayes.core.data import Measurement, derive_verify_tokens
from ddtree_bayes.core.default_question import fit_default, system_default
from ddtree_bayes.engine.question import Flags, resolve
from ddtree_bayes.engine.testing import point_mass_draws


def row(i: int, hardware: str, gpus: int, engine: str, method: str, block: int | None = None,
        accept: float | None = None) -> Measurement:
    verify = derive_verify_tokens(method, block, block)
    return Measurement(i, "m", hardware, gpus, engine, method, block, block, verify,
                       1.0 if method == "ar" else accept, None, 100.0, "test", "")


# the public corpus' shape: Qwen3.8-27B swept in llama.cpp on one RTX 5090, one vLLM MTP row
# (and its AR row) on two RTX 3090s
ROWS = ([row(2 + b, "rtx-5090", 1, "llama.cpp", "mtp", b, 1.5 + b / 2) for b in range(1, 7)]
        + [row(10, "rtx-3090", 2, "vllm", "ar"), row(11, "rtx-3090", 2, "vllm", "mtp", 1, 1.94),
           row(12, "rtx-3090", 2, "llama.cpp", "ar"), row(13, "h100", 1, "sglang", "ar")])


def test_the_asked_systems_own_rows_come_first():
    base = fit_default(ROWS)
    assert base.describe() == "llama.cpp mtp block 6 budget 6 on rtx-5090 x1"
    d = system_default(ROWS, "rtx-3090", 2, base)
    assert d.describe() == "vllm mtp block 1 budget 1 on rtx-3090 x2"
    assert d.why == "rtx-3090 x2 has measurements" and d.accept == 1.94
    # the method asked narrows its rows: AR was measured there by vllm and llama.cpp (one row
    # each: file order), the shape stays the base's (a method given takes none of it)
    d = system_default(ROWS, "rtx-3090", 2, base, method="ar")
    assert d.engines == ("vllm", "llama.cpp")
    # and the engine asked: llama.cpp measured AR only there
    d = system_default(ROWS, "rtx-3090", 2, base, engines=("llama.cpp",))
    assert d.engines == ("llama.cpp",)
    # a system measured AR only: its engines, the base's method and shape
    d = system_default(ROWS, "h100", 1, base)
    assert (d.engines, d.method, d.block, d.budget) == (("sglang",), "mtp", 6, 6)
    assert system_default(ROWS, "rtx-3090", 1, base) is None   # not measured
    assert system_default(ROWS + [row(20, "b300", 8, "vllm", "ar")], "b300", 8,
                          base) is DEFAULT_QUESTION


def bundled_fit():
    """The point-mass fit with the bundled data's RTX PRO 6000 rows counted as measured."""
    fit = point_mass_draws()
    meta = {**fit.meta, "coords": {**fit.meta["coords"],
                                   "system": ["b300x8", "rtx-pro-6000x8"]}}
    return fit.view(meta=meta)


def test_predict_on_a_measured_system_asks_what_it_measured():
    q = resolve(bundled_fit(), Flags(hardware="rtx-pro-6000"))
    assert [(a.scenario.engine, a.scenario.method, a.scenario.block, a.scenario.budget,
             a.scenario.gpus) for a in q.asked] == [("vllm", "eagle3", 3, 3, 8)]
    # its acceptance is the mean of the two rows measured there (1.948, 1.927)
    assert [s.value for s in q.asked[0].accept] == [(1.948 + 1.927) / 2]
    assert q.note == ("rtx-pro-6000 x8 has measurements; the flags not given come from its "
                      "own rows: --engine vllm --method eagle3 --block 3 --budget 3 (pass "
                      "--engine/--method/--block/--budget to ask another)")
    assert q.default_asked["engines"] == ["vllm"]
    # --method ar: the engine that measured AR there (anchored to its 91.5 tok/s)
    q = resolve(bundled_fit(), Flags(hardware="rtx-pro-6000", method="ar"))
    assert [a.scenario.engine for a in q.asked] == ["vllm"]
    assert q.note.endswith("own rows: --engine vllm (pass --engine to ask another)")


def test_the_bundled_question_is_unchanged():
    for flags in (Flags(accept="12:16"), Flags(hardware="b300", accept="12:16")):
        q = resolve(bundled_fit(), flags)
        assert [(a.scenario.engine, a.scenario.hardware, a.scenario.block, a.scenario.budget)
                for a in q.asked] == [("sglang", "b300", 16, 32), ("native", "b300", 16, 32)]
        assert q.note is None and q.default_asked is None
    # an unmeasured system still takes the fit's default question
    q = resolve(bundled_fit(), Flags(hardware="h200", accept="14"))
    assert [a.scenario.engine for a in q.asked] == ["sglang", "native"]


def test_the_method_the_system_measured_takes_its_measured_shape():
    """``predict --hardware rtx-pro-6000 --gpus 8 --method eagle3`` exited 2 "cannot tell how
    many tokens eagle3 verifies per step", where the same question without ``--method``
    answered that system's one measured EAGLE-3 shape (block 3, budget 3: the rows' num_speculative_tokens=3,
    verifying 1 + 3 = 4 tokens). Naming the method the system's own rows already answer
    takes their shape, and the note names it."""
    fit = bundled_fit()
    without = resolve(fit, Flags(hardware="rtx-pro-6000"))
    q = resolve(fit, Flags(hardware="rtx-pro-6000", gpus=8, method="eagle3"))
    assert [(a.scenario.engine, a.scenario.method, a.scenario.block, a.scenario.budget,
             a.scenario.verify_tokens) for a in q.asked] == [("vllm", "eagle3", 3, 3, 4)]
    assert [a.scenario for a in q.asked] == [a.scenario for a in without.asked]
    assert [s.value for s in q.asked[0].accept] == [(1.948 + 1.927) / 2]
    assert q.note == ("rtx-pro-6000 x8 has measurements; the flags not given come from its "
                      "own rows: --engine vllm --block 3 --budget 3 (pass "
                      "--engine/--block/--budget to ask another)")
    # the engine given too: the shape still comes from the rows, and the note says so
    q = resolve(fit, Flags(hardware="rtx-pro-6000", gpus=8, method="eagle3",
                           engines=("vllm",)))
    assert (q.asked[0].scenario.block, q.asked[0].scenario.verify_tokens) == (3, 4)
    assert q.note is not None and q.note.endswith(
        "own rows: --block 3 --budget 3 (pass --block/--budget to ask another)")
    # the fit's default method on its default system: the default's shape, as `predict` asks
    q = resolve(fit, Flags(method="ddtree", accept="12:16"))
    assert [(a.scenario.block, a.scenario.budget, a.scenario.verify_tokens)
            for a in q.asked] == [(16, 32, 33)] * 2
    # a block given keeps the old rule: a tree's depth alone still cannot size it
    import pytest

    from ddtree_bayes.core.errors import QueryError
    with pytest.raises(QueryError, match="cannot tell how many tokens ddtree verifies"):
        resolve(fit, Flags(method="ddtree", block=16, accept="12:16"))

"""The three-term arithmetic and the index structures, checked by hand."""

import numpy as np
import pytest

from ddtree_bayes.core import spec as S


def test_moe_forms_by_hand():
    # power: 3 ms * 16**0.5 = 12 ms; linear: 3 ms * (1 + 0.2 * 15) = 12 ms
    assert S.moe_ms(3.0, 16.0, 0.5, "power", np.exp, np.log) == pytest.approx(12.0)
    assert S.moe_ms(3.0, 16.0, 0.2, "linear", np.exp, np.log) == pytest.approx(12.0)
    # M = 1 is MOE(1) in both forms
    for form in ("power", "linear"):
        assert S.moe_ms(3.0, 1.0, 0.7, form, np.exp, np.log) == pytest.approx(3.0)


def test_target_and_step_by_hand():
    # step_ar 10 ms, 30% MoE: MOE(1)=3, ATTN=7; M=4 power 0.5 -> MOE=6;
    # context 2 units at 1.5 ms/unit, b=0 -> 3 ms; target = 6 + 7 + 3 = 16
    target = S.target_ms(10.0, 0.3, 0.5, 1.5, 0.0, 4.0, 2.0, "power", np.exp, np.log)
    assert target == pytest.approx(16.0)
    # overhead fraction 0.2 -> SPEC = 16 * 0.25 = 4 -> step 20; half the SPEC -> 18
    assert S.step_ms(target, 0.2, 1.0) == pytest.approx(20.0)
    assert S.step_ms(target, 0.2, 0.5) == pytest.approx(18.0)
    # autoregressive: f = 0, step is the target forward
    assert S.step_ms(target, 0.0, 1.0) == pytest.approx(16.0)
    # the share of the step outside the target forward is f
    assert (S.step_ms(target, 0.2, 1.0) - target) / S.step_ms(target, 0.2, 1.0) == pytest.approx(0.2)
    assert S.tok_s(4.4, 14.52) == pytest.approx(303.03, abs=0.01)


def test_build_spec_on_bundled_data(bundled_inputs):
    data, cfg = bundled_inputs
    spec = S.build_spec(data, cfg)
    assert spec.systems == ("b300x8", "rtx-pro-6000x8")
    assert spec.groups == ("b300x8/sglang/ddtree", "rtx-pro-6000x8/vllm/eagle3")
    assert spec.relations == ("native",)
    # rows: B300 AR, B300 DDTree, 5 PRO 6000 AR, 2 PRO 6000 Eagle3
    assert spec.row_system.tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 1]
    assert spec.row_group.tolist() == [2, 0, 2, 2, 2, 2, 2, 1, 1]  # 2 = autoregressive
    assert spec.row_relation.tolist() == [1] * 9  # no native rows are measured
    assert spec.verify_tokens.tolist() == [1, 9, 1, 1, 1, 1, 1, 4, 4]
    # blank B300 context -> default 0; 131072 tokens = 2 units of 64k
    assert spec.context_units.tolist() == [0, 0, 0, 0.25, 0.5, 1, 2, 0, 2]
    assert np.exp(spec.log_tok_s[1]) == pytest.approx(303.0)
    assert spec.rows == tuple(range(2, 11))


def test_relation_rows_use_the_base_group(bundled_inputs, tmp_path):
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.paths import bundled

    data, cfg = bundled_inputs
    text = data.text + ("kimi-k2.6,b300,8,native,ddtree,8,8,9,4.4,,400,test row,native run\n")
    path = tmp_path / "m.csv"
    path.write_text(text)
    data2 = load_measurements(path, load_hardware(bundled("hardware.csv")))
    spec = S.build_spec(data2, cfg)
    # the native row joins the sglang group, scaled by relation 0 (native)
    assert spec.groups == ("b300x8/sglang/ddtree", "rtx-pro-6000x8/vllm/eagle3")
    assert spec.row_group[-1] == 0 and spec.row_relation[-1] == 0


def test_a_structured_fit_of_any_moe_form_stores_its_card(bundled_inputs):
    """`fit --moe-form linear` stored no model card, so predict, next and report on an
    unmeasured speculative group (whose drafter pass is priced from the card) ended in
    'internal error: KeyError: the fit stores no model card for kimi-k2.6'."""
    import json

    from ddtree_bayes.engine.fitting import with_forms

    data, cfg = bundled_inputs
    for form in ("linear", "power", "roofline"):
        spec = S.build_spec(data, with_forms(cfg, form, "structured"))
        meta = json.loads(json.dumps(S.model_meta(spec, with_forms(cfg, form, "structured"))))
        assert meta["card"]["model"] == "kimi-k2.6" and meta["card"]["layers"] == 61, form
        assert ("system_flop_ms" in meta) == (form == "roofline")

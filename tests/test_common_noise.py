"""Common random numbers along context and concurrency: one configuration's answers at two
contexts, or at C and C + 1 streams, are drawn from the same generator (keyed by the
configuration at context 0 and C = 1, the key every context-0, single-stream answer always
had), so they differ by what the model says changes (the step), not by Monte Carlo noise.

Keyed by the whole scenario, one token of context moved an answer by ~0.1% either way, and a
longer context could come out faster than a shorter one although the step only grows with it
(Qwen3.5-397B AR on 4x RTX PRO 6000 Server in the public corpus: 76.636 tok/s at 65536,
76.721 at 65537).

The fits are the point masses of engine/testing.py with run-to-run noise (every draw of the
fraction form's step is the same number, so an answer at another context is the context-0
answer times the ratio of the two steps, draw by draw), and tests/test_engine_effects.py's
structured point mass with a discrepancy, repeated-run scatter and a measured group whose
per-node cost is drawn beyond its single measured tree (``tied_ratio_spread``), which drew
from the generator at some concurrencies and not at others.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.engine import predictive as P

REPO = Path(__file__).resolve().parents[1]
SEED = 20261130
#: Draws: a median's Monte Carlo error with independent noise is ~1.25 x 0.05 / sqrt(400)
#: = 0.3%, thirty times the 0.01% one token of context may move an answer by.
N = 400
CONTEXTS = (0.0, 1.0, 512.0, 4096.0, 32768.0, 65536.0, 65537.0, 98304.0, 131072.0)
ENDS = ("median", "lo50", "hi50", "lo90", "hi90")


def _point():
    from ddtree_bayes.engine.testing import point_mass_draws

    return point_mass_draws(N, noise_sd=0.05)


def _multi():
    from ddtree_bayes.engine.testing import multi_model_draws

    return multi_model_draws(N, noise_sd=0.05)


def _structured():
    """The structured point mass with scatter, and its measured group (b300x8/sglang/ddtree,
    measured at one tree) drawing its own per-node cost (sd 0.5) where a question has another
    number of nodes a step: at C > 1 of the measured tree, not at C = 1."""
    from test_engine_effects import structured_engine_fit

    draws = structured_engine_fit(N, structure_sd=0.04, run_sd=0.03, config_sd=0.02,
                                  noise_sd=0.036, spec_tree_log_sd=0.5)
    draws.meta["model"]["group_varies"] = {"pass": [False], "tree": [False]}
    return draws


def _ask(fit, *, context=0.0, concurrency=None, engine="sglang", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return P.predict(fit, engines=[engine], context=context, concurrency=concurrency,
                         seed=SEED, **kw)


def _target_ms(context: float) -> float:
    """The point mass's target step at B300 DDTree budget 32 (M = 33), one stream: MOE 12 ms +
    attention 4 ms + context ``ctx_ms_per_unit x units x M ** 0.5`` (2 ms per 65536 tokens)."""
    return 16.0 + 2.0 * context / 65536.0 * math.sqrt(33.0)


@pytest.mark.parametrize("engine", ["sglang", "native"])
def test_a_longer_context_scales_every_draw_by_the_ratio_of_the_steps(engine):
    """The fraction form's step is the target over (1 - overhead) (SGLang, 20 ms at context 0)
    or times 1 + reduction x overhead (native, 18 ms): proportional to the target, so each
    answer (every acceptance, each interval end) is the context-0 one times target(0) /
    target(context), to rounding; with independent noise they moved by ~0.3% either way. So
    does a model average of two fits of that step (``predict --model-average``)."""
    fit = _point()
    # and a model average of two fits of that step (each with its own noise): its mixture
    # picks the same draws of each at every context
    from ddtree_bayes.engine.testing import point_mass_draws

    mixture = [(fit, 0.3), (point_mass_draws(N, noise_sd=0.1), 0.7)]
    for kw in ({}, {"mixture": mixture}):
        at_0 = _ask(fit, accept="12:16", engine=engine, **kw)
        for ctx in CONTEXTS[1:]:
            rows = _ask(fit, accept="12:16", engine=engine, context=ctx, **kw)
            ratio = _target_ms(0.0) / _target_ms(ctx)
            for row, first in zip(rows, at_0, strict=True):
                assert row["accept"] == first["accept"]
                for key in ENDS:
                    assert row[key] == pytest.approx(first[key] * ratio, rel=1e-12), (ctx, key)


@pytest.mark.parametrize("kind", ["point", "structured"])
@pytest.mark.parametrize("engine", ["sglang", "native"])
def test_per_stream_tok_s_never_rises_with_context(kind, engine):
    """Over a grid of contexts, the median and the 50% and 90% ends never rise, and one token
    of context (65536 -> 65537) moves each by less than 0.01%."""
    fit = {"point": _point, "structured": _structured}[kind]()
    rows = {ctx: _ask(fit, accept="14", engine=engine, context=ctx)[0] for ctx in CONTEXTS}
    for shorter, longer in zip(CONTEXTS, CONTEXTS[1:], strict=False):
        for key in ENDS:
            assert rows[longer][key] <= rows[shorter][key], (shorter, longer, key)
    for key in ENDS:
        moved = 1.0 - rows[65537.0][key] / rows[65536.0][key]
        assert 0.0 <= moved < 1e-4, (key, moved)


@pytest.mark.parametrize("kind", ["point", "structured"])
@pytest.mark.parametrize("context", [0.0, 32768.0])
@pytest.mark.parametrize("shape", [(16, 32), (8, 8)])
def test_per_user_tok_s_never_rises_with_one_more_stream(kind, context, shape):
    """Where the model's step grows from C to C + 1 streams draw by draw (checked here: the
    weights read once, the nodes and KV reads of one more stream), the per-user median never
    rises, at C = 1 to 9, for DDTree budget 32 and the structured fit's measured tree (block 8,
    budget 8), whose own per-node cost, drawn at C > 1 only, shifted the run-to-run noise
    drawn after it: its C = 2 answer's noise was not C = 1's, and the median rose."""
    fit = {"point": _point, "structured": _structured}[kind]()
    block, budget = shape
    streams = tuple(range(1, 10))
    rows = _ask(fit, accept="5" if budget == 8 else "14", context=context, concurrency=streams,
                method="ddtree", block=block, budget=budget)
    sc = P.resolve_scenario(fit, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                            block=block, budget=budget, verify_tokens=None,
                            context_tokens=context)
    for c, row, after in zip(streams, rows, rows[1:], strict=False):
        assert (row["concurrency"], after["concurrency"]) == (c, c + 1)
        step = [P.step_components(fit, dataclasses.replace(sc, concurrency=k),
                                  P.keyed_rng(SEED, P.scenario_key(sc)))[0]["step"]
                for k in (c, c + 1)]
        assert np.all(step[1] > step[0])
        assert after["median"] <= row["median"], (c, after["median"], row["median"])


@pytest.mark.parametrize("kind", ["point", "multi", "structured"])
def test_every_context_and_concurrency_reads_the_same_run_deviations(kind):
    """predict's draws per token are ``1000 / step x exp(log_sd x z)``: the standardised run
    deviations ``z`` read back from them are the same numbers, draw by draw, at every context
    and C of a configuration (DDTree budget 32, and the structured fit's measured tree at
    block 8, budget 8), so what moves between two of its answers is the step and the sd."""
    fit = {"point": _point, "multi": _multi, "structured": _structured}[kind]()
    model = "kimi-k2.6" if kind == "multi" else None
    for block, budget in ((16, 32), (8, 8)):
        base = P.resolve_scenario(fit, hardware="b300", gpus=8, engine="sglang",
                                  method="ddtree", block=block, budget=budget,
                                  verify_tokens=None, context_tokens=0.0, model=model)
        z0 = None
        for ctx in (0.0, 1.0, 65537.0):
            for c in (1, 2, 3, 8):
                sc = dataclasses.replace(base, context_tokens=ctx, concurrency=c)
                per_token = P.per_token_draws(fit, sc, SEED)[0]
                parts = P.step_components(fit, sc, P.keyed_rng(SEED, P.scenario_key(base)))[0]
                cap = P.read_ceiling(fit, sc)
                assert cap is None or np.all(per_token < cap.rate)   # (no draw capped)
                z = np.log(per_token * parts["step"] / 1000.0) / parts["log_sd"]
                z0 = z if z0 is None else z0
                assert z == pytest.approx(z0, rel=1e-9, abs=1e-9), (block, budget, ctx, c)


def _state(rng: np.random.Generator) -> tuple:
    s = rng.bit_generator.state
    return s["state"]["state"], s["has_uint32"], s["uinteger"]


@pytest.mark.parametrize("kind", ["point", "multi", "structured"])
def test_the_step_leaves_the_generator_where_one_stream_at_context_0_does(kind):
    """The run-to-run noise is drawn after the step from the same generator, so it is common
    to a configuration's contexts and concurrencies only if the step draws as many numbers
    from it at each as at context 0 and C = 1 (the structured group's per-node cost was drawn
    at C = 2, 3, ... and not at C = 1)."""
    fit = {"point": _point, "multi": _multi, "structured": _structured}[kind]()
    shapes = (("ddtree", 16, 32), ("ddtree", 8, 8), ("ddtree", 8, 4), ("eagle3", 4, None),
              ("ar", None, None))
    systems = {"multi": [("kimi-k2.6", "b300", 8), ("llama-3.1-8b-instruct", "h100", 1)]}
    checked = 0
    for model, hardware, gpus in systems.get(kind, [(None, "b300", 8)]):
        for method, block, budget in shapes:
            base = P.resolve_scenario(fit, hardware=hardware, gpus=gpus, engine="sglang",
                                      method=method, block=block, budget=budget,
                                      verify_tokens=None, context_tokens=0.0, model=model)
            rng = P.keyed_rng(SEED, "state")
            P.step_components(fit, base, rng)
            after_base = _state(rng)
            for ctx in (0.0, 1.0, 65537.0):
                for c in (1, 2, 3, 8):
                    sc = dataclasses.replace(base, context_tokens=ctx, concurrency=c)
                    rng = P.keyed_rng(SEED, "state")
                    P.step_components(fit, sc, rng)
                    assert _state(rng) == after_base, (sc.describe(), c)
                    checked += 1
    assert checked >= 60


def test_a_context_0_single_stream_answer_keeps_its_key_and_digits():
    """Every context-0, C = 1 answer is drawn as it always was: keyed by the scenario's
    (model, hardware, gpus, engine, method, block, budget, verify tokens, context 0.0, C 1,
    drafter); an answer at another context or concurrency by that same key."""
    for fit in (_point(), _structured()):
        sc = P.resolve_scenario(fit, hardware="b300", gpus=8, engine="sglang", method="ddtree",
                                block=16, budget=32, verify_tokens=None, context_tokens=0.0)
        key = repr((None, "b300", 8, "sglang", "ddtree", 16, 32, 33, 0.0, 1, None))
        assert P.scenario_key(sc) == key
        before = P._per_token(fit, None, sc, P.keyed_rng(SEED, key))[0]
        assert np.array_equal(P.per_token_draws(fit, sc, SEED)[0], before)
        for ctx, c in ((65537.0, 1), (0.0, 9), (131072.0, 64)):
            assert P.scenario_key(dataclasses.replace(sc, context_tokens=ctx,
                                                      concurrency=c)) == key


@pytest.mark.nuts
def test_the_readme_headline_keeps_its_digits(fitted_workdir):
    """The README's first answer (``predict --accept 12:16`` on the bundled data: U(12,16)
    713 (576-880) in SGLang, 757 (601-994) native since native carries SGLang's anchor,
    docs/model.md "The native rows anchored as SGLang's"; re-derived with a group's fixed
    cost kept at or above zero (780762b) from 710 (565-879) and 754 (595-994), and with the one-KV-head
    context ratio, "The headline with the one-KV-head ratio", from 712 (563-890) and 755
    (592-1005), and before that with the context cost's KV-read prior from 710 (568-880) and
    755 (591-993)) is a context-0, single-stream answer: the same table, digit for digit, as
    docs/examples/predict.txt saved before."""
    work, _ = fitted_workdir
    out = subprocess.run([sys.executable, "-m", "ddtree_bayes", "predict", "--accept", "12:16"],
                         cwd=work, capture_output=True, text=True, check=True).stdout
    saved = (REPO / "docs" / "examples" / "predict.txt").read_text().splitlines()[1:]
    saved = [line for line in saved if not line.startswith("ddtree-bayes: warning: ")]   # stderr
    assert out.splitlines()[1:] == saved[1:]   # (the first line names the fit)
    assert any(line.split()[:5] == ["sglang", "U(12,16)", "713", "653-779", "576-880"]
               for line in saved)
    assert any(line.split()[:5] == ["native", "U(12,16)", "757", "682-846", "601-994"]
               for line in saved)

"""The question a fit is asked when none is given (core/default_question.py): the bundled
B300 question for a fit that measured B300 for the model, else the fit's own most-measured
speculative configuration; predict/optimize/next/report ask it, say so on one stderr line and
in --format json, and keep the fan's acceptance within [1, M].

The end-to-end tests fit the public llama.cpp MTP sweep of Qwen3.8-27B on one RTX 5090
(data/public/llamacpp_mtp_qwen38_27b_rtx5090.csv, converted as workflows/extrapolation.py
usable_sweeps does) with a tiny sampler (1 chain, 100 draws, no remedies: unconverged, so the
commands get --allow-unconverged); what is checked is which question is asked, not the
numbers.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ddtree_bayes.core.config import DEFAULT_QUESTION
from ddtree_bayes.core.data import COLUMNS, Measurement, derive_verify_tokens
from ddtree_bayes.core.default_question import fit_default
from ddtree_bayes.core.methods import max_accept
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine.question import Flags, default_question, fill, resolve
from test_cli_support import BEYOND_M33, make_point_mass_workdir, run_cli
from test_json_schemas import validate_output


def fill_query(d, **flags):
    """The flags not given filled from the default question ``d`` (engine/question.fill)."""
    return fill(d, Flags(**flags))


REPO = Path(__file__).resolve().parents[1]
SWEEP = REPO / "data" / "public" / "llamacpp_mtp_qwen38_27b_rtx5090.csv"


def row(i: int, hardware: str, method: str, block: int | None = None, budget: int | None = None,
        *, engine: str = "vllm", gpus: int = 1, model: str = "m", accept: float | None = None,
        verify: int | None = None) -> Measurement:
    verify = verify or derive_verify_tokens(method, block, budget)
    return Measurement(i, model, hardware, gpus, engine, method, block, budget, verify,
                       1.0 if method == "ar" else accept, None, 100.0, "test", "")


# ---------------------------------------------------------------- the rule, by hand
def test_a_fit_that_measured_b300_keeps_the_bundled_question():
    # more speculative rows elsewhere do not matter: the fit measured b300 (AR only, even)
    rows = [row(2, "b300", "ar", gpus=8)] + [row(3 + i, "h100", "eagle3", 3) for i in range(5)]
    assert fit_default(rows) is DEFAULT_QUESTION
    assert not DEFAULT_QUESTION.derived and DEFAULT_QUESTION.gpus is None


def test_a_fit_that_never_measured_b300_asks_its_most_measured_system():
    rows = [
        row(2, "h100", "eagle3", 3, engine="vllm"),             # h100 x1: 2 speculative rows
        row(3, "h100", "eagle3", 5, engine="vllm"),
        row(4, "rtx-5090", "ar", engine="llama.cpp"),           # AR rows do not count
        row(5, "rtx-5090", "ar", engine="llama.cpp"),
        row(6, "rtx-5090", "ar", engine="llama.cpp"),
        row(7, "rtx-5090", "mtp", 2, 2, engine="sglang", accept=2.4),   # rtx-5090 x1: 4 rows
        row(8, "rtx-5090", "mtp", 4, 4, engine="llama.cpp", accept=3.4),
        row(9, "rtx-5090", "mtp", 4, 4, engine="llama.cpp", accept=3.8),
        row(10, "rtx-5090", "eagle3", 7, engine="vllm", accept=4.0),    # fewer rows than mtp
        row(11, "rtx-5090", "mtp", 3, 3, engine="vllm", accept=3.0),
        row(12, "rtx-5090", "mtp", 1, 1, engine="vllm", gpus=2),       # another system
    ]
    d = fit_default(rows)
    assert d.derived and d.why == "the fit never measured b300"
    assert (d.hardware, d.gpus, d.method) == ("rtx-5090", 1, "mtp")
    # engines: llama.cpp (2 rows), then sglang and vllm tie at 1: the first in the file
    assert d.engines == ("llama.cpp", "sglang")
    # the largest configuration (eagle3 block 7 is another method), and its measured median
    assert (d.block, d.budget, d.verify_tokens) == (4, 4, None)
    assert d.accept == pytest.approx(3.6, abs=1e-12)   # mean(3.4, 3.8), as predict's
    assert d.describe() == "llama.cpp,sglang mtp block 4 budget 4 on rtx-5090 x1"
    assert d.to_json()["asked"] == d.describe() and d.to_json()["gpus"] == 1


def test_ties_go_to_the_first_in_the_file_and_file_order_is_by_row():
    rows = [row(5, "h100", "eagle3", 3), row(3, "a100", "eagle3", 3, gpus=4),
            row(6, "h100", "dflash-chain", 8), row(4, "a100", "eagle3", 5, gpus=4)]
    d = fit_default(rows)   # two rows each; a100 x4 appears first (row 3)
    assert (d.hardware, d.gpus, d.block, d.verify_tokens) == ("a100", 4, 5, None)
    assert d.accept == 3.5    # no measured acceptance: the middle of [1, 6]


def test_the_defaults_acceptance_is_predicts_measured_one():
    """fit_default copied predict's measured acceptance (engine/scenario.measured_acceptance)
    but stopped at the system: EAGLE-3 block 3 measured at 3.0 on an A100 only, its H100 rows
    inferred (blank accept_len), gave the middle of [1, 4], 2.5, where predict's measured
    acceptance of the configuration is the A100's 3.0 ("on other systems"). One owner
    (core/data.measured_accept) answers both."""
    rows = [row(2, "h100", "eagle3", 3), row(3, "h100", "eagle3", 3),
            row(4, "a100", "eagle3", 3, accept=3.0)]
    d = fit_default(rows)
    assert (d.hardware, d.method, d.block, d.verify_tokens) == ("h100", "eagle3", 3, None)
    assert d.accept == 3.0


def test_the_configuration_is_the_first_engines_and_the_default_drafters():
    """The largest configuration was taken over every engine's rows: Llama-3.1-8B on one
    H100 (public corpus) asked vLLM, its most-measured engine, at SGLang's only EAGLE-3
    tree (block 8 budget 8, M = 9) at SGLang's 5.39, where vLLM's deepest measured chain is
    block 7 at 3.54: predict answered vLLM 330 tok/s (90% 304-359) against its measured
    233-247. The configuration is now the first engine's own largest, and of the rows that
    name no drafter (the default drafter, which the default question asks): a named-only
    drafter's larger configuration is not the default question's."""
    vllm = [row(2 + i, "h100", "eagle3", b, b, accept=a)
            for i, (b, a) in enumerate([(2, 2.36), (3, 2.79), (5, 3.32), (7, 3.54)])]
    sglang = [row(10, "h100", "eagle3", 8, 8, engine="sglang", accept=5.39)]
    d = fit_default(vllm + sglang)
    assert d.engines == ("vllm", "sglang")
    assert (d.block, d.budget, d.verify_tokens, d.accept) == (7, 7, None, 3.54)
    # a named (non-default) drafter's rows: counted for the method and engines, not its shape
    named = [dataclasses.replace(row(20 + i, "h100", "eagle3", 9, 9, accept=5.0),
                                 drafter="other/head") for i in range(3)]
    d = fit_default(vllm + named)
    assert (d.block, d.accept) == (7, 3.54)
    # only named rows: their largest configuration, and no measured acceptance of the
    # default drafter (the middle of [1, M])
    d = fit_default(named)
    assert (d.block, d.accept) == (9, 5.5)


def test_several_models_ask_the_model_named():
    rows = [row(2, "b300", "ar", gpus=8, model="kimi"), row(3, "b300", "ddtree", 16, 32,
                                                           gpus=8, model="kimi", accept=10),
            row(4, "h100", "eagle3", 3, model="llama", accept=2.5),
            row(5, "h100", "ar", model="llama"), row(6, "l40s", "ddtree", 8, 16, model="qwen",
                                                    accept=20.0, engine="sglang")]
    assert fit_default(rows, "kimi") is DEFAULT_QUESTION
    d = fit_default(rows, "llama")
    assert (d.hardware, d.method, d.block, d.engines, d.accept) == ("h100", "eagle3", 3,
                                                                     ("vllm",), 2.5)
    assert d.why == "the fit never measured b300 for llama"
    q = fit_default(rows, "qwen")
    assert (q.method, q.block, q.budget, q.accept) == ("ddtree", 8, 16, 17.0)  # within [1, M]
    assert fit_default(rows) is DEFAULT_QUESTION     # all models: one of them measured b300


def test_no_speculative_rows_and_underivable_verify_tokens():
    # AR rows only, never on b300: the bundled method and shape on the model's own most-
    # measured system and its engines there (it asked 8x B300 in SGLang and native, never
    # measured, without a word)
    d = fit_default([row(2, "h100", "ar"), row(3, "a100", "ar", gpus=2, engine="sglang"),
                     row(4, "a100", "ar", gpus=2), row(5, "a100", "ar", gpus=2)])
    assert d.derived and (d.hardware, d.gpus, d.engines) == ("a100", 2, ("vllm", "sglang"))
    assert (d.method, d.block, d.budget, d.verify_tokens, d.accept) == ("ddtree", 16, 32, None,
                                                                         14.0)
    assert d.why == ("the fit never measured b300, nor any speculative method: the bundled "
                     "question's ddtree block 16 budget 32")
    assert fit_default([]) is DEFAULT_QUESTION      # (a model of no rows: nothing measured)
    d = fit_default([row(2, "h100", "eagle3", verify=6)])    # no block: verify tokens kept
    assert (d.block, d.budget, d.verify_tokens, d.accept) == (None, None, 6, 3.5)


def test_default_scenario_of_a_fit_of_several_models():
    """The engine side (engine/scenario.py): the model named, its pair labels, --model needed."""

    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.question import default_question as default_scenario
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws

    draws = multi_model_draws()
    assert default_scenario(draws, "kimi-k2.6") is DEFAULT_QUESTION
    ar_only = default_scenario(draws, "llama-3.1-8b-instruct")
    assert ar_only.describe() == "vllm ddtree block 16 budget 32 on h100 x1"
    assert ar_only.why == ("the fit never measured b300 for llama-3.1-8b-instruct, nor any "
                           "speculative method for it: the bundled question's ddtree block 16 "
                           "budget 32")
    with pytest.raises(QueryError, match="say which with --model"):
        default_scenario(draws)
    data = MULTI_DATA + "llama-3.1-8b-instruct,h100,1,vllm,eagle3,4,,5,2.79,,225,test,\n"
    d = default_scenario(draws.view(data_csv=data), "llama-3.1-8b-instruct")
    # (a chain's blank budget is its depth, as the rows that write it: block 4 budget 4)
    assert d.describe() == "vllm eagle3 block 4 budget 4 on h100 x1" and d.accept == 2.79
    assert d.why == "the fit never measured b300 for llama-3.1-8b-instruct"


def test_the_default_question_keeps_its_measured_acceptance():
    """A walkthrough: a Llama-3.1-8B EAGLE-3 chain measured at 2.79 became "acceptance 3"
    (+7.5%) in the report's answer line, concurrency verdict and next query, where predict
    at the measured 2.79 said otherwise: the measured mean is kept, to 2 decimals."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import headline

    model = "llama-3.1-8b-instruct"
    draws = multi_model_draws().view(
        data_csv=MULTI_DATA + f"{model},h100,1,vllm,eagle3,4,,5,2.79,,225,test,\n")
    d = default_question(draws, model)
    assert d.accept == 2.79
    # the mean of three rows, every digit, as predict's measured default: (2.1 + 2.3456 +
    # 2.9) / 3 = 2.44853 (the median was 2.35; it was asked at 2.45, rounded); within [1, M]
    assert fit_default([row(2, "h100", "eagle3", 3, accept=a)
                        for a in (2.1, 2.3456, 2.9)]).accept == pytest.approx(7.3456 / 3,
                                                                              abs=1e-12)
    # of the first engine's rows when it has some, as predict's for that engine: vllm (two
    # rows) 2.1, not the three rows' median 2.2 or mean 2.4
    two = [row(2, "h100", "eagle3", 3, accept=2.0), row(3, "h100", "eagle3", 3, accept=2.2),
           row(4, "h100", "eagle3", 3, accept=3.0, engine="sglang")]
    assert (fit_default(two).engines, fit_default(two).accept) == (("vllm", "sglang"), 2.1)
    assert fit_default([row(2, "h100", "eagle3", 3, accept=4.5)]).accept == 4.0   # M = 4
    fan = sections.fan_section(draws, 1, model, d)
    assert fan["accept"] == [1.0, 2.0, 2.79, 3.0, 4.0, 5.0] and fan["headline_accept"] == 2.79
    # predict at the measured 2.79 (its own default): 2.79 * 1000 / 9.843 ms = 283.4 tok/s
    row_ = P.predict(draws, model=model, seed=1)[0]
    assert row_["accept"] == "2.79 measured (1 row)" and round(row_["median"]) == 283
    text = headline({"fan": fan, "default_scenario": {**d.to_json(), "derived": True}})
    assert ("eagle3, block 4, budget 4, verify 5, context 0) at acceptance 2.79: vllm 283 "
            "tok/s") in text
    assert sections.concurrency_section(draws, 1, model, d)["accept"] == 2.79
    dec = sections.decisions_section(draws, 1, model, d)   # (the next query: the same text)
    assert dec["hardware_query"] == "vllm eagle3 b4/B4 accept 2.79"   # (a chain's budget)


def test_the_default_question_asks_its_acceptance_to_every_digit(monkeypatch):
    """The tracked default, the report's answer line and the report's next asked a fit's own
    default question at its acceptance rounded to 2 decimals, while predict without flags
    took the exact mean: the bundled rows without B300 (EAGLE-3 block 3 on 8 RTX PRO 6000s
    measured at 1.948 and 1.927) answered 123.81 tok/s at 1.94 against predict's 123.65 at
    1.9375. Here three rows at 2.1, 2.3456 and 2.9: (2.1 + 2.3456 + 2.9) / 3 = 2.448533...,
    which every path now asks (shown as text to 2 decimals: 2.45), so the same question
    gives the same draws: the same median, to the last bit."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
    from ddtree_bayes.workflows.decisions import parse_query
    from ddtree_bayes.workflows.living import tracking as T
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import headline

    model = "llama-3.1-8b-instruct"
    draws = multi_model_draws().view(data_csv=MULTI_DATA + "".join(
        f"{model},h100,1,vllm,eagle3,4,,5,{a},,225,test,\n" for a in ("2.1", "2.3456", "2.9")))
    d = default_question(draws, model)
    exact = 7.3456 / 3
    assert d.accept == pytest.approx(exact, abs=1e-12) and round(d.accept, 2) != d.accept
    # predict without flags: the measured mean
    (asked,) = P.predict(draws, model=model, seed=1)
    assert asked["accept_kind"] == "measured" and asked["accept_value"] == d.accept
    median = asked["median"]
    # the tracked default's now (update and diff ask it so)
    (tracked,) = T.query_rows(draws, {**T.DEFAULT_QUERY, "model": model}, 1, builtin=True)
    assert tracked["accept_value"] == d.accept
    assert (tracked["median"], tracked["lo90"], tracked["hi90"]) == (
        median, asked["lo90"], asked["hi90"])
    # the report's answer line: the fan at the default's acceptance
    fan = sections.fan_section(draws, 1, model, d)
    assert fan["headline_accept"] == d.accept and d.accept in fan["accept"]
    q = fan["engines"]["vllm"]["quantiles"][fan["accept"].index(d.accept)]
    assert (q[0], q[2], q[4]) == (asked["lo90"], median, asked["hi90"])
    text = headline({"fan": fan, "default_scenario": {**d.to_json(), "derived": True}})
    assert f"at acceptance 2.45: vllm {median:.0f} tok/s" in text   # (shown to 2 decimals)
    # the report's next asks it to every digit (its figures: on a real fit, below); its
    # hardware table's text shows 2 decimals
    dec = sections.decisions_section(draws, 1, model, d)
    assert dec["hardware_query"] == "vllm eagle3 b4/B4 accept 2.45"
    asked_next = []
    monkeypatch.setattr("ddtree_bayes.workflows.decisions.parse_query",
                        lambda fit, text: asked_next.append(text) or parse_query(fit, text))
    sections.decisions_section(draws, 1, model, d)
    assert asked_next == [f"--engine vllm --accept {d.accept!r} --model {model}"]
    assert float(asked_next[0].split()[3]) == d.accept
    # the concurrency section asks the same acceptance
    assert sections.concurrency_section(draws, 1, model, d)["accept"] == d.accept


def test_a_tracked_query_saved_at_the_rounded_acceptance_still_loads(tmp_path):
    """A query tracked at the acceptance the default question was rounded to (``--accept
    1.94`` where the rows' mean is 1.9375) loads as it was saved and is asked at 1.94, given:
    it says so (its flags, its label), apart from the default query (the exact mean)."""
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
    from ddtree_bayes.workflows.living import tracking as T

    model = "llama-3.1-8b-instruct"
    draws = multi_model_draws().view(data_csv=MULTI_DATA + "".join(
        f"{model},h100,1,vllm,eagle3,4,,5,{a},,225,test,\n" for a in ("1.948", "1.927")))
    assert default_question(draws, model).accept == 1.9375
    models = tmp_path / "models"
    models.mkdir()
    saved = {"model": model, "hardware": "h100", "engine": "vllm", "method": "eagle3",
             "block": 4, "accept": "1.94"}
    (models / T.TRACKED_FILE).write_text(json.dumps({"version": 1, "queries": [
        {"name": "rounded", "query": saved, "added_utc": "2026-12-01T00:00:00+00:00"}]}))
    builtin, rounded = T.load_tracked(models)
    (default,) = T.for_models([builtin], [model])   # (the default question of Llama, not Kimi)
    assert rounded.name == "rounded" and rounded.query["accept"] == "1.94"
    assert T.describe_tracked(draws, rounded) == (
        f"--hardware h100 --engine vllm --method eagle3 --block 4 --accept 1.94 --model {model}")
    assert "--accept 1.9375 " in T.describe_tracked(draws, default)
    out = T.compare_queries(None, draws, [default, rounded], seed=1)
    by = {c["name"]: c for c in out}
    assert by["rounded"]["accept_asked"] == "1.94" and by["rounded"]["label"].endswith(
        "accept 1.94")
    assert (by["default"]["accept_asked"], by["default"]["accept_after"]) == ("default", "1.9375")
    assert by["default"]["label"].endswith("accept 1.9375")
    # 1.94 / 1.9375 of the same step: the two medians differ by that ratio
    assert by["rounded"]["after"]["median"] / by["default"]["after"]["median"] == \
        pytest.approx(1.94 / 1.9375, rel=1e-12)


def test_the_defaults_acceptance_is_predicts_inferred_one_before_another_systems():
    """predict without --accept takes the acceptance the fit inferred from the configuration's
    own rows without accept_len before a mean measured on other systems
    (engine/question.accept_sources); the default question took the other systems' mean, so the
    report's answer line, fan, sensitivity and tracked default asked another acceptance than
    predict's answer. Found on data/examples/public_multi_model.csv: Qwen3.8-27B-Q4_K_M on a
    V100 (llama.cpp MTP block 6, accept_len blank, inferred median 2.43) answered "at
    acceptance 4.22" (measured on other systems): 61 tok/s where predict says 35 (32-39)."""
    from ddtree_bayes.core import acceptance_latent as AL
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import headline

    model = "llama-3.1-8b-instruct"
    label = f"{model}/eagle3/b4/B4"
    draws = multi_model_draws().view(data_csv=MULTI_DATA + (
        f"{model},h100,1,vllm,eagle3,4,,5,,,225,test,\n"
        f"{model},h100,1,vllm,eagle3,4,,5,,,221,test,\n"
        f"{model},h100,2,vllm,eagle3,4,,5,3.2,,260,test,\n"))
    draws.meta["model"]["acceptance_groups"] = [
        {"label": label, "model": model, "method": "eagle3", "block": 4, "budget": 4,
         "rows": [5, 6], "prior": {"dist": "truncnormal", "params": {
             "mu": 2.5, "sigma": 1.0, "lower": 1.0, "upper": 5.0}}, "prior_from": "test"}]
    draws.meta["coords"][AL.DIM] = [label]
    draws.variables[AL.NAME] = np.linspace(2.0, 2.4, draws.n_draws)[:, None]   # median 2.2
    d = default_question(draws, model)
    assert (d.hardware, d.gpus, d.method, d.block) == ("h100", 1, "eagle3", 4)
    assert d.accept == pytest.approx(2.2, abs=1e-12)   # the inferred median (3.2 before: h100 x2's)
    # predict's own answer: each draw a / 9.843 ms (the step of the test above): median 223.5
    row_ = P.predict(draws, model=model, seed=1)[0]
    assert row_["accept_kind"] == "posterior" and round(row_["median"], 1) == 223.5
    fan = sections.fan_section(draws, 1, model, d)
    assert fan["headline_accept"] == d.accept
    at = fan["engines"]["vllm"]["quantiles"][fan["accept"].index(d.accept)][2]
    assert at == pytest.approx(row_["median"], rel=1e-3)   # 2.2 / 9.843 ms, as predict's
    text = headline({"fan": fan, "default_scenario": {**d.to_json(), "derived": True}})
    assert f"at acceptance 2.2: vllm {at:.0f} tok/s" in text
    # a measured acceptance on the system itself still comes first, as in predict
    mine = draws.view(data_csv=draws.data_csv + f"{model},h100,1,vllm,eagle3,4,,5,3.0,,230,t,\n")
    assert default_question(mine, model).accept == 3.0


def test_the_defaults_acceptance_is_predicts_prior_before_another_systems():
    """predict without --accept takes the priors file's [[acceptance]] entry before a mean
    measured on other systems (engine/question.accept_sources); the default question skipped
    that step and took the other systems' mean (3.2, measured on two H100s), so the report's
    answer line asked another acceptance than predict. Now it takes the median of the very
    draws predict takes: Uniform(2, 2.6) -> 2.3."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws

    model = "llama-3.1-8b-instruct"
    base = multi_model_draws()
    draws = base.view(data_csv=MULTI_DATA + (
        f"{model},h100,1,vllm,eagle3,4,,5,,,225,test,\n"
        f"{model},h100,2,vllm,eagle3,4,,5,3.2,,260,test,\n"),
        priors_toml=base.priors_toml + (
            f'\n[[acceptance]]\nmodel = "{model}"\nmethod = "eagle3"\nblock = 4\n'
            'dist = "uniform"\nlower = 2.0\nupper = 2.6\nrationale = "test"\n'
            'source = "test"\n'))
    row_ = P.predict(draws, model=model, seed=1)[0]
    assert row_["accept_kind"] == "prior"
    d = default_question(draws, model)
    assert (d.hardware, d.gpus, d.method, d.block) == ("h100", 1, "eagle3", 4)
    assert d.accept == pytest.approx(2.3, abs=0.015)   # Uniform(2, 2.6)'s median (3.2 before)


def test_the_default_question_reads_the_fits_own_methods_table():
    """The default question's configuration was read with the bundled [methods] table, not
    the fit's: a fit whose priors give MTP the anchor's depth rule (depth = "block - 1") reads
    mtp,4,,5 as a block-4 tree-or-chain verifying 5 tokens (budget blank: 5 is not the chain's
    3 + 1). The bundled rule (depth = "block") derives 4 + 1 = 5 from block 4, so the default
    left verify tokens to be derived; predict derived them by the fit's rule, 3 + 1 = 4, and
    asked block 4 budget 3 verify 4, which no row measured: no flags refused (exit 2) where
    --method mtp --block 4 --verify-tokens 5 answered 2.79 measured. Now both ask M = 5 at
    the measured 2.79: 2.79 * 1000 / 9.843 ms = 283.4 tok/s (the step of the tests above)."""
    from ddtree_bayes.core.default_question import system_default
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws

    model = "llama-3.1-8b-instruct"
    base = multi_model_draws()
    old = '[methods.mtp]\npasses = "block"\ntree = "auto"\ndepth = "block"\n'
    assert old in base.priors_toml
    draws = base.view(
        data_csv=MULTI_DATA + f"{model},h100,1,vllm,mtp,4,,5,2.79,,225,test,\n",
        priors_toml=base.priors_toml.replace(old, old.replace('depth = "block"', 'depth = "block - 1"')))
    assert draws.methods["mtp"].depth == "block - 1"
    d = default_question(draws, model)
    assert (d.method, d.block, d.budget, d.verify_tokens, d.accept) == ("mtp", 4, None, 5, 2.79)
    mine = [r for r in draws.measurements.rows if r.model == model]
    own = system_default(mine, "h100", 1, d, methods=draws.methods)
    assert own is not None and (own.verify_tokens, own.accept) == (5, 2.79)
    given = P.predict(draws, model=model, seed=1, hardware="h100", gpus=1, method="mtp",
                      block=4, verify_tokens=5, engines=["vllm"])[0]
    asked = P.predict(draws, model=model, seed=1)[0]
    for r in (given, asked):
        assert r["accept"] == "2.79 measured (1 row)" and r["verify_tokens"] == 5
        assert round(r["median"], 1) == 283.4


def test_fill_query_takes_what_is_not_given():
    d = fit_default([row(2, "rtx-5090", "mtp", 6, 6, engine="llama.cpp")])
    none: dict = {}
    q, used = fill_query(d, **none)
    assert used and q == {"hardware": "rtx-5090", "gpus": 1, "method": "mtp",
                          "engines": ("llama.cpp",), "block": 6, "budget": 6,
                          "verify_tokens": None}
    q, used = fill_query(d, **{**none, "hardware": "h100", "block": 3})
    assert used and (q["hardware"], q["gpus"], q["method"], q["block"], q["budget"]) == (
        "h100", None, "mtp", 3, 3)     # a chain's budget follows its block
    q, _ = fill_query(DEFAULT_QUESTION, **{**none, "block": 8})
    assert (q["method"], q["block"], q["budget"]) == ("ddtree", 8, 32)   # a tree keeps its budget
    q, used = fill_query(d, **{**none, "hardware": "h100", "method": "eagle3", "block": 3,
                               "engines": ("vllm",)})
    assert not used and (q["method"], q["block"], q["budget"]) == ("eagle3", 3, None)
    q, used = fill_query(DEFAULT_QUESTION, **none)   # the bundled question, as before
    assert (q["hardware"], q["gpus"], q["block"], q["budget"], q["engines"]) == (
        "b300", None, 16, 32, ("sglang", "native"))
    # --verify-tokens alone: the default's shape at that M (a tree keeps its block 16 and
    # verifies budget + 1; a chain is that depth), not a shapeless M that priced no tree nodes
    # and let --accept 60 through for DDTree block 16 (at most 17 tokens a step)
    q, _ = fill_query(DEFAULT_QUESTION, verify_tokens=100)
    assert (q["method"], q["block"], q["budget"], q["verify_tokens"]) == ("ddtree", 16, 99, 100)
    q, _ = fill_query(d, verify_tokens=4)
    assert (q["method"], q["block"], q["budget"], q["verify_tokens"]) == ("mtp", 3, 3, 4)
    q, _ = fill_query(DEFAULT_QUESTION, verify_tokens=33, method="ddtree")   # a method: as given
    assert (q["block"], q["budget"]) == (None, None)


# ---------------------------------------------------------------- end to end
def sweep_csv() -> str:
    """The public sweep in the measurement schema (extrapolation.usable_sweeps' conversion)."""
    with open(SWEEP, newline="", encoding="utf-8") as fh:
        records = list(csv.DictReader(fh))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue()


@pytest.fixture(scope="module")
def rtx5090(tmp_path_factory):
    """A working directory with a tiny (unconverged) fit of the RTX 5090 sweep."""
    work = tmp_path_factory.mktemp("rtx5090")
    (work / "data").mkdir()
    (work / "models").mkdir()
    for name in ("hardware.csv", "seed_estimates.csv", "models.csv"):
        shutil.copy(bundled(name), work / "data" / name)
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    (work / "data" / "rtx5090.csv").write_text(sweep_csv())
    code, _, err = run_cli(work, "fit", "--data", "data/rtx5090.csv", "--chains", "1",
                           "--draws", "100", "--tune", "100", "--no-remedy", "--quiet")
    assert code == 5, err          # a tiny sampler: unconverged, saved
    return work


ASKED = "llama.cpp mtp block 6 budget 6 on rtx-5090 x1"
#: What --allow-unconverged says of the tiny fit, on every command (edca587).
GATES = "failed its convergence gates"


def run_unconverged(work, *args: str) -> tuple[int, str, str]:
    """``run_cli`` with ``--allow-unconverged``: its stderr without the line saying the fit
    failed its gates, so a test counts the other lines (the line itself: see
    :func:`test_the_tiny_fit_is_said_to_have_failed_its_gates`)."""
    code, out, err = run_cli(work, *args)
    return code, out, "".join(line for line in err.splitlines(keepends=True) if GATES not in line)


def predict_json(work, *flags: str) -> tuple[dict, dict, str]:
    """``predict --allow-unconverged FLAGS --format json``: its one row, the payload (checked
    against the schema) and stderr."""
    code, out, err = run_unconverged(work, "predict", "--allow-unconverged", *flags, "--format",
                                     "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("predict", payload)
    (r,) = payload["rows"]
    return r, payload, err


def test_the_tiny_fit_is_said_to_have_failed_its_gates(rtx5090):
    code, _, err = run_cli(rtx5090, "predict", "--allow-unconverged", "--accept", "3")
    assert code == 0 and any(GATES in line and "used anyway (--allow-unconverged)" in line
                             for line in err.splitlines()), err


def test_predict_asks_the_fit_its_own_question(rtx5090):
    r, payload, err = predict_json(rtx5090, "--accept", "3")
    assert (r["hardware"], r["gpus"], r["engine"], r["method"], r["block"], r["budget"],
            r["verify_tokens"]) == ("rtx-5090", 1, "llama.cpp", "mtp", 6, 6, 7)
    assert payload["default_scenario"]["asked"] == ASKED
    assert payload["default_scenario"]["accept"] == 4.222    # the block-6 row's, every digit
    assert err.count("\n") == 1 and err == (
        "ddtree-bayes predict: the fit never measured b300; asking its most-measured system: "
        f"{ASKED} (pass --hardware/--method/--block/--budget to ask another)\n")
    # partial flags: the rest from the fit's default, not from b300 / ddtree 16 / 32
    code, out, err = run_unconverged(rtx5090, "predict", "--allow-unconverged", "--block", "3",
                             "--accept", "3")
    assert code == 0, err
    assert "rtx-5090 x1, mtp, block 3, budget 3, verify 4 tokens" in out   # a chain: budget = block
    assert err.count("\n") == 1 and "the flags not given come from its most-measured" in err
    # a full query asks what it says, with no line
    code, out, err = run_unconverged(rtx5090, "predict", "--allow-unconverged", "--hardware",
                             "rtx-5090", "--engine", "llama.cpp", "--method", "mtp", "--block",
                             "2", "--accept", "2", "--format", "json")
    assert code == 0 and err == "" and json.loads(out)["default_scenario"] is None


def test_the_api_says_which_question_it_answers_as_predict_does(rtx5090):
    """`predict` on a fit that never measured B300 says on stderr that it asks the fit's own
    most-measured system, and which flags it filled; `db.predict(accept=3)` answered the RTX
    5090's llama.cpp MTP block 6 without a word (the README's question is B300 DDTree). The
    API now gives predict's line as a UserWarning: the same words, cross-checked against the
    CLI's stderr for the same flags."""
    import warnings

    from ddtree_bayes import api

    draws = api.load(workdir=rtx5090)
    for flags, kw in ((("--accept", "3"), {"accept": 3}),
                      (("--block", "3", "--accept", "3"), {"block": 3, "accept": 3})):
        code, _, err = run_unconverged(rtx5090, "predict", "--allow-unconverged", *flags)
        assert code == 0, err
        (said,) = [line.removeprefix("ddtree-bayes predict: ") for line in err.splitlines()]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = api.predict(draws, allow_unconverged=True, workdir=rtx5090, **kw)
        assert said in [str(w.message) for w in caught]
        assert table["hardware"].tolist() == ["rtx-5090"]
    # a full question asks what it says: no line, from either
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api.predict(draws, allow_unconverged=True, workdir=rtx5090, hardware="rtx-5090",
                    engines="llama.cpp", method="mtp", block=2, accept=2)
    assert not [w for w in caught if "most-measured" in str(w.message)]


def test_predict_without_accept_takes_the_configurations_measured_acceptance(rtx5090):
    """No --accept and no [[acceptance]] prior for mtp block 6: the block-6 row's measured
    4.222 (one row) instead of an error; a configuration never measured still asks for one."""
    r, _, _ = predict_json(rtx5090)
    assert (r["accept_kind"], r["accept"], r["accept_distribution"]) == ("measured", 4.222, None)
    code, out, err = run_unconverged(rtx5090, "predict", "--allow-unconverged")
    assert code == 0, err
    assert "4.22 measured (1 row)" in out
    code, out, err = run_unconverged(rtx5090, "predict", "--allow-unconverged", "--block", "9")
    assert code == 2 and "no measured acceptance for rtx-5090 x1, llama.cpp, mtp, block 9" in err
    assert "(asked as the fit's default question: the fit never measured b300)" in err


def test_optimize_and_next_ask_the_fits_system(rtx5090):
    code, out, err = run_unconverged(rtx5090, "optimize", "--allow-unconverged", "--budgets", "8,16",
                             "--format", "json")
    # the acceptance curve is Kimi K2.6's, ddtree block 16 (the curve's method and block), asked
    # of this Qwen fit's system: qwen3.8-27b's one ddtree drafter (its card in the bundled
    # drafters.csv) was trained at block 8, so no drafter runs the step asked (f5160765):
    # refused, one line, nothing on stdout
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err.startswith("ddtree-bayes: error: block 16 is above the block 8 qwen3.8-27b's "
                          "ddtree drafter incoai/Qwen3.8-27B-DFlash2"), err
    code, out, err = run_unconverged(rtx5090, "next", "--allow-unconverged", "--k", "2", "--query",
                             "--accept 4", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("next", payload)
    q = payload["query"]
    assert (q["hardware"], q["engine"], q["method"], q["verify_tokens"]) == (
        "rtx-5090", "llama.cpp", "mtp", 7)
    assert payload["default_scenario"]["asked"] == ASKED and err.count("\n") == 1


def test_next_without_accept_takes_the_measured_acceptance(rtx5090):
    """Plain `next` on the RTX 5090 fit: the default question's measured 4.222, as predict."""
    code, out, err = run_unconverged(rtx5090, "next", "--allow-unconverged", "--k", "2", "--format",
                             "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("next", payload)
    assert payload["query"]["verify_tokens"] == 7
    q = payload["query"]
    # the number itself, as predict's JSON gives it (the table's label is "4.22 measured")
    assert (q["accept"], q["accept_distribution"], q["accept_kind"]) == (4.222, None, "measured")


def test_a_chains_budget_and_block_fill_each_other_and_match_measured_rows(rtx5090):
    """--budget alone on the chain default sets the block too (mtp 3/3, M = 4); a chain row
    stored with its budget is matched by a query that leaves the budget out."""
    d = fit_default([row(2, "rtx-5090", "mtp", 6, 6, engine="llama.cpp")])
    q, _ = fill_query(d, budget=3)
    assert (q["block"], q["budget"]) == (3, 3)
    # measured mtp 3/3 (accept 3.175): asked as --method mtp --block 3 (no budget)
    r, _, _ = predict_json(rtx5090, "--hardware", "rtx-5090", "--engine", "llama.cpp",
                           "--method", "mtp", "--block", "3")
    assert (r["accept_kind"], r["accept"], r["verify_tokens"]) == ("measured", 3.175, 4)


def test_the_bundled_rows_still_ask_b300(tmp_path):
    """The point-mass fit of the bundled B300 rows: the bundled question, no line, null (its
    one warning: budget 32 is past the measured budget 8)."""
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--accept", "12", "--format", "json")
    assert code == 0 and err == f"ddtree-bayes: warning: {BEYOND_M33}\n"
    payload = json.loads(out)
    assert payload["default_scenario"] is None
    assert {(r["hardware"], r["gpus"], r["method"], r["block"], r["budget"], r["engine"])
            for r in payload["rows"]} == {("b300", 8, "ddtree", 16, 32, "sglang"),
                                          ("b300", 8, "ddtree", 16, 32, "native")}


def test_the_bundled_fit_still_asks_b300(fitted_workdir):
    work, _ = fitted_workdir
    code, out, err = run_cli(work, "predict", "--accept", "12:16")
    assert code == 0 and err == f"ddtree-bayes: warning: {BEYOND_M33}\n"   # (budget 8 measured)
    assert out.splitlines()[1] == "b300 x8, ddtree, block 16, budget 32, verify 33 tokens, context 0"


def test_report_sections_ask_the_fits_question(rtx5090):
    """Answer line, fan (acceptance within [1, M], the system's measured points), variance
    shares, breakdown and decisions of the tiny RTX 5090 fit."""
    from ddtree_bayes.engine import store
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import headline

    draws = store.load(workdir=rtx5090)
    d = default_question(draws)
    fan = sections.fan_section(draws, 1, None, d)
    # [1, M], M = 7, and the block-6 row's measured 4.222 (every digit: predict's), the answer's
    assert fan["accept"] == [1.0, 2.0, 3.0, 4.0, 4.222, 5.0, 6.0, 7.0]
    assert fan["headline_accept"] == 4.222 and list(fan["engines"]) == ["llama.cpp"]
    assert "rtx-5090 x1, llama.cpp, mtp, block 6" in fan["engines"]["llama.cpp"]["scenario"]
    assert sorted(m["tok_s"] for m in fan["measured"]) == [74.8, 115.7, 144.4, 153.2, 156.0,
                                                            159.7, 162.1]
    q = fan["engines"]["llama.cpp"]["quantiles"][4]
    text = headline({"fan": fan, "default_scenario": {**d.to_json(), "derived": True}})
    assert text.startswith("Default scenario (rtx-5090 x1, mtp, block 6, budget 6, verify 7, "
                           f"context 0) at acceptance 4.22: llama.cpp {q[2]:.0f} tok/s")
    assert "never measured b300" in text and "no measurement on that system" not in text
    var = sections.variance_shares(draws, 1, None, d)
    assert "acceptance U(2.22,6.22)" in var["llama.cpp"]["shares"]
    breakdown = sections.step_breakdown(draws, draws.measurements, 1, None, d)
    assert breakdown[-1]["config"] == "default: rtx-5090x1 llama.cpp mtp M=7"
    assert fan["accept_max"] == 7.0 and fan["accept_clipped"] == [float(a) for a in range(8, 21)]
    # the bundled question's fan (1..20) stops at what a block-16 DDTree can emit: 16
    assert sections.FAN_ACCEPT == tuple(float(a) for a in range(1, 21))
    assert sections.fan_accept(DEFAULT_QUESTION, max_accept("ddtree", 16, 32, None, 33)) == tuple(
        float(a) for a in range(1, 17))


def test_report_says_so(rtx5090, tmp_path):
    code, out, err = run_unconverged(rtx5090, "report", "--quiet", "--out", str(tmp_path / "r"),
                             "--format", "json")
    assert code == 5, err             # the tiny fit is unconverged; the report says so
    payload = json.loads(out)
    validate_output("report", payload)
    assert payload["default_scenario"]["asked"] == ASKED
    assert [ln for ln in err.splitlines() if "most-measured" in ln] == [
        "ddtree-bayes report: the fit never measured b300; its answer line, fan, variance "
        f"shares, breakdown and decisions ask its most-measured system: {ASKED} (`ddtree-bayes "
        "predict` asks another)"]
    summary = json.loads(Path(payload["summary"]).read_text())
    assert summary["fan"]["accept"] == [1.0, 2.0, 3.0, 4.0, 4.222, 5.0, 6.0, 7.0]
    assert summary["default_scenario"]["derived"] is True
    md = (Path(payload["summary"]).parent / "summary.md").read_text()
    assert "Default scenario (rtx-5090 x1, mtp, block 6, budget 6, verify 7, context 0) at " \
           "acceptance 4.22: llama.cpp" in md
    hw = summary["decisions"]
    assert hw["hardware_query"] == "llama.cpp mtp b6/B6 accept 4.22"
    # one question, one number: predict without flags (the measured 4.222), the report's
    # answer line and its next's current figure, to the last bit (the answer line and next
    # asked 4.22, rounded: another number)
    r, _, _ = predict_json(rtx5090)
    assert r["accept"] == 4.222 == summary["fan"]["headline_accept"]
    q = summary["fan"]["engines"]["llama.cpp"]["quantiles"][summary["fan"]["accept"].index(4.222)]
    assert (q[0], q[2], q[4]) == (r["lo90"], r["median"], r["hi90"])
    now = hw["next"]["query"]
    assert (now["accept"], now["median"], now["lo"], now["hi"]) == (
        "4.222", r["median"], r["lo90"], r["hi90"])   # (asked --accept 4.222: it was "4.22")
    assert np.isfinite([h["ddtree"][1] for h in hw["hardware"] if "ddtree" in h]).all()


def test_a_tracked_default_that_moved_is_two_rows_not_a_change(monkeypatch):
    """A fit's own default question moves when a larger configuration is measured: the
    tracked comparison keys rows by their whole configuration, so block 5 before and block 6
    after are two rows (gone / new), while an unchanged configuration is one row."""
    from ddtree_bayes.workflows.living import tracking as T

    def r(block, median):
        return {"hardware": "rtx-5090", "gpus": 1, "engine": "llama.cpp", "method": "mtp",
                "block": block, "budget": block, "verify_tokens": block + 1,
                "context_tokens": 0.0, "accept": "4", "accept_kind": "given",
                "median": median, "lo90": median - 5,
                "hi90": median + 5}

    from ddtree_bayes.engine.testing import point_mass_draws

    before, after = point_mass_draws(), point_mass_draws()
    fits = {id(before): [r(5, 150.0), r(3, 120.0)], id(after): [r(6, 160.0), r(3, 121.0)]}
    monkeypatch.setattr(T, "query_rows",
                        lambda draws, q, seed, workdir, builtin, warnings=None: fits[id(draws)])
    out = T.compare_queries(before, after, [T.Tracked("default", {})], seed=1)
    by = {c["label"]: (c["before"] and c["before"]["median"], c["after"] and c["after"]["median"])
          for c in out}
    assert by == {"rtx-5090 x1 llama.cpp mtp b5/B5 accept 4": (150.0, None),
                  "rtx-5090 x1 llama.cpp mtp b3/B3 accept 4": (120.0, 121.0),
                  "rtx-5090 x1 llama.cpp mtp b6/B6 accept 4": (None, 160.0)}


def test_tracked_queries_keep_their_model_when_another_models_rows_arrive():
    """A query saved against a fit of Kimi alone (no --model) read "90% 122-134 -> - tok/s
    (... holds 2 models ... say which with --model)" once a Llama row made the refit a fit of
    two: it still asks about Kimi, and its rows under both fits are one row each."""
    from ddtree_bayes.engine.testing import multi_model_draws, point_mass_draws
    from ddtree_bayes.workflows.living import tracking as T

    before, after = point_mass_draws(), multi_model_draws()
    before.meta["model"]["target_model"] = "kimi-k2.6"   # as a real fit of one model stores it
    ar = T.Tracked("b300-ar", {"hardware": "b300", "engine": "sglang", "method": "ar",
                               "accept": "1"})
    out = T.compare_queries(before, after, [T.Tracked("default", dict(T.DEFAULT_QUERY)), ar],
                            seed=1)
    assert all(c["before"] and c["after"] for c in out), out
    (c,) = [c for c in out if c["name"] == "b300-ar"]
    assert c["label"] == "b300 x8 sglang ar accept 1"
    # the point masses: step_ar 8 ms before; the two-model fit's own Kimi step after
    assert c["before"]["median"] == pytest.approx(1000 / 8.0, rel=0.02)
    from ddtree_bayes.engine import predictive as P

    kimi = P.predict(after, model="kimi-k2.6", hardware="b300", engines=["sglang"], method="ar",
                     accept="1")[0]
    assert c["after"]["median"] == pytest.approx(kimi["median"])
    assert {c["label"] for c in out if c["name"] == "default"} >= {
        "b300 x8 sglang ddtree b16/B32 accept 14"}
    # the next refit is a fit of two models too: the query still asks about Kimi (the data's
    # first model), labelled with it now that no fit of one model stands beside
    again = T.compare_queries(after, multi_model_draws(), [ar], seed=1)
    assert [(c["label"], c["before"]["median"], c["after"]["median"]) for c in again] == [
        ("kimi-k2.6 b300 x8 sglang ar accept 1", kimi["median"], kimi["median"])]
    # a new query without --model on a fit of several models is refused, naming them
    from ddtree_bayes.core.errors import QueryError

    with pytest.raises(QueryError, match="holds 2 models .* say which with --model"):
        T.track_add(Path("/nonexistent/models"), ar.query, draws=after)


def test_a_kv_cache_that_cannot_fit_is_warned_about():
    """predict --context 128k --concurrency 1,64,4096 answered 1683 tok/s in total at C = 4096
    with no word that its KV cache (18.9 TB) could never be held: a warning per concurrency
    whose cache exceeds the memory left after the weights."""
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    card = load_model_cards(bundled("models.csv"))["kimi-k2.6"]
    assert card.kv_bytes_per_token == 35136     # MLA: (512 + 64) x 61 layers, one byte each
    draws.meta["model"]["card"] = dataclasses.asdict(card)
    q = resolve(draws, Flags(hardware="b300", engines=("sglang",), method="ar", accept="1",
                             context="128k", concurrency=(1, 64, 512)))
    # 8 x 288 GB - 1000B x 0.6 (the checkpoint's bytes) = 1704 GB left; 131072 x 35136 B =
    # 4.6 GB per stream: C = 64 needs 295 GB (fits), C = 512 needs 2358 GB (does not)
    (warning,) = [w for w in q.warnings if "KV cache" in w]
    assert warning.startswith("at C = 512 and context 131072 the KV cache needs 2357.9 GB")
    assert "have 1704.0 GB left after the weights (600.0 GB)" in warning
    # an old fit's card without the field: no check, and it says so
    del draws.meta["model"]["card"]["kv_bytes_per_token"]
    (note,) = [w for w in resolve(draws, Flags(hardware="b300", engines=("sglang",),
                                               method="ar", accept="1", context="128k",
                                               concurrency=(512,))).warnings if "KV cache" in w]
    assert note.startswith("kimi-k2.6's card gives no kv_bytes_per_token: whether the KV cache "
                           "of 512 streams at context 131072 fits in the 1704.0 GB 8 x b300 "
                           "have left after the weights was not checked")


def test_diff_pairs_a_one_model_fits_parameters_with_a_several_model_fit():
    """diff of a Kimi-only fit and its refit with a Llama row listed step_ar_ms[b300x8] as
    removed and step_ar_ms[kimi-k2.6@b300x8] as added: no change computed for any per-system
    or per-group parameter. They are one row now."""
    from ddtree_bayes.engine.testing import multi_model_draws, point_mass_draws
    from ddtree_bayes.workflows.living.fit_history import parameter_table

    a, b = point_mass_draws(), multi_model_draws(step_ar_ms=[10.0, 7.0])
    a.meta["model"]["target_model"] = "kimi-k2.6"
    a.meta["diagnostics"] = {"parameters": [{"parameter": "step_ar_ms[b300x8]"},
                                            {"parameter": "overhead_frac[b300x8/sglang/ddtree]"}]}
    b.meta["diagnostics"] = {"parameters": [
        {"parameter": "overhead_frac[kimi-k2.6@b300x8/sglang/ddtree]"}]}
    rows = {r["parameter"]: r for r in parameter_table(a, b)}
    step = rows["step_ar_ms[kimi-k2.6@b300x8]"]
    assert (step["a"]["median"], step["b"]["median"]) == (8.0, 10.0)
    assert step["median_change"] == pytest.approx(0.25)
    assert "step_ar_ms[b300x8]" not in rows
    assert rows["step_ar_ms[llama-3.1-8b-instruct@h100x1]"]["a"] is None   # new pair: added
    assert rows["overhead_frac[kimi-k2.6@b300x8/sglang/ddtree]"]["a"]["median"] == 0.2


def test_a_gpu_without_memory_is_answered_with_a_warning_that_nothing_was_checked():
    """A GPU added with a blank memory_gb skipped the weights check: Kimi K2.6 (600 GB) on one
    such GPU answered 34 tok/s, exit 0, no word. (h200 x8 stands in for such a row: h100's 8
    x 80 GB hold the 600 GB, so it warns of nothing.)"""
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    draws.meta["model"]["card"] = dataclasses.asdict(
        load_model_cards(bundled("models.csv"))["kimi-k2.6"])
    draws.hardware["h200"] = {**draws.hardware["h200"], "memory_gb": ""}   # as a user's row
    q = resolve(draws, Flags(hardware="h200", gpus=1, engines=("sglang",), method="ar",
                             accept="1"))
    assert ("h200 has no memory_gb in the hardware table: whether kimi-k2.6's weights "
            "(600.0 GB) fit in 1 x h200 was not checked") in " ".join(q.warnings)
    # a measured system, or a GPU with its memory, says nothing of the kind
    for flags in (Flags(hardware="b300", engines=("sglang",), method="ar", accept="1"),
                  Flags(hardware="h100", engines=("sglang",), method="ar", accept="1")):
        assert not [w for w in resolve(draws, flags).warnings if "memory_gb" in w]


def test_cards_edited_after_a_fit_are_named(tmp_path):
    """Kimi's bytes_per_weight edited 0.5 -> 1.0 in data/models.csv after a fit (or a drafter
    card added): `update` said 'up to date ... nothing to refit' and predict --strict said
    nothing, while the answers kept the stored cards."""
    import dataclasses

    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.scenario import card_changes
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    draws.meta["model"]["card"] = dataclasses.asdict(
        load_model_cards(bundled("models.csv"))["kimi-k2.6"])
    draws.meta["model"]["drafter_cards"] = [
        {**dataclasses.asdict(d), "methods": list(d.methods)} for d in drafter_table()]
    (tmp_path / "data").mkdir()
    text = bundled("models.csv").read_text()
    (tmp_path / "data" / "models.csv").write_text(text)
    assert card_changes(draws, tmp_path) == []
    kimi = next(line for line in text.splitlines() if line.startswith("kimi-k2.6,"))
    cells = kimi.split(",")
    assert cells[8] == "0.5"                       # bytes_per_weight
    cells[8] = "1.0"
    (tmp_path / "data" / "models.csv").write_text(text.replace(kimi, ",".join(cells)))
    (warning,) = card_changes(draws, tmp_path)
    assert warning.startswith("the model card of kimi-k2.6 here differs from fit point-mass's")
    # a field only the memory checks read (a review: a card re-added with its checkpoint's
    # bytes said nothing, and the fit's weights-fit check kept the stored value)
    stored = draws.meta["model"]["card"]["max_context_tokens"]
    draws.meta["model"]["card"]["max_context_tokens"] = stored // 2
    (tmp_path / "data" / "models.csv").write_text(text)
    assert card_changes(draws, tmp_path) == [
        "the model card of kimi-k2.6 here differs from fit point-mass's in max_context_tokens: "
        "its KV-cache and weights-fit checks use the stored values; re-run `ddtree-bayes fit` "
        "to use these"]
    # the KV bytes per token price the context cost's prior (core/context_cost.py): a change
    # is the model's
    draws.meta["model"]["card"].update(max_context_tokens=stored,
                                       kv_bytes_per_token=2 * 35136.0)
    (warning,) = card_changes(draws, tmp_path)
    assert warning.startswith("the model card of kimi-k2.6 here differs from fit point-mass's:")
    draws.meta["model"]["card"]["kv_bytes_per_token"] = 35136.0
    # a card gone from the file is said to be gone, not to differ (a user's own card removed
    # after its fit: "the model card of my-moe here differs")
    (tmp_path / "data" / "models.csv").write_text(text.replace(kimi + "\n", ""))
    assert card_changes(draws, tmp_path) == [
        "the model card of kimi-k2.6 is not in data/models.csv here (fit point-mass stored it): "
        "its answers use the stored card; write it again (`ddtree-bayes card add`) or re-run "
        "`ddtree-bayes fit` without its rows"]
    (tmp_path / "data" / "models.csv").write_text(text)
    # a fit's proxy card (a model without one) is in no file: no change until one is written
    draws.meta["model"]["model_cards"] = {"my-model": {**draws.meta["model"]["card"],
                                                       "model": "my-model"}}
    draws.meta["model"]["proxy_card"] = {"model": "my-model"}
    assert card_changes(draws, tmp_path) == []
    del draws.meta["model"]["model_cards"], draws.meta["model"]["proxy_card"]
    head = bundled("drafters.csv").read_text().splitlines()[0]
    row = {"drafter": "my-head", "target_model": "kimi-k2.6", "method": "eagle3",
           "kind": "eagle3_head", "layers": "1", "params_b": "1.0", "params_active_b": "1.0",
           "lm_head_params_b": "0.9", "bytes_per_weight": "2", "source": "me"}
    (tmp_path / "data" / "drafters.csv").write_text(
        head + "\n" + ",".join(row.get(c, "") for c in head.split(",")) + "\n")
    (warning,) = card_changes(draws, tmp_path)
    assert warning.startswith("the drafter card my-head here differs")


def test_gpu_counts_offered_for_an_unmeasured_gpu_hold_the_weights():
    """predict on a GPU the fit never measured, without --gpus, said the model "could run on
    [1, 2, 4, 8] GPUs" (the counts measured elsewhere) when 1, 2 and 4 of them cannot hold its
    weights, the check that refuses `--gpus 1` there. Kimi K2.6's weights are 1000B x 0.6 =
    600 GB: 8 x h100 (80 GB each) hold them, 4 x 80 = 320 GB do not; 8 x rtx-5090 (32 GB
    each) = 256 GB do not, and --gpus 19 (608 GB) is the fewest that do."""
    import dataclasses

    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.scenario import resolve_scenario
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    draws.meta["model"]["card"] = dataclasses.asdict(
        load_model_cards(bundled("models.csv"))["kimi-k2.6"])
    draws.meta["coords"]["system"] = ["b300x1", "b300x2", "b300x4", "b300x8"]

    def refusal(hardware: str) -> str:
        with pytest.raises(QueryError) as err:
            resolve_scenario(draws, hardware=hardware, gpus=None, engine="sglang",
                             method="ar", block=None, budget=None, verify_tokens=None,
                             context_tokens=None)
        return str(err.value)

    assert refusal("h100") == (
        "h100 could run on 8 GPUs in this fit (1, 2 and 4 x 80.0 GB cannot hold "
        "kimi-k2.6's weights, 600.0 GB) (fix: --gpus 8)")   # (one count: the fix names it)
    assert refusal("rtx-5090") == (
        "rtx-5090 could run on none of the GPU counts this fit measured (1, 2, 4 and 8): 8 x "
        "32.0 GB cannot hold kimi-k2.6's weights, 600.0 GB (fix: --gpus 19 or more of them (32 "
        "or 64 for a tensor-parallel engine, which shards kimi-k2.6's 64 heads evenly; llama.cpp "
        "splits layers over any count), or a GPU with more memory)")
    # a measured GPU lists every count measured on it (its rows prove they run)
    assert refusal("b300") == ("b300 could run on 1, 2, 4 or 8 GPUs in this fit (fix: say "
                               "which with --gpus)")


def test_memory_messages_tell_apart_the_figures_they_compare():
    """A KV-cache warning read "needs 3 GB ... have 3 GB left": both figures rounded to whole
    GB. Llama-3.1-8B's card: 8.03B x 2 bytes = 16.06 GB of weights, 131072 bytes of KV per
    token; at context 23200 the cache is 23200 x 131072 B = 3.0409 GB, and one 19 GB GPU has
    19 - 16.06 = 2.94 GB left: one decimal tells them apart. At 19.02 GB (2.96 left) and
    context 23100 (3.0278 GB) one decimal reads 3.0 for both: two decimals, for every figure
    of the message."""
    import dataclasses
    from types import SimpleNamespace as NS

    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.scenario import check_weights_fit, kv_cache_warning

    card = dataclasses.asdict(load_model_cards(bundled("models.csv"))["llama-3.1-8b-instruct"])
    fit = NS(meta={"model": {"card": card}}, hardware={"gpu": {"memory_gb": "19"}})
    sc = NS(model=None, hardware="gpu", gpus=1, context_tokens=23200.0)
    assert kv_cache_warning(fit, sc, 1) == (
        "at C = 1 and context 23200 the KV cache needs 3.0 GB (131072 bytes per token, the "
        "card's kv_bytes_per_token) but 1 x gpu have 2.9 GB left after the weights (16.1 GB): "
        "an engine holding the cache at the card's bytes cannot run this context on these "
        "GPUs; at half of them (fp8 for a bf16 card) it needs 1.5 GB, which fits: the answer "
        "is for such a deployment (--kv-cache says the deployment's cache)")
    fit.hardware["gpu"]["memory_gb"] = "19.02"
    assert kv_cache_warning(fit, NS(**{**vars(sc), "context_tokens": 23100.0}), 1) == (
        "at C = 1 and context 23100 the KV cache needs 3.03 GB (131072 bytes per token, the "
        "card's kv_bytes_per_token) but 1 x gpu have 2.96 GB left after the weights (16.06 "
        "GB): an engine holding the cache at the card's bytes cannot run this context on "
        "these GPUs; at half of them (fp8 for a bf16 card) it needs 1.51 GB, which fits: the "
        "answer is for such a deployment (--kv-cache says the deployment's cache)")
    # the weights check alike: 16.06 GB on one 16 GB GPU read "(16 GB ...) ... (16 GB)"
    fit.hardware["gpu"]["memory_gb"] = "16"
    with pytest.raises(QueryError) as err:
        check_weights_fit(fit, None, "gpu", 1)
    assert str(err.value) == (
        "llama-3.1-8b-instruct's weights (16.1 GB: 8.03B parameters at 2 bytes) do not fit in "
        "1 x gpu (16.0 GB) (fix: --gpus 2 or more of them, or a GPU with more memory)")


def test_a_card_without_kv_bytes_says_the_cache_was_not_checked():
    """A fit of a model without a card (the proxy card: no KV bytes per token) answered
    `predict --context 32k --concurrency 1,4,16` on one RTX 4090 with 800 tok/s in total at
    C = 16 and no word on memory, where a Llama-3.1-8B-sized model's 16 caches of 32k tokens
    hold 68.7 GB beside 16 GB of weights on a 24 GB GPU: kv_cache_warning cannot tell without
    the card's bytes, and said nothing. It says the check was not made, once, at the most
    streams asked (Llama-3.1-8B's card without them: 24 - 16.06 = 7.94 GB left)."""
    import dataclasses
    from types import SimpleNamespace as NS

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.scenario import unchecked_kv_warning

    card = dataclasses.asdict(load_model_cards(bundled("models.csv"))["llama-3.1-8b-instruct"])
    card["kv_bytes_per_token"] = None
    fit = NS(meta={"model": {"card": card}}, hardware={"gpu": {"memory_gb": "24"}})
    sc = NS(model=None, hardware="gpu", gpus=1, context_tokens=32768.0)
    assert unchecked_kv_warning(fit, sc, (1, 4, 16)) == (
        "llama-3.1-8b-instruct's card gives no kv_bytes_per_token: whether the KV cache of 16 "
        "streams at context 32768 fits in the 7.9 GB 1 x gpu have left after the weights was "
        "not checked, and the memory-read cap counts the weights alone (a card from "
        "`ddtree-bayes card add` gives the bytes)")
    assert unchecked_kv_warning(fit, sc, (1,)).startswith(
        "llama-3.1-8b-instruct's card gives no kv_bytes_per_token: whether the KV cache of 1 "
        "stream at context 32768 fits")
    # no context, or a card with the bytes (kv_cache_warning checks it): nothing to say
    assert unchecked_kv_warning(fit, NS(**{**vars(sc), "context_tokens": 0.0}), (16,)) is None
    card["kv_bytes_per_token"] = 131072
    assert unchecked_kv_warning(fit, sc, (16,)) is None


B300_DDTREE_8 = ("--hardware", "b300", "--method", "ddtree", "--block", "8", "--budget", "8")


def test_a_measured_acceptance_of_the_exact_configuration_comes_before_a_prior(tmp_path):
    """b300 x8 sglang ddtree 8/8 was measured at accept 4.4 (bundled row 3); the priors'
    [[acceptance]] entry of ddtree 8/8 (TruncNormal(4.6, 0.8), with no system or engine) came
    first and answered with its draws. The configuration's own measurement is the most direct
    evidence: predict, `next --query` and `track` now take it, and say so. Native, never
    measured there, took the priors entry (TruncNormal(4.6, ...)) while sglang in the same
    question took 4.4: acceptance is the drafter's, target's and prompts', not the engine's,
    so native now takes the mean measured on the same system by the other engines."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)   # (next needs noise)
    r, _, _ = predict_json(work, *B300_DDTREE_8, "--engine", "sglang")
    assert (r["accept_kind"], r["accept"], r["accept_distribution"]) == ("measured", 4.4, None)
    assert r["accept_from"] == ("the mean accept_len of 1 row measured of this configuration "
                                "on b300x8 sglang")
    code, out, err = run_cli(work, "predict", *B300_DDTREE_8, "--engine", "sglang")
    assert code == 0, err
    assert "sglang  4.4 measured (1 row)" in out
    assert ("acceptance not given: sglang: the mean accept_len of 1 row measured of this "
            "configuration on b300x8 sglang (pass --accept to fix it).") in out.splitlines()
    r, _, _ = predict_json(work, *B300_DDTREE_8, "--engine", "native")
    assert (r["accept_kind"], r["accept"], r["accept_distribution"]) == ("measured", 4.4, None)
    assert r["accept_from"] == ("the mean accept_len of 1 row measured of this configuration "
                                "on b300x8 (other engines)")
    code, out, err = run_cli(work, "predict", *B300_DDTREE_8, "--engine", "sglang,native")
    assert code == 0, err
    lines = out.splitlines()
    assert [ln.split("  ")[0:2] for ln in lines if ln.startswith(("sglang ", "native "))] == [
        ["sglang", "4.4 measured (1 row)"], ["native", "4.4 measured (1 row)"]]
    assert [ln for ln in lines if ln.startswith("acceptance not given")] == [
        "acceptance not given: native: the mean accept_len of 1 row measured of this "
        "configuration on b300x8 (other engines) (pass --accept to fix it).",
        "acceptance not given: sglang: the mean accept_len of 1 row measured of this "
        "configuration on b300x8 sglang (pass --accept to fix it)."]
    code, out, err = run_cli(work, "next", "--k", "2", "--query",
                             " ".join(B300_DDTREE_8) + " --engine sglang", "--format", "json")
    assert code == 0, err
    q = json.loads(out)["query"]   # (as predict's JSON: the number, and that it was measured)
    assert (q["accept_kind"], q["accept"], q["accept_distribution"]) == ("measured", 4.4, None)
    code, out, err = run_cli(work, "track", *B300_DDTREE_8, "--engine", "sglang", "--format",
                             "json")
    assert code == 0, err
    (now,) = json.loads(out)["now"]["rows"]
    assert now["label"] == "b300 x8 sglang ddtree b8/B8 accept 4.4 measured (1 row)"


def test_the_acceptance_prior_note_names_its_engines_when_engines_differ():
    """The line under predict's table said "acceptance not given: drawn from the acceptance
    prior in the priors file" when any row was drawn from the prior, also when another
    engine's rows took a measured mean (b300 sglang 13.1 measured, native the prior): it read
    as if every row were. It names the engines it applies to when they are not all."""
    from ddtree_bayes.cli.predict import accept_notes

    prior = {"accept_kind": "prior"}
    measured = {"accept_kind": "measured", "accept_from": "the mean accept_len of 1 row "
                "measured of this configuration on b300x8 sglang"}
    assert accept_notes([{"engine": "sglang", **measured}, {"engine": "native", **prior},
                         {"engine": "vllm", **prior}]) == [
        "acceptance not given: native, vllm: drawn from the acceptance prior in the priors "
        "file (pass --accept to fix it).",
        "acceptance not given: sglang: the mean accept_len of 1 row measured of this "
        "configuration on b300x8 sglang (pass --accept to fix it)."]
    # every engine drawn from the prior: the line as before, naming none
    assert accept_notes([{"engine": "sglang", **prior}, {"engine": "native", **prior}]) == [
        "acceptance not given: drawn from the acceptance prior in the priors file (pass "
        "--accept to fix it)."]


def test_a_tracked_query_whose_acceptance_source_changed_is_one_row(tmp_path):
    """`track add` (no flags) asks b300 ddtree 16/32 without --accept: the priors entry
    (TruncNormal(10, 2.5)) under a fit of the bundled b300 rows. A fit with that configuration
    measured at 13.1 answers it from the measured mean: update and diff keyed the rows by
    their label, acceptance label included, so each engine's question was two rows, "->  -
    (after: not predicted)" and "- -> ... (new)". They are keyed by what was asked (engine,
    and the acceptance as given, 'default' here): one row per engine, saying the acceptance's
    source changed."""
    from test_cli_support import FIT_ID, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w")
    code, _, err = run_cli(work, "track", "add")
    assert code == 0, err
    data = work / "data" / "measurements.csv"
    with data.open("a") as fh:
        fh.write("kimi-k2.6,b300,8,sglang,ddtree,16,32,33,13.1,,612,test,\n")
    later = "20260102T000000Z-pointms2"
    write_point_mass_fit(work / "models", data, work / "models" / "priors.toml",
                         work / "data" / "hardware.csv", fit_id=later)
    code, out, err = run_cli(work, "diff", FIT_ID, later, "--format", "json")
    assert code == 0, err
    prior = "prior truncnormal(mu=10, sigma=2.5, lower=1, upper=16)"
    rows = [(c["name"], c["label"], c["accept_asked"], c["accept_before"], c["accept_after"],
             c["before"] is not None, c["after"] is not None)
            for c in json.loads(out)["tracked"] if c["name"] != "default"]
    assert rows == [
        ("b300-sglang+native-ddtree", f"b300 x8 {e} ddtree b16/B32 accept 13.1 measured (1 row)",
         "default", prior, "13.1 measured (1 row)", True, True) for e in ("sglang", "native")]
    code, out, err = run_cli(work, "diff", FIT_ID, later)
    assert code == 0, err
    # the point masses: a 20 ms step (accept 14: sglang 700 tok/s), so 13.1 / 20 ms = 655;
    # native 778 at 14, so 778 x 13.1 / 14 = 728
    lines = [ln.strip() for ln in out.splitlines() if "b300-sglang+native-ddtree:" in ln]
    assert [re.sub(r"90% \d+-\d+ ->|median \d+ ->", "<prior> ->", ln) for ln in lines] == [
        f"b300-sglang+native-ddtree: b300 x8 {e} ddtree b16/B32 accept 13.1 measured (1 row): "
        f"<prior> -> {m}-{m} tok/s (<prior> -> {m}, width -100%; acceptance was {prior})"
        for e, m in (("sglang", 655), ("native", 728))], lines


def test_a_tracked_default_whose_measured_acceptance_moved_is_one_row():
    """The built-in `default` query of a fit that never measured b300 asks the fit's own
    question at its measured mean acceptance. A second run of that configuration moved the
    mean (2.79 -> 2.89), and update / diff printed the same question as two rows, "90%
    283-283 -> - tok/s (after: not predicted)" and "- -> 294-294 (new)": it was keyed by the
    acceptance value the default took, not by what was asked (the default's). One row now,
    saying the acceptance moved."""
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
    from ddtree_bayes.workflows.living import tracking as T

    head, *rows = MULTI_DATA.splitlines(keepends=True)
    llama = "".join(r for r in rows if r.startswith("llama"))   # first: the project's model
    kimi = "".join(r for r in rows if not r.startswith("llama"))
    eagle = "llama-3.1-8b-instruct,h100,1,vllm,eagle3,4,,5,{},,{},test,\n"
    before = multi_model_draws().view(data_csv=head + llama + eagle.format(2.79, 225) + kimi)
    after = multi_model_draws().view(
        data_csv=head + llama + eagle.format(2.79, 225) + eagle.format(2.99, 240) + kimi)
    out = T.compare_queries(before, after, [T.Tracked("default", dict(T.DEFAULT_QUERY),
                                                      builtin=True)], seed=1)
    (c,) = out
    # the point mass: a 9.843 ms step at M = 5, so 2.79 x 1000 / 9.843 = 283.4 tok/s before,
    # (2.79 + 2.99) / 2 = 2.89 -> 293.6 after
    assert (c["accept_asked"], c["accept_before"], c["accept_after"]) == ("default", "2.79",
                                                                          "2.89")
    assert (round(c["before"]["median"], 1), round(c["after"]["median"], 1)) == (283.4, 293.6)
    assert T.format_change(c) == (
        "default: llama-3.1-8b-instruct h100 x1 vllm eagle3 b4/B4 accept 2.89: 90% 283-283 -> "
        "294-294 tok/s (median 283 -> 294, width n/a; acceptance was 2.79)")


def test_a_cache_that_fits_at_half_its_bytes_is_not_said_to_fit_no_engine():
    """At C = 1 a KV cache that does not fit at the card's bytes per token read "no engine
    can hold this context on these GPUs (a cache of half the card's bytes per token, fp8 for
    bf16, would need 6.7 GB)" beside "7.9 GB left": Llama-3.1-8B on one RTX 4090 (24 GB) at
    context 102400 (102400 x 131072 B = 13.42 GB; 24 - 16.06 = 7.94 GB left; half 6.71 GB
    fits). Only a cache too big at half its bytes too is one no engine can hold."""
    import dataclasses
    from types import SimpleNamespace as NS

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.scenario import kv_cache_warning

    card = dataclasses.asdict(load_model_cards(bundled("models.csv"))["llama-3.1-8b-instruct"])
    fit = NS(meta={"model": {"card": card}}, hardware={"rtx-4090": {"memory_gb": "24"}})
    sc = NS(model=None, hardware="rtx-4090", gpus=1, context_tokens=102400.0)
    assert kv_cache_warning(fit, sc, 1) == (
        "at C = 1 and context 102400 the KV cache needs 13.4 GB (131072 bytes per token, the "
        "card's kv_bytes_per_token) but 1 x rtx-4090 have 7.9 GB left after the weights (16.1 "
        "GB): an engine holding the cache at the card's bytes cannot run this context on these "
        "GPUs; at half of them (fp8 for a bf16 card) it needs 6.7 GB, which fits: the answer "
        "is for such a deployment (--kv-cache says the deployment's cache)")
    # at 131072 tokens half the bytes (8.59 GB) do not fit in 7.94 GB either: no engine can
    assert kv_cache_warning(fit, NS(**{**vars(sc), "context_tokens": 131072.0}), 1) == (
        "at C = 1 and context 131072 the KV cache needs 17.2 GB (131072 bytes per token, the "
        "card's kv_bytes_per_token) but 1 x rtx-4090 have 7.9 GB left after the weights (16.1 "
        "GB): no engine can hold this context on these GPUs (a cache of half the card's bytes "
        "per token, fp8 for a bf16 card, would need 8.6 GB); the answer is for a step that "
        "cannot run")


def test_half_a_cache_that_is_fp8_already_is_not_called_fp8():
    """Kimi K2.6's card gives its MLA cache at 8 bits (kv_cache_bits 8): half of it is a 4-bit
    cache, but the warning said "at half of them (fp8 for a bf16 card)". 8 x RTX PRO 6000, C =
    128 at context 65536: 128 x 65536 x 35136 B = 294.7 GB against 768 - 600 = 168 GB left;
    half, 147.4 GB, fits."""
    import dataclasses
    from types import SimpleNamespace as NS

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.scenario import kv_cache_warning

    card = dataclasses.asdict(load_model_cards(bundled("models.csv"))["kimi-k2.6"])
    assert card["kv_cache_bits"] == 8
    fit = NS(meta={"model": {"card": card}}, hardware={"rtx-pro-6000": {"memory_gb": "96"}})
    sc = NS(model=None, hardware="rtx-pro-6000", gpus=8, context_tokens=65536.0)
    text = kv_cache_warning(fit, sc, 128)
    assert ("294.7 GB (35136 bytes per token" in text and "168.0 GB left" in text
            and "at half of them (4 bits for the card's 8-bit cache) the 128 streams need "
                "147.4 GB, which fits" in text), text


def test_half_a_cache_of_a_fit_stored_before_its_bits_is_the_card_heres():
    """A fit stored before cards kept ``kv_cache_bits`` (the key absent) has Kimi K2.6's 35136
    bytes per token without its 8 bits; ``--kv-cache`` takes the bits of the card here
    (fit_card), but the warning's "half of them" text read the stored None as bf16's 16:
    "fp8 for a bf16 card" for a cache that is fp8 already, the text 0e75be4 fixed for new
    fits. The same case as above, the card stored without the key."""
    import dataclasses
    from types import SimpleNamespace as NS

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.scenario import kv_cache_warning

    card = dataclasses.asdict(load_model_cards(bundled("models.csv"))["kimi-k2.6"])
    del card["kv_cache_bits"]
    fit = NS(meta={"model": {"card": card}}, hardware={"rtx-pro-6000": {"memory_gb": "96"}},
             memo={})
    sc = NS(model=None, hardware="rtx-pro-6000", gpus=8, context_tokens=65536.0)
    text = kv_cache_warning(fit, sc, 128)
    assert ("at half of them (4 bits for the card's 8-bit cache) the 128 streams need "
            "147.4 GB, which fits" in text), text


def test_update_scores_a_rate_below_one_with_two_digits():
    """update's table of new rows printed tok/s with ':.0f', so a row scored at 0.498 tok/s
    (an AR step of 2 s at a long context) read "predicted 0, 50% 0-1"; predict's and diff's
    tables keep two significant digits below 1 (cli/output.tok_text), and so does this one."""
    from ddtree_bayes.cli.update import _score_table

    row = {"row": 11, "configuration": "x", "measured": 0.4, "status": "ok", "median": 0.498,
           "lo50": 0.45, "hi50": 0.55, "lo90": 0.4, "hi90": 0.6, "percentile": 0.3}
    assert _score_table([row]).splitlines()[2].split() == [
        "row", "11", "x", "0.4", "0.50", "0.45-0.55", "0.40-0.60", "30.0%", "ok"]
    big = {**row, "measured": 330, "median": 304.2, "lo50": 292.1, "hi50": 316.3, "lo90": 273,
           "hi90": 336, "percentile": 0.906}
    assert _score_table([big]).splitlines()[2].split()[3:7] == ["330", "304", "292-316",
                                                                "273-336"]


def test_a_default_with_no_acceptance_anywhere_is_not_answered_by_the_tracked_default():
    """A model of AR rows only (a user's own, in a fit of several models or alone) has the
    bundled question's DDTree block 16 budget 32 as its default, with no acceptance measured,
    inferred or in the priors for it: `predict` refuses that question without --accept, yet
    `update` (and diff, track list) answered the built-in tracked query at the bundled 14,
    Kimi's: "default: rtx-3090 x1 llama.cpp ddtree b16/B32 accept 14: 90% 318-1384 -> 314-1397
    tok/s (median 772 -> 783)" after a Llama-2-7B user added an AR row. Now it says it cannot
    answer, as predict does, and the report's answer line says its 14 is assumed."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.testing import multi_model_draws
    from ddtree_bayes.workflows.living import DEFAULT_QUERY
    from ddtree_bayes.workflows.living import tracking as T
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import headline

    draws, model = multi_model_draws(), "llama-3.1-8b-instruct"
    d = default_question(draws, model)
    assert d.derived and d.accept_assumed and d.accept == 14.0
    assert (d.hardware, d.gpus, d.method, d.block, d.budget) == ("h100", 1, "ddtree", 16, 32)
    assert not default_question(draws, "kimi-k2.6").accept_assumed   # (measured b300)
    builtin = T.Tracked("default", dict(DEFAULT_QUERY), builtin=True)
    query = {**DEFAULT_QUERY, "model": model}
    assert T.asked_query(draws, query, builtin=True)["accept"] is None
    with pytest.raises(QueryError, match="no acceptance prior in the priors file"):
        T.query_rows(draws, query, seed=1, builtin=True)
    out = T.compare_queries(draws, draws, T.for_models([builtin], [model]), seed=1)
    assert len(out) == 1 and out[0]["before"] is None and out[0]["after"] is None
    assert out[0]["label"] == f"{model}-h100-x1-vllm-ddtree-b16-B32"
    assert out[0]["after_error"].startswith("no acceptance prior in the priors file")
    listed = T.describe_tracked(draws, T.for_models([builtin], [model])[0])
    assert listed == (f"--model {model} (default question: vllm ddtree block 16 budget 32 on "
                      "h100 x1; no acceptance to ask it at: give one with track add)")
    # the report still answers it (its fan and sections need one acceptance), saying why
    fan = sections.fan_section(draws, 1, model, d)
    assert fan["headline_accept"] == 14.0 and fan["headline_accept_assumed"] is True
    text = headline({"fan": fan, "default_scenario": {**d.to_json(), "derived": True}})
    assert "Its acceptance, 14, is assumed: no acceptance was measured" in text
    kimi = sections.fan_section(draws, 1, "kimi-k2.6", default_question(draws, "kimi-k2.6"))
    assert "is assumed" not in headline({"fan": kimi})


def test_the_bundled_default_with_no_acceptance_for_the_model_is_not_answered_either():
    """The same for a model of AR rows only measured on B300 (Llama-3.1-8B on one B300 beside
    Kimi's 8): it keeps the bundled question (DDTree block 16 budget 32 on b300), and no
    acceptance measured or in the priors answers it for Llama (the priors' ddtree entry is
    Kimi's): a bare `predict --model llama-3.1-8b-instruct` refuses it, yet the built-in
    tracked query asked it at the bundled 14 and answered 800 tok/s in SGLang (14 x 1000 /
    17.5 ms) and 889 in native, an acceptance nobody measured. Kimi's own default, whose
    acceptance the priors give, is still asked at 14."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.posterior import Fit
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws
    from ddtree_bayes.workflows.living import DEFAULT_QUERY
    from ddtree_bayes.workflows.living import tracking as T
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import headline

    model = "llama-3.1-8b-instruct"
    two = multi_model_draws()
    pairs = ["kimi-k2.6@b300x8", f"{model}@b300x1"]
    two.meta["coords"]["system"] = pairs
    two.meta["model"]["pair_models"] = {p: p.split("@")[0] for p in pairs}
    draws = Fit(path=two.path, meta=two.meta, variables=two.variables,
                data_csv=MULTI_DATA.replace(f"{model},h100,1", f"{model},b300,1"),
                priors_toml=two.priors_toml, hardware_csv=two.hardware_csv)
    assert draws.measured_systems == tuple(pairs)
    with pytest.raises(QueryError, match="no acceptance prior in the priors file"):
        P.predict(draws, model=model)   # (a bare predict)
    d = default_question(draws, model)
    assert not d.derived and d.accept_assumed
    assert (d.hardware, d.method, d.block, d.budget) == ("b300", "ddtree", 16, 32)
    kimi = default_question(draws, "kimi-k2.6")
    assert kimi == DEFAULT_QUESTION and not kimi.accept_assumed
    query = {**DEFAULT_QUERY, "model": model}
    assert T.asked_query(draws, query, builtin=True)["accept"] is None
    assert T.asked_query(draws, {**DEFAULT_QUERY, "model": "kimi-k2.6"},
                         builtin=True)["accept"] == "14"
    with pytest.raises(QueryError, match="no acceptance prior in the priors file"):
        T.query_rows(draws, query, seed=1, builtin=True)
    builtin = T.Tracked("default", dict(DEFAULT_QUERY), builtin=True)
    out = T.compare_queries(draws, draws, T.for_models([builtin], [model]), seed=1)
    assert len(out) == 1 and out[0]["before"] is None and out[0]["after"] is None
    assert out[0]["label"] == f"{model}-b300-sglang+native-ddtree-b16-B32"
    assert out[0]["after_error"].startswith("no acceptance prior in the priors file")
    listed = T.describe_tracked(draws, T.for_models([builtin], [model])[0])
    assert listed.endswith("; no acceptance to ask it at: give one with track add)")
    fan = sections.fan_section(draws, 1, model, d)
    assert fan["headline_accept"] == 14.0 and fan["headline_accept_assumed"] is True
    assert "Its acceptance, 14, is assumed" in headline({"fan": fan})

"""predict arithmetic against a point-mass posterior whose answers are computed by hand.

Point mass (ddtree_bayes.engine.testing): step_ar 8 ms, MoE share 0.5 (MOE(1) = 4, ATTN = 4),
linear slope 0.0625, context 2 ms per 64k with exponent 0.5, SGLang overhead fraction 0.2,
native reduction 0.5, noise 0.
"""

import json

import numpy as np
import pytest

from ddtree_bayes.core.errors import QueryError, StaleArtifactError, UnconvergedError
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.testing import point_mass_draws


@pytest.fixture
def draws():
    return point_mass_draws()


def by(rows, engine, accept):
    return next(r for r in rows if r["engine"] == engine and r["accept"] == accept)


def test_default_scenario_by_hand(draws):
    rows = P.predict(draws, accept="12:16")
    # M = 33: MOE = 4 * (1 + 0.0625 * 32) = 12, target 16; sglang step 16/0.8 = 20 ms
    assert by(rows, "sglang", "12")["median"] == pytest.approx(600.0)
    assert by(rows, "sglang", "16")["median"] == pytest.approx(800.0)
    # native: SPEC halved -> 16 * (1 + 0.5 * 0.25) = 18 ms
    assert by(rows, "native", "12")["median"] == pytest.approx(12 / 18 * 1000)
    # a point mass with no noise has zero-width intervals
    r = by(rows, "sglang", "14")
    assert r["lo50"] == r["hi50"] == r["lo90"] == r["hi90"] == pytest.approx(700.0)
    assert [r["accept"] for r in rows if r["engine"] == "sglang"] == [
        "12", "13", "14", "15", "16", "U(12,16)"]
    assert {r["verify_tokens"] for r in rows} == {33}


def test_uniform_row_marginalises_acceptance():
    draws = point_mass_draws(n=20000)
    row = by(P.predict(draws, accept="12:16", engines=["sglang"]), "sglang", "U(12,16)")
    # tok/s = accept * 50 with accept ~ U(12, 16): median 700, 90% interval 610-790
    assert row["median"] == pytest.approx(700, abs=3)
    assert row["lo90"] == pytest.approx(610, abs=3)
    assert row["hi90"] == pytest.approx(790, abs=3)
    assert row["lo50"] == pytest.approx(650, abs=3)


def test_target_probability_and_prob(draws):
    rows = P.predict(draws, accept="12,16", target=700, prob=0.8, engines=["sglang"])
    assert [r["p_ge_target"] for r in rows] == [0.0, 1.0]
    assert "lo80" in rows[0] and "lo90" not in rows[0] and "lo50" in rows[0]


def test_original_estimate_column(draws):
    row = by(P.predict(draws, accept="13"), "sglang", "13")
    # seed table: 12 tok at 570 tok/s and 16 at 765 -> mean step 20.984 ms
    step = (12 / 570 + 16 / 765) / 2 * 1000
    assert row["original"] == pytest.approx(13 / step * 1000)
    assert row["original_lo"] == pytest.approx(0.7 * row["original"])
    assert row["original_hi"] == pytest.approx(1.3 * row["original"])
    native = by(P.predict(draws, accept="15"), "native", "15")
    assert native["original"] == pytest.approx(15 / ((12 / 815 + 16 / 1090) / 2 * 1000) * 1000)
    # at the table's own rows, its own figures (tests/test_one_question.py)
    assert by(P.predict(draws, accept="12"), "sglang", "12")["original"] == 570.0
    assert by(P.predict(draws, accept="16"), "native", "16")["original"] == 1090.0


def test_context_and_power_form_by_hand():
    draws = point_mass_draws()
    ar = P.predict(draws, hardware="b300", method="ar", engines=["sglang"],
                        context="64k", accept="1")[0]
    # 8 ms + 2 ms/unit * 1 unit * 1**0.5 = 10 ms -> 100 tok/s
    assert ar["median"] == pytest.approx(100.0)
    tree = P.predict(draws, engines=["sglang"], context=65536, accept="12")[0]
    # target 16 + 2 * 33**0.5; step / 0.8
    assert tree["median"] == pytest.approx(12 / ((16 + 2 * 33 ** 0.5) / 0.8) * 1000)
    power = point_mass_draws(moe_form="power")
    row = P.predict(power, engines=["sglang"], accept="12")[0]
    # MOE = 4 * 33**0.5, ATTN 4
    assert row["median"] == pytest.approx(12 / ((4 * 33 ** 0.5 + 4) / 0.8) * 1000)


def test_unmeasured_group_draws_from_the_population(draws):
    # b300 eagle3 is unmeasured; population sd 0 -> overhead = sigmoid(mu) = 0.2 exactly
    row = P.predict(draws, hardware="b300", method="eagle3", block=3, engines=["sglang"],
                         accept="2")[0]
    assert row["verify_tokens"] == 4
    target = 4 * (1 + 0.0625 * 3) + 4
    assert row["median"] == pytest.approx(2 / (target / 0.8) * 1000)
    assert "pooled population" in row["overhead_from"]
    # with population spread the unmeasured group gets a real interval
    wide = point_mass_draws(n=4000, overhead_logit_sd=0.5)
    r2 = P.predict(wide, hardware="b300", method="eagle3", block=3, engines=["sglang"],
                        accept="2")[0]
    assert r2["hi90"] - r2["lo90"] > 5


def test_acceptance_from_prior_when_not_given():
    draws = point_mass_draws(n=20000)
    row = P.predict(draws, engines=["sglang"])[0]
    assert row["accept_kind"] == "prior" and row["accept"].startswith("prior truncnormal")
    # accept ~ truncnormal(10, 2.5, [1, 17]) (mean 9.98) times 50 tok/s per token
    assert row["median"] == pytest.approx(500, rel=0.02)
    assert row["lo90"] == pytest.approx(50 * (10 - 1.645 * 2.5), rel=0.03)


def test_sample_acceptance_truncnormal_moments():
    from ddtree_bayes.core.config import AcceptancePrior, Prior

    prior = AcceptancePrior(Prior("a", "truncnormal",
                                  {"mu": 10.0, "sigma": 2.5, "lower": 1.0, "upper": 17.0}))
    a = P.sample_acceptance(prior, 40000, np.random.default_rng(0))
    assert a.min() >= 1 and a.max() <= 17
    # truncated-normal mean: 10 - 2.5 * (phi(2.8) - phi(-3.6)) / (Phi(2.8) - Phi(-3.6)) = 9.982
    assert a.mean() == pytest.approx(9.982, abs=0.03)


@pytest.mark.parametrize("text,values,uniform", [
    ("13.5", (13.5,), None),
    ("12,14,16", (12.0, 14.0, 16.0), None),
    ("12:16", (12.0, 13.0, 14.0, 15.0, 16.0), (12.0, 16.0)),
    ("12:16:0.5", tuple(12 + 0.5 * i for i in range(9)), (12.0, 16.0)),
])
def test_parse_accept(text, values, uniform):
    req = P.parse_accept(text)
    assert req.values == values and req.uniform == uniform


@pytest.mark.parametrize("bad, why", [
    ("abc", "is not a number, list or range"), ("", "is not a number, list or range"),
    ("1:2:3:4", "is not a number, list or range"),
    ("16:12", "is a range whose end (12) is not above its start (16)"),
    ("12:16:0", "has a step (0) that is not positive"),
    ("1:17:0.00001", "asks 1.6e+06 values (at most 10,000: a coarser step)")])
def test_parse_accept_rejects(bad, why):
    """Each refusal says what is wrong (the flag's parser prints the same reason)."""
    with pytest.raises(QueryError, match="--accept") as err:
        P.parse_accept(bad)
    assert err.value.reason == why and why in str(err.value)


def test_query_errors(draws):
    with pytest.raises(QueryError, match="tpu-v9' was never measured, nor in the hardware "
                                         "table the fit stored"):
        P.predict(draws, hardware="tpu-v9", method="ar", engines=["sglang"], accept="1")
    with pytest.raises(QueryError, match=r"--accept 40 is above what ddtree with block 16 can "
                                         r"emit \(at most 16 tokens per step: block - 1 drafts "
                                         r"\+ 1\)"):
        P.predict(draws, accept="40")
    with pytest.raises(QueryError, match="cannot tell how many tokens"):
        P.predict(draws, hardware="b300", method="eagle3", engines=["sglang"], accept="3")
    # the default question's own method without a shape takes its shape (block 16, budget 32)
    assert (P.predict(draws, hardware="b300", method="ddtree", engines=["sglang"], accept="3")
            == P.predict(draws, hardware="b300", method="ddtree", engines=["sglang"], block=16,
                         budget=32, accept="3"))
    # EAGLE-2 always verifies a tree: --block (its depth) alone does not size it (it was
    # answered as a tree of 4 nodes verifying 5 tokens)
    for method in ("eagle2", "medusa"):
        with pytest.raises(QueryError) as err:
            P.predict(draws, hardware="b300", method=method, engines=["sglang"], block=4,
                      accept="3")
        assert str(err.value) == (f"cannot tell how many tokens {method} verifies per step: "
                                  f"{method} verifies a tree, and --block is its depth (fix: "
                                  "give --budget (the tree's draft tokens) or --verify-tokens)")
    with pytest.raises(QueryError, match="--prob"):
        P.predict(draws, accept="12", prob=1.5)


def test_same_seed_same_numbers():
    draws = point_mass_draws(n=2000, overhead_logit_sd=0.5, noise_sd=0.03)
    kw = dict(hardware="b300", method="eagle3", block=3, engines=["sglang"], accept="2")
    a = P.predict(draws, seed=7, **kw)
    b = P.predict(draws, seed=7, **kw)
    c = P.predict(draws, seed=8, **kw)
    assert json.dumps(a) == json.dumps(b)
    assert a[0]["lo90"] != c[0]["lo90"]


def test_a_configuration_gets_the_same_digits_wherever_it_is_asked():
    """The draws are keyed by what is asked, not by its place in the question: an engine
    asked first or second, an acceptance asked alone or inside a range, and concurrency 1
    alone or among others give the same numbers."""
    draws = point_mass_draws(n=2000, overhead_logit_sd=0.5, noise_sd=0.03)
    first = P.predict(draws, accept="14", engines=["sglang"], seed=3)
    second = P.predict(draws, accept="14", engines=["native", "sglang"], seed=3)
    assert first[0] == by(second, "sglang", "14")
    alone = by(P.predict(draws, accept="14", seed=3), "native", "14")
    ranged = by(P.predict(draws, accept="12:16", seed=3), "native", "14")
    assert alone == ranged
    u1 = by(P.predict(draws, accept="12:16", engines=["sglang"], seed=3), "sglang", "U(12,16)")
    u2 = by(P.predict(draws, accept="12:16", seed=3), "sglang", "U(12,16)")
    assert u1 == u2
    one = P.predict(draws, accept="14", engines=["sglang"], concurrency=[1], seed=3)
    many = P.predict(draws, accept="14", engines=["sglang"], concurrency=[4, 1], seed=3)
    assert one[0] == next(r for r in many if r["concurrency"] == 1)


def test_an_engine_or_concurrency_asked_twice_is_one_row(tmp_path):
    """`predict --engine sglang,native,sglang` printed the sglang row twice, and the API's
    concurrency=[4, 4] each row twice (--accept 14,14 and --concurrency 1,1 were already
    one row)."""
    from test_cli_support import make_point_mass_workdir, run_cli

    draws = point_mass_draws()
    rows = P.predict(draws, accept="14", engines=["sglang", "native", "sglang"])
    assert [r["engine"] for r in rows] == ["sglang", "native"]
    rows = P.predict(draws, accept="14", engines="sglang", concurrency=[4, 1, 4])
    assert [r["concurrency"] for r in rows] == [4, 1]
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--engine", "sglang,native,sglang", "--accept",
                             "14", "--format", "json")
    assert code == 0, err
    assert [(r["engine"], r["median"]) for r in json.loads(out)["rows"]] == [
        ("sglang", pytest.approx(700.0)), ("native", pytest.approx(14 / 18 * 1000))]


def test_original_estimate_only_for_its_own_question(draws):
    """The original table is Kimi K2.6 on 8 GPUs at short context with its own drafter: at
    another GPU count or a context it shows nothing rather than that number."""
    assert by(P.predict(draws, accept="12"), "sglang", "12")["original"] is not None
    for kw in ({"gpus": 4}, {"context": 131072}):
        row = by(P.predict(draws, accept="12", **kw), "sglang", "12")
        assert row["original"] is None and row["original_lo"] is None


def test_original_estimate_only_for_its_own_drafter_block(draws):
    """The original estimates are of a block-16 drafter (seed table: ddtree block 16, budget
    32). A block-8 or block-32 tree of budget 32 verifies the same 33 tokens, and the column
    showed the block-16 estimate beside it: `predict --block 8 --budget 32 --accept 8` printed
    original 381 (267-496), 8 / 20.984 ms, an estimate nobody made of that drafter. Another
    block is another drafter: nothing is shown, as for --drafter."""
    step = (12 / 570 + 16 / 765) / 2 * 1000   # the block-16 rows' mean step, 20.984 ms
    row = by(P.predict(draws, accept="8", block=16, budget=32), "sglang", "8")
    assert row["original"] == pytest.approx(8 / step * 1000)
    for block in (8, 32):
        rows = P.predict(draws, accept="8", block=block, budget=32)
        assert [r["verify_tokens"] for r in rows] == [33, 33]
        assert [(r["original"], r["original_lo"], r["original_hi"]) for r in rows] == [
            (None, None, None)] * 2


def test_check_fit_refuses_unconverged_and_flags_stale(tmp_path):
    with pytest.raises(UnconvergedError, match="--allow-unconverged"):
        P.check_fit(point_mass_draws(converged=False))
    # (a point-mass fit stores the bundled files' own hashes: nothing else to warn of; an
    # unconverged fit let through is said, as docs/json-output.md says the warnings say it)
    assert P.check_fit(point_mass_draws(converged=False), allow_unconverged=True) == [
        "fit point-mass failed its convergence gates (max R-hat 1.2 > 1.01 (moe_share[b300x8])) "
        "and is used anyway (--allow-unconverged): its draws need not be the posterior"]
    assert P.check_fit(point_mass_draws(), allow_unconverged=True) == []
    draws = point_mass_draws()
    data = tmp_path / "m.csv"
    data.write_text("x\n")
    draws.meta["data"] = {"path": str(data), "sha256": "0" * 64}
    warnings = P.check_fit(draws)
    assert any("changed since fit" in w and str(data) in w for w in warnings)
    with pytest.raises(StaleArtifactError, match="--strict"):
        P.check_fit(draws, strict=True)


def test_unmeasured_hardware_by_transfer_by_hand():
    """Point-mass transfer parameters: elasticity 0.5, interconnect factor 1.5, no scatter.
    Reference b300x8 (NVLink-class, 8 TB/s x 8): MOE(1) = 4 ms, ATTN_BASE = 4 ms."""
    draws = point_mass_draws(transfer_bandwidth_elasticity=0.5, transfer_interconnect_factor=1.5,
                             transfer_system_sd=0.0)
    ar = dict(method="ar", engines=["sglang"], accept="1")
    # H200 x8: same class, 4.8 TB/s: MOE(1) = 4 * (64 / 38.4) ** 0.5, ATTN unchanged
    h200 = P.predict(draws, hardware="h200", **ar)[0]
    assert h200["median"] == pytest.approx(1000 / (4 * (64 / 38.4) ** 0.5 + 4))
    assert "transferred from b300x8" in h200["overhead_from"]
    # RTX PRO 6000 x8: PCIe, 1.792 TB/s: ATTN x 1.5
    pro = P.predict(draws, hardware="rtx-pro-6000", **ar)[0]
    assert pro["median"] == pytest.approx(1000 / (4 * (64 / 14.336) ** 0.5 + 6))
    # B300 x4: half the aggregate bandwidth
    b4 = P.predict(draws, hardware="b300", gpus=4, **ar)[0]
    assert b4["gpus"] == 4 and b4["median"] == pytest.approx(1000 / (4 * 2 ** 0.5 + 4))


def on(system: str):
    """The point-mass fit of test_unmeasured_hardware_by_transfer_by_hand, measured on
    ``system`` instead of b300x8 (the same MOE(1) = ATTN_BASE = 4 ms)."""
    draws = point_mass_draws(transfer_bandwidth_elasticity=0.5, transfer_interconnect_factor=1.5,
                             transfer_system_sd=0.0)
    draws.meta["coords"]["system"] = [system]
    return draws


@pytest.mark.parametrize("system, gpus, attn", [
    # an NVLink node to one GPU: neither pays PCIe collectives, no factor
    ("b300x8", 1, 4.0),
    # a PCIe node to one GPU: one GPU runs no collectives, the PCIe excess comes out
    ("rtx-pro-6000x8", 1, 4 / 1.5),
    # one GPU to eight: over NVLink no factor; over PCIe the collectives' x 1.5 (below)
    ("rtx-5090x1", 8, 4.0)])
def test_one_gpu_runs_no_collectives_whatever_its_link_is_called(system, gpus, attn):
    """One H200 SXM and one H200 NVL (4.8 TB/s each; the SXM's link NVLink, the NVL's PCIe)
    run no tensor-parallel collectives, so a transfer to one of either is the same answer;
    eight of them differ by the interconnect factor (1.5 here). A single GPU took the factor
    by the name of the link it does not use: from 8 x B300, one H200 NVL 48.5 tok/s against
    one H200 SXM's 53.7; from one RTX 5090, 8 x H200 over NVLink 283 (its fixed work 1.5 x
    less than the one GPU's, which ran none) and 206 over PCIe (by hand: 206 and 146)."""
    draws = on(system)
    ref = {"b300x8": 64.0, "rtx-pro-6000x8": 8 * 1.792, "rtx-5090x1": 1.792}[system]
    moe = 4 * (ref / (4.8 * gpus)) ** 0.5
    ar = dict(method="ar", engines=["sglang"], accept="1", gpus=gpus)
    sxm = P.predict(draws, hardware="h200", **ar)[0]
    nvl = P.predict(draws, hardware="h200-nvl", **ar)[0]
    assert f"transferred from {system}" in sxm["overhead_from"]
    assert sxm["median"] == pytest.approx(1000 / (moe + attn))
    pcie = 1.5 if gpus > 1 else 1.0   # several H200 NVL talk over PCIe
    assert nvl["median"] == pytest.approx(1000 / (moe + attn * pcie))


def test_transfer_scales_the_weight_read_with_the_bandwidth_itself():
    """With a model card, the part of the measured step that reads the active weights at the
    full bandwidth scales with the bandwidth itself, the rest as before (elasticity 0.5,
    factor 1.5, no scatter; B300 x8 measured: MOE(1) = ATTN_BASE = 4 ms).

    Kimi K2.6's card: 32 B active x 0.5 B = 16 GB over 8 x 8 TB/s = 0.25 ms of the 8 ms step
    (its 32 B leave the input embedding out, embed_params_b 0: a token reads all of them).
    On 8 x H200 (38.4 TB/s): 0.25 x 64 / 38.4 + 3.75 x (64 / 38.4) ** 0.5 + 4 ms. A dense 8B
    model at 2 bytes reads the same 16 GB; on one RTX 5090 (1.792 TB/s; one GPU runs no
    collectives, so no interconnect factor) that is 8.93 ms of its answer: 0.25 x 64 / 1.792
    + 3.75 x (64 / 1.792) ** 0.5 + 4 ms (the old
    transfer scaled all of MOE(1) by the square root: a step faster than its read, 0.25 x
    35.7 ** 0.5 = 1.5 ms for the weights)."""
    import dataclasses

    from ddtree_bayes.core.model_cards import ModelCard, load_model_cards
    from ddtree_bayes.core.paths import bundled

    draws = point_mass_draws(transfer_bandwidth_elasticity=0.5, transfer_interconnect_factor=1.5,
                             transfer_system_sd=0.0)
    kimi = load_model_cards(bundled("models.csv"))["kimi-k2.6"]
    draws.meta["model"]["card"] = dataclasses.asdict(kimi)
    ar = dict(method="ar", engines=["sglang"], accept="1")
    h200 = P.predict(draws, hardware="h200", **ar)[0]
    r = 64 / 38.4
    assert h200["median"] == pytest.approx(1000 / (0.25 * r + 3.75 * r ** 0.5 + 4))
    assert "reading the weights at the full bandwidth is 3% of the measured step" in \
        h200["overhead_from"]
    dense = ModelCard("dense-8b", 8, 8, 32, None, None, 2.0, "bf16", "s")
    draws.meta["model"]["card"] = dataclasses.asdict(dense)
    r = 64 / 1.792
    g5090 = P.predict(draws, hardware="rtx-5090", gpus=1, **ar)[0]
    assert g5090["median"] == pytest.approx(1000 / (0.25 * r + 3.75 * r ** 0.5 + 4))


def test_unmeasured_hardware_intervals_are_wider():
    draws = point_mass_draws(n=4000, noise_sd=0.02)
    kw = dict(method="ar", engines=["sglang"], accept="1")
    measured = P.predict(draws, hardware="b300", **kw)[0]
    h200 = P.predict(draws, hardware="h200", **kw)[0]
    width = lambda r: (r["hi90"] - r["lo90"]) / r["median"]  # noqa: E731
    assert width(h200) > 3 * width(measured)


def test_context_past_the_measured_ones_warns():
    """The bundled point-mass fit measured contexts up to 131072 (the RTX PRO 6000 rows): up
    to twice that is answered quietly; 8x is answered with one line saying the context cost
    is extrapolated; the answer itself is the same either way (a warning, not a refusal)."""
    from ddtree_bayes.engine.question import Flags, resolve

    draws = point_mass_draws()
    longest = max(r.context_tokens or 0.0 for r in draws.measurements.rows)
    assert longest == 131072
    quiet = resolve(draws, Flags(context="256k", accept="12"))
    assert not [w for w in quiet.warnings if "--context" in w]
    loud = resolve(draws, Flags(context="1m", accept="12"))
    (line,) = [w for w in loud.warnings if "--context" in w]
    assert "8x the longest context the fit measured (131072 tokens)" in line
    row = P.predict(draws, engines=["sglang"], context="1m", accept="12")[0]
    # the power-law context term carried to 16 units: 16 + 2 * 16 * 33**0.5, step / 0.8
    assert row["median"] == pytest.approx(12 / ((16 + 2 * 16 * 33 ** 0.5) / 0.8) * 1000)


def test_a_context_on_a_system_that_measured_none_says_its_cost_is_the_prior():
    """`predict --accept 14 --context 32k` (the bundled question, B300) answered 357 tok/s,
    90% 103-612, against 708 at context 0, and said nothing of where the context cost came
    from: the fit measured context only on the RTX PRO 6000 (up to 131072), so the B300's
    ctx_ms_per_unit is its prior, LogNormal(median 3, sigma 1) per system (docs/model.md lists
    it as prior-only). The extrapolation warning looks at the longest context of any system;
    one more line names the system that measured none."""
    from ddtree_bayes.engine.question import Flags, resolve

    draws = point_mass_draws()
    line = ("context 32768 on b300x8: the fit measured no context beyond 0 there (only on "
            "rtx-pro-6000x8): its context cost per token there is the prior's "
            "(ctx_ms_per_unit[b300x8], prior-driven)")
    assert line in resolve(draws, Flags(context="32k", accept="12")).warnings
    assert line.replace("context 32768", "--query: context 32768") in resolve(
        draws, Flags(context="32k", accept="12"), prefix="--query: ").warnings
    # the system that measured it, or context 0: nothing to say
    rtx = resolve(draws, Flags(hardware="rtx-pro-6000", engines=("vllm",), method="eagle3",
                               block=3, context="32k", accept="1.95"))
    assert not [w for w in rtx.warnings if "measured no context" in w]
    assert not [w for w in resolve(draws, Flags(accept="12")).warnings
                if "measured no context" in w]


def test_a_context_of_millions_is_shown_in_full_in_the_headers(tmp_path):
    """predict --accept 14 --context 2m headed its table "context 2.09715e+06" (a :g format
    of 2097152 tokens), and optimize and next's query line alike: a whole token count is now
    written with every digit, in the headers and the --context warning above them."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.01)   # (next needs noise)
    warning = ("ddtree-bayes: warning: --context 2097152: the fit measured no context beyond 0: "
               "its cost per context token is the prior's (prior-driven)")
    code, out, err = run_cli(work, "predict", "--accept", "14", "--context", "2m")
    assert code == 0, err
    assert out.splitlines()[1] == ("b300 x8, ddtree, block 16, budget 32, verify 33 tokens, "
                                   "context 2097152")
    assert warning in err.splitlines()
    code, out, err = run_cli(work, "optimize", "--context", "2m", "--budgets", "8,32")
    assert code == 0, err
    assert out.splitlines()[1] == ("b300 x8, sglang, ddtree, block 16, context 2097152; verify "
                                   "tokens M = budget + 1")
    code, out, err = run_cli(work, "next", "--query", "--accept 14 --context 2m", "--k", "4")
    assert code == 0, err
    assert ("query: b300 x8, sglang, ddtree, block 16, budget 32, verify 33, context 2097152, "
            "accept 14") in out.splitlines()
    assert "b300 x8 sglang ar ctx 2097152 " in out and "e+06" not in out + err
    # a context :g wrote exactly is written as before
    code, out, err = run_cli(work, "predict", "--accept", "14", "--context", "32k")
    assert code == 0 and out.splitlines()[1].endswith(", context 32768")


def test_verify_tokens_beside_a_budget_keep_the_block_and_must_match(tmp_path):
    """`--budget 32 --verify-tokens 33` dropped the default's block 16 (the acceptance limit
    became M = 33 and --accept 20 was answered); 500 verify tokens for 32 nodes were priced."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--engine", "sglang", "--budget", "32",
                             "--verify-tokens", "33", "--accept", "14")
    assert code == 0, err
    assert out.splitlines()[1].startswith("b300 x8, ddtree, block 16, budget 32, verify 33")
    code, out, err = run_cli(work, "predict", "--engine", "sglang", "--budget", "32",
                             "--verify-tokens", "33", "--accept", "20")
    assert code == 2 and "at most 16 tokens per step" in err
    code, out, err = run_cli(work, "predict", "--engine", "sglang", "--block", "16", "--budget",
                             "32", "--verify-tokens", "500", "--accept", "14")
    assert code == 2 and out == ""
    assert "a budget of 32 draft tokens is verified as 33 tokens per step, not 500" in err
    # a block with verify tokens and no budget keeps the budget blank, as before (a review
    # caught the default's budget 32 filled in and the question refused)
    code, out, err = run_cli(work, "predict", "--engine", "sglang", "--block", "8",
                             "--verify-tokens", "9", "--accept", "4")
    assert code == 0, err
    # (a DDTree always verifies a tree: 9 tokens are 8 nodes, priced as such, where they
    # used to be priced as a tree of 0 nodes)
    assert out.splitlines()[1].startswith("b300 x8, ddtree, block 8, budget 8, verify 9 tokens")


def test_autoregressive_acceptance_is_one_not_a_prior(tmp_path):
    """`predict --method ar` labelled its rows 'prior point(value=1)' and said "acceptance not
    given: drawn from the acceptance prior"; one token per step is AR's definition."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--method", "ar")
    assert code == 0, err
    assert "prior" not in out
    # (one row: the native row is left out of an AR question, see the test below)
    assert [ln.split()[:2] for ln in out.splitlines()[4:5]] == [["sglang", "1"]]


def test_a_chain_with_a_budget_above_its_block_is_refused(tmp_path):
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--engine", "sglang", "--method", "dflash",
                             "--block", "8", "--budget", "16", "--accept", "5")
    assert code == 2 and out == ""
    assert ("dflash drafts a chain of at most 7 tokens per step (block 8 less its anchor), not "
            "a budget of 16 (fix: give --budget at most 7, or a method that verifies a tree)"
            ) in err


def test_an_autoregressive_question_leaves_out_a_relation_engines_repeat(tmp_path):
    """`predict --method ar` printed a native row beside sglang's: native's relation scales
    sglang's speculative overhead, which AR has none of, so its step is sglang's (point mass:
    step_ar_ms 8, 1000 / 8 = 125 tok/s both), at best without sglang's anchor to the measured
    AR rows. Left out of the default engines, with a line saying why; asked for with
    --engine, it is answered."""
    from test_cli_support import make_point_mass_workdir, run_cli

    draws = point_mass_draws()
    assert [(r["engine"], r["median"]) for r in P.predict(draws, method="ar")] == [
        ("sglang", pytest.approx(125.0))]
    both = P.predict(draws, method="ar", engines=["sglang", "native"])
    assert [(r["engine"], r["median"]) for r in both] == [
        ("sglang", pytest.approx(125.0)), ("native", pytest.approx(125.0))]
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--method", "ar")
    assert code == 0 and err == "", err
    lines = out.splitlines()
    assert [ln.split()[0] for ln in lines[4:]][:1] == ["sglang"] and not any(
        ln.startswith("native ") for ln in lines)
    assert ("  native: left out: autoregressive decoding has no speculative overhead for its "
            "relation to sglang to scale, so its step is sglang's and its row would add "
            "nothing (--engine sglang,native asks for it)") in lines
    code, out, err = run_cli(work, "predict", "--method", "ar", "--format", "json")
    assert code == 0 and [r["engine"] for r in json.loads(out)["rows"]] == ["sglang"]
    # the JSON and the API say it too (a review: only the table did)
    left = lines[lines.index("  native: left out: autoregressive decoding has no speculative "
                             "overhead for its relation to sglang to scale, so its step is "
                             "sglang's and its row would add nothing (--engine sglang,native "
                             "asks for it)")].strip()
    assert json.loads(out)["warnings"] == [left]
    said: list[str] = []
    P.predict(draws, method="ar", warnings=said)
    assert said == [left]
    # a speculative question keeps both
    code, out, err = run_cli(work, "predict", "--accept", "14", "--format", "json")
    assert [r["engine"] for r in json.loads(out)["rows"]] == ["sglang", "native"]


def test_a_chain_asked_with_or_without_its_budget_is_one_configuration(tmp_path):
    """A chain's budget is its depth (README glossary; the bundled EAGLE-3 rows write block 3,
    budget 3), but `add` with --budget 3 and `add --from-bench` (budget blank) wrote two
    spellings of one EAGLE-3 depth-3 configuration, and predict keyed its draws by the
    spelling: --budget 3 and no budget gave two answers (117 against 119 tok/s here; 217
    against 218 in a walkthrough). Every reader now reads a chain's blank budget as its
    block: one scenario, one row key, one anchor."""
    from ddtree_bayes.core.data import COLUMNS, load_hardware, load_measurements
    from ddtree_bayes.core.paths import bundled

    draws = point_mass_draws(n=400, noise_sd=0.05)
    ask = dict(hardware="rtx-pro-6000", engines=["vllm"], method="eagle3", block=3, accept="2")
    blank, three = (P.predict(draws, budget=b, **ask) for b in (None, 3))
    assert blank == three
    sc = P.resolve_scenario(draws, hardware="rtx-pro-6000", gpus=None, engine="vllm",
                            method="eagle3", block=3, budget=None, verify_tokens=None,
                            context_tokens=None)
    assert (sc.block, sc.budget, sc.verify_tokens) == (3, 3, 4)
    # the rows: one configuration, the anchor of either question
    path = tmp_path / "m.csv"
    path.write_text(",".join(COLUMNS) + "\n"
                    "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,,,1.9,,125,bench,\n"
                    "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,1.9,,125,flags,\n"
                    "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,8,63,,3.1,,90,tree,\n")
    rows = load_measurements(path, load_hardware(bundled("hardware.csv")),
                             allow_duplicates=True).rows
    assert [(r.block, r.budget, r.verify_tokens) for r in rows] == [(3, 3, 4), (3, 3, 4),
                                                                    (8, 63, 64)]
    assert P.is_itself(sc, rows[0]) and P.is_itself(sc, rows[1])


def test_a_dflash_chain_verifying_another_count_than_its_block_is_refused(tmp_path):
    """`predict --method dflash --block 16 --verify-tokens 17` (or 12) answered, and `add` of
    it wrote `dflash,16,,17`: a DFlash chain of block 16 drafts 15 tokens after its anchor and
    verifies 16 (depth = "block - 1", tree = false), nothing else. Refused like eagle3's
    `--block 3 --verify-tokens 2`, naming the count; `add` writes nothing."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    before = data.read_bytes()
    for wrong in ("17", "12"):
        flags = ("--hardware", "b300", "--engine", "sglang", "--method", "dflash", "--block",
                 "16", "--verify-tokens", wrong)
        code, out, err = run_cli(work, "predict", *flags, "--accept", "5")
        assert (code, out) == (2, ""), (code, out, err)
        assert err == ("ddtree-bayes: error: dflash with block 16 and no budget is a chain of "
                       "15 draft tokens (block 16 less its anchor), verified as 16 tokens per "
                       f"step, not {wrong} (fix: drop --verify-tokens (a chain of --block 16 "
                       "verifies 16), give --budget N for a shorter chain (verifying N + 1), "
                       "or a --method that verifies a tree)\n")
        code, out, err = run_cli(work, "add", *flags, "--accept", "5", "--tok-s", "400",
                                 "--source", "test")
        assert (code, out) == (2, "") and data.read_bytes() == before
        assert ("column 'verify_tokens': dflash with block 16 and no budget is a chain of 15 "
                f"draft tokens (block 16 less its anchor), verified as 16 tokens per step, not "
                f"{wrong}") in err, err
        assert err.count("\n") == 1, err


def test_a_chain_shape_with_a_blank_budget_is_refused_like_an_explicit_one(tmp_path):
    """`--method eagle3 --block 3 --verify-tokens 2` was answered (a chain of 3 head passes
    verifies 4 tokens); with `--budget 3` it was refused. Both are refused now; `add` of the
    same row writes nothing."""
    from test_cli_support import make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    flags = ("--hardware", "b300", "--engine", "sglang", "--method", "eagle3", "--block", "3",
             "--verify-tokens", "2")
    code, out, err = run_cli(work, "predict", *flags, "--accept", "2")
    assert (code, out, err.count("\n")) == (2, "", 1), (code, out, err)
    assert err == ("ddtree-bayes: error: eagle3 with block 3 and no budget is a chain of 3 "
                   "draft tokens, verified as 4 tokens per step, not 2 (fix: drop "
                   "--verify-tokens (a chain of --block 3 verifies 4), or give the --budget of "
                   "the tree it verifies)\n")
    code, _, err = run_cli(work, "predict", *flags, "--budget", "3", "--accept", "2")
    assert code == 2 and "a budget of 3 draft tokens is verified as 4 tokens per step" in err
    data = work / "data" / "measurements.csv"
    before = data.read_bytes()
    code, out, err = run_cli(work, "add", *flags, "--accept", "1.5", "--tok-s", "300",
                             "--source", "test")
    assert (code, out) == (2, "") and data.read_bytes() == before
    assert ("column 'verify_tokens': eagle3 with block 3 and no budget is a chain of 3 draft "
            "tokens, verified as 4 tokens per step, not 2") in err


def test_editing_only_the_acceptance_curve_does_not_make_predict_call_the_fit_stale(
        tmp_path, monkeypatch):
    """A trust pass: docs/model.md says the [acceptance_curve] is not fitted, "so editing it
    needs no refit", and optimize/next ignore it (test_decisions). But `predict`, which does
    not read it either, warned "models/priors.toml changed since fit ...; re-run `ddtree-bayes
    fit` to use it" of such an edit, and `predict --strict` refused the fit (exit 4); so did
    the Python API with strict=True. Another prior edited still makes the fit stale."""
    import warnings

    import ddtree_bayes as db
    from test_cli_support import FIT_ID, make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    priors = work / "models" / "priors.toml"
    text = priors.read_text()
    curve = text.index("[acceptance_curve.accept_ref]")
    priors.write_text(text[:curve] + text[curve:].replace("mu = 9.4\n", "mu = 9.0\n", 1))
    assert priors.read_text() != text
    code, out, err = run_cli(work, "predict", "--method", "ar", "--strict")
    assert (code, err) == (0, ""), err
    fit = db.load(workdir=work)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        db.predict(fit, method="ar", engine="sglang", strict=True)
    # a prior the fit does use: stale, and --strict refuses it
    priors.write_text(text.replace("median = 0.03\n", "median = 0.10\n", 1))
    code, out, err = run_cli(work, "predict", "--method", "ar", "--strict")
    assert (code, out) == (4, "")
    assert err == (f"ddtree-bayes: error: {priors.resolve()} changed since fit {FIT_ID}; re-run "
                   "`ddtree-bayes fit` to use it: --strict refuses it (fix: do as said, or drop "
                   "--strict to answer from this fit with a warning)\n")


@pytest.mark.parametrize("prob", [0.9999999, 1e-7])
def test_the_api_refuses_a_prob_that_rounds_to_0_or_1(draws, prob):
    """The Python API's prob=0.9999999 answered a "100% interval" (lo100/hi100: the draws'
    min and max) and prob=1e-7 a "0% interval" (lo0 = hi0 = the median)."""
    with pytest.raises(QueryError) as err:
        P.predict(draws, accept="12", prob=prob)
    assert str(err.value).startswith(f"--prob {prob!r} rounds to {round(prob):d} at the 6 "
                                     "decimals intervals are labelled with")
    rows = P.predict(draws, accept="12", prob=0.999999)
    assert "lo99.9999" in rows[0]


@pytest.mark.parametrize("card_name, gpus, kv_ratio", [
    # MLA: every GPU reads the whole latent cache (kv_heads 1), on 4 GPUs as on 8
    ("kimi-k2.6", 4, 1.0),
    # GQA with 8 KV heads: 8 -> 4 GPUs doubles each GPU's share of the cache, as the
    # aggregate bandwidth halves
    ("llama-3.3-70b-instruct", 4, 2.0),
    # ... and 8 -> 16 GPUs cannot split 8 heads further: each GPU reads what it read on 8
    ("llama-3.3-70b-instruct", 16, 1.0)])
def test_transfer_scales_the_context_cost_with_each_gpus_kv_read(card_name, gpus, kv_ratio):
    """A transfer to another GPU count scales the measured context cost by how each GPU's
    read of the KV cache changes (``context_read_ms``: the card's kv_bytes_per_token over
    min(GPUs, kv_heads), at one GPU's bandwidth), ** elasticity as before; not by the
    aggregate bandwidth, which for an MLA cache on 4 B300 instead of 8 made the context cost
    2 ** 0.5 x too dear. Point mass (B300 x8 measured, elasticity 0.5, no scatter): the
    context part of an AR step is ctx_ms_per_unit 2 ms x (64k / 64k) = 2 ms on 8 GPUs, so
    2 x kv_ratio ** 0.5 on the queried count."""
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled

    draws = point_mass_draws(transfer_bandwidth_elasticity=0.5, transfer_interconnect_factor=1.5,
                             transfer_system_sd=0.0)
    card = load_model_cards(bundled("models.csv"))[card_name]
    draws.meta["model"]["card"] = dataclasses.asdict(card)
    ar = dict(method="ar", engines=["sglang"], accept="1", hardware="b300", gpus=gpus)
    step0 = 1000 / P.predict(draws, context=0, **ar)[0]["median"]
    step = 1000 / P.predict(draws, context=65536, **ar)[0]["median"]
    assert step - step0 == pytest.approx(2.0 * kv_ratio ** 0.5)


def test_transfer_moves_an_mla_context_cost_between_kernel_classes():
    """Kimi K2.6 (MLA) measured on 8 RTX PRO 6000 (compute capability 12.0: its context cost
    priced at ctx_read_ratio_one_head, 2.5 x its read) and asked on 8 H100 PCIe (9.0: FlashMLA-
    class kernels, ctx_read_ratio, 1.2 x): the transferred context cost takes the KV read's
    ratio ** elasticity and the two ratios' medians, 1.2 / 2.5. Point mass: 2 ms per 64k on
    the reference, elasticity 0.5, no scatter: 2 x (read_h100 / read_rtx) ** 0.5 x 1.2 / 2.5."""
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled

    draws = point_mass_draws(transfer_bandwidth_elasticity=0.5, transfer_interconnect_factor=1.5,
                             transfer_system_sd=0.0)
    draws.meta["coords"]["system"] = ["rtx-pro-6000x8"]
    card = load_model_cards(bundled("models.csv"))["kimi-k2.6"]
    draws.meta["model"]["card"] = dataclasses.asdict(card)
    ar = dict(method="ar", engines=["sglang"], accept="1", hardware="h100-pcie", gpus=8)
    step0 = 1000 / P.predict(draws, context=0, **ar)[0]["median"]
    step = 1000 / P.predict(draws, context=65536, **ar)[0]["median"]
    bw_h100 = float(draws.hardware["h100-pcie"]["mem_bw_tb_s"])
    assert step - step0 == pytest.approx(2.0 * (1.792 / bw_h100) ** 0.5 * 1.2 / 2.5)

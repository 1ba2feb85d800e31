"""validate / simulate / SBC: folds, the least-squares baseline, coverage arithmetic,
joblib and dask.distributed dispatch, and a real (small) refit per path."""

import importlib
import math
from pathlib import Path

import pytest

from ddtree_bayes.cli import main as cli
from ddtree_bayes.core.config import SamplerSettings
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.workflows import validation as V
from ddtree_bayes.workflows.simulate import load_truth, simulate_from_files

SMALL = SamplerSettings(chains=2, draws=150, tune=150)


@pytest.fixture(scope="module")
def inputs(bundled_inputs):
    data, cfg = bundled_inputs
    return V.Inputs(data.text, cfg.text, bundled("hardware.csv").read_text())


def test_folds(bundled_inputs):
    data, _ = bundled_inputs
    loo = V.make_folds(data, None)
    assert [f.held_out for f in loo] == [(i,) for i in range(9)]
    hw = {f.name: f.held_out for f in V.make_folds(data, "hardware")}
    assert hw == {"hardware=b300": (0, 1), "hardware=rtx-pro-6000": tuple(range(2, 9))}
    method = {f.name: len(f.held_out) for f in V.make_folds(data, "method")}
    assert method == {"method=ar": 6, "method=ddtree": 1, "method=eagle3": 2}
    from ddtree_bayes.core.errors import QueryError

    with pytest.raises(QueryError, match="--group"):
        V.make_folds(data, "colour")


def _rows_of(path, lines):
    from ddtree_bayes.core.data import load_hardware, load_measurements

    rows = bundled("measurements.csv").read_text().splitlines()
    path.write_text("\n".join([rows[0]] + [rows[i] for i in lines]) + "\n")
    return load_measurements(path, load_hardware(bundled("hardware.csv")))


@pytest.mark.parametrize("group, said", [
    ("hardware", "every row of {path} has hardware rtx-pro-6000"),
    ("engine", "every row of {path} has engine vllm"),
    ("pair", "every row of {path} has pair rtx-pro-6000x8"),
])
def test_a_fold_holding_out_every_row_is_refused(tmp_path, group, said):
    """validate --group hardware on a file of one GPU held out all three rows: the fold's
    refit was the prior alone (36 s of sampling), then an internal error (exit 1). Refused
    before any refit, naming the group and the file."""
    from ddtree_bayes.core.errors import QueryError

    data = _rows_of(tmp_path / "one.csv", [3, 8, 9])   # rtx-pro-6000: AR + two eagle3
    with pytest.raises(QueryError) as err:
        V.make_folds(data, group)
    assert f"--group {group}: {said.format(path=data.path)}" in str(err.value)
    assert "leaves nothing to fit" in str(err.value)
    assert err.value.exit_code == 2
    # leave-one-out of a file of one row: the same
    with pytest.raises(QueryError, match="one.csv holds 1 measurement: leaving it out leaves "
                                         "nothing to fit") as err:
        V.make_folds(_rows_of(tmp_path / "one.csv", [3]), None)
    assert err.value.exit_code == 2
    # a group that leaves rows to fit is no reason
    assert [f.held_out for f in V.make_folds(data, "method")] == [(0,), (1, 2)]


def test_summary_arithmetic_by_hand():
    rows = [  # truth 100 each; medians 90, 100, 120
        {"measured": 100, "median": 90, "lo50": 95, "hi50": 105, "lo90": 80, "hi90": 110,
         "baseline": 100, "baseline_lo": 70, "baseline_hi": 130},
        {"measured": 100, "median": 100, "lo50": 95, "hi50": 105, "lo90": 80, "hi90": 120,
         "baseline": 150, "baseline_lo": 105, "baseline_hi": 195},
        {"measured": 100, "median": 120, "lo50": 110, "hi50": 130, "lo90": 101, "hi90": 140,
         "baseline": 110, "baseline_lo": 77, "baseline_hi": 143},
    ]
    s = V.summarize_folds(rows)
    assert s["posterior"]["coverage50"] == pytest.approx(2 / 3)
    assert s["posterior"]["coverage90"] == pytest.approx(2 / 3)
    assert s["posterior"]["mdape"] == pytest.approx(0.10)
    assert s["posterior"]["mean_width90_rel"] == pytest.approx((30 / 90 + 40 / 100 + 39 / 120) / 3)
    assert s["baseline"]["coverage90"] == pytest.approx(2 / 3)
    assert s["baseline"]["mdape"] == pytest.approx(0.10)


def test_a_baseline_that_scored_no_row_has_no_width_either():
    """A trust pass (round 7): with no held-out row that has an accept_len, the original
    +-30% scores nothing (``baseline.n`` 0; coverage and errors null, as docs/json-output.md
    says: "with no row to score every score is null"), but its ``mean_width90_rel`` read 0.6
    and the table's "mean 90% width" cell 60% beside its "-" cells: the width of intervals
    that were never drawn. It is null (the table's "-") like its other scores; with rows
    scored it stays the flat band's 0.6."""
    held = [{"measured": 100.0, "median": 90.0, "lo50": 95.0, "hi50": 105.0, "lo90": 80.0,
             "hi90": 110.0, "baseline": None, "baseline_lo": None, "baseline_hi": None}]
    for rows in (held, []):
        b = V.summarize_folds(rows)["baseline"]
        assert b["n"] == 0
        assert b == {"n": 0, "coverage50": None, "coverage90": None, "mdape": None,
                     "mape": None, "mean_width90_rel": None}
    scored = [{**held[0], "baseline": 100.0, "baseline_lo": 70.0, "baseline_hi": 130.0}]
    assert V.summarize_folds(scored)["baseline"]["mean_width90_rel"] == pytest.approx(0.6)


def test_baseline_recovers_data_made_by_its_own_formula(bundled_inputs):
    """Rows generated by the deterministic formula itself are predicted back almost exactly,
    including a held-out one."""
    import dataclasses

    data, cfg = bundled_inputs
    share = cfg.priors["moe_share"].mean()
    t1, ctx, slope, frac, b = {"b300x8": 7.5, "rtx-pro-6000x8": 11.0}, 3.3, 0.12, 0.2, 0.6

    def truth(m):
        c = (m.context_tokens or 0) / 65536
        target = share * t1[m.system] * (1 + slope * (m.verify_tokens - 1)) \
            + (1 - share) * t1[m.system] + ctx * c * m.verify_tokens ** b
        return m.accept_len * 1000 / (target / (1 - frac) if m.is_speculative else target)

    rows = [dataclasses.replace(m, tok_s=truth(m)) for m in data.rows]
    # hold out the PRO 6000 AR row at 16k context: the other context rows pin its terms
    predict = V.baseline_fit(rows[:3] + rows[4:], cfg, ("b300x8", "rtx-pro-6000x8"))
    for m in rows:
        assert predict(m) == pytest.approx(m.tok_s, rel=0.01)


def test_a_folds_draws_say_which_passes_and_nodes_its_training_rows_vary(tmp_path):
    """A group measured at two tree budgets, one of them held out by a fold, was measured at
    one budget in that fold: the refit's model knows it (the refittable model's
    ``group_tree_varies`` is recomputed from the training rows), but the fold's draws said
    "varies" from every row of the file, so predict's per-node spread of a group measured at
    one size (structure.tied_ratio_spread) was left out of every fold's interval (the
    headline's shape: the club-3090 MTP depth 6 from depth 1, 90% width 91.9% against 99.2%
    from a fit of the same two rows). The draws' ``group_varies`` is now the training rows'
    alone, as a fit of those rows stores it."""
    import numpy as np

    from ddtree_bayes.api import load_inputs
    from ddtree_bayes.core import spec as S

    rows = bundled("measurements.csv").read_text().splitlines()
    budget16 = rows[2].split(",")   # the B300 DDTree row (budget 8, M 9) at budget 16, M 17
    assert budget16[5:8] == ["8", "8", "9"]
    budget16[6:8] = ["16", "17"]
    path = tmp_path / "m.csv"
    path.write_text("\n".join([*rows, ",".join(budget16)]) + "\n")
    data, cfg = load_inputs(path, bundled("priors.toml"), bundled("hardware.csv"))
    spec = S.build_spec(data, cfg)
    assert spec.groups == ("b300x8/sglang/ddtree", "rtx-pro-6000x8/vllm/eagle3")
    every = np.ones(len(data.rows))
    assert V.draws_meta(spec, cfg, every)["model"]["group_varies"] == {
        "pass": [False, False], "tree": [True, False]}
    fold = every.copy()
    fold[-1] = 0.0   # budget 16 held out: B300's tree measured at budget 8 alone
    assert V.draws_meta(spec, cfg, fold)["model"]["group_varies"] == {
        "pass": [False, False], "tree": [False, False]}
    # what a fit of the training rows alone stores
    path.write_text("\n".join(rows) + "\n")
    alone, _ = load_inputs(path, bundled("priors.toml"), bundled("hardware.csv"))
    assert (V.draws_meta(spec, cfg, fold)["model"]["group_varies"]
            == S.model_meta(S.build_spec(alone, cfg), cfg)["group_varies"])
    assert V.draws_meta(spec, cfg)["model"] == S.model_meta(spec, cfg)   # (no weights: all)


@pytest.mark.nuts
def test_one_real_fold(inputs):
    res = V.run_fold(inputs, V.Fold("row 3", (1,)), seed=1, settings=SMALL)
    (row,) = res.rows
    assert row["row"] == 3 and row["measured"] == 303.0
    assert row["lo90"] < row["lo50"] < row["median"] < row["hi50"] < row["hi90"]
    # without its only DDTree row, the B300 tree prediction is much wider than with it
    assert (row["hi90"] - row["lo90"]) / row["median"] > 0.15
    assert row["baseline_lo"] == pytest.approx(0.7 * row["baseline"])


@pytest.mark.nuts
def test_a_fold_climbs_the_remedy_ladder(inputs, monkeypatch):
    """A fold that fails its gates retries as `fit` does (rung 1: tuning doubled, and the
    draws after an ESS failure), keeps the attempt that passed and records the rung; with
    remedy off it stops at the first attempt."""
    import numpy as np
    import nutpie

    from ddtree_bayes.engine import inference

    calls, real_sample, real_diagnose = [], nutpie.sample, inference.diagnose

    def sample(model, **kw):
        calls.append((kw["tune"], kw["draws"], kw["target_accept"]))
        return real_sample(model, **{**kw, "draws": 20, "tune": 20})

    verdicts = iter([["min bulk ESS 50 < 400 (x)"], []])

    def diagnose(posterior, stats):
        rows, divergences, _ = real_diagnose(posterior, stats)
        return rows, divergences, next(verdicts)

    monkeypatch.setattr(nutpie, "sample", sample)
    monkeypatch.setattr(inference, "diagnose", diagnose)
    # 20 draws stand for the 150 asked: not the interrupted run require_draws takes it for
    monkeypatch.setattr(inference, "require_draws", lambda dt, draws, sampler, chains=None: None)
    draws, failures = V.sample_weighted(inputs, np.ones(9), 1, SMALL, remedy=True)
    assert failures == [] and draws.meta["remedy"] == 1
    assert calls == [(150, 150, SMALL.target_accept), (300, 300, SMALL.target_accept)]
    calls.clear()
    monkeypatch.setattr(inference, "diagnose", lambda p, s: (*real_diagnose(p, s)[:2], ["x"]))
    draws, failures = V.sample_weighted(inputs, np.ones(9), 1, SMALL)
    assert failures == ["x"] and draws.meta["remedy"] is None and len(calls) == 1


def _square(x):
    return x * x


def test_dispatch_with_local_processes():
    seen = []
    out = V.dispatch(_square, [(i,) for i in range(6)], jobs=2,
                     progress=lambda i, n, r: seen.append((i, n)))
    assert out == [0, 1, 4, 9, 16, 25]
    assert seen[-1] == (6, 6)


@pytest.mark.slow
def test_validate_on_a_local_dask_cluster(tmp_path):
    """The distributed path: folds run on the workers of a dask.distributed cluster (~60 s: a
    cluster's start and its workers' compiles; the slow tier. The folds' own logic is the
    default tier's, through the local process pool)."""
    distributed = importlib.import_module("distributed")
    # the CLI's --scheduler path, with small settings: one fold per engine
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        res = V.validate(bundled("measurements.csv"), bundled("priors.toml"), group="engine",
                         scheduler=cluster.scheduler_address, settings=SMALL, progress=False,
                         workdir=tmp_path)
    assert sorted(f["fold"] for f in res["folds"]) == ["engine=sglang", "engine=vllm"]
    assert len(res["rows"]) == 9   # rows of a refit that failed its gates are listed, not scored
    assert res["summary"]["n"] + len(res["summary"]["unconverged_rows"]) == 9


@pytest.mark.nuts
def test_sbc_ranks_and_uniformity(inputs):
    rep = V.sbc_replicate(inputs, seed=3, settings=SMALL)
    assert set(rep["ranks"]) >= {"step_ar_ms[b300x8]", "noise_sd", "reduction[native]"}
    assert not any(k.startswith(("moe_z", "overhead_z")) for k in rep["ranks"])
    assert all(0 <= r <= V.SBC_L for r in rep["ranks"].values())
    flat = [{"ranks": {"a": r, "b": 5}} for r in range(0, 100)]   # uniform vs all in one bin
    tests = V.sbc_uniformity(flat)
    assert tests["a"]["counts"] == [10] * 10 and tests["a"]["chi2_p"] == pytest.approx(1.0)
    assert tests["b"]["chi2_p"] < 1e-10


def test_sbc_uniformity_of_few_replicates_is_exact():
    """``validate --sbc 2`` printed chi-square p 0.035 for a parameter whose two ranks shared a
    bin of 10 (and 0.534 for two bins): scipy's approximation, off with 0.2 ranks expected a
    bin. Under uniform ranks two share a bin with probability 1/10, the statistic's largest
    value for 2 ranks, so the exact p is 0.1 (and 1.0 apart); 3 in one bin, 1/100. At 50
    replicates (5 a bin) and more it is the chi-square approximation as before."""
    two = [{"ranks": {"same": 15, "apart": r}} for r in (12, 95)]
    tests = V.sbc_uniformity(two)
    assert tests["same"]["counts"][1] == 2 and tests["same"]["chi2_p"] == pytest.approx(0.1)
    assert tests["apart"]["chi2_p"] == pytest.approx(1.0)
    three = V.sbc_uniformity([{"ranks": {"a": 3}}] * 3)
    assert three["a"]["chi2_p"] == pytest.approx(0.01)
    assert (V.sbc_p_method(49), V.sbc_p_method(50)) == ("exact", "chi-square")
    flat = [{"ranks": {"a": r}} for r in range(0, 100, 10)] * 5    # 50 ranks, 5 a bin
    assert V.sbc_uniformity(flat)["a"]["chi2_p"] == pytest.approx(1.0)


def test_simulate_cli_writes_a_fittable_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    truth = Path(__file__).resolve().parents[1] / "data" / "examples"
    out = tmp_path / "sim.csv"
    code = cli.main(["simulate", "--truth", str(truth / "truth_dense_consumer.toml"),
                     "--design", str(truth / "design_dense_consumer.csv"), "--seed", "4",
                     "--out", str(out)])
    assert code == 0
    from ddtree_bayes.core.data import load_hardware, load_measurements

    data = load_measurements(out, load_hardware(bundled("hardware.csv")))
    assert len(data.rows) == 12 and data.model == "dense-8b"
    assert {r.verify_tokens for r in data.rows if r.method == "eagle3"} == {2, 3, 4, 5, 6}
    # the same seed gives the same file; the AR row at zero context is 1000/9 ms * noise
    again = simulate_from_files(truth / "truth_dense_consumer.toml",
                                truth / "design_dense_consumer.csv", seed=4)
    assert again == out.read_text()
    t = load_truth(truth / "truth_dense_consumer.toml")
    first = data.rows[0]
    assert abs(math.log(first.tok_s * t["step_ar_ms"]["rtx-5090x1"] / 1000)) < 4 * t["noise_sd"]


def test_simulate_reads_the_context_unit_the_fit_reads(tmp_path, capsys, monkeypatch):
    """simulate priced the context term per 65536 tokens whatever [model]
    context_unit_tokens the working directory's priors give, which fit, validate and the
    baseline read: a truth's ctx_ms_per_unit was then per another unit than the one the fit
    recovers it in. By hand (noise 0): AR on one RTX 5090, step_ar 9 ms, 2 ms per unit, at
    context 32768: 9 + 2 x 32768 / 65536 = 10 ms, 100 tok/s at the bundled unit; at a unit of
    32768 tokens 9 + 2 x 1 = 11 ms, 1000 / 11 = 90.91 tok/s."""
    monkeypatch.chdir(tmp_path)
    truth = tmp_path / "truth.toml"
    truth.write_text('model = "dense-8b"\nctx_verify_exponent = 0.5\nnoise_sd = 0.0\n'
                     '[systems."rtx-5090x1"]\nstep_ar_ms = 9.0\nmoe_share = 0.5\n'
                     'moe_shape = 0.25\nctx_ms_per_unit = 2.0\n')
    design = tmp_path / "design.csv"
    design.write_text("hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
                      "rtx-5090,1,vllm,ar,,,1,32768\n")

    def tok_s() -> str:
        assert cli.main(["simulate", "--truth", str(truth), "--design", str(design)]) == 0
        return capsys.readouterr().out.splitlines()[1].split(",")[10]

    assert tok_s() == "100"
    (tmp_path / "models").mkdir()
    text = bundled("priors.toml").read_text()
    assert "context_unit_tokens = 65536" in text
    (tmp_path / "models" / "priors.toml").write_text(
        text.replace("context_unit_tokens = 65536", "context_unit_tokens = 32768"))
    assert tok_s() == "90.91"


def test_validate_cli_rejects_bad_arguments(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", "--jobs", "0"]) == 2
    assert cli.main(["validate", "--sbc", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(e.startswith("ddtree-bayes: error: ") for e in err)
    assert not (tmp_path / "models").exists()


def test_sbc_calibrates_the_cards_the_fit_would_use(tmp_path, monkeypatch):
    """validate --sbc built its inputs without the working directory's cards: a model only
    data/models.csv has was 'no model card' (a false message), and an edited card was
    calibrated as the bundled one. Every other validation mode passes them."""
    cards = bundled("models.csv").read_text()
    llama = next(ln for ln in cards.splitlines() if ln.startswith("llama-3.1-8b-instruct,"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "models.csv").write_text(cards.rstrip("\n") + "\n"
                                                  + llama.replace("llama-3.1-8b-instruct", "mymodel", 1)
                                                  + "\n")
    data = tmp_path / "mine.csv"
    header = bundled("measurements.csv").read_text().splitlines()[0]
    data.write_text(header + "\nmymodel,h100,1,vllm,ar,,,1,1.0,,150,s,\n"
                    "mymodel,h100,1,vllm,eagle3,3,3,4,2.5,,300,s,\n")
    seen = {}

    def capture(fn, tasks, **kw):
        seen["inputs"] = tasks[0][0]
        raise KeyboardInterrupt   # stop before any sampling

    monkeypatch.setattr(V, "dispatch", capture)
    with pytest.raises(KeyboardInterrupt):
        V.sbc(data, None, replicates=2, workdir=tmp_path, progress=False)
    inputs = seen["inputs"]   # ("" was the bundled cards, which have no mymodel)
    assert inputs.models_csv == (tmp_path / "data" / "models.csv").read_text()


def test_an_unconverged_folds_rows_are_listed_not_scored(tmp_path, capsys, monkeypatch):
    """A fold whose refit failed its convergence gates had its held-out rows counted in the
    coverage and error as if fine (`validate --group hardware`: the B300 fold's two rows,
    predicted at twice their measurement, made coverage 7/9 and the median error 0%). Now the
    summary scores the converged folds' rows only and names the rows it leaves out; the JSON
    lists them in summary.unconverged_rows. The refit is mocked: the B300 fold fails its
    gates and predicts 2x, the other fold predicts every row exactly."""
    import json

    import numpy as np

    from ddtree_bayes.core.data import load_hardware, load_measurements
    from test_json_schemas import validate_output

    class Draws:
        meta = {"remedy": None}

    def refit_without(inputs, held_out, seed, settings, cores=1):
        data = load_measurements("m.csv", load_hardware(bundled("hardware.csv")),
                                 text=inputs.data_csv)
        failed = 0 in held_out   # the B300 fold (rows 2 and 3)
        draws = Draws()
        draws.meta = {"remedy": None, "scale": 2.0 if failed else 1.0}
        return draws, ["R-hat 1.2 > 1.01 (x)"] if failed else [], data, lambda m: None, []

    monkeypatch.setattr(V, "refit_without", refit_without)
    monkeypatch.setattr(V, "predict_row",
                        lambda draws, m, rng: np.full(40, m.tok_s * draws.meta["scale"]))
    monkeypatch.chdir(tmp_path)
    res = V.validate(bundled("measurements.csv"), bundled("priors.toml"), group="hardware",
                     progress=False, workdir=tmp_path)
    assert [f["converged"] for f in res["folds"]] == [False, True]
    assert len(res["rows"]) == 9   # every held-out row is still listed
    s = res["summary"]
    assert s["n"] == 7 and s["unconverged_rows"] == [2, 3]
    assert s["posterior"]["coverage90"] == 1.0 and s["posterior"]["mdape"] == 0.0
    validate_output("validate", json.loads(json.dumps(res)))

    code = cli.main(["validate", "--group", "hardware", "--data", str(bundled("measurements.csv")),
                     "--priors", str(bundled("priors.toml")), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert "held out by hardware: 2 refits (1 not converged)" in out
    assert ("not counted above: rows 2, 3, held out by hardware=b300, whose refit failed its "
            "convergence gates (R-hat 1.2 > 1.01 (x)): their intervals are listed, not scored"
            in out)
    line = next(ln for ln in out.splitlines() if ln.startswith("row 2 "))
    assert line.rstrip().endswith("GATES FAILED")
    line = next(ln for ln in out.splitlines() if ln.startswith("row 4 "))
    assert not line.rstrip().endswith("GATES FAILED")
    summary = next(ln for ln in out.splitlines() if ln.startswith("posterior "))
    assert summary.split()[1:3] == ["100%", "100%"]   # coverage 50% and 90% of the 7 rows

    # every fold unconverged: nothing to score, said so (no NaN)
    monkeypatch.setattr(V, "refit_without", lambda inputs, held_out, seed, settings, cores=1: (
        refit_without(inputs, (0, *held_out), seed, settings, cores)))
    res = V.validate(bundled("measurements.csv"), bundled("priors.toml"), group="hardware",
                     progress=False, workdir=tmp_path)
    s = res["summary"]
    assert s["n"] == 0 and s["unconverged_rows"] == list(range(2, 11))
    assert s["posterior"]["coverage90"] is None and s["posterior"]["mape"] is None
    validate_output("validate", json.loads(json.dumps(res)))


def test_a_row_whose_acceptance_would_be_the_prior_is_skipped_in_every_mode(tmp_path, capsys,
                                                                            monkeypatch):
    """A held-out row without accept_len whose acceptance group (model, method, block,
    budget) has no row left in training was scored by plain `validate` (and `--group`) at
    its group's posterior: with every row of the group at likelihood weight 0, the prior
    alone, and its interval counted in the coverage. `--keep-ar` skips such rows; now every
    mode does, listing them in `skipped_rows` (and a leave-one-out fold with nothing left
    to score is not refitted). test_transfer_modes.TINY (data rows 2-10): rows 4 and 7 are
    Eagle3 k=3 on kimi-k2.6 without accept_len (one group, on b300 and h200), row 9 Eagle3
    k=5 on llama h100x1 without accept_len (a group of its own). The refit is mocked: it
    records what it holds out, and every row is predicted exactly."""
    import json

    import numpy as np

    from ddtree_bayes.core.errors import QueryError
    from test_json_schemas import validate_output
    from test_transfer_modes import TINY

    refits: list[tuple[int, ...]] = []

    class Draws:
        meta = {"remedy": None}

    def refit_without(inputs, held_out, seed, settings, cores=1):
        from ddtree_bayes.core.data import load_hardware, load_measurements

        refits.append(tuple(held_out))
        data = load_measurements("tiny.csv", load_hardware(bundled("hardware.csv")),
                                 text=inputs.data_csv)
        return Draws(), [], data, lambda m: None, []

    monkeypatch.setattr(V, "refit_without", refit_without)
    monkeypatch.setattr(V, "predict_row", lambda draws, m, rng: np.full(40, m.tok_s))
    (tmp_path / "tiny.csv").write_text(TINY)
    monkeypatch.chdir(tmp_path)

    def run(group):
        refits.clear()
        res = V.validate(tmp_path / "tiny.csv", bundled("priors.toml"), group=group,
                         progress=False, workdir=tmp_path)
        validate_output("validate", json.loads(json.dumps(res)))
        return res

    why = ("no accept_len and no training row of its acceptance group (model, method, block, "
           "budget) left: its acceptance would be the prior")
    # leave-one-out: row 4 is predicted with row 7 in training (and 7 with 4); row 9 alone
    res = run(None)
    assert [r["row"] for r in res["rows"]] == [2, 3, 4, 5, 6, 7, 8, 10]
    assert res["skipped_rows"] == [{"fold": "row 9", "row": 9,
                                    "reason": f"row 9 (eagle3 M=6): {why}"}]
    assert res["summary"]["n"] == 8 and len(refits) == 8 and (7,) not in refits
    # --group pair: each kimi Eagle3 row keeps the other pair's in training; row 9 does not
    res = run("pair")
    assert [r["row"] for r in res["rows"]] == [2, 3, 4, 5, 6, 7, 8, 10]
    assert [s["row"] for s in res["skipped_rows"]] == [9]
    assert res["skipped_rows"][0]["fold"] == "pair=llama-3.1-8b-instruct@h100x1"
    # --group method: the Eagle3 fold holds out both rows of the kimi group and row 9
    res = run("method")
    assert [(s["fold"], s["row"]) for s in res["skipped_rows"]] == [
        ("method=eagle3", 4), ("method=eagle3", 7), ("method=eagle3", 9)]
    assert [r["row"] for r in res["rows"]] == [2, 5, 6, 8, 3, 10]
    assert res["summary"]["n"] == 6
    code = cli.main(["validate", "--group", "method", "--data", str(tmp_path / "tiny.csv"),
                     "--priors", str(bundled("priors.toml")), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert (f"not scored: row 7 (eagle3 M=4), held out by method=eagle3: {why}"
            in out.splitlines())
    # nothing left to score in any fold: refused before any refit
    (tmp_path / "lone.csv").write_text(TINY.splitlines()[0] + "\n" + TINY.splitlines()[8]
                                       + "\n" + TINY.splitlines()[3] + "\n")
    refits.clear()
    with pytest.raises(QueryError, match="no held-out row of .*lone.csv can be scored") as err:
        V.validate(tmp_path / "lone.csv", bundled("priors.toml"), progress=False,
                   workdir=tmp_path)
    assert err.value.exit_code == 2 and refits == []

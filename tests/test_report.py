"""`ddtree-bayes report`: the numbers in summary.json against the posterior, the page
in a real browser, and reports for unconverged and broken fits."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from ddtree_bayes.cli import main as cli
from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.errors import ArtifactError
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine import fitted_rows as M
from ddtree_bayes.engine import store
from ddtree_bayes.workflows import report


@pytest.fixture(scope="module")
def built_report(fitted_workdir, tmp_path_factory):
    work, result = fitted_workdir
    out_root = tmp_path_factory.mktemp("reports")
    out_dir, summary = report.write_report(workdir=work, out_root=out_root)
    return work, result, out_dir, summary


def test_files_and_verdict(built_report):
    _, result, out_dir, summary = built_report
    assert out_dir.name == result.fit_id
    # the 7 fixed scales are said constant, without ArviZ's 56 divisions by 0 in the notes
    assert not [n for n in summary["library_notes"] if "invalid value encountered" in n]
    constant = [r["parameter"] for r in summary["psense"]["overall"] if r["prior"] is None]
    assert len(constant) == 7 and "compute_eff_log_sd" in constant
    for name in ("index.html", "summary.md", "summary.json", *report.CAPTIONS):
        assert (out_dir / (name if "." in name else f"{name}.png")).exists(), name
    assert "figure_errors" not in summary
    assert json.loads((out_dir / "summary.json").read_text())["fit_id"] == result.fit_id
    page = (out_dir / "index.html").read_text()
    # the answer first, then the decisions, then the checks; the sampler's diagnostics last
    order = ["converged: every gate passed", "Default scenario (b300 x8, ddtree, block 16, "
             "budget 32, verify 33, context 0) at acceptance 14: sglang ",
             "<h2 id='prediction'>1. Predicted throughput",
             "<h2 id='concurrency'>2. Several streams at once (accept 14; sglang: ",
             "<h2 id='variance'>3. Where the width",
             "<h2 id='budgets'>4. Which tree budget?", "<h2 id='next'>5. What to measure next",
             "<h2 id='hardware'>6. Hardware never measured", "<h2 id='breakdown'>7. Step-time",
             "<h2 id='ppc'>8. Posterior predictive check", "<h2 id='loo'>9. PSIS-LOO",
             "<h2 id='prior_posterior'>10. Prior vs posterior",
             "<h2 id='psense'>11. Prior sensitivity", "<h2 id='sampling'>12. Sampling diagnostics"]
    at = [page.index(text) for text in order]
    assert at == sorted(at)
    assert page.count("<img ") == len(list(out_dir.glob("*.png")))
    assert "http://" not in page.replace("http://www.w3.org", "")  # self-contained


def test_the_answer_line_is_the_fan_at_acceptance_14(built_report):
    from ddtree_bayes.workflows.report.render import headline

    _, _, _, summary = built_report
    fan = summary["fan"]
    i = fan["accept"].index(14.0)
    text = headline(summary)
    for engine, f in fan["engines"].items():
        q = f["quantiles"][i]
        assert f"{engine} {q[2]:.0f} tok/s (90% interval {q[0]:.0f}-{q[4]:.0f})" in text


def test_the_answer_line_names_the_scenario_without_its_engine():
    """One model: "b300 x8, ddtree, ..."; several: the model first, then the hardware (it
    dropped the hardware, taking the second part for the engine)."""
    from ddtree_bayes.workflows.report.render import headline

    q = [[1.0, 2.0, 3.0, 4.0, 5.0]]
    for scenario, expected in (
            ("b300 x8, sglang, ddtree, block 16", "Default scenario (b300 x8, ddtree, block 16)"),
            ("qwen3.8-27b, b300 x8, sglang, ddtree, block 16",
             "Default scenario (qwen3.8-27b, b300 x8, ddtree, block 16)")):
        text = headline({"fan": {"accept": [14.0], "engines": {
            "sglang": {"scenario": scenario, "quantiles": q, "measured": True}}}})
        assert text.startswith(expected + " at acceptance 14: sglang 3 tok/s (90% interval 1-5)")
        assert "no measurement" not in text
    # a fit that never measured the default scenario's system says where the numbers come from
    text = headline({"fan": {"accept": [14.0], "engines": {
        "sglang": {"scenario": "b300 x8, sglang, ddtree", "quantiles": q, "measured": False}}}})
    assert text.endswith("This fit has no measurement on that system (model, GPU): these "
                         "numbers come from hardware transfer or the model card's roofline, so "
                         "ask `ddtree-bayes predict` about a configuration you measured.")


def test_rank_and_trace_have_one_titled_panel_per_parameter(built_report):
    """Every sampled scalar gets its own panel (constants excluded), twelve to a figure, so
    the figure splits instead of shrinking: rank.png, rank-2.png, ..."""
    from ddtree_bayes.workflows.report import figures as F

    work, result, out_dir, summary = built_report
    columns = F.chain_columns(store.load_datatree(result.path))
    names = [p["parameter"] for p in summary["sampling"]["parameters"]]
    assert set(columns) <= set(names) and len(columns) >= 15
    assert all(c.shape == (4, 1000) for c in columns.values())
    n_figures = -(-len(columns) // F.PANELS_PER_FIGURE)
    for kind in ("rank", "trace"):
        files = sorted(out_dir.glob(f"{kind}*.png"), key=lambda f: (len(f.name), f.name))
        assert [f.name for f in files] == [f"{kind}.png"] + [
            f"{kind}-{k}.png" for k in range(2, n_figures + 1)]


def test_report_json_fits_its_schema(built_report, monkeypatch, capsys):
    from test_json_schemas import validate_output

    work, result, out_dir, summary = built_report
    monkeypatch.setattr(report, "write_report", lambda *a, **k: (out_dir, summary))
    monkeypatch.chdir(work)
    assert cli.main(["report", "--format", "json", "--quiet"]) == 0
    payload = json.loads(capsys.readouterr().out)
    validate_output("report", payload)
    assert payload["fit_id"] == result.fit_id and payload["verdict"]["converged"] is True


def test_sampling_numbers_match_the_fit(built_report):
    _, result, _, summary = built_report
    s = summary["sampling"]
    assert s["divergences"] == result.divergences == 0
    assert s["max_rhat"] == pytest.approx(max(d["rhat"] for d in result.diagnostics))
    assert len(s["ebfmi_per_chain"]) == 4 and all(b > 0.3 for b in s["ebfmi_per_chain"])
    assert 0 <= s["tree_depth_saturation"] <= 1


def test_pareto_k_and_pit_one_per_measurement(built_report):
    _, _, _, summary = built_report
    loo = summary["loo"]
    assert [k["row"] for k in loo["pareto_k"]] == list(range(2, 11))
    assert len(loo["loo_pit"]) == 9 and all(0 <= x <= 1 for x in loo["loo_pit"])
    assert loo["n_flagged"] == sum(k["k"] > 0.7 for k in loo["pareto_k"])
    assert all(k["flag"] == (k["k"] > 0.7) for k in loo["pareto_k"])


def test_flagged_points_are_exactly_those_outside_their_interval(built_report):
    work, result, _, summary = built_report
    rows = summary["ppc"]["rows"]
    expect = [r["row"] for r in M.check_measurements(store.load_fit(result.path))
              if not r["lo90"] <= r["measured"] <= r["hi90"]]
    assert summary["ppc"]["flagged"] == expect
    assert [r["row"] for r in rows if r["outside_90"]] == expect


def test_variance_shares_sum_to_one(built_report):
    _, _, _, summary = built_report
    for engine, d in summary["variance"].items():
        total = sum(d["shares"].values()) + d["not_attributed"]
        assert total == pytest.approx(1.0, abs=1e-9), engine
        assert 0.8 < d["r2"] <= 1.0
        assert all(v >= -1e-9 for v in d["shares"].values())
    assert "reduction[native]" in summary["variance"]["native"]["shares"]
    assert "reduction[native]" not in summary["variance"]["sglang"]["shares"]


def test_prior_only_parameters_are_named(built_report):
    _, _, _, summary = built_report
    status = {r["parameter"]: r["status"] for r in summary["prior_posterior"]}
    assert status["reduction[native]"] == "prior-only"     # never measured
    assert status["ctx_ms_per_unit[b300x8]"] == "prior-only"  # no B300 context sweep
    assert status["step_ar_ms[b300x8]"] == "informed"
    assert status["ctx_ms_per_unit[rtx-pro-6000x8]"] == "informed"


def test_fan_and_breakdown(built_report):
    _, _, _, summary = built_report
    fan = summary["fan"]
    for engine in ("sglang", "native"):
        q = np.array(fan["engines"][engine]["quantiles"])
        assert np.all(np.diff(q[:, 2]) > 0)               # median rises with acceptance
        assert np.all(q[:, 0] < q[:, 2]) and np.all(q[:, 2] < q[:, 4])
        # the original estimate at accept 12 and 16 is in the seed table
        orig = fan["engines"][engine]["original"]
        pts = {p["accept"]: p["tok_s"] for p in fan["engines"][engine]["original_points"]}
        assert orig[11] == pts[12.0]   # (its own figure, not accept / the mean step)
    assert {m["tok_s"] for m in fan["measured"]} == {133.0, 303.0}
    rows = {b["config"].split(":")[0]: b for b in summary["breakdown"]}
    assert rows["row 2"]["spec"] == [0.0, 0.0, 0.0]          # autoregressive: no SPEC
    assert rows["row 2"]["measured_step_ms"] == pytest.approx(1000 / 133)


def test_breakdown_of_repeated_runs_without_acceptance():
    """Repeated runs whose acceptance is inferred have no measured step (the report crashed
    taking the median of None); known runs of one configuration give the median of theirs."""
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report.sections import step_breakdown

    head, *rows = bundled("measurements.csv").read_text().splitlines()
    b300 = [r for r in rows if ",b300," in r]
    extra = ["kimi-k2.6,b300,8,sglang,ddtree,16,32,33,,,600,HYPOTHETICAL,",
             "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,,,620,HYPOTHETICAL,",
             "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,125,HYPOTHETICAL repeat,"]
    data = load_measurements("t.csv", load_hardware(bundled("hardware.csv")),
                             text="\n".join([head, *b300, *extra]) + "\n")
    out = {b["config"].split(":")[0]: b for b in step_breakdown(point_mass_draws(), data, seed=1)}
    assert out["row 4 (2 runs)"]["measured_step_ms"] is None
    assert out["row 2 (2 runs)"]["measured_step_ms"] == pytest.approx(
        np.median([1000 / 133, 1000 / 125]))


def test_shapley_shares_with_correlated_factors():
    rng = np.random.default_rng(1)
    a = rng.normal(size=50_000)
    b = 0.8 * a + 0.6 * rng.normal(size=50_000)  # corr(a, b) = 0.8
    y = a + b + 0.5 * rng.normal(size=50_000)
    out = report.shapley_variance_shares(y, {"a": a, "b": b})
    assert sum(out["shares"].values()) == pytest.approx(out["r2"], abs=1e-12)
    # symmetric roles: equal credit; R^2 = 3.6 / (3.6 + 0.25)
    assert out["shares"]["a"] == pytest.approx(out["shares"]["b"], abs=0.01)
    assert out["r2"] == pytest.approx(3.6 / 3.85, abs=0.01)


def test_prior_draws_match_the_priors():
    cfg = parse_priors(bundled("priors.toml").read_text())
    coords = {"system": ["a", "b"], "overhead_group": ["g"], "relation": ["native"]}
    d = report.prior_draws(cfg, coords, 200_000, seed=1)
    # Beta(4, 6): sd = sqrt(24 / (100 * 11)) = 0.1477
    assert d["moe_share"].std() == pytest.approx(0.1477, abs=0.002)
    assert d["moe_share"].shape == (200_000, 2)
    assert np.median(d["step_ar_ms"]) == pytest.approx(10.0, rel=0.02)
    assert d["reduction"].mean() == pytest.approx(0.4, abs=0.003)
    lp = report.log_prior(cfg, coords, {k: v[:5] for k, v in d.items()})
    assert all(np.isfinite(x).all() for x in lp.values())
    # a one-engine fit's zero-sum engine effect is 0 at every draw: not a prior to power-scale
    one_engine = {k: v[:5] for k, v in d.items()} | {"spec_fixed_engine_z": np.zeros((5, 1))}
    lp = report.log_prior(cfg, coords, one_engine)
    assert "spec_fixed_engine_z" not in lp and "moe_share" in lp
    lp = report.log_prior(cfg, coords, one_engine | {"spec_fixed_engine_z": d["moe_z"][:5, :2]})
    assert lp["spec_fixed_engine_z"] == pytest.approx(
        -np.log(2 * np.pi) - 0.5 * (d["moe_z"][:5, :2] ** 2).sum(axis=1))


@pytest.mark.nuts
def test_unconverged_fit_gets_a_report_that_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "--chains", "2", "--draws", "60", "--tune", "60", "--quiet"]) == 5
    capsys.readouterr()
    assert cli.main(["report", "--quiet"]) == 5
    out = capsys.readouterr().out
    assert out.startswith("NOT converged: ")
    page = next((tmp_path / "reports").glob("*/index.html")).read_text()
    assert "class='verdict bad'>NOT converged: " in page and "min bulk ESS" in page


def test_broken_fit_gets_a_page_not_a_traceback(fitted_workdir, tmp_path, capsys,
                                                monkeypatch):
    work, result = fitted_workdir
    (tmp_path / "models" / "fits").mkdir(parents=True)
    shutil.copy(work / "models" / "latest.json", tmp_path / "models" / "latest.json")
    (tmp_path / "models" / "fits" / result.path.name).write_bytes(b"not a netcdf file")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "--quiet"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a readable" in err
    page = (tmp_path / "reports" / result.fit_id / "index.html").read_text()
    assert "fit could not be read" in page
    with pytest.raises(ArtifactError):
        report.write_report(workdir=tmp_path)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs "
                    "Debian's chromium; locally: apt-get install chromium)")
def test_every_image_renders_in_a_real_browser(built_report, tmp_path):
    _, _, out_dir, _ = built_report
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([CHROMIUM, *flags, "--virtual-time-budget=5000", "--dump-dom",
                          (out_dir / "index.html").as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    n = len(list(out_dir.glob("*.png")))
    assert n > len(report.CAPTIONS)  # rank and trace split into several figures
    assert f'data-images-rendered="{n}/{n}"' in dom
    shot = tmp_path / "page.png"
    subprocess.run([CHROMIUM, *flags, "--window-size=1200,1600", f"--screenshot={shot}",
                    (out_dir / "index.html").as_uri()], capture_output=True, timeout=120,
                   check=True)
    assert shot.stat().st_size > 10_000


def test_decision_sections(built_report):
    _, _, _, summary = built_report
    dec = summary["decisions"]
    for engine, opt in dec["optimize"].items():
        assert sum(r["p_best"] for r in opt["rows"]) == pytest.approx(1.0)
        best = max(opt["rows"], key=lambda r: r["tok_s_mean"])
        assert opt["recommended"] == best["budget"], engine
        assert min(r["regret"] for r in opt["rows"]) == pytest.approx(best["regret"])
    widths = [r["expected_width"] for r in dec["next"]["rows"]]
    assert widths == sorted(widths)
    assert dec["next"]["query"]["engine"] == "native"
    hw = {h["hardware"]: h for h in dec["hardware"]}
    assert set(hw) == set(load_hardware_names())
    # Kimi K2.6's card holds 500 GB of weights: 8 GPUs with less memory are refused, saying so
    cannot = {k for k, h in hw.items() if "error" in h}
    assert cannot and cannot == {k for k, h in hw.items() if h["memory_gb_total"] < 500}
    assert all("do not fit in 8 x" in hw[k]["error"] for k in cannot)
    assert {k for k, h in hw.items() if h.get("measured")} == {"b300", "rtx-pro-6000"}

    def rel_width(h):
        lo, med, hi = h["ar"]
        return (hi - lo) / med

    assert rel_width(hw["h200"]) > 3 * rel_width(hw["b300"])
    assert hw["h200"]["memory_gb_total"] == 141 * 8


def load_hardware_names():
    from ddtree_bayes.core.data import load_hardware

    return list(load_hardware(bundled("hardware.csv")))


def test_a_fit_of_too_few_draws_is_refused_in_one_line(tmp_path):
    """A fit of 4 x 5 draws ended in 'internal error: ValueError: n_draws_tail must be at
    least 5' inside PSIS; it is refused, naming the fix, and nothing is written."""
    from test_cli_support import listing, make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w", n=20)
    before = listing(work)
    code, out, err = run_cli(work, "report")
    assert code == 2 and listing(work) == before, err
    assert "has 20 posterior draws; the report (PSIS-LOO, LOO-PIT, power-scaling) needs at " \
           "least 25" in err and "refit with more --draws" in err


def test_the_reports_answer_is_predicts_digit_for_digit():
    """The report's answer line and fan said sglang 708 (90% 586-854) where predict, and the
    report's own transfer table, said 708 (588-851): the fan drew from its own generator."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report.sections import fan_section

    draws = point_mass_draws(n=400, noise_sd=0.05)
    fan = fan_section(draws, 20261130)
    for engine, series in fan["engines"].items():
        for a, q in zip(fan["accept"], series["quantiles"], strict=True):
            (row,) = P.predict_rows(draws, resolve(draws, Flags(accept=f"{a:g}",
                                                                 engines=(engine,))),
                                    seed=20261130)
            assert [q[0], q[2], q[4]] == pytest.approx([row["lo90"], row["median"], row["hi90"]],
                                                       rel=1e-12), (engine, a)


def test_the_reports_p_faster_than_ar_is_predicts(monkeypatch):
    """The report's per-concurrency P(faster than AR) drew from its own generator (a review):
    now predict --concurrency's, keyed by the question and its acceptance. (On a measured
    system the draws do not use the generator; a stand-in that returns the generator's first
    number shows which one each side was given.)"""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report.sections import CONCURRENCY_GRID, concurrency_section

    monkeypatch.setattr(P, "p_faster_than_ar", lambda fit, sc, a, rng: float(rng.random()))
    draws = point_mass_draws(n=400, noise_sd=0.05)
    section = concurrency_section(draws, 20261130)
    a = section["accept"]
    for engine, entry in section["engines"].items():
        if engine == "ar":
            continue
        rows = P.predict_rows(draws, resolve(draws, Flags(accept=f"{a:g}", engines=(engine,),
                                                          concurrency=CONCURRENCY_GRID)),
                              seed=20261130)
        assert entry["p_faster_than_ar"] == [r["p_faster_than_ar"] for r in rows], engine


def test_the_hardware_table_of_a_model_never_measured_is_built():
    """An exploratory pass: `report --model qwen3-8b` on a fit of several models (a card, no
    rows) crashed with IndexError after the work: the table's GPU count came from the model's
    measured systems only. Per GPU it is now the fewest of 1, 2, 4, 8 holding the weights
    (a review: one count for all left a large card-only model an error on every GPU)."""
    from ddtree_bayes.engine.testing import multi_model_draws
    from ddtree_bayes.workflows.report.sections import decisions_section

    out = decisions_section(multi_model_draws(), seed=1, model="qwen3-8b")
    gpus = {r["hardware"]: r["gpus"] for r in out["hardware"]}
    # Qwen3-8B: 8.19B parameters at 2 bytes = 16.4 GB: one 24 GB RTX 4090, two 16 GB RTX 4080
    assert (gpus["rtx-4090"], gpus["rtx-4080"], gpus["h100"]) == (1, 2, 1)
    assert all("error" not in r for r in out["hardware"] if r["hardware"] in gpus)
    kimi = decisions_section(multi_model_draws(), seed=1, model="kimi-k2.6")
    assert {r["gpus"] for r in kimi["hardware"]} == {8}   # its measured count


def test_the_budget_table_flags_an_extrapolated_acceptance_as_optimize_does():
    """The report's "Which tree budget?" table flagged only the step as extrapolated: budget
    8, below the acceptance curve's reference budget 16 and the budget with the highest
    P(best) on the bundled fit, showed a blank cell where `optimize` says "accept"."""
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report.render import budget_rows
    from ddtree_bayes.workflows.report.sections import decisions_section

    draws = point_mass_draws(n=400, noise_sd=0.05)
    opt = decisions_section(draws, 20261130)["optimize"]
    rows = {(r[0], r[1]): r[-1] for r in budget_rows(opt)}
    for engine, o in opt.items():
        for r in o["rows"]:
            assert rows[engine, r["budget"]] == "+".join(
                f for f, on in (("step", r["extrapolated"]), ("accept", r["accept_extrapolated"]))
                if on)
    assert rows["sglang", 8] == "accept"          # below the reference budget 16, M measured
    assert rows["sglang", 32] == "step"           # M = 33 beyond the measured 9


def test_large_numbers_in_the_tables_are_written_in_full():
    """The tables wrote every float to 3 significant digits: the posterior predictive check
    read context "1.64e+04" for a row at 16384 tokens (and "1.31e+05" for 131072), the
    transfer table memory "2.3e+03" GB for 8 x 288 GB, and a measured total of 3449.6 tok/s
    "3.45e+03" beside its interval "3412.5 - 3801.0"."""
    from ddtree_bayes.workflows.report.render import _fmt, _table

    html_table = _table(["context", "measured", "memory GB", "noise_sd"],
                               [[16384.0, 3449.6, 2304.0, 0.026093]])
    assert "<td>16384</td><td>3450</td><td>2304</td><td>0.0261</td>" in html_table
    assert [_fmt(x) for x in (131072.0, 999.4, 1000.0, -2048.0, float("inf"))] == [
        "131072", "999", "1000", "-2048", "inf"]


def test_the_next_section_names_the_acceptance_its_widths_are_at():
    """The "What to measure next" title named the query without its acceptance ("... budget
    32, verify 33, context 0"): its widths are of the query at acceptance 14 (`next` prints
    "query: ..., accept 14"), and a reader could not tell at which."""
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report.render import next_title
    from ddtree_bayes.workflows.report.sections import decisions_section

    dec = decisions_section(point_mass_draws(n=400, noise_sd=0.05), 20261130)
    assert dec["next"]["query"]["accept"] == "14"
    assert next_title(dec) == ("What to measure next for b300 x8, native, ddtree, block 16, "
                               "budget 32, verify 33, context 0, accept 14")


def test_a_parameter_constant_over_the_draws_is_not_diagnosed_as_sensitivity_free():
    """The prior sensitivity table read "compute_eff_log_sd | prior nan / likelihood nan: ✓"
    for the seven fixed scales of the bundled fit (0.4, 1, 0.5, ... in every draw): ArviZ's
    psense_summary gives a constant NaN and diagnoses NaN as "✓", a check of nothing, and
    summary.json held the bare NaN (not JSON). Such a row now says what it is, with null."""
    import arviz_stats as azs
    import xarray as xr

    from ddtree_bayes.workflows.report.render import psense_table_rows
    from ddtree_bayes.workflows.report.summary import psense_overall

    rng = np.random.default_rng(0)
    post = xr.Dataset({"a": (("chain", "draw"), rng.normal(size=(2, 200))),
                       "fixed_sd": (("chain", "draw"), np.full((2, 200), 0.4))})
    tree = xr.DataTree.from_dict({
        "posterior": post,
        "log_prior": xr.Dataset({"a": (("chain", "draw"), -0.5 * post["a"].values ** 2)}),
        "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"),
                                            rng.normal(size=(2, 200, 3)))})})
    with np.errstate(all="ignore"):
        rows = psense_overall(azs.psense_summary(tree))
    assert [r["parameter"] for r in rows] == ["a", "fixed_sd"]
    assert rows[0]["prior"] == pytest.approx(0.118, abs=5e-4)
    assert rows[1] == {"parameter": "fixed_sd", "prior": None, "likelihood": None,
                       "diagnosis": "constant over the draws (a fixed value): nothing to "
                                    "power-scale"}
    json.dumps(rows, allow_nan=False)   # (the NaN was not JSON)
    assert psense_table_rows(rows)[1] == [
        "(all priors) fixed_sd", "constant over the draws (a fixed value): nothing to "
                                 "power-scale"]
    assert psense_table_rows(rows)[0][1].startswith("prior 0.118 / likelihood ")


def test_power_scaling_leaves_the_constant_parameters_out_of_arviz():
    """summary.json's library_notes held 56 "RuntimeWarning: invalid value encountered in
    scalar divide", shown nowhere else: ArviZ's psense_summary computes, per parameter, the
    cumulative Jensen-Shannon distance of its draws power-scaled down and up, by prior and by
    likelihood, for the draws and their negatives, and divides by the spread of the draws
    (arviz_stats/base/diagnostics.py _cjs_dist): 0 / 0 for a parameter constant over the
    draws, 4 warnings x 2 directions for each of the bundled fit's 7 fixed scales. Those are
    now said constant without asking ArviZ (the same rows, in the same place), so nothing is
    divided by 0."""
    import warnings

    import arviz_stats as azs
    import xarray as xr

    from ddtree_bayes.workflows.report.summary import power_scaling

    rng = np.random.default_rng(0)
    post = xr.Dataset({"fixed_sd": (("chain", "draw"), np.full((2, 200), 0.4)),
                       "a": (("chain", "draw"), rng.normal(size=(2, 200)))})
    tree = xr.DataTree.from_dict({
        "posterior": post,
        "log_prior": xr.Dataset({"a": (("chain", "draw"), -0.5 * post["a"].values ** 2)}),
        "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"),
                                            rng.normal(size=(2, 200, 3)))})})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        azs.psense_summary(tree)
    assert sum("invalid value encountered in scalar divide" in str(w.message)
               for w in caught) == 8    # (the cause, ArviZ's: one constant parameter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = power_scaling(tree)
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert rows[0] == {"parameter": "fixed_sd", "prior": None, "likelihood": None,
                       "diagnosis": "constant over the draws (a fixed value): nothing to "
                                    "power-scale"}
    assert rows[1]["parameter"] == "a" and rows[1]["prior"] == pytest.approx(0.118, abs=5e-4)
    assert len(rows) == 2


def test_pareto_k_is_flagged_above_the_threshold_compare_uses():
    """The report flagged Pareto k above a fixed 0.7, while `compare` (aab408f) counts above
    arviz-stats' min(1 - 1/log10(S), 0.7): for a fit of S = 400 draws that is 0.616, and the
    k = 0.65 and 0.69 of this synthetic tree (4 chains x 100 draws, k set by hand) were
    counted reliable by the report and unreliable by compare (report: 1 flagged, compare: 3).
    Now the report flags by the same threshold, stores it in summary.json
    (thresholds.pareto_k) and says it in the LOO section's title and column."""
    import arviz_stats as azs
    import xarray as xr

    from ddtree_bayes.engine.psis import khat_threshold
    from ddtree_bayes.workflows.report.render import _section_map
    from ddtree_bayes.workflows.report.summary import loo_summary

    rng = np.random.default_rng(0)
    ll = rng.normal(-1.0, 0.1, size=(4, 100, 5))
    dims = ("chain", "draw", "measurement")
    tree = xr.DataTree.from_dict({
        "posterior": xr.Dataset({"a": (("chain", "draw"), rng.normal(size=(4, 100)))}),
        "log_likelihood": xr.Dataset({"log_tok_s": (dims, ll)}),
        "observed_data": xr.Dataset({"log_tok_s": ("measurement", np.zeros(5))})})
    loo = azs.loo(tree, pointwise=True)
    loo.pareto_k.values[:] = [0.2, 0.65, 0.69, 0.75, 0.5]
    out = loo_summary(loo, ["2", "3", "4", "5", "6"], "row", np.linspace(0.1, 0.9, 5))
    assert out["pareto_k_threshold"] == pytest.approx(1 - 1 / np.log10(400))
    assert out["pareto_k_threshold"] == pytest.approx(khat_threshold(400))
    assert round(out["pareto_k_threshold"], 4) == 0.6157
    assert [k["flag"] for k in out["pareto_k"]] == [False, True, True, True, False]
    assert out["n_flagged"] == 3
    assert [k["row"] for k in out["pareto_k"]] == [2, 3, 4, 5, 6]

    summary = {"sampling": {"parameters": []}, "prior_posterior": [], "ppc": {"rows": []},
               "thresholds": {"pareto_k": out["pareto_k_threshold"]}, "loo": out,
               "psense": {"headline": "x", "headline_by_prior": {}, "overall": []},
               "fan": {"engines": {}, "accept": []}, "variance": {}, "breakdown": []}
    title, headers, rows, _ = _section_map(summary)["loo"]
    assert title.endswith(", 3 of 5 Pareto k > 0.62)")
    assert headers[2] == "k > 0.62" and [r[2] for r in rows] == ["no", "YES", "YES", "YES", "no"]


def _llama_chain():
    """The walkthrough's fit: a Llama-3.1-8B EAGLE-3 chain measured at 2.79 on one H100
    beside Kimi K2.6 (whose DDTree curve is the priors' [acceptance_curve])."""
    from ddtree_bayes.engine.testing import MULTI_DATA, multi_model_draws

    model = "llama-3.1-8b-instruct"
    return model, multi_model_draws().view(
        data_csv=MULTI_DATA + f"{model},h100,1,vllm,eagle3,4,,5,2.79,,225,test,\n")


def _small_summary(draws, model, **parts) -> dict:
    """The report's summary of the default sections alone (no sampler checks to show)."""
    from ddtree_bayes.engine.question import default_question
    from ddtree_bayes.workflows.report import sections

    d = default_question(draws, model)
    summary = {"fit_id": "f", "verdict": {"text": "Converged."},
               "sampling": {"parameters": []}, "prior_posterior": [], "ppc": {"rows": []},
               "loo": {"elpd": 0.0, "se": 0.0, "p_loo": 0.0, "n_flagged": 0, "pareto_k": [],
                       "loo_pit": []},
               "psense": {"headline": "x", "headline_by_prior": {}, "overall": []},
               "fan": sections.fan_section(draws, 1, model, d),
               "concurrency": sections.concurrency_section(draws, 1, model, d),
               "variance": {}, "breakdown": [],
               "decisions": sections.decisions_section(draws, 1, model, d),
               "default_scenario": {**d.to_json(), "derived": d.derived}}
    return {**summary, **parts}


def test_the_budget_section_says_the_curve_is_another_models():
    """optimize warns on stderr (and in its JSON's warnings) when [acceptance_curve] was
    written for another model; the report's "Which tree budget?" section said nothing of it
    for a Llama fit asked Kimi K2.6's DDTree curve."""
    from ddtree_bayes.workflows.report.render import _sections, markdown

    model, draws = _llama_chain()
    summary = _small_summary(draws, model)
    from ddtree_bayes.core import paths
    from ddtree_bayes.workflows.decisions import curve_priors_file

    # (the curve optimize asks: the fit's priors file's while it exists, here the bundled one)
    caveat = (f"the acceptance curve ([acceptance_curve] in {paths.shown(curve_priors_file(draws))}) "
              "was written for kimi-k2.6, not llama-3.1-8b-instruct: these acceptances are another "
              "model's prior; pass --acceptance-file with this drafter's measured acceptances")
    assert summary["decisions"]["optimize"]["vllm"]["warnings"][0] == caveat   # summary.json
    md = markdown(summary)
    title = next(t for t, *_ in _sections(summary) if "Which tree budget?" in t)
    budgets = md[md.index(f"## {title}"):]
    budgets = budgets[:budgets.index("\n## ")]
    assert f"Warning: {caveat}" in budgets
    # a Kimi fit asks Kimi's curve: no such line
    from ddtree_bayes.engine.testing import point_mass_draws

    kimi = _small_summary(point_mass_draws(), None)
    assert not any("was written for" in w for o in kimi["decisions"]["optimize"].values()
                   for w in o["warnings"])
    assert "was written for" not in markdown(kimi)


def test_the_answer_line_names_the_sections_it_points_to():
    """The answer line said "section 2 what the width comes from" where section 2 is the
    concurrency table and section 3 the variance shares: its numbers are the sections'."""
    from ddtree_bayes.workflows.report.render import _sections, headline

    model, draws = _llama_chain()
    summary = _small_summary(draws, model)
    titles = [t for t, *_ in _sections(summary)]
    assert titles[1].startswith("2. Several streams at once")
    assert titles[2] == "3. Where the width comes from"
    assert ". Section 1 has other acceptances, section 3 what the width comes from." in (
        headline(summary))
    # no sections to point to (a summary of the fan alone): no pointer
    assert "ection" not in headline({"fan": summary["fan"]})


def test_the_answer_line_of_a_model_says_what_the_fit_measured():
    """`report --model llama-3.1-8b-instruct` of a fit that measured Kimi K2.6 on b300 said
    "This fit never measured b300" at the top of the page (it did, for kimi-k2.6), and of a
    model measured autoregressive only called the bundled question's DDTree block 16 budget
    32 "its own most-measured configuration". The line says the default question's own why."""
    from ddtree_bayes.engine.testing import multi_model_draws
    from ddtree_bayes.workflows.report.render import headline

    model, draws = _llama_chain()
    line = headline(_small_summary(draws, model))
    assert "This fit never measured b300," not in line
    assert line.endswith(" The fit never measured b300 for llama-3.1-8b-instruct, so this "
                         "asks its own most-measured configuration; ask `ddtree-bayes "
                         "predict` about another.")
    ar_only = multi_model_draws()   # llama measured AR only: the bundled method and shape
    line = headline(_small_summary(ar_only, model))
    assert line.endswith(" The fit never measured b300 for llama-3.1-8b-instruct, nor any "
                         "speculative method for it: the bundled question's ddtree block 16 "
                         "budget 32, so this asks it on its own most-measured system; ask "
                         "`ddtree-bayes predict` about another. Its acceptance, 14, is assumed: "
                         "no acceptance was measured, inferred or given in the priors for it, so "
                         "`ddtree-bayes predict` refuses it without --accept (give your "
                         "drafter's).")
    # and the sections asked at it say so under their tables, not only the answer line
    from ddtree_bayes.workflows.report.render import section_notes

    notes = section_notes(_small_summary(ar_only, model))
    said = ("asked at acceptance 14, assumed: no acceptance was measured, inferred or given in "
            "the priors for this model (`ddtree-bayes predict --accept` asks your drafter's)")
    assert sorted(k for k, v in notes.items() if said in v) == ["concurrency", "hardware",
                                                                "next", "variance"]
    assert not any(said in v for v in section_notes(_small_summary(draws, model)).values())


def test_the_reports_priors_are_the_fits_forms_not_the_files():
    """`fit --step-form fraction` (or `--moe-form`) overrides the priors file's forms: the
    report's prior draws and log prior take the fit's forms. The point-mass fit is a linear,
    fraction fit made with the bundled (roofline, structured) file; the prior of its
    overhead_logit_mu is normal(-1.1, 0.75)."""
    from ddtree_bayes.engine.testing import point_mass_draws

    draws = point_mass_draws()
    assert (draws.priors.moe_form, draws.priors.step_form) == ("roofline", "structured")
    priors = report.fit_priors(draws)
    assert (priors.moe_form, priors.step_form) == ("linear", "fraction")
    coords = draws.meta["coords"]
    prior = report.prior_draws(priors, coords, 100_000, seed=1)
    assert "overhead_frac" in prior and "spec_fixed_ratio" not in prior
    assert np.quantile(prior["overhead_logit_mu"], [0.05, 0.95]) == pytest.approx(
        [-1.1 - 1.645 * 0.75, -1.1 + 1.645 * 0.75], abs=0.01)
    x = prior["overhead_logit_mu"][:5]
    lp = report.log_prior(priors, coords, {k: a[:5] for k, a in prior.items()})
    assert "spec_fixed_log_mu" not in lp and "overhead_z" in lp
    assert lp["overhead_logit_mu"] == pytest.approx(
        -np.log(0.75 * np.sqrt(2 * np.pi)) - 0.5 * ((x + 1.1) / 0.75) ** 2)


@pytest.mark.nuts
def test_a_report_of_a_fit_of_another_step_form_than_the_priors_file(tmp_path, capsys,
                                                                       monkeypatch):
    """`fit --step-form fraction` beside a priors file of the structured form: `report`
    ended in "internal error: KeyError: 'spec_fixed_log_mu'"."""
    from test_cli_support import copy_bundled_data

    copy_bundled_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "--step-form", "fraction", "--quiet"]) == 0
    capsys.readouterr()
    assert cli.main(["report", "--quiet"]) == 0
    summary = json.loads(next((tmp_path / "reports").glob("*/summary.json")).read_text())
    assert "figure_errors" not in summary
    rows = {r["parameter"]: r for r in summary["prior_posterior"]}
    # normal(-1.1, 0.75): 5% and 95% at -1.1 -+ 1.645 x 0.75 (4000 prior draws)
    assert rows["overhead_logit_mu"]["prior_q"][0] == pytest.approx(-2.334, abs=0.06)
    assert rows["overhead_logit_mu"]["prior_q"][4] == pytest.approx(0.134, abs=0.06)
    assert "overhead_frac[b300x8/sglang/ddtree]" in rows
    assert not [k for k in rows if k.startswith("spec_")]
    assert {"overhead_logit_mu", "overhead_z"} <= set(summary["psense"]["headline_by_prior"])


def test_the_hardware_sections_question_names_block_and_budget_as_predict_asks_it():
    """The bundled default is DDTree block 16, budget 32 at acceptance 14: its column read
    "DDTree b32 accept 14", which in the notation of a fit's own default and of `diff`'s
    tracked queries (b block / B budget) is block 32. The point mass: 14 tokens per 20 ms
    step, 700 tok/s in sglang."""
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report import sections

    dec = sections.decisions_section(point_mass_draws(), 1)
    assert dec["hardware_query"] == "sglang ddtree b16/B32 accept 14"
    assert dec["hardware"][0]["hardware"] == "b300"
    assert dec["hardware"][0]["ddtree"] == pytest.approx([700.0, 700.0, 700.0])


def test_the_hardware_caption_says_the_gpus_that_cannot_hold_the_weights_are_left_out(
        monkeypatch, tmp_path):
    """The section refuses a GPU count whose memory cannot hold the model's weights (Kimi
    K2.6's 600 GB on 8 x rtx-5090, 256 GB): its table row is "-" and the figure leaves it out.
    The caption said "Memory capacity is not checked"."""
    from ddtree_bayes.workflows.report import figures
    from ddtree_bayes.workflows.report.render import CAPTIONS

    assert "not checked" not in CAPTIONS["hardware"]
    assert "cannot hold the model's weights" in CAPTIONS["hardware"]
    figs = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: figs.append(fig))
    rows = [{"hardware": "b300", "gpus": 8, "measured": True, "ar": [1.0, 2.0, 3.0],
             "ddtree": [4.0, 5.0, 6.0]},
            {"hardware": "rtx-5090", "gpus": 8, "memory_gb_total": 256.0,
             "error": "kimi-k2.6's weights (600.0 GB) do not fit in 8 x rtx-5090 (256.0 GB)"}]
    figures.hardware({"decisions": {"hardware": rows,
                                    "hardware_query": "sglang ddtree b16/B32 accept 14"}},
                     None, None, tmp_path / "hardware.png")
    labels = [t.get_text() for t in figs[0].axes[0].get_yticklabels()]
    assert labels == ["b300 x8"]


def test_the_variance_figure_says_shapley_shares_not_explained_alone(monkeypatch, tmp_path):
    """The shares are Shapley values of R^2 (a * x + b * x for one x shared by two factors
    splits it half and half, each factor explaining all of it alone): the axis read "share of
    variance explained alone"."""
    from ddtree_bayes.workflows.report import figures

    figs = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: figs.append(fig))
    x = np.random.default_rng(0).normal(size=1000)
    dec = report.shapley_variance_shares(2 * x, {"a": x, "b": x})
    assert dec["shares"] == pytest.approx({"a": 0.5, "b": 0.5})   # each alone: R^2 = 1
    figures.variance({"variance": {"sglang": {"var_log_tok_s": float(np.var(2 * x)),
                                              "shares": dec["shares"]}}},
                     None, None, tmp_path / "variance.png")
    assert figs[0].axes[0].get_xlabel() == "share of Var(log tok/s) (Shapley value of R^2)"


def test_the_hardware_section_names_the_amd_gpus_priced_without_a_learned_amd_term():
    """The hardware table priced the speculative column of the table's six AMD GPUs (gfx
    targets: mi355x, mi250x, mi300x, mi325x, rx-7900-xtx, rx-7900-xt) without a word, where
    `predict` on any of them warns that a fit with no AMD speculative row prices the overhead
    from CUDA deployments. The section says it once under its table, naming them; the NVIDIA
    rows are not named."""
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import section_notes

    dec = sections.decisions_section(point_mass_draws(), 1)
    (line,) = dec["hardware_warnings"]
    assert line.startswith(
        "sglang ddtree b16/B32 accept 14 on mi355x, mi250x, mi300x, mi325x, rx-7900-xtx, "
        "rx-7900-xt: each is an AMD GPU and the fit measured no speculative row on one: the "
        "speculative overhead is priced from CUDA deployments with no AMD term (the fit's "
        "fraction step form has none)")
    assert section_notes({"decisions": dec})["hardware"] == [line]


def test_a_report_of_a_stale_fit_says_so_as_predict_does(tmp_path, monkeypatch, capsys):
    """A trust pass: after a row was added to data/measurements.csv, `predict` warns
    "data/measurements.csv changed since fit ...; run `ddtree-bayes update` ...", but
    `report` of the same fit printed "converged: every gate passed", exit 0, and its page,
    whose answer line and budget / next / hardware sections answer from that fit, said
    nothing of it. The same warnings (the acceptance curve aside: the budget section says
    its own) go to stderr, under the page's verdict and into summary.md / summary.json."""
    import importlib

    from test_cli_support import make_point_mass_workdir

    render = importlib.import_module("ddtree_bayes.workflows.report.render")
    work = make_point_mass_workdir(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    with open(data, "a") as fh:
        fh.write("kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,140.0,a new run,\n")
    line = (f"{data.resolve()} changed since fit 20260101T000000Z-pointmss; run "
            "`ddtree-bayes update` (or `fit`) to use it")
    # the sampling-heavy parts left out (a point mass has too few draws for PSIS-LOO):
    # what is checked is which warnings reach the summary, the page and stderr
    made = _report_summary_only(monkeypatch)
    monkeypatch.chdir(work)
    assert cli.main(["report", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("converged: every gate passed\n")
    assert err == f"ddtree-bayes: warning: {line}\n"
    assert made["stale"] == [line]
    page = render.page(made, {})
    verdict = "<p class='verdict ok'>converged: every gate passed</p>"
    assert f"{verdict}\n<p class='warning'>Warning: {line}</p>" in page
    assert render.markdown(made).startswith(f"# ddtree-bayes fit 20260101T000000Z-pointmss\n\n"
                                            f"**converged: every gate passed**\n\n"
                                            f"Warning: {line}\n")
    # the files the fit was made on, unchanged: nothing to say
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:-1]))
    assert cli.main(["report", "--quiet"]) == 0
    assert capsys.readouterr().err == "" and made["stale"] == []
    assert "class='warning'" not in render.page(made, {})


@pytest.mark.filterwarnings("ignore:The 'phony_dims' kwarg")   # (an h5py-written test fit)
def test_a_fit_of_several_models_without_model_is_refused_before_the_diagnostics(
        tmp_path, monkeypatch):
    """A walkthrough (helper u): `report` of a fit of two models spent its diagnostics (~6 s
    on a real fit) before refusing for want of --model. It is refused before any of it."""
    import importlib

    from ddtree_bayes.engine.testing import multi_model_draws
    from test_cli_support import make_point_mass_workdir, run_cli, write_point_mass_fit

    render = importlib.import_module("ddtree_bayes.workflows.report.render")

    work = make_point_mass_workdir(tmp_path / "w")
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                         work / "models" / "priors.toml", work / "data" / "hardware.csv",
                         draws=multi_model_draws(n=64), jitter=0.01)

    def no_diagnostics(*args, **kwargs):
        raise AssertionError("the diagnostics ran before the refusal")

    monkeypatch.setattr(render, "compute", no_diagnostics)
    code, out, err = run_cli(work, "report", "--quiet")
    assert code == 2 and out == ""
    assert err.strip().endswith("holds 2 models (kimi-k2.6, llama-3.1-8b-instruct); say which "
                                "with --model (fix: e.g. --model kimi-k2.6)")
    assert not (work / "reports").exists()


def test_the_answer_lines_width_pointer_names_the_question_the_shares_decompose():
    """summary.md's answer line is at acceptance 14 and pointed at "section 3 what the width
    comes from", whose shares decompose acceptance U(12,16) (an acceptance factor a user at 14
    does not have): the pointer and the section's title name the question decomposed."""
    from ddtree_bayes.engine.question import default_question
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report import sections
    from ddtree_bayes.workflows.report.render import markdown

    draws = point_mass_draws()
    summary = _small_summary(draws, None, variance=sections.variance_shares(
        draws, 1, None, default_question(draws, None)))
    assert {tuple(d["accept"]) for d in summary["variance"].values()} == {(12.0, 16.0)}
    assert any(k.startswith("acceptance U(12,16)") for k in summary["variance"]["sglang"]["shares"])
    md = markdown(summary)
    answer = next(line for line in md.splitlines() if line.startswith("Default scenario"))
    assert " at acceptance 14: " in answer
    number = next(line for line in md.splitlines() if "Where the width" in line).split(".")[0]
    assert f"section {number.removeprefix('## ')} what the width of acceptance U(12,16) comes " \
           "from." in answer
    assert f"{number}. Where the width comes from (acceptance U(12,16))" in md
    # a fit's own default (Llama's chain measured at 2.79) decomposes its acceptance +-2
    model, llama = _llama_chain()
    d = default_question(llama, model)
    own = _small_summary(llama, model, variance=sections.variance_shares(llama, 1, model, d))
    (lo, hi), = {tuple(v["accept"]) for v in own["variance"].values()}
    assert lo == 1.0 and hi == pytest.approx(4.79)   # 2.79 - 2 floored at 1; + 2 (block 4)
    assert f"what the width of acceptance U(1,{hi:g}) comes from." in markdown(own)


def test_the_budget_section_shows_the_expected_tok_s_its_recommendation_ranks_by(
        monkeypatch, tmp_path):
    """A trust pass (round 7): the report's "Which tree budget?" section recommended budget
    16 on the bundled fit ("highest expected tok/s" as `optimize` says: E[tok/s] 560 against
    539 at budget 8) while its table showed only the medians (589 at budget 8, 559 at 16) and
    P(best) (0.49 and 0.44), and its figure plotted those medians on an axis labelled
    "expected tok/s": on the page budget 8 looked best by every figure shown. The table
    carries `optimize`'s E[tok/s] column and the figure plots it beside the medians, on an
    axis that says tok/s."""
    from ddtree_bayes.workflows.report import figures
    from ddtree_bayes.workflows.report.render import budget_rows

    # the bundled fit's figures (report of fit 20261207T070424Z-3bd953e0, sglang)
    rows = [{"budget": 8, "verify_tokens": 9, "median": 589.3, "lo90": 317.0, "hi90": 639.1,
             "tok_s_mean": 539.2, "p_best": 0.4875, "regret": 37.6, "extrapolated": False,
             "accept_extrapolated": True},
            {"budget": 16, "verify_tokens": 17, "median": 559.4, "lo90": 321.0, "hi90": 806.0,
             "tok_s_mean": 560.1, "p_best": 0.443, "regret": 17.0, "extrapolated": True,
             "accept_extrapolated": False}]
    opt = {"sglang": {"rows": rows, "recommended": 16}}
    assert budget_rows(opt) == [
        ["sglang", 8, 9, 589, "317-639", 539, 0.4875, 37.6, "accept"],
        ["sglang", 16, 17, 559, "321-806", 560, 0.443, 17.0, "step"]]

    figs = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: figs.append(fig))
    figures.budgets({"decisions": {"optimize": opt}}, None, None, tmp_path / "budgets.png")
    ax = figs[0].axes[0]
    assert ax.get_ylabel() == "tok/s"
    lines = {ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()}
    assert lines["sglang E[tok/s] (recommended: budget 16)"] == [539.2, 560.1]
    assert lines["sglang median tok/s"] == [589.3, 559.4]


def test_a_report_says_when_a_systems_compute_eff_median_exceeds_1(tmp_path, monkeypatch,
                                                                    capsys):
    """The report said nothing of a system whose compute_eff (the share of the dense peak at
    the card's compute precision a verify pass reaches) sat above 1, as the corpus's syv-ai
    RTX 3090 did at 1.09: a pass cannot beat its peak, so the card's precision is likely not
    the deployment's. Eight draws 0.9 ... 1.6 by 0.1: median (1.2 + 1.3) / 2 = 1.25 by hand;
    said on stderr, in the JSON's warnings, under the verdict of the page and summary.md."""
    import html
    import importlib

    from ddtree_bayes.engine.testing import point_mass_draws
    from test_cli_support import make_point_mass_workdir

    render = importlib.import_module("ddtree_bayes.workflows.report.render")
    pm = point_mass_draws(n=8)
    pm.variables["compute_eff"] = np.array([[0.9 + 0.1 * i] for i in range(8)])
    work = make_point_mass_workdir(tmp_path / "w", n=8, draws=pm)
    line = ("compute_eff[b300x8] median 1.25 > 1: its verify passes beat the dense peak at the "
            "card's compute precision, so that precision is likely not the deployment's (check "
            "the card's compute_dtype)")
    made = _report_summary_only(monkeypatch)
    monkeypatch.chdir(work)
    assert cli.main(["report", "--quiet", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert err == f"ddtree-bayes: warning: {line}\n"
    assert json.loads(out)["warnings"] == [line]
    assert made["above_peak"] == [line]
    verdict = "<p class='verdict ok'>converged: every gate passed</p>"
    assert (f"{verdict}\n<p class='warning'>Warning: {html.escape(line)}</p>"
            in render.page(made, {}))
    assert f"**converged: every gate passed**\n\nWarning: {line}\n" in render.markdown(made)


def test_an_acceptance_is_shown_by_one_rule_in_the_fan_and_in_predict():
    """The report's fan table printed its acceptance to 3 significant digits (_fmt), predict's
    measured label likewise ("12.2 measured"), where the report's answer line and concurrency
    section show it with core/data accept_shown (2 decimals): a configuration measured at a
    mean of 12.25 read 12.2 in the table under an answer line saying 12.25. One rule now:
    accept_shown, 12.25 by hand, in predict and in the fan."""
    from ddtree_bayes.core.data import accept_shown
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.posterior import Fit
    from ddtree_bayes.engine.question import Flags, resolve
    from ddtree_bayes.engine.testing import point_mass_draws

    d = point_mass_draws()
    data = d.data_csv + "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,12.25,,700,test,\n"
    fit = Fit(path=d.path, meta=d.meta, variables=d.variables, data_csv=data,
              priors_toml=d.priors_toml, hardware_csv=d.hardware_csv)
    (row,) = P.predict_rows(fit, resolve(fit, Flags(engines=("sglang",))))
    assert row["accept"] == "12.25 measured (1 row)"
    from ddtree_bayes.workflows.report.render import fan_table_rows

    fan = {"accept": [12.0, 12.25], "headline_accept": 12.25,
           "engines": {"sglang": {"quantiles": [[1, 2, 3, 4, 5], [2, 3, 4, 5, 6]],
                                  "original": None}}}
    assert [r[1] for r in fan_table_rows(fan)] == ["12", "12.25"] == [
        accept_shown(12.0), accept_shown(12.25)]


def test_report_model_names_only_that_models_systems_above_the_peak(tmp_path, monkeypatch,
                                                                     capsys):
    """`report --model kimi-k2.6` of a fit of Kimi on 8x B300 and Llama-3.1-8B on one H100
    said "compute_eff[llama-3.1-8b-instruct@h100x1] median 1.25 > 1" under a report of Kimi:
    a system of the other model. With --model, only that model's systems are named. Llama's
    eight draws 0.9 ... 1.6 by 0.1: median 1.25 by hand; Kimi's all 0.5."""
    from ddtree_bayes.engine.testing import multi_model_draws
    from test_cli_support import make_multi_model_workdir

    pm = multi_model_draws(8)
    pm.variables["compute_eff"] = np.array([[0.5, 0.9 + 0.1 * i] for i in range(8)])
    work = make_multi_model_workdir(tmp_path / "w", pm)
    made = _report_summary_only(monkeypatch)
    monkeypatch.chdir(work)
    assert cli.main(["report", "--quiet", "--model", "kimi-k2.6", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert "compute_eff" not in err and json.loads(out)["warnings"] == []
    assert made["above_peak"] == []
    line = ("compute_eff[llama-3.1-8b-instruct@h100x1] median 1.25 > 1: its verify passes beat "
            "the dense peak at the card's compute precision, so that precision is likely not "
            "the deployment's (check the card's compute_dtype)")
    assert cli.main(["report", "--quiet", "--model", "llama-3.1-8b-instruct",
                     "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["warnings"] == [line] and made["above_peak"] == [line]
    assert err == f"ddtree-bayes: warning: {line}\n"


def test_the_default_questions_predictive_is_drawn_once_per_scenario(monkeypatch):
    """The answer line's warnings ran predict's question again beside the fan, which had just
    drawn the same posterior predictive, and the concurrency figure's C = 1 drew it a third
    time. Now each scenario's draws are computed once and shared (one memo): the default
    question's 2 engines at C = 1 (fan), nothing more for the warnings, and the figure's other
    7 concurrencies of each engine plus AR's 8: 2 + 14 + 8 = 24 draws of the predictive, where
    drawing each anew made 2 + 2 + 24 = 28. The sections' numbers and words are the same."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.testing import point_mass_draws
    from ddtree_bayes.workflows.report import sections

    draws = point_mass_draws(n=400, noise_sd=0.05)
    calls: list = []
    real = P._per_token
    monkeypatch.setattr(P, "_per_token", lambda *a: calls.append(a[2]) or real(*a))
    shared = sections.default_answer(draws, 20261130)
    assert len(calls) == 2 + 2 * 7 + 8 == 24
    assert sorted({sc.engine for sc in calls if sc.concurrency == 1
                   and sc.method != "ar"}) == ["native", "sglang"]
    calls.clear()
    apart = {"fan": sections.fan_section(draws, 20261130),
             "answer_warnings": sections.answer_warnings(draws, 20261130),
             "concurrency": sections.concurrency_section(draws, 20261130)}
    assert len(calls) == 2 + 2 + 24
    assert shared == apart
    warned: list[str] = []
    P.predict(draws, seed=20261130, warnings=warned)
    assert shared["answer_warnings"] == list(dict.fromkeys(warned))


def test_the_next_section_shows_the_drafter_column_next_prints():
    """`next` prints a drafter column (the card whose roofline prices each candidate's drafter
    passes: ``pass_drafter`` in its JSON and in the report's summary.json), and the report's
    "What to measure next" table (summary.md, the page) left it out. The same cell as
    `next`'s: the card, ``generic`` where no card serves the method, ``-`` where nothing is
    priced (AR, the fraction step form)."""
    from ddtree_bayes.workflows.decisions.next_measurement import drafter_cell
    from ddtree_bayes.workflows.report.render import _section_map

    rows = [{"candidate": "b300 x8 sglang ddtree block 16 budget 32 M=33", "why": "the query",
             "expected_width": 120.4, "reduction_rel": 0.25, "ess_median": 812.0,
             "pass_drafter": "z-lab/Kimi-K2.6-DDTree"},
            {"candidate": "b300 x8 sglang eagle3 block 3 M=4", "why": "a chain",
             "expected_width": 130.0, "reduction_rel": 0.1, "ess_median": 900.0,
             "pass_drafter": None},
            {"candidate": "b300 x8 sglang ar", "why": "AR", "expected_width": 140.6,
             "reduction_rel": 0.0, "ess_median": 1000.0}]
    summary = {"sampling": {"parameters": []}, "prior_posterior": [], "ppc": {"rows": []},
               "loo": {"elpd": 0.0, "se": 0.0, "p_loo": 0.0, "n_flagged": 0, "pareto_k": [],
                       "loo_pit": []},
               "psense": {"headline": "x", "headline_by_prior": {}, "overall": []},
               "fan": {"engines": {}, "accept": []}, "variance": {}, "breakdown": [],
               "decisions": {"next": {"query": {"describe": "b300 x8", "accept": "14"},
                                      "rows": rows}}}
    _, headers, body, _ = _section_map(summary)["next"]
    assert headers == ["candidate", "drafter", "why", "expected 90% width", "reduction", "ESS"]
    assert [r[1] for r in body] == ["z-lab/Kimi-K2.6-DDTree", "generic", "-"]
    assert [r[1] for r in body] == [drafter_cell(r) for r in rows]
    assert body[0] == ["b300 x8 sglang ddtree block 16 budget 32 M=33",
                       "z-lab/Kimi-K2.6-DDTree", "the query", 120, "25%", 812]


def _report_summary_only(monkeypatch) -> dict:
    """`report` with its sampling-heavy parts left out (a point mass has too few draws for
    PSIS-LOO; no figures or page): the summary it would render is collected in the dict
    returned, to check which warnings reach the summary, the page and stderr."""
    import importlib

    from ddtree_bayes.engine import compare

    render = importlib.import_module("ddtree_bayes.workflows.report.render")
    made: dict = {}
    monkeypatch.setattr(compare, "require_psis_draws", lambda *a: None)
    monkeypatch.setattr(store, "load_datatree", lambda path, handle=None: None)
    monkeypatch.setattr(render, "compute", lambda draws, dt, **kw: {
        "fit_id": draws.meta["fit_id"],
        "verdict": {"converged": True, "failures": [], "text": "converged: every gate passed"}})
    monkeypatch.setattr(render, "render_whole",
                        lambda summary, draws, out_dir, dt=None: made.update(summary))
    return made

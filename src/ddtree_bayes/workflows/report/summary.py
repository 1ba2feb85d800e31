"""Diagnostics and pictures for one fit: compute a summary first, render it second.

``compute(fit)`` returns a plain dict (the content of ``summary.json``); ``render``
draws the figures from that dict and writes ``index.html`` and ``summary.md``. Every
number on the page comes from the summary, which the tests check against the posterior.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import json
import logging
import math
import time
import warnings
from pathlib import Path

import numpy as np

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import (
    DEFAULT_SCENARIO,
    DEFAULT_SEED,
    MAX_DIVERGENCES,
    MAX_RHAT,
    MIN_ESS_BULK,
    Prior,
    PriorsConfig,
    parse_priors,
)
from ddtree_bayes.core.errors import DDTreeBayesError, QueryError
from ddtree_bayes.core.sampling import prior_sample
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.store import Draws

#: Pareto k above this makes a PSIS-LOO estimate unreliable.
PARETO_K_LIMIT = 0.7
#: Acceptance grid of the fan chart.
FAN_ACCEPT = tuple(float(a) for a in range(1, 21))
#: Acceptance range used for the variance decomposition (the original question).
DECOMP_ACCEPT = (12.0, 16.0)
#: Posterior sd / prior sd below which a parameter counts as informed by the data.
INFORMED_RATIO = 0.5
PRIOR_ONLY_RATIO = 0.9


# ------------------------------------------------------------------ priors as numpy
def prior_logpdf(prior: Prior, x: np.ndarray) -> np.ndarray:
    """Log density of one prior at ``x`` (elementwise)."""
    from scipy import stats

    p, d = prior.params, prior.dist
    if d == "normal":
        return stats.norm.logpdf(x, p["mu"], p["sigma"])
    if d == "halfnormal":
        return stats.halfnorm.logpdf(x, scale=p["sigma"])
    if d == "lognormal":
        return stats.lognorm.logpdf(x, s=p["sigma"], scale=p["median"])
    if d == "beta":
        return stats.beta.logpdf(x, p["alpha"], p["beta"])
    if d == "uniform":
        return stats.uniform.logpdf(x, p["lower"], p["upper"] - p["lower"])
    raise ValueError(f"no log density for prior {prior.name} ({d})")


def prior_draws(priors: PriorsConfig, coords: dict, n: int, seed: int) -> dict[str, np.ndarray]:
    """Prior draws of every posterior variable (same names and shapes as the posterior)."""
    rng = np.random.default_rng(seed)
    P_ = priors.priors
    n_sys, n_grp = len(coords["system"]), len(coords["overhead_group"])
    out: dict[str, np.ndarray] = {}
    for name in ("step_ar_ms", "moe_share", "ctx_ms_per_unit"):
        out[name] = np.stack([prior_sample(P_[name], n, rng) for _ in range(n_sys)], axis=1)
    for name in ("moe_hw_sd", "ctx_verify_exponent", "overhead_logit_mu", "overhead_logit_sd",
                 "noise_sd"):
        out[name] = prior_sample(P_[name], n, rng)
    out["moe_z"] = rng.standard_normal((n, n_sys))
    if priors.moe_form == "power":
        out["moe_exponent_mu"] = prior_sample(P_["moe_exponent_mu"], n, rng)
        out["moe_exponent"] = out["moe_exponent_mu"][:, None] + out["moe_hw_sd"][:, None] * out["moe_z"]
    else:
        out["moe_slope_mu"] = prior_sample(P_["moe_slope_mu"], n, rng)
        out["moe_slope"] = out["moe_slope_mu"][:, None] * np.exp(out["moe_hw_sd"][:, None] * out["moe_z"])
    out["overhead_z"] = rng.standard_normal((n, n_grp))
    logit = out["overhead_logit_mu"][:, None] + out["overhead_logit_sd"][:, None] * out["overhead_z"]
    out["overhead_frac"] = 1.0 / (1.0 + np.exp(-logit))
    out["reduction"] = np.stack([prior_sample(priors.relations[e].prior, n, rng)
                                 for e in coords["relation"]], axis=1) if coords["relation"] \
        else np.zeros((n, 0))
    return out


def log_prior(priors: PriorsConfig, coords: dict, v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Log prior density of each free parameter at every draw (for power-scaling)."""
    from scipy import stats

    P_ = priors.priors
    out = {}
    for name in ("step_ar_ms", "moe_share", "ctx_ms_per_unit"):
        out[name] = prior_logpdf(P_[name], v[name]).sum(axis=1)
    mu_name = "moe_exponent_mu" if priors.moe_form == "power" else "moe_slope_mu"
    for name in ("moe_hw_sd", "ctx_verify_exponent", "overhead_logit_mu", "overhead_logit_sd",
                 "noise_sd", mu_name):
        out[name] = prior_logpdf(P_[name], v[name])
    out["moe_z"] = stats.norm.logpdf(v["moe_z"]).sum(axis=1)
    if coords["overhead_group"]:
        out["overhead_z"] = stats.norm.logpdf(v["overhead_z"]).sum(axis=1)
    for k, e in enumerate(coords["relation"]):
        out[f"reduction_{e}"] = prior_logpdf(priors.relations[e].prior, v["reduction"][:, k])
    return out


# ------------------------------------------------------------------ helpers
def scalar_columns(v: dict[str, np.ndarray], coords: dict) -> dict[str, np.ndarray]:
    """Flatten vector parameters into labelled scalars: ``moe_share[b300x8]``."""
    dims = {"step_ar_ms": "system", "moe_share": "system", "ctx_ms_per_unit": "system",
            "moe_z": "system", "moe_exponent": "system", "moe_slope": "system",
            "overhead_z": "overhead_group", "overhead_frac": "overhead_group",
            "reduction": "relation"}
    out = {}
    for name, arr in v.items():
        if arr.ndim == 1:
            out[name] = arr
        else:
            for j, label in enumerate(coords[dims[name]]):
                out[f"{name}[{label}]"] = arr[:, j]
    return out


def shapley_variance_shares(y: np.ndarray, factors: dict[str, np.ndarray]) -> dict:
    """Split Var(y) among correlated factors: Shapley values of a linear regression's R^2.

    Regress ``y`` on every subset of the factors; factor j's share is its marginal R^2 gain
    averaged over all orders of adding factors (Lindeman-Merenda-Gold). The shares sum to
    the full model's R^2 exactly, whatever the correlation between factors (a first-order
    Sobol index would double-count correlated factors), and ``1 - R^2`` is what a linear
    fit cannot attribute (non-linearity and interactions).

    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(size=(2, 100_000))
    >>> out = shapley_variance_shares(3 * a + 4 * b, {"a": a, "b": b})
    >>> round(out["shares"]["a"], 2), round(out["shares"]["b"], 2), round(out["r2"], 3)
    (0.36, 0.64, 1.0)
    """
    names = list(factors)
    p = len(names)
    X = np.column_stack([factors[k] for k in names])
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    yc = y - y.mean()
    tss = float(yc @ yc)
    r2: dict[int, float] = {0: 0.0}
    for mask in range(1, 2 ** p):
        cols = [j for j in range(p) if mask >> j & 1]
        beta, *_ = np.linalg.lstsq(X[:, cols], yc, rcond=None)
        resid = yc - X[:, cols] @ beta
        r2[mask] = 1.0 - float(resid @ resid) / tss if tss > 0 else 0.0
    fact = [math.factorial(k) for k in range(p + 1)]
    shares = {}
    for j, name in enumerate(names):
        total = 0.0
        for mask in range(2 ** p):
            if mask >> j & 1:
                continue
            k = bin(mask).count("1")
            total += fact[k] * fact[p - k - 1] / fact[p] * (r2[mask | 1 << j] - r2[mask])
        shares[name] = total
    return {"shares": shares, "r2": r2[2 ** p - 1]}


def _logit(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 1e-12, 1 - 1e-12)
    return np.log(x / (1 - x))


def _q(x: np.ndarray, probs=(0.05, 0.25, 0.5, 0.75, 0.95)) -> list[float]:
    return [float(v) for v in np.quantile(x, probs)]


# ------------------------------------------------------------------ compute
def compute(draws: Draws, dt=None, *, seed: int = DEFAULT_SEED) -> dict:
    """Every number of the report, as a JSON-ready dict."""
    import arviz_stats as azs
    import xarray as xr

    from ddtree_bayes.engine import store

    t0 = time.perf_counter()
    meta, v = draws.meta, draws.variables
    coords = meta["coords"]
    priors = parse_priors(draws.priors_toml, "priors stored in the fit")
    if priors.moe_form != meta["model"]["moe_form"]:  # fit --moe-form overrode the file
        import dataclasses

        priors = dataclasses.replace(priors, moe_form=meta["model"]["moe_form"])
    dt = dt if dt is not None else store.load_datatree(draws.path)
    n = draws.n_draws
    chains = int(dt["posterior"].sizes["chain"])
    summary: dict = {"fit_id": meta["fit_id"], "created_utc": meta.get("created_utc"),
                     "n_draws": n, "chains": chains, "seed": seed,
                     "sampler": meta.get("sampler"), "data": meta.get("data"),
                     "thresholds": {"max_rhat": MAX_RHAT, "min_ess_bulk": MIN_ESS_BULK,
                                    "max_divergences": MAX_DIVERGENCES,
                                    "pareto_k": PARETO_K_LIMIT}}

    # 1. sampling diagnostics
    stats_ds = dt["sample_stats"].to_dataset()
    diverging = np.asarray(stats_ds["diverging"].values).astype(bool)
    depth_var = next((k for k in ("maxdepth_reached", "reached_max_treedepth")
                      if k in stats_ds), None)
    saturation = float(np.asarray(stats_ds[depth_var].values).mean()) if depth_var else None
    bfmi = np.asarray(azs.bfmi(dt["sample_stats"].to_dataset())["energy"].values).reshape(-1) \
        if "energy" in stats_ds else np.array([])
    params = meta["diagnostics"]["parameters"]
    summary["verdict"] = {"converged": bool(meta["converged"]), "failures": meta["failures"],
                          "text": ("converged: every gate passed" if meta["converged"] else
                                   "NOT converged: " + "; ".join(meta["failures"]))}
    summary["sampling"] = {
        "parameters": params,
        "max_rhat": max(p["rhat"] for p in params),
        "min_ess_bulk": min(p["ess_bulk"] for p in params),
        "min_ess_tail": min(p["ess_tail"] for p in params),
        "divergences": int(diverging.sum()),
        "divergences_per_chain": [int(c) for c in diverging.sum(axis=1)],
        "ebfmi_per_chain": [float(b) for b in bfmi],
        "tree_depth_saturation": saturation,
    }

    # 2. prior vs posterior
    prior = prior_draws(priors, coords, n, seed)
    post_cols = scalar_columns({k: v[k] for k in prior if k in v}, coords)
    prior_cols = scalar_columns(prior, coords)
    shrink = []
    for name, post in post_cols.items():
        pr = prior_cols[name]
        ratio = float(np.std(post) / np.std(pr)) if np.std(pr) > 0 else float("nan")
        status = ("informed" if ratio < INFORMED_RATIO else
                  "prior-only" if ratio >= PRIOR_ONLY_RATIO else "weakly informed")
        shrink.append({"parameter": name, "prior_q": _q(pr), "posterior_q": _q(post),
                       "prior_sd": float(np.std(pr)), "posterior_sd": float(np.std(post)),
                       "sd_ratio": ratio, "status": status})
    summary["prior_posterior"] = shrink

    # 3. posterior predictive check of every measurement
    ppc = P.check_measurements(draws, seed=seed)
    for r in ppc:
        r["outside_90"] = not (r["lo90"] <= r["measured"] <= r["hi90"])
    summary["ppc"] = {"rows": ppc, "flagged": [r["row"] for r in ppc if r["outside_90"]]}

    # 4. PSIS-LOO with the pointwise log-likelihood of log tok/s
    from ddtree_bayes.engine.compare import loo_tree as make_loo_tree

    measurements = P.stored_measurements(draws)
    rows_label = [str(m.row) for m in measurements.rows]
    shape = (chains, n // chains, len(rows_label))
    loo_tree = make_loo_tree(draws, chains, seed)
    post_ds = dt["posterior"].to_dataset()
    with _quiet(summary):
        loo = azs.loo(loo_tree, pointwise=True)
        pit = np.asarray(azs.loo_pit(loo_tree)["log_tok_s"].values).reshape(-1)
    pareto_k = [float(k) for k in np.asarray(loo.pareto_k.values).reshape(-1)]
    summary["loo"] = {"elpd": float(loo.elpd), "se": float(loo.se), "p_loo": float(loo.p),
                      "pareto_k": [{"row": int(r), "k": k, "flag": k > PARETO_K_LIMIT}
                                   for r, k in zip(rows_label, pareto_k, strict=True)],
                      "n_flagged": int(sum(k > PARETO_K_LIMIT for k in pareto_k)),
                      "loo_pit": [float(x) for x in pit]}

    # 5. prior sensitivity (power-scaling): overall, and of the headline prediction
    lp = log_prior(priors, coords, v)
    headline = _headline_log_tok(draws, seed)
    post_plus = post_ds.assign(headline_log_tok_s=(("chain", "draw"), headline.reshape(shape[:2])))
    lp_ds = xr.Dataset({k: (("chain", "draw"), a.reshape(shape[:2])) for k, a in lp.items()})
    sens_tree = xr.DataTree.from_dict({"posterior": post_plus, "log_prior": lp_ds,
                                       "log_likelihood": loo_tree["log_likelihood"].to_dataset()})
    with _quiet(summary):
        overall = azs.psense_summary(sens_tree)
        by_prior = {k: float(np.asarray(
            azs.psense(sens_tree, var_names=["headline_log_tok_s"], group="prior",
                       group_var_names=[k])["headline_log_tok_s"].values)) for k in lp}
    summary["psense"] = {
        "overall": [{"parameter": str(idx), "prior": float(r["prior"]),
                     "likelihood": float(r["likelihood"]), "diagnosis": str(r["diagnosis"])}
                    for idx, r in overall.iterrows()],
        "headline_by_prior": by_prior,
        "headline": "log tok/s, default scenario, sglang, accept 14",
    }

    # 6. throughput fan chart, 7. variance decomposition, 8. step breakdown
    summary["fan"] = _fan(draws, seed)
    summary["variance"] = _variance(draws, seed)
    summary["breakdown"] = _breakdown(draws, measurements, seed)
    summary["decisions"] = _decisions(draws, seed)
    summary["compute_s"] = time.perf_counter() - t0
    return summary


@contextlib.contextmanager
def _quiet(summary: dict):
    """Keep ArviZ's warnings and printed advice out of the terminal; record them instead."""
    buf = io.StringIO()
    logger = logging.getLogger("arviz_stats")
    handler = logging.StreamHandler(buf)
    old_propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(buf):
            warnings.simplefilter("always")
            yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = old_propagate
    notes = summary.setdefault("library_notes", [])
    notes += [f"{w.category.__name__}: {w.message}" for w in caught]
    if buf.getvalue().strip():
        notes.append(" ".join(buf.getvalue().split()))


def _default_scenarios(draws: Draws):
    d = DEFAULT_SCENARIO
    return [P.resolve_scenario(draws, hardware=d.hardware, gpus=None, engine=e, method=d.method,
                               block=d.block, budget=d.budget, verify_tokens=None,
                               context_tokens=None) for e in d.engines]


def _headline_log_tok(draws: Draws, seed: int) -> np.ndarray:
    sc = _default_scenarios(draws)[0]
    step, _ = P.step_draws(draws, sc, np.random.default_rng(seed))
    return np.log(14.0 * 1000.0 / step)


def _fan(draws: Draws, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    seed_table = P.load_seed_table()
    engines = {}
    for sc in _default_scenarios(draws):
        step, _ = P.step_draws(draws, sc, rng)
        noise = np.exp(draws.variables["noise_sd"] * rng.standard_normal(draws.n_draws))
        per_token = 1000.0 / step * noise
        seed_step = P.seed_step_ms(seed_table, sc)
        engines[sc.engine] = {
            "scenario": sc.describe(),
            "quantiles": [_q(a * per_token) for a in FAN_ACCEPT],
            "original": None if seed_step is None else [a / seed_step * 1000 for a in FAN_ACCEPT],
            "original_points": [{"accept": float(r["accept_len"]), "tok_s": float(r["tok_s"])}
                                for r in seed_table
                                if r["kind"] == "deterministic estimate"
                                and r["engine"] == sc.engine and r["hardware"] == sc.hardware
                                and r["verify_tokens"] == str(sc.verify_tokens)],
        }
    measured = [{"accept": m.accept_len, "tok_s": m.tok_s,
                 "label": f"{m.engine} {m.method} M={m.verify_tokens}"}
                for m in P.stored_measurements(draws).rows
                if m.hardware == DEFAULT_SCENARIO.hardware]
    return {"accept": list(FAN_ACCEPT), "quantile_probs": [0.05, 0.25, 0.5, 0.75, 0.95],
            "engines": engines, "measured": measured}


def _variance(draws: Draws, seed: int) -> dict:
    """First-order variance shares of log tok/s in the default scenario, per engine."""
    v, coords = draws.variables, draws.meta["coords"]
    rng = np.random.default_rng(seed)
    out = {}
    for sc in _default_scenarios(draws):
        s = coords["system"].index(sc.system)
        step, how = P.step_draws(draws, sc, rng)
        accept = rng.uniform(*DECOMP_ACCEPT, draws.n_draws)
        eps = v["noise_sd"] * rng.standard_normal(draws.n_draws)
        y = np.log(accept * 1000.0 / step) + eps
        # regress on scales where the step formula is close to linear in log tok/s
        factors = {"acceptance U(12,16)": np.log(accept), "run-to-run noise": eps,
                   f"step_ar_ms[{sc.system}]": np.log(v["step_ar_ms"][:, s]),
                   f"moe_share[{sc.system}]": _logit(v["moe_share"][:, s])}
        shape_name = "moe_exponent" if "moe_exponent" in v else "moe_slope"
        factors[f"{shape_name}[{sc.system}]"] = v[shape_name][:, s]
        if sc.context_tokens > 0:
            factors[f"ctx_ms_per_unit[{sc.system}]"] = np.log(v["ctx_ms_per_unit"][:, s])
        base = draws.meta["model"]["relation_bases"].get(sc.engine, sc.engine)
        label = S.group_label(sc.system, base, sc.method)
        if label in coords["overhead_group"]:
            factors[f"overhead_frac[{label}]"] = _logit(
                v["overhead_frac"][:, coords["overhead_group"].index(label)])
        if sc.engine in coords["relation"]:
            factors[f"reduction[{sc.engine}]"] = _logit(
                v["reduction"][:, coords["relation"].index(sc.engine)])
        dec = shapley_variance_shares(y, factors)
        out[sc.engine] = {"var_log_tok_s": float(np.var(y)), "r2": dec["r2"],
                          "shares": dict(sorted(dec["shares"].items(), key=lambda kv: -kv[1])),
                          "not_attributed": 1.0 - dec["r2"]}
    return out


#: The query of the report's "what to measure next" section.
NEXT_QUERY = "--engine native --accept 14"


def _decisions(draws: Draws, seed: int) -> dict:
    """Best budget per default engine, next-measurement ranking for the default query,
    and every GPU of the hardware table (measured or transferred). A failure of one part
    is recorded, not raised: the rest of the report still renders."""
    from ddtree_bayes.core.config import parse_acceptance_curve
    from ddtree_bayes.core.data import load_hardware
    from ddtree_bayes.workflows import decisions as D

    out: dict = {}
    try:
        curve = parse_acceptance_curve(draws.priors_toml, "priors stored in the fit")
        if curve is None:
            raise QueryError("the priors have no [acceptance_curve]", fix="add one and re-fit")
        d = DEFAULT_SCENARIO
        out["optimize"] = {e: D.optimize(draws, curve, hardware=d.hardware, engine=e,
                                         block=d.block, seed=seed) for e in d.engines}
    except DDTreeBayesError as err:
        out["optimize_error"] = str(err)
    try:
        out["next"] = D.next_measurements(draws, D.parse_query(draws, NEXT_QUERY), seed=seed)
    except DDTreeBayesError as err:
        out["next_error"] = str(err)
    table = load_hardware("hardware table stored in the fit", text=draws.hardware_csv)
    gpus = sorted({int(s.rsplit("x", 1)[1]) for s in P.measured_systems(draws)})[0]
    rows = []
    for hw in table:
        try:
            ar = P.predict_rows(draws, hardware=hw, gpus=gpus, method="ar", engines=["sglang"],
                                accept="1", seed=seed)[0]
            d = DEFAULT_SCENARIO
            tree = P.predict_rows(draws, hardware=hw, gpus=gpus, engines=["sglang"],
                                  method=d.method, block=d.block, budget=d.budget, accept="14",
                                  seed=seed)[0]
        except DDTreeBayesError as err:
            rows.append({"hardware": hw, "gpus": gpus, "error": str(err)})
            continue
        rows.append({"hardware": hw, "gpus": gpus,
                     "measured": f"{hw}x{gpus}" in P.measured_systems(draws),
                     "interconnect": table[hw].get("interconnect", ""),
                     "memory_gb_total": _float(table[hw].get("memory_gb")) * gpus,
                     "ar": [ar["lo90"], ar["median"], ar["hi90"]],
                     "ddtree": [tree["lo90"], tree["median"], tree["hi90"]]})
    out["hardware"] = rows
    return out


def _float(text: str | None) -> float:
    try:
        return float(text or "nan")
    except ValueError:
        return float("nan")


def _breakdown(draws: Draws, measurements, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    configs = []
    for m in measurements.rows:
        sc = P.resolve_scenario(draws, hardware=m.hardware, gpus=m.gpus, engine=m.engine,
                                method=m.method, block=m.block, budget=m.budget,
                                verify_tokens=m.verify_tokens, context_tokens=m.context_tokens)
        configs.append((f"row {m.row}: {sc.system} {sc.engine} {sc.method} M={sc.verify_tokens} "
                        f"ctx={sc.context_tokens:g}", sc, m.step_ms))
    for sc in _default_scenarios(draws):
        configs.append((f"default: {sc.system} {sc.engine} {sc.method} M={sc.verify_tokens}", sc,
                        None))
    out = []
    for label, sc, measured in configs:
        parts, _ = P.step_components(draws, sc, rng)
        out.append({"config": label, "measured_step_ms": measured,
                    **{k: _q(a, (0.05, 0.5, 0.95)) for k, a in parts.items()}})
    return out


# ------------------------------------------------------------------ render
CAPTIONS = {
    "rank": "Rank plots: each chain's ranks should be uniform (flat bars); a chain "
            "sitting high or low means the chains disagree.",
    "trace": "Traces and per-chain densities: look for chains that overlap and wander "
             "without trends or stuck stretches.",
    "prior_posterior": "Prior (grey) against posterior (blue): where the blue is as wide as "
                       "the grey, the measurements did not inform that parameter.",
    "ppc": "Each measurement (black) against its posterior predictive 50% and 90% intervals; "
           "red points fall outside their 90% interval.",
    "loo": "Left: Pareto k per measurement (above the dashed line 0.7 the PSIS estimate is "
           "unreliable). Right: LOO-PIT values against the uniform they should follow.",
    "psense": "Power-scaling sensitivity of the default-scenario prediction to each prior: "
              "tall bars are the assumptions the headline number leans on.",
    "fan": "Throughput against acceptance for the default scenario: 50% and 90% bands per "
           "engine, the original deterministic estimate (dashed) with its +-30% band, and "
           "the measured B300 points.",
    "variance": "Share of the variance of log tok/s in the default scenario (acceptance "
                "Uniform(12, 16)) attributed to each quantity (Shapley values of R^2, so "
                "correlated parameters share credit): measure the tallest bars next.",
    "breakdown": "Posterior step time split into MOE, ATTN_BASE, context and SPEC (ms, "
                 "medians; whiskers: 90% interval of the whole step; diamonds: measured).",
    "budgets": "Expected tok/s against the tree budget (median, 90% band) per engine, with "
               "P(best) as bars: past the measured M the step time is extrapolated.",
    "next": "Expected width of the query's 90% interval after each candidate measurement "
            "(now: the dashed line): the shortest bar is the most informative benchmark.",
    "hardware": "Every GPU of the hardware table at the measured GPU count: measured systems "
                "(black) and systems predicted by hardware transfer (blue), AR and DDTree "
                "budget 32 at acceptance 14, 90% intervals. Memory capacity is not checked: "
                "compare the table's total memory with the model's weights.",
}


def render(summary: dict, draws: Draws | None, out_dir: Path, dt=None) -> dict[str, Path]:
    """Write figures, ``summary.json``, ``summary.md`` and ``index.html`` into ``out_dir``."""
    import matplotlib

    matplotlib.use("Agg")
    out_dir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Path] = {}
    if draws is not None:
        from ddtree_bayes.workflows.report import figures as F

        for name, fn in F.FIGURES.items():
            path = out_dir / f"{name}.png"
            try:
                fn(summary, draws, dt, path)
                figures[name] = path
            except Exception as err:  # noqa: BLE001 - one broken figure must not sink the report
                summary.setdefault("figure_errors", {})[name] = f"{type(err).__name__}: {err}"
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
    (out_dir / "summary.md").write_text(markdown(summary))
    (out_dir / "index.html").write_text(page(summary, figures))
    return figures


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(type(x))


def _fmt(x, digits=3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        return f"{x:.{digits}g}"
    return str(x)


def _table(headers, rows) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(figures, name) -> str:
    if name not in figures:
        return f'<p class="missing">figure {name} could not be drawn</p>'
    data = base64.b64encode(figures[name].read_bytes()).decode()
    return (f'<figure><img alt="{name}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(CAPTIONS[name])}</figcaption></figure>")


def _sections(summary: dict) -> list[tuple[str, list[str], list[list], list[str]]]:
    """(title, headers, rows, figure names) per section; shared by HTML and markdown."""
    if "sampling" not in summary:
        return []
    s = summary["sampling"]
    sec = []
    sec.append(("1. Sampling diagnostics",
                ["parameter", "mean", "sd", "R-hat", "ESS bulk", "ESS tail", "MCSE"],
                [[p["parameter"], p["mean"], p["sd"], f"{p['rhat']:.3f}", round(p["ess_bulk"]),
                  round(p["ess_tail"]), p["mcse_mean"]] for p in s["parameters"]],
                ["rank", "trace"]))
    sec.append(("2. Prior vs posterior",
                ["parameter", "prior 90%", "posterior 90%", "posterior sd / prior sd", "status"],
                [[r["parameter"], f"{_fmt(r['prior_q'][0])} - {_fmt(r['prior_q'][4])}",
                  f"{_fmt(r['posterior_q'][0])} - {_fmt(r['posterior_q'][4])}", r["sd_ratio"],
                  r["status"]] for r in summary["prior_posterior"]],
                ["prior_posterior"]))
    sec.append(("3. Posterior predictive check",
                ["row", "system", "engine", "method", "M", "context", "measured", "median",
                 "90% interval", "outside 90%"],
                [[r["row"], r["system"], r["engine"], r["method"], r["verify_tokens"],
                  r["context_tokens"], r["measured"], round(r["median"], 1),
                  f"{r['lo90']:.1f} - {r['hi90']:.1f}", "YES" if r["outside_90"] else "no"]
                 for r in summary["ppc"]["rows"]],
                ["ppc"]))
    loo = summary["loo"]
    sec.append((f"4. PSIS-LOO (elpd {loo['elpd']:.2f} +- {loo['se']:.2f}, p_loo {loo['p_loo']:.2f},"
                f" {loo['n_flagged']} of {len(loo['pareto_k'])} Pareto k > {PARETO_K_LIMIT})",
                ["row", "Pareto k", "k > 0.7", "LOO-PIT"],
                [[k["row"], k["k"], "YES" if k["flag"] else "no", pit]
                 for k, pit in zip(loo["pareto_k"], loo["loo_pit"], strict=True)],
                ["loo"]))
    ps = summary["psense"]
    sec.append(("5. Prior sensitivity (power scaling)",
                ["prior", f"sensitivity of {ps['headline']}"],
                [[k, val] for k, val in sorted(ps["headline_by_prior"].items(),
                                               key=lambda kv: -kv[1])]
                + [["(all priors) " + r["parameter"], f"prior {r['prior']:.3f} / likelihood "
                    f"{r['likelihood']:.3f}: {r['diagnosis']}"] for r in ps["overall"]],
                ["psense"]))
    fan_rows = []
    for eng, f in summary["fan"]["engines"].items():
        for a, q, orig in zip(summary["fan"]["accept"], f["quantiles"],
                              f["original"] or [None] * len(f["quantiles"]), strict=True):
            if a in (4.0, 8.0, 12.0, 14.0, 16.0, 20.0):
                fan_rows.append([eng, a, round(q[2]), f"{q[1]:.0f} - {q[3]:.0f}",
                                 f"{q[0]:.0f} - {q[4]:.0f}", None if orig is None else round(orig)])
    sec.append(("6. Throughput against acceptance (default scenario)",
                ["engine", "accept", "median tok/s", "50%", "90%", "original"], fan_rows,
                ["fan"]))
    var_rows = []
    for eng, d in summary["variance"].items():
        for k, val in d["shares"].items():
            var_rows.append([eng, k, val])
        var_rows.append([eng, "not attributed (non-linear, interactions)", d["not_attributed"]])
    sec.append(("7. Where the width comes from", ["engine", "quantity", "variance share"],
                var_rows, ["variance"]))
    sec.append(("8. Step-time breakdown (ms, median [90%])",
                ["configuration", "MOE", "ATTN_BASE", "context", "SPEC", "step", "measured"],
                [[b["config"]] + [f"{b[k][1]:.2f} [{b[k][0]:.2f}, {b[k][2]:.2f}]"
                                  for k in ("moe", "attn_base", "context", "spec", "step")]
                 + [b["measured_step_ms"]] for b in summary["breakdown"]],
                ["breakdown"]))
    dec = summary.get("decisions", {})
    opt_rows = [[e, r["budget"], r["verify_tokens"], round(r["median"]),
                 f"{r['lo90']:.0f}-{r['hi90']:.0f}", r["p_best"], r["regret"],
                 "step" if r["extrapolated"] else ""]
                for e, o in dec.get("optimize", {}).items() for r in o["rows"]]
    best = ", ".join(f"{e}: budget {o['recommended']}" for e, o in dec.get("optimize", {}).items())
    sec.append((f"9. Which tree budget? (recommended: {best or dec.get('optimize_error')})",
                ["engine", "budget", "M", "median tok/s", "90%", "P(best)", "E[regret]",
                 "extrapolated"], opt_rows, ["budgets"]))
    nx = dec.get("next")
    sec.append((("10. What to measure next for " + nx["query"]["describe"]) if nx else
                f"10. What to measure next ({dec.get('next_error')})",
                ["candidate", "why", "expected 90% width", "reduction", "ESS"],
                [[r["candidate"], r["why"], round(r["expected_width"]),
                  f"{100 * r['reduction_rel']:.0f}%", round(r["ess_median"])]
                 for r in (nx["rows"] if nx else [])], ["next"]))
    sec.append(("11. Hardware never measured (transfer)",
                ["GPU", "GPUs", "memory GB", "measured", "AR tok/s (90%)",
                 "DDTree b32 accept 14 (90%)"],
                [[h["hardware"], h["gpus"], h.get("memory_gb_total"),
                  "yes" if h.get("measured") else "no",
                  "-" if "ar" not in h else f"{h['ar'][1]:.0f} ({h['ar'][0]:.0f}-{h['ar'][2]:.0f})",
                  "-" if "ddtree" not in h else
                  f"{h['ddtree'][1]:.0f} ({h['ddtree'][0]:.0f}-{h['ddtree'][2]:.0f})"]
                 for h in dec.get("hardware", [])], ["hardware"]))
    return sec


STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid
#ccc;padding:2px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
.verdict{padding:.8em 1em;border-radius:6px;font-size:1.2em;font-weight:600}.ok{background:#e3f6e3}
.bad{background:#fde2e2}figure{margin:1em 0}img{max-width:100%}figcaption{color:#555;
font-size:13px}.missing{color:#b00}"""

SCRIPT = """window.addEventListener('load',function(){var im=document.images,ok=0;
for(var i=0;i<im.length;i++){if(im[i].complete&&im[i].naturalWidth>0)ok++;}
document.body.setAttribute('data-images-rendered',ok+'/'+im.length);});"""


def page(summary: dict, figures: dict[str, Path]) -> str:
    v = summary["verdict"]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>ddtree-bayes report "
             f"{html.escape(summary['fit_id'])}</title><style>{STYLE}</style>"
             f"<script>{SCRIPT}</script></head><body>",
             f"<h1>ddtree-bayes fit {html.escape(summary['fit_id'])}</h1>",
             f"<p class='verdict {'ok' if v['converged'] else 'bad'}'>{html.escape(v['text'])}</p>"]
    if "sampling" in summary:
        s = summary["sampling"]
        parts.append(f"<p>{summary['chains']} chains, {summary['n_draws']} draws; max R-hat "
                     f"{s['max_rhat']:.3f} (gate {MAX_RHAT}), min bulk ESS {s['min_ess_bulk']:.0f}"
                     f" (gate {MIN_ESS_BULK}), min tail ESS {s['min_ess_tail']:.0f}, divergences "
                     f"{s['divergences']}, E-BFMI per chain "
                     f"{', '.join(f'{b:.2f}' for b in s['ebfmi_per_chain'])}, tree-depth "
                     f"saturation {_fmt(s['tree_depth_saturation'])}.</p>")
        flagged = summary["ppc"]["flagged"]
        parts.append(f"<p>Measurements outside their 90% predictive interval: "
                     f"{', '.join(map(str, flagged)) if flagged else 'none'}. Pareto k > "
                     f"{PARETO_K_LIMIT}: {summary['loo']['n_flagged']}.</p>")
    for title, headers, rows, figs in _sections(summary):
        parts.append(f"<h2>{html.escape(title)}</h2>{_table(headers, rows)}")
        parts.extend(_img(figures, f) for f in figs)
    if summary.get("figure_errors"):
        parts.append("<h2>Figures that failed</h2>" + _table(
            ["figure", "error"], list(summary["figure_errors"].items())))
    parts.append("</body></html>")
    return "\n".join(parts)


def markdown(summary: dict) -> str:
    lines = [f"# ddtree-bayes fit {summary['fit_id']}", "", f"**{summary['verdict']['text']}**", ""]
    for title, headers, rows, _ in _sections(summary):
        lines += [f"## {title}", "", "| " + " | ".join(headers) + " |",
                  "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def write_report(fit_id: str | None = None, workdir: Path | None = None,
                 out_root: Path | None = None, seed: int = DEFAULT_SEED) -> tuple[Path, dict]:
    """Compute and render the report of a fit into ``reports/<fit-id>/``.

    A fit that cannot be read still gets a page that says so (and the error is re-raised
    after it is written); an unconverged fit gets the full report under a red verdict.
    """
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.errors import ArtifactError
    from ddtree_bayes.engine import store

    models = paths.models_dir(workdir)
    root = out_root or (workdir or Path.cwd()) / "reports"
    path = store.resolve(models, fit_id)
    out_dir = root / path.stem
    try:
        draws = store.load_draws(path)
        dt = store.load_datatree(path)
    except ArtifactError as err:
        summary = {"fit_id": path.stem, "verdict": {"converged": False, "failures": [str(err)],
                                                    "text": f"fit could not be read: {err}"}}
        render(summary, None, out_dir)
        raise
    summary = compute(draws, dt, seed=seed)
    render(summary, draws, out_dir, dt)
    return out_dir, summary

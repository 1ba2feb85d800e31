"""Fit -> summary dict: every number the report shows (the content of ``summary.json``).

The tests check these numbers against the posterior; ``render`` only formats them.
"""
from __future__ import annotations

import contextlib
import io
import logging
import math
import time
import warnings

import numpy as np

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import (
    DEFAULT_SCENARIO,
    DEFAULT_SEED,
    MAX_DIVERGENCES,
    MAX_RHAT,
    MIN_ESS_BULK,
    parse_priors,
)
from ddtree_bayes.core.errors import DDTreeBayesError, QueryError
from ddtree_bayes.core.pairs import pair_label, split_label
from ddtree_bayes.engine import measured as M
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.pairs import is_multi
from ddtree_bayes.engine.store import Draws
from ddtree_bayes.engine.structure import run_sd
from ddtree_bayes.workflows.report.priors import (
    accept_groups_of,
    flop_ms_of,
    log_prior,
    prior_draws,
    repeated_of,
    scalar_columns,
    varies_of,
)

#: Pareto k above this makes a PSIS-LOO estimate unreliable.
PARETO_K_LIMIT = 0.7
#: Acceptance grid of the fan chart.
FAN_ACCEPT = tuple(float(a) for a in range(1, 21))
#: Acceptance range used for the variance decomposition (the original question).
DECOMP_ACCEPT = (12.0, 16.0)
#: Posterior sd / prior sd below which a parameter counts as informed by the data.
INFORMED_RATIO = 0.5
PRIOR_ONLY_RATIO = 0.9

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
def compute(draws: Draws, dt=None, *, seed: int = DEFAULT_SEED, model: str | None = None) -> dict:
    """Every number of the report, as a JSON-ready dict (``model``: the target model of its
    default-scenario sections, required when the fit holds several)."""
    import arviz_stats as azs
    import xarray as xr

    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.pairs import resolve_model

    t0 = time.perf_counter()
    model = resolve_model(draws, model)
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
    from ddtree_bayes.workflows.living.reweight import provenance

    if provenance(meta):   # an `update` that reweighted instead of sampling: say so up front
        summary["verdict"]["text"] += f" ({provenance(meta)})"
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
    prior = prior_draws(priors, coords, n, seed, flop_ms_of(draws.meta), varies_of(draws.meta),
                        accept_groups_of(draws.meta), repeated_of(draws.meta))
    post_cols = scalar_columns({k: v[k] for k in prior if k in v}, coords)
    prior_cols = scalar_columns(prior, coords)
    shrink = []
    for name, post in post_cols.items():
        pr = prior_cols[name]
        if np.ptp(pr) == 0 and np.ptp(post) == 0:
            continue   # a fixed value (dist = "point"): nothing to compare
        ratio = float(np.std(post) / np.std(pr)) if np.std(pr) > 0 else float("nan")
        status = ("informed" if ratio < INFORMED_RATIO else
                  "prior-only" if ratio >= PRIOR_ONLY_RATIO else "weakly informed")
        shrink.append({"parameter": name, "prior_q": _q(pr), "posterior_q": _q(post),
                       "prior_sd": float(np.std(pr)), "posterior_sd": float(np.std(post)),
                       "sd_ratio": ratio, "status": status})
    summary["prior_posterior"] = shrink
    from ddtree_bayes.core import acceptance_latent as AL

    summary["inferred_acceptance"] = AL.summarise(meta, v)

    # 3. posterior predictive check of every measurement
    ppc = M.check_measurements(draws, seed=seed)
    for r in ppc:
        r["outside_90"] = not (r["lo90"] <= r["measured"] <= r["hi90"])
    summary["ppc"] = {"rows": ppc, "flagged": [r["row"] for r in ppc if r["outside_90"]]}

    # 4. PSIS-LOO with the pointwise log-likelihood of log tok/s
    from ddtree_bayes.engine.compare import loo_tree as make_loo_tree

    measurements = P.stored_measurements(draws)
    loo_tree = make_loo_tree(draws, chains, seed)
    unit = loo_tree.attrs["unit"]   # "row", or "configuration" for large data
    rows_label = [str(x) for x in loo_tree["observed_data"]["log_tok_s"].coords[
        "measurement" if unit == "row" else "configuration"].values]
    shape = (chains, n // chains, len(rows_label))
    post_ds = dt["posterior"].to_dataset()
    with _quiet(summary):
        loo = azs.loo(loo_tree, pointwise=True)
        pit = np.asarray(azs.loo_pit(loo_tree)["log_tok_s"].values).reshape(-1)
    pareto_k = [float(k) for k in np.asarray(loo.pareto_k.values).reshape(-1)]
    summary["loo"] = {"elpd": float(loo.elpd), "se": float(loo.se), "p_loo": float(loo.p),
                      "unit": unit,
                      "pareto_k": [{"row": int(r), "k": k, "flag": k > PARETO_K_LIMIT}
                                   for r, k in zip(rows_label, pareto_k, strict=True)],
                      "n_flagged": int(sum(k > PARETO_K_LIMIT for k in pareto_k)),
                      "loo_pit": [float(x) for x in pit]}

    # 5. prior sensitivity (power-scaling): overall, and of the headline prediction
    lp = log_prior(priors, coords, v, accept_groups_of(meta))
    headline = _headline_log_tok(draws, seed, model)
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
    summary["fan"] = _fan(draws, seed, model)
    summary["variance"] = _variance(draws, seed, model)
    summary["breakdown"] = _breakdown(draws, measurements, seed, model)
    summary["decisions"] = _decisions(draws, seed, model)
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


def _default_scenarios(draws: Draws, model: str | None = None):
    d = DEFAULT_SCENARIO
    return [P.resolve_scenario(draws, hardware=d.hardware, gpus=None, engine=e, method=d.method,
                               block=d.block, budget=d.budget, verify_tokens=None,
                               context_tokens=None, model=model) for e in d.engines]


def _headline_log_tok(draws: Draws, seed: int, model: str | None = None) -> np.ndarray:
    sc = _default_scenarios(draws, model)[0]
    step, _ = P.step_draws(draws, sc, np.random.default_rng(seed))
    return np.log(14.0 * 1000.0 / step)


def _fan(draws: Draws, seed: int, model: str | None = None) -> dict:
    rng = np.random.default_rng(seed)
    seed_table = P.load_seed_table()
    engines = {}
    for sc in _default_scenarios(draws, model):
        parts, _ = P.step_components(draws, sc, rng)
        noise = np.exp(parts["log_sd"] * rng.standard_normal(draws.n_draws))
        per_token = 1000.0 / parts["step"] * noise
        seed_step = P.seed_step_ms(seed_table, sc)
        engines[sc.engine] = {
            "scenario": sc.describe(), "measured": bool(sc.measured),
            "quantiles": [_q(a * per_token) for a in FAN_ACCEPT],
            "original": None if seed_step is None else [a / seed_step * 1000 for a in FAN_ACCEPT],
            "original_points": [{"accept": float(r["accept_len"]), "tok_s": float(r["tok_s"])}
                                for r in seed_table if seed_step is not None
                                and r["kind"] == "deterministic estimate"
                                and r["engine"] == sc.engine and r["hardware"] == sc.hardware
                                and r["verify_tokens"] == str(sc.verify_tokens)],
        }
    measured = [{"accept": m.accept_len, "tok_s": m.tok_s,
                 "label": f"{m.engine} {m.method} M={m.verify_tokens}"}
                for m in P.stored_measurements(draws).rows
                if m.hardware == DEFAULT_SCENARIO.hardware and m.accept_len is not None
                and model in (None, m.model)]
    return {"accept": list(FAN_ACCEPT), "quantile_probs": [0.05, 0.25, 0.5, 0.75, 0.95],
            "engines": engines, "measured": measured}


def _variance(draws: Draws, seed: int, model: str | None = None) -> dict:
    """First-order variance shares of log tok/s in the default scenario, per engine."""
    v, coords = draws.variables, draws.meta["coords"]
    rng = np.random.default_rng(seed)
    out: dict = {}
    for sc in _default_scenarios(draws, model):
        # a pair never measured has no parameters of its own (the pair roofline answers it)
        s = coords["system"].index(sc.pair) if sc.pair in coords["system"] else None
        parts, how = P.step_components(draws, sc, rng)
        step = parts["step"]
        accept = rng.uniform(*DECOMP_ACCEPT, draws.n_draws)
        noise = run_sd(draws)
        eps = noise * rng.standard_normal(draws.n_draws)
        y = np.log(accept * 1000.0 / step) + eps
        # regress on scales where the step formula is close to linear in log tok/s
        factors = {"acceptance U(12,16)": np.log(accept),
                   ("run-to-run noise" if noise is v["noise_sd"]
                    else "run-to-run and configuration noise"): eps}
        if s is not None:
            factors[f"step_ar_ms[{sc.pair}]"] = np.log(v["step_ar_ms"][:, s])
            factors[f"moe_share[{sc.pair}]"] = _logit(v["moe_share"][:, s])
        extra_sd = np.sqrt(np.maximum(parts["log_sd"] ** 2 - noise ** 2, 0.0))
        if np.any(extra_sd > 0):   # structured form: the distance-scaled discrepancy
            disc = extra_sd * rng.standard_normal(draws.n_draws)
            y = y + disc
            factors["structural discrepancy"] = disc
        tied = parts.get("spec_tied")
        if tied is not None and np.any(tied != 0):  # own per-pass/per-node cost, unmeasured
            factors["own drafter/tree cost beyond the measured depth/budget"] = tied
        shape_name = S.SHAPE_NAMES[draws.meta["model"]["moe_form"]]
        if s is not None:
            factors[f"{shape_name}[{sc.pair}]"] = v[shape_name][:, s]
        if "compute_eff" in v and s is not None:
            factors[f"compute_eff[{sc.pair}]"] = np.log(v["compute_eff"][:, s])
        if sc.context_tokens > 0 and s is not None:
            factors[f"ctx_ms_per_unit[{sc.pair}]"] = np.log(v["ctx_ms_per_unit"][:, s])
        base = draws.meta["model"]["relation_bases"].get(sc.engine, sc.engine)
        label = S.group_label(sc.pair, base, sc.method)
        if label in coords["overhead_group"]:
            g = coords["overhead_group"].index(label)
            if "overhead_frac" in v:
                factors[f"overhead_frac[{label}]"] = _logit(v["overhead_frac"][:, g])
            for part in ("fixed", "pass", "tree"):
                if f"spec_{part}_ratio" in v:
                    factors[f"spec_{part}_ratio[{label}]"] = np.log(v[f"spec_{part}_ratio"][:, g])
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


def _decisions(draws: Draws, seed: int, model: str | None = None) -> dict:
    """Best budget per default engine, next-measurement ranking for the default query,
    and every GPU of the hardware table (measured or transferred). A failure of one part
    is recorded, not raised: the rest of the report still renders."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    from ddtree_bayes.core.data import load_hardware
    from ddtree_bayes.workflows import decisions as D

    out: dict = {}
    try:
        curve = parse_acceptance_curve(draws.priors_toml, "priors stored in the fit")
        if curve is None:
            raise QueryError("the priors have no [acceptance_curve]", fix="add one and re-fit")
        d = DEFAULT_SCENARIO
        out["optimize"] = {e: D.optimize(draws, curve, hardware=d.hardware, engine=e,
                                         block=d.block, seed=seed, model=model)
                           for e in d.engines}
    except DDTreeBayesError as err:
        out["optimize_error"] = str(err)
    try:
        query = NEXT_QUERY + (f" --model {model}" if is_multi(draws) else "")
        out["next"] = D.next_measurements(draws, D.parse_query(draws, query), seed=seed)
    except DDTreeBayesError as err:
        out["next_error"] = str(err)
    table = load_hardware("hardware table stored in the fit", text=draws.hardware_csv)
    gpus = sorted({split_label(s)[2] for s in P.measured_systems(draws)
                   if split_label(s)[0] in (None, model)})[0]
    rows = []
    for hw in table:
        try:
            ar = P.predict_rows(draws, hardware=hw, gpus=gpus, method="ar", engines=["sglang"],
                                accept="1", seed=seed, model=model)[0]
            d = DEFAULT_SCENARIO
            tree = P.predict_rows(draws, hardware=hw, gpus=gpus, engines=["sglang"],
                                  method=d.method, block=d.block, budget=d.budget, accept="14",
                                  seed=seed, model=model)[0]
        except DDTreeBayesError as err:
            rows.append({"hardware": hw, "gpus": gpus, "error": str(err)})
            continue
        rows.append({"hardware": hw, "gpus": gpus,
                     "measured": pair_label(model or "", f"{hw}x{gpus}", is_multi(draws))
                                 in P.measured_systems(draws),
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


def _breakdown(draws: Draws, measurements, seed: int, model: str | None = None) -> list[dict]:
    """Step terms of every measured configuration (repeated runs: once, against the median
    of their measured steps) and of the default scenarios."""
    from ddtree_bayes.core.configs import group_rows, rows_of

    rng = np.random.default_rng(seed)
    configs = []
    row_config, first = group_rows(measurements.rows)
    # rows without accept_len have no measured step (their acceptance is inferred): NaN
    steps = np.array([np.nan if m.step_ms is None else m.step_ms for m in measurements.rows])
    for i, mine_ix in zip(first, rows_of(row_config, len(first)), strict=True):
        m = measurements.rows[i]
        sc = P.resolve_scenario(draws, hardware=m.hardware, gpus=m.gpus, engine=m.engine,
                                method=m.method, block=m.block, budget=m.budget,
                                verify_tokens=m.verify_tokens, context_tokens=m.context_tokens,
                                model=m.model)
        mine = steps[mine_ix]
        runs = f" ({len(mine)} runs)" if len(mine) > 1 else ""
        configs.append((f"row {m.row}{runs}: {sc.pair} {sc.engine} {sc.method} "
                        f"M={sc.verify_tokens} ctx={sc.context_tokens:g}", sc,
                        None if np.isnan(mine).all() else float(np.nanmedian(mine))))
    for sc in _default_scenarios(draws, model):
        configs.append((f"default: {sc.pair} {sc.engine} {sc.method} M={sc.verify_tokens}", sc,
                        None))
    out = []
    for label, sc, measured in configs:
        parts, _ = P.step_components(draws, sc, rng)
        out.append({"config": label, "measured_step_ms": measured,
                    **{k: _q(a, (0.05, 0.5, 0.95)) for k, a in parts.items()
                       if k not in ("log_sd", "spec_tied")}})
    return out

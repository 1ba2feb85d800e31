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
from pathlib import Path

import numpy as np

from ddtree_bayes.core.config import (
    DEFAULT_SEED,
    MAX_DIVERGENCES,
    MAX_RHAT,
    MIN_ESS_BULK,
)
from ddtree_bayes.core.data import accept_shown
from ddtree_bayes.engine import fitted_rows as M
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.question import default_question
from ddtree_bayes.workflows.report.priors import (
    accept_groups_of,
    fit_priors,
    flop_ms_of,
    log_prior,
    prior_draws,
    repeated_of,
    scalar_columns,
    varies_of,
)
from ddtree_bayes.workflows.report.sections import (
    decisions_section,
    default_answer,
    headline_log_tok,
    quantiles5,
    step_breakdown,
    variance_shares,
)

#: Pareto k above this makes a PSIS-LOO estimate unreliable from S = 2154 draws on; below,
#: arviz-stats' (and compare's) min(1 - 1/log10(S), 0.7) (engine/psis.py khat_threshold),
#: which the report applies and stores (summary.json thresholds.pareto_k).
PARETO_K_LIMIT = 0.7
#: Posterior sd / prior sd below which a parameter counts as informed by the data.
INFORMED_RATIO = 0.5
PRIOR_ONLY_RATIO = 0.9


# ------------------------------------------------------------------ compute
def loo_summary(loo, rows_label: list[str], unit: str, pit) -> dict:
    """The report's PSIS-LOO numbers from arviz-stats' ``loo`` (pointwise): elpd, se, p_loo,
    each row's (or configuration's) Pareto k, flagged above ``pareto_k_threshold`` - the
    threshold arviz-stats applies for the fit's S draws, ``loo.good_k`` =
    min(1 - 1/log10(S), 0.7), as ``compare`` counts (0.616 at S = 400; 0.7 from S = 2154) -
    and the LOO-PIT values."""
    threshold = float(loo.good_k)
    pareto_k = [float(k) for k in np.asarray(loo.pareto_k.values).reshape(-1)]
    return {"elpd": float(loo.elpd), "se": float(loo.se), "p_loo": float(loo.p), "unit": unit,
            "pareto_k_threshold": threshold,
            "pareto_k": [{"row": int(r), "k": k, "flag": k > threshold}
                         for r, k in zip(rows_label, pareto_k, strict=True)],
            "n_flagged": int(sum(k > threshold for k in pareto_k)),
            "loo_pit": [float(x) for x in pit]}


def pareto_k_limit(summary: dict) -> str:
    """The Pareto k threshold a report's summary flagged by, as ``compare`` heads its column
    ("0.62", "0.7"); a summary.json saved before it was stored: 0.7."""
    limit = summary.get("loo", {}).get("pareto_k_threshold",
                                       summary.get("thresholds", {}).get("pareto_k",
                                                                         PARETO_K_LIMIT))
    return f"{round(limit, 2):g}"


def compute(draws: Fit, dt=None, *, seed: int = DEFAULT_SEED, model: str | None = None,
            priors_path: str | Path | None = None) -> dict:
    """Every number of the report, as a JSON-ready dict (``model``: the target model of its
    default-scenario sections, required when the fit holds several; ``priors_path``: the priors
    file of the budget section's acceptance curve, ``report --priors``)."""
    import arviz_stats as azs

    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.target_models import resolve_model

    t0 = time.perf_counter()
    model = resolve_model(draws, model)
    meta, v = draws.meta, draws.variables
    coords = meta["coords"]
    priors = fit_priors(draws)   # (fit --moe-form / --step-form override the file's forms)
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
                        accept_groups_of(draws.meta), repeated_of(draws.meta),
                        draws.meta["model"])
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
        shrink.append({"parameter": name, "prior_q": quantiles5(pr), "posterior_q": quantiles5(post),
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

    # 4. PSIS-LOO with the pointwise log-likelihood of log tok/s, 5. prior sensitivity
    # (power-scaling): both weigh the draws as independent draws of one posterior, which
    # an `update`'s importance resample is not (compare refuses it too): said, not computed
    from ddtree_bayes.engine.compare import RESAMPLE_FIX, resample_reason

    default = default_question(draws, model)
    summary["default_scenario"] = {**default.to_json(), "derived": default.derived}
    why = {k: resample_reason(meta, n, what) for k, what in (("loo", "PSIS-LOO"),
                                                            ("psense", "power-scaling"))}
    if why["loo"]:
        summary["not_computed"] = {k: f"{w}; {RESAMPLE_FIX}, or read the report of fit "
                                      f"{meta['reweight'].get('parent_fit')}"
                                   for k, w in why.items() if w}
    else:
        _psis_sections(summary, draws, dt, priors, coords, v, model, default, chains, n, seed)

    # 6. throughput fan chart, 7. variance decomposition, 8. step breakdown
    # (fan, answer line's warnings and concurrency: one posterior predictive, shared)
    summary.update(default_answer(draws, seed, model, default))
    summary["variance"] = variance_shares(draws, seed, model, default)
    summary["breakdown"] = step_breakdown(draws, draws.measurements, seed, model, default)
    summary["decisions"] = decisions_section(draws, seed, model, default, priors_path)
    summary["compute_s"] = time.perf_counter() - t0
    return summary


def _psis_sections(summary: dict, draws: Fit, dt, priors, coords, v, model: str | None,
                   default, chains: int, n: int, seed: int) -> None:
    """The report's PSIS-LOO (``summary["loo"]``, its Pareto k threshold) and power-scaling
    prior sensitivity (``summary["psense"]``) of a fit whose draws NUTS sampled."""
    import arviz_stats as azs
    import xarray as xr

    from ddtree_bayes.engine.compare import loo_tree as make_loo_tree

    loo_tree = make_loo_tree(draws, chains, seed)
    unit = loo_tree.attrs["unit"]   # "row", or "configuration" for large data
    rows_label = [str(x) for x in loo_tree["observed_data"]["log_tok_s"].coords[
        "measurement" if unit == "row" else "configuration"].values]
    shape = (chains, n // chains, len(rows_label))
    post_ds = dt["posterior"].to_dataset()
    with _quiet(summary):
        loo = azs.loo(loo_tree, pointwise=True)
        pit = np.asarray(azs.loo_pit(loo_tree)["log_tok_s"].values).reshape(-1)
    summary["loo"] = loo_summary(loo, rows_label, unit, pit)
    summary["thresholds"]["pareto_k"] = summary["loo"]["pareto_k_threshold"]

    # prior sensitivity (power-scaling): overall, and of the headline prediction
    lp = log_prior(priors, coords, v, accept_groups_of(draws.meta), draws.meta["model"])
    headline = headline_log_tok(draws, seed, model, default)
    post_plus = post_ds.assign(headline_log_tok_s=(("chain", "draw"), headline.reshape(shape[:2])))
    lp_ds = xr.Dataset({k: (("chain", "draw"), a.reshape(shape[:2])) for k, a in lp.items()})
    sens_tree = xr.DataTree.from_dict({"posterior": post_plus, "log_prior": lp_ds,
                                       "log_likelihood": loo_tree["log_likelihood"].to_dataset()})
    with _quiet(summary):
        overall = power_scaling(sens_tree)
        by_prior = {k: float(np.asarray(
            azs.psense(sens_tree, var_names=["headline_log_tok_s"], group="prior",
                       group_var_names=[k])["headline_log_tok_s"].values)) for k in lp}
    summary["psense"] = {
        "overall": overall,
        "headline_by_prior": by_prior,
        "headline": f"log tok/s, default scenario, {default.engines[0]}, "
                    f"accept {accept_shown(default.accept)}",
    }


#: The diagnosis of a parameter whose power-scaling sensitivity is not a number.
CONSTANT_DIAGNOSIS = "constant over the draws (a fixed value): nothing to power-scale"


def psense_overall(overall) -> list[dict]:
    """ArviZ's ``psense_summary`` table as rows of parameter, prior and likelihood
    sensitivity and diagnosis. A parameter constant over the draws (a fixed scale such as
    ``compute_eff_log_sd = 0.4``) has NaN sensitivities, which ArviZ diagnoses as "✓": it is
    said as constant, with null sensitivities (summary.json held the bare NaN)."""
    rows = []
    for idx, r in overall.iterrows():
        prior, likelihood = float(r["prior"]), float(r["likelihood"])
        if math.isfinite(prior) and math.isfinite(likelihood):
            rows.append({"parameter": str(idx), "prior": prior, "likelihood": likelihood,
                         "diagnosis": str(r["diagnosis"])})
        else:
            rows.append({"parameter": str(idx), "prior": None, "likelihood": None,
                         "diagnosis": CONSTANT_DIAGNOSIS})
    return rows


def power_scaling(sens_tree) -> list[dict]:
    """:func:`psense_overall` of ArviZ's ``psense_summary`` of ``sens_tree``, with each
    posterior variable of one value per draw that is constant over the draws (the fixed
    scales, such as ``compute_eff_log_sd = 0.4``) said constant in its place without asking
    ArviZ: its cumulative Jensen-Shannon distance divides by the spread of the draws, 0 / 0
    for a constant, a RuntimeWarning per direction, group and sign (56 in library_notes for
    the bundled fit's 7 fixed scales). A constant element of a vector parameter still goes
    to ArviZ, and :func:`psense_overall` says it constant from its NaN."""
    import arviz_stats as azs
    import xarray as xr

    post = sens_tree["posterior"].to_dataset()
    constant = {k for k, v in post.data_vars.items() if set(v.dims) == {"chain", "draw"}
                and np.ptp(np.asarray(v.values)) == 0}
    if not constant:
        return psense_overall(azs.psense_summary(sens_tree))
    varying = post.drop_vars(sorted(constant))
    tree = sens_tree.copy()
    tree["posterior"] = xr.DataTree(varying)
    rows = psense_overall(azs.psense_summary(tree)) if varying.data_vars else []
    by_name: dict[str, list[dict]] = {}
    for r in rows:   # ArviZ's labels: name, or name[coordinate]
        by_name.setdefault(r["parameter"].split("[", 1)[0], []).append(r)
    out = [r for k in post.data_vars for r in (
        [{"parameter": k, "prior": None, "likelihood": None, "diagnosis": CONSTANT_DIAGNOSIS}]
        if k in constant else by_name.pop(str(k), []))]
    return out + [r for rs in by_name.values() for r in rs]   # (none: every name is a variable)


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

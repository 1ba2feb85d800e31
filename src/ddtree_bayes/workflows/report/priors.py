"""The priors as numpy: log densities, draws and scalar columns for prior-vs-posterior."""

from __future__ import annotations

import numpy as np

from ddtree_bayes.core import acceptance_latent as AL
from ddtree_bayes.core.config import FORM_PRIORS, MOE_FORMS, Prior, PriorsConfig
from ddtree_bayes.core.likelihood import CONFIG_SD, CONFIG_SHARE, LIKELIHOOD_NU, RUN_SD
from ddtree_bayes.core.sampling import prior_sample
from ddtree_bayes.core.spec import AMD_MU, AMD_SD, CTX_BATCH, RECURRENT_SD, SHAPE_NAMES, TP_LINKS, tp_prior


# ------------------------------------------------------------------ priors as numpy
def fit_priors(draws) -> PriorsConfig:
    """The priors of a fit (:class:`~ddtree_bayes.engine.posterior.Fit`) in the forms it was
    fitted in: its stored priors file, with the MoE and SPEC forms of ``meta["model"]``
    (``fit --moe-form`` / ``--step-form`` override the file's; a fit that stored no step form
    is of the fraction form, as predict reads it). The file's forms drew the prior of another
    model's parameters: a fraction fit's report ended in ``KeyError: 'spec_fixed_log_mu'``."""
    from ddtree_bayes.engine.fitting import forms_of

    model = draws.meta["model"]
    return forms_of(draws.priors, model["moe_form"], model.get("step_form", "fraction"))


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


def prior_draws(priors: PriorsConfig, coords: dict, n: int, seed: int,
                system_flop_ms=None, group_varies: dict | None = None,
                accept_groups: list[dict] | None = None, repeated: bool = False,
                groups: dict | None = None) -> dict[str, np.ndarray]:
    """Prior draws of every posterior variable (same names and shapes as the posterior).

    The roofline form's ``compute_tok_ratio`` needs each system's FLOP time per token
    (``system_flop_ms``, in ``coords["system"]`` order; a fit's ``meta["model"]``); the
    structured form's pass and tree ratios of a group that measured one value of them are the
    population's (``group_varies``, ``meta["model"]["group_varies"]``), as in the model; the
    inferred acceptances have their groups' priors (``accept_groups``,
    ``meta["model"]["acceptance_groups"]``); with repeated runs (``repeated``,
    ``meta["model"]["repeated_runs"]``) noise_sd splits by ``config_share`` into ``run_sd`` and
    ``config_sd`` (core/likelihood.py); the structured form's group means need each group's
    engine, system and drafter-pass roofline (``groups``: a fit's ``meta["model"]``, keys
    ``engines``, ``group_engine``, ``group_system``, ``group_pass_roof_ms``)."""
    rng = np.random.default_rng(seed)
    P_ = priors.priors
    n_sys, n_grp = len(coords["system"]), len(coords["overhead_group"])
    out: dict[str, np.ndarray] = {}
    ctx = ctx_priors(priors, coords, groups)
    for name in ("step_ar_ms", "moe_share", "ctx_ms_per_unit"):
        out[name] = np.stack([prior_sample(ctx[k] if name == "ctx_ms_per_unit" else P_[name],
                                           n, rng) for k in range(n_sys)], axis=1)
    for name in ("moe_hw_sd", "ctx_verify_exponent", *FORM_PRIORS[priors.step_form],
                 *FORM_PRIORS.get(priors.moe_form, ()), "noise_sd"):
        out[name] = prior_sample(P_[name], n, rng)
    out["moe_z"] = rng.standard_normal((n, n_sys))
    mu_name = MOE_FORMS[priors.moe_form]
    out[mu_name] = prior_sample(P_[mu_name], n, rng)
    shape = SHAPE_NAMES[priors.moe_form]
    if priors.moe_form == "linear":
        out[shape] = out[mu_name][:, None] * np.exp(out["moe_hw_sd"][:, None] * out["moe_z"])
    else:
        out[shape] = out[mu_name][:, None] + out["moe_hw_sd"][:, None] * out["moe_z"]
    if priors.step_form == "structured":
        means = _group_means(out, priors, groups, (n, n_grp), rng)
        for part in ("fixed", "pass", "tree"):
            mean = means.get(part, out[f"spec_{part}_log_mu"][:, None])
            log = _pooled_draws(out, priors, f"spec_{part}", (n, n_grp), rng, mean)
            varies = (group_varies or {}).get(part)
            if varies is not None:
                log = np.where(np.asarray(varies, dtype=bool)[None, :], log,
                               np.broadcast_to(mean, (n, n_grp)))
            out[f"spec_{part}_ratio"] = np.exp(log)
    else:
        out["overhead_z"] = rng.standard_normal((n, n_grp))
        logit = out["overhead_logit_mu"][:, None] + out["overhead_logit_sd"][:, None] * out["overhead_z"]
        out["overhead_frac"] = 1.0 / (1.0 + np.exp(-logit))
    if priors.moe_form == "roofline":
        out["compute_eff"] = np.exp(_pooled_draws(out, priors, "compute_eff", (n, n_sys), rng))
        if system_flop_ms is not None:
            out["compute_tok_ratio"] = (np.asarray(system_flop_ms)[None, :] / out["compute_eff"]
                                        / (out["moe_share"] * out["step_ar_ms"]))
    out["reduction"] = np.stack([prior_sample(priors.relations[e].prior, n, rng)
                                 for e in coords["relation"]], axis=1) if coords["relation"] \
        else np.zeros((n, 0))
    if accept_groups:
        out[AL.NAME] = np.stack([prior_sample(_accept_prior(g), n, rng) for g in accept_groups],
                                axis=1)
    if repeated:
        share = prior_sample(P_[CONFIG_SHARE], n, rng)
        out[CONFIG_SHARE] = share
        out[RUN_SD] = out["noise_sd"] * np.sqrt(1.0 - share)
        out[CONFIG_SD] = out["noise_sd"] * np.sqrt(share)
    if CTX_BATCH in P_:   # (last: the draws above are those of every earlier version)
        out[CTX_BATCH] = prior_sample(P_[CTX_BATCH], n, rng)
    out.update(_allreduce_draws(P_, coords, (groups or {}), n, rng))
    if LIKELIHOOD_NU in P_:   # a fixed value: no draw, so every draw above is unchanged
        out[LIKELIHOOD_NU] = prior_sample(P_[LIKELIHOOD_NU], n, rng)
    return out


def _allreduce_draws(P_: dict, coords: dict, model: dict, n: int,
                     rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Prior draws of the all-reduce bus bandwidths of the fit's link classes and of
    ``tp_tok_ms`` per system (engine/model.py ``allreduce_tok_ms``); none for a fit of
    single-GPU systems (``meta["model"]["system_tp_mb"]`` absent)."""
    volume, links = model.get("system_tp_mb"), model.get("system_link")
    if not volume or not links:
        return {}
    systems = coords["system"]
    out: dict[str, np.ndarray] = {}
    busbw = np.ones((n, len(systems)))
    for cls in TP_LINKS:
        cols = [j for j, s in enumerate(systems) if links.get(s) == cls]
        if cols:
            out[tp_prior(cls)] = prior_sample(P_[tp_prior(cls)], n, rng)
            busbw[:, cols] = out[tp_prior(cls)][:, None]
    out["tp_tok_ms"] = np.array([volume.get(s, 0.0) for s in systems])[None, :] / busbw
    return out


def _accept_prior(group: dict) -> Prior:
    return Prior(AL.NAME, group["prior"]["dist"], group["prior"]["params"])


def repeated_of(meta: dict) -> bool:
    """Whether a fit's data had repeated runs of a configuration (its model has config_sd)."""
    return bool(meta["model"].get("repeated_runs"))


def accept_groups_of(meta: dict) -> list[dict]:
    """A fit's inferred acceptance groups (rows with a blank accept_len), [] for none."""
    return AL.fit_groups(meta)


def varies_of(meta: dict) -> dict | None:
    """A fit's per-group "does the data vary passes / tree nodes" flags (structured form)."""
    return meta["model"].get("group_varies")


def flop_ms_of(meta: dict) -> list[float] | None:
    """A fit's per-system FLOP time per token, in ``coords["system"]`` order (roofline form)."""
    flops = meta["model"].get("system_flop_ms")
    return None if flops is None else [flops[s] for s in meta["coords"]["system"]]


def _group_means(out: dict, priors: PriorsConfig, groups: dict | None, shape: tuple[int, int],
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The structured form's per-group means (engine/model.py): the population's mu, the
    engine effect ``engine_sd * z`` and the physical offset (``-log step_ar``; a pass: its
    roofline over step_ar); drawn into ``out`` as the model's ``spec_<part>_engine(_z)`` and
    ``spec_<part>_mean``. Empty without the groups' inputs (a fit of an earlier version)."""
    if not groups or not groups.get("group_engine"):
        return {}
    n = shape[0]
    engine = np.asarray(groups["group_engine"], dtype=int)
    log_step_ar = np.log(out["step_ar_ms"][:, np.asarray(groups["group_system"], dtype=int)])
    means = {}
    for part in ("fixed", "pass", "tree"):
        z = rng.standard_normal((n, len(groups["engines"])))
        z = z - z.mean(axis=1, keepdims=True)   # zero-sum, as the model draws them
        out[f"spec_{part}_engine_z"] = z
        out[f"spec_{part}_engine"] = out[f"spec_{part}_engine_sd"][:, None] * z
        offset = -log_step_ar + (np.log(np.asarray(groups["group_pass_roof_ms"]))[None, :]
                                 if part == "pass" else 0.0)
        means[part] = (out[f"spec_{part}_log_mu"][:, None] + out[f"spec_{part}_engine"][:, engine]
                       + offset)
        out[f"spec_{part}_mean"] = means[part]
    recurrent = groups.get("group_recurrent")
    if recurrent:   # (after the draws above: a fit without a hybrid target draws the same)
        z = rng.standard_normal((n, len(groups["engines"])))
        sd = prior_sample(priors.priors[RECURRENT_SD], n, rng)
        out[RECURRENT_SD], out["spec_fixed_recurrent_z"] = sd, z
        out["spec_fixed_recurrent"] = sd[:, None] * z
        means["fixed"] = means["fixed"] + (out["spec_fixed_recurrent"][:, engine]
                                           * np.asarray(recurrent, dtype=float)[None, :])
        out["spec_fixed_mean"] = means["fixed"]
    amd = groups.get("group_amd")
    if amd:   # (after the draws above: a fit without an AMD group draws the same)
        z = rng.standard_normal((n, len(groups["engines"])))
        mu, sd = (prior_sample(priors.priors[k], n, rng) for k in (AMD_MU, AMD_SD))
        out[AMD_MU], out[AMD_SD], out["spec_amd_z"] = mu, sd, z
        out["spec_amd"] = mu[:, None] + sd[:, None] * z
        flag = np.asarray(amd, dtype=float)[None, :]
        for part in ("fixed", "pass"):
            means[part] = means[part] + out["spec_amd"][:, engine] * flag
            out[f"spec_{part}_mean"] = means[part]
    return means


def _pooled_draws(out: dict, priors: PriorsConfig, name: str, shape: tuple[int, int],
                  rng: np.random.Generator, mean: np.ndarray | None = None) -> np.ndarray:
    """Per-group log values around ``mean`` (default ``<name>_log_mu``), stored as a fit
    stores them: ``<name>_log`` for a fixed spread (a deterministic of the model's ``_z``),
    ``<name>_z`` for a learned one (no ``_log`` in a default fit's posterior)."""
    mu = out[f"{name}_log_mu"][:, None] if mean is None else mean
    sd = out[f"{name}_log_sd"][:, None]
    key = f"{name}_log" if priors.priors[f"{name}_log_sd"].dist == "point" else f"{name}_z"
    z = rng.standard_normal(shape)
    out[key] = mu + sd * z if key.endswith("_log") else z
    return mu + sd * z


def ctx_priors(priors: PriorsConfig, coords: dict, model_meta: dict | None) -> list[Prior]:
    """Each system's ``ctx_ms_per_unit`` prior as the fit had it (``model_meta``: a fit's
    ``meta["model"]``, whose ``system_ctx_prior`` prices it from the card's KV read,
    core/context_cost.py), else the generic prior."""
    own = (model_meta or {}).get("system_ctx_prior") or {}
    generic = priors.priors["ctx_ms_per_unit"]
    return [Prior("ctx_ms_per_unit", "lognormal", {"median": own[s]["median"],
                                                   "sigma": own[s]["sigma"]}, per="system")
            if s in own else generic for s in coords["system"]]


def log_prior(priors: PriorsConfig, coords: dict, v: dict[str, np.ndarray],
              accept_groups: list[dict] | None = None, model_meta: dict | None = None
              ) -> dict[str, np.ndarray]:
    """Log prior density of each free parameter at every draw (for power-scaling);
    ``model_meta`` (a fit's ``meta["model"]``) gives each system's context-cost prior."""
    from scipy import stats

    P_ = priors.priors
    out = {}
    for name in ("step_ar_ms", "moe_share"):
        out[name] = prior_logpdf(P_[name], v[name]).sum(axis=1)
    out["ctx_ms_per_unit"] = np.sum([prior_logpdf(p, v["ctx_ms_per_unit"][:, k]) for k, p in
                                     enumerate(ctx_priors(priors, coords, model_meta))], axis=0)
    for name in ("moe_hw_sd", "ctx_verify_exponent", *FORM_PRIORS[priors.step_form],
                 *FORM_PRIORS.get(priors.moe_form, ()), "noise_sd", MOE_FORMS[priors.moe_form]):
        if P_[name].dist != "point":
            out[name] = prior_logpdf(P_[name], v[name])
    out["moe_z"] = stats.norm.logpdf(v["moe_z"]).sum(axis=1)
    if "overhead_z" in v and coords["overhead_group"]:
        out["overhead_z"] = stats.norm.logpdf(v["overhead_z"]).sum(axis=1)
    for name in ("spec_fixed", "spec_pass", "spec_tree", "compute_eff"):
        if f"{name}_engine_z" in v:   # the structured form's engine effects
            out[f"{name}_engine_z"] = stats.norm.logpdf(v[f"{name}_engine_z"]).sum(axis=1)
        if f"{name}_log" in v and v[f"{name}_log"].shape[1]:
            mu = v[f"{name}_mean"] if f"{name}_mean" in v else v[f"{name}_log_mu"][:, None]
            sd = v[f"{name}_log_sd"]
            sd = sd[:, None] if np.ndim(sd) else sd
            out[f"{name}_log"] = stats.norm.logpdf(v[f"{name}_log"], mu, sd).sum(axis=1)
        elif f"{name}_z" in v and v[f"{name}_z"].shape[1]:
            out[f"{name}_z"] = stats.norm.logpdf(v[f"{name}_z"]).sum(axis=1)
    if "spec_fixed_recurrent_z" in v:   # a fit with a hybrid target (engine/model.py)
        out["spec_fixed_recurrent_z"] = stats.norm.logpdf(v["spec_fixed_recurrent_z"]).sum(axis=1)
        if RECURRENT_SD in v and P_[RECURRENT_SD].dist != "point":   # its spread, if learned
            out[RECURRENT_SD] = prior_logpdf(P_[RECURRENT_SD], v[RECURRENT_SD])
    if "spec_amd_z" in v:   # a fit with AMD groups (engine/model.py)
        out["spec_amd_z"] = stats.norm.logpdf(v["spec_amd_z"]).sum(axis=1)
        for name in (AMD_MU, AMD_SD):
            if name in v and P_[name].dist != "point":
                out[name] = prior_logpdf(P_[name], v[name])
    for k, e in enumerate(coords["relation"]):
        out[f"reduction_{e}"] = prior_logpdf(priors.relations[e].prior, v["reduction"][:, k])
    if accept_groups:
        out[AL.NAME] = sum(AL.log_density(g["prior"]["dist"], g["prior"]["params"],
                                          v[AL.NAME][:, k]) for k, g in enumerate(accept_groups))
    if CONFIG_SHARE in v and P_[CONFIG_SHARE].dist != "point":
        out[CONFIG_SHARE] = prior_logpdf(P_[CONFIG_SHARE], v[CONFIG_SHARE])
    # a fit with rows at C > 1; a fit of several GPUs
    for name in (CTX_BATCH, *map(tp_prior, TP_LINKS)):
        if name in v and P_[name].dist != "point":
            out[name] = prior_logpdf(P_[name], v[name])
    # a term constant over the draws (the zero-sum engine effect of a fit with one engine) has
    # nothing to power-scale; ArviZ's psense refuses it ("All tail values are the same")
    return {k: a for k, a in out.items() if np.ptp(a) > 0}


# ------------------------------------------------------------------ helpers
def scalar_columns(v: dict[str, np.ndarray], coords: dict) -> dict[str, np.ndarray]:
    """Flatten vector parameters into labelled scalars: ``moe_share[b300x8]``."""
    dims = {"step_ar_ms": "system", "moe_share": "system", "ctx_ms_per_unit": "system",
            "moe_z": "system", "moe_exponent": "system", "moe_slope": "system",
            "moe_distinct_exponent": "system", "compute_eff": "system",
            "compute_eff_log": "system", "compute_eff_z": "system", "compute_tok_ratio": "system",
            "overhead_z": "overhead_group", "overhead_frac": "overhead_group",
            "reduction": "relation", AL.NAME: AL.DIM, "pair_roofline_ms": "system",
            "tp_tok_ms": "system"}
    for part in ("fixed", "pass", "tree"):
        for suffix in ("log", "z", "ratio"):
            dims[f"spec_{part}_{suffix}"] = "overhead_group"
        dims[f"spec_{part}_mean"] = "overhead_group"
        dims[f"spec_{part}_engine"] = dims[f"spec_{part}_engine_z"] = "engine"
    dims["spec_fixed_recurrent"] = dims["spec_fixed_recurrent_z"] = "engine"
    dims["spec_amd"] = dims["spec_amd_z"] = "engine"
    out = {}
    for name, arr in v.items():
        if arr.ndim == 1:
            out[name] = arr
        else:
            for j, label in enumerate(coords[dims[name]]):
                out[f"{name}[{label}]"] = arr[:, j]
    return out

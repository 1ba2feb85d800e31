"""Build the PyMC model from a :class:`~ddtree_bayes.core.spec.ModelSpec` and the priors.

Only builds: no sampling, no file I/O. The likelihood is on log tok/s:
``log tok_s_i ~ Normal(log(accept_i / step_ms_i * 1000), noise_sd)``, written on the
per-configuration sufficient statistics of :mod:`ddtree_bayes.core.likelihood` (exactly the same
log-density; its cost grows with distinct configurations, not rows).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.config import Prior, PriorsConfig, nu_problem
from ddtree_bayes.core.likelihood import CONFIG_SD, CONFIG_SHARE, RUN_SD
from ddtree_bayes.core.pairs import roofline_step_ms
from ddtree_bayes.engine.inference import reproducible_pytensor

reproducible_pytensor()   # before any model is compiled: same seed, same digits, cold or warm


def prior_rv(prior: Prior, name: str, **kwargs) -> pt.TensorVariable:
    """A PyMC random variable for a prior from the priors file."""
    p = prior.params
    if prior.dist == "point":  # a fixed value: recorded in the posterior, not sampled
        return pm.Deterministic(name, pt.as_tensor_variable(np.float64(p["value"])), **kwargs)
    if prior.dist == "normal":
        return pm.Normal(name, mu=p["mu"], sigma=p["sigma"], **kwargs)
    if prior.dist == "halfnormal":
        return pm.HalfNormal(name, sigma=p["sigma"], **kwargs)
    if prior.dist == "lognormal":
        return pm.LogNormal(name, mu=math.log(p["median"]), sigma=p["sigma"], **kwargs)
    if prior.dist == "beta":
        return pm.Beta(name, alpha=p["alpha"], beta=p["beta"], **kwargs)
    if prior.dist == "truncnormal":
        return pm.TruncatedNormal(name, mu=p["mu"], sigma=p["sigma"], lower=p["lower"],
                                  upper=p["upper"], **kwargs)
    if prior.dist == "uniform":
        return pm.Uniform(name, lower=p["lower"], upper=p["upper"], **kwargs)
    raise ValueError(f"prior {name}: dist {prior.dist!r} cannot be a model parameter")


def ctx_prior_rv(spec: S.ModelSpec, priors: PriorsConfig) -> pt.TensorVariable:
    """``ctx_ms_per_unit`` per system: LogNormal around its card's KV read x
    ``ctx_read_ratio`` where the card gives its KV layout, else the generic prior
    (core/context_cost.py); the generic prior's variable when no system has a read."""
    each = S.system_ctx_priors(spec, priors)
    generic = priors.priors["ctx_ms_per_unit"]
    if all(p is generic for p in each):
        return prior_rv(generic, "ctx_ms_per_unit", dims="system")
    return pm.LogNormal("ctx_ms_per_unit", mu=np.log([p.params["median"] for p in each]),
                        sigma=np.array([p.params["sigma"] for p in each]), dims="system")


#: Free parameters sampled by NUTS (the others in the posterior are deterministic).
def free_parameter_names(moe_form: str, step_form: str = "fraction",
                         priors: PriorsConfig | None = None, *,
                         multi_model: bool = False, repeated: bool = False,
                         concurrent: bool = False, links: tuple[str, ...] = ()
                         ) -> tuple[str, ...]:
    """Names NUTS samples for these forms (priors with ``dist = "point"`` are constants);
    ``multi_model``: a fit of several models (the pair roofline's parameters too);
    ``repeated``: data with repeated runs of a configuration (``config_sd`` too);
    ``concurrent``: data with rows at concurrency C > 1 (``ctx_batch_exponent`` too);
    ``links``: the multi-GPU link classes of the fit's systems (``tp_busbw_<link>_gb_s``)."""
    from ddtree_bayes.core.config import FORM_PRIORS, MOE_FORMS

    fixed = {n for n, pr in (priors.priors.items() if priors else ()) if pr.dist == "point"}

    names = ["step_ar_ms", "moe_share", MOE_FORMS[moe_form], "moe_hw_sd", "moe_z",
             "ctx_ms_per_unit", "ctx_verify_exponent", *FORM_PRIORS.get(moe_form, ())]
    if moe_form == "roofline":
        names.append("compute_eff_z")   # the pooled offsets are non-centred (see _pooled)
    names += FORM_PRIORS[step_form]
    names += ([f"spec_{p}_z" for p in ("fixed", "pass", "tree")]
              + [f"spec_{p}_engine_z" for p in ("fixed", "pass", "tree")]
              if step_form == "structured" else ["overhead_z"])
    if multi_model:
        from ddtree_bayes.core.pairs import PAIR_PRIORS

        names += PAIR_PRIORS
    if repeated and CONFIG_SHARE not in fixed:
        names.append(CONFIG_SHARE)
    if concurrent and S.CTX_BATCH not in fixed:
        names.append(S.CTX_BATCH)
    names += [S.tp_prior(cls) for cls in links if S.tp_prior(cls) not in fixed]
    return tuple(n for n in (*names, "reduction", "noise_sd") if n not in fixed)


def build_model(spec: S.ModelSpec, priors: PriorsConfig, *, refittable: bool = False,
                reparameterise: bool = False, centre_moe: bool = False) -> pm.Model:
    """The PyMC model of log tok/s for every measured row.

    The likelihood is the Potential ``log_tok_s`` (dims ``configuration``): per configuration
    c, ``sum_i log Normal(z_i | -log step_c, sd_c)`` over its rows, computed from their
    ``n``, ``zbar``, ``S2`` (:func:`ddtree_bayes.core.likelihood.normal_logp`).

    ``refittable=True`` makes those statistics data containers (``config_n``, ``config_zbar``,
    ``config_s2``), so one compiled model can be refit on other values or with rows held out
    (validation folds recompute them with the held-out rows' weight 0; SBC from simulated
    values) without recompiling. A plain fit leaves them constants: data containers cost
    extra numba compilation on every fit (docs/performance.md). The two give the same
    posterior.

    ``reparameterise=True`` draws the partially pooled offsets of :func:`_pooled` centred
    (they are non-centred by default), and ``centre_moe=True`` draws the per-system MoE shapes centred
    instead of through ``moe_z``: the same posterior, another geometry for NUTS; the last rung
    of the remedy ladder (engine/remedies.py). The variables of the default form stay in
    the posterior.

    Examples
    --------
    >>> from ddtree_bayes.api import load_inputs
    >>> data, cfg = load_inputs()
    >>> m = build_model(S.build_spec(data, cfg), cfg)
    >>> sorted(m.coords["system"])
    ['b300x8', 'rtx-pro-6000x8']
    """
    P = priors.priors
    c = spec.configs
    n_configs = len(c)
    with pm.Model(coords=spec.coords) as model:
        if spec.pair_roofline is not None:   # several models: the pair roofline prior
            step_ar = pair_step_prior(spec, P)
        else:
            step_ar = prior_rv(P["step_ar_ms"], "step_ar_ms", dims="system")
        moe_share = prior_rv(P["moe_share"], "moe_share", dims="system")
        moe_hw_sd = prior_rv(P["moe_hw_sd"], "moe_hw_sd")
        from ddtree_bayes.core.config import MOE_FORMS

        flip_moe = centre_moe and not (P["moe_hw_sd"].dist == "point"
                                           and P["moe_hw_sd"].params["value"] <= 0)
        moe_z = None if flip_moe else pm.Normal("moe_z", 0.0, 1.0, dims="system")
        mu = prior_rv(P[MOE_FORMS[spec.moe_form]], MOE_FORMS[spec.moe_form])
        if flip_moe:
            moe_shape = _centred_moe(spec.moe_form, mu, moe_hw_sd)
        elif spec.moe_form == "linear":
            moe_shape = pm.Deterministic("moe_slope", mu * pt.exp(moe_hw_sd * moe_z),
                                         dims="system")
        else:
            moe_shape = pm.Deterministic(S.SHAPE_NAMES[spec.moe_form], mu + moe_hw_sd * moe_z,
                                         dims="system")
        ctx_ms = ctx_prior_rv(spec, priors)
        ctx_exp = prior_rv(P["ctx_verify_exponent"], "ctx_verify_exponent")
        # (the fraction form's variables keep their original order: same seed, same draws)
        fraction = spec.step_form == "fraction"
        if fraction:
            ov_mu = prior_rv(P["overhead_logit_mu"], "overhead_logit_mu")
            ov_sd = prior_rv(P["overhead_logit_sd"], "overhead_logit_sd")
        noise = prior_rv(P["noise_sd"], "noise_sd")
        frac_cfg = pt.zeros(n_configs)
        if fraction and spec.groups:
            ov_z = pm.Normal("overhead_z", 0.0, 1.0, dims="overhead_group")
            frac = pm.Deterministic("overhead_frac", pm.math.sigmoid(ov_mu + ov_sd * ov_z),
                                    dims="overhead_group")
            frac_cfg = pt.concatenate([frac, pt.zeros(1)])[c.group]
        s = c.system
        roofline = {}
        if spec.moe_form == "roofline":
            eff_mu = prior_rv(P["compute_eff_log_mu"], "compute_eff_log_mu")
            eff_sd = prior_rv(P["compute_eff_log_sd"], "compute_eff_log_sd")
            log_eff = _pooled("compute_eff", eff_mu, eff_sd, P["compute_eff_log_sd"], "system",
                              flip=reparameterise)
            eff = pm.Deterministic("compute_eff", pt.exp(log_eff), dims="system")
            # one token's FLOPs at the achieved rate, in units of the M = 1 verify cost
            tok_ratio = pm.Deterministic("compute_tok_ratio",
                                         spec.system_flop_ms / eff / (moe_share * step_ar),
                                         dims="system")
            roofline = {"tok_ratio": tok_ratio[s], "distinct": c.distinct, "knee": spec.knee}
            tp = allreduce_tok_ms(spec, P)
            if tp is not None:
                roofline["tp_tok_ms"] = tp[s]
        ctx_streams = None   # (single-stream data: the graph of every earlier fit)
        if np.any(c.streams > 1):   # concurrency C > 1 rows: context x C ** g
            g = prior_rv(P[S.CTX_BATCH], S.CTX_BATCH)
            ctx_streams = pt.exp(g * np.log(c.streams))
        target = S.target_ms(step_ar[s], moe_share[s], moe_shape[s], ctx_ms[s], ctx_exp,
                             c.verify_tokens, c.context_units, spec.moe_form,
                             pt.exp, pt.log, concurrency=c.streams, ctx_streams=ctx_streams,
                             **roofline)

        scale_cfg = pt.ones(n_configs)
        if spec.relations:
            rel = [priors.relations[e].prior.params for e in spec.relations]
            reduction = pm.Beta("reduction", alpha=np.array([p["alpha"] for p in rel]),
                                beta=np.array([p["beta"] for p in rel]), dims="relation")
            scale_cfg = pt.concatenate([1.0 - reduction, pt.ones(1)])[c.relation]

        between_var: Any = 0.0   # variance of a configuration's own error (shared by its rows)
        if spec.step_form == "structured":
            spec_ms, distance = _structured_spec(spec, P, step_ar, scale_cfg, refittable,
                                                 reparameterise)
            step = target + spec_ms
            tau = prior_rv(P["structure_sd"], "structure_sd")
            between_var = (tau * distance) ** 2
        else:
            step = S.step_ms(target, frac_cfg, scale_cfg)
        run = noise   # one run's scatter; repeated runs tell its two parts apart (configs.py)
        if spec.repeated:
            share = prior_rv(P[CONFIG_SHARE], CONFIG_SHARE)
            run = pm.Deterministic(RUN_SD, noise * pt.sqrt(1.0 - share))
            between_var = between_var + pm.Deterministic(CONFIG_SD, noise * pt.sqrt(share)) ** 2
        # z_i = log tok_s_i - log(accept_i * 1000) ~ Normal(-log step_c, sigma_c); a latent
        # acceptance adds its group's log accept to this mean (core/likelihood.py)
        stats: tuple[Any, ...] = (c.n, c.zbar, c.s2)
        if refittable:   # see workflows/validation.py
            stats = tuple(pm.Data(f"config_{k}", v, dims="configuration")
                          for k, v in zip(("n", "zbar", "s2"), stats, strict=True))
        n, zbar, s2 = stats
        mean = latent_log_accept(spec) - pt.log(step)
        nu = likelihood_nu(P)
        if nu is not None:   # a configuration's mean Student-t (core/likelihood.config_logp)
            logp = C.config_logp(mean, run, 0.0, n, zbar, s2, nu, pt.log,
                                 between_var=between_var)
        elif spec.repeated:
            logp = C.grouped_logp(mean, run, pt.sqrt(between_var), n, zbar, s2, pt.log)
        else:   # one row per configuration: the same density, written as it always was
            logp = C.normal_logp(mean, pt.sqrt(noise ** 2 + between_var), n, zbar, s2, pt.log)
        pm.Potential("log_tok_s", logp, dims="configuration")
    return model


def likelihood_nu(P: dict[str, Prior]) -> float | None:
    """The likelihood's Student-t degrees of freedom: the priors' ``likelihood_nu`` (a fixed
    value, recorded in the posterior), or None (normal) when the priors have none."""
    prior = P.get(C.LIKELIHOOD_NU)
    problem = nu_problem(prior)   # (parse_priors refuses it in a file; a PriorsConfig built
    if problem:                   # in code reaches here)
        raise ValueError(f"prior {C.LIKELIHOOD_NU}: {problem}")
    if prior is None:
        return None
    nu = float(prior.params["value"])
    pm.Deterministic(C.LIKELIHOOD_NU, pt.as_tensor_variable(np.float64(nu)))
    return nu


def allreduce_tok_ms(spec: S.ModelSpec, P: dict[str, Prior]):
    """Per system, ms of tensor-parallel all-reduce per verified token (Deterministic
    ``tp_tok_ms``): the card's all-reduce volume (MB per token per GPU) over the link's bus
    bandwidth ``tp_busbw_<pcie|fabric>_gb_s`` (GB/s), one parameter per link class the fit
    has, shared by its systems. None when no system has more than one GPU (the graph of a
    single-GPU fit is unchanged)."""
    mb = spec.system_tp_mb
    if mb is None or not np.any(mb > 0):
        return None
    links = np.array(spec.system_link)
    busbw: Any = pt.ones(len(spec.systems))
    for cls in S.TP_LINKS:
        if np.any(links == cls):
            rv = prior_rv(P[S.tp_prior(cls)], S.tp_prior(cls))
            busbw = busbw + (links == cls).astype(float) * (rv - 1.0)
    return pm.Deterministic("tp_tok_ms", mb / busbw, dims="system")


def latent_log_accept(spec: S.ModelSpec):
    """Per configuration, ``log accept_latent[g]`` for a configuration of rows with a blank
    accept_len in acceptance group g (:mod:`ddtree_bayes.core.acceptance_latent`; their offset
    in ``z`` is ``log 1000``), 0 for the others (their ``log(accept_len * 1000)`` is data in
    ``z``). Without latent rows, the constant 0.

    ``accept_latent`` is Uniform(lower, upper) per group; a group whose prior is a truncated
    normal adds the normal's log kernel and normaliser (Potential ``accept_latent_prior``), so
    its prior density is exactly the truncated normal's (the uniform's ``-log(upper - lower)``
    is cancelled)."""
    groups = spec.accept_groups
    if not groups:
        return 0.0
    from ddtree_bayes.core import acceptance_latent as AL

    lower = np.array([g.prior.params["lower"] for g in groups])
    upper = np.array([g.prior.params["upper"] for g in groups])
    accept = pm.Uniform(AL.NAME, lower=lower, upper=upper, dims=AL.DIM)
    normal = [k for k, g in enumerate(groups) if g.prior.dist == "truncnormal"]
    if normal:
        mu = np.array([groups[k].prior.params["mu"] for k in normal])
        sd = np.array([groups[k].prior.params["sigma"] for k in normal])
        # log N(a | mu, sd) - log(Phi(upper') - Phi(lower')) + log(upper - lower)
        const = np.array([math.log(upper[k] - lower[k])
                          - AL.truncnormal_log_norm(groups[k].prior.params) for k in normal])
        z = (accept[normal] - mu) / sd
        pm.Potential(f"{AL.NAME}_prior", pt.sum(const - 0.5 * z ** 2))
    configs = spec.config_accept_group
    assert configs is not None
    index = np.where(configs >= 0, configs, len(groups))
    return pt.concatenate([pt.log(accept), pt.zeros(1)])[index]


def _structured_spec(spec: S.ModelSpec, P: dict[str, Prior], step_ar, scale_cfg,
                     refittable: bool = False, reparameterise: bool = False):
    """SPEC = step_ar x (fixed + pass x passes + tree x nodes), each ratio log-normal per
    (system, engine, method) group around the group's own mean (partial pooling):

    ``log ratio[g] ~ Normal(mean[g], sd)``, ``mean[g] = mu + engine[e(g)] + offset[g]``, where
    the engine effect ``engine[e] = engine_sd * z_e`` is shared by every group of engine e
    (whatever its model and GPU: what the corpus says of an engine carries to a new pair), and
    the effects sum to zero over the fit's engines (so ``mu`` is their mean), and the offset
    puts the mean in physical units: the fixed cost and the per-node tree cost are
    ms (``offset = -log step_ar``), the per-pass cost a multiple of the drafter-pass roofline
    (``offset = log(roofline ms) - log step_ar``; core/drafters.py).

    Returns (SPEC, discrepancy distance) per configuration. With ``refittable`` the distances and
    the "does this group's passes/nodes vary" masks are data containers, so a validation fold
    recomputes them from its training rows (held-out rows are not "measured")."""
    varies: dict[str, Any] = {"fixed": np.ones(len(spec.groups)), "pass": spec.group_passes_vary,
                              "tree": spec.group_nodes_vary}
    c = spec.configs
    distance = c.distance
    if refittable:
        distance = pm.Data("config_distance", c.distance, dims="configuration")
        for part in ("pass", "tree"):
            varies[part] = pm.Data(f"group_{part}_varies",
                                   np.asarray(varies[part], dtype=float), dims="overhead_group")
    ratios = []
    amd = None
    if spec.groups:
        assert spec.group_pass_roof_ms is not None and spec.group_engine is not None
        amd = _amd_effect(spec, P)
        log_step_ar = pt.log(step_ar[spec.group_system])
        offsets = {"fixed": -log_step_ar, "tree": -log_step_ar,
                   "pass": np.log(spec.group_pass_roof_ms) - log_step_ar}
    for part in ("fixed", "pass", "tree"):
        # the population priors exist even without groups: predict draws unmeasured groups
        mu = prior_rv(P[f"spec_{part}_log_mu"], f"spec_{part}_log_mu")
        sd = prior_rv(P[f"spec_{part}_log_sd"], f"spec_{part}_log_sd")
        eng_sd = prior_rv(P[f"spec_{part}_engine_sd"], f"spec_{part}_engine_sd")
        if not spec.groups:
            continue
        # zero-sum: mu is the mean over the fit's engines, not a ridge with their effects
        engine = pm.Deterministic(f"spec_{part}_engine",
                                  eng_sd * pm.ZeroSumNormal(f"spec_{part}_engine_z", sigma=1.0,
                                                            dims="engine"), dims="engine")
        mean = mu + engine[spec.group_engine] + offsets[part]
        if part == "fixed" and (recurrent := _recurrent_effect(spec, P)) is not None:
            mean = mean + recurrent
        if part != "tree" and amd is not None:
            mean = mean + amd
        mean = pm.Deterministic(f"spec_{part}_mean", mean, dims="overhead_group")
        log_ratio = _pooled(f"spec_{part}", mean, sd, P[f"spec_{part}_log_sd"], "overhead_group",
                            flip=reparameterise)
        # a group measured at one number of passes (or tree nodes) cannot tell that cost from
        # its fixed cost: it takes its mean, and its own offset stays with the prior
        log_ratio = pt.where(pt.gt(pt.as_tensor_variable(varies[part]), 0.5), log_ratio, mean)
        ratio = pm.Deterministic(f"spec_{part}_ratio", pt.exp(log_ratio), dims="overhead_group")
        ratios.append(pt.concatenate([ratio, pt.zeros(1)])[c.group])
    if not spec.groups:
        return pt.zeros(len(c)), distance
    fixed, per_pass, per_node = ratios
    # (a configuration of another drafter than its group's pays its own roofline's multiple)
    passes = c.passes if spec.config_pass_scale is None else c.passes * spec.config_pass_scale
    return (S.structured_spec_ms(step_ar[c.system], fixed, per_pass, per_node, passes, c.nodes,
                                 scale_cfg), distance)


def _recurrent_effect(spec: S.ModelSpec, P: dict[str, Prior]):
    """Per group, the extra log fixed cost of a hybrid target's speculative step in its engine:
    ``spec_fixed_recurrent[e] = spec_fixed_recurrent_sd * z_e`` for a group whose target has
    recurrent layers (the card's ``recurrent_layers``), 0 for the others. Learned per engine
    where the engine ran both kinds of target (vLLM: Qwen3.5/3.8 against Llama, Kimi, Gemma;
    docs/model.md "A hybrid target's fixed cost"); where it ran only one kind, or for an
    engine the fit never measured, it is the prior's (said by predict). None (the graph of
    every earlier fit) when no group's target is a hybrid."""
    rec = spec.group_recurrent
    if rec is None or not rec.any():
        return None
    sd = prior_rv(P[S.RECURRENT_SD], S.RECURRENT_SD)
    effect = pm.Deterministic("spec_fixed_recurrent",
                              sd * pm.Normal("spec_fixed_recurrent_z", 0.0, 1.0, dims="engine"),
                              dims="engine")
    return rec * effect[spec.group_engine]


def _amd_effect(spec: S.ModelSpec, P: dict[str, Prior]):
    """Per group, the extra log fixed and per-pass cost of a speculative step on an AMD GPU
    (ROCm, HIP or Vulkan; a gfx ``compute_capability``) in its engine:
    ``spec_amd[e] = spec_amd_log_mu + spec_amd_engine_sd * z_e`` for a group on an AMD GPU,
    0 for the others. Each engine's AMD backend is its own code (kernels, graph capture, the
    drafter's launches), so the effect is per engine around a mean shared by every engine:
    what the corpus measured of one engine on AMD informs the others. Where the fit has no
    AMD group the term is absent (the graph of every fit of CUDA deployments); an AMD question
    then draws it from the priors (engine/structure.py, said by predict). None without an
    AMD group."""
    flag = spec.group_amd
    if flag is None or not flag.any():
        return None
    mu = prior_rv(P[S.AMD_MU], S.AMD_MU)
    sd = prior_rv(P[S.AMD_SD], S.AMD_SD)
    effect = pm.Deterministic("spec_amd",
                              mu + sd * pm.Normal("spec_amd_z", 0.0, 1.0, dims="engine"),
                              dims="engine")
    return flag * effect[spec.group_engine]


def _pooled(name: str, mu, sd, sd_prior: Prior, dims: str, flip: bool = False):
    """Per-group log values around a population mean ``mu`` with spread ``sd``:
    non-centred (``<name>_z``, with ``<name>_log`` kept as a deterministic when the spread is
    a fixed value), or centred (``<name>_log``, with ``<name>_z`` kept as a deterministic)
    with ``flip`` (rung 3 of the remedy ladder). A fixed spread of 0 or less has nothing to
    centre: it stays non-centred.

    Non-centred in every fit: most groups' offsets are barely informed (a group measured at
    one number of passes keeps its per-pass offset at the prior; most GPUs' compute
    efficiency sits far from their knee), and centred around a moving ``mu`` they tie it to
    each of them. Measured (docs/performance.md, "Group offsets non-centred in every fit"):
    the bundled fit 0 divergences in 8 seeds and 63 leapfrog steps per draw, against 1
    divergence and 78 steps centred; single public sweeps pass their gates at once at least
    as often; the corpus fit of several models was non-centred already (centred, its
    ``compute_eff_log_mu`` mixed slowly: bulk ESS 164-391)."""
    fixed = sd_prior.dist == "point"
    if flip and not (fixed and sd_prior.params["value"] <= 0):
        log = pm.Normal(f"{name}_log", mu, sd, dims=dims)
        pm.Deterministic(f"{name}_z", (log - mu) / sd, dims=dims)
        return log
    log = mu + sd * pm.Normal(f"{name}_z", 0.0, 1.0, dims=dims)
    return pm.Deterministic(f"{name}_log", log, dims=dims) if fixed else log


def _centred_moe(moe_form: str, mu, sd):
    """The per-system MoE shape drawn centred around ``mu`` (the default draws ``moe_z`` and
    scales it); ``moe_z`` is kept as a deterministic so every reader of a fit finds it."""
    if moe_form == "linear":
        log_slope = pm.Normal("moe_slope_log", pt.log(mu), sd, dims="system")
        pm.Deterministic("moe_z", (log_slope - pt.log(mu)) / sd, dims="system")
        return pm.Deterministic("moe_slope", pt.exp(log_slope), dims="system")
    shape = pm.Normal(S.SHAPE_NAMES[moe_form], mu, sd, dims="system")
    pm.Deterministic("moe_z", (shape - mu) / sd, dims="system")
    return shape


def pair_step_prior(spec: S.ModelSpec, P: dict[str, Prior]):
    """A fit of several models: the M = 1 step of each (model, system) pair around the pair
    roofline of its model card and hardware (core/pairs.py), whose bandwidth efficiency,
    per-layer costs and scatter are learned across the pairs (centred: the measured pairs'
    steps are pinned by their rows)."""
    f = spec.pair_roofline
    assert f is not None
    eff = prior_rv(P["pair_bw_eff"], "pair_bw_eff")
    layer = prior_rv(P["pair_layer_ms"], "pair_layer_ms")
    fabric = prior_rv(P["pair_allreduce_fabric_ms"], "pair_allreduce_fabric_ms")
    pcie = prior_rv(P["pair_allreduce_pcie_ms"], "pair_allreduce_pcie_ms")
    sd = prior_rv(P["pair_step_sd"], "pair_step_sd")
    roof = pm.Deterministic("pair_roofline_ms",
                            roofline_step_ms(f["stream_ms"], f["layers"], f["fabric"], f["pcie"],
                                             eff, layer, fabric, pcie), dims="system")
    return pm.LogNormal("step_ar_ms", mu=pt.log(roof), sigma=sd, dims="system")

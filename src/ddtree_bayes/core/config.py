"""Priors file loading and validation, sampler settings and reporting constants.

Knows nothing of PyMC: a prior here is a name, a distribution and its parameters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ddtree_bayes.core.data import MAX_CONTEXT_TOKENS, NAME_RE, counted, not_a_name
from ddtree_bayes.core.errors import PriorsError, typo_fix
from ddtree_bayes.core.methods import (
    AR_METHOD,
    AcceptLimit,
    MethodSpec,
    max_accept,
    parse_methods,
    toml_tables,
)
from ddtree_bayes.core.pairs import same_family

#: Interval probabilities printed by ``predict`` (the widest is the headline interval).
INTERVAL_PROBS: tuple[float, ...] = (0.5, 0.9)
#: Seed used when the user gives none; one seed flows through fit and predict.
DEFAULT_SEED = 20261130
#: The largest seed a command takes (--seed 0 to 4294967295; the API's the same).
MAX_SEED = 2**32 - 1


def is_seed(value: object) -> bool:
    """Whether ``value`` is a seed a command takes: a whole number (not a bool) from 0 to
    :data:`MAX_SEED` (numpy meets -1 with a bare ValueError and 1.5 with a TypeError).

    >>> [is_seed(v) for v in (0, 2**32 - 1, -1, 2**32, 1.5, True)]
    [True, True, False, False, False, False]
    """
    import numbers

    return (not isinstance(value, bool) and isinstance(value, numbers.Integral)
            and 0 <= int(value) <= MAX_SEED)


#: The question the original estimator answered: B300, DDTree block 16, budget 32,
#: in the SGLang pipeline and a native engine. ``predict`` with no flags asks it of a fit that
#: measured B300 (for the model asked about); a fit that never did is asked its own most-measured
#: system instead (core/default_question.py).
@dataclass(frozen=True)
class DefaultQuestion:
    hardware: str
    method: str
    block: int | None
    budget: int | None
    engines: tuple[str, ...]
    #: None: the fit's measured GPU count on that hardware
    gpus: int | None = None
    #: None: from method, block and budget (core.data.derive_verify_tokens)
    verify_tokens: int | None = None
    #: None for the bundled default; else why the fit's own default was asked instead
    why: str | None = None
    #: the acceptance of one-number answers (the report's answer line, the tracked default):
    #: 14, the middle of the original estimate's 12-16, for the bundled default
    accept: float = 14.0
    #: a default whose ``accept`` no source gives (no acceptance measured, inferred or in the
    #: priors for it: the bundled question's 14, or the middle of [1, M] of a derived one; the
    #: bundled question kept for a model of AR rows only on B300 too): predict refuses the
    #: question without ``--accept``, so the tracked default does not answer it
    accept_assumed: bool = False

    @property
    def derived(self) -> bool:
        """Derived from a fit's own measurements (not the bundled default)?"""
        return self.why is not None

    def describe(self) -> str:
        """``llama.cpp mtp block 4 on rtx-5090 x1``: engines, method, shape, system."""
        shape = "".join(f" {k} {v}" for k, v in (("block", self.block), ("budget", self.budget),
                                                 ("verify", self.verify_tokens)) if v is not None)
        where = self.hardware + ("" if self.gpus is None else f" x{self.gpus}")
        return f"{','.join(self.engines)} {self.method}{shape} on {where}"

    def to_json(self) -> dict:
        """The machine form (the ``default_scenario`` object of ``--format json``)."""
        return {"hardware": self.hardware, "gpus": self.gpus, "method": self.method,
                "block": self.block, "budget": self.budget, "verify_tokens": self.verify_tokens,
                "engines": list(self.engines), "accept": self.accept, "why": self.why,
                "asked": self.describe()}


DEFAULT_QUESTION = DefaultQuestion(hardware="b300", method="ddtree", block=16, budget=32,
                            engines=("sglang", "native"))
#: Convergence gates applied after every fit.
MAX_RHAT = 1.01
MIN_ESS_BULK = 400
MAX_DIVERGENCES = 0

#: Parameters of each distribution, and which must be > 0.
DISTRIBUTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "normal": (("mu", "sigma"), ("sigma",)),
    "halfnormal": (("sigma",), ("sigma",)),
    "lognormal": (("median", "sigma"), ("median", "sigma")),
    "beta": (("alpha", "beta"), ("alpha", "beta")),
    "truncnormal": (("mu", "sigma", "lower", "upper"), ("sigma",)),
    "uniform": (("lower", "upper"), ()),
    "point": (("value",), ()),
}

#: Model parameters the priors file must define; `per` says how many copies exist.
MODEL_PRIORS: dict[str, str] = {
    "step_ar_ms": "system",
    "moe_share": "system",
    "moe_hw_sd": "global",
    "ctx_ms_per_unit": "system",
    "ctx_verify_exponent": "global",
    "noise_sd": "global",
    "config_share": "global",
}
#: How the verify (MoE / weight-streaming) cost grows with M, and the prior each form's
#: growth parameter takes (see docs/model.md): a power of M, a line in M, or a roofline (a
#: power of the distinct experts M tokens touch, joined to a compute part linear in M).
MOE_FORMS = {"power": "moe_exponent_mu", "linear": "moe_slope_mu",
             "roofline": "moe_distinct_exponent_mu"}
#: How SPEC is written: a fixed fraction of the target step (the original language), or
#: structured as fixed + drafter passes + tree construction (docs/model.md).
STEP_FORMS = ("structured", "fraction")
#: Further global priors a form needs.
FORM_PRIORS: dict[str, tuple[str, ...]] = {
    "roofline": ("compute_eff_log_mu", "compute_eff_log_sd"),
    "structured": ("spec_fixed_log_mu", "spec_fixed_log_sd", "spec_fixed_engine_sd",
                   "spec_pass_log_mu", "spec_pass_log_sd", "spec_pass_engine_sd",
                   "spec_tree_log_mu", "spec_tree_log_sd", "spec_tree_engine_sd", "structure_sd"),
    "fraction": ("overhead_logit_mu", "overhead_logit_sd"),
}
#: Every ``[priors.<name>]`` the code reads: the model's, each form's, and the optional ones
#: (the Student-t likelihood, the concurrency terms, the all-reduce bus bandwidths, the pair
#: roofline of a fit of several models). A name not among them is refused, not ignored: a
#: misspelt ``[priors.likelihod_nu]`` left the fit on the normal likelihood without a word.
#: (tests/test_priors_validation.py checks it against the constants of the modules that read
#: them: core/spec.py, core/pairs.py, core/likelihood.py, engine/structure.py.)
KNOWN_PRIORS = tuple(dict.fromkeys([
    *MODEL_PRIORS, *MOE_FORMS.values(), *(n for names in FORM_PRIORS.values() for n in names),
    "likelihood_nu", "ctx_batch_exponent", "concurrency_sd", "tp_busbw_pcie_gb_s",
    "tp_busbw_fabric_gb_s", "pair_bw_eff", "pair_layer_ms", "pair_allreduce_fabric_ms",
    "pair_allreduce_pcie_ms", "pair_step_sd", "spec_fixed_recurrent_sd",
    "spec_amd_log_mu", "spec_amd_engine_sd", "ctx_read_ratio",
    "ctx_read_ratio_one_head"]))
#: Priors of the predict-time hardware transfer (``[transfer.*]``), see docs/model.md.
TRANSFER_PRIORS = ("bandwidth_elasticity", "interconnect_factor", "system_sd")


@dataclass(frozen=True)
class Domain:
    """What a parameter can be: from ``low`` to ``high`` (``open_low``: above ``low``, not at
    it: a time or bandwidth the model divides by or takes the log of), and ``what`` it is,
    for the refusal of a prior reaching outside."""

    low: float
    high: float
    what: str
    open_low: bool = False

    def describe(self) -> str:
        if math.isinf(self.high):
            return f"above {self.low:g}" if self.open_low else f"at least {self.low:g}"
        return f"from {self.low:g} to {self.high:g}"

    def fix(self) -> str:
        if math.isinf(self.high):
            return (f"give it a prior on ({self.low:g}, inf): lognormal or halfnormal, or "
                    f"uniform / truncnormal with lower >= {self.low:g}")
        return (f"give it a prior on [{self.low:g}, {self.high:g}]: beta, or uniform / "
                f"truncnormal with {self.low:g} <= lower < upper <= {self.high:g}")


_SD = Domain(0.0, math.inf, "a standard deviation")
_MS = Domain(0.0, math.inf, "a time in ms")
_SHARE = Domain(0.0, 1.0, "a share")
_REAL = Domain(-math.inf, math.inf, "any number")
#: What each prior's parameter can be (``transfer.<name>`` for the hardware transfer's): a
#: prior reaching outside is refused. Checked for its own parameters only, a normal
#: ``noise_sd`` fitted, converged and saved with 37% of its draws below 0, and a share could
#: pass 1 or a step time 0. (tests/test_priors_validation.py: every name has one.)
PRIOR_DOMAINS: dict[str, Domain] = {
    "step_ar_ms": Domain(0.0, math.inf, "an autoregressive step time in ms", open_low=True),
    "moe_share": _SHARE, "config_share": _SHARE,
    "moe_slope_mu": Domain(0.0, math.inf, "a slope of the MoE time in M", open_low=True),
    "noise_sd": Domain(0.0, math.inf, "a standard deviation of log tok/s", open_low=True),
    "tp_busbw_pcie_gb_s": Domain(0.0, math.inf, "a bus bandwidth in GB/s", open_low=True),
    "tp_busbw_fabric_gb_s": Domain(0.0, math.inf, "a bus bandwidth in GB/s", open_low=True),
    "ctx_read_ratio": Domain(0.0, math.inf, "a multiple of the KV read", open_low=True),
    "ctx_read_ratio_one_head": Domain(0.0, math.inf, "a multiple of the KV read",
                                      open_low=True),
    "pair_bw_eff": Domain(0.0, 1.0, "a bandwidth efficiency", open_low=True),
    "ctx_ms_per_unit": _MS, "pair_layer_ms": _MS, "pair_allreduce_fabric_ms": _MS,
    "pair_allreduce_pcie_ms": _MS,
    **{name: _SD for name in ("moe_hw_sd", "overhead_logit_sd", "concurrency_sd",
                              "compute_eff_log_sd", "spec_fixed_engine_sd", "spec_fixed_log_sd",
                              "spec_fixed_recurrent_sd", "spec_amd_engine_sd",
                              "spec_pass_engine_sd", "spec_pass_log_sd", "spec_tree_engine_sd",
                              "spec_tree_log_sd", "structure_sd", "pair_step_sd")},
    **{name: _REAL for name in ("moe_exponent_mu", "moe_distinct_exponent_mu",
                                "overhead_logit_mu", "compute_eff_log_mu", "spec_fixed_log_mu",
                                "spec_amd_log_mu", "spec_pass_log_mu", "spec_tree_log_mu",
                                "ctx_verify_exponent", "ctx_batch_exponent", "likelihood_nu")},
    "transfer.bandwidth_elasticity": Domain(
        0.0, 1.0, "an elasticity from 0 (not bandwidth-bound) to 1"),
    "transfer.interconnect_factor": Domain(0.0, math.inf, "a factor on the fixed step work",
                                           open_low=True),
    "transfer.system_sd": _SD,
}


def prior_support(prior: Prior) -> tuple[float, float]:
    """The smallest and largest value ``prior`` can draw.

    >>> prior_support(Prior("x", "truncnormal", {"mu": 0, "sigma": 1, "lower": -1, "upper": 2}))
    (-1, 2)
    """
    p = prior.params
    if prior.dist == "point":
        return p["value"], p["value"]
    if prior.dist in ("uniform", "truncnormal"):
        return p["lower"], p["upper"]
    if prior.dist == "beta":
        return 0.0, 1.0
    if prior.dist in ("halfnormal", "lognormal"):
        return 0.0, math.inf
    return -math.inf, math.inf


def domain_problem(prior: Prior, name: str) -> tuple[str, str] | None:
    """(why, fix) when ``prior`` can draw a value its parameter ``name`` cannot take
    (:data:`PRIOR_DOMAINS`), else None.

    >>> domain_problem(Prior("noise_sd", "normal", {"mu": 0.03, "sigma": 0.03}), "noise_sd")[0]
    'normal(mu=0.03, sigma=0.03) reaches below 0, but noise_sd is a standard deviation of \
log tok/s (above 0)'
    """
    domain = PRIOR_DOMAINS.get(name)
    if domain is None:
        return None
    lo, hi = prior_support(prior)
    shown = f"{prior.dist}({', '.join(f'{k}={v:g}' for k, v in prior.params.items())})"
    if lo < domain.low or hi > domain.high:
        where = (f"below {domain.low:g}" if math.isinf(domain.high) else
                 f"outside [{domain.low:g}, {domain.high:g}]")
        problem = f"reaches {where}"
    elif domain.open_low and prior.dist == "point" and lo <= domain.low:
        problem = f"is not above {domain.low:g}"
    else:
        return None
    return (f"{shown} {problem}, but {name.removeprefix('transfer.')} is {domain.what} "
            f"({domain.describe()})", domain.fix())


#: Keys of a priors file's ``[model]`` table (a key not among them is refused: a typo such as
#: ``step_fom`` would leave the form at its default without a word).
MODEL_KEYS = ("moe_form", "step_form", "knee_sharpness", "context_unit_tokens",
              "default_context_tokens")
#: Top-level sections of a priors file.
KNOWN_SECTIONS = frozenset({"model", "priors", "relations", "acceptance", "transfer", "methods",
                            "acceptance_curve"})
#: Acceptance priors must not put mass below 1 token per step.
ACCEPTANCE_DISTS = ("point", "uniform", "truncnormal")


#: Draws per chain when none are asked for, and for a model of more than
#: :data:`LARGE_MODEL` free parameters (:func:`default_draws`).
DEFAULT_DRAWS = 1000
LARGE_MODEL_DRAWS = 3000
LARGE_MODEL = 100


def default_draws(n_free: int) -> int:
    """Draws per chain for a model of ``n_free`` free parameters when none are asked for.

    The gates take the least bulk ESS and the largest R-hat over every parameter, and the
    least-mixed of a few hundred hierarchical parameters falls just short in most seeds: the
    public corpus (211 parameters) passed at once on 2 of 10 seeds with 1000 draws per chain,
    7 of 10 with 2000 and 10 of 10 with 3000 (median sampling 15.1, 21.8 and 33.3 s;
    bench/bench_corpus_gates.py, docs/performance.md): 3000 costs about what 2000 costs with
    its reruns, and never reruns. A single sweep or the bundled data (18-34 parameters) keeps
    1000.

    >>> default_draws(34), default_draws(211)
    (1000, 3000)
    """
    return LARGE_MODEL_DRAWS if n_free > LARGE_MODEL else DEFAULT_DRAWS


@dataclass(frozen=True)
class SamplerSettings:
    """NUTS settings for one fit. ``backend`` is 'nutpie' (default) or 'pymc'. ``draws``
    None: :func:`default_draws` for the model, resolved (:meth:`for_model`) before sampling."""

    chains: int = 4
    draws: int | None = None
    tune: int = 1000
    target_accept: float = 0.99  # see docs/model.md, "Sampling"
    backend: str = "nutpie"

    def for_model(self, n_free: int) -> SamplerSettings:
        """These settings with ``draws`` resolved for a model of ``n_free`` free parameters."""
        if self.draws is not None:
            return self
        return dataclasses.replace(self, draws=default_draws(n_free))

    @property
    def n_draws(self) -> int:
        """``draws``, resolved (a sampler asked with ``draws`` None is a programming error)."""
        if self.draws is None:
            raise ValueError("draws not resolved: call SamplerSettings.for_model first")
        return self.draws

    def draws_label(self) -> str:
        """``draws`` for a progress line ("auto" before it is resolved)."""
        return "auto" if self.draws is None else str(self.draws)

    def chains_x_draws(self) -> str:
        """``4 chains x 1000 draws`` for a progress line (``1 chain x 1 draw``; ``auto draws``
        before ``draws`` is resolved)."""
        draws = f"{self.draws_label()} draws" if self.draws is None else counted(self.draws,
                                                                                 "draw")
        return f"{counted(self.chains, 'chain')} x {draws}"

    def as_dict(self) -> dict[str, object]:
        return {"chains": self.chains, "draws": self.draws_label() if self.draws is None
                else self.draws, "tune": self.tune,
                "target_accept": self.target_accept, "backend": self.backend}


@dataclass(frozen=True)
class Prior:
    """One prior: ``dist`` with ``params``; ``per`` is 'global' or 'system'."""

    name: str
    dist: str
    params: dict[str, float]
    per: str = "global"
    rationale: str = ""
    source: str = ""

    def mean(self) -> float:
        """Prior mean (used for documentation and tests)."""
        p = self.params
        if self.dist == "normal":
            return p["mu"]
        if self.dist == "halfnormal":
            return p["sigma"] * math.sqrt(2 / math.pi)
        if self.dist == "lognormal":
            return p["median"] * math.exp(p["sigma"] ** 2 / 2)
        if self.dist == "beta":
            return p["alpha"] / (p["alpha"] + p["beta"])
        if self.dist == "uniform":
            return (p["lower"] + p["upper"]) / 2
        if self.dist == "point":
            return p["value"]
        raise NotImplementedError(f"mean of {self.dist}")


@dataclass(frozen=True)
class Relation:
    """``SPEC_engine = (1 - reduction) * SPEC_base`` on the same system and method."""

    engine: str
    base: str
    prior: Prior


@dataclass(frozen=True)
class AcceptancePrior:
    """Acceptance prior for predict queries matching ``method``/``block``/``budget``."""

    prior: Prior
    method: str | None = None
    block: int | None = None
    budget: int | None = None
    #: the limit that truncated the file's prior (:meth:`capped`), None when it did not
    capped_by: AcceptLimit | None = None
    #: the target model the entry was measured on (any deployment name of it matches);
    #: None: every model. Acceptance is a property of the drafter and the target.
    model: str | None = None
    #: the drafter card whose acceptance the entry is (a card measurement rows name in their
    #: ``drafter`` column, default no); None: the default drafter's (rows with a blank column)
    drafter: str | None = None

    def matches(self, method: str, block: int | None, budget: int | None,
                model: str | None = None, drafter: str | None = None) -> bool:
        """Does the entry answer this configuration of ``drafter`` (None: the default
        drafter)? An entry of one ``model`` answers only that model (``model`` None, an
        artifact that names none: any); an entry answers only its own drafter's questions
        (one without a drafter, the default drafter's), a named drafter's acceptance being
        its own, not the default head's."""
        return ((self.method is None or self.method == method)
                and (self.block is None or self.block == block)
                and (self.budget is None or self.budget == budget)
                and (self.model is None or model is None or same_family(self.model, model))
                and self.drafter == drafter)

    def describe(self) -> str:
        p = self.prior
        args = ", ".join(f"{k}={v:g}" for k, v in p.params.items())
        cut = "" if self.capped_by is None else f", truncated at {self.capped_by.rule}"
        return f"{p.dist}({args}{cut})"

    def capped(self, limit: AcceptLimit) -> AcceptancePrior:
        """This prior for a configuration that can emit at most ``limit.tokens`` per step
        (:func:`~ddtree_bayes.core.methods.max_accept`): a uniform or truncated normal whose
        upper bound lies above is truncated there (``capped_by`` says so); a prior with no
        mass at or below the limit is a :class:`PriorsError`.

        >>> wide = AcceptancePrior(Prior("a", "uniform", {"lower": 1.0, "upper": 33.0}), "ddtree")
        >>> wide.capped(max_accept("ddtree", 16, 32)).describe()
        'uniform(lower=1, upper=16, truncated at block - 1 drafts + 1)'
        """
        p = self.prior.params
        top = p.get("upper", p.get("value", 1.0))
        if top <= limit.tokens:
            return self
        lower = p.get("lower", p.get("value", 1.0))
        if self.prior.dist == "point" or lower >= limit.tokens:
            raise PriorsError(f"the acceptance prior {self.describe()} puts no mass at or below "
                              f"{limit.tokens:g}: " + limit.refusal("it"),
                              column=self.prior.name,
                              fix="add an [[acceptance]] entry for this method and block")
        prior = dataclasses.replace(self.prior, params={**p, "upper": limit.tokens})
        return dataclasses.replace(self, prior=prior, capped_by=limit)


@dataclass(frozen=True)
class PriorsConfig:
    """A validated priors file."""

    path: str
    text: str
    moe_form: str
    context_unit_tokens: float
    default_context_tokens: float
    priors: dict[str, Prior]
    relations: dict[str, Relation] = field(default_factory=dict)
    acceptance: tuple[AcceptancePrior, ...] = ()
    #: predict-time priors for hardware without measurements (``[transfer.<name>]``)
    transfer: dict[str, Prior] = field(default_factory=dict)
    #: "fraction" (SPEC = target x f / (1 - f)) or "structured" (fixed + passes + tree)
    step_form: str = "fraction"
    #: how each speculative method drafts (``[methods.<name>]``); used by the structured form
    methods: dict[str, MethodSpec] = field(default_factory=dict)
    #: exponent p of the smooth maximum joining the roofline's memory and compute parts
    knee_sharpness: float = 3.0
    #: ``[acceptance_curve]``'s ``model`` and ``method`` as written (None: absent or not a
    #: string), which optimize reads (core/acceptance_config.py) and fit checks against the
    #: rows, cards and methods (:func:`check_priors_names`) without parsing the text again
    curve_model: str | None = None
    curve_method: str | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def declared_names(self) -> dict[str, set[str]]:
        """The engines and methods these priors name without a measurement: an engine with a
        relation and its base; a method with an acceptance prior or a ``[methods]`` table,
        ``ar`` and the default question's method (predict knows them unmeasured)."""
        engines = set(self.relations) | {r.base for r in self.relations.values()}
        methods = ({AR_METHOD, DEFAULT_QUESTION.method} | set(self.methods)
                   | {a.method for a in self.acceptance if a.method})
        return {"engine": engines, "method": methods}

    def acceptance_for(self, method: str, block: int | None, verify_tokens: int,
                       model: str | None = None, drafter: str | None = None
                       ) -> AcceptancePrior | None:
        """First acceptance prior matching the configuration (of ``model``), or None. An
        entry's ``budget`` is the draft tokens verified per step, ``verify_tokens - 1``,
        however the configuration wrote it: predict matched a chain by its written budget
        (blank unless ``--budget`` was typed) and the fit by M - 1, so one eagle3 entry of
        budget 3 was the prior of the inferred acceptance and of ``--budget 3``, and not of
        the same question asked without the flag. ``drafter``: a drafter card rows name
        (None: the default drafter), whose entries are those that name it."""
        budget = verify_tokens - 1 if verify_tokens > 1 else None
        for entry in self.acceptance:
            if entry.matches(method, block, budget, model, drafter):
                return entry
        return None


def parse_prior(path: str, name: str, raw: object, *, where: str, extra: tuple[str, ...] = (),
                strict: bool = False) -> Prior:
    """One prior table. ``strict``: a key neither its distribution, the common ones
    (``dist``, ``rationale``, ``source``, ``per``) nor ``extra`` (the section's own, e.g. a
    relation's ``base``) is refused: ``sigam = 0.2`` beside ``sigma`` was ignored."""
    column = f"{where}.{name}" if where else name

    def fail(msg: str, fix: str) -> PriorsError:
        return PriorsError(msg, file=path, column=column, fix=fix)

    if not isinstance(raw, dict):
        header = f"[[{where or name.split('[')[0]}]]" if not where else f"[{column}]"
        raise fail("must be a table", f"write it as {header} with dist = ...")
    dist = raw.get("dist")
    if not isinstance(dist, str) or dist not in DISTRIBUTIONS:
        raise fail(f"unknown dist {dist!r}",
                   "use one of " + ", ".join(sorted(DISTRIBUTIONS)))
    needed, positive = DISTRIBUTIONS[dist]
    known = (*needed, "dist", "rationale", "source", "per", *extra)
    unknown = [k for k in raw if k not in known] if strict else []
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} in a {dist} prior",
                   typo_fix(unknown[0], known, "it takes " + ", ".join(known)))
    params: dict[str, float] = {}
    for key in needed:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise fail(f"{dist} needs a finite number '{key}'", f"add {key} = <number>")
        params[key] = float(value)
        if key in positive and value <= 0:
            raise fail(f"'{key}' must be > 0, got {value}", f"set {key} to a positive number")
    if "lower" in params and params["lower"] >= params["upper"]:
        raise fail("'lower' must be below 'upper'", "swap or widen the bounds")
    for key in ("rationale", "source"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise fail(f"missing '{key}'", f'add {key} = "..." saying why this prior is what it is')
    per = raw.get("per", "global")
    if per not in ("global", "system"):
        raise fail(f"'per' must be 'global' or 'system', got {per!r}", "set per = \"system\" or remove it")
    return Prior(name=name, dist=dist, params=params, per=per,
                 rationale=raw["rationale"], source=raw["source"])


def load_priors(path: str | Path) -> PriorsConfig:
    """Read and validate a priors TOML file.

    Raises :class:`PriorsError` naming the file and the entry for anything wrong.

    Examples
    --------
    >>> from ddtree_bayes.core.paths import bundled
    >>> cfg = load_priors(bundled("priors.toml"))
    >>> cfg.moe_form, cfg.step_form
    ('roofline', 'structured')
    """
    from ddtree_bayes.core import per_call

    path = str(path)
    try:
        text = per_call.read_text(path)   # (once per command: core/per_call.py)
    except OSError as err:
        raise PriorsError(f"cannot read priors file: {err.strerror}", file=path,
                          fix="pass an existing file with --priors") from None
    return parse_priors(text, path)


def target_model(spec: dict, path: str, column: str, *, stored: bool = False) -> str | None:
    """The optional ``model`` an acceptance entry or curve was written for (stripped), None
    when absent; anything but a non-empty name is a :class:`PriorsError` at ``column``, and
    so is one the data files cannot name (``Kimi-K2.6`` answered no model: ``predict`` then
    said there was no acceptance prior), unless ``stored`` (a saved fit's, as it was fitted)."""
    value = spec.get("model")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise PriorsError("'model' must be a model name", file=path, column=column,
                          fix='set model = "<target model>" or leave it out (every model)')
    if not stored and not NAME_RE.fullmatch(value.strip()):
        problem, fix = not_a_name(value.strip())
        raise PriorsError(problem, file=path, column=column, fix=fix)
    return value.strip()


def check_priors_names(cfg: PriorsConfig, *, engines: set[str], models: set[str],
                       where: str, cards: Iterable[str] = (), drafters: tuple = ()) -> None:
    """Refuse (:class:`PriorsError`, file and key) a name in the priors that names nothing:
    matched by name, a typo is matched by nothing, and its prior silently does nothing.

    - ``[relations.<engine>] base``: an engine of the data's rows (``engines``); one no row
      measures is kept (a relation of engines not yet measured, as the bundled native ->
      sglang beside rows of vLLM alone: predict prices the engine from the base's unmeasured
      group) unless it is a typo (one edit, or another case) of a measured engine.
      :func:`priors_names_warnings` says when the relation's engine has rows and its base none.
    - ``[[acceptance]] model`` and ``[acceptance_curve] model`` (``cfg.curve_model``): a model of
      the rows (``models``) or of a model card (``cards``: built in or the user's), or a
      deployment name of one (:func:`~ddtree_bayes.core.pairs.same_family`); a model with a
      card and no row yet is kept (its entry waits for its rows and predict's questions).

    - ``[acceptance_curve] method`` (``cfg.curve_method``): a method the file declares
      (``[methods.<name>]``), as :func:`~ddtree_bayes.core.acceptance_config.
      parse_acceptance_curve` refuses it for ``optimize``.
    - ``[[acceptance]] drafter``: a drafter card of ``drafters`` (built in, overlaid by
      data/drafters.csv) that drafts the entry's method for its model (any target, for an
      entry of every model) and is not its default card, which an entry without a drafter is
      (as a measurement row's drafter column: core/drafters.py ``drafter_problem``).

    A relation's own engine (``native``) names what is not measured by design; ``[methods.*]``
    declares methods, and an entry's ``method`` is checked by :func:`parse_priors`; no key of
    the priors file names hardware. ``where``: the data file, for the message.

    >>> from ddtree_bayes.core.paths import bundled
    >>> cfg = load_priors(bundled("priors.toml"))
    >>> check_priors_names(cfg, engines={"vllm"}, models={"qwen3-8b"}, where="d.csv",
    ...                    cards={"kimi-k2.6"})
    >>> try:
    ...     check_priors_names(cfg, engines={"sglnag"}, models={"kimi-k2.6"}, where="d.csv")
    ... except PriorsError as err:
    ...     print(err.column, str(err).split(": ", 1)[1].split(" (fix")[0])
    relations.native.base base engine 'sglang' is the engine of no row of d.csv, whose rows \
name 'sglnag': one of the two is a typo
    """
    from ddtree_bayes.core.data import one_edit

    for engine, rel in cfg.relations.items():
        base = rel.base
        near = sorted(e for e in engines if e != base and (one_edit(base, e)
                                                           or base.lower() == e.lower()))
        if base not in engines and near:
            # (which of the two is the typo only the user knows: the rows may be misspelt)
            raise PriorsError(f"base engine {base!r} is the engine of no row of {where}, "
                              f"whose rows name {near[0]!r}: one of the two is a typo",
                              file=cfg.path, column=f"relations.{engine}.base",
                              fix=f"spell the engine alike in both (did you mean {near[0]}? "
                                  f"the relation prices {engine} from its base's groups; a "
                                  "typo is never ignored)")
    named = [(f"acceptance[{i}].model", a.model) for i, a in enumerate(cfg.acceptance, start=1)
             if a.model is not None]
    curve_model, curve_method = cfg.curve_model, cfg.curve_method
    if curve_model is not None:
        named.append(("acceptance_curve.model", curve_model))
    carded = set(cards)
    for column, model in named:
        if any(same_family(model, m) for m in (*models, *carded)):
            continue
        close = closest_first(model, models, carded)
        raise PriorsError(f"model {model!r} is the model of no row of {where} nor of a model "
                          "card", file=cfg.path, column=column,
                          fix=(f"did you mean {close}? " if close else "")
                          + "name a model of the rows or of data/models.csv (`ddtree-bayes card "
                            "add` writes a card), or leave model out (every model) (a typo is "
                            "never ignored)")
    if curve_method is not None and (err := undeclared_curve_method(curve_method, cfg.methods,
                                                                    cfg.path)) is not None:
        raise err
    for i, entry in enumerate(cfg.acceptance, start=1):
        if entry.drafter is not None and entry.method is not None:
            problem = drafter_entry_problem(drafters, entry.model, entry.method, entry.drafter)
            if problem is not None:
                raise PriorsError(problem[0], file=cfg.path, column=f"acceptance[{i}].drafter",
                                  fix=problem[1])


def undeclared_curve_method(method: str, declared, path: str) -> PriorsError | None:
    """The error of an ``[acceptance_curve]`` ``method`` that is not one of the methods the
    priors file declares (``declared``, its ``[methods.<name>]`` tables; none declared: no
    error): ``optimize`` would compare the budgets of a method nobody measured, and answer.
    Raised by :func:`check_priors_names` (fit) and by
    :func:`~ddtree_bayes.core.acceptance_config.parse_acceptance_curve` (optimize)."""
    if not declared or method in declared:
        return None
    return PriorsError(f"method {method!r} is not one the file declares", file=path,
                       column="acceptance_curve.method",
                       fix=typo_fix(method.lower(), tuple(declared),
                                    "it takes a [methods.<name>] of the file: "
                                    + ", ".join(declared)))


def drafter_entry_problem(drafters: tuple, model: str | None, method: str, name: str
                          ) -> tuple[str, str] | None:
    """(problem, fix) of an ``[[acceptance]]`` entry's ``drafter``: a measurement row's
    (core/drafters.py ``drafter_problem``) for an entry of one ``model``; for an entry of
    every model, of the card's own target. None: it names a card that serves the entry. The
    fix speaks of the entry (leave drafter out; for an entry of every model naming its
    target's default card, name that model too), not of a row's blank column."""
    from ddtree_bayes.core.drafters import card_named, drafter_for, drafter_problem

    card = card_named(drafters, name)
    target = model or (card.target_model if card is not None else "")
    problem = drafter_problem(drafters, target, method, name)
    if problem is None:
        return None
    if card is None:   # (a row's "blank: the target's own drafter card" is the entry's default)
        return (problem[0], problem[1].replace(
            "; blank: the target's own drafter card for the method",
            "; or leave drafter out (the entry is then the default drafter's)"))
    if drafter_for(drafters, target, method) is card:
        return (problem[0].replace("which a blank drafter column names",
                                   "which an entry without a drafter is"),
                "leave drafter out (an entry without one is the default card's)"
                if model is not None else
                f'set model = "{target}" and leave drafter out (an entry without a drafter is '
                "the default card's; without a model too, every model's default drafter's)")
    return problem


def closest_first(name: str, first, then) -> str | None:
    """The name of ``first`` closest to ``name``, else of ``then`` (None: none is close)."""
    from ddtree_bayes.core.errors import closest

    found = closest(name, set(first), 1) or closest(name, set(then), 1)
    return found[0] if found else None


def priors_names_warnings(cfg: PriorsConfig, engines: set[str]) -> list[str]:
    """What the priors' names mean that the rows do not show (one line each, naming the
    file and key): a relation whose engine has rows and whose base engine none (those rows
    then measure the base's groups alone, through the reduction's prior)."""
    return [f"{cfg.path}, column 'relations.{engine}.base': {engine}'s rows are related to base "
            f"engine {rel.base!r}, which no row measures: they measure the {rel.base} groups "
            "alone, through the reduction's prior"
            for engine, rel in cfg.relations.items()
            if engine in engines and rel.base not in engines]


def entry_drafter(spec: dict, path: str, i: int, stored: bool = False) -> str | None:
    """The optional ``drafter`` of the ``i``-th ``[[acceptance]]`` entry (stripped), None when
    absent; anything but a non-empty name, or a drafter of an entry of no speculative method,
    is a :class:`PriorsError` (unless ``stored``). Whether a card of that name drafts the
    entry's model and method is checked beside the drafter cards
    (:func:`check_priors_names`)."""
    value = spec.get("drafter")
    if value is None:
        return None
    column = f"acceptance[{i}].drafter"
    if not isinstance(value, str) or not value.strip():
        if stored:
            return None
        raise PriorsError(f"'drafter' must be a drafter card's name, not {value!r}", file=path,
                          column=column, fix='set drafter = "<a card of data/drafters.csv>" or '
                                             "leave it out (the default drafter's)")
    method = spec.get("method")
    if not stored and (method is None or method == AR_METHOD):
        problem = ("autoregressive decoding has no drafter" if method == AR_METHOD else
                   "an entry of a drafter names its method")
        raise PriorsError(problem, file=path, column=column,
                          fix="leave drafter out" if method == AR_METHOD else
                          'set method = "<the method the drafter serves>"')
    return value.strip()


def nu_problem(prior: Prior | None) -> str | None:
    """Why ``prior`` cannot be the likelihood's Student-t degrees of freedom
    (``likelihood_nu``: a fixed value above 2, a finite variance), or None (also when absent).

    >>> nu_problem(Prior("likelihood_nu", "point", {"value": 2.0}))
    "must be a fixed value above 2, not point {'value': 2.0}"
    """
    if prior is None or (prior.dist == "point" and prior.params["value"] > 2):
        return None
    return f"must be a fixed value above 2, not {prior.dist} {prior.params}"


def parse_priors(text: str, path: str = "<priors>", *, stored: bool = False,
                 tables: dict | None = None) -> PriorsConfig:
    """Validate priors TOML ``text``; ``path`` is only used in error messages. ``stored``: the
    priors a saved fit holds, read as they were fitted: a key or prior name this version does
    not know (a typo, refused in a file given since, or one an older version read) does not
    make the fit unreadable. ``tables``: ``text`` already parsed (``toml_tables``)."""
    raw = tables if tables is not None else toml_tables(text, path)

    def section(key: str, kind: type, example: str):
        value = raw.get(key, kind())
        if not isinstance(value, kind):
            raise PriorsError(f"'{key}' must be a {'table' if kind is dict else 'list of tables'}",
                              file=path, column=key, fix=f"write it as {example}")
        return value

    model = section("model", dict, "[model] with moe_form = ...")
    for key in model:
        if key not in MODEL_KEYS and not stored:
            raise PriorsError(f"unknown key {key!r}", file=path, column=f"model.{key}",
                              fix=typo_fix(key, MODEL_KEYS,
                                           "[model] takes " + ", ".join(MODEL_KEYS)))
    moe_form = model.get("moe_form", "power")
    if not isinstance(moe_form, str) or moe_form not in MOE_FORMS:
        raise PriorsError(f"unknown moe_form {moe_form!r}", file=path, column="model.moe_form",
                          fix="use " + ", ".join(repr(f) for f in MOE_FORMS))
    step_form = model.get("step_form", "fraction")
    if not isinstance(step_form, str) or step_form not in STEP_FORMS:
        raise PriorsError(f"unknown step_form {step_form!r}", file=path, column="model.step_form",
                          fix="use " + " or ".join(repr(f) for f in STEP_FORMS))
    knee = model.get("knee_sharpness", 3.0)
    if isinstance(knee, bool) or not isinstance(knee, int | float) or not 1 <= knee <= 50:
        raise PriorsError(f"bad value {knee!r}", file=path, column="model.knee_sharpness",
                          fix="give a number from 1 (soft) to 50 (a sharp roofline corner)")
    unit = model.get("context_unit_tokens", 65536)
    default_ctx = model.get("default_context_tokens", 0)
    # a row's context_tokens and --context stop at MAX_CONTEXT_TOKENS (2 ** 40): a default
    # past it read every blank row there (1e30: a fit of 146 s through every remedy, exit 5);
    # a unit below one token overflows a context's units (131072 / 1e-300)
    most = f"{MAX_CONTEXT_TOKENS} (2 ** 40) tokens"
    for key, value, ok, fix in (
            ("context_unit_tokens", unit, lambda v: 1 <= v <= MAX_CONTEXT_TOKENS,
             f"give 1 to {most}"),
            ("default_context_tokens", default_ctx, lambda v: 0 <= v <= MAX_CONTEXT_TOKENS,
             f"give 0 to {most}, as a row's context_tokens")):
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or not ok(value)):
            raise PriorsError(f"bad value {value!r}", file=path, column=f"model.{key}", fix=fix)

    table = section("priors", dict, "[priors.<name>] tables")
    priors = {name: parse_prior(path, name, spec, where="priors", strict=not stored)
              for name, spec in table.items()}
    required = dict(MODEL_PRIORS)
    required[MOE_FORMS[moe_form]] = "global"
    for name in FORM_PRIORS.get(moe_form, ()) + FORM_PRIORS[step_form]:
        required[name] = "global"
    for name, per in required.items():
        if name not in priors:
            raise PriorsError("missing prior", file=path, column=f"priors.{name}",
                              fix=f"add a [priors.{name}] table (see the bundled models/priors.toml)")
        if priors[name].per != per:
            raise PriorsError(f"must have per = \"{per}\"", file=path, column=f"priors.{name}",
                              fix=f'set per = "{per}"')
    for name in priors:
        if name not in KNOWN_PRIORS and not stored:
            raise PriorsError(f"unknown prior {name!r}", file=path, column=f"priors.{name}",
                              fix=typo_fix(name, KNOWN_PRIORS, "name a prior of the bundled "
                                                               "models/priors.toml"))
    for name, prior in priors.items():
        outside = None if stored else domain_problem(prior, name)
        if outside:
            raise PriorsError(outside[0], file=path, column=f"priors.{name}", fix=outside[1])
    for name in ("ctx_read_ratio", "ctx_read_ratio_one_head"):   # (core/context_cost.py)
        if name in priors and priors[name].dist != "lognormal" and not stored:
            raise PriorsError("a KV-read ratio is a log-normal multiple of the read (as "
                              f"written, {priors[name].dist!r}, it would be ignored)", file=path,
                              column=f"priors.{name}",
                              fix='set dist = "lognormal" with median and sigma (a narrow '
                                  'sigma fixes it), or drop the table')
    problem = nu_problem(priors.get("likelihood_nu"))   # optional: a Student-t likelihood
    if problem:
        raise PriorsError(problem, file=path, column="priors.likelihood_nu",
                          fix='write dist = "point" and value = 4 (or drop it for a normal '
                              'likelihood)')

    relations = {}
    for engine, spec in section("relations", dict, "[relations.<engine>] tables").items():
        prior = parse_prior(path, engine, spec, where="relations", extra=("base",),
                            strict=not stored)
        if prior.dist != "beta":
            raise PriorsError("a relation's reduction must be a beta prior (it is a fraction)",
                              file=path, column=f"relations.{engine}", fix='set dist = "beta"')
        base = spec.get("base")
        if not isinstance(base, str) or not base or base == engine:
            raise PriorsError("missing or circular 'base' engine", file=path,
                              column=f"relations.{engine}.base",
                              fix='name the measured engine it is relative to, e.g. base = "sglang"')
        relations[engine] = Relation(engine=engine, base=base, prior=prior)
    for engine, rel in relations.items():
        if rel.base in relations:
            raise PriorsError(f"base engine {rel.base!r} has a relation itself", file=path,
                              column=f"relations.{engine}.base",
                              fix="relate every engine directly to a measured engine")

    acceptance = []
    for i, spec in enumerate(section("acceptance", list, "[[acceptance]] tables"), start=1):
        prior = parse_prior(path, f"acceptance[{i}]", spec, where="",
                            extra=("method", "block", "budget", "model", "drafter"),
                            strict=not stored)
        if prior.dist not in ACCEPTANCE_DISTS:
            raise PriorsError(f"acceptance prior must be bounded below by 1, not {prior.dist}",
                              file=path, column=f"acceptance[{i}]",
                              fix="use " + ", ".join(ACCEPTANCE_DISTS) + " with lower >= 1")
        lower = prior.params.get("lower", prior.params.get("value", 1.0))
        if lower < 1:
            raise PriorsError("acceptance cannot be below 1 token per step", file=path,
                              column=f"acceptance[{i}]", fix="set lower >= 1")
        keys = {}
        for key in ("block", "budget"):
            if key in spec and (isinstance(spec[key], bool) or not isinstance(spec[key], int)
                                or spec[key] < 1):
                raise PriorsError(f"'{key}' must be a positive integer", file=path,
                                  column=f"acceptance[{i}].{key}", fix=f"set {key} = <integer>")
            keys[key] = spec.get(key)
        acceptance.append(AcceptancePrior(prior=prior, method=spec.get("method"), **keys,
                                          model=target_model(spec, path,
                                                             f"acceptance[{i}].model",
                                                             stored=stored),
                                          drafter=entry_drafter(spec, path, i, stored)))

    transfer = {name: parse_prior(path, name, spec, where="transfer", strict=not stored)
                for name, spec in section("transfer", dict, "[transfer.<name>] tables").items()}
    if transfer:
        for name in TRANSFER_PRIORS:
            if name not in transfer:
                raise PriorsError("missing transfer prior", file=path, column=f"transfer.{name}",
                                  fix=f"add [transfer.{name}] (see the bundled models/priors.toml)")
        if transfer["bandwidth_elasticity"].dist not in ("beta", "uniform"):
            raise PriorsError("the bandwidth elasticity must be a prior on [0, 1]", file=path,
                              column="transfer.bandwidth_elasticity", fix='use dist = "beta"')
        for name, prior in transfer.items():
            outside = None if stored else domain_problem(prior, f"transfer.{name}")
            if outside:
                raise PriorsError(outside[0], file=path, column=f"transfer.{name}",
                                  fix=outside[1])

    methods = parse_methods(path, section("methods", dict, "[methods.<name>] tables"))
    if step_form == "structured" and not methods:
        raise PriorsError("the structured step form needs a [methods.<name>] table per method",
                          file=path, column="methods", fix="copy [methods.*] from the bundled priors")
    known_methods = (AR_METHOD, *methods)
    for i, entry in enumerate(acceptance, start=1):
        method: object = entry.method
        if stored or method is None:
            continue
        column = f"acceptance[{i}].method"
        if not isinstance(method, str) or not method.strip():
            raise PriorsError(f"'method' must be a method name, not {method!r}", file=path,
                              column=column, fix='set method = "eagle3" (a [methods.<name>] '
                                                 'the file declares, or "ar")')
        if methods and method not in known_methods:
            # an entry no query matches: the method's acceptance fell to another prior
            raise PriorsError(f"method {method!r} is not one the file declares", file=path,
                              column=column,
                              fix=typo_fix(method.lower(), known_methods,
                                           "it takes " + ", ".join(known_methods)))
    for i, entry in enumerate(acceptance, start=1):
        if entry.method is not None and (entry.block is not None or entry.budget is not None
                                         or entry.method == AR_METHOD):
            # an entry of one configuration must fit what it can emit (a broader entry is
            # truncated per query: AcceptancePrior.capped)
            max_accept(entry.method, entry.block, entry.budget, methods).refuse_prior_above(
                entry.prior.params, path, f"acceptance[{i}]")

    unknown = sorted(set(raw) - KNOWN_SECTIONS)
    if unknown:
        raise PriorsError(f"unknown section {unknown[0]!r}", file=path, column=unknown[0],
                          fix="use " + ", ".join(sorted(KNOWN_SECTIONS)) + " (a typo is never ignored)")
    return PriorsConfig(path=path, text=text, moe_form=moe_form,
                        context_unit_tokens=float(unit), default_context_tokens=float(default_ctx),
                        priors=priors, relations=relations, acceptance=tuple(acceptance),
                        transfer=transfer, step_form=step_form, methods=methods,
                        knee_sharpness=float(knee), **curve_names(raw))


def curve_names(raw: dict) -> dict[str, str | None]:
    """``curve_model`` and ``curve_method`` of a priors file's parsed tables (its
    ``[acceptance_curve]``'s ``model`` and ``method`` when strings, else None)."""
    curve = raw.get("acceptance_curve")
    out: dict[str, str | None] = {}
    for key in ("model", "method"):
        value = curve.get(key) if isinstance(curve, dict) else None
        out[f"curve_{key}"] = value.strip() if isinstance(value, str) else None
    return out


def form_label(meta: dict) -> str:
    """A fit's model forms as shown by ``compare``: "roofline/structured", "power/fraction"."""
    model = meta.get("model", {})
    return f"{model.get('moe_form', '?')}/{model.get('step_form', 'fraction')}"

"""One question, resolved once: the flags of ``predict`` (or ``next --query``, a tracked query,
the report's default question, ``ddtree_bayes.predict``) turned into everything the numbers
need, before any number is computed.

:func:`resolve` checks the names against the fit, fills the flags not given from the fit's
default question (:func:`default_question`: the bundled B300 question, or the fit's own
most-measured configuration), resolves each engine's :class:`~ddtree_bayes.engine.scenario.
Scenario` (GPU count, verify tokens, context, what a step can emit), checks ``--accept``
against it, and chooses where each row's acceptance comes from (:class:`AcceptSource`: given,
a uniform range, the posterior of an inferred acceptance, the priors file's acceptance prior,
or the configuration's own measured rows). The result is an immutable :class:`Question`; the
numeric code (:func:`ddtree_bayes.engine.predictive.predict_rows`) only computes from it.
numpy-free: the predict path.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ddtree_bayes.core.config import DEFAULT_QUESTION, AcceptancePrior, DefaultQuestion
from ddtree_bayes.core.data import (
    AR_METHOD,
    MAX_BLOCK,
    MAX_BUDGET,
    MAX_CONCURRENCY,
    MAX_CONTEXT_TOKENS,
    MAX_GPUS,
    NAME_RE,
    ON_OTHER_SYSTEMS,
    accept_shown,
    check_drafter_name,
    not_a_name,
    plain_text,
)
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.core.methods import MethodSpec, always_tree
from ddtree_bayes.core.pairs import split_label
from ddtree_bayes.engine.posterior import Fit, blank_context
from ddtree_bayes.engine.scenario import (
    AcceptRequest,
    Scenario,
    acceptance_prior,
    check_accept,
    check_kv_cache,
    configuration_rows,
    edited_block,
    layer_split_warning,
    measured_acceptance,
    measured_on,
    memory_warnings,
    other_drafters,
    other_drafters_note,
    parse_accept,
    parse_context,
    resolve_scenario,
    tensor_parallel_warning,
    with_drafter,
)
from ddtree_bayes.engine.structure import amd_overhead_warning, new_deployment_warning

#: The flags that name a configuration, as a note names them.
CONFIGURATION_FLAGS = "--hardware/--method/--block/--budget"


def asked_values(value: Any) -> tuple:
    """A flag of the Python API given one value or any sequence of them (a list, tuple,
    range, numpy array or pandas Series; a text is one value) as a tuple, whole numbers as
    ints (a numpy integer too; a bool stays one, for the flag's check to refuse). The one
    reader of ``concurrency`` (:func:`streams_of`) and ``accept`` (engine/predictive.py
    ``accept_text``): accept refused a numpy array, a Series or a range.

    >>> import numpy as np
    >>> asked_values(8), asked_values(range(1, 3)), asked_values(np.array([12, 14])), asked_values("1:2")
    ((8,), (1, 2), (12, 14), ('1:2',))
    """
    def whole(v: Any) -> Any:
        return int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v

    if not isinstance(value, Iterable) or isinstance(value, str):
        return (whole(value),)
    return tuple(whole(v) for v in value)


def streams_of(value: Any) -> tuple | None:
    """``concurrency`` as a question holds it: None (not asked), or a tuple from one C or any
    sequence of them (:func:`asked_values`; each is checked by :class:`Flags`).

    >>> streams_of(8), streams_of(range(1, 3)), streams_of([]), streams_of(2.5)
    ((8,), (1, 2), None, (2.5,))
    """
    if value is None:
        return None
    return asked_values(value) or None


#: The flags of a question that take one name, each with a name it takes (the fix of another
#: type given).
NAME_EXAMPLES = {"model": "kimi-k2.6", "hardware": "b300", "method": "ddtree",
                 "drafter": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "kv_cache": "fp8"}


def _check_whole(name: str, value: Any, top: int) -> None:
    if value is None:
        return
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or not 1 <= int(value) <= top):
        raise QueryError(f"{name} {value!r} is not a whole number from 1 to {top}",
                         fix=f"give {name} as a whole number, e.g. "
                             f"{ {'gpus': 8, 'block': 16, 'budget': 32}.get(name, 4)}")


@dataclass(frozen=True)
class Flags:
    """A question as asked: the configuration flags given (None: not given)."""

    model: str | None = None
    hardware: str | None = None
    gpus: int | None = None
    engines: tuple[str, ...] | None = None
    method: str | None = None
    block: int | None = None
    budget: int | None = None
    verify_tokens: int | None = None
    context: str | float | None = None
    accept: str | None = None
    #: predict --concurrency: the streams decoded together, one answer per value (None: 1,
    #: and the rows say nothing about concurrency)
    concurrency: tuple[int, ...] | None = None
    #: predict --drafter: a drafter card's name whose roofline prices the drafter passes
    drafter: str | None = None
    #: --kv-cache (predict, next --query, track; optimize passes it to resolve_scenario): the
    #: KV cache's dtype (core/model_cards.py ``KV_CACHE_BITS``), which the read cap and the
    #: memory check count the cache at
    kv_cache: str | None = None
    #: --new-deployment (predict, next --query, track): price a measured group's question as
    #: another deployment of it (engine/structure.py ``new_deployment_group``)
    new_deployment: bool = False

    def __post_init__(self) -> None:
        """The bounds the CLI's flag types enforce, for every caller (the Python API passed
        ``gpus=4.5``, ``budget=0`` and ``concurrency=0`` through: answers, or a bare
        ValueError)."""
        bounds = {"gpus": MAX_GPUS, "block": MAX_BLOCK, "budget": MAX_BUDGET,
                  "verify_tokens": MAX_BUDGET + 1}
        for name, top in bounds.items():
            value = getattr(self, name)
            _check_whole(name, value, top)
            if value is not None:   # (numpy's np.int64(16) drew other numbers than 16)
                object.__setattr__(self, name, int(value))
        for c in self.concurrency or ():
            _check_whole("concurrency", c, MAX_CONCURRENCY)
        if self.context is not None:   # (the API's context=2**50 answered 1.7e-8 tok/s)
            asked = self.context
            if isinstance(self.context, numbers.Real) and not isinstance(self.context, bool):
                object.__setattr__(self, "context", float(self.context))   # (numpy's too)
            value = (parse_context(self.context) if isinstance(self.context, str | float)
                     else None)
            if value is None or not 0 <= value <= MAX_CONTEXT_TOKENS:   # (nan fails too)
                raise QueryError(f"context {asked!r} is not a token count from 0 to "
                                 f"{MAX_CONTEXT_TOKENS} (2 ** 40)",
                                 fix="give the context length in tokens, e.g. 32768 or '32k'")
        # (the API's hardware=["b300"] met re's bare TypeError, model=5 an AttributeError)
        for name, example in NAME_EXAMPLES.items():
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise QueryError(f"{name} {value!r} is not a name",
                                 fix=f"give {name} as one name, e.g. {name}={example!r}")
        check_kv_cache(self.kv_cache)
        if not isinstance(self.new_deployment, bool):   # (numpy's True too; "no" is not False)
            if not (hasattr(self.new_deployment, "dtype") and self.new_deployment.dtype == bool):
                raise QueryError(f"new_deployment {self.new_deployment!r} is not True or False",
                                 fix="give new_deployment=True to price another deployment of "
                                     "the measured group (as --new-deployment), or leave it out")
            object.__setattr__(self, "new_deployment", bool(self.new_deployment))
        for engine in self.engines or ():   # (the API's engines="sglang," answered for '')
            if not isinstance(engine, str) or not engine.strip():
                raise QueryError(f"engines holds {engine!r}, which is not an engine name",
                                 fix="give engine names, e.g. engines=['sglang', 'native']")
        # a value named twice is one row, as --accept's (`--engine sglang,sglang` and the
        # API's concurrency=[4, 4] printed every row twice)
        for name in ("engines", "concurrency"):
            values = getattr(self, name)
            if values is not None:
                object.__setattr__(self, name, tuple(dict.fromkeys(values)))

    @classmethod
    def of(cls, source: Any, **overrides: Any) -> Flags:
        """From an ``argparse.Namespace`` (``engine`` a comma-separated list) or a dict of the
        same names; ``overrides`` win."""
        get = source.get if isinstance(source, dict) else (lambda k: getattr(source, k, None))
        engines = overrides.pop("engines", None) or get("engines") or get("engine")
        if isinstance(engines, str):   # (an empty item is refused below, not dropped)
            engines = tuple(engines.split(","))
        values = {k: get(k) for k in ("model", "hardware", "gpus", "method", "block", "budget",
                                      "verify_tokens", "context", "accept", "drafter",
                                      "kv_cache")}
        values["accept"] = None if values["accept"] is None else str(values["accept"])
        values["concurrency"] = streams_of(get("concurrency"))
        # (argparse's store_true with default None, a tracked query without the key: False)
        values["new_deployment"] = get("new_deployment") or False
        return cls(**{**values, "engines": tuple(engines) if engines else None, **overrides})

    @property
    def names_configuration(self) -> bool:
        """Does the question name part of the configuration (beyond engines and model)?"""
        return self.hardware is not None or any(
            (self.method, self.gpus, self.block, self.budget, self.verify_tokens))


@dataclass(frozen=True)
class AcceptSource:
    """Where one row's acceptance comes from.

    ``kind``: ``given`` (``value``), ``uniform`` (``uniform`` = (lo, hi)), ``posterior`` (the
    fit's inferred acceptance ``group``, aligned draw by draw), ``prior`` (``prior``, the
    priors file's ``[[acceptance]]`` entry truncated at what a step can emit) or ``measured``
    (``value``, the mean of ``rows`` measured rows of the configuration, ``where``)."""

    kind: str
    label: str
    value: float | None = None
    uniform: tuple[float, float] | None = None
    prior: AcceptancePrior | None = None
    group: dict | None = None
    group_index: int | None = None
    rows: int | None = None
    #: ``measured``: which rows the mean is of (``accept_from`` in predict's JSON); out of the
    #: repr, which keys the acceptance draws' seed (predictive.keyed_rng): answers unchanged
    where: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Asked:
    """One engine of a question: its scenario and the acceptances its rows are computed at."""

    scenario: Scenario
    accept: tuple[AcceptSource, ...]


@dataclass(frozen=True)
class Question:
    """A question resolved against a fit (:func:`resolve`)."""

    flags: Flags
    model: str | None
    #: the default question the flags not given were filled from
    default: DefaultQuestion
    #: the fit's own default question, when it filled some flags (``default_scenario`` in JSON)
    default_asked: dict | None
    #: one line for stderr saying so, or None
    note: str | None
    #: names never measured nor declared that do not stop the answer (engines, methods)
    warnings: tuple[str, ...]
    request: AcceptRequest | None
    asked: tuple[Asked, ...] = field(default_factory=tuple)
    #: a default engine left out of an autoregressive question, one line each, saying why
    #: (:func:`ar_repeats`)
    left_out: tuple[str, ...] = ()

    @property
    def scenarios(self) -> tuple[Scenario, ...]:
        return tuple(a.scenario for a in self.asked)


def default_question(fit: Fit, model: str | None = None) -> DefaultQuestion:
    """The question asked of ``fit`` when none is given: the bundled B300 question when the fit
    measured B300 for ``model``, else the fit's own most-measured speculative configuration
    (a model measured with AR rows only: the bundled question's method and shape on its
    most-measured system; the rule: :mod:`ddtree_bayes.core.default_question`). ``model`` is
    required when the fit holds several."""
    from ddtree_bayes.core.default_question import fit_default, keeps_bundled
    from ddtree_bayes.engine import target_models

    model = target_models.resolve_model(fit, model)
    multi = target_models.is_multi(fit)
    measured = [(m if multi else None, hw) for m, hw, _ in map(split_label, fit.measured_systems)]
    if keeps_bundled(measured, model if multi else None):
        return bundled_accept(fit, model if multi else None)
    return inferred_accept(fit, fit_default(fit.measurements.rows, model if multi else None,
                                            fit.methods),
                           model if multi else None)


def bundled_accept(fit: Fit, model: str | None) -> DefaultQuestion:
    """The bundled default question, kept by a fit that measured B300 for ``model``, marked
    ``accept_assumed`` when no acceptance measured, inferred or in the priors answers it for
    that model (one of AR rows only, whose [[acceptance]] entries are another model's): a
    bare ``predict`` refuses it, and the tracked default asked it at the bundled 14 and
    answered (Llama-3.1-8B measured autoregressively on one B300 beside Kimi: 800 tok/s in
    SGLang). Once per fit and model (:attr:`Fit.memo`); a question the fit cannot resolve
    keeps the bundled default as it was (the command asking it says why)."""
    key = f"bundled_accept:{model}"
    if key not in fit.memo:
        d = DEFAULT_QUESTION
        try:
            sc = _first_engine_scenario(fit, d, model)
        except QueryError:
            sc = None
        if sc is not None:
            try:
                accept_sources(fit, sc, None, None)
            except QueryError:   # (no acceptance anywhere for it: predict refuses it)
                d = replace(d, accept_assumed=True)
        fit.memo[key] = d
    return fit.memo[key]


def _first_engine_scenario(fit: Fit, d: DefaultQuestion, model: str | None) -> Scenario:
    """The scenario of default question ``d``'s configuration in its first engine, at the
    fit's default context, whose acceptance sources (:func:`accept_sources`) say what
    acceptance ``d``'s one-number answers take (:func:`bundled_accept`,
    :func:`inferred_accept`); QueryError when the fit cannot resolve it."""
    return resolve_scenario(fit, hardware=d.hardware, gpus=d.gpus, engine=d.engines[0],
                            method=d.method, block=d.block, budget=d.budget,
                            verify_tokens=d.verify_tokens, context_tokens=None, model=model)


def inferred_accept(fit: Fit, d: DefaultQuestion, model: str | None) -> DefaultQuestion:
    """``d`` (a fit's own default question) with the acceptance of its one-number answers
    where ``predict`` takes its answer's, by the one order :func:`accept_sources` follows for
    ``d``'s first engine: the mean measured on ``d``'s system, else the median of the
    acceptance the fit inferred from the configuration's rows without accept_len, else of the
    priors file's ``[[acceptance]]`` entry (the draws predict takes), else the mean measured
    on other systems, within [1, M] and every digit of it (predict's own number: rounded
    to 2 decimals, the one-number answers asked another question than predict's); ``d``'s
    own (the middle of [1, M]) when the fit has none of them or cannot ask ``d``. The default
    took the other systems' mean before the inferred acceptance, so the report's answer line
    asked another acceptance than predict's answer (Qwen3.8-27B-Q4_K_M on a V100: 4.22 from
    other systems, 61 tok/s, where predict's inferred 2.43 answers 35), and it skipped the
    ``[[acceptance]]`` step."""
    import dataclasses

    import numpy as np

    from ddtree_bayes.core import acceptance_latent as AL
    from ddtree_bayes.core.sampling import prior_sample

    if not d.derived:
        return d
    try:
        sc = _first_engine_scenario(fit, d, model)
        source = accept_sources(fit, sc, None, None)[0]
    except QueryError:   # (no acceptance anywhere: the middle of [1, M] fit_default gave,
        #                   or the bundled question's 14 for a model of AR rows only)
        return dataclasses.replace(d, accept_assumed=True)
    if source.value is not None:   # (given for AR, or measured)
        value = source.value
    elif source.prior is None:   # (inferred: its posterior draws, as predict takes them)
        value = float(np.median(np.asarray(fit.variables[AL.NAME])[:, source.group_index]))
    else:   # (the [[acceptance]] entry: the median of 4,000 draws of a fixed seed, within
        #      ~0.01 of the exact one and the same number every call)
        value = float(np.median(prior_sample(source.prior.prior, 4000,
                                             np.random.default_rng(0))))
    return dataclasses.replace(d, accept=float(min(max(value, 1.0), sc.limit.tokens)))


def question_default(fit: Fit, flags: Flags) -> tuple[DefaultQuestion, bool]:
    """The default question the flags not given of ``flags`` are filled from, and whether it
    is the asked system's own: when ``--hardware`` (with ``--gpus``, or the one GPU count the
    fit measured of the model on it) names a measured system other than the fit's default
    question's, that system's own rows (its most-measured engine and method configuration,
    narrowed to the method and engines asked; :func:`~ddtree_bayes.core.default_question.
    system_default`) come before any other system's: ``--hardware rtx-3090 --gpus 2 --method
    mtp`` took llama.cpp from the model's most-measured system, where the 3090s measured
    vLLM. The default question's own system is such a system too when another method is
    asked: ``--hardware h100 --gpus 1 --method mtp`` was refused ("cannot tell how many
    tokens mtp verifies") where H100 was the model's most-measured system, and answered from
    its own mtp rows where another was (and ``next``, whose simulated row made the asked
    system the most-measured, refused a query ``predict`` answered). Else
    :func:`default_question`."""
    from ddtree_bayes.core.default_question import system_default
    from ddtree_bayes.engine import target_models

    d = default_question(fit, flags.model)
    if flags.hardware is None:
        return d, False
    model = target_models.resolve_model(fit, flags.model)
    multi = target_models.is_multi(fit)
    counts = sorted({g for _, _, g in measured_on(fit, flags.hardware, model)})
    gpus = flags.gpus if flags.gpus is not None else counts[0] if len(counts) == 1 else None
    if gpus is None or gpus not in counts:
        return d, False
    if (flags.hardware, gpus) == (d.hardware, d.gpus) and flags.method in (None, d.method):
        return d, False   # (the default is this system's own, of the method asked)
    own = system_default(fit.measurements.rows, flags.hardware, gpus, d,
                         model if multi else None, method=flags.method,
                         engines=flags.engines or (), methods=fit.methods)
    if own is None:
        return d, False
    own = inferred_accept(fit, own, model if multi else None)
    return own, own.derived


def fill(d: DefaultQuestion, flags: Flags,
         methods: Mapping[str, MethodSpec] | None = None) -> tuple[dict, bool]:
    """The flags with those not given taken from the default question ``d``: hardware, method
    and engines; the GPU count when the hardware is the default's; block and budget (and verify
    tokens) unless a method or verify tokens was given (a method given that is the default's,
    with no block, budget nor verify tokens, takes its shape); with verify tokens alone the
    default's shape at that M, with verify tokens and a budget the default's block. Returns the
    configuration and whether anything came from ``d``."""
    out = {"hardware": flags.hardware or d.hardware, "method": flags.method or d.method,
           "engines": tuple(flags.engines or d.engines),
           "gpus": flags.gpus if flags.gpus is not None or flags.hardware is not None else d.gpus,
           "block": flags.block, "budget": flags.budget, "verify_tokens": flags.verify_tokens}
    if (flags.method is None and flags.verify_tokens is not None
            and flags.budget is not None and flags.block is None):
        # --budget with --verify-tokens: the default's block stays (it dropped, and the
        # acceptance limit became M); resolve_scenario checks M against the budget
        out["block"] = d.block
    elif flags.method is None and flags.verify_tokens is None:
        block, budget = flags.block, flags.budget
        if block is None and budget is None:
            out["verify_tokens"] = d.verify_tokens
        # a chain written as block = budget (its depth): --block or --budget alone sets both
        chain = (not always_tree(d.method, methods) and d.budget is not None
                 and d.budget == d.block)
        if chain and (block is None) != (budget is None):
            block = budget = block if block is not None else budget
        out["block"] = d.block if block is None else block
        out["budget"] = d.budget if budget is None else budget
    elif (flags.method is None and flags.verify_tokens is not None
          and flags.verify_tokens >= 2 and flags.block is None and flags.budget is None):
        # --verify-tokens alone reshapes the default's configuration: a tree keeps its block
        # (no path is deeper) and verifies budget + 1 tokens; a chain (block = budget) is that
        # depth. Dropping them priced no tree nodes and lifted the acceptance limit to M.
        v = flags.verify_tokens
        if always_tree(d.method, methods) and d.budget is not None:
            out["block"], out["budget"] = d.block, v - 1
        elif d.budget is not None and d.budget == d.block:
            out["block"] = out["budget"] = v - 1
    shaped = (flags.method is not None and flags.method == d.method
              and flags.block is None and flags.budget is None and flags.verify_tokens is None)
    if shaped:
        # the default's own method named, no shape: the default's shape, as without --method
        # (`--hardware rtx-pro-6000 --method eagle3` exited 2 where `--hardware rtx-pro-6000`
        # answered its measured eagle3 block 3 budget 3); the note names the flags filled
        out["block"], out["budget"] = d.block, d.budget
        out["verify_tokens"] = d.verify_tokens
    # (block and budget come from d only when the method does, or is d's: this says it all)
    return out, (flags.hardware is None or flags.method is None or not flags.engines
                 or (shaped and (d.block, d.budget) != (None, None)))


#: The configuration's flags in the order a note names them: (flag, key of :func:`fill`).
FILLED_FLAGS = (("--hardware", "hardware"), ("--gpus", "gpus"), ("--engine", "engines"),
                ("--method", "method"), ("--block", "block"), ("--budget", "budget"),
                ("--verify-tokens", "verify_tokens"))


def filled_why(why: str, flags: Flags) -> str:
    """Why a derived default question is asked, as said for ``flags``: the clause on the
    bundled method and shape (core/default_question ``NO_SPECULATIVE``: the fit measured no
    speculative method) only when the method was filled, not given (``predict --hardware
    h200 --method ar`` took only the engine). :func:`default_note` and the acceptance error
    of :func:`resolve` say it alike.

    >>> why = "the fit never measured b300, nor any speculative method: the bundled question's"
    >>> filled_why(why, Flags(method="ar")), filled_why(why, Flags()) == why
    ('the fit never measured b300', True)
    """
    from ddtree_bayes.core.default_question import NO_SPECULATIVE

    return why if flags.method is None else why.split(NO_SPECULATIVE)[0]


def default_note(asked: dict, flags: Flags, hint: str = CONFIGURATION_FLAGS,
                 config: Mapping[str, Any] | None = None, own: bool = False) -> str:
    """One line: why a derived default question is asked (``asked``: its ``to_json()``), and
    what it is; when ``flags`` name part of the configuration, the default only fills the
    flags not given, and the line names those (``config``: :func:`fill`'s configuration) with
    their values, and the why of the bundled method and shape only when the method was filled
    (``predict --hardware h200 --method ar`` took only the engine). ``own``: the default is
    the asked system's own (:func:`question_default`), and the line says they come from its rows.

    >>> from ddtree_bayes.core.config import DEFAULT_QUESTION
    >>> import dataclasses
    >>> d = dataclasses.replace(DEFAULT_QUESTION, hardware="h100", gpus=1, engines=("vllm",),
    ...                         why="the fit never measured b300, nor any speculative method: "
    ...                             "the bundled question's ddtree block 16 budget 32")
    >>> flags = Flags(hardware="h200", method="ar")
    >>> default_note(d.to_json(), flags, config=fill(d, flags)[0])
    'the fit never measured b300; the flags not given come from its most-measured system: \
--engine vllm (pass --engine to ask another)'
    """
    if not flags.names_configuration:
        return (f"{asked['why']}; asking its most-measured system: {asked['asked']} (pass "
                f"{hint} to ask another)")
    filled = ([] if config is None else
              [(flag, config[key]) for flag, key in FILLED_FLAGS
               if not getattr(flags, key) and config.get(key) not in (None, ())])
    if config is None or not filled:
        return (f"{asked['why']}; the flags not given come from its most-measured system: "
                f"{asked['asked']} (pass {hint} to ask another)")
    why = filled_why(asked["why"], flags)
    values = " ".join(f"{flag} {','.join(v) if isinstance(v, tuple) else v}"
                      for flag, v in filled)
    names = "/".join(flag for flag, _ in filled) if hint == CONFIGURATION_FLAGS else hint
    source = "its own rows" if own else "its most-measured system"
    return (f"{why}; the flags not given come from {source}: {values} "
            f"(pass {names} to ask another)")


def check_names(fit: Fit, flags: Flags, *, strict: bool = False, prefix: str = ""
                ) -> tuple[str, ...]:
    """Names never measured nor declared: an unknown hardware or model is an error (nothing to
    predict from), and so is a method a structured fit has no ``[methods]`` entry of (it
    cannot price its drafter passes: :func:`~ddtree_bayes.engine.structure.check_declared`);
    an engine or method a warning (returned), an error with ``strict``. A name
    in capitals is an error whatever the fit holds: the data files name nothing so (the API's
    ``engines="SGLANG"`` answered from the pooled population, where ``--engine SGLANG`` is
    refused at the flag)."""
    from ddtree_bayes.engine import names as N

    for flag, value in (("--model", flags.model), ("--hardware", flags.hardware),
                        *(("--engine", e) for e in flags.engines or ()),
                        ("--method", flags.method)):
        if value is not None and not NAME_RE.fullmatch(value):
            problem, fix = (N.not_a_model_name(value, N.known_names(fit)["model"])
                            if flag == "--model" else not_a_name(value))
            raise QueryError(f"{prefix}{flag} {problem}", fix=fix)
    if flags.method is not None:   # (refused before the warnings of a question answered)
        from ddtree_bayes.engine.structure import check_declared

        check_declared(fit.meta.get("model", {}), flags.method, prefix)
    warnings = []
    for u in N.unknown_names(fit, hardware=flags.hardware, engines=flags.engines,
                             method=flags.method, model=flags.model):
        if u.kind == "model":
            line, fix = N.unknown_model_error(fit, u)
            raise QueryError(prefix + line, fix=fix)
        if u.kind == "hardware" and N.hardware_here(u.name):
            raise QueryError(prefix + u.message(suggest=False), fix=f"re-run `ddtree-bayes fit`: {u.name} is "
                             "in the hardware table here, added after this fit")
        if u.kind == "hardware" or strict:
            raise QueryError(prefix + u.message(), fix="check the spelling" + (
                "" if u.kind == "hardware" else ", or drop --strict to answer anyway"))
        warnings.append(prefix + u.message())
    return tuple(warnings)


def context_warnings(fit: Fit, context: float | None, model: str | None = None, prefix: str = ""
                     ) -> tuple[str, ...]:
    """A context more than twice the longest the fit measured (of ``model`` in a fit of
    several) is answered, but its context cost is extrapolated linearly past the data (or is
    the prior's, when the fit measured none): one line saying so.

    >>> from types import SimpleNamespace as NS
    >>> from ddtree_bayes.core.data import Measurement
    >>> rows = [Measurement(2, "k", "b300", 8, "sglang", "ar", None, None, 1, 1.0, c, 100.0,
    ...                     "s", "") for c in (None, 0.0, 131072.0)]
    >>> fit = NS(measurements=NS(rows=rows))
    >>> context_warnings(fit, 262144.0)
    ()
    >>> print(context_warnings(fit, 1048576.0)[0])
    --context 1048576 is 8x the longest context the fit measured (131072 tokens): its cost \
is extrapolated linearly past the measured contexts
    >>> fit.meta = {"model": {"default_context_tokens": 524288.0}}   # blank rows: 512k
    >>> context_warnings(fit, 1048576.0)
    ()
    """
    if not context:
        return ()
    rows = [r for r in fit.measurements.rows if model is None or r.model == model]
    blank = blank_context(fit)
    longest = max((r.context(blank) for r in rows), default=0.0)
    if context <= 2.0 * longest:
        return ()
    if longest == 0.0:
        return (prefix + f"--context {plain_text(float(context))}: the fit measured no context "
                "beyond 0" + (f" for {model}" if model else "") + ": its cost per context "
                "token is the prior's (prior-driven)",)
    return (prefix + f"--context {plain_text(float(context))} is {context / longest:.3g}x the "
            f"longest context the fit measured ({plain_text(float(longest))} tokens): its cost "
            "is extrapolated linearly past the measured contexts",)


def system_context_warnings(fit: Fit, sc: Scenario, prefix: str = "") -> tuple[str, ...]:
    """A question at a context > 0 on a measured system whose rows are all at context 0, when
    other systems measured one: the context cost per token is per system
    (``ctx_ms_per_unit``), so that system's is its prior (docs/model.md lists the B300's as
    prior-only), which :func:`context_warnings`, looking at the longest context of any
    system, does not say. One line naming the system and those that measured one."""
    from ddtree_bayes.engine.structure import fit_rows
    from ddtree_bayes.engine.target_models import row_pair

    if not sc.context_tokens or not sc.measured:
        return ()
    blank = blank_context(fit)
    with_context = {row_pair(fit, r) for r in fit_rows(fit) if r.context(blank) > 0}
    if not with_context or sc.pair in with_context:
        return ()
    how = (fit.meta["model"].get("system_ctx_prior") or {}).get(sc.pair, {}).get("how")
    return (prefix + f"context {plain_text(float(sc.context_tokens))} on {sc.pair}: the fit "
            f"measured no context beyond 0 there (only on {', '.join(sorted(with_context))}): "
            f"its context cost per token there is the prior's (ctx_ms_per_unit[{sc.pair}], "
            "prior-driven" + (f": {how}" if how else "") + ")",)


def verify_context_warnings(fit: Fit, sc: Scenario, prefix: str = "") -> tuple[str, ...]:
    """A speculative question at a context > 0 whose model has no speculative row at a
    context > 0: its context cost grows with the verified tokens as ``M ** b``, one exponent
    ``ctx_verify_exponent`` for every model, learned from other models' rows (another
    attention layout: Kimi K2.6's MLA EAGLE-3 rows for a GQA model's tree) or, with no such
    row at all, the prior's. One line saying which."""
    import numpy as np

    if sc.verify_tokens <= 1 or not sc.context_tokens:
        return ()
    blank = blank_context(fit)
    rows = [r for r in fit.measurements.rows if r.verify_tokens > 1 and r.context(blank)]
    model = sc.model   # (None: a fit of one model, whose rows are all its own)
    if any(model is None or r.model == model for r in rows):
        return ()
    if not rows and not any(r.context(blank) and (model is None or r.model == model)
                            for r in fit.measurements.rows):
        return ()   # (no context measured for it at all: context_warnings says it)
    model = model or fit.meta.get("model", {}).get("target_model") or "the model"
    lo, med, hi = np.quantile(fit.variables["ctx_verify_exponent"], [0.05, 0.5, 0.95])
    origin = (f"learned from the rows at context > 0 of {', '.join(sorted({r.model for r in rows}))}, "
              f"not of {model} (another attention layout may share its KV reads among the "
              "verified tokens more, or less)" if rows else
              "the prior's: the fit has no speculative row at context > 0 (prior-driven)")
    return (prefix + f"{model} at context {plain_text(float(sc.context_tokens))}, M = "
            f"{sc.verify_tokens} verified tokens: its context cost grows as M ** b with b = "
            f"{med:.2g} (90% {lo:.2g}-{hi:.2g}), {origin}",)


def accept_sources(fit: Fit, sc: Scenario, request: AcceptRequest | None, text: str | None,
                   default_why: str | None = None, *, prefix: str = "",
                   query: str | None = None) -> tuple[AcceptSource, ...]:
    """Where the rows of ``sc`` take their acceptance: ``request`` (``--accept``, already
    checked against ``sc.limit``) one row per value and one for a range. Without it, the one
    order every command follows (``core.query_flags.ACCEPT_ORDER``, as ``--help`` says it): 1
    for autoregressive decoding; the mean accept_len measured of this configuration on the
    same system, by this engine if it has rows there, else by the other engines (the most
    direct evidence: a priors entry has no system or engine, and was taken elsewhere; and
    acceptance is the drafter's, target's and prompts', not the engine's, so every engine of
    one question takes its acceptance from the same place); the posterior of an acceptance the
    fit inferred for the configuration; the priors file's ``[[acceptance]]`` entry of the
    question's drafter (one without a ``drafter`` key is the default drafter's; a
    ``--drafter`` the rows name apart takes only an entry naming it); the mean measured on
    other systems. ``default_why``: why the fit's own
    default question was asked, when ``sc`` came from it (an error says so: its note is not
    printed yet). ``prefix`` and ``query``: the flags came from ``next --query QUERY``, whose
    --accept goes inside the query (the error's fix says so: ``next --accept`` is refused)."""
    from ddtree_bayes.core import acceptance_latent as AL

    if request is not None:
        rows = [AcceptSource("given", f"{v:g}", value=v) for v in request.values]
        if request.uniform:
            lo, hi = request.uniform
            rows.append(AcceptSource("uniform", f"U({lo:g},{hi:g})", uniform=(lo, hi)))
        return tuple(rows)
    if sc.method == AR_METHOD:   # one token per step by definition, not a prior's draw
        return (AcceptSource("given", "1", value=1.0),)
    seen = measured_acceptance(fit, sc)
    if seen is None or seen[2] == ON_OTHER_SYSTEMS:   # (this system's rows come first)
        found = AL.find(fit.meta, sc.model, sc.method, sc.block, sc.verify_tokens,
                        sc.drafter_named)
        if found is not None:
            g, group = found
            return (AcceptSource("posterior", "posterior", group=group, group_index=g),)
        # (an [[acceptance]] entry is its drafter's: one without, the default drafter's)
        ap = acceptance_prior(fit.priors, sc, sc.drafter_named)
        if ap is not None:
            return (AcceptSource("prior", f"prior {ap.describe()}", prior=ap),)
    if seen is None:
        asked = "" if default_why is None else f" (asked as the fit's default question: {default_why})"
        from ddtree_bayes.core.default_question import NO_SPECULATIVE

        give = ("pass --accept" if query is None else
                f'add --accept to the query, e.g. --query "{query} '
                f'--accept {min(3.0, sc.limit.tokens):g}"')
        if query is None and default_why is not None and NO_SPECULATIVE in default_why:
            # (a model measured autoregressive only was asked the bundled DDTree shape: the
            # drafter its user has runs another method)
            give += (", or ask the method and shape your drafter runs, with the tokens a step "
                     "emits, e.g. --method eagle3 --block 3 --accept 2.5:3.5;")
        else:
            give += ","
        raise QueryError(prefix + "no acceptance prior in the priors file and no measured "
                         f"acceptance for {sc.describe()}{asked}",
                         fix=f"{give} or add an [[acceptance]] entry to the priors")
    value, n_rows, where = seen
    rows_text = f"{n_rows} row{'s' * (n_rows > 1)}"
    # (shown as every text shows an acceptance, core/data accept_shown: 12.25 read "12.2"
    # here where the report's answer line said 12.25)
    return (AcceptSource("measured", f"{accept_shown(value)} measured ({rows_text})", value=value,
                         rows=n_rows, where=f"the mean accept_len of {rows_text} measured of "
                                            f"this configuration {where}"),)


def drafter_acceptance(fit: Fit, sc: Scenario) -> bool:
    """Does the fit know the acceptance of ``sc``'s ``--drafter`` for its configuration:
    rows of it with an accept_len, or an acceptance it inferred from rows of it without one
    (the default card's: the rows with a blank drafter column), or the priors'
    ``[[acceptance]]`` entry of that drafter."""
    from ddtree_bayes.core import acceptance_latent as AL

    drafter = sc.drafter_named
    return (measured_acceptance(fit, sc) is not None
            or AL.find(fit.meta, sc.model, sc.method, sc.block, sc.verify_tokens,
                       drafter) is not None
            or acceptance_prior(fit.priors, sc, drafter) is not None)


#: Why ``next``'s refusal of a candidate's block above the drafter's trained one cannot ask
#: for a drafter by name (core/drafters.py ``block_problem``'s ``default_only``); its
#: ``--query`` takes ``--drafter`` as predict does, so the query's refusal is predict's.
NEXT_DRAFTER = ("next's candidates draft with the model's default drafter (its --query takes "
                "--drafter)")


def resolve(fit: Fit, flags: Flags, *, strict: bool = False, prefix: str = "",
            hint: str = CONFIGURATION_FLAGS, acceptance: bool = True,
            query: str | None = None) -> Question:
    """Resolve ``flags`` against ``fit``: names checked, the flags not given filled from the
    fit's default question (a measured system's own rows first: :func:`question_default`),
    each engine's scenario, ``--accept`` checked against what a step can
    emit, each row's acceptance source. Raises :class:`QueryError` (one line, with a fix) for a
    question the fit cannot answer. ``prefix`` names where the flags came from (``--query: ``);
    ``hint`` the flags a default note tells to pass; ``acceptance`` False leaves the rows'
    acceptance sources out (a question about the step alone: ``optimize``). ``predict``,
    ``next --query`` and ``track`` fill the flags not given alike.

    Examples
    --------
    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> q = resolve(point_mass_draws(), Flags(accept="12:13"))
    >>> [(a.scenario.engine, a.scenario.verify_tokens, [s.label for s in a.accept])
    ...  for a in q.asked]
    [('sglang', 33, ['12', '13', 'U(12,13)']), ('native', 33, ['12', '13', 'U(12,13)'])]
    """
    if flags.drafter is not None:   # (a blank name: refused as the CLI's flag refuses it)
        check_drafter_name(flags.drafter, prefix)
    warnings = check_names(fit, flags, strict=strict, prefix=prefix)
    d, own = question_default(fit, flags)
    config, from_default = fill(d, flags, fit.methods)
    if config["hardware"] is None or config["method"] is None or not config["engines"]:
        raise QueryError("a configuration needs --hardware, --method and --engine",
                         fix="give all three, or none for the default question")
    asked_default = d.to_json() if d.derived and from_default else None
    note = (None if asked_default is None else
            default_note(asked_default, flags, hint, config, own=own))
    request = None if flags.accept is None else parse_accept(flags.accept)
    context = parse_context(flags.context)
    warnings += context_warnings(fit, context, flags.model, prefix)
    # why the default filled the flags not given, for an error, as default_note says it
    why = None if asked_default is None or d.why is None else filled_why(d.why, flags)
    asked = []
    for engine in config["engines"]:
        sc = resolve_scenario(fit, hardware=config["hardware"], gpus=config["gpus"],
                              engine=engine, method=config["method"], block=config["block"],
                              budget=config["budget"], verify_tokens=config["verify_tokens"],
                              context_tokens=context, model=flags.model,
                              kv_cache=flags.kv_cache, drafter=flags.drafter)
        if flags.new_deployment:
            sc = replace(sc, new_deployment=True)
            said = new_deployment_warning(fit, sc)
            if said is not None and prefix + said not in warnings:   # (once for the engines)
                warnings += (prefix + said,)
        if flags.drafter is not None:
            sc = with_drafter(fit, sc, flags.drafter, prefix)
            if request is None and acceptance and not drafter_acceptance(fit, sc):
                # (an example the configuration can emit: "--accept 3:4" was told to an
                # EAGLE-3 chain of depth 2, which then refused it, at most 3 tokens per step)
                top = sc.limit.tokens
                raise QueryError(prefix + f"--drafter {flags.drafter}: the fit measured no "
                                 f"acceptance of it for {sc.describe()}",
                                 fix="give the acceptance you expect with --accept, "
                                     f"{sc.limit.describe()}, e.g. --accept "
                                     f"{max(top - 1, 1):g}:{top:g}")
        elif acceptance and sc.method != AR_METHOD and (named := other_drafters(fit, sc)) and (
                request is None or not any(r.drafter is None
                                           for r in configuration_rows(fit, sc))):
            # (with --accept too when no row ran the answer's drafter: its passes are priced
            # as no row measured them; --accept 2.23 of a configuration whose rows all name a
            # card 2.92x the generic drafter's pass answered 123 tok/s for the rows' 112)
            said = prefix + other_drafters_note(fit, sc, named,
                                                accept_asked=request is not None)
            warnings += () if said in warnings else (said,)   # (once for the engines)
        if request is not None:
            check_accept(request, str(flags.accept), sc.limit, prefix,
                         edited=partial(edited_block, fit, sc))
        asked.append(Asked(sc, accept_sources(fit, sc, request, flags.accept, why,
                                              prefix=prefix, query=query)
                           if acceptance else ()))
    if asked:   # (the engines share model, GPUs and context: one check)
        warnings += tuple(prefix + w for w in memory_warnings(fit, asked[0].scenario,
                                                              flags.concurrency or (1,)))
        # (of each engine: an AMD GPU's overhead is priced per engine)
        warnings += tuple(dict.fromkeys(prefix + w for a in asked
                                        if (w := amd_overhead_warning(fit, a.scenario))))
        warnings += verify_context_warnings(fit, asked[0].scenario, prefix)
        warnings += system_context_warnings(fit, asked[0].scenario, prefix)
        # (of each engine: llama.cpp's GPUs read in turn whichever engine is asked first)
        warnings += tuple(prefix + w for a in asked
                          if (w := layer_split_warning(fit, a.scenario)) is not None)
        # C or C x M beyond the measured, at one stream too (M = 65 against M = 4 measured
        # was said at C = 2 only): said with the warnings
        # (on a system without rows, past those of the one its step is transferred from)
        from ddtree_bayes.engine.structure import beyond_measured_note
        from ddtree_bayes.engine.transfer import rows_behind

        first = asked[0].scenario
        beyond = beyond_measured_note(fit, rows_behind(fit, first), flags.concurrency or (1,),
                                      first.verify_tokens)
        warnings += () if beyond is None else (prefix + beyond,)
    left_out: dict[str, str] = {} if flags.engines else ar_repeats(fit, asked)
    asked = [a for a in asked if a.scenario.engine not in left_out]
    # a GPU count the model's heads cannot be sharded over, in the engines answered (one line
    # for them all: they share model, GPUs and card)
    if asked and (tp := tensor_parallel_warning(fit, asked[0].scenario,
                                                [a.scenario.engine for a in asked])):
        warnings += (prefix + tp,)
    model = asked[0].scenario.model if asked else flags.model
    return Question(flags=flags, model=model, default=d, default_asked=asked_default, note=note,
                    warnings=warnings, request=request, asked=tuple(asked),
                    left_out=tuple(left_out.values()))


def ar_repeats(fit: Fit, asked: list[Asked]) -> dict[str, str]:
    """The engines of an autoregressive question whose row would repeat another's: an engine
    with a relation (native = (1 - reduction) x sglang overhead) scales its base engine's
    speculative overhead, which AR has none of, so at AR its step is the base engine's (the
    model has no AR engine term), anchored to the base's AR rows as the base's is.
    Unless it measured AR rows of its own on the system (its anchor), its row adds nothing:
    {engine: the line saying so}, for the default engines (``--engine`` asks for it)."""
    from ddtree_bayes.engine.transfer import has_own_rows

    engines = [a.scenario.engine for a in asked]
    bases = fit.meta.get("model", {}).get("relation_bases") or {}
    out = {}
    for a in asked:
        sc, base = a.scenario, bases.get(a.scenario.engine)
        if sc.method != AR_METHOD or base is None or base == sc.engine or base not in engines:
            continue
        if has_own_rows(fit, sc.pair, sc.engine, AR_METHOD):
            continue
        out[sc.engine] = (f"{sc.engine}: left out: autoregressive decoding has no speculative "
                          f"overhead for its relation to {base} to scale, so its step is "
                          f"{base}'s and its row would add nothing (--engine "
                          f"{','.join(engines)} asks for it)")
    return out

"""Which measurement to make next (``ddtree-bayes next``).

Preposterior analysis by importance reweighting: for a candidate measurement, simulate K
plausible results from the current posterior predictive, reweight the posterior draws by
the likelihood of each, and average the query's weighted interval width.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddtree_bayes.core.config import DEFAULT_SEED
from ddtree_bayes.core.data import (
    AR_METHOD,
    MAX_BLOCK,
    MAX_BUDGET,
    MAX_CONCURRENCY,
    MAX_GPUS,
    NotPlain,
    check_context_tokens,
    check_named_columns,
    check_unique_header,
    check_verify_tokens,
    derive_verify_tokens,
    missing_column,
    plain_float,
    plain_text,
    underivable_verify_tokens,
)
from ddtree_bayes.core.errors import DataError, InputError, QueryError, without_fix
from ddtree_bayes.core.likelihood import likelihood_nu, row_logp, standard_noise
from ddtree_bayes.core.pairs import pair_label
from ddtree_bayes.core.row_notes import FLAG_COLUMNS, step_reach
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.ceiling import balanced_read, routing_row
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.question import (
    NEXT_DRAFTER,
    AcceptSource,
    Flags,
    question_default,
    resolve,
)
from ddtree_bayes.engine.scenario import check_acceptance_range, drafter_cards
from ddtree_bayes.engine.structure import new_deployment_group, pass_drafter, run_sd
from ddtree_bayes.engine.target_models import resolve_model, row_pair
from ddtree_bayes.workflows.decisions.common import (
    CANDIDATE_AR_CONCURRENCIES,
    CANDIDATE_BUDGETS,
    CANDIDATE_COLUMNS,
    CANDIDATE_OPTIONAL,
    DEFAULT_K,
    MIN_ESS,
    overhead_group,
    shared_components,
)


# ------------------------------------------------------------------ next: the query
class _QueryParser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise QueryError(f"--query: {message}",
                         fix='give predict flags, e.g. --query "--hardware b300 --engine native '
                             '--method ddtree --block 16 --budget 32 --accept 14"')


#: Standard errors within which a candidate's reduction is Monte Carlo noise.
MC_ERRORS = 2.0


#: How ``next`` names the candidate at a ``--new-deployment`` query's configuration: a row of
#: the deployment the fit measured, not of the one the query asks about (cli/decisions.py
#: ``query_itself`` says what measuring that one takes).
NEW_DEPLOYMENT_WHY = "on the fit's deployment (not yours: --new-deployment)"


@functools.cache
def _query_parser() -> _QueryParser:
    """The ``--query`` flags' parser, built once per process: a query is resolved again for
    every simulated result (:func:`simulated_update`), and argparse keeps no state between
    parses."""
    from ddtree_bayes.core.query_flags import (
        add_kv_cache_argument,
        add_new_deployment_argument,
        add_scenario_arguments,
        whole_number,
    )

    # (no abbreviated flags, as every command's parser: `--acc 14` was taken for --accept)
    q = _QueryParser(prog="--query", add_help=False, allow_abbrev=False)
    add_scenario_arguments(q)
    add_kv_cache_argument(q)
    q.add_argument("--accept")
    q.add_argument("--concurrency", type=whole_number)
    q.add_argument("--drafter")   # (as predict's: Flags.of reads it, resolve checks it)
    add_new_deployment_argument(q)
    return q


@dataclass(frozen=True)
class Query:
    """A single-engine predict query, resolved (:func:`ddtree_bayes.engine.question.resolve`):
    its scenario, its acceptance as given and where its acceptance comes from."""

    scenario: P.Scenario
    accept: str | None          # as given (None: the posterior, prior or measured acceptance)
    #: the fit's derived default question when it filled flags the query did not give (the fit
    #: never measured B300), else None
    default_scenario: dict | None = None
    source: AcceptSource | None = None
    #: one stderr line on the default question, names never seen (warnings)
    note: str | None = None
    warnings: tuple[str, ...] = ()
    #: the ``--query`` text it was resolved from (None: made otherwise), which
    #: :func:`simulated_update` resolves again against the data with a simulated row: a
    #: query whose acceptance the data give takes a measured row's at its configuration
    text: str | None = None


def parse_query(draws: Fit, text: str, *, strict: bool = False) -> Query:
    """Resolve ``--query "<predict flags>"`` (one engine) against the fit, as ``predict``
    resolves its flags (:func:`ddtree_bayes.engine.question.resolve`): no configuration flags is
    the fit's default question in its first engine; with some flags, the default question fills
    those not given as it does for ``predict`` (``--hardware h100 --gpus 8`` asks its method at
    its block and budget)."""
    try:
        tokens = shlex.split(text)
    except ValueError as err:
        raise QueryError(f"--query {text!r}: {err}", fix="balance the quotes") from None
    a = _query_parser().parse_args(tokens)
    if a.engine is not None and "," in a.engine:
        raise QueryError("--query takes one engine", fix="give one --engine in the query")
    if a.model is None:   # a fit of several models: the fix names --query, where it goes
        resolve_model(draws, None, asked_as='--query "--model {}"')
    flags = Flags.of(a)
    if flags.engines is None:   # the default question's first engine only
        flags = Flags.of(a, engines=question_default(draws, flags)[0].engines[:1])
    if a.accept is not None:
        req = P.parse_accept(a.accept)
        if req.uniform is None and len(req.values) != 1:
            raise QueryError(f"--query --accept {a.accept}: one value or a range lo:hi",
                             fix="e.g. --accept 14 or --accept 12:16 (Uniform(12, 16))")
        if req.uniform is not None and a.accept.count(":") == 2:
            # (predict's step sets its table's rows; the Uniform row, next's answer, has none)
            lo, hi = (plain_text(v) for v in req.uniform)
            raise QueryError(f"--query --accept {a.accept}: a step sets the rows predict "
                             "tabulates, but next answers one acceptance, the range as "
                             f"Uniform({lo}, {hi})", fix=f"give --accept {lo}:{hi}, or one value")
    q = resolve(draws, flags, strict=strict, prefix="--query: ", hint="--query flags",
                query=text.strip())
    asked = q.asked[0]
    source = asked.accept[-1]   # a range: its Uniform row (the values are its ends)
    scenario = asked.scenario
    if a.concurrency is not None:
        if a.concurrency < 1:
            raise QueryError(f"--query --concurrency {a.concurrency} is below 1",
                             fix="give the number of streams decoded together, e.g. 16")
        scenario = dataclasses.replace(scenario, concurrency=a.concurrency)
    return Query(scenario, a.accept, q.default_asked, source, q.note, q.warnings, text)


def query_acceptance(draws: Fit, query: Query, rng: np.random.Generator
                     ) -> tuple[np.ndarray, str]:
    """Acceptance draws for the query, as ``predict`` draws them for its source: a given
    value, Uniform(lo, hi) for a range, an inferred acceptance's posterior, the scenario's
    acceptance prior from the priors stored in the fit, or its measured rows' mean."""
    sc, source = query.scenario, query.source
    if source is None:
        raise QueryError("--query: no acceptance", fix="add --accept to the query")
    a, _ = P.acceptance_draws(draws, source, rng)
    label = source.label
    check_acceptance_range(draws, sc, a, f"--query: acceptance {label}")   # (as predict's)
    return a, label


# ------------------------------------------------------------------ next: candidates
@dataclass(frozen=True)
class Candidate:
    """One measurement that could be made next. ``accept_len`` is the acceptance it would
    be measured at; it shifts log tok/s by a constant, so it does not change what the
    measurement teaches about the step time."""

    scenario: P.Scenario
    accept_len: float | None
    why: str

    def describe(self) -> str:
        sc = self.scenario
        return describe_candidate(sc.model if sc.multi else None, sc.hardware, sc.gpus,
                                  sc.engine, sc.method, sc.block, sc.budget, sc.verify_tokens,
                                  sc.context_tokens, sc.concurrency)

    def key(self) -> tuple:
        sc = self.scenario
        engine = "-" if sc.method == AR_METHOD else sc.engine
        return (sc.pair, engine, sc.method, sc.verify_tokens, sc.context_tokens,
                sc.concurrency)


def describe_candidate(model: str | None, hardware: str, gpus: int, engine: str, method: str,
                       block: int | None, budget: int | None, verify_tokens: int | None,
                       context_tokens: float | None, concurrency: int) -> str:
    """A candidate as the table and the JSON name it: ``kimi-k2.6 h100 x1 vllm ddtree block 16
    budget 8 M=9`` (the model first in a fit of several models: ``model`` None in a fit of
    one; ``M=`` left out when ``verify_tokens`` is None).

    >>> describe_candidate(None, "b300", 8, "sglang", "ar", None, None, 1, 0.0, 1)
    'b300 x8 sglang ar'
    >>> describe_candidate("qwen3-8b", "h100", 1, "vllm", "eagle3", 3, 3, 4, 65536.0, 4)
    'qwen3-8b h100 x1 vllm eagle3 block 3 budget 3 M=4 ctx 65536 C=4'
    """
    parts = [f"{hardware} x{gpus}", engine, method]
    if model is not None:
        parts.insert(0, model)
    if method != AR_METHOD:
        if block is not None:
            parts.append(f"block {block}")
        if budget is not None:
            parts.append(f"budget {budget}")
        if verify_tokens is not None:
            parts.append(f"M={verify_tokens}")
    if context_tokens:
        parts.append(f"ctx {plain_text(float(context_tokens))}")
    if concurrency != 1:
        parts.append(f"C={concurrency}")
    return " ".join(parts)


@dataclass(frozen=True)
class Unbuilt:
    """A default candidate no scenario can be made of (its model's weights do not fit in its
    GPUs: the default list takes the query's model to every system any model measured, Kimi
    K2.6's 600 GB to one H100 too), named by what it asks (:func:`describe_candidate`); left
    out with why, as one nobody can measure is (:func:`default_candidates`)."""

    description: str
    why: str

    def describe(self) -> str:
        return self.description


def unbuilt(draws: Fit, query: Query, why: str, given: dict) -> Unbuilt:
    """The default candidate ``given`` (:func:`make_candidate`'s keywords) of ``query``, whose
    scenario cannot be made, as :class:`Unbuilt`: the query's model and concurrency where it
    does not say them, its verify tokens derived from its shape."""
    from ddtree_bayes.core.data import derive_verify_tokens

    q = query.scenario
    verify = given.get("verify_tokens") or derive_verify_tokens(
        given["method"], given.get("block"), given.get("budget"), draws.methods)
    return Unbuilt(describe_candidate(
        (given.get("model") or q.model) if q.multi else None, given["hardware"],
        given["gpus"], given["engine"], given["method"], given.get("block"),
        given.get("budget"), verify, given.get("context_tokens"),
        given.get("concurrency") or q.concurrency), why)


def unmeasurable(draws: Fit, scenario: P.Scenario, cards: tuple | None = None) -> str | None:
    """Why nobody can make a measurement of ``scenario`` (None: someone can): its streams' KV
    cache does not fit beside the weights (:func:`~ddtree_bayes.engine.scenario.kv_cache_warning`:
    AR at C = 128 offered to a long-context query), its context is longer than its model's
    card takes (:func:`~ddtree_bayes.core.row_notes.context_above_max`) or its step's
    verified tokens reach past it (:func:`~ddtree_bayes.core.row_notes.step_reach_above_max`),
    its engine is a
    relation engine (e.g. native, "a hypothetical C++/CUDA speculative loop") the fit has no
    row of, or its speculative method has no drafter for its model: no drafter card (the fit's
    stored ones, the built-in ones, ``data/drafters.csv``: ``cards``, else
    :func:`drafter_cards`) serves that model and method and the fit measured that method for
    no row of that model."""
    from ddtree_bayes.core.model_cards import stored_card
    from ddtree_bayes.core.row_notes import context_above_max, step_reach_above_max
    from ddtree_bayes.engine.scenario import kv_cache_warning, no_drafter

    rows = draws.measurements.rows
    # streams whose KV cache the GPUs cannot hold beside the weights (predict warns of it)
    crowded = kv_cache_warning(draws, scenario, scenario.concurrency)
    if crowded is not None:
        return crowded
    bases = draws.meta["model"].get("relation_bases") or {}
    engine = scenario.engine
    if (scenario.method != AR_METHOD and engine in bases
            and not any(r.engine == engine for r in rows)):
        return (f"{engine} is a modelled engine (its speculative overhead is {bases[engine]}'s "
                "times 1 - reduction) with no measurement in the fit: there is no such engine "
                "to run")
    # a context longer than the model takes (a query past it is answered, with a warning;
    # `next --query "... --context 300k"` proposed measuring Kimi K2.6 at 307200 tokens)
    card = stored_card(draws.meta.get("model", {}), scenario.model)
    above = context_above_max(card, scenario.context_tokens)
    if above is not None:
        return above + ", so nobody can run it as configured"
    # nor a step whose verified tokens reach past it (`next --query "--budget 1000000"` ranked
    # the query itself first, M = 1,000,001 on a 262,144-token model)
    reach = step_reach_above_max(card, scenario.context_tokens,
                                 getattr(scenario, "verify_tokens", None))
    if reach is not None:
        return reach + ", so nobody can run it as configured"
    cards = drafter_cards(draws) if cards is None else cards
    return (no_drafter(draws, scenario.model, scenario.method, cards)
            or no_default_drafter(draws, scenario, cards))


def no_default_drafter(draws: Fit, scenario: P.Scenario, cards: tuple) -> str | None:
    """Why a candidate of ``scenario`` cannot be measured with the default drafter, which
    every candidate drafts with (a blank drafter column): no default card of ``cards`` serves
    its model's method, and the fit's rows of that method for the model all name a card (so no
    row ran a default drafter either: predict calls it "a drafter no row measured and no card
    describes"). None: AR, a default card, a row with a blank drafter column, or no row of the
    method (:func:`~ddtree_bayes.engine.scenario.no_drafter` says that case). `next --query
    "--method eagle3 --drafter lightseekorg/kimi-k2.5-eagle3-mla --concurrency 8"` on the Kimi
    K2.6 concurrency sweep ranked such a run first."""
    from ddtree_bayes.core.drafters import drafter_for
    from ddtree_bayes.engine.target_models import deployments_of_one_model

    method = scenario.method
    if method == AR_METHOD:
        return None
    rows = draws.measurements.rows
    model = scenario.model or (rows[0].model if rows else None)
    if model is None or drafter_for(cards, model, method) is not None:
        return None
    ran = [r for r in rows
           if r.method == method and deployments_of_one_model(draws, r.model, model)]
    if not ran or any(r.drafter is None for r in ran):
        return None
    named = sorted({str(r.drafter) for r in ran})
    return (f"no default {method} drafter card serves {model}, and the fit's {method} rows of "
            f"it all name the drafter{'s' * (len(named) > 1)} {', '.join(named)}: a candidate "
            "is measured with the default drafter (a blank drafter column), which no row ran "
            "and no card describes (`ddtree-bayes card add` a default one)")


def transfer_note(draws: Fit, scenario: P.Scenario) -> str | None:
    """What a candidate on a system its model was never measured on says of it (None: the fit
    measured that model there): ``by transfer: measured there with kimi-k2.6 only`` in a fit
    of several models whose other models measured that system (the default candidates'
    systems are every measured one, whichever model measured it: the candidate names its own
    model), ``by transfer: h200 x8 never measured`` where no model was."""
    if scenario.measured:
        return None
    others = list(dict.fromkeys(r.model for r in draws.measurements.rows
                                if r.system == scenario.system)) if scenario.multi else []
    if not others:
        return f"by transfer: {scenario.hardware} x{scenario.gpus} never measured"
    more = len(others) - 1
    return (f"by transfer: measured there with {others[0]} "
            + (f"and {more} other model{'s' if more > 1 else ''}" if more else "only"))


def make_candidate(draws: Fit, query: Query | None, why: str, accept: float | None,
                   cards: tuple, **given) -> tuple[Candidate, str | None]:
    """One candidate measurement, as the default list and a ``--candidates`` file make it:
    its scenario resolved with what ``given`` says (``block``/``budget`` None: none), and the
    query's model, concurrency and KV cache (``--kv-cache``: the memory check counts the cache
    at it) where it does not say them (``model``, ``concurrency`` and ``verify_tokens`` None:
    the query's, 1 without one, derived); AR's acceptance is 1. With it, why nobody can make
    it (:func:`unmeasurable`; None: someone can). A candidate on a system its model was never
    measured on, other than the query's own (whose transfer the query's line says), says so
    after ``why`` (:func:`transfer_note`): in a fit of several models the default list proposes
    the query's model on every system another model measured."""
    q = None if query is None else query.scenario
    inherited = {"model": None if q is None else q.model, "verify_tokens": None,
                 "concurrency": 1 if q is None else q.concurrency}
    kw = {**inherited, **{k: v for k, v in given.items() if v is not None or k not in inherited}}
    sc = P.resolve_scenario(draws, kv_cache=None if q is None else q.kv_cache,
                            default_only=NEXT_DRAFTER, **kw)
    note = None if q is not None and sc.pair == q.pair else transfer_note(draws, sc)
    if note is not None:
        why = f"{why} ({note})"
    c = Candidate(sc, 1.0 if sc.method == AR_METHOD else accept, why)
    return c, unmeasurable(draws, sc, cards)


def default_candidates(draws: Fit, query: Query,
                       left_out: list[tuple[Candidate | Unbuilt, str]] | None = None
                       ) -> list[Candidate]:
    """A sensible list from the fit's measured systems, engines and methods:

    - the query's own configuration;
    - the query's configuration in every other engine measured on its system, every
      engine with a declared relation (e.g. native) and their base engines;
    - autoregressive on the query's system, one stream at context 0, if that system has no
      measurements (hardware transfer), and at the query's context and concurrency if the
      context is not 0;
    - a query at C > 1: the query (and, in an engine with a relation, the query in its
      base engine) and autoregressive at the doublings of C between the largest measured on
      its system and the query's, and autoregressive at C = 32, 64 and 128 (many tokens per
      step: the compute knee);
    - for every measured system: autoregressive at context 0, and DDTree budgets 8, 32
      and 128 in every engine measured on that system.

    Of these, a measurement nobody can make (:func:`unmeasurable`: an engine that is only a
    relation, a method without a drafter for the model, streams whose KV cache does not fit,
    counted at the query's ``--kv-cache`` when it gives one) is left out, and appended with why
    to ``left_out``; so is one no scenario can be made of (:class:`Unbuilt`: in a fit of
    several models, the query's model on a system whose GPUs cannot hold its weights), with
    what refused it.
    """
    q = query.scenario
    fitted = set(draws.measured_systems)
    # in a fit of several models: the query's model on every system measured with any model
    rows = [r for r in draws.measurements.rows if row_pair(draws, r) in fitted]
    systems: dict[str, tuple[str, int]] = {}
    engines: dict[str, list[str]] = {}
    for r in rows:
        label = pair_label(q.model or "", r.system, q.multi)
        systems.setdefault(label, (r.hardware, r.gpus))
        engines.setdefault(label, [])
        if r.engine not in engines[label]:
            engines[label].append(r.engine)
    block = q.block if (q.method == "ddtree" and q.block is not None) else 16
    q_accept = None
    if query.accept is not None:
        req = P.parse_accept(query.accept)
        q_accept = req.values[0] if req.uniform is None else sum(req.uniform) / 2

    out: list[Candidate] = []
    seen: set[tuple | str] = set()
    cards = drafter_cards(draws)   # (read once, not once per candidate)

    def add(why: str, accept: float | None, **kw) -> None:
        try:
            c, reason = make_candidate(draws, query, why, accept, cards, **kw)
        except QueryError as err:
            # (it was dropped without a word: Kimi K2.6 on one H100, 45 candidates in a fit
            # of 10 models, while a native candidate was listed with its reason)
            u = unbuilt(draws, query, why, kw)
            if u.description not in seen:
                seen.add(u.description)
                if left_out is not None:
                    left_out.append((u, without_fix(err)))
            return
        if c.key() in seen:
            return
        seen.add(c.key())
        if reason is None:
            out.append(c)
        elif left_out is not None:
            left_out.append((c, reason))

    same = {"hardware": q.hardware, "gpus": q.gpus, "method": q.method, "block": q.block,
            "budget": q.budget, "context_tokens": q.context_tokens}
    # (a candidate drafts with the model's default drafter: a query naming another is
    # measured at its configuration with the default one, whose step it shares)
    itself = ("the query itself" if q.drafter_named is None else
              f"the query's configuration, with the default drafter (not {q.drafter_named})")
    if new_deployment_group(draws, q) is not None:
        # (--new-deployment: the query asks another deployment of the group; this candidate
        # is a row of the deployment the fit measured, which leaves the scatter between them)
        itself = (itself.replace("the query itself", "the query's configuration")
                  + f", {NEW_DEPLOYMENT_WHY}")
    add(itself, q_accept, engine=q.engine, **same)
    bases = draws.meta["model"]["relation_bases"]
    others = [*engines.get(q.pair, []), *bases, *bases.values()]
    for e in dict.fromkeys(others):
        if e != q.engine and q.method != AR_METHOD:
            add(f"the query in {e}", q_accept, engine=e, **same)
    if not getattr(q, "measured", True):   # (one stream: the query's C was inherited)
        add("AR on the query's system", 1.0, hardware=q.hardware, gpus=q.gpus, engine=q.engine,
            method=AR_METHOD, block=None, budget=None, context_tokens=0.0, concurrency=1)
    if q.context_tokens:
        add("AR at the query's context", 1.0, hardware=q.hardware, gpus=q.gpus,
            engine=engines.get(q.pair, [q.engine])[0], method=AR_METHOD, block=None,
            budget=None, context_tokens=q.context_tokens)
    # a query past the model's longest context: its own runs cannot be made (unmeasurable);
    # the nearest that can, at that longest context, measure the context cost it asks about
    # (the query's step at the context its verified tokens end at the longest position)
    longest = _longest_context_below(draws, q)
    if longest is not None:
        last = longest - step_reach(0, q.verify_tokens)   # (its last token at the longest)
        # (negative: its M verified tokens alone pass the longest position, at any context,
        # context 0 too; no run of the query's configuration can be made, none stands in)
        if last >= 0:
            add("the query at the model's longest context", q_accept, engine=q.engine,
                **{**same, "context_tokens": last})
        if q.context_tokens > longest:
            add("AR at the model's longest context", 1.0, hardware=q.hardware, gpus=q.gpus,
                engine=engines.get(q.pair, [q.engine])[0], method=AR_METHOD, block=None,
                budget=None, context_tokens=longest)
    # a query beyond the concurrencies measured: the query and AR at the doublings between
    measured_c = max((r.concurrency for r in rows if row_pair(draws, r) == q.pair), default=1)
    c = 2 * measured_c
    base = bases.get(q.engine) if q.method != AR_METHOD else None
    while c < q.concurrency:
        add(f"the query at concurrency {c}", q_accept, engine=q.engine, **same,
            concurrency=c)
        if base is not None:   # (a relation engine nobody runs: its base engine can be)
            add(f"the query in {base} at concurrency {c}", q_accept, engine=base, **same,
                concurrency=c)
        add(f"AR at concurrency {c}", 1.0, hardware=q.hardware, gpus=q.gpus,
            engine=engines.get(q.pair, [q.engine])[0], method=AR_METHOD, block=None,
            budget=None, context_tokens=q.context_tokens, concurrency=c)
        c *= 2
    if q.concurrency > 1:   # many tokens per step, cheaply: where verifying turns compute-bound
        for c in CANDIDATE_AR_CONCURRENCIES:
            add(f"AR at concurrency {c} (the compute knee)", 1.0, hardware=q.hardware,
                gpus=q.gpus, engine=engines.get(q.pair, [q.engine])[0], method=AR_METHOD,
                block=None, budget=None, context_tokens=q.context_tokens, concurrency=c)
    for system, (hw, gpus) in systems.items():
        add("AR, context 0", 1.0, hardware=hw, gpus=gpus, engine=engines[system][0],
            method=AR_METHOD, block=None, budget=None, context_tokens=0.0, concurrency=1)
        for e in engines[system]:
            for b in CANDIDATE_BUDGETS:
                add(f"DDTree budget {b}", None, hardware=hw, gpus=gpus, engine=e,
                    method="ddtree", block=block, budget=b, context_tokens=0.0,
                    concurrency=1)
    return out


def _longest_context_below(draws: Fit, q: P.Scenario) -> float | None:
    """The query model's longest context (its card's ``max_context_tokens``) when the query
    asks past it, its context or the positions its step's verified tokens take after it (at
    any context, 0 too: the caller offers no stand-in whose context would be negative), else
    None (within it, or a card that does not say)."""
    from ddtree_bayes.core.model_cards import stored_card

    card = stored_card(draws.meta.get("model", {}), q.model)
    longest = getattr(card, "max_context_tokens", None) if card is not None else None
    reach = step_reach(q.context_tokens, q.verify_tokens)
    if not longest or reach <= longest:
        return None
    return float(longest)


def _csv_number(path: str, row: int, rec: dict, column: str, *, integer: bool = False
                ) -> float | None:
    """A number (or None for blank) from one CSV record: non-negative, or with ``integer``
    a whole number (the caller bounds it)."""
    raw = (rec.get(column) or "").strip()
    if not raw:
        return None
    try:
        value = plain_float(raw)
    except NotPlain:
        raise DataError(f"{raw!r} is not a plain number", file=path, row=row, column=column,
                        fix="write it with the digits 0-9, a point and an exponent only") from None
    except ValueError:
        raise DataError(f"{raw!r} is not a number", file=path, row=row, column=column,
                        fix="give a number or leave it blank") from None
    # (a whole-number column, each >= 1, is bounded by the caller: -2 was told "give a
    # non-negative whole number", and the 0 that invited was refused next)
    if not math.isfinite(value) or (value < 0 and not integer) or (integer and value != int(value)):
        raise DataError(f"{raw!r} is not a valid {column}", file=path, row=row, column=column,
                        fix="give " + ("a whole number" if integer else
                                       # (an acceptance counts the bonus token: 0 is refused)
                                       "the tokens a step emits, at least 1 (the bonus token), "
                                       "or leave it blank" if column == "accept_len" else
                                       "a non-negative number"))
    return value


#: predict's flags that are a candidates file's columns (core/row_notes ``FLAG_COLUMNS``): a
#: row's error, written for the flags, names the column instead (``--kv-cache`` is the
#: query's, and stays)
CANDIDATE_FLAGS = ("--hardware", "--gpus", "--engine", "--method", "--block", "--budget",
                   "--verify-tokens", "--context", "--model", "--concurrency")
_FLAG_RE = re.compile(r"(with )?(" + "|".join(map(re.escape, CANDIDATE_FLAGS)) + r")\b(?!-)")


def candidate_error(path: str, row: int, err: QueryError) -> QueryError:
    """A candidate row's scenario error as the file's: its file, row and column (the first
    flag its fix or message names, else the column its message starts with), and the flags
    it names written as columns ("fix: --gpus 5 or more" told to pass a flag).

    >>> e = QueryError("the weights do not fit in 1 x h200", fix="--gpus 5 or more of them")
    >>> print(candidate_error("c.csv", 3, e))
    c.csv, row 3, column 'gpus': the weights do not fit in 1 x h200 (fix: gpus 5 or more of them)
    >>> print(candidate_error("c.csv", 2, QueryError("h200 could run on 1 or 2 GPUs",
    ...                                             fix="say which with --gpus")))
    c.csv, row 2, column 'gpus': h200 could run on 1 or 2 GPUs (fix: say which in column gpus)
    """
    def columns(text: str) -> str:
        return _FLAG_RE.sub(lambda m: ("in column " if m.group(1) else "")
                            + FLAG_COLUMNS[m.group(2)], text)

    message = without_fix(err)
    named = [m.group(2) for m in _FLAG_RE.finditer(f"{err.fix or ''} {message}")]
    first = message.split(" ", 1)[0]
    column = (FLAG_COLUMNS[named[0]] if named else
              first if first in CANDIDATE_COLUMNS + CANDIDATE_OPTIONAL else None)
    return QueryError(columns(message), file=path, row=row, column=column,
                      fix=None if err.fix is None else columns(err.fix))


def read_candidates(draws: Fit, path: str | Path, query: Query | None = None, *,
                    strict: bool = False, warnings: list[str] | None = None,
                    left_out: list[tuple[Candidate, str]] | None = None) -> list[Candidate]:
    """Candidates from a CSV with columns hardware,gpus,engine,method,block,budget,
    accept_len,context_tokens (gpus, block, budget, accept_len, context_tokens may be blank)
    and, optionally, model (blank or absent: the query's), verify_tokens (blank or
    absent: derived from block and budget; checked against them as a measurement row's) and
    concurrency (blank or absent: the query's, 1 without one; a candidate measured with C
    streams). Each is made as a default candidate is (:func:`make_candidate`: the query's
    KV cache too), and one nobody can make is left out and appended with why to
    ``left_out`` (a DataError when none is left). Any other column
    is refused, naming the closest known one: a misspelt ``concurency`` was ignored and its
    candidate ranked at one stream. An engine or method the
    fit never measured nor declares is named in ``warnings`` as predict names it (an error
    with ``strict``): a typo would otherwise be ranked as a new engine; so is a candidate on
    more GPUs than one node holds (engine/scenario ``node_warning``)."""
    from ddtree_bayes.core import per_call
    from ddtree_bayes.engine.question import Flags, check_names
    from ddtree_bayes.engine.scenario import drafter_cards, node_warning

    path = str(path)
    try:
        with per_call.open_text(path) as fh:   # (the bytes the CLI's check read: once)
            reader = csv.DictReader(fh)   # (rows numbered by the line each record ends on)
            # names stripped, as read_csv_file strips a measurement file's ("engine, method")
            header = [h.strip() for h in reader.fieldnames or []]
            reader.fieldnames = header
            records = [(rec, reader.line_num) for rec in reader]
    except OSError as err:
        raise DataError(f"cannot read candidates file: {err.strerror}", file=path,
                        fix="pass an existing CSV with --candidates") from None
    check_unique_header(path, header)   # (as fit, add and hardware do)
    # a misspelt column is refused (its values would be dropped without a word), before the
    # one it leaves missing, as the measurement and card readers do; other extra columns
    # (notes, a trailing comma's blank name) are ignored, as in a measurement file
    fix = "header: " + ",".join(CANDIDATE_COLUMNS)
    check_named_columns(path, header, CANDIDATE_COLUMNS, CANDIDATE_OPTIONAL, fix)
    for column in CANDIDATE_COLUMNS:
        if column not in header:
            missing_column(path, header, column, fix)
    if not records:
        raise DataError("no candidate rows", file=path, fix="add one row per candidate")
    out = []
    left: list[tuple[Candidate, str]] = []
    first_left = 0   # (the row of the first left out)
    cards = drafter_cards(draws)   # (read once, not once per candidate)
    seen: dict[tuple, int] = {}
    for rec, i in records:
        for column in ("hardware", "engine", "method"):
            if not (rec.get(column) or "").strip():
                raise DataError("empty", file=path, row=i, column=column, fix=f"give the {column}")
        if None in rec:   # cells past the header: as unknown a column as a misspelt name
            raise DataError(f"{len(header) + len(rec[None])} cells, the header has "
                            f"{len(header)}", file=path, row=i,
                            fix="name every column in the header, or drop the extra cells")
        gpus, block, budget, verify, streams = (
            _csv_number(path, i, rec, c, integer=True)
            for c in ("gpus", "block", "budget", "verify_tokens", "concurrency"))
        accept = _csv_number(path, i, rec, "accept_len")
        ctx = _csv_number(path, i, rec, "context_tokens")
        for column, value, most in (("gpus", gpus, MAX_GPUS), ("block", block, MAX_BLOCK),
                                    ("budget", budget, MAX_BUDGET),
                                    ("verify_tokens", verify, MAX_BUDGET + 1),
                                    ("concurrency", streams, MAX_CONCURRENCY)):
            if value is not None and value < 1:
                raise DataError(f"{column} must be >= 1, got {value:g}", file=path, row=i,
                                column=column, fix="write a positive whole number (or blank)")
            if value is not None and value > most:   # (as every other input: core/data.py)
                raise DataError(f"{column} must be 1 to {most}, got {value:g}", file=path,
                                row=i, column=column,
                                fix="write a positive whole number (or blank)")
        if ctx is not None:   # (as a data row's)
            check_context_tokens(ctx, plain_text(ctx), file=path, row=i)
        method = rec["method"].strip()
        if verify is not None:   # (as a data row's)
            check_verify_tokens(path, i, method, None if block is None else int(block),
                                None if budget is None else int(budget), int(verify),
                                draws.methods)
        elif derive_verify_tokens(method, None if block is None else int(block),
                                  None if budget is None else int(budget), draws.methods) is None:
            underivable_verify_tokens(path, i, method, draws.methods)   # (as a data row's)
        found = check_names(draws, Flags(engines=(rec["engine"].strip(),),
                                         method=rec["method"].strip()),
                            strict=strict, prefix=f"{path}, row {i}: ")
        if warnings is not None:
            warnings.extend(found)
        try:
            c, reason = make_candidate(
                draws, query, f"{Path(path).name} row {i}", accept, cards,
                hardware=rec["hardware"].strip(), gpus=None if gpus is None else int(gpus),
                engine=rec["engine"].strip(), method=rec["method"].strip(),
                block=None if block is None else int(block),
                budget=None if budget is None else int(budget),
                verify_tokens=None if verify is None else int(verify), context_tokens=ctx,
                model=(rec.get("model") or "").strip() or None,
                concurrency=None if streams is None else int(streams))
        except QueryError as err:
            raise candidate_error(path, i, err) from None
        # ranked twice, it took two places of the ranking: compared as made (the default
        # list's key), since a blank cell takes the query's value (a blank concurrency and
        # the query's C are one measurement) and accept_len only shifts log tok/s
        if c.key() in seen:
            raise DataError(f"repeats row {seen[c.key()]}: one candidate measurement "
                            f"({c.describe()}), listed twice", file=path, row=i,
                            fix="keep one row per candidate; a blank cell takes the query's "
                                "value, and accept_len does not make another measurement")
        seen[c.key()] = i
        sc = c.scenario
        if accept is not None and not sc.limit.admits(accept) or (
                sc.method == AR_METHOD and accept not in (None, 1.0)):
            raise DataError(sc.limit.refusal(f"accept_len {accept:g}") if accept >= 1 else
                            f"accept_len {accept:g} is below 1 (the bonus token)", file=path,
                            row=i, column="accept_len",
                            fix=sc.limit.span())
        if reason is None:
            out.append(c)
            # (more GPUs than a node: priced as one group, as predict and --query say)
            node = node_warning(draws, sc)
            if warnings is not None and node is not None:
                warnings.append(f"{path}, row {i}: {node}")
        else:
            first_left = first_left or i
            left.append((c, reason))
    if not out:
        raise DataError(f"no candidate anyone can measure: {left[0][1]}", file=path,
                        row=first_left,
                        fix="list a measurement someone can make: an engine the fit measured, "
                            "a method with a drafter for the model")
    if left_out is not None:
        left_out.extend(left)
    return out


# ------------------------------------------------------------------ next: preposterior
def weighted_interval(sorted_values: np.ndarray, weights: np.ndarray, prob: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed ``prob`` interval of ``sorted_values`` under each row of ``weights``
    (K, n), each row summing to 1 and ordered like ``sorted_values``; the weighted CDF is
    taken at the midpoint of each draw's mass, stretched linearly so the first draw is at 0
    and the last at 1, and interpolated linearly: with equal weights, ``np.quantile``'s
    interval (predict's).

    >>> v = np.arange(1.0, 101.0)
    >>> lo, hi = weighted_interval(v, np.full((1, 100), 0.01), 0.9)
    >>> round(float(lo[0]), 9), round(float(hi[0]), 9)   # np.quantile: 1 + 0.05 x 99
    (5.95, 95.05)
    """
    cdf = np.cumsum(weights, axis=1) - 0.5 * weights
    # stretched so the first draw sits at 0 and the last at 1: under equal weights this is
    # np.quantile's (linear) interval, predict's, so an uninformative candidate leaves the
    # query's interval exactly as `now` (predict's digits) has it
    first, last = cdf[:, :1], cdf[:, -1:]
    cdf = (cdf - first) / np.where(last > first, last - first, 1.0)
    tails = ((1 - prob) / 2, (1 + prob) / 2)
    lo, hi = np.empty(len(weights)), np.empty(len(weights))
    for k in range(len(weights)):
        lo[k], hi[k] = np.interp(tails, cdf[k], sorted_values)
    return lo, hi


#: What ``add`` + ``update`` + ``predict`` make of one simulated result of a candidate (its
#: log tok/s per stream, and the posterior draw it was simulated from): (the posterior draws'
#: log importance weights, the query's draws).
Updated = Callable[[float, int], tuple[np.ndarray, np.ndarray]]

#: The source of the row :func:`simulated_update` adds (never written anywhere).
SIMULATED_SOURCE = "next: a simulated result"

#: A candidate's likelihood per draw: (log_mu, log_sd, the Student-t nu or None).
Likelihood = tuple[np.ndarray, np.ndarray, float | None]


@dataclass(frozen=True)
class Start:
    """The draws a reweighted fit's candidates are weighed on: its proposal's NUTS draws in
    the fit's model and data (``fit``), their log weights to that data (``log_w``: the
    Pareto-smoothed weights ``update`` resampled the fit's draws by,
    :func:`~ddtree_bayes.workflows.living.reweight.smoothed`), the query's acceptance and
    per-token draws
    from them, and (per candidate) the candidate's :data:`Likelihood` on them."""

    fit: Fit
    log_w: np.ndarray
    accept: np.ndarray
    per_token: np.ndarray
    likelihood: Likelihood | None = None


def proposal_start(draws: Fit, proposal: tuple[Fit | None, str | None], query: Query,
                   seed: int) -> Start | None:
    """The :class:`Start` of a reweighted fit ``draws`` whose proposal (:func:`fit_proposal`)
    is readable, in the fit's model, and kept every row the fit has; None for a sampled fit
    (its own draws are the start, every weight equal) or where the proposal cannot stand for
    the fit's draws (their resample is the start then, as before)."""
    from ddtree_bayes.engine import importance as R
    from ddtree_bayes.workflows.living import reweight as RW

    base = proposal[0]
    if base is None or base is draws:
        return None
    old = draws.measurements
    try:
        added, kept, gone = RW.pair_rows(base.measurements, old)
        if gone:
            return None
        fit = R.restructured(base, draws.meta["model"], old.text)[0].knowing(old)
        fit = R.augmented(fit, np.random.default_rng(seed))[0]
        # (update's weights, smoothed as it smoothed them: its resample, the fit's draws, is
        # drawn from these, and the raw ratios' heavier tail stood for another posterior)
        log_w = RW.smoothed(base, R.log_ratios(base, base.measurements, old, added, kept,
                                               fit)[0])[0].log_weights
    except (InputError, ValueError):
        return None
    accept = query_acceptance(fit, query, P.keyed_rng(seed, repr(query.source)))[0]
    return Start(fit, log_w, accept, P.per_token_draws(fit, query.scenario, seed)[0])


def simulated_update(draws: Fit, query: Query, accept: np.ndarray, per_token: np.ndarray,
                     candidate: Candidate, seed: int,
                     likelihood: Likelihood,
                     proposal: tuple[Fit | None, str | None] | None = None,
                     start: Start | None = None) -> tuple[Updated | None, bool]:
    """What measuring ``candidate`` does to the query, as ``add`` + ``update`` + ``predict``
    would show it, and whether ``update`` would refit for it (True: the weights below keep
    today's parameters, where a refit would learn the new ones the row brings: a system, an
    overhead group or a concurrency the fit never measured, so next's E[width] is what
    reweighting alone gives, often far wider than the refit's: at C = 16 on the bundled fit
    350 +- 11 tok/s where add + update (a refit) + predict gave 36 +- 9).

    Where ``update`` would refit (its model gaining parameters: a system, an overhead group or
    a switch of the model's structure new to the fit; or a validation fold's fit) the draws are
    weighted as :func:`preposterior` weighs them, by ``likelihood`` (the candidate's log_mu,
    log_sd and nu), and the query's draws are today's (``accept`` x ``per_token``), with the
    acceptance the new row gives it (below); None when that acceptance cannot change either
    (:func:`preposterior` then reweights today's draws, vectorised). On a reweighted fit
    (``start``, :func:`proposal_start`, with the candidate's likelihood on its draws) the
    draws are its proposal's, as ``update`` would weigh them (below), each weighted by its
    weight to the fit's data times that likelihood: the fit's draws are a resample of them,
    whose copies of a draw the weights' ESS counted as distinct draws.

    For a result ``y`` (the candidate's log tok/s per stream, at its ``accept_len``, 1 when it
    has none) the fit's data gain the row. A candidate without an accept_len at the query's
    acceptance configuration (model, method, block, budget, verify tokens: whose measured
    acceptance predict reads for the query) is measured at the query's acceptance draw of the
    draw it was simulated from, as a benchmark run reports its acceptance; and a query without
    ``--accept`` takes its acceptance from the new data as predict does (the bundled default
    question's prior, 293-739 tok/s, became a measured acceptance's 527-595 once one such row
    was added, where next had promised a width of 425 +- 4.5). The draws are weighted by the
    likelihood ratio of the new data to the old, the ratios ``update`` computes (it then
    Pareto-smooths them; next uses them raw)
    (:func:`~ddtree_bayes.engine.importance.log_ratios`: the row's structural step with the
    discrepancy at its distance, the kept rows whose distance or group structure it changes,
    a first repeat's own error), and the query's draws are ``predict``'s under the new data
    (its acceptance x :func:`~ddtree_bayes.engine.predictive.per_token_draws`, the seed's
    streams): measuring the query itself, or a
    configuration that becomes its anchor, conditions its discrepancy on the row's residual.
    Reweighting the query's draws of today instead (:func:`preposterior` without it) left their
    anchor's shift and own discrepancy as they were, which no measurement moved: on the bundled
    fit, the query itself (DDTree b16/B32 in SGLang at accept 14) was promised E[90% width] 124
    +- 3.7 tok/s where `update` gave 90 +- 3.6 at the same results."""
    from ddtree_bayes.core.data import Measurement, Measurements, csv_line
    from ddtree_bayes.engine import importance as R
    from ddtree_bayes.engine.store import stored_structure
    from ddtree_bayes.workflows.living import reweight as RW

    sc = candidate.scenario
    old = draws.measurements
    header = old.header   # (the fit's, parsed once)
    number = max((r.row for r in old.rows), default=1) + 1
    a = 1.0 if candidate.accept_len is None else float(candidate.accept_len)
    q_sc = query.scenario
    shape = ("model", "method", "block", "budget", "verify_tokens", "drafter_named")
    its_accept = (candidate.accept_len is None
                  and all(getattr(sc, f) == getattr(q_sc, f) for f in shape))

    def data(y: float, pick: int = 0) -> Measurements:
        measured = float(accept[pick]) if its_accept else a
        row = Measurement(number, sc.model or old.model, sc.hardware, sc.gpus, sc.engine,
                          sc.method, sc.block, sc.budget, int(sc.verify_tokens), measured,
                          sc.context_tokens, sc.concurrency * measured / a * math.exp(y),
                          SIMULATED_SOURCE, "", concurrency=sc.concurrency)
        text = old.text if old.text.endswith("\n") else old.text + "\n"
        return Measurements(old.path, text + csv_line(header, {**row.__dict__, "drafter": ""}),
                            (*old.rows, row))

    def acceptance(target: Fit) -> np.ndarray:
        """The query's acceptance draws under ``target``'s data: predict's, for a query
        without --accept (the same draws where the new row does not move its source)."""
        if query.accept is None and query.text is not None:
            again = parse_query(target, query.text)
            return query_acceptance(target, again, P.keyed_rng(seed, repr(again.source)))[0]
        return accept

    first = data(0.0)
    # update reweights the NUTS draws a reweighted fit was resampled from (its proposal) by
    # every row added since them, never the resample (whose copies of a draw the weights
    # would count as distinct draws)
    base, why = proposal if proposal is not None else fit_proposal(draws)
    reasons = [why] if why else []
    added: list[int] = []
    kept: list[tuple[int, int]] = []
    try:
        if base is not None:
            added, kept, gone = RW.pair_rows(base.measurements, first)
            priors, structure = stored_structure(base)
            reasons, _, model = RW.structure_changes(base, first, priors, structure)
            if gone:
                reasons.append(f"{len(gone)} row(s) of the fit its draws are from removed")
            if not reasons:
                R.restructured(base, model, first.text)   # (a ratio it cannot recompute: refit)
    except (InputError, ValueError):
        reasons = ["the fit's stored inputs do not give its model"]
    if (base is None or reasons or draws.meta.get("held_out_rows")
            or draws.meta.get("held_out_systems")):
        new_accept = its_accept and query.accept is None and query.text is not None
        if start is not None and start.likelihood is not None:
            s_mu, s_sd, s_nu = start.likelihood

            def from_proposal(y: float, pick: int) -> tuple[np.ndarray, np.ndarray]:
                got = start.accept
                if new_accept:
                    new = data(y, pick)
                    got = acceptance(start.fit.view(data_csv=new.text).knowing(new))
                return (start.log_w + likelihood_logw(y, s_mu, s_sd, s_nu),
                        got * start.per_token)

            return from_proposal, True
        if not new_accept:
            return None, True
        log_mu, log_sd, nu = likelihood

        def refit(y: float, pick: int) -> tuple[np.ndarray, np.ndarray]:
            new = data(y, pick)
            return (likelihood_logw(y, log_mu, log_sd, nu),
                    acceptance(draws.view(data_csv=new.text).knowing(new)) * per_token)

        return refit, True
    since = base.measurements

    def updated(y: float, pick: int) -> tuple[np.ndarray, np.ndarray]:
        new = data(y, pick)
        target = R.restructured(base, model, new.text)[0].knowing(new)
        target = R.augmented(target, np.random.default_rng(seed))[0]
        log_w = R.log_ratios(base, since, new, added, kept, target)[0]
        return log_w, acceptance(target) * P.per_token_draws(target, q_sc, seed)[0]

    return updated, False


def fit_proposal(draws: Fit) -> tuple[Fit | None, str | None]:
    """The sampled fit whose draws ``update`` would reweight after ``draws``
    (:func:`~ddtree_bayes.workflows.living.reweight.proposal_of`: ``draws`` itself, or the
    NUTS fit a reweighted fit was resampled from, in the models folder it was saved in)."""
    from ddtree_bayes.workflows.living import reweight as RW

    models = draws.path.parent.parent if draws.path is not None else Path("models")
    return RW.proposal_of(draws, models)


def likelihood_logw(y, log_mu: np.ndarray, noise_sd: np.ndarray, nu: float | None
                    ) -> np.ndarray:
    """Log weights of the draws for the result(s) ``y`` (a number, or (K, 1)) of a candidate
    whose log tok/s is ``log_mu`` +- ``noise_sd`` per draw: Normal, or Student-t with ``nu``."""
    if nu is None:
        return -0.5 * ((y - log_mu) / noise_sd) ** 2 - np.log(noise_sd)
    return row_logp(y, log_mu, noise_sd, nu)


def preposterior(log_mu: np.ndarray, noise_sd: np.ndarray, query: np.ndarray, prob: float,
                 picks: np.ndarray, eps: np.ndarray, nu: float | None = None,
                 updated: Updated | None = None) -> dict:
    """Expected ``prob`` interval width of ``query`` after one measurement.

    ``log_mu`` (n,): the candidate's modelled log tok/s per posterior draw; ``noise_sd``
    (n,): the fitted noise; ``query`` (n,): the query's predictive draws. The K simulated
    results are ``y_k = log_mu[picks[k]] + noise_sd[picks[k]] * eps[k]``; every draw s is
    weighted by ``Normal(y_k | log_mu[s], noise_sd[s])`` (with ``nu``, the fit's Student-t
    ``likelihood_nu``: ``eps`` are t draws and the weights t densities, as update's are).

    ``updated`` (:func:`simulated_update`): what ``add`` + ``update`` + ``predict`` make of a
    result ``y``, (the draws' log weights, the query's draws under the data with that row),
    used in place of that weight and of ``query`` (which it leaves for "now").
    """
    y = log_mu[picks] + noise_sd[picks] * eps                                    # (K,)
    if updated is not None:
        width, ess = np.empty(len(y)), np.empty(len(y))
        for k, y_k in enumerate(y):
            log_w, q_k = updated(float(y_k), int(picks[k]))
            order = np.argsort(q_k)
            w = np.exp(log_w[order] - np.max(log_w))
            w /= w.sum()
            ess[k] = 1.0 / np.sum(w ** 2)
            lo, hi = weighted_interval(q_k[order], w[None, :], prob)
            width[k] = hi[0] - lo[0]
        return _widths(width, ess)
    order = np.argsort(query)
    sorted_q = query[order]
    logw = likelihood_logw(y[:, None], log_mu[order][None, :], noise_sd[order][None, :], nu)
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    ess = 1.0 / np.sum(w ** 2, axis=1)
    lo, hi = weighted_interval(sorted_q, w, prob)
    return _widths(hi - lo, ess)


def _widths(width: np.ndarray, ess: np.ndarray) -> dict:
    """The mean of K widths with its Monte Carlo standard error, and the weights' ESS."""
    return {"width": float(width.mean()),
            "width_se": float(width.std(ddof=1) / math.sqrt(len(width))) if len(width) > 1 else 0.0,
            "ess_median": float(np.median(ess)), "ess_min": float(ess.min())}


def drafter_cell(row: dict) -> str:
    """A ``next`` row's drafter column (``next``'s table and the report's): the card whose
    roofline prices the candidate's drafter passes (its JSON ``pass_drafter``: candidates
    draft with their model's default card for their method, which can differ from row to
    row), ``generic`` when no card serves it (a generic drafter of the method), ``-`` when
    nothing drafts (AR) or the fit prices no pass (the fraction form).

    >>> [drafter_cell(r) for r in ({"pass_drafter": "z-lab/x"}, {"pass_drafter": None}, {})]
    ['z-lab/x', 'generic', '-']
    """
    if "pass_drafter" not in row:
        return "-"
    return "generic" if row["pass_drafter"] is None else row["pass_drafter"]


def next_measurements(draws: Fit, query: Query, candidates: list[Candidate] | None = None, *,
                      k: int = DEFAULT_K, prob: float = 0.9, seed: int = DEFAULT_SEED,
                      min_ess: float = MIN_ESS,
                      left_out: list[tuple[Candidate | Unbuilt, str]] | None = None) -> dict:
    """Rank candidate measurements by the expected ``prob`` interval width of the query's
    posterior predictive tok/s after making them (smallest first).

    The query's draws are predict's: acceptance (given, uniform or prior) times
    1000 / step_ms times lognormal run-to-run noise. Each candidate's log tok/s per draw
    uses the same overhead ``z`` as the query when they share an unmeasured group.
    """
    if k < 2:
        raise QueryError("--k must be at least 2", fix="use e.g. --k 32")
    P.interval_probs(prob)   # validates prob
    noise = run_sd(draws)   # one run of a candidate: run-to-run (and configuration) noise
    if np.any(noise <= 0):
        raise QueryError("the fit has draws with zero measurement noise: a measurement would "
                         "be infinitely informative", fix="refit with the bundled noise prior")
    n = draws.n_draws
    # candidates nobody can measure (``left_out``: those of a candidates file)
    left: list[tuple[Candidate | Unbuilt, str]] = list(left_out or [])
    cands = default_candidates(draws, query, left) if candidates is None else candidates
    q_sc = query.scenario
    # the query's draws are predict's for the same flags and seed, digit for digit: its
    # acceptance from the generator keyed by the acceptance asked, its step and noise from
    # the one keyed by the question (they were drawn here from streams of their own, and
    # `now` said 440 (282-636) where predict said 442 (279-631))
    accept, accept_label = query_acceptance(draws, query, P.keyed_rng(seed, repr(query.source)))
    per_token, q_how = P.per_token_draws(draws, q_sc, seed)
    q = accept * per_token
    q_key = P.scenario_key(q_sc)
    q_group = overhead_group(draws, q_sc)
    rng = np.random.default_rng([seed, 11])   # the simulated results
    nu = likelihood_nu(draws.variables)   # (None: normal, the draws of every earlier version)
    picks = rng.integers(0, n, size=k)
    eps = rng.standard_normal(k)
    eps_t = None if nu is None else standard_noise(rng, k, nu)   # an unanchored candidate's
    probs = P.interval_probs(prob)
    shown = P.summarize(q, probs, None)   # predict's figures of the query
    now_lo, now_hi = shown[f"lo{P.pct_label(prob)}"], shown[f"hi{P.pct_label(prob)}"]
    now = now_hi - now_lo
    proposal = fit_proposal(draws)   # (what update would reweight: read once)
    # (a reweighted fit's: the draws a candidate update would refit for is weighed on)
    today = proposal_start(draws, proposal, query, seed)
    rows = []
    for c in cands:
        # a new measurement's likelihood, as the fit and `update` weigh it: at a configuration
        # not measured yet the structural step, sd = noise plus the discrepancy at its
        # distance; a repeat of a measured one is conditioned on its rows (the anchored draw
        # of its discrepancy and own error, sd = run-to-run noise)
        measured = P.at_measured_configuration(draws, c.scenario)
        # the draws the query shares with the candidate are the query's, as predict drew
        # them from the query's generator: an unmeasured system's transferred parameters
        # (drawn first), then, in the query's overhead group, the group's own draws (an
        # unmeasured group's, a measured one's beyond its budget); another group draws its own
        same_group = q_group is not None and overhead_group(draws, c.scenario) == q_group
        on_q_system = c.scenario.pair == q_sc.pair and not q_sc.measured
        a = 1.0 if c.accept_len is None else c.accept_len
        # a Student-t fit: t for a new configuration, normal run noise about a measured one
        t = None if eps_t is None or measured else eps_t
        t_nu = None if t is None else nu

        def components(fit: Fit, c: Candidate = c, measured: bool = measured,
                       on_q_system: bool = on_q_system, same_group: bool = same_group
                       ) -> tuple[dict, str]:
            q_rng = P.keyed_rng(seed, q_key)
            return shared_components(fit, c.scenario, seed, anchor=measured,
                                     system_rng=q_rng if on_q_system else None,
                                     step_rng=q_rng if same_group else None)

        parts, how = components(draws)
        log_mu = np.log(a * 1000.0 / parts["step"])
        start = None
        if today is not None:   # (the candidate's likelihood on the proposal's draws)
            p_parts = components(today.fit)[0]
            start = dataclasses.replace(today, likelihood=(
                np.log(a * 1000.0 / p_parts["step"]), p_parts["log_sd"], t_nu))
        # the query's answer as `update` and `predict` would give it after the measurement
        updated, refit_needed = simulated_update(draws, query, accept, per_token, c, seed,
                                                 (log_mu, parts["log_sd"], t_nu), proposal,
                                                 start)
        res = preposterior(log_mu, parts["log_sd"], q, prob, picks, eps if t is None else t,
                           t_nu, updated=updated)
        sc = c.scenario
        # (the card whose roofline prices its drafter passes, as predict's pass_drafter:
        # null for a generic drafter; absent for AR and a fit of the fraction form)
        priced = pass_drafter(draws, sc)
        rows.append({"candidate": c.describe(), "why": c.why,
                     **({"model": sc.model} if sc.multi else {}),
                     **({} if priced is None else {"pass_drafter": priced[0]}),
                     "transferred": not sc.measured, "hardware": sc.hardware,
                     "gpus": sc.gpus, "engine": sc.engine, "method": sc.method,
                     "block": sc.block, "budget": sc.budget, "verify_tokens": sc.verify_tokens,
                     "context_tokens": sc.context_tokens, "accept_len": c.accept_len,
                     "concurrency": sc.concurrency,
                     "shares_query_overhead": (overhead_group(draws, sc) is not None
                                               and overhead_group(draws, sc)
                                               == overhead_group(draws, query.scenario)),
                     "overhead_from": how,
                     "expected_width": res["width"], "width_se": res["width_se"],
                     "reduction": now - res["width"],
                     "reduction_rel": (now - res["width"]) / now if now > 0 else 0.0,
                     # a reduction within two Monte Carlo standard errors: no effect next can
                     # tell from the noise of its K simulated results
                     "within_mc_error": bool(abs(now - res["width"])
                                             < MC_ERRORS * res["width_se"]),
                     "ess_median": res["ess_median"], "ess_min": res["ess_min"],
                     "unreliable": res["ess_median"] < min_ess,
                     # update would refit (the row brings parameters the fit lacks): the
                     # E[width] above reweights today's draws, which cannot learn them
                     "refit_needed": refit_needed})
    rows.sort(key=lambda r: r["expected_width"])
    sc = query.scenario
    return {"fit_id": draws.meta["fit_id"], "draws": n, "seed": seed, "k": k,
            "interval_prob": prob, "min_ess": min_ess,
            "query": {**({"model": sc.model} if sc.multi else {}),
                      "describe": sc.describe(), "hardware": sc.hardware, "gpus": sc.gpus,
                      "engine": sc.engine, "method": sc.method, "block": sc.block,
                      "budget": sc.budget, "verify_tokens": sc.verify_tokens,
                      "context_tokens": sc.context_tokens, "accept": accept_label,
                      **({"concurrency": sc.concurrency} if sc.concurrency != 1 else {}),
                      **({"kv_cache": sc.kv_cache} if sc.kv_cache is not None else {}),
                      **({"new_deployment": True} if sc.new_deployment else {}),
                      "accept_fixed": bool(np.all(accept == accept[0])),
                      "overhead_from": q_how, "median": shown["median"],
                      "lo": now_lo, "hi": now_hi, "width": now,
                      # predict's, from the same draws (engine/ceiling.py; None: not faster)
                      "balanced_routing": routing_row(per_token, balanced_read(draws, q_sc))},
            "rows": rows, "default_scenario": query.default_scenario,
            "left_out": [{"candidate": c.describe(), "why": c.why, "reason": reason}
                         for c, reason in left]}

"""What the structured step needs at predict time: the distinct-expert ratio of the fit's model
card, the drafter passes and tree nodes of a query (the fit's ``[methods]`` table), and the
structural discrepancy, whose sd grows with the distance from the nearest measured
configuration. numpy only (the predict path)."""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from ddtree_bayes.core import normal
from ddtree_bayes.core import spec as S
from ddtree_bayes.core.data import AR_METHOD
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.core.likelihood import scatter_parts
from ddtree_bayes.core.methods import MethodSpec
from ddtree_bayes.core.model_cards import required_card, stored_card
from ddtree_bayes.core.pairs import split_label
from ddtree_bayes.core.tensor_cores import is_amd
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.scenario import Scenario, default_card
from ddtree_bayes.engine.target_models import deployments_of_one_model, is_multi, row_pair
from ddtree_bayes.engine.transfer import (  # noqa: F401  (fit_rows: re-exported)
    RowsBehind,
    fit_rows,
    measured_rows,
    rows_behind,
    transfer_draw,
    transfer_reference,
)


def distinct_ratio(model: dict, verify_tokens: int, name: str | None = None) -> float:
    """The distinct-expert ratio at M (1 for a dense model) of the fit's model card, or of
    model ``name``'s card in a fit of several models."""
    return float(required_card(model, name).distinct_ratio(verify_tokens))


def dense_unread(meta: dict) -> tuple[list[str], set[str]]:
    """(the dense target models of a fit of the roofline form, the parameters that price
    nothing for them). A dense card touches one set of weights at any M (distinct(M) = 1), so
    ``distinct ** moe_distinct_exponent`` is 1 whatever the exponent: a dense system's
    ``moe_z`` and ``moe_distinct_exponent`` are their prior, never read by its step; with no
    MoE system at all, neither are their population's ``moe_distinct_exponent_mu`` and
    ``moe_hw_sd``. ``moe_share`` is read (the share of the M = 1 step the verify's compute
    overtakes: for a dense target the weight read). Other forms price ``M ** alpha`` or a
    slope for a dense model too: nothing. ``meta``: a fit's metadata (``model``, ``coords``).
    """
    from ddtree_bayes.core.model_cards import stored_card
    from ddtree_bayes.core.pairs import split_label

    model = meta.get("model") or {}
    systems = (meta.get("coords") or {}).get("system") or []
    if model.get("moe_form") != "roofline" or not systems:
        return [], set()
    shape = S.SHAPE_NAMES["roofline"]
    dense: dict[str, str] = {}   # system label -> its (dense) model
    for label in systems:
        name = split_label(label)[0]
        card = stored_card(model, name)
        if card is not None and not card.is_moe:
            dense[label] = name or card.model
    unread = {f"{p}[{label}]" for label in dense for p in ("moe_z", shape)}
    if dense and len(dense) == len(systems):
        unread |= {f"{shape}_mu", "moe_hw_sd"}
    return sorted(set(dense.values())), unread


def check_declared(model: dict, method: str, prefix: str = "") -> None:
    """QueryError when the fit's structured step form (``model``: its ``meta["model"]``)
    cannot price ``method``: a speculative method without a ``[methods]`` entry, whose drafter
    passes and tree nodes it cannot count (the fraction form prices any method).
    ``prefix`` names where the question came from (``--query: ``)."""
    methods = model.get("methods", {})
    if (method == AR_METHOD or method in methods
            or model.get("step_form", "fraction") != "structured"):
        return
    raise QueryError(prefix + f"method {method!r} is not declared in the fit's priors "
                     "([methods])", fix=f"use one of {', '.join(sorted(methods))}, or declare "
                                        f"[methods.{method}] and refit")


def draft_structure(model: dict, method: str, block: int | None, budget: int | None
                    ) -> tuple[float, float]:
    """Sequential drafter passes and paid tree nodes of a configuration, from the fit's
    methods table (zeros for AR, and for an undeclared method in the fraction form)."""
    if method == AR_METHOD:
        return 0.0, 0.0
    methods = model.get("methods", {})
    if method not in methods:
        check_declared(model, method)
        return 0.0, 0.0   # (the fraction form)
    spec = MethodSpec(method, methods[method]["passes"], methods[method]["tree"])
    return float(spec.draft_passes(block, budget)), float(spec.tree_nodes(block, budget))


def base_engine(draws: Fit, engine: str) -> str:
    """The engine whose speculative overhead prices ``engine``'s: the base of its relation
    (``[relations.<engine>]`` in the priors, e.g. native -> sglang), else itself."""
    return (draws.meta.get("model", {}).get("relation_bases") or {}).get(engine, engine)


def group_label(draws: Fit, pair: str, engine: str, method: str) -> str | None:
    """The overhead group (system, base engine, method) whose costs price a ``method`` step in
    ``engine`` on ``pair``: the one answer to that question for fit rows, queries, decisions
    and the report. None for autoregressive decoding, which has no speculative overhead."""
    if method == AR_METHOD:
        return None
    return S.overhead_group_label(pair, base_engine(draws, engine), method)


def row_group(draws: Fit, row) -> str | None:
    """:func:`group_label` of a measurement row of ``draws``' data."""
    return group_label(draws, row_pair(draws, row), row.engine, row.method)


def restructured_line(draws: Fit, group: str) -> str:
    """What ``update`` says of an overhead ``group`` whose drafter passes or tree nodes per
    step now vary in ``draws``' data (its own ratio replaces the population's:
    :func:`ddtree_bayes.engine.importance.restructured`). The tree nodes a step pays are
    C x the tree's (core/spec.py), so one tree measured at two concurrencies varies them too:
    that was called "more than one drafter depth or tree budget", which the data did not hold.
    """
    rows = [r for r in fit_rows(draws) if row_group(draws, r) == group]
    shapes = sorted({(r.block, r.budget) for r in rows}, key=str)
    if len(shapes) == 1:
        (block, budget), = shapes
        cs = ", ".join(map(str, sorted({r.concurrency for r in rows})))
        return (f"{group} now measures its one tree (block {block}, budget {budget}) at more than "
                f"one concurrency (C = {cs}; C streams pay C x its tree nodes per step): its own "
                "per-node cost replaces the population's (recomputed from the draws)")
    return (f"{group} now measures more than one drafter depth or tree budget: its own "
            "per-pass/per-node cost replaces the population's (recomputed from the draws)")


def measured_configs(draws: Fit, system: str) -> tuple[list[float], list[float]]:
    """(tokens verified per step, C x M, and drafter passes) of the rows the fit learned from
    on ``system``."""
    cache = draws.memo.setdefault("measured_configs", {})
    if system not in cache:
        model = draws.meta["model"]
        points = sorted({(float(r.verify_tokens * r.concurrency),
                          draft_structure(model, r.method, r.block, r.budget)[0])
                         for r in fit_rows(draws) if row_pair(draws, r) == system})
        cache[system] = ([m for m, _ in points], [p for _, p in points])
    return cache[system]


def paying(p_faster: list[float]) -> tuple[str, int | None]:
    """Where speculation pays along increasing concurrencies, from P(faster than AR) at each
    (paying: P >= 0.5): ("every", None); ("stops", i), paying before the i-th and at none from
    it on; ("starts", i), paying at none before the i-th and at every one from it on (an EAGLE-3
    tree on a small-active MoE, slower than AR at C = 1 and faster at C = 64); ("never", None);
    ("mixed", None), paying on and off (P near 0.5 at several C: a review found "pays from
    C = 16" printed where it stopped again at 128). Before, a drafter that never paid read
    "stops paying at C = 1".

    >>> paying([0.99, 0.7, 0.2]), paying([0.9, 0.8]), paying([0.3, 0.4, 0.8]), paying([0.1])
    (('stops', 2), ('every', None), ('starts', 2), ('never', None))
    >>> paying([0.44, 0.57, 0.13]), paying([0.85, 0.44, 0.57])
    (('mixed', None), ('mixed', None))
    """
    pays = [p >= 0.5 for p in p_faster]
    if all(pays):
        return "every", None
    if not any(pays):
        return "never", None
    turns = [i for i in range(1, len(pays)) if pays[i] != pays[i - 1]]
    if len(turns) > 1:
        return "mixed", None
    return ("stops" if pays[0] else "starts"), turns[0]


def paying_fields(concurrency: list[int], p_faster: list[float]) -> dict:
    """Where speculation pays along ``concurrency`` (P(faster than AR) >= 0.5; :func:`paying`),
    as summary.json, predict's crossover line and the report's figure say it: ``pays`` (every,
    stops, starts, never or mixed), ``pays_at`` (the C where it pays), ``stops_paying_at``
    (with ``stops``: the first C where it no longer pays, else null) and
    ``starts_paying_at`` (with ``starts``: the first C where it pays, else null). A null
    ``stops_paying_at`` alone read "pays at every C" for a drafter that never paid, only
    started paying, or paid on and off.

    >>> paying_fields([1, 2, 4], [0.9, 0.6, 0.3])
    {'pays': 'stops', 'pays_at': [1, 2], 'stops_paying_at': 4, 'starts_paying_at': None}
    >>> paying_fields([1, 2, 4], [0.2, 0.3, 0.1])["pays"], paying_fields([1, 2], [0.7, 0.9])["pays"]
    ('never', 'every')
    >>> paying_fields([1, 2, 4], [0.3, 0.6, 0.9])
    {'pays': 'starts', 'pays_at': [2, 4], 'stops_paying_at': None, 'starts_paying_at': 2}
    >>> paying_fields([1, 2, 4], [0.3, 0.6, 0.4])
    {'pays': 'mixed', 'pays_at': [2], 'stops_paying_at': None, 'starts_paying_at': None}
    """
    kind, at = paying(p_faster)
    return {"pays": kind,
            "pays_at": [c for c, p in zip(concurrency, p_faster, strict=True) if p >= 0.5],
            "stops_paying_at": concurrency[at] if kind == "stops" and at is not None else None,
            "starts_paying_at": concurrency[at] if kind == "starts" and at is not None else None}


def p_text(p: float) -> str:
    """P(faster than AR) with two decimals, or as many more as keep it in its own verdict:
    does not pay (at most :data:`UNSURE_BELOW`), uncertain below or from 0.5, pays (from
    1 - :data:`UNSURE_BELOW`). A P of 0.4995 printed 0.50 beside "stops paying" (now 0.499),
    one of 0.74998 printed 0.75 beside "is uncertain ... between 0.25 and 0.75" (now 0.74998).

    >>> p_text(0.7), p_text(0.4995), p_text(0.5), p_text(0.49999999)
    ('0.70', '0.499', '0.50', '<0.5')
    >>> p_text(0.74998), p_text(0.7503), p_text(0.2504), p_text(0.2496)
    ('0.74998', '0.75', '0.2504', '0.25')
    """
    for digits in range(2, 7):
        text = f"{p:.{digits}f}"
        if _verdict(float(text)) == _verdict(p):
            return text if digits == 2 else text.rstrip("0")
    cut = min(VERDICT_CUTS, key=lambda c: abs(p - c))   # (p is a hair beside it)
    return f"{'<' if p < cut else '>'}{cut:g}"


def _verdict(p: float) -> int:
    """Which side of each of :data:`VERDICT_CUTS` ``p`` is on, as the lines judge it: 0 does
    not pay (<= 0.25), 1 and 2 uncertain (below and from 0.5), 3 pays (>= 0.75)."""
    return int(p > UNSURE_BELOW) + int(p >= 0.5) + int(p >= 1 - UNSURE_BELOW)


def p_bound(p: float, *, upper: bool) -> str:
    """P(faster than AR) as a bound that holds at the precision shown: rounded up for an
    ``upper`` bound ("<= x"), down for a lower one (">= x"), with two decimals or as many more
    as keep its side of 0.5 (:func:`p_text`). A least P of 0.9955 printed ">= 1.00", a
    certainty the draws do not give.

    >>> p_bound(0.9955, upper=False), p_bound(0.2049, upper=True), p_bound(0.75, upper=False)
    ('0.99', '0.21', '0.75')
    >>> p_bound(0.4995, upper=True), p_bound(0.4995, upper=False), p_bound(0.5, upper=False)
    ('0.4995', '0.499', '0.50')
    """
    for digits in range(2, 7):
        text = f"{p:.{digits}f}"
        if (float(text) >= 0.5) != (p >= 0.5):   # (p_text's digits first)
            continue
        if (float(text) < p) if upper else (float(text) > p):   # one step toward the bound
            step = round(float(text) * 10 ** digits) + (1 if upper else -1)
            text = f"{step / 10 ** digits:.{digits}f}"
        if (float(text) >= 0.5) == (p >= 0.5):
            return text if digits == 2 else text.rstrip("0")
    return "<0.5" if p < 0.5 else ">=0.5"


def p_range(ps: list[float]) -> str:
    """The least to the greatest of ``ps``, widened to the precision shown (:func:`p_bound`).

    >>> p_range([0.2051, 0.8449])
    '0.20-0.85'
    """
    return f"{p_bound(min(ps), upper=False)}-{p_bound(max(ps), upper=True)}"


#: A concurrency whose P(faster than AR) is strictly between this and 1 - this is called
#: uncertain: odds under 3:1 either way are no verdict on whether speculation pays there.
UNSURE_BELOW = 0.25
#: The P(faster than AR) at which a line's verdict changes (:func:`p_text` keeps each side).
VERDICT_CUTS = (UNSURE_BELOW, 0.5, 1 - UNSURE_BELOW)


def uncertain_at(cs: list[int], ps: list[float]) -> list[int]:
    """The concurrencies whose P(faster than AR) is no verdict (:data:`UNSURE_BELOW`).

    >>> uncertain_at([1, 8, 16], [0.99, 0.48, 0.2])
    [8]
    """
    return [c for c, p in zip(cs, ps, strict=True) if UNSURE_BELOW < p < 1 - UNSURE_BELOW]


def uncertain_line(cs: list[int], ps: list[float]) -> str:
    """The crossover line (after "speculation ") of concurrencies some of which are uncertain
    (:data:`UNSURE_BELOW`): each kind - pays, is uncertain, does not pay - with its C, in the
    order of its first C, and its P(faster than AR) (one, or the bound or range of several).

    >>> uncertain_line([1, 8], [0.99, 0.48])
    'pays at C = 1 (P(faster than AR) 0.99), is uncertain at C = 8 (0.48, between 0.25 and 0.75)'
    """
    kinds: dict[str, list[tuple[int, float]]] = {}
    for c, p in zip(cs, ps, strict=True):
        kind = ("pays" if p >= 1 - UNSURE_BELOW else "does not pay" if p <= UNSURE_BELOW
                else "is uncertain")
        kinds.setdefault(kind, []).append((c, p))
    parts: list[str] = []
    for kind, at in kinds.items():
        values = [p for _, p in at]
        shown = (p_text(values[0]) if len(values) == 1
                 else f">= {p_bound(min(values), upper=False)}" if kind == "pays"
                 else f"<= {p_bound(max(values), upper=True)}" if kind == "does not pay"
                 else p_range(values))
        if kind == "is uncertain":
            shown += f", between {UNSURE_BELOW:g} and {1 - UNSURE_BELOW:g}"
        parts.append(f"{kind} at C = {', '.join(str(c) for c, _ in at)} "
                     f"({'P(faster than AR) ' if not parts else ''}{shown})")
    return ", ".join(parts)


def beyond_measured_note(draws: Fit, behind: RowsBehind, concurrencies, verify_tokens: int = 1,
                         budgets: dict[int, int] | None = None) -> str | None:
    """The ``concurrencies`` above the most streams measured on ``system``, and those whose
    step verifies more tokens (C x ``verify_tokens``) than any row measured there, C = 1
    among them, as one sentence (the step's growth with C, or at C = 1 with M, there is the
    roofline's: prior-driven), or None; ``predict`` and ``optimize`` say it alike. A serving
    walkthrough asked budget 16 at C = 8 (136 tokens per step, against at most 32 measured on
    the system) without a word, and one stream of eagle3 budget 64 (M = 65, against M = 4
    measured) was not flagged where two streams of it were. The C x M clause names every C
    asked whose step verifies more than the rows, those beyond too, and the largest C x M
    (``--concurrency 1,4`` of M = 33 named C = 1 and its 33 tokens alone, not C = 4's 132),
    and is said when only a C beyond does (M = 9 at C = 1, 4: C = 4's 36 tokens against 9
    went unsaid); with it the step's growth named is the compute knee's and the experts' too.
    ``budgets`` ({budget: its M}, ``optimize``'s, in place of ``verify_tokens``) names the
    budgets whose C x M is past the rows, their largest M and C x M (``optimize`` asked with
    M = 1: budgets 16-64 at C = 1, M up to 65 against 9 measured, went unsaid).
    ``behind`` (:func:`~ddtree_bayes.engine.transfer.rows_behind`): the rows that bound the
    step; on a system without rows, those of the system its step is transferred from, which
    the note names ("h200x8 has no measurements and its step is transferred from b300x8: "
    before b300x8's own line: predict --hardware h200 of M = 33 said nothing, b300x8 having
    measured at most 9 tokens a step); in a fit of several models, on a pair from the pair
    roofline, those of the measured pairs it was learned from, the note saying how many and
    which pair verified the most ("... its step is from the pair roofline, learned from 18
    measured pairs: at C = 1 a step verifies 97 tokens (C x M), more than any measured across
    those pairs (at most 64, on llama-3.3-70b-instruct@h100x8)": such a pair said nothing).

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> fit = point_mass_draws()
    >>> beyond_measured_note(fit, measured_rows(fit, "b300x8"), [1, 4, 8])   # (AR: 8 <= 9)
    "C = 4, 8 are beyond the concurrencies measured on b300x8 (at most 1): there the step's \
growth with C is the roofline's (weights once per step, KV reads and tree nodes per stream): \
prior-driven"
    >>> print(beyond_measured_note(fit, measured_rows(fit, "b300x8"), [1, 8], verify_tokens=33))
    C = 8 is beyond the concurrencies measured on b300x8 (at most 1); at C = 1, 8 a step \
verifies up to 264 tokens (C x M), more than any measured on b300x8 (at most 9): there the \
step's growth with C and M is the roofline's (weights once per step, KV reads and tree nodes \
per stream, the compute knee, and for an MoE the distinct experts read): prior-driven
    """
    lead, system = "", behind.asked
    # where the C x M verified is counted: on the system whose rows bound the step, or, for a
    # pair from the pair roofline, across the pairs it was learned from
    rows_on = f"on {system}"
    if behind.transferred_from is not None:   # (its rows bound the step: the note is its own)
        system = behind.transferred_from
        lead = f"{behind.asked} has no measurements and its step is transferred from {system}: "
        rows_on = f"on {system}"
    elif behind.pair_roofline:   # (no reference: the pairs the roofline was learned from)
        k = len(behind.learned_from)
        lead = (f"{behind.asked} has no measurements and its step is from the pair roofline, "
                f"learned from {k} measured pair{'s' * (k != 1)}: ")
        rows_on = "across those pairs"
    top, most = behind.max_concurrency, behind.max_tokens
    where = (f"at most {most}" if behind.max_tokens_on is None
             else f"at most {most}, on {behind.max_tokens_on}")
    beyond = sorted({c for c in concurrencies if c > 1 and (top is None or c > top)})
    # every C (and budget) whose step verifies more than the rows, beyond the concurrencies
    # too (C = 4 of budget 8's M = 9, 36 tokens, went unsaid when C = 1's 9 did not exceed 9)
    trees: dict[int | None, int] = ({None: verify_tokens} if budgets is None
                                    else dict(budgets.items()))
    over = [(c, b, m) for c in concurrencies for b, m in trees.items()
            if most is not None and c * m > most]
    named = sorted({c for c, _, _ in over})
    parts = []
    if beyond:
        parts.append(f"C = {', '.join(map(str, beyond))} {'is' if len(beyond) == 1 else 'are'} "
                     f"beyond the concurrencies measured on {system} "
                     f"({'none' if top is None else f'at most {top}'})")
    if over:
        most_tokens = max(c * m for c, _, m in over)
        tokens = f"{most_tokens}" if len(over) == 1 else f"up to {most_tokens}"
        past = sorted({b for _, b, _ in over if b is not None})
        of = "" if not past else (
            f" of budget {past[0]} (M = {trees[past[0]]})" if len(past) == 1 else
            f" of budgets {', '.join(map(str, past))} (M up to {max(m for *_, m in over)})")
        parts.append(f"at C = {', '.join(map(str, named))} a step{of} verifies {tokens} tokens "
                     f"(C x M), more than any measured {rows_on} ({where})")
    if not parts:
        return None
    if not beyond and named == [1]:   # one stream: past the rows in M alone
        return (lead + "; ".join(parts) + ": there the step's growth with M is the roofline's "
                "(compute knee, and for an MoE the distinct experts read): partly prior-driven")
    if named:   # past the rows in C x M: the compute knee and the experts read too
        return (lead + "; ".join(parts) + ": there the step's growth with C and M is the "
                "roofline's (weights once per step, KV reads and tree nodes per stream, the "
                "compute knee, and for an MoE the distinct experts read): prior-driven")
    return (lead + "; ".join(parts) + ": there the step's growth with C is the roofline's "
            "(weights once per step, KV reads and tree nodes per stream): prior-driven")


def query_distance(draws: Fit, sc: Scenario, passes: float) -> float:
    """Distance of a query from the nearest configuration measured on its system (or, for a
    system without measurements, on the system its parameters were transferred from; for a
    pair answered by the pair roofline, from its M = 1 step): :func:`rows_behind`'s."""
    behind = rows_behind(draws, sc)
    if behind.pair_roofline:   # it gives the pair its M = 1 step (engine/target_models.py)
        ms, ps = [1.0], [0.0]
    else:
        ms, ps = measured_configs(draws, behind.reference) if behind.reference else ([], [])
    if not ms:
        return 0.0
    return S.config_distance(float(sc.verify_tokens * sc.concurrency), passes, ms, ps)


def run_sd(draws: Fit) -> np.ndarray:
    """(draws,) sd of one new run's log tok/s about the model at a measured configuration:
    the run-to-run noise, and with repeated runs in the data also a configuration's own error
    ``config_sd`` (engine/model.py), which a new configuration has too."""
    run, own = scatter_parts(draws.variables)
    return np.sqrt(run ** 2 + np.asarray(own) ** 2)


def query_log_sd(draws: Fit, sc: Scenario, passes: float, distance: float | None = None,
                 own_known: bool = False) -> np.ndarray:
    """(draws,) sd of one run's log tok/s at a query: the run-to-run noise (with repeated runs
    in the data also a configuration's own error ``config_sd``, unless ``own_known``: an
    answer anchored to its own measured configuration carries that error already), and in the
    structured form the discrepancy for the query's distance from the measured configurations
    (``distance`` given: from the configuration the query is anchored to)."""
    noise = np.asarray(scatter_parts(draws.variables)[0]) * np.ones(draws.n_draws) \
        if own_known else run_sd(draws)
    beyond = concurrency_beyond(draws, sc)
    if beyond:   # prior-driven: how the engine batches beyond the concurrencies measured
        noise = np.sqrt(noise ** 2 + (beyond * concurrency_sd(draws)) ** 2)
    if "structure_sd" not in draws.variables:
        return noise
    d = query_distance(draws, sc, passes) if distance is None else distance
    return np.sqrt(noise ** 2 + (draws.variables["structure_sd"] * d) ** 2)


#: The prior of the discrepancy per doubling of concurrency beyond the largest measured.
CONCURRENCY_SD = "concurrency_sd"


def concurrency_sd(draws: Fit) -> float:
    """The ``[priors.concurrency_sd]`` value (a point prior; 0 for a priors file without it)."""
    prior = draws.priors.priors.get(CONCURRENCY_SD)
    if prior is None:
        return 0.0
    p = prior.params
    return float(p["value"] if prior.dist == "point" else p.get("median", 0.0))


def concurrency_beyond(draws: Fit, sc: Scenario) -> float:
    """Doublings of the query's concurrency beyond the largest one the fit measured on its
    system (or on the system its parameters come from): ``log2(C / C_max)``, 0 within."""
    if sc.concurrency <= 1:
        return 0.0
    top = concurrency_reference(draws, sc)[1]
    return max(0.0, float(np.log2(sc.concurrency / top)))


def concurrency_reference(draws: Fit, sc: Scenario) -> tuple[str, int]:
    """(the system whose measured concurrencies :func:`concurrency_beyond` counts from: the
    query's own, or the one its parameters are transferred from; the largest C measured there,
    1 without rows): :func:`rows_behind`'s."""
    behind = rows_behind(draws, sc)
    return behind.reference or sc.pair, behind.max_concurrency or 1


def reweight_understates(draws: Fit, sc: Scenario) -> str | None:
    """One line when ``sc`` is beyond the concurrencies measured (:func:`concurrency_beyond`)
    and the priors give that a discrepancy (:data:`CONCURRENCY_SD`): ``next`` reweights the
    fit's draws, which cannot remove it, so its E[width] of a candidate at a higher C than
    measured understates what the row does once added and refitted. None otherwise."""
    beyond, sd = concurrency_beyond(draws, sc), concurrency_sd(draws)
    if not beyond or not sd:
        return None
    system, top = concurrency_reference(draws, sc)
    source = "" if system == sc.pair else f", which {sc.pair}'s answer is transferred from"
    return (f"C = {sc.concurrency} is {beyond:.3g} doubling{'' if beyond == 1 else 's'} beyond "
            f"the concurrencies measured on {system} (at most {top}{source}): its interval "
            "carries a "
            f"prior-driven discrepancy for them ({CONCURRENCY_SD} {sd:g} per doubling: sd "
            f"{beyond * sd:.2g} of log tok/s) that reweighting the draws cannot remove, so "
            f"E[width] understates what a candidate above C = {top} does once added and "
            "refitted")


def group_measured_values(draws: Fit, label: str) -> dict[str, set[float]]:
    """The drafter passes and tree nodes the fit measured in overhead group ``label``."""
    cache = draws.memo.setdefault("group_values", {})
    if label not in cache:
        model = draws.meta["model"]
        values: dict[str, set[float]] = {"pass": set(), "tree": set()}
        for r in fit_rows(draws):
            if row_group(draws, r) != label:
                continue
            p, n = draft_structure(model, r.method, r.block, r.budget)
            values["pass"].add(p)
            values["tree"].add(n * r.concurrency)   # the step's nodes: every stream's tree
        cache[label] = values
    return cache[label]


def group_learned(draws: Fit, label: str) -> bool:
    """Did the fit learn overhead group ``label`` from rows (a group of the model's structure
    whose rows a validation fold holds out was not: its costs are its prior's)?"""
    return (label in draws.meta["coords"]["overhead_group"]
            and bool(group_measured_values(draws, label)["pass"]))


def tied_ratio_spread(draws: Fit, label: str, query: dict[str, float], unit_ms,
                      rng: np.random.Generator, pass_factor: float = 1.0,
                      one_stream: dict[str, float] | None = None):
    """Extra SPEC (ms per draw) for a measured group asked about at another number of drafter
    passes or tree nodes than the single one it was measured at.

    The fit gives such a group its mean per-pass (per-node) ratio ``exp(mean)`` (the
    population's, its engine's effect and its roofline: engine/model.py): the data cannot tell
    its own from its fixed cost. Its measured total stays as fitted; the passes (nodes) beyond
    (or short of) the measured value cost the group's own ratio, drawn around that mean
    ``exp(mean + sd z)``, so the step carries the group-to-group spread exactly where it
    extrapolates. 0 where the group's passes (nodes) varied in the data. ``pass_factor``
    scales the pass part (``predict --drafter``: its roofline over the priced drafter's).

    The measured total is the group's fixed cost plus its passes' (nodes') cost, so an own
    ratio above ``exp(mean) + fixed / measured`` would leave the measured configuration a
    negative fixed cost: a speculative step does its per-step work (scheduling, sampling,
    acceptance) on top of its drafter passes, never less than nothing. ``z`` is drawn from
    its normal truncated there, per draw (by inversion, ``Phi^-1(Phi(z) Phi(z_max))``: one
    number from ``rng`` per draw, as before); passes first, then nodes from the fixed cost
    the passes leave. The passes' bound is the dearest measured configuration's: one whose
    rows name a drafter card dearer per pass than the group's paid them at that multiple
    (:func:`measured_pass_scales`). Before this, a fit of AR and MTP depth 1 priced depth 6
    with draws whose depth 1 was all passes and less than no fixed cost, the long lower tail
    of the headline's shape (docs/validation.md).

    ``one_stream``: the passes and nodes of the query's configuration at C = 1 (default
    ``query``), which decide whether ``z`` is drawn from ``rng``: where they differ from the
    measured ones, as it always was there; else, when ``query``'s nodes do (C streams of the
    measured tree), from a stream jumped from ``rng``'s state, which leaves ``rng`` as it
    is. So the step draws as many numbers from ``rng`` at every C as at C = 1, and the
    run-to-run noise drawn after it from the same generator is common to the configuration's
    concurrencies (predictive.scenario_key); drawn from ``rng`` at C = 2 and not at C = 1,
    it shifted that noise, and per-user tok/s could rise with a stream more. Every C where
    the nodes differ reads the same ``z``."""
    v = draws.variables
    varies = draws.meta["model"].get("group_varies")
    groups = draws.meta["coords"]["overhead_group"]
    if not varies:
        return 0.0
    g = groups.index(label)
    extra = np.zeros(draws.n_draws)
    measured = group_measured_values(draws, label)
    # the group's fixed cost at its measured configuration (ratio of its AR step): what the
    # own per-pass (per-node) cost may take of the measured total
    room = (np.asarray(v["spec_fixed_ratio"][:, g], dtype=float) if "spec_fixed_ratio" in v
            else None)
    for part in ("pass", "tree"):
        if varies[part][g] or len(measured[part]) != 1:
            continue
        at = next(iter(measured[part]))
        delta = query[part] - at
        if (one_stream or query)[part] != at:   # drawn from rng at C = 1: at every C
            z = rng.standard_normal(draws.n_draws)
        elif delta != 0:   # (a stream of each part's own: jumps 1 for passes, 2 for nodes;
            # default_rng's PCG64, as every generator here is, can jump)
            bits = cast(np.random.PCG64, rng.bit_generator)
            z = np.random.Generator(bits.jumped(1 + (part == "tree"))).standard_normal(
                draws.n_draws)
        if delta == 0:   # (z unused: the measured passes or nodes cost as fitted)
            continue
        mu, sd = v[f"spec_{part}_log_mu"], v[f"spec_{part}_log_sd"]
        if f"spec_{part}_mean" in v:   # (a fit of an earlier version: the population's)
            mu = v[f"spec_{part}_mean"][:, g]
        # (a row naming a drafter card dearer per pass than the group's paid its passes at
        # that multiple: its fixed cost is the first to reach 0)
        low, high = measured_pass_scales(draws, label) if part == "pass" else (1.0, 1.0)
        if room is not None and at > 0:
            z = fixed_cost_kept(z, mu, sd, room / (at * high),
                                draws.memo.setdefault("truncation_cdf", {}))
        own = np.exp(mu + sd * z)
        if room is not None:   # (what every measured configuration keeps)
            paid = (own - np.exp(mu)) * at
            room = np.maximum(np.minimum(room - paid * high, room - paid * low), 0.0)
        extra = extra + (own - np.exp(mu)) * delta * (pass_factor if part == "pass" else 1.0)
    return extra * unit_ms


def measured_pass_scales(draws: Fit, label: str) -> tuple[float, float]:
    """The least and the most a measured configuration of overhead group ``label`` paid per
    drafter pass, as a multiple of the group's own per-pass cost: 1 for a row naming no drafter
    card, a card's roofline over the group's for a row naming one (the configuration's
    ``config_pass_scale`` the fit priced it with, core/spec.group_inputs; the drafter card a
    row names prices its passes as :func:`~ddtree_bayes.engine.scenario.row_scenario` does).
    (1, 1) for a group no row of which names a card, or a fit storing no group roofline."""
    cache = draws.memo.setdefault("pass_scales", {})
    if label not in cache:
        from ddtree_bayes.engine.scenario import row_scenario

        roof = draws.meta["model"].get("group_pass_roof_ms")
        g = draws.meta["coords"]["overhead_group"].index(label)
        scales = {1.0 if r.drafter is None or not roof
                  else pass_roofline(draws, row_scenario(draws, r))[0] / roof[g]
                  for r in fit_rows(draws) if row_group(draws, r) == label}
        cache[label] = (min(scales, default=1.0), max(scales, default=1.0))
    return cache[label]


def fixed_cost_kept(z: np.ndarray, mu, sd, headroom,
                    memo: dict[bytes, np.ndarray] | None = None) -> np.ndarray:
    """Standard normal draws ``z`` mapped to the normal truncated above at ``z_max`` (per
    draw), where ``exp(mu + sd z_max) = exp(mu) + headroom``: an own per-pass (per-node) ratio
    that leaves the measured configuration's fixed cost, ``headroom`` per pass (node), at or
    above 0 (:func:`tied_ratio_spread`). By inversion, one draw in, one out: a draw's quantile
    u becomes u x Phi(z_max). ``sd`` 0 (a point prior): ``z`` as it is. ``memo`` (the fit's):
    Phi(z_max) by the bytes of ``z_max``, which depend on the fit and the group alone (every
    step of a group asks the same: ``predict --concurrency 1,4,8,16`` 16 times, ``next`` 99).

    >>> import numpy as np
    >>> z = np.array([-1.0, 0.0, 3.0])
    >>> # own ratio at most e^0 + (e^1 - 1) = e: z_max = 1 (sd 1); Phi(1) = 0.8413
    >>> np.round(fixed_cost_kept(z, 0.0, 1.0, np.e - 1.0), 4).tolist()
    [-1.1101, -0.2002, 0.9953]
    >>> fixed_cost_kept(z, 0.0, 0.0, 0.5).tolist()
    [-1.0, 0.0, 3.0]
    """
    sd = np.asarray(sd, dtype=float)
    z = np.asarray(z, dtype=float)
    if not np.any(sd > 0):
        return z
    with np.errstate(divide="ignore", invalid="ignore"):
        z_max = (np.log(np.exp(mu) + np.maximum(headroom, 0.0)) - mu) / np.where(sd > 0, sd, 1.0)
    if memo is None:
        cap = normal.cdf(z_max)
    else:
        key = (np.ascontiguousarray(z_max).tobytes()
               + repr((z_max.shape, z_max.dtype)).encode())
        if key not in memo:
            memo[key] = normal.cdf(z_max)
        cap = memo[key]
    return np.where(sd > 0, normal.quantile(normal.cdf(z) * cap), z)


def carried_group(draws: Fit, sc: Scenario, engine: str
                  ) -> tuple[str, str, int, str | None] | None:
    """For a query whose (system, engine, method) group the fit did not learn (on a GPU it
    never measured, or one measured with another engine or method only): the measured overhead
    group of the same engine and method on the measured system nearest to it (one GPU or its
    interconnect class first, then aggregate bandwidth, as
    :func:`~ddtree_bayes.engine.transfer.transfer_reference` picks among the systems that
    measured that group), as (group label, GPU, count, the pair's model: None in a fit of one
    model); None when no system measured it (the group is then drawn from the population). In
    a fit of several models only the query model's own pairs are searched, or failing them
    those of another deployment card of the same model (:func:`~ddtree_bayes.engine.
    target_models.deployments_of_one_model`: Qwen3.8-27B at IQ2_XXS carries its Q4_K_M
    group, the same MTP module in the same engine): another model's drafter and engine
    set-up are not this one's, and the population with its engine effect already says what
    they share."""
    multi = is_multi(draws)
    with_group = [s for s in draws.measured_systems if s != sc.pair
                  and group_learned(draws, S.overhead_group_label(s, engine, sc.method))]
    if multi:
        own = [s for s in with_group if split_label(s)[0] == sc.model]
        with_group = own or [s for s in with_group if deployments_of_one_model(
            draws, str(split_label(s)[0]), str(sc.model))]
    if not with_group:
        return None
    ref, ref_hw, ref_gpus = transfer_reference(draws, sc.hardware, sc.gpus, among=with_group)
    return (S.overhead_group_label(ref, engine, sc.method), ref_hw, ref_gpus,
            split_label(ref)[0] if multi else None)


def carried_spec_ms(draws: Fit, sc: Scenario, carried: tuple[str, str, int, str | None],
                    passes: float, nodes: float, scale, rng: np.random.Generator,
                    spread: np.ndarray | None) -> np.ndarray:
    """SPEC (ms per draw) of a query on an unmeasured system whose reference system measured
    the query's engine and method (:func:`carried_group`): that group's costs carried in
    physical units - the fixed and per-node costs in ms, the per-pass cost as its multiple of
    the drafter-pass roofline, recomputed on the query's GPUs - with its spread where it was
    measured at one number of passes or nodes (:func:`tied_ratio_spread`), times the
    ``[transfer] system_sd`` scatter a transferred system's step carries (kernel maturity,
    drivers, engine builds: prior-driven). Drawing it from the population instead put a +-40%
    interval on a memory overclock of the measured GPU (docs/howto/own-data.md). ``spread``:
    the groups' spread a hybrid target carries besides in an engine whose hybrid effect the
    fit learned to be large or could not separate (:func:`deployment_spread`; None: none)."""
    import dataclasses

    label, ref_hw, ref_gpus, ref_model = carried
    v, n = draws.variables, draws.n_draws
    g = draws.meta["coords"]["overhead_group"].index(label)
    # the group's per-pass ratio is a multiple of the roofline of the drafter it measured (the
    # fit's card for the method, of the pair's own model card) on its own GPUs; the query's
    # drafter (--drafter) on the new ones
    ref = dataclasses.replace(sc, hardware=ref_hw, gpus=ref_gpus, measured=True, drafter=None,
                              model=ref_model if ref_model is not None else sc.model)
    ref_step = v["step_ar_ms"][:, draws.meta["coords"]["system"].index(ref.pair)]
    roof = pass_roofline(draws, sc)[0] / pass_roofline(draws, ref)[0]
    # the fixed and per-pass costs move by the AMD effect between the two GPUs (0 when both
    # or neither are AMD GPUs in one engine's fit)
    engine = label.rsplit("/", 2)[1]
    # (--new-deployment: the group carried to another deployment of itself, on its own GPUs:
    # no AMD effect between them, and none drawn)
    amd = 1.0 if ref.pair == sc.pair else np.exp(amd_log_effect(draws, sc.hardware, engine, rng)
                                                 - amd_log_effect(draws, ref_hw, engine, rng))
    spec = scale * ref_step * ((v["spec_fixed_ratio"][:, g] + v["spec_pass_ratio"][:, g] * roof
                                * passes) * amd + v["spec_tree_ratio"][:, g] * nodes)
    # the deployment scatter's z before the group's own per-pass (per-node) cost, whose z is
    # drawn only where the passes (nodes) differ from the measured ones: drawn after it, the
    # scatter of a budget at the measured nodes and of one past them were two z's, and
    # optimize ranked the budgets of one deployment on independent scatters
    scatter = transfer_draw(draws, "system_sd", rng)   # (as the transferred step draws it)
    if spread is not None:
        scatter = np.hypot(scatter, spread)
    z = rng.standard_normal(n)
    # (C = 1's nodes decide what it draws: the same at every C, tied_ratio_spread)
    spec = np.maximum(spec + tied_ratio_spread(draws, label, {"pass": passes, "tree": nodes},
                                               ref_step * scale, rng, roof * amd,
                                               {"pass": passes, "tree": nodes / sc.concurrency}),
                      0.0)
    return spec * np.exp(scatter * z)


def new_deployment_group(draws: Fit, sc: Scenario) -> str | None:
    """The overhead group ``--new-deployment`` carries to another deployment of itself: the
    (system, engine, method) group of a speculative question (the engine's relation base:
    native's is SGLang's) that the fit learned from rows on the question's own system, in the
    structured step form, when the question asks for it (:attr:`Scenario.new_deployment`);
    else None (the flag changes nothing: :func:`new_deployment_warning`).

    Why: a user's deployment under a measured card and GPU name (another build, power cap,
    OS or quant) was answered from that group's measured overhead, anchored to its rows, in
    intervals 12-21% wide, and missed by 18-84% (docs/validation.md, the seventh, eighth and
    ninth held-out collections). With the flag the group is carried as to another system
    (:func:`carried_spec_ms`, with itself as the reference: roofline ratio 1, no AMD effect),
    with the [transfer] system scatter and, for a hybrid target, the groups' spread
    (:func:`deployment_spread`), and the answer is not anchored to the group's rows."""
    if (not sc.new_deployment or sc.method == AR_METHOD or not sc.measured
            or draws.meta["model"].get("step_form", "fraction") != "structured"):
        return None
    label = group_label(draws, sc.pair, sc.engine, sc.method)
    return label if label is not None and group_learned(draws, label) else None


#: How :func:`new_deployment_warning`'s line starts (workflows/living/tracking.py tells it
#: from the other warnings of a tracked query by it).
NEW_DEPLOYMENT_UNCHANGED = "--new-deployment changes nothing for "


def new_deployment_warning(draws: Fit, sc: Scenario, within: str = "") -> str | None:
    """One line when ``--new-deployment`` changes nothing of ``sc``'s answer (None when it
    does, or was not asked): an autoregressive question (no speculative overhead; in the
    structured form its answer stays anchored to the measured AR rows, which P(> AR) of a
    flagged speculative question is not, and the line says so), a fit of the fraction step
    form (no group costs to carry), or a group the fit did not learn on the question's system
    (its overhead is already carried from another system or drawn from the population, as
    for any new deployment). A warning, not a refusal: the flag asks for what such an answer
    already is. ``within``: words after the system naming where (a fit of a model average:
    :func:`~ddtree_bayes.engine.predictive.mixture_new_deployment_warnings`)."""
    if not sc.new_deployment or new_deployment_group(draws, sc) is not None:
        return None
    lead = f"{NEW_DEPLOYMENT_UNCHANGED}{sc.engine} {sc.method} on {sc.pair}{within}: "
    structured = draws.meta["model"].get("step_form", "fraction") == "structured"
    if sc.method == AR_METHOD:
        # (structured: the answer is anchored to the measured AR rows, the measured
        # deployment's, while a flagged speculative question's P(> AR) compares with the fit's
        # AR step, predictive.ar_anchored: the point mass's 133 tok/s against 125, so
        # "the target step is the fit's either way" read as if 133 were that AR)
        return lead + ("an autoregressive step has no speculative overhead group to carry" + (
            "; this answer is the measured deployment's AR step, anchored to its AR rows where "
            "the fit has them, while P(> AR) of a speculative question with the flag compares "
            "with the fit's AR step, not anchored to them" if structured else
            " (the target step is the fit's either way)"))
    if not structured:
        return lead + ("the fit's fraction step form has no group costs to carry (fit the "
                       "structured form for it)")
    label = group_label(draws, sc.pair, sc.engine, sc.method)
    return lead + (f"the fit did not measure group {label}, so its overhead is already carried "
                   "from another system or drawn from the population, as for any new "
                   "deployment (the answer's note says which)")


def target_kinds(fit: Fit, engine: str, learned: bool = False) -> set[bool]:
    """Which kinds of target the fit's overhead groups of ``engine`` ran: True for a hybrid
    (the group's ``group_recurrent``), False for a transformer; ``learned``: only the groups
    the fit learned from rows (:func:`group_learned`: not a validation fold's held-out ones).
    Empty when the fit has no group of ``engine``."""
    model = fit.meta["model"]
    engines, group_engine = model.get("engines", []), model.get("group_engine", [])
    # (no "group_recurrent": the fit has no hybrid group)
    recurrent = model.get("group_recurrent") or [False] * len(group_engine)
    groups = fit.meta["coords"]["overhead_group"]
    return {bool(rec) for g, (e, rec) in enumerate(zip(group_engine, recurrent, strict=True))
            if engines[e] == engine and (not learned or group_learned(fit, groups[g]))}


def deployment_spread(fit: Fit, sc: Scenario, engine: str) -> np.ndarray | None:
    """(draws,) log spread of a carried group's SPEC between deployments, for a hybrid target
    (the card's ``recurrent_layers``) in an engine whose hybrid effect (``spec_fixed_recurrent``,
    engine/model.py) is credibly positive (its 5% quantile above 0) or is not separable from
    the engine's own (the fit measured the engine on hybrid targets only): the groups' own
    spread ``spec_fixed_log_sd``. None otherwise: the carry's system scatter alone.

    Why: a hybrid's speculative overhead depends on how a deployment runs (vLLM's CUDA-graph
    mode under speculation, an engine's build, flags and power limits, which no row records),
    so two deployments of one model, engine and method differ as much as any two groups:
    Qwen3.8-27B MTP in vLLM pays 4.6, 8.1 and 14.8 ms of fixed cost on the corpus's three
    systems and ~28 ms on one A100 (vllm-project/vllm#35387); in llama.cpp its MTP step costs
    3-9 ms over AR at n = 1-4 on the corpus's RTX 3090 and 5090 and 23-37 ms at n = 2-4 on
    three community rigs (an RTX 3090 at 250 W, one on a day-one build, an RTX 5090 laptop:
    sudoingX/qwen38-mtp), where a system's scatter allows +-40%. Only an engine measured on
    transformer targets too, whose hybrid effect the data put near 0, keeps the system scatter."""
    card = stored_card(fit.meta["model"], sc.model)
    model = fit.meta["model"]
    engines = model.get("engines", [])
    v = fit.variables
    if (card is None or not card.recurrent or "spec_fixed_recurrent" not in v
            or engine not in engines or "spec_fixed_log_sd" not in v):
        return None
    # not a validation fold's held-out group: its rows told the fit nothing
    separable = False in target_kinds(fit, engine, learned=True)   # a transformer target too
    if separable and np.quantile(v["spec_fixed_recurrent"][:, engines.index(engine)], 0.05) <= 0:
        return None
    return v["spec_fixed_log_sd"]


def carry_note(spread: np.ndarray | None, engine: str) -> str:
    """How a carried group's answer scatters (``spread``: :func:`deployment_spread`'s), for
    the answer's notes."""
    if spread is None:
        return "with the [transfer] system scatter"
    return ("with the [transfer] system scatter and the groups' spread spec_fixed_log_sd, "
            f"prior-driven: a hybrid target in {engine}, whose hybrid deployments differ as "
            "much as any two groups")


def new_engine_spread(n_engines: int) -> float:
    """How many engine spreads (``spec_<part>_engine_sd``) a new engine's effect lies from the
    population mean ``mu`` of a fit of ``n_engines`` engines. The fit's engine effects sum to
    zero (engine/model.py), so ``mu`` is the population's mean plus the mean of the fit's K
    engines' own effects; a new engine's effect, another draw of the population, lies
    ``e_new - mean(e_1..e_K)`` from it: variance ``sd^2 (1 + 1/K)``. One engine (a user's own
    fit of one engine, asked of another) is sqrt(2) spreads away, not one: that engine's own
    departure from the population is in ``mu``. No engine (a fit without speculative groups):
    ``mu`` is the population's, one spread."""
    return math.sqrt(1.0 + 1.0 / n_engines) if n_engines else 1.0


def unmeasured_log_ratio(fit: Fit, sc: Scenario, part: str, engine: str, step_ar: np.ndarray,
                         rng: np.random.Generator, amd=None) -> np.ndarray:
    """(draws,) log ratio (to the AR step) of the ``part`` cost (fixed, pass, tree) of an
    overhead group the fit never measured: drawn around its mean, as the model writes a group
    (engine/model.py): the population's ``mu``, the engine's learned effect (an engine the fit
    never measured: drawn from the engines' spread, widened by :func:`new_engine_spread`), the
    physical offset (``-log step_ar``; for a drafter pass also ``+ log`` its roofline on the
    query's GPUs, core/drafters.py), and the group-to-group spread ``sd z``, and for the
    fixed and per-pass parts the query's AMD effect ``amd`` (:func:`amd_log_effect`), which
    they share as the model's groups do: a caller asking both draws it once and passes it
    (None: drawn here, for one part alone). A fit of an earlier version has no engine effects
    nor offsets: the population's ratio."""
    v, model, n = fit.variables, fit.meta["model"], fit.n_draws
    mu, sd = v[f"spec_{part}_log_mu"], v[f"spec_{part}_log_sd"]
    log = mu + sd * rng.standard_normal(n)
    if "engines" not in model:
        return log
    engines = model["engines"]
    if engine in engines:
        log = log + v[f"spec_{part}_engine"][:, engines.index(engine)]
    else:
        log = log + new_engine_spread(len(engines)) * v[f"spec_{part}_engine_sd"] \
            * rng.standard_normal(n)
    if part == "fixed":
        log = log + recurrent_log_effect(fit, sc, engine, rng)
    if part != "tree":
        log = log + (amd_log_effect(fit, sc.hardware, engine, rng) if amd is None else amd)
    log = log - np.log(step_ar)
    if part == "pass":
        log = log + np.log(pass_roofline(fit, sc)[0])
    return log


def recurrent_log_effect(fit: Fit, sc: Scenario, engine: str, rng: np.random.Generator):
    """(draws,) extra log fixed cost of an unmeasured group whose target is a hybrid (the
    card's ``recurrent_layers``): the engine's ``spec_fixed_recurrent`` (engine/model.py),
    drawn from its prior for an engine the fit has no effect of; 0 for a transformer target,
    and for a fit of an earlier version whose priors have none."""
    from ddtree_bayes.core.sampling import prior_sample
    from ddtree_bayes.core.spec import RECURRENT_SD

    card = stored_card(fit.meta["model"], sc.model)
    if card is None or not card.recurrent:
        return 0.0
    v, engines = fit.variables, fit.meta["model"].get("engines", [])
    if "spec_fixed_recurrent" in v and engine in engines:
        return v["spec_fixed_recurrent"][:, engines.index(engine)]
    if RECURRENT_SD in v:   # (the fit's own: its posterior where the spread was learned)
        sd = v[RECURRENT_SD]
    elif (prior := fit.priors.priors.get(RECURRENT_SD)) is not None:
        sd = prior_sample(prior, fit.n_draws, rng)
    else:
        return 0.0
    return sd * rng.standard_normal(fit.n_draws)


def amd_log_effect(fit: Fit, hardware: str, engine: str, rng: np.random.Generator):
    """(draws,) extra log fixed and per-pass cost of a speculative step of ``engine`` on GPU
    ``hardware`` when it is an AMD one (engine/model.py ``spec_amd``): the engine's effect where
    the fit has AMD groups (learned for an engine measured on AMD, the learned mean and the
    engines' spread for another), the learned mean and spread for an engine the fit never
    ran, both priors where the fit has no AMD group; 0 for another GPU, and for a fit whose
    priors have no such term. A learned effect is the same draws at every call (a carried
    group's reference and query on AMD GPUs of one engine differ by nothing); a drawn one is
    new draws at each call, so one answer draws it once for its fixed and per-pass costs."""
    from ddtree_bayes.core.sampling import prior_sample
    from ddtree_bayes.core.spec import AMD_MU, AMD_SD

    row = fit.hardware.get(hardware)
    if row is None or not is_amd(row):
        return 0.0
    v, engines, n = fit.variables, fit.meta["model"].get("engines", []), fit.n_draws
    if "spec_amd" in v and engine in engines:
        return v["spec_amd"][:, engines.index(engine)]
    if AMD_MU in v:
        return v[AMD_MU] + v[AMD_SD] * rng.standard_normal(n)
    priors = fit.priors.priors
    if AMD_MU not in priors or AMD_SD not in priors:
        return 0.0
    return (prior_sample(priors[AMD_MU], n, rng)
            + prior_sample(priors[AMD_SD], n, rng) * rng.standard_normal(n))


def amd_note(fit: Fit, sc: Scenario, engine: str, carried_from: str | None = None) -> str:
    """What an answer on an AMD GPU says of its AMD term (:func:`amd_log_effect`): learned
    from the engine's AMD groups, from other engines' (the mean, with the engines' spread), or
    prior-driven; for a group carried from an AMD GPU (``carried_from``, its GPU) to another,
    that the engine's effect is taken out of its costs (:func:`carried_spec_ms`). '' for
    another GPU or an AR question."""
    from ddtree_bayes.core.spec import AMD_MU

    row = fit.hardware.get(sc.hardware)
    if sc.method == AR_METHOD or fit.meta["model"].get("step_form", "fraction") != "structured":
        return ""   # (the fraction form prices no AMD term)
    ref = fit.hardware.get(carried_from) if carried_from is not None else None
    if (row is not None and not is_amd(row) and ref is not None and is_amd(ref)
            and "spec_amd" in fit.variables):
        return (f"; carried from an AMD GPU ({carried_from}): {engine}'s extra fixed and "
                "per-pass cost on AMD (spec_amd) taken out of the group's")
    if row is None or not is_amd(row):
        return ""
    engines = fit.meta["model"].get("engines", [])
    group_engine = fit.meta["model"].get("group_engine", [])
    own = [group_engine[g] for g in learned_amd_groups(fit)]
    if "spec_amd" in fit.variables and engine in engines and engines.index(engine) in own:
        return (f"; AMD GPU: {engine}'s extra fixed and per-pass cost on AMD learned from its "
                "AMD groups (spec_amd)")
    if AMD_MU in fit.variables and own:
        return (f"; AMD GPU: {engine}'s extra fixed and per-pass cost on AMD from the mean of "
                f"the fit's AMD engines with the engines' spread (spec_amd_engine_sd; the fit "
                f"has no {engine} group on AMD)")
    if AMD_MU in fit.variables or AMD_MU in fit.priors.priors:
        return ("; AMD GPU: the extra fixed and per-pass cost on AMD is prior-driven (the fit "
                "has no AMD group; spec_amd_log_mu, spec_amd_engine_sd)")
    return ""


def learned_amd_groups(fit: Fit) -> list[int]:
    """The speculative groups on an AMD GPU (meta ``group_amd``; indices into the fit's
    overhead groups) that the fit learned from rows: not a validation fold's held-out ones,
    which keep the model's term but taught it nothing (every group of a fit without held-out
    rows has rows)."""
    groups = fit.meta["coords"].get("overhead_group", [])
    taught = ({row_group(fit, r) for r in fit_rows(fit)} if fit.meta.get("held_out_rows")
              else set(groups))
    return [g for g, f in enumerate(fit.meta["model"].get("group_amd") or [])
            if f and groups[g] in taught]


def amd_overhead_warning(draws: Fit, sc: Scenario) -> str | None:
    """One line when a speculative question asks an AMD GPU and the fit measured no speculative
    row on one: every overhead the answer prices comes from CUDA deployments (times the AMD
    term's prior, centred on no effect). On public AMD rigs kept outside
    the repo (docs/validation.md, "A third held-out collection") all 15 speculative rows ran
    slower than predicted from their own AR rows, by 8-139% (median 39%); of its two CUDA
    rows one was within 6%, the other (a small-active MoE) +49%; the in-repo MI325X SGLang
    EAGLE-3 sweep ran faster than so predicted (185 tok/s per user, 90% 87-191, median 143),
    so the line says the answer may be off either way. None otherwise (AR, a GPU
    that is not AMD, or a fit with a speculative group on an AMD GPU, which taught it the AMD
    term: engine/model.py ``spec_amd``). An AMD system measured at AR only is the held-out
    pairs' own shape (AR on the rig, speculation asked): its rows say nothing of the overhead,
    so it still warns."""
    table = draws.hardware
    if sc.hardware not in table or not is_amd(table[sc.hardware]) or sc.method == AR_METHOD:
        return None
    if learned_amd_groups(draws):   # (a validation fold's held-out AMD group taught nothing)
        return None

    # (the term is drawn from its priors only in the structured form and where the fit's
    # priors have it: the fraction form, a fit made before it, or with a priors file without
    # it, prices no AMD factor at all)
    if draws.meta["model"].get("step_form", "fraction") != "structured":
        priced = ("priced from CUDA deployments with no AMD term (the fit's fraction step "
                  "form has none)")
    elif S.AMD_MU not in draws.priors.priors:
        priced = ("priced from CUDA deployments with no AMD term (the fit's priors have no "
                  f"{S.AMD_MU}: a fit made before it, or a priors file without it)")
    else:
        priced = ("priced from CUDA deployments times a prior-driven AMD factor centred on 1 "
                  f"({S.AMD_MU})")
    return (f"{sc.hardware} is an AMD GPU and the fit measured no speculative row on one: the "
            f"speculative overhead is {priced}; on public consumer AMD rigs (llama.cpp on ROCm "
            "and Vulkan, vLLM on ROCm, a HIP DDTree engine; docs/validation.md) every "
            "speculative row ran slower than predicted from CUDA deployments and its own AR "
            "row, by 8-139% (median 39%), and an MI325X SGLang deployment ran faster: this "
            "answer may be far off either way; a speculative row measured on an AMD GPU "
            "teaches the fit the factor")


def has_recurrent_term(fit: Fit) -> bool:
    """Does an unmeasured group's fixed cost in ``fit`` carry a hybrid-target effect: the
    structured form with the effect fitted or its prior in the fit's priors."""
    from ddtree_bayes.core.spec import RECURRENT_SD

    return (fit.meta["model"].get("step_form") == "structured"
            and ("spec_fixed_recurrent" in fit.variables
                 or RECURRENT_SD in fit.priors.priors))


def recurrent_note(fit: Fit, sc: Scenario, engine: str) -> str:
    """What an unmeasured group's answer says of the hybrid-target term of its fixed cost
    (engine/model.py ``spec_fixed_recurrent``): for a hybrid target, learned from the engine's
    hybrid groups or the prior's; for a transformer target in an engine the fit measured on
    hybrids only, that the two are not told apart. '' otherwise.

    >>> from ddtree_bayes.engine.testing import multi_model_draws
    >>> from ddtree_bayes.engine.scenario import resolve_scenario
    >>> d = multi_model_draws()
    >>> sc = resolve_scenario(d, hardware="h100", gpus=1, engine="vllm", method="ar", block=None,
    ...                       budget=None, verify_tokens=None, context_tokens=None,
    ...                       model="llama-3.1-8b-instruct")
    >>> recurrent_note(d, sc, "vllm")
    ''
    """
    card = stored_card(fit.meta["model"], sc.model)
    if card is None or not has_recurrent_term(fit):
        return ""
    kinds = target_kinds(fit, engine)
    if card.recurrent:
        if True in kinds:
            return (f"; hybrid target ({card.recurrent_layers} recurrent layers): {engine}'s "
                    "extra fixed cost for hybrids learned from its hybrid groups")
        return (f"; hybrid target ({card.recurrent_layers} recurrent layers): {engine}'s extra "
                f"fixed cost for hybrids is prior-driven (the fit has no {engine} group of a "
                "hybrid; spec_fixed_recurrent_sd)")
    if kinds == {True}:
        return (f"; {engine}'s fixed cost for a transformer target is prior-driven (the fit "
                f"measured {engine} on hybrid targets only)")
    return ""


def pass_roofline(fit: Fit, sc: Scenario) -> tuple[float, str]:
    """The roofline of one drafter pass of the query's method, model and GPUs (ms, how),
    from the drafter cards and model cards stored in the fit (core/drafters.py)."""
    from ddtree_bayes.core.drafters import PassRoofline, pass_roofline_ms

    model = fit.meta["model"]
    constants = PassRoofline(**model.get("pass_roofline", {}))
    return pass_roofline_ms(pricing_drafter(fit, sc), required_card(model, sc.model), sc.method,
                            fit.hardware[sc.hardware], sc.gpus, constants)


def pricing_drafter(fit: Fit, sc: Scenario):
    """The drafter card whose roofline prices the query's drafter passes: ``--drafter``'s,
    else the card the fit stored for its model and method (engine/scenario.py
    ``default_card``); None: a generic drafter of the method."""
    name = sc.model or required_card(fit.meta["model"], sc.model).model
    return sc.drafter or default_card(fit, name, sc.method)


def pass_drafter(fit: Fit, sc: Scenario) -> tuple[str | None, str] | None:
    """Which drafter priced a speculative query's drafter passes, and the note saying so:
    (the card's name, or None for a generic drafter of the method; the note). None for an
    autoregressive query and for a fit of the fraction step form, which prices no pass."""
    from ddtree_bayes.core.drafters import generic_drafter

    if sc.method == AR_METHOD or fit.meta["model"].get("step_form") != "structured":
        return None
    card = pricing_drafter(fit, sc)
    if card is None:
        return None, f"drafter passes priced by {generic_drafter(sc.method)} (no drafter card)"
    return card.drafter, (f"drafter passes priced by drafter card {card.drafter} "
                          f"({card.pass_params_b:.3g} B parameters read per pass)")

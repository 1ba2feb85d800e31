"""The best tree budget (``ddtree-bayes optimize``).

Per draw ``tok_s(B) = accept(B) * 1000 / step_ms(M = B + 1)``. The best budget maximises the
expected tok/s, which is the same as minimising the expected regret
``E[max_B tok_s(B) - tok_s(B)]``. numpy only: well under a second for 4000 draws.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from ddtree_bayes.core.acceptance_config import AcceptanceCurve
from ddtree_bayes.core.config import DEFAULT_SEED
from ddtree_bayes.core.data import EMPTY_ITEM
from ddtree_bayes.core.drafters import DrafterCard, serves
from ddtree_bayes.core.errors import DataError, QueryError
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.ceiling import (
    balanced_read,
    budget_routing_warning,
    routing_row,
    step_rate,
)
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.question import (
    context_warnings,
    default_question,
    system_context_warnings,
    verify_context_warnings,
)
from ddtree_bayes.engine.scenario import (
    accept_limit,
    default_card,
    drafter_gap_warnings,
    layer_split_warning,
    max_context_warning,
    memory_warnings,
    named_drafter,
    priced_target,
    tensor_parallel_warning,
)
from ddtree_bayes.engine.structure import (
    amd_overhead_warning,
    beyond_measured_note,
    fit_rows,
    new_deployment_warning,
)
from ddtree_bayes.engine.target_models import resolve_model
from ddtree_bayes.engine.transfer import rows_at, rows_behind
from ddtree_bayes.workflows.decisions.acceptance_curve import (
    AcceptanceRows,
    curve_accept,
    misfit_warning,
    read_acceptance_rows,
    sample_curve,
    update_curve,
)
from ddtree_bayes.workflows.decisions.common import (
    DEFAULT_BUDGETS,
    MIN_ESS,
    med90,
    shared_components,
    shared_step,
)

#: Why optimize's refusal of a block above the drafter's trained one cannot ask for a
#: drafter by name (core/drafters.py ``block_problem``'s ``default_only``).
OPTIMIZE_DRAFTER = ("optimize has no --drafter: it asks the model's default drafter, or the "
                    "one an --acceptance-file's rows name")


# ------------------------------------------------------------------ decision arithmetic
def budget_decision(tok: np.ndarray) -> dict[str, np.ndarray]:
    """Per-budget decision numbers from tok/s draws of shape (draws, budgets).

    ``p_best``: share of draws in which the budget has the highest tok/s (ties go to the
    smaller budget); ``regret``: ``E[max_B tok_s - tok_s(B)]``. The budget with the highest
    mean also has the lowest expected regret.

    >>> out = budget_decision(np.array([[1.0, 3.0], [5.0, 2.0], [2.0, 2.5]]))
    >>> out["mean"].tolist(), out["p_best"].round(3).tolist(), out["regret"].round(3).tolist()
    ([2.6666666666666665, 2.5], [0.333, 0.667], [0.833, 1.0])
    """
    best = tok.max(axis=1)
    p_best = np.bincount(tok.argmax(axis=1), minlength=tok.shape[1]) / tok.shape[0]
    return {"mean": tok.mean(axis=0), "p_best": p_best,
            "regret": np.mean(best[:, None] - tok, axis=0)}


def max_verified_anywhere(draws: Fit) -> int:
    """The most tokens a step verified, C x M, in any row the fit learned from (on any
    system): optimize's bound for a budget when the rows behind its question
    (:func:`~ddtree_bayes.engine.transfer.rows_behind`) have none.

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> max_verified_anywhere(point_mass_draws())   # DDTree budget 8 (M = 9) at C = 1
    9
    """
    return max(r.verify_tokens * r.concurrency for r in fit_rows(draws))


def concurrency_notes(draws: Fit, sc: P.Scenario, concurrency: int,
                      budgets: dict[int, int] | None = None) -> list[str]:
    """What an answer at ``concurrency`` streams cannot check or measure: a KV cache that
    does not fit (as predict warns), a GPU without its memory size, a concurrency above the
    largest measured on the system (the step's growth with C is then the roofline's), and
    the ``budgets`` ({budget: M}) whose C x M exceeds the most tokens a step measured there
    (their growth with M too: predict's C x M clause, naming the budgets); on a system without
    rows, on the one its step is transferred from
    (:func:`~ddtree_bayes.engine.transfer.rows_behind`), as the table's footnote counts."""
    notes = list(memory_warnings(draws, sc, (concurrency,)))
    beyond = beyond_measured_note(draws, rows_behind(draws, sc), [concurrency], budgets=budgets)
    notes += [w for w in (layer_split_warning(draws, sc), tensor_parallel_warning(draws, sc),
                          amd_overhead_warning(draws, sc), beyond) if w is not None]
    return notes


def unused_acceptances(draws: Fit, sc: P.Scenario, block: int, budgets: tuple[int, ...],
                       accept: np.ndarray) -> list[str]:
    """One line when the fit measured the acceptance of this method and block on the system at
    budgets of the table: the curve is the priors' (or --acceptance-file's) and does not learn
    from them, while the step there is anchored to those rows (an exploratory pass: budget 32
    measured at 13.1, shown at the curve's 10.0 beside "anchored to the measured ddtree budget
    32")."""
    seen: dict[int, list[float]] = {}
    for r in rows_at(draws, sc):   # (not the rows a validation fold holds out)
        if (r.method == sc.method and r.block == block and r.budget in budgets
                and r.accept_len is not None):
            seen.setdefault(r.budget, []).append(r.accept_len)
    if not seen:
        return []
    parts = [f"budget {b} at {np.mean(a):.3g} ({len(a)} row{'s' if len(a) > 1 else ''}; the "
             f"curve: {np.median(accept[:, budgets.index(b)]):.3g})"
             for b, a in sorted(seen.items())]
    return [f"accept: the fit measured {sc.method} block {block} on {sc.pair} at "
            f"{', '.join(parts)}; the acceptance curve does not learn from rows: pass them as "
            "--acceptance-file FILE.csv (columns of data/acceptance_reference.csv) to update it"]


def ar_beats(draws: Fit, sc: P.Scenario, tok: np.ndarray, budget: int, concurrency: int,
             seed: int) -> list[str]:
    """A note when autoregressive decoding on the same system, engine, context and
    concurrency is faster than the recommended budget (``tok``: its tok/s per user, draw by
    draw) in most draws: the best budget is then no reason to speculate. optimize compared
    budgets only with each other, so at a high concurrency it recommended a budget that AR
    beat, without a word (predict --concurrency says it: P(faster than AR))."""
    ar_sc = sc.autoregressive()
    # (--new-deployment: that deployment's AR step, the fit's, as predict's P(faster than AR))
    step = shared_components(draws, ar_sc, seed, anchor=P.ar_anchored(draws, sc))[0]["step"]
    ar = step_rate(draws, ar_sc, step)   # (capped as predict's)
    p = float(np.mean(tok > ar))
    if p >= 0.5:
        return []
    at = f" at C = {concurrency}" if concurrency != 1 else ""
    return [f"autoregressive decoding{at} ({float(np.median(ar)):.0f} tok/s per user, median) "
            f"is faster than the best budget {budget} in {1 - p:.0%} of draws: speculation "
            f"does not pay here (P(budget {budget} faster than AR) {p:.2f})"]


def edge_note(budgets: tuple[int, ...], best: int, p_best: Sequence[float]) -> list[str]:
    """A note per edge (the smallest or the largest of three or more budgets compared) whose
    budget is the recommended one (index ``best``) or the most likely best (the highest of
    ``p_best``, per budget): P(best) and E[regret] are among those budgets, and one past the
    edge may be faster still (at C = 256 on the bundled fit the default grid gave budget 8
    P(best) 1.00 where budget 4, not compared, was best in a third of the draws; in native on
    b300 budget 16 is recommended while 8, the smallest, is best in half the draws). Two
    budgets are a question about those two; nothing is smaller than budget 1.

    >>> edge_note((8, 16, 32), 0, (0.93, 0.07, 0.0))[0].split(":")[1]
    ' a smaller budget may be faster still (--budgets 2,4,8,16 compares smaller ones)'
    >>> edge_note((8, 16, 32), 1, (0.52, 0.43, 0.05))[0].split(":")[0]
    'budget 8 is the smallest of the budgets compared, and its P(best) 0.52 is among them'
    >>> edge_note((8, 16, 32), 1, (0.05, 0.9, 0.05)), edge_note((8, 32), 0, (1.0, 0.0))
    ([], [])
    >>> edge_note((1, 2, 4), 0, (1.0, 0.0, 0.0))
    []
    """
    if len(budgets) < 3:
        return []
    top = max(p_best)
    notes = []
    for i in (0, len(budgets) - 1):
        b = budgets[i]
        if (i != best and p_best[i] < top) or (i == 0 and b == 1):
            continue
        if i == 0:
            edge, way = "smallest", "smaller"
            grid = [x for x in (b // 4, b // 2) if x >= 1 and x < b] + [b, 2 * b]
        else:
            edge, way = "largest", "larger"
            grid = [b // 2, b, 2 * b, 4 * b]
        notes.append(f"budget {b} is the {edge} of the budgets compared, and its P(best) "
                     f"{p_best[i]:.2f} is among them: a {way} budget may be faster still "
                     f"(--budgets {','.join(map(str, sorted(set(grid))))} compares {way} ones)")
    return notes


def parse_budgets(text: str | None) -> tuple[int, ...]:
    """``--budgets 8,16,32``; None gives :data:`DEFAULT_BUDGETS`.

    >>> parse_budgets("32, 8,16,8")
    (8, 16, 32)
    """
    if text is None:
        return DEFAULT_BUDGETS
    if any(not p.strip() for p in text.split(",")):   # (as the CLI's list flags: not dropped)
        raise QueryError(f"--budgets {text!r} {EMPTY_ITEM}", fix="use e.g. --budgets 8,16,32,64")
    try:
        values = sorted({int(p) for p in text.split(",")})
    except ValueError:
        raise QueryError(f"--budgets {text!r} is not a list of whole numbers",
                         fix="use e.g. --budgets 8,16,32,64") from None
    if not values or values[0] < 1:
        raise QueryError(f"--budgets {text!r}: need positive budgets", fix="use e.g. 8,16,32,64")
    return tuple(values)


def _block_meaning(draws: Fit, method: str) -> str:
    """What a block is to ``method`` (its ``[methods]`` depth): its draft depth ("block"),
    the depth and the anchor ("block - 1"), else the drafter's block."""
    from ddtree_bayes.core.methods import method_spec

    spec = method_spec(method, draws.methods)
    depth = None if spec is None else spec.depth
    return {"block": "its draft depth",
            "block - 1": "its draft depth + 1 (position 0 is the anchor)"}.get(
        depth or "", "its drafter's block")


def other_method_refusal(draws: Fit, curve: AcceptanceCurve, method: str, hardware: str,
                         gpus: int | None, engine: str, model: str | None, with_file: bool
                         ) -> QueryError:
    """The refusal of ``optimize --method M`` without ``--block`` for a method other than the
    curve's: what a block is to M and the blocks and budgets the fit measured of M on the
    system with the engine (the curve's block is its own method's, never M's). Autoregressive
    decoding has no budget to compare: said so."""
    from ddtree_bayes.core.methods import AR_METHOD

    if method == AR_METHOD:
        return QueryError(f"autoregressive decoding ({AR_METHOD}) drafts nothing: optimize "
                          "compares a drafter's tree budgets",
                          fix="give a tree method, e.g. --method ddtree")
    rows = [r for r in draws.measurements.rows
            if r.hardware == hardware and (gpus is None or r.gpus == gpus)
            and (model is None or r.model == model)]
    systems = sorted({r.system for r in rows}) or [
        hardware if gpus is None else f"{hardware}x{gpus}"]
    shapes = sorted({(r.block or 0, r.budget or 0) for r in rows
                     if r.engine == engine and r.method == method and (r.block or r.budget)})
    said = "; ".join(", ".join(part for part in (
        f"block {b}" if b else "", f"budget {n}" if n else "") if part) for b, n in shapes)
    where = f"on {', '.join(systems)} with {engine}"
    measured = f"measured {where}: {said}" if shapes else f"not measured {where}"
    example = f", e.g. --block {shapes[0][0]}" if shapes and shapes[0][0] else ""
    then = (": the file's rows of that block are used" if with_file else
            ", and --acceptance-file with measured acceptances of this drafter, or edit "
            "[acceptance_curve] (method, block and its priors) in the priors file for it, and "
            "pass it with --priors")
    return QueryError(f"the acceptance curve in {curve.path} describes {curve.method} block "
                      f"{curve.block}, not {method}, whose block is "
                      f"{_block_meaning(draws, method)} ({measured})",
                      fix=f"pass --block with the depth to compare budgets at{example}{then}")


def past_budgets_warning(draws: Fit, budgets: tuple[int, ...] | list[int],
                         scenarios: list, best: int, widest: str) -> str:
    """``widest`` (:func:`max_context_warning` of the largest budget, whose step's verified
    tokens pass the model's longest context) when it is the only such budget, else one line
    naming every budget whose tokens pass it, and whether the recommended budget ``best`` is
    one of them: `--context 262130 --budgets 8,16,32,64` on a 262,144-position card named
    budget 64 alone, where 16 and 32 pass it too and either could be recommended."""
    from ddtree_bayes.core.data import listed
    from ddtree_bayes.core.model_cards import stored_card
    from ddtree_bayes.core.row_notes import past_longest, step_reach, step_reach_above_max

    card = stored_card(draws.meta.get("model", {}), scenarios[0].model)
    past = [(b, b_sc) for b, b_sc in zip(budgets, scenarios, strict=True)
            if step_reach_above_max(card, b_sc.context_tokens, b_sc.verify_tokens) is not None]
    names = [b for b, _ in past]
    if len(past) < 2 or card is None:
        return widest + ("; it is the recommended budget" if best in names and len(budgets) > 1
                         else "")
    (lo, hi) = past[0][1], past[-1][1]
    reach = [step_reach(b_sc.context_tokens, b_sc.verify_tokens) for b_sc in (lo, hi)]
    return (f"budgets {listed(names)} verify {lo.verify_tokens} to {hi.verify_tokens} tokens "
            f"after a context of {lo.context_tokens:.0f}, reaching positions {reach[0]:.0f} to "
            f"{reach[1]:.0f}, {past_longest(card)}, and the answer extrapolates the step's "
            "growth past it" + ("; the recommended budget is one of them" if best in names
                                else ""))


def optimize(draws: Fit, curve: AcceptanceCurve, *, hardware: str | None = None,
             gpus: int | None = None, engine: str | None = None, method: str | None = None,
             block: int | None = None, budgets: tuple[int, ...] = DEFAULT_BUDGETS,
             context_tokens: float | str | None = None, acceptance_file: str | Path | None = None,
             prob: float = 0.9, seed: int = DEFAULT_SEED, model: str | None = None,
             concurrency: int = 1, kv_cache: str | None = None,
             new_deployment: bool = False) -> dict:
    """The tree budget with the highest expected tok/s, and per-budget decision numbers
    (``model``: the target model, required when the fit holds several). Without ``hardware``
    or ``engine``, the fit's default scenario's (:func:`P.default_scenario`) system and first
    engine; ``default_scenario`` in the result is that scenario when the fit's own was derived
    (it never measured B300), else None. The method and block are the acceptance curve's,
    unless ``acceptance_file`` has rows of others (the curve's priors are then their prior):
    ``method`` and ``block`` default to the curve's.

    Per posterior draw s: ``tok_s[s, B] = accept_s(B) * 1000 / step_ms_s(M = B + 1)``
    (expected throughput: no run-to-run noise), per user at ``concurrency`` C (the step then
    verifies C x M tokens: the knee comes sooner and the best budget shrinks; the scenario
    says C when it is not 1). ``kv_cache``: the deployment's KV-cache dtype (``--kv-cache``,
    as predict's): each budget's tok/s and autoregressive decoding's are capped at the read of
    the weights and the caches at it (:func:`~ddtree_bayes.engine.ceiling.step_rate`; default:
    the least read, a 4.5-bit cache), and the memory check counts the cache at it (default:
    the card's bytes); the scenario says it when given. ``new_deployment`` (``--new-deployment``,
    as predict's): every budget priced as another deployment of the measured group
    (:func:`~ddtree_bayes.engine.structure.new_deployment_group`), all with one deployment
    scatter per draw (the group's stream, :func:`~.common.group_rng`); the scenario says it
    when given, and a warning when it changes nothing. Returns a dict with ``rows`` (one per
    budget: tok/s mean, median and ``prob`` interval, acceptance and step time medians,
    ``p_best``, ``regret``; ``extrapolated`` when C x M exceeds the most tokens per step
    measured on the system (on a system without rows, on the one its step is transferred
    from: :func:`~ddtree_bayes.engine.transfer.rows_behind`; else on any);
    ``accept_extrapolated`` when B is below the curve's reference budget, or outside the
    budgets of the acceptance file),
    ``recommended`` (a budget) and ``warnings`` (a tree no drafter card serves for the model
    and the fit never measured: :func:`~ddtree_bayes.engine.scenario.drafter_gap_warnings`;
    :func:`~ddtree_bayes.engine.question.context_warnings` and :func:`concurrency_notes`, as
    predict warns them).

    Examples
    --------
    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    >>> draws = point_mass_draws()
    >>> curve = parse_acceptance_curve(draws.priors_toml)
    >>> out = optimize(draws, curve, hardware="b300", engine="sglang", budgets=(8, 32))
    >>> [r["verify_tokens"] for r in out["rows"]], out["rows"][1]["step_ms"]   # 16 ms / 0.8
    ([9, 33], 20.0)
    """
    asked = None
    if hardware is None or engine is None:   # the fit's default system and first engine
        d = default_question(draws, model)
        asked = d.to_json() if d.derived else None
        if hardware is None:
            hardware, gpus = d.hardware, d.gpus if gpus is None else gpus
        engine = engine or d.engines[0]
    if "," in engine:
        raise QueryError("optimize compares budgets for one engine", fix="give one --engine")
    if block is None and method is not None and method != curve.method:
        # (the curve's block is its own method's: another method's block is not implied by it;
        # "not eagle3 block 16" named a block EAGLE-3 never ran)
        raise other_method_refusal(draws, curve, method, hardware, gpus, engine, model,
                                   acceptance_file is not None)
    method, block = method or curve.method, block or curve.block
    # another drafter's curve: its priors alone would be another drafter's acceptances, but
    # updated with an acceptance file's rows of this method and block they are a prior only
    other_drafter = (method, block) != (curve.method, curve.block)
    if other_drafter and acceptance_file is None:
        raise QueryError(f"the acceptance curve in {curve.path} describes {curve.method} block "
                         f"{curve.block}, not {method} block {block}",
                         fix="pass --acceptance-file with measured acceptances of this drafter, "
                             "or edit [acceptance_curve] (method, block and its priors) in the "
                             "priors file for it, and pass it with --priors")
    probs = P.interval_probs(prob)
    ctx = P.parse_context(context_tokens)
    found = None if acceptance_file is None else read_acceptance_rows(
        acceptance_file, method, block,
        lambda m, k, b: accept_limit(draws, m, k, b))
    # the drafter card the file's rows name, when it prices the question: its trained block,
    # not the default card's, bounds the block (a block-32 drafter's rows at block 16 were
    # refused against a default card trained at block 8); None: the default card's
    target = None if found is None else priced_target(draws, resolve_model(draws, model))
    card, other = rows_card(draws, found, method, target)
    named = None if found is None or card is None or other else found.drafter
    if found is not None and acceptance_file is not None and named is not None:
        rows_block_check(draws, found, acceptance_file, method, block, target)
    scenarios = [P.resolve_scenario(draws, hardware=hardware, gpus=gpus, engine=engine,
                                    method=method, block=block, budget=b, verify_tokens=None,
                                    context_tokens=ctx, model=model,
                                    concurrency=concurrency, kv_cache=kv_cache,
                                    drafter=named, default_only=OPTIMIZE_DRAFTER)
                 for b in budgets]
    if new_deployment:   # (as the question's flag: engine/question.py)
        scenarios = [replace(b_sc, new_deployment=True) for b_sc in scenarios]
    if any(sc.verify_tokens != b + 1 for sc, b in zip(scenarios, budgets, strict=True)):
        raise QueryError(f"{method} is not a tree method: its verify tokens do not follow "
                         "the budget", fix="use --method ddtree")
    # a context far past the measured ones: predict's warning (engine/question.py), first as
    # there (taken before ``model`` below is the acceptance file's)
    context_notes = context_warnings(draws, ctx, model)
    drafter, unpriced = None, []
    if acceptance_file is not None and found is not None and found.drafter is not None:
        # the rows' acceptance is that drafter's: its passes priced with its card, as
        # predict --drafter prices them (the default drafter's step beside another drafter's
        # acceptance was the answer of no drafter); a name no card has (a label, as
        # data/acceptance_reference.csv's "dflash") cannot price one: said; nor can another
        # model's rows' own drafter (another model's rows are used, and warned of), said too
        if named is not None:
            drafter = named
            scenarios = [drafted(draws, sc, drafter, acceptance_file, found.drafter_row, card)
                         for sc in scenarios]
        else:
            unpriced = [unpriced_drafter_note(draws, scenarios[0], found.drafter,
                                              acceptance_file, card)]
    steps, hows = zip(*(shared_step(draws, sc, seed) for sc in scenarios), strict=True)
    step = np.stack(steps, axis=1)                                        # (n, nb)
    n = draws.n_draws
    rng = np.random.default_rng([seed, 7])
    file_model = None   # (whose acceptances the file's rows are: curve_model_warning)
    if acceptance_file is None:
        cd = sample_curve(curve, n, rng)
        anchored = (float(curve.reference_budget), math.inf)
    else:
        assert found is not None
        b_obs, a_obs, file_model = found.budgets, found.values, found.model
        whose = f" of {curve.method} block {curve.block}" if other_drafter else ""
        rows_of = f" {method} block {block}" if other_drafter else ""
        of_drafter = "" if found.drafter is None else f" of drafter {found.drafter}"
        cd = update_curve(curve, b_obs, a_obs, n, rng,
                          source=f"prior{whose} from {curve.path}, updated with {len(b_obs)} "
                                 f"{file_model}{rows_of} row{'s' * (len(b_obs) != 1)}"
                                 f"{of_drafter} of {acceptance_file}")
        anchored = (float(b_obs.min()), float(b_obs.max()))
    # capped per budget at what a step can emit: the scenarios' limits, as predict's
    limits = np.array([sc.limit.tokens for sc in scenarios])
    accept = curve_accept(budgets, cd.accept_ref, cd.gain, cd.decay,
                          reference_budget=curve.reference_budget, limits=limits)
    # no budget faster than reading the weights and caches (engine/ceiling.py), as predict
    rates = np.stack([step_rate(draws, b_sc, step[:, i]) for i, b_sc in enumerate(scenarios)],
                     axis=1)
    tok = accept * rates
    dec = budget_decision(tok)
    # budgets priced faster than reading the experts their tokens touch at balanced routing
    # (predict's row for each: routing_row says whether and with what figures)
    fast = [(budgets[j], routed) for j, b_sc in enumerate(scenarios)
            if (routed := routing_row(rates[:, j], balanced_read(draws, b_sc))) is not None]
    # a system without rows takes its step from the one it is transferred from, whose rows
    # bound it (8 x RTX PRO 6000 Server from rtx-pro-6000x8, at most 4 tokens a step, was
    # held to the 9 of b300x8: budgets 4 and 8 went unflagged); any system's only without one
    behind = rows_behind(draws, scenarios[0])
    all_max = max_verified_anywhere(draws)
    sys_max = behind.max_tokens if behind.measured else None
    ref = behind.transferred_from if behind.max_tokens is not None else None
    limit = all_max if behind.max_tokens is None else behind.max_tokens   # tokens a step, C x M
    rows = []
    for j, sc in enumerate(scenarios):
        row = {"budget": budgets[j], "verify_tokens": sc.verify_tokens,
               "accept": float(np.median(accept[:, j])),
               "accept_lo": float(np.quantile(accept[:, j], (1 - prob) / 2)),
               "accept_hi": float(np.quantile(accept[:, j], (1 + prob) / 2)),
               "accept_max": sc.limit.tokens, "accept_max_rule": sc.limit.rule,
               "step_ms": float(np.median(step[:, j])),
               "tok_s_mean": float(dec["mean"][j])}
        row.update(P.summarize(tok[:, j], probs, None))
        row.update({"p_best": float(dec["p_best"][j]), "regret": float(dec["regret"][j]),
                    "extrapolated": sc.verify_tokens * concurrency > limit,
                    "accept_extrapolated": not anchored[0] <= budgets[j] <= anchored[1]})
        rows.append(row)
    best = int(np.argmax(dec["mean"]))
    sc = scenarios[0]
    # a tree no drafter card serves for the model and the fit never measured: predict warns
    # it and next leaves it out; a recommended budget of it prices a drafter nobody has
    unchanged = new_deployment_warning(draws, sc)   # (the flag changes nothing: said)
    notes = [*drafter_gap_warnings(draws, [(sc.model, sc.method)], drafter=drafter), *unpriced,
             *([] if unchanged is None else [unchanged]),
             *context_notes, *verify_context_warnings(draws, scenarios[-1]),
             *concurrency_notes(draws, sc, concurrency,
                                {b: b_sc.verify_tokens
                                 for b, b_sc in zip(budgets, scenarios, strict=True)}),
             *ar_beats(draws, sc, tok[:, best], budgets[best], concurrency, seed),
             *edge_note(budgets, best, [float(p) for p in dec["p_best"]]),
             *system_context_warnings(draws, sc)]
    # the largest tree's verified tokens past the model's longest context (memory_warnings
    # above checked the smallest's): optimize --budgets 16,500000 priced M = 500,001 of a
    # 262,144-token model without a word
    widest = max(scenarios, key=lambda b_sc: b_sc.verify_tokens)
    if (past := max_context_warning(draws, widest)) is not None and past not in notes:
        # (one line for them all: the memory checks said the smallest budget's alone)
        own = {max_context_warning(draws, b_sc) for b_sc in scenarios}
        notes = [w for w in notes if w not in own]
        notes.append(past_budgets_warning(draws, budgets, scenarios, budgets[best], past))
    routing = budget_routing_warning(fast, budgets[best], f"{sc.hardware} x{sc.gpus}" + (
        f" at C = {concurrency}" if concurrency != 1 else ""))
    if routing is not None:
        notes.append(routing)
    if acceptance_file is None:
        notes += unused_acceptances(draws, sc, block, budgets, accept)
    elif (misfit := misfit_warning(cd, str(acceptance_file), MIN_ESS)) is not None:
        notes.append(misfit)
    return {"fit_id": draws.meta["fit_id"], "draws": n, "seed": seed,
            "scenario": {"hardware": sc.hardware, "gpus": sc.gpus, "engine": sc.engine,
                         "method": sc.method, "block": block, "context_tokens": sc.context_tokens,
                         "system": sc.pair, **({"model": sc.model} if sc.multi else {}),
                         **({"concurrency": concurrency} if concurrency != 1 else {}),
                         **({"drafter": drafter} if drafter is not None else {}),
                         **({"kv_cache": kv_cache} if kv_cache is not None else {}),
                         **({"new_deployment": True} if new_deployment else {})},
            "interval_prob": prob,
            "curve": {"formula": "min(accept_max(B), accept_ref + gain * (1 - decay**d) / "
                                 "(1 - decay)), d = log2(B / reference_budget)",
                      "reference_budget": curve.reference_budget, "priors": curve.describe(),
                      "source": cd.source, "ess": cd.ess, "rows": cd.rows,
                      "acceptance_model": file_model or curve.model,
                      "clipped": cd.clipped,
                      "accept_ref": med90(cd.accept_ref), "gain": med90(cd.gain),
                      "decay": med90(cd.decay),
                      "anchored_budgets": [anchored[0], anchored[1] if math.isfinite(anchored[1])
                                           else None]},
            "overhead_from": hows[0],
            "max_measured_verify_tokens": {
                "system": sys_max, "any_system": all_max,
                "transferred_from": (None if ref is None
                                     else {"system": ref, "tokens": behind.max_tokens}),
                # (the pairs the roofline was learned from bound it: the footnote says so)
                "pair_roofline": (None if not behind.pair_roofline or behind.max_tokens is None
                                  else {"pairs": len(behind.learned_from),
                                        "tokens": behind.max_tokens,
                                        "on": behind.max_tokens_on})},
            "rows": rows, "recommended": budgets[best], "default_scenario": asked,
            "warnings": notes}


def rows_card(draws: Fit, found: AcceptanceRows | None, method: str, target: str | None
              ) -> tuple[DrafterCard | None, bool]:
    """(the drafter card an acceptance file's rows name, whether it is the card of the rows'
    own model, another than the question's ``target``, priced_target's): (None, False) for
    rows naming none (blank: the default card) or a name no card has. A card of the question's
    target prices the question's passes and bounds its block; one of another model's does
    neither."""
    if found is None or found.drafter is None:
        return None, False
    card = named_drafter(draws, found.drafter)   # (priced with it: drafted)
    other = (card is not None and target is not None and serves(card, found.model, method)
             and not serves(card, target, method))
    return card, other


def rows_block_check(draws: Fit, found: AcceptanceRows, path: str | Path, method: str,
                     block: int, target: str | None) -> None:
    """A :class:`DataError` at the acceptance file's first row naming its drafter (the
    ``block`` column) when ``block`` is above the block that drafter's card was trained at:
    the refusal of :func:`~ddtree_bayes.engine.scenario.trained_block_of`, the one rule every
    question's block goes through; the question's scenarios are then resolved with that
    drafter, whose trained block, not the default card's, bounds them (``target``: the
    question's model, priced_target's)."""
    from ddtree_bayes.core.errors import without_fix
    from ddtree_bayes.engine import scenario

    if target is None or found.drafter is None:
        return
    try:
        scenario.trained_block_of(draws, target, method, block, found.drafter)
    except QueryError as err:
        raise DataError(without_fix(err), file=str(path), row=found.drafter_row,
                        column="block", fix=err.fix) from None


def drafted(draws: Fit, sc: P.Scenario, name: str, path: str | Path, row: int | None,
            card: DrafterCard | None = None) -> P.Scenario:
    """``sc`` priced with the drafter card ``name`` that an acceptance file's rows name
    (:func:`~ddtree_bayes.engine.scenario.with_drafter`, as ``predict --drafter``; ``card``:
    the one :func:`rows_card` found, not looked up again); a name it
    refuses (no such card, one of another method or target, a fit of the fraction step) is a
    :class:`DataError` naming the file's first row of it and its drafter column."""
    from ddtree_bayes.core.errors import without_fix
    from ddtree_bayes.engine.scenario import with_drafter

    try:
        return with_drafter(draws, sc, name, card=card)
    except QueryError as err:
        raise DataError(without_fix(err).removeprefix("--drafter: ").replace(
            "--drafter needs", f"drafter {name!r} needs"), file=str(path), row=row,
            column="drafter", fix=err.fix) from None


def unpriced_drafter_note(draws: Fit, sc: P.Scenario, name: str, path: str | Path,
                          of_other=None) -> str:
    """What says that an acceptance file's rows name a drafter (``name``) no drafter card has,
    or (``of_other``, its card) the drafter card of the rows' own model, another than the
    question's, so that the step of every budget is priced with the drafter the fit priced
    for the question's model and method (its default card, or a generic drafter of the
    method)."""
    target = priced_target(draws, sc.model)
    card = default_card(draws, target, sc.method)
    priced = (f"its default card {card.drafter}" if card is not None else
              f"a generic {sc.method} drafter")
    what = ("which is no drafter card" if of_other is None else
            f"a drafter card of {of_other.target_model}, not {target}")
    return (f"the acceptance file's rows ({path}) name the drafter {name!r}, {what}: every "
            f"budget's step is priced with the drafter the fit priced for "
            f"{target or 'the model'}'s {sc.method} ({priced}), not with {name}'s passes"
            + ("; name its card in the drafter column (`ddtree-bayes card add` writes one) to "
               "price them" if of_other is None else ""))


def curve_model_warning(draws: Fit, curve: AcceptanceCurve, out: dict,
                        acceptance_file: str | Path | None = None) -> str | None:
    """What says that ``optimize``'s answer ``out`` took another model's acceptances: the
    curve (``[acceptance_curve]`` in ``curve.path``) was written for a model other than the
    one asked (``out``'s scenario, or the fit's target) and no ``acceptance_file`` replaced
    it, or the file's rows (``out["curve"]["acceptance_model"]``) are another model's. None
    when the curve (the file) names no model or names the one asked (or another deployment
    card of it among the fit's models: :func:`~ddtree_bayes.core.pairs.same_target`).
    ``optimize`` prints it and the report's budget section carries it.

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> from ddtree_bayes.core.acceptance_config import parse_acceptance_curve
    >>> draws = point_mass_draws()
    >>> curve = parse_acceptance_curve(draws.priors_toml, "p.toml")
    >>> out = {"scenario": {"model": "llama-3.1-8b-instruct"}}
    >>> curve_model_warning(draws, curve, out)[:88]
    'the acceptance curve ([acceptance_curve] in p.toml) was written for kimi-k2.6, not llama'
    >>> curve_model_warning(draws, curve, out, "acc.csv") is None   # (its rows' model unknown)
    True
    """
    from ddtree_bayes.core.pairs import same_target
    from ddtree_bayes.engine.target_models import fit_models

    def one_model(a: str, b: str) -> bool:   # (deployment cards of one of the fit's models)
        return same_target(a, b, fit_models(draws))

    asked = out["scenario"].get("model") or draws.meta["model"].get("target_model")
    if acceptance_file is not None:
        rows_of = out.get("curve", {}).get("acceptance_model")
        if not rows_of or not asked or one_model(rows_of, asked):
            return None
        return (f"the acceptance file's rows ({acceptance_file}) are of {rows_of}, not "
                f"{asked}: these acceptances are another model's; pass --acceptance-file "
                "with measured acceptances of this target and drafter")
    if not curve.model or not asked or one_model(curve.model, asked):
        return None
    return (f"the acceptance curve ([acceptance_curve] in {curve.path}) was written for "
            f"{curve.model}, not {asked}: these acceptances are another model's prior; pass "
            "--acceptance-file with this drafter's measured acceptances")


def extrapolated_flags(row: dict) -> str:
    """What an ``optimize`` row extrapolates, as ``optimize`` and the report print it: the
    step (past the measured M), the acceptance (off the curve's anchored budgets), both, or
    nothing (``""``).

    >>> extrapolated_flags({"extrapolated": True, "accept_extrapolated": True})
    'step+accept'
    >>> extrapolated_flags({"extrapolated": False, "accept_extrapolated": False})
    ''
    """
    return "+".join(flag for flag, on in (("step", row["extrapolated"]),
                                          ("accept", row["accept_extrapolated"])) if on)

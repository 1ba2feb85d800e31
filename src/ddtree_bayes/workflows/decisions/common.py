"""What optimize and next share: one overhead/transfer draw stream per unmeasured group, the fit check.

**Shared overhead draws.** ``predictive.step_components`` draws a fresh ``z`` for the
overhead fraction of an unmeasured (system, engine, method) group from the ``rng`` it is
given. Here every scenario is resolved with a generator seeded by (seed, group label)
(:func:`group_rng`), so all budgets of one group, and a candidate and a query in the same
unmeasured group, see the same ``z`` per draw: otherwise measuring one could not inform
the other. Likewise a system without measurements (hardware transfer) gets its transferred
parameters once per (seed, system) (:func:`with_transferred_system`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ddtree_bayes.core import spec as S
from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.posterior import Fit
from ddtree_bayes.engine.structure import group_label

#: Budgets ``optimize`` compares by default: powers of two from 8 to 1024.
DEFAULT_BUDGETS: tuple[int, ...] = tuple(2 ** k for k in range(3, 11))
#: Simulated results per candidate in ``next``.
DEFAULT_K = 32
#: Below this effective sample size a candidate's numbers rest on too few draws.
MIN_ESS = 100.0
#: Budgets of the default DDTree candidates of ``next``.
CANDIDATE_BUDGETS = (8, 32, 128)
#: Concurrencies of the AR candidates a query at C > 1 is offered: a cheap run of many tokens
#: per step, which pins where verifying more turns compute-bound (the compute knee).
CANDIDATE_AR_CONCURRENCIES = (32, 64, 128)
#: Columns of a ``next --candidates`` file.
CANDIDATE_COLUMNS = ("hardware", "gpus", "engine", "method", "block", "budget", "accept_len",
                     "context_tokens")
#: Columns a ``next --candidates`` file may add (blank or absent: the query's model, verify
#: tokens derived from block and budget as a measurement row's, one stream); any other column
#: is refused (a misspelt ``concurency`` was ignored and its candidate ranked at C = 1).
CANDIDATE_OPTIONAL = ("model", "verify_tokens", "concurrency")


# ------------------------------------------------------------------ shared overhead stream
def overhead_group(draws: Fit, sc: P.Scenario) -> str | None:
    """The overhead group whose fraction ``step_components`` uses for ``sc`` (after mapping
    an engine with a declared relation to its base engine); None for autoregressive."""
    return group_label(draws, sc.pair, sc.engine, sc.method)


def group_rng(seed: int, label: str | None) -> np.random.Generator:
    """A generator determined by (seed, overhead group): the same group always gets the
    same stream, different groups independent ones (:func:`~ddtree_bayes.engine.predictive.
    keyed_rng`)."""
    return P.keyed_rng(seed, label or "-")


def with_transferred_system(draws: Fit, sc: P.Scenario, seed: int,
                            rng: np.random.Generator | None = None
                            ) -> tuple[Fit, P.Scenario, str]:
    """For a scenario on a system without measurements (answered by hardware transfer),
    the draws with that system's transferred parameters added as a system column of their
    own, drawn from a stream fixed by (seed, system), and the scenario marked measured.

    Every scenario on that system (any engine, method or budget) then sees the same
    transferred step parameters per draw, and its overhead group the same ``z`` per draw
    (:func:`shared_step`); measured systems pass through unchanged. ``rng``: the stream to
    draw them from instead (``next``: the query's, so its system's parameters are those
    predict drew for the query).
    """
    if getattr(sc, "measured", True):
        return draws, sc, ""
    params, how = P.transferred_parameters(
        draws, sc, group_rng(seed, f"system {sc.pair}") if rng is None else rng)
    variables = dict(draws.variables)
    systems = list(draws.meta["coords"]["system"])
    columns = {"step_ar_ms": params["step_ar_ms"], "moe_share": params["moe_share"],
               "ctx_ms_per_unit": params["ctx_ms_per_unit"],
               S.SHAPE_NAMES[draws.meta["model"]["moe_form"]]: params["moe_shape"]}
    if "tok_ratio" in params:
        columns["compute_tok_ratio"] = params["tok_ratio"]
    if "tp_tok_ms" in params or "tp_tok_ms" in variables:
        # one GPU has no all-reduce volume (0); a fit of single-GPU systems has no column yet
        columns["tp_tok_ms"] = params.get("tp_tok_ms", np.zeros(draws.n_draws))
        if "tp_tok_ms" not in variables:
            variables["tp_tok_ms"] = np.zeros((draws.n_draws, len(systems)))
    if sc.pair in systems:       # a system held out of this fit: replace its column
        j = systems.index(sc.pair)
        for key, col in columns.items():
            if key in variables:
                variables[key] = variables[key].copy()
                variables[key][:, j] = col
    else:
        systems.append(sc.pair)
        for key, col in columns.items():
            if key in variables:
                variables[key] = np.column_stack([variables[key], col])
    meta = {**draws.meta, "coords": {**draws.meta["coords"], "system": systems}}
    # (a view: the parsed stored texts kept, parsed again per step before; the lookups
    # shared with ``draws``, as they always were)
    return (draws.view(meta=meta, variables=variables, memo=draws.memo),
            replace(sc, measured=True), how)


def shared_step(draws: Fit, sc: P.Scenario, seed: int) -> tuple[np.ndarray, str]:
    """Posterior draws of step_ms for ``sc`` (no measurement noise), with the overhead ``z``
    of an unmeasured group shared by every scenario of that group (see :func:`group_rng`)
    and the transferred parameters of an unmeasured system shared by every scenario on it
    (see :func:`with_transferred_system`)."""
    parts, how = shared_components(draws, sc, seed)
    return parts["step"], how


def shared_components(draws: Fit, sc: P.Scenario, seed: int, anchor: bool = True,
                      system_rng: np.random.Generator | None = None,
                      step_rng: np.random.Generator | None = None) -> tuple[dict, str]:
    """:func:`shared_step`'s step terms, with ``log_sd`` (noise and, in the structured form,
    the discrepancy for the distance from the nearest measured configuration). ``anchor``:
    as in :func:`~ddtree_bayes.engine.predictive.step_components` (False: the structural
    step a new measurement's likelihood uses). ``system_rng``: see
    :func:`with_transferred_system`; ``step_rng``: the stream of the group's draws instead
    of :func:`group_rng` (``next``: the query's, for a candidate in the query's group; one
    generator passed as both continues as predict's does, transfer first)."""
    draws, sc, transfer_how = with_transferred_system(draws, sc, seed, system_rng)
    rng = group_rng(seed, overhead_group(draws, sc)) if step_rng is None else step_rng
    parts, how = P.step_components(draws, sc, rng, anchor=anchor)
    return parts, transfer_how + how


def med90(x: np.ndarray) -> list[float]:
    lo, med, hi = np.quantile(x, [0.05, 0.5, 0.95])
    return [float(med), float(lo), float(hi)]

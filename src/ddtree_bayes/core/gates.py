"""The convergence gates on diagnostic rows, and the failures that make draws unusable.

The same gates run at fit time (``engine.inference.diagnose``) and again when an artifact
is read (``engine.store.load_meta`` / ``load_draws``), so a fit written by an older version
with a NaN R-hat marked "converged" is refused too. Every gate fails on a non-finite value:
a NaN compares false with any threshold, so a gate written as ``rhat > 1.01`` alone passes it.
"""

from __future__ import annotations

import math

from ddtree_bayes.core.config import MAX_RHAT, MIN_ESS_BULK

#: Prefixes of the failures whose draws are not a posterior at all: such an attempt is never
#: saved (``api.fit`` raises instead), and ``store.load_draws`` refuses an artifact holding them.
UNUSABLE_DRAWS = ("no draws", "non-finite draws", "non-finite log-density")


def names(labels: list[str], most: int = 3) -> str:
    """``a, b, c and 4 more``: the first ``most`` labels of a failure."""
    shown = ", ".join(labels[:most])
    return shown + (f" and {len(labels) - most} more" if len(labels) > most else "")


def _finite(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


#: The statistics :func:`nonfinite_failures` checks, and how a failure names each.
STATISTICS = {"mean": "posterior mean", "rhat": "R-hat", "ess_bulk": "bulk ESS",
              "ess_tail": "tail ESS"}


def nonfinite_failures(rows: list[dict], keys=tuple(STATISTICS)) -> list[str]:
    """The gates of :func:`row_failures` that a non-finite (or missing) posterior mean,
    R-hat, bulk or tail ESS fails (``keys``: those of :data:`STATISTICS` checked), one
    failure per statistic naming its parameters."""
    failures = []
    for key in keys:
        what = STATISTICS[key]
        bad = [str(r.get("parameter")) for r in rows if not _finite(r.get(key))]
        if bad:
            failures.append(f"non-finite {what} ({names(bad)})")
    return failures


def row_failures(rows: list[dict]) -> list[str]:
    """The R-hat and bulk-ESS gates on diagnostic rows (``parameter``, ``rhat``,
    ``ess_bulk``, ``ess_tail``, ``mean``). A non-finite (or missing) value fails, naming its
    parameters; the thresholds apply to the finite ones.

    >>> row_failures([{"parameter": "a", "mean": 1.0, "rhat": 1.0, "ess_bulk": 900.0,
    ...                "ess_tail": 800.0}])
    []
    >>> row_failures([{"parameter": "a", "mean": 1.0, "rhat": float("nan"), "ess_bulk": 900.0,
    ...                "ess_tail": 800.0}])
    ['non-finite R-hat (a)']
    """
    return nonfinite_failures(rows) + threshold_failures(rows)


#: How far (relative) R-hat and bulk ESS re-derived from a fit's draws (:func:`rederived_rows`)
#: may pass the thresholds before they fail. A fit diagnosed since core.convergence stores the
#: very numbers re-derived (one function, arviz-stats' to the bit); a fit diagnosed by another
#: arviz-stats version may be a rounding apart, and one its stored diagnostics pass at the
#: threshold is no edit.
REDERIVED_SLACK = 1e-9


def threshold_failures(rows: list[dict], slack: float = 0.0) -> list[str]:
    """The R-hat and bulk-ESS thresholds of :func:`row_failures`, on the rows whose value is
    finite (``slack``: relative, past the thresholds, still passing)."""
    failures = []
    finite = [r for r in rows if _finite(r.get("rhat"))]
    if finite:
        worst_rhat = max(finite, key=lambda r: r["rhat"])
        if worst_rhat["rhat"] > MAX_RHAT * (1 + slack):
            failures.append(f"max R-hat {worst_rhat['rhat']:.3f} > {MAX_RHAT} "
                            f"({worst_rhat['parameter']})")
    finite = [r for r in rows if _finite(r.get("ess_bulk"))]
    if finite:
        worst_ess = min(finite, key=lambda r: r["ess_bulk"])
        if worst_ess["ess_bulk"] < MIN_ESS_BULK * (1 - slack):
            failures.append(f"min bulk ESS {worst_ess['ess_bulk']:.0f} < {MIN_ESS_BULK} "
                            f"({worst_ess['parameter']})")
    return failures


def element_labels(coords: list[list[str]]) -> list[str]:
    """The labels of a variable's elements in the order its draws flatten them (C order over
    its dimensions after (chain, draw)), each element by all its coordinates: what
    ``engine.inference.diagnose`` writes inside ``name[...]`` and a stored fit's checks look
    up (:func:`rederived_rows`, engine/store ``_check_means``).

    >>> element_labels([["h100", "b300"]])
    ['h100', 'b300']
    >>> element_labels([["h100", "b300"], ["sglang", "vllm"]])
    ['h100, sglang', 'h100, vllm', 'b300, sglang', 'b300, vllm']
    """
    import itertools

    return [", ".join(lab) for lab in itertools.product(*([str(x) for x in c] for c in coords))]


def rederived_rows(variables: dict, chains: int,
                   labels: dict[str, list[str]] | None = None) -> list[dict]:
    """R-hat (rank-normalised split R-hat, bulk and folded) and bulk ESS of every
    non-constant scalar element of ``variables`` (name: draws flattened over (chain, draw),
    ``chains`` chains of equal length), as ``engine.inference.diagnose`` computes them (the same
    function, :func:`ddtree_bayes.core.convergence.summaries`, all elements at once:
    arviz-stats' numbers to the bit), named as it names them (``name`` or ``name[label]``:
    ``labels`` names a variable's elements, :func:`element_labels`, else the position itself).
    For :func:`row_failures`, on the draws a stored fit holds, at load time."""
    import numpy as np

    from ddtree_bayes.core import convergence

    columns, labels_of = [], []
    for name, values in variables.items():
        flat = np.asarray(values, dtype=float)
        flat = flat.reshape(flat.shape[0], -1)
        if flat.shape[0] % chains or flat.shape[0] // chains < 4:
            continue
        names = (labels or {}).get(name)
        for j in range(flat.shape[1]):
            if np.ptp(flat[:, j]) == 0:
                continue   # (a constant: diagnose leaves it out)
            columns.append(flat[:, j])
            labels_of.append(name if not (flat.shape[1] > 1 or np.ndim(values) > 1) else
                             f"{name}[{names[j] if names and len(names) == flat.shape[1] else j}]")
    if not columns:
        return []
    n_draw = len(columns[0]) // chains
    draws = np.stack(columns, axis=1).reshape(chains, n_draw, len(columns))
    stats = convergence.summaries(draws, statistics=("rhat", "ess_bulk"))
    return [{"parameter": label, "rhat": float(stats["rhat"][j]),
             "ess_bulk": float(stats["ess_bulk"][j])} for j, label in enumerate(labels_of)]

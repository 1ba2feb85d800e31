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


def nonfinite_failures(rows: list[dict]) -> list[str]:
    """The gates of :func:`row_failures` that a non-finite (or missing) posterior mean,
    R-hat, bulk or tail ESS fails, one failure per statistic naming its parameters."""
    failures = []
    for key, what in (("mean", "posterior mean"), ("rhat", "R-hat"), ("ess_bulk", "bulk ESS"),
                      ("ess_tail", "tail ESS")):
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
    failures = nonfinite_failures(rows)
    finite = [r for r in rows if _finite(r.get("rhat"))]
    if finite:
        worst_rhat = max(finite, key=lambda r: r["rhat"])
        if worst_rhat["rhat"] > MAX_RHAT:
            failures.append(f"max R-hat {worst_rhat['rhat']:.3f} > {MAX_RHAT} "
                            f"({worst_rhat['parameter']})")
    finite = [r for r in rows if _finite(r.get("ess_bulk"))]
    if finite:
        worst_ess = min(finite, key=lambda r: r["ess_bulk"])
        if worst_ess["ess_bulk"] < MIN_ESS_BULK:
            failures.append(f"min bulk ESS {worst_ess['ess_bulk']:.0f} < {MIN_ESS_BULK} "
                            f"({worst_ess['parameter']})")
    return failures

"""What is new since a fit (row matching in both directions) and how surprising each new row is
(its posterior predictive percentile)."""
from __future__ import annotations

import math
from collections import Counter
from typing import Any

from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core.data import (
    Measurement,
    Measurements,
)
from ddtree_bayes.core.errors import QueryError, without_fix
from ddtree_bayes.core.normal import cdf as normal_cdf
from ddtree_bayes.workflows.living.records import (
    SURPRISE_HI,
    SURPRISE_LO,
    describe_config,
    describe_row,
)


# ---------------------------------------------------------------- what is new since a fit
def changed_rows(stored: Measurements, current: Measurements
                 ) -> tuple[list[Measurement], list[Measurement]]:
    """(rows of ``current`` not in ``stored``, rows of ``stored`` no longer in ``current``),
    matched by what a fit reads of them (core/data.py ``Measurement.fitted_key``: their
    notes and sources left out), not by row number: a hand-edited row counts as one removed
    and one added, a row whose notes alone were edited as neither."""
    def unmatched(rows, others) -> list[Measurement]:
        """Rows of ``rows`` left over after pairing each with an equal row of ``others``."""
        left = Counter(m.fitted_key() for m in others)
        out = []
        for m in rows:
            k = m.fitted_key()
            if left[k]:
                left[k] -= 1
            else:
                out.append(m)
        return out

    return unmatched(current.rows, stored.rows), unmatched(stored.rows, current.rows)


def score_rows(draws, rows: list[Measurement], seed: int) -> list[dict]:
    """Each measurement against the fit's posterior predictive (including its noise).

    ``percentile`` is P(predicted tok/s < measured), computed exactly per draw from the
    log-normal noise (not by counting 4000 samples, so 1e-6 is not rounded to 0);
    ``status`` is ``ok``, ``surprise`` (outside the 1st-99th percentile) or
    ``unpredictable`` (the fit cannot answer: e.g. a GPU missing from the hardware table
    stored in the fit, or another model; ``reason`` says why). ``transferred`` marks a row
    of a system the fit has no measurement of, predicted by hardware transfer from a
    measured one (``overhead_from`` says which).
    """
    import numpy as np

    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine import target_models
    from ddtree_bayes.engine.ceiling import capped, read_ceiling

    # a fit of several models scores a row of another model from its card (the pair roofline)
    multi = target_models.is_multi(draws)
    fit_model = None if multi else draws.meta.get("model", {}).get("target_model")
    out = []
    for m in rows:
        base: dict[str, Any] = {
            **({"model": m.model} if multi else {}),
            "row": m.row, "system": m.system, "engine": m.engine, "method": m.method,
            "block": m.block, "budget": m.budget, "verify_tokens": m.verify_tokens,
            "context_tokens": m.context_tokens, "accept_len": m.accept_len, "measured": m.tok_s,
            "source": m.source, "notes": m.notes, "concurrency": m.concurrency,
            "drafter": m.drafter,
            "configuration": (f"{m.model} " if multi else "") + describe_config(m),
            "description": describe_row(m)}
        if fit_model and m.model != fit_model:
            out.append({**base, "status": "unpredictable",
                        "reason": f"fit {draws.meta['fit_id']} is of {fit_model}, this row of "
                                  f"{m.model}"})
            continue
        try:
            sc = P.row_scenario(draws, m)
            # predict's generator for this configuration (keyed by the question, not by the
            # row's place among the new ones): its step and noise draws are predict's, so
            # the row's predicted figures are `predict`'s for the same flags and seed (a C = 4
            # row was scored at 1760 where predict's total said 1770)
            rng = P.keyed_rng(seed, P.scenario_key(sc))
            parts, how = P.step_components(draws, sc, rng)
        except QueryError as err:
            out.append({**base, "status": "unpredictable", "reason": without_fix(err)})
            continue
        # the likelihood's sd for this row: noise, plus the structured form's discrepancy
        sd = np.asarray(parts["log_sd"], dtype=float)
        # a row without accept_len: its inferred acceptance group's posterior (or the prior),
        # from a generator of its own (predict draws acceptance apart from the step), keyed by
        # the configuration as predict's (P.scenario_key: its rows at several contexts and
        # concurrencies share it, as the model's acceptance does not depend on them)
        # (a row at C > 1 measures the C streams' total)
        accept = P.row_acceptance(draws, m, P.keyed_rng(seed, f"{P.scenario_key(sc)} accept"))
        log_mu = np.log(accept * 1000.0 * m.concurrency / parts["step"])
        diff = math.log(m.tok_s) - log_mu
        # a Student-t fit scores with predict's split of the noise (P.noise_parts)
        normal, heavy, nu = P.noise_parts(draws, sc, sd)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = diff / np.where(sd > 0, sd, 1.0)
            cdf = np.where(sd > 0, normal_cdf(z) if nu is None else
                           C.split_cdf(diff, np.where(sd > 0, normal, 1.0), heavy, nu),
                           (diff > 0) + 0.5 * (diff == 0))
        pct = float(np.mean(cdf))
        # predict's arithmetic, draw by draw: C x accept x 1000 / step x exp(sd x noise), no
        # faster than the read of the weights and caches (engine/ceiling.py); the percentile
        # above is the likelihood's, without it
        samples = m.concurrency * accept * capped(
            1000.0 / parts["step"] * np.exp(sd * P.predictive_noise(draws, sc, sd, rng)),
            read_ceiling(draws, sc))
        summary = P.summarize(samples, (0.5, 0.9), None)
        status = "surprise" if pct < SURPRISE_LO or pct > SURPRISE_HI else "ok"
        out.append({**base, **summary, "percentile": pct, "status": status,
                    "transferred": not getattr(sc, "measured", True), "overhead_from": how})
    return out


def format_percentile(p: float) -> str:
    """``38.2%``; the tails as ``<0.1%`` / ``>99.9%``."""
    if p < 0.001:
        return "<0.1%"
    if p > 0.999:
        return ">99.9%"
    return f"{p * 100:.1f}%"

"""The data of the refittable model (``build_model(..., refittable=True)``) for a validation
fold or a simulated data set: the configurations' sufficient statistics with some rows held
out, and in the structured form the distances of the configurations still measured."""

from __future__ import annotations

import numpy as np


def refit_data(spec, weights: np.ndarray, observed: np.ndarray | None = None) -> dict:
    """The refittable model's data for row ``weights`` (0 = held out) and per-row observed
    log tok/s (default: the file's): each configuration's n, zbar and S2 recomputed from its
    rows (a configuration whose only row is held out gets n = 0), and in the structured form
    the distances and masks of the configurations still measured."""
    from ddtree_bayes.core import likelihood as C
    from ddtree_bayes.core import spec as S

    weights = np.asarray(weights, dtype=float)
    log_tok = spec.log_tok_s if observed is None else np.asarray(observed, dtype=float)
    n, zbar, s2 = C.sufficient_stats(spec.row_config, log_tok - spec.row_offset,
                                     len(spec.configs), weights)
    updates = {"config_n": n, "config_zbar": zbar, "config_s2": s2}
    if spec.step_form == "structured":   # held-out rows are not measured configurations
        structure = S.training_structure(spec, weights)
        if not spec.groups:
            structure = {"config_distance": structure["config_distance"]}
        updates.update(structure)
    return updates

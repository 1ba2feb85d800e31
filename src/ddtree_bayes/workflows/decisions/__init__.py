"""Decisions from the posterior: the best tree budget (``optimize``) and the most informative
next measurement (``next``).

``acceptance_curve``  acceptance as a function of the tree budget: prior, draws, conjugate update
``common``            shared overhead draws per unmeasured group, fit checks
``optimize``          the best tree budget: P(best), expected regret
``next_measurement``  preposterior importance reweighting over candidate measurements
"""

from __future__ import annotations

from ddtree_bayes.workflows.decisions.acceptance_curve import (  # noqa: F401
    CurveDraws,
    acceptance_curve_for,
    curve_accept,
    curve_for,
    curve_limits,
    curve_priors_file,
    doublings,
    read_acceptance_file,
    read_acceptance_rows,
    read_curve,
    sample_curve,
    sample_prior,
    update_curve,
)
from ddtree_bayes.workflows.decisions.common import (  # noqa: F401
    CANDIDATE_BUDGETS,
    CANDIDATE_COLUMNS,
    CANDIDATE_OPTIONAL,
    DEFAULT_BUDGETS,
    DEFAULT_K,
    MIN_ESS,
    group_rng,
    med90,
    overhead_group,
    shared_components,
    shared_step,
    with_transferred_system,
)
from ddtree_bayes.workflows.decisions.next_measurement import (  # noqa: F401
    Candidate,
    Query,
    default_candidates,
    next_measurements,
    parse_query,
    preposterior,
    query_acceptance,
    read_candidates,
    weighted_interval,
)
from ddtree_bayes.workflows.decisions.optimize import (  # noqa: F401
    budget_decision,
    max_verified_anywhere,
    optimize,
    parse_budgets,
)

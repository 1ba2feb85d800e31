"""The report of one fit: compute a summary (numbers) first, render it second.

``priors``   the priors as numpy: densities, draws, scalar columns (prior vs posterior)
``summary``  fit -> summary dict (diagnostics, LOO, sensitivity, fan, variance shares, decisions)
``sections`` the default scenario's sections: fan, variance shares, breakdown, decisions
``render``   summary -> index.html, summary.md, summary.json
``figures``  the pictures (the only module importing matplotlib / arviz-plots)
"""

from __future__ import annotations

from ddtree_bayes.workflows.report.priors import (  # noqa: F401
    fit_priors,
    log_prior,
    prior_draws,
    prior_logpdf,
    scalar_columns,
)
from ddtree_bayes.workflows.report.render import (  # noqa: F401
    CAPTIONS,
    STYLE,
    markdown,
    page,
    render,
    write_report,
)
from ddtree_bayes.workflows.report.sections import (  # noqa: F401
    DECOMP_ACCEPT,
    FAN_ACCEPT,
    NEXT_QUERY,
    decisions_section,
    fan_accept,
    fan_section,
    headline_log_tok,
    quantiles5,
    shapley_variance_shares,
    step_breakdown,
    variance_shares,
)
from ddtree_bayes.workflows.report.summary import (  # noqa: F401
    INFORMED_RATIO,
    PARETO_K_LIMIT,
    PRIOR_ONLY_RATIO,
    compute,
)

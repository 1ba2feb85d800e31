"""The living posterior: new measurements in, nothing lost.

``records``   add rows to the measurement file: locking, atomic writes, all-or-nothing validation
``scoring``   which rows are new since a fit, and how surprising each is under it
``tracking``  tracked queries (models/tracked.json) and their before/after on update
``history``   the fits on disk, and parameter tables to diff two of them
"""

from __future__ import annotations

from ddtree_bayes.core.errors import without_fix  # noqa: F401  (cli/history.py quotes an error)
from ddtree_bayes.workflows.living.fit_history import (  # noqa: F401
    list_fits,
    parameter_table,
    scalar_parameters,
    stored_rows,
    unlike_models,
)
from ddtree_bayes.workflows.living.records import (  # noqa: F401
    DEFAULT_QUERY,
    LOCK_TIMEOUT_S,
    SURPRISE_HI,
    SURPRISE_LO,
    TRACKED_FILE,
    Appended,
    LockTimeout,
    NewRow,
    RowErrors,
    SurpriseError,
    append_rows,
    describe_config,
    describe_row,
    exclusive_lock,
    lock_path,
    row_key,
    rows_from_file,
    write_text_atomically,
)
from ddtree_bayes.workflows.living.scoring import (  # noqa: F401
    changed_rows,
    format_percentile,
    score_rows,
)
from ddtree_bayes.workflows.living.tracking import (  # noqa: F401
    QUERY_KEYS,
    Tracked,
    check_accept_limit,
    compare_queries,
    describe_tracked,
    for_models,
    format_change,
    load_tracked,
    normalize_query,
    query_flags,
    query_name,
    query_rows,
    row_label,
    track_add,
    track_remove,
    tracked_path,
    unlike_models_line,
)

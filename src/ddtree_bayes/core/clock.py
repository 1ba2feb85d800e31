"""The time a fit is stamped with: now, or a reproducible clock.

With ``SOURCE_DATE_EPOCH`` set (the reproducible-builds convention: seconds since 1970 UTC),
fit ids and creation times are that time plus one second per fit already saved in the
``models/fits`` folder, so the same commands give the same fit ids and dates in the same
order (``scripts/docs_examples.py`` runs the documentation's examples that way).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path


def utc_now(models: Path | None = None) -> datetime:
    """The current UTC time, or the reproducible clock (see the module docstring).

    >>> os.environ["SOURCE_DATE_EPOCH"] = "1764547200"
    >>> utc_now().isoformat()
    '2025-12-01T00:00:00+00:00'
    >>> del os.environ["SOURCE_DATE_EPOCH"]
    """
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch.isdigit():
        return datetime.now(UTC)
    saved = len(list((models / "fits").glob("*.nc"))) if models is not None else 0
    return datetime.fromtimestamp(int(epoch) + saved, UTC)

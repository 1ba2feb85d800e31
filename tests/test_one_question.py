"""One question, one number, whichever command asks it (trust review round 14).

The same configuration, seed and fit asked through ``predict`` (table, ``--format json`` and
``csv``, ``--explain``, ``--concurrency``), ``next --query`` (its "now"), ``track add`` (its
"now"), ``report`` (its default question) and the Python API gives the same median and
intervals; each output is consistent in itself (lo90 <= lo50 <= median <= hi50 <= hi90, total =
per user x C on the same draws, probabilities in [0, 1]); and the ``original +-30%`` column is
the seed estimate table's own figure where the configuration and acceptance are a row of it.
"""

from __future__ import annotations

import pytest

from ddtree_bayes.engine import predictive as P
from ddtree_bayes.engine.testing import point_mass_draws

# ---------------------------------------------------------------- the original +-30% column
#: data/seed_estimates.csv's deterministic rows (B300 x8, DDTree block 16 budget 32, M = 33):
#: (engine, accept) -> the tok/s the original estimate quoted.
SEED_ROWS = {("sglang", 12.0): 570.0, ("sglang", 16.0): 765.0,
             ("native", 12.0): 815.0, ("native", 16.0): 1090.0}


def test_original_column_quotes_the_seed_table_at_its_own_rows():
    """At accept 12 the original estimate said 570 tok/s (+-30%: 399-741); predict printed
    572 (400-743), accept / the mean step of the table's two rows (12/570 and 16/765 ms per
    token, 21.05 and 20.92 ms per step: the quoted figures are rounded to 5 tok/s), and 762
    for its 765, 816 for 815, 1088 for 1090. A row of the table is quoted as it is; an
    acceptance between them (14, U(12,16)'s mean 14) keeps accept / the mean step."""
    rows = P.predict(point_mass_draws(), accept="12,14,16", engines=["sglang", "native"])
    got = {(r["engine"], float(r["accept"])): r for r in rows}
    for key, tok in SEED_ROWS.items():
        assert got[key]["original"] == pytest.approx(tok, abs=1e-9), key
        assert got[key]["original_lo"] == pytest.approx(tok * 0.7, abs=1e-9)
        assert got[key]["original_hi"] == pytest.approx(tok * 1.3, abs=1e-9)
    step = (12 / 570 + 16 / 765) / 2 * 1000   # ms per step, the mean of the two rows'
    assert got[("sglang", 14.0)]["original"] == pytest.approx(14 / step * 1000)
    native_step = (12 / 815 + 16 / 1090) / 2 * 1000
    assert got[("native", 14.0)]["original"] == pytest.approx(14 / native_step * 1000)

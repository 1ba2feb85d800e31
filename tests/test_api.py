"""The notebook API: fit -> load -> predict returns a tidy DataFrame."""

import pandas as pd
import pytest


def test_api_predict_returns_a_tidy_frame(fitted_workdir):
    import ddtree_bayes as db

    work, result = fitted_workdir
    draws = db.load(workdir=work)
    assert draws.meta["fit_id"] == result.fit_id and draws.n_draws == 4000
    table = db.predict(draws, accept="12:16", target=800, workdir=work)
    assert isinstance(table, pd.DataFrame)
    assert len(table) == 12
    assert {"engine", "accept", "median", "lo50", "hi50", "lo90", "hi90", "p_ge_target",
            "original"} <= set(table.columns)
    assert table["p_ge_target"].between(0, 1).all()
    assert (table["lo90"] < table["median"]).all() and (table["median"] < table["hi90"]).all()
    # the same numbers through the latest-fit shortcut
    again = db.predict(accept="12:16", target=800, workdir=work)
    pd.testing.assert_frame_equal(table, again)


def test_api_fit_validates_before_sampling(tmp_path):
    import ddtree_bayes as db
    from ddtree_bayes.core.errors import DataError

    bad = tmp_path / "m.csv"
    bad.write_text("model,hardware\n")
    with pytest.raises(DataError, match="missing column"):
        db.fit(bad, workdir=tmp_path, progress=False)
    assert not (tmp_path / "models").exists()

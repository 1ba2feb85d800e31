"""`history` names each fit's model form when the fits on disk hold more than one.

docs/howto/trust.md has a user fit the earlier form (`fit --moe-form power --step-form
fraction`) beside the default one to `compare` them. Both fits of the bundled data get the same
id suffix (the data's hash), and `history` listed them with nothing to tell which is which,
although the newer one is now the latest that a plain `predict` answers from."""
from __future__ import annotations

import argparse
from pathlib import Path


def _meta(fit_id: str, moe: str, step: str) -> dict:
    return {"fit_id": fit_id, "created_utc": f"2026-12-01T00:00:0{fit_id[-1]}Z",
            "data": {"sha256": "ab" * 32, "rows": 9}, "converged": True, "failures": [],
            "seed": 1, "sampler": {}, "timings": {"total_s": 1.0}, "update": None,
            "made_by": None, "reweight": None,
            "model": {"moe_form": moe, "step_form": step}}


def _history(monkeypatch, tmp_path, capsys, metas: list[dict]) -> tuple[list[dict], list[str]]:
    from ddtree_bayes.cli import history
    from ddtree_bayes.engine import store
    from ddtree_bayes.workflows import living

    paths = {tmp_path / f"{m['fit_id']}.nc": m for m in metas}
    monkeypatch.setattr(store, "fit_files", lambda models: list(paths))
    monkeypatch.setattr(store, "load_meta", lambda path: paths[Path(path)])
    monkeypatch.setattr(store, "resolve", lambda models, *a: list(paths)[-1])
    monkeypatch.chdir(tmp_path)
    rows = living.list_fits(tmp_path)
    assert history.cmd_history(argparse.Namespace(format="table")) == 0
    lines = capsys.readouterr().out.splitlines()
    return rows, lines


def test_history_names_the_form_of_each_fit_when_the_forms_differ(monkeypatch, tmp_path, capsys):
    rows, lines = _history(monkeypatch, tmp_path, capsys,
                           [_meta("20261201T000000Z-3bd953e0", "roofline", "structured"),
                            _meta("20261201T000001Z-3bd953e0", "power", "fraction")])
    assert [r["form"] for r in rows] == ["roofline/structured", "power/fraction"]
    first = next(ln for ln in lines if ln.startswith("20261201T000000Z"))
    second = next(ln for ln in lines if ln.startswith("20261201T000001Z"))
    assert first.rstrip().endswith("roofline/structured form")
    assert second.rstrip().endswith("latest, power/fraction form")


def test_history_says_nothing_of_the_form_when_all_fits_share_it(monkeypatch, tmp_path, capsys):
    rows, lines = _history(monkeypatch, tmp_path, capsys,
                           [_meta("20261201T000000Z-3bd953e0", "roofline", "structured"),
                            _meta("20261201T000001Z-3bd953e0", "roofline", "structured")])
    assert {r["form"] for r in rows} == {"roofline/structured"}
    assert not any("form" in ln for ln in lines)
    assert lines[-1].rstrip().endswith("latest")

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


def test_history_says_which_file_is_a_copy_of_another_fit(tmp_path):
    """A fit file copied under another name (`cp models/fits/<id>.nc models/fits/backup.nc`)
    was listed twice under its inner id, the two rows alike in every column: nothing said
    which was the copy, nor that `--fit backup` reads it. Each file is still one row (the
    JSON's path names it); a file whose name is not its id says so in its notes, a copy of
    another listed file's id as a copy."""
    import shutil

    from test_cli_support import FIT_ID, make_point_mass_workdir, run_cli

    work = make_point_mass_workdir(tmp_path / "w")
    fits = work / "models" / "fits"
    shutil.copy(fits / f"{FIT_ID}.nc", fits / "backup.nc")
    code, out, err = run_cli(work, "history")
    assert code == 0, err
    rows = [ln for ln in out.splitlines() if ln.startswith(FIT_ID)]
    assert len(rows) == 2
    assert sorted(ln.split("  ")[-1].strip() for ln in rows) == [
        f"a copy of {FIT_ID} in file backup.nc (--fit backup)", "latest"]
    code, out, err = run_cli(work, "predict", "--fit", "backup", "--accept", "14")
    assert code == 0 and f"fit {FIT_ID}" in out, err
    # the original renamed away: no copy, but its file is not its id
    (fits / f"{FIT_ID}.nc").unlink()
    code, out, err = run_cli(work, "history")
    assert code == 0, err
    rows = [ln for ln in out.splitlines() if ln.startswith(FIT_ID)]
    assert [ln.split("  ")[-1].strip() for ln in rows] == ["in file backup.nc (--fit backup)"]

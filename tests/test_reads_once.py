"""Each input file is read once per command: one ``predict --hardware h200 --format json``
and one ``fit`` open the priors, the hardware tables, the model cards and the data at most
once each (issue 19: predict parsed the priors about ten times and the hardware table five;
a fit read the hardware file three times)."""

from __future__ import annotations

import builtins
import contextlib
import io
import shutil
from collections import Counter
from pathlib import Path

import pytest

from ddtree_bayes.core.paths import bundled
from test_cli_support import copy_bundled_data, make_point_mass_workdir, run_cli

#: Inputs by their file name (the built-in and the user's hardware table share one: both
#: counted, each at most once).
INPUTS = ("priors.toml", "hardware.csv", "models.csv", "measurements.csv", "seed_estimates.csv")


@contextlib.contextmanager
def counting_opens():
    """Count every open of a file for reading, by resolved path."""
    opened: Counter[Path] = Counter()
    real_open, real_io_open = builtins.open, io.open

    def counted(real):
        def opener(file, mode="r", *args, **kwargs):
            if isinstance(file, str | Path) and "r" in mode and "+" not in mode:
                opened[Path(file).resolve()] += 1
            return real(file, mode, *args, **kwargs)
        return opener

    builtins.open, io.open = counted(real_open), counted(real_io_open)
    try:
        yield opened
    finally:
        builtins.open, io.open = real_open, real_io_open


def reads(opened: Counter[Path]) -> dict[str, int]:
    """Opens per input file (paths shown relative to their folder)."""
    return {f"{p.parent.name}/{p.name}": n for p, n in opened.items() if p.name in INPUTS}


def test_one_predict_reads_each_input_once(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    with counting_opens() as opened:
        code, out, err = run_cli(work, "predict", "--hardware", "h200", "--accept", "14",
                                 "--format", "json")
    assert code == 0, err
    counts = reads(opened)
    assert counts and all(n == 1 for n in counts.values()), counts
    # the fit stores the texts it was made on: predict reads the current data, priors and
    # hardware tables only to warn when they changed (h200's row comes from the fit), and the
    # model cards when the fit stores cards (this point-mass fit stores none)
    assert {"data/measurements.csv", "models/priors.toml", "data/seed_estimates.csv",
            "_bundled/hardware.csv"} <= set(counts) <= {
        "data/measurements.csv", "models/priors.toml", "data/seed_estimates.csv",
        "_bundled/hardware.csv", "data/hardware.csv", "data/models.csv",
        "_bundled/models.csv"}, counts


@pytest.mark.nuts
def test_one_fit_reads_each_input_once(tmp_path, monkeypatch):
    """... and parses the measurement text once: reading its artifact back, the fit parsed
    the stored copy of the text it had just validated (a 100,000-row file: a second)."""
    work = copy_bundled_data(tmp_path / "w")
    (work / "models").mkdir()
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    with counting_opens() as opened, counting_inputs(monkeypatch) as parsed:
        code, out, err = run_cli(work, "fit", "--chains", "1", "--draws", "30", "--tune", "30",
                                 "--no-remedy", "--quiet", "--format", "json")
    assert code in (0, 5), err   # (30 draws may not pass the gates: the reads are the point)
    counts = reads(opened)
    assert all(n == 1 for n in counts.values()), counts
    assert {"data/measurements.csv", "models/priors.toml", "data/hardware.csv",
            "_bundled/hardware.csv", "_bundled/models.csv"} <= set(counts), counts
    text = (work / "data" / "measurements.csv").read_text()
    assert sum(n for (_, t), n in parsed.items() if t == text) == 1, parsed.values()


@contextlib.contextmanager
def counting_parses(monkeypatch):
    """Count every CSV parse (``csv.reader``, which ``csv.DictReader`` calls too) of an
    in-memory text and every ``tomllib.loads``, by the text parsed."""
    import csv
    import tomllib

    parsed: Counter[tuple[str, str]] = Counter()
    real_reader, real_loads = csv.reader, tomllib.loads

    def reader(f, *args, **kwargs):
        if isinstance(f, io.StringIO):
            parsed["csv", f.getvalue()] += 1
        return real_reader(f, *args, **kwargs)

    def loads(text, *args, **kwargs):
        parsed["toml", text] += 1
        return real_loads(text, *args, **kwargs)

    monkeypatch.setattr(csv, "reader", reader)
    monkeypatch.setattr(tomllib, "loads", loads)
    yield parsed


@pytest.mark.parametrize("kind, field", [("csv", "data_csv"), ("toml", "priors_toml")])
def test_one_predict_parses_the_stored_texts_once(tmp_path, monkeypatch, kind, field):
    """The measurement text and the priors TOML a fit stores are each parsed once per predict
    (the measurements were parsed five times: once validated, and four times more for the
    engine, method, model and hardware names the fit knows, where a 100,000-row file takes a
    second to parse; the priors twice: for the priors, and again for their [methods] table)."""
    from ddtree_bayes.engine.store import load

    work = make_point_mass_workdir(tmp_path / "w")
    stored = load(workdir=work)
    with counting_parses(monkeypatch) as parsed:
        code, out, err = run_cli(work, "predict", "--accept", "12:16", "--format", "json")
    assert code == 0, err
    assert parsed[kind, getattr(stored, field)] == 1


def test_the_hardware_tables_are_parsed_once_each(tmp_path, monkeypatch):
    """hardware_table parses the built-in table and the user's once each (it parsed each
    twice: once for its header, once more to validate it)."""
    from ddtree_bayes.core import data as D
    from ddtree_bayes.core.hardware_table import hardware_table

    work = copy_bundled_data(tmp_path / "w")
    parsed: Counter[str] = Counter()
    real = D.read_csv_file

    def read_csv_file(path, *args, **kwargs):
        parsed[Path(path).parent.name] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(D, "read_csv_file", read_csv_file)
    table = hardware_table(work)
    assert table.rows["b300"]["mem_bw_tb_s"] == "8.0"
    assert dict(parsed) == {"_bundled": 1, "data": 1}


def test_the_names_a_fit_knows_are_read_once_per_fit(tmp_path, monkeypatch):
    """Every question checks its names against the fit's (engine/names.py): the names are
    read once per fit, not once per question (``report`` asks about 60 questions of one fit
    and parsed the stored hardware table once per question)."""
    from ddtree_bayes.engine import names as N
    from ddtree_bayes.engine.store import load

    work = make_point_mass_workdir(tmp_path / "w")
    with counting_parses(monkeypatch) as parsed:
        fit = load(workdir=work)   # (which reads the stored measurements, and so the table)
        first = N.unknown_names(fit, hardware="b30", engines=["sglang"])
        again = N.unknown_names(fit, hardware="b30", engines=["sglang"])
    assert [(u.kind, u.name, u.suggestions) for u in first] == [("hardware", "b30", ("b300", "gb300"))]
    assert [(u.kind, u.name, u.suggestions) for u in again] == [("hardware", "b30", ("b300", "gb300"))]
    assert parsed["csv", fit.hardware_csv] == 1


def test_the_seed_table_is_parsed_once_until_it_changes(tmp_path, monkeypatch):
    """The original estimates (data/seed_estimates.csv) are parsed once per process while the
    file is unchanged (``report`` parsed them 39 times, once per question), and again once it
    changes. Each call reads the small file's bytes (one open) to know that exactly."""
    from ddtree_bayes.engine.predictive import load_seed_table

    work = copy_bundled_data(tmp_path / "w")
    seeds = work / "data" / "seed_estimates.csv"
    with counting_opens() as opened, counting_parses(monkeypatch) as parsed:
        tables = [load_seed_table(work) for _ in range(3)]
    assert parsed["csv", seeds.read_text()] == 1 and opened[seeds.resolve()] == 3
    assert tables[0] == tables[2] and len(tables[0]) == len(seeds.read_text().splitlines()) - 1
    seeds.chmod(0o644)
    seeds.write_text(seeds.read_text() + ",".join(["x"] * len(tables[0][0])) + "\n")
    with counting_opens() as opened, counting_parses(monkeypatch) as parsed:
        grown = load_seed_table(work)
    assert parsed["csv", seeds.read_text()] == 1 and opened[seeds.resolve()] == 1
    assert len(grown) == len(tables[0]) + 1


def test_a_seed_table_rewritten_at_the_same_size_and_time_is_read_again(tmp_path):
    """The memo was keyed by (path, mtime, size): a same-size rewrite within a coarse
    filesystem's timestamp tick (1 s on HFS+ / ext3 / NFS, 2 s on FAT), or a copy that keeps
    the mtime, was served stale; and every version ever read stayed in it. Now one entry a
    file, checked against the bytes' hash."""
    import os

    from ddtree_bayes.engine import predictive as P

    work = copy_bundled_data(tmp_path / "w")
    seeds = work / "data" / "seed_estimates.csv"
    seeds.chmod(0o644)
    text = seeds.read_text()
    before = os.stat(seeds)
    assert P.load_seed_table(work)[0]["tok_s"] == "133"
    seeds.write_text(text.replace(",133,", ",134,", 1))          # the same size ...
    os.utime(seeds, ns=(before.st_atime_ns, before.st_mtime_ns))   # ... and modification time
    assert os.stat(seeds).st_size == before.st_size
    assert P.load_seed_table(work)[0]["tok_s"] == "134"
    for i in range(20):
        seeds.write_text(text + "#" * i)
        P.load_seed_table(work)
    assert [k for k in P._SEED_TABLES if k == str(seeds.resolve())] == [str(seeds.resolve())]
    assert sum(str(work) in k for k in P._SEED_TABLES) == 1


def test_a_seed_table_row_edited_by_one_caller_is_not_the_next_callers(tmp_path):
    """load_seed_table handed out a new list of the same row dicts: a caller that edited a
    row edited every later caller's table until the file changed."""
    from ddtree_bayes.engine.predictive import load_seed_table

    work = copy_bundled_data(tmp_path / "w")
    first = load_seed_table(work)
    first[0]["tok_s"] = "999"
    assert load_seed_table(work)[0]["tok_s"] == "133"


#: This checkout (the example files simulate reads).
REPO = Path(__file__).resolve().parent.parent

#: A B300 row for ``add``, valid against the bundled data, priors and cards.
B300_ROW = ("--hardware", "b300", "--gpus", "8", "--engine", "sglang", "--method", "ddtree",
            "--block", "8", "--budget", "16", "--accept", "5.1", "--tok-s", "321",
            "--source", "HYPOTHETICAL test measurement")


def workspace(root: Path) -> Path:
    """``root`` as this repository's working directory is: data/ with copies of the bundled
    measurements, hardware, seed, model-card and drafter-card tables (the measurements
    writable), and models/priors.toml."""
    work = copy_bundled_data(root, writable=True)
    for name in ("models.csv", "drafters.csv"):
        shutil.copy(bundled(name), work / "data" / name)
    (work / "models").mkdir()
    shutil.copy(bundled("priors.toml"), work / "models" / "priors.toml")
    return work


@contextlib.contextmanager
def counting_inputs(monkeypatch):
    """Count every parse of a CSV input (``core.data.read_csv_file``, under every loader of
    data/ and of a fit's stored tables) and of a TOML text (``tomllib.loads``), by (what was
    parsed, its text): a file as ``folder/name``, a text not read from a file (a fit's
    stored copy, a file's next text) as ``text``."""
    import os
    import tomllib

    from ddtree_bayes.core import data as D

    parsed: Counter[tuple[str, str]] = Counter()
    real_read, real_loads = D.read_csv_file, tomllib.loads

    def read_csv_file(path, text=None, *args, **kwargs):
        p = Path(str(path))
        if text is None and p.is_file():
            fd = os.open(p, os.O_RDONLY)   # (not through open: counting_opens counts those)
            try:
                raw = os.read(fd, p.stat().st_size + 1)
            finally:
                os.close(fd)
            parsed[f"{p.parent.name}/{p.name}", raw.decode("utf-8-sig")] += 1
        else:
            parsed["text", text or ""] += 1
        return real_read(path, text, *args, **kwargs)

    def loads(text, *args, **kwargs):
        parsed["toml", text] += 1
        return real_loads(text, *args, **kwargs)

    monkeypatch.setattr(D, "read_csv_file", read_csv_file)
    monkeypatch.setattr(tomllib, "loads", loads)
    yield parsed


def test_one_add_reads_and_parses_each_input_once(tmp_path, monkeypatch):
    """``add`` read the measurement file twice and parsed it three times (validated, again by
    fit's check of the file, and once more for its header), and read and parsed the hardware
    tables, the priors, the model cards and the drafter cards twice each (once for the row,
    once for fit's check). Now each once; the file's next text (with the row) is parsed once
    more, to validate it before it is written."""
    work = workspace(tmp_path / "w")
    data = work / "data" / "measurements.csv"
    before = data.read_text()
    with counting_opens() as opened, counting_inputs(monkeypatch) as parsed:
        code, out, err = run_cli(work, "add", *B300_ROW)
    assert code == 0, err
    after = data.read_text()
    assert after.startswith(before) and after.count("\n") == before.count("\n") + 1
    assert reads(opened) == {"data/measurements.csv": 1, "data/hardware.csv": 1,
                             "_bundled/hardware.csv": 1, "data/models.csv": 1,
                             "_bundled/models.csv": 1, "models/priors.toml": 1}, reads(opened)
    assert dict(parsed) == {
        ("text", before): 1, ("text", after): 1,   # (the file's bytes, read under its lock)
        ("data/hardware.csv", before_of(work, "hardware.csv")): 1,
        ("_bundled/hardware.csv", bundled("hardware.csv").read_text()): 1,
        ("data/models.csv", before_of(work, "models.csv")): 1,
        # (the built-in cards: what a copied data/models.csv says less than them)
        ("_bundled/models.csv", bundled("models.csv").read_text()): 1,
        ("data/drafters.csv", before_of(work, "drafters.csv")): 1,
        ("_bundled/drafters.csv", bundled("drafters.csv").read_text()): 1,
        ("toml", (work / "models" / "priors.toml").read_text()): 1}, sorted(
            (k[0], n) for k, n in parsed.items())


def before_of(work: Path, name: str) -> str:
    return (work / "data" / name).read_text(encoding="utf-8-sig")


@pytest.mark.nuts
def test_one_reweighting_update_parses_each_input_once(fitted_workdir, tmp_path, monkeypatch):
    """``update`` (a PSIS reweight) parsed the new measurement text three times (the file,
    the proposal's view of the new data, the reweighted fit's copy), the model and drafter
    cards twice (its inputs, then the cards' changes since the fit), and the stored priors and
    hardware table twice (the previous fit's, and the same texts again in the reweighted
    fit). Now each text once (the priors file and the stored copy, one text: once). And it
    read the previous fit's netCDF file twice: loaded (h5py), then copied byte for byte into
    the reweighted fit (``save_resampled``); now once (``store.load_held``)."""
    from ddtree_bayes.engine import store
    from test_living_update import copy_work

    work = copy_work(fitted_workdir[0], tmp_path / "w")
    for name in ("models.csv", "drafters.csv"):
        shutil.copy(bundled(name), work / "data" / name)
    assert run_cli(work, "add", *B300_ROW)[0] == 0
    new_text = (work / "data" / "measurements.csv").read_text()
    stored_hardware = latest_stored_hardware(work)
    previous = store.resolve(work / "models").resolve()
    with (counting_inputs(monkeypatch) as parsed, counting_opens() as py_opened,
          counting_fit_opens(monkeypatch) as h5_opened):
        code, out, err = run_cli(work, "update", "--format", "json")
    assert code == 0, err
    assert py_opened[previous] + h5_opened[previous] == 1, (py_opened[previous],
                                                            h5_opened[previous])
    import json

    assert json.loads(out)["made_by"] == "psis-reweight"
    # the priors file and the previous fit's stored copy: one text, two inputs, parsed once
    # (core/per_call.py; it was parsed twice), and the reweighted fit stores it too: not
    # parsed again
    priors = (work / "models" / "priors.toml").read_text()
    assert parsed.pop(("toml", priors)) == 1
    twice = {(k[0], n) for k, n in parsed.items() if n > 1}
    assert not twice, twice
    # the file's new text: once (not again as the proposal's view of it, nor as the
    # reweighted fit's stored copy); the stored hardware table once (the same text again in
    # the reweighted fit)
    assert sum(n for (_, text), n in parsed.items() if text == new_text) == 1
    assert parsed["text", stored_hardware] == 1


def latest_stored_hardware(work: Path) -> str:
    """The hardware table the latest fit of ``work`` stored."""
    import h5py

    from ddtree_bayes.engine import store

    with h5py.File(store.resolve(work / "models"), "r") as fh:
        return str(fh.attrs[store.HARDWARE_ATTR])


def test_next_builds_its_query_parser_once(tmp_path, monkeypatch):
    """``next`` resolves its ``--query`` again against the data of every simulated result
    (its acceptance may come from the data), and built the query's argparse parser each time:
    193 parsers for one ``next`` of the bundled fit, a tenth of its time. Built once now."""
    from ddtree_bayes.workflows.decisions import next_measurement as NM

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, jitter=0.05, n=64)
    built: list[int] = []
    real_init = NM._QueryParser.__init__

    def init(self, *args, **kwargs):
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(NM._QueryParser, "__init__", init)
    parses: list[int] = []
    real_parse = NM.parse_query

    def parse_query(*args, **kwargs):
        parses.append(1)
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(NM, "parse_query", parse_query)
    code, out, err = run_cli(work, "next", "--k", "8", "--format", "json")
    assert code == 0, err
    assert len(parses) > 1 and len(built) <= 1, (len(parses), len(built))


#: One call of each command the product owner timed (issue: "the inputs are parsed many times
#: per call"), on a point-mass fit of the bundled B300 rows.
ONE_CALL = [("predict", "--accept", "12:16"),
            ("predict", "--hardware", "h200", "--accept", "14", "--concurrency", "1,8"),
            ("optimize",),
            ("next", "--k", "8")]


@pytest.mark.parametrize("argv", ONE_CALL, ids=lambda a: "-".join(a[:2]))
def test_one_call_reads_and_parses_the_measurements_and_cards_once(tmp_path, monkeypatch,
                                                                    argv):
    """Each command opens and parses every input once: the measurement file, the model and
    drafter cards (the built-in ones and the user's), the hardware tables, the seed table and
    the priors; the fit's stored copies (of the measurements, the hardware table) once each.
    ``predict`` opened data/drafters.csv four times (the drafter cards' changes, the cards a
    measurement could be made with, each read its bytes again); ``optimize`` read
    models/priors.toml twice and parsed its text twice (the fit's staleness and stored copy,
    the acceptance curve); ``next`` parsed the built-in model cards once per simulated
    update that asks the structure of the new rows (4 here)."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, jitter=0.05, n=64)
    for name in ("models.csv", "drafters.csv"):
        shutil.copy(bundled(name), work / "data" / name)
    with counting_opens() as opened, counting_inputs(monkeypatch) as parsed:
        code, out, err = run_cli(work, *argv, "--format", "json")
    assert code == 0, err
    counts = {**reads(opened), **{f"data/{n}": opened[(work / "data" / n).resolve()]
                                  for n in ("drafters.csv",)}}
    assert counts["data/drafters.csv"] == 1 and counts["data/measurements.csv"] == 1, counts
    assert all(n == 1 for n in counts.values()), counts
    twice = sorted((k[0], n) for k, n in parsed.items() if n > 1)
    assert not twice, twice
    files = {k[0] for k in parsed if k[0] != "text"}
    assert {"data/drafters.csv", "_bundled/drafters.csv"} <= files, files
    # the stored measurements: parsed once (the point-mass fit stores the file's text)
    assert parsed["text", (work / "data" / "measurements.csv").read_text()] == 1
    priors = (work / "models" / "priors.toml").read_text()
    assert parsed["toml", priors] == 1


def test_a_call_reads_a_file_once_and_parses_it_once(tmp_path):
    """Inside one call (core/per_call.py: the CLI runs each command in one), the bundled
    drafter cards are parsed once however often asked (``report`` parsed them 20 times, once
    per question), the seed table read once (39 times); a file rewritten during the call is
    read again; outside a call every ask reads the disk (the Python API)."""
    from ddtree_bayes.core import per_call
    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.engine.predictive import load_seed_table

    work = copy_bundled_data(tmp_path / "w")
    shutil.copy(bundled("drafters.csv"), work / "data" / "drafters.csv")
    own = work / "data" / "drafters.csv"
    own.chmod(0o644)
    seeds = work / "data" / "seed_estimates.csv"
    with counting_opens() as opened, per_call.call():
        tables = [drafter_table(own) for _ in range(5)] + [drafter_table() for _ in range(5)]
        rows = [load_seed_table(work) for _ in range(5)]
    assert opened[bundled("drafters.csv").resolve()] == 1 and opened[own.resolve()] == 1
    assert opened[seeds.resolve()] == 1
    assert all(t is tables[0] for t in tables[:5]) and all(t is tables[5] for t in tables[5:])
    assert len(tables[0]) == len(bundled("drafters.csv").read_text().splitlines()) - 1
    assert rows[0] == rows[4] and rows[0] is not rows[4]   # (each caller its own rows)
    # a card added during the call (a new file renamed into place, as card add writes it)
    with per_call.call():
        before = drafter_table(own)
        import csv

        rows = list(csv.reader(io.StringIO(own.read_text(), newline="")))
        added = dict(zip(rows[0], rows[1], strict=True)) | {"drafter": "my-drafter",
                                                            "default": "no"}
        new = own.with_suffix(".new")
        with open(new, "w", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows([*rows, list(added.values())])
        new.replace(own)
        after = drafter_table(own)
    assert [c.drafter for c in after] == [c.drafter for c in before] + ["my-drafter"]
    with counting_opens() as opened:
        for _ in range(3):
            drafter_table(own)
    assert opened[own.resolve()] == 3 and opened[bundled("drafters.csv").resolve()] == 3


def test_the_names_of_the_cards_here_are_read_through_the_calls_memo(tmp_path, monkeypatch):
    """engine/names ``cards_here`` (a --model that is no name told its card) and ``card_here``
    (a --model the fit lacks told where its card is) read data/models.csv from the disk, not
    through core/per_call.py as every other card read: inside one call, the cards loaded and
    both names asked opened it three times; now once. Outside a call each reads the disk. A
    file saved with a byte-order mark (Excel), which the card loader reads, gave no names."""
    from ddtree_bayes.core import per_call
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.engine.names import card_here, cards_here

    work = copy_bundled_data(tmp_path / "w")
    own = work / "data" / "models.csv"
    shutil.copy(bundled("models.csv"), own)
    monkeypatch.chdir(work)
    names = set(load_model_cards(own))
    with counting_opens() as opened, per_call.call():
        assert set(load_model_cards(own)) == names
        assert cards_here() == names and cards_here() == names
        assert card_here("kimi-k2.6") == "data/models.csv"
    assert opened[own.resolve()] == 1
    with counting_opens() as opened:
        assert cards_here() == names and card_here("kimi-k2.6") == "data/models.csv"
    assert opened[own.resolve()] == 2
    own.write_bytes(b"\xef\xbb\xbf" + bundled("models.csv").read_bytes())
    assert cards_here() == names and card_here("kimi-k2.6") == "data/models.csv"


def test_a_missing_file_inside_a_call_is_the_same_one_line_error_as_outside(tmp_path):
    """per_call.parsed took the file's stamp before the parse: inside a call (every CLI
    command) a file that is not there raised a bare FileNotFoundError (a traceback) where the
    parse, outside one, names the file and the fix (DataError, exit 2)."""
    from ddtree_bayes.core import per_call
    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.core.errors import DataError

    gone = tmp_path / "data" / "drafters.csv"
    with pytest.raises(DataError) as outside:
        drafter_table(gone)
    with per_call.call(), pytest.raises(DataError) as inside:
        drafter_table(gone)
    assert str(inside.value) == str(outside.value)
    assert str(inside.value).startswith(f"{gone}: file not found (fix: ")


@contextlib.contextmanager
def counting_fit_opens(monkeypatch):
    """Count every opening of a file by HDF5 (``h5py.File`` given a path: ``load_fit``
    directly, xarray's h5netcdf backend through ``h5netcdf.File``), by resolved path."""
    import h5py

    opened: Counter[Path] = Counter()
    real = h5py.File.__init__

    def init(self, name, *args, **kwargs):
        if isinstance(name, str | Path):
            opened[Path(name).resolve()] += 1
        real(self, name, *args, **kwargs)

    monkeypatch.setattr(h5py.File, "__init__", init)
    yield opened


@pytest.mark.filterwarnings("ignore:The 'phony_dims' kwarg")   # (an h5py-written test fit)
def test_one_report_opens_the_fits_file_once(tmp_path, monkeypatch):
    """``report`` opened the fit's netCDF twice: once for its draws and metadata
    (``load_fit``, h5py), once more for the whole file as a DataTree (xarray). It opens it
    once and reads both from the one handle; the DataTree is the one ``load_datatree``
    reads."""
    import importlib

    from ddtree_bayes.cli import main as cli
    from ddtree_bayes.engine import compare, store

    render = importlib.import_module("ddtree_bayes.workflows.report.render")
    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models").resolve()
    handed: dict = {}
    # (a point mass has too few draws for PSIS-LOO: the diagnostics are not the point)
    monkeypatch.setattr(compare, "require_psis_draws", lambda *a: None)

    def compute(draws, dt, **kw):
        handed.update(fit_id=draws.meta["fit_id"], dt=dt)
        return {"fit_id": draws.meta["fit_id"],
                "verdict": {"converged": True, "failures": [], "text": "converged"}}

    monkeypatch.setattr(render, "compute", compute)
    monkeypatch.setattr(render, "render_whole", lambda *a, **k: None)
    monkeypatch.chdir(work)
    with counting_opens() as py_opened, counting_fit_opens(monkeypatch) as h5_opened:
        assert cli.main(["report", "--quiet"]) == 0
    assert py_opened[path] + h5_opened[path] == 1, (py_opened[path], h5_opened[path])
    assert handed["fit_id"] == path.stem
    assert handed["dt"].identical(store.load_datatree(path))
    assert len(handed["dt"]["posterior"].dataset.data_vars) > 0


#: Commands naming their input files by flag (each file copied into the working directory):
#: (argv, the files they name). ``check_text_files`` (cli/args.py) read every such file to
#: check it is UTF-8 text, then the command read it again: ``simulate`` opened its truth and
#: design files twice each, ``optimize`` its --acceptance-file, ``next`` its --candidates.
FLAG_FILES = [
    (("simulate", "--truth", "truth.toml", "--design", "design.csv"),
     ("truth.toml", "design.csv")),
    (("optimize", "--acceptance-file", "acceptance.csv", "--priors", "models/priors.toml",
      "--format", "json"), ("acceptance.csv", "models/priors.toml")),
    (("next", "--k", "8", "--candidates", "candidates.csv", "--format", "json"),
     ("candidates.csv",)),
    # (and hashed for the card's source: config.json was opened three times)
    (("card", "add", "--hf-config", "config.json", "--models-file", "mine.csv", "--dry-run"),
     ("config.json", "mine.csv")),
]


@pytest.mark.parametrize("argv, files", FLAG_FILES, ids=[a[0] for a, _ in FLAG_FILES])
def test_a_file_a_flag_names_is_read_once(tmp_path, argv, files):
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, jitter=0.05, n=64)
    shutil.copy(REPO / "data" / "examples" / "truth_moe_4gpu.toml", work / "truth.toml")
    shutil.copy(REPO / "data" / "examples" / "design_moe_4gpu.csv", work / "design.csv")
    shutil.copy(REPO / "data" / "acceptance_reference.csv", work / "acceptance.csv")
    shutil.copy(REPO / "tests" / "fixtures" / "cards" / "qwen3-30b-a3b" / "config.json",
                work / "config.json")
    shutil.copy(bundled("models.csv"), work / "mine.csv")
    (work / "candidates.csv").write_text(
        "hardware,gpus,engine,method,block,budget,accept_len,context_tokens\n"
        "b300,8,sglang,ddtree,16,32,14,0\nb300,8,native,ddtree,16,32,14,0\n")
    with counting_opens() as opened:
        code, out, err = run_cli(work, *argv)
    assert code == 0, err
    assert {f: opened[(work / f).resolve()] for f in files} == {f: 1 for f in files}


def test_one_diff_reads_each_fit_file_once(tmp_path, monkeypatch):
    """``diff`` opened each of its two fits' netCDF files twice: once for the draws
    (``load_fit``), once more for the dimensions of each variable (``variable_dims``, which
    ``load_fit`` had read already: the parameters' labels), so the same question was answered
    from two reads by two pieces of code. Now once each (``Fit.dims``, read with the draws).
    (This h5py-written fit has no dimension scales: its labels are indices, as before.)"""
    from ddtree_bayes.engine import store
    from test_cli_support import FIT_ID, write_point_mass_fit

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, n=64, jitter=0.02)
    other = "20260101T000002Z-lin"
    write_point_mass_fit(work / "models", work / "data" / "measurements.csv",
                         work / "models" / "priors.toml", work / "data" / "hardware.csv",
                         fit_id=other, n=64, noise_sd=0.08, jitter=0.02)
    paths = [store.resolve(work / "models", i).resolve() for i in (FIT_ID, other)]
    with counting_opens() as py_opened, counting_fit_opens(monkeypatch) as h5_opened:
        code, out, err = run_cli(work, "diff", FIT_ID, other, "--format", "json")
    assert code == 0, err
    assert [py_opened[p] + h5_opened[p] for p in paths] == [1, 1]
    import json

    names = {p["parameter"] for p in json.loads(out)["parameters"]}
    assert {"step_ar_ms[0]", "noise_sd", "moe_share[0]"} <= names, sorted(names)


def test_next_parses_the_fits_header_once(tmp_path, monkeypatch):
    """``next`` parsed the header line of the fit's measurement text once per candidate (a
    ``csv.reader`` over the line, to write each simulated row under it): 8 times for the
    bundled fit's candidates. The header is the fit's measurements' (``Measurements.header``),
    parsed once."""
    import csv

    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, jitter=0.05, n=64)
    lines: list[int] = []
    real = csv.reader

    def reader(f, *args, **kwargs):
        if isinstance(f, list):
            lines.append(len(f))
        return real(f, *args, **kwargs)

    monkeypatch.setattr(csv, "reader", reader)
    code, out, err = run_cli(work, "next", "--k", "8", "--format", "json")
    assert code == 0, err
    assert len(lines) <= 1, lines


def test_next_on_an_unmeasured_system_parses_the_fits_texts_once(tmp_path, monkeypatch):
    """``next`` about a system the fit never measured (hardware transfer) gives each of its
    steps a copy of the fit with the transferred system's column added
    (``common.with_transferred_system``), made with ``dataclasses.replace``: the copy kept
    none of what the fit had parsed, so every step parsed the fit's stored measurements and
    hardware table again. On the public multi-model corpus, ``next --query "--model
    qwen3.8-27b"`` parsed each 10 times (``bench/parse_counts.py``). The copy is a view
    (``Fit.view``): it keeps the parsed texts it shares. Here (h200 unmeasured, a point-mass
    fit of B300 rows) the stored hardware table was parsed twice, the fit's and its copy's:
    now once, as the stored measurements."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, jitter=0.05, n=64)
    with counting_inputs(monkeypatch) as parsed:
        code, out, err = run_cli(work, "next", "--k", "8", "--query",
                                 "--hardware h200 --accept 14", "--format", "json")
    assert code == 0, err
    data = (work / "data" / "measurements.csv").read_text()
    hardware = {n for (kind, text), n in parsed.items() if kind == "text" and text != data}
    assert parsed["text", data] == 1 and hardware == {1}, (parsed["text", data], hardware)
    twice = sorted((kind, n) for (kind, _), n in parsed.items() if n > 1)
    assert not twice, twice


def test_next_merges_the_drafter_cards_here_once(tmp_path, monkeypatch):
    """``next`` resolves one scenario per simulated result, and each asked for the drafter
    cards here (the built-in ones overlaid by ``data/drafters.csv``, engine/scenario.py
    ``here_drafters``): the file's parse was kept for the call, but the overlay was built
    again for every fit object (each simulated result's view of the fit has its own memo),
    193 times on the bundled fit (0.1 s of the 0.3 s ``here_drafters`` took). It is built
    once per call and file: ``drafter_table`` of the own file is called once here (``--k 8``),
    9 times before (the fit's, and one per candidate's view)."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, jitter=0.05, n=64)
    shutil.copy(bundled("drafters.csv"), work / "data" / "drafters.csv")
    calls = _next_drafter_tables(work, monkeypatch)
    own = [a for a in calls if a and a[0] is not None]
    assert len(own) == 1, len(own)


def _next_drafter_tables(work, monkeypatch) -> list[tuple]:
    """The arguments of every ``drafter_table`` call `next --k 8 --format json` makes in
    ``work``."""
    from ddtree_bayes.core import drafters as D

    calls: list[tuple] = []
    real = D.drafter_table
    monkeypatch.setattr(D, "drafter_table",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    code, out, err = run_cli(work, "next", "--k", "8", "--format", "json")
    assert code == 0, err
    return calls


def test_next_builds_the_built_in_drafter_cards_once_without_a_file_of_its_own(tmp_path,
                                                                              monkeypatch):
    """13a1d175 made ``here_drafters`` build the overlay of ``data/drafters.csv`` once per call
    (next's views of the fit, one per simulated result, each with its own memo, had built it
    per view); a working directory without that file (the built-in cards alone) still built
    them per view, in the fit's memo: ``drafter_table()`` 9 times in ``next --k 8``. Once per
    call now, as with a file."""
    work = make_point_mass_workdir(tmp_path / "w", noise_sd=0.05, jitter=0.05, n=64)
    assert not (work / "data" / "drafters.csv").exists()
    calls = _next_drafter_tables(work, monkeypatch)
    assert len(calls) == 1, calls

"""`ddtree-bayes add`: validated, all-or-nothing appends to a plain CSV (no fits needed)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from ddtree_bayes.cli import main as cli
from ddtree_bayes.core.data import COLUMNS, load_hardware, load_measurements
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.workflows import living
from test_cli_support import copy_bundled_data

ROW = ["--hardware", "b300", "--engine", "sglang", "--method", "ddtree", "--block", "16",
       "--budget", "32", "--accept", "13.1", "--tok-s", "612", "--source",
       "HYPOTHETICAL test row"]


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A working directory with a writable copy of the bundled data (the bundled files are
    read-only, and so are their copies until made writable)."""
    copy_bundled_data(tmp_path, writable=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def load(work):
    hw = load_hardware(work / "data" / "hardware.csv")
    return load_measurements(work / "data" / "measurements.csv", hw)


def test_add_appends_one_validated_row_with_defaults_filled(work, capsys):
    before = (work / "data" / "measurements.csv").read_text()
    code, out, err = run(capsys, "add", *ROW)
    assert code == 0, err
    after = (work / "data" / "measurements.csv").read_text()
    assert after.startswith(before)  # the existing rows are untouched, byte for byte
    # model from the file, GPU count measured for b300 (8), verify tokens derived (33)
    assert after[len(before):] == ("kimi-k2.6,b300,8,sglang,ddtree,16,32,33,13.1,,612,"
                                   "HYPOTHETICAL test row,\n")
    data = load(work)
    new = data.rows[-1]
    assert (len(data.rows), new.row, new.gpus, new.verify_tokens) == (10, 11, 8, 33)
    assert new.step_ms == pytest.approx(13.1 / 612 * 1000)
    assert ("row 11: kimi-k2.6, b300 x8 sglang ddtree b16/B32 M=33 accept 13.1: 612 tok/s, "
            "step 21.4 ms") in out
    # the file keeps its permissions and no temp file is left behind
    assert stat.S_IMODE((work / "data" / "measurements.csv").stat().st_mode) == 0o644
    assert not list((work / "data").glob("*.tmp"))


def test_add_json_and_context_suffix(work, capsys):
    code, out, _ = run(capsys, "add", "--hardware", "rtx-pro-6000", "--engine", "vllm",
                       "--method", "ar", "--accept", "1", "--context", "32k", "--tok-s", "80.1",
                       "--source", "test", "--notes", "driver 580", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    (row,) = payload["rows"]
    assert payload["total_rows"] == 10
    assert (row["row"], row["context_tokens"], row["verify_tokens"], row["gpus"]) == (11, 32768.0,
                                                                                      1, 8)
    assert row["notes"] == "driver 580" and row["repeat_of"] is None


@pytest.mark.parametrize("argv, expected", [
    (["--tok-s", "-3"], "row 11, column 'tok_s': tok_s must be > 0, got -3"),
    (["--tok-s", "fast"], "row 11, column 'tok_s': not a number: 'fast'"),
    (["--accept", "40"], "row 11, column 'accept_len': accept_len 40 is above what ddtree with "
                         "block 16 can emit (at most 16 tokens per step: block - 1 drafts + 1)"),
    # below the 33 verified, above the 15 drafts + 1 a block-16 DFlash drafter can emit
    (["--accept", "17"], "row 11, column 'accept_len': accept_len 17 is above what ddtree with "
                         "block 16 can emit (at most 16 tokens per step: block - 1 drafts + 1)"),
    (["--hardware", "h200"], "column 'gpus': no kimi-k2.6 row on h200 in"),
    (["--hardware", "a100"], "column 'hardware': unknown hardware 'a100'"),
    (["--engine", "SGLang"], "column 'engine': 'SGLang' is not a lowercase name"),
    (["--model", "kimi-k2.5"], "column 'model': model 'kimi-k2.5', but"),
    # written, then refused by fit ("not declared"): now refused here, with the near name
    (["--method", "ddtreee"], "column 'method': method 'ddtreee' is not declared in the priors' "
                              "[methods], so fit would refuse it (fix: did you mean 'ddtree'?"),
])
def test_add_rejects_a_bad_row_with_one_line_and_writes_nothing(work, capsys, argv, expected):
    before = (work / "data" / "measurements.csv").read_bytes()
    args = list(ROW)
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    code, out, err = run(capsys, "add", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and expected in err, err
    assert "data/measurements.csv (new row)" in err
    assert (work / "data" / "measurements.csv").read_bytes() == before


def test_add_needs_the_required_flags(work, capsys):
    code, _, err = run(capsys, "add", "--hardware", "b300", "--tok-s", "600")
    assert code == 2
    assert "missing --engine, --method, --accept, --source" in err


def test_gpus_default_is_refused_when_ambiguous(work, capsys):
    code, _, _ = run(capsys, "add", *ROW[:-2], "--source", "four GPUs", "--gpus", "4")
    assert code == 0
    other = [v if v != "612" else "600" for v in ROW[:-2]]   # (another run: not identical)
    code, _, err = run(capsys, "add", *other, "--source", "which?")
    assert code == 2 and "kimi-k2.6 on b300 was measured with 4, 8 GPUs" in err and "--gpus" in err


def test_identical_row_is_refused_and_allow_duplicate_marks_a_true_repeat(work, capsys):
    assert run(capsys, "add", *ROW)[0] == 0
    # 612.0 is the same number: still identical
    args = [v if v != "612" else "612.0" for v in ROW]
    code, _, err = run(capsys, "add", *args)
    assert code == 2 and "identical to row 11" in err and "--allow-duplicate" in err
    code, out, _ = run(capsys, "add", *ROW, "--allow-duplicate")
    assert code == 0 and "(repeat of row 11)" in out
    code, out, _ = run(capsys, "add", *ROW, "--allow-duplicate")
    assert code == 0
    data = load(work)  # the loader, which refuses identical rows, accepts the file
    assert [r.notes for r in data.rows[-3:]] == ["", "repeat of row 11", "repeat 2 of row 11"]
    assert {r.tok_s for r in data.rows[-3:]} == {612.0}


def test_repeat_keeps_existing_notes(work, capsys):
    assert run(capsys, "add", *ROW, "--notes", "run A")[0] == 0
    assert run(capsys, "add", *ROW, "--notes", "run A", "--allow-duplicate")[0] == 0
    assert load(work).rows[-1].notes == "run A; repeat of row 11"


def test_read_only_data_file_is_refused(work, capsys):
    path = work / "data" / "measurements.csv"
    path.chmod(0o444)
    code, _, err = run(capsys, "add", *ROW)
    assert code == 2 and "read-only" in err and "chmod u+w" in err
    assert path.read_bytes() == bundled("measurements.csv").read_bytes()


def test_add_never_writes_the_bundled_copy(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no data/ here: the CLI would read the bundled copy
    code, _, err = run(capsys, "add", *ROW)
    assert code == 2 and "data/measurements.csv: file not found" in err
    assert "--data FILE" in err


CARD_DIR = Path(__file__).parent / "fixtures" / "cards" / "llama-3.1-8b"
AR_150 = ["--model", "llama-3.1-8b", "--hardware", "h100", "--gpus", "1", "--engine", "vllm",
          "--method", "ar", "--tok-s", "150", "--source", "my run"]


@pytest.mark.parametrize("start", [
    ["card", "add", "--hf-config", str(CARD_DIR)],
    ["hardware", "add", "h100-pl", "--like", "h100", "--mem-bw-tb-s", "3.0", "--source", "t"],
])
def test_add_starts_the_measurements_of_a_folder_card_add_made_a_workspace(
        tmp_path, monkeypatch, capsys, start):
    """In an empty folder, `card add --hf-config ...` wrote data/models.csv and the next command
    the README shows, `add --model llama-3.1-8b ...`, failed "data/measurements.csv: file not
    found (fix: ... pass --data FILE ...)" with exit 2. A data/ folder holding a file this
    tool wrote (models.csv, hardware.csv, drafters.csv under its own header) is a workspace:
    `add` starts data/measurements.csv with the standard header and says, in one line, that
    this folder's fits read it from now on instead of the bundled measurements."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *start)
    assert code == 0, err
    marker = "data/models.csv" if start[0] == "card" else "data/hardware.csv"
    code, out, err = run(capsys, "add", *AR_150)
    assert code == 0, err
    path = tmp_path / "data" / "measurements.csv"
    assert path.read_text() == HEADER + "llama-3.1-8b,h100,1,vllm,ar,,,1,1,,150,my run,\n"
    assert out.splitlines()[0] == (
        f"created data/measurements.csv with the standard header ({marker} makes this folder "
        "a workspace: its fits read this file from now on, not the bundled measurements)")
    # 1000 / 150 = 6.67 ms a step
    assert "row 2: llama-3.1-8b, h100 x1 vllm ar M=1 accept 1: 150 tok/s, step 6.7 ms" in out
    # the second row appends, as to any file
    code, out, err = run(capsys, "add", *AR_150[:-4], "--tok-s", "148", "--source", "run 2")
    assert code == 0, err
    assert "created" not in out and "(now 2 measurements)" in out


def test_add_warns_of_a_model_one_edit_from_a_card_it_has_none_of(tmp_path, monkeypatch, capsys):
    """After `card add` wrote llama-3.1-8b, `add --model llama-3.1-8 ...` (one letter short)
    was appended with rc 0 and no word: the first row of a file may name a model without a
    card (a fit makes it a proxy card), so the typo showed only at fit, as a proxy card whose
    fix said to make the card the user had just made. The row is kept (a model without a card
    is allowed), with a warning naming the card it is one edit from; a name near no card says
    nothing, as before."""
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "card", "add", "--hf-config", str(CARD_DIR))[0] == 0
    typo = ["--model", "llama-3.1-8", *AR_150[2:]]
    code, out, err = run(capsys, "add", *typo, "--format", "json")
    assert code == 0, err
    line = ("row 2: model 'llama-3.1-8' has no model card, and is one edit from the card "
            "'llama-3.1-8b' (data/models.csv): did you mean 'llama-3.1-8b'? (as written a fit "
            "makes it a proxy card from its AR step: transfer to other GPUs is weaker)")
    assert json.loads(out)["warnings"] == [line]
    assert err == f"ddtree-bayes: warning: {line}\n"
    # a name near no card: a model of the user's own, proxied by the fit without a warning here
    (tmp_path / "data" / "measurements.csv").unlink()
    code, out, err = run(capsys, "add", "--model", "my-own-model", *AR_150[2:])
    assert code == 0 and err == "", err


@pytest.mark.parametrize("files", [
    {},                                           # an empty data/ folder
    {"models.csv": "id,name\n1,resnet\n"},       # someone else's models.csv
    {"notes.txt": "x\n"},
])
def test_add_still_refuses_to_start_measurements_in_an_unrelated_folder(
        tmp_path, monkeypatch, capsys, files):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    for name, text in files.items():
        (tmp_path / "data" / name).write_text(text)
    code, out, err = run(capsys, "add", *AR_150)
    assert code == 2 and not out
    assert err.startswith("ddtree-bayes: error: data/measurements.csv: file not found")
    assert not (tmp_path / "data" / "measurements.csv").exists()


def test_add_in_an_empty_folder_names_card_add_and_it_works(tmp_path, monkeypatch, capsys):
    """A new user's first `add` in an empty folder, of a model no card describes: the error
    said only "run in the project folder ... or pass --data FILE", not that `card add` makes
    the folder a workspace (docs/howto/own-data.md's path). The one line names it, and the
    same `add` after `card add` starts data/measurements.csv."""
    monkeypatch.chdir(tmp_path)
    first = ["add", "--model", "qwen3-14b-awq", "--hardware", "rtx-4090", "--gpus", "1",
             "--engine", "vllm", "--method", "ar", "--context", "1536", "--tok-s", "78.4",
             "--source", "HYPOTHETICAL test row"]
    code, out, err = run(capsys, *first)
    assert (code, out) == (2, "")
    assert err == ("ddtree-bayes: error: data/measurements.csv: file not found (fix: run in "
                   "the project folder (with data/measurements.csv), pass --data FILE (a new "
                   "file is started with its header), or make this folder a workspace with "
                   "`ddtree-bayes card add` (your model's card; or `hardware add`, your GPU's "
                   "row): add then starts data/measurements.csv)\n")
    assert list(tmp_path.iterdir()) == []          # nothing written
    config = Path(__file__).parent / "fixtures" / "cards" / "qwen3-14b-awq"
    code, _, err = run(capsys, "card", "add", "--hf-config", str(config),
                       "--name", "qwen3-14b-awq")
    assert code == 0, err
    code, out, err = run(capsys, *first)
    assert code == 0, err
    assert out.startswith("created data/measurements.csv with the standard header")
    rows = load_measurements(tmp_path / "data" / "measurements.csv",
                             load_hardware(bundled("hardware.csv"))).rows
    assert [(r.model, r.tok_s) for r in rows] == [("qwen3-14b-awq", 78.4)]


def test_invalid_hand_edit_blocks_the_append(work, capsys):
    path = work / "data" / "measurements.csv"
    path.write_text(path.read_text() + "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,-5,hand edit,\n")
    before = path.read_bytes()
    code, _, err = run(capsys, "add", *ROW)
    assert code == 2 and "row 11, column 'tok_s'" in err and "(new row)" not in err
    assert path.read_bytes() == before


def test_crlf_bom_and_missing_final_newline_are_kept(work, capsys):
    path = work / "data" / "measurements.csv"
    text = "\ufeff" + path.read_text().rstrip("\n").replace("\n", "\r\n")
    path.write_bytes(text.encode())
    assert run(capsys, "add", *ROW)[0] == 0
    raw = path.read_bytes().decode()
    assert raw.startswith("\ufeffmodel,") and raw.endswith(",HYPOTHETICAL test row,\r\n")
    assert "\n" not in raw.replace("\r\n", "")
    assert load(work).rows[-1].row == 11


def test_from_file_appends_every_row(work, capsys, tmp_path):
    src = tmp_path / "new.csv"
    src.write_text(",".join(COLUMNS) + "\n"
                   "kimi-k2.6,b300,8,sglang,ddtree,16,32,,13.1,,612,run 1,\n"
                   "\n"
                   "kimi-k2.6,b300,8,sglang,ddtree,16,32,,14.2,,655,run 2,\"note, with comma\"\n")
    code, out, err = run(capsys, "add", "--from", str(src))
    assert code == 0, err
    assert "appended 2 rows" in out
    data = load(work)
    assert [(r.row, r.accept_len, r.tok_s, r.verify_tokens) for r in data.rows[-2:]] == [
        (11, 13.1, 612.0, 33), (12, 14.2, 655.0, 33)]
    assert data.rows[-1].notes == "note, with comma"
    # a --from row keeps the text as written: verify_tokens stays blank
    assert "kimi-k2.6,b300,8,sglang,ddtree,16,32,,13.1,,612,run 1,\n" in (
        work / "data" / "measurements.csv").read_text()


def test_from_file_with_bad_rows_lists_every_error_and_appends_none(work, capsys, tmp_path):
    path = work / "data" / "measurements.csv"
    before = path.read_bytes()
    src = tmp_path / "batch.csv"
    src.write_text(",".join(COLUMNS) + "\n"
                   "kimi-k2.6,b300,8,sglang,ddtree,16,32,,13.1,,612,ok row,\n"
                   "kimi-k2.6,b300,8,sglang,ddtree,16,32,,13.1,,-1,bad tok_s,\n"
                   "kimi-k2.6,b300,8,sglang,ddtree,16,32,,99,,600,bad accept,\n"
                   "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,133,B300 measurement recorded in the "
                   "original B300 notes (seed),\"C=1 autoregressive; GPU count not stated in the "
                   "source, an 8-GPU node is assumed\"\n")
    code, out, err = run(capsys, "add", "--from", str(src))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert lines[0] == f"ddtree-bayes: error: {src}: 3 problems, nothing appended:"
    assert f"{src}, row 3, column 'tok_s': tok_s must be > 0" in lines[1]
    assert (f"{src}, row 4, column 'accept_len': accept_len 99 is above what ddtree with "
            "block 16 can emit (at most 16 tokens per step: block - 1 drafts + 1)") in lines[2]
    assert f"{src}, row 5: identical to row 2 of data/measurements.csv" in lines[3]
    assert path.read_bytes() == before


def test_a_duplicate_within_the_file_names_its_row_of_the_file(work, capsys, tmp_path):
    """Two identical rows of a --from FILE: the second was "identical to row 11 of
    data/measurements.csv", a row that does not exist yet; it is row 2 of FILE."""
    path = work / "data" / "measurements.csv"
    before = path.read_bytes()
    src = tmp_path / "twice.csv"
    row = "kimi-k2.6,b300,8,sglang,ddtree,16,32,33,13.1,,612,test,\n"
    src.write_text(",".join(COLUMNS) + "\n" + row + row)
    code, out, err = run(capsys, "add", "--from", str(src))
    assert (code, out) == (2, "")
    assert err == (f"ddtree-bayes: error: {src}: 1 problem, nothing appended: {src}, row 3: "
                   "identical to row 2 (fix: if it is a true repeat of that measurement, pass "
                   "--allow-duplicate (its notes then say 'repeat of row 11': row 2 becomes "
                   "row 11 of data/measurements.csv))\n")
    assert path.read_bytes() == before
    code, out, err = run(capsys, "add", "--from", str(src), "--allow-duplicate")
    assert code == 0, err
    assert [r.notes for r in load(work).rows[-2:]] == ["", "repeat of row 11"]


def test_from_file_structural_errors(work, capsys, tmp_path):
    src = tmp_path / "short.csv"
    src.write_text("model,hardware,tok_s\nkimi-k2.6,b300,600\n")
    code, _, err = run(capsys, "add", "--from", str(src))
    assert code == 2 and "row 1, column 'gpus': missing columns gpus, engine" in err
    src.write_text(",".join(COLUMNS) + ",driver\n"
                   + "kimi-k2.6,b300,8,sglang,ar,,,1,1,,130,x,,580\n"
                   + "kimi-k2.6,b300,8,sglang,ar,,,1,1,,131,x\n")
    code, _, err = run(capsys, "add", "--from", str(src))
    assert code == 2 and "row 3: 12 fields, header has 14" in err
    src.write_text(",".join(COLUMNS) + ",driver\n" + "kimi-k2.6,b300,8,sglang,ar,,,1,1,,130,x,,580\n")
    code, _, err = run(capsys, "add", "--from", str(src))
    assert code == 2 and "column 'driver'" in err and "would be lost" in err
    code, _, err = run(capsys, "add", "--from", str(src), "--tok-s", "5")
    assert code == 2 and "--from cannot be combined with --tok-s" in err


def test_data_flag_appends_to_another_file(work, capsys, tmp_path):
    other = tmp_path / "other.csv"
    other.write_text(",".join(COLUMNS) + "\nkimi-k2.5,b300,4,sglang,ar,,,1,1,,120,x,\n")
    code, out, err = run(capsys, "add", *ROW, "--data", str(other))
    assert code == 0, err
    rows = load_measurements(other, load_hardware(bundled("hardware.csv"))).rows
    assert [(r.model, r.gpus) for r in rows] == [("kimi-k2.5", 4), ("kimi-k2.5", 4)]


def test_stale_temp_files_of_killed_writers_are_removed(work, capsys):
    stale = work / "data" / ".measurements.csv.abc123.tmp"
    stale.write_text("half a file")
    assert run(capsys, "add", *ROW)[0] == 0
    assert not stale.exists()


def test_append_rows_library_call_is_all_or_nothing(work):
    hw = load_hardware(work / "data" / "hardware.csv")
    good = {"hardware": "b300", "engine": "sglang", "method": "ar", "accept_len": "1",
            "tok_s": "130", "source": "lib", "model": None, "gpus": None}
    bad = {**good, "tok_s": "0"}
    path = work / "data" / "measurements.csv"
    before = path.read_bytes()
    with pytest.raises(living.RowErrors) as info:
        living.append_rows(path, hw, [living.NewRow("batch", 2, good),
                                      living.NewRow("batch", 3, bad)], what="batch")
    assert len(info.value.errors) == 1 and info.value.exit_code == 2
    assert path.read_bytes() == before
    result = living.append_rows(path, hw, [living.NewRow("batch", 2, good)])
    assert [r.tok_s for r in result.rows] == [130.0] and result.total_rows == 10


def test_a_row_whose_gpus_cannot_hold_the_model_is_refused(work, capsys):
    """An exploratory pass: `add --model kimi-k2.6 --hardware h100 --gpus 1 ...` appended the
    row (exit 0; 500 GB of weights on one 80 GB GPU) and `update` refitted with it; the line
    confirming it did not name the model."""
    before = (work / "data" / "measurements.csv").read_text()
    code, out, err = run(capsys, "add", "--hardware", "h100", "--gpus", "1", "--engine", "vllm",
                         "--method", "ar", "--accept", "1", "--tok-s", "140", "--source", "x")
    assert (code, out) == (2, "")
    # 1000B parameters x 0.140625 bytes (Q1_0's 1.125 bits: the fewest any quantisation
    # stores; a row may run a quantisation of its card's checkpoint) = 140.6 GB > 80 GB
    assert ("row 11, column 'gpus': kimi-k2.6's 1000B parameters take 140.6 GB even at 1.125 "
            "bits per weight (Q1_0, the fewest any quantisation stores): they do not fit in 1 x "
            "h100 (80.0 GB) (fix: check the GPU count (at least 2 h100; 8 at the card's 0.6 "
            "bytes)") in err
    assert (work / "data" / "measurements.csv").read_text() == before
    code, out, _ = run(capsys, "add", "--hardware", "h100", "--gpus", "8", "--engine", "vllm",
                       "--method", "ar", "--accept", "1", "--tok-s", "40", "--source", "x")
    assert code == 0 and "row 11: kimi-k2.6, h100 x8 vllm ar" in out


def test_a_row_whose_gpus_cannot_hold_the_cards_weights_is_added_with_a_warning(work, capsys):
    """A new-user walkthrough: a 61 GB bf16 card measured on one 16 GB GPU was appended without
    a word (the run must have used a smaller quantisation), and the fit then learned the pair's
    efficiency from the card's bytes. The row is kept (a quantised run is real), the warning
    says what the fit will do with it and how to name the quantisation's card."""
    flags = ["add", "--hardware", "h100", "--gpus", "4", "--engine", "vllm", "--method", "ar",
             "--accept", "1", "--tok-s", "30", "--source", "x"]
    code, out, err = run(capsys, *flags)
    # 1000B parameters x 0.6 bytes = 600 GB > 4 x 80 GB; at 1.125 bits 140.6 GB would fit
    # 600 GB / 80 GB = 7.5: the card's bytes take 8 h100. A walkthrough imported an FP8
    # model's serving file (236.5 GB) with --gpus 1 for its 4 x h200: the warning said only
    # "a smaller quantisation", which the file's own FP8 name contradicted
    line = ("ddtree-bayes: warning: row 11: kimi-k2.6's card puts its weights at 600.0 GB (1000B "
            "parameters at 0.6 bytes), more than 4 x h100 hold (320.0 GB): the run used more "
            "GPUs than the row says (the card's bytes take at least 8 h100), or a smaller "
            "quantisation, but a fit prices the card's bytes; check the GPU count, or give "
            "that quantisation its own card (`card add --gguf FILE`, or --bytes-per-weight) "
            "and name it with --model")
    assert code == 0 and "row 11: kimi-k2.6, h100 x4 vllm ar" in out
    assert err.splitlines() == [line]
    code, out, err = run(capsys, *flags[:-2], "--source", "y", "--format", "json")
    assert code == 0 and json.loads(out)["warnings"] == [line.split("warning: ", 1)[1]
                                                         .replace("row 11", "row 12")]
    code, out, err = run(capsys, *[f if f != "4" else "8" for f in flags])
    assert code == 0 and err == ""            # 640 GB hold the card's 500 GB


def test_a_context_no_gpu_can_hold_is_refused(work, capsys):
    """An exploratory pass: `add --context 1000000000000` was appended (predict then warned
    that its KV cache needs 35,136,000 GB). Refused when even half the card's bytes per token
    exceed every GPU's memory; a long real context still goes in."""
    path = work / "data" / "measurements.csv"
    before = path.read_text()
    flags = ("add", "--hardware", "b300", "--engine", "sglang", "--method", "ar", "--accept", "1",
             "--tok-s", "100", "--source", "x")
    code, out, err = run(capsys, *flags, "--context", "1000000000000")
    assert (code, out) == (2, "")
    # 35136 / 2 bytes x 1e12 tokens = 1.76e7 GB > 8 x 288 GB
    assert ("row 11, column 'context_tokens': kimi-k2.6's KV cache at context 1000000000000 takes "
            "17568000.0 GB even at half the card's bytes (35136 bytes per token, the card's "
            "kv_bytes_per_token): more than 8 x b300 hold "
            "(2304.0 GB) (fix: check context_tokens (tokens, not bytes or characters) and the GPU "
            "count)") in err
    assert path.read_text() == before
    code, out, _ = run(capsys, *flags, "--context", "131072")
    assert code == 0 and "row 11: kimi-k2.6, b300 x8 sglang ar" in out


LLAMA_AR = ["--model", "llama-3.1-8b-instruct", "--hardware", "h100", "--gpus", "1",
            "--engine", "vllm", "--method", "ar", "--accept", "1", "--tok-s", "141.4",
            "--source", "my run"]
HEADER = ",".join(COLUMNS) + "\n"


def test_add_data_starts_a_new_file(tmp_path, monkeypatch, capsys):
    """In a folder without data/, `add --data m.csv ...` failed "m.csv: file not found (fix:
    ... pass --data FILE ...)" although --data was given: the first row had to be typed by
    hand. It now creates the file with the standard header (under the lock, atomically) and
    says so (s45b finding 8: "now 1 measurements", now singular)."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "add", "--data", "m.csv", *LLAMA_AR)
    assert code == 0, err
    assert out.splitlines()[0] == "created m.csv with the standard header"
    assert "appended 1 row to m.csv (now 1 measurement):" in out
    path = tmp_path / "m.csv"
    assert path.read_text() == HEADER + "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1,,141.4,my run,\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert not list(tmp_path.glob("*.tmp"))
    # a second row appends as to any file (the GPU count now taken from the first)
    code, out, err = run(capsys, "add", "--data", "m.csv", *LLAMA_AR[:4], *LLAMA_AR[6:-4],
                         "--tok-s", "140.2", "--source", "my run 2")
    assert code == 0, err
    assert "created" not in out and "(now 2 measurements)" in out
    # a row that fills an optional column: the header gets it too
    code, out, err = run(capsys, "add", "--data", "c.csv", *LLAMA_AR, "--concurrency", "4")
    assert code == 0, err
    assert (tmp_path / "c.csv").read_text() == (
        ",".join(COLUMNS) + ",concurrency\n"
        "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1,,141.4,my run,,4\n")
    # --format json says it too
    code, out, err = run(capsys, "add", "--data", "j.csv", *LLAMA_AR, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["created"] is True


def test_add_data_starts_from_a_header_only_file(tmp_path, monkeypatch, capsys):
    """A header-only file was refused "no measurement rows (fix: add at least one row under
    the header)": it is now a start."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "m.csv"
    path.write_text(HEADER)
    code, out, err = run(capsys, "add", "--data", "m.csv", *LLAMA_AR)
    assert code == 0, err
    assert "created" not in out
    assert path.read_text() == HEADER + "llama-3.1-8b-instruct,h100,1,vllm,ar,,,1,1,,141.4,my run,\n"
    code, out, err = run(capsys, "add", "--data", "m.csv", *LLAMA_AR, "--format", "json")
    assert code == 2 and "identical to row 2" in err   # (as in any file)


@pytest.mark.parametrize("argv, expected", [
    # a folder that does not exist stays an error: nothing is created
    (["--data", "nowhere/m.csv", *LLAMA_AR],
     "ddtree-bayes: error: nowhere/m.csv: the folder nowhere does not exist (fix: create it "
     "first, or give --data a file in an existing folder)"),
    # the first row of a new file names its model and GPU count: no row to take them from
    (["--data", "m.csv", *LLAMA_AR[2:]],
     "ddtree-bayes: error: m.csv (new row), row 2, column 'model': m.csv has no rows yet to "
     "take the model from (fix: name the target model with --model)"),
    (["--data", "m.csv", *LLAMA_AR[:4], *LLAMA_AR[6:]],
     "ddtree-bayes: error: m.csv (new row), row 2, column 'gpus': no llama-3.1-8b-instruct row "
     "on h100 in m.csv to take the GPU count from (fix: pass --gpus N, the GPUs the run used)"),
])
def test_add_data_to_a_new_file_refuses_what_it_cannot_start(tmp_path, monkeypatch, capsys,
                                                              argv, expected):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "add", *argv)
    assert code == 2 and err.strip() == expected and not out
    # nothing written (the lock file of the folder aside, as for any add)
    assert {p.name for p in tmp_path.rglob("*")} <= {".m.csv.lock"}


def test_a_chain_is_written_and_keyed_with_its_budget_whichever_way_it_is_added(work, capsys):
    """`add` with --budget 3 wrote `3,3` for an EAGLE-3 depth-3 chain and `add --from-bench`
    (no --budget) `3,` (blank): two spellings of one configuration, which predict answered
    differently and the duplicate check told apart. A chain's budget is its depth (README
    glossary; the bundled rows write `eagle3,3,3`): both now write it, and a row spelt either
    way repeats the other."""
    chain = ["--hardware", "rtx-pro-6000", "--engine", "vllm", "--method", "eagle3",
             "--block", "3", "--accept", "1.95", "--tok-s", "124", "--source", "my run"]
    path = work / "data" / "measurements.csv"
    before = path.read_text()
    code, out, err = run(capsys, "add", *chain)
    assert code == 0, err
    assert path.read_text()[len(before):] == (
        "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,1.95,,124,my run,\n")
    code, out, err = run(capsys, "add", *chain, "--budget", "3")
    assert code == 2 and "identical to row 11" in err
    # a hand-written row with the budget blank is the same configuration too
    path.write_text(before + "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,,,1.95,,124,my run,\n")
    code, out, err = run(capsys, "add", *chain, "--budget", "3")
    assert code == 2 and "identical to row 11" in err


def test_add_warns_of_an_engine_one_edit_from_a_known_one(work, capsys):
    """`add --engine sglnag` was written with rc 0 and warnings [] (predict warns of the same
    typo): the row is kept, and stderr and the JSON say which name it is one edit from."""
    argv = ["add", "--hardware", "b300", "--engine", "sglnag", "--method", "ddtree", "--block",
            "16", "--budget", "128", "--accept", "15", "--tok-s", "650", "--source", "t",
            "--gpus", "8"]   # (a defaulted GPU count is a warning of its own)
    code, out, err = run(capsys, *argv, "--format", "json")
    line = ("row 11: engine 'sglnag' is one edit from 'sglang' (2 rows): did you mean 'sglang'? "
            "(as written it is fitted as another engine)")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [line]
    assert err == f"ddtree-bayes: warning: {line}\n"
    assert load(work).rows[-1].engine == "sglnag"
    # one edit from an engine the file names (vllm, 7 rows); a new engine near none: no word
    code, out, err = run(capsys, *argv[:4], "vlm", *argv[5:])
    assert code == 0, err
    assert err == ("ddtree-bayes: warning: row 12: engine 'vlm' is one edit from 'vllm' "
                   "(7 rows): did you mean 'vllm'? (as written it is fitted as another engine)\n")
    code, out, err = run(capsys, *argv[:4], "lmdeploy", *argv[5:])
    assert code == 0 and err == "", err


H200_AR = ["--hardware", "h200", "--gpus", "8", "--engine", "sglang", "--method", "ar",
           "--accept", "1", "--source", "walkthrough", "--format", "json"]


def test_add_warns_of_a_step_faster_than_reading_the_weights(work, capsys):
    """Kimi K2.6 AR at 5000 tok/s on 8x H200 was appended with "step 0.2 ms" and nothing else:
    reading its card's active weights once takes 32e9 x 0.5 B / (8 x 4.8e12 B/s) = 0.417 ms
    (its 32 B leave the input embedding out: embed_params_b 0) (engine/scenario.weights_read_ms,
    the floor predict's read_floor_warning uses). Kept, with a warning (stderr in the table
    form; the JSON's warnings): a deployment quantised below the card's bytes reads less."""
    code, out, err = run(capsys, "add", *H200_AR, "--tok-s", "5000")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [
        "row 11: step 0.2 ms is shorter than reading kimi-k2.6's active weights at the full "
        "bandwidth (0.417 ms, 0.5 bytes per weight) on 8 x h200: kept, as a deployment "
        "quantised below the card's bytes reads less (give it its own card, `card add --gguf "
        "FILE` or --bytes-per-weight, and name it with --model); else check --tok-s (with "
        "--concurrency, the streams' total), --accept and --gpus"]
    assert load(work).rows[-1].tok_s == 5000
    # at the floor and above: nothing said (1000 / 0.41667 ms = 2400 tok/s; at context 0,
    # not a second run of row 11's configuration, which is 2.08x apart)
    code, out, err = run(capsys, "add", *H200_AR, "--tok-s", "2399", "--context", "0")
    assert code == 0 and json.loads(out)["warnings"] == [], err


def test_add_warns_of_a_context_above_the_models_longest(work, capsys):
    """--context 10m (10485760 tokens) on Kimi K2.6, whose card's max_context_tokens is 262144:
    predict warned of it (engine/scenario.max_context_warning), add said nothing."""
    code, out, err = run(capsys, "add", *H200_AR[:-2], "--tok-s", "20", "--context", "10m")
    assert code == 0, err
    assert err == (
        "ddtree-bayes: warning: row 11: context 10485760 is above kimi-k2.6's longest, 262144 "
        "tokens (max_position_embeddings, its card): the model takes no such context unless "
        "its RoPE is scaled further: kept, as a deployment that scales it so takes it; else "
        "check --context (tokens, not characters or bytes)\n")
    assert "row 11: kimi-k2.6, h200 x8 sglang ar M=1 ctx 10485760 accept 1" in out
    code, out, err = run(capsys, "add", *H200_AR, "--tok-s", "20", "--context", "256k")
    assert code == 0 and json.loads(out)["warnings"] == [], err


def test_add_refuses_a_step_faster_than_any_quantisation_reads(work, capsys):
    """Mixtral AR at 2000 tok/s on 2x MI210 (0.5 ms) was kept with a warning that it might be
    "quantised below the card's bytes", then spoilt every fit. Reading Kimi K2.6's 32B active
    weights at Q1_0's 1.125 bits (the fewest any quantisation stores: llama.cpp's 1-bit type,
    18 bytes per 128 weights) over 8 x H200's 4.8 TB/s takes 32e9 x 1.125 / 8 / 38.4e12 s =
    0.117 ms: 10000 tok/s (a 0.1 ms AR step) is impossible, refused (exit 2, nothing
    written); 7000 tok/s (0.143 ms, refused while the floor was IQ1_S's 1.5625 bits: 0.163
    ms) and 5000 tok/s (0.2 ms) stay warnings."""
    before = (work / "data" / "measurements.csv").read_bytes()
    code, out, err = run(capsys, "add", *H200_AR[:-2], "--tok-s", "10000")
    assert code == 2 and out == ""
    assert err == (
        "ddtree-bayes: error: data/measurements.csv (new row), row 11, column 'tok_s': step "
        "0.1 ms (10000 tok/s at accept 1) is shorter than reading kimi-k2.6's 32B active "
        "weights at 1.125 bits per weight (Q1_0, the fewest any quantisation stores) over "
        "8 x h200 (38.4 TB/s): 0.117 ms; no deployment runs that fast (fix: check tok_s "
        "(tokens per second; with concurrency, the streams' total), accept_len and gpus)\n")
    assert (work / "data" / "measurements.csv").read_bytes() == before
    code, out, err = run(capsys, "add", *H200_AR[:-2], "--tok-s", "7000")
    assert code == 0 and "shorter than reading" in err, err   # (kept: a warning)
    before = (work / "data" / "measurements.csv").read_bytes()
    # a --from file names its file and row; a speculative row without accept_len is unchecked
    rows = work / "l.csv"
    rows.write_text(",".join(COLUMNS) + "\n"
                    "kimi-k2.6,h200,8,sglang,ar,,,1,1.0,,133,t,\n"
                    "kimi-k2.6,h200,8,sglang,ddtree,16,32,33,,,20000,t,\n"
                    "kimi-k2.6,h200,8,sglang,ar,,,1,,,12000,t,\n")
    code, out, err = run(capsys, "add", "--from", str(rows))
    assert code == 2
    assert err.startswith(f"ddtree-bayes: error: {rows}: 1 problem, nothing appended: {rows}, "
                          "row 4, column 'tok_s': step 0.0833 ms (12000 tok/s at accept 1) is "
                          "shorter than")
    assert (work / "data" / "measurements.csv").read_bytes() == before


RTX_AR = ["--hardware", "rtx-pro-6000", "--gpus", "8", "--engine", "vllm", "--source", "t",
          "--format", "json"]
#: What add says after a row slower than one at a longer context (adv6).
CONTEXT_ONLY_ADDS = ("a longer context only adds KV cache to read, never a faster step: was "
                     "--context the prompt alone? (the mean KV length a decode step reads, in "
                     "tokens: the prompt plus half the answer) else check --tok-s")


def context_only_adds_of(row: int, streams: int = 1) -> str:
    """:data:`CONTEXT_ONLY_ADDS` said by a new row at the longer context: the hint is of the
    other row (``row``), at the shorter one; at ``streams`` > 1 it asks of the KV cache too."""
    queued = ("" if streams == 1 else f"; or did the KV cache hold fewer than {streams} "
              "streams (the engine queues the rest: fewer decode together)?")
    return ("a longer context only adds KV cache to read, never a faster step: was row "
            f"{row}'s context_tokens its prompt alone? (the mean KV length a decode step reads, "
            f"in tokens: the prompt plus half the answer){queued} else check row {row}'s tok_s "
            "or this row's --tok-s")


def test_add_warns_of_a_batched_total_below_one_stream(work, capsys):
    """8 streams at 80 tok/s in total were appended without a word, though one stream of the
    same model, system and engine runs at 84.6 tok/s at that context (row 5) and 70.5 at a
    longer one (row 7): most likely one stream's tok/s typed as the total. Kept, warned; the
    shorter context's 91.5 (row 4) is no comparison (a longer context is slower)."""
    code, out, err = run(capsys, "add", *RTX_AR, "--method", "ar", "--accept", "1",
                         "--context", "16384", "--concurrency", "8", "--tok-s", "80")
    line = ("row 11: 80 tok/s for 8 streams is below one stream's 84.6 tok/s (row 5: kimi-k2.6 "
            "rtx-pro-6000x8 vllm ar, context 16384): was the per-stream tok/s typed as the "
            "total? (tok_s at concurrency C is the C streams' total)")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [line]
    assert load(work).rows[-1].tok_s == 80
    code, out, err = run(capsys, "add", *RTX_AR, "--method", "ar", "--accept", "1",
                         "--context", "32768", "--concurrency", "8", "--tok-s", "400")
    # (a total above every one stream's; beside it, row 11's slip is 80% slower at the shorter
    # context, adv6)
    assert code == 0 and json.loads(out)["warnings"] == [
        "row 12: row 11's 80 tok/s at context 16384 is 80.0% below this row's 400 tok/s at "
        "context 32768 of the same configuration (kimi-k2.6 rtx-pro-6000x8 vllm ar M=1 at "
        "accept_len 1, 8 streams): " + context_only_adds_of(11, streams=8)], err


def test_add_warns_of_a_speculative_row_at_accept_1_faster_than_ar(work, capsys):
    """EAGLE-3 at accept_len 1 (one token a step, each step dearer than AR's) at 95 tok/s was
    appended without a word beside AR's 91.5 (row 4, context 0): an acceptance rate typed as
    the length? Kept, warned."""
    code, out, err = run(capsys, "add", *RTX_AR, "--method", "eagle3", "--block", "3",
                         "--budget", "3", "--accept", "1", "--context", "0", "--tok-s", "95")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [
        "row 11: eagle3 at accept_len 1 (one token a step, each dearer than autoregressive "
        "decoding's) at 95 tok/s is faster than ar's 91.5 tok/s (row 4: kimi-k2.6 "
        "rtx-pro-6000x8 vllm, context 0): was an acceptance rate (0 to 1) typed as the length? "
        "(accept_len counts the accepted draft tokens plus the bonus token)"]
    code, out, err = run(capsys, "add", *RTX_AR, "--method", "eagle3", "--block", "3",
                         "--budget", "3", "--accept", "1", "--context", "0", "--tok-s", "60")
    assert code == 0 and json.loads(out)["warnings"] == [], err


def test_add_warns_of_a_run_far_from_its_configuration(work, capsys):
    """A second run of row 5's configuration (AR at context 16384, 84.6 tok/s) at 200 tok/s,
    2.36x apart, was appended without a word: a fit reads it as every configuration's
    scatter. Kept, warned, naming row 5; then 150 tok/s (1.77x row 5) is no slip of a repeat.
    adv6: each is also faster at 16384 tokens than row 4 at context 0 (91.5 tok/s), which a
    longer context never is: said too."""
    code, out, err = run(capsys, "add", *RTX_AR, "--method", "ar", "--accept", "1",
                         "--context", "16384", "--tok-s", "200")
    assert code == 0, err
    shape = ("of the same configuration (kimi-k2.6 rtx-pro-6000x8 vllm ar M=1 at accept_len 1, 1 "
             "stream): ")
    assert json.loads(out)["warnings"] == [
        "row 11: row 4's 91.5 tok/s at context 0 is 54.2% below this row's 200 tok/s at context "
        "16384 " + shape + context_only_adds_of(4),
        "row 11: 200 tok/s is 2.36x apart from row 5's 84.6 tok/s, a run of the same configuration "
        "(kimi-k2.6, rtx-pro-6000x8 vllm ar M=1 ctx=16384): runs that far apart are almost "
        "always a unit or entry error (check tok_s: per-user or total? and the configuration "
        "columns)"]
    code, out, err = run(capsys, "add", *RTX_AR, "--method", "ar", "--accept", "1",
                         "--context", "16384", "--tok-s", "150")
    assert code == 0 and json.loads(out)["warnings"] == [   # (row 11's 200: 1.33x)
        "row 12: row 4's 91.5 tok/s at context 0 is 39.0% below this row's 150 tok/s at context "
        "16384 " + shape + context_only_adds_of(4)], err


def test_a_misspelt_column_of_a_from_file_says_which_it_means(work, capsys):
    """`add --from` with a header `concurency` said "(fix: drop the column, or add it to
    data/measurements.csv's header)", and with `toks` "missing column tok_s", neither naming
    the column meant; the data file's own `toks` likewise. Each now names the misspelt column
    and the one it means (exit 2, nothing written)."""
    before = (work / "data" / "measurements.csv").read_bytes()
    row = "kimi-k2.6,b300,8,sglang,ar,,,1,1.0,,130,t,"
    for typo, meant, extra in (("concurency", "concurrency", ",4"), ("toks", "tok_s", "")):
        path = work / f"{typo}.csv"
        header = (",".join(COLUMNS) + "," + typo if extra
                  else ",".join(COLUMNS).replace("tok_s", typo))
        path.write_text(f"{header}\n{row}{extra}\n")
        code, out, err = run(capsys, "add", "--from", str(path))
        assert code == 2 and out == ""
        assert err == (f"ddtree-bayes: error: {path}, row 1, column '{typo}': unknown column, "
                       f"read as no column (fix: did you mean '{meant}'? rename it: a column "
                       "this reader does not know is ignored)\n")
    data = work / "data" / "measurements.csv"
    assert data.read_bytes() == before
    data.write_text(before.decode().replace("tok_s", "toks", 1))
    code, out, err = run(capsys, "add", *ROW)
    assert code == 2
    assert err == ("ddtree-bayes: error: data/measurements.csv, row 1, column 'toks': unknown "
                   "column, read as no column (fix: did you mean 'tok_s'? rename it: a column "
                   "this reader does not know is ignored)\n")


NEXT = "scores it against the latest fit and reweights its posterior or refits"


def fake_latest_fit(work) -> None:
    """A models/latest.json naming a fit file that exists: what `add` looks for (it loads
    no fit)."""
    (work / "models" / "fits").mkdir(parents=True)
    (work / "models" / "fits" / "20260101T000000Z-pointmss.nc").write_bytes(b"")
    (work / "models" / "latest.json").write_text(
        json.dumps({"file": "fits/20260101T000000Z-pointmss.nc"}))


def test_adds_next_hint_names_the_file_update_needs(work, capsys):
    """`add --data mine.csv ...` ended "next: `ddtree-bayes update` scores it ...", though that
    update reads data/measurements.csv (and after `fit --data mine.csv` is refused). The hint
    names --data for another file, quoted so that a path with spaces pastes; a row added to
    the default file keeps the plain command."""
    fake_latest_fit(work)
    code, out, err = run(capsys, "add", *ROW)
    assert code == 0, err
    assert out.splitlines()[-1] == f"next: `ddtree-bayes update` {NEXT}"
    code, out, err = run(capsys, "add", "--data", "data/measurements.csv", *ROW[:-1], "again")
    assert code == 0, err
    assert out.splitlines()[-1] == f"next: `ddtree-bayes update` {NEXT}"
    code, out, err = run(capsys, "add", "--data", "my runs.csv", *LLAMA_AR)
    assert code == 0, err
    assert out.splitlines()[-1] == f"next: `ddtree-bayes update --data 'my runs.csv'` {NEXT}"


def test_adds_next_hint_before_any_fit_is_fit(work, capsys):
    """A first session (README, "Adding your own data": card add, add --from-bench, fit) in a
    folder with no fit yet: add ended "next: `ddtree-bayes update` scores them against the
    latest fit ...", and that update fails "no fit found in .../models (fix: run
    `ddtree-bayes fit` first)" (exit 3). With no fit here the hint is `fit`, with the --data
    the file needs; once a fit exists it is `update` again."""
    code, out, err = run(capsys, "add", *ROW)
    assert code == 0, err
    assert out.splitlines()[-1] == ("next: `ddtree-bayes fit` fits the file (there is no fit "
                                    "here yet for `ddtree-bayes update` to score it against)")
    code, out, err = run(capsys, "add", "--data", "my runs.csv", *LLAMA_AR)
    assert code == 0, err
    assert out.splitlines()[-1] == ("next: `ddtree-bayes fit --data 'my runs.csv'` fits the "
                                    "file (there is no fit here yet for `ddtree-bayes update` "
                                    "to score it against)")
    assert not (work / "models").exists()   # (nothing made by looking)
    fake_latest_fit(work)
    code, out, err = run(capsys, "add", *ROW[:-1], "again")
    assert code == 0, err
    assert out.splitlines()[-1] == f"next: `ddtree-bayes update` {NEXT}"


def test_a_blank_context_is_checked_at_the_priors_default(work, capsys):
    """A row without --context runs at the priors' default_context_tokens (the fit reads it
    so, core/data.py Measurement.context), but add checked its context against the card as 0:
    at a default of 300000 tokens, above Kimi K2.6's 262144, it said nothing."""
    (work / "models").mkdir()
    priors = bundled("priors.toml").read_text()
    assert "\ndefault_context_tokens = 0\n" in priors
    (work / "models" / "priors.toml").write_text(
        priors.replace("\ndefault_context_tokens = 0\n", "\ndefault_context_tokens = 300000\n", 1))
    code, out, err = run(capsys, "add", *H200_AR, "--tok-s", "20")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [
        "row 11: context 300000 is above kimi-k2.6's longest, 262144 tokens "
        "(max_position_embeddings, its card): the model takes no such context unless its RoPE "
        "is scaled further: kept, as a deployment that scales it so takes it; else check "
        "--context (tokens, not characters or bytes)"]
    assert load(work).rows[-1].context_tokens is None   # (written blank, as given)


@pytest.mark.parametrize("newline,last", [("\n", True), ("\r\n", True), ("\n", False)])
def test_adding_the_concurrency_column_keeps_each_rows_text(work, capsys, newline, last):
    """The first C > 1 row adds the concurrency column to the header. The rows already there
    were re-serialised: the bundled row 4's `"vLLM TP8 DCP1 TRITON_MLA fp8 KV; C=1; INT4
    experts"` lost its quotes (it needs none), a padded cell its blanks. The CSV meant the same,
    but a user's file should change only by the column: each record keeps its text (a quoted
    notes field over two lines included), plus one empty cell; the header, `,concurrency`."""
    path = work / "data" / "measurements.csv"
    header, *rows = bundled("measurements.csv").read_text(encoding="utf-8").splitlines()
    assert '"vLLM TP8 DCP1 TRITON_MLA fp8 KV; C=1; INT4 experts"' in rows[2]
    two_lines = ('kimi-k2.6,b300,8,sglang,ar,,,1,1.0,4096, 130 ,mine,"a note""s\n'
                 'second line"')
    records = [header, *rows[:3], "", *rows[3:], two_lines]   # (a blank line stays blank)
    text = newline.join(records) + (newline if last else "")
    path.write_bytes(text.encode())
    code, _, err = run(capsys, "add", "--hardware", "b300", "--engine", "sglang", "--method",
                       "ar", "--accept", "1", "--concurrency", "4", "--tok-s", "400",
                       "--source", "x")
    assert code == 0, err
    kept = newline.join([header + ",concurrency", *(r + "," for r in rows[:3]), "",
                         *(r + "," for r in rows[3:]), two_lines + ","]) + (newline if last else "")
    after = path.read_bytes()
    assert after[:len(kept.encode())] == kept.encode()
    assert after[len(kept.encode()):] == (
        ("" if last else newline)
        + f"kimi-k2.6,b300,8,sglang,ar,,,1,1,,400,x,,4{newline}").encode()


def test_add_warns_of_a_speculative_step_shorter_than_ar(work, capsys):
    """A speculative step verifies several tokens and runs the drafter, so on one deployment it
    never takes less time than an autoregressive step at the same or a shorter context. Rows
    of two deployments filed under one name (a power-limited GPU, another quantisation) broke
    that and were appended without a word: a held-out collection's AR rows at 32 tok/s beside
    the corpus's MTP rows of "the same" system at 100-120 took the fit's answer +84% off with
    an interval 12% wide. Row 4 (AR, context 0): 91.5 tok/s, a 10.93 ms step. EAGLE-3 at
    accept_len 2 and 250 tok/s is an 8.00 ms step, 26.8% shorter: warned; at 200 tok/s (10.00
    ms, 8.5% shorter: within two runs' scatter) not."""
    eagle = [*RTX_AR, "--method", "eagle3", "--block", "3", "--budget", "3", "--context", "0"]
    code, out, err = run(capsys, "add", *eagle, "--accept", "2", "--tok-s", "250")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [
        "row 11: eagle3's step, 8 ms (250 tok/s at accept_len 2), is 26.8% shorter than ar's "
        "10.9 ms (row 4: 91.5 tok/s; kimi-k2.6 rtx-pro-6000x8 vllm, context 0): a speculative "
        "step verifies 4 tokens and runs the drafter, never in less time than one token's step "
        "on the same deployment: two deployments under one name (a power limit, another "
        "quantisation or engine version)? give one its own GPU name (`ddtree-bayes hardware "
        "add NAME --like rtx-pro-6000`) or model card; else check accept_len and tok_s"]
    assert load(work).rows[-1].tok_s == 250   # (kept: a warning)
    code, out, err = run(capsys, "add", *eagle, "--accept", "2", "--tok-s", "200")
    assert code == 0 and json.loads(out)["warnings"] == [], err


def test_add_warns_of_an_ar_step_longer_than_a_speculative_one(work, capsys):
    """The same contradiction met from the other side: a new AR row beside a file's
    speculative rows (see the test above). Row 9: EAGLE-3 at accept 1.948 and 125 tok/s, a
    15.58 ms step at context 0. AR at 60 tok/s (16.67 ms; row 9 6.5% shorter): no word of it; at
    50 tok/s (20.0 ms; row 9 22.1% shorter): warned on the AR row, naming row 9. (adv6: each is
    also slower at context 0 than row 5's AR at 16384, 84.6 tok/s: said too.)"""
    ar = [*RTX_AR, "--method", "ar", "--accept", "1", "--context", "0"]
    shape = ("of the same configuration (kimi-k2.6 rtx-pro-6000x8 vllm ar M=1 at accept_len 1, 1 "
             "stream): ")
    code, out, err = run(capsys, "add", *ar, "--tok-s", "60")
    assert code == 0 and json.loads(out)["warnings"] == [
        "row 11: 60 tok/s at context 0 is 29.1% below row 5's 84.6 tok/s at context 16384 "
        + shape + CONTEXT_ONLY_ADDS], err
    code, out, err = run(capsys, "add", *ar, "--tok-s", "50")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [
        "row 12: ar's step, 20 ms (50 tok/s), is longer than eagle3's 15.6 ms (row 9: 125 tok/s "
        "at accept_len 1.948; kimi-k2.6 rtx-pro-6000x8 vllm, context 0): eagle3's step is 22.1% "
        "shorter, yet a speculative step verifies 4 tokens and runs the drafter, never in less "
        "time than one token's step on the same deployment: two deployments under one name (a power limit, "
        "another quantisation or engine version)? give one its own GPU name (`ddtree-bayes "
        "hardware add NAME --like rtx-pro-6000`) or model card; else check accept_len and tok_s",
        "row 12: 50 tok/s at context 0 is 40.9% below row 5's 84.6 tok/s at context 16384 "
        + shape + CONTEXT_ONLY_ADDS]


@pytest.mark.parametrize("tok_s,warned", [("61.2", True), ("612", False)])
def test_add_warns_of_a_step_that_grows_past_its_verified_tokens(work, capsys, tok_s, warned):
    """adv5: DDTree b16/B32 (33 verified tokens) at accept_len 13 and 61.2 tok/s, a 212.4 ms
    step, was appended without a word beside row 3's b8/B8 (9 tokens) at 4.4 and 303 tok/s, a
    14.5 ms step: 14.6x the step for 3.67x the tokens, where each verified token is no dearer
    than the first (a 612 tok/s typed as 61.2). Warned (past 2 x 3.67 = 7.33x); at 612 tok/s
    (21.2 ms, 1.46x) not; row 2's AR step (7.52 ms, M = 1) allows 66x, 28.2x is within it."""
    code, out, err = run(capsys, "add", *ROW[:10], "--gpus", "8", "--accept", "13", "--tok-s",
                         tok_s, "--source", "t", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["warnings"] == ([
        "row 11: ddtree at M = 33, 212 ms (61.2 tok/s at accept_len 13) against row 3's ddtree "
        "at M = 9, 14.5 ms (303 tok/s at accept_len 4.4) (kimi-k2.6 b300x8 sglang): the step "
        "grows 14.6x for 3.67x the verified tokens, more than 2x what verifying more tokens "
        "costs (each no dearer than the first): check tok_s (with concurrency, the streams' "
        "total) and accept_len"] if warned else [])


@pytest.mark.parametrize("tok_s,warned", [("110", True), ("880", False)])
def test_add_warns_of_a_total_below_fewer_streams_of_one_configuration(work, capsys, tok_s,
                                                                       warned):
    """adv6: EAGLE-3 on 8 x RTX PRO 6000 at 8 streams, 110 tok/s (one user's rate typed as the
    total), was appended without a word: the C > 1 check compared it only with one stream's AR
    tok/s (row 4: 91.5), which 110 is above. Row 9 ran that configuration at one stream: 125
    tok/s at the same accept_len 1.948 and context 0, so 8 streams together would decode 12.0%
    fewer tokens a second than one (a 141.7 ms step against 15.58 ms: 9.09x the time for 8x the
    streams), which batching never does (the weights are read once a step for all of them).
    880 tok/s (the total, 8 x 110) is not said."""
    code, out, err = run(capsys, "add", "--hardware", "rtx-pro-6000", "--gpus", "8", "--engine",
                         "vllm", "--method", "eagle3", "--block", "3", "--accept", "1.948",
                         "--context", "0", "--concurrency", "8", "--tok-s", tok_s,
                         "--source", "t", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["warnings"] == ([
        "row 11: 110 tok/s for 8 streams is 12.0% below row 9's 125 tok/s for 1 stream of the "
        "same configuration (kimi-k2.6 rtx-pro-6000x8 vllm eagle3 M=4 at accept_len 1.948, "
        "context 0): decoding more streams together never yields fewer tokens a second (the "
        "weights are read once a step for all of them): was one stream's tok/s typed as the "
        "total? (tok_s at concurrency C is the C streams' total); or did the KV cache hold "
        "fewer than 8 streams (the engine queues the rest: fewer decode together)?"]
        if warned else [])


@pytest.mark.parametrize("context,tok_s,warned", [("64", "70.5", True), ("64k", "70", False)])
def test_add_warns_of_a_row_slower_than_a_longer_context(work, capsys, context, tok_s, warned):
    """adv6: an RTX PRO 6000 AR run at 64k context typed as ``--context 64`` (70.5 tok/s, a
    14.18 ms step) was appended without a word beside rows 4-8 of the same configuration: row
    5 decodes 84.6 tok/s (11.82 ms) at 16384 tokens, so this run would be 16.7% slower at 64
    tokens than that one at 16384 (1 - 70.5 / 84.6), where a longer context only adds KV cache
    to read. At 64k (65536; 70 tok/s, a repeat of row 7's 70.5) nothing is said."""
    code, out, err = run(capsys, "add", "--hardware", "rtx-pro-6000", "--gpus", "8", "--engine",
                         "vllm", "--method", "ar", "--context", context, "--tok-s", tok_s,
                         "--source", "t", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["warnings"] == ([
        "row 11: 70.5 tok/s at context 64 is 16.7% below row 5's 84.6 tok/s at context 16384 "
        "of the same configuration (kimi-k2.6 rtx-pro-6000x8 vllm ar M=1 at accept_len 1, 1 "
        "stream): a longer context only adds KV cache to read, never a faster step: was "
        "--context typed in thousands (64 for 65536 tokens) or the prompt alone? (the mean KV "
        "length a decode step reads, in tokens: the prompt plus half the answer) else check "
        "--tok-s"] if warned else [])


def test_the_longer_context_note_of_a_new_row_names_the_other_rows_context(work, capsys):
    """When the NEW row is the one at the longer context, the note's hint read "was --context
    typed in thousands (64 for 65536 tokens)", this row's flag, though 64 is the other row's
    context. Row 11 (AR at --context 64, 70 tok/s: 64k typed in thousands) is in the file;
    a new run at 131072 tokens decodes 80 tok/s, so row 11 is 12.5% below it (1 - 70 / 80;
    row 7's 70.5 at 65536 is 11.9%): the hint names row 11's context_tokens and tok_s, and
    the row at the shorter context keeps its own line."""
    common = ("add", "--hardware", "rtx-pro-6000", "--gpus", "8", "--engine", "vllm",
              "--method", "ar", "--source", "t", "--format", "json")
    code, out, err = run(capsys, *common, "--context", "64", "--tok-s", "70")
    assert code == 0, err
    assert json.loads(out)["warnings"][0].endswith(
        "was --context typed in thousands (64 for 65536 tokens) or the prompt alone? (the mean "
        "KV length a decode step reads, in tokens: the prompt plus half the answer) else check "
        "--tok-s")
    code, out, err = run(capsys, *common, "--context", "131072", "--tok-s", "80")
    assert code == 0, err
    assert json.loads(out)["warnings"] == [
        "row 12: row 11's 70 tok/s at context 64 is 12.5% below this row's 80 tok/s at context "
        "131072 of the same configuration (kimi-k2.6 rtx-pro-6000x8 vllm ar M=1 at accept_len "
        "1, 1 stream): a longer context only adds KV cache to read, never a faster step: was "
        "row 11's context_tokens typed in thousands (64 for 65536 tokens) or its prompt alone? "
        "(the mean KV length a decode step reads, in tokens: the prompt plus half the answer) "
        "else check row 11's tok_s or this row's --tok-s"]

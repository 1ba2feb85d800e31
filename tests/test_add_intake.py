"""Getting data in: properties of `add` (by flags, --from CSV, --from-bench serving files).

- Any source/notes text and any spelling of a plain number round-trips through `add`: the
  row the loader reads back holds exactly what was given, and the rows already in the file
  keep every byte (whatever its line ends, BOM or missing last newline).
- A refused row leaves the file byte-identical.
- A user CSV of odd but valid content (BOM, CRLF, quoting, padding, another column order, a
  concurrency column, a blank accept_len) imports the values it holds.
- Adding the first C > 1 row adds the concurrency column: every other row keeps its text
  (quoting, line ends) and every cell, plus an empty one.
- A serving benchmark's row holds C x 1000 / median_tpot_ms (the C streams' total), its C in
  the concurrency column, and the file's acceptance length.

The tests marked xfail(strict=True) at the end are open findings: a benchmark file that says
which engine, GPU or run it is, imported under another name with exit 0.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ddtree_bayes.core.data import COLUMNS, load_hardware, load_measurements
from test_cli_support import copy_bundled_data, run_cli

BENCH = Path(__file__).resolve().parent / "fixtures" / "bench"
ROW = ["--hardware", "b300", "--gpus", "8", "--engine", "sglang", "--method", "ddtree",
       "--block", "16", "--budget", "32", "--accept", "13.1"]
SETTINGS = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                    print_blob=True, suppress_health_check=[HealthCheck.function_scoped_fixture])


def workdir(root: Path, *, crlf: bool = False, bom: bool = False, last_newline: bool = True
            ) -> Path:
    """A copy of the bundled data whose measurement file has the given line ends, BOM and
    last newline (the same rows)."""
    copy_bundled_data(root, writable=True)
    path = root / "data" / "measurements.csv"
    text = path.read_text(encoding="utf-8")
    if not last_newline:
        text = text.rstrip("\n")
    if crlf:
        text = text.replace("\n", "\r\n")
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode("utf-8"))
    return root


def rows_of(root: Path):
    hw = load_hardware(root / "data" / "hardware.csv")
    return load_measurements(root / "data" / "measurements.csv", hw).rows


def cells_of(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))


#: Text a user may put in source/notes: commas, quotes, semicolons, non-ASCII, tabs, line
#: breaks; no NUL (no CSV file holds one), surrounding blanks stripped as `add` strips them.
free_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
                    max_size=40)
files = st.fixed_dictionaries({"crlf": st.booleans(), "bom": st.booleans(),
                               "last_newline": st.booleans()})


def tok_s_texts():
    """A throughput in a plausible range written the ways a plain number is written."""
    def spell(value: float, how: int) -> str:
        return [f"{value:g}", f"{value:.3f}", f"{value:.4e}", f"{value:.2E}", repr(value)][how]

    return st.builds(spell, st.floats(100.0, 1500.0), st.integers(0, 4))


# ---------------------------------------------------------------- add by flags
@SETTINGS
@given(file=files, source=free_text.filter(lambda s: s.strip()), notes=free_text,
       tok_s=tok_s_texts())
def test_a_row_added_by_flags_reads_back_exactly_and_keeps_every_other_byte(
        tmp_path_factory, file, source, notes, tok_s):
    root = workdir(tmp_path_factory.mktemp("w"), **file)
    path = root / "data" / "measurements.csv"
    before, old = path.read_bytes(), rows_of(root)
    # (--flag=VALUE: argparse takes a lone "-x" after --source for another flag)
    code, _, err = run_cli(root, "add", *ROW, "--tok-s", tok_s, f"--source={source}",
                           f"--notes={notes}")
    assert code == 0, err
    after = path.read_bytes()
    newline = b"\r\n" if file["crlf"] else b"\n"
    assert after.startswith(before if file["last_newline"] else before + newline)
    assert after.endswith(newline)
    rows = rows_of(root)
    assert rows[:-1] == old
    new = rows[-1]
    assert (new.source, new.notes, new.tok_s) == (source.strip(), notes.strip(), float(tok_s))
    assert (new.model, new.hardware, new.gpus, new.method, new.block, new.budget,
            new.verify_tokens, new.accept_len, new.concurrency) == (
        "kimi-k2.6", "b300", 8, "ddtree", 16, 32, 33, 13.1, 1)


BAD = [("--tok-s", "-3"), ("--tok-s", "0"), ("--tok-s", "612 tok/s"), ("--tok-s", "nan"),
       ("--tok-s", "inf"), ("--tok-s", "6,12"), ("--tok-s", "1e9"), ("--accept", "40"),
       ("--accept", "0.8"), ("--hardware", "B300"), ("--engine", "SGLang"),
       ("--method", "ddtreee"), ("--context", "-1"), ("--gpus", "0"),
       ("--concurrency", "0"), ("--block", "16.5"),
       # 8 x 16 GB hold less than Kimi K2.6's 1000B weights at Q1_0's 1.125 bits (140.6 GB);
       # 8 x L4 (192 GB) hold them, so a row there is kept with a warning
       ("--hardware", "rtx-4080")]


@SETTINGS
@given(file=files, bad=st.sampled_from(BAD))
def test_a_refused_row_leaves_the_file_byte_identical(tmp_path_factory, file, bad):
    root = workdir(tmp_path_factory.mktemp("w"), **file)
    path = root / "data" / "measurements.csv"
    before = path.read_bytes()
    args = list(ROW) + ["--tok-s", "612", "--source", "refused"]
    flag, value = bad
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    code, out, err = run_cli(root, "add", *args)
    assert code == 2 and out == "", (bad, err)
    assert "Traceback" not in err
    assert path.read_bytes() == before


# ---------------------------------------------------------------- add --from a user's CSV
@SETTINGS
@given(file=files, quoting=st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]),
       from_crlf=st.booleans(), from_bom=st.booleans(), pad=st.booleans(),
       order=st.permutations(COLUMNS), conc=st.sampled_from([None, "", "1", "4"]),
       accept=st.sampled_from(["13.1", "", "1.31e1"]), source=free_text.filter(str.strip),
       tok_s=tok_s_texts())
# a first column of free text whose cell starts with '#' is a row, not a comment line (it was
# refused as "a comment line (it starts with '#')", exit 2, nothing appended)
@example(file={"crlf": False, "bom": False, "last_newline": True}, quoting=csv.QUOTE_MINIMAL,
         from_crlf=False, from_bom=False, pad=False,
         order=["source", *(c for c in COLUMNS if c != "source")], conc=None, accept="13.1",
         source="#3 of the sweep", tok_s="612")
def test_a_user_csv_of_odd_but_valid_content_imports_its_values(
        tmp_path_factory, file, quoting, from_crlf, from_bom, pad, order, conc, accept, source,
        tok_s):
    root = workdir(tmp_path_factory.mktemp("w"), **file)
    values = {"model": "kimi-k2.6", "hardware": "b300", "gpus": "8", "engine": "sglang",
              "method": "ddtree", "block": "16", "budget": "32", "verify_tokens": "",
              "accept_len": accept, "context_tokens": "", "tok_s": tok_s, "source": source,
              "notes": 'a "quoted", note'}
    header = list(order) + ([] if conc is None else ["concurrency"])
    if conc is not None:
        values["concurrency"] = conc
    if conc == "4":   # the four streams' total
        values["tok_s"] = f"{4 * float(tok_s):.6g}"
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=quoting, lineterminator="\r\n" if from_crlf else "\n")
    writer.writerow(header)
    # blanks around a number are read as the number (the loader strips every cell)
    writer.writerow([f" {values[h]} " if pad and h in ("gpus", "block", "tok_s") else values[h]
                     for h in header])
    user = root / "mine.csv"
    user.write_bytes(("\ufeff" if from_bom else "").encode() + buf.getvalue().encode("utf-8"))
    path = root / "data" / "measurements.csv"
    before, old = path.read_bytes(), rows_of(root)
    code, _, err = run_cli(root, "add", "--from", str(user))
    assert code == 0, err
    rows = rows_of(root)
    assert rows[:-1] == old
    new = rows[-1]
    assert new.tok_s == float(values["tok_s"])
    assert new.accept_len == (float(accept) if accept else None)
    assert new.concurrency == (4 if conc == "4" else 1)
    assert (new.source, new.notes, new.verify_tokens) == (source.strip(), 'a "quoted", note', 33)
    after = path.read_bytes()
    if conc == "4":   # a concurrency above 1 adds the column: every row keeps its cells
        old_cells, new_cells = cells_of(before), cells_of(after)
        assert new_cells[0] == old_cells[0] + ["concurrency"]
        assert [r[:-1] for r in new_cells[1:len(old_cells)]] == old_cells[1:]
        assert all(r[-1] == "" for r in new_cells[1:len(old_cells)])
        # ... and its text: the header gains ",concurrency", each row "," (the bundled rows
        # are one line each; a quoted field that needs no quotes keeps them)
        lines = before.decode("utf-8").split("\r\n" if file["crlf"] else "\n")
        kept = [lines[0] + ",concurrency", *(line + "," if line else line for line in lines[1:])]
        assert after.startswith(("\r\n" if file["crlf"] else "\n").join(kept).encode("utf-8"))
    else:
        newline = b"\r\n" if file["crlf"] else b"\n"
        assert after.startswith(before if file["last_newline"] else before + newline)


def test_a_user_csv_context_of_32k_is_refused_naming_32768(tmp_path):
    """`add --from FILE` reads its rows as the data file does: `32k` is refused with the
    exact token count to write, one line, nothing written (`--context 32k` is taken)."""
    root = workdir(tmp_path / "w")
    user = root / "mine.csv"
    user.write_text("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
                    "context_tokens,tok_s,source,notes\n"
                    "kimi-k2.6,b300,8,sglang,ddtree,16,32,,13.1,32k,612,mine,\n")
    path = root / "data" / "measurements.csv"
    before = path.read_bytes()
    code, out, err = run_cli(root, "add", "--from", str(user))
    assert (code, out) == (2, "") and path.read_bytes() == before
    assert err == (f"ddtree-bayes: error: {user}: 1 problem, nothing appended: {user}, row 2, "
                   "column 'context_tokens': not a number: "
                   "'32k' (fix: write 32768: 32k is 32768 tokens as --context reads it "
                   "(k = 1024, m = 1048576), and a data file holds plain numbers)\n")


@pytest.mark.parametrize("one", ["1", "1.0", " 1 "])
def test_a_user_csv_concurrency_of_1_adds_no_column(tmp_path, one):
    """Concurrency 1 is the default (a blank cell or no column): a `concurrency` cell of 1 in
    an `add --from` row added the column to a data file that had none, re-serialising every
    row (each gained a trailing comma). Now the file gains the new line alone; a value above
    1 still adds the column (test_a_user_csv_of_odd_but_valid_content_imports_its_values)."""
    root = workdir(tmp_path / "w")
    user = root / "mine.csv"
    user.write_text("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
                    "context_tokens,tok_s,source,notes,concurrency\n"
                    f"kimi-k2.6,b300,8,sglang,ddtree,16,32,,13.1,,612,mine,,{one}\n")
    path = root / "data" / "measurements.csv"
    before = path.read_bytes()
    assert b"concurrency" not in before
    code, _, err = run_cli(root, "add", "--from", str(user))
    assert code == 0, err
    assert path.read_bytes() == before + b"kimi-k2.6,b300,8,sglang,ddtree,16,32,,13.1,,612,mine,\n"
    assert rows_of(root)[-1].concurrency == 1


# ---------------------------------------------------------------- serving benchmarks
def serving_record(fmt: str, streams: int, tpot_ms: float, accept: float) -> dict:
    if fmt == "vllm-serve":
        rec = json.loads((BENCH / "vllm_serve.json").read_text())
        # (its accepted tokens what that acceptance makes them: the import checks the two
        # agree, 1 + accepted / drafts)
        rec.update(spec_decode_acceptance_length=accept, max_concurrent_requests=streams,
                   spec_decode_accepted_tokens=(accept - 1) * rec["spec_decode_num_drafts"])
    else:
        rec = json.loads((BENCH / "sglang_serving.jsonl").read_text().splitlines()[0])
        rec.update(accept_length=accept, concurrency=streams - 0.3 if streams > 1 else 0.99)
    prompts = 8 * streams
    # (its output_throughput what its streams make at that TPOT, as a real run's: the import
    # checks the two agree; 512 output tokens a request, each paying its TTFT)
    made = streams * 512 * 1000.0 / (rec["mean_ttft_ms"] + 511 * tpot_ms)
    rec.update(max_concurrency=streams, num_prompts=prompts, completed=prompts,
               total_input_tokens=1024 * prompts, total_output_tokens=512 * prompts,
               median_tpot_ms=tpot_ms, mean_tpot_ms=tpot_ms * 1.01, output_throughput=made)
    return rec


@SETTINGS
@given(fmt=st.sampled_from(["vllm-serve", "sglang-serving"]),
       streams=st.sampled_from([1, 2, 4, 8, 16, 64]), tpot_ms=st.floats(4.0, 200.0),
       accept=st.floats(1.0, 4.0))
def test_a_serving_run_is_imported_as_the_c_streams_total_at_c(tmp_path_factory, fmt,
                                                               streams, tpot_ms, accept):
    root = workdir(tmp_path_factory.mktemp("w"))
    rec = serving_record(fmt, streams, tpot_ms, accept)
    bench = root / ("run.json" if fmt == "vllm-serve" else "run.jsonl")
    bench.write_text(json.dumps(rec) + "\n")
    code, _, err = run_cli(root, "add", "--from-bench", str(bench), "--hardware", "h100",
                           "--gpus", "1", "--engine", fmt.split("-")[0], "--method", "eagle3",
                           "--block", "3", "--model", "llama-3.1-8b-instruct")
    assert code == 0, err
    with open(root / "data" / "measurements.csv", newline="") as fh:
        row = list(csv.DictReader(fh))[-1]
    assert float(row["tok_s"]) == float(f"{streams * 1000.0 / tpot_ms:.6g}")
    assert row.get("concurrency", "") == ("" if streams == 1 else str(streams))
    assert float(row["accept_len"]) == float(f"{accept:.6g}")
    assert row["context_tokens"] == "1280"   # 1024 prompt + 512 decoded / 2, at every C
    assert "median_tpot_ms" in row["notes"]
    assert (row["model"], row["hardware"], row["gpus"]) == ("llama-3.1-8b-instruct", "h100", "1")


@pytest.mark.parametrize("fmt", ["vllm-serve", "sglang-serving"])
@pytest.mark.parametrize(("change", "says"), [
    ({"errors": ["", "timeout"]}, "'errors' lists 2 requests but 'output_lens' 8: the errors "
                                  "are not these requests'"),
    ({"failed": 0, "errors": [""] * 7 + ["timeout"], "output_lens": [512] * 7 + [0],
      "total_output_tokens": 512 * 7}, "'errors' holds 1 error message but failed is 0: a "
                                       "request with an error did not complete"),
    ({"input_lens": [1023.5] + [1024] * 7}, "'input_lens' request 1 is 1023.5 tokens: a count "
                                            "of tokens is a whole number"),
    ({"output_lens": [512] * 7 + [-512]}, "'output_lens' request 8 is -512 tokens: a count of "
                                          "tokens cannot be negative"),
])
def test_a_serving_runs_bad_request_lengths_write_nothing(tmp_path, fmt, change, says):
    """--save-detailed (vLLM) and --output-details (SGLang) list each request's lengths and
    errors: an errors list of another length was read as "none failed", a length of 1023.5
    tokens taken as given, each with exit 0 and a row appended. Refused: one line naming the
    file, the key and what is wrong, exit 2, the data byte-identical."""
    root = workdir(tmp_path)
    rec = dict(serving_record(fmt, 1, 8.0, 3.0), input_lens=[1024] * 8, output_lens=[512] * 8,
               errors=[""] * 8)
    bench = root / ("run.json" if fmt == "vllm-serve" else "run.jsonl")
    argv = ["add", "--from-bench", str(bench), "--hardware", "h100", "--gpus", "1", "--engine",
            fmt.split("-")[0], "--method", "eagle3", "--block", "3", "--model",
            "llama-3.1-8b-instruct"]
    bench.write_text(json.dumps(dict(rec, **change)) + "\n")
    before = (root / "data" / "measurements.csv").read_bytes()
    code, out, err = run_cli(root, *argv)
    assert code == 2, err
    assert err == (f"ddtree-bayes: error: {bench}, record 1: {says} (fix: pass an unedited "
                   f"{fmt} result file)\n")
    assert (root / "data" / "measurements.csv").read_bytes() == before
    bench.write_text(json.dumps(rec) + "\n")   # (the same run, unedited, is imported)
    code, _, err = run_cli(root, *argv)
    assert code == 0, err
    assert rows_of(root)[-1].context_tokens == 1024 + 256


# ---------------------------------------------------------------- open findings
def _one_tg_record(gpu_info: str) -> list[dict]:
    return [dict(r, gpu_info=gpu_info)
            for r in json.loads((BENCH / "llama_bench_readme.json").read_text())
            if r["n_gen"] > 0]


def test_a_llama_bench_file_is_refused_under_another_engine(tmp_path):
    root = workdir(tmp_path)
    before = (root / "data" / "measurements.csv").read_bytes()
    bench = BENCH / "llama_bench_readme.json"
    code, _, err = run_cli(root, "add", "--from-bench", str(bench),
                           "--engine", "vllm", "--method", "ar", "--model", "qwen3-8b")
    assert code == 2, err
    assert err == (f"ddtree-bayes: error: {bench}, record 2: llama-bench measures llama.cpp "
                   "only, so the run is llama.cpp's, but --engine vllm (fix: drop --engine "
                   "(the file's engine, llama.cpp, is used), or import the result file of the "
                   "vllm run)\n")
    assert (root / "data" / "measurements.csv").read_bytes() == before


def test_a_file_that_names_its_engine_gives_the_rows_engine(tmp_path):
    """Without --engine, a format one engine writes is that engine's, and a serving result
    its backend's; the engine spelt otherwise (llamacpp) agrees with the file's."""
    root = workdir(tmp_path)
    code, _, err = run_cli(root, "add", "--from-bench", str(BENCH / "llama_bench_readme.json"),
                           "--method", "ar", "--model", "qwen3-8b")
    assert code == 0, err
    code, _, err = run_cli(root, "add", "--from-bench", str(BENCH / "sglang_serving.jsonl"),
                           "--bench-records", "1", "--hardware", "b300", "--gpus", "8",
                           "--method", "eagle3", "--block", "3", "--model", "kimi-k2.6")
    assert code == 0, err
    rows = rows_of(root)
    assert [(r.engine, r.hardware) for r in rows[-2:]] == [("llama.cpp", "rtx-4080"),
                                                                 ("sglang", "b300")]
    assert run_cli(workdir(tmp_path / "b"), "add", "--from-bench",
                   str(BENCH / "llama_bench_readme.json"), "--engine", "llamacpp",
                   "--method", "ar", "--model", "qwen3-8b")[0] == 0


def test_a_serving_backend_that_names_no_engine_needs_engine(tmp_path):
    """backend 'openai' (vLLM's default client) speaks an API several engines serve: the
    file names no engine, so --engine is needed and taken as given."""
    root = workdir(tmp_path)
    rec = json.loads((BENCH / "vllm_serve.json").read_text())
    bench = tmp_path / "openai.json"
    bench.write_text(json.dumps(dict(rec, backend="openai", endpoint_type="openai")))
    argv = ["add", "--from-bench", str(bench), "--hardware", "h100", "--gpus", "1",
            "--method", "eagle3", "--block", "3"]
    code, _, err = run_cli(root, *argv)
    assert code == 2
    assert err == (f"ddtree-bayes: error: {bench}, record 1: its backend 'openai', an API "
                   "several engines serve, names no engine (fix: give the engine of the server "
                   "it measured with --engine (e.g. --engine vllm))\n")
    code, _, err = run_cli(root, *argv, "--engine", "sglang")
    assert code == 0, err
    assert rows_of(root)[-1].engine == "sglang"


def test_from_bench_without_method_says_what_is_missing(tmp_path):
    root = workdir(tmp_path)
    code, _, err = run_cli(root, "add", "--from-bench", str(BENCH / "llama_bench_readme.json"))
    assert code == 2
    assert err == ("ddtree-bayes: error: --from-bench needs --method, the data's name of the "
                   "decoding method the run used (ar, eagle3, mtp, ddtree, ...) (fix: give the "
                   "benchmarked configuration, e.g. --method ddtree --budget 32 (and --engine "
                   "when the file does not name it, --hardware when it does not name its GPU))\n")


@pytest.mark.parametrize("argv", [["--engine", "sglang", "--method", "eagle3"],
                                  ["--engine", "vllm", "--method", "mtp"]])
def test_a_vllm_latency_run_is_refused_under_another_engine_or_method(tmp_path, argv):
    root = workdir(tmp_path)
    code, _, err = run_cli(root, "add", "--from-bench", str(BENCH / "vllm_latency_eagle3.json"),
                           "--hardware", "h100", *argv, "--block", "3", "--accept", "2.5")
    assert code == 2, err


def _latency_run(tmp_path: Path, spec: dict | None) -> Path:
    """The EAGLE-3 latency fixture and its side file, with ``speculative_config`` ``spec``."""
    side = json.loads((BENCH / "vllm_latency_eagle3.pytorch.json").read_text())
    side[0]["benchmark"]["extra_info"]["args"]["speculative_config"] = spec
    (tmp_path / "lat.pytorch.json").write_text(json.dumps(side))
    (tmp_path / "lat.json").write_bytes((BENCH / "vllm_latency_eagle3.json").read_bytes())
    return tmp_path / "lat.json"


@pytest.mark.parametrize(("spec", "argv", "problem"), [
    ({"method": "eagle3", "num_speculative_tokens": 3}, ["--method", "mtp", "--block", "3"],
     "the file's run used speculative_config method 'eagle3' (the data's eagle3), but "
     "--method is mtp (fix: give --method eagle3, or import the result file of the mtp run)"),
    ({"method": "deepseek_mtp", "num_speculative_tokens": 3}, ["--method", "eagle3",
                                                               "--block", "3"],
     "the file's run used speculative_config method 'deepseek_mtp' (the data's mtp), but "
     "--method is eagle3 (fix: give --method mtp, or import the result file of the eagle3 run)"),
    (None, ["--method", "eagle3", "--block", "3"],
     "the run's args hold no speculative_config: vLLM decoded without speculation, but "
     "--method is eagle3 (fix: import it with --method ar, or import the result file of a tool "
     "that ran eagle3 (e.g. sglang.bench_serving against a speculative server))")])
def test_a_vllm_latency_run_is_refused_under_another_method(tmp_path, spec, argv, problem):
    root = workdir(tmp_path)
    src = _latency_run(tmp_path, spec)
    code, _, err = run_cli(root, "add", "--from-bench", str(src), "--hardware", "h100",
                           *argv, "--accept", "2.5")
    assert code == 2
    assert err == f"ddtree-bayes: error: {src} (vllm-latency, record 1): {problem}\n"


@pytest.mark.parametrize(("method", "given"), [("deepseek_mtp", "mtp"), ("eagle3", "eagle3"),
                                               ("dflash", "ddtree"), ("ngram", "ngram")])
def test_a_vllm_latency_run_imports_under_its_method(tmp_path, method, given):
    """vLLM's names map to the data's: any *_mtp is mtp, dflash is dflash or ddtree (a tree
    built from DFlash's drafts), a name without a mapping is itself with '-' for '_'."""
    root = workdir(tmp_path)
    src = _latency_run(tmp_path, {"method": method, "num_speculative_tokens": 3})
    code, _, err = run_cli(root, "add", "--from-bench", str(src), "--hardware", "h100",
                           "--method", given, "--block", "3" if given != "ddtree" else "4",
                           *(["--budget", "3"] if given == "ddtree" else []),
                           "--accept", "2.5")
    assert "speculative_config method" not in err, err
    if given == "ngram":   # (the repo's priors declare no ngram method: fit would refuse it)
        assert code == 2 and "method 'ngram' is not declared in the priors' [methods]" in err
    else:
        assert code == 0, err
        assert rows_of(root)[-1].method == given


def test_a_vllm_latency_run_of_pard_imports_as_pard_not_as_a_draft_model(tmp_path):
    """vLLM runs PARD as speculative_config {"method": "draft_model", "parallel_drafting":
    true} (vllm-project/vllm PR #32887, the priors' source of [methods.pard]). The method
    check read draft_model alone and refused --method pard, its fix naming --method
    draft-model: a sequential draft model, one pass per drafted token where PARD runs one.
    A parallel-drafting draft_model run is pard, and only pard."""
    root = workdir(tmp_path)
    spec = {"method": "draft_model", "model": "amd/PARD-Llama-3.2-1B",
            "num_speculative_tokens": 8, "parallel_drafting": True}
    src = _latency_run(tmp_path, spec)
    code, _, err = run_cli(root, "add", "--from-bench", str(src), "--hardware", "h100",
                           "--method", "pard", "--block", "8", "--accept", "3.5")
    assert code == 0, err
    assert rows_of(root)[-1].method == "pard"
    (tmp_path / "r2").mkdir()
    root = workdir(tmp_path / "r2")
    code, _, err = run_cli(root, "add", "--from-bench", str(src), "--hardware", "h100",
                           "--method", "draft-model", "--block", "8", "--accept", "3.5")
    assert code == 2
    assert err == (f"ddtree-bayes: error: {src} (vllm-latency, record 1): the file's run used "
                   "speculative_config method 'draft_model' with parallel_drafting (the data's "
                   "pard), but --method is draft-model (fix: give --method pard, or import the "
                   "result file of the draft-model run)\n")


def test_a_vllm_client_backend_of_vllm_names_no_engine(tmp_path):
    """vLLM's benchmark client sends every backend's requests to one OpenAI-compatible API,
    and its older versions wrote backend 'vllm' by default: such a file may be an SGLang
    server's run. It was refused under --engine sglang (a review); its backend now names no
    engine, so --engine is taken as given, and a missing --engine is asked for, saying why.
    (SGLang's bench_serving picks the server's own endpoint by its backend: that one still
    names the engine.)"""
    root = workdir(tmp_path)
    bench = BENCH / "vllm_serve.json"
    code, _, err = run_cli(root, "add", "--from-bench", str(bench),
                           "--hardware", "h100", "--gpus", "1", "--engine", "sglang",
                           "--method", "eagle3", "--block", "3")
    assert code == 0, err
    row = (root / "data" / "measurements.csv").read_text().splitlines()[-1]
    assert row.startswith("llama-3.1-8b-instruct,h100,1,sglang,eagle3,3,"), row
    code, _, err = run_cli(root, "add", "--from-bench", str(bench),
                           "--hardware", "h100", "--gpus", "1", "--method", "eagle3",
                           "--block", "3")
    assert code == 2
    assert err == (f"ddtree-bayes: error: {bench}, record 1: its backend 'vllm' (the default "
                   "of vLLM's older benchmark client, whose requests any OpenAI-compatible "
                   "server answers), an API several engines serve, names no engine (fix: give "
                   "the engine of the server it measured with --engine (e.g. --engine vllm))\n")


MIXED = "NVIDIA GeForce RTX 4090, NVIDIA GeForce RTX 3090"


def test_a_mixed_gpu_llama_bench_run_is_refused_as_n_of_one_gpu(tmp_path):
    root = workdir(tmp_path)
    bench = tmp_path / "mixed.json"
    bench.write_text(json.dumps(_one_tg_record(MIXED)))
    for hardware in (["--hardware", "rtx-4090"], []):
        code, _, err = run_cli(root, "add", "--from-bench", str(bench), "--engine", "llama.cpp",
                               "--method", "ar", "--model", "qwen3-8b", *hardware)
        assert code == 2, err
        assert err == (f"ddtree-bayes: error: {bench}, record 1: the file ran on 2 kinds of GPU "
                       f"({MIXED}), its layers split over all 2, but a row holds one kind (fix: "
                       "rerun llama-bench on GPUs of one kind (CUDA_VISIBLE_DEVICES or -dev), "
                       "or on one with -sm none)\n")


def test_a_mixed_gpu_run_on_one_of_them_needs_hardware_that_is_one_of_them(tmp_path):
    """-sm none ran on one of the GPUs gpu_info lists, which one the file does not say:
    --hardware names it, and must be one of them."""
    root = workdir(tmp_path)
    bench = tmp_path / "mixed.json"
    bench.write_text(json.dumps([dict(r, split_mode="none") for r in _one_tg_record(MIXED)]))
    argv = ["add", "--from-bench", str(bench), "--engine", "llama.cpp", "--method", "ar",
            "--model", "qwen3-8b"]
    code, _, err = run_cli(root, *argv)
    assert code == 2
    assert err == (f"ddtree-bayes: error: {bench}, record 1: the file lists 2 kinds of GPU "
                   f"({MIXED}) and ran on one, but does not say which (fix: give the GPU it ran "
                   "on with --hardware)\n")
    code, _, err = run_cli(root, *argv, "--hardware", "rtx-5090")
    assert code == 2
    assert err == (f"ddtree-bayes: error: {bench}, record 1: the file ran on one of {MIXED}, "
                   "none a rtx-5090 (fix: give the GPU the file ran on with --hardware, or add "
                   "it to data/hardware.csv (or --hardware-file))\n")
    code, _, err = run_cli(root, *argv, "--hardware", "rtx-3090")
    assert code == 0, err
    assert (rows_of(root)[-1].hardware, rows_of(root)[-1].gpus) == ("rtx-3090", 1)


def test_the_same_result_under_another_file_name_is_not_a_second_run(tmp_path):
    root = workdir(tmp_path)
    argv = ["--hardware", "h100", "--gpus", "1", "--engine", "sglang", "--method", "ar",
            "--model", "llama-3.1-8b-instruct"]
    assert run_cli(root, "add", "--from-bench", str(BENCH / "sglang_one_batch.jsonl"), *argv)[0] == 0
    first = len(rows_of(root)) + 1   # (the header is line 1: the rows are lines 2..)
    copy = tmp_path / "copy-of-run.jsonl"
    copy.write_bytes((BENCH / "sglang_one_batch.jsonl").read_bytes())
    before = (root / "data" / "measurements.csv").read_bytes()
    for extra in ([], ["--allow-duplicate"]):
        code, _, err = run_cli(root, "add", "--from-bench", str(copy), *argv, *extra)
        assert code == 2 or "same" in err, err
        assert code == 2
        assert err.startswith(f"ddtree-bayes: error: {copy}: 2 problems, nothing appended:")
        assert (f"{copy} (sglang-one-batch, line 1), row {first + 1}: the same benchmark result as "
                f"row {first - 1} (bench result " in err)
        assert ("imported again, one run would count as two (fix: it is in the data already; "
                f"to import it with other flags, delete row {first - 1} first)") in err
        assert f"line 2), row {first + 2}: the same benchmark result as row {first} " in err
    assert (root / "data" / "measurements.csv").read_bytes() == before


def test_a_result_twice_in_one_file_is_one_run(tmp_path):
    """A record appended twice (`>> results.jsonl` of the same output) is one run."""
    root = workdir(tmp_path)
    line = (BENCH / "sglang_one_batch.jsonl").read_text().splitlines()[0]
    bench = tmp_path / "twice.jsonl"
    bench.write_text(line + "\n" + line + "\n")
    code, _, err = run_cli(root, "add", "--from-bench", str(bench), "--hardware", "h100",
                           "--gpus", "1", "--engine", "sglang", "--method", "ar",
                           "--model", "llama-3.1-8b-instruct")
    assert code == 2
    assert (f"{bench} (sglang-one-batch, line 2), row {len(rows_of(root)) + 3}: the same "
            f"benchmark result as {bench} (sglang-one-batch, line 1)") in err


def test_a_vllm_latency_run_of_a_long_prompt_is_warned_of_as_a_lower_bound(tmp_path):
    """`vllm bench latency --input-len 32768 --output-len 128` was imported as decode tok/s =
    128 / avg_latency without a word, though avg_latency includes the prefill of the 32768
    prompt tokens: kept, with a warning that the figure is a lower bound."""
    root = workdir(tmp_path)
    bench = BENCH / "vllm_latency.json"
    avg = json.loads(bench.read_text())["avg_latency"]
    argv = ["add", "--from-bench", str(bench), "--hardware", "h100", "--gpus", "1",
            "--method", "ar", "--model", "llama-3.1-8b-instruct", "--batch-size", "1",
            "--output-len", "128"]
    code, _, err = run_cli(root, *argv, "--input-len", "32768")
    assert code == 0, err
    assert err == (f"ddtree-bayes: warning: {bench}, record 1: tok_s = output_len/avg_latency "
                   f"= 128/{avg:g} s includes the prefill of input_len 32768 tokens, 256x the "
                   "128 decoded: kept as a lower bound of the decode rate (vllm bench serve's "
                   "TPOT, which leaves out the first token, measures decode alone)\n")
    assert rows_of(root)[-1].tok_s == float(f"{128 / avg:.6g}")
    # no longer than the output (in a fresh copy: the same result again is refused as a
    # duplicate, whatever its flags)
    code, _, err = run_cli(workdir(tmp_path / "short"), *argv, "--input-len", "128")
    assert code == 0 and err == "", err

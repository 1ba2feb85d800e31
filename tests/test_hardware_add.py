"""``hardware add``: a user's GPU without a hand-written row (the brief: "a user's own model and
GPU need hand-written cards"). Like a known GPU with the figures that differ, or a new one from
its datasheet; every figure sourced; refusals write nothing."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from ddtree_bayes.core.hardware_table import ADDED, OVERRIDES, hardware_table
from ddtree_bayes.core.paths import bundled
from test_cli_support import listing, make_point_mass_workdir, run_cli, write_point_mass_fit
from test_json_schemas import validate_output

BUILT_IN = {r["hardware"]: r for r in csv.DictReader(io.StringIO(bundled("hardware.csv").read_text()))}


def rows_of(path: Path) -> dict[str, dict[str, str]]:
    return {r["hardware"]: r for r in csv.DictReader(io.StringIO(path.read_text()))}


def test_a_gpu_like_a_known_one_keeps_its_figures_and_sources_the_new_one(tmp_path):
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-4090-oc", "--like", "rtx-4090",
                             "--mem-bw-tb-s", "1.104", "--source", "memory +1000 MHz: 23 Gbps x 384 bit")
    assert code == 0 and err == ""
    path = tmp_path / "data" / "hardware.csv"
    rows = rows_of(path)
    assert list(rows) == ["rtx-4090-oc"]          # the file holds only what differs
    row, base = rows["rtx-4090-oc"], BUILT_IN["rtx-4090"]
    assert row["mem_bw_tb_s"] == "1.104"
    for col in ("memory", "memory_gb", "interconnect", "compute_capability", "dense_bf16_tflops",
                "dense_fp8_tflops", "dense_int8_tflops"):
        assert row[col] == base[col], col
    assert row["source"] == ("memory +1000 MHz: 23 Gbps x 384 bit (mem_bw_tb_s); other figures as "
                             f"rtx-4090: {base['source']}")
    assert row["flops_source"] == f"as rtx-4090: {base['flops_source']}"
    assert "  bandwidth     1.104 TB/s per GPU" in out and "given" in out.splitlines()[2]
    assert "wrote data/hardware.csv row 2 (rtx-4090-oc) (created)" in out
    table = hardware_table(tmp_path)
    assert table.origins["rtx-4090-oc"] == ADDED and table.origins["rtx-4090"] == "built-in"
    # the next command already knows it
    code, out, _ = run_cli(tmp_path, "hardware", "list")
    assert next(ln for ln in out.splitlines() if ln.startswith("rtx-4090-oc ")).endswith("yours")


def test_a_figure_given_is_credited_to_the_users_source_alone(tmp_path):
    """A GPU like one the user added (its row's credits "hmc sheet (memory_gb, mem_bw_tb_s)"),
    given the user's own memory and bandwidth, equal to the copied GPU's: the row credited
    them to the user's --source and again, in the copied text, to the copied GPU's source
    ("other figures as rtx-4090d: hmc sheet (memory_gb, mem_bw_tb_s); ..."). Each figure
    carries one source: the copied credits lose the columns now given (a credit left with
    none goes), the rest of the copied text stays."""
    code, _, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d", "--like", "rtx-4090",
                           "--memory-gb", "24", "--mem-bw-tb-s", "1.008",
                           "--dense-bf16-tflops", "147.09", "--dense-fp8-tflops", "294.18",
                           "--dense-int8-tflops", "588.35", "--source", "hmc sheet")
    assert code == 0, err
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d-oc", "--like", "rtx-4090d",
                             "--memory-gb", "24", "--mem-bw-tb-s", "1.008",
                             "--dense-bf16-tflops", "147.09", "--source", "nvidia-smi")
    assert code == 0, err
    base = BUILT_IN["rtx-4090"]
    row = rows_of(tmp_path / "data" / "hardware.csv")["rtx-4090d-oc"]
    assert (row["memory_gb"], row["mem_bw_tb_s"], row["dense_bf16_tflops"]) == (
        "24", "1.008", "147.09")
    assert row["source"] == ("nvidia-smi (memory_gb, mem_bw_tb_s); other figures as rtx-4090d: "
                             f"as rtx-4090: {base['source']}")
    assert row["flops_source"] == ("nvidia-smi (dense_bf16_tflops); other figures as rtx-4090d: "
                                   "hmc sheet (dense_fp8_tflops, dense_int8_tflops)")
    assert f"  source        {row['source']}" in out.splitlines()


def test_a_line_of_figures_given_in_part_says_which_were_given(tmp_path):
    """An RTX 4090 D added --like rtx-4090 with its bf16 peak alone printed "dense TFLOPS  bf16
    147, fp8 330.3, fp4 -, int8 660.6   given": the fp8 and int8 peaks are the RTX 4090's,
    copied (the row's flops source says so), not given. A line whose figures were given in
    part names the given ones and the copied ones (rtx-4090 has no fp4 peak to copy); all
    given, "given"; none, "as"."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d", "--like", "rtx-4090",
                             "--dense-bf16-tflops", "147", "--memory-gb", "48", "--source", "x",
                             "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    # (scaled as bf16: 147 / 165.15 x 330.3 = 294, x 660.6 = 588)
    assert f"  dense TFLOPS  {'bf16 147, fp8 294, fp4 -, int8 588':<44} bf16 given, fp8 " \
           "and int8 scaled as bf16" in lines
    assert f"  memory        {'48 GB GDDR6X':<44} size given, type as rtx-4090" in lines
    assert f"  bandwidth     {'1.008 TB/s per GPU':<44} as rtx-4090" in lines
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-5090-pl", "--like", "rtx-5090",
                             "--dense-bf16-tflops", "200", "--dense-fp8-tflops", "400",
                             "--dense-fp4-tflops", "1600", "--dense-int8-tflops", "800",
                             "--source", "x", "--dry-run")
    assert code == 0, err
    assert f"  dense TFLOPS  {'bf16 200, fp8 400, fp4 1600, int8 800':<44} given" in \
        out.splitlines()


def test_a_whole_nodes_figure_given_as_a_gpus_is_noted(tmp_path):
    """A walkthrough: `hardware add --like h100 --mem-bw-tb-s 26.8` (8 x 3.35, a node's total)
    was written as one GPU's bandwidth without a word, so every step on it would be priced as
    if each GPU read eight times faster. A memory size 4, 8 or 16 times the --like GPU's is
    noted (a GPU may truly hold four times another's memory: a note, not a refusal); a
    bandwidth or peak that far from it is refused (test below)."""
    gb = float(BUILT_IN["h100"]["memory_gb"])
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100-node", "--like", "h100",
                             "--memory-gb", f"{8 * gb:g}", "--source", "x", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["notes"] == [
        f"--memory-gb {8 * gb:g} is 8 x h100's {gb:g}: a whole node's total? The table takes "
        f"figures per GPU (the count is --gpus when asking); if so, re-run with --memory-gb "
        f"{gb:g} --replace"]
    bw = float(BUILT_IN["h100"]["mem_bw_tb_s"])
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100-fast", "--like", "h100",
                             "--mem-bw-tb-s", f"{1.5 * bw:g}", "--source", "x", "--format", "json")
    assert code == 0 and json.loads(out)["notes"] == [], err


@pytest.mark.parametrize(("flag", "factor", "why"), [
    ("--mem-bw-tb-s", 10, "10 x h100's 3.35: a decimal or unit slip?"),
    ("--mem-bw-tb-s", 8, "8 x h100's 3.35: a whole node's total? The table takes figures per "
                         "GPU (the count is --gpus when asking)"),
    ("--mem-bw-tb-s", 0.1, "0.1 x h100's 3.35: a decimal or unit slip?"),
    ("--dense-bf16-tflops", 10, "10 x h100's 989: a decimal or unit slip?"),
])
def test_a_bandwidth_or_peak_far_from_the_like_gpus_is_refused(tmp_path, flag, factor, why):
    """A hunt (2026-12-05): `hardware add h100-oc --like h100 --mem-bw-tb-s 33.5` (a decimal
    slip: 3.35) was written, exit 0, though no GPU reads 33.5 TB/s and every answer on it
    would be ~10x too fast; 989 TFLOPS / 33.5 TB/s is inside the plausible FLOP-per-byte band
    and 33.5 under the 100 TB/s ceiling, so no check caught it. A GPU like another (an
    overclock, a power cap, a cut-down edition) reads and computes within a few times of it:
    4x or more away (or a quarter or less) is refused, nothing written."""
    column = flag.removeprefix("--").replace("-", "_")
    figure = float(BUILT_IN["h100"][column]) * factor
    # (a bf16 peak given alone above the copied fp8 one is refused as out of order first)
    fp8 = (["--dense-fp8-tflops", f"{float(BUILT_IN['h100']['dense_fp8_tflops']) * factor:g}"]
           if column == "dense_bf16_tflops" else [])
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100-oc", "--like", "h100",
                             flag, f"{figure:g}", *fp8, "--source", "x")
    assert code == 2 and out == ""
    assert err.strip() == (
        f"ddtree-bayes: error: {flag} {figure:g} is {why} (fix: give the figure per GPU in "
        f"{'TB/s' if column == 'mem_bw_tb_s' else 'TFLOPS'} as the datasheet has it; a GPU "
        "that far from h100 is no variant of it: give its own figures without --like)")
    assert not (tmp_path / "data" / "hardware.csv").exists()


def test_a_built_in_name_is_overridden_and_a_second_time_needs_replace(tmp_path):
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-3090", "--mem-bw-tb-s", "0.85",
                             "--source", "power-limited to 250 W: measured 850 GB/s")
    assert code == 0, err
    assert "GPU rtx-3090 (overrides the built-in row):" in out
    assert hardware_table(tmp_path).origins["rtx-3090"] == OVERRIDES
    before = listing(tmp_path)
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-3090", "--mem-bw-tb-s", "0.8",
                             "--source", "x")
    assert code == 2 and out == ""
    assert err.strip() == ("ddtree-bayes: error: 'rtx-3090' is already in data/hardware.csv, row 2 "
                           "(fix: pass --replace to overwrite that row, or give the GPU another name)")
    assert listing(tmp_path) == before
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-3090", "--mem-bw-tb-s", "0.8",
                             "--source", "x", "--replace")
    assert code == 0 and "replaced data/hardware.csv row 2 (rtx-3090)" in out
    assert rows_of(tmp_path / "data" / "hardware.csv")["rtx-3090"]["mem_bw_tb_s"] == "0.8"


def test_a_built_in_row_in_a_checkout_says_so_and_what_to_do(tmp_path):
    """A new-user walkthrough: in a checkout data/hardware.csv is the built-in table, so
    `hardware add rtx-5080` with the datasheet's own figures was refused as "already in
    data/hardware.csv, row 32" and told to --replace (rewriting the project's sourced row),
    while `hardware list` calls the row built-in. Figures equal to the row's: nothing to add;
    others: a name of your own, or --replace knowingly."""
    import shutil

    (tmp_path / "data").mkdir()
    shutil.copy(bundled("hardware.csv"), tmp_path / "data" / "hardware.csv")
    (tmp_path / "data" / "hardware.csv").chmod(0o644)
    before = listing(tmp_path)
    flags = ["hardware", "add", "rtx-5080", "--memory-gb", "16", "--interconnect", "PCIe Gen5",
             "--source", "datasheet"]
    code, out, err = run_cli(tmp_path, *flags, "--mem-bw-tb-s", "0.96")
    assert (code, out) == (2, "")
    assert err.strip() == ("ddtree-bayes: error: 'rtx-5080' is already in data/hardware.csv, "
                           "row 32 (the built-in row), with the figures you gave (fix: nothing "
                           "to add: ask with --hardware rtx-5080)")
    code, out, err = run_cli(tmp_path, *flags, "--mem-bw-tb-s", "0.85")
    assert (code, out) == (2, "")
    assert err.strip() == ("ddtree-bayes: error: 'rtx-5080' is already in data/hardware.csv, "
                           "row 32 (the built-in row) (fix: give your GPU a name of its own, "
                           "with --like rtx-5080 and the figures that differ, or pass --replace "
                           "to change the built-in figures in data/hardware.csv)")
    assert listing(tmp_path) == before


def test_replace_of_a_built_in_row_in_a_checkout_says_it_overrides_the_built_in_row(tmp_path):
    """`hardware add rtx-5080 ... --replace` in a checkout (data/hardware.csv is the built-in
    table) printed "GPU rtx-5080 (replaces your row)", a row the user never wrote; it overrides
    the built-in row. A row of the user's own (one hardware add wrote) stays "your row"."""
    import shutil

    (tmp_path / "data").mkdir()
    shutil.copy(bundled("hardware.csv"), tmp_path / "data" / "hardware.csv")
    (tmp_path / "data" / "hardware.csv").chmod(0o644)
    flags = ["hardware", "add", "rtx-5080", "--memory-gb", "16", "--interconnect", "PCIe Gen5",
             "--source", "datasheet", "--mem-bw-tb-s", "0.85", "--replace"]
    code, out, err = run_cli(tmp_path, *flags, "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "GPU rtx-5080 (overrides the built-in row):"
    assert lines[-1] == ("dry run: nothing written (data/hardware.csv would have this row in "
                         "place of the built-in one, its row 32)")
    code, out, err = run_cli(tmp_path, *flags, "--dry-run", "--format", "json")
    assert code == 0 and json.loads(out)["effect"] == "overrides", err
    code, out, err = run_cli(tmp_path, *flags)
    assert code == 0, err
    assert out.splitlines()[0] == "GPU rtx-5080 (overrides the built-in row):"
    assert "replaced data/hardware.csv row 32 (rtx-5080)" in out
    # now the row is the user's: replacing it again replaces "your row"
    code, out, err = run_cli(tmp_path, *flags[:-2], "0.86", "--replace", "--dry-run")
    assert code == 0, err
    assert out.splitlines()[0] == "GPU rtx-5080 (replaces your row):"
    assert out.splitlines()[-1] == ("dry run: nothing written (data/hardware.csv would have "
                                    "replaced this row)")


def test_a_new_gpu_from_its_datasheet_says_what_it_leaves_to_assumption(tmp_path):
    code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", "--mem-bw-tb-s", "2",
                             "--interconnect", "PCIe Gen5", "--source", "vendor sheet",
                             "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("hardware-add", payload)
    assert payload["like"] is None and payload["given"] == ["mem_bw_tb_s", "interconnect"]
    assert payload["effect"] == "adds" and payload["gpu"]["origin"] == "user"
    assert payload["gpu"]["mem_bw_tb_s"] == 2.0 and payload["gpu"]["dense_bf16_tflops"] is None
    assert payload["gpu"]["link"] == "pcie"
    assert payload["gpu"]["source"] == "vendor sheet (mem_bw_tb_s, interconnect)"
    assert payload["gpu"]["flops_source"] == ""
    assert [n.split(":")[0] for n in payload["notes"]] == [
        "my-gpu has no dense bf16 peak", "my-gpu has no memory_gb"]
    assert payload["written"] == [{"file": "data/hardware.csv", "name": "my-gpu", "row": 2,
                                   "replaced": False, "created": True}]


def test_a_new_gpu_with_an_fp8_peak_alone_is_told_its_bf16_is_derived_from_it(tmp_path):
    """A GPU given an fp8 peak and no bf16 one was told "its compute knee assumes bandwidth x
    200 FLOP/B" (400 TFLOPS here), but the model derives its bf16 peak from the fp8 one
    (fp8 / 2: 150 TFLOPS): the note now says what is assumed."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", "--mem-bw-tb-s", "2",
                             "--interconnect", "PCIe Gen5", "--dense-fp8-tflops", "300",
                             "--memory-gb", "64", "--source", "vendor sheet", "--dry-run")
    assert code == 0, err
    notes = [ln for ln in out.splitlines() if ln.startswith("note:")]
    assert notes == ["note: my-gpu has no dense bf16 peak: bf16 peak derived from fp8 300 TFLOPS "
                     "/ 2, the Hopper/Blackwell ratio, an assumption (give --dense-bf16-tflops "
                     "from the datasheet)"]


@pytest.mark.parametrize("name, close", [
    ("rtx-4090d", "rtx-4090"),    # an RTX 4090 D: 114 of the 4090's 128 SMs, its memory
    ("l40", "l40s"),
    ("h20-141gb", "h20"),
])
def test_a_new_gpu_without_its_figures_is_pointed_at_the_closest_name(tmp_path, name, close):
    """A new user's walk-through: `hardware add rtx-4090d --dense-bf16-tflops 147.09` (an RTX
    4090 D, not in the table) was refused with "start from a GPU like it: --like NAME
    (`ddtree-bayes hardware list`)", leaving the user to find the 4090 among 37 rows. The fix
    names the closest GPU names the table holds (a suggestion: --like is never assumed)."""
    code, out, err = run_cli(tmp_path, "hardware", "add", name, "--dense-bf16-tflops", "100",
                             "--source", "s")
    assert code == 2 and out == "" and listing(tmp_path) == {}
    assert err.startswith(f"ddtree-bayes: error: {name} is a GPU the table does not know: it "
                          "needs --mem-bw-tb-s and --interconnect (fix: give --mem-bw-tb-s and "
                          "--interconnect from its datasheet, or start from a GPU like it: "
                          f"--like {close}")
    assert err.endswith(" (`ddtree-bayes hardware list`))\n") and err.count("\n") == 1


def test_a_new_gpu_far_from_every_name_gets_no_suggestion(tmp_path):
    code, _, err = run_cli(tmp_path, "hardware", "add", "my-gpu", "--mem-bw-tb-s", "2",
                           "--source", "s")
    assert code == 2
    assert err.endswith("or start from a GPU like it: --like NAME (`ddtree-bayes hardware "
                        "list`))\n")


@pytest.mark.parametrize("argv, message", [
    (["my-gpu", "--mem-bw-tb-s", "2"], "my-gpu is a GPU the table does not know: it needs "
                                       "--interconnect"),
    (["my-gpu", "--like", "rtx-4900", "--mem-bw-tb-s", "2"], "--like rtx-4900: no such GPU in the "
                                                             "hardware table"),
    (["My GPU", "--like", "rtx-4090"], "'My GPU' is not a GPU name the data files can hold "
                                       "(fix: use lowercase letters, digits and . _ + - (e.g. "
                                       "'my-gpu'))"),
    (["h100@2", "--like", "h100"], "'h100@2' is not a GPU name the data files can hold"),
    # a system is labelled <gpu>x<count>: h100x2 on 8 GPUs was h100x2x8, "h100x2 x8"
    (["h100x2", "--like", "h100"], "'h100x2' ends in x<count>, which reads as a GPU count: a "
                                   "system is labelled <gpu>x<count> (h100x2 on 8 GPUs: "
                                   "h100x2x8) (fix: name the GPU alone (the count is each row's "
                                   "gpus column), or end the name otherwise (e.g. "
                                   "'h100-2gpu'))\n"),
    (["rtx-4090"], "rtx-4090 is in the table already and nothing was given to change"),
    (["my-gpu", "--like", "rtx-4090", "--source", " "], "--source is empty"),
    # read as an NVLink-class fabric before (anything without "pcie"): the all-reduce cost and
    # the transfer's reference system followed
    (["my-gpu", "--mem-bw-tb-s", "2", "--interconnect", "Ethernet 100G"],
     "--interconnect 'Ethernet 100G' names neither PCIe nor an NVLink-class fabric"),
    # the memory type's flag given the size too: the row read "80 GB 141 GB HBM3e" and kept
    # h100's 80 GB for every weights-fit check
    (["h100-141", "--like", "h100", "--memory", "141 GB HBM3e"],
     "--memory '141 GB HBM3e' holds a size, but --memory is the memory type; the size the "
     "weights-fit checks read is --memory-gb (80, as h100) (fix: give --memory-gb 141 "
     "--memory HBM3e)"),
    (["my-gpu", "--mem-bw-tb-s", "2", "--interconnect", "PCIe Gen4", "--memory", "24GB"],
     "--memory '24GB' holds a size"),
    # a review: the fix told a GDDR7 card to write HBM3e, and passed GiB on as GB
    (["x-32", "--like", "rtx-5090", "--memory", "32GB"],
     "--memory '32GB' holds a size, but --memory is the memory type; the size the weights-fit "
     "checks read is --memory-gb (32, as rtx-5090) (fix: give --memory-gb 32 --memory GDDR7)"),
    (["h100-80gib", "--like", "h100", "--memory", "80 GiB"],
     "--memory '80 GiB' holds a size, but --memory is the memory type; the size the "
     "weights-fit checks read is --memory-gb (80, as h100) (fix: give --memory-gb 85.9 "
     "--memory HBM3)"),
])
def test_refusals_name_the_fix_and_write_nothing(tmp_path, argv, message):
    argv = argv if "--source" in argv else [*argv, "--source", "s"]
    code, out, err = run_cli(tmp_path, "hardware", "add", *argv)
    assert code == 2 and out == "" and listing(tmp_path) == {}
    assert err.startswith(f"ddtree-bayes: error: {message}") and "(fix: " in err


def test_a_unit_slip_is_caught_at_the_flag(tmp_path):
    # 1792 is GB/s: the flag takes TB/s
    code, out, err = run_cli(tmp_path, "hardware", "add", "x", "--like", "rtx-5090",
                             "--mem-bw-tb-s", "1792", "--source", "s")
    assert code == 2 and listing(tmp_path) == {}
    assert "--mem-bw-tb-s" in err and "outside (0, 100]" in err and "not GB/s" in err
    code, out, err = run_cli(tmp_path, "hardware", "add", "x", "--like", "rtx-5090", "--source", "s")
    assert code == 0 and "--source" not in err
    code, out, err = run_cli(tmp_path, "hardware", "add", "y", "--like", "rtx-5090")
    assert code == 2 and "--source" in err


@pytest.mark.parametrize("argv, message", [
    # a PFLOPS figure for a TFLOPS flag: a B300 at 2.25 bf16 TFLOPS was accepted
    (["--like", "b300", "--dense-bf16-tflops", "2.25"],
     "--dense-bf16-tflops 2.25: 2.25 TFLOPS over 8 TB/s is 0.281 FLOP per byte of bandwidth, "
     "outside the plausible 5 to 20,000; likely a unit slip (PFLOPS for TFLOPS?) (fix: give "
     "dense TFLOPS per GPU, e.g. 2250 for a B300's bf16 (1 PFLOPS = 1000 TFLOPS))"),
    (["--like", "rtx-3090", "--dense-int8-tflops", "71200"],
     "--dense-int8-tflops 71200: 71200 TOPS over 0.936 TB/s is 76,068 FLOP per byte of "
     "bandwidth, outside the plausible 5 to 20,000; likely a unit slip (GFLOPS for TFLOPS?)"),
    # 1e-9 TB/s was accepted: every step on the GPU would have taken hours
    (["--mem-bw-tb-s", "1e-9", "--interconnect", "PCIe Gen4"],
     "--mem-bw-tb-s 1e-09: under the plausible 0.01 to 100 TB/s per GPU, less than any GPU "
     "that runs a language model has; likely a unit slip (another unit than TB/s?) (fix: give "
     "TB/s per GPU, e.g. 1.008 for an RTX 4090 (not GB/s))"),
    # the copied peaks against a bandwidth given in another unit
    (["--like", "h100", "--mem-bw-tb-s", "0.04"],
     "--mem-bw-tb-s 0.04: 989 TFLOPS over 0.04 TB/s is 24,725 FLOP per byte of bandwidth, "
     "outside"),
    (["--like", "rtx-4090", "--memory-gb", "0.024"],
     "--memory-gb 0.024: under the plausible 1 to 4096 GB per GPU, less than any GPU that runs "
     "a language model has; likely a unit slip (TB for GB?) (fix: give GB per GPU, e.g. 24)"),
])
def test_a_figure_a_unit_slip_explains_is_refused(tmp_path, argv, message):
    code, out, err = run_cli(tmp_path, "hardware", "add", "x", *argv, "--source", "s")
    assert (code, out) == (2, "") and listing(tmp_path) == {}
    assert err.startswith(f"ddtree-bayes: error: {message}") and err.count("\n") == 1


def test_every_built_in_gpu_and_a_small_one_pass_the_slip_check(tmp_path):
    """The floors and the FLOP-per-byte range hold every built-in GPU, and a small one (a
    Jetson Orin Nano: 8 GB, 68 GB/s, 20 dense int8 TOPS) is taken."""
    from ddtree_bayes.core.data import HARDWARE_NUMBERS, hardware_slip

    for name, row in BUILT_IN.items():
        assert hardware_slip(row, HARDWARE_NUMBERS) is None, name
    code, out, err = run_cli(tmp_path, "hardware", "add", "orin-nano", "--memory-gb", "8",
                             "--mem-bw-tb-s", "0.068", "--dense-int8-tflops", "20",
                             "--interconnect", "PCIe Gen4", "--source", "datasheet")
    assert code == 0, err


def test_dry_run_prints_the_row_and_writes_nothing(tmp_path):
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100-slow", "--like", "h100",
                             "--dense-bf16-tflops", "700", "--source", "clock-capped", "--dry-run")
    # a cap lowers every precision: the fp8 peak copied from the H100 (1979) is 2.8x 700
    assert code == 2 and "fp8 1979 (as h100) is 2.83x --dense-bf16-tflops 700" in err
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100-slow", "--like", "h100",
                             "--dense-bf16-tflops", "700", "--dense-fp8-tflops", "1400",
                             "--source", "clock-capped", "--dry-run")
    assert code == 0 and err == "" and listing(tmp_path) == {}
    assert "dry run: nothing written (data/hardware.csv would gain this row)" in out
    assert "bf16 700" in out


def test_peaks_the_compute_capability_cannot_have_are_not_copied(tmp_path):
    """--like b300 --compute-capability 7.0 kept B300's fp8 4500 and fp4 13500 TFLOPS, which a
    CC 7.0 GPU has no tensor cores for (fp8 needs 8.9, fp4 10.0), without a word: they are
    left out of the row, and a note says so."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "g", "--like", "b300",
                             "--compute-capability", "7.0", "--source", "x")
    assert code == 0 and err == "", err
    row = rows_of(tmp_path / "data" / "hardware.csv")["g"]
    assert (row["compute_capability"], row["dense_bf16_tflops"], row["dense_fp8_tflops"],
            row["dense_fp4_tflops"]) == ("7.0", "2250", "", "")
    assert "  dense TFLOPS  bf16 2250, fp8 -, fp4 -, int8 -" in out
    # (b300's int8 peak, 150, goes too: int8 tensor cores need 7.5)
    assert ("note: g: compute capability 7.0 has no fp8, fp4 or int8 tensor cores (fp8 needs "
            "CC 8.9 or above, fp4 10.0, int8 7.5): the fp8 (4500 TFLOPS), fp4 (13500 TFLOPS) "
            "and int8 (150 TFLOPS) peaks copied from b300 are left out") in out.splitlines()
    # Ada (8.9) keeps fp8 and loses fp4; below Turing a copied int8 tensor peak goes too (the
    # int8 peak is then derived as bf16 / 2, dp4a: core/model_cards.peak_tflops)
    code, out, err = run_cli(tmp_path, "hardware", "add", "h", "--like", "b300",
                             "--compute-capability", "8.9", "--source", "x", "--dry-run",
                             "--format", "json")
    payload = json.loads(out)
    assert (payload["gpu"]["dense_fp8_tflops"], payload["gpu"]["dense_fp4_tflops"]) == (4500.0, None)
    assert payload["notes"] == ["h: compute capability 8.9 has no fp4 tensor cores (fp4 needs CC "
                                "10.0 or above): the fp4 (13500 TFLOPS) peak copied from b300 "
                                "is left out"]
    code, out, err = run_cli(tmp_path, "hardware", "add", "k", "--like", "rtx-4090",
                             "--compute-capability", "7.0", "--source", "x", "--dry-run")
    assert code == 0 and "  dense TFLOPS  bf16 165.15, fp8 -, fp4 -, int8 -" in out
    # an AMD gfx target is no NVIDIA capability: nothing is dropped
    code, out, err = run_cli(tmp_path, "hardware", "add", "m", "--like", "mi300x",
                             "--compute-capability", "gfx942", "--source", "x", "--dry-run")
    assert code == 0 and "fp8 2610" in out and "note: m: compute" not in out


def test_replacing_a_row_keeps_the_int8_peak_its_owner_gave(tmp_path):
    """An int8 peak given for a CC 7.0 GPU is kept (a dp4a rate); a later --replace of that row
    took it for one copied and left it out, with its credit still naming the datasheet (a
    review found it): a GPU's own row loses no peak unless its capability is given anew."""
    code, _, err = run_cli(tmp_path, "hardware", "add", "g", "--like", "v100",
                           "--dense-int8-tflops", "62", "--source", "d")
    assert code == 0, err
    code, out, err = run_cli(tmp_path, "hardware", "add", "g", "--replace", "--memory-gb", "32",
                             "--source", "m")
    assert code == 0, err
    row = rows_of(tmp_path / "data" / "hardware.csv")["g"]
    assert (row["dense_int8_tflops"], row["memory_gb"]) == ("62", "32")
    assert "left out" not in out


@pytest.mark.parametrize("argv, message", [
    (["--like", "b300", "--compute-capability", "sm_70"],
     "--compute-capability 'sm_70' is not a compute capability the table can read (fix: write "
     "it as major.minor: 7.0 (sm_70 is CC 7.0))"),
    (["--like", "b300", "--compute-capability", "Volta"],
     "--compute-capability 'Volta' is not a compute capability the table can read (fix: write "
     "it as major.minor, e.g. 8.9 (nvidia-smi --query-gpu=compute_cap), or an AMD GPU's gfx "
     "target, e.g. gfx942)"),
    # a number no NVIDIA GPU has (majors run 1, Tesla, to 12, Blackwell GeForce / DGX Spark)
    (["--like", "h100", "--compute-capability", "99.9"],
     "--compute-capability 99.9 is no NVIDIA GPU's: compute capabilities run from 1.0 (Tesla) "
     "to 12.x (Blackwell: RTX 50, RTX PRO 6000 12.0, DGX Spark 12.1) (fix: give the GPU's own "
     "(nvidia-smi --query-gpu=compute_cap), or an AMD GPU's gfx target, e.g. gfx942)"),
    (["--like", "h100", "--compute-capability", "13.0"],
     "--compute-capability 13.0 is no NVIDIA GPU's: compute capabilities run from 1.0"),
    (["--like", "h100", "--compute-capability", "0.9"],
     "--compute-capability 0.9 is no NVIDIA GPU's: compute capabilities run from 1.0"),
    # a peak given that the capability (copied or given) cannot have is a contradiction
    (["--like", "v100", "--dense-fp8-tflops", "100"],
     "--dense-fp8-tflops 100: compute capability 7.0 (as v100) has no fp8 tensor cores (fp8 "
     "needs CC 8.9 or above) (fix: leave --dense-fp8-tflops out, or give the GPU's "
     "--compute-capability)"),
    (["--like", "b300", "--compute-capability", "9.0", "--dense-fp4-tflops", "9000"],
     "--dense-fp4-tflops 9000: compute capability 9.0 (given) has no fp4 tensor cores (fp4 "
     "needs CC 10.0 or above)"),
])
def test_a_compute_capability_is_read_as_the_table_writes_it(tmp_path, argv, message):
    code, out, err = run_cli(tmp_path, "hardware", "add", "g", *argv, "--source", "s")
    assert (code, out) == (2, "") and listing(tmp_path) == {}
    assert err.startswith(f"ddtree-bayes: error: {message}") and err.count("\n") == 1


@pytest.mark.parametrize("cc", ["1.0", "12.1", "gfx1151"])
def test_a_compute_capability_at_the_ends_of_the_range_is_taken(tmp_path, cc):
    """The bounds of the refusal above: 1.0 (the first CUDA GPUs) and 12.1 (DGX Spark's GB10)
    are NVIDIA's; an AMD gfx target is no NVIDIA number and is not bounded by them."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "g", "--like", "l40s",
                             "--compute-capability", cc, "--source", "s", "--dry-run")
    assert code == 0, err
    assert f"compute cap.  {cc} " in out


def test_every_built_in_gpu_has_only_the_peaks_its_capability_has():
    from ddtree_bayes.core.model_cards import COMPUTE_CAPABILITY_RE, precisions_without_mma

    for name, row in BUILT_IN.items():
        assert COMPUTE_CAPABILITY_RE.fullmatch(row["compute_capability"]), name
        assert not [p for p in precisions_without_mma(row["compute_capability"])
                    if row[f"dense_{p}_tflops"]], name


@pytest.mark.parametrize("second_row, gpu, message", [
    # an invalid table is named and left alone
    ("my-gpu,fast,PCIe,x", "other", ("data/hardware.csv", "row 2", "mem_bw_tb_s")),
    # a short table (the four required columns): a new GPU copied from the H100 would lose its
    # memory and peaks, which a new name cannot take from the built-in row
    ("my-gpu,1.0,PCIe,x", "h100-b", ("no column 'memory'",)),
])
def test_a_user_table_that_cannot_take_the_row_is_left_alone(tmp_path, second_row, gpu, message):
    path = tmp_path / "data" / "hardware.csv"
    path.parent.mkdir()
    path.write_text(f"hardware,mem_bw_tb_s,interconnect,source\n{second_row}\n")
    before = listing(tmp_path)
    code, out, err = run_cli(tmp_path, "hardware", "add", gpu, "--like", "h100", "--source", "s")
    assert code == 2 and listing(tmp_path) == before
    assert all(m in err for m in message), err


def test_the_added_gpu_reaches_the_model(tmp_path):
    """After `hardware add` and a refit, predict prices the GPU by its row: an unmeasured
    system transfers from the measured one by the bandwidth ratio the row gives (8.0 / 4.0)."""
    root = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(root, "hardware", "add", "b300-half", "--like", "b300",
                             "--mem-bw-tb-s", "4", "--source", "test: half the bandwidth")
    assert code == 0, err
    assert out.splitlines()[-1] == ("next: a fit made before this knows the table it stored: "
                                    "re-run `ddtree-bayes fit`, then ask with --hardware b300-half")
    code, _, err = run_cli(root, "predict", "--hardware", "b300-half", "--method", "ar")
    assert code == 2 and "re-run `ddtree-bayes fit`" in err     # the old fit does not know it
    write_point_mass_fit(root / "models", root / "data" / "measurements.csv",
                         root / "models" / "priors.toml", root / "data" / "hardware.csv",
                         fit_id="20260101T000001Z-pointms2")
    answers = {}
    for gpu in ("b300", "b300-half"):
        code, out, err = run_cli(root, "predict", "--hardware", gpu, "--method", "ar",
                                 "--format", "json")
        assert code == 0, err
        answers[gpu] = json.loads(out)["rows"][0]
    assert "transferred from b300x8 (same interconnect class, bandwidth ratio 2.00)" in \
        answers["b300-half"]["overhead_from"]
    assert answers["b300-half"]["median"] < answers["b300"]["median"]


def test_replacing_a_row_again_and_again_keeps_one_credit_per_source(tmp_path):
    """`hardware add --replace` nested the row's previous source into the new one each time
    ("other figures as before: s2 ...; other figures as before: s1 ...; other figures as b300:
    ...", flops "as before: as before: as before: as b300: ..."), crediting s2 with a
    bandwidth s4 replaced."""
    steps = [("--like", "b300", "--mem-bw-tb-s", "7", "--source", "s1"),
             ("--mem-bw-tb-s", "6", "--source", "s2", "--replace"),
             ("--memory-gb", "100", "--source", "s3", "--replace"),
             ("--mem-bw-tb-s", "5", "--dense-bf16-tflops", "2000", "--source", "s4", "--replace")]
    for argv in steps:
        code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", *argv)
        assert code == 0, err
    b300 = rows_of(bundled("hardware.csv"))["b300"]
    row = rows_of(tmp_path / "data" / "hardware.csv")["my-gpu"]
    assert row["source"] == ("s4 (mem_bw_tb_s); s3 (memory_gb); other figures as b300: "
                             f"{b300['source']}")
    # (the bf16 peak given scales the row's others: 2000 / 2250 of 4500, 13500 and 150)
    derived = ("DERIVED: my-gpu's row before, scaled as the bf16 peak given (dense_fp8_tflops, "
               "dense_fp4_tflops, dense_int8_tflops)")
    assert row["flops_source"] == (f"s4 (dense_bf16_tflops); {derived}; other figures as b300: "
                                   f"{b300['flops_source']}")
    assert (row["mem_bw_tb_s"], row["memory_gb"], row["dense_bf16_tflops"],
            row["dense_fp8_tflops"], row["dense_fp4_tflops"], row["dense_int8_tflops"]) == (
        "5", "100", "2000", "4000", "12000", "133.33")

    def replaced(memory_gb, source):
        code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", "--memory-gb",
                                 memory_gb, "--source", source, "--replace")
        assert code == 0, err
        return rows_of(tmp_path / "data" / "hardware.csv")["my-gpu"]

    # a figure copied and never given: the copied credit alone, as it was
    row = replaced("90", "s5")
    assert row["source"] == ("s5 (memory_gb); s4 (mem_bw_tb_s); other figures as b300: "
                             f"{b300['source']}")
    assert row["flops_source"] == (f"s4 (dense_bf16_tflops); {derived}; other figures as b300: "
                                   f"{b300['flops_source']}")
    # a review: the same source again gave "s4 (...); s4 (...)"; its columns join one credit
    row = replaced("80", "s4")
    assert row["source"] == ("s4 (memory_gb, mem_bw_tb_s); other figures as b300: "
                             f"{b300['source']}")


def test_a_short_user_table_takes_a_new_gpu_and_replacing_does_not_nest_sources(tmp_path):
    """A review: a valid table of six columns refused a new GPU for a blank compute_capability
    it has no column for; `--replace` without --like nested 'other figures as <itself>' into
    the source every time; `--interconnect ''` was refused as a file error."""
    path = tmp_path / "data" / "hardware.csv"
    path.parent.mkdir()
    path.write_text("hardware,memory,memory_gb,mem_bw_tb_s,interconnect,source\n")
    code, out, err = run_cli(tmp_path, "hardware", "add", "newg", "--mem-bw-tb-s", "1.1",
                             "--interconnect", "PCIe Gen4", "--source", "oc")
    assert code == 0, err
    assert path.read_text().splitlines()[1] == 'newg,,,1.1,PCIe Gen4,"oc (mem_bw_tb_s, interconnect)"'
    code, out, err = run_cli(tmp_path, "hardware", "add", "newg", "--memory-gb", "24",
                             "--source", "second", "--replace")
    assert code == 0, err
    assert rows_of(path)["newg"]["source"] == "second (memory_gb); oc (mem_bw_tb_s, interconnect)"
    code, out, err = run_cli(tmp_path, "hardware", "add", "newg", "--interconnect", "",
                             "--source", "x", "--replace")
    assert code == 2 and "--interconnect is empty" in err
    # peaks given where the copied row has none: no "(unsourced)" half; a --hardware-file
    # that does not exist yet is created
    code, out, err = run_cli(tmp_path, "hardware", "add", "newg", "--mem-bw-tb-s", "1.1",
                             "--interconnect", "PCIe Gen4", "--source", "oc",
                             "--hardware-file", "full.csv")
    assert code == 0 and "(created)" in out, err
    code, out, err = run_cli(tmp_path, "hardware", "add", "newg2", "--like", "newg",
                             "--dense-bf16-tflops", "100", "--source", "sheet", "--dry-run",
                             "--hardware-file", "full.csv", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["gpu"]["flops_source"] == "sheet (dense_bf16_tflops)"


@pytest.mark.parametrize("text, link", [("PCI Express 5.0", "pcie"), ("PCI-E 4.0", "pcie"),
                                        ("Gen5 x16", "pcie"), ("NVSwitch", "fabric"),
                                        ("NVLink Gen5", "fabric")])
def test_the_link_class_reads_how_datasheets_write_it(tmp_path, text, link):
    code, out, _ = run_cli(tmp_path, "hardware", "add", "my-gpu", "--mem-bw-tb-s", "2",
                           "--interconnect", text, "--source", "s", "--dry-run")
    assert code == 0 and f"interconnect  {text} ({link})" in out




def _one_gpu_table(name: str, bw: str, interconnect: str) -> str:
    """A hardware.csv of the bundled header and one GPU row, written by hand."""
    header = next(csv.reader(io.StringIO(bundled("hardware.csv").read_text())))
    row = dict.fromkeys(header, "")
    row.update(hardware=name, mem_bw_tb_s=bw, interconnect=interconnect, source="s")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, header)
    writer.writeheader()
    writer.writerow(row)
    return buf.getvalue()
@pytest.mark.parametrize("text", ["no NVLink", "without NVLink", "non-NVLink", "NVLink: none",
                                  "NVLink: no", "no NVLink / NVSwitch", "w/o NVLink"])
def test_a_link_that_says_it_has_no_fabric_is_not_read_as_one(tmp_path, text):
    # "no NVLink" read as an NVLink-class fabric (the keyword alone was matched): an RTX PRO
    # 6000 node so described was transferred from the B300 fabric node, not the measured RTX
    # PRO 6000 PCIe node, and priced its all-reduces at NVLink bandwidth, without a word
    from ddtree_bayes.core.data import load_hardware
    from ddtree_bayes.core.errors import DataError
    from ddtree_bayes.core.pairs import link_class

    assert link_class(text) is None
    assert link_class(f"PCIe Gen5 ({text})") == "pcie"
    code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", "--like", "rtx-pro-6000",
                             "--interconnect", text, "--source", "s")
    assert code == 2 and out == "" and listing(tmp_path) == {}
    assert err.startswith(f"ddtree-bayes: error: --interconnect {text!r} names neither PCIe nor "
                          "an NVLink-class fabric (fix: ")
    with pytest.raises(DataError, match="names neither PCIe nor an NVLink-class fabric"):
        load_hardware("hardware.csv", text=_one_gpu_table("my-gpu", "1.792", text))


@pytest.mark.parametrize("text", ["NVIDIA NVLink: 900GB/s, PCIe Gen5: 128GB/s",
                                  "NVLink4 900 GB/s; PCIe Gen5 x16", "PCIe Gen5, NVSwitch"])
def test_a_link_naming_both_pcie_and_a_fabric_without_a_bridge_is_refused(tmp_path, text):
    # NVIDIA's datasheets write an SXM part's interconnect as both its links ("NVIDIA NVLink:
    # 900GB/s PCIe Gen5: 128GB/s", H100/H200 SXM): read PCIe first, such a row was a PCIe node,
    # transferred from a PCIe node and its all-reduces priced at PCIe bandwidth, without a word
    # (a PCIe card's NVLink bridge pairs, "NVLink bridge (pairs); PCIe Gen5", stay PCIe)
    from ddtree_bayes.core.data import load_hardware
    from ddtree_bayes.core.errors import DataError

    code, out, err = run_cli(tmp_path, "hardware", "add", "my-h100", "--like", "h100",
                             "--interconnect", text, "--source", "s")
    assert code == 2 and out == "" and listing(tmp_path) == {}
    assert err.startswith(f"ddtree-bayes: error: --interconnect {text!r} names both PCIe and an "
                          "NVLink-class fabric") and "(fix: " in err and err.count("\n") == 1
    with pytest.raises(DataError, match="names both PCIe and an NVLink-class fabric"):
        load_hardware("hardware.csv", text=_one_gpu_table("my-h100", "3.35", text))
    for ok in ("NVLink bridge 600 GB/s (pairs); PCIe Gen5", "PCIe Gen4 (optional 2-way NVLink "
               "bridge)", "PCIe Gen5 (no NVLink)"):
        code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", "--like", "h100",
                                 "--interconnect", ok, "--source", "s", "--dry-run")
        assert code == 0 and f"interconnect  {ok} (pcie)" in out, err


def test_a_saved_fit_whose_table_holds_an_unreadable_link_still_loads():
    """A review: a fit made before link texts were checked, whose stored table holds e.g.
    'n/a (single card)', could no longer be opened (predict, diff, update, report: exit 2),
    even after the user mended data/hardware.csv. A stored table is read as it was fitted
    (not PCIe: a fabric); a table read for a new fit refuses the text."""
    from ddtree_bayes.core.data import load_hardware
    from ddtree_bayes.core.errors import DataError
    from ddtree_bayes.core.pairs import is_fabric
    from ddtree_bayes.engine.testing import point_mass_draws

    base = point_mass_draws()
    text = base.hardware_csv.rstrip("\n").splitlines()
    header = text[0].split(",")
    row = ["" for _ in header]
    row[header.index("hardware")], row[header.index("mem_bw_tb_s")] = "my-gpu", "1.0"
    row[header.index("interconnect")], row[header.index("source")] = "n/a (single card)", "s"
    csv_text = "\n".join([*text, ",".join(row)]) + "\n"
    fit = base.view(hardware_csv=csv_text)
    assert is_fabric(fit.hardware["my-gpu"])   # the older rule, as the fit was made
    with pytest.raises(DataError, match="names neither PCIe nor an NVLink-class fabric"):
        load_hardware("hardware.csv", text=csv_text)


@pytest.mark.parametrize(("argv", "line"), [
    # MI300X's sparse bf16 figure given: the copied fp8 peak was blamed, with a file row that
    # a --dry-run never writes
    (("mi300x-oam", "--like", "mi300x", "--dense-bf16-tflops", "2614.9"),
     "--dense-bf16-tflops 2614.9 is above fp8 2610 (as mi300x): tensor cores multiply a "
     "narrower precision at least as fast (fix: give dense (not sparse) TFLOPS per GPU, and the "
     "other precision's peak with its flag too)"),
    (("x", "--like", "rtx-4090", "--dense-fp8-tflops", "10"),
     "bf16 165.15 (as rtx-4090) is above --dense-fp8-tflops 10: tensor cores multiply"),
    (("y", "--like", "b300", "--dense-fp8-tflops", "4000", "--dense-fp4-tflops", "3000"),
     "--dense-fp8-tflops 4000 is above --dense-fp4-tflops 3000: tensor cores multiply a narrower "
     "precision at least as fast (fix: give dense (not sparse) TFLOPS per GPU)"),
])
def test_peaks_out_of_order_name_the_flag_given(tmp_path, argv, line):
    code, out, err = run_cli(tmp_path, "hardware", "add", *argv, "--source", "s", "--dry-run")
    assert (code, out) == (2, "") and err.startswith("ddtree-bayes: error: " + line)
    assert err.count("\n") == 1 and not (tmp_path / "data").exists()


@pytest.mark.parametrize(("argv", "line"), [
    # the RTX 4090's sparse FP8 figure (FP16 accumulate) beside its dense FP32-accumulate bf16:
    # 8x, where every GPU's fp8 is 2x its bf16; it was written, and the compute knee of an fp8
    # model sat 4x too far out
    (("x", "--like", "rtx-4090", "--dense-fp8-tflops", "1321"),
     "--dense-fp8-tflops 1321 is 8x bf16 165.15 (as rtx-4090): no tensor core of its kind "
     "multiplies fp8 more than 2.5x as fast as bf16 (a sparse or FP16-accumulate figure?) (fix: "
     "give dense TFLOPS at the accumulate mode inference GEMMs run at (GeForce: FP32 "
     "accumulate); if this GPU's bf16 peak is not rtx-4090's, give --dense-bf16-tflops too)"),
    (("y", "--like", "rtx-5090", "--dense-fp4-tflops", "3352"),
     "--dense-fp4-tflops 3352 is 8x fp8 419 (as rtx-5090): no tensor core of its kind "
     "multiplies fp4 more than 4.5x as fast as fp8"),
    (("z", "--mem-bw-tb-s", "1", "--interconnect", "pcie", "--dense-bf16-tflops", "100",
      "--dense-int8-tflops", "500"),
     "--dense-int8-tflops 500 is 5x --dense-bf16-tflops 100: no tensor core of its kind "
     "multiplies int8 more than 4.5x as fast as bf16 (a sparse or FP16-accumulate figure?) "
     "(fix: give dense TFLOPS at the accumulate mode inference GEMMs run at (GeForce: FP32 "
     "accumulate))"),
    # data-centre parts list every precision at one accumulate mode, so a sparse figure (2x the
    # dense) is caught at their own limits: B200's sparse FP4, H100's sparse INT8
    (("b", "--like", "b200", "--dense-fp4-tflops", "18000"),
     "--dense-fp4-tflops 18000 is 4x fp8 4500 (as b200): no tensor core of its kind multiplies "
     "fp4 more than 3.5x as fast as fp8"),
    (("h", "--like", "h100", "--dense-int8-tflops", "3958"),
     "--dense-int8-tflops 3958 is 4x bf16 989 (as h100): no tensor core of its kind multiplies "
     "int8 more than 2.5x as fast as bf16"),
    # a clock cap given for bf16 leaves the copied fp8 peak the --like GPU's
    (("c", "--like", "h100", "--dense-bf16-tflops", "700"),
     "fp8 1979 (as h100) is 2.83x --dense-bf16-tflops 700, more than the 2.5x a tensor core of "
     "its kind reaches: the fp8 peak is h100's, not this GPU's (fix: give --dense-fp8-tflops "
     "too (this GPU's own), in dense TFLOPS"),
])
def test_peaks_too_far_apart_are_refused(tmp_path, argv, line):
    code, out, err = run_cli(tmp_path, "hardware", "add", *argv, "--source", "s")
    assert (code, out) == (2, "") and err.startswith("ddtree-bayes: error: " + line), err
    assert err.count("\n") == 1 and not (tmp_path / "data").exists()


def test_every_built_in_gpu_is_within_the_peak_step_limits():
    """The limits hold the built-in table (fp4 / bf16 up to 8.0004x on the RTX 5060 Ti), and a
    hand-written row beyond one is refused by the table's reader, naming its row and column;
    a saved fit's table is read as it was fitted."""
    from ddtree_bayes.core.data import DataError, load_hardware
    from ddtree_bayes.core.tensor_cores import peaks_too_far_apart

    builtin = load_hardware(bundled("hardware.csv"))
    assert [h for h, row in builtin.items() if peaks_too_far_apart(row)] == []
    # B300's dense FP4 at 15 PFLOPS (3.33x its fp8, 6.67x its bf16) is a real figure
    b300 = {**builtin["b300"], "dense_fp4_tflops": "15000"}
    assert peaks_too_far_apart(b300) is None
    text = ("hardware,mem_bw_tb_s,interconnect,source,dense_bf16_tflops,dense_fp8_tflops\n"
            "zz,1,pcie,x,100,800\n")
    with pytest.raises(DataError, match=r"row 2, column 'dense_fp8_tflops': dense_fp8_tflops "
                                        r"800 is 8x dense_bf16_tflops 100"):
        load_hardware("hardware.csv", text=text)
    assert load_hardware("hardware.csv", text=text, stored=True)["zz"]["dense_fp8_tflops"] == "800"


@pytest.mark.parametrize(("argv", "line"), [
    # an RTX A4000 (datasheet: bf16 76.7, int8 153.4 dense) like an RTX A6000: the A6000's
    # int8 309.7 was written beside the given bf16, 4.04x it (under GeForce's 4.5x limit), so a
    # GGUF model on the A4000 computed twice as fast as the card can
    (("rtx-a4000", "--like", "rtx-a6000", "--mem-bw-tb-s", "0.448", "--memory-gb", "16",
      "--dense-bf16-tflops", "76.7"),
     "--dense-bf16-tflops 76.7 is 0.495x rtx-a6000's 154.8, but int8 309.7 is rtx-a6000's, "
     "copied: a GPU's tensor peaks scale together (fix: give --dense-int8-tflops too, this "
     "GPU's own (153.4 if it scales as bf16 does))"),
    # the FP16-accumulate figure of a GeForce card given for bf16: 2x the table's
    (("g", "--like", "rtx-4090", "--dense-bf16-tflops", "330.3"),
     "--dense-bf16-tflops 330.3 is 2x rtx-4090's 165.15, but fp8 330.3 and int8 660.6 are "
     "rtx-4090's, copied: a GPU's tensor peaks scale together (fix: give --dense-fp8-tflops and "
     "--dense-int8-tflops too, this GPU's own (660.6 and 1321.2 if they scale as bf16 does))"),
    # a GPU's own row: the peaks not given are its own as before
    (("h100", "--dense-fp8-tflops", "1000"),
     "--dense-fp8-tflops 1000 is 0.505x h100's 1979, but bf16 989 is h100's, copied: a GPU's "
     "tensor peaks scale together (fix: give --dense-bf16-tflops too, this GPU's own (499.7 if "
     "it scales as fp8 does))"),
])
def test_a_peak_given_far_from_the_copied_gpus_leaves_no_copied_peak_behind(tmp_path, argv,
                                                                              line):
    code, out, err = run_cli(tmp_path, "hardware", "add", *argv, "--source", "s")
    assert (code, out) == (2, "") and err.startswith("ddtree-bayes: error: " + line), err
    assert err.count("\n") == 1 and not (tmp_path / "data").exists()


def test_a_variant_within_a_quarter_of_the_copied_gpu_keeps_the_copied_peaks(tmp_path):
    """A cut-down or clocked variant given its bf16 peak alone (an RTX 4090 D, 0.89x) is not
    refused (its copied peaks are scaled alike: the test above); every peak given, none
    copied, nothing is checked."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d", "--like", "rtx-4090",
                             "--dense-bf16-tflops", "147", "--source", "x", "--dry-run")
    assert code == 0, err
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-a4000", "--like", "rtx-a6000",
                             "--mem-bw-tb-s", "0.448", "--memory-gb", "16",
                             "--dense-bf16-tflops", "76.7", "--dense-int8-tflops", "153.4",
                             "--source", "NVIDIA RTX A4000 datasheet", "--format", "json")
    assert code == 0, err
    gpu = json.loads(out)["gpu"]
    assert (gpu["dense_bf16_tflops"], gpu["dense_int8_tflops"], gpu["dense_fp8_tflops"]) == (
        76.7, 153.4, None)


def test_a_peak_given_with_like_scales_the_copied_peaks_of_the_other_precisions(tmp_path):
    """`--like rtx-4090 --dense-bf16-tflops 147.09` (an RTX 4090 D: 114 of the 4090's 128 SMs)
    kept the 4090's fp8 330.3 and int8 660.6, so a step on the 4090 D computed its fp8 and
    int8 GEMMs at the 4090's rate. A GPU's tensor peaks scale together (SMs x clock): the
    copied peaks of the other precisions are scaled by the given one's ratio to the copied
    GPU's, said in a note and credited as DERIVED. By hand: 147.09 / 165.15 = 0.8906, fp8
    330.3 = 2 x 165.15 -> 2 x 147.09 = 294.18, int8 660.6 = 4 x 165.15 -> 588.36."""
    base = BUILT_IN["rtx-4090"]
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d", "--like", "rtx-4090",
                             "--dense-bf16-tflops", "147.09", "--source", "sheet",
                             "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    gpu = payload["gpu"]
    assert (gpu["dense_bf16_tflops"], gpu["dense_fp8_tflops"], gpu["dense_fp4_tflops"],
            gpu["dense_int8_tflops"]) == (147.09, 294.18, None, 588.36)
    assert payload["notes"] == [
        "rtx-4090d: fp8 330.3 and int8 660.6 are rtx-4090's, scaled as the bf16 peak given "
        "(147.09 / 165.15 = 0.891) to 294.18 and 588.36: a GPU's tensor peaks scale together "
        "(give --dense-fp8-tflops and --dense-int8-tflops if its datasheet says otherwise)"]
    assert gpu["flops_source"] == (
        "sheet (dense_bf16_tflops); DERIVED: rtx-4090's, scaled as the bf16 peak given "
        "(dense_fp8_tflops, dense_int8_tflops); other figures as rtx-4090: "
        f"{base['flops_source']}")
    assert gpu["has_derived"] is True
    row = rows_of(tmp_path / "data" / "hardware.csv")["rtx-4090d"]
    assert (row["dense_fp8_tflops"], row["dense_int8_tflops"]) == ("294.18", "588.36")
    # the text form names them scaled; a B300 capped to fp8 4000 (8/9 of 4500): bf16 2250 ->
    # 2000, fp4 13500 -> 12000, int8 150 -> 133.33
    code, out, err = run_cli(tmp_path, "hardware", "add", "b300-cap", "--like", "b300",
                             "--dense-fp8-tflops", "4000", "--source", "s", "--dry-run")
    assert code == 0, err
    assert (f"  dense TFLOPS  {'bf16 2000, fp8 4000, fp4 12000, int8 133.33':<44} fp8 given, "
            "bf16, fp4 and int8 scaled as fp8") in out.splitlines()
    assert "note: b300-cap: bf16 2250, fp4 13500 and int8 150 are b300's, scaled as the fp8 " \
           "peak given (4000 / 4500 = 0.889) to 2000, 12000 and 133.33" in out
    # the copied GPU's own peak given: nothing to scale, nothing noted
    code, out, err = run_cli(tmp_path, "hardware", "add", "g", "--like", "rtx-4090",
                             "--dense-bf16-tflops", "165.15", "--memory-gb", "48",
                             "--source", "s", "--format", "json", "--dry-run")
    assert code == 0, err
    assert json.loads(out)["gpu"]["dense_fp8_tflops"] == 330.3 and json.loads(out)["notes"] == []


def test_a_peak_given_for_a_gpus_own_row_scales_its_other_peaks(tmp_path):
    """`hardware add h100 --dense-bf16-tflops 900` (an H100 capped below its 989) kept the
    row's fp8 1979, 2.2x the new bf16 peak, where `--like h100` scaled it (tidy6: a GPU's
    tensor peaks scale together): a GPU's own row, built in or yours (--replace), scales its
    peaks not given alike, with the same note and a DERIVED credit; peaks given are never
    scaled. By hand: fp8 1979 x 900 / 989 = 1800.91; again at 950: 1800.91 x 950 / 900 =
    1900.96."""
    h100 = BUILT_IN["h100"]
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100", "--dense-bf16-tflops", "900",
                             "--source", "s1", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    gpu = payload["gpu"]
    assert (gpu["dense_bf16_tflops"], gpu["dense_fp8_tflops"]) == (900, 1800.91)
    assert payload["notes"] == [
        "h100: fp8 1979 was its row's, scaled as the bf16 peak given (900 / 989 = 0.91) to "
        "1800.91: a GPU's tensor peaks scale together (give --dense-fp8-tflops if its "
        "datasheet says otherwise)"]
    assert gpu["flops_source"] == (
        "s1 (dense_bf16_tflops); DERIVED: h100's row before, scaled as the bf16 peak given "
        f"(dense_fp8_tflops); other figures as before: {h100['flops_source']}")
    assert gpu["has_derived"] is True
    # the user's row replaced: its peaks not given scale again, one DERIVED credit
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100", "--dense-bf16-tflops", "950",
                             "--source", "s2", "--replace")
    assert code == 0, err
    assert (f"  dense TFLOPS  {'bf16 950, fp8 1900.96, fp4 -, int8 -':<44} bf16 given, fp8 "
            "scaled as bf16") in out.splitlines()
    row = rows_of(tmp_path / "data" / "hardware.csv")["h100"]
    assert (row["dense_bf16_tflops"], row["dense_fp8_tflops"]) == ("950", "1900.96")
    assert row["flops_source"] == (
        "s2 (dense_bf16_tflops); DERIVED: h100's row before, scaled as the bf16 peak given "
        f"(dense_fp8_tflops); other figures as before: {h100['flops_source']}")
    # both given: nothing scaled, nothing noted, the credits the given source's alone
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100", "--dense-bf16-tflops", "900",
                             "--dense-fp8-tflops", "1700", "--source", "s3", "--replace",
                             "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["notes"] == [] and payload["gpu"]["dense_fp8_tflops"] == 1700
    assert payload["gpu"]["flops_source"] == "s3 (dense_bf16_tflops, dense_fp8_tflops)"
    # the --help says it
    code, out, _ = run_cli(tmp_path, "hardware", "add", "--help")
    assert "scales" in " ".join(out.split()).split("--replace")[-1]


def test_replace_keeps_a_peak_its_source_gave_and_scales_only_a_derived_one(tmp_path):
    """`hardware add mygpu --replace --dense-bf16-tflops 155` scaled every peak of the row not
    given, the fp8 300 the user's own source gave as well as the int8 a --like had DERIVED:
    a figure from a datasheet is this GPU's, not a copy. Now a peak credited to a source of
    the row (not DERIVED) is kept as it is and a DERIVED one scales; one note line says which
    and why, and the credits follow. By hand: step 1, --like rtx-4090 with bf16 147.09 and
    fp8 300 given: int8 660.6 x 147.09 / 165.15 = 588.36 (DERIVED); step 2, bf16 155: fp8 300
    kept (was 300 x 155 / 147.09 = 316.13), int8 588.36 x 155 / 147.09 = 620.0006 -> 620."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "mygpu", "--like", "rtx-4090",
                             "--dense-bf16-tflops", "147.09", "--dense-fp8-tflops", "300",
                             "--source", "s1")
    assert code == 0, err
    row = rows_of(tmp_path / "data" / "hardware.csv")["mygpu"]
    assert (row["dense_fp8_tflops"], row["dense_int8_tflops"]) == ("300", "588.36")
    code, out, err = run_cli(tmp_path, "hardware", "add", "mygpu", "--replace",
                             "--dense-bf16-tflops", "155", "--source", "s2", "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    validate_output("hardware-add", payload)
    row = rows_of(tmp_path / "data" / "hardware.csv")["mygpu"]
    assert (row["dense_bf16_tflops"], row["dense_fp8_tflops"], row["dense_int8_tflops"]) == (
        "155", "300", "620")   # (was fp8 316.13)
    assert payload["notes"] == [
        "mygpu: fp8 300 kept as s1 gave it (not DERIVED: a peak a source gave is this GPU's "
        "own); int8 588.36 was its row's, scaled as the bf16 peak given (155 / 147.09 = 1.05) "
        "to 620: a GPU's tensor peaks scale together (give --dense-int8-tflops if its "
        "datasheet says otherwise)"]
    rtx = BUILT_IN["rtx-4090"]
    assert row["flops_source"] == (
        "s2 (dense_bf16_tflops); DERIVED: mygpu's row before, scaled as the bf16 peak given "
        f"(dense_int8_tflops); s1 (dense_fp8_tflops); other figures as rtx-4090: "
        f"{rtx['flops_source']}")
    # a row of a datasheet's peaks alone: the one not given is kept, and said so
    sheet = ("hardware", "add", "g2", "--mem-bw-tb-s", "2", "--interconnect", "PCIe Gen5",
             "--dense-bf16-tflops", "900", "--dense-fp8-tflops", "1800", "--source", "sheet")
    assert run_cli(tmp_path, *sheet)[0] == 0
    code, out, err = run_cli(tmp_path, "hardware", "add", "g2", "--replace",
                             "--dense-bf16-tflops", "950", "--source", "v2")
    assert code == 0, err
    assert [ln for ln in out.splitlines() if ln.startswith("note: g2: fp8")] == [
        "note: g2: fp8 1800 kept as sheet gave it (not DERIVED: a peak a source gave is this "
        "GPU's own; only a DERIVED peak scales with the bf16 peak given; give "
        "--dense-fp8-tflops to change it)"]
    row = rows_of(tmp_path / "data" / "hardware.csv")["g2"]
    assert (row["dense_bf16_tflops"], row["dense_fp8_tflops"]) == ("950", "1800")  # (was 1900)
    assert row["flops_source"] == "v2 (dense_bf16_tflops); sheet (dense_fp8_tflops)"
    # 1.33x the bf16 before: the kept fp8 is no copy left behind (it was refused as one)
    code, out, err = run_cli(tmp_path, "hardware", "add", "g2", "--replace",
                             "--dense-bf16-tflops", "1200", "--source", "v3", "--dry-run")
    assert code == 0, err


def test_replace_with_like_names_the_figures_of_the_row_it_drops(tmp_path):
    """`hardware add NAME --like X --replace` starts again from X's row (--like: "the other
    figures are GPU's"), so the figures an earlier add of NAME gave were lost without a word
    unless given again (a bandwidth fix re-typed with --like dropped the bf16 and fp8 peaks
    and the 48 GB). The note names each figure of the row that changes without being given,
    its value before and now, and the two ways to keep them; --replace without --like keeps
    them (the row's own figures not given stay)."""
    path = tmp_path / "data" / "hardware.csv"
    code, _, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d", "--like", "rtx-4090",
                           "--memory-gb", "48", "--dense-bf16-tflops", "147.09",
                           "--dense-fp8-tflops", "294.18", "--dense-int8-tflops", "588.35",
                           "--source", "s1")
    assert code == 0, err
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d", "--like", "rtx-4090",
                             "--mem-bw-tb-s", "1.0", "--source", "s2", "--replace",
                             "--format", "json")
    assert code == 0, err
    assert json.loads(out)["notes"] == [
        "rtx-4090d: --like rtx-4090 --replace starts again from rtx-4090's row: the row's "
        "--memory-gb 48, --dense-bf16-tflops 147.09, --dense-fp8-tflops 294.18 and "
        "--dense-int8-tflops 588.35 are dropped (now 24, 165.15, 330.3 and 660.6); to keep "
        "them, give them again, or --replace without --like"]
    row = rows_of(path)["rtx-4090d"]
    assert (row["mem_bw_tb_s"], row["memory_gb"], row["dense_bf16_tflops"]) == (
        "1", "24", "165.15")
    # given again: nothing dropped, nothing noted; without --like: the row's figures stay
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d", "--like", "rtx-4090",
                             "--mem-bw-tb-s", "1.0", "--source", "s3", "--replace",
                             "--format", "json", "--dry-run")
    assert code == 0 and json.loads(out)["notes"] == [], err
    code, out, err = run_cli(tmp_path, "hardware", "add", "rtx-4090d", "--memory-gb", "48",
                             "--source", "s4", "--replace", "--format", "json")
    assert code == 0 and json.loads(out)["notes"] == [], err
    assert (rows_of(path)["rtx-4090d"]["memory_gb"], rows_of(path)["rtx-4090d"]["mem_bw_tb_s"]
            ) == ("48", "1")


def test_a_gpus_own_row_keeps_the_sources_of_the_figures_not_given(tmp_path):
    """s45b finding 6: `hardware add h200 --like h200 --mem-bw-tb-s 4` rewrote flops_source,
    whose peaks it did not touch, as "as before: <its text>"; every later predict warned that
    h200's flops_source had changed. A credit nothing was given for is kept as it was."""
    h200 = BUILT_IN["h200"]
    code, out, err = run_cli(tmp_path, "hardware", "add", "h200", "--like", "h200",
                             "--mem-bw-tb-s", "4", "--source", "test")
    assert code == 0, err
    row = rows_of(tmp_path / "data" / "hardware.csv")["h200"]
    assert row["flops_source"] == h200["flops_source"]
    assert row["source"] == f"test (mem_bw_tb_s); other figures as before: {h200['source']}"
    # peaks alone given, without --like: the memory figures' source is kept as it was
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100", "--dense-bf16-tflops", "900",
                             "--source", "clocked down")
    assert code == 0, err
    row, h100 = rows_of(tmp_path / "data" / "hardware.csv")["h100"], BUILT_IN["h100"]
    assert row["source"] == h100["source"]
    # (its fp8 peak scales as the bf16 given: test_a_peak_given_for_a_gpus_own_row_scales_...)
    assert row["flops_source"] == (f"clocked down (dense_bf16_tflops); DERIVED: h100's row "
                                   "before, scaled as the bf16 peak given (dense_fp8_tflops); "
                                   f"other figures as before: {h100['flops_source']}")


def test_the_stale_table_warning_names_values_not_sources(tmp_path):
    """s45b finding 6: after `hardware add h200 --like h200 --mem-bw-tb-s 4` predict's warning
    listed h200's flops_source beside its bandwidth (the text of a source bears on no answer),
    and a row whose sources alone were reworded made every answer warn."""
    root = make_point_mass_workdir(tmp_path / "w")
    (root / "data" / "hardware.csv").unlink()     # (the built-in table, as the fit stored it)
    code, out, err = run_cli(root, "hardware", "add", "h200", "--like", "h200",
                             "--mem-bw-tb-s", "4", "--source", "test")
    assert code == 0, err
    code, out, err = run_cli(root, "predict", "--method", "ar")
    assert code == 0, err
    assert err == ("ddtree-bayes: warning: the hardware table here differs from the one fit "
                   "20260101T000000Z-pointmss stored for h200 (mem_bw_tb_s 4.8 -> 4): its "
                   "answers use the stored values; re-run `ddtree-bayes fit` to use these\n")
    # both sources reworded, no figure changed: no warning
    path = root / "data" / "hardware.csv"
    h200 = dict(BUILT_IN["h200"], source="reworded", flops_source="reworded too")
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(h200))
        writer.writeheader()
        writer.writerow(h200)
    code, out, err = run_cli(root, "predict", "--method", "ar")
    assert code == 0 and err == "", err


def test_a_new_gpus_figure_beyond_every_gpu_and_a_multiple_of_one_is_noted(tmp_path):
    """Without --like, a DGX A100 node's totals typed as one GPU's (8 x 2.039 = 16.3 TB/s,
    8 x 80 = 640 GB) were written without a word: every step priced as if each GPU read 8x
    faster, every weights-fit check passed on 640 GB a GPU. Figures above every GPU in the
    table of which two are the same multiple (4, 8 or 16) of one GPU's are noted, as with
    --like; one above them all that is no such multiple (a newer GPU's 22 TB/s) is not."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "dgx-a100", "--mem-bw-tb-s", "16.3",
                             "--memory-gb", "640", "--interconnect", "NVLink3",
                             "--dense-bf16-tflops", "312", "--source", "x", "--format", "json")
    assert code == 0, err
    # the table's largest: 288 GB (b300), 8 TB/s; 640 = 8 x a100-80gb's 80 and 16.3 = 8 x
    # its 2.039 (16.312, within 0.5%): two figures, one GPU, one multiple
    assert json.loads(out)["notes"] == [
        "--memory-gb 640 is 8 x a100-80gb's 80: a whole node's total? The table takes figures per "
        "GPU (the count is --gpus when asking); if so, re-run with --memory-gb 80 --replace",
        "--mem-bw-tb-s 16.3 is 8 x a100-80gb's 2.039: a whole node's total? The table takes "
        "figures per GPU (the count is --gpus when asking); if so, re-run with --mem-bw-tb-s "
        "2.0375 --replace"]
    code, out, err = run_cli(tmp_path, "hardware", "add", "next-gen", "--mem-bw-tb-s", "22",
                             "--memory-gb", "288", "--interconnect", "NVLink6",
                             "--dense-bf16-tflops", "4000", "--source", "x", "--format", "json")
    assert code == 0 and json.loads(out)["notes"] == [], err


def test_a_next_generation_gpus_figures_are_not_taken_for_a_nodes_totals(tmp_path):
    """Any figure above the table's largest that was 4, 8 or 16 x any GPU's (within 0.5%) was
    noted, and with ~20 GPUs in the table that is many plausible new figures: 1 TB of HBM,
    32 TB/s and 5 PFLOPS drew three notes, each naming another GPU (8 x mi250x's 128 GB,
    4 x b300's 8 TB/s, 16 x a100-80gb's 312). A node's totals are all the same multiple of
    the same GPU's, so a note now needs two figures that agree."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "rubin-ultra", "--mem-bw-tb-s", "32",
                             "--memory-gb", "1024", "--interconnect", "NVLink7 3.6 TB/s",
                             "--dense-bf16-tflops", "5000", "--source", "x", "--format", "json")
    assert code == 0 and json.loads(out)["notes"] == [], err
    # one figure alone, however exact a multiple (640 = 8 x 80), is not enough
    code, out, err = run_cli(tmp_path, "hardware", "add", "big-hbm", "--mem-bw-tb-s", "7",
                             "--memory-gb", "640", "--interconnect", "NVLink5",
                             "--dense-bf16-tflops", "2000", "--source", "x", "--format", "json")
    assert code == 0 and json.loads(out)["notes"] == [], err


def test_peaks_line_names_only_the_figures_it_copies(tmp_path):
    """`--like l40s` with bf16, fp8 and int8 given printed "bf16, fp8, int8 given, fp4 as
    l40s": l40s has no fp4 peak, so nothing was copied. And `--like l40s --compute-capability
    7.0` printed "bf16 362, fp8 -, fp4 -, int8 -  as l40s" though fp8 and int8 were left out,
    not copied. The line names only the peaks copied; the note lists three precisions as
    English does ("fp8, fp4 or int8"), not "fp8 or fp4 or int8" and "... and ... and"."""
    def line(*argv):
        code, out, err = run_cli(tmp_path, "hardware", "add", "g", *argv, "--source", "x",
                                 "--dry-run")
        assert code == 0, err
        return out.splitlines()

    lines = line("--like", "l40s", "--dense-bf16-tflops", "350", "--dense-fp8-tflops", "700",
                 "--dense-int8-tflops", "700")
    assert f"  dense TFLOPS  {'bf16 350, fp8 700, fp4 -, int8 700':<44} bf16, fp8, int8 " \
           "given" in lines
    lines = line("--like", "l40s", "--dense-bf16-tflops", "350", "--dense-fp8-tflops", "700")
    # (int8 scaled as bf16, the first given: 733 x 350 / 362 = 708.70)
    assert f"  dense TFLOPS  {'bf16 350, fp8 700, fp4 -, int8 708.7':<44} bf16, fp8 given, " \
           "int8 scaled as bf16" in lines
    lines = line("--like", "l40s", "--compute-capability", "7.0")
    assert f"  dense TFLOPS  {'bf16 362, fp8 -, fp4 -, int8 -':<44} bf16 as l40s" in lines
    lines = line("--like", "l40s", "--compute-capability", "8.0")
    assert f"  dense TFLOPS  {'bf16 362, fp8 -, fp4 -, int8 733':<44} bf16 and int8 as " \
           "l40s" in lines
    # nothing left out: the whole line is as the GPU copied, its blank fp4 too
    lines = line("--like", "l40s", "--memory-gb", "24")
    assert f"  dense TFLOPS  {'bf16 362, fp8 733, fp4 -, int8 733':<44} as l40s" in lines
    lines = line("--like", "b300", "--compute-capability", "7.0")
    assert ("note: g: compute capability 7.0 has no fp8, fp4 or int8 tensor cores (fp8 needs "
            "CC 8.9 or above, fp4 10.0, int8 7.5): the fp8 (4500 TFLOPS), fp4 (13500 TFLOPS) "
            "and int8 (150 TFLOPS) peaks copied from b300 are left out") in lines


#: H100 SXM's datasheet, its tensor peaks "with sparsity" (footnote: 2:4 structured, twice the
#: dense 989 and 1979 the built-in row holds).
SPARSE_H100 = ["--mem-bw-tb-s", "3.35", "--memory-gb", "80", "--dense-bf16-tflops", "1979",
               "--dense-fp8-tflops", "3958", "--interconnect", "NVLink4 0.9 TB/s",
               "--compute-capability", "9.0", "--source", "datasheet"]


def test_a_peak_with_sparsity_is_noted(tmp_path):
    """adv6: an H100 SXM's datasheet peaks with 2:4 sparsity (1979 bf16, 3958 fp8 TFLOPS) typed
    as dense were written without a word, so every step on the GPU would reach its compute knee
    at twice the tokens it does. 1979 / 3.35 = 591 FLOP per byte of bandwidth, 1.41x the most
    of any GPU of the table (L40S: 362 / 0.864 = 419), and 3958 / 3.35 = 1,181 for fp8, 1.39x
    L40S's 733 / 0.864 = 848: noted, with the halves (a new GPU may truly be denser: a note,
    not a refusal). The dense 989 / 1979 (295 and 591 FLOP/B) are not noted; nor an H200's
    sparse 1979 over 4.8 TB/s (412, within the table's range: what the note cannot tell)."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", *SPARSE_H100, "--dry-run",
                             "--format", "json")
    assert code == 0, err
    assert json.loads(out)["notes"] == [
        "--dense-bf16-tflops 1979 over 3.35 TB/s is 591 FLOP per byte of bandwidth, 1.41x the "
        "most of any GPU of the table (l40s: 419); --dense-fp8-tflops 3958: 1,181, 1.39x "
        "(l40s: 848): a datasheet's peak with 2:4 sparsity (twice the dense)? the table takes "
        "dense peaks, or a step's compute knee comes at twice the tokens it does; if so, re-run "
        "with --dense-bf16-tflops 989.5 --dense-fp8-tflops 1979 --replace"]
    dense = [a for a in SPARSE_H100]
    dense[dense.index("1979")], dense[dense.index("3958")] = "989", "1979"
    code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", *dense, "--dry-run",
                             "--format", "json")
    assert code == 0 and json.loads(out)["notes"] == [], err
    h200 = [a for a in SPARSE_H100]
    h200[h200.index("3.35")] = "4.8"
    code, out, err = run_cli(tmp_path, "hardware", "add", "my-gpu", *h200, "--dry-run",
                             "--format", "json")
    assert code == 0 and json.loads(out)["notes"] == [], err


def test_a_peak_with_sparsity_is_noted_with_like_too(tmp_path):
    """`--like h100` with both peaks doubled (a variant's figures from the sparse columns) is
    within --like's 4x and the peaks scale together, so nothing refused it: noted as above."""
    code, out, err = run_cli(tmp_path, "hardware", "add", "h100-new", "--like", "h100",
                             "--dense-bf16-tflops", "1979", "--dense-fp8-tflops", "3958",
                             "--source", "x", "--dry-run", "--format", "json")
    assert code == 0, err
    assert [n.split(":")[0] for n in json.loads(out)["notes"]] == [
        "--dense-bf16-tflops 1979 over 3.35 TB/s is 591 FLOP per byte of bandwidth, 1.41x the "
        "most of any GPU of the table (l40s"]


def test_a_kept_peak_of_the_users_own_source_is_labelled_so(tmp_path):
    """`hardware add mygpu --replace --dense-bf16-tflops 170` keeps the fp8 330 the user's own
    source gave (not DERIVED), but its table credited it "fp8 as mygpu", as if copied from
    another GPU's row: it is the user's own figure, kept, and the label says so. The int8
    (DERIVED before: 660.6 x 330 / 330.3 = 660) scales as bf16: 660 x 170 / 165 = 680."""
    code, _, err = run_cli(tmp_path, "hardware", "add", "mygpu", "--like", "rtx-4090",
                           "--dense-fp8-tflops", "330", "--source", "my fp8 datasheet")
    assert code == 0, err
    code, out, err = run_cli(tmp_path, "hardware", "add", "mygpu", "--replace",
                             "--dense-bf16-tflops", "170", "--source", "my bf16 bench")
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  dense TFLOPS")]
    assert line.split("  ")[-1].strip() == "bf16 given, int8 scaled as bf16, fp8 your own (kept)", line
    assert "bf16 170, fp8 330, fp4 -, int8 680" in line
    # a datasheet's row, nothing scaled: bf16 given, fp8 the sheet's, kept
    assert run_cli(tmp_path, "hardware", "add", "g2", "--mem-bw-tb-s", "2", "--interconnect",
                   "PCIe Gen5", "--dense-bf16-tflops", "900", "--dense-fp8-tflops", "1800",
                   "--source", "sheet")[0] == 0
    code, out, err = run_cli(tmp_path, "hardware", "add", "g2", "--replace",
                             "--dense-bf16-tflops", "950", "--source", "v2")
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  dense TFLOPS")]
    assert line.split("  ")[-1].strip() == "bf16 given, fp8 your own (kept)", line


def test_replace_repairs_its_own_row_whose_compute_capability_the_reader_refuses(tmp_path):
    """A row of data/hardware.csv whose compute capability the reader refuses ('sm_120', not
    major.minor) refused the whole file first, so `hardware add mygpu --compute-capability
    12.0 --replace`, the command that would mend it, exited 2 with the reader's line. Now
    --replace of that very row reads the file with the cell it gives (12.0) and writes the
    row, keeping its other figures; nothing else is relaxed: another row's --replace, or the
    row's own without --replace or without the flag that mends it, is refused as before
    (the reader's line, nothing written)."""
    (tmp_path / "data").mkdir()
    table = tmp_path / "data" / "hardware.csv"
    table.write_text("hardware,memory,memory_gb,mem_bw_tb_s,interconnect,compute_capability,"
                     "source,dense_bf16_tflops\n"
                     "mygpu,GDDR7,32,1.792,PCIe 5.0,sm_120,me,209.5\n"
                     "other,GDDR7,32,1.792,PCIe 5.0,12.0,me,209.5\n")
    line = ("ddtree-bayes: error: data/hardware.csv, row 2, column 'compute_capability': compute "
            "capability 'sm_120' is not one the table can read (fix: write it as major.minor: "
            "12.0 (sm_120 is CC 12.0))\n")
    before = listing(tmp_path)
    for argv in (["other", "--compute-capability", "12.0", "--replace"],
                 ["mygpu", "--compute-capability", "12.0"],
                 ["mygpu", "--memory-gb", "24", "--replace"]):
        code, out, err = run_cli(tmp_path, "hardware", "add", *argv, "--source", "sheet")
        assert (code, out, err) == (2, "", line), argv
        assert listing(tmp_path) == before
    code, out, err = run_cli(tmp_path, "hardware", "add", "mygpu", "--compute-capability",
                             "12.0", "--replace", "--source", "NVIDIA CUDA GPUs page")
    assert code == 0, err
    rows = rows_of(table)
    assert rows["mygpu"]["compute_capability"] == "12.0"
    assert {k: rows["mygpu"][k] for k in ("memory_gb", "mem_bw_tb_s", "dense_bf16_tflops")} == {
        "memory_gb": "32", "mem_bw_tb_s": "1.792", "dense_bf16_tflops": "209.5"}
    assert rows["other"]["source"] == "me"
    assert hardware_table(tmp_path).rows["mygpu"]["compute_capability"] == "12.0"   # (read)


def test_like_a_gpus_own_row_words_its_copied_figures_once(tmp_path):
    """`hardware add myb --like b300 --mem-bw-tb-s 7.7`, where b300 is the user's own row
    ("t (mem_bw_tb_s); other figures as before: <b300's built-in source>"), wrote "me
    (mem_bw_tb_s); other figures as b300: as before: <...>": the bandwidth's credit dropped,
    the "as before" left in the copied text, said twice. Its figures are b300's: "as b300:
    <...>" once, and the row still reads as copied from b300."""
    from ddtree_bayes.workflows.card_files.gpu import copied_from

    b300 = BUILT_IN["b300"]
    for argv in (("b300", "--like", "b300", "--mem-bw-tb-s", "7.9", "--source", "t"),
                 ("myb", "--like", "b300", "--mem-bw-tb-s", "7.7", "--source", "me")):
        code, out, err = run_cli(tmp_path, "hardware", "add", *argv)
        assert code == 0, err
    rows = rows_of(tmp_path / "data" / "hardware.csv")
    assert rows["b300"]["source"] == f"t (mem_bw_tb_s); other figures as before: {b300['source']}"
    assert rows["myb"]["source"] == f"me (mem_bw_tb_s); other figures as b300: {b300['source']}"
    assert rows["myb"]["flops_source"] == f"as b300: {b300['flops_source']}"
    assert copied_from(rows["myb"]["source"]) == "b300"

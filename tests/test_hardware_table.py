"""The hardware table a run uses: the built-in GPUs overlaid by the user's data/hardware.csv.

Issue 21: three rows on an RTX 4090 in a fresh folder used to stop at "unknown hardware
'rtx-4090'"; the GPU is now built in, a user's file only holds what differs, and both files
are validated with their own file, row and column in every error.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import pytest

from ddtree_bayes import api
from ddtree_bayes.core.data import load_hardware
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.hardware_table import ADDED, BUILT_IN, OVERRIDES, hardware_table, merge_tables
from ddtree_bayes.core.model_cards import peak_tflops
from ddtree_bayes.core.paths import bundled

REPO = Path(__file__).resolve().parents[1]
HEADER = "hardware,mem_bw_tb_s,interconnect,source"
#: sha256 of the first 13 lines of data/hardware.csv (header + the 12 rows checked before
#: issue 21): the built-in table grew, these rows keep their values and sources byte for byte
#: (but for b300's fp4 peak, 12600 -> 13500, and its source, corrected on NVIDIA's figure).
CHECKED_ROWS_SHA256 = "a3771e91ac58cc0814478953198e0ce94f5103328b3d181da2de2724ad907080"


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_no_user_file_is_the_built_in_table_and_its_text():
    table = merge_tables(None)
    assert table.user_file is None and len(table.rows) == 37
    assert set(table.origins.values()) == {BUILT_IN}
    assert table.text == bundled("hardware.csv").read_text()


def test_the_repository_data_folder_adds_nothing(monkeypatch):
    # the repository's data/hardware.csv is the readable copy of the built-in table: a fit made
    # here stores the built-in text, as fits always did
    table = hardware_table(workdir=REPO)
    assert table.user_file == str(REPO / "data" / "hardware.csv")
    assert set(table.origins.values()) == {BUILT_IN}
    assert table.text == bundled("hardware.csv").read_text()


INT8_SOURCE = " -- int8: "


A6000_BF16 = "bf16: the same GPU-spec table"


def _before_int8(text: str) -> str:
    """The table as it was before the int8 column, i.e. without that commit's two deliberate
    changes: the int8 column (and the int8 source appended to a row's flops_source), and the
    RTX A6000's bf16 peak, read from the same source (its row had no peak before)."""
    rows = list(csv.reader(io.StringIO(text)))
    i = rows[0].index("dense_int8_tflops")
    src = rows[0].index("flops_source")
    bf16 = rows[0].index("dense_bf16_tflops")
    for r in rows[1:]:
        if r[src].startswith(A6000_BF16):
            r[bf16], r[src] = "", r[src].split(" -- ", 1)[1]
        r[src] = "" if r[src].startswith("int8: ") else r[src].split(INT8_SOURCE)[0]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([r[:i] + r[i + 1:] for r in rows])
    return out.getvalue()


def test_the_checked_rows_are_unchanged():
    """Adding the int8 column changed no other value or source of the checked rows."""
    text = _before_int8((REPO / "data" / "hardware.csv").read_text())
    head = "\n".join(text.splitlines()[:13])
    names = [row[0] for row in csv.reader(io.StringIO(head))][1:]
    assert names == ["b300", "b200", "h200", "h100", "rtx-pro-6000", "rtx-pro-6000-server",
                     "mi355x", "rtx-5090", "rtx-3090", "rtx-pro-6000-maxq", "rtx-a6000", "v100"]
    assert hashlib.sha256(head.encode()).hexdigest() == CHECKED_ROWS_SHA256


def test_int8_peaks_and_their_derivations():
    """GeForce int8 is 4x the FP32-accumulate bf16 rate (whitepaper values), a Blackwell part
    with only an fp4 entry gets fp4 / 2, and Volta (no int8 tensor cores) dp4a at bf16 / 2."""
    from ddtree_bayes.core.model_cards import peak_tflops

    hw = load_hardware(bundled("hardware.csv"))
    assert peak_tflops(hw["rtx-5090"], "int8")[0] == 838.0
    assert peak_tflops(hw["rtx-3090"], "int8")[0] == 284.7
    assert peak_tflops(hw["rtx-4090"], "int8")[0] == 660.6
    assert peak_tflops(hw["rtx-5090"], "int8")[0] == 4 * peak_tflops(hw["rtx-5090"], "bf16")[0]
    value, how = peak_tflops(hw["rtx-pro-6000"], "int8")
    assert value == 1000.0 and "derived from fp4" in how
    value, how = peak_tflops(hw["v100"], "int8")
    assert value == 56.0 and "dp4a" in how
    assert "int8:" in hw["rtx-4090"]["flops_source"]


def test_blackwell_ultra_int8_is_its_own_cut_rate_not_twice_bf16():
    """Blackwell Ultra cut its INT8 tensor rate: 0.15 POPS dense per B300 and 0.165 per GB300
    (verda.com's per-GPU table, without sparsity; NVIDIA's HGX B300 table: 2 POPS sparse for 8
    GPUs, 125 dense each), against 4.5 on a B200. The rows had no int8 peak, so a GGUF model
    on them computed at the bf16 x 2 derivation, 4500 and 5000: 30x the real rate."""
    hw = load_hardware(bundled("hardware.csv"))
    assert peak_tflops(hw["b300"], "int8") == (150.0, "b300: int8 peak 150 TFLOPS from the "
                                                      "hardware table")
    assert peak_tflops(hw["gb300"], "int8") == (165.0, "gb300: int8 peak 165 TFLOPS from the "
                                                       "hardware table")
    # the B200 and GB200 keep the full rate, 2 x bf16 (HGX B200: 72 POPS sparse / 8 / 2)
    assert peak_tflops(hw["b200"], "int8")[0] == 4500.0
    assert peak_tflops(hw["gb200"], "int8")[0] == 5000.0
    for name in ("b300", "gb300"):
        assert "verda.com/blog/gb300-nvl72-architecture" in \
            hw[name]["flops_source"].split(INT8_SOURCE)[1]


def test_b300_fp4_is_nvidias_dense_figure():
    """NVIDIA's non-sparse peaks (NVIDIA/exemplar-performance README, "Peak Theoretical
    Throughput", the MFU reference): B300 bf16 2250, fp8 4500, NVFP4 13500 (DGX B300: 108
    PFLOPS dense FP4 for 8 GPUs). The row had fp4 12600, 7% under, for an fp4 model's knee."""
    hw = load_hardware(bundled("hardware.csv"))
    assert [peak_tflops(hw["b300"], p)[0] for p in ("bf16", "fp8", "fp4")] == [2250.0, 4500.0,
                                                                               13500.0]
    assert "NVIDIA/exemplar-performance" in hw["b300"]["flops_source"]


def test_mi250x_int8_runs_at_its_bf16_rate():
    """CDNA2's matrix cores multiply int8 at the bf16 rate: 383 TOPS and 383 TFLOPS for an
    MI250X (stas00/ml-engineering's TFLOPS table, row 'AMD MI250X', from AMD's datasheet). The
    row had no int8 peak, so a GGUF model on it computed at the bf16 x 2 derivation, 766."""
    hw = load_hardware(bundled("hardware.csv"))
    assert peak_tflops(hw["mi250x"], "int8") == (383.0, "mi250x: int8 peak 383 TFLOPS from the "
                                                        "hardware table")
    assert "int8 383" in hw["mi250x"]["flops_source"].split(INT8_SOURCE)[1]
    # CDNA3 keeps int8 at 2x bf16: the derivation stands (AMD: 2614.9 TOPS for an MI300X)
    assert peak_tflops(hw["mi300x"], "int8")[0] == 2600.0


def test_a_user_row_overrides_a_built_in_gpu_and_a_new_name_adds_one(tmp_path):
    user = write(tmp_path / "data" / "hardware.csv", [
        HEADER + ",dense_bf16_tflops,notes",
        "rtx-4090,0.9,PCIe Gen4,measured on my card,150,memory clock lowered",
        "my-gpu,1.2,PCIe Gen5,vendor sheet,,",
        "h100,3.35,NVLink4 0.9 TB/s,same bandwidth as built in,,"])
    table = hardware_table(workdir=tmp_path)
    assert table.user_file == str(user)
    assert (table.origins["rtx-4090"], table.origins["my-gpu"], table.origins["b300"]) == (
        OVERRIDES, ADDED, BUILT_IN)
    assert table.origins["h100"] == OVERRIDES   # its source and blank bf16 peak differ
    built = load_hardware(bundled("hardware.csv"))
    assert table.rows["rtx-4090"]["mem_bw_tb_s"] == "0.9"
    assert table.rows["rtx-4090"]["dense_bf16_tflops"] == "150"       # the user's value
    # a column the user's file does not have says nothing: the built-in value stands
    for column in ("dense_fp8_tflops", "dense_int8_tflops", "memory_gb", "compute_capability"):
        assert table.rows["rtx-4090"][column] == built["rtx-4090"][column] != ""
    # a cell the user's file leaves blank stays blank, and is reported
    assert table.rows["h100"]["dense_bf16_tflops"] == "" != built["h100"]["dense_bf16_tflops"]
    assert table.shadowed == (("h100", "dense_bf16_tflops"),)
    assert "(h100 dense_bf16_tflops)" in table.shadowed_note()
    assert list(table.rows)[-1] == "my-gpu"                           # added at the end
    # the text a fit stores: every column of both headers, and it parses to the same table
    stored = load_hardware("stored", text=table.text)
    assert stored == {k: {h: v.get(h, "") for h in table.header} for k, v in table.rows.items()}
    assert table.header[-1] == "notes"


def test_a_user_row_identical_to_the_built_in_one_keeps_the_built_in_text(tmp_path):
    lines = bundled("hardware.csv").read_text().splitlines()
    write(tmp_path / "data" / "hardware.csv", [lines[0], lines[1]])   # header + b300
    table = hardware_table(workdir=tmp_path)
    assert table.origins["b300"] == BUILT_IN
    assert table.text == bundled("hardware.csv").read_text()


def test_issue_21_three_rows_on_an_rtx_4090_need_no_hardware_file(tmp_path):
    lines = (REPO / "data" / "measurements.csv").read_text().splitlines()
    rows = [lines[0]] + [f"llama-3.1-8b-instruct,rtx-4090,1,vllm,ar,,,1,1,0,{t},my bench,"
                         for t in (55.1, 55.4, 54.9)]
    write(tmp_path / "data" / "measurements.csv", rows)
    data, _ = api.load_inputs(workdir=tmp_path)
    assert data.systems == ("rtx-4090x1",) and len(data.rows) == 3


@pytest.mark.parametrize(("line", "column", "message"), [
    ("rtx-4090,fast,PCIe Gen4,x", "mem_bw_tb_s", "not a number: 'fast'"),
    ("rtx-4090,,PCIe Gen4,x", "mem_bw_tb_s", "empty value"),
    ("rtx-4090,-1,PCIe Gen4,x", "mem_bw_tb_s", "must be > 0, got -1"),
])
def test_errors_name_the_users_file_row_and_column(tmp_path, line, column, message):
    user = write(tmp_path / "data" / "hardware.csv", [HEADER, "my-gpu,1.2,PCIe Gen5,x", line])
    with pytest.raises(DataError) as info:
        hardware_table(workdir=tmp_path)
    err = info.value
    assert (err.file, err.row, err.column) == (str(user), 3, column)
    assert message in str(err) and "\n" not in str(err) and "fix:" in str(err)


@pytest.mark.parametrize(("cells", "column", "message", "fix"), [
    # an RTX 3090 (CC 8.6) written by hand with an fp8 peak: hardware add refuses it, the table
    # read it, and an fp8 model's compute was priced at it
    ("8.6,71.2,142.4,", "dense_fp8_tflops", "compute capability 8.6 has no fp8 tensor cores "
     "(fp8 needs CC 8.9 or above)", "leave dense_fp8_tflops blank (fp8 weights then compute at "
     "the fastest precision the GPU has), or correct compute_capability"),
    ("9.0,989,1979,3958", "dense_fp4_tflops", "compute capability 9.0 has no fp4 tensor cores "
     "(fp4 needs CC 10.0 or above)", None),
    ("sm_70,112,,", "compute_capability", "compute capability 'sm_70' is not one the table can "
     "read", "write it as major.minor: 7.0 (sm_70 is CC 7.0)"),
    # a major no NVIDIA GPU has (1, Tesla, to 12, Blackwell GeForce / DGX Spark): hardware add
    # refuses --compute-capability 99.9, the table read it, and the tensor-core rules then took
    # it for a GPU with every precision (its fp4 peak here priced)
    ("99.9,989,1979,3958", "compute_capability", "compute capability 99.9 is no NVIDIA GPU's: "
     "compute capabilities run from 1.0 (Tesla) to 12.x (Blackwell: RTX 50, RTX PRO 6000 12.0, "
     "DGX Spark 12.1)", "give the GPU's own (nvidia-smi --query-gpu=compute_cap), or an AMD "
     "GPU's gfx target, e.g. gfx942"),
    ("13.0,,,", "compute_capability", "compute capability 13.0 is no NVIDIA GPU's: compute "
     "capabilities run from 1.0 (Tesla) to 12.x (Blackwell: RTX 50, RTX PRO 6000 12.0, DGX "
     "Spark 12.1)", None),
    ("0.9,,,", "compute_capability", "compute capability 0.9 is no NVIDIA GPU's: compute "
     "capabilities run from 1.0 (Tesla) to 12.x (Blackwell: RTX 50, RTX PRO 6000 12.0, DGX "
     "Spark 12.1)", None),
    # `hardware add x --like rtx-4090 --dense-fp8-tflops 10` went through (bf16 is 165)
    ("8.9,165,10,", "dense_fp8_tflops", "dense_fp8_tflops 10 is below dense_bf16_tflops 165: "
     "tensor cores multiply a narrower precision at least as fast",
     "write it in dense TFLOPS per GPU (not PFLOPS), or leave it blank"),
    ("10.0,2250,4500,3000", "dense_fp4_tflops", "dense_fp4_tflops 3000 is below "
     "dense_fp8_tflops 4500: tensor cores multiply a narrower precision at least as fast", None),
])
def test_a_hand_written_row_is_checked_as_hardware_add_checks_it(tmp_path, cells, column,
                                                                 message, fix):
    header = HEADER + ",compute_capability,dense_bf16_tflops,dense_fp8_tflops,dense_fp4_tflops"
    user = write(tmp_path / "data" / "hardware.csv", [header, f"my-gpu,0.9,PCIe Gen4,x,{cells}"])
    with pytest.raises(DataError) as info:
        hardware_table(workdir=tmp_path)
    err = info.value
    assert (err.file, err.row, err.column) == (str(user), 2, column)
    assert f": {message} (fix:" in str(err) and "\n" not in str(err)
    if fix is not None:
        assert err.fix == fix
    # a row that leaves the missing precision blank is read, and int8 below 7.5 is allowed
    write(user, [header + ",dense_int8_tflops", "my-gpu,0.9,PCIe Gen4,x,7.0,112,,,56"])
    assert hardware_table(workdir=tmp_path).rows["my-gpu"]["dense_int8_tflops"] == "56"


def test_a_gpu_added_after_the_fit_says_refit_not_spelling(tmp_path, monkeypatch):
    """`hardware add mygpu` then `predict --hardware mygpu` before a refit: the warning said
    "in the hardware table here but not in the fit's", the error "nor in the hardware table"
    with "fix: check the spelling"."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.question import Flags, check_names
    from ddtree_bayes.engine.testing import point_mass_draws

    write(tmp_path / "data" / "hardware.csv", [HEADER, "mygpu,1.0,PCIe Gen4,x"])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(QueryError) as info:
        check_names(point_mass_draws(), Flags(hardware="mygpu"))
    assert "'mygpu' was never measured, nor in the hardware table the fit stored" in str(info.value)
    assert info.value.fix == ("re-run `ddtree-bayes fit`: mygpu is in the hardware table here, "
                              "added after this fit")
    with pytest.raises(QueryError) as info:   # a name in neither table: a typo
        check_names(point_mass_draws(), Flags(hardware="mygpy"))
    assert info.value.fix == "check the spelling"


def test_a_saved_fits_table_is_read_as_it_was_fitted():
    # a fit made before the check keeps its stored table readable (predict answers from it)
    text = (HEADER + ",compute_capability,dense_bf16_tflops,dense_fp8_tflops\n"
            "my-gpu,0.9,PCIe Gen4,x,8.6,71.2,142.4\n")
    with pytest.raises(DataError, match="has no fp8 tensor cores"):
        load_hardware("hardware.csv", text=text)
    assert load_hardware("stored", text=text, stored=True)["my-gpu"]["dense_fp8_tflops"] == "142.4"


def test_amd_matrix_cores_by_gfx_target(tmp_path):
    """CDNA2 (MI250X, gfx90a) has no fp8 and CDNA3 (MI300X, gfx942) no fp4 matrix cores: their
    peaks were derived as bf16 x 2 / x 4 (766 / 5,200 TFLOPS)."""
    hw = load_hardware(bundled("hardware.csv"))
    assert peak_tflops(hw["mi250x"], "fp8")[0] == 383.0
    assert peak_tflops(hw["mi250x"], "fp4")[0] == 383.0
    value, how = peak_tflops(hw["mi300x"], "fp4")
    assert value == 2610.0 and how == (
        "mi300x: no fp4 tensor cores on gfx942 (fp4 needs gfx950 (CDNA4) or later), so fp4 "
        "computes at the fp8 rate (fp8 peak 2610 TFLOPS from the hardware table)")
    assert peak_tflops(hw["mi355x"], "fp4")[0] == 10100.0
    header = HEADER + ",compute_capability,dense_bf16_tflops,dense_fp8_tflops"
    user = write(tmp_path / "data" / "hardware.csv", [header, "my-mi,3.2,PCIe Gen4,x,gfx90a,383,766"])
    with pytest.raises(DataError) as info:
        hardware_table(workdir=tmp_path)
    assert (info.value.file, info.value.row, info.value.column) == (str(user), 2, "dense_fp8_tflops")
    assert "compute capability gfx90a has no fp8 tensor cores (fp8 needs gfx942 (CDNA3) or " \
        "later)" in str(info.value)


def test_an_fp8_or_fp4_model_computes_at_the_fastest_precision_the_gpu_has():
    """Below CC 8.9 there are no fp8 tensor cores and below 10.0 no fp4 ones: the peak was
    derived as bf16 x 2 (an A100 at 624 fp8 TFLOPS) or bf16 x 4 (an H100 at 3,956 fp4 TFLOPS),
    twice what the GPU multiplies at; it is the fastest precision the GPU has."""
    hw = load_hardware(bundled("hardware.csv"))
    value, how = peak_tflops(hw["a100-80gb"], "fp8")
    assert value == 312.0
    assert how == ("a100-80gb: no fp8 tensor cores on 8.0 (fp8 needs CC 8.9 or above), so fp8 "
                   "computes at the bf16 rate (bf16 peak 312 TFLOPS from the hardware table)")
    assert peak_tflops(hw["a100-80gb"], "fp4")[0] == 312.0
    assert peak_tflops(hw["h100"], "fp4")[0] == 1979.0   # Hopper: fp8 tensor cores
    assert peak_tflops(hw["rtx-4090"], "fp4")[0] == 330.3   # Ada: its own fp8 entry
    assert peak_tflops(hw["v100"], "fp8")[0] == 112.0
    assert peak_tflops(hw["b300"], "fp4")[0] == 4 * peak_tflops(hw["b300"], "bf16")[0] or \
        "from the hardware table" in peak_tflops(hw["b300"], "fp4")[1]   # Blackwell: unchanged
    assert peak_tflops(hw["h100"], "fp8")[0] == 1979.0   # its own entry, as before


def test_a_peak_that_is_not_a_number_is_caught(tmp_path):
    user = write(tmp_path / "hw.csv", [HEADER + ",dense_fp8_tflops", "x1,1.0,PCIe,src,n/a"])
    with pytest.raises(DataError) as info:
        hardware_table(hardware_file=user)
    assert (info.value.row, info.value.column) == (2, "dense_fp8_tflops")


def test_a_user_file_missing_a_column_names_it(tmp_path):
    user = write(tmp_path / "hw.csv", ["hardware,mem_bw_tb_s,source", "x1,1.0,src"])
    with pytest.raises(DataError) as info:
        hardware_table(hardware_file=user)
    assert (info.value.file, info.value.row, info.value.column) == (str(user), 1, "interconnect")


# ---------------------------------------------------------------- the built-in rows
BUILT_IN_ROWS = list(csv.DictReader(io.StringIO(bundled("hardware.csv").read_text())))


@pytest.mark.parametrize("row", BUILT_IN_ROWS, ids=[r["hardware"] for r in BUILT_IN_ROWS])
def test_every_built_in_row_is_sourced(row):
    assert row["source"].strip()
    peaks = [row[f"dense_{p}_tflops"] for p in ("bf16", "fp8", "fp4")]
    if any(peaks):
        assert row["flops_source"].strip()
    for value in (row["memory_gb"], row["mem_bw_tb_s"], *peaks):
        assert value == "" or float(value) > 0


@pytest.mark.parametrize(("name", "bf16", "fp8"), [
    ("rtx-4090", 165.15, 330.3),     # GeForce: FP32-accumulate rates, given in the table
    ("rtx-5080", 113.0, 225.0),
    ("l40s", 362.0, 733.0),          # data centre: the headline dense rates
])
def test_geforce_peaks_are_read_not_derived_by_the_data_centre_ratios(name, bf16, fp8):
    row = {"hardware": name, **hardware_table(workdir="/nonexistent").rows[name]}
    assert peak_tflops(row, "bf16")[0] == bf16
    assert peak_tflops(row, "fp8") == (fp8, f"{name}: fp8 peak {fp8:g} TFLOPS from the hardware "
                                            "table")


def test_hardware_list_table_marks_the_users_rows(tmp_path):
    from test_cli_support import run_cli

    write(tmp_path / "data" / "hardware.csv", [HEADER, "rtx-4090,0.95,PCIe Gen4,my card",
                                              "my-gpu,1.2,PCIe Gen5,vendor sheet"])
    code, out, err = run_cli(tmp_path, "hardware", "list")
    assert code == 0 and err == ""
    lines = out.splitlines()
    row = next(ln for ln in lines if ln.startswith("rtx-4090 "))
    # its bandwidth is the user's; memory and peaks, columns the file lacks, are built in
    assert row.split()[1:5] == ["24", "GB", "GDDR6X", "0.95"]
    assert row.endswith("yours (overrides built-in)")
    assert next(ln for ln in lines if ln.startswith("my-gpu ")).endswith("  yours")
    assert next(ln for ln in lines if ln.startswith("rtx-5090 ")).endswith("built-in *")
    assert "38 GPUs (data/hardware.csv adds 1 and replaces 1)." in out


def test_a_stale_copy_of_the_table_keeps_new_columns_and_names_blanked_values(tmp_path):
    """A full copy of the built-in table made before a column existed, with a value the
    built-in table has since filled left blank: the missing column comes from the built-in
    rows (every row then equals its built-in one but for the blank), the blank stays blank,
    and `hardware list` says which values this run does not use, in one line."""
    from test_cli_support import run_cli

    rows = list(csv.DictReader(io.StringIO(bundled("hardware.csv").read_text())))
    old = [h for h in rows[0] if h != "dense_int8_tflops"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=old, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({**r, "dense_bf16_tflops": "" if r["hardware"] == "rtx-a6000"
                    else r["dense_bf16_tflops"]})
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "hardware.csv").write_text(buf.getvalue())
    table = hardware_table(workdir=tmp_path)
    built = {r["hardware"]: r for r in rows}
    assert {n for n, o in table.origins.items() if o != BUILT_IN} == {"rtx-a6000"}
    assert table.rows["rtx-4090"]["dense_int8_tflops"] == built["rtx-4090"]["dense_int8_tflops"]
    assert table.shadowed == (("rtx-a6000", "dense_bf16_tflops"),)
    peak, how = peak_tflops(table.rows["rtx-a6000"], "bf16")   # the blank is not filled in
    assert peak == pytest.approx(0.768 * 200) and "assumed" in how
    code, out, err = run_cli(tmp_path, "hardware", "list")
    assert code == 0 and err == ""
    note = out.splitlines()[-1]
    assert note.startswith("note: data/hardware.csv leaves blank 1 value the built-in table has "
                           "(rtx-a6000 dense_bf16_tflops)") and "fix:" in note
    from test_json_schemas import validate_output

    code, out, err = run_cli(tmp_path, "hardware", "list", "--format", "json")
    payload = json.loads(out)
    validate_output("hardware-list", payload)
    assert payload["shadowed"] == [{"hardware": "rtx-a6000", "column": "dense_bf16_tflops"}]


def test_the_cli_lists_every_precision_the_cards_may_name():
    """`hardware list`, the hardware reader and `card add --compute-dtype` spell the
    precisions out (so the CLI starts without numpy); they must stay the cards' own list."""
    import argparse

    from ddtree_bayes.cli import hardware as H
    from ddtree_bayes.cli.main import build_parser
    from ddtree_bayes.core.data import HARDWARE_NUMBERS
    from ddtree_bayes.core.model_cards import PRECISIONS

    peaks = tuple(f"dense_{p}_tflops" for p in PRECISIONS)
    assert H.PEAKS == peaks and set(peaks) <= set(HARDWARE_NUMBERS)
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    card = next(a for a in sub.choices["card"]._actions
                if isinstance(a, argparse._SubParsersAction))
    dtype = next(a for a in card.choices["add"]._actions if "--compute-dtype" in a.option_strings)
    assert tuple(dtype.choices) == tuple(PRECISIONS)


def test_fit_names_the_values_its_hardware_file_blanks(tmp_path, monkeypatch, capsys):
    """The one-line note reaches `fit` too (even quiet), before anything samples."""
    from ddtree_bayes.engine import fitting
    from ddtree_bayes.engine import remedies as R

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    rows = list(csv.DictReader(io.StringIO(bundled("hardware.csv").read_text())))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows({**r, "dense_fp8_tflops": "" if r["hardware"] == "b300" else r["dense_fp8_tflops"]}
                for r in rows)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "hardware.csv").write_text(buf.getvalue())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(R, "run", stop)
    with pytest.raises(Stop):
        fitting.fit(workdir=tmp_path, progress=False)
    err = capsys.readouterr().err
    assert err.startswith("ddtree-bayes: note: data/hardware.csv leaves blank 1 value the "
                          "built-in table has (b300 dense_fp8_tflops): this run does not use")


def test_a_misspelt_column_of_either_card_table_is_refused(tmp_path):
    """`dense_bf16_tflops` spelt `dense_bf16_tflop` in data/hardware.csv was read as no
    column, exit 0: the peak silently derived as bandwidth x 200; `kv_cache_bit` in
    data/models.csv likewise dropped the cache's dtype. measurements.csv refuses a column
    spelt like a known one; so do both card tables, naming file, column and fix."""
    from ddtree_bayes.core.model_cards import load_model_cards

    text = bundled("hardware.csv").read_text(encoding="utf-8")
    hw = tmp_path / "hardware.csv"
    hw.write_text(text.replace("dense_bf16_tflops", "dense_bf16_tflop", 1))
    with pytest.raises(DataError) as err:
        load_hardware(hw)
    assert str(err.value) == (
        f"{hw}, row 1, column 'dense_bf16_tflop': unknown column, read as no column (fix: did "
        "you mean 'dense_bf16_tflops'? rename it: a column this reader does not know is "
        "ignored)")
    text = bundled("models.csv").read_text(encoding="utf-8")
    models = tmp_path / "models.csv"
    models.write_text(text.replace("kv_cache_bits", "kv_cache_bit", 1))
    with pytest.raises(DataError) as err:
        load_model_cards(models)
    assert str(err.value) == (
        f"{models}, row 1, column 'kv_cache_bit': unknown column, read as no column (fix: did "
        "you mean 'kv_cache_bits'? rename it: a column this reader does not know is ignored)")
    # another column, not spelt like a known one, stays allowed (and ignored): the last, each
    # row's cell of it empty (in the middle of the header, with the empty cell at each row's
    # end, the cells after it were read one column off)
    models.write_text(text.replace("\n", ",\n").replace(",\n", ",checked_by\n", 1))
    assert load_model_cards(models) == load_model_cards(bundled("models.csv"))


@pytest.mark.parametrize(("table", "typo", "meant"), [
    ("hardware.csv", "mem_bw_tbs", "mem_bw_tb_s"),
    ("hardware.csv", "interconect", "interconnect"),
    ("models.csv", "params_activ_b", "params_active_b"),
    ("models.csv", "expert_topk", "experts_topk"),
])
def test_a_misspelt_required_column_of_a_card_table_is_named_not_missing(tmp_path, table,
                                                                         typo, meant):
    """`params_activ_b` in data/models.csv (or `mem_bw_tbs` in data/hardware.csv) was refused
    as "missing column 'params_active_b'", the typo unnamed, while measurements.csv names the
    cell it misspelt (core/data ``check_named_columns``): the card tables now say the same."""
    from ddtree_bayes.core.model_cards import load_model_cards

    path = tmp_path / table
    path.write_text(bundled(table).read_text(encoding="utf-8").replace(meant, typo, 1))
    with pytest.raises(DataError) as err:
        (load_hardware if table == "hardware.csv" else load_model_cards)(path)
    assert str(err.value) == (
        f"{path}, row 1, column {typo!r}: unknown column, read as no column (fix: did you mean "
        f"{meant!r}? rename it: a column this reader does not know is ignored)")


@pytest.mark.parametrize("table", ["hardware.csv", "models.csv"])
def test_a_required_column_of_a_card_table_in_capitals_is_named_with_the_rename(tmp_path, table):
    """`Source` for `source`: the measurements reader's fix (names are lowercase), not a bare
    "missing column" (the model-card reader gave that)."""
    from ddtree_bayes.core.model_cards import load_model_cards

    path = tmp_path / table
    text = bundled(table).read_text(encoding="utf-8")
    header, rest = text.split("\n", 1)
    path.write_text(header.replace("source", "Source", 1) + "\n" + rest)
    with pytest.raises(DataError) as err:
        (load_hardware if table == "hardware.csv" else load_model_cards)(path)
    assert str(err.value) == (f"{path}, row 1, column 'source': missing column (fix: column "
                              "names are lowercase: rename 'Source' to 'source')")


def test_a_column_of_another_precision_is_not_a_misspelling(tmp_path):
    """A review found `dense_fp16_tflops` (a spec sheet's fp16 peak, in a table without an fp8
    column) refused as 'did you mean dense_fp8_tflops?': a name that differs from a known one
    in its digits only is another column, read as no column, as before the check."""
    text = bundled("hardware.csv").read_text(encoding="utf-8")
    hw = tmp_path / "hardware.csv"
    hw.write_text(text.replace("dense_fp8_tflops", "dense_fp16_tflops", 1))
    assert "h100" in load_hardware(hw)

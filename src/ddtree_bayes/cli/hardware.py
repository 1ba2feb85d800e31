"""``hardware list``: the GPUs a run knows, their key figures and where each row came from.

The table is the built-in one overlaid by the working directory's ``data/hardware.csv`` (or
``--hardware-file``); see :mod:`ddtree_bayes.core.hardware_table`. ``--format json`` carries every
row's sources (``docs/json-output.md``, ``schemas/hardware-list.schema.json``).
"""
from __future__ import annotations

import argparse
import math

from ddtree_bayes.cli.args import add_format
from ddtree_bayes.cli.output import aligned_table, emit_json, shown_path

#: A figure whose text holds this word was computed, not read (data/hardware.csv's convention).
DERIVED_MARK = "DERIVED"
PEAKS = ("dense_bf16_tflops", "dense_fp8_tflops", "dense_fp4_tflops", "dense_int8_tflops")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def gpu_record(name: str, row: dict[str, str], origin: str) -> dict:
    """One GPU as ``hardware list --format json`` shows it."""
    from ddtree_bayes.core.pairs import is_fabric

    source, flops_source = row.get("source", ""), row.get("flops_source", "")
    return {
        "hardware": name,
        "memory": row.get("memory", ""),
        "memory_gb": _number(row.get("memory_gb", "")),
        "mem_bw_tb_s": _number(row.get("mem_bw_tb_s", "")),
        "interconnect": row.get("interconnect", ""),
        "link": "fabric" if is_fabric(row) else "pcie",
        "compute_capability": row.get("compute_capability", ""),
        **{p: _number(row.get(p, "")) for p in PEAKS},
        "origin": origin,
        "has_derived": DERIVED_MARK in source or DERIVED_MARK in flops_source,
        "source": source,
        "flops_source": flops_source,
    }


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def cmd_hardware_list(args: argparse.Namespace) -> int:
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.hardware_table import ADDED, OVERRIDES, hardware_table

    table = hardware_table(None, args.hardware_file)
    records = [gpu_record(name, row, table.origins[name]) for name, row in table.rows.items()]
    if args.format == "json":
        emit_json({"builtin_file": str(paths.bundled("hardware.csv")),
                   "user_file": table.user_file, "gpus": records,
                   "shadowed": [{"hardware": g, "column": c} for g, c in table.shadowed]})
        return 0
    mark = {ADDED: "yours", OVERRIDES: "yours (overrides built-in)"}
    rows = [[r["hardware"], _memory(r),
             _cell(r["mem_bw_tb_s"]), *(_cell(r[p]) for p in PEAKS), r["link"],
             r["compute_capability"], mark.get(r["origin"], "built-in")
             + (" *" if r["has_derived"] else "")] for r in records]
    print(aligned_table(["hardware", "memory", "TB/s", "bf16", "fp8", "fp4", "int8", "link", "cc",
                         "row"], rows, left=2, text_last=True))
    added = sum(r["origin"] == ADDED for r in records)
    replaced = sum(r["origin"] == OVERRIDES for r in records)
    where = (f"{shown_path(table.user_file)} adds {added} and replaces {replaced}"
             if table.user_file else "no data/hardware.csv here: the built-in table alone")
    print(f"\n{len(records)} GPUs ({where}).\n"
          "Peaks: dense TFLOPS at the accumulate mode inference GEMMs run at (GeForce: FP32 "
          "accumulate, half the FP16-accumulate headline); int8 = tensor TOPS (ggml's GGUF "
          "kernels);\n"
          "- = not in the table (then derived from another precision, or bandwidth x 200 "
          "FLOP/B); * = the row has a DERIVED figure; --format json shows every source.")
    note = table.shadowed_note()
    if note is not None:
        print(f"note: {note}")
    return 0


def _memory(record: dict) -> str:
    size = "" if record["memory_gb"] is None else f"{record['memory_gb']:g} GB"
    return f"{size} {record['memory']}".strip() or "-"


def register(sub) -> None:
    """Add ``hardware`` (with its ``list`` subcommand) to the main parser's subcommands."""
    h = sub.add_parser("hardware", help="the GPUs this tool knows (built in and yours)",
                       description="The hardware table: the built-in GPUs (sourced: memory, "
                                   "bandwidth, interconnect, dense peak TFLOPS), overlaid by "
                                   "your data/hardware.csv, whose rows replace built-in rows "
                                   "of the same name or add GPUs.")
    hsub = h.add_subparsers(dest="hardware_command", required=True, metavar="SUBCOMMAND")
    ls = hsub.add_parser("list", help="list the GPUs, their key figures and where each came from",
                         description="One row per GPU: memory, bandwidth, dense bf16/fp8/fp4 "
                                     "peaks, link class (fabric or PCIe), compute capability, "
                                     "and whether the row is built in or yours.")
    ls.add_argument("--hardware-file",
                    help="your hardware table (default: data/hardware.csv here, if any)")
    add_format(ls, ("table", "json"))
    ls.set_defaults(func=cmd_hardware_list)

"""``hardware list``: the GPUs a run knows, their key figures and where each row came from;
``hardware add``: a row for your GPU, like a known one or from its datasheet.

The table is the built-in one overlaid by the working directory's ``data/hardware.csv`` (or
``--hardware-file``); see :mod:`ddtree_bayes.core.hardware_table`. ``--format json`` carries every
row's sources (``docs/json-output.md``, ``schemas/hardware-list.schema.json``,
``schemas/hardware-add.schema.json``).
"""
from __future__ import annotations

import argparse
import math

from ddtree_bayes.cli.args import add_format, real
from ddtree_bayes.cli.output import aligned_table, emit_json, shown_path
from ddtree_bayes.core.data import listed

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


#: ``hardware add``'s figure flags: column, help, upper bound, unit hint.
FIGURES = (
    ("memory_gb", "memory per GPU in GB", 4096.0, "GB per GPU, e.g. 24"),
    ("mem_bw_tb_s", "memory bandwidth per GPU in TB/s (what bounds a decoding step)", 100.0,
     "TB/s per GPU, e.g. 1.008 for an RTX 4090 (not GB/s)"),
    ("dense_bf16_tflops", "dense bf16 tensor TFLOPS per GPU (no sparsity; GeForce: FP32 "
     "accumulate)", 100_000.0, "dense TFLOPS per GPU, e.g. 165.2"),
    ("dense_fp8_tflops", "dense fp8 tensor TFLOPS per GPU", 100_000.0, "dense TFLOPS per GPU"),
    ("dense_fp4_tflops", "dense fp4 tensor TFLOPS per GPU", 100_000.0, "dense TFLOPS per GPU"),
    ("dense_int8_tflops", "dense int8 tensor TOPS per GPU (GGUF models in llama.cpp)",
     100_000.0, "dense TOPS per GPU"),
)
TEXTS = (("memory", "memory type, e.g. GDDR7"),
         ("interconnect", "how the GPUs of a node are linked, e.g. 'PCIe Gen5' or 'NVLink4 "
                          "0.9 TB/s' (NVLink/fabric vs PCIe sets the all-reduce cost)"),
         ("compute_capability", "CUDA compute capability as major.minor, e.g. 8.9, or an AMD "
                                "gfx target (below 10.0 no fp4, below 8.9 no fp8, below 7.5 no "
                                "int8 tensor cores: such peaks copied with --like are left out)"))


def _flag(column: str) -> str:
    return "--" + column.replace("_", "-")


def cmd_hardware_add(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ddtree_bayes.workflows.card_files.gpu import (
        gpu_row,
        planned_table,
        table_to_replace,
        target_file,
        write_gpu_row,
    )
    from ddtree_bayes.workflows.card_files.writing import existing_row

    path = target_file(args.hardware_file)
    values = {c: getattr(args, c) for c, *_ in FIGURES} | \
        {c: getattr(args, c) for c, _ in TEXTS}
    # (a file to create: the built-in table alone; --replace may mend the very row it replaces)
    table = table_to_replace(path, args.name, values, args.replace)
    gpu = gpu_row(table, args.name, values, args.source, like=args.like, file=path)
    after = planned_table(path, gpu, table.header, replace=args.replace)
    written = [] if args.dry_run else write_gpu_row(path, gpu, table.header, replace=args.replace)
    record = gpu_record(args.name, after.rows[args.name], after.origins[args.name])
    if args.format == "json":
        emit_json({"dry_run": bool(args.dry_run), "gpu": record, "like": gpu.like,
                   "given": list(gpu.given), "effect": gpu.effect, "file": str(path),
                   "notes": list(gpu.notes), "written": [w.__dict__ for w in written]})
        return 0
    print("\n".join(_gpu_lines(record, gpu, table.rows.get(gpu.like or "", {}))))
    for note in gpu.notes:
        print(f"note: {note}")
    if args.dry_run:
        line = existing_row(path, "hardware", args.name)
        would = ("gain this row" if line is None else "have replaced this row"
                 if gpu.effect == "replaces" else
                 f"have this row in place of the built-in one, its row {line}")
        print(f"dry run: nothing written ({shown_path(str(path))} would {would})")
        return 0
    for w in written:
        print(f"{'replaced' if w.replaced else 'wrote'} {shown_path(w.file)} row {w.row} "
              f"({w.name}){' (created)' if w.created else ''}")
    print(f"next: a fit made before this knows the table it stored: re-run `ddtree-bayes fit`, "
          f"then ask with --hardware {args.name}" if Path("models").is_dir() else
          f"next: fit, then ask with --hardware {args.name}")
    return 0


def _gpu_lines(r: dict, gpu, like_row: dict[str, str]) -> list[str]:
    def origin(*cols: str, names: tuple[str, ...] = ()) -> str:
        """Where a line's figures came from: "given", "as <like>", or, given in part, which
        were given and which were copied (a bf16 peak given beside the copied fp8 and int8
        ones read "given"). A figure blank in the row was not copied: one blank in the GPU
        copied too stays out of the line's credit (l40s's fp4 read "fp4 as l40s"), and one
        the capability left out makes the line name the peaks it did copy."""
        copied = f"as {gpu.like}" if gpu.like else "-"
        named = list(zip(cols, names or cols, strict=True))
        given = [name for c, name in named if c in gpu.given]
        # (a peak of the GPU's own row a source of the user's gave, kept while another is
        # given: the user's figure, not one copied "as <GPU>")
        own = [name for c, name in named if c in gpu.kept]
        mine = [f"{listed(own)} your own (kept)"] if own else []
        rest = [c for c, _ in named if c not in gpu.given and c not in gpu.kept]
        # (peaks copied and scaled as the one given: "bf16 given, fp8 and int8 scaled as bf16")
        scaled = [name for c, name in named if c in gpu.scaled]
        kept = [name for c, name in named if c in rest and c not in gpu.scaled
                and gpu.row.get(c, "").strip()]
        if scaled or own:   # (a peak was given: the others scaled, copied, kept or blank)
            return ", ".join([f"{', '.join(given)} given",
                              *([f"{listed(scaled)} scaled as {gpu.scaled_as}"] if scaled
                                else []),
                              *([f"{listed(kept)} {copied}"] if kept else []), *mine])
        whole = all(gpu.row.get(c, "").strip() == like_row.get(c, "").strip() for c in rest)
        if not given:
            return copied if whole or not gpu.like else (
                f"{listed(kept)} {copied}" if kept else "-")
        if not kept:
            return "given" if not rest else f"{', '.join(given)} given"
        if not gpu.like:   # (the rest are blank: the row's "-")
            return f"{', '.join(given)} given"
        return (f"{', '.join(given)} given, "
                + ("the rest " if len(kept) == len(rest) > 1 else f"{listed(kept)} ")
                + copied)

    peaks = ", ".join(f"{p.split('_')[1]} {_cell(r[p])}" for p in PEAKS)
    what = {"adds": "adds a GPU", "overrides": "overrides the built-in row",
            "replaces": "replaces your row"}[gpu.effect]
    like = f", like {gpu.like}" if gpu.like not in (None, r["hardware"]) else ""
    return [f"GPU {r['hardware']}{like} ({what}):",
            f"  memory        {_memory(r):<44} {origin('memory_gb', 'memory', names=('size', 'type'))}",
            f"  bandwidth     {_cell(r['mem_bw_tb_s']) + ' TB/s per GPU':<44} "
            f"{origin('mem_bw_tb_s')}",
            f"  interconnect  {r['interconnect'] + ' (' + r['link'] + ')':<44} "
            f"{origin('interconnect')}",
            f"  compute cap.  {r['compute_capability'] or '-':<44} {origin('compute_capability')}",
            f"  dense TFLOPS  {peaks:<44} "
            f"{origin(*PEAKS, names=tuple(p.split('_')[1] for p in PEAKS))}",
            f"  source        {r['source']}",
            f"  flops source  {r['flops_source'] or '-'}"]


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
    add = hsub.add_parser(
        "add", help="add your GPU to data/hardware.csv: like a known one, or from its datasheet",
        description="Write a GPU's row to data/hardware.csv (or --hardware-file): --like a GPU "
                    "the table knows, with the figures that differ (a memory overclock, a "
                    "power-limited or cut-down edition), or a new GPU from its datasheet "
                    "(--mem-bw-tb-s and --interconnect at least). The row names where each "
                    "figure came from: the given ones from --source, the others as the GPU it "
                    "copies. A dense peak given scales the peaks of the other precisions not "
                    "given (a GPU's tensor peaks scale together), of the --like GPU or of the "
                    "GPU's own row alike, credited DERIVED (a peak of your row a source of "
                    "yours gave is kept); give them too to set them. A fit "
                    "stores the table it used: re-run `fit` to ask about the GPU.",
        epilog="e.g. ddtree-bayes hardware add rtx-4090-oc --like rtx-4090 --mem-bw-tb-s 1.104 "
               "--source 'memory +1000 MHz: 23 Gbps x 384 bit / 8'")
    add.add_argument("name", metavar="NAME", help="the GPU's name as --hardware will take it "
                                                  "(lowercase, e.g. rtx-4090-oc)")
    add.add_argument("--like", metavar="GPU", help="start from this GPU's row (`hardware list`)")
    for col, text, top, unit in FIGURES:
        add.add_argument(_flag(col), dest=col, metavar="N", help=text,
                         type=real(0, top, f"give {unit}", open_lo=True))
    for col, text in TEXTS:
        add.add_argument(_flag(col), dest=col, metavar="TEXT", help=text)
    add.add_argument("--source", required=True,
                     help="where the given figures come from (datasheet, nvidia-smi, your "
                          "measurement): written into the row")
    add.add_argument("--hardware-file",
                     help="the table to write (default: data/hardware.csv here, created if absent)")
    add.add_argument("--replace", action="store_true",
                     help="overwrite your row of the same name: with --like, starting again "
                          "from that GPU's row (a note names the figures dropped); without, "
                          "keeping your row's figures not given, but for its DERIVED or "
                          "copied dense peaks: a peak given scales those not given, as "
                          "--like's are (a peak your --source gave is kept)")
    add.add_argument("--dry-run", action="store_true", help="print the row, write nothing")
    add_format(add, ("table", "json"))
    add.set_defaults(func=cmd_hardware_add)

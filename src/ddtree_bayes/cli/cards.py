"""``card add``: a model card (and drafter cards) from a config.json or a GGUF file;
``card list``: the model and drafter cards a run knows, and which are yours.

``card add`` prints what it derived and writes the rows to data/models.csv / data/drafters.csv
(``--dry-run`` prints only). The library side is ``workflows.cards``; ``--format json`` is
described by ``schemas/card-add.schema.json`` and ``schemas/card-list.schema.json``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddtree_bayes.cli.args import add_format, real
from ddtree_bayes.cli.output import aligned_table, emit_json, print_warnings, shown_path
from ddtree_bayes.core.errors import InputError


def _facts_lines(name: str, source: str, facts: dict, card: dict, drafters: list[dict]) -> list[str]:
    if facts.get("architecture") == "eagle3":
        (d,) = drafters
        return [f"drafter {d['drafter']} (EAGLE-3 head for {d['target_model']}) from {source}:",
                f"  layers            {d['layers']}, hidden {d['hidden_size']}, MLP "
                f"{d['intermediate_size']}",
                f"  parameters        {facts['params']:,} own ({d['params_b']} B); reads the "
                "target's embedding, has its own lm_head",
                f"  draft vocabulary  {facts['draft_vocab']:,} of {facts['vocab_size']:,}",
                f"  bytes per weight  {d['bytes_per_weight']}"]
    if facts.get("architecture") == "draft_model":
        (d,) = drafters
        return [f"drafter {d['drafter']} (a separate draft model for {d['target_model']}, "
                f"method draft-model) from {source}:",
                f"  architecture      {facts['model_architecture']}: {d['layers']} layers, "
                f"hidden {d['hidden_size']}, vocab {facts['vocab_size']:,}",
                f"  parameters        {facts['params']:,} ({d['params_b']} B); one pass reads "
                f"{facts['pass_params']:,} ({d['params_active_b']} B: the layers and its own "
                "lm_head" + (", tied to the embedding)" if facts["tied_embeddings"] else
                             "; not its input embedding, of which a token reads one row)"),
                f"  bytes per weight  {d['bytes_per_weight']} over what a pass reads"]
    moe = facts["experts"]
    lines = [f"card {name} from {source}:",
             f"  architecture      {facts['architecture']}: {'MoE' if moe else 'dense'}, "
             f"{facts['layers']} layers, hidden {facts['hidden_size']:,}, vocab "
             f"{facts['vocab_size']:,}",
             f"  attention         {facts['attention'] or '-'}",
             f"  parameters        {card['params_total_b']} B total, {card['params_active_b']} B "
             "active ("
             # (tied, the embedding is the lm_head too: a token reads it whole, not one row)
             + ("the input embedding counted once: tied to the lm_head, which reads all of it "
                "every token)" if facts["tied_embeddings"] else
                f"{(facts['params_active'] - facts['embedding_params']) / 1e9:.4f} B without "
                "the input embedding, of which a token reads one row)"),
             f"                    input embedding {facts['embedding_params']:,}; lm_head "
             + ("tied to it" if facts["tied_embeddings"] else f"{facts['lm_head_params']:,}")]
    if moe:
        lines.append(f"  experts           {moe} routed, top-{facts['experts_topk']}, "
                     f"{facts['shared_experts']} shared")
    own = facts["file_bytes_per_weight"]
    # a given bytes per weight (the card's file column blank) stands for every weight: the
    # weights-fit checks take it, not the file's own average
    given = "" if card["file_bytes_per_weight"] else (
        "for every weight, as --bytes-per-weight gave"
        + ("" if own == facts["bytes_per_weight"] else f" (the file's own: {own:.4g})"))
    lines += [f"  weights           {facts['storage']}",
              f"  bytes per weight  {card['bytes_per_weight']} "
              + (given or "over the weights a token reads"
                 + ("" if facts["tied_embeddings"] else ", not the input embedding")
                 + f" (the whole file: {own:.4g})"),
              f"  compute dtype     {card['compute_dtype']}"]
    if facts.get("max_context_tokens"):
        lines.append(f"  context           up to {facts['max_context_tokens']:,} tokens "
                     "(the model's longest: predict warns above it)")
    if facts.get("kv_bytes_per_token") is not None:
        lines.append(f"  KV cache          {facts['kv_bytes_per_token']:,} bytes per token = "
                     f"{facts['kv_formula']}")
    lines += [f"  MTP drafter       {d['drafter']}: {d['layers']} layer(s), {d['params_b']} B own "
              "(shares the embedding and lm_head)" for d in drafters]
    return lines


def cmd_card_add(args: argparse.Namespace) -> int:
    from ddtree_bayes.workflows import card_files

    if bool(args.hf_config) == bool(args.gguf):
        raise InputError("give one file: --hf-config PATH or --gguf PATH",
                         fix="e.g. ddtree-bayes card add --hf-config ./my-model/config.json")
    if args.target and args.compute_dtype:
        raise InputError("--compute-dtype is a model card's column; a drafter card (--target) "
                         "has none: its passes run at the target's precision",
                         fix="drop --compute-dtype, or drop --target for a model card")
    if args.hf_config:
        derived = card_files.derive_from_hf_config(
            args.hf_config, name=args.name, target=args.target, compute_dtype=args.compute_dtype,
            bytes_per_weight=args.bytes_per_weight)
    else:
        size = Path(args.gguf).stat().st_size if Path(args.gguf).is_file() else 0
        if size > 1e9 and args.format == "table":
            print(f"ddtree-bayes: note: reading {args.gguf}'s header and hashing its "
                  f"{size / 1e9:.1f} GB for the card's source (sha256)", file=sys.stderr)
        derived = card_files.derive_from_gguf(args.gguf, name=args.name, target=args.target,
                                         compute_dtype=args.compute_dtype,
                                         bytes_per_weight=args.bytes_per_weight)
    if args.not_default:
        if not derived.drafters:
            raise InputError("--not-default marks a drafter card (default no: only measurement "
                             "rows naming it in their drafter column use it); this file gives "
                             "no drafter row", fix="drop --not-default, or give a drafter's "
                             "config with --target")
        derived.drafters = [{**d, "default": "no"} for d in derived.drafters]
    models = Path(args.models_file) if args.models_file else Path("data") / "models.csv"
    drafters = Path(args.drafters_file) if args.drafters_file else Path("data") / "drafters.csv"
    card_files.check_drafter_target(derived, models)
    # what is written: with --drafters-only the drafter rows alone (the facts still print whole)
    rows = (card_files.drafters_only(derived, models, args.hf_config or args.gguf)
            if args.drafters_only else derived)
    planned = ([(models, "model", rows.card)] if rows.card else []) + \
        [(drafters, "drafter", d) for d in rows.drafters]
    conflicts: list[dict] = [{"file": str(f), "name": row[key], "row": r}
                             for f, key, row in planned
                             if (r := card_files.existing_row(f, key, row[key])) is not None]
    if args.dry_run:   # the write's every check: a dry run fails where the write would
        card_files.check_cards(rows, models, drafters, replace=args.replace)
    written = [] if args.dry_run else card_files.write_cards(rows, models, drafters,
                                                       replace=args.replace)
    source = (derived.card or derived.drafters[0])["source"]
    name = derived.card["model"] if derived.card else derived.drafters[0]["drafter"]
    if args.format == "json":
        emit_json({"dry_run": bool(args.dry_run), "model_card": rows.card or None,
               "drafters": derived.drafters, "derived": derived.facts,
               "written": [w.__dict__ for w in written],
               "conflicts": conflicts if args.dry_run else [],
               "warnings": derived.warnings})
        return 0
    print_warnings(derived.warnings)
    print("\n".join(_facts_lines(name, source, derived.facts, derived.card, derived.drafters)))
    if derived.card and not rows.card:
        print(f"model card {name}: kept as it is (--drafters-only)")
    if args.dry_run:   # (a conflict without --replace was refused, as the write is)
        where = "; ".join(f"{shown_path(c['file'])} row {c['row']} ({c['name']!r}) would be "
                          "replaced" for c in conflicts)
        print(f"dry run: nothing written{' - ' + where if where else ''}")
    for w in written:
        how = "replaced" if w.replaced else "wrote"
        made = " (created" + (" from the bundled cards)" if w.file.endswith("models.csv") else ")")
        print(f"{how} {shown_path(w.file)} row {w.row} ({w.name}){made if w.created else ''}")
    return 0


def card_origin(card, builtin: dict) -> str:
    """Where a card of the files a run reads comes from, as ``hardware list`` says it
    (core/hardware_table.py): the bundled card of that name unchanged (``built-in``), a name
    the bundled cards lack (``user``) or a bundled name with other values (``user-override``,
    e.g. a card added again with ``card add --replace``). A built-in drafter card whose
    methods an own default card took over for its target (core/drafters.py
    ``drafter_table``) is still the built-in card, serving fewer methods.

    >>> from types import SimpleNamespace as NS
    >>> known = {"m": NS(model="m", layers=4)}
    >>> [card_origin(NS(model=n, layers=k), known) for n, k in (("m", 4), ("m", 8), ("x", 4))]
    ['built-in', 'user-override', 'user']
    """
    import dataclasses

    from ddtree_bayes.core.hardware_table import ADDED, BUILT_IN, OVERRIDES

    name = getattr(card, "model", None) or card.drafter
    if name not in builtin:
        return ADDED
    known = builtin[name]
    if hasattr(known, "methods"):
        known = dataclasses.replace(known, methods=card.methods)
    return BUILT_IN if known == card else OVERRIDES


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _heads(card) -> str:
    if card.q_heads is None and card.kv_heads is None:
        return "-"
    return f"{card.q_heads or '?'}/{card.kv_heads or '?'}"


def cmd_card_list(args: argparse.Namespace) -> int:
    import dataclasses

    from ddtree_bayes.core import paths
    from ddtree_bayes.core.drafters import drafter_table, load_drafter_cards
    from ddtree_bayes.core.model_cards import load_model_cards

    models_file = (Path(args.models_file) if args.models_file
                   else paths.own_data_file("models.csv"))
    drafters_file = (Path(args.drafters_file) if args.drafters_file
                     else paths.own_data_file("drafters.csv"))
    for given, flag in ((args.models_file, "--models-file"), (args.drafters_file,
                                                              "--drafters-file")):
        if given and not Path(given).is_file():
            raise InputError(f"{flag} {given}: no such file",
                             fix="give the path of a card file (card add writes them)")
    builtin_models = load_model_cards(paths.bundled("models.csv"))
    models = load_model_cards(models_file) if models_file else builtin_models
    builtin_drafters = {c.drafter: c for c in load_drafter_cards(paths.bundled("drafters.csv"))}
    drafters = drafter_table(drafters_file)
    model_rows = [{**dataclasses.asdict(c), "origin": card_origin(c, builtin_models)}
                  for c in models.values()]
    drafter_rows = [{**dataclasses.asdict(c), "methods": list(c.methods),
                     "pass_params_b": c.pass_params_b,
                     "origin": card_origin(c, builtin_drafters)} for c in drafters]
    if args.format == "json":
        emit_json({"builtin_models_file": str(paths.bundled("models.csv")),
                   "models_file": None if models_file is None else str(models_file),
                   "builtin_drafters_file": str(paths.bundled("drafters.csv")),
                   "drafters_file": None if drafters_file is None else str(drafters_file),
                   "models": model_rows, "drafters": drafter_rows})
        return 0
    from ddtree_bayes.core.hardware_table import ADDED, OVERRIDES

    mark = {ADDED: "yours", OVERRIDES: "yours (overrides built-in)"}
    print(aligned_table(
        ["model", "total B", "active B", "layers", "experts", "B/weight", "compute",
         "KV B/token", "heads q/kv", "max context", "row"],
        [[r["model"], _num(r["params_total_b"]), _num(r["params_active_b"]), str(r["layers"]),
          "-" if r["experts"] is None else f"{r['experts']}/top-{r['experts_topk']}",
          _num(r["bytes_per_weight"]), r["compute_dtype"], _num(r["kv_bytes_per_token"]),
          _heads(c), _num(r["max_context_tokens"]), mark.get(r["origin"], r["origin"])]
         for r, c in zip(model_rows, models.values(), strict=True)], left=1, text_last=True))
    print()
    print(aligned_table(
        ["drafter", "target", "methods", "kind", "layers", "pass B", "B/weight", "row"],
        [[r["drafter"], r["target_model"],
          ",".join(r["methods"]) + ("" if r["default"] else " (named)"), r["kind"],
          str(r["layers"]),
          f"{r['pass_params_b']:g}", _num(r["bytes_per_weight"]), mark.get(r["origin"], r["origin"])]
         for r in drafter_rows], left=4, text_last=True))
    def counted(rows: list[dict], path: Path | None, what: str) -> str | None:
        if path is None:
            return None
        return (f"{shown_path(str(path))} adds {sum(r['origin'] == ADDED for r in rows)} and "
                f"replaces {sum(r['origin'] == OVERRIDES for r in rows)} {what}")

    where = "; ".join(c for c in (counted(model_rows, models_file, "model cards"),
                                  counted(drafter_rows, drafters_file, "drafter cards")) if c
                      ) or "no card files here: the built-in cards alone"
    print(f"\n{len(model_rows)} model cards, {len(drafter_rows)} drafter cards ({where}).\n"
          "pass B = parameters one drafter pass reads (its own, plus the target's LM head when "
          "it shares it); (named) = not its target's default drafter: only rows naming it in "
          "their drafter column, and predict --drafter, use it; --format json shows every "
          "column and source. A model without a "
          "card: `ddtree-bayes card add --hf-config its config.json`.")
    return 0


def register(sub) -> None:
    """Add ``card`` (with its ``add`` and ``list`` subcommands) to the main parser's
    subcommands."""
    c = sub.add_parser("card", help="model and drafter cards from config.json or GGUF files",
                       description="Model cards (data/models.csv: parameters, layers, experts, "
                                   "bytes per weight, compute dtype, KV bytes per token) and "
                                   "drafter cards (data/drafters.csv), derived from the files "
                                   "a model ships with.")
    csub = c.add_subparsers(dest="card_command", required=True, metavar="SUBCOMMAND")
    a = csub.add_parser(
        "add", help="derive a card from a config.json or GGUF file and write it",
        description="Read a Hugging Face config.json (--hf-config: the file or its folder) or a "
                    "GGUF file's header (--gguf; the gguf package, no weights loaded), count the "
                    "parameters from the tensor shapes (total; active: routed experts at top-k / "
                    "experts), work out bytes per weight from the quantisation (quantization_"
                    "config, or each GGUF tensor's type), print it all and write the row, sourced "
                    "by the file's name and sha256. An EAGLE-3 draft config gives a drafter row; "
                    "MTP layers a config declares give one too; a small model's config.json or "
                    "GGUF with --target gives the drafter row of a separate draft model.")
    a.add_argument("--hf-config", metavar="PATH", help="a config.json, or a folder with one")
    a.add_argument("--gguf", metavar="PATH", help="a .gguf model file (of a split model, its "
                   "first shard: the others are read from beside it)")
    a.add_argument("--name", help="the card's name (default: from the file)")
    a.add_argument("--target", help="the model card the file drafts for: an EAGLE-3 draft "
                                    "config, or a separate draft model (a small model's "
                                    "config.json or GGUF, method draft-model)")
    a.add_argument("--compute-dtype", choices=("bf16", "fp8", "fp4", "int8"),
                   help="the precision the matmuls run in (default: from the quantisation: "
                        "fp8 / fp4 / int8 when activations are quantised too, int8 for a "
                        "quantised GGUF (ggml's MMQ kernels), else bf16)")
    a.add_argument("--bytes-per-weight",
                   # (the bounds the written row is held to, core/model_cards.py
                   # check_bytes_per_weight: 0.140625, core/data MIN_BYTES_PER_WEIGHT, Q1_0's
                   # 1.125 bits; 4, MAX_BYTES_PER_WEIGHT, fp32; not imported here, which keeps
                   # numpy out of the CLI's start. Below 0.140625 the row's check named a row
                   # of data/models.csv the user never wrote)
                   type=real(0.140625, 4.0,
                             "give bytes per weight, not bits: bits / 8, e.g. 0.58 for a "
                             "4.65-bit quantisation; at least 0.140625, Q1_0's 1.125 bits"),
                   help="override the derived bytes per weight (a scheme card add cannot read): "
                        "bytes, not bits (a 4.65 bpw quantisation is 0.58), from Q1_0's "
                        "0.140625 (1.125 bits) to fp32's 4")
    a.add_argument("--models-file", help="model cards to write (default: data/models.csv, "
                                         "created from the bundled cards when absent)")
    a.add_argument("--drafters-file", help="drafter cards to write (default: data/drafters.csv)")
    a.add_argument("--replace", action="store_true", help="overwrite a card of the same name")
    a.add_argument("--drafters-only", action="store_true",
                   help="write only the drafter rows the file declares (a target's MTP layers) "
                        "for its model card already here, which stays as it is")
    a.add_argument("--not-default", action="store_true",
                   help="write the drafter card with default no: a second drafter of a target "
                        "and method that measurement rows name in their drafter column (the "
                        "target's default card, which rows with a blank drafter ran, stays)")
    a.add_argument("--dry-run", action="store_true", help="print what would be written, write nothing")
    add_format(a, ("table", "json"))
    a.set_defaults(func=cmd_card_add)
    ls = csub.add_parser(
        "list", help="list the model and drafter cards, their key figures and whose each is",
        description="One row per model card (parameters, layers, experts, bytes per weight, "
                    "compute dtype, KV bytes per token, attention heads, longest context) and "
                    "per drafter card (target, methods, kind, what a pass reads), and whether "
                    "each is built in or yours: data/models.csv here replaces the built-in "
                    "model cards (card add creates it from them), data/drafters.csv adds to "
                    "and replaces built-in drafter cards.")
    ls.add_argument("--models-file", help="model cards to list (default: data/models.csv here, "
                                          "else the built-in ones)")
    ls.add_argument("--drafters-file", help="your drafter cards (default: data/drafters.csv "
                                            "here, if any)")
    add_format(ls, ("table", "json"))
    ls.set_defaults(func=cmd_card_list)

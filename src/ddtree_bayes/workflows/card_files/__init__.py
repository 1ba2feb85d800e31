"""Model and drafter cards from the files a user already has: a Hugging Face config.json or a
GGUF file (``ddtree-bayes card add``).

``shapes``     a model as weight tensors (shared by both readers)
``hf_config``  config.json -> tensors (Llama, Qwen2/3 dense and MoE, Qwen3-Next / Qwen3.5 GDN
               hybrids, DeepSeek-V2/V3/V3.2 / Kimi K2 MLA, Mixtral, MiniMax-M2, Llama 4,
               Gemma 3, gpt-oss)
``gguf_file``  a GGUF header -> tensors with their stored types and bytes (the gguf package)
``quant``      bytes per weight from quantization_config (AWQ, GPTQ, FP8, compressed-tensors,
               modelopt, bitsandbytes, MXFP4)
``rows``       -> the model-card row, drafter rows (EAGLE-3 heads, MTP layers)
``store``      writing data/models.csv and data/drafters.csv: lock, refuse or replace, atomic
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

from ddtree_bayes.core import per_call
from ddtree_bayes.core.bench_import.identity import size_in_name, sizes_differ
from ddtree_bayes.core.errors import InputError, closest
from ddtree_bayes.core.model_cards import CARD_HEADER, OPTIONAL_CARD_COLUMNS
from ddtree_bayes.workflows.card_files.hf_config import (
    read_config,
    shape_from_config,
    storage_fields,
)
from ddtree_bayes.workflows.card_files.quant import (
    Scheme,
    kv_cache_from_config,
    more_than_unquantised,
    scheme_from_config,
    unquantised_bytes,
)
from ddtree_bayes.workflows.card_files.rows import (
    DRAFTER_HEADER,
    Derived,
    card_name,
    draft_model_drafter,
    eagle3_drafter,
    file_label,
    is_eagle3,
    model_card,
    sha256_of,
)
from ddtree_bayes.workflows.card_files.writing import (
    Written,
    existing_row,
    plan_text,
    write_plans,
)

__all__ = ["CARD_HEADER", "DRAFTER_HEADER", "Derived", "Written", "check_cards", "derive_from_gguf",
           "derive_from_hf_config", "existing_row", "write_cards"]


def _source(path: Path, read: bool = False) -> str:
    """The file and its SHA-256, as a card's source names them. ``read``: a text file the
    command has read whole (config.json: its bytes once per command, core/per_call.py); else
    hashed in chunks (a GGUF file of gigabytes)."""
    digest = (hashlib.sha256(per_call.read_bytes(path)).hexdigest() if read
              else sha256_of(path))
    return f"{file_label(path)} (sha256 {digest})"


def check_name_size(derived: Derived, file: Path, given: bool) -> Derived:
    """``derived``, refused when its name says a parameter count (``70b``: core/bench_import
    ``size_in_name``) that is clearly neither the file's total nor its active count
    (``sizes_differ``: more than 1.5x apart; Llama 4 is named by its active 17 B): the file
    is another model's, and a card of that name would price every question about the named
    model with this one's weights. ``given``: the name came from --name (else from the
    file). An EAGLE-3 head is named after its target (llama3-8b-eagle3) and is not checked."""
    facts = derived.facts
    if facts.get("architecture") == "eagle3":
        return derived
    if derived.card:
        name, total, active = (derived.card["model"], facts["params_total"],
                               facts["params_active"])
    else:   # a separate draft model: its whole count, and what one pass reads
        name, total, active = (derived.drafters[0]["drafter"], facts["params"],
                               facts["pass_params"])
    said = size_in_name(name)
    if said is None or not all(sizes_differ(said, n / 1e9) for n in (total, active)):
        return derived
    who = f"--name {name}" if given else f"the name {name} (from the file)"
    raise InputError(f"{who} says {said:g} B parameters, but the file describes a model of "
                     f"{total / 1e9:.3g} B ({active / 1e9:.3g} B active): another model's "
                     "file?", file=str(file),
                     fix=f"pass {name}'s own file, or give --name a name without a size the "
                         "model does not have")


def _name(given: str | None, default: str) -> str:
    """The card's name: ``--name`` as given (refused unless it is one already), else the
    file's name made one."""
    return card_name(given, given=True) if given else card_name(default)


def derive_from_hf_config(path: str | Path, *, name: str | None = None, target: str | None = None,
                          compute_dtype: str | None = None,
                          bytes_per_weight: float | None = None) -> Derived:
    """The card rows a config.json gives: a model card (plus its MTP drafter row when the
    config declares MTP layers), or a drafter row for the model card ``target`` names: of an
    EAGLE-3 draft config, or of a separate draft model (a model's own config with
    ``target``)."""
    cfg, file = read_config(path)
    source = _source(file, read=True)
    default = cfg.get("_name_or_path") or file.resolve().parent.name
    if is_eagle3(cfg):
        if not target:
            raise InputError("an EAGLE-3 draft config: which model does it draft for?",
                             file=str(file), fix="say which with --target NAME (its card)")
        return eagle3_drafter(_name(name, default or ""), card_name(target, "--target"),
                              cfg, source, bytes_per_weight)
    if not (name or default):
        raise InputError("cannot tell the model's name from the file", file=str(file),
                         fix="give --name NAME")
    sidecar = modelopt_sidecar(cfg, file)
    if sidecar is not None:
        cfg = {**cfg, "quantization_config": sidecar}
    shape = shape_from_config(cfg, str(file))
    cfg = storage_fields(cfg)   # (a multimodal config may quantise in its text_config)
    if isinstance(cfg.get("quantization_config"), dict) and (
            plain := unquantised_bytes(cfg)) is not None:
        more_than_unquantised(bytes_per_weight, plain[0],
                              f"the checkpoint's unquantised {plain[1]} weights", str(file))
    scheme = scheme_from_config(cfg, str(file), bytes_per_weight)
    if bytes_per_weight is None and scheme.targets is not None:
        # each target must match a weight: one that matched none left its modules (say,
        # attention by a regex of the full multimodal path) in bf16, silently
        idle = scheme.idle_targets(shape.tensors)
        if idle:
            raise InputError(f"quantization_config targets {', '.join(idle)}, which "
                             f"match{'es' if len(idle) == 1 else ''} none of the model's "
                             "linear weights as card add names them "
                             "(model.layers.N.self_attn.q_proj, ...)", file=str(file),
                             fix="pass --bytes-per-weight with the checkpoint's size / "
                                 "parameters")
    if sidecar is not None:
        scheme.notes.append("quantisation read from hf_quant_config.json beside config.json "
                            "(a TensorRT Model Optimizer export, as vLLM reads it)")
    if target:   # a model's own config with --target: a separate draft model for the target
        return check_name_size(_draft_model(_name(name, default), target, shape, scheme,
                                            source, file, bytes_per_weight), file, bool(name))
    return check_name_size(model_card(_name(name, default), shape, scheme, source,
                                      compute_dtype=compute_dtype,
                                      bytes_per_weight=bytes_per_weight,
                                      kv=kv_cache_from_config(cfg)), file, bool(name))


def _draft_model(name: str, target: str, shape, scheme: Scheme, source: str, file: Path,
                 bytes_per_weight: float | None) -> Derived:
    """The drafter row of a separate draft model (``card add FILE --target T``)."""
    target = card_name(target, "--target")
    if name == target:
        raise InputError(f"--target {target} is this file's own model: a draft model drafts for "
                         "another, larger one", file=str(file),
                         fix="drop --target for the model's own card, or --target the model "
                             "it drafts for")
    return draft_model_drafter(name, target, shape, scheme, source, bytes_per_weight)


def modelopt_sidecar(cfg: dict, file: Path) -> dict | None:
    """The quantisation of a TensorRT Model Optimizer export whose config.json has none: its
    ``hf_quant_config.json`` beside it (vLLM reads it for such a folder), as a modelopt
    ``quantization_config``; None when the config has its own or there is no such file."""
    from ddtree_bayes.workflows.card_files.hf_config import text_config

    path = file.parent / "hf_quant_config.json"
    if isinstance(text_config(cfg).get("quantization_config"), dict) or not path.is_file():
        return None
    try:
        q = json.loads(path.read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"not a JSON file: {err}", file=str(path),
                         fix="pass the export's hf_quant_config.json as written") from None
    if not isinstance(q, dict):
        raise InputError("not a JSON object", file=str(path),
                         fix="pass the export's hf_quant_config.json as written")
    return {"quant_method": "modelopt", **q}


#: GGUF tensor types ggml multiplies in floating point (everything else goes through MMQ).
FLOAT_GGUF_TYPES = ("F32", "F16", "BF16")


def derive_from_gguf(path: str | Path, *, name: str | None = None, target: str | None = None,
                     compute_dtype: str | None = None,
                     bytes_per_weight: float | None = None) -> Derived:
    """The card rows of a GGUF file: its tensors' own types give the true bytes per weight.
    With ``target``: the drafter row of a separate draft model for that model card (llama.cpp
    ``--model-draft``)."""
    from ddtree_bayes.workflows.card_files.gguf_file import shape_from_gguf

    file = Path(path)
    shape, meta = shape_from_gguf(file)
    types = sorted({t.storage for t in shape.tensors if t.linear and not t.mtp})
    # ggml multiplies quantised types with its MMQ kernels: 8-bit activations, int8 tensor
    # cores (ggml/src/ggml-cuda/mmq.cuh); float-only files run 16-bit GEMMs
    quantised = any(s.upper() not in FLOAT_GGUF_TYPES for s in types)
    if quantised:
        more_than_unquantised(bytes_per_weight, 2.0, "16-bit weights, for a quantised GGUF "
                              f"file ({', '.join(types)})", str(file))
    scheme = Scheme(f"GGUF per-tensor types ({', '.join(types)}; bytes read from the tensor "
                    "table)", compute_dtype="int8" if quantised else "bf16")
    source = _source(file)
    if meta["shards"] > 1:   # (the first shard holds the metadata; every shard was read)
        source += f", the first of {meta['shards']} shards"
    stem = re.sub(r"-\d{5}-of-\d{5}$", "", file.stem)
    if target:
        derived = _draft_model(_name(name, stem), target, shape, scheme, source, file,
                               bytes_per_weight)
        derived.facts["tensor_types"] = types
        return check_name_size(derived, file, bool(name))
    derived = model_card(_name(name, stem), shape, scheme, source,
                         compute_dtype=compute_dtype, bytes_per_weight=bytes_per_weight)
    derived.facts["gguf_name"] = meta.get("name")
    derived.facts["tensor_types"] = types
    return check_name_size(derived, file, bool(name))


def _cards_here(models_file: Path) -> dict:
    """The model cards a drafter row may name: ``models_file``, else the bundled cards (the
    file card add would start from)."""
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled

    return load_model_cards(models_file if models_file.is_file() else bundled("models.csv"))


def check_drafter_target(derived: Derived, models_file: Path) -> None:
    """Refuse a drafter (``card add FILE --target T``: an EAGLE-3 head or a separate draft
    model) that cannot draft for T: T has no model card here (``models_file``, else the
    bundled cards), or, for an EAGLE-3 head, T's card gives a hidden size other than the one
    the head's ``fc`` reads (``target_hidden_size``). A head of Llama-3.1-8B (4096) filed under
    Kimi K2.6 (7168) was written and priced, exit 0."""
    from ddtree_bayes.core.paths import bundled

    want = derived.facts.get("target_hidden_size")
    if derived.facts.get("architecture") not in ("eagle3", "draft_model") or not derived.drafters:
        return
    target = derived.drafters[0]["target_model"]
    path = models_file if models_file.is_file() else bundled("models.csv")
    cards = _cards_here(models_file)
    if target not in cards:   # (the closest first: the list is cut off, alphabetically)
        meant = closest(target, cards, n=1)
        raise InputError(f"--target {target}: no model card of that name in {path}",
                         fix=(f"did you mean {meant[0]}? Else a" if meant else "a")
                         + "dd the target's card first (card add --hf-config its "
                           f"config.json), or name one of: {', '.join(sorted(cards)[:6])}, ...")
    have = cards[target].hidden_size
    if want and have and int(want) != int(have):
        raise InputError(f"the EAGLE-3 head reads hidden states of width {want} "
                         f"(target_hidden_size), but {target}'s card has hidden_size {have}: "
                         f"it is not a drafter of {target}",
                         fix="--target the model the head was trained for")


def drafters_only(derived: Derived, models_file: Path, file: str) -> Derived:
    """``derived`` without its model card (``card add --drafters-only``): the drafter rows a
    target's own file declares (its MTP layers) for the target's card already here
    (``models_file``, else the bundled cards), which it must describe (the same hidden size).
    Without this, the only way to a built-in model's MTP drafter card was ``--replace``,
    which overwrote the model card with the derived one."""
    if not derived.drafters:
        raise InputError("--drafters-only: the file declares no drafter (no MTP layers)",
                         file=file, fix="drop --drafters-only to write its model card")
    if not derived.card:
        return derived
    name = derived.card["model"]
    here = models_file.is_file()
    cards = _cards_here(models_file)
    if name not in cards:
        raise InputError(f"--drafters-only: no model card {name!r} "
                         f"{f'in {models_file}' if here else 'among the bundled cards'} for "
                         "its drafter to serve", file=file,
                         fix="--name the card the file belongs to, or drop --drafters-only "
                             "to write the model card too")
    card = cards[name]
    for what, have, want in (("hidden size", card.hidden_size, derived.card.get("hidden_size")),
                             ("layers", card.layers, derived.card.get("layers")),
                             ("routed experts", card.experts or 0,
                              derived.card.get("experts") or 0)):
        if have is not None and want not in (None, "") and int(want) != int(have):
            raise InputError(f"--drafters-only: the file gives {what} {want}, {name}'s card "
                             f"{have}: it is not that model's file", file=file,
                             fix="--name the card the file belongs to")
    return dataclasses.replace(derived, card={})


def write_cards(derived: Derived, models_file: Path, drafters_file: Path, *,
                replace: bool) -> list[Written]:
    """Write the derived rows (a model card to ``models_file``, created from the bundled cards
    when absent; drafter rows to ``drafters_file``). Both files are checked before either is
    written (:func:`check_cards`): a refused name or an invalid file writes nothing."""
    plans = check_cards(derived, models_file, drafters_file, replace=replace)
    optional = {"model": OPTIONAL_CARD_COLUMNS, "drafter": ("default", "block_size")}
    return write_plans([(path, seed, key, rows, check, optional.get(key, ()))
                        for path, seed, key, rows, check in plans], replace=replace,
                       what="card add")


def check_cards(derived: Derived, models_file: Path, drafters_file: Path, *, replace: bool
                ) -> list[tuple[Path, str, str, list[dict[str, str]], Callable | None]]:
    """Every check :func:`write_cards` makes before it writes (a name the file holds without
    ``replace``, a column the file lacks, the new file's validation: a second drafter card of
    a target and method, ...), raising as it would; nothing is written. ``card add
    --dry-run`` runs it, so that a dry run fails where the write would. Returns the plans
    (file, seed text, key column, rows, the file's check) :func:`write_cards` writes."""
    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled

    plans: list[tuple[Path, str, str, list[dict[str, str]], Callable | None]] = []
    if derived.card:
        plans.append((models_file, bundled("models.csv").read_text(), "model", [derived.card],
                      lambda p, text: load_model_cards(p, text=text)))
    if derived.drafters:
        plans.append((drafters_file, ",".join(DRAFTER_HEADER) + "\n", "drafter",
                      derived.drafters, lambda p, text: drafter_table(p, text=text)))
    optional = {"model": OPTIONAL_CARD_COLUMNS, "drafter": ("default", "block_size")}
    for path, seed, key, rows, check in plans:      # every refusal before any write
        if path.exists() and not path.is_file():
            raise InputError("not a file", file=str(path), fix="pass a CSV file to write")
        text, _ = plan_text(path, seed, key, rows, replace=replace,
                            optional=optional.get(key, ()))
        if check is not None:
            check(str(path), text)
    return plans

"""Drafter cards (``data/drafters.csv``) and the roofline of one drafter forward pass.

A drafter card says what one drafter pass streams: its own (active) parameters, the LM head it
projects through (its own reduced-vocabulary head, or the target's, read on every pass), its
layers and the bytes per weight it is stored in. A drafter with its own head
(``shares_lm_head`` no: EAGLE-3 heads, separate draft models) counts that head among its own
parameters, as its checkpoint does; one that projects through the target's head (yes, the
default) reads ``lm_head_params_b`` on top of them. With a GPU's bandwidth that gives a roofline
prior for the per-pass cost of the structured step on any GPU:

    pass_roofline_ms = (drafter + LM head) bytes / (bandwidth x GPUs) / bw_eff
                       + (layers + 1) x (per-layer launch + all-reduce over the GPUs' link)

(the same form as the pair roofline of a target's M = 1 step, ``core/pairs.py``, with its
priors' medians as constants: the fit learns how far each engine sits from it). A target
without a drafter card gets a generic drafter of its method's kind: one target decoder layer
for a head or an MTP module, five for a block drafter (DFlash drafters have five), four for a
separate draft model, plus an LM-head-sized read (one more layer); the prior then carries the
rest, and the fit says the roofline is generic. numpy-free: the standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ddtree_bayes.core.data import (
    AR_DRAFTER,
    AR_METHOD,
    check_name,
    parse_number,
    read_records,
)
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.model_cards import check_active_scale, check_bytes_per_weight

#: Columns a drafter-card file must have.
DRAFTER_COLUMNS = ("drafter", "target_model", "method", "kind", "layers", "params_active_b",
                   "lm_head_params_b", "bytes_per_weight", "source")
#: Drafters stored inside the target's checkpoint (quantised with it, so a deployment card's
#: bytes per weight applies to their default card); the others are separate checkpoints. A
#: card of such a drafter that rows name (``default`` no) describes one deployment's
#: checkpoint, which may store the module at another precision than its weights (an INT4
#: export that ships its MTP head in bf16): its own ``bytes_per_weight`` prices the pass.
IN_TARGET_KINDS = frozenset({"mtp_module"})
#: The drafter kinds a card may name (data/public/README.md, "Drafter cards"): what the pass
#: reads (``IN_TARGET_KINDS``) and whether a blank ``shares_lm_head`` is yes or no
#: (``OWN_HEAD_KINDS``) follow from it, so a misspelt kind is refused, not read as another.
KINDS = ("eagle_head", "eagle3_head", "mtp_module", "dflash_block", "draft_model",
         "medusa_heads")
#: The drafter kinds that draft a block in one pass, whose card may give the ``block_size``
#: the drafter was trained at (its config.json's): a question or row at a larger block asks
#: for positions the drafter never learned to fill, and it emits no more per step than its
#: trained block (:func:`block_problem`).
BLOCK_KINDS = frozenset({"dflash_block"})
#: Layers of a generic drafter, per method, when a target has no drafter card.
GENERIC_LAYERS = {"dflash": 5, "ddtree": 5, "draft-model": 4, "pard": 4}
GENERIC_LAYERS_DEFAULT = 1


@dataclass(frozen=True)
class DrafterCard:
    """One drafter: the target it drafts for, the methods it serves, what a pass reads."""

    drafter: str
    target_model: str
    methods: tuple[str, ...]
    kind: str
    layers: int
    params_active_b: float
    lm_head_params_b: float
    bytes_per_weight: float
    source: str
    #: False: the drafter's own head, already among ``params_active_b`` (its checkpoint's
    #: count); True: the target's head, read on top of them on every pass
    shares_lm_head: bool = True
    #: True: the card of its target and methods that a measurement row with a blank
    #: ``drafter`` uses (:func:`drafter_for`; at most one per target and method); False
    #: (``default`` no): only the rows that name it in their ``drafter`` column, and
    #: ``predict --drafter``
    default: bool = True
    #: the block the drafter was trained at (a :data:`BLOCK_KINDS` card's ``block_size``
    #: column, from its config.json); None: not known (blank, or a card made before the
    #: column: a fit of an older version stores none)
    block_size: int | None = None

    @property
    def pass_params_b(self) -> float:
        """Parameters one pass reads (billions): its own, plus the target's LM head when it
        projects through it (its own head is among its own parameters).

        >>> DrafterCard("e3", "m", ("eagle3",), "eagle3_head", 1, 0.42, 0.13, 2, "s",
        ...             shares_lm_head=False).pass_params_b
        0.42
        >>> DrafterCard("mtp", "m", ("mtp",), "mtp_module", 1, 0.42, 1.27, 2, "s").pass_params_b
        1.69
        """
        return self.params_active_b + (self.lm_head_params_b if self.shares_lm_head else 0.0)


def load_drafter_cards(path: str | Path, text: str | None = None) -> tuple[DrafterCard, ...]:
    """Read and validate a drafter-card CSV (errors name the file, row and column); one
    default card per target model and method (the one a row with a blank ``drafter`` uses),
    and any number of cards with ``default`` no, which rows name in their ``drafter`` column.

    >>> from ddtree_bayes.core.paths import bundled
    >>> cards = load_drafter_cards(bundled("drafters.csv"))
    >>> [c.layers for c in cards if c.target_model == "qwen3-8b"]
    [5]
    """
    path = str(path)
    _, header, body = read_records(path, text)
    for col in DRAFTER_COLUMNS:
        if col not in header:
            raise DataError("missing column", file=path, row=1, column=col,
                            fix="add it to the header (see data/drafters.csv)")
    index = {h: j for j, h in enumerate(header)}
    out: list[DrafterCard] = []
    serves: dict[tuple[str, str], tuple[int, str]] = {}   # (target, method) -> (row, drafter)
    names: dict[str, int] = {}   # drafter -> its row
    for row, values in body:
        if not any(v.strip() for v in values):
            continue
        cell = {h: (values[j].strip() if j < len(values) else "") for h, j in index.items()}
        for col in ("drafter", "target_model", "method", "kind", "source"):
            if not cell[col]:
                raise DataError("empty", file=path, row=row, column=col,
                                fix=f"give the drafter's {col}")
        # (measurement rows are matched by these names: another case is no card of theirs)
        for col, name in [("target_model", cell["target_model"]),
                          *(("method", m) for m in cell["method"].split(";") if m)]:
            check_name(name, file=path, row=row, column=col)
        if cell["kind"] not in KINDS:
            raise DataError(f"unknown drafter kind {cell['kind']!r}", file=path, row=row,
                            column="kind", fix="use one of " + ", ".join(KINDS))
        layers, active, head, bpw = (_number(path, row, cell, col, integer=(col == "layers"))
                                     for col in ("layers", "params_active_b",
                                                 "lm_head_params_b", "bytes_per_weight"))
        check_bytes_per_weight(bpw, path, row)
        # (as a model card's: 3500 for a 3.5 B drafter priced every pass at 1000x its read)
        hidden = (parse_number(path, row, "hidden_size", cell["hidden_size"], integer=True)
                  if cell.get("hidden_size") else None)
        check_active_scale(active, layers, hidden, path, row)
        if cell["drafter"] in names:
            raise DataError(f"a second drafter card named {cell['drafter']!r} (row "
                            f"{names[cell['drafter']]} has it)", file=path, row=row,
                            column="drafter", fix="give each drafter card its own name: a "
                                                  "measurement row's drafter column names one")
        names[cell["drafter"]] = row
        card = DrafterCard(cell["drafter"], cell["target_model"],
                           tuple(m for m in cell["method"].split(";") if m), cell["kind"],
                           int(layers), active, head, bpw, cell["source"],
                           _yes_no(path, row, cell.get("shares_lm_head", ""), cell["kind"]),
                           _default(path, row, cell.get("default", "")),
                           _block_size(path, row, cell.get("block_size", ""), cell["kind"]))
        for method in card.methods if card.default else ():
            other = serves.setdefault((card.target_model, method), (row, card.drafter))
            if other[0] != row:
                raise DataError(
                    f"a second default drafter card for {card.target_model!r} {method} "
                    f"({card.drafter!r}; row {other[0]} has {other[1]!r})", file=path, row=row,
                    column="default",
                    fix="set default to no (`card add --not-default`) on every card but the "
                        "one a row with a blank drafter column ran (rows name the others in "
                        "their drafter column)")
        out.append(card)
    return tuple(out)


def stored_cards(rows) -> tuple[DrafterCard, ...]:
    """Drafter cards from the dicts a fit stores (``meta["model"]["drafter_cards"]``).

    >>> stored_cards([{**DrafterCard("d", "m", ("mtp",), "k", 1, 1.0, 1.0, 2.0, "s").__dict__,
    ...                "methods": ["mtp"]}])[0].methods
    ('mtp',)
    """
    return tuple(DrafterCard(**{**d, "methods": tuple(d["methods"])}) for d in rows)


def stored_card_dict(d: dict) -> dict:
    """A stored card's dict as a fit of this version stores it (one made before the
    ``default`` column stored none: every card then was its target's default), to compare
    the cards of two fits or of a fit and the files here.

    >>> stored_card_dict({"drafter": "d"})
    {'drafter': 'd', 'default': True}
    >>> stored_card_dict({"drafter": "d", "default": False, "block_size": 16})
    {'drafter': 'd', 'default': False}

    ``block_size`` is left out: it prices no pass (it bounds the blocks asked and the
    acceptance, read from the cards here), and a fit made before the column stored none.
    """
    return {**{k: v for k, v in d.items() if k != "block_size"},
            "default": d.get("default", True)}


def card_dict(card: DrafterCard) -> dict:
    """A drafter card as a fit stores it (``meta["model"]["drafter_cards"]``: its fields,
    its methods a list), to compare with the stored ones (:func:`card_key`)."""
    return {**dataclasses.asdict(card), "methods": list(card.methods)}


def card_key(d: dict) -> str:
    """A drafter card's dict (stored, or :func:`card_dict` of a card here) as two fits' cards,
    or a fit's and the files', are compared: :func:`stored_card_dict` (a fit made before the
    default column stored none; ``block_size`` left out), its methods in order. The one key
    of ``predict``'s "cards differ" line, a refusal's "the fit stored its card", ``diff``'s
    drafter cards and the model average's "same cards".

    >>> card_key({"drafter": "d", "methods": ["b", "a"], "block_size": 16})
    '{"default": true, "drafter": "d", "methods": ["a", "b"]}'
    """
    return json.dumps({**stored_card_dict(d), "methods": sorted(d["methods"])}, sort_keys=True)


def drafter_table(path: str | Path | None = None, text: str | None = None
                  ) -> tuple[DrafterCard, ...]:
    """The built-in drafter cards overlaid by a working directory's own file (``path``, e.g.
    ``data/drafters.csv``, the file ``card add`` writes; None: the built-in cards alone). An own
    card replaces the built-in card of the same name, and an own default card takes over the
    methods it serves for its target from the built-in default card that served them (which
    keeps its other methods); a built-in card with ``default`` no keeps its methods.

    >>> head = "drafter,target_model,method,kind,layers,params_active_b,lm_head_params_b,"
    >>> own = head + "bytes_per_weight,source\\nmy-ddtree,qwen3-8b,ddtree,dflash_block,3,0.5,0.6,2,me"
    >>> cards = drafter_table("drafters.csv", own)
    >>> [(c.drafter, c.methods) for c in cards if c.target_model == "qwen3-8b"]
    [('z-lab/Qwen3-8B-DFlash-b16', ('dflash',)), ('my-ddtree', ('ddtree',))]
    """
    import dataclasses

    from ddtree_bayes.core import per_call
    from ddtree_bayes.core.paths import bundled

    def cards(file: str | Path) -> tuple[DrafterCard, ...]:   # (once per call: core/per_call.py)
        return per_call.parsed("drafter cards", file, lambda: load_drafter_cards(file))

    builtin = cards(bundled("drafters.csv"))
    if path is None:
        return builtin
    own = load_drafter_cards(path, text) if text is not None else cards(path)
    names = {c.drafter for c in own}
    taken = {(c.target_model, m) for c in own if c.default for m in c.methods}
    kept = []
    for card in builtin:   # (a card only rows name is no default for an own one to replace)
        methods = tuple(m for m in card.methods
                        if not card.default or (card.target_model, m) not in taken)
        if card.drafter not in names and methods:
            kept.append(dataclasses.replace(card, methods=methods))
    return tuple(kept) + own


def _block_size(path: str, row: int, value: str, kind: str) -> int | None:
    """``block_size``: blank (or no such column) is not known; else a whole number >= 2 (an
    anchor and one drafted position), of a kind that drafts a block (:data:`BLOCK_KINDS`).

    >>> _block_size("d.csv", 2, "", "eagle3_head"), _block_size("d.csv", 2, "16", "dflash_block")
    (None, 16)
    """
    if not value.strip():
        return None
    if kind not in BLOCK_KINDS:
        raise DataError(f"a {kind} drafts no block: block_size is for "
                        + ", ".join(sorted(BLOCK_KINDS)) + " cards", file=path, row=row,
                        column="block_size", fix="leave block_size blank")
    size = parse_number(path, row, "block_size", value, integer=True)
    if size is None or size < 2:
        raise DataError(f"block_size {value.strip()!r} is not a block of 2 or more",
                        file=path, row=row, column="block_size",
                        fix="give the block_size of the drafter's config.json (e.g. 16), or "
                            "leave it blank when not known")
    return int(size)


def trained_block(cards: tuple[DrafterCard, ...], model: str, method: str,
                  drafter: str | None = None) -> tuple[int, DrafterCard] | None:
    """The block ``model``'s ``method`` drafter was trained at, and its card: the card
    ``drafter`` names, else the model's default card (:func:`drafter_for`); the block is the
    last card of that name that gives one (an own card after the built-in, the cards here
    after a fit's stored ones, which an older version stored without it). None: no card, or
    its block is not known.

    >>> c = DrafterCard("d", "m", ("ddtree",), "dflash_block", 5, 1.0, 0.6, 2, "s",
    ...                 block_size=16)
    >>> trained_block((c,), "m", "ddtree")[0], trained_block((c,), "m", "eagle3")
    (16, None)
    """
    card = (drafter_for(cards, model, method) if drafter is None
            else card_named(cards, drafter))
    if card is None or not serves(card, model, method):
        return None
    block = next((c.block_size for c in reversed(tuple(cards))
                  if c.drafter == card.drafter and c.block_size is not None), None)
    return None if block is None else (block, card)


def block_problem(cards: tuple[DrafterCard, ...], model: str, method: str,
                  block: int | None, drafter: str | None = None,
                  flag: str = "block", default_only: str | None = None,
                  refit: bool = False) -> tuple[str, str] | None:
    """(problem, fix) of a block above the one ``model``'s ``method`` drafter was trained at
    (:func:`trained_block`; ``flag`` names the block where the problem is told); None: no
    block, a block within it, or no trained block known. ``default_only``: why the asking
    command cannot name a drafter (``track``, a ``simulate`` design): the fix asks for a
    default card trained at that block instead (``refit``: and a fit again, whose stored
    default card comes first).

    >>> c = DrafterCard("z/D-b16", "m", ("ddtree",), "dflash_block", 5, 1.0, 0.6, 2, "s",
    ...                 block_size=16)
    >>> block_problem((c,), "m", "ddtree", 32)[0]
    "block 32 is above the block 16 m's ddtree drafter z/D-b16 was trained at (its card's \
block_size)"
    >>> block_problem((c,), "m", "ddtree", 16) is None
    True
    """
    trained = trained_block(cards, model, method, drafter)
    if block is None or trained is None or block <= trained[0]:
        return None
    size, card = trained
    other = (f"name a drafter trained at block {block} (its card in data/drafters.csv, with "
             "its block_size)" if default_only is None else
             f"give {model} a default {method} drafter trained at block {block} (its card in "
             f"data/drafters.csv, with block_size {block}{', then fit again' if refit else ''}"
             f"; {default_only})")
    return (f"{flag} {block} is above the block {size} {model}'s {method} drafter "
            f"{card.drafter} was trained at (its card's block_size)",
            f"give a block of at most {size}, or {other}")


def row_block_problem(cards: tuple[DrafterCard, ...], m, default_only: str | None = None
                      ) -> tuple[str, str, str] | None:
    """(problem, fix, column) of a measurement row (a
    :class:`~ddtree_bayes.core.data.Measurement`) its drafter's trained block rules out: a
    block above it (:func:`block_problem`, ``default_only`` as there), or, with no block
    given, an ``accept_len`` above what a step of that block can emit
    (:func:`~ddtree_bayes.core.methods.max_accept`)."""
    from ddtree_bayes.core.methods import max_accept

    problem = block_problem(cards, m.model, m.method, m.block, m.drafter,
                            default_only=default_only)
    if problem is not None:
        return (*problem, "block")
    trained = trained_block(cards, m.model, m.method, m.drafter)
    if trained is None or m.accept_len is None:
        return None
    limit = max_accept(m.method, m.block, m.budget, None, m.verify_tokens,
                       trained_block=trained[0])
    if limit.admits(m.accept_len):
        return None
    return (limit.refusal(f"accept_len {m.accept_len:g}"), limit.fix("accept_len"),
            "accept_len")


def _number(path: str, row: int, cell: dict[str, str], col: str, integer: bool = False
            ) -> float:
    value = parse_number(path, row, col, cell[col], integer=integer)
    # a drafter pass reads something: no layers, no parameters or no bytes per weight would
    # price it at its launches alone (the LM head a drafter reads may be counted elsewhere)
    zero_ok = col == "lm_head_params_b"
    if value is None or not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        bound = ">= 0" if zero_ok else "above 0"
        raise DataError(f"{col} must be a number {bound}", file=path, row=row, column=col,
                        fix="fill it in from the drafter's config.json (see its notes)")
    return value


#: Drafter kinds that carry their own LM head: an EAGLE-3 head projects to its own draft
#: vocabulary, a separate draft model has its own head. A blank ``shares_lm_head`` of these
#: reads as no (the head counted once, among their parameters); of the other kinds (EAGLE-1/2
#: heads, MTP modules, DFlash blocks, Medusa heads), which project through the target's
#: head, as yes.
OWN_HEAD_KINDS = frozenset({"eagle3_head", "draft_model"})


def _default(path: str, row: int, value: str) -> bool:
    """``default``: yes/true or blank (or no such column): the card a row with a blank
    ``drafter`` uses for its target and methods; no/false: only rows that name it.

    >>> _default("d.csv", 2, ""), _default("d.csv", 2, "no")
    (True, False)
    """
    return _yes_no_cell(path, row, "default", value, True,
                        "yes (or blank): rows with a blank drafter column use this card for its "
                        "target and methods; no: only rows that name it in their drafter column")


def _yes_no(path: str, row: int, value: str, kind: str = "") -> bool:
    """``shares_lm_head``: yes/true or no/false; blank (or no such column) is what drafters
    of its ``kind`` do (:data:`OWN_HEAD_KINDS`: no; every other kind: yes).

    >>> _yes_no("d.csv", 2, "", "eagle3_head"), _yes_no("d.csv", 2, "", "mtp_module")
    (False, True)
    >>> _yes_no("d.csv", 2, "Yes", "eagle3_head")
    True
    """
    return _yes_no_cell(path, row, "shares_lm_head", value, kind not in OWN_HEAD_KINDS,
                        "yes: it projects through the target's head (read on top of its own "
                        "parameters); no: its own head, counted in params_active_b")


def _yes_no_cell(path: str, row: int, column: str, value: str, blank: bool, fix: str) -> bool:
    """A yes/no cell (yes/true, no/false, any case; ``blank`` for an empty one), else a
    DataError naming the file, row and column."""
    word = value.strip().lower()
    if not word:
        return blank
    if word in ("yes", "true"):
        return True
    if word in ("no", "false"):
        return False
    raise DataError(f"{column} must be yes or no, got {value!r}", file=path, row=row,
                    column=column, fix=fix)


def drafts_for(target: str, model: str) -> bool:
    """Does a drafter card of ``target`` serve ``model``: the target itself, or a deployment
    card of it named ``<target>-<quantisation>`` (:func:`drafter_for` picks the longest such
    target).

    >>> drafts_for("qwen3.8-27b", "qwen3.8-27b-q4_k_m"), drafts_for("qwen3.8-27b", "qwen3")
    (True, False)
    """
    return model == target or model.startswith(target + "-")


def drafter_for(cards: tuple[DrafterCard, ...], model: str, method: str) -> DrafterCard | None:
    """The default card of ``model``'s drafter for ``method`` (the one a row with a blank
    ``drafter`` column ran): the target's own name, or the base model of a deployment card
    named ``<target>-<quantisation>`` (the longest such prefix). A card with ``default`` no is
    used only where a row or ``--drafter`` names it (:func:`row_drafter`).

    >>> c = DrafterCard("d", "qwen3.8-27b", ("mtp",), "mtp_module", 1, 0.4, 1.3, 2, "s")
    >>> drafter_for((c,), "qwen3.8-27b-q4_k_m", "mtp") is c, drafter_for((c,), "qwen3", "mtp")
    (True, None)
    """
    best: DrafterCard | None = None
    for card in cards:
        if method not in card.methods or not card.default:
            continue
        if model == card.target_model:
            return card
        if drafts_for(card.target_model, model) and (
                best is None or len(card.target_model) > len(best.target_model)):
            best = card
    return best


def serves(card: DrafterCard, model: str, method: str) -> bool:
    """Does ``card`` draft ``method`` for ``model`` (its target, or a deployment card of it),
    default or not."""
    return method in card.methods and drafts_for(card.target_model, model)


def row_drafter(cards: tuple[DrafterCard, ...], model: str, method: str,
                drafter: str | None) -> DrafterCard | None:
    """The card that prices a row's drafter passes: the one its ``drafter`` column names
    (:func:`check_row_drafters` has checked it serves the row), else :func:`drafter_for`'s
    default (None: a generic drafter of the method)."""
    if drafter is None:
        return drafter_for(cards, model, method)
    return card_named(cards, drafter)


def card_named(cards: Iterable[DrafterCard], name: str) -> DrafterCard | None:
    """The card called ``name`` (the last one: an own card after the built-in it replaces),
    or None."""
    return next((c for c in reversed(tuple(cards)) if c.drafter == name), None)


def drafter_problem(cards: tuple[DrafterCard, ...], model: str, method: str, drafter: str
                    ) -> tuple[str, str] | None:
    """(problem, fix) of a measurement row's (or ``add --drafter``'s) drafter name: it must
    name a card of ``cards`` (built in, overlaid by the working directory's
    data/drafters.csv) that drafts ``method`` for ``model`` and is not its default card (a
    blank column names that one); None when it does.

    >>> c = DrafterCard("d", "m", ("eagle3",), "eagle3_head", 1, 0.4, 0.1, 2, "s",
    ...                 default=False)
    >>> drafter_problem((c,), "m", "eagle3", "d") is None
    True
    >>> drafter_problem((c,), "m", "mtp", "d")[0]
    "drafter 'd' drafts eagle3, not mtp"
    >>> import dataclasses
    >>> drafter_problem((dataclasses.replace(c, default=True),), "m", "eagle3", "d")[0]
    "drafter 'd' is m's default eagle3 card, which a blank drafter column names"
    """
    if method == AR_METHOD:
        return AR_DRAFTER
    card = card_named(cards, drafter)
    if card is None:
        known = sorted(c.drafter for c in cards if serves(c, model, method))
        return (f"no drafter card {drafter!r}",
                (f"name one of {', '.join(known)}, or a" if known else "a")
                + "dd its card to data/drafters.csv (`ddtree-bayes card add`, default no); "
                  "blank: the target's own drafter card for the method")
    if method not in card.methods:
        return (f"drafter {drafter!r} drafts {', '.join(card.methods)}, not {method}",
                "give the method the drafter ran, or name a drafter of this method")
    if not drafts_for(card.target_model, model):
        return (f"drafter {drafter!r} drafts for {card.target_model}, not {model}",
                f"name a drafter card whose target_model is {model} (a head trained for "
                "another model but run against this one needs its own card for this target)")
    if drafter_for(cards, model, method) is card:
        # (one spelling of the default drafter: named, its rows were an acceptance group and
        # configuration apart from the blank ones, which a query's --drafter of it asks)
        return (f"drafter {drafter!r} is {model}'s default {method} card, which a blank "
                "drafter column names",
                "clear the drafter: a row names only a drafter other than its target's default "
                "card (`card list` marks the cards only named rows use)")
    return None


def row_drafter_problem(cards: tuple[DrafterCard, ...], m) -> tuple[str, str, str] | None:
    """(problem, fix, column) of a measurement row (a
    :class:`~ddtree_bayes.core.data.Measurement`) whose ``drafter`` names no card of ``cards``
    that drafts its method for its model (column ``drafter``, :func:`drafter_problem`), else
    whose block or accept_len its drafter's trained block rules out
    (:func:`row_block_problem`); None: neither. The one check of a row's drafter that ``add``
    and ``fit`` (:func:`check_row_drafters`) make."""
    if m.drafter is not None:
        problem = drafter_problem(cards, m.model, m.method, m.drafter)
        if problem is not None:
            return (*problem, "drafter")
    return row_block_problem(cards, m)   # (a block above the drafter's trained one)


def check_row_drafters(rows, cards: tuple[DrafterCard, ...], path: str) -> None:
    """Refuse the first row (a :class:`~ddtree_bayes.core.data.Measurement`) whose drafter
    :func:`row_drafter_problem` refuses (file, row, column, fix)."""
    for m in rows:
        problem = row_drafter_problem(cards, m)
        if problem is not None:
            raise DataError(problem[0], file=path, row=m.row, column=problem[2],
                            fix=problem[1])


def generic_drafter(method: str) -> str:
    """What prices ``method``'s drafter passes when no drafter card serves the model
    (:func:`pass_roofline_ms`).

    >>> generic_drafter("ddtree"), generic_drafter("eagle3")
    ('a generic ddtree drafter of 5 target layers and an LM-head-sized read', \
'a generic eagle3 drafter of 1 target layer and an LM-head-sized read')
    """
    layers = GENERIC_LAYERS.get(method, GENERIC_LAYERS_DEFAULT)
    return (f"a generic {method} drafter of {layers} target layer{'s' * (layers > 1)} and an "
            "LM-head-sized read")


@dataclass(frozen=True)
class PassRoofline:
    """Constants of the drafter-pass roofline: the pair roofline priors' medians."""

    bw_eff: float = 0.63
    layer_ms: float = 0.03
    allreduce_fabric_ms: float = 0.05
    allreduce_pcie_ms: float = 0.10


def pass_roofline_ms(drafter: DrafterCard | None, model_card, method: str,
                     hardware_row: dict[str, str], gpus: int,
                     constants: PassRoofline = PassRoofline()) -> tuple[float, str]:
    """The roofline of one drafter pass of ``method`` for the target ``model_card`` on ``gpus``
    GPUs of a hardware-table row (ms), and how it was found (the card, or a generic drafter).

    >>> from ddtree_bayes.core.model_cards import ModelCard
    >>> target = ModelCard("m", 8, 8, 32, None, None, 2.0, "bf16", "s")
    >>> head = DrafterCard("h", "m", ("eagle3",), "eagle3_head", 1, 0.4, 0.1, 2.0, "s")
    >>> hw = {"hardware": "h", "mem_bw_tb_s": "2", "interconnect": "x"}
    >>> ms, how = pass_roofline_ms(head, target, "eagle3", hw, 1)
    >>> round(ms, 6)   # 0.5 B params x 2 B / 2 TB/s = 0.5 ms / 0.63 + 2 layers x 0.03 ms
    0.853651
    >>> round(pass_roofline_ms(None, target, "eagle3", hw, 1)[0], 6)  # 2 x (8 B / 32) x 2 / 2
    0.853651
    """
    from ddtree_bayes.core.pairs import link

    bandwidth = float(hardware_row["mem_bw_tb_s"])
    if drafter is not None:
        params = drafter.pass_params_b
        # (a default in-target card follows the deployment's quantisation; a named one is
        # one deployment's checkpoint, at the precision its card states)
        bpw = (model_card.bytes_per_weight
               if drafter.kind in IN_TARGET_KINDS and drafter.default
               else drafter.bytes_per_weight)
        layers = drafter.layers
        how = f"drafter card {drafter.drafter}: {params:.3g} B parameters read per pass"
    else:
        layers = GENERIC_LAYERS.get(method, GENERIC_LAYERS_DEFAULT)
        params = (layers + 1) * model_card.read_params_b / model_card.layers
        bpw = model_card.bytes_per_weight
        how = f"no drafter card: {generic_drafter(method)}"
    kind = link(hardware_row, gpus)
    per_layer = constants.layer_ms + (constants.allreduce_fabric_ms if kind == "fabric" else
                                      constants.allreduce_pcie_ms if kind == "pcie" else 0.0)
    stream = params * bpw / (bandwidth * gpus)   # B params x B/weight / (TB/s): ms
    return stream / constants.bw_eff + (layers + 1) * per_layer, how

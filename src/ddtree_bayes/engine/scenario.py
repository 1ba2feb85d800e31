"""A prediction's query: acceptance and context parsing, the scenario, and which measured
(system, engine, method) groups answer it. numpy only."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddtree_bayes.core import per_call
from ddtree_bayes.core.config import AcceptancePrior, PriorsConfig
from ddtree_bayes.core.data import (
    AR_METHOD,
    as_name,
    derive_verify_tokens,
    drafts_nothing,
    fitted_rows_same,
    gb_texts,
    listed,
    measured_accept,
    node_gpus,
    plain_float,
    plain_text,
    system_label,
    table_memory_gb,
    unknown_hardware_fix,
)
from ddtree_bayes.core.drafters import DrafterCard
from ddtree_bayes.core.errors import QueryError, StaleArtifactError, UnconvergedError, closest
from ddtree_bayes.core.methods import (
    AcceptLimit,
    always_tree,
    chain_depth,
    max_accept,
    never_tree,
    shaped_budget,
)
from ddtree_bayes.core.pairs import pair_label, read_features, split_label
from ddtree_bayes.core.row_notes import context_above_max, read_floor_text, step_reach_above_max
from ddtree_bayes.engine.posterior import Fit, blank_context

SEED_BAND = 0.30  # the original estimator's flat +-30%


@dataclass(frozen=True)
class AcceptRequest:
    """Acceptance values to tabulate, and the (lo, hi) range to marginalise as a Uniform."""

    values: tuple[float, ...]
    uniform: tuple[float, float] | None = None


def parse_accept(text: str) -> AcceptRequest:
    """Parse ``--accept``: ``13.5``, ``12,14,16``, ``12:16`` (integers) or ``12:16:0.5``.

    A range also asks for one row that marginalises acceptance as Uniform(lo, hi), and for
    both its ends: an end its step does not reach is asked too (``12.5:16`` stopped at 15.5).

    >>> parse_accept("12:16")
    AcceptRequest(values=(12.0, 13.0, 14.0, 15.0, 16.0), uniform=(12.0, 16.0))
    >>> parse_accept("12:13:0.5").values, parse_accept("12,14").values
    ((12.0, 12.5, 13.0), (12.0, 14.0))
    >>> parse_accept("12.5:16").values
    (12.5, 13.5, 14.5, 15.5, 16.0)
    >>> parse_accept("14,12,14").values   # a value asked twice is one row
    (14.0, 12.0)
    """
    fix = "use 13.5, 12,14,16, 12:16 or 12:16:0.5"

    def refuse(reason: str) -> QueryError:
        err = QueryError(f"--accept {text!r} {reason}", fix=fix)
        err.reason = reason   # (the flag's own parser words its line with it)
        return err

    try:
        parts = [plain_float(p) for p in text.split(":" if ":" in text else ",")]
    except ValueError:
        raise refuse("is not a number, list or range") from None
    if not all(math.isfinite(p) for p in parts):
        raise refuse("is not finite")
    if ":" not in text:
        return AcceptRequest(tuple(dict.fromkeys(parts)))
    if len(parts) not in (2, 3):
        raise refuse("is not a number, list or range")
    lo, hi = parts[0], parts[1]
    step = parts[2] if len(parts) == 3 else 1.0
    if not hi > lo:
        raise refuse(f"is a range whose end ({hi:g}) is not above its start ({lo:g})")
    if not step > 0:
        raise refuse(f"has a step ({step:g}) that is not positive")
    if (hi - lo) / step > 10_000:
        raise refuse(f"asks {(hi - lo) / step:.3g} values (at most 10,000: a coarser step)")
    n = int(math.floor((hi - lo) / step + 1e-9))
    values = [round(lo + i * step, 10) for i in range(n + 1)]
    if hi - values[-1] > 1e-9 * max(1.0, abs(hi)):   # (the grid stops short of the end)
        values.append(hi)
    return AcceptRequest(tuple(values), (lo, hi))


def check_accept(request: AcceptRequest, text: str, limit: AcceptLimit, prefix: str = "",
                 edited: Callable[[], tuple[str, str] | None] | None = None) -> None:
    """Refuse (one line) an ``--accept`` whose values, or range's upper end, lie above what the
    configuration can emit (``limit``: :func:`accept_limit`). ``prefix`` names where the flag
    came from (e.g. ``--query: ``). ``edited``: asked on a refusal, what to add when the bound
    is a drafter card edited since the fit, and its fix (:func:`edited_block`): the line
    names the card the fit stored, and the fix gives the way back to it beside a smaller
    ``--accept``.

    >>> from ddtree_bayes.core.errors import QueryError
    >>> try:
    ...     check_accept(parse_accept("12:20"), "12:20", max_accept("ddtree", 16, 32))
    ... except QueryError as err:
    ...     print(str(err).split(" can emit ")[0])
    --accept 12:20 (up to 20) is above what ddtree with block 16
    """
    top = max(list(request.values) + list(request.uniform or ()))
    if top > limit.tokens:
        what = f"--accept {text}" if len(request.values) == 1 and request.uniform is None else (
            f"--accept {text} (up to {top:g})")
        note = edited() if edited is not None else None
        if note is None:
            raise QueryError(prefix + limit.refusal(what), fix=limit.fix())
        raise QueryError(prefix + limit.refusal(what) + note[0],
                         fix=f"{note[1]}, or give --accept of at most {limit.tokens:g}")


def parse_context(text: str | int | float | None) -> float | None:
    """Context length in tokens: ``32768``, ``32k`` (x1024) or ``1m`` (x1048576); the
    number as a measurement file writes one (``1e5`` too, as its context_tokens column
    takes it).

    A finite count that is not whole (``0.5``, ``0.3k``: 307.2 tokens) is refused: no run
    measures part of a token. Infinite and NaN counts are returned, for each caller to refuse
    in its own words.

    >>> parse_context("32k"), parse_context("1000"), parse_context("1e5")
    (32768.0, 1000.0, 100000.0)
    """
    if text is None:
        return None
    if isinstance(text, int | float):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([kKmM]?)\s*",
                         text)
        if not m:
            raise QueryError(f"--context {text!r} is not a token count",
                             fix="use e.g. 32768 or 32k")
        value = float(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    if math.isfinite(value) and not value.is_integer():
        reason = f"is {plain_text(value)} tokens, not a whole number"
        err = QueryError(f"--context {text!r} {reason}",
                         fix="give a whole number of tokens, e.g. 32768 or 32k")
        err.reason = reason   # (the flag's own parser words its line with it)
        raise err
    return value


@dataclass(frozen=True)
class Scenario:
    """One configuration to predict for."""

    hardware: str
    gpus: int
    engine: str
    method: str
    block: int | None
    budget: int | None
    verify_tokens: int
    context_tokens: float
    measured: bool = True   # False: hardware transferred from a measured system
    #: the target model; ``multi``: the fit holds several (parameters per (model, system) pair)
    model: str | None = None
    multi: bool = False
    #: what one step can emit, from the fit's methods table (set by :func:`resolve_scenario`)
    accept_limit: AcceptLimit | None = None
    #: streams decoded together (the step verifies C x verify_tokens tokens)
    concurrency: int = 1
    #: ``predict --drafter``: the card whose roofline prices the drafter passes (None: the
    #: drafter the fit priced for the model and method, core/drafters.py ``drafter_for``)
    drafter: DrafterCard | None = None
    #: the name the fit's rows key :attr:`drafter` by (their ``drafter`` column: acceptance
    #: groups, anchors, random numbers); None without a card, or for the fit's stored default
    #: card of the model and method, which the rows that name none ran (:func:`drafter_asked`,
    #: decided once where the card is set: :func:`with_drafter`, :func:`with_row_drafter`)
    drafter_named: str | None = None
    #: ``--kv-cache`` (predict, optimize, next --query, track): the KV cache's dtype (a key of
    #: core/model_cards.py ``KV_CACHE_BITS``), which the read cap and the memory check count
    #: the cache at (None: not given; the cap reads the least a deployment does, the memory
    #: check the card's bytes)
    kv_cache: str | None = None
    #: in a fit of several models, a GPU count not given and taken from other models' rows
    #: (:func:`resolve_scenario`): whose, as :func:`borrowed_gpus_warning` says it
    gpus_from: tuple[str, ...] = ()
    #: ``--new-deployment`` (predict, next --query, track, the API's ``new_deployment``): price
    #: the question as another deployment of the (system, engine, method) group the fit
    #: measured, its overhead carried to it with the spread between deployments, not anchored
    #: to the group's rows (engine/structure.py :func:`new_deployment_group`)
    new_deployment: bool = False

    @property
    def limit(self) -> AcceptLimit:
        """The most tokens a step can emit (:func:`~ddtree_bayes.core.methods.max_accept`)."""
        return self.accept_limit or max_accept(self.method, self.block, self.budget, None,
                                               self.verify_tokens)

    @property
    def system(self) -> str:
        return system_label(self.hardware, self.gpus)

    @property
    def pair(self) -> str:
        """The label of the fit's parameters: the system, or ``model@system`` in a fit of
        several models."""
        return pair_label(self.model or "", self.system, self.multi)

    def autoregressive(self) -> Scenario:
        """Plain decoding on the same system, engine, context and concurrency."""
        return dataclasses.replace(self, method=AR_METHOD, block=None, budget=None,
                                   verify_tokens=1, accept_limit=None)

    def describe(self) -> str:
        parts = [f"{self.hardware} x{self.gpus}", self.engine, self.method]
        if self.multi:
            parts.insert(0, str(self.model))
        if self.block is not None:
            parts.append(f"block {self.block}")
        if self.budget is not None:
            parts.append(f"budget {self.budget}")
        parts.append(f"verify {self.verify_tokens}")
        if self.drafter is not None:
            parts.append(f"drafter {self.drafter.drafter}")
        parts.append(f"context {plain_text(float(self.context_tokens))}")   # (2097152, not 2.09715e+06)
        if self.concurrency != 1:
            parts.append(f"concurrency {self.concurrency}")
        if self.new_deployment:
            parts.append("new deployment")
        return ", ".join(parts)


def _read_as_stored(path: Path) -> tuple[set[str], str]:
    """(sha256 of a file as the fit stores it: its text as the loaders read it (universal
    newlines, no BOM), and of its raw bytes (fits made before that was noticed), the text).
    A CRLF file is unchanged if either hash matches."""
    raw = per_call.read_bytes(path)
    text = raw.decode("utf-8-sig", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return {hashlib.sha256(raw).hexdigest(), hashlib.sha256(text.encode()).hexdigest()}, text


def holds_fitted(sha256: str, path: Path) -> bool:
    """Whether the file at ``path`` holds the text a fit stored with ``sha256`` (its
    ``meta["data"]["sha256"]``): a copy of the file the fit was made on, wherever it lies."""
    return sha256 in _read_as_stored(path)[0]


def holds_fitted_rows(draws: Fit, path: Path) -> bool:
    """Whether the measurement file at ``path`` holds the rows fit ``draws`` read: its text
    (:func:`holds_fitted`), or that text but for the rows' notes and sources, which no fit
    reads (core/data.py ``fitted_rows_same``: ``check_fit`` calls such a file unchanged)."""
    hashes, text = _read_as_stored(path)
    return draws.meta["data"]["sha256"] in hashes or fitted_rows_same(text, draws.data_csv)


def _without(text: str, sections: tuple[str, ...]) -> dict | None:
    """A priors TOML without the top-level ``sections`` (None if it does not parse)."""
    import tomllib

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    for name in sections:
        raw.pop(name, None)
    return raw


def hardware_changes(draws: Fit, workdir: Path | None = None) -> list[str]:
    """What the hardware table here (built-in and ``data/hardware.csv``) says differently
    from the one the fit stored, which every answer of the fit uses: rows whose values
    changed (their sources aside: text no answer reads), and GPUs added since. Empty when
    they agree (or the table here does not load: ``fit`` names that problem). A fit made here
    with ``fit --hardware-file FILE`` (``meta["hardware"]``, ``meta["workdir"]``) is compared
    with FILE, the table ``update`` keeps for it, not with data/hardware.csv."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.core.hardware_table import SOURCE_COLUMNS, hardware_table, user_hardware_file

    own = _own_hardware_file(draws.meta, workdir)
    default = user_hardware_file(workdir)
    flag = ("" if own is None or (default is not None and own == default.resolve())
            else f" --hardware-file {shlex.quote(paths.shown(own))}")
    try:
        now = hardware_table(workdir, own)
    except InputError:
        return []
    stored, fit_id = draws.hardware, draws.meta["fit_id"]
    out = []
    changed = []
    for name, row in stored.items():
        new = now.rows.get(name)
        diff = [f"{c} {row[c] or '-'} -> {new[c] or '-'}" for c in row
                if new is not None and c in new and (row[c] or "").strip() != (new[c] or "").strip()
                and c not in SOURCE_COLUMNS]
        if diff:
            changed.append(f"{name} ({', '.join(diff[:2])})")
    if changed:
        out.append(f"the hardware table here differs from the one fit {fit_id} stored for "
                   f"{'; '.join(changed[:3])}{' and more' if len(changed) > 3 else ''}: its "
                   f"answers use the stored values; re-run `ddtree-bayes fit{flag}` to use these")
    added = [n for n in now.rows if n not in stored]
    if added:
        out.append(f"{', '.join(added[:3])}{' and more' if len(added) > 3 else ''} "
                   f"{'is' if len(added) == 1 else 'are'} in the hardware table here but not "
                   f"in fit {fit_id}'s: re-run `ddtree-bayes fit{flag}` to ask about "
                   f"{'it' if len(added) == 1 else 'them'}")
    return out


def _own_hardware_file(meta: dict, workdir: Path | None = None) -> Path | None:
    """The user hardware file (resolved) a fit made in ``workdir`` (default: here) read, while
    it exists; None for a fit of the built-in table alone, one made in another directory (a
    copied workspace compares with its own table) or one whose file is gone."""
    from ddtree_bayes.engine.store import made_elsewhere

    stored = (meta.get("hardware") or {}).get("path")
    if not stored or not Path(stored).is_file():
        return None
    if made_elsewhere(meta, Path.cwd() if workdir is None else Path(workdir)):
        return None
    return Path(stored).resolve()


def here_drafters(draws: Fit, workdir: Path | None = None) -> tuple:
    """The built-in drafter cards overlaid by the working directory's ``data/drafters.csv``
    (core/drafters.py ``drafter_table``), read once per fit object and directory: an answer
    asks for them up to four times (card changes, drafter changes, the cards a measurement
    could be made with, ``--drafter``). Keyed by the file's bytes, so a card added while a
    Python session holds the fit counts; a file that does not load raises each time. Within
    a command (core/per_call.py) built once per file, whichever fit object asks: ``next``'s
    views of the fit (one per simulated result, each with its own memo) built it 193 times;
    without a file of the directory's own, the built-in cards alone, once per call too (they
    were built per view: 9 times in ``next --k 8``)."""
    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.core.paths import own_data_file

    path = own_data_file("drafters.csv", workdir)
    if per_call.in_call():
        if path is None:   # (the package's own file: unchanged within a call)
            return per_call.parsed_text("built-in drafter cards", "", lambda: drafter_table())
        return per_call.parsed("drafter cards here", path, lambda: drafter_table(path))
    try:
        key = (str(path), per_call.read_bytes(path) if path is not None else b"")
    except OSError:   # (drafter_table names the problem)
        return drafter_table(path)
    cache = draws.memo.setdefault("here_drafters", {})
    if key not in cache:
        cache[key] = drafter_table(path)
    return cache[key]


def card_changes(draws: Fit, workdir: Path | None = None, *, drafters: bool = True,
                 cards_here: tuple[dict, tuple] | None = None, blocks: bool = False
                 ) -> list[str]:
    """What the model cards (``data/models.csv``, else the bundled ones) and drafter cards
    (built in, overlaid by ``data/drafters.csv``) here say differently from the ones the fit
    stored, which its answers use: a stored model card whose modelled fields changed or that is
    gone (a fit's proxy card is in no file: only a card written for it since counts), and
    drafter cards changed, added or removed (:func:`drafter_card_changes`; ``drafters`` False
    leaves them to the caller, which says those that bear on its question). Empty when they
    agree, or when the cards here do not load (``fit`` names that problem). ``cards_here``: the
    model cards (as the cards file says them) and drafter cards here as the caller read
    them (``update``'s inputs), not read again. ``blocks``: a drafter card's ``block_size``
    edited counts too (``update``: :func:`drafter_card_changes`)."""
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.core.model_cards import NOT_MODELLED, load_model_cards, modelled
    from ddtree_bayes.core.paths import data_file

    model, fit_id = draws.meta.get("model", {}), draws.meta["fit_id"]
    stored = dict(model.get("model_cards") or {})
    if model.get("card"):
        stored[model["card"]["model"]] = model["card"]
    if not stored and "drafter_cards" not in model:   # (a fit that stores no cards)
        return []
    cards_file = data_file("models.csv", workdir)
    if cards_here is not None:
        now, here_cards = cards_here
    else:
        try:
            now = load_model_cards(cards_file)
            here_cards = here_drafters(draws, workdir)
        except InputError:
            return []

    out = []
    proxy = (model.get("proxy_card") or {}).get("model")   # made by the fit, in no file
    gone = sorted(name for name in stored if name not in now and name != proxy)
    if gone:
        where = ("data/models.csv" if cards_file.parent.name == "data" else "the built-in cards")
        out.append(f"the model card{'s' * (len(gone) > 1)} of {', '.join(gone[:3])}"
                   f"{' and more' if len(gone) > 3 else ''} "
                   f"{'are' if len(gone) > 1 else 'is'} not in {where} here (fit {fit_id} "
                   f"stored {'them' if len(gone) > 1 else 'it'}): its answers use the stored "
                   f"card{'s' * (len(gone) > 1)}; write {'them' if len(gone) > 1 else 'it'} "
                   "again (`ddtree-bayes card add`) or re-run `ddtree-bayes fit` without "
                   f"{'their' if len(gone) > 1 else 'its'} rows")
    changed = [name for name, card in stored.items()
               if name in now and modelled(dataclasses.asdict(now[name])) != modelled(card)]
    if changed:
        out.append(f"the model card{'s' * (len(changed) > 1)} of {', '.join(sorted(changed)[:3])}"
                   f"{' and more' if len(changed) > 3 else ''} here "
                   f"{'differ' if len(changed) > 1 else 'differs'} from fit {fit_id}'s: "
                   "its answers use the stored cards; re-run `ddtree-bayes fit` to use these")
    # fields only the memory checks read: no other model, but checks on stale values (a
    # GPTQ card re-added with its checkpoint's bytes was still refused as not fitting)
    for name, card in sorted(stored.items()):
        here = dataclasses.asdict(now[name]) if name in now and name not in changed else {}
        # (a field the stored card predates, kv_cache_bits of a fit before --kv-cache, is
        # not a change: every answer without the flag is the same; q_heads of a fit before
        # the column is taken from the card here, fit_card)
        fields = [k for k in NOT_MODELLED if here.get(k) is not None and here[k] != card.get(k)
                  and (k in card or k not in PREDATED_FIELDS)]
        if fields:
            checks = ("its tensor-parallel check uses" if fields == ["q_heads"] else
                      "its KV-cache, weights-fit and tensor-parallel checks use"
                      if "q_heads" in fields else "its KV-cache and weights-fit checks use")
            out.append(f"the model card of {name} here differs from fit {fit_id}'s in "
                       f"{', '.join(fields)}: {checks} the stored values; re-run "
                       "`ddtree-bayes fit` to use these")
    if drafters:
        out += drafter_card_changes(draws, None, workdir, cards=here_cards, blocks=blocks)
    return out


def drafter_card_changes(draws: Fit, asked: Iterable[tuple[str | None, str]] | None,
                         workdir: Path | None = None, drafter: str | None = None,
                         named_by: str | None = None, cards: tuple | None = None,
                         blocks: bool = False) -> list[str]:
    """What the drafter cards here (built in, overlaid by ``data/drafters.csv``) say
    differently from the ones the fit stored (changed, added or removed), as one line saying
    what the answer uses. ``asked``: the (model, method) pairs a question asks (model None:
    the fit's one model); only cards for those models and methods count, an autoregressive
    question none (None: every change of a card for a model of the fit, as ``update`` counts
    them; a card for another model bears on no answer the fit gives). ``drafter``: the card
    ``--drafter`` names, which the answer prices from the card here
    (:func:`with_drafter`); ``named_by``: what named it when no ``--drafter`` was typed
    (``optimize``: "the rows of F", an acceptance file whose drafter column names it). Empty
    when the fit stores no drafter cards (a fit of the fraction
    form prices no drafter) or the cards here do not load. ``cards``: the drafter cards here
    as the caller read them (:func:`here_drafters`), not read again. ``blocks``: a card whose
    ``block_size`` alone differs from the one the fit stored counts too (``update``: it bounds
    the acceptances the fit inferred, and every answer reads the card here's; the questions
    leave it out, saying it where it bounds an answer: :func:`edited_block`); a card stored
    without one (a fit made before the column) is compared without it."""
    from ddtree_bayes.core.drafters import card_dict, card_key, drafter_for, stored_cards
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.engine.target_models import fit_models

    model, fit_id = draws.meta.get("model", {}), draws.meta["fit_id"]
    if "drafter_cards" not in model:
        return []
    if cards is not None:
        here = cards
    else:
        try:
            here = here_drafters(draws, workdir)
        except InputError:
            return []

    named = {r.drafter for r in draws.measurements.rows if r.drafter is not None} | {drafter}
    stored_blocks = {d["drafter"] for d in model["drafter_cards"]
                     if blocks and d.get("block_size") is not None}

    def key(d: dict) -> tuple[str, int | None]:   # (its block where the fit stored one)
        return card_key(d), (d.get("block_size") if d["drafter"] in stored_blocks else None)

    # (each card's key built once: its "default" read back from the key, not built again)
    before = {key(d): d for d in model["drafter_cards"]}
    after = {key(d): d for d in map(card_dict, here)}
    serves: dict[str, tuple[str, set[str]]] = {}   # name: (target model, methods)
    for k in before.keys() ^ after.keys():
        d = before.get(k) or after[k]
        if not json.loads(k[0])["default"] and d["drafter"] not in named:
            continue   # (a card only rows or --drafter name prices nothing else)
        serves.setdefault(d["drafter"], (d["target_model"], set()))[1].update(d["methods"])
    fit_model = next(iter(fit_models(draws)), None)
    pairs = {(m, method) for m, method in ((m or fit_model, method) for m, method in asked or ())
             if m is not None}
    if asked is not None:
        serves = {name: (target, methods) for name, (target, methods) in serves.items()
                  if any(_bears(m, method, target, methods) for m, method in pairs)}
    else:   # (no question: a card of a model the fit has not bears on none of its answers)
        models = fit_models(draws) or draws.measurements.models   # (a fit naming none)
        serves = {name: (target, methods) for name, (target, methods) in serves.items()
                  if any(_bears(m, method, target, methods) for m in models for method in methods)}
    names = sorted(serves)
    if not names:
        return []
    line = (f"the drafter card{'s' * (len(names) > 1)} {', '.join(names[:3])}"
            f"{' and more' if len(names) > 3 else ''} here "
            f"{'differ' if len(names) > 1 else 'differs'} from fit {fit_id}'s "
            "(changed, added or removed): ")
    if drafter is not None:
        who = (f"--drafter {drafter}" if named_by is None else
               f"the drafter {drafter} that {named_by} name")
        line += (f"this answer prices {who} with its card as fit {fit_id} stored it; "
                 if any(d["drafter"] == drafter for d in model["drafter_cards"]) else
                 f"this answer prices {who} with its card here, at the multiple "
                 "of its roofline the fit learned with the cards it stored; ")   # (named_drafter)
    elif asked is not None:
        m, method = next((m, method) for m, method in sorted(pairs)
                         if any(_bears(m, method, *serves[n]) for n in names))
        stored = drafter_for(stored_cards(model["drafter_cards"]), m, method)
        mine = drafter_for(here, m, method)
        line += (f"this answer prices {m}'s {method} passes "
                 + (f"with {stored.drafter} as fit {fit_id} stored it" if stored is not None
                    else f"without a drafter card (fit {fit_id} stores none for them)")
                 + (f" (--drafter {mine.drafter} prices them with its card here)"
                    if mine is not None and mine != stored else "") + "; ")
    return [line + "re-run `ddtree-bayes fit` to fit with the cards here"]


def stored_card_note(draws: Fit, name: str) -> str:
    """What a refusal of the drafter ``name`` adds to its fix when the answer priced the card
    the fit stored (:func:`named_drafter`) and ``data/drafters.csv`` gives that name otherwise:
    the card the user edited is not the one refused, and fitting again uses it; "" else
    (cards compared as :func:`drafter_card_changes` compares them: core/drafters.py
    ``card_key``)."""
    from ddtree_bayes.core.drafters import card_dict, card_key, card_named
    from ddtree_bayes.core.errors import InputError

    stored = next((d for d in draws.meta["model"].get("drafter_cards", ())
                   if d["drafter"] == name), None)
    try:
        here = None if stored is None else card_named(here_drafters(draws), name)
    except InputError:
        return ""
    if stored is None or here is None or card_key(stored) == card_key(card_dict(here)):
        return ""
    return (f"; fit {draws.meta['fit_id']} prices {name} with the card it stored, and "
            "data/drafters.csv's differs: re-run `ddtree-bayes fit` to fit with it")


def check_acceptance_range(draws: Fit, sc: Scenario, a: np.ndarray, what: str) -> None:
    """Refuse acceptance draws ``a`` (``what``: how the refusal names them, e.g. "acceptance
    14") outside what ``sc``'s step can emit (:attr:`Scenario.limit`), one QueryError for
    predict and next's ``--query`` alike; when the bound is a drafter card edited since the
    fit, the refusal says so and gives that fix (:func:`edited_block`)."""
    why = sc.limit.out_of_range(float(np.min(a)), float(np.max(a)))   # (ar: 1 .. 1)
    if why is None:
        return
    edited = edited_block(draws, sc)
    raise QueryError(f"{what} of {sc.describe()}: {why}" + ("" if edited is None else edited[0]),
                     fix=sc.limit.span() if edited is None else edited[1])


def edited_block(draws: Fit, sc: Scenario) -> tuple[str, str] | None:
    """(what to add to a refusal of an acceptance above what ``sc``'s step can emit, its fix)
    when the bound is the drafter's trained block and the card here (built in, overlaid by
    ``data/drafters.csv``: :func:`drafter_cards`) gives that drafter another ``block_size``
    than the card the fit stored; else None. The stored card's block is not read (the one
    here bounds every question: predict compares cards without it, ``update`` with it), so a
    card edited from 16 to 8 after a fit refused the fit's own acceptance of 10 with "tokens
    per step lie in 1 .. 8", which no flag meets, and without a word of the block-16 card the
    fit stored."""
    return edited_card_block(draws, sc.model, sc.method,
                             None if sc.drafter is None else sc.drafter.drafter, sc.limit)


def edited_card_block(draws: Fit, model: str | None, method: str, drafter: str | None,
                      limit: AcceptLimit) -> tuple[str, str] | None:
    """:func:`edited_block` of a question given by its parts (``track``'s query, which is no
    :class:`Scenario`): ``model`` (None: the fit's), ``method``, the ``drafter`` card's name
    (None: the default card) and the ``limit`` its acceptance was checked against."""
    if not limit.rule.startswith("the trained block"):
        return None
    here = drafter_trained_block(draws, model, method, drafter)
    if here is None:
        return None
    target = priced_target(draws, model)
    block, card = here
    stored = next((d.get("block_size") for d in draws.meta["model"].get("drafter_cards", ())
                   if d.get("drafter") == card.drafter), None)
    if stored is None or stored == block:
        return None
    where = ("the built-in drafter cards give" if _builtin_block(card.drafter) == block
             else "data/drafters.csv gives")
    return (f"; fit {draws.meta['fit_id']} stored {target}'s {method} drafter "
            f"{card.drafter} at block_size {stored}, and {where} it block_size {block}",
            "re-run `ddtree-bayes fit` to fit with the edited card, or restore block_size "
            f"{stored} in data/drafters.csv to answer from this fit")


def _builtin_block(name: str) -> int | None:
    """The ``block_size`` of the built-in drafter card ``name`` (None: no such card, or none
    given): the card here is the built-in one when it gives the same (a fit of an older
    package version read another), else the user's ``data/drafters.csv``."""
    from ddtree_bayes.core.drafters import drafter_table

    return next((c.block_size for c in drafter_table() if c.drafter == name), None)


def _bears(model: str, method: str, target: str, methods: set[str]) -> bool:
    """Does a drafter card for ``target`` serving ``methods`` price ``model``'s ``method``
    passes (the target's own name, or the base of a deployment card named
    ``<target>-<quantisation>``: core/drafters.py ``drafter_for``)?"""
    return (method in methods
            and (model == target or model.startswith(target + "-")))


#: How a stale fit refused under ``--strict`` ends: what refused it and the fix, as every error
STRICT_FIX = (": --strict refuses it (fix: do as said, or drop --strict to answer from this fit "
              "with a warning)")


def check_drafters(draws: Fit, asked: Iterable[tuple[str | None, str]], *,
                   drafter: str | None = None, named_by: str | None = None,
                   strict: bool = False) -> list[str]:
    """The drafter cards here that differ from the fit's and bear on a question's (model,
    method) pairs (:func:`drafter_card_changes`), for the commands that left them out of
    :func:`check_fit` until their question was resolved; raise with ``strict``, as it does."""
    warnings = drafter_card_changes(draws, asked, drafter=drafter, named_by=named_by)
    if warnings and strict:
        raise StaleArtifactError("; ".join(warnings) + STRICT_FIX)
    return warnings


def drafter_cards(draws: Fit, here: bool = True) -> tuple:
    """The drafter cards a measurement could be made with: the fit's stored ones, then the
    built-in ones overlaid by ``data/drafters.csv`` (the built-in ones alone when that file does
    not load: fit and predict name its problem; or without ``here``: the Python API, whose fit
    may come from another directory)."""
    from ddtree_bayes.core.drafters import stored_cards

    more = _cards_here(draws, here)
    cards = _with_blocks_here(stored_cards(draws.meta["model"].get("drafter_cards", ())), more)
    return cards + tuple(c for c in more if c.drafter not in {s.drafter for s in cards})


def _cards_here(draws: Fit, here: bool = True) -> tuple:
    """The built-in drafter cards overlaid by ``data/drafters.csv`` (:func:`here_drafters`),
    the built-in ones alone when that file does not load or without ``here``."""
    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.core.errors import InputError

    try:
        return here_drafters(draws) if here else drafter_table()
    except InputError:
        return drafter_table()


def _with_blocks_here(stored: tuple, more: tuple) -> tuple:
    """The fit's ``stored`` cards, each with the ``block_size`` of the card of its name in
    ``more`` (the cards here) where that gives one: it prices no pass, the fit compares its
    cards without it and an older fit stored none (core/drafters.py stored_card_dict,
    trained_block)."""
    blocks = {c.drafter: c.block_size for c in more if c.block_size is not None}
    return tuple(dataclasses.replace(c, block_size=blocks[c.drafter])
                 if c.drafter in blocks else c for c in stored)


def named_drafter(draws: Fit, name: str, stored: tuple | None = None) -> DrafterCard | None:
    """The drafter card called ``name`` that an answer of ``draws`` prices with, wherever it
    is named (``predict --drafter``, a row's ``drafter`` column, an acceptance file's): the
    card the fit stored, the one it was fitted with (its learned multiple of the drafter's
    roofline is of that card, as its answers use its stored model cards); else the card here
    (built in, overlaid by ``data/drafters.csv``: one added since the fit; a file that does
    not load raises, naming it). None: no card has the name. A stored card's ``block_size``
    is the card here's where that gives one (:func:`drafter_cards`: it prices no pass).
    ``stored``: the fit's stored cards as the caller parsed them, not parsed again."""
    from ddtree_bayes.core.drafters import card_named, stored_cards

    # (the stored cards parsed once: drafter_cards parsed them again to find the same card)
    if stored is None:
        stored = stored_cards(draws.meta["model"].get("drafter_cards", ()))
    mine = card_named(stored, name)
    if mine is None:
        return card_named(here_drafters(draws), name)
    return _with_blocks_here((mine,), _cards_here(draws))[0]


def no_drafter(draws: Fit, model: str | None, method: str, cards: tuple) -> str | None:
    """Why nobody can run ``model``'s ``method`` (model None: the fit's first row's): no
    drafter card of ``cards`` (:func:`drafter_cards`) serves it and the fit measured that
    method for no row of that model under any of its deployment cards
    (:func:`~ddtree_bayes.engine.target_models.deployments_of_one_model`, whose measured
    group an answer carries). None: it is autoregressive, measured, or has a drafter."""
    from ddtree_bayes.core.drafters import drafter_for
    from ddtree_bayes.core.drafters import serves as card_serves
    from ddtree_bayes.engine.target_models import deployments_of_one_model

    if method == AR_METHOD:
        return None
    rows = draws.measurements.rows
    model = model or (rows[0].model if rows else None)
    if model is None or any(r.method == method and deployments_of_one_model(draws, r.model, model)
                            for r in rows):
        return None
    # (a default card: one a row names only, default no, prices no answer without --drafter)
    if drafter_for(cards, model, method) is not None:
        return None
    named = sorted({c.drafter for c in cards if card_serves(c, model, method)})
    if named:   # (cards only rows name: a drafter to run it with, asked by name)
        return (f"no default drafter card serves {model}'s {method} and the fit measured none: "
                f"only cards that rows name serve it ({', '.join(named)}), and a question "
                f"without --drafter prices a generic {method} drafter: ask --drafter "
                + (named[0] if len(named) == 1 else "one of them"))
    # the methods the model's own cards serve (an EAGLE-3 head just added with `card add
    # --target`, while the question asks the bundled DDTree): the question that can be asked
    serves: dict[str, list[str]] = {}
    for card in cards:
        for m in card.methods:
            if m != method and drafter_for((card,), model, m) is not None:
                serves.setdefault(m, []).append(card.drafter)
    other = ""
    if serves:
        listed = ", ".join(f"{m} ({', '.join(dict.fromkeys(serves[m]))})" for m in sorted(serves))
        other = (f"; {model}'s drafter cards serve {listed}: ask --method "
                 + " or ".join(sorted(serves)))
    return (f"no drafter card serves {model}'s {method} and the fit measured none: "
            f"there is no drafter to run it with (`ddtree-bayes card add` one{other})")


def drafter_gap_warnings(draws: Fit, asked: Iterable[tuple[str | None, str]], *,
                         here: bool = True, drafter: str | None = None) -> list[str]:
    """predict's warning that a question's (model, method) has no drafter to run it with
    (:func:`no_drafter`, as ``next`` leaves such a candidate out): its answer prices a
    drafter nobody has. ``here``: also count the cards of ``data/drafters.csv`` here.
    ``drafter``: the question's ``--drafter``, a card that serves it (:func:`with_drafter`
    refuses one that does not): nothing to warn of."""
    if drafter is not None:
        return []
    cards = drafter_cards(draws, here)
    return list(dict.fromkeys(w for model, method in asked
                              if (w := no_drafter(draws, model, method, cards)) is not None))


def failures(meta: dict) -> str:
    """Why a fit failed its convergence gates, as every message says it ("unconverged" when
    the fit recorded no reason: messages printed "()")."""
    return "; ".join(meta.get("failures") or ["unconverged"])


#: Sections of a priors file no fit reads: ``[acceptance_curve]`` (``optimize``, ``next`` and
#: the report's budget section read it from the file when asked; docs/model.md: "editing it
#: needs no refit"). An edit of them alone does not make a fit stale (``ignore_priors_sections``
#: of :func:`check_fit`, for every command that answers from a fit).
NOT_FITTED_PRIORS = ("acceptance_curve",)


def fitted_priors_same(text: str, stored: str,
                       sections: tuple[str, ...] = NOT_FITTED_PRIORS) -> bool:
    """Whether priors TOML ``text`` says what the fit that stored ``stored`` read: the same
    tables once ``sections`` (those no fit reads) are left out, whatever the comments and
    layout. False when either does not parse.

    >>> fitted_priors_same('a = 1\\n[acceptance_curve]\\nb = 2\\n', 'a = 1  # one\\n')
    True
    >>> fitted_priors_same('a = 2\\n', 'a = 1\\n')
    False
    """
    now = _without(text, sections)
    return now is not None and now == _without(stored, sections)


def check_fit(draws: Fit, *, allow_unconverged: bool = False, strict: bool = False,
              ignore_priors_sections: tuple[str, ...] = (), here: bool = True,
              drafters: bool = True) -> list[str]:
    """Refuse an unconverged fit (with ``allow_unconverged``, the first warning says it is one:
    the JSON output said nothing); return warnings (or raise with ``strict``) if the data or
    priors files changed since the fit. A priors file that differs from the fit's only in
    ``ignore_priors_sections`` (``[acceptance_curve]`` for ``optimize`` and ``next``: the fit
    does not use it) does not make the fit stale. ``here``: also compare the fit with the
    working directory's hardware table and cards (a command run here answers from the fit; the
    Python API, whose fit may come from any directory, checks only the files the fit names).
    The measurements are those of the file the fit recorded (``fit --data FILE``: FILE, not
    this folder's data/measurements.csv). ``drafters`` False leaves the drafter cards to the
    caller, which says only the changes that bear on its question (:func:`check_drafters`)."""
    meta = draws.meta
    if not meta["converged"] and not allow_unconverged:
        raise UnconvergedError(
            f"fit {meta['fit_id']} failed its convergence gates ({failures(meta)}) "
            "(fix: re-run `ddtree-bayes fit`, or pass --allow-unconverged to use it anyway)")
    unconverged = [] if meta["converged"] else [
        f"fit {meta['fit_id']} failed its convergence gates ({failures(meta)}) and is used "
        "anyway (--allow-unconverged): its draws need not be the posterior"]
    warnings = []
    for what in ("data", "priors"):
        path = Path(meta[what]["path"])
        if not path.exists():
            warnings.append(f"the {what} file this fit used ({path}) no longer exists")
            continue
        hashes, text = _read_as_stored(path)
        if meta[what]["sha256"] in hashes:
            continue
        if (what == "priors" and ignore_priors_sections
                and fitted_priors_same(text, draws.priors_toml, ignore_priors_sections)):
            continue
        if what == "data" and fitted_rows_same(text, draws.data_csv):
            continue   # (its rows' notes or sources alone: no fit reads them)
        # (new measurements: `update`, which reweights when it can; priors: a refit). Without
        # --data, update and fit read the default file: a fit of another is named with --data
        from ddtree_bayes.core.paths import data_flag

        flag = data_flag(path) if what == "data" else ""
        warnings.append(f"{path} changed since fit {meta['fit_id']}; " + (
            f"run `ddtree-bayes update{flag}` (or `fit{flag}`) to use it" if what == "data"
            else "re-run `ddtree-bayes fit` to use it"))
    if here:   # (the tables and cards here: a fit from elsewhere is not stale by them)
        warnings += hardware_changes(draws) + card_changes(draws, drafters=drafters)
    if warnings and strict:
        raise StaleArtifactError("; ".join(warnings) + STRICT_FIX)
    # A fit of another file (`fit --data FILE`) is compared with FILE, the path and hash it
    # recorded (above), not with data/measurements.csv here: predict names the file it was
    # made on in its header line (cli/predict.py), and warns only when FILE changed or is gone.
    # But a fit of the own file of another workspace (this one a copy of it) answers for this
    # folder's file, which `update` here reads: said when that file holds other measurements.
    copied = _copied_workspace_data(draws) if here else None
    if copied is not None:
        warnings.append(copied)
    # Likewise the priors: a fit of the default priors (the bundled file, or its workspace's
    # models/priors.toml) asked where `fit` would read another models/priors.toml
    other_priors = _priors_here_differ(draws, ignore_priors_sections) if here else None
    if other_priors is not None:
        warnings.append(other_priors)
    return unconverged + warnings   # (--strict refuses a stale fit, not one it was told to use)


def _copied_workspace_data(draws: Fit) -> str | None:
    """The warning of a fit made in another workspace (``meta["workdir"]``, a folder this
    one was copied from) on that workspace's own ``data/measurements.csv``, when the file of
    that name here holds other measurements than the fit's: the fit answers from the other
    folder's file, and ``update`` here reads this one (cli/update.py). None otherwise: a fit
    made here (of any file), one that does not record where it was made, no file here, or a
    copy of the fitted rows (:func:`holds_fitted_rows`: their notes and sources aside)."""
    from ddtree_bayes.core.paths import own_data_file
    from ddtree_bayes.engine.store import made_elsewhere

    meta = draws.meta
    mine = own_data_file("measurements.csv")
    made_on = Path(meta["data"]["path"])
    if mine is None or not made_elsewhere(meta, Path.cwd()):
        return None
    workdir = Path(meta["workdir"])
    if (made_on.resolve() != (workdir / "data" / "measurements.csv").resolve()
            or made_on.resolve() == mine.resolve()
            or holds_fitted_rows(draws, mine)):
        return None
    return (f"fit {meta['fit_id']} was made in {workdir} on its data/measurements.csv, not on "
            "data/measurements.csv here, which holds other measurements: it answers from that "
            "file's (run `ddtree-bayes update` to use this one's)")


def _priors_here_differ(draws: Fit, ignore_sections: tuple[str, ...]) -> str | None:
    """The warning of a fit made with the default priors (the bundled file, or
    ``models/priors.toml`` of the workspace it was made in) asked where ``fit`` reads another
    file, ``models/priors.toml`` here (written since, or a copied workspace's, edited), that
    says otherwise than the fit's stored priors (but for ``ignore_sections``): the fit answers
    from its own priors (the acceptance prior predict draws from among them) and the file it
    names is unchanged, so nothing else says it. None otherwise: the same file, a copy of the
    fitted text, or a fit told to use another file (``fit --priors OTHER``)."""
    from ddtree_bayes.core.paths import bundled, priors_file

    meta = draws.meta
    mine, made_with = priors_file(), Path(meta["priors"]["path"])
    if mine.resolve() == made_with.resolve():
        return None
    workdir = meta.get("workdir")
    if made_with.resolve() == bundled("priors.toml").resolve():
        made = "with the bundled default priors"
    elif workdir and made_with.resolve() == (Path(workdir) / "models" / "priors.toml").resolve():
        made = f"in {workdir} with its models/priors.toml"
    else:
        return None
    hashes, text = _read_as_stored(mine)
    if meta["priors"]["sha256"] in hashes or fitted_priors_same(text, draws.priors_toml,
                                                                 ignore_sections):
        return None
    there = ("the bundled default priors, which `fit` here reads and which say"
             if mine.resolve() == bundled("priors.toml").resolve()
             else "models/priors.toml here, which says")
    return (f"fit {meta['fit_id']} was made {made}, not {there} otherwise: it answers from the "
            "priors it was made with (re-run `ddtree-bayes fit` to use "
            + ("them)" if there.startswith("the bundled") else "this file's)"))


def check_kv_cache(dtype: str | None) -> str | None:
    """``dtype`` when it is a KV-cache dtype this knows (core/model_cards.py
    ``KV_CACHE_BITS``) or None; else QueryError naming them (the API's ``kv_cache=``: the CLI's
    ``--kv-cache`` refuses it at the flag).

    >>> check_kv_cache("fp8"), check_kv_cache(None)
    ('fp8', None)
    >>> try:
    ...     check_kv_cache("int4")
    ... except QueryError as err:
    ...     print(err)
    kv_cache 'int4' is not a KV-cache dtype this knows (fix: give one of bf16, fp16, fp8, \
q8_0, q4_0)
    """
    from ddtree_bayes.core.model_cards import KV_CACHE_BITS

    if dtype is not None and dtype not in KV_CACHE_BITS:
        raise QueryError(f"kv_cache {dtype!r} is not a KV-cache dtype this knows",
                         fix="give one of " + ", ".join(KV_CACHE_BITS))
    return dtype


def measured_on(draws: Fit, hardware: str, model: str | None
                ) -> list[tuple[str | None, str, int]]:
    """The measured systems (``split_label``: model, hardware, GPU count) of ``model`` on
    ``hardware``: its own pairs in a fit of several models, every system on ``hardware`` in a
    fit of one. The GPU count a question without ``--gpus`` takes comes from these first
    (:func:`resolve_scenario`), and the asked system's own default question is theirs when
    they hold one count (engine/question.py ``question_default``): one rule, so that no command
    answers ``--hardware X`` for another count than the default it was filled from.

    >>> from ddtree_bayes.engine.testing import multi_model_draws
    >>> d = multi_model_draws(2)
    >>> measured_on(d, "b300", "kimi-k2.6"), measured_on(d, "b300", "llama-3.1-8b-instruct")
    ([('kimi-k2.6', 'b300', 8)], [])
    """
    from ddtree_bayes.engine.target_models import is_multi

    multi = is_multi(draws)
    return [p for p in map(split_label, draws.measured_systems)
            if p[1] == hardware and (not multi or p[0] == model)]


def resolve_scenario(draws: Fit, *, hardware: str, gpus: int | None, engine: str, method: str,
                     block: int | None, budget: int | None, verify_tokens: int | None,
                     context_tokens: float | None, model: str | None = None,
                     concurrency: int = 1, kv_cache: str | None = None,
                     drafter: str | None = None, default_only: str | None = None) -> Scenario:
    """Fill in defaults (model, GPU count, verify tokens, context) and check the fit can answer.
    ``kv_cache``: the deployment's KV-cache dtype (``--kv-cache``; :attr:`Scenario.kv_cache`).
    ``drafter``: the ``--drafter`` asked (:func:`with_drafter` sets its card), whose trained
    block, not the default card's, bounds the block (:func:`trained_block_of`);
    ``default_only``: why the asking command cannot name one (its refusal's fix, there).

    A system without measurements is answered by hardware transfer (see
    :func:`transferred_parameters`) when its GPU is in the fit's hardware table and the
    priors have a ``[transfer]`` section. In a fit of several models, ``model`` names one
    (required), and a (model, system) pair without measurements is answered by the pair
    roofline (:mod:`ddtree_bayes.engine.target_models`).
    """
    from ddtree_bayes.engine import target_models

    model = target_models.resolve_model(draws, model)
    multi = target_models.is_multi(draws)
    systems = draws.measured_systems
    gpus_from: tuple[str, ...] = ()
    if gpus is None:
        parsed = [split_label(s) for s in systems]
        on_hw = [p for p in parsed if p[1] == hardware]
        # the model's own count on that GPU first (measured_on), then any model's; for an
        # unmeasured GPU the measured GPU count (the model's, in a fit of several), if there
        # is only one
        for candidates in (measured_on(draws, hardware, model), on_hw,
                           [p for p in parsed if p[0] == model], parsed):
            counts = sorted({p[2] for p in candidates})
            if counts:
                break
        if len(counts) > 1:
            raise gpu_counts_error(draws, model, hardware, counts)
        gpus = counts[0]
        if multi and model not in {p[0] for p in candidates}:
            gpus_from = tuple(sorted({f"{p[0]} on {p[1]}" for p in candidates}))
    measured = pair_label(model or "", system_label(hardware, gpus), multi) in systems
    if not measured:

        table = draws.hardware
        if hardware not in table:
            fix = unknown_hardware_fix(hardware, table)
            if as_name(hardware) not in table:   # a GPU added to the table takes a re-fit;
                fix += ", then re-fit"           # a name spelt in capitals does not
            raise QueryError(f"hardware {hardware!r} is neither measured ({', '.join(systems)}) "
                             "nor in the hardware table the fit stored", fix=fix)
        if not multi and not draws.priors.transfer:
            raise QueryError(f"{hardware} x{gpus} has no measurements and the priors have no "
                             "[transfer] section", fix="add one (see the bundled priors) and re-fit")
        check_weights_fit(draws, model, hardware, gpus)
    budget, verify_tokens = step_shape(method, block, budget, verify_tokens, draws.methods)
    if context_tokens is None:
        context_tokens = blank_context(draws)
    if context_tokens < 0:
        raise QueryError("--context must be >= 0", fix="give the context length in tokens")
    if concurrency < 1:
        raise QueryError(f"concurrency {concurrency} is below 1",
                         fix="give the number of streams decoded together, e.g. 1,4,8")
    # a block above the one the model's drafter was trained at is refused; with no block
    # given, that block bounds what a step emits (core/drafters.py trained_block)
    limit = drafter_limit(draws, model, method, block, budget, int(verify_tokens), drafter,
                          default_only=None if drafter is not None else default_only)
    return Scenario(hardware, gpus, engine, method, block, budget, int(verify_tokens),
                    float(context_tokens), measured, model, multi, limit, int(concurrency),
                    kv_cache=check_kv_cache(kv_cache), gpus_from=gpus_from)


def step_shape(method: str, block: int | None, budget: int | None,
               verify_tokens: int | None, methods) -> tuple[int | None, int]:
    """(budget, verify tokens) of a question's configuration: the tokens it verifies per step
    (:func:`verified`), autoregressive decoding's 1, its budget as its shape implies
    (:func:`checked_shape`) and at least 1 token, checked in that order; QueryError naming
    the flag to fix. The one reading of a configuration's shape for :func:`resolve_scenario`
    and ``track``'s checks of a query (workflows/living/tracking.py ``_shape``), which skipped
    the two checks between (``track --method ar --verify-tokens 2`` was tracked, and "the
    latest fit cannot answer it yet", where predict refuses it).

    >>> step_shape("ddtree", 16, 32, None, None)
    (32, 33)
    >>> step_shape("ar", None, None, 2, None)
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.QueryError: autoregressive decoding verifies 1 token (fix: drop \
--verify-tokens)
    """
    verify = verified(method, block, budget, verify_tokens, methods)
    if method == AR_METHOD and verify != 1:
        raise QueryError("autoregressive decoding verifies 1 token", fix="drop --verify-tokens")
    budget = checked_shape(method, block, budget, int(verify), methods)
    if verify < 1:
        raise QueryError("--verify-tokens must be >= 1", fix="give a positive whole number")
    return budget, int(verify)


def verified(method: str, block: int | None, budget: int | None, verify_tokens: int | None,
             methods) -> int:
    """The tokens a question's configuration verifies per step: ``verify_tokens`` when given,
    else derived (:func:`~ddtree_bayes.core.data.derive_verify_tokens`); QueryError when it
    cannot be (a tree method given only its depth, or a chain given nothing)."""
    if verify_tokens is not None:
        return verify_tokens
    derived = derive_verify_tokens(method, block, budget, methods)
    if derived is None:
        tree = always_tree(method, methods)   # (its block is the depth, not the size)
        raise QueryError(f"cannot tell how many tokens {method} verifies per step"
                         + (f": {method} verifies a tree, and --block is its depth" if tree
                            and block is not None else ""),
                         fix="give --budget (the tree's draft tokens) or --verify-tokens"
                         if tree else "give --budget (tree), --block (chain) or --verify-tokens")
    return derived


def memory_gb(draws: Fit, hardware: str) -> float | None:
    """GB of memory of one GPU of ``hardware`` by the fit's hardware table
    (:func:`~ddtree_bayes.core.data.table_memory_gb`)."""
    return table_memory_gb(draws.hardware, hardware)


def check_weights_fit(draws: Fit, model: str | None, hardware: str, gpus: int) -> None:
    """Refuse a system never measured whose GPUs cannot hold the model's weights (the card's
    total parameters x bytes per weight against the hardware table's ``memory_gb`` x GPUs; the
    KV cache and activations need more, so this is a floor): a step time there would be a number
    no deployment can reach. A measured system is proof enough; a GPU without ``memory_gb``,
    or a fit without a card, is not checked.

    >>> from types import SimpleNamespace as NS
    >>> card = {"model": "kimi-k2.6", "params_total_b": 1026.0, "params_active_b": 32.0,
    ...         "layers": 61, "experts": 384, "experts_topk": 8, "bytes_per_weight": 0.5,
    ...         "compute_dtype": "fp4", "source": "s"}
    >>> fit = NS(meta={"model": {"card": card}}, hardware={"rtx-4090": {"memory_gb": "24"}},
    ...          memo={})
    >>> try:
    ...     check_weights_fit(fit, None, "rtx-4090", 8)
    ... except QueryError as err:
    ...     print(err)
    kimi-k2.6's weights (513.0 GB: 1026B parameters at 0.5 bytes) do not fit in 8 x rtx-4090 \
(192.0 GB) (fix: --gpus 22 or more of them, or a GPU with more memory)
    """
    from ddtree_bayes.core.model_cards import more_gpus_fix

    card = fit_card(draws, model)   # (a fit before q_heads: the card here's, as warned)
    memory = memory_gb(draws, hardware)
    if not card or memory is None:
        return
    weights = card.weights_gb
    if weights > memory * gpus:
        need, have = gb_texts(weights, memory * gpus)
        raise QueryError(
            f"{card.model}'s weights ({need} GB: {card.params_total_b:g}B "
            f"parameters at {card.weights_bytes_per_weight:g} bytes) do not fit in {gpus} x "
            f"{hardware} ({have} GB)",
            fix=more_gpus_fix(card, memory))


def gpu_counts_error(draws: Fit, model: str | None, hardware: str, counts: list[int]
                     ) -> QueryError:
    """The refusal of a question without ``--gpus`` whose GPU the fit measured at several
    ``counts`` (elsewhere, for a GPU it never measured): the counts that could run, those whose
    memory holds the model's weights (:func:`check_weights_fit`, as ``--gpus`` is checked; a
    count measured on ``hardware`` is proof enough), or that none does."""
    from ddtree_bayes.engine import target_models

    multi = target_models.is_multi(draws)
    systems = draws.measured_systems

    def holds(g: int) -> bool:
        if pair_label(model or "", system_label(hardware, g), multi) in systems:
            return True
        try:
            check_weights_fit(draws, model, hardware, g)
        except QueryError:
            return False
        return True

    run = [g for g in counts if holds(g)]
    if run == counts:
        return QueryError(f"{hardware} could run on {listed(counts, 'or')} GPUs in this fit",
                          fix="say which with --gpus")
    from ddtree_bayes.core.model_cards import more_gpus_fix

    card, memory = fit_card(draws, model), memory_gb(draws, hardware)
    assert card is not None and memory is not None   # (else every count holds)
    need, each = gb_texts(card.weights_gb, memory)
    weights = f"{card.model}'s weights, {need} GB"
    if not run:
        return QueryError(f"{hardware} could run on none of the GPU counts this fit measured "
                          f"({listed(counts, 'and')}): {counts[-1]} x {each} GB cannot hold "
                          f"{weights}",
                          fix=more_gpus_fix(card, memory))
    return QueryError(f"{hardware} could run on {listed(run, 'or')} GPUs in this fit "
                      f"({listed([g for g in counts if g not in run])} x {each} GB cannot hold "
                      f"{weights})",
                      fix=f"--gpus {run[0]}" if len(run) == 1 else "say which with --gpus")


def unchecked_memory_warning(draws: Fit, sc: Scenario) -> str | None:
    """One line when a system never measured was answered without :func:`check_weights_fit`
    because its hardware row gives no usable ``memory_gb``: whether the weights fit is then
    unknown, and the answer may be for a deployment that cannot load the model.

    >>> from types import SimpleNamespace as NS
    >>> card = {"model": "kimi-k2.6", "params_total_b": 1000.0, "params_active_b": 32.0,
    ...         "layers": 61, "experts": 384, "experts_topk": 8, "bytes_per_weight": 0.5,
    ...         "compute_dtype": "fp4", "source": "s"}
    >>> fit = NS(meta={"model": {"card": card}}, hardware={"my-gpu": {"memory_gb": ""}})
    >>> print(unchecked_memory_warning(fit, NS(model=None, hardware="my-gpu", gpus=1,
    ...                                        measured=False)))
    my-gpu has no memory_gb in the hardware table: whether kimi-k2.6's weights (500.0 GB) fit \
in 1 x my-gpu was not checked (add its memory to data/hardware.csv)
    """
    from ddtree_bayes.core.model_cards import stored_card

    if sc.measured:
        return None
    card = stored_card(draws.meta.get("model", {}), sc.model)
    if card is None or memory_gb(draws, sc.hardware) is not None:
        return None
    return (f"{sc.hardware} has no memory_gb in the hardware table: whether {card.model}'s "
            f"weights ({gb_texts(card.weights_gb)[0]} GB) fit in {sc.gpus} x {sc.hardware} was not "
            "checked (add its memory to data/hardware.csv)")


def kv_cache_warning(draws: Fit, sc: Scenario, concurrency: int = 1) -> str | None:
    """One line when the KV cache of ``concurrency`` streams at the scenario's context (the
    card's ``kv_bytes_per_token`` x context x C) exceeds the GPUs' memory left after the
    weights: an engine would run fewer streams at once (or refuse the context), so the answer
    is for a deployment that cannot run as asked. A warning, not a refusal: the card's cache
    dtype may not be the engine's (an fp8 cache holds half a bf16 one: at C = 1 a cache that
    fits at half the card's bytes is said to, not to fit no engine); ``predict --kv-cache``
    (``sc.kv_cache``) says it, and the cache is counted at its bits over the card's. None when
    it fits, or when the card, the hardware table or the context cannot tell.

    >>> from types import SimpleNamespace as NS
    >>> card = {"model": "kimi-k2.6", "params_total_b": 1026.0, "params_active_b": 32.0,
    ...         "layers": 61, "experts": 384, "experts_topk": 8, "bytes_per_weight": 0.5,
    ...         "compute_dtype": "fp4", "source": "s", "kv_bytes_per_token": 35136,
    ...         "kv_cache_bits": 8.0, "q_heads": 64}
    >>> fit = NS(meta={"model": {"card": card}}, hardware={"rtx-pro-6000": {"memory_gb": "96"}})
    >>> sc = NS(model=None, hardware="rtx-pro-6000", gpus=8, context_tokens=131072.0)
    >>> kv_cache_warning(fit, sc, 8) is None      # 8 x 131072 x 35136 B = 36.8 GB of 255 GB
    True
    >>> print(kv_cache_warning(fit, NS(**{**vars(sc), "context_tokens": 1e8}), 1)[-140:])
    cache of half the card's bytes per token, 4 bits for the card's 8-bit cache, would need \
1756.8 GB); the answer is for a step that cannot run
    >>> print(kv_cache_warning(fit, sc, 64))
    at C = 64 and context 131072 the KV cache needs 294.7 GB (35136 bytes per token, the \
card's kv_bytes_per_token) but 8 x rtx-pro-6000 have 255.0 GB left after the weights (513.0 GB): \
an engine holding the caches at the card's bytes would run fewer streams at once; at half of \
them (4 bits for the card's 8-bit cache) the 64 streams need 147.4 GB, which fits: the answer is \
for such a deployment (--kv-cache says the deployment's cache)
    >>> print(kv_cache_warning(fit, sc, 128)[-100:])   # 589.5 GB, half 294.7 > 255.0
    513.0 GB): an engine would run fewer streams at once; the answer is for 128 streams decoded \
together
    """
    from ddtree_bayes.core.model_cards import kv_dtype_text

    card = fit_card(draws, sc.model)
    memory = memory_gb(draws, sc.hardware)
    if card is None or memory is None or not sc.context_tokens:
        return None
    need = card.kv_cache_gb(sc.context_tokens, concurrency)
    if need is None:
        return None
    dtype = getattr(sc, "kv_cache", None)
    if dtype is not None:
        need *= card.kv_share(dtype)
    weights = card.weights_gb
    left = memory * sc.gpus - weights
    if need <= left:
        return None
    needs, has, weighs, half = gb_texts(need, max(left, 0.0), weights, need / 2)
    halved = half_cache_text(card.kv_cache_bits)
    # (a cache that fits at half the card's bytes was said to fit no engine, beside its figure)
    what = (f"an engine holding the caches at the card's bytes would run fewer streams at "
            f"once; at half of them ({halved}) the {concurrency} streams need {half} "
            "GB, which fits: the answer is for such a deployment (--kv-cache says the "
            "deployment's cache)" if concurrency > 1 and dtype is None and need / 2 <= left else
            f"an engine would run fewer streams at once; the answer is for {concurrency} "
            "streams decoded together" if concurrency > 1 else
            "an engine holding the cache at the card's bytes cannot run this context on these "
            f"GPUs; at half of them ({halved}) it needs {half} GB, which fits: the "
            "answer is for such a deployment (--kv-cache says the deployment's cache)"
            if dtype is None and need / 2 <= left else
            "no engine can hold this context on these GPUs (a cache of half the card's bytes "
            f"per token, {halved}, would need {half} GB); the answer is for a step "
            "that cannot run" if dtype is None else
            f"no engine can hold this context on these GPUs at {dtype}; the answer is for a "
            "step that cannot run")
    how = card.kv_bytes_how + ("" if dtype is None else
                               ", " + kv_dtype_text(dtype, card.kv_cache_bits))
    return (f"at C = {concurrency} and context {plain_text(sc.context_tokens)} the KV cache needs "
            f"{needs} GB ({how}) but {sc.gpus} x {sc.hardware} have "
            f"{has} GB left after the weights ({weighs} GB): {what}")


def half_cache_text(card_bits: float | None) -> str:
    """What half a card's KV bytes per token is, for the memory warnings: fp8 for a 16-bit
    cache (a blank ``kv_cache_bits`` is taken as bf16's), half the bits for another (Kimi
    K2.6's card is an fp8 cache already: "fp8 for a bf16 card" misread it).

    >>> half_cache_text(None), half_cache_text(16.0), half_cache_text(8.0)
    ('fp8 for a bf16 card', 'fp8 for a bf16 card', "4 bits for the card's 8-bit cache")
    """
    from ddtree_bayes.core.model_cards import KV_CARD_BITS_ASSUMED

    bits = card_bits or KV_CARD_BITS_ASSUMED
    if bits == 16:
        return "fp8 for a bf16 card"
    return f"{bits / 2:g} bits for the card's {bits:g}-bit cache"


def unchecked_kv_warning(draws: Fit, sc: Scenario, concurrencies=(1,)) -> str | None:
    """One line when the card gives no ``kv_bytes_per_token`` (a proxy card, or one written by
    hand without it) and the question has a context: :func:`kv_cache_warning` cannot check
    whether the caches of the most streams asked fit beside the weights, and the read cap
    (engine/ceiling.py) counts the weights alone; said rather than passed over. None when the
    card, the hardware table or the context leave nothing unchecked."""
    from ddtree_bayes.core.model_cards import stored_card

    card = stored_card(draws.meta.get("model", {}), sc.model)
    memory = memory_gb(draws, sc.hardware)
    if card is None or memory is None or not sc.context_tokens:
        return None
    if card.kv_cache_gb(sc.context_tokens, 1) is not None:
        return None
    streams = max(concurrencies)
    left = gb_texts(max(memory * sc.gpus - card.weights_gb, 0.0))[0]
    return (f"{card.model}'s card gives no kv_bytes_per_token: whether the KV cache of "
            f"{streams} stream{'' if streams == 1 else 's'} at context "
            f"{plain_text(sc.context_tokens)} fits in the {left} GB {sc.gpus} x {sc.hardware} "
            "have left after the weights was not checked, and the memory-read cap counts the "
            "weights alone (a card from `ddtree-bayes card add` gives the bytes)")


def checked_shape(method: str, block: int | None, budget: int | None, verify_tokens: int,
                  methods) -> int | None:
    """A question's budget as its shape implies (:func:`~ddtree_bayes.core.methods.
    shaped_budget`), or QueryError naming the flag to fix. Autoregressive decoding drafts
    nothing: a block or budget asked of it is refused, as a data row's is (``predict --method
    ar --budget 32`` answered "ar, budget 32").

    >>> checked_shape("ar", None, 32, 1, None)
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.QueryError: autoregressive decoding (ar) drafts nothing: --budget 32 \
is no configuration of it (fix: drop --block/--budget, or give the speculative --method)
    """
    if method == AR_METHOD and (block is not None or budget is not None):
        flag = f"--block {block}" if block is not None else f"--budget {budget}"
        raise QueryError(f"autoregressive decoding ({AR_METHOD}) drafts nothing: {flag} is no "
                         "configuration of it",
                         fix="drop --block/--budget, or give the speculative --method")
    nothing = drafts_nothing(method, block, verify_tokens, methods)
    if nothing is not None:   # (a speculative step that drafts nothing: no engine runs it)
        problem, at = nothing
        raise QueryError(problem, fix=(
            "give --block 2 or more" if at == "block" else
            "drop --verify-tokens, or give 2 or more (the draft tokens plus one)")
            + ", or --method ar for plain decoding")
    shaped, wrong, column = shaped_budget(method, block, budget, verify_tokens, methods)
    if wrong is not None:
        raise QueryError(wrong, fix=(
            f"give --budget at most {chain_depth(method, block or 0, methods)}, or a method "
            "that verifies a tree" if column != "verify_tokens" else
            "drop --verify-tokens (it follows from --budget), or give the budget the "
            "configuration has" if budget is not None else
            f"drop --verify-tokens (a chain of --block {block} verifies {(shaped or 0) + 1}), "
            + ("give --budget N for a shorter chain (verifying N + 1), or a --method that "
               "verifies a tree" if never_tree(method, methods) else
               "or give the --budget of the tree it verifies")))
    return shaped


def cards_here(draws: Fit) -> dict:
    """The model cards of the working directory (data/models.csv, else the bundled ones),
    read once per fit object: what a fit stored before a card column existed borrows from
    (:func:`fit_card`); {} when they do not load (card_changes names
    the problem)."""
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import data_file

    memo = draws.memo
    if "cards_here" not in memo:
        try:
            memo["cards_here"] = load_model_cards(data_file("models.csv"))
        except InputError:
            memo["cards_here"] = {}
    return memo["cards_here"]


def weights_read(draws: Fit, sc: Scenario):
    """``(card, PairFeatures)`` of ``sc``'s model on its GPUs, or None without a card, the
    hardware row or its bandwidth (the card :func:`fit_card` gives: the read ceiling prices
    ``--kv-cache`` at its cache's bits)."""
    card = fit_card(draws, sc.model)
    if card is None or sc.hardware not in draws.hardware:
        return None
    f = read_features(card, draws.hardware[sc.hardware], sc.gpus)
    return None if f is None else (card, f)


def measured_step_ar(draws: Fit, sc: Scenario) -> np.ndarray | None:
    """The fit's draws of the M = 1 step of ``sc``'s measured system (ms); None for a system
    never measured."""
    systems = draws.meta.get("coords", {}).get("system", [])
    if not sc.measured or sc.pair not in systems or "step_ar_ms" not in draws.variables:
        return None
    return draws.variables["step_ar_ms"][:, systems.index(sc.pair)]


def read_floor_warning(draws: Fit, sc: Scenario, at_least: float = 0.05) -> str | None:
    """One line when the fit's M = 1 step of a measured system (pair) is shorter than reading
    the card's active weights at the full memory bandwidth in at least ``at_least`` of its
    draws: no deployment does that, so its AR answer there is too fast and P(> AR) too low. It
    happens where a pair's rows cannot tell its AR step from its speculative overhead (no AR
    row: Qwen3.8-27B on one RTX 3090, 12.9 ms against a 14.4 ms read, an exploratory pass),
    or where the card's bytes per weight are not the deployment's. None without a card."""
    found = weights_read(draws, sc)
    step = None if found is None else measured_step_ar(draws, sc)
    if found is None or step is None:
        return None
    card, read = found[0], found[1].stream_ms
    share = float(np.mean(step < read))
    if share < at_least:
        return None
    return (f"the fit's M = 1 step of {sc.pair} is shorter than {read_floor_text(card, read)} "
            f"in {share:.0%} of its draws (median {float(np.median(step)):.3g} ms): its "
            f"AR answers here are too fast and P(> AR) too low; {_read_floor_cause(draws, sc, read)}")


def _read_floor_cause(draws: Fit, sc: Scenario, read_ms: float, near: float = 0.05) -> str:
    """Why a measured pair's fitted M = 1 step falls under the weights' read, by its fastest
    AR row at one stream: none (its rows cannot tell the AR step from the speculative
    overhead), one itself within ``near`` of the read (the run read fewer bytes than the
    card's: a quantisation), or one slower (the fit's step does not follow it)."""
    ar = [(step, m) for m in draws.measurements.rows
          if m.method == AR_METHOD and m.concurrency == 1 and m.hardware == sc.hardware
          and m.gpus == sc.gpus and (sc.model is None or m.model == sc.model)
          and (step := m.step_ms) is not None]
    if not ar:
        return ("an AR row measured there pins it (its rows may not tell its AR step from "
                "its speculative overhead, or the card's bytes are not the deployment's)")
    step, fastest = min(ar, key=lambda sm: sm[0])
    row = (f"its AR row measured there (row {fastest.row}: {fastest.tok_s:.3g} tok/s, a "
           f"{step:.3g} ms step)")
    if step < read_ms * (1 + near):
        at = "shorter than" if step < read_ms else f"within {near:.0%} of"
        return (f"{row} is itself {at} that read, which no run reaches at the "
                "card's bytes: the deployment read fewer (a quantisation); give it its own "
                "card (`card add --gguf FILE`, or --bytes-per-weight) and name it with --model")
    return (f"{row} is slower than that read: the fit's step does not follow it (check the "
            "pair's other rows)")


def node_warning(draws: Fit, sc: Scenario) -> str | None:
    """One line when a system never measured asks for more GPUs than one node holds
    (:data:`~ddtree_bayes.core.data.NODE_GPUS`) and than the fit measured on that GPU: the step
    prices them as one tensor-parallel group reading together over the node's interconnect,
    where across nodes the all-reduces cross the network, which nothing prices (a walkthrough:
    1024 x H200 answered 1308 tok/s, "transferred from b300x8 (same interconnect class)").

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> from types import SimpleNamespace as NS
    >>> d = point_mass_draws()
    >>> node_warning(d, NS(hardware="h200", gpus=8, measured=False)) is None
    True
    >>> print(node_warning(d, NS(hardware="h200", gpus=16, measured=False)))
    16 x h200 is more GPUs than one node holds (8): the answer prices them as one \
tensor-parallel group on one interconnect, reading together; across nodes the all-reduces cross \
the network, which the step model does not price (the fit never measured h200)
    >>> node_warning(d, NS(hardware="gb300", gpus=16, measured=False)) is None   # NVL72
    True
    """
    node = node_gpus(sc.hardware)
    if sc.measured or sc.gpus <= node:
        return None
    counts = sorted({gpus for _, hardware, gpus in map(split_label, draws.meta.get(
        "coords", {}).get("system", [])) if hardware == sc.hardware})
    if counts and sc.gpus <= counts[-1]:
        return None
    measured = (f"the fit measured {sc.hardware} on {', '.join(map(str, counts))} "
                f"GPU{'s' * (counts != [1])}"
                if counts else f"the fit never measured {sc.hardware}")
    return (f"{sc.gpus} x {sc.hardware} is more GPUs than one node holds ({node}): the "
            "answer prices them as one tensor-parallel group on one interconnect, reading "
            "together; across nodes the all-reduces cross the network, which the step model "
            f"does not price ({measured})")


def faster_than_measured_warning(draws: Fit, sc: Scenario, margin: float = 0.05) -> str | None:
    """One line when, in a fit of several models, a pair never measured gets an M = 1 step
    (median, from the pair roofline) more than ``margin`` shorter than a measured pair of the
    same model on as many GPUs of the same link class with at least its bandwidth: its GPUs
    read no faster, so the answer is optimistic. The pair roofline has no model or GPU offset
    (docs/model.md): an exploratory pass saw Kimi K2.6 on 8x H100 answered faster than the
    measured 8x H200. None otherwise."""
    from ddtree_bayes.core.pairs import is_fabric, split_label
    from ddtree_bayes.engine import target_models

    table = draws.hardware
    if sc.measured or not sc.multi or sc.hardware not in table:
        return None
    systems = draws.meta["coords"]["system"]
    # measured pairs of the model on as many GPUs of the link class, reading at least as fast:
    # their median M = 1 step
    peers = {(p, hw): float(np.median(draws.variables["step_ar_ms"][:, systems.index(p)]))
             for p in draws.measured_systems for m, hw, g in [split_label(p)]
             if m == sc.model and g == sc.gpus and hw in table
             and is_fabric(table[hw]) == is_fabric(table[sc.hardware])
             # (mem_bw_tb_s: a number in every row, load_hardware checks it)
             and float(table[hw]["mem_bw_tb_s"]) >= float(table[sc.hardware]["mem_bw_tb_s"])}
    if not peers:
        return None
    mine = float(np.median(target_models.pair_parameters(
        draws, sc, np.random.default_rng(0))[0]["step_ar_ms"]))
    (slowest, hw), theirs = max(peers.items(), key=lambda kv: kv[1])
    if mine >= theirs * (1 - margin):
        return None
    return (f"{sc.pair} was never measured: its M = 1 step from the pair roofline (median "
            f"{mine:.3g} ms) is shorter than the measured {slowest}'s ({theirs:.3g} ms), "
            f"though {hw} reads at least as fast on as many GPUs of the same link class: "
            "the pair roofline has no model or GPU offset, so this answer is likely optimistic; "
            f"an AR row measured on {sc.hardware} pins it")


def layer_split_warning(draws: Fit, sc: Scenario) -> str | None:
    """One line when ``sc`` asks llama.cpp on several GPUs of a system where the fit has no
    llama.cpp row: llama.cpp splits whole layers across GPUs by default (``--split-mode
    layer``), so at one stream the GPUs read in turn, while the step model (the pair roofline,
    or a measured pair's step, shared by its engines) has them read together as tensor
    parallelism does: the answer may be up to GPUs x too fast. None otherwise."""
    if sc.engine not in LAYER_SPLIT_ENGINES or sc.gpus <= 1:
        return None
    if any(m.engine == sc.engine and m.hardware == sc.hardware and m.gpus == sc.gpus
           and (sc.model is None or m.model == sc.model) for m in draws.measurements.rows):
        return None
    return (f"llama.cpp on {sc.gpus} GPUs: by default (--split-mode layer) each GPU holds whole "
            "layers and, at one stream, they read in turn, so their bandwidth does not add up; "
            f"this answer's M = 1 step has the {sc.gpus} GPUs read together, as tensor "
            "parallelism does (vLLM, SGLang, TensorRT-LLM), and may be up to "
            f"{sc.gpus}x too fast (less with --split-mode row); a llama.cpp row measured on "
            f"{sc.gpus} x {sc.hardware} pins it")


#: Engines that split a model across GPUs by whole layers, not by tensor parallelism
#: (:func:`layer_split_warning`); every other engine shards the attention heads.
LAYER_SPLIT_ENGINES = ("llama.cpp",)


#: Card columns a fit's stored card may predate (the key absent from it): only the memory and
#: tensor-parallel checks read them, and :func:`fit_card` takes them from the card here.
PREDATED_FIELDS = ("kv_cache_bits", "q_heads")


def fit_card(draws: Fit, name: str | None):
    """The card of model ``name`` as the fit stored it (None without one); the columns a card
    stored before they existed lacks (:data:`PREDATED_FIELDS`, the key absent) are those of the
    card of its name here (data/models.csv, else the bundled one) when that card is of the same
    network with the same KV heads and bytes per token: Kimi K2.6's cache is fp8 (a stored None
    read as bf16 would halve its bytes at ``--kv-cache fp8``), and a fit made before
    ``q_heads`` still warns of a GPU count its heads cannot be sharded over, and the
    weights-fit fix names the counts they can be (:func:`check_weights_fit`). One reader for
    every check of an old fit, so they borrow alike.

    >>> from types import SimpleNamespace as NS
    >>> from ddtree_bayes.core.model_cards import load_model_cards
    >>> from ddtree_bayes.core.paths import bundled
    >>> kimi = dataclasses.asdict(load_model_cards(bundled("models.csv"))["kimi-k2.6"])
    >>> old = {k: v for k, v in kimi.items() if k not in PREDATED_FIELDS}
    >>> fit = NS(meta={"model": {"card": old}}, memo={})
    >>> c = fit_card(fit, None); (c.kv_cache_bits, c.q_heads)     # the bundled card's
    (8.0, 64)
    >>> fit = NS(meta={"model": {"card": dict(old, layers=60)}}, memo={})
    >>> c = fit_card(fit, None); (c.kv_cache_bits, c.q_heads)     # another network: none
    (None, None)
    """
    from ddtree_bayes.core.model_cards import stored_card

    model = draws.meta.get("model", {})
    card = stored_card(model, name)
    if card is None:
        return None
    cards = model.get("model_cards") or {}
    raw = cards[name] if name in cards else model.get("card") or {}
    missing = [k for k in PREDATED_FIELDS if k not in raw]
    here = cards_here(draws).get(card.model) if missing else None
    if (here is None or not here.same_architecture(card)
            or (here.kv_heads, here.kv_bytes_per_token) != (card.kv_heads, card.kv_bytes_per_token)):
        return card
    return dataclasses.replace(card, **{k: getattr(here, k) for k in missing})


def tensor_parallel_warning(draws: Fit, sc: Scenario,
                            engines: Iterable[str] | None = None) -> str | None:
    """One line when ``sc``'s GPU count cannot be one tensor-parallel group of its model: the
    engines of ``engines`` (default: ``sc.engine``) that shard by tensor parallelism (all but
    :data:`LAYER_SPLIT_ENGINES`) split the attention heads evenly over the GPUs
    (core/model_cards.py ``tensor_parallel_rule``: Kimi K2.6's 64 heads on 3 GPUs), so a
    deployment on that many GPUs runs pipeline or expert parallelism, which the step model
    does not price: it prices the GPUs as one tensor-parallel group reading together. None on
    one GPU, for a system (model and GPU count) the fit measured, or when the card does not
    give its ``q_heads`` (unknown)."""
    from ddtree_bayes.core.model_cards import tensor_parallel_rule

    sharding = [e for e in dict.fromkeys(engines or (sc.engine,))
                if e not in LAYER_SPLIT_ENGINES]
    if not sharding or sc.gpus <= 1 or sc.measured:
        return None
    card = fit_card(draws, sc.model)
    rule = None if card is None else tensor_parallel_rule(card, sc.gpus)
    if rule is None:
        return None
    return (f"{sc.gpus} x {sc.hardware} in {', '.join(sharding)}: tensor parallelism {rule}; "
            f"a deployment on {sc.gpus} GPUs runs pipeline or expert parallel, which the step "
            "model does not price (it treats them as one tensor-parallel group)")


def max_context_warning(draws: Fit, sc: Scenario) -> str | None:
    """One line when ``sc`` asks a context longer than the model takes (its card's
    ``max_context_tokens``: the config's ``max_position_embeddings``, scaled RoPE included):
    such a deployment does not run as configured, and its answer extrapolates the context
    cost past any run. None when the card does not say (a blank ``max_context_tokens``, as
    some built-in cards of data/models.csv have; a hand-written card without the column)."""
    from ddtree_bayes.core.model_cards import stored_card

    card = stored_card(draws.meta.get("model", {}), sc.model)
    above = context_above_max(card, sc.context_tokens)
    if above is not None:
        return above + ", and the answer extrapolates its context cost past it"
    # a step's verified tokens take the positions after the context: a tree or chain whose
    # last one lies past the longest context (optimize --budgets 16,500000 asked M = 500,001
    # of a 262,144-token model) is no step any engine runs; AR (M = 1) is the context's case
    reach = step_reach_above_max(card, sc.context_tokens, getattr(sc, "verify_tokens", None))
    return (None if reach is None
            else reach + ", and the answer extrapolates the step's growth past it")


def borrowed_gpus_warning(sc: Scenario) -> str | None:
    """A question of a fit of several models without ``--gpus`` whose model has no rows on its
    GPU: the count came from other models' deployments (an 8B model asked on b300 took
    kimi-k2.6's x8 without a word, where add refuses another model's count).

    >>> from types import SimpleNamespace as NS
    >>> w = borrowed_gpus_warning(NS(model="llama-3.1-8b", hardware="b300", gpus=8,
    ...                              gpus_from=("kimi-k2.6 on b300",)))
    >>> print(w[:75])
    --gpus not given: x8 is the GPU count of kimi-k2.6 on b300, another model's
    >>> print(w[76:])
    deployment (llama-3.1-8b has no rows on b300); give --gpus for yours
    >>> borrowed_gpus_warning(NS(model="m", hardware="b300", gpus=8, gpus_from=())) is None
    True
    """
    if not sc.gpus_from:
        return None
    return (f"--gpus not given: x{sc.gpus} is the GPU count of {', '.join(sc.gpus_from)}, "
            f"another model's deployment ({sc.model} has no rows on {sc.hardware}); give "
            "--gpus for yours")


def memory_warnings(draws: Fit, sc: Scenario, concurrencies=(1,)) -> tuple[str, ...]:
    """What the card and the GPUs' memory say of ``sc`` at each concurrency: a context longer
    than the model takes (:func:`max_context_warning`), the weights-fit check that
    could not be made (:func:`unchecked_memory_warning`), a KV cache that does not fit
    (:func:`kv_cache_warning`), a fitted step faster than the memory can stream the
    weights (:func:`read_floor_warning`), a pair never measured answered faster than a
    measured one that reads at least as fast (:func:`faster_than_measured_warning`),
    more GPUs than one node holds (:func:`node_warning`), a GPU count taken from other
    models' rows (:func:`borrowed_gpus_warning`);
    ``predict``, ``next`` and ``optimize`` say the same (with engine/structure.py's
    ``amd_overhead_warning``, which needs the groups the fit learned)."""
    notes = (max_context_warning(draws, sc), unchecked_memory_warning(draws, sc),
             read_floor_warning(draws, sc), faster_than_measured_warning(draws, sc),
             node_warning(draws, sc), borrowed_gpus_warning(sc),
             unchecked_kv_warning(draws, sc, concurrencies))
    return tuple(w for w in notes if w is not None) + tuple(
        w for c in concurrencies if (w := kv_cache_warning(draws, sc, c)) is not None)


def with_drafter(draws: Fit, sc: Scenario, name: str, prefix: str = "",
                 card: DrafterCard | None = None) -> Scenario:
    """``sc`` asked with the drafter card ``name`` (``predict --drafter``): the fit's stored
    card of that name, else the one here (:func:`named_drafter`: a card added after the fit
    counts); ``card``: that card as the caller looked it up (optimize's acceptance-file rows),
    not looked up again. It must serve the scenario's method for its target model, in a fit
    of the structured step (whose drafter passes cost a multiple of their roofline)."""
    from ddtree_bayes.core.drafters import serves, stored_cards

    model = draws.meta["model"]
    if sc.method == AR_METHOD:
        raise QueryError(prefix + "--drafter: an autoregressive step drafts nothing",
                         fix="drop --drafter, or ask a speculative --method")
    if model.get("step_form") != "structured":
        raise QueryError(prefix + "--drafter needs a fit of the structured step (its drafter "
                         "passes are priced from their roofline)",
                         fix="refit with --step-form structured")
    # (the stored cards parsed once: for the card, and for a refusal's suggestions)
    stored = stored_cards(model.get("drafter_cards", ())) if card is None else None
    card = card if card is not None else named_drafter(draws, name, stored)
    target = sc.model or model["card"]["model"]
    if card is None:
        cards = {c.drafter: c for c in stored or ()}
        cards |= {c.drafter: c for c in here_drafters(draws)}
        fits = sorted(c.drafter for c in cards.values()
                      if serves(c, target, sc.method))
        # card add makes EAGLE-3 heads' cards and separate draft models' (--target) and a
        # target's own MTP layers'
        how = (f"`ddtree-bayes card add --hf-config HEAD/config.json --target {target}`"
               if sc.method == "eagle3" else
               f"`ddtree-bayes card add --hf-config {target}'s own config.json --name "
               f"{target} --drafters-only`, when it declares MTP layers" if sc.method == "mtp" else
               f"`ddtree-bayes card add --hf-config DRAFT/config.json --target {target}` (or "
               "--gguf DRAFT.gguf)" if sc.method == "draft-model" else
               "a row of data/drafters.csv by hand (docs/cli.md, card add)")
        # a name one case or letter off a known card: that card first
        lower = {c.lower(): c for c in cards}
        close = ([lower[name.lower()]] if name.lower() in lower else
                 [lower[c] for c in closest(name.lower(), lower, n=1)])
        said = f"did you mean {close[0]!r}? " if close else ""
        raise QueryError(prefix + f"no drafter card {name!r}",
                         fix=said + (f"use one of {', '.join(fits)}, or a" if fits else "a")
                         + f"dd its card: {how}")
    if sc.method not in card.methods:
        raise QueryError(prefix + f"drafter {name!r} serves {', '.join(card.methods)}, not "
                         f"{sc.method}",
                         fix="give the --method it drafts for" + stored_card_note(draws, name))
    if not serves(card, target, sc.method):
        raise QueryError(prefix + f"drafter {name!r} drafts for {card.target_model}, not "
                         f"{target}", fix="use a drafter trained for the target model"
                                          + stored_card_note(draws, name))
    # (this drafter's trained block, not the default card's: refused above it, and the bound
    # of what a step emits)
    limit = drafter_limit(draws, sc.model, sc.method, sc.block, sc.budget, sc.verify_tokens,
                          name, prefix)
    return dataclasses.replace(sc, drafter=card, accept_limit=limit,
                               drafter_named=drafter_asked(draws, sc.model, sc.method, name))


def row_scenario(draws: Fit, m) -> Scenario:
    """The scenario of a measured row ``m`` (a :class:`~ddtree_bayes.core.data.Measurement`):
    its configuration, context and concurrency, as every check of a row against a fit asks it
    (a row at C > 1 measures the C streams' total: ``accept x 1000 x C / step``), and the
    drafter card its ``drafter`` column names (as stored in the fit), whose roofline prices its
    drafter passes as the fit priced them and whose trained block bounds it (as ``add`` and
    fit's row check bound it, core/drafters.py ``row_block_problem``); a card the fit did
    not store (a new row ``update`` scores, naming a card added since the fit) is the one
    here, as ``predict --drafter`` prices it (:func:`with_drafter`), not the default card's
    roofline."""
    sc = resolve_scenario(draws, hardware=m.hardware, gpus=m.gpus, engine=m.engine,
                          method=m.method, block=m.block, budget=m.budget,
                          verify_tokens=m.verify_tokens, context_tokens=m.context_tokens,
                          model=m.model, concurrency=m.concurrency, drafter=m.drafter)
    return with_row_drafter(draws, sc, m)


def with_row_drafter(draws: Fit, sc: Scenario, m) -> Scenario:
    """``sc`` with the drafter card a measured row ``m``'s ``drafter`` column names (as
    :func:`row_scenario` asks it); ``sc`` itself for a row that names none, and in a fit that
    stores no drafter cards (the fraction form prices no drafter pass, and ``--drafter`` is
    refused there)."""
    model = draws.meta["model"]
    if m.drafter is None or "drafter_cards" not in model:   # (a fit pricing no drafter pass)
        return sc
    card = named_drafter(draws, m.drafter)
    return sc if card is None else dataclasses.replace(
        sc, drafter=card, drafter_named=drafter_asked(draws, sc.model, sc.method, m.drafter))


#: The methods tables of the priors texts parsed in this process (a fit's priors, once).
def accept_limit(draws: Fit, method: str, block: int | None, budget: int | None,
                 verify_tokens: int | None = None, trained_block: int | None = None
                 ) -> AcceptLimit:
    """What one step of this configuration can emit, by the fit's methods table
    (:func:`~ddtree_bayes.core.methods.max_accept`); ``verify_tokens`` None: derived;
    ``trained_block``: the block the drafter was trained at (:func:`trained_block_of`)."""
    if verify_tokens is None:
        verify_tokens = derive_verify_tokens(method, block, budget, draws.methods)
    return max_accept(method, block, budget, draws.methods, verify_tokens,
                      trained_block=trained_block)


def drafter_limit(draws: Fit, model: str | None, method: str, block: int | None,
                  budget: int | None, verify_tokens: int, drafter: str | None = None,
                  prefix: str = "", default_only: str | None = None) -> AcceptLimit:
    """What one step of a configuration can emit with its drafter: the fit's methods table's
    bound (:func:`accept_limit`) at the block the card ``drafter`` names (None: ``model``'s
    default card of ``method``) was trained at (:func:`trained_block_of`, which refuses a
    block above it; ``prefix`` and ``default_only`` as there). The one bound a scenario
    carries (:attr:`Scenario.accept_limit`), set by :func:`resolve_scenario` and, for the
    card ``--drafter`` names, :func:`with_drafter`."""
    trained = trained_block_of(draws, model, method, block, drafter, prefix,
                               default_only=default_only)
    return accept_limit(draws, method, block, budget, verify_tokens, trained)


def trained_block_of(draws: Fit, model: str | None, method: str, block: int | None,
                     drafter: str | None = None, prefix: str = "",
                     default_only: str | None = None) -> int | None:
    """The block ``model``'s (None: the fit's) ``method`` drafter was trained at, from its
    card's ``block_size`` (the card ``drafter`` names, else the model's default card; the
    cards here over the fit's stored ones, :func:`drafter_cards`; core/drafters.py
    ``trained_block``), or None when not known. A ``block`` above it is refused: one
    QueryError naming the drafter and the block it was trained at (a block-16 DFlash drafter
    asked at block 32 answered with an acceptance of 20, more than it emits per step).
    ``default_only``: why the asking command names no drafter (``track``): its fix asks for
    a default card trained at the block, and a fit again (core/drafters.py ``block_problem``)."""
    from ddtree_bayes.core.drafters import block_problem

    trained = drafter_trained_block(draws, model, method, drafter)
    if trained is None:
        return None
    if block is not None and block > trained[0]:   # (core's refusal, its words)
        problem = block_problem(drafter_cards(draws), str(priced_target(draws, model)), method,
                                block, drafter, default_only=default_only,
                                refit=default_only is not None)
        if problem is not None:
            raise QueryError(prefix + problem[0], fix=problem[1])
    return trained[0]


def drafter_trained_block(draws: Fit, model: str | None, method: str,
                          drafter: str | None = None) -> tuple[int, DrafterCard] | None:
    """The block a question's drafter was trained at, and its card: the card ``drafter``
    names, else the default card of ``model``'s (None: the fit's, :func:`priced_target`)
    ``method``, of the cards here over the fit's stored ones (:func:`drafter_cards`;
    core/drafters.py ``trained_block``). None: an AR step, a fit naming no target, no card,
    or its block not known. The one reading of it: the block refusal and the bound of what a
    step emits (:func:`trained_block_of`), the bound of an acceptance drawn from its prior
    (:func:`latent_acceptance`) and the refusal naming a card edited since the fit
    (:func:`edited_block`)."""
    from ddtree_bayes.core.drafters import trained_block

    target = priced_target(draws, model)
    if method == AR_METHOD or target is None:
        return None
    return trained_block(drafter_cards(draws), target, method, drafter)


def priced_target(draws: Fit, model: str | None) -> str | None:
    """The target model whose drafter a question's passes are priced for: ``model`` (the
    question's; a fit of several models names it), else the fit's model card's, else its
    rows' (None: a fit that stores neither)."""
    meta = draws.meta["model"]
    return model or (meta.get("card") or {}).get("model") or meta.get("target_model")


def drafter_asked(draws: Fit, model: str | None, method: str, name: str | None) -> str | None:
    """A drafter card's name as it keys a fit's rows (their acceptance groups, the
    configurations that anchor a query): None for none, or for the default card of ``model``
    (None: the fit's) and ``method`` (core/drafters.py ``drafter_for``, of the cards the fit
    stored: :func:`default_card`), whose rows may leave the column blank; else ``name``."""
    if name is None:
        return None
    default = default_card(draws, priced_target(draws, model), method)
    return None if default is not None and default.drafter == name else name


def default_card(draws: Fit, target: str | None, method: str):
    """The drafter card a question of ``target``'s ``method`` without ``--drafter`` is priced
    with: the default card of the cards the fit stored (core/drafters.py ``drafter_for``;
    a card added here since does not price it: :func:`drafter_card_changes` tells it), or
    None: a generic drafter of the method (no such card, no target). The one answer the
    pricing (engine/structure.py ``pricing_drafter``), the rows' drafter keys
    (:func:`drafter_asked`) and the notes naming the default drafter take; once per fit."""
    from ddtree_bayes.core.drafters import drafter_for, stored_cards

    memo = draws.memo.setdefault("default_cards", {})
    if (target, method) not in memo:
        stored = stored_cards(draws.meta["model"].get("drafter_cards", ()))
        memo[(target, method)] = (None if target is None else
                                  drafter_for(stored, target, method))
    return memo[(target, method)]


def configuration_rows(draws: Fit, sc: Scenario) -> list:
    """The fit's rows of the query's configuration (model, method, block, verify tokens; any
    system and drafter)."""
    return [r for r in draws.measurements.rows
            if r.method == sc.method and r.block == sc.block
            and r.verify_tokens == sc.verify_tokens
            and (sc.model is None or not sc.multi or r.model == sc.model)]


def other_drafters(draws: Fit, sc: Scenario) -> list[str]:
    """The drafters the fit's rows of the query's configuration (:func:`configuration_rows`)
    name in their ``drafter`` column, other than the one the query asks
    (:attr:`Scenario.drafter_named`), sorted: each has its own acceptance."""
    asked = sc.drafter_named
    return sorted({r.drafter for r in configuration_rows(draws, sc)
                   if r.drafter is not None and r.drafter != asked})


def other_drafters_note(draws: Fit, sc: Scenario, named: list[str],
                        accept_asked: bool = False) -> str:
    """What a question without ``--drafter`` says when the rows of its configuration name
    the drafters ``named`` (:func:`other_drafters`): the answer is the default drafter's, and
    which that is: the rows with a blank drafter column's; else the default card of the model
    and method (:func:`drafter_cards`), which no row ran; else nobody's (no row, no card: a
    generic drafter of the method). ``accept_asked``: the question gives ``--accept`` (said
    only when no row ran the answer's drafter): its drafter passes, not its acceptance, are
    what no row measured."""
    ask = (f"ask --drafter {named[0] if len(named) == 1 else 'NAME'} for "
           f"{'its' if len(named) == 1 else 'another'}")
    listed = f"drafter{'s' * (len(named) > 1)} {', '.join(named)}"
    own = "" if accept_asked else ", each with its own acceptance"
    priced = "this answer at the acceptance asked prices the drafter passes of"
    if any(r.drafter is None for r in configuration_rows(draws, sc)):
        return (f"the fit's rows of this configuration name the {listed} too, each with its "
                "own acceptance: this answer is the default drafter's (rows with a blank "
                f"drafter column); {ask}")
    target = priced_target(draws, sc.model)
    card = default_card(draws, target, sc.method)
    if card is not None:
        default = (f"{priced} the default drafter" if accept_asked else
                   "this answer is the default drafter's")
        return (f"the fit's rows of this configuration name only the {listed}{own}: "
                f"{default} (the card {card.drafter}, which no row of it measured); {ask}")
    return (f"the fit's rows of this configuration all name the {listed}, and no default "
            f"{sc.method} drafter card serves {target}: "
            f"{priced if accept_asked else 'this answer is of'} a drafter no row "
            f"measured and no card describes (a generic {sc.method} drafter); "
            + (f"ask --drafter {named[0]} for the measured one" if len(named) == 1 else
               "ask --drafter NAME for a measured one"))


def measured_acceptance(draws: Fit, sc: Scenario) -> tuple[float, int, str] | None:
    """The mean measured acceptance of the query's configuration and drafter
    (:attr:`Scenario.drafter_named`), how many rows it averages
    and where they were measured (:func:`~ddtree_bayes.core.data.measured_accept`'s rows: the
    same system and engine's, else the system's, else other systems'), by the fit's methods
    table; None when no such row has an accept_len."""
    found = measured_accept(draws.measurements.rows, model=sc.model if sc.multi else None,
                            method=sc.method, block=sc.block, budget=sc.budget,
                            verify_tokens=sc.verify_tokens, hardware=sc.hardware, gpus=sc.gpus,
                            engine=sc.engine, methods=draws.methods,
                            drafter=sc.drafter_named)
    if found is None:
        return None
    chosen, where = found
    return float(np.mean([r.accept_len for r in chosen])), len(chosen), where


def acceptance_prior(priors: PriorsConfig, sc: Scenario, drafter: str | None = None
                     ) -> AcceptancePrior | None:
    """The priors file's acceptance prior of a query's configuration (the first matching
    ``[[acceptance]]`` entry of ``drafter``, None: the default drafter's, as
    :class:`~ddtree_bayes.core.config.AcceptancePrior`), truncated at what a step can emit
    (``sc.limit``), or None when no entry matches."""
    entry = priors.acceptance_for(sc.method, sc.block, sc.verify_tokens, sc.model, drafter)
    return None if entry is None else entry.capped(sc.limit)


def latent_acceptance(draws: Fit, model: str | None, method: str, block: int | None,
                      verify_tokens: int, rng: np.random.Generator, drafter: str | None = None
                      ) -> tuple[np.ndarray, dict | None]:
    """Acceptance draws for a configuration whose acceptance is not given: the posterior of
    the fit's inferred acceptance group (rows with a blank accept_len of the same model,
    method, drafter, block and budget; ``drafter`` None: the rows that name none), aligned
    draw by draw with the other parameters, and that group (as stored in the fit); or, when
    the fit has no such group, draws from the group's prior (the priors file's
    ``[[acceptance]]`` entry or the default, bounded by the drafter's trained block) and
    None."""
    from ddtree_bayes.core import acceptance_latent as AL

    found = AL.find(draws.meta, model, method, block, verify_tokens, drafter)
    if found is not None:
        g, group = found
        return np.asarray(draws.variables[AL.NAME])[:, g], group
    from ddtree_bayes.core.sampling import prior_sample

    priors = draws.priors
    # (the drafter's trained block bounds the prior as it bounds --accept)
    trained = drafter_trained_block(draws, model, method, drafter)
    prior, _ = AL.group_prior(priors, method, block, verify_tokens - 1, verify_tokens, model,
                              drafter, None if trained is None else trained[0])
    return prior_sample(prior, draws.n_draws, rng), None


def row_acceptance(draws: Fit, m, rng: np.random.Generator) -> np.ndarray:
    """Acceptance draws of a measurement: its accept_len, or :func:`latent_acceptance`."""
    if m.accept_len is not None:
        return np.full(draws.n_draws, m.accept_len)
    return latent_acceptance(draws, m.model, m.method, m.block, m.verify_tokens, rng,
                             m.drafter)[0]

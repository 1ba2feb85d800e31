"""Measurement schema, loading and validation.

Every error names the file, the row (the line number an editor shows; the header is
row 1) and the column, and says how to fix it. Nothing here imports pandas or PyMC.
"""

from __future__ import annotations

import csv
import gc
import hashlib
import io
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from pathlib import Path
from typing import NoReturn

from ddtree_bayes.core import per_call
from ddtree_bayes.core.errors import DataError, InputError, QueryError, closest
from ddtree_bayes.core.methods import (
    AR_METHOD,
    AcceptLimit,
    MethodSpec,
    always_tree,
    chain_depth,
    max_accept,
    never_tree,
    shaped_budget,
)
from ddtree_bayes.core.pairs import (
    LEAST_BITS_PER_WEIGHT,
    LEAST_QUANTISATION,
    link_problem,
    pair_label,
)
from ddtree_bayes.core.tensor_cores import (
    COMPUTE_CAPABILITY_RE,
    PEAK_STEP_WHY,
    compute_capability_fix,
    needs,
    nvidia_cc_problem,
    peaks_out_of_order,
    peaks_too_far_apart,
    precisions_without_mma,
)

#: Columns of a measurement file, in order.
COLUMNS = ("model", "hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
           "accept_len", "context_tokens", "tok_s", "source", "notes")
#: Columns a measurement file may add (blank or absent: the default). ``concurrency``: the
#: streams decoded together (default 1); at C > 1 ``tok_s`` is the total output throughput of
#: the C streams, as ``vllm bench serve`` and SGLang ``bench_serving`` report it. ``drafter``:
#: the drafter card (data/drafters.csv or built in) the run drafted with, when it is not the
#: default card of its target model and method (blank: that card, or a generic drafter;
#: core/drafters.py ``row_drafter``); it keys the row's inferred acceptance and prices its
#: drafter passes.
OPTIONAL_COLUMNS = ("concurrency", "drafter")
#: (problem, fix) of an autoregressive row that names a drafter (here and core/drafters.py
#: ``drafter_problem``, which ``add --drafter`` asks).
AR_DRAFTER = ("an autoregressive row drafts nothing: its drafter is blank",
              "clear the drafter, or give the speculative method the run used")
#: What each numeric one of :data:`OPTIONAL_COLUMNS` reads as when blank or absent (a blank
#: ``drafter`` is the default card).
OPTIONAL_DEFAULTS = {"concurrency": 1.0}
#: Columns that must hold a value in every row. ``accept_len`` may be blank: an
#: autoregressive row then emits 1 token per step, a speculative row's acceptance is inferred
#: by the fit (a latent parameter per (model, method, drafter, block, budget);
#: core/acceptance_latent.py).
REQUIRED = ("model", "hardware", "gpus", "engine", "method", "tok_s", "source")
#: Columns that decide whether a row is valid apart from its result (tok_s) and its free text
#: (source must only be non-empty, notes is anything): rows that agree on these and pass
#: once are validated again only in tok_s and source (repeated runs of one configuration).
CONFIGURATION = ("model", "hardware", "gpus", "engine", "method", "block", "budget",
                 "verify_tokens", "accept_len", "context_tokens")
# AR_METHOD ("ar") lives with the methods table (core/methods.py); it is imported from here too.
#: Engine and method names: lowercase, so 'AR' is never silently a speculative method.
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._+-]*")
#: A GPU name may not end in ``x<digits>``: a system's label is ``<gpu>x<count>``, so
#: ``h100x2`` on 8 GPUs would read ``h100x2x8`` (and ``h100x2 x8``).
GPU_COUNT_SUFFIX = re.compile(r"x[0-9]+$")


def as_name(text: str) -> str:
    """``text`` as a name the data files take: lowercase, other characters as '-'.

    >>> as_name("B300"), as_name("RTX 4090 OC")
    ('b300', 'rtx-4090-oc')
    """
    return re.sub(r"[^a-z0-9._+-]+", "-", text.lower()).strip("-")


#: What a comma list with an empty item (``1,,4``, ``sglang,``) is told: refused, not dropped
#: (cli/args.py's list flags, optimize's ``parse_budgets``).
EMPTY_ITEM = "has an empty item (two commas in a row, or one at an end)"


#: The fix of a drafter name no card can have (``predict --drafter``, ``next --query``,
#: ``track add``, a tracked query read back): :func:`drafter_name_problem`.
DRAFTER_NAME_FIX = ("use a name from data/drafters.csv or the built-in cards, e.g. --drafter "
                    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")


def drafter_name_problem(value: object) -> str | None:
    """Why ``value`` cannot be a drafter card's name (which cards exist is the fit's to say):
    not text, empty, or padded with spaces; None for a name. The one rule of ``--drafter``'s
    flag (cli/args.py ``drafter_name``) and of a tracked query (``normalize_query``).

    >>> drafter_name_problem("a/b"), drafter_name_problem(" a"), drafter_name_problem("")
    (None, "is not a drafter card's name", "is not a drafter card's name")
    """
    if isinstance(value, str) and value.strip() and value == value.strip():
        return None
    return "is not a drafter card's name"


def check_drafter_name(value: object, prefix: str = "") -> None:
    """Refuse a drafter name no card can have (:func:`drafter_name_problem`) in the one
    wording of the library's questions (engine/question.py ``resolve``: ``predict(...,
    drafter="")``, ``next --query``'s parse) and of a tracked query: ``--drafter '' is not a
    drafter card's name`` with :data:`DRAFTER_NAME_FIX`, not a blank name's "no drafter card
    ''" nor, in a fit of the fraction step, "needs a fit of the structured step".

    >>> check_drafter_name("a/b")
    >>> try:
    ...     check_drafter_name("", "--query: ")
    ... except QueryError as err:
    ...     print(str(err).split(" (fix")[0])
    --query: --drafter '' is not a drafter card's name
    """
    problem = drafter_name_problem(value)
    if problem is not None:
        raise QueryError(f"{prefix}--drafter {value!r} {problem}", fix=DRAFTER_NAME_FIX)


def not_a_name(value: str) -> tuple[str, str]:
    """(problem, fix) for a ``value`` :data:`NAME_RE` refuses: lowercase it when that mends
    it, else a name it could be (accents dropped, other characters as '-').

    >>> not_a_name("SGLang")[1], not_a_name("sg lang")[1], not_a_name("\u00e9agle3")[1]
    ("write it in lowercase, e.g. 'sglang'", "write it with those only, e.g. 'sg-lang'", \
"write it with those only, e.g. 'eagle3'")
    """
    if NAME_RE.fullmatch(value.lower()):
        return f"{value!r} is not a lowercase name", f"write it in lowercase, e.g. {value.lower()!r}"
    plain = as_name(unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode())
    return (f"{value!r} is not a name (lowercase letters, digits and . _ + -)",
            "write it with those only" + (f", e.g. {plain!r}" if NAME_RE.fullmatch(plain) else ""))


def check_name(value: str, *, file: str | Path, row: int | None = None, column: str,
               error: type[InputError] | None = None) -> None:
    """Raise ``error`` (default :class:`DataError`) naming ``file``, ``row`` and ``column``
    with :func:`not_a_name`'s problem and fix when :data:`NAME_RE` refuses ``value``.

    >>> check_name("sglang", file="m.csv", row=2, column="engine")
    >>> try:
    ...     check_name("VLLM", file="m.csv", row=2, column="engine")
    ... except DataError as err:
    ...     print(err)
    m.csv, row 2, column 'engine': 'VLLM' is not a lowercase name (fix: write it in \
lowercase, e.g. 'vllm')
    """
    if not NAME_RE.fullmatch(value):
        problem, fix = not_a_name(value)
        raise (error or DataError)(problem, file=str(file), row=row, column=column, fix=fix)


#: The measurement columns no fit reads: free text, where a row came from and what it notes.
#: The likelihood, the predictive and every gate read none of them (a row's notes are read
#: only when its file is read: ``add --from-bench``'s result tag, refused twice in one file,
#: and an old import's prompt-only context, warned of by ``add`` and ``fit``), so an edit of
#: them alone leaves a fit's draws what they were: the fit is not stale
#: (:func:`fitted_rows_same`) and ``update`` does not refit (:meth:`Measurement.fitted_key`).
FREE_TEXT_COLUMNS = ("source", "notes")


def fitted_rows_same(text: str, stored: str) -> bool:
    """Whether the measurement file ``text`` says what the fit's ``stored`` text said but for
    its free text (:data:`FREE_TEXT_COLUMNS`): the same header and, row by row, the same
    cells of every other column, as written but for the blanks around them and blank lines,
    which the loader drops (``612`` and ``612.0`` differ here: a change of form, which
    ``update`` tells from a change of numbers). False for a file that does not parse as CSV.

    >>> head = "model,tok_s,source,notes\\n"
    >>> fitted_rows_same(head + "m,612,a.json,first run\\n", head + "m,612,a.json,\\n")
    True
    >>> fitted_rows_same(head + "m, 612 ,a.json,\\n \\n,,\\n,,,\\n", head + "m,612,a.json,\\n")
    True
    >>> fitted_rows_same(head + "m,613,a.json,\\n", head + "m,612,a.json,\\n")
    False
    """
    def cells(t: str) -> tuple[list[str], list[list[str]]] | None:
        try:
            rows = [[c.strip() for c in r] for r in csv.reader(io.StringIO(t))]
        except csv.Error:
            return None
        rows = [r for r in rows if r]
        if not rows:
            return [], []
        header = rows[0]
        # (a record of blanks only, of any width: a blank line to the loader, which skips it;
        # of the header's width too, as a spreadsheet saves the empty rows under a table)
        rows = [header, *(r for r in rows[1:] if any(r))]
        keep = [j for j, name in enumerate(header) if name not in FREE_TEXT_COLUMNS]
        return ([header[j] for j in keep] + [f"({len(header)} columns)"],
                [[r[j] if j < len(r) else "" for j in keep] + [str(len(r))] for r in rows[1:]])

    mine, theirs = cells(text), cells(stored)
    return mine is not None and mine == theirs


@dataclass(frozen=True)
class Measurement:
    """One validated measurement row (``row`` is its line number in the file)."""

    row: int
    model: str
    hardware: str
    gpus: int
    engine: str
    method: str
    block: int | None
    budget: int | None
    verify_tokens: int
    accept_len: float | None   # None: blank in the file, inferred by the fit
    context_tokens: float | None
    tok_s: float
    source: str
    notes: str
    concurrency: int = 1   # streams decoded together; tok_s is their total at C > 1
    #: the drafter card the run used (the ``drafter`` column); None: the default card of the
    #: model and method (core/drafters.py ``drafter_for``), or a generic drafter
    drafter: str | None = None

    def another_run(self, row: int, tok_s: float, source: str, notes: str) -> Measurement:
        """This configuration measured again: the same validated fields with another row,
        result, source and notes. Builds the instance directly (the dataclass ``__init__``
        of 14 frozen fields is the largest cost of loading 100,000 repeated runs)."""
        new = object.__new__(Measurement)
        object.__setattr__(new, "__dict__", {**self.__dict__, "row": row, "tok_s": tok_s,
                                             "source": source, "notes": notes})
        return new

    def key(self) -> tuple:
        """What makes two measurements identical: every parsed value except the row number
        (so ``612`` and ``612.0``, a blank and a derived verify_tokens, or a chain's blank
        budget and its depth, are the same)."""
        return tuple(v for k, v in self.__dict__.items() if k != "row")

    def fitted_key(self) -> tuple:
        """What a fit reads of the row: :meth:`key` without its free text
        (:data:`FREE_TEXT_COLUMNS`). Two rows of one fitted key are the same measurement to
        every fit (``update`` matches a fit's rows to the file's by it: a row whose notes
        alone were edited is neither removed nor new); ``add`` still tells repeats apart by
        their notes (:meth:`key`)."""
        return tuple(v for k, v in self.__dict__.items()
                     if k != "row" and k not in FREE_TEXT_COLUMNS)

    @property
    def system(self) -> str:
        """The system the row ran on: GPU model and count, e.g. ``b300x8``."""
        return system_label(self.hardware, self.gpus)

    @property
    def is_speculative(self) -> bool:
        return self.method != AR_METHOD

    def context(self, default: float) -> float:
        """The context the row ran at, a blank one being the priors' ``default_context_tokens``
        (``default``): every reader of a row's context asks this, so none reads blank as 0
        where the fit reads it as the default.

        >>> m = Measurement(2, "kimi-k2.6", "b300", 8, "sglang", "ar", None, None, 1, 1.0,
        ...                 None, 150.0, "s", "")
        >>> import dataclasses
        >>> m.context(8192.0), dataclasses.replace(m, context_tokens=0.0).context(8192.0)
        (8192.0, 0.0)
        """
        return default if self.context_tokens is None else self.context_tokens

    def asked_context(self, default: float) -> float:
        """The context a question matches this row at: :meth:`context` rounded half up to
        whole tokens. ``--context`` takes whole tokens (no run measures part of one), while
        a serving benchmark's row holds the mean context of its requests (16384.4): a
        question at 16384 asks that row's configuration (its anchor, its measured acceptance).

        >>> m = Measurement(2, "kimi-k2.6", "b300", 8, "sglang", "ar", None, None, 1, 1.0,
        ...                 16384.4, 150.0, "s", "")
        >>> import dataclasses
        >>> m.asked_context(0.0), dataclasses.replace(m, context_tokens=16384.5).asked_context(0.0)
        (16384.0, 16385.0)
        """
        return float(math.floor(self.context(default) + 0.5))

    @property
    def accept_inferred(self) -> bool:
        """The row has no acceptance length: the fit infers it (a latent parameter)."""
        return self.accept_len is None

    @property
    def step_ms(self) -> float | None:
        """Measured time per decoding step: accept_len x C / tok_s (tok_s is the C streams'
        total; None without accept_len)."""
        if self.accept_len is None:
            return None
        if self.concurrency == 1:
            return self.accept_len / self.tok_s * 1000.0
        return self.accept_len * self.concurrency / self.tok_s * 1000.0


@dataclass(frozen=True)
class Measurements:
    """A validated measurement file."""

    path: str
    text: str
    rows: tuple[Measurement, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def model(self) -> str:
        """The target model (the first row's, in a file of several models)."""
        return self.rows[0].model

    @cached_property
    def header(self) -> tuple[str, ...]:
        """The file's header as written (its first line's fields; none for an empty text),
        parsed once: what a row written under it (``next``'s simulated rows) follows."""
        return tuple(next(csv.reader([self.text.splitlines()[0]]))) if self.text.strip() else ()

    @cached_property
    def models(self) -> tuple[str, ...]:
        """Distinct target models, sorted."""
        return tuple(sorted({r.model for r in self.rows}))

    @cached_property
    def multi_model(self) -> bool:
        """Does the file hold several target models (parameters per (model, system) pair)?"""
        return len(self.models) > 1   # (a file with no rows yet: one model to come)

    @property
    def systems(self) -> tuple[str, ...]:
        """Distinct systems, sorted."""
        return tuple(sorted({r.system for r in self.rows}))

    def pair(self, row: Measurement) -> str:
        """The label a row's parameters are indexed by: its system (``b300x8``) in a file of
        one model, its (model, system) pair (``qwen3-8b@h100x1``) in a file of several."""
        return pair_label(row.model, row.system, self.multi_model)

    @cached_property
    def pairs(self) -> tuple[str, ...]:
        """Distinct labels of :meth:`pair`, sorted (= :attr:`systems` for one model)."""
        if not self.multi_model:
            return self.systems
        return tuple(sorted({self.pair(r) for r in self.rows}))

    def to_frame(self):  # -> pandas.DataFrame
        """The rows as a pandas DataFrame (imports pandas)."""
        import pandas as pd

        return pd.DataFrame([r.__dict__ for r in self.rows])


def csv_line(header: Sequence[str], values: Mapping[str, object], newline: str = "\n") -> str:
    r"""One CSV record of ``values`` in ``header``'s column order (a missing column, or None,
    written empty), ended by ``newline``: what ``add`` appends to a measurement file, ``card
    add`` to a card table, and ``next`` to the data it simulates a row in.

    >>> csv_line(["model", "tok_s", "notes"], {"tok_s": 612.0, "notes": "a, b", "model": None})
    ',612.0,"a, b"\n'
    """
    buf = io.StringIO()
    csv.writer(buf, lineterminator=newline).writerow([values.get(h, "") for h in header])
    return buf.getvalue()


def system_label(hardware: str, gpus: int) -> str:
    return f"{hardware}x{gpus}"


def config_label(system: str, engine: str, method: str, verify_tokens: int,
                 context_tokens: float | None, concurrency: int = 1) -> str:
    """A measured configuration as the fit's check, the report and validate name it.

    >>> config_label("rtx-pro-6000x8", "vllm", "ar", 1, 0.0, 16)
    'rtx-pro-6000x8 vllm ar M=1 ctx=0 C=16'
    """
    ctx = "" if context_tokens is None else f" ctx={plain_text(float(context_tokens))}"
    streams = f" C={concurrency}" if concurrency != 1 else ""
    return f"{system} {engine} {method} M={verify_tokens}{ctx}{streams}"


def row_config_label(row: Mapping) -> str:
    """:func:`config_label` of a scored row (the fit's check, validate): a dict with
    ``system``, ``engine``, ``method``, ``verify_tokens``, ``context_tokens`` and, when not 1,
    ``concurrency``."""
    return config_label(row["system"], row["engine"], row["method"], row["verify_tokens"],
                        row["context_tokens"], row.get("concurrency", 1))


def derive_verify_tokens(method: str, block: int | None, budget: int | None,
                         methods: Mapping[str, MethodSpec] | None = None) -> int | None:
    """Tokens the target verifies per step: AR 1, a tree of budget B -> B+1 (any method that
    gives a budget), a chain of depth k (its block) -> k+1. A method that always verifies a
    tree (:func:`~ddtree_bayes.core.methods.always_tree`, by ``methods`` or the bundled
    table) and gives no budget cannot say: its block is the tree's depth, not its size. A chain
    whose block holds its anchor drafts ``block - 1`` (:func:`~ddtree_bayes.core.methods.chain_depth`).

    >>> derive_verify_tokens("ddtree", 16, 32), derive_verify_tokens("eagle3", 3, None)
    (33, 4)
    >>> derive_verify_tokens("eagle3", 8, 63), derive_verify_tokens("ddtree", 16, None)
    (64, None)
    >>> derive_verify_tokens("eagle2", 8, None), derive_verify_tokens("medusa", 4, None)
    (None, None)
    >>> derive_verify_tokens("dflash", 16, None)   # 15 drafts of a block of 16 and the anchor
    16
    """
    if method == AR_METHOD:
        return 1
    if budget is not None:   # the draft tokens verified: any tree (an EAGLE-3 tree of depth
        return budget + 1    # 8 and 63 nodes verifies 64), a chain written as block = budget
    if always_tree(method, methods):
        return None
    return None if block is None else chain_depth(method, block, methods) + 1


#: Where :func:`measured_accept` found rows measured elsewhere than the asked system.
ON_OTHER_SYSTEMS = "on other systems"


def measured_accept(rows: Iterable[Measurement], *, model: str | None, method: str,
                    block: int | None, budget: int | None, verify_tokens: int, hardware: str,
                    gpus: int, engine: str, methods: Mapping[str, MethodSpec] | None = None,
                    drafter: str | None = None) -> tuple[list[Measurement], str] | None:
    """The rows whose accept_len is the measured acceptance of a configuration (``model``,
    None: any; method, block, budget, verify tokens) and where they were measured (``on
    b300x8 sglang``, ``on b300x8 (other engines)``, :data:`ON_OTHER_SYSTEMS`): the rows of the
    same system and engine if any, else of the same system (the other engines': acceptance is
    the drafter's, target's and prompts', not the engine's), else of any system; None when no
    such row has an accept_len. A chain's budget may be written or blank (``methods``:
    whether the method is a tree; None, the bundled table's). ``drafter``: the rows' drafter
    column (None: the rows that name none, the default card's). predict's measured acceptance
    and a fit's default question both take their mean.

    >>> r = Measurement(2, "m", "h100", 1, "vllm", "eagle3", 3, None, 4, 3.0, None, 90.0, "s", "")
    >>> found = measured_accept([r], model=None, method="eagle3", block=3, budget=3,
    ...                         verify_tokens=4, hardware="a100", gpus=1, engine="vllm")
    >>> [m.row for m in found[0]], found[1]
    ([2], 'on other systems')
    """
    tree = always_tree(method, methods)
    mine = [r for r in rows
            if r.accept_len is not None and r.method == method and r.block == block
            and (not tree or r.budget == budget) and r.verify_tokens == verify_tokens
            and (model is None or r.model == model) and r.drafter == drafter]
    there = [r for r in mine if (r.hardware, r.gpus) == (hardware, gpus)]
    system = system_label(hardware, gpus)
    levels = [([r for r in there if r.engine == engine], f"on {system} {engine}"),
              (there, f"on {system} (other engines)"), (mine, ON_OTHER_SYSTEMS)]
    return next(((chosen, where) for chosen, where in levels if chosen), None)


def states_verify_tokens(record: Mapping[str, str],
                        methods: Mapping[str, MethodSpec] | None = None) -> bool:
    """Does a CSV record (a public sweep's row, text as read) say how many tokens its step
    verifies, by :func:`derive_verify_tokens`'s rule? Not an EAGLE-2 row that gives only its
    block (the tree's depth). A record whose block or budget is not a whole number counts as
    saying so: the reader that loads it names that cell.

    >>> states_verify_tokens({"method": "eagle2", "block": "8", "budget": ""})
    False
    >>> [states_verify_tokens({"method": m, "block": "8", "budget": ""}) for m in ("eagle3", "ar")]
    [True, True]
    >>> states_verify_tokens({"method": "eagle2", "block": "8", "verify_tokens": "64"})
    True
    """
    def cell(column: str) -> int | None:
        text = record.get(column, "").strip()
        return int(text) if text else None

    if record.get("verify_tokens", "").strip():
        return True
    try:
        block, budget = cell("block"), cell("budget")
    except ValueError:
        return True
    return derive_verify_tokens(record.get("method", "").strip(), block, budget,
                                methods) is not None


def underivable_verify_tokens(path: str, row: int, method: str,
                              methods: Mapping[str, MethodSpec] | None,
                              flags: bool = False) -> NoReturn:
    """Refuse a row (measurement, next's candidate) whose verify_tokens is blank and cannot be
    derived: a tree method needs its budget (its block is the tree's depth), a chain its block.
    ``flags``: the row's configuration came from ``add``'s flags (``--from-bench``, or the row
    given as flags), so the fix names the flags, not the CSV columns.

    >>> underivable_verify_tokens("m.csv", 4, "eagle3", None, flags=True)
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 4, column 'verify_tokens': verify_tokens is \
blank and cannot be derived (fix: pass --block or --verify-tokens)
    """
    need = "budget" if always_tree(method, methods) else "block"
    raise DataError("verify_tokens is blank and cannot be derived", file=path, row=row,
                    column="verify_tokens", fix=f"pass --{need} or --verify-tokens" if flags
                    else f"fill in verify_tokens or {need}")


def drafts_nothing(method: str, block: int | None, verify_tokens: int | None,
                   methods: Mapping[str, MethodSpec] | None = None) -> tuple[str, str] | None:
    """(the problem, the column at fault) of a speculative configuration that drafts nothing,
    which no engine runs: a block of 1 of a method whose block's position 0 is the anchor
    (DFlash, DDTree: block - 1 = 0 drafts, whatever tree budget is written), or a step that
    verifies 1 token (its draft tokens plus one: none); None for any other. Data rows,
    candidates and questions (engine/scenario.py ``checked_shape``) ask this one function.

    >>> drafts_nothing("ddtree", 1, 9)[1], drafts_nothing("ddtree", None, 1)[1]
    ('block', 'verify_tokens')
    >>> drafts_nothing("mtp", 1, 2), drafts_nothing("ar", None, 1)   # MTP's block is its depth
    (None, None)
    """
    if method == AR_METHOD:
        return None
    if block is not None and chain_depth(method, block, methods) < 1:
        return (f"{method} with block {block} drafts nothing: position 0 of its block is the "
                f"anchor, so a step drafts block - 1 = {block - 1} tokens", "block")
    if verify_tokens is not None and verify_tokens < 2:
        return (f"{method} verifying {verify_tokens} token per step drafts nothing: a "
                "speculative step verifies its draft tokens plus one", "verify_tokens")
    return None


def check_verify_tokens(path: str, row: int, method: str, block: int | None, budget: int | None,
                        verify_tokens: int, methods: Mapping[str, MethodSpec] | None) -> int | None:
    """A row's verify_tokens against its method, block and budget, as every file with the
    column checks it (measurements, next's candidates): an autoregressive row verifies 1
    token, and the shape must be one a configuration has
    (:func:`~ddtree_bayes.core.methods.shaped_budget`). Returns the budget the shape implies;
    DataError naming the column at fault otherwise.

    >>> check_verify_tokens("m.csv", 4, "ar", None, None, 2, None)
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 4, column 'verify_tokens': autoregressive \
rows verify 1 token, got 2 (fix: set verify_tokens to 1 or fix the method)
    """
    if method == AR_METHOD and verify_tokens != 1:
        raise DataError(f"autoregressive rows verify 1 token, got {verify_tokens}", file=path,
                        row=row, column="verify_tokens", fix="set verify_tokens to 1 or fix the "
                                                             "method")
    nothing = drafts_nothing(method, block, verify_tokens, methods)
    if nothing is not None:
        problem, at = nothing
        raise DataError(problem, file=path, row=row, column=at, fix=(
            "write the block the drafter proposes (2 or more), or method ar for plain decoding"
            if at == "block" else "write the tokens a step verifies (its draft tokens plus "
            "one, 2 or more), or method ar for plain decoding"))
    shaped, wrong, column = shaped_budget(method, block, budget, verify_tokens, methods)
    if wrong is not None:   # (a verify-tokens problem has the budget given, or a chain's)
        raise DataError(wrong, file=path, row=row, column=column, fix=(
            f"write the budget a step drafts (at most {chain_depth(method, block or 0, methods)}), "
            "or the method that verifies a tree" if column != "verify_tokens" else
            f"set verify_tokens to {(shaped or 0) + 1} (or blank), or fix the budget"
            if budget is not None else
            f"set verify_tokens to {(shaped or 0) + 1} (or blank), "
            + ("give the budget of a shorter chain, or a method that verifies a tree"
               if never_tree(method, methods) else "or give the budget of the tree it verifies")))
    return shaped


def check_misspelt_columns(path: str, header: Sequence[str], known: Sequence[str]) -> None:
    """Refuse a header cell that is not one of the ``known`` columns but is one the header
    lacks, misspelt: the same name in other case or with spaces (``Concurrency``), or at most
    two letters off it (``concurency``). A column the reader does not know is
    ignored, so a misspelt ``concurrency`` read every row as one stream, with exit 0. Other
    extra columns stay allowed and ignored: the public sweeps' ``sweep`` and ``derived``, and
    a known name with more to it (``accept_len_std``, ``max_concurrency`` at 1 (above it:
    :func:`check_stream_columns`), ``notes2``), and one
    that differs from a known name in its digits only (a hardware table's ``dense_fp16_tflops``
    beside the known ``dense_fp8_tflops``: another precision, not a typo).

    >>> check_misspelt_columns("m.csv", ["model", "accept_len_std", "sweep"], ("model", "accept_len"))
    >>> check_misspelt_columns("h.csv", ["dense_fp16_tflops"], ("dense_fp8_tflops",))
    >>> check_misspelt_columns("m.csv", ["model", "concurency"], ("model", "concurrency"))
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 1, column 'concurency': unknown column, read \
as no column (fix: did you mean 'concurrency'? rename it: a column this reader does not know \
is ignored)
    """
    absent = [name for name in known if name not in header]
    for col in header:
        if col in known:
            continue
        plain = col.strip().lower()
        for name in absent:   # (a "gpu" column beside "gpus" is another column)
            if plain == name or (name not in plain and _edits(plain, name) <= 2
                                 and _letters(plain) != _letters(name)):
                raise DataError("unknown column, read as no column", file=path, row=1,
                                column=col, fix=f"did you mean {name!r}? rename it: a column "
                                                "this reader does not know is ignored")


#: Column names that count streams decoded together, what the ``concurrency`` column holds
#: (compared whole, in lower case with ``-`` and spaces read as ``_``): a name that only
#: contains such a word counts something else (llama-bench's ``n_batch``, vLLM's
#: ``max_num_batched_tokens``, a run id ``batch``, ``cuda_streams``). A load generator's
#: ``users`` / ``clients`` are its streams too.
STREAM_COLUMNS = ("max_concurrency", "max_concurrent", "concurrency_level", "concurrent",
                  "num_concurrent", "concurrent_requests", "num_concurrent_requests",
                  "batch_size", "streams", "num_streams", "n_streams", "users", "num_users",
                  "n_users", "concurrent_users", "clients", "num_clients", "n_clients",
                  "concurrent_clients")


def stream_column(name: str) -> bool:
    """Whether a column ``name`` counts streams (:data:`STREAM_COLUMNS`).

    >>> stream_column("Max-Concurrency"), stream_column("n_batch"), stream_column("batch")
    (True, False, False)
    """
    return "_".join(name.strip().lower().replace("-", " ").split()) in STREAM_COLUMNS


def check_stream_columns(path: str, header: Sequence[str],
                         body: Sequence[tuple[int, Sequence[str]]]) -> None:
    """Refuse a row whose ``concurrency`` is not given (no such column, or its cell blank) but
    whose extra column named as counting streams (:func:`stream_column`) holds a whole number
    above 1: its tok_s is most likely the streams' total (what ``vllm bench serve
    --max-concurrency C`` reports), but the reader ignores the column and fits the row as one
    stream, each step C times too short. Blank, 1 or not a number stays allowed
    (:func:`check_misspelt_columns`' extra columns), and so does any count beside a
    concurrency cell written (it says what tok_s is).

    >>> check_stream_columns("m.csv", ["tok_s", "max_concurrency"], [(2, ["130", "1"])])
    >>> check_stream_columns("m.csv", ["tok_s", "n_batch"], [(2, ["130", "2048"])])
    >>> check_stream_columns("m.csv", ["tok_s", "concurrency", "max_concurrency"],
    ...                      [(2, ["900", "8", "8"])])
    >>> check_stream_columns("m.csv", ["tok_s", "max_concurrency"], [(2, ["900", "8"])])
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 2, column 'max_concurrency': max_concurrency \
8 but no concurrency column: the row is read as one stream (fix: if tok_s is the 8 streams' \
total, rename the column concurrency; if it is one stream's, rename or drop the column)
    >>> check_stream_columns("m.csv", ["tok_s", "concurrency", "max_concurrency"],
    ...                      [(2, ["900", "", "8"])])
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 2, column 'max_concurrency': max_concurrency \
8 but concurrency blank: the row is read as one stream (fix: if tok_s is the 8 streams' total, \
set concurrency to 8; if it is one stream's, set concurrency to 1)
    """
    named = [(i, col) for i, col in enumerate(header) if col not in COLUMNS and stream_column(col)]
    if not named:
        return
    given = header.index("concurrency") if "concurrency" in header else None
    for line, fields in body:
        if given is not None and given < len(fields) and fields[given].strip():
            continue   # (the row says how many streams its tok_s is of)
        for i, col in named:
            cell = fields[i].strip() if i < len(fields) else ""
            try:
                value = float(cell)
            except ValueError:
                continue
            if math.isfinite(value) and value > 1 and value == int(value):
                if given is None:
                    raise DataError(f"{col} {cell} but no concurrency column: the row is read as "
                                    "one stream", file=path, row=line, column=col,
                                    fix=f"if tok_s is the {cell} streams' total, rename the column "
                                        "concurrency; if it is one stream's, rename or drop the "
                                        "column")
                raise DataError(f"{col} {cell} but concurrency blank: the row is read as one "
                                "stream", file=path, row=line, column=col,
                                fix=f"if tok_s is the {cell} streams' total, set concurrency to "
                                    f"{int(value)}; if it is one stream's, set concurrency to 1")


#: What names a column as one user's (stream's) throughput beside ``tok_s``: a user or
#: stream word and a throughput word, in a name without ``total``, a word of spread or
#: share (a standard deviation or a ratio of it is no throughput) or of an extreme (a
#: maximum, a minimum, a percentile other than p50); compared in lower case with ``-``,
#: ``/`` and spaces read as ``_``.
_PER_USER_WORDS = ("user", "stream")
_THROUGHPUT_WORDS = ("tok_s", "tps", "throughput", "tokens_per_s", "tok_per_s")
_NOT_A_RATE_WORDS = ("total", "std", "stddev", "stdev", "sd", "var", "variance", "err",
                     "error", "sem", "cv", "ratio", "pct", "percent", "share", "speedup",
                     # an extreme of the per-user rates: the fastest request decoded nearly
                     # alone at the end of a run, no user's typical rate (p50 is the median)
                     "max", "maximum", "peak", "min", "minimum")
_PERCENTILE = re.compile(r"p(?!50$)\d+(\.\d+)?")
#: How far tok_s may fall below concurrency x a per-user column's value (a per-user mean
#: beside a total made of the median request's TPOT differs well within it).
#: Above it is no contradiction: a per-user rate that counts each request's wait for its first
#: token (trtllm-bench's ``output_throughput_per_user_tok_s``, "[w/ ctx]") is below the
#: decode-only 1000 / TPOT by 1 + TTFT / ((n - 1) x TPOT), without bound (a long prompt).
PER_USER_SLACK = 1.5


def per_user_column(name: str) -> bool:
    """Whether a column ``name`` holds one user's (stream's) decode throughput.

    >>> per_user_column("tok_s_per_user"), per_user_column("Per-User tok/s")
    (True, True)
    >>> per_user_column("per_user_ttft_ms"), per_user_column("total_tok_s_users")
    (False, False)
    >>> per_user_column("tok_s_per_user_std"), per_user_column("per_user_tps_ratio")
    (False, False)
    >>> per_user_column("TPS/user MAXIMUM"), per_user_column("p99_tps_per_user")
    (False, False)
    >>> per_user_column("p50_tps_per_user"), per_user_column("median_tok_s_per_user")
    (True, True)
    """
    plain = "_".join(name.strip().lower().replace("-", " ").replace("/", " ").split())
    parts = plain.split("_")
    return (not any(w in _NOT_A_RATE_WORDS or _PERCENTILE.fullmatch(w) for w in parts)
            and any(w in parts for w in _PER_USER_WORDS)
            and any(w in plain for w in _THROUGHPUT_WORDS))


def check_per_user_columns(path: str, header: Sequence[str],
                           body: Sequence[tuple[int, Sequence[str]]]) -> None:
    """Refuse a row whose tok_s is below ``concurrency`` times the value of its extra column
    named as one user's throughput (:func:`per_user_column`) by more than a factor
    :data:`PER_USER_SLACK`: tok_s equal to the per-user value at C = 8 is one stream's rate
    read as the 8 streams' total (each step priced 8x too long). A tok_s above C times it is
    kept: a per-user rate that counts the wait for the first token is below the decode-only
    rate tok_s is made of by any factor (so a total of 8 streams in a row read as one stream
    is not told from a long prompt's wait). A blank or unreadable cell is left to the other
    checks.

    >>> check_per_user_columns("m.csv", ["tok_s", "concurrency", "tok_s_per_user"],
    ...                        [(2, ["800", "8", "100"])])
    >>> check_per_user_columns("m.csv", ["tok_s", "concurrency", "tok_s_per_user"],
    ...                        [(2, ["100", "8", "100"])])
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 2, column 'tok_s_per_user': tok_s 100 is 1 x \
its tok_s_per_user 100, but concurrency is 8: tok_s at C > 1 is the C streams' total (8 x 100 = \
800) (fix: write the 8 streams' total in tok_s, or set concurrency to the streams the run decoded)
    """
    named = [(i, col) for i, col in enumerate(header) if col not in COLUMNS
             and col not in OPTIONAL_COLUMNS and per_user_column(col)]
    if not named or "tok_s" not in header:
        return
    j_tok = header.index("tok_s")
    j_conc = header.index("concurrency") if "concurrency" in header else None

    def number(fields: Sequence[str], j: int | None) -> float | None:
        cell = fields[j].strip() if j is not None and j < len(fields) else ""
        try:
            value = float(cell) if PLAIN_NUMBER.fullmatch(cell) else math.nan
        except ValueError:
            return None
        return value if math.isfinite(value) and value > 0 else None

    for line, fields in body:
        tok_s = number(fields, j_tok)
        conc_cell = fields[j_conc].strip() if j_conc is not None and j_conc < len(fields) else ""
        streams = number(fields, j_conc) if conc_cell else 1.0
        if tok_s is None or streams is None or streams != int(streams):
            continue
        for i, col in named:
            per_user = number(fields, i)
            if per_user is None:
                continue
            ratio = tok_s / per_user
            if ratio / streams >= 1 / PER_USER_SLACK:
                continue
            c, pu, tok = int(streams), fields[i].strip(), fields[j_tok].strip()
            head = f"tok_s {tok} is {ratio:.3g} x its {col} {pu}, but concurrency is {c}: "
            if c > 1:
                raise DataError(head + f"tok_s at C > 1 is the C streams' total ({c} x {pu} = "
                                f"{c * per_user:g})", file=path, row=line, column=col,
                                fix=f"write the {c} streams' total in tok_s, or set "
                                    "concurrency to the streams the run decoded")
            raise DataError(head + "tok_s at C = 1 is the one stream's decode rate, at least "
                            "its per-user rate", file=path, row=line, column=col,
                            fix="write the one stream's tok/s (1000 / TPOT) in tok_s")


def _letters(name: str) -> str:
    """A column name without its digits (``dense_fp16_tflops`` -> ``dense_fp_tflops``)."""
    return "".join(c for c in name if not c.isdigit())


def check_named_columns(path: str, header: Sequence[str], required: Sequence[str],
                        optional: Sequence[str], fix: str) -> None:
    """Refuse a header whose cell misnames a column, before the columns it leaves missing are
    (``toks`` is what to name, not the ``tok_s`` it leaves out): a required column in other
    case (:func:`missing_column`'s rename), then one misspelt (:func:`check_misspelt_columns`).

    >>> check_named_columns("m.csv", ["model", "toks"], ("model", "tok_s"), (), "add it")
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 1, column 'toks': unknown column, read as no \
column (fix: did you mean 'tok_s'? rename it: a column this reader does not know is ignored)
    """
    if header and header[0].startswith("#"):   # (read_csv_file strips header names)
        raise DataError("a comment line (it starts with '#'): the first line is the header",
                        file=path, row=1, fix="delete the line: a data file holds no comments")
    check_separator(path, header, required)
    for col in required:
        if col not in header and any(h.strip().lower() == col for h in header):
            missing_column(path, header, col, fix)
    check_misspelt_columns(path, header, (*required, *optional))


#: Separators a spreadsheet may save a "CSV" with, and their names.
OTHER_SEPARATORS = (("\t", "tabs"), (";", "semicolons"), ("|", "vertical bars"))


def check_separator(path: str, header: Sequence[str], required: Sequence[str]) -> None:
    """Refuse a header of one cell that splits on a tab, a semicolon or a vertical bar into
    names of which one is ``required``: the file was saved with that separator (a
    spreadsheet's "Text (tab delimited)", or its CSV in a locale whose decimal mark is a
    comma), and every column would be reported missing.

    >>> check_separator("m.csv", ["model;tok_s"], ("model", "tok_s"))
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 1: the header is separated by semicolons, \
not commas (fix: save the file as comma-separated CSV (a spreadsheet's "CSV (comma delimited)"): \
the reader takes commas only)
    """
    if len(header) != 1:
        return
    for separator, name in OTHER_SEPARATORS:
        cells = [c.strip() for c in header[0].split(separator)]
        if len(cells) > 1 and any(c in required for c in cells):
            raise DataError(f"the header is separated by {name}, not commas", file=path, row=1,
                            fix="save the file as comma-separated CSV (a spreadsheet's \"CSV "
                                "(comma delimited)\"): the reader takes commas only")


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions).

    >>> _edits("concurency", "concurrency"), _edits("note", "notes"), _edits("sweep", "source")
    (1, 1, 5)
    """
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def one_edit(a: str, b: str) -> bool:
    """Are ``a`` and ``b`` different by one edit: a character added, dropped or changed, or two
    neighbours swapped (``sglnag``, ``sglang``)?

    >>> one_edit("sglnag", "sglang"), one_edit("vlm", "vllm"), one_edit("vllm", "sglang")
    (True, True, False)
    """
    if a == b:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    return _edits(a, b) == 1


def misspelt_names(rows: Sequence[Measurement], declared: Mapping[str, set[str]], *,
                   only: set[int] | None = None) -> list[str]:
    """A line per engine or method name of ``rows`` that looks misspelt: not ``declared``
    (:meth:`~ddtree_bayes.core.config.PriorsConfig.declared_names`) and one edit
    (:func:`one_edit`) from a declared name or from a name more rows use (a tie: one the file
    names first), the closest (:func:`closest`, predict's "did you mean") named. Kept as
    written, it is fitted as another engine or method. ``only``: the rows (numbers) whose names
    are looked at (the rows ``add`` appends).

    >>> from types import SimpleNamespace as NS
    >>> rows = [NS(row=i, engine=e, method="ddtree") for i, e in
    ...         ((2, "vllm"), (3, "vllm"), (4, "sglnag"), (5, "vlm"))]
    >>> for line in misspelt_names(rows, {"engine": {"sglang"}, "method": {"ddtree"}}):
    ...     print(line.split("? ")[0])
    row 4: engine 'sglnag' is one edit from 'sglang' (declared in the priors): did you mean 'sglang'
    row 5: engine 'vlm' is one edit from 'vllm' (2 rows): did you mean 'vllm'
    """
    out = []
    for kind in ("engine", "method"):
        rows_of: dict[str, list[int]] = {}
        for r in rows:
            rows_of.setdefault(getattr(r, kind), []).append(r.row)
        known = declared.get(kind, set())
        # how likely a name is the one meant: declared, then used by more rows, then first
        rank = {name: (name in known, len(at), -at[0]) for name, at in rows_of.items()}
        for name, at in rows_of.items():
            if name in known or (only is not None and not only & set(at)):
                continue
            near = [c for c in closest(name, (known | set(rows_of)) - {name})
                    if one_edit(name, c) and (c in known or rank[c] > rank[name])]
            if not near:
                continue
            shown = [n for n in at if only is None or n in only]
            n = len(rows_of.get(near[0], ()))
            where = f"{n} row{'s' if n > 1 else ''}" if n else "declared in the priors"
            out.append(f"row{'s' if len(shown) > 1 else ''} {', '.join(map(str, shown))}: "
                       f"{kind} {name!r} is one edit from {near[0]!r} ({where}): did you mean "
                       f"{near[0]!r}? (as written it is fitted as another {kind})")
    return out


def read_csv_file(path: str, text: str | None = None, flag: str = "--data"
              ) -> tuple[str, list[str], list[tuple[int, list[str]]]]:
    """The file's text, its header, and (file line number, fields) per record. ``flag``: the
    flag that names the file, which a missing file's fix names."""
    try:
        if text is None:
            text = per_call.read_text(path, encoding="utf-8-sig")  # tolerate Excel's BOM
    except FileNotFoundError:
        raise DataError("file not found", file=path,
                        fix=f"pass an existing CSV with {flag}") from None
    except IsADirectoryError:
        raise DataError("is a folder, not a CSV file", file=path,
                        fix=f"pass a CSV file with {flag}") from None
    except PermissionError:
        raise DataError("cannot read: permission denied", file=path,
                        fix=f"make it readable (chmod u+r {path}), or give a copy you can "
                            "read") from None
    except OSError as err:   # (the message without the path: the line names it already)
        raise DataError(f"cannot read: {err.strerror or err}", file=path,
                        fix="check the path and the disk it is on") from None
    except UnicodeDecodeError as err:
        raise DataError(f"cannot read: {err}", file=path, fix="save it as UTF-8 CSV") from None
    text = text.removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""))
    with _no_gc():
        try:
            fields_list = list(reader)
        except csv.Error:   # (only one is possible here: a field over the csv module's limit)
            numbered_records(path, text)   # raises, naming the row where that field starts
            raise
        single = reader.line_num == len(fields_list)
        if not single or text.count('"') % 2:   # (an odd count: maybe a quote left open)
            check_quotes(path, text)
        if single:  # every record on one line: row = line
            records = list(enumerate(fields_list, 1))
        else:  # a quoted field spans lines: number each record by its first line
            records = numbered_records(path, text)
    if not records or not any(c.strip() for c in records[0][1]):
        if all(not any(c.strip() for c in fields) for _, fields in records):   # (blank lines)
            raise DataError("empty file", file=path,
                            fix=f"start with the header {','.join(COLUMNS)}")
        raise DataError("a blank line where the header should be", file=path, row=1,
                        fix="delete the blank lines above the header")
    header = [h.strip() for h in records[0][1]]
    check_unique_header(path, header)
    return text, header, records[1:]


def numbered_records(path: str, text: str) -> list[tuple[int, list[str]]]:
    """(first line, fields) of every record of CSV ``text`` (a quoted field may span lines).
    A field longer than the csv module's limit (131072 characters: a cell that long, or, far
    more often, a quote never closed, which reads the rest of the file as one field) is a
    :class:`DataError` naming the row where it starts, not the module's ``_csv.Error``.

    >>> numbered_records("m.csv", 'a,b\\n"x\\ny",1\\n2,3\\n')
    [(1, ['a', 'b']), (2, ['x\\ny', '1']), (4, ['2', '3'])]
    """
    reader = csv.reader(io.StringIO(text, newline=""))
    records: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for fields in reader:
            records.append((start, fields))
            start = reader.line_num + 1
    except csv.Error:
        limit = csv.field_size_limit()
        raise DataError(f"a field longer than {limit} characters starts in this row (a quote "
                        "(\") left open there reads the rest of the file as one field)",
                        file=path, row=start, fix="close the quote if one is open; a field "
                                                  f"holds at most {limit} characters") from None
    return records


#: The fix of a quote left open.
QUOTE_FIX = ("close the quote at the end of the field (a quote inside a quoted field is "
             "written twice: \"\")")


def check_quotes(path: str, text: str) -> None:
    """Refuse CSV ``text`` whose quoted field is never closed, or closes mid-field on a later
    line: its own closing quote left out, the next quote in the file taken for it. The csv
    module reads either without a word, the rows that follow becoming part of that field (a
    measurement lost, or ``add``'s new row swallowed). Called when a record spans lines or the
    quotes are odd in number; a quote inside an unquoted field (``5" screen``) stays as the
    csv module reads it.

    >>> check_quotes("m.csv", 'a,b\\n1,"x\\n')
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 2: a quote (") opened in this row is never \
closed: the rest of the file reads as one field (fix: close the quote at the end of the field \
(a quote inside a quoted field is written twice: ""))
    >>> check_quotes("m.csv", 'a,b\\n1,"x\\n2,"y"\\n')
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 2: a quoted field opened in this row runs on \
to line 3, where a quote (") ends it mid-field (fix: close the quote at the end of the field (a \
quote inside a quoted field is written twice: ""))
    >>> check_quotes("m.csv", 'a,b\\n1,"x\\ny"\\n2,5" screen\\n')
    >>> check_quotes("m.csv", 'a,b,c\\n1,"turbo" mode,"oops\\n2,3,4\\n')
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 2: a quote (") opened in this row is never \
closed: the rest of the file reads as one field (fix: close the quote at the end of the field \
(a quote inside a quoted field is written twice: ""))

    Read as the csv module reads a file (its default dialect, not strict): a field is quoted
    when its first character is a quote; a quote inside an unquoted field is a character,
    and so is one after a quoted field's closing quote on its own line (``"turbo" mode``, read
    ``turbo mode``), whose field then runs to the next comma unquoted. Lines holding no quote
    outside a quoted field are passed over whole. (A strict csv pass stopped at a quoted
    word's error and went on at the next line, missing a quote opened later on that line.)
    """
    lines = io.StringIO(text, newline="").readlines()   # (the lines the csv module reads)
    i = 0
    while i < len(lines):
        if '"' not in lines[i]:
            i += 1
            continue
        i = _record_end(path, lines, i)


def _record_end(path: str, lines: list[str], first: int) -> int:
    """The index of the line after the record starting at ``lines[first]``, read field by
    field as :func:`check_quotes` says; a quote left open or closed mid-field on a later line
    is a :class:`DataError` naming the record's first line (row ``first + 1``)."""
    i, line, pos = first, lines[first], 0
    while True:
        if line.startswith('"', pos):   # a quoted field: to its closing quote, maybe lines on
            pos += 1
            spans = False
            while True:
                q = line.find('"', pos)
                if q < 0:   # the line ends inside the quotes: the field goes on
                    i += 1
                    if i == len(lines):
                        raise DataError("a quote (\") opened in this row is never closed: the "
                                        "rest of the file reads as one field", file=path,
                                        row=first + 1, fix=QUOTE_FIX)
                    line, pos, spans = lines[i], 0, True
                elif line.startswith('"', q + 1):   # a doubled quote: one quote character
                    pos = q + 2
                else:
                    pos = q + 1
                    break
            if pos < len(line) and line[pos] not in ",\r\n":   # closed mid-field
                if spans:
                    raise DataError(f"a quoted field opened in this row runs on to line "
                                    f"{i + 1}, where a quote (\") ends it mid-field",
                                    file=path, row=first + 1, fix=QUOTE_FIX)
        # (the rest of the field, unquoted: its quotes are characters) to a comma or the end
        comma = line.find(",", pos)
        if comma < 0:
            return i + 1
        pos = comma + 1


def check_unique_header(path: str, header: Sequence[str]) -> None:
    """Refuse a header that names a column twice: a reader keeps one of the two columns (a
    dict reader the last) and drops the other's values without a word. Blank names (a
    spreadsheet's trailing commas) may repeat.

    >>> check_unique_header("c.csv", ["engine", "", "", "method"])
    >>> check_unique_header("c.csv", ["engine", "method", "engine"])
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: c.csv, row 1, column 'engine': appears twice in the \
header (fix: keep one of the two columns (the other's values would be dropped without a word))
    """
    seen: set[str] = set()
    for name in header:
        if name in seen and name:
            raise DataError("appears twice in the header", file=path, row=1, column=name,
                            fix="keep one of the two columns (the other's values would be "
                                "dropped without a word)")
        seen.add(name)


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small containers (a 100,000-row
    file makes over a million; the collections it would trigger find nothing to free and cost
    more than the parsing). Restores the previous state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_records(path: str | Path, text: str | None = None, flag: str = "--data"
                 ) -> tuple[str, list[str], list[tuple[int, list[str]]]]:
    """The raw CSV layer :func:`load_measurements` uses: the file's text, its header
    (stripped) and (row, fields) per record, rows numbered as an editor shows them."""
    return read_csv_file(str(path), text, flag)


def fields_problem(n: int, width: int, values: Sequence[str]) -> tuple[str, str]:
    """(problem, fix) of a record of ``n`` fields (``values``) under a header of ``width``:
    extra fields all empty are trailing commas; other extra fields, commas inside a field;
    too few, fields left out.

    >>> fields_problem(14, 13, ["x"] * 13 + [""])
    ('14 fields, header has 13, the last empty', 'drop the trailing comma')
    >>> fields_problem(15, 13, ["x"] * 13 + ["", " "])[1]
    'drop the 2 trailing commas'
    >>> fields_problem(14, 13, ["x"] * 14)[1]
    'quote fields that contain commas'
    >>> fields_problem(12, 13, ["x"] * 12)[1]
    'give every column of the header a field (blank between commas when empty)'
    """
    problem = f"{n} fields, header has {width}"
    if n < width:
        return problem, "give every column of the header a field (blank between commas when empty)"
    extra = n - width
    if all(not v.strip() for v in values[width:]):
        return (problem + (", the last empty" if extra == 1 else f", the last {extra} empty"),
                "drop the trailing comma" if extra == 1 else f"drop the {extra} trailing commas")
    return problem, "quote fields that contain commas"


def comment_problem(values: Sequence[str], header: Sequence[str] = ()
                    ) -> tuple[str, str] | None:
    """(problem, fix) of a data record that is a comment line (its first field starts with
    '#', which no name in a data file does), else None. A data file holds no comments: other
    CSV readers would take the line for a row. Under a ``header`` whose first column is free
    text (:data:`FREE_TEXT_COLUMNS`: a file may order its columns as it likes), a record of
    the header's fields is a row whose source or notes starts with '#' ("#3 of the sweep").

    >>> comment_problem(["# measured on 2026-12-01"])[0]
    "a comment line (it starts with '#'): a measurement file holds none"
    >>> comment_problem(["kimi-k2.6", "b300"]) is None
    True
    >>> comment_problem(["#3 of the sweep", "kimi-k2.6"], ["source", "model"]) is None
    True
    >>> comment_problem(["# measured on 2026-12-01"], ["source", "model"])[1]
    "delete the line, or put the text in a row's notes column"
    """
    if not values or not values[0].lstrip().startswith("#"):
        return None
    if header and header[0].strip() in FREE_TEXT_COLUMNS and len(values) == len(header):
        return None
    return ("a comment line (it starts with '#'): a measurement file holds none",
            "delete the line, or put the text in a row's notes column")


def missing_column(path: str, header: Sequence[str], column: str, fix: str) -> NoReturn:
    """Refuse a header without ``column``: a cell naming it in other case (``TOK_S``) is
    named, with the rename (names are lowercase), else ``fix``.

    >>> missing_column("m.csv", ["model", "TOK_S"], "tok_s", "add it")
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 1, column 'tok_s': missing column (fix: \
column names are lowercase: rename 'TOK_S' to 'tok_s')
    """
    cased = [h for h in header if h.strip().lower() == column]
    if cased:
        fix = f"column names are lowercase: rename {cased[0]!r} to {column!r}"
    raise DataError("missing column", file=path, row=1, column=column, fix=fix)


#: The most GPUs one measured system can have (as --gpus takes them).
MAX_GPUS = 1024
#: Bounds of the other integer configuration fields (the flags, the API and the files):
#: wide enough for any real system, narrow enough that no arithmetic downstream overflows.
MAX_BLOCK, MAX_BUDGET, MAX_CONCURRENCY = 4096, 1_000_000, 4096
#: The longest context a row or a question may give (as --context takes it: 2 ** 40 tokens).
MAX_CONTEXT_TOKENS = 2 ** 40

#: GPUs one node holds on one fabric: an HGX board (NVLink) or a PCIe server (8 cards).
NODE_GPUS = 8
#: A Grace-Blackwell rack (GB200/GB300 NVL72: the hardware rows named gb...) is one NVLink
#: domain of 72 GPUs (NVIDIA GB200 NVL72 product page: "72 Blackwell GPUs ... a single NVLink
#: domain").
RACK_GPUS = 72


def node_gpus(hardware: str) -> int:
    """GPUs one NVLink or PCIe domain of ``hardware`` holds (predict warns of a question on
    more, never measured; add and fit of a row on more: core/row_notes.py).

    >>> node_gpus("h200"), node_gpus("gb300")
    (8, 72)
    """
    return RACK_GPUS if hardware.startswith("gb") else NODE_GPUS


def check_context_tokens(value: float | None, text: str, *, file, row: int,
                         fix: str = "write the context length in tokens",
                         whole: bool = True, fraction: bool = False) -> None:
    """DataError (``context_tokens`` of ``file`` row ``row``) unless ``value`` is blank or 0
    to :data:`MAX_CONTEXT_TOKENS`; not a fraction of one token (unless ``fraction``: a saved
    fit's copy, read as it was fitted); and, with ``whole``, a whole number of tokens, as
    ``--context`` takes it (a candidate or design file's questions; a measurement row's context
    may be a mean: a serving benchmark's input tokens per request). ``text`` is the value as
    written. Every file with a context column (measurements, candidates, designs) bounds it
    here.

    >>> check_context_tokens(1e30, "1e30", file="m.csv", row=3)
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 3, column 'context_tokens': context_tokens \
must be 0 to 1099511627776 (2 ** 40), got 1e30 (fix: write the context length in tokens)
    """
    if value is not None and not 0 <= value <= MAX_CONTEXT_TOKENS:
        raise DataError(f"context_tokens must be 0 to {MAX_CONTEXT_TOKENS} (2 ** 40), got "
                        f"{text}", file=file, row=row, column="context_tokens", fix=fix)
    if whole and value is not None and not value.is_integer():
        raise DataError(f"context_tokens must be a whole number of tokens, got {text}",
                        file=file, row=row, column="context_tokens", fix=fix)
    if not fraction and value is not None and 0 < value < 1:
        raise DataError(f"context_tokens must be 0 or at least 1 token, got {text}",
                        file=file, row=row, column="context_tokens", fix=fix)


#: Every column a hardware table's reader knows (data/hardware.csv's header): a header cell
#: spelt like one it lacks is refused (:func:`check_named_columns`), not ignored.
HARDWARE_COLUMNS = ("hardware", "memory", "memory_gb", "mem_bw_tb_s", "interconnect",
                    "compute_capability", "source", "dense_bf16_tflops", "dense_fp8_tflops",
                    "dense_fp4_tflops", "dense_int8_tflops", "flops_source")
#: The hardware table's columns a table must have (the others may be left out).
HARDWARE_REQUIRED = ("hardware", "mem_bw_tb_s", "interconnect", "source")
#: Hardware-table columns that hold numbers (blank = unknown, except the bandwidth).
HARDWARE_NUMBERS = ("memory_gb", "mem_bw_tb_s", "dense_bf16_tflops", "dense_fp8_tflops",
                    "dense_fp4_tflops", "dense_int8_tflops")
#: Per-GPU ceilings no accelerator is near (the table's largest: 288 GB, 8 TB/s, 15,000
#: dense FP4 TFLOPS): a value above one is a unit slip (GB/s in the TB/s column, FLOPS for
#: TFLOPS, the node's total) and would price every step on that GPU wrongly.
HARDWARE_CEILINGS = {"memory_gb": 4096.0, "mem_bw_tb_s": 100.0, "dense_bf16_tflops": 100_000.0,
                     "dense_fp8_tflops": 100_000.0, "dense_fp4_tflops": 100_000.0,
                     "dense_int8_tflops": 100_000.0}
HARDWARE_UNITS = {"memory_gb": "GB per GPU", "mem_bw_tb_s": "TB/s per GPU (3.35 for an H100)"}
#: Per-GPU floors no GPU that runs a language model is under (the table's smallest: 16 GB,
#: 0.3 TB/s; a Jetson Nano has 4 GB at 0.0256 TB/s): a value below one is a unit slip (TB for
#: GB, PB/s or a per-pin rate for TB/s). ``hardware add`` checks the figures it is given.
HARDWARE_FLOORS = {"memory_gb": 1.0, "mem_bw_tb_s": 0.01}
#: Dense peak TFLOPS over bandwidth TB/s = FLOP per byte of memory traffic. The built-in GPUs
#: span 37 (H20, bf16) to 1,875 (GB300, fp4); the plausible range is wide around that (a
#: GPU without tensor cores sits near 20, a compute-heavy part with slow memory a few times
#: 1,875), while a slip of 1000 (PFLOPS or GFLOPS written as TFLOPS) leaves it: 2.25 for a
#: B300's 2,250 bf16 TFLOPS is 0.28 FLOP/B.
FLOP_PER_BYTE = (5.0, 20_000.0)


def hardware_slip(row: Mapping[str, str],
                  given: Sequence[str]) -> tuple[str, str, bool] | None:
    """The first figure of hardware row ``row`` a unit slip would explain: under
    :data:`HARDWARE_FLOORS`, or a dense peak whose FLOP per byte of bandwidth is outside
    :data:`FLOP_PER_BYTE`; only figures (or pairs) that involve a column in ``given`` are
    judged. Returns (the column to blame, why, whether it is too low), or None.

    >>> hardware_slip({"mem_bw_tb_s": "8", "dense_bf16_tflops": "2.25"}, ["dense_bf16_tflops"])
    ... # doctest: +NORMALIZE_WHITESPACE
    ('dense_bf16_tflops', '2.25 TFLOPS over 8 TB/s is 0.281 FLOP per byte of bandwidth,
    outside the plausible 5 to 20,000', True)
    """
    def num(col: str) -> float | None:
        try:
            value = float(row.get(col, "") or "nan")
        except ValueError:
            return None
        return value if math.isfinite(value) and value > 0 else None

    for col, floor in HARDWARE_FLOORS.items():
        value = num(col)
        if col in given and value is not None and value < floor:
            return col, (f"under the plausible {floor:g} to {HARDWARE_CEILINGS[col]:g} "
                         f"{HARDWARE_UNITS[col].split(' (')[0]}, less than any GPU that runs a "
                         "language model has"), True
    bw = num("mem_bw_tb_s")
    lo, hi = FLOP_PER_BYTE
    for col in HARDWARE_NUMBERS[2:]:
        peak = num(col)
        if bw is None or peak is None or not {col, "mem_bw_tb_s"} & set(given):
            continue
        ratio = peak / bw
        if not lo <= ratio <= hi:
            unit = "TOPS" if col == "dense_int8_tflops" else "TFLOPS"
            shown = f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.3g}"
            why = (f"{peak:g} {unit} over {bw:g} TB/s is {shown} FLOP per byte of "
                   f"bandwidth, outside the plausible {lo:,g} to {hi:,g}")
            if col in given:
                return col, why, ratio < lo
            return "mem_bw_tb_s", why, ratio > hi   # the bandwidth moves the ratio the other way
    return None


def load_hardware(path: str | Path, text: str | None = None, *, stored: bool = False,
                  records: tuple[str, list[str], list[tuple[int, list[str]]]] | None = None
                  ) -> dict[str, dict[str, str]]:
    """Read and validate one hardware table: ``{hardware: row}`` (from ``text`` if given).

    The table a run uses is the built-in one overlaid by the user's
    (:func:`ddtree_bayes.core.hardware_table.hardware_table`). ``stored``: the table a saved
    fit holds, read as it was fitted: an interconnect text that names neither PCIe nor an
    NVLink-class fabric, refused in tables written since, is read by the older rule (anything
    not PCIe is a fabric: :func:`~ddtree_bayes.core.pairs.is_fabric`). ``records``: the file
    already read by :func:`read_records` (its text, header and rows), not parsed again."""
    path = str(path)
    _, header, body = records if records is not None else read_csv_file(path, text)
    fix = "add it to the header (see data/hardware.csv)"
    if not stored:   # (a saved fit's table is read as it was fitted)
        check_named_columns(path, header, HARDWARE_REQUIRED,
                            [c for c in HARDWARE_COLUMNS if c not in HARDWARE_REQUIRED], fix)
    for col in HARDWARE_REQUIRED:
        if col not in header:
            missing_column(path, header, col, fix)
    table: dict[str, dict[str, str]] = {}
    for i, values in body:
        if not any(v.strip() for v in values):
            continue
        row = dict(zip(header, (v.strip() for v in values), strict=False))
        name = row.get("hardware", "")
        if not name:
            raise DataError("empty value", file=path, row=i, column="hardware", fix="name the GPU")
        if name in table:
            raise DataError(f"duplicate hardware {name!r}", file=path, row=i, column="hardware",
                            fix="keep one row per GPU")
        for col in HARDWARE_NUMBERS:
            value = parse_number(path, i, col, row.get(col, ""))
            if value is None and col == "mem_bw_tb_s":
                raise DataError("empty value", file=path, row=i, column=col,
                                fix="fill in the memory bandwidth per GPU in TB/s, with its source")
            if value is not None and value <= 0:
                raise DataError(f"must be > 0, got {row[col]}", file=path, row=i, column=col,
                                fix="write a positive number (leave a peak blank if unknown)")
            if value is not None and value > HARDWARE_CEILINGS[col]:
                raise DataError(f"{row[col]} is above {HARDWARE_CEILINGS[col]:g}, more than any "
                                "one GPU has", file=path, row=i, column=col,
                                fix=f"write it in {HARDWARE_UNITS.get(col, 'dense TFLOPS per GPU')}")
        if not NAME_RE.fullmatch(name):
            raise DataError(f"{name!r} is not a lowercase name", file=path, row=i,
                            column="hardware", fix=f"write it as --hardware takes it, e.g. "
                            f"{as_name(name)!r}")
        if not stored:   # (a saved fit's table is read as it was fitted)
            _check_tensor_cores(path, i, row)
        if not row.get("interconnect", "").strip():
            raise DataError("empty value", file=path, row=i, column="interconnect",
                            fix="say how the GPUs are linked (e.g. 'PCIe Gen5 x16' or 'NVLink5 "
                                "1.8 TB/s'): a step's all-reduces depend on it")
        problem = None if stored else link_problem(row["interconnect"])
        if problem is not None:
            raise DataError(f"{row['interconnect'].strip()!r} {problem[0]}", file=path, row=i,
                            column="interconnect", fix=problem[1])
        table[name] = row
    return table


def _check_tensor_cores(path: str, i: int, row: dict[str, str]) -> None:
    """A hardware row's peaks in order (fp4 >= fp8 >= bf16: an fp8 peak of 10 beside a bf16
    of 165 is a unit slip), its compute capability as the table writes it, and no fp8 or fp4
    peak a GPU of that capability has no tensor cores for (the rule ``hardware add`` applies:
    a hand-written row of an RTX 3090 with an fp8 peak priced an fp8 model's compute with
    it)."""
    slip = peaks_out_of_order(row)
    if slip is not None:
        wide, narrow = slip
        col = f"dense_{narrow}_tflops"
        raise DataError(f"{col} {row[col]} is below dense_{wide}_tflops "
                        f"{row[f'dense_{wide}_tflops']}: tensor cores multiply a narrower "
                        "precision at least as fast", file=path, row=i, column=col,
                        fix="write it in dense TFLOPS per GPU (not PFLOPS), or leave it blank")
    apart = peaks_too_far_apart(row)
    if apart is not None:
        wide, narrow, ratio, limit = apart
        col = f"dense_{narrow}_tflops"
        why = PEAK_STEP_WHY.format(n=narrow, w=wide, limit=limit)
        raise DataError(f"{col} {row[col]} is {ratio:.3g}x dense_{wide}_tflops "
                        f"{row[f'dense_{wide}_tflops']}: {why}", file=path, row=i, column=col,
                        fix="write dense TFLOPS at the accumulate mode inference GEMMs run at "
                            "(GeForce: FP32 accumulate), or leave it blank")
    cc = row.get("compute_capability", "").strip()
    if not cc:
        return
    if not COMPUTE_CAPABILITY_RE.fullmatch(cc):
        raise DataError(f"compute capability {cc!r} is not one the table can read", file=path,
                        row=i, column="compute_capability", fix=compute_capability_fix(cc))
    unknown = nvidia_cc_problem(cc)   # (the rule hardware add's --compute-capability takes)
    if unknown is not None:
        raise DataError(f"compute capability {unknown[0]}", file=path, row=i,
                        column="compute_capability", fix=unknown[1])
    for p in precisions_without_mma(cc):
        if p != "int8" and row.get(f"dense_{p}_tflops", "").strip():
            raise DataError(f"compute capability {cc} has no {p} tensor cores "
                            f"({needs(p, cc)})", file=path, row=i,
                            column=f"dense_{p}_tflops",
                            fix=f"leave dense_{p}_tflops blank ({p} weights then compute at the "
                                "fastest precision the GPU has), or correct compute_capability")


def table_memory_gb(table: Mapping[str, Mapping[str, str]], hardware: str) -> float | None:
    """GB of memory of one GPU of ``hardware`` by a hardware table, or None when the row gives
    no usable ``memory_gb`` (missing, blank, not a number, or not above 0; an unknown GPU).

    >>> table = {"a": {"memory_gb": "96"}, "b": {"memory_gb": ""}, "c": {}}
    >>> [table_memory_gb(table, h) for h in ("a", "b", "c", "d")]
    [96.0, None, None, None]
    """
    try:
        memory = float(table[hardware]["memory_gb"])
    except (KeyError, ValueError, TypeError):
        return None
    return memory if memory > 0 else None


def gb_texts(*values: float) -> tuple[str, ...]:
    """The GB figures of one memory message (weights, KV cache, memory left), each with one
    decimal, or with as many more as make two that differ read differently: whole GB printed
    "needs 3 GB ... have 3 GB left" for a cache that did not fit.

    >>> gb_texts(3.0409, 2.94, 16.06)
    ('3.0', '2.9', '16.1')
    >>> gb_texts(3.0278, 2.96, 16.06)      # one decimal reads 3.0 for both
    ('3.03', '2.96', '16.06')
    >>> gb_texts(500.0, 500.0)             # equal figures need no more digits
    ('500.0', '500.0')
    """
    texts: tuple[str, ...] = ()
    for digits in range(1, 7):
        texts = tuple(f"{v:.{digits}f}" for v in values)
        if len(set(texts)) == len(set(values)):
            break
    return texts


#: Bytes per weight of the smallest quantisation (core/pairs ``LEAST_BITS_PER_WEIGHT``,
#: llama.cpp's Q1_0: 1.125 bits): a row's model may be a quantisation of its card's checkpoint
#: (a GGUF Q4 run imported under the bf16 card), so the weights check of
#: :func:`weights_problem` assumes the smallest, not the card's bytes.
MIN_BYTES_PER_WEIGHT = LEAST_BITS_PER_WEIGHT / 8


def weights_problem(card, hardware: dict[str, dict[str, str]], m) -> tuple[str, str] | None:
    """A row whose GPUs cannot hold its model's weights even at the smallest quantisation in
    use (:data:`MIN_BYTES_PER_WEIGHT`; the card's total parameters against ``memory_gb`` x
    GPUs): most likely a slip in --gpus or --hardware (Kimi K2.6 on one H100 was appended); a
    run that offloads weights to the CPU is outside what the step model prices (weights read
    from GPU memory). (message, fix), or None when it fits or cannot be checked."""
    memory = table_memory_gb(hardware, m.hardware)
    least = None if card is None else card.params_total_b * MIN_BYTES_PER_WEIGHT
    if least is None or memory is None or least <= memory * m.gpus:
        return None
    need, have = gb_texts(least, memory * m.gpus)
    return (f"{m.model}'s {card.params_total_b:g}B parameters take {need} GB even at "
            f"{LEAST_BITS_PER_WEIGHT:g} bits per weight ({LEAST_QUANTISATION}): they do not "
            f"fit in {m.gpus} x {m.hardware} "
            f"({have} GB)",
            f"check the GPU count (at least {math.ceil(least / memory)} {m.hardware}; "
            f"{math.ceil(card.weights_gb / memory)} at the card's {card.weights_bytes_per_weight:g} "
            "bytes) and the hardware; a run that offloads weights to the CPU is outside what "
            "the step model prices")


def kv_cache_problem(card, hardware: dict[str, dict[str, str]], m) -> tuple[str, str] | None:
    """A row whose context no engine could hold: the KV cache of its streams (the card's
    ``kv_bytes_per_token`` x context x concurrency) exceeds all the GPUs' memory even at half
    the card's bytes (an fp8 cache for a bf16 one), the weights aside. ``predict`` warns of a
    context that does not fit beside the weights (engine/scenario.kv_cache_warning); a measured
    row is refused only when it cannot have run at all (a context of 10 ** 12 tokens was
    appended). (message, fix), or None when it fits or cannot be checked."""
    memory = table_memory_gb(hardware, m.hardware)
    if card is None or memory is None or not m.context_tokens:
        return None
    full = card.kv_cache_gb(m.context_tokens, m.concurrency)
    if full is None:
        return None
    least = full / 2
    if least <= memory * m.gpus:
        return None
    streams = f" x {m.concurrency} streams" if m.concurrency > 1 else ""
    need, have = gb_texts(least, memory * m.gpus)
    return (f"{m.model}'s KV cache at context {plain_text(m.context_tokens)}{streams} takes "
            f"{need} GB "
            f"even at half the card's bytes ({card.kv_bytes_how}): more than "
            f"{m.gpus} x {m.hardware} hold ({have} GB)",
            "check context_tokens (tokens, not bytes or characters) and the GPU count")


#: A table of at most this many GPUs is listed whole in an unknown-hardware error.
LIST_ALL_BELOW = 13


def unknown_hardware_fix(name: str, hardware) -> str:
    """The fix of an unknown GPU name: the table's names when it is short, else the closest
    ones and the command that lists them all.

    A name that is not lowercase is the table's lowercase name when it has one (``B300``:
    ``b300``), and ``hardware add`` is told the name it takes.

    >>> unknown_hardware_fix("h300", ["b300", "h100", "h200"])[:54]
    'use a name from the hardware table (b300, h100, h200) '
    >>> unknown_hardware_fix("B300", ["b300", "h100", "h200"])
    "names are lowercase: write 'b300'"
    >>> "`ddtree-bayes hardware add h300 --like GPU" in unknown_hardware_fix("H300", ["b300"])
    True
    """
    import difflib

    names = sorted(hardware)
    lower = as_name(name)
    if lower != name and lower in names:
        return f"names are lowercase: write {lower!r}"
    fit = NAME_RE.fullmatch(lower) and not GPU_COUNT_SUFFIX.search(lower)
    add = (f"add it: `ddtree-bayes hardware add {lower if fit else 'NAME'} --like GPU "
           "--mem-bw-tb-s N --source ...` (a GPU like a known one) or a row in "
           "data/hardware.csv")
    if len(names) < LIST_ALL_BELOW:
        return f"use a name from the hardware table ({', '.join(names)}) or {add}"
    close = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.5)
    hint = f"closest: {', '.join(close)}; " if close else ""
    return (f"use one of the {len(names)} GPUs `ddtree-bayes hardware list` shows ({hint}names are "
            f"case-sensitive) or {add}")


def parse_number(path: str, row: int, column: str, raw: str, *, integer: bool = False) -> float | None:
    if raw == "":
        return None
    try:
        value = plain_float(raw)
    except NotPlain as err:
        raise DataError(f"not a plain number: {raw!r}", file=path, row=row, column=column,
                        fix="write it with the digits 0-9, a point and an exponent only "
                            f"(e.g. {plain_text(err.value)}): other CSV readers take nothing "
                            "else") from None
    except ValueError:
        raise DataError(f"not a number: {raw!r}", file=path, row=row, column=column,
                        fix=(column == "context_tokens" and suffixed_context_fix(raw))
                        or mean_and_spread_fix(raw) or "write a plain number") from None
    if not math.isfinite(value):
        raise DataError(f"not a finite number: {raw!r}", file=path, row=row, column=column,
                        fix="write a finite number or remove the row")
    if integer and value != int(value):
        raise DataError(f"not a whole number: {raw!r}", file=path, row=row, column=column,
                        fix="write a whole number")
    return value


def suffixed_context_fix(raw: str) -> str | None:
    """The fix for a context cell written as ``--context`` takes it (``32k``, ``1m``): the
    token count to write, as a file's cells are plain numbers (other CSV readers take nothing
    else); None for any other text.

    >>> suffixed_context_fix("32k")
    'write 32768: 32k is 32768 tokens as --context reads it (k = 1024, m = 1048576), and a \
data file holds plain numbers'
    >>> suffixed_context_fix("32 tokens") is None
    True
    """
    m = re.fullmatch(r"([0-9]+\.?[0-9]*|\.[0-9]+)\s*([kKmM])", raw.strip())
    if not m:
        return None
    tokens = plain_text(float(m.group(1)) * (1024 if m.group(2) in "kK" else 1024 * 1024))
    return (f"write {tokens}: {raw} is {tokens} tokens as --context reads it (k = 1024, "
            "m = 1048576), and a data file holds plain numbers")


def mean_and_spread_fix(raw: str) -> str | None:
    """The fix for a cell written as a mean and its spread (llama-bench's t/s column prints
    ``131.42 ± 0.59``, the mean of its ``-r`` runs and their standard deviation): the mean to
    write; None for any other text.

    >>> mean_and_spread_fix("131.42 ± 0.59")[:30]
    'write the mean alone, 131.42: '
    >>> mean_and_spread_fix("96.1+/-0.3")[:28], mean_and_spread_fix("96 tok/s") is None
    ('write the mean alone, 96.1: ', True)
    """
    m = re.fullmatch(r"\s*([0-9]+\.?[0-9]*|\.[0-9]+)\s*(?:±|\+-|\+/-)\s*[0-9.]+\s*", raw)
    if not m:
        return None
    return (f"write the mean alone, {m.group(1)}: {raw!r} is a mean and its spread (as "
            "llama-bench prints t/s), and a data file holds plain numbers (the spread has no "
            "column: repeated runs go in as rows of their own)")


#: A number as every CSV reader takes it: ASCII digits, an optional sign, point and exponent.
PLAIN_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class NotPlain(ValueError):
    """A number only Python reads (``7_00``, full-width digits); ``value`` is what it reads."""

    def __init__(self, text: str, value: float) -> None:
        super().__init__(f"{text!r} is not a plain number")
        self.value = value


def plain_float(text: str) -> float:
    """The one number reader of every input, file or flag: ``text`` (stripped) as
    :data:`PLAIN_NUMBER` spells a number, or ``inf`` / ``nan``, which each caller refuses in
    its own words. :class:`NotPlain` for what only Python's ``float`` takes (other CSV readers,
    and a user reading the value back, would read ``1_6`` as something else or nothing),
    ``ValueError`` for no number at all.

    >>> plain_float(" 16 "), plain_float("1e3"), plain_float("-.5")
    (16.0, 1000.0, -0.5)
    >>> for text in ("1_6", "\uff18", "1,5"):
    ...     try:
    ...         plain_float(text)
    ...     except ValueError as err:
    ...         print(type(err).__name__, err)
    NotPlain '1_6' is not a plain number
    NotPlain '\uff18' is not a plain number
    ValueError '1,5' is not a number
    """
    stripped = text.strip()
    try:
        value = float(stripped)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if math.isfinite(value) and not PLAIN_NUMBER.fullmatch(stripped):
        raise NotPlain(text, value)
    return value


def plain_text(value: float) -> str:
    """``value`` written as :data:`PLAIN_NUMBER` takes it, every digit kept.

    >>> plain_text(1048576.0), plain_text(0.1), plain_text(2.5e30)
    ('1048576', '0.1', '2.5e+30')
    """
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


def listed(words, last: str = "and") -> str:
    """``words`` (strings or numbers) as a list in English: "a", "a and b", "a, b and c"
    (``last``: "or" for alternatives).

    >>> listed(["fp8"]), listed(["fp8", "int8"], "or"), listed([1, 2, 4, 8], "or")
    ('fp8', 'fp8 or int8', '1, 2, 4 or 8')
    """
    words = [str(w) for w in words]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1.

    >>> counted(1, "measurement"), counted(9, "measurement")
    ('1 measurement', '9 measurements')
    """
    return f"{n} {noun}{'s' if n != 1 else ''}"


def tok_text(x: float) -> str:
    """tok/s as text, in every command's table: whole numbers from 10, but a rate below 10
    keeps two significant digits (a step that cannot run printed as "0 0-0 0-1" in predict,
    and in optimize; diff's tracked queries too; and 1.4 printed "1", 2.6 "3", where JSON has
    the exact value), a trailing zero too: ``.2g`` dropped it, so 1.04 tok/s printed "1" in
    predict where next printed "1.0". Zero is "0".

    >>> tok_text(607.4), tok_text(12.0), tok_text(2.6), tok_text(3.0), tok_text(1.04)
    ('607', '12', '2.6', '3.0', '1.0')
    >>> tok_text(9.94), tok_text(0.5), tok_text(2.1e-05), tok_text(0.0), tok_text(-1.0)
    ('9.9', '0.50', '2.1e-05', '0', '-1.0')
    """
    if abs(x) >= 9.95:
        return f"{x:.0f}"
    return f"{x:#.2g}" if x else "0"


def percent_text(share: float, *, plus: bool = False) -> str:
    """A share (0.27 for 27%) as every table prints one: a whole percent, or one significant
    digit, written out, where that rounds to 0 ("-0.4%", "-0.02%", "0.0003%"; not "-0.0%",
    nor "1e-05%", nor 0.07% as "0.1%"), so a small change keeps its sign and size ("-0%" and
    "+0%" read a fall as nothing or as a rise); below 0.0001%, its sign and that bound
    ("-<0.0001%"); an exact 0 is "0%". ``plus``: a rise with its "+" (diff's and update's
    changes; next's reduction, whose sign says narrower or wider, prints none).

    >>> percent_text(0.27), percent_text(-1.0 / 446), percent_text(-0.004, plus=True)
    ('27%', '-0.2%', '-0.4%')
    >>> percent_text(0.123, plus=True), percent_text(0.0, plus=True), percent_text(-0.0002)
    ('+12%', '0%', '-0.02%')
    """
    pct = 100 * share
    if not pct:
        return "0%"
    sign = "+" if plus else ""
    shown = f"{pct:{sign}.0f}"
    if shown.lstrip("+-") == "0":
        one = float(f"{pct:.1g}")   # (one significant digit, then as many decimals as that)
        if abs(one) < 1e-4:   # (a table tells no smaller share apart: its sign and bound)
            return f"{'-' if pct < 0 else sign}<0.0001%"
        shown = f"{one:{sign}.{-math.floor(math.log10(abs(one)))}f}"
    return f"{shown}%"


def accept_shown(accept: float) -> str:
    """An acceptance as text: to 2 decimals, trailing zeros dropped. Only text is rounded: a
    question asks every digit (a fit's own default question asks its rows' mean, 1.9375,
    as ``predict`` does, and shows it as 1.94).

    >>> accept_shown(1.9375), accept_shown(4.222), accept_shown(14.0), accept_shown(2.5)
    ('1.94', '4.22', '14', '2.5')
    """
    return f"{round(accept, 2):g}"


def accept_flag(accept: float) -> str:
    """An acceptance as an ``--accept`` value that asks that very number (``repr``: every
    digit; ``:g`` kept six significant digits, so 2.4485333 was asked as 2.44853).

    >>> accept_flag(1.9375), accept_flag(7.3456 / 3), accept_flag(14.0)
    ('1.9375', '2.4485333333333332', '14')
    """
    return plain_text(float(accept))


#: How long one decoding step can take (ms): longer than 0.05 ms (no LLM forward pass runs
#: 20,000 times a second) and shorter than a minute (a step that slow is not decoding). A
#: tok_s outside it is a unit slip (tokens per minute, a per-token latency, an overflow), and
#: a fit on it would answer with throughputs no GPU reaches.
STEP_MS_RANGE = (0.05, 60_000.0)


def step_ms_bounds(accept_lo: float, accept_hi: float, concurrency: int, tok_s: float
                   ) -> tuple[float, float]:
    """The decoding step (ms) a row's tok_s implies, at the lowest and highest acceptance it
    may have (its accept_len twice; for a blank one, 1 and what its configuration can emit).

    >>> step_ms_bounds(14.0, 14.0, 1, 1e308)[0] < STEP_MS_RANGE[0]
    True
    >>> step_ms_bounds(2.0, 2.0, 8, 400.0)   # 8 streams, 2 tokens each per 40 ms step
    (40.0, 40.0)
    """
    return (accept_lo * concurrency / tok_s * 1000.0, accept_hi * concurrency / tok_s * 1000.0)


def step_plausible(accept_lo: float, accept_hi: float, concurrency: int, tok_s: float) -> bool:
    """Can some acceptance the row may have give a step within :data:`STEP_MS_RANGE`?"""
    lo, hi = step_ms_bounds(accept_lo, accept_hi, concurrency, tok_s)
    return hi >= STEP_MS_RANGE[0] and lo <= STEP_MS_RANGE[1]


def parse_row(path: str, row: int, values: dict[str, str], hardware: dict[str, dict[str, str]],
              methods: Mapping[str, MethodSpec] | None = None, stored: bool = False,
              flags: bool = False) -> Measurement:
    """Validate one raw CSV row (column -> text) into a :class:`Measurement`. ``methods`` (the
    priors' ``[methods]`` table) bounds ``accept_len`` by what the row's method can emit
    (:func:`~ddtree_bayes.core.methods.max_accept`; without a table, as ``depth = "block"``).
    ``stored``: a saved fit's data, read as it was fitted (a tree method's lone block, refused
    since, was read as a chain of block + 1 tokens by fits made before). ``flags``: the row
    came from ``add``'s flags (a fix names the flag, :func:`underivable_verify_tokens`).

    Its verdict may depend only on the :data:`CONFIGURATION` columns, tok_s and whether source
    is empty: :func:`load_measurements` skips it for repeated runs of a valid configuration
    (tests/test_data_repeats.py holds the two loaders to each other)."""
    for col in REQUIRED:
        if values.get(col, "") == "":
            raise DataError("empty value", file=path, row=row, column=col,
                            fix=f"fill in {col} (every row needs {', '.join(REQUIRED)})")
    num = {c: parse_number(path, row, c, values.get(c, ""), integer=c in ("gpus", "block", "budget",
                                                                     "verify_tokens"))
           for c in ("gpus", "block", "budget", "verify_tokens", "accept_len", "context_tokens",
                     "tok_s")}
    for col in ("gpus", "block", "budget", "verify_tokens"):
        value = num[col]
        if value is not None and value < 1:
            raise DataError(f"must be >= 1, got {values[col]}", file=path, row=row, column=col,
                            fix="write a positive whole number")
    if num["tok_s"] is None or num["tok_s"] <= 0:
        raise DataError(f"tok_s must be > 0, got {values['tok_s']}", file=path, row=row,
                        column="tok_s", fix="write the measured tokens per second")
    check_context_tokens(num["context_tokens"], values.get("context_tokens", ""), file=path, row=row,
                         fix="write the context length in tokens, or leave it blank",
                         whole=False,   # (a mean of a benchmark's requests may be fractional)
                         fraction=stored)   # (a saved fit's copy is read as it was fitted)
    if values["hardware"] not in hardware:
        raise DataError(f"unknown hardware {values['hardware']!r}", file=path, row=row,
                        column="hardware", fix=unknown_hardware_fix(values["hardware"], hardware))
    for col in ("model", "engine", "method"):   # (a model is a card's name: data/models.csv)
        check_name(values[col], file=path, row=row, column=col)
    method = values["method"]
    block = None if num["block"] is None else int(num["block"])
    budget = None if num["budget"] is None else int(num["budget"])
    derived = derive_verify_tokens(method, block, budget, methods)
    if derived is None and stored and block is not None and method not in (AR_METHOD, "ddtree"):
        derived = block + 1   # (before EAGLE-2 and Medusa needed a budget, only ddtree did)
    verify = num["verify_tokens"]
    if verify is None:
        verify = derived if derived is not None else \
            underivable_verify_tokens(path, row, method, methods, flags)
    budget = check_verify_tokens(path, row, method, block, budget, int(verify), methods)
    if method == AR_METHOD and (block is not None or budget is not None):
        raise DataError("an autoregressive row drafts nothing: block and budget are blank",
                        file=path, row=row, column="block" if block is not None else "budget",
                        fix="clear them, or give the speculative method the run used")
    if num["gpus"] is not None and num["gpus"] > MAX_GPUS:
        raise DataError(f"{values['gpus']} GPUs in one system is more than {MAX_GPUS}",
                        file=path, row=row, column="gpus",
                        fix="write the GPUs of the system that ran the model (e.g. 8)")
    for column, most in (("block", MAX_BLOCK), ("budget", MAX_BUDGET),
                         ("verify_tokens", MAX_BUDGET + 1)):
        # the bounds of predict's flags (a row of block 5000 was fitted; --block 5000 refused)
        given = num[column]
        if given is not None and given > most:
            raise DataError(f"{column} must be 1 to {most}, got {values[column]}", file=path,
                            row=row, column=column, fix=f"write the {column} the run used")
    accept = num["accept_len"]
    if accept is None and (method == AR_METHOD or verify == 1):
        accept = 1.0   # one token verified per step emits one: nothing to infer
    if accept is not None:   # (blank on a speculative row: inferred by the fit)
        _check_accept(path, row, method, accept, max_accept(method, block, budget, methods,
                                                            int(verify)))
    concurrency = parse_number(path, row, "concurrency", values.get("concurrency", ""),
                               integer=True)
    if concurrency is not None and not 1 <= concurrency <= MAX_CONCURRENCY:
        raise DataError(f"must be 1 to {MAX_CONCURRENCY}, got {values['concurrency']}",
                        file=path, row=row, column="concurrency",
                        fix="write the number of streams decoded together (blank = 1)")
    streams = int(concurrency or 1)
    drafter = values.get("drafter", "").strip() or None
    if drafter is not None and method == AR_METHOD:
        problem, fix = AR_DRAFTER
        raise DataError(problem, file=path, row=row, column="drafter", fix=fix)
    hi = accept if accept is not None else max_accept(method, block, budget, methods,
                                                      int(verify)).tokens
    if not step_plausible(accept or 1.0, hi, streams, num["tok_s"]):
        lo_ms, hi_ms = step_ms_bounds(accept or 1.0, hi, streams, num["tok_s"])
        step = f"{lo_ms:.3g} ms" if lo_ms == hi_ms else f"{lo_ms:.3g}-{hi_ms:.3g} ms"
        raise DataError(
            f"tok_s {values['tok_s']} means a decoding step of {step} (accept_len x concurrency "
            f"/ tok_s); a step takes {STEP_MS_RANGE[0]:g} ms to {STEP_MS_RANGE[1] / 1000:g} s",
            file=path, row=row, column="tok_s",
            fix="check the units: output tokens per second (the streams' total at concurrency "
                "C > 1)")
    return Measurement(row=row, model=values["model"], hardware=values["hardware"],
                       gpus=int(num["gpus"] or 0), engine=values["engine"], method=method,
                       block=block, budget=budget, verify_tokens=int(verify), accept_len=accept,
                       context_tokens=num["context_tokens"], tok_s=num["tok_s"],
                       source=values["source"], notes=values.get("notes", ""),
                       concurrency=streams, drafter=drafter)


def _check_accept(path: str, row: int, method: str, accept: float, limit: AcceptLimit) -> None:
    """accept_len within 1 .. what the row's configuration can emit (``limit``, an
    :class:`~ddtree_bayes.core.methods.AcceptLimit`)."""
    if accept < 1:
        raise DataError(f"accept_len must be >= 1 (the bonus token), got {accept:g}", file=path,
                        row=row, column="accept_len", fix="write tokens emitted per step")
    if method == AR_METHOD and accept != 1:
        raise DataError(f"autoregressive rows emit 1 token per step, got {accept:g}", file=path,
                        row=row, column="accept_len", fix="set accept_len to 1")
    if accept > limit.tokens:
        raise DataError(limit.refusal(f"accept_len {accept:g}"), file=path, row=row,
                        column="accept_len",
                        fix="accept_len counts accepted draft tokens plus the bonus token; "
                            "check accept_len, block, budget and verify_tokens")


def _validate_rows(path: str, header: list[str], body: list[tuple[int, list[str]]],
                   hardware: dict[str, dict[str, str]], allow_duplicates: bool,
                   methods: Mapping[str, MethodSpec] | None = None, stored: bool = False
                   ) -> list[Measurement]:
    """Every non-blank record, checked in file order; the first problem raises.

    Per record, in this order: field count, exact duplicate of an earlier record, then
    :func:`parse_row`, then a duplicate written another way (:meth:`Measurement.key`: a
    chain's blank budget, a blank verify_tokens, ``125`` for ``125.0``). A record whose
    :data:`CONFIGURATION` matches an earlier valid row
    (a repeated run) only needs a positive finite tok_s and a non-empty source to be valid;
    when it has them it reuses that row's validated fields, and when it does not,
    :func:`parse_row` runs on it and raises exactly the error it always raised.
    """
    width = len(header)
    index = {h: j for j, h in enumerate(header)}   # (read_csv_file refuses a repeated name)
    extra = tuple(c for c in OPTIONAL_COLUMNS if c in index)
    key_of = itemgetter(*(index[c] for c in COLUMNS + extra))
    config_of = itemgetter(*(index[c] for c in CONFIGURATION + extra))
    j_tok, j_source, j_notes = index["tok_s"], index["source"], index["notes"]
    rows: list[Measurement] = []
    seen: dict[tuple[str, ...], int] = {}
    parsed: dict[tuple, int] = {}   # (the same by Measurement.key, written another way)
    valid: dict[tuple[str, ...], Measurement] = {}
    for i, values in body:
        comment = comment_problem(values, header) if values[:1] and "#" in values[0] else None
        if comment is not None:
            raise DataError(comment[0], file=path, row=i, fix=comment[1])
        if len(values) != width:
            if not any(v.strip() for v in values):
                continue
            problem, fix = fields_problem(len(values), width, values)
            raise DataError(problem, file=path, row=i, fix=fix)
        cells = [v.strip() for v in values]
        if not any(cells):
            continue
        first = seen.setdefault(key_of(cells), i)
        if first != i and not allow_duplicates:
            raise DataError(f"duplicate of row {first}", file=path, row=i,
                            fix=DUPLICATE_FIX)
        config = config_of(cells)
        same = valid.get(config)
        if same is not None and cells[j_source]:
            try:   # (anything but a plain number takes parse_row's path and its message)
                tok_s = float(cells[j_tok]) if PLAIN_NUMBER.fullmatch(cells[j_tok]) else math.nan
            except ValueError:
                tok_s = math.nan
            accept = same.accept_len or 1.0   # (blank: a step below the floor re-checks)
            if 0.0 < tok_s < math.inf and step_plausible(accept, accept, same.concurrency, tok_s):
                rows.append(_unique(same.another_run(i, tok_s, cells[j_source], cells[j_notes]),
                                    parsed, path, allow_duplicates))
                continue
        row = parse_row(path, i, dict(zip(header, cells, strict=True)), hardware, methods,
                        stored)
        valid.setdefault(config, row)
        rows.append(_unique(row, parsed, path, allow_duplicates))
    return rows


#: The fix of a data row that repeats another.
DUPLICATE_FIX = "delete the repeat, or note what differs in the notes column"


def _unique(row: Measurement, parsed: dict[tuple, int], path: str,
            allow_duplicates: bool) -> Measurement:
    """``row``, refused when an earlier row (``parsed``: key -> row) holds the same parsed
    values written another way (a chain's budget blank in one, its depth in the other)."""
    first = parsed.setdefault(row.key(), row.row)
    if first != row.row and not allow_duplicates:
        raise DataError(f"duplicate of row {first}", file=path, row=row.row, fix=DUPLICATE_FIX)
    return row


#: How a row's notes name the benchmark result it was imported from (``add --from-bench``
#: writes ``bench result <id>``, the id of :meth:`BenchRecord.result_id
#: <ddtree_bayes.core.bench_import.reading.BenchRecord.result_id>`).
BENCH_RESULT_TAG = re.compile(r"\bbench result ([0-9a-f]{12})\b")


def check_bench_results(path: str, rows: Sequence[Measurement]) -> None:
    """Refuse a second row whose notes name a benchmark result an earlier row names: one run
    imported twice, under two file names (its source differs, so it was no duplicate row),
    then merged into one file by hand or from another file, would count as two runs.

    >>> import dataclasses
    >>> m = Measurement(row=2, model="m", hardware="h100", gpus=1, engine="vllm", method="ar",
    ...                 block=None, budget=None, verify_tokens=1, accept_len=1.0,
    ...                 context_tokens=None, tok_s=100.0, source="a.json",
    ...                 notes="x; bench result 0123456789ab")
    >>> check_bench_results("m.csv", [m, dataclasses.replace(m, row=3, source="b.json")])
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 3, column 'notes': the same benchmark result \
as row 2 (bench result 0123456789ab): one run would count as two (fix: delete one of the two rows)
    """
    seen: dict[str, int] = {}
    for m in rows:
        for rid in BENCH_RESULT_TAG.findall(m.notes):
            first = seen.setdefault(rid, m.row)
            if first != m.row:
                raise DataError(f"the same benchmark result as row {first} (bench result "
                                f"{rid}): one run would count as two", file=path, row=m.row,
                                column="notes", fix="delete one of the two rows")


def load_measurements(path: str | Path, hardware: dict[str, dict[str, str]], *,
                      allow_duplicates: bool = False, text: str | None = None,
                      methods: Mapping[str, MethodSpec] | None = None,
                      stored: bool = False, allow_empty: bool = False,
                      records: tuple[str, list[str], list[tuple[int, list[str]]]] | None = None
                      ) -> Measurements:
    """Read and validate a measurement CSV (from ``text`` if given; ``path`` names it).
    ``methods``: the priors' ``[methods]`` table, which bounds each row's accept_len
    (:func:`~ddtree_bayes.core.methods.max_accept`). ``stored``: a saved fit's copy, read as it was
    fitted (:func:`parse_row`). ``allow_empty``: a file of its header alone is read as no rows
    (``add`` starts a file from it) instead of refused. ``records``: the file already read
    by :func:`read_records` (its text, header and rows), not parsed again.

    Raises :class:`DataError` (file, row, column, fix) on the first problem found.

    Examples
    --------
    >>> from ddtree_bayes.core.paths import bundled
    >>> hw = load_hardware(bundled("hardware.csv"))
    >>> data = load_measurements(bundled("measurements.csv"), hw)
    >>> len(data.rows), data.systems
    (9, ('b300x8', 'rtx-pro-6000x8'))
    """
    path = str(path)
    text, header, body = records if records is not None else read_csv_file(path, text)
    check_named_columns(path, header, COLUMNS, OPTIONAL_COLUMNS,
                        f"the header must contain {','.join(COLUMNS)}")
    for col in COLUMNS:
        if col not in header:
            missing_column(path, header, col, f"the header must contain {','.join(COLUMNS)}")
    if not stored:   # (a saved fit's copy is read as it was fitted)
        check_stream_columns(path, header, body)
        check_per_user_columns(path, header, body)
    with _no_gc():
        rows = _validate_rows(path, header, body, hardware, allow_duplicates, methods, stored)
    if not rows and not allow_empty:
        raise DataError("no measurement rows", file=path, fix="add at least one row under the header")
    if not stored and not allow_duplicates:
        check_bench_results(path, rows)
    return Measurements(path=path, text=text, rows=tuple(rows))

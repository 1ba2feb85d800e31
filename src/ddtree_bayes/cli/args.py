"""Argument groups shared by several commands (predict, track, next's --query), so every
command that names a configuration spells and documents its flags the same way; and the
argparse ``type=`` functions that check every flag value at the command line, so a bad value
stops with one line naming the flag and a fix (exit 2) before any file is read or written.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
import sys
from collections.abc import Callable

from ddtree_bayes.core.config import DEFAULT_SEED, MAX_SEED
from ddtree_bayes.core.data import (
    DRAFTER_NAME_FIX,
    EMPTY_ITEM,
    MAX_BLOCK,
    MAX_BUDGET,
    MAX_CONCURRENCY,
    MAX_GPUS,
    NAME_RE,
    drafter_name_problem,
    plain_float,
)
from ddtree_bayes.core.query_flags import (
    ACCEPT_HELP,
    add_kv_cache_argument,
    add_new_deployment_argument,
    whole_number,
)
from ddtree_bayes.core.query_flags import add_scenario_arguments as _core_scenario_arguments

__all__ = ["ACCEPT_HELP", "Parser", "add_format", "add_scenario_arguments",
           "add_seed_and_format", "check_query"]

#: Bounds of the integer flags: wide enough for any real system, narrow enough that no
#: arithmetic downstream overflows or divides by zero.
MAX_DRAWS = 1_000_000
_FIT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(text.split())


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is ONE line on stderr, naming the flag, with a fix; and no
    abbreviated flags (`optimize --accept 14` was taken for --acceptance-file 14)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._argv = list(sys.argv[1:] if args is None else args)
        twice = given_twice(self, self._argv)
        if twice is not None:
            self.error(twice)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # type: ignore[override]
        message = self._dash_value(self._flags_first(one_line(message)))
        if "(fix:" not in message:
            if " (choose from " in message:
                message = message.replace(" (choose from ", " (fix: choose from ", 1)
            else:
                message += f" (fix: see `{self._command_prog()} --help`)"
        # one prefix for every error of the program, as the library's errors print it
        self.exit(2, f"{self.prog.split()[0]}: error: {message}\n")

    def _command_prog(self) -> str:
        """``ddtree-bayes optimize`` for an error the top parser raises about a subcommand's
        arguments (an unrecognized flag), so the fix names the help that lists them."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                words = [t for t in getattr(self, "_argv", []) if not t.startswith("-")]
                names: list[str] = []
                choices = action.choices
                for word in words:
                    if word not in choices:
                        break
                    names.append(word)
                    sub = choices[word]
                    nested = [a for a in sub._actions
                              if isinstance(a, argparse._SubParsersAction)]
                    if not nested:
                        break
                    choices = nested[0].choices
                return " ".join([self.prog, *names])
        return self.prog

    def _dash_value(self, message: str) -> str:
        """``--source -x``: argparse reads a value that starts with '-' as a flag and says
        only "expected one argument"; name the value and the spelling it takes
        (``--source=-x``). A next word that is one of the flags (``--context --gpus 8``) is
        a missing value, left as argparse says it."""
        bad = re.fullmatch(r"argument (\S+): expected one argument", message)
        argv = getattr(self, "_argv", [])
        if bad is None:
            return message
        names = bad.group(1).split("/")
        for word, value in zip(argv, argv[1:], strict=False):
            if (word in names and value.startswith("-")
                    and value.split("=")[0] not in self._option_string_actions):
                return (f"{message}: {value!r} starts with '-' and was read as a flag (fix: "
                        f"write {shlex.quote(f'{names[-1]}={value}')} to give a value that "
                        "starts with '-')")
        return message

    def _flags_first(self, message: str) -> str:
        """``hardware --format json`` (flags before the subcommand): argparse takes the flag's
        value for the subcommand and names neither; say which flag goes where."""
        bad = re.fullmatch(r"argument SUBCOMMAND: invalid choice: (.*) \(choose from (.*)\)",
                           message)
        flags = [t.split("=")[0] for t in getattr(self, "_argv", []) if t.startswith("--")]
        if bad is None or not flags:
            return message
        first = bad.group(2).split(",")[0].strip().strip("'\"")
        return (f"{flags[0]} comes before the subcommand (argparse read {bad.group(1)} as one)"
                f" (fix: name the subcommand first, one of {bad.group(2)}: "
                f"`{self.prog} {first} {' '.join(flags)} ...`)")


def given_twice(parser: argparse.ArgumentParser, tokens: list[str]) -> str | None:
    """The error of a flag of ``parser`` that ``tokens`` give twice with two values, or None.
    argparse keeps the last one: `add --tok-s 612 ... --tok-s 61.2` appended 61.2 tok/s and
    `predict --context 32k ... --context 0` answered at 0, each with exit 0. Two spellings
    of one value are one value (``--context 32k --context 32768``: :func:`meaning`); a flag
    of several values (``validate --sweeps``) is compared by all of them
    (:func:`store_values`). Flags of a subcommand are its own parser's to check (argparse hands
    it the tokens after its name), and tokens after ``--`` are values.

    >>> p = argparse.ArgumentParser()
    >>> _ = p.add_argument("--tok-s")
    >>> given_twice(p, ["--tok-s", "612", "--tok-s=61.2"])
    "argument --tok-s: given twice, '612' and '61.2': which one is meant is not for this \
tool to guess (fix: give --tok-s once)"
    >>> given_twice(p, ["--tok-s", "612", "--tok-s", "612"]) is None
    True
    """
    seen: dict[argparse.Action, tuple[str, object]] = {}
    for i, token in enumerate(tokens):
        if token == "--":
            break
        flag, eq, value = token.partition("=")
        action = parser._option_string_actions.get(flag if eq else token)
        if not isinstance(action, argparse._StoreAction):
            continue
        values = [value]
        if not eq:
            values = store_values(parser, action, tokens[i + 1:])
            if not values:
                continue   # (argparse says the value is missing)
            value = " ".join(values)
        first = seen.setdefault(action, (value, meaning(action, values)))
        if first[1] != meaning(action, values):
            name = action.option_strings[-1]
            return (f"argument {name}: given twice, {first[0]!r} and {value!r}: which one is "
                    f"meant is not for this tool to guess (fix: give {name} once)")
    return None


def meaning(action: argparse.Action, values: list[str]) -> object:
    """What the ``values`` of one ``action`` mean, for :func:`given_twice` to compare: each
    read by the flag's own parser (its ``meaning`` when its ``type=`` returns the text as
    typed, e.g. :func:`context`), so ``32k`` and ``32768`` or ``12:16`` and ``12.0:16.0``
    are one value. A flag without a parser, or a value its parser refuses, is the text
    (argparse then names the bad value in its own words).

    >>> p = argparse.ArgumentParser()
    >>> meaning(p.add_argument("--context", type=context), ["32k"])
    (32768.0,)
    >>> meaning(p.add_argument("--notes"), ["32k"])
    ('32k',)
    """
    parse = getattr(action.type, "meaning", action.type)
    if not callable(parse):
        return tuple(values)
    try:
        return tuple(parse(v) for v in values)
    except Exception:   # noqa: BLE001 (any refusal: argparse reports it when it parses)
        return tuple(values)


def store_values(parser: argparse.ArgumentParser, action: argparse.Action,
                 after: list[str]) -> list[str]:
    """The values argparse gives a flag ``action`` from the tokens ``after`` it: one, a fixed
    count, or (``+``, ``*``, ``?``) the tokens up to the next flag or ``--``. A flag of several
    values given twice keeps the last group: `validate --sweeps A B --sweeps C` read C alone."""
    nargs = action.nargs
    if nargs is None:
        return after[:1]
    if isinstance(nargs, int):
        return after[:nargs]
    values = []
    for token in after:
        if token == "--" or parser._parse_optional(token) is not None:
            break
        values.append(token)
    return values[:1] if nargs == argparse.OPTIONAL else values


def with_meaning(parse: Callable[[str], object], read: Callable[[str], object]) -> None:
    """Give a ``type=`` function that returns the text as typed the parser of what it means
    (:func:`meaning`): ``read`` checks the text as ``parse`` does and returns the value."""
    parse.meaning = read   # type: ignore[attr-defined]


def _bad(text: object, problem: str, fix: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"{one_line(repr(text))} {problem} (fix: {fix})")


def whole(lo: int, hi: int, fix: str) -> Callable[[str], int]:
    """A type= function: a whole number in lo..hi, read as the query strings read one
    (``core.query_flags.whole_number``: ``1_6`` or full-width digits are refused, not read
    as 16).

    >>> whole(1, 64, "e.g. 8")("8")
    8
    """
    def parse(text: str) -> int:
        try:
            value = whole_number(text)
        except ValueError:
            raise _bad(text, "is not a whole number", fix) from None
        if not lo <= value <= hi:
            typed = text.strip().removeprefix("+")   # (20 nines read as 1e20 echoed 100...0)
            raise _bad(int(typed) if typed.isascii() and typed.isdigit() else value,
                       f"is outside {lo}..{hi}", fix)
        return value

    parse.__name__ = "whole number"
    return parse


def real(lo: float, hi: float, fix: str, *, open_lo: bool = False,
         open_hi: bool = False) -> Callable[[str], float]:
    """A type= function: a finite number in [lo, hi] (``open_*`` excludes that end)."""
    def parse(text: str) -> float:
        try:
            value = plain_float(text)
        except ValueError:
            raise _bad(text, "is not a number", fix) from None
        if not math.isfinite(value):
            raise _bad(text, "is not a finite number", fix)
        if value < lo or value > hi or (open_lo and value == lo) or (open_hi and value == hi):
            span = f"{'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
            raise _bad(value, f"is outside {span}", fix)
        return value

    parse.__name__ = "number"
    return parse


def name(fix: str, *, several: bool = False) -> Callable[[str], str]:
    """A type= function: a lowercase name as in the data files (comma-separated if
    ``several``); returns the text."""
    def parse(text: str) -> str:
        # (an empty item, `sglang,,native`, said "'' is not a name": the list flags' words)
        parts = _items(text, fix) if several and text else [text]
        for part in parts:
            if not NAME_RE.fullmatch(part):
                mended = [p.strip().lower() for p in parts]
                if part != part.strip() and all(NAME_RE.fullmatch(p) for p in mended):
                    # (a space, "sglang, native", was answered "names are lowercase")
                    raise _bad(part, "has a space in it", (
                        "write the list without spaces" if several else "drop the spaces")
                        + f", e.g. {','.join(mended)!r}")
                hint = f"names are lowercase, e.g. {part.strip().lower()!r}" if (
                    NAME_RE.fullmatch(part.strip().lower())) else fix
                raise _bad(part if several else text,
                           "is not a name (lowercase letters, digits and . _ + -)", hint)
        return text

    parse.__name__ = "name"
    return parse


def fit_id(text: str) -> str:
    """A type= function: a fit id as ``ddtree-bayes history`` lists them."""
    if not _FIT_ID.fullmatch(text) or ".." in text:
        raise _bad(text, "is not a fit id", "copy one from `ddtree-bayes history`, or leave "
                                            "the flag out for the latest fit")
    return text


def fit_ids(text: str) -> str:
    """A type= function: comma-separated fit ids (at least two), no item empty
    (``--fits A,,B`` compared A and B without a word on the blank between, as the list flags
    of :func:`int_list` refuse it)."""
    fix = "give two or more ids, e.g. --fits A,B (ids from `ddtree-bayes history`)"
    ids = [t.strip() for t in _items(text, fix)] if text.strip() else []
    for i in ids:
        fit_id(i)
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise _bad(text, f"names {twice[0]} twice", "compare two or more different fits "
                                                     "(ids from `ddtree-bayes history`)")
    if len(ids) < 2:
        raise _bad(text, "names fewer than two fits", fix)
    return text


with_meaning(fit_ids, lambda text: tuple(t.strip() for t in fit_ids(text).split(",")))


def accept(text: str) -> str:
    """A type= function: ``--accept`` as predict reads it (finite values >= 1); the text."""
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.scenario import parse_accept

    fix = "use 13.5, 12,14,16, 12:16 or 12:16:0.5"
    if "," in text:   # (`12,,14` was "not a number, list or range": the list flags' words)
        _items(text, fix)
    try:
        req = parse_accept(text)
    except QueryError as err:
        raise _bad(text, err.reason or "is not a number, list or range", fix) from None
    values = list(req.values) + list(req.uniform or ())
    if not all(math.isfinite(v) for v in values):
        raise _bad(text, "is not finite", fix)
    if min(values) < 1:
        raise _bad(text, "is below 1 (tokens per step count the bonus token)", fix)
    return text


def _accept_meaning(text: str) -> object:
    from ddtree_bayes.engine.scenario import parse_accept

    return parse_accept(accept(text))


with_meaning(accept, _accept_meaning)


def context(text: str) -> str:
    """A type= function: a context length (``32768``, ``32k``, ``1m``); the text."""
    from ddtree_bayes.core.data import MAX_CONTEXT_TOKENS
    from ddtree_bayes.core.errors import QueryError
    from ddtree_bayes.engine.scenario import parse_context

    fix = "use e.g. 32768 or 32k"
    try:
        value = parse_context(text)
    except QueryError as err:
        raise _bad(text, err.reason or "is not a token count", err.fix or fix) from None
    if value is None or not math.isfinite(value):
        raise _bad(text, "is not a finite token count", fix)
    if value > MAX_CONTEXT_TOKENS:
        raise _bad(text, f"is above the longest context taken ({MAX_CONTEXT_TOKENS:,} "
                         "tokens)", fix)
    return text


def _context_meaning(text: str) -> object:
    from ddtree_bayes.engine.scenario import parse_context

    return parse_context(context(text))


with_meaning(context, _context_meaning)


def as_text(parse: Callable[[str], object]) -> Callable[[str], str]:
    """``parse`` as a check only: the flag keeps the text as typed (stripped), e.g. for
    ``add``, which writes it to the CSV."""
    def check(text: str) -> str:
        parse(text)
        return text.strip()

    check.__name__ = parse.__name__
    with_meaning(check, parse)
    return check


def number_text(text: str) -> str:
    """A type= function for a number a flag writes into a data file as typed (``add``'s
    --tok-s, --gpus, --accept...): the text, unchecked (the data schema refuses a bad one,
    naming its row and column), compared by :func:`given_twice` as the number the schema
    reads (:func:`~ddtree_bayes.core.data.plain_float`): ``--tok-s 612 --tok-s 612.0`` is one
    value; a word (``--accept infer``) is its text.

    >>> number_text(" 612.0"), meaning(argparse.Action(["--tok-s"], "tok_s", type=number_text),
    ...                                ["612.0", "6.12e2"])
    (' 612.0', (612.0, 612.0))
    """
    return text


def _number_meaning(text: str) -> object:
    from ddtree_bayes.core.data import plain_float

    return plain_float(text)


with_meaning(number_text, _number_meaning)


def int_list(lo: int, hi: int, fix: str) -> Callable[[str], list[int]]:
    """A type= function: comma-separated whole numbers in lo..hi (at least one), each once
    (``--concurrency 1,1`` printed every row twice), no item empty (``--concurrency 1,,4``
    answered 1 and 4 without a word on the blank between: a typo, or a number lost).

    >>> int_list(1, 64, "e.g. 1,8")("8,1,8")
    [8, 1]
    """
    one = whole(lo, hi, fix)

    def parse(text: str) -> list[int]:
        if not text.strip():
            raise _bad(text, "holds no number", fix)
        return list(dict.fromkeys(one(p) for p in _items(text, fix)))

    parse.__name__ = "list of whole numbers"
    return parse


def name_list(what: str, fix: str) -> Callable[[str], tuple[str, ...]]:
    """A type= function: comma-separated names (``what`` each is), spaces around them dropped,
    each once, no item empty, as :func:`int_list` reads numbers (``--structures
    structured,,fraction`` ran the two without a word on the blank between). Which names are
    known is the command's to check.

    >>> name_list("structure", "e.g. a,b")("fraction, structured,fraction")
    ('fraction', 'structured')
    """
    def parse(text: str) -> tuple[str, ...]:
        if not text.strip():
            raise _bad(text, f"names no {what}", fix)
        return tuple(dict.fromkeys(p.strip() for p in _items(text, fix)))

    parse.__name__ = f"list of {what} names"
    return parse


def _items(text: str, fix: str) -> list[str]:
    """The comma-separated items of a list flag, refusing an empty one (``1,,4`` answered 1 and
    4 without a word on the blank between: a typo, or a number lost)."""
    parts = text.split(",")
    if any(not p.strip() for p in parts):
        raise _bad(text, EMPTY_ITEM, fix)
    return parts


def record_list(text: str) -> list[int]:
    """A type= function: record numbers, comma-separated, runs as ``N-M`` (``1-3,7``), as
    the --from-bench messages write them.

    >>> record_list("1-3, 7")
    [1, 2, 3, 7]
    """
    fix = "e.g. --bench-records 1,3 or --bench-records 2-5"
    one = whole(1, 10_000_000, fix)
    out: list[int] = []
    for part in (p.strip() for p in (_items(text, fix) if text.strip() else ())):
        lo, dash, hi = part.partition("-")
        first, last = one(lo), one(hi) if dash else None
        if last is None:
            out.append(first)
        elif last < first or last - first > 1_000_000:
            raise _bad(text, f"has the range {part}, which runs backwards or is too long", fix)
        else:
            out.extend(range(first, last + 1))
    if not out:
        raise _bad(text, "holds no number", fix)
    return out


budgets = as_text(int_list(1, MAX_BUDGET, "use e.g. --budgets 8,16,32,64"))


SEED = whole(0, MAX_SEED, "use a whole number from 0 to 4294967295")
GPUS = whole(1, MAX_GPUS, "give the GPU count, e.g. --gpus 8")
BLOCK = whole(1, MAX_BLOCK, "give the drafter block size, e.g. --block 16")
BUDGET = whole(1, MAX_BUDGET, "give the tree node budget, e.g. --budget 32")
VERIFY = whole(1, MAX_BUDGET + 1, "give the tokens verified per step, e.g. --verify-tokens 33")


def PROB(text: str) -> float:
    """A type= function: the probability of an interval, strictly between 0 and 1 and not
    rounding to either at the decimals its interval is labelled with
    (:func:`~ddtree_bayes.engine.predictive.prob_problem`: --prob 0.9999999 printed a "100%
    interval")."""
    from ddtree_bayes.engine.predictive import PROB_FIX, prob_problem

    value = real(0, 1, PROB_FIX, open_lo=True, open_hi=True)(text)
    problem = prob_problem(value)
    if problem is not None:
        raise _bad(value, problem.split(" ", 1)[1], PROB_FIX)
    return value


PROB.__name__ = "number"
CHAINS = whole(1, 64, "use e.g. --chains 4")
DRAWS = whole(1, MAX_DRAWS, "use e.g. --draws 1000")
#: nutpie panics with no tuning step at all (and no fit passes its gates with a handful)
TUNE = whole(1, MAX_DRAWS, "use e.g. --tune 1000")
TARGET_ACCEPT = real(0, 1, "use e.g. --target-accept 0.95", open_lo=True, open_hi=True)
HARDWARE = name("use a GPU name from data/hardware.csv, e.g. --hardware b300")


def model_name(text: str) -> str:
    """A type= function: a target model name as in the data's model column (no spaces or
    commas); returns it stripped."""
    value = text.strip()
    if not value or any(c.isspace() or c == "," for c in value):
        raise _bad(text, "is not a model name", "use the name in the data's model column, e.g. "
                                                "--model kimi-k2.6")
    return value


model_name.__name__ = "model name"


def drafter_name(text: str) -> str:
    """A type= function: a drafter card's name, as predict, next --query and track add take
    it (which cards exist is the fit's to say): an empty or space-padded name is refused, not
    read as the default drafter nor blamed on the fit."""
    problem = drafter_name_problem(text)
    if problem is not None:
        raise _bad(text, problem, DRAFTER_NAME_FIX)
    return text


drafter_name.__name__ = "drafter name"
ENGINES = name("use engine names, e.g. --engine sglang,native", several=True)
METHOD = name("use e.g. --method ddtree, eagle3 or ar")

_SCENARIO_TYPES = {"gpus": GPUS, "block": BLOCK, "budget": BUDGET, "verify_tokens": VERIFY,
                   "context": context, "hardware": HARDWARE, "engine": ENGINES,
                   "method": METHOD, "model": model_name}


def retype(p: argparse.ArgumentParser, types: dict[str, Callable[[str], object]]) -> None:
    """Give the options of ``p`` whose dest is a key of ``types`` that type= function."""
    for action in p._actions:
        if action.dest in types:
            action.type = types[action.dest]


#: Flags (by dest) that name a text file the library reads.
TEXT_FILES = {"data": "--data", "priors": "--priors", "hardware_file": "--hardware-file",
              "truth": "--truth", "design": "--design", "candidates": "--candidates",
              "acceptance_file": "--acceptance-file", "from_file": "--from",
              "hf_config": "--hf-config", "models_file": "--models-file",
              "drafters_file": "--drafters-file"}


def check_text_files(args: argparse.Namespace) -> None:
    """Every text file named on the command line that exists must be UTF-8 text: one line
    naming the flag and the file (a missing file is left to the command, whose message
    says what it expected there)."""
    from pathlib import Path

    from ddtree_bayes.core import per_call
    from ddtree_bayes.core.errors import InputError

    for dest, flag in TEXT_FILES.items():
        value = getattr(args, dest, None)
        if not isinstance(value, str) or not value or not Path(value).is_file():
            continue
        try:
            per_call.read_bytes(value).decode("utf-8")   # (the command reads these bytes)
        except UnicodeDecodeError as err:
            raise InputError(f"{flag} {value}: not UTF-8 text (byte {err.start})",
                             fix=f"pass the text file {flag} expects, saved as UTF-8") from None
        except OSError:
            continue  # unreadable: the command's own message names it


def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """The configuration flags of core.query_flags, each with its validating type."""
    _core_scenario_arguments(p)
    retype(p, _SCENARIO_TYPES)


def check_query(text: str) -> argparse.Namespace:
    """``next --query`` text: its flags checked as predict checks them (QueryError naming
    --query, one line) before the decision code parses it; the parsed flags."""
    from ddtree_bayes.core.errors import QueryError

    class _QueryParser(argparse.ArgumentParser):
        def error(self, message: str):  # type: ignore[override]
            message = one_line(message)
            if "(fix:" not in message:   # (--kv-cache's choices, as predict's line says them)
                message = message.replace(" (choose from ", " (fix: choose from ", 1)
            raise QueryError(f"--query {one_line(repr(text))}: {message}",
                             fix=None if "(fix:" in message else
                             "give predict flags, e.g. --query \"--hardware b300 --engine "
                             "native --accept 14\"")

    parser = _QueryParser(add_help=False)
    add_scenario_arguments(parser)
    add_kv_cache_argument(parser)
    parser.add_argument("--accept", type=accept)
    parser.add_argument("--concurrency", type=whole(1, MAX_CONCURRENCY, "give the stream count, e.g. "
                                                    "--concurrency 16"))
    parser.add_argument("--drafter", type=drafter_name)   # (predict's)
    add_new_deployment_argument(parser)
    try:
        tokens = shlex.split(text)
    except ValueError as err:
        raise QueryError(f"--query {one_line(repr(text))}: {err}", fix="balance the quotes") from None
    twice = given_twice(parser, tokens)
    if twice is not None:
        parser.error(twice)
    return parser.parse_args(tokens)


def add_format(p: argparse.ArgumentParser, formats: tuple[str, ...] = ("table", "json")) -> None:
    """--format: a table for people, the other formats for machines."""
    p.add_argument("--format", choices=formats, default="table",
                   help="table for people, " + " or ".join(f for f in formats if f != "table")
                   + " for machines (default: %(default)s)")


def add_fit_checks(p: argparse.ArgumentParser) -> None:
    """--strict and --allow-unconverged: what a command answering from a fit does with a
    stale or unconverged one (predict, optimize, next)."""
    p.add_argument("--strict", action="store_true",
                   help="error (exit 4) instead of warning if data or priors changed since the "
                        "fit; error (exit 2) for an engine, method or hardware name that was "
                        "never measured nor declared")
    p.add_argument("--allow-unconverged", action="store_true",
                   help="use a fit that failed its convergence gates")


def add_seed_and_format(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    """The options most commands share: one seed for every random call, output format."""
    p.add_argument("--seed", type=SEED, default=DEFAULT_SEED,
                   help="random seed, 0 to 4294967295 (default: %(default)s)")
    if formats:
        add_format(p, formats)


#: ``--accept infer``: leave accept_len blank for the fit to infer (a speculative row).
ACCEPT_INFER = "infer"


def accept_cell(text: str | None, method: str | None) -> str | None:
    """The accept_len cell of ``add``: the number given, or blank for ``--accept infer``
    (refused for --method ar: one token per step, nothing to infer). An empty value is
    refused: a blank cell is written only when asked for by name (``--accept "$ACC"`` with
    ACC unset would otherwise leave the acceptance to the fit without a word)."""
    from ddtree_bayes.core.errors import InputError

    if text is not None and not text.strip():
        raise InputError("--accept is empty",
                         fix="give the accepted tokens per step incl. the bonus token, e.g. "
                             "--accept 4.5, or --accept infer when the run did not report it")
    if text is None or text.strip().lower() != ACCEPT_INFER:
        return text
    from ddtree_bayes.core.data import AR_METHOD

    if method == AR_METHOD:
        raise InputError("--accept infer: autoregressive decoding emits 1 token per step",
                         fix="use --accept 1 with --method ar")
    return ""

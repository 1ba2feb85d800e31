"""The ``[methods.<name>]`` tables of the priors file: how each speculative method drafts
(sequential drafter passes per step, whether the target verifies a tree whose construction is
paid per node, and what bounds the depth of what it verifies). The structured step form reads
the passes and nodes; :func:`max_accept`, the one rule for the most tokens a step can emit,
reads the depth."""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass

from ddtree_bayes.core.errors import PriorsError

#: Autoregressive decoding: no drafter, one token verified and emitted per step.
AR_METHOD = "ar"
#: What bounds the depth of the tree or chain a method verifies (``[methods.<name>].depth``):
#: "block", at most ``block`` draft tokens on any path (Medusa's heads propose ``block``
#: positions; a sequential drafter drafts one depth per pass, ``block`` passes); "block - 1",
#: at most ``block - 1`` (a block whose position 0 is the anchor, the previous step's bonus
#: token, and whose other ``block - 1`` positions are drafted: DFlash, and DDTree's tree built
#: from them); "budget", only the node budget (the tree may be a chain of ``budget`` nodes).
DEPTHS = ("block", "block - 1", "budget")
#: The rule of a ``depth = "block - 1"`` method's bound (:func:`max_accept`).
ANCHORED_RULE = "block - 1 drafts + 1"


@dataclass(frozen=True)
class MethodSpec:
    """How a speculative method drafts: ``passes`` sequential drafter forward passes per step
    ("block": one per draft token, i.e. the block/depth; or a fixed count), and whether the
    target verifies a tree whose construction costs per node ("auto": when budget > block)."""

    name: str
    passes: str | int
    tree: bool | str
    #: what bounds the verified tree's depth (:data:`DEPTHS`; absent from the table: "block")
    depth: str = "block"

    def draft_passes(self, block: int | None, budget: int | None) -> int:
        """Sequential drafter passes of one step.

        >>> MethodSpec("eagle3", "block", "auto").draft_passes(5, 5)
        5
        >>> MethodSpec("ddtree", 1, True).draft_passes(16, 32)
        1
        """
        if self.passes == "block":
            return int(block if block is not None else (budget or 0))
        return int(self.passes)

    def tree_nodes(self, block: int | None, budget: int | None) -> int:
        """Nodes of the verified tree whose construction is paid per step (0 for a chain).

        >>> eagle3, mtp = MethodSpec("eagle3", "block", "auto"), MethodSpec("mtp", "block", False)
        >>> eagle3.tree_nodes(8, 63), eagle3.tree_nodes(3, 3), mtp.tree_nodes(3, 3)
        (63, 0, 0)
        """
        if self.tree is True or (self.tree == "auto" and budget is not None and block is not None
                                 and budget > block):
            return int(budget or 0)
        return 0


def parse_methods(path: str, table: dict) -> dict[str, MethodSpec]:
    """``[methods.<name>]``: passes = "block" | a whole number >= 0; tree = true | false | "auto";
    depth = "block" | "block - 1" | "budget" (optional, "block" when absent)."""
    methods = {}
    for name, spec in table.items():
        column = f"methods.{name}"
        if not isinstance(spec, dict):
            raise PriorsError("must be a table", file=path, column=column,
                              fix=f'write [{column}] with passes = "block" and tree = false')
        passes = spec.get("passes")
        if not (passes == "block" or (isinstance(passes, int) and not isinstance(passes, bool)
                                      and passes >= 0)):
            raise PriorsError(f"passes must be \"block\" or a whole number >= 0, got {passes!r}",
                              file=path, column=f"{column}.passes",
                              fix='one drafter pass per draft token: passes = "block"; a block '
                                  'drafter: passes = 1')
        tree = spec.get("tree", False)
        if tree not in (True, False, "auto"):
            raise PriorsError(f"tree must be true, false or \"auto\", got {tree!r}", file=path,
                              column=f"{column}.tree", fix='set tree = "auto" (a tree when budget > block)')
        depth = spec.get("depth", "block")
        if depth not in DEPTHS:
            raise PriorsError(f"depth must be \"block\", \"block - 1\" or \"budget\", got "
                              f"{depth!r}", file=path, column=f"{column}.depth",
                              fix='depth = "block" when no path of the verified tree is longer '
                                  'than the block; "block - 1" when the block\'s first position '
                                  'is the anchor; "budget" when only the budget bounds it')
        for key in ("rationale", "source"):
            if not isinstance(spec.get(key), str) or not spec[key].strip():
                raise PriorsError(f"missing '{key}'", file=path, column=column,
                                  fix=f'add {key} = "..." saying how this method drafts')
        unknown = sorted(set(spec) - {"passes", "tree", "depth", "rationale", "source"})
        if unknown:
            raise PriorsError(f"unknown key {unknown[0]!r}", file=path, column=column,
                              fix="use passes, tree, depth, rationale and source")
        methods[name] = MethodSpec(name=name, passes=passes, tree=tree, depth=depth)
    return methods


def toml_tables(text: str, path: str = "<priors>") -> dict:
    """The tables of priors TOML ``text`` (PriorsError naming ``path`` when it does not parse):
    what :func:`load_methods`, ``parse_priors`` and ``parse_acceptance_curve`` read, parsed once
    when a caller holds them (a fit's stored priors: ``Fit.priors_tables``), and once per call
    whichever input the text came from (a priors file and the fit's stored copy of it, one
    text: core/per_call.py). Read-only to them."""
    from ddtree_bayes.core import per_call

    try:
        return per_call.parsed_text("toml", text, lambda: tomllib.loads(text))
    except tomllib.TOMLDecodeError as err:
        raise PriorsError(f"not valid TOML: {err}", file=path, fix="correct the TOML syntax") from None


def load_methods(text: str, path: str = "<priors>", *, tables: dict | None = None
                 ) -> dict[str, MethodSpec]:
    """The ``[methods.<name>]`` tables of priors TOML ``text`` alone (``add`` checks a row's
    acceptance against them without needing the rest of the priors). ``tables``: ``text``
    already parsed (:func:`toml_tables`).

    >>> from ddtree_bayes.core.paths import bundled
    >>> load_methods(bundled("priors.toml").read_text())["ddtree"].depth
    'block - 1'
    """
    raw = tables if tables is not None else toml_tables(text, path)
    table = raw.get("methods", {})
    if not isinstance(table, dict):
        raise PriorsError("'methods' must be a table", file=path, column="methods",
                          fix="write it as [methods.<name>] tables")
    return parse_methods(path, table)


@functools.cache
def bundled_methods() -> dict[str, MethodSpec]:
    """The bundled priors' ``[methods]`` table (read once per process): what a reader with no
    priors of its own (a measurement file read alone, simulate's design) knows of a method."""
    from ddtree_bayes.core.paths import bundled

    return load_methods(bundled("priors.toml").read_text(), "bundled priors")


def always_tree(method: str, methods: Mapping[str, MethodSpec] | None = None) -> bool:
    """Does ``method`` always verify a tree of ``budget`` draft nodes (``tree = true`` in the
    methods table: DDTree, EAGLE-2, Medusa), so that its block (the tree's depth) alone does
    not say how many tokens a step verifies? ``methods``: the priors' table; a method it lacks
    (or no table) is looked up in the bundled one; a method in neither is a chain. The one
    answer every reader of a configuration uses.

    >>> always_tree("ddtree"), always_tree("eagle2"), always_tree("eagle3"), always_tree("new")
    (True, True, False, False)
    >>> always_tree("eagle2", {"eagle2": MethodSpec("eagle2", "block", False)})
    False
    """
    spec = method_spec(method, methods)
    return spec is not None and spec.tree is True


def never_tree(method: str, methods: Mapping[str, MethodSpec] | None = None) -> bool:
    """Does ``method`` only ever verify a chain (``tree = false`` in the methods table:
    DFlash, PARD), so that no budget or verify count but its chain's is a configuration of it
    (a refusal's fix then names a tree method, not a tree's budget)?

    >>> never_tree("dflash"), never_tree("eagle3"), never_tree("ddtree"), never_tree("new")
    (True, False, False, False)
    """
    spec = method_spec(method, methods)
    return spec is not None and spec.tree is False


def method_spec(method: str, methods: Mapping[str, MethodSpec] | None = None
                ) -> MethodSpec | None:
    """How ``method`` drafts: its entry in ``methods`` (the priors' table), else in the bundled
    table (a priors file that omits a method, or a reader with no priors), else None."""
    return (methods or {}).get(method) or bundled_methods().get(method)


def chain_depth(method: str, block: int, methods: Mapping[str, MethodSpec] | None = None
                ) -> int:
    """Draft tokens a chain of ``block`` drafts: the block, or ``block - 1`` for a method whose
    block's position 0 is the anchor (``depth = "block - 1"``: DFlash drafts 15 tokens of a
    block of 16 and verifies 16, as the public rows ``dflash,16,15,16`` write it).

    >>> chain_depth("dflash", 16), chain_depth("eagle3", 3), chain_depth("new", 5)
    (15, 3, 5)
    """
    spec = method_spec(method, methods)
    return block - 1 if spec is not None and spec.depth == "block - 1" else block


# ------------------------------------------------------------------ what a step can emit
@dataclass(frozen=True)
class AcceptLimit:
    """The most tokens one decoding step of a configuration can emit (accepted draft tokens
    plus the bonus token), the bound that sets it (``rule``) and the configuration in words
    (``subject``), for one-line refusals."""

    tokens: float
    rule: str
    subject: str

    def admits(self, accept: float) -> bool:
        """Can a step emit ``accept`` tokens (at least 1, at most :attr:`tokens`)?"""
        return 1.0 <= accept <= self.tokens

    def describe(self) -> str:
        """``at most 16 tokens per step: block - 1 drafts + 1``."""
        return f"at most {self.tokens:g} token{'s' * (self.tokens != 1)} per step: {self.rule}"

    def refusal(self, what: str) -> str:
        """``--accept 20 is above what ddtree with block 16 can emit (at most 16 tokens per
        step: block - 1 drafts + 1)``."""
        return f"{what} is above what {self.subject} can emit ({self.describe()})"

    def refuse_prior_above(self, params: Mapping[str, float], path: str, column: str) -> None:
        """Raise PriorsError when a prior's ``params`` reach above :attr:`tokens` (its
        ``upper`` bound, or a point's ``value``; a prior without either is not bounded here):
        an ``[[acceptance]]`` entry of one configuration and ``[acceptance_curve]``'s
        ``accept_ref`` at its reference budget alike. ``column``: the prior's, the bound's
        key appended.

        >>> limit = AcceptLimit(16.0, ANCHORED_RULE, "ddtree with block 16")
        >>> try:
        ...     limit.refuse_prior_above({"mu": 30, "upper": 40}, "p.toml", "acceptance[1]")
        ... except PriorsError as err:
        ...     print(err)
        p.toml, column 'acceptance[1].upper': upper 40 is above what ddtree with block 16 can \
emit (at most 16 tokens per step: block - 1 drafts + 1) (fix: set upper = 16 or lower)
        >>> limit.refuse_prior_above({"value": 16}, "p.toml", "acceptance[1]")   # (at the cap)
        """
        bound = "upper" if "upper" in params else "value" if "value" in params else None
        if bound is not None and params[bound] > self.tokens:
            raise PriorsError(self.refusal(f"{bound} {params[bound]:g}"), file=path,
                              column=f"{column}.{bound}",
                              fix=f"set {bound} = {self.tokens:g} or lower")

    def out_of_range(self, lowest: float, highest: float) -> str | None:
        """Why acceptances from ``lowest`` to ``highest`` cannot all be one step's (None: they
        can), the words after ``acceptance <label> of <configuration>: `` in predict's and
        next's refusal of an acceptance source's draws: below 1 first, then above the limit.

        >>> limit = AcceptLimit(16.0, ANCHORED_RULE, "ddtree with block 16")
        >>> limit.out_of_range(0.5, 0.5)
        'below 1 (a step emits at least the bonus token)'
        >>> limit.out_of_range(12.0, 20.0).split(" (")[0]
        'it is above what ddtree with block 16 can emit'
        >>> limit.out_of_range(1.0, 16.0) is None
        True
        """
        if lowest < 1:
            return "below 1 (a step emits at least the bonus token)"
        if highest > self.tokens:
            return self.refusal("it")
        return None

    def span(self) -> str:
        """The fix of an acceptance out of range: ``tokens per step lie in 1 .. 16 (block - 1
        drafts + 1)``."""
        return f"tokens per step lie in 1 .. {self.tokens:g} ({self.rule})"

    def fix(self, flag: str = "--accept") -> str:
        """One fix-it sentence for a refused acceptance."""
        return (f"acceptance counts accepted draft tokens plus the bonus token: give {flag} "
                f"of at most {self.tokens:g}" + ("" if self.rule.startswith("autoregressive")
                                                 else ", or ask a configuration that drafts more"))


def shaped_budget(method: str, block: int | None, budget: int | None,
                  verify_tokens: int | None, methods: Mapping[str, MethodSpec] | None
                  ) -> tuple[int | None, str | None, str | None]:
    """The budget a configuration's shape implies, and why it cannot be this shape with the
    column (flag) at fault (None, None: it can). The budget is the draft tokens verified per
    step, so a speculative configuration that gives one verifies budget + 1 (a DDTree of 32
    nodes verifies 33; an EAGLE-3 tree of depth 8 and 63 nodes, 64). A method that always
    verifies a tree (``tree = true``: DDTree, Medusa, EAGLE-2) given verify tokens M and no
    budget verifies M - 1 tree nodes (left blank, its tree was priced at 0 nodes); a chain
    (``tree = false``: DFlash, PARD) drafts at most its block, so a budget above the block is
    no configuration of it. A chain given its block and no budget verifying its depth d + 1
    tokens (:func:`chain_depth`: the block, or block - 1 after DFlash's anchor) has budget d: a
    chain's budget is its depth, so ``eagle3,3,`` and ``eagle3,3,3`` are one configuration
    (one row key, one anchor, one question), whichever way it was written. So, one rule, a
    block with no budget verifying another count than d + 1 is no configuration when the
    method is a chain (``tree = false``: ``dflash,16,,17``, the old block + 1 way, verifies
    16), nor fewer than d + 1 for a sequential drafter (``passes = "block"``, not always a tree:
    EAGLE-3, MTP; ``eagle3,3,,2``, as ``eagle3,3,3,2`` is not): the verify tokens are at fault,
    the budget it implies is d.
    Every reader of a configuration (data rows, questions, tracked queries) asks this one
    function.

    >>> from ddtree_bayes.core.paths import bundled
    >>> table = load_methods(bundled("priors.toml").read_text())
    >>> shaped_budget("ddtree", 16, None, 257, table), shaped_budget("eagle3", 3, None, 9, table)
    ((256, None, None), (None, None, None))
    >>> shaped_budget("eagle3", 3, None, 4, table), shaped_budget("mystery", 5, None, 6, table)
    ((3, None, None), (5, None, None))
    >>> shaped_budget("ddtree", 16, 32, 500, table)[1:]
    ('a budget of 32 draft tokens is verified as 33 tokens per step, not 500', 'verify_tokens')
    >>> shaped_budget("dflash", 8, 8, None, table)[1:]
    ('dflash drafts a chain of at most 7 tokens per step (block 8 less its anchor), not a \
budget of 8', 'budget')
    >>> shaped_budget("dflash", 16, None, 16, table)   # the public rows' dflash,16,15,16
    (15, None, None)
    >>> shaped_budget("eagle3", 3, None, 2, table)
    (3, 'eagle3 with block 3 and no budget is a chain of 3 draft tokens, verified as 4 tokens \
per step, not 2', 'verify_tokens')
    >>> shaped_budget("dflash", 16, None, 17, table)
    (15, 'dflash with block 16 and no budget is a chain of 15 draft tokens (block 16 less its \
anchor), verified as 16 tokens per step, not 17', 'verify_tokens')
    """
    if method == AR_METHOD:
        return budget, None, None
    if budget is not None and verify_tokens is not None and verify_tokens != budget + 1:
        return budget, (f"a budget of {budget} draft token{'s' * (budget != 1)} is verified as "
                        f"{budget + 1} tokens per step, not {verify_tokens}"), "verify_tokens"
    spec = method_spec(method, methods)
    depth = None if block is None else chain_depth(method, block, methods)
    if (budget is None and depth is not None and verify_tokens == depth + 1
            and (spec is None or spec.tree is not True)):
        return depth, None, None   # a chain of its depth (a method in no table: a chain)
    if spec is None:
        return budget, None, None
    anchor = "" if depth == block else " less its anchor"
    if (budget is None and depth is not None and verify_tokens is not None
            and (verify_tokens != depth + 1 if spec.tree is False else
                 verify_tokens < depth + 1 and spec.passes == "block" and spec.tree is not True)):
        # (a chain verifies its depth + 1 tokens; a sequential drafter that may build a tree,
        # at least that many)
        return depth, (f"{method} with block {block} and no budget is a chain of {depth} draft "
                       f"token{'s' * (depth != 1)}{f' (block {block}{anchor})' if anchor else ''}"
                       ", verified as "
                       f"{depth + 1} tokens per step, not {verify_tokens}"), "verify_tokens"
    if spec.tree is False and budget is not None and depth is not None and budget > depth:
        return budget, (f"{method} drafts a chain of at most {depth} token{'s' * (depth != 1)} "
                        "per step (block "
                        f"{block}{anchor}), not a budget of {budget}"), "budget"
    if spec.tree is True and budget is None and verify_tokens is not None and verify_tokens > 1:
        return verify_tokens - 1, None, None
    return budget, None, None


def max_accept(method: str, block: int | None, budget: int | None,
               methods: Mapping[str, MethodSpec] | None = None,
               verify_tokens: int | None = None,
               trained_block: int | None = None) -> AcceptLimit:
    """The most tokens one step of a configuration can emit: the one rule every command uses
    (predict's and next's ``--accept``, tracked queries, optimize's acceptance curve, the
    report's fan, acceptance priors and inferred acceptance, and ``accept_len`` in the data).

    A step emits the draft tokens the target accepts along one path of what it verified, plus
    one bonus token from the target itself, so acceptance is at most the verified tree's depth
    + 1, and never more than the tokens verified (M = ``verify_tokens``). The bounds, the
    smallest of those known applying:

    - autoregressive decoding (``ar``): exactly 1 (no draft, the target's own token);
    - ``block`` when the block's position 0 is the anchor (``depth = "block - 1"``: DFlash and
      DDTree): the block holds the previous step's bonus token and ``block - 1`` drafted
      positions, no tree built from them is deeper, so a step emits at most ``block - 1``
      drafts + 1 (z-lab/dflash ``dflash_generate``: ``acceptance_length + 1 <= block_size``;
      liranringel/ddtree ``ddtree_generate``: depth limit ``block_size - 1``);
    - ``block + 1`` when the method's table says the block bounds the depth (``depth =
      "block"``, the default): a block drafter without an anchor (Medusa heads, PARD:
      ``passes = 1``) proposes ``block`` positions, so no tree built from them is deeper; a
      sequential drafter (EAGLE, MTP, a draft model: ``passes = "block"``) drafts one depth
      per pass, so its chain (block = depth = k) or its top-k tree is ``block`` deep, and its
      bound reads ``depth + 1 (block = depth)``;
    - ``budget + 1``: a tree of ``budget`` draft nodes is at most a chain of ``budget`` (the
      bound of a tree whose depth is not known: no block, or ``depth = "budget"``);
    - ``verify tokens``: M, when given (M = budget + 1 when derived);
    - the drafter's trained block (``trained_block``: its card's ``block_size``, core/
      drafters.py), as ``block`` is bounded: a block drafter emits no more per step than the
      block it was trained at, whatever block a question names (a block above it is refused
      where the card is read; the bound binds when no block is given).

    The method's entry is :func:`method_spec`'s: in ``methods``, else in the bundled table (a
    reader with no priors of its own, or a table that lacks it: the fraction form needs none).
    A method neither knows is bounded as ``depth = "block"``.
    Without block, budget or verify tokens nothing bounds it (``tokens`` is infinite).

    Examples
    --------
    >>> from ddtree_bayes.core.paths import bundled
    >>> table = load_methods(bundled("priors.toml").read_text())
    >>> max_accept("ddtree", 16, 32, table, 33).describe()
    'at most 16 tokens per step: block - 1 drafts + 1'
    >>> max_accept("medusa", 16, 32, table, 33).describe()
    'at most 17 tokens per step: block + 1'
    >>> chain = max_accept("eagle3", 4, 4, table, 5)
    >>> chain.refusal("--accept 6").split(" (")[0]
    '--accept 6 is above what eagle3 with block 4 can emit'
    >>> chain.describe()
    'at most 5 tokens per step: depth + 1 (block = depth)'
    >>> max_accept("eagle3", 8, 63, table).tokens, max_accept("ddtree", None, 32, table).rule
    (9.0, 'budget + 1')
    >>> max_accept("dflash", 16, 15, table, 16).describe(), max_accept("ar", None, None).tokens
    ('at most 16 tokens per step: block - 1 drafts + 1', 1.0)
    >>> max_accept("ddtree", None, 64, table, 65, trained_block=16).refusal("--accept 20")
    '--accept 20 is above what ddtree with a drafter trained at block 16 can emit (at most 16 \
tokens per step: the trained block - 1 drafts + 1)'
    >>> max_accept("ddtree", 16, 64, table, 65, trained_block=16).subject   # (the block's own)
    'ddtree with block 16'
    """
    if method == AR_METHOD:
        return AcceptLimit(1.0, "autoregressive decoding emits exactly 1", method)
    spec = method_spec(method, methods)
    bounds: list[tuple[float, str, str]] = []
    if block is not None and spec is not None and spec.depth == "block - 1":
        bounds.append((float(block), ANCHORED_RULE, f"{method} with block {block}"))
    elif block is not None and (spec is None or spec.depth == "block"):
        sequential = spec is not None and spec.passes == "block"
        bounds.append((block + 1.0, "depth + 1 (block = depth)" if sequential
                       else "block + 1", f"{method} with block {block}"))
    if trained_block is not None:
        anchored = spec is not None and spec.depth == "block - 1"
        bounds.append((float(trained_block) if anchored else trained_block + 1.0,
                       "the trained block - 1 drafts + 1" if anchored
                       else "the trained block + 1",
                       f"{method} with a drafter trained at block {trained_block}"))
    if budget is not None:
        bounds.append((budget + 1.0, "budget + 1", f"{method} with budget {budget}"))
    if verify_tokens is not None:
        bounds.append((float(verify_tokens), "the tokens it verifies",
                       f"{method} verifying {verify_tokens} token{'s' * (verify_tokens != 1)} "
                       "per step"))
    if not bounds:
        return AcceptLimit(math.inf, "unbounded: no block, budget or verify tokens", method)
    tokens, rule, subject = min(bounds, key=lambda b: b[0])   # (the first of equal bounds)
    return AcceptLimit(tokens, rule, subject)

"""The ``[methods.<name>]`` tables of the priors file: how each speculative method drafts
(sequential drafter passes per step, and whether the target verifies a tree whose
construction is paid per node). Used by the structured step form."""

from __future__ import annotations

from dataclasses import dataclass

from ddtree_bayes.core.errors import PriorsError


@dataclass(frozen=True)
class MethodSpec:
    """How a speculative method drafts: ``passes`` sequential drafter forward passes per step
    ("block": one per draft token, i.e. the block/depth; or a fixed count), and whether the
    target verifies a tree whose construction costs per node ("auto": when budget > block)."""

    name: str
    passes: str | int
    tree: bool | str

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
    """``[methods.<name>]``: passes = "block" | a whole number >= 0; tree = true | false | "auto"."""
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
        for key in ("rationale", "source"):
            if not isinstance(spec.get(key), str) or not spec[key].strip():
                raise PriorsError(f"missing '{key}'", file=path, column=column,
                                  fix=f'add {key} = "..." saying how this method drafts')
        unknown = sorted(set(spec) - {"passes", "tree", "rationale", "source"})
        if unknown:
            raise PriorsError(f"unknown key {unknown[0]!r}", file=path, column=column,
                              fix="use passes, tree, rationale and source")
        methods[name] = MethodSpec(name=name, passes=passes, tree=tree)
    return methods

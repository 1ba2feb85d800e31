"""What a method can emit: one rule (core/methods.py max_accept) for the most tokens a step
of a configuration can emit, and every place acceptance enters keeping to it (issue 18,
"Impossible acceptances are answered")."""

from __future__ import annotations

import math

import pytest

from ddtree_bayes.core.config import parse_priors
from ddtree_bayes.core.methods import max_accept
from ddtree_bayes.core.paths import bundled

METHODS = parse_priors(bundled("priors.toml").read_text(), "bundled").methods


# ------------------------------------------------------------------ the rule, by hand
@pytest.mark.parametrize(("method", "block", "budget", "verify", "tokens", "rule"), [
    # a block-16 DDTree: 16 draft positions, a tree of 32 nodes built on them, 33 verified
    ("ddtree", 16, 32, 33, 17, "block + 1"),
    ("ddtree", 16, 16, 17, 17, "block + 1"),
    ("ddtree", 16, 8, 9, 9, "budget + 1"),          # an 8-node tree is at most 8 deep
    ("ddtree", None, 32, 33, 33, "budget + 1"),     # depth not known: the budget bounds it
    ("ddtree", 16, 32, 10, 10, "the tokens it verifies"),   # an explicit --verify-tokens 10
    # a DFlash-16 chain verifies 16 tokens (1 anchor + 15 drafted): 15 + the bonus token
    ("dflash", 16, 15, 16, 16, "budget + 1"),
    # chains: block = depth = k draft tokens + the bonus token
    ("eagle3", 4, 4, 5, 5, "depth + 1 (block = depth)"),
    ("mtp", 3, 3, 4, 4, "depth + 1 (block = depth)"),
    ("draft-model", 5, None, 6, 6, "depth + 1 (block = depth)"),
    # an EAGLE top-k tree: 8 head passes deep, 63 nodes -> 9, not 64
    ("eagle3", 8, 63, 64, 9, "depth + 1 (block = depth)"),
    ("eagle2", 8, None, None, 9, "depth + 1 (block = depth)"),
    ("medusa", 4, 42, 43, 5, "block + 1"),
    ("ar", None, None, 1, 1, "autoregressive decoding emits exactly 1"),
    # a method with no [methods] table (the fraction form needs none): the block bounds it
    ("lookahead", 6, None, 7, 7, "block + 1"),
])
def test_the_rule_by_hand(method, block, budget, verify, tokens, rule):
    limit = max_accept(method, block, budget, METHODS, verify)
    assert (limit.tokens, limit.rule) == (tokens, rule)
    assert limit.admits(tokens) and not limit.admits(tokens + 0.01) and not limit.admits(0.99)


def test_nothing_known_is_unbounded_and_the_words_name_the_bound():
    assert math.isinf(max_accept("eagle3", None, None, METHODS).tokens)
    limit = max_accept("ddtree", 16, 32, METHODS, 33)
    assert limit.refusal("--accept 20") == ("--accept 20 is above what ddtree with block 16 can "
                                            "emit (at most 17 tokens per step: block + 1)")
    assert max_accept("ar", None, None).describe() == (
        "at most 1 token per step: autoregressive decoding emits exactly 1")

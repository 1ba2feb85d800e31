"""Argument groups shared by several commands (predict, track, next's --query), so every
command that names a configuration spells and documents its flags the same way."""

from __future__ import annotations

import argparse

from ddtree_bayes.core.config import DEFAULT_SEED
from ddtree_bayes.core.query_flags import ACCEPT_HELP, add_scenario_arguments

__all__ = ["ACCEPT_HELP", "add_format", "add_scenario_arguments", "add_seed_and_format"]


def add_format(p: argparse.ArgumentParser, formats: tuple[str, ...] = ("table", "json")) -> None:
    """--format: a table for people, the other formats for machines."""
    p.add_argument("--format", choices=formats, default="table",
                   help="table for people, " + " or ".join(f for f in formats if f != "table")
                   + " for machines (default: %(default)s)")


def add_seed_and_format(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    """The options most commands share: one seed for every random call, output format."""
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (default: %(default)s)")
    if formats:
        add_format(p, formats)

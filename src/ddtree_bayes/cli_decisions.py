"""CLI commands that turn the posterior into decisions: optimize, next (issue 6)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the main parser."""

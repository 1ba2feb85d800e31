"""CLI commands of the living posterior: add, update, history, diff, track (issue 4)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the main parser."""

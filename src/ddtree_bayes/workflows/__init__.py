"""Workflows built on the engine: living posterior, validation, decisions, report, simulation.

Import ``core``, ``engine`` and ``api``; never the CLI.
"""

"""Command line interface: argument parsing and printing. Nothing in the package imports it."""

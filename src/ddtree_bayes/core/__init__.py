"""Core: errors, paths, configuration, the measurement schema and the step arithmetic.

numpy and the standard library only; imports nothing else of the package.
"""

__version__ = "0.1.0"

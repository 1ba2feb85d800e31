"""ddtree-bayes: Bayesian throughput estimates for speculative decoding of LLMs on GPUs.

The public API (imported lazily, so ``import ddtree_bayes`` is cheap):

- :func:`fit` — fit the step model to a measurement file, save the artifact.
- :func:`load` — posterior draws and metadata of a saved fit.
- :func:`predict` — posterior throughput intervals as a tidy DataFrame.
- :func:`load_inputs` — validate a measurement file and a priors file.
"""

from __future__ import annotations

from ddtree_bayes.core import __version__

__all__ = ["fit", "load", "load_inputs", "predict", "__version__"]


def __getattr__(name: str):
    if name in ("fit", "load", "load_inputs", "predict"):
        from ddtree_bayes import api

        return getattr(api, name)
    raise AttributeError(f"module 'ddtree_bayes' has no attribute {name!r}")

"""ddtree-bayes: Bayesian throughput estimates for speculative decoding of LLMs on GPUs.

The public API (light to import: PyMC is imported only when a fit samples):

- :func:`fit` — fit the step model to a measurement file and save the posterior.
- :func:`load` — a saved fit (the latest by default): draws, metadata, stored inputs.
- :func:`predict` — posterior throughput intervals as a tidy DataFrame.
- :func:`load_inputs` — validate a measurement file and a priors file without fitting.

>>> import ddtree_bayes as db
>>> [name for name in ("fit", "load", "predict") if name in dir(db)]
['fit', 'load', 'predict']
"""

from __future__ import annotations

from ddtree_bayes.api import fit, load, load_inputs, predict
from ddtree_bayes.core import __version__

__all__ = ["fit", "load", "load_inputs", "predict", "__version__"]

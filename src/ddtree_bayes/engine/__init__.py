"""Engine: the PyMC model, sampling, the fit artifact and the numpy predictive.

Imports only ``core``. PyMC, nutpie and ArviZ are imported inside ``model``, ``inference``
and ``compare``; ``predictive`` and ``store`` (the predict path) never import them.
"""

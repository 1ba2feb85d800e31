"""A fit's four root attributes (its metadata and the three texts it stores) are written by
one helper, ``engine/store.py write_root_attrs``: ``save`` (a fit) and ``save_resampled``
(``update``'s reweighted fit, a copy of its parent rewritten in place) each wrote all four."""

from __future__ import annotations

import hashlib
import json

import h5py
import numpy as np
import xarray as xr

from ddtree_bayes.engine import store


def _root(path) -> dict[str, str]:
    with h5py.File(path, "r") as fh:
        return {k: (v.decode() if isinstance(v, bytes) else str(v))
                for k, v in fh.attrs.items()
                if k in (store.META_ATTR, store.DATA_ATTR, store.PRIORS_ATTR,
                         store.HARDWARE_ATTR)}


def test_save_and_save_resampled_write_the_same_four_root_attributes(tmp_path):
    models = tmp_path / "models"
    post = xr.Dataset({"a": (("chain", "draw"), np.arange(8.0).reshape(2, 4))})
    texts = {"data": "model,hardware\nk,b300\n", "priors": "[model]\n", "hardware": "h\n"}
    meta = {"fit_id": "p", "converged": True, "model": {"moe_form": "linear"}}
    parent = store.save(xr.DataTree.from_dict({"posterior": post}), meta, texts, models)
    again = {"data": texts["data"] + "k,h200\n", "priors": "[model]\n# 2\n", "hardware": "h2\n"}
    child = store.save_resampled(parent, np.arange(8)[::-1], {},
                                 {**meta, "fit_id": "r"}, again, models)

    for path, m, t in ((parent, meta, texts), (child, {**meta, "fit_id": "r"}, again)):
        attrs: dict[str, str] = {}
        written = store.write_root_attrs(attrs, m, t)
        assert _root(path) == attrs
        assert len(attrs) == 4
        # the stored texts as given, the metadata with its digests (an empty card set's
        # digest is the sha256 of "{}", by hand)
        assert (attrs[store.DATA_ATTR], attrs[store.PRIORS_ATTR],
                attrs[store.HARDWARE_ATTR]) == (t["data"], t["priors"], t["hardware"])
        assert json.loads(attrs[store.META_ATTR]) == written
        assert written["cards_sha256"] == hashlib.sha256(b"{}").hexdigest()
        assert written["fit_id"] == m["fit_id"]

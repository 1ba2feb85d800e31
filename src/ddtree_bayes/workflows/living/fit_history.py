"""The fits on disk and their parameters (``history``, ``diff``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddtree_bayes.core.data import (
    Measurements,
)
from ddtree_bayes.core.errors import DDTreeBayesError


# ---------------------------------------------------------------- parameters, history
def scalar_parameters(draws, include_auxiliary: bool = False) -> dict[str, Any]:
    """``{"moe_share[b300x8]": draws, ...}`` for every scalar of the posterior, labelled by
    coordinate: the variable's own dimensions as its artifact names them
    (:attr:`~ddtree_bayes.engine.posterior.Fit.dims`, read with its draws), else the labels
    of the fit's diagnostics, else the one coordinate of its length. The non-centred
    auxiliaries (``*_z``) are left out unless asked for. A constant parameter the
    diagnostics leave out (one engine's ``spec_fixed_engine``), with every coordinate of
    length 1, was labelled by its index: ``spec_fixed_engine[0]``."""
    import itertools

    import numpy as np

    labels_by_var: dict[str, list[str]] = {}
    for p in draws.meta.get("diagnostics", {}).get("parameters", []):
        name, _, rest = p["parameter"].partition("[")
        if rest:
            labels_by_var.setdefault(name, []).append(rest[:-1])
    coords = draws.meta.get("coords", {})
    dims = draws.dims
    out: dict[str, Any] = {}
    for name, arr in draws.variables.items():
        if name.endswith("_z") and not include_auxiliary:
            continue
        arr = np.asarray(arr).reshape(arr.shape[0], -1) if np.ndim(arr) > 1 else np.asarray(arr)
        if arr.ndim == 1:
            out[name] = arr
            continue
        own = dims.get(name, ())
        labels = labels_by_var.get(name, [])
        if own and all(d in coords for d in own):   # (several dimensions: "a, b", as arviz)
            labels = [", ".join(map(str, combo))
                      for combo in itertools.product(*(coords[d] for d in own))]
        if len(labels) != arr.shape[1]:
            same = [v for v in coords.values() if len(v) == arr.shape[1]]
            labels = [str(x) for x in same[0]] if len(same) == 1 else [
                str(i) for i in range(arr.shape[1])]
        for j, lab in enumerate(labels):
            out[f"{name}[{lab}]"] = arr[:, j]
    return out


def _as_pairs(params: dict[str, Any], fit, other, labels: set[str]) -> dict[str, Any]:
    """``params`` of a fit of one model relabelled as the (model, system) pairs of ``other``,
    a fit of several, where it holds the same label: ``step_ar_ms[b300x8]`` is
    ``step_ar_ms[kimi-k2.6@b300x8]`` there (and a group ``b300x8/sglang/ddtree`` is
    ``kimi-k2.6@b300x8/sglang/ddtree``), so ``diff`` compares them instead of listing one as
    removed and the other as added (``labels``: ``other``'s parameter names). Unchanged
    otherwise."""
    from ddtree_bayes.core.pairs import pair_label
    from ddtree_bayes.engine.target_models import fit_models

    mine, theirs = fit_models(fit), fit_models(other)
    if len(mine) != 1 or len(theirs) < 2:
        return params
    out = {}
    for name, value in params.items():
        var, bracket, rest = name.partition("[")
        paired = f"{var}[{pair_label(mine[0], rest, True)}"
        out[paired if bracket and name not in labels and paired in labels else name] = value
    return out


def _priors_of(draws) -> dict:
    """The priors a fit stored (name -> Prior), or none when its priors text does not load."""
    try:
        return dict(draws.priors.priors)
    except Exception:  # noqa: BLE001 - the change's scale is advice; diff must still answer
        return {}


#: The dimensions of a fit's parameters that belong to its target model: a system of a fit
#: of one model is that model's deployment, and its overhead and acceptance groups are too
MODEL_DIMS = frozenset({"system", "overhead_group", "acceptance_group"})


def unlike_models(a, b) -> tuple[list[str], list[str]] | None:
    """The models of fits ``a`` and ``b`` when they share none (each fit's, sorted), else None
    (the same model, an overlap, or a fit that names no model)."""
    from ddtree_bayes.engine.target_models import fit_models

    ma, mb = fit_models(a), fit_models(b)
    return (ma, mb) if ma and mb and not set(ma) & set(mb) else None


def model_dependent(fit, name: str) -> bool:
    """Is parameter ``name`` (as :func:`scalar_parameters` labels it) one of the fit's model:
    per system, overhead group or acceptance group (:data:`MODEL_DIMS`), by the dimensions
    its artifact names, else by its label among the fit's coordinates? A population parameter
    (a scalar, an engine effect, a relation) is not. A label found in no coordinate (an index)
    counts as the model's: nothing says it is shared."""
    var, bracket, rest = name.partition("[")
    if not bracket:
        return False
    own = fit.dims.get(var)
    if own:
        return bool(MODEL_DIMS & set(own))
    label, coords = rest[:-1], fit.meta.get("coords", {})
    return not any(label in map(str, values) for dim, values in coords.items()
                   if dim not in MODEL_DIMS)


def parameter_table(a, b, include_auxiliary: bool = False) -> list[dict]:
    """Median and 90% interval of every scalar parameter in fits ``a`` and ``b``, and from A
    to B the change of the 90% width (relative) and of the median: relative for a positive
    parameter, the difference B - A (``median_shift``, ``change_scale`` "absolute";
    ``median_change`` None) for one on the real line
    (:func:`ddtree_bayes.core.spec.on_real_line`: log-scale values, engine effects, offsets,
    a normal prior), where a ratio means nothing (``spec_fixed_log_mu`` -0.409 -> -0.664 was
    "-63%"). Fits of models that share none (:func:`unlike_models`): a parameter of each
    fit's model (:func:`model_dependent`) under one label is two quantities (Kimi's and
    Llama's ``step_ar_ms[b300x8]`` was "-60%"): ``models_differ`` True, no change."""
    import numpy as np

    from ddtree_bayes.core.spec import on_real_line

    priors = {**_priors_of(a), **_priors_of(b)}
    unlike = unlike_models(a, b) is not None

    pa, pb = scalar_parameters(a, include_auxiliary), scalar_parameters(b, include_auxiliary)
    pa, pb = _as_pairs(pa, a, b, set(pb)), _as_pairs(pb, b, a, set(pa))
    rows = []
    for name in dict.fromkeys([*pb, *pa]):
        row: dict[str, Any] = {"parameter": name}
        for tag, p in (("a", pa), ("b", pb)):
            if name in p:
                lo, med, hi = np.quantile(p[name], [0.05, 0.5, 0.95])
                row[tag] = {"median": float(med), "lo90": float(lo), "hi90": float(hi)}
            else:
                row[tag] = None
        if row["a"] and row["b"] and unlike and (model_dependent(a, name)
                                                 or model_dependent(b, name)):
            row["models_differ"] = True
        elif row["a"] and row["b"]:
            wa = row["a"]["hi90"] - row["a"]["lo90"]
            wb = row["b"]["hi90"] - row["b"]["lo90"]
            row["width_change"] = (wb / wa - 1) if wa > 0 else None
            ma = row["a"]["median"]
            var = name.partition("[")[0]
            real = on_real_line(var, priors.get(var))
            row["median_change"] = None if real or not ma else (row["b"]["median"] - ma) / abs(ma)
            row["median_shift"] = row["b"]["median"] - ma
            row["change_scale"] = "absolute" if real else "relative"
        rows.append(row)
    return rows


def list_fits(models: Path) -> list[dict]:
    """Every saved fit, oldest first, from its metadata only (h5py attributes); ``form`` is its
    model forms as ``compare`` names them ("roofline/structured")."""
    from ddtree_bayes.core.config import form_label
    from ddtree_bayes.engine import store

    latest = None
    try:
        latest = store.resolve(models).stem
    except DDTreeBayesError:
        pass
    out = []
    for path in store.fit_files(models):
        try:
            meta = store.load_meta(path)
        except DDTreeBayesError as err:
            out.append({"fit_id": path.stem, "path": str(path), "readable": False,
                        "error": str(err), "created_utc": None, "latest": path.stem == latest})
            continue
        data = meta.get("data", {})
        out.append({
            "fit_id": meta.get("fit_id", path.stem), "path": str(path), "readable": True,
            "created_utc": meta.get("created_utc"), "data_sha256": data.get("sha256"),
            "rows": data.get("rows"), "converged": meta.get("converged"),
            "failures": meta.get("failures", []), "seed": meta.get("seed"),
            "sampler": meta.get("sampler"), "total_s": meta.get("timings", {}).get("total_s"),
            "update": meta.get("update"), "made_by": meta.get("made_by"),
            "reweight": meta.get("reweight"), "form": form_label(meta),
            "latest": path.stem == latest})
    # (an unreadable fit, whose metadata holds its created_utc, where its id's time puts it)
    out.sort(key=lambda r: store.fit_order(str(r["created_utc"] or "") or None,
                                           str(r["fit_id"]), Path(str(r["path"])).name))
    return out


def stored_rows(draws) -> Measurements:
    """The measurements a fit was made on (from the text stored in the artifact)."""

    return draws.measurements

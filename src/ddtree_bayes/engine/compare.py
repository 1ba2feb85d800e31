"""Model comparison by PSIS-LOO (arviz-stats) and model weights for model averaging.

Fits of the same data with different model forms (e.g. ``moe_form = "power"`` vs
``"linear"``) are compared on their pointwise log-likelihood of log tok/s: per row, or per
configuration (all its repeated runs) above 2,000 rows (:mod:`ddtree_bayes.engine.fitted_rows`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core.config import DEFAULT_SEED, form_label
from ddtree_bayes.core.data import listed
from ddtree_bayes.core.errors import QueryError
from ddtree_bayes.engine import fitted_rows as M
from ddtree_bayes.engine.posterior import Fit

#: Fewest posterior draws PSIS can smooth: it fits a Pareto tail to the largest
#: ceil(min(0.2 S, 3 sqrt(S))) importance ratios of S draws and needs at least 5 of them.
MIN_PSIS_DRAWS = 25


def require_psis_draws(draws: Fit, what: str) -> None:
    """Refuse ``what`` (PSIS-LOO, PIT, power-scaling) of a fit with fewer draws than PSIS
    smooths: arviz-stats stopped with "n_draws_tail must be at least 5", an internal error."""
    if draws.n_draws < MIN_PSIS_DRAWS:
        raise QueryError(f"fit {draws.meta['fit_id']} has {draws.n_draws} posterior draws; "
                         f"{what} needs at least {MIN_PSIS_DRAWS} (PSIS fits a tail to the "
                         "largest importance ratios)",
                         fix="refit with more --draws (the default is 1000 per chain)")


#: What to do instead of weighing a resample's draws (compare's fix and the report's).
RESAMPLE_FIX = "`ddtree-bayes update --refit` samples the same data with NUTS"


def resample_reason(meta: dict, n_draws: int, what: str = "PSIS-LOO") -> str | None:
    """Why ``what`` (PSIS-LOO, or power-scaling, which weighs draws the same way) cannot use
    a fit's ``n_draws`` draws, or None: an ``update`` that reweighted a NUTS fit's draws and
    resampled them (engine/importance.py) holds repeated draws in chains that are no Markov
    chains.

    >>> why = resample_reason({"fit_id": "b", "reweight": {"parent_fit": "a",
    ...                        "distinct_draws": 900}}, 4000, "power-scaling")
    >>> why.split(": ")[0], why.endswith("give power-scaling nothing it can trust")
    ('fit b is an importance resample of fit a (900 distinct draws of 4000)', True)
    >>> resample_reason({"fit_id": "a"}, 4000) is None
    True
    """
    resample = meta.get("reweight")
    if not resample:
        return None
    return (f"fit {meta['fit_id']} is an importance resample of fit "
            f"{resample.get('parent_fit')} ({resample.get('distinct_draws')} distinct draws of "
            f"{n_draws}): its repeated draws and chains that are no Markov chains give {what} "
            "nothing it can trust")


def pointwise_loglik(draws: Fit, seed: int = DEFAULT_SEED):
    """(measurements, log-likelihood (draws, rows), modelled log tok/s (draws, rows)): per
    row, for small data (a (draws, rows) array; :func:`loo_tree` switches to configurations
    above :data:`~ddtree_bayes.engine.fitted_rows.LOO_ROW_LIMIT` rows or with repeated runs)."""
    mo = M.moments(draws, seed)
    log_mu = mo.row_log_mu()
    sd = mo.sd[:, mo.row_config]
    return mo.measurements, C.row_logp(mo.log_tok_s[None, :], log_mu, sd, mo.nu), log_mu


def loo_tree(draws: Fit, chains: int, seed: int = DEFAULT_SEED, unit: str | None = None):
    """A DataTree with the groups arviz-stats' LOO functions need: per row, or per
    configuration for large data or repeated runs (``unit``;
    :func:`~ddtree_bayes.engine.fitted_rows.loo_unit`). The tree's ``attrs["unit"]`` says
    which."""
    import xarray as xr

    mo = M.moments(draws, seed)
    pw = M.pointwise(mo, np.random.default_rng(seed), unit)
    dim = "measurement" if pw["unit"] == "row" else "configuration"
    shape = (chains, draws.n_draws // chains, len(pw["labels"]))

    def ds(arr):
        return xr.Dataset({"log_tok_s": (("chain", "draw", dim), arr.reshape(shape))},
                          coords={dim: pw["labels"]})

    posterior = xr.Dataset({k: (("chain", "draw"), v.reshape(shape[:2]))
                            for k, v in draws.variables.items() if v.ndim == 1})
    tree = xr.DataTree.from_dict({
        "posterior": posterior, "log_likelihood": ds(pw["loglik"]),
        "posterior_predictive": ds(pw["pp"]),
        "observed_data": xr.Dataset({"log_tok_s": (dim, pw["observed"])},
                                    coords={dim: pw["labels"]})})
    tree.attrs["unit"] = pw["unit"]
    return tree


#: Model weights: Bayesian-bootstrap pseudo-BMA+ hedges for the uncertainty of elpd. On
#: this little data stacking is winner-take-all and its weights flip between refits.
WEIGHT_METHODS = ("bb-pseudo-bma", "stacking", "pseudo-bma")


def first_sentence(text: str) -> str:
    """The first sentence of a library's warning, for a one-line note: cut at a full stop
    that ends a sentence, not at a decimal point (ArviZ's Pareto k note read "greater than
    0" for "greater than 0.70").

    >>> first_sentence("k is greater than 0.70 for one or more samples. You should ...")
    'k is greater than 0.70 for one or more samples'
    """
    return re.split(r"\.(?:\s|$)", text.strip(), maxsplit=1)[0]


def compare_fits(fits: list[Fit], seed: int = DEFAULT_SEED,
                 method: str = WEIGHT_METHODS[0]) -> dict:
    """PSIS-LOO comparison with model weights; refuses fits of different data."""
    import warnings

    import arviz_stats as azs

    if len(fits) < 2:
        raise QueryError("need at least two fits to compare",
                         fix="fit the other form, e.g. `ddtree-bayes fit --moe-form linear`")
    named = [d.meta["fit_id"] for d in fits]
    twice = next((i for i in named if named.count(i) > 1), None)
    if twice is not None:   # (`--fits X,latest` with X the latest ranked X alone, weight 1)
        raise QueryError(f"fit {twice} is named twice (as its id and as latest, say): a fit "
                         "compared with itself ranks nothing",
                         fix="compare two or more different fits (ids from "
                             "`ddtree-bayes history`)")
    for d in fits:
        if not d.meta["converged"]:
            raise QueryError(f"fit {d.meta['fit_id']} failed its convergence gates "
                             f"({'; '.join(d.meta['failures'])}): PSIS-LOO of chains that did "
                             "not mix ranks nothing", fix="refit it (`ddtree-bayes fit`), or "
                                                          "leave it out of --fits")
        require_psis_draws(d, "PSIS-LOO")
        why = resample_reason(d.meta, d.n_draws)
        if why:   # (update's PSIS reweight: engine/importance.py, workflows/living)
            raise QueryError(why, fix=f"{RESAMPLE_FIX}; compare that fit")
    if not all(same_data(d, fits[0]) for d in fits[1:]):
        raise QueryError("the fits were made on different data; LOO compares models on the "
                         "same data only", fix="refit both on the current data")
    trees = {}
    for d in fits:
        label = f"{d.meta['fit_id']} ({form_label(d.meta)})"
        trees[label] = loo_tree(d, int(d.meta["sampler"]["chains"]), seed)
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = azs.compare(trees, method=method, round_to="none")  # (None: 2 sig. figures)
        loos = {k: azs.loo(t, pointwise=True) for k, t in trees.items()}
        khat = {k: [float(x) for x in np.asarray(loo.pareto_k.values).ravel()]
                for k, loo in loos.items()}
    notes += sorted({first_sentence(str(w.message)) for w in caught})
    if any(t.attrs["unit"] == "configuration" for t in trees.values()):
        # (the fits share their data: the hash check above)
        data = fits[0].measurements
        repeated = M.data_repeated(data)
        reason = M.loo_unit_reason(len(data.rows), repeated)
        runs = " (all its repeated runs)" if repeated else ""
        notes.append(f"{reason}: PSIS-LOO leaves out one configuration{runs} at a time, "
                     "not one row")
    rows = []
    for label, r in table.iterrows():
        rows.append({"model": label, "rank": int(r["rank"]), "elpd_loo": float(r["elpd"]),
                     "p_loo": float(r["p"]), "elpd_diff": float(r["elpd_diff"]),
                     # each fit's own PSIS-LOO se, as `report` gives it: under bb-pseudo-bma
                     # arviz-stats puts the Bayesian bootstrap's sd of elpd in "se" (1.57 for
                     # the report's 1.71 on the bundled fit), another number per --weights
                     "se": float(loos[label].se), "dse": float(r["dse"]),
                     "weight": float(r["weight"]),
                     "pareto_k_above_0.7": sum(k > 0.7 for k in khat[label]),
                     # the k up to which arviz-stats trusts PSIS for this fit's S draws,
                     # min(1 - 1/log10(S), 0.7) (engine/psis.py khat_threshold): below 0.7
                     # for S < 2154, where a count above 0.7 missed the k it warns of
                     "pareto_k_threshold": float(loos[label].good_k),
                     "pareto_k_above_threshold": sum(k > float(loos[label].good_k)
                                                     for k in khat[label])})
    ids = {f"{d.meta['fit_id']} ({form_label(d.meta)})": d.meta["fit_id"] for d in fits}
    return {"rows": rows, "weights": {ids[r["model"]]: r["weight"] for r in rows},
            "method": method, "notes": notes}


def same_data(fit: Fit, other: Fit) -> bool:
    """Whether two fits were made on the same rows: the same data file's hash, or texts that
    differ only in the rows' notes and sources (core/data.py ``fitted_rows_same``), which no
    fit reads (``check_fit`` calls such a file unchanged: a fit made after an edit of a note
    and one made before are fits of the same data)."""
    from ddtree_bayes.core.data import fitted_rows_same

    return (fit.meta["data"]["sha256"] == other.meta["data"]["sha256"]
            or fitted_rows_same(fit.data_csv, other.data_csv))


def inputs_unlike(fit: Fit, anchor: Fit) -> list[str]:
    """What ``fit`` was made on that ``anchor`` was not, beyond the model forms: its data,
    priors file, hardware table (each GPU's values, sources aside, as ``diff`` compares them),
    model cards (the fields the model reads, of a model both fits store a card of) and drafter
    cards (where both fits price drafter passes). Empty when the two answer from the same
    inputs: what :func:`latest_per_form` mixes. A fit of the same data and priors made before
    data/hardware.csv changed was mixed into `--model-average` without a word: its transfers
    at the old bandwidths."""
    from ddtree_bayes.core.drafters import card_key
    from ddtree_bayes.core.hardware_table import SOURCE_COLUMNS
    from ddtree_bayes.core.model_cards import modelled

    out = ["data"] if not same_data(fit, anchor) else []
    out += [what for what in ("priors",)
            if fit.meta[what]["sha256"] != anchor.meta[what]["sha256"]]

    def values(f: Fit) -> dict:
        return {n: {c: (v or "").strip() for c, v in row.items() if c not in SOURCE_COLUMNS}
                for n, row in f.hardware.items()}

    if fit.hardware_csv != anchor.hardware_csv and values(fit) != values(anchor):
        out.append("hardware table")

    def cards(f: Fit) -> dict:
        model = f.meta.get("model", {})
        stored = dict(model.get("model_cards") or {})
        if model.get("card"):
            stored[model["card"]["model"]] = model["card"]
        return {name: modelled(card) for name, card in stored.items()}

    mine, theirs = cards(fit), cards(anchor)   # (a form that reads no card stores none)
    if any(mine[name] != theirs[name] for name in mine.keys() & theirs.keys()):
        out.append("model cards")

    def drafters(f: Fit) -> list[str] | None:
        stored = f.meta.get("model", {}).get("drafter_cards")
        return None if stored is None else sorted(card_key(d) for d in stored)

    if None not in (drafters(fit), drafters(anchor)) and drafters(fit) != drafters(anchor):
        out.append("drafter cards")
    return out


def latest_per_form(anchor: Fit, flag: str = "--model-average",
                    workdir: Path | None = None) -> list[Fit]:
    """``anchor`` and the latest converged fit of each other MoE form made on the same data
    and priors file (``flag``: what asked for them, named in the error): a fit made before the
    priors changed would mix the old priors into the answer; `--fit X --model-average` used
    another fit of X's form and still named X. ``workdir``: where models/ is (default: here)."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.errors import DDTreeBayesError
    from ddtree_bayes.engine import store

    if anchor.meta.get("reweight"):   # (compare_fits refuses it, worded for `compare`)
        raise QueryError(f"fit {anchor.meta['fit_id']} is an importance resample of fit "
                         f"{anchor.meta['reweight'].get('parent_fit')} (update without a "
                         f"refit): {flag} weighs fits by PSIS-LOO, which needs NUTS draws",
                         fix="`ddtree-bayes update --refit` samples the same data with NUTS")
    fits_dir = store.fits_dir(paths.models_dir(workdir))
    found: list[tuple[tuple, Fit]] = []
    for path in sorted(fits_dir.glob("*.nc")):
        try:
            d = store.load_fit(path)
        except DDTreeBayesError:
            continue
        if d.meta.get("reweight"):   # an importance resample: no draws PSIS-LOO can weigh
            continue
        if d.meta["converged"] and not inputs_unlike(d, anchor):
            found.append((store.fit_order(d.meta.get("created_utc"), d.meta["fit_id"],
                                          path.name), d))
    best: dict[str, Fit] = {}
    for _, d in sorted(found, key=lambda pair: pair[0]):   # oldest first: the latest wins
        best[form_label(d.meta)] = d
    if anchor.meta["converged"]:   # the fit asked for (--fit) stands for its own form
        best[form_label(anchor.meta)] = anchor
    if len(best) < 2:
        raise QueryError(f"{flag} needs converged fits of two model forms on the data, "
                         f"priors, hardware table and cards of fit {anchor.meta['fit_id']}; "
                         f"found {len(best)}",
                         fix="fit the other form, e.g. `ddtree-bayes fit --moe-form linear`"
                             + (", or name the fits with --fits A,B" if flag == "compare"
                                else ""))
    return list(best.values())


def model_average(anchor: Fit, seed: int = DEFAULT_SEED, flag: str = "--model-average",
                  workdir: Path | None = None, warnings: list[str] | None = None
                  ) -> list[tuple[Fit, float]]:
    """``--model-average``'s mixture: :func:`latest_per_form` of ``anchor``, each fit with its
    PSIS-LOO weight (:func:`compare_fits`: Bayesian-bootstrap pseudo-BMA+, the default of
    :data:`WEIGHT_METHODS`), for ``predict`` and the API alike.
    ``warnings`` gets a line when the weights rest on rows whose Pareto k is above the
    threshold PSIS trusts (:func:`unreliable_weights`): `compare` says so, and the mixture
    said nothing."""
    fits = latest_per_form(anchor, flag, workdir)
    result = compare_fits(fits, seed=seed)
    weights = result["weights"]
    # (the fits share their data: compare_fits refuses others)
    line = unreliable_weights(result, flag, M.data_loo_unit(fits[0].measurements))
    if line is not None and warnings is not None:
        warnings.append(line)
    return [(d, weights[d.meta["fit_id"]]) for d in fits]


def unreliable_weights(result: dict, flag: str = "--model-average", unit: str = "row"
                       ) -> str | None:
    """One line when any fit of :func:`compare_fits`' ``result`` has rows whose Pareto k is
    above its threshold (their leave-one-out estimate, so the weights, unreliable), naming the
    weights and each such fit's count; None when every k is below it. ``unit``: what the k
    values are of, ``"row"`` or ``"configuration"``
    (:func:`~ddtree_bayes.engine.fitted_rows.data_loo_unit`).

    >>> rows = [{"model": "A (roofline/structured)", "weight": 1.0, "pareto_k_threshold": 0.7,
    ...          "pareto_k_above_threshold": 2}]
    >>> print(unreliable_weights({"rows": rows, "weights": {"A": 1.0}}))
    --model-average: the PSIS-LOO weights (A 1.00) rest on leave-one-out estimates with Pareto \
k > 0.7, unreliable, for 2 rows of fit A (roofline/structured): the mixture may lean on the wrong \
form (`ddtree-bayes compare` lists them; `ddtree-bayes validate` refits each row left out)
    """
    bad = [r for r in result["rows"] if r["pareto_k_above_threshold"] > 0]
    if not bad:
        return None
    threshold = max(r["pareto_k_threshold"] for r in bad)
    noun = f" {unit}{'s' if bad[0]['pareto_k_above_threshold'] != 1 else ''}"   # (the first's)
    counts = [f"{r['pareto_k_above_threshold']}{noun if i == 0 else ''} of fit {r['model']}"
              for i, r in enumerate(bad)]
    weights = ", ".join(f"{k} {w:.2f}" for k, w in sorted(result["weights"].items()))
    return (f"{flag}: the PSIS-LOO weights ({weights}) rest on leave-one-out estimates with "
            f"Pareto k > {threshold:.2g}, unreliable, for {listed(counts)}: the mixture may "
            "lean on the wrong form (`ddtree-bayes compare` lists them; `ddtree-bayes validate` refits each "
            "row left out)")


def mixture_entries(mixture: list[tuple[Fit, float]]) -> list[dict]:
    """The fits and weights of a mixture as the JSON's (and the API frame's)
    ``model_average``: ``{fit_id, form, weight}`` each."""
    return [{"fit_id": d.meta["fit_id"], "form": form_label(d.meta), "weight": w}
            for d, w in mixture]

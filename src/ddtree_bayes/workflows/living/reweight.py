"""``update`` without a refit: reweight a fit's posterior draws by the new rows' likelihood.

When the model of the new data has exactly the parameters and priors of a sampled (NUTS)
fit, the new posterior is that fit's posterior times the new rows' likelihood, and the fit's
draws are an importance sample of it. The ratios are Pareto-smoothed
(:mod:`ddtree_bayes.engine.psis`, Vehtari et al. 2024, JMLR 25(72)) and trusted when the
fitted Pareto shape ``k <= min(1 - 1/log10(S), 0.7)`` (0.70 for the default 4000 draws) and
the reweighted draws keep an effective sample size of at least a fit's own gate (bulk ESS
400). The
draws are then importance-resampled (stratified) into a normal fit artifact that
predict/report/history/diff read unchanged; otherwise ``update`` refits.

Reweighting always starts from a sampled fit (the *proposal*): after a reweighted update the
next one reweights the same NUTS draws by every row added since them, so resampling
duplicates never compound and ``k`` grows with what has accumulated until it asks for a
refit.
"""
from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtree_bayes.core.config import MIN_ESS_BULK, PriorsConfig
from ddtree_bayes.core.data import Measurements
from ddtree_bayes.core.errors import ArtifactError

MADE_BY_REWEIGHT = "psis-reweight"
MADE_BY_REFIT = "refit"
RESAMPLING = ("stratified resampling (Kitagawa 1996) of the proposal fit's draws with the "
              "Pareto-smoothed importance weights, as many draws as it has, in random order "
              "(seeded): equally weighted draws that predict/report/diff use as they are")
KEPT = ("none: every importance weight is equal (no row added since the proposal fit), so "
        "its draws are kept as they are, in their order")
REFERENCE = ("Vehtari, Simpson, Gelman, Yao, Gabry (2024), Pareto smoothed importance "
             "sampling, JMLR 25(72):1-58")


def provenance(meta: dict) -> str | None:
    """One sentence on how a reweighted fit was made and whose diagnostics it carries (None
    for a sampled fit): for the report's verdict."""
    rw = meta.get("reweight")
    if meta.get("made_by") != MADE_BY_REWEIGHT or not rw:
        return None
    k = rw.get("pareto_k")
    rows = ", ".join(str(r) for r in rw.get("rows", []))
    return (f"not sampled: fit {rw['proposal_fit']}'s NUTS draws reweighted by the likelihood of "
            f"row{'s' if len(rw.get('rows', [])) != 1 else ''} {rows or '-'} (Pareto-smoothed "
            f"importance sampling, Pareto k {'-' if k is None else f'{k:.2f}'} <= "
            f"{rw['k_threshold']:.2f}) and resampled: about {rw['n_eff']:.0f} effective draws. "
            f"R-hat, ESS and divergences are that NUTS run's; `update --refit` samples afresh")


def pair_rows(old: Measurements, new: Measurements
              ) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """Match rows by what a fit reads of them (core/data.py ``Measurement.fitted_key``: their
    notes and sources left out): (indices of ``new`` rows that ``old`` lacks,
    ``(old index, new index)`` pairs of equal rows, indices of ``old`` rows not in ``new``)."""
    free: dict[tuple, list[int]] = defaultdict(list)
    for j, m in enumerate(new.rows):
        free[m.fitted_key()].append(j)
    kept, removed = [], []
    for i, m in enumerate(old.rows):
        slots = free.get(m.fitted_key())
        if slots:
            kept.append((i, slots.pop(0)))
        else:
            removed.append(i)
    used = {j for _, j in kept}
    return [j for j in range(len(new.rows)) if j not in used], kept, removed


def proposal_of(previous, models: Path):
    """The sampled fit whose draws a reweight of ``previous`` starts from: ``previous``
    itself, or, if it was reweighted, its proposal. (draws, None) or (None, why not)."""
    from ddtree_bayes.engine import store

    info = previous.meta.get("reweight")
    if previous.meta.get("made_by") != MADE_BY_REWEIGHT or not info:
        return previous, None
    try:
        return store.load_held(store.resolve(models, info["proposal_fit"])), None
    except ArtifactError:
        return None, (f"fit {previous.meta['fit_id']} was reweighted from fit "
                      f"{info['proposal_fit']}, which is no longer readable")


def structure_changes(proposal, measurements: Measurements, cfg: PriorsConfig,
                      structure: dict) -> tuple[list[str], Any, dict]:
    """Why the model of ``measurements`` does not have the proposal fit's parameters and
    priors (new systems, overhead groups or relations, another model card or form ...):
    (reasons, the new data's ModelSpec, its ``meta["model"]`` in the proposal's coordinate
    order). A structured-form group whose drafter passes or tree nodes now vary keeps its
    parameters (its own ratio replaces the population's: :func:`engine.reweight.restructured`)
    and is no reason. ``structure``: the hardware table and model cards of the inputs
    (:meth:`ddtree_bayes.engine.fitting.FitInputs.structure`)."""
    from ddtree_bayes.core import spec as S
    from ddtree_bayes.core.pairs import target_models_meta
    from ddtree_bayes.engine.target_models import fit_models

    spec = S.build_spec(measurements, cfg, **structure)
    meta = proposal.meta
    # the models' names as `fit` stores them (one model, or several): not the first row's
    now = json.loads(json.dumps({**target_models_meta(measurements), **S.model_meta(spec, cfg)}))
    reasons = []
    before_models, now_models = fit_models(proposal), list(measurements.models)
    if before_models != now_models:
        reasons.append(f"the target models change ({', '.join(before_models) or 'none'} -> "
                       f"{', '.join(now_models)})")
    parameters = []
    for key, what in (("system", "systems"), ("overhead_group", "overhead groups"),
                      ("relation", "engine relations")):
        new = [x for x in spec.coords[key] if x not in meta["coords"][key]]
        gone = [x for x in meta["coords"][key] if x not in spec.coords[key]]
        if new:
            parameters.append(f"new {what} {', '.join(new)} (parameters fit {meta['fit_id']} "
                              "does not have)")
        if gone:
            parameters.append(f"{what} {', '.join(gone)} no longer measured")
    reasons += parameters
    if parameters:
        return reasons, spec, now
    before = meta["model"]
    reordered: list[str] = []
    order = meta["coords"]["overhead_group"]
    if "group_varies" in now:   # in the proposal's group order (the draws' order)
        index = [list(spec.coords["overhead_group"]).index(g) for g in order]
        now["group_varies"] = {part: [flags[i] for i in index]
                               for part, flags in now["group_varies"].items()}
    for key in sorted(set(now) | set(before)):
        a, b = now.get(key), before.get(key)
        if key in ("target_model", "target_models"):   # said above, by their names
            continue
        if key == "group_varies" and a is not None and b is not None:
            if any(x and not y for part in a for x, y in zip(b[part], a[part], strict=True)):
                reasons.append("the drafter passes or tree nodes of an overhead group no longer "
                               "vary")
        elif key == "acceptance_groups":   # more rows in a group: the same parameter
            def groups(x):   # (a group stored before the drafter column: the blank rows')
                return [{**{k: v for k, v in g.items() if k != "rows"},
                         "drafter": g.get("drafter")} for g in x or ()]
            if groups(a) != groups(b):
                reasons.append("the inferred acceptance groups (rows without accept_len) "
                               "change: " + (", ".join(g["label"] for g in groups(b)) or "none")
                               + " -> "
                               + (", ".join(g["label"] for g in groups(a)) or "none"))
        elif key == "config_pass_how":
            # one line per configuration whose rows name a drafter card (its pass over the
            # group's): a new configuration adds its own, as a new row adds its data, and no
            # parameter (a C = 8 row of a named drafter was "the new rows change the model",
            # a refit and a line of 3,000 characters); a line of the fit's that is gone or
            # reads otherwise is a configuration priced otherwise
            if any(line not in (a or ()) for line in b or ()):
                reasons.append("a configuration's drafter pass is priced otherwise ("
                               + "; ".join(line for line in b or () if line not in (a or ()))
                               + ")")
        elif key == "drafter_cards":
            if (changed := _changed_drafter_cards(a, b, measurements)):
                reasons.append(f"the model's drafter cards change: {', '.join(changed)}")
        elif key in ("card", "model_cards"):   # fields the model never reads do not count
            if b is not None and _model_fields(a, key) != _model_fields(b, key):
                reasons.append(f"the model's {key} changes ({b!r} -> {a!r})")
        elif key == "repeated_runs" and bool(a) != bool(b):
            if not a:   # (appearing: the reweight draws config_share from its prior)
                reasons.append("no configuration has repeated runs any more: the model loses "
                               "config_sd")
        elif key in FLAG_CHANGES and bool(a) != bool(b):
            reasons.append(FLAG_CHANGES[key][bool(a)])
        elif isinstance(a, list) and isinstance(b, list) and a != b and sorted(
                map(repr, a)) == sorted(map(repr, b)):
            reordered.append(key)
        elif a != b:
            reasons.append(f"the model's {key} changes ({b!r} -> {a!r})")
    if reordered:   # one reason for all that only moved: the rows' order moved them
        reasons.append(f"{REORDERED} ({', '.join(reordered)})")
    return reasons, spec, now


#: The reason :func:`structure_changes` gives for lists of the model that hold the same
#: entries in another order (the coordinates follow the order in which rows first name them).
REORDERED = "the rows' order reorders the model's coordinates"


#: Switches of the model's structure that new rows turn on or off, as people read them
#: (False, True): ``update`` printed "the model's concurrent changes (None -> True)".
FLAG_CHANGES = {
    "concurrent": ("no row runs several streams any more: the model loses its batch terms",
                   "a row at concurrency above 1: the model gains its batch terms (the context "
                   "term's growth with C, the concurrency discrepancy)"),
    "allreduce_volume": ("no system has several GPUs any more: the model loses the all-reduce "
                         "volume", "a system of several GPUs: the model gains the all-reduce "
                                   "volume of each verified token"),
}


def _changed_drafter_cards(now: Any, before: Any, measurements: Measurements) -> list[str]:
    """The names of the drafter cards that differ between a fit's stored cards (``before``)
    and the new data's (``now``), sorted: a card a fit made before the ``default`` column
    stored without it was a default card (core/drafters.py ``stored_card_dict``), and a card
    with default no that no row names prices nothing (as ``predict`` reads the cards:
    engine/scenario.py ``drafter_card_changes``)."""
    from ddtree_bayes.core.drafters import card_key

    named = {m.drafter for m in measurements.rows if m.drafter is not None}

    def keyed(cards: Any) -> dict[str, str]:
        out = {}
        for d in cards or ():
            key = card_key(d)   # (its "default" read from the key: the dict built once)
            if json.loads(key)["default"] or d["drafter"] in named:
                out[d["drafter"]] = key
        return out

    a, b = keyed(now), keyed(before)
    return sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))


def _model_fields(cards: Any, key: str) -> Any:
    """A stored card (``key`` "card") or cards by model ("model_cards") without the fields
    the model never reads (:data:`~ddtree_bayes.core.model_cards.NOT_MODELLED`): a fit made
    before such a field was stored has the same parameters as one made after."""
    from ddtree_bayes.core.model_cards import modelled

    def strip(card: Any) -> Any:
        return modelled(card) if isinstance(card, dict) else card

    if key == "model_cards" and isinstance(cards, dict):
        return {name: strip(card) for name, card in cards.items()}
    return strip(cards)


@dataclass
class Weights:
    """The Pareto-smoothed importance weights of a reweight and whether to trust them."""

    proposal_fit: str
    log_weights: Any
    pareto_k: float
    k_threshold: float
    weights_ess: float
    r_eff: float
    n_eff: float
    n_draws: int
    tail_draws: int
    rows: list[int]
    sd_changed_rows: list[int]
    seconds: float
    model: dict
    replaced: dict
    restructured_groups: list[str]
    #: parameters the new data's model adds to the proposal's, drawn from their priors (a
    #: first repeated run adds config_share: engine/reweight.augmented)
    added_variables: list[str]

    @property
    def uniform(self) -> bool:
        """Every weight equal: nothing to reweight by (no row added, no likelihood changed)."""
        import numpy as np

        lw = np.asarray(self.log_weights, dtype=float)
        return bool(lw.size) and bool(np.all(lw == lw.flat[0]))

    @property
    def refit_reasons(self) -> list[str]:
        out = []
        if not self.pareto_k <= self.k_threshold:
            out.append(f"Pareto k {self.pareto_k:.2f} > {self.k_threshold:.2f}: the reweighted "
                       "draws cannot be trusted")
        if self.n_eff < MIN_ESS_BULK:
            out.append(f"the reweighted draws keep an effective sample size of about "
                       f"{self.n_eff:.0f} < {MIN_ESS_BULK} (a fit's bulk ESS gate)")
        return out

    def summary(self) -> dict:
        import math

        return {"proposal_fit": self.proposal_fit,
                "pareto_k": self.pareto_k if math.isfinite(self.pareto_k) else None,
                "k_threshold": self.k_threshold, "weights_ess": self.weights_ess,
                "r_eff": self.r_eff, "n_eff": self.n_eff, "n_draws": self.n_draws,
                "tail_draws": self.tail_draws, "rows": self.rows,
                "sd_changed_rows": self.sd_changed_rows,
                "restructured_groups": self.restructured_groups,
                "added_variables": self.added_variables,
                "accepted": not self.refit_reasons, "seconds": self.seconds}


def importance_weights(proposal, old: Measurements, new: Measurements, added: list[int],
                       kept: list[tuple[int, int]], model: dict | None = None,
                       seed: int = 0) -> Weights:
    """PSIS weights taking the proposal fit's posterior to the posterior of ``new``.

    ``weights_ess`` is ``1 / sum(w^2)`` of the normalised smoothed weights (as if the draws
    were independent); ``r_eff`` the relative efficiency of the NUTS draws for the
    importance ratios (ESS of their mean over the draws, capped at 1); ``n_eff`` their
    product, the effective sample size of the reweighted posterior (``loo``'s
    ``psis_n_eff``; ``r_eff`` also sets the tail length, as in ``loo``). ``model`` is the
    new data's ``meta["model"]`` (:func:`structure_changes`; default: the proposal's).

    When the new data first repeat a configuration, their model has one parameter more,
    ``config_share`` (the share of one run's scatter that is a configuration's own error, which
    only repeated runs tell from the run-to-run noise). The proposal is then the fit's
    posterior times that parameter's prior (drawn with ``seed``): exactly the new model's
    posterior of the fit's data (:func:`engine.reweight.augmented`)."""
    import numpy as np

    from ddtree_bayes.engine import importance as R
    from ddtree_bayes.engine import psis

    t0 = time.perf_counter()
    model = proposal.meta["model"] if model is None else model
    target, replaced, flipped = R.restructured(proposal, model, new.text)
    # (the new data, as this process read them: not parsed again from the view's text)
    target, extra = R.augmented(target.knowing(new), np.random.default_rng(seed))
    log_ratios, changed = R.log_ratios(proposal, old, new, added, kept, target)
    n = proposal.n_draws
    result, r_eff = smoothed(proposal, log_ratios)
    return Weights(proposal_fit=proposal.meta["fit_id"], log_weights=result.log_weights,
                   pareto_k=result.k, k_threshold=psis.khat_threshold(n),
                   weights_ess=result.ess, r_eff=r_eff, n_eff=result.ess * r_eff,
                   n_draws=n, tail_draws=result.tail_len, rows=[new.rows[j].row for j in added],
                   sd_changed_rows=[new.rows[j].row for j in changed],
                   seconds=time.perf_counter() - t0, model=model,
                   replaced={**replaced, **extra}, restructured_groups=flipped,
                   added_variables=sorted(extra))


def smoothed(proposal, log_ratios):
    """(the Pareto-smoothed, normalised weights of ``log_ratios``, one per draw of the NUTS
    fit ``proposal``, as a :class:`~ddtree_bayes.engine.psis.PsisResult`; the ``r_eff`` they
    were smoothed with): the relative efficiency of the draws for the ratios (ESS of their
    mean over the fit's chains, capped at 1), which also sets the tail's length. The weights
    ``update`` resamples a reweighted fit by (:func:`importance_weights`), and those ``next``
    weighs that fit's proposal by (``proposal_start``): the fit's draws are a resample of
    them, so its candidates stand on the distribution the fit holds."""
    import numpy as np

    from ddtree_bayes.engine import psis

    n = proposal.n_draws
    chains = int(proposal.meta.get("sampler", {}).get("chains", 1))
    if n % chains:
        chains = 1
    ratios = np.exp(log_ratios - np.max(log_ratios)).reshape(chains, n // chains)
    r_eff = min(1.0, psis.ess_mean(ratios) / n)
    return psis.psis(log_ratios, r_eff=r_eff), r_eff


def save_reweighted(previous, proposal, weights: Weights, spec, measurements: Measurements,
                    cfg: PriorsConfig, hardware_text: str, inputs_hash: str, seed: int,
                    models: Path, update_meta: dict, started: float):
    """Resample the proposal's draws with ``weights`` and save them as a fit: its
    :class:`~ddtree_bayes.engine.posterior.Fit` (what ``load_fit`` would read back)."""
    import numpy as np

    from ddtree_bayes.core import __version__
    from ddtree_bayes.engine import inference, psis, store

    resampling = RESAMPLING
    if weights.uniform:
        # nothing to reweight by (the data file changed only in form): resampling equal
        # weights only shuffled the draws, and every tracked interval moved by Monte Carlo
        # noise alone; the draws as they are
        index = np.arange(proposal.n_draws)
        resampling = KEPT
    else:
        index = psis.stratified_resample(np.exp(weights.log_weights), proposal.n_draws,
                                         np.random.default_rng(seed))
    fit_id = inference.new_fit_id(inputs_hash, seed, models)
    base = dict(proposal.meta)
    meta = json.loads(json.dumps(base))
    counts = Counter(index.tolist())
    meta.update({
        "fit_id": fit_id,
        "created_utc": store.id_time(fit_id),
        "package_version": __version__,
        "seed": seed,
        **store.inputs_meta(measurements, cfg, inputs_hash),
        "model": weights.model,
        "made_by": MADE_BY_REWEIGHT,
        "reweight": {**weights.summary(), "parent_fit": previous.meta["fit_id"],
                     "resampling": resampling,
                     "distinct_draws": len(counts), "reference": REFERENCE},
        "update": update_meta,
        **store.made_in(Path(models).parent),   # (here, not where the proposal was made)
    })
    meta["diagnostics"] = {**base.get("diagnostics", {}), "of_fit": proposal.meta["fit_id"],
                           "note": (f"R-hat, ESS, MCSE and divergences are those of fit "
                                    f"{proposal.meta['fit_id']}'s NUTS run; these draws are "
                                    "its importance resample (see 'reweight')"),
                           "weights_ess": weights.weights_ess, "n_eff": weights.n_eff}
    meta["timings"] = {"reweight_s": weights.seconds,
                       "total_s": time.perf_counter() - started}
    texts = {"data": measurements.text, "priors": cfg.text, "hardware": hardware_text}
    path = store.save_resampled(proposal.path, index, store.data_groups(spec), meta, texts,
                                models, replace=weights.replaced)
    if path.stem != meta["fit_id"]:   # (another fit took the id meanwhile: saved as the next)
        meta = {**meta, "fit_id": path.stem}
    variables = {k: v[index] for k, v in {**proposal.variables, **weights.replaced}.items()}
    # (the proposal's priors and hardware table as it parsed them, when the texts are the
    # same; the measurements as this process read them: each text parsed once)
    return proposal.view(path=path, meta=json.loads(json.dumps(meta)), variables=variables,
                         data_csv=texts["data"], priors_toml=texts["priors"],
                         hardware_csv=texts["hardware"]).knowing(measurements)

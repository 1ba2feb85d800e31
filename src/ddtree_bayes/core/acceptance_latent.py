"""Acceptance inferred by the fit, for measurements that have none (numpy only).

A speculative row with a blank ``accept_len`` (server logs often omit it) still measures
``tok_s = accept / step_ms * 1000``. Its acceptance becomes a latent parameter
``accept_latent[g]`` shared by every such row of one *acceptance group*
g = (model, method, drafter, block, budget); ``budget`` here is the number of draft tokens the
target verifies, ``verify_tokens - 1`` (the budget of a tree, k of a k-token chain), so a chain
row written with or without its budget lands in one group. ``drafter`` is the row's
``drafter`` column (None, blank: the default card of the model and method, core/drafters.py
``drafter_for``): two drafters of one method and size on one target model (the Kimi K2.5 and
K2.6 EAGLE-3 heads against Kimi K2.6) get a group each, while sharing their speculative
overhead group (system, engine, method). Rows that give their acceptance keep it as data;
they do not inform a latent group.

Prior of a group: the first ``[[acceptance]]`` entry of the priors file matching its method,
block and budget (as ``predict`` uses it; the group of a drafter rows name takes
:func:`default_prior`, the entries being the default drafter's), else :func:`default_prior`;
either one bounded above by what the configuration can emit
(:func:`~ddtree_bayes.core.methods.max_accept`), with the block its drafter was trained at
(its card's ``block_size``, core/drafters.py ``trained_block``) where the fit's drafter cards
say one: a DDTree row of budget 64 and no block, whose drafter emits at most 16 tokens a
step, had Uniform(1, 65).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddtree_bayes.core.config import Prior, PriorsConfig
from ddtree_bayes.core.data import Measurement
from ddtree_bayes.core.errors import PriorsError
from ddtree_bayes.core.methods import AcceptLimit, max_accept

#: Prior families a latent acceptance may have (a point prior is a known value: write it in
#: the rows). The priors file bounds every acceptance prior below by 1.
LATENT_DISTS = ("truncnormal", "uniform")
#: Posterior variable name.
NAME = "accept_latent"
#: Coordinate (dimension) name.
DIM = "acceptance_group"


def default_prior(limit: AcceptLimit) -> Prior:
    """Uniform(1, ``limit.tokens``): the physical range (:func:`~ddtree_bayes.core.methods.
    max_accept`), flat inside it. Acceptance depends on the drafter, the target and the
    prompts, none of which the row describes; a flat prior claims nothing beyond "at least the
    bonus token, at most what the configuration can emit".

    >>> default_prior(max_accept("ddtree", 16, 32, None, 33)).params
    {'lower': 1.0, 'upper': 16.0}
    """
    return Prior(NAME, "uniform", {"lower": 1.0, "upper": limit.tokens},
                 rationale="no [[acceptance]] entry matches: flat over the physical range "
                           f"1 (bonus token only) .. {limit.tokens:g} ({limit.rule})",
                 source="definition of acceptance length; core/methods.py max_accept")


def describe(prior: Prior) -> str:
    """``truncnormal(mu=1.94, sigma=0.15, lower=1, upper=4)``."""
    return f"{prior.dist}(" + ", ".join(f"{k}={v:g}" for k, v in prior.params.items()) + ")"


def acceptance_group_label(model: str, method: str, block: int | None, budget: int,
                           drafter: str | None = None) -> str:
    """``kimi-k2.6/eagle3/b3/B3`` (``b-`` when the block is not known), with the drafter a
    row's ``drafter`` column names after it.

    >>> acceptance_group_label("kimi-k2.6", "eagle3", 3, 3, "org/k25-head")
    'kimi-k2.6/eagle3/b3/B3 drafter org/k25-head'
    """
    label = f"{model}/{method}/b{'-' if block is None else block}/B{budget}"
    return label if drafter is None else f"{label} drafter {drafter}"


def group_key(model: str, method: str, block: int | None, verify_tokens: int,
              drafter: str | None = None) -> tuple:
    """(model, method, drafter, block, budget): what one acceptance group shares (drafter
    None: the rows that name none, which ran the default card)."""
    return (model, method, drafter, block, int(verify_tokens) - 1)


@dataclass(frozen=True)
class AcceptanceGroup:
    """One latent acceptance: its rows (file line numbers) and its prior."""

    model: str
    method: str
    block: int | None
    budget: int                 # draft tokens verified per step: verify_tokens - 1
    rows: tuple[int, ...]
    prior: Prior
    prior_from: str             # where the prior came from, for people
    drafter: str | None = None  # the rows' drafter column (None: blank, the default card)

    @property
    def label(self) -> str:
        return acceptance_group_label(self.model, self.method, self.block, self.budget,
                                      self.drafter)

    def as_meta(self) -> dict:
        """A fit's ``meta["model"]["acceptance_groups"]`` entry (JSON)."""
        return {"label": self.label, "model": self.model, "method": self.method,
                "drafter": self.drafter,
                "block": self.block, "budget": self.budget, "rows": list(self.rows),
                "prior": {"dist": self.prior.dist, "params": dict(self.prior.params)},
                "prior_from": self.prior_from}


def group_prior(priors: PriorsConfig, method: str, block: int | None, budget: int,
                verify_tokens: int, model: str | None = None, drafter: str | None = None,
                trained_block: int | None = None) -> tuple[Prior, str]:
    """(prior, where it came from) of one acceptance group: the first matching
    ``[[acceptance]]`` entry, truncated at what the configuration can emit
    (:func:`~ddtree_bayes.core.methods.max_accept`), else :func:`default_prior`. The entry
    must be bounded below by 1 (:data:`LATENT_DISTS`). An entry names no drafter: it is the
    default drafter's (rows with a blank ``drafter``), and the group of a drafter rows name
    (``drafter``) takes :func:`default_prior` (the bundled Kimi K2.6 EAGLE-3 entry, 1.94 +-
    0.15, is the K2.6 head's accept rate, not the K2.5 head's). ``trained_block``: the block
    the group's drafter was trained at (core/drafters.py ``trained_block``), which bounds
    what a step emits as it bounds ``--accept``."""
    limit = max_accept(method, block, budget, priors.methods, verify_tokens,
                       trained_block=trained_block)
    entry = priors.acceptance_for(method, block, verify_tokens, model, drafter)
    if entry is None and drafter is not None:
        prior = default_prior(limit)
        return prior, (f"default {describe(prior)} (a drafter a row names: no [[acceptance]] "
                       "entry names it, and those without a drafter are the default drafter's)")
    if entry is None:
        prior = default_prior(limit)
        return prior, f"default {describe(prior)} (no [[acceptance]] entry matches)"
    where = ("[[acceptance]] " + " ".join(f"{k}={v}" for k, v in (
        ("model", entry.model), ("method", entry.method), ("block", entry.block),
        ("budget", entry.budget), ("drafter", entry.drafter))
        if v is not None))
    if entry.prior.dist not in LATENT_DISTS:   # (the priors file already bounds them below by 1)
        raise PriorsError(f"the acceptance prior {where} ({describe(entry.prior)}) cannot be the "
                          f"prior of an inferred acceptance ({method} block {block} budget "
                          f"{budget}: rows with a blank accept_len)", file=priors.path,
                          column="acceptance",
                          fix="give it dist = \"truncnormal\" or \"uniform\", or write the "
                              "known value in those rows' accept_len")
    capped = entry.capped(limit)
    cut = "" if capped.capped_by is None else f", truncated at {limit.tokens:g} ({limit.rule})"
    return capped.prior, f"{where}: {describe(capped.prior)}{cut}"


def latent_groups(rows: Sequence[Measurement], priors: PriorsConfig,
                  drafters: tuple | None = None
                  ) -> tuple[tuple[AcceptanceGroup, ...], np.ndarray]:
    """(the acceptance groups of rows without accept_len, in order of their first row;
    per row the index of its group, -1 for a row with a known acceptance). ``drafters``: the
    drafter cards the fit prices with (and stores); a group's drafter's trained block bounds
    its prior (:func:`group_prior`). None: no card is read (no trained block)."""
    from ddtree_bayes.core.drafters import trained_block

    index: dict[tuple, int] = {}
    members: list[list[int]] = []
    firsts: list[Measurement] = []
    row_group = np.full(len(rows), -1, dtype=np.int64)
    for i, m in enumerate(rows):
        if m.accept_len is not None:
            continue
        key = group_key(m.model, m.method, m.block, m.verify_tokens, m.drafter)
        g = index.setdefault(key, len(firsts))
        if g == len(firsts):
            firsts.append(m)
            members.append([])
        members[g].append(m.row)
        row_group[i] = g
    groups = []
    for m, rs in zip(firsts, members, strict=True):
        budget = m.verify_tokens - 1
        trained = (None if drafters is None
                   else trained_block(drafters, m.model, m.method, m.drafter))
        prior, where = group_prior(priors, m.method, m.block, budget, m.verify_tokens, m.model,
                                   m.drafter, None if trained is None else trained[0])
        groups.append(AcceptanceGroup(m.model, m.method, m.block, budget, tuple(rs), prior, where,
                                      m.drafter))
    return tuple(groups), row_group


def bounding_cards(groups: Sequence[AcceptanceGroup], drafters: tuple) -> tuple:
    """The drafter cards of ``drafters`` whose trained block bounds one of ``groups``' priors
    (core/drafters.py ``trained_block``: the card a group's rows name, else its model's
    default card for its method, with a ``block_size``), each once, in the groups' order:
    what a fit of the fraction form stores (``acceptance_drafter_cards``) to derive its groups
    again as it fitted them; it prices no drafter pass, so stores no other card."""
    from ddtree_bayes.core.drafters import trained_block

    out: dict[str, object] = {}
    for g in groups:
        found = trained_block(drafters, g.model, g.method, g.drafter)
        if found is not None:
            out.setdefault(found[1].drafter, found[1])
    return tuple(out.values())


def log_density(dist: str, params: dict, x):
    """Log prior density of an acceptance at ``x`` (numpy; -inf outside the bounds).

    >>> round(float(log_density("uniform", {"lower": 1.0, "upper": 4.0}, 2.0)), 6)  # -log 3
    -1.098612
    """
    x = np.asarray(x, dtype=float)
    lo, hi = params["lower"], params["upper"]
    inside = (x >= lo) & (x <= hi)
    if dist == "uniform":
        return np.where(inside, -math.log(hi - lo), -np.inf)
    z = (x - params["mu"]) / params["sigma"]
    return np.where(inside, -0.5 * z ** 2 - truncnormal_log_norm(params), -np.inf)


def truncnormal_log_norm(params: dict) -> float:
    """``log(sigma sqrt(2 pi) (Phi(upper') - Phi(lower')))``: a truncated normal's log density
    is ``-z**2 / 2`` minus this.

    >>> round(truncnormal_log_norm({"mu": 0.0, "sigma": 1.0, "lower": 0.0, "upper": 50.0}), 6)
    0.225791
    """
    mu, sd = params["mu"], params["sigma"]

    def cdf(v: float) -> float:
        return 0.5 * math.erfc(-(v - mu) / (sd * math.sqrt(2.0)))

    return math.log(sd) + 0.5 * math.log(2 * math.pi) + math.log(cdf(params["upper"])
                                                                 - cdf(params["lower"]))


# ------------------------------------------------------------------ a fit's latent groups
def fit_groups(meta: dict) -> list[dict]:
    """The acceptance groups a fit inferred (its metadata), [] for none."""
    return list(meta.get("model", {}).get("acceptance_groups", ()))


def find(meta: dict, model: str | None, method: str, block: int | None, verify_tokens: int,
         drafter: str | None = None) -> tuple[int, dict] | None:
    """(index, group) of the fit's acceptance group for this configuration and drafter
    (None: the rows that name no drafter), or None. ``model`` None: the fit's target model
    (any model if the metadata does not say). A group stored before the drafter column has no
    ``drafter``: its rows named none."""
    model = model or meta.get("model", {}).get("target_model")
    for g, group in enumerate(fit_groups(meta)):
        key = group_key(model or group["model"], method, block, verify_tokens, drafter)
        if group_key(group["model"], group["method"], group["block"], group["budget"] + 1,
                     group.get("drafter")) == key:
            return g, group
    return None


def summarise(meta: dict, variables: dict[str, np.ndarray], prob: float = 0.9) -> list[dict]:
    """Per inferred acceptance group: its rows, the posterior median and ``prob`` interval,
    and the prior (with its own median and interval, to see how far the data moved it)."""
    from ddtree_bayes.core.sampling import prior_sample

    out = []
    lo_q, hi_q = (1 - prob) / 2, (1 + prob) / 2
    for g, group in enumerate(fit_groups(meta)):
        post = np.asarray(variables[NAME])[:, g]
        prior = Prior(NAME, group["prior"]["dist"], group["prior"]["params"])
        pr = prior_sample(prior, 20_000, np.random.default_rng(g))
        q = np.quantile(post, [0.5, lo_q, hi_q])
        pq = np.quantile(pr, [0.5, lo_q, hi_q])
        out.append({"group": group["label"], "model": group["model"], "method": group["method"],
                    "drafter": group.get("drafter"), "block": group["block"], "budget": group["budget"],
                    "rows": list(group["rows"]), "median": float(q[0]), "lo": float(q[1]),
                    "hi": float(q[2]), "prob": prob, "prior": describe(prior),
                    "prior_from": group["prior_from"], "prior_median": float(pq[0]),
                    "prior_lo": float(pq[1]), "prior_hi": float(pq[2])})
    return out

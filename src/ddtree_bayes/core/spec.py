"""The three-term step model, independent of PyMC.

``step_ms = MOE(M) + ATTN_BASE(+ context) + SPEC`` and ``tok_s = accept_len / step_ms * 1000``.

The arithmetic here is written once and evaluated twice: on PyTensor tensors when the
model is built (``engine/model.py``) and on numpy posterior draws when predicting
(``engine/predictive.py``). It only uses ``+ - * /`` and the ``exp``/``log`` passed in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddtree_bayes.core import acceptance_latent as AL
from ddtree_bayes.core import likelihood as C
from ddtree_bayes.core.config import PriorsConfig
from ddtree_bayes.core.context_cost import ctx_prior, ctx_prior_how, uses_read
from ddtree_bayes.core.data import AR_METHOD, Measurements
from ddtree_bayes.core.likelihood import config_distance  # noqa: F401  (S.config_distance)
from ddtree_bayes.core.tensor_cores import is_amd

Fn = Callable[..., Any]
#: The exponent of concurrency in the context term (sampled only with rows at C > 1).
CTX_BATCH = "ctx_batch_exponent"
#: The spread of each engine's extra fixed cost for a hybrid target (recurrent layers): the
#: prior of ``spec_fixed_recurrent`` (engine/model.py); read only when a group's target is one.
RECURRENT_SD = "spec_fixed_recurrent_sd"
#: The priors of the AMD effect on a speculative step's fixed and per-pass costs: its mean over
#: engines and their spread around it (engine/model.py ``spec_amd``).
AMD_MU, AMD_SD = "spec_amd_log_mu", "spec_amd_engine_sd"
#: Link classes whose tensor-parallel all-reduces have a bus-bandwidth prior
#: (``tp_busbw_<link>_gb_s``; one GPU has none).
TP_LINKS = ("pcie", "fabric")
#: Posterior name of the per-system verify-growth parameter of each MoE form.
SHAPE_NAMES = {"power": "moe_exponent", "linear": "moe_slope", "roofline": "moe_distinct_exponent"}


#: Parameters engine/model.py builds itself (no prior of their own in the priors file) that live
#: on the whole real line: non-centred offsets (``*_z``), log-scale values (``*_log``: the
#: groups' ``spec_<part>_log``, ``compute_eff_log``, ``moe_slope_log``), the zero-sum engine
#: effects on the log scale (``spec_<part>_engine``) and the groups' log means
#: (``spec_<part>_mean``), the MoE exponents drawn as ``mu + sd z``, and the per-engine log
#: effects of a hybrid target and of an AMD GPU (``spec_fixed_recurrent``, ``spec_amd``).
#: Every other parameter the model builds is positive (``exp``, a sigmoid, a positive prior).
#: A parameter with a prior is on the real line when its prior is (:func:`on_real_line`). Keep
#: in step with engine/model.py (tests/test_model.py checks it against the bundled model's
#: prior, tests/test_amd_effect.py against a model with an AMD group and a hybrid target).
REAL_LINE_SUFFIXES = ("_z", "_log", "_engine", "_mean")
REAL_LINE_NAMES = frozenset({"moe_exponent", "moe_distinct_exponent", "spec_fixed_recurrent",
                             "spec_amd"})


def on_real_line(name: str, prior=None) -> bool:
    """Can parameter ``name`` (``step_ar_ms``, without a ``[label]``) be 0 or negative? By its
    prior's support when it has one (``prior``: a :class:`~ddtree_bayes.core.config.Prior`),
    else by :data:`REAL_LINE_SUFFIXES` / :data:`REAL_LINE_NAMES`. A ratio of two values of
    such a parameter means nothing (``diff`` shows their difference instead).

    >>> from ddtree_bayes.core.config import Prior
    >>> on_real_line("spec_fixed_log_mu", Prior("spec_fixed_log_mu", "normal", {"mu": 0, "sigma": 1}))
    True
    >>> on_real_line("noise_sd", Prior("noise_sd", "lognormal", {"median": 0.03, "sigma": 1}))
    False
    >>> on_real_line("spec_tree_engine"), on_real_line("spec_tree_ratio"), on_real_line("moe_z")
    (True, False, True)
    """
    if prior is not None:
        p = prior.params
        if prior.dist in ("truncnormal", "uniform"):
            return p["lower"] <= 0
        if prior.dist == "point":
            return p["value"] <= 0
        return prior.dist == "normal"
    return name.endswith(REAL_LINE_SUFFIXES) or name in REAL_LINE_NAMES


def tp_prior(link: str) -> str:
    """The name of the all-reduce bus-bandwidth prior of a link class."""
    return f"tp_busbw_{link}_gb_s"


def moe_ms(moe1, verify_tokens, shape, moe_form: str, exp: Fn, log: Fn):
    """MoE forward cost at M verify tokens, from its cost at M=1.

    ``power``: ``moe1 * M ** shape``; ``linear``: ``moe1 * (1 + shape * (M - 1))``.

    >>> round(float(moe_ms(2.0, 9.0, 0.5, "power", np.exp, np.log)), 9)
    6.0
    >>> float(moe_ms(2.0, 9.0, 0.25, "linear", np.exp, np.log))
    6.0
    """
    if moe_form == "power":
        return moe1 * exp(shape * log(verify_tokens))
    return moe1 * (1.0 + shape * (verify_tokens - 1.0))


def roofline_ms(moe1, verify_tokens, exponent, tok_ratio, distinct, knee: float, exp: Fn, log: Fn):
    """Verify cost of the roofline form, from its cost ``moe1`` at M = 1.

    Memory part: the weights M tokens stream, ``distinct ** exponent`` (``distinct`` = distinct
    experts touched relative to one token, 1 for a dense model). Compute part: ``tok_ratio * M``
    (one token's FLOPs at the achieved rate, in units of ``moe1``). Joined by a smooth maximum
    ``(a**p + b**p) ** (1/p)`` with p = ``knee``, and scaled so that M = 1 costs ``moe1``.

    >>> round(float(roofline_ms(2.0, 1.0, 0.5, 0.01, 1.0, 3.0, np.exp, np.log)), 9)
    2.0
    >>> round(float(roofline_ms(2.0, 400.0, 0.5, 0.01, 1.0, 3.0, np.exp, np.log)), 3)  # 2 x 65 ** (1/3)
    8.041
    """
    mem = exp(exponent * log(distinct))
    comp = tok_ratio * verify_tokens
    both = exp(log(exp(knee * log(mem)) + exp(knee * log(comp))) / knee)
    at_one = exp(log(1.0 + exp(knee * log(tok_ratio))) / knee)
    return moe1 * both / at_one


def target_ms(step_ar_ms, moe_share, moe_shape, ctx_ms_per_unit, ctx_verify_exponent,
              verify_tokens, context_units, moe_form: str, exp: Fn, log: Fn, *,
              tok_ratio=None, distinct=1.0, knee: float = 3.0, concurrency=1.0,
              ctx_streams=None, tp_tok_ms=0.0):
    """Target forward time: MOE(M) + ATTN_BASE + context term.

    ``step_ar_ms`` is the M=1 step at zero context, split into MOE(1) = moe_share * step_ar_ms
    and ATTN_BASE = the rest; the context term is ``ctx_ms_per_unit * units * M ** b``.

    At ``concurrency`` C the step verifies C x M tokens together: the weights stream once
    (an MoE's distinct experts, ``distinct``, are those of C x M tokens), the compute part
    grows with C x M, ATTN_BASE (launches, norms, sampling) is paid once, and every sequence
    reads its own KV cache: the context term x ``ctx_streams`` (default C; the model gives it
    ``C ** ctx_batch_exponent``, since part of a long-context read is latency the streams
    share). C = 1 is the single-stream step exactly (``verify_tokens``, ``context_units`` and
    C are numpy: their products are constants).

    On several GPUs the tensor-parallel all-reduces carry every verified token's activations:
    ``tp_tok_ms`` (ms per token, the system's all-reduce volume over its link bandwidth) is
    paid for each of the C x M tokens beyond the one the M = 1 step already holds. It is part
    of the verify cost that grows with M (MOE(M) in the three-term language).

    >>> float(target_ms(10.0, 0.4, 0.5, 2.0, 0.5, 4.0, 1.0, "power", np.exp, np.log))
    18.0
    >>> float(target_ms(10.0, 0.4, 0.5, 2.0, 0.5, 4.0, 1.0, "power", np.exp, np.log,
    ...                 concurrency=4.0))   # 4 x 16 ** 0.5 + 6 + 4 x 2 x 2
    38.0
    >>> float(target_ms(10.0, 0.4, 0.5, 2.0, 0.5, 4.0, 1.0, "power", np.exp, np.log,
    ...                 tp_tok_ms=0.25))   # 18 + 0.25 x (4 - 1)
    18.75
    """
    moe1 = moe_share * step_ar_ms
    attn_base = step_ar_ms - moe1
    tokens = verify_tokens * concurrency
    if ctx_streams is None:
        ctx_units = context_units * concurrency
    else:
        ctx_units = context_units * ctx_streams
    context = ctx_ms_per_unit * ctx_units * exp(ctx_verify_exponent * log(verify_tokens))
    if moe_form == "roofline":
        verify = roofline_ms(moe1, tokens, moe_shape, tok_ratio, distinct, knee, exp, log)
    else:
        verify = moe_ms(moe1, tokens, moe_shape, moe_form, exp, log)
    return verify + attn_base + context + tp_tok_ms * (tokens - 1.0)


def step_ms(target, overhead_frac, spec_scale):
    """Whole step: target forward plus SPEC = spec_scale * target * f / (1 - f).

    ``overhead_frac`` f is the share of a (base-engine) speculative step spent outside the
    target forward; ``spec_scale`` is 1 for a measured engine and ``1 - reduction`` for an
    engine declared relative to another. f = 0 is autoregressive decoding.

    >>> float(step_ms(12.0, 0.25, 1.0)), float(step_ms(12.0, 0.25, 0.5))
    (16.0, 14.0)
    """
    return target * (1.0 + spec_scale * overhead_frac / (1.0 - overhead_frac))


def structured_spec_ms(step_ar_ms, fixed_ratio, pass_ratio, tree_ratio, passes, tree_nodes,
                       spec_scale):
    """SPEC of the structured form, in units of the system's AR step: a fixed per-step cost,
    one drafter forward pass per sequential pass, and tree construction per tree node; an
    engine declared relative to another pays ``spec_scale`` (= 1 - reduction) of it.

    >>> round(float(structured_spec_ms(10.0, 0.05, 0.1, 0.002, 3, 0, 1.0)), 9)
    3.5
    >>> round(float(structured_spec_ms(10.0, 0.05, 0.1, 0.002, 1, 32, 0.5)), 9)
    1.07
    """
    return spec_scale * step_ar_ms * (fixed_ratio + pass_ratio * passes + tree_ratio * tree_nodes)


def tok_s(accept_len, step):
    """Tokens per second from tokens per step and ms per step."""
    return accept_len / step * 1000.0


def overhead_group_label(system: str, engine: str, method: str) -> str:
    return f"{system}/{engine}/{method}"


@dataclass(frozen=True)
class ModelSpec:
    """Index structures and observed values the PyMC model is built from.

    The model is built on ``configs`` (:class:`~ddtree_bayes.core.likelihood.ConfigTable`): one
    entry per distinct configuration with its rows' sufficient statistics, so its cost grows
    with configurations, not rows. The per-row views (``row_system``, ``verify_tokens``, ...)
    map every row to its configuration's values, for reporting and checks.

    Overhead groups are (system, engine, method) for speculative rows. A *free* group has
    its own partially pooled overhead fraction; a row whose engine has a declared relation
    uses its base engine's group (added as a free group if unmeasured) scaled by
    ``1 - reduction[engine]``.
    """

    moe_form: str
    systems: tuple[str, ...]
    groups: tuple[str, ...]
    relations: tuple[str, ...]
    configs: C.ConfigTable
    row_config: np.ndarray     # per row: index into configs
    accept_len: np.ndarray     # per row
    log_tok_s: np.ndarray      # per row
    rows: tuple[int, ...]      # per row: its line in the measurement file
    step_form: str = "fraction"
    knee: float = 3.0
    #: ms of one token's FLOPs at each system's dense peak (roofline form), and how found
    system_flop_ms: np.ndarray | None = None
    flops_how: tuple[str, ...] = ()
    #: MB each GPU sends per verified token in tensor-parallel all-reduces (0 on one GPU),
    #: each system's link class (single, fabric, pcie) and how the volume was found
    system_tp_mb: np.ndarray | None = None
    system_link: tuple[str, ...] = ()
    tp_how: tuple[str, ...] = ()
    #: ms each system's GPUs take to read one sequence's KV cache per unit of context at the
    #: full bandwidth (NaN: no card, or it does not say its KV layout); the context cost's
    #: prior in every form (core/context_cost.py, :func:`context_reads`)
    system_ctx_read_ms: np.ndarray | None = None
    #: the ratio prior that prices each system's read (context_cost.ratio_name: one KV head
    #: or several); empty: ``ctx_read_ratio`` for every system
    system_ctx_ratio: tuple[str, ...] = ()
    #: the target model's card as a dict (roofline form)
    card: dict | None = None
    #: a fit of several models: each pair's model, every model card as a dict, and the pair
    #: roofline's arrays per pair (``stream_ms``, ``layers``, ``fabric``, ``pcie``; core/pairs.py)
    pair_models: tuple[str, ...] = ()
    cards: dict | None = None
    pair_roofline: dict | None = None
    #: per group, whether its rows measure more than one number of drafter passes / tree
    #: nodes (structured form): only then can the data tell that ratio from the fixed cost
    group_passes_vary: np.ndarray | None = None
    group_nodes_vary: np.ndarray | None = None
    #: latent acceptance groups (rows with a blank accept_len; ``accept_len`` is NaN there)
    #: and each configuration's index into them (-1: known acceptance); a configuration's
    #: rows are all latent or all known (core/likelihood.py keys on it)
    accept_groups: tuple[AL.AcceptanceGroup, ...] = ()
    config_accept_group: np.ndarray | None = None
    #: the structured step's group-level inputs: the (base) engines the groups run in, each
    #: group's engine and system (pair) index, and the roofline of one of its drafter's passes
    #: on that system (ms; core/drafters.py) with how it was found
    engines: tuple[str, ...] = ()
    group_engine: np.ndarray | None = None
    group_system: np.ndarray | None = None
    group_pass_roof_ms: np.ndarray | None = None
    group_pass_how: tuple[str, ...] = ()
    #: per configuration, its drafter's pass roofline over its group's (1.0 but where its rows
    #: name a drafter card other than the default one the group's roofline is of: the
    #: ``drafter`` column); the group's per-pass multiple applies to the drafter's own
    #: roofline, as ``predict --drafter`` prices it (None: every configuration 1.0)
    config_pass_scale: np.ndarray | None = None
    config_pass_how: tuple[str, ...] = ()
    #: per group, 1.0 where its target has recurrent layers (a hybrid model: the card's
    #: ``recurrent_layers``), else 0.0: such a group's fixed cost carries its engine's
    #: ``spec_fixed_recurrent`` effect (engine/model.py)
    group_recurrent: np.ndarray | None = None
    #: per group, 1.0 where its GPU is an AMD one (a gfx ``compute_capability``), else 0.0:
    #: such a group's fixed and per-pass costs carry its engine's ``spec_amd`` effect
    group_amd: np.ndarray | None = None
    #: every drafter card (as dicts), so a prediction can find the roofline of a group the fit
    #: never measured
    drafter_cards: tuple[dict, ...] = ()
    #: the fraction form's: the drafter cards whose trained block bounds an inferred
    #: acceptance group's prior (acceptance_latent.bounding_cards; the structured form's are
    #: among :attr:`drafter_cards`)
    accept_drafter_cards: tuple[dict, ...] = ()

    @property
    def repeated(self) -> bool:
        """Whether a configuration has several rows (repeated runs): the likelihood then has
        ``config_sd`` apart from ``noise_sd`` (engine/model.py, core/configs.grouped_logp)."""
        return bool((np.asarray(self.configs.n) > 1).any())

    # per-row views of the configuration arrays
    @property
    def row_system(self) -> np.ndarray:
        return self.configs.system[self.row_config]

    @property
    def row_group(self) -> np.ndarray:
        return self.configs.group[self.row_config]

    @property
    def row_relation(self) -> np.ndarray:
        return self.configs.relation[self.row_config]

    @property
    def verify_tokens(self) -> np.ndarray:
        return self.configs.verify_tokens[self.row_config]

    @property
    def context_units(self) -> np.ndarray:
        return self.configs.context_units[self.row_config]

    @property
    def row_passes(self) -> np.ndarray:
        return self.configs.passes[self.row_config]

    @property
    def row_nodes(self) -> np.ndarray:
        return self.configs.nodes[self.row_config]

    @property
    def row_distinct(self) -> np.ndarray | None:
        d = self.configs.distinct
        return None if d is None else d[self.row_config]

    @property
    def row_distance(self) -> np.ndarray:
        return self.configs.distance[self.row_config]

    @property
    def row_offset(self) -> np.ndarray:
        """Per row ``log(accept_len * 1000 * C)`` (:func:`core.likelihood.offsets`, from the
        spec's arrays); accept_len 1 where the acceptance is inferred (the model adds the
        latent value per configuration): ``z = log tok_s - row_offset``."""
        accept = np.where(np.isnan(self.accept_len), 1.0, self.accept_len)
        return np.log(accept * self.configs.streams[self.row_config] * 1000.0)

    @property
    def row_accept_group(self) -> np.ndarray | None:
        g = self.config_accept_group
        return None if g is None else g[self.row_config]

    @property
    def config_labels(self) -> tuple[str, ...]:
        """A configuration is named by the file line of its first row."""
        return tuple(str(self.rows[i]) for i in self.configs.first_row)

    @property
    def coords(self) -> dict[str, tuple[str, ...]]:
        """The model's coordinates: the parameters' and ``configuration``."""
        return {**self.parameter_coords, "configuration": self.config_labels}

    @property
    def parameter_coords(self) -> dict[str, tuple[str, ...]]:
        """The coordinates of the posterior's parameters (a fit's ``meta["coords"]``)."""
        coords = {"system": self.systems, "overhead_group": self.groups,
                  "relation": self.relations}
        if self.engines:
            coords["engine"] = self.engines
        if self.accept_groups:
            coords[AL.DIM] = tuple(g.label for g in self.accept_groups)
        return coords


def build_spec(data: Measurements, priors: PriorsConfig, *,
               hardware: dict[str, dict[str, str]] | None = None,
               cards: dict | None = None, drafters: tuple | None = None) -> ModelSpec:
    """Turn validated data and priors into the model's index arrays (no PyMC).

    Rows are grouped into configurations (:mod:`ddtree_bayes.core.likelihood`) first; everything
    below is computed once per configuration, from its first row. Linear in the rows.
    The roofline form needs ``cards`` (model cards, :func:`core.cards.load_model_cards`) and
    the ``hardware`` table; the structured step form needs the priors' ``[methods]`` table,
    and with the roofline form the drafter cards (``drafters``, default: the bundled ones).
    """
    systems = data.pairs   # (model, system) pairs in a fit of several models
    relations = tuple(sorted(priors.relations))
    row_config, first = C.group_rows(data.rows)
    reps = [data.rows[i] for i in first]     # one row per configuration, in file order
    groups: list[str] = []
    cfg_group, cfg_relation = [], []
    for r in reps:
        if r.method == AR_METHOD:
            cfg_group.append(-1)
            cfg_relation.append(-1)
            continue
        rel = priors.relations.get(r.engine)
        engine = rel.base if rel else r.engine
        label = overhead_group_label(data.pair(r), engine, r.method)
        if label not in groups:
            groups.append(label)
        cfg_group.append(groups.index(label))
        cfg_relation.append(relations.index(r.engine) if rel else -1)
    n_groups, n_rel = len(groups), len(relations)
    default_ctx = priors.default_context_tokens
    verify = np.array([r.verify_tokens for r in reps], dtype=float)
    concurrency = np.array([r.concurrency for r in reps], dtype=float)
    if np.any(concurrency > 1) and CTX_BATCH not in priors.priors:
        from ddtree_bayes.core.errors import PriorsError

        raise PriorsError(f"rows at concurrency > 1 (row {reps[int(np.argmax(concurrency > 1))].row}"
                          f" of {data.path}) need this prior", file=priors.path,
                          column=f"priors.{CTX_BATCH}",
                          fix=f"add [priors.{CTX_BATCH}] (see the bundled models/priors.toml)")
    batch = verify * concurrency   # tokens the step verifies for all its streams
    passes, nodes = draft_structure(reps, priors, data.path)
    # at concurrency C every stream builds its own tree: the step pays C x nodes; the fixed
    # cost and the drafter's passes (its weights streamed once for all C) are paid once
    nodes = nodes * concurrency
    system = np.array([systems.index(data.pair(r)) for r in reps], dtype=np.int64)
    group = np.array([g if g >= 0 else n_groups for g in cfg_group], dtype=np.int64)
    accept = np.fromiter((np.nan if r.accept_len is None else r.accept_len for r in data.rows),
                         float, len(data.rows))
    log_tok = np.log(np.fromiter((r.tok_s for r in data.rows), float, len(data.rows)))
    # (a latent row's offset is log 1000: the model adds log accept_latent per configuration)
    n, zbar, s2 = C.sufficient_stats(row_config, log_tok - C.offsets(data.rows), len(reps))
    if priors.step_form == "structured" and drafters is None:
        drafters = _bundled_drafters()
    # (the drafter cards bound a group's inferred acceptance by their trained block in either
    # form, as they bound every question's --accept: the structured form prices with them
    # and stores them all; the fraction form prices no pass and stores the cards that bound
    # a group, acceptance_drafter_cards, so that a saved fit's groups are derived again from
    # its own. A fraction fit that stores none, or given none, takes no trained block)
    accept_groups, row_accept_group = AL.latent_groups(data.rows, priors, drafters)
    extra: dict[str, Any] = {}
    distinct = None
    if priors.moe_form == "roofline":
        extra = roofline_inputs(data, batch, hardware, cards, reps)
        distinct = extra.pop("row_distinct")
        _require_tp_priors(extra, priors, data)
    if priors.step_form != "structured" and drafters is not None and accept_groups:
        extra["accept_drafter_cards"] = tuple(
            dataclasses.asdict(d) for d in AL.bounding_cards(accept_groups, drafters))
    # (the context cost's prior is the card's read in every form)
    extra["system_ctx_read_ms"], extra["system_ctx_ratio"] = context_reads(
        data, hardware, cards, priors.context_unit_tokens)
    if data.multi_model:
        extra.update(multi_model_inputs(data, priors, hardware, cards))
    if priors.step_form == "structured":
        # (without groups too: a speculative question about a fit of plain rows draws an
        # unmeasured group from the engines, drafter cards and roofline constants stored here)
        extra.update(group_inputs(data, priors, groups, reps, cfg_group, hardware, cards,
                                  drafters))
        if extra["group_recurrent"].any() and RECURRENT_SD not in priors.priors:
            from ddtree_bayes.core.errors import PriorsError

            g = int(np.argmax(extra["group_recurrent"]))
            raise PriorsError(f"speculative rows of a hybrid target (group {groups[g]}, a card "
                              f"with recurrent_layers) need this prior", file=priors.path,
                              column=f"priors.{RECURRENT_SD}",
                              fix=f"add [priors.{RECURRENT_SD}] (see the bundled "
                                  "models/priors.toml)")
        if extra["group_amd"].any() and (missing := [n for n in (AMD_MU, AMD_SD)
                                                     if n not in priors.priors]):
            from ddtree_bayes.core.errors import PriorsError

            g = int(np.argmax(extra["group_amd"]))
            raise PriorsError(f"speculative rows on an AMD GPU (group {groups[g]}) need this "
                              "prior", file=priors.path, column=f"priors.{missing[0]}",
                              fix=f"add [priors.{missing[0]}] (see the bundled "
                                  "models/priors.toml)")
    configs = C.ConfigTable(
        first_row=first, system=system, group=group,
        relation=np.array([k if k >= 0 else n_rel for k in cfg_relation], dtype=np.int64),
        verify_tokens=verify,
        context_units=np.array([r.context(default_ctx) / priors.context_unit_tokens
                                for r in reps]),
        passes=passes, nodes=nodes, distance=C.config_distances(system, batch, passes),
        n=n, zbar=zbar, s2=s2, distinct=distinct, concurrency=concurrency)
    return ModelSpec(
        moe_form=priors.moe_form, systems=systems, groups=tuple(groups), relations=relations,
        configs=configs, row_config=row_config, accept_len=accept, log_tok_s=log_tok,
        rows=tuple(r.row for r in data.rows), step_form=priors.step_form,
        knee=priors.knee_sharpness,
        group_passes_vary=_varies(group, passes, n_groups),
        group_nodes_vary=_varies(group, nodes, n_groups),
        accept_groups=accept_groups, config_accept_group=row_accept_group[first],
        **extra,
    )


def _require_tp_priors(extra: dict, priors: PriorsConfig, data: Measurements) -> None:
    """A fit with a system of several GPUs needs the bus-bandwidth prior of its link class."""
    for mb, link in zip(extra["system_tp_mb"], extra["system_link"], strict=True):
        if mb > 0 and tp_prior(link) not in priors.priors:
            from ddtree_bayes.core.errors import PriorsError

            raise PriorsError(f"systems of several GPUs over {link} in {data.path} need this "
                              "prior", file=priors.path, column=f"priors.{tp_prior(link)}",
                              fix=f"add [priors.{tp_prior(link)}] (see the bundled "
                                  "models/priors.toml)")


def _varies(config_group: np.ndarray, values: np.ndarray, n_groups: int,
            measured: np.ndarray | None = None) -> np.ndarray:
    """Per group: do its (measured) configurations hold more than one distinct value?"""
    seen: list[set[float]] = [set() for _ in range(n_groups)]
    keep = np.ones(len(values), dtype=bool) if measured is None else np.asarray(measured, bool)
    for g, value, k in zip(config_group.tolist(), values.tolist(), keep.tolist(), strict=True):
        if 0 <= g < n_groups and k:
            seen[g].add(float(value))
    return np.array([len(v) > 1 for v in seen], dtype=bool)


def training_structure(spec: ModelSpec, row_weights: np.ndarray) -> dict:
    """The structured form's data that depends on which rows are measured (a validation fold
    gives its held-out rows weight 0): per configuration, the discrepancy distances; per
    group, the "passes/nodes vary" masks. A configuration is measured while one of its rows
    has weight > 0. Keys are the refittable model's data containers."""
    c, n = spec.configs, len(spec.groups)
    measured = np.bincount(spec.row_config, weights=np.asarray(row_weights, dtype=float),
                           minlength=len(c)) > 0
    return {"config_distance": C.config_distances(c.system, c.batch_tokens, c.passes,
                                                  measured),
            "group_pass_varies": _varies(c.group, c.passes, n, measured).astype(float),
            "group_tree_varies": _varies(c.group, c.nodes, n, measured).astype(float)}


def draft_structure(rows, priors: PriorsConfig, path: str = "the measurement file"
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Sequential drafter passes and paid tree nodes per row, from the ``[methods]`` table
    (zeros for AR rows; for the fraction form, whatever the table declares or zeros)."""
    from ddtree_bayes.core.errors import PriorsError

    passes, nodes = [], []
    for r in rows:
        if r.method == AR_METHOD:
            passes.append(0.0)
            nodes.append(0.0)
            continue
        method = priors.methods.get(r.method)
        if method is None:
            if priors.step_form == "structured":
                raise PriorsError(f"method {r.method!r} (row {r.row} of {path}) is not "
                                  "declared", file=priors.path, column=f"methods.{r.method}",
                                  fix=f'add [methods.{r.method}] with passes = "block" or 1 and '
                                      "tree = true/false/\"auto\"")
            passes.append(0.0)
            nodes.append(0.0)
            continue
        passes.append(float(method.draft_passes(r.block, r.budget)))
        nodes.append(float(method.tree_nodes(r.block, r.budget)))
    return np.array(passes), np.array(nodes)


def pass_roofline_constants(priors: PriorsConfig):
    """The drafter-pass roofline's constants: the medians of the pair roofline's priors
    (bandwidth efficiency, per-layer launch and all-reduce costs), or their defaults."""
    from ddtree_bayes.core.drafters import PassRoofline

    P, base = priors.priors, PassRoofline()

    def median(name: str, default: float) -> float:
        prior = P.get(name)
        if prior is None:
            return default
        p = prior.params
        if prior.dist == "lognormal":
            return float(p["median"])
        if prior.dist == "beta":
            return float(p["alpha"] / (p["alpha"] + p["beta"]))
        if prior.dist == "point":
            return float(p["value"])
        return default

    return PassRoofline(median("pair_bw_eff", base.bw_eff), median("pair_layer_ms", base.layer_ms),
                        median("pair_allreduce_fabric_ms", base.allreduce_fabric_ms),
                        median("pair_allreduce_pcie_ms", base.allreduce_pcie_ms))


def _bundled_drafters() -> tuple:
    """The built-in drafter cards: what a structured spec prices with when given none."""
    from ddtree_bayes.core.drafters import load_drafter_cards
    from ddtree_bayes.core.paths import bundled

    return load_drafter_cards(bundled("drafters.csv"))


def group_inputs(data: Measurements, priors: PriorsConfig, groups: list[str], reps,
                 cfg_group: list[int], hardware: dict[str, dict[str, str]] | None,
                 cards: dict | None, drafters: tuple | None) -> dict:
    """Per overhead group of the structured step: its (base) engine, its system (pair) and the
    roofline of one drafter pass of its method on that system, of the default drafter card of
    its model and method (core/drafters.py; needs the model cards and the hardware table,
    bundled ones by default); and per configuration whose rows name another drafter card (the
    ``drafter`` column), that card's roofline over the group's (``config_pass_scale``)."""
    from ddtree_bayes.core.drafters import (
        drafter_for,
        pass_roofline_ms,
        row_drafter,
    )
    from ddtree_bayes.core.pairs import card_for, split_label

    cards, hardware = _tables(cards, hardware)
    if drafters is None:
        drafters = _bundled_drafters()
    constants = pass_roofline_constants(priors)
    first_config = {g: cfg_group.index(g) for g in range(len(groups))}
    engines: list[str] = []
    group_engine, group_system, roof, hows, recurrent, amd = [], [], [], [], [], []
    for g, label in enumerate(groups):
        r = reps[first_config[g]]
        pair, engine, method = label.rsplit("/", 2)
        if engine not in engines:
            engines.append(engine)
        group_engine.append(engines.index(engine))
        group_system.append(data.pairs.index(pair))
        _, hw, gpus = split_label(pair)
        card = card_for(cards, r.model, data)
        ms, how = pass_roofline_ms(drafter_for(drafters, r.model, method), card, method,
                                   hardware[hw], gpus, constants)
        roof.append(ms)
        hows.append(f"{label}: {ms:.3g} ms ({how})")
        recurrent.append(float(card.recurrent))
        amd.append(float(is_amd(hardware[hw])))
    scale = np.ones(len(reps))
    scale_hows = []
    for c, (r, g) in enumerate(zip(reps, cfg_group, strict=True)):
        if g < 0 or r.drafter is None:
            continue
        _, hw, gpus = split_label(data.pair(r))
        named = row_drafter(drafters, r.model, r.method, r.drafter)
        ms, how = pass_roofline_ms(named, card_for(cards, r.model, data), r.method,
                                   hardware[hw], gpus, constants)
        scale[c] = ms / roof[g]
        scale_hows.append(f"{groups[g]} drafter {r.drafter} (row {r.row}): {ms:.3g} ms, "
                          f"{scale[c]:.3g}x the group's ({how})")
    out = {"engines": tuple(engines), "group_engine": np.array(group_engine, dtype=np.int64),
           "group_recurrent": np.array(recurrent), "group_amd": np.array(amd),
           "group_system": np.array(group_system, dtype=np.int64),
           "group_pass_roof_ms": np.array(roof), "group_pass_how": tuple(hows),
           "drafter_cards": tuple(dataclasses.asdict(d) for d in drafters)}
    if scale_hows:
        out["config_pass_scale"], out["config_pass_how"] = scale, tuple(scale_hows)
    if not data.multi_model:   # an unmeasured group's pass is priced from it at predict time
        out["card"] = dataclasses.asdict(card_for(cards, data.model, data))
    return out


def roofline_inputs(data: Measurements, verify: np.ndarray,
                    hardware: dict[str, dict[str, str]] | None, cards: dict | None,
                    rows=None) -> dict:
    """The distinct-expert ratio of each of ``rows`` (default: the data's rows; ``verify``
    holds their verify tokens) from its own model's card, and each system's (pair's) FLOP time
    per token.

    ``cards`` / ``hardware`` None: the bundled tables (``api.fit`` always passes the working
    directory's own)."""
    from ddtree_bayes.core.model_cards import flop_ms_per_token
    from ddtree_bayes.core.pairs import card_for, split_label

    cards, hardware = _tables(cards, hardware)
    for model in data.models:
        card_for(cards, model, data)
    from ddtree_bayes.core.pairs import link

    model_of = {data.pair(r): r.model for r in data.rows}
    flop_ms, hows, tp_mb, links, tp_hows = [], [], [], [], []
    for label in data.pairs:
        _, hw, gpus = split_label(label)
        card = cards[model_of[label]]
        ms, how = flop_ms_per_token(card, hardware[hw], gpus)
        flop_ms.append(ms)
        hows.append(f"{label}: {how}")
        mb, how = card.allreduce_mb_per_token(gpus)
        tp_mb.append(mb)
        tp_hows.append(f"{label}: {how}")
        links.append(link(hardware[hw], gpus))
    rows = data.rows if rows is None else rows
    distinct = np.ones(len(rows))
    for model in data.models:
        mask = np.array([r.model == model for r in rows], dtype=bool)
        distinct[mask] = cards[model].distinct_ratio(verify[mask])
    return {"row_distinct": distinct, "system_flop_ms": np.array(flop_ms),
            "flops_how": tuple(hows), "card": dataclasses.asdict(cards[data.model]),
            "system_tp_mb": np.array(tp_mb), "system_link": tuple(links),
            "tp_how": tuple(tp_hows)}


def context_reads(data: Measurements, hardware: dict[str, dict[str, str]] | None,
                  cards: dict | None, unit_tokens: float) -> tuple[np.ndarray, tuple[str, ...]]:
    """Each system's (pair's) KV read per ``unit_tokens`` of context at the full bandwidth
    (ms, core/context_cost.py ``context_read_ms``), in ``data.pairs`` order, NaN where its
    model has no card (a proxy's) or the card does not say its KV layout; and the ratio prior
    that prices it (``ratio_name``: one KV head or several). ``cards`` / ``hardware`` None:
    the bundled tables."""
    from ddtree_bayes.core.context_cost import CTX_READ, context_read_ms, ratio_name
    from ddtree_bayes.core.pairs import split_label

    cards, hardware = _tables(cards, hardware)
    model_of = {data.pair(r): r.model for r in data.rows}
    out, ratios = [], []
    for label in data.pairs:
        _, hw, gpus = split_label(label)
        card, row = cards.get(model_of[label]), hardware.get(hw)
        if card is None or row is None:
            out.append(math.nan)
            ratios.append(CTX_READ)
            continue
        read = context_read_ms(card, row, gpus, unit_tokens)
        out.append(math.nan if read is None else read)
        ratios.append(ratio_name(card, row))
    return np.array(out, dtype=float), tuple(ratios)


def _tables(cards: dict | None, hardware: dict[str, dict[str, str]] | None
            ) -> tuple[dict, dict[str, dict[str, str]]]:
    """The model cards and hardware table given, or the bundled ones (the cards parsed once
    per call: ``next`` builds a spec per simulated result, core/per_call.py)."""
    from ddtree_bayes.core import per_call
    from ddtree_bayes.core.data import load_hardware
    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled

    if cards is None:
        file = bundled("models.csv")
        cards = dict(per_call.parsed("model cards", file, lambda: load_model_cards(file)))
    if hardware is None:
        hardware = load_hardware(bundled("hardware.csv"))
    return cards, hardware


def multi_model_inputs(data: Measurements, priors: PriorsConfig,
                       hardware: dict[str, dict[str, str]] | None, cards: dict | None) -> dict:
    """A fit of several models: each pair's model, the model cards, and the pair roofline's
    arrays (core/pairs.py); the priors must hold the pair roofline's priors."""
    from ddtree_bayes.core.errors import PriorsError
    from ddtree_bayes.core.pairs import PAIR_PRIORS, pair_inputs

    for name in PAIR_PRIORS:
        if name not in priors.priors:
            raise PriorsError(f"a fit of several models ({', '.join(data.models)}) needs this "
                              "prior", file=priors.path, column=f"priors.{name}",
                              fix=f"add [priors.{name}] (see the bundled models/priors.toml)")
    cards, hardware = _tables(cards, hardware)
    model_of = {data.pair(r): r.model for r in data.rows}
    return {"pair_models": tuple(model_of[p] for p in data.pairs),
            "pair_roofline": pair_inputs(data.pairs, model_of, hardware, cards, data),
            "cards": {name: dataclasses.asdict(card) for name, card in cards.items()}}


def _reads(ms: np.ndarray) -> list[float | None]:
    """Per-system KV reads with NaN (unknown) as None."""
    return [None if not math.isfinite(x) else float(x) for x in ms]


def system_ctx_priors(spec: ModelSpec, priors: PriorsConfig) -> list:
    """Each system's ``ctx_ms_per_unit`` prior (core/context_cost.py ``ctx_prior``)."""
    return [ctx_prior(priors, r, q) for r, q in _system_reads(spec)]


def _system_reads(spec: ModelSpec) -> list[tuple[float | None, str]]:
    """Each system's KV read (None: unknown) and the ratio prior that prices it."""
    from ddtree_bayes.core.context_cost import CTX_READ

    n = len(spec.systems)
    reads = (_reads(spec.system_ctx_read_ms) if spec.system_ctx_read_ms is not None
             else [None] * n)
    return list(zip(reads, spec.system_ctx_ratio or (CTX_READ,) * n, strict=True))


def model_meta(spec: ModelSpec, priors: PriorsConfig,
               row_weights: np.ndarray | None = None) -> dict:
    """What ``predict`` needs to know about the model's structure (a fit's ``meta["model"]``).
    ``row_weights`` (a validation fold's: 0 for a held-out row): which groups' drafter passes
    and tree nodes vary is the training rows' (:func:`training_structure`, as the refittable
    model is given them), not the file's."""
    meta: dict[str, Any] = {
        "moe_form": priors.moe_form, "step_form": priors.step_form, "knee": priors.knee_sharpness,
        "context_unit_tokens": priors.context_unit_tokens,
        "default_context_tokens": priors.default_context_tokens,
        "relation_bases": {e: r.base for e, r in priors.relations.items()},
        "methods": {n: {"passes": m.passes, "tree": m.tree} for n, m in priors.methods.items()},
    }
    passes_vary, nodes_vary = spec.group_passes_vary, spec.group_nodes_vary
    if spec.step_form == "structured" and passes_vary is not None and nodes_vary is not None:
        if row_weights is not None:
            trained = training_structure(spec, row_weights)
            passes_vary, nodes_vary = trained["group_pass_varies"], trained["group_tree_varies"]
        meta["group_varies"] = {"pass": [bool(x) for x in passes_vary],
                                "tree": [bool(x) for x in nodes_vary]}
    if (spec.step_form == "structured" and spec.group_engine is not None
            and spec.group_pass_roof_ms is not None):
        meta["engines"] = list(spec.engines)
        meta["group_engine"] = [int(x) for x in spec.group_engine]
        if spec.group_system is not None:
            meta["group_system"] = [int(x) for x in spec.group_system]
        meta["group_pass_roof_ms"] = [float(x) for x in spec.group_pass_roof_ms]
        meta["group_pass_how"] = list(spec.group_pass_how)
        if spec.config_pass_how:
            meta["config_pass_how"] = list(spec.config_pass_how)
        if spec.group_recurrent is not None and spec.group_recurrent.any():
            meta["group_recurrent"] = [bool(x) for x in spec.group_recurrent]
        if spec.group_amd is not None and spec.group_amd.any():
            meta["group_amd"] = [bool(x) for x in spec.group_amd]
        meta["pass_roofline"] = dataclasses.asdict(pass_roofline_constants(priors))
        meta["drafter_cards"] = [dict(d, methods=list(d["methods"])) for d in spec.drafter_cards]
    if spec.repeated:
        meta["repeated_runs"] = True
    if np.any(spec.configs.streams > 1):   # the model samples ctx_batch_exponent
        meta["concurrent"] = True
    if spec.accept_groups:
        meta["acceptance_groups"] = [g.as_meta() for g in spec.accept_groups]
    if spec.accept_drafter_cards:
        meta["acceptance_drafter_cards"] = [dict(d, methods=list(d["methods"]))
                                            for d in spec.accept_drafter_cards]
    if spec.pair_models:
        meta["pair_models"] = dict(zip(spec.systems, spec.pair_models, strict=True))
        meta["model_cards"] = spec.cards
    if spec.card is not None:   # (the roofline form's, or the structured step's passes')
        meta["card"] = spec.card
    if spec.card is not None and spec.system_flop_ms is not None:
        meta["system_flop_ms"] = dict(zip(spec.systems, map(float, spec.system_flop_ms),
                                          strict=True))
        meta["flops_how"] = list(spec.flops_how)
    if spec.system_ctx_read_ms is not None and uses_read(priors):
        meta["system_ctx_prior"] = {
            system: {**ctx_prior(priors, read, ratio).params,
                     "how": ctx_prior_how(priors, read, ratio)}
            for system, (read, ratio) in zip(spec.systems, _system_reads(spec), strict=True)}
    if spec.system_tp_mb is not None:   # the verify cost has the all-reduce volume term
        meta["allreduce_volume"] = True
    if spec.system_tp_mb is not None and np.any(spec.system_tp_mb > 0):
        meta["system_tp_mb"] = dict(zip(spec.systems, map(float, spec.system_tp_mb),
                                        strict=True))
        meta["system_link"] = dict(zip(spec.systems, spec.system_link, strict=True))
        meta["tp_how"] = list(spec.tp_how)
    return meta

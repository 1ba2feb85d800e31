"""The three-term step model, independent of PyMC.

``step_ms = MOE(M) + ATTN_BASE(+ context) + SPEC`` and ``tok_s = accept_len / step_ms * 1000``.

The arithmetic here is written once and evaluated twice: on PyTensor tensors when the
model is built (``engine/model.py``) and on numpy posterior draws when predicting
(``engine/predictive.py``). It only uses ``+ - * /`` and the ``exp``/``log`` passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddtree_bayes.core.config import PriorsConfig
from ddtree_bayes.core.data import AR_METHOD, Measurements

Fn = Callable[..., Any]


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


def target_ms(step_ar_ms, moe_share, moe_shape, ctx_ms_per_unit, ctx_verify_exponent,
              verify_tokens, context_units, moe_form: str, exp: Fn, log: Fn):
    """Target forward time: MOE(M) + ATTN_BASE + context term.

    ``step_ar_ms`` is the M=1 step at zero context, split into MOE(1) = moe_share * step_ar_ms
    and ATTN_BASE = the rest; the context term is ``ctx_ms_per_unit * units * M ** b``.

    >>> float(target_ms(10.0, 0.4, 0.5, 2.0, 0.5, 4.0, 1.0, "power", np.exp, np.log))
    18.0
    """
    moe1 = moe_share * step_ar_ms
    attn_base = step_ar_ms - moe1
    context = ctx_ms_per_unit * context_units * exp(ctx_verify_exponent * log(verify_tokens))
    return moe_ms(moe1, verify_tokens, moe_shape, moe_form, exp, log) + attn_base + context


def step_ms(target, overhead_frac, spec_scale):
    """Whole step: target forward plus SPEC = spec_scale * target * f / (1 - f).

    ``overhead_frac`` f is the share of a (base-engine) speculative step spent outside the
    target forward; ``spec_scale`` is 1 for a measured engine and ``1 - reduction`` for an
    engine declared relative to another. f = 0 is autoregressive decoding.

    >>> float(step_ms(12.0, 0.25, 1.0)), float(step_ms(12.0, 0.25, 0.5))
    (16.0, 14.0)
    """
    return target * (1.0 + spec_scale * overhead_frac / (1.0 - overhead_frac))


def tok_s(accept_len, step):
    """Tokens per second from tokens per step and ms per step."""
    return accept_len / step * 1000.0


def group_label(system: str, engine: str, method: str) -> str:
    return f"{system}/{engine}/{method}"


@dataclass(frozen=True)
class ModelSpec:
    """Index structures and observed arrays the PyMC model is built from.

    Overhead groups are (system, engine, method) for speculative rows. A *free* group has
    its own partially pooled overhead fraction; a row whose engine has a declared relation
    uses its base engine's group (added as a free group if unmeasured) scaled by
    ``1 - reduction[engine]``.
    """

    moe_form: str
    systems: tuple[str, ...]
    groups: tuple[str, ...]
    relations: tuple[str, ...]
    row_system: np.ndarray
    row_group: np.ndarray      # index into groups; len(groups) for autoregressive rows
    row_relation: np.ndarray   # index into relations; len(relations) for none
    verify_tokens: np.ndarray
    context_units: np.ndarray
    accept_len: np.ndarray
    log_tok_s: np.ndarray
    rows: tuple[int, ...]

    @property
    def coords(self) -> dict[str, tuple[str, ...]]:
        return {"system": self.systems, "overhead_group": self.groups,
                "relation": self.relations, "measurement": tuple(str(r) for r in self.rows)}


def build_spec(data: Measurements, priors: PriorsConfig) -> ModelSpec:
    """Turn validated data and priors into the model's index arrays (no PyMC)."""
    systems = data.systems
    relations = tuple(sorted(priors.relations))
    groups: list[str] = []
    row_group, row_relation = [], []
    for r in data.rows:
        if r.method == AR_METHOD:
            row_group.append(-1)
            row_relation.append(-1)
            continue
        rel = priors.relations.get(r.engine)
        engine = rel.base if rel else r.engine
        label = group_label(r.system, engine, r.method)
        if label not in groups:
            groups.append(label)
        row_group.append(groups.index(label))
        row_relation.append(relations.index(r.engine) if rel else -1)
    n_groups, n_rel = len(groups), len(relations)
    default_ctx = priors.default_context_tokens
    return ModelSpec(
        moe_form=priors.moe_form,
        systems=systems,
        groups=tuple(groups),
        relations=relations,
        row_system=np.array([systems.index(r.system) for r in data.rows]),
        row_group=np.array([g if g >= 0 else n_groups for g in row_group]),
        row_relation=np.array([k if k >= 0 else n_rel for k in row_relation]),
        verify_tokens=np.array([r.verify_tokens for r in data.rows], dtype=float),
        context_units=np.array([(default_ctx if r.context_tokens is None else r.context_tokens)
                                / priors.context_unit_tokens for r in data.rows]),
        accept_len=np.array([r.accept_len for r in data.rows]),
        log_tok_s=np.log(np.array([r.tok_s for r in data.rows])),
        rows=tuple(r.row for r in data.rows),
    )

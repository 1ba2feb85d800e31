"""A fit of a model without a card (issue 21): a *proxy* card inferred from the measurements.

The roofline and structured forms read a model card for three things: the weights one step
streams (the drafter-pass roofline and, across GPUs, the pair roofline), the FLOPs of a
verified token (the compute knee) and the experts (how the verify cost grows with M). A
single-model fit whose measurements pin the step on their own system does not need the first
two to be right there: the data measure that system's step. So when the model has no card and
none was made from its files, the fit inverts the pair roofline at the measured AR step to get
the weights streamed per step, and assumes the rest:

- dense (no extra experts touched as M grows: the MoE growth with M is the data's, or the
  drafter and tree costs', never a card's),
- ``PROXY_BYTES_PER_WEIGHT`` bytes per weight in ``bf16`` (so the active parameters, hence the
  compute knee, are a guess: a 4-bit model holds 4x the parameters for the same bytes),
- ``PROXY_LAYERS`` layers (the per-layer launch cost and a generic drafter's size).

What stays trustworthy is an answer on the measured system(s), within and near the measured
configurations. Transfer to another GPU, and anything at the compute knee, is prior-driven and
weaker; :func:`describe` says so in one line at fit time, and ``predict`` says so beside an
answer for a system the fit never measured (engine/transfer.py). A fit of several models
still needs a card per model: its pair roofline is the prior of every pair's step, and a proxy
made from the same data would count them twice. Standard library only.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ddtree_bayes.core.data import AR_METHOD, Measurements
from ddtree_bayes.core.model_cards import ModelCard

#: The assumptions of a proxy card (its source says them too).
PROXY_LAYERS = 40
PROXY_BYTES_PER_WEIGHT = 2.0
PROXY_DTYPE = "bf16"
#: The command that replaces a proxy card with a real one.
CARD_FIX = ("make a card from the model's files: ddtree-bayes card add --hf-config "
            "PATH/config.json (or --gguf FILE.gguf) --name {model}")


@dataclass(frozen=True)
class ProxyCard:
    """A proxy card and how it was found (stored in the fit's ``meta["model"]["proxy_card"]``)."""

    card: ModelCard
    rows: tuple[int, ...]
    step_ms: float
    system: str
    upper_bound: bool   # no AR row: the fastest speculative step bounds the AR step above

    def as_meta(self) -> dict:
        return {"model": self.card.model, "rows": list(self.rows), "step_ms": self.step_ms,
                "system": self.system, "upper_bound": self.upper_bound,
                "layers": PROXY_LAYERS, "bytes_per_weight": PROXY_BYTES_PER_WEIGHT,
                "fix": CARD_FIX.format(model=self.card.model)}


def describe(meta: dict) -> str:
    """The one stderr line a fit with a proxy card prints (``meta``: :meth:`ProxyCard.as_meta`)."""
    how = ("bounded by the fastest speculative step" if meta["upper_bound"]
           else "from the measured AR step")
    rows = ", ".join(str(r) for r in meta["rows"])
    return (f"no model card for {meta['model']!r}: a proxy card {how} ({meta['step_ms']:.3g} ms "
            f"on {meta['system']}, row{'s' * (len(meta['rows']) > 1)} {rows}; dense, "
            f"{meta['bytes_per_weight']:g} B/weight, {meta['layers']} layers assumed). Answers on "
            "the measured system(s) hold; transfer to other GPUs, the compute knee and MoE "
            f"growth beyond the measured M are prior-driven and weaker (fix: {meta['fix']})")


def proxy_card(data: Measurements, hardware: dict[str, dict[str, str]], *, bw_eff: float,
               layer_ms: float, allreduce_fabric_ms: float, allreduce_pcie_ms: float,
               default_context_tokens: float = 0.0) -> ProxyCard | None:
    """The proxy card of a single-model fit's model, or None when no row can give one (every
    row's acceptance is inferred and none is AR).

    The step is the median measured single-stream AR step at the lowest context on the system
    with the most such rows (ties: the first in the file); with none, the fastest measured
    step of any row, ``1000 x accept x C / tok_s`` (an upper bound on the AR step, said so).
    The weights streamed per step invert ``step = stream / bw_eff + layers x per_layer``
    (engine/pairs.py's pair roofline at the priors' medians), floored at half the step's
    streaming time.

    >>> from ddtree_bayes.core.data import Measurement
    >>> hw = {"rtx-4090": {"hardware": "rtx-4090", "mem_bw_tb_s": "1.008",
    ...                    "interconnect": "PCIe Gen4"}}
    >>> row = Measurement(2, "m", "rtx-4090", 1, "llama.cpp", "ar", None, None, 1, 1.0, 0, 50.0,
    ...                   "s", "")
    >>> data = Measurements("mine.csv", "", (row,))
    >>> p = proxy_card(data, hw, bw_eff=0.63, layer_ms=0.03, allreduce_fabric_ms=0.05,
    ...                allreduce_pcie_ms=0.1)
    >>> round(p.step_ms, 6), round(p.card.params_active_b, 4)  # (20 - 40 x 0.03) x .63 x 1.008 / 2
    (20.0, 5.9694)
    """
    from ddtree_bayes.core.pairs import link

    rows = list(data.rows)
    ar = [r for r in rows if r.method == AR_METHOD and r.concurrency == 1]
    upper = not ar
    if ar:
        per_system: dict[str, list] = {}
        for r in ar:
            per_system.setdefault(data.pair(r), []).append(r)
        system = max(per_system, key=lambda s: len(per_system[s]))   # first of the most
        chosen = per_system[system]

        low = min(r.context(default_context_tokens) for r in chosen)
        chosen = [r for r in chosen if r.context(default_context_tokens) == low]
        step = statistics.median(1000.0 / r.tok_s for r in chosen)
    else:
        steps = {i: r.step_ms for i, r in enumerate(rows) if r.step_ms is not None}
        if not steps:
            return None
        i = min(steps, key=steps.__getitem__)
        chosen, system, step = [rows[i]], data.pair(rows[i]), steps[i]
    r0 = chosen[0]
    hw = hardware[r0.hardware]
    kind = link(hw, r0.gpus)
    per_layer = layer_ms + (allreduce_fabric_ms if kind == "fabric" else
                            allreduce_pcie_ms if kind == "pcie" else 0.0)
    stream_ms = max(step - PROXY_LAYERS * per_layer, 0.5 * step) * bw_eff
    params_b = stream_ms * float(hw["mem_bw_tb_s"]) * r0.gpus / PROXY_BYTES_PER_WEIGHT
    card = ModelCard(
        model=r0.model, params_total_b=params_b, params_active_b=params_b, layers=PROXY_LAYERS,
        experts=None, experts_topk=None, bytes_per_weight=PROXY_BYTES_PER_WEIGHT,
        compute_dtype=PROXY_DTYPE,
        source=(f"PROXY: inferred from {data.path} row(s) "
                f"{', '.join(str(r.row) for r in chosen)} ({step:.3g} ms step); no card given"))
    return ProxyCard(card, tuple(r.row for r in chosen), step, system, upper)

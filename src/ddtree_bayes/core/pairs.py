"""Several target models in one fit: (model, system) pairs and the roofline prior of their
M = 1 step. numpy and the standard library only.

A fit of one model keeps its parameters per system (``b300x8``); a fit of several models keeps
them per (model, system) pair, labelled ``qwen3-8b@h100x1``. In a fit of several models the
autoregressive (M = 1) step of every pair, measured or not, has the prior

    step_ar[pair] ~ LogNormal(log roofline[pair], pair_step_sd)
    roofline[pair] = stream_ms / pair_bw_eff + layers x (pair_layer_ms
                     + [gpus > 1] x pair_allreduce_<fabric|pcie>_ms)
    stream_ms      = active parameters (B) x bytes per weight / (TB/s per GPU x GPUs)

whose efficiency and per-layer costs are learned across the measured pairs (docs/model.md,
"Several models in one fit"). ``stream_ms`` is the time to read the active weights once at the
full memory bandwidth, split over the GPUs (tensor parallel); the per-layer cost is kernel
launches, norms and short-context attention, plus two all-reduces per layer when the model is
split over several GPUs (slower over PCIe than over an NVLink-class fabric).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ddtree_bayes.core.errors import DataError, QueryError, closest

#: Between the model and the system in a pair label.
SEP = "@"
#: Priors of the pair roofline (``[priors.<name>]``, global), needed by a fit of several models.
PAIR_PRIORS = ("pair_bw_eff", "pair_layer_ms", "pair_allreduce_fabric_ms",
               "pair_allreduce_pcie_ms", "pair_step_sd")
#: How the GPUs of a system talk: one GPU, an NVLink-class fabric, or PCIe only.
LINKS = ("single", "fabric", "pcie")


def pair_label(model: str, system: str, multi: bool) -> str:
    """The label of a (model, system) pair: the system alone in a fit of one model.

    >>> pair_label("qwen3-8b", "h100x1", True), pair_label("kimi-k2.6", "b300x8", False)
    ('qwen3-8b@h100x1', 'b300x8')
    """
    return f"{model}{SEP}{system}" if multi else system


def split_label(label: str) -> tuple[str | None, str, int]:
    """(model or None, hardware, gpus) of a pair or system label.

    >>> split_label("qwen3-8b@h100x1"), split_label("b300x8")
    (('qwen3-8b', 'h100', 1), (None, 'b300', 8))
    """
    model, _, system = label.rpartition(SEP)
    hardware, _, gpus = system.rpartition("x")
    return (model or None), hardware, int(gpus)


#: An interconnect text that names PCIe ("PCIe Gen5", "PCI-E 4.0", "PCI Express 5.0"). It is
#: tested first: "NVLink bridge (pairs); PCIe Gen5" is a PCIe node.
PCIE_RE = re.compile(r"\bpci", re.IGNORECASE)
#: An interconnect text that names an NVLink-class fabric (NVLink, NVSwitch, AMD Infinity
#: Fabric / xGMI), tested second: "NVLink Gen5" is a fabric.
FABRIC_RE = re.compile(r"nvlink|nvswitch|infinity[\s_-]*fabric|xgmi|\bici\b", re.IGNORECASE)
#: A fabric named only to say it is absent ("no NVLink", "without NVLink", "non-NVLink",
#: "NVLink: none"): not a fabric. Read as one before, "no NVLink" priced a PCIe node's
#: all-reduces at NVLink bandwidth and transferred it from a fabric node.
NEGATED_FABRIC_RE = re.compile(
    r"(?:\b(?:no|not|non|without|w/o)[\s-]+(?:an?\s+)?(?:" + FABRIC_RE.pattern + r")"
    r"(?:\s*(?:/|,|or|and)\s*(?:" + FABRIC_RE.pattern + r"))*)"
    r"|(?:(?:" + FABRIC_RE.pattern + r")\s*[:=]?\s*(?:none|no|n/a|absent|disabled)\b)",
    re.IGNORECASE)
#: A bare PCIe generation ("Gen5 x16"), tested last.
GEN_RE = re.compile(r"\bgen\s*\d", re.IGNORECASE)
#: An NVLink bridge between pairs of PCIe cards ("NVLink bridge (pairs); PCIe Gen5", "optional
#: 2-way NVLink bridge"): beside PCIe, a PCIe node.
BRIDGE_RE = re.compile(r"bridge|\bpairs?\b|\b(?:2|two)[\s-]*way\b", re.IGNORECASE)


#: The fix of an interconnect text :func:`link_class` cannot read.
LINK_FIX = ("write e.g. 'PCIe Gen5' (a card without NVLink, also alone), 'NVLink4 0.9 TB/s' or "
            "'Infinity Fabric' (a TPU's 'ICI'): the all-reduce cost and the system a prediction "
            "transfers from depend on it")


#: The fix of an interconnect text that names both PCIe and a fabric (:func:`names_both`).
BOTH_FIX = ("write how the node's GPUs reach one another: 'NVLink4 0.9 TB/s' for an SXM / HGX "
            "board, 'NVLink bridge (pairs); PCIe Gen5' for PCIe cards bridged in pairs, "
            "'PCIe Gen5' without NVLink (a datasheet's interconnect row lists the host's PCIe "
            "link beside NVLink)")


def names_both(interconnect: str) -> bool:
    """Whether ``interconnect`` names both PCIe and an NVLink-class fabric without saying the
    fabric is a bridge between pairs of cards: NVIDIA's datasheets write an SXM part's row as
    both its links ("NVIDIA NVLink: 900GB/s PCIe Gen5: 128GB/s", H100 SXM), which
    :func:`link_class`, reading PCIe first, took for a PCIe node. ``hardware add`` and the
    hardware table refuse it (:data:`BOTH_FIX`); a saved fit's table is read as it was fitted.

    >>> [names_both(t) for t in ("NVIDIA NVLink: 900GB/s, PCIe Gen5: 128GB/s",
    ...                          "NVLink bridge (pairs); PCIe Gen5", "PCIe Gen5 (no NVLink)",
    ...                          "PCIe Gen4 (optional 2-way NVLink bridge)", "NVLink4 0.9 TB/s")]
    [True, False, False, False, False]
    """
    return bool(PCIE_RE.search(interconnect)
                and FABRIC_RE.search(NEGATED_FABRIC_RE.sub(" ", interconnect))
                and not BRIDGE_RE.search(interconnect))


def link_problem(interconnect: str) -> tuple[str, str] | None:
    """(what is wrong, the fix) of an interconnect text the pair roofline cannot class: one
    that names neither PCIe nor a fabric (:data:`LINK_FIX`), or both without a bridge
    (:func:`names_both`, :data:`BOTH_FIX`); None for one it can. ``hardware add`` and the
    hardware table refuse both alike.

    >>> link_problem("PCIe Gen5"), link_problem("Bicycle")[0]
    (None, 'names neither PCIe nor an NVLink-class fabric')
    """
    if link_class(interconnect) is None:
        return "names neither PCIe nor an NVLink-class fabric", LINK_FIX
    if names_both(interconnect):
        return "names both PCIe and an NVLink-class fabric", BOTH_FIX
    return None


def link_class(interconnect: str) -> str | None:
    """"pcie", "fabric" (NVLink-class), or None when the text names neither.

    >>> [link_class(t) for t in ("PCIe Gen5", "PCI Express 5.0", "Gen5 x16", "NVLink4 0.9 TB/s",
    ...                          "NVLink bridge; PCIe Gen5", "NVLink Gen5", "Infinity Fabric",
    ...                          "Ethernet", "")]
    ['pcie', 'pcie', 'pcie', 'fabric', 'pcie', 'fabric', 'fabric', None, None]
    >>> link_class("ICI 1.2 TB/s (TPU inter-chip)"), link_class("Bicycle")   # TPU's fabric
    ('fabric', None)

    A fabric named only as absent is none (:data:`NEGATED_FABRIC_RE`):

    >>> [link_class(t) for t in ("no NVLink", "NVLink: none", "PCIe Gen5 (no NVLink)",
    ...                          "no NVLink; NVSwitch")]
    [None, None, 'pcie', 'fabric']
    """
    if PCIE_RE.search(interconnect):
        return "pcie"
    if FABRIC_RE.search(NEGATED_FABRIC_RE.sub(" ", interconnect)):
        return "fabric"
    return "pcie" if GEN_RE.search(interconnect) else None


def is_fabric(hardware_row: dict[str, str]) -> bool:
    """An NVLink-class fabric between the GPUs: not PCIe. The hardware table refuses an
    interconnect that names neither (core/data.py ``load_hardware``); a saved fit's table
    may still hold one, read as a fabric, as it was fitted."""
    return link_class(hardware_row.get("interconnect", "")) != "pcie"


def link(hardware_row: dict[str, str], gpus: int) -> str:
    """``single`` (one GPU), ``fabric`` or ``pcie``.

    >>> link({"interconnect": "PCIe Gen5"}, 2), link({"interconnect": "NVLink5"}, 8)
    ('pcie', 'fabric')
    """
    if gpus <= 1:
        return "single"
    return "fabric" if is_fabric(hardware_row) else "pcie"


@dataclass(frozen=True)
class PairFeatures:
    """What the pair roofline reads from a model card and the hardware table."""

    stream_ms: float   # weights a token reads / (bandwidth x GPUs), at 100% of the bandwidth
    layers: int
    link: str          # single | fabric | pcie
    gpus: int
    bandwidth_tb_s: float

    @property
    def fabric(self) -> float:
        return float(self.link == "fabric")

    @property
    def pcie(self) -> float:
        return float(self.link == "pcie")

    def describe(self, model: str, hardware: str) -> str:
        return (f"card {model}: {self.stream_ms * self.bandwidth_tb_s * self.gpus:.1f} GB of "
                f"active weights, {self.layers} layers; {hardware} x{self.gpus}: "
                f"{self.bandwidth_tb_s:g} TB/s per GPU, {self.link}")


def pair_features(card, hardware_row: dict[str, str], gpus: int) -> PairFeatures:
    """The roofline's inputs for a model card on ``gpus`` GPUs of a hardware-table row.

    >>> from ddtree_bayes.core.model_cards import ModelCard
    >>> card = ModelCard("m", 8, 8, 32, None, None, 2, "bf16", "s")
    >>> f = pair_features(card, {"hardware": "h", "mem_bw_tb_s": "4", "interconnect": "x"}, 1)
    >>> f.stream_ms, f.layers, f.link   # 8e9 params x 2 B / 4e12 B/s = 4 ms
    (4.0, 32, 'single')
    """
    try:
        bandwidth = float(hardware_row.get("mem_bw_tb_s") or "nan")
    except ValueError:
        bandwidth = math.nan
    if not math.isfinite(bandwidth) or bandwidth <= 0:
        raise DataError(f"no memory bandwidth for {hardware_row.get('hardware', '?')}",
                        file="data/hardware.csv", column="mem_bw_tb_s",
                        fix="fill in mem_bw_tb_s (TB/s per GPU), with its source")
    # B params x bytes / (TB/s x GPUs): 1e9 / 1e12 s = 1 ms; the weights a token reads
    # (read_gb: not an untied input embedding, of which it reads one row)
    stream = card.read_gb / (bandwidth * gpus)
    return PairFeatures(stream, int(card.layers), link(hardware_row, gpus), gpus, bandwidth)


#: The fewest bits per weight any quantisation stores: llama.cpp's Q1_0, 1.125 bits (ggml's
#: ``GGML_TYPE_Q1_0``: one sign bit per weight and an fp16 scale per 128, 18 bytes per 128
#: weights; ``llama-quantize``'s table "Q1_0: 1.125 bpw", upstream since ggml-org/llama.cpp
#: #21273, 2026-04; PrismML's Bonsai models ship in it). IQ1_S's 1.5625 was the floor before
#: it, and an honest Q1_0 run was refused. A decoding step reads every active weight at least
#: once, so no deployment of a card steps faster than reading its active weights at this many
#: bits over all its GPUs' bandwidth (:func:`impossible_step`), and no GPUs hold a card's
#: weights in fewer than its parameters at it (core/data ``weights_problem``).
LEAST_BITS_PER_WEIGHT = 1.125
#: How the floor is named in what refuses a row against it
LEAST_QUANTISATION = "Q1_0, the fewest any quantisation stores"


def read_features(card, hardware_row: dict[str, str], gpus: int) -> PairFeatures | None:
    """:func:`pair_features` of ``card`` on ``gpus`` GPUs of ``hardware_row``, or None when
    the row has no bandwidth (the checks that hold a step against a read skip such a row)."""
    try:
        return pair_features(card, hardware_row, gpus)
    except (KeyError, ValueError, DataError, QueryError):
        return None


def least_read_ms(card, hardware_row: dict[str, str], gpus: int) -> float | None:
    """Reading ``card``'s active weights once at :data:`LEAST_BITS_PER_WEIGHT` over the full
    bandwidth of ``gpus`` GPUs of ``hardware_row`` (ms); None without a bandwidth.

    >>> from ddtree_bayes.core.model_cards import ModelCard
    >>> card = ModelCard("m", 8, 8, 32, None, None, 2, "bf16", "s")
    >>> least_read_ms(card, {"hardware": "h", "mem_bw_tb_s": "4", "interconnect": "x"}, 1)
    0.28125
    """
    f = read_features(card, hardware_row, gpus)
    if f is None:
        return None
    return card.read_params_b * LEAST_BITS_PER_WEIGHT / 8 / (f.bandwidth_tb_s * gpus)


def impossible_step(card, hardware_row: dict[str, str] | None, m) -> tuple[str, str] | None:
    """(message, fix) when measurement ``m``'s step (1000 x accept_len x concurrency / tok_s;
    accept 1 for autoregressive rows, unchecked for others without accept_len) is shorter
    than :func:`least_read_ms`: faster than any quantisation of the card reads its weights,
    so a slip of the unit or the entry (2000 tok/s for Mixtral on 2 x MI210, a 0.5 ms step
    against 0.79 ms); None when it is not, or cannot be checked (no card, GPU or bandwidth).
    ``add`` and ``fit`` refuse such a row; one between this floor and the card's own bytes is
    kept with a warning (a deployment quantised below the card's bytes)."""
    from ddtree_bayes.core.methods import AR_METHOD

    accept = m.accept_len if m.accept_len is not None else (
        1.0 if m.method == AR_METHOD else None)
    if card is None or hardware_row is None or accept is None:
        return None
    least = least_read_ms(card, hardware_row, m.gpus)
    step = 1000.0 * accept * m.concurrency / m.tok_s
    if least is None or step >= least:
        return None
    bandwidth = float(hardware_row["mem_bw_tb_s"]) * m.gpus
    return (f"step {step:.3g} ms ({m.tok_s:g} tok/s at accept {accept:g}"
            + (f", {m.concurrency} streams" if m.concurrency > 1 else "")
            + f") is shorter than reading {card.model}'s {card.read_params_b:.3g}B active "
            f"weights at {LEAST_BITS_PER_WEIGHT:g} bits per weight ({LEAST_QUANTISATION}) "
            f"over {m.gpus} x {m.hardware} ({bandwidth:.3g} TB/s): "
            f"{least:.3g} ms; no deployment runs that fast",
            "check tok_s (tokens per second; with concurrency, the streams' total), "
            "accept_len and gpus")


def roofline_step_ms(stream_ms, layers, fabric, pcie, bw_eff, layer_ms, allreduce_fabric_ms,
                     allreduce_pcie_ms):
    """The pair roofline's M = 1 step (numpy or PyTensor: only ``+ * /``).

    >>> float(roofline_step_ms(4.0, 32, 0.0, 0.0, 0.8, 0.03, 0.05, 0.1))  # 5 + 32 x 0.03
    5.96
    >>> round(float(roofline_step_ms(0.25, 61, 1.0, 0.0, 0.5, 0.03, 0.05, 0.1)), 6)  # 0.5 + 61 x 0.08
    5.38
    """
    return (stream_ms / bw_eff
            + layers * (layer_ms + fabric * allreduce_fabric_ms + pcie * allreduce_pcie_ms))


def pair_inputs(pairs: tuple[str, ...], models: dict[str, str],
                hardware: dict[str, dict[str, str]] | None, cards: dict | None,
                data=None) -> dict:
    """Per pair (in ``pairs`` order) the roofline's arrays: ``stream_ms``, ``layers``,
    ``fabric``, ``pcie`` (``models``: pair label -> model; ``data``: the measurements, which
    a missing card's error names)."""
    if hardware is None:
        raise DataError("a fit of several models needs the hardware table", fix="pass hardware=")
    cols: dict[str, list[float]] = {"stream_ms": [], "layers": [], "fabric": [], "pcie": []}
    for label in pairs:
        _, hw, gpus = split_label(label)
        f = pair_features(card_for(cards, models[label], data), hardware[hw], gpus)
        for key in cols:
            cols[key].append(float(getattr(f, key)))
    return {k: np.array(v) for k, v in cols.items()}


def card_for(cards: dict | None, model: str, data=None):
    """The model card of ``model``, or a one-line error naming the measurement that names the
    model (``data``'s first row of it; without ``data``, ``data/models.csv``) and the fix: add
    its card, or correct a misspelt name (the closest card named).

    >>> from types import SimpleNamespace as NS
    >>> rows = [NS(row=2, model="kimi-k2.6"), NS(row=5, model="kimi-k2.7")]
    >>> card_for({"kimi-k2.6": 1}, "kimi-k2.7", NS(path="m.csv", rows=rows, multi_model=True))
    Traceback (most recent call last):
    ...
    ddtree_bayes.core.errors.DataError: m.csv, row 5, column 'model': no model card for \
'kimi-k2.7' (fix: add its card (`ddtree-bayes card add --hf-config PATH/config.json --name \
kimi-k2.7`, or --gguf FILE.gguf, or a row in data/models.csv), or correct the name: did you \
mean 'kimi-k2.6'?)
    """
    if not cards or model not in cards:
        near = closest(model, cards or (), n=1)
        fix = (f"add its card (`ddtree-bayes card add --hf-config PATH/config.json --name "
               f"{model}`, or --gguf FILE.gguf, or a row in data/models.csv), or correct the "
               "name" + (f": did you mean {near[0]!r}?" if near else ""))
        if data is None or not data.multi_model:
            fix += " (a fit of one model makes a proxy card from its AR row instead)"
        if data is None:
            raise DataError(f"no model card for {model!r}", file="data/models.csv",
                            column="model", fix=fix)
        row = next(r.row for r in data.rows if r.model == model)
        raise DataError(f"no model card for {model!r}", file=data.path, row=row, column="model",
                        fix=fix)
    return cards[model]


def target_models_meta(data) -> dict:
    """A fit's ``meta["model"]`` entries naming its models: ``target_model`` for a fit of one
    model; for several, ``target_model`` None and the sorted ``target_models``."""
    if not data.multi_model:
        return {"target_model": data.model}
    return {"target_model": None, "target_models": list(data.models)}


def same_family(a: str, b: str) -> bool:
    """One target model under two names: equal, or a deployment card of the other
    (``<model>-<quantisation>``: ``qwen3.8-27b-q4_k_m`` of ``qwen3.8-27b``).

    >>> same_family("qwen3.8-27b", "qwen3.8-27b-q4_k_m"), same_family("qwen3.5-27b", "qwen3.8-27b")
    (True, False)
    """
    return a == b or a.startswith(b + "-") or b.startswith(a + "-")


def same_target(a: str, b: str, names) -> bool:
    """One target model under two deployment names: :func:`same_family`, or two deployment
    cards of one model among ``names`` (the fit's models: ``qwen3.8-27b-iq2_xxs`` and
    ``qwen3.8-27b-q4_k_m`` when ``qwen3.8-27b`` is one of them). Only a name the fit knows is
    a common root, so two cards of unrelated models never match by a shared prefix.

    >>> same_target("qwen3.8-27b-iq2_xxs", "qwen3.8-27b-q4_k_m", ["qwen3.8-27b"])
    True
    >>> same_target("qwen3.8-27b-iq2_xxs", "qwen3.8-27b-q4_k_m", ["qwen3.8-27b-q8_0"])
    False
    """
    return same_family(a, b) or any(same_family(r, a) and same_family(r, b) for r in names)

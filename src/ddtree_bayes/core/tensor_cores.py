"""Which precisions a GPU's tensor cores run, by its NVIDIA compute capability: the one rule
the hardware table's reader, ``hardware add`` and the peak-FLOPs derivation
(:func:`ddtree_bayes.core.model_cards.peak_tflops`) share."""

from __future__ import annotations

import math
import re

#: NVIDIA compute capability from which int8 runs on tensor cores (Turing's ``mma``); below
#: it ggml's MMQ uses ``dp4a`` integer dot products (mmq.cuh), 4 x the FP32 rate, which is
#: half the FP16 tensor rate on Volta (8 x FP32): int8 is then derived as bf16 / 2.
INT8_MMA_MIN_CC = 7.5
#: The least NVIDIA compute capability whose tensor cores run each precision the table gives a
#: peak for beyond bf16: int8 from Turing (7.5, above), fp8 from Ada and Hopper (8.9), fp4 from
#: Blackwell (10.0). A GPU below one has no such peak (``hardware add`` drops a copied one).
MMA_MIN_CC = {"int8": INT8_MMA_MIN_CC, "fp8": 8.9, "fp4": 10.0}
#: AMD Instinct matrix cores by gfx target (ROCm's GPU architecture table): CDNA2 (gfx90a,
#: MI250X) multiplies bf16 and int8 but no fp8; CDNA3 (gfx942, MI300X / MI325X) adds fp8;
#: CDNA4 (gfx950, MI355X) adds fp4. A gfx target not listed: nothing known, nothing refused.
AMD_WITHOUT_MMA = {"gfx90a": ("fp8", "fp4"), "gfx942": ("fp4",), "gfx950": ()}
#: The first AMD gfx target whose matrix cores run each precision (for the messages).
AMD_MIN_GFX = {"fp8": "gfx942 (CDNA3)", "fp4": "gfx950 (CDNA4)"}
#: A compute capability as the hardware table writes it: NVIDIA's major.minor (7.0, 10.3) or an
#: AMD GPU's gfx target (gfx942), which no NVIDIA threshold applies to.
COMPUTE_CAPABILITY_RE = re.compile(r"[0-9]{1,2}\.[0-9]|gfx[0-9a-f]{3,4}")

#: The NVIDIA compute capability majors that exist (NVIDIA's CUDA GPUs page): 1 (Tesla, the first
#: CUDA GPUs, 1.0) to 12 (Blackwell: RTX 50 and RTX PRO 6000 12.0, DGX Spark's GB10 12.1).
#: ``hardware add`` refuses a major.minor outside them (99.9 was taken without a word).
NVIDIA_CC_MAJORS = range(1, 13)
#: The range as the messages say it.
NVIDIA_CC_SPAN = "1.0 (Tesla) to 12.x (Blackwell: RTX 50, RTX PRO 6000 12.0, DGX Spark 12.1)"


def nvidia_cc_unknown(compute_capability: str) -> bool:
    """A major.minor compute capability whose major no NVIDIA GPU has (:data:`NVIDIA_CC_MAJORS`);
    a gfx target, blank or unreadable text is not one (the table's pattern judges those).

    >>> nvidia_cc_unknown("99.9"), nvidia_cc_unknown("0.9"), nvidia_cc_unknown("13.0")
    (True, True, True)
    >>> nvidia_cc_unknown("1.0"), nvidia_cc_unknown("12.1"), nvidia_cc_unknown("gfx942")
    (False, False, False)
    """
    m = re.fullmatch(r"\s*([0-9]{1,2})\.[0-9]\s*", compute_capability)
    return m is not None and int(m[1]) not in NVIDIA_CC_MAJORS


def nvidia_cc_problem(compute_capability: str) -> tuple[str, str] | None:
    """(what is wrong, the fix) of a compute capability no NVIDIA GPU has
    (:func:`nvidia_cc_unknown`), None otherwise: one rule, for ``hardware add``'s
    ``--compute-capability`` and every hardware table's ``compute_capability`` column (each
    names the flag or the column before it).

    >>> nvidia_cc_problem("99.9")[0]
    "99.9 is no NVIDIA GPU's: compute capabilities run from 1.0 (Tesla) to 12.x (Blackwell: \
RTX 50, RTX PRO 6000 12.0, DGX Spark 12.1)"
    >>> nvidia_cc_problem("12.0") is None, nvidia_cc_problem("gfx942") is None
    (True, True)
    """
    if not nvidia_cc_unknown(compute_capability):
        return None
    return (f"{compute_capability.strip()} is no NVIDIA GPU's: compute capabilities run from "
            f"{NVIDIA_CC_SPAN}",
            "give the GPU's own (nvidia-smi --query-gpu=compute_cap), or an AMD GPU's gfx "
            "target, e.g. gfx942")


def is_amd(hardware_row: dict[str, str]) -> bool:
    """An AMD GPU: its ``compute_capability`` is a gfx target (gfx942, gfx1151...).

    >>> is_amd({"compute_capability": "gfx942"}), is_amd({"compute_capability": "9.0"})
    (True, False)
    """
    return hardware_row.get("compute_capability", "").strip().lower().startswith("gfx")


def compute_capability_fix(text: str) -> str:
    """The fix of a compute capability the table cannot read (``sm_70``: 7.0).

    >>> print(compute_capability_fix("sm_70"))
    write it as major.minor: 7.0 (sm_70 is CC 7.0)
    >>> print(compute_capability_fix("compute_100a"))
    write it as major.minor: 10.0 (compute_100a is CC 10.0)
    >>> compute_capability_fix("Volta").startswith("write it as major.minor, e.g. 8.9")
    True
    """
    m = re.fullmatch(r"\s*(?:sm|compute)_?([0-9]{1,2})([0-9])[a-z]?\s*", text, re.IGNORECASE)
    if m is not None:
        return f"write it as major.minor: {m[1]}.{m[2]} ({text.strip()} is CC {m[1]}.{m[2]})"
    return ("write it as major.minor, e.g. 8.9 (nvidia-smi --query-gpu=compute_cap), or an AMD "
            "GPU's gfx target, e.g. gfx942")


def precisions_without_mma(compute_capability: str) -> tuple[str, ...]:
    """The precisions of :data:`MMA_MIN_CC` a GPU of this compute capability has no tensor
    (matrix) cores for, in the table's order: by NVIDIA's major.minor, or an AMD gfx target of
    :data:`AMD_WITHOUT_MMA` (any other text, or blank: none known).

    >>> precisions_without_mma("7.0"), precisions_without_mma("8.6"), precisions_without_mma("8.9")
    (('fp8', 'fp4', 'int8'), ('fp8', 'fp4'), ('fp4',))
    >>> precisions_without_mma("10.3"), precisions_without_mma("gfx942"), precisions_without_mma("")
    ((), ('fp4',), ())
    """
    cc = compute_capability.strip()
    if cc in AMD_WITHOUT_MMA:
        return AMD_WITHOUT_MMA[cc]
    try:
        number = float(cc)
    except ValueError:
        return ()
    return tuple(p for p in ("fp8", "fp4", "int8") if number < MMA_MIN_CC[p])


def peaks_out_of_order(row: dict[str, str]) -> tuple[str, str] | None:
    """The first (wider, narrower) pair of a hardware row's dense peaks in which the narrower
    precision is the slower (fp8 below bf16, fp4 below fp8 or bf16): tensor cores multiply a
    narrower precision at least as fast, so it is a unit or sparse/dense slip. None when every
    pair given is in order (a blank or unreadable peak is no pair).

    >>> peaks_out_of_order({"dense_bf16_tflops": "165", "dense_fp8_tflops": "10"})
    ('bf16', 'fp8')
    >>> peaks_out_of_order({"dense_bf16_tflops": "989", "dense_fp8_tflops": "1979"}) is None
    True
    """
    def peak(p: str) -> float | None:
        text = row.get(f"dense_{p}_tflops", "").strip()
        try:
            return float(text) if text else None
        except ValueError:
            return None

    for wide, narrow in (("bf16", "fp8"), ("fp8", "fp4"), ("bf16", "fp4")):
        lo, hi = peak(narrow), peak(wide)
        if lo is not None and hi is not None and lo < hi:
            return wide, narrow
    return None


#: How much faster than a wider precision a narrower one's dense peak can be, at the
#: accumulate mode the table writes (GeForce / RTX: FP32 accumulate): fp8 is 2x bf16 on every
#: GPU of the built-in table (1.99-2.02x), fp4 2x fp8 on data-centre Blackwell and 4x on
#: GeForce Blackwell (whose fp8 FP32-accumulate rate is halved; RTX 5090: 209.5 / 419 / 1676),
#: int8 2-4x bf16 (RTX 4090: 165.15 / 660.6). The limits leave room for rounding; beyond them
#: the figure is a sparse, FP16-accumulate or other-unit one.
PEAK_STEP_LIMITS = {("bf16", "fp8"): 2.5, ("fp8", "fp4"): 4.5, ("bf16", "fp4"): 9.0,
                    ("bf16", "int8"): 4.5}
#: The limits on a data-centre part (compute capability 7.0, 8.0, 9.0, 10.x; AMD gfx90a /
#: gfx942 / gfx950), whose tables give every precision at one accumulate mode: fp8 and int8 2x
#: bf16 (H100 989 / 1979 / 1979, MI300X), fp4 2x fp8 on B200 and 3x on B300 (4500 /
#: 13500; 3.33x at the 15000 some tables give). A sparse figure is 2x the dense one, so the
#: GeForce limits would let B200's sparse FP4 (18000, 4x fp8) or H100's sparse INT8 (3958, 4x
#: bf16) through.
DATA_CENTRE_PEAK_STEP_LIMITS = {("bf16", "fp8"): 2.5, ("fp8", "fp4"): 3.5, ("bf16", "fp4"): 7.0,
                                ("bf16", "int8"): 2.5}
DATA_CENTRE_CC = ("7.0", "8.0", "9.0", "10.0", "10.3", "gfx90a", "gfx942", "gfx950")


#: Why a pair beyond its limit is refused (``n``, ``w``: the precisions; ``limit``).
PEAK_STEP_WHY = ("no tensor core of its kind multiplies {n} more than {limit:g}x as fast as {w} "
                 "(a sparse or FP16-accumulate figure?)")


def peaks_too_far_apart(row: dict[str, str]) -> tuple[str, str, float, float] | None:
    """The first (wider, narrower, ratio, limit) of a hardware row's dense peaks in which the
    narrower precision's peak is more than :data:`PEAK_STEP_LIMITS` times the wider one's
    (an RTX 4090's sparse FP8 figure, 1321, beside its bf16 165.15 is 8x: its compute knee
    would sit 4x too far out). None when every pair given is within its limit.

    >>> peaks_too_far_apart({"dense_bf16_tflops": "165.15", "dense_fp8_tflops": "1321"})
    ('bf16', 'fp8', 7.998789, 2.5)
    >>> peaks_too_far_apart({"dense_bf16_tflops": "209.5", "dense_fp8_tflops": "419",
    ...                      "dense_fp4_tflops": "1676"}) is None
    True
    >>> peaks_too_far_apart({"compute_capability": "10.0", "dense_bf16_tflops": "2250",
    ...                      "dense_fp8_tflops": "4500", "dense_fp4_tflops": "18000"})
    ('fp8', 'fp4', 4.0, 3.5)
    """
    def peak(p: str) -> float | None:
        try:
            value = float(row.get(f"dense_{p}_tflops", "").strip() or "nan")
        except ValueError:
            return None
        return value if math.isfinite(value) and value > 0 else None

    limits = (DATA_CENTRE_PEAK_STEP_LIMITS
              if row.get("compute_capability", "").strip() in DATA_CENTRE_CC else PEAK_STEP_LIMITS)
    for (wide, narrow), limit in limits.items():
        lo, hi = peak(wide), peak(narrow)
        if lo is not None and hi is not None and hi > limit * lo:
            return wide, narrow, round(hi / lo, 6), limit
    return None


def needs(precision: str, compute_capability: str) -> str:
    """What a GPU needs to multiply ``precision`` on tensor cores, in the words of its kind of
    compute capability, for one-line messages.

    >>> needs("fp8", "8.6"), needs("fp4", "gfx942")
    ('fp8 needs CC 8.9 or above', 'fp4 needs gfx950 (CDNA4) or later')
    """
    if compute_capability.strip().startswith("gfx") and precision in AMD_MIN_GFX:
        return f"{precision} needs {AMD_MIN_GFX[precision]} or later"
    return f"{precision} needs CC {MMA_MIN_CC[precision]:.1f} or above"

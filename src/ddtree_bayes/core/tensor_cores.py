"""Which precisions a GPU's tensor cores run, by its NVIDIA compute capability: the one rule
the hardware table's reader, ``hardware add`` and the peak-FLOPs derivation
(:func:`ddtree_bayes.core.model_cards.peak_tflops`) share."""

from __future__ import annotations

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


def needs(precision: str, compute_capability: str) -> str:
    """What a GPU needs to multiply ``precision`` on tensor cores, in the words of its kind of
    compute capability, for one-line messages.

    >>> needs("fp8", "8.6"), needs("fp4", "gfx942")
    ('fp8 needs CC 8.9 or above', 'fp4 needs gfx950 (CDNA4) or later')
    """
    if compute_capability.strip().startswith("gfx") and precision in AMD_MIN_GFX:
        return f"{precision} needs {AMD_MIN_GFX[precision]} or later"
    return f"{precision} needs CC {MMA_MIN_CC[precision]:.1f} or above"

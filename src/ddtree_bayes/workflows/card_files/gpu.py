"""A GPU's row for the hardware table (``ddtree-bayes hardware add``).

A user's GPU is usually a known one with a figure or two changed (a memory overclock, a
power-limited or cut-down edition, a new name for a node) or a new one read off its datasheet.
:func:`gpu_row` builds the row from the effective table (built-in overlaid by the user's
``data/hardware.csv``): ``like`` copies a known GPU's row, the figures given replace its, and
the row says where each figure came from (the given ones from ``source``, the others as the
GPU it copies, with that row's own sources). :func:`write_gpu_row` writes it under ``card
add``'s conventions: the file's lock, refuse or ``replace``, the whole new file validated
before an atomic rename, nothing written on any error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ddtree_bayes.core.data import (
    GPU_COUNT_SUFFIX,
    NAME_RE,
    as_name,
    hardware_slip,
    listed,
    unknown_hardware_fix,
)
from ddtree_bayes.core.errors import InputError
from ddtree_bayes.core.hardware_table import HardwareTable, merge_tables
from ddtree_bayes.core.pairs import link_problem
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.core.tensor_cores import (
    COMPUTE_CAPABILITY_RE,
    MMA_MIN_CC,
    PEAK_STEP_WHY,
    compute_capability_fix,
    needs,
    nvidia_cc_problem,
    peaks_out_of_order,
    peaks_too_far_apart,
    precisions_without_mma,
)
from ddtree_bayes.workflows.card_files.writing import Written, existing_row, plan_text, write_rows

#: Figures ``source`` covers, and the dense peaks ``flops_source`` covers (data/hardware.csv).
MEMORY_COLUMNS = ("memory", "memory_gb", "mem_bw_tb_s", "interconnect", "compute_capability")
PEAK_COLUMNS = ("dense_bf16_tflops", "dense_fp8_tflops", "dense_fp4_tflops", "dense_int8_tflops")
#: What a GPU the table does not know must be given (the rest may stay blank).
NEW_GPU_NEEDS = ("mem_bw_tb_s", "interconnect")


@dataclass(frozen=True)
class GpuRow:
    """The row to write, the GPU it copies (None: from the datasheet alone), the columns the
    user gave, and what the row will do to the table: ``"adds"`` a GPU, ``"overrides"`` a
    built-in one, ``"replaces"`` a row of the user's file; ``scaled``: the peaks copied from
    ``like`` and scaled as the peak given of precision ``scaled_as`` (:func:`_scale_copied_peaks`);
    ``kept``: the peaks of the GPU's own row a source of the user's gave, kept as they are
    while another peak is given (:func:`_sourced_peaks`): the user's own figures, not copied."""

    row: dict[str, str]
    like: str | None
    given: tuple[str, ...]
    effect: str
    notes: tuple[str, ...]
    scaled: tuple[str, ...] = ()
    scaled_as: str = ""
    kept: tuple[str, ...] = ()


#: A memory size written into the memory type's text ("141 GB HBM3e", "24GB").
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(GB|GiB|G)\b", re.IGNORECASE)


def like_suggestion(name: str, known) -> str | None:
    """The GPU of ``known`` (names) a new GPU ``name`` most likely is a variant of, by its name
    alone: one whose name begins with ``name`` (l40 -> l40s), else the longest that ``name``
    begins with (rtx-4090d -> rtx-4090, h100-sxm -> h100); None when neither (a look-alike
    name of another generation, rtx-4070-ti against rtx-5070-ti, is no suggestion).

    >>> known = ("l4", "l40s", "rtx-4090", "rtx-5070-ti", "h100", "h100-nvl")
    >>> [like_suggestion(n, known) for n in ("rtx-4090d", "l40", "h100-sxm", "rtx-4070-ti")]
    ['rtx-4090', 'l40s', 'h100', None]
    """
    longer = sorted(k for k in known if k.startswith(name) and k != name)
    if longer:
        return min(longer, key=len)
    shorter = [k for k in known if name.startswith(k) and k != name]
    return max(shorter, key=len) if shorter else None


def _figure(value: float | str) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value).strip()


#: How a GPU's own row credits the figures it kept from its row before (a built-in row's).
_AS_BEFORE = "as before: "


def _provenance(source: str, given: list[str], like: str | None, like_source: str,
                derived: str | None = None) -> str:
    """``source``'s credit of the columns ``given``, ``derived``, then the other figures "as
    <like>: <like_source>". Another GPU's own row's text of the figures it kept "as before"
    (its built-in row's) is that GPU's: "as b300: <...>", not "as b300: as before: <...>".

    >>> _provenance("me", ["mem_bw_tb_s"], "b300", "as before: NVIDIA (288 GB)")
    'me (mem_bw_tb_s); other figures as b300: NVIDIA (288 GB)'
    """
    if like not in (None, "before") and like_source.startswith(_AS_BEFORE):
        like_source = like_source[len(_AS_BEFORE):]
    parts = [f"{source} ({', '.join(given)})"] if given else []
    if derived:
        parts.append(derived)
    if like is not None and like_source:
        parts.append(f"{'other figures ' if given else ''}as {like}: {like_source}")
    return "; ".join(parts)


#: One credit of a row's source: ``<source> (<columns it gave>)``, then ``; `` or the end.
_COLUMN = "|".join(MEMORY_COLUMNS + PEAK_COLUMNS)
_CREDIT = re.compile(rf"(.+?) \(((?:{_COLUMN})(?:, (?:{_COLUMN}))*)\)(?:; |$)")
_COPIED = "other figures as "


def _credits(text: str) -> tuple[list[tuple[str, list[str]]], str | None] | None:
    """A source text ``hardware add`` wrote, read back: its credits (source, columns) and
    what the other figures are ``as`` (``"b300: <b300's source>"``), or None when the text
    is not of that form (a hand-written or built-in source)."""
    head, sep, copied = text.partition("; " + _COPIED)
    if not sep:
        if text.startswith("as "):          # only copied figures: "as b300: ..."
            return [], text[len("as "):]
        head, copied = text, ""
    credits, pos = [], 0
    while pos < len(head):
        m = _CREDIT.match(head, pos)
        if m is None:
            return None
        credits.append((m[1], m[2].split(", ")))
        pos = m.end()
    return credits, copied or None


def copied_from(source: str) -> str | None:
    """The GPU whose row a row ``hardware add`` wrote copied its other figures from (``--like
    h100``: "me (mem_bw_tb_s); other figures as h100: ..."), else None: a built-in or
    hand-written source, or a ``--replace`` of a built-in row ("as before: ...").

    >>> copied_from("me (mem_bw_tb_s); other figures as h100: NVIDIA H100 SXM spec (80 GB)")
    'h100'
    >>> copied_from("as rtx-4090: NVIDIA (24 GB)"), copied_from("NVIDIA H100 SXM spec (80 GB)")
    ('rtx-4090', None)
    """
    read = _credits(source)
    if read is None or read[1] is None:
        return None
    name = read[1].split(":", 1)[0].strip()
    return None if name in ("", "before") else name


def editions(table: HardwareTable) -> dict[str, frozenset[str]]:
    """Each GPU of the user's own (not a built-in name) -> the GPUs it is an edition of: the
    one it was copied from with ``--like``, and that one's, and so on (``h100-oc2 --like
    h100-oc``, ``h100-oc --like h100``: both h100's). A benchmark file of such a GPU names the
    GPU it copies (nvidia-smi's name of an overclocked H100 is an H100's): ``add --from-bench
    --hardware h100-oc`` takes the file's h100 as it."""
    out: dict[str, frozenset[str]] = {}
    for name, origin in table.origins.items():
        if origin != "user":
            continue
        seen: list[str] = []
        base = copied_from(table.rows[name].get("source", ""))
        while base is not None and base in table.rows and base not in seen and base != name:
            seen.append(base)
            base = (copied_from(table.rows[base].get("source", ""))
                    if table.origins.get(base) == "user" else None)
        if seen:
            out[name] = frozenset(seen)
    return out


def _replacing(source: str, given: list[str], before: str, derived: str | None = None,
               scaled: tuple[str, ...] = ()) -> str | None:
    """The source of a row that replaces this GPU's own row (its previous source ``before``):
    one credit per source, its columns less those now given (or ``scaled``, credited
    ``derived``), and the copied figures' credit kept as it was, so replacing a row never
    nests its previous text into itself ("as before: as before: as b300: ..."); None when
    ``before`` is not a text this wrote."""
    read = _credits(before)
    if read is None:
        return None
    credits, copied = read
    kept = [(s, [c for c in cols if c not in given and c not in scaled]) for s, cols in credits]
    # the new source's earlier columns join its credit (s2 given twice: one "s2 (...)")
    mine = [*given, *(c for s, cols in kept if s == source for c in cols)]
    parts = [f"{source} ({', '.join(mine)})"] if mine else []
    if derived:
        parts.append(derived)
    parts += [f"{s} ({', '.join(cols)})" for s, cols in kept if cols and s != source]
    if copied:
        parts.append((_COPIED if parts else "as ") + copied)
    return "; ".join(parts)


def _less_given(text: str, given: list[str]) -> str:
    """A copied row's source ``text`` without the credits of the columns now ``given``: each
    figure carries one source, the user's (``--like rtx-4090d --mem-bw-tb-s 1.008`` kept
    "other figures as rtx-4090d: hmc sheet (memory_gb, mem_bw_tb_s)" for the bandwidth it
    gave). A credit left with no column goes; the copied text after it stays. A text this
    did not write (a built-in row's) is kept whole.

    >>> _less_given("s1 (memory_gb, mem_bw_tb_s); other figures as b300: x", ["mem_bw_tb_s"])
    's1 (memory_gb); other figures as b300: x'
    >>> _less_given("s1 (mem_bw_tb_s); other figures as b300: x", ["mem_bw_tb_s"])
    'as b300: x'
    """
    read = _credits(text) if given else None
    if read is None:
        return text
    credits, copied = read
    parts = [f"{s} ({', '.join(cols)})" for s, all_cols in credits
             if (cols := [c for c in all_cols if c not in given])]
    if copied:
        parts.append((_COPIED if parts else "as ") + copied)
    return "; ".join(parts)


#: GPUs per node whose whole-node total a per-GPU figure may have been given as.
NODE_SIZES = (4, 8, 16)


def _node_totals(values: dict[str, float | str], like: str, like_row: dict[str, str]
                 ) -> list[str]:
    """A note per figure given that is 4, 8 or 16 times the ``--like`` GPU's own (to 0.5%):
    the table takes figures per GPU, and a node's total (``--like h100 --mem-bw-tb-s 26.8``,
    8 x 3.35) would price every step of that GPU 8x too fast. A note, not a refusal: a GPU
    may truly hold four times another's memory (96 GB against 24).

    >>> for note in _node_totals({"mem_bw_tb_s": 26.8, "memory_gb": 94.0}, "h100",
    ...                          {"mem_bw_tb_s": "3.35", "memory_gb": "80"}):
    ...     print(note)
    --mem-bw-tb-s 26.8 is 8 x h100's 3.35: a whole node's total? The table takes figures per GPU \
(the count is --gpus when asking); if so, re-run with --mem-bw-tb-s 3.35 --replace
    """
    notes = []
    for col, given in values.items():
        mine = like_row.get(col, "").strip()
        n = _node_multiple(given, mine)
        if n is not None:
            flag = "--" + col.replace("_", "-")
            notes.append(f"{flag} {float(given):g} is {n} x {like}'s {float(mine):g}: a whole "
                         f"node's total? The table takes figures per GPU (the count is --gpus "
                         f"when asking); if so, re-run with {flag} {float(given) / n:g} "
                         "--replace")
    return notes


def _node_multiple(given: float | str, mine: str) -> int | None:
    """The node size (:data:`NODE_SIZES`) that ``given`` is of ``mine`` to within 0.5%, else
    None (as for a blank or non-numeric figure).

    >>> _node_multiple(16.3, "2.039"), _node_multiple(22, "2.039"), _node_multiple(640, "")
    (8, None, None)
    """
    try:
        ratio = float(given) / float(mine)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    n = round(ratio)
    return n if n in NODE_SIZES and abs(ratio - n) <= 0.005 * n else None


def _node_totals_of_any(values: dict[str, float | str], table: HardwareTable, name: str
                        ) -> list[str]:
    """:func:`_node_totals` for a GPU given without ``--like``: figures above every other GPU's
    in ``table`` of which at least two are the same multiple (4, 8 or 16) of the same GPU's
    (the first in the table that has such a pair), a node's totals typed as one GPU's
    (``--memory-gb 640 --mem-bw-tb-s 16.3``: 8 x an A100's 80 GB and 2.039 TB/s). One such
    figure alone is left alone: with many GPUs in the table, a newer GPU's figure is often
    near some multiple of one of theirs (1,024 GB: 8 x an MI250X's 128), but not two at once."""
    others = {gpu: row for gpu, row in table.rows.items() if gpu != name}
    above = {}
    for col, given in values.items():
        try:
            value = float(given)
            top = max(float(r[col]) for r in others.values() if r.get(col, "").strip())
        except (TypeError, ValueError, KeyError):
            continue
        if value > top:
            above[col] = given
    for gpu, row in others.items():
        by_multiple: dict[int, dict[str, float | str]] = {}
        for col, given in above.items():
            n = _node_multiple(given, row.get(col, "").strip())
            if n is not None:
                by_multiple.setdefault(n, {})[col] = given
        agreeing = next((cols for cols in by_multiple.values() if len(cols) >= 2), None)
        if agreeing:
            return _node_totals(agreeing, gpu, row)
    return []


#: A dense peak given with more FLOP per byte of bandwidth than this multiple of the most any
#: other GPU of the table has (bf16: the L40S's 419) is noted (:func:`_sparse_peaks`): a
#: datasheet's peak with 2:4 structured sparsity is twice the dense one (H100 SXM: 1979 against
#: 989 TFLOPS bf16, 591 FLOP/B), which the table's peaks are not.
SPARSE_SUSPECT = 1.25


def _sparse_peaks(row: dict[str, str], given: list[str], table: HardwareTable, name: str
                  ) -> list[str]:
    """One note when a dense peak given for ``row`` has more FLOP per byte of its bandwidth
    than :data:`SPARSE_SUSPECT` times the most any other GPU of ``table`` has at that
    precision, naming each such peak and its half: a datasheet's figure with sparsity typed
    as dense. A note, not a refusal: a new GPU may be denser than any the table knows."""
    def ratio(r: dict[str, str], col: str) -> float | None:
        try:
            value = float(r.get(col, "")) / float(r.get("mem_bw_tb_s", ""))
        except (ValueError, ZeroDivisionError):
            return None
        return value if value > 0 else None

    parts: list[str] = []
    fixes: list[str] = []
    for col in PEAK_COLUMNS:
        mine = ratio(row, col) if col in given else None
        known = [(r, gpu) for gpu, other in table.rows.items() if gpu != name
                 and (r := ratio(other, col)) is not None]
        if mine is None or not known:
            continue
        top, gpu = max(known)
        if mine <= SPARSE_SUSPECT * top:
            continue
        flag = "--" + col.replace("_", "-")
        head = (f"{flag} {row[col]} over {row['mem_bw_tb_s']} TB/s is {mine:,.0f} FLOP per byte "
                f"of bandwidth, {mine / top:.2f}x the most of any GPU of the table ({gpu}: "
                f"{top:,.0f})" if not parts else
                f"{flag} {row[col]}: {mine:,.0f}, {mine / top:.2f}x ({gpu}: {top:,.0f})")
        parts.append(head)
        fixes.append(f"{flag} {float(row[col]) / 2:g}")
    if not parts:
        return []
    return ["; ".join(parts) + ": a datasheet's peak with 2:4 sparsity (twice the dense)? the "
            "table takes dense peaks, or a step's compute knee comes at twice the tokens it "
            f"does; if so, re-run with {' '.join(fixes)} --replace"]


def gpu_row(table: HardwareTable, name: str, values: dict[str, float | str], source: str, *,
            like: str | None = None, file: Path) -> GpuRow:
    """The row of GPU ``name``: ``like``'s row (or, without ``like``, the table's own row of
    ``name`` when it has one) with ``values`` (column -> figure) put in, sourced by ``source``;
    ``file`` is the table it will be written to.
    Raises InputError for a name the files cannot hold, an unknown ``like``, a new GPU without
    its bandwidth and interconnect, or nothing to change."""
    if not NAME_RE.fullmatch(name):
        lower = as_name(name)
        usable = NAME_RE.fullmatch(lower) and not GPU_COUNT_SUFFIX.search(lower)
        raise InputError(f"{name!r} is not a GPU name the data files can hold",
                         fix="use lowercase letters, digits and . _ + - (e.g. "
                             f"{lower if usable else 'rtx-4090-oc'!r})")
    if GPU_COUNT_SUFFIX.search(name):
        raise InputError(f"{name!r} ends in x<count>, which reads as a GPU count: a system is "
                         f"labelled <gpu>x<count> ({name} on 8 GPUs: {name}x8)",
                         fix="name the GPU alone (the count is each row's gpus column), or "
                             "end the name otherwise (e.g. 'h100-2gpu')")
    if not source.strip():
        raise InputError("--source is empty", fix="say where the figures come from (a datasheet, "
                                                  "nvidia-smi, your own measurement)")
    if like is not None and like not in table.rows:
        raise InputError(f"--like {like}: no such GPU in the hardware table",
                         fix=unknown_hardware_fix(like, table.rows))
    values = {c: v for c, v in values.items() if v is not None}
    blank = [c for c, v in values.items() if isinstance(v, str) and not v.strip()]
    if blank:
        raise InputError(f"--{blank[0].replace('_', '-')} is empty",
                         fix="give the value, or leave the flag out to keep the copied one")
    link = values.get("interconnect")
    if isinstance(link, str) and (problem := link_problem(link)) is not None:
        raise InputError(f"--interconnect {link.strip()!r} {problem[0]}", fix=problem[1])
    memory = values.get("memory")
    size = _SIZE.search(memory) if isinstance(memory, str) else None
    if isinstance(memory, str) and size is not None:
        # (it was kept beside the copied memory_gb: "80 GB 141 GB HBM3e")
        given_gb = values.get("memory_gb")
        base_gb = (_figure(given_gb) if given_gb is not None else
                   table.rows.get(like or name, {}).get("memory_gb", "").strip())
        whence = ("given" if given_gb is not None else f"as {like}" if like else
                  "as before" if base_gb else "none given")
        # the type written beside the size, else the copied row's (a GDDR7 card was told to
        # write HBM3e); a size in GiB converted, as --memory-gb is decimal GB
        kind = _SIZE.sub("", memory).strip() or \
            table.rows.get(like or name, {}).get("memory", "").strip()
        gb = float(size[1]) * (2 ** 30 / 1e9 if size[2].lower() == "gib" else 1.0)
        raise InputError(f"--memory {memory.strip()!r} holds a size, but --memory is the memory "
                         "type; the size the weights-fit checks read is --memory-gb "
                         f"({base_gb or '-'}, {whence})",
                         fix=f"give --memory-gb {_figure(round(gb, 1))}"
                             + (f" --memory {kind}" if kind else ""))
    cc = values.get("compute_capability")
    if isinstance(cc, str) and not COMPUTE_CAPABILITY_RE.fullmatch(cc.strip()):
        raise InputError(f"--compute-capability {cc.strip()!r} is not a compute capability the "
                         "table can read", fix=compute_capability_fix(cc))
    if isinstance(cc, str) and (unknown := nvidia_cc_problem(cc)) is not None:
        raise InputError(f"--compute-capability {unknown[0]}", fix=unknown[1])
    base = like if like is not None else (name if name in table.rows else None)
    if base is None:
        missing = [c for c in NEW_GPU_NEEDS if c not in values]
        if missing:
            flags = " and ".join("--" + c.replace("_", "-") for c in missing)
            like_it = like_suggestion(name, table.rows) or "NAME"
            raise InputError(f"{name} is a GPU the table does not know: it needs {flags}",
                             fix=f"give {flags} from its datasheet, or start from a GPU like it: "
                                 f"--like {like_it} (`ddtree-bayes hardware list`)")
    elif not values and like is None:
        raise InputError(f"{name} is in the table already and nothing was given to change",
                         fix="give the figures that differ (e.g. --mem-bw-tb-s), or a new name "
                             "with --like")
    header = list(table.header)
    row = dict(table.rows[base]) if base is not None else dict.fromkeys(header, "")
    row["hardware"] = name
    for col, value in values.items():
        row[col] = _figure(value)
    given = [c for c in (*MEMORY_COLUMNS, *PEAK_COLUMNS) if c in values]
    unsupported = _peaks_beyond_the_capability(row, values, base)
    _refuse_a_slip(row, given)
    _refuse_peaks_out_of_order(row, values, base)
    if like is not None:
        _refuse_far_from_like(values, like, table.rows[like])
    # the peaks of this GPU's own row a source of the user's gave (not DERIVED, not copied):
    # its datasheet's, kept when another peak is given (`--replace --dense-bf16-tflops 950`
    # scaled the fp8 1800 the user's sheet gave)
    own = _sourced_peaks(table.rows[base], values) if base == name else {}
    if base is not None:
        _refuse_copied_peaks_left_behind(values, base, table.rows[base], row, keep=own)
    # the peaks not given, of another GPU's row or of this GPU's own (built in, or the
    # user's row --replace rewrites): a GPU's tensor peaks scale together, so a peak given
    # scales them alike (`hardware add h100 --dense-bf16-tflops 900` kept fp8 1979), but for
    # those its own sources gave
    scaled, scaled_as, scale_note = (_scale_copied_peaks(row, values, base, table.rows[base],
                                                         keep=own)
                                     if base is not None else ((), "", None))
    from_like = like if like is not None else base
    like_row = table.rows[base] if base is not None else {}
    # the figures not given keep the copied row's sources: "as <GPU>" for another GPU's row,
    # "as before" for this GPU's own (a built-in row, or the user's row being replaced)
    said = None if from_like is None else "before" if from_like == name else from_like

    def credit(given: list[str], copied: bool, before: str, derived: str | None = None
               ) -> str:
        if not given and said == "before":
            return before   # (its own row, none of these figures given: their credit as it was)
        again = (_replacing(source, given, before, derived, scaled)
                 if copied and said == "before" else None)
        # (another GPU's credits: the columns given here are the user's alone)
        return again if again is not None else _provenance(
            source, given, said if copied else None,
            before if said == "before" else _less_given(before, given), derived)

    row["source"] = credit([c for c in MEMORY_COLUMNS if c in values], True,
                           like_row.get("source", ""))
    peaks_given = [c for c in PEAK_COLUMNS if c in values]
    copied_peaks = any(row.get(c) for c in PEAK_COLUMNS if c not in values)
    whose = f"{name}'s row before" if base == name else f"{base}'s"
    derived = (f"DERIVED: {whose}, scaled as the {scaled_as} peak given ({', '.join(scaled)})"
               if scaled else None)
    row["flops_source"] = credit(peaks_given, copied_peaks, like_row.get("flops_source", ""),
                                 derived)
    notes = [] if unsupported is None else [unsupported]
    if scale_note is not None:
        notes.append(scale_note)
    notes.extend(_sparse_peaks(row, given, table, name))
    if like is not None:
        notes.extend(_node_totals(values, like, table.rows[like]))
    else:
        notes.extend(_node_totals_of_any(values, table, name))
    if not row.get("dense_bf16_tflops", "").strip():
        from ddtree_bayes.core.model_cards import peak_tflops

        how = peak_tflops(row, "bf16")[1].removeprefix(f"{name}: ")   # what the model assumes
        notes.append(f"{name} has no dense bf16 peak: "
                     + (f"{how}, the Hopper/Blackwell ratio" if "derived from" in how else
                        "its compute knee assumes bandwidth x 200 FLOP/B")
                     + ", an assumption (give --dense-bf16-tflops from the datasheet)")
    if not row.get("memory_gb", "").strip():
        notes.append(f"{name} has no memory_gb: whether a model's weights fit is not checked "
                     "(give --memory-gb)")
    # (a checkout's data/hardware.csv holds the built-in rows: replacing one of those, as it
    # stands, overrides the built-in row; it is no row of the user's)
    if existing_row(file, "hardware", name) is not None:
        effect = "overrides" if holds_built_in_row(file, name) else "replaces"
        if like is not None and like != name:
            notes.extend(_dropped(_file_row(file, name), row, values, like))
    else:
        effect = "overrides" if name in table.rows else "adds"
    kept = tuple(c for c in PEAK_COLUMNS if c in own) if peaks_given else ()
    return GpuRow(row, from_like, tuple(given), effect, tuple(notes), scaled, scaled_as, kept)


def _dropped(before: dict[str, str], row: dict[str, str], values: dict[str, float | str],
             like: str) -> list[str]:
    """The note of a ``--like`` that replaces the row ``before`` of the file: the row starts
    again from ``like``'s (the other figures are GPU's, as documented), so each figure of
    ``before`` not given again that the new ``row`` changes is dropped; an earlier add's
    peaks were lost without a word. Named with its flag, its value before and now, one line
    (empty when nothing is dropped).

    >>> _dropped({"hardware": "g", "memory_gb": "48", "dense_bf16_tflops": "147.09"},
    ...          {"hardware": "g", "memory_gb": "24", "dense_bf16_tflops": "147.09"}, {}, "x")
    ["g: --like x --replace starts again from x's row: the row's --memory-gb 48 is dropped \
(now 24); to keep it, give it again, or --replace without --like"]
    """
    import shlex

    cols = [c for c in (*MEMORY_COLUMNS, *PEAK_COLUMNS) if c not in values
            and before.get(c, "").strip() and not _same(before[c], row.get(c, "").strip())]
    if not cols:
        return []
    then = listed([f"--{c.replace('_', '-')} {shlex.quote(before[c].strip())}" for c in cols])
    now = listed([row.get(c, "").strip() or "-" for c in cols])
    one = len(cols) == 1
    return [f"{row['hardware']}: --like {like} --replace starts again from {like}'s row: the "
            f"row's {then} {'is' if one else 'are'} dropped (now {now}); to keep "
            f"{'it' if one else 'them'}, give {'it' if one else 'them'} again, or --replace "
            "without --like"]


def _sourced_peaks(own_row: dict[str, str], values: dict[str, float | str]) -> dict[str, str]:
    """The dense peaks of a GPU's own row (its ``flops_source`` a text ``hardware add``
    wrote) that a source of the user's gave, not given now: {column: that source}. A
    ``DERIVED`` credit (a peak scaled as another) and the figures copied ``as`` a GPU are
    none; a text this did not write (a built-in row's) gives none.

    >>> _sourced_peaks({"dense_bf16_tflops": "900", "dense_fp8_tflops": "1800",
    ...                 "dense_int8_tflops": "3600", "flops_source": "s1 (dense_bf16_tflops, "
    ...                 "dense_fp8_tflops); DERIVED: x's, scaled as the bf16 peak given "
    ...                 "(dense_int8_tflops)"}, {"dense_bf16_tflops": 950.0})
    {'dense_fp8_tflops': 's1'}
    """
    read = _credits(own_row.get("flops_source", ""))
    if read is None:
        return {}
    return {c: source for source, cols in read[0] if not source.startswith("DERIVED")
            for c in cols if c in PEAK_COLUMNS and c not in values
            and own_row.get(c, "").strip()}


def _kept_text(row: dict[str, str], keep: dict[str, str]) -> str:
    """``fp8 300 kept as s1 gave it``: the peaks :func:`_sourced_peaks` kept, and whose."""
    cols = [c for c in PEAK_COLUMNS if c in keep]
    sources = listed(list(dict.fromkeys(keep[c] for c in cols)))
    peaks = listed([f"{c.split('_')[1]} {row[c].strip()}" for c in cols])
    return f"{peaks} kept as {sources} gave {'it' if len(cols) == 1 else 'them'}"


def _scale_copied_peaks(row: dict[str, str], values: dict[str, float | str], like: str,
                        like_row: dict[str, str], keep: dict[str, str] | None = None
                        ) -> tuple[tuple[str, ...], str, str | None]:
    """Scale the peaks ``row`` copied from ``like`` by the ratio of the peak given to
    ``like``'s own (the first given of bf16, fp8, fp4, int8 that ``like`` has): a GPU's
    tensor peaks scale together (SMs x clock), so ``--like rtx-4090 --dense-bf16-tflops
    147.09`` (an RTX 4090 D) kept the 4090's fp8 330.3 and int8 660.6, pricing its compute
    knee at the 4090's. Returns the columns scaled, the precision they were scaled as, and
    the note saying so (None: nothing given to scale by, or nothing changed). A peak given
    :data:`COPIED_PEAK_FACTOR` or more from ``like``'s was refused before this. ``like`` may
    be the GPU itself (its own row, built in or the user's, updated without ``--like``: an
    H100 given bf16 900 kept fp8 1979); the note then says the peaks were its row's. ``keep``
    ({column: source}, :func:`_sourced_peaks`): peaks of the GPU's own row a source of the
    user's gave, kept as they are (only a DERIVED or copied peak scales), which the note
    names first, with why (the note is then theirs alone when nothing scales).

    >>> row = {"dense_bf16_tflops": "147.09", "dense_fp8_tflops": "330.3",
    ...        "dense_fp4_tflops": "", "dense_int8_tflops": "660.6", "hardware": "g"}
    >>> _scale_copied_peaks(row, {"dense_bf16_tflops": 147.09}, "rtx-4090",
    ...                     {"dense_bf16_tflops": "165.15"})[:2]
    (('dense_fp8_tflops', 'dense_int8_tflops'), 'bf16')
    >>> row["dense_fp8_tflops"], row["dense_int8_tflops"]
    ('294.18', '588.36')
    """
    ref = ratio = None
    for col in PEAK_COLUMNS:
        try:
            ratio = float(values[col]) / float(like_row.get(col, ""))
        except (KeyError, ValueError, ZeroDivisionError):   # (not given, or blank in like's)
            continue
        ref = col
        break
    if ref is None or ratio is None:
        return (), "", None
    keep = keep or {}
    short = ref.split("_")[1]
    before = {c: row[c] for c in PEAK_COLUMNS
              if c not in values and c not in keep and row.get(c, "").strip()}
    after = {c: _figure(round(float(v) * ratio, 2)) for c, v in before.items()}
    cols = tuple(c for c in before if float(after[c]) != float(before[c]))
    kept = _kept_text(row, keep) if keep else ""
    if not cols:
        if not kept:
            return (), "", None
        flags = " and ".join(f"--dense-{c.split('_')[1]}-tflops"
                             for c in PEAK_COLUMNS if c in keep)
        return (), "", (
            f"{row['hardware']}: {kept} (not DERIVED: a peak a source gave is this GPU's own; "
            f"only a DERIVED peak scales with the {short} peak given; give {flags} to change "
            f"{'it' if len(keep) == 1 else 'them'})")
    for c in cols:
        row[c] = after[c]
    them = listed([f"{c.split('_')[1]} {before[c]}" for c in cols])
    flags = " and ".join(f"--dense-{c.split('_')[1]}-tflops" for c in cols)
    one = len(cols) == 1
    whose = (f"{'was' if one else 'were'} its row's" if like == row["hardware"] else
             f"{'is' if one else 'are'} {like}'s")
    lead = (f"{kept} (not DERIVED: a peak a source gave is this GPU's own); " if kept
            else "")
    return cols, short, (
        f"{row['hardware']}: {lead}{them} {whose}, scaled as the {short} "
        f"peak given ({_figure(values[ref])} / {like_row[ref].strip()} = {ratio:.3g}) to "
        f"{listed([after[c] for c in cols])}: a GPU's tensor peaks scale together (give "
        f"{flags} if its datasheet says otherwise)")


def _peaks_beyond_the_capability(row: dict[str, str], values: dict[str, float | str],
                                 base: str | None) -> str | None:
    """Clear the peaks copied from ``base`` that a GPU of ``row``'s compute capability has no
    tensor cores for (:data:`~ddtree_bayes.core.model_cards.MMA_MIN_CC`: fp8 from 8.9, fp4
    from 10.0, int8 from 7.5), and say so (None: nothing cleared). A given fp8 or fp4 peak the
    capability cannot have is refused; a given int8 one is kept (below 7.5 int8 runs as dp4a
    dot products, a real int8 rate, as core/model_cards.peak_tflops derives it)."""
    cc = row.get("compute_capability", "").strip()
    lacks = precisions_without_mma(cc)
    for p in lacks:
        col = f"dense_{p}_tflops"
        if col in values and p != "int8":
            whence = "given" if "compute_capability" in values else f"as {base}"
            raise InputError(f"--dense-{p}-tflops {row[col]}: compute capability {cc} ({whence}) "
                             f"has no {p} tensor cores ({needs(p, cc)})",
                             fix=f"leave --dense-{p}-tflops out, or give the GPU's "
                                 "--compute-capability")
    if base == row["hardware"] and "compute_capability" not in values:
        return None   # (its own row's peaks, e.g. a given int8 rate kept before: not copied)
    cleared = [(p, row[f"dense_{p}_tflops"]) for p in lacks
               if f"dense_{p}_tflops" not in values and row.get(f"dense_{p}_tflops", "").strip()]
    if not cleared:
        return None
    for p, _ in cleared:
        row[f"dense_{p}_tflops"] = ""
    peaks = listed([f"{p} ({value} TFLOPS)" for p, value in cleared])
    needed = (", ".join(needs(p, cc) for p, _ in cleared) if cc.startswith("gfx") else
              ", ".join(f"{p} {'needs CC ' if i == 0 else ''}{MMA_MIN_CC[p]:.1f}"
                        + (" or above" if i == 0 else "") for i, (p, _) in enumerate(cleared)))
    return (f"{row['hardware']}: compute capability {cc} has no "
            f"{listed([p for p, _ in cleared], 'or')} tensor cores ({needed}): the {peaks} "
            f"peak{'s' if len(cleared) > 1 else ''} copied from {base} "
            f"{'are' if len(cleared) > 1 else 'is'} left out")


def _refuse_peaks_out_of_order(row: dict[str, str], values: dict, base: str | None) -> None:
    """Refuse peaks a tensor core cannot have (fp8 below bf16, fp4 below fp8 or bf16), naming
    the flag given rather than the figure copied from ``base`` (the table's reader refuses the
    same row, but names its column: it blamed the fp8 peak --like copied when the given bf16
    peak was a sparse figure)."""
    apart = peaks_too_far_apart(row)
    if apart is not None:
        wide, narrow, ratio, limit = apart
        fast, slow = (f"--dense-{p}-tflops {row[f'dense_{p}_tflops']}"
                      if f"dense_{p}_tflops" in values
                      else f"{p} {row[f'dense_{p}_tflops']} (as {base})" for p in (narrow, wide))
        dense = "dense TFLOPS at the accumulate mode inference GEMMs run at (GeForce: FP32 "
        dense += "accumulate)"
        if f"dense_{narrow}_tflops" not in values:
            # the wider peak was given (a clock cap, a cut-down part): the narrower one is
            # still the --like GPU's
            raise InputError(f"{fast} is {ratio:.3g}x {slow}, more than the {limit:g}x a "
                             f"tensor core of its kind reaches: the {narrow} peak is {base}'s, "
                             "not this GPU's",
                             fix=f"give --dense-{narrow}-tflops too (this GPU's own), in {dense}")
        raise InputError(f"{fast} is {ratio:.3g}x {slow}: "
                         + PEAK_STEP_WHY.format(n=narrow, w=wide, limit=limit),
                         fix=f"give {dense}" + ("" if f"dense_{wide}_tflops" in values else
                                                 f"; if this GPU's {wide} peak is not {base}'s, "
                                                 f"give --dense-{wide}-tflops too"))
    slip = peaks_out_of_order(row)
    if slip is None:
        return
    cols = [f"dense_{p}_tflops" for p in slip]
    shown = [f"--dense-{c.split('_')[1]}-tflops {row[c]}" if c in values
             else f"{c.split('_')[1]} {row[c]} (as {base})" for c in cols]
    raise InputError(f"{shown[0]} is above {shown[1]}: tensor cores multiply a narrower "
                     "precision at least as fast",
                     fix="give dense (not sparse) TFLOPS per GPU"
                         + ("" if all(c in values for c in cols) else
                            ", and the other precision's peak with its flag too"))


#: How far (a factor either way) a dense peak given beside copied ones may be from the copied
#: GPU's own: a variant of it (a cut-down edition, a clock cap: an RTX 4090 D is 0.89x an RTX
#: 4090) keeps the copied peaks of the other precisions within this; beyond it they are
#: another GPU's.
COPIED_PEAK_FACTOR = 1.25


def _refuse_copied_peaks_left_behind(values: dict[str, float | str], base: str,
                                     base_row: dict[str, str], row: dict[str, str],
                                     keep: dict[str, str] | None = None) -> None:
    """Refuse a dense peak given :data:`COPIED_PEAK_FACTOR` or more from ``base``'s own while
    peaks of other precisions stay copied from ``base``: a GPU's tensor peaks scale together
    (SMs x clock), so the copied ones are ``base``'s, not this GPU's (``--like rtx-a6000
    --dense-bf16-tflops 76.7`` for an RTX A4000 kept the A6000's int8 309.7, 2x the A4000's).
    The fix names each copied peak scaled as the given one moved. ``keep``: peaks of the
    GPU's own row its user's sources gave (:func:`_sourced_peaks`), no copies."""
    copied = [c for c in PEAK_COLUMNS if c not in values and c not in (keep or {})
              and row.get(c, "").strip()]
    for col in PEAK_COLUMNS:
        try:
            given, theirs = float(values[col]), float(base_row.get(col, ""))
            ratio = given / theirs
        except (KeyError, ValueError, ZeroDivisionError):   # (not given, or blank in base's)
            continue
        if not copied or 1 / COPIED_PEAK_FACTOR < ratio < COPIED_PEAK_FACTOR:
            continue
        short = col.split("_")[1]
        them = [f"{c.split('_')[1]} {row[c]}" for c in copied]
        flags = " and ".join(f"--dense-{c.split('_')[1]}-tflops" for c in copied)
        scaled = " and ".join(f"{round(float(row[c]) * ratio, 1):g}" for c in copied)
        one = len(copied) == 1
        raise InputError(f"--dense-{short}-tflops {given:g} is {ratio:.3g}x {base}'s {theirs:g}, "
                         f"but {' and '.join(them)} {'is' if one else 'are'} {base}'s, copied: "
                         "a GPU's tensor peaks scale together",
                         fix=f"give {flags} too, this GPU's own ({scaled} if "
                             f"{'it scales' if one else 'they scale'} as {short} does)")


#: What a slip in a figure's unit usually is (too low, too high), and the unit its flag takes.
_SLIPS = {"memory_gb": (("TB for GB?", "GB for GB?"), "give GB per GPU, e.g. 24"),
          "mem_bw_tb_s": (("another unit than TB/s?", "another unit than TB/s?"),
                          "give TB/s per GPU, e.g. 1.008 for an RTX 4090 (not GB/s)")}
_PEAK_SLIP = (("PFLOPS for TFLOPS?", "GFLOPS for TFLOPS?"),
              "give dense TFLOPS per GPU, e.g. 2250 for a B300's bf16 (1 PFLOPS = 1000 TFLOPS)")


#: How far (a factor either way) a bandwidth or dense peak given with ``--like`` may be from
#: that GPU's: a variant (an overclock, a power cap, a cut-down edition) is within a few times.
LIKE_FACTOR = 4.0


def _refuse_far_from_like(values: dict[str, float | str], like: str,
                          like_row: dict[str, str]) -> None:
    """Refuse a bandwidth or dense peak given with ``--like`` that is :data:`LIKE_FACTOR` times
    the ``like`` GPU's or more, or that fraction or less: a decimal or unit slip (``--like h100
    --mem-bw-tb-s 33.5``), or a node's total (8 x), and no variant of that GPU. Memory sizes
    are only noted (:func:`_node_totals`: a GPU may hold four times another's memory)."""
    for col in ("mem_bw_tb_s", *PEAK_COLUMNS):
        try:
            given, mine = float(values[col]), float(like_row.get(col, ""))
            ratio = given / mine
        except (KeyError, ValueError, ZeroDivisionError):   # (not given, or blank in like's)
            continue
        if 1 / LIKE_FACTOR < ratio < LIKE_FACTOR:
            continue
        flag = "--" + col.replace("_", "-")
        why = ("a whole node's total? The table takes figures per GPU (the count is --gpus "
               "when asking)" if _node_multiple(given, str(mine)) is not None
               else "a decimal or unit slip?")
        unit = "TB/s" if col == "mem_bw_tb_s" else "TFLOPS"
        raise InputError(f"{flag} {given:g} is {ratio:.2g} x {like}'s {mine:g}: {why}",
                         fix=f"give the figure per GPU in {unit} as the datasheet has it; a GPU "
                             f"that far from {like} is no variant of it: give its own figures "
                             "without --like")


def _refuse_a_slip(row: dict[str, str], given: list[str]) -> None:
    """Refuse a given figure a unit slip explains (:func:`~ddtree_bayes.core.data.hardware_slip`:
    memory or bandwidth under any GPU's, a dense peak whose FLOP per byte of bandwidth no GPU
    has), naming its flag."""
    slip = hardware_slip(row, given)
    if slip is None:
        return
    col, why, low = slip
    (too_low, too_high), fix = _SLIPS.get(col, _PEAK_SLIP)
    raise InputError(f"--{col.replace('_', '-')} {row[col]}: {why}; likely a unit slip "
                     f"({too_low if low else too_high})", fix=fix)


def table_to_replace(path: Path, name: str, values: dict, replace: bool) -> HardwareTable:
    """The hardware table ``hardware add`` starts from: the built-in table overlaid by
    ``path`` (the built-in one alone when there is no file). With ``replace``, a file the
    reader refuses for a cell of ``name``'s own row that the command gives anew (its
    compute capability ``sm_120`` with ``--compute-capability 12.0``) is read with that cell
    as given, so the row the reader refuses can be repaired by the command that replaces it
    (it refused the file first, and nothing could mend it but an editor). Any other refusal
    stands: without ``replace``, of another row, or of a column the command does not give."""
    import csv
    import io

    from ddtree_bayes.core.data import DataError, plain_text
    from ddtree_bayes.core.hardware_table import read_records

    if not path.exists():
        return merge_tables(None)
    given = {c: v if isinstance(v, str) else plain_text(float(v))
             for c, v in values.items() if v is not None}
    text = None
    mended: set[str] = set()
    while True:
        try:
            return merge_tables(path, user_text=text)
        except DataError as err:
            column = err.column
            if (not replace or err.file != str(path) or err.row is None or column is None
                    or column not in given or column in mended):
                raise
            text, header, body = read_records(str(path), text, "--hardware-file")
            col, at = header.index(column), header.index("hardware")
            row = next((v for i, v in body if i == err.row), None)
            if row is None or at >= len(row) or row[at].strip() != name:
                raise   # (another row's cell: not this command's to mend)
            row.extend([""] * (len(header) - len(row)))
            row[col] = given[column]
            mended.add(column)
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(v for _, v in body)
            text = out.getvalue()


def target_file(hardware_file: str | Path | None) -> Path:
    """Where ``hardware add`` writes: ``--hardware-file``, else ``data/hardware.csv`` here."""
    return Path(hardware_file) if hardware_file else Path("data") / "hardware.csv"


def planned_table(path: Path, gpu: GpuRow, header: tuple[str, ...], *,
                  replace: bool) -> HardwareTable:
    """The effective table once ``gpu``'s row is in ``path`` (created with the table's header
    when absent), every check of a write done and nothing written: a name the file already
    has is refused without ``replace``; the new file is validated alone and overlaid on the
    built-in table."""
    _refuse(path, gpu, replace)
    text, _ = plan_text(path, _seed(header), "hardware", [_for_file(path, gpu.row)],
                        replace=replace)
    return _checked(str(path), text)


def write_gpu_row(path: Path, gpu: GpuRow, header: tuple[str, ...], *,
                  replace: bool) -> list[Written]:
    """Write ``gpu``'s row to ``path`` under the file's lock, the new text checked as
    :func:`planned_table` checks it; nothing written on any error."""
    _refuse(path, gpu, replace)
    return write_rows(path, _seed(header), "hardware", [_for_file(path, gpu.row)],
                      replace=replace, check=_checked)


def _refuse(path: Path, gpu: GpuRow, replace: bool) -> None:
    """A path that is not a file, or a name the file has already without ``replace``."""
    if path.exists() and not path.is_file():
        raise InputError("not a file", file=str(path), fix="pass a CSV file to write")
    name = gpu.row["hardware"]
    line = existing_row(path, "hardware", name)
    if line is None or replace:
        return
    theirs = _file_row(path, name)
    built_in = holds_built_in_row(path, name)
    where = f"{path}, row {line}" + (" (the built-in row)" if built_in else "")
    figures = [c for c in gpu.given if c not in ("source", "flops_source")]
    if figures and all(_same(theirs.get(c, ""), gpu.row.get(c, "")) for c in figures):
        raise InputError(f"{name!r} is already in {where}, with the figures you gave",
                         fix=f"nothing to add: ask with --hardware {name}")
    raise InputError(f"{name!r} is already in {where}",
                     fix=(f"give your GPU a name of its own, with --like {name} and the figures "
                          f"that differ, or pass --replace to change the built-in figures in "
                          f"{path}") if built_in else
                     "pass --replace to overwrite that row, or give the GPU another name")


def holds_built_in_row(path: Path, name: str) -> bool:
    """Whether the table ``path`` holds GPU ``name``'s built-in row as it stands (a checkout's
    data/hardware.csv is the built-in table)."""
    theirs = _file_row(path, name)
    return bool(theirs) and theirs == _file_row(bundled("hardware.csv"), name)


def _file_row(path: Path, name: str) -> dict[str, str]:
    """The row of GPU ``name`` in the table ``path`` (empty when it has none)."""
    from ddtree_bayes.core.data import read_records

    _, header, body = read_records(path)
    j = header.index("hardware")
    return next(({h: v.strip() for h, v in zip(header, cells, strict=False)}
                 for _, cells in body if len(cells) > j and cells[j].strip() == name), {})


def _same(a: str, b: str) -> bool:
    """Two cells of a column: equal as numbers when both are, else as text."""
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip().lower() == b.strip().lower()


def _for_file(path: Path, row: dict[str, str]) -> dict[str, str]:
    """``row`` without the blank cells of columns ``path``'s header lacks (a short table of
    the required columns holds a new GPU's row; a value it has no column for is refused)."""
    if not path.is_file():
        return row
    from ddtree_bayes.core.data import read_records

    _, header, _ = read_records(path)
    return {k: v for k, v in row.items() if k in header or str(v).strip()}


def _seed(header: tuple[str, ...]) -> str:
    return ",".join(header) + "\n"


def _checked(path: str, text: str) -> HardwareTable:
    return merge_tables(path, user_text=text)   # the file alone, then overlaid on the built-in

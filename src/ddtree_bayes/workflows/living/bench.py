"""``add --from-bench``: a benchmark tool's result file -> rows to append.

The parsing is :mod:`ddtree_bayes.core.bench_import` (selection, format check, one parser per
tool). Here each imported record becomes a :class:`~ddtree_bayes.workflows.living.records.NewRow`:
the throughput (and acceptance length and context, when the file records them) from the file;
the model and the GPU from the file when it names them, as card names
(:mod:`~ddtree_bayes.core.bench_import.identity`: ``--model``/``--hardware`` map a name that is
no card, and are refused when they clearly contradict the file); the engine from the file
when it names it (a tool that runs one engine, a serving result's ``backend``; ``--engine``
is refused when it differs); everything the file does not say (GPU count, method, block,
budget) from the flags. The rows then go through
:func:`append_rows` like any other: validated, all or nothing, under the file's lock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ddtree_bayes.core.bench_import import BenchFormatError, BenchRecord, parse_bench_file, span
from ddtree_bayes.core.bench_import.identity import (
    data_methods,
    engine_key,
    gpu_devices,
    gpu_number_agrees,
    match_card,
    match_gpu,
    model_name_forms,
    quantisation_tag,
    size_in_name,
    sizes_differ,
    tag_bits,
)
from ddtree_bayes.core.bench_import.reading import numbered
from ddtree_bayes.core.data import AR_METHOD, counted
from ddtree_bayes.core.errors import DataError
from ddtree_bayes.core.methods import chain_depth
from ddtree_bayes.workflows.living.records import NewRow, result_tag

#: The configuration flags of ``add`` that a benchmark file does not hold (``model`` and
#: ``hardware`` only when the file does not name them).
CONFIG_KEYS = ("hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
               "model", "drafter")


#: Bytes per weight of a benchmark file's model and of the card it is imported as, more than
#: this far apart: another quantisation (Q4_K_M 0.61 against bf16 2, Q8_0 1.06, Q6_K 0.82).
BYTES_RATIO = 1.2


@dataclass(frozen=True)
class BenchImport:
    """The rows of a benchmark file, its format, notes on what was skipped and warnings on
    what was kept."""

    format: str
    rows: list[NewRow]
    notes: list[str]
    warnings: list[str] = field(default_factory=list)
    #: the file names no model and no --model was given: the rows take the measurement
    #: file's model, which the command says once they are in (it is known only then)
    model_unsaid: bool = False


def _number(x: float) -> str:
    """A number as the CSV writes it: whole numbers without '.0', others (and whole numbers
    of 16 digits or more, an overflow the row's checks then name) to 6 digits."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:.6g}"


def _cards() -> dict:
    """Card name -> :class:`~ddtree_bayes.core.model_cards.ModelCard`, from data/models.csv (or
    the bundled copy)."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.model_cards import load_model_cards

    return dict(load_model_cards(paths.data_file("models.csv")))


def _card_sizes() -> dict[str, float]:
    """Card name -> total parameters (billions), from data/models.csv (or the bundled copy)."""
    return {name: card.params_total_b for name, card in _cards().items()}


def _size(x: float) -> str:
    """A GB or billions figure in a message: 3 significant digits, whole with thousands
    separators from 100 up (``.3g`` printed 1,000 as "1e+03").

    >>> _size(8.03), _size(381.2), _size(1000.0)
    ('8.03', '381', '1,000')
    """
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _other_quantisation(path: Path, rec: BenchRecord, model: str | None, card) -> str | None:
    """A warning when the file records its model's bytes (llama-bench ``model_size``) at a
    bytes per weight more than :data:`BYTES_RATIO` from ``card``'s checkpoint's
    (:attr:`~ddtree_bayes.core.model_cards.ModelCard.weights_bytes_per_weight`, both averages
    over every weight): the card is of another quantisation, so the pair's step, priced at
    the card's ``bytes_per_weight``, would read another quantisation's weights."""
    if card is None or not rec.model_bytes or not rec.model_params:
        return None
    mine, theirs = rec.model_bytes / rec.model_params, card.weights_bytes_per_weight
    ratio = theirs / mine
    if max(ratio, 1 / ratio) <= BYTES_RATIO:
        return None
    return (f"{path}: the file's model {rec.model!r} takes {_size(rec.model_bytes / 1e9)} GB "
            f"for {_size(rec.model_params / 1e9)}B parameters ({mine:.3g} bytes per weight: "
            f"model_size / model_n_params), but card {model}'s checkpoint is {theirs:g} bytes "
            f"per weight ({_size(card.weights_gb)} GB), {ratio:.2g}x: kept, "
            + _priced_at_the_cards(card, "--gguf FILE.gguf"))


def _priced_at_the_cards(card, source: str) -> str:
    """The end of a warning that a run's weights are not its card's bytes: what a fit prices
    and the fix (``source``: the ``card add`` flag that reads the run's checkpoint)."""
    return (f"but a fit prices the card's bytes_per_weight, {card.bytes_per_weight:g}, not the "
            f"run's (give the quantisation its own card, `ddtree-bayes card add {source} --name "
            "NAME`, and import it with --model NAME)")


def _tagged_quantisation(path: Path, rec: BenchRecord, model: str | None, card) -> str | None:
    """A warning when the file's model name ends in a quantisation tag
    (:func:`~ddtree_bayes.core.bench_import.identity.quantisation_tag`: ``-FP8``, ``-AWQ``,
    ``Q4_K_M`` ...) whose bits per weight (:func:`tag_bits`) are more than :data:`BYTES_RATIO`
    from the bytes per weight of ``card``'s checkpoint
    (:attr:`~ddtree_bayes.core.model_cards.ModelCard.weights_bytes_per_weight`, what
    llama-bench's byte count is held against): the name matched the card only without its tag,
    or --model named another, so the fit would price the card's bytes, not the run's (a vLLM
    run of ``Qwen/Qwen3-30B-A3B-FP8`` landed as the bf16 card ``qwen3-30b-a3b``, silently). A
    name that is the card itself says nothing (its card is the quantisation's own); nor does a
    card of the checkpoint whose ``bytes_per_weight``, an average over the weights a token
    reads, is mostly unquantised layers (``card add`` of RedHatAI/Qwen3-Coder-Next-NVFP4: 1.26
    bytes per active weight, 0.60 over the checkpoint's)."""
    tag = quantisation_tag(rec.model or "")
    bits = None if tag is None else tag_bits(tag)
    if card is None or bits is None or model is None:
        return None
    if model_name_forms(rec.model or "")[0] == model.lower():
        return None
    theirs = card.weights_bytes_per_weight
    ratio = theirs * 8 / bits
    if max(ratio, 1 / ratio) <= BYTES_RATIO:
        return None
    return (f"{path}: the file's model {rec.model!r} is a quantisation ({tag}: ~{bits:g} bits "
            f"per weight) and card {model}'s checkpoint is {theirs:g} bytes per weight "
            f"({theirs * 8:g} bits), {ratio:.2g}x: kept as {model}, "
            + _priced_at_the_cards(card, "--hf-config config.json"))


#: ggml backends that run on the host CPU: llama-bench's ``backends`` lists the registered
#: backends other than CPU, and "CPU" when there is none (``get_backend()``), so a build
#: without CUDA, ROCm, Metal, Vulkan, SYCL ... writes "CPU" (or "BLAS", a CPU BLAS library).
CPU_BACKENDS = frozenset({"CPU", "BLAS"})


def _weights_on_cpu(rec: BenchRecord, model: str | None, layers: int | None) -> str | None:
    """Why a llama-bench record decoded with weights or its KV cache left on the CPU, else
    None: the step prices the GPU's memory bandwidth, not the host's. ``backends`` of a build
    without a GPU backend (:data:`CPU_BACKENDS`); ``n_gpu_layers`` 0, or
    at most the card's layers (llama.cpp counts the output layer as one more: ``-ngl`` equal
    to the layers leaves lm_head on the CPU; a negative value is every layer and the output
    on the GPU); ``n_cpu_moe`` above 0; a ``tensor_buft_overrides`` (``-ot``) sending tensors
    to the CPU; ``no_kv_offload``. ``layers``: those of ``model``'s card, None without one."""
    settings = dict(rec.setup)
    backends = [b.strip() for b in str(settings.get("backends", "")).split(",") if b.strip()]
    if backends and all(b.upper() in CPU_BACKENDS for b in backends):
        return (f"backends {settings['backends']!r}: a llama.cpp build without a GPU backend, "
                "so the CPU decoded")
    ngl, cpu_moe = _number_or_none(settings.get("n_gpu_layers", "")), _number_or_none(
        settings.get("n_cpu_moe", ""))
    if cpu_moe is not None and cpu_moe > 0:
        return f"n_cpu_moe {settings['n_cpu_moe']}: the expert weights of those layers stayed on the CPU"
    overrides = str(settings.get("tensor_buft_overrides", "") or "")
    if "=cpu" in overrides.replace(" ", "").lower():
        return (f"tensor_buft_overrides {overrides!r}: the tensors it names stayed on the CPU")
    if str(settings.get("no_kv_offload", "")).strip().lower() in ("1", "true", "yes"):
        return "no_kv_offload: the KV cache stayed in host memory"
    if ngl is None or ngl < 0:
        return None
    if ngl == 0:
        return f"n_gpu_layers {settings['n_gpu_layers']}: the weights stayed on the CPU"
    if layers is not None and ngl < layers:
        return (f"n_gpu_layers {settings['n_gpu_layers']} of {model}'s {layers} layers: the "
                "weights of the others stayed on the CPU")
    if layers is not None and ngl == layers:
        return (f"n_gpu_layers {settings['n_gpu_layers']}: {model}'s {layers} layers, but "
                "llama.cpp counts the output layer as one more, so lm_head stayed on the CPU")
    return None


def _groups(parsed: list[BenchRecord], key: Callable[[BenchRecord], str | None]
            ) -> dict[str | None, list[int]]:
    out: dict[str | None, list[int]] = {}
    for rec in parsed:
        out.setdefault(key(rec), []).append(rec.index)
    return out


def _several(path: Path, unit: str, groups: dict[str | None, list[int]], flag: str,
             given: str | None) -> DataError:
    """The error of a file whose records name several models (GPUs) that cannot all be told."""
    shown = "; ".join(f"{name!r}: {numbered(unit, idx)}" if name else
                      f"none named: {numbered(unit, idx)}" for name, idx in groups.items())
    ran = (f"are runs of {len(groups)} models" if flag == "--model" else
           f"ran on {len(groups)} different GPUs")
    why = (f"one {flag} {given} cannot be all of them" if given is not None else
           f"not every one is a name of data/{'models' if flag == '--model' else 'hardware'}.csv")
    first = next(iter(groups.values()))
    return DataError(f"{path}: the records {ran} ({shown}); {why}",
                     fix=f"import one at a time: --bench-records {span(first).replace(' ', '')} "
                         f"{flag} <name>, and so on")


def _models(path: Path, unit: str, parsed: list[BenchRecord], given: str | None,
            card_sizes: Callable[[], Mapping[str, float]]) -> dict[int, str | None]:
    """Record index -> the row's model: the card the file's model is, or ``given`` (None: the
    data file's model) when the file names none; see docs/cli.md for the rule."""
    if all(rec.model is None for rec in parsed):
        return {rec.index: given for rec in parsed}
    sizes = card_sizes()
    card_of = {rec.model: match_card(rec.model, sizes) for rec in parsed if rec.model}
    groups = _groups(parsed, lambda r: card_of.get(r.model) or r.model if r.model else None)
    if len(groups) > 1:
        if given is not None or None in groups or None in card_of.values():
            names = _groups(parsed, lambda r: r.model)
            raise _several(path, unit, names, "--model", given)
        return {rec.index: card_of.get(rec.model or "") for rec in parsed}
    rec = parsed[0]
    assert rec.model is not None
    name, card = rec.model, card_of[rec.model]
    where = f"{path}, {unit} {rec.index}"
    if given is None:
        if card is None:
            raise DataError(f"{where}: the file's model {name!r} matches no card in data/models.csv "
                            f"(compared as {' / '.join(model_name_forms(name))})",
                            fix="say which card it is with --model <card> (cards: "
                                + ", ".join(sorted(sizes)) + "), or add its card to "
                                "data/models.csv first")
        return {r.index: card for r in parsed}
    if card is not None and card != given and not _own_quantisation(name, card, given, sizes):
        raise DataError(f"{where}: the file's model {name!r} is card {card}, but --model {given}",
                        fix=f"drop --model (the file's model is used), or import the file of "
                            f"the {given} run")
    if card is None and given in sizes:
        size = rec.model_params / 1e9 if rec.model_params else size_in_name(name)
        source = "model_n_params" if rec.model_params else "its name"
        if size is not None and sizes_differ(size, sizes[given]):
            raise DataError(f"{where}: the file's model {name!r} has {size:.3g}B parameters "
                            f"({source}), but --model {given}'s card {sizes[given]:g}B",
                            fix="give the card of the model the file ran with --model, or add "
                                "its card to data/models.csv first")
    return {r.index: given for r in parsed}


def _own_quantisation(name: str, card: str, given: str, sizes: Mapping[str, float]) -> bool:
    """Whether ``--model given`` may stand for a file's model ``name`` that is ``card`` only
    without its quantisation tag (``Qwen/Qwen3-30B-A3B-FP8`` is card ``qwen3-30b-a3b``, a bf16
    card): the file ran a quantisation of ``card``'s model, and ``given`` is a card of the
    same size, its own (what the weights-fit warning tells the user to make and name). A name
    that is a card exactly, or a card of another size, is not.

    >>> sizes = {"qwen3-30b-a3b": 30.5, "my-fp8": 30.5321, "kimi-k2.6": 1000.0}
    >>> [_own_quantisation(n, "qwen3-30b-a3b", g, sizes) for n, g in (
    ...     ("Qwen/Qwen3-30B-A3B-FP8", "my-fp8"), ("Qwen/Qwen3-30B-A3B", "my-fp8"),
    ...     ("Qwen/Qwen3-30B-A3B-FP8", "kimi-k2.6"), ("Qwen/Qwen3-30B-A3B-FP8", "no-card"))]
    [True, False, False, False]
    """
    exact = model_name_forms(name)[0] == card.lower()
    return (not exact and given in sizes and card in sizes
            and not sizes_differ(sizes[given], sizes[card]))


def _hardware(path: Path, unit: str, parsed: list[BenchRecord], given: str | None,
              names: Collection[str], editions: Mapping[str, Collection[str]] | None = None
              ) -> dict[int, str]:
    """Record index -> the row's hardware: the hardware-table name the file's GPU is, or
    ``given``; see docs/cli.md for the rule. ``given`` may be the user's own edition of the
    file's GPU (``editions``: copied from it with ``hardware add --like``), which reports the
    same name (the fix said to drop --hardware: the run of an overclocked H100 landed as a
    stock h100, its bandwidth 3.35 TB/s)."""
    table = ", ".join(sorted(names))
    if all(rec.gpu is None for rec in parsed):
        if given is None:   # (n_gpu_layers 0 is refused before: the CPU decoded)
            raise DataError(f"{path}: the file does not name the GPU it ran on",
                            fix=f"give the benchmarked GPU with --hardware (names: {table})")
        return {rec.index: given for rec in parsed}
    hw_of = {rec.gpu: match_gpu(rec.gpu, names) for rec in parsed if rec.gpu}
    groups = _groups(parsed, lambda r: hw_of.get(r.gpu) or r.gpu if r.gpu else None)
    if len(groups) > 1:
        if given is not None or None in groups or None in hw_of.values():
            raise _several(path, unit, _groups(parsed, lambda r: r.gpu), "--hardware", given)
        return {rec.index: hw_of.get(rec.gpu or "") or "" for rec in parsed}
    rec = parsed[0]
    assert rec.gpu is not None
    gpu, hw = rec.gpu, hw_of[rec.gpu]
    where = f"{path}, {unit} {rec.index}"
    kinds = list({d.lower(): d for d in gpu_devices(gpu)}.values())
    if len(kinds) > 1:   # a mixed box: each device is checked, a row holds one kind
        return _mixed_hardware(where, parsed, kinds, given)
    if given is None:
        if hw is None:
            raise DataError(f"{where}: the file ran on {gpu!r}, which is no name in the hardware "
                            "table", fix=f"say which it is with --hardware (names: {table}), or "
                                         "add the GPU to data/hardware.csv (or --hardware-file)")
        return {r.index: hw for r in parsed}
    if hw is not None and hw != given and hw not in (editions or {}).get(given, ()):
        raise DataError(f"{where}: the file ran on {gpu!r} (hardware {hw}), but --hardware {given}",
                        fix=f"drop --hardware (the file's GPU is used), or import the file of "
                            f"the {given} run; a row of your own edition of {hw}, `hardware "
                            f"add NAME --like {hw}`, is taken as --hardware NAME")
    if hw is None and not gpu_number_agrees(given, gpu):
        raise DataError(f"{where}: the file ran on {gpu!r}, not on a {given}",
                        fix="give the GPU the file ran on with --hardware, or add it to "
                            "data/hardware.csv (or --hardware-file)")
    return {r.index: given for r in parsed}


def _engine(path: Path, unit: str, parsed: list[BenchRecord], given: str | None) -> str:
    """The rows' engine: the one the file names (a tool that runs one engine, a serving
    result's ``backend``), which a contradicting ``given`` (``--engine``) is refused against,
    else ``given``; a file that names none needs ``given``."""
    for rec in parsed:
        where = f"{path}, {unit} {rec.index}"
        if given is not None and rec.engine is not None \
                and engine_key(rec.engine) != engine_key(given):
            raise DataError(f"{where}: {rec.engine_said}, so the run is {rec.engine}'s, but "
                            f"--engine {given}", fix=f"drop --engine (the file's engine, "
                            f"{rec.engine}, is used), or import the result file of the {given} run")
    if given is not None:
        return given
    engines = _groups(parsed, lambda r: r.engine)
    if None in engines:
        rec = next(r for r in parsed if r.engine is None)
        said = (f"{rec.engine_said}, an API several engines serve, names no engine"
                if rec.engine_said else "the file does not name the engine the server ran")
        raise DataError(f"{path}, {unit} {rec.index}: {said}",
                        fix="give the engine of the server it measured with --engine (e.g. "
                            "--engine vllm)")
    if len(engines) > 1:
        shown = "; ".join(f"{name}: {numbered(unit, idx)}" for name, idx in engines.items())
        first = next(iter(engines.values()))
        raise DataError(f"{path}: the records are runs of {len(engines)} engines ({shown})",
                        fix=f"import one at a time: --bench-records {span(first).replace(' ', '')}, "
                            "and so on")
    (name,) = engines
    assert name is not None
    return name


def _mixed_hardware(where: str, parsed: list[BenchRecord], kinds: list[str],
                    given: str | None) -> dict[int, str]:
    """The hardware of a run whose ``gpu_info`` lists several kinds of GPU: refused when its
    layers were split over all of them; a run on one of them (``split_mode none``, or
    ``devices``/``tensor_split`` picking some) is ``given``'s when one of its devices is a
    ``given`` (:func:`gpu_number_agrees`), as the file does not say which ran it."""
    shown, rec = ", ".join(kinds), parsed[0]
    if rec.gpus is not None and rec.gpus > 1:
        raise DataError(f"{where}: the file ran on {len(kinds)} kinds of GPU ({shown}), its "
                        f"layers split over all {rec.gpus}, but a row holds one kind",
                        fix="rerun llama-bench on GPUs of one kind (CUDA_VISIBLE_DEVICES or "
                            "-dev), or on one with -sm none")
    if given is None:
        raise DataError(f"{where}: the file lists {len(kinds)} kinds of GPU ({shown}) and ran "
                        "on one, but does not say which",
                        fix="give the GPU it ran on with --hardware")
    if not any(gpu_number_agrees(given, kind) for kind in kinds):
        raise DataError(f"{where}: the file ran on one of {shown}, none a {given}",
                        fix="give the GPU the file ran on with --hardware, or add it to "
                            "data/hardware.csv (or --hardware-file)")
    return {r.index: given for r in parsed}


def _number_or_none(text: str) -> float | None:
    """``text`` as a finite number, else None (the row's validation names the problem)."""
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _gpus_said(fmt: str) -> str:
    """Where a format records its GPU count."""
    return ("the devices of its gpu_info" if fmt.startswith("llama-bench") else
            "tensor_parallel_size x pipeline_parallel_size of its args")


def _drafts_agree(rec: BenchRecord, config: dict[str, str | None], method: str | None,
                  origin: str) -> None:
    """Refuse a --budget, else a --block, that drafts another count than the file's tokens
    drafted per step (vLLM's num_speculative_tokens). A chain drafts its block, or, for a
    method whose block's position 0 is the anchor (DFlash), the block less its anchor
    (:func:`~ddtree_bayes.core.methods.chain_depth`): a DFlash block-16 run drafts 15, and
    `--block 16` was refused, the `--block 15` asked for imported as 14 drafts."""
    if rec.draft_tokens is None:
        return
    budget, block = config.get("budget"), config.get("block")
    if budget:
        if int(budget) != rec.draft_tokens:
            raise DataError(f"the file drafted {counted(rec.draft_tokens, 'token')} per step "
                            f"({rec.draft_key}), but --budget is {budget}", file=origin,
                            fix=f"give --budget {rec.draft_tokens}, the run's "
                                "num_speculative_tokens")
        return
    if not block or method is None or method == AR_METHOD:
        return
    drafts = chain_depth(method, int(block))
    if drafts == rec.draft_tokens:
        return
    anchor = drafts != int(block)   # (the block's position 0 is the anchor)
    right = rec.draft_tokens + (1 if anchor else 0)
    said = (f"--block {block} drafts {drafts} ({method}: the block less its anchor)" if anchor
            else f"--block is {block}")
    raise DataError(f"the file drafted {counted(rec.draft_tokens, 'token')} per step "
                    f"({rec.draft_key}), but {said}", file=origin,
                    fix=f"give --block {right}, the run's num_speculative_tokens"
                        + (" + 1" if anchor else ""))


def rows_from_bench(path: Path, config: dict[str, str | None], *,
                    hardware_names: Collection[str], fmt: str | None = None,
                    accept: str | None = None, context: str | None = None,
                    source: str | None = None, notes: str | None = None,
                    batch_size: int | None = None, output_len: int | None = None,
                    input_len: int | None = None, records: Collection[int] | None = None,
                    single_stream_only: bool = False,
                    card_sizes: Mapping[str, float] | None = None,
                    editions: Mapping[str, Collection[str]] | None = None) -> BenchImport:
    """The rows of the benchmark file ``path``, its format and notes on what was skipped.

    ``records`` and ``single_stream_only`` select records before anything is validated
    (:func:`~ddtree_bayes.core.bench_import.parse_bench_file`). The model and the hardware
    come from the file when it names them, as card names (``config['model']`` /
    ``config['hardware']`` map a name the cards do not hold, and are refused when the file
    clearly ran something else); ``hardware_names`` are the hardware table's names and
    ``card_sizes`` card name -> total parameters in billions (default: data/models.csv);
    ``editions`` a GPU of the user's -> the GPUs it is an edition of (``hardware add --like``:
    card_files/gpu.py ``editions``), whose files ``--hardware`` it may take. The other
    columns come from ``config`` (``CONFIG_KEYS``; None: the data file's GPU count for that
    hardware, the data file's model when the file names none). The acceptance length comes
    from the file when it records one, else from ``accept`` (autoregressive runs: 1); asking
    for both is an error. ``context`` replaces the file's context, its prompt plus half its
    output (the notes say so).
    ``source`` defaults to the tool, file name and record number; the parser's note on how
    tok/s was computed, and the model and GPU the file names, are kept in ``notes``. Raises
    :class:`DataError` (one line naming the file and the record) on any problem; nothing is
    read beyond the file.
    """
    path = Path(path)
    try:
        got = parse_bench_file(path, fmt, batch_size=batch_size, output_len=output_len,
                               input_len=input_len, records=records,
                               single_stream_only=single_stream_only)
    except BenchFormatError as err:
        where = err.file if err.index is None else f"{err.file}, {err.unit} {err.index}"
        fix = err.fix or "pass --bench-format"
        if err.key in ("batch_size", "output_len") and "records only latencies" in err.problem:
            fix = ("pass the run's --batch-size and --output-len (vllm bench latency does not "
                   "save them), or keep the FILE.pytorch.json it writes beside the file")
        raise DataError(f"{where}: {err.problem}", fix=fix) from None
    fmt, parsed, unit = got.format, got.records, got.unit
    engine = _engine(path, unit, parsed, config.get("engine"))
    model_of = _models(path, unit, parsed, config.get("model"),
                       (lambda: card_sizes) if card_sizes is not None else _card_sizes)
    tagged = any(rec.model and quantisation_tag(rec.model) for rec in parsed)
    cards = _cards() if fmt == "llama-bench" or tagged else {}   # (read once, not per record)
    warnings: list[str] = []
    for rec in parsed:
        # (what the file's name or bytes say of its quantisation against the card's: the
        # file's own byte count, llama-bench's, when it has one, else its name's tag)
        model = model_of[rec.index]
        card = cards.get(model or "")
        slip = (_other_quantisation(path, rec, model, card) if rec.model_bytes
                else _tagged_quantisation(path, rec, model, card))
        if slip is not None and slip not in warnings:
            warnings.append(slip)
        if fmt != "llama-bench":
            continue
        # (imported as a run of the GPU --hardware named, exit 0; the records of one import
        # share these settings)
        cpu = _weights_on_cpu(rec, model, card.layers if card is not None else None)
        if cpu is not None:
            raise DataError(f"{cpu}: the step is priced from the GPU's memory bandwidth, not "
                            "the host's", file=f"{path} ({fmt}, {unit} {rec.index})",
                            fix="rerun llama-bench with every layer on the GPU (-ngl 99, "
                                "without -ncmoe, -ot ...=CPU or -nkvo)")
    warnings += [f"{path}, {unit} {rec.index}: {said}" for rec in parsed
                 for said in (rec.caveat, None if context is not None else rec.context_caveat)
                 if said]
    hardware_of = _hardware(path, unit, parsed, config.get("hardware"), hardware_names,
                            editions or {})
    method = config.get("method")
    rows = []
    for rec in parsed:
        origin = f"{path} ({fmt}, {unit} {rec.index})"
        if rec.accept_len is not None and method == AR_METHOD and rec.accept_len != 1:
            raise DataError(f"the file records acceptance length {rec.accept_len:g}, a "
                            "speculative run, but --method is ar", file=origin,
                            fix="give the run's --method (and --block/--budget), or pick the "
                                "autoregressive records with --bench-records")
        if rec.not_speculative is not None and method != AR_METHOD:
            raise DataError(f"{rec.not_speculative}, but --method is {method}", file=origin,
                            fix="import it with --method ar, or import the result file of a "
                                f"tool that ran {method} (e.g. sglang.bench_serving against a "
                                "speculative server)")
        if rec.speculative is not None and method == AR_METHOD:
            raise DataError(f"the file's run decoded speculatively ({rec.speculative}), but "
                            "--method is ar", file=origin,
                            fix="give the run's --method (and --block/--budget, and --accept), "
                                "or import a run without speculative decoding")
        can_be = data_methods(rec.spec_method, rec.spec_parallel) if rec.spec_method else ()
        if can_be and method != AR_METHOD and method not in can_be:   # (ar: refused above)
            raise DataError(f"the file's run used speculative_config method "
                            f"{rec.spec_method!r}"
                            f"{' with parallel_drafting' if rec.spec_parallel else ''} (the "
                            f"data's {' or '.join(can_be)}), but "
                            f"--method is {method}", file=origin,
                            fix=f"give --method {can_be[0]}, or import the result file of the "
                                f"{method} run")
        if rec.accept_len is not None and accept and method != AR_METHOD:  # ("": infer)
            raise DataError(f"the file records acceptance length {rec.accept_len:g}; --accept "
                            f"{accept} would contradict it", file=origin,
                            fix="drop --accept (the file's value is used)")
        _drafts_agree(rec, config, method, origin)
        if method == AR_METHOD:
            accept_len = accept if accept is not None else "1"
        elif rec.accept_len is not None:
            accept_len = _number(rec.accept_len)
        elif accept is not None:
            accept_len = accept   # "" for --accept infer: inferred by the fit
        else:
            raise DataError(f"{fmt} records no acceptance length for this "
                            f"{method or 'speculative'} run", file=origin,
                            fix="pass --accept (accepted tokens per step incl. the bonus "
                                "token; --accept infer lets the fit infer it), --method ar for "
                                "a run without speculation, or pick records with "
                                "--bench-records")
        kv = rec.context()
        ctx = "" if kv is None else _number(kv)
        said = rec.notes
        if context is not None and context != ctx:   # the user's figure, and the file's said
            said = re.sub(r"context_tokens = [^;)]*", f"context_tokens = --context {context}"
                          + (f" (the file's: {ctx})" if ctx else ""), said)
            if "context_tokens = --context" not in said:
                said += f"; context_tokens = --context {context}"
            ctx = context
        rid = rec.result_id()
        note = (f"{said}; {result_tag(rid)}" + (f"; model in the file: {rec.model}" if rec.model else "")
                + (f"; GPU in the file: {rec.gpu}" if rec.gpu else ""))
        values: dict[str, str | None] = {k: config.get(k) for k in CONFIG_KEYS}
        values["engine"] = engine
        if rec.gpus is not None:   # the file says how many GPUs ran it
            given_gpus = config.get("gpus")
            if given_gpus is None:
                values["gpus"] = str(rec.gpus)
            elif _number_or_none(given_gpus) not in (None, float(rec.gpus)):
                raise DataError(f"the file ran on {rec.gpus} GPU{'s' if rec.gpus != 1 else ''} "
                                f"({_gpus_said(fmt)}), but --gpus is {given_gpus}", file=origin,
                                fix="drop --gpus (the file's count is used), or import the "
                                    f"file of the {given_gpus}-GPU run")
        values.update({
            "model": model_of[rec.index], "hardware": hardware_of[rec.index],
            "block": config.get("block") or "", "budget": config.get("budget") or "",
            "verify_tokens": config.get("verify_tokens") or "", "accept_len": accept_len,
            "context_tokens": ctx, "tok_s": _number(rec.tok_s),
            "concurrency": str(rec.batch_size) if (rec.batch_size or 1) > 1 else None,
            "source": source or f"{fmt} {path.name} {unit} {rec.index}",
            "notes": f"{notes}; {note}" if notes else note})
        rows.append(NewRow(origin, None, values, flags=True, result_id=rid))
    return BenchImport(fmt, rows, got.notes, warnings, model_unsaid=all(
        model_of[rec.index] is None for rec in parsed))

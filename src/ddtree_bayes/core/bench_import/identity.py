"""Which model card and which GPU a benchmark file names (``add --from-bench``).

A benchmark file names its model (llama-bench ``model_filename``, vLLM ``model_id``, SGLang
``server_info.model_path``) and sometimes its GPU (llama-bench ``gpu_info``); the data's
``model`` and ``hardware`` columns hold card names (data/models.csv, data/hardware.csv). The
rules here say when a file's name *is* a card name, and when a name given on the command line
clearly *is not* what the file ran. Pure string work: stdlib only.

Model
    A file's model matches a card when, case-insensitively, the last part of its path or
    Hugging Face repo id, without ``.gguf`` and a split-file suffix (``-00001-of-00003``),
    equals the card's name; failing that, the same without a trailing quantisation tag
    (``Q4_K_M``, ``Q8_0``, ``IQ4_XS``, ``F16``, ``BF16``, ``FP8``, ``FP4``, ``AWQ``, ...).
    ``meta-llama/Llama-3.1-8B-Instruct`` is card ``llama-3.1-8b-instruct``;
    ``Qwen3.8-27B-Q4_K_M.gguf`` is ``qwen3.8-27b-q4_k_m`` (that card exists) and
    ``Kimi-K2.6-Q4_K_M.gguf`` is ``kimi-k2.6``. Nothing else is guessed
    (``Meta-Llama-3.1-8B-Instruct`` matches no card).
Model size
    The parameter count a file records (llama-bench ``model_n_params``), else a size written
    in the name (``8B``, ``70b``, ``1.5B``, ``135M``; not ``A3B`` nor ``8x7B``), in billions.
GPU
    A GPU description (one device of llama-bench's ``gpu_info``, which lists devices separated
    by ``, `` or ``/``) matches a hardware name when the name's ``-``-separated words appear
    among the description's words (lower case; a hyphen between letters dropped, so ``Max-Q``
    is ``maxq``), in order but for its memory and form-factor words (``a100-pcie-80gb`` is
    "NVIDIA A100 80GB PCIe"), and every other word of the description is a vendor, memory,
    form-factor or edition word (``NVIDIA``, ``GeForce``, ``80GB``, ``HBM3``, ``SXM``, ``PCIe``,
    ``Blackwell``, ``Workstation Edition``, ...). The name with the most words wins
    (``rtx-pro-6000-server`` over ``rtx-pro-6000``, ``a100-pcie-80gb`` over ``a100-80gb``).
    ``RTX 3090 Ti`` matches no ``rtx-3090``: ``Ti`` is not a qualifier.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: A trailing quantisation / precision tag of a model file or repo name.
_QUANT_TAG = re.compile(r"[-_.](?:i?q\d(?:_[a-z0-9]+)*|f16|bf16|f32|fp8|fp4|fp16|nvfp4|mxfp4|"
                        r"int4|int8|w4a16|w8a8|awq|gptq|gguf)$", re.IGNORECASE)
_SHARD = re.compile(r"-\d{5}-of-\d{5}$")
#: A parameter count written in a name: a number and B or M, standing alone between separators.
#: (a size starts after a separator, but not after a decimal point: the "7b" of "A2.7B",
#: Qwen1.5-MoE's active count, is no size of 7 B)
_SIZE = re.compile(r"(?:^|(?<=[\s/\\_.\-]))(?<!\d\.)(\d+(?:\.\d+)?)([bm])(?=$|[\s/\\_.\-])",
                   re.IGNORECASE)
#: Words of a GPU description that qualify it without making it another GPU.
_QUALIFIER = re.compile(r"(nvidia|geforce|amd|radeon|instinct|tesla|quadro|intel|\d+gb|hbm\d*e?|"
                        r"gddr\d+x?|sxm\d*|pcie|nvl|oam|blackwell|hopper|ampere|volta|ada|"
                        r"lovelace|generation|workstation|edition|graphics|gpu)$")
#: How far apart (as a ratio) two parameter counts must be to be two different models.
SIZE_RATIO = 1.5


def model_name_forms(name: str) -> tuple[str, ...]:
    """The forms of a file's model name compared with card names, most specific first.

    >>> model_name_forms("/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf")
    ('qwen2.5-7b-instruct-q4_k_m', 'qwen2.5-7b-instruct')
    >>> model_name_forms("meta-llama/Llama-3.1-8B-Instruct")
    ('llama-3.1-8b-instruct',)
    """
    last = re.split(r"[\\/]", name.strip().rstrip("/\\"))[-1].lower()
    last = _SHARD.sub("", last.removesuffix(".gguf"))
    forms = [last]
    bare = _QUANT_TAG.sub("", last)
    if bare and bare != last:
        forms.append(bare)
    return tuple(forms)


def quantisation_tag(name: str) -> str | None:
    """The trailing quantisation / precision tag of a file's model name, as written, or None.

    >>> quantisation_tag("Qwen/Qwen3-30B-A3B-FP8"), quantisation_tag("m/Qwen2.5-7B-Q4_K_M.gguf")
    ('FP8', 'Q4_K_M')
    >>> quantisation_tag("meta-llama/Llama-3.1-8B-Instruct") is None
    True
    """
    last = re.split(r"[\\/]", name.strip().rstrip("/\\"))[-1]
    last = _SHARD.sub("", re.sub(r"\.gguf$", "", last, flags=re.IGNORECASE))
    found = _QUANT_TAG.search(last)
    return None if found is None else found.group(0)[1:]


#: llama.cpp's quantisation types as ``llama-quantize --help`` lists them (tools/quantize/
#: quantize.cpp, QUANT_OPTIONS): the k-quants and legacy types by the size of Llama-3-8B (GiB,
#: 8.03B parameters: a whole file's bits per weight, its embedding and output included), the
#: IQ and TQ types and the 1- and 2-bit legacy types (Q1_0, Q2_0) by their bits per weight;
#: Q3_K, Q4_K, Q5_K are aliases of the _M types.
_GGUF_GIB_AT_LLAMA3_8B = {"q2_k": 2.96, "q2_k_s": 2.96, "q3_k_s": 3.41, "q3_k_m": 3.74,
                          "q3_k_l": 4.03, "q4_0": 4.34, "q4_1": 4.78, "q4_k_s": 4.37,
                          "q4_k_m": 4.58, "q5_0": 5.21, "q5_1": 5.65, "q5_k_s": 5.21,
                          "q5_k_m": 5.33, "q6_k": 6.14, "q8_0": 7.96}
_GGUF_BPW = {"q1_0": 1.125, "q2_0": 2.25,
             "iq1_s": 1.56, "iq1_m": 1.75, "tq1_0": 1.69, "tq2_0": 2.06, "iq2_xxs": 2.06,
             "iq2_xs": 2.31, "iq2_s": 2.5, "iq2_m": 2.7, "iq3_xxs": 3.06, "iq3_xs": 3.3,
             "iq3_s": 3.44, "iq3_m": 3.66, "iq4_xs": 4.25, "iq4_nl": 4.5}
_GGUF_ALIAS = {"q3_k": "q3_k_m", "q4_k": "q4_k_m", "q5_k": "q5_k_m"}


def tag_bits(tag: str) -> float | None:
    """About how many bits per weight a quantisation tag stores (None: the tag does not say,
    as ``gguf``): ``f32`` 32, ``f16``/``bf16``/``fp16`` 16, ``fp8``/``int8``/``w8a8`` 8,
    the 4-bit formats (``fp4``, ``nvfp4``, ``mxfp4``, ``int4``, ``w4a16``, ``awq``, ``gptq``)
    4.25 with their scales; a GGUF type as llama-quantize lists it (:data:`_GGUF_BPW`, or its
    Llama-3-8B size x 2^30 x 8 / 8.03e9); another ``Qn_...`` n + 0.5 and ``IQn_...`` n + 0.3,
    never below IQ1_S's 1.56 (a rough figure for a 1.2x test, not a card's bytes).

    >>> [tag_bits(t) for t in ("FP8", "bf16", "AWQ", "Q4_K_M", "IQ2_XS", "Q8_0", "IQ1_S")]
    [8.0, 16.0, 4.25, 4.9, 2.31, 8.52, 1.56]
    >>> [tag_bits(t) for t in ("Q1_0", "Q2_0")]   # listed: 1.125 and 2.25 bpw
    [1.125, 2.25]
    >>> [tag_bits(t) for t in ("Q3_K", "Q4_K_XL", "IQ1_X", "gguf")]
    [4.0, 4.5, 1.56, None]
    """
    t = tag.lower()
    fixed = {"f32": 32.0, "f16": 16.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "int8": 8.0,
             "w8a8": 8.0, "fp4": 4.25, "nvfp4": 4.25, "mxfp4": 4.25, "int4": 4.25,
             "w4a16": 4.25, "awq": 4.25, "gptq": 4.25}
    if t in fixed:
        return fixed[t]
    t = _GGUF_ALIAS.get(t, t)
    if t in _GGUF_BPW:
        return _GGUF_BPW[t]
    if t in _GGUF_GIB_AT_LLAMA3_8B:
        return round(_GGUF_GIB_AT_LLAMA3_8B[t] * 2 ** 30 * 8 / 8.03e9, 2)
    gguf = re.match(r"(i?)q(\d)", t)
    if gguf is None:
        return None
    return max(int(gguf.group(2)) + (0.3 if gguf.group(1) else 0.5), _GGUF_BPW["iq1_s"])


def match_card(name: str, cards: Iterable[str]) -> str | None:
    """The card ``name`` is (see the module's rule), or None.

    >>> match_card("moonshotai/Kimi-K2.6", ["kimi-k2.6", "qwen3-8b"])
    'kimi-k2.6'
    >>> match_card("models/7B/ggml-model-q4_0.gguf", ["kimi-k2.6"]) is None
    True
    """
    lower = {c.lower(): c for c in cards}
    for form in model_name_forms(name):
        if form in lower:
            return lower[form]
    return None


def size_in_name(name: str) -> float | None:
    """The parameter count (billions) written in ``name``; None if none or several.

    >>> [size_in_name(n) for n in ("Llama-3.3-70B-Instruct", "Qwen3-30B-A3B", "Mixtral-8x7B",
    ...                            "qwen2 7B Q4_K - Medium", "SmolLM2-135M", "kimi-k2.6",
    ...                            "Qwen1.5-MoE-A2.7B", "qwen2.5-0.5b", "DeepSeek-R1-Distill-Qwen-1.5B")]
    [70.0, 30.0, None, 7.0, 0.135, None, None, 0.5, 1.5]
    """
    sizes = {float(n) * (1.0 if unit.lower() == "b" else 1e-3) for n, unit in _SIZE.findall(name)}
    return sizes.pop() if len(sizes) == 1 else None


def sizes_differ(a_billion: float, b_billion: float) -> bool:
    """Two parameter counts more than ``SIZE_RATIO`` apart: two different models.

    >>> sizes_differ(7.62, 8.19), sizes_differ(7.62, 1000.0)
    (False, True)
    """
    lo, hi = sorted((a_billion, b_billion))
    return lo <= 0 or hi / lo > SIZE_RATIO


def gpu_devices(gpu_info: str) -> list[str]:
    """The devices of a llama-bench ``gpu_info`` (``", "``-separated; ``"/"`` in old builds).

    >>> gpu_devices("NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3")
    ['NVIDIA H100 80GB HBM3', 'NVIDIA H100 80GB HBM3']
    """
    return [d.strip() for d in re.split(r"[,/]", gpu_info) if d.strip()]


def gpu_words(description: str) -> list[str]:
    """A GPU description's words, as compared with hardware names.

    >>> gpu_words("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition")
    ['nvidia', 'rtx', 'pro', '6000', 'blackwell', 'maxq', 'workstation', 'edition']
    """
    text = re.sub(r"(?<=[a-z])-(?=[a-z])", "", description.lower())
    return re.findall(r"[a-z0-9]+", text)


def _matches(name: str, words: list[str]) -> bool:
    """Whether hardware ``name`` is the GPU of a description's ``words``: the name's model
    words in order, its qualifier words (a memory size, a form factor) anywhere, every other
    word of the description a qualifier. (nvidia-smi's "NVIDIA A100 80GB PCIe" is
    ``a100-pcie-80gb``: in order it matched only ``a100-80gb``, the SXM4 part.)

    >>> words = gpu_words("NVIDIA A100 80GB PCIe")
    >>> _matches("a100-pcie-80gb", words), _matches("a100-80gb", words), _matches(
    ...     "a100-pcie-40gb", words)
    (True, True, False)
    """
    want = name.lower().split("-")
    rest = list(words)
    for word in (w for w in want if _QUALIFIER.fullmatch(w)):
        if word not in rest:
            return False
        rest.remove(word)
    model = [w for w in want if not _QUALIFIER.fullmatch(w)]
    pos, left = 0, []
    for word in rest:
        if pos < len(model) and word == model[pos]:
            pos += 1
        else:
            left.append(word)
    return pos == len(model) and all(_QUALIFIER.fullmatch(w) for w in left)


def match_gpu(gpu_info: str, names: Iterable[str]) -> str | None:
    """The hardware name every device of ``gpu_info`` is (see the module's rule), or None.

    >>> names = ["h100", "rtx-pro-6000", "rtx-pro-6000-server", "rtx-3090"]
    >>> match_gpu("NVIDIA H100 80GB HBM3", names)
    'h100'
    >>> match_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition", names)
    'rtx-pro-6000-server'
    >>> match_gpu("NVIDIA GeForce RTX 3090 Ti", names) is None
    True
    """
    names = list(names)
    found = set()
    for device in gpu_devices(gpu_info):
        words = gpu_words(device)
        hits = sorted((n for n in names if _matches(n, words)), key=lambda n: -len(n.split("-")))
        if not hits or (len(hits) > 1 and len(hits[0].split("-")) == len(hits[1].split("-"))):
            return None
        found.add(hits[0])
    return found.pop() if len(found) == 1 else None


def gpu_number_agrees(name: str, gpu_info: str) -> bool:
    """Whether the model-number words of a hardware name (its words with a digit: ``h100``,
    ``5090``, ``a6000``) all appear in every device of ``gpu_info``; True when the name has
    none. (The whole string once passed a mixed box of one such GPU and another.)

    >>> gpu_number_agrees("rtx-5090", "NVIDIA GeForce RTX 4080"), gpu_number_agrees(
    ...     "h100-sxm", "NVIDIA H100 80GB HBM3")
    (False, True)
    >>> gpu_number_agrees("rtx-4090", "NVIDIA GeForce RTX 4090, NVIDIA GeForce RTX 3090")
    False
    """
    numbers = [w for w in name.lower().split("-") if any(c.isdigit() for c in w)]
    return all(all(w in set(gpu_words(device)) for w in numbers)
               for device in gpu_devices(gpu_info) or [gpu_info])


#: A serving benchmark's ``backend`` (the client's ``--backend``: vLLM's ``bench serve``
#: writes it as ``backend`` and, older, ``endpoint_type``; SGLang's ``bench_serving`` as
#: ``backend``) -> the engine of the server it was pointed at, as the data names engines.
#: A backend by its engine's name (``sglang-oai`` is SGLang's OpenAI-compatible API) names
#: that engine; ``openai``, ``openai-chat``, ``truss``, ``gserver`` and any value not listed
#: speak an API many engines serve, and name none.
_BACKEND_ENGINES = (("sglang", "sglang"), ("vllm", "vllm"), ("lmdeploy", "lmdeploy"),
                    ("tensorrt-llm", "trtllm"), ("trt", "trtllm"), ("tgi", "tgi"),
                    ("llama.cpp", "llama.cpp"), ("deepspeed-mii", "deepspeed-mii"),
                    ("scalellm", "scalellm"))


def engine_of_backend(backend: str) -> str | None:
    """The engine a serving benchmark's ``backend`` names (the backend, or the backend and
    an API suffix: ``-chat``, ``-oai``, ``-native``), or None for a backend that names no
    engine.

    >>> [engine_of_backend(b) for b in ("vllm", "sglang-oai-chat", "trt", "openai", "openai-chat")]
    ['vllm', 'sglang', 'trtllm', None, None]
    """
    value = backend.strip().lower()
    for name, engine in _BACKEND_ENGINES:
        if value == name or value.startswith(name + "-"):
            return engine
    return None


def engine_key(name: str) -> str:
    """An engine name as compared with a file's: lower case, without separators, TensorRT-LLM
    spelt one way (``llama.cpp`` and ``llamacpp``, ``trt-llm`` and ``trtllm`` agree).

    >>> engine_key("llama.cpp"), engine_key("TensorRT-LLM"), engine_key("trt-llm")
    ('llamacpp', 'trtllm', 'trtllm')
    """
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    return "trtllm" if key in ("tensorrtllm", "trt") else key


#: vLLM's ``speculative_config.method`` -> the methods of the data it can be (core/methods.py,
#: the priors' ``[methods]``): ``dflash`` is also ``ddtree``, a tree built from DFlash's
#: drafts; every ``*_mtp`` (``deepseek_mtp``, ``qwen3_next_mtp``, ...) is ``mtp``; a name not
#: listed is itself, ``_`` written ``-`` (``ngram``, ``suffix``).
_VLLM_METHODS = {"eagle": ("eagle",), "eagle3": ("eagle3",), "medusa": ("medusa",),
                 "draft_model": ("draft-model",), "dflash": ("dflash", "ddtree"),
                 "mtp": ("mtp",), "pard": ("pard",), "pard2": ("pard",)}


def data_methods(engine_method: str, parallel: bool = False) -> tuple[str, ...]:
    """The data's method names a vLLM ``speculative_config.method`` can be; ``parallel``:
    the config's ``parallel_drafting`` is true, which makes a ``draft_model`` PARD (vLLM runs
    PARD as a draft model drafting in one pass: vllm-project/vllm PR #32887), no sequential
    draft model.

    >>> data_methods("eagle3"), data_methods("qwen3_next_mtp"), data_methods("dflash")
    (('eagle3',), ('mtp',), ('dflash', 'ddtree'))
    >>> data_methods("mlp_speculator"), data_methods("draft_model", parallel=True)
    (('mlp-speculator',), ('pard',))
    """
    name = engine_method.strip().lower()
    if name.endswith("_mtp"):
        name = "mtp"
    if parallel and name == "draft_model":
        name = "pard"
    return _VLLM_METHODS.get(name, (name.replace("_", "-"),))

"""The question a fit is asked when none is given (``predict`` without configuration flags,
``optimize``, ``next``, the report's answer line, fan, variance shares and breakdown).

The bundled :data:`~ddtree_bayes.core.config.DEFAULT_QUESTION` (8x B300, DDTree block 16,
budget 32, SGLang and native) is the Kimi K2.6 question the bundled data was collected for.
A fit that measured B300 for the model asked about keeps it unchanged. A fit that never did
(another team's GPU or model) would answer it only by hardware transfer or the card roofline,
so it is asked its own most-measured configuration instead:

- the system (hardware, GPU count) with the most speculative rows of that model (ties: the
  system that comes first in the data file);
- there, the speculative method with the most rows (ties: first in the file);
- the engines that measured that method there, most rows first (ties: first in the file), at
  most two;
- that method's largest configuration the first of those engines measured there, of its
  rows that name no drafter if it has any (the default drafter's, which the question asks):
  the most verify tokens, then the largest block, then the largest budget (the deepest draft
  the fit has seen, where a prediction is an interpolation and speculative decoding matters
  most). Over every engine's rows, Llama-3.1-8B on one H100 asked vLLM at SGLang's only tree
  (M = 9) at SGLang's acceptance 5.39, where vLLM's deepest chain measured 3.54.

Its acceptance for one-number answers (the report's answer line, the tracked default query)
is ``predict``'s measured acceptance of that configuration (``core/data.measured_accept``):
the mean of its rows in its first engine, else in every engine on its system, else on other
systems, within [1, M] (M: its verify tokens), or the middle of [1, M] when no row gives one,
every digit of it, rounded only where it is shown as text (``core/data.accept_shown``: a
label reads 2.79, the question asks 2.7866667). Rounded to 2 decimals, the tracked default,
the report's answer line and its ``next`` asked 1.94 where ``predict`` asked the rows'
1.9375 (123.81 against 123.65 tok/s). With the fit at hand,
:func:`ddtree_bayes.engine.question.inferred_accept` puts the acceptance the fit inferred from
the configuration's rows without accept_len before the other systems' mean and that middle,
as predict does. It was rounded to a whole number once, for the report's
whole-number fan grid: a chain measured at 2.79 was answered at 3 (+7.5%) where ``predict``
used 2.79 (and it was a median across engines, where predict takes its engine's mean); the fan
now adds the acceptance to its grid (workflows/report/sections.py ``fan_accept``).

A question that names a measured system other than that one (``--hardware``, with ``--gpus``
or its one measured GPU count) is completed from that system's own rows first
(:func:`system_default`): the same rules on its rows, narrowed to the method and engines
asked; the fit's default filled the engine from another system (llama.cpp, measured on an RTX
5090, for two RTX 3090s that measured vLLM).

A model whose rows are all autoregressive (no drafter measured) is asked the bundled
question's method, block and budget on its own most-measured system (most rows; ties: first in
the file), in the engines that measured it there (most rows first, at most two), and ``why``
says so. A model with no rows at all keeps the bundled default (nothing of it was measured).
numpy-free, standard library only.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping

from ddtree_bayes.core.config import DEFAULT_QUESTION, DefaultQuestion
from ddtree_bayes.core.data import Measurement, derive_verify_tokens, measured_accept
from ddtree_bayes.core.methods import MethodSpec

#: At most this many engines in a derived default (the bundled one has two).
MAX_ENGINES = 2
#: Where ``why`` of a model measured autoregressive only goes on to say that the method and
#: shape are the bundled question's (a question that names its method drops it).
NO_SPECULATIVE = ", nor any speculative method"


def _most_common[K](keys: list[K]) -> K:
    """The most frequent key; ties go to the key seen first (``keys`` in file order)."""
    counts = Counter(keys)   # insertion-ordered: first seen first
    return max(counts, key=lambda k: counts[k])   # max keeps the first of equal counts


def keeps_bundled(measured: Iterable[tuple[str | None, str]], model: str | None = None) -> bool:
    """Whether a fit that measured these ``(model, hardware)`` keeps the bundled question for
    ``model`` (None: any model, as for a fit of one model): it measured the bundled question's
    hardware for that model.

    >>> keeps_bundled([("kimi-k2.6", "b300")]), keeps_bundled([("qwen3-8b", "b300")], "kimi-k2.6")
    (True, False)
    """
    return any(hw == DEFAULT_QUESTION.hardware and (model is None or m == model)
               for m, hw in measured)


def fit_default(rows: Iterable[Measurement], model: str | None = None,
                methods: Mapping[str, MethodSpec] | None = None) -> DefaultQuestion:
    """The default question of a fit made on ``rows`` (``model``: the model asked about; None
    takes every row, as for a fit of one model; ``methods``: the fit's ``[methods]`` table,
    None: the bundled one). See the module docstring for the rules.

    >>> from ddtree_bayes.core.data import Measurement
    >>> def row(i, hw, method, block=None, budget=None, engine="vllm", gpus=1):
    ...     verify = derive_verify_tokens(method, block, budget)
    ...     return Measurement(i, "m", hw, gpus, engine, method, block, budget, verify, None,
    ...                        None, 100.0, "test", "")
    >>> d = fit_default([row(2, "h100", "ar"), row(3, "h100", "eagle3", 3),
    ...                  row(4, "h100", "eagle3", 5)])
    >>> d.describe(), d.why, d.accept   # no measured acceptance: the middle of [1, 6]
    ('vllm eagle3 block 5 on h100 x1', 'the fit never measured b300', 3.5)
    >>> fit_default([row(2, "b300", "ar", gpus=8), row(3, "h100", "eagle3", 3)]) is DEFAULT_QUESTION
    True
    """
    d = DEFAULT_QUESTION
    mine = sorted((r for r in rows if model is None or r.model == model), key=lambda r: r.row)
    if keeps_bundled((r.model, r.hardware) for r in mine):
        return d
    spec = [r for r in mine if r.is_speculative]
    why = f"the fit never measured {d.hardware}" + (f" for {model}" if model is not None else "")
    if not spec and mine:   # its own system and engines; the bundled method and shape
        hardware, gpus = _most_common([(r.hardware, r.gpus) for r in mine])
        counts = Counter(r.engine for r in mine if (r.hardware, r.gpus) == (hardware, gpus))
        return dataclasses.replace(
            d, hardware=hardware, gpus=gpus,
            engines=tuple(sorted(counts, key=lambda e: -counts[e])[:MAX_ENGINES]),
            why=f"{why}{NO_SPECULATIVE}" + (" for it" if model is not None else "")
                + f": the bundled question's {d.method} block {d.block} budget {d.budget}")
    if not spec:
        return d
    hardware, gpus = _most_common([(r.hardware, r.gpus) for r in spec])
    return _configuration(mine, [r for r in spec if (r.hardware, r.gpus) == (hardware, gpus)],
                          why, methods)


def _configuration(mine: list[Measurement], there: list[Measurement], why: str,
                   methods: Mapping[str, MethodSpec] | None) -> DefaultQuestion:
    """The most-measured speculative configuration of ``there`` (speculative rows of one
    system; ``mine``: every row of the model, for its measured acceptance), read with the
    fit's ``methods`` table, as predict reads it (the bundled one left mtp,4,,5 of a fit whose
    MTP has ``depth = "block - 1"`` to be derived, and predict derived 3 + 1 = 4)."""
    hardware, gpus = there[0].hardware, there[0].gpus
    method = _most_common([r.method for r in there])
    there = [r for r in there if r.method == method]
    counts = Counter(r.engine for r in there)
    engines = tuple(sorted(counts, key=lambda e: -counts[e])[:MAX_ENGINES])  # stable: file order
    # the first engine's own largest configuration (another engine's deeper tree was asked of
    # it at that engine's acceptance), of the default drafter's rows if it has any (the
    # question asks the default drafter; a named drafter's rows keep their own acceptance)
    own = [r for r in there if r.engine == engines[0]]
    own = [r for r in own if r.drafter is None] or own
    top = max(own, key=lambda r: (r.verify_tokens, r.block or 0, r.budget or 0))
    verify = (None if derive_verify_tokens(method, top.block, top.budget, methods)
              == top.verify_tokens
              else top.verify_tokens)
    # predict's measured acceptance of it in the first engine (core/data.measured_accept: its
    # own rows there, else the system's, else other systems'); none: the middle of [1, M]
    found = measured_accept(mine, model=None, method=method, block=top.block,
                            budget=top.budget, verify_tokens=top.verify_tokens,
                            hardware=hardware, gpus=gpus, engine=engines[0], methods=methods)
    accept = (statistics.fmean(r.accept_len for r in found[0] if r.accept_len is not None)
              if found else (1 + top.verify_tokens) / 2)
    return DefaultQuestion(hardware=hardware, method=method, block=top.block, budget=top.budget,
                    engines=engines, gpus=gpus, verify_tokens=verify,
                    accept=float(min(max(accept, 1), top.verify_tokens)), why=why)


def system_default(rows: Iterable[Measurement], hardware: str, gpus: int,
                   base: DefaultQuestion, model: str | None = None, *, method: str | None = None,
                   engines: Iterable[str] = (), methods: Mapping[str, MethodSpec] | None = None
                   ) -> DefaultQuestion | None:
    """The default question of one asked system (``hardware`` x ``gpus``, of ``model``; None:
    every row) that has measurements: the flags not given come from its own rows before any
    other system's (``base``: the fit's default question, :func:`fit_default`, which is
    another system's). None when the system has no row. The bundled question when the system
    is its own (a fit that measured B300 keeps it, as :func:`fit_default` does). Its rows are
    narrowed to the ``method`` and ``engines`` asked, where it measured them; then, as
    :func:`fit_default` does for the fit: its most-measured speculative method, the engines
    that measured it (most rows first, at most two) and its largest configuration; a system
    measured autoregressive only (or asked ``--method ar``) gives its engines, and
    ``base``'s method and shape.

    >>> from ddtree_bayes.core.data import Measurement
    >>> def row(i, hw, gpus, engine, method, block=None):
    ...     verify = derive_verify_tokens(method, block, block)
    ...     return Measurement(i, "m", hw, gpus, engine, method, block, block, verify,
    ...                        None if block is None else 1.9, None, 100.0, "test", "")
    >>> rows = [row(2, "rtx-5090", 1, "llama.cpp", "mtp", b) for b in (1, 2, 3)] + [
    ...         row(5, "rtx-3090", 2, "vllm", "mtp", 1), row(6, "rtx-3090", 2, "vllm", "ar")]
    >>> base = fit_default(rows)
    >>> base.describe()
    'llama.cpp mtp block 3 budget 3 on rtx-5090 x1'
    >>> d = system_default(rows, "rtx-3090", 2, base)
    >>> d.describe(), d.why
    ('vllm mtp block 1 budget 1 on rtx-3090 x2', 'rtx-3090 x2 has measurements')
    >>> system_default(rows, "rtx-3090", 1, base) is None   # (another GPU count)
    True
    """
    mine = sorted((r for r in rows if model is None or r.model == model), key=lambda r: r.row)
    there = [r for r in mine if (r.hardware, r.gpus) == (hardware, gpus)]
    if not there:
        return None
    if keeps_bundled((r.model, r.hardware) for r in there):
        return DEFAULT_QUESTION
    why = f"{hardware} x{gpus} has measurements" + (f" of {model}" if model is not None else "")
    engines = set(engines)
    for keep in (lambda r: r.method == method, lambda r: r.engine in engines):
        narrowed = [r for r in there if keep(r)]
        there = narrowed or there
    spec = [r for r in there if r.is_speculative]
    if spec:
        return _configuration(mine, spec, why, methods)
    counts = Counter(r.engine for r in there)
    return dataclasses.replace(base, hardware=hardware, gpus=gpus,
                               engines=tuple(sorted(counts, key=lambda e: -counts[e])[:MAX_ENGINES]),
                               why=why)

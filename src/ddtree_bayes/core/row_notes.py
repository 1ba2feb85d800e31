"""What a kept measurement row claims that no deployment of its card does, or that the rows
beside it contradict: the warnings ``add`` gives a new row and ``fit`` gives every row of its
file (a row typed in by hand). Warnings, not refusals: the rows ``add`` and ``fit`` refuse
(core/data ``weights_problem``, ``kv_cache_problem``; core/pairs ``impossible_step``) are
refused there. numpy and the standard library only.

Each function returns the line(s) without the row; the caller names it (``add``: ``row N: ``,
``fit``: ``<file>, row N: ``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence

from ddtree_bayes.core.data import Measurement, config_label, counted, node_gpus, plain_text
from ddtree_bayes.core.methods import AR_METHOD
from ddtree_bayes.core.pairs import read_features


def weights_read_ms(card, hardware_row: dict[str, str], gpus: int) -> float | None:
    """Reading ``card``'s active weights once at the full memory bandwidth of ``gpus`` GPUs
    of ``hardware_row`` (ms, at the card's bytes per weight): the floor no decoding step goes
    below. None when the row has no bandwidth. A fit's step (engine/scenario
    ``read_floor_warning``) and a measured row's (:func:`physics_notes`) are held against it.

    >>> from ddtree_bayes.core.model_cards import ModelCard
    >>> card = ModelCard("m", 8, 8, 32, None, None, 2, "bf16", "s")
    >>> weights_read_ms(card, {"hardware": "h", "mem_bw_tb_s": "4", "interconnect": "x"}, 1)
    4.0
    """
    f = read_features(card, hardware_row, gpus)
    return None if f is None else f.stream_ms


def read_floor_text(card, read_ms: float) -> str:
    """``reading kimi-k2.6's active weights at the full bandwidth (0.417 ms, 0.5 bytes per
    weight)``: what engine/scenario ``read_floor_warning`` and :func:`physics_notes` say a
    step is shorter than."""
    return (f"reading {card.model}'s active weights at the full bandwidth ({read_ms:.3g} ms, "
            f"{card.bytes_per_weight:g} bytes per weight)")


def context_above_max(card, context_tokens: float) -> str | None:
    """One line when ``context_tokens`` is longer than ``card``'s model takes (its
    ``max_context_tokens``: the config's ``max_position_embeddings``, scaled RoPE included);
    None when it is not, or the card does not say. engine/scenario ``max_context_warning`` (a
    question) and :func:`physics_notes` (a measured row) say it."""
    if card is None or not card.max_context_tokens or context_tokens <= card.max_context_tokens:
        return None
    return (f"context {context_tokens:.0f} is above {card.model}'s longest, "
            f"{card.max_context_tokens} tokens (max_position_embeddings, its card): the model "
            "takes no such context unless its RoPE is scaled further")


def step_reach(context_tokens: float | None, verify_tokens: int | None) -> float:
    """The last position a step's ``verify_tokens`` (M; None: 1) take after a context of
    ``context_tokens`` (None: 0): context + M - 1, the context itself for AR. What
    :func:`step_reach_above_max`, ``next``'s longest-context candidates and ``optimize``'s
    line on the budgets past the card count.

    >>> step_reach(262130, 65), step_reach(0, 300001), step_reach(307200, None)
    (262194, 300000, 307200)
    """
    return (context_tokens or 0) + (verify_tokens or 1) - 1


def past_longest(card) -> str:
    """``above kimi-k2.6's longest, 262144 tokens (its card): no engine runs such a step``:
    how a step whose verified tokens reach past ``card``'s longest context is told."""
    return (f"above {card.model}'s longest, {card.max_context_tokens} tokens (its card): no "
            "engine runs such a step")


def step_reach_above_max(card, context_tokens: float, verify_tokens: int | None) -> str | None:
    """One line when a step's verified tokens, which take the positions after the context,
    reach past ``card``'s longest context (a tree of budget 500,000 on a 262,144-token model
    at context 0 reaches position 500,000): no engine runs such a step. None when they do
    not (AR, M = 1, is :func:`context_above_max`'s case), or the card does not say.
    engine/scenario ``max_context_warning`` (a question) and ``next``'s candidates say it."""
    reach = step_reach(context_tokens, verify_tokens)
    if card is None or not card.max_context_tokens or reach <= card.max_context_tokens:
        return None
    return (f"a step verifies {verify_tokens} tokens after a context of "
            f"{context_tokens:.0f}, reaching position {reach:.0f}, {past_longest(card)}")


def card_weights_note(card, hardware: dict[str, dict[str, str]], m: Measurement) -> str | None:
    """A row :func:`~ddtree_bayes.core.data.weights_problem` keeps whose GPUs cannot hold the
    weights at its card's own bytes per weight: the run used a smaller quantisation, but a fit
    prices the card's bytes (a 61 GB bf16 card measured on one 16 GB GPU taught the fit that
    pair's efficiency from 61 GB).
    The warning line (without its row), or None when they fit or cannot be checked."""
    from ddtree_bayes.core.data import gb_texts, table_memory_gb

    memory = table_memory_gb(hardware, m.hardware)
    if card is None or memory is None or card.weights_gb <= memory * m.gpus:
        return None
    need, have = gb_texts(card.weights_gb, memory * m.gpus)   # (16 GB against 16 GB: apart)
    # (a slip in the GPU count first: an FP8 card's serving file imported with --gpus 1 for
    # its 4 GPUs was told only "a smaller quantisation", which the file's FP8 name denied)
    return (f"{m.model}'s card puts its weights at {need} GB "
            f"({card.params_total_b:g}B parameters at {card.weights_bytes_per_weight:g} bytes), "
            f"more than {m.gpus} x {m.hardware} hold ({have} GB): the run used more GPUs than "
            f"the row says (the card's bytes take at least "
            f"{math.ceil(card.weights_gb / memory)} {m.hardware}), or a smaller quantisation, "
            "but a fit prices the card's bytes; check the GPU count, or give that "
            "quantisation its own card (`card add --gguf FILE`, or --bytes-per-weight) and "
            "name it with --model")


def physics_notes(card, hardware: dict[str, dict[str, str]], m: Measurement,
                  read_floor: bool = True, default_context: float = 0.0) -> list[str]:
    """What a kept row claims that no deployment of its card does, one line each (without its
    row): more GPUs than one node holds (:func:`~ddtree_bayes.core.data.node_gpus`: priced as
    one group on one interconnect, whatever the card), a step shorter than reading the card's
    active weights once at the GPUs' full bandwidth (:func:`weights_read_ms`, the floor
    predict's ``read_floor_warning`` holds a fit to), and a context longer than the model
    takes (:func:`context_above_max`, as predict's ``max_context_warning``). Warnings, not
    refusals: a deployment quantised below the card's bytes reads less, one with its RoPE
    scaled further takes a longer context. ``read_floor`` False leaves the read floor out (the
    card's weights do not fit the GPUs: its bytes are not the run's, :func:`card_weights_note`
    says so). A blank context is the priors' ``default_context``, as the fit reads it
    (:meth:`Measurement.context`)."""
    node = node_gpus(m.hardware)
    notes = [] if m.gpus <= node else [   # (predict says it of such a question never measured)
        f"{m.gpus} x {m.hardware} is more GPUs than one node holds ({node}): kept, but a fit "
        "prices them as one tensor-parallel group on one interconnect, reading together, "
        "where across nodes the all-reduces cross the network, which the step model does not "
        "price; else check --gpus"]
    if card is None:
        return notes
    step = m.step_ms
    read = (None if not read_floor or step is None or m.hardware not in hardware
            else weights_read_ms(card, hardware[m.hardware], m.gpus))
    if step is not None and read is not None and step < read:
        notes.append(f"step {step:.3g} ms is shorter than {read_floor_text(card, read)} on "
                     f"{m.gpus} x {m.hardware}: kept, as a deployment quantised below the card's "
                     "bytes reads less (give it its own card, `card add --gguf FILE` or "
                     "--bytes-per-weight, and name it with --model); else check --tok-s (with "
                     "--concurrency, the streams' total), --accept and --gpus")
    above = context_above_max(card, m.context(default_context))
    if above is not None:
        notes.append(above + ": kept, as a deployment that scales it so takes it; else check "
                             "--context (tokens, not characters or bytes)")
    return notes


def context_text(m: Measurement) -> str:
    """A row's context as the notes name it: ``16384``, or ``blank (the default)``."""
    return "blank (the default)" if m.context_tokens is None else plain_text(m.context_tokens)


#: A speculative step this much shorter than an autoregressive step of the same model,
#: system, engine and concurrency, at a context as short or shorter, is said
#: (:func:`cross_row_notes`): it verifies several tokens and runs the drafter, so on one
#: deployment it never takes less time; the public sweeps' points scatter 0.4-5.8% about
#: their curves (docs/validation.md), so 10% is beyond two runs' scatter.
SPEC_STEP_BELOW_AR = 0.9
#: Contexts that far apart, counted in KV tokens a step reads (C streams' each: C x the gap),
#: count as one there: 4096 tokens of KV cache read add a few % to a step (Llama-3.1-8B's
#: 128 KB a token, 0.5 GB beside 16 GB of bf16 weights: 3%; the GQA and MLA cards less),
#: well within SPEC_STEP_BELOW_AR (a sweep's "blank" and "500-token" prompts are one context
#: at C = 1; at C = 16 a gap of 256 tokens is; 16 x 4096 tokens would be +54% for that 8B).
CONTEXT_SLACK_TOKENS = 4096.0


def _deployments_text(m: Measurement) -> str:
    """What :func:`cross_row_notes` says of a speculative step shorter than an AR one."""
    return (f"a speculative step verifies {m.verify_tokens} tokens and runs the drafter, never "
            "in less time than one token's step on the same deployment: two deployments under "
            "one name (a power limit, another quantisation or engine version)? give one its own "
            f"GPU name (`ddtree-bayes hardware add NAME --like {m.hardware}`) or model card; "
            "else check accept_len and tok_s")


def _level(m: Measurement, same: list[Measurement], default_context: float
           ) -> tuple[float, float, list[Measurement]]:
    """What the step checks of ``m`` compare it at: its context (a blank one the priors'
    ``default_context``, as the fit reads it), the slack :data:`CONTEXT_SLACK_TOKENS` / C
    (each of its C streams reads its own context) and the rows of ``same`` at its concurrency
    with a measured step."""
    ctx, slack = m.context(default_context), CONTEXT_SLACK_TOKENS / m.concurrency
    return ctx, slack, [r for r in same if r.concurrency == m.concurrency
                        and r.step_ms is not None]


def _spec_shorter_than_ar(m: Measurement, same: list[Measurement], both_ways: bool,
                          default_context: float) -> str | None:
    """The line :func:`cross_row_notes` says of a speculative step more than
    :data:`SPEC_STEP_BELOW_AR` below an AR step (``m`` speculative: against the AR rows at a
    context as short or shorter, the longest step; ``m`` AR, with ``both_ways``: against the
    speculative rows at a context as long or longer, the shortest step; "shorter" by up to
    :data:`CONTEXT_SLACK_TOKENS` KV tokens a step: that / C tokens of context at C streams).
    A blank context is the priors' ``default_context``, as the fit reads it."""
    if m.step_ms is None:
        return None
    ctx, slack, level = _level(m, same, default_context)
    where = f"{m.model} {m.system} {m.engine}"
    if m.is_speculative:
        spec: Measurement | None = m
        ar = max((r for r in level if r.method == AR_METHOD
                  and r.context(default_context) <= ctx + slack),
                 key=lambda r: r.step_ms or 0.0, default=None)
    elif both_ways:
        ar = m
        spec = min((r for r in level if r.is_speculative
                    and r.context(default_context) + slack >= ctx),
                   key=lambda r: r.step_ms or 0.0, default=None)
    else:
        return None
    if (spec is None or ar is None or spec.step_ms is None or ar.step_ms is None
            or spec.step_ms >= SPEC_STEP_BELOW_AR * ar.step_ms):
        return None
    shorter = f"{1 - spec.step_ms / ar.step_ms:.1%} shorter"
    if spec is m:
        return (f"{m.method}'s step, {m.step_ms:.3g} ms ({m.tok_s:g} tok/s at accept_len "
                f"{m.accept_len:g}), is {shorter} than ar's {ar.step_ms:.3g} ms (row {ar.row}: "
                f"{ar.tok_s:g} tok/s; {where}, context {context_text(ar)}): "
                f"{_deployments_text(m)}")
    return (f"ar's step, {m.step_ms:.3g} ms ({m.tok_s:g} tok/s), is longer than {spec.method}'s "
            f"{spec.step_ms:.3g} ms (row {spec.row}: {spec.tok_s:g} tok/s at accept_len "
            f"{spec.accept_len:g}; {where}, context {context_text(spec)}): {spec.method}'s step "
            f"is {shorter}, yet {_deployments_text(spec)}")


#: A step that verifies k times the tokens of another of the same model, system, engine,
#: concurrency and context costs at most about k times as much (each verified token no dearer
#: than the first: the weights, experts and KV are read once a step; a drafter's passes are
#: lighter than the target's); more than this multiple of k is said (:func:`cross_row_notes`):
#: a hybrid target leaving vLLM's CUDA-graph path took 2.6x the AR step at 2x the tokens.
STEP_GROWTH_LIMIT = 2.0


def _step_growth(m: Measurement, same: list[Measurement], both_ways: bool,
                 default_context: float) -> str | None:
    """The line :func:`cross_row_notes` says of two rows whose steps grow more than
    :data:`STEP_GROWTH_LIMIT` x the ratio of their verified tokens (``m`` the one verifying
    more: against the rows verifying fewer; with ``both_ways`` also ``m`` the one verifying
    fewer), at one concurrency and a context within :data:`CONTEXT_SLACK_TOKENS` / C, the
    pair furthest past it."""
    if m.step_ms is None:
        return None
    ctx, slack, level = _level(m, same, default_context)
    level = [r for r in level if abs(r.context(default_context) - ctx) <= slack]
    pairs = [(r, m) for r in level if r.verify_tokens < m.verify_tokens]
    if both_ways:
        pairs += [(m, r) for r in level if r.verify_tokens > m.verify_tokens]

    def past(pair: tuple[Measurement, Measurement]) -> float:
        small, big = pair
        return (big.step_ms or 0.0) / (small.step_ms or 1.0) / (big.verify_tokens
                                                                / small.verify_tokens)

    worst = max(pairs, key=past, default=None)
    if worst is None or past(worst) <= STEP_GROWTH_LIMIT:
        return None
    small, big = worst
    other = small if big is m else big
    assert small.step_ms is not None and big.step_ms is not None

    def said(r: Measurement) -> str:
        return (f"{r.method} at M = {r.verify_tokens}, {r.step_ms:.3g} ms ({r.tok_s:g} tok/s at "
                f"accept_len {r.accept_len:g})")

    return (f"{said(m)} against row {other.row}'s {said(other)} ({m.model} {m.system} "
            f"{m.engine}): the step grows {big.step_ms / small.step_ms:.3g}x for "
            f"{big.verify_tokens / small.verify_tokens:.3g}x the verified tokens, more than "
            f"{STEP_GROWTH_LIMIT:g}x what verifying more tokens costs (each no dearer than the "
            "first): check tok_s (with concurrency, the streams' total) and accept_len")


#: A total at C streams this far below the total of the same configuration at fewer streams
#: (per accepted token), at a context as short or shorter, is said (:func:`cross_row_notes`):
#: the C streams share each step's weight read, so decoding them together never yields fewer
#: tokens a second than decoding fewer (a step at C takes at most C / C' times the step at C');
#: 10% is beyond two runs' scatter (0.4-5.8% about the public sweeps' curves), as
#: :data:`SPEC_STEP_BELOW_AR`.
TOTAL_BELOW_FEWER_STREAMS = 0.9


def _same_shape(a: Measurement, b: Measurement) -> bool:
    """Do rows ``a`` and ``b`` (of one model, system and engine) run the same configuration
    but for their concurrency and context, each with its acceptance measured or both without?
    (Two rows that leave accept_len blank share one inferred acceptance in the fit,
    core/acceptance_latent.py, as runs of one drafter on one target emit alike whatever the
    streams beside them: their tok/s compare as they are. One measured beside one blank leaves
    the other's tok/s per accepted token unknown: not compared.)"""
    return ((a.accept_len is None) == (b.accept_len is None)
            and (a.method, a.block, a.budget, a.verify_tokens, a.drafter)
            == (b.method, b.block, b.budget, b.verify_tokens, b.drafter))


def _accept_text(a: Measurement, b: Measurement) -> str:
    """``accept_len 1.948``, ``accept_len 1.9 and 2.1`` or, both blank, ``accept_len blank
    (inferred by the fit)``: the acceptance two rows of one configuration ran at."""
    if a.accept_len is None or b.accept_len is None:
        return "accept_len blank (inferred by the fit)"
    if a.accept_len == b.accept_len:
        return f"accept_len {a.accept_len:g}"
    return f"accept_len {a.accept_len:g} and {b.accept_len:g}"


def _furthest_below(m: Measurement, same: list[Measurement], both_ways: bool,
                    slower_than: Callable[[Measurement, Measurement], bool], limit: float
                    ) -> tuple[Measurement, Measurement] | None:
    """The pair (slower, faster) of ``m`` and a row of ``same`` that ``slower_than(slower,
    faster)`` says should not be slower (``m`` the first; with ``both_ways`` either), whose
    tok/s per accepted token (core/likelihood ``run_rate``) is furthest below, when it is
    below ``limit`` x the other's; else None. What :func:`_fewer_streams` and
    :func:`_longer_context` say."""
    from ddtree_bayes.core.likelihood import run_rate

    pairs = [(m, r) for r in same if slower_than(m, r)]
    if both_ways:
        pairs += [(r, m) for r in same if slower_than(r, m)]
    worst = min(pairs, key=lambda p: run_rate(p[0]) / run_rate(p[1]), default=None)
    if worst is None or run_rate(worst[0]) >= limit * run_rate(worst[1]):
        return None
    return worst


def _how_far_below(slow: Measurement, fast: Measurement) -> tuple[str, str]:
    """("12.3% below", its qualifier): how far ``slow``'s tok/s per accepted token
    (core/likelihood ``run_rate``) is below ``fast``'s, and " (per accepted token)" when
    their accept_len differ ("" when equal), as :func:`_fewer_streams` and
    :func:`_longer_context` say a pair of :func:`_furthest_below`."""
    from ddtree_bayes.core.likelihood import run_rate

    per = "" if slow.accept_len == fast.accept_len else " (per accepted token)"
    return f"{1 - run_rate(slow) / run_rate(fast):.1%} below", per


def _shape_text(many: Measurement, few: Measurement, context_of) -> str:
    """``kimi-k2.6 rtx-pro-6000x8 vllm eagle3 M=4 at accept_len 1.948, context 0``: the
    configuration two rows share, as :func:`_fewer_streams` says it."""
    accept = f" at {_accept_text(many, few)}"
    ctx = (context_text(many) if context_of(many) == context_of(few)
           else f"{context_text(many)} and {context_text(few)}")
    return (f"{many.model} {many.system} {many.engine} {many.method} M={many.verify_tokens}"
            f"{accept}, context {ctx}")


def _fewer_streams(m: Measurement, same: list[Measurement], both_ways: bool,
                   default_context: float) -> str | None:
    """The line :func:`cross_row_notes` says of a total at C streams more than
    :data:`TOTAL_BELOW_FEWER_STREAMS` below (per accepted token) a row of the same
    configuration at fewer streams and a context as long or longer (by up to
    :data:`CONTEXT_SLACK_TOKENS` / C: the C streams' KV read): one stream's tok/s typed as the
    C streams' total. ``m`` the row at more streams; with ``both_ways`` also ``m`` the row at
    fewer. The pair furthest below."""
    def ctx(r: Measurement) -> float:
        return r.context(default_context)

    def below(many: Measurement, few: Measurement) -> bool:
        return (many.concurrency > few.concurrency and _same_shape(many, few)
                and ctx(many) <= ctx(few) + CONTEXT_SLACK_TOKENS / many.concurrency)

    worst = _furthest_below(m, same, both_ways, below, TOTAL_BELOW_FEWER_STREAMS)
    if worst is None:
        return None
    many, few = worst
    short, per = _how_far_below(many, few)
    streams = counted(few.concurrency, "stream")
    said = (f"{many.tok_s:g} tok/s for {many.concurrency} streams is {short} row {few.row}'s "
            f"{few.tok_s:g} tok/s for {streams}" if many is m else
            f"row {many.row}'s {many.tok_s:g} tok/s for {many.concurrency} streams is {short} "
            f"this row's {few.tok_s:g} tok/s for {streams}")
    return (f"{said}{per} of the same configuration ({_shape_text(many, few, ctx)}): decoding "
            "more streams together never yields fewer tokens a second (the weights are read "
            "once a step for all of them): was one stream's tok/s typed as the total? (tok_s "
            f"at concurrency C is the C streams' total){_queued(many)}")


#: A row this far below (per accepted token) a row of the same configuration and concurrency
#: at a longer context (by more than :data:`CONTEXT_SLACK_TOKENS` / C) is said
#: (:func:`cross_row_notes`): a longer context only adds KV cache to read, so no step is
#: faster for it; 10% is beyond two runs' scatter, as :data:`SPEC_STEP_BELOW_AR`.
SLOWER_AT_SHORTER_CONTEXT = 0.9


def _longer_context(m: Measurement, same: list[Measurement], both_ways: bool,
                    default_context: float) -> str | None:
    """The line :func:`cross_row_notes` says of a row more than
    :data:`SLOWER_AT_SHORTER_CONTEXT` below (per accepted token) a row of the same
    configuration and concurrency at a context longer by more than
    :data:`CONTEXT_SLACK_TOKENS` / C: a context typed in thousands (``64`` for 64k), a prompt
    alone, or a tok/s slip. ``m`` the row at the shorter context; with ``both_ways`` also
    ``m`` the row at the longer one: the hint then names the other row's context_tokens and
    tok_s (its flags read as this row's). The pair furthest below. A blank context is
    ``default_context``, as the fit reads it."""
    def ctx(r: Measurement) -> float:
        return r.context(default_context)

    def shorter(short: Measurement, long: Measurement) -> bool:
        return (short.concurrency == long.concurrency and _same_shape(short, long)
                and ctx(short) + CONTEXT_SLACK_TOKENS / short.concurrency < ctx(long))

    worst = _furthest_below(m, same, both_ways, shorter, SLOWER_AT_SHORTER_CONTEXT)
    if worst is None:
        return None
    short, long = worst
    below, per = _how_far_below(short, long)
    said = (f"{short.tok_s:g} tok/s at context {context_text(short)} is {below} row "
            f"{long.row}'s {long.tok_s:g} tok/s at context {context_text(long)}" if short is m
            else f"row {short.row}'s {short.tok_s:g} tok/s at context {context_text(short)} is "
                 f"{below} this row's {long.tok_s:g} tok/s at context {context_text(long)}")
    accept = _accept_text(short, long)
    streams = counted(short.concurrency, "stream")
    typed = ctx(short)
    thousands = (f" typed in thousands ({typed:g} for {typed * 1024:g} tokens) or"
                 if 0 < typed < 1024 else "")
    # the hint is of the row at the shorter context: this row's flags, or, when this row is
    # the longer one (add), the other row's columns ("was --context typed in thousands" read
    # as this row's 131072 when the 64 was row 11's)
    hint = (f"was --context{thousands} the prompt alone?" if short is m
            else f"was row {short.row}'s context_tokens{thousands} its prompt alone?")
    check = ("--tok-s" if short is m else f"row {short.row}'s tok_s or this row's --tok-s")
    return (f"{said}{per} of the same configuration ({short.model} {short.system} "
            f"{short.engine} {short.method} M={short.verify_tokens} at {accept}, {streams}): a "
            f"longer context only adds KV cache to read, never a faster step: {hint} (the mean "
            "KV length a decode step reads, in tokens: the prompt plus half the answer)"
            f"{_queued(short)} else check {check}")


def _queued(m: Measurement) -> str:
    """What :func:`_fewer_streams` and :func:`_longer_context` add of a row at C > 1 streams:
    a KV cache that holds fewer than C streams makes the engine queue the rest, so fewer than
    C decode together and the total falls (the public sweeps' C = 128 rows at 32k-128k, their
    notes' queue_fraction 0.77-0.81); "" at one stream."""
    if m.concurrency == 1:
        return ""
    return (f"; or did the KV cache hold fewer than {m.concurrency} streams (the engine queues "
            "the rest: fewer decode together)?")


def cross_row_notes(m: Measurement, rows: Iterable[Measurement], repeats: bool = True,
                    both_ways: bool = True, default_context: float = 0.0) -> list[str]:
    """What row ``m`` claims beside ``rows`` (``add``: the file's and this batch's earlier
    ones; ``fit``: every other row of the file), one line each (without its row), naming the
    row it disagrees with. Warnings, not refusals (any one may be the slip):

    - at concurrency C > 1, a total below one stream's autoregressive tok/s of the same model,
      system and engine at a context as long or longer, the nearest (one stream's tok/s typed
      as the total); a blank context is ``default_context`` in this and every check below;
    - a total at C streams more than :data:`TOTAL_BELOW_FEWER_STREAMS` below (per accepted
      token) a row of the same configuration at fewer streams and a context as long or longer
      (one stream's tok/s typed as the total, where the first check finds no AR row above it);
      with ``both_ways`` also said of the row at fewer streams;
    - a row more than :data:`SLOWER_AT_SHORTER_CONTEXT` below (per accepted token) a row of
      the same configuration and concurrency at a context longer by more than
      :data:`CONTEXT_SLACK_TOKENS` / C (a context typed in thousands, or the prompt alone);
      said of the row at the shorter context (``both_ways``: of whichever is ``m``);
    - a speculative row at accept_len 1 (one token a step, each dearer than autoregressive
      decoding's) faster than autoregressive decoding of the same model, system, engine and
      concurrency at a context as short or shorter (an acceptance rate typed as the length);
    - a speculative step (accept_len x C / tok_s) more than :data:`SPEC_STEP_BELOW_AR` below
      an autoregressive step of the same model, system, engine and concurrency at a context
      as short or shorter (by up to :data:`CONTEXT_SLACK_TOKENS` / C: two deployments under one
      name); with ``both_ways`` also said of
      an autoregressive ``m`` against the speculative rows (``add``; ``fit`` says it once,
      of the speculative row); a blank context is ``default_context`` here;
    - a step more than :data:`STEP_GROWTH_LIMIT` x the ratio of verified tokens longer than a
      row's of the same model, system, engine and concurrency at about the context (a unit or
      entry slip: 61.2 for 612 tok/s); said of the row verifying more (``both_ways``: of
      whichever is ``m``);
    - "the same configuration" in the fewer-streams and longer-context checks: both rows with
      accept_len (compared
      per accepted token), or both without (one acceptance the fit infers for both: compared
      as they are); at C > 1 each also asks whether the KV cache held the C streams;
    - with ``repeats``, a run more than ``REPEAT_SPREAD`` off a run of the same configuration
      (its tok/s per accepted token, core/likelihood ``run_rate``): a fit reads it as every
      configuration's scatter (``fit`` says it per configuration, core/likelihood
      ``far_apart_repeats``).
    """
    from ddtree_bayes.core.likelihood import REPEAT_SPREAD, config_key, run_rate

    notes = []
    same = [r for r in rows if (r.model, r.hardware, r.gpus, r.engine)
            == (m.model, m.hardware, m.gpus, m.engine)]
    ar = [r for r in same if r.method == AR_METHOD and r.concurrency == 1]
    if m.concurrency > 1:
        above = [r for r in ar if r.tok_s > m.tok_s   # (a blank context: the default)
                 and m.context(default_context) <= r.context(default_context)]
        if above:   # (the one at the nearest context, the fastest of those)
            r = min(above, key=lambda r: (r.context(default_context)
                                          - m.context(default_context), -r.tok_s))
            notes.append(f"{m.tok_s:g} tok/s for {m.concurrency} streams is below one stream's "
                         f"{r.tok_s:g} tok/s (row {r.row}: {r.model} {r.system} {r.engine} ar, "
                         f"context {context_text(r)}): was the per-stream tok/s typed as the "
                         "total? (tok_s at concurrency C is the C streams' total)")
    if not notes:   # (one stream's AR tok/s undercut: said above)
        fewer = _fewer_streams(m, same, both_ways, default_context)
        if fewer is not None:
            notes.append(fewer)
    if m.is_speculative and m.accept_len == 1.0:
        below = [r for r in same if r.method == AR_METHOD and r.concurrency == m.concurrency
                 and r.tok_s < m.tok_s
                 and r.context(default_context) <= m.context(default_context)]
        if below:
            r = max(below, key=lambda r: r.tok_s)
            notes.append(f"{m.method} at accept_len 1 (one token a step, each dearer than "
                         f"autoregressive decoding's) at {m.tok_s:g} tok/s is faster than ar's "
                         f"{r.tok_s:g} tok/s (row {r.row}: {r.model} {r.system} {r.engine}, "
                         f"context {context_text(r)}): was an acceptance rate (0 to 1) typed "
                         "as the length? (accept_len counts the accepted draft tokens plus the "
                         "bonus token)")
    else:
        shorter = _spec_shorter_than_ar(m, same, both_ways, default_context)
        if shorter is not None:
            notes.append(shorter)
    longer = _longer_context(m, same, both_ways, default_context)
    if longer is not None:
        notes.append(longer)
    growth = _step_growth(m, same, both_ways, default_context)
    if growth is not None:
        notes.append(growth)
    runs = [r for r in same if config_key(r) == config_key(m)] if repeats else []
    if runs:
        def apart(r: Measurement) -> float:
            return max(run_rate(r) / run_rate(m), run_rate(m) / run_rate(r))

        r = max(runs, key=apart)
        ratio = apart(r)
        if ratio > REPEAT_SPREAD:
            # (at one accept_len the rows' own tok/s, the same ratio: "227.3 tok/s ... 68.86
            # tok/s" was said of 1000 and 303 tok/s at 4.4, their tok/s per accepted token)
            same_accept = r.accept_len == m.accept_len
            per = "" if same_accept else " per accepted token"
            rate = (lambda x: x.tok_s) if same_accept else run_rate
            label = config_label(m.system, m.engine, m.method, m.verify_tokens,
                                 m.context_tokens, m.concurrency)
            notes.append(f"{rate(m):.4g} tok/s{per} is {ratio:.3g}x apart from row {r.row}'s "
                         f"{rate(r):.4g} tok/s{per}, a run of the same configuration "
                         f"({m.model}, {label}): runs that far apart are almost always a unit "
                         "or entry error (check tok_s: per-user or total? and the "
                         "configuration columns)")
    return notes


#: The flags of ``add`` and ``predict`` that name a measurement file's (or a candidates
#: file's) column, and that column: an error or note written for flags, said of a file's row,
#: names the column (:func:`as_columns`; ``next --candidates``' row errors).
FLAG_COLUMNS = {"--tok-s": "tok_s", "--concurrency": "concurrency", "--accept": "accept_len",
                "--gpus": "gpus", "--context": "context_tokens", "--hardware": "hardware",
                "--engine": "engine", "--method": "method", "--block": "block",
                "--budget": "budget", "--verify-tokens": "verify_tokens", "--model": "model"}
#: The flags ``add``'s notes name (``fit`` says its notes of a file's rows, which have no
#: flags).
NOTE_FLAGS = ("--tok-s", "--concurrency", "--accept", "--gpus", "--context")
_FLAG = re.compile("(?:" + "|".join(map(re.escape, NOTE_FLAGS)) + r")\b")


#: How ``add --from-bench`` wrote a row's context before it counted the decode (d4933a6):
#: the prompt alone, said in the notes (serving results, llama-bench), or not said (vLLM
#: latency and SGLang one-batch rows named the lengths without a context rule).
_PROMPT_ONLY = re.compile(r"context_tokens = (?:total_input_tokens/completed, rounded|n_depth)"
                          r"(?:;|$)")
_TOOLS_WITHOUT_RULE = ("vllm bench latency (vllm-latency):",
                       "sglang.bench_one_batch (sglang-one-batch):")


def prompt_only_context(m: Measurement) -> str | None:
    """One line when a row ``add --from-bench`` imported before the context counted the decode
    (2026-12-06) holds its file's prompt as ``context_tokens``: a decode step read the prompt
    plus half the output on average (1024 in, 1024 out: 1536), and the context cost is linear
    in it, so such a row understates the context behind its tok/s. Read off the notes the
    import wrote; None for any other row (a ``--context`` given, a row typed by hand).

    >>> from ddtree_bayes.core.data import Measurement
    >>> old = ("vllm bench serve (vllm-serve): tok_s = x; "
    ...        "context_tokens = total_input_tokens/completed, rounded")
    >>> m = Measurement(2, "kimi-k2.6", "b300", 8, "vllm", "ar", None, None, 1, 1.0, 1024.0,
    ...                 300.0, "s", old)
    >>> print(prompt_only_context(m)[:62])
    context_tokens 1024 is its benchmark file's prompt alone (an a
    >>> prompt_only_context(Measurement(2, "kimi-k2.6", "b300", 8, "vllm", "ar", None, None, 1,
    ...                                 1.0, 1024.0, 300.0, "s",
    ...                                 old + " + total_output_tokens/completed/2"))
    """
    notes = m.notes or ""
    if not m.context_tokens or "context_tokens = --context" in notes:
        return None
    if not (_PROMPT_ONLY.search(notes) or (notes.startswith(_TOOLS_WITHOUT_RULE)
                                           and "context_tokens = " not in notes)):
        return None
    return (f"context_tokens {plain_text(m.context_tokens)} is its benchmark file's prompt "
            "alone (an add --from-bench import before 2026-12-06): a decode step read the "
            "prompt plus half the output on average (1024 in, 1024 out: 1536), which the "
            "context cost is linear in; write that figure, or delete the row and import the "
            "file again")


def as_columns(line: str) -> str:
    """A note in the words of a file's rows: ``add``'s flags as the columns they fill.

    >>> as_columns("name it with --model); else check --tok-s (with --concurrency), --accept")
    'name it in the model column); else check tok_s (with concurrency), accept_len'
    """
    line = line.replace("name it with --model", "name it in the model column")
    return _FLAG.sub(lambda m: FLAG_COLUMNS[m.group(0)], line)


def row_notes(rows: Sequence[Measurement], cards: dict, hardware: dict[str, dict[str, str]],
              default_context: float = 0.0) -> list[tuple[int, str]]:
    """(row, line) of every row of a file, in row order: :func:`card_weights_note`,
    :func:`physics_notes` (the read floor only where the card's weights fit the GPUs) and
    :func:`cross_row_notes` against every other row of the same model, system and engine
    (without the repeats, which core/likelihood ``far_apart_repeats`` says per
    configuration). What ``fit`` warns of; ``cards``: model -> card (a model without one is
    not checked against a card)."""
    groups: dict[tuple, list[Measurement]] = {}
    for m in rows:
        groups.setdefault((m.model, m.hardware, m.gpus, m.engine), []).append(m)
    found = []
    for m in rows:
        card = cards.get(m.model)
        note = card_weights_note(card, hardware, m)
        others = [r for r in groups[(m.model, m.hardware, m.gpus, m.engine)] if r is not m]
        prompt_only = prompt_only_context(m)
        found += [(m.row, as_columns(line)) for line in (
            *([] if note is None else [note]),
            *([] if prompt_only is None else [prompt_only]),
            *physics_notes(card, hardware, m, read_floor=note is None,
                           default_context=default_context),
            *cross_row_notes(m, others, repeats=False, both_ways=False,
                             default_context=default_context))]
    return found

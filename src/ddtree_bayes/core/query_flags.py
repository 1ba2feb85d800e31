"""The flags that name a configuration (predict, track, next's --query, the report's queries).

One definition, so the CLI and the query strings that workflows parse (``next --query``,
tracked queries) spell and document them the same way. argparse only.
"""

from __future__ import annotations

import argparse
import math


def whole_number(text: str) -> int:
    """argparse ``type=``: a whole number written as a measurement file writes one
    (:func:`~ddtree_bayes.core.data.plain_float`); a query string parsed here (next's
    ``--query``, a tracked query) read ``--gpus 1_6`` as 16 with Python's ``int``.

    >>> whole_number("8"), whole_number("8.0")
    (8, 8)
    >>> p = argparse.ArgumentParser(exit_on_error=False)
    >>> _ = p.add_argument("--gpus", type=whole_number)
    >>> try:
    ...     p.parse_args(["--gpus", "1_6"])
    ... except argparse.ArgumentError as err:
    ...     print(err)
    argument --gpus: invalid whole number value: '1_6'
    """
    from ddtree_bayes.core.data import plain_float

    value = plain_float(text)   # (a ValueError is argparse's "invalid whole number value")
    if not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"{text!r} is not a whole number")
    return int(value)


whole_number.__name__ = "whole number"


#: What a context is, as every --context help says it (README's glossary, "context").
CONTEXT_HELP = ("the mean KV length a decode step reads, in tokens: the prompt plus half the "
                "answer (1024 in, 1024 out: 1536)")


def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """--model --hardware --gpus --engine --method --block --budget --verify-tokens --context."""
    add_model_argument(p)
    p.add_argument("--hardware", help="GPU name from data/hardware.csv (default scenario: b300; "
                                      "for a fit that never measured b300, its most-measured "
                                      "system)")
    p.add_argument("--gpus", type=whole_number, help="GPU count (default: the measured count)")
    p.add_argument("--engine", help="engine(s), comma-separated, e.g. sglang,native")
    p.add_argument("--method", help="ar, ddtree, eagle3, dflash-chain, ... (without --block, "
                   "--budget or --verify-tokens: the default question's shape when it asks "
                   "this method, e.g. a measured system's own rows, said in a note)")
    p.add_argument("--block", type=whole_number, help="drafter block size / chain length")
    p.add_argument("--budget", type=whole_number, help="tree node budget (verify tokens = budget + 1)")
    p.add_argument("--verify-tokens", type=whole_number,
                   help="tokens verified per step (overrides the derivation)")
    p.add_argument("--context", help=f"{CONTEXT_HELP}, e.g. 32768 or 32k (default: the "
                                      "priors' default_context_tokens, 0 as bundled)")


#: Where a question without --accept takes its acceptance, in order (engine/question.py
#: ``accept_sources`` is the one place that follows it; docs/howto/ask.md says the same).
ACCEPT_ORDER = ("1 for ar; else the mean accept_len measured of the configuration on the same "
                "system (this engine's rows if any, else the other engines': an engine "
                "without rows there takes theirs); else the posterior of the acceptance the fit "
                "inferred for it (rows without accept_len); else the priors file's "
                "[[acceptance]] entry for it; else the mean accept_len measured of it on any "
                "system")

ACCEPT_HELP = ("acceptance length(s): 13.5 | 12,14,16 | 12:16 (integers, plus a Uniform(12,16) "
               "row) | 12:16:0.5, each at most what a step can emit (ar 1; block for DFlash "
               "and DDTree, whose block starts with the anchor; block + 1 for another block "
               "drafter or a chain of depth block; never above the verify tokens). "
               f"Default: {ACCEPT_ORDER}; the row's accept says which")


MODEL_HELP = ("target model, as in the data's model column (optional when the fit holds one "
              "model; required when it holds several; a model with a card in data/models.csv "
              "that a fit of several models never measured is predicted from its card)")


def add_kv_cache_argument(p: argparse.ArgumentParser, capped: str | None = None) -> None:
    """--kv-cache: the KV cache's dtype (predict, optimize, next's --query, track);
    ``capped``: what the command caps at the read, when not predict's draws."""
    from ddtree_bayes.core.model_cards import KV_CACHE_BITS

    bits = ", ".join(f"{k} {v:g}" for k, v in KV_CACHE_BITS.items())
    on = "" if capped is None else f" of {capped}"
    p.add_argument("--kv-cache", choices=tuple(KV_CACHE_BITS), metavar="DTYPE",
                   help=f"the deployment's KV-cache dtype ({bits} bits per value): the cap at "
                        f"the memory read{on} (no step shorter than reading the weights and the "
                        "streams' caches) and the check that the cache fits in memory count the "
                        "card's kv_bytes_per_token x these bits / the card's (bf16's 16 when the "
                        "card does not say). Default: the cap reads the least any deployment "
                        "does (4.5 bits per value, llama.cpp q4_0), the memory check the card's "
                        "bytes")


#: What --new-deployment means, as every command that takes it says it (docs/cli.md).
NEW_DEPLOYMENT_HELP = (
    "price the question as another deployment of the (system, engine, method) group the fit "
    "measured (another build, power cap, OS or quant under the same card and GPU name): the "
    "group's overhead carried to it with the spread between deployments (the [transfer] "
    "system scatter, and for a hybrid target the groups' spread), not anchored to the group's "
    "rows; the target step stays the fit's. A question whose group the fit did not measure "
    "there (AR, an unmeasured or carried group) is answered as without it, and a warning says "
    "so. `hardware add NAME --like GPU` and a refit is the other way to say it")


def add_new_deployment_argument(p: argparse.ArgumentParser) -> None:
    """--new-deployment (predict, optimize, next's --query, track):
    :data:`NEW_DEPLOYMENT_HELP`."""
    p.add_argument("--new-deployment", action="store_true", default=None,
                   help=NEW_DEPLOYMENT_HELP)


def add_model_argument(p: argparse.ArgumentParser) -> None:
    """--model: which target model a query asks about."""
    p.add_argument("--model", help=MODEL_HELP)

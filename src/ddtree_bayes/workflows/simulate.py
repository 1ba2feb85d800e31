"""Synthetic measurements from known parameters (for parameter recovery and calibration).

numpy only; the step arithmetic is the model's own (:mod:`ddtree_bayes.core.spec`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ddtree_bayes.core import spec as S
from ddtree_bayes.core.data import (
    COLUMNS,
    check_context_tokens,
    check_name,
    derive_verify_tokens,
    plain_float,
    system_label,
)
from ddtree_bayes.core.methods import MethodSpec, max_accept
from ddtree_bayes.core.query_flags import whole_number


def simulate_measurements(truth: dict, design: list[dict], *, seed: int, model: str = "sim-moe",
                          context_unit_tokens: float = 65536.0, moe_form: str = "power",
                          methods: Mapping[str, MethodSpec] | None = None) -> str:
    """A measurement CSV (text) for ``design`` rows under known parameters ``truth``.

    ``truth`` holds per-system dicts ``step_ar_ms``, ``moe_share``, ``moe_shape``,
    ``ctx_ms_per_unit`` (per ``context_unit_tokens``, keyed by system label, e.g. ``b300x8``), a global
    ``ctx_verify_exponent`` and ``noise_sd``, ``overhead_frac`` keyed by group label
    (``system/engine/method``). Each design row gives hardware, gpus, engine, method, block,
    budget, accept_len and context_tokens; tok/s gets lognormal noise ``noise_sd``.

    Examples
    --------
    >>> truth = {"step_ar_ms": {"b300x8": 8.0}, "moe_share": {"b300x8": 0.5},
    ...          "moe_shape": {"b300x8": 0.5}, "ctx_ms_per_unit": {"b300x8": 2.0},
    ...          "ctx_verify_exponent": 0.5, "overhead_frac": {}, "noise_sd": 0.0}
    >>> row = {"hardware": "b300", "gpus": 8, "engine": "e", "method": "ar", "accept_len": 1}
    >>> simulate_measurements(truth, [row], seed=0).splitlines()[1].split(",")[10]
    '125'
    """
    rng = np.random.default_rng(seed)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for d in design:
        system = system_label(d["hardware"], int(d["gpus"]))
        block, budget = d.get("block"), d.get("budget")
        verify = derive_verify_tokens(d["method"], block, budget, methods)
        assert verify is not None, f"design row {d} needs block or budget"
        ctx = float(d.get("context_tokens") or 0.0)
        target = S.target_ms(truth["step_ar_ms"][system], truth["moe_share"][system],
                             truth["moe_shape"][system], truth["ctx_ms_per_unit"][system],
                             truth["ctx_verify_exponent"], float(verify),
                             ctx / context_unit_tokens, moe_form, np.exp, np.log)
        frac = 0.0 if d["method"] == "ar" else truth["overhead_frac"][
            S.overhead_group_label(system, d["engine"], d["method"])]
        step = S.step_ms(target, frac, 1.0)
        tok = S.tok_s(d["accept_len"], step) * float(np.exp(truth["noise_sd"]
                                                            * rng.standard_normal()))
        writer.writerow({"model": model, "hardware": d["hardware"], "gpus": d["gpus"],
                         "engine": d["engine"], "method": d["method"],
                         "block": "" if block is None else block,
                         "budget": "" if budget is None else budget, "verify_tokens": verify,
                         "accept_len": d["accept_len"],
                         # as simulated: a fractional context written whole would be
                         # another row than the one whose tok_s this is (read_design
                         # refuses one; a direct caller's is written as given)
                         "context_tokens": "" if d.get("context_tokens") is None
                         else str(int(ctx)) if ctx.is_integer() else repr(ctx),
                         "tok_s": f"{tok:.4g}", "source": f"simulated (seed {seed})",
                         "notes": ""})
    return out.getvalue()


#: Top-level keys of a truth file (PARAMS.toml), as :func:`load_truth` reads them.
TRUTH_KEYS = ("model", "moe_form", "ctx_verify_exponent", "noise_sd", "systems", "groups")

DESIGN_COLUMNS = ("hardware", "gpus", "engine", "method", "block", "budget", "accept_len",
                  "context_tokens")


def load_truth(path: str | Path) -> dict:
    """Read PARAMS.toml into the ``truth`` mapping of :func:`simulate_measurements`.

    Layout: top-level ``model``, ``moe_form``, ``ctx_verify_exponent``, ``noise_sd``;
    ``[systems."<hardware>x<gpus>"]`` with ``step_ar_ms``, ``moe_share``, ``moe_shape``
    (exponent or slope, per ``moe_form``) and ``ctx_ms_per_unit``; ``[groups."<system>/<engine>/
    <method>"]`` with ``overhead_frac``.
    """
    import math
    import tomllib

    from ddtree_bayes.core import per_call
    from ddtree_bayes.core.errors import InputError, typo_fix

    path = str(path)
    try:
        raw = tomllib.loads(per_call.read_text(path))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise InputError(f"cannot read truth file: {err}", file=path,
                         fix="pass a TOML file like data/examples/truth_dense_consumer.toml") from None

    def number(where: str, value, lo: float, hi: float) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and lo <= value <= hi):
            raise InputError(f"must be a number in [{lo:g}, {hi:g}], got {value!r}", file=path,
                             column=where, fix="correct the value")
        return float(value)

    def known(where: str, table: dict, keys: tuple[str, ...]) -> None:
        """A key the simulation does not read is refused, not ignored (`moe_from = "linear"`
        simulated the power form)."""
        for key in table:
            if key not in keys:
                raise InputError(f"unknown key {key!r}", file=path,
                                 column=f"{where}.{key}" if where else key,
                                 fix=typo_fix(key, keys, "use " + ", ".join(keys)))

    known("", raw, TRUTH_KEYS)
    systems = raw.get("systems")
    if not isinstance(systems, dict) or not systems:
        raise InputError("no [systems.\"<hardware>x<gpus>\"] tables", file=path, column="systems",
                         fix="add one table per simulated system")
    def tables(name: str, found) -> dict:
        """``[name."<label>"]`` tables: a TOML table of tables, nothing else."""
        if not isinstance(found, dict) or not all(isinstance(t, dict) for t in found.values()):
            raise InputError(f"{name} must be tables [{name}.\"<label>\"], got {found!r}",
                             file=path, column=name,
                             fix="see data/examples/truth_dense_consumer.toml")
        return found

    systems = tables("systems", systems)
    truth: dict = {"step_ar_ms": {}, "moe_share": {}, "moe_shape": {}, "ctx_ms_per_unit": {}}
    bounds = {"step_ar_ms": (1e-3, 1e4), "moe_share": (0, 1), "moe_shape": (0, 10),
              "ctx_ms_per_unit": (0, 1e4)}
    for label, table in systems.items():
        known(f"systems.{label}", table, tuple(bounds))
        for key, (lo, hi) in bounds.items():
            truth[key][label] = number(f"systems.{label}.{key}", table.get(key), lo, hi)
    groups = tables("groups", raw.get("groups", {}))
    for label, table in groups.items():
        known(f"groups.{label}", table, ("overhead_frac",))
    truth["overhead_frac"] = {
        label: number(f"groups.{label}.overhead_frac", table.get("overhead_frac"), 0, 0.99)
        for label, table in groups.items()}
    truth["ctx_verify_exponent"] = number("ctx_verify_exponent", raw.get("ctx_verify_exponent"), 0, 2)
    truth["noise_sd"] = number("noise_sd", raw.get("noise_sd"), 0, 1)
    truth["model"] = str(raw.get("model", "sim-model"))
    # (written to every row: a file fit refuses)
    check_name(truth["model"], file=path, column="model", error=InputError)
    truth["moe_form"] = raw.get("moe_form", "power")
    if truth["moe_form"] not in ("power", "linear"):
        raise InputError(f"unknown moe_form {truth['moe_form']!r}", file=path, column="moe_form",
                         fix="use 'power' or 'linear'")
    return truth


def _number_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _cell(path, line: int, raw: dict[str, str], col: str, read, blank_ok: bool):
    """One design cell read as a measurement file reads it (gpus 0_4 simulated 4 GPUs), its
    column named when it is not a number; None when blank and ``blank_ok``."""
    from ddtree_bayes.core.errors import InputError

    if blank_ok and not raw[col]:
        return None
    try:
        return read(raw[col])
    except ValueError as err:
        kind = "a whole number" if read is whole_number else "a number"
        raise InputError(str(err), file=path, row=line, column=col,
                         fix=f"write {col} as {kind}") from None


#: Why a design's refusal of a block cannot ask for a drafter by name (core/drafters.py
#: ``block_problem``'s ``default_only``).
DESIGN_DRAFTER = ("a design has no drafter column: its rows draft with the model's default "
                  "drafter")


def load_design(path: str | Path, truth: dict, cards: dict | None = None,
                drafters: tuple = (), methods: Mapping[str, MethodSpec] | None = None
                ) -> list[dict]:
    """Read DESIGN.csv rows; every row's system and speculative group must be in the truth.

    ``cards``: model name -> card (core/model_cards.py; the working directory's, as ``fit``
    reads them). A row of the truth's model whose context, or whose step's verified tokens
    after it, pass its card's longest context is refused with the words predict says it in
    (core/row_notes.py ``context_above_max``, ``step_reach_above_max``): no deployment of
    the card runs it (a design of 1e9 tokens simulated 0.03 tok/s). ``drafters``: the drafter
    cards (core/drafters.py ``drafter_table``); a row whose block, or with no block whose
    accept_len, its model's drafter's trained block rules out is refused as ``add`` and
    ``fit`` refuse it (``row_block_problem``). ``methods``: the priors' ``[methods]`` table
    (None: the bundled one), by which a row's verified tokens are derived and its accept_len
    bounded, as ``fit`` derives and bounds them."""
    from types import SimpleNamespace

    from ddtree_bayes.core.data import read_csv_file
    from ddtree_bayes.core.drafters import row_block_problem
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.core.row_notes import (
        context_above_max,
        step_reach,
        step_reach_above_max,
    )

    card = (cards or {}).get(truth["model"])

    path = str(path)
    _, header, body = read_csv_file(path)
    for col in DESIGN_COLUMNS:
        if col not in header:
            raise InputError("missing column", file=path, row=1, column=col,
                             fix="the header must contain " + ",".join(DESIGN_COLUMNS))
    rows = []
    for line, values in body:
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(header):
            raise InputError(f"{len(values)} fields, header has {len(header)}", file=path,
                             row=line, fix="one value per column (blank where not set)")
        raw = {h: v.strip() for h, v in zip(header, values, strict=True)}
        # columns the simulation cannot honour are refused, not dropped: one model per truth
        # file, single-stream rows only
        if raw.get("model") and raw["model"] != truth["model"]:
            raise InputError(f"model {raw['model']!r}: the truth file simulates "
                             f"{truth['model']!r} (one model per truth file)", file=path,
                             row=line, column="model",
                             fix=f"leave the column blank or write {truth['model']}, or "
                                 "simulate the other model from a truth file of its own")
        conc = raw.get("concurrency")
        if conc and _number_or_none(conc) != 1.0:
            raise InputError(f"concurrency {conc}: simulate writes single-stream (C = 1) rows "
                             "only", file=path, row=line, column="concurrency",
                             fix="leave the column blank or write 1")
        if raw.get("verify_tokens"):   # derived from method, block and budget (as `add` does)
            raise InputError(f"verify_tokens {raw['verify_tokens']}: simulate derives the "
                             "verified tokens from method, block and budget", file=path,
                             row=line, column="verify_tokens", fix="leave the column blank")
        for col in ("hardware", "engine", "method"):   # (as a measurement file takes them:
            check_name(raw[col], file=path, row=line, column=col,   # 'VLLM' was written,
                       error=InputError)                            # fit refused it)
        row: dict[str, Any] = {
            "hardware": raw["hardware"], "engine": raw["engine"], "method": raw["method"],
            "gpus": _cell(path, line, raw, "gpus", whole_number, blank_ok=False),
            "block": _cell(path, line, raw, "block", whole_number, blank_ok=True),
            "budget": _cell(path, line, raw, "budget", whole_number, blank_ok=True),
            "accept_len": _cell(path, line, raw, "accept_len", plain_float, blank_ok=False),
            "context_tokens": _cell(path, line, raw, "context_tokens", plain_float,
                                    blank_ok=True)}
        for col in ("gpus", "block", "budget"):
            if row[col] is not None and row[col] < 1:
                raise InputError(f"{col} must be >= 1, got {row[col]}", file=path, row=line,
                                 column=col, fix="write a positive whole number (or blank)")
        ctx = row["context_tokens"]
        if ctx is not None and not (math.isfinite(ctx) and ctx >= 0):
            raise InputError(f"context_tokens must be a finite number >= 0, got "
                             f"{raw['context_tokens']}", file=path, row=line,
                             column="context_tokens",
                             fix="write the context length in tokens, or leave it blank")
        # bounded and whole as a measurement file's (the output is one): 100.7 was written
        # to a file `fit` refuses
        check_context_tokens(ctx, raw.get("context_tokens", ""), file=path, row=line,
                             fix="write the context length in tokens, or leave it blank")
        system = system_label(row["hardware"], row["gpus"])
        if system not in truth["step_ar_ms"]:
            raise InputError(f"system {system} has no [systems.\"{system}\"] in the truth file",
                             file=path, row=line, column="hardware", fix="add it to the truth")
        group = S.overhead_group_label(system, row["engine"], row["method"])
        if row["method"] != "ar" and group not in truth["overhead_frac"]:
            raise InputError(f"group {group} has no overhead_frac in the truth file", file=path,
                             row=line, column="method", fix=f"add [groups.\"{group}\"]")
        verify = derive_verify_tokens(row["method"], row["block"], row["budget"], methods)
        if verify is None:
            raise InputError("cannot derive verify tokens", file=path, row=line, column="block",
                             fix="give budget (a tree: ddtree, eagle2, medusa) or block (a chain)")
        past = (context_above_max(card, ctx or 0.0)
                or step_reach_above_max(card, ctx or 0.0, verify))
        if past is not None and card is not None:   # (a line needs a card that says)
            raise InputError(past, file=path, row=line, column="context_tokens",
                             fix=f"write a context of at most "
                                 f"{card.max_context_tokens - step_reach(0, verify)} tokens (its "
                                 f"verified tokens' last position at the card's "
                                 f"{card.max_context_tokens}), or simulate a model whose card "
                                 "takes it")
        # (the design names no drafter: the model's default card, as a row without one)
        trained = row_block_problem(drafters, SimpleNamespace(
            model=truth["model"], method=row["method"], block=row["block"],
            budget=row["budget"], drafter=None, accept_len=row["accept_len"],
            verify_tokens=verify), default_only=DESIGN_DRAFTER)
        if trained is not None:
            raise InputError(trained[0], file=path, row=line, column=trained[2], fix=trained[1])
        # what a step can emit (core/methods.max_accept, by the methods table fit reads), so
        # the simulated file loads for fit
        limit = max_accept(row["method"], row["block"], row["budget"], methods, verify)
        if not limit.admits(row["accept_len"]):
            raise InputError(limit.refusal(f"accept_len {row['accept_len']:g}")
                             if row["accept_len"] >= 1 else
                             f"accept_len {row['accept_len']:g} is below 1 (the bonus token)",
                             file=path, row=line, column="accept_len",
                             fix=limit.span())
        rows.append(row)
    return rows


def simulate_from_files(truth_path: str | Path, design_path: str | Path, *, seed: int,
                        priors: str | Path | None = None,
                        workdir: str | Path | None = None) -> str:
    """``ddtree-bayes simulate``: a measurement CSV for DESIGN.csv under PARAMS.toml. The
    context term is priced per the ``[model] context_unit_tokens`` of ``priors`` (default: the
    priors file ``fit`` reads in ``workdir``, models/priors.toml or the bundled one), read as
    ``fit`` reads it, so a truth's ``ctx_ms_per_unit`` is per the unit the fit recovers, and
    each row's verified tokens and acceptance limit are its ``[methods]`` table's, as ``fit``
    derives them. The design is held against the model and drafter cards ``fit`` reads in
    ``workdir`` (:func:`load_design`)."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.drafters import drafter_table
    from ddtree_bayes.core.model_cards import load_model_cards

    truth = load_truth(truth_path)
    cfg = load_priors(priors or paths.priors_file(workdir))
    design = load_design(design_path, truth,
                         load_model_cards(paths.data_file("models.csv", workdir)),
                         drafter_table(paths.own_data_file("drafters.csv", workdir)),
                         methods=cfg.methods)
    return simulate_measurements(truth, design, seed=seed, model=truth["model"],
                                 context_unit_tokens=cfg.context_unit_tokens,
                                 moe_form=truth["moe_form"], methods=cfg.methods)

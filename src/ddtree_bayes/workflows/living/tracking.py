"""Tracked queries (``models/tracked.json``): predictions re-evaluated after each update."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtree_bayes.core.clock import utc_now
from ddtree_bayes.core.data import (
    NAME_RE,
    accept_flag,
    check_drafter_name,
    not_a_name,
    percent_text,
    plain_text,
    tok_text,
)
from ddtree_bayes.core.errors import InputError, QueryError, without_fix
from ddtree_bayes.workflows.living.fit_history import unlike_models
from ddtree_bayes.workflows.living.records import (
    DEFAULT_QUERY,
    TRACKED_FILE,
    exclusive_lock,
    write_text_atomically,
)

# ---------------------------------------------------------------- tracked queries
QUERY_KEYS = ("hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
              "context", "accept", "model", "kv_cache", "drafter", "new_deployment")


@dataclass(frozen=True)
class Tracked:
    """A saved predict-style query; ``builtin`` for the default one (not removable)."""

    name: str
    query: dict[str, Any]
    added_utc: str | None = None
    builtin: bool = False


def tracked_path(models: Path) -> Path:
    return models / TRACKED_FILE


def _read_tracked_file(path: Path, *, check: bool = True) -> list[Tracked]:
    """The saved queries of ``path``; with ``check``, each refused as ``track add`` refuses
    it (:func:`normalize_query`): a hand-edited ``{"engine": "SGLANG"}``, which predict and
    track refuse, was answered by update and diff from the pooled population."""
    if not path.exists():
        return []
    try:
        payload = json.loads(path.read_text())
        entries = payload["queries"]
        out = [Tracked(name=str(e["name"]),
                       query=_stored({k: e["query"].get(k) for k in QUERY_KEYS}),
                       added_utc=e.get("added_utc")) for e in entries]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise InputError(f"cannot read tracked queries: {err}", file=str(path),
                         fix="fix the JSON by hand, or delete the file to start again") from None
    if check:
        for e in entries:   # a misspelt key was dropped: {"engnie": "vllm"} asked the default
            unknown = [k for k in e["query"] if k not in QUERY_KEYS]
            if unknown:
                raise InputError(f"tracked query {str(e['name'])!r}: unknown key "
                                 f"{unknown[0]!r}", file=str(path),
                                 fix=f"in {path.name}, use the keys {', '.join(QUERY_KEYS)}; "
                                     f"or `ddtree-bayes track remove {e['name']}` and track "
                                     "it again")
        out = [_checked(path, t) for t in out]
    return out


def _checked(path: Path, t: Tracked) -> Tracked:
    """``t`` with its query normalized as ``track add`` saves one, or an error naming the
    file, the query and what is wrong with it."""
    try:
        return Tracked(t.name, normalize_query(t.query), t.added_utc, t.builtin)
    except (QueryError, InputError) as err:
        raise InputError(f"tracked query {t.name!r}: {without_fix(err)}", file=str(path),
                         fix=f"in {path.name}, {err.fix or 'mend the query'}; or "
                             f"`ddtree-bayes track remove {t.name}` and track it again"
                         ) from None
    except (TypeError, ValueError) as err:
        raise InputError(f"tracked query {t.name!r}: {err}", file=str(path),
                         fix=f"mend the query in {path.name}; or `ddtree-bayes track remove "
                             f"{t.name}` and track it again") from None


def load_tracked(models: Path, *, include_default: bool = True) -> list[Tracked]:
    """The default query, then the saved ones in the order they were added."""
    saved = _read_tracked_file(tracked_path(models))
    default = [Tracked("default", dict(DEFAULT_QUERY), builtin=True)] if include_default else []
    return default + saved


def for_models(tracked: list[Tracked], models: list[str]) -> list[Tracked]:
    """``tracked`` with its built-in default query asked of each of ``models`` in turn, in
    place of the project's model (:func:`project_model`): ``update`` of a fit of several models
    asks the default question of the models its new (or removed) rows measure, so a row of the
    second model shows how that model's answer moved, not the first's, and ``diff`` of the
    models whose rows differ between its two fits. No ``models``: as it is."""
    if not models:
        return list(tracked)
    out: list[Tracked] = []
    for t in tracked:
        if t.builtin and not t.query.get("model"):
            out += [Tracked(t.name, {**t.query, "model": m}, t.added_utc, t.builtin)
                    for m in dict.fromkeys(models)]
        else:
            out.append(t)
    return out


def normalize_query(query: dict[str, Any]) -> dict[str, Any]:
    """Validate a query's syntax (not whether a fit can answer it); keys of QUERY_KEYS."""
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.question import Flags

    q = {k: query.get(k) for k in QUERY_KEYS}
    # the bounds every question takes (gpus=True and gpus=10**9 were tracked here), and the
    # KV-cache dtypes predict --kv-cache takes (one edited by hand into tracked.json)
    Flags(gpus=q["gpus"], block=q["block"], budget=q["budget"],
          verify_tokens=q["verify_tokens"], kv_cache=q["kv_cache"],
          new_deployment=False if q["new_deployment"] is None else q["new_deployment"])
    for key in ("engine", "method", "hardware"):
        if q[key] is not None:
            names = str(q[key]).split(",") if key == "engine" else [str(q[key])]
            for name in names:
                if not NAME_RE.fullmatch(name):
                    problem, fix = not_a_name(name)
                    raise QueryError(f"--{key} {problem}", fix=fix)
    if q["model"] is not None and (not isinstance(q["model"], str) or not q["model"].strip()
                                   or any(c.isspace() or c == "," for c in q["model"])):
        raise QueryError(f"--model {q['model']!r} is not a model name",
                         fix="use the name in the data's model column, e.g. --model kimi-k2.6")
    if q["model"] is not None and not NAME_RE.fullmatch(q["model"]):
        # (a model is a card's name, as the data's model column takes it: 'Kimi-K2.6' was
        # saved, and no fit could ever answer it)
        from ddtree_bayes.engine.names import not_a_model_name

        problem, fix = not_a_model_name(q["model"])
        raise QueryError(f"--model {problem}", fix=fix)
    if q["drafter"] is not None:
        # (a card's name, as predict --drafter takes it: which cards exist is the fit's to say)
        check_drafter_name(q["drafter"])
    if q["accept"] is not None:
        P.parse_accept(str(q["accept"]))
        q["accept"] = str(q["accept"])
    if q["context"] is not None:
        P.parse_context(str(q["context"]))
        q["context"] = str(q["context"])
    return _stored(q)


def query_name(query: dict[str, Any]) -> str:
    """A readable default name, e.g. ``b300-native-ddtree-b16-B32-a14``."""
    q = query
    parts = [q["model"]] if q.get("model") else []
    parts.append(q.get("hardware") or "b300")
    if q.get("gpus"):
        parts.append(f"x{q['gpus']}")
    parts.append((q.get("engine") or "sglang+native").replace(",", "+"))
    parts.append(q.get("method") or "ddtree")
    for key, tag in (("block", "b"), ("budget", "B"), ("verify_tokens", "M"), ("context", "ctx"),
                     ("accept", "a"), ("kv_cache", "kv"), ("drafter", "d")):
        if q.get(key) is not None:
            parts.append(f"{tag}{q[key]}")
    if q.get("new_deployment"):
        parts.append("new-deployment")
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(str(p) for p in parts))


def _stored(query: dict[str, Any]) -> dict[str, Any]:
    """A query without a ``model`` key when it names none (queries of a fit of one model, in
    ``models/tracked.json`` and in JSON output, stay as before queries could name a model), and
    without a ``kv_cache`` or ``drafter`` key when it gives no ``--kv-cache`` or ``--drafter``,
    nor a ``new_deployment`` key without ``--new-deployment`` (as before queries could)."""
    return {k: v for k, v in query.items()
            if k not in ("model", "kv_cache", "drafter", "new_deployment")
            or (v is not None and v is not False)}


def check_accept_limit(query: dict[str, Any], draws=None, models: Path | None = None) -> None:
    """Refuse a query whose verify tokens cannot be told (a tree method given only its depth:
    :func:`~ddtree_bayes.engine.scenario.verified`), whose shape no configuration has (verify
    tokens not its budget's, a chain's budget above its block, autoregressive decoding
    verifying more than 1 token: :func:`~ddtree_bayes.engine.scenario.step_shape`, as
    predict's scenario checks it), or whose
    ``accept`` lies above what its configuration can emit per step
    (:func:`~ddtree_bayes.core.methods.max_accept`), its flags not given filled as
    :func:`query_rows` fills them (:func:`asked_query`: the fit's default question for the
    query's model, the project's when it names none, and the fit's methods table), or
    without a fit (``draws`` None) from the bundled default and ``models/priors.toml`` (the
    bundled priors when there is none). With a fit, the model's default drafter's (or the
    query's ``drafter``'s) trained
    block (its card's ``block_size``) bounds it as predict's does (engine/scenario.py
    ``trained_block_of``): ``--method ddtree --budget 32 --accept 12`` of a drafter trained
    at block 8 was tracked (M = 33 bounded it), where predict refuses above 8; without a fit,
    the drafter cards a fit here would read (:func:`_trained_block_here`), which were not read
    at all. A ``--block`` asked above the trained one is refused, as predict refuses it (it
    was tracked, and a fit "cannot answer it yet"); the default question's block, which the
    query did not ask, is tracked as before (the fit says why it cannot answer it)."""
    from ddtree_bayes.core.methods import max_accept
    from ddtree_bayes.engine import scenario as S

    q = normalize_query(query)
    _, verify, f, methods = _shape(q, draws, models)
    if q["accept"] is None and q["block"] is None:   # (nothing the trained block bounds)
        return
    if draws is not None:   # (the fit's methods table: _shape's)
        asked = asked_query(draws, q, drop_ar_flags=False)
        try:   # (as predict's scenario carries it)
            limit = S.drafter_limit(draws, asked.get("model"), f["method"], f["block"],
                                    f["budget"], verify, q.get("drafter"))
        except QueryError:   # (a block above it: refused when asked, else tracked and
            if q["block"] is not None:   # answered "cannot answer it yet")
                raise
            limit = S.accept_limit(draws, f["method"], f["block"], f["budget"], verify)
    else:
        limit = max_accept(f["method"], f["block"], f["budget"], methods, verify,
                           trained_block=_trained_block_here(q, f, q["block"] is not None,
                                                             models))
    if q["accept"] is None:
        return
    # (a fit's drafter card edited since: the refusal names the card the fit stored)
    edited = None if draws is None else (
        lambda: S.edited_card_block(draws, asked.get("model"), f["method"], q.get("drafter"),
                                    limit))
    S.check_accept(S.parse_accept(q["accept"]), q["accept"], limit, edited=edited)


def _trained_block_here(q: dict[str, Any], f: dict[str, Any], asked: bool,
                        models: Path | None) -> int | None:
    """Without a fit: the block the query's model's ``method`` drafter was trained at, by the
    drafter cards a fit in this working directory reads (the built-in ones overlaid by
    data/drafters.csv; core/drafters.py ``trained_block``), or None. The model: ``--model``,
    else the first row's of the measurement file a fit here reads (data/measurements.csv,
    else the bundled one), as a query without ``--model`` asks a fit of several models
    (:func:`project_model`). A block above the trained one, when ``asked``, is refused with
    predict's line (core/drafters.py ``block_problem``)."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.data import read_csv_file
    from ddtree_bayes.core.drafters import block_problem, drafter_table, trained_block
    from ddtree_bayes.core.methods import AR_METHOD

    if f["method"] == AR_METHOD:
        return None
    workdir = models.parent if models is not None else None
    model = q.get("model")
    if model is None:
        try:
            _, header, body = read_csv_file(str(paths.data_file("measurements.csv", workdir)))
        except InputError:   # (no data a fit reads: fit says so; nothing to bound by)
            return None
        col = header.index("model") if "model" in header else None
        model = next((values[col].strip() for _, values in body
                      if col is not None and col < len(values) and values[col].strip()), None)
    if model is None:
        return None
    cards = drafter_table(paths.own_data_file("drafters.csv", workdir))
    problem = block_problem(cards, model, f["method"], f["block"], q.get("drafter"))
    if problem is not None:   # (not asked: tracked, as with a fit, bounded by its block)
        if asked:
            raise QueryError(problem[0], fix=problem[1])
        return None
    trained = trained_block(cards, model, f["method"], q.get("drafter"))
    return None if trained is None else trained[0]


def _shape(q: dict[str, Any], draws=None, models: Path | None = None
           ) -> tuple[int | None, int, dict[str, Any], Any]:
    """(budget, verify tokens, filled flags, methods table) of a normalized query, its flags
    not given filled as :func:`check_accept_limit` says; QueryError when its shape is none a
    configuration has (engine/scenario.py ``step_shape``, predict's checks in predict's
    order)."""
    from ddtree_bayes.core.config import DEFAULT_QUESTION
    from ddtree_bayes.core.methods import load_methods
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine.question import Flags, fill, question_default
    from ddtree_bayes.engine.scenario import step_shape

    d = DEFAULT_QUESTION
    if draws is not None:
        # (as query_rows asks it, but a new query's AR block or budget is refused, below)
        q = asked_query(draws, q, drop_ar_flags=False)
        try:
            d = question_default(draws, Flags.of(q))[0]   # (a measured system's own first)
        except QueryError:   # (the fit cannot answer it yet: query_rows says so later)
            pass
        methods = draws.methods
    else:
        path = models / "priors.toml" if models is not None else None
        path = path if path is not None and path.exists() else bundled("priors.toml")
        methods = load_methods(path.read_text(), str(path))
    f, _ = fill(d, Flags.of(q), methods)
    budget, verify = step_shape(f["method"], f["block"], f["budget"], f["verify_tokens"],
                                methods)
    return budget, verify, f, methods


def same_query(a: dict[str, Any], b: dict[str, Any], draws=None,
               models: Path | None = None) -> bool:
    """Do two normalized queries ask one question? Equal as written, or equal but for their
    budget and verify tokens as written when their shapes are one (:func:`~ddtree_bayes.core.
    methods.shaped_budget`: EAGLE-3 block 3 with its budget blank is the chain of depth 3,
    budget 3, verifying 4 tokens)."""
    if a == b:
        return True
    shape = ("budget", "verify_tokens")
    if ({k: _as_numbers(k, v) for k, v in a.items() if k not in shape}
            != {k: _as_numbers(k, v) for k, v in b.items() if k not in shape}):
        return False
    try:
        return _shape(a, draws, models)[:2] == _shape(b, draws, models)[:2]
    except QueryError:   # (a hand-edited query no configuration has: compared as written)
        return False


def _as_numbers(key: str, value: Any) -> Any:
    """A query's acceptance and context as the numbers they ask (``12.0`` is ``12``, ``32k``
    is ``32768``), so that one question written two ways is one tracked query; other keys as
    written."""
    from ddtree_bayes.engine.scenario import parse_accept, parse_context

    if value is None:
        return None
    if key == "accept":
        return parse_accept(str(value))
    if key == "context":
        return parse_context(str(value))
    return value


def track_add(models: Path, query: dict[str, Any], name: str | None = None, *,
              draws=None) -> Tracked:
    """Save a query in ``models/tracked.json`` (locked, atomic). Refuses a duplicate name, an
    identical query, or an acceptance above what the query's configuration can emit
    (:func:`check_accept_limit`, with the fit ``draws`` when there is one)."""
    q = normalize_query(query)
    if draws is not None and not q.get("model"):
        from ddtree_bayes.engine.target_models import resolve_model

        resolve_model(draws, None)   # a fit of several models: refused, naming them
    check_accept_limit(q, draws, models)
    name = name or query_name(q)
    if not re.fullmatch(r"[A-Za-z0-9._+-]+", name):
        raise InputError(f"query name {name!r} may only hold letters, digits and . _ + -",
                         fix="pass another --name")
    path = tracked_path(models)
    models.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path):
        existing = load_tracked(models)
        for t in existing:
            if same_query(t.query, q, draws, models):
                raise InputError(f"this query is already tracked as {t.name!r}",
                                 fix="nothing to do")
        for t in existing:
            if t.name == name:
                raise InputError(f"a tracked query is already called {name!r}",
                                 fix="pick another --name, or `ddtree-bayes track remove "
                                     f"{name}` first" if not t.builtin else
                                     "'default' is built in: pick another --name")
        entry = Tracked(name, q, utc_now().isoformat(timespec="seconds"))
        saved = [t for t in existing if not t.builtin] + [entry]
        payload = {"version": 1, "queries": [{"name": t.name, "query": t.query,
                                              "added_utc": t.added_utc} for t in saved]}
        write_text_atomically(path, json.dumps(payload, indent=2) + "\n")
    return entry


def track_remove(models: Path, name: str) -> Tracked:
    """Remove a saved query by name (locked, atomic)."""
    path = tracked_path(models)
    if name == "default":
        raise InputError("the default query is built in and always tracked",
                         fix="remove one of your own queries (see `ddtree-bayes track list`)")
    with exclusive_lock(path):
        # (unchecked: a query refused on reading can still be removed)
        saved = _read_tracked_file(path, check=False)
        gone = [t for t in saved if t.name == name]
        if not gone:
            raise InputError(f"no tracked query called {name!r}"
                             + (f" (tracked: {', '.join(t.name for t in saved)})" if saved else ""),
                             fix="see `ddtree-bayes track list`")
        keep = [t for t in saved if t.name != name]
        payload = {"version": 1, "queries": [{"name": t.name, "query": t.query,
                                              "added_utc": t.added_utc} for t in keep]}
        write_text_atomically(path, json.dumps(payload, indent=2) + "\n")
    return gone[0]


def query_rows(draws, query: dict[str, Any], seed: int, workdir: Path | None = None,
               builtin: bool = False, warnings: list[str] | None = None) -> list[dict]:
    """Posterior predictive rows for a saved query, with ``predict``'s defaults: the flags not
    given come from the fit's default question (b300 / ddtree / sglang,native, or the fit's own
    most-measured configuration when it never measured b300), resolved as ``predict`` resolves
    them (:func:`ddtree_bayes.engine.question.resolve`); the ``builtin`` default query asks a
    fit's own default at that question's acceptance. A query saved without ``--model`` (in a
    project of one model) asks a fit of several models about :func:`project_model`.
    ``warnings``, when given, gets what ``predict`` warns of for the same flags (a name the
    fit never saw, a context past the measured ones, a cache that does not fit). A query
    saved with ``--kv-cache`` is capped, and its memory checked, at that dtype, as predict's.
    ``workdir``: where ``data/`` is (default: here): the cards the query reads that the fit did
    not store (a ``--drafter``), as ``predict`` run there reads them (``db.predict``'s rule),
    and the seed estimates."""
    from ddtree_bayes.core.paths import working_in
    from ddtree_bayes.engine import predictive as P
    from ddtree_bayes.engine.question import Flags, resolve

    # (resolve read a --drafter's card from the current directory, the seed estimates W's;
    # None keeps an enclosing call's directory)
    with working_in(workdir):
        question = resolve(draws, Flags.of(asked_query(draws, query, builtin)))
        if warnings is not None:
            warnings.extend(question.warnings)
        return P.predict_rows(draws, question, prob=0.9, seed=seed, workdir=workdir)


def asked_query(draws, query: dict[str, Any], builtin: bool = False,
                drop_ar_flags: bool = True) -> dict[str, Any]:
    """The flags a saved query asks the fit ``draws``, before the default question fills the
    rest: an AR query's block and budget dropped (not with ``drop_ar_flags`` False: track's
    checks refuse them in a query being added), the project's model (:func:`project_model`)
    when it names none, and for the ``builtin`` default query a derived default's acceptance.
    :func:`query_rows` asks it, and track's checks (:func:`check_accept_limit`,
    :func:`same_query`) check it, so a query is refused or matched as it is answered."""
    q = query
    if drop_ar_flags and q.get("method") == "ar" and (q.get("block") or q.get("budget")):
        # saved before `--method ar` with --block/--budget was refused: they never meant
        # anything to an AR answer, so the query is asked without them (not "cannot answer")
        q = {**q, "block": None, "budget": None}
    if not q.get("model") and (model := project_model(draws)) is not None:
        q = {**q, "model": model}
    if builtin:
        from ddtree_bayes.engine.question import default_question

        d = default_question(draws, q.get("model"))
        if d.accept_assumed:   # (none where predict has none: it refuses the question, and
            #                    so the tracked default cannot answer it, bundled or derived)
            q = {**q, "accept": None}
        elif d.derived:   # (every digit: predict's own)
            q = {**q, "accept": accept_flag(d.accept)}
    return q


def query_flags(query: dict[str, Any]) -> str:
    """``--hardware rtx-pro-6000 --accept 1.95``: a query's flags as given (None left out)."""
    return " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
                    for k, v in query.items() if v is not None and v is not False)


def describe_tracked(draws, t: Tracked) -> str:
    """A tracked query as ``track list`` shows it: its flags, and for the built-in default
    query the flags it asks the fit ``draws`` (:func:`asked_query`: a derived default's
    acceptance, a fit of several models' project model) and that fit's own default question
    (``None``: no fit to say which). It read "--accept 14 (default scenario, sglang and
    native)" for a fit whose default question is vllm eagle3 at its measured 1.94."""
    if not t.builtin:
        return query_flags(t.query)
    if draws is None:
        return f"{query_flags(t.query)} (the latest fit's default question; no fit yet)"
    from ddtree_bayes.engine.question import default_question

    asked = asked_query(draws, t.query, builtin=True)
    d = default_question(draws, asked.get("model"))
    unasked = "; no acceptance to ask it at: give one with track add" if d.accept_assumed else ""
    return " ".join(filter(None, (query_flags(asked),
                                  f"(default question: {d.describe()}{unasked})")))


def default_label(draws, query: dict[str, Any]) -> str:
    """The built-in query's name for a fit's derived default question, or a default no
    acceptance answers (``query_name`` of the flags it fills:
    ``rtx-3090-x1-llama.cpp-ddtree-b16-B32``), where no row answers it to take a label from;
    the bundled default's own name otherwise."""
    from ddtree_bayes.engine.question import default_question

    d = default_question(draws, asked_query(draws, query).get("model"))
    if not d.derived and not d.accept_assumed:
        return query_name(query)
    return query_name({**query, "accept": None, "hardware": d.hardware, "gpus": d.gpus,
                       "engine": ",".join(d.engines), "method": d.method, "block": d.block,
                       "budget": d.budget, "verify_tokens": d.verify_tokens})


def project_model(draws) -> str | None:
    """The model a query without ``--model`` asks a fit of several models about: the model of
    the fit's first measured row, the one the project started with (``add`` appends rows, so
    a query saved while the data held one model keeps asking about it). None for a fit of
    one model (every question is about it)."""
    from ddtree_bayes.engine.target_models import is_multi

    if not is_multi(draws):
        return None
    rows = draws.measurements.rows
    return rows[0].model if rows else None


def row_label(r: dict, with_model: bool = True, kv_cache: str | None = None) -> str:
    """``b300 x8 native ddtree b16/B32 accept 14`` (context shown when not 0; the model first
    when the row names one and ``with_model``; ``kv-cache fp8`` when the query gives
    ``kv_cache``, which a predict row does not carry: two queries differing only in it were
    labelled alike)."""
    parts = [f"{r['hardware']} x{r['gpus']}", r["engine"], r["method"]]
    if with_model and r.get("model"):
        parts.insert(0, r["model"])
    size = "/".join(s for s in ((f"b{r['block']}" if r["block"] is not None else ""),
                                (f"B{r['budget']}" if r["budget"] is not None else "")) if s)
    if size:
        parts.append(size)
    if r["context_tokens"]:
        parts.append(f"ctx {plain_text(float(r['context_tokens']))}")   # (:g: 1.04858e+06)
    if kv_cache is not None:
        parts.append(f"kv-cache {kv_cache}")
    if r.get("drafter"):   # (predict --drafter's row names its card)
        parts.append(f"drafter {r['drafter']}")
    if r.get("new_deployment"):   # (predict --new-deployment's row says it)
        parts.append("new deployment")
    parts.append(f"accept {r['accept']}")
    return " ".join(parts)


def _interval(r: dict) -> dict:
    return {"median": r["median"], "lo90": r["lo90"], "hi90": r["hi90"]}


def asked_accept(r: dict) -> str:
    """The acceptance a predict row was asked at: the value or range given (``14``,
    ``U(12,16)``; ``1`` for ar), or ``default`` when none was (the row's ``accept`` then says
    where it came from, which another fit may answer from elsewhere: a measured mean, the
    prior)."""
    return r["accept"] if r["accept_kind"] in ("given", "uniform") else "default"


def unchanged(warning: str) -> bool:
    """Whether ``warning`` says ``--new-deployment`` changes nothing of an answer
    (engine/structure.py ``new_deployment_warning``)."""
    from ddtree_bayes.engine.structure import NEW_DEPLOYMENT_UNCHANGED

    return warning.startswith(NEW_DEPLOYMENT_UNCHANGED)


def fit_named(warning: str, draws, which: str) -> str:
    """``--new-deployment changes nothing for E M on SYSTEM: why`` of one of the two fits
    :func:`compare_queries` asks, naming it: ``... on SYSTEM in fit ID (before): why``.

    >>> fit_named("--new-deployment changes nothing for sglang ddtree on b300x8: the fit's "
    ...           "fraction step form", type("F", (), {"meta": {"fit_id": "A"}}), "before")[:80]
    '--new-deployment changes nothing for sglang ddtree on b300x8 in fit A (before): '
    """
    head, _, why = warning.partition(": ")
    return f"{head} in fit {draws.meta['fit_id']} ({which}): {why}"


def compare_queries(before, after, tracked: list[Tracked], seed: int,
                    workdir: Path | None = None, warnings: list[str] | None = None
                    ) -> list[dict]:
    """Each tracked query under two fits (``before`` may be None), same seed for both.

    One dict per (query, engine, acceptance asked) row: ``name``, ``model`` (only when a fit
    holds several models: the model the query asks it about), ``label`` (the row's label
    under the later fit that answers it), ``accept_asked`` (:func:`asked_accept`),
    ``accept_before`` / ``accept_after`` (where each fit took the acceptance: without
    ``--accept`` one fit may answer from the prior, the next from a measured mean, and it is
    still the same question), ``before`` and ``after`` (median, lo90, hi90 or None) and
    ``before_error`` / ``after_error`` when a fit cannot answer the query (e.g. an unmeasured
    system, or a fit that failed its convergence gates: predict refuses it, so its interval is
    no answer). ``warnings``, when given, gets what ``predict`` warns of for each query's
    flags under ``after`` (``before`` without it; ``--new-deployment changes nothing`` of
    either, naming the fit: :func:`fit_named`; once each, the query named, and in a fit
    of several models the model it asks: ``tracked query 'default' of
    llama-3.1-8b-instruct: ...``): an engine never measured is answered from the pooled
    population, as predict answers it, not without a word.
    """
    from ddtree_bayes.engine.question import default_question
    from ddtree_bayes.engine.scenario import failures
    from ddtree_bayes.engine.target_models import is_multi

    # a query saved without --model asks a fit of several models about project_model
    # (query_rows); beside a fit of one model its rows are labelled without the model, so the
    # answers of both fits are one row
    one_model = any(d is not None and not is_multi(d) for d in (before, after))
    out: list[dict[str, Any]] = []
    for t in tracked:
        with_model = bool(t.query.get("model")) or not one_model
        # the model asked, as the later fit of several models asks it (a query without --model:
        # the project's model), named beside the label
        model = next((asked_query(d, t.query).get("model") for d in (after, before)
                      if d is not None and is_multi(d)), None)
        named = {} if model is None else {"model": model}
        results: dict[str, dict[str, dict[str, Any]]] = {}
        errors: dict[str, str | None] = {}
        for which, draws in (("before", before), ("after", after)):
            results[which], errors[which] = {}, None
            if draws is None:
                continue
            if not draws.meta.get("converged"):   # predict refuses it: no answer to compare
                errors[which] = (f"fit {draws.meta['fit_id']} failed its convergence gates: "
                                 + failures(draws.meta))
                continue
            warned: list[str] = []
            try:
                # the built-in query asks a derived default at the acceptance its fit measured
                # (asked_query): what was asked is the default's, wherever each fit took it from
                derived = t.builtin and default_question(
                    draws, asked_query(draws, t.query).get("model")).derived
                for r in query_rows(draws, t.query, seed, workdir, builtin=t.builtin,
                                    warnings=warned):
                    # keyed by the whole configuration: a fit's own default question can move
                    # (a larger configuration measured), and then it is another row, not a
                    # change; and by the acceptance as asked, not where a fit took it from
                    asked = "default" if derived else asked_accept(r)
                    kv = t.query.get("kv_cache")
                    results[which][row_label({**r, "accept": asked}, with_model, kv)] = {
                        "label": row_label(r, with_model, kv), "asked": asked,
                        "accept": r["accept"], "interval": _interval(r)}
            except QueryError as err:
                errors[which] = without_fix(err)
            # (what predict warns of under the fit the user now has: ``after``'s; ``before``'s
            # only without one. Both were said: the default of a fit that had just measured
            # budget 32 was warned "more than any measured (at most 9)", the older fit's words)
            if warnings is not None:
                both = before is not None and after is not None
                said = [fit_named(w, draws, which) if both and unchanged(w) else w
                        for w in warned
                        # (--new-deployment's "changes nothing" of either fit, named: the flag
                        # carried one fit's group and not the other's, and the change is that)
                        if which == "after" or after is None or unchanged(w)]
                for w in said:
                    # (in a fit of several models the query's model too: the built-in
                    # default is asked of each model the rows measure, one name for all)
                    text = (f"tracked query {t.name!r}"
                            + ("" if model is None else f" of {model}") + f": {w}")
                    if text not in warnings:
                        warnings.append(text)
        keys = list(dict.fromkeys([*results["before"], *results["after"]]))
        if not keys:
            latest = after if after is not None else before
            label = (default_label(latest, t.query) if t.builtin and latest is not None
                     else query_name(t.query))
            out.append({"name": t.name, **named, "label": label,
                        "accept_asked": t.query.get("accept") or "default",
                        "accept_before": None, "accept_after": None, "before": None,
                        "after": None, "before_error": errors["before"],
                        "after_error": errors["after"]})
        for key in keys:
            b, a = results["before"].get(key), results["after"].get(key)
            either = a or b or {}
            out.append({"name": t.name, **named, "label": either["label"],
                        "accept_asked": either["asked"],
                        "accept_before": b and b["accept"], "accept_after": a and a["accept"],
                        "before": b and b["interval"], "after": a and a["interval"],
                        "before_error": errors["before"], "after_error": errors["after"]})
    if None not in (before, after) and unlike_models(before, after) is not None:
        # each fit answered for its own model (fits of models that share none: ``diff`` of
        # them, or an ``update`` whose data now holds another model's rows): two quantities
        # under one label, not a change
        out = [{**c, "models_differ": True} for c in out]
    return out


def unlike_models_line(before, after, what: str = "") -> str | None:
    """The warning ``diff`` and ``update`` give of fits of models that share none
    (:func:`~ddtree_bayes.workflows.living.fit_history.unlike_models`), ``what`` saying what
    else that means to the command; None for fits sharing a model."""
    unlike = unlike_models(before, after)
    if unlike is None:
        return None
    return (f"fit {before.meta['fit_id']} holds {', '.join(unlike[0])} and fit "
            f"{after.meta['fit_id']} {', '.join(unlike[1])}: {what}each tracked query is "
            "answered for each fit's own model")


def format_change(c: dict) -> str:
    """``default: b300 x8 native ddtree b16/B32 accept 14: 90% 640-1180 -> 780-960 tok/s
    (median 890 -> 860, width -60%)``; with ``models_differ`` (diff of fits of models that
    share none: diff, update) ``...: different models, not one quantity: 90% A 640-640, B 1500-1700 tok/s
    (median A 640, B 1592)``."""
    def iv(x: dict | None) -> str:
        return "-" if x is None else f"{tok_text(x['lo90'])}-{tok_text(x['hi90'])}"

    b, a = c["before"], c["after"]
    text = f"{c['name']}: {c['label']}: 90% {iv(b)} -> {iv(a)} tok/s"
    if b and a and c.get("models_differ"):
        # (fits of models that share none, each answering for its own: two quantities under
        # one label, so no change, as diff's parameter table gives none)
        text = (f"{c['name']}: {c['label']}: different models, not one quantity: 90% A "
                f"{iv(b)}, B {iv(a)} tok/s (median A {tok_text(b['median'])}, B "
                f"{tok_text(a['median'])})")
    elif b and a:
        wb, wa = b["hi90"] - b["lo90"], a["hi90"] - a["lo90"]
        width = percent_text(wa / wb - 1, plus=True) if wb > 0 else "n/a"
        was = c.get("accept_before")
        changed = f"; acceptance was {was}" if was and was != c.get("accept_after") else ""
        text += (f" (median {tok_text(b['median'])} -> {tok_text(a['median'])}, width "
                 f"{width}{changed})")
    elif a and not b:
        text += f" (median {tok_text(a['median'])}; " + (
            f"before: {c['before_error']})" if c.get("before_error") else "new)")
    elif b and not a:
        text += f" (after: {c.get('after_error') or 'not predicted'})"
    else:
        text = f"{c['name']}: {c['label']}: not predictable ({c.get('after_error')})"
    return text

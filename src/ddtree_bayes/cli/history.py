"""CLI commands of the living posterior that read: history, diff, track."""
from __future__ import annotations

import argparse
from pathlib import Path

from ddtree_bayes.cli.output import (
    PROG,
    aligned_table,
    counted,
    emit_json,
    hardware_rows,
    percent_text,
    print_warnings,
    tok_text,
)
from ddtree_bayes.core.config import DEFAULT_SEED
from ddtree_bayes.core.errors import InputError


# ---------------------------------------------------------------- history
def _takes_fit(name: str) -> bool:
    """Does ``--fit name`` parse (cli/args.fit_id)?"""
    from ddtree_bayes.cli.args import fit_id

    try:
        fit_id(name)
    except argparse.ArgumentTypeError:
        return False
    return True


def cmd_history(args: argparse.Namespace) -> int:
    from ddtree_bayes.core import paths
    from ddtree_bayes.workflows import living

    models = paths.models_dir()
    fits = living.list_fits(models)
    if args.format == "json":
        emit_json({"models": str(models), "rows": fits})
        return 0
    if not fits:
        print(f"no fits in {models / 'fits'} (run `{PROG} fit`)")
        return 0
    # two forms on disk (`fit --moe-form power --step-form fraction` beside the default, to
    # `compare`): each fit says its own, since their ids (the data's hash) do not
    forms = len({f.get("form") for f in fits if f["readable"]}) > 1
    # a file named other than its id (a copy, `cp <id>.nc backup.nc`, or a rename) is listed
    # under its id as every fit is: its notes name the file, a copy as a copy
    stems = {Path(f["path"]).stem for f in fits if f.get("path")}
    body = []
    for f in fits:
        path = Path(f.get("path") or f"{f['fit_id']}.nc")
        if path.stem != f["fit_id"]:
            pick = f" (--fit {path.stem})" if _takes_fit(path.stem) else ""
            copy = f"a copy of {f['fit_id']} " if f["fit_id"] in stems else ""
            f = {**f, "file_note": f"{copy}in file {path.name}{pick}"}
        if not f["readable"]:
            # (the latest fit can be the unreadable one: the JSON says latest, so does this)
            body.append([f["fit_id"], "-", "-", "-", "-", "-",
                         ("latest, " if f["latest"] else "") + f"UNREADABLE: {f['error']}"])
            continue
        notes = []
        if f["latest"]:
            notes.append("latest")
        if "file_note" in f:
            notes.append(f["file_note"])
        if forms:
            notes.append(f"{f['form']} form")
        up = f.get("update")
        if up:
            notes.append(f"update of {up.get('previous_fit')}: +{len(up.get('added_rows', []))}"
                         f"/-{up.get('removed_rows', 0)} rows"
                         + (f", {len(up['surprises'])} surprise(s)" if up.get("surprises") else ""))
        rw = f.get("reweight")
        if f.get("made_by") == "psis-reweight" and rw:
            k = rw.get("pareto_k")
            of = "" if rw.get("proposal_fit") == (up or {}).get("previous_fit") else \
                f" of {rw.get('proposal_fit')}'s draws"
            notes.append(f"PSIS reweight{of} (Pareto k {'-' if k is None else f'{k:.2f}'}, "
                         f"{rw.get('n_eff', 0):.0f} effective draws)")
        elif f.get("made_by") == "refit":
            notes.append("refit")
        if not f["converged"] and f.get("failures"):
            notes.append("; ".join(f["failures"]))
        total = f.get("total_s")
        body.append([f["fit_id"], (f["created_utc"] or "-").replace("+00:00", "Z"),
                     (f["data_sha256"] or "-")[:12], str(f["rows"]),
                     "yes" if f["converged"] else "NO",
                     "-" if total is None else f"{total:.1f} s", ", ".join(notes)])
    print(aligned_table(["fit id", "created (UTC)", "data sha256", "rows", "converged", "fit time",
                  "notes"], body, left=3, text_last=True))
    return 0


# ---------------------------------------------------------------- diff
def _resolve_id(models: Path, fit_id: str) -> Path:
    from ddtree_bayes.engine import store

    return store.resolve(models, fit_id)


def _inputs_differ(a, b) -> list[tuple[str, str]]:
    """What besides the rows differs between fits ``a`` and ``b`` (key, line): the priors, the
    sampler's seed and settings, the hardware table, the model forms. ``diff`` named the priors only: of
    two fits of the same rows on different hardware tables it said "same measurements" and
    nothing more."""
    from ddtree_bayes.core.hardware_table import SOURCE_COLUMNS

    out = []
    if a.meta.get("priors", {}).get("sha256") != b.meta.get("priors", {}).get("sha256"):
        out.append(("priors", "priors differ between the two fits"))
    seed_a, seed_b = a.meta.get("seed"), b.meta.get("seed")
    if seed_a != seed_b:   # (the same rows fitted twice: the change is the sampler's noise)
        out.append(("seed", f"sampler seeds differ between the two fits: {seed_a} -> {seed_b} "
                            "(part of every change below is Monte Carlo noise; `fit --seed "
                            f"{seed_a}` makes B's draws comparable)"))
    sampler = _sampler_differs(a.meta, b.meta)
    if sampler is not None:
        out.append(("sampler", sampler))
    # the values by GPU, sources aside, as predict's hardware_changes compares them (a file
    # reordered or a source reworded is the same table)
    def values(fit) -> dict:
        return {n: {c: (v or "").strip() for c, v in row.items() if c not in SOURCE_COLUMNS}
                for n, row in fit.hardware.items()}

    if values(a) != values(b):
        out.append(("hardware table", "hardware table differs between the two fits"))
    ma, mb = a.meta.get("model", {}), b.meta.get("model", {})
    out += _cards_differ(a, b)
    # (a fit before the structured form has no step_form: fraction, as everywhere)
    for key, what, default in (("moe_form", "MoE form", None),
                               ("step_form", "step form", "fraction")):
        if ma.get(key, default) != mb.get(key, default):
            out.append((key, f"{what} differs between the two fits: {ma.get(key, default)} -> "
                             f"{mb.get(key, default)}"))
    return out


#: A fit's sampler settings (meta ``sampler``) and the ``fit`` flag that sets each.
SAMPLER_FLAGS = {"chains": "--chains", "draws": "--draws", "tune": "--tune",
                 "target_accept": "--target-accept", "backend": "--backend"}


def _sampler_differs(a: dict, b: dict) -> str | None:
    """The line saying which sampler settings (chains, draws, tuning, target_accept, backend)
    differ between two fits' metadata ``a`` and ``b``, or None. One seed with other chains or
    draws, or another backend, gives other draws: `diff` of the bundled rows fitted with
    `--chains 2 --draws 2000` against 4 x 1000 printed "same measurements" and every
    parameter's change (the default's width -1%) without a word that it is all Monte Carlo
    noise, as it says for two seeds. The fit flags that make B's draws comparable are named
    unless a fit's remedy ladder chose its settings (a rung's settings asked for again start
    the ladder afresh; rung 3's parameterisation is no flag).

    >>> _sampler_differs({"sampler": {"chains": 4, "draws": 1000}},
    ...                  {"sampler": {"chains": 2, "draws": 2000}})[:66]
    'sampler settings differ between the two fits: chains 4 -> 2, draws'
    >>> _sampler_differs({"sampler": {"chains": 4}}, {"sampler": {"chains": 4}}) is None
    True
    """
    sa, sb = a.get("sampler") or {}, b.get("sampler") or {}
    changed = [k for k in SAMPLER_FLAGS if k in sa and k in sb and sa[k] != sb[k]]
    if not changed:
        return None
    remedied = [m["fit_id"] for m in (a, b)
                if (m.get("remedies") or {}).get("outcome", "passed") != "passed"]
    how = (f"`fit {' '.join(f'{SAMPLER_FLAGS[k]} {sa[k]}' for k in changed)}` makes B's draws "
           "comparable" if not remedied else
           f"the remedy ladder of fit {' and '.join(remedied)} chose "
           f"{'its' if len(remedied) == 1 else 'their'} settings")
    return ("sampler settings differ between the two fits: "
            + ", ".join(f"{k} {sa[k]} -> {sb[k]}" for k in changed)
            + " (other draws of one seed: part of every change below is Monte Carlo noise; "
            + how + ")")


def _cards_differ(a, b) -> list[tuple[str, str]]:
    """The model cards (their modelled fields: :func:`~ddtree_bayes.core.model_cards.modelled`)
    of a model both fits stored, and the drafter cards for a model of either fit, that differ
    between fits ``a`` and ``b`` (key, line). Two proxy cards are made from the rows, which the
    diff lists: they are not compared; a proxy against a real card is named."""

    from ddtree_bayes.core.drafters import drafts_for
    from ddtree_bayes.core.model_cards import modelled

    def models(fit) -> dict[str, tuple[bool, dict]]:
        """name: (a proxy card?, its modelled fields)"""
        model = fit.meta.get("model", {})
        stored = dict(model.get("model_cards") or {})
        if model.get("card"):
            stored[model["card"]["model"]] = model["card"]
        proxy = (model.get("proxy_card") or {}).get("model")
        return {name: (name == proxy, modelled(card)) for name, card in stored.items()}

    def drafters(fit) -> dict[str, tuple[str, str]]:
        """a card's every field: (its name, its target)"""
        from ddtree_bayes.core.drafters import card_key

        return {card_key(d): (d["drafter"], d["target_model"])
                for d in fit.meta.get("model", {}).get("drafter_cards", [])}

    out = []
    ca, cb = models(a), models(b)
    changed = sorted(n for n in ca.keys() & cb.keys()
                     if ca[n] != cb[n] and not (ca[n][0] and cb[n][0]))
    proxies = [f"fit {f.meta['fit_id']}'s" for f, c in ((a, ca), (b, cb))
               if any(c[n][0] for n in changed)]
    if changed:
        out.append(("model cards", f"the model card{'s' * (len(changed) > 1)} of "
                    f"{', '.join(changed)} {'differ' if len(changed) > 1 else 'differs'} "
                    "between the two fits" + (f" ({proxies[0]} is a proxy made from its rows)"
                                              if proxies else "")))
    if all("drafter_cards" in f.meta.get("model", {}) for f in (a, b)):
        targets = {r.model for f in (a, b) for r in f.measurements.rows}
        da, db = drafters(a), drafters(b)
        names = sorted({name for key, (name, target) in {**da, **db}.items()
                        if (key in da) != (key in db)
                        and any(drafts_for(target, m) for m in targets)})
        if names:
            out.append(("drafter cards", f"the drafter card{'s' * (len(names) > 1)} "
                        f"{', '.join(names)} {'differ' if len(names) > 1 else 'differs'} "
                        "between the two fits (changed, added or removed)"))
    return out


def cmd_diff(args: argparse.Namespace) -> int:
    from ddtree_bayes.core import paths
    from ddtree_bayes.engine import store
    from ddtree_bayes.engine.scenario import failures
    from ddtree_bayes.workflows import living

    models = paths.models_dir()
    a = store.load_fit(_resolve_id(models, args.fit_a))
    b = store.load_fit(_resolve_id(models, args.fit_b))
    ida, idb = a.meta["fit_id"], b.meta["fit_id"]
    rows_a, rows_b = living.stored_rows(a), living.stored_rows(b)
    added, removed = living.changed_rows(rows_a, rows_b)
    # a row's model, where the two fits hold several: its configuration alone does not say it
    several = len({r.model for r in (*rows_a.rows, *rows_b.rows)}) > 1
    params = living.parameter_table(a, b, include_auxiliary=args.all)
    tracked = living.load_tracked(models)
    from ddtree_bayes.engine.target_models import is_multi

    if is_multi(a) or is_multi(b):
        # a fit of several models: the default question of each model whose rows differ, as
        # update asks it (the project's first model's when the rows are the same)
        tracked = living.for_models(tracked, [r.model for r in (*added, *removed)])
    warned: list[str] = []
    unlike = living.unlike_models(a, b)
    if unlike:   # (one label, two models' quantities: parameter_table compares none of them)
        print_warnings([living.unlike_models_line(
            a, b, "a parameter per system or group is each fit's own model's (shown side by "
                  "side, no change), and ")], into=warned)
    asked: list[str] = []
    # (fits of models that share none: each entry models_differ, no change)
    changes = living.compare_queries(a, b, tracked, args.seed, warnings=asked)
    print_warnings(asked, into=warned)   # (what predict warns of for a tracked query's flags)
    unconverged = [f for f in (a, b) if not f.meta["converged"]]
    differ = _inputs_differ(a, b)
    if args.format == "json":
        emit_json({"fit_a": ida, "fit_b": idb, "added_rows": [r.__dict__ for r in added],
               "removed_rows": [r.__dict__ for r in removed], "parameters": params,
               "tracked": changes, "seed": args.seed,
               "unconverged": list(dict.fromkeys(f.meta["fit_id"] for f in unconverged)),
               "inputs_differ": [d for d, _ in differ], "warnings": warned})
        return 0
    print(f"{PROG} diff: fit {ida} ({counted(a.meta['data']['rows'], 'measurement')}) -> fit "
          f"{idb} ({counted(b.meta['data']['rows'], 'measurement')})")
    for f in dict((f.meta["fit_id"], f) for f in unconverged).values():   # (its table: no posterior)
        print(f"fit {f.meta['fit_id']} failed its convergence gates "
              f"({failures(f.meta)}): its intervals below are not a "
              "posterior")
    for _, line in differ:
        print(line)
    for r in added:
        print(f"  + row {r.row}: {living.describe_row(r, several)}")
    for r in removed:
        print(f"  - row {r.row}: {living.describe_row(r, several)}")
    if not added and not removed:
        print("  same measurements")

    def iv(x: dict | None) -> tuple[str, str]:
        if x is None:
            return "-", "-"
        return f"{x['median']:.3g}", f"{x['lo90']:.3g} to {x['hi90']:.3g}"

    body, own = [], []
    for p in params:
        ma, ia = iv(p["a"])
        mb, ib = iv(p["b"])
        if p.get("models_differ"):
            own.append([p["parameter"], ma, ia, mb, ib])
            continue
        mc = p.get("median_change")
        wc = p.get("width_change")
        if p.get("change_scale") == "absolute":
            change = f"{p['median_shift']:+.3g} abs"
        else:
            change = "-" if mc is None else percent_text(mc, plus=True)
        body.append([p["parameter"], ma, ia, mb, ib, change,
                     "-" if wc is None else percent_text(wc, plus=True)])
    print("\nposterior median and 90% interval per parameter, A -> B"
          + ("" if args.all else " (non-centred *_z auxiliaries hidden; --all shows them)") + ":")
    print(aligned_table(["parameter", "median A", "90% A", "median B", "90% B", "median change",
                  "90% width change"], body, left=1))
    if any(p.get("change_scale") == "absolute" for p in params):
        print("median change: 'abs' is B - A for a parameter on the real line (log scale, "
              "engine effect, offset: a percentage of it means nothing), else B vs A in %")
    if own and unlike:
        print(f"\nper-system and per-group parameters of different models (A "
              f"{', '.join(unlike[0])}, B {', '.join(unlike[1])}): not one quantity, no change:")
        print(aligned_table(["parameter", "median A", "90% A", "median B", "90% B"], own,
                            left=1))
    print(f"\ntracked queries, fit {ida} -> {idb} (posterior predictive, seed {args.seed}):")
    for c in changes:
        print(f"  {living.format_change(c)}")
    return 0


# ---------------------------------------------------------------- track
def cmd_track(args: argparse.Namespace) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.errors import ArtifactError, QueryError
    from ddtree_bayes.engine.scenario import failures
    from ddtree_bayes.workflows import living

    models = paths.models_dir()
    query_flags = {k: getattr(args, k) for k in living.QUERY_KEYS}
    action = args.action or "add"
    if action != "add" and (any(v is not None for v in query_flags.values()) or args.name):
        raise InputError(f"`track {action}` takes no query flags",
                         fix=f"`{PROG} track --accept 14 ...` saves a query")
    if action == "list":
        tracked = living.load_tracked(models)
        if args.format == "json":
            emit_json({"file": str(living.tracked_path(models)),
                   "rows": [t.__dict__ for t in tracked]})
            return 0
        try:   # (the built-in query asks the latest fit's own default question)
            latest = api.load() if any(t.builtin for t in tracked) else None
        except ArtifactError:   # no fit yet, or one that cannot be read
            latest = None
        body = [[t.name, living.describe_tracked(latest, t),
                 "built in" if t.builtin else (t.added_utc or "-")] for t in tracked]
        print(aligned_table(["name", "query", "added (UTC)"], body, text_last=True))
        return 0
    if action == "remove":
        if not args.target:
            raise InputError("which query? `track remove NAME`", fix=f"see `{PROG} track list`")
        gone = living.track_remove(models, args.target)
        if args.format == "json":
            emit_json({"action": "remove", "file": str(living.tracked_path(models)),
                   "query": gone.__dict__})
            return 0
        print(f"no longer tracking {gone.name}")
        return 0
    if args.target:
        raise InputError(f"unexpected argument {args.target!r}",
                         fix="give the query with flags, e.g. `track --hardware b300 --accept 14`;"
                             " name it with --name")
    if query_flags["hardware"] is not None and query_flags["hardware"] not in hardware_rows(None):
        raise QueryError(f"unknown hardware {query_flags['hardware']!r}",
                         fix="use a name from data/hardware.csv")
    unreadable = None
    try:
        draws = api.load()
    except ArtifactError as err:   # no fit yet, or a latest fit that cannot be read
        draws = None
        from ddtree_bayes.engine import store

        unreadable = str(err) if (models / store.LATEST).exists() else None
    # (an acceptance the configuration cannot emit is refused: nothing saved)
    entry = living.track_add(models, query_flags, args.name, draws=draws)
    text = args.format != "json"
    if text:
        print(f"tracking {entry.name}: {living.query_flags(entry.query)}")
    now: dict = {"fit_id": None, "rows": [], "note": None}
    warned: list[str] = []   # what predict warns of for these flags (also the JSON's)
    try:
        if draws is None:
            now["note"] = ("no fit yet: `ddtree-bayes update` and `diff` will show it"
                           if unreadable is None else
                           f"the latest fit cannot be read ({unreadable}); `ddtree-bayes "
                           "update` and `diff` show it once a fit can")
            if text:
                print(f"  ({now['note']})")
        elif not draws.meta.get("converged"):   # predict refuses it (exit 5): no answer here
            now["fit_id"] = draws.meta["fit_id"]
            now["note"] = (f"the latest fit {draws.meta['fit_id']} failed its convergence gates "
                           f"({failures(draws.meta)}): no answer from it; "
                           "`update` and `diff` show it once a fit passes")
            if text:
                print(f"  {now['note']}")
        else:
            now["fit_id"] = draws.meta["fit_id"]
            # (`track --engine sglnag` answered from the pooled population without a word)
            rows = living.query_rows(draws, entry.query, DEFAULT_SEED, builtin=entry.builtin,
                                     warnings=warned)
            print_warnings(warned)
            kv = entry.query.get("kv_cache")
            for r in rows:
                label = living.row_label(r, kv_cache=kv)
                now["rows"].append({"label": label, "median": r["median"],
                                    "lo90": r["lo90"], "hi90": r["hi90"]})
                if text:
                    print(f"  now (fit {draws.meta['fit_id']}): {label}: median "
                          f"{tok_text(r['median'])}, 90% {tok_text(r['lo90'])}-"
                          f"{tok_text(r['hi90'])} tok/s")
    except QueryError as err:
        now["note"] = (f"the latest fit cannot answer it yet ({living.without_fix(err)}); "
                       "`update` and `diff` show it once a fit can")
        if text:
            print(f"  {now['note']}")
    if not text:
        emit_json({"action": "add", "file": str(living.tracked_path(models)),
               "query": entry.__dict__, "now": now, "warnings": warned})
    return 0

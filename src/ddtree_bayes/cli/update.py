"""``ddtree-bayes update``: score the new rows, then reweight the latest fit's draws (PSIS) or
refit, and show what the tracked queries did.

The reweighting path imports no PyMC/PyTensor/nutpie (a whole process in about a second);
the library side is ``workflows.living`` (``reweight`` for the importance weights)."""
from __future__ import annotations

import argparse
import shlex
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from ddtree_bayes.cli.output import (
    PROG,
    aligned_table,
    counted,
    emit_json,
    print_warnings,
    shown_path,
    tok_text,
)
from ddtree_bayes.core.config import DEFAULT_SEED

SAMPLER_FLAGS = ("chains", "draws", "tune", "backend")

#: What ``update`` says of a priors file edited only where no fit reads it.
UNFITTED_PRIORS = "the priors file changed only in what no fit reads ([acceptance_curve], comments)"


def _score_table(scores: list[dict]) -> str:
    from ddtree_bayes.workflows import living

    body = []
    for s in scores:
        head = [f"row {s['row']}", s["configuration"], f"{s['measured']:g}"]
        if s["status"] == "unpredictable":
            body.append(head + ["-", "-", "-", "-", "cannot score"])
            continue
        low = s["percentile"] < 0.5
        verdict = "ok" if s["status"] == "ok" else (
            f"SURPRISE ({'below the 1st' if low else 'above the 99th'} percentile)")
        if s.get("transferred"):
            verdict += " (by transfer)"
        body.append(head + [tok_text(s["median"]), f"{tok_text(s['lo50'])}-{tok_text(s['hi50'])}",
                            f"{tok_text(s['lo90'])}-{tok_text(s['hi90'])}",
                            living.format_percentile(s["percentile"]), verdict])
    return aligned_table(["row", "configuration", "measured", "predicted", "50%", "90%",
                   "percentile", "verdict"], body, text_last=True)


def _way_table(way: str, psis: dict | None, reasons: list[str]) -> str:
    """One row: which way the update went, the Pareto k against its limit, the weights' ESS."""
    k = psis["pareto_k"] if psis else None
    cells = [way,
             "-" if psis is None else ("-" if k is None else f"{k:.2f}"),
             "-" if psis is None else f"{psis['k_threshold']:.2f}",
             "-" if psis is None else f"{psis['weights_ess']:.0f}/{psis['n_draws']}",
             "; ".join(reasons) if reasons else "k within the limit: no refit needed"]
    return aligned_table(["update", "pareto k", "k limit", "weights ESS", "why"], [cells],
                  text_last=True)


def _made_on_other_file(previous, data_path: Path) -> str | None:
    """The data file ``previous`` was fitted on, with its row count, when it is another file
    than ``data_path`` (a fit of the bundled data, then a first `add` started
    data/measurements.csv); None when it is the same file or not recorded.

    >>> from ddtree_bayes.engine.testing import point_mass_draws
    >>> _made_on_other_file(point_mass_draws(), Path("data/m.csv")).startswith(
    ...     "the bundled data (/"), _made_on_other_file(point_mass_draws(), Path("data/m.csv"))[-9:]
    (True, ', 9 rows)')
    """
    from ddtree_bayes.core.paths import bundled

    made_on = previous.meta.get("data", {}).get("path")
    if not made_on or Path(made_on).resolve() == Path(data_path).resolve():
        return None
    rows = counted(len(previous.measurements.rows), "row")
    if Path(made_on).resolve() == bundled("measurements.csv").resolve():
        return f"the bundled data ({made_on}, {rows})"
    return f"{made_on} ({rows})"


def _cheap_reasons(args, previous, scores: list[dict], removed, other_inputs: list[str],
                   *, data_path: Path | None = None) -> list[str]:
    """Why a refit is needed, from what is known before any likelihood is computed
    (``data_path``: the file this update reads, which the fit may not have been made on)."""
    prev_id = previous.meta["fit_id"]
    reasons = []
    if args.refit:
        reasons.append("--refit")
    if args.force:
        reasons.append("--force")
    given = [f"--{f}" for f in SAMPLER_FLAGS if getattr(args, f) is not None]
    if given:
        reasons.append(f"{', '.join(given)} given (sampler settings are for a refit)")
    model = previous.meta.get("model", {})
    for flag, key in (("moe_form", "moe_form"), ("step_form", "step_form")):
        given = getattr(args, flag)
        if given and given != model.get(key):
            reasons.append(f"--{flag.replace('_', '-')} {given} (fit {prev_id} is "
                           f"{model.get(key)})")
    if not previous.meta.get("converged"):
        reasons.append(f"fit {prev_id} failed its convergence gates")
    if removed and data_path is not None and _made_on_other_file(previous, data_path):
        reasons.append(f"fit {prev_id} was made on another data file: {len(removed)} of its "
                       f"rows are not in {shown_path(data_path)}")
    elif removed:
        reasons.append(f"{counted(len(removed), 'row')} of fit {prev_id} "
                       "removed or edited")
    reasons += [f"{what} changed since fit {prev_id}" for what in other_inputs]
    for s in scores:
        if s["status"] == "unpredictable":
            reasons.append(f"row {s['row']}: fit {prev_id} cannot predict it")
        elif s["status"] == "surprise":
            reasons.append(f"row {s['row']} is a surprise")
        elif s.get("transferred"):
            # (a fit of several models may have measured the system with another model)
            reasons.append(f"row {s['row']} is on {s['system']}, " + (
                f"where fit {prev_id} never measured {s['model']}" if "model" in s else
                f"not measured in fit {prev_id}"))
    return reasons


def _try_reweight(args, previous, measurements, cfg, forms: tuple, models: Path,
                  reasons: list[str], structure: dict):
    """Fill ``reasons`` (why not) or return (proposal, its rows, spec, weights) to reweight."""
    from ddtree_bayes.engine.fitting import with_forms
    from ddtree_bayes.workflows.living import reweight

    proposal, why = reweight.proposal_of(previous, models)
    if why:
        reasons.append(why)
        return None
    old = proposal.measurements
    added, kept, gone = reweight.pair_rows(old, measurements)
    if gone:
        reasons.append(f"{len(gone)} row(s) of fit {proposal.meta['fit_id']} (whose draws a "
                       "reweight starts from) removed or edited")
        return None
    cfg_fit = with_forms(cfg, *forms)
    changes, spec, model = reweight.structure_changes(proposal, measurements, cfg_fit, structure)
    if changes:
        moved = [(i, j) for i, j in kept if i != j] if not added else []
        if moved and all(c.startswith(reweight.REORDERED) for c in changes):
            # the same rows, in another order, and nothing else: the coordinates follow it
            i, j = moved[0]
            reasons.append(f"the rows are fit {proposal.meta['fit_id']}'s in another order "
                           f"(row {old.rows[i].row} is now row {measurements.rows[j].row}; "
                           f"{len(moved)} moved): the model's coordinates follow the rows' "
                           "order, so its draws are not in the new model's order")
        else:
            reasons += [f"the {'new rows change' if added else 'inputs change'} the model: {c}"
                        for c in changes]
        return None
    seed = args.seed if args.seed is not None else int(previous.meta.get("seed", DEFAULT_SEED))
    weights = reweight.importance_weights(proposal, old, measurements, added, kept, model, seed)
    reasons += weights.refit_reasons
    return proposal, spec, weights, len(added)


def _check_default_data(previous, default: Path) -> None:
    """Refuse an ``update`` without ``--data`` whose default file is not the one the fit was
    made on, when that file is still here to update with: the bundled copy (no
    data/measurements.csv here) after ``fit --data mine.csv``, or another file of this
    directory. Read silently, its rows were scored as new rows of another model, the fit's
    own called removed, and a refit of them became the latest fit (exit 0). A fit made in
    another directory (a copied workspace: its ``meta["workdir"]``, or for a fit that does
    not record it, its file outside this one) or on the bundled copy updates from the default,
    and so does one whose file the default is a copy of (the fit's stored sha256: another
    install's bundled data, a workspace's data/measurements.csv copied from mine.csv), or
    that copy with its rows' notes or sources edited, which no fit reads (engine/scenario.py
    ``holds_fitted_rows``: predict calls the fit fresh by such an edit)."""
    from ddtree_bayes.engine.scenario import holds_fitted_rows

    _check_default_file(previous.meta, "data", default, "measurements.csv",
                        "made on {mine}", "data/measurements.csv", "data",
                        "to fold in that file's new rows",
                        same=lambda here: holds_fitted_rows(previous, here))


def _check_default_priors(previous, default: Path) -> None:
    """The same for ``--priors``: after ``fit --priors mine.toml``, an ``update`` without it
    read models/priors.toml (or the bundled priors), said "priors changed since fit ..." of
    a file that had not changed, and refitted on the other priors (exit 0). A copy of the
    fit's priors differing only where no fit reads (comments, layout, ``[acceptance_curve]``:
    engine/scenario.py ``fitted_priors_same``, as ``update`` below reads such an edit) is
    the fit's priors."""
    from ddtree_bayes.core import per_call
    from ddtree_bayes.engine.scenario import fitted_priors_same

    def same(here: Path) -> bool:
        try:
            text = per_call.read_text(here, encoding="utf-8")
        except (OSError, UnicodeDecodeError):   # (the priors reader names the problem)
            return False
        return fitted_priors_same(text, previous.priors_toml)

    _check_default_file(previous.meta, "priors", default, "priors.toml",
                        "made with the priors {mine}", "models/priors.toml", "priors",
                        "to keep that fit's priors", same=same)


def _check_default_hardware(meta: dict) -> None:
    """The same for ``--hardware-file``: after ``fit --hardware-file myhw.csv``, an ``update``
    without it read data/hardware.csv (or the built-in table), said "hardware table changed
    since fit ..." and refitted on the other table (exit 0). A fit records its user file
    (``meta["hardware"]``, :func:`~ddtree_bayes.engine.fitting.hardware_meta`); one made on
    the built-in table alone, or before fits recorded it, is not checked."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.hardware_table import user_hardware_file

    default = user_hardware_file() or paths.bundled("hardware.csv")
    _check_default_file(meta, "hardware", default, "hardware.csv",
                        "made with the hardware table {mine}", "data/hardware.csv",
                        "hardware table", "to keep that fit's table", flag="hardware-file")


def _check_default_file(meta: dict, key: str, default: Path, bundled_name: str, made: str,
                        local: str, what: str, keep: str, flag: str | None = None,
                        same: Callable[[Path], bool] | None = None) -> None:
    """Refuse to read ``default`` (``update`` without ``--<flag>``, by default ``--<key>``) in
    place of the file ``meta[key]`` names, while that file is here and the default holds
    other text (its hash another; ``same``: or it says other than the fit's file where a fit
    reads it)."""
    from ddtree_bayes.core import paths
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.engine.scenario import holds_fitted
    from ddtree_bayes.engine.store import made_elsewhere

    flag = flag or key
    stored = (meta.get(key) or {}).get("path")
    if not stored:
        return
    made_on, here = Path(stored).resolve(), default.resolve()
    bundled = paths.bundled(bundled_name).resolve()
    if made_on == here or made_on == bundled or not made_on.is_file():
        return
    if here.is_file() and (holds_fitted(meta[key].get("sha256", ""), here)
                           or (same is not None and same(here))):
        return
    # a fit made in another directory (a copied workspace) updates from this one's default;
    # a fit made here does not, wherever its file is (`fit --priors /shared/tight.toml`). A fit
    # that does not record where it was made: its file outside this directory says elsewhere
    cwd = Path.cwd().resolve()
    elsewhere = made_elsewhere(meta, cwd)
    if elsewhere is None:
        elsewhere = not made_on.is_relative_to(cwd)
    if here != bundled and elsewhere:
        return
    given = paths.data_flag(made_on) if key == "data" else \
        f" --{flag} {shlex.quote(paths.shown(made_on))}"
    other = paths.shown(default)
    raise InputError(
        f"fit {meta['fit_id']} was {made.format(mine=paths.shown(made_on))}, but `update` "
        f"without --{flag} reads {other}"
        + (f" (no {local} here: the bundled {what})" if here == bundled else ""),
        fix=f"pass{given} {keep}, or --{flag} {shlex.quote(other)} to refit on the other file")


def cmd_update(args: argparse.Namespace) -> int:
    from ddtree_bayes.core import paths
    from ddtree_bayes.engine import inference, store
    from ddtree_bayes.workflows import living

    t_start = time.perf_counter()
    models = paths.models_dir()
    previous = store.load_held(store.resolve(models))   # (a reweight copies it: read once)
    tracked = living.load_tracked(models)  # a malformed tracked.json stops us before the refit
    prev_id = previous.meta["fit_id"]
    data_path = Path(args.data) if args.data else paths.data_file("measurements.csv")
    if not args.data:
        _check_default_data(previous, data_path)
    if not args.priors:
        _check_default_priors(previous, paths.priors_file())
    if not args.hardware_file:
        _check_default_hardware(previous.meta)
    from ddtree_bayes.engine.fitting import FitInputs

    inputs = FitInputs.read(data_path, args.priors, args.hardware_file)
    measurements, cfg, hardware_text = inputs.measurements, inputs.priors, inputs.hardware.text
    stored = previous.measurements
    added, removed = living.changed_rows(stored, measurements)
    from ddtree_bayes.engine.target_models import is_multi

    if is_multi(previous) or measurements.multi_model:
        # a fit of several models: the default question of each model the changed rows
        # measure, not the project's first model's (unchanged when no row changed)
        tracked = living.for_models(tracked, [r.model for r in (*added, *removed)])
    inputs_hash = inference.inputs_sha256(measurements, cfg, hardware_text)
    seed = args.seed if args.seed is not None else int(previous.meta.get("seed", DEFAULT_SEED))
    scores = living.score_rows(previous, added, seed)
    surprises = [s for s in scores if s["status"] == "surprise"]
    unpredictable = [s for s in scores if s["status"] == "unpredictable"]
    other_inputs = []
    from ddtree_bayes.engine.scenario import card_changes, fitted_priors_same

    # an edit of what no fit reads ([acceptance_curve], comments: NOT_FITTED_PRIORS, which
    # predict and optimize ignore too) is no reason to refit: the draws are kept as they are
    # in a fit that stores the file's text (the reweight below, with nothing to reweight by)
    priors_edited = cfg.sha256 != previous.meta.get("priors", {}).get("sha256")
    unfitted = priors_edited and fitted_priors_same(cfg.text, previous.priors_toml)
    if priors_edited and not unfitted:
        other_inputs.append("priors")
    if hardware_text != previous.hardware_csv:
        other_inputs.append("hardware table")
    # (the inputs hash has no cards; those here are the ones the inputs read; a drafter
    # card's block_size, which the questions read from the card here, counts: it bounds the
    # acceptances the fit inferred)
    cards_changed = bool(card_changes(
        previous, cards_here=(inputs.file_cards, inputs.drafters), blocks=True))
    if cards_changed:
        other_inputs.append("model or drafter cards")
    up_to_date = inputs_hash == previous.meta.get("inputs_sha256") and not cards_changed
    report: dict = {"previous_fit": prev_id, "data": str(data_path), "seed": seed,
                    "new_rows": scores, "removed_rows": [r.__dict__ for r in removed],
                    "other_changes": other_inputs, "surprises": len(surprises),
                    "unpredictable": len(unpredictable),
                    # (every line printed: what fit warns of the data, as a reweight or the
                    # refit prints it, then what the tracked queries warn of: _tracked)
                    "warnings": []}
    text = args.format == "table"
    if text:
        _print_scores(previous, stored, measurements, data_path, added, removed, scores,
                      other_inputs, seed)
        if unfitted:
            print(f"{UNFITTED_PRIORS} since fit {prev_id}: no reason to refit")
    if surprises and args.reject_surprises:
        report["rejected"] = True
        if not text:
            emit_json(report)
        rows = ", ".join(f"row {s['row']} ({living.format_percentile(s['percentile'])})"
                         for s in surprises)
        raise living.SurpriseError(
            f"--reject-surprises: {rows} outside the 1st-99th percentile of fit {prev_id}; "
            "nothing refitted",
            fix="check the measurement; run `ddtree-bayes update` without --reject-surprises "
                "to absorb it")
    model = previous.meta.get("model", {})
    refit_flags = [f"--{f}" for f in SAMPLER_FLAGS if getattr(args, f) is not None] + [
        f"--{flag.replace('_', '-')}" for flag in ("moe_form", "step_form")
        if getattr(args, flag) and getattr(args, flag) != model.get(flag)]
    if up_to_date and not (args.force or args.refit or refit_flags):
        report.update(refit=None, made_by=None)
        if text:
            print(f"fit {prev_id} is up to date with {shown_path(data_path)} (no new, edited or removed "
                  "rows; same priors, hardware table and cards): nothing to refit (--force refits "
                  "anyway)")
        else:
            emit_json(report)
        return 0
    forms = (args.moe_form or model.get("moe_form"), args.step_form or model.get("step_form"))
    reasons = _cheap_reasons(args, previous, scores, removed, other_inputs,
                             data_path=data_path)
    attempt = None if reasons else _try_reweight(args, previous, measurements, cfg, forms,
                                                 models, reasons, inputs.structure())
    psis = attempt[2].summary() if attempt else None
    update_meta = {"previous_fit": prev_id, "added_rows": [s["row"] for s in scores],
                   "removed_rows": len(removed), "surprises": [s["row"] for s in surprises],
                   "other_changes": other_inputs}
    report.update(refit_reasons=reasons, psis=psis, refit=None, reweight=None)
    if attempt and not reasons:
        # what fit warns of the data (a refit's fit prints it itself, and _refit keeps it)
        print_warnings(inputs.warnings(cfg), report["warnings"])
        return _reweighted(args, report, previous, attempt, measurements, cfg, hardware_text,
                           inputs_hash, seed, models, update_meta, tracked, t_start)
    return _refit(args, report, previous, data_path, measurements, cfg, forms, seed,
                  update_meta, reasons, psis, tracked, t_start)


def _print_scores(previous, stored, measurements, data_path, added, removed, scores,
                  other_inputs, seed: int) -> None:
    from ddtree_bayes.core.pairs import pair_label
    from ddtree_bayes.engine.target_models import is_multi
    from ddtree_bayes.workflows import living

    prev_id = previous.meta["fit_id"]
    # a fit (or data) of several models: each note names its row's model, as the score
    # table's configuration does (its configuration alone does not say it)
    several = is_multi(previous) or measurements.multi_model
    prev_path = previous.meta.get("data", {}).get("path")
    print(f"{PROG} update: {shown_path(data_path)} ({counted(len(measurements.rows), 'measurement')}) "
          f"vs fit {prev_id} ({counted(len(stored.rows), 'measurement')}"
          f"{', UNCONVERGED' if not previous.meta.get('converged') else ''})")
    other_file = _made_on_other_file(previous, data_path)
    if other_file and removed:   # (its rows were not edited or deleted: they are elsewhere)
        kept = len(stored.rows) - len(removed)
        here = shown_path(data_path)
        print(f"fit {prev_id} was made on {other_file}, "
              f"not on {here}, which holds {'none' if not kept else kept} of its rows: the "
              f"refit fits {here} alone (copy the rows to keep into it):")
        for r in removed:
            print(f"  row {r.row}: {living.describe_row(r, several)}")
        removed = []
    elif other_file:
        print(f"note: fit {prev_id} was made on {prev_path}")
    if added:
        print(f"\n{counted(len(added), 'new measurement')}, scored "
              f"against fit {prev_id}'s posterior predictive (seed {seed}):")
        print(_score_table(scores))
        for s in scores:
            if s["status"] == "unpredictable":
                print(f"  row {s['row']}: fit {prev_id} cannot predict it ({s['reason']}); the "
                      "refit will be the first to include it")
            elif s.get("transferred"):
                head = s["overhead_from"].split(";")[0]   # (its first clause: close its "(")
                head += ")" * (head.count("(") - head.count(")"))
                print(f"  row {s['row']}: {head}: a wide "
                      "interval; the refit will be the first to include this system")
            elif "unmeasured group" in s.get("overhead_from", ""):
                system = pair_label(s.get("model") or "", s["system"], "model" in s)
                print(f"  row {s['row']}: {system}/{s['engine']}/{s['method']} was not "
                      "measured in that fit: its overhead fraction comes from the pooled "
                      "population (a wide interval)")
        for s in scores:
            if s["status"] == "surprise":
                model = f"{s['model']}, " if "model" in s else ""
                print(f"  row {s['row']}: {model}{s['description']} is at the "
                      f"{living.format_percentile(s['percentile'])} percentile of the "
                      "prediction: a possible regime change (new driver, kernel or engine "
                      "version?) or a data-entry error. Check it before trusting the refit.")
    for r in removed:
        print(f"row {r.row} of fit {prev_id} is no longer in the data (edited or deleted): "
              f"{living.describe_row(r, several)}")
    if other_inputs:
        print(f"changed since fit {prev_id}: {', '.join(other_inputs)}")


def _tracked(previous, after, tracked, seed: int, text: bool, report: dict) -> None:
    from ddtree_bayes.workflows import living

    warned: list[str] = []
    # (a refit of another model's rows, the previous fit's all gone: as diff says it, each
    # entry models_differ and no change)
    unlike = living.unlike_models_line(previous, after)
    if unlike is not None:
        warned.append(unlike)
    changes = living.compare_queries(previous, after, tracked, seed, warnings=warned)
    print_warnings(warned)   # (what predict warns of for a tracked query's flags)
    report["tracked"] = changes
    report["warnings"] = [*report["warnings"], *warned]   # (after the data's: as printed)
    if text:
        print(f"\ntracked queries, fit {previous.meta['fit_id']} -> {after.meta['fit_id']} "
              f"(posterior predictive, seed {seed}):")
        for c in changes:
            print(f"  {living.format_change(c)}")


def _finish(previous, after, tracked, seed: int, text: bool, report: dict, path: Path,
            t_start: float, *, total_said: bool) -> None:
    """How an update that made a fit ends, reweighted or refit: the tracked queries before
    and after (:func:`_tracked`), the total time, then the saved file's line (with the total,
    unless ``total_said``: the refit's line gave it) or the JSON report."""
    _tracked(previous, after, tracked, seed, text, report)
    report["total_s"] = time.perf_counter() - t_start
    if not text:
        emit_json(report)
    elif total_said:
        print(f"saved {shown_path(path)}")
    else:
        print(f"saved {shown_path(path)} (update total {report['total_s']:.2f} s)")


def _reweighted(args, report, previous, attempt, measurements, cfg, hardware_text, inputs_hash,
                seed, models, update_meta, tracked, t_start) -> int:
    from ddtree_bayes.engine.structure import restructured_line
    from ddtree_bayes.workflows.living import reweight

    proposal, spec, weights, n_added = attempt
    t0 = time.perf_counter()
    after = reweight.save_reweighted(previous, proposal, weights, spec, measurements, cfg,
                                     hardware_text, inputs_hash, seed, models, update_meta,
                                     t_start)
    save_s = time.perf_counter() - t0
    fit_id, path = after.meta["fit_id"], after.path
    text = args.format == "table"
    report["made_by"] = reweight.MADE_BY_REWEIGHT
    report["reweight"] = {"fit_id": fit_id, "path": str(path), "converged": True,
                          "proposal_fit": proposal.meta["fit_id"],
                          "reweight_s": weights.seconds, "save_s": save_s}
    if text:
        print()
        print(_way_table("reweight", report["psis"], []))
        base = "" if proposal is previous else f" (the sampled fit behind {previous.meta['fit_id']})"
        if weights.uniform:
            # (rows whose notes or sources alone were edited: no fit reads them)
            texts = (Counter(m.key() for m in previous.measurements.rows)
                     != Counter(m.key() for m in measurements.rows))
            changed = [what for what, now, key in (
                ("the data file changed only in its rows' notes or sources" if texts else
                 "the data file changed only in form", measurements.sha256, "data"),
                (UNFITTED_PRIORS, cfg.sha256, "priors"))
                if now != previous.meta.get(key, {}).get("sha256")]
            print(f"fit {fit_id}: fit {proposal.meta['fit_id']}'s {weights.n_draws} NUTS draws"
                  f"{base} as they are: no row was added, edited or removed since ("
                  f"{'; '.join(changed) or 'the inputs changed only in form'}), so there is "
                  f"nothing to reweight by (no refit; {weights.seconds + save_s:.2f} s)")
        else:
            print(f"fit {fit_id}: fit {proposal.meta['fit_id']}'s {weights.n_draws} NUTS draws"
                  f"{base} reweighted by the likelihood of the {counted(n_added, 'row')} "
                  "added since, Pareto-smoothed and resampled "
                  f"(no refit) in {weights.seconds + save_s:.2f} s")
        for g in weights.restructured_groups:
            print(f"  {restructured_line(after, g)}")
        print(f"  its R-hat, ESS and divergences are fit {proposal.meta['fit_id']}'s NUTS run's"
              + ("; its draws unchanged." if weights.uniform else
                 f"; the resampled draws are worth about {weights.n_eff:.0f} independent draws "
              f"(weights ESS {weights.weights_ess:.0f} x relative efficiency "
                 f"{weights.r_eff:.2f} of the NUTS draws).") + " `update --refit` samples afresh.")
    _finish(previous, after, tracked, seed, text, report, path, t_start, total_said=False)
    return 0


def _refit(args, report, previous, data_path, measurements, cfg, forms, seed, update_meta,
           reasons, psis, tracked, t_start) -> int:
    from ddtree_bayes import api
    from ddtree_bayes.core.config import SamplerSettings
    from ddtree_bayes.engine import store

    text = args.format == "table"
    prev_id = previous.meta["fit_id"]
    sampler = {**SamplerSettings().as_dict(), **previous.meta.get("sampler", {})}
    # the previous fit's draws (an artifact without them: sized to the model, as fit does)
    draws = args.draws or (int(sampler["draws"]) if isinstance(sampler["draws"], int) else None)
    settings = SamplerSettings(
        chains=args.chains or int(sampler["chains"]), draws=draws,
        tune=args.tune if args.tune is not None else int(sampler["tune"]),
        target_accept=float(sampler["target_accept"]),
        backend=args.backend or str(sampler["backend"]))
    if text:
        print()
        print(_way_table("refit", psis, reasons))
        print(f"refitting on all {counted(len(measurements.rows), 'measurement')} (exact NUTS, cold "
              f"start; {settings.chains_x_draws()}, "
              f"{settings.tune} tuning, seed {seed})...", flush=True)
        moe_form, step_form = forms
        def origin(flag: str) -> str:   # (the flag's value, else the latest fit's)
            return f"from --{flag}" if getattr(args, flag.replace("-", "_")) else \
                f"as in fit {prev_id}"

        if moe_form and moe_form != cfg.moe_form:
            print(f"MoE form {moe_form} {origin('moe-form')} (the priors file says "
                  f"{cfg.moe_form}; --moe-form chooses)")
        if step_form and step_form != cfg.step_form:
            print(f"step form {step_form} {origin('step-form')} (the priors file says "
                  f"{cfg.step_form}; --step-form chooses)")
    t_fit = time.perf_counter()
    extra = {"update": update_meta, "made_by": "refit", "refit_reasons": reasons}
    if psis:
        extra["psis"] = psis
    result = api.fit(data_path, args.priors, seed=seed, hardware=args.hardware_file,
                     moe_form=forms[0], step_form=forms[1], progress=not args.quiet,
                     chains=settings.chains,
                     draws=settings.draws, tune=settings.tune,
                     target_accept=settings.target_accept, backend=settings.backend,
                     extra_meta=extra)
    fit_s = time.perf_counter() - t_fit
    report["warnings"] = list(result.warnings)   # (what the fit printed of the data)
    after = store.load_fit(result.path)
    t = result.timings
    report["made_by"] = "refit"
    report["refit"] = {"fit_id": result.fit_id, "path": str(result.path),
                       "converged": result.converged, "failures": result.failures,
                       "divergences": result.divergences, "fit_s": fit_s, "timings": t}
    if text:
        status = "converged" if result.converged else "NOT CONVERGED (" + "; ".join(
            result.failures) + ")"
        print(f"fit {result.fit_id}: {status}; refit took {fit_s:.1f} s (compile "
              f"{t.get('compile_s', 0):.1f} s, sampling {t.get('sample_s', 0):.1f} s); update "
              f"total {time.perf_counter() - t_start:.1f} s")
    _finish(previous, after, tracked, seed, text, report, result.path, t_start, total_said=True)
    result.raise_if_unconverged()
    return 0

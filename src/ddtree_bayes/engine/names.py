"""Names a prediction asks for that the fit has never seen, with the closest known names.

A name is *known* when it was measured (it appears in the data stored in the fit) or is
declared: an engine with a relation in the priors file (``native = (1 - reduction) x
sglang``), a GPU in the hardware table, a method with an acceptance prior or a
``[methods]`` entry, ``ar`` or the default question's ``ddtree``. Anything else is most
likely a typo: ``predict --engine sglnag`` would otherwise answer silently from the pooled
population.
Standard library only (the predict path).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from ddtree_bayes.core.config import DEFAULT_QUESTION
from ddtree_bayes.core.data import AR_METHOD, as_name
from ddtree_bayes.core.errors import closest
from ddtree_bayes.core.pairs import split_label
from ddtree_bayes.engine.posterior import Fit

#: What a never-seen name means for the answer, per kind.
CONSEQUENCE = {
    "engine": "its speculative overhead is drawn from the pooled population (a wide interval)",
    "method": "its overhead is drawn from the pooled population and it has no acceptance prior",
    "model": "it cannot be predicted (a fit of several models predicts a model it never "
             "measured from its card)",
    "hardware": "it cannot be predicted (no measurement, no hardware-table row to transfer from)",
}
WHERE_DECLARED = {
    "engine": "measured, nor given a relation in the priors file",
    "method": "measured, nor given an acceptance prior in the priors file",
    "model": "measured, nor given a model card",
    "hardware": "measured, nor in the hardware table the fit stored",
}


@dataclass(frozen=True)
class UnknownName:
    """One name the fit has never seen: its kind, the flag it came from, the closest known
    names (best first) and every known name of that kind."""

    kind: str
    name: str
    suggestions: tuple[str, ...]
    known: tuple[str, ...]

    @property
    def flag(self) -> str:
        return f"--{self.kind}"

    def message(self, suggest: bool = True) -> str:
        """One line: what is unknown, what that means, and the closest known names (not with
        ``suggest`` False: the name is right, as a GPU added to the hardware table after the
        fit, and "did you mean rtx-5090" named GPUs nobody meant)."""
        hint = (f"did you mean {' or '.join(self.suggestions)}?" if self.suggestions
                else f"known: {', '.join(self.known) or 'none'}")
        return (f"{self.flag} {self.name!r} was never {WHERE_DECLARED[self.kind]}: "
                f"{CONSEQUENCE[self.kind]}" + (f"; {hint}" if suggest else ""))


def _columns(text: str, *columns: str) -> list[set[str]]:
    """The non-blank values of each of ``columns`` in the CSV ``text``, from one parse (all
    empty if it does not parse)."""
    out: list[set[str]] = [set() for _ in columns]
    try:
        for row in csv.DictReader(io.StringIO(text)):
            for values, column in zip(out, columns, strict=True):
                if row.get(column) and row[column].strip():
                    values.add(row[column].strip())
    except csv.Error:
        return [set() for _ in columns]
    return out


def _column(text: str, column: str) -> set[str]:
    return _columns(text, column)[0]


def _data_names(draws: Fit) -> list[set[str]]:
    """The engines, methods, models and hardware of the fit's measurements, and the GPUs of
    its hardware table: from its validated rows and table (parsed once per fit, and every
    answer reads them), else (a stored text this version no longer validates) from the texts'
    columns."""
    from ddtree_bayes.core.errors import InputError

    try:
        rows = draws.measurements.rows
        out = [{getattr(r, c) for r in rows} for c in ("engine", "method", "model", "hardware")]
    except InputError:
        out = _columns(draws.data_csv, "engine", "method", "model", "hardware")
    try:
        out[3] |= set(draws.hardware)
    except InputError:
        out[3] |= _column(draws.hardware_csv, "hardware")
    return out


def known_names(draws: Fit) -> dict[str, set[str]]:
    """Every name the fit knows, per kind (engine, method, model, hardware): computed once per
    fit (every question checks its names: ``report`` asks about 60), a copy each call."""
    if "known_names" not in draws.memo:
        draws.memo["known_names"] = _known_names(draws)
    return {kind: set(names) for kind, names in draws.memo["known_names"].items()}


def _known_names(draws: Fit) -> dict[str, set[str]]:
    meta = draws.meta
    relations = meta.get("model", {}).get("relation_bases", {}) or {}
    engines, methods, models, hardware = _data_names(draws)
    engines |= set(relations) | set(relations.values())
    engines |= {g.split("/")[1] for g in meta.get("coords", {}).get("overhead_group", [])
                if g.count("/") == 2}
    methods |= {AR_METHOD, DEFAULT_QUESTION.method}
    try:
        methods |= draws.priors.declared_names()["method"]   # acceptance priors, [methods]
    except Exception:  # noqa: BLE001 - names are advice; an odd priors text must not stop predict
        pass
    target = meta.get("model", {}).get("target_model")
    if target:
        models.add(str(target))
    models |= set(meta.get("model", {}).get("target_models") or ())
    models |= set(meta.get("model", {}).get("model_cards") or ())   # declared: a card
    hardware |= {split_label(s)[1] for s in meta.get("coords", {}).get("system", [])}
    return {"engine": engines, "method": methods, "model": models, "hardware": hardware}


def hardware_here(name: str) -> bool:
    """Is ``name`` in the hardware table here (built in, overlaid by ``data/hardware.csv``),
    though not in the one a fit stored (a GPU added after the fit)? False when the table here
    does not load (``fit`` names that problem)."""
    from ddtree_bayes.core.errors import InputError
    from ddtree_bayes.core.hardware_table import hardware_table

    try:
        return name in hardware_table().rows
    except (InputError, OSError):
        return False


def card_here(name: str) -> str | None:
    """Where the model cards here (the working directory's ``data/models.csv``, else the
    bundled cards) give ``name`` a card, as the user would type the path; None when they do
    not (or cannot be read). A fit stores the cards it was made with, so a card here that the
    fit lacks was written after it, or the fit (of one model) stores none."""
    from ddtree_bayes.core.paths import data_file, own_data_file, shown

    if name not in cards_here():
        return None
    path = data_file("models.csv")
    return shown(path) if own_data_file("models.csv") else "the bundled models.csv"


def cards_here() -> set[str]:
    """The names of the model cards here (the working directory's ``data/models.csv``, else
    the bundled cards); none when they cannot be read. Read as the card loader reads it
    (core/per_call.py: once per command; a byte-order mark tolerated)."""
    from ddtree_bayes.core import per_call
    from ddtree_bayes.core.paths import data_file

    try:
        return _column(per_call.read_text(data_file("models.csv"), encoding="utf-8-sig"),
                       "model")
    except (OSError, UnicodeDecodeError):
        return set()


def not_a_model_name(value: str, known: set[str] | frozenset[str] = frozenset()
                     ) -> tuple[str, str]:
    """(problem, fix) of a ``--model`` that is no name (:func:`~ddtree_bayes.core.data.
    not_a_name`): a Hugging Face repo id or a file path whose last part is, case aside, a
    card's name among ``known`` (a fit's models) or the cards here (the rule ``add
    --from-bench`` matches a file's model by, core/bench_import/identity.py) is told that card,
    not a slug no card has; a name that only needs lowercasing is told so.

    >>> not_a_model_name("meta-llama/Llama-3.1-8B-Instruct", {"llama-3.1-8b-instruct"})[1]
    "write its card's name: 'llama-3.1-8b-instruct'"
    """
    from ddtree_bayes.core.bench_import.identity import match_card
    from ddtree_bayes.core.data import NAME_RE, not_a_name

    problem, fix = not_a_name(value)
    if not NAME_RE.fullmatch(value.lower()):
        card = match_card(value, sorted({*known, *cards_here()}))
        if card is not None:
            fix = f"write its card's name: {card!r}"
    return problem, fix


def unknown_model_error(draws: Fit, u: UnknownName) -> tuple[str, str]:
    """The line and the fix for a ``--model`` the fit never measured nor stored a card of
    (``u``): what is true of it. A model with a card here is predicted only by a fit of
    several models that stores the card: the fit holds one model (needs a fit of several), or
    the card was written after the fit (re-run fit); else it is a misspelling or a model
    without a card."""
    from ddtree_bayes.engine.target_models import fit_models, is_multi

    where = card_here(u.name)
    fit_id = draws.meta.get("fit_id", "?")
    if where is not None and not is_multi(draws):
        return (f"--model {u.name!r} has a card in {where}, but fit {fit_id} holds one model "
                f"({', '.join(fit_models(draws)) or 'unnamed'}): a model it never measured needs a fit of "
                "several models (their measured pairs teach the roofline of the model cards)",
                f"drop --model, or fit a file holding {u.name} and other models")
    if where is not None:
        return (f"--model {u.name!r} has a card in {where}, but fit {fit_id} does not store "
                "it (the card was written after the fit): it cannot be predicted from this "
                "fit", f"re-run `ddtree-bayes fit` to predict {u.name} from its card")
    lower = as_name(u.name)
    if lower != u.name and lower in u.known:   # (as --hardware B300 is told)
        return u.message(), f"names are lowercase: write {lower!r}"
    return u.message(), "check the spelling"


def unknown_names(draws: Fit, *, engines: list[str] | tuple[str, ...] | None = None,
                  method: str | None = None, model: str | None = None,
                  hardware: str | None = None) -> list[UnknownName]:
    """The asked-for names the fit has never seen (in the order hardware, engine, method,
    model), each with its closest known names."""
    known = known_names(draws)
    asked = [("hardware", hardware), *(("engine", e) for e in engines or ()),
             ("method", method), ("model", model)]
    out = []
    for kind, value in asked:
        if value is None or value in known[kind]:
            continue
        out.append(UnknownName(kind, value, tuple(closest(value, known[kind])),
                               tuple(sorted(known[kind]))))
    return out

"""The remedy ladder: what a fit does by itself when it fails its convergence gates.

A fit samples once with the requested settings. When that attempt fails a gate (a
divergence, R-hat > 1.01 or bulk ESS < 400) it climbs this ladder, one rung at a time,
each rung keeping what the rungs below it changed, and stops at the first attempt that
passes every gate:

1. longer tuning: the tuning steps doubled (from 0: the default 1000), and the draws doubled
   too once any attempt has failed the ESS gate;
2. higher target acceptance: each of :data:`TARGET_ACCEPT_STEPS` above the current value in
   turn (smaller steps, fewer divergences; the rung is skipped when the value is already
   there);
3. a reparameterisation: the partially pooled group offsets, non-centred by default, drawn
   centred (``build_model(..., reparameterise=True)``), then, if that fails too, the
   per-system MoE shapes drawn centred as well (``centre_moe=True``); a step whose model
   would be the default one (no pooled offsets in the fraction form) is left out.

Every rung prints one line on stderr (``fit: 2 divergent transitions; remedy 1/3: tuning
1000 -> 2000``), and :func:`run` returns a record of every attempt for the artifact's
metadata. A rung starts from the settings the user asked for, so an explicit ``--tune`` or
``--target-accept`` still gets the ladder above it. Same seed on every rung. The documented
ladder is in docs/validation.md ("The remedy ladder").
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ddtree_bayes.core.config import SamplerSettings

#: Target acceptance values of rung 2, tried in order when above the current value.
TARGET_ACCEPT_STEPS = (0.995, 0.999)
#: Number of remedies (rungs); rungs 2 and 3 may take two attempts each.
REMEDIES = 3
#: Rung 3's parameterisations, in order ("default" is the model as it is always built).
PARAMETERISATIONS = ("offsets", "offsets+moe")
_CHANGE = {"offsets": "group offsets centred",
           "offsets+moe": "group offsets and the MoE shapes centred"}


@dataclass
class Attempt:
    """One sampling attempt: its settings, the draws and what :func:`inference.diagnose` said."""

    settings: SamplerSettings
    parameterisation: str  # "default" or one of PARAMETERISATIONS
    dt: Any
    timings: dict[str, float]
    backend: str
    diagnostics: list[dict]
    divergences: int
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class Rung:
    """A remedy to try: its number (1..3), kind, what it changes, and the settings it uses."""

    remedy: int
    kind: str  # "tuning" | "target_accept" | "reparameterise"
    change: str
    settings: SamplerSettings
    parameterisation: str


def ess_failed(failures: list[str]) -> bool:
    """Whether a failed gate is bulk ESS (the messages of :func:`inference.diagnose`)."""
    return any(f.startswith("min bulk ESS") for f in failures)


def rungs(requested: SamplerSettings, tried: list[Attempt],
          parameterisations: tuple[str, ...] = PARAMETERISATIONS) -> Iterator[Rung]:
    """The ladder above ``requested``. ``tried`` holds the attempts so far (the latest one's
    failures decide whether the draws are doubled); advance the generator once per failed
    attempt, after appending it. Rung 3 tries ``parameterisations`` in order."""
    s = requested
    draws_doubled = False

    def more_draws(s: SamplerSettings) -> tuple[SamplerSettings, str]:
        nonlocal draws_doubled
        if draws_doubled or not ess_failed(tried[-1].failures):
            return s, ""
        draws_doubled = True
        return (dataclasses.replace(s, draws=2 * s.n_draws),
                f", draws {s.n_draws} -> {2 * s.n_draws}")

    tune = 2 * s.tune if s.tune else SamplerSettings.tune
    s, draws = more_draws(dataclasses.replace(s, tune=tune))
    yield Rung(1, "tuning", f"tuning {requested.tune} -> {tune}{draws}", s, "default")
    for target in TARGET_ACCEPT_STEPS:
        if target <= s.target_accept:
            continue
        before = s.target_accept
        s, draws = more_draws(dataclasses.replace(s, target_accept=target))
        yield Rung(2, "target_accept", f"target acceptance {before:g} -> {target:g}{draws}", s,
                   "default")
    for parameterisation in parameterisations:
        s, draws = more_draws(s)
        yield Rung(3, "reparameterise", _CHANGE[parameterisation] + draws, s, parameterisation)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _entry(remedy: int, kind: str, change: str, attempt: Attempt) -> dict:
    s = attempt.settings
    return {"remedy": remedy, "kind": kind, "change": change,
            "settings": {"chains": s.chains, "draws": s.draws, "tune": s.tune,
                         "target_accept": s.target_accept},
            "parameterisation": attempt.parameterisation, "passed": attempt.passed,
            "divergences": attempt.divergences, "failures": list(attempt.failures),
            "compile_s": attempt.timings.get("compile_s", 0.0),
            "sample_s": attempt.timings.get("sample_s", 0.0)}


def run(attempt: Callable[[SamplerSettings, str], Attempt], requested: SamplerSettings, *,
        enabled: bool = True, say: Callable[[str], None] = _say,
        parameterisations: tuple[str, ...] | Callable[[], tuple[str, ...]] = PARAMETERISATIONS
        ) -> tuple[Attempt, dict]:
    """Sample with ``requested``; on failed gates climb the ladder (unless ``enabled`` is
    False). ``parameterisations`` are rung 3's (those that change the model: see
    :meth:`ModelSampler.parameterisations`; a callable is asked only once a fit has failed).
    Returns the attempt to keep (the first that passed, else the last tried) and the record
    for the artifact: ``outcome`` "passed" (at once), "remedied" or "failed", ``remedy`` (the
    rung that passed, or None) and ``attempts`` (every attempt in order)."""
    current = attempt(requested, "default")
    tried = [current]
    attempts = [_entry(0, "none", "the requested settings", current)]
    record: dict[str, Any] = {"enabled": enabled, "outcome": "passed", "remedy": None,
                              "attempts": attempts}
    if current.passed:
        return current, record
    if not enabled:
        record["outcome"] = "failed"
        say(f"fit: {'; '.join(current.failures)}; remedies off (--no-remedy)")
        return current, record
    if callable(parameterisations):
        parameterisations = parameterisations()
    skipped = {2: f"target acceptance already {requested.target_accept:g}"
               } if requested.target_accept >= max(TARGET_ACCEPT_STEPS) else {}
    if not parameterisations:
        skipped[3] = "no pooled offsets to reparameterise in this model"
    last_rung = 0

    def announce_skipped(before: int) -> None:
        for k in sorted(skipped):
            if last_rung < k < before:
                say(f"fit: remedy {k}/{REMEDIES} skipped: {skipped[k]}")

    for rung in rungs(requested, tried, parameterisations):
        announce_skipped(rung.remedy)
        say(f"fit: {'; '.join(current.failures)}; remedy {rung.remedy}/{REMEDIES}: {rung.change}")
        current = attempt(rung.settings, rung.parameterisation)
        last_rung = rung.remedy
        tried.append(current)
        attempts.append(_entry(rung.remedy, rung.kind, rung.change, current))
        if current.passed:
            record.update(outcome="remedied", remedy=rung.remedy)
            say(f"fit: remedy {rung.remedy}/{REMEDIES} passed the gates "
                f"({current.divergences} divergences)")
            return current, record
    record["outcome"] = "failed"
    announce_skipped(REMEDIES + 1)
    say(f"fit: still failing after remedy {last_rung}/{REMEDIES} ({'; '.join(current.failures)});"
        " the last attempt is saved, marked unconverged")
    return current, record


@dataclass
class ModelSampler:
    """Samples one model (built on demand per parameterisation, compiled once each) and
    diagnoses the draws: the ``attempt`` of :func:`run` for a real fit."""

    build: Callable[[str], Any]  # parameterisation -> pm.Model
    seed: int
    progress: bool = True
    models: dict[str, Any] = field(default_factory=dict)
    caches: dict[str, dict] = field(default_factory=dict)

    def model(self, parameterisation: str = "default"):
        if parameterisation not in self.models:
            self.models[parameterisation] = self.build(parameterisation)
            self.caches[parameterisation] = {}
        return self.models[parameterisation]

    def parameterisations(self) -> tuple[str, ...]:
        """Rung 3's parameterisations whose free variables differ from every one before
        them (the fraction form has no pooled group offsets: "offsets" is the default)."""
        seen = [_free_names(self.model("default"))]
        out = []
        for p in PARAMETERISATIONS:
            names = _free_names(self.model(p))
            if names not in seen:
                out.append(p)
                seen.append(names)
        return tuple(out)

    def __call__(self, settings: SamplerSettings, parameterisation: str) -> Attempt:
        from ddtree_bayes.engine import inference

        model = self.model(parameterisation)
        dt, timings, backend = inference.sample(model, settings, self.seed, self.progress,
                                                cache=self.caches[parameterisation])
        t0 = time.perf_counter()
        inference.log(self.progress, "diagnosing: R-hat, ESS, divergences")
        rows, divergences, failures = inference.diagnose(dt["posterior"].to_dataset(),
                                                         dt["sample_stats"].to_dataset())
        timings["diagnose_s"] = time.perf_counter() - t0
        return Attempt(settings, parameterisation, dt, timings, backend, rows, divergences,
                       failures)


def _free_names(model) -> frozenset[str]:
    return frozenset(rv.name for rv in model.free_RVs)


def free_size(model) -> int:
    """Number of elements of the model's free random variables (from their dims; a
    zero-sum variable counts its constrained element too): what
    :meth:`~ddtree_bayes.core.config.SamplerSettings.for_model` sizes the draws by."""
    import math

    total = 0
    for rv in model.free_RVs:
        dims = model.named_vars_to_dims.get(rv.name)
        if dims:
            total += math.prod(len(model.coords[d]) for d in dims)
        elif None not in rv.type.shape:
            total += math.prod(rv.type.shape)
        else:   # (no variable of build_model's; kept exact for any other model)
            total += int(model.initial_point()[model.rvs_to_values[rv].name].size)
    return total


def builder(spec, priors) -> Callable[[str], Any]:
    """``ModelSampler.build`` for a spec and priors: parameterisation -> the PyMC model."""
    from ddtree_bayes.engine.model import build_model

    return lambda p: build_model(spec, priors, reparameterise=p != "default",
                                 centre_moe=p == "offsets+moe")
